/*
 * period.h: iterations from the period of the kernel sequence (prefix period_; replay.c
 * and job.c use it; iter.h finds the period of a sequence of names).
 *
 * A rank without iteration markers is scanned on its busiest stream (the one with the
 * most kernels; of equal ones, the first to reach that count in trace order): its kernel
 * names in launch order, their period and periodic stretch (iter_find_period), and the
 * device's idle time before each phase of the period (no kernel of any stream running:
 * a stream waiting on another's work, as DDP's backward on its all-reduces, is busy)
 * that every repetition of the stretch shows (the least over them: a host stall in one
 * step is not the step's boundary), so that the cut falls at the step's boundary. The
 * stretch is cut into iterations before every repetition starting at one phase: a rank's
 * own idlest phase, or, for ranks that launch one periodic sequence (the same period,
 * each a rotation of the first one's), the phase where the device idles longest summed
 * over them (period_match), so that iteration k is the same work on every rank.
 *
 * The scan needs only each kernel's stream, name and times, so that a reader may scan a
 * rank as it reads it (job_read.c's first pass) and keep, until the ranks' cut is agreed,
 * only the stretch (period_scan_trim): the boundaries are then kernel positions on the
 * busiest stream (ordinals among its kernels), not event indices.
 */
#ifndef DPRO_REPLAY_PERIOD_H
#define DPRO_REPLAY_PERIOD_H

#include <stddef.h>
#include <stdint.h>

#include "job.h"
#include "replay.h"

/* What the scan reads of a kernel. */
typedef struct period_kernel {
    uint64_t start_ns, end_ns;
    uint64_t stream;
    uint32_t name; /* the rank's string id */
} period_kernel;

/* One rank's busiest stream and its period. */
typedef struct period_scan {
    uint64_t stream;  /* the busiest stream */
    size_t n;         /* its kernels */
    size_t p, lo, hi; /* period and periodic stretch [lo, hi) of positions; p == 0: none */
    int trimmed;      /* period_scan_trim: only what a cut reads is kept */
    size_t nbase;     /* the first position names holds (trimmed: lo, one period) */
    uint32_t *names;  /* per position from nbase: the kernel's name */
    size_t base;      /* the first position idx and end hold */
    size_t *idx;      /* its event index, or NULL: boundaries are positions, and then */
    uint64_t *end;    /* its end (with idx, NULL: the events say); once trimmed NULL, */
    uint32_t *dend;   /* and the ends held as each one less the one before it, */
    uint64_t *far;    /* UINT32_MAX: the next of these (the difference does not fit) */
    double *idle;     /* idle[ph]: device idle time before phase ph in every repetition */

    /* NULL: names are string ids of the rank's reader; else names index these texts (not
     * owned: shared reading hands another process's scan over with its names' texts) */
    const char *const *words;
} period_scan;

/* Scans the n kernels k (in trace order; idx[i]: kernel i's event index, or NULL) into
 * ps (ps->p == 0 when no period). Returns 0 or -1 (out of memory; ps is then empty). */
int period_scan_kernels(const period_kernel *k, size_t n, const size_t *idx, period_scan *ps);

/* Scans the kernels of rank jr's events into ps, boundaries as event indices. Returns
 * 0 or -1 (out of memory). */
int period_scan_rank(const job_rank *jr, period_scan *ps);

/* Keeps of ps only what a cut and period_match read: the names of the stretch's first
 * period, the event indices or ends (4 bytes a kernel, dend) from the position before
 * the stretch to its end. Returns 0 or -1 (out of memory; a failed shrink keeps the
 * larger arrays). */
int period_scan_trim(period_scan *ps);

void period_scan_free(period_scan *ps);

/* The phase of ps's own cut: the one with the most idle time before it. */
size_t period_own_phase(const period_scan *ps);

/* Cuts ps's stretch into iterations (it: ITER_PERIOD, the period, a boundary before every
 * repetition starting at phase, and after the last one when it is complete), each the
 * event index, or the position, of the kernel closing it. Returns 0 or -1 (out of
 * memory). */
int period_cut(const period_scan *ps, size_t phase, replay_rank_iters *it);

/* The ends of the kernels at the m ascending positions pos (within those kept) of ps,
 * scanned without event indices and trimmed, into out. */
void period_ends(const period_scan *ps, const size_t *pos, size_t m, uint64_t *out);

/* Rank jr's iterations from its own kernel period and idlest phase (it->method stays
 * ITER_NONE when there is no period). Returns 0 or -1 (out of memory). */
int period_detect(const job_rank *jr, replay_rank_iters *it);

/* The cut shared across ranks: of the ranks r < j->n_ranks with ps[r].p > 0, those whose
 * period has the first one's length and is a rotation of its names (compared as text,
 * through its rank's reader or its scan's words) are cut anew into iters[r] at the
 * phase where the device idles longest summed over them, when there are at least two;
 * iters of the others are left as they are. Returns 0 or -1 (out of memory). */
int period_match(const job *j, const period_scan *ps, replay_rank_iters *iters);

#endif
