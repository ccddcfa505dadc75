/* dfg_fold.c: the graph of a job's rank classes (dfg_fold: one representative rank per
 * class of alike ranks), the job's sizes and the memory accounting (see dfg.h). */
#include "dfg.h"
#include "dfg_int.h"

#include <stdlib.h>
#include <string.h>

/* ---- rank classes -------------------------------------------------------------------- */

/* Maps of a fold: old id -> new id, -1 dropped. */
typedef struct fold_maps {
    int32_t *node, *res, *grp;
} fold_maps;

/* Copies the kept resources and nodes of s into d (sized by the caller). */
static void
fold_nodes(dfg *d, const dfg *s, const fold_maps *m)
{
    for (int32_t q = 0; q < s->n_res; q++) {
        int32_t x = m->res[q];
        if (x < 0)
            continue;
        d->res_kind[x] = s->res_kind[q];
        d->res_rank[x] = s->res_rank[q];
        d->res_id[x] = s->res_id[q];
        d->res_label[x] = s->res_label[q];
        d->res_first[x] = s->res_first[q] >= 0 ? m->node[s->res_first[q]] : -1;
        d->res_last[x] = s->res_last[q] >= 0 ? m->node[s->res_last[q]] : -1;
    }
#define MAPN(v) ((v) >= 0 ? m->node[(v)] : -1)
    for (int32_t n = 0; n < s->n_nodes; n++) {
        int32_t x = m->node[n];
        if (x < 0)
            continue;
        d->kind[x] = s->kind[n];
        d->flags[x] = s->flags[n];
        d->res[x] = m->res[s->res[n]];
        d->name[x] = s->name[n];
        d->dur[x] = s->dur[n];
        d->gap[x] = s->gap[n];
        d->lat[x] = s->kind[n] == DFG_HOST ? -1 : s->lat[n]; /* a host's: dfg_finalize */
        d->launch[x] = MAPN(s->launch[n]);
        d->next_on_res[x] = MAPN(s->next_on_res[n]);
        d->mstart[x] = s->mstart[n];
        d->mlen[x] = s->mlen[n];
    }
#undef MAPN
}

/* Copies the groups with a kept participant, each participant list in its order. Returns 0
 * or -1 (out of memory). */
static int
fold_groups(dfg *d, const dfg *s, const fold_maps *m)
{
    for (int32_t q = 0; q < s->n_groups; q++) {
        int32_t k = m->grp[q];
        if (k < 0)
            continue;
        d->grp_op[k] = s->grp_op[q];
        d->grp_nranks[k] = s->grp_nranks[q];
        d->grp_bytes[k] = s->grp_bytes[q];
        d->grp_dur[k] = s->grp_dur[q];
        d->grp_mdur[k] = s->grp_mdur[q];
        d->grp_comm[k] = s->grp_comm[q];
        d->grp_seq[k] = s->grp_seq[q];
        d->grp_first[k] = -1;
        d->grp_members[k] = 0;
        for (int32_t p = s->grp_first[q]; p >= 0; p = dfg_next_in_group(s, p)) {
            int32_t x = m->node[p];
            if (x >= 0 && d->grp_first[k] < 0)
                d->grp_first[k] = x;
            d->grp_members[k] += x >= 0;
        }
    }
    /* each kept participant's next kept one, in node order: the side table appends */
    int rc = 0;
    for (int32_t i = 0; rc == 0 && i < s->grp_part.n; i++) {
        int32_t p = s->grp_part.node[i], q = dfg_group(s, p), nx = dfg_next_in_group(s, p);
        if (m->node[p] < 0 || q < 0)
            continue; /* not kept, or an entry of a node in no group */
        while (nx >= 0 && m->node[nx] < 0)
            nx = dfg_next_in_group(s, nx);
        rc = dfg_part_set(d, m->node[p], m->grp[q], nx >= 0 ? m->node[nx] : -1);
    }
    return rc;
}

/* ---- early leaving ---------------------------------------------------------------- */

/* Takes into least[] (by d's node; -1: none yet) the least of how long before group q's
 * last participant the members of each class left (at most the measured transfer), under
 * its representative's participant (at[rank]: its node in d, -1 elsewhere; left all -1). */
static void
least_group_leave(const dfg *s, int32_t q, const fold_maps *m, const int32_t *rep, int32_t *at,
                  int64_t *least)
{
    int64_t last = dfg_group_last_mend(s, q);
    if (last < 0)
        return;
    for (int32_t p = s->grp_first[q]; p >= 0; p = dfg_next_in_group(s, p))
        if (m->node[p] >= 0)
            at[dfg_rank(s, p)] = m->node[p];
    for (int32_t p = s->grp_first[q]; p >= 0; p = dfg_next_in_group(s, p)) {
        int32_t x = at[rep[dfg_rank(s, p)]];
        int64_t e = last - dfg_mend(s, p);
        if (e > s->grp_mdur[q])
            e = s->grp_mdur[q];
        if (x >= 0 && (least[x] < 0 || e < least[x]))
            least[x] = e;
    }
    for (int32_t p = s->grp_first[q]; p >= 0; p = dfg_next_in_group(s, p))
        if (m->node[p] >= 0)
            at[dfg_rank(s, p)] = -1;
}

/* Sets d->leave: each kept participant's class's leaving, that of its last member to
 * leave (dfg_fold). Returns 0 or -1 (out of memory). */
static int
fold_leave(dfg *d, const dfg *s, const fold_maps *m, const int32_t *rep)
{
    size_t nn = (size_t)(d->n_nodes > 0 ? d->n_nodes : 1);
    int64_t *least = malloc(nn * sizeof *least);
    int32_t *at = malloc(((size_t)s->n_ranks + 1) * sizeof *at);
    int rc = least && at ? 0 : -1;
    for (int32_t r = 0; rc == 0 && r < s->n_ranks; r++)
        at[r] = -1;
    for (int32_t x = 0; rc == 0 && x < d->n_nodes; x++)
        least[x] = -1;
    for (int32_t q = 0; rc == 0 && q < s->n_groups; q++)
        if (m->grp[q] >= 0)
            least_group_leave(s, q, m, rep, at, least);
    for (int32_t x = 0; rc == 0 && x < d->n_nodes; x++)
        if (least[x] > 0) /* node order: each entry appended */
            rc = dfg_sparse_set(&d->leave, x, least[x]);
    d->leave_classes = 1;
    free(least);
    free(at);
    return rc;
}

/* Copies the kept ranks' iteration boundaries and the edges between kept nodes. Returns
 * 0 or -1. */
static int
fold_links(dfg *d, const dfg *s, const fold_maps *m, const int32_t *rep)
{
    int64_t k = 0;
    for (int64_t i = 0; i < s->n_edges; i++) {
        int32_t a = s->esrc[i], b = s->edst[i];
        if (a < 0 || b < 0 || m->node[a] < 0 || m->node[b] < 0)
            continue;
        d->esrc[k] = m->node[a];
        d->edst[k++] = m->node[b];
    }
    d->n_edges = k;
    int32_t total = 0;
    for (int32_t r = 0; r < s->n_ranks; r++)
        if (rep[r] == r)
            total += s->iter_off[r + 1] - s->iter_off[r];
    d->iter_node = malloc((size_t)(total > 0 ? total : 1) * sizeof *d->iter_node);
    if (!d->iter_node)
        return -1;
    int32_t off = 0;
    for (int32_t r = 0; r < s->n_ranks; r++) {
        d->iter_off[r] = off;
        if (rep[r] != r)
            continue;
        for (int32_t i = s->iter_off[r]; i < s->iter_off[r + 1]; i++)
            d->iter_node[off++] = s->iter_node[i] >= 0 ? m->node[s->iter_node[i]] : -1;
    }
    d->iter_off[s->n_ranks] = off;
    d->n_iter_nodes = off;
    return 0;
}

int
dfg_fold(dfg *d, const dfg *s, const int32_t *rep, const int32_t *weight, const uint8_t *apart)
{
    int rc = dfg_init(d, s->n_ranks);
    fold_maps m = {malloc((size_t)(s->n_nodes > 0 ? s->n_nodes : 1) * sizeof *m.node),
                   malloc((size_t)(s->n_res > 0 ? s->n_res : 1) * sizeof *m.res),
                   malloc((size_t)(s->n_groups > 0 ? s->n_groups : 1) * sizeof *m.grp)};
    int32_t nn = 0, nr = 0, ng = 0;
    if (rc != 0 || !m.node || !m.res || !m.grp)
        rc = -1;
    for (int32_t q = 0; rc == 0 && q < s->n_res; q++) {
        int32_t r = s->res_rank[q];
        m.res[q] = r >= 0 && r < s->n_ranks && rep[r] == r ? nr++ : -1;
    }
    for (int32_t n = 0; rc == 0 && n < s->n_nodes; n++)
        m.node[n] = !(s->flags[n] & DFG_F_REMOVED) && m.res[s->res[n]] >= 0 ? nn++ : -1;
    for (int32_t q = 0; rc == 0 && q < s->n_groups; q++) {
        m.grp[q] = -1;
        for (int32_t p = s->grp_first[q]; p >= 0 && m.grp[q] < 0; p = dfg_next_in_group(s, p))
            if (m.node[p] >= 0)
                m.grp[q] = ng++;
    }
    if (rc == 0 && (dfg_reserve(d, nn > 0 ? nn : 1, s->n_edges > 0 ? s->n_edges : 1) != 0 ||
                    dfg_reserve_groups(d, ng) != 0 || dfg_reserve_res(d, nr) != 0))
        rc = -1;
    if (rc == 0) {
        d->n_nodes = nn;
        d->n_res = nr;
        d->n_groups = ng;
        fold_nodes(d, s, &m);
        rc = fold_groups(d, s, &m);
    }
    if (rc == 0)
        rc = fold_links(d, s, &m, rep);
    if (rc == 0)
        rc = fold_leave(d, s, &m, rep);
    /* node order kept: the side tables append */
    if (rc == 0 && (dfg_sparse_fold(&d->bytes, &s->bytes, m.node) != 0 ||
                    dfg_sparse_fold(&d->mend_wide, &s->mend_wide, m.node) != 0 ||
                    dfg_sparse_fold(&d->dur_wide, &s->dur_wide, m.node) != 0 ||
                    dfg_sparse_fold(&d->gap_wide, &s->gap_wide, m.node) != 0))
        rc = -1;
    if (rc == 0) {
        dfg_strtab_free(&d->strings);
        rc = dfg_strtab_clone(&d->strings, &s->strings);
    }
    if (rc == 0) {
        size_t nrk = (size_t)(s->n_ranks > 0 ? s->n_ranks : 1);
        d->rank_rep = malloc(nrk * sizeof *d->rank_rep);
        d->rank_weight = malloc(nrk * sizeof *d->rank_weight);
        d->rank_apart = calloc(nrk, sizeof *d->rank_apart);
        if (!d->rank_rep || !d->rank_weight || !d->rank_apart)
            rc = -1;
    }
    if (rc == 0) {
        memcpy(d->rank_rep, rep, (size_t)s->n_ranks * sizeof *rep);
        memcpy(d->rank_weight, weight, (size_t)s->n_ranks * sizeof *weight);
        if (apart)
            memcpy(d->rank_apart, apart, (size_t)s->n_ranks);
        dfg_job_sizes(s, &d->job_nodes, &d->job_edges, &d->job_groups);
    }
    free(m.node);
    free(m.res);
    free(m.grp);
    if (rc != 0)
        dfg_free(d);
    return rc;
}

void
dfg_job_sizes(const dfg *g, int64_t *nodes, int64_t *edges, int32_t *groups)
{
    if (g->rank_rep && g->job_nodes > 0) {
        *nodes = g->job_nodes;
        *edges = g->job_edges;
        *groups = g->job_groups;
        return;
    }
    *nodes = dfg_live_nodes(g);
    *edges = g->n_edges;
    *groups = g->n_groups;
}

void
dfg_memory(const dfg *g, double *node_bytes, double *edge_bytes)
{
    size_t per_node = sizeof *g->kind + sizeof *g->flags + sizeof *g->res + sizeof *g->name +
                      sizeof *g->dur + sizeof *g->gap + sizeof *g->lat + sizeof *g->launch +
                      sizeof *g->next_on_res + sizeof *g->mstart + sizeof *g->mlen;
    double nb = (double)per_node * (double)g->cap_nodes +
                (double)(sizeof *g->bytes.node + sizeof *g->bytes.val) *
                    ((double)g->grp_part.cap + (double)g->bytes.cap + (double)g->leave.cap +
                     (double)g->mend_wide.cap + (double)g->dur_wide.cap + (double)g->gap_wide.cap);
    double eb = (double)(sizeof *g->esrc + sizeof *g->edst) * (double)g->cap_edges;
    if (g->finalized) {
        nb += (double)(sizeof *g->succ_blk + sizeof *g->part_blk) *
                  (double)((g->n_nodes >> DFG_SUCC_SHIFT) + 2) +
              (double)sizeof *g->launched * (double)g->n_launched;
        eb += (double)sizeof *g->succ * (double)g->n_edges;
    }
    if (node_bytes)
        *node_bytes = g->n_nodes > 0 ? nb / g->n_nodes : 0;
    if (edge_bytes)
        *edge_bytes = g->n_edges > 0 ? eb / (double)g->n_edges : 0;
}
