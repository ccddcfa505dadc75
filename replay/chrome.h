/*
 * chrome.h: Chrome trace (JSON object format) export of a measured or simulated
 * timeline, for ui.perfetto.dev and chrome://tracing (prefix chrome_).
 *
 * One process per rank (pid = rank, process_name "rank N (host)"), one track per host
 * thread and per stream (thread_name metadata, threads sorted first), "X" complete
 * events for every node, launch -> device flows (ph s / f, bp "e"), each collective's
 * participants linked across ranks by flows (category "collective"; send/recv exchanges
 * "p2p", from the sender), wake-ups between host threads (dfg.h) as
 * flows from the waker's end to the woken call's start, an "iterations" track, the critical path's
 * pieces by class when asked (chrome_options.cp), and for measured timelines the NVTX ranges (their
 * own track per thread) and a "C" counter of device memory in use. Kernel slices are named as
 * reports show kernels (kernels_display_names over the graph's kernel names), the name as
 * traced in args.full_name where it differs. A folded graph (replay_fold)
 * holds only its classes' representatives: a folded rank gets a named process and its
 * iterations track (its representative's), no tracks of nodes. Names go through the JSON
 * writer's escaping. Simulated and measured timelines are written the same way, so the two files
 * compare side by side.
 */
#ifndef DPRO_REPLAY_CHROME_H
#define DPRO_REPLAY_CHROME_H

#include <stdint.h>
#include <stdio.h>

#include "replay.h"

typedef struct chrome_options {
    int simulated;      /* 1: times from sim, else measured */
    int32_t iter_first; /* window of iterations (inclusive; iteration N ends at the end
                         * of boundary N, e.g. marker "iteration N"), -1: everything */
    int32_t iter_last;
    const replay_summary *cp; /* with a simulated timeline: the summary of that simulation
                               * (replay_summarize of the same g and sim), whose critical
                               * path is overlaid as a "critical path" track of its rank, a
                               * slice per piece (cat "critical_path", name the cpu_op,
                               * annotation or node, args class and node); NULL: none */
} chrome_options;

/* Ranks of g folded into another rank's class (replay_fold): the export writes no tracks
 * of their own (their timeline is their representative's); their process is named
 * "rank N (host) [folded: as rank P]" and otherData.folded_ranks counts them. */
int32_t chrome_folded_ranks(const replay *rp, const dfg *g);

/* Estimated size in bytes of the export with these options (chrome_export): each part it
 * writes counted from the graph, its names (args.full_name included) and the digits of
 * its numbers, the times' fractions taken at 17 digits; within 5 % of the export on the
 * traces of tests/replay/test_chrome_estimate.py. Returns 0 with *bytes set, or -1 when
 * out of memory (*bytes then 0: no estimate, which the caller must not take for a small
 * export). */
int chrome_estimate_bytes(const replay *rp, const dfg *g, const sim_result *sim,
                          const chrome_options *opt, uint64_t *bytes);

/* Writes the trace of graph g (rp->graph or a copy) to out: measured times, or those of
 * sim when opt->simulated (sim must then be a result of g). Returns 0, or -1 when out
 * of memory or when writing failed (ferror). */
int chrome_export(const replay *rp, const dfg *g, const sim_result *sim, const chrome_options *opt,
                  FILE *out);

#endif
