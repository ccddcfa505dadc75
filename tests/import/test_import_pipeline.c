/*
 * test_import_pipeline.c: the Kineto importer's writer hand-off and whitespace pre-pass. A
 * synthetic trace of many batches (names, thread records and events each past a batch)
 * gives the same output written on the writer thread and inline, also when the writer
 * already holds strings; a writer failing on its thread (a file size limit) is reported
 * with the file and the position; an importer freed before its end stops its thread. The
 * whitespace pre-pass at every level against none, on mutated and long inputs
 * (test_squeeze).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dprotrace.h"
#include "import_kineto.h"
#include "kineto_sample.h"
#include "../unit/testutil.h"

/* A synthetic trace of n kernels, each with its launch: distinct kernel names every
 * `distinct` kernels, a cpu_op of a name of its own every other kernel, and a thread name
 * every 50 kernels (each on a new tid). Returns a malloc'd NUL-terminated text. */
static char *
synthetic_trace(size_t n, size_t distinct, size_t *len)
{
    size_t cap = 4096 + n * 700, l = 0;
    char *t = malloc(cap);
    if (!t)
        return NULL;
    l += (size_t)snprintf(t + l, cap - l, "{\"traceEvents\": [\n");
    for (size_t i = 0; i < n; i++) {
        unsigned long long ts = 1000000 + i * 10, corr = i + 1;
        l +=
            (size_t)snprintf(t + l, cap - l,
                             "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\","
                             "\"pid\":1,\"tid\":%llu,\"ts\":%llu.125,\"dur\":2,"
                             "\"args\":{\"correlation\":%llu}},\n",
                             1000 + (unsigned long long)(i / 50), ts, corr);
        l += (size_t)snprintf(t + l, cap - l,
                              "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"void kernel_%zu_with_"
                              "a_long_templated_name<float, 128>(float*, int)\",\"pid\":0,"
                              "\"tid\":7,\"ts\":%llu.5,\"dur\":3.25,\"args\":{\"device\":0,"
                              "\"stream\":7,\"correlation\":%llu,\"grid\":[%zu,1,1],"
                              "\"block\":[128,1,1]}},\n",
                              i % distinct, ts + 5, corr, i % 1000 + 1);
        if (i % 2 == 0)
            l += (size_t)snprintf(t + l, cap - l,
                                  "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::op_%zu\","
                                  "\"pid\":1,\"tid\":1000,\"ts\":%llu,\"dur\":1},\n",
                                  i, ts);
        if (i % 50 == 0)
            l += (size_t)snprintf(t + l, cap - l,
                                  "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,"
                                  "\"tid\":%llu,\"args\":{\"name\":\"worker %zu\"}},\n",
                                  1000 + (unsigned long long)(i / 50), i / 50);
    }
    l += (size_t)snprintf(t + l, cap - l,
                          "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":"
                          "\"ProfilerStep#1\",\"pid\":1,\"tid\":1000,\"ts\":999999,"
                          "\"dur\":%zu}\n]}\n",
                          n * 10 + 10);
    *len = l;
    return t;
}

/* The two traces hold the same events (names compared as text), threads and devices. */
static void
check_same_trace(const char *pa, const char *pb, size_t want_events)
{
    char err[512];
    dpro_reader *ra, *rb;
    REQUIRE(dpro_reader_open(pa, &ra, err, sizeof(err)) == DPRO_OK);
    REQUIRE(dpro_reader_open(pb, &rb, err, sizeof(err)) == DPRO_OK);
    if (!ra || !rb) {
        dpro_reader_close(ra);
        dpro_reader_close(rb);
        return;
    }
    dpro_iter *ia, *ib;
    REQUIRE(dpro_iter_open(ra, &ia) == DPRO_OK);
    REQUIRE(dpro_iter_open(rb, &ib) == DPRO_OK);
    size_t n = 0, diff = 0;
    dpro_event a, b;
    for (;;) {
        int na = dpro_iter_next(ia, &a), nb = dpro_iter_next(ib, &b);
        if (na != nb) {
            diff++;
            break;
        }
        if (na != 1)
            break;
        n++;
        const char *a1 = a.name ? dpro_reader_string(ra, a.name) : "";
        const char *b1 = b.name ? dpro_reader_string(rb, b.name) : "";
        const char *a2 = a.name2 ? dpro_reader_string(ra, a.name2) : "";
        const char *b2 = b.name2 ? dpro_reader_string(rb, b.name2) : "";
        if (!a1 || !b1 || !a2 || !b2 || strcmp(a1, b1) || strcmp(a2, b2)) {
            diff++;
            continue;
        }
        a.name = b.name = a.name2 = b.name2 = 0;
        if (memcmp(&a, &b, sizeof(a)) != 0)
            diff++;
    }
    dpro_iter_close(ia);
    dpro_iter_close(ib);
    CHECK_EQ_U(diff, 0);
    CHECK_EQ_U(n, want_events);
    const dpro_thread_info *ta, *tb;
    size_t nta = dpro_reader_threads(ra, &ta), ntb = dpro_reader_threads(rb, &tb);
    CHECK_EQ_U(nta, ntb);
    CHECK(strcmp(dpro_reader_meta(ra, "import.events_out"),
                 dpro_reader_meta(rb, "import.events_out")) == 0);
    dpro_reader_close(ra);
    dpro_reader_close(rb);
}

/* Many batches: on the writer thread, inline, and with strings held by the writer before
 * (our ids then differ from the writer's). */
static void
test_threaded_same(const char *dir)
{
    /* 20000 kernels: 50000 events, 15000 distinct names, 400 thread names */
    size_t n = 20000, len;
    char *text = synthetic_trace(n, 5000, &len);
    CHECK(text != NULL);
    if (!text)
        return;
    char pt[512], pi[512], pp[512], err[512];
    snprintf(pt, sizeof(pt), "%s/threaded.dpro", dir);
    snprintf(pi, sizeof(pi), "%s/inline.dpro", dir);
    snprintf(pp, sizeof(pp), "%s/pre.dpro", dir);
    int rc = import_to(pt, text, len, 0, 0, err, sizeof(err));
    if (rc != DPRO_OK)
        fprintf(stderr, "threaded: %s\n", err);
    CHECK(rc == DPRO_OK);
    rc = import_to(pi, text, len, 1, 0, err, sizeof(err));
    CHECK(rc == DPRO_OK);
    rc = import_to(pp, text, len, 0, 3, err, sizeof(err));
    CHECK(rc == DPRO_OK);
    size_t want = n * 2 + n / 2 + 1;
    check_same_trace(pt, pi, want);
    check_same_trace(pt, pp, want);
    dpro_reader *r;
    if (dpro_reader_open(pt, &r, err, sizeof(err)) == DPRO_OK) {
        const dpro_thread_info *th;
        CHECK_EQ_U(dpro_reader_threads(r, &th), n / 50);
        /* the 3 constants (cpu_op, user_annotation, ...) used + the names */
        CHECK(dpro_reader_string_count(r) >= 5000 + n / 2 + 2);
        dpro_reader_close(r);
    }

    /* freed before its end: the writer thread stops, the writer stays usable */
    dpro_writer *w;
    char pf[512];
    snprintf(pf, sizeof(pf), "%s/freed.dpro", dir);
    REQUIRE(dpro_writer_open(pf, NULL, &w, err, sizeof(err)) == DPRO_OK);
    kineto_importer *k;
    REQUIRE(kineto_importer_new(w, NULL, &k) == DPRO_OK);
    CHECK(kineto_importer_feed(k, text, len / 2) == DPRO_OK);
    kineto_importer_free(k);
    CHECK(dpro_writer_close(w) == DPRO_OK);
    unlink(pf);
    unlink(pt);
    unlink(pi);
    unlink(pp);
    free(text);
}

/* A writer that fails on the writer thread (the file size limit is hit by a flush): the
 * import fails with the writer's words, the file name and a position. In a child, since
 * the limit is the process's. */
static void
test_writer_error(const char *dir)
{
    size_t len;
    /* every kernel name distinct: the first flush writes ~1 MB of strings */
    char *text = synthetic_trace(20000, 20000, &len);
    CHECK(text != NULL);
    if (!text)
        return;
    for (int inline_writer = 0; inline_writer < 2; inline_writer++) {
        char path[512];
        snprintf(path, sizeof(path), "%s/full%d.dpro", dir, inline_writer);
        pid_t pid = fork();
        if (pid == 0) {
            char err[512];
            dpro_writer *w;
            dpro_writer_options wo;
            kineto_writer_options(&wo);
            if (dpro_writer_open(path, &wo, &w, err, sizeof(err)) != DPRO_OK)
                _exit(3);
            signal(SIGXFSZ, SIG_IGN);
            struct rlimit rl = {64 << 10, 64 << 10};
            setrlimit(RLIMIT_FSIZE, &rl);
            kineto_options o = {
                .source_file = "big.json", .file_count = 1, .inline_writer = inline_writer};
            int rc = kineto_import_buffer(w, text, len, 65536, &o, err, sizeof(err));
            dpro_writer_close(w);
            int ok = rc == DPRO_ERR_IO && strstr(err, "big.json: byte ") &&
                     strstr(err, "writing the trace");
            if (!ok)
                fprintf(stderr, "writer error (inline %d): rc %d, \"%s\"\n", inline_writer, rc,
                        err);
            _exit(ok ? 0 : 1);
        }
        int st = 0;
        CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        char side[600];
        unlink(path);
        snprintf(side, sizeof(side), "%s-wal", path);
        unlink(side);
        snprintf(side, sizeof(side), "%s-shm", path);
        unlink(side);
    }
    free(text);
}

/* Imports text (fed in pieces of chunk bytes, 0: at once) without a writer at a squeeze
 * level; fills the status, the message and the result. */
static int
import_level(const char *text, size_t len, size_t chunk, int level, char *err, size_t errlen,
             kineto_result *res)
{
    kineto_options o = {.source_file = "sq.json", .file_count = 1, .squeeze = level};
    kineto_importer *k;
    if (kineto_importer_new(NULL, &o, &k) != DPRO_OK)
        return -1;
    int rc = DPRO_OK;
    if (chunk == 0)
        chunk = len ? len : 1;
    for (size_t off = 0; off < len && rc == DPRO_OK; off += chunk)
        rc = kineto_importer_feed(k, text + off, len - off < chunk ? len - off : chunk);
    rc = kineto_importer_finish(k, rc == DPRO_OK);
    snprintf(err, errlen, "%s", kineto_importer_errmsg(k));
    kineto_importer_result(k, res);
    kineto_importer_free(k);
    return rc;
}

/* text gives the same status, message (file, byte offset, line) and result at every
 * squeeze level as with none. */
static void
check_levels_same(const char *text, size_t len, size_t chunk)
{
    char e0[512], e1[512];
    kineto_result r0, r1;
    int rc0 = import_level(text, len, chunk, KINETO_SQUEEZE_OFF, e0, sizeof(e0), &r0);
    for (int level = KINETO_SQUEEZE_SCALAR; level <= KINETO_SQUEEZE_AVX512; level++) {
        int rc1 = import_level(text, len, chunk, level, e1, sizeof(e1), &r1);
        int same = rc1 == rc0 && strcmp(e0, e1) == 0 && r0.events_in == r1.events_in &&
                   r0.events_out == r1.events_out && r0.unmapped == r1.unmapped &&
                   r0.bytes_in == r1.bytes_in && r0.rank == r1.rank;
        if (!same)
            fprintf(stderr, "squeeze level %d, chunk %zu: rc %d/%d \"%s\" / \"%s\" on:\n%.*s\n",
                    level, chunk, rc0, rc1, e0, e1, (int)(len < 400 ? len : 400), text);
        CHECK(same);
    }
}

/* The whitespace pre-pass changes nothing but speed: the trace re-indented, then mutated
 * at random (whitespace, quotes, backslashes, separators, digits, control bytes put in or
 * taken out anywhere, strings included), gives the same answers, errors and their
 * positions at every level and chunking; so does a long pretty-printed trace with an error
 * near its end, past several squeezed pieces. */
static void
test_squeeze(void)
{
    kineto_options o = {.squeeze = KINETO_SQUEEZE_AUTO};
    kineto_importer *k;
    REQUIRE(kineto_importer_new(NULL, &o, &k) == DPRO_OK);
    printf("squeeze level in use: %d\n", kineto_importer_squeeze(k));
    kineto_importer_free(k);

    size_t tlen = sizeof(trace) - 1, cap = tlen * 4 + 256;
    char *pretty = malloc(cap), *buf = malloc(cap + 64);
    CHECK(pretty && buf);
    if (!pretty || !buf)
        return;
    /* re-indented: a newline and indent after every separator outside strings */
    size_t n = 0;
    int in_str = 0;
    for (size_t i = 0; i < tlen; i++) {
        char c = trace[i];
        pretty[n++] = c;
        if (c == '"' && (i == 0 || trace[i - 1] != '\\'))
            in_str = !in_str;
        if (!in_str && (c == ',' || c == '{' || c == '[' || c == ':'))
            n += (size_t)snprintf(pretty + n, cap - n, c == ':' ? " " : "\n      ");
    }
    check_levels_same(pretty, n, 0);
    check_levels_same(pretty, n, 1);
    check_levels_same(pretty, n, 77);
    static const char alphabet[] = " \n\t\r\"\\,:{}[]01.e-+tx\x01\x0b";
    unsigned seed = 12345;
    for (int iter = 0; iter < 3000; iter++) {
        size_t m = n;
        memcpy(buf, pretty, n);
        int edits = 1 + (int)((seed = seed * 1103515245u + 12345u) >> 16) % 4;
        for (int e = 0; e < edits; e++) {
            seed = seed * 1103515245u + 12345u;
            size_t at = (seed >> 8) % (m + 1);
            seed = seed * 1103515245u + 12345u;
            char c = alphabet[(seed >> 16) % (sizeof(alphabet) - 1)];
            int op = (int)(seed >> 28) % 3;
            if (op == 0 && m < cap) { /* insert */
                memmove(buf + at + 1, buf + at, m - at);
                buf[at] = c;
                m++;
            } else if (op == 1 && at < m) { /* replace */
                buf[at] = c;
            } else if (at < m) { /* delete */
                memmove(buf + at, buf + at + 1, m - at - 1);
                m--;
            }
        }
        check_levels_same(buf, m, iter % 3 == 0 ? 0 : iter % 3 == 1 ? 64 : 5);
    }
    free(pretty);
    free(buf);

    /* long: about 300 KB of indented events, broken near the end */
    const char *ev = "  {\n    \"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k \\\"q\\\" x\", "
                     "\"pid\": 0, \"tid\": 7,\n    \"ts\": 1712195495553393.209, \"dur\": 1.728,\n"
                     "    \"args\": {\n      \"device\": 0,      \"stream\": 7, \"grid\": [1, 1, "
                     "1]\n    }\n  },\n";
    size_t evlen = strlen(ev), count = 2000, biglen = 32 + evlen * count + 64;
    char *big = malloc(biglen);
    CHECK(big != NULL);
    if (!big)
        return;
    size_t b = (size_t)snprintf(big, biglen, "{\n  \"traceEvents\": [\n");
    for (size_t i = 0; i < count; i++) {
        memcpy(big + b, ev, evlen);
        b += evlen;
    }
    b += (size_t)snprintf(big + b, biglen - b, "  {}\n  ]\n}\n");
    check_levels_same(big, b, 0);
    check_levels_same(big, b, 100000);
    big[b - 30] = '@'; /* an invalid character near the end */
    check_levels_same(big, b, 0);
    check_levels_same(big, b, 4099);
    free(big);
}

int
main(void)
{
    char dir[] = "/tmp/dpro-test-import-pipeline-XXXXXX";
    if (!mkdtemp(dir))
        return 99;
    test_threaded_same(dir);
    test_writer_error(dir);
    test_squeeze();
    rmdir(dir);
    return tests_done();
}
