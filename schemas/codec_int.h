/*
 * codec_int.h: what the batch encoder (codec.c) and decoder (codec_decode.c) share: the
 * column lists, the lane, launch and name tables both run in the same order (so that the
 * decoder rebuilds the encoder's references), and the codec's state.
 */
#ifndef DPRO_SCHEMAS_CODEC_INT_H
#define DPRO_SCHEMAS_CODEC_INT_H

#include "config.h"
#include "dprotrace.h"
#include "trace_internal.h"
#include "trace.pb-c.h"
#include "varint.h"

#include <stddef.h>
#include <stdint.h>
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
    X(args, uint32_t, args, 45)                                                                    \
    X(et_deps, uint32_t, et_deps, 51)

/* Delta columns of schema minor 2 (and 3: the execution-trace ids): X(proto field,
 * dpro_event member, dpro_has bit). An event whose has bit is set stores its value as the
 * zig-zag difference from the value of the previous such event of the group (ids that
 * mostly count up); one without it stores 0 and reads as 0. */
#define DELTA_COLUMNS(X)                                                                           \
    X(external_id_delta, external_id, DPRO_HAS_EXTERNAL_ID)                                        \
    X(record_id_delta, record_id, DPRO_HAS_RECORD_ID)                                              \
    X(seq_nr_delta, seq_nr, DPRO_HAS_SEQ_NR)                                                       \
    X(ev_idx_delta, ev_idx, DPRO_HAS_EV_IDX)                                                       \
    X(total_allocated_delta, total_allocated, DPRO_HAS_TOTALS)                                     \
    X(total_reserved_delta, total_reserved, DPRO_HAS_TOTALS)                                       \
    X(et_id_delta, et_id, DPRO_HAS_ET_ID)                                                          \
    X(et_parent_delta, et_parent, DPRO_HAS_ET_PARENT)

#define NCOLUMNS_TIMES 5 /* start_hi, duration_hi, correlation, seq, both low-byte columns */
#define COUNT_COL(field, type, member, num) +1
#define NPLAIN (0 PLAIN_COLUMNS(COUNT_COL))
/* scratch per event: time columns, plain columns; plus two constant lists per group */
#define COUNT_DELTA(field, member, bit) +1
#define NDELTA (0 DELTA_COLUMNS(COUNT_DELTA))
#define NCOLUMNS (NCOLUMNS_TIMES + NDELTA + NPLAIN)

/* The encoder's groups, in batch order (a slot each): unknown kinds (slot 0, a group per
 * kind), the API calls without a launch configuration (1), those with one (2: a kernel
 * launch's grid and block, which the other calls lack, while launches lack their object,
 * address, bytes and result: apart, neither group carries the other's columns of zeros),
 * then every other known kind k (slot k + 1). */
#define NGROUP_SLOTS (DPRO_KIND_MAX_KNOWN + 2)
#define SLOT_API_LAUNCH 2
#define MAX_UNKNOWN_KINDS 64 /* distinct kinds from newer producers in one batch */
#define MAX_GROUPS (NGROUP_SLOTS - 1 + MAX_UNKNOWN_KINDS)

/* The slot of the known kind k other than DPRO_KIND_API. */
static inline size_t
kind_slot(uint32_t k)
{
    return (size_t)k + 1;
}

/* The encoder's slot of e (NGROUP_SLOTS above). */
static inline size_t
group_slot(const dpro_event *e)
{
    uint32_t k = e->kind;
    if (k < 1 || k > DPRO_KIND_MAX_KNOWN)
        return 0;
    if (k == DPRO_KIND_API)
        return (e->grid[0] | e->block[0]) ? SLOT_API_LAUNCH : 1;
    return kind_slot(k);
}

/* The kind of the events of slot s >= 1. */
static inline uint32_t
slot_kind(size_t s)
{
    return s <= SLOT_API_LAUNCH ? DPRO_KIND_API : (uint32_t)s - 1;
}

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

static inline int
kind_is_device(uint32_t kind)
{
    return kind == DPRO_KIND_KERNEL || kind == DPRO_KIND_MEMCPY || kind == DPRO_KIND_MEMSET ||
           kind == DPRO_KIND_SYNC;
}

static inline uint64_t
lane_key(const dpro_event *e)
{
    if (kind_is_device(e->kind))
        return (e->stream * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)e->device << 56) ^ 1;
    return ((uint64_t)e->thread * 0xC2B2AE3D27D4EB4Full) ^ 2;
}

/* Returns the slot of key (claiming a free one), or -1 when the table is full. */
static inline int
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

/* Zig-zag within 63 bits: [-2^62, 2^62) <-> [0, 2^63). */
static inline uint64_t
zigzag63(int64_t v)
{
    return (((uint64_t)v << 1) ^ (uint64_t)(v >> 63)) & (UINT64_MAX >> 1);
}

static inline int64_t
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
static inline uint64_t
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
static inline uint64_t
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

static inline int
launch_kind(uint32_t kind)
{
    return kind == DPRO_KIND_API || kind == DPRO_KIND_KERNEL || kind == DPRO_KIND_MEMCPY ||
           kind == DPRO_KIND_MEMSET;
}

/* The encoder lists a batch's events by group as byte offsets into its array (an index
 * times sizeof(dpro_event)), not indices: each column loop then reads an event with one
 * add, not a multiply by the event's size. Every offset fits in 32 bits. */
_Static_assert((uint64_t)DPRO_BATCH_MAX_EVENTS * sizeof(dpro_event) <= UINT32_MAX,
               "event offsets in 32 bits");

/* The event at byte offset off of events. */
static inline const dpro_event *
ev_at(const dpro_event *events, uint32_t off)
{
    return (const dpro_event *)(const void *)((const char *)events + off);
}

/* The i-th event of a batch's groups: at offset idx[i] of ev, or ev[i] with idx NULL. */
static inline const dpro_event *
launch_ev(const dpro_event *ev, const uint32_t *idx, size_t i)
{
    return idx ? ev_at(ev, idx[i]) : &ev[i];
}

/* Builds t from n events of ev, in the order of the groups of a batch: the events at the
 * byte offsets idx lists (by group, as the encoder groups them), or ev[i] with idx NULL
 * (the decoder's array is in that order). Returns DPRO_OK or DPRO_ERR_NOMEM. */
__attribute__((visibility("hidden"))) int launch_table_build(launch_table *t, const dpro_event *ev,
                                                             const uint32_t *idx, size_t n);

/* The start a flow event f is stored against: its device operation's when f lies on that
 * operation's row (thread = stream, value = device), else its launch's. 1 with *start
 * set, or 0 for none. */
static inline int
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
static inline void
name_table_reset(name_table *t)
{
    if (++t->epoch == 0) { /* the epoch wrapped: stale slots could look used */
        memset(t->slot, 0, sizeof t->slot);
        t->epoch = 1;
    }
}

/* Returns the previous values of name (zeros for a name not seen yet in the group, whose
 * slot it claims), or NULL when its 16 slots all hold other names. */
static inline uint32_t *
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
static inline uint32_t
config_name(uint32_t kind, const dpro_event *e)
{
    return kind == DPRO_KIND_API ? e->name2 : e->name;
}

/* v coded against the previous value p: 0 when equal, v + 1 below p, v above it. */
static inline uint32_t
name_rel_code(uint32_t v, uint32_t p)
{
    return v == p ? 0 : v < p ? v + 1 : v;
}

/* Inverse of name_rel_code. */
static inline uint32_t
name_rel_decode(uint32_t code, uint32_t p)
{
    return code == 0 ? p : code <= p ? code - 1 : code;
}

/* ---- the batch in the wire format (codec_pack.c): the bytes protobuf-c's packer writes for
 * the same message, in one pass. */

/* Returns the most bytes codec_batch_pack can write for b. */
__attribute__((visibility("hidden"))) size_t codec_batch_pack_bound(const Dpro__Batch *b);

/* Writes b at out (room for codec_batch_pack_bound(b) bytes) as dpro__batch__pack would;
 * returns the bytes written. */
__attribute__((visibility("hidden"))) size_t codec_batch_pack(const Dpro__Batch *b, uint8_t *out);

struct dpro_codec {
    uint8_t *arena, *raw;
    size_t arena_cap, raw_cap;
    uint32_t *idx; /* the events by group: byte offsets (ev_at) */
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

#endif
