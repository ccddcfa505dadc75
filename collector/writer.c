/*
 * writer.c: the background writer thread: drains the rings and CUPTI's buffers into the
 * trace, commits every DPRO_FLUSH_MS, answers flush requests, finishes the file at exit.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

/* Background thread state. */
pthread_mutex_t coll_bg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t coll_bg_wake; /* on CLOCK_MONOTONIC: coll_wake_init */
pthread_cond_t coll_bg_done = PTHREAD_COND_INITIALIZER;
static pthread_t coll_bg_thread;
pthread_mutex_t coll_work_lock = PTHREAD_MUTEX_INITIALIZER;
_Atomic int coll_forks_waiting;
int coll_bg_running;        /* under coll_bg_lock */
uint64_t coll_flush_asked;  /* under coll_bg_lock: flush requests */
uint64_t coll_flush_served; /* under coll_bg_lock */
_Atomic int coll_bg_stop;   /* ask the thread to finish and close */
_Atomic int coll_bg_finished;
_Atomic int coll_bg_started;
_Atomic int coll_sigterm_flag;
static int coll_atexit_done;
pthread_once_t coll_process_once = PTHREAD_ONCE_INIT;

static void *coll_bg_main(void *arg);
static void coll_exit_handler(void);

/* (Re)initialises coll_bg_wake so that its timed waits use CLOCK_MONOTONIC. */
void
coll_wake_init(void)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&coll_bg_wake, &attr);
    pthread_condattr_destroy(&attr);
}

/* The background thread's own state (struct coll_bg_state: internal.h). */
struct coll_bg_state coll_bg;

/* Once per process (and again in a forked child): CUPTI, the exit handler. */
void
coll_process_start(void)
{
    if (coll_cfg.cupti && coll_cfg.cuda)
        cupti_start();
    if (!coll_atexit_done) {
        coll_atexit_done = 1;
        atexit(coll_exit_handler);
    }
}

/* Whether this process started a writer thread (1), tried and failed with none started
 * yet (-1: the records wait in the rings for a later start, or for coll_bg_write_inline
 * at exit or exec), or has not tried (0). Under coll_bg_lock; 0 again in a fork child. */
int coll_bg_mode;

/* Starts the background thread if it is not running. A failed start (pthread_create: the
 * job's threads or RLIMIT_NPROC exhausted) is said once; recording goes on into the rings
 * (a full ring drops and counts), the next thread's first hook tries again, and if no
 * start succeeds the exit (or an exec) writes the trace in the calling thread. */
void
coll_bg_ensure(void)
{
    pthread_mutex_lock(&coll_bg_lock);
    if (!coll_bg_running && !atomic_load(&coll_bg_stop)) {
        pthread_attr_t attr;
        sigset_t all, old;
        pthread_attr_init(&attr);
        sigfillset(&all);
        /* The thread is born with every signal blocked: SIGTERM goes to the job. */
        pthread_sigmask(SIG_SETMASK, &all, &old);
        atomic_store(&coll_bg_started, 0);
        int err = EAGAIN;
        if (coll_test_start_fails > 0)
            coll_test_start_fails--; /* testing only: this attempt fails */
        else
            err = pthread_create(&coll_bg_thread, &attr, coll_bg_main, NULL);
        if (err == 0) {
            coll_bg_running = 1;
            coll_bg_mode = 1;
        } else if (coll_bg_mode == 0) {
            coll_bg_mode = -1;
            coll_warn("cannot start the writer thread (%s); recording goes on into the threads' "
                      "buffers (full ones drop and count), written when a later start succeeds "
                      "or at exit",
                      strerror(err));
        }
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        pthread_attr_destroy(&attr);
    }
    pthread_mutex_unlock(&coll_bg_lock);
}

/* Reads /proc/self/task/TID/comm into name. */
static void
coll_thread_name(uint32_t tid, char *name, size_t size)
{
    char path[64];
    name[0] = '\0';
    snprintf(path, sizeof path, "/proc/self/task/%u/comm", tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, name, size - 1);
    close(fd);
    if (n < 0)
        n = 0;
    while (n > 0 && (name[n - 1] == '\n' || name[n - 1] == '\0'))
        n--;
    name[n] = '\0';
}

/* Drains one ring into the writer; returns the records consumed. */
static uint64_t
coll_drain_ring(dpro_writer *w, struct coll_ring *ring)
{
    uint64_t head = atomic_load_explicit(&ring->head, memory_order_acquire);
    uint64_t tail = atomic_load_explicit(&ring->tail, memory_order_relaxed);
    uint64_t start = tail;
    if (head != tail && !ring->named && w) {
        char name[64];
        coll_thread_name(ring->tid, name, sizeof name);
        dpro_writer_add_thread(w, ring->tid, name);
        ring->named = 1;
    }
    while (tail < head) {
        const struct coll_rec *r = &ring->slots[tail & ring->mask];
        uint32_t ncont = r->ncont;
        if (tail + 1 + ncont > head)
            break; /* cannot happen: slots are committed together */
        unsigned char cont[(COLL_KNAME_MAX / COLL_CONT_BYTES + 1) * COLL_CONT_BYTES];
        size_t len = 0;
        for (uint32_t i = 0; i < ncont && len + COLL_CONT_BYTES <= sizeof cont; i++) {
            memcpy(cont + len, &ring->slots[(tail + 1 + i) & ring->mask], COLL_CONT_BYTES);
            len += COLL_CONT_BYTES;
        }
        if (w && !coll_bg.failed)
            coll_convert(w, r, ring->tid, cont, len);
        tail += 1 + ncont;
    }
    atomic_store_explicit(&ring->tail, tail, memory_order_release);
    uint64_t dropped = atomic_load_explicit(&ring->dropped, memory_order_relaxed);
    if (dropped != ring->dropped_reported && w && !coll_bg.failed) {
        dpro_writer_add_drops(w, ring->tid, "ring_full", dropped - ring->dropped_reported);
        ring->dropped_reported = dropped;
    }
    return tail - start;
}

/* Returns the first ring of the registry. Only this lock-held read is shared with the
 * threads that register rings: they only ever push at the head, so the list from this
 * ring on changes only by the writer's own unlinking (coll_reap_rings). */
static struct coll_ring *
coll_rings_snapshot(void)
{
    pthread_mutex_lock(&coll_registry_lock);
    struct coll_ring *first = coll_rings;
    pthread_mutex_unlock(&coll_registry_lock);
    return first;
}

/* Unlinks the rings marked reap (exited threads, drained) and frees them; the lock is held
 * only for the unlinking. */
static void
coll_reap_rings(void)
{
    struct coll_ring *gone = NULL;
    pthread_mutex_lock(&coll_registry_lock);
    struct coll_ring **link = &coll_rings;
    while (*link) {
        struct coll_ring *ring = *link;
        if (ring->reap) {
            *link = ring->next;
            ring->next = gone;
            gone = ring;
            continue;
        }
        link = &ring->next;
    }
    pthread_mutex_unlock(&coll_registry_lock);
    while (gone) {
        struct coll_ring *next = gone->next;
        free(gone);
        gone = next;
    }
}

/* Drains every ring with no collector lock held (conversion, interning, SQLite and name
 * lookups must never make a hook wait); frees the rings of exited threads once empty.
 * Returns the records consumed. With w NULL it drains nothing unless the output failed
 * (then it discards): the file is opened at the first look that finds a record pending,
 * and a thread's first record may be committed between a look that found none and this
 * drain (a first call that returns after the writer's look: a blocking call, an NVTX
 * range, a fork child descheduled in its first hook); it waits for the next look. */
static uint64_t
coll_drain_all(dpro_writer *w)
{
    uint64_t total = 0;
    int reap = 0, drain = w != NULL || coll_bg.failed;
    if (drain)
        coll_tsc_anchor();
    for (struct coll_ring *ring = coll_rings_snapshot(); ring; ring = ring->next) {
        int dead = atomic_load_explicit(&ring->dead, memory_order_acquire);
        if (drain)
            total += coll_drain_ring(w, ring);
        /* every record it committed before dying is drained */
        if (dead && atomic_load_explicit(&ring->head, memory_order_acquire) ==
                        atomic_load_explicit(&ring->tail, memory_order_relaxed)) {
            ring->reap = 1;
            reap = 1;
        }
    }
    if (reap)
        coll_reap_rings();
    return total;
}

/* Is there anything to write in any ring? */
static int
coll_rings_pending(void)
{
    int any = 0;
    for (struct coll_ring *r = coll_rings_snapshot(); r && !any; r = r->next)
        any = atomic_load_explicit(&r->head, memory_order_acquire) !=
              atomic_load_explicit(&r->tail, memory_order_relaxed);
    return any;
}

/* Writes the count of failed row writes into the meta when it changed (warned the first
 * time); always == 1 writes it even when 0 (the end of the file). */
static uint64_t coll_errors_written = UINT64_MAX; /* the count in the meta now */
static int coll_errors_warned;

static void
coll_write_errors(dpro_writer *w, int always)
{
    uint64_t n = atomic_load_explicit(&coll_writer_errors, memory_order_relaxed);
    if (w == NULL || coll_bg.failed || (n == coll_errors_written && !always))
        return;
    if (n && !coll_errors_warned) {
        coll_errors_warned = 1;
        coll_warn("a row of the trace could not be written (%s); counted in meta writer_errors",
                  dpro_writer_errmsg(w));
    }
    if ((dpro_writer_set_meta_int)(w, "writer_errors", (int64_t)n) == DPRO_OK)
        coll_errors_written = n;
}

/* Flushes the writer; stops recording on error. */
static void
coll_writer_flush(void)
{
    coll_write_errors(coll_bg.w, 0);
    if (coll_bg.w && !coll_bg.failed && dpro_writer_flush(coll_bg.w) != DPRO_OK)
        coll_output_failed(coll_bg.w, "flushing the trace");
}

/* Final drain and close. */
static void
coll_bg_finish(void)
{
    if (coll_test_finish_pause_ms) {
        /* testing only: a writer slow to finish (a slow filesystem) */
        struct timespec pause = {(time_t)(coll_test_finish_pause_ms / 1000),
                                 (long)(coll_test_finish_pause_ms % 1000) * 1000000L};
        nanosleep(&pause, NULL);
    }
    if (coll_bg.w == NULL && !coll_bg.failed && coll_rings_pending())
        coll_bg.w = coll_open_output();
    cupti_flush(1);
    dpro_writer *w = coll_bg.failed ? NULL : coll_bg.w;
    coll_drain_all(w);
    if (w) {
        cupti_drain(w);
        nvtxi_finish(w);
        uint64_t rt, mono;
        coll_anchor(&rt, &mono);
        dpro_writer_set_meta_int(w, "anchor_end_realtime_ns", (int64_t)rt);
        dpro_writer_set_meta_int(w, "anchor_end_monotonic_ns",
                                 (int64_t)mono + coll_test_clock_offset_ns);
        cupti_write_meta(w, 1);
        coll_cpu_write_meta(w);
        coll_write_errors(w, 1);
    }
    if (coll_bg.w) {
        /* the last commit apart, so that a failure (a full disk) is told with its reason */
        if (!coll_bg.failed && dpro_writer_flush(coll_bg.w) != DPRO_OK)
            coll_output_failed(coll_bg.w, "writing the trace");
        if (dpro_writer_close(coll_bg.w) != DPRO_OK && !coll_bg.failed)
            coll_warn("closing the trace failed (the events committed before are kept)");
        coll_bg.w = NULL;
    }
    coll_umap_free(&coll_bg.names);
    coll_umap_free(&coll_bg.allocs);
    cupti_names_free();
}

/* The writer's state before its first drain in this process (a forked child's too). */
static void
coll_bg_reset(void)
{
    memset(&coll_bg, 0, sizeof coll_bg);
    atomic_store(&coll_writer_errors, 0);
    coll_errors_written = UINT64_MAX;
    coll_errors_warned = 0;
    stk_reset();
    nvtxi_reset();
    coll_cpu_reset();
}

/* Returns the writer's wait before its next drain: DPRO_DRAIN_MS while records come fast;
 * after a drain that took under 1/16 of a ring's slots (a job launching at the pace of
 * real kernels), twice the last wait, up to 4 x DPRO_DRAIN_MS (never past DPRO_FLUSH_MS).
 * Each wake-up is a timed futex wait, a timer and a clock anchor: at 5 ms, 200 a second in
 * every rank for a few records each. At the longest wait a ring of the default 32,768
 * slots still takes 1.6 M records a second without a drop, and the first busy drain goes
 * back to DPRO_DRAIN_MS. */
static uint32_t
coll_next_wait_ms(uint32_t wait_ms, uint64_t drained)
{
    uint32_t most = coll_cfg.drain_ms * 4;
    if (most > coll_cfg.flush_ms)
        most = coll_cfg.flush_ms;
    if (drained * 16 >= coll_cfg.ring_events || wait_ms < coll_cfg.drain_ms)
        return coll_cfg.drain_ms;
    return wait_ms * 2 < most ? wait_ms * 2 : most;
}

/* The writer thread: drains the rings and CUPTI's buffers into the writer (every
 * coll_next_wait_ms), every FLUSH_MS (or on request) commits; at stop or SIGTERM,
 * finishes the file. */
static void *
coll_bg_main(void *arg)
{
    (void)arg;
    coll_tls_state = 2;
#ifdef __GLIBC__
    pthread_setname_np(pthread_self(), "dpro-collector");
#endif
    coll_bg_reset();
    atomic_store(&coll_bg_started, 1); /* from here on it allocates only under coll_work_lock */
    uint64_t next_flush = coll_now() + (uint64_t)coll_cfg.flush_ms * 1000000ull;
    uint32_t wait_ms = coll_cfg.drain_ms;
    for (;;) {
        pthread_mutex_lock(&coll_bg_lock);
        if (!atomic_load(&coll_bg_stop) && coll_flush_asked == coll_flush_served &&
            !atomic_load(&coll_sigterm_flag)) {
            /* until the next drain, or the next commit if that comes first */
            uint64_t until_ns = coll_now() + (uint64_t)wait_ms * 1000000ull;
            if (until_ns > next_flush)
                until_ns = next_flush;
            struct timespec until = {.tv_sec = (time_t)(until_ns / 1000000000ull),
                                     .tv_nsec = (long)(until_ns % 1000000000ull)};
            pthread_cond_timedwait(&coll_bg_wake, &coll_bg_lock, &until);
        }
        uint64_t asked = coll_flush_asked;
        pthread_mutex_unlock(&coll_bg_lock);
        if (atomic_load(&coll_bg_stop) || atomic_load(&coll_sigterm_flag))
            break;
        if (atomic_load(&coll_forks_waiting)) {
            /* a fork takes the work lock first (a flush asked meanwhile waits for it) */
            struct timespec pause = {0, 100000};
            nanosleep(&pause, NULL);
            continue;
        }
        pthread_mutex_lock(&coll_work_lock);
        if (coll_bg.w == NULL && !coll_bg.failed && coll_rings_pending()) {
            coll_bg.w = coll_open_output();
            if (coll_bg.w == NULL) {
                coll_bg.failed = 1;
                atomic_store(&coll_recording, 0);
            }
        } else if (coll_bg.w == NULL && !coll_bg.failed && coll_test_drain_pause_ms) {
            /* testing only: the moment between this look and the drain, widened */
            struct timespec pause = {(time_t)(coll_test_drain_pause_ms / 1000),
                                     (long)(coll_test_drain_pause_ms % 1000) * 1000000L};
            nanosleep(&pause, NULL);
        }
        dpro_writer *w = coll_bg.failed ? NULL : coll_bg.w;
        wait_ms = coll_next_wait_ms(wait_ms, coll_drain_all(w));
        coll_cpu_sample(0);
        uint64_t now = coll_now();
        int flush_due = now >= next_flush || asked != coll_flush_served;
        if (flush_due) {
            if (w)
                cupti_flush(asked != coll_flush_served);
            if (w)
                cupti_drain(w);
            coll_drain_all(w);
            coll_writer_flush();
            next_flush = now + (uint64_t)coll_cfg.flush_ms * 1000000ull;
            pthread_mutex_lock(&coll_bg_lock);
            coll_flush_served = asked;
            pthread_cond_broadcast(&coll_bg_done);
            pthread_mutex_unlock(&coll_bg_lock);
        } else if (w) {
            cupti_drain(w);
        }
        pthread_mutex_unlock(&coll_work_lock);
    }
    pthread_mutex_lock(&coll_work_lock);
    coll_bg_finish();
    pthread_mutex_unlock(&coll_work_lock);
    atomic_store(&coll_bg_finished, 1);
    pthread_mutex_lock(&coll_bg_lock);
    coll_flush_served = coll_flush_asked;
    pthread_cond_broadcast(&coll_bg_done);
    pthread_mutex_unlock(&coll_bg_lock);
    return NULL;
}

/* No writer thread could start in this process: stops recording and writes the trace in
 * the calling thread (the drain, the file, its end), as the thread would have at its stop.
 * Once per process; the caller holds no collector lock. */
static void
coll_bg_write_inline(void)
{
    pthread_mutex_lock(&coll_bg_lock);
    int mine = coll_bg_mode == -1 && !coll_bg_running;
    if (mine) {
        coll_bg_mode = 0;               /* written: nothing more to write */
        atomic_store(&coll_bg_stop, 1); /* and no thread starts after */
    }
    pthread_mutex_unlock(&coll_bg_lock);
    if (!mine)
        return;
    atomic_store(&coll_recording, 0);
    int state = coll_tls_state;
    coll_tls_state = 2; /* this thread's calls from here on are the writer's */
    coll_bg_reset();
    pthread_mutex_lock(&coll_work_lock);
    coll_bg_finish();
    pthread_mutex_unlock(&coll_work_lock);
    coll_tls_state = state;
    atomic_store(&coll_bg_finished, 1);
}

/* Commits what is recorded and waits for it (up to 5 s); before an exec. With no writer
 * thread (its start failed), one more start is tried, then the trace written inline. */
void
coll_flush_now(void)
{
    if (getpid() != coll_pid)
        return; /* a vfork child shares our memory: leave the parent's thread alone */
    pthread_mutex_lock(&coll_bg_lock);
    int retry = coll_bg_mode == -1 && !coll_bg_running;
    pthread_mutex_unlock(&coll_bg_lock);
    if (retry)
        coll_bg_ensure();
    pthread_mutex_lock(&coll_bg_lock);
    if (coll_bg_running && !atomic_load(&coll_bg_finished)) {
        uint64_t ticket = ++coll_flush_asked;
        pthread_cond_signal(&coll_bg_wake);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 5;
        while (coll_flush_served < ticket && !atomic_load(&coll_bg_finished))
            if (pthread_cond_timedwait(&coll_bg_done, &coll_bg_lock, &until) == ETIMEDOUT)
                break;
    }
    pthread_mutex_unlock(&coll_bg_lock);
    coll_bg_write_inline();
}

/* Stops the background thread after a last drain and closes the trace (idempotent). The
 * exit waits for the writer at most DPRO_EXIT_WAIT_MS: past it the job exits anyway, said
 * once, and the trace keeps what the writer committed before (every DPRO_FLUSH_MS; a
 * reader reports that it ends early). With no writer thread, the trace is written here. */
static void
coll_shutdown(void)
{
    if (getpid() != coll_pid)
        return;
    pthread_mutex_lock(&coll_bg_lock);
    int running = coll_bg_running;
    coll_bg_running = 0;
    atomic_store(&coll_bg_stop, 1); /* no thread starts from here on */
    pthread_cond_signal(&coll_bg_wake);
    pthread_mutex_unlock(&coll_bg_lock);
    if (running) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        uint64_t ns = (uint64_t)until.tv_nsec + (uint64_t)coll_cfg.exit_wait_ms * 1000000ull;
        until.tv_sec += (time_t)(ns / 1000000000ull);
        until.tv_nsec = (long)(ns % 1000000000ull);
        if (pthread_timedjoin_np(coll_bg_thread, NULL, &until) != 0)
            coll_warn("the writer thread did not finish within DPRO_EXIT_WAIT_MS=%u ms; the job "
                      "exits, the trace keeps what was committed before (every DPRO_FLUSH_MS)",
                      coll_cfg.exit_wait_ms);
    }
    coll_bg_write_inline();
    atomic_store(&coll_recording, 0);
}

/* atexit: last drain, close. */
static void
coll_exit_handler(void)
{
    coll_shutdown();
}

/* Library unload or exit without atexit handlers run: same as coll_exit_handler. */
__attribute__((destructor)) static void
coll_destructor(void)
{
    coll_shutdown();
}
