/*
 * test_replay_align: unit tests of what the replay reads off measured times: clock
 * alignment with injected offsets, through collectives and through a pipeline's
 * send/recv; the collective cost-model fit (one line, and per size range against a known
 * piecewise truth); the contention factor on a synthetic job with known factors;
 * iteration detection; the phase a kernel period is cut at.
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
#include "replay/period.h"
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
    /* the same samples in parts (uneven, one empty, as ranks' parts come): the same result */
    const align_sample *parts[4] = {s, NULL, s + 7, s + 400};
    size_t counts[4] = {7, 0, 393, n - 400};
    align_result b;
    CHECK(align_clocks_from_parts(parts, counts, 4, R, present, &b) == 0);
    CHECK_EQ(b.reference, a.reference);
    CHECK_EQ(b.n_unaligned, a.n_unaligned);
    for (int r = 0; r < R; r++) {
        CHECK_EQ(b.offset_ns[r], a.offset_ns[r]);
        CHECK_EQ(b.aligned[r], a.aligned[r]);
        CHECK_EQ(b.shared[r], a.shared[r]);
        CHECK(b.residual_us[r] == a.residual_us[r]);
    }
    CHECK(b.residual_median_us == a.residual_median_us && b.residual_max_us == a.residual_max_us);
    align_result_free(&b);
    /* a part of a rank that is not present is left out, as in one array */
    uint8_t some[R] = {1, 1, 1, 0, 1, 1};
    align_result c, d;
    CHECK(align_clocks_from_collectives(s, n, R, some, &c) == 0);
    CHECK(align_clocks_from_parts(parts, counts, 4, R, some, &d) == 0);
    for (int r = 0; r < R; r++)
        CHECK(c.offset_ns[r] == d.offset_ns[r] && c.aligned[r] == d.aligned[r]);
    CHECK(!d.aligned[4]); /* linked to the others only through rank 3 */
    align_result_free(&c);
    align_result_free(&d);
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
        s[n++] = (costmodel_sample){DPRO_COLL_ALLREDUCE, 8, bytes, (int64_t)t + noise(300), 0};
    }
    s[0].transfer_ns *= 3; /* outliers */
    s[7].transfer_ns *= 4;
    s[n++] = (costmodel_sample){DPRO_COLL_BROADCAST, 8, 1 << 20, 50000, 0};
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
                                            (int64_t)(t * (1 + (double)noise(1000) / 1e5)), 0};
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
            (int64_t)(pw_truth((double)bytes) * (1 + (double)noise(2000) / 1e5)), 0};
    }
    CHECK(costmodel_fit_samples(&m, s, n) == 0);
    CHECK_EQ(m.op[DPRO_COLL_ALLREDUCE].n_segs, 1);
    CHECK(fabs((double)costmodel_predict(&m, DPRO_COLL_ALLREDUCE, 2, 8 << 20) - pw_truth(8 << 20)) /
              pw_truth(8 << 20) <
          0.03);
    /* one size: through that point; an op without samples: the global fit */
    n = 0;
    for (int r = 0; r < 5; r++)
        s[n++] = (costmodel_sample){DPRO_COLL_BROADCAST, 2, 1 << 20, 50000, 0};
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
        dfg_set_mend(g, h, (int64_t)T + 1000);
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
            dfg_set_mend(g, d, (int64_t)ke[k]);
        }
        int32_t q =
            dfg_add_group(g, DPRO_COLL_ALLREDUCE, 1, 1 << 20, 5, (uint64_t)it, (int64_t)(c1 - c0));
        int32_t c = dfg_add_node(g, DFG_KERNEL, ms, nm_c);
        if (q < 0 || c < 0)
            return -1;
        dfg_set_group(g, c, q);
        g->mstart[c] = (int64_t)c0;
        dfg_set_mend(g, c, (int64_t)c1);
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
    int64_t *mend = dfg_mend_array(&g);
    CHECK(mend && contention_overlaps(&g, g.mstart, mend, NULL, fn, fg) == 0);
    free(mend);
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
    CHECK(iter_find_period(names, n, &p, NULL, NULL, &match) == 0);
    CHECK_EQ(p, 40);
    /* cut in the middle of an iteration: still 40 */
    CHECK(iter_find_period(names, n - 17, &p, NULL, NULL, &match) == 0);
    CHECK_EQ(p, 40);
    /* approximate: one kernel differs in every iteration's middle */
    for (int it = 0; it < 6; it++)
        names[2 + it * 40 + 5 + it] = 77;
    CHECK(iter_find_period(names, n, &p, NULL, NULL, &match) == 0);
    CHECK_EQ(p, 40);
    /* no repetition */
    uint32_t none[50];
    for (int i = 0; i < 50; i++)
        none[i] = (uint32_t)i;
    CHECK(iter_find_period(none, 50, &p, NULL, NULL, &match) != 0);

    /* A stock PyTorch job without markers: a first step that launches other kernels
     * (gradients created, not accumulated; the optimizer's state created), 3 steady steps
     * of 30 kernels (2 repeated layers inside), then a barrier's all-reduce at the end.
     * The steady tail has no exact period (the last kernel is unique) and the whole
     * sequence none at 90 %: the periodic stretch holds the steady steps only. */
    uint32_t torch_like[30 * 4 + 1];
    size_t m = 0, s = 0, e = 0;
    for (int k = 0; k < 30; k++)
        torch_like[m++] = k < 20 ? (uint32_t)(1 + k % 10) : (uint32_t)(40 + k);
    for (int it = 0; it < 3; it++)
        for (int k = 0; k < 30; k++)
            torch_like[m++] = k < 20 ? (uint32_t)(1 + k % 10) : (uint32_t)(20 + k);
    torch_like[m++] = 90;
    CHECK(iter_find_period(torch_like, m, &p, &s, &e, &match) == 0);
    CHECK_EQ(p, 30);
    CHECK_EQ(s, 30); /* the first step's forward matches, but its end does not */
    CHECK_EQ(e, m - 1);
    CHECK(match == 1.0);
    /* 2 steady steps of 30 after 60 others: the stretch is not half of the sequence */
    for (int k = 0; k < 60; k++)
        torch_like[k] = (uint32_t)(100 + k);
    CHECK(iter_find_period(torch_like, m, &p, &s, &e, &match) != 0);

    /* Two ranks' periods, compared by text (the same name at other addresses, as two
     * traces' string tables give it): rank b's starts 2 kernels later. */
    char buf_b[5][8];
    const char *wa[5] = {"gemm", "add", "gemm", "relu", "sgd"};
    const char *wb[5];
    for (int k = 0; k < 5; k++) {
        snprintf(buf_b[k], sizeof buf_b[k], "%s", wa[(k + 2) % 5]);
        wb[k] = buf_b[k];
    }
    size_t rot = 99;
    CHECK(iter_period_rotation(wa, wb, 5, &rot) == 0);
    CHECK_EQ(rot, 3); /* wb[(j + 3) % 5] == wa[(j + 5) % 5] == wa[j] */
    CHECK(iter_period_rotation(wa, wa, 5, &rot) == 0 && rot == 0);
    snprintf(buf_b[4], sizeof buf_b[4], "copy");
    CHECK(iter_period_rotation(wa, wb, 5, &rot) != 0);

    int64_t starts[8] = {0, 3000, 5000, 6000, 7000, 8000, 9000, 10000};
    uint8_t wu[8];
    CHECK_EQ(iter_mark_warmup(starts, 8, 0.10, wu), 2);
    CHECK(wu[0] && wu[1] && !wu[2]);
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

/* A DDP step without markers, as the busiest stream sees it: 3 forward kernels, 4
 * backward ones, each of the last 3 waiting for the all-reduce of the bucket before it on
 * stream 2 (the backward's stream idles 4 us there, the device does not), the optimizer's
 * kernel after the last all-reduce, then 1 us with nothing running before the next step's
 * first forward kernel; in one step the host stalls 50 us before the backward. The naive
 * cut (the busiest stream's longest wait) falls inside the backward, one at the longest
 * idle summed over the steps at the stall; the period is cut before the forward's first
 * kernel. */
static void
test_period_phase(void)
{
    enum { STEPS = 6, P = 8 };
    period_kernel k[STEPS * (P + 3)];
    size_t n = 0;
    uint64_t t = 1000;
    for (int it = 0; it < STEPS; it++) {
        for (uint32_t f = 0; f < 3; f++, t += 2000)
            k[n++] = (period_kernel){t, t + 2000, 7, 1 + f};
        t += it == 3 ? 50000 : 0; /* the host's stall */
        for (uint32_t b = 0; b < 4; b++) {
            k[n++] = (period_kernel){t, t + 2000, 7, 10 + b};
            t += 2000;
            if (b < 3) { /* the bucket's all-reduce; the next backward kernel waits */
                k[n++] = (period_kernel){t, t + 4000 + 100 * (uint64_t)b, 2, 20};
                t += 4000 + 100 * (uint64_t)b;
            }
        }
        k[n++] = (period_kernel){t, t + 500, 7, 30}; /* the optimizer */
        t += 500 + 1000;
    }
    period_scan ps;
    CHECK(period_scan_kernels(k, n, NULL, &ps) == 0);
    CHECK_EQ(ps.stream, 7);
    CHECK_EQ(ps.p, P);
    size_t ph = period_own_phase(&ps);
    replay_rank_iters it = {0};
    CHECK(period_cut(&ps, ph, &it) == 0);
    CHECK(it.n >= STEPS - 1);
    /* every iteration opens with the forward's first kernel: the one after each
     * boundary (the position of the kernel closing an iteration) is named 1 */
    for (int32_t b = 0; b < it.n; b++)
        if (it.event_index[b] + 1 < ps.n)
            CHECK_EQ(ps.names[it.event_index[b] + 1], 1);
    free(it.event_index);
    /* the same kernels out of start order (a trace writes streams' batches apart) */
    period_kernel *r = malloc(n * sizeof *r);
    size_t m = 0;
    for (size_t i = 0; r && i < n; i++)
        if (k[i].stream != 2)
            r[m++] = k[i];
    for (size_t i = 0; r && i < n; i++)
        if (k[i].stream == 2)
            r[m++] = k[i];
    period_scan_free(&ps);
    CHECK(r && period_scan_kernels(r, n, NULL, &ps) == 0);
    CHECK_EQ(period_own_phase(&ps), ph);
    period_scan_free(&ps);
    free(r);
}

int
main(void)
{
    test_align();
    test_costmodel();
    test_costmodel_piecewise();
    test_contention();
    test_iter();
    test_period_phase();
    test_align_p2p();
    return tests_done();
}
