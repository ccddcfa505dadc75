/* whatif.c: what-ifs about the ranks of a job: one rank slower, more ranks (replay.h). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"
#include "fidelity_int.h"
#include "order.h"

int
replay_scale_host_node(dfg *g, int32_t n, double factor)
{
    return dfg_set_dur(g, n, (int64_t)((double)dfg_dur(g, n) * factor + 0.5)) == 0 &&
                   dfg_set_gap(g, n, (int64_t)((double)dfg_gap(g, n) * factor + 0.5)) == 0
               ? 0
               : -1;
}

int64_t
replay_slow_rank(dfg *g, int32_t rank, double kernel_factor, double host_factor)
{
    int64_t rc = 0;
    if (!(kernel_factor > 0) || !(host_factor > 0) || rank < 0 || rank >= g->n_ranks)
        rc = -1;
    else if (dfg_rank_rep(g, rank) != rank || dfg_rank_weight(g, rank) > 1)
        rc = -2;
    for (int32_t n = 0; rc >= 0 && n < g->n_nodes; n++) {
        if ((g->flags[n] & DFG_F_REMOVED) || dfg_rank(g, n) != rank)
            continue;
        if (g->kind[n] == DFG_KERNEL) {
            rc = dfg_set_dur(g, n, (int64_t)((double)dfg_dur(g, n) * kernel_factor + 0.5)) == 0
                     ? rc + 1
                     : -1;
        } else if (g->kind[n] == DFG_HOST) {
            rc = replay_scale_host_node(g, n, host_factor) == 0 ? rc + 1 : -1;
        }
    }
    return rc;
}

int32_t
replay_scale_ranks(const costmodel *m, dfg *g, int32_t n_from, int32_t n_to)
{
    int32_t rc = 0;
    if (n_from < 2 || n_to < 2)
        rc = -1;
    for (int32_t q = 0; rc >= 0 && q < g->n_groups; q++) {
        if (g->grp_nranks[q] != n_from)
            continue;
        g->grp_dur[q] = costmodel_extrapolate_ranks(m, g->grp_op[q], n_from, n_to, g->grp_bytes[q],
                                                    g->grp_dur[q]);
        g->grp_nranks[q] = n_to;
        rc++;
    }
    return rc;
}

int32_t
replay_job_hosts(const job *j, int32_t *most_per_host)
{
    int32_t n_hosts = 0, most = 0;
    for (int32_t r = 0; r < j->n_ranks; r++) {
        const char *h = j->ranks[r].reader ? j->ranks[r].host : NULL;
        int32_t first = -1, on = 0;
        for (int32_t q = 0; h && q <= r; q++) {
            const char *o = j->ranks[q].reader ? j->ranks[q].host : NULL;
            if (o && strcmp(o, h) == 0) {
                first = first < 0 ? q : first;
                on++;
            }
        }
        n_hosts += first == r; /* r is its host's first rank */
        most = on > most ? on : most;
    }
    *most_per_host = most;
    return n_hosts;
}

/* Times a ring of op over `nodes` nodes crosses the network (replay_scale_ranks_nodes). */
static int32_t
net_crossings(int op, int32_t nodes)
{
    switch (op) {
    case DPRO_COLL_ALLREDUCE:
        return 2 * (nodes - 1);
    case DPRO_COLL_ALLGATHER:
    case DPRO_COLL_REDUCESCATTER:
    case DPRO_COLL_BROADCAST:
    case DPRO_COLL_REDUCE:
        return nodes - 1;
    case DPRO_COLL_ALLTOALL:
        return 1;
    default:
        return 0;
    }
}

int32_t
replay_scale_ranks_nodes(const costmodel *m, dfg *g, int32_t n_from, int32_t n_to, int32_t nodes,
                         double net_bpns, double hop_ns)
{
    int32_t rc = 0;
    if (n_from < 2 || n_to < 2 || nodes < 2 || !(net_bpns > 0) || !(hop_ns >= 0))
        rc = -1;
    for (int32_t q = 0; rc >= 0 && q < g->n_groups; q++) {
        int op = g->grp_op[q];
        int64_t b = g->grp_bytes[q];
        if (g->grp_nranks[q] != n_to || net_crossings(op, nodes) == 0)
            continue;
        double lo = 0.9 * (double)b, hi = 1.1 * (double)b,
               dt = (double)(costmodel_predict(m, op, n_from, (int64_t)hi) -
                             costmodel_predict(m, op, n_from, (int64_t)lo)),
               fx = costmodel_factor(op, n_from), s = dt > 0 && fx > 0 ? dt / (fx * (hi - lo)) : 0,
               x_to = costmodel_factor(op, n_to) * (double)b;
        double add = x_to * (1.0 / net_bpns > s ? 1.0 / net_bpns - s : 0) +
                     hop_ns * net_crossings(op, nodes);
        if (!((double)g->grp_dur[q] + add <= (double)BUILD_TIME_LIMIT)) {
            rc = -1; /* a network too slow to price: the time would not fit */
            break;
        }
        g->grp_dur[q] += (int64_t)llround(add);
        rc++;
    }
    return rc;
}

/* The expected maximum of k independent draws from the m sorted values v (each drawn
 * with probability 1/m). */
static double
expected_max(const double *v, size_t m, int32_t k)
{
    double e = 0;
    for (size_t i = 0; i < m; i++)
        e += v[i] * (pow((double)(i + 1) / (double)m, k) - pow((double)i / (double)m, k));
    return e;
}

/* The ranks participant p of a group stands for: 1, or with weighted its rank's weight
 * (a folded class's representative stands for its class). */
static int32_t
participant_weight(const dfg *g, int32_t p, int weighted)
{
    return weighted ? dfg_rank_weight(g, dfg_rank(g, p)) : 1;
}

/* 1 when group q (of n_to ranks: replay_scale_ranks repriced it) has n_from
 * participants (counted by participant_weight), each on a rank below g->n_ranks (and
 * with a key, when key is not NULL), all starting in [w0, w1). */
static int
group_sampled(const dfg *g, int32_t q, int32_t n_from, int32_t n_to, int64_t w0, int64_t w1,
              const int32_t *key, int weighted)
{
    int ok = g->grp_nranks[q] == n_to && (weighted || g->grp_members[q] == n_from);
    int64_t members = 0;
    for (int32_t p = g->grp_first[q]; ok && p >= 0; p = dfg_next_in_group(g, p)) {
        ok = g->mstart[p] >= w0 && g->mstart[p] < w1 && dfg_rank(g, p) >= 0 &&
             dfg_rank(g, p) < g->n_ranks && (!key || key[p] >= 0);
        members += ok ? participant_weight(g, p, weighted) : 0;
    }
    return ok && members == n_from;
}

/* Pools the arrival jitter of the sampled groups into v (room for every participant):
 * each participant's start less its group's mean start, less the mean of those over the
 * participants of its steady lateness: those of its rank (key NULL) or those with its key
 * (key[p]: an index below the entries of off); with weighted, a participant counts as
 * the ranks it stands for (participant_weight), its value that many times. off and cnt
 * (an entry a rank or a key), zeroed by the caller. Returns the count. */
static size_t
pool_jitter(const dfg *g, int32_t n_from, int32_t n_to, int64_t w0, int64_t w1, const int32_t *key,
            int weighted, double *off, double *cnt, double *v)
{
    size_t m = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (int32_t q = 0; q < g->n_groups; q++) {
            double mean = 0;
            if (!group_sampled(g, q, n_from, n_to, w0, w1, key, weighted))
                continue;
            for (int32_t p = g->grp_first[q]; p >= 0; p = dfg_next_in_group(g, p))
                mean += (double)g->mstart[p] * participant_weight(g, p, weighted) / n_from;
            for (int32_t p = g->grp_first[q]; p >= 0; p = dfg_next_in_group(g, p)) {
                int32_t r = key ? key[p] : dfg_rank(g, p), w = participant_weight(g, p, weighted);
                double dev = (double)g->mstart[p] - mean;
                if (pass == 0) {
                    off[r] += dev * w;
                    cnt[r] += w;
                } else {
                    for (int32_t i = 0; i < w; i++)
                        v[m++] = dev - off[r] / cnt[r];
                }
            }
        }
    }
    return m;
}

/* Most values expected_max_stalled integrates over (more are taken at their quantiles),
 * and the cells of its integral. */
#define STALL_VALUES 512
#define STALL_CELLS 4096

/* The expected maximum of k independent draws of v_I + D (I uniform over the m sorted
 * values v, D 0 with probability 1 - p and else uniform on (0, a], a > 0; p 0: of v_I
 * alone, on the same cells as with p > 0): E[max] = lo +
 * integral from lo to hi of (1 - G(x)^k), G the CDF of one draw, by the midpoint rule
 * over STALL_CELLS cells, with at most STALL_VALUES values (the sorted v at their
 * quantiles). */
static double
expected_max_stalled(const double *v, size_t m, int32_t k, double p, double a)
{
    size_t nv = m < STALL_VALUES ? m : STALL_VALUES;
    double lo = v[0], hi = v[m - 1] + a, dx = (hi - lo) / STALL_CELLS, e = lo;
    for (int c = 0; c < STALL_CELLS; c++) {
        double x = lo + (c + 0.5) * dx, cdf = 0;
        for (size_t i = 0; i < nv; i++) {
            double y = x - v[nv < m ? (size_t)(((double)i + 0.5) * (double)m / (double)nv) : i];
            cdf += y < 0 ? 0 : (1 - p) + p * (y < a ? y / a : 1);
        }
        e += (1 - pow(cdf / (double)nv, k)) * dx;
    }
    return e;
}

/* The wait replay_rank_wait_stalled describes, generalised over what the replayed
 * arrivals already hold: F is learned from g's groups of n_from participants whose
 * communicators have n_nodes ranks (all starting in [w0, w1)), each arrival taken less
 * its steady lateness (its rank's mean, or with key its key's: pool_jitter; n_keys
 * entries; with weighted, a folded class's arrival counts for each of its ranks), and
 * the wait is the expected maximum of n_to draws of F (with the stalls)
 * less that of k_from draws: the latest of the arrivals the replay keeps jittered (the
 * what-if's n_from traced ranks; the typical replay's 1, its ranks' arrivals being each
 * one typical value). Sets g's wait on groups of n_nodes ranks. Returns as
 * replay_rank_wait_stalled. */
static int64_t
rank_wait_of(dfg *g, int32_t n_from, int32_t n_nodes, int32_t n_to, int32_t k_from, int64_t w0,
             int64_t w1, const int32_t *key, size_t n_keys, int weighted, double stall_p,
             double stall_ns)
{
    int64_t rc = 0;
    size_t cap = 0, m = 0;
    double *off = NULL, *cnt = NULL, *v = NULL;
    if (n_from < 2 || n_to < 2 || k_from < 1 || !(stall_p >= 0 && stall_p <= 1) ||
        !(stall_ns >= 0)) {
        rc = -1;
    } else {
        for (int32_t q = 0; q < g->n_groups; q++)
            cap += group_sampled(g, q, n_from, n_nodes, w0, w1, key, weighted) ? (size_t)n_from : 0;
        size_t n_off = key ? n_keys : (size_t)g->n_ranks;
        off = calloc(n_off + 1, sizeof *off);
        cnt = calloc(n_off + 1, sizeof *cnt);
        v = malloc((cap ? cap : 1) * sizeof *v);
        if (!off || !cnt || !v)
            rc = -2;
    }
    if (rc == 0)
        m = pool_jitter(g, n_from, n_nodes, w0, w1, key, weighted, off, cnt, v);
    if (rc == 0 && m < REPLAY_RANK_WAIT_MIN_SAMPLES && stall_p > 0 && stall_ns > 0) {
        v[0] = 0; /* too few arrivals to learn F from (folded ranks): the stalls alone */
        m = 1;
    }
    if (rc == 0 && (m >= REPLAY_RANK_WAIT_MIN_SAMPLES || (m == 1 && stall_p > 0)) &&
        n_to > k_from) {
        double e;
        qsort(v, m, sizeof *v, order_double);
        /* the stalls less their mean, p a / 2: the host-share stretch (hostshare_apply)
         * already gives the ranks' host time its time off the cores on average, so the
         * stalls add only how unevenly they fall on the ranks at a collective. That is
         * taken as the integral with the stalls less the same integral without them (the
         * same values and cells, so the integral's own error cancels) and added to the
         * exact expected_max: never below the jitter's wait, as the true expectation is
         * not (the latest sum is at least the latest v plus a stall independent of it). */
        double spread = 0;
        if (stall_p > 0 && stall_ns > 0)
            spread = expected_max_stalled(v, m, n_to, stall_p, stall_ns) -
                     expected_max_stalled(v, m, n_to, 0, stall_ns) - stall_p * stall_ns / 2;
        e = expected_max(v, m, n_to) + (spread > 0 ? spread : 0) - expected_max(v, m, k_from);
        rc = e > 0 ? (int64_t)llround(e) : 0;
    }
    if (rc >= 0) {
        g->grp_wait_ns = rc;
        g->grp_wait_nranks = n_nodes;
    }
    free(off);
    free(cnt);
    free(v);
    return rc;
}

int64_t
replay_rank_wait(dfg *g, int32_t n_from, int32_t n_to, int64_t w0, int64_t w1)
{
    return replay_rank_wait_stalled(g, n_from, n_to, w0, w1, 0, 0);
}

int64_t
replay_rank_wait_stalled(dfg *g, int32_t n_from, int32_t n_to, int64_t w0, int64_t w1,
                         double stall_p, double stall_ns)
{
    return rank_wait_of(g, n_from, n_to, n_to, n_from, w0, w1, NULL, 0, 0, stall_p, stall_ns);
}

int
replay_compared_window(const replay *rp, int64_t *w0, int64_t *w1)
{
    const int32_t *b;
    int32_t nb = dfg_iterations(&rp->graph, 0, &b);
    int rc = -1;
    if (rp->iter_first >= 0 && rp->iter_last >= rp->iter_first && rp->iter_last + 1 < nb &&
        b[rp->iter_first] >= 0 && b[rp->iter_last + 1] >= 0) {
        *w0 = dfg_mend(&rp->graph, b[rp->iter_first]);
        *w1 = dfg_mend(&rp->graph, b[rp->iter_last + 1]);
        rc = 0;
    }
    return rc;
}

int64_t
fid_rank_wait_typical(const replay *rp, dfg *g, const fid_place *pl, size_t np)
{
    int64_t w0 = 0, w1 = 0, rc = 0;
    size_t n_keys = 0;
    int32_t *key = NULL;
    int none = g->n_ranks < 2 || replay_compared_window(rp, &w0, &w1) != 0;
    g->grp_wait_ns = 0;
    g->grp_wait_nranks = 0;
    /* the steady lateness the typical values keep: each participant's at its place */
    if (!none && !(key = malloc((size_t)(g->n_nodes > 0 ? g->n_nodes : 1) * sizeof *key)))
        rc = -2;
    for (int32_t n = 0; rc == 0 && key && n < g->n_nodes; n++)
        key[n] = -1;
    for (size_t a = 0, z; rc == 0 && key && a < np; a = z, n_keys++) {
        z = fid_place_run_end(pl, np, a);
        for (size_t i = a; i < z; i++)
            key[pl[i].node] = (int32_t)n_keys;
    }
    if (rc == 0 && key)
        rc = rank_wait_of(g, g->n_ranks, g->n_ranks, g->n_ranks, 1, w0, w1, key, n_keys, 1, 0, 0);
    free(key);
    return rc;
}
