/* core.c: the simulated device: configuration, devices, operations and the stream
 * workers, streams, waiting for a stream.  Graphs are in core_graph.c, the device's
 * properties in core_props.c, events and the host's stream and device synchronisation in
 * core_event.c, memory and the kernel registry in core_mem.c.  See simgpu_internal.h for
 * the model. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "simgpu_internal.h"

#define STREAM_MAGIC 0x5354524dU /* "STRM" */

struct simgpu_config simgpu_cfg;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
struct simgpu_device g_dev[SIMGPU_MAX_DEVICES];
struct simgpu_event *g_events;

__thread int t_dev;
static __thread struct simgpu_stream *t_ptds[SIMGPU_MAX_DEVICES];

/* ---- configuration, clock ------------------------------------------------------ */
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
    int n = (int)simgpu_env_whole("SIMGPU_DEVICE_COUNT", 0, 1000000, 0);
    if (n <= 0)
        n = (int)simgpu_env_whole("LOCAL_WORLD_SIZE", 1, 1000000, 1);
    if (n > SIMGPU_MAX_DEVICES)
        n = SIMGPU_MAX_DEVICES;
    simgpu_cfg.device_count = n;
    simgpu_cfg.launch_ns = (uint64_t)(simgpu_env_number("SIMGPU_LAUNCH_US", 0, 1e9, 4) * 1000);
    simgpu_cfg.default_kernel_ns =
        (uint64_t)(simgpu_env_number("SIMGPU_DEFAULT_KERNEL_US", 0, 1e9, 10) * 1000);
    simgpu_cfg.slowdown = simgpu_env_number("SIMGPU_SLOWDOWN", 1e-6, 1e6, 1.0);
    simgpu_cfg.contention = simgpu_env_number("SIMGPU_CONTENTION", 0, 1e6, 0);
    simgpu_cfg.h2d_gbps = simgpu_env_number("SIMGPU_H2D_GBPS", 1e-6, 1e9, 25);
    simgpu_cfg.d2d_gbps = simgpu_env_number("SIMGPU_D2D_GBPS", 1e-6, 1e9, 1500);
    simgpu_cfg.mem_bytes = (uint64_t)(simgpu_env_number("SIMGPU_MEM_GB", 0, 1e9,
                                                        simgpu_physics() == SIMGPU_PHYSICS_WORLD
                                                            ? simgpu_world()->prof->hbm_gb
                                                            : 80) *
                                      1e9);
    simgpu_cfg.cupti_busy = (int)simgpu_env_whole("SIMGPU_CUPTI_BUSY", 0, 1, 0);
    simgpu_cfg.cupti_limit_bytes =
        (uint64_t)(simgpu_env_number("SIMGPU_CUPTI_LIMIT_MB", 0, 1e9, 64) * 1048576);
    simgpu_cfg.cupti_deliver_ms =
        (uint64_t)simgpu_env_number("SIMGPU_CUPTI_DELIVER_MS", 0, 1e9, 200);
    simgpu_cfg.teardown_at_exit = getenv("SIMGPU_TEARDOWN_AT_EXIT") != NULL;
    simgpu_cfg.worker_delay_ns =
        (uint64_t)(simgpu_env_number("SIMGPU_WORKER_DELAY_US", 0, 1e9, 0) * 1000);
}

void
simgpu_init(void)
{
    pthread_once(&g_once, init_once);
}

static int g_driver_inited;

void
simgpu_driver_mark_init(void)
{
    __atomic_store_n(&g_driver_inited, 1, __ATOMIC_RELEASE);
}

int
simgpu_driver_is_init(void)
{
    return __atomic_load_n(&g_driver_inited, __ATOMIC_ACQUIRE);
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
    /* A deadline already past costs no system call (clock_gettime is the vDSO's): on a
     * virtual machine, clock_nanosleep arms a timer even then, some 20 us a call. */
    if (simgpu_now_ns() >= deadline_ns)
        return;
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
    pthread_condattr_t ca;
    if (!s)
        return NULL;
    s->magic = STREAM_MAGIC;
    s->dev = d;
    s->flags = flags;
    s->priority = prio;
    s->id = d->next_stream_id++;
    s->wake_seq = UINT64_MAX;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* the worker's timed waits */
    pthread_cond_init(&s->work_cv, &ca);
    pthread_cond_init(&s->done_cv, &ca); /* and a waiter's, until an op's end */
    pthread_condattr_destroy(&ca);
    s->next_all = d->streams;
    /* Published last: simgpu_stream_resolve walks the list without g_lock. */
    __atomic_store_n(&d->streams, s, __ATOMIC_RELEASE);
    return s;
}

/* Returns device `i`, initialised; caller holds g_lock. */
struct simgpu_device *
device_locked(int i)
{
    struct simgpu_device *d = &g_dev[i];
    static int teardown_registered;
    if (!teardown_registered && simgpu_cfg.teardown_at_exit) {
        teardown_registered = 1;
        atexit(simgpu_cupti_teardown);
    }
    if (!d->inited) {
        d->index = i;
        /* CUPTI's stream ids are unique in a process: device i's are offset by 1000 i
         * (device 0: legacy 7, others from 13). */
        d->next_stream_id = SIMGPU_LEGACY_STREAM_ID + 1000u * (uint32_t)i;
        d->legacy = stream_alloc(d, 0, 0);
        if (d->legacy)
            d->legacy->is_legacy = 1;
        d->next_stream_id = 13 + 1000u * (uint32_t)i;
        /* Last: the lock-free readers (simgpu_stream_resolve, simgpu_sticky_error) see
         * the legacy stream once they see the device initialised. */
        __atomic_store_n(&d->inited, 1, __ATOMIC_RELEASE);
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
    struct simgpu_device *d;
    cudaError_t rc;
    simgpu_init();
    d = &g_dev[t_dev];
    /* Launch fast path: an initialised device's sticky error is read without g_lock (it
     * is only ever set, and the enqueue checks it again under the lock). */
    if (__atomic_load_n(&d->inited, __ATOMIC_ACQUIRE))
        return __atomic_load_n(&d->sticky, __ATOMIC_ACQUIRE);
    pthread_mutex_lock(&g_lock);
    rc = device_locked(t_dev)->sticky;
    pthread_mutex_unlock(&g_lock);
    return rc;
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

void
op_free(struct simgpu_op *op)
{
    if (op->kind == SIMGPU_OP_CUSTOM && op->u.custom.ops->release)
        op->u.custom.ops->release(op->u.custom.inst);
    if (op->kind == SIMGPU_OP_HOST_FN && op->u.host.arg_bytes)
        free(op->u.host.arg);
    free(op->deps);
    free(op);
}

/* Adds a dependency on (s, seq) to op; returns 0 or -1 when out of memory. */
int
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

static uint64_t
u64max(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

/* Device end of op `seq` of t, which has run (t->fixed_seq >= seq): an op in flight's
 * own (its end is fixed; more than SIMGPU_END_RING of them may be in flight), a completed
 * op's from t->done_end, 0 for an op completed SIMGPU_END_RING ops or more before t's last
 * completed one (its end long past).  Caller holds g_lock. */
static uint64_t
run_end_of(const struct simgpu_stream *t, uint64_t seq)
{
    const struct simgpu_op *op = t->inflight;
    uint64_t end = 0;
    if (seq > t->done_seq) {
        while (op && op->seq < seq)
            op = op->next;
        if (op && op->seq == seq)
            end = op->run_end;
    } else if (t->done_seq - seq < SIMGPU_END_RING) {
        end = t->done_end[seq % SIMGPU_END_RING];
    }
    return end;
}

/* Returns -1 when every dependency of op has run (in flight or completed: its end is
 * fixed), with the latest end in *end, else the index of a dependency that has not; caller
 * holds g_lock. */
static int
dep_pending(const struct simgpu_op *op, uint64_t *end)
{
    uint64_t e = 0;
    for (int i = 0; i < op->ndeps; i++) {
        const struct simgpu_stream *t = op->deps[i].stream;
        uint64_t seq = op->deps[i].seq;
        if (t->fixed_seq < seq)
            return i;
        e = u64max(e, run_end_of(t, seq));
    }
    *end = e;
    return -1;
}

/* Device time of kernel op on s starting at `start` (the physics in force: world.h). */
static uint64_t
kernel_ns(const struct simgpu_op *op, const struct simgpu_stream *s, uint64_t start, int running)
{
    uint64_t blocks = (uint64_t)op->u.kernel.grid.x * op->u.kernel.grid.y * op->u.kernel.grid.z;
    uint64_t dur = op->u.kernel.dur_ns;
    if (simgpu_physics() == SIMGPU_PHYSICS_WORLD)
        return simgpu_world_kernel_ns(&op->u.kernel.work, op->u.kernel.has_work, dur, blocks,
                                      s->dev->index, ((uint64_t)s->id << 40) ^ op->seq, start);
    if (op->u.kernel.has_work)
        dur = (uint64_t)(simgpu_kernel_base_ns(NULL, &op->u.kernel.work, blocks) *
                         simgpu_cfg.slowdown);
    if (simgpu_cfg.contention > 0 && running > 0)
        dur = (uint64_t)((double)dur * (1.0 + simgpu_cfg.contention * running));
    return dur;
}

void
event_maybe_free_locked(struct simgpu_event *ev)
{
    if (ev->destroyed && ev->pending == 0)
        free(ev);
}

/* 1 for the ops whose worker sleeps until their end (the others end when they start). */
static int
op_timed(const struct simgpu_op *op)
{
    return op->kind == SIMGPU_OP_KERNEL || op->kind == SIMGPU_OP_MEMCPY ||
           op->kind == SIMGPU_OP_MEMSET || op->kind == SIMGPU_OP_CUSTOM;
}

/* Executes op (g_lock not held) up to its end, which it returns in *end without
 * waiting for it (the caller sleeps until it, or leaves the op in flight); returns
 * nonzero when the op failed. */
static int
op_execute(struct simgpu_op *op, struct simgpu_stream *s, uint64_t start, uint64_t *end)
{
    struct simgpu_device *d = s->dev;
    int failed = 0;
    *end = start;
    switch (op->kind) {
    case SIMGPU_OP_KERNEL:
        if (simgpu_cfg.contention > 0) {
            /* Simple physics' contention counts the kernels running now: this one runs
             * until its end. */
            int running = atomic_fetch_add(&d->running_kernels, 1);
            *end = start + kernel_ns(op, s, start, running);
            simgpu_sleep_until(*end);
            atomic_fetch_sub(&d->running_kernels, 1);
        } else {
            *end = start + kernel_ns(op, s, start, 0);
        }
        break;
    case SIMGPU_OP_MEMCPY:
        /* The bytes move when the op is run, which may be ahead of its device start (a
         * run of queued ops: simgpu_stream.inflight); timed when it starts (copies running at once
         * see each other), then done. */
        *end = start + simgpu_copy_ns(op->u.memcpy.bytes, op->u.memcpy.copy_kind,
                                      op->u.memcpy.src_kind, op->u.memcpy.dst_kind, d->index,
                                      ((uint64_t)s->id << 40) ^ op->seq, start);
        if (op->u.memcpy.bytes && op->u.memcpy.dst != op->u.memcpy.src)
            memmove(op->u.memcpy.dst, op->u.memcpy.src, op->u.memcpy.bytes);
        break;
    case SIMGPU_OP_MEMSET:
        simgpu_memset_run(op);
        *end = start + simgpu_memset_ns(op->u.memset.bytes);
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
        break;
    case SIMGPU_OP_EVENT_RECORD:
    case SIMGPU_OP_EVENT_WAIT:
    case SIMGPU_OP_GRAPH: /* expanded before it would run */
        break;
    }
    return failed;
}

/* Sets d's sticky error after a failed device operation (a collective whose peer died),
 * unless one is set already; caller holds g_lock. */
static void
device_fail_locked(struct simgpu_device *d)
{
    if (d->sticky == cudaSuccess)
        __atomic_store_n(&d->sticky, cudaErrorLaunchFailure, __ATOMIC_RELEASE);
}

/* Marks op (run on s from `start` to `end`) done and wakes whoever waits for it; caller
 * holds g_lock. */
static void
op_done_locked(struct simgpu_stream *s, struct simgpu_op *op, uint64_t start, uint64_t end,
               int failed)
{
    struct simgpu_device *d = s->dev;
    if (op->kind == SIMGPU_OP_EVENT_RECORD && op->u.event.ev) {
        struct simgpu_event *ev = op->u.event.ev;
        if (ev->stream == s && ev->seq == op->seq)
            ev->time_ns = start;
        ev->pending--;
        event_maybe_free_locked(ev);
    }
    if (failed)
        device_fail_locked(d);
    s->last_end = u64max(s->last_end, end);
    s->done_end[op->seq % SIMGPU_END_RING] = end;
    s->done_seq = op->seq;
    if (s->fixed_seq < op->seq)
        s->fixed_seq = op->seq;
    /* Only the threads waiting for this stream, and only once one's target is reached. */
    if (s->done_seq >= s->wake_seq) {
        s->wake_seq = UINT64_MAX;
        pthread_cond_broadcast(&s->done_cv);
    }
}

int
stream_settle_locked(struct simgpu_stream *s, uint64_t now)
{
    struct simgpu_op *op;
    while ((op = s->inflight) && !(s->staging && op == s->inflight_tail) && now >= op->run_end) {
        s->inflight = op->next;
        if (!s->inflight)
            s->inflight_tail = NULL;
        op_done_locked(s, op, op->run_start, op->run_end, 0);
        op_free(op);
    }
    return s->inflight != NULL;
}

/* Moves op, the head of s, to the end of s's ops in flight, started at `start`, its end
 * not known yet.  Caller holds g_lock. */
static void
flight_push_locked(struct simgpu_stream *s, struct simgpu_op *op, uint64_t start)
{
    s->head = op->next;
    if (!s->head)
        s->tail = NULL;
    op->next = NULL;
    op->run_start = start;
    op->run_end = UINT64_MAX;
    if (s->inflight_tail)
        s->inflight_tail->next = op;
    else
        s->inflight = op;
    s->inflight_tail = op;
}

/* Fixes the end of op, the last op in flight on s: the next op of s starts from it, and
 * ops of other streams that depend on op may run.  Returns 1 when op is the first op run
 * that reaches the waiters' first target (s->wake_seq): they are woken then, once, to
 * wait for its end themselves.  Caller holds g_lock. */
static int
flight_fix_locked(struct simgpu_stream *s, struct simgpu_op *op, uint64_t end)
{
    uint64_t before = s->fixed_seq;
    op->run_end = end;
    s->last_end = u64max(s->last_end, end);
    s->fixed_seq = op->seq;
    return s->wake_seq <= op->seq && s->wake_seq > before;
}

/* End of the last op in flight on s up to seq `target` (the last one's when all come
 * before it); s has ops in flight.  Caller holds g_lock. */
static uint64_t
flight_end_locked(const struct simgpu_stream *s, uint64_t target)
{
    const struct simgpu_op *op = s->inflight;
    while (op->next && op->next->seq <= target)
        op = op->next;
    return op->run_end;
}

/* 1 when op may run while ops before it are in flight, from their modeled end without
 * waiting for it: not host functions and collectives (they run in real time, host code or
 * the peers' arrival), and not under the simple physics' contention (which counts the
 * kernels running). */
static int
op_runs_ahead(const struct simgpu_op *op)
{
    return op->kind != SIMGPU_OP_HOST_FN && op->kind != SIMGPU_OP_CUSTOM &&
           simgpu_cfg.contention <= 0;
}

/* 1 when op, the head of s just run to `end`, may be left in flight: it ends later than
 * now (the simple physics' contention, which counts the kernels running, excluded).  Who
 * looks next completes it at its end (the worker, a waiter).  Caller holds g_lock. */
static int
may_fly_locked(const struct simgpu_stream *s, const struct simgpu_op *op, uint64_t end)
{
    return op->kind != SIMGPU_OP_HOST_FN && !s->destroyed && simgpu_cfg.contention <= 0 &&
           end > simgpu_now_ns();
}

/* Sleeps (g_lock released) until s's ops in flight have ended, and completes them: they
 * complete before an op after them that is not left in flight.  The worker's, which holds
 * s's head (nobody runs an op of s meanwhile).  Caller holds g_lock. */
static void
flight_drain_locked(struct simgpu_stream *s)
{
    while (stream_settle_locked(s, simgpu_now_ns())) {
        uint64_t e = s->inflight_tail->run_end;
        pthread_mutex_unlock(&g_lock);
        simgpu_sleep_until(e);
        pthread_mutex_lock(&g_lock);
    }
}

/* SIMGPU_WORKER_DELAY_US: each time a stream worker wakes, it waits that long before it
 * goes on, as a worker left without a CPU by a loaded host would (tests of the device's
 * timeline under host load: test_wake).  Called without g_lock. */
static void
worker_starve(void)
{
    if (simgpu_cfg.worker_delay_ns)
        simgpu_sleep_until(simgpu_now_ns() + simgpu_cfg.worker_delay_ns);
}

/* 1 when a thread other than s's worker may run op at s's head (run_inline_locked): the
 * ops that run ahead, and collectives (custom ops), which arrive at their rendezvous and
 * wait for their peers there on whichever thread runs them; not host functions (the
 * program's code, run by the stream's own thread as CUDA's driver thread does), and not
 * under the simple physics' contention. */
static int
op_runs_inline(const struct simgpu_op *op)
{
    return op_runs_ahead(op) || (op->kind == SIMGPU_OP_CUSTOM && simgpu_cfg.contention <= 0);
}

/* Runs op, the head of s, on the calling thread instead of s's worker, which then need
 * not wake for it: a kernel, memset, copy or event operation (op_runs_ahead), or a
 * collective once the ops of s before it have ended (it starts in real time: its peers
 * meet it), when s's worker does not hold the head, no other thread runs an op of s and
 * no dependency is pending (other ops of s in flight are not waited for: it starts at
 * their end).  It starts as the worker would start it (moving a memset's, copy's or
 * collective's bytes here; a collective blocks until its peers arrived) and is left in
 * flight; a failed collective sets the sticky error.  The ops queued behind it up to seq
 * `upto` that run ahead (op_runs_ahead) and wait for nothing pending are run after it in
 * the same pass, each from the end of the one before, until one is the first to reach the
 * waiters' target (they are woken for it): a thread waiting for s runs the ops behind a
 * collective in one pass, and s's worker, if it waits for the staging to end, is woken
 * once for all of them, not once for each (the host's CPU a wake-up costs, on a loaded
 * host, is time the waiting thread waits).  Used by a launch on a stream with nothing
 * queued (kernels, memsets of SIMGPU_INLINE_MEMSET_BYTES at most; upto its own seq) and by
 * a thread that waits for s (upto its target), so that neither depends on when the worker
 * gets a CPU.  Returns 1 when it did (g_lock released meanwhile), 0 when the worker must
 * run it.  Caller holds g_lock. */
static int
run_inline_locked(struct simgpu_stream *s, struct simgpu_op *op, uint64_t upto)
{
    uint64_t dep_end = 0, start, end;
    int reached = 0, failed;
    if (!op_runs_inline(op) || s->head != op || s->worker_busy || s->staging || s->destroyed ||
        s->dev->sticky != cudaSuccess)
        return 0;
    if (stream_settle_locked(s, simgpu_now_ns()) && !op_runs_ahead(op))
        return 0;
    if (dep_pending(op, &dep_end) >= 0)
        return 0;
    s->staging = 1; /* nobody runs an op of s (or completes the one run here) meanwhile */
    if (op->kind == SIMGPU_OP_GRAPH) {
        graph_expand_locked(s, op);
    } else {
        for (;;) {
            start = u64max(u64max(s->last_end, op->enqueue_ns), dep_end);
            flight_push_locked(s, op, start);
            pthread_mutex_unlock(&g_lock);
            failed = op_execute(op, s, start, &end);
            simgpu_cupti_op_done(op, s, start, end);
            pthread_mutex_lock(&g_lock);
            if (failed)
                device_fail_locked(s->dev);
            reached = flight_fix_locked(s, op, end);
            op = s->head;
            if (reached || !op || op->seq > upto || op->kind == SIMGPU_OP_GRAPH ||
                !op_runs_ahead(op) || s->destroyed || s->dev->sticky != cudaSuccess ||
                dep_pending(op, &dep_end) >= 0)
                break;
        }
    }
    s->staging = 0;
    /* Threads that came meanwhile to wait for it wait for its end themselves; those that
     * waited for the staging to end go on. */
    if (s->staging_wait || s->destroyed || reached)
        pthread_cond_signal(&s->work_cv);
    if (s->staging_wait || reached)
        pthread_cond_broadcast(&s->done_cv);
    s->staging_wait = 0;
    return 1;
}

/* Finishes op, the head of s, run (unless `skip`) from `start` to `end`: leaves it in
 * flight when nobody would look before its end (may_fly_locked), else sleeps until its
 * end and completes it.  Its CUPTI record is staged without g_lock (before the op is
 * published in flight, where another thread may complete and free it).  Caller holds
 * g_lock, which is released and taken again. */
static void
op_finish_locked(struct simgpu_stream *s, struct simgpu_op *op, uint64_t start, uint64_t end,
                 int failed, int skip)
{
    int staged = 0;
    if (!skip && !failed && may_fly_locked(s, op, end)) {
        pthread_mutex_unlock(&g_lock);
        simgpu_cupti_op_done(op, s, start, end);
        staged = 1;
        pthread_mutex_lock(&g_lock);
        if (may_fly_locked(s, op, end)) {
            flight_push_locked(s, op, start);
            if (flight_fix_locked(s, op, end))
                pthread_cond_broadcast(&s->done_cv);
            return;
        }
    }
    pthread_mutex_unlock(&g_lock);
    if (!skip && op_timed(op) && end > simgpu_now_ns()) {
        simgpu_sleep_until(end);
        worker_starve(); /* woke at its end */
    }
    if (!skip && !staged)
        simgpu_cupti_op_done(op, s, start, end);
    pthread_mutex_lock(&g_lock);
    flight_drain_locked(s);
    s->head = op->next;
    if (!s->head)
        s->tail = NULL;
    op_done_locked(s, op, start, end, failed);
    op_free(op); /* free() only: kept under the lock */
}

/* A worker woken behind its waker (SCHED_BATCH: simgpu_enqueue) back to normal scheduling
 * as soon as it runs, whether or not the op it was woken for is still its own (a waiting
 * thread may have run it meanwhile), so that its next wake-up is an ordinary one. */
static void
worker_unbatch_locked(struct simgpu_stream *s)
{
    if (s->worker_batch) {
        struct sched_param sp = {0};
        s->worker_batch = 0;
        pthread_setschedparam(pthread_self(), SCHED_OTHER, &sp);
    }
}

static void *
stream_worker(void *arg)
{
    struct simgpu_stream *s = arg;
    struct simgpu_device *d = s->dev;
    char name[16];
    /* Named for tests/simgpu/thread_cpu.py, which splits a job's CPU by thread. */
    snprintf(name, sizeof(name), "simgpu-s%u", (unsigned)s->id);
    pthread_setname_np(pthread_self(), name);
    /* Default timer slack (50 us) would make every deadline late by that much. */
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    int woke = 0; /* the worker slept since it last ran an op */
    pthread_mutex_lock(&g_lock);
    for (;;) {
        struct simgpu_op *op;
        uint64_t dep_end = 0, start, end;
        int failed = 0, skip, pending;
        while (s->staging || (!s->head && !s->destroyed &&
                              !(s->inflight && s->wake_seq <= s->inflight_tail->seq))) {
            woke = 1;
            if (s->inflight && !s->staging && s->device_bound) {
                struct timespec ts;
                uint64_t e = s->inflight_tail->run_end;
                if (simgpu_now_ns() >= e)
                    break;
                ts.tv_sec = (time_t)(e / 1000000000ULL);
                ts.tv_nsec = (long)(e % 1000000000ULL);
                s->worker_timed = 1;
                pthread_cond_timedwait(&s->work_cv, &g_lock, &ts);
                s->worker_timed = 0;
                worker_unbatch_locked(s);
            } else {
                s->staging_wait |= s->staging;
                pthread_cond_wait(&s->work_cv, &g_lock);
                worker_unbatch_locked(s);
            }
        }
        worker_unbatch_locked(s);
        if (woke && simgpu_cfg.worker_delay_ns) {
            pthread_mutex_unlock(&g_lock);
            worker_starve();
            pthread_mutex_lock(&g_lock);
        }
        woke = 0;
        if (s->staging)
            continue; /* another thread runs an op of s: the next starts from its end */
        /* The ops in flight end before a host function or collective starts (and wake
         * their waiters); the other ops run from their end without waiting for it. */
        if (stream_settle_locked(s, simgpu_now_ns()) && !(s->head && op_runs_ahead(s->head))) {
            uint64_t e = s->inflight_tail->run_end;
            pthread_mutex_unlock(&g_lock);
            simgpu_sleep_until(e);
            pthread_mutex_lock(&g_lock);
            woke = 1;
            continue;
        }
        if (!s->head) {
            if (s->destroyed)
                break;
            continue;
        }
        op = s->head;
        /* The head is not held meanwhile: a waiter may run it. */
        if ((pending = dep_pending(op, &dep_end)) >= 0) {
            struct simgpu_dep dep = op->deps[pending];
            wait_done_locked(dep.stream, dep.seq);
            continue;
        }
        s->worker_busy = 1;
        if (op->kind == SIMGPU_OP_GRAPH) {
            graph_expand_locked(s, op);
            s->worker_busy = 0;
            continue;
        }
        start = u64max(u64max(s->last_end, op->enqueue_ns), dep_end);
        skip = d->sticky != cudaSuccess && op->kind != SIMGPU_OP_EVENT_RECORD &&
               op->kind != SIMGPU_OP_EVENT_WAIT;
        pthread_mutex_unlock(&g_lock);
        end = start;
        if (!skip)
            failed = op_execute(op, s, start, &end);
        pthread_mutex_lock(&g_lock);
        op_finish_locked(s, op, start, end, failed, skip);
        s->worker_busy = 0;
    }
    s->worker_started = 0;
    pthread_mutex_unlock(&g_lock);
    return NULL;
}

cudaError_t
enqueue_nowake_locked(struct simgpu_stream *s, struct simgpu_op *op, uint64_t now, int *wake)
{
    struct simgpu_device *d = s->dev;
    *wake = 0;
    if (s->is_legacy) {
        for (struct simgpu_stream *t = d->streams; t; t = t->next_all)
            if (t != s && !(t->flags & cudaStreamNonBlocking) &&
                (stream_settle_locked(t, now), t->tail_seq > t->done_seq) &&
                op_add_dep(op, t, t->tail_seq))
                return cudaErrorMemoryAllocation;
    } else if (!(s->flags & cudaStreamNonBlocking) && d->legacy &&
               (stream_settle_locked(d->legacy, now), d->legacy->tail_seq > d->legacy->done_seq)) {
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
        s->worker = th;
        s->worker_pid = getpid();
        s->worker_started = 1;
    }
    op->enqueue_ns = now;
    op->seq = ++s->tail_seq;
    op->next = NULL;
    if (s->tail) {
        s->tail->next = op; /* the worker has a head op: it is not waiting for work */
    } else {
        s->head = op;
        s->device_bound = s->inflight && now < s->inflight_tail->run_end;
        /* A worker in a timed wait wakes at the in-flight op's end by itself. */
        *wake = !s->worker_timed;
    }
    s->tail = op;
    return cudaSuccess;
}

/* Appends op to s as enqueued at host time now (starting the worker if needed) and
 * signals the stream's worker, which runs it once the caller releases g_lock.  Caller
 * holds g_lock and checked capture and the sticky error.  On failure op is not enqueued
 * and still the caller's. */
cudaError_t
enqueue_at_locked(struct simgpu_stream *s, struct simgpu_op *op, uint64_t now)
{
    int wake;
    cudaError_t rc = enqueue_nowake_locked(s, op, now, &wake);
    if (wake)
        pthread_cond_signal(&s->work_cv);
    return rc;
}

cudaError_t
enqueue_span_locked(struct simgpu_stream *s, struct simgpu_op *op, uint64_t nseq, int *wake)
{
    cudaError_t rc = enqueue_nowake_locked(s, op, simgpu_now_ns(), wake);
    if (rc == cudaSuccess)
        s->tail_seq += nseq - 1;
    return rc;
}

/* Appends op to s and wakes the worker; caller holds g_lock and checked capture. */
cudaError_t
enqueue_locked(struct simgpu_stream *s, struct simgpu_op *op)
{
    return enqueue_at_locked(s, op, simgpu_now_ns());
}

/* Makes s's sleeping worker, about to be woken for a memset too large for the launching
 * thread (SIMGPU_INLINE_MEMSET_BYTES) or a copy of more bytes than that (every copy is the
 * worker's), wake behind that thread: SCHED_BATCH until it runs
 * (stream_worker undoes it), as a woken batch thread does not preempt the running one.
 * Else, on a busy host, the worker woken by the launch takes the launching thread's CPU
 * for as long as it sets the bytes (hundreds of microseconds a megabyte), where a real
 * cudaMemsetAsync returns in microseconds.  The memset's device time is the model's either
 * way.  Caller holds g_lock; s's worker started (in this process: a forked child has no
 * such thread, and its id may name another). */
static void
worker_wake_behind_locked(struct simgpu_stream *s)
{
    struct sched_param sp = {0};
    if (!s->worker_batch && s->worker_pid == getpid() && /* not a forked child's copy */
        pthread_setschedparam(s->worker, SCHED_BATCH, &sp) == 0)
        s->worker_batch = 1;
}

int
launch_inline_locked(struct simgpu_stream *s, struct simgpu_op *op)
{
    /* An event op behind ops in flight stays the worker's: woken for it, the worker waits
     * for their end in a timed wait, so that an op launched next that it must run (a large
     * memset) wakes nobody and is run at the device's time, not at its launch, where the
     * worker takes the launching thread's CPU (test_wake's memset case). */
    int event = op->kind == SIMGPU_OP_EVENT_RECORD || op->kind == SIMGPU_OP_EVENT_WAIT;
    return !op->next &&
           (op->kind == SIMGPU_OP_KERNEL || (op->kind == SIMGPU_OP_MEMSET && op->u.memset.cheap) ||
            (event && !stream_settle_locked(s, simgpu_now_ns()))) &&
           run_inline_locked(s, op, op->seq);
}

cudaError_t
simgpu_enqueue(struct simgpu_stream *s, struct simgpu_op *op)
{
    cudaError_t rc;
    int wake = 0;
    pthread_mutex_lock(&g_lock);
    if (s->capture) {
        graph_append_locked(s->capture, op, s->capture_slot);
        pthread_mutex_unlock(&g_lock);
        return cudaSuccess;
    }
    rc = s->dev->sticky;
    if (rc == cudaSuccess)
        rc = enqueue_nowake_locked(s, op, simgpu_now_ns(), &wake);
    if (wake && launch_inline_locked(s, op))
        wake = 0;
    if (wake && ((op->kind == SIMGPU_OP_MEMSET && !op->u.memset.cheap) ||
                 (op->kind == SIMGPU_OP_MEMCPY && op->u.memcpy.bytes > SIMGPU_INLINE_MEMSET_BYTES)))
        worker_wake_behind_locked(s);
    pthread_mutex_unlock(&g_lock);
    /* After the unlock, so that the worker does not wake into a held lock (the stream
     * outlives its handle: the signal cannot reach freed memory). */
    if (wake)
        pthread_cond_signal(&s->work_cv);
    if (rc != cudaSuccess)
        op_free(op);
    return rc;
}

/* ---- streams ------------------------------------------------------------------------ */
/* 1 when s is a live stream of some device.  Needs no lock: streams are only ever added
 * (published at the head of their device's list) and never freed. */
static int
stream_live(const struct simgpu_stream *s)
{
    for (int i = 0; i < simgpu_cfg.device_count; i++)
        for (struct simgpu_stream *t = __atomic_load_n(&g_dev[i].streams, __ATOMIC_ACQUIRE); t;
             t = t->next_all)
            if (t == s)
                return !__atomic_load_n(&t->destroyed, __ATOMIC_ACQUIRE);
    return 0;
}

cudaError_t
simgpu_stream_resolve(cudaStream_t h, int ptds, struct simgpu_stream **out)
{
    struct simgpu_device *d;
    cudaError_t rc = cudaSuccess;
    int per_thread = h == cudaStreamPerThread || (ptds && (h == NULL));
    simgpu_init();
    d = &g_dev[t_dev];
    /* Launch fast path, without g_lock: an initialised device's legacy stream, the
     * thread's own per-thread stream once made, and the lock-free stream_live. */
    if (__atomic_load_n(&d->inited, __ATOMIC_ACQUIRE) && (!per_thread || t_ptds[t_dev])) {
        if (per_thread)
            *out = t_ptds[t_dev];
        else if (h == NULL || h == cudaStreamLegacy)
            *out = d->legacy;
        else if (stream_live((struct simgpu_stream *)h))
            *out = (struct simgpu_stream *)h;
        else
            rc = cudaErrorInvalidResourceHandle;
        return rc;
    }
    pthread_mutex_lock(&g_lock);
    d = device_locked(t_dev);
    if (per_thread) {
        if (!t_ptds[t_dev])
            t_ptds[t_dev] = stream_alloc(d, 0, 0);
        *out = t_ptds[t_dev];
        if (!*out)
            rc = cudaErrorMemoryAllocation;
    } else if (h == NULL || h == cudaStreamLegacy) {
        *out = d->legacy;
    } else if (stream_live((struct simgpu_stream *)h)) {
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
    if (!stream_live(s) || s->is_legacy) {
        pthread_mutex_unlock(&g_lock);
        return cudaErrorInvalidResourceHandle;
    }
    /* The struct stays allocated: pending ops of other streams may depend on it. */
    __atomic_store_n(&s->destroyed, 1, __ATOMIC_RELEASE);
    pthread_cond_signal(&s->work_cv);
    pthread_mutex_unlock(&g_lock);
    return cudaSuccess;
}

/* Waits until s->done_seq >= target; caller holds g_lock.  The waiter runs s's head
 * itself where it can (run_inline_locked), waits for the stream a pending dependency
 * names, and completes ops in flight at their end, so that it returns at the work's
 * modeled end whether or not the workers had a CPU; its target in s->wake_seq (all
 * waiters' smallest) makes s's worker wake the waiters once, at the first target. */
void
wait_done_locked(struct simgpu_stream *s, uint64_t target)
{
    int chase = 0; /* the worker was late (the ops in flight ended, ops still queued) */
    for (;;) {
        int flying = stream_settle_locked(s, simgpu_now_ns());
        if (s->done_seq >= target)
            break;
        /* With ops in flight the worker goes on from their end: the head is left to it
         * until it is late (chase), as each op a waiter runs is host time it takes. */
        if (s->head && s->head->seq <= target && !s->worker_busy && !s->staging &&
            (!flying || chase)) {
            uint64_t dep_end;
            int pending;
            if (run_inline_locked(s, s->head, target))
                continue;
            /* The head waits for another stream: wait for that one as for s. */
            if ((pending = dep_pending(s->head, &dep_end)) >= 0) {
                struct simgpu_dep dep = s->head->deps[pending];
                wait_done_locked(dep.stream, dep.seq);
                continue;
            }
        }
        if (target < s->wake_seq)
            s->wake_seq = target;
        /* (An op being run by another thread has no end yet.) */
        if (flying && flight_end_locked(s, target) != UINT64_MAX) {
            /* Until the end of the op waited for, or of the last in flight before it: the
             * worker is late if ops are still queued then (the device's clock has caught
             * up with it), and the waiter runs them from there. */
            uint64_t until = flight_end_locked(s, target), seen = s->done_seq;
            struct timespec ts;
            ts.tv_sec = (time_t)(until / 1000000000ULL);
            ts.tv_nsec = (long)(until % 1000000000ULL);
            pthread_cond_timedwait(&s->done_cv, &g_lock, &ts);
            if (s->done_seq == seen && s->head && simgpu_now_ns() >= until)
                chase = 1;
            continue;
        }
        if (flying && !s->worker_timed)
            pthread_cond_signal(&s->work_cv);
        s->staging_wait |= s->staging;
        pthread_cond_wait(&s->done_cv, &g_lock);
    }
}
