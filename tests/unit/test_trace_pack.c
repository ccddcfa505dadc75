/*
 * test_trace_pack.c: the batch encoder's own packer (schemas/codec_pack.c) writes the bytes
 * protobuf-c writes. Random Groups filled through trace.proto's descriptor (so a field
 * added to the .proto and not to the packer fails here), with values of every varint
 * length, packed both ways and compared byte for byte; then batches of random events
 * encoded by the codec, inflated, unpacked by protobuf-c and packed again by protobuf-c:
 * the same bytes, so what the collector writes is what protobuf-c would have written.
 */
#include "codec_int.h"
#include "testutil.h"
#include "trace_testlib.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* A random value of a random bit length (every varint length, zero included). */
static uint64_t
random_bits(uint64_t *seed)
{
    unsigned bits = (unsigned)(test_rand(seed) % 65);
    return bits ? test_rand(seed) >> (64 - bits) : 0;
}

/* Sets field fd of msg to random content (repeated: 0..max values, allocated; release with
 * free_field). Returns 0 for a type this test does not know, which fails it. */
static int
random_field(uint64_t *seed, ProtobufCMessage *msg, const ProtobufCFieldDescriptor *fd, size_t max)
{
    char *at = (char *)msg + fd->offset;
    size_t elem;
    switch (fd->type) {
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_BOOL:
        elem = 4;
        break;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_SINT64:
        elem = 8;
        break;
    case PROTOBUF_C_TYPE_BYTES:
        elem = 0;
        break;
    default:
        return 0;
    }
    if (fd->label == PROTOBUF_C_LABEL_REPEATED) {
        size_t n = test_rand(seed) % 3 ? test_rand(seed) % (max + 1) : 0;
        uint8_t *v = malloc(n * elem + 1);
        for (size_t i = 0; i < n; i++) {
            uint64_t x = random_bits(seed);
            if (elem == 4) {
                uint32_t x32 = (uint32_t)x;
                memcpy(v + i * 4, &x32, 4);
            } else {
                memcpy(v + i * 8, &x, 8);
            }
        }
        *(size_t *)((char *)msg + fd->quantifier_offset) = n;
        *(void **)at = v;
        return fd->type != PROTOBUF_C_TYPE_BYTES && fd->type != PROTOBUF_C_TYPE_BOOL;
    }
    if (fd->type == PROTOBUF_C_TYPE_BYTES) {
        ProtobufCBinaryData *b = (ProtobufCBinaryData *)at;
        b->len = test_rand(seed) % 3 ? test_rand(seed) % (max + 1) : 0;
        b->data = malloc(b->len + 1);
        for (size_t i = 0; i < b->len; i++)
            b->data[i] = (uint8_t)test_rand(seed);
    } else if (fd->type == PROTOBUF_C_TYPE_BOOL) {
        *(protobuf_c_boolean *)at = (protobuf_c_boolean)(test_rand(seed) % 2);
    } else {
        uint64_t x = test_rand(seed) % 4 ? random_bits(seed) : 0;
        if (elem == 4) {
            uint32_t x32 = (uint32_t)x;
            memcpy(at, &x32, 4);
        } else {
            memcpy(at, &x, 8);
        }
    }
    return 1;
}

static void
free_group(Dpro__Group *g)
{
    const ProtobufCMessageDescriptor *d = &dpro__group__descriptor;
    for (unsigned f = 0; f < d->n_fields; f++) {
        const ProtobufCFieldDescriptor *fd = &d->fields[f];
        if (fd->label == PROTOBUF_C_LABEL_REPEATED)
            free(*(void **)((char *)g + fd->offset));
        else if (fd->type == PROTOBUF_C_TYPE_BYTES)
            free(((ProtobufCBinaryData *)((char *)g + fd->offset))->data);
    }
}

/* Random batches of random groups: codec_batch_pack writes protobuf-c's bytes. */
static void
test_pack_random_groups(void)
{
    uint64_t seed = 7;
    for (int round = 0; round < 400; round++) {
        Dpro__Group groups[4], *ptrs[4];
        Dpro__Batch batch;
        dpro__batch__init(&batch);
        batch.schema_major = test_rand(&seed) % 4 ? (uint32_t)random_bits(&seed) : 0;
        batch.base_ns = test_rand(&seed) % 4 ? random_bits(&seed) : 0;
        batch.n_groups = test_rand(&seed) % 5;
        batch.groups = ptrs;
        /* long columns now and then: lengths of 2 and 3 varint bytes */
        size_t max = round % 10 == 0 ? 3000 : 20;
        for (size_t i = 0; i < batch.n_groups; i++) {
            dpro__group__init(&groups[i]);
            ptrs[i] = &groups[i];
            const ProtobufCMessageDescriptor *d = &dpro__group__descriptor;
            for (unsigned f = 0; f < d->n_fields; f++)
                CHECK(random_field(&seed, &groups[i].base, &d->fields[f], max));
        }
        size_t want = dpro__batch__get_packed_size(&batch);
        size_t bound = codec_batch_pack_bound(&batch);
        uint8_t *a = malloc(want + 1), *b = malloc(bound + 1);
        dpro__batch__pack(&batch, a);
        size_t got = codec_batch_pack(&batch, b);
        CHECK(want <= bound);
        CHECK_EQ_U(got, want);
        CHECK(got == want && memcmp(a, b, want) == 0);
        free(a);
        free(b);
        for (size_t i = 0; i < batch.n_groups; i++)
            free_group(&groups[i]);
    }
}

/* The codec's batches of random events: unpacked and packed again by protobuf-c, the same
 * bytes (and they decode: test_trace_codec checks the events). */
static void
test_pack_codec_batches(void)
{
    dpro_codec *c = dpro_codec_new();
    REQUIRE(c);
    for (uint64_t seed0 = 1; seed0 <= 30; seed0++) {
        uint64_t seed = seed0 * 0xD1B54A32D192ED03ull, clock = 1ull << 40;
        size_t n = 1 + test_rand(&seed) % 6000;
        dpro_event *ev = calloc(n, sizeof *ev);
        for (size_t i = 0; i < n; i++) {
            random_event(&seed, &ev[i], &clock, 1);
            if (seed0 % 2 == 0)
                random_op_args(&seed, &ev[i]);
        }
        const uint8_t *z = NULL;
        size_t zlen = 0, rawlen = 0;
        CHECK(dpro_codec_encode(c, ev, n, 1, &z, &zlen, &rawlen) == DPRO_OK);
        uLongf got = rawlen;
        uint8_t *raw = malloc(rawlen + 1);
        CHECK(uncompress(raw, &got, z, zlen) == Z_OK && got == rawlen);
        Dpro__Batch *m = dpro__batch__unpack(NULL, rawlen, raw);
        CHECK(m != NULL);
        if (m) {
            size_t again_len = dpro__batch__get_packed_size(m);
            uint8_t *again = malloc(again_len + 1);
            dpro__batch__pack(m, again);
            CHECK_EQ_U(again_len, rawlen);
            CHECK(again_len == rawlen && memcmp(again, raw, rawlen) == 0);
            free(again);
            dpro__batch__free_unpacked(m, NULL);
        }
        free(raw);
        free(ev);
    }
    dpro_codec_free(c);
}

int
main(void)
{
    test_pack_random_groups();
    test_pack_codec_batches();
    return tests_done();
}
