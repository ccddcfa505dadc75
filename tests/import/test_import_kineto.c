/*
 * test_import_kineto.c: the Kineto importer on a small hand-made trace that has every case
 * in it (launch before and after its kernel, NCCL kernels out of device order, rank given
 * after the events, flows, metadata, memory, sync), read back through libdprotrace, fed in
 * chunks of every size so tokens break anywhere, on the writer thread and inline; the
 * microsecond parser (its fast path against its general one); bad inputs; grouped
 * transfers; arguments nested too deep; the batch codec on what imports make. The writer
 * hand-off and the whitespace pre-pass are test_import_pipeline.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dprotrace.h"
#include "fnv1a.h"
#include "import_kineto.h"
#include "kineto_sample.h"
#include "../unit/testutil.h"

static void
test_parse_us(void)
{
    uint64_t ns = 0;
    CHECK(kineto_parse_us("1234", 4, &ns) == 0 && ns == 1234000);
    CHECK(kineto_parse_us("1234.567", 8, &ns) == 0 && ns == 1234567);
    CHECK(kineto_parse_us("4458676522690.655", 17, &ns) == 0 && ns == 4458676522690655ULL);
    CHECK(kineto_parse_us("0.0005", 6, &ns) == 0 && ns == 1); /* half up */
    CHECK(kineto_parse_us("0.0004", 6, &ns) == 0 && ns == 0);
    CHECK(kineto_parse_us("1.5e3", 5, &ns) == 0 && ns == 1500000);
    CHECK(kineto_parse_us("15E-1", 5, &ns) == 0 && ns == 1500);
    CHECK(kineto_parse_us("0e999", 5, &ns) == 0 && ns == 0);
    CHECK(kineto_parse_us("18446744073709551", 17, &ns) == 0 && ns == 18446744073709551000ULL);
    CHECK(kineto_parse_us("18446744073709552", 17, &ns) < 0); /* > UINT64_MAX ns */
    CHECK(kineto_parse_us("1e400", 5, &ns) < 0);
    CHECK(kineto_parse_us("-5", 2, &ns) < 0);
    CHECK(kineto_parse_us("", 0, &ns) < 0);
    CHECK(kineto_parse_us(".", 1, &ns) < 0);
    CHECK(kineto_parse_us("1e", 2, &ns) < 0);
    CHECK(kineto_parse_us("12x", 3, &ns) < 0);
    CHECK(kineto_parse_us("1712195495505582.988", 20, &ns) == 0 && ns == 1712195495505582988ULL);
    CHECK(kineto_parse_us("9999999999999999.9995", 21, &ns) == 0 && ns == 10000000000000000000ULL);
    CHECK(kineto_parse_us("12.", 3, &ns) == 0 && ns == 12000); /* the general way's answer */
    CHECK(kineto_parse_us("1.5x", 4, &ns) < 0);
    CHECK(kineto_parse_us("1.-5", 4, &ns) < 0);
    CHECK(kineto_parse_us("1.28a", 5, &ns) < 0);
    CHECK(kineto_parse_us("1234567a.125", 12, &ns) < 0);
    CHECK(kineto_parse_us("12345678123456a8.125", 20, &ns) < 0);
    CHECK(kineto_parse_us("12345678.1:5", 12, &ns) < 0);

    /* The fast path (digits, a fraction) against the general one: an exponent of zero
     * sends the same text the general way. */
    static const char *const texts[] = {
        "0",
        "7",
        "0.0",
        "0.5",
        "0.0005",
        "0.0004",
        "0.00049",
        "1.999",
        "1.9995",
        "1.99949",
        "123456.7",
        "123456.78",
        "123456.789",
        "123456.7891",
        "9999999999999999",
        "9999999999999999.999",
        "1000000000000000.0005",
        "00012.5",
        "3.14159265358979",
        "1.280", /* eight digits at a time, and the three-digit fraction */
        "12345678",
        "12345678.125",
        "1234567812345678",
        "1234567812345678.908",
        "12345678123456789",
        "4458676526259.099",
        "00000000.000",
    };
    uint64_t seed = 42;
    char buf[64];
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]) + 2000; i++) {
        const char *t = buf;
        if (i < sizeof(texts) / sizeof(texts[0])) {
            t = texts[i];
        } else {
            /* 1..17 integer digits, 0..8 fraction digits */
            uint64_t r = test_rand(&seed);
            int ni = 1 + (int)(r % 17), nf = (int)((r >> 8) % 9), n = 0;
            for (int d = 0; d < ni; d++)
                buf[n++] = (char)('0' + test_rand(&seed) % 10);
            if (nf) {
                buf[n++] = '.';
                for (int d = 0; d < nf; d++)
                    buf[n++] = (char)('0' + test_rand(&seed) % 10);
            }
            buf[n] = '\0';
        }
        char slow[80];
        snprintf(slow, sizeof(slow), "%se0", t);
        uint64_t a = 1, b = 2;
        int ra = kineto_parse_us(t, strlen(t), &a), rb = kineto_parse_us(slow, strlen(slow), &b);
        if (ra != rb || (ra == 0 && a != b))
            fprintf(stderr, "parse_us(%s): %d %llu, general way %d %llu\n", t, ra,
                    (unsigned long long)a, rb, (unsigned long long)b);
        CHECK(ra == rb && (ra != 0 || a == b));
    }
}

/* Finds the first event of kind with correlation corr (any correlation if corr == 0 and
 * name matches). */
static const dpro_event *
find(const dpro_event *ev, size_t n, uint32_t kind, uint64_t corr)
{
    for (size_t i = 0; i < n; i++)
        if (ev[i].kind == kind && ev[i].correlation == corr)
            return &ev[i];
    return NULL;
}

static const dpro_event *
find_kind(const dpro_event *ev, size_t n, uint32_t kind, size_t nth)
{
    for (size_t i = 0; i < n; i++)
        if (ev[i].kind == kind && nth-- == 0)
            return &ev[i];
    return NULL;
}

/* The metadata of the imported trace r. */
static void
check_meta(dpro_reader *r)
{
    CHECK(strcmp(dpro_reader_meta(r, "source"), "kineto-import") == 0);
    CHECK_EQ_U(dpro_reader_meta_int(r, "rank", -1), 1);
    CHECK_EQ_U(dpro_reader_meta_int(r, "world_size", -1), 2);
    CHECK_EQ_U(dpro_reader_meta_int(r, "pid", -1), 100);
    CHECK(strcmp(dpro_reader_meta(r, "host"), "node7") == 0);
    CHECK(strcmp(dpro_reader_meta(r, "clock"), "kineto-us") == 0);
    CHECK(dpro_reader_meta(r, "job_id") != NULL);
    CHECK_EQ_U(dpro_reader_meta_int(r, "import.unmapped.profiler_span", -1), 1);
    CHECK_EQ_U(dpro_reader_meta_int(r, "import.flows.ac2g", -1), 2);
    CHECK_EQ_U(dpro_reader_meta_int(r, "import.partial", -1), 0);
}

/* The launches, kernels and copies of the events ev of the imported trace r. */
static void
check_launches(dpro_reader *r, const dpro_event *ev, size_t n)
{
    const dpro_event *k11 = find(ev, n, DPRO_KIND_KERNEL, 11);
    const dpro_event *a11 = find(ev, n, DPRO_KIND_API, 11);
    CHECK(k11 && a11);
    if (k11 && a11) {
        CHECK_EQ_U(k11->start_ns, 1010250);
        CHECK_EQ_U(k11->end_ns, 1030251);
        CHECK_EQ_U(k11->stream, 7);
        CHECK(k11->grid[0] == 2 && k11->grid[1] == 3 && k11->grid[2] == 4);
        CHECK(k11->block[0] == 128 && k11->shared_mem == 1024);
        CHECK(strcmp(dpro_reader_string(r, k11->name), "gemm") == 0);
        CHECK(strcmp(dpro_reader_string(r, a11->name), "cudaLaunchKernel") == 0);
        CHECK_EQ_U(a11->name2, k11->name);
        CHECK_EQ_U(a11->subkind, DPRO_API_RUNTIME);
        CHECK_EQ_U(a11->thread, 101);
        CHECK_EQ_U(a11->stream, 7);
    }
    /* launch before its kernel in the file */
    const dpro_event *a12 = find(ev, n, DPRO_KIND_API, 12);
    const dpro_event *k12 = find(ev, n, DPRO_KIND_KERNEL, 12);
    CHECK(a12 && k12 && a12->name2 == k12->name && a12->stream == 7);
    const dpro_event *a13 = find(ev, n, DPRO_KIND_API, 13);
    const dpro_event *m13 = find(ev, n, DPRO_KIND_MEMCPY, 13);
    CHECK(a13 && m13);
    if (a13 && m13) {
        CHECK_EQ_U(a13->name2, 0);
        CHECK_EQ_U(a13->bytes, 4096);
        CHECK_EQ_U(m13->subkind, DPRO_COPY_H2D);
        CHECK_EQ_U(m13->bytes, 4096);
    }
}

/* The collectives, the stream-wait sync and the memory event of the imported events. */
static void
check_collectives(const dpro_event *ev, size_t n)
{
    /* collectives: numbered by device start, timed by their launch when it is known */
    const dpro_event *c14 = find(ev, n, DPRO_KIND_COLLECTIVE, 14);
    const dpro_event *c15 = find(ev, n, DPRO_KIND_COLLECTIVE, 15);
    CHECK(c14 && c15);
    if (c14 && c15) {
        CHECK_EQ_U(c14->seq, 0);
        CHECK_EQ_U(c15->seq, 1);
        CHECK_EQ_U(c14->subkind, DPRO_COLL_ALLREDUCE);
        CHECK_EQ_U(c14->start_ns, 1150000);
        CHECK_EQ_U(c14->end_ns, 1153000);
        CHECK_EQ_U(c14->thread, 102);
        CHECK_EQ(c14->value, DPRO_COLL_TIMING_HOST);   /* its launch's times */
        CHECK_EQ(c15->value, DPRO_COLL_TIMING_DEVICE); /* no launch: the kernel's */
        CHECK_EQ_U(c15->start_ns, 1300000);
        CHECK_EQ_U(c14->count, 50);
        CHECK_EQ_U(c15->count, 100);
        CHECK_EQ_U(c15->bytes, 400);
        CHECK_EQ_U(c14->dtype, 7);
        CHECK_EQ_U(c14->redop, 0);
        CHECK(c14->comm == c15->comm &&
              c14->comm == dpro_fnv1a("kineto-pg:0", 11, DPRO_FNV1A_INIT));
        CHECK_EQ_U(c14->stream, 20);
    }
    const dpro_event *sync = find_kind(ev, n, DPRO_KIND_SYNC, 0);
    CHECK(sync && sync->subkind == DPRO_SYNC_STREAM_WAIT_EVENT && sync->object == 3 &&
          sync->value == 16 && sync->peer == 7 && sync->stream == 20 && sync->correlation == 17);
    const dpro_event *mem = find_kind(ev, n, DPRO_KIND_MEMORY, 0);
    CHECK(mem && mem->subkind == DPRO_MEM_FREE && mem->bytes == 512 && mem->address == 4096);
    CHECK(mem && mem->has == DPRO_HAS_TOTALS && mem->total_allocated == 100 &&
          mem->total_reserved == 2048 && mem->args == 0);
}

/* The op, kernel and launch arguments, the flows and the markers of the imported trace r. */
static void
check_args_flows(dpro_reader *r, const dpro_event *ev, size_t n)
{
    const dpro_event *k11 = find(ev, n, DPRO_KIND_KERNEL, 11);
    const dpro_event *a11 = find(ev, n, DPRO_KIND_API, 11);
    /* op arguments: ids in their fields, shapes and dtypes as JSON text, the rest as one
     * object; the arguments a field holds are not repeated in it */
    const dpro_event *op = NULL;
    for (size_t i = 0; i < n; i++)
        if (ev[i].kind == DPRO_KIND_MARKER && ev[i].subkind == DPRO_MARK_CPU_OP)
            op = &ev[i];
    CHECK(op != NULL);
    if (op) {
        CHECK_EQ_U(op->has, DPRO_HAS_EXTERNAL_ID | DPRO_HAS_SEQ_NR | DPRO_HAS_FWD_THREAD |
                                DPRO_HAS_RECORD_ID);
        CHECK(op->external_id == 1 && op->seq_nr == 0 && op->fwd_thread == 1 && op->record_id == 9);
        CHECK(strcmp(dpro_reader_string(r, op->shapes), "[[2,3],[]]") == 0);
        CHECK(strcmp(dpro_reader_string(r, op->dtypes), "[\"float\",\"\"]") == 0);
        CHECK(strcmp(dpro_reader_string(r, op->args),
                     "{\"Nested\":{\"a\":[1,{\"b\":\"x\\\"y\"}],\"c\":true,\"d\":null},"
                     "\"correlation\":7,\"stream\":\"0x10\"}") == 0);
    }
    if (k11 && a11) {
        CHECK(strcmp(dpro_reader_string(r, k11->args), "{\"blocks per SM\":0.5}") == 0);
        CHECK(strcmp(dpro_reader_string(r, a11->args), "{\"cbid\":211}") == 0);
    }
    int flows = 0, fwdbwd = 0;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].kind != DPRO_KIND_FLOW)
            continue;
        flows++;
        if (strcmp(dpro_reader_string(r, ev[i].name2), "fwdbwd") == 0)
            fwdbwd += ev[i].correlation == 5 && ev[i].subkind == DPRO_FLOW_FINISH &&
                      ev[i].has == DPRO_HAS_BP_ENCLOSING && ev[i].value == 100 &&
                      ev[i].thread == 101 && ev[i].start_ns == 1001000;
    }
    CHECK(flows == 3 && fwdbwd == 1);
    int iters = 0, cpu_ops = 0;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].kind != DPRO_KIND_MARKER)
            continue;
        if (ev[i].subkind == DPRO_MARK_ITERATION) {
            iters++;
            CHECK_EQ_U(ev[i].value, 7);
            CHECK_EQ_U(ev[i].start_ns, 999000);
        }
        if (ev[i].subkind == DPRO_MARK_CPU_OP) {
            cpu_ops++;
            CHECK_EQ_U(ev[i].start_ns, 1000500);
            CHECK(strcmp(dpro_reader_string(r, ev[i].name2), "cpu_op") == 0);
        }
    }
    CHECK(iters == 1 && cpu_ops == 1);
}

/* The stream, thread, device and communicator tables of the imported trace r. */
static void
check_tables(dpro_reader *r)
{
    const dpro_stream_info *st;
    size_t ns = dpro_reader_streams(r, &st);
    CHECK_EQ_U(ns, 2);
    int named = 0;
    for (size_t i = 0; i < ns; i++)
        if (st[i].id == 20 && st[i].name && strcmp(st[i].name, "stream 20 (nccl)") == 0)
            named = 1;
    CHECK(named);
    const dpro_thread_info *th;
    size_t nt = dpro_reader_threads(r, &th);
    CHECK(nt == 1 && th[0].tid == 101 && strcmp(th[0].name, "thread 101 (python)") == 0);
    const dpro_device_info *dev;
    CHECK(dpro_reader_devices(r, &dev) == 1 && dev[0].sm_count == 108 &&
          strcmp(dev[0].name, "Test GPU") == 0 && dev[0].cc_major == 8);
    const dpro_comm_info *cm;
    CHECK(dpro_reader_comms(r, &cm) == 1 && cm[0].rank == 1 && cm[0].size == 2);
}

/* Imports the trace in pieces of chunk bytes into a file (on the writer thread, or inline)
 * and checks what comes back. */
static void
test_roundtrip(const char *dir, size_t chunk, int inline_writer)
{
    char path[512], err[512];
    snprintf(path, sizeof(path), "%s/t%zu.dpro", dir, chunk);
    dpro_writer *w;
    REQUIRE(dpro_writer_open(path, NULL, &w, err, sizeof(err)) == DPRO_OK);
    kineto_options o = {.source_file = "test.json",
                        .file_index = 0,
                        .file_count = 1,
                        .inline_writer = inline_writer};
    int rc = kineto_import_buffer(w, trace, sizeof(trace) - 1, chunk, &o, err, sizeof(err));
    if (rc != DPRO_OK)
        fprintf(stderr, "chunk %zu: %s\n", chunk, err);
    CHECK(rc == DPRO_OK);
    CHECK(dpro_writer_close(w) == DPRO_OK);

    dpro_reader *r;
    REQUIRE(dpro_reader_open(path, &r, err, sizeof(err)) == DPRO_OK);
    if (!r)
        return;
    check_meta(r);

    dpro_event ev[64];
    size_t n = 0;
    dpro_iter *it;
    REQUIRE(dpro_iter_open(r, &it) == DPRO_OK);
    while (n < 64 && dpro_iter_next(it, &ev[n]) == 1)
        n++;
    dpro_iter_close(it);
    CHECK_EQ_U(n, 18);
    check_launches(r, ev, n);
    check_collectives(ev, n);
    check_args_flows(r, ev, n);
    check_tables(r);
    dpro_reader_close(r);
    unlink(path);
}

/* A bad input gives status want and a message with the position (and what). */
static void
expect_error(const char *json, int want, const char *what)
{
    char err[512];
    kineto_options o = {.source_file = "bad.json"};
    int rc = kineto_import_buffer(NULL, json, strlen(json), 5, &o, err, sizeof(err));
    int ok = rc == want && strstr(err, "bad.json: byte ") && strstr(err, what);
    if (!ok)
        fprintf(stderr, "input %s: rc %d (want %d), message \"%s\" (want \"%s\")\n", json, rc, want,
                err, what);
    CHECK(ok);
}

static void
test_errors(void)
{
    expect_error("{\"traceEvents\":[{\"ph\":\"X\",\"ts\":\"abc\"}]}", DPRO_ERR_NOT_TRACE,
                 "\"ts\": expected a number");
    expect_error("{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"ts\":1e400,\"dur\":1}]}",
                 DPRO_ERR_LIMIT, "not a time in range");
    expect_error("{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"ts\":-3,\"dur\":1}]}",
                 DPRO_ERR_LIMIT, "not a time in range");
    expect_error("{\"traceEvents\":[{\"cat\":\"kernel\",\"ts\":3,\"dur\":1}]}", DPRO_ERR_NOT_TRACE,
                 "without \"ph\"");
    expect_error("{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"ts\":3}]}",
                 DPRO_ERR_NOT_TRACE, "no \"dur\"");
    expect_error("{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"ts\":3,\"dur\":1,"
                 "\"args\":{\"grid\":[1,\"x\",1]}}]}",
                 DPRO_ERR_NOT_TRACE, "grid");
    expect_error("{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"ts\":3,\"dur\":1,"
                 "\"args\":{\"correlation\":99999999999999999999}}]}",
                 DPRO_ERR_LIMIT, "correlation");
    expect_error("{\"traceEvents\":{}}", DPRO_ERR_NOT_TRACE, "traceEvents");
    expect_error("{\"traceEvents\":[1]}", DPRO_ERR_NOT_TRACE, "traceEvents");
    expect_error("{\"traceEvents\":[{\"ph\":\"X\",\"ts\":1,\"dur\":1}", DPRO_ERR_NOT_TRACE,
                 "invalid JSON");
    expect_error("{\"traceEvents\":[{\"ph\":\"X\",,}]}", DPRO_ERR_NOT_TRACE, "invalid JSON");
    expect_error("{\"other\":[]}", DPRO_ERR_NOT_TRACE, "no \"traceEvents\"");
    expect_error("42", DPRO_ERR_NOT_TRACE, "not a trace");
    expect_error("", DPRO_ERR_NOT_TRACE, "not a trace");
    expect_error("{\"traceEvents\":[]} x", DPRO_ERR_NOT_TRACE, "invalid JSON");
    /* the line is counted across chunks */
    expect_error("{\"traceEvents\":[\n{\"ph\":\"X\",\n\"ts\":true}]}", DPRO_ERR_NOT_TRACE,
                 "line 3");
    /* deep nesting we do not look at is fine */
    char deep[4096];
    size_t n = 0;
    n += (size_t)snprintf(deep, sizeof(deep), "{\"x\":");
    for (int i = 0; i < 1000; i++)
        deep[n++] = '[';
    for (int i = 0; i < 1000; i++)
        deep[n++] = ']';
    snprintf(deep + n, sizeof(deep) - n, ",\"traceEvents\":[]}");
    char err[256];
    CHECK(kineto_import_buffer(NULL, deep, strlen(deep), 0, NULL, err, sizeof(err)) == DPRO_OK);
    /* every prefix of a good trace short of its closing brace is an error, never a crash */
    size_t len = sizeof(trace) - 1;
    int errors = 0, cuts = 0;
    for (size_t cut = 0; cut + 2 < len; cut += 7, cuts++)
        errors += kineto_import_buffer(NULL, trace, cut, 3, NULL, err, sizeof(err)) != DPRO_OK;
    CHECK(errors == cuts);
}

/* Grouped transfers: two SendRecv kernels launched inside one record_param_comms naming an
 * all-to-all are one all-to-all; an RCCL Generic kernel takes the operation of the
 * nccl:all_reduce around its launch, or is no collective outside any; a SendRecv kernel
 * outside any range stays a send. Integers as strings ("0x" hex) and PyTorch 1.8's
 * categories (Runtime, Kernel, Operator) are read as today's. */
static void
test_grouped(const char *dir)
{
#define RT(ts, corr)                                                                               \
    "{\"ph\":\"X\",\"cat\":\"Runtime\",\"name\":\"hipLaunchKernel\",\"pid\":1,\"tid\":\"5\","      \
    "\"ts\":" #ts ",\"dur\":4,\"args\":{\"correlation\":\"" #corr "\",\"stream\":\"0x0\"}},\n"
#define K(name, ts, corr)                                                                          \
    "{\"ph\":\"X\",\"cat\":\"Kernel\",\"name\":\"" name "\",\"pid\":0,\"tid\":\"stream 9\","       \
    "\"ts\":" #ts ",\"dur\":20,\"args\":{\"device\":0,\"stream\":\"0x9\",\"correlation\":" #corr   \
    "}},\n"
    static const char text[] =
        "{\"traceEvents\": [\n"
        "{\"ph\":\"X\",\"cat\":\"Operator\",\"name\":\"ProfilerStep#3\",\"pid\":1,"
        "\"tid\":\"5\",\"ts\":90,\"dur\":700},\n"
        "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"record_param_comms\",\"pid\":1,"
        "\"tid\":5,\"ts\":100,\"dur\":50,\"args\":{\"Collective name\":\"all_to_allv\","
        "\"In msg nelems\":\"64\",\"dtype\":\"Float\"}},\n" RT(110, 1) RT(130, 2) K(
            "ncclDevKernel_SendRecv(x)", 260, 2) K("ncclDevKernel_SendRecv(x)", 200, 1) RT(400, 3)
            K("ncclDevKernel_Generic(x)", 420,
              3) "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"nccl:all_reduce\",\"pid\":1,"
                 "\"tid\":5,\"ts\":500,\"dur\":60}," RT(510, 4)
                     K("ncclDevKernel_Generic(x)", 530, 4) RT(600, 5)
                         K("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(x)", 620,
                           5) "{\"ph\":\"X\",\"cat\":\"Operator\",\"name\":\"aten::mm\",\"pid\":1,"
                              "\"tid\":\"5\",\"ts\":700,\"dur\":10}]}";
#undef RT
#undef K
    char path[512], err[512];
    snprintf(path, sizeof(path), "%s/grouped.dpro", dir);
    REQUIRE(import_to(path, text, sizeof(text) - 1, 1, 0, err, sizeof(err)) == DPRO_OK);
    dpro_reader *r;
    REQUIRE(dpro_reader_open(path, &r, err, sizeof(err)) == DPRO_OK);
    dpro_event ev[64];
    size_t n = 0;
    dpro_iter *it;
    REQUIRE(dpro_iter_open(r, &it) == DPRO_OK);
    while (n < 64 && dpro_iter_next(it, &ev[n]) == 1)
        n++;
    dpro_iter_close(it);
    size_t ncoll = 0, nkern = 0, napi = 0, niter = 0, nop = 0;
    const dpro_event *a2a = NULL, *ar = NULL, *send = NULL;
    for (size_t i = 0; i < n; i++) {
        const dpro_event *e = &ev[i];
        nkern += e->kind == DPRO_KIND_KERNEL;
        napi += e->kind == DPRO_KIND_API && e->name2 != 0; /* joined to its kernel */
        niter += e->kind == DPRO_KIND_MARKER && e->subkind == DPRO_MARK_ITERATION && e->value == 3;
        nop += e->kind == DPRO_KIND_MARKER && e->subkind == DPRO_MARK_CPU_OP;
        if (e->kind != DPRO_KIND_COLLECTIVE)
            continue;
        ncoll++;
        if (e->subkind == DPRO_COLL_ALLTOALL)
            a2a = e;
        else if (e->subkind == DPRO_COLL_ALLREDUCE)
            ar = e;
        else if (e->subkind == DPRO_COLL_SEND)
            send = e;
    }
    CHECK_EQ_U(nkern, 5);
    CHECK_EQ_U(napi, 5);
    CHECK_EQ_U(niter, 1);
    CHECK_EQ_U(nop, 2); /* record_param_comms and the Operator aten::mm */
    CHECK_EQ_U(ncoll, 3);
    CHECK(a2a && a2a->count == 64 && a2a->bytes == 256 && a2a->peer == 0 &&
          a2a->value == DPRO_COLL_TIMING_HOST && a2a->start_ns == 110000 && a2a->end_ns == 134000 &&
          a2a->correlation == 1 && a2a->thread == 5);
    CHECK(ar && ar->correlation == 4 && ar->peer == 0);
    CHECK(send && send->correlation == 5 && send->peer == -1);
    CHECK(a2a && ar && send && a2a->seq == 0 && ar->seq == 1 && send->seq == 2);
    CHECK_EQ_U(dpro_reader_meta_int(r, "import.merged.grouped_transfers", -1), 1);
    CHECK_EQ_U(dpro_reader_meta_int(r, "import.unmapped.collective_op", -1), 1);
    CHECK_EQ_U(dpro_reader_meta_int(r, "import.approx.sendrecv_as_send", -1), 1);
    dpro_reader_close(r);
    unlink(path);
}

/* An argument nested deeper than the importer writes back: the event keeps its ids and no
 * args text, counted as import.approx.args_dropped; the next event is not affected. */
static void
test_args_too_deep(const char *dir)
{
    char json[4096], path[512], err[512];
    size_t n =
        (size_t)snprintf(json, sizeof json,
                         "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"a\","
                         "\"pid\":1,\"tid\":2,\"ts\":10,\"dur\":5,\"args\":{\"External id\":3,"
                         "\"x\":");
    for (int i = 0; i < 40; i++)
        json[n++] = '[';
    for (int i = 0; i < 40; i++)
        json[n++] = ']';
    snprintf(json + n, sizeof json - n,
             "}},{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"b\",\"pid\":1,\"tid\":2,"
             "\"ts\":20,\"dur\":5,\"args\":{\"External id\":4,\"y\":[1]}}]}");
    snprintf(path, sizeof path, "%s/deep.dpro", dir);
    dpro_writer *w;
    REQUIRE(dpro_writer_open(path, NULL, &w, err, sizeof(err)) == DPRO_OK);
    CHECK(kineto_import_buffer(w, json, strlen(json), 0, NULL, err, sizeof err) == DPRO_OK);
    CHECK(dpro_writer_close(w) == DPRO_OK);
    dpro_reader *r;
    REQUIRE(dpro_reader_open(path, &r, err, sizeof(err)) == DPRO_OK);
    CHECK_EQ_U(dpro_reader_meta_int(r, "import.approx.args_dropped", -1), 1);
    dpro_iter *it;
    dpro_event ev[4];
    size_t m = 0;
    REQUIRE(dpro_iter_open(r, &it) == DPRO_OK);
    while (m < 4 && dpro_iter_next(it, &ev[m]) == 1)
        m++;
    dpro_iter_close(it);
    CHECK(m == 2 && ev[0].external_id == 3 && ev[0].has == DPRO_HAS_EXTERNAL_ID && ev[0].args == 0);
    CHECK(m == 2 && ev[1].external_id == 4 &&
          strcmp(dpro_reader_string(r, ev[1].args), "{\"y\":[1]}") == 0);
    dpro_reader_close(r);
    unlink(path);
}

/* The batch codec on what imports make (format 2.2): random launches, device operations
 * and flows that share correlations (a graph launch's kernel and copy share one), flows on
 * the device op's row, on the launch's or on neither, the op-argument columns, memory
 * totals; every field must come back. A flow stored against the wrong start, or a delta
 * column misread, fails here. */
static void
test_flow_codec(void)
{
    uint64_t seed = 12345;
    for (int round = 0; round < 50; round++) {
        size_t n = 1 + test_rand(&seed) % 3000;
        dpro_event *ev = calloc(n, sizeof *ev);
        REQUIRE(ev != NULL);
        uint64_t t = 1000000;
        for (size_t i = 0; i < n; i++) {
            dpro_event *e = &ev[i];
            uint64_t r = test_rand(&seed);
            static const uint32_t kinds[] = {DPRO_KIND_API,    DPRO_KIND_KERNEL, DPRO_KIND_MEMCPY,
                                             DPRO_KIND_MEMSET, DPRO_KIND_FLOW,   DPRO_KIND_FLOW,
                                             DPRO_KIND_MARKER, DPRO_KIND_MEMORY};
            e->kind = kinds[r % 8];
            t += test_rand(&seed) % 5000;
            e->start_ns = t - test_rand(&seed) % 3000;
            e->end_ns =
                e->kind == DPRO_KIND_FLOW ? e->start_ns : e->start_ns + test_rand(&seed) % 20000;
            e->correlation = 1 + test_rand(&seed) % (n / 2 + 1);
            e->thread = (uint32_t)(test_rand(&seed) % 4);
            e->stream = test_rand(&seed) % 4;
            e->device = (uint32_t)(test_rand(&seed) % 2);
            if (e->kind == DPRO_KIND_FLOW) {
                e->subkind = 1 + (uint32_t)(test_rand(&seed) % 3);
                e->value = (int64_t)(test_rand(&seed) % 3);
                e->has = test_rand(&seed) % 2 ? DPRO_HAS_BP_ENCLOSING : 0;
            }
            uint32_t bits = (uint32_t)(test_rand(&seed) % 64);
            e->has |= bits & (DPRO_HAS_EXTERNAL_ID | DPRO_HAS_RECORD_ID | DPRO_HAS_SEQ_NR |
                              DPRO_HAS_FWD_THREAD | DPRO_HAS_EV_IDX | DPRO_HAS_TOTALS);
            if (e->has & DPRO_HAS_EXTERNAL_ID)
                e->external_id = test_rand(&seed) % 100000;
            if (e->has & DPRO_HAS_RECORD_ID)
                e->record_id = i;
            if (e->has & DPRO_HAS_SEQ_NR)
                e->seq_nr = test_rand(&seed) % 7;
            if (e->has & DPRO_HAS_FWD_THREAD)
                e->fwd_thread = 1;
            if (e->has & DPRO_HAS_EV_IDX)
                e->ev_idx = i * 2;
            if (e->has & DPRO_HAS_TOTALS) {
                e->total_allocated = test_rand(&seed);
                e->total_reserved = test_rand(&seed) >> 3;
            }
            e->shapes = (uint32_t)(test_rand(&seed) % 5);
            e->dtypes = (uint32_t)(test_rand(&seed) % 3);
            e->args = (uint32_t)(test_rand(&seed) % 9);
        }
        uint8_t *z = NULL;
        size_t zlen = 0, raw = 0, m = 0;
        dpro_event *back = NULL;
        char err[256] = "";
        CHECK(dpro_batch_encode(ev, n, 3, &z, &zlen, &raw) == DPRO_OK);
        CHECK(dpro_batch_decode(z, zlen, raw, &back, &m, err, sizeof err) == DPRO_OK);
        CHECK_EQ_U(m, n);
        /* decoded by kind, in appended order within a kind */
        size_t k = 0, bad = 0;
        for (uint32_t kind = 1; kind <= DPRO_KIND_MAX_KNOWN && m == n; kind++)
            for (size_t i = 0; i < n; i++)
                if (ev[i].kind == kind) {
                    const dpro_event *x = &ev[i], *y = &back[k++];
                    if (memcmp(x, y, sizeof *x) != 0 && bad++ == 0)
                        fprintf(stderr,
                                "kind %u: start %llu/%llu end %llu/%llu corr %llu/%llu has %u/%u\n",
                                x->kind, (unsigned long long)x->start_ns,
                                (unsigned long long)y->start_ns, (unsigned long long)x->end_ns,
                                (unsigned long long)y->end_ns, (unsigned long long)x->correlation,
                                (unsigned long long)y->correlation, x->has, y->has);
                }
        if (bad)
            fprintf(stderr, "round %d: %zu of %zu events differ\n", round, bad, n);
        CHECK(bad == 0);
        free(z);
        free(back);
        free(ev);
    }
}

int
main(void)
{
    char dir[] = "/tmp/dpro-test-import-XXXXXX";
    if (!mkdtemp(dir))
        return 99;
    test_parse_us();
    static const size_t chunks[] = {0, 1, 2, 3, 7, 64, 1000};
    for (size_t i = 0; i < sizeof(chunks) / sizeof(chunks[0]); i++) {
        test_roundtrip(dir, chunks[i], 0);
        test_roundtrip(dir, chunks[i], 1);
    }
    test_errors();
    test_grouped(dir);
    test_flow_codec();
    test_args_too_deep(dir);
    rmdir(dir);
    return tests_done();
}
