/* dfg_sparse.c: the graph's sparse per-node tables (dfg_sparse, see dfg.h): the lists of the
 * collective groups' participants, the bytes of the nodes that move data, the measured ends a
 * 32-bit length from the start does not reach, and the durations and gaps 32 bits do not hold. */
#include "dfg.h"
#include "dfg_int.h"

#include <stdlib.h>
#include <string.h>

int64_t
dfg_sparse_get(const dfg_sparse *t, int32_t n, int64_t none)
{
    int32_t i = dfg_sparse_find(t, n);
    return i >= 0 ? t->val[i] : none;
}

int
dfg_sparse_set(dfg_sparse *t, int32_t n, int64_t v)
{
    int rc = 0;
    int32_t i = dfg_sparse_find(t, n);
    if (i >= 0) {
        t->val[i] = v;
    } else {
        i = -i - 1;
        if (t->n == t->cap) {
            int64_t c = dfg_next_cap(t->cap, (int64_t)t->n + 1);
            if (c > INT32_MAX || dfg_grow((void **)&t->node, sizeof *t->node, c) != 0 ||
                dfg_grow((void **)&t->val, sizeof *t->val, c) != 0)
                rc = -1; /* a first grow that held keeps its larger block: harmless */
            else
                t->cap = (int32_t)c;
        }
        if (rc == 0) {
            size_t after = (size_t)(t->n - i);
            memmove(t->node + i + 1, t->node + i, after * sizeof *t->node);
            memmove(t->val + i + 1, t->val + i, after * sizeof *t->val);
            t->node[i] = n;
            t->val[i] = v;
            t->n++;
        }
    }
    return rc;
}

void
dfg_sparse_free(dfg_sparse *t)
{
    free(t->node);
    free(t->val);
    memset(t, 0, sizeof *t);
}

int
dfg_sparse_clone(dfg_sparse *d, const dfg_sparse *s)
{
    int rc = 0;
    size_t cap = (size_t)(s->n > 0 ? s->n : 1);
    memset(d, 0, sizeof *d);
    if (s->n > 0) {
        d->node = malloc(cap * sizeof *d->node);
        d->val = malloc(cap * sizeof *d->val);
        if (!d->node || !d->val) {
            dfg_sparse_free(d);
            rc = -1;
        } else {
            memcpy(d->node, s->node, (size_t)s->n * sizeof *d->node);
            memcpy(d->val, s->val, (size_t)s->n * sizeof *d->val);
            d->n = d->cap = s->n;
        }
    }
    return rc;
}

int
dfg_sparse_copy(dfg_sparse *d, const dfg_sparse *s)
{
    int rc = 0;
    if (s->n > d->cap) {
        if (dfg_grow((void **)&d->node, sizeof *d->node, s->n) != 0 ||
            dfg_grow((void **)&d->val, sizeof *d->val, s->n) != 0)
            rc = -1; /* a first grow that held keeps its larger block: harmless */
        else
            d->cap = s->n;
    }
    if (rc == 0 && s->n > 0) {
        memcpy(d->node, s->node, (size_t)s->n * sizeof *d->node);
        memcpy(d->val, s->val, (size_t)s->n * sizeof *d->val);
    }
    if (rc == 0)
        d->n = s->n;
    return rc;
}

void
dfg_sparse_shrink(dfg_sparse *t)
{
    if (t->cap > t->n && t->n > 0) {
        (void)dfg_grow((void **)&t->node, sizeof *t->node, t->n);
        (void)dfg_grow((void **)&t->val, sizeof *t->val, t->n);
        t->cap = t->n;
    }
}

int
dfg_sparse_fold(dfg_sparse *d, const dfg_sparse *s, const int32_t *map)
{
    int rc = 0;
    for (int32_t i = 0; rc == 0 && i < s->n; i++)
        if (map[s->node[i]] >= 0)
            rc = dfg_sparse_set(d, map[s->node[i]], s->val[i]);
    return rc;
}

int64_t
dfg_bytes(const dfg *g, int32_t n)
{
    return dfg_sparse_get(&g->bytes, n, 0);
}

int
dfg_set_bytes(dfg *g, int32_t n, int64_t bytes)
{
    int rc = 0;
    if (bytes != 0 || dfg_sparse_get(&g->bytes, n, 0) != 0)
        rc = dfg_sparse_set(&g->bytes, n, bytes);
    return rc;
}

/* An entry of grp_part: the group in the high 32 bits, the next participant in the low. */
#define PART(grp, next) ((int64_t)(((uint64_t)(uint32_t)(grp) << 32) | (uint32_t)(next)))

int64_t
dfg_part_entry_all(const dfg *g, int32_t n)
{
    return dfg_sparse_get(&g->grp_part, n, PART(-1, -1));
}

int
dfg_part_set(dfg *g, int32_t n, int32_t grp, int32_t next)
{
    int32_t had = g->grp_part.n;
    int rc = dfg_sparse_set(&g->grp_part, n, PART(grp, next));
    if (g->grp_part.n != had)
        g->finalized = 0; /* a new entry moves the ones after it: part_blk is stale */
    return rc;
}

int64_t
dfg_mend_wide(const dfg *g, int32_t n)
{
    return dfg_sparse_get(&g->mend_wide, n, 0);
}

int64_t *
dfg_mend_array(const dfg *g)
{
    int64_t *end = malloc((size_t)(g->n_nodes > 0 ? g->n_nodes : 1) * sizeof *end);
    if (end)
        for (int32_t n = 0; n < g->n_nodes; n++)
            end[n] = dfg_mend(g, n);
    return end;
}

int
dfg_set_mend(dfg *g, int32_t n, int64_t end)
{
    int rc = 0;
    uint64_t len = (uint64_t)end - (uint64_t)g->mstart[n]; /* no overflow: unsigned */
    if (end >= g->mstart[n] && len < DFG_MLEN_WIDE) {
        g->mlen[n] = (uint32_t)len;
    } else {
        rc = dfg_sparse_set(&g->mend_wide, n, end);
        if (rc == 0)
            g->mlen[n] = DFG_MLEN_WIDE;
    }
    return rc;
}

int64_t
dfg_wide_get(const dfg_sparse *t, int32_t n)
{
    return dfg_sparse_get(t, n, 0);
}

int
dfg_wide_set(uint32_t *field, dfg_sparse *t, int32_t n, int64_t v)
{
    int rc = dfg_sparse_set(t, n, v);
    if (rc == 0)
        field[n] = DFG_FIELD_WIDE;
    return rc;
}
