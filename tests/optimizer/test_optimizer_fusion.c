/*
 * test_optimizer_fusion: torch.compile's fusion (WL_FUSE_COMPILED) on a DDP step whose
 * iterations are cut two ways: at the step's start (as the PyTorch profiler's step
 * markers cut it) and inside the backward, right after its first all-reduce (as a cut
 * found from the kernels' period can fall). The collector's and Kineto's traces of one
 * run are cut these two ways.
 *   - the job: one rank; per step the main thread launches the forward sgemm a b sgemm
 *     a layer_norm a sgemm and hands over to the backward thread, which launches sgemm
 *     a, the per-parameter work of parameter 0 (its accumulation a and its copy into the
 *     bucket, bucket_copy), a sgemm, parameter 1's, the all-reduce of unit 0 (parameters
 *     0 and 1, 200 bytes), a layer_norm, parameter 2's, a sgemm, the all-reduce of unit 1
 *     (parameter 2, 100 bytes) and the copies of the buckets back into the 3 gradients
 *     (100 bytes each); the main thread waits for the step;
 *   - DDP's parameters: cut at the step, workload_find_params finds the 3 parameters from
 *     the copies back; cut inside the backward, none (the iteration's last all-reduce is
 *     the next step's first, a kernel launch follows it);
 *   - the fusion: cut either way, DDP's per-parameter work stays out of the fused chains
 *     and the steps inside both cuts' iterations fuse the same ops.
 * And each kernel node's launch size (fusion's hinges, FSDP's copy-out grid) is its own
 * kernel sample's, matched by the sample's identity (test_sample_identity).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dprotrace.h"
#include "optimizer/workload.h"
#include "replay/sim.h"
#include "tests/optimizer/optjobs.h"
#include "tests/unit/testutil.h"

#define STEPS 5 /* steps built; 4 iterations between the 5 cuts of either kind */

enum { ROLE_OTHER = 0, ROLE_PARAM_WORK = 1 };

typedef struct ddp_job {
    int32_t th, bw, cs, ns;
    int32_t step_first[STEPS]; /* the step's first kernel */
    int32_t bwd_cut[STEPS];    /* the kernel launched right after the first all-reduce */
    int32_t *step;             /* per node: its step */
    uint8_t *role;             /* per node: ROLE_* */
    uint64_t seq;
} ddp_job;

/* A device op of kind on stream s launched by a new call on thread t (5 us; 3 us after
 * the previous call); 10 us for a GEMM, 3 us else. Returns the device op. */
static int32_t
op(dfg *g, int32_t t, int32_t s, int kind, const char *name)
{
    int32_t h = dfg_add_node(
        g, DFG_HOST, t, dfg_intern(g, kind == DFG_MEMCPY ? "cudaMemcpyAsync" : "cudaLaunchKernel"));
    g->dur[h] = 5 * US;
    dfg_set_gap(g, h, 3 * US);
    int32_t d = dfg_add_node(g, kind, s, dfg_intern(g, name));
    g->dur[d] = (!strcmp(name, "sgemm") ? 10 : 3) * US;
    g->launch[d] = h;
    dfg_set_lat(g, d, 2 * US);
    return d;
}

/* Parameter p's work in the backward: its accumulation and its copy into the bucket. */
static int32_t
param_work(dfg *g, ddp_job *j)
{
    int32_t acc = op(g, j->bw, j->cs, DFG_KERNEL, "a");
    int32_t cp = op(g, j->bw, j->cs, DFG_KERNEL, "bucket_copy");
    if (acc < 0 || cp < 0)
        return -1;
    j->role[acc] = j->role[cp] = ROLE_PARAM_WORK;
    return 0;
}

/* An all-reduce of bytes on the NCCL stream after the compute stream's last op. */
static int32_t
all_reduce(dfg *g, ddp_job *j, int64_t bytes, int32_t after)
{
    int32_t h = dfg_add_node(g, DFG_HOST, j->bw, dfg_intern(g, "ncclAllReduce"));
    g->dur[h] = 5 * US;
    dfg_set_gap(g, h, 3 * US);
    int32_t c = dfg_add_node(g, DFG_KERNEL, j->ns, dfg_intern(g, "ncclDevKernel_AllReduce"));
    g->dur[c] = 20 * US;
    g->launch[c] = h;
    dfg_set_lat(g, c, 2 * US);
    int32_t grp = dfg_add_group(g, DPRO_COLL_ALLREDUCE, 1, bytes, 7, j->seq++, 20 * US);
    if (grp < 0 || dfg_set_group(g, c, grp) != 0 || dfg_set_bytes(g, c, bytes) != 0 ||
        dfg_add_edge(g, after, c) != 0)
        return -1;
    return c;
}

/* One step of the file's comment; sync: the previous step's wait (-1 none). Returns the
 * step's wait, or -1. */
static int32_t
ddp_step(dfg *g, ddp_job *j, int s, int32_t sync)
{
    static const char *const fwd[] = {"sgemm", "a", "b", "sgemm", "a", "layer_norm", "a", "sgemm"};
    int32_t first = g->n_nodes, d = -1, rc = 0;
    for (size_t k = 0; k < sizeof fwd / sizeof fwd[0]; k++) {
        d = op(g, j->th, j->cs, DFG_KERNEL, fwd[k]);
        if (k == 0) {
            j->step_first[s] = d;
            if (sync >= 0)
                rc |= dfg_add_edge(g, sync, g->launch[d]);
        }
    }
    int32_t b = op(g, j->bw, j->cs, DFG_KERNEL, "sgemm");
    rc |= dfg_add_edge(g, g->launch[d], g->launch[b]); /* backward() hands over */
    rc |= op(g, j->bw, j->cs, DFG_KERNEL, "a") < 0;
    rc |= param_work(g, j);
    rc |= op(g, j->bw, j->cs, DFG_KERNEL, "a") < 0;
    rc |= op(g, j->bw, j->cs, DFG_KERNEL, "sgemm") < 0;
    rc |= param_work(g, j);
    int32_t u0 = all_reduce(g, j, 200, g->n_nodes - 1);
    j->bwd_cut[s] = op(g, j->bw, j->cs, DFG_KERNEL, "a");
    rc |= op(g, j->bw, j->cs, DFG_KERNEL, "layer_norm") < 0;
    rc |= param_work(g, j);
    rc |= op(g, j->bw, j->cs, DFG_KERNEL, "a") < 0;
    rc |= op(g, j->bw, j->cs, DFG_KERNEL, "sgemm") < 0;
    int32_t u1 = all_reduce(g, j, 100, g->n_nodes - 1);
    for (int p = 0; p < 3 && rc == 0; p++) {
        int32_t c = op(g, j->bw, j->cs, DFG_MEMCPY, "memcpy DtoD");
        rc |= dfg_set_bytes(g, c, 100) != 0 || dfg_add_edge(g, u1, c) != 0;
        d = c;
    }
    int32_t w = dfg_add_node(g, DFG_HOST, j->th, dfg_intern(g, "cudaDeviceSynchronize"));
    g->flags[w] |= DFG_F_BLOCKING;
    g->dur[w] = 1 * US;
    rc |= dfg_add_edge(g, d, w);
    if (rc != 0 || u0 < 0 || u1 < 0 || w < 0)
        return -1;
    for (int32_t n = first; n < g->n_nodes; n++)
        j->step[n] = s;
    return w;
}

/* The job into *g (finalized), its iterations cut at the steps' first kernels or, with
 * in_bwd, at the kernels right after the backward's first all-reduce. Returns 0 or -1. */
static int
build_ddp_job(dfg *g, ddp_job *j, int in_bwd)
{
    memset(j, 0, sizeof *j);
    j->step = calloc(1024, sizeof *j->step);
    j->role = calloc(1024, 1);
    if (!j->step || !j->role || dfg_init(g, 1) != 0)
        return -1;
    j->th = dfg_add_resource(g, DFG_RES_THREAD, 0, 1, dfg_intern(g, "python"));
    j->bw = dfg_add_resource(g, DFG_RES_THREAD, 0, 2, dfg_intern(g, "pt_autograd_0"));
    j->cs = dfg_add_resource(g, DFG_RES_STREAM, 0, 7, dfg_intern(g, "stream 7"));
    j->ns = dfg_add_resource(g, DFG_RES_STREAM, 0, 13, dfg_intern(g, "stream 13"));
    int32_t sync = -1;
    for (int s = 0; s < STEPS && (s == 0 || sync >= 0); s++)
        sync = ddp_step(g, j, s, sync);
    if (sync < 0 || g->n_nodes > 1024)
        return -1;
    int rc = dfg_set_iterations(g, 0, in_bwd ? j->bwd_cut : j->step_first, STEPS);
    return rc == 0 ? dfg_finalize(g) : -1;
}

/* The fused chains of the job cut one way: in_chain[n] 1 for the nodes in one; the DDP
 * parameters workload_find_params found. */
static int32_t
compiled_chains(int in_bwd, uint8_t *in_chain, ddp_job *j)
{
    dfg g;
    REQUIRE(build_ddp_job(&g, j, in_bwd) == 0);
    workload_options o;
    workload_default_options(&o);
    o.fusion_scope = WL_FUSE_COMPILED;
    workload w;
    sim_result res;
    memset(&res, 0, sizeof res);
    costmodel m;
    fit_model(&m); /* DDP's parameters are looked for where buckets can be modelled */
    REQUIRE(workload_analyze(&w, &g, &res, 1, 2, &m, NULL, -1, &o) == 0);
    CHECK_EQ_U(w.buckets.n_units, 2);
    int32_t n_params = w.buckets.n_params;
    memset(in_chain, 0, 1024);
    for (int32_t i = 0; i < w.fusion.chain_off[w.fusion.n_chains]; i++)
        in_chain[w.fusion.chain_node[i]] = 1;
    workload_free(&w);
    sim_result_free(&res);
    dfg_free(&g);
    return n_params;
}

static void
test_fusion_either_cut(void)
{
    static uint8_t at_step[1024], in_bwd[1024];
    ddp_job js, jb;
    CHECK_EQ_U(compiled_chains(0, at_step, &js), 3);
    CHECK_EQ_U(compiled_chains(1, in_bwd, &jb), 0);
    int32_t fused = 0, param_fused = 0, differ = 0;
    for (int32_t n = 0; n < 1024; n++) {
        param_fused += (at_step[n] || in_bwd[n]) && js.role[n] == ROLE_PARAM_WORK;
        /* steps 1 to 3 lie whole inside both cuts' iterations */
        if (js.step[n] >= 1 && js.step[n] <= 3) {
            differ += at_step[n] != in_bwd[n];
            fused += at_step[n];
        }
    }
    CHECK_EQ_U(param_fused, 0);
    CHECK_EQ_U(differ, 0);
    /* per step: the forward's a b and a layer_norm a; the backward's a a (around
     * parameter 0's work) and layer_norm a (in the backward a reduction starts a kernel;
     * parameter 2's work between) */
    CHECK_EQ_U(fused, 3 * 9);
    free(js.step);
    free(js.role);
    free(jb.step);
    free(jb.role);
}

/* Each kernel node's launch size is its own sample's, matched by its identity (rank,
 * stream, start, event index): per iteration two kernels on two streams of one rank start
 * at the same instant with different grids (10 and 20 blocks of 128 threads), and two of no
 * length start together on the first stream (grids 30 and 40, the samples in the array's
 * opposite order); each node gets its own grid.  With drop, iteration 1's third kernel
 * has no sample (profile_take_rank skips a kernel without threads): the two nodes of
 * no length starting then get none, rather than the third the fourth's. */
static void
check_sample_identity(int drop)
{
    dfg g;
    REQUIRE(dfg_init(&g, 1) == 0);
    int32_t th = dfg_add_resource(&g, DFG_RES_THREAD, 0, 1, dfg_intern(&g, "main"));
    int32_t st[2] = {dfg_add_resource(&g, DFG_RES_STREAM, 0, 7, dfg_intern(&g, "stream 7")),
                     dfg_add_resource(&g, DFG_RES_STREAM, 0, 8, dfg_intern(&g, "stream 8"))};
    int32_t nm_launch = dfg_intern(&g, "cudaLaunchKernel");
    int32_t nm_sync = dfg_intern(&g, "cudaDeviceSynchronize");
    enum { ITERS = 3, KERNELS = 4 };
    static const uint32_t grid[KERNELS] = {10, 20, 30, 40};
    static const int on[KERNELS] = {0, 1, 0, 0};
    int32_t bounds[ITERS + 1], kern[ITERS][KERNELS];
    int64_t start[ITERS][KERNELS];
    for (int it = 0; it <= ITERS; it++) {
        bounds[it] = dfg_add_node(&g, DFG_HOST, th, nm_sync);
        g.flags[bounds[it]] |= DFG_F_BLOCKING;
        g.mstart[bounds[it]] = 1000 * US * it;
        REQUIRE(dfg_set_mend(&g, bounds[it], g.mstart[bounds[it]] + US) == 0);
        if (it > 0)
            REQUIRE(dfg_add_edge(&g, kern[it - 1][0], bounds[it]) == 0 &&
                    dfg_add_edge(&g, kern[it - 1][1], bounds[it]) == 0);
        for (int k = 0; it < ITERS && k < KERNELS; k++) {
            int32_t h = dfg_add_node(&g, DFG_HOST, th, nm_launch);
            g.mstart[h] = 1000 * US * it + (10 + k) * US;
            REQUIRE(dfg_set_mend(&g, h, g.mstart[h] + US) == 0);
            char nm[32];
            snprintf(nm, sizeof nm, "kernel_%d", k);
            int32_t d = dfg_add_node(&g, DFG_KERNEL, st[on[k]], dfg_intern(&g, nm));
            int64_t dur = k < 2 ? 100 * US : 0;
            start[it][k] = 1000 * US * it + (k < 2 ? 20 : 200) * US;
            g.dur[d] = (uint32_t)dur;
            g.launch[d] = h;
            g.mstart[d] = start[it][k];
            REQUIRE(dfg_set_mend(&g, d, start[it][k] + dur) == 0);
            dfg_set_lat(&g, d, (int32_t)(start[it][k] - g.mstart[h]));
            kern[it][k] = d;
        }
    }
    REQUIRE(dfg_set_iterations(&g, 0, bounds, ITERS + 1) == 0 && dfg_finalize(&g) == 0);
    workload_kernel_sample s[ITERS * KERNELS];
    size_t n = 0;
    for (int it = 0; it < ITERS; it++)
        for (int k = KERNELS - 1; k >= 0; k--) /* the trace's events: its order reversed */
            if (!drop || it != 1 || k != 2)
                s[n++] = (workload_kernel_sample){.key = (uint64_t)k,
                                                  .threads = 128.0 * grid[k],
                                                  .dur_ns = k < 2 ? 100 * US : 0,
                                                  .rank = 0,
                                                  .t_ns = start[it][k],
                                                  .grid_x = grid[k],
                                                  .stream = on[k] ? 8 : 7,
                                                  .event = (uint64_t)(KERNELS * it + k)};
    workload_options o;
    workload_default_options(&o);
    o.kernel_samples = s;
    o.n_kernel_samples = n;
    workload w;
    sim_result res;
    memset(&res, 0, sizeof res);
    REQUIRE(workload_analyze(&w, &g, &res, 1, 2, NULL, NULL, -1, &o) == 0);
    for (int it = 0; it < ITERS; it++)
        for (int k = 0; k < KERNELS; k++) {
            int none = drop && it == 1 && k >= 2;
            CHECK_EQ_U(w.fusion.node_grid_x[kern[it][k]], none ? 0 : grid[k]);
            CHECK(w.fusion.node_threads[kern[it][k]] == (none ? 0 : 128.0 * grid[k]));
        }
    workload_free(&w);
    sim_result_free(&res);
    dfg_free(&g);
}

static void
test_sample_identity(void)
{
    check_sample_identity(0);
    check_sample_identity(1);
}

int
main(void)
{
    test_fusion_either_cut();
    test_sample_identity();
    return tests_done();
}
