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
    const char *job_id;    /* see job_options */
    int32_t iterations;    /* steady iterations to compare (0: all steady ones) */
    int32_t warmup;        /* iterations to skip, numbered as the markers are (iteration
                            * k closes at boundary k; 0 is not measurable), -1: detect */
    int coll_duration;     /* enum replay_coll_duration */
    size_t max_events;     /* per rank, 0: no limit */
    double drop_edges;     /* TEST ONLY (replay_drop_edges): the fraction of dependency edges
                            * dropped before the timing is fitted; 0 (the default): none */
    int jobs;              /* threads loading ranks (job_options.jobs; 0: the CPUs) */
    int full_load;         /* load every event even when only `iterations` are compared
                            * (job_options.full) */
    int window_from_start; /* the compared iterations' window starts at the trace's start
                            * (job_options.from_start) */
    int coll_ab;           /* 1: price collectives with the one-line alpha-beta fit, not the
                            * piecewise model (costmodel.h) */
    int coll_nearest;      /* 1: a size outside the measured ones on the nearest segment's
                            * line, whatever NCCL's protocol there (costmodel.nearest) */
    int fold;              /* fold alike ranks into weighted classes (replay_fold); 0: every
                            * rank explicit */
    int release_events;    /* 1: once a rank's graph is built keep only its markers and
                            * memory events (job_rank_keep_ranges), all that
                            * replay_summarize and chrome_export read of them; 0: every
                            * loaded event stays in rp->job */
    /* NULL, or called with take_ctx on each rank's events once its part of the graph is
     * built, before they are released or held (build_dfg) */
    build_take_fn take_events;
    void *take_ctx;
    const job_share *share; /* NULL, or the trace files are read in shares by several
                             * processes (job_options.share): replay_open on process 0,
                             * replay_read_share on the others */
} replay_options;

/* Sets o's collective model from its name (--collective-model): "piecewise" (the
 * default), "nearest" (coll_nearest) or "alpha-beta" (coll_ab). Returns 0, or -1 (o
 * unchanged) for another name. */
int replay_collective_model_option(replay_options *o, const char *name);

/* Iterations found on one rank. */
typedef struct replay_rank_iters {
    int method;          /* enum iter_method */
    int32_t n;           /* boundaries found (iterations measured: n - 1) */
    size_t *event_index; /* the event that closes each iteration */
    int64_t *start_ns;   /* end of its boundary node (aligned, graph clock) */
    int32_t warm_up;     /* leading warm-up iterations (measurable ones) */
    size_t period;       /* ITER_PERIOD: kernels per iteration */
    int64_t *step;       /* ITER_MARKER: the step each boundary closes (iter.h), or NULL */
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
    int32_t n_kept_ends;    /* replay_release_timeline: the nodes whose simulated end is kept */
    int32_t *kept_node;     /* n_kept_ends, ascending */
    int64_t *kept_end;      /* their ends (ns; -1: never ran) */
    int64_t repaired_edges; /* event edges build_repair_event_edges added */
} replay;

/* Loads and prepares the replay of the job under path. On failure returns a dpro_status
 * < 0 and errbuf says why (rp is then freed); warnings are in rp->job.diag. */
int replay_open(const char *path, const replay_options *opts, replay *rp, char *errbuf,
                size_t errlen);

/* On a process other than 0 of a shared reading (opts->share): reads this process's
 * share of the job under path and hands it to process 0 (which calls replay_open with
 * the same options at the same time); keeps nothing. Returns 0, or a dpro_status < 0 with
 * errbuf saying why (process 0 reports the job's problems, this one records them
 * silently). */
int replay_read_share(const char *path, const replay_options *opts, char *errbuf, size_t errlen);

/* Rank folding (fold.c; replay_open does it when opts.fold is set, after the cost model
 * is fitted). Ranks whose graphs are alike form a class that one representative, the
 * class's lowest rank, stands for with a weight: rp->graph keeps only the
 * representatives' nodes (dfg_fold; when every rank is a class of its own the graph
 * stays as it is) and every per-rank figure of a folded rank is its representative's.
 * Alike: the same operations in the same order on the same resources (kind, name,
 * flags, bytes, collective op, communicator size and payload), the same launches, edges
 * and iteration boundaries, and, for every operation from the start of the compared
 * window on, its duration, gap, launch latency and measured start and end relative to
 * the window's start within 0.2 % of the representative's mean measured iteration
 * (before the window only the structure counts: processes start apart and the first
 * collectives even that out). A rank that the report would name a straggler (others
 * wait for it over 2 % of the mean measured iteration and over 5 us), one with an edge
 * or launch to another rank's node and one with no measured window are never folded.
 * rp->graph.rank_rep, rank_weight and rank_apart say what was done. Returns 0 or -1
 * (out of memory). */
int replay_fold(replay *rp);

/* The classes replay_fold would make of rp->graph (finalized here, else unchanged) with
 * the timing tolerance `tolerance` (a share of the mean measured iteration; <= 0:
 * replay_fold's 0.2 %) in place of replay_fold's; the structure, the straggler rule and
 * the unfoldable ranks are replay_fold's. When they are fewer than the present ranks,
 * dst (uninitialised) receives the folded graph (finalized; free it with dfg_free), else
 * dst is left untouched. For a search screened on the folded graph while the explicit
 * one is simulated (dpro-optimize --no-fold). Returns the number of classes, or -1 (out
 * of memory; dst then holds nothing). */
int32_t replay_fold_copy(replay *rp, dfg *dst, double tolerance);

/* Name of an enum dfg_apart reason ("first", "structure", "timing", "straggler",
 * "unfoldable"). */
const char *replay_apart_name(int apart);

/* Simulates rp->graph into rp->sim. Returns 0 or -1 (out of memory). */
int replay_simulate(replay *rp);

/* Keeps of the exact replay's timeline rp->sim only what the report reads once it is
 * summarized (replay_summarize): the simulated ends of the compared iterations' boundary
 * nodes (replay_iteration_times) and rp->sim's counts (n_unfinished, first_unfinished,
 * makespan, last_node), and frees the rest: its per-node and per-group arrays (21 bytes
 * a node) and scratch, before the typical-duration replay allocates its own. Nothing
 * may read rp->sim's arrays afterwards (chrome_export, replay_summarize of rp->sim);
 * rp->simulated stays. Returns 0, or -1 (out of memory; rp->sim is then unchanged). */
int replay_release_timeline(replay *rp);

/* Simulates g (a transformed copy of rp->graph, or rp->graph itself) into res and
 * returns its mean simulated iteration time in ns over the compared iterations,
 * averaged over ranks, or -1 (out of memory, or the iterations are not covered). res
 * must be zeroed before first use and is reusable (sim_result_free). */
double replay_predict(const replay *rp, dfg *g, sim_result *res);

/* What-if "the device computes F times as long" (F = 0.5: twice as fast): multiplies the
 * duration of every kernel of g (DFG_KERNEL; not collectives, copies or memsets, which
 * the interconnect and the memory bus bound) by factor > 0. Host calls, launch latencies
 * and stream gaps are left as measured. Returns the number of kernels scaled, or -1 when
 * factor is not > 0 or out of memory. Simulate the result with replay_predict. */
int64_t replay_scale_kernels(dfg *g, double factor);

/* What-if "rank `rank` is slower" (whatif.c): multiplies the duration of each of its
 * kernels (DFG_KERNEL: a slower GPU) by kernel_factor and the duration and the gap before
 * each of its host calls (DFG_HOST on any of its threads: a slower host, the framework's
 * time between calls included) by host_factor; 1 leaves that side as measured. Launch
 * latencies, copies, memsets and collective transfers are left alone: the other ranks
 * then wait for it at the collectives, which is the prediction. rank must stand for
 * itself alone (not folded into a class, nor a class's representative of weight > 1: open
 * the replay without folding). Returns the number of nodes changed (0: the rank has none),
 * -1 when a factor is not > 0, rank is outside g or out of memory, -2 when rank is
 * folded. */
int64_t replay_slow_rank(dfg *g, int32_t rank, double kernel_factor, double host_factor);

/* Scales host node n's duration (its own cost; a blocking call's after its wait) and its
 * gap (the framework time before it, a wake-up's latency) by factor: its CPU part, as a
 * slower or busier host stretches it. Returns 0, or -1 when a value overflows. */
int replay_scale_host_node(dfg *g, int32_t n, double factor);

/* What-if "the job on n_to ranks" (whatif.c), data parallel with the same work per rank
 * (weak scaling): every collective group of a communicator of n_from ranks (the job's
 * world; smaller communicators, model-parallel groups, keep their size) is repriced for
 * n_to ranks with the same payload, costmodel_extrapolate_ranks from its current
 * transfer time, and its grp_nranks becomes n_to. Nothing else changes: each rank of g
 * stands for n_to / n_from ranks of the larger job, which arrive at the collectives as
 * the ranks of g do. Returns the number of groups repriced, or -1 when n_from or n_to is
 * below 2. */
int32_t replay_scale_ranks(const costmodel *m, dfg *g, int32_t n_from, int32_t n_to);

/* The hosts of job j's present ranks (their host meta rows; ranks without one are not
 * counted): returns how many there are, and stores in *most_per_host the most present
 * ranks on one of them (0 when none is known). */
int32_t replay_job_hosts(const job *j, int32_t *most_per_host);

/* What-if "the job on n_to ranks" across nodes (whatif.c), after replay_scale_ranks: the
 * job was traced on one node and its n_to ranks run on `nodes` (> 1) nodes joined by a
 * network that a one-node trace cannot show, given by the user: net_bpns its bus
 * bandwidth per GPU in bytes per ns (NCCL's ring across nodes: each GPU's share of the
 * traffic crosses its NIC; what nccl-tests report as busbw across nodes) and hop_ns the
 * latency each crossing adds over a hop inside the node (NCCL's tuner: a ring step that
 * crosses pays the network's hop latency instead of NVLink's). Every group of n_to
 * ranks runs NCCL's ring over the nodes (trees are not modelled): its bandwidth term
 * moves to the network's where that is slower, + x_to x max(0, 1 / net_bpns - s), x_to =
 * costmodel_factor(op, n_to) x bytes and s the model's cost of one more byte of x at
 * n_from ranks at that size (costmodel_predict at 0.9 and 1.1 x bytes: 1 / beta inside a
 * segment of the piecewise model), and its ring crosses the network 2 (nodes - 1) times
 * (all-reduce), nodes - 1 (all-gather, reduce-scatter, broadcast, reduce) or once
 * (all-to-all), + hop_ns each. Returns the groups repriced, or -1 when n_from or n_to is
 * below 2, nodes below 2, net_bpns not > 0 or hop_ns below 0, or when a group's time would
 * pass BUILD_TIME_LIMIT (a network too slow to price; g is then partly repriced). */
int32_t replay_scale_ranks_nodes(const costmodel *m, dfg *g, int32_t n_from, int32_t n_to,
                                 int32_t nodes, double net_bpns, double hop_ns);

/* Fewest arrivals replay_rank_wait learns from. */
#define REPLAY_RANK_WAIT_MIN_SAMPLES 16

/* What-if "the job on n_to ranks", the waits more ranks add (whatif.c): a collective ends
 * after its last participant arrives, and the latest of n_to ranks whose hosts and
 * devices jitter is later than the latest of n_from. Learned from g's groups of n_from
 * participants, one per rank, all starting in [w0, w1) (graph ns: the compared window):
 * each participant's arrival less its group's mean arrival, less its rank's mean of
 * those (a rank's steady lateness, which the traced ranks keep), pooled over the ranks;
 * with F that distribution, the expected maximum of n_to independent draws of F less
 * that of n_from draws is the wait (g->grp_wait_ns) after the last arrival at every group
 * of n_to ranks before its transfer starts, as if the latest rank arrived that much later
 * (call after replay_scale_ranks). Returns that wait in ns (0 with fewer than
 * REPLAY_RANK_WAIT_MIN_SAMPLES arrivals, or n_to <= n_from), -1 when n_from or n_to is
 * below 2, -2 out of memory. */
int64_t replay_rank_wait(dfg *g, int32_t n_from, int32_t n_to, int64_t w0, int64_t w1);

/* replay_rank_wait with the N ranks' hosts stalled (hostshare_at's stall model): each
 * arrival of n_to ranks is a draw of F plus a stall D, D 0 with probability 1 - stall_p
 * and else uniform on (0, stall_ns] (the rest of a timeslice the rank's thread waits
 * for its core), drawn independently for every rank and collective; the wait is the
 * expected maximum of n_to such draws, less D's mean (stall_p stall_ns / 2: the stretch
 * of the ranks' host time, hostshare_apply, already holds their time off the cores on
 * average; the stalls add how unevenly it falls on the ranks), less the expected maximum
 * of n_from draws of F (the traced arrivals, their own stalls in F); with fewer than
 * REPLAY_RANK_WAIT_MIN_SAMPLES arrivals (folded ranks: one arrival a class) F is taken
 * as 0, the stalls alone. Never below replay_rank_wait's wait (the stalls' part is taken
 * as an increment on it); stall_p 0 or stall_ns 0 is replay_rank_wait.
 * Returns as replay_rank_wait, and -1 also when stall_p is outside [0, 1] or stall_ns
 * below 0. */
int64_t replay_rank_wait_stalled(dfg *g, int32_t n_from, int32_t n_to, int64_t w0, int64_t w1,
                                 double stall_p, double stall_ns);

/* The window the waits above are learned from: rank 0's compared iterations, from the
 * measured end of the boundary before the first to that of the last (graph ns) into *w0
 * and *w1. Returns 0, or -1 when rp has no compared iterations on rank 0. */
int replay_compared_window(const replay *rp, int64_t *w0, int64_t *w1);

/* Compared iteration k (rp->iter_first <= k <= rp->iter_last) of rank r, measured and
 * simulated (rp simulated): stores in *trace_t0 and *trace_t1 where it starts and ends on
 * the rank's own trace clock (the ends of its boundary operations as the trace has them,
 * so a reader finds those events; a folded rank's are its representative's), and its
 * measured and simulated durations in ns. Returns 0, or -1 if k is not compared or a
 * boundary did not run. */
int replay_iteration_times(const replay *rp, int32_t r, int32_t k, int64_t *trace_t0,
                           int64_t *trace_t1, int64_t *measured_ns, int64_t *simulated_ns);

/* Window [*t0, *t1) of rank r on timeline tl: its compared iterations, or (without
 * iterations) the span of the rank's nodes. Returns the number of iterations it holds (0:
 * none; the span counts as 1). */
int32_t replay_rank_window(const replay *rp, const dfg *g, sim_timeline tl, int32_t r, int64_t *t0,
                           int64_t *t1);

/* The mean simulated iteration time, in ns, of simulation res of g (sim_run done) over
 * the compared iterations, averaged over ranks, as replay_predict gives it; -1 when the
 * iterations are not covered. */
double replay_iteration_of(const replay *rp, const dfg *g, const sim_result *res);

/* ---- fidelity (fidelity.c) ----------------------------------------------------------- */

/* The typical-duration replay: the figure a replayer is judged by. The exact replay fits
 * every node's duration, gap and launch latency to its own measured times, so it
 * reproduces the measurement by construction whatever the graph. Here every operation of
 * the compared iterations takes instead its typical values: the median, over the
 * compared iterations, of the duration, gap and launch latency of the operations found
 * at its place (its resource, its name, and which of that resource's operations of that
 * name in the iteration it is), as dPRO replays an iteration of average operations; a
 * collective's transfer likewise (its first participant's place). A host thread also
 * keeps its typical stall: a stall (the thread descheduled) lands on another call in each
 * iteration, so the calls' medians drop it even when every iteration has one; the
 * statistic of the thread's own time per iteration (its calls' fitted durations and
 * gaps) minus that of the typical calls' goes to the gaps where the measured ones exceeded
 * the typical ones, in proportion to that excess. Each rank so arrives at a collective
 * at one typical time, where the measured arrivals jitter and every collective waits for
 * the latest: the medians' replay keeps that wait as the what-ifs price it for more ranks
 * (fid_rank_wait_typical), and gives the medians alone beside it. An operation of an
 * iteration is the host call that starts inside it, or the device operation such a call
 * launched (its start decides when nothing launched it). The warm-up before the compared
 * iterations keeps its exact values. With one compared iteration the typical replay is
 * the exact one. */
typedef struct replay_typical {
    int32_t iterations; /* compared iterations the medians are taken over */
    int64_t nodes;      /* operations of the compared iterations */
    int64_t matched;    /* of them, those whose place holds one operation of the same name
                         * in every compared iteration (the others have fewer peers) */
    double measured_us; /* measured mean iteration (the exact replay's measured_us) */
    double predicted_us, error_pct; /* with the medians and the ranks' wait: the figure */
    int64_t rank_wait_ns; /* the wait at each collective of all the ranks that the medians,
                           * one typical arrival a rank, drop (fid_rank_wait_typical) */
    double medians_only_predicted_us, medians_only_error_pct; /* the medians without it */
    double mean_predicted_us, mean_error_pct; /* with means instead (REPLAY_TYPICAL_MEAN),
                                               * without the wait (as the medians alone), to
                                               * tell noise from structure */
    /* The drawn replay (replay_make_drawn), the mean over its samples: the prediction of
     * the mean iteration under the trace's own noise (0 with one compared iteration). */
    int32_t drawn_samples;
    double drawn_predicted_us, drawn_error_pct;
    double drawn_min_us, drawn_max_us; /* the samples' spread */
    /* Why the drawn replay gave no figures (a static string; they are then 0), NULL when
     * it gave them or was not run. */
    const char *drawn_absent;
} replay_typical;

/* Samples of the drawn replay replay_typical_replay averages. */
#define REPLAY_DRAWN_SAMPLES 8

/* The statistic replay_make_typical takes over an operation's iterations. */
enum replay_typical_stat {
    REPLAY_TYPICAL_MEDIAN = 0, /* the median (the mean of the middle two for even counts) */
    REPLAY_TYPICAL_MEAN = 1,
};

/* Gives every node of g (rp->graph or a clone of it, before any transformation) its
 * typical duration, gap and latency, and every group its typical transfer (see
 * replay_typical), typical by statistic stat (enum replay_typical_stat); info (may be
 * NULL) receives the counts. Returns 0 or -1 (out of memory). */
int replay_make_typical(const replay *rp, dfg *g, int stat, replay_typical *info);

/* The drawn replay's timings, sample `sample` (any integer; the same one gives the same
 * timings): every rank's compared iterations take the values (duration, gap, launch
 * latency, a collective's transfer at its first participant) that the same rank measured
 * in a compared iteration, at the same place (see replay_typical): per rank a random
 * permutation of the iterations. A rank follows the sample's common permutation with the
 * probability of its loading on a factor common to the ranks (a one-factor model of their
 * own host time per iteration, learned from the compared iterations) and draws its own
 * otherwise. A rank's operations of one iteration so move together (a host stall, a slow
 * step stay whole); ranks whose slow iterations fell together in the trace keep them
 * together, independent ones meet at a collective as often as chance has them meet; and
 * every iteration's values are used once, so a lone rank keeps its iterations. An operation
 * whose place holds none in the drawn iteration keeps its own values; the warm-up keeps
 * its exact ones. g: rp->graph or a clone of it, before any transformation. Returns 0 or
 * -1 (out of memory). */
int replay_make_drawn(const replay *rp, dfg *g, int64_t sample);

/* The host calls' typical times, for the optimizer's typical predictions: dur[n] and
 * gap[n] (arrays of g->n_nodes) receive, for every host call n of g in the compared
 * iterations iter_first..iter_last (boundary indices of each rank, dfg_iterations), the
 * median duration and gap over those iterations of the host calls at its place (as
 * replay_typical; a place held in one iteration only keeps its own), and every other node
 * its own values; g is not changed. A stall of one iteration (a preempted thread, a call
 * that waited once) so goes, one at the same place in most iterations stays. Returns 0 or
 * -1 (out of memory). */
int replay_typical_host_times(const dfg *g, int32_t iter_first, int32_t iter_last, int64_t *dur,
                              int64_t *gap);

/* Replays typical copies of rp->graph (medians with the ranks' wait, the medians alone
 * where that wait is not 0, then means without it) and, with more than one
 * compared iteration, REPLAY_DRAWN_SAMPLES drawn ones (samples 0..) into *out. Returns 0, 1 when
 * the compared iterations are not covered (out->predicted_us is then 0), -1 out of
 * memory; a failing drawn replay alone returns 0, the medians' and means' figures kept and
 * out->drawn_absent saying why it has none. */
int replay_typical_replay(const replay *rp, replay_typical *out);

/* What-if "kernels named `name` (a string id of g) take F times as long" (F = 0 removes
 * their time): multiplies the duration of every live DFG_KERNEL node of that name by
 * factor >= 0. Returns the number of kernels scaled, or -1 when factor < 0 or out of
 * memory. */
int64_t replay_scale_class(dfg *g, int32_t name, double factor);

/* TEST ONLY: drops each dependency edge of g whose hash (of its index) falls in the
 * lowest `fraction` of the hash range (1: all of them), then fits the timing again
 * (build_derive_timing): the graph a builder would make that missed those edges, whose
 * fitted gaps, latencies and durations absorb the waits the edges explained, so that its
 * exact replay still matches the measurement. For the perturbation check's test, never
 * for figures. Returns the number of edges dropped, or -1 (out of memory). */
int64_t replay_drop_edges(dfg *g, double fraction);

/* One kernel class (kernel name) shortened in the perturbation check. */
typedef struct replay_perturb_class {
    int32_t name;         /* string id in rp->graph */
    int64_t count;        /* its kernels in the compared iterations (launched by their host
                           * calls, replay_typical), or in the whole trace without
                           * iterations, all ranks */
    double total_us;      /* their time per iteration, summed over ranks */
    double predicted_us;  /* iteration with the class scaled (replay_perturbation.scale) */
    double without_us;    /* iteration with the class at zero time: the critical path
                           * without it */
    double stale_wait_us; /* stale waits (below) per iteration with the class scaled */
} replay_perturb_class;

/* The perturbation check of the graph: the `top` kernel classes with the most time in the
 * compared iterations, each shortened alone (its kernels x scale) in the exact replay.
 * Dependency structure says the prediction must stay at or above without_us (the
 * simulation is a longest-path computation: shortening cannot undercut removing) and
 * save at most (1 - scale) x total_us; both hold for any graph the simulator runs, edges
 * or not. What a graph missing edges gets wrong is waiting: its fitted host durations
 * keep the measured waits as fixed costs. stale_wait_us measures that. A host call that can
 * wait (a synchronisation, a synchronous copy or memset, a launch, cudaFree) and during
 * which a device operation of its rank ended (measured) stopped waiting at the last such
 * end, when its rank had P device operations pending (launch call started, not ended).
 * In a prediction it may not end later than the first moment after its start when its
 * rank has at most P pending again, plus its own cost: the measured part of the call
 * after that last end (for a launch or cudaFree, which have costs of their own, not less
 * than the 10th percentile of that name's measured calls on the rank; checked only when
 * the call took over 3 times that + 10 us, a cudaFree with P = 0, a launch with its queue
 * full: P at least 7/8 of the most its rank ever had pending and at least 64; a launch
 * may wait until 1/32 fewer than P are pending, the slack of a queue depth the trace
 * shows only roughly). A call cannot wait
 * for work that is done or for room that is free. The excess, summed over the calls of
 * the window, is the stale wait: near 0 when edges model the waits; with the waits
 * absorbed, the part of the time the shortened class gave back that they withhold. Device
 * operations are not checked (an absorbed event wait between streams is not seen). Per iteration,
 * the mean over ranks. */
typedef struct replay_perturbation {
    double scale;
    double baseline_us;       /* the exact replay's iteration */
    double baseline_stale_us; /* stale waits of the exact replay (0 up to rounding) */
    int32_t n;
    replay_perturb_class *cls; /* most time first */
} replay_perturbation;

/* Runs the perturbation check into *out (replay_perturbation_free). Returns 0, 1 when the
 * compared iterations are not covered, -1 out of memory. */
int replay_perturb(const replay *rp, int32_t top, double scale, replay_perturbation *out);

void replay_perturbation_free(replay_perturbation *p);

/* The straggler rule: a rank is named a straggler (the report's list, and a rank the fold
 * keeps alone) when the others wait for it over this share of the mean measured iteration
 * and over REPLAY_STRAGGLER_MIN_US per iteration. */
#define REPLAY_STRAGGLER_SHARE 0.02
#define REPLAY_STRAGGLER_MIN_US 5

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

/* What the critical path spends its time in (replay_cp_compose), each segment of the path
 * charged to what ran then on the resource the path was on. */
enum replay_cp_class {
    REPLAY_CP_CPU_OP = 0,       /* host time between API calls inside a cpu_op (the innermost
                                 * one on the thread) */
    REPLAY_CP_ANNOTATION = 1,   /* ... inside a user annotation (no cpu_op around it) */
    REPLAY_CP_HOST_OTHER = 2,   /* ... with no cpu_op or annotation recorded */
    REPLAY_CP_API = 3,          /* inside a host API call (launch, copy, sync, ...) */
    REPLAY_CP_LAUNCH_DELAY = 4, /* from the launch call's end to its device op's start */
    REPLAY_CP_STREAM_GAP = 5,   /* a device op released by the op before it on its stream or
                                 * on another stream, before it started */
    REPLAY_CP_KERNEL = 6,
    REPLAY_CP_MEMCPY = 7,
    REPLAY_CP_MEMSET = 8,
    REPLAY_CP_COLLECTIVE = 9, /* a collective's transfer (after its last participant came) */
    REPLAY_CP_WAIT_RANK = 10, /* anything on a rank other than the one the path ends on (but
                               * a collective's transfer, which all participants share):
                               * the time that rank waited for another */
    REPLAY_CP_NCLASSES = 11,
};

/* Name of an enum replay_cp_class ("cpu_op", "launch_delay", ...), or "unknown". */
const char *replay_cp_class_name(int cls);

typedef struct replay_cp_entry {
    int32_t name;     /* string id in the graph of the node charged (0 for host-range classes) */
    int kind;         /* enum dfg_node_kind (DFG_HOST for host-range classes) */
    int64_t total_ns; /* time on the critical path */
    int32_t count;    /* path segments charged */
    int cls;          /* enum replay_cp_class */
    const char *op;   /* cpu_op or annotation name (a rank reader's string), "" for
                       * host_other, NULL for node entries */
} replay_cp_entry;

/* One piece of the critical path: an interval of it charged to one class and entry. */
typedef struct replay_cp_piece {
    int64_t start_ns, dur_ns; /* on the timeline the path was taken from */
    int32_t node;             /* the node charged (a launch call for its api piece) */
    int cls;                  /* enum replay_cp_class */
    const char *op;           /* as replay_cp_entry.op */
} replay_cp_piece;

typedef struct replay_summary {
    int32_t n_ranks;
    int32_t iterations;      /* compared per rank */
    int32_t first_iteration; /* number of the first compared iteration (its closing
                              * boundary; with markers "iteration N", N) */
    double measured_us, simulated_us, error_pct;
    double simulated_median_us; /* the ranks' median simulated iteration, averaged over
                                 * the ranks (sim_iteration_median; a rank without
                                 * iteration boundaries counts with its mean) */
    replay_rank_summary *rank;
    sim_breakdown measured_bd, simulated_bd; /* summed over ranks, per iteration */
    replay_cp_entry *cp; /* critical path of the last compared iteration, by time; one
                          * entry per (class, node name or op name) */
    int32_t n_cp;
    int64_t cp_length_ns;
    int64_t cp_class_ns[REPLAY_CP_NCLASSES]; /* its composition (sums to cp_length_ns) */
    replay_cp_piece *cp_pieces;              /* the path piece by piece, in time order */
    int32_t n_cp_pieces;
    int32_t cp_rank;    /* rank whose iteration end the path leads to */
    int32_t unfinished; /* nodes the simulation could not run */
} replay_summary;

/* Summarises simulation res of graph g (rp->graph or a copy). Returns 0 or -1. */
int replay_summarize(const replay *rp, const dfg *g, const sim_result *res, replay_summary *out);

void replay_summary_free(replay_summary *s);

/* Critical path of res (simulation of g) ending at node `to` (< 0: res->last_node) and
 * walked back to time from_ns (sim_critical_path), composed into out->cp, n_cp,
 * cp_length_ns, cp_class_ns, cp_pieces, n_cp_pieces and cp_rank = cp_rank (out's other fields are
 * left alone; out->cp and out->cp_pieces must be NULL and the sums 0). Each segment of the path
 * (the time it spends in a node: from the node's release to the release of the next, inside
 * [from_ns, end)) is charged to what ran in it on the node's resource: a host call's segment to the
 * host time before the call started, then the call (REPLAY_CP_API); the host time, in
 * the measured window of that length ending at the call's measured start, to the
 * innermost cpu_op, else annotation, on the call's thread over each part of it
 * (host_other where none was recorded; cpu_ops and annotations come from the ranks'
 * MARKER events, Kineto's python_function excepted); a device op's segment to its launch
 * call (while the call ran), then the launch delay (or the stream gap when its stream or
 * another stream released it), then the op itself by kind. Everything on a rank other
 * than cp_rank but a collective's transfer is REPLAY_CP_WAIT_RANK. Returns 0 or -1 (out of memory).
 */
int replay_cp_compose(const replay *rp, const dfg *g, const sim_result *res, int32_t cp_rank,
                      int32_t to, int64_t from_ns, replay_summary *out);

void replay_close(replay *rp);

/* Moves rp->graph into *g (rp->graph left empty): for a caller that takes the replay's
 * graph as its working graph and reads it as built no more. Cannot fail. */
void replay_take_graph(replay *rp, dfg *g);

/* Detects iterations of one rank's events (exposed for tests): fills *it (free with
 * replay_rank_iters_free). Returns 0 or -1 (out of memory). */
int replay_detect_iterations(const job_rank *jr, replay_rank_iters *it);

/* The iterations of one rank: those the load cut (job_rank.bounds), else detected
 * (replay_detect_iterations). Fills *it (free with replay_rank_iters_free). Returns 0 or
 * -1 (out of memory). */
int replay_rank_iterations(const job_rank *jr, replay_rank_iters *it);

void replay_rank_iters_free(replay_rank_iters *it);

/* The clock alignment samples of rank r (jr: its events and its reader's communicator
 * table), in the order the replay's alignment takes them: each send/recv whose device op
 * carries that one transfer, keyed by (channel, ordinal on the channel: both ends of a
 * transfer finish together), then each collective's device end (its host call's end when
 * it has no device record: approximate), keyed by (communicator, build_coll_seq). Shared
 * reading takes them where the rank was read (job_rank.align). Fills *out (free out->s).
 * Returns 0 or -1 (out of memory; *out empty). */
int replay_rank_align_samples(const job_rank *jr, int32_t r, job_align_part *out);

#endif
