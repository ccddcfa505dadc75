/* build_queue.c: launch-queue inference (build_launch_queue, see build.h). */
#define PR_FMT "replay"
#include "build_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BQ_LONG_MIN_NS 50000 /* a launch call this long waited for something */
#define BQ_LONG_FACTOR 8     /* ... or this many times the normal launch cost */
#define BQ_MIN_LONG 8        /* long calls needed before a queue is believed */
#define BQ_MIN_DEPTH 64      /* smallest plausible queue capacity */

/* One queued op: its launch call, stream and the call's start. */
typedef struct bq_op {
    int64_t lstart;
    int32_t launch, res, node;
} bq_op;

static int
cmp_bq_device(const void *pa, const void *pb)
{
    const bq_op *a = pa, *b = pb;
    if (a->lstart != b->lstart)
        return (a->lstart > b->lstart) - (a->lstart < b->lstart);
    if (a->launch != b->launch)
        return (a->launch > b->launch) - (a->launch < b->launch);
    return (a->node > b->node) - (a->node < b->node);
}

static int
cmp_bq_stream(const void *pa, const void *pb)
{
    const bq_op *a = pa, *b = pb;
    if (a->res != b->res)
        return (a->res > b->res) - (a->res < b->res);
    return cmp_bq_device(pa, pb);
}

/* Binary min-heap of end times. */
static void
heap_push(int64_t *h, size_t *n, int64_t v)
{
    size_t i = (*n)++;
    while (i > 0 && h[(i - 1) / 2] > v) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = v;
}

static void
heap_pop(int64_t *h, size_t *n)
{
    int64_t v = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && h[c + 1] < h[c])
            c++;
        if (h[c] >= v)
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0)
        h[i] = v;
}

/* For ops sorted into queues (a queue: a run of equal res when per_stream, else all),
 * u[i] = ops earlier in the queue not finished when the call launching ops[i] started,
 * for the first op of each call in its queue; -1 for the others. */
static void
queue_occupancy(const dfg *g, const bq_op *ops, size_t n, int per_stream, int32_t *u, int64_t *heap)
{
    size_t hn = 0;
    for (size_t i = 0; i < n; i++) {
        int new_queue = i == 0 || (per_stream && ops[i].res != ops[i - 1].res);
        if (new_queue)
            hn = 0;
        int first = new_queue || ops[i].launch != ops[i - 1].launch;
        if (first) {
            while (hn > 0 && heap[0] <= ops[i].lstart)
                heap_pop(heap, &hn);
            u[i] = (int32_t)hn;
        } else {
            u[i] = -1;
        }
        heap_push(heap, &hn, g->mend[ops[i].node]);
    }
}

/* Q of one scope from the occupancy at the long calls; returns it (0: no queue seen)
 * and the number of long calls it explains. */
static int32_t
queue_depth(const dfg *g, const bq_op *ops, size_t n, const int32_t *u, int64_t long_ns,
            int32_t *tmp, int32_t *n_long, int32_t *explained)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t h = ops[i].launch;
        if (u[i] >= 0 && !(g->flags[h] & DFG_F_BLOCKING) && g->mend[h] - g->mstart[h] > long_ns)
            tmp[k++] = u[i];
    }
    *n_long = (int32_t)k;
    *explained = 0;
    if (k < BQ_MIN_LONG)
        return 0;
    qsort(tmp, k, sizeof *tmp, cmp_int32);
    int32_t q = tmp[k / 2];
    if (q < BQ_MIN_DEPTH)
        return 0;
    int32_t near = 0;
    for (size_t i = 0; i < k; i++)
        near += tmp[i] >= q - q / 8 && tmp[i] <= q + q / 8;
    if (2 * (size_t)near < k)
        return 0;
    *explained = near;
    return q;
}

int
build_launch_queue(dfg *g, int32_t r, build_queue_info *info)
{
    build_queue_info qi;
    memset(&qi, 0, sizeof qi);
    /* the rank's launched device ops, from its streams (O(its nodes), not the job's) */
    size_t n = 0;
    for (int32_t q = 0; q < g->n_res; q++)
        if (g->res_rank[q] == r && g->res_kind[q] == DFG_RES_STREAM)
            for (int32_t d = g->res_first[q]; d >= 0; d = g->next_on_res[d])
                n += g->launch[d] >= 0 && !(g->flags[d] & DFG_F_REMOVED);
    if (info)
        *info = qi;
    if (n == 0)
        return 0;
    bq_op *ops = malloc(n * sizeof *ops);
    int32_t *u = malloc(n * sizeof *u);
    int32_t *tmp = malloc(n * sizeof *tmp);
    int64_t *heap = malloc(n * sizeof *heap);
    int rc = -1;
    if (!ops || !u || !tmp || !heap)
        goto out;
    size_t k = 0;
    for (int32_t q = 0; q < g->n_res; q++) {
        if (g->res_rank[q] != r || g->res_kind[q] != DFG_RES_STREAM)
            continue;
        for (int32_t d = g->res_first[q]; d >= 0; d = g->next_on_res[d]) {
            int32_t l = g->launch[d];
            if (l >= 0 && !(g->flags[d] & DFG_F_REMOVED))
                ops[k++] = (bq_op){g->mstart[l], l, q, d};
        }
    }

    /* the normal cost of a launch call: 10th percentile over the calls (a queue-bound
     * job may have more long calls than short ones) */
    qsort(ops, n, sizeof *ops, cmp_bq_device);
    int64_t *costs = heap; /* scratch until the occupancy is computed */
    size_t nc = 0;
    for (size_t i = 0; i < n; i++)
        if (i == 0 || ops[i].launch != ops[i - 1].launch)
            costs[nc++] = g->mend[ops[i].launch] - g->mstart[ops[i].launch];
    qsort(costs, nc, sizeof *costs, cmp_i64);
    qi.launch_cost_ns = costs[nc / 10] > 0 ? costs[nc / 10] : 0;
    qi.long_ns = qi.launch_cost_ns * BQ_LONG_FACTOR;
    if (qi.long_ns < BQ_LONG_MIN_NS)
        qi.long_ns = BQ_LONG_MIN_NS;

    /* the device scope, then the stream scope; keep the better one */
    int32_t n_long = 0, expl_dev = 0, expl_str = 0;
    queue_occupancy(g, ops, n, 0, u, heap);
    int32_t q_dev = queue_depth(g, ops, n, u, qi.long_ns, tmp, &n_long, &expl_dev);
    qi.long_calls = n_long;
    qsort(ops, n, sizeof *ops, cmp_bq_stream);
    queue_occupancy(g, ops, n, 1, u, heap);
    int32_t q_str = queue_depth(g, ops, n, u, qi.long_ns, tmp, &n_long, &expl_str);
    if (q_str > 0 && expl_str >= expl_dev) {
        qi.depth = q_str;
        qi.per_stream = 1;
        qi.explained = expl_str;
    } else if (q_dev > 0) {
        qi.depth = q_dev;
        qi.explained = expl_dev;
        qsort(ops, n, sizeof *ops, cmp_bq_device);
        queue_occupancy(g, ops, n, 0, u, heap);
    }

    /* the edges: position i of a queue waits for position i - Q of the same queue */
    int32_t q = qi.depth;
    size_t qstart = 0;
    for (size_t i = 0; q > 0 && i < n; i++) {
        if (i > 0 && qi.per_stream && ops[i].res != ops[i - 1].res)
            qstart = i;
        if (u[i] < 0 || i - qstart < (size_t)q)
            continue;
        int32_t src = ops[i - (size_t)q].node, h = ops[i].launch;
        if (g->launch[src] == h || g->mend[src] > g->mend[h])
            continue; /* the trace says the call did not wait for it */
        if (dfg_add_edge(g, src, h) != 0)
            goto out;
        g->flags[h] |= DFG_F_QUEUED;
        qi.edges++;
        qi.held += g->mend[src] > g->mstart[h];
    }
    rc = 0;
    if (info)
        *info = qi;
out:
    free(ops);
    free(u);
    free(tmp);
    free(heap);
    return rc;
}
