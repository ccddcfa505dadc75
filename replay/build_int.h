/*
 * build_int.h: what the builder's files (build*.c) share, and job_fold.c (which keeps of a
 * folded rank what the builder needs).
 */
#ifndef DPRO_REPLAY_BUILD_INT_H
#define DPRO_REPLAY_BUILD_INT_H

#include <stddef.h>
#include <stdint.h>

#include "build.h"

static inline int
is_device_kind(uint32_t k)
{
    return k == DPRO_KIND_KERNEL || k == DPRO_KIND_MEMCPY || k == DPRO_KIND_MEMSET;
}

static inline int
is_p2p_op(uint32_t op)
{
    return op == DPRO_COLL_SEND || op == DPRO_COLL_RECV;
}

static inline int
cmp_i64(const void *pa, const void *pb)
{
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    return (a > b) - (a < b);
}

static inline int
cmp_int32(const void *pa, const void *pb)
{
    int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    return (a > b) - (a < b);
}

/* Pairs the send/recv transfers of every rank (p2p[r], nodes filled in) into groups and
 * says what is left unmodelled, with job_warn (build_p2p.c). out (may be NULL) receives
 * the counts. Returns 0 or -1 (out of memory). */
int build_match_p2p_job(job *j, dfg *g, build_p2p *p2p, build_p2p_stats *out);

/* The most nodes on one resource of kind res_kind (DFG_RES_THREAD, DFG_RES_STREAM) into
 * *per_res, and on one rank's resources of that kind together into *per_rank (only
 * only_rank's when it is >= 0; a NULL out is not filled): the sizes of the per-rank
 * scratch arrays of the builder's passes, a small part of the graph's nodes when it holds
 * many ranks. Out of memory here, both are the graph's node count, a bound
 * (build_timing.c). */
void build_res_nodes_max(const dfg *g, int res_kind, int32_t only_rank, size_t *per_res,
                         size_t *per_rank);

/* Adds the wake-up edges between the host threads of every rank (build.h; thresholds in
 * build_wakeup.c). Returns 0 or -1 (out of memory). */
int build_infer_wakeups(dfg *g);

#endif
