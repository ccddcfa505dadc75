/* mpi_share.c: the transport of shared reading over MPI (see mpi_sim.h, mpisim_job_share,
 * and job.h, job_share). */
#define PR_FMT "mpi"
#include "config.h"

#include "mpi_sim.h"

#include <limits.h>
#include <mpi.h>
#include <stdlib.h>

/* The tag of the ranks' reads sent to process 0, and of what process 0 asks for. */
#define TAG_RANK 17
#define TAG_ASK 18

static int
share_gather(void *ctx, const void *buf, size_t len, void **all, size_t *all_len)
{
    (void)ctx;
    int np = 0, rc = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    int mine = len <= INT_MAX ? (int)len : 0, *counts = calloc((size_t)np, sizeof *counts),
        *displs = calloc((size_t)np, sizeof *displs);
    int ok = counts && displs && len <= INT_MAX;
    /* every process learns whether all can go on before the sizes travel */
    if (!mpisim_agree(ok))
        rc = -1;
    if (rc == 0)
        MPI_Allgather(&mine, 1, MPI_INT, counts, 1, MPI_INT, MPI_COMM_WORLD);
    long long total = 0;
    for (int p = 0; rc == 0 && p < np; p++) {
        displs[p] = (int)total;
        total += counts[p];
    }
    *all = NULL;
    *all_len = 0;
    if (rc == 0 && (total > INT_MAX || !(*all = malloc(total > 0 ? (size_t)total : 1))))
        ok = 0;
    if (rc == 0 && !mpisim_agree(ok))
        rc = -1;
    if (rc == 0) {
        MPI_Allgatherv(buf, mine, MPI_BYTE, *all, counts, displs, MPI_BYTE, MPI_COMM_WORLD);
        *all_len = (size_t)total;
    } else {
        free(*all);
        *all = NULL;
    }
    free(counts);
    free(displs);
    return rc;
}

static int
share_min(void *ctx, int v, int *out)
{
    (void)ctx;
    return MPI_Allreduce(&v, out, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : -1;
}

/* Whether this process's hand-over is to fail as out of memory would: the fault that
 * tests drive (DPRO_TEST_MPI_SEND_FAIL=P, P this process's number), since no input
 * makes one process alone run out of memory on demand. */
static int
send_fault(void)
{
    const char *v = getenv("DPRO_TEST_MPI_SEND_FAIL");
    int me = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    return v && *v && atoi(v) == me;
}

static int
share_send0(void *ctx, const void *buf, size_t len)
{
    (void)ctx;
    if (len > INT_MAX || send_fault())
        return -1;
    return MPI_Send(buf, (int)len, MPI_BYTE, 0, TAG_RANK, MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : -1;
}

static int
share_recv(void *ctx, int from, void **buf, size_t *len)
{
    (void)ctx;
    MPI_Status st;
    int n = 0;
    *buf = NULL;
    *len = 0;
    if (MPI_Probe(from, TAG_RANK, MPI_COMM_WORLD, &st) != MPI_SUCCESS ||
        MPI_Get_count(&st, MPI_BYTE, &n) != MPI_SUCCESS)
        return -1;
    *buf = malloc(n > 0 ? (size_t)n : 1);
    if (!*buf)
        return -1; /* the sender waits forever: out of memory on process 0 ends the job */
    MPI_Recv(*buf, n, MPI_BYTE, from, TAG_RANK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    *len = (size_t)n;
    return 0;
}

static int
share_ask(void *ctx, int to, int64_t what)
{
    (void)ctx;
    long long v = what;
    return MPI_Send(&v, 1, MPI_LONG_LONG, to, TAG_ASK, MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : -1;
}

static int
share_asked(void *ctx, int64_t *what)
{
    (void)ctx;
    long long v = -1;
    int rc =
        MPI_Recv(&v, 1, MPI_LONG_LONG, 0, TAG_ASK, MPI_COMM_WORLD, MPI_STATUS_IGNORE) == MPI_SUCCESS
            ? 0
            : -1;
    *what = v;
    return rc;
}

void
mpisim_job_share(job_share *sh, int me, int nprocs)
{
    *sh = (job_share){.me = me,
                      .nprocs = nprocs,
                      .gather = share_gather,
                      .min = share_min,
                      .send0 = share_send0,
                      .recv = share_recv,
                      .ask = share_ask,
                      .asked = share_asked};
}
