/*
 * threadsched.c: per traced thread, what the scheduler gave it over time, so that a gap
 * in a thread's host work can be told apart: the thread ran, waited on a runqueue for a
 * CPU (another thread of the job, or of the host, had it), or slept. Read from Linux's
 * /proc/self/task/TID/schedstat (time on a CPU ns, time runnable on a runqueue ns,
 * timeslices) by the writer thread at coll_cpu_sample's samples, never on a hook's path.
 * The threads are those with a ring (they recorded at least once). A thread that exited
 * keeps its last figures. Bounded: COLL_SCHED_THREADS threads are followed, the others
 * are counted (thread_sched_dropped), and each keeps at most COLL_SCHED_SAMPLES samples,
 * thinned as cpu_samples are. Written as the meta row thread_sched when the file is
 * finished (docs/format.md). A kernel without schedstat (CONFIG_SCHED_INFO off) gives
 * no samples and no row.
 */
#include "config.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

/* Threads followed (32 KiB each, allocated when first seen); the samples each keeps (when full,
 * every other one is dropped and new ones are kept as far apart as the rest, as cpu_samples). */
#define COLL_SCHED_THREADS 64
#define COLL_SCHED_SAMPLES 1024
/* The least time between two readings of the threads (about 5 us a thread each: at this
 * spacing under 0.05 % of a CPU a thread), whatever the drains' pace. */
#define COLL_SCHED_MIN_SPACING_US 10000

/* One sample: CLOCK_MONOTONIC us (the trace's clock), time on a CPU us, time runnable
 * waiting on a runqueue us, timeslices. */
struct coll_sched_sample {
    int64_t t_us, run_us, wait_us, slices;
};

/* One followed thread. */
struct coll_sched_thread {
    uint32_t tid;
    int n;
    int64_t spacing_us; /* the least time between two kept samples */
    struct coll_sched_sample s[COLL_SCHED_SAMPLES];
};

static struct {
    struct coll_sched_thread *t[COLL_SCHED_THREADS]; /* malloc'd when first seen */
    int count;
    uint64_t dropped; /* threads not followed: the table full, or out of memory */
    int64_t last_us;  /* the last reading's time (0: none yet) */
} coll_sched;

/* Reads thread tid's schedstat into *s (t_us left alone). Returns 0, or -1 when it cannot
 * be read (the thread exited, no schedstat in this kernel). */
static int
coll_sched_read(uint32_t tid, struct coll_sched_sample *s)
{
    char path[64], text[96];
    long long run = 0, wait = 0, slices = 0;
    int rc = -1;
    snprintf(path, sizeof path, "/proc/self/task/%u/schedstat", tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, text, sizeof text - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n > 0) {
        text[n] = '\0';
        if (sscanf(text, "%lld %lld %lld", &run, &wait, &slices) == 3) {
            s->run_us = run / 1000;
            s->wait_us = wait / 1000;
            s->slices = slices;
            rc = 0;
        }
    }
    return rc;
}

/* Returns the followed thread of ring, a new one when first seen (NULL: not followed,
 * counted once). A ring's slot from before a reset (a new writer in this process) is
 * taken for a first sight. */
static struct coll_sched_thread *
coll_sched_find(struct coll_ring *ring)
{
    struct coll_sched_thread *th = NULL;
    int slot = ring->sched_slot;
    if (slot > 0 && slot <= coll_sched.count && coll_sched.t[slot - 1]->tid == ring->tid) {
        th = coll_sched.t[slot - 1];
    } else if (slot >= 0) {
        th = coll_sched.count < COLL_SCHED_THREADS ? calloc(1, sizeof *th) : NULL;
        if (th) {
            th->tid = ring->tid;
            coll_sched.t[coll_sched.count++] = th;
            ring->sched_slot = coll_sched.count;
        } else {
            coll_sched.dropped++;
            ring->sched_slot = -1;
        }
    }
    return th;
}

/* Adds sample s to th unless it comes sooner than th's spacing (force: always). */
static void
coll_sched_keep(struct coll_sched_thread *th, const struct coll_sched_sample *s, int force)
{
    if (!force && th->n > 0 && s->t_us - th->s[th->n - 1].t_us < th->spacing_us)
        return;
    if (th->n == COLL_SCHED_SAMPLES) {
        for (int i = 0; i < COLL_SCHED_SAMPLES / 2; i++)
            th->s[i] = th->s[2 * i];
        th->n = COLL_SCHED_SAMPLES / 2;
        th->spacing_us = (th->s[th->n - 1].t_us - th->s[0].t_us) / (th->n - 1);
    }
    th->s[th->n++] = *s;
}

void
coll_sched_reset(void)
{
    for (int i = 0; i < coll_sched.count; i++)
        free(coll_sched.t[i]);
    memset(&coll_sched, 0, sizeof coll_sched);
}

void
coll_sched_sample(int64_t t_us, int force)
{
    /* Only the writer unlinks rings (coll_reap_rings) and this is the writer: the list
     * from the head taken under the lock on is stable without it. */
    if (!force && coll_sched.last_us > 0 && t_us - coll_sched.last_us < COLL_SCHED_MIN_SPACING_US)
        return;
    coll_sched.last_us = t_us;
    pthread_mutex_lock(&coll_registry_lock);
    struct coll_ring *ring = coll_rings;
    pthread_mutex_unlock(&coll_registry_lock);
    for (; ring; ring = ring->next) {
        struct coll_sched_sample s = {.t_us = 0};
        if (atomic_load_explicit(&ring->dead, memory_order_acquire))
            continue; /* exited or exiting: its last figures stay */
        struct coll_sched_thread *th = coll_sched_find(ring);
        /* each reading its own time: one taken for all would be off by the readings
         * before it, and by any preemption of the writer among them */
        if (th && coll_sched_read(th->tid, &s) == 0) {
            s.t_us = coll_sample_now_us();
            coll_sched_keep(th, &s, force);
        }
    }
}

void
coll_sched_write_meta(dpro_writer *w)
{
    size_t cap = 64, len = 0;
    for (int i = 0; i < coll_sched.count; i++)
        cap += 24 + (size_t)coll_sched.t[i]->n * (4 * 21);
    char *buf = malloc(cap);
    for (int i = 0; buf && i < coll_sched.count; i++) {
        const struct coll_sched_thread *th = coll_sched.t[i];
        if (th->n == 0)
            continue;
        len += (size_t)snprintf(buf + len, cap - len, "%s%" PRIu32 "=", len ? ";" : "", th->tid);
        for (int k = 0; k < th->n; k++)
            len += (size_t)snprintf(
                buf + len, cap - len, "%s%" PRId64 ":%" PRId64 ":%" PRId64 ":%" PRId64,
                k ? "," : "", th->s[k].t_us, th->s[k].run_us, th->s[k].wait_us, th->s[k].slices);
    }
    if (buf && len > 0)
        dpro_writer_set_meta(w, DPRO_META_THREAD_SCHED, buf);
    if (coll_sched.dropped > 0)
        dpro_writer_set_meta_int(w, DPRO_META_THREAD_SCHED_DROPPED, (int64_t)coll_sched.dropped);
    free(buf);
}
