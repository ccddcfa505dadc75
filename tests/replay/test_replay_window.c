/*
 * test_replay_window: the load of a job's traces against itself (test_replay_window.py
 * writes the jobs and says what to expect).
 *
 *   1. threads: job_load with 1 thread and with 4 loads the same events, rank by rank
 *      (byte for byte), the same warnings in the same order, the same counts and window;
 *      folding while read, the same ranks folded, each held compact after the load
 *      (job_rank.wire, no expanded events) and expanded to the same events;
 *   2. the window: replay_open comparing ITERATIONS iterations (warm-up WARMUP, -1:
 *      detected) from the window alone and from every event gives the same figures,
 *      bit for bit: iterations compared and their numbers, measured and simulated
 *      iteration times, breakdowns, stragglers, clock offsets, the critical path;
 *      and the window was taken (EXPECT 1: fewer events loaded than the files hold) or
 *      not (EXPECT 0: every event);
 *   3. the release: the events reduced to markers and memory events once the graph is
 *      built (replay_options.release_events, as dpro-replay does) give the same figures,
 *      critical path, typical replay and Chrome export as every event kept;
 *   4. the exact timeline released once summarized (replay_release_timeline): the same
 *      iteration times, unsimulated count and typical replay as the timeline kept;
 *   5. the window from the trace's start (replay_options.window_from_start, as
 *      dpro-optimize loads): where the traces hold allocations it starts at the trace's
 *      start (no iteration skipped, every allocation before the compared iterations
 *      loaded), else it is the window of part 2; either gives part 2's figures.
 *
 * usage: test_replay_window DIR ITERATIONS WARMUP EXPECT
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/chrome.h"
#include "replay/job.h"
#include "replay/replay.h"
#include "tests/unit/testutil.h"

/* Part 1: the same load for 1 and 4 threads (o gives the rest of the options). */
static void
check_threads(const char *dir, job_options o)
{
    job a, b;
    char err[DPRO_ERRBUF_SIZE];
    o.jobs = 1;
    int ra = job_load(dir, &o, &a, err, sizeof err);
    o.jobs = 4;
    int rb = job_load(dir, &o, &b, err, sizeof err);
    CHECK_EQ(ra, 0);
    CHECK_EQ(rb, 0);
    if (ra != 0 || rb != 0)
        return;
    CHECK_EQ(a.n_ranks, b.n_ranks);
    CHECK_EQ(a.n_present, b.n_present);
    CHECK_EQ(a.iter_skipped, b.iter_skipped);
    CHECK_EQ(a.window_warmup, b.window_warmup);
    CHECK_EQ_U(a.events_loaded, b.events_loaded);
    CHECK_EQ_U(a.events_in_files, b.events_in_files);
    CHECK_EQ(a.n_folded, b.n_folded);
    for (int32_t r = 0; r < a.n_ranks && r < b.n_ranks; r++) {
        job_rank *x = &a.ranks[r], *y = &b.ranks[r];
        CHECK_EQ(!x->reader, !y->reader);
        CHECK_EQ(x->folded, y->folded);
        if (x->folded) /* its reduced events compact until a pass expands them */
            CHECK(x->wire && !x->events && y->wire && !y->events);
        CHECK(job_rank_expand(x) == 0 && job_rank_expand(y) == 0);
        CHECK_EQ_U(x->n_events, y->n_events);
        CHECK_EQ_U(x->bad_batches, y->bad_batches);
        CHECK_EQ_U(x->dropped, y->dropped);
        if (x->n_events == y->n_events && x->n_events > 0 && x->events && y->events)
            CHECK(memcmp(x->events, y->events, x->n_events * sizeof *x->events) == 0);
    }
    CHECK_EQ_U(a.n_diag, b.n_diag);
    for (size_t i = 0; i < a.n_diag && i < b.n_diag; i++)
        CHECK(strcmp(a.diag[i], b.diag[i]) == 0);
    if (o.fold)
        printf("%s: %d of %d ranks folded while read\n", dir, a.n_folded, a.n_present);
    job_free(&a);
    job_free(&b);
}

static void
check_bd(const sim_breakdown *a, const sim_breakdown *b)
{
    CHECK_EQ(a->window, b->window);
    CHECK_EQ(a->compute, b->compute);
    CHECK_EQ(a->communication, b->communication);
    CHECK_EQ(a->overlap, b->overlap);
    CHECK_EQ(a->wait_ranks, b->wait_ranks);
    CHECK_EQ(a->host_idle, b->host_idle);
}

/* Exact equality of two doubles, told with their values when they differ. */
#define CHECK_SAME(a, b)                                                                           \
    do {                                                                                           \
        double x_ = (a), y_ = (b);                                                                 \
        if (x_ != y_)                                                                              \
            fprintf(stderr, "%s: %.17g != %.17g\n", #a, x_, y_);                                   \
        CHECK(x_ == y_);                                                                           \
    } while (0)

/* Replays dir as opts say into *rp and *s. Returns 0 or -1. */
static int
replay_summary_of(const char *dir, const replay_options *opts, replay *rp, replay_summary *s)
{
    char err[DPRO_ERRBUF_SIZE];
    if (replay_open(dir, opts, rp, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", dir, err);
        return -1;
    }
    if (replay_simulate(rp) != 0 || replay_summarize(rp, &rp->graph, &rp->sim, s) != 0) {
        replay_close(rp);
        return -1;
    }
    return 0;
}

/* The figures of two replays of one job (w, sw and f, sf) are the same. */
static void
check_same_summary(const replay *w, const replay_summary *sw, const replay *f,
                   const replay_summary *sf)
{
    CHECK_EQ(sw->n_ranks, sf->n_ranks);
    CHECK_EQ(sw->iterations, sf->iterations);
    CHECK_EQ(sw->first_iteration, sf->first_iteration);
    CHECK_SAME(sw->measured_us, sf->measured_us);
    CHECK_SAME(sw->simulated_us, sf->simulated_us);
    CHECK_SAME(sw->error_pct, sf->error_pct);
    check_bd(&sw->measured_bd, &sf->measured_bd);
    check_bd(&sw->simulated_bd, &sf->simulated_bd);
    CHECK_EQ(sw->unfinished, sf->unfinished);
    for (int32_t r = 0; r < sw->n_ranks && r < sf->n_ranks; r++) {
        const replay_rank_summary *a = &sw->rank[r], *b = &sf->rank[r];
        CHECK_EQ(a->present, b->present);
        CHECK_SAME(a->measured_us, b->measured_us);
        CHECK_SAME(a->simulated_us, b->simulated_us);
        CHECK_SAME(a->straggler_blame_us, b->straggler_blame_us);
        CHECK_EQ(a->last_arrivals, b->last_arrivals);
        CHECK_SAME(a->clock_offset_us, b->clock_offset_us);
        CHECK_EQ(a->clock_aligned, b->clock_aligned);
        check_bd(&a->measured_bd, &b->measured_bd);
        check_bd(&a->simulated_bd, &b->simulated_bd);
    }
    CHECK_EQ(sw->n_cp, sf->n_cp);
    CHECK_EQ(sw->cp_length_ns, sf->cp_length_ns);
    CHECK_EQ(sw->cp_rank, sf->cp_rank);
    for (int c = 0; c < REPLAY_CP_NCLASSES; c++)
        CHECK_EQ(sw->cp_class_ns[c], sf->cp_class_ns[c]);
    for (int32_t i = 0; i < sw->n_cp && i < sf->n_cp; i++) {
        CHECK_EQ(sw->cp[i].cls, sf->cp[i].cls);
        CHECK(!sw->cp[i].op == !sf->cp[i].op &&
              (!sw->cp[i].op || strcmp(sw->cp[i].op, sf->cp[i].op) == 0));
        CHECK(strcmp(dfg_name(&w->graph, sw->cp[i].name), dfg_name(&f->graph, sf->cp[i].name)) ==
              0);
        CHECK_EQ(sw->cp[i].kind, sf->cp[i].kind);
        CHECK_EQ(sw->cp[i].total_ns, sf->cp[i].total_ns);
        CHECK_EQ(sw->cp[i].count, sf->cp[i].count);
    }
}

/* Part 2: the window's figures against every event's. */
static void
check_window(const char *dir, const replay_options *ro, int expect)
{
    replay w, f;
    replay_summary sw, sf;
    replay_options full = *ro;
    full.full_load = 1;
    int rw = replay_summary_of(dir, ro, &w, &sw);
    int rf = replay_summary_of(dir, &full, &f, &sf);
    CHECK_EQ(rw, 0);
    CHECK_EQ(rf, 0);
    if (rw != 0 || rf != 0)
        return;
    int windowed = w.job.events_loaded < w.job.events_in_files;
    if (windowed != expect)
        fprintf(stderr, "%s: window %s (%llu of %llu events)\n", dir,
                windowed ? "taken" : "not taken", (unsigned long long)w.job.events_loaded,
                (unsigned long long)w.job.events_in_files);
    CHECK_EQ(windowed, expect);
    CHECK_EQ(w.job.window_warmup >= 0, expect);
    CHECK_EQ_U(f.job.events_loaded, f.job.events_in_files);
    check_same_summary(&w, &sw, &f, &sf);
    replay_summary_free(&sw);
    replay_summary_free(&sf);
    replay_close(&w);
    replay_close(&f);
}

/* The Chrome export of rp's simulated timeline (summary s), in a malloc'd string
 * (*len bytes), or NULL. */
static char *
chrome_text(const replay *rp, const replay_summary *s, size_t *len)
{
    char *text = NULL;
    FILE *f = open_memstream(&text, len);
    if (!f)
        return NULL;
    chrome_options co = {1, -1, -1, s};
    int rc = chrome_export(rp, &rp->graph, &rp->sim, &co, f);
    fclose(f);
    if (rc != 0) {
        free(text);
        text = NULL;
    }
    return text;
}

/* Part 4: r's exact timeline released (replay_release_timeline, as dpro-replay does before
 * the typical replay) changes none of what the report reads afterwards: every compared
 * iteration's times, the unsimulated count, the typical replay (tk: k's, k unreleased). */
static void
check_release_timeline(replay *r, const replay *k, const replay_typical *tk)
{
    CHECK_EQ(replay_release_timeline(r), 0);
    CHECK(r->sim.end == NULL && r->sim.start == NULL && r->simulated);
    CHECK_EQ(r->sim.n_unfinished, k->sim.n_unfinished);
    int32_t times = 0;
    for (int32_t q = 0; q < k->graph.n_ranks; q++)
        for (int32_t i = k->iter_first; i <= k->iter_last + 1; i++) {
            int64_t a[4] = {0}, b[4] = {0};
            int ra = replay_iteration_times(r, q, i, &a[0], &a[1], &a[2], &a[3]);
            int rb = replay_iteration_times(k, q, i, &b[0], &b[1], &b[2], &b[3]);
            CHECK_EQ(ra, rb);
            CHECK(memcmp(a, b, sizeof a) == 0);
            times += rb == 0;
        }
    CHECK(times > 0);
    replay_typical tr;
    CHECK_EQ(replay_typical_replay(r, &tr), 0);
    CHECK_EQ(tr.nodes, tk->nodes);
    CHECK_EQ(tr.matched, tk->matched);
    CHECK_SAME(tr.predicted_us, tk->predicted_us);
    CHECK_SAME(tr.mean_predicted_us, tk->mean_predicted_us);
    CHECK_SAME(tr.error_pct, tk->error_pct);
}

/* Part 3: the events released once the graph is built (replay_options.release_events)
 * change nothing that is read afterwards: the summary with its critical path, the typical
 * replay, the Chrome export; the released ranks keep only markers and memory events. */
static void
check_release(const char *dir, const replay_options *ro)
{
    replay r, k;
    replay_summary sr, sk;
    replay_options rel = *ro, keep = *ro;
    rel.release_events = 1;
    keep.release_events = 0;
    int rr = replay_summary_of(dir, &rel, &r, &sr);
    int rk = replay_summary_of(dir, &keep, &k, &sk);
    CHECK_EQ(rr, 0);
    CHECK_EQ(rk, 0);
    if (rr != 0 || rk != 0)
        return;
    size_t kept = 0, all = 0;
    for (int32_t q = 0; q < r.job.n_ranks; q++) {
        for (size_t i = 0; i < r.job.ranks[q].n_events; i++) {
            uint32_t kind = r.job.ranks[q].events[i].kind;
            CHECK(kind == DPRO_KIND_MARKER || kind == DPRO_KIND_MEMORY);
        }
        kept += r.job.ranks[q].n_events;
        all += k.job.ranks[q].n_events;
    }
    CHECK(kept < all);
    check_same_summary(&r, &sr, &k, &sk);
    replay_typical tr, tk;
    CHECK_EQ(replay_typical_replay(&r, &tr), 0);
    CHECK_EQ(replay_typical_replay(&k, &tk), 0);
    CHECK_EQ(tr.nodes, tk.nodes);
    CHECK_EQ(tr.matched, tk.matched);
    CHECK_SAME(tr.predicted_us, tk.predicted_us);
    CHECK_SAME(tr.mean_predicted_us, tk.mean_predicted_us);
    size_t lr = 0, lk = 0;
    char *cr = chrome_text(&r, &sr, &lr), *ck = chrome_text(&k, &sk, &lk);
    CHECK(cr && ck && lr == lk && memcmp(cr, ck, lr) == 0);
    free(cr);
    free(ck);
    check_release_timeline(&r, &k, &tk);
    replay_summary_free(&sr);
    replay_summary_free(&sk);
    replay_close(&r);
    replay_close(&k);
}

/* Allocations and frees (DPRO_KIND_MEMORY) among rp's loaded events. */
static size_t
count_allocations(const replay *rp)
{
    size_t n = 0;
    for (int32_t q = 0; q < rp->job.n_ranks; q++)
        for (size_t i = 0; i < rp->job.ranks[q].n_events; i++)
            n += rp->job.ranks[q].events[i].kind == DPRO_KIND_MEMORY;
    return n;
}

/* Part 5: the window from the trace's start against part 2's window and every event. */
static void
check_from_start(const char *dir, const replay_options *ro, int expect)
{
    replay s, w, f;
    replay_summary ss, sw, sf;
    replay_options start = *ro, full = *ro;
    start.window_from_start = 1;
    full.full_load = 1;
    int rs = replay_summary_of(dir, &start, &s, &ss);
    int rw = replay_summary_of(dir, ro, &w, &sw);
    int rf = replay_summary_of(dir, &full, &f, &sf);
    CHECK_EQ(rs, 0);
    CHECK_EQ(rw, 0);
    CHECK_EQ(rf, 0);
    if (rs != 0 || rw != 0 || rf != 0)
        return;
    size_t allocs = count_allocations(&f);
    if (allocs > 0 && expect) { /* from the start: every allocation up to the window's end */
        CHECK_EQ(s.job.iter_skipped, 0);
        CHECK(s.job.events_loaded > w.job.events_loaded || w.job.iter_skipped == 0);
        CHECK(count_allocations(&s) >= count_allocations(&w));
    } else { /* part 2's window */
        CHECK_EQ(s.job.iter_skipped, w.job.iter_skipped);
        CHECK_EQ_U(s.job.events_loaded, w.job.events_loaded);
    }
    check_same_summary(&s, &ss, &f, &sf);
    printf("%s: window from the start: %zu allocations in the traces, %llu events loaded "
           "(part 2's window: %llu)\n",
           dir, allocs, (unsigned long long)s.job.events_loaded,
           (unsigned long long)w.job.events_loaded);
    replay_summary_free(&ss);
    replay_summary_free(&sw);
    replay_summary_free(&sf);
    replay_close(&s);
    replay_close(&w);
    replay_close(&f);
}

int
main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: test_replay_window DIR ITERATIONS WARMUP EXPECT\n");
        return 2;
    }
    const char *dir = argv[1];
    replay_options ro = {0};
    ro.iterations = atoi(argv[2]);
    ro.warmup = atoi(argv[3]);
    int expect = atoi(argv[4]);
    job_options whole = {0}, window = {.iterations = ro.iterations, .warmup = ro.warmup};
    check_threads(dir, whole);
    check_threads(dir, window);
    check_threads(dir, (job_options){.fold = 1});
    check_window(dir, &ro, expect);
    check_release(dir, &ro);
    check_from_start(dir, &ro, expect);
    printf("%s -n %d -w %d: %d passed, %d failed\n", dir, ro.iterations, ro.warmup, tests_passed,
           tests_failed);
    return tests_failed ? 1 : 0;
}
