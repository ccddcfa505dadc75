/*
 * framework.h: what the optimizer assumes about the framework that ran the job, behind
 * one interface (prefix framework_).
 *
 * A plan (strategy.h) is framework-neutral: bucket caps, fusion, CUDA-graph capture,
 * recomputed layers, accumulation steps. How those become advice the user applies (the
 * options of a training script, their names and values, how they are parsed back for
 * --what-if) is the framework's. ddp-sim (tests/simgpu), a DDP-like job, is the one
 * profile; a PyTorch profile would map the same plan onto DDP bucket_cap_mb,
 * torch.compile, CUDA graphs and activation checkpointing.
 */
#ifndef DPRO_OPTIMIZER_FRAMEWORK_H
#define DPRO_OPTIMIZER_FRAMEWORK_H

#include <stddef.h>
#include <stdint.h>

struct strategy_plan;

typedef struct framework_profile {
    const char *name;         /* the framework's name in the text output ("ddp-sim") */
    const char *args_key;     /* JSON key of the advice as options ("ddp_sim_args") */
    double default_bucket_mb; /* the framework's bucket cap when options set only the first */
    /* Writes the options that apply plan p into buf (len bytes; empty for the baseline).
     * batch (> 0: the per-rank batch of the profiled run) lets accumulation state the
     * micro-batch. */
    void (*format_args)(const struct strategy_plan *p, int32_t batch, char *buf, size_t len);
    /* Parses options written like format_args's into *p (a bucket cap takes the nearest
     * cap of strategy_bucket_caps_mb). Returns 0, or -1 on an unknown option or a bad
     * value. */
    int (*parse_args)(const char *args, struct strategy_plan *p);
} framework_profile;

/* ddp-sim (tests/simgpu/ddp-sim): --bucket-mb MB --first-bucket-mb MB --fuse-small
 * --cuda-graph --recompute 0-3,7 --accum-steps K --batch B (--batch is ignored when
 * parsed). */
extern const framework_profile framework_ddp_sim;

/* The profile dpro-optimize advises for (ddp-sim). */
const framework_profile *framework_default(void);

#endif
