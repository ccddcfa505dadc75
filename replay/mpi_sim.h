/*
 * mpi_sim.h: the replay's simulation as an MPI job (prefix mpisim_), for
 * `mpirun -n P dpro-replay --mpi DIR`.
 *
 * The ranks the graph holds nodes of (every rank, or a folded graph's representatives)
 * are shared out in contiguous shares: process p of P simulates the k-th of n such ranks
 * when k * P / n == p (uneven when P does not divide n). The simulation is conservative: each
 * process runs its ranks' nodes as far as their dependencies allow (sim_int.h), which stops at
 * collectives with participants on other processes and at edges from other processes'
 * nodes. Then every process hands out, in one MPI_Allgatherv, the groups whose
 * participants it holds have all arrived (their count, the latest arrival and its node)
 * and the ends of its nodes that other processes' nodes wait for; a group starts when the
 * counts over every process reach its members, at the latest arrival (ties: the lowest
 * node), wherever that participant is simulated. Rounds repeat until a round hands out
 * nothing. The answer is the single-process simulation's, node for node (sim.h: ties
 * never depend on processing order); process 0 receives the whole timeline at the end
 * (MPI_Reduce), the others keep their own nodes' times.
 *
 * The trace files are read in shares (job.h, job_options.share; mpisim_job_share is the
 * transport): each process reads the events of its share of the ranks (the same
 * shares as the simulation's, over the present ranks) and folds them while reading;
 * process 0 gathers them, one message a rank, and classifies them as the single
 * process does, then prepares the replay alone (clock alignment, iterations, graph, cost
 * model: they are taken over every rank at once; the alignment's samples, one a
 * collective or send/recv, and the rank's iterations come with each rank's read, taken
 * where its events were read, job_rank.align and .iters) and hands the built graph to the
 * others (mpisim_share_graph), which hold the graph alone. The trace files are opened in
 * shares too (their meta gathered): each process opens only its share's files, and
 * process 0, which builds the graph, receives the other ranks' readers from the
 * processes that opened them (job_share_readers).
 *
 * Built with MPI only (configure --with-mpi, HAVE_MPI); without it the functions below
 * are stubs that say MPI is not built, so callers carry no #ifdef.
 */
#ifndef DPRO_REPLAY_MPI_SIM_H
#define DPRO_REPLAY_MPI_SIM_H

#include <stdint.h>
#include <stdlib.h>

#include "dfg.h"
#include "job.h"
#include "sim.h"

/* What a distributed simulation did. */
typedef struct mpisim_stats {
    int32_t processes;
    int32_t ranks_here;   /* ranks with nodes this process simulated */
    int64_t nodes_here;   /* their live nodes */
    int64_t rounds;       /* exchanges (MPI_Allgatherv) */
    int64_t group_msgs;   /* group arrivals handed out, over all processes */
    int64_t edge_msgs;    /* cross-process edge ends handed out, over all processes */
    int64_t local_groups; /* groups started without an exchange (all participants on one
                           * process), over all processes */
} mpisim_stats;

#ifdef HAVE_MPI

/* 1: --mpi is built. */
static inline int
mpisim_built(void)
{
    return 1;
}

/* Starts MPI (MPI_Init with the command line) and gives this process's number and the
 * process count. Returns 0, or -1 when MPI cannot start (it then says why). */
int mpisim_init(int *argc, char ***argv, int *me, int *nprocs);

/* Ends MPI (MPI_Finalize). */
void mpisim_finalize(void);

/* The smallest value of ok over every process (MPI_Allreduce MIN): processes that
 * loaded the job agree on going on, or all stop. */
int mpisim_agree(int ok);

/* Ends every process of the MPI job with status (MPI_Abort), for a failure the others
 * may be waiting on in a collective or a message (shared reading: a process that cannot
 * go on leaves the others no way to learn it): the caller has said what failed. Does not
 * return. */
void mpisim_abort(int status) __attribute__((noreturn));

/* Hands the graph from process 0 to the others (MPI_Bcast of its arrays and names), so
 * that process 0 alone reads the traces and builds it: on process 0 g is the built graph
 * (left as it is), on the others an empty (zeroed) graph that becomes its copy, not
 * finalized. *bytes (may be NULL) receives the bytes handed to each process. Every process
 * must call it. Returns 0, or -1 when out of memory on any process (all return -1; the
 * others' copies are then freed). */
int mpisim_share_graph(dfg *g, int64_t *bytes);

/* Fills sh with MPI's transport for shared reading (job.h, job_share: the trace files
 * read in shares, gathered on process 0), for process me of nprocs of MPI_COMM_WORLD. */
void mpisim_job_share(job_share *sh, int me, int nprocs);

/* Simulates g (the same graph on every process, finalized here) into res (zeroed before
 * first use, sim_result_free), distributed as the top of this file says; every process
 * must call it. On process 0 res then holds the whole run as sim_run would give it; on
 * the others only their own nodes' times. st (may be NULL) receives the counts.
 * Returns 0, or -1 when out of memory on any process (all return -1). */
int mpisim_run(dfg *g, sim_result *res, mpisim_stats *st);

#else

static inline int
mpisim_built(void)
{
    return 0;
}

static inline int
mpisim_init(int *argc, char ***argv, int *me, int *nprocs)
{
    (void)argc;
    (void)argv;
    *me = 0;
    *nprocs = 1;
    return -1;
}

static inline void
mpisim_finalize(void)
{
}

static inline int
mpisim_agree(int ok)
{
    return ok;
}

static inline void __attribute__((noreturn)) mpisim_abort(int status)
{
    exit(status);
}

static inline int
mpisim_share_graph(dfg *g, int64_t *bytes)
{
    (void)g;
    (void)bytes;
    return -1;
}

static inline void
mpisim_job_share(job_share *sh, int me, int nprocs)
{
    *sh = (job_share){.me = me, .nprocs = nprocs};
}

static inline int
mpisim_run(dfg *g, sim_result *res, mpisim_stats *st)
{
    (void)g;
    (void)res;
    (void)st;
    return -1;
}

#endif

#endif
