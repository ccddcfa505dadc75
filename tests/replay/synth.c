/* synth.c: synthetic data-parallel jobs as dataflow graphs (see synth.h). */
#include "synth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/costmodel.h"
#include "dprotrace.h"

void
synth_defaults(synth_params *p)
{
    memset(p, 0, sizeof *p);
    p->ranks = 4;
    p->iterations = 3;
    p->ops_per_iter = 200;
    p->buckets = 4;
    p->kernel_ns = 20000;
    p->launch_ns = 4000;
    p->gap_ns = 2000;
    p->bucket_bytes = 25 << 20;
    p->coll_alpha_ns = 20000;
    p->coll_beta_bpns = 50.0;
    p->straggler_factor = 1.0;
    p->seed = 1;
}

/* The zeroing of the gradients (synth_params: zero_grads) on thread th and stream cs:
 * returns 0, -1 when out of memory. */
static int
add_zeroing(const synth_params *p, dfg *g, int32_t th, int32_t cs)
{
    int32_t nm_call = dfg_intern(g, "cudaMemsetAsync"), nm_op = dfg_intern(g, "memset");
    for (int32_t b = 0; b < p->buckets; b++) {
        int32_t h = dfg_add_node(g, DFG_HOST, th, nm_call);
        int32_t d = dfg_add_node(g, DFG_MEMSET, cs, nm_op);
        if (h < 0 || d < 0 || dfg_set_bytes(g, d, p->bucket_bytes) != 0)
            return -1;
        g->dur[h] = 3000;
        g->gap[h] = p->gap_ns;
        g->dur[d] = 1000;
        g->launch[d] = h;
        dfg_set_lat(g, d, 1000);
    }
    return 0;
}

static uint64_t
next_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

int
synth_dfg(const synth_params *p, dfg *g)
{
    int32_t nr = p->classes > 0 && p->classes < p->ranks ? p->classes : p->ranks;
    if (dfg_init(g, nr) != 0)
        return -1;
    int32_t buckets = p->buckets > 0 ? p->buckets : 1;
    int32_t per_bucket = p->ops_per_iter / buckets > 0 ? p->ops_per_iter / buckets : 1;
    int64_t nodes = (int64_t)nr * p->iterations *
                        (2LL * p->ops_per_iter + (6LL + p->hook_calls) * buckets + 1) +
                    2LL * nr;
    if (dfg_reserve(g, nodes, (int64_t)nr * p->iterations * (2LL * buckets + 2)) != 0)
        goto fail;
    int32_t n_names = 64;
    int32_t names[64];
    char buf[64];
    for (int32_t i = 0; i < n_names; i++) {
        snprintf(buf, sizeof buf, "void kernel_%d<float, 128>(float const*, float*)", i);
        names[i] = dfg_intern(g, buf);
    }
    int32_t nm_launch = dfg_intern(g, "cudaLaunchKernel");
    int32_t nm_record = dfg_intern(g, "cudaEventRecord");
    int32_t nm_coll = dfg_intern(g, "ncclAllReduce");
    int32_t nm_query = dfg_intern(g, "cudaEventQuery");
    int32_t nm_kcoll = dfg_intern(g, "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
    int32_t nm_sync = dfg_intern(g, "cudaStreamSynchronize");
    int32_t nm_copy = dfg_intern(g, "cudaMemcpyAsync");
    int32_t nm_wait = dfg_intern(g, "cudaStreamWaitEvent");
    int32_t nm_dtod = dfg_intern(g, "memcpy DtoD");
    int32_t groups_total = p->iterations * buckets;
    int64_t coll_ns = p->coll_alpha_ns + (int64_t)(costmodel_factor(DPRO_COLL_ALLREDUCE, p->ranks) *
                                                   (double)p->bucket_bytes /
                                                   (p->coll_beta_bpns > 0 ? p->coll_beta_bpns : 1));
    for (int32_t k = 0; k < groups_total; k++)
        if (dfg_add_group(g, DPRO_COLL_ALLREDUCE, p->ranks, p->bucket_bytes, 0x5eed, (uint64_t)k,
                          coll_ns) < 0)
            goto fail;
    int32_t *bounds = malloc((size_t)(p->iterations + 1) * sizeof *bounds);
    if (!bounds)
        goto fail;
    for (int32_t r = 0; r < nr; r++) {
        uint64_t rs = p->seed * 0x9e3779b97f4a7c15ULL + 1; /* ranks behave alike */
        int32_t th =
            dfg_add_resource(g, DFG_RES_THREAD, r, 1000 + (uint64_t)r, dfg_intern(g, "main"));
        int32_t cs = dfg_add_resource(g, DFG_RES_STREAM, r, 7, dfg_intern(g, "stream 7 (compute)"));
        int32_t ms = dfg_add_resource(g, DFG_RES_STREAM, r, 13, dfg_intern(g, "stream 13 (nccl)"));
        if (th < 0 || cs < 0 || ms < 0)
            goto fail_b;
        double factor = r == 0 && p->straggler_factor > 1 ? p->straggler_factor : 1.0;
        int32_t last_coll = -1;
        int32_t setup = dfg_add_node(g, DFG_HOST, th, nm_launch);
        if (setup < 0)
            goto fail_b;
        g->dur[setup] = p->launch_ns;
        bounds[0] = setup;
        for (int32_t it = 0; it < p->iterations; it++) {
            int32_t last_kernel = -1;
            if (p->zero_grads && add_zeroing(p, g, th, cs) != 0)
                goto fail_b;
            for (int32_t o = 0; o < p->ops_per_iter; o++) {
                int32_t h = dfg_add_node(g, DFG_HOST, th, nm_launch);
                if (h < 0)
                    goto fail_b;
                g->dur[h] = p->launch_ns;
                g->gap[h] = p->gap_ns;
                int32_t d = dfg_add_node(g, DFG_KERNEL, cs, names[o % n_names]);
                if (d < 0)
                    goto fail_b;
                int64_t jitter = (int64_t)(next_rand(&rs) % 1000) - 500;
                g->dur[d] =
                    (int64_t)((double)(p->kernel_ns + p->kernel_ns * jitter / 2000) * factor);
                g->launch[d] = h;
                dfg_set_lat(g, d, 1000);
                last_kernel = d;
                if ((o + 1) % per_bucket == 0 && (o + 1) / per_bucket <= buckets) {
                    int32_t b = (o + 1) / per_bucket - 1;
                    int32_t rec = dfg_add_node(g, DFG_HOST, th, nm_record);
                    int32_t call = dfg_add_node(g, DFG_HOST, th, nm_coll);
                    int32_t c = dfg_add_node(g, DFG_COLL, ms, nm_kcoll);
                    if (rec < 0 || call < 0 || c < 0)
                        goto fail_b;
                    g->dur[rec] = 1000;
                    g->gap[rec] = p->gap_ns;
                    g->dur[call] = 5000;
                    g->gap[call] = 0;
                    g->launch[c] = call;
                    dfg_set_lat(g, c, 2000);
                    if (dfg_set_bytes(g, c, p->bucket_bytes) != 0 ||
                        dfg_add_edge(g, last_kernel, c) != 0)
                        goto fail_b;
                    dfg_set_group(g, c, it * buckets + b);
                    last_coll = c;
                    for (int32_t k = 0; k < p->hook_calls; k++) {
                        int32_t qn = dfg_add_node(g, DFG_HOST, th, nm_query);
                        if (qn < 0)
                            goto fail_b;
                        g->dur[qn] = 1000;
                        g->gap[qn] = p->gap_ns;
                    }
                }
            }
            for (int32_t b = 0; p->final_copies && b < buckets; b++) {
                int32_t wt = b > 0 ? dfg_add_node(g, DFG_HOST, th, nm_wait) : 0;
                int32_t h = dfg_add_node(g, DFG_HOST, th, nm_copy);
                int32_t d = dfg_add_node(g, DFG_MEMCPY, cs, nm_dtod);
                if (wt < 0 || h < 0 || d < 0 || dfg_set_bytes(g, d, p->bucket_bytes) != 0)
                    goto fail_b;
                if (b > 0) {
                    g->dur[wt] = 1000;
                    g->gap[wt] = p->gap_ns;
                }
                g->dur[h] = 3000;
                g->gap[h] = p->gap_ns;
                g->dur[d] = 1000;
                g->launch[d] = h;
                dfg_set_lat(g, d, 1000);
            }
            int32_t s = dfg_add_node(g, DFG_HOST, th, nm_sync);
            if (s < 0)
                goto fail_b;
            g->dur[s] = 2000;
            g->gap[s] = p->gap_ns;
            g->flags[s] |= DFG_F_BLOCKING;
            if (last_coll >= 0 && dfg_add_edge(g, last_coll, s) != 0)
                goto fail_b;
            bounds[it + 1] = s;
        }
        if (dfg_set_iterations(g, r, bounds, p->iterations + 1) != 0)
            goto fail_b;
    }
    free(bounds);
    return 0;
fail_b:
    free(bounds);
fail:
    dfg_free(g);
    return -1;
}
