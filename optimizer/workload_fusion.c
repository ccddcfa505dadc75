/*
 * workload_fusion.c: fusion chains (see workload.h): ddp-sim's runs of one kernel name
 * (WL_FUSE_SAME_NAME) and torch.compile's (WL_FUSE_COMPILED).
 */
#define PR_FMT "optimizer"
#include "optimizer/workload_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Classes of device ops under WL_FUSE_COMPILED. */
enum op_class {
    OP_OUT = 0, /* not the compiled model's: left alone, and no boundary of a run */
    OP_FUSE,    /* pointwise work, a memset, a device-to-device copy: fused */
    OP_NORM,    /* a normalisation or softmax: fused, one kernel per reduction */
    OP_REDUCE,  /* a reduction to a smaller tensor: fused, ends its kernel */
    OP_GEMM,    /* GEMM, attention or a collective: stays, and ends a run */
};

static int
has(const char *s, const char *sub)
{
    return strstr(s, sub) != NULL;
}

/* Kernels Inductor leaves to their libraries (cuBLAS, cuBLASLt, CUTLASS, the attention
 * kernels fmha / flash) and NCCL's. */
static int
gemm_name(const char *n)
{
    return has(n, "gemm") || has(n, "gemv") || has(n, "cublas") || has(n, "cutlass") ||
           has(n, "fmha") || has(n, "flash") || has(n, "xmma") || has(n, "nccl");
}

/* Normalisations and softmax (at::native's norms, their backward's GammaBeta and
 * Moments kernels, softmax): a reduction along rows whose output has its input's shape. */
static int
norm_name(const char *n)
{
    return has(n, "_norm") || has(n, "Norm") || has(n, "softmax") || has(n, "SoftMax") ||
           has(n, "GammaBeta") || has(n, "Moments");
}

/* The attention kernels: fmha / flash (aten's, which Inductor calls as they are). */
static int
attention_name(const char *n)
{
    return has(n, "fmha") || has(n, "flash");
}

static enum op_class
op_class(const dfg *g, int32_t m)
{
    if (g->launch[m] < 0)
        return OP_OUT;
    const char *n = dfg_name(g, g->name[m]);
    if (g->kind[m] == DFG_MEMSET || (g->kind[m] == DFG_MEMCPY && !strcmp(n, "memcpy DtoD")))
        return OP_FUSE;
    if (g->kind[m] != DFG_KERNEL)
        return OP_OUT;
    return gemm_name(n) ? OP_GEMM : norm_name(n) ? OP_NORM : has(n, "reduce") ? OP_REDUCE : OP_FUSE;
}

/* Closes the run of compiled-fusible ops run[0 .. n-1] (stream order) into chains: a new
 * chain at each reduction or normalisation but, in the forward, the run's first (the
 * pointwise work before it is its prologue: the residual add of a LayerNorm; in the
 * backward Inductor made it a kernel of its own, as measured in docs/figures.md: a
 * gradient feeds the reduction and other consumers), and after a reduction to a smaller
 * tensor (OP_REDUCE: the pointwise work after it runs over a larger tensor, a kernel of
 * its own; a normalisation's output has its input's shape and takes the pointwise work
 * after it); one chain when it holds no reduction. Chains of one op change nothing and
 * are not kept. A chain's first node is its first kernel (the one whose place and launch
 * the fused kernel takes). */
static void
close_run(const dfg *g, workload_fusion *fu, const int32_t *run, int32_t n, const uint8_t *cls,
          int backward, int32_t *n_nodes)
{
    int32_t start = 0, seen_reduce = 0;
    if (n > 0)
        fu->compiled_runs++;
    for (int32_t i = 0; i <= n; i++) {
        int red = i < n && (cls[run[i]] == OP_REDUCE || cls[run[i]] == OP_NORM);
        int cut = i == n || (red && (backward ? i > start : seen_reduce++ > 0)) ||
                  (i > start && cls[run[i - 1]] == OP_REDUCE);
        if (!cut)
            continue;
        if (i - start >= 2) {
            /* the fused kernel takes the place of the chain's first kernel, launched by a
             * kernel launch (not a memset's or a copy's call) */
            int32_t lead = start;
            while (lead < i - 1 && g->kind[run[lead]] != DFG_KERNEL)
                lead++;
            fu->chain_node[(*n_nodes)++] = run[lead];
            for (int32_t k = start; k < i; k++)
                if (k != lead)
                    fu->chain_node[(*n_nodes)++] = run[k];
            fu->chain_off[++fu->n_chains] = *n_nodes;
        }
        start = i;
    }
}

/* DDP's per-parameter work in the backward (the reducer's copy of each gradient into its
 * bucket and, before it, the gradient's accumulation into .grad), which runs outside the
 * compiled backward: on stream sequence seq[a .. b-1] (one backward), the kernel name
 * launched at least n_params and fewest times (the copy, one a parameter) is marked
 * OP_OUT, with the kernel before each such copy when it has the copy's launch size (or
 * either is unknown). n_params: the device-to-device copies the sequence ends with, DDP's
 * copies of the buckets back into the gradients (one a parameter), counted here rather
 * than taken from workload_find_params, which finds none where an iteration boundary
 * found from the kernels' period falls inside the backward (its all-reduces then span
 * two iterations); none without DDP's all-reduces. */
static void
mark_param_work(const workload *w, const int32_t *seq, int32_t a, int32_t b, uint8_t *cls,
                int32_t *scratch)
{
    const dfg *g = w->g;
    int32_t n_params = 0, best = -1, best_n = 0, k = 0;
    for (int32_t i = b - 1; w->buckets.n_units > 0 && i >= a && g->kind[seq[i]] == DFG_MEMCPY &&
                            cls[seq[i]] == OP_FUSE;
         i--)
        n_params++;
    for (int32_t i = a; n_params > 0 && i < b; i++)
        if (g->kind[seq[i]] == DFG_KERNEL && cls[seq[i]] != OP_GEMM)
            scratch[k++] = g->name[seq[i]];
    qsort(scratch, (size_t)k, sizeof *scratch, cmp_int32);
    for (int32_t i = 0, j; i < k; i = j) {
        for (j = i + 1; j < k && scratch[j] == scratch[i]; j++)
            ;
        if (j - i >= n_params && (best < 0 || j - i < best_n)) {
            best = scratch[i];
            best_n = j - i;
        }
    }
    for (int32_t i = a; best >= 0 && i < b; i++) {
        int32_t m = seq[i];
        if (g->kind[m] != DFG_KERNEL || g->name[m] != best)
            continue;
        cls[m] = OP_OUT;
        if (i > a && g->kind[seq[i - 1]] == DFG_KERNEL && cls[seq[i - 1]] != OP_GEMM) {
            double t = w->fusion.node_threads[m], tp = w->fusion.node_threads[seq[i - 1]];
            if (t <= 0 || tp <= 0 || t == tp)
                cls[seq[i - 1]] = OP_OUT;
        }
    }
}

/* One segment seq[a .. b-1] of a compute stream (find_compiled_runs): the forward's or
 * the backward's. Its runs lie between its first and its last GEMM (before: the optimizer
 * step and zero_grad of the main thread, the loss's backward; after: the loss, DDP's
 * finalisation). */
static void
compiled_segment(workload *w, const int32_t *seq, int32_t a, int32_t b, uint8_t *cls, int32_t *run,
                 int32_t *n_nodes)
{
    int32_t first = -1, last = -1, n = 0;
    if (w->phase[seq[a]] == WL_BACKWARD)
        mark_param_work(w, seq, a, b, cls, run); /* run: scratch until the runs */
    for (int32_t i = a; i < b; i++)
        if (cls[seq[i]] == OP_GEMM) {
            first = first < 0 ? i : first;
            last = i;
        }
    /* memsets right before an attention kernel initialise its outputs (aten's
     * memory-efficient attention does, inside the op Inductor calls as it is): they stay */
    for (int32_t i = first + 1; first >= 0 && i <= last; i++)
        if (attention_name(dfg_name(w->g, w->g->name[seq[i]])))
            for (int32_t j = i - 1; j > first && w->g->kind[seq[j]] == DFG_MEMSET; j--)
                cls[seq[j]] = OP_OUT;
    for (int32_t i = first; first >= 0 && i <= last; i++) {
        int32_t m = seq[i];
        if (cls[m] == OP_GEMM) {
            close_run(w->g, &w->fusion, run, n, cls, w->phase[m] == WL_BACKWARD, n_nodes);
            n = 0;
        } else if (cls[m] != OP_OUT)
            run[n++] = m;
    }
}

/* The host thread that launched device op m, -1 none. */
static int32_t
launch_thread(const dfg *g, int32_t m)
{
    return g->launch[m] >= 0 ? g->res[g->launch[m]] : -1;
}

/* WL_FUSE_COMPILED (workload.h): per compute stream, its segments: the maximal stretches of
 * the iterations' device ops launched by one thread, the main thread's (the optimizer
 * step, zero_grad, the forward and the loss: iteration boundaries found from the kernels'
 * period may fall anywhere in them) or the backward thread's. Returns 0, or -1 when out of
 * memory. */
static int
find_compiled_runs(workload *w, int32_t *n_nodes)
{
    dfg *g = w->g;
    int32_t *seq = malloc(sizeof *seq * (size_t)(g->n_nodes + 1));
    int32_t *run = malloc(sizeof *run * (size_t)(g->n_nodes + 1));
    uint8_t *cls = calloc((size_t)g->n_nodes + 1, 1);
    int rc = seq && run && cls ? 0 : -1;
    for (int32_t q = 0; rc == 0 && q < g->n_res; q++) {
        int32_t n = 0;
        if (g->res_kind[q] != DFG_RES_STREAM)
            continue;
        for (int32_t m = g->res_first[q]; m >= 0; m = g->next_on_res[m])
            if (alive(g, m) && is_device(g, m) && w->on_compute[m] && w->iter[m] >= 0 &&
                (w->phase[m] == WL_FORWARD || w->phase[m] == WL_BACKWARD ||
                 w->phase[m] == WL_OPTIMIZER)) {
                cls[m] = (uint8_t)op_class(g, m);
                seq[n++] = m;
            }
        for (int32_t a = 0, b; a < n; a = b) {
            for (b = a + 1; b < n && launch_thread(g, seq[b]) == launch_thread(g, seq[a]); b++)
                ;
            compiled_segment(w, seq, a, b, cls, run, n_nodes);
        }
    }
    free(seq);
    free(run);
    free(cls);
    return rc;
}

/* Gives back the room chain_off and chain_node took for every node of the graph: they
 * keep the chains found, n_chains + 1 offsets and chain_kernels nodes. */
static void
shrink_chains(workload_fusion *fu)
{
    int32_t *off = realloc(fu->chain_off, sizeof *off * ((size_t)fu->n_chains + 1));
    int32_t *node = realloc(fu->chain_node,
                            sizeof *node * (size_t)(fu->chain_kernels > 0 ? fu->chain_kernels : 1));
    if (off) /* a failed shrink keeps the larger block */
        fu->chain_off = off;
    if (node)
        fu->chain_node = node;
}

int
workload_find_chains(workload *w)
{
    dfg *g = w->g;
    int64_t short_ns = (int64_t)(w->opt.short_kernel_us * NS_PER_US);
    int32_t n_chain_nodes = 0;
    w->fusion.chain_off = malloc(sizeof *w->fusion.chain_off * (size_t)(g->n_nodes + 1));
    w->fusion.chain_node = malloc(sizeof *w->fusion.chain_node * (size_t)(g->n_nodes + 1));
    if (!w->fusion.chain_off || !w->fusion.chain_node)
        return -1;
    w->fusion.n_chains = 0;
    w->fusion.chain_off[0] = 0;
    w->fusion.compiled = w->opt.fusion_scope == WL_FUSE_COMPILED;
    if (w->fusion.compiled) {
        if (find_compiled_runs(w, &n_chain_nodes) != 0)
            return -1;
        w->fusion.chain_kernels = n_chain_nodes;
        shrink_chains(&w->fusion);
        if (w->fusion.n_chains == 0)
            snprintf(w->fusion.why, sizeof w->fusion.why,
                     "no run of two or more non-GEMM device ops between GEMMs in the "
                     "forward or the backward");
        return 0;
    }
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
                w->fusion.chain_node[n_chain_nodes++] = m;
                run_len++;
                prev = m;
                continue;
            }
            /* the run that ended at prev is a chain when it holds two kernels or more */
            if (run_len >= 2)
                w->fusion.chain_off[++w->fusion.n_chains] = n_chain_nodes;
            else
                n_chain_nodes -= run_len;
            if (m < 0)
                break;
            run_len = cand ? 1 : 0;
            prev = cand ? m : -1;
            if (cand)
                w->fusion.chain_node[n_chain_nodes++] = m;
        }
    }
    w->fusion.chain_kernels = n_chain_nodes;
    shrink_chains(&w->fusion);
    if (w->fusion.n_chains == 0)
        snprintf(w->fusion.why, sizeof w->fusion.why,
                 "no run of two or more kernels of at most %.0f us launched back to back",
                 w->opt.short_kernel_us);
    return 0;
}
