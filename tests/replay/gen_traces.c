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
 *        [--skew R:US]... [--straggler R:F]... [--skip R:SEQ] [--cut R:FRACTION]
 *        [--missing R] [--job-id ID] [--world W] [--no-markers] [--prefix P]
 *        [--spelling SUFFIX] [--device-collectives] [--extreme R:nelems|R:time]
 *        [--pause IT:SECONDS] [--stall R:IT:SECONDS] [--cpu CPUS:DEMAND[:HOSTS]]
 *        [--samples TEXT] [--host-stalls SECONDS] [--stage R]... [--no-host]
 *        [--leave R:FRACTION]... [--allocs]
 *
 * --no-host records no host (no meta host), as a trace whose writer did not know it.
 *
 * --spelling writes the CUDA runtime calls with a suffix, as the collector records the
 * per-thread default stream entry points (cudaEventRecord_ptsz, ...): the same job under
 * another name of every call. --device-collectives writes each collective as a
 * device-timed record (value DPRO_COLL_TIMING_DEVICE, on the main thread, with its
 * kernel's times rounded to the microsecond as a profiler's export rounds them) instead of
 * the host call an interposer records. --extreme writes numbers a trace can hold but a
 * replay cannot compute with, on rank R: nelems, a first collective of 2^63-1 elements;
 * time, a last event that ends 2^63 - 1 us after the epoch. --pause makes every rank's
 * host thread idle SECONDS before iteration IT (a checkpoint, an evaluation): a gap longer
 * than 32 bits of nanoseconds hold from 4.3 s on. --cpu writes what the collector records
 * of a rank's host: host_cpus CPUS, cpu_samples of DEMAND CPU seconds per second, and the
 * ranks spread over HOSTS hosts (default 1) in rank order; --samples replaces rank 0's
 * samples with TEXT (a malformed one, for the reader's error). --stall makes rank R's
 * first kernel of iteration IT start SECONDS later than its stream and launch allow (the
 * device held by something the trace does not show; the kernels after it queue behind it).
 * --host-stalls makes every rank's host thread lose its core for SECONDS once an
 * iteration, before a launch whose place moves from iteration to iteration.
 * --stage makes rank R run another stage of the model: its compute kernels have other
 * names (the same times), so that it folds with the ranks of its stage only.
 * --leave makes rank R leave each iteration's last all-reduce FRACTION of its transfer
 * before the last rank does (a ring's last step reaches the ranks one after the other):
 * its NCCL kernel ends, and its communication stream is free, that much sooner. It
 * leaves the others with the rest, so that the clock alignment (the median over the
 * collectives, with 3 buckets or more) does not take its early end for clock skew.
 * --allocs makes every rank allocate device memory (64 MiB before the first iteration,
 * 4 MiB in it, never freed), as a caching allocator does once.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dprotrace.h"

#define MAXR 64
#define MAXITERS 64   /* iterations a job can have */
#define MAXBUCKETS 64 /* all-reduce buckets per iteration */

typedef struct gen {
    int ranks, iters, ops, buckets, world;
    int64_t skew_ns[MAXR];
    double factor[MAXR]; /* --straggler: each rank's kernel time factor (0: 1) */
    int stage[MAXR];     /* --stage: 1 for a rank of the other stage */
    double leave[MAXR];  /* --leave: the share of a transfer each rank leaves early */
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
    int pause_iter;       /* --pause: the iteration the host threads idle before (-1 none) */
    int64_t pause_ns;
    int cpus;                   /* --cpu: meta host_cpus (0: no host_cpus, no cpu_samples) */
    double demand;              /* --cpu: each rank's CPU seconds per second */
    int hosts;                  /* --cpu: the hosts the ranks are spread over, in rank order */
    int no_host;                /* --no-host: no meta host */
    const char *samples;        /* --samples: rank 0's cpu_samples text as given */
    int stall_rank, stall_iter; /* --stall: the rank and iteration (-1 none) */
    int64_t stall_ns;
    int64_t host_stall_ns; /* --host-stalls: each rank's host thread's lost timeslice */
    int allocs;            /* --allocs: device allocations before and in the first iteration */
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
    return rank < MAXR && g->factor[rank] > 0 ? (int64_t)(base * g->factor[rank]) : base;
}

/* The job's fixed costs, in ns (beta in bytes per ns), and its one communicator. */
static const uint64_t comm_hash = 0xc0ffee1234ULL;
static const int64_t launch_ns = 4000, gap_ns = 1500, lat_ns = 2500, alpha_ns = 12000;
static const double beta = 20.0;
static const int64_t bucket_count = 1 << 20; /* floats per all-reduce */

/* The simulated job: per rank its events and clocks, carried from one iteration to the next.
 * Times are true (aligned) times; the skew is applied when the trace is written. */
typedef struct job {
    const gen *g;
    int n;        /* ranks */
    int64_t xfer; /* one all-reduce's transfer time */
    evbuf ev[MAXR];
    int64_t host_t[MAXR]; /* where the rank's host thread is */
    uint64_t corr[MAXR];  /* the rank's next correlation id */
    int64_t iter_start[MAXITERS][MAXR];
    int64_t comm_free[MAXR]; /* when the rank's communication stream is free */
    long seq;                /* the next collective's sequence number */
    int iter;                /* the iteration being made */
    /* this iteration's collectives, per rank and bucket: when the call was made and when
     * the kernel it waits for ends; and per bucket when it ends on every rank */
    int64_t coll_launch[MAXR][MAXBUCKETS], coll_ready_kernel[MAXR][MAXBUCKETS];
    int64_t coll_end[MAXBUCKETS];
} job;

/* Reads the options into g and the output directory into *dir. Returns 0, or 2 on a bad
 * option or argument count. */
static int
parse_options(int argc, char **argv, gen *g, const char **dir)
{
    static const struct option lo[] = {
        {"ranks", 1, 0, 'r'},
        {"iters", 1, 0, 'i'},
        {"ops", 1, 0, 'o'},
        {"buckets", 1, 0, 'b'},
        {"skew", 1, 0, 's'},
        {"straggler", 1, 0, 'S'},
        {"skip", 1, 0, 'k'},
        {"cut", 1, 0, 'c'},
        {"missing", 1, 0, 'm'},
        {"job-id", 1, 0, 'j'},
        {"world", 1, 0, 'w'},
        {"no-markers", 0, 0, 'n'},
        {"prefix", 1, 0, 'p'},
        {"spelling", 1, 0, 'P'},
        {"device-collectives", 0, 0, 'D'},
        {"extreme", 1, 0, 'x'},
        {"pause", 1, 0, 'z'},
        {"cpu", 1, 0, 'C'},
        {"samples", 1, 0, 'Q'},
        {"stall", 1, 0, 'T'},
        {"host-stalls", 1, 0, 'H'},
        {"stage", 1, 0, 'G'},
        {"no-host", 0, 0, 'N'},
        {"leave", 1, 0, 'L'},
        {"allocs", 0, 0, 'A'},
        {0, 0, 0, 0},
    };
    int rc = 0, c;
    while (rc == 0 && (c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        int r;
        double v;
        switch (c) {
        case 'r':
            g->ranks = atoi(optarg);
            break;
        case 'N':
            g->no_host = 1;
            break;
        case 'i':
            g->iters = atoi(optarg);
            break;
        case 'o':
            g->ops = atoi(optarg);
            break;
        case 'b':
            g->buckets = atoi(optarg);
            break;
        case 's':
            if (sscanf(optarg, "%d:%lf", &r, &v) == 2 && r >= 0 && r < MAXR)
                g->skew_ns[r] = (int64_t)(v * 1000);
            break;
        case 'S':
            if (sscanf(optarg, "%d:%lf", &r, &v) == 2 && r >= 0 && r < MAXR)
                g->factor[r] = v;
            break;
        case 'L':
            if (sscanf(optarg, "%d:%lf", &r, &v) != 2 || r < 0 || r >= MAXR || !(v >= 0) || v >= 1)
                rc = 2;
            else
                g->leave[r] = v;
            break;
        case 'G':
            r = atoi(optarg);
            if (r >= 0 && r < MAXR)
                g->stage[r] = 1;
            break;
        case 'k':
            sscanf(optarg, "%d:%ld", &g->skip_rank, &g->skip_seq);
            break;
        case 'c':
            sscanf(optarg, "%d:%lf", &g->cut_rank, &g->cut_frac);
            break;
        case 'm':
            g->missing = atoi(optarg);
            break;
        case 'j':
            g->job_id = optarg;
            break;
        case 'w':
            g->world = atoi(optarg);
            break;
        case 'n':
            g->markers = 0;
            break;
        case 'p':
            g->prefix = optarg;
            break;
        case 'P':
            g->spelling = optarg;
            break;
        case 'D':
            g->device_colls = 1;
            break;
        case 'x': {
            char what[16] = "";
            if (sscanf(optarg, "%d:%15s", &g->extreme_rank, what) != 2 ||
                (strcmp(what, "time") != 0 && strcmp(what, "nelems") != 0))
                rc = 2;
            g->extreme_time = strcmp(what, "time") == 0;
            break;
        }
        case 'C':
            g->hosts = 1;
            if (sscanf(optarg, "%d:%lf:%d", &g->cpus, &g->demand, &g->hosts) < 2 || g->cpus < 1 ||
                !(g->demand >= 0) || g->hosts < 1)
                rc = 2;
            break;
        case 'Q':
            g->samples = optarg;
            break;
        case 'z':
            if (sscanf(optarg, "%d:%lf", &g->pause_iter, &v) != 2 || g->pause_iter < 0 || !(v >= 0))
                rc = 2;
            g->pause_ns = (int64_t)(v * 1e9);
            break;
        case 'T':
            if (sscanf(optarg, "%d:%d:%lf", &g->stall_rank, &g->stall_iter, &v) != 3 ||
                g->stall_rank < 0 || g->stall_iter < 0 || !(v >= 0))
                rc = 2;
            g->stall_ns = (int64_t)(v * 1e9);
            break;
        case 'A':
            g->allocs = 1;
            break;
        case 'H':
            if (sscanf(optarg, "%lf", &v) != 1 || !(v >= 0))
                rc = 2;
            g->host_stall_ns = (int64_t)(v * 1e9);
            break;
        default:
            rc = 2;
        }
    }
    if (rc == 0 &&
        (optind + 1 != argc || g->ranks < 1 || g->ranks > MAXR || g->buckets < 1 ||
         g->buckets > MAXBUCKETS || g->iters < 1 || g->iters > MAXITERS || g->ops < g->buckets))
        rc = 2;
    if (rc == 0)
        *dir = argv[optind];
    return rc;
}

/* Rank r's main thread in iteration it: the kernel launches, and after every ops/buckets of
 * them an event record, a stream wait and the all-reduce call of the next bucket (whose
 * times go to coll_launch and coll_ready_kernel). Leaves host_t[r] where the sync call
 * starts (after a gap). */
static void
launch_rank(job *j, int r)
{
    const gen *g = j->g;
    int per_bucket = g->ops / g->buckets;
    int64_t t = j->host_t[r], kfree = 0;
    int b = 0;
    for (int k = 0; k < g->ops; k++) {
        t += gap_ns;
        if (k == (j->iter * 7 + r * 3) % g->ops)
            t += g->host_stall_ns;
        dpro_event a = {0};
        a.kind = DPRO_KIND_API;
        a.subkind = DPRO_API_RUNTIME;
        a.thread = 100;
        a.name = 1; /* interned below: 1 cudaLaunchKernel */
        a.start_ns = (uint64_t)t;
        a.end_ns = (uint64_t)(t + launch_ns);
        a.correlation = j->corr[r]++;
        a.stream = 7;
        push(&j->ev[r], &a);
        dpro_event d = {0};
        d.kind = DPRO_KIND_KERNEL;
        d.name = 10 + (uint32_t)((k + 3 * g->stage[r]) % 7); /* another stage: other names */
        d.correlation = a.correlation;
        d.stream = 7;
        int64_t ks = t + lat_ns > kfree ? t + lat_ns : kfree;
        if (k == 0 && r == g->stall_rank && j->iter == g->stall_iter)
            ks += g->stall_ns;
        d.start_ns = (uint64_t)ks;
        kfree = ks + kernel_ns(k, r, g);
        d.end_ns = (uint64_t)kfree;
        push(&j->ev[r], &d);
        t += launch_ns;
        if ((k + 1) % per_bucket == 0 && b < g->buckets) {
            /* event record, stream wait, allreduce call */
            dpro_event e = {0};
            e.kind = DPRO_KIND_API;
            e.subkind = DPRO_API_RUNTIME;
            e.thread = 100;
            t += gap_ns;
            e.name = 2; /* cudaEventRecord */
            e.object = 0xe000 + (uint64_t)b;
            e.stream = 7;
            e.start_ns = (uint64_t)t;
            e.end_ns = (uint64_t)(t + 1000);
            push(&j->ev[r], &e);
            t += 1000 + gap_ns;
            e.name = 3; /* cudaStreamWaitEvent */
            e.stream = 13;
            e.start_ns = (uint64_t)t;
            e.end_ns = (uint64_t)(t + 1000);
            push(&j->ev[r], &e);
            t += 1000 + gap_ns;
            j->coll_launch[r][b] = t;
            j->coll_ready_kernel[r][b] = kfree;
            t += 6000;
            b++;
        }
    }
    j->host_t[r] = t;
}

/* When rank r leaves all-reduce b: at its end, less the --leave share of its transfer on
 * the iteration's last. */
static int64_t
left_at(const job *j, int r, int b)
{
    double share = b == j->g->buckets - 1 ? j->g->leave[r] : 0;
    return j->coll_end[b] - (int64_t)(share * (double)j->xfer);
}

/* The iteration's all-reduces, bucket by bucket across the ranks: each starts on a rank when
 * its call was made, the kernel it waits for ended and the previous one is done there, and
 * ends on every rank xfer after the last rank arrived (sooner on a rank that --leave
 * makes leave early). The --skip collective is left out of
 * its rank's trace; --device-collectives records it with its kernel's rounded times. */
static void
run_collectives(job *j)
{
    const gen *g = j->g;
    int64_t bucket_bytes = bucket_count * 4;
    for (int b = 0; b < g->buckets; b++) {
        int64_t arr[MAXR], last = 0;
        for (int r = 0; r < j->n; r++) {
            int64_t a = j->coll_launch[r][b] + lat_ns;
            if (j->coll_ready_kernel[r][b] > a)
                a = j->coll_ready_kernel[r][b];
            if (j->comm_free[r] > a)
                a = j->comm_free[r];
            arr[r] = a;
            last = a > last ? a : last;
        }
        j->coll_end[b] = last + j->xfer;
        for (int r = 0; r < j->n; r++) {
            j->comm_free[r] = left_at(j, r, b);
            int skip = r == g->skip_rank && j->seq == g->skip_seq;
            dpro_event h = {0};
            h.kind = DPRO_KIND_COLLECTIVE;
            h.subkind = DPRO_COLL_ALLREDUCE;
            h.thread = 100;
            h.start_ns = (uint64_t)j->coll_launch[r][b];
            h.end_ns = (uint64_t)(j->coll_launch[r][b] + 6000);
            h.correlation = j->corr[r]++;
            h.stream = 13;
            h.comm = comm_hash;
            h.seq = (uint64_t)j->seq;
            h.count = (uint64_t)bucket_count;
            h.dtype = 7;
            h.bytes = (uint64_t)bucket_bytes;
            dpro_event d = {0};
            d.kind = DPRO_KIND_KERNEL;
            d.name = 4; /* nccl kernel */
            d.correlation = h.correlation;
            d.stream = 13;
            d.start_ns = (uint64_t)arr[r];
            d.end_ns = (uint64_t)left_at(j, r, b);
            if (g->device_colls) {
                h.value = DPRO_COLL_TIMING_DEVICE;
                h.start_ns = d.start_ns / 1000 * 1000;
                h.end_ns = (d.end_ns + 999) / 1000 * 1000;
            }
            if (!skip)
                push(&j->ev[r], &h);
            if (!skip)
                push(&j->ev[r], &d);
        }
        j->seq++;
    }
}

/* The end of iteration it on every rank: cudaStreamSynchronize until the last all-reduce
 * ends, the host's own work after it, and the NVTX range over the whole iteration. */
static void
end_iteration(job *j, int it)
{
    const gen *g = j->g;
    for (int r = 0; r < j->n; r++) {
        int64_t t = j->host_t[r] + gap_ns;
        dpro_event s = {0};
        s.kind = DPRO_KIND_API;
        s.subkind = DPRO_API_RUNTIME;
        s.thread = 100;
        s.name = 5; /* cudaStreamSynchronize */
        s.stream = 13;
        s.start_ns = (uint64_t)t;
        int64_t last = left_at(j, r, g->buckets - 1);
        int64_t e = last > t ? last : t;
        s.end_ns = (uint64_t)(e + 3000);
        push(&j->ev[r], &s);
        j->host_t[r] = (int64_t)s.end_ns + 20000; /* optimizer step etc. on the host */
        if (g->markers) {
            dpro_event m = {0};
            m.kind = DPRO_KIND_MARKER;
            m.subkind = DPRO_MARK_RANGE;
            m.thread = 100;
            m.name = 20 + (uint32_t)it;
            m.start_ns = (uint64_t)j->iter_start[it][r];
            m.end_ns = (uint64_t)j->host_t[r];
            push(&j->ev[r], &m);
        }
    }
}

/* Runs the job's iterations into j->ev. */
static void
simulate(job *j)
{
    const gen *g = j->g;
    for (int r = 0; r < j->n; r++) {
        j->host_t[r] = 1000000000 + r * 777;
        j->corr[r] = 1;
        j->comm_free[r] = 0;
    }
    for (int it = 0; it < g->iters; it++) {
        j->iter = it;
        for (int r = 0; r < j->n; r++) {
            if (it == g->pause_iter)
                j->host_t[r] += g->pause_ns;
            j->iter_start[it][r] = j->host_t[r];
            for (int k = 0; g->allocs && it == 0 && k < 2; k++) {
                /* the weights before the first iteration, an activation in it */
                dpro_event m = {0};
                m.kind = DPRO_KIND_MEMORY;
                m.subkind = DPRO_MEM_ALLOC;
                m.value = DPRO_MEMSPACE_DEVICE;
                m.thread = 100;
                m.bytes = (uint64_t)(k ? 4 : 64) << 20;
                m.address = 0x7f0000000000ULL + ((uint64_t)k << 32);
                m.start_ns = (uint64_t)(j->host_t[r] + (k ? 500 : -5000));
                m.end_ns = m.start_ns + 100;
                push(&j->ev[r], &m);
            }
            launch_rank(j, r);
        }
        run_collectives(j);
        end_iteration(j, it);
    }
}

/* The truth: rank 0's mean iteration time over iterations 1.. (the last one's end is not
 * known: it is the start of none), in us; 0 with fewer than three iterations. */
static double
truth_iter_us(const job *j)
{
    double iter_us = 0;
    int cnt = 0;
    for (int it = 1; it + 1 < j->g->iters; it++, cnt++)
        iter_us += (double)(j->iter_start[it + 1][0] - j->iter_start[it][0]) / 1000.0;
    return cnt ? iter_us / cnt : 0;
}

/* Interns the job's strings in the order that gives the ids its events use: the runtime
 * calls (in --spelling) and the NCCL kernel 1..5, the compute kernels 10..16, the
 * iterations' ranges 20.., padding between. */
static void
intern_names(dpro_writer *w, const gen *g)
{
    uint32_t id;
    static const char *names[] = {
        "cudaLaunchKernel", "cudaEventRecord", "cudaStreamWaitEvent",
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
        "cudaStreamSynchronize"};
    for (int i = 0; i < 5; i++) {
        char spelled[160];
        snprintf(spelled, sizeof spelled, "%s%s", names[i], i == 3 ? "" : g->spelling);
        dpro_writer_intern(w, spelled, &id); /* ids 1..5 */
    }
    for (int i = 6; i < 10; i++) {
        char pad[16];
        snprintf(pad, sizeof pad, "pad%d", i);
        dpro_writer_intern(w, pad, &id);
    }
    for (int k = 0; k < 7; k++) {
        char kn[128];
        snprintf(kn, sizeof kn, "void at::native::kernel_%d<float, \"q\">(float const*, float*)",
                 k);
        dpro_writer_intern(w, kn, &id); /* 10..16 */
    }
    for (int i = 17; i < 20; i++) {
        char pad[16];
        snprintf(pad, sizeof pad, "pad%d", i);
        dpro_writer_intern(w, pad, &id);
    }
    for (int it = 0; it < g->iters; it++) {
        char nm[32];
        snprintf(nm, sizeof nm, "iteration %d", it);
        dpro_writer_intern(w, nm, &id); /* 20.. */
    }
}

/* Appends rank r's events, in start order, with the faults of the options: the trace cut at
 * --cut's fraction of the rank's time span (a range still open there has no end), the
 * --extreme number, the rank's clock skew subtracted. */
static void
append_events(dpro_writer *w, job *j, int r)
{
    const gen *g = j->g;
    evbuf *b = &j->ev[r];
    qsort(b->e, b->n, sizeof *b->e, cmp_start);
    int64_t first = b->n ? (int64_t)b->e[0].start_ns : 0, last = 0;
    for (size_t i = 0; i < b->n; i++)
        if ((int64_t)b->e[i].end_ns > last)
            last = (int64_t)b->e[i].end_ns;
    int64_t cut =
        r == g->cut_rank ? first + (int64_t)((double)(last - first) * g->cut_frac) : INT64_MAX;
    int extreme_done = r != g->extreme_rank;
    for (size_t i = 0; i < b->n; i++) {
        dpro_event e = b->e[i];
        if (!extreme_done && !g->extreme_time && e.kind == DPRO_KIND_COLLECTIVE) {
            e.count = (uint64_t)INT64_MAX;
            extreme_done = 1;
        }
        if (!extreme_done && g->extreme_time && i + 1 == b->n) {
            e.end_ns = (uint64_t)INT64_MAX - 1000;
            extreme_done = 1;
        }
        if ((int64_t)e.start_ns > cut)
            continue;
        if ((int64_t)e.end_ns > cut && e.kind == DPRO_KIND_MARKER)
            e.end_ns = 0;
        e.start_ns = (uint64_t)((int64_t)e.start_ns - g->skew_ns[r]);
        if (e.end_ns)
            e.end_ns = (uint64_t)((int64_t)e.end_ns - g->skew_ns[r]);
        dpro_writer_append(w, &e);
    }
}

/* --cpu: writes rank r's host (genhostK, its share of the hosts in rank order), host_cpus
 * and cpu_samples, a sample a millisecond over its events' span (its own clock) using
 * g->demand of a CPU; --samples: rank 0's samples text as given. */
static void
write_cpu_meta(dpro_writer *w, const job *j, int r)
{
    const gen *g = j->g;
    char host[32];
    static char text[1 << 16];
    size_t len = 0;
    int64_t t0 = INT64_MAX, t1 = 0;
    for (size_t i = 0; i < j->ev[r].n; i++) {
        int64_t a = (int64_t)j->ev[r].e[i].start_ns - g->skew_ns[r];
        int64_t b = (int64_t)j->ev[r].e[i].end_ns - g->skew_ns[r];
        t0 = a < t0 ? a : t0;
        t1 = b > t1 ? b : t1;
    }
    snprintf(host, sizeof host, "genhost%d", r * g->hosts / j->n);
    dpro_writer_set_meta(w, DPRO_META_HOST, host);
    dpro_writer_set_meta_int(w, "host_cpus", g->cpus);
    for (int64_t t = t0 / 1000; t <= t1 / 1000 + 1000 && len + 64 < sizeof text; t += 1000)
        len +=
            (size_t)snprintf(text + len, sizeof text - len, "%s%lld:%lld", len ? "," : "",
                             (long long)t, (long long)(5000 + g->demand * (double)(t - t0 / 1000)));
    dpro_writer_set_meta(w, "cpu_samples", r == 0 && g->samples ? g->samples : text);
}

/* Writes rank r's trace DIR/PREFIXr.dpro (replacing one there): strings, meta, thread,
 * communicator, events. Returns 0, or 1 after saying on stderr what failed. */
static int
write_rank(job *j, int r, const char *dir)
{
    const gen *g = j->g;
    char path[4096], eb[256];
    dpro_writer *w = NULL;
    int rc = 0;
    snprintf(path, sizeof path, "%s/%s%d.dpro", dir, g->prefix, r);
    remove(path);
    if (dpro_writer_open(path, NULL, &w, eb, sizeof eb) != DPRO_OK) {
        fprintf(stderr, "gen_traces: %s\n", eb);
        rc = 1;
    }
    if (rc == 0) {
        intern_names(w, g);
        dpro_writer_set_meta(w, DPRO_META_SOURCE, "gen_traces");
        dpro_writer_set_meta_int(w, DPRO_META_RANK, r);
        dpro_writer_set_meta_int(w, DPRO_META_WORLD_SIZE, g->world ? g->world : j->n);
        dpro_writer_set_meta(w, DPRO_META_JOB_ID, g->job_id);
        if (!g->no_host)
            dpro_writer_set_meta(w, DPRO_META_HOST, "genhost");
        if (g->cpus > 0)
            write_cpu_meta(w, j, r);
        dpro_writer_add_thread(w, 100, "main");
        dpro_comm_info ci = {.hash = comm_hash, .rank = r, .size = j->n, .handle = 0x1000};
        dpro_writer_add_comm(w, &ci);
        append_events(w, j, r);
        if (dpro_writer_close(w) != DPRO_OK) {
            fprintf(stderr, "gen_traces: closing %s failed\n", path);
            rc = 1;
        }
    }
    return rc;
}

int
main(int argc, char **argv)
{
    gen g = {.ranks = 4,
             .iters = 6,
             .ops = 40,
             .buckets = 4,
             .world = 0,
             .skip_rank = -1,
             .cut_rank = -1,
             .missing = -1,
             .markers = 1,
             .job_id = "gen-1",
             .prefix = "rank",
             .spelling = "",
             .extreme_rank = -1,
             .pause_iter = -1,
             .stall_rank = -1,
             .stall_iter = -1};
    static job j;
    const char *dir = NULL;
    int rc = parse_options(argc, argv, &g, &dir);
    if (rc == 0) {
        mkdir(dir, 0755);
        j.g = &g;
        j.n = g.ranks;
        j.xfer = alpha_ns + (int64_t)(2.0 * (j.n - 1) / j.n * (double)(bucket_count * 4) / beta);
        simulate(&j);
    }
    for (int r = 0; rc == 0 && r < j.n; r++)
        if (r != g.missing)
            rc = write_rank(&j, r, dir);
    if (rc == 0) {
        printf("{\"iter_us\": %.3f, \"ranks\": %d, \"skew_us\": [", truth_iter_us(&j), j.n);
        for (int r = 0; r < j.n; r++)
            printf("%s%.3f", r ? ", " : "", (double)g.skew_ns[r] / 1000.0);
        printf("]}\n");
    }
    for (int r = 0; r < j.n; r++)
        free(j.ev[r].e);
    return rc;
}
