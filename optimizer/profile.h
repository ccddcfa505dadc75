/*
 * profile.h: what the optimizer takes from the replayed job's traces besides the graph
 * (prefix profile_): the memory estimate of the rank with the largest measured peak
 * (memest.h, over the first iteration's window), the kernel executions that the
 * per-kernel fixed cost is fitted on (workload_fit_fixed_cost), and the outlier
 * iterations the search sets aside (search.h).
 */
#ifndef DPRO_OPTIMIZER_PROFILE_H
#define DPRO_OPTIMIZER_PROFILE_H

#include <stdint.h>

#include "optimizer/framework.h"
#include "optimizer/memest.h"
#include "optimizer/workload.h"
#include "replay/replay.h"

/* Window [*t0, *t1) of the first iteration marked in rank jr's trace (NVTX ranges or
 * iteration markers named like iterations), on the graph clock: event times plus off
 * (the rank's clock offset) minus origin (the graph's time 0). *t0 = -1 when there is
 * none, *t1 = INT64_MAX when the first iteration has no successor. */
void profile_first_iteration_window(const job_rank *jr, int64_t off, int64_t origin, int64_t *t0,
                                    int64_t *t1);

/* A thread's first launching call (a runtime call with a correlation id, or a
 * collective), and a collective a thread issued, on the graph's clock: what the memory
 * estimate reads of a rank's events for its first step (profile.c, profile_first_step). */
typedef struct profile_thread_first {
    uint64_t thread;
    int64_t t_ns;
} profile_thread_first;
typedef struct profile_coll {
    uint64_t thread;
    int64_t t_ns;
    uint32_t op; /* DPRO_COLL_* */
} profile_coll;
typedef struct profile_rank_steps {
    profile_thread_first *first;
    int32_t n_first;
    profile_coll *coll; /* in trace order */
    size_t n_coll;
} profile_rank_steps;

/* What the optimizer takes from each rank's events while the replay builds the graph,
 * before they are released (profile_take_rank, replay_options.take_events): the kernel
 * samples, the framework's evidence and the first step's calls. Zero it; free it with
 * profile_take_free. */
typedef struct profile_take {
    int32_t n_ranks;                 /* steps' length: the highest rank taken, plus one */
    workload_kernel_sample *samples; /* the kernel executions of every rank with launch
                                        dims, for the fit of the per-kernel fixed cost
                                        (workload_fit_fixed_cost): one key per (rank,
                                        kernel name); in rank and event order */
    size_t n_samples, cap_samples;
    profile_rank_steps *steps; /* per rank (zero: a rank not taken) */
    framework_evidence *ev;    /* of every rank taken; NULL before the first */
} profile_take;

/* Takes rank's events (jr, expanded) into ctx, a profile_take (build_take_fn: shift_ns
 * puts a time on the graph's clock). Returns 0, or -1 when out of memory. */
int profile_take_rank(void *ctx, const job_rank *jr, int32_t rank, int64_t shift_ns);

/* Frees what t holds (the samples too, unless taken: set to NULL) and zeroes it. */
void profile_take_free(profile_take *t);

/* Memory estimate of the rank with the largest measured peak into *best (memest_free),
 * and that rank into *mem_rank (-1 when none), from the markers and memory events the
 * replay kept (job_rank_keep_ranges) and the first steps of tk. Returns 1 when one was
 * built, 0 when no rank has allocation events, -1 when out of memory. rp->graph must be
 * finalized. */
int profile_estimate_memory(const replay *rp, const profile_take *tk, memest *best,
                            int32_t *mem_rank);

/* The rule that sets an iteration of the profile aside as an outlier
 * (profile_outlier_iterations): longer, on some rank, than that rank's median iteration m
 * by more than PROFILE_OUTLIER_MADS robust standard deviations (1.4826 x the median
 * absolute deviation) and by more than PROFILE_OUTLIER_SHARE x m; and rare: at most
 * PROFILE_OUTLIER_MAX_SHARE of the compared iterations, of which there are at least
 * PROFILE_OUTLIER_MIN_ITERS. */
#define PROFILE_OUTLIER_MADS 5.0
#define PROFILE_OUTLIER_SHARE 0.5
#define PROFILE_OUTLIER_MAX_SHARE 0.25
#define PROFILE_OUTLIER_MIN_ITERS 4

/* One iteration set aside, and the rank that stalled in it. */
typedef struct profile_outlier {
    int32_t iteration; /* of the compared ones, 0 the first (workload.h: iter_first) */
    int32_t rank;      /* the rank that stalled: whose own time (the iteration less its waits
                        * at collectives for the others) is the most over its median own
                        * time (the others' iterations are long too: they wait for it) */
    double iter_ns;    /* its time on that rank */
    double median_ns;  /* that rank's median iteration */
    double mad_ns;     /* and the median absolute deviation from it */
} profile_outlier;

/* The outlier iterations (the rule above) of res, a simulation of w's baseline (whose
 * iterations are the measured ones: the replay reuses every measured duration and gap),
 * over the compared iterations of the ranks that cover them all. aside (one byte per
 * compared iteration) receives 1 for each one set aside and 0 for the others, out (room
 * for one per compared iteration) the outliers in iteration order. Returns their number
 * (0 when there are none, or more than the rule calls rare), or -1 when out of memory. */
int32_t profile_outlier_iterations(const workload *w, const sim_result *res, uint8_t *aside,
                                   profile_outlier *out);

#endif
