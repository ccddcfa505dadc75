/*
 * reader.c: the trace reader (see dprotrace.h): what an open reader answers (meta, strings,
 * the small tables, the summary), its messages, and the listing of trace files. Opening
 * and closing are in reader_open.c, the loading of the tables in reader_tables.c.
 *
 * Opening reads meta, strings and the small tables inside one read transaction, and
 * remembers the last batch id then present, so that a writer appending concurrently never
 * shows the reader a batch whose strings it has not loaded. A file a writer is creating or
 * changing under an immutable read is retried for up to a second, then "being written".
 * Events are read by an iterator that decodes batches lazily and merges them by start
 * time.
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
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

static char empty_string[] = "";

void
dpro_reader_warn(dpro_reader *r, const char *fmt, ...)
{
    va_list ap;
    size_t old = r->warnings ? strlen(r->warnings) : 0;
    size_t room = strlen(r->path) + 512;
    char *w = realloc(r->warnings, old + room);
    if (!w)
        return;
    r->warnings = w;
    int n = snprintf(w + old, room, "%s: ", r->path);
    va_start(ap, fmt);
    vsnprintf(w + old + (size_t)n, room - (size_t)n - 1, fmt, ap);
    va_end(ap);
    strcat(w + old, "\n");
}

const char *
dpro_reader_warnings(const dpro_reader *r)
{
    return r && r->warnings ? r->warnings : "";
}

int
dpro_reader_ended_early(const dpro_reader *r)
{
    return r ? r->ended_early : 0;
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
    if (!r->errmsg)
        r->errmsg = malloc(DPRO_ERRBUF_SIZE);
    r->errmsg_nomem = !r->errmsg;
    if (r->errmsg) {
        snprintf(r->errmsg, DPRO_ERRBUF_SIZE, "%s: ", r->path);
        size_t n = strlen(r->errmsg);
        snprintf(r->errmsg + n, DPRO_ERRBUF_SIZE - n, fmt, detail);
    }
    return rc;
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

/* Finds the first batch row whose plain columns are impossible (a count over
 * DPRO_BATCH_MAX_EVENTS or under 1, sizes out of range, times that are not non-negative
 * integers); DPRO_ERR_CORRUPT naming it. Whether first_ns and last_ns are the batch's is
 * checked when it is decoded. */
static int
check_batch_rows(dpro_reader *r)
{
    int rc = DPRO_OK;
    sqlite3_stmt *st = NULL;
    char msg[256];

    if (sqlite3_prepare_v2(
            r->db,
            "SELECT id, count, raw_size, first_ns, last_ns FROM batches WHERE id <= ?1 "
            "AND NOT (typeof(count) = 'integer' AND count BETWEEN 1 AND ?2 AND "
            "typeof(raw_size) = 'integer' AND raw_size BETWEEN 1 AND ?3 AND "
            "typeof(first_ns) = 'integer' AND typeof(last_ns) = 'integer' AND "
            "first_ns >= 0 AND last_ns >= 0) LIMIT 1",
            -1, &st, NULL) != SQLITE_OK)
        return dpro_reader_fail(r, DPRO_ERR_CORRUPT, "table batches: %s", sqlite3_errmsg(r->db));
    sqlite3_bind_int64(st, 1, r->max_batch_id);
    sqlite3_bind_int64(st, 2, DPRO_BATCH_MAX_EVENTS);
    sqlite3_bind_int64(st, 3, DPRO_BATCH_MAX_RAW);
    if (sqlite3_step(st) == SQLITE_ROW) {
        snprintf(msg, sizeof msg,
                 "batch %lld: impossible row (count %lld, raw_size %lld, first_ns %lld, "
                 "last_ns %lld)",
                 (long long)sqlite3_column_int64(st, 0), (long long)sqlite3_column_int64(st, 1),
                 (long long)sqlite3_column_int64(st, 2), (long long)sqlite3_column_int64(st, 3),
                 (long long)sqlite3_column_int64(st, 4));
        rc = dpro_reader_fail(r, DPRO_ERR_CORRUPT, "%s", msg);
    }
    sqlite3_finalize(st);
    return rc;
}

/* The size of version 2.0's dpro_trace_summary, the smallest a caller may have. */
#define SUMMARY_SIZE_MIN (offsetof(dpro_trace_summary, file_bytes) + sizeof(uint64_t))

int
dpro_reader_summary_sized(dpro_reader *r, dpro_trace_summary *user_s, size_t s_size)
{
    int rc = DPRO_OK;
    sqlite3_stmt *st = NULL;
    size_t n;
    char *side;
    dpro_trace_summary sum, *s = &sum;

    if (!r || !user_s || s_size < SUMMARY_SIZE_MIN)
        return DPRO_ERR_ARG;
    if (!r->db)
        return dpro_reader_fail(r, DPRO_ERR_ARG, "%s", "detached: the file is closed");
    memset(s, 0, sizeof *s);
    rc = check_batch_rows(r);
    if (rc == DPRO_OK &&
        sqlite3_prepare_v2(r->db,
                           "SELECT count(*), sum(count), min(first_ns), max(last_ns), "
                           "sum(length(data)), sum(raw_size) FROM batches WHERE id <= ?",
                           -1, &st, NULL) != SQLITE_OK)
        rc = dpro_reader_fail(r, DPRO_ERR_CORRUPT, "%s", sqlite3_errmsg(r->db));
    sqlite3_bind_int64(st, 1, r->max_batch_id);
    if (rc != DPRO_OK) {
        /* told above */
    } else if (sqlite3_step(st) == SQLITE_ROW) {
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
    n = strlen(r->path) + 8;
    side = malloc(n);
    if (side) {
        snprintf(side, n, "%s-wal", r->path);
        s->file_bytes = file_size(r->path) + file_size(side);
        free(side);
    }
    if (rc == DPRO_OK) {
        memset(user_s, 0, s_size);
        memcpy(user_s, s, s_size < sizeof *s ? s_size : sizeof *s);
    }
    return rc;
}

const char *
dpro_reader_errmsg(const dpro_reader *r)
{
    const char *m = "";
    if (r && r->errmsg)
        m = r->errmsg;
    else if (r && r->errmsg_nomem)
        m = "out of memory";
    return m;
}

/* ---- directories -------------------------------------------------------------------------- */

static int
has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

/* Whether name is a file SQLite keeps beside a trace (NAME.dpro-wal, -shm, -journal). */
static int
sqlite_side_file(const char *name)
{
    static const char *const sides[] = {DPRO_TRACE_SUFFIX "-wal", DPRO_TRACE_SUFFIX "-shm",
                                        DPRO_TRACE_SUFFIX "-journal"};
    for (size_t i = 0; i < sizeof sides / sizeof sides[0]; i++)
        if (has_suffix(name, sides[i]))
            return 1;
    return 0;
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
        } else if (sqlite_side_file(paths[i])) {
            continue; /* rank0.dpro-wal from a shell's rank* */
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
