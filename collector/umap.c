/*
 * umap.c: the background thread's growing maps (struct coll_umap: collector.h): kernel
 * names, allocation sizes, stack ids. Open addressing with linear probing; the map
 * doubles when half full; a removed key frees its slot (backward shift), so the map of
 * allocations holds only the live ones however many distinct addresses a job frees. Its
 * own file so that a unit test (tests/collector/test_umap.c) links it alone.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* The first slot to probe for key k (0 already mapped to ~0) in a map of cap slots (a
 * power of 2, past COLL_MAP_SIZE too): one place for lookups and for re-placing the keys
 * when the map grows. */
static inline size_t
coll_umap_start(uint64_t k, size_t cap)
{
    return (size_t)(coll_mix64(k) & (cap - 1));
}

/* Doubles the map's slots (1,024 at first); returns 0, or -1 when memory runs out. Out of
 * line: coll_umap_find runs for most records, this a dozen times a run. */
static __attribute__((noinline)) int
coll_umap_grow(struct coll_umap *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 1024;
    uint64_t *nk = calloc(ncap, sizeof *nk), *nv = calloc(ncap, sizeof *nv);
    if (nk == NULL || nv == NULL) {
        free(nk);
        free(nv);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (m->keys[i] == 0)
            continue;
        size_t j = coll_umap_start(m->keys[i], ncap);
        while (nk[j])
            j = (j + 1) & (ncap - 1);
        nk[j] = m->keys[i];
        nv[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = nk;
    m->vals = nv;
    m->cap = ncap;
    return 0;
}

uint64_t *
coll_umap_find(struct coll_umap *m, uint64_t k, int insert)
{
    if (insert && (m->used + 1) * 2 > m->cap && coll_umap_grow(m) != 0)
        return NULL;
    if (m->cap == 0)
        return NULL;
    k = k ? k : ~0ull; /* 0 marks empty slots */
    size_t j = coll_umap_start(k, m->cap);
    while (m->keys[j]) {
        if (m->keys[j] == k)
            return &m->vals[j];
        j = (j + 1) & (m->cap - 1);
    }
    if (!insert)
        return NULL;
    m->keys[j] = k;
    m->vals[j] = 0;
    m->used++;
    return &m->vals[j];
}

void
coll_umap_remove(struct coll_umap *m, uint64_t k)
{
    if (m->cap == 0)
        return;
    k = k ? k : ~0ull;
    size_t mask = m->cap - 1, j = coll_umap_start(k, m->cap);
    while (m->keys[j] && m->keys[j] != k)
        j = (j + 1) & mask;
    if (m->keys[j] == 0)
        return;
    m->used--;
    /* backward shift: each later key of the run whose first slot is not cyclically in
     * (hole, its slot] moves into the hole, so no probe stops short of a key */
    for (size_t i = j;;) {
        m->keys[j] = 0;
        for (;;) {
            i = (i + 1) & mask;
            if (m->keys[i] == 0)
                return;
            size_t h = coll_umap_start(m->keys[i], m->cap);
            int stays = j < i ? (h > j && h <= i) : (h > j || h <= i);
            if (!stays)
                break;
        }
        m->keys[j] = m->keys[i];
        m->vals[j] = m->vals[i];
        j = i;
    }
}

void
coll_umap_free(struct coll_umap *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}
