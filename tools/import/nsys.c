/*
 * nsys.c: Nsight Systems SQLite exports -> dpro traces (import_nsys.h): the export opened and
 * checked, its processes listed, and per process the threads and devices tables and the meta
 * keys; nsys_map.c maps the rows (nsys_int.h cites the schema).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fnv1a.h"
#include "nsys_int.h"

const char *const nsys_table_name[NSYS_T_COUNT] = {
    [NSYS_T_KERNEL] = "CUPTI_ACTIVITY_KIND_KERNEL",
    [NSYS_T_MEMCPY] = "CUPTI_ACTIVITY_KIND_MEMCPY",
    [NSYS_T_MEMSET] = "CUPTI_ACTIVITY_KIND_MEMSET",
    [NSYS_T_RUNTIME] = "CUPTI_ACTIVITY_KIND_RUNTIME",
    [NSYS_T_DRIVER] = "CUPTI_ACTIVITY_KIND_DRIVER",
    [NSYS_T_NVTX] = "NVTX_EVENTS",
    [NSYS_T_STRINGS] = "StringIds",
    [NSYS_T_THREADS] = "ThreadNames",
    [NSYS_T_GPU] = "TARGET_INFO_GPU",
    [NSYS_T_SESSION] = "TARGET_INFO_SESSION_START_TIME",
    [NSYS_T_SYSENV] = "TARGET_INFO_SYSTEM_ENV",
    [NSYS_T_EVTYPE] = "ENUM_NSYS_EVENT_TYPE",
};

/* See nsys_int.h. */
int
nsys_fail(nsys_export *x, int status, const char *fmt, ...)
{
    if (x->err[0])
        return status;
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    snprintf(x->err, sizeof(x->err), "%s: %s", x->path, msg);
    return status;
}

/* See nsys_int.h. */
int
nsys_fail_sql(nsys_export *x, int rc, const char *table)
{
    int base = rc & 0xff, status = DPRO_ERR_IO;
    const char *what = "cannot read";
    if (base == SQLITE_NOTADB) {
        status = DPRO_ERR_NOT_TRACE;
        what = "not an SQLite database (nsys export --type sqlite writes one)";
    } else if (base == SQLITE_CORRUPT) {
        status = DPRO_ERR_CORRUPT;
        what = "damaged or truncated SQLite data";
    } else if (base == SQLITE_ERROR) { /* a query the schema does not answer */
        status = DPRO_ERR_NOT_TRACE;
        what = "not the schema Nsight Systems exports";
    } else if (base == SQLITE_NOMEM) {
        status = DPRO_ERR_NOMEM;
        what = "out of memory";
    }
    return nsys_fail(x, status, "%s%s: %s (%s)", table ? "table " : "reading the file",
                     table ? table : "", what, sqlite3_errmsg(x->db));
}

/* See nsys_int.h. */
int
nsys_prepare(nsys_export *x, int t, const char *sql, sqlite3_stmt **st)
{
    int rc = sqlite3_prepare_v2(x->db, sql, -1, st, NULL);
    return rc == SQLITE_OK ? DPRO_OK : nsys_fail_sql(x, rc, t >= 0 ? nsys_table_name[t] : NULL);
}

/* See nsys_int.h. */
int
nsys_has_col(nsys_export *x, int t, const char *col)
{
    if (!x->has[t])
        return 0;
    char sql[160];
    snprintf(sql, sizeof(sql), "SELECT 1 FROM pragma_table_info('%s') WHERE name = ?1",
             nsys_table_name[t]);
    sqlite3_stmt *st = NULL;
    int found = 0;
    if (sqlite3_prepare_v2(x->db, sql, -1, &st, NULL) == SQLITE_OK &&
        sqlite3_bind_text(st, 1, col, -1, SQLITE_STATIC) == SQLITE_OK)
        found = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    return found;
}

/* See nsys_int.h. */
const char *
nsys_col(nsys_export *x, int t, const char *alias, const char *col, const char *fallback, char *buf,
         size_t len)
{
    if (nsys_has_col(x, t, col))
        snprintf(buf, len, "%s.%s", alias, col);
    else
        snprintf(buf, len, "%s", fallback);
    return buf;
}

/* Runs a query of one integer (or text into text[0..tlen) when text is not NULL) on table
 * t (-1: on the file). Returns 1 with a row, 0 without, or a negative status. */
static int
nsys_scalar(nsys_export *x, int t, const char *sql, int64_t *v, char *text, size_t tlen)
{
    sqlite3_stmt *st = NULL;
    int rc = nsys_prepare(x, t, sql, &st);
    if (rc != DPRO_OK)
        return rc;
    int step = sqlite3_step(st), out = 0;
    if (step == SQLITE_ROW) {
        out = 1;
        if (v)
            *v = sqlite3_column_int64(st, 0);
        if (text) {
            const unsigned char *s = sqlite3_column_text(st, 0);
            snprintf(text, tlen, "%s", s ? (const char *)s : "");
        }
    } else if (step != SQLITE_DONE) {
        out = nsys_fail_sql(x, step, t >= 0 ? nsys_table_name[t] : NULL);
    }
    sqlite3_finalize(st);
    return out;
}

/* Finds the tables, checks the file whole (quick_check) and reads the NVTX event types. */
static int
nsys_check(nsys_export *x)
{
    char res[512] = "";
    int rc = nsys_scalar(x, -1, "PRAGMA quick_check(1)", NULL, res, sizeof(res));
    if (rc < 0)
        return rc;
    if (rc == 0 || strcmp(res, "ok") != 0)
        return nsys_fail(x, DPRO_ERR_CORRUPT, "damaged or truncated SQLite data: %s", res);
    int any = 0;
    for (int t = 0; t < NSYS_T_COUNT; t++) {
        char sql[160];
        snprintf(sql, sizeof(sql),
                 "SELECT 1 FROM sqlite_master WHERE type IN ('table','view') AND name = '%s'",
                 nsys_table_name[t]);
        rc = nsys_scalar(x, -1, sql, NULL, NULL, 0);
        if (rc < 0)
            return rc;
        x->has[t] = rc;
        if (t <= NSYS_T_NVTX)
            any |= rc;
    }
    if (!any || !x->has[NSYS_T_STRINGS])
        return nsys_fail(x, DPRO_ERR_NOT_TRACE,
                         "not an Nsight Systems export: %s (nsys export --type sqlite writes "
                         "StringIds and CUPTI_ACTIVITY_KIND_* or NVTX_EVENTS tables)",
                         !x->has[NSYS_T_STRINGS] ? "no StringIds table"
                                                 : "none of the CUPTI_ACTIVITY_KIND_KERNEL, "
                                                   "_MEMCPY, _MEMSET, _RUNTIME, _DRIVER and "
                                                   "NVTX_EVENTS tables");
    /* eventType values: the export's own enum where it has one, else the documented ones */
    x->ev_mark = 34, x->ev_push = 59, x->ev_startend = 60, x->ev_domain = 75;
    static const struct {
        const char *name;
        size_t off;
    } ev[] = {{"NvtxMark", offsetof(nsys_export, ev_mark)},
              {"NvtxPushPopRange", offsetof(nsys_export, ev_push)},
              {"NvtxStartEndRange", offsetof(nsys_export, ev_startend)},
              {"NvtxDomainCreate", offsetof(nsys_export, ev_domain)}};
    for (size_t i = 0; x->has[NSYS_T_EVTYPE] && nsys_has_col(x, NSYS_T_EVTYPE, "name") &&
                       i < sizeof(ev) / sizeof(ev[0]);
         i++) {
        char sql[160];
        int64_t v;
        snprintf(sql, sizeof(sql), "SELECT id FROM ENUM_NSYS_EVENT_TYPE WHERE name = '%s'",
                 ev[i].name);
        rc = nsys_scalar(x, NSYS_T_EVTYPE, sql, &v, NULL, 0);
        if (rc < 0)
            return rc;
        if (rc == 1)
            *(int *)((char *)x + ev[i].off) = (int)v;
    }
    return DPRO_OK;
}

/* Runs sql (one integer a row) into *v[0..*n). Returns DPRO_OK or an error. */
static int
nsys_ints(nsys_export *x, const char *sql, int64_t **v, size_t *n)
{
    sqlite3_stmt *st = NULL;
    int rc = nsys_prepare(x, -1, sql, &st), step = SQLITE_DONE;
    size_t cap = 0;
    while (rc == DPRO_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? cap * 2 : 8;
            int64_t *p = realloc(*v, cap * sizeof(*p));
            if (!p) {
                rc = nsys_fail(x, DPRO_ERR_NOMEM, "out of memory (processes)");
                break;
            }
            *v = p;
        }
        (*v)[(*n)++] = sqlite3_column_int64(st, 0);
    }
    if (rc == DPRO_OK && step != SQLITE_DONE)
        rc = nsys_fail_sql(x, step, "CUPTI_ACTIVITY_KIND_*");
    sqlite3_finalize(st);
    return rc;
}

/* Appends "SELECT col >> 24 FROM table" for the tables among src[0..n) that have col. */
static size_t
nsys_union(nsys_export *x, const int *src, size_t n, char *sql, size_t len)
{
    size_t used = 0;
    for (size_t i = 0; i < n && used < len; i++) {
        const char *col = src[i] >= NSYS_T_RUNTIME ? "globalTid" : "globalPid";
        if (nsys_has_col(x, src[i], col))
            used += (size_t)snprintf(sql + used, len - used, "%sSELECT %s >> 24 FROM %s",
                                     used ? " UNION " : "", col, nsys_table_name[src[i]]);
    }
    return used;
}

/* Lists the processes: those with a device op (globalPid), and those with CUDA API calls but
 * none (globalTid), as ranks too when api_only, else as skipped. */
static int
nsys_list_processes(nsys_export *x, int api_only)
{
    static const int dev[] = {NSYS_T_KERNEL, NSYS_T_MEMCPY, NSYS_T_MEMSET};
    static const int api[] = {NSYS_T_RUNTIME, NSYS_T_DRIVER};
    char devq[512], apiq[512], sql[1200];
    size_t nd = nsys_union(x, dev, 3, devq, sizeof(devq));
    size_t na = nsys_union(x, api, 2, apiq, sizeof(apiq));
    int rc = DPRO_OK;
    if (nd) {
        snprintf(sql, sizeof(sql), "%s%s%s ORDER BY 1", devq, api_only && na ? " UNION " : "",
                 api_only && na ? apiq : "");
        rc = nsys_ints(x, sql, &x->procs, &x->nprocs);
    } else if (na && api_only) {
        snprintf(sql, sizeof(sql), "%s ORDER BY 1", apiq);
        rc = nsys_ints(x, sql, &x->procs, &x->nprocs);
    }
    if (rc == DPRO_OK && na && !api_only) {
        /* compound SELECTs associate left: the device union goes in a subquery */
        snprintf(sql, sizeof(sql), "%s%s%s%s ORDER BY 1", apiq, nd ? " EXCEPT SELECT * FROM (" : "",
                 nd ? devq : "", nd ? ")" : "");
        rc = nsys_ints(x, sql, &x->skipped, &x->nskipped);
    }
    return rc;
}

/* The host name and the session's start, where the export has them. */
static int
nsys_read_target(nsys_export *x)
{
    int rc = 0;
    x->session_utc_ns = -1;
    if (nsys_has_col(x, NSYS_T_SESSION, "utcEpochNs"))
        rc = nsys_scalar(x, NSYS_T_SESSION,
                         "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1",
                         &x->session_utc_ns, NULL, 0);
    if (rc >= 0 && nsys_has_col(x, NSYS_T_SYSENV, "name") &&
        nsys_has_col(x, NSYS_T_SYSENV, "value"))
        rc = nsys_scalar(x, NSYS_T_SYSENV,
                         "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'Hostname' "
                         "LIMIT 1",
                         NULL, x->host, sizeof(x->host));
    return rc < 0 ? rc : DPRO_OK;
}

int
nsys_open(const char *path, int api_only, nsys_export **out, char *errbuf, size_t errlen)
{
    *out = NULL;
    nsys_export *x = calloc(1, sizeof(*x));
    if (!x) {
        snprintf(errbuf, errlen, "%s: out of memory", path);
        return DPRO_ERR_NOMEM;
    }
    snprintf(x->path, sizeof(x->path), "%s", path);
    int rc = DPRO_OK;
    int orc = sqlite3_open_v2(path, &x->db, SQLITE_OPEN_READONLY, NULL);
    if (orc != SQLITE_OK)
        rc = nsys_fail(x, DPRO_ERR_IO, "cannot open: %s",
                       x->db ? sqlite3_errmsg(x->db) : sqlite3_errstr(orc));
    if (rc == DPRO_OK)
        rc = nsys_check(x);
    if (rc == DPRO_OK)
        rc = nsys_list_processes(x, api_only);
    if (rc == DPRO_OK)
        rc = nsys_read_target(x);
    if (rc != DPRO_OK) {
        snprintf(errbuf, errlen, "%s", x->err);
        nsys_close(x);
        return rc;
    }
    *out = x;
    return DPRO_OK;
}

size_t
nsys_process_count(const nsys_export *x)
{
    return x->nprocs;
}

int64_t
nsys_process_pid(const nsys_export *x, size_t i)
{
    return i < x->nprocs ? x->procs[i] % 0x1000000 : -1;
}

size_t
nsys_skipped(const nsys_export *x, char *buf, size_t len)
{
    size_t used = 0;
    if (len)
        buf[0] = '\0';
    for (size_t i = 0; i < x->nskipped && used < len; i++) {
        int w = snprintf(buf + used, len - used, "%s%lld", i ? ", " : "",
                         (long long)(x->skipped[i] % 0x1000000));
        used = w < 0 ? len : used + (size_t)w;
    }
    return x->nskipped;
}

const char *
nsys_host(const nsys_export *x)
{
    return x->host[0] ? x->host : NULL;
}

const char *
nsys_errmsg(const nsys_export *x)
{
    return x->err;
}

void
nsys_close(nsys_export *x)
{
    if (!x)
        return;
    sqlite3_close(x->db);
    free(x->procs);
    free(x->skipped);
    free(x);
}

/* The threads of process key (ThreadNames) and the devices (TARGET_INFO_GPU). */
static int
nsys_write_tables(nsys_export *x, int64_t key, dpro_writer *w)
{
    int rc = DPRO_OK, step = SQLITE_DONE;
    sqlite3_stmt *st = NULL;
    if (x->has[NSYS_T_THREADS] && nsys_has_col(x, NSYS_T_THREADS, "nameId")) {
        rc = nsys_prepare(x, NSYS_T_THREADS,
                          "SELECT t.globalTid % 16777216, s.value FROM ThreadNames t JOIN "
                          "StringIds s ON s.id = t.nameId WHERE t.globalTid >> 24 = ?1",
                          &st);
        if (rc == DPRO_OK)
            sqlite3_bind_int64(st, 1, key);
        while (rc == DPRO_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
            const unsigned char *name = sqlite3_column_text(st, 1);
            rc = dpro_writer_add_thread(w, (uint32_t)sqlite3_column_int64(st, 0),
                                        name ? (const char *)name : "");
        }
        if (rc == DPRO_OK && step != SQLITE_DONE)
            rc = nsys_fail_sql(x, step, "ThreadNames");
        sqlite3_finalize(st);
        st = NULL;
    }
    if (rc == DPRO_OK && x->has[NSYS_T_GPU]) {
        char c[7][48], sql[512];
        snprintf(sql, sizeof(sql), "SELECT %s, %s, %s, %s, %s, %s, %s FROM TARGET_INFO_GPU g",
                 nsys_col(x, NSYS_T_GPU, "g", "cuDevice", "g.id", c[0], 48),
                 nsys_col(x, NSYS_T_GPU, "g", "name", "''", c[1], 48),
                 nsys_col(x, NSYS_T_GPU, "g", "smCount", "0", c[2], 48),
                 nsys_col(x, NSYS_T_GPU, "g", "totalMemory", "0", c[3], 48),
                 nsys_col(x, NSYS_T_GPU, "g", "clockRate", "0", c[4], 48),
                 nsys_col(x, NSYS_T_GPU, "g", "computeMajor", "0", c[5], 48),
                 nsys_col(x, NSYS_T_GPU, "g", "computeMinor", "0", c[6], 48));
        rc = nsys_prepare(x, NSYS_T_GPU, sql, &st);
        while (rc == DPRO_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
            const unsigned char *name = sqlite3_column_text(st, 1);
            dpro_device_info d = {.id = (uint32_t)sqlite3_column_int64(st, 0),
                                  .name = name ? (const char *)name : "",
                                  .sm_count = (uint32_t)sqlite3_column_int64(st, 2),
                                  .total_memory = (uint64_t)sqlite3_column_int64(st, 3),
                                  /* clockRate: Hz in the export, kHz in the devices table */
                                  .clock_khz = (uint32_t)(sqlite3_column_int64(st, 4) / 1000),
                                  .cc_major = (uint32_t)sqlite3_column_int64(st, 5),
                                  .cc_minor = (uint32_t)sqlite3_column_int64(st, 6)};
            rc = dpro_writer_add_device(w, &d);
        }
        if (rc == DPRO_OK && step != SQLITE_DONE)
            rc = nsys_fail_sql(x, step, "TARGET_INFO_GPU");
        sqlite3_finalize(st);
    }
    if (rc != DPRO_OK && !x->err[0])
        nsys_fail(x, rc, "writing the trace: %s (%s)", dpro_status_str(rc), dpro_writer_errmsg(w));
    return rc;
}

/* The meta keys of process key. */
static int
nsys_write_meta(nsys_export *x, int64_t key, dpro_writer *w, int64_t rank, int64_t world,
                const char *job_id, const nsys_counts *c)
{
    int rc = DPRO_OK;
    char job[64], sig[256];
    if (!job_id) {
        /* what the ranks of one job share: the world size and the hour the session began
         * in (a session of one rank: also its start and pid) */
        int64_t t = x->session_utc_ns;
        int l = snprintf(sig, sizeof(sig), "world_size=%lld;hour=%lld", (long long)world,
                         (long long)(t >= 0 ? t / (INT64_C(3600) * 1000000000) : -1));
        if (world <= 1 && l > 0 && (size_t)l < sizeof(sig))
            l += snprintf(sig + l, sizeof(sig) - (size_t)l, ";start=%lld;pid=%lld", (long long)t,
                          (long long)(key % 0x1000000));
        size_t len = l < 0 ? 0 : (size_t)l < sizeof(sig) ? (size_t)l : sizeof(sig) - 1;
        snprintf(job, sizeof(job), "nsys-%016llx",
                 (unsigned long long)dpro_fnv1a(sig, len, DPRO_FNV1A_INIT));
        job_id = job;
    }
#define META(k, v)                                                                                 \
    do {                                                                                           \
        if (rc == DPRO_OK)                                                                         \
            rc = dpro_writer_set_meta(w, k, v);                                                    \
    } while (0)
#define META_INT(k, v)                                                                             \
    do {                                                                                           \
        if (rc == DPRO_OK)                                                                         \
            rc = dpro_writer_set_meta_int(w, k, (int64_t)(v));                                     \
    } while (0)
    META(DPRO_META_SOURCE, "nsys-import");
    META("source_file", x->path);
    META("clock", "nsys-session-ns");
    META(DPRO_META_JOB_ID, job_id);
    META(DPRO_META_HOST, x->host[0] ? x->host : "import");
    META_INT(DPRO_META_PID, key % 0x1000000);
    META_INT(DPRO_META_RANK, rank);
    META_INT(DPRO_META_WORLD_SIZE, world);
    META("import.rank_source", "file_order");
    META_INT("import.global_pid", key << 24);
    if (x->session_utc_ns >= 0)
        META_INT("import.session_start_utc_ns", x->session_utc_ns);
    META_INT("import.kernels", c->kernels);
    META_INT("import.memcpys", c->memcpys);
    META_INT("import.memsets", c->memsets);
    META_INT("import.api.runtime", c->runtime);
    META_INT("import.api.driver", c->driver);
    META_INT("import.api.joined", c->joined);
    META_INT("import.nvtx.ranges", c->ranges);
    META_INT("import.nvtx.marks", c->marks);
    META_INT("import.collectives", c->collectives);
    META_INT("import.collectives.from_nvtx", c->coll_from_nvtx);
    META_INT("import.collectives.from_kernel", c->coll_from_kernel);
    META_INT("import.unmapped.nvtx_unended", c->nvtx_unended);
    META_INT("import.unmapped.nvtx_other", c->nvtx_other);
    META_INT("import.unmapped.collective_op", c->coll_unknown_op);
    META_INT("import.approx.nccl_bytes_as_u8", c->bytes_as_u8);
#undef META
#undef META_INT
    if (rc != DPRO_OK)
        nsys_fail(x, rc, "writing the meta keys: %s (%s)", dpro_status_str(rc),
                  dpro_writer_errmsg(w));
    return rc;
}

int
nsys_import_process(nsys_export *x, size_t i, dpro_writer *w, int64_t rank, int64_t world_size,
                    const char *job_id, nsys_result *res)
{
    memset(res, 0, sizeof(*res));
    if (i >= x->nprocs)
        return nsys_fail(x, DPRO_ERR_ARG, "no process %zu", i);
    int64_t key = x->procs[i];
    res->pid = key % 0x1000000;
    nsys_counts c;
    memset(&c, 0, sizeof(c));
    int rc = nsys_map_process(x, key, w, &c);
    if (rc == DPRO_OK)
        rc = nsys_write_tables(x, key, w);
    if (rc == DPRO_OK)
        rc = nsys_write_meta(x, key, w, rank, world_size, job_id, &c);
    res->device_ops = c.kernels + c.memcpys + c.memsets;
    res->api_calls = c.runtime + c.driver;
    res->markers = c.ranges + c.marks;
    res->collectives = c.collectives;
    res->events_out = res->device_ops + res->api_calls + res->markers + res->collectives;
    res->unmapped = c.nvtx_unended + c.nvtx_other + c.coll_unknown_op;
    return rc;
}
