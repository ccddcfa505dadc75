/*
 * bench_optimizer: search speed on a synthetic job of 10,000 device ops per rank per
 * iteration (tests/replay/synth.h: 8 ranks of which one is in the graph, 3 iterations,
 * 50 gradient buckets): a search of up to 1,000 evaluations, then 1,000 evaluations of plans
 * drawn in turn (every bucket cap with and without CUDA graph capture), which the search
 * may not reach when its space is smaller; prints evaluations per second for both.
 *
 *   bench_optimizer [OPS_PER_ITER [EVALS]]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "optimizer/search.h"
#include "optimizer/strategy.h"
#include "optimizer/workload.h"
#include "tests/replay/synth.h"

static double
now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* EVALS evaluations of plans drawn in turn. Returns 0 or -1. */
static int
raw_evaluations(workload *w, int64_t evals)
{
    sim_result res;
    memset(&res, 0, sizeof res);
    double t0 = now_s();
    strategy_eval e;
    int rc = 0;
    for (int64_t i = 0; i < evals && rc == 0; i++) {
        strategy_plan p;
        strategy_plan_baseline(&p);
        p.bucket_cap = (int8_t)(i % strategy_n_bucket_caps);
        p.first_cap = (int8_t)((i / strategy_n_bucket_caps) % strategy_n_bucket_caps);
        p.cuda_graph = (uint8_t)((i / 7) & 1);
        if (strategy_evaluate(w, &p, &res, &e) != 0) {
            fprintf(stderr, "bench_optimizer: evaluation failed\n");
            rc = -1;
        }
    }
    double t1 = now_s();
    if (rc == 0)
        printf("  %lld plan evaluations (apply + simulate + iteration time): %.2f s, %.0f "
               "evaluations/s\n",
               (long long)evals, t1 - t0, (double)evals / (t1 - t0));
    sim_result_free(&res);
    return rc;
}

int
main(int argc, char **argv)
{
    int32_t ops = argc > 1 ? atoi(argv[1]) : 10000;
    int64_t evals = argc > 2 ? atoll(argv[2]) : 1000;
    if (ops <= 0 || evals <= 0) {
        fprintf(stderr, "usage: bench_optimizer [OPS_PER_ITER [EVALS]]\n");
        return 2;
    }
    synth_params sp;
    synth_defaults(&sp);
    sp.ranks = 8;
    sp.classes = 1;
    sp.iterations = 3;
    sp.ops_per_iter = ops;
    sp.buckets = 50;
    sp.kernel_ns = 5000;
    sp.bucket_bytes = 2 << 20;
    dfg g;
    double t0 = now_s();
    if (synth_dfg(&sp, &g) != 0) {
        fprintf(stderr, "bench_optimizer: out of memory\n");
        return 1;
    }
    costmodel m;
    memset(&m, 0, sizeof m);
    costmodel_sample s[] = {{1, 8, 1 << 20, 50000 + (1 << 20) / 20, 0},
                            {1, 8, 8 << 20, 50000 + (8 << 20) / 20, 0}};
    costmodel_fit_samples(&m, s, 2);
    workload w;
    sim_result res;
    memset(&res, 0, sizeof res);
    if (workload_analyze(&w, &g, &res, 0, 1, &m, NULL, -1, NULL) != 0) {
        fprintf(stderr, "bench_optimizer: analysis failed\n");
        return 1;
    }
    double t1 = now_s();
    printf("optimizer search: %d ops/iteration/rank, %d graph nodes, %d fusion chains, %d "
           "bucket units\n",
           ops, g.n_nodes, w.fusion.n_chains, w.buckets.n_units);
    printf("  setup (generate + analyze): %.2f s\n", t1 - t0);
    search_result r;
    memset(&r, 0, sizeof r);
    search_options o;
    memset(&o, 0, sizeof o);
    o.seed = 1;
    o.max_evals = evals;
    o.budget_s = 0; /* max_evals bounds it (a time budget would cut it under valgrind) */
    if (search_run(&w, &o, &r) != 0) {
        fprintf(stderr, "bench_optimizer: search failed\n");
        return 1;
    }
    printf("  search: %lld evaluations (%lld proposals) in %.2f s: %.0f evaluations/s%s\n",
           (long long)r.evaluations, (long long)r.proposals, r.elapsed_s,
           r.elapsed_s > 0 ? (double)r.evaluations / r.elapsed_s : 0.0,
           r.cut_by_budget ? " (cut by the time budget)" : "");
    printf("    baseline %.1f us, best %.1f us\n", r.baseline.eval.iter_ns / 1000.0,
           r.n_top > 0 ? r.top[0].eval.iter_ns / 1000.0 : r.baseline.eval.iter_ns / 1000.0);
    if (raw_evaluations(&w, evals) != 0)
        return 1;
    search_result_free(&r);
    workload_free(&w);
    sim_result_free(&res);
    dfg_free(&g);
    return 0;
}
