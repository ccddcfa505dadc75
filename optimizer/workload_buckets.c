/*
 * workload_buckets.c: bucket units and the gradient sizes per layer (see workload.h).
 */
#define PR_FMT "optimizer"
#include "optimizer/workload_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dprotrace.h"
#include "optimizer/partition.h"

/* The median duration and gap of the live host calls named like h on h's thread, into
 * *dur and *gap; returns 0, -1 when out of memory. */
static int
typical_call(const dfg *g, int32_t h, int64_t *dur, int64_t *gap)
{
    int32_t n = 0, k = 0;
    for (int32_t m = g->res_first[g->res[h]]; m >= 0; m = g->next_on_res[m])
        n += alive(g, m) && g->name[m] == g->name[h];
    int64_t *d = malloc(sizeof *d * (size_t)(n + 1)), *p = malloc(sizeof *p * (size_t)(n + 1));
    int rc = d && p ? 0 : -1;
    for (int32_t m = g->res_first[g->res[h]]; rc == 0 && m >= 0; m = g->next_on_res[m])
        if (alive(g, m) && g->name[m] == g->name[h]) {
            d[k] = dfg_dur(g, m);
            p[k++] = dfg_gap(g, m);
        }
    if (rc == 0) {
        *dur = (int64_t)sim_median_i64(d, k);
        *gap = (int64_t)sim_median_i64(p, k);
    }
    free(d);
    free(p);
    return rc;
}

/* Typical costs of the total host nodes calls[] of g (-1: an empty slot) into *dur and
 * *gap (allocated here; -1 for an empty slot): one median per (thread, name), reused
 * across the slots for up to k names a thread (more names are each computed). Returns 0,
 * -1 when out of memory. */
static int
typical_costs(const dfg *g, const int32_t *calls, int32_t total, int k, int64_t **dur,
              int64_t **gap)
{
    int64_t *d = *dur = malloc(sizeof *d * (size_t)(total + 1));
    int64_t *p = *gap = malloc(sizeof *p * (size_t)(total + 1));
    int32_t *seen = malloc(sizeof *seen * (size_t)k * (size_t)(g->n_res + 1));
    int rc = d && p && seen ? 0 : -1;
    for (int32_t i = 0; rc == 0 && i < k * g->n_res; i++)
        seen[i] = -1;
    for (int32_t i = 0; rc == 0 && i < total; i++) {
        int32_t h = calls[i], j = 0;
        d[i] = p[i] = -1;
        if (h < 0)
            continue;
        int32_t *at = &seen[k * g->res[h]];
        while (j < k && at[j] >= 0 && g->name[calls[at[j]]] != g->name[h])
            j++;
        if (j < k && at[j] >= 0) {
            d[i] = d[at[j]];
            p[i] = p[at[j]];
            continue;
        }
        rc = typical_call(g, h, &d[i], &p[i]);
        if (j < k)
            at[j] = i;
    }
    free(seen);
    return rc;
}

/* Fills bu->host_dur and bu->host_gap (workload.h) for the bu->group_hosts of g (3
 * names a thread: the record, the wait and the collective call), block_dur and
 * block_gap for the bu->group_block. Returns 0, -1 when out of memory. */
static int
typical_hook_costs(const dfg *g, workload_buckets *bu)
{
    int rc = typical_costs(g, bu->group_hosts, bu->group_hosts_off[g->n_groups], 3, &bu->host_dur,
                           &bu->host_gap);
    if (rc == 0)
        rc = typical_costs(g, bu->group_block, bu->group_block_off[g->n_groups], 16, &bu->block_dur,
                           &bu->block_gap);
    return rc;
}

/* Whether host node m can be in a collective call's hook block (workload.h: group_block):
 * a live call, woken by no other thread, that launches nothing and neither blocks nor
 * copies. */
static int
hook_call(const dfg *g, int32_t m)
{
    if (m < 0 || !alive(g, m) || g->kind[m] != DFG_HOST || (g->flags[m] & DFG_F_WAKEUP) ||
        dfg_launched_first(g, m) >= 0)
        return 0;
    dpro_api_class c = api_class(g, m);
    return c == DPRO_API_CLASS_EVENT_RECORD || c == DPRO_API_CLASS_STREAM_WAIT ||
           c == DPRO_API_CLASS_OTHER;
}

/* The hook block of collective call h (workload.h): its first call into *first and its
 * last into *last (h itself when the run is empty on that side). prev: dfg_prev_table. */
static void
hook_block(const dfg *g, const int32_t *prev, int32_t h, int32_t *first, int32_t *last)
{
    int32_t a = h, b = h;
    while (hook_call(g, prev[a]))
        a = prev[a];
    while (hook_call(g, g->next_on_res[b]))
        b = g->next_on_res[b];
    /* a run that ends at the next collective call is that call's */
    int32_t after = g->next_on_res[b];
    if (after >= 0 && alive(g, after) && g->kind[after] == DFG_HOST)
        for (int32_t i = dfg_launched_first(g, after); i >= 0; i = dfg_launched_next(g, after, i))
            if (g->kind[g->launched[i]] == DFG_COLL)
                b = h;
    *first = a;
    *last = b;
}

/* Fills the hook blocks (workload.h: group_block, group_block_off, block_first) of the
 * participants whose calls are in bu->group_hosts, less those calls. prev:
 * dfg_prev_table. Returns 0, -1 when out of memory. */
static int
find_hook_blocks(const dfg *g, const int32_t *prev, workload_buckets *bu)
{
    bu->group_block_off = calloc((size_t)g->n_groups + 1, sizeof *bu->group_block_off);
    int rc = bu->group_block_off ? 0 : -1;
    for (int pass = 0; rc == 0 && pass < 2; pass++) {
        int32_t *fill = pass ? calloc((size_t)g->n_groups + 1, sizeof *fill) : NULL;
        if (pass && (!fill || !bu->group_block || !bu->block_first))
            rc = -1;
        for (int32_t q = 0; rc == 0 && q < g->n_groups; q++)
            for (int32_t i = bu->group_hosts_off[q]; i < bu->group_hosts_off[q + 1]; i += 3) {
                const int32_t *slot = &bu->group_hosts[i];
                int32_t a, b;
                hook_block(g, prev, slot[0], &a, &b);
                for (int32_t m = a;; m = g->next_on_res[m]) {
                    if (m != slot[0] && m != slot[1] && m != slot[2]) {
                        if (pass) {
                            int32_t at = bu->group_block_off[q] + fill[q]++;
                            bu->group_block[at] = m;
                            bu->block_first[at] = m == a;
                        } else
                            bu->group_block_off[q + 1]++;
                    }
                    if (m == b)
                        break;
                }
            }
        if (rc == 0 && !pass) {
            for (int32_t q = 0; q < g->n_groups; q++)
                bu->group_block_off[q + 1] += bu->group_block_off[q];
            size_t n = (size_t)bu->group_block_off[g->n_groups] + 1;
            bu->group_block = malloc(sizeof *bu->group_block * n);
            bu->block_first = malloc(n);
        }
        free(fill);
    }
    return rc;
}

/* Whether host call m of g launches a collective. */
static int
launches_collective(const dfg *g, int32_t m)
{
    int found = 0;
    for (int32_t i = dfg_launched_first(g, m); i >= 0 && !found; i = dfg_launched_next(g, m, i))
        found = g->kind[g->launched[i]] == DFG_COLL;
    return found;
}

/* Fills bu->block_after and bu->after_gap (workload.h) for the participants in
 * bu->group_hosts, whose blocks bu->group_block holds. prev: dfg_prev_table. Returns 0,
 * -1 when out of memory. */
static int
find_block_after(const dfg *g, const int32_t *prev, workload_buckets *bu)
{
    int32_t n = bu->group_hosts_off[g->n_groups] / 3;
    uint8_t *in_block = calloc((size_t)g->n_nodes + 1, 1);
    int64_t *typ_dur = NULL;
    bu->block_after = malloc(sizeof *bu->block_after * (size_t)(n + 1));
    int rc = in_block && bu->block_after ? 0 : -1;
    for (int32_t i = 0; rc == 0 && i < bu->group_hosts_off[g->n_groups]; i++)
        if (bu->group_hosts[i] >= 0)
            in_block[bu->group_hosts[i]] = 1;
    for (int32_t i = 0; rc == 0 && i < bu->group_block_off[g->n_groups]; i++)
        in_block[bu->group_block[i]] = 1;
    for (int32_t j = 0; rc == 0 && j < n; j++) {
        int32_t a, b;
        hook_block(g, prev, bu->group_hosts[3 * j], &a, &b);
        int32_t after = g->next_on_res[b];
        int ordinary = after >= 0 && alive(g, after) && g->kind[after] == DFG_HOST &&
                       !in_block[after] && !(g->flags[after] & DFG_F_WAKEUP) &&
                       !launches_collective(g, after);
        bu->block_after[j] = ordinary ? after : -1;
    }
    if (rc == 0)
        rc = typical_costs(g, bu->block_after, n, 4, &typ_dur, &bu->after_gap);
    free(typ_dur);
    free(in_block);
    return rc;
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
        for (int32_t i = dfg_launched_first(g, h); i >= 0; i = dfg_launched_next(g, h, i)) {
            int32_t d = g->launched[i];
            /* gradient all-reduces only: point-to-point exchanges (pipeline stages) are
             * groups too, but no bucket knob moves them */
            if (g->kind[d] == DFG_COLL && dfg_group(g, d) >= 0 &&
                g->grp_op[dfg_group(g, d)] != DPRO_COLL_SEND &&
                g->grp_op[dfg_group(g, d)] != DPRO_COLL_RECV)
                out[c++] = d;
        }
    }
    return c;
}

int
workload_find_units(workload *w, rank_info *ri)
{
    dfg *g = w->g;
    int32_t *seq = malloc(sizeof *seq * (size_t)(g->n_nodes + 1));
    w->buckets.group_unit = malloc(sizeof *w->buckets.group_unit * (size_t)(g->n_groups + 1));
    w->buckets.group_hosts_off =
        calloc((size_t)g->n_groups + 1, sizeof *w->buckets.group_hosts_off);
    if (!seq || !w->buckets.group_unit || !w->buckets.group_hosts_off) {
        free(seq);
        return -1;
    }
    for (int32_t q = 0; q < g->n_groups; q++)
        w->buckets.group_unit[q] = -1;
    /* reference: the first rank covering the first compared iteration */
    int32_t ref_n = -1;
    for (int32_t r = 0; r < g->n_ranks && ref_n < 0; r++) {
        if (w->iter_first >= ri[r].n_iters)
            continue;
        ref_n = iteration_collectives(w, &ri[r], w->iter_first, seq);
        if (ref_n > 0) {
            w->buckets.unit_bytes = malloc(sizeof *w->buckets.unit_bytes * (size_t)ref_n);
            if (!w->buckets.unit_bytes) {
                free(seq);
                return -1;
            }
            w->buckets.n_units = ref_n;
            for (int32_t u = 0; u < ref_n; u++)
                w->buckets.unit_bytes[u] = g->grp_bytes[dfg_group(g, seq[u])];
            w->buckets.coll_op = g->grp_op[dfg_group(g, seq[0])];
            w->buckets.coll_nranks = g->grp_nranks[dfg_group(g, seq[0])];
        }
    }
    if (w->buckets.n_units < 1) { /* one unit: tensor partition can still split it */
        snprintf(w->buckets.why, sizeof w->buckets.why,
                 "no gradient all-reduce launched by the backward");
        free(seq);
        return 0;
    }
    int mismatch = 0;
    for (int32_t r = 0; r < g->n_ranks; r++) {
        for (int32_t it = 0; it < ri[r].n_iters; it++) {
            int32_t c = iteration_collectives(w, &ri[r], it, seq);
            int ok = c == w->buckets.n_units;
            for (int32_t u = 0; ok && u < c; u++)
                ok = g->grp_bytes[dfg_group(g, seq[u])] == w->buckets.unit_bytes[u] &&
                     g->grp_op[dfg_group(g, seq[u])] == w->buckets.coll_op;
            if (!ok) {
                if (c > 0 && it >= w->iter_first && it <= w->iter_last)
                    mismatch = 1;
                continue;
            }
            for (int32_t u = 0; u < c; u++)
                w->buckets.group_unit[dfg_group(g, seq[u])] = u;
        }
    }
    if (mismatch) {
        snprintf(w->buckets.why, sizeof w->buckets.why,
                 "the gradient all-reduces differ between ranks or iterations");
        w->buckets.n_units = 0;
        free(seq);
        return 0;
    }
    if (!w->buckets.model)
        snprintf(w->buckets.why, sizeof w->buckets.why, "no collective cost model");
    /* host calls that go away with a folded bucket: the collective call and the event
     * record / stream wait right before it */
    int32_t total = 0;
    for (int32_t d = 0; d < g->n_nodes; d++)
        if (alive(g, d) && g->kind[d] == DFG_COLL && dfg_group(g, d) >= 0 &&
            w->buckets.group_unit[dfg_group(g, d)] >= 0 && g->launch[d] >= 0)
            w->buckets.group_hosts_off[dfg_group(g, d) + 1] += 3;
    for (int32_t q = 0; q < g->n_groups; q++) {
        w->buckets.group_hosts_off[q + 1] += w->buckets.group_hosts_off[q];
    }
    total = w->buckets.group_hosts_off[g->n_groups];
    w->buckets.group_hosts = malloc(sizeof *w->buckets.group_hosts * (size_t)(total + 1));
    int32_t *fill = calloc((size_t)g->n_groups + 1, sizeof *fill);
    int32_t *prev = dfg_prev_table(g);
    if (!w->buckets.group_hosts || !fill || !prev) {
        free(fill);
        free(prev);
        free(seq);
        return -1;
    }
    for (int32_t d = 0; d < g->n_nodes; d++) {
        if (!alive(g, d) || g->kind[d] != DFG_COLL || dfg_group(g, d) < 0 ||
            w->buckets.group_unit[dfg_group(g, d)] < 0 || g->launch[d] < 0)
            continue;
        int32_t q = dfg_group(g, d), h = g->launch[d];
        int32_t *slot = &w->buckets.group_hosts[w->buckets.group_hosts_off[q] + fill[q]];
        slot[0] = h;
        slot[1] = slot[2] = -1;
        int32_t p = prev[h];
        for (int k = 1; k < 3 && p >= 0; k++, p = prev[p])
            if (api_class(g, p) == DPRO_API_CLASS_EVENT_RECORD ||
                api_class(g, p) == DPRO_API_CLASS_STREAM_WAIT)
                slot[k] = p;
            else
                break;
        fill[q] += 3;
    }
    int rc = find_hook_blocks(g, prev, &w->buckets);
    if (rc == 0)
        rc = find_block_after(g, prev, &w->buckets);
    free(fill);
    free(prev);
    free(seq);
    if (rc == 0)
        rc = typical_hook_costs(g, &w->buckets);
    return rc;
}

void
workload_drop_bucket_hosts(dfg *g, const workload_buckets *bu, int32_t q)
{
    for (int32_t i = bu->group_hosts_off[q]; i < bu->group_hosts_off[q + 1]; i++) {
        int32_t h = bu->group_hosts[i];
        if (h >= 0) {
            g->dur[h] = 0;
            g->gap[h] = 0;
        }
    }
    for (int32_t i = bu->group_block_off[q]; i < bu->group_block_off[q + 1]; i++) {
        int32_t h = bu->group_block[i];
        g->dur[h] = 0;
        if (!bu->block_first[i])
            g->gap[h] = 0;
    }
    for (int32_t j = bu->group_hosts_off[q] / 3;
         bu->block_after && j < bu->group_hosts_off[q + 1] / 3; j++) {
        int32_t h = bu->block_after[j];
        if (h >= 0 && bu->after_gap[j] >= 0 && bu->after_gap[j] < g->gap[h])
            g->gap[h] = bu->after_gap[j];
    }
    for (int32_t c = bu->final_wait ? g->grp_first[q] : -1; c >= 0; c = dfg_next_in_group(g, c))
        if (bu->final_wait[c] >= 0) {
            g->dur[bu->final_wait[c]] = 0;
            g->gap[bu->final_wait[c]] = 0;
        }
}

/* Whether group q of g is one of bu's buckets that a plan folded into another. */
static int
folded_group(const dfg *g, const workload_buckets *bu, int32_t q)
{
    return bu->group_unit[q] >= 0 && g->grp_dur[q] == 0;
}

int
workload_folds_buckets(const dfg *g, const workload_buckets *bu, int32_t n_groups)
{
    int folds = 0;
    for (int32_t q = 0; q < n_groups && q < g->n_groups && !folds; q++)
        folds = folded_group(g, bu, q);
    return folds;
}

/* The participant that carries folded participant c's bytes in the plan: the next one on
 * its stream of a bucket the plan keeps (of bu's first n_groups groups) or adds (a group
 * past them: tensor partition's buckets that close inside a unit, partition.h), -1 when
 * none. */
static int32_t
closing_participant(const dfg *g, const workload_buckets *bu, int32_t n_groups, int32_t c)
{
    int32_t n = g->next_on_res[c];
    for (; n >= 0; n = g->next_on_res[n]) {
        int32_t q = g->kind[n] == DFG_COLL ? dfg_group(g, n) : -1;
        if (q >= n_groups || (q >= 0 && bu->group_unit[q] >= 0 && !folded_group(g, bu, q)))
            break;
    }
    return n;
}

/* A folded participant and the participant that carries its bytes
 * (closing_participant). */
typedef struct unhook {
    int32_t node, to;
} unhook;

static int
cmp_unhook(const void *a, const void *b)
{
    const unhook *x = a, *y = b;
    return (x->node > y->node) - (x->node < y->node);
}

/* The carrier of folded participant s in u (n of them, by node), -2 when s is none. */
static int32_t
unhook_to(const unhook *u, size_t n, int32_t s)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (u[mid].node < s)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && u[lo].node == s ? u[lo].to : -2;
}

int64_t
workload_unhook_folded(dfg *g, const workload_buckets *bu, int32_t n_groups)
{
    /* the folded participants, marked in a bit a node and listed with their carriers:
     * a few of the nodes, where a map of every node cost 4 bytes each a plan */
    size_t n = 0, cap = 0, words = ((size_t)g->n_nodes + 64) / 64;
    uint64_t *mark = calloc(words, sizeof *mark);
    unhook *u = NULL;
    int64_t moved = mark ? 0 : -1;
    for (int32_t q = 0; moved == 0 && q < n_groups && q < g->n_groups; q++)
        for (int32_t c = folded_group(g, bu, q) ? g->grp_first[q] : -1; moved == 0 && c >= 0;
             c = dfg_next_in_group(g, c)) {
            if (n == cap) {
                cap = cap ? 2 * cap : 256;
                unhook *x = realloc(u, cap * sizeof *x);
                if (!x) {
                    moved = -1;
                    break;
                }
                u = x;
            }
            u[n++] = (unhook){c, closing_participant(g, bu, n_groups, c)};
            mark[(size_t)c / 64] |= (uint64_t)1 << ((size_t)c % 64);
        }
    if (moved == 0 && n > 0)
        qsort(u, n, sizeof *u, cmp_unhook);
    for (int64_t i = 0; moved >= 0 && n > 0 && i < g->n_edges; i++) {
        int32_t s = g->esrc[i], d = g->edst[i];
        if (s < 0 || d < 0 || !((mark[(size_t)s / 64] >> ((size_t)s % 64)) & 1) ||
            g->kind[d] == DFG_HOST || g->res[d] == g->res[s])
            continue;
        int32_t c = unhook_to(u, n, s);
        /* launched after the call of the collective that carries the bytes (DDP's copies
         * back into the gradients): it waits for that one; before it (the comm hook's
         * wait in the backward): for nothing */
        int later = c >= 0 && g->launch[d] >= 0 && g->launch[c] >= 0 &&
                    g->mstart[g->launch[d]] > g->mstart[g->launch[c]];
        g->esrc[i] = later ? c : -1;
        g->edst[i] = later ? d : -1; /* dfg_finalize drops an edge of -1 */
        moved++;
    }
    if (moved > 0)
        g->finalized = 0;
    free(mark);
    free(u);
    return moved;
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

/* The gradient tensors' bytes of the layers (workload.h: grad_bytes) from layer_grad,
 * unit_lo and the units' bytes. Returns 0, -1 when out of memory. */
static int
grad_tensors(workload_buckets *bu, int32_t n_layers)
{
    bu->grad_bytes = malloc(sizeof *bu->grad_bytes * (size_t)n_layers);
    if (!bu->grad_bytes)
        return -1;
    bu->n_grad_layers = n_layers;
    for (int32_t u = 0; u < bu->n_units; u++) {
        int32_t hi = (u == 0 ? n_layers : bu->unit_lo[u - 1]) - 1, lo = bu->unit_lo[u];
        int64_t excess = -bu->unit_bytes[u], room2 = 0;
        for (int32_t l = lo; l <= hi; l++) {
            excess += bu->layer_grad[l];
            room2 += alloc_slack(bu->layer_grad[l]) > 512 ? alloc_slack(bu->layer_grad[l]) - 1 : 0;
        }
        /* the excess is the allocator's rounding (match_run keeps it within the slack) */
        int64_t take2 = excess < room2 ? excess : room2, take = excess - take2;
        for (int32_t l = hi; l >= lo; l--) {
            int64_t b = bu->layer_grad[l], most = alloc_slack(b) - 1;
            int64_t *left = most > 511 ? &take2 : &take, t = *left < most ? *left : most;
            t = t > 0 && t < b ? t : 0;
            bu->grad_bytes[l] = b - t;
            *left -= t;
        }
    }
    return 0;
}

/* The gradient sizes per layer for tensor partition (workload.h). */
int
workload_find_gradients(workload *w)
{
    if (w->buckets.n_units <= 0 || w->buckets.why[0])
        return 0;
    if (w->layers.n_layers <= 0) {
        snprintf(w->buckets.grad_why, sizeof w->buckets.grad_why,
                 "no layers (no activation allocations)");
        return 0;
    }
    w->buckets.unit_lo = malloc(sizeof *w->buckets.unit_lo * (size_t)w->buckets.n_units);
    w->buckets.layer_grad = malloc(sizeof *w->buckets.layer_grad * (size_t)w->layers.n_layers);
    if (!w->buckets.unit_lo || !w->buckets.layer_grad)
        return -1;
    int32_t first = workload_match_gradients(w->layers.mem.static_each, w->layers.mem.n_static,
                                             w->buckets.unit_bytes, w->buckets.n_units,
                                             w->layers.n_layers, w->buckets.unit_lo);
    if (first < 0) {
        snprintf(w->buckets.grad_why, sizeof w->buckets.grad_why,
                 "no run of %d static allocations adds up to the %d all-reduces' bytes",
                 w->layers.n_layers, w->buckets.n_units);
        free(w->buckets.unit_lo);
        free(w->buckets.layer_grad);
        w->buckets.unit_lo = NULL;
        w->buckets.layer_grad = NULL;
        return 0;
    }
    for (int32_t l = 0; l < w->layers.n_layers; l++)
        w->buckets.layer_grad[l] = w->layers.mem.static_each[first + l];
    return grad_tensors(&w->buckets, w->layers.n_layers);
}

int
workload_match_params(const int64_t *copies, int32_t n, const int64_t *unit_bytes, int32_t n_units,
                      int32_t *unit_param_off)
{
    int64_t cum_c = 0, cum_u = 0;
    int32_t i = 0;
    int ok = n > 0 && n_units > 0;
    for (int32_t u = 0; ok && u < n_units; u++) {
        cum_u += unit_bytes[u];
        unit_param_off[u] = i;
        while (i < n && cum_c < cum_u)
            cum_c += copies[i++];
        ok = cum_c == cum_u && i > unit_param_off[u];
    }
    if (ok)
        unit_param_off[n_units] = n;
    return ok && i == n;
}

/* The sizes of the device copies launched on host call h's thread after it (h: an
 * iteration's last gradient all-reduce call), up to the next kernel or collective launch
 * or until they add up to total bytes, into out (at most max). Returns the count. */
static int32_t
copies_after(const dfg *g, int32_t h, int64_t total, int64_t *out, int32_t max)
{
    int32_t n = 0;
    int64_t sum = 0;
    for (int32_t m = g->next_on_res[h]; m >= 0 && sum < total && n < max; m = g->next_on_res[m]) {
        if (!alive(g, m) || g->kind[m] != DFG_HOST)
            continue;
        int stop = 0;
        for (int32_t i = dfg_launched_first(g, m); i >= 0; i = dfg_launched_next(g, m, i)) {
            int32_t d = g->launched[i];
            if (g->kind[d] == DFG_KERNEL || g->kind[d] == DFG_COLL)
                stop = 1;
            else if (g->kind[d] == DFG_MEMCPY && n < max) {
                out[n++] = dfg_bytes(g, d);
                sum += out[n - 1];
            }
        }
        if (stop)
            break;
    }
    return n;
}

/* workload_find_params where there are bucket units: the first compared iteration of
 * a rank whose copies after its last all-reduce match the units. Returns 0, -1 when out
 * of memory. */
static int
learn_params(workload *w, const rank_info *ri)
{
    const dfg *g = w->g;
    workload_buckets *bu = &w->buckets;
    int64_t total = 0;
    for (int32_t u = 0; u < bu->n_units; u++)
        total += bu->unit_bytes[u];
    /* a parameter holds at least 1 byte; every copy is one */
    int32_t max = g->n_nodes < total ? g->n_nodes : (int32_t)total;
    int32_t *seq = malloc(sizeof *seq * (size_t)(g->n_nodes + 1));
    int64_t *cp = malloc(sizeof *cp * (size_t)(max + 1));
    bu->unit_param_off = malloc(sizeof *bu->unit_param_off * (size_t)(bu->n_units + 1));
    int rc = seq && cp && bu->unit_param_off ? 0 : -1;
    int32_t n = 0, found = 0;
    for (int32_t r = 0; rc == 0 && !found && r < g->n_ranks; r++)
        for (int32_t it = w->iter_first; !found && it <= w->iter_last && it < ri[r].n_iters; it++) {
            int32_t c = iteration_collectives(w, &ri[r], it, seq);
            if (c != bu->n_units || g->launch[seq[c - 1]] < 0)
                continue;
            n = copies_after(g, g->launch[seq[c - 1]], total, cp, max);
            found = workload_match_params(cp, n, bu->unit_bytes, bu->n_units, bu->unit_param_off);
        }
    if (rc == 0 && found) {
        bu->n_params = n;
        bu->param_bytes = cp;
        cp = NULL;
    } else {
        free(bu->unit_param_off);
        bu->unit_param_off = NULL;
        snprintf(bu->param_why, sizeof bu->param_why,
                 "no device copies after the last all-reduce add up to the buckets (DDP "
                 "copies each bucket back into the gradients unless gradient_as_bucket_view)");
    }
    free(seq);
    free(cp);
    return rc;
}

/* A walk of the host calls on one thread after a call h, in order, up to the next
 * kernel or collective launch (launches_after, then launches_next until -1): the calls
 * that launch what follows h before compute resumes, such as DDP's copies back after the
 * last gradient all-reduce. The call that launches a kernel or a collective is the last
 * returned, with compute set. */
typedef struct launch_iter {
    const dfg *g;
    int32_t m;   /* the call returned last; -1: the walk is over */
    int compute; /* m launches a kernel or a collective */
} launch_iter;

/* The next call of the walk it (see launch_iter), or -1 past its end. */
static int32_t
launches_next(launch_iter *it)
{
    const dfg *g = it->g;
    int32_t m = it->m < 0 || it->compute ? -1 : g->next_on_res[it->m];
    while (m >= 0 && (!alive(g, m) || g->kind[m] != DFG_HOST))
        m = g->next_on_res[m];
    it->m = m;
    it->compute = 0;
    for (int32_t i = m >= 0 ? dfg_launched_first(g, m) : -1; i >= 0; i = dfg_launched_next(g, m, i))
        it->compute |= g->kind[g->launched[i]] == DFG_KERNEL || g->kind[g->launched[i]] == DFG_COLL;
    return m;
}

/* Starts the walk it of the host calls after h on h's thread (see launch_iter): its first
 * call, or -1 when there is none. */
static int32_t
launches_after(launch_iter *it, const dfg *g, int32_t h)
{
    *it = (launch_iter){.g = g, .m = h};
    return launches_next(it);
}

/* The finalisation's waits of one rank's iteration (workload.h: final_wait): seq[0 ..
 * n_units-1] its gradient all-reduces in launch order; after the last one's call, the
 * stream wait met when the copies back have reached unit u's first (u >= 1) is seq[u-1]'s. */
static void
final_waits(workload *w, const int32_t *seq)
{
    const dfg *g = w->g;
    workload_buckets *bu = &w->buckets;
    int32_t copies = 0, u = 1;
    launch_iter it;
    for (int32_t m = launches_after(&it, g, g->launch[seq[bu->n_units - 1]]);
         m >= 0 && u < bu->n_units && !it.compute; m = launches_next(&it)) {
        for (int32_t i = dfg_launched_first(g, m); i >= 0; i = dfg_launched_next(g, m, i))
            copies += g->kind[g->launched[i]] == DFG_MEMCPY;
        while (u < bu->n_units && bu->unit_param_off[u] < copies)
            u++;
        if (u < bu->n_units && copies == bu->unit_param_off[u] &&
            api_class(g, m) == DPRO_API_CLASS_STREAM_WAIT)
            bu->final_wait[seq[u++ - 1]] = m;
    }
}

/* workload.h: micro (WL_MICRO_SYNC_ONLY) for the copies back of one rank's iteration: the device
 * copies launched on the thread of h (the iteration's last gradient all-reduce call) after it, up
 * to the next kernel or collective launch (that call's own copies included), at most one per
 * parameter. */
static void
mark_copies_back(workload *w, int32_t h)
{
    const dfg *g = w->g;
    int32_t n = 0;
    launch_iter it;
    for (int32_t m = launches_after(&it, g, h); m >= 0 && n < w->buckets.n_params;
         m = launches_next(&it))
        for (int32_t i = dfg_launched_first(g, m); i >= 0; i = dfg_launched_next(g, m, i)) {
            int32_t d = g->launched[i];
            if (g->kind[d] == DFG_MEMCPY && n < w->buckets.n_params) {
                w->buckets.micro[d] = WL_MICRO_SYNC_ONLY;
                n++;
            }
        }
}

/* workload.h: final_wait and the copies back's micro, on every iteration of every
 * rank whose gradient all-reduces are the units, and the copies back of the step before
 * the first iteration (where the iteration is cut between forward and backward they are
 * launched in the first one). Returns 0, -1 when out of memory. */
static int
find_final_waits(workload *w, const rank_info *ri)
{
    const dfg *g = w->g;
    workload_buckets *bu = &w->buckets;
    bu->final_wait = malloc(sizeof *bu->final_wait * ((size_t)g->n_nodes + 1));
    int32_t *seq = malloc(sizeof *seq * ((size_t)g->n_nodes + 1));
    int rc = bu->final_wait && seq ? 0 : -1;
    for (int32_t n = 0; rc == 0 && n < g->n_nodes; n++)
        bu->final_wait[n] = -1;
    for (int32_t r = 0; rc == 0 && r < g->n_ranks; r++) {
        int32_t thread = ri[r].bwd_thread >= 0 ? ri[r].bwd_thread : ri[r].main_thread;
        int32_t n = 0, it = -1, before = -1;
        /* one walk of the thread: an iteration's all-reduces, then its finalisation */
        for (int32_t h = thread >= 0 ? g->res_first[thread] : -1;; h = g->next_on_res[h]) {
            if (h < 0 || w->iter[h] != it) {
                if (it >= 0 && n == bu->n_units && g->launch[seq[n - 1]] >= 0) {
                    final_waits(w, seq);
                    mark_copies_back(w, g->launch[seq[n - 1]]);
                } else if (it < 0 && before >= 0)
                    mark_copies_back(w, before); /* launched in the first iteration */
                if (h < 0)
                    break;
                it = w->iter[h];
                n = 0;
            }
            for (int32_t i = dfg_launched_first(g, h); i >= 0; i = dfg_launched_next(g, h, i)) {
                int32_t d = g->launched[i];
                if (g->kind[d] == DFG_COLL && dfg_group(g, d) >= 0 &&
                    bu->group_unit[dfg_group(g, d)] >= 0)
                    seq[n++] = d;
                /* before the first iteration the units are not assigned: an all-reduce
                 * of the last unit's op and bytes stands for the step's last one */
                else if (it < 0 && g->kind[d] == DFG_COLL && dfg_group(g, d) >= 0 &&
                         g->grp_op[dfg_group(g, d)] == bu->coll_op &&
                         g->grp_bytes[dfg_group(g, d)] == bu->unit_bytes[bu->n_units - 1])
                    before = h;
            }
        }
    }
    free(seq);
    return rc;
}

static int
cmp_int64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* WL_MICRO_SYNC_ONLY for a run of n memsets (run[], node ids) when their sizes, sorted
 * into scratch, are the parameters' (sorted in want); returns 1 then, else 0. */
static int
mark_zeroing_run(workload *w, const int32_t *run, int32_t n, const int64_t *want, int64_t *scratch)
{
    if (n != w->buckets.n_params)
        return 0;
    for (int32_t i = 0; i < n; i++)
        scratch[i] = dfg_bytes(w->g, run[i]);
    qsort(scratch, (size_t)n, sizeof *scratch, cmp_int64);
    int same = memcmp(scratch, want, sizeof *want * (size_t)n) == 0;
    for (int32_t i = 0; same && i < n; i++)
        w->buckets.micro[run[i]] = WL_MICRO_SYNC_ONLY;
    return same;
}

/* workload.h: micro for the zeroing of the gradients, on every rank's main thread: runs
 * of memsets launched one after the other (a launch of anything else, or another
 * iteration, ends a run) whose sizes are the parameters' (WL_MICRO_SYNC_ONLY); where the
 * zeroing comes after the backward (phase OPTIMIZER), the device ops the thread launches
 * after it in its iteration (WL_MICRO_FORWARD); after a zeroing of either phase, the
 * copies the thread launches in its iteration before its next kernel (WL_MICRO_INPUT: the
 * batch, made on the host and copied, as zero_grad(); x = make().to(dev) does whether the
 * iteration opens with the zeroing or is cut after it).
 * Returns 0, -1 when out of memory. */
static int
mark_grad_zeroing(workload *w, const rank_info *ri)
{
    const dfg *g = w->g;
    int32_t np = w->buckets.n_params;
    int32_t *run = malloc(sizeof *run * ((size_t)np + 1));
    int64_t *want = malloc(sizeof *want * ((size_t)np + 1));
    int64_t *scratch = malloc(sizeof *scratch * ((size_t)np + 1));
    int rc = run && want && scratch ? 0 : -1;
    if (rc == 0) {
        memcpy(want, w->buckets.param_bytes, sizeof *want * (size_t)np);
        qsort(want, (size_t)np, sizeof *want, cmp_int64);
    }
    for (int32_t r = 0; rc == 0 && r < g->n_ranks; r++) {
        /* after: a zeroing after the backward seen in this iteration; input: a zeroing of
         * either phase, no kernel launched since */
        int32_t n = 0, it = -1, after = 0, input = 0;
        for (int32_t h = ri[r].main_thread >= 0 ? g->res_first[ri[r].main_thread] : -1;;
             h = g->next_on_res[h]) {
            int other = h < 0 || w->iter[h] != it;
            for (int32_t i = h >= 0 ? dfg_launched_first(g, h) : -1; i >= 0;
                 i = dfg_launched_next(g, h, i))
                other |= g->kind[g->launched[i]] != DFG_MEMSET;
            if (other) {
                /* a zeroing after the backward: the iteration is cut between forward and
                 * backward, the forward that follows is the next step's; of either phase:
                 * the batch's copy follows it */
                int zeroed = mark_zeroing_run(w, run, n, want, scratch);
                after |= zeroed && w->phase[run[0]] == WL_OPTIMIZER;
                input |= zeroed && it >= 0;
                n = 0;
            }
            if (h < 0)
                break;
            after &= w->iter[h] == it;
            input &= w->iter[h] == it;
            it = w->iter[h];
            for (int32_t i = dfg_launched_first(g, h); i >= 0; i = dfg_launched_next(g, h, i)) {
                int32_t d = g->launched[i];
                if (is_device(g, d) && w->buckets.micro[d] == WL_MICRO_PHASE) {
                    if (input && g->kind[d] == DFG_MEMCPY)
                        w->buckets.micro[d] = WL_MICRO_INPUT;
                    else if (after)
                        w->buckets.micro[d] = WL_MICRO_FORWARD;
                }
                input &= g->kind[d] != DFG_KERNEL;
                if (g->kind[d] == DFG_MEMSET && alive(g, d) && n++ < np)
                    run[n - 1] = d;
            }
        }
    }
    free(run);
    free(want);
    free(scratch);
    return rc;
}

/* The parameter sizes of DDP's buckets (workload.h: param_bytes), the finalisation's
 * waits (final_wait) and what the micro-batches of accumulation run (micro);
 * nothing without bucket units (no bucket plans at all). */
int
workload_find_params(workload *w, const rank_info *ri)
{
    if (w->buckets.n_units <= 0 || w->buckets.why[0])
        return 0;
    int rc = learn_params(w, ri);
    if (rc == 0 && w->buckets.param_bytes) {
        w->buckets.micro = calloc((size_t)w->g->n_nodes + 1, 1);
        rc = w->buckets.micro ? find_final_waits(w, ri) : -1;
    }
    if (rc == 0 && w->buckets.param_bytes)
        rc = mark_grad_zeroing(w, ri);
    if (rc == 0 && w->buckets.param_bytes) {
        partition_input in;
        strategy_partition_input(w, &in);
        rc = partition_mark_copies(&in, w->buckets.micro);
    }
    return rc;
}
