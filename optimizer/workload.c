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
#include "optimizer/workload_int.h"
#include "replay/replay.h"

void
workload_default_options(workload_options *o)
{
    o->short_kernel_us = 50;
    o->kernel_fixed_us = 3;
    o->fusion_fixed = 0;
    o->no_contention = 1;
    o->recompute_keep = 0.125;
    o->capture_scope = WL_CAPTURE_STEP;
    o->fusion_scope = WL_FUSE_SAME_NAME;
    o->kernel_samples = NULL;
    o->n_kernel_samples = 0;
}

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

/* The host thread (resource) of rank r that launched the rank's first device op, -1 if
 * none: a program starts on its main thread (the autograd engine's thread only appears
 * with the first backward). */
static int32_t
first_launcher(const dfg *g, const sim_result *base, int32_t r)
{
    int32_t best = -1;
    int64_t t = INT64_MAX;
    for (int32_t d = 0; d < g->n_nodes; d++) {
        if (!alive(g, d) || g->kind[d] == DFG_HOST || g->launch[d] < 0 || dfg_rank(g, d) != r)
            continue;
        int32_t h = g->launch[d];
        if (base->start[h] >= 0 && base->start[h] < t) {
            t = base->start[h];
            best = g->res[h];
        }
    }
    return best;
}

/* When iteration boundary b starts, for the host calls: a marker's start; after a device
 * op (iterations cut from the kernel period), the start of the call that launched the
 * next op on its stream, the first of the next iteration there (the last calls of a step,
 * such as the final bucket's all-reduce launched after the last backward kernel, belong
 * to it even when the device runs behind). */
static int64_t
boundary_start(const dfg *g, const sim_result *base, int32_t b)
{
    int64_t t = base->start[b];
    if (g->kind[b] != DFG_HOST) {
        int32_t m = g->next_on_res[b];
        while (m >= 0 && (!alive(g, m) || g->launch[m] < 0))
            m = g->next_on_res[m];
        if (m >= 0 && base->start[g->launch[m]] >= 0)
            t = base->start[g->launch[m]];
    }
    return t;
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
        /* the thread of the iteration markers; iterations cut from the kernel period
         * (boundaries are device ops, launched by whichever thread ends a step): the
         * thread that launched first */
        if (nb > 0 && g->kind[bn[0]] == DFG_HOST)
            k->main_thread = g->res[bn[0]];
        else if (nb > 0)
            k->main_thread = first_launcher(g, base, r);
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
            bt[j] = boundary_start(g, base, bn[j]);
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
        if (dfg_launched_first(g, h) < 0)
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

static void
free_node_arrays(workload *w)
{
    free(w->base_dur);
    free(w->base_gap);
    free(w->base_lat);
    free(w->base_grp_dur);
    free(w->typ_dur);
    free(w->typ_gap);
    free(w->iter);
    free(w->phase);
    free(w->layer);
    free(w->on_compute);
    free(w->capture.idle_wake_node);
    free(w->capture.idle_wake_dur);
    free(w->capture.step_call);
    free(w->capture.graph_launch);
    w->capture.idle_wake_node = NULL;
    w->capture.idle_wake_dur = NULL;
    w->capture.n_idle_wake = 0;
    w->capture.step_call = NULL;
    w->capture.graph_launch = NULL;
    w->base_dur = w->base_gap = w->base_grp_dur = w->typ_dur = w->typ_gap = NULL;
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
    w->typ_dur = malloc(nn * sizeof *w->typ_dur);
    w->typ_gap = malloc(nn * sizeof *w->typ_gap);
    w->iter = malloc(nn * sizeof *w->iter);
    w->phase = calloc(nn, 1);
    w->layer = malloc(nn * sizeof *w->layer);
    w->on_compute = calloc(nn, 1);
    if (!w->base_dur || !w->base_gap || !w->base_lat || !w->base_grp_dur || !w->typ_dur ||
        !w->typ_gap || !w->iter || !w->phase || !w->layer || !w->on_compute ||
        replay_typical_host_times(g, w->iter_first, w->iter_last, w->typ_dur, w->typ_gap) != 0)
        return -1;
    for (int32_t i = 0; i < n; i++) {
        w->base_dur[i] = dfg_dur(g, i);
        w->base_gap[i] = dfg_gap(g, i);
    }
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

/* Orders kernel samples by their identity (workload_kernel_sample): rank, stream, start,
 * event index. */
static int
cmp_sample_at(const void *pa, const void *pb)
{
    const workload_kernel_sample *a = pa, *b = pb;
    if (a->rank != b->rank)
        return a->rank < b->rank ? -1 : 1;
    if (a->stream != b->stream)
        return a->stream < b->stream ? -1 : 1;
    if (a->t_ns != b->t_ns)
        return a->t_ns < b->t_ns ? -1 : 1;
    return (a->event > b->event) - (a->event < b->event);
}

/* The index of the first of s (n, sorted by cmp_sample_at) at or after (rank, stream,
 * t_ns), n when none. */
static size_t
first_sample_at(const workload_kernel_sample *s, size_t n, int32_t rank, uint64_t stream,
                int64_t t_ns)
{
    workload_kernel_sample key = {.rank = rank, .stream = stream, .t_ns = t_ns};
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cmp_sample_at(&s[mid], &key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int
cmp_hinge_key(const void *pk, const void *ph)
{
    uint64_t k = *(const uint64_t *)pk, h = ((const workload_hinge *)ph)->key;
    return (k > h) - (k < h);
}

/* Kernel nodes of d's stream from d on (d included) that started when d did. */
static size_t
kernels_at(const dfg *g, int32_t d)
{
    size_t k = 0;
    for (int32_t x = d; x >= 0 && g->mstart[x] <= g->mstart[d]; x = g->next_on_res[x])
        k += alive(g, x) && g->kind[x] == DFG_KERNEL && g->mstart[x] == g->mstart[d];
    return k;
}

/* Gives each kernel node of graph g its sample of s (n, sorted by cmp_sample_at): the
 * one of its rank and stream that started at its measured start, the k-th of them for the
 * k-th kernel node of its stream that started then, where as many samples as nodes
 * started then (else none: a kernel without a sample, profile_take_rank, would
 * shift the others); its launch size into fu and its name's hinge (fu->hinges) when it
 * has one. */
static void
match_kernel_samples(workload_fusion *fu, const dfg *g, const workload_kernel_sample *s, size_t n)
{
    for (int32_t q = 0; q < g->n_res; q++) {
        if (g->res_kind[q] != DFG_RES_STREAM)
            continue;
        int64_t t_prev = INT64_MIN;
        size_t nth = 0, first = n;
        int same = 0;
        for (int32_t d = g->res_first[q]; d >= 0; d = g->next_on_res[d]) {
            if (!alive(g, d) || g->kind[d] != DFG_KERNEL)
                continue;
            if (g->mstart[d] != t_prev) {
                size_t k = 0;
                first = first_sample_at(s, n, g->res_rank[q], g->res_id[q], g->mstart[d]);
                while (first + k < n && s[first + k].rank == g->res_rank[q] &&
                       s[first + k].stream == g->res_id[q] && s[first + k].t_ns == g->mstart[d])
                    k++;
                same = k > 0 && k == kernels_at(g, d);
                nth = 0;
            } else {
                nth++;
            }
            t_prev = g->mstart[d];
            size_t i = first + nth;
            if (!same)
                continue;
            const workload_hinge *h =
                fu->n_hinges > 0
                    ? bsearch(&s[i].key, fu->hinges, (size_t)fu->n_hinges, sizeof *h, cmp_hinge_key)
                    : NULL;
            fu->node_threads[d] = s[i].threads, fu->node_grid_x[d] = s[i].grid_x;
            if (h)
                fu->node_hinge[d] = (int32_t)(h - fu->hinges);
        }
    }
}

/* The per-name hinges (workload_fit_hinges) of the caller's kernel samples, and each
 * kernel node's launch size and hinge (match_kernel_samples). Returns 0 or -1 (out of
 * memory). */
static int
fusion_hinges(workload *w, const dfg *g)
{
    workload_fusion *fu = &w->fusion;
    size_t n = w->opt.n_kernel_samples;
    workload_kernel_sample *s = w->opt.kernel_samples;
    int rc = 0;
    fu->node_threads = calloc((size_t)g->n_nodes + 1, sizeof *fu->node_threads);
    fu->node_grid_x = calloc((size_t)g->n_nodes + 1, sizeof *fu->node_grid_x);
    fu->node_hinge = malloc(sizeof *fu->node_hinge * ((size_t)g->n_nodes + 1));
    if (!fu->node_threads || !fu->node_grid_x || !fu->node_hinge)
        rc = -1;
    for (int32_t d = 0; rc == 0 && d < g->n_nodes; d++)
        fu->node_hinge[d] = -1;
    if (rc == 0 && (fu->n_hinges = workload_fit_hinges(s, n, &fu->hinges)) < 0) {
        fu->n_hinges = 0;
        rc = -1;
    }
    if (rc == 0 && s && n > 0) {
        qsort(s, n, sizeof *s, cmp_sample_at);
        match_kernel_samples(fu, g, s, n);
    }
    return rc;
}

/* The contention factors and the measured overlaps (workload.h). Returns 0 or -1. */
static int
measure_contention(workload *w, const dfg *g)
{
    w->f_meas = malloc(sizeof *w->f_meas * ((size_t)g->n_nodes + 1));
    w->f_grp_meas = malloc(sizeof *w->f_grp_meas * ((size_t)g->n_groups + 1));
    int64_t *mend = dfg_mend_array(g);
    int rc = w->f_meas && w->f_grp_meas && mend && contention_measure(g, &w->contention) == 0 &&
                     contention_overlaps(g, g->mstart, mend, NULL, w->f_meas, w->f_grp_meas) == 0
                 ? 0
                 : -1;
    free(mend);
    if (rc != 0)
        return -1;
    double s = 0;
    for (int32_t q = 0; q < g->n_groups; q++)
        s += w->f_grp_meas[q];
    w->f_grp_mean = g->n_groups > 0 ? s / g->n_groups : 0;
    return 0;
}

int
workload_analyze(workload *w, dfg *g, sim_result *base, int32_t iter_first, int32_t iter_last,
                 const costmodel *model, memest *mem, int32_t mem_rank, const workload_options *opt)
{
    memset(w, 0, sizeof *w);
    if (mem) {
        w->layers.mem = *mem;
        memset(mem, 0, sizeof *mem);
        w->layers.have_memory = w->layers.mem.peak_bytes > 0;
    }
    w->g = w->work = g;
    w->buckets.model = model;
    w->iter_first = iter_first;
    w->iter_last = iter_last;
    if (opt)
        w->opt = *opt;
    else
        workload_default_options(&w->opt);
    int rc = -1;
    double dev, dev_med; /* the baseline's device pace */
    rank_info *ri = NULL;

    if (sim_run(g, base) != 0)
        goto out;
    w->measured_iter_ns = workload_iteration_ns(w, base);
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
        if (alive(g, d) && g->kind[d] == DFG_KERNEL && dfg_dur(g, d) > 0 &&
            (shortest < 0 || (double)dfg_dur(g, d) < shortest))
            shortest = (double)dfg_dur(g, d);
    if (workload_fit_fixed_cost(w->opt.kernel_samples, w->opt.n_kernel_samples,
                                &w->fusion.fixed_fit) > 0)
        w->fusion.kernel_fixed_ns = w->fusion.fixed_fit.c0_ns;
    else
        w->fusion.kernel_fixed_ns = w->opt.kernel_fixed_us * NS_PER_US;
    if (fusion_hinges(w, g) != 0)
        goto out;
    if (measure_contention(w, g) != 0)
        goto out;
    w->opt.kernel_samples = NULL; /* the caller's, valid during this call only */
    w->opt.n_kernel_samples = 0;
    if (shortest > 0 && shortest < w->fusion.kernel_fixed_ns)
        w->fusion.kernel_fixed_ns = shortest;

    if (workload_find_units(w, ri) != 0 || workload_find_layers(w, ri, mem_rank) != 0 ||
        workload_find_gradients(w) != 0 || workload_find_weight_floors(w) != 0 ||
        workload_find_params(w, ri) != 0 || workload_idle_wake_latency(w) != 0 ||
        workload_find_fsdp(w, ri) != 0)
        goto out;
    /* after workload_find_params: WL_FUSE_COMPILED leaves DDP's per-parameter work out */
    if (workload_find_chains(w) != 0)
        goto out;
    for (int32_t c = 0; c < w->fusion.n_chains; c++) {
        int32_t a = w->fusion.chain_off[c], b = w->fusion.chain_off[c + 1], ok = 1;
        int32_t hi = w->fusion.node_hinge[w->fusion.chain_node[a]];
        for (int32_t i = a; i < b && ok; i++)
            ok = hi >= 0 && w->fusion.node_hinge[w->fusion.chain_node[i]] == hi &&
                 w->fusion.node_threads[w->fusion.chain_node[i]] > 0;
        w->fusion.chains_by_hinge += ok && !w->opt.fusion_fixed && !w->fusion.compiled;
    }
    int64_t kernels = 0, from_graphs = 0;
    for (int32_t d = 0; d < g->n_nodes; d++) {
        if (!alive(g, d) || g->kind[d] != DFG_KERNEL || g->launch[d] < 0)
            continue;
        int32_t h = g->launch[d];
        kernels++;
        from_graphs += dfg_launched_count(g, h) > 4;
    }
    w->capture.graph_captured = kernels > 0 && 2 * from_graphs > kernels;
    if (!w->layers.why[0]) {
        int have_bwd = 0;
        for (int32_t r = 0; r < g->n_ranks; r++)
            have_bwd |= ri[r].bwd_thread >= 0;
        if (!have_bwd)
            snprintf(w->layers.why, sizeof w->layers.why,
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
    w->capture.step_call = malloc((size_t)(g->n_nodes > 0 ? g->n_nodes : 1));
    if (!w->capture.step_call)
        goto out;
    for (int32_t h = 0; h < g->n_nodes; h++)
        w->capture.step_call[h] = (uint8_t)workload_step_call_of(w, h);
    if (workload_keep_graph_launch(w, base) != 0 || workload_build_capture(w) != 0)
        goto out;
    w->base_iter_ns = workload_iteration_ns(w, base);
    if (workload_device_iteration_ns(w, w->work, base, &dev, &dev_med) < 0)
        goto out;
    /* only a device behind its host (still busy with earlier iterations' work when the
     * window opens) sets them apart in a way a plan keeps: a device ahead of its host
     * only tells how the host's calls closing the window ran, which the plan changes */
    if (dev >= 0 && w->base_iter_ns >= 0) {
        w->base_dev_lag_ns = fmax(0, dev - w->base_iter_ns);
        w->base_dev_lag_median_ns = fmax(0, dev_med - workload_iteration_median_ns(w, base));
    }
    rc = 0;
out:
    free_rank_info(ri, g->n_ranks);
    return rc;
}

void
workload_trim(workload *w)
{
    workload_fusion *fu = &w->fusion;
    workload_fsdp *f = &w->fsdp;
    free(fu->node_grid_x);
    fu->node_grid_x = NULL;
    if (fu->n_chains == 0) {
        free(fu->node_threads);
        free(fu->node_hinge);
        fu->node_threads = NULL;
        fu->node_hinge = NULL;
    }
    if (!f->grp_role || f->why[0]) {
        free(f->gather_ops);
        free(f->prefetch_ns);
        free(f->regather_ns);
        free(f->sync_wait_ns);
        f->gather_ops = f->prefetch_ns = f->regather_ns = f->sync_wait_ns = NULL;
    }
    if (w->opt.no_contention) {
        free(w->f_meas);
        free(w->f_grp_meas);
        w->f_meas = w->f_grp_meas = NULL;
    }
    int32_t *gl =
        realloc(w->capture.graph_launch, sizeof *gl * (size_t)(w->capture.n_graph_launch + 1));
    if (gl)
        w->capture.graph_launch = gl;
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
            c += dfg_launched_count(g, h);
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
                dfg_launched_first(g, h) < 0)
                continue;
            if (g->mstart[h] < ph->bwd_start)
                ph->bwd_start = g->mstart[h];
            if (dfg_mend(g, h) > ph->bwd_end)
                ph->bwd_end = dfg_mend(g, h);
        }
    return 0;
}

int
workload_reset(workload *w)
{
    dfg *g = w->g;
    int rc = 0;
    for (int32_t i = 0; i < w->n_nodes; i++)
        rc |= dfg_set_dur(g, i, w->base_dur[i]) | dfg_set_gap(g, i, w->base_gap[i]);
    memcpy(g->lat, w->base_lat, (size_t)w->n_nodes * sizeof *g->lat);
    if (w->n_groups > 0)
        memcpy(g->grp_dur, w->base_grp_dur, (size_t)w->n_groups * sizeof *g->grp_dur);
    return rc;
}

int
workload_iteration_kept(const workload *w, int32_t i)
{
    return i >= w->iter_first && i <= w->iter_last &&
           !(w->iter_aside && w->iter_aside[i - w->iter_first]);
}

int32_t
workload_iterations_kept(const workload *w)
{
    int32_t k = 0;
    for (int32_t i = w->iter_first; i <= w->iter_last; i++)
        k += workload_iteration_kept(w, i);
    return k;
}

/* Mean iteration of rank r over the compared iterations that w->iter_aside keeps (each
 * iteration's window: sim_iteration_window); -1 when one of them is not covered or none
 * is kept. */
static double
kept_iteration_mean(const workload *w, sim_timeline tl, int32_t r)
{
    double sum = 0;
    int32_t k = 0, ok = 1;
    for (int32_t i = w->iter_first; i <= w->iter_last && ok; i++) {
        int64_t t0, t1;
        if (!workload_iteration_kept(w, i))
            continue;
        ok = sim_iteration_window(w->g, tl, r, i, i, &t0, &t1) == 0;
        sum += (double)(t1 - t0);
        k++;
    }
    return ok && k > 0 ? sum / k : -1;
}

/* The mean (median: 0) or median (1) iteration of each rank that covers the compared
 * iterations, averaged over those ranks; -1 when none does. The mean leaves out the
 * iterations w->iter_aside sets aside. */
static double
iteration_stat(const workload *w, const sim_result *res, int median)
{
    sim_timeline tl = sim_timeline_of(res);
    double sum = 0;
    int32_t k = 0;
    if (w->iter_last < w->iter_first)
        return -1;
    for (int32_t r = 0; r < w->g->n_ranks; r++) {
        double t = median          ? sim_iteration_median(w->g, tl, r, w->iter_first, w->iter_last)
                   : w->iter_aside ? kept_iteration_mean(w, tl, r)
                                   : sim_iteration_time(w->g, tl, r, w->iter_first, w->iter_last);
        if (t < 0)
            continue; /* the rank did not finish the compared iterations */
        sum += t;
        k++;
    }
    return k ? sum / k : -1;
}

double
workload_iteration_ns(const workload *w, const sim_result *res)
{
    return iteration_stat(w, res, 0);
}

double
workload_iteration_median_ns(const workload *w, const sim_result *res)
{
    return iteration_stat(w, res, 1);
}

double
workload_rank_weight(const workload *w, int32_t r)
{
    const dfg *g = w->work;
    if (g->rank_weight)
        return g->rank_weight[r];
    return w->main_thread[r] >= 0 ? 1 : 0;
}

/* Per rank of g, into e[r * (n + 1) + i] (n = last - first + 1), from res: at i = 0 the
 * end of the last device operation of the iterations before the first compared one (of
 * the boundary node that opens it when they have none), at i = 1..n the end of the last
 * device operation of compared iteration first + i - 1; -1 where there is none. */
static void
device_iteration_ends(const workload *w, const dfg *g, const sim_result *res, int64_t *e)
{
    int32_t n = w->iter_last - w->iter_first + 1;
    for (int64_t k = 0; k < (int64_t)g->n_ranks * (n + 1); k++)
        e[k] = -1;
    for (int32_t d = 0; d < w->n_nodes && d < g->n_nodes; d++) {
        int32_t i = w->iter[d] < w->iter_first ? w->iter_first - 1 : w->iter[d];
        if (g->kind[d] == DFG_HOST || (g->flags[d] & DFG_F_REMOVED) || i > w->iter_last ||
            res->end[d] < 0)
            continue;
        int64_t *slot = &e[(int64_t)dfg_rank(g, d) * (n + 1) + (i - w->iter_first) + 1];
        if (res->end[d] > *slot)
            *slot = res->end[d];
    }
    for (int32_t r = 0; r < g->n_ranks; r++) {
        const int32_t *b;
        int32_t nb = dfg_iterations(g, r, &b);
        if (e[(int64_t)r * (n + 1)] < 0 && w->iter_first < nb && b[w->iter_first] >= 0)
            e[(int64_t)r * (n + 1)] = res->end[b[w->iter_first]];
    }
}

int
workload_device_iteration_ns(const workload *w, const dfg *g, const sim_result *res, double *mean,
                             double *median)
{
    int rc = 0;
    int32_t n = w->iter_last - w->iter_first + 1;
    int64_t *e = NULL, *d = NULL;
    double sum_mean = 0, sum_median = 0, k = 0;
    *mean = *median = -1;
    if (w->iter_first < 0 || n < 1 || g->n_ranks < 1)
        rc = 1;
    if (rc == 0) {
        e = malloc(sizeof *e * (size_t)g->n_ranks * (size_t)(n + 1));
        d = malloc(sizeof *d * (size_t)n);
        rc = e && d ? 0 : -1;
    }
    if (rc == 0)
        device_iteration_ends(w, g, res, e);
    for (int32_t r = 0; rc == 0 && r < g->n_ranks; r++) {
        const int64_t *er = e + (int64_t)r * (n + 1);
        int ok = 1;
        for (int32_t i = 0; i < n && ok; i++) {
            ok = er[i] >= 0 && er[i + 1] >= 0;
            d[i] = ok ? er[i + 1] - er[i] : 0;
        }
        double wt = workload_rank_weight(w, r);
        if (!ok || wt <= 0)
            continue; /* an iteration of the rank without device work; a folded rank */
        double kept = 0, n_kept = 0;
        for (int32_t i = 0; w->iter_aside && i < n; i++) {
            int kept_i = workload_iteration_kept(w, w->iter_first + i);
            kept += kept_i ? (double)d[i] : 0;
            n_kept += kept_i;
        }
        sum_mean += wt * (w->iter_aside && n_kept > 0 ? kept / n_kept
                                                      : (double)(er[n] - er[0]) / (double)n);
        sum_median += wt * sim_median_i64(d, n);
        k += wt;
    }
    if (rc == 0 && k > 0) {
        *mean = sum_mean / k - w->base_dev_lag_ns;
        *median = sum_median / k - w->base_dev_lag_median_ns;
    } else if (rc == 0) {
        rc = 1;
    }
    free(e);
    free(d);
    return rc;
}

void
workload_free(workload *w)
{
    free_node_arrays(w);
    dfg_free(&w->plan_copy);
    if (w->capture.g) {
        dfg_free(w->capture.g);
        free(w->capture.g);
    }
    free(w->main_thread);
    free(w->bwd_thread);
    free(w->fusion.chain_off);
    free(w->fusion.chain_node);
    free(w->fusion.hinges);
    free(w->f_meas);
    free(w->f_grp_meas);
    free(w->fusion.node_threads);
    free(w->fusion.node_grid_x);
    free(w->fusion.node_hinge);
    free(w->buckets.unit_bytes);
    free(w->buckets.group_unit);
    free(w->buckets.group_hosts);
    free(w->buckets.group_hosts_off);
    free(w->buckets.group_block);
    free(w->buckets.group_block_off);
    free(w->buckets.block_first);
    free(w->buckets.block_dur);
    free(w->buckets.block_gap);
    free(w->buckets.block_after);
    free(w->buckets.after_gap);
    free(w->buckets.host_dur);
    free(w->buckets.host_gap);
    free(w->layers.site_layer);
    free(w->layers.site_anchor);
    free(w->layers.site_off);
    free(w->layers.site_fwd);
    free(w->layers.layer_nfwd);
    free(w->layers.weight_ns);
    free(w->layers.weight_act_ns);
    free(w->buckets.layer_grad);
    free(w->buckets.grad_bytes);
    free(w->buckets.unit_lo);
    free(w->buckets.param_bytes);
    free(w->buckets.unit_param_off);
    free(w->buckets.final_wait);
    free(w->buckets.micro);
    free(w->fsdp.grp_role);
    free(w->fsdp.gather_ops);
    free(w->fsdp.prefetch_ns);
    free(w->fsdp.regather_ns);
    free(w->fsdp.sync_wait_ns);
    memest_free(&w->layers.mem);
    memset(w, 0, sizeof *w);
}

int
workload_has_collectives(const dfg *g)
{
    return g && g->n_groups > 0;
}
