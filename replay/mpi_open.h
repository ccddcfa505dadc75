/*
 * mpi_open.h: a job's traces opened by every process of an MPI job (prefix mpisim_), the
 * start the commands' --mpi share (dpro-replay, dpro-optimize).
 *
 * Each process reads its share of the rank files (job.h, job_options.share, over MPI:
 * mpisim_job_share); process 0 gathers them and prepares the replay (clock alignment,
 * iterations, graph, cost model) as a single process does, then runs the command's own
 * checks; every process agrees on going on, and process 0 hands the graph to the others
 * (mpisim_share_graph), which hold the graph alone.
 *
 * Built with MPI only (HAVE_MPI); without it mpisim_open is a stub that fails.
 */
#ifndef DPRO_REPLAY_MPI_OPEN_H
#define DPRO_REPLAY_MPI_OPEN_H

#include <string.h>

#include "job.h"
#include "replay.h"

/* The command's checks of the replay on process 0 (inputs.h: the traces read whole, the
 * output allowed...): 0 to go on, else not (the reason said by it). */
typedef int (*mpisim_check_fn)(void *ctx, replay *rp);

#ifdef HAVE_MPI

/* Opens the traces in dir with options *ro as process me of the nprocs of the MPI job
 * (mpisim_init done; every process must call it): ro->share is pointed at *sh, MPI's
 * transport, which must outlive the reading. On process 0 *rp receives the replay and
 * check (may be NULL) runs on it with ctx; on the others *rp holds the graph alone
 * (rp->graph, not finalized; the rest zeroed). A reading error is said by the process
 * that met it, which then ends every process of the job (mpisim_abort: the others may be
 * waiting for it in the reading's collectives) when there are others. Returns 0, or -1 when any
 * process cannot go on (every process returns -1; free rp with replay_close either way). */
int mpisim_open(const char *dir, replay_options *ro, job_share *sh, int me, int nprocs, replay *rp,
                mpisim_check_fn check, void *ctx);

#else

static inline int
mpisim_open(const char *dir, replay_options *ro, job_share *sh, int me, int nprocs, replay *rp,
            mpisim_check_fn check, void *ctx)
{
    (void)dir;
    (void)ro;
    (void)sh;
    (void)me;
    (void)nprocs;
    (void)check;
    (void)ctx;
    memset(rp, 0, sizeof *rp);
    return -1;
}

#endif

#endif
