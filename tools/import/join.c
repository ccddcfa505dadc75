/*
 * join.c: the correlation join window (join.h): a ring of slots and a linear-probing hash
 * with backward-shift deletion (no tombstones, so lookups stay short however long the
 * import runs).
 */
#include <stdlib.h>
#include <string.h>

#include "join.h"

int
imp_join_init(imp_join *j)
{
    memset(j, 0, sizeof(*j));
    j->slots = malloc(IMP_JOIN_WINDOW * sizeof(*j->slots));
    j->hash = calloc(IMP_JOIN_HASH_SIZE, sizeof(*j->hash));
    return j->slots && j->hash ? DPRO_OK : DPRO_ERR_NOMEM;
}

void
imp_join_free(imp_join *j)
{
    free(j->slots);
    free(j->hash);
    j->slots = NULL;
    j->hash = NULL;
}

void
imp_join_remove(imp_join *j, imp_slot *s)
{
    uint32_t idx = (uint32_t)(s - j->slots) + 1;
    uint32_t p = imp_join_hash_pos(s->corr);
    while (j->hash[p] != idx)
        p = (p + 1) & (IMP_JOIN_HASH_SIZE - 1);
    uint32_t hole = p;
    for (uint32_t q = (p + 1) & (IMP_JOIN_HASH_SIZE - 1); j->hash[q] != 0;
         q = (q + 1) & (IMP_JOIN_HASH_SIZE - 1)) {
        uint32_t home = imp_join_hash_pos(j->slots[j->hash[q] - 1].corr);
        /* move q into the hole if its home is not in (hole, q] (cyclically) */
        int move = hole <= q ? (home <= hole || home > q) : (home <= hole && home > q);
        if (move) {
            j->hash[hole] = j->hash[q];
            hole = q;
        }
    }
    j->hash[hole] = 0;
    s->state = IMP_SLOT_FREE;
}

void
imp_join_drop_oldest(imp_join *j)
{
    imp_slot *s = &j->slots[j->head];
    if (s->state != IMP_SLOT_FREE)
        imp_join_remove(j, s);
    j->head = (j->head + 1) % IMP_JOIN_WINDOW;
    j->used--;
}

imp_slot *
imp_join_insert(imp_join *j, uint64_t corr)
{
    uint32_t i = (j->head + j->used) % IMP_JOIN_WINDOW;
    imp_slot *s = &j->slots[i];
    j->used++;
    memset(s, 0, sizeof(*s) - sizeof(s->ev));
    s->corr = corr;
    s->coll = -1;
    uint32_t p = imp_join_hash_pos(corr);
    while (j->hash[p] != 0)
        p = (p + 1) & (IMP_JOIN_HASH_SIZE - 1);
    j->hash[p] = i + 1;
    return s;
}
