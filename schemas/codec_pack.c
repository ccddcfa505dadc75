/*
 * codec_pack.c: a Dpro__Batch (trace.proto) in the protobuf wire format, written in one
 * pass: the batch encoder's (codec.c) replacement for protobuf-c's generic packer, which
 * walks every field descriptor twice (get_packed_size, then pack, which sizes each packed
 * column once more before writing it).
 *
 * Contract: the bytes are those protobuf_c_message_pack writes for the same message (fields
 * in field-number order; proto3 scalars, bytes and bools left out when zero, empty or false;
 * repeated scalars packed, left out when empty; no unknown fields), so readers keep
 * unpacking with protobuf-c and the format does not change. tests/unit/test_trace_pack.c
 * compares the two byte for byte. trace.proto stays the format's definition: a field added
 * there must be added to GROUP_WIRE_FIELDS below (the test fails until it is).
 */
#include "codec_int.h"

#include <string.h>

/* Every field of Group in field-number order: X(how it is written, field, number). u32 and
 * u64: a proto3 scalar; bytes; boolean; r32, r64: packed unsigned; rs32, rs64: packed
 * zig-zag (sint32, sint64). */
#define GROUP_WIRE_FIELDS(X)                                                                       \
    X(u32, kind, 1)                                                                                \
    X(u32, count, 2)                                                                               \
    X(bytes, start_lo, 3)                                                                          \
    X(bytes, duration_lo, 4)                                                                       \
    X(r32, thread, 5)                                                                              \
    X(r32, name, 6)                                                                                \
    X(r32, name2, 7)                                                                               \
    X(r32, device, 8)                                                                              \
    X(rs64, correlation_delta, 9)                                                                  \
    X(r64, stream, 10)                                                                             \
    X(r32, subkind, 11)                                                                            \
    X(rs32, result, 12)                                                                            \
    X(r32, shared_mem, 13)                                                                         \
    X(r64, object, 14)                                                                             \
    X(r64, bytes, 15)                                                                              \
    X(r64, address, 16)                                                                            \
    X(r32, grid_x, 17)                                                                             \
    X(r32, grid_y, 18)                                                                             \
    X(r32, grid_z, 19)                                                                             \
    X(r32, block_x, 20)                                                                            \
    X(r32, block_y, 21)                                                                            \
    X(r32, block_z, 22)                                                                            \
    X(r64, comm, 23)                                                                               \
    X(rs64, seq_delta, 24)                                                                         \
    X(r64, elems, 25)                                                                              \
    X(r32, dtype, 26)                                                                              \
    X(r32, redop, 27)                                                                              \
    X(rs32, peer, 28)                                                                              \
    X(r32, stack, 29)                                                                              \
    X(rs64, value, 30)                                                                             \
    X(r32, const_field, 31)                                                                        \
    X(r64, const_value, 32)                                                                        \
    X(r64, start_hi, 33)                                                                           \
    X(r64, duration_hi, 34)                                                                        \
    X(u64, time_unit, 35)                                                                          \
    X(r32, name_relative_field, 36)                                                                \
    X(r32, has, 37)                                                                                \
    X(r32, fwd_thread, 38)                                                                         \
    X(rs64, external_id_delta, 39)                                                                 \
    X(rs64, record_id_delta, 40)                                                                   \
    X(rs64, seq_nr_delta, 41)                                                                      \
    X(rs64, ev_idx_delta, 42)                                                                      \
    X(r32, shapes, 43)                                                                             \
    X(r32, dtypes, 44)                                                                             \
    X(r32, args, 45)                                                                               \
    X(rs64, total_allocated_delta, 46)                                                             \
    X(rs64, total_reserved_delta, 47)                                                              \
    X(boolean, start_from_launch, 48)                                                              \
    X(rs64, et_id_delta, 49)                                                                       \
    X(rs64, et_parent_delta, 50)                                                                   \
    X(r32, et_deps, 51)

#define WIRE_VARINT 0
#define WIRE_LEN 2
static inline uint8_t *
put_tag(uint8_t *p, uint32_t num, uint32_t wire)
{
    return dpro_put_varint(p, (uint64_t)num << 3 | wire);
}

/* Finishes a length-delimited field whose body was written at p + room (room: the bytes
 * kept for its length) up to end: writes the length and moves the body down next to it
 * when the length took fewer bytes. Returns the end of the field. */
static uint8_t *
close_len(uint8_t *p, size_t room, uint8_t *end)
{
    uint8_t *body = p + room;
    size_t len = (size_t)(end - body), lsize = dpro_varint_size(len);
    dpro_put_varint(p, len);
    if (lsize < room)
        memmove(p + lsize, body, len);
    return p + lsize + len;
}

/* A value of a column as its varint: unsigned as is, signed zig-zag (sint32, sint64). */
static inline uint64_t
wire_r32(uint32_t v)
{
    return v;
}

static inline uint64_t
wire_r64(uint64_t v)
{
    return v;
}

static inline uint64_t
wire_rs32(int32_t v)
{
    return ((uint32_t)v << 1) ^ (uint32_t)(v >> 31);
}

static inline uint64_t
wire_rs64(int64_t v)
{
    return zigzag(v);
}

/* Packed columns: the tag, the length, every value as a varint. Most values are under
 * 128 (deltas, ids, small counts): four such at a time, one byte each, with one test. */
#define PUT_PACKED(how, type)                                                                      \
    static uint8_t *put_##how(uint8_t *p, uint32_t num, const type *v, size_t n)                   \
    {                                                                                              \
        if (!n)                                                                                    \
            return p;                                                                              \
        p = put_tag(p, num, WIRE_LEN);                                                             \
        size_t room = dpro_varint_size((uint64_t)n * DPRO_VARINT_MAX), i = 0;                      \
        uint8_t *q = p + room;                                                                     \
        for (; i + 4 <= n; i += 4) {                                                               \
            uint64_t c0 = wire_##how(v[i]), c1 = wire_##how(v[i + 1]);                             \
            uint64_t c2 = wire_##how(v[i + 2]), c3 = wire_##how(v[i + 3]);                         \
            if ((c0 | c1 | c2 | c3) < 0x80) {                                                      \
                q[0] = (uint8_t)c0;                                                                \
                q[1] = (uint8_t)c1;                                                                \
                q[2] = (uint8_t)c2;                                                                \
                q[3] = (uint8_t)c3;                                                                \
                q += 4;                                                                            \
            } else {                                                                               \
                q = dpro_put_varint(                                                               \
                    dpro_put_varint(dpro_put_varint(dpro_put_varint(q, c0), c1), c2), c3);         \
            }                                                                                      \
        }                                                                                          \
        for (; i < n; i++)                                                                         \
            q = dpro_put_varint(q, wire_##how(v[i]));                                              \
        return close_len(p, room, q);                                                              \
    }
PUT_PACKED(r32, uint32_t)
PUT_PACKED(r64, uint64_t)
PUT_PACKED(rs32, int32_t)
PUT_PACKED(rs64, int64_t)
#undef PUT_PACKED

static uint8_t *
put_u64(uint8_t *p, uint32_t num, uint64_t v)
{
    if (!v)
        return p;
    return dpro_put_varint(put_tag(p, num, WIRE_VARINT), v);
}

static uint8_t *
put_bytes(uint8_t *p, uint32_t num, const ProtobufCBinaryData *b)
{
    if (!b->len)
        return p;
    p = dpro_put_varint(put_tag(p, num, WIRE_LEN), b->len);
    memcpy(p, b->data, b->len);
    return p + b->len;
}

/* The bytes a group can take at most (tags, lengths and values at their longest). */
static size_t
group_bound(const Dpro__Group *g)
{
    size_t b = 0;
#define BOUND_u32(field) b += 2 + DPRO_VARINT_MAX;
#define BOUND_u64(field) b += 2 + DPRO_VARINT_MAX;
#define BOUND_boolean(field) b += 3;
#define BOUND_bytes(field) b += 2 + DPRO_VARINT_MAX + g->field.len;
#define BOUND_rep(field) b += 2 + DPRO_VARINT_MAX + g->n_##field * DPRO_VARINT_MAX;
#define BOUND_r32 BOUND_rep
#define BOUND_r64 BOUND_rep
#define BOUND_rs32 BOUND_rep
#define BOUND_rs64 BOUND_rep
#define BOUND(how, field, num) BOUND_##how(field)
    GROUP_WIRE_FIELDS(BOUND)
    return b;
}

/* Writes the fields of g at p; returns their end. */
static uint8_t *
put_group_fields(uint8_t *p, const Dpro__Group *g)
{
#define PUT_u32(field, num) p = put_u64(p, num, g->field);
#define PUT_u64(field, num) p = put_u64(p, num, g->field);
#define PUT_boolean(field, num) p = put_u64(p, num, g->field ? 1 : 0);
#define PUT_bytes(field, num) p = put_bytes(p, num, &g->field);
#define PUT_r32(field, num) p = put_r32(p, num, g->field, g->n_##field);
#define PUT_r64(field, num) p = put_r64(p, num, g->field, g->n_##field);
#define PUT_rs32(field, num) p = put_rs32(p, num, g->field, g->n_##field);
#define PUT_rs64(field, num) p = put_rs64(p, num, g->field, g->n_##field);
#define PUT(how, field, num) PUT_##how(field, num)
    GROUP_WIRE_FIELDS(PUT)
    return p;
}

size_t
codec_batch_pack_bound(const Dpro__Batch *b)
{
    size_t bound = 3 * (2 + DPRO_VARINT_MAX);
    for (size_t i = 0; i < b->n_groups; i++)
        bound += 2 + DPRO_VARINT_MAX + group_bound(b->groups[i]);
    return bound;
}

size_t
codec_batch_pack(const Dpro__Batch *b, uint8_t *out)
{
    uint8_t *p = out;
    p = put_u64(p, 1, b->schema_major);
    p = put_u64(p, 2, b->base_ns);
    for (size_t i = 0; i < b->n_groups; i++) {
        p = put_tag(p, 3, WIRE_LEN);
        size_t room = dpro_varint_size(group_bound(b->groups[i]));
        p = close_len(p, room, put_group_fields(p + room, b->groups[i]));
    }
    return (size_t)(p - out);
}
