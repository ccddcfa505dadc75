/*
 * dfg_int.h: what the graph's files (dfg*.c) share and nobody else uses.
 */
#ifndef DPRO_REPLAY_DFG_INT_H
#define DPRO_REPLAY_DFG_INT_H

#include <stddef.h>
#include <stdint.h>

#include "dfg.h"

/* Frees the string table's arrays and zeroes *t. */
void dfg_strtab_free(dfg_strtab *t);

/* Makes *d a copy of s (*d's previous arrays are not freed). Returns 0, or -1 when out of
 * memory (*d then holds what was allocated: free it with dfg_strtab_free). */
int dfg_strtab_clone(dfg_strtab *d, const dfg_strtab *s);

/* Reallocates *p to new_cap elements of elem bytes. Returns 0 or -1 (*p unchanged). */
int dfg_grow(void **p, size_t elem, int64_t new_cap);

/* A capacity of at least need: cap doubled from 64 (or from cap). */
int64_t dfg_next_cap(int64_t cap, int64_t need);

/* The value of node n in t, or none. O(log t->n). */
int64_t dfg_sparse_get(const dfg_sparse *t, int32_t n, int64_t none);

/* Sets the value of node n in t: O(1) above t's last node, else O(log + the entries
 * after it). Returns 0, or -1 when out of memory (t unchanged). */
int dfg_sparse_set(dfg_sparse *t, int32_t n, int64_t v);

/* Sets node n's group and next participant in g->grp_part. Returns 0, or -1 when out of
 * memory (n had no entry; it is then unchanged). */
int dfg_part_set(dfg *g, int32_t n, int32_t grp, int32_t next);

/* Frees t's arrays and zeroes it. */
void dfg_sparse_free(dfg_sparse *t);

/* Makes *d (uninitialised) a copy of s. Returns 0, or -1 when out of memory (d empty). */
int dfg_sparse_clone(dfg_sparse *d, const dfg_sparse *s);

/* Makes *d (a table, empty or not) a copy of s in the arrays it holds, grown only when s
 * has more entries than they hold. Returns 0, or -1 when out of memory (*d unchanged). */
int dfg_sparse_copy(dfg_sparse *d, const dfg_sparse *s);

/* Gives t's unused capacity back (a failed shrink keeps the larger block). */
void dfg_sparse_shrink(dfg_sparse *t);

/* Sets in d the values of s under the node map (old id -> new id, -1 dropped), which must
 * keep the nodes' order for O(1) appends. Returns 0 or -1 (out of memory). */
int dfg_sparse_fold(dfg_sparse *d, const dfg_sparse *s, const int32_t *map);

/* Room for `need` resources. Returns 0 or -1. */
int dfg_reserve_res(dfg *g, int64_t need);

/* Room for `need` collective groups. Returns 0 or -1. */
int dfg_reserve_groups(dfg *g, int64_t need);

/* A zero-length WAKEUP node before host node h on its thread, which takes over h's
 * gap; h's gap becomes 0. Returns its id, or -1 when out of memory. */
int32_t dfg_wake_handoff(dfg *g, int32_t h);

#endif
