/*
 * job_fold.h: alike ranks folded while they are read (prefix job_fold_; job.c uses it,
 * see job.h and replay.h, replay_fold).
 *
 * A rank's signature is its events in a canonical order, each reduced to a 64-bit hash
 * of its structure and its start and end relative to the start of the compared
 * iterations. The order: events grouped by resource (a device operation by its stream,
 * anything else by its thread; resources numbered as they first appear), each resource's
 * in trace order, so that ranks whose threads and streams interleave a little
 * differently still line up. The structure: kind, subkind, the text of its names, its
 * resource's number, the numbers of the stream, correlation id, object (an event
 * handle), device and communicator it names (each numbered as it first appears in the
 * canonical order: handles, ids and devices differ from process to process, and the
 * collectives' groups are kept exactly, so ranks of different communicators may fold as
 * replay_fold allows), bytes, launch shape, result, value, and for collectives and
 * markers the sequence, count, type, reduction and peer. Two ranks are alike when their
 * structures are equal event for event and every event that becomes a node of the graph
 * (a host call, collective or device operation: not a marker, device synchronisation,
 * allocation or flow) and starts at or after the compared window's start starts and
 * ends, relative to it, and lasts within JOB_FOLD_TOLERANCE of the representative's mean
 * iteration: the rule replay_fold applies to the built graph, taken on the events.
 */
#ifndef DPRO_REPLAY_JOB_FOLD_H
#define DPRO_REPLAY_JOB_FOLD_H

#include <stddef.h>
#include <stdint.h>

#include "job.h"

/* The fraction of the mean measured iteration two alike ranks may differ by (the value
 * of replay_fold's FOLD_TOLERANCE). */
#define JOB_FOLD_TOLERANCE 0.002

typedef struct job_fold_sig {
    size_t n;         /* events */
    uint64_t hash;    /* of every event's structure, in order */
    uint64_t *h;      /* per event in the canonical order: its structure */
    int64_t *rs, *re; /* its start and end relative to the window's start */
    double tol;       /* ns: JOB_FOLD_TOLERANCE x the mean iteration */
    int unfoldable;   /* send/recv (edges to other ranks) or no window: never folded */
} job_fold_sig;

/* Computes the signature of jr's events (in start order) for the compared window
 * [t0, t1] of ni iterations (local clock; ni <= 0: no window, the rank is unfoldable).
 * Returns 0 or -1 (out of memory; *s is then empty). Free with job_fold_sig_free. */
int job_fold_signature(const job_rank *jr, uint64_t t0, uint64_t t1, int32_t ni, job_fold_sig *s);

/* Whether rank signature r is alike representative p (the tolerance is p's). Returns 1
 * or 0 (also when either is unfoldable). */
int job_fold_alike(const job_fold_sig *r, const job_fold_sig *p);

void job_fold_sig_free(job_fold_sig *s);

/* Whether a and b differ by at most tol (both ways). Returns 1 or 0. */
int job_fold_within(int64_t a, int64_t b, double tol);

/* Reduces jr, alike a representative, to what the replay still needs of it: its
 * iteration markers and the host call that closes each iteration, or the kernel closing
 * each with jr->bounds (the iteration boundaries and the rank's window; jr->bounds are
 * renumbered to the kept events), its collectives and the device operations of their
 * correlations (clock alignment, the collectives' arrivals and measured transfers, the
 * stragglers), and its first timed event (the job's time origin). The other events are
 * freed. Returns 0 or -1 (out of memory; jr is then unchanged). */
int job_fold_reduce(job_rank *jr);

#endif
