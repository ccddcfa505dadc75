/* search_mpi.c: the search shared over MPI (see search_mpi.h). */
#define PR_FMT "mpi"
#include "config.h"

#include "optimizer/search_mpi.h"

#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/mpi_sim.h"

static int
gather(void *ctx, const void *mine, size_t n, void *all)
{
    (void)ctx;
    if (n > INT_MAX)
        return -1;
    return MPI_Allgather(mine, (int)n, MPI_BYTE, all, (int)n, MPI_BYTE, MPI_COMM_WORLD) ==
                   MPI_SUCCESS
               ? 0
               : -1;
}

void
searchmpi_par(search_par *par, int me, int nprocs)
{
    *par = (search_par){.me = me, .nprocs = nprocs, .allgather = gather};
}

/* Broadcasts n bytes at p from process 0 (in pieces an int counts). */
static void
bcast(void *p, size_t n)
{
    for (size_t at = 0; at < n;) {
        size_t k = n - at < (size_t)1 << 30 ? n - at : (size_t)1 << 30;
        MPI_Bcast((char *)p + at, (int)k, MPI_BYTE, 0, MPI_COMM_WORLD);
        at += k;
    }
}

/* The sizes that travel first. */
typedef struct sizes {
    int32_t iter_first, iter_last, mem_rank, pad;
    uint64_t mem_bytes; /* the packed memory estimate (memest_pack), 0: none */
    uint64_t n_samples;
    char framework[SEARCHMPI_NAME_MAX];
} sizes;

int
searchmpi_share_analysis(replay *rp, memest *mem, int32_t *mem_rank, workload_options *wo,
                         char *framework)
{
    int me = 0, ok = 1;
    sizes h;
    void *packed = NULL;
    size_t packed_len = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    memset(&h, 0, sizeof h);
    if (me == 0) {
        h.iter_first = rp->iter_first;
        h.iter_last = rp->iter_last;
        h.mem_rank = *mem_rank;
        ok = *mem_rank < 0 || memest_pack(mem, &packed, &packed_len) == 0;
        h.mem_bytes = ok && *mem_rank >= 0 ? packed_len : 0;
        h.n_samples = wo->n_kernel_samples;
        snprintf(h.framework, sizeof h.framework, "%s", framework);
    }
    bcast(&h, sizeof h);
    if (me != 0) {
        rp->iter_first = h.iter_first;
        rp->iter_last = h.iter_last;
        *mem_rank = h.mem_rank;
        memset(mem, 0, sizeof *mem);
        packed = malloc(h.mem_bytes + 1);
        wo->kernel_samples = malloc(((size_t)h.n_samples + 1) * sizeof *wo->kernel_samples);
        ok = packed && wo->kernel_samples;
        memcpy(framework, h.framework, sizeof h.framework);
    }
    int rc = mpisim_agree(ok) ? 0 : -1;
    if (rc == 0) {
        bcast(&rp->model, sizeof rp->model);
        bcast(packed, h.mem_bytes);
        bcast(wo->kernel_samples, (size_t)h.n_samples * sizeof *wo->kernel_samples);
        if (me != 0) {
            wo->n_kernel_samples = (size_t)h.n_samples;
            ok = h.mem_bytes == 0 || memest_unpack(mem, packed, h.mem_bytes) == 0;
        }
        rc = mpisim_agree(ok) ? 0 : -1;
    }
    if (rc != 0 && me != 0) {
        memest_free(mem);
        free(wo->kernel_samples);
        wo->kernel_samples = NULL;
    }
    free(packed);
    return rc;
}
