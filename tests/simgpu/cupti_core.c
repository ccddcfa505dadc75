/* cupti_core.c: the CUPTI side of the simulated device: correlation ids, API
 * callbacks for the one subscriber, activity records staged in our own memory and
 * delivered into the client's buffers by a delivery thread (every
 * SIMGPU_CUPTI_DELIVER_MS or cuptiActivityFlushPeriod) or by cuptiActivityFlushAll.
 * A record of a device op is deliverable once the device clock has passed the op's end,
 * as real CUPTI completes a kernel's record only after the kernel ran (the stream worker
 * times an op, and stages its record, ahead of its end behind a queue).
 * Records are the real structs of cupti_activity.h; timestamps are CLOCK_MONOTONIC
 * nanoseconds. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "simgpu_internal.h"

#define MAX_KINDS 64
#define CHUNK_BYTES (1u << 20)
#define EXT_DEPTH 64

struct CUpti_Subscriber_st {
    CUpti_CallbackFunc cb;
    void *userdata;
    unsigned char rt[CUPTI_RUNTIME_TRACE_CBID_SIZE];
    unsigned char drv[CUPTI_DRIVER_TRACE_CBID_SIZE];
    unsigned char domain[CUPTI_CB_DOMAIN_SIZE]; /* other domains: whole-domain switch */
};

struct chunk {
    struct chunk *next;
    size_t used;
    unsigned char data[CHUNK_BYTES];
};

/* What precedes each staged record in a chunk: when it may be delivered. */
struct staged_head {
    uint64_t due_ns; /* CLOCK_MONOTONIC; the op's end for a device record */
};

static atomic_uint g_corr_next = 1;
static atomic_uint g_grid_next = 1;
static atomic_int g_kind_on[MAX_KINDS];
static atomic_int g_latency_on;
static atomic_int g_tid_system;
static struct CUpti_Subscriber_st *_Atomic g_sub;
static pthread_mutex_t g_sub_lock = PTHREAD_MUTEX_INITIALIZER;

static pthread_mutex_t g_stage_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_stage_cv;
static struct chunk *g_stage_head, *g_stage_tail;
static size_t g_staged_bytes, g_dropped;
static CUpti_BuffersCallbackRequestFunc g_req;
static CUpti_BuffersCallbackCompleteFunc g_done;
static int g_deliver_started;
static uint64_t g_period_ms;
static pthread_mutex_t g_deliver_lock = PTHREAD_MUTEX_INITIALIZER;
/* The client buffer CUPTI holds while records accumulate: real CUPTI asks for a buffer
 * when a record needs room, fills it and completes it when full or flushed, so a client
 * that has seen records always has a buffer out, and Kineto relies on that: at stop it
 * calls cuptiActivityFlushAll only while it has handed out a buffer (with none out it
 * reports no GPU activity).  Our delivery completes buffers every period, so the next
 * one is requested at once (hold_buffer), and a delivery fills the held one first. */
static pthread_mutex_t g_held_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t *g_held_buf;
static size_t g_held_size;
static CUpti_BuffersCallbackCompleteFunc g_held_done; /* the client it came from */
static atomic_int g_held_set;
static atomic_int g_torn_down; /* the runtime's exit teardown ran: records are gone */

/* Per-API activity record switches (cuptiActivityEnableRuntimeApi/DriverApi): 0 follows
 * the kind, 1 on, 2 off; [0] runtime, [1] driver. */
#define MAX_CBID 1024
static _Atomic unsigned char g_api_on[2][MAX_CBID];
static __thread uint32_t t_corr;
static __thread uint64_t t_ext[CUPTI_EXTERNAL_CORRELATION_KIND_SIZE][EXT_DEPTH];
static __thread int t_ext_depth[CUPTI_EXTERNAL_CORRELATION_KIND_SIZE];

static uint32_t
thread_id(void)
{
    if (atomic_load(&g_tid_system))
        return (uint32_t)syscall(SYS_gettid);
    return (uint32_t)(uintptr_t)pthread_self();
}

CUptiResult
simgpu_cupti_api_enable(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, int on)
{
    int d = domain == CUPTI_CB_DOMAIN_DRIVER_API ? 1 : 0;
    if ((domain != CUPTI_CB_DOMAIN_DRIVER_API && domain != CUPTI_CB_DOMAIN_RUNTIME_API) ||
        cbid == 0 || cbid >= MAX_CBID ||
        cbid >= (d ? CUPTI_DRIVER_TRACE_CBID_SIZE : CUPTI_RUNTIME_TRACE_CBID_SIZE))
        return CUPTI_ERROR_INVALID_PARAMETER;
    atomic_store(&g_api_on[d][cbid], on ? 1 : 2);
    return CUPTI_SUCCESS;
}

/* Whether an API record of kind (RUNTIME or DRIVER) and cbid is collected. */
static int
api_record_on(CUpti_ActivityKind kind, CUpti_CallbackId cbid)
{
    int d = kind == CUPTI_ACTIVITY_KIND_DRIVER ? 1 : 0;
    unsigned char st =
        cbid < MAX_CBID ? atomic_load_explicit(&g_api_on[d][cbid], memory_order_relaxed) : 0;
    return st == 1 || (st == 0 && simgpu_cupti_enabled(kind));
}

uint32_t
simgpu_current_corr(void)
{
    return t_corr;
}

int
simgpu_cupti_enabled(CUpti_ActivityKind kind)
{
    return (unsigned)kind < MAX_KINDS &&
           atomic_load_explicit(&g_kind_on[kind], memory_order_relaxed);
}

int
simgpu_cupti_latency_on(void)
{
    return atomic_load(&g_latency_on);
}

size_t
simgpu_cupti_record_size(CUpti_ActivityKind kind)
{
    switch (kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        return sizeof(CUpti_ActivityKernel10);
    case CUPTI_ACTIVITY_KIND_MEMCPY:
        return sizeof(CUpti_ActivityMemcpy6);
    case CUPTI_ACTIVITY_KIND_MEMSET:
        return sizeof(CUpti_ActivityMemset4);
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER:
        return sizeof(CUpti_ActivityAPI);
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
        return sizeof(CUpti_ActivitySynchronization2);
    case CUPTI_ACTIVITY_KIND_MEMORY2:
        return sizeof(CUpti_ActivityMemory4);
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
        return sizeof(CUpti_ActivityExternalCorrelation);
    case CUPTI_ACTIVITY_KIND_DEVICE:
        return sizeof(CUpti_ActivityDevice5);
    default:
        return 0;
    }
}

/* ---- staging and delivery ---------------------------------------------------------- */
/* Asks the registered client for the buffer the next delivery fills first, unless one is
 * held already.  Runs the client's callback without g_stage_lock held. */
static void
hold_buffer(void)
{
    CUpti_BuffersCallbackRequestFunc req;
    CUpti_BuffersCallbackCompleteFunc done;
    pthread_mutex_lock(&g_held_lock);
    pthread_mutex_lock(&g_stage_lock);
    req = g_req;
    done = g_done;
    pthread_mutex_unlock(&g_stage_lock);
    if (!atomic_load(&g_held_set) && req && !atomic_load(&g_torn_down)) {
        uint8_t *buf = NULL;
        size_t size = 0, maxrec = 0;
        req(&buf, &size, &maxrec);
        if (buf && size) {
            g_held_buf = buf;
            g_held_size = size;
            g_held_done = done;
            atomic_store(&g_held_set, 1);
        }
    }
    pthread_mutex_unlock(&g_held_lock);
}

/* Takes the held client buffer (NULL when none) and the completion callback of the client
 * it came from; the caller fills and completes it. */
static uint8_t *
take_held_buffer(size_t *size, CUpti_BuffersCallbackCompleteFunc *owner)
{
    uint8_t *buf;
    pthread_mutex_lock(&g_held_lock);
    buf = g_held_buf;
    *size = g_held_size;
    *owner = g_held_done;
    g_held_buf = NULL;
    g_held_size = 0;
    g_held_done = NULL;
    atomic_store(&g_held_set, 0);
    pthread_mutex_unlock(&g_held_lock);
    return buf;
}

void
simgpu_cupti_emit(const void *record, size_t size, uint64_t due_ns)
{
    int wake = 0, stored = 0;
    struct staged_head head = {due_ns};
    size = sizeof(head) + ((size + 7) & ~(size_t)7);
    pthread_mutex_lock(&g_stage_lock);
    if (g_staged_bytes + size > simgpu_cfg.cupti_limit_bytes) {
        g_dropped++;
    } else {
        if (!g_stage_tail || g_stage_tail->used + size > CHUNK_BYTES) {
            struct chunk *c = malloc(sizeof(*c));
            if (!c) {
                g_dropped++;
                pthread_mutex_unlock(&g_stage_lock);
                return;
            }
            c->next = NULL;
            c->used = 0;
            if (g_stage_tail) {
                g_stage_tail->next = c;
                wake = 1;
            } else {
                g_stage_head = c;
            }
            g_stage_tail = c;
        }
        memcpy(g_stage_tail->data + g_stage_tail->used, &head, sizeof(head));
        memcpy(g_stage_tail->data + g_stage_tail->used + sizeof(head), record, size - sizeof(head));
        g_stage_tail->used += size;
        g_staged_bytes += size;
        stored = g_req != NULL;
    }
    if (wake)
        pthread_cond_signal(&g_stage_cv);
    pthread_mutex_unlock(&g_stage_lock);
    if (stored && !atomic_load_explicit(&g_held_set, memory_order_relaxed))
        hold_buffer();
}

/* The client's buffer a delivery is filling. */
struct client_buf {
    uint8_t *buf;
    size_t size, used;
    CUpti_BuffersCallbackRequestFunc req;
    CUpti_BuffersCallbackCompleteFunc done;
};

/* Copies one record of sz bytes (8-byte multiple) into the client's buffer b: completes a
 * buffer that is full and fills the held one or a newly requested one next; counts a drop
 * when there is none with room.  Runs client callbacks; the caller holds g_deliver_lock
 * only. */
static void
client_put(struct client_buf *b, const void *r, size_t sz)
{
    if (b->buf && b->used + sz > b->size) {
        b->done(NULL, 0, b->buf, b->size, b->used);
        b->buf = NULL;
    }
    if (!b->buf) {
        CUpti_BuffersCallbackCompleteFunc owner;
        size_t maxrec = 0;
        b->buf = take_held_buffer(&b->size, &owner);
        if (b->buf && owner != b->done) {
            /* held for a client that has registered other callbacks since */
            if (owner)
                owner(NULL, 0, b->buf, b->size, 0);
            b->buf = NULL;
        }
        if (!b->buf && b->req) {
            b->size = 0;
            b->req(&b->buf, &b->size, &maxrec);
        }
        b->used = 0;
        if (b->buf && ((uintptr_t)b->buf & 7)) {
            /* CUPTI wants 8-byte aligned buffers; skip to alignment. */
            size_t pad = 8 - ((uintptr_t)b->buf & 7);
            b->used = pad < b->size ? pad : b->size;
        }
    }
    if (!b->buf || b->used + sz > b->size || !b->done) {
        pthread_mutex_lock(&g_stage_lock);
        g_dropped++;
        pthread_mutex_unlock(&g_stage_lock);
    } else {
        memcpy(b->buf + b->used, r, sz);
        b->used += sz;
    }
}

/* Delivers the records of chunk c that are due at `now` (CLOCK_MONOTONIC) into b and
 * keeps the others in c, in their order, at its start.  Returns the bytes kept
 * (c->used). */
static size_t
deliver_chunk(struct chunk *c, uint64_t now, struct client_buf *b)
{
    size_t off = 0, kept = 0;
    while (off + sizeof(struct staged_head) < c->used) {
        struct staged_head head;
        const CUpti_Activity *r = (const CUpti_Activity *)(c->data + off + sizeof(head));
        size_t sz = (simgpu_cupti_record_size(r->kind) + 7) & ~(size_t)7;
        if (!sz)
            break;
        memcpy(&head, c->data + off, sizeof(head));
        if (head.due_ns <= now) {
            client_put(b, r, sz);
        } else {
            memmove(c->data + kept, c->data + off, sizeof(head) + sz);
            kept += sizeof(head) + sz;
        }
        off += sizeof(head) + sz;
    }
    c->used = kept;
    return kept;
}

/* Records staged in chunk c. */
static size_t
chunk_records(const struct chunk *c)
{
    size_t off = 0, n = 0;
    while (off + sizeof(struct staged_head) < c->used) {
        const CUpti_Activity *r =
            (const CUpti_Activity *)(c->data + off + sizeof(struct staged_head));
        size_t sz = (simgpu_cupti_record_size(r->kind) + 7) & ~(size_t)7;
        if (!sz)
            break;
        off += sizeof(struct staged_head) + sz;
        n++;
    }
    return n;
}

/* Moves every staged record that is due (its op ended on the device clock) into client
 * buffers and completes them; records not due yet stay staged, before those staged
 * meanwhile, and count in the staging limit throughout.  After the teardown the staged
 * records are discarded and counted as dropped.  Serialised by g_deliver_lock; client
 * callbacks run without g_stage_lock held. */
static void
deliver(void)
{
    struct chunk *c, *kept_head = NULL, *kept_tail = NULL;
    struct client_buf b = {0};
    size_t kept = 0, taken, lost = 0;
    uint64_t now;

    pthread_mutex_lock(&g_deliver_lock);
    pthread_mutex_lock(&g_stage_lock);
    /* read with the client: a client registered later gets records due after this */
    now = simgpu_now_ns();
    c = g_stage_head;
    g_stage_head = g_stage_tail = NULL;
    taken = g_staged_bytes; /* still counted until delivered or freed */
    b.req = g_req;
    b.done = g_done;
    pthread_mutex_unlock(&g_stage_lock);
    while (c) {
        struct chunk *next = c->next;
        /* after the teardown nothing is delivered any more */
        if (!atomic_load(&g_torn_down) && deliver_chunk(c, now, &b) > 0) {
            kept += c->used;
            c->next = NULL;
            if (kept_tail)
                kept_tail->next = c;
            else
                kept_head = c;
            kept_tail = c;
        } else {
            if (atomic_load(&g_torn_down))
                lost += chunk_records(c);
            free(c);
        }
        c = next;
    }
    if (b.buf && b.done)
        b.done(NULL, 0, b.buf, b.size, b.used);
    pthread_mutex_lock(&g_stage_lock);
    if (kept_head) {
        kept_tail->next = g_stage_head;
        g_stage_head = kept_head;
        if (!g_stage_tail)
            g_stage_tail = kept_tail;
    }
    g_staged_bytes -= taken - kept;
    g_dropped += lost;
    pthread_mutex_unlock(&g_stage_lock);
    pthread_mutex_unlock(&g_deliver_lock);
    /* As real CUPTI, which completes a buffer when it is full or flushed and then holds
     * the next one, the client holds a buffer again once records have flowed. */
    if (b.buf)
        hold_buffer();
}

static void *
deliver_thread(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "simgpu-cupti"); /* tests/simgpu/thread_cpu.py */
    for (;;) {
        struct timespec ts;
        uint64_t ms;
        pthread_mutex_lock(&g_stage_lock);
        ms = g_period_ms ? g_period_ms : simgpu_cfg.cupti_deliver_ms;
        if (ms == 0)
            ms = 200;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += (time_t)(ms / 1000);
        ts.tv_nsec += (long)(ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&g_stage_cv, &g_stage_lock, &ts);
        pthread_mutex_unlock(&g_stage_lock);
        deliver();
    }
    return NULL;
}

CUptiResult
simgpu_cupti_register(CUpti_BuffersCallbackRequestFunc req, CUpti_BuffersCallbackCompleteFunc done)
{
    CUpti_BuffersCallbackCompleteFunc old_done;
    uint8_t *old_buf;
    size_t old_size = 0;
    simgpu_init();
    if (!req || !done)
        return CUPTI_ERROR_INVALID_PARAMETER;
    /* A buffer held for the previous client goes back to it, empty. */
    pthread_mutex_lock(&g_deliver_lock);
    old_buf = take_held_buffer(&old_size, &old_done);
    if (old_buf && old_done)
        old_done(NULL, 0, old_buf, old_size, 0);
    pthread_mutex_lock(&g_stage_lock);
    g_req = req;
    g_done = done;
    if (!g_deliver_started) {
        pthread_condattr_t ca;
        pthread_attr_t at;
        pthread_t th;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&g_stage_cv, &ca);
        pthread_condattr_destroy(&ca);
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&th, &at, deliver_thread, NULL) == 0)
            g_deliver_started = 1;
        pthread_attr_destroy(&at);
    }
    pthread_mutex_unlock(&g_stage_lock);
    pthread_mutex_unlock(&g_deliver_lock);
    return CUPTI_SUCCESS;
}

/* Both flushes deliver the records that are complete (their op ended on the device
 * clock), as the default one of real CUPTI does; a forced one of real CUPTI also hands out
 * the records of work still running, their times not filled in, which the stand-in keeps
 * for a later delivery instead.  Neither waits for the device. */
CUptiResult
simgpu_cupti_flush(uint32_t flag)
{
    (void)flag;
    if (!g_req)
        return CUPTI_SUCCESS;
    deliver();
    return CUPTI_SUCCESS;
}

CUptiResult
simgpu_cupti_flush_period(uint32_t ms)
{
    pthread_mutex_lock(&g_stage_lock);
    g_period_ms = ms;
    pthread_mutex_unlock(&g_stage_lock);
    return CUPTI_SUCCESS;
}

size_t
simgpu_cupti_dropped_take(void)
{
    size_t n;
    pthread_mutex_lock(&g_stage_lock);
    n = g_dropped;
    g_dropped = 0;
    pthread_mutex_unlock(&g_stage_lock);
    return n;
}

/* One DEVICE record per device, as CUPTI gives them when the kind is enabled: the
 * properties cudaGetDeviceProperties reports (the name lives as long as the process). */
static void
emit_devices(void)
{
    static char names[16][256];
    for (int dev = 0; dev < simgpu_cfg.device_count && dev < 16; dev++) {
        struct cudaDeviceProp p;
        CUpti_ActivityDevice5 r;
        simgpu_device_props(&p, dev);
        memset(&r, 0, sizeof(r));
        snprintf(names[dev], sizeof(names[dev]), "%s", p.name);
        r.kind = CUPTI_ACTIVITY_KIND_DEVICE;
        r.globalMemorySize = p.totalGlobalMem;
        r.l2CacheSize = (uint32_t)p.l2CacheSize;
        r.numThreadsPerWarp = (uint32_t)p.warpSize;
        r.numMemcpyEngines = (uint32_t)p.asyncEngineCount;
        r.numMultiprocessors = (uint32_t)p.multiProcessorCount;
        r.maxThreadsPerBlock = (uint32_t)p.maxThreadsPerBlock;
        r.computeCapabilityMajor = (uint32_t)p.major;
        r.computeCapabilityMinor = (uint32_t)p.minor;
        r.id = (uint32_t)dev;
        memcpy(r.uuid.bytes, p.uuid.bytes, sizeof(r.uuid.bytes));
        r.name = names[dev];
        r.isCudaVisible = 1;
        simgpu_cupti_emit(&r, sizeof(r), 0);
    }
}

CUptiResult
simgpu_cupti_activity_enable(CUpti_ActivityKind kind, int on)
{
    simgpu_init();
    if (on && simgpu_cfg.cupti_busy)
        return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    if ((unsigned)kind >= MAX_KINDS || kind == CUPTI_ACTIVITY_KIND_INVALID)
        return CUPTI_ERROR_INVALID_KIND;
    if (on && !simgpu_cupti_record_size(kind))
        return CUPTI_ERROR_NOT_COMPATIBLE;
    atomic_store(&g_kind_on[kind], on);
    if (on && kind == CUPTI_ACTIVITY_KIND_DEVICE)
        emit_devices();
    return CUPTI_SUCCESS;
}

CUptiResult
simgpu_cupti_latency_timestamps(int on)
{
    atomic_store(&g_latency_on, on);
    return CUPTI_SUCCESS;
}

CUptiResult
simgpu_cupti_thread_id_type(int set, CUpti_ActivityThreadIdType *type)
{
    if (!type)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (set)
        atomic_store(&g_tid_system, *type == CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
    else
        *type = atomic_load(&g_tid_system) ? CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM
                                           : CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT;
    return CUPTI_SUCCESS;
}

/* ---- external correlation ------------------------------------------------------------ */
CUptiResult
simgpu_cupti_push_external(CUpti_ExternalCorrelationKind kind, uint64_t id)
{
    if ((unsigned)kind >= CUPTI_EXTERNAL_CORRELATION_KIND_SIZE ||
        kind == CUPTI_EXTERNAL_CORRELATION_KIND_INVALID)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (t_ext_depth[kind] >= EXT_DEPTH)
        return CUPTI_ERROR_OUT_OF_MEMORY;
    t_ext[kind][t_ext_depth[kind]++] = id;
    return CUPTI_SUCCESS;
}

CUptiResult
simgpu_cupti_pop_external(CUpti_ExternalCorrelationKind kind, uint64_t *id)
{
    if ((unsigned)kind >= CUPTI_EXTERNAL_CORRELATION_KIND_SIZE ||
        kind == CUPTI_EXTERNAL_CORRELATION_KIND_INVALID)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (t_ext_depth[kind] == 0)
        return CUPTI_ERROR_QUEUE_EMPTY;
    t_ext_depth[kind]--;
    if (id)
        *id = t_ext[kind][t_ext_depth[kind]];
    return CUPTI_SUCCESS;
}

/* ---- callbacks --------------------------------------------------------------------------- */
CUptiResult
simgpu_cupti_subscribe(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc cb, void *userdata)
{
    struct CUpti_Subscriber_st *s;
    simgpu_init();
    if (!sub)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (simgpu_cfg.cupti_busy)
        return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    pthread_mutex_lock(&g_sub_lock);
    if (atomic_load(&g_sub)) {
        pthread_mutex_unlock(&g_sub_lock);
        return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    }
    s = calloc(1, sizeof(*s));
    if (!s) {
        pthread_mutex_unlock(&g_sub_lock);
        return CUPTI_ERROR_OUT_OF_MEMORY;
    }
    s->cb = cb;
    s->userdata = userdata;
    atomic_store(&g_sub, s);
    pthread_mutex_unlock(&g_sub_lock);
    *sub = s;
    return CUPTI_SUCCESS;
}

CUptiResult
simgpu_cupti_unsubscribe(CUpti_SubscriberHandle sub)
{
    pthread_mutex_lock(&g_sub_lock);
    if (!sub || atomic_load(&g_sub) != sub) {
        pthread_mutex_unlock(&g_sub_lock);
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    atomic_store(&g_sub, NULL);
    pthread_mutex_unlock(&g_sub_lock);
    /* Not freed: a callback may be running on another thread right now. */
    return CUPTI_SUCCESS;
}

static unsigned char *
cb_slot(struct CUpti_Subscriber_st *s, CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API)
        return cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE ? &s->rt[cbid] : NULL;
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API)
        return cbid < CUPTI_DRIVER_TRACE_CBID_SIZE ? &s->drv[cbid] : NULL;
    return (unsigned)domain < CUPTI_CB_DOMAIN_SIZE ? &s->domain[domain] : NULL;
}

CUptiResult
simgpu_cupti_enable_callback(uint32_t on, CUpti_SubscriberHandle sub, CUpti_CallbackDomain domain,
                             CUpti_CallbackId cbid)
{
    unsigned char *slot;
    if (!sub || sub != atomic_load(&g_sub))
        return CUPTI_ERROR_INVALID_PARAMETER;
    slot = cb_slot(sub, domain, cbid);
    if (!slot)
        return CUPTI_ERROR_INVALID_PARAMETER;
    *slot = on != 0;
    return CUPTI_SUCCESS;
}

CUptiResult
simgpu_cupti_enable_domain(uint32_t on, CUpti_SubscriberHandle sub, CUpti_CallbackDomain domain)
{
    if (!sub || sub != atomic_load(&g_sub) || (unsigned)domain >= CUPTI_CB_DOMAIN_SIZE ||
        domain == CUPTI_CB_DOMAIN_INVALID)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API)
        memset(sub->rt, on != 0, sizeof(sub->rt));
    else if (domain == CUPTI_CB_DOMAIN_DRIVER_API)
        memset(sub->drv, on != 0, sizeof(sub->drv));
    else
        sub->domain[domain] = on != 0;
    return CUPTI_SUCCESS;
}

CUptiResult
simgpu_cupti_get_callback_state(uint32_t *on, CUpti_SubscriberHandle sub,
                                CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
    unsigned char *slot;
    if (!on || !sub || sub != atomic_load(&g_sub))
        return CUPTI_ERROR_INVALID_PARAMETER;
    slot = cb_slot(sub, domain, cbid);
    if (!slot)
        return CUPTI_ERROR_INVALID_PARAMETER;
    *on = *slot;
    return CUPTI_SUCCESS;
}

/* A fake CUcontext per device: what cuCtxGetCurrent returns and callbacks carry. */
static char g_ctx_tokens[SIMGPU_MAX_DEVICES];

CUcontext
simgpu_context(int dev)
{
    if (dev < 0 || dev >= SIMGPU_MAX_DEVICES)
        return NULL;
    return (CUcontext)(void *)&g_ctx_tokens[dev];
}

static void
api_callback(struct simgpu_api *a, CUpti_ApiCallbackSite site, void *ret)
{
    struct CUpti_Subscriber_st *s = atomic_load(&g_sub);
    unsigned char *slot;
    CUpti_CallbackData d;
    int dev;
    if (!s || !s->cb)
        return;
    slot = cb_slot(s, a->domain, a->cbid);
    if (!slot || !*slot)
        return;
    dev = simgpu_current_device();
    memset(&d, 0, sizeof(d));
    d.callbackSite = site;
    d.functionName = a->name;
    d.functionParams = a->params;
    d.functionReturnValue = ret;
    d.symbolName = a->symbol;
    d.context = simgpu_context(dev);
    d.contextUid = (uint32_t)dev + 1;
    d.correlationData = &a->corr_data;
    d.correlationId = a->corr;
    s->cb(s->userdata, a->domain, a->cbid, &d);
}

void
simgpu_api_enter(struct simgpu_api *a, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                 const char *name, const void *params, const char *symbol)
{
    simgpu_init();
    a->domain = domain;
    a->cbid = cbid;
    a->name = name;
    a->params = params;
    a->symbol = symbol;
    a->corr = atomic_fetch_add(&g_corr_next, 1);
    a->saved_corr = t_corr;
    a->corr_data = 0;
    t_corr = a->corr;
    a->start_ns = simgpu_now_ns();
    api_callback(a, CUPTI_API_ENTER, NULL);
}

void
simgpu_api_exit(struct simgpu_api *a, int *ret)
{
    CUpti_ActivityKind kind = a->domain == CUPTI_CB_DOMAIN_DRIVER_API ? CUPTI_ACTIVITY_KIND_DRIVER
                                                                      : CUPTI_ACTIVITY_KIND_RUNTIME;
    api_callback(a, CUPTI_API_EXIT, ret);
    if (api_record_on(kind, a->cbid)) {
        CUpti_ActivityAPI r;
        memset(&r, 0, sizeof(r));
        r.kind = kind;
        r.cbid = a->cbid;
        r.start = simgpu_cupti_ts(a->start_ns);
        r.end = simgpu_cupti_ts(simgpu_now_ns());
        r.processId = (uint32_t)getpid();
        r.threadId = thread_id();
        r.correlationId = a->corr;
        r.returnValue = (uint32_t)*ret;
        simgpu_cupti_emit(&r, sizeof(r), 0);
    }
    if (simgpu_cupti_enabled(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION)) {
        for (int k = 1; k < CUPTI_EXTERNAL_CORRELATION_KIND_SIZE; k++) {
            CUpti_ActivityExternalCorrelation r;
            if (!t_ext_depth[k])
                continue;
            memset(&r, 0, sizeof(r));
            r.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
            r.externalKind = (CUpti_ExternalCorrelationKind)k;
            r.externalId = t_ext[k][t_ext_depth[k] - 1];
            r.correlationId = a->corr;
            simgpu_cupti_emit(&r, sizeof(r), 0);
        }
    }
    t_corr = a->saved_corr;
}

/* ---- device-side records -------------------------------------------------------------- */
void
simgpu_cupti_op_done(const struct simgpu_op *op, const struct simgpu_stream *s, uint64_t start_ns,
                     uint64_t end_ns)
{
    uint32_t dev = (uint32_t)simgpu_stream_device(s);
    switch (op->kind) {
    case SIMGPU_OP_KERNEL:
    case SIMGPU_OP_CUSTOM: {
        CUpti_ActivityKernel10 r;
        CUpti_ActivityKind kind;
        if (simgpu_cupti_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL))
            kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
        else if (simgpu_cupti_enabled(CUPTI_ACTIVITY_KIND_KERNEL))
            kind = CUPTI_ACTIVITY_KIND_KERNEL;
        else
            return;
        memset(&r, 0, sizeof(r));
        r.kind = kind;
        r.registersPerThread = 32;
        r.start = simgpu_cupti_ts(start_ns);
        r.end = simgpu_cupti_ts(end_ns);
        r.completed = simgpu_cupti_ts(end_ns);
        r.deviceId = dev;
        r.contextId = dev + 1;
        r.streamId = simgpu_stream_id(s);
        if (op->kind == SIMGPU_OP_KERNEL) {
            r.gridX = (int32_t)op->u.kernel.grid.x;
            r.gridY = (int32_t)op->u.kernel.grid.y;
            r.gridZ = (int32_t)op->u.kernel.grid.z;
            r.blockX = (int32_t)op->u.kernel.block.x;
            r.blockY = (int32_t)op->u.kernel.block.y;
            r.blockZ = (int32_t)op->u.kernel.block.z;
            r.dynamicSharedMemory = (int32_t)op->u.kernel.shmem;
            r.name = op->u.kernel.name;
        } else {
            r.gridX = 2;
            r.gridY = r.gridZ = 1;
            r.blockX = 640;
            r.blockY = r.blockZ = 1;
            r.name = op->u.custom.name;
        }
        r.correlationId = op->corr;
        r.gridId = (int64_t)atomic_fetch_add(&g_grid_next, 1);
        if (simgpu_cupti_latency_on()) {
            r.queued = simgpu_cupti_ts(op->enqueue_ns);
            r.submitted = simgpu_cupti_ts(op->enqueue_ns);
        }
        r.launchType = CUPTI_ACTIVITY_LAUNCH_TYPE_REGULAR;
        r.graphNodeId = op->graph_id ? op->graph_node_id : 0;
        r.graphId = op->graph_id;
        r.clusterX = r.clusterY = r.clusterZ = 1;
        simgpu_cupti_emit(&r, sizeof(r), end_ns);
        break;
    }
    case SIMGPU_OP_MEMCPY: {
        CUpti_ActivityMemcpy6 r;
        if (!simgpu_cupti_enabled(CUPTI_ACTIVITY_KIND_MEMCPY))
            return;
        memset(&r, 0, sizeof(r));
        r.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
        r.copyKind = (uint8_t)op->u.memcpy.copy_kind;
        r.srcKind = (uint8_t)op->u.memcpy.src_kind;
        r.dstKind = (uint8_t)op->u.memcpy.dst_kind;
        r.flags = op->u.memcpy.async ? CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC : 0;
        r.bytes = op->u.memcpy.bytes;
        r.start = simgpu_cupti_ts(start_ns);
        r.end = simgpu_cupti_ts(end_ns);
        r.deviceId = dev;
        r.contextId = dev + 1;
        r.streamId = simgpu_stream_id(s);
        r.correlationId = op->corr;
        r.graphNodeId = op->graph_id ? op->graph_node_id : 0;
        r.graphId = op->graph_id;
        r.copyCount = 1;
        simgpu_cupti_emit(&r, sizeof(r), end_ns);
        break;
    }
    case SIMGPU_OP_MEMSET: {
        CUpti_ActivityMemset4 r;
        if (!simgpu_cupti_enabled(CUPTI_ACTIVITY_KIND_MEMSET))
            return;
        memset(&r, 0, sizeof(r));
        r.kind = CUPTI_ACTIVITY_KIND_MEMSET;
        r.value = (uint32_t)op->u.memset.value;
        r.bytes = op->u.memset.bytes;
        r.start = simgpu_cupti_ts(start_ns);
        r.end = simgpu_cupti_ts(end_ns);
        r.deviceId = dev;
        r.contextId = dev + 1;
        r.streamId = simgpu_stream_id(s);
        r.correlationId = op->corr;
        r.flags = op->u.memset.async ? CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC : 0;
        r.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
        r.graphNodeId = op->graph_id ? op->graph_node_id : 0;
        r.graphId = op->graph_id;
        simgpu_cupti_emit(&r, sizeof(r), end_ns);
        break;
    }
    default:
        break;
    }
}

void
simgpu_cupti_sync(CUpti_ActivitySynchronizationType type, uint64_t start_ns, uint64_t end_ns,
                  const struct simgpu_stream *s, const struct simgpu_event *ev, cudaError_t rc)
{
    CUpti_ActivitySynchronization2 r;
    if (!simgpu_cupti_enabled(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION))
        return;
    memset(&r, 0, sizeof(r));
    r.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    r.type = type;
    r.start = simgpu_cupti_ts(start_ns);
    r.end = simgpu_cupti_ts(end_ns);
    r.correlationId = t_corr;
    r.contextId = (uint32_t)simgpu_current_device() + 1;
    r.streamId = s ? simgpu_stream_id(s) : CUPTI_SYNCHRONIZATION_INVALID_VALUE;
    r.cudaEventId = ev ? simgpu_event_id(ev) : CUPTI_SYNCHRONIZATION_INVALID_VALUE;
    r.cudaEventSyncId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
    r.returnValue = (uint32_t)rc;
    simgpu_cupti_emit(&r, sizeof(r), 0);
}

void
simgpu_cupti_memory(int alloc, const void *p, size_t bytes, int memkind,
                    const struct simgpu_stream *s)
{
    CUpti_ActivityMemory4 r;
    if (!simgpu_cupti_enabled(CUPTI_ACTIVITY_KIND_MEMORY2))
        return;
    memset(&r, 0, sizeof(r));
    r.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
    r.memoryOperationType = alloc ? CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION
                                  : CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
    r.memoryKind = (CUpti_ActivityMemoryKind)memkind;
    r.correlationId = t_corr;
    r.address = (uint64_t)(uintptr_t)p;
    r.bytes = bytes;
    r.timestamp = simgpu_cupti_ts(simgpu_now_ns());
    r.processId = (uint32_t)getpid();
    r.deviceId = (uint32_t)simgpu_current_device();
    r.contextId = r.deviceId + 1;
    r.streamId = s ? simgpu_stream_id(s) : 0;
    r.isAsync = s != NULL;
    r.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID;
    simgpu_cupti_emit(&r, sizeof(r), 0);
}

void
simgpu_cupti_teardown(void)
{
    struct CUpti_Subscriber_st *s = atomic_load(&g_sub);
    for (int dev = 0; dev < simgpu_cfg.device_count; dev++) {
        unsigned char *slot = s && s->cb ? cb_slot(s, CUPTI_CB_DOMAIN_RESOURCE, 0) : NULL;
        if (!slot || !*slot)
            continue;
        CUpti_ResourceData d;
        memset(&d, 0, sizeof(d));
        d.context = simgpu_context(dev);
        s->cb(s->userdata, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING,
              &d);
    }
    atomic_store(&g_torn_down, 1);
}
