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
 *   - fusion chains: with opt.fusion_scope WL_FUSE_SAME_NAME, maximal runs of >= 2
 *     consecutive kernels on a stream, each at most short_kernel_us long, of one name,
 *     launched back to back by one host thread; with WL_FUSE_COMPILED, what torch.compile's
 *     Inductor fuses (workload_fusion.c, docs/models.md): in each stretch of one thread's
 *     device ops on the compute stream, between its first and last GEMM, the runs of
 *     non-GEMM ops between GEMM or attention kernels, DDP's per-parameter work and an
 *     attention kernel's memsets left out, cut into one chain per reduction;
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
 * Event edges: where the trace's event calls name no stream the device ops have, the
 * replay rebuilds the DDP pattern from call order (replay/build.h:
 * build_repair_event_edges); the optimizer takes the replay's graph as it is.
 *
 * Cross-thread wake-ups: the optimizer relies on the replay's wake-up edges
 * (DFG_F_WAKEUP, replay/build.c infer_wakeups): a call that waited for another thread
 * (the autograd engine thread waiting for backward() to be called, backward()
 * returning when the engine is done) starts at its waker's end plus the measured
 * wake-up latency, so when a strategy shortens one thread the other follows it rather
 * than keep the measured gap.
 *
 * CUDA graph capture: a captured step is one graph launch, so the launch calls it
 * replaces (workload_step_call) are not held by the launch queue, nor woken by a thread
 * outside the step, and the whole step's device work follows its input's copy. Where
 * such calls carry launch-queue edges (DFG_F_QUEUED) or, for the whole step, wake-up
 * edges from calls that stay, or device work of the step is launched before the input's
 * copy, workload_analyze makes `capture`, a copy of the working graph without those
 * edges and with edges from the copy's call to that work (same node ids), and
 * strategy_apply simulates plans that capture the step on it.
 *
 * After that, the working graphs keep their structure: the strategies (strategy.h) change
 * only durations, gaps and launch latencies, so one finalized graph is re-simulated for
 * every candidate without rebuilding it. workload_reset restores the baseline values.
 */
#ifndef DPRO_OPTIMIZER_WORKLOAD_H
#define DPRO_OPTIMIZER_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "optimizer/memest.h"
#include "replay/contention.h"
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

/* A device op in the micro-batches of gradient accumulation (workload_buckets: micro). */
enum workload_micro {
    WL_MICRO_PHASE = 0,     /* as its phase says: forward and backward run in every one */
    WL_MICRO_SYNC_ONLY = 1, /* only the synchronised micro-batch of a step runs it, the
                             * others running under DDP's no_sync(): DDP's copies of the
                             * gradients into the buckets (partition_mark_copies), its
                             * copies back after the last all-reduce, and the zeroing of
                             * the gradients before the step (a run of memsets on the main
                             * thread, nothing else launched between them, whose sizes are
                             * the parameters'); or under FSDP2's
                             * set_requires_gradient_sync(False) each reduce-scatter's
                             * copy-in and the main thread's device ops but copies before
                             * its first forward all-gather (the optimizer's step;
                             * workload_fsdp.c) */
    WL_MICRO_FORWARD = 2,   /* launched by the main thread after the zeroing in its
                             * iteration where that zeroing comes after the backward (phase
                             * OPTIMIZER): the iteration is cut between forward and backward,
                             * and this is the next step's forward (its phase reads OPTIMIZER
                             * too), which every micro-batch runs */
    WL_MICRO_INPUT = 3,     /* a copy the main thread launches after the gradients' zeroing
                             * and before its next kernel, in the zeroing's iteration
                             * (whether the zeroing opens the iteration or comes after the
                             * backward: then a WL_MICRO_FORWARD one), or under FSDP a
                             * main-thread copy before the iteration's first forward
                             * all-gather that belongs to no unshard: the batch copied to
                             * the device. Its host call and
                             * the gap before it (the host making or fetching the batch)
                             * scale with the batch: each of k micro-batches spends 1/k */
    WL_MICRO_CALL = 4,      /* a host call that launches nothing and that every micro-batch
                             * makes again: under FSDP the event calls of the forward's
                             * unshards and copy-outs but the polls (workload_fsdp.c); the
                             * micro-batch prices its duration and the gap before it */
    WL_MICRO_GAP = 5,       /* a host call whose count follows how far the device lags the
                             * host (under FSDP an event poll among the forward's unshards'
                             * calls): the micro-batch prices the gap before it (the host's
                             * work between the calls, which every micro-batch does again),
                             * not the call */
};

/* What a CUDA-graph capture covers (workload_options.capture_scope; the framework's
 * capture decides, framework.h). */
enum workload_capture_scope {
    WL_CAPTURE_STEP = 0,    /* the whole step: every launch of a kernel, a collective, a
                             * memset or a device-to-device copy, the event calls and the
                             * backward thread's calls (a step captured with its collectives,
                             * as ddp-sim --cuda-graph and torch.cuda.graph of a DDP step do;
                             * copies from or to host memory stay outside) */
    WL_CAPTURE_COMPUTE = 1, /* the forward and backward compute only: the calls that launch
                             * forward or backward kernels and nothing else (CUDA graphs of
                             * a compiled forward and backward; the collectives, the
                             * optimizer step and the other calls stay on the host) */
};

/* Which runs of kernels operator fusion fuses (workload_options.fusion_scope; the
 * framework's fuser decides, framework.h). */
enum workload_fusion_scope {
    WL_FUSE_SAME_NAME = 0, /* runs of >= 2 kernels of one name, each at most
                            * short_kernel_us, launched back to back (ddp-sim --fuse-small) */
    WL_FUSE_COMPILED = 1,  /* what torch.compile's Inductor fuses: inside the model's forward
                            * and backward, the runs of non-GEMM device ops between GEMM and
                            * attention kernels (workload_find_chains) */
};

/* One kernel execution of the trace, for the fit of the per-kernel fixed cost. */
typedef struct workload_kernel_sample {
    uint64_t key;    /* one value per kernel name (and rank: names of different ranks may
                        share a key or not, the fit groups by key) */
    double threads;  /* grid x block: threads launched (> 0) */
    int64_t dur_ns;  /* measured duration */
    int32_t rank;    /* its rank */
    int64_t t_ns;    /* its start on the graph's clock (dfg mstart) */
    uint32_t grid_x; /* the grid's first dimension, 0 unknown */
    uint64_t stream; /* its stream (the trace's handle: the graph resource's res_id) */
    uint64_t event;  /* its event's index in its rank's trace (job_rank.events) */
    /* (rank, stream, t_ns, event) identify the sample: workload_analyze gives it to the
     * kernel node of its rank and stream that started at t_ns (a stream runs its kernels one
     * after another; kernels of no length starting at one instant, in event order) */
} workload_kernel_sample;

typedef struct workload_options {
    double short_kernel_us; /* fusion candidates: kernels at most this long (50) */
    int no_contention;      /* 1 (default): no contention correction (--contention) */
    int fusion_fixed;       /* 1: price every fused kernel with the fixed-cost formula,
                               not the kernel's fitted hinge (--fusion-model fixed) */
    double kernel_fixed_us; /* prior of the per-kernel fixed cost (3), used when the
                               kernel samples cannot be fitted (workload_fit_fixed_cost) */
    double recompute_keep;  /* share of a recomputed layer's activations kept (0.125) */
    int capture_scope;      /* enum workload_capture_scope (WL_CAPTURE_STEP) */
    int fusion_scope;       /* enum workload_fusion_scope (WL_FUSE_SAME_NAME) */
    /* kernel executions of the trace with their launch dims (may be NULL: the prior is
       used); read during workload_analyze only, reordered by it */
    workload_kernel_sample *kernel_samples;
    size_t n_kernel_samples;
} workload_options;

/* The fitted per-kernel fixed cost (workload_fit_fixed_cost). */
typedef struct workload_fixed_fit {
    int32_t names;   /* kernel names (keys) fitted: >= WORKLOAD_FIT_MIN_SIZES distinct
                        thread counts spanning a factor >= 2, a positive slope */
    double c0_ns;    /* weighted mean of their intercepts (>= 0); 0 when names == 0 */
    double slope_ns; /* the same mean of their slopes, ns per thread (information) */
} workload_fixed_fit;

#define WORKLOAD_FIT_MIN_SIZES 3

/* Fits, per kernel name, duration = c0 + c1 * threads over the n samples (reordered:
 * sorted by key and threads): the samples of one thread count are reduced to their
 * median duration, then a least-squares line goes through these medians. A name takes
 * part when it has at least WORKLOAD_FIT_MIN_SIZES thread counts whose largest is at
 * least twice the smallest and its slope is positive. The fixed cost is the mean of the
 * intercepts weighted by their inverse variance (residual variance times
 * 1/m + mean(x)^2 / Sxx over the m thread counts, floored at (1 % of the name's
 * median duration)^2), clamped at 0. Fills *fit; returns fit->names. */
int32_t workload_fit_fixed_cost(workload_kernel_sample *s, size_t n, workload_fixed_fit *fit);

/*
 * The kernel-time model of one kernel name over its launch sizes (the hinge):
 *   duration = c0 + c1 * max(threads, ts)
 * flat below ts threads (a grid too small to fill the device: a latency-bound kernel
 * takes the same time whatever its size), linear above (bandwidth- or compute-bound).
 * Fitted per name on the median duration of each thread count: for every candidate ts
 * among the name's thread counts (the smallest: a plain line) c0 and c1 by least squares
 * of the relative error, the ts with the least error kept. A name takes part with the
 * conditions of workload_fit_fixed_cost (WORKLOAD_FIT_MIN_SIZES thread counts spanning
 * a factor >= 2) and c1 > 0.
 */
typedef struct workload_hinge {
    uint64_t key;   /* the samples' key */
    double c0, c1;  /* ns, ns per thread */
    double ts;      /* threads */
    int32_t sizes;  /* thread counts fitted */
    double rms_rel; /* root mean square relative error on them */
} workload_hinge;

/* Fits the hinge of every qualifying key of the n samples (reordered as by
 * workload_fit_fixed_cost) into *out (malloc'd, sorted by key; NULL when none). Returns the
 * count, or -1 when out of memory. */
int32_t workload_fit_hinges(workload_kernel_sample *s, size_t n, workload_hinge **out);

/* The hinge's duration at `threads`, ns. */
double workload_hinge_at(const workload_hinge *h, double threads);

/* Fills o with the defaults above. */
void workload_default_options(workload_options *o);

/* Operator fusion: the chains and the per-kernel fixed cost (strategy.h). */
typedef struct workload_fusion {
    /* fusion chains (CSR: chain c is chain_node[chain_off[c] .. chain_off[c+1]-1]) */
    int32_t n_chains;
    int32_t *chain_off, *chain_node;
    int64_t chain_kernels;        /* kernels inside chains */
    char why[160];                /* empty when fusion is available */
    int compiled;                 /* 1: the chains are WL_FUSE_COMPILED's (strategy.h prices
                                     them as a compiler's fused kernels) */
    int32_t compiled_runs;        /* WL_FUSE_COMPILED: runs found (a run of one reduction or
                                     more becomes one chain per reduction) */
    double kernel_fixed_ns;       /* per-kernel fixed cost c0 (see strategy.h): the fit of
                                     workload_fit_fixed_cost on opt.kernel_samples, else the
                                     prior opt.kernel_fixed_us; at most the shortest kernel */
    workload_fixed_fit fixed_fit; /* fixed_fit.names == 0: kernel_fixed_ns is the prior */
    /* per-name kernel model (workload_hinge): a chain whose kernels all have one fitted
     * name and known launch sizes is priced by it (strategy.h) */
    int32_t n_hinges;
    workload_hinge *hinges;  /* sorted by key */
    double *node_threads;    /* per node: threads launched, 0 unknown */
    uint32_t *node_grid_x;   /* per node: the grid's first dimension, 0 unknown */
    int32_t *node_hinge;     /* per node: index into hinges, -1 none */
    int32_t chains_by_hinge; /* chains priced by their name's hinge */
} workload_fusion;

/* Tensor fusion and partition: the gradient all-reduces (bucket units). */
typedef struct workload_buckets {
    const costmodel *model; /* collective cost model (may be NULL: no tensor fusion) */
    int32_t n_units;
    int64_t *unit_bytes;  /* per unit, backward order */
    int32_t *group_unit;  /* per group: its unit, -1 when not a gradient all-reduce */
    int32_t *group_hosts; /* per group: up to 3 host nodes per participant to drop when
                             the group is folded into a later one (CSR by group_hosts_off) */
    int32_t *group_hosts_off;
    int64_t *host_dur, *host_gap; /* per group_hosts slot: the typical cost of such a call,
                                     the median duration and gap of the calls of its name
                                     on its thread (the copies a new bucket makes of them:
                                     partition.h); -1 for an empty slot */
    /* per group: the other calls of each participant's hook block, dropped with the
     * group_hosts when the group is folded (CSR by group_block_off). The block is the
     * run of calls around the collective call on its thread that launch nothing and
     * neither block nor copy (event records, stream waits, event queries, creations and
     * destructions: PyTorch's ProcessGroupNCCL issues about 11 per bucket, where ddp-sim
     * issues the record, the wait and the call), from the call after the previous
     * launch, copy or blocking call to the call before the next one; calls between two
     * collective calls belong to the later one's block. block_first[i] is 1 for the
     * block's first call, whose gap (the work before the hook, which every bucket
     * layout does) stays. */
    int32_t *group_block, *group_block_off;
    uint8_t *block_first;
    int64_t *block_dur, *block_gap; /* per group_block slot: its typical cost, as host_dur */
    /* per participant (group_hosts slot i / 3): the call right after its hook block when
     * that is an ordinary call (not a collective call nor in a block), else -1. The
     * bucket's host work does not end with the block: the process group's and the
     * reducer's bookkeeping after the collective call shows as a longer gap before that
     * call (PyTorch DDP: about 56 us where the thread's other calls wait about 14 us),
     * so when the group is folded its gap takes after_gap, the median gap of the calls
     * of its name on its thread, when that is less */
    int32_t *block_after;
    int64_t *after_gap;
    int coll_op;
    int32_t coll_nranks;
    char why[160]; /* empty when tensor fusion is available */
    /* gradient sizes (tensor partition, partition.h): when the static allocations hold
     * one tensor per layer whose sizes add up, unit by unit in backward order, to the
     * units' bytes (workload_match_gradients), layer_grad[l] is layer l's gradient
     * bytes (its allocation) and unit u holds layers unit_lo[u] .. (unit_lo[u-1] - 1)
     * (unit_lo[-1] = n_layers); else both are NULL and grad_why says why */
    int64_t *layer_grad;
    int32_t *unit_lo;
    /* with layer_grad: layer l's gradient tensor bytes, its allocation less the
     * allocator's rounding, so that a unit's layers add up to its bytes exactly: each
     * unit's excess is taken from its blocks rounded to 2 MiB first (up to 2 MiB - 1
     * each), then from the others (up to 511 B each), in backward order. DDP's buckets
     * of whole layers (partition.h: packing) are made of these. */
    int64_t *grad_bytes;
    int32_t n_grad_layers; /* the layers of layer_grad and grad_bytes */
    char grad_why[160];
    /* parameter sizes (DDP's buckets, partition.h: packing): when the backward thread
     * copies each bucket back into the gradients after an iteration's last all-reduce
     * (PyTorch DDP without gradient_as_bucket_view: one device-to-device copy per
     * parameter, bucket by bucket, each bucket's parameters in the order their gradients
     * became ready) and those copies add up, unit by unit, to the units' bytes
     * (workload_match_params), param_bytes[i] is parameter i's gradient bytes in
     * backward order and unit u holds parameters unit_param_off[u] ..
     * unit_param_off[u+1] - 1; else both are NULL and param_why says why */
    int32_t n_params;
    int64_t *param_bytes;
    int32_t *unit_param_off;
    char param_why[160];
    /* with the parameter sizes, per node: for a gradient all-reduce participant of unit u
     * (not the last), the stream wait of DDP's finalisation between unit u's copies back
     * and unit u+1's (one wait per bucket boundary among the copies, outside the hook
     * blocks), dropped with the group when it is folded; -1 elsewhere (NULL: none) */
    int32_t *final_wait;
    /* with the parameter sizes, per node: what a micro-batch of gradient accumulation
     * makes of it (enum workload_micro; NULL: nothing known, the phases decide) */
    uint8_t *micro;
} workload_buckets;

/* Memory strategies: layers, recomputation sites and the memory estimate. */
typedef struct workload_layers {
    int32_t n_layers;
    int32_t n_sites; /* one per (rank, iteration, layer) */
    int32_t *site_layer;
    int32_t *site_anchor;         /* first backward kernel of the layer in that iteration */
    int32_t *site_off, *site_fwd; /* CSR: forward kernels of the layer in that iteration */
    char why[160];                /* empty when layers were found */
    int32_t *layer_nfwd;          /* per layer: its forward kernels in the reference iteration */
    int have_memory;
    memest mem; /* of the rank with the largest measured peak */
    /* weight floors (strategy.h: accumulation; workload_floor.c), with the layers and
     * their gradient bytes (buckets.layer_grad): weight_bw is the bandwidth, bytes/ns, of
     * the optimizer's kernels over the parameters (3 passes, and 2 per copy of optimizer
     * state: the memory estimate's copies when it shows 1 to 4, else Adam's 2);
     * weight_ns[d] the part of forward or backward kernel d's variable time (its duration
     * less min(t, c0)) that reads its layer's weights and does not shrink with the batch:
     * a layer's forward reads them once, its backward twice, each pass (layer_grad /
     * weight_bw) carried by one of its kernels, longest first, at most that kernel's
     * variable time; 0 for a layer whose longest kernel took less than a pass;
     * weight_act_ns[d], for a kernel with a floor, the time at weight_bw of its input and
     * output (twice its layer's activation bytes over the layer's kernels of its name in
     * that phase), at most its variable time: less than its variable time past the floor
     * says the kernel was bound by its FLOPs, not its bytes. NULL (and weight_why set)
     * when the trace lacks what it needs */
    double weight_bw;
    int32_t *weight_ns, *weight_act_ns;
    char weight_why[160];
} workload_layers;

/* CUDA-graph capture of the training step. */
typedef struct workload_capture {
    dfg *g;                /* owned: `work` with the edges a capture changes (without the
                              launch-queue edges of step calls and the wake-ups of step calls
                              by calls that stay, with the input copy's edges to the step's
                              work launched before it: workload_capture.c); NULL when there
                              are none */
    int64_t unqueued;      /* launch-queue edges left out of g */
    uint8_t *step_call;    /* workload_step_call of every node (set by workload_analyze) */
    int32_t *graph_launch; /* WL_CAPTURE_STEP: per rank and step, the call that stands for
                              the graph launch (workload_capture.c); its gap, the eager
                              step's CPU time before it, goes with the capture */
    int32_t n_graph_launch;
    /* the blocking host calls of the iterations, ascending (idle_wake_node), and of
       each the wake-up latency (its duration after what it waited for) of the blocking
       calls of its name on its thread when the host is idle: their lower quartile over
       the trace (workload_capture.c; workload_idle_wake_dur) */
    int32_t n_idle_wake;
    int32_t *idle_wake_node;
    int64_t *idle_wake_dur;
    int graph_captured; /* most kernels come from CUDA graph launches already */
} workload_capture;

/* FSDP's parameter all-gathers (strategy.h: reshard_after_forward and prefetch). An
 * all-gather of an iteration launched by the rank's main thread is the forward's (an
 * FSDP unit's unshard before its forward), one launched by the backward thread the
 * backward's (the re-gather of a unit resharded after its forward). */
enum { WL_FSDP_NONE = 0, WL_FSDP_FWD = 1, WL_FSDP_BWD = 2 };
enum { WL_FSDP_BYTES_GATHER, WL_FSDP_BYTES_GATHER_MAX, WL_FSDP_BYTES_GRAD, WL_FSDP_BYTES_GRAD_MAX };
typedef struct workload_fsdp {
    int32_t n_fwd, n_bwd;   /* all-gathers per compared iteration and rank (the mean, rounded) */
    int32_t n_rs;           /* reduce-scatters likewise */
    uint8_t *grp_role;      /* per group: WL_FSDP_* */
    int32_t *gather_ops;    /* per node: the group of the all-gather whose unshard or
                               copy-out the node belongs to (workload_fsdp.c: the device ops
                               off the compute stream launched after the previous all-gather's
                               launch, up to its own; the host calls around its launch that
                               launch nothing on the compute stream; the copy-out: the compute
                               stream's copies and kernel that wait for the all-gather, with
                               their calls, the event calls after them and the stream waits
                               and polls right before them), -1 none */
    int32_t *prefetch_ns;   /* per node: how much earlier prefetch issues it (its launch's
                               measured start less that of the previous all-gather of its
                               phase on its stream), 0 none */
    int32_t *regather_ns;   /* per node, in a trace that keeps the parameters unsharded
                               (n_bwd 0): the time reshard_after_forward=True adds to it
                               (workload_fsdp.c: a backward-thread call's CPU time before it,
                               a compute-stream kernel's duration; each rank's from its own
                               forwards, the medians per unit), 0 none */
    int32_t *sync_wait_ns;  /* per node, likewise: the time reshard_after_forward=True adds
                               to a blocking call's wait after the device work it waits for
                               (workload_fsdp.c: the wait the trace shows there beyond that
                               work, per byte of the collectives' inputs before it, times the
                               re-gathered all-gathers' inputs), 0 none */
    int64_t gathered_bytes; /* the parameters the forward gathers per iteration and rank but
                               the largest unit's: what reshard_after_forward=False keeps
                               unsharded at the backward's start, on top of the measured peak,
                               and what reshard_after_forward=True frees */
    int64_t unit_bytes[4];  /* per compared iteration and rank (the medians): the forward's
                               all-gathers' outputs (every unit's gathered parameters), the
                               largest of them, the reduce-scatters' inputs (every unit's
                               unsharded gradient) and the largest of those (WL_FSDP_BYTES_*) */
    double keep_calls;      /* backward-thread host calls per iteration and rank of the
                               backward's unshards and copy-outs but the event polls (what
                               keeping removes) */
    double regather_calls;  /* host calls per iteration and rank of the forward's unshards
                               and copy-outs but the event polls (what resharding repeats in
                               the backward) */
    int32_t n_params;       /* parameters per compared iteration and rank (the median) that
                               the forward's unshards copy out, counted from each copy-out's
                               split_with_sizes_copy (workload_fsdp.c); 0 unknown */
    int32_t n_regather;     /* units re-gathered per iteration under reshard_after_forward=True
                               (the forward's all-gathers where the backward thread's reduce-
                               scatters match them one to one), 0 none */
    /* FSDP2's accumulation into the unsharded gradients it keeps under
       set_requires_gradient_sync(False), which the trace (each backward's gradient
       straight to its reduce-scatter) does not run: per micro-batch without
       synchronisation, iteration and rank, autograd's element-wise add into each
       parameter's gradient (n_adds) over the units' unsharded gradients (the
       reduce-scatters' inputs, unit_bytes), read twice and written once
       (workload_fsdp.c); 0 where the trace is not FSDP's */
    int32_t n_adds;            /* adds per micro-batch: n_params, else one per unit (n_rs) */
    double accum_bytes_per_ns; /* the trace's vectorized element-wise kernels' bytes per
                                  ns beyond the fixed cost, 0 none known */
    double accum_dev_ns;       /* the adds' device time: n_adds fixed costs and the bytes
                                  at accum_bytes_per_ns */
    double accum_host_ns;      /* their launches: n_adds times the median backward-thread
                                  launch of a compute-stream kernel (call and gap) */
    int64_t return_ns;         /* the host's way back from the backward thread to the main
                                  thread at a backward's end (autograd's return, FSDP's
                                  final callback), which every micro-batch pays: the median
                                  over ranks and compared iterations of the time from the
                                  backward thread's last call before a blocking call of the
                                  main thread to the main thread's next call */
    char why[160];             /* empty when the trace shows FSDP's all-gathers */
} workload_fsdp;

typedef struct workload {
    dfg *g;    /* the graph strategies are written into: `work`, or `capture.g` while a
                  plan that captures the step is applied (strategy_apply chooses) */
    dfg *work; /* the caller's working copy (values change, structure not) */
    int32_t iter_first, iter_last; /* compared iterations (indices of boundaries) */
    /* NULL, or per compared iteration (at i - iter_first) 1 when the means leave it out:
       an outlier iteration the search sets aside (search.h); the medians keep it. Not
       owned: the search sets it while it runs and clears it. */
    const uint8_t *iter_aside;
    workload_options opt;

    /* baseline values (the same in both graphs), restored by workload_reset */
    int32_t n_nodes, n_groups;
    int64_t *base_dur, *base_gap, *base_grp_dur;
    int32_t *base_lat;
    /* the typical prediction's baseline: base_dur and base_gap with each host call of the
       compared iterations at the median over them of its place's duration and gap
       (replay_typical_host_times): a stall that moves from iteration to iteration is not
       carried into the plans as if every iteration made it */
    int64_t *typ_dur, *typ_gap;

    /* per rank */
    int32_t *main_thread, *bwd_thread; /* resources, -1 none */

    /* per node */
    int32_t *iter;       /* iteration on its rank, -1 before the first boundary */
    uint8_t *phase;      /* enum workload_phase */
    int32_t *layer;      /* forward / backward kernels: layer, else -1 */
    uint8_t *on_compute; /* 1: on its rank's compute stream */

    /* what each strategy family reads */
    workload_fusion fusion;
    workload_buckets buckets;
    workload_layers layers;
    workload_capture capture;
    dfg plan_copy; /* the transformed copy a plan is simulated on (strategy_plan_graph), its
                      arrays reused from one evaluation to the next; freed with the workload */
    workload_fsdp fsdp;

    /* contention (replay/contention.h), measured on the trace; f_meas: each compute
     * kernel's measured overlap with transfers (-1 other nodes), f_grp_meas each group's
     * with compute, f_grp_mean their mean */
    contention contention;
    double *f_meas, *f_grp_meas, f_grp_mean;

    /* baseline */
    double measured_iter_ns; /* simulated on the graph as the replay built it */
    double base_iter_ns;     /* the baseline: the same (the graph is the replay's) */
    /* the baseline's device pace (workload_device_iteration_ns) less its iteration, mean
     * and median, where the pace is the longer: how far the compared window's edges (a
     * device still busy with the work of the iterations before it) set the two apart; 0
     * when not known or not longer */
    double base_dev_lag_ns, base_dev_lag_median_ns;
} workload;

/* Finds the parameter tensors of n_layers layers among the n_alloc static allocation
 * sizes alloc[] (time order) for the n_units gradient all-reduces of unit_bytes[]
 * (backward order): a run of n_layers consecutive allocations, the last layer first,
 * whose running sum first reaches each unit's running sum (within 4 B per unit) at a
 * boundary where it exceeds it by no more than an allocator's rounding (512 B per
 * allocation up to 1 MiB, 2 MiB above). Of several runs the one closest in total wins. Returns the
 * index in alloc of layer 0's tensor and fills unit_lo[u] (the first layer of unit u), or -1 when
 * no run matches. */
int32_t workload_match_gradients(const int64_t *alloc, int32_t n_alloc, const int64_t *unit_bytes,
                                 int32_t n_units, int32_t n_layers, int32_t *unit_lo);

/* Whether the n copy sizes copies[] (in order) cut into the n_units units of
 * unit_bytes[] at unit boundaries: their running sum reaches each unit's running sum
 * exactly and ends at the total. Fills unit_param_off[0 .. n_units] (the first copy of
 * each unit, then n) and returns 1, or returns 0 (unit_param_off undefined). Every unit
 * holds at least one copy. */
int workload_match_params(const int64_t *copies, int32_t n, const int64_t *unit_bytes,
                          int32_t n_units, int32_t *unit_param_off);

/* Drops from g the host calls of group q's bucket that go away when it is folded into
 * another (bu->group_hosts, bu->group_block and bu->final_wait of g's node ids): each
 * takes no time and no gap, but a block's first call keeps its gap (workload_buckets:
 * block_first); the call after each block (block_after) keeps at most after_gap. */
void workload_drop_bucket_hosts(dfg *g, const workload_buckets *bu, int32_t q);

/* Moves in g the edges from the participants of the buckets a plan folded into another
 * (of its first n_groups groups, which bu annotates: those of bu's units whose transfer
 * the plan set to 0, workload_drop_bucket_hosts' groups) to device operations of other
 * streams, as DDP waits for a bucket that carries them: an operation launched after the
 * call of the collective that carries the folded bytes (the next one on the stream of a
 * bucket the plan keeps or tensor partition adds, a group past the first n_groups; DDP's
 * copies back into the gradients) waits for that one, an
 * operation launched before it (the comm hook's wait for each bucket in the backward)
 * for nothing. Without this each rank's compute stream would wait in the backward until
 * every rank had reached a bucket that is gone. Host calls keep their edges. g must be a
 * copy that the caller owns (workload_reset does not restore the working graph's edges);
 * marks it unfinalized when it moves one. Returns the number of edges moved or dropped,
 * or -1 when out of memory. */
int64_t workload_unhook_folded(dfg *g, const workload_buckets *bu, int32_t n_groups);

/* 1 when one of g's first n_groups groups is a bucket of bu's units that a plan folded
 * into another (its transfer set to 0; workload_unhook_folded), else 0. */
int workload_folds_buckets(const dfg *g, const workload_buckets *bu, int32_t n_groups);

/* Analyzes g (the caller's working copy: repaired event edges are added to it; the
 * capture copy, when one is needed, is made from it) for iterations
 * [iter_first, iter_last]. base (zeroed or reused) receives the baseline
 * simulation of the repaired graph. model may be NULL; mem (may be NULL) is the memory
 * estimate of rank mem_rank and is taken over (w owns it afterwards, even on failure).
 * Returns 0, or -1 when out of memory (free w with workload_free either way). */
int workload_analyze(workload *w, dfg *g, sim_result *base, int32_t iter_first, int32_t iter_last,
                     const costmodel *model, memest *mem, int32_t mem_rank,
                     const workload_options *opt);

/* Frees what the search (strategy_evaluate) never reads of w, analysed: the per-node
 * arrays that only the analysis reads (the launch sizes' grid), and those of what the
 * job does not have or the options leave off (the launch sizes and hinges without fusion
 * chains, FSDP's without FSDP's plans, the measured overlaps without the contention
 * correction: opt.no_contention set for good), and trims the graph launches to their
 * count: about 36 bytes a node. The analysis's own fields stay for the reports. */
void workload_trim(workload *w);

/* Where the first iteration of rank r lies, for memest_build: the main thread (the one
 * that opens iterations) and the backward thread (the other thread that launches the
 * most), and the first and last backward launch in the window [t0, t1) of the first
 * iteration (graph clock; t0 < 0: the window between the graph's first two iteration
 * boundaries), from the measured times of g (finalized). Returns 0, or -1 when the rank
 * has no iteration. */
int workload_memory_phases(const dfg *g, int32_t r, int64_t t0, int64_t t1, memest_phases *ph);

/* The idle-host wake-up latency of host node h (workload_capture.idle_wake_dur), or -1
 * when h is no blocking call of the iterations. */
int64_t workload_idle_wake_dur(const workload_capture *ca, int32_t h);

/* 1 when host call h is part of the training step that a CUDA graph capture replaces
 * (strategy.h): a call of an iteration that is not the one opening it, not blocking,
 * not (WL_CAPTURE_STEP) the main thread's first kernel launch of the iteration (which
 * stands for the graph launch, workload_capture.c), and that, with opt.capture_scope
 * WL_CAPTURE_STEP,
 * runs on the backward thread, records or waits for an event, or launches a kernel, a
 * collective, a memset or a device-to-device copy (replay/build.c names it "memcpy
 * DtoD"); with WL_CAPTURE_COMPUTE, launches forward or backward kernels and
 * nothing else. Valid after workload_analyze's annotation. */
int workload_step_call(const workload *w, int32_t h);

/* The ranks rank r's nodes stand for in a mean per rank over the nodes: the class's
 * weight for a representative of folded ranks (dfg rank_weight), 1 for an explicit rank
 * with a trace, 0 for a rank without one (missing from the job's files, or folded into
 * another's class). Valid after workload_analyze. */
double workload_rank_weight(const workload *w, int32_t r);

/* Whether graph g holds a collective (a group of collective or send/recv
 * operations): the advice speaks of all-reduces, buckets and waits on other ranks only
 * then. Returns 1 or 0. */
int workload_has_collectives(const dfg *g);

/* What capturing takes off the host, per iteration and rank over the compared
 * iterations: the step calls (workload_step_call) in *calls and their measured host time
 * (their durations and the gaps before them: the framework's CPU time between launches)
 * in *host_ns; the compared iterations' mean measured host-thread time in *thread_ns
 * (every call's duration and gap) for scale; a rank counted with workload_rank_weight. */
void workload_capture_removed(const workload *w, double *calls, double *host_ns, double *thread_ns);

/* The bytes that gradient accumulation over k micro-batches (k > 1; the first k-1 under
 * FSDP2's set_requires_gradient_sync(False)) adds to memest_predict's estimate of a FSDP
 * trace, which divides the first step's segments by k: those segments hold the gathered
 * parameters (every unit's where the trace keeps them, the largest unit's where it
 * reshards) and the gradient of the unit being reduce-scattered, neither of which shrinks
 * with the micro-batch, and without the gradient sync each unit keeps its unsharded
 * gradient until the last micro-batch reduce-scatters it (the reduce-scatters' inputs).
 * 0 without FSDP (strategy_fsdp_available) or for k <= 1; bounded by what the activations
 * lost (act, the activation bytes the estimate divided by k). */
int64_t workload_fsdp_accum_bytes(const workload *w, int32_t k, int64_t act);

/* The weight floors' sum (workload_layers.weight_ns) per compared iteration and rank, ns:
 * the forward and backward time that reads the layers' weights and does not shrink
 * under gradient accumulation; 0 without floors. */
double workload_weight_floor_ns(const workload *w);

/* Restores the baseline durations, gaps, latencies and group durations in w->g. Returns
 * 0, or -1 when out of memory (a duration or gap of 4.29 s or more: dfg_set_dur). */
int workload_reset(workload *w);

/* Simulated iteration time (ns) of res: on each rank that covers the compared iterations
 * their mean time (sim_iteration_time, the statistic dpro-replay reports; without the
 * iterations w->iter_aside sets aside), averaged over those ranks; -1 when none does. */
double workload_iteration_ns(const workload *w, const sim_result *res);

/* 1 when the means keep compared iteration i (iter_first <= i <= iter_last): w->iter_aside
 * does not set it aside; 0 otherwise. */
int workload_iteration_kept(const workload *w, int32_t i);

/* The number of compared iterations the means keep (workload_iteration_kept). */
int32_t workload_iterations_kept(const workload *w);

/* The same with each rank's median iteration (sim_iteration_median): the typical
 * iteration, which a rare stall of the trace does not move. */
double workload_iteration_median_ns(const workload *w, const sim_result *res);

/* The device's pace in res, a simulation of g (w->g, or a copy that keeps its node ids,
 * partition.h): on each rank, from the end of the device work of the iterations before
 * the compared ones (of the boundary that opens the first compared iteration where they
 * have none), the ends of the last device operation of each compared iteration (w->iter):
 * the mean time between them in *mean (without the iterations w->iter_aside sets aside),
 * the median in *median, averaged over the ranks
 * whose every compared iteration has device work (by workload_rank_weight), less the baseline's lag
 * (base_dev_lag_ns, base_dev_lag_median_ns), so that on the baseline the pace is at most
 * its iteration. A step whose host runs ahead of its device without bound (a captured step:
 * no launch queue holds its calls) repeats no faster than this. Returns 0; 1 when no
 * rank qualifies (*mean and *median then -1); -1 out of memory. */
int workload_device_iteration_ns(const workload *w, const dfg *g, const sim_result *res,
                                 double *mean, double *median);

void workload_free(workload *w);

#endif
