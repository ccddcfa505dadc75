/*
 * varint.h: LEB128 varints (protobuf's wire encoding of integers) and zig-zag coding of
 * signed values, the one definition for libdprotrace's batch encoder and the replay's MPI
 * messages.
 *
 * Header-only, as fnv1a.h: the encoders that use it run per value.
 */
#ifndef DPRO_VARINT_H
#define DPRO_VARINT_H

#include <stddef.h>
#include <stdint.h>

/* The bytes of the longest varint (a 64-bit value). */
#define DPRO_VARINT_MAX 10

/* Writes v as a varint at p (room for DPRO_VARINT_MAX bytes); returns the byte after it. */
static inline uint8_t *
dpro_put_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)v | 0x80;
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* The bytes dpro_put_varint writes for v (1 to DPRO_VARINT_MAX). */
static inline size_t
dpro_varint_size(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* Zig-zag: small magnitudes of either sign to small codes (0, -1, 1, -2 -> 0, 1, 2, 3). */
static inline uint64_t
zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t
unzigzag(uint64_t v)
{
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

#endif
