/*
 * bench_optimizer: search speed on a synthetic job of 10,000 device ops per rank per
 * iteration (tests/replay/synth.h: 8 ranks folded into one class, 3 iterations, 50 gradient
 * buckets): a search of up to 1,000 evaluations, then 1,000 evaluations of plans drawn
 * in turn (every bucket cap with and without CUDA graph capture), which the search may
 * not reach when its space is smaller; prints evaluations per second for both, and the
 * share of the graph's nodes each simulation recomputed (sim.h: sim_rerun).
 *
 * MODE says how candidates are simulated (search_options.resim): "adopt" (the default:
 * incrementally against the previous candidate on the same graph), "fixed"
 * (incrementally against each graph's first simulation), "whole" (sim_run every time),
 * or "all": the three in turn, each checked to predict what "whole" predicts.
 *
 * DENSE, WHOLE: strategy_refs.dense_share and whole_share (0: the defaults; negative:
 * never).
 *
 *   bench_optimizer [OPS_PER_ITER [EVALS [MODE [DENSE [WHOLE]]]]]
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

static const char *const mode_names[] = {"adopt", "fixed", "whole"};

/* The raw evaluations of one mode (search_options.resim numbering); iter[i] receives
 * each prediction, or is compared with it when check. Returns 0 or -1. */
static int
raw_evaluations(workload *w, int mode, int64_t evals, double dense, double whole, double *iter,
                int check)
{
    strategy_refs refs;
    sim_result res;
    memset(&refs, 0, sizeof refs);
    memset(&res, 0, sizeof res);
    refs.fixed = mode == 1;
    refs.dense_share = dense;
    refs.whole_share = whole;
    double t0 = now_s();
    int64_t mismatches = 0;
    strategy_eval e;
    for (int64_t i = 0; i < evals; i++) {
        strategy_plan p;
        strategy_plan_baseline(&p);
        p.bucket_cap = (int8_t)(i % strategy_n_bucket_caps);
        p.first_cap = (int8_t)((i / strategy_n_bucket_caps) % strategy_n_bucket_caps);
        p.cuda_graph = (uint8_t)((i / 7) & 1);
        if (strategy_evaluate_with(w, &p, mode == 2 ? NULL : &refs, &res, &e) != 0) {
            fprintf(stderr, "bench_optimizer: evaluation failed\n");
            return -1;
        }
        if (check)
            mismatches += iter[i] != e.iter_ns;
        else
            iter[i] = e.iter_ns;
    }
    double t1 = now_s();
    printf("  %lld plan evaluations (apply + simulate + iteration time), %s: %.2f s, %.0f "
           "evaluations/s",
           (long long)evals, mode_names[mode], t1 - t0, (double)evals / (t1 - t0));
    if (mode != 2)
        printf("; %lld simulations, %lld whole (%lld predicted), %.1f %% of the nodes recomputed "
               "(%.1f %% in the incremental ones)",
               (long long)refs.runs, (long long)refs.full_runs, (long long)refs.predicted,
               refs.nodes > 0 ? 100.0 * (double)refs.resimulated / (double)refs.nodes : 0.0,
               refs.inc_nodes > 0 ? 100.0 * (double)refs.inc_resimulated / (double)refs.inc_nodes
                                  : 0.0);
    printf("\n");
    if (mismatches) {
        fprintf(stderr, "bench_optimizer: %s: %lld predictions differ from whole simulations\n",
                mode_names[mode], (long long)mismatches);
        return -1;
    }
    strategy_refs_free(&refs);
    sim_result_free(&res);
    return 0;
}

int
main(int argc, char **argv)
{
    int32_t ops = argc > 1 ? atoi(argv[1]) : 10000;
    int64_t evals = argc > 2 ? atoll(argv[2]) : 1000;
    const char *mode_arg = argc > 3 ? argv[3] : "adopt";
    double dense = argc > 4 ? atof(argv[4]) : 0;
    double whole = argc > 5 ? atof(argv[5]) : 0;
    int first = -1, last = -1;
    for (int i = 0; i < 3; i++)
        if (!strcmp(mode_arg, mode_names[i]))
            first = last = i;
    if (!strcmp(mode_arg, "all")) {
        first = 0;
        last = 2;
    }
    if (first < 0 || ops <= 0 || evals <= 0) {
        fprintf(stderr, "usage: bench_optimizer [OPS_PER_ITER [EVALS [adopt|fixed|whole|all [DENSE "
                        "[WHOLE]]]]]\n");
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
    costmodel_sample s[] = {{1, 8, 1 << 20, 50000 + (1 << 20) / 20},
                            {1, 8, 8 << 20, 50000 + (8 << 20) / 20}};
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
           ops, g.n_nodes, w.n_chains, w.n_units);
    printf("  setup (generate + analyze): %.2f s\n", t1 - t0);
    search_result r;
    memset(&r, 0, sizeof r);
    for (int mode = last; mode >= first; mode--) {
        search_options o;
        memset(&o, 0, sizeof o);
        o.seed = 1;
        o.max_evals = evals;
        o.budget_s = 0; /* max_evals bounds it (a time budget would cut it under valgrind) */
        o.resim = mode;
        o.dense_share = dense;
        o.whole_share = whole;
        search_result_free(&r);
        if (search_run(&w, &o, &r) != 0) {
            fprintf(stderr, "bench_optimizer: search failed\n");
            return 1;
        }
        printf("  search, %s: %lld evaluations (%lld proposals) in %.2f s: %.0f evaluations/s%s\n",
               mode_names[mode], (long long)r.evaluations, (long long)r.proposals, r.elapsed_s,
               r.elapsed_s > 0 ? (double)r.evaluations / r.elapsed_s : 0.0,
               r.cut_by_budget ? " (cut by the time budget)" : "");
        if (mode != 2)
            printf("    %lld simulations, %lld whole, %.1f %% of the nodes recomputed (%.1f %% in "
                   "the incremental ones)\n",
                   (long long)r.sim_runs, (long long)r.sim_full_runs, 100.0 * r.resim_share,
                   100.0 * r.resim_share_incremental);
        printf("    baseline %.1f us, best %.1f us\n", r.baseline.eval.iter_ns / 1000.0,
               r.n_top > 0 ? r.top[0].eval.iter_ns / 1000.0 : r.baseline.eval.iter_ns / 1000.0);
    }
    /* raw evaluations: the whole simulations first when their predictions are checked */
    double *iter = malloc(sizeof *iter * (size_t)evals);
    if (!iter)
        return 1;
    for (int mode = last; mode >= first; mode--)
        if (raw_evaluations(&w, mode, evals, dense, whole, iter, first != last && mode != last) !=
            0)
            return 1;
    free(iter);
    search_result_free(&r);
    workload_free(&w);
    sim_result_free(&res);
    dfg_free(&g);
    return 0;
}
