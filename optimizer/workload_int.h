/*
 * workload_int.h: what the files of the workload analysis (workload*.c) share and
 * nobody else uses.
 */
#ifndef DPRO_OPTIMIZER_WORKLOAD_INT_H
#define DPRO_OPTIMIZER_WORKLOAD_INT_H

#include <stdint.h>
#include <string.h>

#include "dprotrace.h"
#include "optimizer/workload.h"

#define NS_PER_US 1000.0

static inline int
is_device(const dfg *g, int32_t n)
{
    return g->kind[n] == DFG_KERNEL || g->kind[n] == DFG_MEMCPY || g->kind[n] == DFG_MEMSET;
}

static inline int
alive(const dfg *g, int32_t n)
{
    return !(g->flags[n] & DFG_F_REMOVED);
}

/* The dpro_api_class of host node n's call, from its name (every spelling: _ptsz, _v2,
 * driver, HIP; libdprotrace decides). */
static inline dpro_api_class
api_class(const dfg *g, int32_t n)
{
    return g->kind[n] == DFG_HOST ? dpro_api_classify(dfg_name(g, g->name[n]))
                                  : DPRO_API_CLASS_OTHER;
}

/* Per-rank facts gathered on the way. */
typedef struct rank_info {
    int32_t main_thread, bwd_thread, compute_stream;
    int32_t n_iters;    /* boundaries */
    int64_t *first_bwd; /* per iteration: start of the first backward launch, or -1 */
} rank_info;

static inline int
cmp_int32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The analyses workload_analyze runs, in its order; each returns 0, or -1 when out of
 * memory, and leaves its why-string set when it finds nothing. */

/* Fusion chains (workload.h) from the baseline durations. */
int workload_find_chains(workload *w);

/* Bucket units: the gradient all-reduces and the host calls that go with them. */
int workload_find_units(workload *w, rank_info *ri);

/* Layers and recomputation sites from the memory estimate of rank mem_rank. */
int workload_find_layers(workload *w, rank_info *ri, int32_t mem_rank);

/* Gradient bytes per layer, for tensor partition. */
int workload_find_gradients(workload *w);

/* The layers' weight floors (workload_floor.c), after the gradient bytes per layer. */
int workload_find_weight_floors(workload *w);

/* Parameter sizes of DDP's buckets (workload.h: param_bytes), from the copies back into
 * the gradients after the last all-reduce. */
int workload_find_params(workload *w, const rank_info *ri);

/* w->capture.idle_wake_node and idle_wake_dur (workload_capture.c says how). */
int workload_idle_wake_latency(workload *w);

/* workload_step_call's answer, worked out. */
int workload_step_call_of(const workload *w, int32_t h);

/* The graph launch of a captured step (WL_CAPTURE_STEP): on each rank's main thread, one
 * step call a step stays on the host with its duration (w->capture.step_call cleared;
 * listed in w->capture.graph_launch), standing for cudaGraphLaunch, the one launch call
 * that submits the captured step (a class of folded ranks: on its representative's thread,
 * once). A step runs from one closing synchronisation (the calls
 * of the thread's blocking call name that waited longest in the baseline's replay, base,
 * when it comes once a step) to the next, or, without one, from one iteration to the
 * next; its launch stands where a captured step's is: at its first kernel launch after
 * its last other blocking call (the input's copy waited for), else at its first
 * (workload_capture.c). Returns 0, or -1 when out of memory. */
int workload_keep_graph_launch(workload *w, const sim_result *base);

/* FSDP's all-gathers (workload_fsdp.c). */
int workload_find_fsdp(workload *w, const rank_info *ri);

/* w->capture.g, when a step call has launch-queue edges. */
int workload_build_capture(workload *w);

#endif
