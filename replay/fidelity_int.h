/*
 * fidelity_int.h: what the typical replay (fidelity.c) and the drawn replay (drawn.c) share.
 */
#ifndef DPRO_REPLAY_FIDELITY_INT_H
#define DPRO_REPLAY_FIDELITY_INT_H

#include <stddef.h>
#include <stdint.h>

#include "replay.h"

/* A node of the compared iterations at its place (replay_typical): its resource, its
 * position among that resource's operations of its name in the iteration, its name, its
 * iteration (0: the first compared), the node. */
typedef struct fid_place {
    int32_t res, pos, name, iter, node;
} fid_place;

/* The places of the nodes of g in the compared iterations first..last (rp, may be NULL,
 * leaves out the ranks it has no reader for), sorted by resource, position, name and
 * iteration, into *out (np of them; the caller frees *out). Returns 0 or -1 (out of
 * memory). */
int fid_sorted_places(const replay *rp, const dfg *g, int32_t first, int32_t last, fid_place **out,
                      size_t *np);

/* End (exclusive) of the run of places sharing pl[a]'s place, among pl[0..np). */
size_t fid_place_run_end(const fid_place *pl, size_t np, size_t a);

/* Replays rp->graph with the timings make(g, ctx) gives a copy of them (a view,
 * dfg_timing_view, or a whole copy when the graph is not finalized; make returns 0 or -1)
 * into *us (the simulated mean iteration) and *err (its error against the measured mean,
 * %); *measured receives that mean. Returns 0, 1 when the compared iterations are not
 * covered, -1 out of memory. */
int fid_replay_timings(const replay *rp, int (*make)(dfg *g, void *ctx), void *ctx,
                       double *measured, double *us, double *err);

/* The drawn replay's REPLAY_DRAWN_SAMPLES samples (0..) into out's drawn_* (their mean,
 * spread and error against out->measured_us; more than one compared iteration; all 0 on
 * failure). Returns as fid_replay_timings. */
int fid_drawn_replay(const replay *rp, replay_typical *out);

/* Whether the part `part` ("typical" or "drawn": of replay_typical_replay; "perturb":
 * replay_perturb) is to fail as out of memory would: DPRO_TEST_FIDELITY_FAIL=part, the
 * fault the tests drive, since no input makes one of these simulations alone run out of
 * memory on demand. */
int fid_test_fault(const char *part);

#endif /* DPRO_REPLAY_FIDELITY_INT_H */
