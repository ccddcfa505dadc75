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
 *     collector, when tests/simgpu is built;
 *  4. what one rank costs, the figures that decide a job of thousands of ranks: the time
 *     the collector adds to a process's start and exit (its trace file created, the
 *     clock anchors, the settings and device rows; the flush and close), alone and with
 *     64 processes creating their files in one directory at once; the bytes of a trace
 *     with (almost) nothing in it; the bytes a ddp-sim rank adds per iteration (the
 *     difference of a 30- and a 10-iteration run); and what those add up to at 16,384
 *     ranks.
 *
 * Paths come from the build tree (COLL_BENCH_BUILDDIR).
 */
#include "config.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
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

/* Wall-clock seconds of system(cmd); a negative value when the command failed. */
static double
bench_wall(const char *cmd)
{
    struct timespec a, b;
    int rc;
    clock_gettime(CLOCK_MONOTONIC, &a);
    rc = system(cmd);
    clock_gettime(CLOCK_MONOTONIC, &b);
    if (rc != 0)
        return -1;
    return (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
}

/* Bytes and count of the trace files (*.dpro) in dir. */
static double
bench_trace_bytes(const char *dir, int *files)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    double bytes = 0;
    *files = 0;
    while (d && (e = readdir(d)) != NULL) {
        char path[4096];
        struct stat st;
        size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 5, ".dpro") != 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (stat(path, &st) == 0) {
            bytes += (double)st.st_size;
            (*files)++;
        }
    }
    if (d)
        closedir(d);
    return bytes;
}

#define BENCH_RANK_RUNS 15  /* interleaved plain/traced runs of one small process */
#define BENCH_CONCURRENT 64 /* processes started at once into one directory */

/* 4a. The collector's cost per process, start and exit: BENCH_RANK_RUNS interleaved runs of
 * `coll-job launches 10` without and with it (medians), then BENCH_CONCURRENT of them at
 * once into one directory, without and with. Stores the median added seconds per process in
 * *per_proc and the bytes of one such trace in *tiny_bytes. */
static void
bench_rank_start(const char *dir, const char *coll, const char *job, double *per_proc,
                 double *tiny_bytes)
{
    char cmd[8192], out[1024];
    double plain[BENCH_RANK_RUNS], traced[BENCH_RANK_RUNS], conc[2];
    int n = 0, files = 0;
    *per_proc = *tiny_bytes = 0;
    for (int r = 0; r < BENCH_RANK_RUNS; r++) {
        snprintf(cmd, sizeof cmd, "%s launches 10 >/dev/null 2>&1", job);
        plain[n] = bench_wall(cmd);
        snprintf(out, sizeof out, "%.900s/start-%d", dir, r);
        snprintf(cmd, sizeof cmd,
                 "DPRO_OUTPUT=%s LD_PRELOAD=%.2000s %.2000s launches 10 >/dev/null 2>&1", out, coll,
                 job);
        traced[n] = bench_wall(cmd);
        if (plain[n] >= 0 && traced[n] >= 0)
            n++;
    }
    if (n == 0) {
        printf("per rank: coll-job did not run\n");
        return;
    }
    qsort(plain, (size_t)n, sizeof plain[0], bench_cmp_double);
    qsort(traced, (size_t)n, sizeof traced[0], bench_cmp_double);
    *per_proc = traced[n / 2] - plain[n / 2];
    snprintf(out, sizeof out, "%.900s/start-0", dir);
    *tiny_bytes = bench_trace_bytes(out, &files);
    printf("per rank, start and exit: %.2f ms a process without, %.2f ms with the collector: "
           "+%.2f ms (medians of %d interleaved runs of `coll-job launches 10`); its trace: "
           "%.0f bytes in %d file\n",
           plain[n / 2] * 1e3, traced[n / 2] * 1e3, *per_proc * 1e3, n, *tiny_bytes, files);
    snprintf(out, sizeof out, "%s/together", dir);
    for (int t = 0; t < 2; t++) {
        char env[2048] = "";
        if (t)
            snprintf(env, sizeof env, "DPRO_OUTPUT=%.900s LD_PRELOAD=%.900s", out, coll);
        snprintf(cmd, sizeof cmd,
                 "for i in $(seq %d); do %s %.1500s launches 10 >/dev/null 2>&1 & done; wait",
                 BENCH_CONCURRENT, env, job);
        conc[t] = bench_wall(cmd);
    }
    bench_trace_bytes(out, &files);
    printf("per rank, %d processes started at once, one directory: %.0f ms without, %.0f ms "
           "with the collector, %d of %d trace files written (+%.2f ms per process on the "
           "machine's %ld cores)\n",
           BENCH_CONCURRENT, conc[0] * 1e3, conc[1] * 1e3, files, BENCH_CONCURRENT,
           (conc[1] - conc[0]) * 1e3 / BENCH_CONCURRENT, sysconf(_SC_NPROCESSORS_ONLN));
}

/* 4b. Bytes a ddp-sim rank adds to its trace per iteration: two traced runs (10 and 30
 * iterations, 2 ranks, simple physics), the difference over 20 iterations and 2 ranks.
 * Returns them, or 0 when ddp-sim did not run. */
static double
bench_rank_iteration_bytes(const char *dir, const char *coll, const char *simrun, const char *ddp)
{
    char cmd[8192], out[2][1024];
    const int iters[2] = {10, 30};
    double bytes[2];
    int files[2];
    for (int i = 0; i < 2; i++) {
        snprintf(out[i], sizeof out[i], "%.900s/iter-%d", dir, iters[i]);
        snprintf(cmd, sizeof cmd,
                 "SIMGPU_PHYSICS=simple DPRO_OUTPUT=%s LD_PRELOAD=%.2000s %.2000s -n 2 -- "
                 "%.2000s --iterations %d >/dev/null 2>&1",
                 out[i], coll, simrun, ddp, iters[i]);
        if (bench_wall(cmd) < 0)
            return 0;
        bytes[i] = bench_trace_bytes(out[i], &files[i]);
    }
    if (files[0] != 2 || files[1] != 2)
        return 0;
    return (bytes[1] - bytes[0]) / 20 / 2;
}

/* 4. What a rank costs and what it adds up to at 16,384 ranks. */
static void
bench_per_rank(const char *dir, const char *coll, const char *job, const char *simrun,
               const char *ddp)
{
    double per_proc, tiny, per_iter = 0;
    const double ranks = 16384;
    bench_rank_start(dir, coll, job, &per_proc, &tiny);
    if (access(simrun, X_OK) == 0 && access(ddp, X_OK) == 0)
        per_iter = bench_rank_iteration_bytes(dir, coll, simrun, ddp);
    if (per_iter > 0)
        printf("per rank, per iteration: %.0f bytes of trace (ddp-sim resnet50, 2 ranks, 30 "
               "minus 10 iterations)\n",
               per_iter);
    printf("at %.0f ranks: %.0f files in the output directory (one a rank, no shared file "
           "or lock), %.1f MiB of traces with nothing recorded, %.1f MiB per iteration of a "
           "ddp-sim-like job, %.1f s of collector start and exit summed over the ranks "
           "(%.2f ms each, in parallel across nodes)\n",
           ranks, ranks, ranks * tiny / 1048576.0, ranks * per_iter / 1048576.0, ranks * per_proc,
           per_proc * 1e3);
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

    /* 4. per rank, at scale */
    bench_per_rank(dir, coll, job, simrun, ddp);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "coll-bench: could not remove %s\n", dir);
    return 0;
}
