/* core_graph.c: the simulated device's graphs: stream capture, instantiation, launch. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>

#include "simgpu_internal.h"

/* ---- graphs (capture) --------------------------------------------------------------- */
#define GRAPH_MAGIC 0x47525048U
#define GEXEC_MAGIC 0x47455845U

struct simgpu_graph_exec {
    uint32_t magic;
    struct simgpu_graph *graph;
    struct simgpu_stream **aux; /* streams for slots 1.. */
    struct simgpu_event **ev;   /* events for the captured records */
    struct simgpu_event *fork, **join;
    uint64_t nmain; /* operations one launch puts on the launching stream */
    /* Launches enqueued and not expanded yet, and the stream of the last (g_lock):
     * cudaGraphExecDestroy waits for them. */
    int pending;
    struct simgpu_stream *last_stream;
};

static uint32_t g_next_graph_id = 1;

void
graph_append_locked(struct simgpu_graph *g, struct simgpu_op *op, int slot)
{
    op->cap_slot = slot;
    op->graph_node_id = ((uint64_t)g->id << 32) | (uint64_t)(g->nops + 1);
    op->next = NULL;
    if (g->tail)
        g->tail->next = op;
    else
        g->head = op;
    g->tail = op;
    g->nops++;
}

cudaError_t
simgpu_capture_begin(struct simgpu_stream *s, int mode)
{
    struct simgpu_graph *g;
    (void)mode;
    if (s->is_legacy)
        return cudaErrorStreamCaptureUnsupported;
    g = calloc(1, sizeof(*g));
    if (!g)
        return cudaErrorMemoryAllocation;
    pthread_mutex_lock(&g_lock);
    if (s->capture) {
        pthread_mutex_unlock(&g_lock);
        free(g);
        return cudaErrorIllegalState;
    }
    g->magic = GRAPH_MAGIC;
    g->id = g_next_graph_id++;
    g->nslots = 1;
    g->capturing = 1;
    g->origin = s;
    s->capture = g;
    s->capture_slot = 0;
    pthread_mutex_unlock(&g_lock);
    return cudaSuccess;
}

cudaError_t
simgpu_capture_end(struct simgpu_stream *s, struct simgpu_graph **out)
{
    struct simgpu_graph *g;
    pthread_mutex_lock(&g_lock);
    g = s->capture;
    if (!g || g->origin != s) {
        pthread_mutex_unlock(&g_lock);
        return cudaErrorIllegalState;
    }
    for (struct simgpu_stream *t = s->dev->streams; t; t = t->next_all)
        if (t->capture == g)
            t->capture = NULL;
    for (struct simgpu_event *e = g_events; e; e = e->next_all)
        if (e->cap_graph == g)
            e->cap_graph = NULL;
    g->capturing = 0;
    pthread_mutex_unlock(&g_lock);
    *out = g;
    return cudaSuccess;
}

int
simgpu_capture_status(struct simgpu_stream *s)
{
    int c;
    pthread_mutex_lock(&g_lock);
    c = s->capture != NULL;
    pthread_mutex_unlock(&g_lock);
    return c;
}

struct simgpu_graph *
simgpu_capture_graph(struct simgpu_stream *s)
{
    struct simgpu_graph *g;
    pthread_mutex_lock(&g_lock);
    g = s->capture;
    pthread_mutex_unlock(&g_lock);
    return g;
}

int
simgpu_graph_node_count(struct simgpu_graph *g)
{
    int n;
    pthread_mutex_lock(&g_lock);
    n = g->nops;
    pthread_mutex_unlock(&g_lock);
    return n;
}

struct simgpu_graph *
simgpu_graph_lookup(void *h)
{
    struct simgpu_graph *g = h;
    return g && g->magic == GRAPH_MAGIC ? g : NULL;
}

struct simgpu_graph_exec *
simgpu_graph_exec_lookup(void *h)
{
    struct simgpu_graph_exec *x = h;
    return x && x->magic == GEXEC_MAGIC ? x : NULL;
}

cudaError_t
simgpu_graph_instantiate(struct simgpu_graph_exec **out, struct simgpu_graph *g)
{
    struct simgpu_graph_exec *x = calloc(1, sizeof(*x));
    cudaError_t rc = cudaSuccess;
    if (!x)
        return cudaErrorMemoryAllocation;
    x->magic = GEXEC_MAGIC;
    x->graph = g;
    g->execs++;
    x->aux = calloc((size_t)g->nslots, sizeof(*x->aux));
    x->join = calloc((size_t)g->nslots, sizeof(*x->join));
    x->ev = calloc((size_t)g->nevents + 1, sizeof(*x->ev));
    if (!x->aux || !x->join || !x->ev)
        rc = cudaErrorMemoryAllocation;
    for (int i = 1; rc == cudaSuccess && i < g->nslots; i++) {
        rc = simgpu_stream_create(&x->aux[i], cudaStreamNonBlocking, 0);
        if (rc == cudaSuccess)
            rc = simgpu_event_create(&x->join[i], cudaEventDisableTiming);
    }
    for (int i = 0; rc == cudaSuccess && i < g->nevents; i++)
        rc = simgpu_event_create(&x->ev[i], 0);
    if (rc == cudaSuccess)
        rc = simgpu_event_create(&x->fork, cudaEventDisableTiming);
    /* What graph_steps_build puts on the launching stream: the fork's record, the ops of
     * slot 0 (not the waits for events recorded outside the capture), the joins' waits. */
    x->nmain = g->nslots > 1 ? (uint64_t)g->nslots : 0;
    for (const struct simgpu_op *t = g->head; t; t = t->next)
        if (t->cap_slot == 0 && !(t->kind == SIMGPU_OP_EVENT_WAIT && t->u.event.cap_index < 0))
            x->nmain++;
    if (rc != cudaSuccess) {
        simgpu_graph_exec_destroy(x);
        return rc;
    }
    *out = x;
    return cudaSuccess;
}

/* A fresh op for one launch of captured op t of graph g, with correlation id corr (custom
 * ops, such as NCCL's, get their own clone of their state, host functions that own their
 * argument a copy of it). NULL when out of memory. */
static struct simgpu_op *
graph_op_copy(const struct simgpu_graph *g, const struct simgpu_op *t, uint64_t corr)
{
    struct simgpu_op *op = simgpu_op_new(t->kind);
    if (!op)
        return NULL;
    op->u = t->u;
    op->corr = corr;
    op->graph_id = g->id;
    op->graph_node_id = t->graph_node_id;
    if (t->kind == SIMGPU_OP_CUSTOM) {
        op->u.custom.inst = t->u.custom.ops->clone(t->u.custom.inst);
        if (!op->u.custom.inst) {
            free(op);
            return NULL;
        }
    }
    if (t->kind == SIMGPU_OP_HOST_FN && t->u.host.arg_bytes) {
        op->u.host.arg = malloc(t->u.host.arg_bytes);
        if (!op->u.host.arg) {
            free(op);
            return NULL;
        }
        memcpy(op->u.host.arg, t->u.host.arg, t->u.host.arg_bytes);
    }
    return op;
}

/* Replays x on s op by op through the public enqueue paths: used when s is being
 * captured, so that the replay is recorded into that capture as before. */
static cudaError_t
graph_launch_each(struct simgpu_graph_exec *x, struct simgpu_stream *s)
{
    struct simgpu_graph *g = x->graph;
    cudaError_t rc = cudaSuccess;
    uint32_t corr = simgpu_current_corr();
    if (g->nslots > 1) {
        rc = simgpu_event_record(x->fork, s);
        for (int i = 1; rc == cudaSuccess && i < g->nslots; i++)
            rc = simgpu_stream_wait_event(x->aux[i], x->fork);
    }
    for (struct simgpu_op *t = g->head; rc == cudaSuccess && t; t = t->next) {
        struct simgpu_stream *target = t->cap_slot ? x->aux[t->cap_slot] : s;
        struct simgpu_op *op;
        if (t->kind == SIMGPU_OP_EVENT_RECORD) {
            rc = simgpu_event_record(x->ev[t->u.event.cap_index], target);
            continue;
        }
        if (t->kind == SIMGPU_OP_EVENT_WAIT) {
            if (t->u.event.cap_index >= 0)
                rc = simgpu_stream_wait_event(target, x->ev[t->u.event.cap_index]);
            continue;
        }
        op = graph_op_copy(g, t, corr);
        if (!op)
            return cudaErrorMemoryAllocation;
        rc = simgpu_enqueue(target, op);
    }
    for (int i = 1; rc == cudaSuccess && i < g->nslots; i++) {
        rc = simgpu_event_record(x->join[i], x->aux[i]);
        if (rc == cudaSuccess)
            rc = simgpu_stream_wait_event(s, x->join[i]);
    }
    return rc;
}

/* One device-side operation of a graph launch: op goes to stream s.  For an event
 * wait, wait is the event whose last record op must follow (the op is dropped when
 * that record has already run or there is none); for an event record, op->u.event.ev
 * is the event it records. */
struct launch_step {
    struct simgpu_stream *s;
    struct simgpu_op *op; /* NULL once enqueued */
    struct simgpu_event *wait;
};

/* Appends an event record (rec) or wait (wait) step on s to st[*n]; returns 0 or -1
 * when out of memory. */
static int
step_event(struct launch_step *st, int *n, struct simgpu_stream *s, struct simgpu_event *rec,
           struct simgpu_event *wait)
{
    struct simgpu_op *op = simgpu_op_new(rec ? SIMGPU_OP_EVENT_RECORD : SIMGPU_OP_EVENT_WAIT);
    if (!op)
        return -1;
    op->u.event.ev = rec;
    st[*n].s = s;
    st[*n].op = op;
    st[*n].wait = wait;
    (*n)++;
    return 0;
}

/* Builds, without g_lock, every operation one launch of x on s (correlation id corr)
 * enqueues, in the order the per-op replay would enqueue them: the fork (record on s,
 * waits on the branch streams), the captured ops on their streams, the joins.  st holds
 * at least nops + 3 * nslots entries; *n counts the steps built, also on failure. */
static cudaError_t
graph_steps_build(struct simgpu_graph_exec *x, struct simgpu_stream *s, uint32_t corr,
                  struct launch_step *st, int *n)
{
    struct simgpu_graph *g = x->graph;
    *n = 0;
    if (g->nslots > 1) {
        if (step_event(st, n, s, x->fork, NULL))
            return cudaErrorMemoryAllocation;
        for (int i = 1; i < g->nslots; i++)
            if (step_event(st, n, x->aux[i], NULL, x->fork))
                return cudaErrorMemoryAllocation;
    }
    for (struct simgpu_op *t = g->head; t; t = t->next) {
        struct simgpu_stream *target = t->cap_slot ? x->aux[t->cap_slot] : s;
        struct simgpu_op *op;
        if (t->kind == SIMGPU_OP_EVENT_RECORD) {
            if (step_event(st, n, target, x->ev[t->u.event.cap_index], NULL))
                return cudaErrorMemoryAllocation;
            continue;
        }
        if (t->kind == SIMGPU_OP_EVENT_WAIT) {
            if (t->u.event.cap_index >= 0 &&
                step_event(st, n, target, NULL, x->ev[t->u.event.cap_index]))
                return cudaErrorMemoryAllocation;
            continue;
        }
        op = graph_op_copy(g, t, corr);
        if (!op)
            return cudaErrorMemoryAllocation;
        st[*n].s = target;
        st[*n].op = op;
        st[*n].wait = NULL;
        (*n)++;
    }
    for (int i = 1; i < g->nslots; i++)
        if (step_event(st, n, x->aux[i], x->join[i], NULL) ||
            step_event(st, n, s, NULL, x->join[i]))
            return cudaErrorMemoryAllocation;
    return cudaSuccess;
}

/* Enqueues one step at host time now, as simgpu_enqueue, simgpu_event_record and
 * simgpu_stream_wait_event would outside a capture (its worker runs it once g_lock is
 * released); sets st->op to NULL when the op was enqueued.  Caller holds g_lock. */
static cudaError_t
step_enqueue_locked(struct launch_step *st, uint64_t now)
{
    struct simgpu_op *op = st->op;
    struct simgpu_event *ev = op->kind == SIMGPU_OP_EVENT_RECORD ? op->u.event.ev : NULL;
    cudaError_t rc = st->s->dev->sticky;
    if (rc != cudaSuccess)
        return rc;
    if (st->wait) {
        const struct simgpu_event *w = st->wait;
        if (!w->stream || w->stream->done_seq >= w->seq)
            return cudaSuccess; /* nothing to wait for */
        if (op_add_dep(op, w->stream, w->seq))
            return cudaErrorMemoryAllocation;
    }
    rc = enqueue_at_locked(st->s, op, now);
    if (rc != cudaSuccess)
        return rc;
    if (ev) {
        ev->cap_graph = NULL;
        ev->stream = st->s;
        ev->seq = op->seq;
        ev->pending++;
    }
    st->op = NULL;
    return cudaSuccess;
}

/* Places step st, an op of the launching stream s, at its sequence number seq behind
 * *last (the ops that replace the launch, first in *first), enqueued at host time now:
 * a wait gets its dependency, a record its event.  Caller holds g_lock. */
static cudaError_t
step_place_locked(struct launch_step *st, uint64_t seq, uint64_t now, struct simgpu_op **first,
                  struct simgpu_op **last)
{
    struct simgpu_op *op = st->op;
    const struct simgpu_event *w = st->wait;
    if (w && w->stream && w->stream->done_seq < w->seq && op_add_dep(op, w->stream, w->seq))
        return cudaErrorMemoryAllocation;
    op->seq = seq;
    op->enqueue_ns = now;
    op->next = NULL;
    if (op->kind == SIMGPU_OP_EVENT_RECORD && op->u.event.ev) {
        struct simgpu_event *ev = op->u.event.ev;
        ev->cap_graph = NULL;
        ev->stream = st->s;
        ev->seq = seq;
        ev->pending++;
    }
    if (*last)
        (*last)->next = op;
    else
        *first = op;
    *last = op;
    st->op = NULL;
    return cudaSuccess;
}

void
graph_expand_locked(struct simgpu_stream *s, struct simgpu_op *op)
{
    struct simgpu_graph_exec *x = op->u.graph.exec;
    struct simgpu_graph *g = x->graph;
    struct launch_step *st;
    struct simgpu_op *first = NULL, *last = NULL;
    uint64_t seq = op->seq, end_seq = op->seq + x->nmain - 1;
    cudaError_t rc = cudaErrorMemoryAllocation;
    int n = 0, i;
    pthread_mutex_unlock(&g_lock);
    st = malloc(((size_t)g->nops + 3 * (size_t)g->nslots) * sizeof(*st));
    if (st)
        rc = graph_steps_build(x, s, op->corr, st, &n);
    pthread_mutex_lock(&g_lock);
    /* In program order: a wait finds the record it follows already placed. */
    for (i = 0; rc == cudaSuccess && i < n; i++) {
        if (st[i].s != s)
            rc = step_enqueue_locked(&st[i], op->enqueue_ns);
        else if (seq <= end_seq)
            rc = step_place_locked(&st[i], seq++, op->enqueue_ns, &first, &last);
    }
    if (rc != cudaSuccess && s->dev->sticky == cudaSuccess)
        __atomic_store_n(&s->dev->sticky, rc, __ATOMIC_RELEASE);
    /* The launch's last sequence number ends what was placed (an op that waits for
     * nothing when the graph could not be built), so that waiters for it find it. */
    if (!last || last->seq != end_seq) {
        struct simgpu_op *tailop = simgpu_op_new(SIMGPU_OP_EVENT_WAIT);
        if (tailop) {
            struct launch_step t = {s, tailop, NULL};
            step_place_locked(&t, end_seq, op->enqueue_ns, &first, &last);
        }
    }
    if (last) {
        last->next = op->next;
        if (s->tail == op)
            s->tail = last;
        s->head = first;
    } else { /* no memory for even that: the launch's numbers are skipped */
        s->head = op->next;
        if (!s->head)
            s->tail = NULL;
    }
    for (i = 0; st && i < n; i++)
        if (st[i].op)
            op_free(st[i].op);
    free(st);
    x->pending--;
    op_free(op);
}

/* Launches x on s like one CUDA graph submission: one operation on s, stamped with the
 * host time of the launch, holding the sequence numbers of the graph's operations on s;
 * whoever reaches it at s's head (the worker, a waiter) expands it into the graph's
 * operations (graph_expand_locked), so that the launch costs the host one enqueue
 * whatever the graph's size.  Nodes follow each other on the device with no per-node
 * launch gap, and the first may start as soon as the launch is submitted.  Device order
 * and the fork/join dependencies are those of the per-op replay; no SYNCHRONIZATION
 * records are made for the graph's internal event waits (no cudaStreamWaitEvent is
 * called).  A launch into a stream being captured is replayed op by op into that
 * capture. */
cudaError_t
simgpu_graph_launch(struct simgpu_graph_exec *x, struct simgpu_stream *s)
{
    struct simgpu_op *op;
    int wake = 0, capturing;
    cudaError_t rc;
    if (x->nmain == 0)
        return cudaSuccess; /* an empty graph */
    op = simgpu_op_new(SIMGPU_OP_GRAPH);
    if (!op)
        return cudaErrorMemoryAllocation;
    op->u.graph.exec = x;
    pthread_mutex_lock(&g_lock);
    capturing = s->capture != NULL;
    rc = s->dev->sticky;
    if (!capturing && rc == cudaSuccess)
        rc = enqueue_span_locked(s, op, x->nmain, &wake);
    if (!capturing && rc == cudaSuccess) {
        x->pending++;
        x->last_stream = s;
    }
    pthread_mutex_unlock(&g_lock);
    /* After the unlock, so that the worker does not wake into a held lock. */
    if (wake)
        pthread_cond_signal(&s->work_cv);
    if (capturing || rc != cudaSuccess)
        op_free(op);
    return capturing ? graph_launch_each(x, s) : rc;
}

static void
graph_free(struct simgpu_graph *g)
{
    struct simgpu_op *op = g->head;
    struct simgpu_graph_hold *h = g->holds;
    while (op) {
        struct simgpu_op *next = op->next;
        op_free(op);
        op = next;
    }
    while (h) {
        struct simgpu_graph_hold *next = h->next;
        h->release(h->obj, h->count);
        free(h);
        h = next;
    }
    free(g);
}

cudaError_t
simgpu_graph_hold(struct simgpu_graph *g, void (*release)(void *, unsigned), void *obj,
                  unsigned count)
{
    struct simgpu_graph_hold *h = calloc(1, sizeof(*h));
    if (!h)
        return cudaErrorMemoryAllocation;
    h->release = release;
    h->obj = obj;
    h->count = count;
    pthread_mutex_lock(&g_lock);
    h->next = g->holds;
    g->holds = h;
    pthread_mutex_unlock(&g_lock);
    return cudaSuccess;
}

cudaError_t
simgpu_graph_destroy(struct simgpu_graph *g)
{
    g->magic = 0;
    g->destroyed = 1;
    if (g->execs == 0)
        graph_free(g);
    return cudaSuccess;
}

cudaError_t
simgpu_graph_exec_destroy(struct simgpu_graph_exec *x)
{
    struct simgpu_graph *g = x->graph;
    /* Launches not expanded yet read x: wait until every stream of their device has
     * reached them (the last launch's stream first; earlier ones may be elsewhere). */
    pthread_mutex_lock(&g_lock);
    if (x->pending)
        wait_done_locked(x->last_stream, x->last_stream->tail_seq);
    for (struct simgpu_stream *t = x->pending ? x->last_stream->dev->streams : NULL;
         x->pending && t; t = t->next_all)
        wait_done_locked(t, t->tail_seq);
    pthread_mutex_unlock(&g_lock);
    for (int i = 1; x->aux && i < g->nslots; i++) {
        if (x->aux[i])
            simgpu_stream_destroy(x->aux[i]);
        if (x->join && x->join[i])
            simgpu_event_destroy(x->join[i]);
    }
    for (int i = 0; x->ev && i < g->nevents; i++)
        if (x->ev[i])
            simgpu_event_destroy(x->ev[i]);
    if (x->fork)
        simgpu_event_destroy(x->fork);
    free(x->aux);
    free(x->join);
    free(x->ev);
    x->magic = 0;
    free(x);
    if (--g->execs == 0 && g->destroyed)
        graph_free(g);
    return cudaSuccess;
}
