/* hostshare.c: ranks sharing a host's CPUs (hostshare.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fnv1a.h"
#include "dprotrace.h"
#include "hmap.h"
#include "hostshare.h"

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

/* Rank r's demand over its compared iterations, in *demand (CPU s per s); 0 when known,
 * 1 when its trace lacks what it needs or the samples cover under half the window
 * (hs->why said), -1 out of memory, -2 malformed samples (hs->why). */
static int
rank_demand(const replay *rp, int32_t r, hostshare *hs, double *demand)
{
    const job_rank *jr = &rp->job.ranks[r];
    const char *text = dpro_reader_meta(jr->reader, "cpu_samples");
    int64_t t0, t1, a, b, m, s;
    cpu_sample *v = NULL;
    size_t n = 0;
    int rc = 1;
    if (!text || dpro_reader_meta_int(jr->reader, "host_cpus", 0) <= 0) {
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
 * gives each rank its host's cores (the most host_cpus of its ranks). Returns 0 or -1. */
static int
index_hosts(const replay *rp, hostshare *hs)
{
    hmap idx;
    int rc = hmap_init(&idx, 16);
    double *most = calloc((size_t)hs->n_ranks + 1, sizeof *most);
    if (rc != 0 || !most)
        rc = -1;
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
        double c = (double)dpro_reader_meta_int(jr->reader, "host_cpus", 0);
        most[k] = c > most[k] ? c : most[k];
    }
    for (int32_t r = 0; rc == 0 && r < hs->n_ranks; r++)
        hs->cores[r] = hs->host[r] >= 0 ? most[hs->host[r]] : 0;
    free(most);
    hmap_free(&idx);
    return rc;
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
    if (!hs->demand || !hs->cores || !hs->host || !hs->factor)
        rc = -1;
    for (int32_t r = 0; rc == 0 && r < hs->n_ranks; r++) {
        hs->demand[r] = -1;
        hs->host[r] = -1;
        hs->factor[r] = 1;
        if (!rp->job.ranks[r].reader)
            continue;
        int k = known ? rank_demand(rp, r, hs, &hs->demand[r]) : 1;
        if (k < 0)
            rc = k;
        known &= k == 0;
        present++;
        hs->mean_demand += k == 0 ? hs->demand[r] : 0;
    }
    if (rc == 0)
        rc = index_hosts(rp, hs);
    hs->known = rc == 0 && known && present > 0;
    hs->mean_demand = hs->known ? hs->mean_demand / present : 0;
    if (hs->known) {
        int32_t *on = calloc((size_t)hs->n_hosts, sizeof *on);
        double *load = calloc((size_t)hs->n_hosts, sizeof *load);
        rc = on && load ? 0 : -1;
        for (int32_t r = 0; rc == 0 && r < hs->n_ranks; r++) {
            if (hs->host[r] < 0)
                continue;
            on[hs->host[r]]++;
            load[hs->host[r]] += hs->demand[r] / hs->cores[r];
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
            sum[hs->host[r]] += hs->demand[r];
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
    free(on);
    free(sum);
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
    return rc;
}

void
hostshare_free(hostshare *hs)
{
    free(hs->demand);
    free(hs->cores);
    free(hs->host);
    free(hs->factor);
    memset(hs, 0, sizeof *hs);
}
