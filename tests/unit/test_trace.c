/*
 * test_trace.c: unit tests of libdprotrace: codec round trip on random event streams,
 * launch configurations coded by kernel name, writer/reader round trip, string interning,
 * every corruption case, schema-version refusal, files that are not traces, and readers
 * running while a writer appends.
 */
#include "dprotrace.h"
#include "testutil.h"

#include <sqlite3.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <zlib.h>
#include <unistd.h>

static char tmpdir[256];

static void
path_in_tmp(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", tmpdir, name);
}

/* A random event using every field of its kind (and some it does not use). */
static void
random_event(uint64_t *seed, dpro_event *e, uint64_t *clock, int allow_unknown)
{
    memset(e, 0, sizeof *e);
    e->kind = 1 + test_rand(seed) % DPRO_KIND_MAX_KNOWN;
    if (allow_unknown && test_rand(seed) % 50 == 0)
        e->kind = 100 + test_rand(seed) % 3;
    *clock += test_rand(seed) % 20000;
    e->start_ns = *clock;
    e->end_ns = e->start_ns + test_rand(seed) % 100000;
    e->subkind = test_rand(seed) % 8;
    e->thread = (uint32_t)(1000 + test_rand(seed) % 4);
    e->name = (uint32_t)(test_rand(seed) % 50);
    e->name2 = (uint32_t)(test_rand(seed) % 3);
    e->device = (uint32_t)(test_rand(seed) % 2);
    e->correlation = test_rand(seed) % 3 ? test_rand(seed) % 1000000 : 0;
    e->stream = test_rand(seed) % 2 ? 0x7f0000001000ull + test_rand(seed) % 4 : 0;
    e->result = (int32_t)(test_rand(seed) % 5) - 2;
    e->shared_mem = (uint32_t)(test_rand(seed) % 49152);
    e->object = test_rand(seed);
    e->bytes = test_rand(seed) >> (test_rand(seed) % 64);
    e->address = test_rand(seed);
    for (int i = 0; i < 3; i++) {
        e->grid[i] = (uint32_t)test_rand(seed);
        e->block[i] = (uint32_t)(test_rand(seed) % 1024);
    }
    e->comm = test_rand(seed);
    e->seq = test_rand(seed) % 100;
    e->count = test_rand(seed);
    e->dtype = (uint32_t)(test_rand(seed) % 10);
    e->redop = (uint32_t)(test_rand(seed) % 5);
    e->peer = (int32_t)(test_rand(seed) % 9) - 1;
    e->stack = (uint32_t)(test_rand(seed) % 7);
    e->value = (int64_t)test_rand(seed);
}

static int
event_equal(const dpro_event *a, const dpro_event *b)
{
    return memcmp(a, b, sizeof *a) == 0;
}

/* Codec: encode then decode gives the same multiset; order is kept within a kind. */
static void
test_codec_roundtrip(void)
{
    for (uint64_t seed0 = 1; seed0 <= 20; seed0++) {
        uint64_t seed = seed0 * 0x9E3779B97F4A7C15ull, clock = 1ull << 40;
        size_t n = 1 + test_rand(&seed) % 5000;
        dpro_event *in = calloc(n, sizeof *in), *out = NULL;
        uint8_t *blob = NULL;
        size_t bloblen, rawlen, nout = 0;
        char err[256];
        for (size_t i = 0; i < n; i++)
            random_event(&seed, &in[i], &clock, 1);
        CHECK(dpro_batch_encode(in, n, 6, &blob, &bloblen, &rawlen) == DPRO_OK);
        CHECK(dpro_batch_decode(blob, bloblen, rawlen, &out, &nout, err, sizeof err) == DPRO_OK);
        CHECK_EQ_U(nout, n);
        /* decoded events come grouped by kind; match them kind by kind in order */
        size_t matched = 0;
        for (uint32_t k = 0; k < 200 && nout == n; k++) {
            size_t j = 0;
            for (size_t i = 0; i < n; i++) {
                if (in[i].kind != k)
                    continue;
                while (j < nout && out[j].kind != k)
                    j++;
                if (j < nout && event_equal(&in[i], &out[j]))
                    matched++;
                j++;
            }
        }
        CHECK_EQ_U(matched, n);
        free(in);
        free(out);
        free(blob);
    }
    /* the empty batch */
    {
        uint8_t *blob = NULL;
        size_t bl, rl, nout = 1;
        dpro_event *out = NULL;
        CHECK(dpro_batch_encode(NULL, 0, 6, &blob, &bl, &rl) == DPRO_OK);
        CHECK(dpro_batch_decode(blob, bl, rl, &out, &nout, NULL, 0) == DPRO_OK);
        CHECK_EQ_U(nout, 0);
        free(out);
        free(blob);
    }
}

/* Corrupt or hostile batches: every case gives an error, never a crash. */
static void
test_codec_corruption(void)
{
    uint64_t seed = 42, clock = 1000;
    dpro_event ev[300], *out = NULL;
    uint8_t *blob;
    size_t bl, rl, nout;
    char err[256];
    for (int i = 0; i < 300; i++)
        random_event(&seed, &ev[i], &clock, 0);
    CHECK(dpro_batch_encode(ev, 300, 6, &blob, &bl, &rl) == DPRO_OK);

    /* truncated */
    CHECK(dpro_batch_decode(blob, bl / 2, rl, &out, &nout, err, sizeof err) == DPRO_ERR_CORRUPT);
    CHECK(strstr(err, "zlib") != NULL);
    /* claims fewer bytes than it inflates to: a zlib bomb is stopped at the claim */
    CHECK(dpro_batch_decode(blob, bl, rl / 2, &out, &nout, err, sizeof err) == DPRO_ERR_LIMIT);
    /* claims more than the hard limit */
    CHECK(dpro_batch_decode(blob, bl, DPRO_BATCH_MAX_RAW + 1u, &out, &nout, err, sizeof err) ==
          DPRO_ERR_LIMIT);
    /* claims more than it holds */
    CHECK(dpro_batch_decode(blob, bl, rl + 10, &out, &nout, err, sizeof err) == DPRO_ERR_CORRUPT);
    /* flipped bytes: every single-byte flip either decodes or fails cleanly */
    int failures = 0;
    for (size_t i = 0; i < bl; i++) {
        uint8_t *copy = malloc(bl);
        memcpy(copy, blob, bl);
        copy[i] ^= 0x5a;
        int rc = dpro_batch_decode(copy, bl, rl, &out, &nout, err, sizeof err);
        if (rc == DPRO_OK)
            free(out);
        else
            failures++;
        CHECK(rc == DPRO_OK || rc == DPRO_ERR_CORRUPT || rc == DPRO_ERR_LIMIT);
        free(copy);
    }
    CHECK(failures > 0);
    /* zlib data that is valid but not a protobuf batch */
    {
        uint8_t raw[64], z[128];
        uLongf zl = sizeof z;
        memset(raw, 0xff, sizeof raw);
        compress2(z, &zl, raw, sizeof raw, 6);
        CHECK(dpro_batch_decode(z, zl, sizeof raw, &out, &nout, err, sizeof err) ==
              DPRO_ERR_CORRUPT);
    }
    /* a real zlib bomb: 64 MiB of zeros compresses to ~64 KiB; claimed 1 KiB */
    {
        size_t big = 64u << 20;
        uint8_t *zeros = calloc(1, big), *z = malloc(big / 500);
        uLongf zl = big / 500;
        CHECK(compress2(z, &zl, zeros, big, 9) == 0);
        CHECK(dpro_batch_decode(z, zl, 1024, &out, &nout, err, sizeof err) == DPRO_ERR_LIMIT);
        free(zeros);
        free(z);
    }
    free(blob);
}

/* Encodes n events and decodes them again; returns 1 when every event came back equal
 * (kind by kind, in order) and stores the compressed size in *zlen. */
static int
roundtrip_exact(const dpro_event *in, size_t n, size_t *zlen)
{
    uint8_t *blob = NULL;
    size_t rawlen, nout = 0, matched = 0;
    dpro_event *out = NULL;
    char err[256];
    *zlen = 0;
    if (dpro_batch_encode(in, n, 6, &blob, zlen, &rawlen) != DPRO_OK)
        return 0;
    if (dpro_batch_decode(blob, *zlen, rawlen, &out, &nout, err, sizeof err) == DPRO_OK &&
        nout == n) {
        for (uint32_t k = 0; k < 200; k++) {
            size_t j = 0;
            for (size_t i = 0; i < n; i++) {
                if (in[i].kind != k)
                    continue;
                while (j < nout && out[j].kind != k)
                    j++;
                if (j < nout && event_equal(&in[i], &out[j]))
                    matched++;
                j++;
            }
        }
    }
    free(out);
    free(blob);
    return matched == n;
}

/* Framework ops as Kineto records them: whole microseconds, nested on their thread
 * (a parent, then children inside it), appended in start order. */
static size_t
nested_us_events(uint64_t *seed, dpro_event *ev, size_t max)
{
    size_t n = 0;
    uint64_t t = 1682725898079292000ull;
    while (n + 4 <= max) {
        uint64_t parent = t, child = t + 1000 * (1 + test_rand(seed) % 5);
        ev[n++] = (dpro_event){.kind = DPRO_KIND_MARKER,
                               .subkind = DPRO_MARK_CPU_OP,
                               .thread = 7,
                               .name = 1,
                               .start_ns = parent};
        size_t p = n - 1;
        for (int c = 0; c < 3; c++) {
            uint64_t d = 1000 * (1 + test_rand(seed) % 40);
            ev[n++] = (dpro_event){.kind = DPRO_KIND_MARKER,
                                   .subkind = DPRO_MARK_CPU_OP,
                                   .thread = 7,
                                   .name = 2 + (uint32_t)c,
                                   .start_ns = child,
                                   .end_ns = child + d};
            child += d + 1000 * (test_rand(seed) % 3);
        }
        ev[p].end_ns = child + 1000;
        t = child + 1000 * (2 + test_rand(seed) % 50);
    }
    return n;
}

/* Time units (times stored divided by their gcd) and the nested-start code: exact round
 * trips, on Kineto-like data and on values at the edges of 64 bits. */
static void
test_codec_time_units(void)
{
    uint64_t seed = 7;
    size_t n, zus, zns;
    dpro_event *ev = calloc(4000, sizeof *ev);

    n = nested_us_events(&seed, ev, 4000);
    CHECK(roundtrip_exact(ev, n, &zus));
    /* the same events off the microsecond grid by 1 ns: exact too, and bigger */
    for (size_t i = 0; i < n; i++) {
        ev[i].start_ns += 1;
        ev[i].end_ns += (i % 3 == 0);
    }
    CHECK(roundtrip_exact(ev, n, &zns));
    CHECK(zus * 3 < zns * 2);
    /* one event off the grid in a group of a thousand on it */
    for (size_t i = 0; i < n; i++) {
        ev[i].start_ns -= 1;
        ev[i].end_ns -= (i % 3 == 0);
    }
    ev[n / 2].end_ns += 1;
    CHECK(roundtrip_exact(ev, n, &zns));
    ev[n / 2].end_ns -= 1;
    /* a unit that is not a power of ten, and a group whose events all start at 0 */
    for (size_t i = 0; i < n; i++) {
        ev[i].start_ns = ev[i].start_ns / 1000 * 640;
        ev[i].end_ns = ev[i].end_ns / 1000 * 640;
    }
    CHECK(roundtrip_exact(ev, n, &zns));
    for (size_t i = 0; i < 50; i++)
        ev[i] = (dpro_event){.kind = DPRO_KIND_API, .thread = (uint32_t)i % 3, .end_ns = 2000};
    CHECK(roundtrip_exact(ev, 50, &zns));
    /* the edges: ends before starts, ends of zero, times near 2^62, 2^63 and 2^64, on one
     * lane (nested and not) and on several, with and without a common unit */
    static const uint64_t edge[] = {0,
                                    1,
                                    1000,
                                    (1ull << 62) - 1000,
                                    1ull << 62,
                                    (1ull << 63) - 1,
                                    1ull << 63,
                                    (1ull << 63) + 1000,
                                    UINT64_MAX - 999,
                                    UINT64_MAX};
    size_t ne = sizeof edge / sizeof edge[0];
    for (int round = 0; round < 200; round++) {
        n = 0;
        for (size_t i = 0; i < 40; i++) {
            dpro_event *e = &ev[n++];
            memset(e, 0, sizeof *e);
            e->kind = round % 2 ? DPRO_KIND_MARKER : DPRO_KIND_KERNEL;
            e->thread = (uint32_t)(test_rand(&seed) % (round % 4 ? 1 : 3));
            e->stream = e->thread;
            e->start_ns = edge[test_rand(&seed) % ne];
            e->end_ns = edge[test_rand(&seed) % ne];
            if (round % 3 == 0) {
                e->start_ns = e->start_ns / 1000 * 1000;
                e->end_ns = e->end_ns / 1000 * 1000;
            }
            if (test_rand(&seed) % 3 == 0)
                e->start_ns += test_rand(&seed) % 5000;
        }
        CHECK(roundtrip_exact(ev, n, &zns));
    }
    free(ev);
}

/* A batch written by dpro 1.0 (schema major 1: no time unit; a start before the end of its
 * lane's previous event coded from that end): a parent marker on thread 7 with two nested
 * children and a sibling after it, and a kernel. Newer readers must decode it as before. */
static void
test_codec_major1(void)
{
    static const uint8_t v1[] = {
        0x78, 0x9c, 0xe3, 0x60, 0x14, 0x38, 0x30, 0x6d, 0x23, 0x93, 0x94, 0x02, 0x07, 0x93, 0x00,
        0xa3, 0x14, 0xa3, 0x83, 0x12, 0xe3, 0x0e, 0x2f, 0x46, 0xa1, 0x5f, 0x8c, 0x4c, 0x6c, 0x5c,
        0x4d, 0x4c, 0x4c, 0x2c, 0xcc, 0x5d, 0x4c, 0x4c, 0x73, 0x18, 0x27, 0x31, 0x31, 0x72, 0x4b,
        0x19, 0x73, 0x70, 0x08, 0xb0, 0x48, 0xb1, 0x30, 0xf8, 0x2f, 0x30, 0x50, 0x62, 0x99, 0x10,
        0xf1, 0x23, 0xc0, 0x88, 0x85, 0x91, 0x89, 0x99, 0x11, 0xa8, 0x94, 0x95, 0x1b, 0xa8, 0x94,
        0x9d, 0xa5, 0x8b, 0x89, 0x95, 0x61, 0x3b, 0x2b, 0x7f, 0xe9, 0x24, 0x26, 0x8e, 0xfb, 0x4c,
        0x33, 0x18, 0x97, 0x33, 0x1e, 0x66, 0x04, 0x00, 0x3a, 0x05, 0x12, 0xa2};
    static const uint64_t marker_times[4][2] = {
        {5000000, 5090000}, {5001000, 5040000}, {5042000, 5085000}, {5100000, 5150000}};
    dpro_event *out = NULL;
    size_t nout = 0;
    char err[256];
    CHECK(dpro_batch_decode(v1, sizeof v1, 94, &out, &nout, err, sizeof err) == DPRO_OK);
    CHECK_EQ_U(nout, 5);
    if (nout == 5) {
        CHECK_EQ_U(out[0].kind, DPRO_KIND_KERNEL);
        CHECK_EQ_U(out[0].start_ns, 5020000);
        CHECK_EQ_U(out[0].end_ns, 5023000);
        CHECK_EQ_U(out[0].correlation, 9);
        for (int i = 0; i < 4; i++) {
            CHECK_EQ_U(out[1 + i].kind, DPRO_KIND_MARKER);
            CHECK_EQ_U(out[1 + i].start_ns, marker_times[i][0]);
            CHECK_EQ_U(out[1 + i].end_ns, marker_times[i][1]);
        }
    }
    free(out);
}

/* Compresses raw and decodes it; returns the status. */
static int
decode_raw(const uint8_t *raw, size_t rl, char *err, size_t errlen)
{
    uLongf zl = compressBound(rl);
    uint8_t *z = malloc(zl);
    dpro_event *out = NULL;
    size_t nout = 0;
    int rc = DPRO_ERR_NOMEM;
    if (z && compress2(z, &zl, raw, rl, 6) == Z_OK)
        rc = dpro_batch_decode(z, zl, rl, &out, &nout, err, errlen);
    free(out);
    free(z);
    return rc;
}

/* Flips every byte of the protobuf raw[0..rl) three ways, compressing it again each time
 * (so zlib does not catch it): each must decode or fail cleanly, and the sweep must see
 * both. raw is restored. */
static void
flip_sweep(uint8_t *raw, size_t rl)
{
    static const uint8_t flips[] = {0x01, 0x80, 0xff};
    char err[256];
    int failures = 0, decoded = 0;
    for (size_t i = 0; i < rl; i++) {
        for (size_t f = 0; f < sizeof flips; f++) {
            raw[i] ^= flips[f];
            int rc = decode_raw(raw, rl, err, sizeof err);
            if (rc == DPRO_OK)
                decoded++;
            else
                failures++;
            if (rc != DPRO_OK && rc != DPRO_ERR_CORRUPT && rc != DPRO_ERR_LIMIT &&
                rc != DPRO_ERR_VERSION)
                CHECK(!"unexpected status");
            raw[i] ^= flips[f];
        }
    }
    CHECK(failures > 0 && decoded > 0);
}

/* Every byte of the protobuf of a batch with a time unit and nested starts changed, then
 * compressed again (so zlib does not catch it): each decodes or fails cleanly. */
static void
test_codec_time_units_corrupt(void)
{
    uint64_t seed = 3;
    dpro_event *ev = calloc(400, sizeof *ev);
    size_t n = nested_us_events(&seed, ev, 400), bl, rl;
    uint8_t *blob = NULL;

    ev[5].kind = DPRO_KIND_KERNEL; /* a second group */
    ev[5].stream = 3;
    CHECK(dpro_batch_encode(ev, n, 6, &blob, &bl, &rl) == DPRO_OK);
    uint8_t *raw = malloc(rl);
    uLongf got = rl;
    CHECK(uncompress(raw, &got, blob, bl) == Z_OK && got == rl);
    flip_sweep(raw, rl);
    free(raw);
    free(blob);
    free(ev);
}

/* Launch-like events: kernels (name = kernel) or cudaLaunchKernel API calls (name = the API,
 * name2 = kernel) drawn from nnames kernel names in random order, each name with its usual
 * block_x and shared_mem (wide random values) and, one launch in 50, another; the
 * configuration goes to block_x/shared_mem, or, when plain, to block_y/block_z, columns the
 * writer does not code against the name. Returns the number of events. */
static size_t
launch_events(uint64_t seed, dpro_event *ev, size_t n, uint32_t kind, uint32_t nnames, int config,
              int plain)
{
    uint64_t t = 1000000;
    for (size_t i = 0; i < n; i++) {
        uint32_t k = (uint32_t)(test_rand(&seed) % nnames);
        uint64_t h = (k + 1) * 0x9E3779B97F4A7C15ull;
        uint32_t block = 1 + (uint32_t)(h >> 40) % 1024, smem = (uint32_t)(h >> 8) % 49152;
        if (test_rand(&seed) % 50 == 0) {
            block = 1 + (uint32_t)(test_rand(&seed) % 1024);
            smem = (uint32_t)(test_rand(&seed) % 49152);
        }
        dpro_event *e = &ev[i];
        memset(e, 0, sizeof *e);
        e->kind = kind;
        e->start_ns = t;
        e->end_ns = t + 1000 + test_rand(&seed) % 5000;
        t = e->end_ns + test_rand(&seed) % 2000;
        e->correlation = 100 + i;
        e->grid[0] = 1 + (uint32_t)(h >> 20) % 4096;
        e->grid[1] = 1;
        if (kind == DPRO_KIND_API) {
            e->thread = 7;
            e->name = 1;
            e->name2 = 2 + k;
            e->subkind = DPRO_API_RUNTIME;
        } else {
            e->name = 2 + k;
            e->stream = 7 + (i & 1);
        }
        if (config && plain) {
            e->block[1] = block;
            e->block[2] = smem;
        } else if (config) {
            e->block[0] = block;
            e->shared_mem = smem;
        }
    }
    return n;
}

/* Returns the position of the only occurrence of pat in buf, or -1 (none or several). */
static long
find_once(const uint8_t *buf, size_t len, const uint8_t *pat, size_t plen)
{
    long at = -1;
    for (size_t i = 0; i + plen <= len; i++) {
        if (memcmp(buf + i, pat, plen) == 0) {
            if (at >= 0)
                return -1;
            at = (long)i;
        }
    }
    return at;
}

/* Launch configurations coded against the previous launch of the same kernel name
 * (trace.proto name_relative_field): exact round trips of kernel and API events, the size it
 * saves, values and names at the edges, more names than the table holds, names whose
 * probes wrap at the table's end. */
static void
test_codec_name_relative(void)
{
    size_t n = 6000, zbase, zcoded, zplain;
    dpro_event *ev = calloc(n, sizeof *ev);
    uint64_t seed = 11;

    /* kernels and API calls: the coding works for both (API events by name2) */
    static const uint32_t kinds[] = {DPRO_KIND_KERNEL, DPRO_KIND_API};
    for (size_t k = 0; k < 2; k++) {
        launch_events(5, ev, n, kinds[k], 300, 0, 0);
        CHECK(roundtrip_exact(ev, n, &zbase));
        launch_events(5, ev, n, kinds[k], 300, 1, 0);
        CHECK(roundtrip_exact(ev, n, &zcoded));
        launch_events(5, ev, n, kinds[k], 300, 1, 1);
        CHECK(roundtrip_exact(ev, n, &zplain));
        /* the configuration costs far less coded than in plain columns */
        CHECK(zbase < zcoded && zbase < zplain);
        CHECK((zcoded - zbase) * 4 < zplain - zbase);
    }
    /* both kinds in one batch, with markers between */
    launch_events(6, ev, n / 2, DPRO_KIND_KERNEL, 50, 1, 0);
    launch_events(7, ev + n / 2, n / 2, DPRO_KIND_API, 50, 1, 0);
    for (size_t i = 0; i < n; i += 7)
        ev[i].kind = DPRO_KIND_MARKER;
    CHECK(roundtrip_exact(ev, n, &zcoded));

    /* edges: values 0, 1, 2^31, 2^32-1 (and neighbours), names 0 and UINT32_MAX, each
     * configuration column constant, absent or packed */
    static const uint32_t vals[] = {0, 1, 2, 1u << 31, (1u << 31) - 1, UINT32_MAX - 1, UINT32_MAX};
    static const uint32_t names[] = {0, 1, 2, 2047, 2048, UINT32_MAX - 1, UINT32_MAX};
    for (int round = 0; round < 300; round++) {
        size_t m = 1 + test_rand(&seed) % 60;
        int mode[7]; /* per configuration column: 0 absent, 1 constant, 2 packed */
        for (int c = 0; c < 7; c++)
            mode[c] = (int)(test_rand(&seed) % 3);
        uint32_t cval[7];
        for (int c = 0; c < 7; c++)
            cval[c] = vals[1 + test_rand(&seed) % 6];
        for (size_t i = 0; i < m; i++) {
            dpro_event *e = &ev[i];
            memset(e, 0, sizeof *e);
            e->kind = round % 2 ? DPRO_KIND_API : DPRO_KIND_KERNEL;
            e->start_ns = 1000 * i;
            e->end_ns = 1000 * i + 500;
            e->stream = e->thread = 1;
            uint32_t nm = names[test_rand(&seed) % 7];
            if (round % 4 >= 2)
                nm = (uint32_t)test_rand(&seed) % 3; /* few names: many repeats */
            e->name = round % 2 ? 9 : nm;
            e->name2 = round % 2 ? nm : 9;
            uint32_t *col[7] = {&e->shared_mem, &e->grid[0],  &e->grid[1], &e->grid[2],
                                &e->block[0],   &e->block[1], &e->block[2]};
            for (int c = 0; c < 7; c++)
                *col[c] = mode[c] == 0 ? 0 : mode[c] == 1 ? cval[c] : vals[test_rand(&seed) % 7];
        }
        CHECK(roundtrip_exact(ev, m, &zcoded));
    }

    /* 4,000 distinct names, more than the table's 2048 slots, each launched several times */
    for (size_t i = 0; i < n; i++) {
        dpro_event *e = &ev[i];
        memset(e, 0, sizeof *e);
        e->kind = DPRO_KIND_KERNEL;
        e->start_ns = 1000 * i;
        e->end_ns = 1000 * i + 700;
        e->stream = 1;
        e->name = 1 + (uint32_t)(i < 4000 ? i : test_rand(&seed) % 4000);
        e->block[0] = 32 * (1 + e->name % 32) + (test_rand(&seed) % 8 == 0);
        e->shared_mem = e->name * 16 + (test_rand(&seed) % 8 == 0);
    }
    CHECK(roundtrip_exact(ev, n, &zcoded));

    /* names that all start at the table's last slots (2047, 2047 + 2048, ...): their
     * probes wrap to slot 0, where names 0..20 sit too; past 16 probes no room */
    for (size_t i = 0; i < 3000; i++) {
        dpro_event *e = &ev[i];
        uint32_t j = (uint32_t)(test_rand(&seed) % 40);
        memset(e, 0, sizeof *e);
        e->kind = DPRO_KIND_KERNEL;
        e->start_ns = 1000 * i;
        e->end_ns = 1000 * i + 700;
        e->stream = 1;
        e->name = j < 20 ? 2040 + (j % 8) + 2048u * j : j - 20;
        e->block[0] = (uint32_t)(64 * (1 + j % 5) + (test_rand(&seed) % 10 == 0));
        e->shared_mem = j * 1000 + (uint32_t)(test_rand(&seed) % 10 == 0);
    }
    CHECK(roundtrip_exact(ev, 3000, &zcoded));
    free(ev);
}

/* Name-relative lists patched in the protobuf (then compressed again): a column that is
 * not a launch configuration, one listed twice, one that is not packed are refused as
 * corrupt, another packed configuration column is accepted; every byte of such a batch
 * changed decodes or fails cleanly. */
static void
test_codec_name_relative_corrupt(void)
{
    dpro_event *ev = calloc(300, sizeof *ev);
    uint8_t *blob = NULL;
    size_t bl, rl, n = launch_events(3, ev, 300, DPRO_KIND_KERNEL, 20, 1, 0);
    char err[256];

    CHECK(dpro_batch_encode(ev, n, 6, &blob, &bl, &rl) == DPRO_OK);
    uint8_t *raw = malloc(rl);
    uLongf got = rl;
    CHECK(uncompress(raw, &got, blob, bl) == Z_OK && got == rl);
    /* field 36, packed, 2 bytes: block_x (20), shared_mem (13) */
    static const uint8_t list[] = {0xa2, 0x02, 0x02, 20, 13};
    long at = find_once(raw, rl, list, sizeof list);
    CHECK(at >= 0);
    if (at >= 0) {
        static const struct {
            uint8_t a, b;
            int rc;
        } patch[] = {
            {20, 13, DPRO_OK},          {17, 13, DPRO_OK}, /* grid_x: packed */
            {20, 11, DPRO_ERR_CORRUPT},                    /* subkind: not a launch configuration */
            {20, 23, DPRO_ERR_CORRUPT}, {6, 13, DPRO_ERR_CORRUPT},  /* comm, name */
            {20, 20, DPRO_ERR_CORRUPT}, {13, 13, DPRO_ERR_CORRUPT}, /* listed twice */
            {20, 18, DPRO_ERR_CORRUPT},                             /* grid_y: constant */
            {21, 13, DPRO_ERR_CORRUPT},                             /* block_y: absent */
            {0, 13, DPRO_ERR_CORRUPT},  {20, 127, DPRO_ERR_CORRUPT},
        };
        for (size_t p = 0; p < sizeof patch / sizeof patch[0]; p++) {
            raw[at + 3] = patch[p].a;
            raw[at + 4] = patch[p].b;
            err[0] = 0;
            int rc = decode_raw(raw, rl, err, sizeof err);
            CHECK_EQ_U(rc, patch[p].rc);
            if (patch[p].rc == DPRO_ERR_CORRUPT)
                CHECK(strstr(err, "name_relative_field") != NULL);
        }
        raw[at + 3] = 20;
        raw[at + 4] = 13;
    }
    flip_sweep(raw, rl);
    free(raw);
    free(blob);
    free(ev);
}

/* Writes n random events (sorted by start) plus metadata into path. */
static void
write_trace(const char *path, dpro_event *ev, size_t n, uint32_t batch_events)
{
    dpro_writer *w = NULL;
    dpro_writer_options o = {.batch_events = batch_events, .replace = 1};
    char err[256];
    uint32_t id;
    REQUIRE(dpro_writer_open(path, &o, &w, err, sizeof err) == DPRO_OK);
    CHECK(dpro_writer_set_meta(w, DPRO_META_HOST, "node-a") == DPRO_OK);
    CHECK(dpro_writer_set_meta_int(w, DPRO_META_RANK, 3) == DPRO_OK);
    for (int i = 1; i <= 49; i++) {
        char s[64];
        snprintf(s, sizeof s, "void kernel_%d<float, 4>(\"x\")", i);
        CHECK(dpro_writer_intern(w, s, &id) == DPRO_OK);
        CHECK_EQ_U(id, (uint32_t)i);
    }
    dpro_device_info dev = {.id = 0,
                            .name = "SimGPU H200",
                            .sm_count = 132,
                            .total_memory = 141ull << 30,
                            .clock_khz = 1980000,
                            .cc_major = 9,
                            .cc_minor = 0};
    CHECK(dpro_writer_add_device(w, &dev) == DPRO_OK);
    dpro_stream_info st = {
        .id = 0x7f0000001001ull, .device = 0, .flags = 1, .priority = -1, .name = "comm"};
    CHECK(dpro_writer_add_stream(w, &st) == DPRO_OK);
    dpro_comm_info cm = {.hash = 0xfeedfacecafebeefull, .handle = 77, .rank = 3, .size = 8};
    CHECK(dpro_writer_add_comm(w, &cm) == DPRO_OK);
    CHECK(dpro_writer_add_thread(w, 1000, "main") == DPRO_OK);
    uint32_t frames[3] = {1, 2, 3};
    CHECK(dpro_writer_add_stack(w, 5, frames, 3) == DPRO_OK);
    CHECK(dpro_writer_add_drops(w, 1000, "ring full", 5) == DPRO_OK);
    CHECK(dpro_writer_add_drops(w, 1000, "ring full", 7) == DPRO_OK);
    for (size_t i = 0; i < n; i++)
        CHECK(dpro_writer_append(w, &ev[i]) == DPRO_OK);
    CHECK(dpro_writer_close(w) == DPRO_OK);
}

static void
test_file_roundtrip(void)
{
    char path[512], err[256];
    uint64_t seed = 7, clock = 5000000;
    size_t n = 20000;
    dpro_event *ev = calloc(n, sizeof *ev), got;
    dpro_reader *r = NULL;
    dpro_iter *it = NULL;
    for (size_t i = 0; i < n; i++)
        random_event(&seed, &ev[i], &clock, 0);
    path_in_tmp(path, sizeof path, "roundtrip.dpro");
    write_trace(path, ev, n, 1000);
    REQUIRE(dpro_reader_open(path, &r, err, sizeof err) == DPRO_OK);
    if (!r)
        return;
    CHECK(!strcmp(dpro_reader_meta(r, DPRO_META_HOST), "node-a"));
    CHECK(dpro_reader_meta_int(r, DPRO_META_RANK, -1) == 3);
    CHECK(dpro_reader_meta_int(r, "no such key", -9) == -9);
    CHECK(!strcmp(dpro_reader_string(r, 4), "void kernel_4<float, 4>(\"x\")"));
    CHECK(!strcmp(dpro_reader_string(r, 0), ""));
    CHECK(!strcmp(dpro_reader_string(r, 999), ""));
    const dpro_device_info *d;
    CHECK(dpro_reader_devices(r, &d) == 1 && d[0].sm_count == 132 &&
          !strcmp(d[0].name, "SimGPU H200"));
    const dpro_stream_info *s;
    CHECK(dpro_reader_streams(r, &s) == 1 && s[0].priority == -1 && !strcmp(s[0].name, "comm"));
    const dpro_comm_info *c;
    CHECK(dpro_reader_comms(r, &c) == 1 && c[0].hash == 0xfeedfacecafebeefull && c[0].size == 8);
    const dpro_thread_info *t;
    CHECK(dpro_reader_threads(r, &t) == 1 && !strcmp(t[0].name, "main"));
    const uint32_t *frames;
    CHECK(dpro_reader_stack(r, 5, &frames) == 3 && frames[2] == 3);
    dpro_trace_summary sum;
    CHECK(dpro_reader_summary(r, &sum) == DPRO_OK);
    CHECK_EQ_U(sum.events, n);
    CHECK_EQ_U(sum.batches, 20);
    CHECK_EQ_U(sum.dropped, 12);
    CHECK_EQ_U(sum.first_ns, ev[0].start_ns);
    CHECK(sum.file_bytes > 0);
    /* events come back in start order, all of them, equal to what went in */
    REQUIRE(dpro_iter_open(r, &it) == DPRO_OK);
    size_t k = 0, equal = 0, ordered = 1;
    uint64_t prev = 0;
    int rc;
    while ((rc = dpro_iter_next(it, &got)) == 1) {
        if (got.start_ns < prev)
            ordered = 0;
        prev = got.start_ns;
        /* starts are strictly increasing in the input except for equal clocks */
        if (k < n && event_equal(&got, &ev[k]))
            equal++;
        k++;
    }
    CHECK(rc == 0);
    CHECK_EQ_U(k, n);
    CHECK(ordered);
    CHECK(equal > n * 99 / 100); /* same-start events of different kinds may swap */
    dpro_iter_close(it);
    dpro_reader_close(r);
    free(ev);
}

/* Batches written out of time order (many threads) still iterate in time order. */
static void
test_merge_order(void)
{
    char path[512], err[256];
    dpro_writer *w;
    dpro_writer_options o = {.batch_events = 100, .replace = 1};
    dpro_reader *r;
    dpro_iter *it;
    dpro_event e;
    path_in_tmp(path, sizeof path, "merge.dpro");
    REQUIRE(dpro_writer_open(path, &o, &w, err, sizeof err) == DPRO_OK);
    /* three interleaved producers whose events arrive producer by producer */
    for (int p = 0; p < 3; p++)
        for (int i = 0; i < 1000; i++) {
            memset(&e, 0, sizeof e);
            e.kind = DPRO_KIND_KERNEL;
            e.start_ns = 1000000 + (uint64_t)i * 30 + (uint64_t)p * 10;
            e.end_ns = e.start_ns + 5;
            e.stream = (uint64_t)p;
            CHECK(dpro_writer_append(w, &e) == DPRO_OK);
        }
    CHECK(dpro_writer_close(w) == DPRO_OK);
    REQUIRE(dpro_reader_open(path, &r, err, sizeof err) == DPRO_OK);
    REQUIRE(dpro_iter_open(r, &it) == DPRO_OK);
    uint64_t prev = 0, n = 0, ordered = 1;
    while (dpro_iter_next(it, &e) == 1) {
        ordered &= e.start_ns >= prev;
        prev = e.start_ns;
        n++;
    }
    CHECK(ordered);
    CHECK_EQ_U(n, 3000);
    dpro_iter_close(it);
    dpro_reader_close(r);
}

static void
test_interning(void)
{
    char path[512], err[256];
    dpro_writer *w;
    dpro_reader *r;
    uint32_t a, b, c, id;
    path_in_tmp(path, sizeof path, "intern.dpro");
    REQUIRE(dpro_writer_open(path, NULL, &w, err, sizeof err) == DPRO_OK);
    CHECK(dpro_writer_intern(w, "cudaLaunchKernel", &a) == DPRO_OK);
    CHECK(dpro_writer_intern(w, "cudaMemcpyAsync", &b) == DPRO_OK);
    CHECK(dpro_writer_intern(w, "cudaLaunchKernel", &c) == DPRO_OK);
    CHECK(a == c && a != b && a != 0);
    CHECK(dpro_writer_intern_len(w, "cudaLaunchKernelExC", 16, &c) == DPRO_OK);
    CHECK(a == c);
    CHECK(dpro_writer_intern(w, "", &c) == DPRO_OK && c != a);
    for (int i = 0; i < 20000; i++) { /* forces table and arena growth */
        char s[32];
        snprintf(s, sizeof s, "k%d", i);
        CHECK(dpro_writer_intern(w, s, &id) == DPRO_OK);
        if (i == 12345)
            c = id;
    }
    CHECK(dpro_writer_intern(w, "k12345", &id) == DPRO_OK && id == c);
    CHECK(dpro_writer_intern(w, "cudaMemcpyAsync", &id) == DPRO_OK && id == b);
    CHECK(dpro_writer_close(w) == DPRO_OK);
    REQUIRE(dpro_reader_open(path, &r, err, sizeof err) == DPRO_OK);
    CHECK(!strcmp(dpro_reader_string(r, c), "k12345"));
    CHECK(!strcmp(dpro_reader_string(r, a), "cudaLaunchKernel"));
    CHECK_EQ_U(dpro_reader_string_count(r), 20003);
    dpro_reader_close(r);
}

static void
sql(const char *path, const char *stmt)
{
    sqlite3 *db;
    REQUIRE(sqlite3_open(path, &db) == SQLITE_OK);
    CHECK(sqlite3_exec(db, stmt, NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(db);
}

/* Returns the integer result of a one-value query on path's database, -1 on error. */
static int64_t
sql_int(const char *path, const char *query)
{
    sqlite3 *db;
    sqlite3_stmt *st = NULL;
    int64_t v = -1;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, query, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

/* The page_size option, and tables that get no row are left out of the file. */
static void
test_page_size_and_lazy_tables(void)
{
    static const char *count_small_tables =
        "SELECT count(*) FROM sqlite_schema WHERE name IN "
        "('devices','threads','streams','communicators','stacks','drops')";
    char path[512], err[256];
    dpro_writer *w = NULL;
    dpro_reader *r = NULL;
    dpro_iter *it = NULL;
    dpro_writer_options o = {.page_size = 512, .replace = 1};
    dpro_event e = {.kind = DPRO_KIND_KERNEL, .stream = 7, .start_ns = 1000, .end_ns = 2000}, got;
    dpro_trace_summary sum;
    const dpro_device_info *devs;
    const dpro_thread_info *thr;

    path_in_tmp(path, sizeof path, "small.dpro");
    REQUIRE(dpro_writer_open(path, &o, &w, err, sizeof err) == DPRO_OK);
    CHECK(dpro_writer_append(w, &e) == DPRO_OK);
    CHECK(dpro_writer_close(w) == DPRO_OK);
    CHECK_EQ_U(sql_int(path, "PRAGMA page_size"), 512);
    CHECK_EQ_U(sql_int(path, count_small_tables), 0);
    REQUIRE(dpro_reader_open(path, &r, err, sizeof err) == DPRO_OK);
    if (r) {
        CHECK(dpro_reader_summary(r, &sum) == DPRO_OK);
        CHECK_EQ_U(sum.events, 1);
        CHECK_EQ_U(sum.dropped, 0);
        CHECK_EQ_U(dpro_reader_devices(r, &devs), 0);
        CHECK_EQ_U(dpro_reader_threads(r, &thr), 0);
        REQUIRE(dpro_iter_open(r, &it) == DPRO_OK);
        CHECK(dpro_iter_next(it, &got) == 1 && event_equal(&got, &e));
        CHECK(dpro_iter_next(it, &got) == 0);
        dpro_iter_close(it);
        dpro_reader_close(r);
    }
    /* page sizes SQLite does not take are refused before anything is created */
    static const uint32_t bad[] = {256, 1000, 131072};
    path_in_tmp(path, sizeof path, "badpage.dpro");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        o.page_size = bad[i];
        CHECK(dpro_writer_open(path, &o, &w, err, sizeof err) == DPRO_ERR_ARG && !w);
    }
    CHECK(access(path, F_OK) != 0);
    /* the default page size; each small table appears with its first row */
    path_in_tmp(path, sizeof path, "tables.dpro");
    write_trace(path, &e, 1, 0);
    CHECK_EQ_U(sql_int(path, "PRAGMA page_size"), 1024);
    CHECK_EQ_U(sql_int(path, count_small_tables), 6);
}

static void
test_bad_files(void)
{
    char path[512], err[512];
    dpro_reader *r = NULL;
    FILE *f;

    /* missing */
    path_in_tmp(path, sizeof path, "missing.dpro");
    CHECK(dpro_reader_open(path, &r, err, sizeof err) == DPRO_ERR_IO && !r);
    CHECK(strstr(err, "missing.dpro") != NULL);
    /* a text file */
    path_in_tmp(path, sizeof path, "text.dpro");
    f = fopen(path, "w");
    fputs("this is not a database, just some words long enough for a header...\n", f);
    fclose(f);
    CHECK(dpro_reader_open(path, &r, err, sizeof err) == DPRO_ERR_NOT_TRACE && !r);
    CHECK(strstr(err, "text.dpro") != NULL);
    /* an SQLite database of something else */
    path_in_tmp(path, sizeof path, "other.dpro");
    sql(path, "CREATE TABLE t(x); INSERT INTO t VALUES(1);");
    CHECK(dpro_reader_open(path, &r, err, sizeof err) == DPRO_ERR_NOT_TRACE && !r);
    /* a directory of no traces */
    {
        char **files;
        size_t n;
        const char *p;
        char sub[512];
        path_in_tmp(sub, sizeof sub, "emptydir");
        mkdir(sub, 0755);
        p = sub;
        CHECK(dpro_list_traces(&p, 1, &files, &n, err, sizeof err) == DPRO_ERR_NOT_TRACE);
        CHECK(strstr(err, "emptydir") != NULL);
    }
    /* newer schema major version */
    {
        dpro_event e = {.kind = DPRO_KIND_KERNEL, .start_ns = 1, .end_ns = 2};
        path_in_tmp(path, sizeof path, "newer.dpro");
        write_trace(path, &e, 1, 0);
        sql(path, "UPDATE meta SET value='99' WHERE key='schema_major'");
        CHECK(dpro_reader_open(path, &r, err, sizeof err) == DPRO_ERR_VERSION && !r);
        CHECK(strstr(err, "99") != NULL && strstr(err, "newer.dpro") != NULL);
        /* a damaged string block is named, not a crash */
        path_in_tmp(path, sizeof path, "badstrings.dpro");
        write_trace(path, &e, 1, 0);
        sql(path, "UPDATE string_blocks SET data = substr(data, 1, 5)");
        CHECK(dpro_reader_open(path, &r, err, sizeof err) == DPRO_ERR_CORRUPT && !r);
        CHECK(strstr(err, "badstrings.dpro") != NULL && strstr(err, "string block") != NULL);
        write_trace(path, &e, 1, 0);
        sql(path, "UPDATE string_blocks SET count = count + 5");
        CHECK(dpro_reader_open(path, &r, err, sizeof err) == DPRO_ERR_CORRUPT && !r);
        write_trace(path, &e, 1, 0);
        sql(path, "UPDATE string_blocks SET raw_size = 1000000000");
        CHECK(dpro_reader_open(path, &r, err, sizeof err) == DPRO_ERR_CORRUPT && !r);
        path_in_tmp(path, sizeof path, "newer.dpro");
        /* a newer minor version is fine */
        sql(path, "UPDATE meta SET value='1' WHERE key='schema_major';"
                  "UPDATE meta SET value='7' WHERE key='schema_minor';");
        REQUIRE(dpro_reader_open(path, &r, err, sizeof err) == DPRO_OK);
        dpro_reader_close(r);
    }
}

/* Damaged batches are reported with file and batch; intact ones stay readable. */
static void
test_damaged_batches(void)
{
    char path[512], err[512];
    uint64_t seed = 99, clock = 100;
    size_t n = 5000;
    dpro_event *ev = calloc(n, sizeof *ev), e;
    dpro_reader *r;
    dpro_iter *it;
    for (size_t i = 0; i < n; i++)
        random_event(&seed, &ev[i], &clock, 0);
    path_in_tmp(path, sizeof path, "damaged.dpro");
    write_trace(path, ev, n, 500); /* 10 batches */
    sql(path, "UPDATE batches SET data = substr(data, 1, length(data)/2) WHERE id = 3;"
              "UPDATE batches SET raw_size = raw_size * 1000 WHERE id = 5;"
              "UPDATE batches SET count = 7 WHERE id = 7;"
              "UPDATE batches SET raw_size = 10 WHERE id = 8;");
    REQUIRE(dpro_reader_open(path, &r, err, sizeof err) == DPRO_OK);
    REQUIRE(dpro_iter_open(r, &it) == DPRO_OK);
    size_t good = 0, errors = 0;
    int rc, named = 0;
    while ((rc = dpro_iter_next(it, &e)) != 0) {
        if (rc == 1) {
            good++;
        } else {
            errors++;
            named += strstr(dpro_reader_errmsg(r), "damaged.dpro") != NULL &&
                     strstr(dpro_reader_errmsg(r), "batch ") != NULL;
        }
    }
    CHECK_EQ_U(errors, 4);
    CHECK_EQ_U(named, 4);
    CHECK_EQ_U(good, n - 4 * 500);
    CHECK_EQ_U(dpro_iter_bad_batches(it), 4);
    dpro_iter_close(it);
    dpro_reader_close(r);
    free(ev);
}

/* Readers open, iterate and close while another process appends and flushes. */
static void
test_concurrent_readers(void)
{
    char path[512], err[512];
    dpro_writer *w;
    pid_t pid;
    path_in_tmp(path, sizeof path, "concurrent.dpro");
    REQUIRE(dpro_writer_open(path, NULL, &w, err, sizeof err) == DPRO_OK);
    CHECK(dpro_writer_flush(w) == DPRO_OK);
    pid = fork();
    if (pid == 0) {
        uint64_t seed = 5, clock = 0;
        for (int b = 0; b < 200; b++) {
            for (int i = 0; i < 200; i++) {
                dpro_event e;
                char s[32];
                random_event(&seed, &e, &clock, 0);
                snprintf(s, sizeof s, "name-%d", b * 200 + i); /* new strings each batch */
                dpro_writer_intern(w, s, &e.name);
                dpro_writer_append(w, &e);
            }
            dpro_writer_flush(w);
        }
        _exit(dpro_writer_close(w) == DPRO_OK ? 0 : 1);
    }
    int reads = 0, consistent = 0, status;
    uint64_t last_count = 0;
    for (;;) {
        int done = waitpid(pid, &status, WNOHANG) == pid;
        dpro_reader *r;
        dpro_iter *it;
        dpro_event e;
        dpro_trace_summary sum;
        if (dpro_reader_open(path, &r, err, sizeof err) == DPRO_OK) {
            uint64_t n = 0, names_ok = 1;
            int rc;
            dpro_reader_summary(r, &sum);
            dpro_iter_open(r, &it);
            while ((rc = dpro_iter_next(it, &e)) == 1) {
                n++;
                names_ok &=
                    e.name <= dpro_reader_string_count(r) && *dpro_reader_string(r, e.name) != 0;
            }
            reads++;
            consistent += rc == 0 && n == sum.events && names_ok && n >= last_count;
            last_count = n;
            dpro_iter_close(it);
            dpro_reader_close(r);
        }
        if (done)
            break;
    }
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(reads > 1);
    CHECK_EQ_U(consistent, reads);
    CHECK_EQ_U(last_count, 40000);
    /* the parent's copy of the writer: free it without touching the file */
    dpro_writer_close(NULL);
}

int
main(void)
{
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(tmpdir, sizeof tmpdir, "%s/dpro-test-trace-XXXXXX", base);
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 99;
    }
    test_codec_roundtrip();
    test_codec_corruption();
    test_codec_time_units();
    test_codec_major1();
    test_codec_time_units_corrupt();
    test_codec_name_relative();
    test_codec_name_relative_corrupt();
    test_file_roundtrip();
    test_page_size_and_lazy_tables();
    test_merge_order();
    test_interning();
    test_bad_files();
    test_damaged_batches();
    test_concurrent_readers();
    {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
        if (!tests_failed && system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", tmpdir);
    }
    return tests_done();
}
