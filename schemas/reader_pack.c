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

#include "bytes.h"

#define PACK_VERSION 2

/* The flags after the version. */
enum {
    PACK_ENDED_EARLY = 1,
    PACK_CUT = 2,
    PACK_WAL_UNREAD = 4,
    PACK_STRINGS_LIKE = 8, /* the strings are like's: none follow */
};

/* bytes_get_varint cut to 32 bits (b->fail when it does not fit). */
static uint32_t
get_u32(bytes *b)
{
    uint64_t v = bytes_get_varint(b);
    if (v > UINT32_MAX)
        b->fail = 1;
    return (uint32_t)v;
}

/* A zig-zag varint cut to 32 bits, signed (b->fail when it does not fit). */
static int32_t
get_i32(bytes *b)
{
    int64_t v = unzigzag(bytes_get_varint(b));
    if (v < INT32_MIN || v > INT32_MAX)
        b->fail = 1;
    return (int32_t)v;
}

/* calloc of n elements of sz, rows to be read into (b->fail and b->nomem when memory
 * ends; NULL for none). */
static void *
alloc_rows(bytes *b, size_t n, size_t sz)
{
    void *a = n ? calloc(n, sz) : NULL;
    if (n && !a)
        b->fail = b->nomem = 1;
    return a;
}

/* r's strings, ids 1 .. nstrings, as one run of NUL-terminated texts. */
static void
put_strings(bytes *b, const dpro_reader *r)
{
    size_t total = 0;
    for (uint32_t i = 1; i <= r->nstrings; i++)
        total += strlen(r->strings[i]) + 1;
    bytes_put_varint(b, r->nstrings);
    bytes_put_varint(b, total);
    for (uint32_t i = 1; i <= r->nstrings; i++)
        bytes_put(b, r->strings[i], strlen(r->strings[i]) + 1);
}

/* The strings put_strings wrote into r: one block, the ids pointing into it. */
static void
get_strings(bytes *b, dpro_reader *r)
{
    size_t n = bytes_get_count(b), total = bytes_get_count(b);
    if (n >= UINT32_MAX)
        b->fail = 1;
    r->strings = alloc_rows(b, n + 1, sizeof *r->strings); /* [0] unused */
    r->string_bufs = alloc_rows(b, 1, sizeof *r->string_bufs);
    uint8_t *s = alloc_rows(b, total + 1, 1);
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
put_tables(bytes *b, const dpro_reader *r)
{
    bytes_put_varint(b, r->ndevices);
    for (size_t i = 0; i < r->ndevices; i++) {
        const dpro_device_info *d = &r->devices[i];
        bytes_put_varint(b, d->id);
        bytes_put_text(b, d->name);
        bytes_put_varint(b, d->sm_count);
        bytes_put_varint(b, d->total_memory);
        bytes_put_varint(b, d->clock_khz);
        bytes_put_varint(b, d->cc_major);
        bytes_put_varint(b, d->cc_minor);
    }
    bytes_put_varint(b, r->nstreams);
    for (size_t i = 0; i < r->nstreams; i++) {
        const dpro_stream_info *s = &r->streams[i];
        bytes_put_varint(b, s->id);
        bytes_put_varint(b, s->device);
        bytes_put_varint(b, s->flags);
        bytes_put_varint(b, zigzag(s->priority));
        bytes_put_text(b, s->name);
    }
    bytes_put_varint(b, r->ncomms);
    for (size_t i = 0; i < r->ncomms; i++) {
        const dpro_comm_info *c = &r->comms[i];
        bytes_put_varint(b, c->hash);
        bytes_put_varint(b, c->parent_hash);
        bytes_put_varint(b, c->handle);
        bytes_put_varint(b, zigzag(c->rank));
        bytes_put_varint(b, zigzag(c->size));
        bytes_put_varint(b, c->device);
    }
    bytes_put_varint(b, r->nthreads);
    for (size_t i = 0; i < r->nthreads; i++) {
        bytes_put_varint(b, r->threads[i].tid);
        bytes_put_text(b, r->threads[i].name);
    }
    bytes_put_varint(b, r->nstacks);
    for (size_t i = 0; i < r->nstacks; i++) {
        bytes_put_varint(b, r->stacks[i].id);
        bytes_put_varint(b, r->stacks[i].n);
        for (uint32_t f = 0; f < r->stacks[i].n; f++)
            bytes_put_varint(b, r->stacks[i].frames[f]);
    }
}

/* The tables put_tables wrote into r; each count is r's only as its rows are complete,
 * so that dpro_reader_close frees what was taken when b fails midway. */
static void
get_tables(bytes *b, dpro_reader *r)
{
    size_t n = bytes_get_count(b);
    r->devices = alloc_rows(b, n, sizeof *r->devices);
    for (size_t i = 0; !b->fail && i < n; i++, r->ndevices++) {
        dpro_device_info *d = &r->devices[i];
        d->id = get_u32(b);
        d->name = bytes_get_text(b);
        d->sm_count = get_u32(b);
        d->total_memory = bytes_get_varint(b);
        d->clock_khz = get_u32(b);
        d->cc_major = get_u32(b);
        d->cc_minor = get_u32(b);
    }
    n = bytes_get_count(b);
    r->streams = alloc_rows(b, n, sizeof *r->streams);
    for (size_t i = 0; !b->fail && i < n; i++, r->nstreams++) {
        dpro_stream_info *s = &r->streams[i];
        s->id = bytes_get_varint(b);
        s->device = get_u32(b);
        s->flags = get_u32(b);
        s->priority = get_i32(b);
        s->name = bytes_get_text(b);
    }
    n = bytes_get_count(b);
    r->comms = alloc_rows(b, n, sizeof *r->comms);
    for (size_t i = 0; !b->fail && i < n; i++, r->ncomms++) {
        dpro_comm_info *c = &r->comms[i];
        c->hash = bytes_get_varint(b);
        c->parent_hash = bytes_get_varint(b);
        c->handle = bytes_get_varint(b);
        c->rank = get_i32(b);
        c->size = get_i32(b);
        c->device = get_u32(b);
    }
    n = bytes_get_count(b);
    r->threads = alloc_rows(b, n, sizeof *r->threads);
    for (size_t i = 0; !b->fail && i < n; i++, r->nthreads++) {
        r->threads[i].tid = get_u32(b);
        r->threads[i].name = bytes_get_text(b);
    }
    n = bytes_get_count(b);
    r->stacks = alloc_rows(b, n, sizeof *r->stacks);
    for (size_t i = 0; !b->fail && i < n; i++, r->nstacks++) {
        stack_entry *s = &r->stacks[i];
        s->id = get_u32(b);
        uint32_t nf = (uint32_t)bytes_get_count(b);
        s->frames = alloc_rows(b, nf, sizeof *s->frames);
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
put_meta(bytes *b, const dpro_reader *r, const char *const *keys)
{
    size_t n = 0;
    for (size_t i = 0; i < r->nmeta; i++)
        n += meta_kept(r->meta[i].key, keys);
    bytes_put_varint(b, n);
    for (size_t i = 0; i < r->nmeta; i++) {
        if (meta_kept(r->meta[i].key, keys)) {
            bytes_put_text(b, r->meta[i].key);
            bytes_put_text(b, r->meta[i].value);
        }
    }
}

int
dpro_reader_pack(const dpro_reader *r, const dpro_reader *like, const char *const *meta_keys,
                 uint8_t **out, size_t *len)
{
    bytes b = {0};
    int rc = DPRO_OK;
    *out = NULL;
    *len = 0;
    if (!r || r->db || (like && like->db)) {
        rc = DPRO_ERR_ARG;
    } else {
        int strings_like = like && same_strings(r, like);
        bytes_put_varint(&b, PACK_VERSION);
        bytes_put_varint(&b, (uint64_t)(r->ended_early ? PACK_ENDED_EARLY : 0) |
                                 (uint64_t)(r->cut ? PACK_CUT : 0) |
                                 (uint64_t)(r->wal_unread ? PACK_WAL_UNREAD : 0) |
                                 (uint64_t)(strings_like ? PACK_STRINGS_LIKE : 0));
        bytes_put_text(&b, r->warnings);
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
share_strings(bytes *b, dpro_reader *r, dpro_reader *like)
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
get_reader(bytes *b, dpro_reader *r, dpro_reader *like)
{
    uint64_t flags = bytes_get_varint(b);
    r->ended_early = (flags & PACK_ENDED_EARLY) != 0;
    r->cut = (flags & PACK_CUT) != 0;
    r->wal_unread = (flags & PACK_WAL_UNREAD) != 0;
    if ((flags & PACK_STRINGS_LIKE) && !like)
        b->fail = 1; /* the strings are a reader's the caller does not name */
    r->warnings = bytes_get_text(b);
    size_t n = bytes_get_count(b);
    r->meta = alloc_rows(b, n, sizeof *r->meta);
    for (size_t i = 0; !b->fail && i < n; i++, r->nmeta++) {
        r->meta[i].key = bytes_get_text(b);
        r->meta[i].value = bytes_get_text(b);
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
    bytes b = {.p = (unsigned char *)p, .n = len};
    dpro_reader *r = calloc(1, sizeof *r);
    int rc = r ? DPRO_OK : DPRO_ERR_NOMEM;
    *out = NULL;
    if (r) {
        r->dirfd = -1;
        r->path = strdup(path ? path : "");
        if (!r->path)
            rc = DPRO_ERR_NOMEM;
    }
    if (rc == DPRO_OK && bytes_get_varint(&b) != PACK_VERSION)
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
