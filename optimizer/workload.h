/*
 * workload.h: what the optimizer learns from a replayed job before it searches
 * (prefix workload_).
 *
 * workload_analyze reads a finalized dataflow graph (replay/dfg.h) and its baseline
 * simulation and annotates it:
 *   - iterations: every node gets the iteration it belongs to on its rank (a device op:
 *     that of its launch);
 *   - threads and phases: the rank's main thread is the one that opens iterations; the
 *     backward thread is the other host thread that launches the most device work (the
 *     autograd engine's device thread in PyTorch). A device op launched by the backward
 *     thread is BACKWARD; one launched by the main thread before the iteration's first
 *     backward launch is FORWARD, after it OPTIMIZER. Collectives are COMM;
 *   - fusion chains: maximal runs of >= 2 consecutive kernels on a stream, each at most
 *     short_kernel_us long, of one name, launched back to back by one host thread;
 *   - bucket units: the gradient all-reduces of an iteration in backward order (the
 *     finest grouping the trace shows); every rank and iteration must show the same
 *     sequence of sizes, else tensor fusion is unavailable (tensor_why says why);
 *   - layers (when a memory estimate with activation allocations is attached): forward
 *     kernel k of the first iteration belongs to the layer of the last activation
 *     allocation before its launch; later iterations with the same forward kernel
 *     sequence take the same assignment; the backward of layer l starts at the backward
 *     kernel whose index is the share of forward kernels of the layers after l
 *     (backward runs the layers in reverse, and a layer's backward is proportional to
 *     its forward in kernel count).
 *
 * Event edges: when the trace has event records but the graph has no device-to-device
 * edge (the builder could not resolve the streams), the DDP pattern is rebuilt from
 * call order (record; wait; collective: the bucket waits for the last kernel launched
 * before the record; record; wait; kernel: the kernel waits for the rank's last
 * collective), see repair_event_edges in workload.c.
 *
 * Thread hand-offs: the optimizer's working copy gets one zero-length host node per
 * hand-off between the main and the backward thread, with an edge from the call waited
 * for (see link_threads in workload.c), because a measured gap would pin the waiting
 * thread to the old schedule when a strategy shortens the other one.
 *
 * After that, the working graph keeps its structure: the strategies (strategy.h) change only
 * durations, gaps and launch latencies, so one finalized graph is re-simulated for
 * every candidate without rebuilding it. workload_reset restores the baseline values.
 */
#ifndef DPRO_OPTIMIZER_WORKLOAD_H
#define DPRO_OPTIMIZER_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "optimizer/memest.h"
#include "replay/costmodel.h"
#include "replay/dfg.h"
#include "replay/sim.h"

enum workload_phase {
    WL_OTHER = 0,
    WL_FORWARD = 1,
    WL_BACKWARD = 2,
    WL_OPTIMIZER = 3,
    WL_COMM = 4,
};

typedef struct workload_options {
    double short_kernel_us; /* fusion candidates: kernels at most this long (50) */
    double kernel_fixed_us; /* prior of the per-kernel fixed cost (3); the fit keeps it
                               at or below the shortest kernel of the trace */
    double recompute_keep;  /* share of a recomputed layer's activations kept (0.125) */
} workload_options;

/* Fills o with the defaults above. */
void workload_default_options(workload_options *o);

typedef struct workload {
    dfg *g;                        /* the working graph (caller's; values change, structure not) */
    const costmodel *model;        /* collective cost model (may be NULL: no tensor fusion) */
    int32_t iter_first, iter_last; /* compared iterations (indices of boundaries) */
    workload_options opt;
    double kernel_fixed_ns; /* fitted per-kernel fixed cost (see strategy.h) */

    /* baseline values, restored by workload_reset */
    int32_t n_nodes, n_groups;
    int64_t *base_dur, *base_gap, *base_grp_dur;
    int32_t *base_lat;

    /* per rank */
    int32_t *main_thread, *bwd_thread; /* resources, -1 none */

    /* per node */
    int32_t *iter;       /* iteration on its rank, -1 before the first boundary */
    uint8_t *phase;      /* enum workload_phase */
    int32_t *layer;      /* forward / backward kernels: layer, else -1 */
    uint8_t *on_compute; /* 1: on its rank's compute stream */

    /* fusion chains (CSR: chain c is chain_node[chain_off[c] .. chain_off[c+1]-1]) */
    int32_t n_chains;
    int32_t *chain_off, *chain_node;
    int64_t chain_kernels; /* kernels inside chains */
    char fusion_why[160];  /* empty when fusion is available */
    int graph_captured;    /* most kernels come from CUDA graph launches already */

    /* bucket units */
    int32_t n_units;
    int64_t *unit_bytes;  /* per unit, backward order */
    int32_t *group_unit;  /* per group: its unit, -1 when not a gradient all-reduce */
    int32_t *group_hosts; /* per group: up to 3 host nodes per participant to drop when
                             the group is folded into a later one (CSR by group_hosts_off) */
    int32_t *group_hosts_off;
    int coll_op;
    int32_t coll_nranks;
    char tensor_why[160];

    /* layers and recomputation sites */
    int32_t n_layers;
    int32_t n_sites; /* one per (rank, iteration, layer) */
    int32_t *site_layer;
    int32_t *site_anchor;         /* first backward kernel of the layer in that iteration */
    int32_t *site_off, *site_fwd; /* CSR: forward kernels of the layer in that iteration */
    char memory_why[160];

    /* memory */
    int have_memory;
    memest mem; /* of the rank with the largest measured peak */

    int64_t repaired_edges; /* event edges rebuilt (see repair_event_edges in workload.c) */

    /* baseline */
    double measured_iter_ns; /* simulated before the hand-offs were linked */
    double base_iter_ns;     /* simulated on the linked graph: the baseline */
} workload;

/* Analyzes g (the caller's working copy: the thread hand-offs are inserted into it) for
 * iterations [iter_first, iter_last]. base (zeroed or reused) receives the baseline
 * simulation of the linked graph. model may be NULL; mem (may be NULL) is the memory
 * estimate of rank mem_rank and is taken over (w owns it afterwards, even on failure).
 * Returns 0, or -1 when out of memory (free w with workload_free either way). */
int workload_analyze(workload *w, dfg *g, sim_result *base, int32_t iter_first, int32_t iter_last,
                     const costmodel *model, memest *mem, int32_t mem_rank,
                     const workload_options *opt);

/* Where the first iteration of rank r lies, for memest_build: the main thread (the one
 * that opens iterations) and the backward thread (the other thread that launches the
 * most), and the first and last backward launch in the window [t0, t1) of the first
 * iteration (graph clock; t0 < 0: the window between the graph's first two iteration
 * boundaries), from the measured times of g (finalized). Returns 0, or -1 when the rank
 * has no iteration. */
int workload_memory_phases(const dfg *g, int32_t r, int64_t t0, int64_t t1, memest_phases *ph);

/* Restores the baseline durations, gaps, latencies and group durations in w->g. */
void workload_reset(workload *w);

/* Mean simulated iteration time (ns) of res over the compared iterations, averaged over
 * the ranks that cover them; -1 when none does. */
double workload_iteration_ns(const workload *w, const sim_result *res);

void workload_free(workload *w);

#endif
