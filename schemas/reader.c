/*
 * reader.c: the trace reader (see dprotrace.h).
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
static long
parse_version(const char *s)
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
static int
load_strings(dpro_reader *r)
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

/* How long a reader waits for a file being created to get its schema, and how often it
 * looks. A writer writes the schema right after creating the file: a few milliseconds. */
#define BUSY_WAIT_MS 1000
#define BUSY_POLL_MS 50

/* What the file and its surroundings say before SQLite opens it. */
typedef struct file_probe {
    int wal;             /* a -wal lies beside it */
    int journal;         /* a -journal lies beside it (a rollback transaction under way) */
    int wal_format;      /* its header says WAL mode (the writer's first step) */
    uint64_t size;       /* bytes */
    uint64_t pages_said; /* pages, as the header says (0: not known) */
    uint32_t page_size;
    struct stat st; /* the file's identity and times, to see it change under a read */
} file_probe;

/* Whether a file SUFFIX lies beside file. */
static int
side_exists(const char *file, const char *suffix)
{
    size_t n = strlen(file) + strlen(suffix) + 1;
    char *side = malloc(n);
    int there = 0;
    if (side) {
        snprintf(side, n, "%s%s", file, suffix);
        there = access(side, F_OK) == 0;
        free(side);
    }
    return there;
}

static uint32_t
be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Looks at the file (its resolved name) and its SQLite header: DPRO_ERR_BUSY for an empty
 * file, DPRO_ERR_NOT_TRACE for no SQLite database; sets r->cut for a file shorter than its
 * header says. */
static int
probe_file(dpro_reader *r, const char *file, file_probe *p)
{
    int rc = DPRO_OK, fd;
    unsigned char h[100];

    memset(p, 0, sizeof *p);
    p->wal = side_exists(file, "-wal");
    p->journal = side_exists(file, "-journal");
    if (stat(file, &p->st) != 0)
        return dpro_reader_fail(r, DPRO_ERR_IO, "%s", strerror(errno));
    if (!S_ISREG(p->st.st_mode))
        return dpro_reader_fail(r, DPRO_ERR_NOT_TRACE, "%s", "not a regular file");
    p->size = (uint64_t)p->st.st_size;
    if (p->size == 0)
        return dpro_reader_fail(r, DPRO_ERR_BUSY, "%s", "being written: the file is empty");
    fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return dpro_reader_fail(r, DPRO_ERR_IO, "%s", strerror(errno));
    if (pread(fd, h, sizeof h, 0) != (ssize_t)sizeof h || memcmp(h, "SQLite format 3", 16) != 0)
        rc = dpro_reader_fail(r, DPRO_ERR_NOT_TRACE, "%s", "not a dpro trace (no SQLite header)");
    close(fd);
    if (rc == DPRO_OK) {
        p->page_size = (uint32_t)h[16] << 8 | h[17];
        if (p->page_size == 1)
            p->page_size = 65536;
        /* the page count is valid when its "valid for" matches the change counter */
        if (be32(h + 92) == be32(h + 24))
            p->pages_said = be32(h + 28);
        p->wal_format = h[18] == 2 && h[19] == 2;
        r->cut = !p->wal && p->pages_said && p->pages_said * p->page_size > p->size;
    }
    return rc;
}

/* Checks meta's schema version: a number, and not newer than ours. */
static int
check_version(dpro_reader *r, int wal)
{
    const char *major = dpro_reader_meta(r, "schema_major");
    const char *minor = dpro_reader_meta(r, "schema_minor");
    long m = major ? parse_version(major) : 0;
    char msg[160];

    if (!major && wal)
        return dpro_reader_fail(r, DPRO_ERR_BUSY, "%s", "being written: no schema_major yet");
    if (!major)
        return dpro_reader_fail(r, DPRO_ERR_NOT_TRACE, "%s",
                                "not a dpro trace (no schema_major in meta)");
    if (m < 1 || (minor && parse_version(minor) < 0)) {
        snprintf(msg, sizeof msg,
                 "meta schema_major/schema_minor \"%.24s\"/\"%.24s\" is not a version", major,
                 minor ? minor : "");
        return dpro_reader_fail(r, DPRO_ERR_CORRUPT, "%s", msg);
    }
    if (m > DPRO_SCHEMA_MAJOR) {
        snprintf(msg, sizeof msg,
                 "written with trace schema %ld.x; this dpro reads up to %d.x: upgrade dpro", m,
                 DPRO_SCHEMA_MAJOR);
        return dpro_reader_fail(r, DPRO_ERR_VERSION, "%s", msg);
    }
    return DPRO_OK;
}

/* Undoes open_db, for another try. */
static void
close_db(dpro_reader *r)
{
    sqlite3_close(r->db);
    r->db = NULL;
    for (size_t i = 0; i < r->nmeta; i++) {
        free(r->meta[i].key);
        free(r->meta[i].value);
    }
    free(r->meta);
    r->meta = NULL;
    r->nmeta = 0;
}

/* Whether the database has no table at all (a file a writer has only begun). */
static int
schema_empty(sqlite3 *db)
{
    sqlite3_stmt *st = NULL;
    int empty =
        sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_master", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int64(st, 0) == 0;
    sqlite3_finalize(st);
    return empty;
}

/* Opens the database read-only (immutable: without looking at a -wal) and loads meta.
 * DPRO_ERR_BUSY: not yet a trace, but a writer is creating it. */
static int
open_sqlite(dpro_reader *r, const dpro_db_path *dbp, const file_probe *p, int immutable)
{
    int rc = DPRO_OK;
    char *uri = dpro_sqlite_uri(dbp->sqlite_name, immutable ? "mode=ro&immutable=1" : "mode=ro");

    if (!uri)
        rc = DPRO_ERR_NOMEM;
    if (rc == DPRO_OK &&
        sqlite3_open_v2(uri, &r->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, dbp->vfs) != SQLITE_OK)
        rc = dpro_reader_fail(r, DPRO_ERR_IO, "cannot open: %s", sqlite3_errmsg(r->db));
    free(uri);
    if (rc == DPRO_OK) {
        sqlite3_busy_timeout(r->db, 2000);
        /* a file cut short: SQLite then reads the pages there are instead of refusing all */
        if (r->cut)
            sqlite3_exec(r->db, "PRAGMA writable_schema = ON", NULL, NULL, NULL);
        if (sqlite3_exec(r->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK)
            rc = dpro_reader_fail(r, DPRO_ERR_IO, "%s", sqlite3_errmsg(r->db));
    }
    if (rc == DPRO_OK) {
        rc = load_meta(r);
        /* the schema is not there yet: a writer's -wal lies beside it, or the writer has
         * just switched the new file to WAL mode (its header) and not yet made the -wal */
        if (rc == DPRO_ERR_NOT_TRACE && (p->wal || (p->wal_format && schema_empty(r->db))))
            rc = dpro_reader_fail(r, DPRO_ERR_BUSY, "%s", "being written: no schema yet");
    }
    if (rc == DPRO_OK)
        rc = check_version(r, p->wal);
    return rc;
}

/* Opens the database writing nothing: immutable where no -wal lies beside it (a running
 * writer has one from the moment its schema exists; a read through SQLite's locks of a
 * WAL-mode file would make one, and a -shm, and leave them); with a -wal, through it, or
 * where that cannot be (read-only media: SQLite needs a -shm to read a -wal) from the file
 * alone, which holds every batch flushed before the last checkpoint. An immutable read of
 * a trace not marked whole is then checked (check_unchanged). */
static int
open_db(dpro_reader *r, const dpro_db_path *dbp, file_probe *p)
{
    int rc = probe_file(r, dbp->file, p), e;

    if (rc == DPRO_OK) {
        r->immutable = !p->wal;
        rc = open_sqlite(r, dbp, p, r->immutable);
    }
    if (rc == DPRO_ERR_IO && p->wal && r->db &&
        ((e = sqlite3_errcode(r->db)) == SQLITE_CANTOPEN || e == SQLITE_READONLY)) {
        close_db(r);
        r->wal_unread = 1;
        r->immutable = 1;
        rc = open_sqlite(r, dbp, p, 1);
    }
    return rc;
}

/* Whether meta marks the trace whole: `complete` (schema 2.1 on), the collector's end
 * anchors before that; traces of older layouts carry no mark and count as whole. */
static int
marked_whole(const dpro_reader *r)
{
    long major = parse_version(dpro_reader_meta(r, "schema_major"));
    const char *minor = dpro_reader_meta(r, "schema_minor");
    const char *source = dpro_reader_meta(r, DPRO_META_SOURCE);

    if (major > 2 || (major == 2 && minor && parse_version(minor) >= 1))
        return dpro_reader_meta(r, DPRO_META_COMPLETE) != NULL;
    if (source && !strcmp(source, "collector"))
        return dpro_reader_meta(r, "anchor_end_monotonic_ns") != NULL;
    return 1;
}

/* An immutable read (no locks, no -wal looked at) is sound only for a file nobody writes:
 * a whole trace, or a trace whose writer is gone (killed; copied away without its -wal).
 * A trace not marked whole may still have a writer (one that has just created it, or
 * one whose -wal could not be read here): its read stands only if the file is the same
 * after it as before (size, times, inode) with no -wal or -journal come meanwhile;
 * otherwise DPRO_ERR_BUSY, "being written". */
static int
check_unchanged(dpro_reader *r, const char *file, const file_probe *before)
{
    struct stat now;
    int same;
    if (!r->immutable || marked_whole(r))
        return DPRO_OK;
    same = stat(file, &now) == 0 && side_exists(file, "-wal") == before->wal &&
           !side_exists(file, "-journal") && !before->journal && now.st_ino == before->st.st_ino &&
           now.st_size == before->st.st_size && now.st_mtim.tv_sec == before->st.st_mtim.tv_sec &&
           now.st_mtim.tv_nsec == before->st.st_mtim.tv_nsec &&
           now.st_ctim.tv_sec == before->st.st_ctim.tv_sec &&
           now.st_ctim.tv_nsec == before->st.st_ctim.tv_nsec;
    if (same)
        return DPRO_OK;
    return dpro_reader_fail(r, DPRO_ERR_BUSY, "%s",
                            "being written: the file changed while it was read");
}

/* Decides dpro_reader_ended_early and tells why. */
static void
judge_end(dpro_reader *r, const file_probe *p)
{
    if (r->cut) {
        r->ended_early = 1;
        dpro_reader_warn(r,
                         "cut short: %llu bytes where its header says %llu pages of %u: the "
                         "trace ends early; the intact batches are read",
                         (unsigned long long)p->size, (unsigned long long)p->pages_said,
                         p->page_size);
    } else {
        r->ended_early = !marked_whole(r);
    }
    if (r->wal_unread)
        dpro_reader_warn(r, "a -wal lies beside it but cannot be read here (read-only): what "
                            "its writer flushed after the last checkpoint is not read");
    else if (p->wal)
        dpro_reader_warn(r, "a -wal lies beside it: its writer is running or was killed (the "
                            ".dpro alone holds what was flushed before)");
    else if (r->ended_early && !r->cut)
        dpro_reader_warn(r, "its writer did not close it (killed, or the disk filled up): the "
                            "trace ends early");
}

/* One attempt of dpro_reader_open; DPRO_ERR_BUSY: a writer is creating or changing the
 * file (another attempt may succeed). */
static int
reader_open_once(const char *path, dpro_reader **out, char *errbuf, size_t errlen)
{
    int rc = DPRO_OK;
    dpro_reader *r = NULL;
    dpro_db_path dbp = {NULL, NULL, NULL, -1};
    file_probe probe;
    sqlite3_stmt *st = NULL;

    *out = NULL;
    rc = dpro_path_resolve(path, &dbp, errbuf, errlen);
    if (rc != DPRO_OK)
        return rc;
    r = calloc(1, sizeof *r);
    if (!r || !(r->path = strdup(path))) {
        free(r);
        dpro_path_free(&dbp);
        dpro_set_err(errbuf, errlen, "%s: out of memory", path);
        return DPRO_ERR_NOMEM;
    }
    r->dirfd = dbp.dirfd; /* SQLite may need the directory for as long as the reader lives */
    dbp.dirfd = -1;
    rc = open_db(r, &dbp, &probe);
    if (rc == DPRO_OK)
        rc = load_strings(r);
    if (rc == DPRO_OK)
        rc = load_tables(r);
    if (rc == DPRO_OK) {
        if (sqlite3_prepare_v2(r->db, "SELECT max(id) FROM batches", -1, &st, NULL) != SQLITE_OK)
            rc = dpro_reader_fail(r, DPRO_ERR_NOT_TRACE, "no batches table (%s)",
                                  sqlite3_errmsg(r->db));
        else if (sqlite3_step(st) == SQLITE_ROW)
            r->max_batch_id = sqlite3_column_int64(st, 0);
        else /* cut short: the iterator finds what there is */
            r->max_batch_id = INT64_MAX;
        sqlite3_finalize(st);
    }
    if (r->db)
        sqlite3_exec(r->db, "COMMIT", NULL, NULL, NULL);
    if (rc == DPRO_OK)
        rc = check_unchanged(r, dbp.file, &probe);
    if (rc == DPRO_OK)
        judge_end(r, &probe);
    dpro_path_free(&dbp);
    if (rc != DPRO_OK) {
        if (rc == DPRO_ERR_NOMEM && !r->errmsg[0])
            dpro_reader_fail(r, rc, "%s", "out of memory");
        dpro_set_err(errbuf, errlen, "%s", r->errmsg[0] ? r->errmsg : dpro_status_str(rc));
        dpro_reader_close(r);
        return rc;
    }
    *out = r;
    return rc;
}

int
dpro_reader_open(const char *path, dpro_reader **out, char *errbuf, size_t errlen)
{
    int rc;

    *out = NULL;
    if (!path)
        return DPRO_ERR_ARG;
    for (int waited = 0;; waited += BUSY_POLL_MS) {
        rc = reader_open_once(path, out, errbuf, errlen);
        if (rc != DPRO_ERR_BUSY || waited >= BUSY_WAIT_MS)
            break;
        struct timespec ts = {0, BUSY_POLL_MS * 1000000L};
        nanosleep(&ts, NULL);
    }
    return rc;
}

/* How long a closing reader tries to take a finished trace out of WAL mode while another
 * connection (the writer finishing its close, another reader) holds it, and how often. */
#define FOLD_WAIT_MS 20
#define FOLD_POLL_MS 2

/* Whether the trace db has open is now marked complete (a read of its latest commit). */
static int
complete_now(sqlite3 *db)
{
    sqlite3_stmt *st = NULL;
    int complete =
        sqlite3_prepare_v2(db, "SELECT 1 FROM meta WHERE key = ?", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_bind_text(st, 1, DPRO_META_COMPLETE, -1, SQLITE_STATIC) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    return complete;
}

/* Folds the -wal of a trace its writer has closed back into the file and takes the file out
 * of WAL mode (name and vfs as SQLite opened it). A writer's close does that only when no
 * reader holds the trace: SQLite removes a -wal and -shm only in the last connection to
 * close, and only in one that may write; a read-only reader closing last leaves them. So a
 * reader that read a trace through its -wal does it at its close, in a connection of its
 * own, once the trace is marked complete (never for a trace a writer may still add to, or
 * one whose writer was killed). A connection still holding the trace makes it fail; then
 * that one, closing later, does it. Failures (read-only media, a directory the reader cannot write)
 * are harmless: the trace reads as before. */
static void
fold_finished_wal(const char *name, const char *vfs)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    int complete = 0;

    if (sqlite3_open_v2(name, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW, vfs) ==
        SQLITE_OK) {
        sqlite3_busy_timeout(db, FOLD_WAIT_MS);
        complete = complete_now(db); /* still the trace the reader read */
    }
    /* the switch to DELETE checkpoints and removes the -wal, but needs the only lock on the
     * file: SQLite's busy handler does not wait for it, so this loop does */
    for (int waited = 0; complete && waited < FOLD_WAIT_MS; waited += FOLD_POLL_MS) {
        int done =
            sqlite3_prepare_v2(db, "PRAGMA journal_mode = DELETE", -1, &st, NULL) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW &&
            !sqlite3_stricmp((const char *)sqlite3_column_text(st, 0), "delete");
        sqlite3_finalize(st);
        if (done)
            break;
        struct timespec ts = {0, FOLD_POLL_MS * 1000000L};
        nanosleep(&ts, NULL);
    }
    /* the last connection to close removes a -wal and -shm still there: only for a trace
     * marked complete (a killed writer's -wal stays, as it was, for its readers to name) */
    if (db && !complete)
        sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
    sqlite3_close(db);
}

void
dpro_reader_close(dpro_reader *r)
{
    char *fold = NULL, *fold_vfs = NULL;
    sqlite3_vfs *vfs = NULL;

    if (!r)
        return;
    /* read through a -wal: the trace may need folding once this connection is gone (the
     * writer may mark it complete and fail to fold it while this one still holds it) */
    if (r->db && !r->immutable) {
        const char *name = sqlite3_db_filename(r->db, "main");
        fold = name ? strdup(name) : NULL;
        if (sqlite3_file_control(r->db, "main", SQLITE_FCNTL_VFS_POINTER, &vfs) == SQLITE_OK &&
            vfs && vfs->zName)
            fold_vfs = strdup(vfs->zName);
    }
    sqlite3_close(r->db);
    if (fold && side_exists(fold, "-wal"))
        fold_finished_wal(fold, fold_vfs);
    free(fold);
    free(fold_vfs);
    if (r->dirfd >= 0)
        close(r->dirfd);
    free(r->warnings);
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
    return r ? r->errmsg : "";
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
