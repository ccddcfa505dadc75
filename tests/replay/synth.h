/*
 * synth.h: synthetic data-parallel jobs built directly as dataflow graphs, for the
 * simulator's tests and benchmark (prefix synth_).
 *
 * Each rank: one host thread launching ops_per_iter kernels per iteration on a compute
 * stream (launch cost launch_ns, framework gap gap_ns between calls); after every
 * ops_per_iter / buckets kernels an event record and an all-reduce of bucket_bytes on a
 * communication stream that waits for that event; at the end of the iteration a stream
 * synchronize on the communication stream (hook_calls: event queries after each
 * all-reduce call). With `classes` < ranks the graph holds only
 * `classes` ranks (ranks that behave alike stand in for the others; nothing in the graph
 * says how many each stands for), while collectives keep the real rank count for their
 * cost. Rank 0's class can be made a straggler (kernels straggler_factor
 * times slower).
 */
#ifndef DPRO_REPLAY_SYNTH_H
#define DPRO_REPLAY_SYNTH_H

#include <stdint.h>

#include "replay/dfg.h"

typedef struct synth_params {
    int32_t ranks;   /* ranks of the job */
    int32_t classes; /* ranks simulated (0 or >= ranks: every rank explicitly) */
    int32_t iterations;
    int32_t ops_per_iter; /* device ops per rank per iteration */
    int32_t buckets;      /* all-reduces per iteration */
    int64_t kernel_ns;    /* mean kernel duration (jitter +-25 %, deterministic) */
    int64_t launch_ns;    /* host cost of a launch */
    int64_t gap_ns;       /* framework time between host calls */
    int64_t bucket_bytes;
    int64_t coll_alpha_ns;   /* all-reduce latency */
    double coll_beta_bpns;   /* bytes per ns */
    double straggler_factor; /* > 1: rank 0's kernels are that much slower */
    int32_t hook_calls;      /* cudaEventQuery calls (1 us, gap_ns before each) right after
                              * each all-reduce call, as PyTorch's ProcessGroupNCCL issues
                              * event calls around its collective (0: none) */
    int32_t final_copies;    /* 1: after the iteration's last all-reduce call, DDP's copies
                              * back into the gradients: per bucket a cudaMemcpyAsync of its
                              * bytes on the compute stream, a cudaStreamWaitEvent between
                              * two buckets' copies (0: none) */
    int32_t zero_grads;      /* 1: at each iteration's start, the zeroing of the gradients
                              * (optimizer.zero_grad(set_to_none=False)): per bucket a
                              * cudaMemsetAsync of its bytes on the compute stream (0: none) */
    uint64_t seed;
} synth_params;

/* Fills p with a small default job (4 ranks, 3 iterations, 200 ops). */
void synth_defaults(synth_params *p);

/* Builds the synthetic job into g (uninitialised on entry). Iteration boundaries are
 * set (a setup call, then the synchronize closing each iteration). Returns 0 or -1 (out
 * of memory). */
int synth_dfg(const synth_params *p, dfg *g);

#endif
