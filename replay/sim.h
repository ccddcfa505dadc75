/*
 * sim.h: the discrete-event replay of a dataflow graph (prefix sim_), and what is
 * derived from a timeline: iteration times, critical path, time breakdown, stragglers.
 *
 * Every resource (host thread, stream) runs its nodes in their dfg order; a node starts
 * when the previous node on its resource, its launch and its predecessors allow (dfg.h
 * says how each dependency counts) and a collective transfers once its last participant
 * is ready. Because each resource's order is fixed, the loop needs no priority queue:
 * a node's times are fixed as soon as its last dependency is, so one pass over the
 * nodes in dependency order (O(nodes + edges)) is the whole simulation.
 * Ties are broken by node id, not by the order the loop meets nodes in (a group's last
 * participant, a node's binding dependency, the last node), so the distributed
 * simulation (mpi_sim.h), which meets them in another order, gives the same answer.
 *
 * Timelines: a sim_result holds start/end of every node; the measured timeline is the
 * graph's own mstart/mend. Analysis functions take a sim_timeline view so both are
 * treated alike.
 */
#ifndef DPRO_REPLAY_SIM_H
#define DPRO_REPLAY_SIM_H

#include <stdint.h>

#include "dfg.h"

/* What determined a node's start (sim_result.why). */
enum sim_cause {
    SIM_CAUSE_NONE = 0,     /* started at its gap from time 0 */
    SIM_CAUSE_RESOURCE = 1, /* the previous node on its resource */
    SIM_CAUSE_LAUNCH = 2,   /* its launch (host call start + latency) */
    SIM_CAUSE_EDGE = 3,     /* an edge predecessor (of a WAKEUP call: its waker) */
    SIM_CAUSE_GROUP = 4,    /* waited for the last participant of its collective */
};

typedef struct sim_result {
    int32_t n_nodes, cap_nodes;
    int64_t *start, *end; /* ns; -1 for removed or never-run nodes */
    int32_t *crit;        /* the node whose time bound this node (-1 none) */
    uint8_t *why;         /* enum sim_cause */
    int32_t n_groups, cap_groups;
    int64_t *grp_arrival; /* time the last participant was ready */
    int32_t *grp_last;    /* that participant */
    int64_t makespan;     /* latest end */
    int32_t last_node;    /* node ending last */
    int32_t n_unfinished; /* live nodes never run (cycle or missing dependency) */
    int32_t first_unfinished;
    /* scratch reused between runs */
    int32_t *cnt;
    int64_t *ready;
    int32_t *stack;
    int32_t *arrived;
    int32_t *succ_at; /* each node's first successor's index in the graph's succ (its n_edges:
                       * none), found once per run by sim_begin's pass over the edges instead
                       * of a search of the node's block per finish (dfg_succ_first) */
} sim_result;

/* Simulates g (finalizing it first if needed) into res. res must be zeroed before its
 * first use and may be reused between runs (arrays grow as needed); free it with
 * sim_result_free. Returns 0, -1 when out of memory. Nodes that cannot run (a cycle)
 * are counted in res->n_unfinished; their times stay -1. */
int sim_run(dfg *g, sim_result *res);

/* Frees the arrays of res and zeroes it. */
void sim_result_free(sim_result *res);

/* Frees res's scratch (cnt, ready, stack, succ_at, arrived: 20 bytes a node that only a run uses)
 * and keeps the result readable; a later sim_run on res allocates the scratch again. For
 * a result kept while other simulations run (dpro-replay's exact replay during the
 * typical-duration one). */
void sim_result_trim(sim_result *res);

/* A timeline: start/end per node and, per group, the time of the last arrival. */
typedef struct sim_timeline {
    const int64_t *start, *end;
    const int64_t *grp_arrival;
} sim_timeline;

/* View of a simulation result. */
sim_timeline sim_timeline_of(const sim_result *res);

/* The measured timeline of g: mstart, the ends (dfg_mend) written into end_buf (g->n_nodes
 * entries, caller-owned) and group arrivals computed into grp_arrival_buf (g->n_groups
 * entries, caller-owned). g must be finalized. */
sim_timeline sim_timeline_measured(const dfg *g, int64_t *grp_arrival_buf, int64_t *end_buf);

/* Mean iteration time of rank r over iterations [first, last] (indices into the rank's
 * iteration boundaries; iteration i runs from the end of boundary node i to the end of
 * boundary node i+1). Returns the mean in ns, or -1 if the range is not covered. The one
 * iteration statistic of dpro-replay and dpro-optimize: the mean, as a job measures its
 * own time per step (total time over iterations, stalls included). */
double sim_iteration_time(const dfg *g, sim_timeline tl, int32_t r, int32_t first, int32_t last);

/* The median of v[0..n-1] (sorts v in place; the mean of the two middle values when n is
 * even), or -1 when n < 1. */
double sim_median_i64(int64_t *v, int32_t n);

/* Median iteration time of rank r over iterations [first, last] (as sim_iteration_time),
 * in ns, or -1 if the range is not covered. The typical iteration, as a job that reports
 * its median step (ddp-sim, torch.utils.benchmark) measures it: a rare stall (a host
 * hiccup, a preempted thread) moves the mean by its length over the iterations and the
 * median not at all, so a what-if compared with a median run is compared by this. */
double sim_iteration_median(const dfg *g, sim_timeline tl, int32_t r, int32_t first, int32_t last);

/* Time window [*t0, *t1) of iterations [first, last] of rank r; returns 0, or -1 if
 * not covered. */
int sim_iteration_window(const dfg *g, sim_timeline tl, int32_t r, int32_t first, int32_t last,
                         int64_t *t0, int64_t *t1);

/* Critical path ending at node `to` (or at res->last_node when to < 0), walked back
 * through the binding dependencies down to time `from_ns`. *path receives a malloc'd
 * array of nodes in time order (caller frees), *n its length. Each node's contribution
 * (the time the path spends in it) is end - the time its binding dependency released
 * it. Returns 0 or -1. */
int sim_critical_path(const dfg *g, const sim_result *res, int32_t to, int64_t from_ns,
                      int32_t **path, int32_t *n);

/* When node n's binding dependency released it (its start, for a node with none);
 * -1 if n did not run. */
int64_t sim_release_time(const dfg *g, const sim_result *res, int32_t n);

/* Time the critical path spends in path[i]: from the moment its binding dependency
 * released it to the moment it released path[i+1] (its end for the last node). The
 * contributions of a path sum to its length. */
int64_t sim_path_contribution(const dfg *g, const sim_result *res, const int32_t *path, int32_t n,
                              int32_t i);

/* Breakdown of one rank's time over a window, in ns. compute: device compute (kernels,
 * copies, memsets) busy; communication: collectives transferring and NCCL kernels
 * outside a collective (dpro_kernel_is_comm: imported SendRecv kernels); overlap: both at once;
 * wait_ranks: a collective waiting for other ranks while nothing else runs; host_idle:
 * nothing runs on the device (the host does not feed it). compute + communication -
 * overlap + wait_ranks + host_idle == window. */
typedef struct sim_breakdown {
    int64_t window;
    int64_t compute;
    int64_t communication;
    int64_t overlap;
    int64_t wait_ranks;
    int64_t host_idle;
} sim_breakdown;

/* Computes the breakdown of rank r over [t0, t1) of timeline tl (for a folded rank, its
 * representative's: dfg_rank_rep). Returns 0 or -1 (out of memory). */
int sim_breakdown_rank(const dfg *g, sim_timeline tl, int32_t r, int64_t t0, int64_t t1,
                       sim_breakdown *out);

/* Stragglers over a window: for each collective whose last arrival falls in [t0, t1),
 * the last rank to arrive is charged with the mean time the other participants waited
 * for it. Send/recv exchanges (groups of op DPRO_COLL_SEND) are not counted: in a
 * pipeline one stage waits for the previous one by design (the breakdown's wait_ranks
 * still shows that time). blame_ns[r] (n_ranks entries, caller-owned, zeroed here) receives each
 * rank's charge and last_count[r] how often it arrived last (may be NULL). In a folded
 * graph (dfg_fold) a participant counts as the dfg_rank_weight ranks of its class, all
 * arriving when it does, and a class's charge and count are shared evenly by its ranks. */
void sim_stragglers(const dfg *g, sim_timeline tl, int64_t t0, int64_t t1, double *blame_ns,
                    int32_t *last_count);

#endif
