/*
 * test_replay_unit: unit tests of the replay's pure parts: clock alignment with injected
 * offsets, the collective cost-model fit, iteration detection, the simulator on tiny
 * hand-made graphs with known answers (wake-ups between threads included), the
 * critical path, the breakdown, graph transformations (clone, remove, merge), the
 * synthetic generator, and the builder's timing inference on hand-made measured graphs
 * (launch-queue backpressure, pure submission latency) checked by what-if predictions
 * against a reference model of the device; send/recv: pairing by channel and ordinal,
 * grouped calls, refused pairs, the events scan (grouped calls carried by ncclGroupEnd's
 * kernel, collective ordinals without send/recv) and clock alignment through a pipeline.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dprotrace.h"
#include "replay/align.h"
#include "replay/build.h"
#include "replay/contention.h"
#include "replay/costmodel.h"
#include "replay/dfg.h"
#include "replay/iter.h"
#include "replay/job.h"
#include "replay/sim.h"
#include "tests/replay/synth.h"
#include "tests/unit/testutil.h"

static uint64_t rng = 88172645463325252ULL;
static int64_t
noise(int64_t amp)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return amp ? (int64_t)(rng % (uint64_t)(2 * amp + 1)) - amp : 0;
}

static void
test_align(void)
{
    /* 6 ranks, true offsets, 200 collectives each ending within +-2 us; one outlier; rank
     * 5 shares nothing; a sub-communicator links rank 4 only through rank 3 */
    enum { R = 6, C = 200 };
    int64_t skew[R] = {0, 5000000, -3000000, 123456, -987654, 42};
    align_sample s[R * C + 2 * C];
    size_t n = 0;
    for (int c = 0; c < C; c++) {
        int64_t end = 1000000000LL + c * 100000;
        for (int r = 0; r < 4; r++) /* world comm without 4 and 5 */
            s[n++] = (align_sample){0xabc, (uint64_t)c, r, end + noise(2000) - skew[r]};
    }
    s[3].end_ns += 500000; /* one late outlier on rank 3 */
    for (int c = 0; c < C; c++) {
        int64_t end = 2000000000LL + c * 100000;
        s[n++] = (align_sample){0xdef, (uint64_t)c, 3, end + noise(2000) - skew[3]};
        s[n++] = (align_sample){0xdef, (uint64_t)c, 4, end + noise(2000) - skew[4]};
    }
    uint8_t present[R] = {1, 1, 1, 1, 1, 1};
    align_result a;
    CHECK(align_clocks_from_collectives(s, n, R, present, &a) == 0);
    CHECK_EQ(a.reference, 0);
    for (int r = 0; r < 5; r++) {
        CHECK(a.aligned[r]);
        CHECK(llabs(a.offset_ns[r] - (skew[r] - skew[0])) < 20000); /* within 20 us */
        CHECK(llabs(a.offset_ns[r] - (skew[r] - skew[0])) < 3000);
    }
    CHECK(!a.aligned[5]);
    CHECK_EQ(a.n_unaligned, 1);
    CHECK(a.residual_median_us < 5.0);
    CHECK(a.residual_max_us >= 400.0); /* the outlier shows */
    align_result_free(&a);
    /* nothing at all: only the reference is aligned */
    CHECK(align_clocks_from_collectives(NULL, 0, 2, NULL, &a) == 0);
    CHECK(a.aligned[0] && !a.aligned[1]);
    align_result_free(&a);
}

static void
test_costmodel(void)
{
    /* transfer = 15 us + factor * bytes / 12 B/ns, 8 ranks, plus waiting outliers */
    costmodel_sample s[64];
    size_t n = 0;
    for (int i = 0; i < 40; i++) {
        int64_t bytes = (int64_t)(1 + i % 10) << 20;
        double t = 15000 + costmodel_factor(DPRO_COLL_ALLREDUCE, 8) * (double)bytes / 12.0;
        s[n++] = (costmodel_sample){DPRO_COLL_ALLREDUCE, 8, bytes, (int64_t)t + noise(300)};
    }
    s[0].transfer_ns *= 3; /* outliers */
    s[7].transfer_ns *= 4;
    s[n++] = (costmodel_sample){DPRO_COLL_BROADCAST, 8, 1 << 20, 50000};
    costmodel m;
    CHECK(costmodel_fit_samples(&m, s, n) == 0);
    const costmodel_fit *f = &m.op[DPRO_COLL_ALLREDUCE];
    CHECK(f->fitted);
    CHECK(fabs(f->alpha_ns - 15000) < 1000);
    CHECK(fabs(f->beta_bpns - 12.0) < 0.3);
    int64_t p = costmodel_predict(&m, DPRO_COLL_ALLREDUCE, 8, 64 << 20);
    double want = 15000 + 1.75 * (double)(64 << 20) / 12.0;
    CHECK(fabs((double)p - want) / want < 0.03);
    /* one size only: through the point */
    CHECK_EQ(costmodel_predict(&m, DPRO_COLL_BROADCAST, 8, 1 << 20), 50000);
    /* an op without samples borrows the global fit */
    CHECK(costmodel_predict(&m, DPRO_COLL_ALLGATHER, 8, 1 << 20) > 0);
    CHECK(costmodel_factor(DPRO_COLL_ALLREDUCE, 1) == 1.0);
    CHECK(dpro_nccl_dtype_size(7) == 4 && dpro_nccl_dtype_size(9) == 2);
}

/* The known piecewise truth of test_costmodel_piecewise: three regimes (a latency-bound
 * protocol, a middle one, a bandwidth-bound one) of an all-reduce on 2 ranks (factor 1). */
static double
pw_truth(double x)
{
    if (x < 65536)
        return 10000 + x / 2.0;
    if (x < (1 << 20))
        return 30000 + x / 20.0;
    return 60000 + x / 150.0;
}

static void
test_costmodel_piecewise(void)
{
    costmodel_sample s[512];
    size_t n = 0;
    /* sizes 4 KiB .. 64 MiB at powers of 2 and 1.5 x those, 8 samples each, 1 % noise */
    for (int e = 12; e <= 26; e++)
        for (int h = 0; h < 2; h++)
            for (int r = 0; r < 8; r++) {
                int64_t bytes = h ? (int64_t)3 << (e - 1) : (int64_t)1 << e;
                double t = pw_truth((double)bytes);
                s[n++] = (costmodel_sample){DPRO_COLL_ALLREDUCE, 2, bytes,
                                            (int64_t)(t * (1 + (double)noise(1000) / 1e5))};
            }
    costmodel m;
    CHECK(costmodel_fit_samples(&m, s, n) == 0);
    const costmodel_fit *f = &m.op[DPRO_COLL_ALLREDUCE];
    CHECK(m.piecewise && f->n_sizes == 30);
    /* the regime changes are found where they are */
    CHECK_EQ(f->n_segs, 3);
    CHECK(f->seg[0].hi < 65536 && f->seg[1].lo >= 65536);
    CHECK(f->seg[1].hi < (1 << 20) && f->seg[2].lo >= (1 << 20));
    CHECK(fabs(f->seg[2].beta_bpns - 150) < 5 && fabs(f->seg[0].alpha_ns - 10000) < 500);
    /* sizes never seen (inside the regimes, and past the largest): within 3 %; the single
     * alpha-beta line misses some of them by far more */
    double worst_pw = 0, worst_ab = 0;
    const int64_t held[] = {5000,   20000,   50000,    100000,   300000,
                            700000, 2000000, 10000000, 100000000};
    for (size_t i = 0; i < sizeof held / sizeof held[0]; i++) {
        double want = pw_truth((double)held[i]);
        m.piecewise = 1;
        double e1 = fabs((double)costmodel_predict(&m, DPRO_COLL_ALLREDUCE, 2, held[i]) - want);
        m.piecewise = 0;
        double e0 = fabs((double)costmodel_predict(&m, DPRO_COLL_ALLREDUCE, 2, held[i]) - want);
        worst_pw = fmax(worst_pw, e1 / want);
        worst_ab = fmax(worst_ab, e0 / want);
    }
    CHECK(worst_pw < 0.03);
    CHECK(worst_ab > 0.2);
    /* between two segments: on the straight line joining their ends */
    m.piecewise = 1;
    double lo = costmodel_piecewise_at(f, f->seg[0].hi),
           hi = costmodel_piecewise_at(f, f->seg[1].lo);
    double mid = costmodel_piecewise_at(f, (f->seg[0].hi + f->seg[1].lo) / 2);
    CHECK(fabs(mid - (lo + hi) / 2) < 1);

    /* thin data: one line (no regime is invented from noise) over 3 sizes of one regime */
    n = 0;
    for (int r = 0; r < 30; r++) {
        int64_t bytes = (int64_t)(2 + r % 3) << 20;
        s[n++] = (costmodel_sample){
            DPRO_COLL_ALLREDUCE, 2, bytes,
            (int64_t)(pw_truth((double)bytes) * (1 + (double)noise(2000) / 1e5))};
    }
    CHECK(costmodel_fit_samples(&m, s, n) == 0);
    CHECK_EQ(m.op[DPRO_COLL_ALLREDUCE].n_segs, 1);
    CHECK(fabs((double)costmodel_predict(&m, DPRO_COLL_ALLREDUCE, 2, 8 << 20) - pw_truth(8 << 20)) /
              pw_truth(8 << 20) <
          0.03);
    /* one size: through that point; an op without samples: the global fit */
    n = 0;
    for (int r = 0; r < 5; r++)
        s[n++] = (costmodel_sample){DPRO_COLL_BROADCAST, 2, 1 << 20, 50000};
    CHECK(costmodel_fit_samples(&m, s, n) == 0);
    CHECK_EQ(m.op[DPRO_COLL_BROADCAST].n_segs, 1);
    CHECK_EQ(costmodel_predict(&m, DPRO_COLL_BROADCAST, 2, 1 << 20), 50000);
    CHECK_EQ(costmodel_predict(&m, DPRO_COLL_BROADCAST, 2, 2 << 20), 100000);
    CHECK(m.op[DPRO_COLL_ALLGATHER].n_segs == 0 &&
          costmodel_predict(&m, DPRO_COLL_ALLGATHER, 2, 2 << 20) == 50000);
}

/* Overlap of [a, b] with [c, e], as a fraction of b - a. */
static double
olap_frac(double a, double b, double c, double e)
{
    double x = a > c ? a : c, y = b < e ? b : e;
    return y > x && b > a ? (y - x) / (b - a) : 0;
}

/* A job of `iters` iterations on one rank: 10 compute kernels per iteration at fixed
 * starts (each place its own length), and one collective whose transfer starts at a time
 * that moves between iterations; compute kernels are stretched by 1 + kp f (f: their
 * overlap with the transfer) and the transfer by 1 + kc f (its overlap with compute). */
static int
build_contention_job(dfg *g, int iters, double kp, double kc)
{
    if (dfg_init(g, 1) != 0)
        return -1;
    int32_t th = dfg_add_resource(g, DFG_RES_THREAD, 0, 1, dfg_intern(g, "main"));
    int32_t cs = dfg_add_resource(g, DFG_RES_STREAM, 0, 7, dfg_intern(g, "stream 7"));
    int32_t ms = dfg_add_resource(g, DFG_RES_STREAM, 0, 8, dfg_intern(g, "stream 8"));
    int32_t nm_h = dfg_intern(g, "cudaStreamSynchronize"), nm_k = dfg_intern(g, "gemm");
    int32_t nm_c = dfg_intern(g, "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
    int32_t bounds[64];
    for (int it = 0; it <= iters && it < 63; it++) {
        double T = it * 1e6;
        int32_t h = dfg_add_node(g, DFG_HOST, th, nm_h);
        g->mstart[h] = (int64_t)T;
        g->mend[h] = (int64_t)T + 1000;
        bounds[it] = h;
        if (it == iters)
            break;
        double c0 = T + 100e3 + (double)((it * 37) % 23) * 20e3, c1 = c0 + 150e3;
        double ks[10], ke[10];
        for (int k = 0; k < 10; k++) {
            ks[k] = T + 20e3 + k * 80e3;
            ke[k] = ks[k] + 40e3 + 2e3 * k;
        }
        for (int round = 0; round < 4; round++) { /* the stretches see each other */
            double fc = 0;
            for (int k = 0; k < 10; k++)
                fc += olap_frac(c0, c1, ks[k], ke[k]);
            double ne[10];
            for (int k = 0; k < 10; k++)
                ne[k] = ks[k] + (40e3 + 2e3 * k) * (1 + kp * olap_frac(ks[k], ke[k], c0, c1));
            c1 = c0 + 150e3 * (1 + kc * fc);
            memcpy(ke, ne, sizeof ke);
        }
        for (int k = 0; k < 10; k++) {
            int32_t d = dfg_add_node(g, DFG_KERNEL, cs, nm_k);
            g->mstart[d] = (int64_t)ks[k];
            g->mend[d] = (int64_t)ke[k];
        }
        int32_t q =
            dfg_add_group(g, DPRO_COLL_ALLREDUCE, 1, 1 << 20, 5, (uint64_t)it, (int64_t)(c1 - c0));
        int32_t c = dfg_add_node(g, DFG_KERNEL, ms, nm_c);
        if (q < 0 || c < 0)
            return -1;
        dfg_set_group(g, c, q);
        g->mstart[c] = (int64_t)c0;
        g->mend[c] = (int64_t)c1;
    }
    return dfg_set_iterations(g, 0, bounds, iters + 1) == 0 ? dfg_finalize(g) : -1;
}

static void
test_contention(void)
{
    dfg g;
    contention c;
    REQUIRE(build_contention_job(&g, 60, 0.3, 0.2) == 0);
    CHECK(contention_measure(&g, &c) == 0);
    CHECK(c.comp.fitted && c.comm.fitted);
    CHECK(c.comp.informative >= CONTENTION_MIN_SAMPLES);
    CHECK(fabs(c.comp.k - 0.3) < 0.05);
    CHECK(fabs(c.comm.k - 0.2) < 0.05);
    /* the overlaps of a schedule: kernel 0 of iteration 1 starts before any transfer */
    double *fn = malloc(sizeof *fn * (size_t)g.n_nodes),
           *fg = malloc(sizeof *fg * (size_t)g.n_groups);
    REQUIRE(fn && fg);
    CHECK(contention_overlaps(&g, g.mstart, g.mend, NULL, fn, fg) == 0);
    CHECK(fn[0] < 0);       /* a host call */
    CHECK(fn[12 + 1] == 0); /* iteration 1's first kernel, before its transfer */
    CHECK(fg[0] > 0 && fg[0] <= 1);
    free(fn);
    free(fg);
    dfg_free(&g);
    /* no contention in the data: none measured */
    REQUIRE(build_contention_job(&g, 60, 0, 0) == 0);
    CHECK(contention_measure(&g, &c) == 0);
    CHECK(c.comp.fitted && c.comp.k < 0.01 && c.comm.k < 0.01);
    dfg_free(&g);
    /* thin data (2 iterations): not fitted, no factor */
    REQUIRE(build_contention_job(&g, 2, 0.3, 0.2) == 0);
    CHECK(contention_measure(&g, &c) == 0);
    CHECK(!c.comp.fitted && c.comp.k == 0 && !c.comm.fitted);
    dfg_free(&g);
}

static void
test_iter(void)
{
    int key;
    CHECK(iter_text_is_iteration("iteration 3", &key));
    CHECK(iter_text_is_iteration("ProfilerStep#12", &key) && key == 1);
    CHECK(iter_text_is_iteration("step 7", &key));
    CHECK(iter_text_is_iteration("train_step", &key));
    CHECK(!iter_text_is_iteration("steps_per_epoch_setup", &key));
    CHECK(!iter_text_is_iteration("forward", &key));
    CHECK(!iter_text_is_iteration("iterator_next", &key));

    /* 3 repeated layers (period 3) inside a 40-kernel iteration, 2 warm-up kernels */
    uint32_t names[2 + 40 * 6];
    size_t n = 0;
    names[n++] = 99;
    names[n++] = 98;
    for (int it = 0; it < 6; it++)
        for (int k = 0; k < 40; k++)
            names[n++] = k < 36 ? (uint32_t)(1 + k % 3) : (uint32_t)(10 + k);
    size_t p = 0;
    double match = 0;
    CHECK(iter_find_period(names, n, &p, &match) == 0);
    CHECK_EQ(p, 40);
    /* cut in the middle of an iteration: still 40 */
    CHECK(iter_find_period(names, n - 17, &p, &match) == 0);
    CHECK_EQ(p, 40);
    /* approximate: one kernel differs in every iteration's middle */
    for (int it = 0; it < 6; it++)
        names[2 + it * 40 + 5 + it] = 77;
    CHECK(iter_find_period(names, n, &p, &match) == 0);
    CHECK_EQ(p, 40);
    /* no repetition */
    uint32_t none[50];
    for (int i = 0; i < 50; i++)
        none[i] = (uint32_t)i;
    CHECK(iter_find_period(none, 50, &p, &match) != 0);

    int64_t starts[8] = {0, 3000, 5000, 6000, 7000, 8000, 9000, 10000};
    uint8_t wu[8];
    CHECK_EQ(iter_mark_warmup(starts, 8, 0.10, wu), 2);
    CHECK(wu[0] && wu[1] && !wu[2]);
}

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
    g.lat[k1] = 2000;
    g.dur[k1] = 10000;
    g.launch[k2] = l2;
    g.lat[k2] = 2000;
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
    g.lat[kb] = 1000;
    g.dur[kb] = 5000;
    CHECK(dfg_add_edge(&g, kb, b2) == 0);
    g.flags[b2] |= DFG_F_BLOCKING;
    CHECK(dfg_add_edge(&g, kb, m3) == 0);
    g.flags[m3] |= DFG_F_BLOCKING;
    CHECK(dfg_add_wakeup(&g, m2, b1, 500) == 0);
    CHECK(g.flags[b1] & DFG_F_WAKEUP);
    CHECK_EQ(g.gap[b1], 500);
    int32_t before = g.n_nodes;
    CHECK(dfg_add_wakeup(&g, b2, m3, 300) == 0); /* blocking: a wake-up node before it */
    CHECK_EQ(g.n_nodes, before + 1);
    int32_t w = g.prev_on_res[m3];
    CHECK(w >= before && (g.flags[w] & DFG_F_WAKEUP) && !(g.flags[m3] & DFG_F_WAKEUP));
    CHECK_EQ(g.gap[w], 300);
    CHECK_EQ(g.gap[m3], 0);
    CHECK_EQ(g.prev_on_res[w], m2);

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
    int32_t w2 = c.prev_on_res[b2];
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
    CHECK(w3 != c0 && c.next_on_res[w3] == c0 && c.prev_on_res[c0] == w3 && c.res_last[C] == c0);
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
    /* a cycle is reported, not hung on */
    CHECK(dfg_add_edge(&g, after[0], k[0]) == 0);
    CHECK(sim_run(&g, &r) == 0);
    CHECK(r.n_unfinished > 0);
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

/* ---- builder timing inference, against a reference model ------------------------------- */

/* A reference single-stream device fed by one host thread: call k starts hgap after
 * call k-1 returned and returns cost after it started, or cost after op k-Q finished
 * when more than Q - 1 earlier ops are unfinished (Q = 0: an unbounded queue); op k
 * starts at max(end of op k-1 + dgap, call start + lat) and runs kdur[k]. Every
 * sync_every ops (0: never) the thread synchronises with the stream (a call that
 * returns cost after the last op ended), then waits wait_ns before going on. */
typedef struct refjob {
    int n, q, sync_every;
    int64_t cost, hgap, dgap, lat, wait_ns;
    const int64_t *kdur;
    /* out: per op its call's and its own times; per sync its call's */
    int64_t *ls, *le, *ds, *de, *ss, *se;
} refjob;

static void
ref_run(refjob *j)
{
    int64_t t = 0;
    int ns = 0;
    for (int k = 0; k < j->n; k++) {
        j->ls[k] = t + j->hgap;
        int64_t ready = j->ls[k];
        if (j->q > 0 && k >= j->q && j->de[k - j->q] > ready)
            ready = j->de[k - j->q];
        j->le[k] = ready + j->cost;
        int64_t s = j->ls[k] + j->lat;
        if (k > 0 && j->de[k - 1] + j->dgap > s)
            s = j->de[k - 1] + j->dgap;
        j->ds[k] = s;
        j->de[k] = s + j->kdur[k];
        t = j->le[k];
        if (j->sync_every > 0 && (k + 1) % j->sync_every == 0) {
            j->ss[ns] = t + j->hgap;
            j->se[ns] = (j->de[k] > j->ss[ns] ? j->de[k] : j->ss[ns]) + j->cost;
            t = j->se[ns++] + j->wait_ns;
        }
    }
}

/* The graph of a reference run with its measured times; host[k] / dev[k] receive the
 * nodes of op k, sync[i] those of the synchronisations. */
static void
ref_graph(const refjob *j, dfg *g, int32_t *host, int32_t *dev, int32_t *sync)
{
    REQUIRE(dfg_init(g, 1) == 0);
    int32_t T = dfg_add_resource(g, DFG_RES_THREAD, 0, 1, 0);
    int32_t S = dfg_add_resource(g, DFG_RES_STREAM, 0, 7, 0);
    int32_t nl = dfg_intern(g, "cudaLaunchKernel"), nk = dfg_intern(g, "k");
    int32_t ny = dfg_intern(g, "cudaStreamSynchronize");
    int ns = 0;
    for (int k = 0; k < j->n; k++) {
        int32_t h = dfg_add_node(g, DFG_HOST, T, nl);
        g->mstart[h] = j->ls[k];
        g->mend[h] = j->le[k];
        int32_t d = dfg_add_node(g, DFG_KERNEL, S, nk);
        g->mstart[d] = j->ds[k];
        g->mend[d] = j->de[k];
        g->launch[d] = h;
        host[k] = h;
        dev[k] = d;
        if (j->sync_every > 0 && (k + 1) % j->sync_every == 0) {
            int32_t y = dfg_add_node(g, DFG_HOST, T, ny);
            g->mstart[y] = j->ss[ns];
            g->mend[y] = j->se[ns];
            CHECK(dfg_add_edge(g, d, y) == 0);
            g->flags[y] |= DFG_F_BLOCKING;
            sync[ns++] = y;
        }
    }
}

static refjob
ref_alloc(int n)
{
    refjob j;
    memset(&j, 0, sizeof j);
    j.n = n;
    j.ls = calloc((size_t)n, sizeof *j.ls);
    j.le = calloc((size_t)n, sizeof *j.le);
    j.ds = calloc((size_t)n, sizeof *j.ds);
    j.de = calloc((size_t)n, sizeof *j.de);
    j.ss = calloc((size_t)n, sizeof *j.ss);
    j.se = calloc((size_t)n, sizeof *j.se);
    return j;
}

static void
ref_free(refjob *j)
{
    free(j->ls);
    free(j->le);
    free(j->ds);
    free(j->de);
    free(j->ss);
    free(j->se);
}

/* Launch-queue backpressure: a host far ahead of a device-bound stream, held back by a
 * queue of 100 ops. The builder must find Q = 100, give the held calls their normal cost,
 * replay the trace exactly, and predict the reference's timeline when the kernels take
 * half (the host follows the device) or twice as long; without the queue the host would
 * keep its measured call durations and a faster device would change nothing. */
static void
test_launch_queue(void)
{
    enum { N = 600, Q = 100 };
    int64_t kd[N], kd_half[N], kd_twice[N];
    for (int k = 0; k < N; k++) {
        kd[k] = 60000 + (k % 7) * 10000; /* 60-120 us kernels */
        kd_half[k] = kd[k] / 2;
        kd_twice[k] = kd[k] * 2;
    }
    refjob m = ref_alloc(N);
    m.q = Q;
    m.cost = 5000;
    m.hgap = 2000;
    m.dgap = 1500;
    m.lat = 7000;
    m.kdur = kd;
    ref_run(&m);
    CHECK(m.le[N - 1] - m.ls[N - 1] > 50000); /* the host is held back */
    dfg g;
    int32_t host[N], dev[N], sync[1];
    ref_graph(&m, &g, host, dev, sync);
    build_queue_info qi;
    CHECK(build_launch_queue(&g, 0, &qi) == 0);
    CHECK_EQ(qi.depth, Q);
    CHECK_EQ(qi.per_stream, 1);
    CHECK_EQ(qi.launch_cost_ns, 5000);
    int32_t waited = 0; /* calls the reference held: op k - Q unfinished at their start */
    for (int k = Q; k < N; k++)
        waited += m.de[k - Q] > m.ls[k];
    CHECK_EQ(qi.held, waited);
    CHECK(qi.long_calls > 0 && qi.explained == qi.long_calls);
    CHECK_EQ(qi.edges, N - Q);
    CHECK(build_derive_timing(&g) == 0);
    CHECK_EQ(g.dur[host[N - 1]], 5000); /* its normal cost, not the wait */
    CHECK((g.flags[host[N - 1]] & DFG_F_QUEUED) && !(g.flags[host[N - 1]] & DFG_F_BLOCKING));
    CHECK_EQ(build_submission_latency(&g, 0), 7000);
    sim_result r;
    memset(&r, 0, sizeof r);
    CHECK(sim_run(&g, &r) == 0);
    CHECK_EQ(r.n_unfinished, 0);
    int exact = 1;
    for (int k = 0; k < N; k++)
        exact &= r.end[host[k]] == m.le[k] && r.end[dev[k]] == m.de[k];
    CHECK(exact);
    /* what-ifs: kernels x 0.5 and x 2 against the reference */
    for (int w = 0; w < 2; w++) {
        const int64_t *kw = w == 0 ? kd_half : kd_twice;
        refjob x = ref_alloc(N);
        x.q = Q;
        x.cost = m.cost;
        x.hgap = m.hgap;
        x.dgap = m.dgap;
        x.lat = m.lat;
        x.kdur = kw;
        ref_run(&x);
        dfg c;
        REQUIRE(dfg_clone(&c, &g) == 0);
        for (int k = 0; k < N; k++)
            c.dur[dev[k]] = kw[k];
        CHECK(sim_run(&c, &r) == 0);
        int same = 1;
        for (int k = 0; k < N; k++)
            same &= r.end[host[k]] == x.le[k] && r.end[dev[k]] == x.de[k];
        CHECK(same);
        /* the host's last call follows the device: about half (twice) as late */
        double ratio = (double)r.end[host[N - 1]] / (double)m.le[N - 1];
        CHECK(w == 0 ? ratio < 0.55 : ratio > 1.9);
        dfg_free(&c);
        ref_free(&x);
    }
    dfg_free(&g);

    /* no backpressure: an unbounded queue, a few long calls for another reason (the first
     * launch of each kernel loads its module) -> no queue, no edges */
    refjob u = ref_alloc(N);
    u.cost = 5000;
    u.hgap = 2000;
    u.dgap = 1500;
    u.lat = 7000;
    u.kdur = kd;
    ref_run(&u);
    for (int k = 0; k < 20; k++)
        u.le[k * 30] += 300000;
    ref_graph(&u, &g, host, dev, sync);
    CHECK(build_launch_queue(&g, 0, &qi) == 0);
    CHECK_EQ(qi.depth, 0);
    CHECK_EQ(qi.edges, 0);
    CHECK_EQ(g.n_edges, 0);
    dfg_free(&g);
    ref_free(&u);
    ref_free(&m);
    sim_result_free(&r);
}

/* Pure submission latency: iterations of 10 launches onto a busy stream, closed by a
 * stream synchronisation; the device leaves 2 us between kernels (more than the builder's
 * idle threshold), so every op "starts on an idle stream" but only the first of each
 * iteration is launch-bound; the others waited behind their stream for up to 0.9 ms. The
 * latency must be the 7 us of submission, not the median queueing, so that a device
 * twice as fast is predicted as the reference runs it. */
static void
test_submission_latency(void)
{
    enum { N = 400, PER = 10 };
    int64_t kd[N], kd_half[N];
    for (int k = 0; k < N; k++) {
        kd[k] = 100000;
        kd_half[k] = 50000;
    }
    refjob m = ref_alloc(N);
    m.cost = 5000;
    m.hgap = 2000;
    m.dgap = 2000;
    m.lat = 7000;
    m.wait_ns = 20000;
    m.sync_every = PER;
    m.kdur = kd;
    ref_run(&m);
    dfg g;
    int32_t host[N], dev[N], sync[N / PER];
    ref_graph(&m, &g, host, dev, sync);
    build_queue_info qi;
    CHECK(build_launch_queue(&g, 0, &qi) == 0);
    CHECK_EQ(qi.depth, 0);
    CHECK(build_derive_timing(&g) == 0);
    CHECK_EQ(build_submission_latency(&g, 0), 7000);
    CHECK_EQ(g.lat[dev[N - 1]], 7000);
    CHECK_EQ(g.gap[dev[N - 1]], 2000);
    sim_result r;
    memset(&r, 0, sizeof r);
    CHECK(sim_run(&g, &r) == 0);
    CHECK_EQ(r.end[sync[N / PER - 1]], m.se[N / PER - 1]);
    refjob x = ref_alloc(N);
    x.cost = m.cost;
    x.hgap = m.hgap;
    x.dgap = m.dgap;
    x.lat = m.lat;
    x.wait_ns = m.wait_ns;
    x.sync_every = PER;
    x.kdur = kd_half;
    ref_run(&x);
    for (int k = 0; k < N; k++)
        g.dur[dev[k]] = kd_half[k];
    CHECK(sim_run(&g, &r) == 0);
    CHECK_EQ(r.end[sync[N / PER - 1]], x.se[N / PER - 1]);
    CHECK((double)x.se[N / PER - 1] < 0.6 * (double)m.se[N / PER - 1]);
    sim_result_free(&r);
    dfg_free(&g);
    ref_free(&x);
    ref_free(&m);
}

/* ---- point-to-point matching -------------------------------------------------------------- */

static build_p2p_part
p2p_end(int32_t rank, int is_send, int32_t src, int32_t dst, uint64_t k, int64_t bytes,
        int32_t node)
{
    build_p2p_part x;
    memset(&x, 0, sizeof x);
    x.comm = 0xc0ffee;
    x.rank = rank;
    x.is_send = (uint8_t)is_send;
    x.src = src;
    x.dst = dst;
    x.ordinal = k;
    x.bytes = bytes;
    x.device = node;
    x.n_sharing = 1;
    x.node = node;
    return x;
}

/* A device op on stream res with measured times. */
static int32_t
p2p_op(dfg *g, int32_t res, int64_t t0, int64_t t1)
{
    int32_t n = dfg_add_node(g, DFG_KERNEL, res, dfg_intern(g, "ncclDevKernel_SendRecv"));
    g->mstart[n] = t0;
    g->mend[n] = t1;
    g->dur[n] = t1 - t0;
    return n;
}

static void
test_p2p_match(void)
{
    /* pairs by ordinal per channel (0->1 twice, 1->2 once), one send whose peer has no
     * trace, one pair whose ends disagree on the size */
    dfg g;
    REQUIRE(dfg_init(&g, 3) == 0);
    int32_t s0 = dfg_add_resource(&g, DFG_RES_STREAM, 0, 1, 0);
    int32_t s1 = dfg_add_resource(&g, DFG_RES_STREAM, 1, 1, 0);
    int32_t s2 = dfg_add_resource(&g, DFG_RES_STREAM, 2, 1, 0);
    int32_t k0a = p2p_op(&g, s0, 0, 150000), k0b = p2p_op(&g, s0, 200000, 400000);
    int32_t r1a = p2p_op(&g, s1, 50000, 150000), s1a = p2p_op(&g, s1, 160000, 300000);
    int32_t r1b = p2p_op(&g, s1, 300000, 400000);
    int32_t r2 = p2p_op(&g, s2, 100000, 300000), u2 = p2p_op(&g, s2, 310000, 320000);
    build_p2p_part parts[] = {
        p2p_end(1, 0, 0, 1, 1, 1000, r1b), p2p_end(2, 1, 2, 5, 0, 64, u2),
        p2p_end(0, 1, 0, 1, 1, 1000, k0b), p2p_end(1, 1, 1, 2, 0, 2000, s1a),
        p2p_end(1, 0, 0, 1, 0, 1000, r1a), p2p_end(2, 0, 1, 2, 0, 2500, r2),
        p2p_end(0, 1, 0, 1, 0, 1000, k0a),
    };
    build_p2p_stats st;
    CHECK(build_match_p2p(&g, parts, sizeof parts / sizeof parts[0], &st) == 0);
    CHECK_EQ(st.ends, 7);
    CHECK_EQ(st.matched, 6);
    CHECK_EQ(st.unmatched, 1);
    CHECK(st.example.is_send && st.example.dst == 5 && st.example.rank == 2);
    CHECK_EQ(st.bytes_differ, 1);
    CHECK_EQ(st.groups, 3);
    CHECK_EQ(st.wide_groups, 0);
    CHECK_EQ(st.conflicts, 0);
    CHECK_EQ(g.n_groups, 3);
    int32_t qa = g.group[k0a], qb = g.group[k0b], qc = g.group[s1a];
    CHECK(qa >= 0 && qb >= 0 && qc >= 0 && qa != qb && qb != qc && qa != qc);
    CHECK_EQ(g.group[r1a], qa);
    CHECK_EQ(g.group[r1b], qb);
    CHECK_EQ(g.group[r2], qc);
    CHECK_EQ(g.group[u2], -1);
    CHECK_EQ(g.kind[u2], DFG_KERNEL);
    CHECK_EQ(g.kind[k0a], DFG_COLL);
    CHECK_EQ(g.grp_first[qa], k0a); /* the sender leads */
    CHECK_EQ(g.grp_first[qc], s1a);
    CHECK_EQ(g.grp_op[qa], DPRO_COLL_SEND);
    CHECK_EQ(g.grp_nranks[qa], 2);
    CHECK_EQ(g.grp_bytes[qa], 1000);
    CHECK_EQ(g.grp_bytes[qc], 2500);
    CHECK_EQ(g.grp_seq[qb], 1);
    CHECK(build_derive_timing(&g) == 0);
    CHECK_EQ(g.grp_members[qa], 2);
    CHECK_EQ(g.grp_mdur[qa], 100000); /* end 150 - last arrival 50 */
    CHECK_EQ(g.grp_mdur[qb], 100000);
    CHECK_EQ(g.grp_mdur[qc], 140000);
    sim_result r;
    memset(&r, 0, sizeof r);
    CHECK(sim_run(&g, &r) == 0);
    CHECK_EQ(r.n_unfinished, 0);
    CHECK_EQ(r.grp_arrival[qa], 50000);
    CHECK_EQ(r.end[k0a], 150000);
    CHECK_EQ(r.end[r1a], 150000);
    CHECK_EQ(r.end[u2], 320000);
    /* the sender now waits for a late receiver, and the wait moves the next send */
    g.gap[r1a] = 250000;
    g.grp_dur[qa] = 100000;
    CHECK(sim_run(&g, &r) == 0);
    CHECK_EQ(r.grp_arrival[qa], 250000);
    CHECK_EQ(r.end[k0a], 350000);
    CHECK_EQ(r.end[r1a], 350000);
    CHECK(r.start[k0b] >= 350000);
    CHECK_EQ(r.why[k0a], SIM_CAUSE_GROUP); /* waited for its receiver */
    sim_result_free(&r);
    dfg_free(&g);

    /* a grouped exchange on rank 1 against two separate ops of rank 0: pairing both would
     * make rank 0's ops wait for each other; the second pair is refused */
    REQUIRE(dfg_init(&g, 2) == 0);
    s0 = dfg_add_resource(&g, DFG_RES_STREAM, 0, 1, 0);
    s1 = dfg_add_resource(&g, DFG_RES_STREAM, 1, 1, 0);
    int32_t a = p2p_op(&g, s0, 0, 100000), b = p2p_op(&g, s0, 100000, 200000);
    int32_t c = p2p_op(&g, s1, 0, 200000);
    build_p2p_part clash[] = {p2p_end(0, 1, 0, 1, 0, 10, a), p2p_end(0, 0, 1, 0, 0, 10, b),
                              p2p_end(1, 0, 0, 1, 0, 10, c), p2p_end(1, 1, 1, 0, 0, 10, c)};
    CHECK(build_match_p2p(&g, clash, 4, &st) == 0);
    CHECK_EQ(st.matched, 4);
    CHECK_EQ(st.conflicts, 1);
    CHECK_EQ(st.groups, 1);
    CHECK(g.group[a] >= 0 && g.group[a] == g.group[c] && g.group[b] < 0);
    CHECK(build_derive_timing(&g) == 0);
    CHECK(sim_run(&g, &r) == 0);
    CHECK_EQ(r.n_unfinished, 0);
    sim_result_free(&r);
    dfg_free(&g);

    /* a grouped ring of three (each op sends to the next rank and receives from the
     * previous one): one exchange of three ops, each moving both transfers */
    REQUIRE(dfg_init(&g, 3) == 0);
    int32_t ring[3];
    build_p2p_part rp[6];
    for (int32_t q = 0; q < 3; q++)
        ring[q] = p2p_op(&g, dfg_add_resource(&g, DFG_RES_STREAM, q, 1, 0), 1000 * q, 90000);
    for (int32_t q = 0; q < 3; q++) {
        rp[2 * q] = p2p_end(q, 1, q, (q + 1) % 3, 0, 100, ring[q]);
        rp[2 * q + 1] = p2p_end(q, 0, (q + 2) % 3, q, 0, 100, ring[q]);
    }
    CHECK(build_match_p2p(&g, rp, 6, &st) == 0);
    CHECK_EQ(st.groups, 1);
    CHECK_EQ(st.wide_groups, 1);
    CHECK_EQ(g.grp_nranks[0], 3);
    CHECK_EQ(g.grp_bytes[0], 200);
    CHECK(build_derive_timing(&g) == 0);
    CHECK_EQ(g.grp_mdur[0], 88000);
    dfg_free(&g);

    /* nothing to match */
    REQUIRE(dfg_init(&g, 1) == 0);
    CHECK(build_match_p2p(&g, NULL, 0, &st) == 0);
    CHECK_EQ(st.groups, 0);
    dfg_free(&g);
}

static void
test_p2p_scan(void)
{
    /* one rank's events: an all-reduce, an ungrouped send, a grouped send + recv carried by
     * the kernel ncclGroupEnd launched, a second all-reduce, and an imported SendRecv
     * without a peer */
    enum { C = 0xabc, T = 7, S = 5 };
    dpro_event ev[10];
    memset(ev, 0, sizeof ev);
    for (int i = 0; i < 10; i++) {
        ev[i].start_ns = (uint64_t)(1000 * i);
        ev[i].end_ns = (uint64_t)(1000 * i + 500);
        ev[i].thread = T;
        ev[i].stream = S;
    }
#define COLL_EV(i, op, sq, pr, corr)                                                               \
    (ev[i].kind = DPRO_KIND_COLLECTIVE, ev[i].subkind = (op), ev[i].comm = C, ev[i].seq = (sq),    \
     ev[i].peer = (pr), ev[i].correlation = (corr), ev[i].count = 10, ev[i].dtype = 7)
    COLL_EV(0, DPRO_COLL_ALLREDUCE, 0, -1, 1);
    ev[1].kind = DPRO_KIND_KERNEL, ev[1].correlation = 1, ev[1].thread = 0;
    COLL_EV(2, DPRO_COLL_SEND, 1, 1, 2);
    ev[3].kind = DPRO_KIND_KERNEL, ev[3].correlation = 2, ev[3].thread = 0;
    COLL_EV(4, DPRO_COLL_SEND, 2, 1, (1ULL << 40) | 5);
    COLL_EV(5, DPRO_COLL_RECV, 3, 2, (1ULL << 40) | 6);
    ev[6].kind = DPRO_KIND_API, ev[6].correlation = 3;
    ev[7].kind = DPRO_KIND_KERNEL, ev[7].correlation = 3, ev[7].thread = 0;
    COLL_EV(8, DPRO_COLL_ALLREDUCE, 4, -1, 4);
    COLL_EV(9, DPRO_COLL_RECV, 5, -1, 9);
#undef COLL_EV
    job_rank jr;
    memset(&jr, 0, sizeof jr);
    jr.events = ev;
    jr.n_events = 10;
    build_p2p p;
    CHECK(build_p2p_scan(&jr, 0, &p) == 0);
    CHECK_EQ(p.n, 3);
    CHECK_EQ(p.no_peer, 1);
    if (p.n == 3) {
        CHECK(p.part[0].is_send && p.part[0].src == 0 && p.part[0].dst == 1);
        CHECK_EQ(p.part[0].ordinal, 0);
        CHECK_EQ(p.part[0].device, 3);
        CHECK_EQ(p.part[0].n_sharing, 1);
        CHECK_EQ(p.part[0].bytes, 40);
        CHECK_EQ(p.part[1].ordinal, 1); /* the second send 0 -> 1 */
        CHECK_EQ(p.part[1].device, 7);  /* carried by ncclGroupEnd's kernel */
        CHECK_EQ(p.part[1].n_sharing, 2);
        CHECK(!p.part[2].is_send && p.part[2].src == 2 && p.part[2].dst == 0);
        CHECK_EQ(p.part[2].ordinal, 0);
        CHECK_EQ(p.part[2].device, 7);
    }
    /* collectives numbered without the send/recv calls */
    CHECK_EQ(build_coll_seq(&p, &ev[0]), 0);
    CHECK_EQ(build_coll_seq(&p, &ev[8]), 1);
    dpro_event other = ev[8];
    other.comm = C + 1;
    CHECK_EQ(build_coll_seq(&p, &other), 4);
    build_p2p_free(&p);
    /* a grouped call whose group launches onto another stream has no device op */
    ev[7].stream = S + 1;
    CHECK(build_p2p_scan(&jr, 0, &p) == 0);
    CHECK(p.n == 3 && p.part[1].device == -1 && p.part[2].device == -1);
    build_p2p_free(&p);
    CHECK(build_p2p_channel(C, 0, 1) != build_p2p_channel(C, 1, 0));
    CHECK(build_p2p_channel(C, 0, 1) != build_p2p_channel(C + 1, 0, 1));
    CHECK(build_p2p_channel(C, 0, 1) != C);
}

static void
test_align_p2p(void)
{
    /* a pipeline 0 - 1 - 2 - 3: neighbours share only send/recv; offsets through the chain */
    enum { R = 4, K = 50 };
    int64_t skew[R] = {0, 7000000, -2500000, 123456789};
    align_sample s[2 * (R - 1) * K];
    size_t n = 0;
    for (int32_t r = 0; r + 1 < R; r++)
        for (int k = 0; k < K; k++) {
            int64_t t = 1000000 * k + 50000 * r;
            uint64_t ch = build_p2p_channel(42, r, r + 1);
            s[n++] = (align_sample){ch, (uint64_t)k, r, t - skew[r] + noise(1000)};
            s[n++] = (align_sample){ch, (uint64_t)k, r + 1, t - skew[r + 1] + noise(1000)};
        }
    align_result a;
    CHECK(align_clocks_from_collectives(s, n, R, NULL, &a) == 0);
    for (int32_t r = 0; r < R; r++) {
        CHECK(a.aligned[r]);
        int64_t d = a.offset_ns[r] - skew[r];
        CHECK(d > -3000 && d < 3000);
    }
    CHECK_EQ(a.n_unaligned, 0);
    align_result_free(&a);
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

int
main(void)
{
    test_align();
    test_costmodel();
    test_costmodel_piecewise();
    test_contention();
    test_iter();
    test_sim_tiny();
    test_sim_wakeup();
    test_sim_collective();
    test_breakdown_comm_kernels();
    test_synth();
    test_launch_queue();
    test_submission_latency();
    test_p2p_match();
    test_p2p_scan();
    test_align_p2p();
    return tests_done();
}
