/* replay.c: the replay pipeline (see replay.h). */
#define PR_FMT "replay"
#include "replay.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build.h"
#include "build_int.h"
#include "dpro_log.h"
#include "hmap.h"
#include "ncclname.h"
#include "period.h"

/* ---- iterations ------------------------------------------------------------------------ */

void
replay_rank_iters_free(replay_rank_iters *it)
{
    free(it->event_index);
    free(it->start_ns);
    free(it->step);
    memset(it, 0, sizeof *it);
}

static int
push_index(replay_rank_iters *it, size_t *cap, size_t idx)
{
    if ((size_t)it->n == *cap) {
        size_t c = *cap ? *cap * 2 : 64;
        size_t *p = realloc(it->event_index, c * sizeof *p);
        if (!p)
            return -1;
        it->event_index = p;
        *cap = c;
    }
    it->event_index[it->n++] = idx;
    return 0;
}

/* Ranks whose iterations come from the kernel period are cut at one phase where they
 * launch one periodic sequence (period_match): each rank's own idlest phase may differ
 * (a rank that waits for the others idles elsewhere), and then iteration k would not be
 * the same work on every rank. Ranks whose boundaries the load found (job_rank.bounds:
 * the same cut, agreed while reading) are cut already. Returns 0 or -1 (out of memory). */
static int
match_period_phases(job *j, replay_rank_iters *iters)
{
    int32_t n = j->n_ranks;
    period_scan *ps = calloc((size_t)n + 1, sizeof *ps);
    int rc = ps ? 0 : -1;
    for (int32_t r = 0; r < n && rc == 0; r++)
        if (j->ranks[r].reader && iters[r].method == ITER_PERIOD && !j->ranks[r].bounds) {
            rc = job_rank_expand(&j->ranks[r]) == 0 && period_scan_rank(&j->ranks[r], &ps[r]) == 0
                     ? period_scan_trim(&ps[r])
                     : -1;
            job_rank_compact(&j->ranks[r]);
        }
    if (rc == 0)
        rc = period_match(j, ps, iters);
    for (int32_t r = 0; ps && r < n; r++)
        period_scan_free(&ps[r]);
    free(ps);
    return rc;
}

/* Iteration markers (iter.h): each boundary, the end of a marker, gets the step it closes
 * (it->step). The first marker of several only opens the iterations (the first step of a
 * profiler's window is not a steady one: the launch queue is still filling); a marker
 * alone is one iteration, opened by the first host call inside it on its thread (a
 * profiler's window starts with its step: no call comes before), which closes the step
 * before. Returns 0 or -1 (out of memory). */
static int
open_first_step(const job_rank *jr, replay_rank_iters *it, uint32_t thread)
{
    const job_event *m = &jr->events[it->event_index[0]];
    size_t open = jr->n_events;
    for (size_t i = 0; it->n == 1 && i < jr->n_events; i++) {
        const job_event *e = &jr->events[i];
        if (e->kind == DPRO_KIND_API && e->thread == thread && e->start_ns >= m->start_ns &&
            e->end_ns <= m->end_ns &&
            (open == jr->n_events || e->start_ns < jr->events[open].start_ns))
            open = i;
    }
    size_t n = (size_t)it->n + (open < jr->n_events);
    size_t *idx = malloc(n * sizeof *idx);
    int64_t *step = malloc(n * sizeof *step);
    if (!idx || !step) {
        free(idx);
        free(step);
        return -1;
    }
    size_t k = 0;
    if (open < jr->n_events) {
        idx[k] = open;
        step[k++] = m->value - 1;
    }
    for (int32_t j = 0; j < it->n; j++) {
        idx[k] = it->event_index[j];
        step[k++] = jr->events[it->event_index[j]].value;
    }
    free(it->event_index);
    it->event_index = idx;
    it->step = step;
    it->n = (int32_t)n;
    return 0;
}

/* When every rank's iterations are numbered steps, keeps those of the steps all ranks
 * measure, so that iteration k is one step on every rank (a file that starts a step
 * later, or ends one earlier, than the others). */
static void
match_steps(job *j, replay_rank_iters *iters)
{
    int64_t **steps = calloc((size_t)j->n_ranks + 1, sizeof *steps);
    int32_t *n = calloc((size_t)j->n_ranks + 1, sizeof *n);
    int all = steps && n;
    for (int32_t r = 0; all && r < j->n_ranks; r++) {
        if (!j->ranks[r].reader)
            continue;
        all = iters[r].method == ITER_MARKER && iters[r].step;
        steps[r] = iters[r].step;
        n[r] = iters[r].n;
    }
    int64_t lo, hi;
    if (all && iter_common_steps(steps, n, j->n_ranks, &lo, &hi) == 0)
        for (int32_t r = 0; r < j->n_ranks; r++)
            if (j->ranks[r].reader)
                iters[r].n = (int32_t)iter_keep_steps(iters[r].event_index, iters[r].step,
                                                      (size_t)iters[r].n, lo, hi);
    free(steps);
    free(n);
}

int
replay_detect_iterations(const job_rank *jr, replay_rank_iters *it)
{
    memset(it, 0, sizeof *it);
    size_t n_iter_markers = 0;
    int32_t key_count[8] = {0};
    for (size_t i = 0; i < jr->n_events; i++) {
        const job_event *e = &jr->events[i];
        if (e->kind != DPRO_KIND_MARKER)
            continue;
        if (e->subkind == DPRO_MARK_ITERATION) {
            n_iter_markers++;
        } else if (e->subkind == DPRO_MARK_RANGE || e->subkind == DPRO_MARK_CPU_OP) {
            int key = 0;
            if (iter_text_is_iteration(dpro_reader_string(jr->reader, e->name), &key) && key >= 0 &&
                key < 8)
                key_count[key]++;
        }
    }
    int best_key = -1;
    for (int k = 0; k < 8; k++)
        if (key_count[k] >= 2 && (best_key < 0 || key_count[k] > key_count[best_key]))
            best_key = k;
    size_t cap = 0;
    if (n_iter_markers >= 1 || best_key >= 0) {
        /* the thread carrying most of them */
        hmap cnt;
        if (hmap_init(&cnt, 8) != 0)
            return -1;
        uint32_t best_thread = 0;
        int32_t best = 0;
        for (size_t i = 0; i < jr->n_events; i++) {
            const job_event *e = &jr->events[i];
            int key = 0;
            int take =
                e->kind == DPRO_KIND_MARKER &&
                (n_iter_markers >= 1
                     ? e->subkind == DPRO_MARK_ITERATION
                     : ((e->subkind == DPRO_MARK_RANGE || e->subkind == DPRO_MARK_CPU_OP) &&
                        iter_text_is_iteration(dpro_reader_string(jr->reader, e->name), &key) &&
                        key == best_key));
            if (!take)
                continue;
            int32_t c = hmap_get(&cnt, e->thread, 0) + 1;
            hmap_put(&cnt, e->thread, c);
            if (c > best) {
                best = c;
                best_thread = e->thread;
            }
        }
        hmap_free(&cnt);
        uint64_t last_start = 0;
        for (size_t i = 0; i < jr->n_events; i++) {
            const job_event *e = &jr->events[i];
            int key = 0;
            int take =
                e->kind == DPRO_KIND_MARKER && e->thread == best_thread &&
                (n_iter_markers >= 1
                     ? e->subkind == DPRO_MARK_ITERATION
                     : ((e->subkind == DPRO_MARK_RANGE || e->subkind == DPRO_MARK_CPU_OP) &&
                        iter_text_is_iteration(dpro_reader_string(jr->reader, e->name), &key) &&
                        key == best_key));
            if (!take || (it->n > 0 && e->start_ns == last_start) || e->end_ns <= e->start_ns)
                continue;
            if (push_index(it, &cap, i) != 0)
                return -1;
            last_start = e->start_ns;
        }
        it->method = n_iter_markers >= 1 ? ITER_MARKER : ITER_RANGE;
        if (it->method == ITER_MARKER && it->n > 0 && open_first_step(jr, it, best_thread) != 0)
            return -1;
    } else if (period_detect(jr, it) != 0) {
        return -1;
    }
    return 0;
}

int
replay_rank_iterations(const job_rank *jr, replay_rank_iters *it)
{
    int rc = 0;
    if (!jr->bounds)
        return replay_detect_iterations(jr, it);
    memset(it, 0, sizeof *it);
    it->event_index =
        malloc((size_t)(jr->n_bounds > 0 ? jr->n_bounds : 1) * sizeof *it->event_index);
    if (!it->event_index)
        rc = -1;
    for (int32_t k = 0; rc == 0 && k < jr->n_bounds; k++)
        it->event_index[k] = jr->bounds[k];
    if (rc == 0) {
        it->n = jr->n_bounds;
        it->method = ITER_PERIOD;
        it->period = jr->period;
    }
    return rc;
}

/* Every present rank's iterations into iters: those another process took where the
 * rank was read (job_rank.iters, taken over) when no load's cut placed them here, else
 * taken here from its events (replay_rank_iterations). Returns 0 or -1 (out of memory). */
static int
take_iterations(job *j, replay_rank_iters *iters)
{
    int rc = 0;
    int32_t received = 0;
    for (int32_t r = 0; rc == 0 && r < j->n_ranks; r++) {
        job_rank *jr = &j->ranks[r];
        if (!jr->reader)
            continue;
        if (jr->iters && !jr->bounds) {
            iters[r] = *jr->iters;
            free(jr->iters);
            jr->iters = NULL;
            received++;
        } else if (job_rank_expand(jr) != 0 || replay_rank_iterations(jr, &iters[r]) != 0) {
            rc = -1;
        }
        job_rank_compact(jr);
    }
    if (rc == 0 && received > 0)
        pr_info("iterations: those of %d of the %d present ranks found where they were read",
                received, j->n_present);
    return rc;
}

/* ---- alignment --------------------------------------------------------------------------- */

/* Grows the sample array to hold one more. Returns 0 or -1. */
static int
push_sample(align_sample **s, size_t *n, size_t *cap, align_sample v)
{
    if (*n == *cap) {
        align_sample *x = realloc(*s, *cap * 2 * sizeof **s);
        if (!x)
            return -1;
        *s = x;
        *cap *= 2;
    }
    (*s)[(*n)++] = v;
    return 0;
}

int
replay_rank_align_samples(const job_rank *jr, int32_t r, job_align_part *out)
{
    size_t cap = 64;
    build_p2p p2p = {0};
    hmap dev_end;
    int have_p2p = 0, have_map = 0;
    *out = (job_align_part){.s = malloc(cap * sizeof *out->s)};
    int rc = out->s ? 0 : -1;
    if (rc == 0 && (rc = build_p2p_scan(jr, r, &p2p)) == 0)
        have_p2p = 1;
    for (size_t k = 0; rc == 0 && k < p2p.n; k++) {
        const build_p2p_part *x = &p2p.part[k];
        if (x->device < 0 || x->n_sharing != 1 || x->src == x->dst)
            continue;
        align_sample v = {build_p2p_channel(x->comm, x->src, x->dst), x->ordinal, r,
                          (int64_t)jr->events[x->device].end_ns};
        rc = push_sample(&out->s, &out->n, &cap, v);
        out->from_dev++;
    }
    if (rc == 0 && (rc = hmap_init(&dev_end, jr->n_events / 4 + 16)) == 0)
        have_map = 1;
    for (size_t i = 0; rc == 0 && i < jr->n_events; i++) {
        const job_event *e = &jr->events[i];
        if ((e->kind == DPRO_KIND_KERNEL || e->kind == DPRO_KIND_MEMCPY ||
             e->kind == DPRO_KIND_MEMSET) &&
            e->correlation && hmap_get(&dev_end, e->correlation, -1) < 0)
            hmap_put(&dev_end, e->correlation, (int32_t)i);
    }
    for (size_t i = 0; rc == 0 && i < jr->n_events; i++) {
        const job_event *e = &jr->events[i];
        if (e->kind != DPRO_KIND_COLLECTIVE || e->subkind == DPRO_COLL_SEND ||
            e->subkind == DPRO_COLL_RECV)
            continue;
        int32_t d = e->correlation ? hmap_get(&dev_end, e->correlation, -1) : -1;
        align_sample v = {e->comm, build_coll_seq(&p2p, e), r,
                          d >= 0 ? (int64_t)jr->events[d].end_ns : (int64_t)e->end_ns};
        rc = push_sample(&out->s, &out->n, &cap, v);
        out->from_dev += d >= 0;
        out->from_host += d < 0;
    }
    if (have_map)
        hmap_free(&dev_end);
    if (have_p2p)
        build_p2p_free(&p2p);
    if (rc != 0) {
        free(out->s);
        *out = (job_align_part){0};
    }
    return rc;
}

/* Clock alignment (align.h) from every present rank's samples in rank order: those
 * another process took where the rank was read (job_rank.align), or taken here from the
 * rank's events (replay_rank_align_samples, held in job_rank.align until aligned), each
 * freed once the offsets are known. */
static int
align_job(replay *rp)
{
    job *j = &rp->job;
    size_t n = 0;
    const align_sample **parts = calloc((size_t)j->n_ranks + 1, sizeof *parts);
    size_t *counts = calloc((size_t)j->n_ranks + 1, sizeof *counts);
    uint8_t *present = calloc((size_t)j->n_ranks + 1, 1);
    int rc = parts && counts && present ? 0 : -1, from_host = 0, from_dev = 0, received = 0;
    for (int32_t r = 0; rc == 0 && r < j->n_ranks; r++) {
        job_rank *jr = &j->ranks[r];
        if (!jr->reader)
            continue;
        present[r] = 1;
        received += jr->align != NULL;
        if (!jr->align &&
            (!(jr->align = calloc(1, sizeof *jr->align)) || job_rank_expand(jr) != 0 ||
             replay_rank_align_samples(jr, r, jr->align) != 0))
            rc = -1;
        job_rank_compact(jr);
        if (rc == 0) {
            parts[r] = jr->align->s;
            counts[r] = jr->align->n;
            n += jr->align->n;
            from_dev += jr->align->from_dev;
            from_host += jr->align->from_host;
        }
    }
    if (rc == 0 && received > 0)
        pr_info("clock alignment: the samples of %d of the %d present ranks taken where they "
                "were read (%zu samples in all)",
                received, j->n_present, n);
    rp->align_source = n == 0 ? 0 : from_host > from_dev ? 2 : 1;
    if (rc == 0 && align_clocks_from_parts(parts, counts, (size_t)j->n_ranks, j->n_ranks, present,
                                           &rp->align) != 0)
        rc = -1;
    for (int32_t r = 0; r < j->n_ranks; r++) {
        job_align_part_free(j->ranks[r].align);
        j->ranks[r].align = NULL;
    }
    if (rc == 0 && j->n_present > 1) {
        if (n == 0)
            job_warn(j, "no collectives or send/recv in the traces: clocks cannot be aligned "
                        "across ranks; they are taken as they are (right only for ranks on "
                        "one host)");
        else if (rp->align_source == 2)
            job_warn(j, "collectives have no device records: clock offsets come from host "
                        "call ends and are approximate");
        for (int32_t r = 0; r < j->n_ranks && n > 0; r++)
            if (present[r] && !rp->align.aligned[r])
                job_warn(j,
                         "rank %d shares no collective or send/recv with the other ranks: "
                         "its clock offset is unknown and left at 0",
                         r);
    }
    free(parts);
    free(counts);
    free(present);
    return rc;
}

/* ---- open / close ------------------------------------------------------------------------- */

void
replay_close(replay *rp)
{
    if (rp->iters)
        for (int32_t r = 0; r < rp->job.n_ranks; r++)
            replay_rank_iters_free(&rp->iters[r]);
    free(rp->iters);
    align_result_free(&rp->align);
    dfg_free(&rp->graph);
    sim_result_free(&rp->sim);
    free(rp->kept_node);
    free(rp->kept_end);
    job_free(&rp->job);
    memset(rp, 0, sizeof *rp);
}

void
replay_take_graph(replay *rp, dfg *g)
{
    *g = rp->graph;
    memset(&rp->graph, 0, sizeof rp->graph);
}

/* The algorithm the kernel of group q's first participant names (ncclname.h), when it
 * names q's operation; else 0. */
static int
group_algo(const dfg *g, int32_t q)
{
    ncclname nn;
    int32_t n = g->grp_first[q];
    if (n < 0 || ncclname_parse(dfg_name(g, g->name[n]), &nn) != 1 || nn.op != g->grp_op[q])
        return 0;
    return nn.algo;
}

/* NCCL's LL bandwidth cap for the job's GPUs (costmodel_ll_max_bpns): the first present
 * rank's first device, the nodes the ranks' distinct hosts (at most 3 counted); 0 when
 * the traces hold no device. */
static double
ll_cap(const job *j)
{
    int cc = 0, nodes = 0;
    const char *hosts[3] = {NULL, NULL, NULL};
    for (int32_t r = 0; r < j->n_ranks; r++) {
        const job_rank *jr = &j->ranks[r];
        const dpro_device_info *dev = NULL;
        if (!jr->reader)
            continue;
        if (!cc && dpro_reader_devices(jr->reader, &dev) > 0)
            cc = (int)dev[0].cc_major;
        int seen = 0;
        for (int k = 0; k < nodes && !seen; k++)
            seen = jr->host && hosts[k] && strcmp(hosts[k], jr->host) == 0;
        if (!seen && nodes < 3)
            hosts[nodes++] = jr->host;
    }
    return costmodel_ll_max_bpns(cc, nodes);
}

int
replay_collective_model_option(replay_options *o, const char *name)
{
    int ab = strcmp(name, "alpha-beta") == 0, nearest = strcmp(name, "nearest") == 0;
    int rc = ab || nearest || strcmp(name, "piecewise") == 0 ? 0 : -1;
    if (rc == 0) {
        o->coll_ab = ab;
        o->coll_nearest = nearest;
    }
    return rc;
}

/* Fits the collective model on the groups every rank joined (send/recv exchanges: op
 * DPRO_COLL_SEND, latency + bytes / bandwidth) and applies it. */
static int
fit_model(replay *rp)
{
    dfg *g = &rp->graph;
    costmodel_sample *s = malloc((size_t)(g->n_groups > 0 ? g->n_groups : 1) * sizeof *s);
    if (!s)
        return -1;
    size_t n = 0;
    for (int32_t q = 0; q < g->n_groups; q++) {
        int32_t expect =
            g->grp_nranks[q] < rp->job.n_present ? g->grp_nranks[q] : rp->job.n_present;
        if (g->grp_members[q] < expect || g->grp_mdur[q] <= 0)
            continue;
        s[n].op = g->grp_op[q];
        s[n].nranks = g->grp_nranks[q];
        s[n].bytes = g->grp_bytes[q];
        s[n].transfer_ns = g->grp_mdur[q];
        s[n].algo = group_algo(g, q);
        n++;
    }
    int rc = costmodel_fit_samples(&rp->model, s, n);
    free(s);
    if (rc != 0)
        return -1;
    rp->model.ll_max_bpns = ll_cap(&rp->job);
    rp->model.piecewise = !rp->opts.coll_ab;
    rp->model.nearest = rp->opts.coll_nearest;
    if (rp->opts.coll_duration == REPLAY_COLL_MODEL)
        for (int32_t q = 0; q < g->n_groups; q++)
            if (rp->model.all.fitted)
                g->grp_dur[q] =
                    costmodel_predict(&rp->model, g->grp_op[q], g->grp_nranks[q], g->grp_bytes[q]);
    return 0;
}

/* The load's options for the replay's. */
static job_options
load_options(const replay_options *o)
{
    return (job_options){.job_id = o->job_id,
                         .max_events = o->max_events,
                         .jobs = o->jobs,
                         .iterations = o->iterations,
                         .warmup = o->warmup,
                         .full = o->full_load,
                         .from_start = o->window_from_start,
                         .fold = o->fold,
                         .share = o->share};
}

int
replay_read_share(const char *path, const replay_options *opts, char *errbuf, size_t errlen)
{
    job j;
    job_options jo = load_options(opts);
    int rc = job_load(path, &jo, &j, errbuf, errlen);
    if (rc == 0) {
        pr_info("read the events of %d of the %d present ranks here, handed to process 0 "
                "(held compressed from their classification until sent: %llu bytes, %llu "
                "unpacked)",
                j.share_hi - j.share_lo, j.n_present, (unsigned long long)j.share_packed,
                (unsigned long long)j.share_unpacked);
        job_free(&j);
    }
    return rc;
}

int
replay_open(const char *path, const replay_options *opts, replay *rp, char *errbuf, size_t errlen)
{
    memset(rp, 0, sizeof *rp);
    if (opts)
        rp->opts = *opts;
    job_options jo = load_options(&rp->opts);
    int rc = job_load(path, &jo, &rp->job, errbuf, errlen);
    if (rc == 0 && jo.share)
        pr_info("read the events of %d of the %d present ranks here, the others' gathered",
                rp->job.share_hi - rp->job.share_lo, rp->job.n_present);
    if (rc != 0)
        return rc;
    if (rp->job.window_warmup >= 0) /* a window (job.h): it says which are compared */
        rp->opts.warmup = rp->job.window_warmup;
    job *j = &rp->job;
    rp->iters = calloc((size_t)j->n_ranks + 1, sizeof *rp->iters);
    build_bounds *bb = calloc((size_t)j->n_ranks + 1, sizeof *bb);
    if (!rp->iters || !bb)
        goto oom;
    if (take_iterations(j, rp->iters) != 0)
        goto oom;
    match_steps(j, rp->iters);
    if (match_period_phases(j, rp->iters) != 0)
        goto oom;
    for (int32_t r = 0; r < j->n_ranks; r++) {
        bb[r].n = rp->iters[r].n;
        bb[r].event_index = rp->iters[r].event_index;
    }
    if (align_job(rp) != 0)
        goto oom;
    int bad = build_check_input(j, rp->align.offset_ns, errbuf, errlen);
    if (bad == -2)
        goto oom;
    if (bad != 0) {
        free(bb);
        replay_close(rp);
        return DPRO_ERR_CORRUPT;
    }
    rp->time_origin = build_time_origin(j, rp->align.offset_ns); /* before a release */
    if (build_dfg(j, rp->align.offset_ns, bb, rp->opts.release_events, rp->opts.take_events,
                  rp->opts.take_ctx, &rp->graph, &rp->p2p) != 0)
        goto oom;
    if ((rp->repaired_edges = build_repair_event_edges(&rp->graph)) < 0)
        goto oom;
    if (rp->opts.drop_edges > 0) {
        int64_t dropped = replay_drop_edges(&rp->graph, rp->opts.drop_edges);
        if (dropped < 0)
            goto oom;
        job_warn(j, "TEST ONLY: %lld dependency edges dropped before the timing fit",
                 (long long)dropped);
    }
    if (rp->repaired_edges > 0)
        pr_info("%lld event dependencies rebuilt from call order (the trace's event calls "
                "name no stream the device ops have)",
                (long long)rp->repaired_edges);
    free(bb);
    bb = NULL;

    /* boundary times, warm-up, and the iterations compared */
    int32_t n_common = -1, warm = 0, any = 0;
    for (int32_t r = 0; r < j->n_ranks; r++) {
        if (!j->ranks[r].reader)
            continue;
        replay_rank_iters *it = &rp->iters[r];
        const int32_t *b;
        int32_t nb = dfg_iterations(&rp->graph, r, &b);
        it->n = nb;
        free(it->start_ns);
        it->start_ns = malloc((size_t)(nb > 0 ? nb : 1) * sizeof *it->start_ns);
        uint8_t *wu = malloc((size_t)(nb > 0 ? nb : 1));
        if (!it->start_ns || !wu) {
            free(wu);
            goto oom;
        }
        for (int32_t k = 0; k < nb; k++)
            it->start_ns[k] = dfg_mend(&rp->graph, b[k]);
        it->warm_up = (int32_t)iter_mark_warmup(it->start_ns, (size_t)nb, 0.10, wu);
        free(wu);
        if (it->warm_up > warm)
            warm = it->warm_up;
        if (n_common < 0 || nb < n_common)
            n_common = nb;
        any++;
        if (nb < 2)
            job_warn(j,
                     "rank %d: no iterations found (no iteration markers, no repeating "
                     "kernel sequence); the whole trace counts as one iteration",
                     r);
    }
    if (n_common < 0)
        n_common = 0;
    int32_t n_max = 0;
    for (int32_t r = 0; r < j->n_ranks; r++)
        if (j->ranks[r].reader && rp->iters[r].n > n_max)
            n_max = rp->iters[r].n;
    if (n_max > n_common + 1 && n_common >= 2) {
        for (int32_t r = 0; r < j->n_ranks; r++)
            if (j->ranks[r].reader && rp->iters[r].n == n_common) {
                job_warn(j,
                         "rank %d has %d complete iterations, other ranks up to %d: its "
                         "trace ends early (cut mid-run?); comparing the first %d",
                         r, n_common - 1, n_max - 1, n_common - 1);
                break;
            }
    }
    if (rp->opts.warmup >= 0)
        warm = rp->opts.warmup > 0 ? rp->opts.warmup - 1 : 0;
    rp->iter_first = warm;
    rp->iter_last = n_common - 2;
    if (rp->iter_last < rp->iter_first && n_common >= 2) {
        rp->iter_first = 0; /* everything looked like warm-up: compare all */
    }
    if (rp->opts.iterations > 0 && rp->iter_last >= rp->iter_first &&
        rp->iter_last - rp->iter_first + 1 > rp->opts.iterations)
        rp->iter_last = rp->iter_first + rp->opts.iterations - 1;
    (void)any;
    if (fit_model(rp) != 0 || (rp->opts.fold && replay_fold(rp) != 0))
        goto oom;
    return 0;
oom:
    free(bb);
    snprintf(errbuf, errlen, "out of memory");
    replay_close(rp);
    return DPRO_ERR_NOMEM;
}

int
replay_simulate(replay *rp)
{
    if (sim_run(&rp->graph, &rp->sim) != 0)
        return -1;
    sim_result_trim(&rp->sim); /* kept to the end: the scratch is not */
    rp->simulated = 1;
    return 0;
}

int
replay_release_timeline(replay *rp)
{
    const dfg *g = &rp->graph;
    int32_t per = rp->iter_last >= rp->iter_first ? rp->iter_last - rp->iter_first + 2 : 0;
    size_t cap = (size_t)g->n_ranks * (size_t)per;
    int32_t *node = malloc((cap > 0 ? cap : 1) * sizeof *node);
    int64_t *end = NULL;
    int rc = node ? 0 : -1;
    size_t n = 0;
    for (int32_t r = 0; r < g->n_ranks && rc == 0; r++) {
        const int32_t *b;
        int32_t nb = dfg_iterations(g, r, &b);
        for (int32_t k = rp->iter_first; k < rp->iter_first + per && k < nb; k++)
            if (b[k] >= 0)
                node[n++] = b[k];
    }
    if (rc == 0) {
        qsort(node, n, sizeof *node, cmp_int32);
        size_t u = 0;
        for (size_t i = 0; i < n; i++)
            if (u == 0 || node[u - 1] != node[i])
                node[u++] = node[i];
        n = u;
        rc = (end = malloc((n > 0 ? n : 1) * sizeof *end)) ? 0 : -1;
    }
    for (size_t i = 0; i < n && rc == 0; i++)
        end[i] = rp->sim.end ? rp->sim.end[node[i]] : -1;
    if (rc == 0) {
        free(rp->kept_node);
        free(rp->kept_end);
        rp->kept_node = node;
        rp->kept_end = end;
        rp->n_kept_ends = (int32_t)n;
        sim_result kept = {.makespan = rp->sim.makespan,
                           .last_node = rp->sim.last_node,
                           .n_unfinished = rp->sim.n_unfinished,
                           .first_unfinished = rp->sim.first_unfinished};
        sim_result_free(&rp->sim);
        rp->sim = kept;
    } else {
        free(node);
        free(end);
    }
    return rc;
}

/* The simulated end of node n in the exact replay: rp->sim's, or the one
 * replay_release_timeline kept (-1 when it kept none). */
static int64_t
sim_end_of(const replay *rp, int32_t n)
{
    if (rp->sim.end)
        return rp->sim.end[n];
    int32_t lo = 0, hi = rp->n_kept_ends; /* kept_node[lo..hi) may hold n */
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (rp->kept_node[mid] < n)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < rp->n_kept_ends && rp->kept_node[lo] == n ? rp->kept_end[lo] : -1;
}

int32_t
replay_rank_window(const replay *rp, const dfg *g, sim_timeline tl, int32_t r, int64_t *t0,
                   int64_t *t1)
{
    if (rp->iter_last >= rp->iter_first &&
        sim_iteration_window(g, tl, r, rp->iter_first, rp->iter_last, t0, t1) == 0)
        return rp->iter_last - rp->iter_first + 1;
    r = dfg_rank_rep(g, r);
    int64_t lo = INT64_MAX, hi = -1;
    for (int32_t q = 0; q < g->n_res; q++) {
        if (g->res_rank[q] != r)
            continue;
        for (int32_t m = g->res_first[q]; m >= 0; m = g->next_on_res[m]) {
            if (tl.start[m] < 0)
                continue;
            lo = tl.start[m] < lo ? tl.start[m] : lo;
            hi = tl.end[m] > hi ? tl.end[m] : hi;
        }
    }
    if (hi < 0)
        return 0;
    *t0 = lo;
    *t1 = hi;
    return 1;
}

int
replay_iteration_times(const replay *rp, int32_t r, int32_t k, int64_t *trace_t0, int64_t *trace_t1,
                       int64_t *measured_ns, int64_t *simulated_ns)
{
    int rc = -1;
    const dfg *g = &rp->graph;
    const int32_t *b;
    int32_t rep = dfg_rank_rep(g, r);
    int32_t nb = dfg_iterations(g, r, &b);
    if (rp->simulated && k >= rp->iter_first && k <= rp->iter_last && k + 1 < nb && b[k] >= 0 &&
        b[k + 1] >= 0 && sim_end_of(rp, b[k]) >= 0 && sim_end_of(rp, b[k + 1]) >= 0) {
        /* graph time = trace time + offset - time origin (build.c) */
        int64_t off = rp->align.offset_ns && rep < rp->align.n_ranks ? rp->align.offset_ns[rep] : 0;
        int64_t e0 = dfg_mend(g, b[k]), e1 = dfg_mend(g, b[k + 1]);
        *trace_t0 = e0 - off + rp->time_origin;
        *trace_t1 = e1 - off + rp->time_origin;
        *measured_ns = e1 - e0;
        *simulated_ns = sim_end_of(rp, b[k + 1]) - sim_end_of(rp, b[k]);
        rc = 0;
    }
    return rc;
}

double
replay_predict(const replay *rp, dfg *g, sim_result *res)
{
    if (sim_run(g, res) != 0)
        return -1;
    return replay_iteration_of(rp, g, res);
}

double
replay_iteration_of(const replay *rp, const dfg *g, const sim_result *res)
{
    sim_timeline tl = sim_timeline_of(res);
    double sum = 0;
    int32_t k = 0;
    for (int32_t r = 0; r < g->n_ranks; r++) {
        if (r < rp->job.n_ranks && !rp->job.ranks[r].reader)
            continue;
        int64_t t0, t1;
        int32_t ni = replay_rank_window(rp, g, tl, r, &t0, &t1);
        if (ni <= 0)
            continue;
        sum += (double)(t1 - t0) / ni;
        k++;
    }
    return k ? sum / k : -1;
}

int64_t
replay_scale_kernels(dfg *g, double factor)
{
    if (!(factor > 0))
        return -1;
    int64_t k = 0;
    for (int32_t n = 0; k >= 0 && n < g->n_nodes; n++) {
        if (g->kind[n] != DFG_KERNEL || (g->flags[n] & DFG_F_REMOVED))
            continue;
        k = dfg_set_dur(g, n, (int64_t)((double)dfg_dur(g, n) * factor + 0.5)) == 0 ? k + 1 : -1;
    }
    return k;
}

/* ---- summary ----------------------------------------------------------------------------- */

void
replay_summary_free(replay_summary *s)
{
    free(s->rank);
    free(s->cp);
    free(s->cp_pieces);
    memset(s, 0, sizeof *s);
}

static void
bd_add(sim_breakdown *a, const sim_breakdown *b, double scale)
{
    a->window += (int64_t)((double)b->window * scale);
    a->compute += (int64_t)((double)b->compute * scale);
    a->communication += (int64_t)((double)b->communication * scale);
    a->overlap += (int64_t)((double)b->overlap * scale);
    a->wait_ranks += (int64_t)((double)b->wait_ranks * scale);
    a->host_idle += (int64_t)((double)b->host_idle * scale);
}

/* Rank r's measured and simulated breakdowns over its windows w (measured start and end,
 * simulated start and end) into ranks[r]; win[r] keeps w and that they were made. A
 * folded rank's breakdowns read only its representative's nodes (sim_breakdown_rank), so
 * with the same windows they are the representative's, made before it (the lowest rank
 * of its class): copied rather than made again for every rank of the class. Returns 0
 * or -1 (out of memory). */
static int
rank_breakdowns(const dfg *g, sim_timeline mt, sim_timeline st, int32_t r, const int64_t w[4],
                int64_t (*win)[5], replay_rank_summary *ranks)
{
    int32_t p = dfg_rank_rep(g, r);
    int rc = 0;
    if (p >= 0 && p < r && win[p][4] && memcmp(win[p], w, 4 * sizeof *w) == 0) {
        ranks[r].measured_bd = ranks[p].measured_bd;
        ranks[r].simulated_bd = ranks[p].simulated_bd;
    } else if (sim_breakdown_rank(g, mt, r, w[0], w[1], &ranks[r].measured_bd) != 0 ||
               sim_breakdown_rank(g, st, r, w[2], w[3], &ranks[r].simulated_bd) != 0) {
        rc = -1;
    }
    memcpy(win[r], w, 4 * sizeof *w);
    win[r][4] = rc == 0;
    return rc;
}

int
replay_summarize(const replay *rp, const dfg *g, const sim_result *res, replay_summary *out)
{
    memset(out, 0, sizeof *out);
    const job *j = &rp->job;
    out->n_ranks = g->n_ranks;
    out->rank = calloc((size_t)g->n_ranks + 1, sizeof *out->rank);
    int64_t *garr = malloc((size_t)(g->n_groups > 0 ? g->n_groups : 1) * sizeof *garr);
    double *blame = calloc((size_t)g->n_ranks + 1, sizeof *blame);
    int32_t *lastc = calloc((size_t)g->n_ranks + 1, sizeof *lastc);
    int64_t *mend = malloc((size_t)(g->n_nodes > 0 ? g->n_nodes : 1) * sizeof *mend);
    int64_t(*win)[5] = calloc((size_t)g->n_ranks + 1, sizeof *win);
    if (!out->rank || !garr || !blame || !lastc || !mend || !win)
        goto oom;
    sim_timeline mt = sim_timeline_measured(g, garr, mend);
    sim_timeline st = sim_timeline_of(res);
    out->first_iteration = rp->iter_first + 1 + j->iter_skipped;
    out->unfinished = res->n_unfinished;
    double msum = 0, ssum = 0, medsum = 0;
    int32_t k = 0;
    int64_t gt0 = INT64_MAX, gt1 = INT64_MIN;
    int32_t cp_rank = -1, iters = 0;
    int64_t cp_end = -1;
    for (int32_t r = 0; r < g->n_ranks; r++) {
        replay_rank_summary *rs = &out->rank[r];
        if (r < j->n_ranks && !j->ranks[r].reader)
            continue;
        rs->present = 1;
        if (r < rp->align.n_ranks && rp->align.offset_ns) {
            rs->clock_offset_us = (double)rp->align.offset_ns[r] / 1000.0;
            rs->clock_residual_us = rp->align.residual_us[r];
            rs->clock_aligned = rp->align.aligned[r];
        }
        int64_t m0, m1, s0, s1;
        int32_t nm = replay_rank_window(rp, g, mt, r, &m0, &m1);
        int32_t ns = replay_rank_window(rp, g, st, r, &s0, &s1);
        if (nm <= 0 || ns <= 0)
            continue;
        iters = nm;
        rs->measured_us = (double)(m1 - m0) / nm / 1000.0; /* the mean (sim.h) */
        rs->simulated_us = (double)(s1 - s0) / ns / 1000.0;
        rs->error_pct = rs->measured_us > 0
                            ? 100.0 * (rs->simulated_us - rs->measured_us) / rs->measured_us
                            : 0;
        if (rank_breakdowns(g, mt, st, r, (const int64_t[4]){m0, m1, s0, s1}, win, out->rank) != 0)
            goto oom;
        bd_add(&out->measured_bd, &rs->measured_bd, 1.0 / nm);
        bd_add(&out->simulated_bd, &rs->simulated_bd, 1.0 / ns);
        msum += rs->measured_us;
        ssum += rs->simulated_us;
        double med = sim_iteration_median(g, st, r, rp->iter_first, rp->iter_last);
        medsum += med > 0 ? med / 1000.0 : rs->simulated_us;
        k++;
        gt0 = m0 < gt0 ? m0 : gt0;
        gt1 = m1 > gt1 ? m1 : gt1;
        if (s1 > cp_end) {
            cp_end = s1;
            cp_rank = r;
        }
    }
    out->iterations = iters;
    if (k > 0) {
        out->measured_us = msum / k;
        out->simulated_us = ssum / k;
        out->simulated_median_us = medsum / k;
        out->error_pct = out->measured_us > 0
                             ? 100.0 * (out->simulated_us - out->measured_us) / out->measured_us
                             : 0;
        bd_add(&out->measured_bd, &out->measured_bd, 1.0 / k - 1.0);
        bd_add(&out->simulated_bd, &out->simulated_bd, 1.0 / k - 1.0);
        sim_stragglers(g, mt, gt0, gt1, blame, lastc);
        for (int32_t r = 0; r < g->n_ranks; r++) {
            out->rank[r].straggler_blame_us = blame[r] / 1000.0 / (iters > 0 ? iters : 1);
            out->rank[r].last_arrivals = lastc[r];
        }
    }

    /* critical path of the last compared iteration, ending where cp_rank's ends */
    if (cp_rank >= 0) {
        int32_t to = -1;
        int64_t from = 0;
        const int32_t *b;
        int32_t nb = dfg_iterations(g, cp_rank, &b);
        if (rp->iter_last >= rp->iter_first && rp->iter_last + 1 < nb) {
            to = b[rp->iter_last + 1];
            from = res->end[b[rp->iter_last]];
        }
        if (replay_cp_compose(rp, g, res, cp_rank, to, from, out) != 0)
            goto oom;
    }
    free(garr);
    free(blame);
    free(lastc);
    free(mend);
    free(win);
    return 0;
oom:
    free(win);
    free(garr);
    free(blame);
    free(lastc);
    free(mend);
    replay_summary_free(out);
    return -1;
}
