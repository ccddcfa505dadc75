/*
 * test_import_limits.c: what the Kineto importer refuses or bounds, and what it costs on
 * absurd inputs.
 *
 * Long strings: the work is linear in a string's length. The rule checked: the best of
 * three CPU times (this thread, no writer) of a trace holding one 12 MiB string is at most
 * 8 times that of a 3 MiB one, plus 50 ms; linear work gives about 4 times, the quadratic
 * lexing this guards against about 16 times (0.05 s against 0.89 s measured). A string
 * that never ends is refused while it is read: a 64 MiB name fed in 256 KiB pieces fails
 * before 21 MiB of it were fed (checked by counting, deterministic).
 *
 * Bounds (import_kineto.h): times up to 2^62 ns, bytes and element counts up to 2^50 are
 * imported, one past them refused with the file and the place; the shared repro inputs
 * overflow-nelems.json and overflow-shift.json ($top_srcdir/../shared/repro, when present)
 * are refused.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include "dprotrace.h"
#include "import_kineto.h"
#include "../unit/testutil.h"

#define MIB (1u << 20)

/* A trace whose one event has an args string of n bytes. */
static char *
long_arg_trace(size_t n, size_t *len)
{
    static const char head[] = "{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": "
                               "\"a\", \"ts\": 1, \"dur\": 1, \"args\": {\"Call stack\": \"";
    static const char tail[] = "\"}}]}";
    size_t h = sizeof(head) - 1, t = sizeof(tail) - 1;
    char *s = malloc(h + n + t);
    if (!s)
        return NULL;
    memcpy(s, head, h);
    memset(s + h, 'x', n);
    memcpy(s + h + n, tail, t);
    *len = h + n + t;
    return s;
}

static double
thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Best of three CPU times of importing a trace with an n-byte string (no writer). */
static double
long_string_cpu(size_t n)
{
    size_t len;
    char *text = long_arg_trace(n, &len);
    double best = 1e9;
    CHECK(text != NULL);
    for (int i = 0; text && i < 3; i++) {
        char err[256];
        double t0 = thread_cpu_s();
        int rc = kineto_import_buffer(NULL, text, len, 256u << 10, NULL, err, sizeof(err));
        double t = thread_cpu_s() - t0;
        CHECK(rc == DPRO_OK);
        if (rc != DPRO_OK)
            fprintf(stderr, "%s\n", err);
        if (t < best)
            best = t;
    }
    free(text);
    return best;
}

static void
test_long_string_linear(void)
{
    double t3 = long_string_cpu(3 * MIB), t12 = long_string_cpu(12 * MIB);
    printf("long strings: 3 MiB %.3f s, 12 MiB %.3f s of CPU\n", t3, t12);
    CHECK(t12 <= 8 * t3 + 0.05);
}

/* A name that does not end is refused once about 16 MiB of it were read. */
static void
test_endless_string(void)
{
    kineto_importer *k;
    kineto_options o = {.source_file = "endless.json"};
    CHECK(kineto_importer_new(NULL, &o, &k) == DPRO_OK);
    if (!k)
        return;
    static const char head[] = "{\"traceEvents\": [{\"ph\": \"X\", \"name\": \"";
    int rc = kineto_importer_feed(k, head, sizeof(head) - 1);
    size_t piece = 256u << 10, fed = 0;
    char *x = malloc(piece);
    CHECK(x != NULL);
    if (x)
        memset(x, 'n', piece);
    while (x && rc == DPRO_OK && fed < 64 * MIB) {
        rc = kineto_importer_feed(k, x, piece);
        fed += piece;
    }
    printf("endless name: refused after %zu MiB: %s\n", fed / MIB, kineto_importer_errmsg(k));
    CHECK(rc == DPRO_ERR_LIMIT);
    CHECK(fed <= 21 * MIB);
    CHECK(strstr(kineto_importer_errmsg(k), "endless.json: byte ") != NULL);
    CHECK(strstr(kineto_importer_errmsg(k), "no JSON token ends in 16 MiB") != NULL);
    CHECK(kineto_importer_finish(k, 1) == DPRO_ERR_LIMIT);
    kineto_importer_free(k);
    free(x);
}

/* One event text imported alone: its status; the message must then hold what. */
static void
expect(const char *event, int want, const char *what)
{
    char json[1024], err[512];
    snprintf(json, sizeof(json), "{\"traceEvents\": [%s]}", event);
    kineto_options o = {.source_file = "bound.json"};
    int rc = kineto_import_buffer(NULL, json, strlen(json), 0, &o, err, sizeof(err));
    int ok = rc == want && (want == DPRO_OK || (strstr(err, "bound.json: byte ") &&
                                                strstr(err, ", line 1: ") && strstr(err, what)));
    if (!ok)
        fprintf(stderr, "%s: rc %d (want %d) \"%s\" (want \"%s\")\n", event, rc, want, err, what);
    CHECK(ok);
}

#define KERNEL(ts, dur, args)                                                                      \
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"ncclKernel_AllReduce_RING_LL_Sum_float\","        \
    "\"pid\":0,\"tid\":7,\"ts\":" ts ",\"dur\":" dur ",\"args\":{" args "}}"

static void
test_bounds(void)
{
    /* 2^62 ns = 4611686018427387.904 us */
    expect(KERNEL("4611686018427387.904", "0", ""), DPRO_OK, "");
    expect(KERNEL("4611686018427387.905", "0", ""), DPRO_ERR_LIMIT, "ts + dur is out of range");
    expect(KERNEL("4611686018427386.904", "1", ""), DPRO_OK, "");
    expect(KERNEL("4611686018427386.904", "1.001", ""), DPRO_ERR_LIMIT, "past 2^62 ns");
    expect(KERNEL("1661938466536906", "9007199254740993", ""), DPRO_ERR_LIMIT, "past 2^62");
    /* 2^48 floats are 2^50 bytes */
    expect(KERNEL("1", "1", "\"In msg nelems\":281474976710656,\"dtype\":\"Float\""), DPRO_OK, "");
    expect(KERNEL("1", "1", "\"In msg nelems\":281474976710657,\"dtype\":\"Float\""),
           DPRO_ERR_LIMIT, "\"In msg nelems\": 281474976710657 elements of 4 bytes");
    expect(KERNEL("1", "1", "\"In msg nelems\":9223372036854775807,\"dtype\":\"Float\""),
           DPRO_ERR_LIMIT, "out of range");
    /* an element type not known: the count alone is bounded */
    expect("{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"ncclDevKernel_AllReduce_RING_LL(x)\","
           "\"ts\":1,\"dur\":1,\"args\":{\"In msg nelems\":1125899906842624}}",
           DPRO_OK, "");
    expect("{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"ncclDevKernel_AllReduce_RING_LL(x)\","
           "\"ts\":1,\"dur\":1,\"args\":{\"In msg nelems\":1125899906842625}}",
           DPRO_ERR_LIMIT, "1125899906842625 elements of 0 bytes");
    expect(KERNEL("1", "1",
                  "\"Collective name\":\"reduce_scatter\",\"Out msg nelems\":"
                  "9223372036854775807,\"dtype\":\"Float\""),
           DPRO_ERR_LIMIT, "\"Out msg nelems\"");
    expect("{\"ph\":\"X\",\"cat\":\"gpu_memcpy\",\"name\":\"Memcpy HtoD\",\"ts\":1,\"dur\":1,"
           "\"args\":{\"bytes\":1125899906842624}}",
           DPRO_OK, "");
    expect("{\"ph\":\"X\",\"cat\":\"gpu_memset\",\"name\":\"Memset\",\"ts\":1,\"dur\":1,"
           "\"args\":{\"bytes\":9223372036854775807}}",
           DPRO_ERR_LIMIT, "\"bytes\": 9223372036854775807 is out of range");
    expect("{\"ph\":\"i\",\"name\":\"[memory]\",\"ts\":1,\"args\":{\"Device Type\":1,"
           "\"Bytes\":-9223372036854775808}}",
           DPRO_ERR_LIMIT, "\"Bytes\": -9223372036854775808 is out of range");
}

/* The shared repro inputs are refused, naming the file and the place. */
static void
test_repro(void)
{
    const char *top = getenv("top_srcdir");
    static const char *const files[] = {"overflow-nelems.json", "overflow-shift.json"};
    static const char *const why[] = {"\"In msg nelems\": 9223372036854775807 elements",
                                      "ts + dur is out of range"};
    for (int i = 0; i < 2; i++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/../shared/repro/%s", top ? top : "..", files[i]);
        if (access(path, R_OK) != 0) {
            printf("%s: absent, not checked\n", path);
            continue;
        }
        kineto_importer *k;
        kineto_options o = {.source_file = path};
        CHECK(kineto_importer_new(NULL, &o, &k) == DPRO_OK);
        if (!k)
            continue;
        int rc = kineto_import_path(k, path);
        const char *msg = kineto_importer_errmsg(k);
        printf("%s: %s\n", files[i], msg);
        CHECK(rc == DPRO_ERR_LIMIT);
        CHECK(strstr(msg, ": byte ") && strstr(msg, ", line ") && strstr(msg, why[i]));
        kineto_importer_free(k);
    }
}

int
main(void)
{
    test_long_string_linear();
    test_endless_string();
    test_bounds();
    test_repro();
    return tests_done();
}
