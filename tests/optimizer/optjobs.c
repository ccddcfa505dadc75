/* optjobs: the jobs and the collective model the optimizer's tests share (optjobs.h). */
#include <stdlib.h>
#include <string.h>

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
