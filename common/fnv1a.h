/*
 * fnv1a.h: the 64-bit FNV-1a hash, the one definition for every part of dpro (communicator
 * hashes in the collector and the importers, interning in libdprotrace).
 *
 * Header-only, so the collector, which links only what it must, carries no extra library.
 */
#ifndef DPRO_FNV1A_H
#define DPRO_FNV1A_H

#include <stddef.h>
#include <stdint.h>

/* The FNV-1a 64-bit offset basis: the seed of a new hash. */
#define DPRO_FNV1A_INIT 0xcbf29ce484222325ull

/* Returns the FNV-1a hash of n bytes at p, continuing from h (DPRO_FNV1A_INIT for a new
 * hash, or the result of an earlier call to hash a concatenation). */
static inline uint64_t
dpro_fnv1a(const void *p, size_t n, uint64_t h)
{
    const unsigned char *b = (const unsigned char *)p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

#endif /* DPRO_FNV1A_H */
