/*
 * test_umap.c: the collector's growing map (coll_umap, collector/umap.c) keeps every key
 * findable as it grows from 1,024 slots past 512 and 4,096 entries to 32,768: after each
 * growth every key inserted so far is found with its value, keys never inserted are not,
 * and values reset to 0 and set again neither lose nor duplicate a key. Removals (the
 * allocation map removes a freed address) leave every other key findable, and a job that
 * allocates and frees a million distinct addresses, a few hundred live at a time, keeps
 * the map at its live size (it grew without bound when a free only zeroed the value).
 * Keys of three shapes: aligned device addresses (low bits zero), function addresses, and
 * keys that differ only in their high 32 bits.
 */
#include "config.h"

#include <stdlib.h>

#include "internal.h"
#include "../unit/testutil.h"

enum { KEYS = 20000 };

/* The i-th key of shape s (never 0, distinct over i and s). */
static uint64_t
key_of(int s, uint64_t i)
{
    if (s == 0)
        return 0x7f3a00000000ull + (i << 9); /* 512-byte aligned allocations */
    if (s == 1)
        return 0x55d4c0001000ull + i * 48 + 16; /* function addresses */
    return ((i + 1) << 32) | 0x1234u;           /* only the high half differs */
}

/* Checks that keys 0..n-1 of shape s are found with values vals[i], and that n more never
 * inserted are absent; counts failures in *bad. */
static void
check_all(struct coll_umap *m, int s, size_t n, const uint64_t *vals, long *bad)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t *v = coll_umap_find(m, key_of(s, i), 0);
        if (!v || *v != vals[i])
            (*bad)++;
    }
    for (size_t i = KEYS; i < KEYS + n; i++)
        if (coll_umap_find(m, key_of(s, i), 0) != NULL)
            (*bad)++;
}

/* Grows one map with keys of shape s, checking every key after each growth (and at 512,
 * 4,096 entries), then removes and re-inserts a third of them. */
static void
test_shape(int s)
{
    struct coll_umap m = {0};
    uint64_t *vals = calloc(KEYS, sizeof *vals);
    long bad = 0, growths = 0;
    REQUIRE(vals);
    for (size_t i = 0; i < KEYS; i++) {
        size_t cap = m.cap;
        uint64_t *v = coll_umap_find(&m, key_of(s, i), 1);
        REQUIRE(v);
        CHECK(*v == 0);
        *v = vals[i] = i * 7 + 1;
        if (m.cap != cap) {
            growths++;
            check_all(&m, s, i + 1, vals, &bad);
        }
        if (i + 1 == 512 || i + 1 == 513 || i + 1 == 4096 || i + 1 == 4097)
            check_all(&m, s, i + 1, vals, &bad);
    }
    check_all(&m, s, KEYS, vals, &bad);
    CHECK_EQ(bad, 0);
    CHECK_EQ_U(m.used, KEYS);
    CHECK_EQ_U(m.cap, 65536); /* 1,024 doubled while half full: 20,000 keys in 65,536 */
    CHECK(growths == 7);

    /* frees (value 0) of every third key, then a new allocation at half of those */
    for (size_t i = 0; i < KEYS; i += 3) {
        uint64_t *v = coll_umap_find(&m, key_of(s, i), 0);
        REQUIRE(v);
        *v = vals[i] = 0;
    }
    check_all(&m, s, KEYS, vals, &bad);
    for (size_t i = 0; i < KEYS; i += 6) {
        uint64_t *v = coll_umap_find(&m, key_of(s, i), 1);
        REQUIRE(v);
        CHECK(*v == 0);
        *v = vals[i] = i + 3;
    }
    check_all(&m, s, KEYS, vals, &bad);
    CHECK_EQ(bad, 0);
    CHECK_EQ_U(m.used, KEYS); /* a re-inserted key takes no new slot */
    coll_umap_free(&m);
    CHECK(m.cap == 0 && m.used == 0 && !m.keys);
    CHECK(coll_umap_find(&m, key_of(s, 0), 0) == NULL);
    free(vals);
}

/* Removes every key of shape s in an order that leaves holes inside probe runs (every
 * third, then the rest backwards), checking after each pass that the removed keys are
 * gone and the others found with their values. */
static void
test_remove(int s)
{
    struct coll_umap m = {0};
    uint64_t *vals = calloc(KEYS, sizeof *vals);
    long bad = 0;
    REQUIRE(vals);
    for (size_t i = 0; i < KEYS; i++) {
        uint64_t *v = coll_umap_find(&m, key_of(s, i), 1);
        REQUIRE(v);
        *v = vals[i] = i * 5 + 2;
    }
    size_t cap = m.cap;
    for (size_t i = 0; i < KEYS; i += 3)
        coll_umap_remove(&m, key_of(s, i));
    coll_umap_remove(&m, key_of(s, KEYS + 1)); /* never inserted: nothing happens */
    for (size_t i = 0; i < KEYS; i++) {
        uint64_t *v = coll_umap_find(&m, key_of(s, i), 0);
        if (i % 3 == 0 ? v != NULL : (!v || *v != vals[i]))
            bad++;
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ_U(m.used, KEYS - (KEYS + 2) / 3);
    for (size_t i = KEYS; i-- > 0;)
        if (i % 3)
            coll_umap_remove(&m, key_of(s, i));
    CHECK_EQ_U(m.used, 0);
    for (size_t i = 0; i < m.cap; i++)
        if (m.keys[i])
            bad++;
    CHECK_EQ(bad, 0);
    CHECK_EQ_U(m.cap, cap); /* removals never shrink or grow it */
    coll_umap_free(&m);
    free(vals);
}

/* A long job's allocation map: a million distinct addresses, each freed 300 allocations
 * later; the map stays at 1,024 slots (300 live, half full at 512). */
static void
test_churn(int s)
{
    struct coll_umap m = {0};
    enum { LIVE = 300, TOTAL = 1000000 };
    long bad = 0;
    for (uint64_t i = 0; i < TOTAL; i++) {
        uint64_t *v = coll_umap_find(&m, key_of(s, i), 1);
        REQUIRE(v);
        *v = i + 1;
        if (i >= LIVE) {
            v = coll_umap_find(&m, key_of(s, i - LIVE), 0);
            if (!v || *v != i - LIVE + 1)
                bad++;
            coll_umap_remove(&m, key_of(s, i - LIVE));
        }
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ_U(m.used, LIVE);
    CHECK_EQ_U(m.cap, 1024);
    coll_umap_free(&m);
}

int
main(void)
{
    for (int s = 0; s < 3; s++) {
        test_shape(s);
        test_remove(s);
        test_churn(s);
    }
    return tests_done();
}
