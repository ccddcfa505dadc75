/*
 * coll-bench: the collector's figures (run by `make bench`; prints, asserts nothing).
 *
 *  1. host time per intercepted launch: coll-job bench (a do-nothing libcudart) with and
 *     without the collector preloaded; median ns per launch and the difference; then, under
 *     the collector, launches on a created stream, on the legacy handle (0) and on
 *     cudaStreamPerThread, runs interleaved: the two handles' stream ids are cached per
 *     device, so what they cost above a created stream is the current-device lookup;
 *  2. drops at 1 million launches per second for one second: coll-job rate under the
 *     collector, then trace-dump: events written, dropped, bytes per event;
 *  3. iteration-time overhead on ddp-sim (2 ranks through simrun), with and without the
 *     collector, when tests/simgpu is built.
 *
 * Paths come from the build tree (COLL_BENCH_BUILDDIR).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef COLL_BENCH_BUILDDIR
#define COLL_BENCH_BUILDDIR "."
#endif

#define B COLL_BENCH_BUILDDIR

/* Runs a shell command; stores the first number after `key` in its output in *value.
 * Returns 0 when found. */
static int
bench_run(const char *cmd, const char *key, double *value)
{
    FILE *p = popen(cmd, "r");
    char line[65536];
    int found = -1;
    if (p == NULL)
        return -1;
    while (fgets(line, sizeof line, p)) {
        const char *at = strstr(line, key);
        if (at && found != 0) {
            *value = atof(at + strlen(key));
            found = 0;
        }
    }
    pclose(p);
    return found;
}

static int
bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Runs the n commands cmd[] in turn, `runs` rounds; stores each one's median "key" value in
 * out[] (0 when none was read). Interleaving spreads a slow moment over all of them. */
static void
bench_interleaved(char cmd[][4096], int n, const char *key, int runs, double *out)
{
    double v[4][9];
    int got[4] = {0};
    for (int r = 0; r < runs && r < 9; r++)
        for (int i = 0; i < n && i < 4; i++)
            if (bench_run(cmd[i], key, &v[i][got[i]]) == 0)
                got[i]++;
    for (int i = 0; i < n && i < 4; i++) {
        qsort(v[i], (size_t)got[i], sizeof v[i][0], bench_cmp_double);
        out[i] = got[i] > 0 ? v[i][got[i] / 2] : 0;
    }
}

/* Average of "key" values over runs (median of a few, so noise weighs less). */
static int
bench_median(const char *cmd, const char *key, int runs, double *out)
{
    double v[9];
    int n = 0;
    for (int i = 0; i < runs && i < 9; i++)
        if (bench_run(cmd, key, &v[n]) == 0)
            n++;
    if (n == 0)
        return -1;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (v[j] < v[i]) {
                double t = v[i];
                v[i] = v[j];
                v[j] = t;
            }
    *out = v[n / 2];
    return 0;
}

int
main(void)
{
    char cmd[4096], dir[] = "/tmp/dpro-bench-XXXXXX";
    const char *coll = B "/collector/.libs/libdpro-collector.so";
    const char *job = B "/tests/collector/coll-job";
    double plain = 0, traced = 0;
#if defined(__SANITIZE_ADDRESS__)
    printf("coll-bench: sanitizer build, the collector cannot be preloaded: skipped\n");
    return 0;
#endif
    if (mkdtemp(dir) == NULL) {
        perror("coll-bench: mkdtemp");
        return 1;
    }
    printf("collector: %s\n", coll);

    /* 1. ns per launch */
    snprintf(cmd, sizeof cmd, "%s bench 200000", job);
    if (bench_median(cmd, "median_ns_per_launch=", 5, &plain) == 0) {
        snprintf(cmd, sizeof cmd,
                 "DPRO_OUTPUT=%s/launch DPRO_CUPTI=0 LD_PRELOAD=%s %s bench 200000", dir, coll,
                 job);
        if (bench_median(cmd, "median_ns_per_launch=", 5, &traced) == 0)
            printf("launch: %.1f ns without, %.1f ns with the collector: +%.1f ns per launch "
                   "(median of 5 runs of 200 batches x 1000 launches)\n",
                   plain, traced, traced - plain);
    }

    /* 1b. the stream handles whose id depends on the current device */
    {
        static char hcmd[3][4096];
        static const char *const which[3] = {"stream", "legacy", "perthread"};
        double ns[3];
        for (int i = 0; i < 3; i++)
            snprintf(hcmd[i], sizeof hcmd[i],
                     "DPRO_OUTPUT=%s/handle-%s DPRO_CUPTI=0 LD_PRELOAD=%s %s bench 200000 %s", dir,
                     which[i], coll, job, which[i]);
        bench_interleaved(hcmd, 3, "median_ns_per_launch=", 7, ns);
        if (ns[0] > 0 && ns[1] > 0 && ns[2] > 0)
            printf("stream handles under the collector: %.1f ns on a created stream, %.1f ns "
                   "on the legacy handle (x%.3f), %.1f ns on cudaStreamPerThread (x%.3f) per "
                   "launch (medians of 7 interleaved runs)\n",
                   ns[0], ns[1], ns[1] / ns[0], ns[2], ns[2] / ns[0]);
    }

    /* 2. 1 M launches/s for 1 s */
    double rate = 0, events = 0, dropped = 0, bytes = 0;
    snprintf(cmd, sizeof cmd,
             "DPRO_OUTPUT=%s/rate DPRO_CUPTI=0 LD_PRELOAD=%s %s rate 1000000 1000000", dir, coll,
             job);
    if (bench_run(cmd, "rate=", &rate) == 0) {
        snprintf(cmd, sizeof cmd, "%s/tests/collector/trace-dump %s/rate | head -c 2000", B, dir);
        bench_run(cmd, "\"events\":", &events);
        bench_run(cmd, "\"dropped\":", &dropped);
        bench_run(cmd, "\"event_bytes\":", &bytes);
        printf("rate: %.0f launches/s for 1 s: %.0f events written, %.0f dropped, "
               "%.2f bytes/event (compressed)\n",
               rate, events, dropped, events > 0 ? bytes / events : 0.0);
    }

    /* 3. ddp-sim iteration time */
    const char *simrun = B "/tests/simgpu/simrun";
    const char *ddp = B "/tests/simgpu/ddp-sim";
    if (access(simrun, X_OK) == 0 && access(ddp, X_OK) == 0) {
        double it_plain = 0, it_traced = 0;
        snprintf(cmd, sizeof cmd, "SIMGPU_PHYSICS=simple %s -n 2 -- %s --iterations 20 2>/dev/null",
                 simrun, ddp);
        int a = bench_median(cmd, "\"mean_iter_us\":", 3, &it_plain);
        snprintf(cmd, sizeof cmd,
                 "SIMGPU_PHYSICS=simple DPRO_OUTPUT=%s/ddp LD_PRELOAD=%s %s -n 2 -- %s "
                 "--iterations 20 2>/dev/null",
                 dir, coll, simrun, ddp);
        int b = bench_median(cmd, "\"mean_iter_us\":", 3, &it_traced);
        if (a == 0 && b == 0 && it_plain > 0)
            printf("ddp-sim (2 ranks, 20 iterations): %.0f us without, %.0f us with the "
                   "collector per iteration: %+.2f %%\n",
                   it_plain, it_traced, 100.0 * (it_traced - it_plain) / it_plain);
        else
            printf("ddp-sim: no iteration time read (simrun/ddp-sim output changed?)\n");
    } else {
        printf("ddp-sim: not built, skipped\n");
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "coll-bench: could not remove %s\n", dir);
    return 0;
}
