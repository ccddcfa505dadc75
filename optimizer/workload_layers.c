/*
 * workload_layers.c: layers and recomputation sites (see workload.h).
 */
#define PR_FMT "optimizer"
#include "optimizer/workload_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

/* Kernels of phase ph on rank r's compute stream in iteration it, in launch order. */
static int32_t
phase_kernels(const workload *w, const rank_info *k, int32_t it, int ph, int32_t *out)
{
    const dfg *g = w->g;
    int32_t thread = ph == WL_BACKWARD ? k->bwd_thread : k->main_thread;
    int32_t c = 0;
    if (thread < 0)
        return 0;
    for (int32_t h = g->res_first[thread]; h >= 0; h = g->next_on_res[h]) {
        if (w->iter[h] != it)
            continue;
        for (int32_t i = dfg_launched_first(g, h); i >= 0; i = dfg_launched_next(g, h, i)) {
            int32_t d = g->launched[i];
            if (g->kind[d] == DFG_KERNEL && w->phase[d] == ph && w->on_compute[d])
                out[c++] = d;
        }
    }
    return c;
}

/* Why the layers of rank mem_rank cannot be told apart, or NULL when they can. */
static const char *
layers_missing(const workload *w, const rank_info *ri, int32_t mem_rank)
{
    if (!w->layers.have_memory || w->layers.mem.n_layers == 0)
        return "the trace has no activation allocations to tell layers apart";
    if (w->layers.mem.segments)
        return "the activations are the allocator's segments of the first step, not one "
               "allocation per layer";
    if (mem_rank < 0 || mem_rank >= w->g->n_ranks || ri[mem_rank].bwd_thread < 0)
        return "no separate backward thread: forward and backward cannot be told apart";
    return NULL;
}

int
workload_find_layers(workload *w, rank_info *ri, int32_t mem_rank)
{
    dfg *g = w->g;
    const char *why = layers_missing(w, ri, mem_rank);
    if (why) {
        snprintf(w->layers.why, sizeof w->layers.why, "%s", why);
        return 0;
    }
    int32_t L = w->layers.mem.n_layers;
    int32_t *fwd = malloc(sizeof *fwd * (size_t)(g->n_nodes + 1));
    int32_t *bwd = malloc(sizeof *bwd * (size_t)(g->n_nodes + 1));
    int32_t *ref_name = NULL, *ref_layer = NULL;
    int64_t *nf = calloc((size_t)L, sizeof *nf);
    if (!fwd || !bwd || !nf)
        goto oom;
    /* the reference forward: kernels the main thread of the memory rank launched from
     * the first activation allocation until the backward thread's next launch */
    rank_info *mk = &ri[mem_rank];
    int64_t t_act = w->layers.mem.act_time[0], t_bwd = INT64_MAX;
    for (int32_t h = g->res_first[mk->bwd_thread]; h >= 0; h = g->next_on_res[h])
        if (g->mstart[h] >= t_act && dfg_launched_first(g, h) >= 0) {
            t_bwd = g->mstart[h];
            break;
        }
    int32_t K = 0;
    for (int32_t h = g->res_first[mk->main_thread]; h >= 0; h = g->next_on_res[h]) {
        if (g->mstart[h] < t_act || g->mstart[h] >= t_bwd)
            continue;
        for (int32_t i = dfg_launched_first(g, h); i >= 0; i = dfg_launched_next(g, h, i)) {
            int32_t d = g->launched[i];
            if (g->kind[d] == DFG_KERNEL && w->on_compute[d])
                fwd[K++] = d;
        }
    }
    if (K == 0) {
        snprintf(w->layers.why, sizeof w->layers.why,
                 "no forward kernels after the activation allocations");
        goto done;
    }
    ref_name = malloc(sizeof *ref_name * (size_t)K);
    ref_layer = malloc(sizeof *ref_layer * (size_t)K);
    if (!ref_name || !ref_layer)
        goto oom;
    for (int32_t k = 0; k < K; k++) {
        int64_t t = g->mstart[g->launch[fwd[k]]];
        int32_t l = -1;
        while (l + 1 < L && w->layers.mem.act_time[l + 1] <= t)
            l++;
        ref_name[k] = g->name[fwd[k]];
        ref_layer[k] = l;
        if (l >= 0)
            nf[l]++;
    }
    int64_t nf_total = 0;
    for (int32_t l = 0; l < L; l++)
        nf_total += nf[l];
    if (nf_total == 0)
        goto done;
    /* sites: every (rank, iteration) with the reference forward sequence */
    int32_t cap = 64;
    w->layers.site_layer = malloc(sizeof *w->layers.site_layer * (size_t)cap);
    w->layers.site_anchor = malloc(sizeof *w->layers.site_anchor * (size_t)cap);
    w->layers.site_off = malloc(sizeof *w->layers.site_off * (size_t)(cap + 1));
    w->layers.site_fwd = malloc(sizeof *w->layers.site_fwd * (size_t)(g->n_nodes + 1));
    if (!w->layers.site_layer || !w->layers.site_anchor || !w->layers.site_off ||
        !w->layers.site_fwd)
        goto oom;
    w->layers.site_off[0] = 0;
    for (int32_t r = 0; r < g->n_ranks; r++) {
        rank_info *k = &ri[r];
        if (k->bwd_thread < 0)
            continue;
        for (int32_t it = 0; it < k->n_iters; it++) {
            int32_t nfw = phase_kernels(w, k, it, WL_FORWARD, fwd);
            if (nfw != K)
                continue;
            int same = 1;
            for (int32_t j = 0; j < K && same; j++)
                same = g->name[fwd[j]] == ref_name[j];
            if (!same)
                continue;
            int32_t nbw = phase_kernels(w, k, it, WL_BACKWARD, bwd);
            if (nbw == 0)
                continue;
            for (int32_t j = 0; j < K; j++)
                w->layer[fwd[j]] = ref_layer[j];
            int64_t after = 0; /* forward kernels of the layers after l */
            for (int32_t l = L - 1; l >= 0; l--) {
                int32_t b0 = (int32_t)llround((double)nbw * (double)after / (double)nf_total);
                int32_t b1 =
                    (int32_t)llround((double)nbw * (double)(after + nf[l]) / (double)nf_total);
                after += nf[l];
                for (int32_t j = b0; j < b1 && j < nbw; j++)
                    w->layer[bwd[j]] = l;
                if (nf[l] == 0 || b0 >= nbw)
                    continue;
                if (w->layers.n_sites == cap) {
                    cap *= 2;
                    int32_t *a = realloc(w->layers.site_layer, sizeof *a * (size_t)cap);
                    if (!a)
                        goto oom;
                    w->layers.site_layer = a;
                    a = realloc(w->layers.site_anchor, sizeof *a * (size_t)cap);
                    if (!a)
                        goto oom;
                    w->layers.site_anchor = a;
                    a = realloc(w->layers.site_off, sizeof *a * (size_t)(cap + 1));
                    if (!a)
                        goto oom;
                    w->layers.site_off = a;
                }
                int32_t s = w->layers.n_sites++;
                w->layers.site_layer[s] = l;
                w->layers.site_anchor[s] = bwd[b0];
                int32_t o = w->layers.site_off[s];
                for (int32_t j = 0; j < K; j++)
                    if (ref_layer[j] == l)
                        w->layers.site_fwd[o++] = fwd[j];
                w->layers.site_off[s + 1] = o;
            }
        }
    }
    w->layers.n_layers = L;
    w->layers.layer_nfwd = malloc(sizeof *w->layers.layer_nfwd * (size_t)L);
    if (!w->layers.layer_nfwd)
        goto oom;
    for (int32_t l = 0; l < L; l++)
        w->layers.layer_nfwd[l] = (int32_t)nf[l];
done:
    free(fwd);
    free(bwd);
    free(ref_name);
    free(ref_layer);
    free(nf);
    return 0;
oom:
    free(fwd);
    free(bwd);
    free(ref_name);
    free(ref_layer);
    free(nf);
    return -1;
}
