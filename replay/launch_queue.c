/* launch_queue.c: the launch queue's depth from a trace's times (launch_queue.h). */
#include "launch_queue.h"
#include "order.h"

#include <stdlib.h>
#include <string.h>

static int
cmp_device(const void *pa, const void *pb)
{
    const launch_queue_op *a = pa, *b = pb;
    if (a->lstart != b->lstart)
        return (a->lstart > b->lstart) - (a->lstart < b->lstart);
    if (a->launch != b->launch)
        return (a->launch > b->launch) - (a->launch < b->launch);
    return (a->id > b->id) - (a->id < b->id);
}

static int
cmp_stream(const void *pa, const void *pb)
{
    const launch_queue_op *a = pa, *b = pb;
    if (a->res != b->res)
        return (a->res > b->res) - (a->res < b->res);
    return cmp_device(pa, pb);
}

static int
cmp_i32(const void *pa, const void *pb)
{
    int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    return (a > b) - (a < b);
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

/* The normal cost of a launch call: the 10th percentile over the calls (a queue-bound
 * job may have more long calls than short ones). ops sorted by cmp_device (the ops of
 * a call adjacent); costs: n slots of scratch. */
static int64_t
launch_cost(const launch_queue_op *ops, size_t n, int64_t *costs)
{
    size_t nc = 0;
    for (size_t i = 0; i < n; i++)
        if (i == 0 || ops[i].launch != ops[i - 1].launch)
            costs[nc++] = ops[i].lend - ops[i].lstart;
    qsort(costs, nc, sizeof *costs, order_i64);
    return costs[nc / 10] > 0 ? costs[nc / 10] : 0;
}

/* For ops sorted into queues (a queue: a run of equal res when per_stream, else all),
 * u[i] as launch_queue.occ says; heap: n slots of scratch. */
static void
occupancy(const launch_queue_op *ops, size_t n, int per_stream, int32_t *u, int64_t *heap)
{
    size_t hn = 0;
    for (size_t i = 0; i < n; i++) {
        int new_queue = i == 0 || (per_stream && ops[i].res != ops[i - 1].res);
        if (new_queue)
            hn = 0;
        if (new_queue || ops[i].launch != ops[i - 1].launch) {
            while (hn > 0 && heap[0] <= ops[i].lstart)
                heap_pop(heap, &hn);
            u[i] = (int32_t)hn;
        } else {
            u[i] = -1;
        }
        heap_push(heap, &hn, ops[i].mend);
    }
}

/* Q of one scope: the median occupancy at the long calls, if it explains them (0: no
 * queue seen); *n_long and *explained receive the long calls and those it explains.
 * tmp: n slots of scratch. */
static int32_t
depth_of(const launch_queue_op *ops, size_t n, const int32_t *u, int64_t long_ns, int32_t *tmp,
         int32_t *n_long, int32_t *explained)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (u[i] >= 0 && !ops[i].blocking && ops[i].lend - ops[i].lstart > long_ns)
            tmp[k++] = u[i];
    *n_long = (int32_t)k;
    *explained = 0;
    if (k < BQ_MIN_LONG)
        return 0;
    qsort(tmp, k, sizeof *tmp, cmp_i32);
    int32_t q = tmp[k / 2], near = 0;
    if (q < BQ_MIN_DEPTH)
        return 0;
    for (size_t i = 0; i < k; i++)
        near += tmp[i] >= q - q / 8 && tmp[i] <= q + q / 8;
    if (2 * (size_t)near < k)
        return 0;
    *explained = near;
    return q;
}

/* Both scopes tried on ops into lq, ops left in the chosen one's order with lq->occ
 * (the stream scope's when neither has a Q). */
static void
choose_scope(launch_queue *lq, launch_queue_op *ops, size_t n, int32_t *tmp, int64_t *heap)
{
    int32_t *u = lq->occ, n_long = 0, expl_dev = 0, expl_str = 0;
    qsort(ops, n, sizeof *ops, cmp_device);
    lq->launch_cost_ns = launch_cost(ops, n, heap);
    lq->long_ns = lq->launch_cost_ns * BQ_LONG_FACTOR;
    if (lq->long_ns < BQ_LONG_MIN_NS)
        lq->long_ns = BQ_LONG_MIN_NS;
    occupancy(ops, n, 0, u, heap);
    int32_t q_dev = depth_of(ops, n, u, lq->long_ns, tmp, &n_long, &expl_dev);
    lq->long_calls = n_long;
    qsort(ops, n, sizeof *ops, cmp_stream);
    occupancy(ops, n, 1, u, heap);
    int32_t q_str = depth_of(ops, n, u, lq->long_ns, tmp, &n_long, &expl_str);
    if (q_str > 0 && expl_str >= expl_dev) {
        lq->depth = q_str;
        lq->per_stream = 1;
        lq->explained = expl_str;
    } else if (q_dev > 0) {
        lq->depth = q_dev;
        lq->explained = expl_dev;
        qsort(ops, n, sizeof *ops, cmp_device);
        occupancy(ops, n, 0, u, heap);
    }
}

int
launch_queue_infer(launch_queue *lq, launch_queue_op *ops, size_t n)
{
    memset(lq, 0, sizeof *lq);
    if (n == 0)
        return 0;
    int32_t *tmp = malloc(n * sizeof *tmp);
    int64_t *heap = malloc(n * sizeof *heap);
    lq->occ = malloc(n * sizeof *lq->occ);
    int rc = tmp && heap && lq->occ ? 0 : -1;
    if (rc == 0) {
        lq->ops = ops;
        lq->n = n;
        choose_scope(lq, ops, n, tmp, heap);
    } else {
        free(lq->occ);
        lq->occ = NULL;
    }
    free(tmp);
    free(heap);
    return rc;
}

ptrdiff_t
launch_queue_waited_for(const launch_queue *lq, size_t i)
{
    size_t q = (size_t)lq->depth;
    if (q == 0 || i < q || lq->occ[i] < 0)
        return -1;
    const launch_queue_op *src = &lq->ops[i - q], *h = &lq->ops[i];
    if (lq->per_stream && src->res != h->res)
        return -1; /* fewer than Q ops before it in its queue */
    if (src->launch == h->launch || src->mend > h->lend)
        return -1; /* the trace says the call did not wait for it */
    return (ptrdiff_t)(i - q);
}

void
launch_queue_free(launch_queue *lq)
{
    free(lq->occ);
    lq->occ = NULL;
}
