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
 * A collective record is a host call (a node on its thread) or a device-timed record (no
 * host node; its kernel takes part) as its value says (DPRO_COLL_TIMING_HOST / DEVICE);
 * for imports made before that field (meta source "*-import", no record marked
 * device-timed) a record on a thread is a host call unless a device op of its
 * correlation has exactly its times.
 * Host API calls mean what libdprotrace's dpro_api_classify says of their names (every
 * spelling: _ptsz, _ptds, _vN, driver, HIP).
 * Collectives are matched by (communicator, operation, collective ordinal): the
 * collector numbers every NCCL call of a communicator, send/recv included, and ranks make
 * different send/recv calls, so the builder numbers a rank's collectives without its
 * send/recv calls (build_coll_seq).
 * Point-to-point (build_p2p_scan, build_match_p2p): NCCL pairs the k-th send from a to b
 * on a communicator with the k-th recv on b from a, whatever else either rank did; so
 * does the builder, per channel (communicator, src, dst), not by sequence number. The
 * device op that carries a send or recv (its own kernel, or for calls inside
 * ncclGroupStart/End the kernel the group launched, shared by the calls of the group on
 * that stream) becomes a participant of a group with its peer's: the transfer starts
 * when both are ready and takes the fitted p2p cost (replay.c). A kernel carrying
 * several transfers (a grouped send+recv) joins its peers' kernels into one group (the
 * exchange starts when all of them are ready), unless that would put two ops of one
 * rank into one group (then the pair is left unmodelled and counted). A send or recv
 * whose peer's record is missing (its rank's trace is absent or ends early) and records
 * without a peer (imported "SendRecv" kernels: neither peer nor direction is known)
 * keep their measured durations, with a warning.
 * Launch-queue backpressure: a launch call cannot return while the device's queue of
 * pending operations is full (CUDA holds about 1024 per stream); on a device-bound job
 * the host runs that far ahead and its launch calls take as long as a device op. Where
 * the trace shows it (build_launch_queue), a launch gets the edge "the op Q places
 * earlier in its queue finished -> the launch ends", so a faster or slower device moves
 * the host with it instead of pinning it to the measured call durations.
 * Timing parameters come from the measured, aligned times: host gaps, launch latency
 * (per op when the stream was idle, else the rank's pure submission latency, see
 * build_submission_latency), blocking calls' own cost after their wait, and each
 * group's measured transfer (end - last arrival).
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

/* Launch-queue inference of one rank (build_launch_queue). */
typedef struct build_queue_info {
    int32_t depth;          /* Q: ops a queue holds; 0 when no backpressure was seen */
    int per_stream;         /* 1: one queue per stream, 0: one per device (the rank) */
    int32_t long_calls;     /* launch calls longer than long_ns */
    int32_t explained;      /* of those, the ones that found their queue full (Q +- Q/8) */
    int32_t edges;          /* queue edges added (calls flagged DFG_F_QUEUED) */
    int32_t held;           /* of those, calls that waited for their queue in the trace */
    int64_t launch_cost_ns; /* a launch call's normal cost (10th percentile) */
    int64_t long_ns;        /* threshold of a long call */
} build_queue_info;

/* Infers the launch queues of rank r of g from its measured times (mstart/mend of the
 * host nodes that launched device ops, mend of the ops) and models them with edges;
 * call it on a built graph before its timing is derived (build_derive_timing).
 *
 * For every launch call, U = the ops launched before it into the same queue (a stream,
 * or the rank's device) that had not finished when it started. A call is long when it
 * took more than max(BQ_LONG_MIN_NS, BQ_LONG_FACTOR x the normal launch cost). If the
 * long calls are backpressure, their U clusters at the queue's capacity: Q is the
 * median U over the long calls; it is accepted when at least BQ_MIN_LONG long calls
 * exist, Q >= BQ_MIN_DEPTH (a real queue holds hundreds to thousands of ops) and at
 * least half of the long calls have U within Q +- Q/8. Both scopes are tried; the one
 * that explains more long calls wins (a stream on a tie).
 *
 * With Q accepted, every launch call k of the rank (its first op at position k of its
 * queue, k >= Q) gets the edge op(k - Q) -> call and the flag DFG_F_QUEUED (the edge
 * delays its end, dfg.h), unless that op ended after the call (the trace contradicts
 * it): the call cannot end before op k - Q has made room. For the calls that found their
 * queue full (op k - Q unfinished when they started) build_derive_timing then takes as
 * intrinsic duration what they took after op k - Q ended, i.e. the normal launch cost,
 * not the wait. Edges on calls that did not wait cost nothing in the replay of the trace
 * and hold the host back when a what-if slows the device down.
 * info (may be NULL) receives what was found. Returns 0 or -1 (out of memory). */
int build_launch_queue(dfg *g, int32_t r, build_queue_info *info);

/* Rank r's pure submission latency, ns: the time from the start of a launch call to the
 * earliest its op can start on an idle device. See build.c (LAT_PCT) for the estimator.
 * 0 when no op qualifies. */
int64_t build_submission_latency(const dfg *g, int32_t r);

/* Derives gap, lat and dur of every node and the groups' measured transfer from the
 * measured times, the launch links and the edges (build_dfg calls it after
 * build_launch_queue; exposed for tests that build graphs by hand). Returns 0 or -1. */
int build_derive_timing(dfg *g);

/* Counts into counts[r] (for r in [0, n_ranks), zeroed here) the device nodes of rank r
 * whose latency after their launch call is held at its cap, 2^31 - 1 ns (2.1 s; dfg_lat
 * is 32 bits): ops measured to start longer than that after their launch with nothing in
 * the graph holding them, which the replay then starts earlier than measured. One pass
 * over the nodes. build_dfg warns once per rank with any. Cannot fail. */
void build_count_capped_lats(const dfg *g, int32_t *counts, int32_t n_ranks);

/* Counts into counts[r] (for r in [0, n_ranks), zeroed here) the device nodes of rank r
 * measured to start more than 1 us before the measured end of an edge predecessor of
 * their rank (an op they wait for: the event record behind a stream wait, the gradient
 * kernel before its all-reduce), and into worst_ns[r] (zeroed here) the largest such
 * lead. The trace then contradicts its own dependencies (a wrong dependency, or a device
 * or collector that broke stream semantics): the replay, which holds every dependency,
 * starts those ops later than measured, so even the exact replay misses the trace. One
 * pass over the edges and one over the nodes. build_dfg warns once per rank with any.
 * Returns 0, or -1 when out of memory (counts and worst_ns then zero). */
int build_count_early_starts(const dfg *g, int32_t *counts, int64_t *worst_ns, int32_t n_ranks);

/* Earliest aligned event time of the job (the graph's time 0), in the ranks' aligned
 * clock. */
int64_t build_time_origin(const job *j, const int64_t *offset_ns);

/* The start of the first host call, collective or device op among the n events ev (in
 * start order) into *start_ns: returns 1, or 0 when there is none. What
 * build_time_origin takes of each rank. */
int build_first_op(const job_event *ev, size_t n, uint64_t *start_ns);

/* Payload bytes of a collective event as the cost model takes them (count x element size,
 * x nranks for gathers and scatters; else its byte count); saturates at INT64_MAX. */
int64_t build_collective_bytes(const job_event *ev, int32_t nranks);

/* Bounds of what the builder takes: times (local, and local plus the rank's clock
 * offset) within +-2^62 ns (146 years: sums of a few of them stay in 64 bits), a
 * collective's payload at most 2^50 bytes (1 PiB). */
#define BUILD_TIME_LIMIT ((int64_t)1 << 62)
#define BUILD_BYTES_LIMIT ((int64_t)1 << 50)

/* Checks that the events of j are within the bounds above with the per-rank clock offsets
 * (NULL: none), so that the builder's arithmetic cannot overflow; a rank held compact
 * (job_rank.wire) is expanded while checked. Returns 0, -1 with errbuf naming the file,
 * the event and what is out of range, or -2 out of memory. */
int build_check_input(job *j, const int64_t *offset_ns, char *errbuf, size_t errlen);

/* One end of a point-to-point transfer, as one rank's trace shows it. */
typedef struct build_p2p_part {
    uint64_t comm;     /* communicator hash */
    int32_t src, dst;  /* sender and receiver, as ranks of the communicator */
    int32_t rank;      /* job rank whose trace holds this end */
    uint8_t is_send;   /* 1: the send end, 0: the recv end */
    uint64_t ordinal;  /* k: this end is the k-th (from 0) of its rank on (comm, src, dst) */
    int64_t bytes;     /* payload */
    size_t call;       /* event index of the ncclSend / ncclRecv record */
    int64_t device;    /* event index of the device op that carries it; -1: none */
    int32_t n_sharing; /* transfers that device op carries (grouped calls: > 1) */
    int32_t node;      /* graph node of that device op; -1: none (set by the builder) */
} build_p2p_part;

/* The point-to-point transfers of one rank (build_p2p_scan). */
typedef struct build_p2p {
    build_p2p_part *part; /* in call order */
    size_t n;
    size_t no_peer; /* send/recv records naming no peer (peer < 0) */
    uint64_t *key;  /* n_key (comm, seq) pairs of the send/recv calls, sorted */
    size_t n_key;
} build_p2p;

/* Lists the send/recv transfers of rank jr (job rank `rank`) into *p (free with
 * build_p2p_free). Its rank in a communicator comes from the trace's communicator table
 * (the job rank when the table does not say). The device op of a call is the op with its
 * correlation id; a call without one (made inside ncclGroupStart/End) is carried by the
 * first device op on its stream launched from its thread by a later call (ncclGroupEnd),
 * or by none if that call launches onto other streams only. Records with peer < 0 are
 * counted in no_peer and not listed. Returns 0 or -1 (out of memory; *p is then empty). */
int build_p2p_scan(const job_rank *jr, int32_t rank, build_p2p *p);

void build_p2p_free(build_p2p *p);

/* The ordinal of collective event e among its rank's collectives on e->comm: e->seq less
 * the number of that rank's send/recv calls (p, with a peer) on the communicator that
 * came before it (seq < e->seq). Equal on every rank for the same collective even when
 * the ranks made different send/recv calls, as pipeline-parallel jobs do. */
uint64_t build_coll_seq(const build_p2p *p, const job_event *e);

/* A 64-bit name of the channel (comm, src, dst) that never equals a communicator hash in
 * practice: clock alignment matches point-to-point ends by (channel, ordinal) the way it
 * matches collectives by (communicator, ordinal). */
uint64_t build_p2p_channel(uint64_t comm, int32_t src, int32_t dst);

/* What point-to-point matching did (build_match_p2p). ends, matched and unmatched count
 * transfer ends (a send or a recv), the others pairs of ends or groups. */
typedef struct build_p2p_stats {
    int64_t ends;           /* ends given (with a peer) */
    int64_t matched;        /* ends paired with their peer's end */
    int64_t unmatched;      /* ends whose peer's end is in no trace */
    int64_t no_device;      /* pairs with no device op in the graph on one side */
    int64_t conflicts;      /* pairs left unmodelled: they would tie two ops of one rank */
    int64_t bytes_differ;   /* pairs whose ends disagree on the size (the larger is taken) */
    int64_t modelled;       /* pairs modelled in groups */
    int32_t groups;         /* groups made (pairs: groups of two device ops) */
    int32_t wide_groups;    /* of those, groups of more than two ops (grouped calls) */
    int64_t no_peer;        /* records naming no peer, not among the ends (build_dfg only) */
    build_p2p_part example; /* the first unmatched end (valid when unmatched > 0) */
} build_p2p_stats;

/* Pairs the ends in parts[0..n) (all ranks; node set) and makes the groups of g (see the
 * top of this file): op DPRO_COLL_SEND, nranks = the ops in the group, bytes = the most any
 * member moves (the sum over the transfers it carries), comm and seq of its first pair
 * (seq: the pair's ordinal on its channel); the sender of that pair is the group's first
 * participant. Call it on a built graph before build_derive_timing. Reorders parts.
 * st (may be NULL) receives the counts. Returns 0 or -1 (out of memory). */
int build_match_p2p(dfg *g, build_p2p_part *parts, size_t n, build_p2p_stats *st);

/* Restores the event dependencies g lacks when the builder could not resolve event
 * records and waits to streams (it knows a call's stream only by the id CUPTI reports: a
 * Kineto import's runtime calls carry no stream or event, and without cudaStreamGetId
 * the collector records the legacy default stream as handle 0, which no device op has):
 * with event records in the trace but no device-to-device edge at all, the DDP pattern is
 * rebuilt from call order on each thread (calls that order nothing on the device, such as
 * cudaStreamIsCapturing and cudaEventQuery, may come between the record and the wait):
 *   record; wait; collective   the collective waits for the last kernel launched on
 *                              that thread before the record (a gradient bucket);
 *   record; wait; kernel       the kernel (or copy, or memset) waits for the last
 *                              collective of the rank launched before the record (the
 *                              optimizer, or the copy out of the bucket, waits for the
 *                              gradients).
 * The idle time the restored dependency explains is taken out of the waiting op's
 * measured stream gap, and its launch latency (which also held the wait) becomes the
 * rank's median kernel launch latency at most. Call it on build_dfg's graph (it
 * finalizes g when it repairs; replay_open calls it). Returns the number of edges added,
 * or -1 when out of memory. */
int64_t build_repair_event_edges(dfg *g);

/* A caller's look at a rank's events (jr->events, expanded, in trace order) once its
 * nodes are built and before build_dfg releases or holds them: ctx the caller's, shift_ns
 * what puts an event's time on the graph's clock (the rank's clock offset less the
 * graph's time 0). Returns 0, or -1 (out of memory: the build fails). */
typedef int (*build_take_fn)(void *ctx, const job_rank *jr, int32_t rank, int64_t shift_ns);

/* Builds g (uninitialised on entry) from the loaded job with per-rank clock offsets
 * (aligned = local + offset_ns[r]; NULL: none) and iteration boundaries (bounds[r],
 * may be NULL). Times in g are relative to the earliest aligned event. Problems that
 * leave a partial graph (collectives with missing or disagreeing participants, send/recv
 * without their peer) are recorded with job_warn; p2p (may be NULL) receives what
 * point-to-point matching did. With release non-zero each rank's events are reduced to
 * its markers and memory events (job_rank_keep_ranges) as soon as its nodes are built,
 * so that the events and the graph do not both peak; take (may be NULL) is called with
 * take_ctx on each rank's events before that. A rank held compact (job_rank.wire) is
 * expanded for each pass over it, and kept expanded after its nodes without release.
 * Returns 0, or -1 when out of memory or take failed (g freed). */
int build_dfg(job *j, const int64_t *offset_ns, const build_bounds *bounds, int release,
              build_take_fn take, void *take_ctx, dfg *g, build_p2p_stats *p2p);

#endif
