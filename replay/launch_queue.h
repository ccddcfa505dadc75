/*
 * launch_queue.h: the launch queue's depth Q inferred from a trace's times (prefix
 * launch_queue_). One implementation for the replay, which models the queue with edges
 * (build_launch_queue, build.h, where the method is described), and for dpro-info
 * --queue, which counts the calls a full queue held (analyses/queue.c): the same Q for
 * the same trace.
 */
#ifndef DPRO_REPLAY_LAUNCH_QUEUE_H
#define DPRO_REPLAY_LAUNCH_QUEUE_H

#include <stddef.h>
#include <stdint.h>

#define BQ_LONG_MIN_NS 50000 /* a launch call this long waited for something */
#define BQ_LONG_FACTOR 8     /* ... or this many times the normal launch cost */
#define BQ_MIN_LONG 8        /* long calls needed before a queue is believed */
#define BQ_MIN_DEPTH 64      /* smallest plausible queue capacity */

/* One queued op, as the caller describes it. */
typedef struct launch_queue_op {
    int64_t lstart, lend; /* its launch call's start and end */
    int64_t mend;         /* the op's end */
    int32_t launch;       /* its launch call (the ops of one call share it) */
    int32_t res;          /* its stream */
    int32_t id;           /* the caller's op, unique: orders ties, leads back */
    int blocking;         /* the call is synchronous: its length says nothing of the queue */
} launch_queue_op;

/* What launch_queue_infer found. */
typedef struct launch_queue {
    int32_t depth;          /* Q: ops a queue holds; 0 when no backpressure was seen */
    int per_stream;         /* 1: one queue per stream, 0: one per device */
    int32_t long_calls;     /* launch calls longer than long_ns (counted in device scope) */
    int32_t explained;      /* of those, the ones that found their queue full (Q +- Q/8) */
    int64_t launch_cost_ns; /* a launch call's normal cost (10th percentile) */
    int64_t long_ns;        /* threshold of a long call */
    /* the caller's ops, in the chosen scope's order */
    const launch_queue_op *ops;
    size_t n;
    /* per op: the ops earlier in its queue unfinished when its call started, for the
     * first op of each call in its queue; -1 for the others (owned: launch_queue_free) */
    int32_t *occ;
} launch_queue;

/* Infers Q from ops[0..n) (one device's launched ops, any order) into *lq. A queue is a
 * stream when lq->per_stream, else the whole device; the scope that explains more long
 * calls wins, a stream on a tie. ops is left sorted into that scope's queues (by stream
 * when per_stream, then by call start, launch and id; as the stream scope when no Q is
 * accepted) and lq keeps it (not owned) with the occupancy of each op in that order.
 * Returns 0, or -1 (out of memory) with nothing held; either way *lq is set and
 * launch_queue_free may be called on it. */
int launch_queue_infer(launch_queue *lq, launch_queue_op *ops, size_t n);

/* With Q accepted, the index of the op whose end the launch call of lq->ops[i] waited
 * for: the op Q places earlier in its queue, for the first op of each call in its
 * queue; -1 when there is none, it came from the same call or the trace says the call
 * did not wait for it (it ended after the call). */
ptrdiff_t launch_queue_waited_for(const launch_queue *lq, size_t i);

/* Frees what lq holds (not the ops); lq may be zeroed or as launch_queue_infer left it. */
void launch_queue_free(launch_queue *lq);

#endif
