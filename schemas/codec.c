/*
 * codec.c: dpro events <-> one zlib-compressed protobuf batch (trace.proto).
 *
 * Events are grouped by kind; within a group every field becomes a packed column, left
 * out when all its values are zero. Start times, correlation ids and sequence numbers are
 * stored as zig-zag deltas; launch configurations (block_x, shared_mem) against the previous
 * launch of the same kernel name.
 */
#include "config.h"
#include "dprotrace.h"
#include "trace_internal.h"
#include "trace.pb-c.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#ifdef HAVE_LIBDEFLATE
#include <libdeflate.h>
#endif

/* Plain columns: X(proto field, C type of the column, dpro_event member expression, proto
 * field number). A column whose values are all equal is stored once, as a constant. */
#define PLAIN_COLUMNS(X)                                                                           \
    X(thread, uint32_t, thread, 5)                                                                 \
    X(name, uint32_t, name, 6)                                                                     \
    X(name2, uint32_t, name2, 7)                                                                   \
    X(device, uint32_t, device, 8)                                                                 \
    X(stream, uint64_t, stream, 10)                                                                \
    X(subkind, uint32_t, subkind, 11)                                                              \
    X(result, int32_t, result, 12)                                                                 \
    X(shared_mem, uint32_t, shared_mem, 13)                                                        \
    X(object, uint64_t, object, 14)                                                                \
    X(bytes, uint64_t, bytes, 15)                                                                  \
    X(address, uint64_t, address, 16)                                                              \
    X(grid_x, uint32_t, grid[0], 17)                                                               \
    X(grid_y, uint32_t, grid[1], 18)                                                               \
    X(grid_z, uint32_t, grid[2], 19)                                                               \
    X(block_x, uint32_t, block[0], 20)                                                             \
    X(block_y, uint32_t, block[1], 21)                                                             \
    X(block_z, uint32_t, block[2], 22)                                                             \
    X(comm, uint64_t, comm, 23)                                                                    \
    X(elems, uint64_t, count, 25)                                                                  \
    X(dtype, uint32_t, dtype, 26)                                                                  \
    X(redop, uint32_t, redop, 27)                                                                  \
    X(peer, int32_t, peer, 28)                                                                     \
    X(stack, uint32_t, stack, 29)                                                                  \
    X(value, int64_t, value, 30)                                                                   \
    X(has, uint32_t, has, 37)                                                                      \
    X(fwd_thread, uint32_t, fwd_thread, 38)                                                        \
    X(shapes, uint32_t, shapes, 43)                                                                \
    X(dtypes, uint32_t, dtypes, 44)                                                                \
    X(args, uint32_t, args, 45)

/* Delta columns of schema minor 2: X(proto field, dpro_event member, dpro_has bit). An
 * event whose has bit is set stores its value as the zig-zag difference from the value of
 * the previous such event of the group (ids that mostly count up); one without it stores 0
 * and reads as 0. */
#define DELTA_COLUMNS(X)                                                                           \
    X(external_id_delta, external_id, DPRO_HAS_EXTERNAL_ID)                                        \
    X(record_id_delta, record_id, DPRO_HAS_RECORD_ID)                                              \
    X(seq_nr_delta, seq_nr, DPRO_HAS_SEQ_NR)                                                       \
    X(ev_idx_delta, ev_idx, DPRO_HAS_EV_IDX)                                                       \
    X(total_allocated_delta, total_allocated, DPRO_HAS_TOTALS)                                     \
    X(total_reserved_delta, total_reserved, DPRO_HAS_TOTALS)

#define NCOLUMNS_TIMES 5 /* start_hi, duration_hi, correlation, seq, both low-byte columns */
#define COUNT_COL(field, type, member, num) +1
#define NPLAIN (0 PLAIN_COLUMNS(COUNT_COL))
/* scratch per event: time columns, plain columns; plus two constant lists per group */
#define COUNT_DELTA(field, member, bit) +1
#define NDELTA (0 DELTA_COLUMNS(COUNT_DELTA))
#define NCOLUMNS (NCOLUMNS_TIMES + NDELTA + NPLAIN)

#define NKIND_SLOTS (DPRO_KIND_MAX_KNOWN + 1)
#define MAX_UNKNOWN_KINDS 64 /* distinct kinds from newer producers in one batch */
#define MAX_GROUPS (DPRO_KIND_MAX_KNOWN + MAX_UNKNOWN_KINDS)

/* ---- lanes: start times are stored relative to the previous event of the same lane (host
 * thread, or device stream): its end, which makes back-to-back work cost only its gap, or
 * its start for an event nested in it (lane_start_code). Encoder and decoder run the same
 * table, so the rule is deterministic. */
#define LANE_SLOTS 256

typedef struct lane_table {
    uint64_t key[LANE_SLOTS];
    uint64_t last_end[LANE_SLOTS];
    uint64_t last_start[LANE_SLOTS];
    uint8_t used[LANE_SLOTS];
} lane_table;

static int
kind_is_device(uint32_t kind)
{
    return kind == DPRO_KIND_KERNEL || kind == DPRO_KIND_MEMCPY || kind == DPRO_KIND_MEMSET ||
           kind == DPRO_KIND_SYNC;
}

static uint64_t
lane_key(const dpro_event *e)
{
    if (kind_is_device(e->kind))
        return (e->stream * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)e->device << 56) ^ 1;
    return ((uint64_t)e->thread * 0xC2B2AE3D27D4EB4Full) ^ 2;
}

/* Returns the slot of key (claiming a free one), or -1 when the table is full. */
static int
lane_slot(lane_table *t, uint64_t key)
{
    size_t h = (size_t)((key ^ (key >> 29)) & (LANE_SLOTS - 1));
    for (size_t probe = 0; probe < LANE_SLOTS; probe++) {
        size_t i = (h + probe) & (LANE_SLOTS - 1);
        if (!t->used[i]) {
            t->used[i] = 1;
            t->key[i] = key;
            t->last_end[i] = 0;
            t->last_start[i] = 0;
            return (int)i;
        }
        if (t->key[i] == key)
            return (int)i;
    }
    return -1;
}

static uint64_t
zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static int64_t
unzigzag(uint64_t v)
{
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

static uint64_t
gcd64(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Returns the time unit of a group: the largest number that base_ns and every start and
 * end of the group are multiples of (Kineto's microsecond timestamps: 1000), so that start
 * deltas and durations can be stored divided by it. Returns 1 (no scaling) as soon as the
 * gcd reaches 1, and for groups where scaling could not round-trip exactly: an end before
 * its start, an end of zero (the lane rule then uses 1 as the end), timestamps of 2^62
 * or more (their deltas could wrap). */
static uint64_t
group_time_unit(const dpro_event *events, const uint32_t *idx, size_t n, uint64_t base_ns)
{
    uint64_t unit = base_ns;
    for (size_t i = 0; i < n && unit != 1; i++) {
        const dpro_event *e = &events[idx[i]];
        if (e->end_ns < e->start_ns || !e->end_ns || (e->end_ns >> 62))
            return 1;
        unit = gcd64(gcd64(unit, e->start_ns), e->end_ns);
    }
    return unit ? unit : 1;
}

/* Zig-zag within 63 bits: [-2^62, 2^62) <-> [0, 2^63). */
static uint64_t
zigzag63(int64_t v)
{
    return (((uint64_t)v << 1) ^ (uint64_t)(v >> 63)) & (UINT64_MAX >> 1);
}

static int64_t
unzigzag63(uint64_t z)
{
    z &= UINT64_MAX >> 1;
    return (int64_t)(z >> 1) ^ -(int64_t)(z & 1);
}

/* The stored start of an event whose lane's previous event ran from last_start to last_end
 * (times in units of unit, which divides all three unless it is 1):
 *   - at or after last_end (the usual case: back-to-back work): 2 * (start - last_end);
 *   - before last_end (nested in the previous event, as framework ops and their children
 *     are, or out of order): 2 * zigzag63(start - last_start) + 1, so that a child costs
 *     its offset into its parent, not the parent's remaining time.
 * Both halves hold 2^63 starts, so every 64-bit start has exactly one code. */
static uint64_t
lane_start_code(uint64_t start, uint64_t last_start, uint64_t last_end, uint64_t unit)
{
    int64_t after = (int64_t)(start - last_end);
    if (after >= 0)
        return (uint64_t)(unit != 1 ? after / (int64_t)unit : after) << 1;
    int64_t from = (int64_t)(start - last_start);
    if (unit != 1)
        from /= (int64_t)unit;
    else
        from = (int64_t)((uint64_t)from << 1) >> 1; /* start - last_start modulo 2^63 */
    return zigzag63(from) << 1 | 1;
}

/* Inverse of lane_start_code. */
static uint64_t
lane_start_decode(uint64_t code, uint64_t last_start, uint64_t last_end, uint64_t unit)
{
    if (!(code & 1))
        return last_end + (code >> 1) * unit;
    uint64_t start = last_start + (uint64_t)unzigzag63(code >> 1) * unit;
    /* known modulo 2^63: of the two candidates, the one before last_end */
    if ((int64_t)(start - last_end) >= 0)
        start += 1ull << 63;
    return start;
}

/* ---- launch starts: for each correlation of a batch, the start of its first API event
 * and of its first device operation (kernel, copy, set) with their stream and device, which
 * flow events of the same correlation are stored against (trace.proto start_from_launch).
 * Encoder and decoder build the same table from the batch's events in the same order. */
typedef struct launch_slot {
    uint64_t corr; /* 0: free */
    uint64_t api_start, dev_start, dev_stream;
    uint32_t dev_device;
    uint8_t has_api, has_dev;
} launch_slot;

typedef struct launch_table {
    launch_slot *slot;
    size_t cap; /* a power of two, or 0: no table */
} launch_table;

static int
launch_kind(uint32_t kind)
{
    return kind == DPRO_KIND_API || kind == DPRO_KIND_KERNEL || kind == DPRO_KIND_MEMCPY ||
           kind == DPRO_KIND_MEMSET;
}

/* The slot of corr in t (claimed if free). */
static launch_slot *
launch_slot_of(launch_table *t, uint64_t corr)
{
    size_t h = (size_t)(corr * 0x9E3779B97F4A7C15ull) & (t->cap - 1);
    while (t->slot[h].corr && t->slot[h].corr != corr)
        h = (h + 1) & (t->cap - 1);
    t->slot[h].corr = corr;
    return &t->slot[h];
}

/* Builds t from n events of ev, in the order of the groups of a batch: ev[idx[i]] (idx
 * lists them by group, as the encoder groups them), or ev[i] with idx NULL (the decoder's
 * array is in that order). Returns DPRO_OK or DPRO_ERR_NOMEM. */
static int
launch_table_build(launch_table *t, const dpro_event *ev, const uint32_t *idx, size_t n)
{
    size_t nl = 0, cap = 16;
    for (size_t i = 0; i < n; i++)
        nl += launch_kind(ev[idx ? idx[i] : i].kind) && ev[idx ? idx[i] : i].correlation;
    while (cap < 2 * nl)
        cap *= 2;
    if (cap > t->cap) {
        free(t->slot);
        t->slot = malloc(cap * sizeof *t->slot);
        t->cap = t->slot ? cap : 0;
        if (!t->cap)
            return DPRO_ERR_NOMEM;
    }
    memset(t->slot, 0, t->cap * sizeof *t->slot);
    for (size_t i = 0; i < n; i++) {
        const dpro_event *e = &ev[idx ? idx[i] : i];
        if (!launch_kind(e->kind) || !e->correlation)
            continue;
        launch_slot *s = launch_slot_of(t, e->correlation);
        if (e->kind == DPRO_KIND_API && !s->has_api) {
            s->has_api = 1;
            s->api_start = e->start_ns;
        } else if (e->kind != DPRO_KIND_API && !s->has_dev) {
            s->has_dev = 1;
            s->dev_start = e->start_ns;
            s->dev_stream = e->stream;
            s->dev_device = e->device;
        }
    }
    return DPRO_OK;
}

/* The start a flow event f is stored against: its device operation's when f lies on that
 * operation's row (thread = stream, value = device), else its launch's. 1 with *start
 * set, or 0 for none. */
static int
launch_table_find(const launch_table *t, const dpro_event *f, uint64_t corr, uint64_t *start)
{
    if (!t->cap || !corr)
        return 0;
    size_t h = (size_t)(corr * 0x9E3779B97F4A7C15ull) & (t->cap - 1);
    while (t->slot[h].corr) {
        const launch_slot *s = &t->slot[h];
        if (s->corr == corr) {
            if (s->has_dev && f->thread == s->dev_stream && f->value == (int64_t)s->dev_device) {
                *start = s->dev_start;
                return 1;
            }
            *start = s->api_start;
            return s->has_api;
        }
        h = (h + 1) & (t->cap - 1);
    }
    return 0;
}

/* ---- name-relative columns: launch-configuration values coded against the previous event
 * of the group with the same kernel name (trace.proto name_relative_field). The table of
 * previous values is reset per group by bumping its epoch: a slot is in use when its epoch
 * is the table's. Encoder and decoder run the same table. */
#define NAME_SLOTS 2048
#define NAME_PROBES 16
#define NAME_REL_MAX 7 /* shared_mem, grid_x/y/z, block_x/y/z */

typedef struct name_slot {
    uint32_t epoch, name;
    uint32_t last[NAME_REL_MAX]; /* by position in the group's name_relative_field list */
} name_slot;

typedef struct name_table {
    uint32_t epoch;
    name_slot slot[NAME_SLOTS];
} name_table;

/* Empties the table for a new group. */
static void
name_table_reset(name_table *t)
{
    if (++t->epoch == 0) { /* the epoch wrapped: stale slots could look used */
        memset(t->slot, 0, sizeof t->slot);
        t->epoch = 1;
    }
}

/* Returns the previous values of name (zeros for a name not seen yet in the group, whose
 * slot it claims), or NULL when its 16 slots all hold other names. */
static uint32_t *
name_table_lookup(name_table *t, uint32_t name)
{
    for (uint32_t probe = 0; probe < NAME_PROBES; probe++) {
        name_slot *s = &t->slot[(name + probe) & (NAME_SLOTS - 1)];
        if (s->epoch != t->epoch) {
            s->epoch = t->epoch;
            s->name = name;
            memset(s->last, 0, sizeof s->last);
            return s->last;
        }
        if (s->name == name)
            return s->last;
    }
    return NULL;
}

/* The name a launch configuration belongs to: the kernel's, which API events carry in
 * name2. */
static uint32_t
config_name(uint32_t kind, const dpro_event *e)
{
    return kind == DPRO_KIND_API ? e->name2 : e->name;
}

/* v coded against the previous value p: 0 when equal, v + 1 below p, v above it. */
static uint32_t
name_rel_code(uint32_t v, uint32_t p)
{
    return v == p ? 0 : v < p ? v + 1 : v;
}

/* Inverse of name_rel_code. */
static uint32_t
name_rel_decode(uint32_t code, uint32_t p)
{
    return code == 0 ? p : code <= p ? code - 1 : code;
}

/* Grows a scratch buffer to at least need bytes. */
int
reserve(uint8_t **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return DPRO_OK;
    size_t c = *cap ? *cap : 4096;
    while (c < need)
        c *= 2;
    uint8_t *p = realloc(*buf, c);
    if (!p)
        return DPRO_ERR_NOMEM;
    *buf = p;
    *cap = c;
    return DPRO_OK;
}

/* Encodes the events of one kind (idx lists their positions in events) into g, with
 * column arrays carved from mem (ncols * n * 8 bytes). */
static void
encode_group(const dpro_event *events, const uint32_t *idx, size_t n, uint32_t kind,
             uint64_t base_ns, Dpro__Group *g, uint8_t *mem, lane_table *lanes, name_table *names,
             const launch_table *launches)
{
    uint8_t *p = mem;
    dpro__group__init(g);
    g->kind = kind;
    g->count = (uint32_t)n;

    uint64_t *start_hi = (uint64_t *)p;
    p += n * sizeof(uint64_t);
    uint64_t *dur_hi = (uint64_t *)p;
    p += n * sizeof(uint64_t);
    int64_t *corr = (int64_t *)p;
    p += n * sizeof(int64_t);
    int64_t *seq = (int64_t *)p;
    p += n * sizeof(int64_t);
    uint8_t *start_lo = p;
    uint8_t *dur_lo = p + n;
    p += n * sizeof(uint64_t);
    uint64_t prev_start = base_ns, prev_corr = 0, prev_seq = 0;
    int any_dur = 0, any_start_hi = 0, any_dur_hi = 0, any_corr = 0, any_seq = 0;
    int from_launch = kind == DPRO_KIND_FLOW && launches && launches->cap;
    uint64_t unit = from_launch ? 1 : group_time_unit(events, idx, n, base_ns);
    memset(lanes, 0, sizeof *lanes);
    for (size_t i = 0; i < n; i++) {
        const dpro_event *e = &events[idx[i]];
        int slot = lane_slot(lanes, lane_key(e));
        uint64_t d = e->end_ns - e->start_ns, zz, ls;
        if (from_launch && launch_table_find(launches, e, e->correlation, &ls))
            zz = zigzag((int64_t)(e->start_ns - ls));
        else if (slot >= 0 && lanes->last_end[slot])
            zz = lane_start_code(e->start_ns, lanes->last_start[slot], lanes->last_end[slot], unit);
        else if (unit != 1)
            zz = zigzag((int64_t)(e->start_ns - prev_start) / (int64_t)unit);
        else
            zz = zigzag((int64_t)(e->start_ns - prev_start));
        if (unit != 1)
            d /= unit;
        prev_start = e->start_ns;
        if (slot >= 0) {
            lanes->last_end[slot] = e->end_ns ? e->end_ns : 1;
            lanes->last_start[slot] = e->start_ns;
        }
        start_lo[i] = (uint8_t)zz;
        start_hi[i] = zz >> 8;
        any_start_hi |= start_hi[i] != 0;
        dur_lo[i] = (uint8_t)d;
        dur_hi[i] = d >> 8;
        any_dur |= d != 0;
        any_dur_hi |= dur_hi[i] != 0;
        corr[i] = (int64_t)(e->correlation - prev_corr);
        any_corr |= e->correlation != 0;
        prev_corr = e->correlation;
        seq[i] = (int64_t)(e->seq - prev_seq);
        any_seq |= e->seq != 0;
        prev_seq = e->seq;
    }
    if (unit != 1)
        g->time_unit = unit;
    g->start_from_launch = from_launch;
    g->start_lo.len = n;
    g->start_lo.data = start_lo;
    if (any_start_hi) {
        g->n_start_hi = n;
        g->start_hi = start_hi;
    }
    if (any_dur) {
        g->duration_lo.len = n;
        g->duration_lo.data = dur_lo;
    }
    if (any_dur_hi) {
        g->n_duration_hi = n;
        g->duration_hi = dur_hi;
    }
    if (any_corr) {
        g->n_correlation_delta = n;
        g->correlation_delta = corr;
    }
    if (any_seq) {
        g->n_seq_delta = n;
        g->seq_delta = seq;
    }
    /* the delta columns of minor 2, each left out when all its values are zero (and not
     * looked at when no event of the group has its bit: most groups have none) */
    uint32_t group_has = 0;
    for (size_t i = 0; i < n; i++)
        group_has |= events[idx[i]].has;
#define ENCODE_DELTA(field, member, bit)                                                           \
    {                                                                                              \
        int64_t *col = (int64_t *)p;                                                               \
        uint64_t prev = 0;                                                                         \
        int any = 0;                                                                               \
        p += n * sizeof(int64_t);                                                                  \
        for (size_t i = 0; i < n && (group_has & (bit)); i++) {                                    \
            const dpro_event *e = &events[idx[i]];                                                 \
            col[i] = 0;                                                                            \
            if (!(e->has & (bit)))                                                                 \
                continue;                                                                          \
            col[i] = (int64_t)(e->member - prev);                                                  \
            any |= col[i] != 0;                                                                    \
            prev = e->member;                                                                      \
        }                                                                                          \
        if (any) {                                                                                 \
            g->n_##field = n;                                                                      \
            g->field = col;                                                                        \
        }                                                                                          \
    }
    DELTA_COLUMNS(ENCODE_DELTA)
#undef ENCODE_DELTA

    /* the constant lists follow the plain columns' space (NPLAIN uint64 slots each); the
     * name-relative list takes the unused upper half of const_field's */
    uint32_t *const_field = (uint32_t *)(p + NPLAIN * n * sizeof(uint64_t));
    uint64_t *const_value = (uint64_t *)(p + (NPLAIN * n + NPLAIN) * sizeof(uint64_t));
    uint32_t *rel_field = const_field + NPLAIN;
    size_t nconst = 0;
    /* one pass over the events fills every column (the events are read once, in order) */
#define DECLARE_COL(field, type, member, num)                                                      \
    type *col_##field = (type *)p;                                                                 \
    int same_##field = 1;                                                                          \
    p += n * sizeof(uint64_t);
    PLAIN_COLUMNS(DECLARE_COL)
#undef DECLARE_COL
    for (size_t i = 0; i < n; i++) {
        const dpro_event *e = &events[idx[i]];
#define SET_COL(field, type, member, num)                                                          \
    col_##field[i] = (type)e->member;                                                              \
    same_##field &= col_##field[i] == col_##field[0];
        PLAIN_COLUMNS(SET_COL)
#undef SET_COL
    }
#define FINISH_COL(field, type, member, num)                                                       \
    if (n && same_##field) {                                                                       \
        if (col_##field[0] != 0) {                                                                 \
            const_field[nconst] = num;                                                             \
            const_value[nconst++] = (uint64_t)(int64_t)col_##field[0];                             \
        }                                                                                          \
    } else {                                                                                       \
        g->n_##field = n;                                                                          \
        g->field = col_##field;                                                                    \
    }
    PLAIN_COLUMNS(FINISH_COL)
#undef FINISH_COL
    if (nconst) {
        g->n_const_field = g->n_const_value = nconst;
        g->const_field = const_field;
        g->const_value = const_value;
    }

    /* block_x and shared_mem, when packed, against the previous launch of the same kernel
     * (the other configuration columns repeat per iteration, which zlib already finds) */
    uint32_t *rel_col[2];
    size_t nrel = 0;
    if (g->n_block_x) {
        rel_field[nrel] = 20;
        rel_col[nrel++] = col_block_x;
    }
    if (g->n_shared_mem) {
        rel_field[nrel] = 13;
        rel_col[nrel++] = col_shared_mem;
    }
    if (nrel) {
        g->n_name_relative_field = nrel;
        g->name_relative_field = rel_field;
        name_table_reset(names);
        for (size_t i = 0; i < n; i++) {
            uint32_t *last = name_table_lookup(names, config_name(kind, &events[idx[i]]));
            for (size_t k = 0; k < nrel; k++) {
                uint32_t v = rel_col[k][i];
                rel_col[k][i] = name_rel_code(v, last ? last[k] : 0);
                if (last)
                    last[k] = v;
            }
        }
    }
}

struct dpro_codec {
    uint8_t *arena, *raw;
    size_t arena_cap, raw_cap;
    uint32_t *idx;
    size_t idx_cap;
    lane_table lanes;
    name_table names;
    launch_table launches;
    dpro_deflater *dz; /* made on first encode */
#ifdef HAVE_LIBDEFLATE
    struct libdeflate_decompressor *ld; /* made on first decode */
#else
    z_stream iz; /* inflate state */
    int iz_ready;
#endif
};

dpro_codec *
dpro_codec_new(void)
{
    return calloc(1, sizeof(dpro_codec));
}

void
dpro_codec_free(dpro_codec *c)
{
    if (!c)
        return;
    dpro_deflater_free(c->dz);
#ifdef HAVE_LIBDEFLATE
    libdeflate_free_decompressor(c->ld);
#else
    if (c->iz_ready)
        inflateEnd(&c->iz);
#endif
    free(c->launches.slot);
    free(c->arena);
    free(c->raw);
    free(c->idx);
    free(c);
}

int
dpro_codec_encode(dpro_codec *c, const dpro_event *events, size_t n, int zlib_level,
                  const uint8_t **out, size_t *outlen, size_t *rawlen)
{
    int rc = DPRO_OK;
    size_t counts[NKIND_SLOTS] = {0};
    size_t slot_start[NKIND_SLOTS + 1];
    Dpro__Group groups[MAX_GROUPS];
    Dpro__Group *group_ptrs[MAX_GROUPS];
    uint32_t unknown_kinds[MAX_UNKNOWN_KINDS];
    size_t n_unknown = 0, ngroups = 0;
    Dpro__Batch batch;
    uint64_t base_ns = UINT64_MAX;

    *out = NULL;
    *outlen = *rawlen = 0;
    if (n > DPRO_BATCH_MAX_EVENTS || (n && !events))
        return DPRO_ERR_ARG;

    /* Known kinds get their own group; unknown kinds (from newer producers passing
     * through) one group per distinct kind. */
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
                if (n_unknown == MAX_UNKNOWN_KINDS)
                    return DPRO_ERR_ARG;
                unknown_kinds[n_unknown++] = k;
            }
            counts[0]++;
        }
    }
    if (base_ns == UINT64_MAX)
        base_ns = 0;
    rc = reserve((uint8_t **)&c->idx, &c->idx_cap, (n ? n : 1) * sizeof *c->idx);
    if (rc == DPRO_OK)
        rc = reserve(&c->arena, &c->arena_cap,
                     ((n ? n : 1) * NCOLUMNS + MAX_GROUPS * 2 * NPLAIN) * sizeof(uint64_t));
    if (rc != DPRO_OK)
        return rc;

    slot_start[0] = 0;
    for (int k = 0; k < NKIND_SLOTS; k++)
        slot_start[k + 1] = slot_start[k] + counts[k];
    {
        size_t fill[NKIND_SLOTS];
        for (int k = 0; k < NKIND_SLOTS; k++)
            fill[k] = slot_start[k];
        /* unknown kinds first (slot 0), one run per kind */
        for (size_t u = 0; u < n_unknown; u++)
            for (size_t i = 0; i < n; i++)
                if (events[i].kind == unknown_kinds[u])
                    c->idx[fill[0]++] = (uint32_t)i;
        for (size_t i = 0; i < n; i++) {
            uint32_t k = events[i].kind;
            if (k >= 1 && k <= DPRO_KIND_MAX_KNOWN)
                c->idx[fill[k]++] = (uint32_t)i;
        }
    }
    /* flows are stored against the launches of the batch with their id */
    const launch_table *launches = NULL;
    if (counts[DPRO_KIND_FLOW]) {
        rc = launch_table_build(&c->launches, events, c->idx, n);
        if (rc != DPRO_OK)
            return rc;
        launches = &c->launches;
    }
    {
        size_t pos = 0;
        for (size_t u = 0; u < n_unknown; u++) {
            size_t run = 0;
            while (pos + run < counts[0] && events[c->idx[pos + run]].kind == unknown_kinds[u])
                run++;
            encode_group(events, c->idx + pos, run, unknown_kinds[u], base_ns, &groups[ngroups],
                         c->arena + (pos * NCOLUMNS + ngroups * 2 * NPLAIN) * sizeof(uint64_t),
                         &c->lanes, &c->names, NULL);
            group_ptrs[ngroups] = &groups[ngroups];
            ngroups++;
            pos += run;
        }
    }
    for (uint32_t k = 1; k <= DPRO_KIND_MAX_KNOWN; k++) {
        if (!counts[k])
            continue;
        encode_group(events, c->idx + slot_start[k], counts[k], k, base_ns, &groups[ngroups],
                     c->arena +
                         (slot_start[k] * NCOLUMNS + ngroups * 2 * NPLAIN) * sizeof(uint64_t),
                     &c->lanes, &c->names, launches);
        group_ptrs[ngroups] = &groups[ngroups];
        ngroups++;
    }
    dpro__batch__init(&batch);
    batch.schema_major = DPRO_SCHEMA_MAJOR;
    batch.base_ns = base_ns;
    batch.n_groups = ngroups;
    batch.groups = group_ptrs;
    *rawlen = dpro__batch__get_packed_size(&batch);
    rc = reserve(&c->raw, &c->raw_cap, *rawlen ? *rawlen : 1);
    if (rc == DPRO_OK) {
        dpro__batch__pack(&batch, c->raw);
        rc = dpro_deflate(&c->dz, DPRO_DEFLATE_BATCH, zlib_level, c->raw, *rawlen, out, outlen);
    }
    return rc;
}

int
dpro_batch_encode_sized(const dpro_event *events, size_t n, size_t ev_size, int zlib_level,
                        uint8_t **out, size_t *outlen, size_t *rawlen)
{
    int rc = DPRO_OK;
    const uint8_t *z = NULL;
    dpro_event *copy = NULL;
    dpro_codec *c = NULL;

    *out = NULL;
    if (ev_size < DPRO_EVENT_SIZE_MIN || (n && !events))
        return DPRO_ERR_ARG;
    if (ev_size != sizeof *events && n) {
        /* the caller's events are of another version: ours, field by field */
        copy = calloc(n, sizeof *copy);
        if (!copy)
            return DPRO_ERR_NOMEM;
        for (size_t i = 0; i < n; i++)
            dpro_event_import(&copy[i], (const char *)events + i * ev_size, ev_size);
        events = copy;
    }
    c = dpro_codec_new();
    if (!c)
        rc = DPRO_ERR_NOMEM;
    if (rc == DPRO_OK)
        rc = dpro_codec_encode(c, events, n, zlib_level, &z, outlen, rawlen);
    if (rc == DPRO_OK) {
        *out = malloc(*outlen ? *outlen : 1);
        if (*out)
            memcpy(*out, z, *outlen);
        else
            rc = DPRO_ERR_NOMEM;
    }
    dpro_codec_free(c);
    free(copy);
    return rc;
}

/* Inflates len bytes at data into c->raw (room for rawlen + 1 bytes: the spare one detects
 * "more than claimed"), which must come out at exactly rawlen bytes. */
#ifdef HAVE_LIBDEFLATE
static int
inflate_into_raw(dpro_codec *c, const uint8_t *data, size_t len, size_t rawlen, char *errbuf,
                 size_t errlen)
{
    int rc = DPRO_OK;
    size_t got = 0;
    enum libdeflate_result lr;

    if (!c->ld && !(c->ld = libdeflate_alloc_decompressor()))
        return DPRO_ERR_NOMEM;
    lr = libdeflate_zlib_decompress(c->ld, data, len, c->raw, rawlen + 1, &got);
    if (lr == LIBDEFLATE_INSUFFICIENT_SPACE) {
        dpro_set_err(errbuf, errlen, "inflates past its claimed %zu bytes (zlib bomb?)", rawlen);
        rc = DPRO_ERR_LIMIT;
    } else if (lr != LIBDEFLATE_SUCCESS) {
        dpro_set_err(errbuf, errlen, "zlib: %s", "invalid or truncated data");
        rc = DPRO_ERR_CORRUPT;
    } else if (got != rawlen) {
        dpro_set_err(errbuf, errlen, "inflates to %zu bytes, not the claimed %zu", got, rawlen);
        rc = DPRO_ERR_CORRUPT;
    }
    return rc;
}
#else
static int
inflate_into_raw(dpro_codec *c, const uint8_t *data, size_t len, size_t rawlen, char *errbuf,
                 size_t errlen)
{
    int rc = DPRO_OK, zrc;

    if (!c->iz_ready) {
        memset(&c->iz, 0, sizeof c->iz);
        if (inflateInit(&c->iz) != Z_OK)
            return DPRO_ERR_NOMEM;
        c->iz_ready = 1;
    } else {
        inflateReset(&c->iz);
    }
    c->iz.next_in = (Bytef *)data;
    c->iz.avail_in = (uInt)len;
    c->iz.next_out = c->raw;
    c->iz.avail_out = (uInt)(rawlen + 1);
    zrc = inflate(&c->iz, Z_FINISH);
    if (zrc != Z_STREAM_END) {
        if (c->iz.avail_out == 0) {
            dpro_set_err(errbuf, errlen, "inflates past its claimed %zu bytes (zlib bomb?)",
                         rawlen);
            rc = DPRO_ERR_LIMIT;
        } else {
            dpro_set_err(errbuf, errlen, "zlib: %s", c->iz.msg ? c->iz.msg : "truncated data");
            rc = DPRO_ERR_CORRUPT;
        }
    } else if (c->iz.total_out != rawlen) {
        dpro_set_err(errbuf, errlen, "inflates to %lu bytes, not the claimed %zu",
                     (unsigned long)c->iz.total_out, rawlen);
        rc = DPRO_ERR_CORRUPT;
    }
    return rc;
}
#endif

/* Inflates data into c->raw, which must come out at exactly rawlen bytes. */
static int
inflate_exact(dpro_codec *c, const uint8_t *data, size_t len, size_t rawlen, char *errbuf,
              size_t errlen)
{
    int rc = DPRO_OK;

    if (rawlen > DPRO_BATCH_MAX_RAW) {
        dpro_set_err(errbuf, errlen, "claims %zu bytes uncompressed, over the %u limit", rawlen,
                     DPRO_BATCH_MAX_RAW);
        return DPRO_ERR_LIMIT;
    }
    if (len > UINT32_MAX) {
        dpro_set_err(errbuf, errlen, "compressed size %zu too large", len);
        return DPRO_ERR_LIMIT;
    }
    if (rawlen > len * 1032 + 64) { /* deflate cannot expand by more than ~1032:1 */
        dpro_set_err(errbuf, errlen, "claims %zu bytes from %zu compressed: impossible", rawlen,
                     len);
        return DPRO_ERR_CORRUPT;
    }
    rc = reserve(&c->raw, &c->raw_cap, rawlen + 1);
    if (rc != DPRO_OK)
        return rc;
    return inflate_into_raw(c, data, len, rawlen, errbuf, errlen);
}

/* Checks that every present column of g has exactly g->count values. */
static int
group_columns_valid(const Dpro__Group *g)
{
    size_t c = g->count;
    if (g->start_lo.len != c || (g->duration_lo.len != 0 && g->duration_lo.len != c))
        return 0;
#define CHECK_LEN(field)                                                                           \
    if (g->n_##field != 0 && g->n_##field != c)                                                    \
        return 0;
    CHECK_LEN(start_hi)
    CHECK_LEN(duration_hi)
    CHECK_LEN(correlation_delta)
    CHECK_LEN(seq_delta)
#define CHECK_DELTA(field, member, bit) CHECK_LEN(field)
    DELTA_COLUMNS(CHECK_DELTA)
#undef CHECK_DELTA
    if (g->n_const_field != g->n_const_value)
        return 0;
#define CHECK_PLAIN(field, type, member, num) CHECK_LEN(field)
    PLAIN_COLUMNS(CHECK_PLAIN)
#undef CHECK_PLAIN
#undef CHECK_LEN
    return 1;
}

/* Fills off[k] with the offset in dpro_event of the k-th name-relative column of g; returns
 * 0 when the list is invalid: a column that is not a launch configuration, one listed twice,
 * or one that is not packed. */
static int
group_name_relative_offsets(const Dpro__Group *g, size_t off[NAME_REL_MAX])
{
    if (g->n_name_relative_field > NAME_REL_MAX)
        return 0;
    for (size_t k = 0; k < g->n_name_relative_field; k++) {
        size_t packed;
        switch (g->name_relative_field[k]) {
#define REL_CASE(num, field, member)                                                               \
    case num:                                                                                      \
        packed = g->n_##field;                                                                     \
        off[k] = offsetof(dpro_event, member);                                                     \
        break;
            REL_CASE(13, shared_mem, shared_mem)
            REL_CASE(17, grid_x, grid[0])
            REL_CASE(18, grid_y, grid[1])
            REL_CASE(19, grid_z, grid[2])
            REL_CASE(20, block_x, block[0])
            REL_CASE(21, block_y, block[1])
            REL_CASE(22, block_z, block[2])
#undef REL_CASE
        default:
            return 0;
        }
        if (!packed)
            return 0;
        for (size_t j = 0; j < k; j++)
            if (g->name_relative_field[j] == g->name_relative_field[k])
                return 0;
    }
    return 1;
}

int
dpro_codec_decode(dpro_codec *c, const uint8_t *data, size_t len, size_t rawlen,
                  dpro_event **events, size_t *cap, size_t *n, char *errbuf, size_t errlen)
{
    int rc = DPRO_OK;
    Dpro__Batch *batch = NULL;
    size_t total = 0, pos = 0, rel_off[NAME_REL_MAX];

    *n = 0;
    rc = inflate_exact(c, data, len, rawlen, errbuf, errlen);
    if (rc == DPRO_OK) {
        batch = dpro__batch__unpack(NULL, rawlen, c->raw);
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
        } else if (!group_name_relative_offsets(batch->groups[g], rel_off)) {
            dpro_set_err(errbuf, errlen,
                         "group %zu: name_relative_field lists a column that is not a packed "
                         "launch configuration, or one twice",
                         g);
            rc = DPRO_ERR_CORRUPT;
        }
        total += batch->groups[g]->count;
        if (total > DPRO_BATCH_MAX_EVENTS) {
            dpro_set_err(errbuf, errlen, "more than %u events", DPRO_BATCH_MAX_EVENTS);
            rc = DPRO_ERR_LIMIT;
        }
    }
    if (rc == DPRO_OK && total > *cap) {
        dpro_event *ev = realloc(*events, total * sizeof *ev);
        if (!ev) {
            rc = DPRO_ERR_NOMEM;
        } else {
            *events = ev;
            *cap = total;
        }
    }
    if (rc == DPRO_OK && total)
        memset(*events, 0, total * sizeof **events);
    for (size_t gi = 0; rc == DPRO_OK && gi < batch->n_groups; gi++) {
        const Dpro__Group *g = batch->groups[gi];
        if (g->count == 0)
            continue;
        dpro_event *ev = *events + pos;
        uint64_t prev_start = batch->base_ns, corr = 0, seq = 0;
        for (size_t i = 0; i < g->count; i++)
            ev[i].kind = g->kind;
#define READ_COL(field, type, member, num)                                                         \
    if (g->n_##field)                                                                              \
        for (size_t i = 0; i < g->count; i++)                                                      \
            ev[i].member = g->field[i];
        PLAIN_COLUMNS(READ_COL)
#undef READ_COL
        for (size_t k = 0; k < g->n_const_field; k++) {
            switch (g->const_field[k]) {
#define READ_CONST(field, type, member, num)                                                       \
    case num:                                                                                      \
        for (size_t i = 0; i < g->count; i++)                                                      \
            ev[i].member = (type)g->const_value[k];                                                \
        break;
                PLAIN_COLUMNS(READ_CONST)
#undef READ_CONST
            default: /* a column of a newer minor version: not ours to fill */
                break;
            }
        }
        if (g->n_name_relative_field) {
            size_t nrel = g->n_name_relative_field;
            group_name_relative_offsets(g, rel_off); /* validated above */
            name_table_reset(&c->names);
            for (size_t i = 0; i < g->count; i++) {
                uint32_t *last = name_table_lookup(&c->names, config_name(g->kind, &ev[i]));
                for (size_t k = 0; k < nrel; k++) {
                    uint32_t *v = (uint32_t *)((char *)&ev[i] + rel_off[k]);
                    *v = name_rel_decode(*v, last ? last[k] : 0);
                    if (last)
                        last[k] = *v;
                }
            }
        }
        /* major 1 had neither time units nor the nested-start code */
        int nested_rule = batch->schema_major >= 2;
        uint64_t unit = g->time_unit && nested_rule ? g->time_unit : 1;
        /* flows against the launches decoded before them (kind 1 groups come first) */
        int from_launch = g->start_from_launch && g->kind == DPRO_KIND_FLOW;
        if (from_launch) {
            unit = 1;
            rc = launch_table_build(&c->launches, *events, NULL, pos);
            if (rc != DPRO_OK)
                break;
        }
        memset(&c->lanes, 0, sizeof c->lanes);
        for (size_t i = 0; i < g->count; i++) {
            dpro_event *e = &ev[i];
            int slot = lane_slot(&c->lanes, lane_key(e));
            uint64_t zz = g->start_lo.data[i] | (g->n_start_hi ? g->start_hi[i] << 8 : 0);
            uint64_t d = g->duration_lo.len ? g->duration_lo.data[i] : 0, ls;
            if (g->n_duration_hi)
                d |= g->duration_hi[i] << 8;
            if (g->n_correlation_delta)
                corr += (uint64_t)g->correlation_delta[i];
            e->correlation = corr;
            if (from_launch && launch_table_find(&c->launches, e, corr, &ls))
                e->start_ns = ls + (uint64_t)unzigzag(zz);
            else if (slot >= 0 && c->lanes.last_end[slot] && !nested_rule)
                e->start_ns = c->lanes.last_end[slot] + (uint64_t)unzigzag(zz); /* major 1 */
            else if (slot >= 0 && c->lanes.last_end[slot])
                e->start_ns =
                    lane_start_decode(zz, c->lanes.last_start[slot], c->lanes.last_end[slot], unit);
            else
                e->start_ns = prev_start + (uint64_t)unzigzag(zz) * unit;
            e->end_ns = e->start_ns + d * unit;
            prev_start = e->start_ns;
            if (slot >= 0) {
                c->lanes.last_end[slot] = e->end_ns ? e->end_ns : 1;
                c->lanes.last_start[slot] = e->start_ns;
            }
            if (g->n_seq_delta)
                seq += (uint64_t)g->seq_delta[i];
            e->seq = seq;
        }
#define DECODE_DELTA(field, member, bit)                                                           \
    if (g->n_##field) {                                                                            \
        uint64_t acc = 0;                                                                          \
        for (size_t i = 0; i < g->count; i++) {                                                    \
            if (!(ev[i].has & (bit)))                                                              \
                continue;                                                                          \
            acc += (uint64_t)g->field[i];                                                          \
            ev[i].member = acc;                                                                    \
        }                                                                                          \
    }
        DELTA_COLUMNS(DECODE_DELTA)
#undef DECODE_DELTA
        pos += g->count;
    }
    if (batch)
        dpro__batch__free_unpacked(batch, NULL);
    if (rc == DPRO_OK)
        *n = total;
    return rc;
}

int
dpro_batch_decode_sized(const uint8_t *data, size_t len, size_t rawlen, dpro_event **events,
                        size_t *n, size_t ev_size, char *errbuf, size_t errlen)
{
    int rc = DPRO_OK;
    size_t cap = 0;
    dpro_codec *c = NULL;

    *events = NULL;
    *n = 0;
    if (ev_size < DPRO_EVENT_SIZE_MIN || (len && !data))
        return DPRO_ERR_ARG;
    c = dpro_codec_new();
    if (!c)
        return DPRO_ERR_NOMEM;
    rc = dpro_codec_decode(c, data, len, rawlen, events, &cap, n, errbuf, errlen);
    if (rc == DPRO_OK && ev_size != sizeof **events && *n) {
        /* the caller's events are of another version: its layout, field by field */
        char *out = malloc(*n * ev_size);
        if (!out) {
            rc = DPRO_ERR_NOMEM;
        } else {
            for (size_t i = 0; i < *n; i++)
                dpro_event_export(out + i * ev_size, ev_size, &(*events)[i]);
            free(*events);
            *events = (dpro_event *)(void *)out;
        }
    }
    if (rc != DPRO_OK) {
        free(*events);
        *events = NULL;
        *n = 0;
    }
    dpro_codec_free(c);
    return rc;
}
