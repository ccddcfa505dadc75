/* build_repair.c: event dependencies rebuilt from call order where the builder could not
 * resolve event records and waits to streams (build_repair_event_edges, see build.h). */
#include "build_int.h"

#include <stdlib.h>

/* The dpro_api_class of host node n's call (libdprotrace decides, every spelling). */
static dpro_api_class
api_class(const dfg *g, int32_t n)
{
    return g->kind[n] == DFG_HOST ? dpro_api_classify(dfg_name(g, g->name[n]))
                                  : DPRO_API_CLASS_OTHER;
}

/* Launched device op of kind `kind` of host node h (the first one), or -1. */
static int32_t
launched_of_kind(const dfg *g, int32_t h, int kind)
{
    for (int32_t i = dfg_launched_first(g, h); i >= 0; i = dfg_launched_next(g, h, i))
        if (g->kind[g->launched[i]] == kind)
            return g->launched[i];
    return -1;
}

/* True if host node n's call orders nothing on the device: it launches no op and is no
 * event record, wait or synchronisation (cudaStreamIsCapturing, cudaEventQuery,
 * cudaGetDevice: what PyTorch calls between an event's record and the wait on it). */
static int
neutral(const dfg *g, int32_t n)
{
    return dfg_launched_first(g, n) < 0 && api_class(g, n) == DPRO_API_CLASS_OTHER;
}

/* See build.h. */
int64_t
build_repair_event_edges(dfg *g)
{
    int64_t records = 0;
    for (int64_t i = 0; i < g->n_edges; i++)
        if (g->kind[g->esrc[i]] != DFG_HOST && g->kind[g->edst[i]] != DFG_HOST)
            return 0; /* the builder resolved them */
    for (int32_t h = 0; h < g->n_nodes; h++)
        records += g->kind[h] == DFG_HOST && !(g->flags[h] & DFG_F_REMOVED) &&
                   api_class(g, h) == DPRO_API_CLASS_EVENT_RECORD;
    if (records == 0)
        return 0;
    if (!g->finalized && dfg_finalize(g) != 0) /* the lists of nodes per resource and launch */
        return -1;
    /* the typical launch latency of each rank (median over its kernels): a waiting op's
     * measured latency also holds the wait */
    int32_t *med = calloc((size_t)g->n_ranks + 1, sizeof *med);
    int32_t *lats = malloc(sizeof *lats * (size_t)(g->n_nodes + 1));
    int32_t *prev = dfg_prev_table(g); /* edges added below leave the resources' order */
    if (!med || !lats || !prev) {
        free(med);
        free(lats);
        free(prev);
        return -1;
    }
    for (int32_t r = 0; r < g->n_ranks; r++) {
        int32_t k = 0;
        for (int32_t d = 0; d < g->n_nodes; d++)
            if (g->kind[d] == DFG_KERNEL && g->launch[d] >= 0 && dfg_rank(g, d) == r &&
                !(g->flags[d] & DFG_F_REMOVED))
                lats[k++] = dfg_lat(g, d);
        if (k > 0) {
            qsort(lats, (size_t)k, sizeof *lats, cmp_int32);
            med[r] = lats[k / 2];
        }
    }
    free(lats);
    int64_t added = 0;
    for (int32_t q = 0; q < g->n_res; q++) {
        if (g->res_kind[q] != DFG_RES_THREAD)
            continue;
        for (int32_t h = g->res_first[q]; h >= 0; h = g->next_on_res[h]) {
            if (api_class(g, h) != DPRO_API_CLASS_STREAM_WAIT)
                continue;
            int32_t rec = prev[h];
            while (rec >= 0 && neutral(g, rec))
                rec = prev[rec];
            if (rec < 0 || api_class(g, rec) != DPRO_API_CLASS_EVENT_RECORD)
                continue;
            int32_t nx = g->next_on_res[h];
            while (nx >= 0 && dfg_launched_first(g, nx) < 0)
                nx = g->next_on_res[nx];
            if (nx < 0)
                continue;
            int32_t coll = launched_of_kind(g, nx, DFG_COLL);
            int32_t src = -1, dst = -1;
            if (coll >= 0) {
                for (int32_t p = prev[rec]; p >= 0 && src < 0; p = prev[p])
                    src = launched_of_kind(g, p, DFG_KERNEL);
                dst = coll;
            } else {
                dst = launched_of_kind(g, nx, DFG_KERNEL);
                if (dst < 0) /* the gradients copied back out of the bucket */
                    dst = launched_of_kind(g, nx, DFG_MEMCPY);
                if (dst < 0)
                    dst = launched_of_kind(g, nx, DFG_MEMSET);
                int64_t best = -1;
                int32_t r = g->res_rank[q];
                for (int32_t d = 0; d < g->n_nodes; d++) {
                    if (g->kind[d] != DFG_COLL || g->launch[d] < 0 || dfg_rank(g, d) != r ||
                        !!(g->flags[d] & DFG_F_REMOVED))
                        continue;
                    int64_t t = g->mstart[g->launch[d]];
                    if (t <= g->mstart[rec] && t > best) {
                        best = t;
                        src = d;
                    }
                }
            }
            if (src < 0 || dst < 0)
                continue;
            if (dfg_add_edge(g, src, dst) != 0) {
                free(med);
                free(prev);
                return -1;
            }
            if (dfg_lat(g, dst) > med[g->res_rank[q]])
                dfg_set_lat(g, dst, med[g->res_rank[q]]);
            /* the idle time before dst that the dependency now explains was measured
             * as a gap on its stream: keep only what remains */
            int64_t ready = dfg_mend(g, src);
            int32_t pv = prev[dst];
            if (pv >= 0 && dfg_mend(g, pv) > ready)
                ready = dfg_mend(g, pv);
            if (pv >= 0) {
                int64_t left = g->mstart[dst] - ready;
                if (left < dfg_gap(g, dst) && dfg_set_gap(g, dst, left > 0 ? left : 0) != 0) {
                    free(med);
                    free(prev);
                    return -1;
                }
            }
            added++;
        }
    }
    free(med);
    free(prev);
    return added;
}
