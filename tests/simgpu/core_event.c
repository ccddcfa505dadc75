/* core_event.c: the simulated device's events (record, wait, query, sync, elapsed time)
 * and the host's stream and device synchronisation, stream queries. */
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

#define EVENT_MAGIC 0x4556544eU /* "EVTN" */

static uint32_t g_next_event_id = 1;

/* ---- events ----------------------------------------------------------------------------- */
cudaError_t
simgpu_event_create(struct simgpu_event **out, unsigned flags)
{
    struct simgpu_event *ev;
    if (flags & ~(unsigned)(cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess))
        return cudaErrorInvalidValue;
    ev = calloc(1, sizeof(*ev));
    if (!ev)
        return cudaErrorMemoryAllocation;
    ev->magic = EVENT_MAGIC;
    ev->flags = flags;
    pthread_mutex_lock(&g_lock);
    ev->id = g_next_event_id++;
    ev->next_all = g_events;
    g_events = ev;
    pthread_mutex_unlock(&g_lock);
    *out = ev;
    return cudaSuccess;
}

static struct simgpu_event *
event_lookup_locked(const void *h)
{
    for (struct simgpu_event *e = g_events; e; e = e->next_all)
        if (e == h)
            return e;
    return NULL;
}

struct simgpu_event *
simgpu_event_lookup(cudaEvent_t h)
{
    struct simgpu_event *e;
    if (!h)
        return NULL;
    pthread_mutex_lock(&g_lock);
    e = event_lookup_locked(h);
    pthread_mutex_unlock(&g_lock);
    return e;
}

cudaError_t
simgpu_event_destroy(struct simgpu_event *ev)
{
    struct simgpu_event **pp;
    pthread_mutex_lock(&g_lock);
    for (pp = &g_events; *pp && *pp != ev; pp = &(*pp)->next_all)
        ;
    if (!*pp) {
        pthread_mutex_unlock(&g_lock);
        return cudaErrorInvalidResourceHandle;
    }
    *pp = ev->next_all;
    ev->magic = 0;
    ev->destroyed = 1;
    event_maybe_free_locked(ev);
    pthread_mutex_unlock(&g_lock);
    return cudaSuccess;
}

uint32_t
simgpu_event_id(const struct simgpu_event *ev)
{
    return ev ? ev->id : 0;
}

cudaError_t
simgpu_event_record(struct simgpu_event *ev, struct simgpu_stream *s)
{
    struct simgpu_op *op = simgpu_op_new(SIMGPU_OP_EVENT_RECORD);
    cudaError_t rc;
    int wake = 0;
    if (!op)
        return cudaErrorMemoryAllocation;
    op->u.event.ev = ev;
    pthread_mutex_lock(&g_lock);
    if (s->capture) {
        struct simgpu_graph *g = s->capture;
        ev->cap_graph = g;
        ev->cap_index = g->nevents++;
        op->u.event.ev = NULL;
        op->u.event.cap_index = ev->cap_index;
        graph_append_locked(g, op, s->capture_slot);
        pthread_mutex_unlock(&g_lock);
        return cudaSuccess;
    }
    rc = s->dev->sticky;
    if (rc == cudaSuccess)
        rc = enqueue_nowake_locked(s, op, simgpu_now_ns(), &wake);
    if (rc == cudaSuccess) {
        ev->cap_graph = NULL;
        ev->stream = s;
        ev->seq = op->seq;
        ev->pending++;
        /* On an idle stream the record runs here: the worker need not wake for it. */
        if (wake && launch_inline_locked(s, op))
            wake = 0;
    }
    pthread_mutex_unlock(&g_lock);
    if (wake)
        pthread_cond_signal(&s->work_cv);
    if (rc != cudaSuccess)
        op_free(op);
    return rc;
}

cudaError_t
simgpu_stream_wait_event(struct simgpu_stream *s, struct simgpu_event *ev)
{
    struct simgpu_op *op;
    cudaError_t rc = cudaSuccess;
    uint64_t t0 = simgpu_now_ns();
    int wake = 0;
    pthread_mutex_lock(&g_lock);
    if (ev->cap_graph && ev->cap_graph->capturing) {
        /* Fork/join inside a capture: s joins the capture. */
        struct simgpu_graph *g = ev->cap_graph;
        if (!s->capture) {
            s->capture = g;
            s->capture_slot = g->nslots++;
        }
        op = simgpu_op_new(SIMGPU_OP_EVENT_WAIT);
        if (!op) {
            pthread_mutex_unlock(&g_lock);
            return cudaErrorMemoryAllocation;
        }
        op->u.event.cap_index = ev->cap_index;
        graph_append_locked(s->capture, op, s->capture_slot);
        pthread_mutex_unlock(&g_lock);
        return cudaSuccess;
    }
    if (s->capture || !ev->stream || ev->stream->done_seq >= ev->seq) {
        /* Never recorded, already complete, or recorded outside a capture that s
         * is in: nothing to wait for. */
        pthread_mutex_unlock(&g_lock);
        return cudaSuccess;
    }
    op = simgpu_op_new(SIMGPU_OP_EVENT_WAIT);
    if (!op || op_add_dep(op, ev->stream, ev->seq)) {
        pthread_mutex_unlock(&g_lock);
        free(op);
        return cudaErrorMemoryAllocation;
    }
    rc = s->dev->sticky;
    if (rc == cudaSuccess)
        rc = enqueue_nowake_locked(s, op, simgpu_now_ns(), &wake);
    /* On an idle stream, once the event's work has run, the wait runs here. */
    if (rc == cudaSuccess && wake && launch_inline_locked(s, op))
        wake = 0;
    pthread_mutex_unlock(&g_lock);
    if (wake)
        pthread_cond_signal(&s->work_cv);
    if (rc != cudaSuccess)
        op_free(op);
    simgpu_cupti_sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT, t0, simgpu_now_ns(), s,
                      ev, rc);
    return rc;
}

/* 1 when ev's last record has completed (or it has none), completing the ops in flight
 * of its stream that have ended; caller holds g_lock. */
static int
event_done_locked(struct simgpu_event *ev)
{
    if (!ev->stream)
        return 1;
    stream_settle_locked(ev->stream, simgpu_now_ns());
    return ev->stream->done_seq >= ev->seq;
}

cudaError_t
simgpu_event_query(struct simgpu_event *ev)
{
    cudaError_t rc = cudaSuccess;
    pthread_mutex_lock(&g_lock);
    if (!event_done_locked(ev))
        rc = cudaErrorNotReady;
    pthread_mutex_unlock(&g_lock);
    return rc;
}

cudaError_t
simgpu_event_sync(struct simgpu_event *ev)
{
    cudaError_t rc = cudaSuccess;
    uint64_t t0 = simgpu_now_ns();
    pthread_mutex_lock(&g_lock);
    if (ev->stream) {
        wait_done_locked(ev->stream, ev->seq);
        rc = ev->stream->dev->sticky;
    }
    pthread_mutex_unlock(&g_lock);
    simgpu_cupti_sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE, t0, simgpu_now_ns(),
                      NULL, ev, rc);
    return rc;
}

cudaError_t
simgpu_event_elapsed(float *ms, struct simgpu_event *a, struct simgpu_event *b)
{
    cudaError_t rc = cudaSuccess;
    pthread_mutex_lock(&g_lock);
    if ((a->flags & cudaEventDisableTiming) || (b->flags & cudaEventDisableTiming) || !a->stream ||
        !b->stream)
        rc = cudaErrorInvalidResourceHandle;
    else if (!event_done_locked(a) || !event_done_locked(b))
        rc = cudaErrorNotReady;
    else
        *ms = (float)(((double)b->time_ns - (double)a->time_ns) / 1e6);
    pthread_mutex_unlock(&g_lock);
    return rc;
}

/* ---- host synchronisation ----------------------------------------------------------- */
cudaError_t
simgpu_stream_sync(struct simgpu_stream *s)
{
    cudaError_t rc;
    uint64_t t0 = simgpu_now_ns();
    pthread_mutex_lock(&g_lock);
    if (s->is_legacy) {
        /* Like a marker on the legacy stream: waits for the blocking streams too. */
        struct simgpu_stream *t;
        uint64_t n = 0, *targets;
        for (t = s->dev->streams; t; t = t->next_all)
            n++;
        targets = calloc(n, sizeof(*targets));
        n = 0;
        for (t = s->dev->streams; t; t = t->next_all, n++)
            if (targets)
                targets[n] = (t == s || !(t->flags & cudaStreamNonBlocking)) ? t->tail_seq : 0;
        n = 0;
        for (t = s->dev->streams; t; t = t->next_all, n++)
            if (targets)
                wait_done_locked(t, targets[n]);
        free(targets);
    }
    wait_done_locked(s, s->tail_seq);
    rc = s->dev->sticky;
    pthread_mutex_unlock(&g_lock);
    simgpu_cupti_sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, t0, simgpu_now_ns(),
                      s, NULL, rc);
    return rc;
}

cudaError_t
simgpu_device_sync(void)
{
    struct simgpu_device *d;
    cudaError_t rc;
    uint64_t t0 = simgpu_now_ns();
    simgpu_init();
    pthread_mutex_lock(&g_lock);
    d = device_locked(t_dev);
    /* Until every stream is idle at one instant: waits for a busy one's last op, then
     * looks at all again. */
    for (;;) {
        struct simgpu_stream *busy = NULL;
        for (struct simgpu_stream *s = d->streams; s && !busy; s = s->next_all)
            if (s->done_seq < s->tail_seq)
                busy = s;
        if (!busy)
            break;
        wait_done_locked(busy, busy->tail_seq);
    }
    rc = d->sticky;
    pthread_mutex_unlock(&g_lock);
    simgpu_cupti_sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE, t0, simgpu_now_ns(),
                      NULL, NULL, rc);
    return rc;
}

/* ---- stream queries ------------------------------------------------------------------ */
cudaError_t
simgpu_stream_query(struct simgpu_stream *s)
{
    cudaError_t rc;
    pthread_mutex_lock(&g_lock);
    stream_settle_locked(s, simgpu_now_ns());
    rc = s->dev->sticky;
    if (rc == cudaSuccess && s->done_seq < s->tail_seq)
        rc = cudaErrorNotReady;
    pthread_mutex_unlock(&g_lock);
    return rc;
}

unsigned
simgpu_stream_flags(const struct simgpu_stream *s)
{
    return s->flags;
}

int
simgpu_stream_priority(const struct simgpu_stream *s)
{
    return s->priority;
}

uint32_t
simgpu_stream_id(const struct simgpu_stream *s)
{
    return s ? s->id : 0;
}

int
simgpu_stream_device(const struct simgpu_stream *s)
{
    return s->dev->index;
}
