/*
 * costmodel.h: the collective cost model fitted to a trace (prefix costmodel_).
 *
 * For each operation, transfer time = alpha + factor(op, n) * bytes / beta, the
 * latency-bandwidth model with the ring algorithm's traffic factor:
 *   all-reduce 2(n-1)/n; all-gather, reduce-scatter, all-to-all (n-1)/n (bytes: the
 *   whole buffer across ranks); broadcast, reduce, send, recv 1.
 * It is fitted on the collectives' transfer part only (end minus the last participant's
 * arrival), so waiting for a late rank is not mistaken for a slow network. The fit is
 * least squares with three rounds of outlier rejection (beyond 3 MADs); with one
 * message size only, alpha is 0 and beta goes through the mean point; an operation
 * without samples borrows the fit of all operations together.
 */
#ifndef DPRO_REPLAY_COSTMODEL_H
#define DPRO_REPLAY_COSTMODEL_H

#include <stddef.h>
#include <stdint.h>

#define COSTMODEL_OPS 9 /* DPRO_COLL_OP_COUNT */

typedef struct costmodel_sample {
    int op;         /* enum dpro_coll_op */
    int32_t nranks; /* ranks of the communicator */
    int64_t bytes;  /* payload bytes (see above) */
    int64_t transfer_ns;
} costmodel_sample;

typedef struct costmodel_fit {
    int fitted;       /* 0: no samples (uses the global fit) */
    double alpha_ns;  /* latency */
    double beta_bpns; /* bandwidth, bytes per ns (== GB/s); 0 means infinite */
    int32_t n_samples;
    double mape; /* mean absolute percentage error on the samples */
} costmodel_fit;

typedef struct costmodel {
    costmodel_fit op[COSTMODEL_OPS];
    costmodel_fit all;
} costmodel;

/* Algorithm traffic factor of an operation on n ranks (see above). */
double costmodel_factor(int op, int32_t nranks);

/* Fits the model to n samples (samples with transfer_ns <= 0 are ignored). Returns 0,
 * or -1 when out of memory. */
int costmodel_fit_samples(costmodel *m, const costmodel_sample *s, size_t n);

/* Predicted transfer time in ns (>= 0). */
int64_t costmodel_predict(const costmodel *m, int op, int32_t nranks, int64_t bytes);

#endif
