/*
 * replay.h: the whole replay of a job, as dpro-replay, dpro-export and the optimizer
 * use it (prefix replay_).
 *
 *   replay rp;
 *   replay_open(dir, &opts, &rp, err, sizeof err);   load, align clocks, find iterations,
 *                                                    build the graph, fit the cost model
 *   replay_simulate(&rp);                            simulate rp.graph into rp.sim
 *   replay_summarize(&rp, &rp.graph, &rp.sim, &sum); measured vs simulated, breakdown,
 *                                                    stragglers (replay_summary_free)
 *   replay_close(&rp);
 *
 * For what-if questions (the optimizer): dfg_clone(&copy, &rp.graph), transform the
 * copy (dfg.h), then replay_predict(&rp, &copy, &res) returns its simulated iteration
 * time over the same iterations; sim_critical_path on res gives its critical path.
 * costmodel_predict(&rp.model, ...) prices a regrouped collective.
 */
#ifndef DPRO_REPLAY_REPLAY_H
#define DPRO_REPLAY_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "align.h"
#include "build.h"
#include "costmodel.h"
#include "dfg.h"
#include "iter.h"
#include "job.h"
#include "sim.h"

enum replay_coll_duration {
    REPLAY_COLL_MODEL = 0,    /* collectives take the fitted model's time (default) */
    REPLAY_COLL_MEASURED = 1, /* collectives take their own measured transfer time */
};

typedef struct replay_options {
    const char *job_id; /* see job_options */
    int32_t iterations; /* steady iterations to compare (0: all steady ones) */
    int32_t warmup;     /* iterations to skip, numbered as the markers are (iteration
                         * k closes at boundary k; 0 is not measurable), -1: detect */
    int coll_duration;  /* enum replay_coll_duration */
    size_t max_events;  /* per rank, 0: no limit */
    int jobs;           /* threads loading ranks (job_options.jobs; 0: the CPUs) */
    int full_load;      /* load every event even when only `iterations` are compared
                         * (job_options.full) */
} replay_options;

/* Iterations found on one rank. */
typedef struct replay_rank_iters {
    int method;          /* enum iter_method */
    int32_t n;           /* boundaries found (iterations measured: n - 1) */
    size_t *event_index; /* the event that closes each iteration */
    int64_t *start_ns;   /* end of its boundary node (aligned, graph clock) */
    int32_t warm_up;     /* leading warm-up iterations (measurable ones) */
    size_t period;       /* ITER_PERIOD: kernels per iteration */
} replay_rank_iters;

typedef struct replay {
    job job;
    replay_options opts;
    align_result align;
    int align_source;              /* 0: no collectives; 1: device ends; 2: host call ends */
    int64_t time_origin;           /* aligned time of the graph's 0 */
    replay_rank_iters *iters;      /* per rank */
    int32_t iter_first, iter_last; /* iterations compared (indices; last < first: none) */
    dfg graph;
    build_p2p_stats p2p; /* send/recv matching (build.h) */
    costmodel model;
    sim_result sim;
    int simulated;
    int64_t repaired_edges; /* event edges build_repair_event_edges added */
} replay;

/* Loads and prepares the replay of the job under path. On failure returns a dpro_status
 * < 0 and errbuf says why (rp is then freed); warnings are in rp->job.diag. */
int replay_open(const char *path, const replay_options *opts, replay *rp, char *errbuf,
                size_t errlen);

/* Simulates rp->graph into rp->sim. Returns 0 or -1 (out of memory). */
int replay_simulate(replay *rp);

/* Simulates g (a transformed copy of rp->graph, or rp->graph itself) into res and
 * returns its mean simulated iteration time in ns over the compared iterations,
 * averaged over ranks, or -1 (out of memory, or the iterations are not covered). res
 * must be zeroed before first use and is reusable (sim_result_free). */
double replay_predict(const replay *rp, dfg *g, sim_result *res);

/* What-if "the device computes F times as long" (F = 0.5: twice as fast): multiplies the
 * duration of every kernel of g (DFG_KERNEL; not collectives, copies or memsets, which
 * the interconnect and the memory bus bound) by factor > 0. Host calls, launch latencies
 * and stream gaps are left as measured. Returns the number of kernels scaled, or -1 when
 * factor is not > 0. Simulate the result with replay_predict. */
int64_t replay_scale_kernels(dfg *g, double factor);

/* Per-rank and overall figures of one simulation against the measurement. */
typedef struct replay_rank_summary {
    int present;
    double measured_us, simulated_us, error_pct;
    sim_breakdown measured_bd, simulated_bd;
    double straggler_blame_us; /* time per iteration others waited for this rank */
    int32_t last_arrivals;     /* collectives this rank arrived last at */
    double clock_offset_us, clock_residual_us;
    int clock_aligned;
} replay_rank_summary;

typedef struct replay_cp_entry {
    int32_t name;     /* string id in the graph */
    int kind;         /* enum dfg_node_kind */
    int64_t total_ns; /* time on the critical path */
    int32_t count;
} replay_cp_entry;

typedef struct replay_summary {
    int32_t n_ranks;
    int32_t iterations;      /* compared per rank */
    int32_t first_iteration; /* number of the first compared iteration (its closing
                              * boundary; with markers "iteration N", N) */
    double measured_us, simulated_us, error_pct;
    replay_rank_summary *rank;
    sim_breakdown measured_bd, simulated_bd; /* summed over ranks, per iteration */
    replay_cp_entry *cp; /* critical path of the last compared iteration, by time */
    int32_t n_cp;
    int64_t cp_length_ns;
    int32_t cp_rank;    /* rank whose iteration end the path leads to */
    int32_t unfinished; /* nodes the simulation could not run */
} replay_summary;

/* Summarises simulation res of graph g (rp->graph or a copy). Returns 0 or -1. */
int replay_summarize(const replay *rp, const dfg *g, const sim_result *res, replay_summary *out);

void replay_summary_free(replay_summary *s);

void replay_close(replay *rp);

/* Detects iterations of one rank's events (exposed for tests): fills *it (free with
 * replay_rank_iters_free). Returns 0 or -1 (out of memory). */
int replay_detect_iterations(const job_rank *jr, replay_rank_iters *it);

void replay_rank_iters_free(replay_rank_iters *it);

#endif
