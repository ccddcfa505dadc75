/*
 * join.h: the correlation join window of the importers.
 *
 * A launch call on the host and the device operation it started carry one correlation id
 * (CUPTI's); profiler files list them apart, in either order. The window holds the side
 * seen first, keyed by that id, until the other comes: a ring of IMP_JOIN_WINDOW slots in
 * arrival order (the oldest goes first when it is full) and an open-addressing hash of
 * 2 x IMP_JOIN_WINDOW entries from the id to its slot. What a slot holds is the caller's
 * (imp_slot's fields are what launches and device ops need); the window only finds, adds
 * and removes.
 */
#ifndef DPRO_IMPORT_JOIN_H
#define DPRO_IMPORT_JOIN_H

#include <stddef.h>
#include <stdint.h>

#include "dprotrace.h"

#define IMP_JOIN_WINDOW 32768u
#define IMP_JOIN_HASH_SIZE (IMP_JOIN_WINDOW * 2u)

/* What a slot holds. */
enum { IMP_SLOT_FREE = 0, IMP_SLOT_LAUNCH = 1, IMP_SLOT_DEVICE = 2 };

/* A slot of the window. imp_join_insert clears every field but ev and sets coll to -1. */
typedef struct imp_slot {
    uint64_t corr;
    uint32_t state;  /* IMP_SLOT_*: set by the caller after imp_join_insert */
    uint32_t kname;  /* IMP_SLOT_DEVICE: kernel name id (0 for copies and sets) */
    uint64_t stream; /* IMP_SLOT_DEVICE */
    uint64_t bytes;  /* IMP_SLOT_DEVICE */
    int64_t coll;    /* IMP_SLOT_DEVICE: the caller's index of its collective, -1 if none */
    dpro_event ev;   /* IMP_SLOT_LAUNCH: the held API event */
} imp_slot;

typedef struct imp_join {
    imp_slot *slots;     /* IMP_JOIN_WINDOW, a ring */
    uint32_t *hash;      /* slot index + 1, 0: empty */
    uint32_t head, used; /* oldest slot, slots in the ring */
} imp_join;

/* Allocates an empty window. Returns DPRO_OK or DPRO_ERR_NOMEM (then imp_join_free is
 * still the way to release it). */
int imp_join_init(imp_join *j);

/* Frees the window's memory (a zeroed or failed one is fine). */
void imp_join_free(imp_join *j);

/* Home entry of corr: runs of 16 consecutive ids share one cache line of the hash (the
 * launch and the device op of an id come close together in a file, and ids grow), the
 * runs spread by a multiplicative hash. */
static inline uint32_t
imp_join_hash_pos(uint64_t corr)
{
    uint32_t run = (uint32_t)(((corr >> 4) * 0x9E3779B97F4A7C15ULL) >> 40);
    return ((run << 4) | (uint32_t)(corr & 15)) & (IMP_JOIN_HASH_SIZE - 1);
}

/* The slot holding corr, or NULL. */
static inline imp_slot *
imp_join_find(imp_join *j, uint64_t corr)
{
    for (uint32_t p = imp_join_hash_pos(corr);; p = (p + 1) & (IMP_JOIN_HASH_SIZE - 1)) {
        uint32_t v = j->hash[p];
        if (v == 0)
            return NULL;
        if (j->slots[v - 1].corr == corr)
            return &j->slots[v - 1];
    }
}

/* Removes slot s (found or inserted, not free) from the hash and marks it free; it stays
 * in the ring until it is the oldest. */
void imp_join_remove(imp_join *j, imp_slot *s);

/* Whether the window is full (imp_join_insert needs a slot: drop the oldest first). */
static inline int
imp_join_full(const imp_join *j)
{
    return j->used == IMP_JOIN_WINDOW;
}

/* The oldest slot (possibly free); the window must not be empty (j->used > 0). */
static inline imp_slot *
imp_join_oldest(imp_join *j)
{
    return &j->slots[j->head];
}

/* Lets the oldest slot go (removing it from the hash unless it is free). */
void imp_join_drop_oldest(imp_join *j);

/* Takes a new slot for corr at the young end of the ring (the window must not be full)
 * and returns it, state IMP_SLOT_FREE: the caller fills it. */
imp_slot *imp_join_insert(imp_join *j, uint64_t corr);

#endif /* DPRO_IMPORT_JOIN_H */
