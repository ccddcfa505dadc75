/*
 * test_fidelity_unit: the typical-duration replay and the perturbation check (fidelity.c)
 * on a hand-made graph with known answers.
 *
 * One rank, four steps k = 0..3: the host waits 10 us, launches kernel k (the call takes
 * 5 us, the kernel starts 3 us after the call began and runs d[k]), then synchronises
 * (2 us after the launch returns; the call returns 1 us after the kernel ends). The
 * synchronisations close the iterations, so iterations 0..2 hold steps 1..3, each
 * 14 us + d[k] long. With d = 50, 100, 400, 100 us the measured mean is 214 us; the
 * typical replay (median kernel 100 us) predicts 114 us, with means 214 us; the drawn
 * replay, which reorders the rank's own iterations, 214 us.
 *
 * The drawn replay's ranks (make_pair_graph): two ranks, four steps, each an all-reduce
 * after a 50 us kernel; a host stall of 300 us in some steps. Where the stalls fall in
 * the same iteration the ranks move together and the drawn replay keeps them together
 * (the measured mean, where the medians drop the stall); where they fall apart it pairs
 * the iterations at random, so they meet now and then: between the two.
 *
 * The ranks' wait (test_rank_wait, make_ranks_graph): four ranks, each stalling in another
 * iteration; the medians drop every stall, the wait at the collectives keeps the expected
 * latest arrival learned from the arrivals' jitter.
 *
 * The host's stall (make_stall_graph): 300 us in every iteration, before another call each
 * time; the typical replay keeps the thread's typical stall, which each call's median
 * alone drops.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/build.h"
#include "replay/dfg.h"
#include "replay/replay.h"
#include "dprotrace.h"
#include "replay/sim.h"
#include "tests/unit/testutil.h"

#define US 1000

enum { STEPS = 4 };

/* Builds the graph described above into *g (timing fitted from the measured times); in
 * step `extra` (-1: none) the host also polls once (a 2 us call 4 us into its wait). */
static void
make_graph_extra(dfg *g, int extra)
{
    static const int64_t d[STEPS] = {50 * US, 100 * US, 400 * US, 100 * US};
    REQUIRE(dfg_init(g, 1) == 0);
    int32_t th = dfg_add_resource(g, DFG_RES_THREAD, 0, 1, 0);
    int32_t st = dfg_add_resource(g, DFG_RES_STREAM, 0, 7, 0);
    int32_t nl = dfg_intern(g, "cudaLaunchKernel"), ns = dfg_intern(g, "cudaDeviceSynchronize");
    int32_t nk = dfg_intern(g, "kern");
    REQUIRE(th >= 0 && st >= 0 && nl > 0 && ns > 0 && nk > 0);
    int32_t sync[STEPS];
    int64_t t = 0;
    for (int k = 0; k < STEPS; k++) {
        if (k == extra) {
            int32_t p = dfg_add_node(g, DFG_HOST, th, dfg_intern(g, "cudaStreamQuery"));
            REQUIRE(p >= 0);
            g->mstart[p] = t + 4 * US;
            dfg_set_mend(g, p, g->mstart[p] + 2 * US);
        }
        int32_t l = dfg_add_node(g, DFG_HOST, th, nl);
        int32_t y = dfg_add_node(g, DFG_HOST, th, ns);
        int32_t x = dfg_add_node(g, DFG_KERNEL, st, nk);
        REQUIRE(l >= 0 && y >= 0 && x >= 0);
        g->mstart[l] = t + 10 * US;
        dfg_set_mend(g, l, g->mstart[l] + 5 * US);
        g->launch[x] = l;
        g->mstart[x] = g->mstart[l] + 3 * US;
        dfg_set_mend(g, x, g->mstart[x] + d[k]);
        g->mstart[y] = dfg_mend(g, l) + 2 * US;
        dfg_set_mend(g, y, dfg_mend(g, x) + 1 * US);
        g->flags[y] |= DFG_F_BLOCKING;
        REQUIRE(dfg_add_edge(g, x, y) == 0);
        sync[k] = y;
        t = dfg_mend(g, y);
    }
    REQUIRE(dfg_set_iterations(g, 0, sync, STEPS) == 0);
    REQUIRE(build_derive_timing(g) == 0);
}

static void
make_graph(dfg *g)
{
    make_graph_extra(g, -1);
}

/* A replay around a hand-made graph: no job (every rank counts as present). */
static void
make_replay(replay *rp, int32_t first, int32_t last)
{
    memset(rp, 0, sizeof *rp);
    make_graph(&rp->graph);
    rp->iter_first = first;
    rp->iter_last = last;
}

static int
near(double a, double b)
{
    return fabs(a - b) < 1e-6 * (fabs(b) + 1);
}

static void
test_typical(void)
{
    replay rp;
    make_replay(&rp, 0, 2);
    sim_result r;
    memset(&r, 0, sizeof r);
    CHECK(near(replay_predict(&rp, &rp.graph, &r), 214.0 * US)); /* the exact replay */
    replay_typical t;
    CHECK(replay_typical_replay(&rp, &t) == 0);
    CHECK_EQ(t.iterations, 3);
    CHECK_EQ(t.nodes, 9);
    CHECK_EQ(t.matched, 9);
    CHECK(near(t.measured_us, 214.0));
    CHECK(near(t.predicted_us, 114.0));
    CHECK(near(t.error_pct, -100.0 * 100.0 / 214.0));
    CHECK(near(t.mean_predicted_us, 214.0));
    sim_result_free(&r);
    dfg_free(&rp.graph);

    /* a poll in iteration 1 only: the calls after it keep their places (the n-th call of
     * their name), so only the poll is unmatched */
    memset(&rp, 0, sizeof rp);
    make_graph_extra(&rp.graph, 2);
    rp.iter_last = 2;
    CHECK(replay_typical_replay(&rp, &t) == 0);
    CHECK_EQ(t.nodes, 10);
    CHECK_EQ(t.matched, 9);
    CHECK(near(t.measured_us, 214.0));
    dfg_free(&rp.graph);

    /* one compared iteration: the typical replay is the exact one */
    make_replay(&rp, 1, 1);
    CHECK(replay_typical_replay(&rp, &t) == 0);
    CHECK_EQ(t.iterations, 1);
    CHECK(near(t.measured_us, 414.0));
    CHECK(near(t.predicted_us, 414.0));
    dfg_free(&rp.graph);
}

/* nr ranks, `steps` steps (iterations closed by the synchronisations, as make_graph's):
 * each rank waits 10 us (plus 300 us where stall[r * steps + k]), launches a 50 us kernel
 * and an all-reduce (5 us calls, 2 us apart, 3 us launch latency), and synchronises; the
 * all-reduce ends 20 us after the latest rank's arrives, the synchronisation 1 us after
 * it: a step of 84 us, 384 us where any rank stalled. */
static void
make_ranks_graph(dfg *g, int nr, int steps, const int *stall)
{
    enum { MAX_RANKS = 8, MAX_STEPS = 8 };
    REQUIRE(nr <= MAX_RANKS && steps <= MAX_STEPS);
    REQUIRE(dfg_init(g, nr) == 0);
    int32_t th[MAX_RANKS], st[MAX_RANKS], sync[MAX_RANKS][MAX_STEPS];
    for (int r = 0; r < nr; r++) {
        th[r] = dfg_add_resource(g, DFG_RES_THREAD, r, 1, 0);
        st[r] = dfg_add_resource(g, DFG_RES_STREAM, r, 7, 0);
        REQUIRE(th[r] >= 0 && st[r] >= 0);
    }
    int32_t nl = dfg_intern(g, "cudaLaunchKernel"), ns = dfg_intern(g, "cudaStreamSynchronize");
    int32_t nk = dfg_intern(g, "kern"), nc = dfg_intern(g, "ncclAllReduce");
    int64_t t[MAX_RANKS] = {0};
    for (int k = 0; k < steps; k++) {
        int32_t c[MAX_RANKS], lc[MAX_RANKS],
            q = dfg_add_group(g, DPRO_COLL_ALLREDUCE, nr, 1 << 20, 5, (uint64_t)k, 20 * US);
        int64_t arrive = 0;
        REQUIRE(q >= 0);
        for (int r = 0; r < nr; r++) {
            int32_t l = dfg_add_node(g, DFG_HOST, th[r], nl);
            int32_t x = dfg_add_node(g, DFG_KERNEL, st[r], nk);
            lc[r] = dfg_add_node(g, DFG_HOST, th[r], nl);
            c[r] = dfg_add_node(g, DFG_KERNEL, st[r], nc);
            REQUIRE(l >= 0 && x >= 0 && lc[r] >= 0 && c[r] >= 0);
            g->mstart[l] = t[r] + 10 * US + (stall[r * steps + k] ? 300 * US : 0);
            dfg_set_mend(g, l, g->mstart[l] + 5 * US);
            g->launch[x] = l;
            g->mstart[x] = g->mstart[l] + 3 * US;
            dfg_set_mend(g, x, g->mstart[x] + 50 * US);
            g->mstart[lc[r]] = dfg_mend(g, l) + 2 * US;
            dfg_set_mend(g, lc[r], g->mstart[lc[r]] + 5 * US);
            g->launch[c[r]] = lc[r];
            g->mstart[c[r]] = dfg_mend(g, x);
            REQUIRE(dfg_set_group(g, c[r], q) == 0);
            if (g->mstart[c[r]] > arrive)
                arrive = g->mstart[c[r]];
        }
        for (int r = 0; r < nr; r++) {
            int32_t y = dfg_add_node(g, DFG_HOST, th[r], ns);
            REQUIRE(y >= 0);
            dfg_set_mend(g, c[r], arrive + 20 * US);
            g->mstart[y] = dfg_mend(g, lc[r]) + 2 * US;
            dfg_set_mend(g, y, dfg_mend(g, c[r]) + 1 * US);
            g->flags[y] |= DFG_F_BLOCKING;
            REQUIRE(dfg_add_edge(g, c[r], y) == 0);
            sync[r][k] = y;
            t[r] = dfg_mend(g, y);
        }
    }
    for (int r = 0; r < nr; r++)
        REQUIRE(dfg_set_iterations(g, r, sync[r], steps) == 0);
    REQUIRE(build_derive_timing(g) == 0);
}

/* make_ranks_graph of two ranks and STEPS steps. */
static void
make_pair_graph(dfg *g, const int stall[2][STEPS])
{
    make_ranks_graph(g, 2, STEPS, &stall[0][0]);
}

/* The typical and the drawn replay of make_pair_graph(stall) over iterations 0..2. */
static void
pair_replay(const int stall[2][STEPS], replay_typical *t)
{
    replay rp;
    memset(&rp, 0, sizeof rp);
    make_pair_graph(&rp.graph, stall);
    rp.iter_last = 2;
    CHECK(replay_typical_replay(&rp, t) == 0);
    dfg_free(&rp.graph);
}

static void
test_drawn(void)
{
    /* one rank: its iterations reordered, the same three */
    replay rp;
    make_replay(&rp, 0, 2);
    replay_typical t;
    CHECK(replay_typical_replay(&rp, &t) == 0);
    CHECK_EQ(t.drawn_samples, REPLAY_DRAWN_SAMPLES);
    CHECK(near(t.drawn_predicted_us, 214.0));
    CHECK(near(t.drawn_min_us, 214.0) && near(t.drawn_max_us, 214.0));
    dfg_free(&rp.graph);
    make_replay(&rp, 1, 1);
    CHECK(replay_typical_replay(&rp, &t) == 0);
    CHECK_EQ(t.drawn_samples, 0);
    dfg_free(&rp.graph);

    /* both ranks stall in iteration 1 (step 2): 84, 384, 84 us */
    static const int together[2][STEPS] = {{0, 0, 1, 0}, {0, 0, 1, 0}};
    pair_replay(together, &t);
    CHECK(near(t.measured_us, 184.0));
    CHECK(near(t.predicted_us, 84.0)); /* the medians drop the stall */
    CHECK(near(t.drawn_predicted_us, 184.0));
    CHECK(fabs(t.drawn_error_pct) < 3.0);

    /* rank 0 stalls in iteration 0, rank 1 in iteration 2: 384, 84, 384 us measured; at
     * random they meet in one iteration of three (expected 84 + 300 * 5/9 = 250.7 us) */
    static const int apart[2][STEPS] = {{0, 1, 0, 0}, {0, 0, 0, 1}};
    pair_replay(apart, &t);
    CHECK(near(t.measured_us, 284.0));
    CHECK(near(t.predicted_us, 84.0));
    CHECK(t.drawn_predicted_us > 184.0 + 1 && t.drawn_predicted_us < 284.0 - 1);
    CHECK(near(t.drawn_min_us, 184.0) && near(t.drawn_max_us, 284.0));
}

/* Four ranks, six steps, iterations 0..4 (steps 1..5) compared: rank r stalls 300 us in
 * step r + 1, so four iterations of 384 us and one of 84 us, measured mean 324 us. Each
 * rank's medians drop its one stall (84 us); the ranks' wait keeps what the collectives
 * wait for. Learned from the 20 arrivals: at each stalled step one rank 225 us after the
 * step's mean arrival and three 75 us before it, at the last all at it (no rank late on
 * average), so the expected latest of 4 draws is -75 (12/20)^4 + 225 (1 - (16/20)^4) =
 * 123.12 us, against one draw's 0. A rank late by 300 us in every step is a straggler,
 * not jitter: the medians keep it and no wait is added. */
static void
test_rank_wait(void)
{
    enum { NR = 4, NS = 6 };
    int stall[NR * NS] = {0};
    for (int r = 0; r < NR; r++)
        stall[r * NS + r + 1] = 1;
    replay rp;
    memset(&rp, 0, sizeof rp);
    make_ranks_graph(&rp.graph, NR, NS, stall);
    rp.iter_last = 4;
    replay_typical t;
    CHECK(replay_typical_replay(&rp, &t) == 0);
    CHECK_EQ(t.iterations, 5);
    CHECK(near(t.measured_us, 324.0));
    CHECK_EQ(t.rank_wait_ns, 123120);
    CHECK(near(t.medians_only_predicted_us, 84.0));
    CHECK(near(t.medians_only_error_pct, -100.0 * 240.0 / 324.0));
    CHECK(near(t.predicted_us, 84.0 + 123.12)); /* 84 us without the wait */
    CHECK(near(t.error_pct, -100.0 * (324.0 - 207.12) / 324.0));
    CHECK(near(t.mean_predicted_us, 144.0)); /* each rank's mean gap: 10 + 300 / 5 us */
    CHECK_EQ(rp.graph.grp_wait_ns, 0);       /* set on the replay's copy only */
    dfg_free(&rp.graph);

    /* rank 3 stalls in every step: the same place each time, no jitter */
    memset(stall, 0, sizeof stall);
    for (int k = 0; k < NS; k++)
        stall[3 * NS + k] = 1;
    make_ranks_graph(&rp.graph, NR, NS, stall);
    CHECK(replay_typical_replay(&rp, &t) == 0);
    CHECK(near(t.measured_us, 384.0));
    CHECK_EQ(t.rank_wait_ns, 0);
    CHECK(near(t.predicted_us, 384.0) && near(t.medians_only_predicted_us, 384.0));
    dfg_free(&rp.graph);
}

/* One rank, STEPS steps closed by a synchronisation: three launches (a 10 us gap, a 5 us
 * call, a 2 us kernel starting 3 us into it), then the synchronisation (2 us after the
 * last launch returns, 1 us long): 48 us. In step k >= 1 the host stalls 300 us before
 * launch k - 1: a stall in every compared iteration, at another call each time. */
static void
make_stall_graph(dfg *g)
{
    REQUIRE(dfg_init(g, 1) == 0);
    int32_t th = dfg_add_resource(g, DFG_RES_THREAD, 0, 1, 0);
    int32_t st = dfg_add_resource(g, DFG_RES_STREAM, 0, 7, 0);
    int32_t nl = dfg_intern(g, "cudaLaunchKernel"), ns = dfg_intern(g, "cudaStreamSynchronize");
    int32_t nk = dfg_intern(g, "kern");
    REQUIRE(th >= 0 && st >= 0 && nl > 0 && ns > 0 && nk > 0);
    int32_t sync[STEPS], x = -1;
    int64_t t = 0;
    for (int k = 0; k < STEPS; k++) {
        for (int j = 0; j < 3; j++) {
            int32_t l = dfg_add_node(g, DFG_HOST, th, nl);
            x = dfg_add_node(g, DFG_KERNEL, st, nk);
            REQUIRE(l >= 0 && x >= 0);
            g->mstart[l] = t + 10 * US + (k >= 1 && j == k - 1 ? 300 * US : 0);
            dfg_set_mend(g, l, g->mstart[l] + 5 * US);
            g->launch[x] = l;
            g->mstart[x] = g->mstart[l] + 3 * US;
            dfg_set_mend(g, x, g->mstart[x] + 2 * US);
            t = dfg_mend(g, l);
        }
        int32_t y = dfg_add_node(g, DFG_HOST, th, ns);
        REQUIRE(y >= 0);
        g->mstart[y] = t + 2 * US;
        dfg_set_mend(g, y, g->mstart[y] + 1 * US);
        g->flags[y] |= DFG_F_BLOCKING;
        REQUIRE(dfg_add_edge(g, x, y) == 0);
        sync[k] = y;
        t = dfg_mend(g, y);
    }
    REQUIRE(dfg_set_iterations(g, 0, sync, STEPS) == 0);
    REQUIRE(build_derive_timing(g) == 0);
}

/* A host stall at another call in each iteration: each call's median drops it, the
 * thread's typical own time per iteration keeps it. */
static void
test_thread_stall(void)
{
    replay rp;
    memset(&rp, 0, sizeof rp);
    make_stall_graph(&rp.graph);
    rp.iter_last = 2;
    replay_typical t;
    CHECK(replay_typical_replay(&rp, &t) == 0);
    CHECK_EQ(t.matched, 21);
    CHECK(near(t.measured_us, 348.0));
    CHECK(near(t.predicted_us, 348.0)); /* 48 us with the calls' medians alone */
    CHECK(near(t.mean_predicted_us, 348.0));
    dfg_free(&rp.graph);
}

static void
test_perturbation(void)
{
    replay rp;
    make_replay(&rp, 0, 2);
    CHECK_EQ(replay_scale_class(&rp.graph, dfg_intern(&rp.graph, "kern"), -1), -1);
    replay_perturbation p;
    CHECK(replay_perturb(&rp, 5, 0.5, &p) == 0);
    REQUIRE(p.n == 1);
    CHECK(near(p.baseline_us, 214.0));
    CHECK(near(p.baseline_stale_us, 0));
    CHECK(!strcmp(dfg_name(&rp.graph, p.cls[0].name), "kern"));
    CHECK_EQ(p.cls[0].count, 3);
    CHECK(near(p.cls[0].total_us, 200.0));
    CHECK(near(p.cls[0].predicted_us, 114.0)); /* saves all it gives back: on the path */
    /* without it the synchronisation waits for nothing: 10 + 5 + 2 + 1 us */
    CHECK(near(p.cls[0].without_us, 18.0));
    CHECK(near(p.cls[0].stale_wait_us, 0));
    replay_perturbation_free(&p);

    /* without its edges the synchronisations keep their measured waits: the replay of the
     * trace still matches, the prediction does not move, and the waits go stale. Each
     * one's own cost is what it took after its kernel ended, 1 us: step 2 ends 404 us
     * after its launch instead of 3 + 200 + 1, steps 1 and 3 at 104 instead of 3 + 50 + 1:
     * 300 us over 3 iterations, all the time the class gave back. */
    CHECK_EQ(replay_drop_edges(&rp.graph, 1.0), STEPS);
    sim_result r;
    memset(&r, 0, sizeof r);
    CHECK(near(replay_predict(&rp, &rp.graph, &r), 214.0 * US));
    CHECK(replay_perturb(&rp, 5, 0.5, &p) == 0);
    REQUIRE(p.n == 1);
    CHECK(near(p.cls[0].predicted_us, 214.0));
    CHECK(near(p.cls[0].stale_wait_us, 100.0));
    replay_perturbation_free(&p);
    sim_result_free(&r);
    dfg_free(&rp.graph);
}

int
main(void)
{
    test_typical();
    test_drawn();
    test_thread_stall();
    test_rank_wait();
    test_perturbation();
    return tests_done();
}
