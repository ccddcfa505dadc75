/*
 * test_replay_whatif_ranks: unit tests of the what-ifs about ranks (replay/whatif.c) and
 * of the cost model's extrapolation in rank count (costmodel_extrapolate_ranks):
 *   - one rank slower: replay_slow_rank on a synthetic job gives the kernel durations
 *     and the simulated iteration of the same job built with that rank slow (synth's
 *     straggler), the other rank waiting for it; the host form changes only the rank's
 *     host calls and gaps; refusals (factor, rank outside, folded rank);
 *   - more ranks: replay_scale_ranks with a model fitted on 2 ranks prices each
 *     all-reduce as the 8-rank job has it (latency x NCCL's ring growth, bandwidth term x
 *     the ring factor) and simulates the iteration of the 8-rank job; a piecewise model keeps the
 *     size regime measured; communicators of another size stay as they are;
 *   - more ranks across nodes: replay_scale_ranks_nodes moves each all-reduce's bandwidth
 *     term to the given network's when it is slower and adds a latency per crossing of
 *     the ring (2 (nodes - 1)); replay_job_hosts counts a job's hosts;
 *   - the host share: the stalls' share and length at N (hostshare_at), and
 *     hostshare_apply scaling a host node's work but not its traced stall.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dprotrace.h"
#include "replay/costmodel.h"
#include "replay/ncclname.h"
#include "replay/dfg.h"
#include "replay/hostshare.h"
#include "replay/replay.h"
#include "replay/sim.h"
#include "tests/replay/synth.h"
#include "tests/unit/testutil.h"

/* Mean simulated iteration of rank r of g over iterations 1 .. 2 (the first is warm-up). */
static double
iter_of(dfg *g, int32_t r)
{
    sim_result res;
    memset(&res, 0, sizeof res);
    double t = sim_run(g, &res) == 0 && res.n_unfinished == 0
                   ? sim_iteration_time(g, sim_timeline_of(&res), r, 1, 2)
                   : -1;
    sim_result_free(&res);
    return t;
}

static void
test_slow_rank(void)
{
    synth_params p;
    synth_defaults(&p);
    p.ranks = 2;
    dfg g, want, h;
    REQUIRE(synth_dfg(&p, &g) == 0);
    REQUIRE(dfg_clone(&h, &g) == 0);
    double base = iter_of(&g, 1);
    p.straggler_factor = 1.5; /* synth slows rank 0's kernels */
    REQUIRE(synth_dfg(&p, &want) == 0);
    int64_t kernels = 0, hosts = 0;
    for (int32_t n = 0; n < g.n_nodes; n++)
        if (dfg_rank(&g, n) == 0) {
            kernels += g.kind[n] == DFG_KERNEL;
            hosts += g.kind[n] == DFG_HOST;
        }
    CHECK_EQ(replay_slow_rank(&g, 0, 1.5, 1.0), kernels + hosts);
    int64_t worst = 0;
    for (int32_t n = 0; n < g.n_nodes; n++) {
        int64_t d = llabs(dfg_dur(&g, n) - dfg_dur(&want, n));
        worst = d > worst ? d : worst;
    }
    CHECK(worst <= 1); /* rounding only */
    double slow0 = iter_of(&g, 0), slow1 = iter_of(&g, 1), built = iter_of(&want, 1);
    printf("slow rank: base %.0f ns, rank 0's kernels x 1.5: %.0f / %.0f ns, built so %.0f ns\n",
           base, slow0, slow1, built);
    CHECK(base > 0 && fabs(slow1 - built) < 1e-4 * built);
    CHECK(slow1 > 1.3 * base);                 /* the other rank waits for the slow one */
    CHECK(fabs(slow0 - slow1) < 0.01 * slow1); /* at every all-reduce and the sync */

    /* the host form: rank 1's host calls and gaps doubled, nothing else */
    dfg h0;
    REQUIRE(dfg_clone(&h0, &h) == 0);
    CHECK(replay_slow_rank(&h, 1, 1.0, 2.0) > 0);
    int ok = 1;
    for (int32_t n = 0; n < h.n_nodes; n++) {
        int host1 = h.kind[n] == DFG_HOST && dfg_rank(&h, n) == 1;
        ok &= dfg_dur(&h, n) == (host1 ? 2 * dfg_dur(&h0, n) : dfg_dur(&h0, n));
        ok &= dfg_gap(&h, n) == (host1 ? 2 * dfg_gap(&h0, n) : dfg_gap(&h0, n));
    }
    CHECK(ok);
    CHECK(iter_of(&h, 0) > base);

    /* refusals */
    CHECK_EQ(replay_slow_rank(&h0, 0, 0.0, 1.0), -1);
    CHECK_EQ(replay_slow_rank(&h0, 0, 1.0, -2.0), -1);
    CHECK_EQ(replay_slow_rank(&h0, 2, 1.5, 1.0), -1);
    CHECK_EQ(replay_slow_rank(&h0, -1, 1.5, 1.0), -1);
    h0.rank_rep = calloc(2, sizeof *h0.rank_rep); /* rank 0 stands for both */
    h0.rank_weight = calloc(2, sizeof *h0.rank_weight);
    REQUIRE(h0.rank_rep && h0.rank_weight);
    h0.rank_weight[0] = 2;
    CHECK_EQ(replay_slow_rank(&h0, 0, 1.5, 1.0), -2);
    CHECK_EQ(replay_slow_rank(&h0, 1, 1.5, 1.0), -2);
    dfg_free(&g);
    dfg_free(&want);
    dfg_free(&h);
    dfg_free(&h0);
}

/* A model of all-reduces on 2 ranks: alpha + factor x bytes / beta at sizes 1-64 MiB. */
static void
fit_2_ranks(costmodel *m, double alpha, double beta)
{
    costmodel_sample s[64];
    size_t n = 0;
    for (int i = 0; i < 7; i++)
        for (int k = 0; k < 4; k++) {
            int64_t bytes = (int64_t)1 << (20 + i);
            double t = alpha + costmodel_factor(DPRO_COLL_ALLREDUCE, 2) * (double)bytes / beta;
            s[n++] = (costmodel_sample){DPRO_COLL_ALLREDUCE, 2, bytes, (int64_t)t, 0};
        }
    REQUIRE(costmodel_fit_samples(m, s, n) == 0);
}

static void
test_scale_ranks(void)
{
    synth_params p;
    synth_defaults(&p);
    p.ranks = 2;
    costmodel m;
    fit_2_ranks(&m, (double)p.coll_alpha_ns, p.coll_beta_bpns);
    dfg g, want;
    REQUIRE(synth_dfg(&p, &g) == 0);
    double base = iter_of(&g, 0);
    CHECK_EQ(replay_scale_ranks(&m, &g, 4, 8), 0); /* no communicator of 4 ranks */
    CHECK_EQ(replay_scale_ranks(&m, &g, 2, 1), -1);
    CHECK_EQ(replay_scale_ranks(&m, &g, 2, 8), g.n_groups);
    /* the 8-rank job, two of its ranks in the graph, its all-reduce latency grown as
     * NCCL's ring Simple latency from 2 to 8 ranks (25 MiB buckets): (8.4 + 14 x 3.4) /
     * (8.4 + 2 x 3.4) */
    CHECK_EQ(costmodel_proto_at(&m, DPRO_COLL_ALLREDUCE, 0, 2, p.bucket_bytes),
             COSTMODEL_PROTO_SIMPLE);
    double growth = costmodel_latency_growth(DPRO_COLL_ALLREDUCE, 0, COSTMODEL_PROTO_SIMPLE, 2, 8);
    CHECK(fabs(growth - (8.4 + 14 * 3.4) / (8.4 + 2 * 3.4)) < 1e-9);
    p.ranks = 8;
    p.classes = 2;
    p.coll_alpha_ns = llround((double)p.coll_alpha_ns * growth);
    REQUIRE(synth_dfg(&p, &want) == 0);
    int ok = 1;
    for (int32_t q = 0; q < g.n_groups; q++)
        ok &= g.grp_nranks[q] == 8 && llabs(g.grp_dur[q] - want.grp_dur[q]) <= 4;
    CHECK(ok);
    double got = iter_of(&g, 0), built = iter_of(&want, 0);
    printf("more ranks: 2 ranks %.0f ns; predicted at 8 %.0f ns, built at 8 %.0f ns\n", base, got,
           built);
    CHECK(got > base && fabs(got - built) < 1e-4 * built);
    dfg_free(&g);
    dfg_free(&want);
}

/* 8 ranks on 2 nodes from a 2-rank trace of one node: NVLink-like 200 B/ns in the trace,
 * a network of 25 B/ns and 5 us a crossing given. Each all-reduce of bytes b takes
 * 1.75 b (1 / 25 - 1 / 200) + 2 x 5 us more than on one node of 8; a network faster than
 * the trace's link adds only the crossings. */
static void
test_scale_ranks_nodes(void)
{
    synth_params p;
    synth_defaults(&p);
    p.ranks = 2;
    costmodel m;
    fit_2_ranks(&m, 20000, 200);
    dfg g, h;
    REQUIRE(synth_dfg(&p, &g) == 0);
    REQUIRE(replay_scale_ranks(&m, &g, 2, 8) == g.n_groups);
    REQUIRE(dfg_clone(&h, &g) == 0);
    double base = iter_of(&g, 0);
    CHECK_EQ(replay_scale_ranks_nodes(&m, &g, 2, 8, 1, 25, 5000), -1);
    CHECK_EQ(replay_scale_ranks_nodes(&m, &g, 2, 8, 2, 0, 5000), -1);
    CHECK_EQ(replay_scale_ranks_nodes(&m, &g, 2, 8, 2, 25, -1), -1);
    CHECK_EQ(replay_scale_ranks_nodes(&m, &g, 2, 8, 2, 25, 5000), g.n_groups);
    int ok = 1;
    for (int32_t q = 0; q < g.n_groups; q++) {
        double want = (double)h.grp_dur[q] +
                      1.75 * (double)g.grp_bytes[q] * (1.0 / 25 - 1.0 / 200) + 2 * 5000;
        ok &= g.grp_op[q] == DPRO_COLL_ALLREDUCE && fabs((double)g.grp_dur[q] - want) < 1e-3 * want;
    }
    CHECK(ok);
    double across = iter_of(&g, 0);
    printf("more ranks across nodes: 8 ranks on one node %.0f ns, on 2 nodes %.0f ns\n", base,
           across);
    CHECK(across > base);
    /* a network faster than the traced link: the crossings alone; 4 nodes: 6 of them */
    dfg f;
    REQUIRE(dfg_clone(&f, &h) == 0);
    CHECK_EQ(replay_scale_ranks_nodes(&m, &f, 2, 8, 4, 1000, 5000), f.n_groups);
    ok = 1;
    for (int32_t q = 0; q < f.n_groups; q++)
        ok &= llabs(f.grp_dur[q] - (h.grp_dur[q] + 6 * 5000)) <= 1;
    CHECK(ok);
    dfg_free(&f);
    /* a network so slow that a group's time passes BUILD_TIME_LIMIT: refused, not wrapped
     * round into a negative (faster) time */
    REQUIRE(dfg_clone(&f, &h) == 0);
    CHECK_EQ(replay_scale_ranks_nodes(&m, &f, 2, 8, 2, 1e-300, 5000), -1);
    CHECK_EQ(replay_scale_ranks_nodes(&m, &f, 2, 8, 2, 1e-12, 0), -1);
    dfg_free(&f);
    dfg_free(&g);
    dfg_free(&h);

    /* a job's hosts: ranks 0-2 on a, 3 on b, 4 missing, 5 on a host not known */
    job j;
    job_rank r[6];
    int dummy;
    const char *hosts[6] = {"a", "a", "a", "b", "b", NULL};
    memset(&j, 0, sizeof j);
    memset(r, 0, sizeof r);
    for (int i = 0; i < 6; i++) {
        r[i].host = hosts[i];
        r[i].reader = i == 4 ? NULL : (dpro_reader *)&dummy;
    }
    j.ranks = r;
    j.n_ranks = 6;
    int32_t most = -1;
    CHECK_EQ(replay_job_hosts(&j, &most), 2);
    CHECK_EQ(most, 3);
    j.n_ranks = 0;
    CHECK_EQ(replay_job_hosts(&j, &most), 0);
    CHECK_EQ(most, 0);
}

/* Two regimes, as NCCL switches protocol: below 1 MiB 10 us + x / 5 B/ns, from 1 MiB on
 * 60 us + x / 100 B/ns (x = factor x bytes; 2 ranks: factor 1). On 4 ranks the latency of
 * each grows as NCCL's ring LL (below 1 MiB: (6.6 + 6 x 0.6) / (6.6 + 2 x 0.6)) and Simple
 * ((8.4 + 6 x 3.4) / (8.4 + 2 x 3.4)) latency does. */
static double
regime(double x)
{
    return x < (1 << 20) ? 10000 + x / 5.0 : 60000 + x / 100.0;
}

static void
test_extrapolate_regimes(void)
{
    costmodel_sample s[256];
    size_t n = 0;
    for (int e = 14; e <= 26; e++)
        for (int h = 0; h < 2; h++)
            for (int k = 0; k < 4; k++) {
                int64_t bytes = h ? (int64_t)3 << (e - 1) : (int64_t)1 << e;
                s[n++] = (costmodel_sample){DPRO_COLL_ALLREDUCE, 2, bytes,
                                            (int64_t)regime((double)bytes), 0};
            }
    costmodel m;
    REQUIRE(costmodel_fit_samples(&m, s, n) == 0);
    CHECK(m.op[DPRO_COLL_ALLREDUCE].n_segs >= 2);
    int64_t sizes[2] = {(int64_t)3 << 15, (int64_t)3 << 23};
    for (int i = 0; i < 2; i++) {
        int64_t b = sizes[i];
        int64_t t2 = costmodel_predict(&m, DPRO_COLL_ALLREDUCE, 2, b);
        int64_t t4 = costmodel_extrapolate_ranks(&m, DPRO_COLL_ALLREDUCE, 2, 4, b, t2);
        double lat = i ? 60000 * ((8.4 + 6 * 3.4) / (8.4 + 2 * 3.4) - 1)
                       : 10000 * ((6.6 + 6 * 0.6) / (6.6 + 2 * 0.6) - 1);
        double want = regime((double)b) + 0.5 * (double)b / (i ? 100.0 : 5.0) + lat;
        printf("extrapolated %lld bytes: %lld ns on 2 ranks, %lld ns on 4 (truth %.0f)\n",
               (long long)b, (long long)t2, (long long)t4, want);
        CHECK(fabs((double)t4 - want) < 0.02 * want);
        /* fewer ranks go the other way, the latency shrinking by 1/growth of the line's
         * (the model's, fitted on 2 ranks): back to t2 but for alpha (g + 1/g - 2) */
        double g = costmodel_latency_growth(
            DPRO_COLL_ALLREDUCE, 0, costmodel_proto_at(&m, DPRO_COLL_ALLREDUCE, 0, 2, b), 2, 4);
        double back = (double)t2 + (i ? 60000 : 10000) * (g + 1 / g - 2);
        CHECK(fabs((double)costmodel_extrapolate_ranks(&m, DPRO_COLL_ALLREDUCE, 4, 2, b, t4) -
                   back) < 0.01 * back);
    }
    /* the alpha-beta model: its one line; a broadcast's traffic does not grow, its latency
     * does (n ring steps); an all-to-all has no ring steps */
    m.piecewise = 0;
    int64_t b = (int64_t)3 << 23, t2 = costmodel_predict(&m, DPRO_COLL_ALLREDUCE, 2, b);
    double beta = m.op[DPRO_COLL_ALLREDUCE].beta_bpns, alpha = m.op[DPRO_COLL_ALLREDUCE].alpha_ns;
    CHECK(beta > 0 && alpha > 0);
    double g28 = costmodel_latency_growth(DPRO_COLL_ALLREDUCE, 0, COSTMODEL_PROTO_SIMPLE, 2, 8);
    CHECK(llabs(costmodel_extrapolate_ranks(&m, DPRO_COLL_ALLREDUCE, 2, 8, b, t2) -
                llround((double)t2 + 0.75 * (double)b / beta + alpha * (g28 - 1))) <= 1);
    CHECK(fabs(costmodel_latency_growth(DPRO_COLL_BROADCAST, 0, COSTMODEL_PROTO_SIMPLE, 2, 8) -
               (8.4 + 8 * 3.4) / (8.4 + 2 * 3.4)) < 1e-9);
    CHECK(costmodel_extrapolate_ranks(&m, DPRO_COLL_BROADCAST, 2, 8, b, 12345) > 12345);
    CHECK_EQ(costmodel_latency_growth(DPRO_COLL_ALLTOALL, 0, COSTMODEL_PROTO_SIMPLE, 2, 8), 1.0);
    /* nothing fitted: the time as it was */
    costmodel empty;
    memset(&empty, 0, sizeof empty);
    CHECK_EQ(costmodel_extrapolate_ranks(&empty, DPRO_COLL_ALLREDUCE, 2, 8, b, 777), 777);
}

/* Kernel names (costmodel_sample.algo): an all-reduce on 2 ranks that NCCL runs as a tree
 * below 256 KiB and as a ring above, both at 12 us + x / 100 B/ns, so only the names tell
 * the two apart. The algorithm runs are those of the names, no segment spans both (one
 * line would fit all sizes), a size takes the nearest run's algorithm; the protocol is
 * NCCL's tuner choice with the model's bandwidth; the latency grows as the named
 * algorithm's. */
static double
named(double x)
{
    return 12000 + x / 100.0;
}

static void
test_named_algorithms(void)
{
    costmodel_sample s[256];
    size_t n = 0;
    for (int e = 12; e <= 26; e++)
        for (int h = 0; h < 2; h++)
            for (int k = 0; k < 3; k++) {
                int64_t bytes = h ? (int64_t)3 << (e - 1) : (int64_t)1 << e;
                s[n++] = (costmodel_sample){
                    DPRO_COLL_ALLREDUCE, 2, bytes, (int64_t)named((double)bytes),
                    bytes < (256 << 10) ? NCCLNAME_ALGO_TREE : NCCLNAME_ALGO_RING};
            }
    costmodel m;
    REQUIRE(costmodel_fit_samples(&m, s, n) == 0);
    const costmodel_fit *f = &m.op[DPRO_COLL_ALLREDUCE];
    CHECK_EQ(m.named, (int32_t)n);
    CHECK_EQ(f->n_runs, 2);
    CHECK(f->run[0].algo == NCCLNAME_ALGO_TREE && f->run[1].algo == NCCLNAME_ALGO_RING);
    CHECK(f->run[0].hi < (256 << 10) && f->run[1].lo >= (256 << 10));
    for (int32_t k = 0; k < f->n_segs; k++)
        CHECK(f->seg[k].hi <= f->run[0].hi || f->seg[k].lo >= f->run[1].lo);
    CHECK(f->pw_mape < 1.0);
    CHECK_EQ(costmodel_algo_at(&m, DPRO_COLL_ALLREDUCE, 2, 8 << 10), NCCLNAME_ALGO_TREE);
    CHECK_EQ(costmodel_algo_at(&m, DPRO_COLL_ALLREDUCE, 2, 1 << 30), NCCLNAME_ALGO_RING);
    CHECK_EQ(costmodel_algo_at(&m, DPRO_COLL_ALLREDUCE, 2, 64), NCCLNAME_ALGO_TREE);
    CHECK_EQ(costmodel_algo_at(&m, DPRO_COLL_BROADCAST, 2, 64), 0);
    /* the protocol, Simple's bandwidth 100 B/ns (the last segment's). Ring on 2 ranks: LL
     * (7.8 us, 50 B/ns) against Simple (15.2 us, 100 B/ns): LL below x = 7.4 us x 100 B/ns;
     * LL128 (17.8 us, 92 B/ns) never. On 8 ranks (x = 1.75 bytes): LL (15 us) up to x = 25.6 us
     * / (1/50 - 1/92) = 2.80 MB, LL128 (40.6 us) up to 15.4 us / (1/92 - 1/100) = 17.7 MB. */
    int ar = DPRO_COLL_ALLREDUCE, ring = NCCLNAME_ALGO_RING;
    CHECK_EQ(costmodel_proto_at(&m, ar, ring, 2, 700000), COSTMODEL_PROTO_LL);
    CHECK_EQ(costmodel_proto_at(&m, ar, ring, 2, 780000), COSTMODEL_PROTO_SIMPLE);
    CHECK_EQ(costmodel_proto_at(&m, ar, ring, 8, 1 << 20), COSTMODEL_PROTO_LL);
    CHECK_EQ(costmodel_proto_at(&m, ar, ring, 8, 4 << 20), COSTMODEL_PROTO_LL128);
    CHECK_EQ(costmodel_proto_at(&m, ar, ring, 8, 64 << 20), COSTMODEL_PROTO_SIMPLE);
    /* without names: the size rule */
    CHECK_EQ(costmodel_proto_at(&m, ar, 0, 8, 4 << 20), COSTMODEL_PROTO_SIMPLE);
    CHECK_EQ(costmodel_proto_at(&m, ar, 0, 8, 512 << 10), COSTMODEL_PROTO_LL);
    /* the tree's latency grows with log2 of the ranks (over the network), the ring's with
     * its steps */
    CHECK(fabs(costmodel_latency_growth(ar, NCCLNAME_ALGO_TREE, COSTMODEL_PROTO_LL, 2, 8) -
               (6.8 + 2 * 3 * 5.0) / (6.8 + 2 * 1 * 5.0)) < 1e-9);
    CHECK(fabs(costmodel_latency_growth(ar, ring, COSTMODEL_PROTO_LL128, 2, 8) -
               (14.0 + 14 * 1.9) / (14.0 + 2 * 1.9)) < 1e-9);
    /* a tree message extrapolated to 4 ranks: its segment's latency x the tree's growth of
     * the protocol inferred (LL: 16 KiB) */
    int64_t b = 16 << 10, t2 = costmodel_predict(&m, ar, 2, b);
    int32_t k = 0;
    while (k + 1 < f->n_segs && (double)b >= f->seg[k + 1].lo)
        k++;
    CHECK_EQ(costmodel_proto_at(&m, ar, NCCLNAME_ALGO_TREE, 2, b), COSTMODEL_PROTO_LL);
    double g = (6.8 + 2 * 2 * 5.0) / (6.8 + 2 * 1 * 5.0);
    double want = (double)t2 + 0.5 * (double)b / f->seg[k].beta_bpns + f->seg[k].alpha_ns * (g - 1);
    CHECK(fabs((double)costmodel_extrapolate_ranks(&m, ar, 2, 4, b, t2) - want) < 2);
}

/* Gives rank 1's participant of every group an arrival c + j or c - j (alternating) after
 * rank 0's. */
static void
set_arrivals(dfg *g, int64_t c, int64_t j)
{
    for (int32_t q = 0; q < g->n_groups; q++) {
        int64_t t0 = -1;
        for (int32_t p = g->grp_first[q]; p >= 0; p = dfg_next_in_group(g, p))
            if (dfg_rank(g, p) == 0)
                t0 = g->mstart[p];
        REQUIRE(t0 >= 0);
        for (int32_t p = g->grp_first[q]; p >= 0; p = dfg_next_in_group(g, p))
            if (dfg_rank(g, p) == 1)
                g->mstart[p] = t0 + c + (q % 2 ? j : -j);
    }
}

static void
test_rank_wait(void)
{
    synth_params p;
    synth_defaults(&p);
    p.ranks = 2;
    costmodel m;
    fit_2_ranks(&m, (double)p.coll_alpha_ns, p.coll_beta_bpns);
    dfg g;
    REQUIRE(synth_dfg(&p, &g) == 0);
    REQUIRE(g.n_groups * 2 >= REPLAY_RANK_WAIT_MIN_SAMPLES && g.n_groups % 2 == 0);
    CHECK_EQ(replay_scale_ranks(&m, &g, 2, 4), g.n_groups);
    /* a steady lateness of rank 1 and no jitter: the traced ranks keep it, nothing added */
    set_arrivals(&g, 300000, 0);
    CHECK_EQ(replay_rank_wait(&g, 2, 4, INT64_MIN, INT64_MAX), 0);
    /* rank 1 arrives c +- j after rank 0: about their group's mean the ranks sit at
     * +-(c +- j)/2, less their means +-c/2 a jitter of +-j/2; the latest of k draws of
     * that two-point distribution is j/2 (1 - 2^(1-k)) on average, so 4 ranks wait
     * 3j/16 more than 2 */
    set_arrivals(&g, 300000, 80000);
    int64_t *before = malloc((size_t)g.n_groups * sizeof *before);
    REQUIRE(before);
    for (int32_t q = 0; q < g.n_groups; q++)
        before[q] = g.grp_dur[q];
    double base = iter_of(&g, 0);
    CHECK_EQ(replay_rank_wait(&g, 2, 4, INT64_MIN, INT64_MAX), 3 * 80000 / 16);
    CHECK_EQ(g.grp_wait_ns, 3 * 80000 / 16);
    CHECK_EQ(g.grp_wait_nranks, 4);
    for (int32_t q = 0; q < g.n_groups; q++)
        CHECK_EQ(g.grp_dur[q], before[q]); /* a wait, not a longer transfer */
    CHECK(iter_of(&g, 0) > base);
    /* the transfer starts that long after the last arrival and lasts what it did */
    sim_result res;
    memset(&res, 0, sizeof res);
    REQUIRE(sim_run(&g, &res) == 0 && res.n_unfinished == 0);
    for (int32_t q = 0; q < g.n_groups; q++) {
        int64_t last = INT64_MIN;
        for (int32_t n = g.grp_first[q]; n >= 0; n = dfg_next_in_group(&g, n))
            last = res.start[n] > last ? res.start[n] : last;
        CHECK_EQ(res.grp_arrival[q], last + 3 * 80000 / 16);
        CHECK_EQ(res.end[g.grp_first[q]], res.grp_arrival[q] + g.grp_dur[q]);
    }
    sim_result_free(&res);
    /* no group of 8 ranks (they were repriced for 4) */
    CHECK_EQ(replay_rank_wait(&g, 2, 8, INT64_MIN, INT64_MAX), 0);
    /* no arrival in the window, fewer ranks, bad counts */
    CHECK_EQ(replay_rank_wait(&g, 2, 4, INT64_MAX - 1, INT64_MAX), 0);
    CHECK_EQ(replay_rank_wait(&g, 4, 2, INT64_MIN, INT64_MAX), 0);
    CHECK_EQ(replay_rank_wait(&g, 1, 4, INT64_MIN, INT64_MAX), -1);
    free(before);
    dfg_free(&g);
}

/* The expected latest of k stalls, each 0 with probability 1 - p and else uniform on
 * (0, a]: the integral of 1 - (1 - p + p y / a)^k over (0, a). */
static double
max_stall(int k, double p, double a)
{
    return a - a * (1 - pow(1 - p, k + 1)) / (p * (k + 1));
}

/* What those stalls add to a collective of k ranks: their latest less their mean, p a / 2,
 * which the stretch of the host time already holds. */
static double
stall_spread(int k, double p, double a)
{
    return max_stall(k, p, a) - p * a / 2;
}

static void
test_rank_wait_stalled(void)
{
    synth_params p;
    synth_defaults(&p);
    p.ranks = 2;
    costmodel m;
    fit_2_ranks(&m, (double)p.coll_alpha_ns, p.coll_beta_bpns);
    dfg g;
    REQUIRE(synth_dfg(&p, &g) == 0);
    CHECK_EQ(replay_scale_ranks(&m, &g, 2, 4), g.n_groups);
    /* no jitter traced: the wait is the stalls' alone, the latest of 4 (the traced 2 had
     * none) less their mean; without stalls nothing */
    set_arrivals(&g, 300000, 0);
    CHECK_EQ(replay_rank_wait(&g, 2, 4, INT64_MIN, INT64_MAX), 0);
    int64_t w = replay_rank_wait_stalled(&g, 2, 4, INT64_MIN, INT64_MAX, 1, 1e6);
    CHECK(llabs(w - 300000) < 300); /* 4/5 of 1 ms, less the mean 1/2 */
    CHECK_EQ(g.grp_wait_ns, w);
    w = replay_rank_wait_stalled(&g, 2, 4, INT64_MIN, INT64_MAX, 0.375, 6e5);
    CHECK(fabs((double)w - stall_spread(4, 0.375, 6e5)) < 300);
    CHECK_EQ(replay_rank_wait_stalled(&g, 2, 4, INT64_MIN, INT64_MAX, 0, 6e5), 0);
    /* traced jitter +-40 us and stalls: the latest of 4 sums, less the stalls' mean, is at
     * least their stalls' spread (less the latest of the traced 2, 20 us) and at most the
     * jitter's wait plus that spread; and never below the jitter's wait alone (the sums'
     * latest is at least the latest jitter plus a stall drawn independently of it) */
    set_arrivals(&g, 300000, 80000);
    int64_t jit = replay_rank_wait(&g, 2, 4, INT64_MIN, INT64_MAX);
    w = replay_rank_wait_stalled(&g, 2, 4, INT64_MIN, INT64_MAX, 0.375, 6e5);
    printf("waits at 4: jitter %lld ns, stalls %.0f ns, both %lld ns\n", (long long)jit,
           stall_spread(4, 0.375, 6e5), (long long)w);
    CHECK(w > jit && (double)w > stall_spread(4, 0.375, 6e5) - 20000 - 300 &&
          (double)w < (double)jit + stall_spread(4, 0.375, 6e5) + 300);
    /* bad stalls */
    CHECK_EQ(replay_rank_wait_stalled(&g, 2, 4, INT64_MIN, INT64_MAX, 1.5, 6e5), -1);
    CHECK_EQ(replay_rank_wait_stalled(&g, 2, 4, INT64_MIN, INT64_MAX, 0.5, -1), -1);
    dfg_free(&g);
}

/* A host of cores CPUs with 2 traced ranks of demand d busy a share b of their window. */
static void
two_ranks(hostshare *hs, double cores, double d, double b, double *arrays)
{
    static int32_t host[2];
    memset(hs, 0, sizeof *hs);
    hs->known = 1;
    hs->n_ranks = 2;
    hs->n_hosts = 1;
    hs->per_host_traced = 2;
    hs->demand = arrays;
    hs->cores = arrays + 2;
    hs->busy = arrays + 4;
    hs->factor = arrays + 6;
    hs->host = host;
    hs->slice_ns = 1.5e6;
    for (int r = 0; r < 2; r++) {
        host[r] = 0;
        hs->demand[r] = d;
        hs->cores[r] = cores;
        hs->busy[r] = b;
        hs->factor[r] = 1;
    }
    hs->load_traced = 2 * d / b / cores;
}

static void
test_hostshare_stalls(void)
{
    hostshare hs;
    double a[8];
    /* burst 0.8 a rank: load 0.8 traced on 2 cores, 1.6 with 4: a thread stalled at
     * 1 - 1/1.6 of the moments, for up to 0.6 slices */
    two_ranks(&hs, 2, 0.6, 0.75, a);
    CHECK_EQ(hostshare_at(&hs, 4, 4), 0);
    CHECK(fabs(hs.load_to - 1.6) < 1e-9 && fabs(hs.factor_max - 1.6) < 1e-9);
    CHECK(fabs(hs.stall_p - 0.375) < 1e-9 && fabs(hs.stall_ns - 0.6 * 1.5e6) < 1e-3);
    /* on 1 core: 1.6 traced (its stalls in the trace), 3.2 at 4: the rest */
    two_ranks(&hs, 1, 0.6, 0.75, a);
    CHECK_EQ(hostshare_at(&hs, 4, 4), 0);
    CHECK(fabs(hs.stall_p - 0.5) < 1e-9 && fabs(hs.stall_ns - 1.6 * 1.5e6) < 1e-3);
    /* the traced layout, or a load under 1: no stalls */
    CHECK_EQ(hostshare_at(&hs, 0, 4), 0);
    CHECK(hs.stall_p == 0 && hs.stall_ns == 0);
    two_ranks(&hs, 2, 0.2, 0.75, a);
    CHECK_EQ(hostshare_at(&hs, 4, 4), 0);
    CHECK(hs.stall_p == 0 && hs.stall_ns == 0);
}

/* hostshare_apply at x4 on a synthetic job's host nodes: every node's duration and gap
 * scaled, but a node holding a traced 3 ms stall keeps the stall as traced and scales the
 * rest (its time 4 (t - 3 ms) + 3 ms, not 4 t). */
static void
test_hostshare_keeps_stalls(void)
{
    synth_params p;
    synth_defaults(&p);
    p.ranks = 2;
    dfg g, h;
    REQUIRE(synth_dfg(&p, &g) == 0);
    int32_t st = -1, other = -1;
    for (int32_t n = 0; n < g.n_nodes && other < 0; n++) {
        if (g.kind[n] != DFG_HOST || dfg_rank(&g, n) != 0 || (g.flags[n] & DFG_F_WAKEUP))
            continue;
        if (st < 0)
            st = n;
        else
            other = n;
    }
    REQUIRE(st >= 0 && other >= 0);
    REQUIRE(dfg_set_gap(&g, st, dfg_gap(&g, st) + 3000000) == 0);
    REQUIRE(dfg_clone(&h, &g) == 0);
    hostshare hs;
    double a[8], stall = 3e6;
    int32_t node = st;
    two_ranks(&hs, 2, 1.0, 1.0, a); /* load 1 traced, 4 with 8 a host: x4 */
    hs.stall = &stall;
    hs.stall_node = &node;
    hs.n_stall = 1;
    CHECK_EQ(hostshare_at(&hs, 8, 8), 0);
    CHECK(fabs(hs.factor[0] - 4) < 1e-9);
    CHECK(hostshare_apply(&hs, &g) > 0);
    double t = (double)(dfg_dur(&h, st) + dfg_gap(&h, st)),
           got = (double)(dfg_dur(&g, st) + dfg_gap(&g, st)), want = 4 * (t - stall) + stall;
    printf("host share x4: a node of %.0f ns with a 3 ms stall takes %.0f ns (want %.0f; "
           "stretched whole %.0f)\n",
           t, got, want, 4 * t);
    CHECK(fabs(got - want) <= 2);
    CHECK(llabs(dfg_dur(&g, other) + dfg_gap(&g, other) -
                4 * (dfg_dur(&h, other) + dfg_gap(&h, other))) <= 2);
    dfg_free(&g);
    dfg_free(&h);
}

/* More pooled arrivals than expected_max_stalled integrates over (800 groups of 2: 1,600)
 * and a rare outlier (rank 1 400 us late at every 97th group): the stalls' term is the
 * integral with them less the same integral without them, so the quantiles it keeps do
 * not move the wait. At 64 to 1,024 ranks and stalls rare or common, the wait is at least
 * the jitter's and at most the jitter's plus the stalls' spread alone (the latest of sums
 * is at most the latest of each). */
static void
test_rank_wait_stalled_many(void)
{
    synth_params p;
    synth_defaults(&p);
    p.ranks = 2;
    p.iterations = 40;
    p.buckets = 20;
    costmodel m;
    fit_2_ranks(&m, (double)p.coll_alpha_ns, p.coll_beta_bpns);
    const int32_t ks[] = {64, 256, 1024};
    const double ps[] = {1e-4, 0.1}, a = 1e4;
    for (int t = 0; t < 3; t++) {
        dfg g;
        REQUIRE(synth_dfg(&p, &g) == 0);
        REQUIRE(g.n_groups * 2 > 512);
        CHECK_EQ(replay_scale_ranks(&m, &g, 2, ks[t]), g.n_groups);
        set_arrivals(&g, 300000, 2000);
        for (int32_t q = 0; q < g.n_groups; q += 97)
            for (int32_t n = g.grp_first[q]; n >= 0; n = dfg_next_in_group(&g, n))
                if (dfg_rank(&g, n) == 1)
                    g.mstart[n] += 400000;
        int64_t jit = replay_rank_wait(&g, 2, ks[t], INT64_MIN, INT64_MAX);
        for (int i = 0; i < 2; i++) {
            int64_t w = replay_rank_wait_stalled(&g, 2, ks[t], INT64_MIN, INT64_MAX, ps[i], a);
            printf("%d ranks, stalls p %g: jitter %lld ns, both %lld ns (spread alone %.0f)\n",
                   ks[t], ps[i], (long long)jit, (long long)w, stall_spread(ks[t], ps[i], a));
            CHECK(jit > 0 && w >= jit &&
                  (double)w <= (double)jit + stall_spread(ks[t], ps[i], a) + 50);
        }
        dfg_free(&g);
    }
}

int
main(void)
{
    test_slow_rank();
    test_scale_ranks();
    test_scale_ranks_nodes();
    test_rank_wait();
    test_rank_wait_stalled();
    test_rank_wait_stalled_many();
    test_hostshare_stalls();
    test_hostshare_keeps_stalls();
    test_extrapolate_regimes();
    test_named_algorithms();
    return tests_done();
}
