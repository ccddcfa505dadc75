/*
 * bytes.h: a growing byte buffer being written, or bytes being read (prefix bytes_), with
 * fixed-size fields, varints (varint.h) and texts: the one writer and reader of
 * libdprotrace's packed readers (schemas/reader_pack.c) and the replay's MPI messages
 * (replay/job_wire.h, job_share.c, the classes' spreads of job_share_fold.c). What it
 * writes travels between processes of one build: fixed-size fields in the host's layout.
 *
 * Header-only, as varint.h: both libraries' encoders call it per value.
 */
#ifndef DPRO_BYTES_H
#define DPRO_BYTES_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "varint.h"

/* A growing buffer being written, or one being read (at: the position). fail: a write
 * met the end of memory, or a read ran past the end or met what cannot be; nomem, with
 * fail: memory ended (a read's allocation included). Zeroed is an empty buffer to write;
 * {.p = P, .n = N} reads N bytes at P. */
typedef struct bytes {
    unsigned char *p;
    size_t n, cap, at;
    int fail;
    int nomem;
} bytes;

/* Room for len more bytes in b, written: 1, or 0 with b->fail (and b->nomem) when memory
 * ends (as for more than half the address space, which the doubling could not reach
 * without wrapping) or b failed before. */
static inline int
bytes_room(bytes *b, size_t len)
{
    size_t cap = b->cap ? b->cap : 256;
    if (!b->fail && len > SIZE_MAX / 2 - b->n)
        b->fail = b->nomem = 1;
    while (!b->fail && cap < b->n + len)
        cap *= 2;
    unsigned char *p = b->fail || cap == b->cap ? b->p : realloc(b->p, cap);
    if (!p) {
        b->fail = b->nomem = 1;
    } else if (!b->fail) {
        b->p = p;
        b->cap = cap;
    }
    return !b->fail;
}

/* Appends the len bytes at v (nothing for 0). */
static inline void
bytes_put(bytes *b, const void *v, size_t len)
{
    if (len > 0 && bytes_room(b, len)) {
        memcpy(b->p + b->n, v, len);
        b->n += len;
    }
}

/* Reads len bytes into v (zeros, and b->fail, when they run past the end). */
static inline void
bytes_get(bytes *b, void *v, size_t len)
{
    if (b->fail || len > b->n - b->at) {
        b->fail = 1;
        memset(v, 0, len);
        return;
    }
    memcpy(v, b->p + b->at, len);
    b->at += len;
}

static inline void
bytes_put_i64(bytes *b, int64_t v)
{
    bytes_put(b, &v, sizeof v);
}

static inline int64_t
bytes_get_i64(bytes *b)
{
    int64_t v;
    bytes_get(b, &v, sizeof v);
    return v;
}

/* Appends v as a varint. */
static inline void
bytes_put_varint(bytes *b, uint64_t v)
{
    if (bytes_room(b, DPRO_VARINT_MAX))
        b->n = (size_t)(dpro_put_varint(b->p + b->n, v) - b->p);
}

/* The varint at b's position (0 and b->fail when it runs past the end or 64 bits: more
 * than ten bytes, or a tenth above 1). */
static inline uint64_t
bytes_get_varint(bytes *b)
{
    uint64_t v = 0;
    int more = 1;
    for (int s = 0; more && !b->fail; s += 7) {
        if (b->at >= b->n || s > 63 || (s == 63 && b->p[b->at] > 1)) {
            b->fail = 1;
        } else {
            unsigned char c = b->p[b->at++];
            v |= (uint64_t)(c & 0x7f) << s;
            more = c & 0x80;
        }
    }
    return b->fail ? 0 : v;
}

/* A varint count of things each at least one byte long: no more than the bytes left (0
 * and b->fail otherwise). */
static inline size_t
bytes_get_count(bytes *b)
{
    uint64_t v = bytes_get_varint(b);
    if (v > b->n - b->at)
        b->fail = 1;
    return b->fail ? 0 : (size_t)v;
}

/* A text or NULL: its length + 1 (0 for NULL) as a varint, then its bytes. */
static inline void
bytes_put_text(bytes *b, const char *s)
{
    size_t len = s ? strlen(s) : 0;
    bytes_put_varint(b, s ? (uint64_t)len + 1 : 0);
    bytes_put(b, s, len);
}

/* A malloc'd copy of the text bytes_put_text wrote, or NULL: NULL was put, or b->fail
 * (its length runs past the end, or memory ends: b->nomem). */
static inline char *
bytes_get_text(bytes *b)
{
    uint64_t len = bytes_get_varint(b);
    char *s = NULL;
    if (len == 0 || b->fail)
        return NULL;
    if (len - 1 > b->n - b->at || !(s = malloc((size_t)len))) {
        b->nomem = len - 1 <= b->n - b->at;
        b->fail = 1;
        return NULL;
    }
    memcpy(s, b->p + b->at, (size_t)len - 1);
    s[len - 1] = 0;
    b->at += (size_t)len - 1;
    return s;
}

/* An array of n elements of sz bytes read whole, malloc'd (NULL for none, or with
 * b->fail when they run past the end or memory ends). */
static inline void *
bytes_get_array(bytes *b, size_t n, size_t sz)
{
    if (b->fail || n == 0)
        return NULL;
    void *a = n <= (b->n - b->at) / sz ? malloc(n * sz) : NULL;
    if (!a)
        b->fail = 1;
    else
        bytes_get(b, a, n * sz);
    return a;
}

/* Hands b's bytes to *out and *len (the caller frees) and returns 0, or, when a write
 * failed, frees them, sets *out NULL and *len 0 and returns -1. */
static inline int
bytes_take(bytes *b, unsigned char **out, size_t *len)
{
    int rc = b->fail ? -1 : 0;
    if (rc != 0) {
        free(b->p);
        b->p = NULL;
        b->n = 0;
    }
    *out = b->p;
    *len = b->n;
    return rc;
}

#endif
