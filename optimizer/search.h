/*
 * search.h: the search over strategy plans (prefix search_).
 *
 * 1. The baseline is simulated and its critical path (over the compared iterations) is
 *    split into host launch time, time in short fused-able kernels, collective time and
 *    the rest: a strategy whose operations are not on the critical path cannot shorten
 *    the iteration, so each family is proposed in proportion to its share.
 * 2. Seeds: each family alone (fusion, CUDA graph, every bucket cap (caps below a
 *    unit split it: tensor partition, partition.h), each
 *    accumulation step, recomputation of the layers that free the most memory per unit
 *    of recomputed time until the memory budget holds).
 * 3. Simulated annealing (Metropolis moves on one knob at a time, temperature falling
 *    from 2 % of the baseline) from the best seed; a plan already evaluated is taken
 *    from a cache instead of being simulated again.
 * The objective is the predicted iteration time over the steady state: the compared
 * iterations less the outliers of the profile (profile_outlier_iterations: a host hiccup,
 * a checkpoint write, a stalled rank in one iteration), which the means leave out while
 * the search runs (workload.h: iter_aside); the winners and the baseline are simulated
 * once more over every iteration for the mean the job measured. A plan whose predicted peak memory
 * exceeds the budget is penalised in the walk and never reported as a winner.
 * Deterministic for a given seed as long as the time budget does not cut the walk short
 * (the result says when it did).
 *
 * Shared over P processes (search_options.par; search_mpi.h gives MPI's transport), every
 * process runs the same walk, and the simulations are dealt out in rounds: a plan not yet
 * evaluated opens a round holding it and up to P - 1 guesses of the next plans the walk
 * will ask for (the seeds not yet evaluated; during the annealing, the walk replayed
 * on a copy of its random state, each plan not yet evaluated taken as rejected, the usual
 * fate of a move once the temperature is low, each plan already evaluated accepted or
 * rejected as the walk will), process p simulates the round's p-th plan, and one gather hands every
 * result to every process. The walk takes a result when it asks for that plan (a guess it never
 * asks for is never counted or listed), so the plans, their order and the winners are the single
 * process's for any P (strategy_evaluate depends on the plan alone); only the time budget
 * cuts differently: process 0's clock is read once a round, and a round is finished
 * whole.
 */
#ifndef DPRO_OPTIMIZER_SEARCH_H
#define DPRO_OPTIMIZER_SEARCH_H

#include <stddef.h>
#include <stdint.h>

#include "optimizer/profile.h"
#include "optimizer/strategy.h"
#include "optimizer/workload.h"

/* How the processes of a shared search talk (see above; search_mpi.h gives MPI's). */
typedef struct search_par {
    int me, nprocs; /* this process and how many share the search */
    void *ctx;
    /* Every process gives n bytes of mine; all (nprocs x n bytes) receives process p's at
     * p x n, the same on every process (MPI_Allgather). Returns 0 or -1. */
    int (*allgather)(void *ctx, const void *mine, size_t n, void *all);
} search_par;

typedef struct search_options {
    uint64_t seed;
    double budget_s;       /* wall-clock cap, 0: none (the baseline is simulated past it) */
    int64_t max_evals;     /* simulations (default 2000 when 0) */
    int64_t memory_budget; /* bytes, 0: none */
    double memory_margin;  /* share of the budget kept free for what the estimate does
                              not see (allocator fragmentation); feasible means
                              peak <= budget * (1 - margin) */
    unsigned families;     /* enum strategy_family mask (0: all) */
    int no_fuse;           /* 1: of the fusion family, capture only (--strategies capture) */
    int32_t batch;         /* per-rank batch (accumulation steps must divide it), 0 unknown */
    int progress;          /* progress line on stderr */
    int32_t top_k;         /* winners kept (default 5 when 0) */
    /* what the user's framework can express (framework.h), so that no winner needs a knob
     * it lacks: */
    unsigned fw_families;     /* families it expresses (0: all) */
    int no_capture;           /* 1: no plan captures the step in a CUDA graph */
    double first_bucket_mb;   /* > 0: the first bucket stays this size (no knob for it) */
    int first_bucket_follows; /* 1: the first bucket takes the plan's cap (one knob for both) */
    const search_par *par;    /* NULL: this process searches alone; else shared (see above);
                                 every process of par must call search_run with the same w
                                 and options */
    int keep_evaluated;       /* 1: the result lists every plan evaluated (evaluated) */
    /* Screened search (NULL: the walk above): the result of a search of the same job on a
     * cheaper model of it (the folded graph of its ranks, kept evaluated), whose plans
     * are simulated on w in its order, best first: its winners, and up to
     * SEARCH_SCREEN_MAX other plans whose screened time lies within the margin of its
     * best plan (SEARCH_SCREEN_MARGIN, plus twice the largest gap seen between a plan's
     * two predictions, the baseline's first). The winners are picked among those
     * simulated on w, and every time reported is w's. Not with par. */
    const struct search_result *screen;
} search_options;

/* The screen's margin: a plan the screen predicts slower than its best plan by more than
 * this share (plus twice the gap seen) is not simulated again. dpro-replay's fold
 * tolerance is 0.2 % of an iteration an operation (replay.h, replay_fold): 2.5 times
 * that; a screen folded looser (dpro-optimize's 2 %) is followed by the gap it shows. */
#define SEARCH_SCREEN_MARGIN 0.005
/* Plans of the screen simulated again at most besides its winners (each a full
 * simulation of w; they cost the screened search most of its time). */
#define SEARCH_SCREEN_MAX 4

typedef struct search_candidate {
    strategy_plan plan;
    strategy_eval eval; /* of the baseline and the winners, eval.iter_ns is the mean over
                           every compared iteration */
    int feasible;       /* fits the memory budget (or there is none) */
    double steady_ns;   /* the mean over the compared iterations the search keeps (all
                           when none is set aside): what the plans are ranked by */
} search_candidate;

typedef struct search_result {
    search_candidate baseline;
    search_candidate *top; /* best first */
    int32_t n_top;
    int64_t evaluations; /* simulations run */
    int64_t proposals;   /* plans looked at, cache hits included */
    double elapsed_s;
    int cut_by_budget;      /* the time budget ended the walk (screened: or the screen's) */
    int64_t simulated_here; /* simulations this process ran (shared: its part of every
                               round, guesses never asked for included) */
    int64_t rounds;         /* shared: rounds of simulations (gathers) */
    /* baseline critical path shares (fractions of its length) */
    double cp_host, cp_short_kernels, cp_collectives, cp_other;
    /* the outlier iterations of the profile set aside (profile_outlier_iterations) */
    int32_t n_aside;
    profile_outlier *aside; /* n_aside of them, in order */
    uint8_t *aside_mask;    /* per compared iteration, 1: set aside (NULL when none) */
    /* search_options.keep_evaluated: every plan evaluated, best first (the winners'
     * order: feasible first, then by steady time) */
    search_candidate *evaluated;
    int64_t n_evaluated;
    /* screened (search_options.screen): the screen's simulations, its plans simulated
     * again here (the baseline not counted), the margin the last of them was taken within
     * and the largest relative gap seen between a plan's two predictions */
    int64_t screen_evaluations;
    int32_t screen_verified;
    double screen_margin, screen_gap;
} search_result;

/* Searches plans for w. Returns 0, or -1 when out of memory or when the baseline
 * cannot be simulated over the compared iterations. Free out with search_result_free. */
int search_run(workload *w, const search_options *o, search_result *out);

/* The mean iteration of plan p over the compared iterations r keeps (r from search_run
 * on w): p simulated into res with r's outliers left out of the means, into *steady_ns.
 * Leaves w->g on p. Returns 0, or -1 as strategy_evaluate. */
int search_steady_ns(workload *w, const search_result *r, const strategy_plan *p, sim_result *res,
                     double *steady_ns);

void search_result_free(search_result *r);

#endif
