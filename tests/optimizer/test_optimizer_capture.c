/*
 * test_optimizer_capture: where a captured step's graph launch stands (WL_CAPTURE_STEP),
 * on a PyTorch-like eager step whose iterations are cut two ways: at the step's closing
 * synchronisation and at a kernel inside the step (as a cut found from the kernels'
 * period can fall).
 *   - the job: one rank, one thread; per step: the optimizer step of the step before (a
 *     launch), zero_grad (a memset), the batch's pageable copy (cudaMemcpyAsync) and its
 *     cudaStreamSynchronize, in steps 1 and 2 DDP's timing events waited for
 *     (cudaEventSynchronize), the forward (two launches) and cudaDeviceSynchronize;
 *   - a step captured with torch.cuda.graph copies its input, then launches the graph,
 *     then synchronises: the graph launch's stand-in is the forward's first launch, one a
 *     step, whichever way the iterations are cut (it was the first launch of each
 *     iteration: the optimizer step's, before the copy, and with an iteration cut
 *     elsewhere than at the synchronisation two launches in some steps, none in others).
 */
#include <stdlib.h>
#include <string.h>

#include "optimizer/strategy.h"
#include "optimizer/workload.h"
#include "tests/unit/testutil.h"

#define STEPS 7
#define US 1000

typedef struct step_job {
    int32_t opt[STEPS], fwd[STEPS], sync[STEPS]; /* the step's launches and its closing call */
    int32_t fwd_kernel[STEPS];                   /* the forward's first kernel */
    int32_t opt_kernel[STEPS], copy[STEPS];      /* the optimizer's kernel, the input's copy */
} step_job;

/* Adds host call `name` of duration dur_us on thread th; returns it. */
static int32_t
call(dfg *g, int32_t th, const char *name, int64_t dur_us)
{
    int32_t h = dfg_add_node(g, DFG_HOST, th, dfg_intern(g, name));
    g->dur[h] = dur_us * US;
    return h;
}

/* Adds device op `name` of kind on stream st launched by h; returns it. */
static int32_t
device(dfg *g, int32_t st, int kind, const char *name, int64_t dur_us, int32_t h)
{
    int32_t d = dfg_add_node(g, kind, st, dfg_intern(g, name));
    g->dur[d] = dur_us * US;
    g->launch[d] = h;
    dfg_set_lat(g, d, 2 * US);
    return d;
}

/* Builds the job (the file's comment); its iterations cut at the closing
 * synchronisations (at_kernel 0) or at the forward's first kernel (1); with
 * blocking_copy, a blocking host-to-device copy (cudaMemcpy) follows each step's input
 * copy. Returns 0, -1. */
static int
build_step_job(dfg *g, step_job *j, int at_kernel, int blocking_copy)
{
    if (dfg_init(g, 1) != 0)
        return -1;
    int32_t th = dfg_add_resource(g, DFG_RES_THREAD, 0, 1, dfg_intern(g, "python"));
    int32_t st = dfg_add_resource(g, DFG_RES_STREAM, 0, 7, dfg_intern(g, "stream 7"));
    int32_t bounds[STEPS], last = -1, rc = 0;
    for (int s = 0; s < STEPS && rc == 0; s++) {
        j->opt[s] = call(g, th, "__cudaLaunchKernel", 5);
        int32_t k = device(g, st, DFG_KERNEL, "ForeachBinaryOpList", 20, j->opt[s]);
        j->opt_kernel[s] = k;
        device(g, st, DFG_MEMSET, "memset", 2, call(g, th, "cudaMemsetAsync", 3));
        j->copy[s] = call(g, th, "cudaMemcpyAsync", 5);
        int32_t c = device(g, st, DFG_MEMCPY, "memcpy HtoD", 5, j->copy[s]);
        if (blocking_copy) {
            int32_t b = call(g, th, "cudaMemcpy", 5);
            g->flags[b] |= DFG_F_BLOCKING;
            rc |= dfg_add_edge(g, device(g, st, DFG_MEMCPY, "memcpy HtoD", 5, b), b);
        }
        int32_t s1 = call(g, th, "cudaStreamSynchronize", 2);
        g->flags[s1] |= DFG_F_BLOCKING;
        rc |= dfg_add_edge(g, c, s1);
        for (int e = 0; (s == 1 || s == 2) && e < 2; e++) {
            int32_t es = call(g, th, "cudaEventSynchronize", 1);
            g->flags[es] |= DFG_F_BLOCKING;
            rc |= dfg_add_edge(g, k, es);
        }
        j->fwd[s] = call(g, th, "cudaLaunchKernel", 5);
        j->fwd_kernel[s] = device(g, st, DFG_KERNEL, "gemm", 50, j->fwd[s]);
        last = device(g, st, DFG_KERNEL, "gemm", 50, call(g, th, "__cudaLaunchKernel", 5));
        j->sync[s] = call(g, th, "cudaDeviceSynchronize", 10);
        g->flags[j->sync[s]] |= DFG_F_BLOCKING;
        rc |= dfg_add_edge(g, last, j->sync[s]);
        bounds[s] = at_kernel ? j->fwd_kernel[s] : j->sync[s];
    }
    if (rc != 0 || dfg_set_iterations(g, 0, bounds, STEPS) != 0)
        return -1;
    return dfg_finalize(g);
}

/* The graph launches of the job cut either way: the forward's first launch of each step
 * holding a call of the compared iterations, nothing else; the optimizer step's launch
 * a step call. */
static void
test_graph_launch_placement(void)
{
    for (int at_kernel = 0; at_kernel <= 1; at_kernel++) {
        dfg g;
        step_job j;
        REQUIRE(build_step_job(&g, &j, at_kernel, 0) == 0);
        workload w;
        sim_result res;
        memset(&res, 0, sizeof res);
        REQUIRE(workload_analyze(&w, &g, &res, 1, 3, NULL, NULL, -1, NULL) == 0);
        CHECK(w.main_thread[0] >= 0);
        int steps = 0, fwd = 0, opt_kept = 0;
        for (int s = 0; s < STEPS; s++) {
            steps += w.iter[j.fwd[s]] >= 0;
            opt_kept += w.iter[j.opt[s]] >= 0 && !w.capture.step_call[j.opt[s]];
        }
        for (int32_t i = 0; i < w.capture.n_graph_launch; i++)
            for (int s = 0; s < STEPS; s++)
                fwd += w.capture.graph_launch[i] == j.fwd[s];
        CHECK(steps >= 3);
        CHECK_EQ_U(w.capture.n_graph_launch, steps);
        CHECK_EQ_U(fwd, steps);
        CHECK_EQ_U(opt_kept, 0);
        workload_free(&w);
        sim_result_free(&res);
        dfg_free(&g);
    }
}

/* The captured step's median (ns) of build_step_job's job (with blocking_copy as there),
 * cut at its synchronisations, with 200 us of Python before each input copy (the batch's
 * making) and an optimizer kernel of 100 us; 0 when the evaluation fails. */
static int64_t
captured_step_ns(int blocking_copy)
{
    dfg g;
    step_job j;
    REQUIRE(build_step_job(&g, &j, 0, blocking_copy) == 0);
    for (int s = 0; s < STEPS; s++) {
        CHECK(dfg_set_gap(&g, j.copy[s], 200 * US) == 0);
        CHECK(dfg_set_dur(&g, j.opt_kernel[s], 100 * US) == 0);
    }
    workload w;
    sim_result res;
    memset(&res, 0, sizeof res);
    REQUIRE(workload_analyze(&w, &g, &res, 1, 3, NULL, NULL, -1, NULL) == 0);
    strategy_plan p;
    strategy_plan_baseline(&p);
    p.cuda_graph = 1;
    strategy_eval e;
    memset(&e, 0, sizeof e);
    int rc = strategy_evaluate(&w, &p, &res, &e);
    CHECK(rc == 0);
    workload_free(&w);
    sim_result_free(&res);
    dfg_free(&g);
    return rc == 0 ? e.median_ns : 0;
}

/* The eager step's optimizer step and zero_grad run on the device while the host makes
 * the batch; the captured step runs them in the graph, after its input's copy (and the
 * forward's 100 us of kernels after them): at least 200 + 100 + 100 us a step. The plan
 * that ran them during the Python predicted 317 us. */
static void
test_step_after_input(void)
{
    int64_t step = captured_step_ns(0);
    CHECK(step >= 400 * US && step < 440 * US);
}

/* With a blocking copy after each input copy, the copy nearest the graph launch waits for
 * the device, so no input copy is found (the walk stops there, not at the older
 * asynchronous copy) and the step's optimizer work stays where the eager loop ran it:
 * under 400 us a step, as the plan without the rule (434 us when the walk went on). */
static void
test_blocking_copy_stops_walk(void)
{
    int64_t step = captured_step_ns(1);
    printf("blocking copy: captured step %.1f us\n", (double)step / US);
    CHECK(step > 0 && step < 400 * US);
}

/* Builds a host-bound step woken by a thread outside it: per step on the main thread the
 * closing cudaDeviceSynchronize and three kernel launches (kernels of 50, 30, 30 us); a
 * watchdog thread polls an event (cudaEventQuery) every 1 ms, and each step's second
 * launch was woken by its poll (the main thread's Python before that launch ended with
 * the poll in the trace: build_wakeup.c infers such an edge; every other launch a queued
 * one, whose wake-up stands on a "(wake-up)" node). The baseline steps at the
 * watchdog's pace; iterations cut at the synchronisations. Returns 0, -1. */
static int
build_watchdog_job(dfg *g)
{
    if (dfg_init(g, 1) != 0)
        return -1;
    int32_t mt = dfg_add_resource(g, DFG_RES_THREAD, 0, 1, dfg_intern(g, "python"));
    int32_t wt = dfg_add_resource(g, DFG_RES_THREAD, 0, 2, dfg_intern(g, "watchdog"));
    int32_t st = dfg_add_resource(g, DFG_RES_STREAM, 0, 7, dfg_intern(g, "stream 7"));
    int32_t sync[STEPS + 1], poll[STEPS], last = -1, rc = 0;
    for (int s = 0; s < STEPS; s++) {
        poll[s] = call(g, wt, "cudaEventQuery", 5);
        rc |= dfg_set_gap(g, poll[s], (s == 0 ? 500 : 995) * US);
    }
    for (int s = 0; s <= STEPS && rc == 0; s++) {
        sync[s] = call(g, mt, "cudaDeviceSynchronize", 1);
        g->flags[sync[s]] |= DFG_F_BLOCKING;
        if (last >= 0)
            rc |= dfg_add_edge(g, last, sync[s]);
        if (s == STEPS)
            break;
        device(g, st, DFG_KERNEL, "gemm", 50, call(g, mt, "cudaLaunchKernel", 5));
        int32_t woken = call(g, mt, "cudaLaunchKernel", 5);
        device(g, st, DFG_KERNEL, "gemm", 30, woken);
        if (s % 2)
            g->flags[woken] |= DFG_F_QUEUED; /* its wake-up on a "(wake-up)" node before it */
        rc |= dfg_add_wakeup(g, poll[s], woken, 10 * US);
        last = device(g, st, DFG_KERNEL, "gemm", 30, call(g, mt, "cudaLaunchKernel", 5));
    }
    if (rc != 0 || dfg_set_iterations(g, 0, sync, STEPS + 1) != 0)
        return -1;
    return dfg_finalize(g);
}

/* The step captured whole runs none of the Python the watchdog's polls woke: the
 * captured step is its device work (110 us of kernels after the graph launch's 5 us),
 * not the watchdog's 1 ms pace, which a step still tied to the polls would keep. */
static void
test_watchdog_wakeup(void)
{
    dfg g;
    REQUIRE(build_watchdog_job(&g) == 0);
    workload w;
    sim_result res;
    memset(&res, 0, sizeof res);
    REQUIRE(workload_analyze(&w, &g, &res, 1, STEPS - 2, NULL, NULL, -1, NULL) == 0);
    CHECK(w.main_thread[0] == 0);
    CHECK(w.base_iter_ns > 900 * US); /* the watchdog's pace */
    strategy_plan p;
    strategy_plan_baseline(&p);
    p.cuda_graph = 1;
    strategy_eval e;
    memset(&e, 0, sizeof e);
    CHECK(strategy_evaluate(&w, &p, &res, &e) == 0);
    CHECK(e.iter_ns > 100 * US && e.iter_ns < 200 * US);
    CHECK(e.median_ns > 100 * US && e.median_ns < 200 * US);
    workload_free(&w);
    sim_result_free(&res);
    dfg_free(&g);
}

int
main(void)
{
    test_graph_launch_placement();
    test_watchdog_wakeup();
    test_step_after_input();
    test_blocking_copy_stops_walk();
    return tests_done();
}
