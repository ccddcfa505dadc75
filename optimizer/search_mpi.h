/*
 * search_mpi.h: the search shared over the processes of an MPI job (prefix searchmpi_),
 * for `mpirun -n P dpro-optimize --mpi DIR`.
 *
 * Every process holds the replay's graph (replay/mpi_open.h: read in shares, prepared on
 * process 0, handed out); what the workload analysis takes from the replay besides the
 * graph (the compared iterations, the cost model, the memory estimate, the kernel samples,
 * the framework advised for) comes from process 0 (searchmpi_share_analysis), so that
 * every process analyses the same workload and runs the same search, its simulations
 * dealt out in rounds (search.h, search_par; searchmpi_par is MPI's transport).
 *
 * Built with MPI only (configure --with-mpi, HAVE_MPI); without it the functions below are
 * stubs, so that callers carry no #ifdef.
 */
#ifndef DPRO_OPTIMIZER_SEARCH_MPI_H
#define DPRO_OPTIMIZER_SEARCH_MPI_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "optimizer/memest.h"
#include "optimizer/search.h"
#include "optimizer/workload.h"
#include "replay/replay.h"

/* The longest framework name handed out (with its NUL). */
#define SEARCHMPI_NAME_MAX 64

#ifdef HAVE_MPI

/* Fills par with MPI's transport (MPI_Allgather over MPI_COMM_WORLD) for process me of
 * nprocs. */
void searchmpi_par(search_par *par, int me, int nprocs);

/* Hands from process 0 to the others what the workload analysis takes from the replay
 * besides the graph: rp->iter_first, rp->iter_last and rp->model; *mem and *mem_rank (the
 * memory estimate, profile_estimate_memory, as memest_pack packs it; none when
 * *mem_rank < 0); wo->kernel_samples
 * and wo->n_kernel_samples; framework (the name of the framework advised for, at most
 * SEARCHMPI_NAME_MAX bytes with its NUL). On process 0 they are read, on the others
 * written (mem's arrays and the samples malloc'd: memest_free, free). Every process must
 * call it. Returns 0, or -1 when out of memory on any process (all return -1). */
int searchmpi_share_analysis(replay *rp, memest *mem, int32_t *mem_rank, workload_options *wo,
                             char *framework);

#else

static inline void
searchmpi_par(search_par *par, int me, int nprocs)
{
    *par = (search_par){.me = me, .nprocs = nprocs};
}

static inline int
searchmpi_share_analysis(replay *rp, memest *mem, int32_t *mem_rank, workload_options *wo,
                         char *framework)
{
    (void)rp;
    (void)mem;
    (void)mem_rank;
    (void)wo;
    (void)framework;
    return -1;
}

#endif

#endif
