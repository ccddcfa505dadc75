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
 */
#include <stdlib.h>
#include <string.h>

#include "dprotrace.h"
#include "optimizer/workload.h"
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

int
main(void)
{
    test_fusion_either_cut();
    return tests_done();
}
