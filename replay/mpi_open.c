/* mpi_open.c: a job's traces opened by every process of an MPI job (see mpi_open.h). */
#define PR_FMT "mpi"
#include "config.h"

#include "mpi_open.h"

#include <string.h>

#include "dpro_log.h"
#include "mpi_sim.h"

int
mpisim_open(const char *dir, replay_options *ro, job_share *sh, int me, int nprocs, replay *rp,
            mpisim_check_fn check, void *ctx)
{
    char err[2048];
    int64_t bytes = 0;
    int ok;
    memset(rp, 0, sizeof *rp);
    mpisim_job_share(sh, me, nprocs);
    ro->share = sh;
    if (me != 0)
        ok = replay_read_share(dir, ro, err, sizeof err) == 0;
    else
        ok = replay_open(dir, ro, rp, err, sizeof err) == 0;
    if (!ok && nprocs > 1) {
        /* the others may be waiting for this one in a collective or a message of the
         * reading: end them all */
        pr_err("process %d of %d: %s", me, nprocs, err);
        mpisim_abort(1);
    } else if (!ok) {
        pr_err("%s", err);
    } else if (me == 0 && check)
        ok = check(ctx, rp) == 0;
    ok = mpisim_agree(ok); /* every process stops when one cannot go on */
    int rc = ok ? 0 : -1;
    if (rc == 0 && mpisim_share_graph(&rp->graph, &bytes) != 0) {
        pr_err("out of memory sharing the graph");
        rc = -1;
    }
    if (rc == 0 && me != 0)
        pr_info("graph received from process 0: %d nodes, %lld edges, %lld bytes",
                rp->graph.n_nodes, (long long)rp->graph.n_edges, (long long)bytes);
    return rc;
}
