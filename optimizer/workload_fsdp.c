/*
 * workload_fsdp.c: FSDP's parameter all-gathers, what reshard_after_forward and prefetch
 * change (workload.h: workload_fsdp; strategy.h: the models).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "optimizer/workload_int.h"

/* WL_FSDP_FWD or WL_FSDP_BWD for the all-gather participant c of an iteration launched by
 * its rank's main or backward thread, else WL_FSDP_NONE. */
static int
gather_role(const workload *w, const rank_info *ri, int32_t c)
{
    const dfg *g = w->work;
    int32_t q = dfg_group(g, c), h = g->launch[c];
    if (g->kind[c] != DFG_COLL || q < 0 || h < 0 || g->grp_op[q] != DPRO_COLL_ALLGATHER ||
        w->iter[c] < 0)
        return WL_FSDP_NONE;
    int32_t r = g->res_rank[g->res[c]];
    if (ri[r].bwd_thread >= 0 && g->res[h] == ri[r].bwd_thread)
        return WL_FSDP_BWD;
    return g->res[h] == ri[r].main_thread ? WL_FSDP_FWD : WL_FSDP_NONE;
}

/* The all-gather participant host call h launches, or -1. */
static int32_t
launched_gather(const workload *w, const rank_info *ri, int32_t h)
{
    const dfg *g = w->work;
    for (int32_t i = dfg_launched_first(g, h); i >= 0; i = dfg_launched_next(g, h, i))
        if (gather_role(w, ri, g->launched[i]) != WL_FSDP_NONE)
            return g->launched[i];
    return -1;
}

/* 1 when host call x of rank r may be a call of an unshard (FSDP's events, queries and
 * copy-in launches around an all-gather): neither blocking nor woken, launching nothing
 * on the compute stream and no collective but an all-gather. */
static int
unshard_call(const workload *w, const rank_info *ri, int32_t r, int32_t x)
{
    const dfg *g = w->work;
    if (!alive(g, x) || (g->flags[x] & (DFG_F_BLOCKING | DFG_F_WAKEUP)))
        return 0;
    for (int32_t i = dfg_launched_first(g, x); i >= 0; i = dfg_launched_next(g, x, i)) {
        int32_t d = g->launched[i];
        if (g->res[d] == ri[r].compute_stream ||
            (dfg_group(g, d) >= 0 && g->grp_op[dfg_group(g, d)] != DPRO_COLL_ALLGATHER))
            return 0;
    }
    return 1;
}

/* Walks thread t of rank r in program order: the device ops off the compute stream that
 * the calls after one all-gather's launch and up to the next one's launch start (the
 * unshard: copy-in, all-gather) belong to the second all-gather; prefetch issues them
 * as early as the first one's launch (same iteration). So do the host calls of its
 * unshard: the run of unshard_call calls around its launch, up to the nearest call that
 * is not one (or another all-gather's launch). Adds the forward gathers of each
 * compared iteration to *sum and keeps the largest sum-less-its-largest in
 * w->fsdp.gathered_bytes. */
static void
walk_thread(workload *w, const rank_info *ri, int32_t r, int32_t t)
{
    const dfg *g = w->work;
    workload_fsdp *f = &w->fsdp;
    int32_t seg = g->res_first[t], prev = -1, cur_iter = -1, run = -1, tail = -1;
    int64_t sum = 0, big = 0;
    for (int32_t h = g->res_first[t]; h >= 0; h = g->next_on_res[h]) {
        int32_t c = alive(g, h) ? launched_gather(w, ri, h) : -1;
        int un = unshard_call(w, ri, r, h);
        run = !un ? -1 : run < 0 ? h : run;
        tail = un && c < 0 ? tail : -1;
        if (tail >= 0)
            f->gather_ops[h] = tail;
        if (c < 0)
            continue;
        int32_t q = dfg_group(g, c);
        for (int32_t x = run; x >= 0 && x != h; x = g->next_on_res[x])
            f->gather_ops[x] = q;
        run = -1;
        tail = q;
        if (prev >= 0 && w->iter[prev] != w->iter[h])
            prev = -1; /* prefetch stays within an iteration */
        for (int32_t x = seg; x >= 0; x = g->next_on_res[x]) {
            for (int32_t i = dfg_launched_first(g, x); i >= 0; i = dfg_launched_next(g, x, i)) {
                int32_t d = g->launched[i];
                if (g->res[d] == ri[r].compute_stream)
                    continue;
                f->gather_ops[d] = q;
                int64_t early = prev >= 0 ? g->mstart[x] - g->mstart[prev] : 0;
                f->prefetch_ns[d] = early <= 0 ? 0 : early > INT32_MAX ? INT32_MAX : (int32_t)early;
            }
            if (x == h)
                break;
        }
        seg = g->next_on_res[h];
        prev = h;
        if (gather_role(w, ri, c) != WL_FSDP_FWD || w->iter[h] < w->iter_first ||
            w->iter[h] > w->iter_last)
            continue;
        if (w->iter[h] != cur_iter)
            sum = big = 0;
        cur_iter = w->iter[h];
        sum += g->grp_bytes[q];
        big = g->grp_bytes[q] > big ? g->grp_bytes[q] : big;
        if (sum - big > f->gathered_bytes)
            f->gathered_bytes = sum - big;
    }
}

int
workload_find_fsdp(workload *w, const rank_info *ri)
{
    const dfg *g = w->work;
    workload_fsdp *f = &w->fsdp;
    int64_t n[3] = {0, 0, 0}, n_rs = 0;
    int32_t ranks = 0, iters = w->iter_last - w->iter_first + 1;
    int rc = -1;
    f->grp_role = calloc((size_t)g->n_groups + 1, 1);
    f->gather_ops = malloc(sizeof *f->gather_ops * ((size_t)g->n_nodes + 1));
    f->prefetch_ns = calloc((size_t)g->n_nodes + 1, sizeof *f->prefetch_ns);
    if (f->grp_role && f->gather_ops && f->prefetch_ns) {
        for (int32_t d = 0; d < g->n_nodes; d++) {
            f->gather_ops[d] = -1;
            int role = alive(g, d) ? gather_role(w, ri, d) : WL_FSDP_NONE;
            int compared = w->iter[d] >= w->iter_first && w->iter[d] <= w->iter_last;
            if (role != WL_FSDP_NONE)
                f->grp_role[dfg_group(g, d)] = (uint8_t)role;
            n[role] += compared;
            n_rs += compared && alive(g, d) && g->kind[d] == DFG_COLL && dfg_group(g, d) >= 0 &&
                    g->grp_op[dfg_group(g, d)] == DPRO_COLL_REDUCESCATTER;
        }
        for (int32_t r = 0; r < g->n_ranks; r++) {
            ranks += ri[r].main_thread >= 0;
            if (ri[r].main_thread >= 0)
                walk_thread(w, ri, r, ri[r].main_thread);
            if (ri[r].bwd_thread >= 0)
                walk_thread(w, ri, r, ri[r].bwd_thread);
        }
        double per = ranks > 0 && iters > 0 ? 1.0 / ((double)ranks * iters) : 0;
        f->n_fwd = (int32_t)((double)n[WL_FSDP_FWD] * per + 0.5);
        f->n_bwd = (int32_t)((double)n[WL_FSDP_BWD] * per + 0.5);
        f->n_rs = (int32_t)((double)n_rs * per + 0.5);
        f->why[0] = 0;
        if (f->n_fwd < 1)
            snprintf(f->why, sizeof f->why,
                     "no all-gathers in the forward: not FSDP's parameter sharding");
        else if (f->n_rs < 1)
            snprintf(f->why, sizeof f->why, "no reduce-scatters: not FSDP's gradient sharding");
        rc = 0;
    }
    return rc;
}
