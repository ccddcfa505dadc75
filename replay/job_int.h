/* job_int.h: what job.c and job_share.c (shared reading) share (not installed). */
#ifndef DPRO_REPLAY_JOB_INT_H
#define DPRO_REPLAY_JOB_INT_H

#include <stddef.h>
#include <stdint.h>

#include "job.h"
#include "job_fold.h"
#include "period.h"

/* One rank's load, done on a worker thread. Its warnings wait in msg until the phase is
 * over and are then recorded in rank order, so that they come out the same for any
 * number of threads. */
typedef struct rank_task {
    job_rank *jr;
    int rc;     /* 0 or a dpro_status */
    char *err;  /* what failed (malloc'd), with rc < 0 */
    char **msg; /* warnings, in the order met */
    size_t n_msg;
    uint64_t in_file; /* events the trace holds (its summary) */
    uint64_t loaded;  /* events read (before a fold's reduction) */
    /* the window's first pass: the iteration boundaries of the whole trace */
    int method;       /* enum iter_method */
    int32_t nb;       /* boundaries */
    uint64_t *bstart; /* start and end of each boundary's event */
    uint64_t *bend;
    /* the window chosen (windowed != 0): events overlapping [t0, t1] are loaded, and
     * the boundaries b_first .. b_first + b_count - 1 must be found in them again */
    int windowed;
    uint64_t t0, t1;
    int32_t b_first, b_count;
    int window_ok; /* the loaded events show those boundaries */
    /* the compared iterations in the trace's clock (cmp_ni > 0: known), for folding */
    uint64_t cmp_t0, cmp_t1;
    int32_t cmp_ni;
    /* iterations from the kernel period (no markers), with scan_period: the first pass
     * scans the busiest stream (period), kept trimmed until the ranks' cut is agreed;
     * then nb boundaries as kernel positions (bpos) on stream bstream, their ends in
     * bend (no bstart: no window is taken), the period's length in bperiod */
    int scan_period;
    period_scan period;
    size_t *bpos;
    uint64_t bstream;
    size_t bperiod;
    int quiet_damage;  /* damaged batches were already counted and told (first pass) */
    job_fold_sig *sig; /* shared reading: a rank folded on its process keeps its signature
                        * (malloc'd) for process 0's classification */
} rank_task;

/* The representatives of the classes so far: their signatures and ranks. */
typedef struct fold_reps {
    job_fold_sig *sig;
    int32_t *rank;
    int32_t n;
} fold_reps;

/* job.c: the second pass (or the only one) over one rank (its trace opened anew and
 * detached again). Returns 0 or a dpro_status. */
int job_read_rank(rank_task *t, const job_options *o);

/* job_fold.c: the first of reps alike s (job_fold_alike), or -1. */
int32_t job_fold_find(const fold_reps *reps, const job_fold_sig *s);

/* job_fold.c: classifies t's rank, read whole, by its signature *s (taken: kept as a
 * representative's or freed): folded into the first of reps alike it (reduced), or a
 * representative. With keep, a folded rank's signature goes to t->sig. Returns 0 or
 * DPRO_ERR_NOMEM. */
int job_fold_classify(job *j, rank_task *t, job_fold_sig *s, fold_reps *reps, int keep);

/* job_share.c: the ranks sh's process reads of n, [*lo, *hi). */
void job_share_range(const job_share *sh, int32_t n, int32_t *lo, int32_t *hi);

/* job_share.c: hands every process's first-pass results (t[lo, hi)) to every process,
 * into t[0, n). Returns 0 or DPRO_ERR_NOMEM (on every process where the transport
 * says so). */
int job_share_bounds(const job_share *sh, rank_task *t, int32_t n, int32_t lo, int32_t hi);

/* job_share.c: the ranks read by the other processes, sent to process 0 and taken there
 * in rank order into t (classified against reps when folding: reps non-NULL; a rank to
 * read again is read with o). Returns 0 or a dpro_status. */
int job_share_collect(job *j, const job_share *sh, rank_task *t, int32_t n, int32_t lo, int32_t hi,
                      fold_reps *reps, const job_options *o);

#endif
