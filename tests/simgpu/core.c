/* core.c: the simulated device: configuration, streams and their workers, events,
 * host synchronisation, memory, the kernel registry.  See simgpu_internal.h for
 * the model. */
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

#define STREAM_MAGIC 0x5354524dU /* "STRM" */
#define EVENT_MAGIC 0x4556544eU  /* "EVTN" */

struct simgpu_device;

struct simgpu_stream {
    uint32_t magic;
    struct simgpu_device *dev;
    uint32_t id;
    unsigned flags;
    int priority;
    int is_legacy;
    int destroyed;
    int worker_started;
    struct simgpu_op *head, *tail;
    uint64_t tail_seq; /* last op enqueued */
    uint64_t done_seq; /* last op completed */
    uint64_t last_end; /* device end time of the last completed op */
    uint64_t done_end[SIMGPU_END_RING];
    struct simgpu_graph *capture; /* graph being captured into, or NULL */
    int capture_slot;
    struct simgpu_stream *next_all;
};

struct simgpu_event {
    uint32_t magic;
    uint32_t id;
    unsigned flags;
    int destroyed;
    int pending;                    /* record ops not yet run */
    struct simgpu_stream *stream;   /* stream of the last record, NULL if none */
    uint64_t seq;                   /* op of the last record */
    uint64_t time_ns;               /* device time of the last record */
    struct simgpu_graph *cap_graph; /* recorded during a capture */
    int cap_index;
    struct simgpu_event *next_all;
};

struct simgpu_alloc {
    uintptr_t base;
    size_t bytes;
    int kind; /* CUPTI memory kind */
    int dev;
};

struct simgpu_device {
    int index;
    int inited;
    cudaError_t sticky;
    struct simgpu_stream *legacy;
    struct simgpu_stream *streams; /* all, including the legacy stream */
    uint32_t next_stream_id;
    size_t mem_in_use, mem_peak;
    atomic_int running_kernels;
};

struct simgpu_config simgpu_cfg;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static struct simgpu_device g_dev[SIMGPU_MAX_DEVICES];
static struct simgpu_event *g_events;
static uint32_t g_next_event_id = 1;
static struct simgpu_alloc *g_allocs;
static size_t g_nallocs, g_cap_allocs;

static __thread int t_dev;
static __thread struct simgpu_stream *t_ptds[SIMGPU_MAX_DEVICES];
static __thread int t_next_dur_set;
static __thread uint64_t t_next_dur;

/* ---- configuration, clock ------------------------------------------------------ */
static double
env_double(const char *name, double dflt)
{
    const char *v = getenv(name);
    char *end;
    double d;
    if (!v || !*v)
        return dflt;
    d = strtod(v, &end);
    return end == v ? dflt : d;
}

/* fork: the device lock is held across it, so that a child forked while another thread
 * is inside a call does not inherit the lock taken (as a fork-safe runtime would). */
static void
fork_prepare(void)
{
    pthread_mutex_lock(&g_lock);
}

static void
fork_release(void)
{
    pthread_mutex_unlock(&g_lock);
}

static void
init_once(void)
{
    pthread_atfork(fork_prepare, fork_release, fork_release);
    int n = (int)env_double("SIMGPU_DEVICE_COUNT", 0);
    if (n <= 0)
        n = (int)env_double("LOCAL_WORLD_SIZE", 1);
    if (n <= 0)
        n = 1;
    if (n > SIMGPU_MAX_DEVICES)
        n = SIMGPU_MAX_DEVICES;
    simgpu_cfg.device_count = n;
    simgpu_cfg.launch_ns = (uint64_t)(env_double("SIMGPU_LAUNCH_US", 4) * 1000);
    simgpu_cfg.default_kernel_ns = (uint64_t)(env_double("SIMGPU_DEFAULT_KERNEL_US", 10) * 1000);
    simgpu_cfg.slowdown = env_double("SIMGPU_SLOWDOWN", 1.0);
    if (simgpu_cfg.slowdown <= 0)
        simgpu_cfg.slowdown = 1.0;
    simgpu_cfg.contention = env_double("SIMGPU_CONTENTION", 0);
    simgpu_cfg.h2d_gbps = env_double("SIMGPU_H2D_GBPS", 25);
    simgpu_cfg.d2d_gbps = env_double("SIMGPU_D2D_GBPS", 1500);
    simgpu_cfg.mem_bytes = (uint64_t)(env_double("SIMGPU_MEM_GB", 80) * 1e9);
    simgpu_cfg.cupti_busy = (int)env_double("SIMGPU_CUPTI_BUSY", 0);
    simgpu_cfg.cupti_limit_bytes = (uint64_t)(env_double("SIMGPU_CUPTI_LIMIT_MB", 64) * 1048576);
    simgpu_cfg.cupti_deliver_ms = (uint64_t)env_double("SIMGPU_CUPTI_DELIVER_MS", 200);
}

void
simgpu_init(void)
{
    pthread_once(&g_once, init_once);
}

uint64_t
simgpu_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void
simgpu_sleep_until(uint64_t deadline_ns)
{
    struct timespec ts;
    ts.tv_sec = (time_t)(deadline_ns / 1000000000ULL);
    ts.tv_nsec = (long)(deadline_ns % 1000000000ULL);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

void
simgpu_spin_ns(uint64_t ns)
{
    uint64_t end = simgpu_now_ns() + ns;
    while (simgpu_now_ns() < end)
        ;
}

/* ---- devices --------------------------------------------------------------------- */
static struct simgpu_stream *
stream_alloc(struct simgpu_device *d, unsigned flags, int prio)
{
    struct simgpu_stream *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->magic = STREAM_MAGIC;
    s->dev = d;
    s->flags = flags;
    s->priority = prio;
    s->id = d->next_stream_id++;
    s->next_all = d->streams;
    d->streams = s;
    return s;
}

/* Returns device `i`, initialised; caller holds g_lock. */
static struct simgpu_device *
device_locked(int i)
{
    struct simgpu_device *d = &g_dev[i];
    static int teardown_registered;
    if (!teardown_registered && getenv("SIMGPU_TEARDOWN_AT_EXIT")) {
        teardown_registered = 1;
        atexit(simgpu_cupti_teardown);
    }
    if (!d->inited) {
        d->index = i;
        d->inited = 1;
        /* CUPTI's stream ids are unique in a process: device i's are offset by 1000 i
         * (device 0: legacy 7, others from 13). */
        d->next_stream_id = SIMGPU_LEGACY_STREAM_ID + 1000u * (uint32_t)i;
        d->legacy = stream_alloc(d, 0, 0);
        if (d->legacy)
            d->legacy->is_legacy = 1;
        d->next_stream_id = 13 + 1000u * (uint32_t)i;
    }
    return d;
}

int
simgpu_current_device(void)
{
    simgpu_init();
    return t_dev;
}

cudaError_t
simgpu_set_device(int dev)
{
    simgpu_init();
    if (dev < 0 || dev >= simgpu_cfg.device_count)
        return cudaErrorInvalidDevice;
    t_dev = dev;
    return cudaSuccess;
}

cudaError_t
simgpu_sticky_error(void)
{
    cudaError_t rc;
    simgpu_init();
    pthread_mutex_lock(&g_lock);
    rc = device_locked(t_dev)->sticky;
    pthread_mutex_unlock(&g_lock);
    return rc;
}

void
simgpu_device_props(struct cudaDeviceProp *p, int dev)
{
    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof(p->name), "simgpu H100 (simulated)");
    for (int i = 0; i < 16; i++)
        p->uuid.bytes[i] = (char)(0x51 + i + dev);
    p->totalGlobalMem = simgpu_cfg.mem_bytes;
    p->sharedMemPerBlock = 49152;
    p->regsPerBlock = 65536;
    p->warpSize = 32;
    p->memPitch = 2147483647;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = 1024;
    p->maxThreadsDim[1] = 1024;
    p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 2147483647;
    p->maxGridSize[1] = 65535;
    p->maxGridSize[2] = 65535;
    p->totalConstMem = 65536;
    p->major = 9;
    p->minor = 0;
    p->textureAlignment = 512;
    p->multiProcessorCount = 132;
    p->integrated = 0;
    p->canMapHostMemory = 1;
    p->concurrentKernels = 1;
    p->pciBusID = 0x18 + dev;
    p->asyncEngineCount = 2;
    p->unifiedAddressing = 1;
    p->memoryBusWidth = 5120;
    p->l2CacheSize = 52428800;
    p->maxThreadsPerMultiProcessor = 2048;
    p->sharedMemPerMultiprocessor = 233472;
    p->regsPerMultiprocessor = 65536;
    p->managedMemory = 1;
    p->multiGpuBoardGroupID = dev;
    p->sharedMemPerBlockOptin = 232448;
}

cudaError_t
simgpu_device_attr(int *value, enum cudaDeviceAttr attr, int dev)
{
    struct cudaDeviceProp p;
    if (dev < 0 || dev >= simgpu_cfg.device_count)
        return cudaErrorInvalidDevice;
    simgpu_device_props(&p, dev);
    switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock:
        *value = p.maxThreadsPerBlock;
        break;
    case cudaDevAttrMaxSharedMemoryPerBlock:
        *value = (int)p.sharedMemPerBlock;
        break;
    case cudaDevAttrWarpSize:
        *value = p.warpSize;
        break;
    case cudaDevAttrMultiProcessorCount:
        *value = p.multiProcessorCount;
        break;
    case cudaDevAttrComputeCapabilityMajor:
        *value = p.major;
        break;
    case cudaDevAttrComputeCapabilityMinor:
        *value = p.minor;
        break;
    case cudaDevAttrConcurrentKernels:
        *value = 1;
        break;
    case cudaDevAttrPciBusId:
        *value = p.pciBusID;
        break;
    case cudaDevAttrPciDeviceId:
        *value = 0;
        break;
    case cudaDevAttrPciDomainId:
        *value = 0;
        break;
    case cudaDevAttrMaxThreadsPerMultiProcessor:
        *value = p.maxThreadsPerMultiProcessor;
        break;
    case cudaDevAttrL2CacheSize:
        *value = p.l2CacheSize;
        break;
    case cudaDevAttrGlobalMemoryBusWidth:
        *value = p.memoryBusWidth;
        break;
    case cudaDevAttrMemoryClockRate:
        *value = 2619000;
        break;
    case cudaDevAttrClockRate:
        *value = 1980000;
        break;
    case cudaDevAttrUnifiedAddressing:
        *value = 1;
        break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor:
        *value = (int)p.sharedMemPerMultiprocessor;
        break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
        *value = (int)p.sharedMemPerBlockOptin;
        break;
    case cudaDevAttrMemoryPoolsSupported:
        *value = 1;
        break;
    case cudaDevAttrAsyncEngineCount:
        *value = p.asyncEngineCount;
        break;
    case cudaDevAttrIntegrated:
        *value = 0;
        break;
    case cudaDevAttrCanMapHostMemory:
        *value = 1;
        break;
    case cudaDevAttrManagedMemory:
        *value = 1;
        break;
    case cudaDevAttrMaxRegistersPerBlock:
        *value = p.regsPerBlock;
        break;
    case cudaDevAttrMaxRegistersPerMultiprocessor:
        *value = p.regsPerMultiprocessor;
        break;
    default:
        return cudaErrorInvalidValue;
    }
    return cudaSuccess;
}

/* ---- operations and workers --------------------------------------------------------- */
struct simgpu_op *
simgpu_op_new(enum simgpu_op_kind kind)
{
    struct simgpu_op *op = calloc(1, sizeof(*op));
    if (!op)
        return NULL;
    op->kind = kind;
    op->corr = simgpu_current_corr();
    return op;
}

static void
op_free(struct simgpu_op *op)
{
    if (op->kind == SIMGPU_OP_CUSTOM && op->u.custom.ops->release)
        op->u.custom.ops->release(op->u.custom.inst);
    free(op->deps);
    free(op);
}

/* Adds a dependency on (s, seq) to op; returns 0 or -1 when out of memory. */
static int
op_add_dep(struct simgpu_op *op, struct simgpu_stream *s, uint64_t seq)
{
    struct simgpu_dep *d = realloc(op->deps, (size_t)(op->ndeps + 1) * sizeof(*d));
    if (!d)
        return -1;
    op->deps = d;
    d[op->ndeps].stream = s;
    d[op->ndeps].seq = seq;
    op->ndeps++;
    return 0;
}

/* Returns 1 when every dependency of op has run, with the latest end in *end;
 * caller holds g_lock. */
static int
deps_ready(const struct simgpu_op *op, uint64_t *end)
{
    uint64_t e = 0;
    for (int i = 0; i < op->ndeps; i++) {
        const struct simgpu_stream *t = op->deps[i].stream;
        uint64_t seq = op->deps[i].seq;
        if (t->done_seq < seq)
            return 0;
        if (t->done_seq - seq < SIMGPU_END_RING && t->done_end[seq % SIMGPU_END_RING] > e)
            e = t->done_end[seq % SIMGPU_END_RING];
    }
    *end = e;
    return 1;
}

static uint64_t
u64max(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

/* Device time a copy of `bytes` of kind `copy_kind` takes. */
static uint64_t
copy_ns(size_t bytes, int copy_kind)
{
    double gbps =
        copy_kind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOD ? simgpu_cfg.d2d_gbps : simgpu_cfg.h2d_gbps;
    return 1500 + (uint64_t)((double)bytes / gbps);
}

static void
event_maybe_free_locked(struct simgpu_event *ev)
{
    if (ev->destroyed && ev->pending == 0)
        free(ev);
}

/* Executes op (stream lock not held); returns the end time in *end and nonzero
 * when the op failed. */
static int
op_execute(struct simgpu_op *op, struct simgpu_stream *s, uint64_t start, uint64_t *end)
{
    struct simgpu_device *d = s->dev;
    int failed = 0;
    *end = start;
    switch (op->kind) {
    case SIMGPU_OP_KERNEL: {
        uint64_t dur = op->u.kernel.dur_ns;
        int running = atomic_fetch_add(&d->running_kernels, 1);
        if (simgpu_cfg.contention > 0 && running > 0)
            dur = (uint64_t)((double)dur * (1.0 + simgpu_cfg.contention * running));
        *end = start + dur;
        simgpu_sleep_until(*end);
        atomic_fetch_sub(&d->running_kernels, 1);
        break;
    }
    case SIMGPU_OP_MEMCPY:
        simgpu_sleep_until(start);
        if (op->u.memcpy.bytes && op->u.memcpy.dst != op->u.memcpy.src)
            memmove(op->u.memcpy.dst, op->u.memcpy.src, op->u.memcpy.bytes);
        *end = start + copy_ns(op->u.memcpy.bytes, op->u.memcpy.copy_kind);
        simgpu_sleep_until(*end);
        break;
    case SIMGPU_OP_MEMSET:
        simgpu_sleep_until(start);
        if (op->u.memset.bytes)
            memset(op->u.memset.dst, op->u.memset.value, op->u.memset.bytes);
        *end = start + 1000 + (uint64_t)((double)op->u.memset.bytes / simgpu_cfg.d2d_gbps);
        simgpu_sleep_until(*end);
        break;
    case SIMGPU_OP_HOST_FN:
        simgpu_sleep_until(start);
        op->u.host.fn(op->u.host.arg);
        *end = u64max(start, simgpu_now_ns());
        break;
    case SIMGPU_OP_CUSTOM:
        failed = op->u.custom.ops->run(op->u.custom.inst, start, end);
        if (*end < start)
            *end = start;
        simgpu_sleep_until(*end);
        break;
    case SIMGPU_OP_EVENT_RECORD:
    case SIMGPU_OP_EVENT_WAIT:
        break;
    }
    return failed;
}

static void *
stream_worker(void *arg)
{
    struct simgpu_stream *s = arg;
    struct simgpu_device *d = s->dev;
    /* Default timer slack (50 us) would make every deadline late by that much. */
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    pthread_mutex_lock(&g_lock);
    for (;;) {
        struct simgpu_op *op;
        uint64_t dep_end = 0, start, end;
        int failed = 0, skip;
        while (!s->head && !s->destroyed)
            pthread_cond_wait(&g_cv, &g_lock);
        if (!s->head)
            break;
        op = s->head;
        while (!deps_ready(op, &dep_end))
            pthread_cond_wait(&g_cv, &g_lock);
        start = u64max(u64max(s->last_end, op->enqueue_ns), dep_end);
        skip = d->sticky != cudaSuccess && op->kind != SIMGPU_OP_EVENT_RECORD &&
               op->kind != SIMGPU_OP_EVENT_WAIT;
        pthread_mutex_unlock(&g_lock);
        end = start;
        if (!skip) {
            failed = op_execute(op, s, start, &end);
            simgpu_cupti_op_done(op, s, start, end);
        }
        pthread_mutex_lock(&g_lock);
        if (op->kind == SIMGPU_OP_EVENT_RECORD && op->u.event.ev) {
            struct simgpu_event *ev = op->u.event.ev;
            if (ev->stream == s && ev->seq == op->seq)
                ev->time_ns = start;
            ev->pending--;
            event_maybe_free_locked(ev);
        }
        if (failed && d->sticky == cudaSuccess)
            d->sticky = cudaErrorLaunchFailure;
        s->last_end = u64max(s->last_end, end);
        s->done_end[op->seq % SIMGPU_END_RING] = end;
        s->done_seq = op->seq;
        s->head = op->next;
        if (!s->head)
            s->tail = NULL;
        pthread_cond_broadcast(&g_cv);
        pthread_mutex_unlock(&g_lock);
        op_free(op);
        pthread_mutex_lock(&g_lock);
    }
    s->worker_started = 0;
    pthread_mutex_unlock(&g_lock);
    return NULL;
}

/* Appends op to s as enqueued at host time now (starting the worker if needed),
 * without waking anyone: the caller broadcasts g_cv once it has enqueued all it
 * means to.  Caller holds g_lock and checked capture and the sticky error.  On
 * failure op is not enqueued and still the caller's. */
static cudaError_t
enqueue_at_locked(struct simgpu_stream *s, struct simgpu_op *op, uint64_t now)
{
    struct simgpu_device *d = s->dev;
    if (s->is_legacy) {
        for (struct simgpu_stream *t = d->streams; t; t = t->next_all)
            if (t != s && !(t->flags & cudaStreamNonBlocking) && t->tail_seq > t->done_seq &&
                op_add_dep(op, t, t->tail_seq))
                return cudaErrorMemoryAllocation;
    } else if (!(s->flags & cudaStreamNonBlocking) && d->legacy &&
               d->legacy->tail_seq > d->legacy->done_seq) {
        if (op_add_dep(op, d->legacy, d->legacy->tail_seq))
            return cudaErrorMemoryAllocation;
    }
    if (!s->worker_started) {
        pthread_t th;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&at, 256 * 1024);
        if (pthread_create(&th, &at, stream_worker, s)) {
            pthread_attr_destroy(&at);
            return cudaErrorMemoryAllocation;
        }
        pthread_attr_destroy(&at);
        s->worker_started = 1;
    }
    op->enqueue_ns = now;
    op->seq = ++s->tail_seq;
    op->next = NULL;
    if (s->tail)
        s->tail->next = op;
    else
        s->head = op;
    s->tail = op;
    return cudaSuccess;
}

/* Appends op to s and wakes the worker; caller holds g_lock and checked capture. */
static cudaError_t
enqueue_locked(struct simgpu_stream *s, struct simgpu_op *op)
{
    cudaError_t rc = enqueue_at_locked(s, op, simgpu_now_ns());
    if (rc == cudaSuccess)
        pthread_cond_broadcast(&g_cv);
    return rc;
}

/* ---- graphs (capture) --------------------------------------------------------------- */
#define GRAPH_MAGIC 0x47525048U
#define GEXEC_MAGIC 0x47455845U

struct simgpu_graph {
    uint32_t magic;
    uint32_t id;
    struct simgpu_op *head, *tail;
    int nops;
    int nslots;  /* streams that took part: slot 0 is the origin */
    int nevents; /* events recorded inside the capture */
    int capturing;
    int execs; /* instantiations alive: the graph outlives cudaGraphDestroy */
    int destroyed;
    struct simgpu_stream *origin;
};

struct simgpu_graph_exec {
    uint32_t magic;
    struct simgpu_graph *graph;
    struct simgpu_stream **aux; /* streams for slots 1.. */
    struct simgpu_event **ev;   /* events for the captured records */
    struct simgpu_event *fork, **join;
};

static uint32_t g_next_graph_id = 1;

static void
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
simgpu_enqueue(struct simgpu_stream *s, struct simgpu_op *op)
{
    cudaError_t rc;
    pthread_mutex_lock(&g_lock);
    if (s->capture) {
        graph_append_locked(s->capture, op, s->capture_slot);
        pthread_mutex_unlock(&g_lock);
        return cudaSuccess;
    }
    rc = s->dev->sticky;
    if (rc == cudaSuccess)
        rc = enqueue_locked(s, op);
    pthread_mutex_unlock(&g_lock);
    if (rc != cudaSuccess)
        op_free(op);
    return rc;
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
    if (rc != cudaSuccess) {
        simgpu_graph_exec_destroy(x);
        return rc;
    }
    *out = x;
    return cudaSuccess;
}

/* A fresh op for one launch of captured op t of graph g, with correlation id corr (custom
 * ops, such as NCCL's, get their own clone of their state). NULL when out of memory. */
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

/* Builds, without g_lock, every operation one launch of x on s enqueues, in the
 * order the per-op replay would enqueue them: the fork (record on s, waits on the
 * branch streams), the captured ops on their streams, the joins.  st holds at least
 * nops + 3 * nslots entries; *n counts the steps built, also on failure. */
static cudaError_t
graph_steps_build(struct simgpu_graph_exec *x, struct simgpu_stream *s, struct launch_step *st,
                  int *n)
{
    struct simgpu_graph *g = x->graph;
    uint32_t corr = simgpu_current_corr();
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

/* Enqueues one step at host time now without waking anyone, as simgpu_enqueue,
 * simgpu_event_record and simgpu_stream_wait_event would outside a capture; sets
 * st->op to NULL when the op was enqueued.  Caller holds g_lock. */
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

/* Launches x on s like one CUDA graph submission: every op is built first, then
 * all are enqueued under one g_lock acquisition, stamped with the host time the
 * launch began (so nodes follow each other on the device with no per-node launch
 * gap, and the first may start as soon as the launch is submitted), and the
 * workers are woken once.  Device order and the fork/join dependencies are those
 * of the per-op replay; no SYNCHRONIZATION records are made for the graph's
 * internal event waits (no cudaStreamWaitEvent is called).  A launch into a
 * stream being captured is replayed op by op into that capture. */
cudaError_t
simgpu_graph_launch(struct simgpu_graph_exec *x, struct simgpu_stream *s)
{
    struct simgpu_graph *g = x->graph;
    struct launch_step *st = malloc(((size_t)g->nops + 3 * (size_t)g->nslots) * sizeof(*st));
    uint64_t now = simgpu_now_ns(); /* the submission: device work may start from here */
    int n = 0, i = 0, capturing = 0;
    cudaError_t rc;
    if (!st)
        return cudaErrorMemoryAllocation;
    rc = graph_steps_build(x, s, st, &n);
    if (rc == cudaSuccess) {
        pthread_mutex_lock(&g_lock);
        capturing = s->capture != NULL;
        if (!capturing) {
            while (rc == cudaSuccess && i < n)
                rc = step_enqueue_locked(&st[i++], now);
            pthread_cond_broadcast(&g_cv);
        }
        pthread_mutex_unlock(&g_lock);
    }
    for (i = 0; i < n; i++)
        if (st[i].op)
            op_free(st[i].op);
    free(st);
    return capturing ? graph_launch_each(x, s) : rc;
}

static void
graph_free(struct simgpu_graph *g)
{
    struct simgpu_op *op = g->head;
    while (op) {
        struct simgpu_op *next = op->next;
        op_free(op);
        op = next;
    }
    free(g);
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

/* ---- streams ------------------------------------------------------------------------ */
static int
stream_live_locked(const struct simgpu_stream *s)
{
    for (int i = 0; i < simgpu_cfg.device_count; i++)
        for (struct simgpu_stream *t = g_dev[i].streams; t; t = t->next_all)
            if (t == s)
                return !t->destroyed;
    return 0;
}

cudaError_t
simgpu_stream_resolve(cudaStream_t h, int ptds, struct simgpu_stream **out)
{
    struct simgpu_device *d;
    cudaError_t rc = cudaSuccess;
    simgpu_init();
    pthread_mutex_lock(&g_lock);
    d = device_locked(t_dev);
    if (h == cudaStreamPerThread || (ptds && (h == NULL))) {
        if (!t_ptds[t_dev])
            t_ptds[t_dev] = stream_alloc(d, 0, 0);
        *out = t_ptds[t_dev];
        if (!*out)
            rc = cudaErrorMemoryAllocation;
    } else if (h == NULL || h == cudaStreamLegacy) {
        *out = d->legacy;
    } else if (stream_live_locked((struct simgpu_stream *)h)) {
        *out = (struct simgpu_stream *)h;
    } else {
        rc = cudaErrorInvalidResourceHandle;
    }
    pthread_mutex_unlock(&g_lock);
    return rc;
}

cudaError_t
simgpu_stream_create(struct simgpu_stream **out, unsigned flags, int priority)
{
    struct simgpu_stream *s;
    simgpu_init();
    if (flags & ~(unsigned)cudaStreamNonBlocking)
        return cudaErrorInvalidValue;
    if (priority > 0)
        priority = 0;
    if (priority < -5)
        priority = -5;
    pthread_mutex_lock(&g_lock);
    s = stream_alloc(device_locked(t_dev), flags, priority);
    pthread_mutex_unlock(&g_lock);
    if (!s)
        return cudaErrorMemoryAllocation;
    *out = s;
    return cudaSuccess;
}

cudaError_t
simgpu_stream_destroy(struct simgpu_stream *s)
{
    pthread_mutex_lock(&g_lock);
    if (!stream_live_locked(s) || s->is_legacy) {
        pthread_mutex_unlock(&g_lock);
        return cudaErrorInvalidResourceHandle;
    }
    /* The struct stays allocated: pending ops of other streams may depend on it. */
    s->destroyed = 1;
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_lock);
    return cudaSuccess;
}

/* Waits until s->done_seq >= target; caller holds g_lock. */
static void
wait_done_locked(struct simgpu_stream *s, uint64_t target)
{
    while (s->done_seq < target)
        pthread_cond_wait(&g_cv, &g_lock);
}

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
simgpu_stream_query(struct simgpu_stream *s)
{
    cudaError_t rc;
    pthread_mutex_lock(&g_lock);
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

cudaError_t
simgpu_device_sync(void)
{
    struct simgpu_device *d;
    cudaError_t rc;
    uint64_t t0 = simgpu_now_ns();
    simgpu_init();
    pthread_mutex_lock(&g_lock);
    d = device_locked(t_dev);
    for (;;) {
        int busy = 0;
        for (struct simgpu_stream *s = d->streams; s; s = s->next_all)
            if (s->done_seq < s->tail_seq)
                busy = 1;
        if (!busy)
            break;
        pthread_cond_wait(&g_cv, &g_lock);
    }
    rc = d->sticky;
    pthread_mutex_unlock(&g_lock);
    simgpu_cupti_sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE, t0, simgpu_now_ns(),
                      NULL, NULL, rc);
    return rc;
}

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
        rc = enqueue_locked(s, op);
    if (rc == cudaSuccess) {
        ev->cap_graph = NULL;
        ev->stream = s;
        ev->seq = op->seq;
        ev->pending++;
    }
    pthread_mutex_unlock(&g_lock);
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
        rc = enqueue_locked(s, op);
    pthread_mutex_unlock(&g_lock);
    if (rc != cudaSuccess)
        op_free(op);
    simgpu_cupti_sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT, t0, simgpu_now_ns(), s,
                      ev, rc);
    return rc;
}

cudaError_t
simgpu_event_query(struct simgpu_event *ev)
{
    cudaError_t rc = cudaSuccess;
    pthread_mutex_lock(&g_lock);
    if (ev->stream && ev->stream->done_seq < ev->seq)
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
    else if (a->stream->done_seq < a->seq || b->stream->done_seq < b->seq)
        rc = cudaErrorNotReady;
    else
        *ms = (float)(((double)b->time_ns - (double)a->time_ns) / 1e6);
    pthread_mutex_unlock(&g_lock);
    return rc;
}

/* ---- memory ------------------------------------------------------------------------------ */
static struct simgpu_alloc *
alloc_find_locked(const void *p, int exact)
{
    uintptr_t a = (uintptr_t)p;
    for (size_t i = 0; i < g_nallocs; i++) {
        struct simgpu_alloc *e = &g_allocs[i];
        if (exact ? a == e->base : (a >= e->base && a < e->base + e->bytes + (e->bytes == 0)))
            return e;
    }
    return NULL;
}

static int
alloc_add_locked(void *p, size_t bytes, int kind)
{
    if (g_nallocs == g_cap_allocs) {
        size_t n = g_cap_allocs ? g_cap_allocs * 2 : 256;
        struct simgpu_alloc *na = realloc(g_allocs, n * sizeof(*na));
        if (!na)
            return -1;
        g_allocs = na;
        g_cap_allocs = n;
    }
    g_allocs[g_nallocs].base = (uintptr_t)p;
    g_allocs[g_nallocs].bytes = bytes;
    g_allocs[g_nallocs].kind = kind;
    g_allocs[g_nallocs].dev = t_dev;
    g_nallocs++;
    return 0;
}

/* Maps lazily backed memory: simulated buffers of gigabytes cost no RAM until
 * something writes to them. */
static void *
map_bytes(size_t bytes)
{
    void *p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static cudaError_t
alloc_common(void **p, size_t bytes, int kind, struct simgpu_stream *stream)
{
    struct simgpu_device *d;
    void *m;
    simgpu_init();
    if (!p)
        return cudaErrorInvalidValue;
    pthread_mutex_lock(&g_lock);
    d = device_locked(t_dev);
    if (kind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE && d->mem_in_use + bytes > simgpu_cfg.mem_bytes) {
        pthread_mutex_unlock(&g_lock);
        return cudaErrorMemoryAllocation;
    }
    pthread_mutex_unlock(&g_lock);
    m = map_bytes(bytes);
    if (!m)
        return cudaErrorMemoryAllocation;
    pthread_mutex_lock(&g_lock);
    if (alloc_add_locked(m, bytes, kind)) {
        pthread_mutex_unlock(&g_lock);
        munmap(m, bytes ? bytes : 1);
        return cudaErrorMemoryAllocation;
    }
    if (kind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE) {
        d->mem_in_use += bytes;
        if (d->mem_in_use > d->mem_peak)
            d->mem_peak = d->mem_in_use;
    }
    pthread_mutex_unlock(&g_lock);
    *p = m;
    simgpu_cupti_memory(1, m, bytes, kind, stream);
    return cudaSuccess;
}

static cudaError_t
free_common(void *p, int kind, struct simgpu_stream *stream)
{
    struct simgpu_alloc *e, rec;
    if (!p)
        return cudaSuccess;
    pthread_mutex_lock(&g_lock);
    e = alloc_find_locked(p, 1);
    if (!e || e->kind != kind) {
        pthread_mutex_unlock(&g_lock);
        return cudaErrorInvalidValue;
    }
    rec = *e;
    *e = g_allocs[--g_nallocs];
    if (kind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE)
        g_dev[rec.dev].mem_in_use -= rec.bytes;
    pthread_mutex_unlock(&g_lock);
    simgpu_cupti_memory(0, p, rec.bytes, kind, stream);
    munmap(p, rec.bytes ? rec.bytes : 1);
    return cudaSuccess;
}

cudaError_t
simgpu_malloc(void **p, size_t bytes, struct simgpu_stream *stream)
{
    return alloc_common(p, bytes, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, stream);
}

cudaError_t
simgpu_free(void *p, struct simgpu_stream *stream)
{
    if (stream) {
        /* cudaFreeAsync: the memory is released when the stream reaches the free;
         * synchronising here is the conservative equivalent. */
        simgpu_stream_sync(stream);
    }
    return free_common(p, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, stream);
}

cudaError_t
simgpu_host_alloc(void **p, size_t bytes)
{
    return alloc_common(p, bytes, CUPTI_ACTIVITY_MEMORY_KIND_PINNED, NULL);
}

cudaError_t
simgpu_host_free(void *p)
{
    return free_common(p, CUPTI_ACTIVITY_MEMORY_KIND_PINNED, NULL);
}

int
simgpu_memory_kind(const void *p)
{
    struct simgpu_alloc *e;
    int kind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
    pthread_mutex_lock(&g_lock);
    e = alloc_find_locked(p, 0);
    if (e)
        kind = e->kind;
    pthread_mutex_unlock(&g_lock);
    return kind;
}

void
simgpu_memory_usage(size_t *in_use, size_t *peak)
{
    struct simgpu_device *d;
    simgpu_init();
    pthread_mutex_lock(&g_lock);
    d = device_locked(t_dev);
    *in_use = d->mem_in_use;
    *peak = d->mem_peak;
    pthread_mutex_unlock(&g_lock);
}

struct simgpu_op *
simgpu_memcpy_op(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind, int async)
{
    struct simgpu_op *op = simgpu_op_new(SIMGPU_OP_MEMCPY);
    int sk = simgpu_memory_kind(src), dk = simgpu_memory_kind(dst);
    int sdev = sk == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
        ddev = dk == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    if (!op)
        return NULL;
    if (kind == cudaMemcpyHostToDevice) {
        sdev = 0;
        ddev = 1;
    } else if (kind == cudaMemcpyDeviceToHost) {
        sdev = 1;
        ddev = 0;
    } else if (kind == cudaMemcpyDeviceToDevice) {
        sdev = ddev = 1;
    } else if (kind == cudaMemcpyHostToHost) {
        sdev = ddev = 0;
    }
    op->u.memcpy.dst = dst;
    op->u.memcpy.src = src;
    op->u.memcpy.bytes = bytes;
    op->u.memcpy.src_kind = sk;
    op->u.memcpy.dst_kind = dk;
    op->u.memcpy.async = async;
    op->u.memcpy.copy_kind =
        sdev ? (ddev ? CUPTI_ACTIVITY_MEMCPY_KIND_DTOD : CUPTI_ACTIVITY_MEMCPY_KIND_DTOH)
             : (ddev ? CUPTI_ACTIVITY_MEMCPY_KIND_HTOD : CUPTI_ACTIVITY_MEMCPY_KIND_HTOH);
    return op;
}

/* ---- kernel registry --------------------------------------------------------------------- */
struct kentry {
    const void *func; /* NULL for entries registered by name */
    char *name;
    uint64_t dur_ns;
    int has_dur;
    struct kentry *next;
};

#define KBUCKETS 1024
static struct kentry *g_kby_ptr[KBUCKETS], *g_kby_name[KBUCKETS];
static pthread_mutex_t g_klock = PTHREAD_MUTEX_INITIALIZER;

static unsigned
hash_ptr(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (unsigned)(x % KBUCKETS);
}

static unsigned
hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    while (*s)
        h = (h ^ (unsigned char)*s++) * 1099511628211ULL;
    return (unsigned)(h % KBUCKETS);
}

static struct kentry *
kfind_ptr_locked(const void *func)
{
    for (struct kentry *e = g_kby_ptr[hash_ptr(func)]; e; e = e->next)
        if (e->func == func)
            return e;
    return NULL;
}

static struct kentry *
kfind_name_locked(const char *name)
{
    for (struct kentry *e = g_kby_name[hash_str(name)]; e; e = e->next)
        if (!strcmp(e->name, name))
            return e;
    return NULL;
}

static struct kentry *
kadd_ptr_locked(const void *func, const char *name, uint64_t dur, int has_dur)
{
    struct kentry *e = kfind_ptr_locked(func);
    char *n = strdup(name);
    if (!n)
        return NULL;
    if (!e) {
        e = calloc(1, sizeof(*e));
        if (!e) {
            free(n);
            return NULL;
        }
        e->func = func;
        e->next = g_kby_ptr[hash_ptr(func)];
        g_kby_ptr[hash_ptr(func)] = e;
    }
    /* The old name string is kept: CUPTI records handed out may point at it. */
    e->name = n;
    e->dur_ns = dur;
    e->has_dur = has_dur;
    return e;
}

int
simgpu_register_kernel(const void *func, const char *name, uint64_t duration_ns)
{
    struct kentry *e;
    if (!func || !name)
        return -1;
    pthread_mutex_lock(&g_klock);
    e = kadd_ptr_locked(func, name, duration_ns, 1);
    pthread_mutex_unlock(&g_klock);
    return e ? 0 : -1;
}

int
simgpu_register_kernel_name(const char *name, uint64_t duration_ns)
{
    struct kentry *e;
    if (!name)
        return -1;
    pthread_mutex_lock(&g_klock);
    e = kfind_name_locked(name);
    if (!e) {
        e = calloc(1, sizeof(*e));
        if (e && !(e->name = strdup(name))) {
            free(e);
            e = NULL;
        }
        if (e) {
            e->next = g_kby_name[hash_str(name)];
            g_kby_name[hash_str(name)] = e;
        }
    }
    if (e) {
        e->dur_ns = duration_ns;
        e->has_dur = 1;
    }
    pthread_mutex_unlock(&g_klock);
    return e ? 0 : -1;
}

void
simgpu_set_next_launch_duration(uint64_t duration_ns)
{
    t_next_dur = duration_ns;
    t_next_dur_set = 1;
}

const char *
simgpu_kernel_name(const void *func)
{
    struct kentry *e;
    const char *name = NULL;
    Dl_info info;
    pthread_mutex_lock(&g_klock);
    e = kfind_ptr_locked(func);
    if (e) {
        name = e->name;
    } else if (func && dladdr(func, &info) && info.dli_sname && info.dli_saddr == func) {
        e = kadd_ptr_locked(func, info.dli_sname, 0, 0);
        name = e ? e->name : NULL;
    }
    pthread_mutex_unlock(&g_klock);
    return name;
}

void
simgpu_kernel_lookup(const void *func, const char *fallback_name, const char **name,
                     uint64_t *dur_ns)
{
    struct kentry *e;
    const char *n = simgpu_kernel_name(func);
    uint64_t dur = simgpu_cfg.default_kernel_ns;
    int have = 0;
    char buf[64];
    pthread_mutex_lock(&g_klock);
    e = kfind_ptr_locked(func);
    if (e && e->has_dur) {
        dur = e->dur_ns;
        have = 1;
    }
    if (!n && fallback_name)
        n = fallback_name;
    if (!n) {
        snprintf(buf, sizeof(buf), "simgpu_kernel_%p", func);
        e = kadd_ptr_locked(func, buf, 0, 0);
        n = e ? e->name : "simgpu_kernel";
    }
    if (!have) {
        struct kentry *ne = kfind_name_locked(n);
        if (ne && ne->has_dur)
            dur = ne->dur_ns;
    }
    pthread_mutex_unlock(&g_klock);
    if (t_next_dur_set) {
        dur = t_next_dur;
        t_next_dur_set = 0;
    }
    *name = n;
    *dur_ns = (uint64_t)((double)dur * simgpu_cfg.slowdown);
}
