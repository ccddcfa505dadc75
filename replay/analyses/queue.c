/* queue.c: launch queues (analyses.h): the queue length over time per stream, the queue
 * depth inferred as the replay infers it (replay/launch_queue.h, one implementation for
 * both: the same Q for the same trace), and the time launch calls were held by a full
 * queue. */
#include "ana_int.h"
#include "replay/launch_queue.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Charges the calls a full queue held to the rows of c->queue (lq as
 * launch_queue_infer left it): from the call's start until the op Q places earlier in
 * its queue ended, when that was within the call. */
static void
charge_blocked(ana_collect *c, const launch_queue *lq)
{
    ana_queue_result *q = &c->queue;
    for (size_t i = 0; lq->depth > 0 && i < lq->n; i++) {
        ptrdiff_t j = launch_queue_waited_for(lq, i);
        if (j < 0)
            continue;
        const launch_queue_op *src = &lq->ops[j], *h = &lq->ops[i];
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
lengths(ana_collect *c, const launch_queue_op *ops, size_t n)
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
    launch_queue_op *ops = malloc((n ? n : 1) * sizeof *ops);
    launch_queue lq = {0};
    q->rows = calloc(c->nstreams ? c->nstreams : 1, sizeof *q->rows);
    int rc = ops && q->rows ? 0 : -1;
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
            ops[n++] = (launch_queue_op){(int64_t)a->start,
                                         (int64_t)a->end,
                                         (int64_t)o->end,
                                         o->api,
                                         (int32_t)ana_stream_index(c, o->stream),
                                         (int32_t)i,
                                         a->cls == DPRO_API_CLASS_MEMCPY};
        }
        rc = launch_queue_infer(&lq, ops, n);
    }
    if (rc == 0) {
        q->depth = lq.depth;
        q->per_stream = lq.per_stream;
        q->long_calls = lq.long_calls;
        q->explained = lq.explained;
        q->launch_cost_ns = lq.launch_cost_ns;
        q->long_ns = lq.long_ns;
        charge_blocked(c, &lq);
        rc = lengths(c, ops, n);
    }
    launch_queue_free(&lq);
    free(ops);
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
