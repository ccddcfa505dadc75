/*
 * writer.c: the trace writer (see dprotrace.h).
 *
 * Events collect in an array until a batch is full; a flush encodes them (codec.c),
 * inserts the batch and the strings interned since the last flush in one transaction.
 * Interned strings live in an open-addressing hash table over one growing text arena.
 */
#include "dprotrace.h"
#include "trace_internal.h"
#include "fnv1a.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_BATCH_EVENTS 16384u
#define DEFAULT_PAGE_SIZE 1024u
/* String blocks are small: compressed well, whatever level the batches get. */
#define STRINGS_ZLIB_LEVEL 6

/* In trace.sql, the tables after this line are created on first use (create_table). */
#define ON_FIRST_USE_MARK "-- @on-first-use"

/* How long dpro_writer_close retries leaving WAL mode while a reader holds the file, and
 * how often. */
#define CLOSE_WAIT_MS 60
#define CLOSE_POLL_MS 2

/* How long a commit waits for the write lock: a closing reader holds it while it looks
 * whether the trace is complete (reader_open.c fold_finished_wal), microseconds unless the
 * reader is descheduled. */
#define WRITE_LOCK_WAIT_MS 10000

/* The tables created on first use, as bits of dpro_writer.tables_made. */
enum {
    TABLE_DEVICES = 1 << 0,
    TABLE_THREADS = 1 << 1,
    TABLE_STREAMS = 1 << 2,
    TABLE_COMMUNICATORS = 1 << 3,
    TABLE_STACKS = 1 << 4,
    TABLE_DROPS = 1 << 5,
};

typedef struct intern_slot {
    uint64_t hash;
    uint32_t id; /* 0: empty */
    uint32_t len;
    size_t offset; /* into the arena */
} intern_slot;

struct dpro_writer {
    sqlite3 *db;
    char *path;
    int dirfd;         /* the directory, when SQLite has it as /proc/self/fd/N/NAME; else -1 */
    int sync_at_close; /* dpro_writer_options.sync_at_close */
    int private_file;  /* dpro_writer_options.private_until_close */
    sqlite3_stmt *ins_batch, *ins_string, *ins_meta;
    dpro_codec *codec;
    dpro_deflater *strings_z; /* compresses string blocks; made on the first one */
    dpro_event *events;
    uint32_t nevents, cap_events;
    int slot_out;       /* dpro_writer_next_event handed out events[nevents], not kept yet */
    size_t event_bytes; /* sizeof(dpro_event), read at run time: see dpro_writer_next_event */
    int zlib_level;
    unsigned tables_made; /* TABLE_* bits: tables of the on-first-use part created */
    char *lazy_sql;       /* the on-first-use part of the schema (sql_compact'ed) */
    /* interning */
    intern_slot *slots;
    size_t nslots, nstrings;
    char *arena;
    size_t arena_len, arena_cap;
    uint32_t first_unsaved_id; /* strings with id >= this are not in the database yet */
    size_t *offset_of_id;      /* id -> arena offset (id 1 at index 1) */
    size_t ids_cap;
    /* statistics */
    uint64_t total_events, total_batches, total_bytes;
    char errmsg[DPRO_ERRBUF_SIZE];
};

static int
writer_fail(dpro_writer *w, int rc, const char *what)
{
    snprintf(w->errmsg, sizeof w->errmsg, "%s: %s: %s", w->path, what,
             w->db ? sqlite3_errmsg(w->db) : dpro_status_str(rc));
    return rc;
}

static uint64_t
hash_bytes(const char *s, size_t len)
{
    uint64_t h = dpro_fnv1a(s, len, DPRO_FNV1A_INIT);
    return h ? h : 1;
}

/* Removes the file `file` (a regular file or a symlink, not what it points to) and the
 * files SQLite keeps beside it. */
static void
remove_old(const char *file)
{
    static const char *const sides[] = {"-wal", "-shm", "-journal"};
    size_t n = strlen(file);
    char *side = malloc(n + 16);
    struct stat st;

    if (lstat(file, &st) == 0 && (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)))
        unlink(file);
    for (size_t i = 0; side && i < sizeof sides / sizeof sides[0]; i++) {
        snprintf(side, n + 16, "%s%s", file, sides[i]);
        unlink(side);
    }
    free(side);
}

/* Creates the file (path: the caller's name, for messages; file: its resolved name) with
 * the mode asked; never follows a symlink at the file, never takes an existing file
 * unless o->replace. */
static int
create_file(const char *path, const char *file, const dpro_writer_options *o, char *errbuf,
            size_t errlen)
{
    int fd, rc = DPRO_OK;
    mode_t mode = o->file_mode ? o->file_mode : 0640;
    if (o->replace)
        remove_old(file);
    fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0 && errno == EEXIST) {
        dpro_set_err(errbuf, errlen,
                     "%s: cannot create: the file exists (dpro_writer_options.replace "
                     "replaces it)",
                     path);
        rc = DPRO_ERR_EXISTS;
    } else if (fd < 0) {
        dpro_set_err(errbuf, errlen, "%s: cannot create: %s", path, strerror(errno));
        rc = DPRO_ERR_IO;
    } else {
        fchmod(fd, mode); /* not widened by umask-less callers, not narrowed by umask */
        close(fd);
    }
    return rc;
}

/* Returns a malloc'd copy of the len bytes of SQL at sql without its comments and with
 * no more blanks than SQL needs: SQLite keeps the text of every CREATE in the file, and
 * trace.sql's alignment would cost a page of a small trace. The schema has no quoted text,
 * so nothing inside quotes needs keeping. NULL when out of memory. */
static char *
sql_compact(const char *sql, size_t len)
{
    char *out = malloc(len + 1), *o = out;
    int blank = 0;

    if (!out)
        return NULL;
    for (size_t i = 0; i < len; i++) {
        char c = sql[i];
        if (c == '-' && i + 1 < len && sql[i + 1] == '-') {
            while (i < len && sql[i] != '\n')
                i++;
            blank = 1;
            continue;
        }
        if (c == ' ' || c == '\n' || c == '\t' || c == '\r') {
            blank = 1;
            continue;
        }
        if (blank && o > out && !strchr("(,;", o[-1]) && !strchr("(),;", c))
            *o++ = ' ';
        blank = 0;
        *o++ = c;
    }
    *o = 0;
    return out;
}

/* Runs the part of the schema that every trace has, trace.sql up to ON_FIRST_USE_MARK,
 * after setting the page size (which only a new, empty database takes), and keeps the rest
 * in w->lazy_sql for create_table. A private writer skips the schema's leading PRAGMAs
 * (WAL mode, its sync level): it has set its own modes. On failure *err may receive a
 * message the caller frees with sqlite3_free. */
static int
create_schema(dpro_writer *w, uint32_t page_size, char **err)
{
    int rc = DPRO_OK;
    char pragma[64];
    const char *mark = strstr(dpro_trace_sql, ON_FIRST_USE_MARK);
    size_t len = mark ? (size_t)(mark - dpro_trace_sql) : strlen(dpro_trace_sql);
    char *sql = sql_compact(dpro_trace_sql, len);
    const char *run = sql;

    w->lazy_sql = sql_compact(dpro_trace_sql + len, strlen(dpro_trace_sql + len));
    if (!sql || !w->lazy_sql)
        rc = DPRO_ERR_NOMEM;
    while (rc == DPRO_OK && w->private_file && !strncmp(run, "PRAGMA", 6) && strchr(run, ';')) {
        run = strchr(run, ';') + 1;
        run += strspn(run, " \n");
    }
    snprintf(pragma, sizeof pragma, "PRAGMA page_size = %u;", page_size);
    if (rc == DPRO_OK && (sqlite3_exec(w->db, pragma, NULL, NULL, err) != SQLITE_OK ||
                          sqlite3_exec(w->db, run, NULL, NULL, err) != SQLITE_OK))
        rc = DPRO_ERR_IO;
    free(sql);
    return rc;
}

/* Creates one table of the on-first-use part of trace.sql (bit: its TABLE_* bit) unless
 * this writer already did. */
static int
create_table(dpro_writer *w, unsigned bit, const char *name)
{
    int rc = DPRO_OK;
    char head[96];
    const char *stmt;
    sqlite3_stmt *st = NULL;

    if (w->tables_made & bit)
        return DPRO_OK;
    snprintf(head, sizeof head, "CREATE TABLE IF NOT EXISTS %s(", name);
    stmt = strstr(w->lazy_sql, head);
    if (!stmt) {
        snprintf(w->errmsg, sizeof w->errmsg, "%s: table %s missing from the schema", w->path,
                 name);
        return DPRO_ERR_ARG;
    }
    /* prepare compiles the first statement only: this table's CREATE */
    if (sqlite3_prepare_v2(w->db, stmt, -1, &st, NULL) != SQLITE_OK ||
        sqlite3_step(st) != SQLITE_DONE)
        rc = writer_fail(w, DPRO_ERR_IO, "creating a table");
    sqlite3_finalize(st);
    if (rc == DPRO_OK)
        w->tables_made |= bit;
    return rc;
}

/* The size of version 2.0's dpro_writer_options, the smallest a caller may have. */
#define OPTIONS_SIZE_MIN (offsetof(dpro_writer_options, page_size) + sizeof(uint32_t))

int
dpro_writer_open_sized(const char *path, const dpro_writer_options *user_opts, size_t opts_size,
                       dpro_writer **out, char *errbuf, size_t errlen)
{
    int rc = DPRO_OK;
    dpro_writer *w = NULL;
    char *err = NULL;
    dpro_writer_options o, *opts = &o;
    dpro_db_path dbp = {NULL, NULL, NULL, -1};
    uint32_t page_size;

    *out = NULL;
    memset(&o, 0, sizeof o);
    if (user_opts && opts_size < OPTIONS_SIZE_MIN)
        return DPRO_ERR_ARG;
    if (user_opts)
        memcpy(&o, user_opts, opts_size < sizeof o ? opts_size : sizeof o);
    page_size = o.page_size ? o.page_size : DEFAULT_PAGE_SIZE;
    if (!path || !*path || page_size < 512 || page_size > 65536 || (page_size & (page_size - 1)))
        return DPRO_ERR_ARG;
    rc = dpro_path_resolve(path, &dbp, errbuf, errlen);
    if (rc == DPRO_OK)
        rc = create_file(path, dbp.file, opts, errbuf, errlen);
    if (rc == DPRO_OK) {
        w = calloc(1, sizeof *w);
        if (w)
            w->dirfd = -1;
        if (!w || !(w->path = strdup(path)))
            rc = DPRO_ERR_NOMEM;
    }
    if (rc == DPRO_OK) {
        w->cap_events = opts->batch_events ? opts->batch_events : DEFAULT_BATCH_EVENTS;
        if (w->cap_events > DPRO_BATCH_MAX_EVENTS)
            w->cap_events = DPRO_BATCH_MAX_EVENTS;
        w->zlib_level = opts->zlib_level ? opts->zlib_level : DPRO_ZLIB_DEFAULT;
        w->events = malloc(w->cap_events * sizeof *w->events);
        w->event_bytes = sizeof *w->events;
        w->nslots = 1024;
        w->slots = calloc(w->nslots, sizeof *w->slots);
        w->ids_cap = 512;
        w->offset_of_id = malloc(w->ids_cap * sizeof *w->offset_of_id);
        w->arena_cap = 16384;
        w->arena = malloc(w->arena_cap);
        w->first_unsaved_id = 1;
        w->codec = dpro_codec_new();
        if (!w->codec || !w->events || !w->slots || !w->offset_of_id || !w->arena)
            rc = DPRO_ERR_NOMEM;
    }
    if (rc == DPRO_OK &&
        sqlite3_open_v2(dbp.sqlite_name, &w->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW,
                        dbp.vfs) != SQLITE_OK)
        rc = DPRO_ERR_IO;
    if (rc == DPRO_OK) {
        /* the database keeps its own file name: the directory's fd may go */
        w->dirfd = dbp.dirfd;
        dbp.dirfd = -1;
        sqlite3_busy_timeout(w->db, WRITE_LOCK_WAIT_MS);
    }
    /* sync_at_close: nothing synced from the file's creation on (the schema sets its own
     * synchronous mode, overridden again after it). A private file: no -wal, and no
     * journal file either (a failed transaction still rolls back, from memory); one lock,
     * held to the close, instead of a lock and an unlock a transaction */
    if (rc == DPRO_OK && (o.sync_at_close || o.private_until_close)) {
        w->sync_at_close = 1;
        w->private_file = o.private_until_close != 0;
        if (sqlite3_exec(w->db, "PRAGMA synchronous = OFF", NULL, NULL, &err) != SQLITE_OK ||
            (w->private_file &&
             sqlite3_exec(w->db, "PRAGMA locking_mode = EXCLUSIVE; PRAGMA journal_mode = MEMORY",
                          NULL, NULL, &err) != SQLITE_OK))
            rc = DPRO_ERR_IO;
    }
    if (rc == DPRO_OK)
        rc = create_schema(w, page_size, &err);
    if (rc == DPRO_OK && w->sync_at_close &&
        sqlite3_exec(w->db, "PRAGMA synchronous = OFF", NULL, NULL, &err) != SQLITE_OK)
        rc = DPRO_ERR_IO;
    if (rc == DPRO_OK &&
        (sqlite3_prepare_v2(w->db,
                            "INSERT INTO batches(first_ns,last_ns,count,raw_size,data) "
                            "VALUES(?,?,?,?,?)",
                            -1, &w->ins_batch, NULL) != SQLITE_OK ||
         sqlite3_prepare_v2(w->db,
                            "INSERT OR REPLACE INTO string_blocks(first_id,count,raw_size,data) "
                            "VALUES(?,?,?,?)",
                            -1, &w->ins_string, NULL) != SQLITE_OK ||
         sqlite3_prepare_v2(w->db, "INSERT OR REPLACE INTO meta(key,value) VALUES(?,?)", -1,
                            &w->ins_meta, NULL) != SQLITE_OK))
        rc = DPRO_ERR_IO;
    if (rc == DPRO_OK)
        rc = dpro_writer_set_meta_int(w, "schema_major", DPRO_SCHEMA_MAJOR);
    if (rc == DPRO_OK)
        rc = dpro_writer_set_meta_int(w, "schema_minor", DPRO_SCHEMA_MINOR);

    if (rc != DPRO_OK) {
        if (rc == DPRO_ERR_NOMEM)
            dpro_set_err(errbuf, errlen, "%s: out of memory", path);
        else if (w && w->db)
            dpro_set_err(errbuf, errlen, "%s: %s", path, err ? err : sqlite3_errmsg(w->db));
        sqlite3_free(err);
        dpro_writer_close(w);
        dpro_path_free(&dbp);
        return rc;
    }
    dpro_path_free(&dbp);
    *out = w;
    return rc;
}

static int
step_reset(dpro_writer *w, sqlite3_stmt *st, const char *what)
{
    int rc = sqlite3_step(st) == SQLITE_DONE ? DPRO_OK : DPRO_ERR_IO;
    if (rc != DPRO_OK)
        writer_fail(w, rc, what);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return rc;
}

int
dpro_writer_set_meta(dpro_writer *w, const char *key, const char *value)
{
    if (!w || !key)
        return DPRO_ERR_ARG;
    sqlite3_bind_text(w->ins_meta, 1, key, -1, SQLITE_TRANSIENT);
    if (value)
        sqlite3_bind_text(w->ins_meta, 2, value, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(w->ins_meta, 2);
    return step_reset(w, w->ins_meta, "writing meta");
}

int
dpro_writer_set_meta_int(dpro_writer *w, const char *key, int64_t value)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRId64, value);
    return dpro_writer_set_meta(w, key, buf);
}

/* Doubles the hash table and reinserts every slot. */
static int
intern_grow(dpro_writer *w)
{
    size_t n = w->nslots * 2;
    intern_slot *s = calloc(n, sizeof *s);
    if (!s)
        return DPRO_ERR_NOMEM;
    for (size_t i = 0; i < w->nslots; i++) {
        if (!w->slots[i].id)
            continue;
        size_t j = w->slots[i].hash & (n - 1);
        while (s[j].id)
            j = (j + 1) & (n - 1);
        s[j] = w->slots[i];
    }
    free(w->slots);
    w->slots = s;
    w->nslots = n;
    return DPRO_OK;
}

int
dpro_writer_intern_len(dpro_writer *w, const char *text, size_t len, uint32_t *id)
{
    uint64_t h;
    size_t j;

    if (!w || !text || !id || len > UINT32_MAX)
        return DPRO_ERR_ARG;
    h = hash_bytes(text, len);
    j = h & (w->nslots - 1);
    while (w->slots[j].id) {
        const intern_slot *s = &w->slots[j];
        if (s->hash == h && s->len == len && !memcmp(w->arena + s->offset, text, len)) {
            *id = s->id;
            return DPRO_OK;
        }
        j = (j + 1) & (w->nslots - 1);
    }
    /* new string */
    if (w->arena_len + len + 1 > w->arena_cap) {
        size_t cap = w->arena_cap;
        while (w->arena_len + len + 1 > cap)
            cap *= 2;
        char *a = realloc(w->arena, cap);
        if (!a)
            return DPRO_ERR_NOMEM;
        w->arena = a;
        w->arena_cap = cap;
    }
    if (w->nstrings + 2 > w->ids_cap) {
        size_t *o = realloc(w->offset_of_id, w->ids_cap * 2 * sizeof *o);
        if (!o)
            return DPRO_ERR_NOMEM;
        w->offset_of_id = o;
        w->ids_cap *= 2;
    }
    memcpy(w->arena + w->arena_len, text, len);
    w->arena[w->arena_len + len] = 0;
    w->nstrings++;
    w->slots[j].hash = h;
    w->slots[j].id = (uint32_t)w->nstrings;
    w->slots[j].len = (uint32_t)len;
    w->slots[j].offset = w->arena_len;
    w->offset_of_id[w->nstrings] = w->arena_len;
    w->arena_len += len + 1;
    *id = (uint32_t)w->nstrings;
    if (w->nstrings * 2 > w->nslots)
        return intern_grow(w);
    return DPRO_OK;
}

int
dpro_writer_intern(dpro_writer *w, const char *text, uint32_t *id)
{
    if (!text)
        return DPRO_ERR_ARG;
    return dpro_writer_intern_len(w, text, strlen(text), id);
}

/* Runs one INSERT OR REPLACE into table name (bit: its TABLE_* bit; created first if need
 * be) with bound values described by fmt: 'i' int64, 't' text (NULL: SQL NULL). */
static int
exec_insert(dpro_writer *w, unsigned bit, const char *name, const char *sql, const char *fmt, ...)
{
    int rc = DPRO_OK;
    sqlite3_stmt *st = NULL;
    va_list ap;

    rc = create_table(w, bit, name);
    if (rc != DPRO_OK)
        return rc;
    if (sqlite3_prepare_v2(w->db, sql, -1, &st, NULL) != SQLITE_OK)
        return writer_fail(w, DPRO_ERR_IO, "preparing an insert");
    va_start(ap, fmt);
    for (int i = 0; fmt[i]; i++) {
        if (fmt[i] == 'i') {
            sqlite3_bind_int64(st, i + 1, va_arg(ap, int64_t));
        } else {
            const char *t = va_arg(ap, const char *);
            if (t)
                sqlite3_bind_text(st, i + 1, t, -1, SQLITE_TRANSIENT);
        }
    }
    va_end(ap);
    if (sqlite3_step(st) != SQLITE_DONE)
        rc = writer_fail(w, DPRO_ERR_IO, "inserting a row");
    sqlite3_finalize(st);
    return rc;
}

int
dpro_writer_add_device(dpro_writer *w, const dpro_device_info *d)
{
    if (!w || !d)
        return DPRO_ERR_ARG;
    return exec_insert(w, TABLE_DEVICES, "devices",
                       "INSERT OR REPLACE INTO devices(id,name,sm_count,total_memory,"
                       "clock_khz,cc_major,cc_minor) VALUES(?,?,?,?,?,?,?)",
                       "itiiiii", (int64_t)d->id, d->name, (int64_t)d->sm_count,
                       (int64_t)d->total_memory, (int64_t)d->clock_khz, (int64_t)d->cc_major,
                       (int64_t)d->cc_minor);
}

int
dpro_writer_add_stream(dpro_writer *w, const dpro_stream_info *s)
{
    if (!w || !s)
        return DPRO_ERR_ARG;
    return exec_insert(w, TABLE_STREAMS, "streams",
                       "INSERT OR REPLACE INTO streams(id,device,flags,priority,name) "
                       "VALUES(?,?,?,?,?)",
                       "iiiit", (int64_t)s->id, (int64_t)s->device, (int64_t)s->flags,
                       (int64_t)s->priority, s->name);
}

int
dpro_writer_add_thread(dpro_writer *w, uint32_t tid, const char *name)
{
    if (!w)
        return DPRO_ERR_ARG;
    return exec_insert(w, TABLE_THREADS, "threads",
                       "INSERT OR REPLACE INTO threads(tid,name) VALUES(?,?)", "it", (int64_t)tid,
                       name);
}

int
dpro_writer_add_comm(dpro_writer *w, const dpro_comm_info *c)
{
    if (!w || !c)
        return DPRO_ERR_ARG;
    return exec_insert(w, TABLE_COMMUNICATORS, "communicators",
                       "INSERT OR REPLACE INTO communicators(handle,hash,parent_hash,rank,"
                       "size,device) VALUES(?,?,?,?,?,?)",
                       "iiiiii", (int64_t)c->handle, (int64_t)c->hash, (int64_t)c->parent_hash,
                       (int64_t)c->rank, (int64_t)c->size, (int64_t)c->device);
}

int
dpro_writer_add_stack(dpro_writer *w, uint32_t stack_id, const uint32_t *frames, uint32_t nframes)
{
    int rc;
    char *text;
    size_t len = 0;
    if (!w || (nframes && !frames))
        return DPRO_ERR_ARG;
    text = malloc((size_t)nframes * 11 + 1);
    if (!text)
        return DPRO_ERR_NOMEM;
    text[0] = 0;
    for (uint32_t i = 0; i < nframes; i++)
        len += (size_t)sprintf(text + len, i ? ",%u" : "%u", frames[i]);
    rc = exec_insert(w, TABLE_STACKS, "stacks",
                     "INSERT OR REPLACE INTO stacks(id,frames) VALUES(?,?)", "it",
                     (int64_t)stack_id, text);
    free(text);
    return rc;
}

int
dpro_writer_add_drops(dpro_writer *w, uint32_t thread, const char *reason, uint64_t count)
{
    if (!w || !reason)
        return DPRO_ERR_ARG;
    return exec_insert(w, TABLE_DROPS, "drops",
                       "INSERT INTO drops(thread,reason,count) VALUES(?,?,?) "
                       "ON CONFLICT(thread,reason) DO UPDATE SET count=count+excluded.count",
                       "iti", (int64_t)thread, reason, (int64_t)count);
}

static int writer_commit(dpro_writer *w, int checkpoint);

/* Refuses an event whose times pass INT64_MAX ns: the batches' time index holds SQLite
 * integers, where a later time would read as negative. Returns a dpro_status. */
static int
check_event_times(dpro_writer *w, const dpro_event *ev)
{
    int rc = DPRO_OK;
    if ((ev->start_ns | ev->end_ns) > INT64_MAX) { /* either has the top bit */
        snprintf(w->errmsg, sizeof w->errmsg,
                 "%s: an event's times (%llu .. %llu ns) pass 2^63-1 ns, the most a trace holds",
                 w->path, (unsigned long long)ev->start_ns, (unsigned long long)ev->end_ns);
        rc = DPRO_ERR_ARG;
    }
    return rc;
}

/* Hands out events[nevents] (committing a full batch first), its content as it is.
 * Returns a dpro_status. */
static int
take_slot(dpro_writer *w, dpro_event **ev)
{
    int rc = DPRO_OK;
    w->slot_out = 0;
    if (w->nevents == w->cap_events)
        rc = writer_commit(w, 0); /* full: commit first (the caller's flushes checkpoint) */
    if (rc == DPRO_OK) {
        w->slot_out = 1;
        *ev = &w->events[w->nevents];
    }
    return rc;
}

int
dpro_writer_next_event(dpro_writer *w, dpro_event **ev)
{
    int rc = DPRO_OK;
    if (!w || !ev)
        return DPRO_ERR_ARG;
    *ev = NULL;
    rc = take_slot(w, ev);
    /* a size the compiler cannot see: libc's memset (vector stores) clears the slot, not
     * an inline `rep stosq` of 31 steps, twice as many instructions */
    if (rc == DPRO_OK)
        memset(*ev, 0, w->event_bytes);
    return rc;
}

int
dpro_writer_keep_event(dpro_writer *w)
{
    int rc = DPRO_OK;
    if (!w || !w->slot_out)
        return DPRO_ERR_ARG;
    rc = check_event_times(w, &w->events[w->nevents]);
    w->slot_out = 0; /* kept, or refused for good */
    if (rc == DPRO_OK) {
        w->nevents++;
        w->total_events++;
    }
    return rc;
}

int
dpro_writer_append_sized(dpro_writer *w, const dpro_event *ev, size_t ev_size)
{
    int rc = DPRO_OK;
    dpro_event *slot = NULL;
    if (!w || !ev || ev_size < DPRO_EVENT_SIZE_MIN)
        return DPRO_ERR_ARG;
    rc = check_event_times(w, ev);
    if (rc == DPRO_OK)
        rc = take_slot(w, &slot); /* if its commit fails the event is not kept */
    if (rc == DPRO_OK) {
        if (ev_size == sizeof *ev)
            *slot = *ev;
        else
            dpro_event_import(slot, ev, ev_size);
        rc = dpro_writer_keep_event(w);
    }
    return rc;
}

/* Writes the strings interned since the last flush as one compressed block. They lie
 * back to back, NUL-terminated, at the end of the arena. Inside the flush transaction. */
static int
write_string_block(dpro_writer *w)
{
    int rc = DPRO_OK;
    size_t from = w->offset_of_id[w->first_unsaved_id];
    size_t raw = w->arena_len - from;
    const uint8_t *z = NULL;
    size_t zlen = 0;

    if (dpro_deflate(&w->strings_z, DPRO_DEFLATE_TEXT, STRINGS_ZLIB_LEVEL, w->arena + from, raw, &z,
                     &zlen) != DPRO_OK) {
        rc = writer_fail(w, DPRO_ERR_NOMEM, "compressing strings");
    } else {
        sqlite3_bind_int64(w->ins_string, 1, w->first_unsaved_id);
        sqlite3_bind_int64(w->ins_string, 2, w->nstrings - w->first_unsaved_id + 1);
        sqlite3_bind_int64(w->ins_string, 3, (int64_t)raw);
        sqlite3_bind_blob(w->ins_string, 4, z, (int)zlen, SQLITE_STATIC);
        rc = step_reset(w, w->ins_string, "writing strings");
    }
    return rc;
}

/* Writes the current batch and the new strings in one transaction. checkpoint: also copy
 * the commit from the WAL into the file itself. Returns a dpro_status. */
static int
writer_commit(dpro_writer *w, int checkpoint)
{
    int rc = DPRO_OK;
    const uint8_t *blob = NULL;
    size_t bloblen = 0, rawlen = 0;
    uint64_t first = UINT64_MAX, last = 0;

    if (!w)
        return DPRO_ERR_ARG;
    w->slot_out = 0; /* a slot handed out and not kept is discarded */
    if (!w->nevents && w->first_unsaved_id > w->nstrings)
        return DPRO_OK;
    if (w->nevents) {
        rc = dpro_codec_encode(w->codec, w->events, w->nevents, w->zlib_level, &blob, &bloblen,
                               &rawlen);
        if (rc != DPRO_OK)
            return writer_fail(w, rc, "encoding a batch");
        for (uint32_t i = 0; i < w->nevents; i++) {
            if (w->events[i].start_ns < first)
                first = w->events[i].start_ns;
            if (w->events[i].end_ns > last)
                last = w->events[i].end_ns;
            if (w->events[i].start_ns > last) /* an end before the start: an instant */
                last = w->events[i].start_ns;
        }
    }
    if (sqlite3_exec(w->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK)
        rc = writer_fail(w, DPRO_ERR_IO, "beginning a transaction");
    if (rc == DPRO_OK && w->first_unsaved_id <= w->nstrings)
        rc = write_string_block(w);
    if (rc == DPRO_OK && w->nevents) {
        sqlite3_bind_int64(w->ins_batch, 1, (int64_t)first);
        sqlite3_bind_int64(w->ins_batch, 2, (int64_t)last);
        sqlite3_bind_int64(w->ins_batch, 3, w->nevents);
        sqlite3_bind_int64(w->ins_batch, 4, (int64_t)rawlen);
        sqlite3_bind_blob(w->ins_batch, 5, blob, (int)bloblen, SQLITE_STATIC);
        rc = step_reset(w, w->ins_batch, "writing a batch");
    }
    if (rc == DPRO_OK && sqlite3_exec(w->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
        rc = writer_fail(w, DPRO_ERR_IO, "committing a batch");
    if (rc == DPRO_OK) {
        /* copy what the WAL got into the file itself now, so that the file alone (copied
         * away from a killed or exec'd process, without its -wal) holds it; PASSIVE: a
         * concurrent reader is not waited for (the next flush catches up) */
        if (checkpoint)
            sqlite3_wal_checkpoint_v2(w->db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
        w->first_unsaved_id = (uint32_t)w->nstrings + 1;
        if (w->nevents) {
            w->total_batches++;
            w->total_bytes += bloblen;
        }
        w->nevents = 0;
    } else {
        sqlite3_exec(w->db, "ROLLBACK", NULL, NULL, NULL);
        /* The batch stays in memory: a later flush (e.g. once disk space is back) retries.
         * If the buffer is full, the caller's append fails and counts the loss. */
    }
    return rc;
}

int
dpro_writer_flush(dpro_writer *w)
{
    return w ? writer_commit(w, 1) : DPRO_ERR_ARG;
}

uint64_t
dpro_writer_events(const dpro_writer *w)
{
    return w ? w->total_events : 0;
}

uint64_t
dpro_writer_batches(const dpro_writer *w)
{
    return w ? w->total_batches : 0;
}

uint64_t
dpro_writer_bytes(const dpro_writer *w)
{
    return w ? w->total_bytes : 0;
}

const char *
dpro_writer_errmsg(const dpro_writer *w)
{
    return w ? w->errmsg : "";
}

int
dpro_writer_close(dpro_writer *w)
{
    int rc = DPRO_OK;
    if (!w)
        return DPRO_OK;
    if (w->db && w->ins_batch) {
        rc = dpro_writer_flush(w);
        /* a private file's one sync: the commit of the mark below syncs the whole file */
        if (rc == DPRO_OK && w->private_file &&
            sqlite3_exec(w->db, "PRAGMA synchronous = FULL", NULL, NULL, NULL) != SQLITE_OK)
            rc = writer_fail(w, DPRO_ERR_IO, "syncing the trace");
        /* the mark of a whole trace: absent, readers say it ends early */
        if (rc == DPRO_OK)
            rc = dpro_writer_set_meta(w, DPRO_META_COMPLETE, "1");
    }
    sqlite3_finalize(w->ins_batch);
    sqlite3_finalize(w->ins_string);
    sqlite3_finalize(w->ins_meta);
    if (w->db && !w->private_file) {
        /* one self-contained file: everything into it, and out of WAL mode so that readers
         * need no -wal or -shm. The switch needs the only lock on the file: while a reader
         * holds it, it is retried for a while (SQLite's busy handler does not wait for
         * it), then left to that reader, whose close does it for a trace marked complete
         * (dpro_reader_close: the last connection that may write folds the -wal as it
         * closes). The checkpoint does not wait for readers: a reader holds the trace as
         * long as it likes */
        sqlite3_busy_timeout(w->db, 0);
        /* a writer that synced nothing yet: the checkpoint below syncs the -wal and the file */
        if (w->sync_at_close &&
            sqlite3_exec(w->db, "PRAGMA synchronous = FULL", NULL, NULL, NULL) != SQLITE_OK &&
            rc == DPRO_OK)
            rc = writer_fail(w, DPRO_ERR_IO, "syncing the trace");
        int ck = sqlite3_wal_checkpoint_v2(w->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
        if (ck != SQLITE_OK && ck != SQLITE_BUSY && ck != SQLITE_LOCKED && rc == DPRO_OK)
            rc = writer_fail(w, DPRO_ERR_IO, "moving the -wal into the file");
        for (int waited = 0; waited < CLOSE_WAIT_MS; waited += CLOSE_POLL_MS) {
            sqlite3_stmt *st = NULL;
            int done = sqlite3_prepare_v2(w->db, "PRAGMA journal_mode = DELETE", -1, &st, NULL) ==
                           SQLITE_OK &&
                       sqlite3_step(st) == SQLITE_ROW &&
                       !sqlite3_stricmp((const char *)sqlite3_column_text(st, 0), "delete");
            sqlite3_finalize(st);
            if (done)
                break;
            struct timespec ts = {0, CLOSE_POLL_MS * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    if (w->db && sqlite3_close(w->db) != SQLITE_OK && rc == DPRO_OK)
        rc = DPRO_ERR_IO;
    if (w->dirfd >= 0)
        close(w->dirfd);
    dpro_codec_free(w->codec);
    dpro_deflater_free(w->strings_z);
    free(w->events);
    free(w->slots);
    free(w->arena);
    free(w->offset_of_id);
    free(w->lazy_sql);
    free(w->path);
    free(w);
    return rc;
}
