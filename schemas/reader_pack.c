/*
 * reader_pack.c: a detached reader's content as bytes and back (dpro_reader_pack,
 * dpro_reader_unpack), so that a process may hold a trace's reader that another process
 * opened: meta, strings, devices, streams, communicators, threads, stacks, warnings.
 *
 * The bytes: a version, then every count and number as a varint (signed ones zig-zag),
 * each text as its length + 1 (0: NULL) and its bytes, the strings as one run of
 * NUL-terminated texts in id order, or a flag alone when they are the strings of the
 * reader named like (the receiver's copy then shared). They travel between processes of
 * one job, built from one source tree: no compatibility beyond the version is kept.
 */
#include "dprotrace.h"
#include "reader_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "varint.h"

#define PACK_VERSION 2

/* The flags after the version. */
enum {
    PACK_ENDED_EARLY = 1,
    PACK_CUT = 2,
    PACK_WAL_UNREAD = 4,
    PACK_STRINGS_LIKE = 8, /* the strings are like's: none follow */
};

/* A growing buffer being written (fail: out of memory), or one being read (at: the
 * position; fail: it ended early or holds what cannot be). */
typedef struct buf {
    uint8_t *p;
    size_t n, cap, at;
    int fail;
    int nomem; /* with fail: memory ended */
} buf;

/* Room for len more bytes in b (b->fail when memory ends). */
static int
room(buf *b, size_t len)
{
    size_t cap = b->cap ? b->cap : 256;
    while (!b->fail && cap < b->n + len)
        cap *= 2;
    uint8_t *p = b->fail || cap == b->cap ? b->p : realloc(b->p, cap);
    if (!p)
        b->fail = 1;
    else if (!b->fail) {
        b->p = p;
        b->cap = cap;
    }
    return !b->fail;
}

static void
put_u(buf *b, uint64_t v)
{
    if (room(b, DPRO_VARINT_MAX))
        b->n = (size_t)(dpro_put_varint(b->p + b->n, v) - b->p);
}

static void
put_bytes(buf *b, const void *v, size_t len)
{
    if (len > 0 && room(b, len)) {
        memcpy(b->p + b->n, v, len);
        b->n += len;
    }
}

static void
put_text(buf *b, const char *s)
{
    size_t len = s ? strlen(s) : 0;
    put_u(b, s ? (uint64_t)len + 1 : 0);
    put_bytes(b, s, len);
}

static uint64_t
get_u(buf *b)
{
    uint64_t v = 0;
    for (int shift = 0; !b->fail; shift += 7) {
        if (b->at == b->n || shift > 63) {
            b->fail = 1;
            break;
        }
        uint8_t c = b->p[b->at++];
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80))
            break;
    }
    return b->fail ? 0 : v;
}

/* A count of things each at least one byte long: no more than the bytes left. */
static size_t
get_count(buf *b)
{
    uint64_t v = get_u(b);
    if (v > b->n - b->at)
        b->fail = 1;
    return b->fail ? 0 : (size_t)v;
}

/* get_u cut to 32 bits (b->fail when it does not fit). */
static uint32_t
get_u32(buf *b)
{
    uint64_t v = get_u(b);
    if (v > UINT32_MAX)
        b->fail = 1;
    return (uint32_t)v;
}

static int32_t
get_i32(buf *b)
{
    int64_t v = unzigzag(get_u(b));
    if (v < INT32_MIN || v > INT32_MAX)
        b->fail = 1;
    return (int32_t)v;
}

/* A malloc'd copy of the text put_text wrote, or NULL (NULL put, or b->fail). */
static char *
get_text(buf *b)
{
    uint64_t len = get_u(b);
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

/* calloc of n elements of sz (b->fail when memory ends; NULL for none). */
static void *
get_array(buf *b, size_t n, size_t sz)
{
    void *a = n ? calloc(n, sz) : NULL;
    if (n && !a)
        b->fail = b->nomem = 1;
    return a;
}

/* r's strings, ids 1 .. nstrings, as one run of NUL-terminated texts. */
static void
put_strings(buf *b, const dpro_reader *r)
{
    size_t total = 0;
    for (uint32_t i = 1; i <= r->nstrings; i++)
        total += strlen(r->strings[i]) + 1;
    put_u(b, r->nstrings);
    put_u(b, total);
    for (uint32_t i = 1; i <= r->nstrings; i++)
        put_bytes(b, r->strings[i], strlen(r->strings[i]) + 1);
}

/* The strings put_strings wrote into r: one block, the ids pointing into it. */
static void
get_strings(buf *b, dpro_reader *r)
{
    size_t n = get_count(b), total = get_count(b);
    if (n >= UINT32_MAX)
        b->fail = 1;
    r->strings = get_array(b, n + 1, sizeof *r->strings); /* [0] unused */
    r->string_bufs = get_array(b, 1, sizeof *r->string_bufs);
    uint8_t *s = get_array(b, total + 1, 1);
    if (b->fail || (n > 0 && (total == 0 || b->p[b->at + total - 1] != 0))) {
        b->fail = 1;
        free(s);
        return;
    }
    memcpy(s, b->p + b->at, total);
    b->at += total;
    r->string_bufs[r->nstring_bufs++] = s;
    size_t pos = 0, k = 1;
    for (; pos < total && k <= n; k++) {
        r->strings[k] = (char *)s + pos;
        pos += strlen((char *)s + pos) + 1;
    }
    if (k != n + 1 || pos != total)
        b->fail = 1; /* another number of texts than ids */
    r->nstrings = (uint32_t)n;
}

static void
put_tables(buf *b, const dpro_reader *r)
{
    put_u(b, r->ndevices);
    for (size_t i = 0; i < r->ndevices; i++) {
        const dpro_device_info *d = &r->devices[i];
        put_u(b, d->id);
        put_text(b, d->name);
        put_u(b, d->sm_count);
        put_u(b, d->total_memory);
        put_u(b, d->clock_khz);
        put_u(b, d->cc_major);
        put_u(b, d->cc_minor);
    }
    put_u(b, r->nstreams);
    for (size_t i = 0; i < r->nstreams; i++) {
        const dpro_stream_info *s = &r->streams[i];
        put_u(b, s->id);
        put_u(b, s->device);
        put_u(b, s->flags);
        put_u(b, zigzag(s->priority));
        put_text(b, s->name);
    }
    put_u(b, r->ncomms);
    for (size_t i = 0; i < r->ncomms; i++) {
        const dpro_comm_info *c = &r->comms[i];
        put_u(b, c->hash);
        put_u(b, c->parent_hash);
        put_u(b, c->handle);
        put_u(b, zigzag(c->rank));
        put_u(b, zigzag(c->size));
        put_u(b, c->device);
    }
    put_u(b, r->nthreads);
    for (size_t i = 0; i < r->nthreads; i++) {
        put_u(b, r->threads[i].tid);
        put_text(b, r->threads[i].name);
    }
    put_u(b, r->nstacks);
    for (size_t i = 0; i < r->nstacks; i++) {
        put_u(b, r->stacks[i].id);
        put_u(b, r->stacks[i].n);
        for (uint32_t f = 0; f < r->stacks[i].n; f++)
            put_u(b, r->stacks[i].frames[f]);
    }
}

/* The tables put_tables wrote into r; each count is r's only as its rows are complete,
 * so that dpro_reader_close frees what was taken when b fails midway. */
static void
get_tables(buf *b, dpro_reader *r)
{
    size_t n = get_count(b);
    r->devices = get_array(b, n, sizeof *r->devices);
    for (size_t i = 0; !b->fail && i < n; i++, r->ndevices++) {
        dpro_device_info *d = &r->devices[i];
        d->id = get_u32(b);
        d->name = get_text(b);
        d->sm_count = get_u32(b);
        d->total_memory = get_u(b);
        d->clock_khz = get_u32(b);
        d->cc_major = get_u32(b);
        d->cc_minor = get_u32(b);
    }
    n = get_count(b);
    r->streams = get_array(b, n, sizeof *r->streams);
    for (size_t i = 0; !b->fail && i < n; i++, r->nstreams++) {
        dpro_stream_info *s = &r->streams[i];
        s->id = get_u(b);
        s->device = get_u32(b);
        s->flags = get_u32(b);
        s->priority = get_i32(b);
        s->name = get_text(b);
    }
    n = get_count(b);
    r->comms = get_array(b, n, sizeof *r->comms);
    for (size_t i = 0; !b->fail && i < n; i++, r->ncomms++) {
        dpro_comm_info *c = &r->comms[i];
        c->hash = get_u(b);
        c->parent_hash = get_u(b);
        c->handle = get_u(b);
        c->rank = get_i32(b);
        c->size = get_i32(b);
        c->device = get_u32(b);
    }
    n = get_count(b);
    r->threads = get_array(b, n, sizeof *r->threads);
    for (size_t i = 0; !b->fail && i < n; i++, r->nthreads++) {
        r->threads[i].tid = get_u32(b);
        r->threads[i].name = get_text(b);
    }
    n = get_count(b);
    r->stacks = get_array(b, n, sizeof *r->stacks);
    for (size_t i = 0; !b->fail && i < n; i++, r->nstacks++) {
        stack_entry *s = &r->stacks[i];
        s->id = get_u32(b);
        uint32_t nf = (uint32_t)get_count(b);
        s->frames = get_array(b, nf, sizeof *s->frames);
        for (uint32_t f = 0; !b->fail && f < nf; f++, s->n++)
            s->frames[f] = get_u32(b);
    }
}

/* Whether a's strings are b's, text for text (one copy shared, or equal copies). */
static int
same_strings(const dpro_reader *a, const dpro_reader *b)
{
    int same = a->nstrings == b->nstrings;
    if (same && a->strings != b->strings)
        for (uint32_t i = 1; same && i <= a->nstrings; i++)
            same = strcmp(a->strings[i], b->strings[i]) == 0;
    return same;
}

/* Whether meta key is one of keys (NULL-terminated; NULL: all are). */
static int
meta_kept(const char *key, const char *const *keys)
{
    int kept = keys == NULL;
    for (size_t i = 0; !kept && keys[i]; i++)
        kept = strcmp(key, keys[i]) == 0;
    return kept;
}

/* r's meta entries whose keys are among keys (meta_kept): their count, then each. */
static void
put_meta(buf *b, const dpro_reader *r, const char *const *keys)
{
    size_t n = 0;
    for (size_t i = 0; i < r->nmeta; i++)
        n += meta_kept(r->meta[i].key, keys);
    put_u(b, n);
    for (size_t i = 0; i < r->nmeta; i++) {
        if (meta_kept(r->meta[i].key, keys)) {
            put_text(b, r->meta[i].key);
            put_text(b, r->meta[i].value);
        }
    }
}

int
dpro_reader_pack(const dpro_reader *r, const dpro_reader *like, const char *const *meta_keys,
                 uint8_t **out, size_t *len)
{
    buf b = {0};
    int rc = DPRO_OK;
    *out = NULL;
    *len = 0;
    if (!r || r->db || (like && like->db)) {
        rc = DPRO_ERR_ARG;
    } else {
        int strings_like = like && same_strings(r, like);
        put_u(&b, PACK_VERSION);
        put_u(&b, (uint64_t)(r->ended_early ? PACK_ENDED_EARLY : 0) |
                      (uint64_t)(r->cut ? PACK_CUT : 0) |
                      (uint64_t)(r->wal_unread ? PACK_WAL_UNREAD : 0) |
                      (uint64_t)(strings_like ? PACK_STRINGS_LIKE : 0));
        put_text(&b, r->warnings);
        put_meta(&b, r, meta_keys);
        if (!strings_like)
            put_strings(&b, r);
        put_tables(&b, r);
        rc = b.fail ? DPRO_ERR_NOMEM : DPRO_OK;
    }
    if (rc == DPRO_OK) {
        *out = b.p;
        *len = b.n;
    } else {
        free(b.p);
    }
    return rc;
}

/* r's strings made like's, one copy counted by strings_refs (b->fail and b->nomem when
 * memory ends). */
static void
share_strings(buf *b, dpro_reader *r, dpro_reader *like)
{
    if (!like->strings_refs && (like->strings_refs = malloc(sizeof *like->strings_refs)))
        *like->strings_refs = 1;
    if (!like->strings_refs) {
        b->fail = b->nomem = 1;
    } else {
        __atomic_add_fetch(like->strings_refs, 1, __ATOMIC_ACQ_REL);
        r->strings_refs = like->strings_refs;
        r->strings = like->strings;
        r->nstrings = like->nstrings;
        r->string_bufs = like->string_bufs;
        r->nstring_bufs = like->nstring_bufs;
    }
}

/* What dpro_reader_pack wrote after the version, into r (like: see dpro_reader_unpack). */
static void
get_reader(buf *b, dpro_reader *r, dpro_reader *like)
{
    uint64_t flags = get_u(b);
    r->ended_early = (flags & PACK_ENDED_EARLY) != 0;
    r->cut = (flags & PACK_CUT) != 0;
    r->wal_unread = (flags & PACK_WAL_UNREAD) != 0;
    if ((flags & PACK_STRINGS_LIKE) && !like)
        b->fail = 1; /* the strings are a reader's the caller does not name */
    r->warnings = get_text(b);
    size_t n = get_count(b);
    r->meta = get_array(b, n, sizeof *r->meta);
    for (size_t i = 0; !b->fail && i < n; i++, r->nmeta++) {
        r->meta[i].key = get_text(b);
        r->meta[i].value = get_text(b);
        if (!r->meta[i].key)
            b->fail = 1;
    }
    if (!b->fail && (flags & PACK_STRINGS_LIKE))
        share_strings(b, r, like);
    else if (!b->fail)
        get_strings(b, r);
    if (!b->fail)
        get_tables(b, r);
    if (!b->fail && b->at != b->n)
        b->fail = 1; /* bytes left over */
}

int
dpro_reader_unpack(const uint8_t *p, size_t len, const char *path, dpro_reader *like,
                   dpro_reader **out, char *errbuf, size_t errlen)
{
    buf b = {.p = (uint8_t *)p, .n = len};
    dpro_reader *r = calloc(1, sizeof *r);
    int rc = r ? DPRO_OK : DPRO_ERR_NOMEM;
    *out = NULL;
    if (r) {
        r->dirfd = -1;
        r->path = strdup(path ? path : "");
        if (!r->path)
            rc = DPRO_ERR_NOMEM;
    }
    if (rc == DPRO_OK && get_u(&b) != PACK_VERSION)
        b.fail = 1;
    if (rc == DPRO_OK && !b.fail)
        get_reader(&b, r, like);
    if (rc == DPRO_OK && b.fail)
        rc = b.nomem ? DPRO_ERR_NOMEM : DPRO_ERR_CORRUPT;
    if (rc != DPRO_OK) {
        if (errbuf && errlen)
            snprintf(errbuf, errlen, "%s: %s", path ? path : "",
                     rc == DPRO_ERR_NOMEM ? "out of memory"
                                          : "the reader's packed bytes do not hold (cut short, "
                                            "bytes left over, impossible counts, or the "
                                            "strings of a reader not named)");
        dpro_reader_close(r);
    } else {
        *out = r;
    }
    return rc;
}

int
dpro_reader_shares_strings(const dpro_reader *a, const dpro_reader *b)
{
    return a && b && a->strings_refs && a->strings_refs == b->strings_refs;
}
