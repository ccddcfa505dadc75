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

/* The wait the typical-duration replay keeps at each collective (replay_typical): its
 * ranks' arrivals are each one typical value, without the jitter every collective waits
 * for the latest of, so the wait is replay_rank_wait's, by its code, with the same n
 * ranks on both sides, taken against one arrival: the expected maximum of n draws of F
 * less that of one draw (F's mean, 0). F is learned from g's groups of all g->n_ranks
 * ranks in rp's compared window (replay_compared_window): each arrival less its group's
 * mean arrival, less the mean of those of its rank at the same place (replay_typical's
 * places: which collective of the iteration it is), the lateness the typical values keep;
 * a folded class's arrival counts for each of its ranks. Set as g's wait on the groups of
 * n ranks (g->grp_wait_ns; g: rp->graph, a clone or a timing view of it). 0 with fewer
 * than 2 ranks, without compared iterations or with fewer than
 * REPLAY_RANK_WAIT_MIN_SAMPLES arrivals.
 * pl[0..np) are the places of g's compared iterations (fid_sorted_places of rp's, or of a
 * graph of the same nodes: a clone or a timing view). Returns the wait in ns, or -2 out of
 * memory. */
int64_t fid_rank_wait_typical(const replay *rp, dfg *g, const fid_place *pl, size_t np);

/* What the typical and the drawn replay's simulations share, made once for all of them
 * (fid_runner_init): the places of the compared iterations, one timing view of the graph
 * that each simulation starts from afresh (dfg_timing_view_reset), one simulation result
 * its arrays reused, and each rank's measured mean iteration. */
typedef struct fid_runner {
    const replay *rp;
    dfg base;       /* a finalized clone of rp->graph when that is not finalized, else empty */
    const dfg *src; /* the graph replayed: rp->graph, or base */
    dfg view;       /* dfg_timing_view of *src */
    sim_result res; /* the last simulation */
    fid_place *pl;  /* the places of the compared iterations (fid_sorted_places) */
    size_t np;
    double *rank_meas; /* n_ranks: each present rank's measured mean iteration, us, as
                        * replay_summarize's rank summary has it; -1 when none */
} fid_runner;

/* Sets up *fr for replays of rp->graph, which must stay unchanged while fr lives. Returns
 * 0 or -1 (out of memory; *fr is then freed). Free it with fid_runner_free. */
int fid_runner_init(const replay *rp, fid_runner *fr);

/* Frees what fr holds and zeroes it (a zeroed fr too). */
void fid_runner_free(fid_runner *fr);

/* Replays fr's graph with the timings make(g, ctx) gives to its view of them, reset to the
 * graph's own first (make returns 0 or -1), into *us (the simulated mean iteration) and
 * *err (its error against the measured mean, %), as replay_summarize would give them for
 * that simulation; *measured receives that mean. Takes no fresh memory after the first
 * call but what make takes. Returns 0, 1 when the compared iterations are not covered,
 * -1 out of memory. */
int fid_runner_timings(fid_runner *fr, int (*make)(dfg *g, void *ctx), void *ctx, double *measured,
                       double *us, double *err);

/* The drawn replay's REPLAY_DRAWN_SAMPLES samples (0..) of fr's graph into out's drawn_*
 * (their mean, spread and error against out->measured_us; more than one compared
 * iteration; all 0 on failure). Returns as fid_runner_timings. */
int fid_drawn_replay(fid_runner *fr, replay_typical *out);

/* Whether the part `part` ("typical" or "drawn": of replay_typical_replay; "perturb":
 * replay_perturb) is to fail as out of memory would: DPRO_TEST_FIDELITY_FAIL=part, the
 * fault the tests drive, since no input makes one of these simulations alone run out of
 * memory on demand. */
int fid_test_fault(const char *part);

#endif /* DPRO_REPLAY_FIDELITY_INT_H */
