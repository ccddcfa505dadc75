/* hmap.c: uint64 -> int32 hash map (see hmap.h). */
#include "hmap.h"

#include <stdlib.h>
#include <string.h>

static inline size_t
slot_of(uint64_t k, size_t cap)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (size_t)k & (cap - 1);
}

int
hmap_init(hmap *m, size_t expected)
{
    memset(m, 0, sizeof *m);
    size_t cap = 16;
    while (cap < expected * 2)
        cap *= 2;
    m->keys = malloc(cap * sizeof *m->keys);
    m->vals = malloc(cap * sizeof *m->vals);
    m->used = calloc(cap, 1);
    m->cap = cap;
    if (!m->keys || !m->vals || !m->used) {
        hmap_free(m);
        return -1;
    }
    return 0;
}

void
hmap_free(hmap *m)
{
    free(m->keys);
    free(m->vals);
    free(m->used);
    memset(m, 0, sizeof *m);
}

void
hmap_clear(hmap *m)
{
    if (m->used)
        memset(m->used, 0, m->cap);
    m->n = 0;
}

static int
rehash(hmap *m)
{
    hmap bigger;
    if (hmap_init(&bigger, m->cap) != 0)
        return -1;
    for (size_t i = 0; i < m->cap; i++)
        if (m->used[i])
            hmap_put(&bigger, m->keys[i], m->vals[i]);
    hmap_free(m);
    *m = bigger;
    return 0;
}

int
hmap_put(hmap *m, uint64_t key, int32_t val)
{
    if ((m->n + 1) * 2 > m->cap && rehash(m) != 0)
        return -1;
    size_t i = slot_of(key, m->cap);
    while (m->used[i] && m->keys[i] != key)
        i = (i + 1) & (m->cap - 1);
    if (!m->used[i]) {
        m->used[i] = 1;
        m->keys[i] = key;
        m->n++;
    }
    m->vals[i] = val;
    return 0;
}

int32_t
hmap_get(const hmap *m, uint64_t key, int32_t dflt)
{
    if (!m->cap)
        return dflt;
    size_t i = slot_of(key, m->cap);
    while (m->used[i]) {
        if (m->keys[i] == key)
            return m->vals[i];
        i = (i + 1) & (m->cap - 1);
    }
    return dflt;
}
