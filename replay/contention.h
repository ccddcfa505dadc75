/*
 * contention.h: how much compute kernels slow down while collectives transfer, and
 * collectives while compute kernels run, measured on a trace's own times (prefix
 * contention_).
 *
 * Model: a compute kernel of which a fraction f of its time overlaps the transfer of a
 * collective on its rank (last participant's arrival to the end) takes (1 + k_comp f)
 * times its time alone; a collective's transfer of which a fraction f overlaps compute
 * kernels of its ranks (mean over the participants) takes (1 + k_comm f) times.
 *
 * Fitted on operations of one place (resource, position in the iteration on that
 * resource, name; a collective by its first participant's place) across the iterations,
 * so that kernels of different work are never compared: at each place with at least 3
 * iterations, y = d / median(d) - 1 and x = f - mean(f); a least-squares line y = s x
 * through the origin over all places, with one round of rejection beyond 3 MADs of the
 * residuals; then k = s / (1 - s mean(f)) (the median is the time at the mean overlap,
 * d0 (1 + k mean f)). Data is thin when fewer than CONTENTION_MIN_SAMPLES operations have
 * |x| >= 0.05 (the overlap moves little between iterations): then the factor is not
 * fitted (0: no contention assumed).
 */
#ifndef DPRO_REPLAY_CONTENTION_H
#define DPRO_REPLAY_CONTENTION_H

#include <stdint.h>

#include "dfg.h"

#define CONTENTION_MIN_SAMPLES 20

typedef struct contention_fit {
    int fitted;          /* 0: data too thin, k is 0 */
    double k;            /* stretch when fully overlapped */
    int64_t samples;     /* operations at places with >= 3 iterations */
    int64_t informative; /* of them with |x| >= 0.05 */
    double mean_f;       /* mean overlap over the samples */
} contention_fit;

typedef struct contention {
    contention_fit comp; /* compute kernels by collectives */
    contention_fit comm; /* collectives by compute kernels */
} contention;

/* Measures both factors on g's measured times (mstart, mend), the iterations being the
 * ranks' boundaries (dfg_iterations). Compute kernels are DFG_KERNEL nodes whose names
 * are not communication kernels (dpro_kernel_is_comm). Returns 0, or -1 out of memory. */
int contention_measure(const dfg *g, contention *c);

/*
 * Overlap fractions in a schedule: for each live DFG_KERNEL node (compute) the fraction of
 * [start, end] covered by the transfer of collectives of its rank, and for each group
 * the mean over its participants of the fraction of its transfer covered by compute
 * kernels of the participant's rank. start/end are per node (measured or simulated),
 * grp_arrival per group (the last participant's arrival; NULL: the latest start of
 * its participants). f_node (n_nodes; -1 for other nodes) and f_grp (n_groups) are
 * written. Returns 0 or -1 (out of memory).
 */
int contention_overlaps(const dfg *g, const int64_t *start, const int64_t *end,
                        const int64_t *grp_arrival, double *f_node, double *f_grp);

#endif
