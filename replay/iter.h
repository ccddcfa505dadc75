/*
 * iter.h: finding training iterations in one rank's trace (prefix iter_).
 *
 * From markers first: DPRO_MARK_ITERATION events, or NVTX / framework ranges whose text
 * names an iteration ("iteration 3", "iter 3", "step 3", "ProfilerStep#3", "train_step").
 * Iteration markers (the Kineto importer's ProfilerStep#N) close an iteration each, the
 * first of several opening them (a profiler's first step is not a steady one), a marker
 * alone being one iteration; the ranks' are matched by step number (iter_common_steps).
 * Without markers, from the period of the sequence of kernel names: the smallest exact
 * period of its steady part (prefix hashes, O(1) per candidate), else the longest stretch
 * that repeats exactly (a stock PyTorch job's first step and its end differ from the
 * steady steps), else the shift that makes the sequence match itself best (at least 90 %
 * of positions; the shortest of the near-best shifts); the caller cuts the periodic
 * stretch into iterations where the device idled longest.
 * Warm-up iterations are the leading ones that are clearly slower than the steady
 * median.
 */
#ifndef DPRO_REPLAY_ITER_H
#define DPRO_REPLAY_ITER_H

#include <stddef.h>
#include <stdint.h>

enum iter_method {
    ITER_NONE = 0,
    ITER_MARKER = 1, /* iteration markers */
    ITER_RANGE = 2,  /* NVTX / framework ranges named like iterations */
    ITER_PERIOD = 3, /* period of the kernel sequence */
};

/* Returns non-zero if a range's text names an iteration, and stores in *key a small
 * number telling the naming patterns apart (so one pattern is chosen per trace). */
int iter_text_is_iteration(const char *text, int *key);

/* Period of a sequence of name ids (a rank's kernels in launch order): stores the period
 * in *period, the stretch names[*start..*end) that repeats with it, and the fraction of
 * matching positions in *match (1 for an exact period), and returns 0; returns -1 if the
 * sequence does not repeat at least twice (or out of memory). start, end and match may be
 * NULL. An exact period is looked for first in the steady tail, then in the longest
 * stretch that repeats exactly (at least half the sequence: a first step and a job's end
 * that launch other kernels lie outside it), else an approximate one over the whole
 * sequence (start 0, end n). */
int iter_find_period(const uint32_t *names, size_t n, size_t *period, size_t *start, size_t *end,
                     double *match);

/* The rotation of one period b[0..p) that is a[0..p), kernel names as text (NULL for a
 * name not in the trace): stores in *rot the smallest o with b[(j + o) % p] equal to a[j]
 * for every j and returns 0, or returns -1 if b is no rotation of a. Ranks of one
 * data-parallel job repeat one period from different starting points. */
int iter_period_rotation(const char *const *a, const char *const *b, size_t p, size_t *rot);

/* The steps every rank measures, from iteration markers numbered by their step
 * (ProfilerStep#N): steps[r][0..n[r]) are the step numbers of rank r's boundaries in
 * order, each the step the boundary closes (a boundary opening the rank's first step N
 * counts as closing N - 1), so the rank measures steps steps[r][0] + 1 .. steps[r][n[r]-1].
 * Ranks with steps[r] == NULL or n[r] == 0 are left out. Stores the first and last step
 * all of them measure in *lo and *hi and returns 0, or returns -1 if they share none. */
int iter_common_steps(int64_t *const *steps, const int32_t *n, int32_t n_ranks, int64_t *lo,
                      int64_t *hi);

/* Keeps, in place and in order, the boundaries (event_index[i], step[i]) of one rank whose
 * step is in [lo - 1, hi]: those that measure steps lo..hi, so that iteration k of every
 * rank is step lo + k. Returns how many are kept. */
size_t iter_keep_steps(size_t *event_index, int64_t *step, size_t n, int64_t lo, int64_t hi);

/* Given n iteration start times (ascending), marks warm_up[i] = 1 for the leading
 * iterations that took more than `tolerance` (e.g. 0.10) longer than the median of the
 * rest. Iteration i lasts starts[i+1] - starts[i]; the last start only closes the one
 * before. Returns the number of warm-up iterations. */
size_t iter_mark_warmup(const int64_t *starts, size_t n, double tolerance, uint8_t *warm_up);

#endif
