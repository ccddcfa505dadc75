/*
 * gen_traces: writes the per-rank traces of a synthetic data-parallel job with the
 * trace writer, with a known iteration time, known clock skew and optional faults, and
 * prints the truth as one JSON line: {"iter_us": ..., "ranks": N, "skew_us": [...]}.
 *
 * The job, per rank and iteration: the main thread launches `ops` kernels on stream 7;
 * after every ops/buckets kernels it records an event on stream 7, makes stream 13 wait
 * for it and calls ncclAllReduce there; the NCCL kernel waits for every rank, then
 * transfers for alpha + 2(n-1)/n * bytes / beta; the iteration ends with
 * cudaStreamSynchronize(stream 13). An NVTX range "iteration N" covers each iteration.
 *
 * usage: gen_traces DIR [--ranks N] [--iters K] [--ops M] [--buckets B]
 *        [--skew R:US]... [--straggler R:F] [--skip R:SEQ] [--cut R:FRACTION]
 *        [--missing R] [--job-id ID] [--world W] [--no-markers] [--prefix P]
 *        [--spelling SUFFIX] [--device-collectives] [--extreme R:nelems|R:time]
 *
 * --spelling writes the CUDA runtime calls with a suffix, as the collector records the
 * per-thread default stream entry points (cudaEventRecord_ptsz, ...): the same job under
 * another name of every call. --device-collectives writes each collective as a
 * device-timed record (value DPRO_COLL_TIMING_DEVICE, on the main thread, with its
 * kernel's times rounded to the microsecond as a profiler's export rounds them) instead of
 * the host call an interposer records. --extreme writes numbers a trace can hold but a
 * replay cannot compute with, on rank R: nelems, a first collective of 2^63-1 elements;
 * time, a last event that ends 2^63 - 1 us after the epoch.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dprotrace.h"

#define MAXR 64

typedef struct gen {
    int ranks, iters, ops, buckets, world;
    int64_t skew_ns[MAXR];
    int straggler;
    double factor;
    int skip_rank;
    long skip_seq;
    int cut_rank;
    double cut_frac;
    int missing;
    int markers;
    const char *job_id, *prefix;
    const char *spelling; /* suffix of the runtime calls' names ("" none) */
    int device_colls;     /* collectives as device-timed records */
    int extreme_rank;     /* rank given --extreme numbers (-1 none) */
    int extreme_time;     /* 1: an extreme time; 0: an extreme element count */
} gen;

typedef struct evbuf {
    dpro_event *e;
    size_t n, cap;
} evbuf;

static void
push(evbuf *b, const dpro_event *e)
{
    if (b->n == b->cap) {
        b->cap = b->cap ? b->cap * 2 : 1024;
        b->e = realloc(b->e, b->cap * sizeof *b->e);
        if (!b->e) {
            perror("realloc");
            exit(1);
        }
    }
    b->e[b->n++] = *e;
}

static int
cmp_start(const void *pa, const void *pb)
{
    const dpro_event *a = pa, *b = pb;
    return (a->start_ns > b->start_ns) - (a->start_ns < b->start_ns);
}

static int64_t
kernel_ns(int k, int rank, const gen *g)
{
    int64_t base = 15000 + (k % 7) * 3000;
    return rank == g->straggler ? (int64_t)(base * g->factor) : base;
}

int
main(int argc, char **argv)
{
    gen g = {.ranks = 4,
             .iters = 6,
             .ops = 40,
             .buckets = 4,
             .world = 0,
             .straggler = -1,
             .factor = 1,
             .skip_rank = -1,
             .cut_rank = -1,
             .missing = -1,
             .markers = 1,
             .job_id = "gen-1",
             .prefix = "rank",
             .spelling = "",
             .extreme_rank = -1};
    static const struct option lo[] = {
        {"ranks", 1, 0, 'r'},   {"iters", 1, 0, 'i'},    {"ops", 1, 0, 'o'},
        {"buckets", 1, 0, 'b'}, {"skew", 1, 0, 's'},     {"straggler", 1, 0, 'S'},
        {"skip", 1, 0, 'k'},    {"cut", 1, 0, 'c'},      {"missing", 1, 0, 'm'},
        {"job-id", 1, 0, 'j'},  {"world", 1, 0, 'w'},    {"no-markers", 0, 0, 'n'},
        {"prefix", 1, 0, 'p'},  {"spelling", 1, 0, 'P'}, {"device-collectives", 0, 0, 'D'},
        {"extreme", 1, 0, 'x'}, {0, 0, 0, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        int r;
        double v;
        switch (c) {
        case 'r':
            g.ranks = atoi(optarg);
            break;
        case 'i':
            g.iters = atoi(optarg);
            break;
        case 'o':
            g.ops = atoi(optarg);
            break;
        case 'b':
            g.buckets = atoi(optarg);
            break;
        case 's':
            if (sscanf(optarg, "%d:%lf", &r, &v) == 2 && r >= 0 && r < MAXR)
                g.skew_ns[r] = (int64_t)(v * 1000);
            break;
        case 'S':
            sscanf(optarg, "%d:%lf", &g.straggler, &g.factor);
            break;
        case 'k':
            sscanf(optarg, "%d:%ld", &g.skip_rank, &g.skip_seq);
            break;
        case 'c':
            sscanf(optarg, "%d:%lf", &g.cut_rank, &g.cut_frac);
            break;
        case 'm':
            g.missing = atoi(optarg);
            break;
        case 'j':
            g.job_id = optarg;
            break;
        case 'w':
            g.world = atoi(optarg);
            break;
        case 'n':
            g.markers = 0;
            break;
        case 'p':
            g.prefix = optarg;
            break;
        case 'P':
            g.spelling = optarg;
            break;
        case 'D':
            g.device_colls = 1;
            break;
        case 'x': {
            char what[16] = "";
            if (sscanf(optarg, "%d:%15s", &g.extreme_rank, what) != 2 ||
                (strcmp(what, "time") != 0 && strcmp(what, "nelems") != 0))
                return 2;
            g.extreme_time = strcmp(what, "time") == 0;
            break;
        }
        default:
            return 2;
        }
    }
    if (optind + 1 != argc || g.ranks < 1 || g.ranks > MAXR || g.buckets < 1 || g.ops < g.buckets)
        return 2;
    const char *dir = argv[optind];
    mkdir(dir, 0755);
    int n = g.ranks;
    const uint64_t comm = 0xc0ffee1234ULL;
    const int64_t launch = 4000, gapns = 1500, lat = 2500, alpha = 12000;
    const double beta = 20.0;             /* bytes per ns */
    const int64_t bucket_count = 1 << 20; /* floats */
    int64_t bucket_bytes = bucket_count * 4;
    int64_t xfer = alpha + (int64_t)(2.0 * (n - 1) / n * (double)bucket_bytes / beta);

    evbuf ev[MAXR] = {{0}};
    int64_t host_t[MAXR];
    for (int r = 0; r < n; r++)
        host_t[r] = 1000000000 + r * 777; /* true (aligned) time */
    uint64_t corr[MAXR];
    for (int r = 0; r < n; r++)
        corr[r] = 1;
    int64_t iter_start[64][MAXR];
    int64_t comm_free[MAXR];
    for (int r = 0; r < n; r++)
        comm_free[r] = 0;
    long seq = 0;
    int per_bucket = g.ops / g.buckets;
    for (int it = 0; it < g.iters && it < 64; it++) {
        int64_t coll_launch[MAXR][64], coll_ready_kernel[MAXR][64];
        for (int r = 0; r < n; r++) {
            iter_start[it][r] = host_t[r];
            int64_t t = host_t[r], kfree = 0;
            int b = 0;
            for (int k = 0; k < g.ops; k++) {
                t += gapns;
                dpro_event a = {0};
                a.kind = DPRO_KIND_API;
                a.subkind = DPRO_API_RUNTIME;
                a.thread = 100;
                a.name = 1; /* interned below: 1 cudaLaunchKernel */
                a.start_ns = (uint64_t)t;
                a.end_ns = (uint64_t)(t + launch);
                a.correlation = corr[r]++;
                a.stream = 7;
                push(&ev[r], &a);
                dpro_event d = {0};
                d.kind = DPRO_KIND_KERNEL;
                d.name = 10 + (uint32_t)(k % 7);
                d.correlation = a.correlation;
                d.stream = 7;
                int64_t ks = t + lat > kfree ? t + lat : kfree;
                d.start_ns = (uint64_t)ks;
                kfree = ks + kernel_ns(k, r, &g);
                d.end_ns = (uint64_t)kfree;
                push(&ev[r], &d);
                t += launch;
                if ((k + 1) % per_bucket == 0 && b < g.buckets) {
                    /* event record, stream wait, allreduce call */
                    dpro_event e = {0};
                    e.kind = DPRO_KIND_API;
                    e.subkind = DPRO_API_RUNTIME;
                    e.thread = 100;
                    t += gapns;
                    e.name = 2; /* cudaEventRecord */
                    e.object = 0xe000 + (uint64_t)b;
                    e.stream = 7;
                    e.start_ns = (uint64_t)t;
                    e.end_ns = (uint64_t)(t + 1000);
                    push(&ev[r], &e);
                    t += 1000 + gapns;
                    e.name = 3; /* cudaStreamWaitEvent */
                    e.stream = 13;
                    e.start_ns = (uint64_t)t;
                    e.end_ns = (uint64_t)(t + 1000);
                    push(&ev[r], &e);
                    t += 1000 + gapns;
                    coll_launch[r][b] = t;
                    coll_ready_kernel[r][b] = kfree;
                    t += 6000;
                    b++;
                }
            }
            host_t[r] = t; /* the sync call starts here (after a gap) */
        }
        /* collectives, in order, across ranks */
        int64_t coll_end[64];
        for (int b = 0; b < g.buckets; b++) {
            int64_t arr[MAXR], last = 0;
            for (int r = 0; r < n; r++) {
                int64_t a = coll_launch[r][b] + lat;
                if (coll_ready_kernel[r][b] > a)
                    a = coll_ready_kernel[r][b];
                if (comm_free[r] > a)
                    a = comm_free[r];
                arr[r] = a;
                last = a > last ? a : last;
            }
            coll_end[b] = last + xfer;
            for (int r = 0; r < n; r++) {
                comm_free[r] = coll_end[b];
                int skip = r == g.skip_rank && seq == g.skip_seq;
                dpro_event h = {0};
                h.kind = DPRO_KIND_COLLECTIVE;
                h.subkind = DPRO_COLL_ALLREDUCE;
                h.thread = 100;
                h.start_ns = (uint64_t)coll_launch[r][b];
                h.end_ns = (uint64_t)(coll_launch[r][b] + 6000);
                h.correlation = corr[r]++;
                h.stream = 13;
                h.comm = comm;
                h.seq = (uint64_t)seq;
                h.count = (uint64_t)bucket_count;
                h.dtype = 7;
                h.bytes = (uint64_t)bucket_bytes;
                dpro_event d = {0};
                d.kind = DPRO_KIND_KERNEL;
                d.name = 4; /* nccl kernel */
                d.correlation = h.correlation;
                d.stream = 13;
                d.start_ns = (uint64_t)arr[r];
                d.end_ns = (uint64_t)coll_end[b];
                if (g.device_colls) {
                    h.value = DPRO_COLL_TIMING_DEVICE;
                    h.start_ns = d.start_ns / 1000 * 1000;
                    h.end_ns = (d.end_ns + 999) / 1000 * 1000;
                }
                if (!skip)
                    push(&ev[r], &h);
                if (!skip)
                    push(&ev[r], &d);
            }
            seq++;
        }
        for (int r = 0; r < n; r++) {
            int64_t t = host_t[r] + gapns;
            dpro_event s = {0};
            s.kind = DPRO_KIND_API;
            s.subkind = DPRO_API_RUNTIME;
            s.thread = 100;
            s.name = 5; /* cudaStreamSynchronize */
            s.stream = 13;
            s.start_ns = (uint64_t)t;
            int64_t e = coll_end[g.buckets - 1] > t ? coll_end[g.buckets - 1] : t;
            s.end_ns = (uint64_t)(e + 3000);
            push(&ev[r], &s);
            host_t[r] = (int64_t)s.end_ns + 20000; /* optimizer step etc. on the host */
            if (g.markers) {
                dpro_event m = {0};
                m.kind = DPRO_KIND_MARKER;
                m.subkind = DPRO_MARK_RANGE;
                m.thread = 100;
                m.name = 20 + (uint32_t)it;
                m.start_ns = (uint64_t)iter_start[it][r];
                m.end_ns = (uint64_t)host_t[r];
                push(&ev[r], &m);
            }
        }
    }
    /* truth: mean iteration time over iterations 1.. of rank 0 */
    double iter_us = 0;
    int cnt = 0;
    for (int it = 1; it + 1 < g.iters; it++, cnt++)
        iter_us += (double)(iter_start[it + 1][0] - iter_start[it][0]) / 1000.0;
    iter_us = cnt ? iter_us / cnt : 0;

    for (int r = 0; r < n; r++) {
        if (r == g.missing)
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s%d.dpro", dir, g.prefix, r);
        remove(path);
        dpro_writer *w;
        char eb[256];
        if (dpro_writer_open(path, NULL, &w, eb, sizeof eb) != DPRO_OK) {
            fprintf(stderr, "gen_traces: %s\n", eb);
            return 1;
        }
        uint32_t id;
        static const char *names[] = {
            "cudaLaunchKernel", "cudaEventRecord", "cudaStreamWaitEvent",
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
            "cudaStreamSynchronize"};
        for (int i = 0; i < 5; i++) {
            char spelled[160];
            snprintf(spelled, sizeof spelled, "%s%s", names[i], i == 3 ? "" : g.spelling);
            dpro_writer_intern(w, spelled, &id); /* ids 1..5 */
        }
        for (int i = 6; i < 10; i++) {
            char pad[16];
            snprintf(pad, sizeof pad, "pad%d", i);
            dpro_writer_intern(w, pad, &id);
        }
        for (int k = 0; k < 7; k++) {
            char kn[128];
            snprintf(kn, sizeof kn,
                     "void at::native::kernel_%d<float, \"q\">(float const*, float*)", k);
            dpro_writer_intern(w, kn, &id); /* 10..16 */
        }
        for (int i = 17; i < 20; i++) {
            char pad[16];
            snprintf(pad, sizeof pad, "pad%d", i);
            dpro_writer_intern(w, pad, &id);
        }
        for (int it = 0; it < g.iters; it++) {
            char nm[32];
            snprintf(nm, sizeof nm, "iteration %d", it);
            dpro_writer_intern(w, nm, &id); /* 20.. */
        }
        dpro_writer_set_meta(w, DPRO_META_SOURCE, "gen_traces");
        dpro_writer_set_meta_int(w, DPRO_META_RANK, r);
        dpro_writer_set_meta_int(w, DPRO_META_WORLD_SIZE, g.world ? g.world : n);
        dpro_writer_set_meta(w, DPRO_META_JOB_ID, g.job_id);
        dpro_writer_set_meta(w, DPRO_META_HOST, "genhost");
        dpro_writer_add_thread(w, 100, "main");
        dpro_comm_info ci = {.hash = comm, .rank = r, .size = n, .handle = 0x1000};
        dpro_writer_add_comm(w, &ci);
        qsort(ev[r].e, ev[r].n, sizeof *ev[r].e, cmp_start);
        /* cut: drop events starting after fraction of the rank's time span */
        int64_t first = ev[r].n ? (int64_t)ev[r].e[0].start_ns : 0, last = 0;
        for (size_t i = 0; i < ev[r].n; i++)
            if ((int64_t)ev[r].e[i].end_ns > last)
                last = (int64_t)ev[r].e[i].end_ns;
        int64_t cut =
            r == g.cut_rank ? first + (int64_t)((double)(last - first) * g.cut_frac) : INT64_MAX;
        int extreme_done = r != g.extreme_rank;
        for (size_t i = 0; i < ev[r].n; i++) {
            dpro_event e = ev[r].e[i];
            if (!extreme_done && !g.extreme_time && e.kind == DPRO_KIND_COLLECTIVE) {
                e.count = (uint64_t)INT64_MAX;
                extreme_done = 1;
            }
            if (!extreme_done && g.extreme_time && i + 1 == ev[r].n) {
                e.end_ns = (uint64_t)INT64_MAX - 1000;
                extreme_done = 1;
            }
            if ((int64_t)e.start_ns > cut)
                continue;
            if ((int64_t)e.end_ns > cut && e.kind == DPRO_KIND_MARKER)
                e.end_ns = 0;
            e.start_ns = (uint64_t)((int64_t)e.start_ns - g.skew_ns[r]);
            if (e.end_ns)
                e.end_ns = (uint64_t)((int64_t)e.end_ns - g.skew_ns[r]);
            dpro_writer_append(w, &e);
        }
        if (dpro_writer_close(w) != DPRO_OK) {
            fprintf(stderr, "gen_traces: closing %s failed\n", path);
            return 1;
        }
        free(ev[r].e);
    }
    printf("{\"iter_us\": %.3f, \"ranks\": %d, \"skew_us\": [", iter_us, n);
    for (int r = 0; r < n; r++)
        printf("%s%.3f", r ? ", " : "", (double)g.skew_ns[r] / 1000.0);
    printf("]}\n");
    return 0;
}
