/*
 * workload.c: annotate a replayed job for the optimizer (see workload.h).
 */
#define PR_FMT "optimizer"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpro_log.h"
#include "dprotrace.h"
#include "optimizer/workload.h"

#define NS_PER_US 1000.0

void
workload_default_options(workload_options *o)
{
    o->short_kernel_us = 50;
    o->kernel_fixed_us = 3;
    o->recompute_keep = 0.125;
    o->kernel_samples = NULL;
    o->n_kernel_samples = 0;
}

static int
cmp_sample(const void *pa, const void *pb)
{
    const workload_kernel_sample *a = pa, *b = pb;
    if (a->key != b->key)
        return a->key < b->key ? -1 : 1;
    if (a->threads != b->threads)
        return a->threads < b->threads ? -1 : 1;
    return (a->dur_ns > b->dur_ns) - (a->dur_ns < b->dur_ns);
}

/* Fit of one kernel name over its m thread counts x[] and median durations y[]; returns
 * 1 and the intercept, slope and weight (inverse variance of the intercept), or 0 when
 * the name does not qualify (workload.h). */
static int
fit_one_name(const double *x, const double *y, int32_t m, double *c0, double *c1, double *wt)
{
    if (m < WORKLOAD_FIT_MIN_SIZES || x[m - 1] < 2 * x[0])
        return 0;
    double mx = 0, my = 0;
    for (int32_t j = 0; j < m; j++) {
        mx += x[j];
        my += y[j];
    }
    mx /= m;
    my /= m;
    double sxx = 0, sxy = 0;
    for (int32_t j = 0; j < m; j++) {
        sxx += (x[j] - mx) * (x[j] - mx);
        sxy += (x[j] - mx) * (y[j] - my);
    }
    if (sxx <= 0 || sxy <= 0)
        return 0;
    *c1 = sxy / sxx;
    *c0 = my - *c1 * mx;
    double rss = 0;
    for (int32_t j = 0; j < m; j++) {
        double r = y[j] - (*c0 + *c1 * x[j]);
        rss += r * r;
    }
    double s2 = m > 2 ? rss / (m - 2) : rss;
    double floor = 0.01 * y[m / 2];
    *wt = 1.0 / (s2 * (1.0 / m + mx * mx / sxx) + floor * floor + 1e-9);
    return 1;
}

int32_t
workload_fit_fixed_cost(workload_kernel_sample *s, size_t n, workload_fixed_fit *fit)
{
    memset(fit, 0, sizeof *fit);
    if (!s || n == 0)
        return 0;
    qsort(s, n, sizeof *s, cmp_sample);
    double *x = malloc(sizeof *x * n), *y = malloc(sizeof *y * n);
    if (!x || !y) {
        free(x);
        free(y);
        return 0;
    }
    double sw = 0, sc0 = 0, sc1 = 0;
    for (size_t a = 0; a < n;) {
        size_t b = a;
        while (b < n && s[b].key == s[a].key)
            b++;
        /* samples [a, b) of one name: the median duration of each thread count */
        int32_t m = 0;
        for (size_t i = a; i < b;) {
            size_t j = i;
            while (j < b && s[j].threads == s[i].threads)
                j++;
            if (s[i].threads > 0) {
                x[m] = s[i].threads;
                size_t mid = i + (j - i) / 2;
                y[m] = (j - i) % 2 ? (double)s[mid].dur_ns
                                   : 0.5 * ((double)s[mid - 1].dur_ns + (double)s[mid].dur_ns);
                m++;
            }
            i = j;
        }
        double c0, c1, wt;
        if (fit_one_name(x, y, m, &c0, &c1, &wt)) {
            fit->names++;
            sw += wt;
            sc0 += wt * c0;
            sc1 += wt * c1;
        }
        a = b;
    }
    free(x);
    free(y);
    if (fit->names > 0) {
        fit->c0_ns = sc0 / sw > 0 ? sc0 / sw : 0;
        fit->slope_ns = sc1 / sw;
    }
    return fit->names;
}

static int
is_device(const dfg *g, int32_t n)
{
    return g->kind[n] == DFG_KERNEL || g->kind[n] == DFG_MEMCPY || g->kind[n] == DFG_MEMSET;
}

static int
alive(const dfg *g, int32_t n)
{
    return !(g->flags[n] & DFG_F_REMOVED);
}

static int
name_has(const dfg *g, int32_t n, const char *part)
{
    return strstr(dfg_name(g, g->name[n]), part) != NULL;
}

/* Per-rank facts gathered on the way. */
typedef struct rank_info {
    int32_t main_thread, bwd_thread, compute_stream;
    int32_t n_iters;    /* boundaries */
    int64_t *first_bwd; /* per iteration: start of the first backward launch, or -1 */
} rank_info;

/* Iteration index of time t against the boundary start times bt[0..nb-1]. */
static int32_t
iteration_of(const int64_t *bt, int32_t nb, int64_t t)
{
    if (t < 0 || nb <= 0 || t < bt[0])
        return -1;
    int32_t lo = 0, hi = nb - 1; /* last j with bt[j] <= t */
    while (lo < hi) {
        int32_t mid = (lo + hi + 1) / 2;
        if (bt[mid] <= t)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

static int
find_threads_and_iterations(workload *w, const sim_result *base, rank_info *ri)
{
    dfg *g = w->g;
    int32_t n = g->n_nodes;
    int64_t *launch_count = calloc((size_t)g->n_res + 1, sizeof *launch_count);
    int64_t *bt = malloc(sizeof *bt * (size_t)(n > 0 ? n : 1));
    if (!launch_count || !bt) {
        free(launch_count);
        free(bt);
        return -1;
    }
    for (int32_t d = 0; d < n; d++)
        if (alive(g, d) && g->kind[d] != DFG_HOST && g->launch[d] >= 0)
            launch_count[g->res[g->launch[d]]]++;
    for (int32_t r = 0; r < g->n_ranks; r++) {
        const int32_t *bn;
        int32_t nb = dfg_iterations(g, r, &bn);
        rank_info *k = &ri[r];
        k->main_thread = k->bwd_thread = k->compute_stream = -1;
        k->n_iters = nb;
        if (nb > 0) {
            int32_t b0 = bn[0];
            if (g->kind[b0] != DFG_HOST && g->launch[b0] >= 0)
                b0 = g->launch[b0];
            if (g->kind[b0] == DFG_HOST)
                k->main_thread = g->res[b0];
        }
        int64_t best = 0;
        for (int32_t q = 0; q < g->n_res; q++)
            if (g->res_rank[q] == r && g->res_kind[q] == DFG_RES_THREAD && q != k->main_thread &&
                launch_count[q] > best) {
                best = launch_count[q];
                k->bwd_thread = q;
            }
        if (k->main_thread < 0) {
            /* no host boundary: the thread that launches the most is the main one */
            best = 0;
            for (int32_t q = 0; q < g->n_res; q++)
                if (g->res_rank[q] == r && g->res_kind[q] == DFG_RES_THREAD &&
                    launch_count[q] > best) {
                    best = launch_count[q];
                    k->main_thread = q;
                }
            if (k->bwd_thread == k->main_thread)
                k->bwd_thread = -1;
        }
        k->first_bwd = malloc(sizeof *k->first_bwd * (size_t)(nb > 0 ? nb : 1));
        if (!k->first_bwd) {
            free(launch_count);
            free(bt);
            return -1;
        }
        for (int32_t j = 0; j < nb; j++) {
            bt[j] = base->start[bn[j]];
            k->first_bwd[j] = -1;
        }
        /* iterations of host nodes, then of the device nodes they launched */
        for (int32_t q = 0; q < g->n_res; q++) {
            if (g->res_rank[q] != r || g->res_kind[q] != DFG_RES_THREAD)
                continue;
            for (int32_t m = g->res_first[q]; m >= 0; m = g->next_on_res[m])
                w->iter[m] = iteration_of(bt, nb, base->start[m]);
        }
        for (int32_t q = 0; q < g->n_res; q++) {
            if (g->res_rank[q] != r || g->res_kind[q] != DFG_RES_STREAM)
                continue;
            for (int32_t m = g->res_first[q]; m >= 0; m = g->next_on_res[m])
                w->iter[m] = g->launch[m] >= 0 ? w->iter[g->launch[m]]
                                               : iteration_of(bt, nb, base->start[m]);
        }
    }
    free(launch_count);
    free(bt);
    return 0;
}

static void
assign_phases(workload *w, const sim_result *base, rank_info *ri)
{
    dfg *g = w->g;
    /* first backward launch of every (rank, iteration) */
    for (int32_t h = 0; h < g->n_nodes; h++) {
        if (!alive(g, h) || g->kind[h] != DFG_HOST)
            continue;
        rank_info *k = &ri[dfg_rank(g, h)];
        int32_t it = w->iter[h];
        if (g->res[h] != k->bwd_thread || it < 0 || it >= k->n_iters)
            continue;
        if (g->launched_off[h + 1] == g->launched_off[h])
            continue;
        if (k->first_bwd[it] < 0 || base->start[h] < k->first_bwd[it])
            k->first_bwd[it] = base->start[h];
    }
    for (int32_t d = 0; d < g->n_nodes; d++) {
        w->phase[d] = WL_OTHER;
        if (!alive(g, d))
            continue;
        if (g->kind[d] == DFG_COLL) {
            w->phase[d] = WL_COMM;
            continue;
        }
        if (!is_device(g, d) || g->launch[d] < 0)
            continue;
        rank_info *k = &ri[dfg_rank(g, d)];
        int32_t h = g->launch[d], t = g->res[h], it = w->iter[d];
        if (t == k->bwd_thread)
            w->phase[d] = WL_BACKWARD;
        else if (t == k->main_thread) {
            int64_t fb = (it >= 0 && it < k->n_iters) ? k->first_bwd[it] : -1;
            w->phase[d] = (fb >= 0 && base->start[h] >= fb) ? WL_OPTIMIZER : WL_FORWARD;
        }
    }
    /* compute stream: the stream with the most forward and backward kernels */
    int64_t *cnt = calloc((size_t)g->n_res + 1, sizeof *cnt);
    if (!cnt)
        return;
    for (int32_t d = 0; d < g->n_nodes; d++)
        if (alive(g, d) && (w->phase[d] == WL_FORWARD || w->phase[d] == WL_BACKWARD))
            cnt[g->res[d]]++;
    for (int32_t r = 0; r < g->n_ranks; r++) {
        int64_t best = 0;
        for (int32_t q = 0; q < g->n_res; q++)
            if (g->res_rank[q] == r && g->res_kind[q] == DFG_RES_STREAM && cnt[q] > best) {
                best = cnt[q];
                ri[r].compute_stream = q;
            }
    }
    free(cnt);
    for (int32_t d = 0; d < g->n_nodes; d++)
        w->on_compute[d] = alive(g, d) && g->res[d] == ri[dfg_rank(g, d)].compute_stream;
}

static int
find_chains(workload *w)
{
    dfg *g = w->g;
    int64_t short_ns = (int64_t)(w->opt.short_kernel_us * NS_PER_US);
    int32_t n_chain_nodes = 0;
    w->chain_off = malloc(sizeof *w->chain_off * (size_t)(g->n_nodes + 1));
    w->chain_node = malloc(sizeof *w->chain_node * (size_t)(g->n_nodes + 1));
    if (!w->chain_off || !w->chain_node)
        return -1;
    w->n_chains = 0;
    w->chain_off[0] = 0;
    for (int32_t q = 0; q < g->n_res; q++) {
        if (g->res_kind[q] != DFG_RES_STREAM)
            continue;
        int32_t run_len = 0, prev = -1;
        for (int32_t m = g->res_first[q];; m = g->next_on_res[m]) {
            int cand = m >= 0 && g->kind[m] == DFG_KERNEL && w->base_dur[m] <= short_ns &&
                       g->launch[m] >= 0;
            /* back to back: consecutive launch calls, or one graph launch */
            if (cand && prev >= 0 && g->name[m] == g->name[prev] &&
                (g->next_on_res[g->launch[prev]] == g->launch[m] ||
                 g->launch[prev] == g->launch[m])) {
                w->chain_node[n_chain_nodes++] = m;
                run_len++;
                prev = m;
                continue;
            }
            /* the run that ended at prev is a chain when it holds two kernels or more */
            if (run_len >= 2)
                w->chain_off[++w->n_chains] = n_chain_nodes;
            else
                n_chain_nodes -= run_len;
            if (m < 0)
                break;
            run_len = cand ? 1 : 0;
            prev = cand ? m : -1;
            if (cand)
                w->chain_node[n_chain_nodes++] = m;
        }
    }
    w->chain_kernels = n_chain_nodes;
    if (w->n_chains == 0)
        snprintf(w->fusion_why, sizeof w->fusion_why,
                 "no run of two or more kernels of at most %.0f us launched back to back",
                 w->opt.short_kernel_us);
    return 0;
}

/* Collectives launched by the backward thread of rank r in iteration it, in launch
 * order, into out (returns the count). */
static int32_t
iteration_collectives(const workload *w, const rank_info *k, int32_t it, int32_t *out)
{
    const dfg *g = w->g;
    int32_t c = 0;
    int32_t thread = k->bwd_thread >= 0 ? k->bwd_thread : k->main_thread;
    if (thread < 0)
        return 0;
    for (int32_t h = g->res_first[thread]; h >= 0; h = g->next_on_res[h]) {
        if (w->iter[h] != it)
            continue;
        for (int32_t i = g->launched_off[h]; i < g->launched_off[h + 1]; i++) {
            int32_t d = g->launched[i];
            /* gradient all-reduces only: point-to-point exchanges (pipeline stages) are
             * groups too, but no bucket knob moves them */
            if (g->kind[d] == DFG_COLL && g->group[d] >= 0 &&
                g->grp_op[g->group[d]] != DPRO_COLL_SEND &&
                g->grp_op[g->group[d]] != DPRO_COLL_RECV)
                out[c++] = d;
        }
    }
    return c;
}

static int
find_units(workload *w, rank_info *ri)
{
    dfg *g = w->g;
    int32_t *seq = malloc(sizeof *seq * (size_t)(g->n_nodes + 1));
    w->group_unit = malloc(sizeof *w->group_unit * (size_t)(g->n_groups + 1));
    w->group_hosts_off = calloc((size_t)g->n_groups + 1, sizeof *w->group_hosts_off);
    if (!seq || !w->group_unit || !w->group_hosts_off) {
        free(seq);
        return -1;
    }
    for (int32_t q = 0; q < g->n_groups; q++)
        w->group_unit[q] = -1;
    /* reference: the first rank covering the first compared iteration */
    int32_t ref_n = -1;
    for (int32_t r = 0; r < g->n_ranks && ref_n < 0; r++) {
        if (w->iter_first >= ri[r].n_iters)
            continue;
        ref_n = iteration_collectives(w, &ri[r], w->iter_first, seq);
        if (ref_n > 0) {
            w->unit_bytes = malloc(sizeof *w->unit_bytes * (size_t)ref_n);
            if (!w->unit_bytes) {
                free(seq);
                return -1;
            }
            w->n_units = ref_n;
            for (int32_t u = 0; u < ref_n; u++)
                w->unit_bytes[u] = g->grp_bytes[g->group[seq[u]]];
            w->coll_op = g->grp_op[g->group[seq[0]]];
            w->coll_nranks = g->grp_nranks[g->group[seq[0]]];
        }
    }
    if (w->n_units < 1) { /* one unit: tensor partition can still split it */
        snprintf(w->tensor_why, sizeof w->tensor_why,
                 "no gradient all-reduce launched by the backward");
        free(seq);
        return 0;
    }
    int mismatch = 0;
    for (int32_t r = 0; r < g->n_ranks; r++) {
        for (int32_t it = 0; it < ri[r].n_iters; it++) {
            int32_t c = iteration_collectives(w, &ri[r], it, seq);
            int ok = c == w->n_units;
            for (int32_t u = 0; ok && u < c; u++)
                ok = g->grp_bytes[g->group[seq[u]]] == w->unit_bytes[u] &&
                     g->grp_op[g->group[seq[u]]] == w->coll_op;
            if (!ok) {
                if (c > 0 && it >= w->iter_first && it <= w->iter_last)
                    mismatch = 1;
                continue;
            }
            for (int32_t u = 0; u < c; u++)
                w->group_unit[g->group[seq[u]]] = u;
        }
    }
    if (mismatch) {
        snprintf(w->tensor_why, sizeof w->tensor_why,
                 "the gradient all-reduces differ between ranks or iterations");
        w->n_units = 0;
        free(seq);
        return 0;
    }
    if (!w->model)
        snprintf(w->tensor_why, sizeof w->tensor_why, "no collective cost model");
    /* host calls that go away with a folded bucket: the collective call and the event
     * record / stream wait right before it */
    int32_t total = 0;
    for (int32_t d = 0; d < g->n_nodes; d++)
        if (alive(g, d) && g->kind[d] == DFG_COLL && g->group[d] >= 0 &&
            w->group_unit[g->group[d]] >= 0 && g->launch[d] >= 0)
            w->group_hosts_off[g->group[d] + 1] += 3;
    for (int32_t q = 0; q < g->n_groups; q++) {
        w->group_hosts_off[q + 1] += w->group_hosts_off[q];
    }
    total = w->group_hosts_off[g->n_groups];
    w->group_hosts = malloc(sizeof *w->group_hosts * (size_t)(total + 1));
    int32_t *fill = calloc((size_t)g->n_groups + 1, sizeof *fill);
    if (!w->group_hosts || !fill) {
        free(fill);
        free(seq);
        return -1;
    }
    for (int32_t d = 0; d < g->n_nodes; d++) {
        if (!alive(g, d) || g->kind[d] != DFG_COLL || g->group[d] < 0 ||
            w->group_unit[g->group[d]] < 0 || g->launch[d] < 0)
            continue;
        int32_t q = g->group[d], h = g->launch[d];
        int32_t *slot = &w->group_hosts[w->group_hosts_off[q] + fill[q]];
        slot[0] = h;
        slot[1] = slot[2] = -1;
        int32_t p = g->prev_on_res[h];
        for (int k = 1; k < 3 && p >= 0; k++, p = g->prev_on_res[p])
            if (name_has(g, p, "EventRecord") || name_has(g, p, "StreamWaitEvent"))
                slot[k] = p;
            else
                break;
        fill[q] += 3;
    }
    free(fill);
    free(seq);
    return 0;
}

/* Kernels of phase ph on rank r's compute stream in iteration it, in launch order. */
static int32_t
phase_kernels(const workload *w, const rank_info *k, int32_t it, int ph, int32_t *out)
{
    const dfg *g = w->g;
    int32_t thread = ph == WL_BACKWARD ? k->bwd_thread : k->main_thread;
    int32_t c = 0;
    if (thread < 0)
        return 0;
    for (int32_t h = g->res_first[thread]; h >= 0; h = g->next_on_res[h]) {
        if (w->iter[h] != it)
            continue;
        for (int32_t i = g->launched_off[h]; i < g->launched_off[h + 1]; i++) {
            int32_t d = g->launched[i];
            if (g->kind[d] == DFG_KERNEL && w->phase[d] == ph && w->on_compute[d])
                out[c++] = d;
        }
    }
    return c;
}

static int
find_layers(workload *w, rank_info *ri, int32_t mem_rank)
{
    dfg *g = w->g;
    if (!w->have_memory || w->mem.n_layers == 0) {
        snprintf(w->memory_why, sizeof w->memory_why,
                 "the trace has no activation allocations to tell layers apart");
        return 0;
    }
    if (mem_rank < 0 || mem_rank >= g->n_ranks || ri[mem_rank].bwd_thread < 0) {
        snprintf(w->memory_why, sizeof w->memory_why,
                 "no separate backward thread: forward and backward cannot be told apart");
        return 0;
    }
    int32_t L = w->mem.n_layers;
    int32_t *fwd = malloc(sizeof *fwd * (size_t)(g->n_nodes + 1));
    int32_t *bwd = malloc(sizeof *bwd * (size_t)(g->n_nodes + 1));
    int32_t *ref_name = NULL, *ref_layer = NULL;
    int64_t *nf = calloc((size_t)L, sizeof *nf);
    if (!fwd || !bwd || !nf)
        goto oom;
    /* the reference forward: kernels the main thread of the memory rank launched from
     * the first activation allocation until the backward thread's next launch */
    rank_info *mk = &ri[mem_rank];
    int64_t t_act = w->mem.act_time[0], t_bwd = INT64_MAX;
    for (int32_t h = g->res_first[mk->bwd_thread]; h >= 0; h = g->next_on_res[h])
        if (g->mstart[h] >= t_act && g->launched_off[h + 1] > g->launched_off[h]) {
            t_bwd = g->mstart[h];
            break;
        }
    int32_t K = 0;
    for (int32_t h = g->res_first[mk->main_thread]; h >= 0; h = g->next_on_res[h]) {
        if (g->mstart[h] < t_act || g->mstart[h] >= t_bwd)
            continue;
        for (int32_t i = g->launched_off[h]; i < g->launched_off[h + 1]; i++) {
            int32_t d = g->launched[i];
            if (g->kind[d] == DFG_KERNEL && w->on_compute[d])
                fwd[K++] = d;
        }
    }
    if (K == 0) {
        snprintf(w->memory_why, sizeof w->memory_why,
                 "no forward kernels after the activation allocations");
        goto done;
    }
    ref_name = malloc(sizeof *ref_name * (size_t)K);
    ref_layer = malloc(sizeof *ref_layer * (size_t)K);
    if (!ref_name || !ref_layer)
        goto oom;
    for (int32_t k = 0; k < K; k++) {
        int64_t t = g->mstart[g->launch[fwd[k]]];
        int32_t l = -1;
        while (l + 1 < L && w->mem.act_time[l + 1] <= t)
            l++;
        ref_name[k] = g->name[fwd[k]];
        ref_layer[k] = l;
        if (l >= 0)
            nf[l]++;
    }
    int64_t nf_total = 0;
    for (int32_t l = 0; l < L; l++)
        nf_total += nf[l];
    if (nf_total == 0)
        goto done;
    /* sites: every (rank, iteration) with the reference forward sequence */
    int32_t cap = 64;
    w->site_layer = malloc(sizeof *w->site_layer * (size_t)cap);
    w->site_anchor = malloc(sizeof *w->site_anchor * (size_t)cap);
    w->site_off = malloc(sizeof *w->site_off * (size_t)(cap + 1));
    w->site_fwd = malloc(sizeof *w->site_fwd * (size_t)(g->n_nodes + 1));
    if (!w->site_layer || !w->site_anchor || !w->site_off || !w->site_fwd)
        goto oom;
    w->site_off[0] = 0;
    for (int32_t r = 0; r < g->n_ranks; r++) {
        rank_info *k = &ri[r];
        if (k->bwd_thread < 0)
            continue;
        for (int32_t it = 0; it < k->n_iters; it++) {
            int32_t nfw = phase_kernels(w, k, it, WL_FORWARD, fwd);
            if (nfw != K)
                continue;
            int same = 1;
            for (int32_t j = 0; j < K && same; j++)
                same = g->name[fwd[j]] == ref_name[j];
            if (!same)
                continue;
            int32_t nbw = phase_kernels(w, k, it, WL_BACKWARD, bwd);
            if (nbw == 0)
                continue;
            for (int32_t j = 0; j < K; j++)
                w->layer[fwd[j]] = ref_layer[j];
            int64_t after = 0; /* forward kernels of the layers after l */
            for (int32_t l = L - 1; l >= 0; l--) {
                int32_t b0 = (int32_t)llround((double)nbw * (double)after / (double)nf_total);
                int32_t b1 =
                    (int32_t)llround((double)nbw * (double)(after + nf[l]) / (double)nf_total);
                after += nf[l];
                for (int32_t j = b0; j < b1 && j < nbw; j++)
                    w->layer[bwd[j]] = l;
                if (nf[l] == 0 || b0 >= nbw)
                    continue;
                if (w->n_sites == cap) {
                    cap *= 2;
                    int32_t *a = realloc(w->site_layer, sizeof *a * (size_t)cap);
                    if (!a)
                        goto oom;
                    w->site_layer = a;
                    a = realloc(w->site_anchor, sizeof *a * (size_t)cap);
                    if (!a)
                        goto oom;
                    w->site_anchor = a;
                    a = realloc(w->site_off, sizeof *a * (size_t)(cap + 1));
                    if (!a)
                        goto oom;
                    w->site_off = a;
                }
                int32_t s = w->n_sites++;
                w->site_layer[s] = l;
                w->site_anchor[s] = bwd[b0];
                int32_t o = w->site_off[s];
                for (int32_t j = 0; j < K; j++)
                    if (ref_layer[j] == l)
                        w->site_fwd[o++] = fwd[j];
                w->site_off[s + 1] = o;
            }
        }
    }
    w->n_layers = L;
    w->layer_nfwd = malloc(sizeof *w->layer_nfwd * (size_t)L);
    if (!w->layer_nfwd)
        goto oom;
    for (int32_t l = 0; l < L; l++)
        w->layer_nfwd[l] = (int32_t)nf[l];
done:
    free(fwd);
    free(bwd);
    free(ref_name);
    free(ref_layer);
    free(nf);
    return 0;
oom:
    free(fwd);
    free(bwd);
    free(ref_name);
    free(ref_layer);
    free(nf);
    return -1;
}

static int
cmp_int32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* A blocking host call for idle_wake_latency: its thread, name and post-wait duration. */
typedef struct blocking_call {
    int32_t res, name, node;
    int64_t dur;
} blocking_call;

static int
cmp_blocking(const void *a, const void *b)
{
    const blocking_call *x = a, *y = b;
    if (x->res != y->res)
        return (x->res > y->res) - (x->res < y->res);
    if (x->name != y->name)
        return (x->name > y->name) - (x->name < y->name);
    return (x->dur > y->dur) - (x->dur < y->dur);
}

/* Fills w->idle_wake_dur (workload.h): the blocking calls of the iterations, sorted by
 * thread, name and duration; each run of one thread and name gets its lower quartile. A
 * blocking call's duration is its wake-up latency, which grows with what else wants the
 * cores when it is woken: in a host-bound job its own launch threads (and the other
 * ranks') do. The strategy that keeps a blocking call while emptying the host (a step
 * captured in a CUDA graph) wakes it on idle cores: the faster wake-ups of the trace are
 * the measure of that, not its median (under load, milliseconds); not its fastest ones
 * either, which an idle host does not reliably get (measured on ddp-sim, 2 ranks: the
 * captured run's median wake-up 190-210 us, the baseline's lowest decile 50-66 us, lower
 * quartile 114-118 us, median 136-248 us on a quiet machine and 1.3-3.6 ms loaded).
 * Returns 0, or -1 when out of memory. */
static int
idle_wake_latency(workload *w)
{
    const dfg *g = w->work;
    int32_t n = g->n_nodes, k = 0;
    w->idle_wake_dur = malloc(sizeof *w->idle_wake_dur * (size_t)(n > 0 ? n : 1));
    blocking_call *c = malloc(sizeof *c * (size_t)(n > 0 ? n : 1));
    if (!w->idle_wake_dur || !c) {
        free(c);
        return -1;
    }
    for (int32_t h = 0; h < n; h++) {
        w->idle_wake_dur[h] = -1;
        if (g->kind[h] == DFG_HOST && alive(g, h) && (g->flags[h] & DFG_F_BLOCKING) &&
            w->iter[h] >= 0)
            c[k++] = (blocking_call){g->res[h], g->name[h], h, g->dur[h]};
    }
    qsort(c, (size_t)k, sizeof *c, cmp_blocking);
    for (int32_t a = 0, b; a < k; a = b) {
        for (b = a + 1; b < k && c[b].res == c[a].res && c[b].name == c[a].name; b++)
            ;
        int64_t low = c[a + (b - a) / 4].dur;
        for (int32_t i = a; i < b; i++)
            w->idle_wake_dur[c[i].node] = low;
    }
    free(c);
    return 0;
}

/* Launched device op of kind `kind` of host node h (the first one), or -1. */
static int32_t
launched_of_kind(const dfg *g, int32_t h, int kind)
{
    for (int32_t i = g->launched_off[h]; i < g->launched_off[h + 1]; i++)
        if (g->kind[g->launched[i]] == kind)
            return g->launched[i];
    return -1;
}

/* Restores the event dependencies the graph lacks when the builder could not resolve
 * event records and waits to streams (it knows a call's stream only by the id CUPTI
 * reports: a Kineto import's runtime calls carry no stream or event, and without
 * cudaStreamGetId the collector records the legacy default stream as handle 0, which
 * no device op has): with event records in the trace but no device-to-device edge at
 * all, the DDP pattern is rebuilt from call order on each thread:
 *   record; wait; collective   the collective waits for the last kernel launched on
 *                              that thread before the record (a gradient bucket);
 *   record; wait; kernel       the kernel waits for the last collective of the rank
 *                              launched before the record (the optimizer waits for the
 *                              gradients).
 * The idle time the restored dependency explains is taken out of the waiting op's
 * measured stream gap, and its launch latency (which also held the wait) becomes the
 * rank's median kernel launch latency at most. Returns the number of edges added, or -1
 * when out of memory. */
static int64_t
repair_event_edges(workload *w)
{
    dfg *g = w->g;
    int64_t records = 0;
    for (int64_t i = 0; i < g->n_edges; i++)
        if (g->kind[g->esrc[i]] != DFG_HOST && g->kind[g->edst[i]] != DFG_HOST)
            return 0; /* the builder resolved them */
    for (int32_t h = 0; h < g->n_nodes; h++)
        records += g->kind[h] == DFG_HOST && alive(g, h) && name_has(g, h, "EventRecord");
    if (records == 0)
        return 0;
    /* the typical launch latency of each rank (median over its kernels): a waiting op's
     * measured latency also holds the wait */
    int32_t *med = calloc((size_t)g->n_ranks + 1, sizeof *med);
    int32_t *lats = malloc(sizeof *lats * (size_t)(g->n_nodes + 1));
    if (!med || !lats) {
        free(med);
        free(lats);
        return -1;
    }
    for (int32_t r = 0; r < g->n_ranks; r++) {
        int32_t k = 0;
        for (int32_t d = 0; d < g->n_nodes; d++)
            if (g->kind[d] == DFG_KERNEL && g->launch[d] >= 0 && dfg_rank(g, d) == r && alive(g, d))
                lats[k++] = g->lat[d];
        if (k > 0) {
            qsort(lats, (size_t)k, sizeof *lats, cmp_int32);
            med[r] = lats[k / 2];
        }
    }
    free(lats);
    int64_t added = 0;
    for (int32_t q = 0; q < g->n_res; q++) {
        if (g->res_kind[q] != DFG_RES_THREAD)
            continue;
        for (int32_t h = g->res_first[q]; h >= 0; h = g->next_on_res[h]) {
            if (!name_has(g, h, "StreamWaitEvent"))
                continue;
            int32_t rec = g->prev_on_res[h];
            if (rec < 0 || !name_has(g, rec, "EventRecord"))
                continue;
            int32_t nx = g->next_on_res[h];
            while (nx >= 0 && g->launched_off[nx + 1] == g->launched_off[nx])
                nx = g->next_on_res[nx];
            if (nx < 0)
                continue;
            int32_t coll = launched_of_kind(g, nx, DFG_COLL);
            int32_t src = -1, dst = -1;
            if (coll >= 0) {
                for (int32_t p = g->prev_on_res[rec]; p >= 0 && src < 0; p = g->prev_on_res[p])
                    src = launched_of_kind(g, p, DFG_KERNEL);
                dst = coll;
            } else {
                dst = launched_of_kind(g, nx, DFG_KERNEL);
                int64_t best = -1;
                int32_t r = g->res_rank[q];
                for (int32_t d = 0; d < g->n_nodes; d++) {
                    if (g->kind[d] != DFG_COLL || g->launch[d] < 0 || dfg_rank(g, d) != r ||
                        !alive(g, d))
                        continue;
                    int64_t t = g->mstart[g->launch[d]];
                    if (t <= g->mstart[rec] && t > best) {
                        best = t;
                        src = d;
                    }
                }
            }
            if (src < 0 || dst < 0)
                continue;
            if (dfg_add_edge(g, src, dst) != 0) {
                free(med);
                return -1;
            }
            if (g->lat[dst] > med[g->res_rank[q]])
                g->lat[dst] = med[g->res_rank[q]];
            /* the idle time before dst that the dependency now explains was measured
             * as a gap on its stream: keep only what remains */
            int64_t ready = g->mend[src];
            int32_t pv = g->prev_on_res[dst];
            if (pv >= 0 && g->mend[pv] > ready)
                ready = g->mend[pv];
            if (pv >= 0) {
                int64_t left = g->mstart[dst] - ready;
                if (left < g->gap[dst])
                    g->gap[dst] = left > 0 ? left : 0;
            }
            added++;
        }
    }
    free(med);
    return added;
}

/* workload_step_call's answer, worked out (w->step_call caches it once the threads are
 * known). */
static int
step_call_of(const workload *w, int32_t h)
{
    const dfg *g = w->work;
    if (g->kind[h] != DFG_HOST || !alive(g, h) || w->iter[h] < 0 || (g->flags[h] & DFG_F_BLOCKING))
        return 0;
    int32_t r = dfg_rank(g, h);
    const int32_t *bn;
    int32_t nb = dfg_iterations(g, r, &bn);
    if (w->iter[h] < nb && bn[w->iter[h]] == h)
        return 0; /* opens the iteration: the graph launch */
    if (g->res[h] == w->bwd_thread[r] || name_has(g, h, "Event"))
        return 1;
    for (int32_t i = g->launched_off[h]; i < g->launched_off[h + 1]; i++) {
        int32_t d = g->launched[i];
        if (g->kind[d] == DFG_KERNEL || g->kind[d] == DFG_COLL)
            return 1;
    }
    return 0;
}

int
workload_step_call(const workload *w, int32_t h)
{
    return w->step_call ? w->step_call[h] : step_call_of(w, h);
}

/* Makes w->capture when a step call (workload_step_call) has launch-queue edges: a copy
 * of the working graph without them (the edges from device ops into QUEUED step calls;
 * those calls lose the flag). Node ids and values are those of the working graph. dfg.h
 * has no edge removal: the copy's edge list is compacted here and the copy marked
 * unfinalized, and dfg_finalize builds its successor lists from that list again.
 * Returns 0, or -1 when out of memory. */
static int
build_capture(workload *w)
{
    const dfg *g = w->work;
    int64_t drop = 0;
    for (int64_t i = 0; i < g->n_edges; i++) {
        int32_t s = g->esrc[i], d = g->edst[i];
        drop += (g->flags[d] & DFG_F_QUEUED) && g->kind[s] != DFG_HOST && workload_step_call(w, d);
    }
    if (drop == 0)
        return 0;
    dfg *c = malloc(sizeof *c);
    if (!c || dfg_clone(c, g) != 0) {
        free(c); /* dfg_clone frees what it made */
        return -1;
    }
    int64_t k = 0;
    for (int64_t i = 0; i < c->n_edges; i++) {
        int32_t s = c->esrc[i], d = c->edst[i];
        if ((c->flags[d] & DFG_F_QUEUED) && c->kind[s] != DFG_HOST && workload_step_call(w, d))
            continue;
        c->esrc[k] = s;
        c->edst[k++] = d;
    }
    c->n_edges = k;
    for (int32_t h = 0; h < c->n_nodes; h++)
        if ((c->flags[h] & DFG_F_QUEUED) && workload_step_call(w, h))
            c->flags[h] &= (uint8_t)~DFG_F_QUEUED;
    c->finalized = 0; /* the edge list changed: sim_run builds the CSR again */
    if (dfg_finalize(c) != 0) {
        dfg_free(c);
        free(c);
        return -1;
    }
    w->capture = c;
    w->capture_unqueued = drop;
    return 0;
}

static void
free_node_arrays(workload *w)
{
    free(w->base_dur);
    free(w->base_gap);
    free(w->base_lat);
    free(w->base_grp_dur);
    free(w->iter);
    free(w->phase);
    free(w->layer);
    free(w->on_compute);
    free(w->idle_wake_dur);
    free(w->step_call);
    w->idle_wake_dur = NULL;
    w->step_call = NULL;
    w->base_dur = w->base_gap = w->base_grp_dur = NULL;
    w->base_lat = w->iter = w->layer = NULL;
    w->phase = w->on_compute = NULL;
}

static int
alloc_node_arrays(workload *w)
{
    dfg *g = w->g;
    int32_t n = g->n_nodes;
    size_t nn = (size_t)(n > 0 ? n : 1), ng = (size_t)(g->n_groups > 0 ? g->n_groups : 1);
    w->n_nodes = n;
    w->n_groups = g->n_groups;
    w->base_dur = malloc(nn * sizeof *w->base_dur);
    w->base_gap = malloc(nn * sizeof *w->base_gap);
    w->base_lat = malloc(nn * sizeof *w->base_lat);
    w->base_grp_dur = malloc(ng * sizeof *w->base_grp_dur);
    w->iter = malloc(nn * sizeof *w->iter);
    w->phase = calloc(nn, 1);
    w->layer = malloc(nn * sizeof *w->layer);
    w->on_compute = calloc(nn, 1);
    if (!w->base_dur || !w->base_gap || !w->base_lat || !w->base_grp_dur || !w->iter || !w->phase ||
        !w->layer || !w->on_compute)
        return -1;
    memcpy(w->base_dur, g->dur, (size_t)n * sizeof *g->dur);
    memcpy(w->base_gap, g->gap, (size_t)n * sizeof *g->gap);
    memcpy(w->base_lat, g->lat, (size_t)n * sizeof *g->lat);
    if (g->n_groups > 0) /* a graph without collectives has no grp_dur array */
        memcpy(w->base_grp_dur, g->grp_dur, (size_t)g->n_groups * sizeof *g->grp_dur);
    for (int32_t i = 0; i < n; i++) {
        w->iter[i] = -1;
        w->layer[i] = -1;
    }
    return 0;
}

static void
free_rank_info(rank_info *ri, int32_t n_ranks)
{
    if (!ri)
        return;
    for (int32_t r = 0; r < n_ranks; r++)
        free(ri[r].first_bwd);
    free(ri);
}

/* Rounding an allocator may have added to a request to make a block of b bytes
 * (workload.h): up to 2 MiB for a block of a multiple of 2 MiB above 1 MiB, else 512 B. */
static int64_t
alloc_slack(int64_t b)
{
    return b > (1 << 20) && b % (2 << 20) == 0 ? (2 << 20) : 512;
}

/* Whether the n_layers allocations from alloc[first] match the units; fills unit_lo.
 * An allocation holds its tensor, at most slack (alloc_slack) bytes smaller: each unit
 * closes at the first layer where the allocations' running sum reaches the units'
 * (within 4 B per unit), and its lower bound must not pass it. *diff receives the
 * allocations' total minus the units'. */
static int
match_run(const int64_t *alloc, int32_t first, const int64_t *unit_bytes, int32_t n_units,
          int32_t n_layers, int32_t *unit_lo, int64_t *diff)
{
    int64_t cum_a = 0, cum_u = 0, slack = 0;
    int32_t l = n_layers - 1;
    for (int32_t u = 0; u < n_units; u++) {
        cum_u += unit_bytes[u];
        do { /* every unit holds at least one layer */
            if (l < 0)
                return 0;
            cum_a += alloc[first + l];
            slack += alloc_slack(alloc[first + l]);
            l--;
        } while (cum_a < cum_u - 4 * (int64_t)(u + 1) || (u == n_units - 1 && l >= 0));
        if (cum_a - slack > cum_u)
            return 0;
        unit_lo[u] = l + 1;
    }
    *diff = cum_a - cum_u;
    return l < 0;
}

int32_t
workload_match_gradients(const int64_t *alloc, int32_t n_alloc, const int64_t *unit_bytes,
                         int32_t n_units, int32_t n_layers, int32_t *unit_lo)
{
    if (!alloc || n_units <= 0 || n_layers <= 0 || n_alloc < n_layers)
        return -1;
    int32_t *tmp = malloc(sizeof *tmp * (size_t)n_units);
    if (!tmp)
        return -1;
    int32_t best = -1;
    int64_t best_diff = 0;
    for (int32_t a = 0; a + n_layers <= n_alloc; a++) {
        int64_t diff;
        if (!match_run(alloc, a, unit_bytes, n_units, n_layers, tmp, &diff))
            continue;
        if (diff < 0)
            diff = -diff;
        if (best < 0 || diff < best_diff) {
            best = a;
            best_diff = diff;
            memcpy(unit_lo, tmp, sizeof *tmp * (size_t)n_units);
        }
    }
    free(tmp);
    return best;
}

/* The gradient sizes per layer for tensor partition (workload.h). */
static int
find_gradients(workload *w)
{
    if (w->n_units <= 0 || w->tensor_why[0])
        return 0;
    if (w->n_layers <= 0) {
        snprintf(w->grad_why, sizeof w->grad_why, "no layers (no activation allocations)");
        return 0;
    }
    w->unit_lo = malloc(sizeof *w->unit_lo * (size_t)w->n_units);
    w->layer_grad = malloc(sizeof *w->layer_grad * (size_t)w->n_layers);
    if (!w->unit_lo || !w->layer_grad)
        return -1;
    int32_t first = workload_match_gradients(w->mem.static_each, w->mem.n_static, w->unit_bytes,
                                             w->n_units, w->n_layers, w->unit_lo);
    if (first < 0) {
        snprintf(w->grad_why, sizeof w->grad_why,
                 "no run of %d static allocations adds up to the %d all-reduces' bytes",
                 w->n_layers, w->n_units);
        free(w->unit_lo);
        free(w->layer_grad);
        w->unit_lo = NULL;
        w->layer_grad = NULL;
        return 0;
    }
    for (int32_t l = 0; l < w->n_layers; l++)
        w->layer_grad[l] = w->mem.static_each[first + l];
    return 0;
}

int
workload_analyze(workload *w, dfg *g, sim_result *base, int32_t iter_first, int32_t iter_last,
                 const costmodel *model, memest *mem, int32_t mem_rank, const workload_options *opt)
{
    memset(w, 0, sizeof *w);
    if (mem) {
        w->mem = *mem;
        memset(mem, 0, sizeof *mem);
        w->have_memory = w->mem.peak_bytes > 0;
    }
    w->g = w->work = g;
    w->model = model;
    w->iter_first = iter_first;
    w->iter_last = iter_last;
    if (opt)
        w->opt = *opt;
    else
        workload_default_options(&w->opt);
    int rc = -1;
    rank_info *ri = NULL;

    if (sim_run(g, base) != 0)
        goto out;
    w->measured_iter_ns = workload_iteration_ns(w, base);
    w->repaired_edges = repair_event_edges(w);
    if (w->repaired_edges < 0 || (w->repaired_edges > 0 && sim_run(g, base) != 0))
        goto out;
    if (alloc_node_arrays(w) != 0)
        goto out;
    ri = calloc((size_t)g->n_ranks + 1, sizeof *ri);
    if (!ri || find_threads_and_iterations(w, base, ri) != 0)
        goto out;
    assign_phases(w, base, ri);

    /* per-kernel fixed cost: fitted on the kernels' launch sizes, else the prior; at
     * most the shortest kernel of the job */
    double shortest = -1;
    for (int32_t d = 0; d < g->n_nodes; d++)
        if (alive(g, d) && g->kind[d] == DFG_KERNEL && g->dur[d] > 0 &&
            (shortest < 0 || (double)g->dur[d] < shortest))
            shortest = (double)g->dur[d];
    if (workload_fit_fixed_cost(w->opt.kernel_samples, w->opt.n_kernel_samples, &w->fixed_fit) > 0)
        w->kernel_fixed_ns = w->fixed_fit.c0_ns;
    else
        w->kernel_fixed_ns = w->opt.kernel_fixed_us * NS_PER_US;
    w->opt.kernel_samples = NULL; /* the caller's, valid during this call only */
    w->opt.n_kernel_samples = 0;
    if (shortest > 0 && shortest < w->kernel_fixed_ns)
        w->kernel_fixed_ns = shortest;

    if (find_chains(w) != 0 || find_units(w, ri) != 0 || find_layers(w, ri, mem_rank) != 0 ||
        find_gradients(w) != 0 || idle_wake_latency(w) != 0)
        goto out;
    int64_t kernels = 0, from_graphs = 0;
    for (int32_t d = 0; d < g->n_nodes; d++) {
        if (!alive(g, d) || g->kind[d] != DFG_KERNEL || g->launch[d] < 0)
            continue;
        int32_t h = g->launch[d];
        kernels++;
        from_graphs += g->launched_off[h + 1] - g->launched_off[h] > 4;
    }
    w->graph_captured = kernels > 0 && 2 * from_graphs > kernels;
    if (!w->memory_why[0]) {
        int have_bwd = 0;
        for (int32_t r = 0; r < g->n_ranks; r++)
            have_bwd |= ri[r].bwd_thread >= 0;
        if (!have_bwd)
            snprintf(w->memory_why, sizeof w->memory_why,
                     "no separate backward thread: forward and backward cannot be told apart");
    }
    w->main_thread = malloc(sizeof *w->main_thread * (size_t)(g->n_ranks + 1));
    w->bwd_thread = malloc(sizeof *w->bwd_thread * (size_t)(g->n_ranks + 1));
    if (!w->main_thread || !w->bwd_thread)
        goto out;
    for (int32_t r = 0; r < g->n_ranks; r++) {
        w->main_thread[r] = ri[r].main_thread;
        w->bwd_thread[r] = ri[r].bwd_thread;
    }
    /* strategy_apply asks for every node and edge of every candidate: answered once */
    w->step_call = malloc((size_t)(g->n_nodes > 0 ? g->n_nodes : 1));
    if (!w->step_call)
        goto out;
    for (int32_t h = 0; h < g->n_nodes; h++)
        w->step_call[h] = (uint8_t)step_call_of(w, h);
    if (build_capture(w) != 0)
        goto out;
    w->base_iter_ns = workload_iteration_ns(w, base);
    rc = 0;
out:
    free_rank_info(ri, g->n_ranks);
    return rc;
}

int
workload_memory_phases(const dfg *g, int32_t r, int64_t t0, int64_t t1, memest_phases *ph)
{
    const int32_t *bn;
    int32_t nb = dfg_iterations(g, r, &bn);
    memset(ph, 0, sizeof *ph);
    if (nb <= 0 || !g->finalized)
        return -1;
    int32_t b0 = bn[0];
    if (g->kind[b0] != DFG_HOST && g->launch[b0] >= 0)
        b0 = g->launch[b0];
    if (g->kind[b0] != DFG_HOST)
        return -1;
    int32_t main_res = g->res[b0], bwd_res = -1;
    int64_t best = 0;
    for (int32_t q = 0; q < g->n_res; q++) {
        if (g->res_rank[q] != r || g->res_kind[q] != DFG_RES_THREAD || q == main_res)
            continue;
        int64_t c = 0;
        for (int32_t h = g->res_first[q]; h >= 0; h = g->next_on_res[h])
            c += g->launched_off[h + 1] - g->launched_off[h];
        if (c > best) {
            best = c;
            bwd_res = q;
        }
    }
    ph->iter_start = t0 >= 0 ? t0 : g->mstart[bn[0]];
    ph->iter_end = t0 >= 0 ? t1 : nb > 1 ? g->mstart[bn[1]] : INT64_MAX;
    ph->fwd_thread = g->res_id[main_res];
    ph->bwd_thread = bwd_res >= 0 ? g->res_id[bwd_res] : g->res_id[main_res];
    ph->bwd_start = ph->iter_end;
    ph->bwd_end = ph->iter_start;
    if (bwd_res >= 0)
        for (int32_t h = g->res_first[bwd_res]; h >= 0; h = g->next_on_res[h]) {
            if (g->mstart[h] < ph->iter_start || g->mstart[h] >= ph->iter_end ||
                g->launched_off[h + 1] == g->launched_off[h])
                continue;
            if (g->mstart[h] < ph->bwd_start)
                ph->bwd_start = g->mstart[h];
            if (g->mend[h] > ph->bwd_end)
                ph->bwd_end = g->mend[h];
        }
    return 0;
}

void
workload_reset(workload *w)
{
    dfg *g = w->g;
    memcpy(g->dur, w->base_dur, (size_t)w->n_nodes * sizeof *g->dur);
    memcpy(g->gap, w->base_gap, (size_t)w->n_nodes * sizeof *g->gap);
    memcpy(g->lat, w->base_lat, (size_t)w->n_nodes * sizeof *g->lat);
    if (w->n_groups > 0)
        memcpy(g->grp_dur, w->base_grp_dur, (size_t)w->n_groups * sizeof *g->grp_dur);
}

static int
cmp_i64(const void *pa, const void *pb)
{
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    return (a > b) - (a < b);
}

double
workload_iteration_ns(const workload *w, const sim_result *res)
{
    sim_timeline tl = sim_timeline_of(res);
    int32_t n_iter = w->iter_last - w->iter_first + 1;
    double sum = 0;
    int32_t k = 0;
    if (n_iter <= 0)
        return -1;
    int64_t *each = malloc(sizeof *each * (size_t)n_iter);
    if (!each)
        return -1;
    for (int32_t r = 0; r < w->g->n_ranks; r++) {
        int32_t n = 0;
        for (int32_t i = w->iter_first; i <= w->iter_last; i++) {
            int64_t t0, t1;
            if (sim_iteration_window(w->g, tl, r, i, i, &t0, &t1) != 0)
                break;
            each[n++] = t1 - t0;
        }
        if (n < n_iter)
            continue; /* the rank did not finish the compared iterations */
        qsort(each, (size_t)n, sizeof *each, cmp_i64);
        sum += n % 2 ? (double)each[n / 2] : 0.5 * (double)(each[n / 2 - 1] + each[n / 2]);
        k++;
    }
    free(each);
    return k ? sum / k : -1;
}

void
workload_free(workload *w)
{
    free_node_arrays(w);
    if (w->capture) {
        dfg_free(w->capture);
        free(w->capture);
    }
    free(w->main_thread);
    free(w->bwd_thread);
    free(w->chain_off);
    free(w->chain_node);
    free(w->unit_bytes);
    free(w->group_unit);
    free(w->group_hosts);
    free(w->group_hosts_off);
    free(w->site_layer);
    free(w->site_anchor);
    free(w->site_off);
    free(w->site_fwd);
    free(w->layer_nfwd);
    free(w->layer_grad);
    free(w->unit_lo);
    memest_free(&w->mem);
    memset(w, 0, sizeof *w);
}
