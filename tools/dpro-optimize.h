/*
 * dpro-optimize.h: what dpro-optimize's command and its --json writer share (the command is
 * dpro-optimize.c; the writer dpro-optimize-json.c).
 */
#ifndef DPRO_TOOLS_DPRO_OPTIMIZE_H
#define DPRO_TOOLS_DPRO_OPTIMIZE_H

#include <stdint.h>

#include "optimizer/framework.h"
#include "optimizer/memest.h"
#include "optimizer/profile.h"
#include "optimizer/search.h"
#include "optimizer/workload.h"
#include "replay/replay.h"

/* What the command was asked. */
typedef struct args {
    search_options so;
    workload_options wo;
    replay_options ro;
    int json, quiet, force, partial, mpi;
    int full_search; /* --full-search: no screen with --no-fold */
    const char *chrome, *what_if, *dir;
    const framework_profile *framework; /* --framework, else NULL: the trace's */
} args;

/* The analysis of one job, from the replay to the strategies found. */
typedef struct state {
    replay rp;         /* its graph moved into work once prepared, its events kept to the ranges */
    profile_take take; /* what the build took from each rank's events before their release */
    dfg work;          /* the working graph (the replay's) */
    int have_work;
    workload w;
    sim_result base, best_sim;
    search_result sr;
    search_result screen;   /* the screen of an explicit search (dpro-optimize.c: screen) */
    int32_t screen_classes; /* the screen's rank classes, 0: no screen */
    memest mem;
    int32_t mem_rank;
    double chain_ns, fused_ns;   /* strategy_fusion_summary */
    framework_detection det;     /* the framework the trace shows */
    const framework_profile *fw; /* the one advised for (det's or --framework) */
} state;

/* A screen (search_options.screen) is made when the folded graph has at most 1 / this of
 * the explicit graph's nodes: the search's simulations cost about their nodes, and the
 * screened search runs about as many on the folded graph as the full one runs on the
 * explicit graph, plus at most SEARCH_SCREEN_MAX explicit ones. */
#define OPTIMIZE_SCREEN_SHRINK 4

/* The screen folds ranks whose times differ by up to this share of the mean measured
 * iteration (replay_fold_copy), ten times dpro-replay's 0.2 %: ranks a little apart
 * (clocks, jitter, a GPU slower by under 2 %) then fold, while the operation sequences
 * must still match and a rank the report would name a straggler (others wait for it
 * over 2 % of an iteration: the same share) still stands apart. A folded prediction may
 * then be off the explicit one by about this share; the screen's margin widens by twice
 * the gap it sees (search.h, SEARCH_SCREEN_MARGIN) and every time reported is the
 * explicit simulation's. */
#define OPTIMIZE_SCREEN_TOLERANCE REPLAY_STRAGGLER_SHARE

/* Whether the per-kernel fixed cost in use is the shortest kernel's duration rather than
 * the fitted value or the prior, which were longer (workload.c caps it). */
int optimize_cmd_fixed_capped(const workload *w, const workload_options *wo);

/* The bucket units whose bytes tensor partition places by DDP's copies of the
 * parameters' gradients into the buckets (partition_units_by_copies); 0 without the
 * parameter sizes, -1 when out of memory. */
int32_t optimize_cmd_units_by_copies(const workload *w);

/* The rank classes the search simulates: each a representative of folded ranks with
 * its weight, or an explicit rank with a trace (dpro-replay's classes; the job's ranks
 * with a trace when not folded). */
int32_t optimize_cmd_rank_classes(const state *st);

/* Prints the report as JSON on stdout (the keys usage() lists). */
void optimize_cmd_print_json(const args *a, const state *st);

#endif
