/*
 * reader.c: the trace reader (see dprotrace.h).
 *
 * Opening reads meta, strings and the small tables inside one read transaction, and
 * remembers the last batch id then present, so that a writer appending concurrently never
 * shows the reader a batch whose strings it has not loaded. Events are read by an
 * iterator that decodes batches lazily and merges them by start time.
 */
#include "dprotrace.h"
#include "trace_internal.h"

#include <dirent.h>
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

typedef struct meta_entry {
    char *key, *value;
} meta_entry;

typedef struct stack_entry {
    uint32_t id;
    uint32_t n;
    uint32_t *frames;
} stack_entry;

struct dpro_reader {
    sqlite3 *db;
    char *path;
    meta_entry *meta;
    size_t nmeta;
    char **strings; /* index = id, pointing into string_bufs; [0] unused */
    uint32_t nstrings;
    uint8_t **string_bufs; /* decompressed string blocks */
    size_t nstring_bufs;
    dpro_device_info *devices;
    size_t ndevices;
    dpro_stream_info *streams;
    size_t nstreams;
    dpro_comm_info *comms;
    size_t ncomms;
    dpro_thread_info *threads;
    size_t nthreads;
    stack_entry *stacks;
    size_t nstacks;
    int64_t max_batch_id;
    uint8_t *api_class; /* dpro_api_class of each string id, computed on first use */
    char errmsg[512];
};

static char empty_string[] = "";

static char *
dup_col(sqlite3_stmt *st, int col)
{
    const unsigned char *t = sqlite3_column_text(st, col);
    return t ? strdup((const char *)t) : NULL;
}

/* Grows *arr (element size sz) so that index n fits. */
static int
grow(void **arr, size_t *cap, size_t n, size_t sz)
{
    if (n < *cap)
        return DPRO_OK;
    size_t c = *cap ? *cap * 2 : 16;
    while (c <= n)
        c *= 2;
    void *p = realloc(*arr, c * sz);
    if (!p)
        return DPRO_ERR_NOMEM;
    *arr = p;
    *cap = c;
    return DPRO_OK;
}

static int
reader_fail(dpro_reader *r, int rc, const char *fmt, const char *detail)
{
    snprintf(r->errmsg, sizeof r->errmsg, "%s: ", r->path);
    size_t n = strlen(r->errmsg);
    snprintf(r->errmsg + n, sizeof r->errmsg - n, fmt, detail);
    return rc;
}

static int
load_meta(dpro_reader *r)
{
    int rc = DPRO_OK;
    sqlite3_stmt *st = NULL;
    size_t cap = 0;
    if (sqlite3_prepare_v2(r->db, "SELECT key, value FROM meta", -1, &st, NULL) != SQLITE_OK) {
        int e = sqlite3_errcode(r->db);
        if (e == SQLITE_NOTADB || e == SQLITE_ERROR || e == SQLITE_CORRUPT)
            return reader_fail(r, DPRO_ERR_NOT_TRACE, "not a dpro trace (%s)",
                               sqlite3_errmsg(r->db));
        return reader_fail(r, DPRO_ERR_IO, "%s", sqlite3_errmsg(r->db));
    }
    while (rc == DPRO_OK && sqlite3_step(st) == SQLITE_ROW) {
        rc = grow((void **)&r->meta, &cap, r->nmeta, sizeof *r->meta);
        if (rc == DPRO_OK) {
            r->meta[r->nmeta].key = dup_col(st, 0);
            r->meta[r->nmeta].value = dup_col(st, 1);
            if (!r->meta[r->nmeta].key)
                rc = DPRO_ERR_NOMEM;
            else
                r->nmeta++;
        }
    }
    sqlite3_finalize(st);
    return rc;
}

/* Inflates one string block and points the ids it holds at their texts. The block's
 * buffer is kept in r->string_bufs. */
static int
load_string_block(dpro_reader *r, int64_t first, int64_t count, int64_t raw, const void *data,
                  int len)
{
    uint8_t *buf;
    uLongf out;
    int64_t id = first;

    if (first < 1 || count < 0 || raw < count || raw > (int64_t)DPRO_BATCH_MAX_RAW ||
        raw > (int64_t)len * 1032 + 64 || first + count - 1 > (int64_t)r->nstrings || !data)
        return reader_fail(r, DPRO_ERR_CORRUPT, "%s", "string block with impossible sizes");
    buf = malloc((size_t)raw + 1);
    if (!buf)
        return DPRO_ERR_NOMEM;
    r->string_bufs[r->nstring_bufs++] = buf;
    out = (uLongf)raw + 1;
    if (uncompress(buf, &out, data, (uLong)len) != Z_OK || out != (uLongf)raw ||
        (raw > 0 && buf[raw - 1] != 0))
        return reader_fail(r, DPRO_ERR_CORRUPT, "%s", "damaged string block");
    for (int64_t pos = 0; pos < raw && id < first + count; id++) {
        r->strings[id] = (char *)buf + pos;
        pos += (int64_t)strlen((char *)buf + pos) + 1;
    }
    if (id != first + count)
        return reader_fail(r, DPRO_ERR_CORRUPT, "%s",
                           "string block holds fewer strings than its count");
    return DPRO_OK;
}

static int
load_strings(dpro_reader *r)
{
    int rc = DPRO_OK;
    sqlite3_stmt *st = NULL;
    int64_t max_id = 0, nblocks = 0;
    if (sqlite3_prepare_v2(r->db, "SELECT max(first_id + count - 1), count(*) FROM string_blocks",
                           -1, &st, NULL) != SQLITE_OK)
        return reader_fail(r, DPRO_ERR_NOT_TRACE, "no string_blocks table (%s)",
                           sqlite3_errmsg(r->db));
    if (sqlite3_step(st) == SQLITE_ROW) {
        max_id = sqlite3_column_int64(st, 0);
        nblocks = sqlite3_column_int64(st, 1);
    }
    sqlite3_finalize(st);
    if (max_id < 0 || max_id > (int64_t)UINT32_MAX - 1 || nblocks < 0 || nblocks > max_id + 1)
        return reader_fail(r, DPRO_ERR_CORRUPT, "%s", "string ids out of range");
    r->strings = calloc((size_t)max_id + 1, sizeof *r->strings);
    r->string_bufs = calloc((size_t)nblocks + 1, sizeof *r->string_bufs);
    if (!r->strings || !r->string_bufs)
        return DPRO_ERR_NOMEM;
    r->nstrings = (uint32_t)max_id;
    sqlite3_prepare_v2(r->db, "SELECT first_id, count, raw_size, data FROM string_blocks", -1, &st,
                       NULL);
    while (rc == DPRO_OK && sqlite3_step(st) == SQLITE_ROW && r->nstring_bufs < (size_t)nblocks)
        rc = load_string_block(r, sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1),
                               sqlite3_column_int64(st, 2), sqlite3_column_blob(st, 3),
                               sqlite3_column_bytes(st, 3));
    sqlite3_finalize(st);
    return rc;
}

/* Loads the small tables; a missing table is empty (the writer creates these tables with
 * their first row, and an older minor version may lack one). */
static int
load_tables(dpro_reader *r)
{
    int rc = DPRO_OK;
    sqlite3_stmt *st = NULL;
    size_t cap;

    cap = 0;
    if (sqlite3_prepare_v2(r->db,
                           "SELECT id,name,sm_count,total_memory,clock_khz,cc_major,cc_minor "
                           "FROM devices ORDER BY id",
                           -1, &st, NULL) == SQLITE_OK) {
        while (rc == DPRO_OK && sqlite3_step(st) == SQLITE_ROW) {
            rc = grow((void **)&r->devices, &cap, r->ndevices, sizeof *r->devices);
            if (rc != DPRO_OK)
                break;
            dpro_device_info *d = &r->devices[r->ndevices++];
            d->id = (uint32_t)sqlite3_column_int64(st, 0);
            d->name = dup_col(st, 1);
            d->sm_count = (uint32_t)sqlite3_column_int64(st, 2);
            d->total_memory = (uint64_t)sqlite3_column_int64(st, 3);
            d->clock_khz = (uint32_t)sqlite3_column_int64(st, 4);
            d->cc_major = (uint32_t)sqlite3_column_int64(st, 5);
            d->cc_minor = (uint32_t)sqlite3_column_int64(st, 6);
        }
    }
    sqlite3_finalize(st);
    st = NULL;
    cap = 0;
    if (rc == DPRO_OK &&
        sqlite3_prepare_v2(r->db, "SELECT id,device,flags,priority,name FROM streams ORDER BY id",
                           -1, &st, NULL) == SQLITE_OK) {
        while (rc == DPRO_OK && sqlite3_step(st) == SQLITE_ROW) {
            rc = grow((void **)&r->streams, &cap, r->nstreams, sizeof *r->streams);
            if (rc != DPRO_OK)
                break;
            dpro_stream_info *s = &r->streams[r->nstreams++];
            s->id = (uint64_t)sqlite3_column_int64(st, 0);
            s->device = (uint32_t)sqlite3_column_int64(st, 1);
            s->flags = (uint32_t)sqlite3_column_int64(st, 2);
            s->priority = (int32_t)sqlite3_column_int64(st, 3);
            s->name = dup_col(st, 4);
        }
    }
    sqlite3_finalize(st);
    st = NULL;
    cap = 0;
    if (rc == DPRO_OK &&
        sqlite3_prepare_v2(r->db,
                           "SELECT handle,hash,parent_hash,rank,size,device FROM communicators", -1,
                           &st, NULL) == SQLITE_OK) {
        while (rc == DPRO_OK && sqlite3_step(st) == SQLITE_ROW) {
            rc = grow((void **)&r->comms, &cap, r->ncomms, sizeof *r->comms);
            if (rc != DPRO_OK)
                break;
            dpro_comm_info *c = &r->comms[r->ncomms++];
            c->handle = (uint64_t)sqlite3_column_int64(st, 0);
            c->hash = (uint64_t)sqlite3_column_int64(st, 1);
            c->parent_hash = (uint64_t)sqlite3_column_int64(st, 2);
            c->rank = (int32_t)sqlite3_column_int64(st, 3);
            c->size = (int32_t)sqlite3_column_int64(st, 4);
            c->device = (uint32_t)sqlite3_column_int64(st, 5);
        }
    }
    sqlite3_finalize(st);
    st = NULL;
    cap = 0;
    if (rc == DPRO_OK && sqlite3_prepare_v2(r->db, "SELECT tid,name FROM threads ORDER BY tid", -1,
                                            &st, NULL) == SQLITE_OK) {
        while (rc == DPRO_OK && sqlite3_step(st) == SQLITE_ROW) {
            rc = grow((void **)&r->threads, &cap, r->nthreads, sizeof *r->threads);
            if (rc != DPRO_OK)
                break;
            dpro_thread_info *t = &r->threads[r->nthreads++];
            t->tid = (uint32_t)sqlite3_column_int64(st, 0);
            t->name = dup_col(st, 1);
        }
    }
    sqlite3_finalize(st);
    st = NULL;
    cap = 0;
    if (rc == DPRO_OK && sqlite3_prepare_v2(r->db, "SELECT id,frames FROM stacks ORDER BY id", -1,
                                            &st, NULL) == SQLITE_OK) {
        while (rc == DPRO_OK && sqlite3_step(st) == SQLITE_ROW) {
            const char *t = (const char *)sqlite3_column_text(st, 1);
            rc = grow((void **)&r->stacks, &cap, r->nstacks, sizeof *r->stacks);
            if (rc != DPRO_OK || !t)
                break;
            stack_entry *s = &r->stacks[r->nstacks++];
            s->id = (uint32_t)sqlite3_column_int64(st, 0);
            s->n = 0;
            s->frames = malloc((strlen(t) / 2 + 1) * sizeof *s->frames);
            if (!s->frames) {
                rc = DPRO_ERR_NOMEM;
                break;
            }
            for (char *end; *t; t = *end ? end + 1 : end) {
                s->frames[s->n++] = (uint32_t)strtoul(t, &end, 10);
                if (end == t)
                    break;
            }
        }
    }
    sqlite3_finalize(st);
    return rc;
}

int
dpro_reader_open(const char *path, dpro_reader **out, char *errbuf, size_t errlen)
{
    int rc = DPRO_OK;
    dpro_reader *r = NULL;
    struct stat sb;
    sqlite3_stmt *st = NULL;

    *out = NULL;
    if (!path)
        return DPRO_ERR_ARG;
    if (stat(path, &sb) != 0) {
        dpro_set_err(errbuf, errlen, "%s: %s", path, strerror(errno));
        return DPRO_ERR_IO;
    }
    if (!S_ISREG(sb.st_mode)) {
        dpro_set_err(errbuf, errlen, "%s: not a regular file", path);
        return DPRO_ERR_NOT_TRACE;
    }
    r = calloc(1, sizeof *r);
    if (!r || !(r->path = strdup(path))) {
        free(r);
        return DPRO_ERR_NOMEM;
    }
    if (sqlite3_open_v2(path, &r->db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
        rc = reader_fail(r, DPRO_ERR_IO, "cannot open: %s", sqlite3_errmsg(r->db));
    if (rc == DPRO_OK) {
        sqlite3_busy_timeout(r->db, 2000);
        if (sqlite3_exec(r->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK)
            rc = reader_fail(r, DPRO_ERR_IO, "%s", sqlite3_errmsg(r->db));
    }
    if (rc == DPRO_OK)
        rc = load_meta(r);
    if (rc == DPRO_OK) {
        const char *major = dpro_reader_meta(r, "schema_major");
        if (!major)
            rc = reader_fail(r, DPRO_ERR_NOT_TRACE, "%s",
                             "not a dpro trace (no schema_major in meta)");
        else if (atoi(major) > DPRO_SCHEMA_MAJOR) {
            char msg[128];
            snprintf(msg, sizeof msg,
                     "written with trace schema %s.x; this dpro reads up to %d.x: upgrade dpro",
                     major, DPRO_SCHEMA_MAJOR);
            rc = reader_fail(r, DPRO_ERR_VERSION, "%s", msg);
        }
    }
    if (rc == DPRO_OK)
        rc = load_strings(r);
    if (rc == DPRO_OK)
        rc = load_tables(r);
    if (rc == DPRO_OK) {
        if (sqlite3_prepare_v2(r->db, "SELECT max(id) FROM batches", -1, &st, NULL) != SQLITE_OK)
            rc = reader_fail(r, DPRO_ERR_NOT_TRACE, "no batches table (%s)", sqlite3_errmsg(r->db));
        else if (sqlite3_step(st) == SQLITE_ROW)
            r->max_batch_id = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    if (r->db)
        sqlite3_exec(r->db, "COMMIT", NULL, NULL, NULL);
    if (rc != DPRO_OK) {
        dpro_set_err(errbuf, errlen, "%s", r->errmsg[0] ? r->errmsg : dpro_status_str(rc));
        dpro_reader_close(r);
        return rc;
    }
    *out = r;
    return rc;
}

void
dpro_reader_close(dpro_reader *r)
{
    if (!r)
        return;
    sqlite3_close(r->db);
    free(r->api_class);
    for (size_t i = 0; i < r->nmeta; i++) {
        free(r->meta[i].key);
        free(r->meta[i].value);
    }
    free(r->meta);
    for (size_t i = 0; i < r->nstring_bufs; i++)
        free(r->string_bufs[i]);
    free(r->string_bufs);
    free(r->strings);
    for (size_t i = 0; i < r->ndevices; i++)
        free((char *)r->devices[i].name);
    free(r->devices);
    for (size_t i = 0; i < r->nstreams; i++)
        free((char *)r->streams[i].name);
    free(r->streams);
    free(r->comms);
    for (size_t i = 0; i < r->nthreads; i++)
        free((char *)r->threads[i].name);
    free(r->threads);
    for (size_t i = 0; i < r->nstacks; i++)
        free(r->stacks[i].frames);
    free(r->stacks);
    free(r->path);
    free(r);
}

const char *
dpro_reader_path(const dpro_reader *r)
{
    return r->path;
}

const char *
dpro_reader_meta(const dpro_reader *r, const char *key)
{
    for (size_t i = 0; i < r->nmeta; i++)
        if (!strcmp(r->meta[i].key, key))
            return r->meta[i].value;
    return NULL;
}

int64_t
dpro_reader_meta_int(const dpro_reader *r, const char *key, int64_t dflt)
{
    const char *v = dpro_reader_meta(r, key);
    char *end;
    long long x;
    if (!v || !*v)
        return dflt;
    errno = 0;
    x = strtoll(v, &end, 10);
    if (*end || errno)
        return dflt;
    return x;
}

const char *
dpro_reader_string(const dpro_reader *r, uint32_t id)
{
    if (id == 0 || id > r->nstrings || !r->strings[id])
        return empty_string;
    return r->strings[id];
}

uint32_t
dpro_reader_string_count(const dpro_reader *r)
{
    return r->nstrings;
}

size_t
dpro_reader_devices(const dpro_reader *r, const dpro_device_info **out)
{
    *out = r->devices;
    return r->ndevices;
}

size_t
dpro_reader_streams(const dpro_reader *r, const dpro_stream_info **out)
{
    *out = r->streams;
    return r->nstreams;
}

size_t
dpro_reader_comms(const dpro_reader *r, const dpro_comm_info **out)
{
    *out = r->comms;
    return r->ncomms;
}

size_t
dpro_reader_threads(const dpro_reader *r, const dpro_thread_info **out)
{
    *out = r->threads;
    return r->nthreads;
}

size_t
dpro_reader_stack(const dpro_reader *r, uint32_t stack_id, const uint32_t **frames)
{
    for (size_t i = 0; i < r->nstacks; i++)
        if (r->stacks[i].id == stack_id) {
            *frames = r->stacks[i].frames;
            return r->stacks[i].n;
        }
    *frames = NULL;
    return 0;
}

static uint64_t
file_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

int
dpro_reader_summary(dpro_reader *r, dpro_trace_summary *s)
{
    int rc = DPRO_OK;
    sqlite3_stmt *st = NULL;
    char side[4096];

    memset(s, 0, sizeof *s);
    if (sqlite3_prepare_v2(r->db,
                           "SELECT count(*), sum(count), min(first_ns), max(last_ns), "
                           "sum(length(data)), sum(raw_size) FROM batches WHERE id <= ?",
                           -1, &st, NULL) != SQLITE_OK)
        return reader_fail(r, DPRO_ERR_CORRUPT, "%s", sqlite3_errmsg(r->db));
    sqlite3_bind_int64(st, 1, r->max_batch_id);
    if (sqlite3_step(st) == SQLITE_ROW) {
        s->batches = (uint64_t)sqlite3_column_int64(st, 0);
        s->events = (uint64_t)sqlite3_column_int64(st, 1);
        s->first_ns = (uint64_t)sqlite3_column_int64(st, 2);
        s->last_ns = (uint64_t)sqlite3_column_int64(st, 3);
        s->event_bytes = (uint64_t)sqlite3_column_int64(st, 4);
        s->raw_bytes = (uint64_t)sqlite3_column_int64(st, 5);
    } else {
        rc = reader_fail(r, DPRO_ERR_CORRUPT, "%s", sqlite3_errmsg(r->db));
    }
    sqlite3_finalize(st);
    st = NULL;
    if (rc == DPRO_OK &&
        sqlite3_prepare_v2(r->db, "SELECT sum(count) FROM drops", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        s->dropped = (uint64_t)sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    snprintf(side, sizeof side, "%s-wal", r->path);
    s->file_bytes = file_size(r->path) + file_size(side);
    return rc;
}

const char *
dpro_reader_errmsg(const dpro_reader *r)
{
    return r ? r->errmsg : "";
}

/* ---- iteration -------------------------------------------------------------------------- */

typedef struct batch_ref {
    int64_t id;
    uint64_t first_ns;
} batch_ref;

typedef struct open_batch {
    dpro_event *events;
    size_t n, pos, cap;
} open_batch;

#define SPARE_ARRAYS 4

struct dpro_iter {
    dpro_reader *r;
    sqlite3_stmt *fetch;
    batch_ref *refs;
    size_t nrefs, next_ref;
    open_batch *heap; /* min-heap by the current event's start */
    size_t nheap, capheap;
    uint64_t bad;
    dpro_codec *codec;
    dpro_event *merge_buf; /* scratch for merging a batch's kind groups */
    size_t merge_cap;
    open_batch spare[SPARE_ARRAYS]; /* event arrays of finished batches, for reuse */
    size_t nspare;
};

static int
event_before(const dpro_event *a, const dpro_event *b)
{
    if (a->start_ns != b->start_ns)
        return a->start_ns < b->start_ns;
    return a->kind < b->kind;
}

static int
event_cmp(const void *pa, const void *pb)
{
    const dpro_event *a = pa, *b = pb;
    if (a->start_ns != b->start_ns)
        return a->start_ns < b->start_ns ? -1 : 1;
    if (a->kind != b->kind)
        return a->kind < b->kind ? -1 : 1;
    return 0;
}

static int
heap_less(const open_batch *a, const open_batch *b)
{
    return event_before(&a->events[a->pos], &b->events[b->pos]);
}

static void
heap_sift_down(dpro_iter *it, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        if (l < it->nheap && heap_less(&it->heap[l], &it->heap[m]))
            m = l;
        if (l + 1 < it->nheap && heap_less(&it->heap[l + 1], &it->heap[m]))
            m = l + 1;
        if (m == i)
            return;
        open_batch t = it->heap[i];
        it->heap[i] = it->heap[m];
        it->heap[m] = t;
        i = m;
    }
}

static void
heap_push(dpro_iter *it, open_batch b)
{
    size_t i = it->nheap++;
    it->heap[i] = b;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_less(&it->heap[i], &it->heap[p]))
            break;
        open_batch t = it->heap[i];
        it->heap[i] = it->heap[p];
        it->heap[p] = t;
        i = p;
    }
}

int
dpro_iter_open(dpro_reader *r, dpro_iter **out)
{
    int rc = DPRO_OK;
    dpro_iter *it;
    sqlite3_stmt *st = NULL;
    size_t cap = 0;

    *out = NULL;
    it = calloc(1, sizeof *it);
    if (!it)
        return DPRO_ERR_NOMEM;
    it->r = r;
    it->codec = dpro_codec_new();
    if (!it->codec)
        rc = DPRO_ERR_NOMEM;
    if (rc == DPRO_OK &&
        sqlite3_prepare_v2(r->db,
                           "SELECT id, first_ns FROM batches WHERE id <= ? ORDER BY first_ns, id",
                           -1, &st, NULL) != SQLITE_OK) {
        rc = reader_fail(r, DPRO_ERR_CORRUPT, "reading batches: %s", sqlite3_errmsg(r->db));
    } else if (sqlite3_prepare_v2(r->db, "SELECT count, raw_size, data FROM batches WHERE id = ?",
                                  -1, &it->fetch, NULL) != SQLITE_OK) {
        rc = reader_fail(r, DPRO_ERR_CORRUPT, "reading batches: %s", sqlite3_errmsg(r->db));
    }
    if (rc == DPRO_OK) {
        sqlite3_bind_int64(st, 1, r->max_batch_id);
        while (rc == DPRO_OK && sqlite3_step(st) == SQLITE_ROW) {
            rc = grow((void **)&it->refs, &cap, it->nrefs, sizeof *it->refs);
            if (rc == DPRO_OK) {
                it->refs[it->nrefs].id = sqlite3_column_int64(st, 0);
                it->refs[it->nrefs].first_ns = (uint64_t)sqlite3_column_int64(st, 1);
                it->nrefs++;
            }
        }
    }
    sqlite3_finalize(st);
    if (rc == DPRO_OK) {
        it->capheap = it->nrefs ? it->nrefs : 1;
        it->heap = malloc(it->capheap * sizeof *it->heap);
        if (!it->heap)
            rc = DPRO_ERR_NOMEM;
    }
    if (rc != DPRO_OK) {
        dpro_iter_close(it);
        return rc;
    }
    *out = it;
    return rc;
}

/* Whether events are already in (start, kind) order. */
static int
sorted(const dpro_event *e, size_t n)
{
    for (size_t i = 1; i < n; i++)
        if (event_before(&e[i], &e[i - 1]))
            return 0;
    return 1;
}

/* A batch decodes as one run per kind, each normally in time order: merges the runs
 * (sorting a run first if it is not) through the iterator's scratch buffer, and swaps the
 * buffers. Returns DPRO_ERR_NOMEM when there are too many runs or no memory. */
static int
merge_runs(dpro_iter *it, open_batch *b)
{
    enum { MAX_RUNS = 80 };
    size_t head[MAX_RUNS], end[MAX_RUNS], nruns = 0;
    for (size_t i = 0; i < b->n; i = end[nruns++]) {
        size_t j = i + 1;
        if (nruns == MAX_RUNS)
            return DPRO_ERR_NOMEM;
        while (j < b->n && b->events[j].kind == b->events[i].kind)
            j++;
        head[nruns] = i;
        end[nruns] = j;
        if (!sorted(b->events + i, j - i))
            qsort(b->events + i, j - i, sizeof *b->events, event_cmp);
    }
    if (it->merge_cap < b->n) {
        dpro_event *m = realloc(it->merge_buf, b->n * sizeof *m);
        if (!m)
            return DPRO_ERR_NOMEM;
        it->merge_buf = m;
        it->merge_cap = b->n;
    }
    for (size_t out = 0; out < b->n; out++) {
        size_t best = MAX_RUNS;
        for (size_t r = 0; r < nruns; r++)
            if (head[r] < end[r] &&
                (best == MAX_RUNS || event_before(&b->events[head[r]], &b->events[head[best]])))
                best = r;
        it->merge_buf[out] = b->events[head[best]++];
    }
    dpro_event *t = b->events;
    size_t cap = b->cap;
    b->events = it->merge_buf;
    b->cap = it->merge_cap;
    it->merge_buf = t;
    it->merge_cap = cap;
    return DPRO_OK;
}

/* Keeps the event array of a finished batch for the next one (or frees it). */
static void
recycle(dpro_iter *it, open_batch b)
{
    if (it->nspare < SPARE_ARRAYS)
        it->spare[it->nspare++] = b;
    else
        free(b.events);
}

/* Decodes batch refs[next_ref] and pushes it on the heap. Returns DPRO_OK, or an error
 * for a damaged batch (which is skipped). */
static int
open_next_batch(dpro_iter *it)
{
    int rc = DPRO_OK;
    const batch_ref *ref = &it->refs[it->next_ref++];
    char err[256] = "";
    open_batch b = {NULL, 0, 0, 0};
    if (it->nspare)
        b = it->spare[--it->nspare];

    sqlite3_bind_int64(it->fetch, 1, ref->id);
    if (sqlite3_step(it->fetch) != SQLITE_ROW) {
        snprintf(err, sizeof err, "cannot read: %s", sqlite3_errmsg(it->r->db));
        rc = DPRO_ERR_CORRUPT;
    } else {
        int64_t count = sqlite3_column_int64(it->fetch, 0);
        int64_t raw = sqlite3_column_int64(it->fetch, 1);
        const uint8_t *data = sqlite3_column_blob(it->fetch, 2);
        int len = sqlite3_column_bytes(it->fetch, 2);
        if (raw < 0 || count < 0 || !data) {
            snprintf(err, sizeof err, "bad sizes (count %lld, raw_size %lld)", (long long)count,
                     (long long)raw);
            rc = DPRO_ERR_CORRUPT;
        } else {
            rc = dpro_codec_decode(it->codec, data, (size_t)len, (size_t)raw, &b.events, &b.cap,
                                   &b.n, err, sizeof err);
            if (rc == DPRO_OK && (size_t)count != b.n) {
                snprintf(err, sizeof err, "holds %zu events, its row says %lld", b.n,
                         (long long)count);
                rc = DPRO_ERR_CORRUPT;
            }
        }
    }
    sqlite3_reset(it->fetch);
    if (rc != DPRO_OK) {
        char msg[384];
        snprintf(msg, sizeof msg, "batch %lld: %s", (long long)ref->id, err);
        reader_fail(it->r, rc, "%s", msg);
        it->bad++;
        recycle(it, b);
        return rc;
    }
    if (b.n == 0) {
        recycle(it, b);
        return DPRO_OK;
    }
    if (!sorted(b.events, b.n) && merge_runs(it, &b) != DPRO_OK)
        qsort(b.events, b.n, sizeof *b.events, event_cmp);
    b.pos = 0;
    heap_push(it, b);
    return DPRO_OK;
}

int
dpro_iter_next(dpro_iter *it, dpro_event *ev)
{
    /* open every batch that may hold an event before the heap's current minimum */
    while (it->next_ref < it->nrefs &&
           (it->nheap == 0 ||
            it->refs[it->next_ref].first_ns <= it->heap[0].events[it->heap[0].pos].start_ns)) {
        int rc = open_next_batch(it);
        if (rc != DPRO_OK)
            return rc;
    }
    if (it->nheap == 0)
        return 0;
    open_batch *top = &it->heap[0];
    *ev = top->events[top->pos++];
    if (top->pos == top->n) {
        recycle(it, *top);
        it->heap[0] = it->heap[--it->nheap];
    }
    if (it->nheap)
        heap_sift_down(it, 0);
    return 1;
}

uint64_t
dpro_iter_bad_batches(const dpro_iter *it)
{
    return it->bad;
}

void
dpro_iter_close(dpro_iter *it)
{
    if (!it)
        return;
    for (size_t i = 0; i < it->nheap; i++)
        free(it->heap[i].events);
    for (size_t i = 0; i < it->nspare; i++)
        free(it->spare[i].events);
    dpro_codec_free(it->codec);
    free(it->merge_buf);
    free(it->heap);
    free(it->refs);
    sqlite3_finalize(it->fetch);
    free(it);
}

/* ---- directories -------------------------------------------------------------------------- */

static int
has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

static int
cmp_paths(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int
dpro_list_traces(const char *const *paths, size_t npaths, char ***files, size_t *nfiles,
                 char *errbuf, size_t errlen)
{
    int rc = DPRO_OK;
    char **list = NULL;
    size_t n = 0, cap = 0;

    *files = NULL;
    *nfiles = 0;
    for (size_t i = 0; rc == DPRO_OK && i < npaths; i++) {
        struct stat sb;
        if (stat(paths[i], &sb) != 0) {
            dpro_set_err(errbuf, errlen, "%s: %s", paths[i], strerror(errno));
            rc = DPRO_ERR_IO;
        } else if (S_ISDIR(sb.st_mode)) {
            DIR *d = opendir(paths[i]);
            struct dirent *de;
            size_t found = 0;
            if (!d) {
                dpro_set_err(errbuf, errlen, "%s: %s", paths[i], strerror(errno));
                rc = DPRO_ERR_IO;
                break;
            }
            while (rc == DPRO_OK && (de = readdir(d))) {
                if (!has_suffix(de->d_name, DPRO_TRACE_SUFFIX))
                    continue;
                rc = grow((void **)&list, &cap, n, sizeof *list);
                if (rc == DPRO_OK) {
                    size_t len = strlen(paths[i]) + strlen(de->d_name) + 2;
                    list[n] = malloc(len);
                    if (!list[n]) {
                        rc = DPRO_ERR_NOMEM;
                        break;
                    }
                    snprintf(list[n], len, "%s/%s", paths[i], de->d_name);
                    n++;
                    found++;
                }
            }
            closedir(d);
            if (rc == DPRO_OK && !found) {
                dpro_set_err(errbuf, errlen, "%s: no %s trace files in this directory", paths[i],
                             DPRO_TRACE_SUFFIX);
                rc = DPRO_ERR_NOT_TRACE;
            }
        } else {
            rc = grow((void **)&list, &cap, n, sizeof *list);
            if (rc == DPRO_OK && !(list[n++] = strdup(paths[i])))
                rc = DPRO_ERR_NOMEM;
        }
    }
    if (rc != DPRO_OK) {
        dpro_free_paths(list, n);
        return rc;
    }
    if (n)
        qsort(list, n, sizeof *list, cmp_paths);
    *files = list;
    *nfiles = n;
    return rc;
}

void
dpro_free_paths(char **files, size_t nfiles)
{
    if (!files)
        return;
    for (size_t i = 0; i < nfiles; i++)
        free(files[i]);
    free(files);
}

/* Unclassified string ids in the reader's class cache. */
#define API_CLASS_UNSET 0xff

int
dpro_reader_api_class(dpro_reader *r, uint32_t name_id)
{
    int cls = DPRO_API_CLASS_OTHER;
    if (r && name_id > 0 && name_id <= r->nstrings) {
        if (!r->api_class) {
            r->api_class = malloc((size_t)r->nstrings + 1);
            if (r->api_class)
                memset(r->api_class, API_CLASS_UNSET, (size_t)r->nstrings + 1);
        }
        if (!r->api_class)
            cls = dpro_api_classify(r->strings[name_id]);
        else {
            if (r->api_class[name_id] == API_CLASS_UNSET)
                r->api_class[name_id] = (uint8_t)dpro_api_classify(r->strings[name_id]);
            cls = r->api_class[name_id];
        }
    }
    return cls;
}
