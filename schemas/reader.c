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
#include "reader_internal.h"

#include <dirent.h>
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

static char empty_string[] = "";

static char *
dup_col(sqlite3_stmt *st, int col)
{
    const unsigned char *t = sqlite3_column_text(st, col);
    return t ? strdup((const char *)t) : NULL;
}

int
dpro_grow(void **arr, size_t *cap, size_t n, size_t sz)
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

int
dpro_reader_fail(dpro_reader *r, int rc, const char *fmt, const char *detail)
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
            return dpro_reader_fail(r, DPRO_ERR_NOT_TRACE, "not a dpro trace (%s)",
                               sqlite3_errmsg(r->db));
        return dpro_reader_fail(r, DPRO_ERR_IO, "%s", sqlite3_errmsg(r->db));
    }
    while (rc == DPRO_OK && sqlite3_step(st) == SQLITE_ROW) {
        rc = dpro_grow((void **)&r->meta, &cap, r->nmeta, sizeof *r->meta);
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
        return dpro_reader_fail(r, DPRO_ERR_CORRUPT, "%s", "string block with impossible sizes");
    buf = malloc((size_t)raw + 1);
    if (!buf)
        return DPRO_ERR_NOMEM;
    r->string_bufs[r->nstring_bufs++] = buf;
    out = (uLongf)raw + 1;
    if (uncompress(buf, &out, data, (uLong)len) != Z_OK || out != (uLongf)raw ||
        (raw > 0 && buf[raw - 1] != 0))
        return dpro_reader_fail(r, DPRO_ERR_CORRUPT, "%s", "damaged string block");
    for (int64_t pos = 0; pos < raw && id < first + count; id++) {
        r->strings[id] = (char *)buf + pos;
        pos += (int64_t)strlen((char *)buf + pos) + 1;
    }
    if (id != first + count)
        return dpro_reader_fail(r, DPRO_ERR_CORRUPT, "%s",
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
        return dpro_reader_fail(r, DPRO_ERR_NOT_TRACE, "no string_blocks table (%s)",
                           sqlite3_errmsg(r->db));
    if (sqlite3_step(st) == SQLITE_ROW) {
        max_id = sqlite3_column_int64(st, 0);
        nblocks = sqlite3_column_int64(st, 1);
    }
    sqlite3_finalize(st);
    if (max_id < 0 || max_id > (int64_t)UINT32_MAX - 1 || nblocks < 0 || nblocks > max_id + 1)
        return dpro_reader_fail(r, DPRO_ERR_CORRUPT, "%s", "string ids out of range");
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
            rc = dpro_grow((void **)&r->devices, &cap, r->ndevices, sizeof *r->devices);
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
            rc = dpro_grow((void **)&r->streams, &cap, r->nstreams, sizeof *r->streams);
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
            rc = dpro_grow((void **)&r->comms, &cap, r->ncomms, sizeof *r->comms);
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
            rc = dpro_grow((void **)&r->threads, &cap, r->nthreads, sizeof *r->threads);
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
            rc = dpro_grow((void **)&r->stacks, &cap, r->nstacks, sizeof *r->stacks);
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
        rc = dpro_reader_fail(r, DPRO_ERR_IO, "cannot open: %s", sqlite3_errmsg(r->db));
    if (rc == DPRO_OK) {
        sqlite3_busy_timeout(r->db, 2000);
        if (sqlite3_exec(r->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK)
            rc = dpro_reader_fail(r, DPRO_ERR_IO, "%s", sqlite3_errmsg(r->db));
    }
    if (rc == DPRO_OK)
        rc = load_meta(r);
    if (rc == DPRO_OK) {
        const char *major = dpro_reader_meta(r, "schema_major");
        if (!major)
            rc = dpro_reader_fail(r, DPRO_ERR_NOT_TRACE, "%s",
                             "not a dpro trace (no schema_major in meta)");
        else if (atoi(major) > DPRO_SCHEMA_MAJOR) {
            char msg[128];
            snprintf(msg, sizeof msg,
                     "written with trace schema %s.x; this dpro reads up to %d.x: upgrade dpro",
                     major, DPRO_SCHEMA_MAJOR);
            rc = dpro_reader_fail(r, DPRO_ERR_VERSION, "%s", msg);
        }
    }
    if (rc == DPRO_OK)
        rc = load_strings(r);
    if (rc == DPRO_OK)
        rc = load_tables(r);
    if (rc == DPRO_OK) {
        if (sqlite3_prepare_v2(r->db, "SELECT max(id) FROM batches", -1, &st, NULL) != SQLITE_OK)
            rc = dpro_reader_fail(r, DPRO_ERR_NOT_TRACE, "no batches table (%s)", sqlite3_errmsg(r->db));
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
        return dpro_reader_fail(r, DPRO_ERR_CORRUPT, "%s", sqlite3_errmsg(r->db));
    sqlite3_bind_int64(st, 1, r->max_batch_id);
    if (sqlite3_step(st) == SQLITE_ROW) {
        s->batches = (uint64_t)sqlite3_column_int64(st, 0);
        s->events = (uint64_t)sqlite3_column_int64(st, 1);
        s->first_ns = (uint64_t)sqlite3_column_int64(st, 2);
        s->last_ns = (uint64_t)sqlite3_column_int64(st, 3);
        s->event_bytes = (uint64_t)sqlite3_column_int64(st, 4);
        s->raw_bytes = (uint64_t)sqlite3_column_int64(st, 5);
    } else {
        rc = dpro_reader_fail(r, DPRO_ERR_CORRUPT, "%s", sqlite3_errmsg(r->db));
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
                rc = dpro_grow((void **)&list, &cap, n, sizeof *list);
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
            rc = dpro_grow((void **)&list, &cap, n, sizeof *list);
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
