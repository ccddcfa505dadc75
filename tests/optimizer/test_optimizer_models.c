/*
 * test_optimizer_models: unit tests of libdproopt's learnt models on hand-made and
 * synthetic jobs.
 *   - the per-kernel fixed cost fitted on launch sizes (workload_fit_fixed_cost);
 *   - the per-name hinge, flat then linear in the threads, and its knee;
 *   - the contention correction of a plan's kernels by their simulated overlap;
 *   - the hook calls around a bucket's collective call, gone with a folded bucket;
 *   - DDP's buckets of whole parameters (partition_ddp_buckets, workload_match_params),
 *     ready at their last parameter's copy into the bucket, and the finalisation's
 *     waits between buckets' copies back, gone with a folded bucket;
 *   - the typical prediction: a host stall that moves from iteration to iteration is not
 *     carried into the baseline or a plan, one at the same place in every iteration is;
 *   - torch.compile's fusion model (WL_FUSE_COMPILED) on a PyTorch-like step: which device
 *     ops fuse, which stay, and what the fused runs cost on the device and the host.
 * The other optimizer tests are in test_optimizer.c.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dprotrace.h"
#include "optimizer/memest.h"
#include "optimizer/partition.h"
#include "optimizer/strategy.h"
#include "optimizer/workload.h"
#include "tests/optimizer/optjobs.h"
#include "tests/replay/synth.h"
#include "tests/unit/testutil.h"

/* The per-kernel fixed cost fitted on launch sizes: two kernel names whose durations
 * are c0 + c1 * threads (c0 = 3 us, different slopes), with +-2 % jitter and a few slow
 * outliers, recover c0 within a few percent; a name with one launch size, one with too
 * little spread and one whose time falls with size do not take part; without such names
 * the prior is used; the fit feeds operator fusion. */
static void
test_fixed_cost_fit(void)
{
    workload_kernel_sample s[2000];
    size_t n = 0;
    uint64_t rs = 12345;
    static const double threads[5] = {1 << 10, 1 << 13, 1 << 15, 1 << 17, 1 << 18};
    for (int rep = 0; rep < 40; rep++)
        for (int k = 0; k < 5; k++)
            for (uint64_t name = 1; name <= 2; name++) {
                rs = rs * 6364136223846793005ULL + 1442695040888963407ULL;
                double jitter = ((double)(rs >> 40) / (double)(1 << 24) - 0.5) * 0.04;
                double t = 3000 + threads[k] * (name == 1 ? 0.05 : 0.2);
                if (rep % 17 == 3)
                    jitter = 0.5; /* an outlier: the median of its size ignores it */
                int64_t dur = (int64_t)(t * (1 + jitter));
                s[n++] = (workload_kernel_sample){name, threads[k], dur, 0, -1, 0, 0, 0};
            }
    for (int rep = 0; rep < 20; rep++) { /* GEMMs: one launch size */
        s[n++] = (workload_kernel_sample){3, 27648, 100000 + rep, 0, -1, 0, 0, 0};
        /* too little spread: sizes within a factor of 2 */
        s[n++] = (workload_kernel_sample){
            4, 1000 + 100 * (rep % 5), 20000 + 10 * (rep % 5), 0, -1, 0, 0, 0};
        /* time falls with size */
        s[n++] = (workload_kernel_sample){
            5, 1000 << (rep % 4), 90000 - 1000 * (rep % 4), 0, -1, 0, 0, 0};
    }
    workload_fixed_fit fit;
    CHECK_EQ_U(workload_fit_fixed_cost(s, n, &fit), 2);
    CHECK(fabs(fit.c0_ns - 3000) < 0.05 * 3000);
    CHECK(fit.slope_ns > 0.04 && fit.slope_ns < 0.21);
    CHECK_EQ_U(workload_fit_fixed_cost(s + n - 60, 60, &fit), 0);
    CHECK_EQ_U(workload_fit_fixed_cost(NULL, 0, &fit), 0);

    /* in workload_analyze: the fit replaces the prior (the fusion job's shortest kernel
     * is 10 us, above it) and fusion saves it per fused kernel */
    dfg g;
    REQUIRE(build_fusion_job(&g, 4) == 0);
    workload_options o;
    workload_default_options(&o);
    o.kernel_fixed_us = 1;
    o.fusion_fixed = 1; /* the fixed-cost formula (the hinge: test_hinge_fit) */
    o.kernel_samples = s;
    o.n_kernel_samples = n;
    workload w;
    sim_result res;
    memset(&res, 0, sizeof res);
    REQUIRE(workload_analyze(&w, &g, &res, 1, 2, NULL, NULL, -1, &o) == 0);
    CHECK_EQ_U(w.fusion.fixed_fit.names, 2);
    CHECK(fabs(w.fusion.kernel_fixed_ns - 3000) < 0.05 * 3000);
    CHECK(w.opt.kernel_samples == NULL);
    strategy_plan p;
    strategy_plan_baseline(&p);
    p.fuse = 1;
    strategy_eval e;
    CHECK(strategy_evaluate(&w, &p, &res, &e) == 0);
    CHECK(fabs((w.base_iter_ns - e.iter_ns) - 2 * w.fusion.kernel_fixed_ns) < 0.5 * US);
    workload_free(&w);
    /* nothing to fit: the prior */
    o.n_kernel_samples = 60;
    o.kernel_samples = s + n - 60;
    REQUIRE(workload_analyze(&w, &g, &res, 1, 2, NULL, NULL, -1, &o) == 0);
    CHECK_EQ_U(w.fusion.fixed_fit.names, 0);
    CHECK(fabs(w.fusion.kernel_fixed_ns - 1 * US) < 1);
    workload_free(&w);
    sim_result_free(&res);
    dfg_free(&g);
}

/* The per-name hinge (workload_fit_hinges): a known truth flat below 65536 threads (a grid
 * that does not fill the device) and linear above is recovered, with its knee; a fusion
 * chain of three kernels in the flat part fuses into one kernel of the same time (the
 * fixed-cost formula would keep 3 t - 2 c0), and workload_analyze and strategy_evaluate use
 * it for the chains whose kernels have a hinge. */
static double
hinge_truth(double threads)
{
    return 4000 + 0.002 * (threads > 65536 ? threads : 65536);
}

static void
test_hinge_fit(void)
{
    static const double threads[6] = {1024, 4096, 16384, 65536, 262144, 1048576};
    workload_kernel_sample s[200];
    size_t n = 0;
    uint64_t rs = 99;
    for (int rep = 0; rep < 9; rep++)
        for (int k = 0; k < 6; k++) {
            rs = rs * 6364136223846793005ULL + 1442695040888963407ULL;
            double jitter = ((double)(rs >> 40) / (double)(1 << 24) - 0.5) * 0.02;
            s[n++] = (workload_kernel_sample){
                7, threads[k], (int64_t)(hinge_truth(threads[k]) * (1 + jitter)), 0, -1, 0, 0, 0};
        }
    for (int rep = 0; rep < 5; rep++) /* one launch size: no hinge */
        s[n++] = (workload_kernel_sample){8, 27648, 100000 + rep, 0, -1, 0, 0, 0};
    workload_hinge *h = NULL;
    CHECK_EQ_U(workload_fit_hinges(s, n, &h), 1);
    REQUIRE(h != NULL);
    CHECK(h[0].key == 7 && h[0].sizes == 6);
    CHECK_EQ_U((int64_t)h[0].ts, 65536);
    CHECK(fabs(h[0].c0 - 4000) < 0.03 * 4000);
    CHECK(fabs(h[0].c1 - 0.002) < 0.05 * 0.002);
    for (int k = 0; k < 6; k++)
        CHECK(fabs(workload_hinge_at(&h[0], threads[k]) - hinge_truth(threads[k])) <
              0.02 * hinge_truth(threads[k]));
    /* beyond the sizes seen: the line */
    CHECK(fabs(workload_hinge_at(&h[0], 4194304) - hinge_truth(4194304)) <
          0.03 * hinge_truth(4194304));
    free(h);

    /* in the optimizer: the fusion job's short kernels (10 us, 4096 threads each) get name
     * 7's hinge; their chains of three fuse into one kernel of 10 us (flat part) */
    dfg g;
    REQUIRE(build_fusion_job(&g, 4) == 0);
    int32_t nm_s = dfg_intern(&g, "elementwise");
    size_t m = n;
    for (int32_t d = 0; d < g.n_nodes; d++) {
        int64_t end = dfg_mend(&g, d); /* kept where it was */
        g.mstart[d] = 1000 * (int64_t)d;
        REQUIRE(dfg_set_mend(&g, d, end) == 0);
        if (g.kind[d] == DFG_KERNEL && g.name[d] == nm_s && m < sizeof s / sizeof s[0])
            s[m++] = (workload_kernel_sample){7,           4096, dfg_dur(&g, d),     0,
                                              g.mstart[d], 0,    g.res_id[g.res[d]], (uint64_t)d};
    }
    for (int fixed = 0; fixed <= 1; fixed++) {
        workload_kernel_sample copy[200];
        memcpy(copy, s, m * sizeof *s);
        workload_options o;
        workload_default_options(&o);
        o.fusion_fixed = fixed;
        o.kernel_samples = copy;
        o.n_kernel_samples = m;
        workload w;
        sim_result res;
        memset(&res, 0, sizeof res);
        REQUIRE(workload_analyze(&w, &g, &res, 1, 2, NULL, NULL, -1, &o) == 0);
        CHECK_EQ_U(w.fusion.n_hinges, 1);
        CHECK_EQ_U(w.fusion.chains_by_hinge, fixed ? 0 : w.fusion.n_chains);
        strategy_plan p;
        strategy_plan_baseline(&p);
        p.fuse = 1;
        strategy_eval e;
        CHECK(strategy_evaluate(&w, &p, &res, &e) == 0);
        double saved = w.base_iter_ns - e.iter_ns;
        if (fixed)
            CHECK(fabs(saved - 2 * w.fusion.kernel_fixed_ns) < 0.5 * US);
        else
            CHECK(fabs(saved - 20 * US) < 0.5 * US);
        double chain_ns, fused_ns;
        strategy_fusion_summary(&w, &chain_ns, &fused_ns);
        CHECK(fabs(chain_ns - 30 * US) < 1);
        if (!fixed)
            CHECK(fabs(fused_ns - 10 * US) < 1);
        workload_free(&w);
        sim_result_free(&res);
    }
    dfg_free(&g);
}

/* The contention correction (strategy.h): with a compute factor, a plan's kernels that
 * overlap transfers in its simulated schedule more than measured get longer, those that
 * overlap less get shorter; off (the default) or without a fitted factor, nothing moves. */
static void
test_contention_correction(void)
{
    dfg g;
    costmodel m;
    fit_model(&m);
    REQUIRE(synth_job(&g, 200, 8) == 0);
    workload w;
    sim_result res;
    memset(&res, 0, sizeof res);
    REQUIRE(workload_analyze(&w, &g, &res, 0, 1, &m, NULL, -1, NULL) == 0);
    CHECK(w.opt.no_contention == 1);
    strategy_plan p;
    strategy_plan_baseline(&p);
    p.bucket_cap = p.first_cap = 5; /* every unit alone */
    strategy_eval plain, more, less, off;
    CHECK(strategy_evaluate(&w, &p, &res, &plain) == 0);
    int32_t kernels = 0;
    for (int32_t d = 0; d < g.n_nodes; d++) /* the synthetic job has no measured times */
        if (g.kind[d] == DFG_KERNEL) {
            w.f_meas[d] = 0; /* as if no kernel overlapped a transfer in the trace */
            kernels++;
        }
    CHECK(kernels > 0);
    w.contention.comp.fitted = 1;
    w.contention.comp.k = 0.5;
    CHECK(strategy_evaluate(&w, &p, &res, &off) == 0); /* still off */
    CHECK(off.iter_ns == plain.iter_ns);
    w.opt.no_contention = 0;
    CHECK(strategy_evaluate(&w, &p, &res, &more) == 0);
    CHECK(more.iter_ns > plain.iter_ns);
    for (int32_t d = 0; d < g.n_nodes; d++)
        if (w.f_meas[d] >= 0)
            w.f_meas[d] = 1; /* as if every kernel overlapped one */
    CHECK(strategy_evaluate(&w, &p, &res, &less) == 0);
    CHECK(less.iter_ns < plain.iter_ns);
    w.contention.comp.fitted = 0; /* thin data: no factor */
    CHECK(strategy_evaluate(&w, &p, &res, &off) == 0);
    CHECK(off.iter_ns == plain.iter_ns);
    workload_free(&w);
    sim_result_free(&res);
    dfg_free(&g);
}

/* The iteration time predicted for buckets of cap `cap` (an index of
 * strategy_bucket_caps_mb) on a host-bound synthetic job (2000 kernels of 2 us, 6 us of
 * host per launch) of 8 buckets of 1 MiB, each all-reduce call followed by `hook` event queries
 * (1 us, 2 us gap each); into *blocks the hook-block calls found, into *n_buckets the
 * plan's buckets. */
static int64_t
plan_iteration(int32_t hook, int cap, int32_t *blocks, int32_t *n_buckets)
{
    synth_params sp;
    synth_defaults(&sp);
    sp.ranks = 2;
    sp.ops_per_iter = 2000; /* 12 ms of host: over the 32 buckets' 7 ms of all-reduces */
    sp.buckets = 8;
    sp.bucket_bytes = 1 << 20;
    sp.kernel_ns = 2000;
    sp.hook_calls = hook;
    dfg g;
    costmodel m;
    fit_model(&m);
    REQUIRE(synth_dfg(&sp, &g) == 0);
    workload w;
    sim_result res;
    memset(&res, 0, sizeof res);
    REQUIRE(workload_analyze(&w, &g, &res, 0, 1, &m, NULL, -1, NULL) == 0);
    *blocks = w.buckets.group_block_off ? w.buckets.group_block_off[g.n_groups] : -1;
    strategy_plan p;
    strategy_plan_baseline(&p);
    p.bucket_cap = p.first_cap = (int8_t)cap;
    strategy_eval e;
    memset(&e, 0, sizeof e);
    CHECK(strategy_evaluate(&w, &p, &res, &e) == 0);
    *n_buckets = e.n_buckets;
    workload_free(&w);
    sim_result_free(&res);
    dfg_free(&g);
    return e.iter_ns;
}

/* A folded bucket loses its whole hook block (workload.h: group_block), not only the
 * collective call and the record before it: 4 queries after each of 8 calls (every
 * iteration of the 2 ranks: 3 x 8 x 2 x 4 = 192 block calls) leave in the plan of one
 * bucket only the last bucket's 4, 12 us of host time, where the 7 folded buckets' 28
 * would keep 84 us. A bucket that tensor partition adds copies the block: at 0.25 MiB
 * the 24 added buckets' 96 queries cost 288 us more than the 8 units' 32 (96 us). */
static void
test_hook_block(void)
{
    int32_t blocks0, blocks4, nb0, nb4;
    int last = strategy_n_bucket_caps - 1;
    int64_t t0 = plan_iteration(0, last, &blocks0, &nb0);
    int64_t t4 = plan_iteration(4, last, &blocks4, &nb4);
    CHECK_EQ_U(blocks0, 0);
    CHECK_EQ_U(blocks4, 192);
    CHECK(nb0 == 1 && nb4 == 1);
    CHECK(t4 >= t0 && t4 - t0 <= 20 * US);
    int64_t s0 = plan_iteration(0, 1, &blocks0, &nb0), s4 = plan_iteration(4, 1, &blocks4, &nb4);
    CHECK(nb0 == 32 && nb4 == 32);
    CHECK(s4 - s0 >= 300 * US && s4 - s0 <= 450 * US);
    if (t4 - t0 > 20 * US || s4 - s0 < 300 * US || s4 - s0 > 450 * US)
        fprintf(stderr, "one bucket: %lld ns with hook calls, %lld without; 32: %lld, %lld\n",
                (long long)t4, (long long)t0, (long long)s4, (long long)s0);
}

/* A block remade after the first iteration (memest.h): the optimizer's state took layer 2's
 * cached 26 MiB block after the first backward (no cudaMalloc: the cache served it), and
 * the next forward made a 26 MiB block anew. With layer 0 recomputed, its 50 MiB rebuild
 * block is free during the next forward and layer 2's request takes it whole, as the
 * allocator of the trace (one block per request, never split) does: 8 + 14 + 50 MiB of
 * blocks for 48 MiB of activations, beside the held 26 and the 20 static (the shape of
 * fidelity pair 34, whose realised peak was 16 MiB over the bytes the plan needs). */
static void
test_memest_remade(void)
{
    memest_event ev[] = {
        {10, 1, 20 << 20, 0x1000, 1},   /* weights and buckets: static */
        {150, 1, 50 << 20, 0x2000, 1},  /* layer 0 activations */
        {200, 1, 14 << 20, 0x3000, 1},  /* layer 1 */
        {250, 1, 26 << 20, 0x4000, 1},  /* layer 2 */
        {1100, 1, 26 << 20, 0x5000, 1}, /* the next forward's layer 2, made anew */
    };
    memest_phases ph = {.iter_start = 100,
                        .bwd_start = 500,
                        .bwd_end = 700,
                        .iter_end = 1000,
                        .fwd_thread = 1,
                        .bwd_thread = 2};
    memest m;
    REQUIRE(memest_build(ev, sizeof ev / sizeof ev[0], &ph, &m) == 0);
    CHECK_EQ_U(m.n_held, 1);
    CHECK_EQ_U(m.other_bytes, 0);
    /* the recorded job: the held block and a new one for layer 2, as measured */
    CHECK_EQ_U(memest_predict(&m, NULL, 0, 0.125, 1), (20 + 26 + 90) << 20);
    /* layer 0 recomputed: 50 / 8 -> 8 MiB kept; the bytes needed at once are
     * max(8 + 14 + 26, 8 + 50) = 58 MiB, the blocks in use 8 + 14 + 50 = 72 MiB */
    uint8_t rc[3] = {1, 0, 0};
    CHECK_EQ_U(memest_predict(&m, rc, 3, 0.125, 1), (20 + 26 + 72) << 20);

    /* packed for another process (--mpi) and back: the same; cut bytes are refused */
    void *buf = NULL;
    size_t len = 0;
    memest u;
    REQUIRE(memest_pack(&m, &buf, &len) == 0 && memest_unpack(&u, buf, len) == 0);
    CHECK(u.n_held == 1 && u.act_bytes != m.act_bytes && u.held_bytes != m.held_bytes);
    CHECK_EQ_U(memest_predict(&u, rc, 3, 0.125, 1), (20 + 26 + 72) << 20);
    memest_free(&u);
    CHECK(memest_unpack(&u, buf, len - 8) != 0 && u.act_bytes == NULL);
    free(buf);
    memest_free(&m);
}

/* DDP's buckets of whole parameters. The 28 gradient sizes that the closed loop's huge-bucket
 * profile copies back after its one all-reduce (tests/torch/ddp_train.py --dim 256), packed
 * at bucket_cap_mb=0.5, are the 7 all-reduces the applied run made (their bytes from its
 * trace); a bucket closes with the tensor that reaches the cap, the first at its own cap;
 * copies match units only where their running sums meet at every unit's end. */
static void
test_ddp_buckets(void)
{
    const int64_t MiB = 1 << 20;
    const int64_t huge[28] = {64,     16384,   1024,   1048576, 4096,   1048576, 1024,
                              1024,   1024,    262144, 3072,    786432, 1024,    1024,
                              1024,   1048576, 4096,   1048576, 1024,   1024,    1024,
                              262144, 3072,    786432, 1024,    1024,   1024,    262144};
    const int64_t applied[7] = {1066048, 1052672, 1054720, 1051648, 1052672, 1054720, 265216};
    int32_t end[28];
    int32_t nb = partition_ddp_buckets(huge, 28, MiB / 2, MiB / 2, end);
    CHECK_EQ_U(nb, 7);
    for (int32_t b = 0, i = 0; b < nb && b < 7; b++) {
        int64_t bytes = 0;
        for (; i <= end[b]; i++)
            bytes += huge[i];
        CHECK_EQ_U(bytes, applied[b]);
    }
    CHECK_EQ_U(end[6], 27);
    /* a bucket closes at its cap exactly; the first bucket at the first cap */
    const int64_t five[5] = {100, 100, 100, 100, 100};
    CHECK_EQ_U(partition_ddp_buckets(five, 5, 300, 300, end), 2);
    CHECK(end[0] == 2 && end[1] == 4);
    CHECK_EQ_U(partition_ddp_buckets(five, 5, 150, 300, end), 2);
    CHECK(end[0] == 1 && end[1] == 4);
    CHECK_EQ_U(partition_ddp_buckets(five, 5, 100, 100, NULL), 5);
    CHECK_EQ_U(partition_ddp_buckets(five, 5, 1000, 1000, end), 1);
    CHECK_EQ_U(end[0], 4);
    /* the copies against the units */
    int32_t off[4];
    const int64_t one[1] = {6597696};
    CHECK(workload_match_params(huge, 28, one, 1, off) && off[0] == 0 && off[1] == 28);
    const int64_t two[2] = {300, 200};
    CHECK(workload_match_params(five, 5, two, 2, off) && off[0] == 0 && off[1] == 3 && off[2] == 5);
    const int64_t cut[2] = {250, 250}; /* a copy across the units' boundary */
    CHECK(!workload_match_params(five, 5, cut, 2, off));
    CHECK(!workload_match_params(five, 4, two, 2, off)); /* copies missing */
    const int64_t less[1] = {400};                       /* copies left over */
    CHECK(!workload_match_params(five, 5, less, 1, off));
    CHECK(!workload_match_params(five, 0, two, 2, off));
    /* a plan splits a unit where a whole-parameter bucket closes inside it: two units
     * of 1.5 MiB fold into 2 MiB buckets at their ends, but DDP closes its first 2 MiB
     * bucket at the fourth of the 0.5 MiB parameters, inside the second unit */
    workload_buckets bu;
    memset(&bu, 0, sizeof bu);
    int64_t units[2] = {3 * MiB / 2, 3 * MiB / 2}, params[6];
    int32_t poff[3] = {0, 3, 6};
    for (int i = 0; i < 6; i++)
        params[i] = MiB / 2;
    bu.n_units = 2;
    bu.unit_bytes = units;
    bu.model = (const costmodel *)&bu; /* tensor fusion available; not read */
    strategy_plan p;
    strategy_plan_baseline(&p);
    p.bucket_cap = p.first_cap = 4; /* 2 MiB */
    CHECK(strategy_bucket_caps_mb[4] == 2);
    CHECK(!partition_splits(&bu, &p));
    bu.n_params = 6;
    bu.param_bytes = params;
    bu.unit_param_off = poff;
    CHECK(partition_splits(&bu, &p));
    p.bucket_cap = p.first_cap = 5; /* 4 MiB: one bucket, closing at the last parameter */
    CHECK(!partition_splits(&bu, &p));
}

/* Rank r's k-th compute kernel back from kernel n (0: n itself) in g's resource order. */
static int32_t
kernel_back(const dfg *g, int32_t n, int32_t k)
{
    while (n >= 0 && k > 0) {
        n = dfg_prev_on_res(g, n);
        k -= n >= 0 && g->kind[n] == DFG_KERNEL;
    }
    return n;
}

/* The kernel gating participant c through an edge (-1: none, -2: several). */
static int32_t
gate_of(const dfg *g, int32_t c)
{
    int32_t gate = -1;
    for (int64_t e = 0; e < g->n_edges; e++)
        if (g->edst[e] == c && g->kind[g->esrc[e]] == DFG_KERNEL)
            gate = gate < 0 ? g->esrc[e] : -2;
    return gate;
}

/* A bucket of DDP's whole parameters is ready at its last parameter's copy into the
 * bucket: one all-reduce of 4 MiB (4 parameters of 1 MiB) after 200 kernels, the copies
 * the kernels of the gating kernel's name (the gate and 40, 80 and 120 kernels back; one
 * more of that name 150 back, before the unit's first copy, is not one). At 1 MiB the
 * three buckets inside the unit are gated by the copies of parameters 1, 2 and 3, where
 * the byte share would place them by kernel time; with fewer kernels of that name than
 * parameters (the copy 80 back and the kernel 150 back keep their names) the byte share is used
 * (partition_units_by_copies 0), which gates none of the three at a copy. */
static void
test_bucket_ready_copies(void)
{
    for (int missing = 0; missing <= 1; missing++) {
        synth_params sp;
        synth_defaults(&sp);
        sp.ranks = 2;
        sp.iterations = 3;
        sp.ops_per_iter = 200;
        sp.buckets = 1;
        sp.bucket_bytes = 4 << 20;
        dfg g;
        REQUIRE(synth_dfg(&sp, &g) == 0);
        int32_t nm_copy = dfg_intern(&g, "ddp_copy_into_bucket");
        static const int32_t back[5] = {0, 40, 80, 120, 150};
        for (int32_t q = 0; q < g.n_groups; q++)
            for (int32_t c = g.grp_first[q]; c >= 0; c = dfg_next_in_group(&g, c))
                for (int i = 0; i < 5; i++) {
                    int32_t k = kernel_back(&g, gate_of(&g, c), back[i]);
                    REQUIRE(k >= 0);
                    if (!(missing && (i == 2 || i == 4)))
                        g.name[k] = nm_copy;
                }
        costmodel m;
        fit_model(&m);
        workload w;
        sim_result res;
        memset(&res, 0, sizeof res);
        REQUIRE(workload_analyze(&w, &g, &res, 0, 1, &m, NULL, -1, NULL) == 0);
        REQUIRE(w.buckets.n_units == 1 && strategy_tensor_available(&w));
        w.buckets.n_params = 4;
        w.buckets.param_bytes = malloc(sizeof *w.buckets.param_bytes * 4);
        w.buckets.unit_param_off = malloc(sizeof *w.buckets.unit_param_off * 2);
        REQUIRE(w.buckets.param_bytes && w.buckets.unit_param_off);
        for (int i = 0; i < 4; i++)
            w.buckets.param_bytes[i] = 1 << 20;
        w.buckets.unit_param_off[0] = 0;
        w.buckets.unit_param_off[1] = 4;
        strategy_plan p;
        strategy_plan_baseline(&p);
        p.bucket_cap = p.first_cap = 3; /* 1 MiB: a bucket per parameter */
        partition_input in;
        strategy_partition_input(&w, &in);
        CHECK_EQ_U(partition_units_by_copies(&in), (missing ? 0 : 1));
        strategy_apply(&w, &p);
        dfg part = {0};
        int32_t nb = 0;
        strategy_partition_input(&w, &in);
        REQUIRE(partition_build(&in, &p, &part, &nb) == 0);
        CHECK_EQ_U(nb, 4);
        int32_t at_copy = 0, added = 0;
        for (int32_t q = 0; q < g.n_groups; q++)
            for (int32_t k = g.n_groups; k < part.n_groups; k++) {
                if (part.grp_seq[k] != g.grp_seq[q])
                    continue;
                int32_t i = (k - g.n_groups) % 3 + 1; /* the bucket of parameter i - 1 */
                for (int32_t n = part.grp_first[k]; n >= 0; n = dfg_next_in_group(&part, n)) {
                    int32_t c = -1;
                    for (int32_t o = g.grp_first[q]; o >= 0; o = dfg_next_in_group(&g, o))
                        if (dfg_rank(&g, o) == dfg_rank(&part, n))
                            c = o;
                    int32_t want = kernel_back(&g, gate_of(&g, c), back[4 - i]);
                    at_copy += gate_of(&part, n) == want;
                    added++;
                }
            }
        CHECK_EQ_U(added, 3 * 2 * g.n_groups);
        CHECK_EQ_U(at_copy, (missing ? 0 : added));
        dfg_free(&part);
        workload_free(&w);
        sim_result_free(&res);
        dfg_free(&g);
    }
}

/* DDP's finalisation makes the compute stream wait once per bucket boundary among its
 * copies back into the gradients (workload.h: final_wait): on 8 buckets of 1 MiB with
 * the copies, the 7 waits of each rank's iteration are found (8 parameters of 1 MiB
 * learnt from the copies); the plan of one bucket drops them all, as DDP makes one wait
 * fewer per bucket folded, and the plan of every unit alone keeps them. */
static void
test_final_waits(void)
{
    synth_params sp;
    synth_defaults(&sp);
    sp.ranks = 2;
    sp.iterations = 3;
    sp.ops_per_iter = 400;
    sp.buckets = 8;
    sp.bucket_bytes = 1 << 20;
    sp.hook_calls = 2;
    sp.final_copies = 1;
    dfg g;
    costmodel m;
    fit_model(&m);
    REQUIRE(synth_dfg(&sp, &g) == 0);
    workload w;
    sim_result res;
    memset(&res, 0, sizeof res);
    REQUIRE(workload_analyze(&w, &g, &res, 0, 1, &m, NULL, -1, NULL) == 0);
    CHECK_EQ_U(w.buckets.n_params, 8);
    REQUIRE(w.buckets.final_wait != NULL);
    int32_t found = 0;
    for (int32_t n = 0; n < g.n_nodes; n++)
        if (w.buckets.final_wait[n] >= 0) {
            found++;
            CHECK(!strcmp(dfg_name(&g, g.name[w.buckets.final_wait[n]]), "cudaStreamWaitEvent"));
        }
    CHECK_EQ_U(found, 7 * 2 * 3);
    CHECK(strategy_bucket_caps_mb[3] == 1);
    for (int i = 0; i < 2; i++) { /* 1 MiB: every unit alone; then the largest cap */
        strategy_plan p;
        strategy_plan_baseline(&p);
        p.bucket_cap = p.first_cap = (int8_t)(i ? strategy_n_bucket_caps - 1 : 3);
        REQUIRE(!partition_splits(&w.buckets, &p) && strategy_apply(&w, &p) == 0);
        int32_t dropped = 0;
        for (int32_t n = 0; n < g.n_nodes; n++)
            if (w.buckets.final_wait[n] >= 0)
                dropped += dfg_dur(w.g, w.buckets.final_wait[n]) == 0;
        CHECK_EQ_U(dropped, (i ? found : 0));
    }
    workload_free(&w);
    sim_result_free(&res);
    dfg_free(&g);
}

/* Host stalls in the synthetic job (2 ranks, 6 iterations, the last 5 compared, 4 buckets of
 * 1 MiB; a stall: a launch call's gap of 20 ms on both ranks), each kind on a fresh graph:
 * (0) none; (1) one-off: in one iteration; (2) moving: in every iteration, at another
 * launch each time; (3) fixed: in every iteration at the same launch. Returns the typical
 * baseline and the typical one-bucket plan (typical_ns) into *base, *plan, and the
 * measured baseline's median iteration into *meas. The measured times are those the graph
 * simulates. */
static void
stalled_predictions(int kind, double *base, double *plan, double *meas)
{
    synth_params sp;
    synth_defaults(&sp);
    sp.ranks = 2;
    sp.iterations = 6;
    sp.ops_per_iter = 200;
    sp.buckets = 4;
    sp.bucket_bytes = 1 << 20;
    sp.hook_calls = 2;
    dfg g;
    costmodel m;
    fit_model(&m);
    REQUIRE(synth_dfg(&sp, &g) == 0);
    int32_t nm = dfg_intern(&g, "cudaLaunchKernel");
    for (int32_t q = 0; q < g.n_res; q++) {
        int32_t k = -1; /* launches of the thread in order: the setup, then iteration-major */
        for (int32_t h = g.res_first[q]; g.res_kind[q] == DFG_RES_THREAD && h >= 0;
             h = g.next_on_res[h]) {
            if (g.name[h] != nm || k++ < 0)
                continue;
            int32_t it = k / sp.ops_per_iter, o = k % sp.ops_per_iter;
            int stall = (kind == 1 && it == 3 && o == 90) ||
                        (kind == 2 && it >= 1 && o == 30 * it) || (kind == 3 && o == 90);
            if (stall)
                g.gap[h] = 20000 * US;
        }
    }
    sim_result res;
    memset(&res, 0, sizeof res);
    REQUIRE(dfg_finalize(&g) == 0 && sim_run(&g, &res) == 0);
    for (int32_t n = 0; n < g.n_nodes; n++) { /* the measured times: those simulated */
        g.mstart[n] = res.start[n];
        REQUIRE(dfg_set_mend(&g, n, res.end[n]) == 0);
    }
    workload w;
    REQUIRE(workload_analyze(&w, &g, &res, 1, 5, &m, NULL, -1, NULL) == 0);
    strategy_plan p;
    strategy_eval e;
    strategy_plan_baseline(&p);
    CHECK(strategy_evaluate(&w, &p, &res, &e) == 0);
    *meas = e.median_ns;
    CHECK(strategy_evaluate_typical(&w, &p, &res, &e) == 0);
    *base = e.typical_ns;
    CHECK(fabs(e.median_ns - *meas) < 1); /* the measured values' median, kept */
    p.bucket_cap = p.first_cap = (int8_t)(strategy_n_bucket_caps - 1);
    CHECK(strategy_evaluate(&w, &p, &res, &e) == 0);
    CHECK_EQ_U(e.n_buckets, 1);
    CHECK(strategy_evaluate_typical(&w, &p, &res, &e) == 0);
    *plan = e.typical_ns;
    /* w->g is left on the plan written into the measured baseline */
    strategy_eval again;
    CHECK(strategy_evaluate(&w, &p, &res, &again) == 0);
    CHECK(sim_run(w.g, &res) == 0 &&
          fabs(workload_iteration_median_ns(&w, &res) - again.median_ns) < 1);
    workload_free(&w);
    sim_result_free(&res);
    dfg_free(&g);
}

static void
test_typical_stalls(void)
{
    double base[4], plan[4], meas[4];
    for (int k = 0; k < 4; k++)
        stalled_predictions(k, &base[k], &plan[k], &meas[k]);
    CHECK(base[0] > 0 && plan[0] > 0 && plan[0] != base[0]);
    CHECK(fabs(base[0] - meas[0]) < 1); /* without stalls: the measured median */
    /* the moving stall raises the measured median iteration by its 20 ms; the typical
     * prediction (and so the plan's) leaves it out, as the one-off */
    CHECK(meas[2] > meas[0] + 15000 * US);
    for (int k = 1; k <= 2; k++) {
        CHECK(fabs(base[k] - base[0]) < 1);
        CHECK(fabs(plan[k] - plan[0]) < 1);
    }
    /* the stall at the same place of every iteration is the job's: carried into both */
    CHECK(base[3] > base[0] + 15000 * US && plan[3] > plan[0] + 15000 * US);
    CHECK(fabs(base[3] - meas[3]) < 1);
}

/* The micro-batches under DDP's no_sync() make neither the copies into the buckets,
 * nor the copies back, nor the gradients' zeroing (workload.h: micro): on 8 buckets
 * of 1 MiB (one parameter each, learnt from the copies back) with the zeroing memsets,
 * each rank's iteration marks its 8 copies back, its 8 memsets and the 8 kernels that
 * gate the all-reduces (each a unit's one copy into its bucket), and nothing else; the
 * plan's extra micro-batch prices the other 392 of the 416 device operations. Without the
 * zeroing and the copies back (no parameter sizes) nothing is marked and the micro-batch
 * holds all 400 kernels. */
static void
test_micro_sync_only(void)
{
    for (int with = 1; with >= 0; with--) {
        synth_params sp;
        synth_defaults(&sp);
        sp.ranks = 2;
        sp.iterations = 3;
        sp.ops_per_iter = 400;
        sp.buckets = 8;
        sp.bucket_bytes = 1 << 20;
        sp.hook_calls = 2;
        sp.final_copies = sp.zero_grads = with;
        dfg g;
        costmodel m;
        fit_model(&m);
        REQUIRE(synth_dfg(&sp, &g) == 0);
        workload w;
        sim_result res;
        memset(&res, 0, sizeof res);
        REQUIRE(workload_analyze(&w, &g, &res, 0, 1, &m, NULL, -1, NULL) == 0);
        int32_t marked[4] = {0, 0, 0, 0}, gating = 0;
        for (int32_t n = 0; with && n < g.n_nodes; n++) {
            int gates = 0;
            for (int64_t e = 0; e < g.n_edges; e++)
                gates |= g.esrc[e] == n && g.kind[g.edst[e]] == DFG_COLL;
            gating += gates && w.iter[n] >= 0;
            if (w.buckets.micro && w.buckets.micro[n] == WL_MICRO_SYNC_ONLY) {
                marked[g.kind[n] == DFG_MEMCPY ? 1 : g.kind[n] == DFG_MEMSET ? 2 : 0]++;
                marked[3] += g.kind[n] == DFG_KERNEL && !gates;
            }
        }
        CHECK(with ? w.buckets.micro != NULL : w.buckets.micro == NULL);
        CHECK_EQ_U(marked[0], with ? 8 * 2 * 3 : 0);
        CHECK_EQ_U(gating, with ? 8 * 2 * 3 : 0);
        CHECK_EQ_U(marked[1], with ? 8 * 2 * 3 : 0);
        CHECK_EQ_U(marked[2], with ? 8 * 2 * 3 : 0);
        CHECK_EQ_U(marked[3], 0);
        strategy_plan p;
        strategy_plan_baseline(&p);
        p.accum_k = 2;
        strategy_eval ev;
        REQUIRE(strategy_evaluate(&w, &p, &res, &ev) == 0);
        CHECK(fabs(ev.micro_launches - (with ? 392 : 400)) < 1e-9);
        workload_free(&w);
        sim_result_free(&res);
        dfg_free(&g);
    }
}

/* The accumulation tests' job: 2 ranks of 6 iterations of 400 kernels, 8 buckets of 1 MiB,
 * DDP's copies back and zeroing; into g, and the cost model into m. */
static void
micro_job(dfg *g, costmodel *m)
{
    synth_params sp;
    synth_defaults(&sp);
    sp.ranks = 2;
    sp.iterations = 6;
    sp.ops_per_iter = 400;
    sp.buckets = 8;
    sp.bucket_bytes = 1 << 20;
    sp.final_copies = sp.zero_grads = 1;
    fit_model(m);
    REQUIRE(synth_dfg(&sp, g) == 0);
}

/* A host stall in one micro-batch (a launch's gap 200 ms longer in one iteration of rank 0,
 * of 5 compared iterations on 2 ranks) moves the mean prediction of accumulation
 * (micro_host_ns by 200 ms / 10, over the device time: the iteration at least as much) but
 * not the median one, which adds each rank's median micro-batch (as the median iteration
 * ignores one slow step). With the mean added to the median as well, it moves 18 ms. */
static void
test_micro_median(void)
{
    dfg g;
    costmodel m;
    micro_job(&g, &m);
    workload w;
    sim_result res;
    memset(&res, 0, sizeof res);
    REQUIRE(workload_analyze(&w, &g, &res, 1, 5, &m, NULL, -1, NULL) == 0);
    REQUIRE(w.buckets.micro != NULL);
    strategy_plan p;
    strategy_plan_baseline(&p);
    p.accum_k = 2;
    strategy_eval before, after;
    REQUIRE(strategy_evaluate(&w, &p, &res, &before) == 0);
    int32_t h = -1;
    for (int32_t d = 0; h < 0 && d < g.n_nodes; d++)
        if (g.kind[d] == DFG_KERNEL && w.iter[d] == 3 && dfg_rank(&g, d) == 0 &&
            w.buckets.micro[d] == WL_MICRO_PHASE && g.launch[d] >= 0 &&
            (w.phase[d] == WL_FORWARD || w.phase[d] == WL_BACKWARD))
            h = g.launch[d];
    REQUIRE(h >= 0);
    const double stall = 200e6;
    w.base_gap[h] += (int64_t)stall;
    REQUIRE(strategy_evaluate(&w, &p, &res, &after) == 0);
    CHECK(fabs(after.micro_host_ns - before.micro_host_ns - stall / 10) < 1);
    CHECK(after.iter_ns - before.iter_ns >= stall / 10);
    CHECK(fabs(after.median_ns - before.median_ns) < stall / 40);
    workload_free(&w);
    sim_result_free(&res);
    dfg_free(&g);
}

/* A memset call 2 ms long in every iteration (the 300th kernel of each rank's iteration,
 * of the micro-batch's forward, made a memset, whose call then takes 2 ms more; the
 * gradients' zeroing gives the thread's median memset call): at 2 micro-batches its part beyond the
 * median takes half (the activations it sets scale with the batch), so the micro-batch's host time
 * rises by 1 ms, not 2; the same 2 ms on a kernel's launch call stay whole. */
static void
test_micro_memset_calls(void)
{
    dfg g;
    costmodel m;
    micro_job(&g, &m);
    int32_t n_k = 0, n_seen = 0, mem[12], kern[12];
    for (int32_t d = 0; d < g.n_nodes; d++) /* the 300th kernel of each rank's iteration */
        if (g.kind[d] == DFG_KERNEL && g.launch[d] >= 0 && n_seen++ % 400 == 300 && n_k < 12) {
            g.kind[d] = DFG_MEMSET;
            mem[n_k] = d;
            kern[n_k++] = d + 2; /* a kernel of the same forward */
        }
    REQUIRE(n_k == 2 * 6);
    workload w;
    sim_result res;
    memset(&res, 0, sizeof res);
    REQUIRE(workload_analyze(&w, &g, &res, 1, 5, &m, NULL, -1, NULL) == 0);
    strategy_plan p;
    strategy_plan_baseline(&p);
    p.accum_k = 2;
    strategy_eval ev[3];
    const int64_t stall = 2000000;
    for (int run = 0; run < 3; run++) {
        for (int32_t i = 0; run > 0 && i < n_k; i++) {
            CHECK(w.phase[mem[i]] == WL_FORWARD && w.buckets.micro[mem[i]] == WL_MICRO_PHASE);
            REQUIRE(g.kind[kern[i]] == DFG_KERNEL && g.launch[kern[i]] >= 0);
            w.base_dur[g.launch[mem[i]]] += run == 1 ? stall : -stall;
            w.base_dur[g.launch[kern[i]]] += run == 2 ? stall : 0;
        }
        REQUIRE(strategy_evaluate(&w, &p, &res, &ev[run]) == 0);
    }
    CHECK(fabs(ev[1].micro_host_ns - ev[0].micro_host_ns - (double)stall / 2) < 1e3);
    CHECK(fabs(ev[2].micro_host_ns - ev[0].micro_host_ns - (double)stall) < 1e3);
    workload_free(&w);
    sim_result_free(&res);
    dfg_free(&g);
}

/* A PyTorch-like step for WL_FUSE_COMPILED, `iters` iterations: the main thread launches
 * the optimizer's kernel and zero_grad's memset, the forward G a b m G a n a G a m F G (G a
 * GEMM, sgemm, of 10 us; a and b pointwise kernels, m a memset, n a LayerNorm, F an
 * attention kernel; 3 us each) and the loss (pointwise, reduction), then hands over to
 * the backward thread (autograd's), which launches the loss's backward (pointwise) and
 * G r a G a n a n a G a a G (r a reduction), then hands back to the main thread's
 * synchronisation. Every call takes 5 us with 3 us of CPU before it. */
static const char *const ptstep_main[] = {"multi_tensor_apply_kernel",
                                          "m",
                                          "sgemm",
                                          "a",
                                          "b",
                                          "m",
                                          "sgemm",
                                          "a",
                                          "layer_norm",
                                          "a",
                                          "sgemm",
                                          "a",
                                          "m",
                                          "fmha",
                                          "sgemm",
                                          "pow",
                                          "reduce_kernel"};
static const char *const ptstep_bwd[] = {
    "pow_backward", "sgemm", "reduce_kernel", "a", "sgemm", "a",    "layer_norm", "a",
    "layer_norm",   "a",     "sgemm",         "a", "a",     "sgemm"};
#define PTSTEP_MAIN ((int)(sizeof ptstep_main / sizeof ptstep_main[0]))
#define PTSTEP_BWD ((int)(sizeof ptstep_bwd / sizeof ptstep_bwd[0]))

static int32_t
ptstep_op(dfg *g, int32_t th, int32_t st, const char *name)
{
    int memset_op = !strcmp(name, "m");
    int32_t h = dfg_add_node(g, DFG_HOST, th,
                             dfg_intern(g, memset_op ? "cudaMemsetAsync" : "cudaLaunchKernel"));
    g->dur[h] = 5 * US;
    dfg_set_gap(g, h, 3 * US);
    int32_t d = dfg_add_node(g, memset_op ? DFG_MEMSET : DFG_KERNEL, st,
                             dfg_intern(g, memset_op ? "memset" : name));
    g->dur[d] = (!strcmp(name, "sgemm") ? 10 : 3) * US;
    g->launch[d] = h;
    dfg_set_lat(g, d, 2 * US);
    return h;
}

static int
build_ptstep_job(dfg *g, int iters)
{
    if (dfg_init(g, 1) != 0)
        return -1;
    int32_t th = dfg_add_resource(g, DFG_RES_THREAD, 0, 1, dfg_intern(g, "python"));
    int32_t bw = dfg_add_resource(g, DFG_RES_THREAD, 0, 2, dfg_intern(g, "pt_autograd_0"));
    int32_t st = dfg_add_resource(g, DFG_RES_STREAM, 0, 7, dfg_intern(g, "stream 7"));
    int32_t bounds[16], rc = iters < 16 ? 0 : -1, sync = -1;
    for (int it = 0; rc == 0 && it <= iters; it++) {
        int32_t h = ptstep_op(g, th, st, ptstep_main[0]);
        bounds[it] = h;
        if (sync >= 0)
            rc |= dfg_add_edge(g, sync, h);
        if (it == iters)
            break;
        for (int k = 1; k < PTSTEP_MAIN; k++)
            h = ptstep_op(g, th, st, ptstep_main[k]);
        int32_t b = -1;
        for (int k = 0; k < PTSTEP_BWD; k++) {
            b = ptstep_op(g, bw, st, ptstep_bwd[k]);
            if (k == 0)
                rc |= dfg_add_edge(g, h, b); /* backward() hands over */
        }
        sync = dfg_add_node(g, DFG_HOST, th, dfg_intern(g, "cudaDeviceSynchronize"));
        g->flags[sync] |= DFG_F_BLOCKING;
        g->dur[sync] = 1 * US;
        rc |= dfg_add_edge(g, b, sync);
        rc |= dfg_add_edge(g, b + 1, sync); /* the backward's last kernel */
    }
    rc |= dfg_set_iterations(g, 0, bounds, iters + 1);
    return rc == 0 ? dfg_finalize(g) : -1;
}

/* torch.compile's fusion (WL_FUSE_COMPILED) on the PyTorch-like step: per iteration the
 * forward's a b m (no reduction: one kernel) and a n a (the norm with the pointwise work
 * before and after it) fuse; the memset before the attention kernel stays, and so does
 * the a before it (a run of one); in the backward r and a stay (a reduction ends its
 * kernel), a n a n a makes n a, n a (in the backward each reduction starts a kernel), and
 * a a fuses; each fused chain becomes its first kernel, of c0 plus the largest variable
 * part. The GEMMs, the optimizer's kernel, zero_grad's memset, the loss and its backward
 * stay; the fused-away ops' launch calls lose their time and the CPU time before them.
 * ddp-sim's model (WL_FUSE_SAME_NAME) fuses only the backward's a a. */
static void
test_compiled_fusion(void)
{
    dfg g;
    REQUIRE(build_ptstep_job(&g, 4) == 0);
    for (int scope = WL_FUSE_SAME_NAME; scope <= WL_FUSE_COMPILED; scope++) {
        workload_options o;
        workload_default_options(&o);
        o.fusion_scope = scope;
        workload w;
        sim_result res;
        memset(&res, 0, sizeof res);
        REQUIRE(workload_analyze(&w, &g, &res, 1, 2, NULL, NULL, -1, &o) == 0);
        const workload_fusion *fu = &w.fusion;
        CHECK_EQ_U(fu->compiled, scope == WL_FUSE_COMPILED);
        CHECK_EQ_U(fu->n_chains, scope == WL_FUSE_COMPILED ? 5 * 4 : 4);
        /* which ops are in chains, by name, over the 4 iterations */
        int32_t in_chain[5] = {0}; /* a, b, m, layer_norm, anything else */
        for (int32_t i = 0; i < fu->chain_off[fu->n_chains]; i++) {
            const char *n = dfg_name(&g, g.name[fu->chain_node[i]]);
            int k = !strcmp(n, "a")            ? 0
                    : !strcmp(n, "b")          ? 1
                    : !strcmp(n, "memset")     ? 2
                    : !strcmp(n, "layer_norm") ? 3
                                               : 4;
            in_chain[k]++;
        }
        if (scope == WL_FUSE_SAME_NAME) {
            CHECK_EQ_U(in_chain[0], 2 * 4);
            CHECK_EQ_U(in_chain[1] + in_chain[2] + in_chain[3] + in_chain[4], 0);
        } else {
            CHECK_EQ_U(in_chain[0], 7 * 4); /* a: forward 3, backward 4 */
            CHECK_EQ_U(in_chain[1], 1 * 4);
            CHECK_EQ_U(in_chain[2], 1 * 4); /* the forward's first memset only */
            CHECK_EQ_U(in_chain[3], 3 * 4); /* layer_norm; no reduce_kernel */
            CHECK_EQ_U(in_chain[4], 0);
            CHECK_EQ_U(fu->compiled_runs, 6 * 4);
            for (int32_t c = 0; c < fu->n_chains; c++) /* led by a kernel */
                CHECK(g.kind[fu->chain_node[fu->chain_off[c]]] == DFG_KERNEL);
        }
        strategy_plan p;
        strategy_plan_baseline(&p);
        p.fuse = 1;
        REQUIRE(strategy_apply(&w, &p) == 0);
        double c0 = fu->kernel_fixed_ns;
        for (int32_t c = 0; scope == WL_FUSE_COMPILED && c < fu->n_chains; c++) {
            int32_t first = fu->chain_node[fu->chain_off[c]];
            CHECK_EQ_U(dfg_dur(w.g, first),
                       (int64_t)llround(c0 + 3 * US - (c0 < 3 * US ? c0 : 3 * US)));
            CHECK_EQ_U(dfg_dur(w.g, g.launch[first]), 5 * US);
            for (int32_t i = fu->chain_off[c] + 1; i < fu->chain_off[c + 1]; i++) {
                int32_t m = fu->chain_node[i];
                CHECK_EQ_U(dfg_dur(w.g, m), 0);
                CHECK_EQ_U(dfg_dur(w.g, g.launch[m]) + dfg_gap(w.g, g.launch[m]), 0);
            }
        }
        workload_free(&w);
        sim_result_free(&res);
    }
    dfg_free(&g);
}

/* workload_trim frees what the search does not read: the plans are predicted the same
 * before and after, with and without fusion chains (the launch sizes and hinges stay with
 * chains), and FSDP's arrays are gone on a DDP job; the measured overlaps too while the
 * contention correction is off, kept (and read) with it on. */
static void
test_trim_case(int with_contention)
{
    dfg g;
    costmodel m;
    fit_model(&m);
    REQUIRE(synth_job(&g, 200, 8) == 0);
    workload w;
    sim_result res;
    memset(&res, 0, sizeof res);
    REQUIRE(workload_analyze(&w, &g, &res, 0, 1, &m, NULL, -1, NULL) == 0);
    if (with_contention) { /* as test_contention_correction: no kernel overlapped in the trace */
        for (int32_t d = 0; d < g.n_nodes; d++)
            if (g.kind[d] == DFG_KERNEL)
                w.f_meas[d] = 0;
        w.contention.comp.fitted = 1;
        w.contention.comp.k = 0.5;
        w.opt.no_contention = 0;
    }
    strategy_plan p[4];
    strategy_eval before[4], after[4];
    for (int i = 0; i < 4; i++)
        strategy_plan_baseline(&p[i]);
    p[1].bucket_cap = p[1].first_cap = 5;
    p[2].fuse = 1;
    p[3].cuda_graph = 1;
    p[3].bucket_cap = p[3].first_cap = 2;
    for (int i = 0; i < 4; i++)
        CHECK(strategy_evaluate(&w, &p[i], &res, &before[i]) == 0);
    int chains = w.fusion.n_chains;
    workload_trim(&w);
    CHECK(!w.fusion.node_grid_x && !w.fsdp.gather_ops);
    CHECK(with_contention ? w.f_meas != NULL : !w.f_meas && !w.f_grp_meas);
    CHECK(chains > 0 ? w.fusion.node_threads && w.fusion.node_hinge : !w.fusion.node_threads);
    for (int i = 0; i < 4; i++) {
        CHECK(strategy_evaluate(&w, &p[i], &res, &after[i]) == 0);
        CHECK(after[i].iter_ns == before[i].iter_ns && after[i].median_ns == before[i].median_ns);
        CHECK_EQ_U(after[i].peak_bytes, before[i].peak_bytes);
    }
    workload_free(&w);
    sim_result_free(&res);
    dfg_free(&g);
}

static void
test_trim(void)
{
    test_trim_case(0);
    test_trim_case(1);
}

int
main(void)
{
    test_trim();
    test_fixed_cost_fit();
    test_hinge_fit();
    test_contention_correction();
    test_hook_block();
    test_memest_remade();
    test_ddp_buckets();
    test_bucket_ready_copies();
    test_final_waits();
    test_typical_stalls();
    test_micro_sync_only();
    test_micro_median();
    test_micro_memset_calls();
    test_compiled_fusion();
    return tests_done();
}
