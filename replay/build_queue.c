/* build_queue.c: launch-queue inference (build_launch_queue, see build.h). */
#define PR_FMT "replay"
#include "build_int.h"
#include "launch_queue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
build_launch_queue(dfg *g, int32_t r, build_queue_info *info)
{
    build_queue_info qi;
    memset(&qi, 0, sizeof qi);
    if (info)
        *info = qi;
    /* the rank's launched device ops, from its streams (O(its nodes), not the job's) */
    size_t n = 0;
    for (int32_t q = 0; q < g->n_res; q++)
        if (g->res_rank[q] == r && g->res_kind[q] == DFG_RES_STREAM)
            for (int32_t d = g->res_first[q]; d >= 0; d = g->next_on_res[d])
                n += g->launch[d] >= 0 && !(g->flags[d] & DFG_F_REMOVED);
    launch_queue_op *ops = malloc((n ? n : 1) * sizeof *ops);
    launch_queue lq = {0};
    int rc = ops ? 0 : -1;
    if (rc == 0) {
        size_t k = 0;
        for (int32_t q = 0; q < g->n_res; q++) {
            if (g->res_rank[q] != r || g->res_kind[q] != DFG_RES_STREAM)
                continue;
            for (int32_t d = g->res_first[q]; d >= 0; d = g->next_on_res[d]) {
                int32_t l = g->launch[d];
                if (l < 0 || (g->flags[d] & DFG_F_REMOVED))
                    continue;
                ops[k++] = (launch_queue_op){g->mstart[l],
                                             dfg_mend(g, l),
                                             dfg_mend(g, d),
                                             l,
                                             q,
                                             d,
                                             (g->flags[l] & DFG_F_BLOCKING) != 0};
            }
        }
        rc = launch_queue_infer(&lq, ops, n);
    }
    /* the edges: the call of position i of a queue waits for position i - Q */
    for (size_t i = 0; rc == 0 && lq.depth > 0 && i < n; i++) {
        ptrdiff_t j = launch_queue_waited_for(&lq, i);
        if (j < 0)
            continue;
        int32_t src = ops[j].id, h = ops[i].launch;
        rc = dfg_add_edge(g, src, h);
        if (rc == 0) {
            g->flags[h] |= DFG_F_QUEUED;
            qi.edges++;
            qi.held += ops[j].mend > ops[i].lstart;
        }
    }
    if (rc == 0) {
        qi.depth = lq.depth;
        qi.per_stream = lq.per_stream;
        qi.long_calls = lq.long_calls;
        qi.explained = lq.explained;
        qi.launch_cost_ns = lq.launch_cost_ns;
        qi.long_ns = lq.long_ns;
    }
    if (info && rc == 0)
        *info = qi;
    launch_queue_free(&lq);
    free(ops);
    return rc;
}
