/* optjobs: the jobs and the collective model the optimizer's tests share (optjobs.h). */
#include <stdlib.h>
#include <string.h>

#include "dprotrace.h"
#include "replay/sim.h"
#include "tests/optimizer/optjobs.h"
#include "tests/replay/synth.h"

int
build_fusion_job(dfg *g, int iters)
{
    if (dfg_init(g, 1) != 0)
        return -1;
    int32_t th = dfg_add_resource(g, DFG_RES_THREAD, 0, 1, dfg_intern(g, "main"));
    int32_t st = dfg_add_resource(g, DFG_RES_STREAM, 0, 7, dfg_intern(g, "stream 7"));
    int32_t nm_launch = dfg_intern(g, "cudaLaunchKernel");
    int32_t nm_sync = dfg_intern(g, "cudaStreamSynchronize");
    int32_t nm_g = dfg_intern(g, "gemm"), nm_s = dfg_intern(g, "elementwise");
    int32_t *bounds = malloc(sizeof *bounds * (size_t)(iters + 1));
    int32_t last = -1;
    static const int pattern[] = {1, 0, 0, 0, 1, 0};
    for (int it = 0; it <= iters; it++) {
        for (int k = 0; k < 6; k++) {
            int32_t h = dfg_add_node(g, DFG_HOST, th, nm_launch);
            g->dur[h] = 5 * US;
            if (k == 0)
                bounds[it] = h;
            if (it == iters)
                break;
            int32_t d = dfg_add_node(g, DFG_KERNEL, st, pattern[k] ? nm_g : nm_s);
            g->dur[d] = pattern[k] ? 100 * US : 10 * US;
            g->launch[d] = h;
            dfg_set_lat(g, d, 2 * US);
            last = d;
        }
        if (it == iters)
            break;
        int32_t s = dfg_add_node(g, DFG_HOST, th, nm_sync);
        g->flags[s] |= DFG_F_BLOCKING;
        g->dur[s] = 1 * US;
        if (dfg_add_edge(g, last, s) != 0)
            return -1;
    }
    int rc = dfg_set_iterations(g, 0, bounds, iters + 1);
    free(bounds);
    return rc == 0 ? dfg_finalize(g) : -1;
}

int
synth_job(dfg *g, int32_t ops, int32_t buckets)
{
    synth_params sp;
    synth_defaults(&sp);
    sp.ranks = 4;
    sp.classes = 1;
    sp.iterations = 3;
    sp.ops_per_iter = ops;
    sp.buckets = buckets;
    sp.bucket_bytes = 4 << 20;
    sp.coll_alpha_ns = 200 * US;
    sp.coll_beta_bpns = 10;
    return synth_dfg(&sp, g);
}

void
fit_model(costmodel *m)
{
    costmodel_sample s[] = {
        {1, 4, 1 << 20, 200 * US + (1 << 20) / 10, 0},
        {1, 4, 4 << 20, 200 * US + (4 << 20) / 10, 0},
        {1, 4, 16 << 20, 200 * US + (16 << 20) / 10, 0},
    };
    memset(m, 0, sizeof *m);
    costmodel_fit_samples(m, s, 3);
}

int
build_layer_job(dfg *g, int iters, const int64_t *grad, int32_t nl, int64_t opt_us, int64_t *t_fwd)
{
    int64_t total = 0;
    for (int32_t l = 0; l < nl; l++)
        total += grad[l];
    if (dfg_init(g, 2) != 0)
        return -1;
    int32_t nm_launch = dfg_intern(g, "cudaLaunchKernel");
    int32_t nm_sync = dfg_intern(g, "cudaStreamSynchronize");
    int32_t nm_rec = dfg_intern(g, "cudaEventRecord");
    int32_t nm_call = dfg_intern(g, "ncclAllReduce");
    int32_t nm_f = dfg_intern(g, "conv_fwd"), nm_b = dfg_intern(g, "conv_bwd");
    int32_t nm_c = dfg_intern(g, "ncclDevKernel_AllReduce");
    int32_t nm_o = dfg_intern(g, "multi_tensor_apply_kernel");
    for (int it = 0; it < iters; it++)
        if (dfg_add_group(g, DPRO_COLL_ALLREDUCE, 2, total, 0x77, (uint64_t)it, 500 * US) < 0)
            return -1;
    int32_t *bounds = malloc(sizeof *bounds * (size_t)(iters + 1));
    int32_t *fwd0 = malloc(sizeof *fwd0 * (size_t)nl);
    if (!bounds || !fwd0)
        return -1;
    for (int32_t r = 0; r < 2; r++) {
        int32_t mt = dfg_add_resource(g, DFG_RES_THREAD, r, 1, dfg_intern(g, "main"));
        int32_t bt = dfg_add_resource(g, DFG_RES_THREAD, r, 2, dfg_intern(g, "autograd"));
        int32_t cs = dfg_add_resource(g, DFG_RES_STREAM, r, 7, dfg_intern(g, "stream 7"));
        int32_t ms = dfg_add_resource(g, DFG_RES_STREAM, r, 13, dfg_intern(g, "stream 13"));
        bounds[0] = dfg_add_node(g, DFG_HOST, mt, nm_launch);
        g->dur[bounds[0]] = 5 * US;
        for (int it = 0; it < iters; it++) {
            int32_t last_f = -1, first_b = -1, last_k = -1;
            for (int32_t l = 0; l < nl; l++) {
                int32_t h = dfg_add_node(g, DFG_HOST, mt, nm_launch);
                int32_t k = dfg_add_node(g, DFG_KERNEL, cs, nm_f);
                g->dur[h] = 5 * US;
                g->dur[k] = 100 * US;
                g->launch[k] = h;
                dfg_set_lat(g, k, 1 * US);
                last_f = h;
                if (r == 0 && it == 0)
                    fwd0[l] = h;
            }
            for (int32_t l = nl - 1; l >= 0; l--)
                for (int j = 0; j < 2; j++) {
                    int32_t h = dfg_add_node(g, DFG_HOST, bt, nm_launch);
                    int32_t k = dfg_add_node(g, DFG_KERNEL, cs, nm_b);
                    g->dur[h] = 5 * US;
                    g->dur[k] = 100 * US;
                    g->launch[k] = h;
                    dfg_set_lat(g, k, 1 * US);
                    if (first_b < 0)
                        first_b = h;
                    last_k = k;
                }
            int32_t rec = dfg_add_node(g, DFG_HOST, bt, nm_rec);
            int32_t call = dfg_add_node(g, DFG_HOST, bt, nm_call);
            int32_t c = dfg_add_node(g, DFG_COLL, ms, nm_c);
            g->dur[rec] = 1 * US;
            g->dur[call] = 5 * US;
            g->launch[c] = call;
            dfg_set_lat(g, c, 2 * US);
            dfg_set_bytes(g, c, total);
            dfg_set_group(g, c, it);
            int32_t woken = -1;
            if (opt_us > 0) {
                woken = dfg_add_node(g, DFG_HOST, mt, nm_launch);
                int32_t k = dfg_add_node(g, DFG_KERNEL, cs, nm_o);
                g->dur[woken] = 5 * US;
                g->dur[k] = opt_us;
                g->launch[k] = woken;
                dfg_set_lat(g, k, 1 * US);
            }
            int32_t s = dfg_add_node(g, DFG_HOST, mt, nm_sync);
            g->dur[s] = 2 * US;
            g->flags[s] |= DFG_F_BLOCKING;
            if (dfg_add_edge(g, last_k, c) != 0 || dfg_add_edge(g, c, s) != 0 ||
                dfg_add_wakeup(g, last_f, first_b, 1 * US) != 0 ||
                dfg_add_wakeup(g, call, woken >= 0 ? woken : s, 1 * US) != 0)
                return -1;
            bounds[it + 1] = s;
        }
        if (dfg_set_iterations(g, r, bounds, iters + 1) != 0)
            return -1;
    }
    free(bounds);
    if (dfg_finalize(g) != 0)
        return -1;
    /* the measured times: those simulated */
    sim_result res;
    memset(&res, 0, sizeof res);
    if (sim_run(g, &res) != 0)
        return -1;
    for (int32_t n = 0; n < g->n_nodes; n++) {
        g->mstart[n] = res.start[n];
        dfg_set_mend(g, n, res.start[n] + dfg_dur(g, n));
    }
    for (int32_t l = 0; l < nl; l++)
        t_fwd[l] = g->mstart[fwd0[l]];
    sim_result_free(&res);
    free(fwd0);
    return 0;
}

void
layer_memest(memest *mem, const int64_t *alloc, int32_t nl, const int64_t *t_fwd, int64_t bucket)
{
    const int64_t M = 1 << 20;
    memset(mem, 0, sizeof *mem);
    mem->peak_bytes = 100 * M;
    mem->n_layers = nl;
    mem->act_bytes = malloc(sizeof *mem->act_bytes * (size_t)nl);
    mem->act_time = malloc(sizeof *mem->act_time * (size_t)nl);
    mem->static_each = malloc(sizeof *mem->static_each * (size_t)(nl + 2));
    for (int32_t l = 0; l < nl; l++) {
        mem->act_bytes[l] = M;
        mem->act_time[l] = t_fwd[l] - 1;
        mem->static_each[mem->n_static++] = alloc[l];
    }
    mem->static_each[mem->n_static++] = bucket;
    mem->static_each[mem->n_static++] = 512;
}
