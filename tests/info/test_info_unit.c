/* test_info_unit: the analyses of replay/analyses/ on traces written here with the trace
 * writer, as the collector writes them (no Kineto import): a stream wait through an event
 * handle (cudaEventRecord / cudaStreamWaitEvent calls with stream and handle) gives
 * kernel wait; a graph launch's kernels are launched by another call; a copy's size class;
 * an empty trace gives empty analyses. Every figure is worked out by hand below. */
#include "config.h"
#include "dprotrace.h"
#include "replay/analyses/ana_int.h"
#include "tests/unit/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { S_LAUNCH = 1, S_RECORD, S_WAIT, S_GRAPH, S_KX, S_KY, S_KZ, S_COPY, S_N };

static const char *const names[S_N] = {"",
                                       "cudaLaunchKernel",
                                       "cudaEventRecord",
                                       "cudaStreamWaitEvent",
                                       "cudaGraphLaunch",
                                       "kX",
                                       "kY",
                                       "kZ",
                                       "Memcpy DtoH"};

static dpro_event
api(uint32_t name, uint64_t t0, uint64_t t1, uint64_t corr, uint64_t stream, uint64_t object)
{
    dpro_event e;
    memset(&e, 0, sizeof e);
    e.kind = DPRO_KIND_API;
    e.subkind = DPRO_API_RUNTIME;
    e.name = name;
    e.thread = 7;
    e.start_ns = t0;
    e.end_ns = t1;
    e.correlation = corr;
    e.stream = stream;
    e.object = object;
    return e;
}

static dpro_event
op(uint32_t kind, uint32_t name, uint64_t t0, uint64_t t1, uint64_t corr, uint64_t stream,
   uint64_t bytes)
{
    dpro_event e;
    memset(&e, 0, sizeof e);
    e.kind = kind;
    e.name = name;
    e.start_ns = t0;
    e.end_ns = t1;
    e.correlation = corr;
    e.stream = stream;
    e.bytes = bytes;
    return e;
}

/* Writes the events to path; returns 0 or -1. */
static int
write_trace(const char *path, const dpro_event *ev, size_t n)
{
    dpro_writer *w = NULL;
    char err[DPRO_ERRBUF_SIZE];
    int rc = dpro_writer_open(path, NULL, &w, err, sizeof err);
    for (int i = 1; rc == DPRO_OK && i < S_N; i++) {
        uint32_t id;
        rc = dpro_writer_intern(w, names[i], &id);
        if (rc == DPRO_OK && id != (uint32_t)i)
            rc = DPRO_ERR_ARG;
    }
    for (size_t i = 0; rc == DPRO_OK && i < n; i++)
        rc = dpro_writer_append(w, &ev[i]);
    if (rc != DPRO_OK)
        fprintf(stderr, "%s: %s\n", path, w ? dpro_writer_errmsg(w) : err);
    if (dpro_writer_close(w) != DPRO_OK)
        rc = -1;
    return rc == DPRO_OK ? 0 : -1;
}

/* Reads path through the analyses asked for; returns the collection (NULL on failure). */
static ana_collect *
analyse(const char *path, unsigned which, dpro_reader **r)
{
    ana_options o = {which, 10, 10, 10};
    ana_collect *c = NULL;
    dpro_iter *it = NULL;
    dpro_event ev;
    int rc = dpro_reader_open(path, r, NULL, 0) == DPRO_OK ? 0 : -1;
    if (rc == 0)
        rc = ana_collect_new(*r, &o, &c);
    if (rc == 0 && dpro_iter_open(*r, &it) != DPRO_OK)
        rc = -1;
    while (rc == 0 && dpro_iter_next(it, &ev) == 1)
        rc = ana_collect_event(c, &ev);
    dpro_iter_close(it);
    if (rc == 0)
        rc = ana_collect_finish(c);
    if (rc == 0) {
        /* the writers must not fail on any of it */
        FILE *null = fopen("/dev/null", "w");
        json_writer w;
        json_init(&w, null, 1);
        json_begin_object(&w);
        ana_write_json(&w, c);
        json_end_object(&w);
        ana_print(null, "test", c);
        fclose(null);
    }
    if (rc != 0) {
        ana_collect_free(c);
        c = NULL;
    }
    return c;
}

static const ana_idle_row *
idle_row(const ana_collect *c, uint64_t stream)
{
    for (size_t i = 0; i < c->idle.nrows; i++)
        if (c->idle.rows[i].stream == stream)
            return &c->idle.rows[i];
    return NULL;
}

static void
test_collector_wait(const char *dir)
{
    char path[4096];
    dpro_reader *r = NULL;
    /* stream 20 waits (handle 0xabc, recorded on stream 10 after kX) before its second kY:
     * gap 3000..11000 = 500 host wait (the launch ended at 3500), 6500 kernel wait (kX
     * ended at 10000), 1000 other */
    const dpro_event ev[] = {
        api(S_LAUNCH, 0, 1000, 1, 10, 0),
        api(S_LAUNCH, 1500, 2000, 2, 20, 0),
        op(DPRO_KIND_KERNEL, S_KX, 2000, 10000, 1, 10, 0),
        api(S_RECORD, 2100, 2200, 3, 10, 0xabc),
        api(S_WAIT, 2300, 2400, 4, 20, 0xabc),
        api(S_LAUNCH, 2500, 3500, 5, 20, 0),
        op(DPRO_KIND_KERNEL, S_KY, 2500, 3000, 2, 20, 0),
        /* a graph launch of two kernels (other_launched), a later record of the handle */
        api(S_GRAPH, 4000, 4100, 6, 30, 0),
        op(DPRO_KIND_KERNEL, S_KZ, 5000, 5100, 6, 30, 0),
        op(DPRO_KIND_KERNEL, S_KZ, 5100, 5200, 6, 30, 0),
        api(S_RECORD, 5000, 5050, 7, 30, 0xabc),
        op(DPRO_KIND_KERNEL, S_KY, 11000, 12000, 5, 20, 0),
        /* a copy of 5 bytes: size class [4, 16) */
        op(DPRO_KIND_MEMCPY, S_COPY, 13000, 13500, 0, 40, 5),
    };
    snprintf(path, sizeof path, "%s/wait.dpro", dir);
    REQUIRE(write_trace(path, ev, sizeof ev / sizeof ev[0]) == 0);
    ana_collect *c = analyse(path, ANA_ALL, &r);
    REQUIRE(c != NULL);
    const ana_idle_row *s20 = idle_row(c, 20);
    REQUIRE(s20 != NULL);
    CHECK_EQ_U(c->nwaits, 1);
    CHECK_EQ_U(s20->gaps, 1);
    CHECK_EQ_U(s20->host_ns, 500);
    CHECK_EQ_U(s20->kernel_ns, 6500);
    CHECK_EQ_U(s20->other_ns, 1000);
    CHECK_EQ_U(s20->span_ns, 12000 - 2500);
    CHECK_EQ_U(c->launch.all.cpu.count, 3);
    CHECK_EQ_U(c->launch.other_launched, 2);
    CHECK_EQ_U(c->launch.all.delay.max, 7500); /* kY at 11000, its call ended at 3500 */
    CHECK_EQ(c->launch.all.cpu.p50, 1000);
    int found = 0;
    for (size_t i = 0; i < c->mem.nrows; i++)
        if (c->mem.rows[i].kind == DPRO_KIND_MEMCPY && c->mem.rows[i].size_class == 1 &&
            c->mem.rows[i].subkind == DPRO_COPY_H2H && c->mem.rows[i].memory == ANA_MEM_UNKNOWN)
            found = 1;
    CHECK(found);
    /* sequences: stream 30 has kZ -> kZ once; stream 20 kY -> kY once */
    CHECK_EQ_U(c->seq.distinct[2], 2);
    CHECK_EQ_U(c->seq.distinct[3], 0);
    ana_collect_free(c);
    dpro_reader_close(r);
    unlink(path);
}

/* Launch delays near 2^62 ns: the outlier rule and the sums must not overflow (the
 * sanitizer build checks), and the figures stay exact. */
static void
test_extreme_times(const char *dir)
{
    char path[4096];
    dpro_reader *r = NULL;
    const uint64_t far = 1ull << 62;
    const dpro_event ev[] = {
        api(S_LAUNCH, 0, 1000, 1, 10, 0),
        api(S_LAUNCH, 2000, 3000, 2, 10, 0),
        api(S_LAUNCH, 4000, 5000, 3, 10, 0),
        op(DPRO_KIND_KERNEL, S_KX, far - 3000, far - 2000, 1, 10, 0),
        op(DPRO_KIND_KERNEL, S_KX, far - 2000, far - 1000, 2, 10, 0),
        op(DPRO_KIND_KERNEL, S_KX, far - 1000, far, 3, 10, 0),
    };
    snprintf(path, sizeof path, "%s/far.dpro", dir);
    REQUIRE(write_trace(path, ev, sizeof ev / sizeof ev[0]) == 0);
    ana_collect *c = analyse(path, ANA_ALL, &r);
    REQUIRE(c != NULL);
    CHECK_EQ_U(c->launch.all.delay.count, 3);
    CHECK_EQ(c->launch.all.delay.max, (int64_t)(far - 4000));
    CHECK_EQ(c->launch.all.delay.p50, (int64_t)(far - 5000));
    CHECK_EQ_U(c->launch.delay_outliers, 0);
    CHECK_EQ_U(c->queue.rows[0].max_len, 3);
    ana_collect_free(c);
    dpro_reader_close(r);
    unlink(path);
}

static void
test_empty(const char *dir)
{
    char path[4096];
    dpro_reader *r = NULL;
    snprintf(path, sizeof path, "%s/empty.dpro", dir);
    REQUIRE(write_trace(path, NULL, 0) == 0);
    ana_collect *c = analyse(path, ANA_ALL, &r);
    REQUIRE(c != NULL);
    CHECK_EQ_U(c->launch.all.cpu.count, 0);
    CHECK_EQ_U(c->idle.nrows, 0);
    CHECK_EQ_U(c->mem.nrows, 0);
    CHECK_EQ_U(c->queue.depth, 0);
    CHECK_EQ_U(c->seq.distinct[2], 0);
    ana_collect_free(c);
    dpro_reader_close(r);
    unlink(path);
}

int
main(void)
{
    char dir[] = "/tmp/test_info_unit.XXXXXX";
    REQUIRE(mkdtemp(dir) != NULL);
    test_collector_wait(dir);
    test_extreme_times(dir);
    test_empty(dir);
    rmdir(dir);
    return tests_done();
}
