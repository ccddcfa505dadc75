/* dfg.c: storage of the global dataflow graph (see dfg.h): the string table, the node,
 * edge, resource and group arrays, their construction, and finalize (the compact edge
 * list and the successor and launched lists). Transformations are in dfg_edit.c, rank
 * folding and the memory accounting in dfg_fold.c. */
#include "dfg.h"
#include "dfg_int.h"
#include "fnv1a.h"

#include <stdlib.h>
#include <string.h>

/* ---- small helpers ------------------------------------------------------------------- */

int
dfg_grow(void **p, size_t elem, int64_t new_cap)
{
    void *q = realloc(*p, (size_t)new_cap * elem);
    if (!q)
        return -1;
    *p = q;
    return 0;
}

int64_t
dfg_next_cap(int64_t cap, int64_t need)
{
    int64_t c = cap ? cap : 64;
    while (c < need)
        c *= 2;
    return c;
}

/* ---- strings ------------------------------------------------------------------------- */

/* The table slot bits of text: FNV-1a (common/fnv1a.h), masked by the caller. */
static uint32_t
str_hash(const char *s)
{
    return (uint32_t)dpro_fnv1a(s, strlen(s), DPRO_FNV1A_INIT);
}

static int
strtab_init(dfg_strtab *t)
{
    memset(t, 0, sizeof *t);
    t->cap = 256;
    t->offset = malloc(t->cap * sizeof *t->offset);
    t->n_slots = 512;
    t->slots = calloc(t->n_slots, sizeof *t->slots);
    t->pool_cap = 4096;
    t->pool = malloc(t->pool_cap);
    if (!t->offset || !t->slots || !t->pool)
        return -1;
    t->pool[0] = 0;
    t->pool_len = 1;
    t->offset[0] = 0;
    t->n = 1;
    return 0;
}

void
dfg_strtab_free(dfg_strtab *t)
{
    free(t->pool);
    free(t->offset);
    free(t->slots);
    memset(t, 0, sizeof *t);
}

int
dfg_strtab_clone(dfg_strtab *d, const dfg_strtab *s)
{
    memset(d, 0, sizeof *d);
    d->pool = malloc(s->pool_cap);
    d->offset = malloc(s->cap * sizeof *d->offset);
    d->slots = malloc(s->n_slots * sizeof *d->slots);
    if (!d->pool || !d->offset || !d->slots)
        return -1;
    memcpy(d->pool, s->pool, s->pool_len);
    memcpy(d->offset, s->offset, s->n * sizeof *d->offset);
    memcpy(d->slots, s->slots, s->n_slots * sizeof *d->slots);
    d->pool_len = s->pool_len;
    d->pool_cap = s->pool_cap;
    d->n = s->n;
    d->cap = s->cap;
    d->n_slots = s->n_slots;
    return 0;
}

static int
strtab_rehash(dfg_strtab *t, uint32_t n_slots)
{
    uint32_t *slots = calloc(n_slots, sizeof *slots);
    if (!slots)
        return -1;
    for (uint32_t id = 1; id < t->n; id++) {
        uint32_t i = str_hash(t->pool + t->offset[id]) & (n_slots - 1);
        while (slots[i])
            i = (i + 1) & (n_slots - 1);
        slots[i] = id;
    }
    free(t->slots);
    t->slots = slots;
    t->n_slots = n_slots;
    return 0;
}

int32_t
dfg_intern(dfg *g, const char *text)
{
    dfg_strtab *t = &g->strings;
    if (!text || !*text)
        return 0;
    uint32_t i = str_hash(text) & (t->n_slots - 1);
    while (t->slots[i]) {
        if (strcmp(t->pool + t->offset[t->slots[i]], text) == 0)
            return (int32_t)t->slots[i];
        i = (i + 1) & (t->n_slots - 1);
    }
    size_t len = strlen(text) + 1;
    if (t->pool_len + len > t->pool_cap) {
        size_t c = t->pool_cap * 2;
        while (c < t->pool_len + len)
            c *= 2;
        char *p = realloc(t->pool, c);
        if (!p)
            return -1;
        t->pool = p;
        t->pool_cap = c;
    }
    if (t->n == t->cap) {
        uint32_t *o = realloc(t->offset, (size_t)t->cap * 2 * sizeof *o);
        if (!o)
            return -1;
        t->offset = o;
        t->cap *= 2;
    }
    uint32_t id = t->n++;
    t->offset[id] = (uint32_t)t->pool_len;
    memcpy(t->pool + t->pool_len, text, len);
    t->pool_len += len;
    t->slots[i] = id;
    if (t->n * 2 > t->n_slots && strtab_rehash(t, t->n_slots * 2) != 0)
        return -1;
    return (int32_t)id;
}

const char *
dfg_name(const dfg *g, int32_t id)
{
    if (id <= 0 || (uint32_t)id >= g->strings.n)
        return "";
    return g->strings.pool + g->strings.offset[id];
}

/* ---- lifecycle ----------------------------------------------------------------------- */

int
dfg_init(dfg *g, int32_t n_ranks)
{
    memset(g, 0, sizeof *g);
    if (strtab_init(&g->strings) != 0)
        goto fail;
    g->n_ranks = n_ranks;
    g->iter_off = calloc((size_t)n_ranks + 1, sizeof *g->iter_off);
    if (!g->iter_off)
        goto fail;
    return 0;
fail:
    dfg_free(g);
    return -1;
}

static void
free_derived(dfg *g)
{
    free(g->succ_blk); /* succ is edst's */
    free(g->part_blk);
    free(g->launched);
    g->succ_blk = NULL;
    g->part_blk = NULL;
    g->succ = NULL;
    g->launched = NULL;
    g->n_launched = 0;
    g->finalized = 0;
}

void
dfg_free(dfg *g)
{
    free(g->kind);
    free(g->flags);
    free(g->res);
    free(g->name);
    free(g->dur);
    free(g->gap);
    free(g->lat);
    free(g->launch);
    free(g->next_on_res);
    dfg_sparse_free(&g->grp_part);
    dfg_sparse_free(&g->bytes);
    dfg_sparse_free(&g->leave);
    dfg_sparse_free(&g->mend_wide);
    dfg_sparse_free(&g->dur_wide);
    dfg_sparse_free(&g->gap_wide);
    free(g->mstart);
    free(g->mlen);
    free(g->esrc);
    free(g->edst);
    free_derived(g);
    free(g->res_kind);
    free(g->res_rank);
    free(g->res_id);
    free(g->res_first);
    free(g->res_last);
    free(g->res_label);
    free(g->grp_op);
    free(g->grp_nranks);
    free(g->grp_members);
    free(g->grp_first);
    free(g->grp_bytes);
    free(g->grp_dur);
    free(g->grp_mdur);
    free(g->grp_comm);
    free(g->grp_seq);
    free(g->iter_off);
    free(g->iter_node);
    free(g->rank_rep);
    free(g->rank_weight);
    free(g->rank_apart);
    dfg_strtab_free(&g->strings);
    memset(g, 0, sizeof *g);
}

/* Copies n elements of an array (NULL stays NULL). Returns 0 or -1. */
static int
dup_array(void **dst, const void *src, size_t elem, int64_t cap, int64_t n)
{
    *dst = NULL;
    if (!src)
        return 0;
    *dst = malloc((size_t)(cap > 0 ? cap : 1) * elem);
    if (!*dst)
        return -1;
    memcpy(*dst, src, (size_t)n * elem);
    return 0;
}

int
dfg_timing_view(dfg *view, const dfg *src)
{
    int rc = src->finalized ? 0 : -1;
    memset(view, 0, sizeof *view);
    if (rc == 0) {
        *view = *src;
/* every OWN runs, so no field is left pointing into src when one fails */
#define OWN(f, n) rc |= dup_array((void **)&view->f, src->f, sizeof *src->f, n, n)
        OWN(dur, src->n_nodes);
        OWN(gap, src->n_nodes);
        OWN(lat, src->n_nodes);
        OWN(grp_dur, src->n_groups);
#undef OWN
        rc |= dfg_sparse_clone(&view->dur_wide, &src->dur_wide);
        rc |= dfg_sparse_clone(&view->gap_wide, &src->gap_wide);
        if (rc != 0)
            dfg_timing_view_free(view);
    }
    return rc;
}

int
dfg_timing_view_reset(dfg *view, const dfg *src)
{
    if (src->n_nodes > 0) { /* an empty graph's arrays may be NULL */
        memcpy(view->dur, src->dur, (size_t)src->n_nodes * sizeof *src->dur);
        memcpy(view->gap, src->gap, (size_t)src->n_nodes * sizeof *src->gap);
        memcpy(view->lat, src->lat, (size_t)src->n_nodes * sizeof *src->lat);
    }
    if (src->n_groups > 0)
        memcpy(view->grp_dur, src->grp_dur, (size_t)src->n_groups * sizeof *src->grp_dur);
    view->grp_wait_ns = src->grp_wait_ns; /* a what-if's wait at the collectives, if any */
    view->grp_wait_nranks = src->grp_wait_nranks;
    int rc = dfg_sparse_copy(&view->dur_wide, &src->dur_wide);
    if (rc == 0)
        rc = dfg_sparse_copy(&view->gap_wide, &src->gap_wide);
    return rc;
}

void
dfg_timing_view_free(dfg *view)
{
    free(view->dur);
    dfg_sparse_free(&view->dur_wide);
    dfg_sparse_free(&view->gap_wide);
    free(view->gap);
    free(view->lat);
    free(view->grp_dur);
    memset(view, 0, sizeof *view);
}

/* Copies n elements of src into *dst, a block of cap elements made from reuse (realloc:
 * reuse's pages kept where it is as large); NULL src gives NULL (reuse freed). Returns 0
 * or -1 (reuse freed). */
static int
copy_array(void **dst, void *reuse, const void *src, size_t elem, int64_t cap, int64_t n)
{
    *dst = NULL;
    void *p = src ? realloc(reuse, (size_t)(cap > 0 ? cap : 1) * elem) : NULL;
    if (!p) {
        free(reuse);
        return src ? -1 : 0;
    }
    memcpy(p, src, (size_t)n * elem);
    *dst = p;
    return 0;
}

int
dfg_clone(dfg *d, const dfg *s)
{
    memset(d, 0, sizeof *d);
    return dfg_copy(d, s);
}

int
dfg_copy(dfg *d, const dfg *s)
{
    int rc = 0;
    dfg old = *d; /* its arrays are reused, the rest freed */
    free_derived(&old);
    dfg_sparse_free(&old.grp_part);
    dfg_sparse_free(&old.bytes);
    dfg_sparse_free(&old.leave);
    dfg_sparse_free(&old.mend_wide);
    dfg_sparse_free(&old.dur_wide);
    dfg_sparse_free(&old.gap_wide);
    dfg_strtab_free(&old.strings);
    memset(d, 0, sizeof *d);
    d->n_nodes = s->n_nodes;
    d->cap_nodes = s->cap_nodes > old.cap_nodes ? s->cap_nodes : old.cap_nodes;
    d->n_edges = s->n_edges;
    d->cap_edges = s->cap_edges > old.cap_edges ? s->cap_edges : old.cap_edges;
    d->n_res = s->n_res;
    d->cap_res = s->cap_res > old.cap_res ? s->cap_res : old.cap_res;
    d->n_groups = s->n_groups;
    d->cap_groups = s->cap_groups > old.cap_groups ? s->cap_groups : old.cap_groups;
    d->n_ranks = s->n_ranks;
    d->n_iter_nodes = s->n_iter_nodes;
    d->job_nodes = s->job_nodes;
    d->job_edges = s->job_edges;
    d->job_groups = s->job_groups;
    d->grp_wait_ns = s->grp_wait_ns;
    d->grp_wait_nranks = s->grp_wait_nranks;
    d->leave_classes = s->leave_classes;
#define DUP(f, cap, n) rc |= copy_array((void **)&d->f, old.f, s->f, sizeof *s->f, cap, n)
    DUP(kind, d->cap_nodes, s->n_nodes);
    DUP(flags, d->cap_nodes, s->n_nodes);
    DUP(res, d->cap_nodes, s->n_nodes);
    DUP(name, d->cap_nodes, s->n_nodes);
    DUP(dur, d->cap_nodes, s->n_nodes);
    DUP(gap, d->cap_nodes, s->n_nodes);
    DUP(lat, d->cap_nodes, s->n_nodes);
    DUP(launch, d->cap_nodes, s->n_nodes);
    DUP(next_on_res, d->cap_nodes, s->n_nodes);
    DUP(mstart, d->cap_nodes, s->n_nodes);
    DUP(mlen, d->cap_nodes, s->n_nodes);
    DUP(esrc, d->cap_edges, s->n_edges);
    DUP(edst, d->cap_edges, s->n_edges);
    DUP(res_kind, d->cap_res, s->n_res);
    DUP(res_rank, d->cap_res, s->n_res);
    DUP(res_id, d->cap_res, s->n_res);
    DUP(res_first, d->cap_res, s->n_res);
    DUP(res_last, d->cap_res, s->n_res);
    DUP(res_label, d->cap_res, s->n_res);
    DUP(grp_op, d->cap_groups, s->n_groups);
    DUP(grp_nranks, d->cap_groups, s->n_groups);
    DUP(grp_members, d->cap_groups, s->n_groups);
    DUP(grp_first, d->cap_groups, s->n_groups);
    DUP(grp_bytes, d->cap_groups, s->n_groups);
    DUP(grp_dur, d->cap_groups, s->n_groups);
    DUP(grp_mdur, d->cap_groups, s->n_groups);
    DUP(grp_comm, d->cap_groups, s->n_groups);
    DUP(grp_seq, d->cap_groups, s->n_groups);
    DUP(iter_off, s->n_ranks + 1, s->n_ranks + 1);
    DUP(iter_node, s->n_iter_nodes, s->n_iter_nodes);
    DUP(rank_rep, s->n_ranks, s->n_ranks);
    DUP(rank_weight, s->n_ranks, s->n_ranks);
    DUP(rank_apart, s->n_ranks, s->n_ranks);
#undef DUP
    if (rc == 0)
        rc = dfg_sparse_clone(&d->grp_part, &s->grp_part);
    if (rc == 0)
        rc = dfg_sparse_clone(&d->bytes, &s->bytes);
    if (rc == 0)
        rc = dfg_sparse_clone(&d->leave, &s->leave);
    if (rc == 0)
        rc = dfg_sparse_clone(&d->mend_wide, &s->mend_wide);
    if (rc == 0)
        rc = dfg_sparse_clone(&d->dur_wide, &s->dur_wide);
    if (rc == 0)
        rc = dfg_sparse_clone(&d->gap_wide, &s->gap_wide);
    if (rc == 0)
        rc = dfg_strtab_clone(&d->strings, &s->strings);
    if (rc != 0) {
        dfg_free(d);
        return -1;
    }
    return 0;
}

/* ---- construction -------------------------------------------------------------------- */

/* Room for `need` nodes: exactly that many when exact, else the next doubling (nodes added
 * one at a time). Returns 0 or -1. */
static int
reserve_nodes(dfg *g, int64_t need, int exact)
{
    if (need <= g->cap_nodes)
        return 0;
    int64_t c = exact ? need : dfg_next_cap(g->cap_nodes, need);
    if (c > INT32_MAX)
        c = INT32_MAX;
    int rc = 0;
#define G(f) rc |= dfg_grow((void **)&g->f, sizeof *g->f, c)
    G(kind);
    G(flags);
    G(res);
    G(name);
    G(dur);
    G(gap);
    G(lat);
    G(launch);
    G(next_on_res);
    G(mstart);
    G(mlen);
#undef G
    if (rc != 0)
        return -1;
    g->cap_nodes = (int32_t)c;
    return 0;
}

/* Room for `need` resources. Returns 0 or -1. */
int
dfg_reserve_res(dfg *g, int64_t need)
{
    if (need <= g->cap_res)
        return 0;
    int64_t c = dfg_next_cap(g->cap_res, need);
    int rc = 0;
#define G(f) rc |= dfg_grow((void **)&g->f, sizeof *g->f, c)
    G(res_kind);
    G(res_rank);
    G(res_id);
    G(res_first);
    G(res_last);
    G(res_label);
#undef G
    if (rc != 0)
        return -1;
    g->cap_res = (int32_t)c;
    return 0;
}

/* Room for `need` collective groups. Returns 0 or -1. */
int
dfg_reserve_groups(dfg *g, int64_t need)
{
    if (need <= g->cap_groups)
        return 0;
    int64_t c = dfg_next_cap(g->cap_groups, need);
    int rc = 0;
#define G(f) rc |= dfg_grow((void **)&g->f, sizeof *g->f, c)
    G(grp_op);
    G(grp_nranks);
    G(grp_members);
    G(grp_first);
    G(grp_bytes);
    G(grp_dur);
    G(grp_mdur);
    G(grp_comm);
    G(grp_seq);
#undef G
    if (rc != 0)
        return -1;
    g->cap_groups = (int32_t)c;
    return 0;
}

int
dfg_reserve(dfg *g, int64_t nodes, int64_t edges)
{
    if (nodes > INT32_MAX)
        return -1;
    if (reserve_nodes(g, nodes, 1) != 0)
        return -1;
    if (edges > g->cap_edges) {
        if (dfg_grow((void **)&g->esrc, sizeof *g->esrc, edges) != 0 ||
            dfg_grow((void **)&g->edst, sizeof *g->edst, edges) != 0)
            return -1;
        g->cap_edges = edges;
    }
    return 0;
}

int32_t
dfg_prev_on_res(const dfg *g, int32_t n)
{
    int32_t p = -1;
    if (n >= 0 && n < g->n_nodes && dfg_has_prev(g, n)) {
        p = g->res_first[g->res[n]];
        while (p >= 0 && g->next_on_res[p] != n)
            p = g->next_on_res[p];
    }
    return p;
}

int32_t *
dfg_prev_table(const dfg *g)
{
    int32_t *prev = malloc((size_t)(g->n_nodes > 0 ? g->n_nodes : 1) * sizeof *prev);
    if (prev) {
        for (int32_t i = 0; i < g->n_nodes; i++)
            prev[i] = -1;
        for (int32_t q = 0; q < g->n_res; q++)
            for (int32_t p = g->res_first[q]; p >= 0 && g->next_on_res[p] >= 0;
                 p = g->next_on_res[p])
                prev[g->next_on_res[p]] = p;
    }
    return prev;
}

int32_t
dfg_add_resource(dfg *g, int kind, int32_t rank, uint64_t id, int32_t label)
{
    if (dfg_reserve_res(g, (int64_t)g->n_res + 1) != 0)
        return -1;
    int32_t r = g->n_res++;
    g->res_kind[r] = (uint8_t)kind;
    g->res_rank[r] = rank;
    g->res_id[r] = id;
    g->res_first[r] = -1;
    g->res_last[r] = -1;
    g->res_label[r] = label;
    return r;
}

int32_t
dfg_add_node(dfg *g, int kind, int32_t res, int32_t name)
{
    if (reserve_nodes(g, (int64_t)g->n_nodes + 1, 0) != 0)
        return -1;
    int32_t n = g->n_nodes++;
    g->kind[n] = (uint8_t)kind;
    g->flags[n] = 0;
    g->res[n] = res;
    g->name[n] = name;
    g->dur[n] = 0;
    g->gap[n] = 0;
    g->lat[n] = kind == DFG_HOST ? -1 : 0; /* a host's: no launched list */
    g->launch[n] = -1;
    g->mstart[n] = 0;
    g->mlen[n] = 0;
    g->next_on_res[n] = -1;
    if (g->res_last[res] >= 0)
        g->next_on_res[g->res_last[res]] = n;
    else
        g->res_first[res] = n;
    g->res_last[res] = n;
    g->finalized = 0;
    return n;
}

int32_t
dfg_insert_after(dfg *g, int32_t after, int kind, int32_t name, int64_t dur)
{
    int32_t res = g->res[after], last_prev = g->res_last[res];
    int32_t n = dfg_add_node(g, kind, res, name);
    if (n < 0)
        return -1;
    /* dfg_add_node appended n at the end; unlink and relink after `after`. */
    if (last_prev != after) {
        g->next_on_res[last_prev] = -1;
        g->res_last[res] = last_prev;
        int32_t nx = g->next_on_res[after];
        g->next_on_res[n] = nx;
        g->next_on_res[after] = n;
        if (nx < 0)
            g->res_last[res] = n;
    }
    g->flags[n] = DFG_F_SYNTHETIC;
    g->mstart[n] = dfg_mend(g, after);
    g->mlen[n] = 0;
    return dfg_set_dur(g, n, dur) == 0 ? n : -1;
}

int32_t
dfg_insert_before(dfg *g, int32_t before, int kind, int32_t name, int64_t dur)
{
    return dfg_insert_between(g, dfg_prev_on_res(g, before), before, kind, name, dur);
}

int32_t
dfg_insert_between(dfg *g, int32_t prev, int32_t before, int kind, int32_t name, int64_t dur)
{
    int32_t res = g->res[before], last_prev = g->res_last[res];
    int32_t n;
    if (prev >= 0) {
        n = dfg_insert_after(g, prev, kind, name, dur);
        if (n < 0)
            return -1;
    } else {
        n = dfg_add_node(g, kind, res, name);
        if (n < 0)
            return -1;
        /* appended at the end (after `before` at least): unlink, relink as the first */
        g->next_on_res[last_prev] = -1;
        g->res_last[res] = last_prev;
        g->next_on_res[n] = before;
        g->res_first[res] = n;
        g->flags[n] = DFG_F_SYNTHETIC;
        if (dfg_set_dur(g, n, dur) != 0)
            return -1;
    }
    g->mstart[n] = g->mstart[before];
    g->mlen[n] = 0;
    return n;
}

/* A zero-length WAKEUP node before host node h on its thread, which takes over h's
 * gap; h's gap becomes 0. Returns its id, or -1 when out of memory. */
int32_t
dfg_wake_handoff(dfg *g, int32_t h)
{
    int32_t name = dfg_intern(g, "(wake-up)");
    if (name < 0)
        return -1;
    int32_t w = dfg_insert_before(g, h, DFG_HOST, name, 0);
    if (w < 0)
        return -1;
    g->flags[w] |= DFG_F_WAKEUP;
    if (dfg_set_gap(g, w, dfg_gap(g, h)) != 0)
        return -1;
    g->gap[h] = 0;
    return w;
}

int
dfg_add_wakeup(dfg *g, int32_t waker, int32_t h, int64_t latency)
{
    if (h < 0 || h >= g->n_nodes || waker < 0 || waker >= g->n_nodes || g->kind[h] != DFG_HOST)
        return -1;
    if (latency < 0)
        latency = 0;
    if (g->flags[h] & DFG_F_END_EDGES) {
        int32_t w = dfg_wake_handoff(g, h);
        if (w < 0)
            return -1;
        if (dfg_set_gap(g, w, latency) != 0)
            return -1;
        return dfg_add_edge(g, waker, w);
    }
    g->flags[h] |= DFG_F_WAKEUP;
    if (dfg_set_gap(g, h, latency) != 0)
        return -1;
    return dfg_add_edge(g, waker, h);
}

int
dfg_add_edge(dfg *g, int32_t src, int32_t dst)
{
    if (src < 0 || dst < 0 || src == dst)
        return 0;
    if (g->n_edges == g->cap_edges) {
        int64_t c = dfg_next_cap(g->cap_edges, g->n_edges + 1);
        if (dfg_grow((void **)&g->esrc, sizeof *g->esrc, c) != 0 ||
            dfg_grow((void **)&g->edst, sizeof *g->edst, c) != 0)
            return -1;
        g->cap_edges = c;
    }
    g->esrc[g->n_edges] = src;
    g->edst[g->n_edges] = dst;
    g->n_edges++;
    g->finalized = 0;
    return 0;
}

int32_t
dfg_add_group(dfg *g, int op, int32_t nranks, int64_t bytes, uint64_t comm, uint64_t seq,
              int64_t measured_dur)
{
    if (dfg_reserve_groups(g, (int64_t)g->n_groups + 1) != 0)
        return -1;
    int32_t k = g->n_groups++;
    g->grp_op[k] = (uint8_t)op;
    g->grp_nranks[k] = nranks;
    g->grp_members[k] = 0;
    g->grp_first[k] = -1;
    g->grp_bytes[k] = bytes;
    g->grp_mdur[k] = measured_dur;
    g->grp_dur[k] = measured_dur >= 0 ? measured_dur : 0;
    g->grp_comm[k] = comm;
    g->grp_seq[k] = seq;
    g->finalized = 0;
    return k;
}

int
dfg_group_reserve(dfg *g, int32_t n)
{
    return dfg_sparse_get(&g->grp_part, n, INT64_MIN) == INT64_MIN ? dfg_part_set(g, n, -1, -1) : 0;
}

int
dfg_set_group(dfg *g, int32_t n, int32_t grp)
{
    int rc = dfg_part_set(g, n, grp, g->grp_first[grp]);
    if (rc == 0) {
        g->kind[n] = DFG_COLL;
        g->grp_first[grp] = n;
        g->grp_members[grp]++;
        g->finalized = 0;
    }
    return rc;
}

int
dfg_set_iterations(dfg *g, int32_t r, const int32_t *nodes, int32_t n)
{
    if (r < 0 || r >= g->n_ranks || n < 0)
        return -1;
    int32_t old = g->iter_off[r + 1] - g->iter_off[r];
    int32_t total = g->n_iter_nodes - old + n;
    int32_t *arr = malloc((size_t)(total > 0 ? total : 1) * sizeof *arr);
    if (!arr)
        return -1;
    int32_t k = 0;
    for (int32_t q = 0; q < g->n_ranks; q++) {
        if (q == r) {
            if (n > 0)
                memcpy(arr + k, nodes, (size_t)n * sizeof *arr);
            k += n;
        } else {
            int32_t len = g->iter_off[q + 1] - g->iter_off[q];
            if (len > 0)
                memcpy(arr + k, g->iter_node + g->iter_off[q], (size_t)len * sizeof *arr);
            k += len;
        }
    }
    /* recompute offsets */
    int32_t off = 0;
    int32_t *lens = malloc((size_t)g->n_ranks * sizeof *lens + 1);
    if (!lens) {
        free(arr);
        return -1;
    }
    for (int32_t q = 0; q < g->n_ranks; q++)
        lens[q] = q == r ? n : g->iter_off[q + 1] - g->iter_off[q];
    for (int32_t q = 0; q < g->n_ranks; q++) {
        g->iter_off[q] = off;
        off += lens[q];
    }
    g->iter_off[g->n_ranks] = off;
    free(lens);
    free(g->iter_node);
    g->iter_node = arr;
    g->n_iter_nodes = total;
    return 0;
}

int32_t
dfg_iterations(const dfg *g, int32_t r, const int32_t **nodes)
{
    if (r < 0 || r >= g->n_ranks) {
        *nodes = NULL;
        return 0;
    }
    r = dfg_rank_rep(g, r);
    *nodes = g->iter_node + g->iter_off[r];
    return g->iter_off[r + 1] - g->iter_off[r];
}

/* ---- finalize ------------------------------------------------------------------------ */

/* Gives the node and edge arrays' unused capacity back (a graph is built with room to
 * grow: up to twice its size). A shrink that fails leaves the larger block, which holds
 * the new capacity too. */
static void
shrink_to_fit(dfg *g)
{
    int64_t n = g->n_nodes > 0 ? g->n_nodes : 1, e = g->n_edges > 0 ? g->n_edges : 1;
    if (g->cap_nodes > n) {
#define G(f) (void)dfg_grow((void **)&g->f, sizeof *g->f, n)
        G(kind);
        G(flags);
        G(res);
        G(name);
        G(dur);
        G(gap);
        G(lat);
        G(launch);
        G(next_on_res);
        G(mstart);
        G(mlen);
#undef G
        g->cap_nodes = (int32_t)n;
    }
    dfg_sparse_shrink(&g->grp_part);
    dfg_sparse_shrink(&g->bytes);
    dfg_sparse_shrink(&g->leave);
    dfg_sparse_shrink(&g->mend_wide);
    dfg_sparse_shrink(&g->dur_wide);
    dfg_sparse_shrink(&g->gap_wide);
    if (g->cap_edges > e) {
        (void)dfg_grow((void **)&g->esrc, sizeof *g->esrc, e);
        (void)dfg_grow((void **)&g->edst, sizeof *g->edst, e);
        g->cap_edges = e;
    }
}

static int
cmp_edge(const void *pa, const void *pb)
{
    const int64_t *a = pa, *b = pb;
    return (*a > *b) - (*a < *b);
}

/* Builds g->launched, each host's launches in a row in node order, and points every host
 * node's lat slot at its row (-1: none); drops launches from removed or non-host nodes.
 * Returns 0 or -1 (out of memory). */
static int
launched_lists(dfg *g)
{
    int32_t n = g->n_nodes, nl = 0;
    int32_t *off = calloc((size_t)n + 1, sizeof *off);
    int rc = off ? 0 : -1;
    for (int32_t i = 0; rc == 0 && i < n; i++) {
        int32_t l = g->launch[i];
        if (l >= 0 && !(g->flags[i] & DFG_F_REMOVED)) {
            if ((g->flags[l] & DFG_F_REMOVED) || g->kind[l] != DFG_HOST) {
                g->launch[i] = -1;
                continue;
            }
            off[l + 1]++;
            nl++;
        }
    }
    if (rc == 0) {
        for (int32_t i = 0; i < n; i++) {
            if (g->kind[i] == DFG_HOST)
                g->lat[i] = off[i + 1] > 0 ? off[i] : -1;
            off[i + 1] += off[i];
        }
        g->launched = malloc((size_t)(nl > 0 ? nl : 1) * sizeof *g->launched);
        rc = g->launched ? 0 : -1;
    }
    for (int32_t i = 0; rc == 0 && i < n; i++) {
        int32_t l = g->launch[i];
        if (l >= 0 && !(g->flags[i] & DFG_F_REMOVED))
            g->launched[off[l]++] = i;
    }
    g->n_launched = rc == 0 ? nl : 0;
    free(off);
    return rc;
}

int32_t
dfg_launched_count(const dfg *g, int32_t h)
{
    int32_t c = 0;
    for (int32_t i = dfg_launched_first(g, h); i >= 0; i = dfg_launched_next(g, h, i))
        c++;
    return c;
}

int
dfg_finalize(dfg *g)
{
    if (g->finalized)
        return 0;
    free_derived(g);
    int32_t n = g->n_nodes;
    int32_t nblk = (n >> DFG_SUCC_SHIFT) + 2;
    g->succ_blk = calloc((size_t)nblk, sizeof *g->succ_blk);
    g->part_blk = calloc((size_t)nblk, sizeof *g->part_blk);
    if (!g->succ_blk || !g->part_blk)
        goto fail;

    /* compact the edge list: drop dead edges, sort by (src,dst), drop duplicates; the
     * edges before the first one out of order (a copy's, its plan's appended after them)
     * are sorted already, so only the rest is sorted, then merged with them */
    int64_t k = 0, run = -1; /* run: the length of the sorted prefix, -1 all sorted */
    for (int64_t i = 0; i < g->n_edges; i++) {
        int32_t s = g->esrc[i], d = g->edst[i];
        if (s < 0 || d < 0 || (g->flags[s] & DFG_F_REMOVED) || (g->flags[d] & DFG_F_REMOVED))
            continue;
        if (run < 0 && k > 0 &&
            (g->esrc[k - 1] > s || (g->esrc[k - 1] == s && g->edst[k - 1] >= d)))
            run = k;
        g->esrc[k] = s;
        g->edst[k] = d;
        k++;
    }
    g->n_edges = k;
    if (run >= 0) {
        int64_t *key = malloc((size_t)(k > 0 ? k : 1) * sizeof *key);
        if (!key)
            goto fail;
        for (int64_t i = 0; i < k; i++)
            key[i] = ((int64_t)g->esrc[i] << 32) | (uint32_t)g->edst[i];
        qsort(key + run, (size_t)(k - run), sizeof *key, cmp_edge);
        int64_t m = 0;
        for (int64_t a = 0, b = run; a < run || b < k;) {
            int64_t v = b >= k || (a < run && key[a] <= key[b]) ? key[a++] : key[b++];
            if (m > 0 && v == (((int64_t)g->esrc[m - 1] << 32) | (uint32_t)g->edst[m - 1]))
                continue;
            g->esrc[m] = (int32_t)(v >> 32);
            g->edst[m] = (int32_t)(v & 0xffffffff);
            m++;
        }
        free(key);
        g->n_edges = m;
    }
    if (g->n_edges > INT32_MAX)
        goto fail;
    shrink_to_fit(g);
    g->succ = g->edst; /* sorted by source: the successors of each node in a row */
    for (int64_t i = 0; i < g->n_edges; i++)
        g->succ_blk[(g->esrc[i] >> DFG_SUCC_SHIFT) + 1]++;
    for (int32_t b = 0; b + 1 < nblk; b++)
        g->succ_blk[b + 1] += g->succ_blk[b];
    for (int32_t i = 0; i < g->grp_part.n; i++)
        g->part_blk[(g->grp_part.node[i] >> DFG_SUCC_SHIFT) + 1]++;
    for (int32_t b = 0; b + 1 < nblk; b++)
        g->part_blk[b + 1] += g->part_blk[b];

    if (launched_lists(g) != 0)
        goto fail;

    g->finalized = 1; /* the lookups below may use part_blk */
    /* group member counts */
    for (int32_t q = 0; q < g->n_groups; q++) {
        int32_t c = 0;
        for (int32_t m = g->grp_first[q]; m >= 0; m = dfg_next_in_group(g, m))
            c++;
        g->grp_members[q] = c;
    }
    g->finalized = 1;
    return 0;
fail:
    free_derived(g);
    return -1;
}

int32_t
dfg_live_nodes(const dfg *g)
{
    int32_t c = 0;
    for (int32_t i = 0; i < g->n_nodes; i++)
        c += !(g->flags[i] & DFG_F_REMOVED);
    return c;
}
