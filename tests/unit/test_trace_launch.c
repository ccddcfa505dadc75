/*
 * test_trace_launch.c: unit tests of libdprotrace's coding of launch configurations against
 * the previous launch of the same kernel name: exact round trips and the size saved, the
 * edges, and the name-relative lists of a batch patched or corrupted.
 */
#include "dprotrace.h"
#include "testutil.h"
#include "trace_testlib.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

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

int
main(void)
{
    test_codec_name_relative();
    test_codec_name_relative_corrupt();
    return tests_done();
}
