/*
 * workload_fsdp.c: FSDP's parameter all-gathers, what reshard_after_forward and prefetch
 * change (workload.h: workload_fsdp; strategy.h: the models).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optimizer/workload_int.h"
#include "replay/kernels.h"

/* Rows for per-rank tables where a folded rank's nodes are its representative's
 * (dfg_rank_rep): row[r] is the first of the dfg_rank_weight(g, r) rows of representative
 * r, -1 for a folded rank, so that medians over the rows weigh each class by its ranks as
 * the explicit job's would (spread_rows fills the class's other rows). Returns the rows,
 * or -1 (out of memory; *row NULL). */
static int32_t
class_rows(const dfg *g, int32_t **row)
{
    int32_t n = 0;
    *row = malloc(sizeof **row * ((size_t)g->n_ranks + 1));
    for (int32_t r = 0; *row && r < g->n_ranks; r++) {
        int own = dfg_rank_rep(g, r) == r;
        (*row)[r] = own ? n : -1;
        n += own ? dfg_rank_weight(g, r) : 0;
    }
    return *row ? n : -1;
}

/* Copies, in each of the `tables` tables of n rows of `iters` entries from v, each
 * representative's row (class_rows) into its class's other rows. */
static void
spread_rows(const dfg *g, const int32_t *row, int64_t *v, int32_t iters, int tables, int32_t n)
{
    for (int k = 0; k < tables; k++)
        for (int32_t r = 0; r < g->n_ranks; r++)
            for (int32_t c = 1; row[r] >= 0 && c < dfg_rank_weight(g, r); c++)
                memcpy(v + (size_t)n * k + (size_t)(row[r] + c) * iters,
                       v + (size_t)n * k + (size_t)row[r] * iters, sizeof *v * (size_t)iters);
}

/* WL_FSDP_FWD or WL_FSDP_BWD for the all-gather participant c of an iteration launched by
 * its rank's main or backward thread, else WL_FSDP_NONE. */
static int
gather_role(const workload *w, const rank_info *ri, int32_t c)
{
    const dfg *g = w->work;
    int32_t q = dfg_group(g, c), h = g->launch[c];
    if (g->kind[c] != DFG_COLL || q < 0 || h < 0 || g->grp_op[q] != DPRO_COLL_ALLGATHER ||
        w->iter[c] < 0)
        return WL_FSDP_NONE;
    int32_t r = g->res_rank[g->res[c]];
    if (ri[r].bwd_thread >= 0 && g->res[h] == ri[r].bwd_thread)
        return WL_FSDP_BWD;
    return g->res[h] == ri[r].main_thread ? WL_FSDP_FWD : WL_FSDP_NONE;
}

/* The all-gather participant host call h launches, or -1. */
static int32_t
launched_gather(const workload *w, const rank_info *ri, int32_t h)
{
    const dfg *g = w->work;
    for (int32_t i = dfg_launched_first(g, h); i >= 0; i = dfg_launched_next(g, h, i))
        if (gather_role(w, ri, g->launched[i]) != WL_FSDP_NONE)
            return g->launched[i];
    return -1;
}

/* 1 when host call x of rank r may be a call of an unshard (FSDP's events, queries and
 * copy-in launches around an all-gather): neither blocking nor woken, launching nothing
 * on the compute stream and no collective but an all-gather. */
static int
unshard_call(const workload *w, const rank_info *ri, int32_t r, int32_t x)
{
    const dfg *g = w->work;
    if (!alive(g, x) || (g->flags[x] & (DFG_F_BLOCKING | DFG_F_WAKEUP)))
        return 0;
    for (int32_t i = dfg_launched_first(g, x); i >= 0; i = dfg_launched_next(g, x, i)) {
        int32_t d = g->launched[i];
        if (g->res[d] == ri[r].compute_stream ||
            (dfg_group(g, d) >= 0 && g->grp_op[dfg_group(g, d)] != DPRO_COLL_ALLGATHER))
            return 0;
    }
    return 1;
}

/* Walks thread t of rank r in program order: the device ops off the compute stream that
 * the calls after one all-gather's launch and up to the next one's launch start (the
 * unshard: copy-in, all-gather), but other collectives (the backward's reduce-scatters),
 * belong to the second all-gather; prefetch issues them
 * as early as the first one's launch (same iteration). So do the host calls of its
 * unshard: the run of unshard_call calls around its launch, up to the nearest call that
 * is not one (or another all-gather's launch). Appends to per[*n] (at most cap) the
 * forward gathers' bytes less the largest of each compared iteration. */
static void
walk_thread(workload *w, const rank_info *ri, int32_t r, int32_t t, int64_t *per, int32_t *n,
            int32_t cap)
{
    const dfg *g = w->work;
    workload_fsdp *f = &w->fsdp;
    int32_t seg = g->res_first[t], prev = -1, cur_iter = -1, run = -1, tail = -1;
    int64_t sum = 0, big = 0;
    for (int32_t h = g->res_first[t]; h >= 0; h = g->next_on_res[h]) {
        int32_t c = alive(g, h) ? launched_gather(w, ri, h) : -1;
        int un = unshard_call(w, ri, r, h);
        run = !un ? -1 : run < 0 ? h : run;
        tail = un && c < 0 ? tail : -1;
        if (tail >= 0)
            f->gather_ops[h] = tail;
        if (c < 0)
            continue;
        int32_t q = dfg_group(g, c);
        for (int32_t x = run >= 0 ? run : h; x >= 0; x = g->next_on_res[x]) {
            f->gather_ops[x] = q;
            if (x == h)
                break;
        }
        run = -1;
        tail = q;
        if (prev >= 0 && w->iter[prev] != w->iter[h])
            prev = -1; /* prefetch stays within an iteration */
        for (int32_t x = seg; x >= 0; x = g->next_on_res[x]) {
            for (int32_t i = dfg_launched_first(g, x); i >= 0; i = dfg_launched_next(g, x, i)) {
                int32_t d = g->launched[i];
                int32_t qd = dfg_group(g, d);
                if (g->res[d] == ri[r].compute_stream || (qd >= 0 && qd != q))
                    continue;
                f->gather_ops[d] = q;
                int64_t early = prev >= 0 ? g->mstart[x] - g->mstart[prev] : 0;
                f->prefetch_ns[d] = early <= 0 ? 0 : early > INT32_MAX ? INT32_MAX : (int32_t)early;
            }
            if (x == h)
                break;
        }
        seg = g->next_on_res[h];
        prev = h;
        if (gather_role(w, ri, c) != WL_FSDP_FWD || w->iter[h] < w->iter_first ||
            w->iter[h] > w->iter_last)
            continue;
        if (w->iter[h] != cur_iter && *n >= cap)
            break;
        if (w->iter[h] != cur_iter)
            sum = big = 0, (*n)++;
        cur_iter = w->iter[h];
        sum += g->grp_bytes[q];
        big = g->grp_bytes[q] > big ? g->grp_bytes[q] : big;
        per[*n - 1] = sum - big;
    }
}

/* 1 when host call x polls an event (cudaEventQuery, cuEventQuery): how many polls an
 * unshard makes depends on how far the device lags the host, so they are waits, neither
 * counted among an unshard's calls nor priced as its host work. */
static int
event_poll(const dfg *g, int32_t x)
{
    const char *nm = g->kind[x] == DFG_HOST ? dfg_name(g, g->name[x]) : NULL;
    return nm && (!strcmp(nm, "cudaEventQuery") || !strcmp(nm, "cuEventQuery"));
}

/* Marks in gather_ops the copy-out of all-gather participant c (group q) of rank r: the
 * compute stream's ops that its wait for the all-gather lets start, from the first (a
 * successor of c on the compute stream, a copy or a kernel) through the first kernel
 * (FSDP2's host-to-device copy and split_with_sizes_copy), launched by consecutive calls
 * of one thread that launch only such ops or nothing, the event calls right after that
 * kernel's launch, and the stream waits and event polls right before the first op's
 * launch that no unshard holds (the compute stream's wait for the all-gather's event,
 * made apart from the unshard where the all-gather was prefetched). prev: the previous
 * node on each node's resource (dfg_prev_table). */
static void
mark_copy_out(workload *w, const rank_info *ri, int32_t r, int32_t c, int32_t q,
              const int32_t *prev)
{
    const dfg *g = w->work;
    int32_t d0 = -1;
    for (int64_t i = dfg_succ_first(g, c); dfg_succ_more(g, c, i) && d0 < 0; i++) {
        int32_t d = g->succ[i];
        if (alive(g, d) && g->res[d] == ri[r].compute_stream && g->launch[d] >= 0 &&
            (g->kind[d] == DFG_KERNEL || g->kind[d] == DFG_MEMCPY))
            d0 = d;
    }
    for (int32_t x = d0 >= 0 ? prev[g->launch[d0]] : -1;
         x >= 0 && alive(g, x) && w->fsdp.gather_ops[x] < 0 && dfg_launched_first(g, x) < 0 &&
         (api_class(g, x) == DPRO_API_CLASS_STREAM_WAIT || event_poll(g, x));
         x = prev[x])
        w->fsdp.gather_ops[x] = q;
    int kernel = 0;
    for (int32_t x = d0 >= 0 ? g->launch[d0] : -1; x >= 0 && alive(g, x); x = g->next_on_res[x]) {
        int ok = !(g->flags[x] & (DFG_F_BLOCKING | DFG_F_WAKEUP)), k = 0;
        for (int32_t i = dfg_launched_first(g, x); i >= 0; i = dfg_launched_next(g, x, i)) {
            int32_t d = g->launched[i];
            ok &= !kernel && g->res[d] == ri[r].compute_stream &&
                  (g->kind[d] == DFG_KERNEL || g->kind[d] == DFG_MEMCPY);
            k |= g->kind[d] == DFG_KERNEL;
        }
        if (!ok)
            break;
        w->fsdp.gather_ops[x] = q;
        for (int32_t i = dfg_launched_first(g, x); i >= 0; i = dfg_launched_next(g, x, i))
            w->fsdp.gather_ops[g->launched[i]] = q;
        kernel |= k;
    }
}

/* A host call's name and duration (backward_calls). */
typedef struct name_dur {
    int32_t name;
    int64_t dur;
} name_dur;

/* qsort order of name_dur: by name, then by duration (a name's durations in a run, for
 * its median). */
static int
cmp_name_dur(const void *pa, const void *pb)
{
    const name_dur *a = pa, *b = pb;
    return a->name != b->name ? (a->name > b->name) - (a->name < b->name)
                              : (a->dur > b->dur) - (a->dur < b->dur);
}

/* Fills nd (room for every node) with the host calls of rank r's backward thread in the
 * compared iterations, sorted by name, then duration; returns their count. */
static int32_t
backward_calls(const workload *w, const rank_info *ri, int32_t r, name_dur *nd)
{
    const dfg *g = w->work;
    int32_t n = 0;
    for (int32_t x = ri[r].bwd_thread >= 0 ? g->res_first[ri[r].bwd_thread] : -1; x >= 0;
         x = g->next_on_res[x])
        if (alive(g, x) && w->iter[x] >= w->iter_first && w->iter[x] <= w->iter_last)
            nd[n++] = (name_dur){g->name[x], dfg_dur(g, x)};
    qsort(nd, (size_t)n, sizeof *nd, cmp_name_dur);
    return n;
}

/* The median duration of the calls named name among nd[0..n) (sorted: backward_calls),
 * -1 when none is. */
static int64_t
name_median(const name_dur *nd, int32_t n, int32_t name)
{
    int32_t lo = 0, hi = n;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        lo = nd[mid].name < name ? mid + 1 : lo;
        hi = nd[mid].name < name ? hi : mid;
    }
    int32_t end = lo;
    while (end < n && nd[end].name == name)
        end++;
    int32_t k = end - lo;
    return k == 0 ? -1 : (nd[lo + (k - 1) / 2].dur + nd[lo + k / 2].dur) / 2;
}

/* The reshard costs of rank r's units (a forward all-gather's group q; each rank pays its
 * own): cost[3q] the CPU time of its unshard's and copy-out's host calls on rank r (the
 * gap before each call but the first; their durations but the event polls', each
 * at most the median of the calls of its name on the rank's backward thread,
 * bwd[0..nb): backward_calls; the re-gather runs there, and a forward call that waited
 * (FSDP's event record behind the copy-in's launch on the device's lock) does not wait so
 * in the backward), cost[3q+1] the copy-out's device time (compute stream), cost[3q+2]
 * the transfer and copy-in; lead[q] the gap before its first call (FSDP's unshard Python,
 * which the backward's re-gather runs again: lead_gaps), -1 where it has none. cost is
 * zeroed first. */
static void
unit_costs(const workload *w, const rank_info *ri, int32_t r, const name_dur *bwd, int32_t nb,
           int64_t *cost, int64_t *lead)
{
    const dfg *g = w->work;
    memset(cost, 0, 3 * ((size_t)g->n_groups + 1) * sizeof *cost);
    for (int32_t q = 0; q <= g->n_groups; q++)
        lead[q] = -1;
    for (int32_t s = 0; s < g->n_res; s++) {
        if (g->res_rank[s] != r)
            continue;
        for (int32_t x = g->res_first[s]; x >= 0; x = g->next_on_res[x]) {
            int32_t q = w->fsdp.gather_ops[x];
            if (q < 0 || w->fsdp.grp_role[q] != WL_FSDP_FWD)
                continue;
            int64_t d = g->kind[x] == DFG_HOST && !event_poll(g, x) ? dfg_dur(g, x) : 0,
                    typ = d > 0 ? name_median(bwd, nb, g->name[x]) : -1;
            if (g->kind[x] == DFG_HOST && lead[q] < 0)
                lead[q] = dfg_gap(g, x);
            else if (g->kind[x] == DFG_HOST)
                cost[3 * (int64_t)q] += dfg_gap(g, x);
            if (g->kind[x] == DFG_HOST)
                cost[3 * (int64_t)q] += typ >= 0 && typ < d ? typ : d;
            else if (s == ri[r].compute_stream)
                cost[3 * (int64_t)q + 1] += dfg_dur(g, x);
            else if (g->kind[x] != DFG_COLL)
                cost[3 * (int64_t)q + 2] += dfg_dur(g, x);
        }
    }
    for (int32_t q = 0; q < g->n_groups; q++)
        if (w->fsdp.grp_role[q] == WL_FSDP_FWD)
            cost[3 * (int64_t)q + 2] += g->grp_dur[q];
}

static int32_t
clamp_ns(int64_t v)
{
    return v <= 0 ? 0 : v > INT32_MAX ? INT32_MAX : (int32_t)v;
}

/* Adds unit q's reshard costs to the span that starts with call first and launches its
 * first compute kernel kern, hidden being how long the previous span ran (regather_rank). */
static void
add_regather(workload *w, int32_t first, int32_t kern, int64_t hidden, const int64_t *cost,
             int32_t q)
{
    int32_t *ns = w->fsdp.regather_ns;
    int64_t t = cost[3 * (int64_t)q + 2];
    if (first >= 0)
        ns[first] = clamp_ns(ns[first] + cost[3 * (int64_t)q]);
    if (kern >= 0)
        ns[kern] = clamp_ns(ns[kern] + cost[3 * (int64_t)q + 1] + (t > hidden ? t - hidden : 0));
}

/* reshard_after_forward=True on a rank r that keeps its parameters (workload.h:
 * fsdp.regather_ns). A forward is the run of forward all-gathers the main thread launches
 * (by their measured starts) before the backward thread's calls; those calls then fall
 * into spans, each ending with the launch of a reduce-scatter (taken as FSDP2's
 * reduce-scatters of the units in the reverse of the forward's order, the root, gathered
 * first, last; fsdp_train.py's root comes fourth of five: docs/models.md). Unit j of
 * the forward's n (0 the root) is re-gathered in span n-1-j, the root in span 0 (its
 * parameters' backward runs first): its unshard's and copy-out's host time (cost) goes
 * before the span's first call, its copy-out's device time and the part of its transfer
 * and copy-in longer than the previous span ran (FSDP2's implicit backward prefetch issues
 * it at that span's start: hidden by the longer of its calls with the gaps before them and
 * the compute they launched) onto the span's first compute kernel. A backward
 * whose reduce-scatters do not match its forward's all-gathers one to one (a micro-batch
 * without gradient sync) is left as measured. Returns the units re-gathered in the rank's
 * last matched backward. With mq not NULL nothing is added: each matched forward's units
 * are appended to mq (group) and mj (position in the forward), *m counting them (at most
 * cap). */
static int32_t
regather_rank(workload *w, const rank_info *ri, int32_t r, const int64_t *cost, int32_t *mq,
              int32_t *mj, int32_t *m, int32_t cap)
{
    const dfg *g = w->work;
    enum { MAXU = 256 };
    int32_t fwd[MAXU], first[MAXU], kern[MAXU], n = 0, k = 0, started = 0, done = 0;
    int64_t comp[MAXU], host[MAXU];
    int32_t h = ri[r].main_thread >= 0 ? g->res_first[ri[r].main_thread] : -1;
    int32_t x = ri[r].bwd_thread >= 0 ? g->res_first[ri[r].bwd_thread] : -1;
    for (; x >= 0; x = g->next_on_res[x]) {
        if (!alive(g, x))
            continue;
        for (; h >= 0 && g->mstart[h] <= g->mstart[x]; h = g->next_on_res[h]) {
            int32_t c = alive(g, h) ? launched_gather(w, ri, h) : -1;
            if (c < 0 || gather_role(w, ri, c) != WL_FSDP_FWD)
                continue;
            if (started)
                n = k = started = 0;
            if (n < MAXU)
                fwd[n++] = dfg_group(g, c);
        }
        if (n == 0 || k >= n)
            continue;
        if (!started || first[k] < 0) {
            first[k] = x, kern[k] = -1, comp[k] = host[k] = 0;
            started = 1;
        }
        host[k] += dfg_gap(g, x) + dfg_dur(g, x);
        int rs = 0;
        for (int32_t i = dfg_launched_first(g, x); i >= 0; i = dfg_launched_next(g, x, i)) {
            int32_t d = g->launched[i], q = dfg_group(g, d);
            if (g->res[d] == ri[r].compute_stream && kern[k] < 0 && g->kind[d] == DFG_KERNEL)
                kern[k] = d;
            comp[k] += g->res[d] == ri[r].compute_stream ? dfg_dur(g, d) : 0;
            rs |= q >= 0 && g->grp_op[q] == DPRO_COLL_REDUCESCATTER;
        }
        if (!rs)
            continue;
        if (++k < n) {
            first[k] = -1;
            continue;
        }
        for (int32_t j = 0; j < n; j++) {
            int32_t s = j == 0 ? 0 : n - 1 - j;
            if (!mq)
                add_regather(w, first[s], kern[s],
                             s == 0                      ? 0
                             : comp[s - 1] > host[s - 1] ? comp[s - 1]
                                                         : host[s - 1],
                             cost, fwd[j]);
            else if (*m < cap)
                mq[*m] = fwd[j], mj[(*m)++] = j;
        }
        done = n;
    }
    return done;
}

/* Replaces the costs of each matched unit (cost[3q..3q+2], q = mq[i], regather_rank) by
 * their medians over the rank's matched forwards at its position mj[i] in the forward: what
 * one forward's unshard lost to a loaded host (a preempted call, a longer gap) is not the
 * price of every re-gather of that unit. v: scratch of m entries. */
static void
median_unit_costs(int64_t *cost, const int32_t *mq, const int32_t *mj, int32_t m, int64_t *v)
{
    int32_t nv = 1;
    for (int32_t j = 0; nv > 0; j++)
        for (int k = 0; k < 3; k++) {
            nv = 0;
            for (int32_t i = 0; i < m; i++)
                if (mj[i] == j)
                    v[nv++] = cost[3 * (int64_t)mq[i] + k];
            int64_t med = nv > 0 ? (int64_t)sim_median_i64(v, nv) : 0;
            for (int32_t i = 0; i < m; i++)
                if (mj[i] == j)
                    cost[3 * (int64_t)mq[i] + k] = med;
        }
}

/* Adds to cost[3q] of each matched unit (q = mq[i] at position mj[i] of its forward,
 * regather_rank) the gap before its unshard's first call (lead, unit_costs): the median
 * over the rank's matched forwards at its position, and for the forward's first unit
 * (position 0) the median of the other positions' medians where there are any: the gap
 * before the first unshard of a forward runs back to the previous step (the training
 * loop's Python, its data loading and logging), which no re-gather in the backward runs
 * again. v: scratch of 3m entries. */
static void
lead_gaps(int64_t *cost, const int64_t *lead, const int32_t *mq, const int32_t *mj, int32_t m,
          int64_t *v)
{
    int32_t npos = 0, nother = 0;
    for (int32_t i = 0; i < m; i++)
        npos = mj[i] + 1 > npos ? mj[i] + 1 : npos;
    int64_t *pos = v + m, first = -1;
    for (int32_t j = 0; j < npos; j++) {
        int32_t nv = 0;
        for (int32_t i = 0; i < m; i++)
            if (mj[i] == j && lead[mq[i]] >= 0)
                v[nv++] = lead[mq[i]];
        pos[j] = nv > 0 ? (int64_t)sim_median_i64(v, nv) : 0;
        if (j > 0 && nv > 0)
            v[m + npos + nother++] = pos[j];
    }
    if (nother > 0) /* the other positions' medians, after pos[0..npos) */
        first = (int64_t)sim_median_i64(v + m + npos, nother);
    for (int32_t i = 0; i < m; i++)
        cost[3 * (int64_t)mq[i]] += mj[i] == 0 && first >= 0 ? first : pos[mj[i]];
}

/* A collective participant of a rank: its measured end, its input on the rank (an
 * all-gather's shard: its group's bytes over the ranks; any other's the group's bytes) and
 * that input again where resharding gathers the unit anew (regather_waits). */
typedef struct coll_end {
    int64_t end, in, again;
} coll_end;

static int
cmp_coll_end(const void *pa, const void *pb)
{
    const coll_end *a = pa, *b = pb;
    return (a->end > b->end) - (a->end < b->end);
}

/* f->sync_wait_ns (workload.h) of rank r, whose matched forwards' all-gathers are the
 * groups with again[q] set (regather_rank): a blocking call of the main thread that
 * returns after the device work it waits for has ended (its duration in the graph) waited
 * for device work the trace does not show; its rate, per byte of the rank's collective
 * inputs whose measured ends fall since the previous blocking call, is the median over
 * those calls, and each call waits that rate times the inputs of the all-gathers it
 * follows that resharding repeats. ce: scratch of the rank's participants; v: of its main
 * thread's blocking calls (two entries each). */
static void
regather_waits(workload *w, const rank_info *ri, int32_t r, const uint8_t *again, coll_end *ce,
               int64_t *v)
{
    const dfg *g = w->work;
    int32_t n = 0, nb = 0, k = 0, nr = 0;
    for (int32_t s = 0; s < g->n_res; s++)
        for (int32_t x = g->res_rank[s] == r ? g->res_first[s] : -1; x >= 0;
             x = g->next_on_res[x]) {
            int32_t q = g->kind[x] == DFG_COLL && alive(g, x) ? dfg_group(g, x) : -1;
            if (q < 0)
                continue;
            int64_t in =
                g->grp_bytes[q] / (g->grp_op[q] == DPRO_COLL_ALLGATHER && g->grp_nranks[q] > 0
                                       ? g->grp_nranks[q]
                                       : 1);
            ce[n++] = (coll_end){dfg_mend(g, x), in, again[q] ? in : 0};
        }
    qsort(ce, (size_t)n, sizeof *ce, cmp_coll_end);
    int64_t *rate = v, *add = v + g->n_nodes + 1;
    for (int32_t x = ri[r].main_thread >= 0 ? g->res_first[ri[r].main_thread] : -1; x >= 0;
         x = g->next_on_res[x]) {
        if (!alive(g, x) || !(g->flags[x] & DFG_F_BLOCKING))
            continue;
        int64_t in = 0, more = 0;
        for (; k < n && ce[k].end <= dfg_mend(g, x); k++)
            in += ce[k].in, more += ce[k].again;
        if (in > 0) { /* fs a byte, in double: a call of hours would wrap the product */
            double fs_byte = (double)dfg_dur(g, x) * 1e6 / (double)in;
            rate[nr++] = fs_byte < (double)(INT64_MAX / 2) ? (int64_t)fs_byte : INT64_MAX / 2;
        }
        add[2 * nb] = x, add[2 * nb++ + 1] = more;
    }
    int64_t fs = nr > 0 ? (int64_t)sim_median_i64(rate, nr) : 0;
    for (int32_t i = 0; i < nb; i++) {
        int32_t x = (int32_t)add[2 * i];
        double ns = (double)fs * (double)add[2 * i + 1] / 1e6;
        w->fsdp.sync_wait_ns[x] =
            clamp_ns(w->fsdp.sync_wait_ns[x] + (ns < INT32_MAX ? (int64_t)ns : INT32_MAX));
    }
}

/* Marks the copy-outs, counts the unshards' calls (keep_calls, regather_calls: the
 * medians over ranks and compared iterations, the last of which runs to the trace's end)
 * and, on a trace that keeps the parameters, the reshard costs (regather_rank). Returns 0
 * or -1. */
static int
find_copy_outs(workload *w, const rank_info *ri)
{
    const dfg *g = w->work;
    workload_fsdp *f = &w->fsdp;
    int32_t *row, iters = w->iter_last - w->iter_first + 1;
    int32_t n = class_rows(g, &row) * (iters > 0 ? iters : 0);
    int64_t *cnt = n >= 0 ? calloc(2 * (size_t)n + 1, sizeof *cnt) : NULL;
    int32_t *prev = dfg_prev_table(g);
    int rc = cnt && prev && row ? 0 : -1;
    for (int32_t c = 0; rc == 0 && c < g->n_nodes; c++) {
        int role = alive(g, c) ? gather_role(w, ri, c) : WL_FSDP_NONE;
        if (role != WL_FSDP_NONE)
            mark_copy_out(w, ri, g->res_rank[g->res[c]], c, dfg_group(g, c), prev);
    }
    free(prev);
    for (int32_t x = 0; rc == 0 && x < g->n_nodes; x++) {
        int32_t q = f->gather_ops[x];
        if (q < 0 || g->kind[x] != DFG_HOST || event_poll(g, x) || w->iter[x] < w->iter_first ||
            w->iter[x] > w->iter_last || row[g->res_rank[g->res[x]]] < 0)
            continue;
        int64_t i = (int64_t)row[g->res_rank[g->res[x]]] * iters + w->iter[x] - w->iter_first;
        cnt[i] += f->grp_role[q] == WL_FSDP_BWD;
        cnt[n + i] += f->grp_role[q] == WL_FSDP_FWD;
    }
    if (rc == 0)
        spread_rows(g, row, cnt, iters, 2, n);
    f->keep_calls = rc == 0 && n > 0 ? sim_median_i64(cnt, n) : 0;
    f->regather_calls = rc == 0 && n > 0 ? sim_median_i64(cnt + n, n) : 0;
    free(cnt);
    free(row);
    if (rc == 0 && f->n_bwd < 1 && f->n_fwd > 0) {
        size_t ng = (size_t)g->n_groups + 1, nn = (size_t)g->n_nodes + 1;
        int64_t *cost = calloc(4 * ng, sizeof *cost), *v = malloc(3 * nn * sizeof *v),
                *lead = malloc(ng * sizeof *lead);
        name_dur *bwd = malloc(nn * sizeof *bwd);
        int32_t *mq = malloc(2 * ng * sizeof *mq), m = 0;
        uint8_t *again = calloc(ng, 1);
        coll_end *ce = malloc(nn * sizeof *ce);
        f->regather_ns = calloc(nn, sizeof *f->regather_ns);
        f->sync_wait_ns = calloc(nn, sizeof *f->sync_wait_ns);
        if (!cost || !v || !lead || !bwd || !mq || !again || !ce || !f->regather_ns ||
            !f->sync_wait_ns)
            rc = -1;
        for (int32_t r = 0; rc == 0 && r < g->n_ranks; r++) {
            if (dfg_rank_rep(g, r) != r) /* folded: its representative's nodes */
                continue;
            unit_costs(w, ri, r, bwd, backward_calls(w, ri, r, bwd), cost, lead);
            m = 0;
            regather_rank(w, ri, r, cost, mq, mq + ng, &m, (int32_t)ng);
            for (int32_t i = 0; i < m; i++)
                again[mq[i]] = 1;
            regather_waits(w, ri, r, again, ce, v);
            for (int32_t i = 0; i < m; i++)
                again[mq[i]] = 0;
            median_unit_costs(cost, mq, mq + ng, m, cost + 3 * ng);
            lead_gaps(cost, lead, mq, mq + ng, m, v);
            int32_t u = regather_rank(w, ri, r, cost, NULL, NULL, NULL, 0);
            f->n_regather = u > f->n_regather ? u : f->n_regather;
        }
        free(cost);
        free(v);
        free(lead);
        free(bwd);
        free(mq);
        free(again);
        free(ce);
    }
    return rc;
}

/* f->unit_bytes (workload.h): per rank with nodes of its own (a folded rank's are its
 * representative's) and compared iteration the sums and maxima of the forward
 * all-gathers' and the reduce-scatters' bytes (a reduce-scatter's group bytes are its
 * input: count x size x ranks, replay/build.c), then their medians. Returns 0 or -1. */
static int
find_unit_bytes(workload *w, const rank_info *ri)
{
    const dfg *g = w->work;
    int32_t *row, iters = w->iter_last - w->iter_first + 1;
    int32_t n = class_rows(g, &row) * (iters > 0 ? iters : 0);
    int64_t *v = n >= 0 ? calloc(4 * (size_t)n + 1, sizeof *v) : NULL;
    int rc = v && row ? 0 : -1;
    for (int32_t d = 0; rc == 0 && d < g->n_nodes; d++) {
        int32_t q = g->kind[d] == DFG_COLL ? dfg_group(g, d) : -1;
        if (q < 0 || !alive(g, d) || w->iter[d] < w->iter_first || w->iter[d] > w->iter_last)
            continue;
        int fwd = gather_role(w, ri, d) == WL_FSDP_FWD;
        if (!fwd && g->grp_op[q] != DPRO_COLL_REDUCESCATTER)
            continue;
        int32_t at = row[g->res_rank[g->res[d]]];
        if (at < 0)
            continue;
        int64_t i = (int64_t)at * iters + w->iter[d] - w->iter_first;
        int64_t *sum = v + (size_t)n * (fwd ? WL_FSDP_BYTES_GATHER : WL_FSDP_BYTES_GRAD) + i,
                *max =
                    v + (size_t)n * (fwd ? WL_FSDP_BYTES_GATHER_MAX : WL_FSDP_BYTES_GRAD_MAX) + i;
        *sum += g->grp_bytes[q];
        *max = g->grp_bytes[q] > *max ? g->grp_bytes[q] : *max;
    }
    if (rc == 0)
        spread_rows(g, row, v, iters, 4, n);
    for (int k = 0; rc == 0 && k < 4; k++)
        w->fsdp.unit_bytes[k] = n > 0 ? (int64_t)sim_median_i64(v + (size_t)n * k, n) : 0;
    free(v);
    free(row);
    return rc;
}

/* The parameters T of a launch whose metadata, copied from host right before it, is
 * int64 arrays of per_param x T + fixed + grid_x entries (grid_x the kernel's grid's first
 * dimension, one entry a block), `bytes` of them, where every parameter takes at least one
 * block (T <= grid_x). Returns T, or 0 when the bytes do not fit that layout or grid_x is
 * unknown. */
static int32_t
metadata_params(int64_t bytes, uint32_t grid_x, int64_t per_param, int64_t fixed)
{
    int64_t words = bytes / 8 - fixed - (int64_t)grid_x;
    int fits = grid_x > 0 && bytes % 8 == 0 && words >= per_param && words % per_param == 0 &&
               words / per_param <= (int64_t)grid_x;
    return fits ? (int32_t)(words / per_param) : 0;
}

/* The parameters of PyTorch's jagged-grid copies, whose grids give each parameter its own
 * blocks (aten/src/ATen/native/cuda/TensorShape.cu), from the metadata they copy from host
 * (metadata_params): a forward copy-out (split_with_sizes_copy, FSDP2's copy-out of a
 * unit's parameters): the destinations, the sources and the split sizes (one a parameter
 * each), each block's split and the blocks' running sums (one a parameter, and one):
 * 4 T + 1 + grid_x entries; a reduce-scatter's copy-in (_chunk_cat, FSDP2's foreach_reduce
 * concatenating a unit's gradients): the sources, each block's tensor, the tensors' start
 * bytes and start blocks (one a parameter, and one each), their sizes, padded chunk sizes
 * and blocks (one a parameter each): 6 T + 2 + grid_x. Returns T, 0 when the copy does not
 * fit, -1 when x is neither kernel. */
static int32_t
jagged_copy_params(const workload *w, int32_t prev, int32_t x)
{
    const dfg *g = w->work;
    const char *name = dfg_name(g, g->name[x]);
    int out = strstr(name, "split_with_sizes_copy") != NULL, in = strstr(name, "chunk_cat") != NULL;
    if (!out && !in)
        return -1;
    if (prev < 0 || g->kind[prev] != DFG_MEMCPY)
        return 0;
    return metadata_params(dfg_bytes(g, prev), w->fusion.node_grid_x[x], out ? 4 : 6, out ? 1 : 2);
}

/* Adds rank r's forward copy-outs' parameters (those of its compute stream, each after
 * the copy from host of its unit's all-gather) to out, its reduce-scatters' copy-ins'
 * (any stream) to in, per compared iteration; an iteration where one of them does not fit
 * its layout gets bad set. */
static void
rank_copy_params(const workload *w, const rank_info *ri, int32_t r, int64_t *out, int64_t *in,
                 int64_t *bad)
{
    const dfg *g = w->work;
    const workload_fsdp *f = &w->fsdp;
    for (int32_t s = 0; s < g->n_res; s++) {
        if (g->res_kind[s] != DFG_RES_STREAM || g->res_rank[s] != r)
            continue;
        for (int32_t prev = -1, x = g->res_first[s]; x >= 0; prev = x, x = g->next_on_res[x]) {
            if (g->kind[x] != DFG_KERNEL || !alive(g, x) || w->iter[x] < w->iter_first ||
                w->iter[x] > w->iter_last)
                continue;
            int32_t q = f->gather_ops[x], t = jagged_copy_params(w, prev, x);
            int copy_out = t >= 0 && strstr(dfg_name(g, g->name[x]), "split_with_sizes_copy");
            if (t < 0 ||
                (copy_out && (q < 0 || f->grp_role[q] != WL_FSDP_FWD || s != ri[r].compute_stream)))
                continue;
            if (copy_out && t > 0 && f->gather_ops[prev] != q) /* prev: the copy */
                t = 0;
            int64_t i = (int64_t)w->iter[x] - w->iter_first;
            (copy_out ? out : in)[i] += t;
            bad[i] |= t == 0;
        }
    }
}

/* f->n_params (workload.h): per rank and compared iteration the parameters of the forward's
 * copy-outs, where the reduce-scatters' copy-ins of the iteration concatenate as many
 * (rank_copy_params: every one of them fitting its layout); the median of those, 0 without
 * one. Returns 0 or -1. */
static int
find_unit_params(workload *w, const rank_info *ri)
{
    const dfg *g = w->work;
    workload_fsdp *f = &w->fsdp;
    int32_t *row, iters = w->iter_last - w->iter_first + 1;
    int32_t n = class_rows(g, &row) * (iters > 0 ? iters : 0);
    int64_t *v = n >= 0 ? calloc(3 * (size_t)n + 1, sizeof *v) : NULL, *in = v ? v + n : NULL,
            *bad = v ? v + 2 * n : NULL;
    int rc = v && row && w->fusion.node_grid_x ? 0 : -1;
    for (int32_t r = 0; rc == 0 && r < g->n_ranks; r++)
        if (row[r] >= 0)
            rank_copy_params(w, ri, r, v + (size_t)row[r] * iters, in + (size_t)row[r] * iters,
                             bad + (size_t)row[r] * iters);
    if (rc == 0)
        spread_rows(g, row, v, iters, 3, n);
    int32_t k = 0;
    for (int32_t i = 0; rc == 0 && i < n; i++)
        if (!bad[i] && v[i] > 0 && v[i] == in[i])
            v[k++] = v[i];
    f->n_params = k > 0 ? (int32_t)sim_median_i64(v, k) : 0;
    free(v);
    free(row);
    return rc;
}

int64_t
workload_fsdp_accum_bytes(const workload *w, int32_t k, int64_t act)
{
    const workload_fsdp *f = &w->fsdp;
    int64_t add = 0;
    if (k > 1 && f->grp_role && !f->why[0]) {
        int64_t fixed = (f->n_bwd < 1 ? f->unit_bytes[WL_FSDP_BYTES_GATHER]
                                      : f->unit_bytes[WL_FSDP_BYTES_GATHER_MAX]) +
                        f->unit_bytes[WL_FSDP_BYTES_GRAD_MAX];
        fixed = fixed < act ? fixed : act > 0 ? act : 0;
        add = fixed - fixed / k + f->unit_bytes[WL_FSDP_BYTES_GRAD];
    }
    return add;
}

/* Launching calls at most between a reduce-scatter's copy from host and its launch. */
#define RS_COPY_IN_CALLS 3

/* 1 when host call x launches a reduce-scatter participant, -1 another collective, 0 none;
 * *copy set when it launches a copy. */
static int
rs_launch(const dfg *g, int32_t x, int *copy)
{
    int rs = 0;
    *copy = 0;
    for (int32_t i = dfg_launched_first(g, x); i >= 0; i = dfg_launched_next(g, x, i)) {
        int32_t d = g->launched[i], q = dfg_group(g, d);
        if (g->kind[d] == DFG_COLL || q >= 0)
            rs = q >= 0 && g->grp_op[q] == DPRO_COLL_REDUCESCATTER && rs >= 0 ? 1 : -1;
        *copy |= g->kind[d] == DFG_MEMCPY;
    }
    return rs;
}

/* workload.h: micro (WL_MICRO_SYNC_ONLY) for the copy-in of FSDP's reduce-scatters on
 * a backward thread t: the device ops launched from the last copy before a
 * reduce-scatter's launch up to it, when at most RS_COPY_IN_CALLS launching calls and no
 * other collective come between, in one iteration (FSDP2's foreach_reduce copies the
 * split sizes from host, then concatenates the unit's gradients into the reduce-scatter's
 * input; under set_requires_gradient_sync(False) a micro-batch runs neither). A trace
 * without such a copy marks nothing. */
static void
mark_rs_copy_in(workload *w, int32_t t)
{
    const dfg *g = w->work;
    int32_t copy = -1, calls = 0;
    for (int32_t x = g->res_first[t]; x >= 0; x = g->next_on_res[x]) {
        int has_copy = 0, rs = alive(g, x) ? rs_launch(g, x, &has_copy) : 0;
        if (copy >= 0 && w->iter[copy] != w->iter[x])
            copy = -1;
        if (rs > 0 && copy >= 0 && calls <= RS_COPY_IN_CALLS)
            for (int32_t m = copy; m != x; m = g->next_on_res[m])
                for (int32_t i = dfg_launched_first(g, m); i >= 0; i = dfg_launched_next(g, m, i))
                    w->buckets.micro[g->launched[i]] = WL_MICRO_SYNC_ONLY;
        calls += alive(g, x) && dfg_launched_first(g, x) >= 0;
        if (rs != 0 || (alive(g, x) && has_copy)) {
            copy = rs == 0 ? x : -1;
            calls = 1;
        }
    }
}

/* workload.h: micro (WL_MICRO_INPUT) for the batch's copies on rank r's main thread: in
 * each iteration, the copies it launches before its first forward all-gather that belong
 * to no unshard (gather_ops; fsdp_train.py's x.to(dev), the host making the batch in the
 * gap before it); WL_MICRO_SYNC_ONLY for its other device ops there (no forward computes
 * before its first unshard: the optimizer's step where the iteration starts before it,
 * once a step). */
static void
mark_fsdp_input(workload *w, const rank_info *ri, int32_t r)
{
    const dfg *g = w->work;
    int32_t it = -1, gathered = 0;
    for (int32_t x = g->res_first[ri[r].main_thread]; x >= 0; x = g->next_on_res[x]) {
        if (!alive(g, x))
            continue;
        gathered = w->iter[x] == it && gathered;
        it = w->iter[x];
        int32_t c = launched_gather(w, ri, x);
        gathered |= c >= 0 && gather_role(w, ri, c) == WL_FSDP_FWD;
        for (int32_t i = dfg_launched_first(g, x); !gathered && i >= 0;
             i = dfg_launched_next(g, x, i)) {
            int32_t d = g->launched[i];
            if (is_device(g, d) && w->fsdp.gather_ops[d] < 0 &&
                w->buckets.micro[d] == WL_MICRO_PHASE)
                w->buckets.micro[d] =
                    g->kind[d] == DFG_MEMCPY ? WL_MICRO_INPUT : WL_MICRO_SYNC_ONLY;
        }
    }
}

/* Bytes a thread of PyTorch's vectorized_elementwise_kernel<vec, F, array<char*, N>>
 * moves: vec elements of each of its N tensors, of the functor's float, double, Half or
 * BFloat16 (the kernel's template, as its name spells it, mangled or not); 0 for another
 * kernel or a name that does not say them. */
static double
elementwise_thread_bytes(const char *name)
{
    static const char kern[] = "vectorized_elementwise_kernel<", arr[] = "<char*, ";
    char *dm = kernels_demangle(name);
    const char *s = dm ? dm : name, *k = strstr(s, kern), *a = strstr(s, arr);
    double vec = k ? strtod(k + sizeof kern - 1, NULL) : 0,
           n = a ? strtod(a + sizeof arr - 1, NULL) : 0;
    double esz = strstr(s, "c10::Half") || strstr(s, "c10::BFloat16") ? 2
                 : strstr(s, "double")                                ? 8
                 : strstr(s, "float")                                 ? 4
                                                                      : 0;
    free(dm);
    return vec > 0 && n > 0 ? vec * n * esz : 0;
}

/* workload.h: micro for the host calls of the forward's unshards and copy-outs
 * (gather_ops, a forward all-gather's) that launch nothing and do not block: each
 * micro-batch's forward gathers every unit again, with its event calls (WL_MICRO_CALL)
 * and the host's work before its polls (WL_MICRO_GAP: left out, that work would be
 * nobody's, the call after a poll timed from the poll's end). */
static void
mark_unshard_calls(workload *w)
{
    const dfg *g = w->work;
    const workload_fsdp *f = &w->fsdp;
    for (int32_t x = 0; x < g->n_nodes; x++) {
        int32_t q = f->gather_ops[x];
        if (q >= 0 && f->grp_role[q] == WL_FSDP_FWD && alive(g, x) && g->kind[x] == DFG_HOST &&
            dfg_launched_first(g, x) < 0 && !(g->flags[x] & DFG_F_BLOCKING) &&
            w->buckets.micro[x] == WL_MICRO_PHASE)
            w->buckets.micro[x] = event_poll(g, x) ? WL_MICRO_GAP : WL_MICRO_CALL;
    }
}

/* workload.h: n_adds, accum_bytes_per_ns, accum_dev_ns, accum_host_ns from the compared
 * iterations: the rate of the element-wise kernels with a known launch size longer than
 * twice the fixed cost (their bytes over their time beyond it), and the median
 * backward-thread launch of a compute-stream kernel. Returns 0 or -1 (out of memory). */
static int
find_accum_adds(workload *w, const rank_info *ri)
{
    const dfg *g = w->work;
    workload_fsdp *f = &w->fsdp;
    double c0 = w->fusion.kernel_fixed_ns, bytes = 0, ns = 0;
    int64_t *calls = malloc(sizeof *calls * ((size_t)g->n_nodes + 1));
    int32_t n = 0;
    int rc = calls ? 0 : -1;
    for (int32_t d = 0; rc == 0 && d < g->n_nodes; d++) {
        int32_t h = g->launch[d], r = g->res_rank[g->res[d]];
        if (!alive(g, d) || g->kind[d] != DFG_KERNEL || w->iter[d] < w->iter_first ||
            w->iter[d] > w->iter_last)
            continue;
        double t = (double)dfg_dur(g, d), th = w->fusion.node_threads[d];
        double b =
            th > 0 && t > 2 * c0 ? th * elementwise_thread_bytes(dfg_name(g, g->name[d])) : 0;
        bytes += b;
        ns += b > 0 ? t - c0 : 0;
        if (h >= 0 && g->res[d] == ri[r].compute_stream && g->res[h] == ri[r].bwd_thread &&
            g->launched[dfg_launched_first(g, h)] == d)
            calls[n++] = dfg_dur(g, h) + dfg_gap(g, h);
    }
    f->accum_bytes_per_ns = ns > 0 ? bytes / ns : 0;
    f->n_adds = f->n_params > 0 ? f->n_params : f->n_rs;
    f->accum_dev_ns = f->n_adds * c0;
    if (f->accum_bytes_per_ns > 0)
        f->accum_dev_ns += 3.0 * (double)f->unit_bytes[WL_FSDP_BYTES_GRAD] / f->accum_bytes_per_ns;
    f->accum_host_ns = rc == 0 && n > 0 ? f->n_adds * sim_median_i64(calls, n) : 0;
    free(calls);
    return rc;
}

/* workload.h: return_ns, from each rank with a backward thread: per blocking call x of
 * the main thread in a compared iteration that follows a run of the backward thread's
 * calls (the last of them started after the main thread's previous call ended and ended
 * before x, the next one starts after x returned: the main thread waited in the
 * backward, then in x), the time from that last call's end to x's start; the median, 0
 * without one. A wake-up's zero-length stand-in (dfg_wake_handoff) is no call. Returns 0
 * or -1. */
static int
find_return_lag(workload *w, const rank_info *ri)
{
    const dfg *g = w->work;
    int64_t *v = malloc(sizeof *v * ((size_t)g->n_nodes + 1));
    int32_t n = 0;
    int rc = v ? 0 : -1;
    for (int32_t r = 0; rc == 0 && r < g->n_ranks; r++) {
        int32_t b = ri[r].bwd_thread >= 0 ? g->res_first[ri[r].bwd_thread] : -1, last = -1;
        int64_t prev_end = INT64_MIN;
        for (int32_t x = ri[r].main_thread >= 0 && b >= 0 ? g->res_first[ri[r].main_thread] : -1;
             x >= 0; x = g->next_on_res[x]) {
            if (!alive(g, x) || ((g->flags[x] & DFG_F_WAKEUP) && g->mlen[x] == 0))
                continue;
            for (; b >= 0 && g->mstart[b] < g->mstart[x]; b = g->next_on_res[b])
                last = alive(g, b) ? b : last;
            if ((g->flags[x] & DFG_F_BLOCKING) && last >= 0 && g->mstart[last] > prev_end &&
                dfg_mend(g, last) <= g->mstart[x] && (b < 0 || g->mstart[b] >= dfg_mend(g, x)) &&
                w->iter[x] >= w->iter_first && w->iter[x] <= w->iter_last)
                v[n++] = g->mstart[x] - dfg_mend(g, last);
            prev_end = dfg_mend(g, x);
        }
    }
    w->fsdp.return_ns = n > 0 ? (int64_t)sim_median_i64(v, n) : 0;
    free(v);
    return rc;
}

int
workload_find_fsdp(workload *w, const rank_info *ri)
{
    const dfg *g = w->work;
    workload_fsdp *f = &w->fsdp;
    int64_t n[3] = {0, 0, 0}, n_rs = 0;
    int32_t ranks = 0, iters = w->iter_last - w->iter_first + 1, n_per = 0;
    int32_t cap = g->n_ranks * (iters > 0 ? iters : 0) * 2 + 1;
    int64_t *per_iter = malloc(sizeof *per_iter * (size_t)cap);
    int rc = -1;
    f->grp_role = calloc((size_t)g->n_groups + 1, 1);
    f->gather_ops = malloc(sizeof *f->gather_ops * ((size_t)g->n_nodes + 1));
    f->prefetch_ns = calloc((size_t)g->n_nodes + 1, sizeof *f->prefetch_ns);
    if (f->grp_role && f->gather_ops && f->prefetch_ns && per_iter) {
        for (int32_t d = 0; d < g->n_nodes; d++) {
            f->gather_ops[d] = -1;
            int role = alive(g, d) ? gather_role(w, ri, d) : WL_FSDP_NONE;
            int compared = w->iter[d] >= w->iter_first && w->iter[d] <= w->iter_last;
            if (role != WL_FSDP_NONE)
                f->grp_role[dfg_group(g, d)] = (uint8_t)role;
            int32_t wd = compared ? dfg_rank_weight(g, g->res_rank[g->res[d]]) : 0;
            n[role] += wd;
            n_rs += alive(g, d) && g->kind[d] == DFG_COLL && dfg_group(g, d) >= 0 &&
                            g->grp_op[dfg_group(g, d)] == DPRO_COLL_REDUCESCATTER
                        ? wd
                        : 0;
        }
        /* a folded rank has no nodes of its own: its representative's stand for it,
         * counted once for each rank of the class */
        for (int32_t r = 0; r < g->n_ranks; r++) {
            if (dfg_rank_rep(g, r) != r)
                continue;
            int32_t weight = dfg_rank_weight(g, r), from = n_per;
            ranks += ri[r].main_thread >= 0 ? weight : 0;
            if (ri[r].main_thread >= 0)
                walk_thread(w, ri, r, ri[r].main_thread, per_iter, &n_per, cap);
            if (ri[r].bwd_thread >= 0)
                walk_thread(w, ri, r, ri[r].bwd_thread, per_iter, &n_per, cap);
            for (int32_t c = 1, got = n_per - from; c < weight && n_per + got <= cap; c++) {
                memcpy(per_iter + n_per, per_iter + from, sizeof *per_iter * (size_t)got);
                n_per += got;
            }
        }
        /* the median over ranks and iterations: the last iteration runs to the trace's
         * end, where the job may gather more (fsdp_train.py's full_tensor) */
        f->gathered_bytes = n_per > 0 ? (int64_t)sim_median_i64(per_iter, n_per) : 0;
        double per = ranks > 0 && iters > 0 ? 1.0 / ((double)ranks * iters) : 0;
        f->n_fwd = (int32_t)((double)n[WL_FSDP_FWD] * per + 0.5);
        f->n_bwd = (int32_t)((double)n[WL_FSDP_BWD] * per + 0.5);
        f->n_rs = (int32_t)((double)n_rs * per + 0.5);
        rc = find_copy_outs(w, ri);
        if (rc == 0)
            rc = find_unit_bytes(w, ri);
        if (rc == 0)
            rc = find_unit_params(w, ri);
        f->why[0] = 0;
        if (f->n_fwd < 1)
            snprintf(f->why, sizeof f->why,
                     "no all-gathers in the forward: not FSDP's parameter sharding");
        else if (f->n_rs < 1)
            snprintf(f->why, sizeof f->why, "no reduce-scatters: not FSDP's gradient sharding");
        /* accumulation's micro-batch (DDP's marks where the trace has DDP's buckets) */
        if (rc == 0 && !f->why[0] && !w->buckets.micro) {
            w->buckets.micro = calloc((size_t)g->n_nodes + 1, 1);
            rc = w->buckets.micro ? 0 : -1;
            for (int32_t r = 0; rc == 0 && r < g->n_ranks; r++)
                if (ri[r].bwd_thread >= 0)
                    mark_rs_copy_in(w, ri[r].bwd_thread);
            for (int32_t r = 0; rc == 0 && r < g->n_ranks; r++)
                if (ri[r].main_thread >= 0 && dfg_rank_rep(g, r) == r)
                    mark_fsdp_input(w, ri, r);
            if (rc == 0)
                mark_unshard_calls(w);
            if (rc == 0)
                rc = find_accum_adds(w, ri);
            if (rc == 0)
                rc = find_return_lag(w, ri);
        }
    }
    free(per_iter);
    return rc;
}
