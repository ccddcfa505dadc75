/*
 * strategy.c: plans and their application to the working graph (see strategy.h for the
 * models); strategy_text.c writes and reads plans as text.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optimizer/strategy.h"
#include "optimizer/partition.h"
#include "replay/kernels.h"

const double strategy_bucket_caps_mb[] = {0.1, 0.25, 0.5, 1,  2,   4,   5,   8,   10,  16,
                                          25,  32,   50,  64, 100, 128, 256, 512, 1024};
const int strategy_n_bucket_caps =
    (int)(sizeof strategy_bucket_caps_mb / sizeof strategy_bucket_caps_mb[0]);

const uint8_t strategy_accum_steps[] = {1, 2, 4, 8};
const int strategy_n_accum_steps =
    (int)(sizeof strategy_accum_steps / sizeof strategy_accum_steps[0]);

#define MIB 1048576.0

void
strategy_plan_baseline(strategy_plan *p)
{
    memset(p, 0, sizeof *p);
    p->bucket_cap = -1;
    p->first_cap = -1;
    p->accum_k = 1;
}

void
strategy_set_recompute(strategy_plan *p, int32_t l, int on)
{
    if (l < 0 || l >= STRATEGY_MAX_LAYERS)
        return;
    if (on)
        p->recompute[l / 64] |= (uint64_t)1 << (l % 64);
    else
        p->recompute[l / 64] &= ~((uint64_t)1 << (l % 64));
}

int32_t
strategy_n_recomputed(const strategy_plan *p)
{
    int32_t c = 0;
    for (int i = 0; i < STRATEGY_MAX_LAYERS / 64; i++)
        c += __builtin_popcountll(p->recompute[i]);
    return c;
}

unsigned
strategy_plan_families(const strategy_plan *p)
{
    unsigned f = 0;
    if (p->fuse || p->cuda_graph)
        f |= STRATEGY_FUSION;
    if (p->bucket_cap >= 0)
        f |= STRATEGY_TENSOR;
    if (p->accum_k > 1 || strategy_n_recomputed(p) > 0)
        f |= STRATEGY_MEMORY;
    if (p->fsdp_keep || p->prefetch || p->fsdp_reshard)
        f |= STRATEGY_FSDP;
    return f;
}

/* Bucket grouping of plan p over the units: close[u] = 1 where a bucket ends, with its
 * bytes in bytes_at[u]. Returns the number of buckets. */
static int32_t
group_units(const workload_buckets *b, const strategy_plan *p, uint8_t *close, int64_t *bytes_at)
{
    double cap = strategy_bucket_caps_mb[p->first_cap >= 0 ? p->first_cap : p->bucket_cap] * MIB;
    int64_t cur = 0;
    int32_t nb = 0;
    for (int32_t u = 0; u < b->n_units; u++) {
        cur += b->unit_bytes[u];
        close[u] = 0;
        if ((double)cur >= cap || u == b->n_units - 1) {
            close[u] = 1;
            bytes_at[u] = cur;
            cur = 0;
            nb++;
            cap = strategy_bucket_caps_mb[p->bucket_cap] * MIB;
        }
    }
    return nb;
}

int
strategy_tensor_available(const workload *w)
{
    return w->buckets.n_units >= 1 && w->buckets.model && !w->buckets.why[0];
}

int
strategy_fsdp_available(const workload *w)
{
    return w->fsdp.grp_role && !w->fsdp.why[0];
}

int
strategy_fsdp_reshard_available(const workload *w)
{
    return strategy_fsdp_available(w) && w->fsdp.n_bwd < 1 && w->fsdp.n_regather > 0 &&
           w->fsdp.regather_ns;
}

void
strategy_partition_input(const workload *w, partition_input *in)
{
    in->g = w->g;
    in->bu = &w->buckets;
    in->layer_nfwd = w->layers.layer_nfwd;
    in->n_layers = w->layers.n_layers;
    in->n_nodes = w->n_nodes;
    in->n_groups = w->n_groups;
    in->iter = w->iter;
    in->phase = w->phase;
    in->on_compute = w->on_compute;
    in->base_dur = w->base_dur;
    in->iter_first = w->iter_first;
}

int32_t
strategy_bucket_count(const workload *w, const strategy_plan *p)
{
    if (p->bucket_cap < 0 || !strategy_tensor_available(w))
        return 0;
    if (partition_splits(&w->buckets, p)) {
        partition_input in;
        strategy_partition_input(w, &in);
        return partition_bucket_count(&in, p);
    }
    uint8_t close[4096];
    int64_t bytes[4096];
    if (w->buckets.n_units > 4096)
        return 0;
    return group_units(&w->buckets, p, close, bytes);
}

int32_t
strategy_bucket_bytes(const workload *w, const strategy_plan *p, int64_t *out, int32_t max)
{
    const workload_buckets *bu = &w->buckets;
    int32_t n = 0;
    if (p->bucket_cap >= 0 && strategy_tensor_available(w) && partition_splits(bu, p)) {
        partition_input in;
        strategy_partition_input(w, &in);
        n = partition_bucket_bytes(&in, p, out, max);
    } else if (p->bucket_cap >= 0 && strategy_tensor_available(w)) {
        uint8_t *close = malloc((size_t)bu->n_units);
        int64_t *bytes = malloc(sizeof *bytes * (size_t)bu->n_units);
        n = close && bytes ? 0 : -1;
        if (n == 0)
            group_units(bu, p, close, bytes);
        for (int32_t u = 0; n >= 0 && u < bu->n_units; u++)
            if (close[u] && n++ < max)
                out[n - 1] = bytes[u];
        free(close);
        free(bytes);
    }
    return n;
}

int32_t
strategy_unseen_buckets(const workload *w, const strategy_plan *p, costmodel_regime *r)
{
    const workload_buckets *bu = &w->buckets;
    int32_t n = strategy_bucket_count(w, p), k = 0;
    int64_t *bytes = NULL;
    memset(r, 0, sizeof *r);
    if (n > 0 && bu->model) {
        bytes = malloc(sizeof *bytes * (size_t)n);
        n = bytes ? strategy_bucket_bytes(w, p, bytes, n) : -1;
        k = n < 0 ? -1 : 0;
        for (int32_t i = 0; i < n; i++) {
            costmodel_regime ri;
            if (costmodel_regime_at(bu->model, bu->coll_op, bu->coll_nranks, bytes[i], &ri) &&
                k++ == 0)
                *r = ri;
        }
    }
    free(bytes);
    return k;
}

static void
zero_host(dfg *g, int32_t h)
{
    if (h >= 0) {
        g->dur[h] = 0;
        g->gap[h] = 0;
    }
}

/* A memset the micro-batch runs (workload.h: micro, else its phase): the forward's and
 * backward's, not the gradients' zeroing (WL_MICRO_SYNC_ONLY) nor the optimizer's. */
static int
micro_memset(const dfg *g, const uint8_t *phase, const uint8_t *micro, int32_t d)
{
    int role = micro ? micro[d] : WL_MICRO_PHASE;
    return g->kind[d] == DFG_MEMSET && g->launch[d] >= 0 && role != WL_MICRO_SYNC_ONLY &&
           (role == WL_MICRO_FORWARD || phase[d] == WL_FORWARD || phase[d] == WL_BACKWARD);
}

typedef struct {
    int32_t res;
    int64_t dur;
} res_dur;

static int
cmp_res_dur(const void *a, const void *b)
{
    const res_dur *x = a, *y = b;
    if (x->res != y->res)
        return x->res < y->res ? -1 : 1;
    return (x->dur > y->dur) - (x->dur < y->dur);
}

/* The host calls of the micro-batch's memsets at 1/k of the batch (docs/models.md:
 * accumulation): a call's duration beyond the median of its thread's memset calls takes
 * 1/k (the bytes it sets are the activations', which scale with the batch). Returns 0, or
 * -1 when out of memory. */
static int
scale_memset_calls(dfg *g, const uint8_t *phase, const uint8_t *micro, int32_t k)
{
    int rc = 0;
    int32_t n = 0, cap = 0;
    for (int32_t d = 0; d < g->n_nodes; d++)
        cap += g->kind[d] == DFG_MEMSET;
    res_dur *calls = malloc(sizeof *calls * ((size_t)cap + 1));
    int64_t *med = calloc((size_t)g->n_res + 1, sizeof *med);
    for (int32_t d = 0; calls && med && d < g->n_nodes; d++) {
        int32_t h = g->launch[d];
        if (g->kind[d] == DFG_MEMSET && h >= 0 && g->launched[dfg_launched_first(g, h)] == d)
            calls[n++] = (res_dur){g->res[h], dfg_dur(g, h)};
    }
    if (!calls || !med)
        rc = -1;
    else
        qsort(calls, (size_t)n, sizeof *calls, cmp_res_dur);
    for (int32_t a = 0, b = 0; rc == 0 && a < n; a = b) { /* each thread's median call */
        while (b < n && calls[b].res == calls[a].res)
            b++;
        med[calls[a].res] = calls[a + (b - a) / 2].dur;
    }
    for (int32_t d = 0; rc == 0 && d < g->n_nodes; d++) {
        int32_t h = g->launch[d];
        if (!micro_memset(g, phase, micro, d) || g->launched[dfg_launched_first(g, h)] != d)
            continue;
        int64_t t = dfg_dur(g, h), m = med[g->res[h]];
        if (t > m)
            rc |= dfg_set_dur(g, h, m + (t - m) / k);
    }
    free(calls);
    free(med);
    return rc;
}

/* The forward and backward kernels of a micro-batch of 1/k of the batch (docs/models.md:
 * accumulation): f + max(v / k, w + min(v - w, a) / k), v = t - f, f = min(t, c0), w the
 * kernel's weight floor and a the time of its input and output (workload.h:
 * workload_layers; weight_ns NULL: none): f + w + (v - w) / k for a kernel bound by its
 * bytes (a >= v - w), the floor a lower bound under the FLOPs' share for one bound by its
 * FLOPs; the host making the batch (workload.h: WL_MICRO_INPUT, micro NULL: none known):
 * the input copy's call and the gap before it take 1/k, once per call; and the memsets'
 * calls (scale_memset_calls). Returns 0, or -1 when out of memory (dfg_set_dur), as the
 * other apply_ that set durations. */
static int
apply_accumulation(dfg *g, const uint8_t *phase, const uint8_t *micro, const workload_fusion *fu,
                   const workload_layers *ly, int32_t k)
{
    int rc = scale_memset_calls(g, phase, micro, k);
    double c0 = fu->kernel_fixed_ns;
    for (int32_t d = 0; micro && d < g->n_nodes; d++) {
        int32_t h = g->launch[d];
        if (micro[d] != WL_MICRO_INPUT || h < 0 || g->launched[dfg_launched_first(g, h)] != d)
            continue;
        rc |= dfg_set_dur(g, h, dfg_dur(g, h) / k) | dfg_set_gap(g, h, dfg_gap(g, h) / k);
    }
    for (int32_t d = 0; d < g->n_nodes; d++) {
        if (g->kind[d] != DFG_KERNEL || (phase[d] != WL_FORWARD && phase[d] != WL_BACKWARD))
            continue;
        double t = (double)dfg_dur(g, d);
        double f = t < c0 ? t : c0;
        double w = ly->weight_ns ? (double)ly->weight_ns[d] : 0;
        double a = ly->weight_act_ns ? (double)ly->weight_act_ns[d] : 0;
        double v = t - f, bytes = w + (a < v - w ? a : v - w) / k;
        rc |= dfg_set_dur(g, d, (int64_t)llround(f + (v / k > bytes ? v / k : bytes)));
    }
    return rc;
}

/* The fused kernel of chain c by its name's hinge (workload.h): h(sum of the threads) x
 * (sum of the durations / sum of h(threads)), the hinge scaled to what this chain's
 * kernels measured, and at least its longest kernel; -1 when a kernel of the chain has no
 * hinge, another name's or no launch size. */
static double
hinge_fused(const dfg *g, const workload_fusion *fu, int32_t c)
{
    int32_t a = fu->chain_off[c], b = fu->chain_off[c + 1];
    int32_t hi = fu->node_hinge ? fu->node_hinge[fu->chain_node[a]] : -1;
    double threads = 0, dur = 0, model = 0, longest = 0;
    if (hi < 0)
        return -1;
    const workload_hinge *h = &fu->hinges[hi];
    for (int32_t i = a; i < b; i++) {
        int32_t m = fu->chain_node[i];
        if (fu->node_hinge[m] != hi || fu->node_threads[m] <= 0)
            return -1;
        threads += fu->node_threads[m];
        dur += (double)dfg_dur(g, m);
        model += workload_hinge_at(h, fu->node_threads[m]);
        longest = (double)dfg_dur(g, m) > longest ? (double)dfg_dur(g, m) : longest;
    }
    if (model <= 0)
        return -1;
    double t = workload_hinge_at(h, threads) * dur / model;
    return t > longest ? t : longest;
}

/* A compiler's fused kernel of chain c (WL_FUSE_COMPILED, strategy.h): one fixed cost c0
 * and the largest variable part t_i - min(t_i, c0) of the chain's ops. */
static double
compiled_fused(const dfg *g, const workload_fusion *fu, int32_t c)
{
    double c0 = fu->kernel_fixed_ns, var = 0;
    for (int32_t i = fu->chain_off[c]; i < fu->chain_off[c + 1]; i++) {
        double t = (double)dfg_dur(g, fu->chain_node[i]);
        var = t - (t < c0 ? t : c0) > var ? t - (t < c0 ? t : c0) : var;
    }
    return c0 + var;
}

static int
apply_fusion(dfg *g, const workload_fusion *fu, int fixed_only)
{
    int rc = 0;
    double c0 = fu->kernel_fixed_ns;
    for (int32_t c = 0; c < fu->n_chains; c++) {
        int32_t a = fu->chain_off[c], b = fu->chain_off[c + 1];
        int32_t first = fu->chain_node[a];
        double by_hinge = fu->compiled ? compiled_fused(g, fu, c)
                          : fixed_only ? -1
                                       : hinge_fused(g, fu, c);
        double fused = (double)dfg_dur(g, first);
        for (int32_t i = a + 1; i < b; i++) {
            int32_t m = fu->chain_node[i];
            double t = (double)dfg_dur(g, m);
            fused += t - (t < c0 ? t : c0);
            int32_t h = g->launch[m], hp = g->launch[fu->chain_node[i - 1]];
            g->dur[m] = 0;
            g->gap[m] = 0;
            dfg_set_lat(g, m, 0);
            if (h != hp)
                zero_host(g, h); /* not when a graph launch runs the whole chain */
        }
        rc |= dfg_set_dur(g, first, (int64_t)llround(by_hinge >= 0 ? by_hinge : fused));
    }
    return rc;
}

static int
apply_recompute(dfg *g, const workload_layers *la, const strategy_plan *p)
{
    int rc = 0;
    for (int32_t s = 0; s < la->n_sites; s++) {
        if (!strategy_recomputes(p, la->site_layer[s]))
            continue;
        int64_t dev = 0, host = 0;
        for (int32_t i = la->site_off[s]; i < la->site_off[s + 1]; i++) {
            int32_t f = la->site_fwd[i];
            dev += dfg_dur(g, f);
            if (g->launch[f] >= 0)
                host += dfg_dur(g, g->launch[f]) + dfg_gap(g, g->launch[f]);
        }
        int32_t a = la->site_anchor[s];
        rc |= dfg_set_dur(g, a, dfg_dur(g, a) + dev);
        if (g->launch[a] >= 0)
            rc |= dfg_set_dur(g, g->launch[a], dfg_dur(g, g->launch[a]) + host);
    }
    return rc;
}

static void
apply_buckets(dfg *g, const workload_buckets *bu, const strategy_plan *p)
{
    uint8_t *close = malloc((size_t)bu->n_units);
    int64_t *bytes = malloc(sizeof *bytes * (size_t)bu->n_units);
    if (!close || !bytes) {
        free(close);
        free(bytes);
        return;
    }
    group_units(bu, p, close, bytes);
    for (int32_t q = 0; q < g->n_groups; q++) {
        int32_t u = bu->group_unit[q];
        if (u < 0)
            continue;
        if (close[u]) {
            g->grp_dur[q] = costmodel_predict(bu->model, bu->coll_op, bu->coll_nranks, bytes[u]);
            continue;
        }
        g->grp_dur[q] = 0;
        workload_drop_bucket_hosts(g, bu, q);
    }
    free(close);
    free(bytes);
}

/* FSDP's unsharding (see strategy.h): the backward's all-gathers gone (keep), the unshards
 * issued one unit ahead (prefetch), the units gathered again in the backward (reshard). */
static int
apply_fsdp(dfg *g, const workload_fsdp *f, const strategy_plan *p, int reshard)
{
    int rc = 0;
    for (int32_t d = 0; reshard && d < g->n_nodes; d++) {
        if (f->regather_ns[d] <= 0)
            continue;
        if (g->kind[d] == DFG_HOST)
            rc |= dfg_set_gap(g, d, dfg_gap(g, d) + f->regather_ns[d]);
        else
            rc |= dfg_set_dur(g, d, dfg_dur(g, d) + f->regather_ns[d]);
    }
    for (int32_t d = 0; reshard && d < g->n_nodes; d++)
        if (f->sync_wait_ns[d] > 0)
            rc |= dfg_set_dur(g, d, dfg_dur(g, d) + f->sync_wait_ns[d]);
    for (int32_t d = 0; d < g->n_nodes; d++) {
        int32_t q = f->gather_ops[d];
        if (q < 0)
            continue;
        if (p->fsdp_keep && f->grp_role[q] == WL_FSDP_BWD) {
            g->dur[d] = 0;
            g->gap[d] = 0;
            dfg_set_lat(g, d, 0);
            zero_host(g, g->launch[d]);
        } else if (p->prefetch)
            dfg_set_lat(g, d, (int32_t)(dfg_lat(g, d) - f->prefetch_ns[d]));
    }
    for (int32_t q = 0; p->fsdp_keep && q < g->n_groups; q++)
        if (f->grp_role[q] == WL_FSDP_BWD)
            g->grp_dur[q] = 0;
    return rc;
}

/* The step captured in a CUDA graph (see strategy.h), written into w->capture.g when the
 * working graph has one (the launch-queue edges of the step's calls left out: one graph
 * launch submits the step, so no per-kernel launch call waits for room in the queue). */
static int
apply_cuda_graph(dfg *g, const workload_capture *ca, const int32_t *iter, const uint8_t *phase,
                 int scope)
{
    int rc = 0;
    /* A blocking call that stays (the step's closing synchronisation) takes its thread's
     * idle-host wake-up latency (ca->idle_wake_dur, the lower quartile over the trace)
     * instead of the one it measured: with the step captured no launch thread of the job
     * competes with it for the cores when it is woken. */
    for (int32_t h = 0, i = 0; h < g->n_nodes; h++) {
        while (i < ca->n_idle_wake && ca->idle_wake_node[i] < h)
            i++;
        if (ca->step_call[h])
            zero_host(g, h);
        else if (scope == WL_CAPTURE_STEP && i < ca->n_idle_wake && ca->idle_wake_node[i] == h)
            rc |= dfg_set_dur(g, h, ca->idle_wake_dur[i]);
    }
    /* the graph launch: its call stays, the eager step's CPU time before it goes */
    for (int32_t i = 0; i < ca->n_graph_launch; i++)
        g->gap[ca->graph_launch[i]] = 0;
    /* Wake-ups (DFG_F_WAKEUP: the gap is the wake-up latency after the waker, a call of
     * another thread). In the captured step no thread hands work to another: the graph
     * launch replays the backward thread's work on the device. A wake-up whose waker is
     * a call of the step therefore costs nothing: the woken call still follows its
     * waker's end (a call of the step: zeroed as well), without latency. A wake-up by a
     * call that stays (a blocking synchronisation, a thread outside the step) keeps its
     * latency, unless the woken call is itself a call of the step (zeroed above). A
     * capture of the compute only (WL_CAPTURE_COMPUTE) leaves the threads' hand-overs and
     * the blocking calls as measured: the rest of the step still runs on the host. */
    for (int64_t i = 0; scope == WL_CAPTURE_STEP && i < g->n_edges; i++) {
        int32_t s = g->esrc[i], d = g->edst[i];
        if (g->kind[d] == DFG_HOST && (g->flags[d] & DFG_F_WAKEUP) && iter[d] >= 0 &&
            ca->step_call[s])
            g->gap[d] = 0;
    }
    /* the captured device work follows itself without launch latency or idle gaps: the
     * whole step's, or (WL_CAPTURE_COMPUTE) the forward and backward kernels' */
    for (int32_t d = 0; d < g->n_nodes; d++) {
        if (g->kind[d] == DFG_HOST || iter[d] < 0 || phase[d] == WL_OTHER)
            continue;
        if (scope == WL_CAPTURE_COMPUTE &&
            (g->kind[d] != DFG_KERNEL || (phase[d] != WL_FORWARD && phase[d] != WL_BACKWARD)))
            continue;
        dfg_set_lat(g, d, 0);
        g->gap[d] = 0;
    }
    return rc;
}

int
strategy_apply(workload *w, const strategy_plan *p)
{
    w->g = p->cuda_graph && w->capture.g ? w->capture.g : w->work;
    int rc = workload_reset(w);
    if (rc == 0 && p->accum_k > 1)
        rc = apply_accumulation(w->g, w->phase, w->buckets.micro, &w->fusion, &w->layers,
                                p->accum_k);
    if (rc == 0 && p->fuse && w->fusion.n_chains > 0)
        rc = apply_fusion(w->g, &w->fusion, w->opt.fusion_fixed);
    if (rc == 0 && strategy_n_recomputed(p) > 0 && w->layers.n_sites > 0)
        rc = apply_recompute(w->g, &w->layers, p);
    if (p->bucket_cap >= 0 && strategy_tensor_available(w) && !partition_splits(&w->buckets, p))
        apply_buckets(w->g, &w->buckets, p); /* a splitting plan: partition_build, on a copy */
    if (rc == 0 && (p->fsdp_keep || p->prefetch || p->fsdp_reshard) && strategy_fsdp_available(w))
        rc = apply_fsdp(w->g, &w->fsdp, p, p->fsdp_reshard && strategy_fsdp_reshard_available(w));
    if (rc == 0 && p->cuda_graph)
        rc = apply_cuda_graph(w->g, &w->capture, w->iter, w->phase, w->opt.capture_scope);
    return rc;
}

int
strategy_fusion_summary(workload *w, double *chain_ns, double *fused_ns)
{
    int rc;
    strategy_plan p;
    const workload_fusion *fu = &w->fusion;
    double before = 0, after = 0;
    double n_iter = 0; /* compared rank-iterations, each rank by workload_rank_weight */
    for (int32_t r = 0; r < w->work->n_ranks; r++)
        n_iter += workload_rank_weight(w, r) * (double)(w->iter_last - w->iter_first + 1);
    strategy_plan_baseline(&p);
    rc = strategy_apply(w, &p);
    for (int32_t c = 0; rc == 0 && c < fu->n_chains; c++) {
        int32_t first = fu->chain_node[fu->chain_off[c]];
        if (w->iter[first] < w->iter_first || w->iter[first] > w->iter_last)
            continue;
        for (int32_t i = fu->chain_off[c]; i < fu->chain_off[c + 1]; i++)
            before += workload_rank_weight(w, dfg_rank(w->g, first)) *
                      (double)dfg_dur(w->g, fu->chain_node[i]);
    }
    p.fuse = 1;
    if (rc == 0)
        rc = strategy_apply(w, &p);
    for (int32_t c = 0; rc == 0 && c < fu->n_chains; c++) {
        int32_t first = fu->chain_node[fu->chain_off[c]];
        if (w->iter[first] >= w->iter_first && w->iter[first] <= w->iter_last)
            after += workload_rank_weight(w, dfg_rank(w->g, first)) * (double)dfg_dur(w->g, first);
    }
    p.fuse = 0;
    if (rc == 0)
        rc = strategy_apply(w, &p);
    *chain_ns = n_iter > 0 ? before / n_iter : 0;
    *fused_ns = n_iter > 0 ? after / n_iter : 0;
    return rc;
}

/* Per micro-batch without synchronisation: max(device time of the forward and backward
 * kernels on the compute stream, host time of their launches) per iteration of a rank; the
 * forward and backward as workload.h: micro says (what only the synchronised micro-batch
 * runs left out, the next step's forward of an iteration cut between forward and backward
 * counted, the host calls that launch nothing but every micro-batch makes priced:
 * WL_MICRO_CALL, and the host time before the event polls among them: WL_MICRO_GAP).
 * Under FSDP2 each adds the accumulation into the kept unsharded gradients, which the
 * trace does not run (workload.h: workload_fsdp's accum_dev_ns on the compute stream,
 * accum_host_ns, n_adds launches), and the host's return from the backward (return_ns).
 * Returns max(mean device time, mean host time) over the compared iterations of every rank
 * with a trace (a class of folded ranks by its weight: workload_rank_weight), and into
 * *median each rank's median of the iterations' max(device, host), averaged over those
 * ranks alike (as workload_iteration_median_ns: a host stall of a few iterations moves the
 * mean, not the median step); -1 when out of memory. */
static double
micro_batch_ns(const workload *w, int cuda_graph, strategy_eval *out, double *median)
{
    const dfg *g = w->g;
    const uint8_t *micro = w->buckets.micro;
    int32_t n_it = w->iter_last - w->iter_first + 1, n_r = g->n_ranks > 0 ? g->n_ranks : 1;
    int64_t n_iter = (int64_t)(n_it > 0 ? n_it : 0) * n_r;
    int64_t *dev = calloc((size_t)n_iter + 1, sizeof *dev);
    int64_t *host = calloc((size_t)n_iter + 1, sizeof *host);
    double mean = -1, ops = 0, dev_sum = 0, host_sum = 0, weight = 0;
    *median = 0;
    for (int32_t d = 0; dev && host && d < g->n_nodes; d++) {
        if (w->iter[d] < w->iter_first || w->iter[d] > w->iter_last || dfg_rank(g, d) >= n_r)
            continue;
        int role = micro ? micro[d] : WL_MICRO_PHASE;
        if (role == WL_MICRO_SYNC_ONLY ||
            (role == WL_MICRO_PHASE && w->phase[d] != WL_FORWARD && w->phase[d] != WL_BACKWARD))
            continue;
        int64_t i = (int64_t)dfg_rank(g, d) * n_it + (w->iter[d] - w->iter_first);
        if (role == WL_MICRO_CALL || role == WL_MICRO_GAP) { /* a host call, launching nothing */
            if (!(cuda_graph && w->opt.capture_scope == WL_CAPTURE_STEP))
                host[i] += (role == WL_MICRO_CALL ? dfg_dur(g, d) : 0) + dfg_gap(g, d);
            continue;
        }
        int32_t h = g->launch[d];
        ops += workload_iteration_kept(w, w->iter[d]) ? workload_rank_weight(w, dfg_rank(g, d)) : 0;
        if (w->on_compute[d])
            dev[i] += dfg_dur(g, d) + dfg_gap(g, d);
        if (h >= 0 && !(cuda_graph && w->opt.capture_scope == WL_CAPTURE_STEP))
            host[i] += dfg_dur(g, h) + dfg_gap(g, h);
    }
    for (int64_t i = 0; dev && host && i < n_iter; i++) {
        double wt = workload_iteration_kept(w, w->iter_first + (int32_t)(i % n_it)) /* means */
                        ? workload_rank_weight(w, (int32_t)(i / n_it))
                        : 0;
        dev[i] += (int64_t)llround(w->fsdp.accum_dev_ns); /* FSDP2's adds, 0 elsewhere */
        host[i] += (int64_t)llround(w->fsdp.accum_host_ns) + w->fsdp.return_ns;
        ops += wt * (w->fsdp.accum_dev_ns > 0 ? w->fsdp.n_adds : 0);
        dev_sum += wt * (double)dev[i];
        host_sum += wt * (double)host[i];
        dev[i] = dev[i] > host[i] ? dev[i] : host[i]; /* the micro-batch, in place */
    }
    for (int32_t r = 0; dev && host && n_it > 0 && r < n_r; r++) {
        double wt = workload_rank_weight(w, r);
        if (wt > 0) {
            *median += wt * sim_median_i64(dev + (int64_t)r * n_it, n_it);
            weight += wt;
        }
    }
    if (dev && host) {
        double n = weight * (double)workload_iterations_kept(w); /* rank-iterations, by weight */
        *median = weight > 0 ? *median / weight : 0;
        mean = n > 0 ? (dev_sum > host_sum ? dev_sum : host_sum) / n : 0;
        out->micro_device_ns = n > 0 ? dev_sum / n : 0;
        out->micro_host_ns = n > 0 ? host_sum / n : 0;
        out->micro_launches = n > 0 ? ops / n : 0;
    }
    free(dev);
    free(host);
    return mean;
}

/* Contention (workload.h, replay/contention.h): the simulated schedule res of g overlaps
 * compute and transfers otherwise than the trace did; each compute kernel of the trace
 * takes dur x (1 + k_comp f) / (1 + k_comp f_measured), each collective's transfer
 * x (1 + k_comm f) / (1 + k_comm f_measured) (a new group: the groups' mean measured
 * overlap, what the cost model was fitted at), f the overlap in res; then g is simulated
 * again into res. Returns 0, 1 when nothing is to correct, -1 out of memory. */
static int
correct_contention(const workload *w, dfg *g, sim_result *res)
{
    double kp = w->contention.comp.fitted ? w->contention.comp.k : 0;
    double kc = w->contention.comm.fitted ? w->contention.comm.k : 0;
    if (w->opt.no_contention || (kp <= 0 && kc <= 0))
        return 1;
    double *fn = malloc(sizeof *fn * ((size_t)g->n_nodes + 1));
    double *fg = malloc(sizeof *fg * ((size_t)g->n_groups + 1));
    int rc = fn && fg ? contention_overlaps(g, res->start, res->end, res->grp_arrival, fn, fg) : -1;
    for (int32_t d = 0; rc == 0 && kp > 0 && d < g->n_nodes && d < w->n_nodes; d++)
        if (fn[d] >= 0 && w->f_meas[d] >= 0)
            rc = dfg_set_dur(g, d,
                             (int64_t)llround((double)dfg_dur(g, d) * (1 + kp * fn[d]) /
                                              (1 + kp * w->f_meas[d])));
    for (int32_t q = 0; rc == 0 && kc > 0 && q < g->n_groups; q++) {
        double fm = q < w->n_groups ? w->f_grp_meas[q] : w->f_grp_mean;
        g->grp_dur[q] = (int64_t)llround((double)g->grp_dur[q] * (1 + kc * fg[q]) / (1 + kc * fm));
    }
    free(fn);
    free(fg);
    if (rc == 0)
        rc = sim_run(g, res);
    return rc;
}

int
strategy_plan_graph(workload *w, const strategy_plan *p, dfg *copy, dfg **out, int32_t *n_buckets)
{
    int rc = 0;
    *out = w->g;
    if (partition_splits(&w->buckets, p)) {
        partition_input in;
        strategy_partition_input(w, &in);
        rc = partition_build(&in, p, copy, n_buckets);
        if (rc == 0)
            *out = copy;
    } else {
        if (n_buckets)
            *n_buckets = strategy_bucket_count(w, p);
        if (p->bucket_cap >= 0 && strategy_tensor_available(w) &&
            workload_folds_buckets(w->g, &w->buckets, w->n_groups)) {
            rc = dfg_copy(copy, w->g);
            if (rc == 0 && workload_unhook_folded(copy, &w->buckets, w->n_groups) < 0) {
                dfg_free(copy);
                rc = -1;
            }
            if (rc == 0)
                *out = copy;
        }
    }
    return rc;
}

int
strategy_evaluate(workload *w, const strategy_plan *p, sim_result *res, strategy_eval *out)
{
    double dev_mean = -1, dev_med = -1; /* the device's pace, for a captured step */
    out->iter_ns = out->median_ns = out->typical_ns = -1;
    out->peak_bytes = -1;
    out->micro_device_ns = out->micro_host_ns = out->micro_launches = 0;
    if (strategy_apply(w, p) != 0)
        return -1;
    dfg *sg;
    if (strategy_plan_graph(w, p, &w->plan_copy, &sg, &out->n_buckets) != 0)
        return -1;
    int src = sim_run(sg, res);
    if (src == 0 && correct_contention(w, sg, res) < 0)
        src = -1;
    if (src == 0 && p->cuda_graph &&
        workload_device_iteration_ns(w, sg, res, &dev_mean, &dev_med) < 0)
        src = -1;
    if (src != 0)
        return -1;
    double t = workload_iteration_ns(w, res), med = workload_iteration_median_ns(w, res);
    if (t < 0 || med < 0)
        return -1;
    /* A captured step's calls are not held by the launch queue (strategy.h), so the
     * simulated host may run ahead of its device without bound over the compared
     * iterations: the step repeats at the slower of the two paces. */
    t = dev_mean > t ? dev_mean : t;
    med = dev_med > med ? dev_med : med;
    if (p->accum_k > 1) {
        double micro_med, micro = micro_batch_ns(w, p->cuda_graph, out, &micro_med);
        if (micro < 0)
            return -1;
        t += (double)(p->accum_k - 1) * micro;
        med += (double)(p->accum_k - 1) * micro_med;
    }
    out->iter_ns = t;
    out->median_ns = med;
    if (w->layers.have_memory) {
        uint8_t rc[STRATEGY_MAX_LAYERS];
        int32_t L = w->layers.mem.n_layers < STRATEGY_MAX_LAYERS ? w->layers.mem.n_layers
                                                                 : STRATEGY_MAX_LAYERS;
        for (int32_t l = 0; l < L; l++)
            rc[l] = (uint8_t)strategy_recomputes(p, l);
        out->peak_bytes =
            memest_predict(&w->layers.mem, L > 0 ? rc : NULL, L, w->opt.recompute_keep, p->accum_k);
        if (out->peak_bytes < 0)
            return -1; /* out of memory (a negative peak reads "no estimate": feasible) */
        if (p->accum_k > 1 && strategy_fsdp_available(w))
            out->peak_bytes +=
                workload_fsdp_accum_bytes(w, p->accum_k, memest_act_bytes(&w->layers.mem));
        if (p->fsdp_keep && strategy_fsdp_available(w))
            out->peak_bytes += w->fsdp.gathered_bytes;
        if (p->fsdp_reshard && strategy_fsdp_reshard_available(w))
            out->peak_bytes -= w->fsdp.gathered_bytes;
    }
    return 0;
}

int
strategy_evaluate_typical(workload *w, const strategy_plan *p, sim_result *res, strategy_eval *out)
{
    strategy_eval e;
    int64_t *dur = w->base_dur, *gap = w->base_gap;
    w->base_dur = w->typ_dur; /* strategies start from base_dur and base_gap (reset) */
    w->base_gap = w->typ_gap;
    int rc = strategy_evaluate(w, p, res, &e);
    w->base_dur = dur;
    w->base_gap = gap;
    if (rc == 0)
        out->typical_ns = e.median_ns;
    if (strategy_apply(w, p) != 0)
        rc = -1;
    return rc;
}
