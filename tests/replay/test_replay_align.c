/*
 * test_replay_align: unit tests of what the replay reads off measured times: clock
 * alignment with injected offsets, through collectives and through a pipeline's
 * send/recv; the collective cost-model fit; iteration detection.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dprotrace.h"
#include "replay/align.h"
#include "replay/build.h"
#include "replay/costmodel.h"
#include "replay/iter.h"
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

int
main(void)
{
    test_align();
    test_costmodel();
    test_iter();
    test_align_p2p();
    return tests_done();
}
