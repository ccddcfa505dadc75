/*
 * test_optimizer_outliers: the search over a profile with one outlier iteration
 * (search.h, profile_outlier_iterations), on the synthetic job (2 ranks, 10 iterations, the
 * 8 from the second compared, 200 kernels and 4 buckets of 1 MiB an iteration) whose
 * measured times are those its graph simulates, with a launch call's gap on one rank
 * stretched to a stall:
 *   - the rule: one 20 ms stall in one iteration is set aside, alone, naming the rank
 *     that stalled (rank 1, or rank 0 when it is rank 0's: the other waits as long for it
 *     at the next collective); none without it, nor a stall under half the median
 *     iteration, nor stalls in 3 of the 8 iterations (not rare: the steady state has
 *     them);
 *   - the search on a device-bound job (20 us kernels, launches of 4 us and 2 us gaps):
 *     the capture of the step saves about nothing in the steady state, but its model drops
 *     the stalled launch's gap with the launches it captures, so ranked by the mean over
 *     every iteration it is advised at 1.58x; ranked by the steady state, nothing is
 *     advised, as on the job without the stall (fails without the outliers set aside);
 *   - the search on a host-bound job (5 us kernels, launches of 15 us and 2 us gaps): the
 *     capture is advised with the stall and without it, at the same steady speedup (within
 *     1 %), while the speedup of the means (every iteration) is over 1.5 times that; the
 *     baseline's mean is the measured one.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dprotrace.h"
#include "optimizer/profile.h"
#include "optimizer/search.h"
#include "optimizer/strategy.h"
#include "optimizer/workload.h"
#include "tests/optimizer/optjobs.h"
#include "tests/replay/synth.h"
#include "tests/unit/testutil.h"

#define STALL_OP 90 /* the launch of its iteration whose gap stalls */

/* The synthetic job (see above) of kernels of kernel_ns and launch calls of launch_ns,
 * rank stall_rank's gap before launch STALL_OP of iterations [stall_first, stall_last] set
 * to stall_ns (none when stall_ns is 0), analysed into w over iterations 1-8; res holds
 * the baseline's simulation, m the collective model (w keeps it). */
static void
stalled_job(int64_t kernel_ns, int64_t launch_ns, int32_t stall_rank, int stall_first,
            int stall_last, int64_t stall_ns, costmodel *m, dfg *g, workload *w, sim_result *res)
{
    synth_params sp;
    synth_defaults(&sp);
    sp.ranks = 2;
    sp.iterations = 10;
    sp.ops_per_iter = 200;
    sp.buckets = 4;
    sp.bucket_bytes = 1 << 20;
    sp.hook_calls = 2;
    sp.kernel_ns = kernel_ns;
    sp.launch_ns = launch_ns;
    fit_model(m);
    REQUIRE(synth_dfg(&sp, g) == 0);
    int32_t nm = dfg_intern(g, "cudaLaunchKernel");
    for (int32_t q = 0; stall_ns > 0 && q < g->n_res; q++) {
        int32_t k = -1; /* launches of the thread in order: the setup, then iteration-major */
        if (g->res_kind[q] != DFG_RES_THREAD || g->res_rank[q] != stall_rank)
            continue;
        for (int32_t h = g->res_first[q]; h >= 0; h = g->next_on_res[h]) {
            if (g->name[h] != nm || k++ < 0)
                continue;
            int32_t it = k / sp.ops_per_iter;
            if (it >= stall_first && it <= stall_last && k % sp.ops_per_iter == STALL_OP)
                g->gap[h] = stall_ns;
        }
    }
    memset(res, 0, sizeof *res);
    REQUIRE(dfg_finalize(g) == 0 && sim_run(g, res) == 0);
    for (int32_t n = 0; n < g->n_nodes; n++) { /* the measured times: those simulated */
        g->mstart[n] = res->start[n];
        REQUIRE(dfg_set_mend(g, n, res->end[n]) == 0);
    }
    REQUIRE(workload_analyze(w, g, res, 1, 8, m, NULL, -1, NULL) == 0);
}

/* The outliers profile_outlier_iterations finds in the device-bound job with a stall of
 * stall_ns on rank stall_rank in iterations [first, last]; aside and out as it fills them
 * (8 compared). */
static int32_t
outliers_of(int32_t stall_rank, int first, int last, int64_t stall_ns, uint8_t *aside,
            profile_outlier *out)
{
    dfg g;
    workload w;
    sim_result res;
    costmodel m;
    stalled_job(20 * US, 4 * US, stall_rank, first, last, stall_ns, &m, &g, &w, &res);
    int32_t n = profile_outlier_iterations(&w, &res, aside, out);
    workload_free(&w);
    sim_result_free(&res);
    dfg_free(&g);
    return n;
}

static void
test_outlier_rule(void)
{
    uint8_t aside[8];
    profile_outlier out[8];
    CHECK_EQ_U(outliers_of(1, 5, 5, 20000 * US, aside, out), 1);
    CHECK_EQ_U(out[0].iteration, 4); /* trace iteration 5, the 4th after the first compared */
    CHECK_EQ_U(out[0].rank, 1);      /* rank 0 waits as long at the next collective */
    for (int i = 0; i < 8; i++)
        CHECK_EQ_U(aside[i], i == 4);
    CHECK(out[0].iter_ns > 20000 * US && fabs(out[0].median_ns - 4025 * US) < 50 * US);
    CHECK(out[0].mad_ns < 100 * US);
    CHECK_EQ_U(outliers_of(0, 5, 5, 20000 * US, aside, out), 1);
    CHECK_EQ_U(out[0].rank, 0);
    CHECK(out[0].iter_ns > 20000 * US);
    CHECK_EQ_U(outliers_of(1, 5, 5, 0, aside, out), 0);
    CHECK_EQ_U(outliers_of(1, 5, 5, 1500 * US, aside, out), 0);  /* under half the median */
    CHECK_EQ_U(outliers_of(1, 3, 5, 20000 * US, aside, out), 0); /* 3 of 8: not rare */
    for (int i = 0; i < 8; i++)
        CHECK_EQ_U(aside[i], 0);
}

/* The search (seed 1, 200 evaluations, 3 winners) of the job of kernel_ns and launch_ns
 * with a 20 ms stall in iteration 5 (stalled) or without it, into *sr; *measured_ns the
 * job's measured mean iteration. */
static void
search_job(int64_t kernel_ns, int64_t launch_ns, int stalled, search_result *sr,
           double *measured_ns)
{
    dfg g;
    workload w;
    sim_result res;
    costmodel m;
    stalled_job(kernel_ns, launch_ns, 1, 5, 5, stalled ? 20000 * US : 0, &m, &g, &w, &res);
    search_options o;
    memset(&o, 0, sizeof o);
    o.seed = 1;
    o.max_evals = 200;
    o.top_k = 3;
    CHECK(search_run(&w, &o, sr) == 0);
    *measured_ns = w.measured_iter_ns;
    CHECK(w.iter_aside == NULL); /* the search clears it */
    workload_free(&w);
    sim_result_free(&res);
    dfg_free(&g);
}

static void
test_search_device_bound(void)
{
    search_result quiet, stalled;
    double mq, ms;
    search_job(20 * US, 4 * US, 0, &quiet, &mq);
    search_job(20 * US, 4 * US, 1, &stalled, &ms);
    CHECK_EQ_U(quiet.n_aside, 0);
    CHECK_EQ_U(quiet.n_top, 0);
    CHECK(quiet.baseline.steady_ns == quiet.baseline.eval.iter_ns);
    CHECK_EQ_U(stalled.n_aside, 1);
    CHECK_EQ_U(stalled.n_top, 0); /* the capture credited with the stall: not advised */
    for (int32_t i = 0; i < stalled.n_top; i++)
        fprintf(stderr,
                "advised on the stalled device-bound job: capture %d, fusion %d, "
                "bucket cap %d: %.1f us (%.3fx)\n",
                stalled.top[i].plan.cuda_graph, stalled.top[i].plan.fuse,
                stalled.top[i].plan.bucket_cap, stalled.top[i].eval.iter_ns / US,
                stalled.baseline.eval.iter_ns / stalled.top[i].eval.iter_ns);
    /* the mean is the measured one, the steady state the quiet job's */
    CHECK(fabs(stalled.baseline.eval.iter_ns - ms) < 1);
    CHECK(stalled.baseline.eval.iter_ns > 1.5 * stalled.baseline.steady_ns);
    CHECK(fabs(stalled.baseline.steady_ns / quiet.baseline.eval.iter_ns - 1) < 0.005);
    search_result_free(&quiet);
    search_result_free(&stalled);
}

static void
test_search_host_bound(void)
{
    search_result quiet, stalled;
    double mq, ms;
    search_job(5 * US, 15 * US, 0, &quiet, &mq);
    search_job(5 * US, 15 * US, 1, &stalled, &ms);
    CHECK_EQ_U(stalled.n_aside, 1);
    REQUIRE(quiet.n_top > 0 && stalled.n_top > 0);
    CHECK(quiet.top[0].plan.cuda_graph && stalled.top[0].plan.cuda_graph);
    double x_quiet = quiet.baseline.steady_ns / quiet.top[0].steady_ns;
    double x_steady = stalled.baseline.steady_ns / stalled.top[0].steady_ns;
    double x_mean = stalled.baseline.eval.iter_ns / stalled.top[0].eval.iter_ns;
    CHECK(x_quiet > 2 && fabs(x_steady / x_quiet - 1) < 0.01);
    CHECK(x_mean > 1.5 * x_steady);
    CHECK(fabs(stalled.baseline.eval.iter_ns - ms) < 1);
    CHECK(fabs(quiet.top[0].steady_ns - quiet.top[0].eval.iter_ns) < 1e-9);
    search_result_free(&quiet);
    search_result_free(&stalled);
}

int
main(void)
{
    test_outlier_rule();
    test_search_device_bound();
    test_search_host_bound();
    return tests_done();
}
