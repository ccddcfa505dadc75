/* queue.c: launch queues (analyses.h): the queue length over time per stream, the queue
 * depth inferred as build_launch_queue infers it (replay/build_queue.c, whose thresholds
 * and steps this follows on the trace's own times: the same Q for the same trace), and
 * the time launch calls were held by a full queue. */
#include "ana_int.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* The thresholds of replay/build_queue.c. */
#define BQ_LONG_MIN_NS 50000
#define BQ_LONG_FACTOR 8
#define BQ_MIN_LONG 8
#define BQ_MIN_DEPTH 64

/* One launched op: its launch call's times, its end, its stream (index) and the call. */
typedef struct qop {
    int64_t lstart, lend, mend;
    int32_t launch, res, op;
    int blocking;
} qop;

static int
cmp_device(const void *pa, const void *pb)
{
    const qop *a = pa, *b = pb;
    if (a->lstart != b->lstart)
        return (a->lstart > b->lstart) - (a->lstart < b->lstart);
    if (a->launch != b->launch)
        return (a->launch > b->launch) - (a->launch < b->launch);
    return (a->op > b->op) - (a->op < b->op);
}

static int
cmp_stream(const void *pa, const void *pb)
{
    const qop *a = pa, *b = pb;
    if (a->res != b->res)
        return (a->res > b->res) - (a->res < b->res);
    return cmp_device(pa, pb);
}

static int
cmp_i64(const void *pa, const void *pb)
{
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    return (a > b) - (a < b);
}

static int
cmp_i32(const void *pa, const void *pb)
{
    int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    return (a > b) - (a < b);
}

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

/* u[i]: ops earlier in the queue of ops[i] unfinished when its call started, for the
 * first op of each call in its queue; -1 for the others (build_queue.c). */
static void
occupancy(const qop *ops, size_t n, int per_stream, int32_t *u, int64_t *heap)
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

/* Q of one scope: the median occupancy at the long calls, if it explains them. */
static int32_t
depth_of(const qop *ops, size_t n, const int32_t *u, int64_t long_ns, int32_t *tmp, int32_t *n_long,
         int32_t *explained)
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

/* Infers the depth into c->queue and charges the held calls to the rows (ops sorted as
 * the chosen scope leaves them). */
static void
infer_depth(ana_collect *c, qop *ops, size_t n, int32_t *u, int32_t *tmp, int64_t *heap)
{
    ana_queue_result *q = &c->queue;
    size_t nc = 0;
    qsort(ops, n, sizeof *ops, cmp_device);
    for (size_t i = 0; i < n; i++)
        if (i == 0 || ops[i].launch != ops[i - 1].launch)
            heap[nc++] = ops[i].lend - ops[i].lstart;
    qsort(heap, nc, sizeof *heap, cmp_i64);
    q->launch_cost_ns = heap[nc / 10] > 0 ? heap[nc / 10] : 0;
    q->long_ns = q->launch_cost_ns * BQ_LONG_FACTOR;
    if (q->long_ns < BQ_LONG_MIN_NS)
        q->long_ns = BQ_LONG_MIN_NS;
    int32_t n_long = 0, expl_dev = 0, expl_str = 0;
    occupancy(ops, n, 0, u, heap);
    int32_t q_dev = depth_of(ops, n, u, q->long_ns, tmp, &n_long, &expl_dev);
    q->long_calls = n_long;
    qsort(ops, n, sizeof *ops, cmp_stream);
    occupancy(ops, n, 1, u, heap);
    int32_t q_str = depth_of(ops, n, u, q->long_ns, tmp, &n_long, &expl_str);
    if (q_str > 0 && expl_str >= expl_dev) {
        q->depth = q_str;
        q->per_stream = 1;
        q->explained = expl_str;
    } else if (q_dev > 0) {
        q->depth = q_dev;
        q->explained = expl_dev;
        qsort(ops, n, sizeof *ops, cmp_device);
        occupancy(ops, n, 0, u, heap);
    }
    size_t qstart = 0, d = (size_t)q->depth;
    for (size_t i = 0; d > 0 && i < n; i++) {
        if (i > 0 && q->per_stream && ops[i].res != ops[i - 1].res)
            qstart = i;
        if (u[i] < 0 || i - qstart < d)
            continue;
        const qop *src = &ops[i - d], *h = &ops[i];
        if (src->launch == h->launch || src->mend > h->lend)
            continue; /* the trace says the call did not wait for it */
        if (src->mend > h->lstart) {
            ana_queue_row *row = &q->rows[h->res];
            row->blocked_calls++;
            row->blocked_ns += (uint64_t)(src->mend - h->lstart);
            q->blocked_calls++;
            q->blocked_ns += (uint64_t)(src->mend - h->lstart);
        }
    }
}

/* A change of a queue's length. */
typedef struct qstep {
    int64_t t;
    int32_t res, delta;
} qstep;

static int
cmp_step(const void *pa, const void *pb)
{
    const qstep *a = pa, *b = pb;
    if (a->res != b->res)
        return (a->res > b->res) - (a->res < b->res);
    if (a->t != b->t)
        return (a->t > b->t) - (a->t < b->t);
    return (a->delta > b->delta) - (a->delta < b->delta); /* ends first */
}

/* Queue length over time per stream into the rows: max and time-weighted mean. */
static int
lengths(ana_collect *c, const qop *ops, size_t n)
{
    qstep *st = malloc((n ? 2 * n : 1) * sizeof *st);
    if (!st)
        return -1;
    for (size_t i = 0; i < n; i++) {
        st[2 * i] = (qstep){ops[i].lstart, ops[i].res, 1};
        st[2 * i + 1] =
            (qstep){ops[i].mend > ops[i].lstart ? ops[i].mend : ops[i].lstart, ops[i].res, -1};
    }
    qsort(st, 2 * n, sizeof *st, cmp_step);
    for (size_t i = 0, j; i < 2 * n; i = j) {
        ana_queue_row *row = &c->queue.rows[st[i].res];
        int64_t len = 0;
        double area = 0;
        for (j = i; j < 2 * n && st[j].res == st[i].res; j++) {
            if (j > i)
                area += (double)len * (double)(st[j].t - st[j - 1].t);
            len += st[j].delta;
            if (len > (int64_t)row->max_len)
                row->max_len = (uint64_t)len;
            row->ops += st[j].delta > 0;
        }
        row->window_ns = (uint64_t)(st[j - 1].t - st[i].t);
        row->mean_len = row->window_ns ? area / (double)row->window_ns : 0.0;
    }
    free(st);
    return 0;
}

int
ana_queue_compute(ana_collect *c)
{
    ana_queue_result *q = &c->queue;
    size_t n = 0;
    for (size_t i = 0; i < c->nops; i++)
        n += c->ops[i].api >= 0;
    qop *ops = malloc((n ? n : 1) * sizeof *ops);
    int32_t *u = malloc((n ? n : 1) * sizeof *u), *tmp = malloc((n ? n : 1) * sizeof *tmp);
    int64_t *heap = malloc((n ? n : 1) * sizeof *heap);
    q->rows = calloc(c->nstreams ? c->nstreams : 1, sizeof *q->rows);
    int rc = ops && u && tmp && heap && q->rows ? 0 : -1;
    if (rc == 0) {
        q->nrows = c->nstreams;
        for (size_t si = 0; si < c->nstreams; si++)
            q->rows[si].stream = c->stream_ids[si];
        n = 0;
        for (size_t i = 0; i < c->nops; i++) {
            const ana_op *o = &c->ops[i];
            if (o->api < 0)
                continue;
            const ana_api *a = &c->apis[o->api];
            ops[n++] = (qop){(int64_t)a->start,
                             (int64_t)a->end,
                             (int64_t)o->end,
                             o->api,
                             (int32_t)ana_stream_index(c, o->stream),
                             (int32_t)i,
                             a->cls == DPRO_API_CLASS_MEMCPY};
        }
        if (n)
            infer_depth(c, ops, n, u, tmp, heap);
        rc = lengths(c, ops, n);
    }
    free(ops);
    free(u);
    free(tmp);
    free(heap);
    return rc;
}

/* Members: depth (Q, 0: no backpressure seen), scope ("stream" | "device" | "none"),
 * long_calls, explained, launch_cost_us, long_us, blocked_calls, blocked_us,
 * streams[{stream, ops (launched), max_len, mean_len (time-weighted over window_us),
 * window_us, blocked_calls, blocked_us}]. */
void
ana_queue_json(json_writer *w, const ana_collect *c)
{
    const ana_queue_result *q = &c->queue;
    json_kv_int(w, "depth", q->depth);
    json_kv_string(w, "scope", !q->depth ? "none" : q->per_stream ? "stream" : "device");
    json_kv_int(w, "long_calls", q->long_calls);
    json_kv_int(w, "explained", q->explained);
    json_kv_double(w, "launch_cost_us", (double)q->launch_cost_ns / 1e3);
    json_kv_double(w, "long_us", (double)q->long_ns / 1e3);
    json_kv_uint(w, "blocked_calls", q->blocked_calls);
    json_kv_double(w, "blocked_us", (double)q->blocked_ns / 1e3);
    json_key(w, "streams");
    json_begin_array(w);
    for (size_t i = 0; i < q->nrows; i++) {
        const ana_queue_row *r = &q->rows[i];
        if (!r->ops)
            continue;
        json_begin_object(w);
        json_kv_uint(w, "stream", r->stream);
        json_kv_uint(w, "ops", r->ops);
        json_kv_uint(w, "max_len", r->max_len);
        json_kv_double(w, "mean_len", r->mean_len);
        json_kv_double(w, "window_us", (double)r->window_ns / 1e3);
        json_kv_uint(w, "blocked_calls", r->blocked_calls);
        json_kv_double(w, "blocked_us", (double)r->blocked_ns / 1e3);
        json_end_object(w);
    }
    json_end_array(w);
}

void
ana_queue_print(FILE *out, const ana_collect *c)
{
    const ana_queue_result *q = &c->queue;
    if (q->depth)
        fprintf(out,
                "  queue depth %d ops per %s (%d of %d long launch calls found it full); %" PRIu64
                " calls held %.3f ms by a full queue\n",
                q->depth, q->per_stream ? "stream" : "device", q->explained, q->long_calls,
                q->blocked_calls, q->blocked_ns / 1e6);
    else
        fprintf(out, "  no full launch queue seen (%d long launch calls; normal cost %.2f us)\n",
                q->long_calls, q->launch_cost_ns / 1e3);
    fprintf(out, "  %-10s %10s %8s %10s %12s %10s %12s\n", "stream", "launched", "max len",
            "mean len", "window ms", "held", "held ms");
    for (size_t i = 0; i < q->nrows; i++) {
        const ana_queue_row *r = &q->rows[i];
        if (!r->ops)
            continue;
        fprintf(out,
                "  %-10" PRIu64 " %10" PRIu64 " %8" PRIu64 " %10.2f %12.3f %10" PRIu64 " %12.3f\n",
                r->stream, r->ops, r->max_len, r->mean_len, r->window_ns / 1e6, r->blocked_calls,
                r->blocked_ns / 1e6);
    }
}
