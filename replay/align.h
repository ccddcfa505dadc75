/*
 * align.h: clock alignment of ranks from their collectives (prefix align_).
 *
 * Every participant of a collective finishes it within microseconds of the others, so
 * the difference of two ranks' end times of the same collective (matched by
 * communicator hash and sequence number) measures the difference of their clocks. The
 * offset of a rank is the median of those differences against an already aligned rank
 * (a breadth-first walk from the reference rank through shared collectives), which
 * ignores the few collectives that ended late on one side. A rank that shares no
 * collective with an aligned rank is reported, not guessed (its offset stays 0).
 * Send/recv count the same way: both ends of a transfer finish together, so the caller
 * passes them as samples keyed by (channel, ordinal on the channel) (build_p2p_channel),
 * which links the stages of a pipeline that share no collective.
 */
#ifndef DPRO_REPLAY_ALIGN_H
#define DPRO_REPLAY_ALIGN_H

#include <stddef.h>
#include <stdint.h>

/* One collective as one rank saw it. */
typedef struct align_sample {
    uint64_t comm; /* communicator hash, or a send/recv channel (build_p2p_channel) */
    uint64_t seq;  /* collective ordinal, or the transfer's ordinal on its channel */
    int32_t rank;
    int64_t end_ns; /* end of the collective's device work on the rank's clock */
} align_sample;

typedef struct align_result {
    int32_t n_ranks;
    int64_t *offset_ns;        /* aligned time = local time + offset_ns[rank] */
    uint8_t *aligned;          /* 1: offset known (the reference, or through collectives) */
    int32_t *shared;           /* collectives the offset was computed from */
    double *residual_us;       /* per rank: median |aligned end - aligned reference end| */
    double residual_median_us; /* over all matched collectives: median spread of ends */
    double residual_max_us;    /* the largest spread */
    int32_t n_unaligned;       /* ranks present in samples but not aligned */
    int32_t reference;         /* the reference rank (offset 0) */
} align_result;

/* Computes offsets for ranks 0..n_ranks-1 from n samples. present[r] (may be NULL: all
 * ranks) says which ranks exist; the reference is the lowest present rank. Returns 0,
 * or -1 when out of memory. res must be freed with align_result_free. */
int align_clocks_from_collectives(const align_sample *samples, size_t n, int32_t n_ranks,
                                  const uint8_t *present, align_result *res);

/* The same from samples in nparts parts, parts[p][0 .. counts[p]) (NULL where counts[p]
 * is 0), taken as their concatenation in part order, so that a caller holding them per
 * rank need not copy them into one array. Returns 0, or -1 when out of memory. */
int align_clocks_from_parts(const align_sample *const *parts, const size_t *counts, size_t nparts,
                            int32_t n_ranks, const uint8_t *present, align_result *res);

void align_result_free(align_result *res);

#endif
