/*
 * partition.h: tensor partition, gradient all-reduces split into buckets smaller than
 * the trace's, which start during the backward (prefix partition_).
 *
 * The trace shows the gradient all-reduces (the bucket units, workload.h) and, when the
 * framework allocates one tensor per layer's parameters, the gradient sizes; bucket
 * caps smaller than a unit need a model of when the unit's bytes become ready:
 *
 *   span      the span of unit u on a rank and iteration is the run of kernels on the
 *             compute stream that ends with u's gating kernel (the kernel its all-reduce
 *             waits for through an event edge) and starts right after the gating kernel
 *             of unit u-1 of that rank and iteration (for the first unit, at the first
 *             backward kernel of the iteration; when the gating kernel is not a backward
 *             kernel, e.g. a single-threaded job, at the first kernel of the iteration);
 *   bytes     u's bytes become ready progressively over its span. When the allocation
 *             trace gives the gradient sizes per layer (workload.h: layer_grad, unit_lo)
 *             the span runs the backward of u's layers, the last one first, each over a
 *             share of the span's kernels proportional to its forward kernels, and a
 *             layer's bytes (its share of the unit in proportion to the layers'
 *             allocations) are ready at the end of its last kernel. Otherwise bytes are
 *             spread in proportion to the kernels' cumulative baseline duration. Before
 *             both, when the parameter sizes are known (workload.h: param_bytes) and the
 *             span holds at least as many kernels of its gating kernel's name as u has
 *             parameters, k (DDP's copy of each gradient into its bucket, the last one
 *             gating the all-reduce), the last k of them are the copies, in the
 *             parameters' order, and a parameter's bytes are ready at the end of its
 *             copy. Each way a byte at
 *             fraction f of the unit is ready at the end of the first kernel of the
 *             span where the cumulative weight reaches f of the span's total;
 *   packing   buckets are packed in backward order as DDP packs parameters, with the
 *             first cap (first_bucket_mb) for the first bucket and bucket_cap_mb after.
 *             A unit that fits into the cap in effect when it is reached stays whole
 *             (the bucket closes at the unit's end once it holds the cap, as the
 *             in-place regrouping of strategy.c does); a larger unit is split: the open
 *             bucket is filled from the unit's first bytes up to the cap, then full
 *             buckets follow, and the rest stays open for the next units (or closes
 *             at the end of the last unit). Buckets that become ready at the same kernel
 *             of the reference span (the first rank's first compared iteration) are one
 *             bucket (a parameter is never split), and a bucket ready at the last kernel
 *             of the span closes with the unit itself. When the trace gives the
 *             parameter sizes (workload.h: param_bytes), or without them the layers'
 *             gradient sizes (grad_bytes: one tensor per layer, as ddp-sim), the buckets
 *             are DDP's instead (partition_ddp_buckets' rule over those tensors in
 *             backward order): whole tensors, each bucket closing with the tensor that
 *             fills it, none merged with another, so that their count and bytes are the
 *             applied run's; a bucket that closes inside a unit splits it;
 *   graph     each bucket that closes inside a unit becomes a new collective group: on
 *             every rank its participant is inserted on the communication stream before
 *             the unit's own participant, in bucket order, with an edge from the kernel
 *             at which its bytes are ready (DDP's event record on the compute stream and
 *             wait on the communication stream); the unit's event record, stream wait
 *             and collective calls, then the other calls of its hook block (workload.h:
 *             group_block), are copied right after that kernel's launch call,
 *             each costing what a call of its name typically costs on its thread (the
 *             median duration and gap, workload.h: host_dur, host_gap; at most the
 *             unit's own call's), and the last copy launches the participant; the call
 *             after the copied block waits, beyond its gap, the excess of the gap of the
 *             call after the unit's block over its name's (workload.h: block_after,
 *             after_gap), the bookkeeping after the hook, at most that excess's median
 *             over the thread's units. The unit's
 *             own all-reduce carries the bucket that closes at its end, or takes no time
 *             and loses its host calls when none does (it stays as a zero-length
 *             synchronisation point, as a folded unit of the regrouping);
 *   time      every bucket transfers for the fitted collective model's time for its
 *             bytes (costmodel_predict).
 *
 * The working graph's structure never changes: partition_build transforms a copy of it
 * (on which strategy_apply has written the plan's other strategies), and the candidate
 * is simulated on that copy.
 */
#ifndef DPRO_OPTIMIZER_PARTITION_H
#define DPRO_OPTIMIZER_PARTITION_H

#include <stdint.h>

#include "optimizer/strategy.h"
#include "optimizer/workload.h"
#include "replay/dfg.h"

/* What tensor partition reads: the graph to transform, the bucket units and the layers'
 * forward kernel counts (workload.h), and workload_analyze's per-node annotation.
 * strategy_partition_input (strategy.h) fills it from an analysed workload. */
typedef struct partition_input {
    const dfg *g; /* the working graph holding the plan's other strategies (strategy_apply) */
    const workload_buckets *bu; /* units, their groups and host calls, gradient sizes */
    const int32_t *layer_nfwd;  /* per layer: its forward kernels (may be NULL) */
    int32_t n_layers;
    int32_t n_nodes, n_groups; /* nodes and groups the annotation covers */
    const int32_t *iter;       /* per node: iteration on its rank, -1 before the first */
    const uint8_t *phase;      /* per node: enum workload_phase */
    const uint8_t *on_compute; /* per node: 1 on its rank's compute stream */
    const int64_t *base_dur;   /* per node: baseline duration */
    int32_t iter_first;        /* the first compared iteration */
} partition_input;

/* DDP's bucket assignment (torch's _compute_bucket_assignment_by_size, as the reducer
 * rebuilds its buckets after the first iteration): the n tensors of sizes[], in the
 * order their gradients become ready, fill the buckets whole and in that order; a bucket
 * closes with the tensor that brings it to its cap or past it (first_cap for the first
 * bucket, cap for the others), the last bucket with the last tensor. Fills end[b] with
 * bucket b's last tensor (end may be NULL) and returns the number of buckets. */
int32_t partition_ddp_buckets(const int64_t *sizes, int32_t n, int64_t first_cap, int64_t cap,
                              int32_t *end);

/* 1 when plan p's buckets split at least one unit of bu (a unit larger than the cap in
 * effect when the packing reaches it): p is then applied by partition_build instead of
 * the in-place regrouping. 0 when tensor fusion is unavailable or p keeps the measured
 * buckets. */
int partition_splits(const workload_buckets *bu, const strategy_plan *p);

/* Buckets per iteration of a splitting plan p (after merging the buckets that become
 * ready at one kernel of the reference span, unless they are DDP's whole-parameter
 * buckets); -1 when out of memory. */
int32_t partition_bucket_count(const partition_input *in, const strategy_plan *p);

/* The bytes of the buckets of a splitting plan p, in backward order (the count's,
 * partition_bucket_count), into out (at most max of them). Returns their number, 0 when p
 * does not split, -1 when out of memory. */
int32_t partition_bucket_bytes(const partition_input *in, const strategy_plan *p, int64_t *out,
                               int32_t max);

/* The units whose bytes the partition places by the parameters' copies into the buckets
 * (see bytes above) on their reference span (the first rank's first compared iteration);
 * the others are placed by the gradient sizes or the backward time. -1 when out of
 * memory. */
int32_t partition_units_by_copies(const partition_input *in);

/* Sets mark[k] (per node of in->g) to WL_MICRO_SYNC_ONLY (workload.h) for every kernel that is
 * DDP's copy of a parameter's gradient into its bucket (see bytes above: the last k kernels of the
 * gating kernel's name in a unit's span holding k parameters), on every rank and
 * iteration whose span shows them; the other entries are left as they are. Nothing is
 * marked without the parameter sizes. Returns 0, or -1 when out of memory. */
int partition_mark_copies(const partition_input *in, uint8_t *mark);

/* Builds into out (zeroed, or a graph an earlier call or dfg_copy made: its arrays are
 * reused, dfg_copy) a copy of in->g with p's buckets (see above).
 * in->g must hold the plan's other strategies (strategy_apply) and p must split
 * (partition_splits). *n_buckets (may be NULL) receives the buckets per iteration.
 * Returns 0, or -1 when out of memory (out is then freed). */
int partition_build(const partition_input *in, const strategy_plan *p, dfg *out,
                    int32_t *n_buckets);

#endif
