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
#include <sys/types.h>

#include "optimizer/memest.h"
#include "optimizer/workload.h"
#include "replay/replay.h"

/* Window [*t0, *t1) of the first iteration marked in rank jr's trace (NVTX ranges or
 * iteration markers named like iterations), on the graph clock: event times plus off
 * (the rank's clock offset) minus origin (the graph's time 0). *t0 = -1 when there is
 * none, *t1 = INT64_MAX when the first iteration has no successor. */
void profile_first_iteration_window(const job_rank *jr, int64_t off, int64_t origin, int64_t *t0,
                                    int64_t *t1);

/* Memory estimate of the rank with the largest measured peak into *best (memest_free),
 * and that rank into *mem_rank (-1 when none). Returns 1 when one was built, 0 when no
 * rank has allocation events, -1 when out of memory. rp->graph must be finalized. */
int profile_estimate_memory(const replay *rp, memest *best, int32_t *mem_rank);

/* The kernel executions of every rank with launch dims, for the fit of the per-kernel
 * fixed cost (workload_fit_fixed_cost): one key per (rank, kernel name). *out is
 * malloc'd (free it). Returns the count, or -1 when out of memory (*out NULL). */
ssize_t profile_kernel_samples(const replay *rp, workload_kernel_sample **out);

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
