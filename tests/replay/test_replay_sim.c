/*
 * test_replay_sim: unit tests of the simulator on tiny hand-made graphs with known answers
 * (wake-ups between threads included), the critical path, the breakdown, graph
 * transformations (clone, a copy reusing its arrays, insertion, remove, merge) and the
 * synthetic generator; the critical path's composition across ranks (replay_cp_compose).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dprotrace.h"
#include "replay/dfg.h"
#include "replay/replay.h"
#include "replay/sim.h"
#include "tests/replay/synth.h"
#include "tests/unit/testutil.h"

/* A tiny graph: thread T launches K1 (10 us) and K2 (20 us) on stream S, then
 * synchronizes. Known timeline. */
static void
test_sim_tiny(void)
{
    dfg g;
    REQUIRE(dfg_init(&g, 1) == 0);
    int32_t T = dfg_add_resource(&g, DFG_RES_THREAD, 0, 1, dfg_intern(&g, "main"));
    int32_t S = dfg_add_resource(&g, DFG_RES_STREAM, 0, 7, dfg_intern(&g, "stream 7"));
    int32_t l1 = dfg_add_node(&g, DFG_HOST, T, dfg_intern(&g, "cudaLaunchKernel"));
    int32_t l2 = dfg_add_node(&g, DFG_HOST, T, dfg_intern(&g, "cudaLaunchKernel"));
    int32_t sy = dfg_add_node(&g, DFG_HOST, T, dfg_intern(&g, "cudaStreamSynchronize"));
    int32_t k1 = dfg_add_node(&g, DFG_KERNEL, S, dfg_intern(&g, "k1"));
    int32_t k2 = dfg_add_node(&g, DFG_KERNEL, S, dfg_intern(&g, "k2"));
    g.gap[l1] = 1000;
    g.dur[l1] = 4000;
    g.gap[l2] = 1000;
    g.dur[l2] = 4000;
    g.gap[sy] = 500;
    g.dur[sy] = 2000;
    g.launch[k1] = l1;
    dfg_set_lat(&g, k1, 2000);
    g.dur[k1] = 10000;
    g.launch[k2] = l2;
    dfg_set_lat(&g, k2, 2000);
    g.dur[k2] = 20000;
    CHECK(dfg_add_edge(&g, k2, sy) == 0);
    int32_t b[2] = {l1, sy};
    CHECK(dfg_set_iterations(&g, 0, b, 2) == 0);
    sim_result r;
    memset(&r, 0, sizeof r);
    CHECK(sim_run(&g, &r) == 0);
    CHECK_EQ(r.n_unfinished, 0);
    /* l1 [1000,5000]; k1 [3000,13000]; l2 [6000,10000]; k2 starts max(13000, 8000) */
    CHECK_EQ(r.start[l1], 1000);
    CHECK_EQ(r.end[l1], 5000);
    CHECK_EQ(r.start[k1], 3000);
    CHECK_EQ(r.end[k1], 13000);
    CHECK_EQ(r.start[l2], 6000);
    CHECK_EQ(r.start[k2], 13000);
    CHECK_EQ(r.end[k2], 33000);
    CHECK_EQ(r.start[sy], 10500);
    CHECK_EQ(r.end[sy], 35000);
    CHECK_EQ(r.makespan, 35000);
    CHECK(sim_iteration_time(&g, sim_timeline_of(&r), 0, 0, 0) == 30000.0);
    /* critical path: l1 -> k1 -> k2 -> sy */
    int32_t *path, np;
    CHECK(sim_critical_path(&g, &r, -1, 0, &path, &np) == 0);
    CHECK_EQ(np, 4);
    if (np == 4) {
        CHECK_EQ(path[0], l1);
        CHECK_EQ(path[1], k1);
        CHECK_EQ(path[2], k2);
        CHECK_EQ(path[3], sy);
        int64_t tot = 0;
        for (int i = 0; i < np; i++)
            tot += sim_path_contribution(&g, &r, path, np, i);
        CHECK_EQ(tot, 35000);
    }
    free(path);
    /* breakdown over [0, 35000): compute 30000, idle 5000 */
    sim_breakdown bd;
    CHECK(sim_breakdown_rank(&g, sim_timeline_of(&r), 0, 0, 35000, &bd) == 0);
    CHECK_EQ(bd.compute, 30000);
    CHECK_EQ(bd.host_idle, 5000);

    /* what-if on a clone: k2 twice as fast; removing l2's launch cost */
    dfg c;
    REQUIRE(dfg_clone(&c, &g) == 0);
    c.dur[k2] = 10000;
    CHECK(sim_run(&c, &r) == 0);
    CHECK_EQ(r.end[sy], 25000);
    CHECK(dfg_merge_nodes(&c, k1, k2) == 0); /* fused kernel: 10 + 10 us */
    CHECK(sim_run(&c, &r) == 0);
    CHECK_EQ(r.end[k1], 23000);
    CHECK_EQ(r.end[sy], 25000);
    CHECK_EQ(dfg_live_nodes(&c), 4);
    CHECK(dfg_remove_node(&c, l2) == 0);
    CHECK(sim_run(&c, &r) == 0);
    CHECK_EQ(r.n_unfinished, 0);
    CHECK_EQ(r.start[sy], 6500); /* l2's gap moved onto the sync */
    /* the original is untouched */
    CHECK(sim_run(&g, &r) == 0);
    CHECK_EQ(r.end[sy], 35000);
    dfg_free(&c);
    sim_result_free(&r);
    dfg_free(&g);
}

/* Wake-ups between threads: thread M runs m1, m2 and then m3 (a blocking call, on the
 * kernel kb); thread B sleeps until M's m2 wakes it (b1, 500 ns later), launches kb and
 * synchronises on it (b2), which wakes M's m3 (300 ns). A what-if that shortens m1 must
 * move B, kb and m3; removing and merging nodes keep the wake-ups. */
static void
test_sim_wakeup(void)
{
    dfg g;
    REQUIRE(dfg_init(&g, 1) == 0);
    int32_t M = dfg_add_resource(&g, DFG_RES_THREAD, 0, 1, dfg_intern(&g, "main"));
    int32_t B = dfg_add_resource(&g, DFG_RES_THREAD, 0, 2, dfg_intern(&g, "backward"));
    int32_t S = dfg_add_resource(&g, DFG_RES_STREAM, 0, 7, dfg_intern(&g, "stream 7"));
    int32_t m1 = dfg_add_node(&g, DFG_HOST, M, dfg_intern(&g, "m1"));
    int32_t m2 = dfg_add_node(&g, DFG_HOST, M, dfg_intern(&g, "m2"));
    int32_t m3 = dfg_add_node(&g, DFG_HOST, M, dfg_intern(&g, "cudaMemcpy"));
    int32_t b0 = dfg_add_node(&g, DFG_HOST, B, dfg_intern(&g, "b0"));
    int32_t b1 = dfg_add_node(&g, DFG_HOST, B, dfg_intern(&g, "cudaLaunchKernel"));
    int32_t b2 = dfg_add_node(&g, DFG_HOST, B, dfg_intern(&g, "cudaStreamSynchronize"));
    int32_t kb = dfg_add_node(&g, DFG_KERNEL, S, dfg_intern(&g, "kb"));
    g.gap[m1] = 1000;
    g.dur[m1] = 4000;
    g.gap[m2] = 1000;
    g.dur[m2] = 3000;
    g.gap[m3] = 200;
    g.dur[m3] = 500;
    g.gap[b0] = 0;
    g.dur[b0] = 1000;
    g.gap[b1] = 7777;
    g.dur[b1] = 2000; /* measured gap: replaced by the latency */
    g.gap[b2] = 100;
    g.dur[b2] = 1000;
    g.launch[kb] = b1;
    dfg_set_lat(&g, kb, 1000);
    g.dur[kb] = 5000;
    CHECK(dfg_add_edge(&g, kb, b2) == 0);
    g.flags[b2] |= DFG_F_BLOCKING;
    CHECK(dfg_add_edge(&g, kb, m3) == 0);
    g.flags[m3] |= DFG_F_BLOCKING;
    CHECK(dfg_add_wakeup(&g, m2, b1, 500) == 0);
    CHECK(g.flags[b1] & DFG_F_WAKEUP);
    CHECK_EQ(dfg_gap(&g, b1), 500);
    int32_t before = g.n_nodes;
    CHECK(dfg_add_wakeup(&g, b2, m3, 300) == 0); /* blocking: a wake-up node before it */
    CHECK_EQ(g.n_nodes, before + 1);
    int32_t w = dfg_prev_on_res(&g, m3);
    CHECK(w >= before && (g.flags[w] & DFG_F_WAKEUP) && !(g.flags[m3] & DFG_F_WAKEUP));
    CHECK_EQ(dfg_gap(&g, w), 300);
    CHECK_EQ(dfg_gap(&g, m3), 0);
    CHECK_EQ(dfg_prev_on_res(&g, w), m2);

    sim_result r;
    memset(&r, 0, sizeof r);
    CHECK(sim_run(&g, &r) == 0);
    CHECK_EQ(r.n_unfinished, 0);
    CHECK_EQ(r.end[m2], 9000);
    CHECK_EQ(r.start[b1], 9500); /* max(b0 end + 500, m2 end + 500) */
    CHECK_EQ(r.start[kb], 10500);
    CHECK_EQ(r.start[b2], 11600);
    CHECK_EQ(r.end[b2], 16500);
    CHECK_EQ(r.start[w], 16800);
    CHECK_EQ(r.end[m3], 17300);
    /* the critical path runs m1 -> m2 -> (wake) b1 -> kb -> b2 -> (wake) w -> m3 */
    int32_t *path, np;
    CHECK(sim_critical_path(&g, &r, m3, 0, &path, &np) == 0);
    int saw_m2 = 0, saw_b1 = 0, saw_b2 = 0;
    for (int32_t i = 0; i < np; i++) {
        saw_m2 |= path[i] == m2;
        saw_b1 |= path[i] == b1;
        saw_b2 |= path[i] == b2;
    }
    CHECK(saw_m2 && saw_b1 && saw_b2);
    free(path);

    /* what-if: m1 3 us shorter moves everything after it by 3 us */
    dfg c;
    REQUIRE(dfg_clone(&c, &g) == 0);
    c.dur[m1] = 1000;
    CHECK(sim_run(&c, &r) == 0);
    CHECK_EQ(r.start[b1], 6500);
    CHECK_EQ(r.end[kb], 12500);
    CHECK_EQ(r.end[m3], 14300);
    dfg_free(&c);

    /* removing the waker: b1 waits for the call before it on M */
    REQUIRE(dfg_clone(&c, &g) == 0);
    CHECK(dfg_remove_node(&c, m2) == 0);
    CHECK(sim_run(&c, &r) == 0);
    CHECK_EQ(r.n_unfinished, 0);
    CHECK_EQ(r.start[b1], 5500);
    dfg_free(&c);

    /* removing the woken call: the blocking call after it gets a wake-up node */
    REQUIRE(dfg_clone(&c, &g) == 0);
    CHECK(dfg_remove_node(&c, b1) == 0);
    int32_t w2 = dfg_prev_on_res(&c, b2);
    CHECK(w2 >= 0 && w2 != b0 && (c.flags[w2] & DFG_F_WAKEUP));
    CHECK(sim_run(&c, &r) == 0);
    CHECK_EQ(r.n_unfinished, 0);
    CHECK_EQ(r.start[kb], 1000); /* relaunched by b0 */
    CHECK_EQ(r.start[w2], 9500);
    CHECK_EQ(r.end[b2], 10600);
    dfg_free(&c);

    /* merging the woken call with the blocking one: the wake-up keeps delaying the start */
    REQUIRE(dfg_clone(&c, &g) == 0);
    CHECK(dfg_merge_nodes(&c, b1, b2) == 0);
    CHECK(!(c.flags[b1] & DFG_F_WAKEUP) && (c.flags[b1] & DFG_F_BLOCKING));
    CHECK(sim_run(&c, &r) == 0);
    CHECK_EQ(r.n_unfinished, 0);
    CHECK_EQ(r.start[b1], 9500);
    CHECK_EQ(r.end[b1], 18500);
    dfg_free(&c);

    /* a woken blocking call that is its thread's first: the wake-up node goes first */
    REQUIRE(dfg_init(&c, 1) == 0);
    int32_t A = dfg_add_resource(&c, DFG_RES_THREAD, 0, 1, 0);
    int32_t C = dfg_add_resource(&c, DFG_RES_THREAD, 0, 3, 0);
    int32_t a0 = dfg_add_node(&c, DFG_HOST, A, dfg_intern(&c, "a0"));
    int32_t c0 = dfg_add_node(&c, DFG_HOST, C, dfg_intern(&c, "cudaDeviceSynchronize"));
    c.gap[a0] = 2000;
    c.dur[a0] = 1000;
    c.gap[c0] = 9999;
    c.dur[c0] = 100;
    c.flags[c0] |= DFG_F_BLOCKING;
    CHECK(dfg_add_wakeup(&c, a0, c0, 50) == 0);
    int32_t w3 = c.res_first[C];
    CHECK(w3 != c0 && c.next_on_res[w3] == c0 && dfg_prev_on_res(&c, c0) == w3 &&
          c.res_last[C] == c0);
    CHECK(sim_run(&c, &r) == 0);
    CHECK_EQ(r.n_unfinished, 0);
    CHECK_EQ(r.start[c0], 3050);
    CHECK_EQ(r.end[c0], 3150);
    dfg_free(&c);

    sim_result_free(&r);
    dfg_free(&g);
}

/* Two ranks, a collective: rank 1 arrives 50 us late; transfer 30 us. */
static void
test_sim_collective(void)
{
    dfg g;
    REQUIRE(dfg_init(&g, 2) == 0);
    int32_t q = dfg_add_group(&g, DPRO_COLL_ALLREDUCE, 2, 1 << 20, 1, 0, 30000);
    int32_t k[2], c[2], after[2];
    for (int r = 0; r < 2; r++) {
        int32_t S = dfg_add_resource(&g, DFG_RES_STREAM, r, 7, 0);
        int32_t N = dfg_add_resource(&g, DFG_RES_STREAM, r, 9, 0);
        k[r] = dfg_add_node(&g, DFG_KERNEL, S, dfg_intern(&g, "k"));
        g.dur[k[r]] = r == 0 ? 100000 : 150000;
        c[r] = dfg_add_node(&g, DFG_COLL, N, dfg_intern(&g, "allreduce"));
        dfg_set_group(&g, c[r], q);
        CHECK(dfg_add_edge(&g, k[r], c[r]) == 0);
        after[r] = dfg_add_node(&g, DFG_KERNEL, N, dfg_intern(&g, "after"));
        g.dur[after[r]] = 1000;
    }
    sim_result r;
    memset(&r, 0, sizeof r);
    CHECK(sim_run(&g, &r) == 0);
    CHECK_EQ(r.start[c[0]], 100000);
    CHECK_EQ(r.start[c[1]], 150000);
    CHECK_EQ(r.grp_arrival[q], 150000);
    CHECK_EQ(r.end[c[0]], 180000);
    CHECK_EQ(r.end[c[1]], 180000);
    CHECK_EQ(r.end[after[0]], 181000);
    sim_breakdown bd;
    CHECK(sim_breakdown_rank(&g, sim_timeline_of(&r), 0, 0, 181000, &bd) == 0);
    CHECK_EQ(bd.compute, 101000);
    CHECK_EQ(bd.wait_ranks, 50000);
    CHECK_EQ(bd.communication, 30000);
    double blame[2];
    int32_t last[2];
    sim_stragglers(&g, sim_timeline_of(&r), 0, 1000000, blame, last);
    CHECK(blame[1] == 50000.0 && blame[0] == 0);
    CHECK_EQ(last[1], 1);
    /* the critical path goes through the late rank */
    int32_t *path, np;
    CHECK(sim_critical_path(&g, &r, after[0], 0, &path, &np) == 0);
    int through = 0;
    for (int i = 0; i < np; i++)
        through |= path[i] == k[1];
    CHECK(through);
    free(path);
    /* its composition: rank 1's kernel is rank 0's wait, the transfer is the collective's
     * (after[0], where the path ends, closes it and counts nothing) */
    replay rp;
    replay_summary s;
    memset(&rp, 0, sizeof rp);
    memset(&s, 0, sizeof s);
    CHECK(replay_cp_compose(&rp, &g, &r, 0, after[0], 0, &s) == 0);
    CHECK_EQ(s.cp_class_ns[REPLAY_CP_WAIT_RANK], 150000);
    CHECK_EQ(s.cp_class_ns[REPLAY_CP_COLLECTIVE], 30000);
    CHECK_EQ(s.cp_length_ns, 180000);
    CHECK(s.n_cp == 2 && s.cp[0].cls == REPLAY_CP_WAIT_RANK && s.cp[0].name == g.name[k[1]]);
    replay_summary_free(&s);
    /* a cycle is reported, not hung on */
    CHECK(dfg_add_edge(&g, after[0], k[0]) == 0);
    CHECK(sim_run(&g, &r) == 0);
    CHECK(r.n_unfinished > 0);
    sim_result_free(&r);
    dfg_free(&g);
}

/* Two ranks leave a measured collective at different times: rank 1 left 20 of its 40 us
 * transfer before rank 0. Simulated with a 30 us transfer, rank 1 leaves 15 us early
 * (the measured share); a participant without a measured span, or a group repriced for
 * more ranks than the graph holds, leaves no one early. */
static void
test_sim_collective_leave_early(void)
{
    dfg g;
    REQUIRE(dfg_init(&g, 2) == 0);
    int32_t q = dfg_add_group(&g, DPRO_COLL_ALLREDUCE, 2, 1 << 20, 1, 0, 40000);
    int32_t k[2], c[2], after[2];
    for (int r = 0; r < 2; r++) {
        int32_t S = dfg_add_resource(&g, DFG_RES_STREAM, r, 7, 0);
        int32_t N = dfg_add_resource(&g, DFG_RES_STREAM, r, 9, 0);
        k[r] = dfg_add_node(&g, DFG_KERNEL, S, dfg_intern(&g, "k"));
        g.dur[k[r]] = r == 0 ? 100000 : 150000;
        c[r] = dfg_add_node(&g, DFG_COLL, N, dfg_intern(&g, "allreduce"));
        dfg_set_group(&g, c[r], q);
        g.mstart[c[r]] = r == 0 ? 100000 : 150000;
        CHECK(dfg_set_mend(&g, c[r], r == 0 ? 190000 : 170000) == 0);
        CHECK(dfg_add_edge(&g, k[r], c[r]) == 0);
        after[r] = dfg_add_node(&g, DFG_KERNEL, N, dfg_intern(&g, "after"));
        g.dur[after[r]] = 1000;
    }
    g.grp_dur[q] = 30000;
    sim_result r;
    memset(&r, 0, sizeof r);
    CHECK(sim_run(&g, &r) == 0);
    CHECK_EQ(r.grp_arrival[q], 150000);
    CHECK_EQ(r.end[c[0]], 180000);
    CHECK_EQ(r.end[c[1]], 165000);
    CHECK_EQ(r.end[after[1]], 166000);
    /* priced for 4 ranks (a what-if's): every participant ends with the transfer */
    g.grp_nranks[q] = 4;
    CHECK(sim_run(&g, &r) == 0);
    CHECK_EQ(r.end[c[1]], 180000);
    g.grp_nranks[q] = 2;
    /* rank 1's participant has no measured span (a transformation made it) */
    CHECK(dfg_set_mend(&g, c[1], 150000) == 0);
    CHECK(sim_run(&g, &r) == 0);
    CHECK_EQ(r.end[c[0]], 180000);
    CHECK_EQ(r.end[c[1]], 180000);
    sim_result_free(&r);
    dfg_free(&g);
}

static void
test_synth(void)
{
    synth_params p;
    synth_defaults(&p);
    p.ranks = 8;
    p.iterations = 4;
    dfg g, gc;
    REQUIRE(synth_dfg(&p, &g) == 0);
    p.classes = 2;
    REQUIRE(synth_dfg(&p, &gc) == 0);
    sim_result r, rc;
    memset(&r, 0, sizeof r);
    memset(&rc, 0, sizeof rc);
    CHECK(sim_run(&g, &r) == 0 && sim_run(&gc, &rc) == 0);
    CHECK_EQ(r.n_unfinished, 0);
    CHECK_EQ(rc.n_unfinished, 0);
    /* equivalence classes give the same iteration time as every rank */
    double a = sim_iteration_time(&g, sim_timeline_of(&r), 0, 0, 3);
    double b = sim_iteration_time(&gc, sim_timeline_of(&rc), 0, 0, 3);
    CHECK(a > 0 && fabs(a - b) < 1.0);
    CHECK_EQ(gc.n_ranks, 2);
    /* merging two collective groups keeps the graph runnable */
    CHECK(dfg_merge_groups(&g, 0, 1) == 0);
    CHECK(sim_run(&g, &r) == 0);
    CHECK_EQ(r.n_unfinished, 0);
    sim_result_free(&r);
    sim_result_free(&rc);
    dfg_free(&g);
    dfg_free(&gc);
}

/* The breakdown counts NCCL kernels that are no collective node (imported "SendRecv"
 * kernels, which name no peer) as communication, as dpro-info does (dpro_kernel_is_comm),
 * not as compute: a compute kernel [0, 10 us) and a SendRecv kernel [10, 30 us). */
static void
test_breakdown_comm_kernels(void)
{
    dfg g;
    CHECK(dfg_init(&g, 1) == 0);
    int32_t S = dfg_add_resource(&g, DFG_RES_STREAM, 0, 7, 0);
    int32_t k = dfg_add_node(&g, DFG_KERNEL, S, dfg_intern(&g, "void gemm<float>(float*)"));
    int32_t x =
        dfg_add_node(&g, DFG_KERNEL, S,
                     dfg_intern(&g, "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"));
    g.dur[k] = 10000;
    g.dur[x] = 20000;
    sim_result r;
    memset(&r, 0, sizeof r);
    CHECK(sim_run(&g, &r) == 0);
    sim_breakdown bd;
    CHECK(sim_breakdown_rank(&g, sim_timeline_of(&r), 0, 0, 30000, &bd) == 0);
    CHECK_EQ(bd.compute, 10000);
    CHECK_EQ(bd.communication, 20000);
    CHECK_EQ(bd.host_idle, 0);
    sim_result_free(&r);
    dfg_free(&g);
}

/* Iteration statistics over 4 and then 5 iterations of one thread, 100 us each but the
 * third, 910 us longer (a stall): the mean carries it (327.5 us), the median does not
 * (100 us, and 100 us over 5 with an odd count); a range past the boundaries is -1. */
static void
test_iteration_median(void)
{
    dfg g;
    REQUIRE(dfg_init(&g, 1) == 0);
    int32_t T = dfg_add_resource(&g, DFG_RES_THREAD, 0, 1, dfg_intern(&g, "main"));
    int32_t b[6];
    for (int i = 0; i < 6; i++) {
        b[i] = dfg_add_node(&g, DFG_HOST, T, dfg_intern(&g, "step"));
        g.gap[b[i]] = i == 3 ? 1000000 : 90000; /* the gap before closing iteration 2 */
        g.dur[b[i]] = 10000;
    }
    CHECK(dfg_set_iterations(&g, 0, b, 6) == 0);
    sim_result r;
    memset(&r, 0, sizeof r);
    CHECK(sim_run(&g, &r) == 0);
    sim_timeline tl = sim_timeline_of(&r);
    CHECK(fabs(sim_iteration_time(&g, tl, 0, 0, 3) - 327500.0) < 1);
    CHECK(fabs(sim_iteration_median(&g, tl, 0, 0, 3) - 100000.0) < 1);
    CHECK(fabs(sim_iteration_median(&g, tl, 0, 0, 4) - 100000.0) < 1);
    CHECK(fabs(sim_iteration_median(&g, tl, 0, 2, 3) - 555000.0) < 1); /* (1010 + 100) / 2 */
    CHECK(sim_iteration_median(&g, tl, 0, 0, 5) == -1);
    CHECK(sim_iteration_median(&g, tl, 0, 3, 2) == -1);
    sim_result_free(&r);
    dfg_free(&g);
}

/* Makespan of g simulated (0 when it does not finish). */
static int64_t
makespan_of(dfg *g)
{
    sim_result r;
    memset(&r, 0, sizeof r);
    int64_t m = sim_run(g, &r) == 0 && r.n_unfinished == 0 ? r.makespan : 0;
    sim_result_free(&r);
    return m;
}

/* dfg_copy into one graph again and again (a plan's copy a search reuses): a small job,
 * then a larger one (the arrays grow), a node inserted into the copy, then the small one
 * again (the arrays reused, larger than it needs): each copy simulates as its source does
 * and holds its nodes, edges and groups, the source untouched. And dfg_insert_between with
 * the node before given gives the graph dfg_insert_before gives. */
static void
test_dfg_copy_reuse(void)
{
    synth_params p;
    synth_defaults(&p);
    p.ranks = 2;
    dfg small, big, c;
    REQUIRE(synth_dfg(&p, &small) == 0);
    p.ranks = 4;
    p.iterations = 5;
    REQUIRE(synth_dfg(&p, &big) == 0);
    int64_t ms = makespan_of(&small), mb = makespan_of(&big);
    CHECK(ms > 0 && mb > 0);
    memset(&c, 0, sizeof c);
    REQUIRE(dfg_copy(&c, &small) == 0);
    CHECK(c.n_nodes == small.n_nodes && c.n_edges == small.n_edges && makespan_of(&c) == ms);
    REQUIRE(dfg_copy(&c, &big) == 0);
    CHECK(c.n_nodes == big.n_nodes && c.n_groups == big.n_groups && makespan_of(&c) == mb);
    int32_t k = -1;
    for (int32_t d = 0; d < c.n_nodes && k < 0; d++)
        k = c.kind[d] == DFG_KERNEL ? d : -1;
    REQUIRE(k >= 0);
    CHECK(dfg_insert_before(&c, k, DFG_KERNEL, dfg_intern(&c, "added"), 1000 * 1000) >= 0);
    CHECK(makespan_of(&c) > mb);
    REQUIRE(dfg_copy(&c, &small) == 0);
    CHECK(c.n_nodes == small.n_nodes && c.n_edges == small.n_edges && c.n_ranks == small.n_ranks &&
          makespan_of(&c) == ms);
    CHECK(makespan_of(&big) == mb && makespan_of(&small) == ms);
    /* insertion with the previous node known, against the walk */
    dfg a, b;
    REQUIRE(dfg_clone(&a, &big) == 0 && dfg_clone(&b, &big) == 0);
    int32_t before = -1;
    for (int32_t d = 0, seen = 0; d < big.n_nodes && before < 0; d++)
        before = big.kind[d] == DFG_KERNEL && ++seen == 5 ? d : -1;
    REQUIRE(before >= 0);
    int32_t x = dfg_insert_before(&a, before, DFG_KERNEL, dfg_intern(&a, "added"), 5000);
    int32_t y = dfg_insert_between(&b, dfg_prev_on_res(&b, before), before, DFG_KERNEL,
                                   dfg_intern(&b, "added"), 5000);
    CHECK(x >= 0 && x == y);
    CHECK(dfg_prev_on_res(&a, before) == x && dfg_prev_on_res(&b, before) == y);
    CHECK(a.next_on_res[x] == before && b.next_on_res[y] == before);
    CHECK(makespan_of(&a) == makespan_of(&b) && makespan_of(&a) > 0);
    dfg_free(&a);
    dfg_free(&b);
    dfg_free(&c);
    dfg_free(&small);
    dfg_free(&big);
}

int
main(void)
{
    test_iteration_median();
    test_sim_tiny();
    test_sim_wakeup();
    test_sim_collective();
    test_sim_collective_leave_early();
    test_breakdown_comm_kernels();
    test_synth();
    test_dfg_copy_reuse();
    return tests_done();
}
