/*
 * test_costmodel_proto: unit tests of the collective model's price for a size outside the
 * measured regimes (costmodel_regime_at, through costmodel_predict). The samples come from
 * a world shaped as NCCL's tuner says (src/graph/tuning.cc: ring latency base + steps x
 * NVLink hop per protocol; LL at half Simple's bus bandwidth, LL128 at 0.92 of it) at its
 * own scale (latency x 1.2, Simple's bandwidth 240 B/ns), each size run in the protocol
 * the tuner picks at that bandwidth:
 *   - only large all-reduces measured (Simple): a 64 KiB one (LL) is priced at LL's shape
 *     scaled to the fit, the nearest segment's line (`nearest`) 87 % over;
 *   - only small ones measured (LL): a 64 MiB one (Simple), likewise (`nearest` 91 %
 *     over);
 *   - on 8 ranks, Simple measured: an 8 MiB one runs LL128;
 *   - one all-reduce size (no latency fitted): LL's latency at the scale the broadcasts'
 *     LL segment shows;
 *   - one segment across the switch: a size beyond either end stays in that end's protocol;
 *   - sizes inside the measured range, and all-to-all (no ring steps), keep the line.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dprotrace.h"
#include "replay/costmodel.h"
#include "replay/ncclname.h"
#include "tests/unit/testutil.h"

/* The world's time of an all-reduce of bytes on n ranks in proto: 1.2 x the tuner's ring
 * latency + x / (240 B/ns x the protocol's fraction), x = 2(n-1)/n bytes. */
static double
truth(int32_t n, int64_t bytes, int proto)
{
    static const double base[3] = {6.6, 14.0, 8.4}, hop[3] = {0.6, 1.9, 3.4},
                        frac[3] = {0.5, 0.92, 1.0};
    double x = 2.0 * (n - 1) / n * (double)bytes;
    return 1.2 * (base[proto] + 2.0 * (n - 1) * hop[proto]) * 1000 + x / (240 * frac[proto]);
}

/* A model fitted to 3 samples of each size 2^e and 3 x 2^(e-1), e in [e0, e1], on n ranks in
 * proto, the kernels naming the ring. */
static void
fit(costmodel *m, int32_t n, int e0, int e1, int proto)
{
    costmodel_sample s[256];
    size_t k = 0;
    for (int e = e0; e <= e1; e++)
        for (int h = 0; h < 2; h++)
            for (int r = 0; r < 3; r++) {
                int64_t bytes = h ? (int64_t)3 << (e - 1) : (int64_t)1 << e;
                s[k++] = (costmodel_sample){DPRO_COLL_ALLREDUCE, n, bytes,
                                            (int64_t)llround(truth(n, bytes, proto)),
                                            NCCLNAME_ALGO_RING};
            }
    REQUIRE(costmodel_fit_samples(m, s, k) == 0);
}

static double
rel(double got, double want)
{
    return fabs(got - want) / want;
}

/* Checks the price of bytes on n ranks: regime (proto, measured), within 2 % of the world's
 * time in proto, and the nearest segment's line off by more than min_off. */
static void
check_unseen(costmodel *m, int32_t n, int64_t bytes, int proto, int measured, double min_off)
{
    costmodel_regime r;
    int ar = DPRO_COLL_ALLREDUCE;
    CHECK_EQ(costmodel_regime_at(m, ar, n, bytes, &r), 1);
    CHECK_EQ(r.proto, proto);
    CHECK_EQ(r.measured_proto, measured);
    double want = truth(n, bytes, proto);
    CHECK(rel((double)costmodel_predict(m, ar, n, bytes), want) < 0.02);
    CHECK(rel(r.ns, want) < 0.02);
    m->nearest = 1;
    CHECK_EQ(costmodel_regime_at(m, ar, n, bytes, &r), 0);
    CHECK(rel((double)costmodel_predict(m, ar, n, bytes), want) > min_off);
    m->nearest = 0;
}

static void
test_large_to_small(void)
{
    costmodel m;
    fit(&m, 2, 23, 28, COSTMODEL_PROTO_SIMPLE); /* 8-384 MiB: Simple from 1.8 MB */
    CHECK_EQ(m.op[DPRO_COLL_ALLREDUCE].n_segs, 1);
    check_unseen(&m, 2, 64 << 10, COSTMODEL_PROTO_LL, COSTMODEL_PROTO_SIMPLE, 0.8);
    /* 4 MiB: below the measured sizes, Simple still (the segment's line) */
    costmodel_regime r;
    CHECK_EQ(costmodel_regime_at(&m, DPRO_COLL_ALLREDUCE, 2, 4 << 20, &r), 0);
    CHECK_EQ(r.proto, COSTMODEL_PROTO_SIMPLE);
    CHECK(rel((double)costmodel_predict(&m, DPRO_COLL_ALLREDUCE, 2, 4 << 20),
              truth(2, 4 << 20, COSTMODEL_PROTO_SIMPLE)) < 0.02);
    /* the last segment ran Simple: costmodel_proto_at as before */
    CHECK_EQ(costmodel_proto_at(&m, DPRO_COLL_ALLREDUCE, NCCLNAME_ALGO_RING, 2, 64 << 10),
             COSTMODEL_PROTO_LL);
    /* LL's cap (NCCL's llMaxBws) binds: LL at 50 B/ns */
    m.ll_max_bpns = 50;
    CHECK_EQ(costmodel_regime_at(&m, DPRO_COLL_ALLREDUCE, 2, 64 << 10, &r), 1);
    CHECK(fabs(r.beta_bpns - 50) < 1e-9);
}

static void
test_small_to_large(void)
{
    costmodel m;
    fit(&m, 2, 12, 17, COSTMODEL_PROTO_LL); /* 4-192 KiB */
    check_unseen(&m, 2, 64 << 20, COSTMODEL_PROTO_SIMPLE, COSTMODEL_PROTO_LL, 0.8);
    /* the last segment ran LL: Simple's bandwidth twice its own, so the tuner's switch
     * to Simple at 1.8 MB */
    CHECK_EQ(costmodel_proto_at(&m, DPRO_COLL_ALLREDUCE, NCCLNAME_ALGO_RING, 2, 1 << 20),
             COSTMODEL_PROTO_LL);
    CHECK_EQ(costmodel_proto_at(&m, DPRO_COLL_ALLREDUCE, NCCLNAME_ALGO_RING, 2, 3 << 20),
             COSTMODEL_PROTO_SIMPLE);
}

static void
test_ll128(void)
{
    /* 8 ranks, x = 1.75 bytes: LL (15 us) to 6.7 MB of x, LL128 (40.6 us) to 42.5 MB,
     * Simple (56 us) above */
    costmodel m;
    fit(&m, 8, 26, 29, COSTMODEL_PROTO_SIMPLE); /* 64-768 MiB */
    check_unseen(&m, 8, 8 << 20, COSTMODEL_PROTO_LL128, COSTMODEL_PROTO_SIMPLE, 0.05);
    check_unseen(&m, 8, 256 << 10, COSTMODEL_PROTO_LL, COSTMODEL_PROTO_SIMPLE, 0.5);
}

/* One all-reduce size (the line through the origin: no latency) and broadcasts of 4-192 KiB
 * run with LL at 0.8 x the tuner's latency (ring on 2 ranks: 2 steps, 6.6 + 2 x 0.6 us):
 * a 64 KiB all-reduce takes LL's tuner latency (6.6 + 2 x 0.6 us) at the broadcasts'
 * scale. */
static void
test_latency_scale(void)
{
    costmodel_sample s[64];
    size_t k = 0;
    for (int r = 0; r < 3; r++)
        s[k++] = (costmodel_sample){DPRO_COLL_ALLREDUCE, 2, 10 << 20,
                                    (int64_t)llround(truth(2, 10 << 20, COSTMODEL_PROTO_SIMPLE)),
                                    NCCLNAME_ALGO_RING};
    for (int e = 12; e <= 17; e++)
        for (int r = 0; r < 3; r++) {
            double t = 0.8 * 7.8 * 1000 + (double)((int64_t)1 << e) / 120;
            s[k++] = (costmodel_sample){DPRO_COLL_BROADCAST, 2, (int64_t)1 << e,
                                        (int64_t)llround(t), NCCLNAME_ALGO_RING};
        }
    costmodel m;
    REQUIRE(costmodel_fit_samples(&m, s, k) == 0);
    CHECK(m.op[DPRO_COLL_ALLREDUCE].seg[0].alpha_ns == 0);
    costmodel_regime r;
    CHECK_EQ(costmodel_regime_at(&m, DPRO_COLL_ALLREDUCE, 2, 64 << 10, &r), 1);
    CHECK_EQ(r.proto, COSTMODEL_PROTO_LL);
    CHECK(fabs(r.alpha_ns - 0.8 * 7.8 * 1000) < 20);
}

/* One segment across the switch (3 sizes: 64 KiB run with LL, 16 and 32 MiB with Simple):
 * its ends are what a size outside it is nearest, so 128 MiB stays Simple and 4 KiB LL,
 * neither priced as unseen. */
static void
test_segment_across_switch(void)
{
    static const int64_t sizes[3] = {64 << 10, 16 << 20, 32 << 20};
    costmodel_sample s[9];
    for (int i = 0; i < 9; i++) {
        int p = i / 3 ? COSTMODEL_PROTO_SIMPLE : COSTMODEL_PROTO_LL;
        s[i] = (costmodel_sample){DPRO_COLL_ALLREDUCE, 2, sizes[i / 3],
                                  (int64_t)llround(truth(2, sizes[i / 3], p)), NCCLNAME_ALGO_RING};
    }
    costmodel m;
    REQUIRE(costmodel_fit_samples(&m, s, 9) == 0);
    CHECK_EQ(m.op[DPRO_COLL_ALLREDUCE].n_segs, 1);
    costmodel_regime r;
    CHECK_EQ(costmodel_regime_at(&m, DPRO_COLL_ALLREDUCE, 2, (int64_t)128 << 20, &r), 0);
    CHECK_EQ(r.measured_proto, COSTMODEL_PROTO_SIMPLE);
    CHECK_EQ(costmodel_regime_at(&m, DPRO_COLL_ALLREDUCE, 2, 4 << 10, &r), 0);
    CHECK_EQ(r.measured_proto, COSTMODEL_PROTO_LL);
}

static void
test_inside_and_other_ops(void)
{
    costmodel m;
    fit(&m, 2, 23, 28, COSTMODEL_PROTO_SIMPLE);
    const costmodel_fit *f = &m.op[DPRO_COLL_ALLREDUCE];
    costmodel_regime r;
    int64_t b = 48 << 20;
    CHECK_EQ(costmodel_regime_at(&m, DPRO_COLL_ALLREDUCE, 2, b, &r), 0);
    CHECK_EQ(costmodel_predict(&m, DPRO_COLL_ALLREDUCE, 2, b),
             (int64_t)llround(costmodel_piecewise_at(f, (double)b)));
    /* all-to-all has no ring steps in the tuner: its line */
    costmodel_sample s[12];
    for (int i = 0; i < 12; i++)
        s[i] = (costmodel_sample){DPRO_COLL_ALLTOALL, 2, (int64_t)(8 + i) << 20,
                                  20000 + ((int64_t)(8 + i) << 20) / 200, NCCLNAME_ALGO_RING};
    REQUIRE(costmodel_fit_samples(&m, s, 12) == 0);
    CHECK_EQ(costmodel_regime_at(&m, DPRO_COLL_ALLTOALL, 2, 4096, &r), 0);
    /* the alpha-beta model is not piecewise: no regimes */
    fit(&m, 2, 23, 28, COSTMODEL_PROTO_SIMPLE);
    m.piecewise = 0;
    CHECK_EQ(costmodel_regime_at(&m, DPRO_COLL_ALLREDUCE, 2, 64 << 10, &r), 0);
    CHECK(strcmp(costmodel_proto_name(COSTMODEL_PROTO_LL128), "LL128") == 0);
    CHECK(strcmp(costmodel_proto_name(7), "?") == 0);
}

/* A trace whose latency is far above NCCL's (2 ms more than the world's on every
 * all-reduce: a host, waits): a switch to LL adds at most 8 times the tuner's latency
 * difference (ring, 2 ranks: LL 7.8 us, Simple 15.2), not the whole latency halved. */
static void
test_latency_cap(void)
{
    costmodel m;
    costmodel_regime r;
    costmodel_sample s[64];
    size_t k = 0;
    for (int e = 23; e <= 28; e++)
        for (int rep = 0; rep < 3; rep++) {
            int64_t bytes = (int64_t)1 << e;
            s[k++] =
                (costmodel_sample){DPRO_COLL_ALLREDUCE, 2, bytes,
                                   (int64_t)llround(truth(2, bytes, COSTMODEL_PROTO_SIMPLE) + 2e6),
                                   NCCLNAME_ALGO_RING};
        }
    REQUIRE(costmodel_fit_samples(&m, s, k) == 0);
    REQUIRE(m.op[DPRO_COLL_ALLREDUCE].n_segs >= 1);
    double a = m.op[DPRO_COLL_ALLREDUCE].seg[0].alpha_ns;
    CHECK(a > 1.9e6);
    CHECK_EQ(costmodel_regime_at(&m, DPRO_COLL_ALLREDUCE, 2, 64 << 10, &r), 1);
    CHECK_EQ(r.proto, COSTMODEL_PROTO_LL);
    CHECK(fabs(r.alpha_ns - (a + (7.8 - 15.2) * 1000 * 8)) < 1);
    CHECK(r.alpha_ns > 0.95 * a);
}

int
main(void)
{
    test_large_to_small();
    test_small_to_large();
    test_ll128();
    test_latency_scale();
    test_segment_across_switch();
    test_inside_and_other_ops();
    test_latency_cap();
    return tests_done();
}
