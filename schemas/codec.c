/*
 * codec.c: dpro events -> one zlib-compressed protobuf batch (trace.proto); codec_decode.c
 * reads it back.
 *
 * Events are grouped by kind; within a group every field becomes a packed column, left
 * out when all its values are zero. Start times, correlation ids and sequence numbers are
 * stored as zig-zag deltas; launch configurations (block_x, shared_mem) against the previous
 * launch of the same kernel name.
 */
#include "codec_int.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

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
        const dpro_event *e = ev_at(events, idx[i]);
        if (e->end_ns < e->start_ns || !e->end_ns || (e->end_ns >> 62))
            return 1;
        unit = gcd64(gcd64(unit, e->start_ns), e->end_ns);
    }
    return unit ? unit : 1;
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

/* launch_table_build: codec_int.h. */
int
launch_table_build(launch_table *t, const dpro_event *ev, const uint32_t *idx, size_t n)
{
    size_t nl = 0, cap = 16;
    for (size_t i = 0; i < n; i++)
        nl += launch_kind(launch_ev(ev, idx, i)->kind) && launch_ev(ev, idx, i)->correlation;
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
        const dpro_event *e = launch_ev(ev, idx, i);
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

/* Fills the time columns of g (start low byte and high part, duration low byte and high
 * part, correlation and sequence deltas) for the n events of one kind, carving them from
 * *p, which moves past them (5 * n * 8 bytes). */
static void
encode_times(const dpro_event *events, const uint32_t *idx, size_t n, uint32_t kind,
             uint64_t base_ns, Dpro__Group *g, uint8_t **p, lane_table *lanes,
             const launch_table *launches)
{
    uint64_t *start_hi = (uint64_t *)*p;
    *p += n * sizeof(uint64_t);
    uint64_t *dur_hi = (uint64_t *)*p;
    *p += n * sizeof(uint64_t);
    int64_t *corr = (int64_t *)*p;
    *p += n * sizeof(int64_t);
    int64_t *seq = (int64_t *)*p;
    *p += n * sizeof(int64_t);
    uint8_t *start_lo = *p;
    uint8_t *dur_lo = *p + n;
    *p += n * sizeof(uint64_t);
    uint64_t prev_start = base_ns, prev_corr = 0, prev_seq = 0;
    int any_dur = 0, any_start_hi = 0, any_dur_hi = 0, any_corr = 0, any_seq = 0;
    int from_launch = kind == DPRO_KIND_FLOW && launches && launches->cap;
    uint64_t unit = from_launch ? 1 : group_time_unit(events, idx, n, base_ns);
    memset(lanes, 0, sizeof *lanes);
    for (size_t i = 0; i < n; i++) {
        const dpro_event *e = ev_at(events, idx[i]);
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
}

/* Fills the delta columns of minor 2 (DELTA_COLUMNS), carving them from *p, which moves
 * past them (NDELTA * n * 8 bytes). Each is left out when all its values are zero, and not
 * looked at when no event of the group has its bit (most groups have none). */
static void
encode_deltas(const dpro_event *events, const uint32_t *idx, size_t n, Dpro__Group *g, uint8_t **p)
{
    uint32_t group_has = 0;
    for (size_t i = 0; i < n; i++)
        group_has |= ev_at(events, idx[i])->has;
#define ENCODE_DELTA(field, member, bit)                                                           \
    {                                                                                              \
        int64_t *col = (int64_t *)*p;                                                              \
        uint64_t prev = 0;                                                                         \
        int any = 0;                                                                               \
        *p += n * sizeof(int64_t);                                                                 \
        for (size_t i = 0; i < n && (group_has & (bit)); i++) {                                    \
            const dpro_event *e = ev_at(events, idx[i]);                                           \
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
}

/* An event as 16-byte vectors (SSE2 on x86-64, NEON on arm64; GCC and clang), and the
 * 8-byte word that may be left over. */
typedef uint64_t diff_vec __attribute__((vector_size(16)));
#define EVENT_VECS (sizeof(dpro_event) / sizeof(diff_vec))
#define EVENT_TAIL (sizeof(dpro_event) % sizeof(diff_vec))

/* Sets diff (sizeof(dpro_event) bytes) to the bits in which some event of the n at idx
 * differs from the first: one pass of XORs over whole events, so that the columns that
 * turn out constant (most of a group's) cost no per-event work of their own. */
static void
group_diff_bits(const dpro_event *events, const uint32_t *idx, size_t n, unsigned char *diff)
{
    diff_vec first[EVENT_VECS], acc[EVENT_VECS] = {{0}};
    uint64_t first_tail = 0, acc_tail = 0;
    _Static_assert(EVENT_TAIL == 0 || EVENT_TAIL == sizeof(uint64_t), "dpro_event in words");
    if (n) {
        memcpy(first, ev_at(events, idx[0]), sizeof first);
        memcpy(&first_tail, (const char *)ev_at(events, idx[0]) + sizeof first, EVENT_TAIL);
    }
    for (size_t i = 1; i < n; i++) {
        const char *e = (const char *)ev_at(events, idx[i]);
#pragma GCC unroll 16
        for (size_t k = 0; k < EVENT_VECS; k++) {
            diff_vec v;
            memcpy(&v, e + k * sizeof v, sizeof v);
            acc[k] |= v ^ first[k];
        }
        uint64_t t = 0;
        memcpy(&t, e + sizeof first, EVENT_TAIL);
        acc_tail |= t ^ first_tail;
    }
    memcpy(diff, acc, sizeof acc);
    memcpy(diff + sizeof acc, &acc_tail, EVENT_TAIL);
}

/* Fills the plain columns of g (PLAIN_COLUMNS) from p (NPLAIN * n * 8 bytes), followed by
 * the two constant lists (NPLAIN * 8 bytes each): a column whose values are all equal goes
 * to the constant lists, or nowhere when that value is 0; the others are copied out of the
 * events. Returns the unused upper half of the const_field list, where the name-relative
 * list goes. */
static uint32_t *
encode_plain(const dpro_event *events, const uint32_t *idx, size_t n, Dpro__Group *g, uint8_t *p)
{
    uint32_t *const_field = (uint32_t *)(p + NPLAIN * n * sizeof(uint64_t));
    uint64_t *const_value = (uint64_t *)(p + (NPLAIN * n + NPLAIN) * sizeof(uint64_t));
    size_t nconst = 0;
    unsigned char diff[sizeof(dpro_event)];
    const dpro_event *e0 = n ? ev_at(events, idx[0]) : NULL;

    group_diff_bits(events, idx, n, diff);
    /* a member's bytes of diff are all zero when every event holds the first one's value */
#define PLAIN_COL(field, type, member, num)                                                        \
    {                                                                                              \
        type *col = (type *)p, bits;                                                               \
        p += n * sizeof(uint64_t);                                                                 \
        memcpy(&bits, diff + offsetof(dpro_event, member), sizeof bits);                           \
        if (n && !bits) {                                                                          \
            if (e0->member != 0) {                                                                 \
                const_field[nconst] = num;                                                         \
                const_value[nconst++] = (uint64_t)(int64_t)(type)e0->member;                       \
            }                                                                                      \
        } else {                                                                                   \
            for (size_t i = 0; i < n; i++)                                                         \
                col[i] = (type)ev_at(events, idx[i])->member;                                      \
            g->n_##field = n;                                                                      \
            g->field = col;                                                                        \
        }                                                                                          \
    }
    PLAIN_COLUMNS(PLAIN_COL)
#undef PLAIN_COL
    if (nconst) {
        g->n_const_field = g->n_const_value = nconst;
        g->const_field = const_field;
        g->const_value = const_value;
    }
    return const_field + NPLAIN;
}

/* Codes block_x and shared_mem of g, when packed, against the previous launch of the same
 * kernel (the other configuration columns repeat per iteration, which zlib already finds),
 * listing them in rel_field (room for NAME_REL_MAX). */
static void
encode_name_relative(const dpro_event *events, const uint32_t *idx, size_t n, uint32_t kind,
                     Dpro__Group *g, uint32_t *rel_field, name_table *names)
{
    uint32_t *rel_col[2];
    size_t nrel = 0;
    if (g->n_block_x) {
        rel_field[nrel] = 20;
        rel_col[nrel++] = g->block_x;
    }
    if (g->n_shared_mem) {
        rel_field[nrel] = 13;
        rel_col[nrel++] = g->shared_mem;
    }
    if (nrel) {
        g->n_name_relative_field = nrel;
        g->name_relative_field = rel_field;
        name_table_reset(names);
        for (size_t i = 0; i < n; i++) {
            uint32_t *last = name_table_lookup(names, config_name(kind, ev_at(events, idx[i])));
            for (size_t k = 0; k < nrel; k++) {
                uint32_t v = rel_col[k][i];
                rel_col[k][i] = name_rel_code(v, last ? last[k] : 0);
                if (last)
                    last[k] = v;
            }
        }
    }
}

/* Encodes the events of one group, all of kind kind (idx lists their byte offsets in events:
 * ev_at), into g, with column arrays carved from mem (ncols * n * 8 bytes). */
static void
encode_group(const dpro_event *events, const uint32_t *idx, size_t n, uint32_t kind,
             uint64_t base_ns, Dpro__Group *g, uint8_t *mem, lane_table *lanes, name_table *names,
             const launch_table *launches)
{
    uint8_t *p = mem;
    dpro__group__init(g);
    g->kind = kind;
    g->count = (uint32_t)n;
    encode_times(events, idx, n, kind, base_ns, g, &p, lanes, launches);
    encode_deltas(events, idx, n, g, &p);
    uint32_t *rel_field = encode_plain(events, idx, n, g, p);
    encode_name_relative(events, idx, n, kind, g, rel_field, names);
}

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
    size_t counts[NGROUP_SLOTS] = {0};
    size_t slot_start[NGROUP_SLOTS + 1];
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

    /* Known kinds get their own group, API calls two (group_slot); unknown kinds (from
     * newer producers passing through) one group per distinct kind. */
    for (size_t i = 0; i < n; i++) {
        uint32_t k = events[i].kind;
        if (events[i].start_ns < base_ns)
            base_ns = events[i].start_ns;
        if (k >= 1 && k <= DPRO_KIND_MAX_KNOWN) {
            counts[group_slot(&events[i])]++;
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
    for (int s = 0; s < NGROUP_SLOTS; s++)
        slot_start[s + 1] = slot_start[s] + counts[s];
    {
        size_t fill[NGROUP_SLOTS];
        for (int s = 0; s < NGROUP_SLOTS; s++)
            fill[s] = slot_start[s];
        /* unknown kinds first (slot 0), one run per kind */
        for (size_t u = 0; u < n_unknown; u++)
            for (size_t i = 0; i < n; i++)
                if (events[i].kind == unknown_kinds[u])
                    c->idx[fill[0]++] = (uint32_t)(i * sizeof *events);
        for (size_t i = 0; i < n; i++) {
            size_t s = group_slot(&events[i]);
            if (s)
                c->idx[fill[s]++] = (uint32_t)(i * sizeof *events);
        }
    }
    /* flows are stored against the launches of the batch with their id */
    const launch_table *launches = NULL;
    if (counts[kind_slot(DPRO_KIND_FLOW)]) {
        rc = launch_table_build(&c->launches, events, c->idx, n);
        if (rc != DPRO_OK)
            return rc;
        launches = &c->launches;
    }
    {
        size_t pos = 0;
        for (size_t u = 0; u < n_unknown; u++) {
            size_t run = 0;
            while (pos + run < counts[0] &&
                   ev_at(events, c->idx[pos + run])->kind == unknown_kinds[u])
                run++;
            encode_group(events, c->idx + pos, run, unknown_kinds[u], base_ns, &groups[ngroups],
                         c->arena + (pos * NCOLUMNS + ngroups * 2 * NPLAIN) * sizeof(uint64_t),
                         &c->lanes, &c->names, NULL);
            group_ptrs[ngroups] = &groups[ngroups];
            ngroups++;
            pos += run;
        }
    }
    for (size_t s = 1; s < NGROUP_SLOTS; s++) {
        if (!counts[s])
            continue;
        encode_group(
            events, c->idx + slot_start[s], counts[s], slot_kind(s), base_ns, &groups[ngroups],
            c->arena + (slot_start[s] * NCOLUMNS + ngroups * 2 * NPLAIN) * sizeof(uint64_t),
            &c->lanes, &c->names, launches);
        group_ptrs[ngroups] = &groups[ngroups];
        ngroups++;
    }
    dpro__batch__init(&batch);
    batch.schema_major = DPRO_SCHEMA_MAJOR;
    batch.base_ns = base_ns;
    batch.n_groups = ngroups;
    batch.groups = group_ptrs;
    rc = reserve(&c->raw, &c->raw_cap, codec_batch_pack_bound(&batch));
    if (rc == DPRO_OK) {
        *rawlen = codec_batch_pack(&batch, c->raw);
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
