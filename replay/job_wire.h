/* job_wire.h: the bytes of shared reading's messages (job_share.c) and their compact
 * parts (job_wire.c): a growing buffer, its fixed-size and text fields, and the compact
 * forms of a rank's events and a folded rank's signature (not installed). */
#ifndef DPRO_REPLAY_JOB_WIRE_H
#define DPRO_REPLAY_JOB_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "job_int.h"

/* A growing buffer being written (fail: out of memory met), or one being read (at: the
 * position; fail: it ended early). */
typedef struct bytes {
    unsigned char *p;
    size_t n, cap, at;
    int fail;
} bytes;

static inline void
put(bytes *b, const void *v, size_t len)
{
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + len)
        cap *= 2;
    unsigned char *p = b->fail || len == 0 || cap == b->cap ? b->p : realloc(b->p, cap);
    if (!p) {
        b->fail = 1;
    } else if (!b->fail && len > 0) {
        b->p = p;
        b->cap = cap;
        memcpy(b->p + b->n, v, len);
        b->n += len;
    }
}

static inline void
get(bytes *b, void *v, size_t len)
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
put_i64(bytes *b, int64_t v)
{
    put(b, &v, sizeof v);
}

static inline int64_t
get_i64(bytes *b)
{
    int64_t v;
    get(b, &v, sizeof v);
    return v;
}

/* A text or NULL: its length + 1 (0 for NULL), then its bytes. */
static inline void
put_str(bytes *b, const char *s)
{
    size_t len = s ? strlen(s) : 0;
    put_i64(b, s ? (int64_t)len + 1 : 0);
    put(b, s, len);
}

/* A malloc'd copy of the text put_str wrote, or NULL (also when it does not fit). */
static inline char *
get_str(bytes *b)
{
    int64_t len = get_i64(b);
    char *s = NULL;
    if (len > 0 && !b->fail && (uint64_t)len - 1 <= b->n - b->at && !(s = malloc((size_t)len)))
        b->fail = 1;
    if (s) {
        get(b, s, (size_t)len - 1);
        s[len - 1] = 0;
    }
    return s;
}

/* An array of n elements of sz bytes, malloc'd (NULL for none or when it does not fit). */
static inline void *
get_array(bytes *b, size_t n, size_t sz)
{
    if (b->fail || n == 0)
        return NULL;
    void *a = n <= (b->n - b->at) / sz ? malloc(n * sz) : NULL;
    if (!a)
        b->fail = 1;
    else
        get(b, a, n * sz);
    return a;
}

/* Hands b's bytes to *out and *len (the caller frees) and returns 0, or, when a put failed,
 * frees them, sets *out NULL and *len 0 and returns DPRO_ERR_NOMEM. */
static inline int
bytes_take(bytes *b, unsigned char **out, size_t *len)
{
    int rc = b->fail ? DPRO_ERR_NOMEM : 0;
    if (rc != 0) {
        free(b->p);
        b->p = NULL;
        b->n = 0;
    }
    *out = b->p;
    *len = b->n;
    return rc;
}

/* job_wire.c: the n events ev, compact (what each holds, not its loaded bytes): their
 * count, then each event. b->fail when memory ends. */
void job_wire_put_events(bytes *b, const job_event *ev, size_t n);

/* job_wire.c: the events job_wire_put_events wrote, malloc'd (NULL for none; b->fail when
 * they do not fit or memory ends), their count in *n. */
job_event *job_wire_get_events(bytes *b, size_t *n);

/* job_wire.c: a folded rank's signature, or none (s NULL), its rows compact. b->fail when
 * memory ends. */
void job_wire_put_sig(bytes *b, const job_fold_sig *s);

/* job_wire.c: the signature job_wire_put_sig wrote, malloc'd (free with job_fold_sig_free,
 * then free), or NULL: none, or b->fail. */
job_fold_sig *job_wire_get_sig(bytes *b);

#endif
