/*
 * workload_floor.c: the weight floors of the layers' kernels under gradient accumulation
 * (workload.h: workload_layers.weight_ns; strategy.h: accumulation).
 *
 * A GEMM reads its layer's weights whatever the batch, so at 1/k of the batch its time
 * does not fall below the time to read them. The bandwidth comes from the optimizer's
 * kernels, which pass over the parameters a number of times the trace tells: the
 * parameters and their gradients (read p and g, write p: 3 passes) and each copy of the
 * optimizer state (read and write: 2 passes per copy; Adam keeps 2 copies, 7 passes).
 * The copies are the memory estimate's optimizer bytes over the parameters' when that is
 * 1 to 4; else (the state allocated before the first compared iteration, where the
 * estimate counts it static) Adam's 2, a prior.
 *
 * Whether the floor binds is read from the kernel's own time: a kernel bound by its bytes
 * took about its pass over the weights plus reading its input and writing its output at
 * that bandwidth (the layer's activations each, shared among the layer's kernels of its
 * name in that phase); one that took longer was bound by its FLOPs, which shrink with the
 * batch, and its weights are read under the arithmetic: the floor is then a lower bound
 * (strategy.h: accumulation; workload_layers.weight_act_ns).
 */
#define PR_FMT "optimizer"
#include "optimizer/workload_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define WORKLOAD_OPT_STATE_COPIES 2 /* Adam: exp_avg and exp_avg_sq */

/* What the floor sorts: a forward or backward kernel of a layer, by its group (rank,
 * iteration, layer, phase) and, within it, longest variable part first. */
typedef struct floor_kernel {
    int32_t rank, iter, layer, phase, node, name;
    double var_ns; /* its duration less the fixed part f = min(t, c0) */
} floor_kernel;

static int
cmp_floor_kernel(const void *a, const void *b)
{
    const floor_kernel *x = a, *y = b;
    if (x->rank != y->rank)
        return (x->rank > y->rank) - (x->rank < y->rank);
    if (x->iter != y->iter)
        return (x->iter > y->iter) - (x->iter < y->iter);
    if (x->layer != y->layer)
        return (x->layer > y->layer) - (x->layer < y->layer);
    if (x->phase != y->phase)
        return (x->phase > y->phase) - (x->phase < y->phase);
    return (x->var_ns < y->var_ns) - (x->var_ns > y->var_ns);
}

static double
var_part(const dfg *g, int32_t d, double c0)
{
    double t = (double)dfg_dur(g, d);
    return t - (t < c0 ? t : c0);
}

/* The bandwidth (bytes/ns) the optimizer's kernels of the compared iterations show over
 * the parameters' bytes, or 0 with w->layers.weight_why set. */
static double
optimizer_bandwidth(workload *w, int64_t params)
{
    const dfg *g = w->g;
    double c0 = w->fusion.kernel_fixed_ns, var = 0;
    double copies = params > 0 ? round((double)w->layers.mem.optimizer_bytes / (double)params) : 0;
    int64_t n_iter =
        (int64_t)(w->iter_last - w->iter_first + 1) * (g->n_ranks > 0 ? g->n_ranks : 1);
    for (int32_t d = 0; d < g->n_nodes; d++)
        if (alive(g, d) && g->kind[d] == DFG_KERNEL && w->phase[d] == WL_OPTIMIZER &&
            w->iter[d] >= w->iter_first && w->iter[d] <= w->iter_last)
            var += var_part(g, d, c0);
    if (copies < 1 || copies > 4)
        copies = WORKLOAD_OPT_STATE_COPIES; /* the state was allocated before the trace's
                                               first iteration (static) or is not seen */
    if (var <= 0 || n_iter <= 0)
        snprintf(w->layers.weight_why, sizeof w->layers.weight_why,
                 "no optimizer kernels in the compared iterations");
    return var > 0 && n_iter > 0 ? (3 + 2 * copies) * (double)params / (var / (double)n_iter) : 0;
}

/* Fills weight_ns and weight_act_ns for the kernels of one group fk[0 .. n-1] (longest
 * first) of a layer with act_bytes of activations: the layer's forward passes once over
 * its weights, its backward twice (the data gradient reads them, the weight gradient
 * writes their gradient); each pass is one kernel's, the longest first, none above its
 * own variable part. A group whose longest kernel took less than one pass contradicts
 * the floor (its weights were not read at that bandwidth) and gets none. A kernel that
 * carries a pass gets, as weight_act_ns, the time its input and output take at bw: twice
 * the activations over the group's kernels of its name, at most its variable part. */
static void
floor_group(workload *w, const floor_kernel *fk, int32_t n, double pass_ns, int64_t act_bytes,
            double bw)
{
    double left =
        n > 0 && fk[0].var_ns >= pass_ns ? (fk[0].phase == WL_BACKWARD ? 2 : 1) * pass_ns : 0;
    for (int32_t i = 0; i < n && left > 0; i++) {
        double m = fk[i].var_ns < pass_ns ? fk[i].var_ns : pass_ns;
        int32_t same = 0;
        m = m < left ? m : left;
        w->layers.weight_ns[fk[i].node] = (int32_t)llround(m);
        left -= m;
        for (int32_t j = 0; j < n; j++)
            same += fk[j].name == fk[i].name;
        double act = 2.0 * (double)act_bytes / ((double)same * bw);
        w->layers.weight_act_ns[fk[i].node] =
            (int32_t)llround(act < fk[i].var_ns ? act : fk[i].var_ns);
    }
}

int
workload_find_weight_floors(workload *w)
{
    const dfg *g = w->g;
    const workload_buckets *bu = &w->buckets;
    int32_t L = w->layers.n_layers;
    int rc = 0;
    floor_kernel *fk = NULL;
    int64_t params = 0;
    double bw = 0, c0 = w->fusion.kernel_fixed_ns;
    int32_t n = 0;
    if (L <= 0 || !bu->layer_grad)
        snprintf(w->layers.weight_why, sizeof w->layers.weight_why,
                 "no per-layer parameter bytes (%.120s)",
                 L <= 0            ? w->layers.why
                 : bu->grad_why[0] ? bu->grad_why
                                   : bu->why);
    for (int32_t l = 0; l < L && bu->layer_grad; l++)
        params += bu->layer_grad[l];
    if (params > 0)
        bw = optimizer_bandwidth(w, params);
    if (bw <= 0)
        goto out;
    fk = malloc(sizeof *fk * ((size_t)g->n_nodes + 1));
    w->layers.weight_ns = calloc((size_t)g->n_nodes + 1, sizeof *w->layers.weight_ns);
    w->layers.weight_act_ns = calloc((size_t)g->n_nodes + 1, sizeof *w->layers.weight_act_ns);
    if (!fk || !w->layers.weight_ns || !w->layers.weight_act_ns) {
        rc = -1;
        goto out;
    }
    w->layers.weight_bw = bw;
    for (int32_t d = 0; d < g->n_nodes; d++)
        if (alive(g, d) && g->kind[d] == DFG_KERNEL && w->layer[d] >= 0 && w->layer[d] < L &&
            (w->phase[d] == WL_FORWARD || w->phase[d] == WL_BACKWARD))
            fk[n++] = (floor_kernel){dfg_rank(g, d), w->iter[d],        w->layer[d], w->phase[d], d,
                                     g->name[d],     var_part(g, d, c0)};
    qsort(fk, (size_t)n, sizeof *fk, cmp_floor_kernel);
    for (int32_t a = 0, b; a < n; a = b) {
        for (b = a + 1; b < n && fk[b].rank == fk[a].rank && fk[b].iter == fk[a].iter &&
                        fk[b].layer == fk[a].layer && fk[b].phase == fk[a].phase;
             b++)
            ;
        int32_t l = fk[a].layer;
        floor_group(w, fk + a, b - a, (double)bu->layer_grad[l] / bw,
                    l < w->layers.mem.n_layers ? w->layers.mem.act_bytes[l] : 0, bw);
    }
out:
    free(fk);
    return rc;
}

double
workload_weight_floor_ns(const workload *w)
{
    const dfg *g = w->g;
    double sum = 0;
    int64_t n_iter =
        (int64_t)(w->iter_last - w->iter_first + 1) * (g->n_ranks > 0 ? g->n_ranks : 1);
    for (int32_t d = 0; w->layers.weight_ns && d < w->n_nodes; d++)
        if (w->iter[d] >= w->iter_first && w->iter[d] <= w->iter_last)
            sum += w->layers.weight_ns[d];
    return n_iter > 0 ? sum / (double)n_iter : 0;
}
