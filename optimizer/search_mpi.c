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
    int32_t iter_first, iter_last, mem_rank, n_layers, n_static, n_held;
    uint64_t n_samples;
    char framework[SEARCHMPI_NAME_MAX];
} sizes;

/* On a process other than 0: room for what h says is coming. Returns 1 or 0. */
static int
make_room(const sizes *h, memest *mem, workload_options *wo)
{
    size_t L = (size_t)h->n_layers + 1, S = (size_t)h->n_static + 1;
    mem->act_bytes = malloc(L * sizeof *mem->act_bytes);
    mem->act_time = malloc(L * sizeof *mem->act_time);
    mem->static_each = malloc(S * sizeof *mem->static_each);
    mem->held_bytes = malloc(((size_t)h->n_held + 1) * sizeof *mem->held_bytes);
    wo->kernel_samples = malloc(((size_t)h->n_samples + 1) * sizeof *wo->kernel_samples);
    return mem->act_bytes && mem->act_time && mem->static_each && mem->held_bytes &&
           wo->kernel_samples;
}

int
searchmpi_share_analysis(replay *rp, memest *mem, int32_t *mem_rank, workload_options *wo,
                         char *framework)
{
    int me = 0, ok = 1;
    sizes h;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    memset(&h, 0, sizeof h);
    if (me == 0) {
        h.iter_first = rp->iter_first;
        h.iter_last = rp->iter_last;
        h.mem_rank = *mem_rank;
        h.n_layers = *mem_rank >= 0 ? mem->n_layers : 0;
        h.n_static = *mem_rank >= 0 ? mem->n_static : 0;
        h.n_held = *mem_rank >= 0 ? mem->n_held : 0;
        h.n_samples = wo->n_kernel_samples;
        snprintf(h.framework, sizeof h.framework, "%s", framework);
    }
    bcast(&h, sizeof h);
    if (me != 0) {
        rp->iter_first = h.iter_first;
        rp->iter_last = h.iter_last;
        *mem_rank = h.mem_rank;
        memset(mem, 0, sizeof *mem);
        ok = make_room(&h, mem, wo);
        memcpy(framework, h.framework, sizeof h.framework);
    }
    int rc = mpisim_agree(ok) ? 0 : -1;
    if (rc == 0) {
        memest keep = *mem; /* the arrays stay this process's own */
        bcast(&rp->model, sizeof rp->model);
        bcast(mem, sizeof *mem);
        if (me != 0) {
            mem->act_bytes = keep.act_bytes;
            mem->act_time = keep.act_time;
            mem->static_each = keep.static_each;
            mem->held_bytes = keep.held_bytes;
            wo->n_kernel_samples = (size_t)h.n_samples;
        }
        bcast(mem->act_bytes, (size_t)h.n_layers * sizeof *mem->act_bytes);
        bcast(mem->act_time, (size_t)h.n_layers * sizeof *mem->act_time);
        bcast(mem->static_each, (size_t)h.n_static * sizeof *mem->static_each);
        bcast(mem->held_bytes, (size_t)h.n_held * sizeof *mem->held_bytes);
        bcast(wo->kernel_samples, (size_t)h.n_samples * sizeof *wo->kernel_samples);
    }
    if (rc != 0 && me != 0) {
        memest_free(mem);
        free(wo->kernel_samples);
        wo->kernel_samples = NULL;
    }
    return rc;
}
