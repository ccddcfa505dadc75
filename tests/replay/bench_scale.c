/*
 * bench_scale: the replay of a large job from real trace files (make bench).
 *
 * Writes the per-rank traces of a synthetic data-parallel job through libdprotrace (one
 * .dpro file a rank, in the format the collector writes), then runs dpro-replay on them
 * as a child process and reports its wall time and peak memory (the child's
 * ru_maxrss from wait4, the figure /usr/bin/time -v prints as "Maximum resident set
 * size"). The cases:
 *   1. RANKS x EVENTS events, ITERS iterations: dpro-replay --json -n 2 -w 3 (the window
 *      of two compared iterations and one before them);
 *   2. the same job traced 5 times longer (5 x ITERS iterations, 5 x EVENTS events a
 *      rank), the same command: memory follows the window, not the trace;
 *   3. with DPRO_BENCH_WHOLE=1, case 1 replayed whole (no -n): every event loaded.
 * On each job dpro-optimize --json -q -n 2 -w 3 --seed 1 --max-evals 200 --budget-s 10000
 * then runs folded (the window dpro-replay reads, alike ranks folded while read); with
 * DPRO_BENCH_OPT_EXPLICIT=1 also --no-fold on case 1 (every rank of the window simulated).
 * dpro-optimize is ./tools/dpro-optimize or DPRO_OPTIMIZE.
 * Sizes: RANKS 1024, EVENTS 100000, ITERS 20 by default; DPRO_BENCH_SCALE="R E I"
 * chooses others, DPRO_BENCH_QUICK=1 is "32 20000 20". The files go under
 * DPRO_BENCH_DIR (default: ./bench-scale.tmp) and are removed afterwards; the jobs write
 * them DPRO_BENCH_JOBS (default 2) processes at a time. dpro-replay is ./tools/dpro-replay
 * (make bench runs from the build directory) or DPRO_REPLAY.
 *
 * The job, per rank and iteration: the main thread launches K kernels on stream 7 (K
 * from EVENTS / ITERS); after every K/8 kernels it records an event, makes stream 13 wait
 * for it and calls ncclAllReduce of 4 MiB there, whose kernel waits for every rank; the
 * iteration ends with cudaStreamSynchronize(stream 13); an NVTX range "iteration N"
 * covers it. Rank 1 computes 20 % slower (a straggler the others wait for); every rank's
 * clock is off by up to +-1 ms. Without markers (--no-markers, DPRO_BENCH_NO_MARKERS=1) no
 * NVTX range is written and each iteration's first kernel has a name of its own, so that
 * the replay finds the iterations from the kernel period (one iteration long). With
 * --jitter PCT each rank but the straggler computes slower by 0 to PCT % in each
 * iteration, drawn for the rank and the iteration (rank_speed): the ranks' times drift
 * apart within an iteration (beyond the fold's 0.2 % of an iteration at a jitter of a
 * few tenths of a per cent and more) while their operations stay alike; with
 * --no-straggler rank 1 computes as the others do, so that the slowest rank of each
 * iteration sets the collectives' times.
 *
 * usage: bench_scale                          the cases above
 *        bench_scale gen DIR RANKS EVENTS ITERS [--no-markers] [--jitter PCT]
 *                        [--no-straggler]
 *                                                  only write the traces
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dprotrace.h"

#define BUCKETS 8
#define STRAGGLER 1
#define SLOWER 1.2

typedef struct job_shape {
    int ranks, iters;
    int kernels;    /* per iteration */
    int no_markers; /* no NVTX range; the iteration's first kernel named apart */
    double jitter;  /* the ranks' GPUs differ in speed by up to this share (rank_speed) */
    int straggler;  /* the straggler rank, or -1 (--no-straggler) */
} job_shape;

static double
now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Host and device times of one class of ranks (normal, straggler) in one iteration. */
typedef struct class_iter {
    int64_t start;                 /* the iteration's first call */
    int64_t launch[BUCKETS];       /* the allreduce calls */
    int64_t ready[BUCKETS];        /* the bucket's last kernel ends */
    int64_t sync_start, next_host; /* the closing synchronize; the next iteration */
} class_iter;

enum { LAUNCH_NS = 4000, GAP_NS = 1500, LAT_NS = 2500, XFER_NS = 220000 };

/* A pseudo-random number of x (splitmix64's finaliser): measured times jitter. */
static uint64_t
mix(uint64_t x)
{
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* Kernel k of iteration it on a GPU `speed` times slower than the job's: its length
 * jitters from iteration to iteration alike on every rank (so that ranks of one speed
 * stay in step); the straggler's speed is SLOWER. */
static int64_t
kernel_ns(int it, int k, double speed)
{
    int64_t base =
        15000 + (k % 7) * 3000 + (int64_t)(mix(((uint64_t)it << 32) | (uint32_t)k) % 4000);
    return speed != 1.0 ? (int64_t)((double)base * speed) : base;
}

/* The speed of rank r's GPU in iteration it (kernel_ns): the straggler's SLOWER, the
 * others' 1 + jitter x a share in [0, 1) drawn from r and it, so that with a jitter the
 * ranks' compute times differ by up to it in each iteration, each rank its own way. */
static double
rank_speed(const job_shape *s, int r, int it)
{
    if (r == s->straggler)
        return SLOWER;
    if (s->jitter <= 0)
        return 1.0;
    uint64_t u = mix(((uint64_t)r << 32) ^ ((uint64_t)it * 7727 + 1)) % 10000;
    return 1.0 + s->jitter * (double)u / 1e4;
}

/* The host side of one iteration of a class starting at t (the device follows). */
static void
class_host(const job_shape *s, int it, double speed, int64_t t, class_iter *ci)
{
    int per = s->kernels / BUCKETS, b = 0;
    int64_t kfree = 0;
    ci->start = t;
    for (int k = 0; k < s->kernels; k++) {
        t += GAP_NS;
        int64_t ks = t + LAT_NS > kfree ? t + LAT_NS : kfree;
        kfree = ks + kernel_ns(it, k, speed);
        t += LAUNCH_NS;
        if ((k + 1) % per == 0 && b < BUCKETS) {
            t += GAP_NS + 1000 + GAP_NS + 1000 + GAP_NS;
            ci->launch[b] = t;
            ci->ready[b++] = kfree;
            t += 6000;
        }
    }
    ci->sync_start = t + GAP_NS;
}

/* The collectives of one iteration: each starts when the last rank arrives. */
static void
collectives(const class_iter *c, int nclass, int64_t *comm_free, int64_t *end)
{
    for (int b = 0; b < BUCKETS; b++) {
        int64_t last = 0;
        for (int x = 0; x < nclass; x++) {
            int64_t a = c[x].launch[b] + LAT_NS;
            a = c[x].ready[b] > a ? c[x].ready[b] : a;
            a = *comm_free > a ? *comm_free : a;
            last = a > last ? a : last;
        }
        end[b] = last + XFER_NS;
        *comm_free = end[b];
    }
}

typedef struct evbuf {
    dpro_event *e;
    size_t n, cap;
} evbuf;

static int
push(evbuf *b, const dpro_event *e)
{
    if (b->n == b->cap) {
        size_t c = b->cap ? b->cap * 2 : 4096;
        dpro_event *x = realloc(b->e, c * sizeof *x);
        if (!x)
            return -1;
        b->e = x;
        b->cap = c;
    }
    b->e[b->n++] = *e;
    return 0;
}

static int
cmp_start(const void *pa, const void *pb)
{
    const dpro_event *a = pa, *b = pb;
    return (a->start_ns > b->start_ns) - (a->start_ns < b->start_ns);
}

/* The events of rank r in one iteration (class times ci, collectives ending at end). */
static int
rank_iteration(const job_shape *s, int r, int it, double speed, const class_iter *ci,
               const int64_t *end, uint64_t *corr, evbuf *b)
{
    int per = s->kernels / BUCKETS, bk = 0, rc = 0;
    int64_t t = ci->start, kfree = 0;
    for (int k = 0; k < s->kernels && rc == 0; k++) {
        t += GAP_NS;
        dpro_event a = {.kind = DPRO_KIND_API,
                        .subkind = DPRO_API_RUNTIME,
                        .thread = 100,
                        .name = 1,
                        .stream = 7};
        a.start_ns = (uint64_t)t;
        /* the call's own length jitters on each rank; the next call starts as planned */
        a.end_ns = (uint64_t)(t + LAUNCH_NS) - mix(*corr * 1031 + (uint64_t)r) % 1500;
        a.correlation = (*corr)++;
        dpro_event d = {.kind = DPRO_KIND_KERNEL, .name = 10 + (uint32_t)(k % 7), .stream = 7};
        if (s->no_markers && k == 0)
            d.name = 17;
        d.correlation = a.correlation;
        int64_t ks = t + LAT_NS > kfree ? t + LAT_NS : kfree;
        d.start_ns = (uint64_t)ks;
        kfree = ks + kernel_ns(it, k, speed);
        d.end_ns = (uint64_t)kfree;
        rc = push(b, &a) || push(b, &d);
        t += LAUNCH_NS;
        if ((k + 1) % per == 0 && bk < BUCKETS && rc == 0) {
            dpro_event e = {.kind = DPRO_KIND_API, .subkind = DPRO_API_RUNTIME, .thread = 100};
            t += GAP_NS;
            e.name = 2; /* cudaEventRecord */
            e.object = 0xe000 + (uint64_t)bk;
            e.stream = 7;
            e.start_ns = (uint64_t)t;
            e.end_ns = (uint64_t)(t + 1000);
            rc = push(b, &e);
            t += 1000 + GAP_NS;
            e.name = 3; /* cudaStreamWaitEvent */
            e.stream = 13;
            e.start_ns = (uint64_t)t;
            e.end_ns = (uint64_t)(t + 1000);
            rc = rc || push(b, &e);
            t += 1000 + GAP_NS;
            dpro_event h = {.kind = DPRO_KIND_COLLECTIVE,
                            .subkind = DPRO_COLL_ALLREDUCE,
                            .thread = 100,
                            .stream = 13,
                            .comm = 0xc0ffee1234ULL,
                            .count = 1 << 20,
                            .dtype = 7,
                            .bytes = 4 << 20};
            h.start_ns = (uint64_t)t;
            h.end_ns = (uint64_t)(t + 6000);
            h.correlation = (*corr)++;
            h.seq = (uint64_t)it * BUCKETS + (uint64_t)bk;
            dpro_event n = {.kind = DPRO_KIND_KERNEL, .name = 4, .stream = 13};
            n.correlation = h.correlation;
            int64_t arr = ci->launch[bk] + LAT_NS;
            arr = ci->ready[bk] > arr ? ci->ready[bk] : arr;
            n.start_ns = (uint64_t)(bk ? (end[bk - 1] > arr ? end[bk - 1] : arr) : arr);
            n.end_ns = (uint64_t)end[bk];
            rc = rc || push(b, &h) || push(b, &n);
            t += 6000;
            bk++;
        }
    }
    dpro_event y = {
        .kind = DPRO_KIND_API, .subkind = DPRO_API_RUNTIME, .thread = 100, .name = 5, .stream = 13};
    y.start_ns = (uint64_t)ci->sync_start;
    y.end_ns =
        (uint64_t)((end[BUCKETS - 1] > ci->sync_start ? end[BUCKETS - 1] : ci->sync_start) + 3000);
    dpro_event m = {.kind = DPRO_KIND_MARKER,
                    .subkind = DPRO_MARK_RANGE,
                    .thread = 100,
                    .name = 20 + (uint32_t)it};
    m.start_ns = (uint64_t)ci->start;
    m.end_ns = y.end_ns + 20000;
    return rc || push(b, &y) || (!s->no_markers && push(b, &m));
}

/* Writes rank r's trace into dir. Returns 0 or 1 (with a message). */
static int
write_rank(const char *dir, const job_shape *s, int r)
{
    char path[4096], eb[DPRO_ERRBUF_SIZE];
    snprintf(path, sizeof path, "%s/rank%d.dpro", dir, r);
    dpro_writer_options wo = {.replace = 1};
    dpro_writer *w = NULL;
    if (dpro_writer_open(path, &wo, &w, eb, sizeof eb) != DPRO_OK) {
        fprintf(stderr, "bench_scale: %s\n", eb);
        return 1;
    }
    static const char *names[] = {
        "cudaLaunchKernel", "cudaEventRecord", "cudaStreamWaitEvent",
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
        "cudaStreamSynchronize"};
    uint32_t id;
    char txt[160];
    for (int i = 1; i < 20 + s->iters; i++) {
        if (i <= 5)
            snprintf(txt, sizeof txt, "%s", names[i - 1]);
        else if (i >= 10 && i < 17)
            snprintf(txt, sizeof txt, "void at::native::kernel_%d<float>(float const*, float*)",
                     i - 10);
        else if (i == 17 && s->no_markers)
            snprintf(txt, sizeof txt, "void at::native::zero_grad<float>(float*)");
        else if (i >= 20)
            snprintf(txt, sizeof txt, "iteration %d", i - 20);
        else
            snprintf(txt, sizeof txt, "pad%d", i);
        dpro_writer_intern(w, txt, &id); /* ids 1.. in this order */
    }
    dpro_writer_set_meta(w, DPRO_META_SOURCE, "bench_scale");
    dpro_writer_set_meta_int(w, DPRO_META_RANK, r);
    dpro_writer_set_meta_int(w, DPRO_META_WORLD_SIZE, s->ranks);
    dpro_writer_set_meta(w, DPRO_META_JOB_ID, "bench-scale");
    dpro_writer_set_meta(w, DPRO_META_HOST, "benchhost");
    dpro_writer_add_thread(w, 100, "main");
    dpro_comm_info ci = {.hash = 0xc0ffee1234ULL, .rank = r, .size = s->ranks, .handle = 0x1000};
    dpro_writer_add_comm(w, &ci);
    int64_t skew = ((int64_t)((r * 7919) % 2001) - 1000) * 1000;
    int64_t host[4] = {1000000000, 1000000000, 1000000000, 1000000000}, comm_free = 0, end[BUCKETS];
    uint64_t corr = 1;
    evbuf b = {0};
    int rc = 0;
    /* the classes whose arrivals decide the collectives: the job's speed, the
     * straggler's, and with a jitter the iteration's slowest other rank's and this
     * rank's own (the host's times do not depend on the speed: one host time serves) */
    int nclass = s->jitter > 0 ? 4 : 2, own = s->jitter > 0 ? 3 : r == s->straggler;
    for (int it = 0; it < s->iters && rc == 0; it++) {
        class_iter c[4];
        double speed[4] = {1.0, s->straggler >= 0 ? SLOWER : 1.0, 1.0, rank_speed(s, r, it)};
        for (int q = 0; s->jitter > 0 && q < s->ranks; q++)
            if (rank_speed(s, q, it) > speed[2] && q != s->straggler)
                speed[2] = rank_speed(s, q, it);
        for (int x = 0; x < nclass; x++)
            class_host(s, it, speed[x], host[x], &c[x]);
        collectives(c, s->ranks > STRAGGLER ? nclass : 1, &comm_free, end);
        for (int x = 0; x < nclass; x++) {
            int64_t sync_end =
                end[BUCKETS - 1] > c[x].sync_start ? end[BUCKETS - 1] : c[x].sync_start;
            host[x] = sync_end + 3000 + 20000;
        }
        b.n = 0;
        rc = rank_iteration(s, r, it, speed[own], &c[own], end, &corr, &b);
        qsort(b.e, b.n, sizeof *b.e, cmp_start);
        for (size_t i = 0; i < b.n && rc == 0; i++) {
            b.e[i].start_ns = (uint64_t)((int64_t)b.e[i].start_ns - skew);
            b.e[i].end_ns = (uint64_t)((int64_t)b.e[i].end_ns - skew);
            rc = dpro_writer_append(w, &b.e[i]) != DPRO_OK;
        }
    }
    free(b.e);
    if (rc != 0)
        fprintf(stderr, "bench_scale: %s: %s\n", path, dpro_writer_errmsg(w));
    if (dpro_writer_close(w) != DPRO_OK && rc == 0) {
        fprintf(stderr, "bench_scale: closing %s failed\n", path);
        rc = 1;
    }
    return rc;
}

/* Writes the job's traces with `procs` processes. Returns 0 or 1. */
static int
write_job(const char *dir, const job_shape *s, int procs)
{
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "bench_scale: %s: %s\n", dir, strerror(errno));
        return 1;
    }
    int rc = 0;
    fflush(stdout);
    for (int p = 0; p < procs; p++) {
        pid_t pid = fork();
        if (pid == 0) {
            int crc = 0;
            for (int r = p; r < s->ranks && crc == 0; r += procs)
                crc = write_rank(dir, s, r);
            _exit(crc);
        }
        if (pid < 0)
            rc = 1;
    }
    int st;
    while (wait(&st) > 0)
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            rc = 1;
    return rc;
}

/* Bytes of the files in dir; removes them (and dir) when rm. */
static uint64_t
dir_bytes(const char *dir, int rm)
{
    uint64_t n = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[4096];
    while (d && (e = readdir(d)) != NULL) {
        struct stat st;
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (stat(path, &st) == 0)
            n += (uint64_t)st.st_size;
        if (rm)
            unlink(path);
    }
    if (d)
        closedir(d);
    if (rm)
        rmdir(dir);
    return n;
}

/* Runs argv, its output to /dev/null; *wall_s and *rss_kib get its time and peak RSS.
 * Returns its exit status, or -1. */
static int
run_measured(char *const argv[], double *wall_s, long *rss_kib)
{
    double t0 = now_s();
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        FILE *f = freopen("/dev/null", "w", stdout);
        (void)f;
        execv(argv[0], argv);
        _exit(127);
    }
    int st = 0;
    struct rusage ru;
    if (pid < 0 || wait4(pid, &st, 0, &ru) < 0)
        return -1;
    *wall_s = now_s() - t0;
    *rss_kib = ru.ru_maxrss;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Runs argv as run_measured does and prints its figures on a line of its own, the
 * command as argv has it. Returns its exit status, or -1. */
static int
report_run(char *const argv[])
{
    double wall = 0;
    long rss = 0;
    int st = run_measured(argv, &wall, &rss);
    printf(" ");
    for (int i = 0; argv[i]; i++)
        printf(" %s", argv[i]);
    printf(": %.1f s, peak RSS %.1f MiB (status %d)\n", wall, (double)rss / 1024.0, st);
    fflush(stdout);
    return st;
}

/* dpro-optimize (optimize) on the job in dir, comparing the iterations dpro-replay compares
 * here, folded and, when explicit, with --no-fold. Returns 0 or 1. */
static int
optimize_case(const char *dir, const char *optimize, int explicit)
{
    int rc = 0;
    for (int pass = 0; pass < 1 + explicit && rc == 0; pass++) {
        char *argv[] = {(char *)optimize,
                        (char *)dir,
                        "--json",
                        "-q",
                        "-n",
                        "2",
                        "-w",
                        "3",
                        "--seed",
                        "1",
                        "--max-evals",
                        "200",
                        "--budget-s",
                        "10000",
                        pass ? "--no-fold" : NULL,
                        NULL};
        rc = report_run(argv) != 0;
    }
    return rc;
}

/* One case: write the job, replay it with args, optimize it (optimize non-NULL; explicit:
 * also with --no-fold), report, clean up. Returns 0 or 1. */
static int
bench_case(const char *label, const char *dir, const job_shape *s, int procs, const char *replay,
           int whole, const char *optimize, int explicit)
{
    double t0 = now_s();
    if (write_job(dir, s, procs) != 0)
        return 1;
    double tw = now_s() - t0;
    uint64_t bytes = dir_bytes(dir, 0);
    long events = (long)s->iters * (2L * s->kernels + 4L * BUCKETS + 2);
    printf("%s: %d ranks x %ld events (%d iterations), %.1f MB on disk (%.2f bytes/event), "
           "written in %.1f s by %d processes\n",
           label, s->ranks, events, s->iters, (double)bytes / 1e6,
           (double)bytes / ((double)events * s->ranks), tw, procs);
    int rc = 0;
    /* each replay folded (the default: alike ranks simulated once) and explicit */
    for (int pass = 0; pass < 2 * (1 + whole) && rc == 0; pass++) {
        char *fold = pass % 2 ? "--no-fold" : NULL;
        char *argv_win[] = {(char *)replay, (char *)dir, "--json", "-n", "2",
                            "-w",           "3",         fold,     NULL};
        char *argv_all[] = {(char *)replay, (char *)dir, "--json", fold, NULL};
        char *const *argv = pass < 2 ? argv_win : argv_all;
        double wall = 0;
        long rss = 0;
        int st = run_measured(argv, &wall, &rss);
        printf("  %s %s%s%s: %.1f s, peak RSS %.1f MiB (status %d)\n", replay, dir,
               pass < 2 ? " --json -n 2 -w 3" : " --json", fold ? " --no-fold" : "", wall,
               (double)rss / 1024.0, st);
        fflush(stdout);
        rc = st != 0;
    }
    if (rc == 0 && optimize)
        rc = optimize_case(dir, optimize, explicit);
    dir_bytes(dir, 1);
    return rc;
}

int
main(int argc, char **argv)
{
    job_shape s = {1024, 20, 0, 0, 0, STRAGGLER};
    long events = 100000;
    int gen_ok = argc >= 6 && strcmp(argv[1], "gen") == 0;
    for (int i = 6; gen_ok && i < argc; i++) {
        if (strcmp(argv[i], "--no-markers") == 0)
            s.no_markers = 1;
        else if (strcmp(argv[i], "--no-straggler") == 0)
            s.straggler = -1;
        else if (strcmp(argv[i], "--jitter") == 0 && i + 1 < argc)
            s.jitter = atof(argv[++i]) / 100;
        else
            gen_ok = 0;
    }
    if (gen_ok) {
        s.ranks = atoi(argv[3]);
        events = atol(argv[4]);
        s.iters = atoi(argv[5]);
        s.kernels = (int)((events / (s.iters > 0 ? s.iters : 1) - 4 * BUCKETS - 2) / 2);
        if (s.ranks < 1 || s.iters < 1 || s.kernels < BUCKETS || s.jitter < 0 || s.jitter > 1)
            return 2;
        return write_job(argv[2], &s, 1);
    }
    if (argc != 1) {
        fprintf(stderr,
                "usage: bench_scale | bench_scale gen DIR RANKS EVENTS ITERS [--no-markers] "
                "[--jitter PCT] [--no-straggler]\n");
        return 2;
    }
    const char *e = getenv("DPRO_BENCH_SCALE");
    if (getenv("DPRO_BENCH_QUICK") && atoi(getenv("DPRO_BENCH_QUICK")))
        e = "32 20000 20";
    if (e && sscanf(e, "%d %ld %d", &s.ranks, &events, &s.iters) != 3)
        return 2;
    s.kernels = (int)((events / (s.iters > 0 ? s.iters : 1) - 4 * BUCKETS - 2) / 2);
    if (s.ranks < 1 || s.iters < 5 || s.kernels < BUCKETS) {
        fprintf(stderr, "bench_scale: DPRO_BENCH_SCALE wants RANKS EVENTS ITERS (ITERS >= 5)\n");
        return 2;
    }
    const char *dir = getenv("DPRO_BENCH_DIR") ? getenv("DPRO_BENCH_DIR") : "./bench-scale.tmp";
    const char *replay = getenv("DPRO_REPLAY") ? getenv("DPRO_REPLAY") : "./tools/dpro-replay";
    int procs = getenv("DPRO_BENCH_JOBS") ? atoi(getenv("DPRO_BENCH_JOBS")) : 2;
    int whole = getenv("DPRO_BENCH_WHOLE") && atoi(getenv("DPRO_BENCH_WHOLE"));
    s.no_markers = getenv("DPRO_BENCH_NO_MARKERS") && atoi(getenv("DPRO_BENCH_NO_MARKERS"));
    procs = procs < 1 ? 1 : procs;
    const char *optimize =
        getenv("DPRO_OPTIMIZE") ? getenv("DPRO_OPTIMIZE") : "./tools/dpro-optimize";
    int explicit = getenv("DPRO_BENCH_OPT_EXPLICIT") && atoi(getenv("DPRO_BENCH_OPT_EXPLICIT"));
    if (!explicit)
        printf("dpro-optimize --no-fold not run: DPRO_BENCH_OPT_EXPLICIT=1 runs it\n");
    int rc = bench_case("job", dir, &s, procs, replay, whole, optimize, explicit);
    job_shape longer = s;
    longer.iters = 5 * s.iters;
    if (rc == 0)
        rc = bench_case("the same job traced 5x longer", dir, &longer, procs, replay, 0, optimize,
                        0);
    return rc;
}
