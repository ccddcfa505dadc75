/* hostshare.c: ranks sharing a host's CPUs (hostshare.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fnv1a.h"
#include "dprotrace.h"
#include "hmap.h"
#include "hostshare.h"
#include "order.h"

/* One parsed "T:C" sample of cpu_samples (us). */
typedef struct cpu_sample {
    double t, c;
} cpu_sample;

/* Parses cpu_samples text s into a malloc'd *out of *n samples, times increasing, CPU
 * times not decreasing. Returns 0, -1 out of memory, or k + 2 (k >= 0) when sample k is
 * malformed. */
static int
parse_samples(const char *s, cpu_sample **out, size_t *n)
{
    size_t cap = 1;
    int rc = 0;
    for (const char *p = s; *p; p++)
        cap += *p == ',';
    cpu_sample *v = malloc(cap * sizeof *v);
    *n = 0;
    if (!v)
        rc = -1;
    for (const char *p = s; rc == 0 && *n < cap;) {
        char *end;
        errno = 0;
        long long t = strtoll(p, &end, 10);
        long long c = 0;
        int bad = end == p || *end != ':' || errno;
        if (!bad) {
            p = end + 1;
            c = strtoll(p, &end, 10);
            bad = end == p || (*end != ',' && *end != '\0') || errno || c < 0 ||
                  (*n > 0 && ((double)t <= v[*n - 1].t || (double)c < v[*n - 1].c));
        }
        if (bad) {
            rc = (int)*n + 2;
            break;
        }
        v[*n].t = (double)t;
        v[*n].c = (double)c;
        (*n)++;
        if (*end == '\0')
            break;
        p = end + 1;
    }
    if (rc != 0) {
        free(v);
        v = NULL;
        *n = 0;
    }
    *out = v;
    return rc;
}

/* The CPU time at t (us), linear between the samples around it (n >= 2, t within). */
static double
cpu_at(const cpu_sample *v, size_t n, double t)
{
    size_t lo = 0, hi = n - 1;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (v[mid].t <= t)
            lo = mid;
        else
            hi = mid;
    }
    double span = v[hi].t - v[lo].t;
    return v[lo].c + (span > 0 ? (v[hi].c - v[lo].c) * (t - v[lo].t) / span : 0);
}

/* An interval of host work, ns (graph time). */
typedef struct span {
    int64_t a, b;
} span;

static int
cmp_span(const void *x, const void *y)
{
    const span *p = x, *q = y;
    return (p->a > q->a) - (p->a < q->a);
}

/* The time within rank r's compared iterations during which at least one of its host
 * threads works (the union over its threads of each host call's own duration, at its
 * measured end, and the framework time before it), as a share of the window, in *busy.
 * Returns 0, 1 when the rank has no compared iterations, -1 out of memory. */
static int
rank_busy(const replay *rp, int32_t r, double *busy)
{
    const dfg *g = &rp->graph;
    const int32_t *bnd;
    int32_t rep = dfg_rank_rep(g, r), nb = dfg_iterations(g, r, &bnd);
    size_t n = 0, cap = 0;
    span *v = NULL;
    int rc = rp->iter_first >= 1 && rp->iter_last + 1 < nb && bnd[rp->iter_first] >= 0 &&
                     bnd[rp->iter_last + 1] >= 0
                 ? 0
                 : 1;
    int64_t w0 = rc == 0 ? dfg_mend(g, bnd[rp->iter_first]) : 0;
    int64_t w1 = rc == 0 ? dfg_mend(g, bnd[rp->iter_last + 1]) : 0;
    for (int32_t q = 0; rc == 0 && q < g->n_res; q++) {
        if (g->res_rank[q] != rep || g->res_kind[q] != DFG_RES_THREAD)
            continue;
        for (int32_t m = g->res_first[q]; rc == 0 && m >= 0; m = g->next_on_res[m]) {
            int64_t e = dfg_mend(g, m), d = dfg_dur(g, m), gap = dfg_gap(g, m);
            if (g->flags[m] & DFG_F_REMOVED || e < w0 || g->mstart[m] - gap > w1)
                continue;
            if (n + 2 > cap) {
                span *nv = realloc(v, (cap = cap ? 2 * cap : 1024) * sizeof *v);
                if (!nv) {
                    rc = -1;
                    break;
                }
                v = nv;
            }
            v[n++] = (span){e - d, e};
            if (!(g->flags[m] & DFG_F_WAKEUP))
                v[n++] = (span){g->mstart[m] - gap, g->mstart[m]};
        }
    }
    if (rc == 0 && n > 0)
        qsort(v, n, sizeof *v, cmp_span);
    int64_t total = 0, a = 0, b = -1;
    for (size_t i = 0; rc == 0 && i <= n; i++) {
        int64_t x0 = i < n ? (v[i].a > w0 ? v[i].a : w0) : INT64_MAX;
        int64_t x1 = i < n ? (v[i].b < w1 ? v[i].b : w1) : INT64_MAX;
        if (i < n && x1 <= x0)
            continue;
        if (i == n || x0 > b) {
            total += b > a ? b - a : 0;
            a = x0;
            b = x1;
        } else if (x1 > b) {
            b = x1;
        }
    }
    *busy = rc == 0 && w1 > w0 ? (double)total / (double)(w1 - w0) : 0;
    free(v);
    return rc;
}

/* One host node's time in a compared iteration: its iteration, its place in the
 * iteration on its thread, its duration plus gap (ns; a woken call's without its gap,
 * the wake-up latency, as rank_busy counts it). */
typedef struct host_time {
    int32_t iter, pos, node;
    double t;
} host_time;

static int
cmp_host_time(const void *x, const void *y)
{
    const host_time *p = x, *q = y;
    return p->pos != q->pos ? (p->pos > q->pos) - (p->pos < q->pos) : (p->t > q->t) - (p->t < q->t);
}

/* Appends to hs->stall and hs->stall_node (hs->n_stall, room hs->cap_stall) rank r's
 * stalls on thread q and their nodes: each host node's duration plus gap less the median
 * of those at its place (the same call of every compared iteration), where that excess is
 * HOSTSHARE_STALL_MIN_NS or more (the thread lost its core for a timeslice; a place needs
 * 3 iterations). Returns 0 or -1 out of memory. */
static int
thread_stalls(const replay *rp, int32_t q, const int32_t *bnd, hostshare *hs)
{
    const dfg *g = &rp->graph;
    int32_t k = rp->iter_first, pos = 0;
    size_t n = 0, cap = 256;
    host_time *v = malloc(cap * sizeof *v);
    int rc = v ? 0 : -1;
    for (int32_t m = g->res_first[q]; rc == 0 && m >= 0; m = g->next_on_res[m]) {
        if (g->flags[m] & DFG_F_REMOVED || g->mstart[m] < dfg_mend(g, bnd[rp->iter_first]))
            continue;
        while (k <= rp->iter_last && g->mstart[m] >= dfg_mend(g, bnd[k + 1])) {
            k++;
            pos = 0;
        }
        if (k > rp->iter_last)
            break;
        if (n == cap) {
            host_time *nv = realloc(v, (cap *= 2) * sizeof *v);
            rc = nv ? 0 : -1;
            v = nv ? nv : v;
        }
        if (rc == 0)
            v[n++] = (host_time){k, pos++, m,
                                 (double)dfg_dur(g, m) +
                                     (g->flags[m] & DFG_F_WAKEUP ? 0 : (double)dfg_gap(g, m))};
    }
    if (rc == 0)
        qsort(v, n, sizeof *v, cmp_host_time);
    for (size_t i = 0, j; rc == 0 && i < n; i = j) {
        for (j = i; j < n && v[j].pos == v[i].pos; j++)
            ;
        double med = v[i + (j - i) / 2].t;
        for (size_t x = i; rc == 0 && j - i >= 3 && x < j; x++) {
            if (v[x].t - med < HOSTSHARE_STALL_MIN_NS)
                continue;
            if (hs->n_stall == hs->cap_stall) {
                size_t c = hs->cap_stall ? 2 * hs->cap_stall : 64;
                double *ns = realloc(hs->stall, c * sizeof *ns);
                hs->stall = ns ? ns : hs->stall;
                int32_t *nn = ns ? realloc(hs->stall_node, c * sizeof *nn) : NULL;
                hs->stall_node = nn ? nn : hs->stall_node;
                rc = ns && nn ? 0 : -1;
                hs->cap_stall = rc == 0 ? c : hs->cap_stall;
            }
            if (rc == 0) {
                hs->stall_node[hs->n_stall] = v[x].node;
                hs->stall[hs->n_stall++] = v[x].t - med;
            }
        }
    }
    free(v);
    return rc;
}

/* Appends rank r's stalls (thread_stalls on each of its host threads) to hs->stall and
 * its compared window's length (ns) to hs->stall_window_ns, and takes them out of its
 * busy share hs->busy[r] (a thread off its core does not work; rank_busy counted them).
 * Returns 0, or -1 out of memory. */
static int
rank_stalls(const replay *rp, int32_t r, hostshare *hs)
{
    const dfg *g = &rp->graph;
    const int32_t *bnd;
    int32_t rep = dfg_rank_rep(g, r), nb = dfg_iterations(g, r, &bnd);
    int rc = 0, ok = rep == r && rp->iter_first >= 1 && rp->iter_last + 1 < nb;
    for (int32_t k = rp->iter_first; ok && k <= rp->iter_last + 1; k++)
        ok = bnd[k] >= 0;
    size_t first = hs->n_stall;
    for (int32_t q = 0; ok && rc == 0 && q < g->n_res; q++)
        if (g->res_rank[q] == rep && g->res_kind[q] == DFG_RES_THREAD)
            rc = thread_stalls(rp, q, bnd, hs);
    double win =
        ok ? (double)(dfg_mend(g, bnd[rp->iter_last + 1]) - dfg_mend(g, bnd[rp->iter_first])) : 0;
    double lost = 0;
    for (size_t i = first; rc == 0 && i < hs->n_stall; i++)
        lost += hs->stall[i];
    if (rc == 0 && win > 0) {
        hs->stall_window_ns += win;
        hs->busy[r] = hs->busy[r] > lost / win ? hs->busy[r] - lost / win : 0;
    }
    return rc;
}

/* Rank r's demand over its compared iterations, in *demand (CPU s per s); 0 when known,
 * 1 when its trace lacks what it needs or the samples cover under half the window
 * (hs->why said), -1 out of memory, -2 malformed samples (hs->why). */
static int
rank_demand(const replay *rp, int32_t r, hostshare *hs, double *demand)
{
    const job_rank *jr = &rp->job.ranks[r];
    const char *text = job_rank_meta(jr, JOB_META_CPU_SAMPLES);
    int64_t t0, t1, a, b, m, s;
    cpu_sample *v = NULL;
    size_t n = 0;
    int rc = 1;
    if (!text || job_rank_meta_int(jr, JOB_META_HOST_CPUS, 0) <= 0) {
        snprintf(hs->why, sizeof hs->why, "%s: no host_cpus and cpu_samples (an older collector)",
                 jr->path);
    } else if ((rc = parse_samples(text, &v, &n)) > 1) {
        snprintf(hs->why, sizeof hs->why, "%s: meta cpu_samples: sample %d is not T:C", jr->path,
                 rc - 2);
        rc = -2;
    } else if (rc == 0 && (replay_iteration_times(rp, r, rp->iter_first, &t0, &a, &m, &s) != 0 ||
                           replay_iteration_times(rp, r, rp->iter_last, &b, &t1, &m, &s) != 0)) {
        snprintf(hs->why, sizeof hs->why, "rank %d: no compared iterations", r);
        rc = 1;
    } else if (rc == 0) {
        double w0 = (double)t0 / 1e3, w1 = (double)t1 / 1e3;
        double lo = n > 0 && v[0].t > w0 ? v[0].t : w0;
        double hi = n > 0 && v[n - 1].t < w1 ? v[n - 1].t : w1;
        if (n < 2 || !(w1 > w0) || hi - lo < 0.5 * (w1 - w0)) {
            snprintf(hs->why, sizeof hs->why,
                     "%s: cpu_samples cover under half of the compared iterations", jr->path);
            rc = 1;
        } else {
            *demand = (cpu_at(v, n, hi) - cpu_at(v, n, lo)) / (hi - lo);
        }
    }
    free(v);
    return rc;
}

/* Indexes the present ranks' hosts (hs->host, hs->n_hosts) by their host meta row and
 * gives each host its CPUs (hs->host_cpus, hs->hosts_listed, hostshare_cpus_count of its
 * ranks' lists: host_cpu_list_end where a rank has a usable one, else host_cpu_list;
 * hs->cpus_note says the first list not used) and each rank its host's (hs->cores).
 * Returns 0 or -1 out of memory. */
static int
index_hosts(const replay *rp, hostshare *hs)
{
    hmap idx;
    int rc = hmap_init(&idx, 16);
    hostshare_cpus *cpus = NULL;
    uint64_t set[HOSTSHARE_CPU_MAX / 64];
    char why[160];
    for (int32_t r = 0; rc == 0 && r < hs->n_ranks; r++) {
        const job_rank *jr = &rp->job.ranks[r];
        if (!jr->reader)
            continue;
        const char *h = jr->host ? jr->host : "";
        uint64_t key = dpro_fnv1a(h, strlen(h), DPRO_FNV1A_INIT);
        int32_t k = hmap_get(&idx, key, -1);
        if (k < 0 && (rc = hmap_put(&idx, key, k = hs->n_hosts++)) != 0)
            break;
        hs->host[r] = k;
    }
    if (rc == 0) {
        cpus = calloc((size_t)hs->n_hosts + 1, sizeof *cpus);
        hs->host_cpus = calloc((size_t)hs->n_hosts + 1, sizeof *hs->host_cpus);
        rc = cpus && hs->host_cpus ? 0 : -1;
    }
    for (int32_t r = 0; rc == 0 && r < hs->n_ranks; r++) {
        const job_rank *jr = &rp->job.ranks[r];
        if (hs->host[r] < 0)
            continue;
        /* the CPUs at the file's end where the job rebound itself after the collector's
         * start (its iterations ran there), else those at its start */
        const char *list = job_rank_meta(jr, JOB_META_HOST_CPU_LIST_END);
        int64_t count = list ? hostshare_parse_cpu_list(list, set, why, sizeof why) : -1;
        if (list && count < 0 && !hs->cpus_note[0])
            snprintf(hs->cpus_note, sizeof hs->cpus_note,
                     "%s: meta host_cpu_list_end not used: %s (host_cpu_list taken)", jr->path,
                     why);
        if (count < 0) {
            list = job_rank_meta(jr, JOB_META_HOST_CPU_LIST);
            count = job_rank_meta_int(jr, JOB_META_HOST_CPUS, 0);
        }
        if (hostshare_cpus_add(&cpus[hs->host[r]], count, list, why, sizeof why) != 0 &&
            !hs->cpus_note[0])
            snprintf(hs->cpus_note, sizeof hs->cpus_note,
                     "%s: meta host_cpu_list not used: %s (its host's CPUs taken as the most "
                     "host_cpus of its ranks)",
                     jr->path, why);
    }
    for (int32_t k = 0; rc == 0 && k < hs->n_hosts; k++) {
        hs->host_cpus[k] = (double)hostshare_cpus_count(&cpus[k]);
        hs->hosts_listed += cpus[k].listed == cpus[k].ranks;
    }
    for (int32_t r = 0; rc == 0 && r < hs->n_ranks; r++)
        hs->cores[r] = hs->host[r] >= 0 ? hs->host_cpus[hs->host[r]] : 0;
    free(cpus);
    hmap_free(&idx);
    return rc;
}

/* Rank r's CPU demand while its host works: its demand over the share of the window its
 * host threads work (all of it when that share is not known). */
static double
burst(const hostshare *hs, int32_t r)
{
    return hs->busy[r] > 0 ? hs->demand[r] / hs->busy[r] : hs->demand[r];
}

double
hostshare_base_slice_ns(double cores)
{
    double c = cores < 1 ? 1 : cores < 8 ? cores : 8;
    return 750e3 * (1 + floor(log2(c)));
}

int
hostshare_slice(const double *stall, size_t n, double cores, double *slice_ns, size_t *n_long)
{
    double base = hostshare_base_slice_ns(cores);
    double *v = n > 0 ? malloc(n * sizeof *v) : NULL;
    size_t k = 0;
    int rc = n > 0 && !v ? -1 : 0;
    for (size_t i = 0; rc == 0 && i < n; i++)
        if (stall[i] <= base)
            v[k++] = stall[i];
    if (rc == 0 && k > 0)
        qsort(v, k, sizeof *v, order_double);
    if (rc == 0 && k >= HOSTSHARE_STALL_MIN_COUNT)
        rc = 1;
    else if (rc == 0 && k >= 2)
        rc = 2;
    /* from fewer than HOSTSHARE_STALL_MIN_COUNT, the base slice is one more value, above
     * them all: the upper median of the k + 1 is v[(k + 1) / 2] */
    *slice_ns = rc == 1 ? v[k / 2] : rc == 2 ? v[(k + 1) / 2] : base;
    *n_long = rc >= 0 ? n - k : 0;
    free(v);
    return rc;
}

/* hs->slice_ns, hs->slice_learned and hs->n_stall_long from the traced stalls
 * (hostshare_slice on the most CPUs of a host). Returns 0, or -1 out of memory. */
static int
learn_slice(hostshare *hs)
{
    double cores = 1;
    for (int32_t r = 0; r < hs->n_ranks; r++)
        cores = hs->cores[r] > cores ? hs->cores[r] : cores;
    int rc = hostshare_slice(hs->stall, hs->n_stall, cores, &hs->slice_ns, &hs->n_stall_long);
    hs->slice_learned = rc > 0 ? rc : 0;
    return rc < 0 ? -1 : 0;
}

int
hostshare_measure(const replay *rp, hostshare *hs)
{
    int rc = 0, known = 1;
    int32_t present = 0;
    memset(hs, 0, sizeof *hs);
    hs->n_ranks = rp->job.n_ranks;
    size_t nr = (size_t)hs->n_ranks + 1;
    hs->demand = malloc(nr * sizeof *hs->demand);
    hs->cores = calloc(nr, sizeof *hs->cores);
    hs->host = malloc(nr * sizeof *hs->host);
    hs->factor = malloc(nr * sizeof *hs->factor);
    hs->busy = calloc(nr, sizeof *hs->busy);
    if (!hs->demand || !hs->cores || !hs->host || !hs->factor || !hs->busy)
        rc = -1;
    for (int32_t r = 0; rc == 0 && r < hs->n_ranks; r++) {
        hs->demand[r] = -1;
        hs->host[r] = -1;
        hs->factor[r] = 1;
        if (!rp->job.ranks[r].reader)
            continue;
        int k = known ? rank_demand(rp, r, hs, &hs->demand[r]) : 1;
        if (k == 0 && (rank_busy(rp, r, &hs->busy[r]) < 0 || rank_stalls(rp, r, hs) < 0))
            k = -1;
        if (k < 0)
            rc = k;
        hs->mean_busy += k == 0 ? hs->busy[r] : 0;
        known &= k == 0;
        present++;
        hs->mean_demand += k == 0 ? hs->demand[r] : 0;
    }
    if (rc == 0)
        rc = index_hosts(rp, hs);
    if (rc == 0)
        rc = learn_slice(hs);
    hs->known = rc == 0 && known && present > 0;
    hs->mean_demand = hs->known ? hs->mean_demand / present : 0;
    hs->mean_busy = hs->known ? hs->mean_busy / present : 0;
    if (hs->known) {
        int32_t *on = calloc((size_t)hs->n_hosts, sizeof *on);
        double *load = calloc((size_t)hs->n_hosts, sizeof *load);
        rc = on && load ? 0 : -1;
        for (int32_t r = 0; rc == 0 && r < hs->n_ranks; r++) {
            if (hs->host[r] < 0)
                continue;
            on[hs->host[r]]++;
            load[hs->host[r]] += burst(hs, r) / hs->cores[r];
        }
        for (int32_t k = 0; rc == 0 && k < hs->n_hosts; k++) {
            hs->per_host_traced = on[k] > hs->per_host_traced ? on[k] : hs->per_host_traced;
            hs->load_traced = load[k] > hs->load_traced ? load[k] : hs->load_traced;
        }
        free(on);
        free(load);
    }
    hs->known = rc == 0 && hs->known;
    return rc;
}

int
hostshare_at(hostshare *hs, int32_t per_host, int32_t n_to)
{
    int rc = hs->known && per_host >= 0 && per_host <= n_to ? 0 : -1;
    int32_t *on = rc == 0 ? calloc((size_t)hs->n_hosts, sizeof *on) : NULL;
    double *sum = rc == 0 ? calloc((size_t)hs->n_hosts, sizeof *sum) : NULL;
    if (rc == 0 && (!on || !sum))
        rc = -1;
    for (int32_t r = 0; rc == 0 && r < hs->n_ranks; r++) {
        if (hs->host[r] >= 0) {
            on[hs->host[r]]++;
            sum[hs->host[r]] += burst(hs, r);
        }
    }
    hs->per_host_to = per_host ? per_host : hs->per_host_traced;
    hs->load_to = 0;
    hs->factor_max = 1;
    for (int32_t r = 0; rc == 0 && r < hs->n_ranks; r++) {
        int32_t k = hs->host[r];
        hs->factor[r] = 1;
        if (k < 0)
            continue;
        double traced = sum[k] / hs->cores[r];
        double to = per_host ? per_host * (sum[k] / on[k]) / hs->cores[r] : traced;
        hs->factor[r] = (to > 1 ? to : 1) / (traced > 1 ? traced : 1);
        hs->load_to = to > hs->load_to ? to : hs->load_to;
        hs->factor_max = hs->factor[r] > hs->factor_max ? hs->factor[r] : hs->factor_max;
    }
    double to = hs->load_to > 1 ? hs->load_to : 1, tr = hs->load_traced > 1 ? hs->load_traced : 1;
    hs->stall_p = rc == 0 && to > tr ? 1 - tr / to : 0;
    hs->stall_ns = rc == 0 && to > tr ? (to - tr) * hs->slice_ns : 0;
    free(on);
    free(sum);
    return rc;
}

/* Takes back the stretch of traced stall k in g, where hostshare_apply scaled its node by
 * its rank's factor f: the node keeps its work scaled and its stall x as traced, its time
 * (duration plus gap, a woken call's duration alone, as thread_stalls measured it) less x
 * (f - 1), shared out over what was scaled. Returns 0, or -1 when a duration overflows. */
static int
unstretch_stall(const hostshare *hs, size_t k, dfg *g)
{
    int32_t n = hs->stall_node[k], r = n >= 0 && n < g->n_nodes ? dfg_rank(g, n) : -1;
    int rc = 0;
    if (r >= 0 && r < hs->n_ranks && hs->factor[r] != 1 && g->kind[n] == DFG_HOST &&
        !(g->flags[n] & DFG_F_REMOVED)) {
        int woken = (g->flags[n] & DFG_F_WAKEUP) != 0;
        double t = (double)dfg_dur(g, n) + (woken ? 0 : (double)dfg_gap(g, n));
        double keep = t > 0 ? (t - hs->stall[k] * (hs->factor[r] - 1)) / t : 1;
        keep = keep > 0 ? keep : 0;
        if (woken)
            rc = dfg_set_dur(g, n, (int64_t)((double)dfg_dur(g, n) * keep + 0.5)) == 0 ? 0 : -1;
        else
            rc = replay_scale_host_node(g, n, keep);
    }
    return rc;
}

int64_t
hostshare_apply(const hostshare *hs, dfg *g)
{
    int64_t rc = 0;
    for (int32_t n = 0; rc >= 0 && n < g->n_nodes; n++) {
        int32_t r = dfg_rank(g, n);
        if ((g->flags[n] & DFG_F_REMOVED) || g->kind[n] != DFG_HOST || r < 0 || r >= hs->n_ranks ||
            hs->factor[r] == 1)
            continue;
        rc = replay_scale_host_node(g, n, hs->factor[r]) == 0 ? rc + 1 : -1;
    }
    for (size_t k = 0; rc >= 0 && k < hs->n_stall; k++)
        rc = unstretch_stall(hs, k, g) == 0 ? rc : -1;
    return rc;
}

void
hostshare_free(hostshare *hs)
{
    free(hs->demand);
    free(hs->cores);
    free(hs->host);
    free(hs->factor);
    free(hs->busy);
    free(hs->host_cpus);
    free(hs->stall);
    free(hs->stall_node);
    memset(hs, 0, sizeof *hs);
}
