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
 *
 * The piecewise model (used for predictions unless `piecewise` is cleared): NCCL switches
 * algorithm and protocol with the message size, and its bandwidth ramps up with the size
 * (channels in use, pipeline fill), so one line over all sizes misses in between. Per
 * operation, with x = factor(op, n) * bytes as above:
 *   1. the samples are reduced to one point per message size (sizes within 1 % of each
 *      other are one size): the median x and the median transfer time, and the size's
 *      relative noise (1.4826 MAD / median);
 *   2. the sizes, in increasing order, are split into K consecutive segments of at
 *      least 2 sizes each, each fitted by least squares of the relative error with
 *      time = alpha + x / beta (alpha, beta >= 0; the same clamps as above), the split
 *      that minimises the summed squared relative error found by dynamic programming
 *      for each K; K is the smallest whose root mean square relative error is at most
 *      the noise a size's median carries (2 x the median noise / sqrt(median samples per
 *      size), at least 1 %), up to COSTMODEL_MAX_SEGS and sizes / 2. A boundary between
 *      segments is a regime change (protocol or algorithm switch, end of the ramp);
 *   3. a size inside a segment's range takes its line; between two segments, the
 *      straight line between the end of one and the start of the next; below the first
 *      segment or above the last, that segment's line (never below 0).
 * With one size the model is the single point's line through the origin (as above);
 * with 2 or 3 sizes one segment; without samples the operation has no segments and
 * falls back to the global alpha-beta fit.
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

#define COSTMODEL_MAX_SEGS 6

/* One segment of the piecewise model: time = alpha_ns + x / beta_bpns over x in [lo, hi]
 * (x = factor x bytes, the range of its sizes). */
typedef struct costmodel_segment {
    double lo, hi;
    double alpha_ns;
    double beta_bpns; /* 0: infinite (no size dependence) */
    int32_t sizes;    /* distinct sizes in it */
} costmodel_segment;

typedef struct costmodel_fit {
    int fitted;       /* 0: no samples (uses the global fit) */
    double alpha_ns;  /* latency */
    double beta_bpns; /* bandwidth, bytes per ns (== GB/s); 0 means infinite */
    int32_t n_samples;
    double mape; /* mean absolute percentage error on the samples */
    /* piecewise model (see above); n_segs == 0: none */
    int32_t n_sizes;  /* distinct message sizes */
    int32_t n_segs;   /* segments fitted */
    double pw_mape;   /* its mean absolute percentage error on the samples */
    double noise_rel; /* median relative noise of a size's transfer times */
    costmodel_segment seg[COSTMODEL_MAX_SEGS];
} costmodel_fit;

typedef struct costmodel {
    costmodel_fit op[COSTMODEL_OPS];
    costmodel_fit all;
    int piecewise; /* 1 (costmodel_fit_samples' default): predict with the segments */
} costmodel;

/* Algorithm traffic factor of an operation on n ranks (see above). */
double costmodel_factor(int op, int32_t nranks);

/* Fits the model to n samples (samples with transfer_ns <= 0 are ignored). Returns 0,
 * or -1 when out of memory. */
int costmodel_fit_samples(costmodel *m, const costmodel_sample *s, size_t n);

/* Predicted transfer time in ns (>= 0): the piecewise model of op when m->piecewise and
 * op has segments, else op's alpha-beta fit (or the global one). */
int64_t costmodel_predict(const costmodel *m, int op, int32_t nranks, int64_t bytes);

/* The piecewise model's time at x = factor x bytes for fit f (f->n_segs > 0), ns. */
double costmodel_piecewise_at(const costmodel_fit *f, double x);

/* Messages below this many bytes are taken to run NCCL's LL protocol, the others Simple
 * (costmodel_latency_growth): NCCL's tuner, with its default constants for a ring over
 * NVLink, moves from LL to Simple between about 1 and 3 MB on 2 to 8 ranks of an A100 or
 * H100 node; LL128, in between, has a growth between theirs. */
#define COSTMODEL_LL_MAX_BYTES (1 << 20)

/* How much a collective's latency grows from n_from to n_to ranks, as NCCL's latency
 * model says (src/graph/tuning.cc): latency = base + steps(op, n) x hop, steps the ring's
 * (all-reduce 2(n-1), all-gather and reduce-scatter n-1, broadcast and reduce n), base
 * and hop the tuner's defaults for a ring over NVLink of the protocol the message size
 * implies (COSTMODEL_LL_MAX_BYTES): LL 6.6 and 0.6 us (from 2 to 4 ranks x1.31), Simple
 * 8.4 and 3.4 us (x1.89). Returns (base + steps(n_to) hop) / (base + steps(n_from) hop),
 * 1 for operations without ring steps (all-to-all, send, receive). Inside one node NCCL's
 * tree is a chain with the same 2(n-1) hops, so the ring's growth stands for it too. */
double costmodel_latency_growth(int op, int32_t n_from, int32_t n_to, int64_t bytes);

/* The transfer time t_ns of a collective of op on n_from ranks (measured or modelled),
 * extrapolated to n_to ranks with the same payload bytes (the what-if of another rank
 * count): the bandwidth part scaled by the traffic factor and the latency part by NCCL's
 * latency growth,
 *   t_ns + (factor(op, n_to) - factor(op, n_from)) x bytes / beta
 *        + alpha x (costmodel_latency_growth(op, n_from, n_to, bytes) - 1),
 * alpha and beta being the latency and bandwidth of the line the model prices this
 * message with on n_from ranks (piecewise, when m->piecewise and op has segments: the
 * segment whose range holds x = factor(op, n_from) x bytes, between two segments the lower
 * one, below the first the first, above the last the last; else op's alpha-beta fit, or
 * that of all operations). The size regime (protocol, algorithm) is the one measured at
 * n_from. Returns ns >= 0: t_ns itself when nothing is fitted. With one message size the
 * fitted latency is 0 (above): the time is then all bandwidth term. */
int64_t costmodel_extrapolate_ranks(const costmodel *m, int op, int32_t n_from, int32_t n_to,
                                    int64_t bytes, int64_t t_ns);

#endif
