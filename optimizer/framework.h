/*
 * framework.h: what the optimizer assumes about the framework that ran the job, behind
 * one interface (prefix framework_).
 *
 * A plan (strategy.h) is framework-neutral: bucket caps, fusion, CUDA-graph capture,
 * recomputed layers, accumulation steps. How those become advice the user applies (the
 * options of a training script, their names and values, how they are parsed back for
 * --what-if), which of them the framework can express at all, and which region a
 * capture covers are the framework's. framework_decide recognises the framework from
 * what the trace shows; the profiles:
 *   ddp-sim       tests/simgpu/ddp-sim, a DDP-like job: its command-line flags;
 *   pytorch-ddp   torch.nn.parallel.DistributedDataParallel: DDP(bucket_cap_mb=...),
 *                 torch.compile, torch.compile(mode="reduce-overhead") (CUDA graphs of
 *                 the compiled forward and backward), torch.utils.checkpoint, no_sync();
 *   pytorch-fsdp  FullyShardedDataParallel / fully_shard: what FSDP can express (no
 *                 bucket cap, no capture of the step), saying what it cannot, and FSDP's
 *                 own knobs: fully_shard(reshard_after_forward=False) and
 *                 set_modules_to_forward_prefetch / set_modules_to_backward_prefetch;
 *   pytorch       PyTorch without a DDP or FSDP wrapper in the trace;
 *   unknown       no knob: the kernels and collectives concerned and the kind of change.
 */
#ifndef DPRO_OPTIMIZER_FRAMEWORK_H
#define DPRO_OPTIMIZER_FRAMEWORK_H

#include <stddef.h>
#include <stdint.h>

#include "json_writer.h"

struct strategy_plan;
struct workload;
struct job_rank;

typedef struct framework_profile {
    const char *name;         /* the framework's name in the output ("ddp-sim", "pytorch-ddp") */
    const char *title;        /* how the advice lines name it ("PyTorch DDP") */
    const char *args_key;     /* JSON key of the advice as options ("ddp_sim_args",
                               * "torch_args"); NULL: the framework has no options to give */
    double default_bucket_mb; /* the framework's bucket cap when options set only the first */
    double fixed_first_bucket_mb; /* > 0: the framework has no knob for the first bucket,
                                   * which stays this size; 0: it is set with the others */
    int first_bucket_follows;     /* 1: the knob of the buckets' cap caps the first bucket
                                   * too (DDP's bucket_cap_mb): no other first cap */
    unsigned families;            /* strategy families it can express (enum strategy_family) */
    int can_capture;              /* 1: it can capture (a region of) the step in a CUDA graph */
    int capture_scope;            /* what its capture covers (enum workload_capture_scope) */
    int fusion_scope;             /* what its fuser fuses (enum workload_fusion_scope) */
    const char *cannot;           /* what it cannot express, for the output (NULL: nothing) */
    const char *cannot_alone;     /* the same for a trace without collectives (NULL: cannot;
                                   * "": nothing) */
    /* Writes the options that apply plan p into buf (len bytes; empty for the baseline).
     * batch (> 0: the per-rank batch of the profiled run) lets accumulation state the
     * micro-batch. NULL when args_key is. */
    void (*format_args)(const struct strategy_plan *p, int32_t batch, char *buf, size_t len);
    /* Parses options written like format_args's into *p (a bucket cap takes the nearest
     * cap of strategy_bucket_caps_mb). Returns 0, or -1 on an unknown option or a bad
     * value. NULL when args_key is. */
    int (*parse_args)(const char *args, struct strategy_plan *p);
    /* Writes the advice for p into buf: one line per change ("\n" between them), what the
     * user does in the framework's terms. batch as format_args. */
    void (*advise)(const struct workload *w, const struct strategy_plan *p, int32_t batch,
                   char *buf, size_t len);
    /* Adds the framework's own knobs of p to the open JSON object jw (may be NULL). */
    void (*write_knobs)(const struct workload *w, const struct strategy_plan *p, int32_t batch,
                        json_writer *jw);
} framework_profile;

/* ddp-sim (tests/simgpu/ddp-sim): --bucket-mb MB --first-bucket-mb MB --fuse-small
 * --cuda-graph --recompute 0-3,7 --accum-steps K --batch B (--batch is ignored when
 * parsed). */
extern const framework_profile framework_ddp_sim;

/* PyTorch (framework_torch.c). The options ("torch_args"), one token each, in PyTorch's
 * names: bucket_cap_mb=MB (DDP only), torch.compile (operator fusion),
 * mode=reduce-overhead (capture; torch.cuda.graph is read as the same), checkpoint=0-3,7
 * (layers by index), no_sync=K (K micro-batches per optimizer step), micro_batch=B
 * (ignored when parsed), reshard_after_forward=False|True and prefetch=0|1 (FSDP). */
extern const framework_profile framework_torch_ddp, framework_torch_fsdp, framework_torch;

/* No framework recognised: no options; the advice names kernels and collectives. */
extern const framework_profile framework_unknown;

/* What fw cannot express, for the output, on a trace with collectives or without
 * (collectives 0: cannot_alone where the profile has one): a text, or NULL for nothing. */
const char *framework_cannot(const framework_profile *fw, int collectives);

/* The profile named name ("ddp-sim", "pytorch-ddp", "pytorch-fsdp", "pytorch",
 * "unknown"), or NULL. */
const framework_profile *framework_by_name(const char *name);

/* What framework_decide found. */
typedef struct framework_detection {
    const framework_profile *fw; /* never NULL: framework_unknown when nothing decides */
    char evidence[512];          /* what in the trace decided it, for the output */
} framework_detection;

/* What the traces show of the framework, gathered rank by rank (framework_detect_rank)
 * and decided on once every rank is in (framework_decide). */
typedef struct framework_evidence framework_evidence;

/* An empty gathering (free() it), or NULL when out of memory. */
framework_evidence *framework_evidence_new(void);

/* Adds rank jr's strings, events (loaded and expanded: build_take_fn's look at them) and
 * traced command to ev. Returns 0, or -1 when out of memory. */
int framework_detect_rank(framework_evidence *ev, const struct job_rank *jr);

/* Recognises the framework that ran the job from the evidence of its ranks, never from
 * the simulated device's settings: ddp-sim by the traced command (meta "command": the
 * program ddp-sim); PyTorch by its operator markers (aten::, ProfilerStep#) or its
 * kernels (at::native, demangled or not); DDP by DDP's markers
 * (DistributedDataParallel.forward, the reducer's ops) or, without markers, by
 * all-reduces and no reduce-scatter; FSDP by FSDP's markers (FullyShardedDataParallel.*,
 * FSDP::*) or, without markers, by all-gathers and more reduce-scatters than
 * all-reduces; markers of FSDP win over DDP's. Fills *out. */
void framework_decide(const framework_evidence *ev, framework_detection *out);

/* The nearest cap of strategy_bucket_caps_mb (an index) to mb (> 0), on a log scale. */
int framework_nearest_cap(double mb);

#endif
