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
 *      segment or above the last, that segment's line (never below 0), unless NCCL's
 *      tuner would run it in another protocol than that segment's: then the tuner's
 *      shape scaled to the segment (costmodel_regime_at).
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
    int algo; /* enum ncclname_algo its kernel's name tells; 0 (unknown): none */
} costmodel_sample;

#define COSTMODEL_MAX_SEGS 6
#define COSTMODEL_MAX_RUNS 8 /* algorithm runs kept per operation */

/* A run of consecutive message sizes (x in [lo, hi], x as below) whose kernels named one
 * algorithm. */
typedef struct costmodel_algo_run {
    double lo, hi;
    int algo; /* enum ncclname_algo */
} costmodel_algo_run;

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
    /* the algorithm by message size, from the kernels' names (n_runs == 0: no names); the
     * piecewise segments never span two runs */
    int32_t n_runs;
    costmodel_algo_run run[COSTMODEL_MAX_RUNS];
} costmodel_fit;

typedef struct costmodel {
    costmodel_fit op[COSTMODEL_OPS];
    costmodel_fit all;
    int piecewise; /* 1 (costmodel_fit_samples' default): predict with the segments */
    int32_t named; /* samples whose kernel named NCCL's algorithm */
    /* NCCL's cap on LL's bus bandwidth for the trace's GPUs, bytes per ns (set by the
     * caller: costmodel_ll_max_bpns); 0: unknown, no cap */
    double ll_max_bpns;
    /* 1: a size outside the measured ones takes the nearest segment's line whatever
     * protocol NCCL would run it in (no costmodel_regime_at); 0 (costmodel_fit_samples'
     * default): priced in the tuner's protocol there */
    int nearest;
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

/* NCCL's protocols (the order of its tuner's tables). */
enum costmodel_proto {
    COSTMODEL_PROTO_LL = 0,
    COSTMODEL_PROTO_LL128 = 1,
    COSTMODEL_PROTO_SIMPLE = 2
};

/* The protocol's name as NCCL spells it ("LL", "LL128", "Simple"); "?" for another value. */
const char *costmodel_proto_name(int proto);

/* Without the algorithm from kernel names, messages below this many bytes are taken to run
 * NCCL's LL protocol, the others Simple (costmodel_proto_at): NCCL's tuner, with its
 * default constants for a ring over NVLink, moves from LL to Simple between about 1 and 3
 * MB on 2 to 8 ranks of an A100 or H100 node; LL128, in between, has a growth between
 * theirs. */
#define COSTMODEL_LL_MAX_BYTES (1 << 20)

/* The algorithm (enum ncclname_algo) the trace's kernel names show for a message of bytes
 * of op on nranks ranks: that of the run of sizes holding x = factor(op, nranks) x bytes,
 * else of the nearest run (by the ratio of sizes); 0 when op's samples named none. */
int costmodel_algo_at(const costmodel *m, int op, int32_t nranks, int64_t bytes);

/* NCCL's tuner cap on LL's bus bandwidth (src/graph/tuning.cc llMaxBws), GB/s (== bytes per
 * ns), for GPUs of compute capability cc_major (7 Volta, 8 Ampere, 9 Hopper, 10 and later
 * Blackwell) on nnodes nodes (1, 2, more): Ampere 87.7 / 22.5 / 19.0, Hopper 141 / 45 /
 * 35, Volta 39 / 39 / 20.4, Blackwell twice Hopper's; 0 for older GPUs or cc_major 0. */
double costmodel_ll_max_bpns(int cc_major, int nnodes);

/* The protocol (enum costmodel_proto) inferred for a message of bytes of op on nranks ranks
 * run with algo (costmodel_algo_at): with an algorithm, NCCL's tuner choice (the lowest
 * latency + x / bandwidth among LL, LL128 and Simple; src/graph/tuning.cc), the latencies
 * the tuner's defaults (costmodel_latency_growth), the bandwidths Simple's = the model's at
 * op's largest measured size (the last segment's, or the alpha-beta fit's) and the tuner's
 * fractions of it: ring LL 0.5, LL128 0.92, tree LL 1/3.8, LL128 0.94, LL's at most
 * m->ll_max_bpns when known (a last segment that ran LL or LL128 by costmodel_regime_at's
 * test: Simple's its bandwidth over that fraction). Without an algorithm
 * (no names) or a bandwidth, the size rule COSTMODEL_LL_MAX_BYTES. */
int costmodel_proto_at(const costmodel *m, int op, int algo, int32_t nranks, int64_t bytes);

/* How a size is priced outside the measured regimes (costmodel_regime_at). */
typedef struct costmodel_regime {
    int proto;          /* the protocol NCCL's tuner picks at the size; -1: not inferred */
    int measured_proto; /* that of the nearest measured segment; -1: not inferred */
    double alpha_ns;    /* with extrapolation: the latency and bandwidth priced */
    double beta_bpns;
    double ns; /* with extrapolation: the transfer time, ns */
} costmodel_regime;

/* Whether a message of bytes of op on nranks ranks lies outside the sizes the piecewise model
 * measured, in a protocol none of its nearest segment's sizes ran, and its price there. For
 * x = factor(op, nranks) x bytes below op's first segment or above its last (op with ring
 * steps: not all-to-all, send, receive; m->piecewise set, m->nearest clear), algo the
 * algorithm of the nearest named run (the ring without names):
 * - pe, the segment's protocol: the first of Simple, LL128 and LL that the tuner picks at
 *   the segment's end nearest x (a segment may span a switch) when the segment's bandwidth
 *   is taken as that protocol's; Simple's bandwidth is then the segment's over the tuner's
 *   fraction of pe (costmodel_proto_at's fractions; none picked: Simple, its own);
 * - px, the tuner's pick at x with that bandwidth;
 * - when px != pe, the price alpha + x / beta: alpha the segment's latency x the tuner's
 *   latency of px / that of pe (a segment without latency, one message size: the tuner's
 *   latency of px x the trace's scale, the mean over every operation's segments with a
 *   latency, on nranks ranks, of latency / the tuner's latency of the protocol at the
 *   segment's middle, of those that ran px if any, 1 when none), beta Simple's bandwidth x
 *   the tuner's fraction of px (LL's at most m->ll_max_bpns): NCCL's relative shape
 *   (src/graph/tuning.cc: base and hop latencies, the bandwidth refinements per protocol)
 *   scaled to what the trace measured.
 * Fills *r (proto and measured_proto where inferred). Returns 1 when the size is priced in
 * the unseen protocol (r->ns), else 0 (the piecewise line prices it). */
int costmodel_regime_at(const costmodel *m, int op, int32_t nranks, int64_t bytes,
                        costmodel_regime *r);

/* How much a collective's latency grows from n_from to n_to ranks, as NCCL's latency model
 * says (src/graph/tuning.cc) for algo (enum ncclname_algo; 0 or an algorithm other than the
 * tree: the ring) and proto (enum costmodel_proto), with the tuner's default constants:
 *   ring: base + steps(op, n) x hop, steps all-reduce 2(n-1), all-gather and
 *     reduce-scatter n-1, broadcast and reduce n; base and hop over NVLink, LL 6.6 and
 *     0.6 us (from 2 to 4 ranks x1.31), LL128 14 and 1.9, Simple 8.4 and 3.4 (x1.89);
 *   tree (all-reduce): base + 2 log2(n) x hop, one rank per node (a trace that shows NCCL
 *     choosing the tree spans nodes; the ranks per node are not in it), hop the network's,
 *     LL 6.8 and 5.0 us (x1.60), LL128 14 and 8.5, Simple 8.4 and 14.
 * Returns (latency at n_to) / (latency at n_from), 1 for operations without steps
 * (all-to-all, send, receive). */
double costmodel_latency_growth(int op, int algo, int proto, int32_t n_from, int32_t n_to);

/* The transfer time t_ns of a collective of op on n_from ranks (measured or modelled),
 * extrapolated to n_to ranks with the same payload bytes (the what-if of another rank
 * count): the bandwidth part scaled by the traffic factor and the latency part by NCCL's
 * latency growth,
 *   t_ns + (factor(op, n_to) - factor(op, n_from)) x bytes / beta
 *        + alpha x (costmodel_latency_growth(op, algo, proto, n_from, n_to) - 1),
 * alpha and beta being the latency and bandwidth of the line the model prices this
 * message with on n_from ranks (piecewise, when m->piecewise and op has segments: the
 * segment whose range holds x = factor(op, n_from) x bytes, between two segments the lower
 * one, below the first the first, above the last the last; else op's alpha-beta fit, or
 * that of all operations), algo and proto those inferred for the message at n_from
 * (costmodel_algo_at, costmodel_proto_at). The size regime (protocol, algorithm) is the one
 * measured at n_from. Returns ns >= 0: t_ns itself when nothing is fitted. With one message size
 * the fitted latency is 0 (above): the time is then all bandwidth term. */
int64_t costmodel_extrapolate_ranks(const costmodel *m, int op, int32_t n_from, int32_t n_to,
                                    int64_t bytes, int64_t t_ns);

#endif
