/*
 * test_sim_rerun: incremental re-simulation (sim_rerun, sim.h) against sim_run.
 *
 * Random graphs (host threads launching on streams, blocking and queued calls, event
 * edges, cross-thread wake-ups, collectives across ranks, removed nodes) and synthetic
 * jobs (tests/replay/synth.h): random subsets of dur, gap, lat and grp_dur are perturbed many times,
 * with values drawn from a few small numbers so that ties between dependencies are
 * common, and every field of sim_rerun's result (start, end, crit, why per node; arrival
 * and last participant per group; makespan, last node) must equal sim_run's, with the
 * reference kept fixed or adopting each result. Structural changes (an edge, a removed
 * node, a flag, another graph) must fall back to a whole run, and a change with slack
 * must be cut off early.
 *
 *   test_sim_rerun [GRAPHS [TRIALS]]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dprotrace.h"
#include "replay/dfg.h"
#include "replay/sim.h"
#include "tests/replay/synth.h"
#include "tests/unit/testutil.h"

static uint64_t rng_s = 0x9E3779B97F4A7C15ULL;

static uint64_t
rnd(void)
{
    return test_rand(&rng_s);
}

static int64_t
below(int64_t n)
{
    return n > 0 ? (int64_t)(rnd() % (uint64_t)n) : 0;
}

/* A small time: a handful of values, so that many dependencies tie. */
static int64_t
small_time(void)
{
    static const int64_t v[] = {0, 0, 1, 2, 3, 5, 10, 20};
    return v[below(8)];
}

/* Random job of `ranks` ranks, each with `threads` host threads and `streams` streams,
 * about n_steps host calls. Every dependency goes from an earlier node to a later one
 * and a group's participants are created together with no edge among them, so the
 * graph has no cycle. */
static int
random_graph(dfg *g, int32_t ranks, int32_t threads, int32_t streams, int32_t n_steps)
{
    if (dfg_init(g, ranks) != 0)
        return -1;
    int32_t *thr = malloc(sizeof *thr * (size_t)(ranks * threads));
    int32_t *str = malloc(sizeof *str * (size_t)(ranks * streams));
    int32_t *gm = malloc(sizeof *gm * (size_t)ranks);
    int32_t *gh = malloc(sizeof *gh * (size_t)ranks);
    if (!thr || !str || !gm || !gh)
        goto fail;
    int32_t nm = dfg_intern(g, "call"), km = dfg_intern(g, "kernel");
    for (int32_t r = 0; r < ranks; r++) {
        for (int32_t t = 0; t < threads; t++)
            thr[r * threads + t] = dfg_add_resource(g, DFG_RES_THREAD, r, (uint64_t)t + 1, 0);
        for (int32_t s = 0; s < streams; s++)
            str[r * streams + s] = dfg_add_resource(g, DFG_RES_STREAM, r, (uint64_t)s + 7, 0);
    }
    int32_t group_lo = INT32_MAX; /* participants of the group being built: no edges */
    for (int32_t step = 0; step < n_steps; step++) {
        int64_t kind = below(100);
        if (kind < 8 && ranks > 1) {
            /* a collective over some ranks: launches first, then the participants */
            int32_t k = 0;
            for (int32_t r = 0; r < ranks; r++)
                if (below(4) > 0 || k == 0)
                    gm[k++] = r;
            int32_t q =
                dfg_add_group(g, DPRO_COLL_ALLREDUCE, k, 1024, 1, (uint64_t)step, small_time());
            if (q < 0)
                goto fail;
            g->grp_dur[q] = small_time();
            for (int32_t i = 0; i < k; i++) {
                int32_t r = gm[i];
                gh[i] = dfg_add_node(g, DFG_HOST, thr[r * threads + below(threads)], nm);
                if (gh[i] < 0)
                    goto fail;
                g->dur[gh[i]] = small_time();
                g->gap[gh[i]] = small_time();
            }
            group_lo = g->n_nodes;
            for (int32_t i = 0; i < k; i++) {
                int32_t r = gm[i];
                int32_t d = dfg_add_node(g, DFG_KERNEL, str[r * streams + below(streams)], km);
                if (d < 0)
                    goto fail;
                dfg_set_group(g, d, q);
                g->launch[d] = gh[i];
                g->lat[d] = (int32_t)small_time();
                g->gap[d] = small_time();
                g->dur[d] = small_time();
                /* an event edge from some earlier node, not another participant */
                if (below(3) == 0 && group_lo > 1 &&
                    dfg_add_edge(g, (int32_t)below(group_lo), d) != 0)
                    goto fail;
            }
            group_lo = INT32_MAX;
            continue;
        }
        int32_t r = (int32_t)below(ranks);
        int32_t h = dfg_add_node(g, DFG_HOST, thr[r * threads + below(threads)], nm);
        if (h < 0)
            goto fail;
        g->dur[h] = small_time();
        g->gap[h] = small_time();
        if (kind < 60) {
            /* a launch, sometimes held by a launch queue */
            int32_t d = dfg_add_node(g, below(10) ? DFG_KERNEL : DFG_MEMCPY,
                                     str[r * streams + below(streams)], km);
            if (d < 0)
                goto fail;
            g->launch[d] = h;
            g->lat[d] = (int32_t)small_time();
            g->gap[d] = small_time();
            g->dur[d] = small_time();
            if (below(6) == 0 && d > 2) {
                int32_t src = (int32_t)below(h);
                if (g->kind[src] != DFG_HOST) {
                    g->flags[h] |= DFG_F_QUEUED;
                    if (dfg_add_edge(g, src, h) != 0)
                        goto fail;
                }
            }
            if (below(5) == 0 && d > 2 && dfg_add_edge(g, (int32_t)below(h), d) != 0)
                goto fail; /* an event wait */
        } else if (kind < 75 && h > 0) {
            /* a blocking call on some earlier work */
            g->flags[h] |= DFG_F_BLOCKING;
            int32_t k = 1 + (int32_t)below(3);
            for (int32_t i = 0; i < k; i++)
                if (dfg_add_edge(g, (int32_t)below(h), h) != 0)
                    goto fail;
        } else if (kind < 85 && h > 0) {
            /* woken by an earlier call of another thread (through a "(wake-up)" node
             * when h is blocking) */
            int32_t w = (int32_t)below(h);
            if (g->kind[w] == DFG_HOST && g->res[w] != g->res[h]) {
                if (below(2) == 0) {
                    g->flags[h] |= DFG_F_BLOCKING;
                    if (dfg_add_edge(g, (int32_t)below(h), h) != 0)
                        goto fail;
                }
                if (dfg_add_wakeup(g, w, h, small_time()) != 0)
                    goto fail;
            }
        }
    }
    /* a few removals (their dependencies pass on) */
    int32_t nrem = g->n_nodes / 40;
    for (int32_t i = 0; i < nrem; i++) {
        int32_t m = (int32_t)below(g->n_nodes);
        if (!(g->flags[m] & DFG_F_REMOVED) && g->group[m] < 0 && dfg_remove_node(g, m) != 0)
            goto fail;
    }
    free(thr);
    free(str);
    free(gm);
    free(gh);
    return dfg_finalize(g);
fail:
    free(thr);
    free(str);
    free(gm);
    free(gh);
    dfg_free(g);
    return -1;
}

/* Number of fields in which a and b differ (reports the first). */
static int64_t
compare(const dfg *g, const sim_result *a, const sim_result *b, const char *what)
{
    int64_t bad = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        if (a->start[i] != b->start[i] || a->end[i] != b->end[i] || a->crit[i] != b->crit[i] ||
            a->why[i] != b->why[i]) {
            if (!bad)
                fprintf(stderr,
                        "%s: node %d (kind %d flags %d group %d): rerun start %lld end %lld "
                        "crit %d why %d, sim_run start %lld end %lld crit %d why %d\n",
                        what, i, g->kind[i], g->flags[i], g->group[i], (long long)a->start[i],
                        (long long)a->end[i], a->crit[i], a->why[i], (long long)b->start[i],
                        (long long)b->end[i], b->crit[i], b->why[i]);
            bad++;
        }
    }
    for (int32_t q = 0; q < g->n_groups; q++)
        if (a->grp_arrival[q] != b->grp_arrival[q] || a->grp_last[q] != b->grp_last[q]) {
            if (!bad)
                fprintf(stderr, "%s: group %d differs\n", what, q);
            bad++;
        }
    if (a->makespan != b->makespan || a->last_node != b->last_node ||
        a->n_unfinished != b->n_unfinished) {
        if (!bad)
            fprintf(stderr, "%s: makespan %lld (node %d) vs %lld (node %d)\n", what,
                    (long long)a->makespan, a->last_node, (long long)b->makespan, b->last_node);
        bad++;
    }
    return bad;
}

/* Perturbs a random subset of g's parameters: one node, a few, many, or groups. */
static void
perturb(dfg *g, int64_t (*val)(void))
{
    int64_t mode = below(5);
    int32_t n = g->n_nodes;
    int32_t k = mode == 0 ? 1 : mode == 1 ? 1 + (int32_t)below(5) : mode == 2 ? n / 20 + 1 : n / 3;
    for (int32_t i = 0; i < k; i++) {
        int32_t m = (int32_t)below(n);
        switch (below(3)) {
        case 0:
            g->dur[m] = val();
            break;
        case 1:
            g->gap[m] = val();
            break;
        default:
            g->lat[m] = (int32_t)val();
            break;
        }
    }
    if (g->n_groups > 0 && (mode == 4 || below(3) == 0)) {
        int32_t kq = 1 + (int32_t)below(g->n_groups / 4 + 1);
        for (int32_t i = 0; i < kq; i++)
            g->grp_dur[below(g->n_groups)] = val();
    }
}

static int64_t synth_scale = 1000;

/* Times for the synthetic jobs: around the job's own, rounded so that ties occur. */
static int64_t
synth_time(void)
{
    return synth_scale * (int64_t)below(8);
}

/* trials perturbations of g, each checked against sim_run; adopt: 0 fixed reference, 1
 * adopt every result, 2 at random. Returns the incremental reruns done. */
static int64_t
check_graph(dfg *g, int32_t trials, int adopt, int64_t (*val)(void), const char *what,
            int64_t *resim, int64_t *nodes)
{
    sim_ref ref;
    sim_result full, inc;
    sim_rerun_stats st;
    int64_t incremental = 0;
    memset(&ref, 0, sizeof ref);
    memset(&full, 0, sizeof full);
    memset(&inc, 0, sizeof inc);
    CHECK(sim_rerun(g, &ref, &inc, 1, &st) == 0);
    CHECK(st.full == 1);
    CHECK(sim_run(g, &full) == 0);
    CHECK(compare(g, &inc, &full, what) == 0);
    for (int32_t t = 0; t < trials; t++) {
        perturb(g, val);
        int a = adopt == 2 ? (int)below(2) : adopt;
        static const double shares[] = {0, 0, 0.01, 0.2};
        ref.max_share = shares[below(4)];     /* recompute densely past that share */
        ref.whole_share = below(3) ? 0 : 0.5; /* whole when recent reruns were large */
        CHECK(sim_rerun(g, &ref, &inc, a, &st) == 0);
        CHECK(sim_run(g, &full) == 0);
        int64_t bad = compare(g, &inc, &full, what);
        CHECK(bad == 0);
        if (bad) {
            fprintf(stderr, "%s: trial %d, adopt %d: %lld fields differ\n", what, t, a,
                    (long long)bad);
            break;
        }
        CHECK(st.resimulated <= st.nodes);
        incremental += !st.full || st.predicted; /* served by the reference */
        if (!st.full) {
            *resim += st.resimulated;
            *nodes += st.nodes;
        }
    }
    sim_ref_free(&ref);
    sim_result_free(&full);
    sim_result_free(&inc);
    return incremental;
}

static void
test_random(int32_t graphs, int32_t trials)
{
    int64_t incremental = 0, runs = 0, resim = 0, nodes = 0;
    for (int32_t i = 0; i < graphs; i++) {
        dfg g;
        int32_t ranks = 1 + (int32_t)below(4), threads = 1 + (int32_t)below(3),
                streams = 1 + (int32_t)below(3), steps = 20 + (int32_t)below(400);
        CHECK(random_graph(&g, ranks, threads, streams, steps) == 0);
        char what[64];
        snprintf(what, sizeof what, "random graph %d", i);
        incremental += check_graph(&g, trials, i % 3, small_time, what, &resim, &nodes);
        runs += trials;
        dfg_free(&g);
    }
    /* a graph with a cycle is simulated whole every time; most have none */
    CHECK(incremental * 10 > runs * 8);
    printf("random graphs: %d graphs, %lld reruns (%lld incremental), %.1f %% of the nodes "
           "recomputed on average\n",
           graphs, (long long)runs, (long long)incremental,
           nodes > 0 ? 100.0 * (double)resim / (double)nodes : 0.0);
}

static void
test_synth(int32_t trials)
{
    synth_params sp;
    synth_defaults(&sp);
    sp.ranks = 4;
    sp.iterations = 3;
    sp.ops_per_iter = 120;
    sp.buckets = 4;
    sp.kernel_ns = 2000;
    dfg g;
    CHECK(synth_dfg(&sp, &g) == 0);
    int64_t resim = 0, nodes = 0;
    synth_scale = 1000;
    int64_t inc = check_graph(&g, trials, 2, synth_time, "synthetic job", &resim, &nodes);
    CHECK(inc == trials);
    printf("synthetic job: %d nodes, %d reruns, %.1f %% of the nodes recomputed on average\n",
           dfg_live_nodes(&g), trials, nodes > 0 ? 100.0 * (double)resim / (double)nodes : 0.0);
    dfg_free(&g);
}

/* Early cut-off: a change that the schedule absorbs recomputes a few nodes; structural
 * changes and another graph fall back to a whole run. */
static void
test_cutoff_and_fallback(void)
{
    synth_params sp;
    synth_defaults(&sp);
    sp.ranks = 2;
    sp.ops_per_iter = 200;
    dfg g, c;
    CHECK(synth_dfg(&sp, &g) == 0);
    CHECK(dfg_clone(&c, &g) == 0);
    sim_ref ref;
    sim_result full, inc;
    sim_rerun_stats st;
    memset(&ref, 0, sizeof ref);
    memset(&full, 0, sizeof full);
    memset(&inc, 0, sizeof inc);
    CHECK(sim_ref_build(&ref, &g) == 0);
    /* unchanged: nothing recomputed */
    CHECK(sim_rerun(&g, &ref, &inc, 0, &st) == 0);
    CHECK(st.full == 0 && st.changed == 0 && st.resimulated == 0);
    CHECK(sim_run(&g, &full) == 0);
    CHECK(compare(&g, &inc, &full, "unchanged") == 0);
    /* a kernel one ns shorter, which the next kernel's launch hides (the stream waits for
     * the host: launch-bound) or which shifts the rest (device-bound): either way right */
    int32_t k = -1;
    for (int32_t i = 0; i < g.n_nodes && k < 0; i++)
        if (g.kind[i] == DFG_KERNEL && g.launch[i] >= 0 && i > g.n_nodes / 2)
            k = i;
    CHECK(k >= 0);
    g.dur[k] -= 1;
    CHECK(sim_rerun(&g, &ref, &inc, 0, &st) == 0);
    CHECK(sim_run(&g, &full) == 0);
    CHECK(compare(&g, &inc, &full, "one kernel") == 0);
    CHECK(st.full == 0 && st.changed == 1 && st.resimulated >= 1);
    printf("one kernel 1 ns shorter: %d of %d nodes recomputed\n", st.resimulated, st.nodes);
    /* a host call's gap in the last iteration grows by 0: nothing moves */
    g.dur[k] += 1;
    CHECK(sim_rerun(&g, &ref, &inc, 0, &st) == 0);
    CHECK(st.resimulated == 0);
    /* a launch latency that stays below the stream's backlog: cut off at once */
    int32_t d = -1;
    for (int32_t i = 1; i < g.n_nodes && d < 0; i++)
        if (g.kind[i] == DFG_KERNEL && g.launch[i] >= 0 && full.why[i] == SIM_CAUSE_RESOURCE &&
            full.start[i] - (full.start[g.launch[i]] + g.lat[i]) > 2)
            d = i;
    if (d >= 0) {
        g.lat[d] += 1;
        CHECK(sim_rerun(&g, &ref, &inc, 0, &st) == 0);
        CHECK(sim_run(&g, &full) == 0);
        CHECK(compare(&g, &inc, &full, "latency with slack") == 0);
        CHECK(st.resimulated == 1);
        g.lat[d] -= 1;
    }
    /* another graph: whole run, then incremental on it */
    CHECK(sim_rerun(&c, &ref, &inc, 0, &st) == 0);
    CHECK(st.full == 1);
    CHECK(sim_run(&c, &full) == 0);
    CHECK(compare(&c, &inc, &full, "other graph") == 0);
    /* an added edge: structure changed */
    CHECK(dfg_add_edge(&c, 0, c.n_nodes - 1) == 0);
    CHECK(sim_rerun(&c, &ref, &inc, 0, &st) == 0);
    CHECK(st.full == 1);
    CHECK(sim_run(&c, &full) == 0);
    CHECK(compare(&c, &inc, &full, "added edge") == 0);
    /* a removed node */
    CHECK(dfg_remove_node(&c, k) == 0);
    CHECK(sim_rerun(&c, &ref, &inc, 1, &st) == 0);
    CHECK(st.full == 1);
    CHECK(sim_run(&c, &full) == 0);
    CHECK(compare(&c, &inc, &full, "removed node") == 0);
    /* a flag */
    int32_t h = -1;
    for (int32_t i = 1; i < c.n_nodes && h < 0; i++)
        if (c.kind[i] == DFG_HOST && !(c.flags[i] & (DFG_F_REMOVED | DFG_F_WAKEUP)) &&
            c.n_preds[i] > 0)
            h = i;
    if (h >= 0) {
        c.flags[h] |= DFG_F_WAKEUP;
        CHECK(sim_rerun(&c, &ref, &inc, 1, &st) == 0);
        CHECK(st.full == 1);
        CHECK(sim_run(&c, &full) == 0);
        CHECK(compare(&c, &inc, &full, "flag") == 0);
    }
    sim_ref_free(&ref);
    sim_result_free(&full);
    sim_result_free(&inc);
    dfg_free(&c);
    dfg_free(&g);
}

/* A cycle (nodes never run): the reference serves no rerun; each is whole and equal. */
static void
test_cycle(void)
{
    dfg g;
    CHECK(dfg_init(&g, 1) == 0);
    int32_t T = dfg_add_resource(&g, DFG_RES_THREAD, 0, 1, 0);
    int32_t S = dfg_add_resource(&g, DFG_RES_STREAM, 0, 7, 0);
    int32_t a = dfg_add_node(&g, DFG_HOST, T, 0), b = dfg_add_node(&g, DFG_HOST, T, 0);
    int32_t k = dfg_add_node(&g, DFG_KERNEL, S, 0);
    g.launch[k] = b;
    g.dur[a] = g.dur[b] = g.dur[k] = 5;
    g.flags[a] |= DFG_F_BLOCKING;
    CHECK(dfg_add_edge(&g, k, a) == 0); /* a waits for what b launches after it */
    sim_ref ref;
    sim_result full, inc;
    sim_rerun_stats st;
    memset(&ref, 0, sizeof ref);
    memset(&full, 0, sizeof full);
    memset(&inc, 0, sizeof inc);
    for (int i = 0; i < 3; i++) {
        g.dur[k] = 5 + i;
        CHECK(sim_rerun(&g, &ref, &inc, 1, &st) == 0);
        CHECK(st.full == 1);
        CHECK(sim_run(&g, &full) == 0);
        CHECK(full.n_unfinished == 3);
        CHECK(compare(&g, &inc, &full, "cycle") == 0);
    }
    sim_ref_free(&ref);
    sim_result_free(&full);
    sim_result_free(&inc);
    dfg_free(&g);
}

int
main(int argc, char **argv)
{
    int32_t graphs = argc > 1 ? atoi(argv[1]) : 300;
    int32_t trials = argc > 2 ? atoi(argv[2]) : 40;
    test_cycle();
    test_cutoff_and_fallback();
    test_synth(trials * 5);
    test_random(graphs, trials);
    return tests_done();
}
