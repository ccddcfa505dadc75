/*
 * test_optimizer: unit tests of libdproopt on hand-made and synthetic graphs.
 *   - memory estimator on a synthetic allocation trace (classes, peak, predictions), and
 *     on a caching allocator's segments reserved in the first step only;
 *   - operator fusion on a hand-made job: fewer launches, the modelled time;
 *   - tensor fusion on the synthetic generator's job: bucket counts per cap;
 *   - tensor partition of one all-reduce per iteration: chunk count, bytes conserved,
 *     each chunk gated by the kernel at which its bytes are ready, hook calls copied,
 *     a complete simulation that overlaps the transfer;
 *   - CUDA graph capture on hand-made two-thread jobs: a wake-up by a call of the step
 *     loses its latency (the replay's wake-up edges, no nodes of the optimizer's own);
 *     captured launch calls are not held by the launch queue (the capture copy), while
 *     plans that do not capture keep the queue;
 *   - the search is deterministic under a seed.
 * The learnt models' tests (fixed cost, hinge, contention correction) are in
 * test_optimizer_models.c.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dprotrace.h"
#include "optimizer/memest.h"
#include "optimizer/partition.h"
#include "optimizer/search.h"
#include "optimizer/strategy.h"
#include "optimizer/workload.h"
#include "tests/optimizer/optjobs.h"
#include "tests/replay/synth.h"
#include "tests/unit/testutil.h"

static void
test_memest(void)
{
    /* thread 1 forward, thread 2 backward; first iteration [100, 1000), backward from 500 */
    memest_event ev[] = {
        {10, 1, 4 << 20, 0x1000, 1},   /* weights: static */
        {20, 1, 4 << 20, 0x2000, 1},   /* gradient buckets: static */
        {150, 1, 10 << 20, 0x3000, 1}, /* layer 0 activations */
        {250, 1, 20 << 20, 0x4000, 1}, /* layer 1 */
        {350, 1, 30 << 20, 0x5000, 1}, /* layer 2 */
        {600, 1, 2 << 20, 0x6000, 2},  /* backward transient */
        {650, 2, 0, 0x6000, 2},        /* freed */
        {900, 1, 8 << 20, 0x7000, 1},  /* optimizer state, after the backward */
    };
    memest_phases ph = {.iter_start = 100,
                        .bwd_start = 500,
                        .bwd_end = 700,
                        .iter_end = 1000,
                        .fwd_thread = 1,
                        .bwd_thread = 2};
    memest m;
    REQUIRE(memest_build(ev, sizeof ev / sizeof ev[0], &ph, &m) == 0);
    CHECK_EQ_U(m.static_bytes, 8 << 20);
    CHECK_EQ_U(m.n_layers, 3);
    CHECK_EQ_U(m.act_bytes[2], 30 << 20);
    CHECK_EQ_U(m.optimizer_bytes, 8 << 20);
    CHECK_EQ_U(m.backward_bytes, 2 << 20);
    CHECK_EQ_U(m.peak_bytes, (4 + 4 + 10 + 20 + 30 + 8) << 20); /* the transient is gone */
    /* steady: static + optimizer + activations */
    int64_t base = memest_predict(&m, NULL, 0, 0.125, 1);
    CHECK_EQ_U(base, (8 + 8 + 60) << 20);
    /* accumulation over 2: activations halved (5, 10, 15 MiB, rounded to 2 MiB) */
    CHECK_EQ_U(memest_predict(&m, NULL, 0, 0.125, 2), (16 + 6 + 10 + 16) << 20);
    /* recompute layer 2: keeps 30/8 = 3.75 -> 4 MiB; during its backward it rebuilds
     * 30 MiB on top of layers 0..2's share: 10 + 20 + 4 + 30 = 64 > 34 */
    uint8_t rc[3] = {0, 0, 1};
    CHECK_EQ_U(memest_predict(&m, rc, 3, 0.125, 1), (16 + 64) << 20);
    /* flags for fewer layers than the estimate has: the layers past them are not
     * recomputed, whatever lies beyond the flags (a trace of more than
     * STRATEGY_MAX_LAYERS layers read past a plan's flags: four answers for one seed) */
    uint8_t two[3] = {0, 0, 1}; /* only two[0..1] are flags */
    CHECK_EQ_U(memest_predict(&m, two, 2, 0.125, 1), base);
    memest many;
    memset(&many, 0, sizeof many);
    many.n_layers = STRATEGY_MAX_LAYERS + 100;
    many.act_bytes = calloc((size_t)many.n_layers, sizeof *many.act_bytes);
    many.act_time = calloc((size_t)many.n_layers, sizeof *many.act_time);
    uint8_t *flags = malloc((size_t)many.n_layers);
    CHECK(many.act_bytes && many.act_time && flags);
    for (int32_t l = 0; l < many.n_layers; l++) {
        many.act_bytes[l] = 4 << 20;
        flags[l] = l >= STRATEGY_MAX_LAYERS; /* past the plan's flags */
    }
    int64_t none = memest_predict(&many, NULL, 0, 0.125, 1);
    CHECK_EQ_U(memest_predict(&many, flags, STRATEGY_MAX_LAYERS, 0.125, 1), none);
    free(flags);
    memest_free(&many);
    CHECK(memest_round_block(1) == 512);
    CHECK(memest_round_block((1 << 20) + 1) == (2 << 20));
    memest_free(&m);
}

/* The first-step estimate (memest.h): PyTorch's caching allocator reserves its segments in
 * the job's first step, before the first replayed iteration. Thread 1 forward, thread 2
 * backward; the first step from the forward's last collective (100) to the backward's
 * first launch (500); the replayed iteration from 2000. */
static void
test_memest_first_step(void)
{
    memest_event ev[] = {
        {10, 1, 2 << 20, 0x1000, 1},   /* parameters: static */
        {50, 1, 20 << 20, 0x2000, 1},  /* DDP's bucket: static */
        {150, 1, 20 << 20, 0x3000, 1}, /* activations */
        {200, 1, 32 << 20, 0x4000, 1}, /* the forward's cuBLAS workspace */
        {300, 1, 32 << 20, 0x5000, 1}, /* activations */
        {510, 1, 32 << 20, 0x6000, 2}, /* the backward's workspace */
        {520, 1, 2 << 20, 0x7000, 2},  /* the backward's gradients: scaled */
        {900, 1, 2 << 20, 0x8000, 1},  /* optimizer state */
    };
    memest_phases ph = {.iter_start = 2000,
                        .bwd_start = 2500,
                        .bwd_end = 2700,
                        .iter_end = 3000,
                        .fwd_thread = 1,
                        .bwd_thread = 2,
                        .first_step = 1,
                        .step_start = 100,
                        .step_bwd = 500};
    memest m;
    REQUIRE(memest_build(ev, sizeof ev / sizeof ev[0], &ph, &m) == 0);
    CHECK(m.segments);
    CHECK_EQ_U(m.workspace_bytes, 32 << 20);
    CHECK_EQ_U(m.static_bytes, 22 << 20);
    CHECK_EQ_U(m.n_layers, 3);
    CHECK_EQ_U(m.act_bytes[0], 20 << 20);
    CHECK_EQ_U(m.act_bytes[1], 32 << 20);
    CHECK_EQ_U(m.act_bytes[2], 2 << 20);
    CHECK_EQ_U(m.other_bytes, (32 + 32 + 2) << 20);
    CHECK_EQ_U(m.peak_bytes, 142 << 20);
    CHECK_EQ_U(memest_predict(&m, NULL, 0, 0.125, 1), 142 << 20);
    /* no_sync over 2: the step's segments halved, the workspaces kept */
    CHECK_EQ_U(memest_predict(&m, NULL, 0, 0.125, 2), (142 - 27) << 20);
    memest_free(&m);
    /* the same events seen from the replayed iteration alone: everything is static */
    ph.first_step = 0;
    REQUIRE(memest_build(ev, sizeof ev / sizeof ev[0], &ph, &m) == 0);
    CHECK(!m.segments);
    CHECK_EQ_U(m.n_layers, 0);
    CHECK_EQ_U(memest_predict(&m, NULL, 0, 0.125, 2), 142 << 20);
    memest_free(&m);
}

static void
test_fusion(void)
{
    dfg g;
    REQUIRE(build_fusion_job(&g, 4) == 0);
    workload w;
    sim_result res;
    memset(&res, 0, sizeof res);
    REQUIRE(workload_analyze(&w, &g, &res, 1, 2, NULL, NULL, -1, NULL) == 0);
    /* one chain of three short kernels per iteration (the lone one is no chain) */
    CHECK_EQ_U(w.fusion.n_chains, 4);
    CHECK_EQ_U(w.fusion.chain_kernels, 12);
    CHECK(fabs(w.fusion.kernel_fixed_ns - 3 * US) < 1);
    /* device-bound: 100 + 30 + 100 + 10 us, then the sync and the next launch */
    double base = w.base_iter_ns;
    CHECK(base > 240 * US && base < 260 * US);

    strategy_plan p;
    strategy_plan_baseline(&p);
    p.fuse = 1;
    strategy_eval e;
    CHECK(strategy_evaluate(&w, &p, &res, &e) == 0);
    /* the fused kernel: 30 - 2 * 3 = 24 us, so 6 us less per iteration */
    CHECK(fabs((base - e.iter_ns) - 6 * US) < 0.5 * US);
    /* two launches per iteration cost nothing any more */
    int zero_launches = 0;
    for (int32_t n = 0; n < g.n_nodes; n++)
        zero_launches += g.kind[n] == DFG_HOST && dfg_dur(&g, n) == 0 && w.iter[n] == 1 &&
                         !strcmp(dfg_name(&g, g.name[n]), "cudaLaunchKernel");
    CHECK_EQ_U(zero_launches, 2);
    /* the baseline comes back */
    strategy_plan_baseline(&p);
    CHECK(strategy_evaluate(&w, &p, &res, &e) == 0);
    CHECK(fabs(e.iter_ns - base) < 1);
    char kind[64];
    p.fuse = 1;
    strategy_kind(&w, &p, kind, sizeof kind);
    CHECK(!strcmp(kind, "operator_fusion"));
    char args[128];
    framework_ddp_sim.format_args(&p, 0, args, sizeof args);
    CHECK(!strcmp(args, "--fuse-small"));
    workload_free(&w);
    sim_result_free(&res);
    dfg_free(&g);
}

/* Two threads, `iters` iterations, each closed by a blocking synchronisation S on the
 * main thread (the boundaries). Per iteration: main launches F (50 us); the backward
 * thread, woken by that launch call after `lat` us, launches B and B2 (30 us each);
 * S waits for B2 and is woken by B2's launch call after `lat` us (through a zero-length
 * "(wake-up)" node before it: S is blocking). Launch calls 5 us, launch latency 2 us. */
static int
build_wakeup_job(dfg *g, int iters, int64_t lat)
{
    if (dfg_init(g, 1) != 0)
        return -1;
    int32_t mt = dfg_add_resource(g, DFG_RES_THREAD, 0, 1, dfg_intern(g, "main"));
    int32_t bt = dfg_add_resource(g, DFG_RES_THREAD, 0, 2, dfg_intern(g, "autograd"));
    int32_t st = dfg_add_resource(g, DFG_RES_STREAM, 0, 7, dfg_intern(g, "stream 7"));
    int32_t nm_launch = dfg_intern(g, "cudaLaunchKernel");
    int32_t nm_sync = dfg_intern(g, "cudaStreamSynchronize");
    int32_t nm_k = dfg_intern(g, "conv");
    int32_t *sync = malloc(sizeof *sync * (size_t)(iters + 1));
    int32_t *call[3], *kern[3];
    for (int i = 0; i < 3; i++) {
        call[i] = malloc(sizeof *call[i] * (size_t)(iters + 1));
        kern[i] = malloc(sizeof *kern[i] * (size_t)(iters + 1));
    }
    static const int64_t kdur[3] = {50 * US, 30 * US, 30 * US};
    for (int it = 0; it <= iters; it++) {
        sync[it] = dfg_add_node(g, DFG_HOST, mt, nm_sync);
        g->dur[sync[it]] = 1 * US;
        g->flags[sync[it]] |= DFG_F_BLOCKING;
        if (it > 0 && dfg_add_edge(g, kern[2][it - 1], sync[it]) != 0)
            return -1;
        if (it == iters)
            break;
        for (int k = 0; k < 3; k++) {
            call[k][it] = dfg_add_node(g, DFG_HOST, k == 0 ? mt : bt, nm_launch);
            g->dur[call[k][it]] = 5 * US;
            kern[k][it] = dfg_add_node(g, DFG_KERNEL, st, nm_k);
            g->dur[kern[k][it]] = kdur[k];
            g->launch[kern[k][it]] = call[k][it];
            dfg_set_lat(g, kern[k][it], 2 * US);
        }
    }
    for (int it = 0; it < iters; it++)
        if (dfg_add_wakeup(g, call[0][it], call[1][it], lat) != 0 ||
            dfg_add_wakeup(g, call[2][it], sync[it + 1], lat) != 0)
            return -1;
    int rc = dfg_set_iterations(g, 0, sync, iters + 1);
    free(sync);
    for (int i = 0; i < 3; i++) {
        free(call[i]);
        free(kern[i]);
    }
    return rc == 0 ? dfg_finalize(g) : -1;
}

static void
test_capture_wakeups(void)
{
    dfg g;
    REQUIRE(build_wakeup_job(&g, 4, 200 * US) == 0);
    int32_t nodes = g.n_nodes;
    workload w;
    sim_result res;
    memset(&res, 0, sizeof res);
    REQUIRE(workload_analyze(&w, &g, &res, 1, 2, NULL, NULL, -1, NULL) == 0);
    CHECK_EQ_U(g.n_nodes, nodes); /* the optimizer adds no nodes of its own */
    CHECK(w.bwd_thread[0] == 1 && w.main_thread[0] == 0);
    CHECK(w.capture.g == NULL); /* no launch queue */
    /* host-bound: 5 + 200 + 10 (the backward's calls) + 200 + 1 us */
    double base = w.base_iter_ns;
    CHECK(fabs(base - 416 * US) < 2 * US);
    strategy_plan p;
    strategy_plan_baseline(&p);
    p.cuda_graph = 1;
    strategy_eval e;
    CHECK(strategy_evaluate(&w, &p, &res, &e) == 0);
    /* both wake-ups were by calls of the step: the kernels back to back (110 us), then
     * the synchronisation (1 us) */
    CHECK(fabs(e.iter_ns - 111 * US) < 2 * US);
    int zero_wakeups = 0;
    for (int32_t n = 0; n < g.n_nodes; n++)
        zero_wakeups += (g.flags[n] & DFG_F_WAKEUP) && w.iter[n] == 1 && dfg_gap(&g, n) == 0;
    CHECK_EQ_U(zero_wakeups, 2);
    strategy_plan_baseline(&p);
    CHECK(strategy_evaluate(&w, &p, &res, &e) == 0);
    CHECK(fabs(e.iter_ns - base) < 1);
    workload_free(&w);
    sim_result_free(&res);
    dfg_free(&g);
}

/* Closing synchronisations woken 1..20 us after their kernels, in a shuffled order over
 * 20 compared iterations, one of them stalled for 2 ms: the captured step takes the
 * lower quartile (7 us: the wake-up of an idle host), and the baseline's iteration time is
 * the mean over the compared iterations, the stall included, as dpro-replay reports it
 * (sim_iteration_time: a job's time per step is a mean). */
static void
test_idle_wake_and_mean_iteration(void)
{
    dfg g;
    REQUIRE(build_wakeup_job(&g, 22, 200 * US) == 0);
    int32_t sync[32], n_sync = 0;
    for (int32_t n = 0; n < g.n_nodes && n_sync < 32; n++)
        if (g.kind[n] == DFG_HOST && (g.flags[n] & DFG_F_BLOCKING))
            sync[n_sync++] = n;
    CHECK(n_sync >= 22);
    /* the syncs closing iterations 1..20 (sync[i] closes iteration i); the others 50 us */
    for (int32_t i = 0; i < n_sync; i++)
        g.dur[sync[i]] = i >= 1 && i <= 20 ? (int64_t)((i * 7) % 20 + 1) * US : 50 * US;
    g.dur[sync[9]] = 2000 * US;
    workload w;
    sim_result res;
    memset(&res, 0, sizeof res);
    REQUIRE(workload_analyze(&w, &g, &res, 1, 20, NULL, NULL, -1, NULL) == 0);
    /* durations: 1..20 us less the one replaced by the stall, 2000, and the others' 50:
     * sorted 1, 2, 3, 5, 6, 7, ...: the sixth (index n_sync / 4 = 5) is 7 us */
    CHECK(workload_idle_wake_dur(&w.capture, sync[5]) == 7 * US);
    /* an iteration is 416 us plus its closing wake-up over 1 us; with the 2 ms stall the
     * mean is over 500 us (the median would lie within 420..440 us) */
    CHECK(w.base_iter_ns > 500 * US);
    CHECK(fabs(w.base_iter_ns - sim_iteration_time(w.g, sim_timeline_of(&res), 0, 1, 20)) < 1);
    strategy_plan p;
    strategy_plan_baseline(&p);
    strategy_eval e;
    /* the typical iteration (median_ns) leaves the stall out */
    CHECK(strategy_evaluate(&w, &p, &res, &e) == 0);
    CHECK(fabs(e.iter_ns - w.base_iter_ns) < 1);
    CHECK(e.median_ns >= 416 * US && e.median_ns <= 440 * US);
    p.cuda_graph = 1;
    CHECK(strategy_evaluate(&w, &p, &res, &e) == 0);
    CHECK(fabs(e.iter_ns - 117 * US) < 2 * US); /* 110 us of kernels, then 7 us */
    CHECK(fabs(e.median_ns - 117 * US) < 2 * US);
    workload_free(&w);
    sim_result_free(&res);
    dfg_free(&g);
}

/* A stall of the closing synchronisation in one compared iteration (1 ms after its
 * kernels ended, 1 us in the others): the baseline replays it, a captured step takes the
 * thread's idle-host wake-up (the lower quartile: 1 us) in every iteration. */
static void
test_capture_stall(void)
{
    dfg g;
    REQUIRE(build_wakeup_job(&g, 4, 200 * US) == 0);
    int32_t stalled = -1, seen = 0;
    for (int32_t n = 0; n < g.n_nodes && stalled < 0; n++)
        if (g.kind[n] == DFG_HOST && (g.flags[n] & DFG_F_BLOCKING) && seen++ == 2)
            stalled = n; /* closes iteration 1 */
    CHECK(stalled >= 0);
    g.dur[stalled] = 1000 * US;
    workload w;
    sim_result res;
    memset(&res, 0, sizeof res);
    REQUIRE(workload_analyze(&w, &g, &res, 1, 2, NULL, NULL, -1, NULL) == 0);
    CHECK(workload_idle_wake_dur(&w.capture, stalled) == 1 * US);
    CHECK(fabs(w.base_iter_ns - (416 + 999 / 2.0) * US) < 2 * US);
    strategy_plan p;
    strategy_plan_baseline(&p);
    p.cuda_graph = 1;
    strategy_eval e;
    CHECK(strategy_evaluate(&w, &p, &res, &e) == 0);
    CHECK(fabs(e.iter_ns - 111 * US) < 2 * US);
    CHECK(dfg_dur(&g, stalled) == 1 * US);
    strategy_plan_baseline(&p);
    CHECK(strategy_evaluate(&w, &p, &res, &e) == 0);
    CHECK(dfg_dur(&g, stalled) == 1000 * US); /* the baseline keeps what was measured */
    workload_free(&w);
    sim_result_free(&res);
    dfg_free(&g);
}

/* One thread, `iters` iterations closed by a blocking synchronisation S: six launches
 * of 50 us kernels (5 us calls, launch latency 2 us) through a launch queue of 2 (call
 * k >= 2 is QUEUED with an edge from kernel k-2), then a 5 us cudaMemcpyAsync of a
 * 250 us copy on another stream; S waits for the last kernel and the copy. */
static int
build_queue_job(dfg *g, int iters)
{
    if (dfg_init(g, 1) != 0)
        return -1;
    int32_t th = dfg_add_resource(g, DFG_RES_THREAD, 0, 1, dfg_intern(g, "main"));
    int32_t st = dfg_add_resource(g, DFG_RES_STREAM, 0, 7, dfg_intern(g, "stream 7"));
    int32_t cs = dfg_add_resource(g, DFG_RES_STREAM, 0, 8, dfg_intern(g, "stream 8"));
    int32_t nm_launch = dfg_intern(g, "cudaLaunchKernel");
    int32_t nm_copy = dfg_intern(g, "cudaMemcpyAsync");
    int32_t nm_sync = dfg_intern(g, "cudaStreamSynchronize");
    int32_t nm_k = dfg_intern(g, "gemm"), nm_m = dfg_intern(g, "memcpy HtoD");
    int32_t *bounds = malloc(sizeof *bounds * (size_t)(iters + 1));
    int32_t kern[6], copy = -1;
    for (int it = 0; it <= iters; it++) {
        int32_t s = dfg_add_node(g, DFG_HOST, th, nm_sync);
        g->dur[s] = 1 * US;
        g->flags[s] |= DFG_F_BLOCKING;
        bounds[it] = s;
        if (it > 0 && (dfg_add_edge(g, kern[5], s) != 0 || dfg_add_edge(g, copy, s) != 0))
            return -1;
        if (it == iters)
            break;
        for (int k = 0; k < 6; k++) {
            int32_t h = dfg_add_node(g, DFG_HOST, th, nm_launch);
            g->dur[h] = 5 * US;
            if (k >= 2) {
                g->flags[h] |= DFG_F_QUEUED;
                if (dfg_add_edge(g, kern[k - 2], h) != 0)
                    return -1;
            }
            kern[k] = dfg_add_node(g, DFG_KERNEL, st, nm_k);
            g->dur[kern[k]] = 50 * US;
            g->launch[kern[k]] = h;
            dfg_set_lat(g, kern[k], 2 * US);
        }
        int32_t c = dfg_add_node(g, DFG_HOST, th, nm_copy);
        g->dur[c] = 5 * US;
        copy = dfg_add_node(g, DFG_MEMCPY, cs, nm_m);
        g->dur[copy] = 250 * US;
        g->launch[copy] = c;
        dfg_set_lat(g, copy, 2 * US);
    }
    int rc = dfg_set_iterations(g, 0, bounds, iters + 1);
    free(bounds);
    return rc == 0 ? dfg_finalize(g) : -1;
}

static void
test_capture_queue(void)
{
    dfg g;
    REQUIRE(build_queue_job(&g, 4) == 0);
    workload w;
    sim_result res;
    memset(&res, 0, sizeof res);
    REQUIRE(workload_analyze(&w, &g, &res, 1, 2, NULL, NULL, -1, NULL) == 0);
    CHECK(w.capture.g != NULL);
    CHECK_EQ_U(w.capture.unqueued, 4 * 4);
    /* the copy's call waits for the queue: launch 5 returns when kernel 3 ends (~207 us),
     * the copy then takes 2 + 250 us, the synchronisation 1 us */
    double base = w.base_iter_ns;
    CHECK(fabs(base - 460 * US) < 3 * US);
    strategy_plan p;
    strategy_plan_baseline(&p);
    p.cuda_graph = 1;
    strategy_eval e;
    CHECK(strategy_evaluate(&w, &p, &res, &e) == 0);
    CHECK(w.g == w.capture.g);
    /* one graph launch: the copy's call is not held (its copy overlaps the kernels);
     * the six kernels back to back take 300 us, the synchronisation 1 us */
    CHECK(fabs(e.iter_ns - 301 * US) < 3 * US);
    /* the working graph keeps its queue for plans that do not capture */
    strategy_plan_baseline(&p);
    CHECK(strategy_evaluate(&w, &p, &res, &e) == 0);
    CHECK(w.g == &g);
    CHECK(fabs(e.iter_ns - base) < 1);
    int64_t queued = 0;
    for (int32_t n = 0; n < g.n_nodes; n++)
        queued += (g.flags[n] & DFG_F_QUEUED) != 0;
    CHECK_EQ_U(queued, 4 * 4);
    workload_free(&w);
    sim_result_free(&res);
    dfg_free(&g);
}

static void
test_tensor(void)
{
    dfg g;
    costmodel m;
    fit_model(&m);
    REQUIRE(synth_job(&g, 200, 8) == 0);
    workload w;
    sim_result res;
    memset(&res, 0, sizeof res);
    REQUIRE(workload_analyze(&w, &g, &res, 0, 1, &m, NULL, -1, NULL) == 0);
    CHECK_EQ_U(w.buckets.n_units, 8);
    CHECK(w.buckets.why[0] == 0);
    strategy_plan p;
    strategy_plan_baseline(&p);
    CHECK_EQ_U(strategy_bucket_count(&w, &p), 0); /* as measured */
    /* caps in MiB: 8 units of 4 MiB */
    p.bucket_cap = p.first_cap = 5; /* 4 MiB: every unit alone */
    CHECK_EQ_U(strategy_bucket_count(&w, &p), 8);
    CHECK(!partition_splits(&w.buckets, &p));
    p.bucket_cap = p.first_cap = 3; /* 1 MiB: every unit split in 4 (tensor partition) */
    CHECK(partition_splits(&w.buckets, &p));
    CHECK_EQ_U(strategy_bucket_count(&w, &p), 32);
    p.bucket_cap = p.first_cap = 6; /* 5 MiB: two units a bucket */
    CHECK_EQ_U(strategy_bucket_count(&w, &p), 4);
    p.bucket_cap = p.first_cap = 18; /* 1 GiB: one bucket */
    CHECK_EQ_U(strategy_bucket_count(&w, &p), 1);
    p.first_cap = 5; /* first bucket 4 MiB, then 1 GiB: 2 buckets */
    CHECK_EQ_U(strategy_bucket_count(&w, &p), 2);
    strategy_eval e1, e8;
    p.bucket_cap = p.first_cap = 18;
    CHECK(strategy_evaluate(&w, &p, &res, &e1) == 0);
    CHECK_EQ_U(e1.n_buckets, 1);
    p.bucket_cap = p.first_cap = 5;
    CHECK(strategy_evaluate(&w, &p, &res, &e8) == 0);
    CHECK(e1.iter_ns > 0 && e8.iter_ns > 0 && e1.iter_ns != e8.iter_ns);
    strategy_plan q;
    CHECK(framework_ddp_sim.parse_args("--bucket-mb 25 --first-bucket-mb 1 --recompute 1-3,5 "
                                       "--accum-steps 2 --batch 16",
                                       &q) == 0);
    CHECK(strategy_bucket_caps_mb[q.bucket_cap] == 25);
    CHECK(strategy_bucket_caps_mb[q.first_cap] == 1);
    CHECK(q.accum_k == 2 && strategy_n_recomputed(&q) == 4 && strategy_recomputes(&q, 5));
    char args[256];
    framework_ddp_sim.format_args(&q, 32, args, sizeof args);
    CHECK(!strcmp(args, "--bucket-mb 25 --first-bucket-mb 1 --recompute 1-3,5 "
                        "--accum-steps 2 --batch 16"));
    CHECK(framework_ddp_sim.parse_args("--bogus", &q) != 0);
    /* PyTorch's options: bucket_cap_mb capping DDP's first bucket too (its 1 MiB first
     * bucket is only bucket_cap_mb's default's: a plan of 0.25 MiB has 2 buckets of the
     * closed loop's 411 KiB of gradients, not 1), the capture as
     * torch.cuda.graph of the whole step under DDP (mode=reduce-overhead, which leaves DDP's
     * all-reduces out, refused) and as torch.compile's mode without DDP, checkpoint by
     * layer, no_sync over K micro-batches */
    CHECK(framework_torch_ddp.parse_args("bucket_cap_mb=4 torch.compile torch.cuda.graph "
                                         "checkpoint=1-3,5 no_sync=2 micro_batch=16",
                                         &q) == 0);
    CHECK(strategy_bucket_caps_mb[q.bucket_cap] == 4 && q.first_cap == q.bucket_cap);
    CHECK(framework_torch_ddp.first_bucket_follows && !framework_torch_ddp.fixed_first_bucket_mb);
    CHECK(q.fuse && q.cuda_graph && q.accum_k == 2 && strategy_n_recomputed(&q) == 4);
    framework_torch_ddp.format_args(&q, 32, args, sizeof args);
    CHECK(!strcmp(args, "bucket_cap_mb=4 torch.compile torch.cuda.graph checkpoint=1-3,5 "
                        "no_sync=2 micro_batch=16"));
    CHECK(framework_torch_ddp.capture_scope == WL_CAPTURE_STEP);
    CHECK(framework_torch_ddp.parse_args("mode=reduce-overhead", &q) != 0);
    CHECK(framework_torch.parse_args("mode=reduce-overhead", &q) == 0 && q.cuda_graph);
    framework_torch.format_args(&q, 0, args, sizeof args);
    CHECK(!strcmp(args, "mode=reduce-overhead") &&
          framework_torch.capture_scope == WL_CAPTURE_COMPUTE);
    CHECK(framework_torch_ddp.parse_args("torch.cuda.graph", &q) == 0 && q.cuda_graph);
    CHECK(framework_torch_ddp.parse_args("bucket_cap_mb=0", &q) != 0);
    CHECK(framework_torch_ddp.parse_args("checkpoint=2-", &q) != 0);
    CHECK(framework_torch_ddp.parse_args("no_sync=x", &q) != 0);
    CHECK(framework_torch_ddp.parse_args("--bucket-mb 25", &q) != 0);
    CHECK(framework_by_name("pytorch-fsdp") == &framework_torch_fsdp &&
          framework_by_name("unknown") == &framework_unknown && !framework_by_name("jax"));
    CHECK(!framework_torch_fsdp.can_capture && !(framework_torch_fsdp.families & STRATEGY_TENSOR));
    CHECK(!framework_unknown.args_key && !framework_unknown.parse_args);
    /* with the parameter sizes (4 per 4 MiB unit: 3, 0.5, 0.25, 0.25 MiB) the buckets are
     * DDP's, of whole parameters and none merged: at 1 MiB the 3 MiB parameter alone, then
     * the three others (2 a unit, where bytes cut at any byte made 4); at 0.25 MiB one
     * a parameter; simulated with as many all-reduces */
    w.buckets.n_params = 32;
    w.buckets.param_bytes = malloc(sizeof *w.buckets.param_bytes * 32);
    w.buckets.unit_param_off = malloc(sizeof *w.buckets.unit_param_off * 9);
    REQUIRE(w.buckets.param_bytes && w.buckets.unit_param_off);
    for (int32_t u = 0; u <= 8; u++)
        w.buckets.unit_param_off[u] = 4 * u;
    for (int32_t i = 0; i < 32; i++)
        w.buckets.param_bytes[i] = i % 4 == 0 ? 3 << 20 : i % 4 == 1 ? 1 << 19 : 1 << 18;
    p.bucket_cap = p.first_cap = 3; /* 1 MiB */
    CHECK(partition_splits(&w.buckets, &p));
    CHECK_EQ_U(strategy_bucket_count(&w, &p), 16);
    CHECK(strategy_evaluate(&w, &p, &res, &e8) == 0);
    CHECK_EQ_U(e8.n_buckets, 16);
    p.bucket_cap = p.first_cap = 1; /* 0.25 MiB */
    CHECK(strategy_evaluate(&w, &p, &res, &e8) == 0);
    CHECK_EQ_U(e8.n_buckets, 32);
    /* 5 MiB: 7 MiB closing with the second unit's first parameter, then 5 at the third
     * unit's end, and so on: 7, 5, 7, 5, 7 and the last 1 */
    p.bucket_cap = p.first_cap = 6;
    CHECK(partition_splits(&w.buckets, &p));
    CHECK_EQ_U(strategy_bucket_count(&w, &p), 6);
    workload_free(&w);
    sim_result_free(&res);
    dfg_free(&g);
}

/* Kernel of rank r's iteration `it` span (all its compute kernels: the synthetic job
 * has one thread, so no backward phase) at which fraction f of the bytes is ready. */
static int32_t
expected_gate(const workload *w, int32_t r, int32_t it, double f)
{
    const dfg *g = w->g;
    double tot = 0, cum = 0;
    for (int32_t n = 0; n < g->n_nodes; n++)
        if (g->kind[n] == DFG_KERNEL && dfg_rank(g, n) == r && w->iter[n] == it)
            tot += (double)w->base_dur[n];
    for (int32_t n = 0; n < g->n_nodes; n++) {
        if (g->kind[n] != DFG_KERNEL || dfg_rank(g, n) != r || w->iter[n] != it)
            continue;
        cum += (double)w->base_dur[n];
        if (cum >= f * tot * (1 - 1e-12))
            return n;
    }
    return -1;
}

static void
test_partition(void)
{
    synth_params sp;
    synth_defaults(&sp);
    sp.ranks = 2;
    sp.iterations = 3;
    sp.ops_per_iter = 200; /* 4 ms of kernels: room to hide 4 chunks of 0.3 ms */
    sp.buckets = 1;        /* one all-reduce of every gradient, after the last kernel */
    sp.bucket_bytes = 4 << 20;
    sp.coll_alpha_ns = 200 * US;
    sp.coll_beta_bpns = 10;
    dfg g;
    REQUIRE(synth_dfg(&sp, &g) == 0);
    /* the first all-reduce call of rank 0 stalled for 2 ms (a loaded host): the unit keeps
     * it, the copies the new buckets make of it cost what the call typically costs */
    int32_t stalled = -1;
    for (int32_t o = g.grp_first[0]; o >= 0 && stalled < 0; o = dfg_next_in_group(&g, o))
        if (dfg_rank(&g, o) == 0)
            stalled = g.launch[o];
    REQUIRE(stalled >= 0);
    int64_t call_ns = dfg_dur(&g, stalled);
    g.dur[stalled] = 2000 * US;
    costmodel m;
    fit_model(&m);
    workload w;
    sim_result res;
    memset(&res, 0, sizeof res);
    REQUIRE(workload_analyze(&w, &g, &res, 0, 1, &m, NULL, -1, NULL) == 0);
    CHECK_EQ_U(w.buckets.n_units, 1);
    CHECK(strategy_tensor_available(&w));
    strategy_plan p;
    strategy_plan_baseline(&p);
    p.bucket_cap = p.first_cap = 3; /* 1 MiB: four buckets, three inside the span */
    CHECK(partition_splits(&w.buckets, &p));
    partition_input pin;
    strategy_partition_input(&w, &pin);
    CHECK_EQ_U(partition_bucket_count(&pin, &p), 4);
    char kind[64];
    strategy_kind(&w, &p, kind, sizeof kind);
    CHECK(!strcmp(kind, "tensor_partition"));

    strategy_apply(&w, &p);
    dfg part = {0};
    int32_t nb = 0;
    strategy_partition_input(&w, &pin);
    CHECK(partition_build(&pin, &p, &part, &nb) == 0);
    CHECK_EQ_U(nb, 4);
    CHECK_EQ_U(part.n_groups, g.n_groups + 3 * g.n_groups); /* 3 new groups per unit */
    int32_t nm_call = dfg_intern(&part, "ncclAllReduce");
    int32_t nm_rec = dfg_intern(&part, "cudaEventRecord");
    for (int32_t q = 0; q < g.n_groups; q++) {
        /* bytes conserved: the unit's own all-reduce carries the last MiB */
        int64_t sum = part.grp_bytes[q];
        CHECK_EQ_U(part.grp_bytes[q], 1 << 20);
        int32_t chunks = 0;
        for (int32_t k = g.n_groups; k < part.n_groups; k++) {
            if (part.grp_seq[k] != g.grp_seq[q])
                continue;
            sum += part.grp_bytes[k];
            chunks++;
            CHECK_EQ_U(part.grp_bytes[k], 1 << 20);
            CHECK(part.grp_dur[k] ==
                  costmodel_predict(&m, w.buckets.coll_op, w.buckets.coll_nranks, 1 << 20));
            /* the chunk's participants: one per rank, each gated by the kernel at which
             * its bytes are ready, launched by a copy of the hook's calls */
            int32_t members = 0;
            for (int32_t n = part.grp_first[k]; n >= 0; n = dfg_next_in_group(&part, n)) {
                members++;
                int32_t c = -1; /* the unit's participant on that rank */
                for (int32_t o = g.grp_first[q]; o >= 0; o = dfg_next_in_group(&g, o))
                    if (dfg_rank(&g, o) == dfg_rank(&part, n))
                        c = o;
                CHECK(c >= 0 && part.res[n] == part.res[c]);
                int32_t gate = -1, nedges = 0;
                for (int64_t e = 0; e < part.n_edges; e++)
                    if (part.edst[e] == n) {
                        gate = part.esrc[e];
                        nedges++;
                    }
                CHECK_EQ_U(nedges, 1);
                int32_t chunk_idx = k - g.n_groups - 3 * q; /* groups added per unit, in order */
                double f = (chunk_idx + 1) / 4.0;
                CHECK(gate >= 0 && gate == expected_gate(&w, dfg_rank(&g, c), w.iter[c], f));
                int32_t h = part.launch[n];
                CHECK(h >= g.n_nodes && part.name[h] == nm_call);
                CHECK_EQ_U(dfg_dur(&part, h), call_ns);
                CHECK(part.name[dfg_prev_on_res(&part, h)] == nm_rec);
                CHECK(dfg_prev_on_res(&part, dfg_prev_on_res(&part, h)) == g.launch[gate]);
            }
            CHECK_EQ_U(members, 2);
        }
        CHECK_EQ_U(chunks, 3);
        CHECK_EQ_U(sum, 4 << 20);
    }
    /* on the communication stream, the chunks come before the unit's all-reduce */
    int32_t c0 = g.grp_first[0];
    for (int i = 0; i < 3; i++) {
        c0 = dfg_prev_on_res(&part, c0);
        CHECK(c0 >= g.n_nodes && part.kind[c0] == DFG_COLL);
    }
    sim_result ps;
    memset(&ps, 0, sizeof ps);
    CHECK(sim_run(&part, &ps) == 0);
    CHECK_EQ_U(ps.n_unfinished, 0);
    CHECK_EQ_U(dfg_dur(&part, stalled), 2000 * US);
    sim_result_free(&ps);
    dfg_free(&part);

    /* the candidate overlaps the transfer with the kernels: faster than the baseline */
    strategy_eval e;
    CHECK(strategy_evaluate(&w, &p, &res, &e) == 0);
    CHECK_EQ_U(e.n_buckets, 4);
    CHECK(e.iter_ns > 0 && e.iter_ns < w.base_iter_ns - 200 * US);
    CHECK_EQ_U(res.n_unfinished, 0);
    /* the working graph keeps its structure */
    CHECK_EQ_U(g.n_nodes, w.n_nodes);
    CHECK_EQ_U(g.n_groups, w.n_groups);
    /* a cap above the unit: no split, the in-place regrouping */
    p.bucket_cap = p.first_cap = 10; /* 25 MiB */
    CHECK(!partition_splits(&w.buckets, &p));
    strategy_kind(&w, &p, kind, sizeof kind);
    CHECK(!strcmp(kind, "tensor_fusion"));
    workload_free(&w);
    sim_result_free(&res);
    dfg_free(&g);
}

/* The synthetic job the search tests run on, analysed, and their search options. */
typedef struct search_job {
    costmodel m;
    dfg g;
    workload w;
    sim_result res;
    search_options o; /* seed, 150 evaluations, the best 3 */
} search_job;

static void
search_job_open(search_job *j, uint64_t seed)
{
    memset(j, 0, sizeof *j);
    fit_model(&j->m);
    REQUIRE(synth_job(&j->g, 400, 8) == 0);
    REQUIRE(workload_analyze(&j->w, &j->g, &j->res, 0, 1, &j->m, NULL, -1, NULL) == 0);
    j->o.seed = seed;
    j->o.max_evals = 150;
    j->o.top_k = 3;
}

static void
search_job_close(search_job *j)
{
    workload_free(&j->w);
    sim_result_free(&j->res);
    dfg_free(&j->g);
}

/* The search of seed on the synthetic job into out; follows: search_options's
 * first_bucket_follows. */
static void
run_search(uint64_t seed, int follows, search_result *out)
{
    search_job j;
    search_job_open(&j, seed);
    j.o.first_bucket_follows = follows;
    CHECK(search_run(&j.w, &j.o, out) == 0);
    search_job_close(&j);
}

static void
test_search_deterministic(void)
{
    search_result a, b;
    run_search(7, 0, &a);
    run_search(7, 0, &b);
    CHECK(a.evaluations == b.evaluations);
    CHECK(a.n_top == b.n_top);
    for (int32_t i = 0; i < a.n_top && i < b.n_top; i++) {
        CHECK(!memcmp(&a.top[i].plan, &b.top[i].plan, sizeof a.top[i].plan));
        CHECK(a.top[i].eval.iter_ns == b.top[i].eval.iter_ns);
    }
    CHECK(a.n_top > 0 && a.top[0].eval.iter_ns < a.baseline.eval.iter_ns);
    CHECK(a.evaluations <= 150);
    search_result_free(&a);
    search_result_free(&b);
    /* a framework whose bucket cap caps the first bucket too (PyTorch DDP): no winner has
     * a first bucket of its own size */
    run_search(7, 1, &a);
    int with_buckets = 0;
    for (int32_t i = 0; i < a.n_top; i++) {
        with_buckets += a.top[i].plan.bucket_cap >= 0;
        CHECK(a.top[i].plan.bucket_cap < 0 || a.top[i].plan.first_cap == a.top[i].plan.bucket_cap);
    }
    CHECK(with_buckets > 0);
    search_result_free(&a);
}

/* The screened search (search.h, search_options.screen) with a screen that predicts
 * exactly what the search simulates (the same job searched first, every plan kept): the
 * full search's winners and times, the baseline and the verified plans alone simulated,
 * no gap; every plan verified besides the screen's winners lies within the margin. */
static void
test_search_screened(void)
{
    search_job j;
    search_job_open(&j, 7);
    workload *w = &j.w;
    search_options o = j.o;
    o.keep_evaluated = 1;
    search_result full, scr;
    REQUIRE(search_run(w, &o, &full) == 0);
    CHECK(full.n_evaluated == full.evaluations);
    for (int64_t i = 1; i < full.n_evaluated; i++)
        CHECK(!full.evaluated[i].feasible ||
              full.evaluated[i - 1].eval.iter_ns <= full.evaluated[i].eval.iter_ns);
    o.keep_evaluated = 0;
    o.screen = &full;
    REQUIRE(search_run(w, &o, &scr) == 0);
    CHECK(scr.screen_evaluations == full.evaluations);
    CHECK(scr.screen_verified >= 1 && scr.screen_verified <= full.n_top + SEARCH_SCREEN_MAX);
    CHECK(scr.evaluations == scr.screen_verified + 1);
    CHECK(scr.screen_gap == 0 && scr.screen_margin == SEARCH_SCREEN_MARGIN);
    CHECK(scr.n_top == full.n_top && scr.n_top > 0);
    for (int32_t i = 0; i < scr.n_top && i < full.n_top; i++) {
        CHECK(!memcmp(&scr.top[i].plan, &full.top[i].plan, sizeof scr.top[i].plan));
        CHECK(scr.top[i].eval.iter_ns == full.top[i].eval.iter_ns);
        CHECK(scr.top[i].eval.typical_ns == full.top[i].eval.typical_ns);
    }
    CHECK(scr.baseline.eval.iter_ns == full.baseline.eval.iter_ns);
    CHECK(!scr.cut_by_budget);
    /* a screen the budget cut: the screened search says it was cut */
    search_result_free(&scr);
    full.cut_by_budget = 1;
    REQUIRE(search_run(w, &o, &scr) == 0);
    CHECK(scr.cut_by_budget && scr.n_top == full.n_top);
    /* a budget shorter than the baseline's simulation: the baseline alone, cut */
    search_result_free(&scr);
    o.screen = NULL;
    o.budget_s = 1e-9;
    REQUIRE(search_run(w, &o, &scr) == 0);
    CHECK(scr.cut_by_budget && scr.evaluations == 1 && scr.baseline.eval.iter_ns > 0);
    search_result_free(&full);
    search_result_free(&scr);
    search_job_close(&j);
}

/* Gradient sizes per layer from the static allocations: parameters of 4 layers, then a
 * bucket buffer and a small tensor; units in backward order. */
static void
test_match_gradients(void)
{
    const int64_t M = 1 << 20;
    int32_t lo[4];
    /* layer 3 (6 MiB) first in backward: unit 0 = layer 3, unit 1 = layers 0..2 */
    int64_t alloc[] = {512, M / 2, M / 2, M / 2, 6 * M, 8 * M, 512};
    int64_t units2[] = {6 * M, 3 * M / 2};
    CHECK(workload_match_gradients(alloc, 7, units2, 2, 4, lo) == 1);
    CHECK(lo[0] == 3 && lo[1] == 0);
    /* one unit of everything */
    int64_t units1[] = {15 * M / 2};
    CHECK(workload_match_gradients(alloc, 7, units1, 1, 4, lo) == 1);
    CHECK(lo[0] == 0);
    /* sizes that do not add up: no match */
    int64_t bad[] = {5 * M, 3 * M};
    CHECK(workload_match_gradients(alloc, 7, bad, 2, 4, lo) == -1);
    /* requests rounded by the allocator (to 512 B, and 2 MiB above 1 MiB) still match */
    int64_t rounded[] = {(M / 2 + 1000 + 511) & ~511, 4 * M};
    int64_t runits[] = {3 * M + 12, M / 2 + 1000};
    CHECK(workload_match_gradients(rounded, 2, runits, 2, 2, lo) == 0);
    CHECK(lo[0] == 1 && lo[1] == 0);
}

/* Tensor partition with the gradient sizes of the allocation trace, large gradients
 * first: layer 3 (6 MiB of 7.5) finishes its backward after a quarter of the span, so
 * the 2 MiB buckets that hold it are ready there, where the spread over backward time
 * would put them after 80 % of it; the time-proportional spread stays the fallback. */
static void
test_partition_gradients(void)
{
    const int64_t M = 1 << 20;
    int64_t grad[4] = {M / 2, M / 2, M / 2, 6 * M};
    int64_t t_fwd[4];
    dfg g;
    REQUIRE(build_layer_job(&g, 3, grad, 4, 0, t_fwd) == 0);
    costmodel m;
    fit_model(&m);
    for (int with_sizes = 1; with_sizes >= 0; with_sizes--) {
        memest mem;
        int64_t even[4] = {3 * M, 3 * M, 3 * M, 3 * M}; /* sizes that match no unit */
        layer_memest(&mem, with_sizes ? grad : even, 4, t_fwd, 15 * M / 2);
        workload w;
        sim_result res;
        memset(&res, 0, sizeof res);
        dfg work;
        CHECK(dfg_clone(&work, &g) == 0);
        REQUIRE(workload_analyze(&w, &work, &res, 1, 1, &m, &mem, 0, NULL) == 0);
        CHECK_EQ_U(w.buckets.n_units, 1);
        CHECK_EQ_U(w.layers.n_layers, 4);
        CHECK(with_sizes ? w.buckets.layer_grad != NULL : w.buckets.layer_grad == NULL);
        CHECK(with_sizes ? !w.buckets.grad_why[0] : w.buckets.grad_why[0] != 0);
        strategy_plan p;
        strategy_plan_baseline(&p);
        p.bucket_cap = p.first_cap = 4; /* 2 MiB: 4 buckets, 3 inside the span */
        CHECK(partition_splits(&w.buckets, &p));
        strategy_apply(&w, &p);
        dfg part = {0};
        int32_t nb = 0;
        partition_input pin;
        strategy_partition_input(&w, &pin);
        CHECK(partition_build(&pin, &p, &part, &nb) == 0);
        /* where the first new bucket of rank 0's compared iteration is gated: the
         * index of its gating kernel among the iteration's 8 backward kernels */
        int32_t gate = -1;
        for (int32_t k = g.n_groups; k < part.n_groups && gate < 0; k++) {
            if (part.grp_seq[k] != 1)
                continue;
            for (int32_t n = part.grp_first[k]; n >= 0; n = dfg_next_in_group(&part, n))
                for (int64_t e = 0; e < part.n_edges; e++)
                    if (part.edst[e] == n && dfg_rank(&part, n) == 0)
                        gate = part.esrc[e];
        }
        CHECK(gate >= 0);
        int32_t idx = 0;
        for (int32_t n = dfg_prev_on_res(&part, gate); n >= 0; n = dfg_prev_on_res(&part, n))
            idx += part.kind[n] == DFG_KERNEL && w.phase[n] == WL_BACKWARD && w.iter[n] == 1;
        /* with the sizes: layer 3's two kernels (index 1); by time: 2/7.5 of 8 (index 2),
         * and the 6 MiB ready bucket by bucket up to 80 % of the span */
        CHECK_EQ_U(idx, with_sizes ? 1 : 2);
        if (with_sizes) {
            /* the three new buckets (6 MiB) are all ready at layer 3's end: one bucket */
            CHECK_EQ_U(nb, 2);
        }
        strategy_eval e;
        CHECK(strategy_evaluate(&w, &p, &res, &e) == 0);
        CHECK(e.iter_ns > 0);
        dfg_free(&part);
        workload_free(&w);
        sim_result_free(&res);
        dfg_free(&work);
    }
    dfg_free(&g);
}

/* Accumulation's weight floor (strategy.h): the optimizer's kernel (557 us past the fixed
 * cost c0 = 3 us, the prior; 7 passes: no optimizer state in the estimate) moves 7 x 64
 * MiB in it, so a pass over layer 0's 48 MiB of weights takes 0.75 x 557 / 7 = 59.7 us
 * (layers 1 to 3: 5.0, 5.0 and 9.9 us). Each layer has one forward kernel and two
 * backward ones, 97 us past c0 each. With 96 MiB of activations a layer's input and output
 * take 239 us (119 us for each backward kernel, two of a name): more than the kernels'
 * time past the pass, so they were bound by their bytes, and at a quarter of the batch
 * layer l's kernels take c0 + p_l + (97 - p_l) / 4: 72.0 us for layer 0, not
 * c0 + 97 / 4 (27.25). With 1 MiB (2.5 us) the kernels took far longer than their bytes:
 * bound by their FLOPs, which shrink with the batch, so the floor is only a lower bound:
 * c0 + max(97 / 4, p_l + 2.5 / 4): 63.3 us for layer 0 (63.0 for its backward kernels),
 * the batch share for layers 1 to 3. With an optimizer kernel 20 times as long every
 * layer's pass (100 us and more) would outlast the kernels that read the weights: the
 * trace contradicts the floor and every kernel scales with the batch. */
static void
test_accumulation_floor(void)
{
    const int64_t M = 1 << 20;
    int64_t grad[4] = {48 * M, 4 * M, 4 * M, 8 * M};
    int64_t opt_us[3] = {560, 560, 11200}, act[3] = {96 * M, M, M};
    costmodel m;
    fit_model(&m);
    for (int v = 0; v < 3; v++) {
        int64_t t_fwd[4];
        dfg g, work;
        memest mem;
        workload w;
        sim_result res;
        REQUIRE(build_layer_job(&g, 3, grad, 4, opt_us[v] * US, t_fwd) == 0);
        layer_memest(&mem, grad, 4, t_fwd, 15 * M / 2);
        for (int l = 0; l < 4; l++)
            mem.act_bytes[l] = act[v];
        memset(&res, 0, sizeof res);
        CHECK(dfg_clone(&work, &g) == 0);
        REQUIRE(workload_analyze(&w, &work, &res, 1, 1, &m, &mem, 0, NULL) == 0);
        CHECK(w.buckets.layer_grad != NULL);
        CHECK(w.layers.weight_ns != NULL && !w.layers.weight_why[0]);
        double bw = 7.0 * 64 * M / ((double)opt_us[v] * US - 3 * US);
        CHECK(fabs(w.layers.weight_bw - bw) < 1e-6 * bw);
        strategy_plan p;
        strategy_plan_baseline(&p);
        p.accum_k = 4;
        CHECK(strategy_apply(&w, &p) == 0);
        int32_t kernels = 0, scaled = 0, layer0 = 0, lower = 0;
        int64_t quarter = 3 * US + llround(97.0 * US / 4);
        for (int32_t d = 0; d < work.n_nodes; d++) {
            if (work.kind[d] != DFG_KERNEL || w.iter[d] != 1 ||
                (w.phase[d] != WL_FORWARD && w.phase[d] != WL_BACKWARD))
                continue;
            double pass = v < 2 ? (double)grad[w.layer[d]] / bw : 0;
            double io = 2.0 * (double)act[v] / ((w.phase[d] == WL_BACKWARD ? 2 : 1) * bw);
            double bytes = pass + (io < 97 * US - pass ? io : 97 * US - pass) / 4;
            CHECK(llabs(dfg_dur(&work, d) -
                        llround(3 * US + (97.0 * US / 4 > bytes ? 97.0 * US / 4 : bytes))) <= 1);
            kernels++;
            scaled += dfg_dur(&work, d) == quarter;
            layer0 += w.layer[d] == 0 && llabs(dfg_dur(&work, d) - 72000) < 100;
            lower += w.layer[d] == 0 && llabs(dfg_dur(&work, d) - 63150) < 200;
        }
        CHECK_EQ_U(kernels, 2 * 12); /* per rank: 4 forward and 8 backward kernels */
        CHECK_EQ_U(scaled, v == 0 ? 0 : v == 1 ? 2 * 9 : 2 * 12);
        CHECK_EQ_U(layer0, v == 0 ? 2 * 3 : 0); /* layer 0's kernels at 72.0 us */
        CHECK_EQ_U(lower, v == 1 ? 2 * 3 : 0);  /* at 63.0 and 63.3 us */
        workload_free(&w);
        sim_result_free(&res);
        dfg_free(&work);
        dfg_free(&g);
    }
}

int
main(void)
{
    test_memest();
    test_memest_first_step();
    test_fusion();
    test_capture_wakeups();
    test_capture_stall();
    test_idle_wake_and_mean_iteration();
    test_capture_queue();
    test_tensor();
    test_partition();
    test_search_deterministic();
    test_search_screened();
    test_match_gradients();
    test_partition_gradients();
    test_accumulation_floor();
    return tests_done();
}
