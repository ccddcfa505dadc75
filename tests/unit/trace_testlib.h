/*
 * trace_testlib.h: what the unit tests of libdprotrace share: random events using every
 * field, exact codec round trips, and the byte-flip sweep of a batch's protobuf.
 */
#ifndef DPRO_TRACE_TESTLIB_H
#define DPRO_TRACE_TESTLIB_H

#include "dprotrace.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* A random event using every field of its kind (and some it does not use). */
static inline void
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
    uint64_t bytes = test_rand(seed); /* two draws in one expression: unsequenced */
    e->bytes = bytes >> (test_rand(seed) % 64);
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

/* Random profiler arguments (schema minor 2) and execution-trace fields (minor 3) on e: each
 * id with its has bit (or zero without it), string ids for shapes, dtypes, args, et_deps. */
static inline void
random_op_args(uint64_t *seed, dpro_event *e)
{
    static const uint32_t bits[] = {DPRO_HAS_EXTERNAL_ID, DPRO_HAS_RECORD_ID, DPRO_HAS_SEQ_NR,
                                    DPRO_HAS_FWD_THREAD,  DPRO_HAS_EV_IDX,    DPRO_HAS_TOTALS,
                                    DPRO_HAS_ET_ID,       DPRO_HAS_ET_PARENT};
    for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++)
        if (test_rand(seed) % 3 == 0)
            e->has |= bits[i];
    e->external_id = e->has & DPRO_HAS_EXTERNAL_ID ? test_rand(seed) % 100000 : 0;
    e->record_id = e->has & DPRO_HAS_RECORD_ID ? test_rand(seed) : 0;
    e->seq_nr = e->has & DPRO_HAS_SEQ_NR ? test_rand(seed) % 1000 : 0;
    e->fwd_thread = e->has & DPRO_HAS_FWD_THREAD ? (uint32_t)test_rand(seed) : 0;
    e->ev_idx = e->has & DPRO_HAS_EV_IDX ? test_rand(seed) % 5000 : 0;
    e->total_allocated = e->has & DPRO_HAS_TOTALS ? test_rand(seed) >> 20 : 0;
    e->total_reserved = e->has & DPRO_HAS_TOTALS ? test_rand(seed) >> 20 : 0;
    e->et_id = e->has & DPRO_HAS_ET_ID ? test_rand(seed) % 100000 : 0;
    e->et_parent = e->has & DPRO_HAS_ET_PARENT ? test_rand(seed) : 0;
    e->shapes = (uint32_t)(test_rand(seed) % 4);
    e->dtypes = (uint32_t)(test_rand(seed) % 4);
    e->args = (uint32_t)(test_rand(seed) % 4);
    e->et_deps = (uint32_t)(test_rand(seed) % 4);
}

static inline int
event_equal(const dpro_event *a, const dpro_event *b)
{
    return memcmp(a, b, sizeof *a) == 0;
}

/* The run of a decoded batch an event comes back in: its kind's, the API calls with a
 * launch configuration (a grid or block) in a run of their own after the other API calls.
 * Within a run, events keep their order. Keys are under TEST_GROUP_KEYS for kinds < 200. */
#define TEST_GROUP_KEYS 400
static inline uint32_t
test_group_key(const dpro_event *e)
{
    return e->kind * 2 + (e->kind == DPRO_KIND_API && (e->grid[0] | e->block[0]));
}

/* Encodes n events and decodes them again; returns 1 when every event came back equal
 * (run by run, test_group_key, in order) and stores the compressed size in *zlen. */
static inline int
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
        for (uint32_t k = 0; k < TEST_GROUP_KEYS; k++) {
            size_t j = 0;
            for (size_t i = 0; i < n; i++) {
                if (test_group_key(&in[i]) != k)
                    continue;
                while (j < nout && test_group_key(&out[j]) != k)
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

/* Compresses raw and decodes it; returns the status. */
static inline int
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
static inline void
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

#endif
