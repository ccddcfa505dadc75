/* optjobs: the hand-made and synthetic jobs, and the fitted collective model, that the
 * optimizer's test programs (test_optimizer, test_optimizer_models) share. */
#ifndef DPRO_TESTS_OPTJOBS_H
#define DPRO_TESTS_OPTJOBS_H

#include <stdint.h>

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

/* Fits *m on three exact samples of the synthetic job's collective time (alpha 200 us,
 * 10 B/ns). */
void fit_model(costmodel *m);

#endif
