/*
 * sim_int.h: the simulation loop of sim.c in steps, for the distributed simulation of
 * mpi_sim.c (internal to replay/).
 *
 * sim_run is sim_begin + sim_drain + sim_tally over the whole graph. A partitioned run
 * simulates only the ranks own[] marks: nodes of other ranks are never started here, a
 * collective group is handed over (grp_ready) once the participants simulated here have
 * all arrived instead of starting its transfer, and a node finished here whose edge
 * successor is simulated elsewhere is listed in sent[]. The caller exchanges those with
 * the other partitions and feeds back what they say with sim_release_group and
 * sim_release_edge, then drains again.
 *
 * Ties are broken by node id, never by processing order, so that any partition of the
 * graph gives the single run's times and causes: a group's last participant is the
 * lowest node among those arriving last, the last node of the run the lowest among those
 * ending last.
 */
#ifndef DPRO_REPLAY_SIM_INT_H
#define DPRO_REPLAY_SIM_INT_H

#include "sim.h"

typedef struct sim_state {
    dfg *g;
    sim_result *r;
    int32_t *stack;
    int32_t top;
    /* partition (NULL own: the whole graph runs here) */
    const uint8_t *own;        /* per rank: simulated here */
    const int32_t *grp_local;  /* per group: participants simulated here */
    const uint8_t *remote_out; /* per node: has an edge successor simulated elsewhere */
    int32_t *grp_ready;        /* groups whose local participants have all arrived */
    int32_t n_grp_ready;
    int32_t *sent; /* finished nodes with remote_out set, in finishing order */
    int32_t n_sent;
} sim_state;

/* Finalizes g and sizes r for it. Returns 0 or -1 (out of memory). */
int sim_prepare(dfg *g, sim_result *r);

/* Initialises the run of s (g, r, and for a partition own, grp_local, remote_out,
 * grp_ready and sent, each sized for g, set by the caller) and starts the first calls
 * of every host thread simulated here. */
void sim_begin(sim_state *s);

/* Runs every node that can run until none can. */
void sim_drain(sim_state *s);

/* Group q's last participant, node `last`, arrived at `arrival` (over every partition):
 * its transfer starts and the participants simulated here end grp_dur later. */
void sim_release_group(sim_state *s, int32_t q, int64_t arrival, int32_t last);

/* Node n, simulated elsewhere, ended at t: its edge successors simulated here are
 * released. */
void sim_release_edge(sim_state *s, int32_t n, int64_t t);

/* Sets makespan, last_node, n_unfinished and first_unfinished of r from its end times. */
void sim_tally(const dfg *g, sim_result *r);

#endif
