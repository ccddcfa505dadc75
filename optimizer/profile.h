/*
 * profile.h: what the optimizer takes from the replayed job's traces besides the graph
 * (prefix profile_): the memory estimate of the rank with the largest measured peak
 * (memest.h, over the first iteration's window), and the kernel executions that the
 * per-kernel fixed cost is fitted on (workload_fit_fixed_cost).
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

#endif
