/* optjobs: the hand-made and synthetic jobs, and the fitted collective model, that the
 * optimizer's test programs (test_optimizer, test_optimizer_models) share. */
#ifndef DPRO_TESTS_OPTJOBS_H
#define DPRO_TESTS_OPTJOBS_H

#include <stdint.h>

#include "optimizer/memest.h"
#include "replay/costmodel.h"
#include "replay/dfg.h"

#define US 1000

/* One host thread launching, per iteration: G, s, s, s, G, s (G 100 us, s 10 us) on a
 * stream, launches of 5 us each, then a synchronisation; `iters` iterations, into *g.
 * Returns 0, or -1 on failure. */
int build_fusion_job(dfg *g, int iters);

/* The synthetic generator's job (4 ranks, 3 iterations) of `ops` kernels an iteration and
 * `buckets` all-reduce buckets of 4 MiB (alpha 200 us, 10 B/ns), into *g. Returns 0, or
 * -1 on failure. */
int synth_job(dfg *g, int32_t ops, int32_t buckets);

/* Two threads, one rank pair: per iteration the main thread launches the forward (one
 * 100 us kernel per layer), the backward thread, woken by the last forward launch, the
 * backward (two 100 us kernels per layer, the last layer first) and then one all-reduce
 * of every gradient; the main thread, woken by the all-reduce call (backward()
 * returning), launches one optimizer kernel of opt_us
 * (none when 0) and synchronises with the all-reduce. Layer gradients:
 * grad[l] bytes. The measured times are the simulated ones; t_fwd[l] is where rank 0's
 * first forward launch of layer l starts. Returns 0, or -1 on failure. */
int build_layer_job(dfg *g, int iters, const int64_t *grad, int32_t nl, int64_t opt_us,
                    int64_t *t_fwd);

/* Fits *m on three exact samples of the synthetic job's collective time (alpha 200 us,
 * 10 B/ns). */
void fit_model(costmodel *m);

/* The memory estimate of build_layer_job's nl layers: an activation of 1 MiB allocated
 * before each layer's first forward launch (t_fwd), the static allocations alloc[] (the
 * layers' gradients as the allocator made them), a bucket of `bucket` bytes and a small
 * buffer. */
void layer_memest(memest *mem, const int64_t *alloc, int32_t nl, const int64_t *t_fwd,
                  int64_t bucket);

#endif
