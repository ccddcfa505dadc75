/*
 * workload_fusion.c: fusion chains (see workload.h).
 */
#define PR_FMT "optimizer"
#include "optimizer/workload_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
workload_find_chains(workload *w)
{
    dfg *g = w->g;
    int64_t short_ns = (int64_t)(w->opt.short_kernel_us * NS_PER_US);
    int32_t n_chain_nodes = 0;
    w->fusion.chain_off = malloc(sizeof *w->fusion.chain_off * (size_t)(g->n_nodes + 1));
    w->fusion.chain_node = malloc(sizeof *w->fusion.chain_node * (size_t)(g->n_nodes + 1));
    if (!w->fusion.chain_off || !w->fusion.chain_node)
        return -1;
    w->fusion.n_chains = 0;
    w->fusion.chain_off[0] = 0;
    for (int32_t q = 0; q < g->n_res; q++) {
        if (g->res_kind[q] != DFG_RES_STREAM)
            continue;
        int32_t run_len = 0, prev = -1;
        for (int32_t m = g->res_first[q];; m = g->next_on_res[m]) {
            int cand = m >= 0 && g->kind[m] == DFG_KERNEL && w->base_dur[m] <= short_ns &&
                       g->launch[m] >= 0;
            /* back to back: consecutive launch calls, or one graph launch */
            if (cand && prev >= 0 && g->name[m] == g->name[prev] &&
                (g->next_on_res[g->launch[prev]] == g->launch[m] ||
                 g->launch[prev] == g->launch[m])) {
                w->fusion.chain_node[n_chain_nodes++] = m;
                run_len++;
                prev = m;
                continue;
            }
            /* the run that ended at prev is a chain when it holds two kernels or more */
            if (run_len >= 2)
                w->fusion.chain_off[++w->fusion.n_chains] = n_chain_nodes;
            else
                n_chain_nodes -= run_len;
            if (m < 0)
                break;
            run_len = cand ? 1 : 0;
            prev = cand ? m : -1;
            if (cand)
                w->fusion.chain_node[n_chain_nodes++] = m;
        }
    }
    w->fusion.chain_kernels = n_chain_nodes;
    if (w->fusion.n_chains == 0)
        snprintf(w->fusion.why, sizeof w->fusion.why,
                 "no run of two or more kernels of at most %.0f us launched back to back",
                 w->opt.short_kernel_us);
    return 0;
}
