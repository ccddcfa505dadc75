/*
 * workload_capture.c: what CUDA-graph capture needs: idle-host wake-ups, step calls, the capture
 * copy (see workload.h).
 */
#define PR_FMT "optimizer"
#include "optimizer/workload_int.h"

#include "order.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static int
cmp_blocking_node(const void *a, const void *b)
{
    const blocking_call *x = a, *y = b;
    return (x->node > y->node) - (x->node < y->node);
}

/* Fills w->capture's idle_wake_node and idle_wake_dur (workload.h): the blocking calls
 * of the iterations, sorted by thread, name and duration; each run of one thread and name
 * gets its lower quartile. A blocking call's duration is its wake-up latency, which grows
 * with what else wants the cores when it is woken: in a host-bound job its own launch
 * threads (and the other ranks') do. The strategy that keeps a blocking call while
 * emptying the host (a step captured in a CUDA graph) wakes it on idle cores: the faster
 * wake-ups of the trace are the measure of that, not its median (under load,
 * milliseconds); not its fastest ones either, which an idle host does not reliably get
 * (the figures on ddp-sim: docs/models.md). Only those calls are kept (4 + 8 bytes each,
 * not 8 bytes a node). Returns 0, or -1 when out of memory. */
int
workload_idle_wake_latency(workload *w)
{
    const dfg *g = w->work;
    workload_capture *ca = &w->capture;
    int32_t n = g->n_nodes, k = 0;
    blocking_call *c = malloc(sizeof *c * (size_t)(n > 0 ? n : 1));
    if (!c)
        return -1;
    for (int32_t h = 0; h < n; h++)
        if (g->kind[h] == DFG_HOST && alive(g, h) && (g->flags[h] & DFG_F_BLOCKING) &&
            w->iter[h] >= 0)
            c[k++] = (blocking_call){g->res[h], g->name[h], h, dfg_dur(g, h)};
    qsort(c, (size_t)k, sizeof *c, cmp_blocking);
    for (int32_t a = 0, b; a < k; a = b) {
        for (b = a + 1; b < k && c[b].res == c[a].res && c[b].name == c[a].name; b++)
            ;
        int64_t low = c[a + (b - a) / 4].dur;
        for (int32_t i = a; i < b; i++)
            c[i].dur = low;
    }
    qsort(c, (size_t)k, sizeof *c, cmp_blocking_node);
    ca->n_idle_wake = 0;
    ca->idle_wake_node = malloc(sizeof *ca->idle_wake_node * (size_t)(k + 1));
    ca->idle_wake_dur = malloc(sizeof *ca->idle_wake_dur * (size_t)(k + 1));
    int rc = ca->idle_wake_node && ca->idle_wake_dur ? 0 : -1;
    for (int32_t i = 0; rc == 0 && i < k; i++) {
        ca->idle_wake_node[i] = c[i].node;
        ca->idle_wake_dur[i] = c[i].dur;
    }
    if (rc == 0)
        ca->n_idle_wake = k;
    free(c);
    return rc;
}

int64_t
workload_idle_wake_dur(const workload_capture *ca, int32_t h)
{
    const int32_t *at = ca->n_idle_wake > 0 ? bsearch(&h, ca->idle_wake_node,
                                                      (size_t)ca->n_idle_wake, sizeof h, order_i32)
                                            : NULL;
    return at ? ca->idle_wake_dur[at - ca->idle_wake_node] : -1;
}

/* Whether host node h is a "(wake-up)" node (dfg_add_wakeup): the wake-up of the blocking or
 * queued call after it on its thread, which it belongs to. */
static int
wakeup_node(const dfg *g, int32_t h)
{
    return (g->flags[h] & DFG_F_WAKEUP) && dfg_dur(g, h) == 0 &&
           !strcmp(dfg_name(g, g->name[h]), "(wake-up)");
}

/* workload_step_call's answer, worked out (w->capture.step_call caches it once the threads are
 * known). */
int
workload_step_call_of(const workload *w, int32_t h)
{
    const dfg *g = w->work;
    if (g->kind[h] != DFG_HOST || !alive(g, h) || w->iter[h] < 0 || (g->flags[h] & DFG_F_BLOCKING))
        return 0;
    int32_t r = dfg_rank(g, h);
    const int32_t *bn;
    int32_t nb = dfg_iterations(g, r, &bn);
    if (w->iter[h] < nb && bn[w->iter[h]] == h)
        return 0; /* opens the iteration: the graph launch */
    if (w->opt.capture_scope == WL_CAPTURE_STEP && wakeup_node(g, h))
        return g->next_on_res[h] >= 0 && workload_step_call_of(w, g->next_on_res[h]);
    if (w->opt.capture_scope == WL_CAPTURE_COMPUTE) {
        int32_t k = 0;
        for (int32_t i = dfg_launched_first(g, h); i >= 0; i = dfg_launched_next(g, h, i)) {
            int32_t d = g->launched[i];
            if (g->kind[d] != DFG_KERNEL ||
                (w->phase[d] != WL_FORWARD && w->phase[d] != WL_BACKWARD))
                return 0;
            k++;
        }
        return k > 0;
    }
    dpro_api_class cls = api_class(g, h);
    if (g->res[h] == w->bwd_thread[r] || cls == DPRO_API_CLASS_EVENT_RECORD ||
        cls == DPRO_API_CLASS_STREAM_WAIT || cls == DPRO_API_CLASS_EVENT_SYNC)
        return 1;
    for (int32_t i = dfg_launched_first(g, h); i >= 0; i = dfg_launched_next(g, h, i)) {
        int32_t d = g->launched[i];
        if (g->kind[d] == DFG_KERNEL || g->kind[d] == DFG_COLL || g->kind[d] == DFG_MEMSET ||
            (g->kind[d] == DFG_MEMCPY && !strcmp(dfg_name(g, g->name[d]), "memcpy DtoD")))
            return 1;
    }
    return 0;
}

/* Whether host call h launches a kernel. */
static int
launches_kernel(const dfg *g, int32_t h)
{
    for (int32_t i = dfg_launched_first(g, h); i >= 0; i = dfg_launched_next(g, h, i))
        if (g->kind[g->launched[i]] == DFG_KERNEL)
            return 1;
    return 0;
}

/* Marks in closing[] the closing synchronisations of host thread t: the calls of its
 * blocking call name that spent the most time over the iterations in the baseline's
 * replay, base (the step's wait for the device, as torch.cuda.synchronize() or
 * loss.item() after the backward; a pageable copy's or an event's synchronisation waits
 * for less), when that name comes once a step: as many calls as the thread has
 * iterations, give or take the window's edges (a step's call may fall on either side of
 * an iteration boundary found from the kernels' period). Returns 1 when it marked them,
 * else 0. names: scratch of the thread's blocking calls (n_nodes). */
static int
mark_closing(const workload *w, const sim_result *base, int32_t t, int32_t *names, uint8_t *closing)
{
    const dfg *g = w->work;
    int32_t k = 0, it_lo = INT32_MAX, it_hi = -1, best = -1, best_n = 0;
    int64_t best_ns = -1;
    for (int32_t h = g->res_first[t]; h >= 0; h = g->next_on_res[h]) {
        if (w->iter[h] < 0 || !alive(g, h))
            continue;
        it_lo = w->iter[h] < it_lo ? w->iter[h] : it_lo;
        it_hi = w->iter[h] > it_hi ? w->iter[h] : it_hi;
        if (g->flags[h] & DFG_F_BLOCKING)
            names[k++] = g->name[h];
    }
    qsort(names, (size_t)k, sizeof *names, cmp_int32);
    for (int32_t i = 0, j; i < k; i = j) {
        int64_t ns = 0;
        for (j = i + 1; j < k && names[j] == names[i]; j++)
            ;
        for (int32_t h = g->res_first[t]; h >= 0; h = g->next_on_res[h])
            if (w->iter[h] >= 0 && alive(g, h) && g->name[h] == names[i] &&
                (g->flags[h] & DFG_F_BLOCKING))
                ns += base->end[h] - base->start[h];
        if (ns > best_ns) {
            best_ns = ns;
            best = names[i];
            best_n = j - i;
        }
    }
    int32_t n_it = it_hi - it_lo + 1;
    if (best < 0 || best_n < n_it - 1 || best_n > n_it + 1)
        return 0;
    for (int32_t h = g->res_first[t]; h >= 0; h = g->next_on_res[h])
        closing[h] =
            w->iter[h] >= 0 && alive(g, h) && g->name[h] == best && (g->flags[h] & DFG_F_BLOCKING);
    return 1;
}

/* Keeps call h as a graph launch (the step call it was loses the flag). */
static void
keep_launch(workload *w, int32_t h)
{
    if (h < 0)
        return;
    w->capture.step_call[h] = 0;
    w->capture.graph_launch[w->capture.n_graph_launch++] = h;
}

/* The graph launches of main thread t (workload_keep_graph_launch): one a span, a span
 * running from one closing synchronisation to the next (by_sync; else from one iteration
 * to the next). The launch stands at the span's first kernel-launching step call after
 * its last other blocking call (a captured step reads its input, copied and waited for
 * before the launch: the batch's pageable copy and its synchronisation, DDP's event
 * waits), else at its first. The iterations' calls before the thread's first closing
 * synchronisation end a step launched before them: no launch. */
static void
keep_span_launches(workload *w, int32_t t, int by_sync, const uint8_t *closing)
{
    const dfg *g = w->work;
    int32_t first = -1, after_block = -1, it = -1;
    int opened = !by_sync;
    for (int32_t h = g->res_first[t]; h >= 0; h = g->next_on_res[h]) {
        int closes = by_sync && closing[h];
        if (!alive(g, h))
            continue;
        if (by_sync ? closes : w->iter[h] >= 0 && w->iter[h] != it) {
            if (opened)
                keep_launch(w, after_block >= 0 ? after_block : first);
            first = after_block = -1;
            it = w->iter[h];
            opened = 1;
        }
        if ((g->flags[h] & DFG_F_BLOCKING) && !closes)
            after_block = -1;
        else if (w->capture.step_call[h] && launches_kernel(g, h)) {
            first = first < 0 ? h : first;
            after_block = after_block < 0 ? h : after_block;
        }
    }
    if (opened)
        keep_launch(w, after_block >= 0 ? after_block : first);
}

int
workload_keep_graph_launch(workload *w, const sim_result *base)
{
    const dfg *g = w->work;
    int rc = 0;
    w->capture.n_graph_launch = 0;
    w->capture.graph_launch = malloc(sizeof *w->capture.graph_launch * (size_t)(g->n_nodes + 1));
    uint8_t *closing = calloc((size_t)g->n_nodes + 1, 1);
    int32_t *names = malloc(sizeof *names * (size_t)(g->n_nodes + 1));
    if (!w->capture.graph_launch || !closing || !names)
        rc = -1;
    for (int32_t r = 0; rc == 0 && w->opt.capture_scope == WL_CAPTURE_STEP && r < g->n_ranks; r++) {
        int32_t t = w->main_thread[r];
        /* a folded rank's thread is its representative's: its launches are kept once */
        if (t >= 0 && dfg_rank_rep(g, r) == r)
            keep_span_launches(w, t, mark_closing(w, base, t, names, closing), closing);
    }
    free(names);
    free(closing);
    return rc;
}

int
workload_step_call(const workload *w, int32_t h)
{
    return w->capture.step_call ? w->capture.step_call[h] : workload_step_call_of(w, h);
}

/* Whether edge s -> d is left out of a captured step's graph: a launch-queue edge into a
 * QUEUED step call (one graph launch submits the step, so no per-kernel launch call waits
 * for room in the queue), or, capturing the whole step, the wake-up of a step call by a
 * call that stays on the host (another thread's: the process group's watchdog polling
 * its events, a thread outside the step). The captured step runs none of the woken
 * Python, so nothing waits there for that thread, which keeps its own measured pace:
 * tied to it, the step would wait for the thread's baseline timeline. A wake-up by a step
 * call (the backward thread's hand-over), the graph launch's stand-in included, keeps its
 * order (strategy.c, apply_cuda_graph).
 * Sets *queue when it is a launch-queue edge. */
static int
capture_drops_edge(const workload *w, int32_t s, int32_t d, int *queue)
{
    const dfg *g = w->work;
    *queue = (g->flags[d] & DFG_F_QUEUED) && g->kind[s] != DFG_HOST && workload_step_call(w, d);
    return *queue ||
           (w->opt.capture_scope == WL_CAPTURE_STEP && (g->flags[d] & DFG_F_WAKEUP) &&
            g->kind[s] == DFG_HOST && workload_step_call(w, d) && !workload_step_call_of(w, s));
}

/* Whether host call h launches a host-to-device copy (a step's input). */
static int
launches_input_copy(const dfg *g, int32_t h)
{
    int found = 0;
    for (int32_t i = dfg_launched_first(g, h); !found && i >= 0; i = dfg_launched_next(g, h, i)) {
        int32_t d = g->launched[i];
        found = g->kind[d] == DFG_MEMCPY && !strcmp(dfg_name(g, g->name[d]), "memcpy HtoD");
    }
    return found;
}

/* Whether the walks of input_copy_call and order_after_input stop at host call h: the
 * step's span ends there (a blocking call: the closing synchronisation; a call that stays
 * and launches a kernel or the input's copy: an earlier graph launch or input). */
static int
ends_span_back(const workload *w, int32_t h)
{
    const dfg *g = w->work;
    return (g->flags[h] & DFG_F_BLOCKING) ||
           (!workload_step_call(w, h) && (launches_kernel(g, h) || launches_input_copy(g, h)));
}

/* The input's copy before graph launch L (WL_CAPTURE_STEP): the call that launches a
 * host-to-device copy, reached from L back over calls that are not step calls (the
 * copy's synchronisation), neither BLOCKING nor QUEUED (its end waits for no device op);
 * -1 when there is none. prev: dfg_prev_table of the working graph. */
static int32_t
input_copy_call(const workload *w, const int32_t *prev, int32_t L)
{
    const dfg *g = w->work;
    int32_t copy = -1;
    for (int32_t h = prev[L]; copy == -1 && h >= 0 && !workload_step_call(w, h); h = prev[h]) {
        if (alive(g, h) && launches_input_copy(g, h))
            copy = (g->flags[h] & (DFG_F_BLOCKING | DFG_F_QUEUED)) ? -2 : h;
        else if (alive(g, h) && launches_kernel(g, h))
            copy = -2; /* an earlier graph launch */
    }
    return copy >= 0 ? copy : -1;
}

/* Orders, in captured step c, the device work of the step calls launched before the
 * input's copy (input_copy_call) after that copy's call: the step's optimizer step and
 * zero_grad, which an eager loop launches after the closing synchronisation, run inside
 * the graph, after its input is copied, not while the host makes the batch. Only the
 * step calls after the last blocking call before the copy (the closing synchronisation)
 * count, so the edges close no cycle through a wait. Adds the edges to c (unfinalized);
 * returns how many it would add (c NULL: counts only), or -1 when out of memory. */
static int64_t
order_after_input(const workload *w, const int32_t *prev, dfg *c)
{
    const dfg *g = w->work;
    int64_t n = 0;
    for (int32_t i = 0;
         n >= 0 && w->opt.capture_scope == WL_CAPTURE_STEP && i < w->capture.n_graph_launch; i++) {
        int32_t copy = input_copy_call(w, prev, w->capture.graph_launch[i]);
        for (int32_t h = copy >= 0 ? prev[copy] : -1; n >= 0 && h >= 0 && !ends_span_back(w, h);
             h = prev[h]) {
            if (!workload_step_call(w, h))
                continue;
            for (int32_t k = dfg_launched_first(g, h); n >= 0 && k >= 0;
                 k = dfg_launched_next(g, h, k))
                n = c && dfg_add_edge(c, copy, g->launched[k]) != 0 ? -1 : n + 1;
        }
    }
    return n;
}

/* Makes w->capture.g when the capture changes the working graph's edges: a copy of it
 * without the edges capture_drops_edge leaves out (QUEUED step calls lose the flag) and
 * with those of order_after_input. Node ids and values are those of the working graph.
 * dfg.h has no edge removal: the copy's edge list is compacted here and the copy marked
 * unfinalized, and dfg_finalize builds its successor lists from that list again.
 * Returns 0, or -1 when out of memory. */
int
workload_build_capture(workload *w)
{
    const dfg *g = w->work;
    int64_t drop = 0, unqueued = 0, added;
    int queue, rc = 0;
    int32_t *prev = dfg_prev_table(g);
    for (int64_t i = 0; prev && i < g->n_edges; i++) {
        drop += capture_drops_edge(w, g->esrc[i], g->edst[i], &queue);
        unqueued += queue;
    }
    added = prev ? order_after_input(w, prev, NULL) : -1;
    dfg *c = NULL;
    if (added < 0)
        rc = -1;
    else if (drop > 0 || added > 0) {
        c = malloc(sizeof *c);
        if (!c || dfg_clone(c, g) != 0) {
            free(c); /* dfg_clone frees what it made */
            c = NULL;
            rc = -1;
        }
    }
    if (c) {
        int64_t k = 0;
        for (int64_t i = 0; i < c->n_edges; i++) {
            int32_t s = c->esrc[i], d = c->edst[i];
            if (capture_drops_edge(w, s, d, &queue))
                continue;
            c->esrc[k] = s;
            c->edst[k++] = d;
        }
        c->n_edges = k;
        for (int32_t h = 0; h < c->n_nodes; h++)
            if ((c->flags[h] & DFG_F_QUEUED) && workload_step_call(w, h))
                c->flags[h] &= (uint8_t)~DFG_F_QUEUED;
        c->finalized = 0; /* the edge list changed: sim_run builds the CSR again */
        if (order_after_input(w, prev, c) < 0 || dfg_finalize(c) != 0) {
            dfg_free(c);
            free(c);
            c = NULL;
            rc = -1;
        }
    }
    w->capture.g = c;
    w->capture.unqueued = unqueued;
    free(prev);
    return rc;
}

void
workload_capture_removed(const workload *w, double *calls, double *host_ns, double *thread_ns)
{
    const dfg *g = w->work;
    double n = 0, t = 0, all = 0, ranks = 0;
    for (int32_t r = 0; r < g->n_ranks; r++)
        ranks += workload_rank_weight(w, r);
    double n_iter = (double)(w->iter_last - w->iter_first + 1) * ranks;
    for (int32_t h = 0; h < g->n_nodes; h++) {
        if (g->kind[h] != DFG_HOST || w->iter[h] < w->iter_first || w->iter[h] > w->iter_last)
            continue;
        double wt = workload_rank_weight(w, dfg_rank(g, h));
        double cost = (double)(w->base_dur[h] + w->base_gap[h]) * wt;
        all += cost;
        if (workload_step_call(w, h)) {
            n += wt;
            t += cost;
        }
    }
    *calls = n_iter > 0 ? n / n_iter : 0;
    *host_ns = n_iter > 0 ? t / n_iter : 0;
    *thread_ns = n_iter > 0 ? all / n_iter : 0;
}
