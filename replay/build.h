/*
 * build.h: from per-rank traces to the global dataflow graph (prefix build_).
 *
 * Nodes (dfg.h): every host API call on its thread (calls nested in another call on the
 * same thread fold into the outer one), every kernel, copy and memset on its stream, and
 * for every collective call its first device operation as a participant of the group
 * (communicator hash, sequence number) shared by all ranks. Edges, from the host calls
 * in time order per rank:
 *   cudaEventRecord(e, s)          e := last device op launched on s so far
 *   cudaStreamWaitEvent(s, e)      e's op -> next device op launched on s (a wait
 *                                  recorded without its event handle waits for the
 *                                  event its thread recorded last)
 *   cudaEventSynchronize(e)        e's op -> the call (it blocks)
 *   cudaStreamSynchronize(s)       last op launched on s -> the call
 *   cudaDeviceSynchronize, cuCtxSynchronize   last op of every stream -> the call
 *   blocking cudaMemcpy* (no Async)           its own copy -> the call
 *   launch (correlation id)        host call -> its device ops (incl. graph launches)
 * Driver equivalents (cuEventRecord, cuStreamWaitEvent, ...) count the same.
 * Send/recv are not matched with their peers: their device ops keep their measured
 * durations (a limitation; all-rank collectives are matched).
 * Timing parameters come from the measured, aligned times: host gaps, launch latency
 * (per op when the stream was idle, else the rank's median), blocking calls' own cost
 * after their wait, and each group's measured transfer (end - last arrival).
 * Wake-ups between host threads (dfg.h, DFG_F_WAKEUP) are inferred last: a call after a
 * gap much longer than its thread's usual one (a blocking wait: an autograd engine
 * thread woken after the forward, a main thread woken when backward is done) is tied to
 * the call of another thread of the rank that ended last within the gap, and its gap
 * becomes the wake-up latency (start minus that call's end); build.c says the
 * thresholds. A what-if that shortens what the waker waited for then moves the woken
 * thread too, instead of pinning it to its measured gap.
 */
#ifndef DPRO_REPLAY_BUILD_H
#define DPRO_REPLAY_BUILD_H

#include <stddef.h>
#include <stdint.h>

#include "dfg.h"
#include "job.h"

/* Iteration boundaries of one rank for the builder: indices into the rank's events of
 * the event that closes each iteration (a marker: the iteration ends with the last host
 * call on its thread that ends within the marker; a device op or host call: the event
 * itself). A marker without an end (trace cut) closes nothing and is skipped. */
typedef struct build_bounds {
    int32_t n;
    const size_t *event_index;
} build_bounds;

/* Builds g (uninitialised on entry) from the loaded job with per-rank clock offsets
 * (aligned = local + offset_ns[r]; NULL: none) and iteration boundaries (bounds[r],
 * may be NULL). Times in g are relative to the earliest aligned event. Problems that
 * leave a partial graph (collectives with missing or disagreeing participants) are
 * recorded with job_warn. Returns 0, or -1 when out of memory (g freed). */
int build_dfg(job *j, const int64_t *offset_ns, const build_bounds *bounds, dfg *g);

/* Earliest aligned event time of the job (the graph's time 0), in the ranks' aligned
 * clock. */
int64_t build_time_origin(const job *j, const int64_t *offset_ns);

/* Payload bytes of a collective event as the cost model takes them. */
int64_t build_collective_bytes(const dpro_event *ev, int32_t nranks);

#endif
