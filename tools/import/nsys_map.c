/*
 * nsys_map.c: the rows of one process of an Nsight Systems export -> dpro events
 * (import_nsys.h says the mapping, nsys_int.h where each column comes from). Device ops
 * first (held by correlation id), then the API calls joined to them, then NVTX, then the
 * collectives, numbered per communicator once all are known.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_names.h"
#include "fnv1a.h"
#include "nsys_int.h"

/* A device op, held for the API call that launched it. */
typedef struct nsys_dev {
    uint64_t corr, stream, bytes, start, end;
    uint32_t kind, name, device, copy_kind;
    uint32_t op, redop, dtype; /* NCCL kernels */
    int nccl, claimed;
    size_t launch; /* index + 1 of its launch call in ctx->launches, 0: none */
} nsys_dev;

/* The launch call of an NCCL kernel. */
typedef struct nsys_launch {
    uint32_t tid;
    uint64_t start, end;
    size_t dev;
} nsys_launch;

/* An NVTX domain of the process. */
typedef struct nsys_domain {
    int64_t id;
    uint32_t name;
    int nccl;
} nsys_domain;

typedef struct nsys_ctx {
    nsys_export *x;
    dpro_writer *w;
    int64_t key;
    nsys_counts *c;
    nsys_dev *devs;
    size_t ndevs, devcap;
    uint32_t *hash; /* correlation -> dev index + 1 */
    size_t hmask;
    nsys_launch *launches;
    size_t nlaunches, lcap;
    dpro_event *colls;
    size_t ncolls, ccap;
    nsys_domain *domains;
    size_t ndomains, dcap;
    int have_domains; /* the export says the domain of each row */
} nsys_ctx;

/* Grows *p (of *cap elements of size sz) to hold n + 1. Returns 0 or -1. */
static int
nsys_grow(void **p, size_t *cap, size_t n, size_t sz)
{
    if (n < *cap)
        return 0;
    size_t ncap = *cap ? *cap * 2 : 256;
    void *q = realloc(*p, ncap * sz);
    if (!q)
        return -1;
    *p = q;
    *cap = ncap;
    return 0;
}

/* Interns column col of st (NULL or empty: 0). */
static int
nsys_intern_col(nsys_ctx *k, sqlite3_stmt *st, int col, uint32_t *id)
{
    const unsigned char *s = sqlite3_column_text(st, col);
    int n = sqlite3_column_bytes(st, col);
    *id = 0;
    if (!s || n <= 0)
        return DPRO_OK;
    int rc = dpro_writer_intern_len(k->w, (const char *)s, (size_t)n, id);
    return rc == DPRO_OK ? DPRO_OK
                         : nsys_fail(k->x, rc, "writing the trace: %s (%s)", dpro_status_str(rc),
                                     dpro_writer_errmsg(k->w));
}

/* Interns a text. */
static int
nsys_intern(nsys_ctx *k, const char *s, uint32_t *id)
{
    int rc = dpro_writer_intern(k->w, s, id);
    return rc == DPRO_OK ? DPRO_OK
                         : nsys_fail(k->x, rc, "writing the trace: %s (%s)", dpro_status_str(rc),
                                     dpro_writer_errmsg(k->w));
}

/* Appends ev. */
static int
nsys_emit(nsys_ctx *k, const dpro_event *ev)
{
    int rc = dpro_writer_append(k->w, ev);
    return rc == DPRO_OK ? DPRO_OK
                         : nsys_fail(k->x, rc, "writing the trace: %s (%s)", dpro_status_str(rc),
                                     dpro_writer_errmsg(k->w));
}

/* Start and end (columns 0 and 1 of st) into ev, checked: 0 <= start <= end < 2^62. */
static int
nsys_times(nsys_ctx *k, sqlite3_stmt *st, int t, dpro_event *ev)
{
    int64_t s = sqlite3_column_int64(st, 0), e = sqlite3_column_int64(st, 1);
    if (s < 0 || e < s || (uint64_t)e >= NSYS_MAX_TIME)
        return nsys_fail(k->x, DPRO_ERR_LIMIT,
                         "table %s, row %lld: start %lld, end %lld ns: out of range (0 <= start "
                         "<= end < 2^62)",
                         nsys_table_name[t], (long long)sqlite3_column_int64(st, 2), (long long)s,
                         (long long)e);
    ev->start_ns = (uint64_t)s;
    ev->end_ns = (uint64_t)e;
    return DPRO_OK;
}

/* Runs st (bound to the process) and calls row for each row. */
static int
nsys_each(nsys_ctx *k, int t, sqlite3_stmt *st, int (*row)(nsys_ctx *, sqlite3_stmt *, int))
{
    int rc = sqlite3_bind_int64(st, 1, k->key) == SQLITE_OK ? DPRO_OK : DPRO_ERR_ARG;
    int step = SQLITE_DONE;
    while (rc == DPRO_OK && (step = sqlite3_step(st)) == SQLITE_ROW)
        rc = row(k, st, t);
    if (rc == DPRO_OK && step != SQLITE_DONE)
        rc = nsys_fail_sql(k->x, step, nsys_table_name[t]);
    sqlite3_finalize(st);
    return rc;
}

/* Holds a device op for its launch call. */
static int
nsys_hold(nsys_ctx *k, const dpro_event *ev, uint32_t copy_kind, nsys_dev **out)
{
    if (nsys_grow((void **)&k->devs, &k->devcap, k->ndevs, sizeof(*k->devs)) != 0)
        return nsys_fail(k->x, DPRO_ERR_NOMEM, "out of memory (device operations)");
    nsys_dev *d = &k->devs[k->ndevs++];
    memset(d, 0, sizeof(*d));
    d->corr = ev->correlation;
    d->stream = ev->stream;
    d->bytes = ev->bytes;
    d->start = ev->start_ns;
    d->end = ev->end_ns;
    d->kind = ev->kind;
    d->name = ev->name;
    d->device = ev->device;
    d->copy_kind = copy_kind;
    d->dtype = IMP_DTYPE_UNKNOWN;
    *out = d;
    return DPRO_OK;
}

/* A kernel row: start, end, rowid, deviceId, streamId, correlationId, grid, block, shared
 * memory, name. */
static int
nsys_kernel_row(nsys_ctx *k, sqlite3_stmt *st, int t)
{
    dpro_event ev = {.kind = DPRO_KIND_KERNEL};
    int rc = nsys_times(k, st, t, &ev);
    ev.device = (uint32_t)sqlite3_column_int64(st, 3);
    ev.stream = (uint64_t)sqlite3_column_int64(st, 4);
    ev.correlation = (uint64_t)sqlite3_column_int64(st, 5);
    for (int i = 0; i < 3; i++) {
        ev.grid[i] = (uint32_t)sqlite3_column_int64(st, 6 + i);
        ev.block[i] = (uint32_t)sqlite3_column_int64(st, 9 + i);
    }
    ev.shared_mem = (uint32_t)sqlite3_column_int64(st, 12);
    if (rc == DPRO_OK)
        rc = nsys_intern_col(k, st, 13, &ev.name);
    if (rc == DPRO_OK)
        rc = nsys_emit(k, &ev);
    nsys_dev *d = NULL;
    if (rc == DPRO_OK)
        rc = nsys_hold(k, &ev, 0, &d);
    const char *name = (const char *)sqlite3_column_text(st, 13);
    if (rc == DPRO_OK && name && dpro_kernel_is_comm(name)) {
        d->nccl = 1;
        imp_coll_from_kernel(name, strlen(name), &d->op, &d->redop, &d->dtype);
    }
    k->c->kernels++;
    return rc;
}

/* CUpti_ActivityMemcpyKind -> dpro_copy_kind and Kineto's short name. */
static uint32_t
nsys_copy_kind(int64_t ck, const char **label)
{
    static const struct {
        const char *label;
        uint32_t kind;
    } m[] = {{"Unknown", DPRO_COPY_DEFAULT}, {"HtoD", DPRO_COPY_H2D}, {"DtoH", DPRO_COPY_D2H},
             {"HtoA", DPRO_COPY_H2D},        {"AtoH", DPRO_COPY_D2H}, {"AtoA", DPRO_COPY_D2D},
             {"AtoD", DPRO_COPY_D2D},        {"DtoA", DPRO_COPY_D2D}, {"DtoD", DPRO_COPY_D2D},
             {"HtoH", DPRO_COPY_H2H},        {"PtoP", DPRO_COPY_P2P}};
    size_t i = ck >= 0 && (size_t)ck < sizeof(m) / sizeof(m[0]) ? (size_t)ck : 0;
    *label = m[i].label;
    return m[i].kind;
}

/* CUpti_ActivityMemoryKind -> Kineto's word for it. */
static const char *
nsys_mem_kind(int64_t mk)
{
    static const char *const m[] = {"Unknown", "Pageable", "Pinned",        "Device",
                                    "Array",   "Managed",  "Device Static", "Managed Static"};
    return mk >= 0 && (size_t)mk < sizeof(m) / sizeof(m[0]) ? m[mk] : "Unknown";
}

/* A memcpy or memset row: start, end, rowid, deviceId, streamId, correlationId, bytes, then
 * copyKind, srcKind, dstKind (memcpy; -1 where the export lacks them) or memKind (memset). */
static int
nsys_copy_row(nsys_ctx *k, sqlite3_stmt *st, int t)
{
    int memcpy_row = t == NSYS_T_MEMCPY;
    dpro_event ev = {.kind = memcpy_row ? DPRO_KIND_MEMCPY : DPRO_KIND_MEMSET};
    int rc = nsys_times(k, st, t, &ev);
    ev.device = (uint32_t)sqlite3_column_int64(st, 3);
    ev.stream = (uint64_t)sqlite3_column_int64(st, 4);
    ev.correlation = (uint64_t)sqlite3_column_int64(st, 5);
    int64_t bytes = sqlite3_column_int64(st, 6);
    if (rc == DPRO_OK && (bytes < 0 || (uint64_t)bytes > NSYS_MAX_BYTES))
        rc =
            nsys_fail(k->x, DPRO_ERR_LIMIT, "table %s, row %lld: bytes %lld out of range",
                      nsys_table_name[t], (long long)sqlite3_column_int64(st, 2), (long long)bytes);
    ev.bytes = (uint64_t)bytes;
    char name[96];
    if (memcpy_row) {
        const char *label;
        ev.subkind = nsys_copy_kind(sqlite3_column_int64(st, 7), &label);
        int64_t src = sqlite3_column_int64(st, 8), dst = sqlite3_column_int64(st, 9);
        if (src >= 0 && dst >= 0)
            snprintf(name, sizeof(name), "Memcpy %s (%s -> %s)", label, nsys_mem_kind(src),
                     nsys_mem_kind(dst));
        else
            snprintf(name, sizeof(name), "Memcpy %s", label);
    } else {
        int64_t mk = sqlite3_column_int64(st, 7);
        if (mk >= 0)
            snprintf(name, sizeof(name), "Memset (%s)", nsys_mem_kind(mk));
        else
            snprintf(name, sizeof(name), "Memset");
    }
    if (rc == DPRO_OK)
        rc = nsys_intern(k, name, &ev.name);
    if (rc == DPRO_OK)
        rc = nsys_emit(k, &ev);
    nsys_dev *d;
    if (rc == DPRO_OK)
        rc = nsys_hold(k, &ev, ev.subkind, &d);
    if (memcpy_row)
        k->c->memcpys++;
    else
        k->c->memsets++;
    return rc;
}

/* Reads the kernels, copies and sets of the process, then indexes them by correlation. */
static int
nsys_device_ops(nsys_ctx *k)
{
    nsys_export *x = k->x;
    char sql[1024], c[8][64];
    sqlite3_stmt *st = NULL;
    int rc = DPRO_OK;
    if (x->has[NSYS_T_KERNEL]) {
        const char *namecol = nsys_has_col(x, NSYS_T_KERNEL, "demangledName") ? "demangledName"
                              : nsys_has_col(x, NSYS_T_KERNEL, "shortName")   ? "shortName"
                                                                              : NULL;
        snprintf(sql, sizeof(sql),
                 "SELECT k.start, k.end, k.rowid, k.deviceId, k.streamId, k.correlationId, "
                 "%s, %s, %s, %s, %s, %s, %s + %s, %s FROM CUPTI_ACTIVITY_KIND_KERNEL k %s "
                 "WHERE k.globalPid >> 24 = ?1 ORDER BY k.start",
                 nsys_col(x, NSYS_T_KERNEL, "k", "gridX", "0", c[0], 64),
                 nsys_col(x, NSYS_T_KERNEL, "k", "gridY", "0", c[1], 64),
                 nsys_col(x, NSYS_T_KERNEL, "k", "gridZ", "0", c[2], 64),
                 nsys_col(x, NSYS_T_KERNEL, "k", "blockX", "0", c[3], 64),
                 nsys_col(x, NSYS_T_KERNEL, "k", "blockY", "0", c[4], 64),
                 nsys_col(x, NSYS_T_KERNEL, "k", "blockZ", "0", c[5], 64),
                 nsys_col(x, NSYS_T_KERNEL, "k", "staticSharedMemory", "0", c[6], 64),
                 nsys_col(x, NSYS_T_KERNEL, "k", "dynamicSharedMemory", "0", c[7], 64),
                 namecol ? "s.value" : "NULL",
                 namecol ? (strcmp(namecol, "shortName") == 0
                                ? "LEFT JOIN StringIds s ON s.id = k.shortName"
                                : "LEFT JOIN StringIds s ON s.id = k.demangledName")
                         : "");
        rc = nsys_prepare(x, NSYS_T_KERNEL, sql, &st);
        if (rc == DPRO_OK)
            rc = nsys_each(k, NSYS_T_KERNEL, st, nsys_kernel_row);
    }
    if (rc == DPRO_OK && x->has[NSYS_T_MEMCPY]) {
        snprintf(sql, sizeof(sql),
                 "SELECT m.start, m.end, m.rowid, m.deviceId, m.streamId, m.correlationId, "
                 "m.bytes, %s, %s, %s FROM CUPTI_ACTIVITY_KIND_MEMCPY m WHERE m.globalPid >> "
                 "24 = ?1 ORDER BY m.start",
                 nsys_col(x, NSYS_T_MEMCPY, "m", "copyKind", "0", c[0], 64),
                 nsys_col(x, NSYS_T_MEMCPY, "m", "srcKind", "-1", c[1], 64),
                 nsys_col(x, NSYS_T_MEMCPY, "m", "dstKind", "-1", c[2], 64));
        rc = nsys_prepare(x, NSYS_T_MEMCPY, sql, &st);
        if (rc == DPRO_OK)
            rc = nsys_each(k, NSYS_T_MEMCPY, st, nsys_copy_row);
    }
    if (rc == DPRO_OK && x->has[NSYS_T_MEMSET]) {
        snprintf(sql, sizeof(sql),
                 "SELECT m.start, m.end, m.rowid, m.deviceId, m.streamId, m.correlationId, "
                 "m.bytes, %s FROM CUPTI_ACTIVITY_KIND_MEMSET m WHERE m.globalPid >> 24 = ?1 "
                 "ORDER BY m.start",
                 nsys_col(x, NSYS_T_MEMSET, "m", "memKind", "-1", c[0], 64));
        rc = nsys_prepare(x, NSYS_T_MEMSET, sql, &st);
        if (rc == DPRO_OK)
            rc = nsys_each(k, NSYS_T_MEMSET, st, nsys_copy_row);
    }
    if (rc != DPRO_OK)
        return rc;
    size_t size = 16;
    while (size < 2 * k->ndevs)
        size *= 2;
    k->hash = calloc(size, sizeof(*k->hash));
    if (!k->hash)
        return nsys_fail(x, DPRO_ERR_NOMEM, "out of memory (correlation index)");
    k->hmask = size - 1;
    for (size_t i = 0; i < k->ndevs; i++) {
        size_t p = (size_t)(k->devs[i].corr * 0x9E3779B97F4A7C15ULL >> 20) & k->hmask;
        while (k->hash[p] && k->devs[k->hash[p] - 1].corr != k->devs[i].corr)
            p = (p + 1) & k->hmask;
        if (!k->hash[p]) /* the first of a repeated id keeps it */
            k->hash[p] = (uint32_t)(i + 1);
    }
    return DPRO_OK;
}

/* The device op of correlation id corr, or NULL. */
static nsys_dev *
nsys_find_dev(nsys_ctx *k, uint64_t corr)
{
    for (size_t p = (size_t)(corr * 0x9E3779B97F4A7C15ULL >> 20) & k->hmask; k->hash[p];
         p = (p + 1) & k->hmask)
        if (k->devs[k->hash[p] - 1].corr == corr)
            return &k->devs[k->hash[p] - 1];
    return NULL;
}

/* An API row: start, end, rowid, tid, correlationId, returnValue, name. */
static int
nsys_api_row(nsys_ctx *k, sqlite3_stmt *st, int t)
{
    dpro_event ev = {.kind = DPRO_KIND_API,
                     .subkind = t == NSYS_T_RUNTIME ? DPRO_API_RUNTIME : DPRO_API_DRIVER};
    int rc = nsys_times(k, st, t, &ev);
    ev.thread = (uint32_t)sqlite3_column_int64(st, 3);
    ev.correlation = (uint64_t)sqlite3_column_int64(st, 4);
    ev.result = (int32_t)sqlite3_column_int64(st, 5);
    if (rc == DPRO_OK)
        rc = nsys_intern_col(k, st, 6, &ev.name);
    nsys_dev *d = rc == DPRO_OK && ev.correlation ? nsys_find_dev(k, ev.correlation) : NULL;
    if (d) {
        ev.stream = d->stream;
        ev.bytes = d->kind == DPRO_KIND_KERNEL ? 0 : d->bytes;
        ev.name2 = d->kind == DPRO_KIND_KERNEL ? d->name : 0;
        if (d->kind == DPRO_KIND_MEMCPY)
            ev.value = d->copy_kind;
        k->c->joined++;
        if (d->nccl && !d->launch) {
            if (nsys_grow((void **)&k->launches, &k->lcap, k->nlaunches, sizeof(*k->launches)))
                return nsys_fail(k->x, DPRO_ERR_NOMEM, "out of memory (launches)");
            k->launches[k->nlaunches++] = (nsys_launch){.tid = ev.thread,
                                                        .start = ev.start_ns,
                                                        .end = ev.end_ns,
                                                        .dev = (size_t)(d - k->devs)};
            d->launch = k->nlaunches;
        }
    }
    if (rc == DPRO_OK)
        rc = nsys_emit(k, &ev);
    if (t == NSYS_T_RUNTIME)
        k->c->runtime++;
    else
        k->c->driver++;
    return rc;
}

/* Reads the runtime and driver calls of the process. */
static int
nsys_api_calls(nsys_ctx *k)
{
    int rc = DPRO_OK;
    for (int t = NSYS_T_RUNTIME; t <= NSYS_T_DRIVER && rc == DPRO_OK; t++) {
        if (!k->x->has[t])
            continue;
        char sql[512], ret[64];
        snprintf(sql, sizeof(sql),
                 "SELECT a.start, a.end, a.rowid, a.globalTid %% 16777216, a.correlationId, %s, "
                 "s.value FROM %s a LEFT JOIN StringIds s ON s.id = a.nameId WHERE a.globalTid "
                 ">> 24 = ?1 ORDER BY a.start",
                 nsys_col(k->x, t, "a", "returnValue", "0", ret, sizeof(ret)), nsys_table_name[t]);
        sqlite3_stmt *st = NULL;
        rc = nsys_prepare(k->x, t, sql, &st);
        if (rc == DPRO_OK)
            rc = nsys_each(k, t, st, nsys_api_row);
    }
    return rc;
}

/* Payload value of key in NCCL's JSON text (a number, or a quoted one). Returns 1 if found. */
static int
nsys_json_int(const char *json, const char *key, int64_t *v)
{
    char pat[80];
    snprintf(pat, sizeof(pat), "\"%s\"", key);
    const char *p = json ? strstr(json, pat) : NULL;
    if (!p)
        return 0;
    p += strlen(pat);
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == ':' || *p == '"')
        p++;
    char *end;
    long long n = strtoll(p, &end, 0);
    if (end == p)
        return 0;
    *v = n;
    return 1;
}

/* Reduction of NCCL's payload: a number (ncclRedOp_t) or a name ("ncclSum", "Sum"). */
static int
nsys_json_redop(const char *json, uint32_t *redop)
{
    int64_t v;
    if (nsys_json_int(json, "Reduction operation", &v)) {
        *redop = (uint32_t)v;
        return 1;
    }
    static const char *const names[] = {"Sum", "Prod", "Max", "Min", "Avg"};
    const char *p = json ? strstr(json, "\"Reduction operation\"") : NULL;
    for (size_t i = 0; p && i < sizeof(names) / sizeof(names[0]); i++) {
        const char *q = strstr(p + 21, names[i]);
        if (q && q - p < 48) {
            *redop = (uint32_t)i;
            return 1;
        }
    }
    return 0;
}

/* Adds a collective (copied from ev) to those numbered at the end. */
static int
nsys_add_coll(nsys_ctx *k, const dpro_event *ev)
{
    if (nsys_grow((void **)&k->colls, &k->ccap, k->ncolls, sizeof(*k->colls)) != 0)
        return nsys_fail(k->x, DPRO_ERR_NOMEM, "out of memory (collectives)");
    k->colls[k->ncolls++] = *ev;
    return DPRO_OK;
}

/* peer of a collective of op: -1 (unknown) where it has a root or peer, else 0. */
static int32_t
nsys_peer_default(uint32_t op)
{
    return op == DPRO_COLL_BROADCAST || op == DPRO_COLL_REDUCE || op == DPRO_COLL_SEND ||
                   op == DPRO_COLL_RECV
               ? -1
               : 0;
}

/* A collective from an NCCL NVTX range m of operation op and payload json (may be NULL). */
static int
nsys_nvtx_coll(nsys_ctx *k, const dpro_event *m, uint32_t op, const char *json)
{
    static const char def[] = "nsys-nccl:default";
    dpro_event ev = {.kind = DPRO_KIND_COLLECTIVE,
                     .subkind = op,
                     .start_ns = m->start_ns,
                     .end_ns = m->end_ns,
                     .thread = m->thread,
                     .value = DPRO_COLL_TIMING_HOST,
                     .dtype = IMP_DTYPE_UNKNOWN,
                     .peer = nsys_peer_default(op),
                     .comm = dpro_fnv1a(def, sizeof(def) - 1, DPRO_FNV1A_INIT)};
    int64_t v;
    if (nsys_json_int(json, "NCCL communicator ID", &v))
        ev.comm = (uint64_t)v;
    if (nsys_json_int(json, "Message size [bytes]", &v)) {
        if (v < 0 || (uint64_t)v > NSYS_MAX_BYTES)
            return nsys_fail(k->x, DPRO_ERR_LIMIT,
                             "NVTX_EVENTS: %s at %llu ns: \"Message size [bytes]\" %lld out of "
                             "range",
                             dpro_coll_op_name(op), (unsigned long long)m->start_ns, (long long)v);
        ev.bytes = (uint64_t)v;
    }
    if ((op == DPRO_COLL_BROADCAST || op == DPRO_COLL_REDUCE) && nsys_json_int(json, "Root", &v))
        ev.peer = (int32_t)v;
    if ((op == DPRO_COLL_SEND || op == DPRO_COLL_RECV) && nsys_json_int(json, "Peer rank", &v))
        ev.peer = (int32_t)v;
    if (op == DPRO_COLL_ALLREDUCE || op == DPRO_COLL_REDUCE || op == DPRO_COLL_REDUCESCATTER)
        nsys_json_redop(json, &ev.redop);
    k->c->coll_from_nvtx++;
    return nsys_add_coll(k, &ev);
}

/* The domain record of id, or NULL. */
static const nsys_domain *
nsys_domain_of(const nsys_ctx *k, int64_t id)
{
    for (size_t i = 0; i < k->ndomains; i++)
        if (k->domains[i].id == id)
            return &k->domains[i];
    return NULL;
}

/* An NVTX row: start, end, rowid, eventType, rangeId, text, tid, domainId, payload JSON. */
static int
nsys_nvtx_row(nsys_ctx *k, sqlite3_stmt *st, int t)
{
    nsys_export *x = k->x;
    int type = (int)sqlite3_column_int64(st, 3);
    const char *text = (const char *)sqlite3_column_text(st, 5);
    int64_t domain = sqlite3_column_int64(st, 7);
    if (type == x->ev_domain) {
        if (nsys_domain_of(k, domain))
            return DPRO_OK;
        if (nsys_grow((void **)&k->domains, &k->dcap, k->ndomains, sizeof(*k->domains)))
            return nsys_fail(x, DPRO_ERR_NOMEM, "out of memory (NVTX domains)");
        nsys_domain *d = &k->domains[k->ndomains++];
        d->id = domain;
        d->nccl = text && strcmp(text, "NCCL") == 0;
        return nsys_intern_col(k, st, 5, &d->name);
    }
    int range = type == x->ev_push || type == x->ev_startend;
    if (!range && type != x->ev_mark) {
        k->c->nvtx_other++;
        return DPRO_OK;
    }
    if (range && sqlite3_column_type(st, 1) == SQLITE_NULL) {
        k->c->nvtx_unended++;
        return DPRO_OK;
    }
    dpro_event ev = {.kind = DPRO_KIND_MARKER,
                     .subkind = range ? DPRO_MARK_RANGE : DPRO_MARK_INSTANT};
    int rc = DPRO_OK;
    if (range) {
        rc = nsys_times(k, st, t, &ev);
    } else {
        int64_t s = sqlite3_column_int64(st, 0);
        if (s < 0 || (uint64_t)s >= NSYS_MAX_TIME)
            rc = nsys_fail(x, DPRO_ERR_LIMIT,
                           "table NVTX_EVENTS, row %lld: start %lld ns out "
                           "of range",
                           (long long)sqlite3_column_int64(st, 2), (long long)s);
        ev.start_ns = ev.end_ns = (uint64_t)s;
    }
    ev.object = (uint64_t)sqlite3_column_int64(st, 4);
    ev.thread = (uint32_t)sqlite3_column_int64(st, 6);
    const nsys_domain *d = nsys_domain_of(k, domain);
    ev.name2 = d ? d->name : 0;
    if (rc == DPRO_OK)
        rc = nsys_intern_col(k, st, 5, &ev.name);
    if (rc == DPRO_OK)
        rc = nsys_emit(k, &ev);
    if (range)
        k->c->ranges++;
    else
        k->c->marks++;
    /* NCCL's own ranges: ncclAllReduce, ... in its domain */
    int nccl_domain = d ? d->nccl : !k->have_domains;
    uint32_t op = range && nccl_domain && text && strncmp(text, "nccl", 4) == 0
                      ? imp_coll_op_from_text(text + 4)
                      : 0;
    if (rc == DPRO_OK && op)
        rc = nsys_nvtx_coll(k, &ev, op, (const char *)sqlite3_column_text(st, 8));
    return rc;
}

/* Reads the NVTX events of the process (domains first: they name the others). */
static int
nsys_nvtx(nsys_ctx *k)
{
    nsys_export *x = k->x;
    if (!x->has[NSYS_T_NVTX])
        return DPRO_OK;
    int has_tid = nsys_has_col(x, NSYS_T_NVTX, "textId");
    int has_jtext = nsys_has_col(x, NSYS_T_NVTX, "jsonText");
    int has_jid = nsys_has_col(x, NSYS_T_NVTX, "jsonTextId");
    char sql[1400], c[3][64], json[96];
    k->have_domains = nsys_has_col(x, NSYS_T_NVTX, "domainId");
    snprintf(json, sizeof(json), "%s",
             has_jtext && has_jid ? "COALESCE(n.jsonText, j.value)"
             : has_jtext          ? "n.jsonText"
             : has_jid            ? "j.value"
                                  : "NULL");
    snprintf(sql, sizeof(sql),
             "SELECT n.start, n.end, n.rowid, n.eventType, %s, %s, n.globalTid %% 16777216, %s, "
             "%s FROM NVTX_EVENTS n %s %s WHERE n.globalTid >> 24 = ?1 ORDER BY n.eventType != "
             "%d, n.start",
             nsys_col(x, NSYS_T_NVTX, "n", "rangeId", "0", c[0], 64),
             has_tid ? "COALESCE(n.text, s.value)" : "n.text",
             nsys_col(x, NSYS_T_NVTX, "n", "domainId", "0", c[1], 64), json,
             has_tid ? "LEFT JOIN StringIds s ON s.id = n.textId" : "",
             has_jid ? "LEFT JOIN StringIds j ON j.id = n.jsonTextId" : "", x->ev_domain);
    sqlite3_stmt *st = NULL;
    int rc = nsys_prepare(x, NSYS_T_NVTX, sql, &st);
    return rc == DPRO_OK ? nsys_each(k, NSYS_T_NVTX, st, nsys_nvtx_row) : rc;
}

static int
nsys_launch_cmp(const void *a, const void *b)
{
    const nsys_launch *x = a, *y = b;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* Gives collective i the NCCL kernel d: its correlation, stream, device and element type
 * (count = bytes over the element size). */
static void
nsys_coll_take_kernel(nsys_ctx *k, size_t i, nsys_dev *d)
{
    dpro_event *ev = &k->colls[i];
    d->claimed = 1;
    ev->correlation = d->corr;
    ev->stream = d->stream;
    ev->device = d->device;
    if (ev->subkind == 0)
        ev->subkind = d->op;
    if (ev->redop == 0)
        ev->redop = d->redop;
    ev->dtype = d->dtype;
}

/* Count and element type of collective ev from its bytes: ncclUint8 when the type is not
 * known. */
static void
nsys_coll_count(nsys_ctx *k, dpro_event *ev)
{
    size_t size = dpro_nccl_dtype_size(ev->dtype);
    if (ev->bytes == 0)
        return;
    if (size == 0 || ev->bytes % size != 0) {
        ev->dtype = 1; /* ncclUint8 */
        size = 1;
        k->c->bytes_as_u8++;
    }
    ev->count = ev->bytes / size;
}

/* Each NCCL NVTX collective takes the first NCCL kernel launched inside its range on its
 * thread; the kernels no range took become collectives of their own. */
static int
nsys_resolve_colls(nsys_ctx *k)
{
    if (k->nlaunches) /* a process without launches has no array (qsort wants one) */
        qsort(k->launches, k->nlaunches, sizeof(*k->launches), nsys_launch_cmp);
    for (size_t i = 0; i < k->nlaunches; i++)
        k->devs[k->launches[i].dev].launch = i + 1;
    size_t nvtx_colls = k->ncolls;
    for (size_t i = 0; i < nvtx_colls; i++) {
        dpro_event *ev = &k->colls[i];
        size_t lo = 0, hi = k->nlaunches;
        while (lo < hi) { /* the first launch at or after (thread, start) */
            size_t mid = lo + (hi - lo) / 2;
            const nsys_launch *l = &k->launches[mid];
            if (l->tid < ev->thread || (l->tid == ev->thread && l->start < ev->start_ns))
                lo = mid + 1;
            else
                hi = mid;
        }
        for (; lo < k->nlaunches && k->launches[lo].tid == ev->thread &&
               k->launches[lo].start <= ev->end_ns;
             lo++) {
            nsys_dev *d = &k->devs[k->launches[lo].dev];
            if (!d->claimed) {
                nsys_coll_take_kernel(k, i, d);
                break;
            }
        }
        nsys_coll_count(k, ev);
    }
    static const char def[] = "nsys-nccl:default";
    for (size_t i = 0; i < k->ndevs; i++) {
        nsys_dev *d = &k->devs[i];
        if (!d->nccl || d->claimed)
            continue;
        if (d->op == 0) {
            k->c->coll_unknown_op++;
            continue;
        }
        const nsys_launch *l = d->launch ? &k->launches[d->launch - 1] : NULL;
        dpro_event ev = {.kind = DPRO_KIND_COLLECTIVE,
                         .subkind = d->op,
                         .start_ns = l ? l->start : d->start,
                         .end_ns = l ? l->end : d->end,
                         .thread = l ? l->tid : 0,
                         .value = l ? DPRO_COLL_TIMING_HOST : DPRO_COLL_TIMING_DEVICE,
                         .peer = nsys_peer_default(d->op),
                         .comm = dpro_fnv1a(def, sizeof(def) - 1, DPRO_FNV1A_INIT)};
        int rc = nsys_add_coll(k, &ev);
        if (rc != DPRO_OK)
            return rc;
        nsys_coll_take_kernel(k, k->ncolls - 1, d);
        k->colls[k->ncolls - 1].redop = d->op == DPRO_COLL_ALLREDUCE || d->op == DPRO_COLL_REDUCE ||
                                                d->op == DPRO_COLL_REDUCESCATTER
                                            ? d->redop
                                            : 0;
        k->c->coll_from_kernel++;
    }
    return DPRO_OK;
}

static int
nsys_coll_cmp(const void *a, const void *b)
{
    const dpro_event *x = a, *y = b;
    if (x->start_ns != y->start_ns)
        return x->start_ns < y->start_ns ? -1 : 1;
    return x->thread < y->thread ? -1 : x->thread > y->thread;
}

/* Numbers the collectives per communicator in start order and writes them. */
static int
nsys_flush_colls(nsys_ctx *k)
{
    if (k->ncolls)
        qsort(k->colls, k->ncolls, sizeof(*k->colls), nsys_coll_cmp);
    struct {
        uint64_t comm, next;
    } *seq = NULL;
    size_t nseq = 0, cap = 0;
    int rc = DPRO_OK;
    for (size_t i = 0; i < k->ncolls && rc == DPRO_OK; i++) {
        dpro_event *ev = &k->colls[i];
        size_t j = 0;
        while (j < nseq && seq[j].comm != ev->comm)
            j++;
        if (j == nseq) {
            if (nsys_grow((void **)&seq, &cap, nseq, sizeof(*seq)) != 0) {
                rc = nsys_fail(k->x, DPRO_ERR_NOMEM, "out of memory (communicators)");
                break;
            }
            seq[nseq].comm = ev->comm;
            seq[nseq++].next = 0;
        }
        ev->seq = seq[j].next++;
        rc = nsys_emit(k, ev);
        k->c->collectives++;
    }
    free(seq);
    return rc;
}

/* See nsys_int.h. */
int
nsys_map_process(nsys_export *x, int64_t key, dpro_writer *w, nsys_counts *c)
{
    nsys_ctx k = {.x = x, .w = w, .key = key, .c = c};
    int rc = nsys_device_ops(&k);
    if (rc == DPRO_OK)
        rc = nsys_api_calls(&k);
    if (rc == DPRO_OK)
        rc = nsys_nvtx(&k);
    if (rc == DPRO_OK)
        rc = nsys_resolve_colls(&k);
    if (rc == DPRO_OK)
        rc = nsys_flush_colls(&k);
    free(k.devs);
    free(k.hash);
    free(k.launches);
    free(k.colls);
    free(k.domains);
    return rc;
}
