/*
 * bench_replay: simulator throughput and scale (make bench).
 *
 *   1. nodes/s: a 64-rank synthetic job, 10,000 device ops per rank per iteration,
 *      2 iterations, every rank explicit (about 2.6 M nodes), simulated 5 times;
 *   2. a 1024-rank job of 10,000 device ops per rank per iteration of which only 8
 *      ranks are in the graph (synth classes; one a straggler; nothing weighs them as
 *      the ranks they stand for): build + simulate time;
 *   3. the same 1024-rank job with every rank explicit (1 iteration, about 20 M nodes):
 *      build + simulate time and peak RSS.
 * Prints one line per figure. DPRO_BENCH_QUICK=1 skips case 3.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "replay/dfg.h"
#include "replay/sim.h"
#include "tests/replay/synth.h"

static double
now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double
peak_rss_mib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

static int
run_case(const char *label, synth_params *p, int reps)
{
    dfg g;
    double t0 = now_s();
    if (synth_dfg(p, &g) != 0) {
        fprintf(stderr, "bench_replay: out of memory building %s\n", label);
        return 1;
    }
    double t1 = now_s();
    sim_result r;
    memset(&r, 0, sizeof r);
    double best = 1e30, first = 0;
    for (int i = 0; i < reps; i++) {
        double a = now_s();
        if (sim_run(&g, &r) != 0) {
            fprintf(stderr, "bench_replay: out of memory simulating %s\n", label);
            return 1;
        }
        double b = now_s() - a;
        if (i == 0)
            first = b;
        if (b < best)
            best = b;
    }
    int32_t live = dfg_live_nodes(&g);
    double nbytes = 0, ebytes = 0;
    dfg_memory(&g, &nbytes, &ebytes);
    printf("%-34s graph memory %.1f bytes/node, %.1f bytes/edge (%lld edges)\n", label, nbytes,
           ebytes, (long long)g.n_edges);
    double it = sim_iteration_time(&g, sim_timeline_of(&r), 0, 0, p->iterations - 1);
    printf("%-34s ranks %5d (simulated %5d) nodes %9d  build %6.2f s  sim %6.3f s "
           "(first %6.3f s, incl. finalize)  %6.1f M nodes/s  iteration %.1f us  total %5.2f s  "
           "peak RSS %6.0f MiB  unfinished %d\n",
           label, p->ranks, g.n_ranks, live, t1 - t0, best, first, live / best / 1e6, it / 1e3,
           (t1 - t0) + first, peak_rss_mib(), r.n_unfinished);
    sim_result_free(&r);
    dfg_free(&g);
    return r.n_unfinished != 0;
}

int
main(void)
{
    synth_params p;
    int rc = 0;
    synth_defaults(&p);
    p.ranks = 64;
    p.iterations = 2;
    p.ops_per_iter = 10000;
    p.buckets = 20;
    rc |= run_case("throughput (64 ranks explicit)", &p, 5);

    synth_defaults(&p);
    p.ranks = 1024;
    p.classes = 8;
    p.iterations = 2;
    p.ops_per_iter = 10000;
    p.buckets = 20;
    p.straggler_factor = 1.2;
    rc |= run_case("1024 ranks, 8 classes", &p, 3);

    const char *quick = getenv("DPRO_BENCH_QUICK");
    if (!quick || strcmp(quick, "1") != 0) {
        synth_defaults(&p);
        p.ranks = 1024;
        p.iterations = 1;
        p.ops_per_iter = 10000;
        p.buckets = 20;
        p.straggler_factor = 1.2;
        rc |= run_case("1024 ranks, every rank explicit", &p, 1);
    }
    return rc;
}
