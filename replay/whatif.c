/* whatif.c: what-ifs about the ranks of a job: one rank slower, more ranks (replay.h). */
#include <stdint.h>

#include "replay.h"

int
replay_scale_host_node(dfg *g, int32_t n, double factor)
{
    return dfg_set_dur(g, n, (int64_t)((double)dfg_dur(g, n) * factor + 0.5)) == 0 &&
                   dfg_set_gap(g, n, (int64_t)((double)dfg_gap(g, n) * factor + 0.5)) == 0
               ? 0
               : -1;
}

int64_t
replay_slow_rank(dfg *g, int32_t rank, double kernel_factor, double host_factor)
{
    int64_t rc = 0;
    if (!(kernel_factor > 0) || !(host_factor > 0) || rank < 0 || rank >= g->n_ranks)
        rc = -1;
    else if (dfg_rank_rep(g, rank) != rank || dfg_rank_weight(g, rank) > 1)
        rc = -2;
    for (int32_t n = 0; rc >= 0 && n < g->n_nodes; n++) {
        if ((g->flags[n] & DFG_F_REMOVED) || dfg_rank(g, n) != rank)
            continue;
        if (g->kind[n] == DFG_KERNEL) {
            rc = dfg_set_dur(g, n, (int64_t)((double)dfg_dur(g, n) * kernel_factor + 0.5)) == 0
                     ? rc + 1
                     : -1;
        } else if (g->kind[n] == DFG_HOST) {
            rc = replay_scale_host_node(g, n, host_factor) == 0 ? rc + 1 : -1;
        }
    }
    return rc;
}

int32_t
replay_scale_ranks(const costmodel *m, dfg *g, int32_t n_from, int32_t n_to)
{
    int32_t rc = 0;
    if (n_from < 2 || n_to < 2)
        rc = -1;
    for (int32_t q = 0; rc >= 0 && q < g->n_groups; q++) {
        if (g->grp_nranks[q] != n_from)
            continue;
        g->grp_dur[q] = costmodel_extrapolate_ranks(m, g->grp_op[q], n_from, n_to, g->grp_bytes[q],
                                                    g->grp_dur[q]);
        g->grp_nranks[q] = n_to;
        rc++;
    }
    return rc;
}
