/*
 * threadsched.h: the collector's per-thread scheduler samples (meta thread_sched,
 * docs/format.md), parsed once for every reader: dpro-info --threads sums them over each
 * thread's window, dpro-export draws them as counter tracks.
 */
#ifndef DPRO_REPLAY_THREADSCHED_H
#define DPRO_REPLAY_THREADSCHED_H

#include <stddef.h>
#include <stdint.h>

/* The latest sample time taken (us): one whose ns fit in int64 with room for a clock shift. */
#define THREAD_SCHED_MAX_US (INT64_MAX / 4000)

/* One reading of a thread's schedstat: CLOCK_MONOTONIC us (the trace's clock), its time
 * on a CPU us, its time runnable but waiting for a CPU on a runqueue us, its timeslices;
 * all since the thread's start. */
typedef struct thread_sched_sample {
    int64_t t_us, cpu_us, wait_us, slices;
} thread_sched_sample;

/* One traced thread's samples, in the order the text gives them (time order). */
typedef struct thread_sched {
    uint32_t tid;
    size_t n;                          /* at least 1 */
    const thread_sched_sample *sample; /* n of them, in the set's block */
} thread_sched;

/* Every thread of one trace's meta thread_sched. */
typedef struct thread_sched_set {
    thread_sched *thread;
    size_t n;
    thread_sched_sample *all; /* every thread's samples, one block */
} thread_sched_set;

/* Parses meta thread_sched text ("TID=T:R:W:S,T:R:W:S;TID=...") into *set (free it with
 * thread_sched_set_free). Returns 0, -1 out of memory, or k + 2 (k >= 0) when the k-th
 * thread (0-based) is malformed: not TID=, no sample, or a sample not four integers
 * T:R:W:S, each at least 0 (counters since the thread's start, a monotonic clock), T at
 * most THREAD_SCHED_MAX_US; so that a difference of two fields never overflows. On an
 * error *set is empty. */
int thread_sched_parse(const char *text, thread_sched_set *set);

/* Frees what thread_sched_parse gave and empties set. */
void thread_sched_set_free(thread_sched_set *set);

#endif
