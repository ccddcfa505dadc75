/*
 * reader_tables.c: what a reader loads when it opens a trace (meta, the interned strings,
 * devices, streams, communicators, threads, stacks), every size and id checked.
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

static char *
dup_col(sqlite3_stmt *st, int col)
{
    const unsigned char *t = sqlite3_column_text(st, col);
    return t ? strdup((const char *)t) : NULL;
}

int
reader_load_meta(dpro_reader *r)
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
        if (rc == DPRO_OK && sqlite3_column_type(st, 0) != SQLITE_TEXT) {
            rc = dpro_reader_fail(r, DPRO_ERR_CORRUPT, "%s", "table meta: a row with no text key");
        } else if (rc == DPRO_OK) {
            meta_entry *m = &r->meta[r->nmeta];
            m->key = dup_col(st, 0);
            m->value = dup_col(st, 1);
            if (!m->key || (!m->value && sqlite3_column_type(st, 1) != SQLITE_NULL)) {
                free(m->key);
                free(m->value);
                rc = DPRO_ERR_NOMEM;
            } else {
                r->nmeta++;
            }
        }
    }
    sqlite3_finalize(st);
    return rc;
}

/* Parses a schema version number: decimal digits only, at most 9 of them. Returns -1 for
 * anything else (a sign, blanks, letters, an empty text, an overflow). */
long
reader_parse_version(const char *s)
{
    long v = 0;
    size_t n = 0;
    for (; s[n]; n++) {
        if (s[n] < '0' || s[n] > '9' || n == 9)
            return -1;
        v = v * 10 + (s[n] - '0');
    }
    return n ? v : -1;
}

/* Inflates one string block (the next in id order: it must start at r->nstrings + 1) and
 * appends the ids it holds to r->strings (capacity *cap). Every size is checked against
 * what the block's bytes can hold before anything is allocated. */
static int
load_string_block(dpro_reader *r, size_t *cap, size_t *bufs_cap, int64_t first, int64_t count,
                  int64_t raw, const void *data, int len)
{
    int rc = DPRO_OK;
    uint8_t *buf;
    uLongf out;
    int64_t pos = 0, got = 0;
    char what[160];

    snprintf(what, sizeof what, "string block at id %lld (count %lld, raw_size %lld)",
             (long long)first, (long long)count, (long long)raw);
    if (first != (int64_t)r->nstrings + 1)
        return dpro_reader_fail(r, DPRO_ERR_CORRUPT, "%s: does not follow the previous block",
                                what);
    if (count < 1 || raw < count || raw > (int64_t)DPRO_BATCH_MAX_RAW || !data ||
        raw > (int64_t)len * 1032 + 64 || count > (int64_t)UINT32_MAX - 1 - r->nstrings)
        return dpro_reader_fail(r, DPRO_ERR_CORRUPT, "%s: impossible sizes", what);
    rc = dpro_grow((void **)&r->string_bufs, bufs_cap, r->nstring_bufs, sizeof *r->string_bufs);
    if (rc == DPRO_OK)
        rc = dpro_grow((void **)&r->strings, cap, (size_t)(first + count - 1), sizeof *r->strings);
    if (rc != DPRO_OK)
        return rc;
    buf = malloc((size_t)raw + 1);
    if (!buf)
        return DPRO_ERR_NOMEM;
    r->string_bufs[r->nstring_bufs++] = buf;
    out = (uLongf)raw + 1;
    if (uncompress(buf, &out, data, (uLong)len) != Z_OK || out != (uLongf)raw || buf[raw - 1] != 0)
        return dpro_reader_fail(r, DPRO_ERR_CORRUPT, "%s: does not inflate", what);
    for (; pos < raw && got < count; got++) {
        r->strings[first + got] = (char *)buf + pos;
        pos += (int64_t)strlen((char *)buf + pos) + 1;
    }
    if (got != count || pos != raw)
        return dpro_reader_fail(r, DPRO_ERR_CORRUPT, "%s: holds another number of strings", what);
    r->nstrings = (uint32_t)(first + count - 1);
    return DPRO_OK;
}

/* Loads the string blocks in id order. In a file cut short, a block on a missing page ends
 * the strings there (batches naming later ids are then refused as damaged). */
int
reader_load_strings(dpro_reader *r)
{
    int rc = DPRO_OK, step;
    sqlite3_stmt *st = NULL;
    size_t cap = 1, bufs_cap = 0;

    r->strings = calloc(1, sizeof *r->strings); /* id 0: no string */
    if (!r->strings)
        return DPRO_ERR_NOMEM;
    if (sqlite3_prepare_v2(r->db,
                           "SELECT first_id, count, raw_size, data FROM string_blocks "
                           "ORDER BY first_id",
                           -1, &st, NULL) != SQLITE_OK)
        return dpro_reader_fail(r, DPRO_ERR_NOT_TRACE, "no string_blocks table (%s)",
                                sqlite3_errmsg(r->db));
    while (rc == DPRO_OK && (step = sqlite3_step(st)) == SQLITE_ROW)
        rc = load_string_block(r, &cap, &bufs_cap, sqlite3_column_int64(st, 0),
                               sqlite3_column_int64(st, 1), sqlite3_column_int64(st, 2),
                               sqlite3_column_blob(st, 3), sqlite3_column_bytes(st, 3));
    if (rc == DPRO_OK && step != SQLITE_DONE) {
        if (r->cut)
            dpro_reader_warn(r, "strings after id %u are on missing pages", r->nstrings);
        else
            rc = dpro_reader_fail(r, DPRO_ERR_CORRUPT, "table string_blocks: %s",
                                  sqlite3_errmsg(r->db));
    }
    sqlite3_finalize(st);
    return rc;
}

/* Loads the small tables; a missing table is empty (the writer creates these tables with
 * their first row, and an older minor version may lack one). */
int
reader_load_tables(dpro_reader *r)
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

/* Cuts *arr, n elements of sz bytes with room for more, to n (unchanged if n is 0 or
 * realloc fails). */
static void
fit(void **arr, size_t n, size_t sz)
{
    void *p = n > 0 && *arr ? realloc(*arr, n * sz) : NULL;
    if (p)
        *arr = p;
}

void
reader_fit_tables(dpro_reader *r)
{
    fit((void **)&r->meta, r->nmeta, sizeof *r->meta);
    if (!r->strings_refs) { /* shared ones stay where the other readers point */
        fit((void **)&r->strings, (size_t)r->nstrings + 1, sizeof *r->strings); /* [0] unused */
        fit((void **)&r->string_bufs, r->nstring_bufs, sizeof *r->string_bufs);
    }
    fit((void **)&r->devices, r->ndevices, sizeof *r->devices);
    fit((void **)&r->streams, r->nstreams, sizeof *r->streams);
    fit((void **)&r->comms, r->ncomms, sizeof *r->comms);
    fit((void **)&r->threads, r->nthreads, sizeof *r->threads);
    fit((void **)&r->stacks, r->nstacks, sizeof *r->stacks);
}
