/*
 * strategy.h: the optimizer's strategies, as one plan of knob settings applied to the
 * analyzed job, and their cost models (prefix strategy_).
 *
 * A plan combines:
 *   operator fusion   every fusion chain (workload.h) becomes one kernel launched once;
 *   CUDA graph        the step is captured: its host launch cost disappears;
 *   tensor fusion     gradient all-reduces regrouped into buckets of another cap;
 *   recomputation     chosen layers keep a checkpoint and rebuild their activations
 *                     during their backward;
 *   accumulation      k micro-batches of 1/k of the batch per optimizer step;
 *   FSDP unsharding   (FSDP traces: workload.h, workload_fsdp) parameters kept unsharded
 *                     from the forward to the backward (reshard_after_forward=False), and
 *                     each unit's all-gather issued one unit ahead (prefetch).
 * strategy_apply writes the plan into the working graph as new durations, gaps and
 * latencies (no structural change), so every candidate is one re-simulation; a plan
 * that captures the step is written into the working graph's copy without the step's
 * launch-queue edges (workload.h: w->capture.g, when there is one; w->g points to the
 * graph written), and a plan whose buckets split the trace's all-reduces is simulated
 * on a transformed copy (partition.h) of that graph.
 *
 * Models (stated here and in docs/models.md):
 *   fused kernel      a chain k1..km of kernels of durations t_i becomes one kernel of
 *                     sum(t_i) - sum_{i>=2} min(t_i, c0): each kernel but one stops paying
 *                     the per-kernel fixed cost c0 (workload.h: the prior, at most the
 *                     shortest kernel of the trace), unless the chain's kernels have a
 *                     fitted hinge (workload.h, workload_hinge h of their name): then
 *                     h(sum threads) x sum(t_i) / sum h(threads_i), at least max t_i;
 *                     the device idle gaps inside the chain
 *                     and the m-1 host launch calls (their cost and gaps) disappear.
 *                     A chain of WL_FUSE_COMPILED (torch.compile) becomes one kernel of
 *                     c0 + max_i (t_i - min(t_i, c0)): one fixed cost and the largest
 *                     variable part of its ops (the fused kernel moves the widest tensor
 *                     once, the intermediates stay in registers);
 *   CUDA graph        (the limit case of fusion) the region the framework's capture covers
 *                     (workload.h: opt.capture_scope). The whole step: every host call
 *                     that launches the step's
 *                     kernels or collectives, records or waits for events, or runs on the
 *                     backward thread costs nothing (workload_step_call); kernels of the
 *                     step follow each other without launch latency or idle gaps; those
 *                     calls are not held by the launch queue (one graph launch submits
 *                     the step); a cross-thread wake-up whose waker is such a call has
 *                     no latency (no thread hands work to another in a graph launch);
 *                     blocking calls, copies, the call that opens an iteration and, on
 *                     the main thread, the step's first kernel launch (which stands for
 *                     the graph launch, cudaGraphLaunch: its duration, not the CPU time
 *                     before it) keep their cost, a blocking call with its
 *                     thread's idle-host wake-up latency (workload.h: idle_wake_dur) rather
 *                     than the one measured in its iteration. The forward and backward
 *                     compute only: the calls that launch only forward or backward kernels
 *                     cost nothing, those kernels follow each other without launch latency
 *                     or idle gaps; every other call, hand-over and wake-up stays as
 *                     measured. No launch queue holds the captured calls, so the host may
 *                     run ahead of the device: the predicted iteration is the slower of
 *                     the host's pace and the device's (workload_device_iteration_ns);
 *   buckets           units (the trace's all-reduces in backward order) are packed as DDP
 *                     packs parameters: a bucket closes once its bytes reach the cap
 *                     (first_bucket_mb for the first bucket, bucket_cap_mb after); a bucket
 *                     starts when its last unit is ready and takes the fitted collective
 *                     model's time for its bytes; the folded units' calls disappear;
 *                     a unit larger than the cap in effect is split into buckets that
 *                     become ready during its backward (tensor partition, partition.h:
 *                     the one strategy that changes the graph's structure, applied to a
 *                     copy);
 *   recomputation     the forward kernels of layer l (and their launches) are replayed
 *                     right before l's backward, on the backward thread;
 *   accumulation      a forward or backward kernel of duration t takes
 *                     f + w + (t - f - w) / k with f = min(t, c0) and w its weight floor
 *                     (the time its share of reading its layer's weights takes at the
 *                     optimizer kernels' bandwidth, workload.h: workload_layers.weight_ns;
 *                     0 where the trace does not tell) when its time is that of its
 *                     bytes, f + max((t - f) / k, w + a / k) when it took longer than
 *                     w and its input and output's time a (bound by its FLOPs):
 *                     fixed parts, then linear in the
 *                     batch; optimizer kernels do not change; the step is the simulated
 *                     step of the last micro-batch (with the all-reduces and the
 *                     optimizer) plus k-1 micro-batches without them, each taking
 *                     max(device time of its forward and backward kernels, host time of
 *                     their launches);
 *   keep unsharded    (reshard_after_forward=False) the backward's all-gathers are gone:
 *                     their transfer, the device ops of their unshard off the compute
 *                     stream (copy-in), the host calls that launch those and the calls
 *                     next to the all-gather's launch that launch nothing on the compute
 *                     stream (FSDP's events and queries; workload.h: fsdp.gather_ops)
 *                     cost nothing, with the CPU time before them; the peak memory grows
 *                     by the parameters the forward gathers but the largest unit's
 *                     (workload_fsdp.gathered_bytes); the copy-out of each backward
 *                     unshard (the compute stream's copies and kernel that wait for the
 *                     all-gather, their calls, the event calls after them and the stream
 *                     waits and polls right before them) goes too;
 *   reshard           (reshard_after_forward=True, on a trace that keeps the parameters)
 *                     each unit is gathered again in the backward, as its forward gathered
 *                     it: the CPU time of its unshard's and copy-out's calls (each call at
 *                     most at the backward thread's median for its name) is added to the
 *                     backward thread before the unit's backward, its copy-out's device
 *                     time and the part of its transfer and copy-in that the previous
 *                     unit's backward (its calls or its compute, the longer) does not hide
 *                     (FSDP2's implicit backward prefetch) to the unit's first backward
 *                     kernel (workload.h:
 *                     fsdp.regather_ns); a blocking call that waits beyond the device
 *                     work it waits for waits longer by the re-gathered bytes
 *                     (fsdp.sync_wait_ns); the peak memory drops by gathered_bytes;
 *   prefetch          the device ops of each unit's unshard (copy-in, all-gather) but the
 *                     first of a phase become ready as early, relative to their launch,
 *                     as their launch came after the previous unit's all-gather's launch
 *                     in the trace: issued with the previous unit's, on their own
 *                     stream, while the previous unit computes (the dependency moved one
 *                     unit ahead: a negative launch latency; the compute stream's wait
 *                     for the all-gather stays);
 *   memory            memest_predict (memest.h);
 *   contention        with opt.no_contention clear, each simulated plan is corrected for
 *                     the compute/communication overlap it changes (replay/contention.h:
 *                     a kernel x (1 + k f_sim) / (1 + k f_measured), likewise each
 *                     transfer) and simulated again.
 */
#ifndef DPRO_OPTIMIZER_STRATEGY_H
#define DPRO_OPTIMIZER_STRATEGY_H

#include <stdint.h>
#include <stdio.h>

#include "json_writer.h"
#include "optimizer/framework.h"
#include "optimizer/workload.h"
#include "replay/sim.h"

#define STRATEGY_MAX_LAYERS 512

/* Strategy families (--strategies). */
enum strategy_family {
    STRATEGY_FUSION = 1, /* operator fusion and CUDA graph capture */
    STRATEGY_TENSOR = 2, /* gradient bucket sizes */
    STRATEGY_MEMORY = 4, /* recomputation and gradient accumulation */
    STRATEGY_FSDP = 8,   /* FSDP's reshard_after_forward and prefetch */
    STRATEGY_ALL = 15,
};

typedef struct strategy_plan {
    uint8_t fuse;         /* operator fusion of every chain */
    uint8_t cuda_graph;   /* capture of the step */
    int8_t bucket_cap;    /* -1: as measured; else an index into strategy_bucket_caps_mb */
    int8_t first_cap;     /* index of the first bucket's cap (when bucket_cap >= 0) */
    uint8_t accum_k;      /* micro-batches per step (1: none) */
    uint8_t fsdp_keep;    /* FSDP: parameters kept unsharded after the forward */
    uint8_t prefetch;     /* FSDP: all-gathers issued one unit ahead */
    uint8_t fsdp_reshard; /* FSDP: parameters resharded after the forward, on a trace that
                             keeps them (the last byte before recompute: no padding is left
                             undefined, plans are hashed and compared as bytes and handed
                             between processes, search.h) */
    uint64_t recompute[STRATEGY_MAX_LAYERS / 64]; /* layers recomputed */
} strategy_plan;

/* The bucket caps the search tries, in MiB, ascending. */
extern const double strategy_bucket_caps_mb[];
extern const int strategy_n_bucket_caps;

/* Micro-batch counts the search tries. */
extern const uint8_t strategy_accum_steps[];
extern const int strategy_n_accum_steps;

/* The plan that changes nothing. */
void strategy_plan_baseline(strategy_plan *p);

/* 1 when layer l is recomputed. */
static inline int
strategy_recomputes(const strategy_plan *p, int32_t l)
{
    return l >= 0 && l < STRATEGY_MAX_LAYERS && ((p->recompute[l / 64] >> (l % 64)) & 1);
}

/* Sets or clears the recomputation of layer l. */
void strategy_set_recompute(strategy_plan *p, int32_t l, int on);

/* Number of recomputed layers. */
int32_t strategy_n_recomputed(const strategy_plan *p);

/* Bitmask of the families a plan uses (enum strategy_family). */
unsigned strategy_plan_families(const strategy_plan *p);

/* Result of one evaluation. */
typedef struct strategy_eval {
    double iter_ns;     /* predicted iteration (optimizer step) time, -1 on failure */
    double median_ns;   /* the typical one: the ranks' median iteration instead of their
                           mean (workload_iteration_median_ns), the same micro-batches
                           added; -1 on failure */
    double typical_ns;  /* median_ns of the plan written into the typical baseline
                           (strategy_evaluate_typical), -1 when not evaluated */
    int64_t peak_bytes; /* predicted peak memory, -1 unknown */
    int32_t n_buckets;  /* buckets per iteration (0: as measured / none) */
    double micro_device_ns, micro_host_ns; /* accumulation: one micro-batch without
                                              synchronisation, device and host time */
    double micro_launches;                 /* its device operations (kernels, copies, memsets) */
} strategy_eval;

/* Points w->g at the graph plan p is simulated on (w->capture.g when p captures the step
 * and there is one, else w->work), resets it to the baseline and writes p into it (see
 * the models above). Returns 0, or -1 when out of memory (a duration of 4.29 s or more the
 * graph's side table could not take: dfg_set_dur). */
int strategy_apply(workload *w, const strategy_plan *p);

/* The fusion chains' kernels of the compared iterations, per iteration and rank: their
 * measured device time (*chain_ns) and that of the kernels operator fusion makes of them
 * (*fused_ns, with the model in force: workload.h opt.fusion_fixed). Leaves w->g on the
 * baseline. Returns 0, or -1 as strategy_apply (the figures are then partial). */
int strategy_fusion_summary(workload *w, double *chain_ns, double *fused_ns);

/* Applies p, simulates into res (zeroed before first use, reusable) and fills *out.
 * Returns 0, or -1 when out of memory or the iterations are not covered. */
int strategy_evaluate(workload *w, const strategy_plan *p, sim_result *res, strategy_eval *out);

/* The graph that plan p, applied to w (strategy_apply), is simulated on, into *out: w->g,
 * or copy when p splits a unit (partition_build: tensor partition) or folds a bucket into
 * another (w->g with the folded buckets' stream waits dropped: workload_unhook_folded).
 * copy is zeroed or a graph an earlier call made, whose arrays are then reused
 * (dfg_copy; strategy_evaluate passes w->plan_copy); the caller frees it (dfg_free) when
 * done. Fills *n_buckets (may be NULL) with the plan's buckets a step
 * (strategy_bucket_count). Returns 0, or -1 when out of memory (copy then freed). */
int strategy_plan_graph(workload *w, const strategy_plan *p, dfg *copy, dfg **out,
                        int32_t *n_buckets);

/* The typical prediction of p: p written into the typical baseline (workload.h: typ_dur,
 * typ_gap: each host call at its place's median duration and gap over the compared
 * iterations) and simulated, its median iteration into out->typical_ns (the other fields
 * of *out are left as they are). The baseline plan gives the typical baseline, so a
 * speedup of two such figures compares like with like. Leaves w->g on p written into the
 * measured baseline, as strategy_evaluate does. Returns 0, or -1 as strategy_evaluate. */
int strategy_evaluate_typical(workload *w, const strategy_plan *p, sim_result *res,
                              strategy_eval *out);

/* 1 when tensor fusion and partition are available for w: gradient all-reduces found
 * alike on every rank and iteration, and a collective cost model. */
int strategy_tensor_available(const workload *w);

/* 1 when the FSDP strategies are available for w: all-gathers in the forward and
 * reduce-scatters (workload.h: fsdp.why says why not). */
int strategy_fsdp_available(const workload *w);

/* 1 when resharding after the forward (fsdp_reshard) is available for w: an FSDP trace
 * whose backward re-gathers nothing, with the units to re-gather found
 * (workload.h: fsdp.n_regather). */
int strategy_fsdp_reshard_available(const workload *w);

/* Number of buckets per iteration plan p makes (0 when it keeps the measured ones). */
int32_t strategy_bucket_count(const workload *w, const strategy_plan *p);

/* The bytes of the buckets plan p makes per iteration, in backward order, into out (at
 * most max of them). Returns their number (strategy_bucket_count's), 0 when p keeps the
 * measured ones, -1 when out of memory. */
int32_t strategy_bucket_bytes(const workload *w, const strategy_plan *p, int64_t *out, int32_t max);

/* The buckets of plan p that the collective model prices in a protocol none of the
 * measured sizes ran (costmodel_regime_at of w->buckets.model for the buckets'
 * operation and ranks): their number (0 when p keeps the measured buckets, or none is),
 * and into *r the regime of the first of them. -1 when out of memory. */
int32_t strategy_unseen_buckets(const workload *w, const strategy_plan *p, costmodel_regime *r);

struct partition_input;

/* Fills *in with what tensor partition (partition.h) reads of w: w->g as strategy_apply
 * left it, the bucket units, the layers and the per-node annotation. */
void strategy_partition_input(const workload *w, struct partition_input *in);

/* Writes a one-line description of what p changes into buf ("baseline" when nothing). */
void strategy_describe(const workload *w, const strategy_plan *p, char *buf, size_t len);

/* Short name of the plan's kinds, joined with '+' ("tensor_fusion+recompute";
 * "tensor_partition" when its buckets split the trace's all-reduces, which needs w: may
 * be NULL, then bucket plans are "tensor_fusion"). */
void strategy_kind(const workload *w, const strategy_plan *p, char *buf, size_t len);

/* Writes the knobs object of p: the knobs' names to values (a bucket cap with the
 * buckets per iteration it makes and the first 64 buckets' bytes, strategy_bucket_bytes),
 * under fw->args_key (when the
 * framework has options) the same as the framework's options, and the framework's own
 * knobs (framework.h). batch (> 0: the per-rank batch of the profiled run) lets
 * accumulation state the micro-batch. */
void strategy_write_knobs(const workload *w, const strategy_plan *p, int32_t batch,
                          const framework_profile *fw, json_writer *jw);

/* The recomputed layers of p as a list of ranges ("0-3,7") into buf. */
void strategy_layer_list(const strategy_plan *p, char *buf, size_t len);

/* Sets the layers of a list written as strategy_layer_list writes it ("0-3,7") to be
 * recomputed in *p. Returns 0, or -1 on a malformed list or a layer outside
 * [0, STRATEGY_MAX_LAYERS). */
int strategy_parse_layer_list(const char *list, strategy_plan *p);

#endif
