/*
 * dfg_int.h: what the graph's files (dfg*.c) share and nobody else uses.
 */
#ifndef DPRO_REPLAY_DFG_INT_H
#define DPRO_REPLAY_DFG_INT_H

#include <stdint.h>

#include "dfg.h"

/* Frees the string table's arrays and zeroes *t. */
void dfg_strtab_free(dfg_strtab *t);

/* Makes *d a copy of s (*d's previous arrays are not freed). Returns 0, or -1 when out of
 * memory (*d then holds what was allocated: free it with dfg_strtab_free). */
int dfg_strtab_clone(dfg_strtab *d, const dfg_strtab *s);

/* Room for `need` resources. Returns 0 or -1. */
int dfg_reserve_res(dfg *g, int64_t need);

/* Room for `need` collective groups. Returns 0 or -1. */
int dfg_reserve_groups(dfg *g, int64_t need);

/* A zero-length WAKEUP node before host node h on its thread, which takes over h's
 * gap; h's gap becomes 0. Returns its id, or -1 when out of memory. */
int32_t dfg_wake_handoff(dfg *g, int32_t h);

#endif
