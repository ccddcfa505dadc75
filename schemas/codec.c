/*
 * codec.c: dpro events <-> one zlib-compressed protobuf batch (trace.proto).
 *
 * Events are grouped by kind; within a group every field becomes a packed column, left
 * out when all its values are zero. Start times, correlation ids and sequence numbers are
 * stored as zig-zag deltas.
 */
#include "dprotrace.h"
#include "trace_internal.h"
#include "trace.pb-c.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* Plain columns: X(proto field, C type of the column, dpro_event member expression). */
#define PLAIN_COLUMNS(X)                                                                     \
    X(thread, uint32_t, thread)                                                              \
    X(name, uint32_t, name)                                                                  \
    X(name2, uint32_t, name2)                                                                \
    X(device, uint32_t, device)                                                              \
    X(stream, uint64_t, stream)                                                              \
    X(subkind, uint32_t, subkind)                                                            \
    X(result, int32_t, result)                                                               \
    X(shared_mem, uint32_t, shared_mem)                                                      \
    X(object, uint64_t, object)                                                              \
    X(bytes, uint64_t, bytes)                                                                \
    X(address, uint64_t, address)                                                            \
    X(grid_x, uint32_t, grid[0])                                                             \
    X(grid_y, uint32_t, grid[1])                                                             \
    X(grid_z, uint32_t, grid[2])                                                             \
    X(block_x, uint32_t, block[0])                                                           \
    X(block_y, uint32_t, block[1])                                                           \
    X(block_z, uint32_t, block[2])                                                           \
    X(comm, uint64_t, comm)                                                                  \
    X(elems, uint64_t, count)                                                                \
    X(dtype, uint32_t, dtype)                                                                \
    X(redop, uint32_t, redop)                                                                \
    X(peer, int32_t, peer)                                                                   \
    X(stack, uint32_t, stack)                                                                \
    X(value, int64_t, value)

#define NKIND_SLOTS (DPRO_KIND_MAX_KNOWN + 1)

const char *
dpro_status_str(int status)
{
    switch (status) {
    case DPRO_OK:
        return "ok";
    case DPRO_ERR_ARG:
        return "invalid argument";
    case DPRO_ERR_NOMEM:
        return "out of memory";
    case DPRO_ERR_IO:
        return "input/output error";
    case DPRO_ERR_NOT_TRACE:
        return "not a dpro trace";
    case DPRO_ERR_VERSION:
        return "trace written by a newer dpro (schema major version)";
    case DPRO_ERR_CORRUPT:
        return "corrupt trace data";
    case DPRO_ERR_LIMIT:
        return "size limit exceeded";
    }
    return "unknown status";
}

const char *
dpro_kind_name(uint32_t kind)
{
    static const char *const names[] = {"unknown", "api",        "kernel", "memcpy", "memset",
                                        "sync",    "collective", "memory", "marker"};
    return kind < sizeof names / sizeof names[0] ? names[kind] : "unknown";
}

const char *
dpro_coll_op_name(uint32_t op)
{
    static const char *const names[] = {"unknown",   "allreduce",     "broadcast",
                                        "reduce",    "allgather",     "reducescatter",
                                        "send",      "recv",          "alltoall"};
    return op < sizeof names / sizeof names[0] ? names[op] : "unknown";
}

void
dpro_set_err(char *errbuf, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    if (!errbuf || !errlen)
        return;
    va_start(ap, fmt);
    vsnprintf(errbuf, errlen, fmt, ap);
    va_end(ap);
}

/* Encodes the events of one kind (idx lists their positions in events) into g. Column
 * arrays come from *arena, which the caller frees. */
static int
encode_group(const dpro_event *events, const uint32_t *idx, size_t n, uint32_t kind,
             uint64_t base_ns, Dpro__Group *g, void **arena)
{
    int rc = DPRO_OK;
    size_t ncols = 4; /* start, duration, correlation, seq */
#define COUNT_COL(field, type, member) ncols++;
    PLAIN_COLUMNS(COUNT_COL)
#undef COUNT_COL
    uint8_t *mem = malloc(ncols * n * sizeof(uint64_t));
    uint8_t *p = mem;
    if (!mem)
        return DPRO_ERR_NOMEM;
    *arena = mem;
    dpro__group__init(g);
    g->kind = kind;
    g->count = (uint32_t)n;

    /* delta columns */
    int64_t *start = (int64_t *)p;
    p += n * sizeof(int64_t);
    uint64_t *dur = (uint64_t *)p;
    p += n * sizeof(uint64_t);
    int64_t *corr = (int64_t *)p;
    p += n * sizeof(int64_t);
    int64_t *seq = (int64_t *)p;
    p += n * sizeof(int64_t);
    uint64_t prev_start = base_ns, prev_corr = 0, prev_seq = 0;
    int any_dur = 0, any_corr = 0, any_seq = 0;
    for (size_t i = 0; i < n; i++) {
        const dpro_event *e = &events[idx[i]];
        start[i] = (int64_t)(e->start_ns - prev_start);
        prev_start = e->start_ns;
        dur[i] = e->end_ns - e->start_ns;
        any_dur |= dur[i] != 0;
        corr[i] = (int64_t)(e->correlation - prev_corr);
        any_corr |= e->correlation != 0;
        prev_corr = e->correlation;
        seq[i] = (int64_t)(e->seq - prev_seq);
        any_seq |= e->seq != 0;
        prev_seq = e->seq;
    }
    g->n_start_delta = n;
    g->start_delta = start;
    if (any_dur) {
        g->n_duration = n;
        g->duration = dur;
    }
    if (any_corr) {
        g->n_correlation_delta = n;
        g->correlation_delta = corr;
    }
    if (any_seq) {
        g->n_seq_delta = n;
        g->seq_delta = seq;
    }

#define FILL_COL(field, type, member)                                                        \
    {                                                                                        \
        type *col = (type *)p;                                                               \
        int any = 0;                                                                         \
        p += n * sizeof(uint64_t);                                                           \
        for (size_t i = 0; i < n; i++) {                                                     \
            col[i] = (type)events[idx[i]].member;                                            \
            any |= col[i] != 0;                                                              \
        }                                                                                    \
        if (any) {                                                                           \
            g->n_##field = n;                                                                \
            g->field = col;                                                                  \
        }                                                                                    \
    }
    PLAIN_COLUMNS(FILL_COL)
#undef FILL_COL
    return rc;
}

int
dpro_batch_encode(const dpro_event *events, size_t n, int zlib_level, uint8_t **out,
                  size_t *outlen, size_t *rawlen)
{
    int rc = DPRO_OK;
    size_t counts[NKIND_SLOTS + 1] = {0};
    uint32_t *idx = NULL;
    size_t slot_start[NKIND_SLOTS + 2];
    Dpro__Group groups[NKIND_SLOTS + 1];
    Dpro__Group *group_ptrs[NKIND_SLOTS + 1];
    void *arenas[NKIND_SLOTS + 1] = {0};
    uint32_t unknown_kinds[64];
    size_t n_unknown = 0, ngroups = 0;
    uint8_t *raw = NULL, *z = NULL;
    Dpro__Batch batch;
    uint64_t base_ns = UINT64_MAX;

    *out = NULL;
    *outlen = *rawlen = 0;
    if (n > DPRO_BATCH_MAX_EVENTS || (n && !events))
        return DPRO_ERR_ARG;

    /* Known kinds get their own slot; unknown kinds (from newer producers passing
     * through) are grouped one group per distinct kind, up to 64. */
    for (size_t i = 0; i < n; i++) {
        uint32_t k = events[i].kind;
        if (events[i].start_ns < base_ns)
            base_ns = events[i].start_ns;
        if (k >= 1 && k <= DPRO_KIND_MAX_KNOWN) {
            counts[k]++;
        } else {
            size_t j;
            for (j = 0; j < n_unknown && unknown_kinds[j] != k; j++)
                ;
            if (j == n_unknown) {
                if (n_unknown == 64)
                    return DPRO_ERR_ARG;
                unknown_kinds[n_unknown++] = k;
            }
            counts[0]++;
        }
    }
    if (base_ns == UINT64_MAX)
        base_ns = 0;

    idx = malloc((n ? n : 1) * sizeof *idx);
    if (!idx)
        return DPRO_ERR_NOMEM;
    slot_start[0] = 0;
    for (int k = 0; k <= NKIND_SLOTS; k++)
        slot_start[k + 1] = slot_start[k] + (k < NKIND_SLOTS ? counts[k] : 0);
    {
        size_t fill[NKIND_SLOTS];
        for (int k = 0; k < NKIND_SLOTS; k++)
            fill[k] = slot_start[k];
        /* unknown kinds first (slot 0), ordered by kind so each forms a run */
        for (size_t u = 0; u < n_unknown; u++)
            for (size_t i = 0; i < n; i++)
                if (events[i].kind == unknown_kinds[u])
                    idx[fill[0]++] = (uint32_t)i;
        for (size_t i = 0; i < n; i++) {
            uint32_t k = events[i].kind;
            if (k >= 1 && k <= DPRO_KIND_MAX_KNOWN)
                idx[fill[k]++] = (uint32_t)i;
        }
    }

    /* unknown-kind runs */
    {
        size_t pos = 0;
        for (size_t u = 0; u < n_unknown && rc == DPRO_OK; u++) {
            size_t run = 0;
            while (pos + run < counts[0] && events[idx[pos + run]].kind == unknown_kinds[u])
                run++;
            rc = encode_group(events, idx + pos, run, unknown_kinds[u], base_ns,
                              &groups[ngroups], &arenas[ngroups]);
            group_ptrs[ngroups] = &groups[ngroups];
            ngroups++;
            pos += run;
        }
    }
    for (uint32_t k = 1; k <= DPRO_KIND_MAX_KNOWN && rc == DPRO_OK; k++) {
        if (!counts[k])
            continue;
        rc = encode_group(events, idx + slot_start[k], counts[k], k, base_ns, &groups[ngroups],
                          &arenas[ngroups]);
        group_ptrs[ngroups] = &groups[ngroups];
        ngroups++;
    }
    if (rc == DPRO_OK) {
        dpro__batch__init(&batch);
        batch.schema_major = DPRO_SCHEMA_MAJOR;
        batch.base_ns = base_ns;
        batch.n_groups = ngroups;
        batch.groups = group_ptrs;
        *rawlen = dpro__batch__get_packed_size(&batch);
        raw = malloc(*rawlen ? *rawlen : 1);
        if (!raw)
            rc = DPRO_ERR_NOMEM;
    }
    if (rc == DPRO_OK) {
        uLongf zlen = compressBound(*rawlen);
        dpro__batch__pack(&batch, raw);
        z = malloc(zlen);
        if (!z)
            rc = DPRO_ERR_NOMEM;
        else if (compress2(z, &zlen, raw, *rawlen, zlib_level > 0 ? zlib_level : 6) != Z_OK)
            rc = DPRO_ERR_NOMEM;
        else {
            *out = z;
            *outlen = zlen;
            z = NULL;
        }
    }
    for (size_t g = 0; g < ngroups + 1 && g <= NKIND_SLOTS; g++)
        free(arenas[g]);
    free(z);
    free(raw);
    free(idx);
    return rc;
}

/* Inflates data into a new buffer of exactly rawlen bytes; more or less is corruption. */
static int
inflate_exact(const uint8_t *data, size_t len, size_t rawlen, uint8_t **out, char *errbuf,
              size_t errlen)
{
    int rc = DPRO_OK, zrc;
    z_stream zs;
    uint8_t *buf;

    *out = NULL;
    if (rawlen > DPRO_BATCH_MAX_RAW) {
        dpro_set_err(errbuf, errlen, "claims %zu bytes uncompressed, over the %u limit", rawlen,
                     DPRO_BATCH_MAX_RAW);
        return DPRO_ERR_LIMIT;
    }
    buf = malloc(rawlen + 1);
    if (!buf)
        return DPRO_ERR_NOMEM;
    memset(&zs, 0, sizeof zs);
    if (inflateInit(&zs) != Z_OK) {
        free(buf);
        return DPRO_ERR_NOMEM;
    }
    zs.next_in = (Bytef *)data;
    zs.avail_in = (uInt)len;
    zs.next_out = buf;
    zs.avail_out = (uInt)(rawlen + 1); /* one spare byte detects "more than claimed" */
    zrc = inflate(&zs, Z_FINISH);
    if (zrc != Z_STREAM_END) {
        if (zs.avail_out == 0) {
            dpro_set_err(errbuf, errlen, "inflates past its claimed %zu bytes (zlib bomb?)",
                         rawlen);
            rc = DPRO_ERR_LIMIT;
        } else {
            dpro_set_err(errbuf, errlen, "zlib: %s", zs.msg ? zs.msg : "truncated data");
            rc = DPRO_ERR_CORRUPT;
        }
    } else if (zs.total_out != rawlen) {
        dpro_set_err(errbuf, errlen, "inflates to %lu bytes, not the claimed %zu",
                     (unsigned long)zs.total_out, rawlen);
        rc = DPRO_ERR_CORRUPT;
    }
    inflateEnd(&zs);
    if (rc == DPRO_OK)
        *out = buf;
    else
        free(buf);
    return rc;
}

/* Checks that every present column of g has exactly g->count values. */
static int
group_columns_valid(const Dpro__Group *g)
{
    size_t c = g->count;
    if (g->n_start_delta != c)
        return 0;
#define CHECK_LEN(field)                                                                     \
    if (g->n_##field != 0 && g->n_##field != c)                                              \
        return 0;
    CHECK_LEN(duration)
    CHECK_LEN(correlation_delta)
    CHECK_LEN(seq_delta)
#define CHECK_PLAIN(field, type, member) CHECK_LEN(field)
    PLAIN_COLUMNS(CHECK_PLAIN)
#undef CHECK_PLAIN
#undef CHECK_LEN
    return 1;
}

int
dpro_batch_decode(const uint8_t *data, size_t len, size_t rawlen, dpro_event **events,
                  size_t *n, char *errbuf, size_t errlen)
{
    int rc = DPRO_OK;
    uint8_t *raw = NULL;
    Dpro__Batch *batch = NULL;
    dpro_event *ev = NULL;
    size_t total = 0, pos = 0;

    *events = NULL;
    *n = 0;
    rc = inflate_exact(data, len, rawlen, &raw, errbuf, errlen);
    if (rc == DPRO_OK) {
        batch = dpro__batch__unpack(NULL, rawlen, raw);
        if (!batch) {
            dpro_set_err(errbuf, errlen, "protobuf batch does not parse");
            rc = DPRO_ERR_CORRUPT;
        }
    }
    if (rc == DPRO_OK && batch->schema_major > DPRO_SCHEMA_MAJOR) {
        dpro_set_err(errbuf, errlen, "batch of schema major version %u (this dpro reads %d)",
                     batch->schema_major, DPRO_SCHEMA_MAJOR);
        rc = DPRO_ERR_VERSION;
    }
    for (size_t g = 0; rc == DPRO_OK && g < batch->n_groups; g++) {
        if (!group_columns_valid(batch->groups[g])) {
            dpro_set_err(errbuf, errlen, "group %zu: column length differs from count %u", g,
                         batch->groups[g]->count);
            rc = DPRO_ERR_CORRUPT;
        }
        total += batch->groups[g]->count;
        if (total > DPRO_BATCH_MAX_EVENTS) {
            dpro_set_err(errbuf, errlen, "more than %u events", DPRO_BATCH_MAX_EVENTS);
            rc = DPRO_ERR_LIMIT;
        }
    }
    if (rc == DPRO_OK) {
        ev = calloc(total ? total : 1, sizeof *ev);
        if (!ev)
            rc = DPRO_ERR_NOMEM;
    }
    for (size_t gi = 0; rc == DPRO_OK && gi < batch->n_groups; gi++) {
        const Dpro__Group *g = batch->groups[gi];
        uint64_t t = batch->base_ns, corr = 0, seq = 0;
        for (size_t i = 0; i < g->count; i++) {
            dpro_event *e = &ev[pos + i];
            e->kind = g->kind;
            t += (uint64_t)g->start_delta[i];
            e->start_ns = t;
            e->end_ns = t + (g->n_duration ? g->duration[i] : 0);
            if (g->n_correlation_delta)
                corr += (uint64_t)g->correlation_delta[i];
            e->correlation = corr;
            if (g->n_seq_delta)
                seq += (uint64_t)g->seq_delta[i];
            e->seq = seq;
        }
#define READ_COL(field, type, member)                                                        \
    if (g->n_##field)                                                                        \
        for (size_t i = 0; i < g->count; i++)                                                \
            ev[pos + i].member = g->field[i];
        PLAIN_COLUMNS(READ_COL)
#undef READ_COL
        pos += g->count;
    }
    if (batch)
        dpro__batch__free_unpacked(batch, NULL);
    free(raw);
    if (rc == DPRO_OK) {
        *events = ev;
        *n = total;
    } else {
        free(ev);
    }
    return rc;
}
