/* build_timing.c: timing parameters from the measured times (submission latency, gaps,
 * latencies, durations; see build.h). */
#define PR_FMT "replay"
#include "build_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpro_log.h"

/* Pure submission latency (build_submission_latency): the time from the start of a
 * launch call to the start of its op when nothing else held the op, estimated as the
 * LAT_PCT-th percentile of (op start - call start) over the ops launched onto an idle
 * stream: the previous op of the stream had ended, and every edge predecessor of the op
 * too, before the launch call began. When no op qualifies: the smallest (op start - call
 * start) of the rank, an upper bound of the latency that holds no queueing unless every
 * op of the rank was queued.
 *
 * Ops that merely start on an idle stream do not qualify: with the host a full launch
 * queue ahead, an op that starts a few microseconds after its predecessor (the device's
 * own gap between kernels) was launched milliseconds before, so their delays measure the
 * queue. The ops launched onto an idle stream carry no queueing; their upper tail is
 * another stream's work occupying the device, so a low percentile rather than the median,
 * and not the minimum, which one driver hiccup or a microsecond of host/device clock
 * disagreement would decide. The distributions on the shared traces: docs/models.md. */
#define LAT_PCT 25

/* Submission latency of every rank (or only of only_rank >= 0) into lat_out[n_ranks]
 * (predmax: latest measured end of each node's edge predecessors, INT64_MIN for none;
 * lats: scratch of build_res_nodes_max's per-rank size for streams). */
static void
submission_latencies(const dfg *g, const int64_t *predmax, int64_t *lats, int64_t *lat_out,
                     int32_t only_rank)
{
    for (int32_t r = 0; r < g->n_ranks; r++) {
        lat_out[r] = 0;
        if (only_rank >= 0 && r != only_rank)
            continue;
        size_t k = 0;
        int64_t least = INT64_MAX;
        for (int32_t q = 0; q < g->n_res; q++) {
            if (g->res_rank[q] != r || g->res_kind[q] != DFG_RES_STREAM)
                continue;
            for (int32_t d = g->res_first[q], p = -1; d >= 0; p = d, d = g->next_on_res[d]) {
                int32_t l = g->launch[d];
                if (l < 0 || (g->flags[d] & DFG_F_REMOVED) || g->mstart[d] < g->mstart[l])
                    continue;
                int64_t lt = g->mstart[d] - g->mstart[l];
                if (lt < least)
                    least = lt;
                if ((p < 0 || dfg_mend(g, p) <= g->mstart[l]) &&
                    (predmax[d] == INT64_MIN || predmax[d] <= g->mstart[l]))
                    lats[k++] = lt;
            }
        }
        if (k > 0) {
            qsort(lats, k, sizeof *lats, cmp_i64);
            lat_out[r] = lats[k * LAT_PCT / 100];
        } else if (least != INT64_MAX) {
            lat_out[r] = least;
        }
    }
}

void
build_res_nodes_max(const dfg *g, int res_kind, int32_t only_rank, size_t *per_res,
                    size_t *per_rank)
{
    size_t most_res = 1, most_rank = 1;
    size_t *rank_nodes = calloc((size_t)(g->n_ranks > 0 ? g->n_ranks : 1), sizeof *rank_nodes);
    if (!rank_nodes)
        most_res = most_rank = (size_t)(g->n_nodes > 0 ? g->n_nodes : 1);
    for (int32_t q = 0; rank_nodes && q < g->n_res; q++) {
        int32_t r = g->res_rank[q];
        if (g->res_kind[q] != res_kind || r < 0 || r >= g->n_ranks ||
            (only_rank >= 0 && r != only_rank))
            continue;
        size_t k = 0;
        for (int32_t h = g->res_first[q]; h >= 0; h = g->next_on_res[h])
            k++;
        if (k > most_res)
            most_res = k;
        if ((rank_nodes[r] += k) > most_rank)
            most_rank = rank_nodes[r];
    }
    free(rank_nodes);
    if (per_res)
        *per_res = most_res;
    if (per_rank)
        *per_rank = most_rank;
}

/* Latest measured end of each node's edge predecessors (INT64_MIN: none). */
static void
edge_predmax(const dfg *g, int64_t *predmax)
{
    for (int32_t i = 0; i < g->n_nodes; i++)
        predmax[i] = INT64_MIN;
    for (int64_t e = 0; e < g->n_edges; e++) {
        int32_t s = g->esrc[e], d = g->edst[e];
        if (s >= 0 && d >= 0 && !(g->flags[s] & DFG_F_REMOVED) && dfg_mend(g, s) > predmax[d])
            predmax[d] = dfg_mend(g, s);
    }
}

int64_t
build_submission_latency(const dfg *g, int32_t r)
{
    if (r < 0 || r >= g->n_ranks)
        return 0;
    size_t n = (size_t)(g->n_nodes > 0 ? g->n_nodes : 1);
    int64_t *predmax = malloc(n * sizeof *predmax);
    size_t n_lats = 1;
    build_res_nodes_max(g, DFG_RES_STREAM, r, NULL, &n_lats);
    int64_t *lats = malloc(n_lats * sizeof *lats);
    int64_t *out = malloc((size_t)g->n_ranks * sizeof *out);
    int64_t lat = 0;
    if (predmax && lats && out) {
        edge_predmax(g, predmax);
        submission_latencies(g, predmax, lats, out, r);
        lat = out[r];
    }
    free(predmax);
    free(lats);
    free(out);
    return lat;
}

/* The largest latency a device node holds (dfg.h: 32 bits of ns, 2.1 s); a longer one
 * (an op that started long after its launch with nothing measured holding it: a device
 * held by another process, a wait the trace lacks) is stored as this, and
 * build_count_capped_lats counts the nodes that hold it. */
#define LAT_CAP INT32_MAX

/* lat capped to LAT_CAP. */
static int32_t
capped_lat(int64_t lat)
{
    return (int32_t)(lat < LAT_CAP ? lat : LAT_CAP);
}

void
build_count_capped_lats(const dfg *g, int32_t *counts, int32_t n_ranks)
{
    memset(counts, 0, (size_t)(n_ranks > 0 ? n_ranks : 0) * sizeof *counts);
    for (int32_t i = 0; i < g->n_nodes; i++) {
        int32_t r = g->kind[i] != DFG_HOST && dfg_lat(g, i) == LAT_CAP ? dfg_rank(g, i) : -1;
        if (r >= 0 && r < n_ranks)
            counts[r]++;
    }
}

/* Clock resolution allowed between an op's measured start and the end of an op it waits
 * for on its rank (one clock; Kineto's timestamps are rounded to the microsecond). */
#define EARLY_TOL_NS 1000

int
build_count_early_starts(const dfg *g, int32_t *counts, int64_t *worst_ns, int32_t n_ranks)
{
    int32_t n = n_ranks > 0 ? n_ranks : 0;
    int64_t *lead = calloc((size_t)(g->n_nodes > 0 ? g->n_nodes : 1), sizeof *lead);
    int rc = lead ? 0 : -1;
    memset(counts, 0, (size_t)n * sizeof *counts);
    memset(worst_ns, 0, (size_t)n * sizeof *worst_ns);
    /* each node's largest lead over an edge predecessor of its rank */
    for (int64_t e = 0; lead && e < g->n_edges; e++) {
        int32_t s = g->esrc[e], d = g->edst[e];
        if (s < 0 || d < 0 || g->kind[d] == DFG_HOST || dfg_rank(g, s) != dfg_rank(g, d) ||
            ((g->flags[s] | g->flags[d]) & (DFG_F_REMOVED | DFG_F_SYNTHETIC)))
            continue;
        int64_t l = dfg_mend(g, s) - g->mstart[d];
        if (l > lead[d])
            lead[d] = l;
    }
    for (int32_t i = 0; lead && i < g->n_nodes; i++) {
        int32_t r = lead[i] > EARLY_TOL_NS ? dfg_rank(g, i) : -1;
        if (r >= 0 && r < n) {
            counts[r]++;
            if (lead[i] > worst_ns[r])
                worst_ns[r] = lead[i];
        }
    }
    free(lead);
    return rc;
}

/* gap, lat and dur of every node from the measured times (predmax: see edge_predmax;
 * lat_sub: each rank's submission latency; prev: dfg_prev_table). Returns 0, or -1 when
 * out of memory (a duration or gap of 4.29 s or more the side table could not take). */
static int
derive_node_timing(dfg *g, const int64_t *predmax, const int64_t *lat_sub, const int32_t *prev)
{
    int rc = 0;
    int32_t n = g->n_nodes;
    for (int32_t i = 0; i < n; i++) {
        int32_t p = prev[i];
        int64_t prev_end = p >= 0 ? dfg_mend(g, p) : 0;
        if (g->kind[i] == DFG_HOST) {
            int64_t gap = g->mstart[i] - prev_end;
            rc |= dfg_set_gap(g, i, gap > 0 ? gap : 0);
            int64_t from = g->mstart[i];
            if (predmax[i] > from && predmax[i] != INT64_MIN)
                from = predmax[i];
            int64_t d = dfg_mend(g, i) - from;
            rc |= dfg_set_dur(g, i, d > 0 ? d : 0);
            continue;
        }
        int32_t r = dfg_rank(g, i);
        int32_t l = g->launch[i];
        int64_t t = g->mstart[i];
        int64_t lm = lat_sub[r];
        if (l < 0) {
            int64_t gap = t - (p >= 0 ? prev_end : 0);
            if (predmax[i] != INT64_MIN && p >= 0 && predmax[i] > prev_end)
                gap = 0;
            rc |= dfg_set_gap(g, i, gap > 0 ? gap : 0);
            dfg_set_lat(g, i, 0);
        } else {
            int64_t launch_ready = g->mstart[l] + lm;
            if (p >= 0 && prev_end >= launch_ready && prev_end >= predmax[i]) {
                /* bound by its stream */
                int64_t gap = t - prev_end;
                rc |= dfg_set_gap(g, i, gap > 0 ? gap : 0);
                dfg_set_lat(g, i, capped_lat(lm));
            } else if (predmax[i] == INT64_MIN || g->mstart[l] + lm >= predmax[i]) {
                /* bound by its launch */
                int64_t lt = t - g->mstart[l];
                if (lt < 0)
                    lt = 0;
                dfg_set_lat(g, i, capped_lat(lt));
                g->gap[i] = 0;
            } else {
                /* bound by an event wait */
                dfg_set_lat(g, i, capped_lat(lm));
                g->gap[i] = 0;
            }
        }
        if (p < 0 && l < 0)
            rc |= dfg_set_gap(g, i, t > 0 ? t : 0);
        rc |= dfg_set_dur(g, i, dfg_mend(g, i) - t);
    }
    return rc;
}

/* Each group's members and measured transfer (end - last arrival). */
static void
derive_group_timing(dfg *g)
{
    for (int32_t q = 0; q < g->n_groups; q++) {
        int64_t arr = INT64_MIN, end = INT64_MIN;
        int32_t m = 0;
        for (int32_t p = g->grp_first[q]; p >= 0; p = dfg_next_in_group(g, p)) {
            m++;
            if (g->mstart[p] > arr)
                arr = g->mstart[p];
            if (dfg_mend(g, p) > end)
                end = dfg_mend(g, p);
        }
        g->grp_members[q] = m;
        if (m > 0) {
            g->grp_mdur[q] = end > arr ? end - arr : 0;
            g->grp_dur[q] = g->grp_mdur[q];
        }
        if (g->grp_nranks[q] <= 0)
            g->grp_nranks[q] = m;
    }
}

int
build_derive_timing(dfg *g)
{
    int32_t n = g->n_nodes;
    int64_t *predmax = malloc((size_t)(n > 0 ? n : 1) * sizeof *predmax);
    size_t n_lats = 1;
    build_res_nodes_max(g, DFG_RES_STREAM, -1, NULL, &n_lats);
    int64_t *lats = malloc(n_lats * sizeof *lats);
    int64_t *lat_sub = malloc((size_t)(g->n_ranks > 0 ? g->n_ranks : 1) * sizeof *lat_sub);
    int32_t *prev = dfg_prev_table(g);
    int rc = predmax && lats && lat_sub && prev ? 0 : -1;
    if (rc == 0) {
        edge_predmax(g, predmax);
        submission_latencies(g, predmax, lats, lat_sub, -1);
        for (int32_t r = 0; r < g->n_ranks; r++)
            if (lat_sub[r] > 0)
                pr_dbg("rank %d: submission latency %.1f us", r, (double)lat_sub[r] / 1000.0);
        rc = derive_node_timing(g, predmax, lat_sub, prev);
        derive_group_timing(g);
    }
    free(predmax);
    free(lats);
    free(lat_sub);
    free(prev);
    return rc;
}
