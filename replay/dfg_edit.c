/* dfg_edit.c: transformations of the global dataflow graph (see dfg.h): removing a node,
 * merging two nodes of a resource and two collective groups. */
#include "dfg.h"
#include "dfg_int.h"

/* ---- transformations ----------------------------------------------------------------- */

/* Takes participant n out of group grp's list (dfg_next_in_group) and returns the one after
 * it (-1 none); n's entry is left as it was. */
static int32_t
group_unlink(dfg *g, int32_t grp, int32_t n)
{
    int32_t prev = -1, p = g->grp_first[grp];
    while (p >= 0 && p != n) {
        prev = p;
        p = dfg_next_in_group(g, p);
    }
    int32_t next = dfg_next_in_group(g, n);
    if (p == n && prev < 0)
        g->grp_first[grp] = next;
    else if (p == n) /* prev has its entry: setting it allocates nothing, cannot fail */
        (void)dfg_part_set(g, prev, grp, next);
    return next;
}

int
dfg_remove_node(dfg *g, int32_t n)
{
    if (n < 0 || n >= g->n_nodes || (g->flags[n] & DFG_F_REMOVED))
        return -1;
    /* bypass edges: every (p -> n) x (n -> s) becomes p -> s, and n's end implied the
     * end of the previous node on its resource: prev -> s */
    int32_t prev = dfg_prev_on_res(g, n), next = g->next_on_res[n];
    int64_t ne = g->n_edges;
    for (int64_t i = 0; i < ne; i++) {
        if (g->edst[i] != n)
            continue;
        int32_t p = g->esrc[i];
        for (int64_t j = 0; j < ne; j++)
            if (g->esrc[j] == n && dfg_add_edge(g, p, g->edst[j]) != 0)
                return -1;
    }
    for (int64_t j = 0; prev >= 0 && j < ne; j++)
        if (g->esrc[j] == n && dfg_add_edge(g, prev, g->edst[j]) != 0)
            return -1;
    /* a wake-up passes to the next call on the thread (a BLOCKING or QUEUED one gets a
     * wake-up node before it, which then follows n and takes its gap below) */
    if (g->kind[n] == DFG_HOST && (g->flags[n] & DFG_F_WAKEUP) && next >= 0) {
        int32_t to = next;
        if (g->flags[next] & DFG_F_END_EDGES) {
            int64_t keep = dfg_gap(g, next);
            to = dfg_wake_handoff(g, next);
            if (to < 0 || dfg_set_gap(g, next, keep) != 0)
                return -1;
            g->gap[to] = 0; /* n's gap is added below */
            next = to;
        }
        g->flags[to] |= DFG_F_WAKEUP;
        for (int64_t i = 0; i < ne; i++)
            if (g->edst[i] == n && g->esrc[i] >= 0 && dfg_add_edge(g, g->esrc[i], to) != 0)
                return -1;
    }
    for (int64_t i = 0; i < g->n_edges; i++)
        if (g->esrc[i] == n || g->edst[i] == n)
            g->esrc[i] = g->edst[i] = -1;

    /* devices launched by n move to the previous host call on the thread */
    if (g->kind[n] == DFG_HOST) {
        for (int32_t i = 0; i < g->n_nodes; i++)
            if (g->launch[i] == n)
                g->launch[i] = prev;
    }
    if (next >= 0 && dfg_set_gap(g, next, dfg_gap(g, next) + dfg_gap(g, n)) != 0)
        return -1;
    if (prev >= 0)
        g->next_on_res[prev] = next;
    else
        g->res_first[g->res[n]] = next;
    if (next < 0)
        g->res_last[g->res[n]] = prev;
    g->next_on_res[n] = -1;

    if (dfg_group(g, n) >= 0) /* n has its entry: setting it cannot fail */
        (void)dfg_part_set(g, n, -1, group_unlink(g, dfg_group(g, n), n));
    for (int32_t i = 0; i < g->n_iter_nodes; i++)
        if (g->iter_node[i] == n)
            g->iter_node[i] = prev >= 0 ? prev : next;
    g->flags[n] |= DFG_F_REMOVED;
    g->finalized = 0;
    return 0;
}

int
dfg_merge_nodes(dfg *g, int32_t a, int32_t b)
{
    if (a < 0 || b < 0 || a >= g->n_nodes || b >= g->n_nodes || a == b || g->res[a] != g->res[b] ||
        ((g->flags[a] | g->flags[b]) & DFG_F_REMOVED))
        return -1;
    if ((g->flags[a] & DFG_F_WAKEUP) && (g->flags[b] & DFG_F_END_EDGES)) {
        /* a's wake-up must keep delaying a start, b's waits the end: split them */
        int32_t w = dfg_wake_handoff(g, a);
        if (w < 0)
            return -1;
        int64_t na = g->n_edges;
        for (int64_t i = 0; i < na; i++)
            if (g->edst[i] == a && g->esrc[i] >= 0) {
                if (dfg_add_edge(g, g->esrc[i], w) != 0)
                    return -1;
                g->esrc[i] = g->edst[i] = -1;
            }
        g->flags[a] &= (uint8_t)~DFG_F_WAKEUP;
    }
    int64_t ne = g->n_edges;
    for (int64_t i = 0; i < ne; i++) {
        if (g->esrc[i] == b && g->edst[i] != a && dfg_add_edge(g, a, g->edst[i]) != 0)
            return -1;
        if (g->edst[i] == b && g->esrc[i] != a && dfg_add_edge(g, g->esrc[i], a) != 0)
            return -1;
    }
    for (int64_t i = 0; i < g->n_edges; i++)
        if (g->esrc[i] == b || g->edst[i] == b)
            g->esrc[i] = g->edst[i] = -1;
    if (g->kind[b] == DFG_HOST)
        for (int32_t i = 0; i < g->n_nodes; i++)
            if (g->launch[i] == b)
                g->launch[i] = a;
    if (dfg_set_dur(g, a, dfg_dur(g, a) + dfg_dur(g, b)) != 0)
        return -1;
    if (dfg_set_bytes(g, a, dfg_bytes(g, a) + dfg_bytes(g, b)) != 0)
        return -1;
    if (dfg_mend(g, b) > dfg_mend(g, a) && dfg_set_mend(g, a, dfg_mend(g, b)) != 0)
        return -1;
    g->flags[a] |= g->flags[b] & DFG_F_END_EDGES;
    /* b's gap moves to the node after b (dfg_remove_node), where the time was spent */
    return dfg_remove_node(g, b);
}

int
dfg_merge_groups(dfg *g, int32_t a, int32_t b)
{
    if (a < 0 || b < 0 || a >= g->n_groups || b >= g->n_groups || a == b)
        return -1;
    int32_t nb = g->grp_first[b];
    while (nb >= 0) {
        int32_t next = dfg_next_in_group(g, nb);
        int32_t rank = dfg_rank(g, nb);
        int32_t na = g->grp_first[a];
        while (na >= 0 && dfg_rank(g, na) != rank)
            na = dfg_next_in_group(g, na);
        if (na >= 0 && g->res[na] == g->res[nb]) {
            if (dfg_merge_nodes(g, na, nb) != 0)
                return -1;
        } else {
            /* no partner on this rank: move the participant over */
            (void)group_unlink(g, b, nb);
            g->grp_members[b]--;
            if (dfg_set_group(g, nb, a) != 0) /* nb has its entry: no allocation */
                return -1;
        }
        nb = next;
    }
    g->grp_first[b] = -1;
    g->grp_members[b] = 0;
    g->grp_bytes[a] += g->grp_bytes[b];
    g->grp_bytes[b] = 0;
    g->finalized = 0;
    return 0;
}
