/*
 * hmap.h: a small open-addressing hash map from uint64 keys to int32 values (prefix
 * hmap_), for the builder's lookups (correlation id -> node, stream -> resource, event
 * handle -> node). Keys are arbitrary 64-bit values; the map grows itself.
 */
#ifndef DPRO_REPLAY_HMAP_H
#define DPRO_REPLAY_HMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct hmap {
    uint64_t *keys;
    int32_t *vals;
    uint8_t *used;
    size_t cap, n;
} hmap;

/* Initialises an empty map. Returns 0 or -1 (out of memory). */
int hmap_init(hmap *m, size_t expected);

void hmap_free(hmap *m);

/* Sets key -> val (replacing). Returns 0 or -1 (out of memory). */
int hmap_put(hmap *m, uint64_t key, int32_t val);

/* Value of key, or dflt if absent. */
int32_t hmap_get(const hmap *m, uint64_t key, int32_t dflt);

/* Removes every entry (keeps the storage). */
void hmap_clear(hmap *m);

#endif
