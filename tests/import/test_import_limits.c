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
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

int
main(void)
{
    test_long_string_linear();
    test_endless_string();
    return tests_done();
}
