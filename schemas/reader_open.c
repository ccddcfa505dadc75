/*
 * reader_open.c: dpro_reader_open and dpro_reader_close: the file probed before SQLite
 * opens it (a -wal or -journal beside it, its header, a file being created), the version
 * checked, the tables loaded in one read transaction, a file that changed under an
 * immutable read retried, and whether the trace ended early.
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

/* Checks meta's schema version: a number, and not newer than ours; a file cut short
 * before its meta (p: what its header says) is named so, not taken for another file. */
static int
check_version(dpro_reader *r, const file_probe *p)
{
    int wal = p->wal;
    const char *major = dpro_reader_meta(r, "schema_major");
    const char *minor = dpro_reader_meta(r, "schema_minor");
    long m = major ? reader_parse_version(major) : 0;
    char msg[160];

    if (!major && wal)
        return dpro_reader_fail(r, DPRO_ERR_BUSY, "%s", "being written: no schema_major yet");
    if (!major && r->cut) {
        snprintf(msg, sizeof msg,
                 "cut short: %llu bytes where its header says %llu pages of %u; its meta "
                 "(the schema version) lay in the part lost: nothing to read",
                 (unsigned long long)p->size, (unsigned long long)p->pages_said, p->page_size);
        return dpro_reader_fail(r, DPRO_ERR_CORRUPT, "%s", msg);
    }
    if (!major)
        return dpro_reader_fail(r, DPRO_ERR_NOT_TRACE, "%s",
                                "not a dpro trace (no schema_major in meta)");
    if (m < 1 || (minor && reader_parse_version(minor) < 0)) {
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
        rc = reader_load_meta(r);
        /* the schema is not there yet: a writer's -wal lies beside it, or the writer has
         * just switched the new file to WAL mode (its header) and not yet made the -wal */
        if (rc == DPRO_ERR_NOT_TRACE && (p->wal || (p->wal_format && schema_empty(r->db))))
            rc = dpro_reader_fail(r, DPRO_ERR_BUSY, "%s", "being written: no schema yet");
    }
    if (rc == DPRO_OK)
        rc = check_version(r, p);
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
    long major = reader_parse_version(dpro_reader_meta(r, "schema_major"));
    const char *minor = dpro_reader_meta(r, "schema_minor");
    const char *source = dpro_reader_meta(r, DPRO_META_SOURCE);

    if (major > 2 || (major == 2 && minor && reader_parse_version(minor) >= 1))
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
        rc = reader_load_strings(r);
    if (rc == DPRO_OK)
        rc = reader_load_tables(r);
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
        if (rc == DPRO_ERR_NOMEM && !r->errmsg)
            dpro_reader_fail(r, rc, "%s", "out of memory");
        dpro_set_err(errbuf, errlen, "%s", r->errmsg ? r->errmsg : dpro_status_str(rc));
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
 * connection (the writer finishing its close, another reader) holds it, and how often; how
 * often it tries again to take the write lock to look at the trace while a writer holds it
 * (each try waits up to FOLD_WAIT_MS). */
#define FOLD_WAIT_MS 20
#define FOLD_POLL_MS 2
#define FOLD_LOOKS 25

void (*dpro_fold_test_hook)(const char *name, int complete);

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
 * one whose writer was killed: that connection closes leaving the -wal as it is).
 *
 * It looks holding the write lock, until its close when the trace is not complete: a
 * writer cannot mark the trace complete, and give up folding it because this connection
 * holds it, between the look and the close (its commit waits for the lock, and folds once
 * this connection is gone). A trace seen complete is folded here, or, when another
 * connection holds it, by that connection's close (the writer's; a reader's, which does
 * this in turn): the last connection that may write checkpoints and removes the -wal as it
 * closes. Returns 1 when the write lock could not be had (a writer holds it: look again),
 * else 0. Failures (read-only media, a directory the reader cannot write) are harmless:
 * the trace reads as before. */
static int
fold_finished_wal(const char *name, const char *vfs)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    int complete = 0, busy = 0;

    if (sqlite3_open_v2(name, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW, vfs) ==
        SQLITE_OK) {
        sqlite3_busy_timeout(db, FOLD_WAIT_MS);
        int lk = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
        busy = lk == SQLITE_BUSY;
        complete = lk == SQLITE_OK && complete_now(db); /* still the trace the reader read */
    }
    if (dpro_fold_test_hook && db)
        dpro_fold_test_hook(name, complete);
    if (complete)
        sqlite3_exec(db, "COMMIT", NULL, NULL, NULL); /* complete stays: the lock may go */
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
     * marked complete (a killed writer's -wal stays, as it was, for its readers to name);
     * the close of one not complete ends its look and lets the write lock go */
    if (db && !complete)
        sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
    sqlite3_close(db);
    return busy;
}

/* Closes r's file: the SQLite connection (folding a finished trace's -wal, as a close
 * does) and the directory descriptor; the tables read at the open stay. */
static void
close_file(dpro_reader *r)
{
    char *fold = NULL, *fold_vfs = NULL;
    sqlite3_vfs *vfs = NULL;

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
    /* again while a writer holds the write lock (a look needs it) */
    for (int k = 0; fold && k < FOLD_LOOKS && side_exists(fold, "-wal"); k++)
        if (!fold_finished_wal(fold, fold_vfs))
            break;
    free(fold);
    free(fold_vfs);
    r->db = NULL;
    if (r->dirfd >= 0)
        close(r->dirfd);
    r->dirfd = -1;
}

void
dpro_reader_detach(dpro_reader *r)
{
    if (r) {
        close_file(r);
        reader_fit_tables(r); /* held long: no room for rows that will not come */
    }
}

void
dpro_reader_close(dpro_reader *r)
{
    if (!r)
        return;
    close_file(r);
    free(r->warnings);
    free(r->api_class);
    for (size_t i = 0; i < r->nmeta; i++) {
        free(r->meta[i].key);
        free(r->meta[i].value);
    }
    free(r->meta);
    if (!r->strings_refs || __atomic_sub_fetch(r->strings_refs, 1, __ATOMIC_ACQ_REL) == 0) {
        for (size_t i = 0; i < r->nstring_bufs; i++)
            free(r->string_bufs[i]);
        free(r->string_bufs);
        free(r->strings);
        free(r->strings_refs);
    }
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
    free(r->errmsg);
    free(r);
}
