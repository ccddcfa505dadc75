/*
 * bench_trace: write and read throughput of libdprotrace, and bytes per event on disk,
 * for a launch+kernel mix shaped like a training job.
 *
 *   bench_trace [--events N] [--zlib LEVEL] [--page-size BYTES] [--write PATH] [--keep]
 *
 * The mix: iterations of 400 kernel launches drawn from 160 distinct kernels (C++
 * template names, as PyTorch's), each launch recorded as a cudaLaunchKernel API event on
 * one host thread and a kernel event on one of two streams, with nanosecond jitter on every
 * timestamp and duration; per iteration one NVTX iteration range, one memcpy, and a host
 * synchronisation (so the device lags the host by at most one iteration, as in training). Figures
 * are printed, not asserted: this is a benchmark, not a test.
 */
#include "dprotrace.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NKERNELS 160
#define LAUNCHES_PER_ITER 400

static uint64_t
rnd(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

static double
now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

typedef struct gen {
    uint64_t seed, host_ns, dev_ns[2], corr;
    uint32_t kname[NKERNELS], api_launch, api_memcpy, iter_name;
    uint32_t grid[NKERNELS], block[NKERNELS];
    uint64_t base_dur[NKERNELS];
    int seq[LAUNCHES_PER_ITER];
    int pos;
    int64_t iteration;
    dpro_event pending[4];
    int npending;
} gen;

static void
gen_init(gen *g, dpro_writer *w)
{
    memset(g, 0, sizeof *g);
    g->seed = 0x1234567;
    g->host_ns = g->dev_ns[0] = g->dev_ns[1] = 1700000000000000000ull % 100000000000000ull;
    for (int k = 0; k < NKERNELS; k++) {
        char name[256];
        snprintf(name, sizeof name,
                 "void at::native::vectorized_elementwise_kernel<%d, "
                 "at::native::CUDAFunctor_add<float>, at::detail::Array<char*, %d> >(int, "
                 "at::native::CUDAFunctor_add<float>, at::detail::Array<char*, %d>)",
                 4 + k % 4, 3 + k % 3, k);
        dpro_writer_intern(w, name, &g->kname[k]);
        g->base_dur[k] = 2000 + rnd(&g->seed) % 200000;
        g->grid[k] = 1 + (uint32_t)(rnd(&g->seed) % 4096);
        g->block[k] = 128u << (rnd(&g->seed) % 3);
    }
    for (int i = 0; i < LAUNCHES_PER_ITER; i++)
        g->seq[i] = (int)(rnd(&g->seed) % NKERNELS);
    dpro_writer_intern(w, "cudaLaunchKernel", &g->api_launch);
    dpro_writer_intern(w, "cudaMemcpyAsync", &g->api_memcpy);
    dpro_writer_intern(w, "iteration", &g->iter_name);
}

/* Produces the next event of the mix into *e. */
static void
gen_next(gen *g, dpro_event *e)
{
    if (g->npending) {
        *e = g->pending[--g->npending];
        return;
    }
    memset(e, 0, sizeof *e);
    int k = g->seq[g->pos];
    int stream = g->pos % 7 == 0;
    uint64_t launch_start = g->host_ns + 500 + rnd(&g->seed) % 2500;
    uint64_t launch_end = launch_start + 2000 + rnd(&g->seed) % 2000;
    g->host_ns = launch_end;
    g->corr++;
    e->kind = DPRO_KIND_API;
    e->subkind = DPRO_API_RUNTIME;
    e->thread = 4242;
    e->name = g->api_launch;
    e->name2 = g->kname[k];
    e->start_ns = launch_start;
    e->end_ns = launch_end;
    e->correlation = g->corr;
    e->stream = stream ? 0x5591a2b3c400ull : 0;
    e->grid[0] = g->grid[k];
    e->grid[1] = e->grid[2] = 1;
    e->block[0] = g->block[k];
    e->block[1] = e->block[2] = 1;

    dpro_event *kev = &g->pending[g->npending++];
    *kev = *e;
    kev->kind = DPRO_KIND_KERNEL;
    kev->subkind = 0;
    kev->thread = 0;
    kev->name = g->kname[k];
    kev->name2 = 0;
    kev->device = 0;
    uint64_t ready = launch_start + 4000 + rnd(&g->seed) % 1000;
    uint64_t start =
        ready > g->dev_ns[stream] ? ready : g->dev_ns[stream] + 1000 + rnd(&g->seed) % 500;
    uint64_t dur = g->base_dur[k] + (rnd(&g->seed) % (g->base_dur[k] / 50 + 1));
    kev->start_ns = start;
    kev->end_ns = start + dur;
    g->dev_ns[stream] = kev->end_ns;

    if (++g->pos == LAUNCHES_PER_ITER) {
        /* the iteration ends with a host synchronisation (as loss.item() does): the host
         * waits for the device, so the device never lags more than one iteration */
        uint64_t dev_done = g->dev_ns[0] > g->dev_ns[1] ? g->dev_ns[0] : g->dev_ns[1];
        if (dev_done > g->host_ns)
            g->host_ns = dev_done + 3000 + rnd(&g->seed) % 2000;
        g->pos = 0;
        dpro_event *m = &g->pending[g->npending++];
        memset(m, 0, sizeof *m);
        m->kind = DPRO_KIND_MARKER;
        m->subkind = DPRO_MARK_ITERATION;
        m->thread = 4242;
        m->name = g->iter_name;
        m->value = g->iteration++;
        m->start_ns = launch_start - 100000;
        m->end_ns = g->host_ns;
        dpro_event *c = &g->pending[g->npending++];
        memset(c, 0, sizeof *c);
        c->kind = DPRO_KIND_MEMCPY;
        c->subkind = DPRO_COPY_H2D;
        c->bytes = 4u << 20;
        c->start_ns = g->dev_ns[0] + 1000;
        c->end_ns = c->start_ns + 90000 + rnd(&g->seed) % 1000;
        c->correlation = ++g->corr;
        g->dev_ns[0] = c->end_ns;
    }
}

int
main(int argc, char **argv)
{
    static const struct option opts[] = {{"events", required_argument, 0, 'n'},
                                         {"zlib", required_argument, 0, 'z'},
                                         {"write", required_argument, 0, 'w'},
                                         {"keep", no_argument, 0, 'k'},
                                         {"page-size", required_argument, 0, 'p'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    uint64_t nevents = 2000000;
    int zlevel = 0, keep = 0, c;
    uint32_t page_size = 0;
    char path[512] = "";
    while ((c = getopt_long(argc, argv, "n:z:p:w:kh", opts, NULL)) != -1) {
        switch (c) {
        case 'n':
            nevents = strtoull(optarg, NULL, 10);
            break;
        case 'z':
            zlevel = atoi(optarg);
            break;
        case 'p':
            page_size = (uint32_t)strtoul(optarg, NULL, 10);
            break;
        case 'w':
            snprintf(path, sizeof path, "%s", optarg);
            keep = 1;
            break;
        case 'k':
            keep = 1;
            break;
        default:
            fprintf(stderr, "usage: bench_trace [--events N] [--zlib L] [--page-size BYTES] "
                            "[--write PATH] [--keep]\n");
            return c == 'h' ? 0 : 2;
        }
    }
    if (!*path)
        snprintf(path, sizeof path, "%s/bench-trace-%d.dpro",
                 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());

    /* write */
    dpro_writer *w;
    dpro_writer_options o = {.zlib_level = zlevel, .page_size = page_size, .replace = 1};
    char err[512];
    gen g;
    dpro_event e;
    if (dpro_writer_open(path, &o, &w, err, sizeof err) != DPRO_OK) {
        fprintf(stderr, "bench_trace: %s\n", err);
        return 1;
    }
    dpro_writer_set_meta(w, DPRO_META_SOURCE, "bench_trace");
    dpro_writer_set_meta(w, DPRO_META_HOST, "bench");
    dpro_writer_set_meta_int(w, DPRO_META_RANK, 0);
    dpro_writer_set_meta_int(w, DPRO_META_WORLD_SIZE, 1);
    dpro_writer_set_meta_int(w, DPRO_META_PID, getpid());
    gen_init(&g, w);
    /* time generation alone, to subtract it */
    double t0 = now_s();
    {
        gen g2 = g;
        uint64_t sink = 0;
        for (uint64_t i = 0; i < nevents; i++) {
            gen_next(&g2, &e);
            sink += e.start_ns;
        }
        if (sink == 42)
            puts("");
    }
    double tgen = now_s() - t0;
    t0 = now_s();
    for (uint64_t i = 0; i < nevents; i++) {
        gen_next(&g, &e);
        if (dpro_writer_append(w, &e) != DPRO_OK) {
            fprintf(stderr, "bench_trace: %s\n", dpro_writer_errmsg(w));
            return 1;
        }
    }
    uint64_t zbytes;
    if (dpro_writer_flush(w) != DPRO_OK) {
        fprintf(stderr, "bench_trace: %s\n", dpro_writer_errmsg(w));
        return 1;
    }
    zbytes = dpro_writer_bytes(w);
    dpro_writer_close(w);
    double twrite = now_s() - t0 - tgen;
    struct stat sb;
    stat(path, &sb);

    /* read */
    dpro_reader *r;
    dpro_iter *it;
    uint64_t n = 0;
    t0 = now_s();
    if (dpro_reader_open(path, &r, err, sizeof err) != DPRO_OK ||
        dpro_iter_open(r, &it) != DPRO_OK) {
        fprintf(stderr, "bench_trace: %s\n", err);
        return 1;
    }
    while (dpro_iter_next(it, &e) == 1)
        n++;
    dpro_iter_close(it);
    dpro_reader_close(r);
    double tread = now_s() - t0;

    printf("event mix: launch (cudaLaunchKernel API) + kernel, 160 kernel names, 400 "
           "launches/iteration, ns jitter; per iteration 1 marker + 1 memcpy + a host sync\n");
    printf("events:            %llu\n", (unsigned long long)nevents);
    printf("write throughput:  %.2f M events/s (one core: append + encode + zlib + SQLite)\n",
           nevents / twrite / 1e6);
    printf("read throughput:   %.2f M events/s (decode + time-ordered merge)\n", n / tread / 1e6);
    printf("bytes/event:       %.2f on disk (file), %.2f in compressed batches\n",
           (double)sb.st_size / nevents, (double)zbytes / nevents);
    printf("file:              %s (%lld bytes)\n", path, (long long)sb.st_size);
    if (n != nevents) {
        fprintf(stderr, "bench_trace: read %llu events, wrote %llu\n", (unsigned long long)n,
                (unsigned long long)nevents);
        return 1;
    }
    if (!keep) { /* the reader leaves SQLite's WAL and shared-memory files behind */
        char side[sizeof path + 8];
        unlink(path);
        snprintf(side, sizeof side, "%s-wal", path);
        unlink(side);
        snprintf(side, sizeof side, "%s-shm", path);
        unlink(side);
    }
    return 0;
}
