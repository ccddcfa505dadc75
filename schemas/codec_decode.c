/*
 * codec_decode.c: one zlib-compressed protobuf batch -> dpro events (the inverse of
 * codec.c's encoder): inflate with its limits, the batch's validation, then each group's
 * columns, name-relative launch configurations, start times and delta columns.
 */
#include "codec_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Inflates and parses a batch into *batch (NULL on error) and checks it: the schema major
 * version, every group's column lengths and name-relative list, the number of events (in
 * *total). Returns DPRO_OK, or an error with errbuf set. */
static int
decode_open_batch(dpro_codec *c, const uint8_t *data, size_t len, size_t rawlen,
                  Dpro__Batch **batch, size_t *total, char *errbuf, size_t errlen)
{
    int rc = DPRO_OK;
    size_t rel_off[NAME_REL_MAX];

    *batch = NULL;
    *total = 0;
    rc = inflate_exact(c, data, len, rawlen, errbuf, errlen);
    if (rc == DPRO_OK) {
        *batch = dpro__batch__unpack(NULL, rawlen, c->raw);
        if (!*batch) {
            dpro_set_err(errbuf, errlen, "protobuf batch does not parse");
            rc = DPRO_ERR_CORRUPT;
        }
    }
    if (rc == DPRO_OK && (*batch)->schema_major > DPRO_SCHEMA_MAJOR) {
        dpro_set_err(errbuf, errlen, "batch of schema major version %u (this dpro reads %d)",
                     (*batch)->schema_major, DPRO_SCHEMA_MAJOR);
        rc = DPRO_ERR_VERSION;
    }
    for (size_t g = 0; rc == DPRO_OK && g < (*batch)->n_groups; g++) {
        const Dpro__Group *grp = (*batch)->groups[g];
        if (!group_columns_valid(grp)) {
            dpro_set_err(errbuf, errlen, "group %zu: column length differs from count %u", g,
                         grp->count);
            rc = DPRO_ERR_CORRUPT;
        } else if (!group_name_relative_offsets(grp, rel_off)) {
            dpro_set_err(errbuf, errlen,
                         "group %zu: name_relative_field lists a column that is not a packed "
                         "launch configuration, or one twice",
                         g);
            rc = DPRO_ERR_CORRUPT;
        }
        *total += grp->count;
        if (*total > DPRO_BATCH_MAX_EVENTS) {
            dpro_set_err(errbuf, errlen, "more than %u events", DPRO_BATCH_MAX_EVENTS);
            rc = DPRO_ERR_LIMIT;
        }
    }
    return rc;
}

/* Fills the kind, the plain columns and the constants of the g->count events ev of group
 * g, then decodes its name-relative launch configurations (the list validated). */
static void
decode_columns(dpro_codec *c, const Dpro__Group *g, dpro_event *ev)
{
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
        size_t nrel = g->n_name_relative_field, rel_off[NAME_REL_MAX];
        group_name_relative_offsets(g, rel_off); /* validated by decode_open_batch */
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
}

/* Decodes the start and end times, correlations and sequence numbers of the g->count
 * events ev of group g (columns already read), the batch's first `pos` events (events)
 * decoded before them. Returns DPRO_OK or DPRO_ERR_NOMEM. */
static int
decode_times(dpro_codec *c, const Dpro__Batch *batch, const Dpro__Group *g, dpro_event *ev,
             const dpro_event *events, size_t pos)
{
    int rc = DPRO_OK;
    uint64_t prev_start = batch->base_ns, corr = 0, seq = 0;
    /* major 1 had neither time units nor the nested-start code */
    int nested_rule = batch->schema_major >= 2;
    uint64_t unit = g->time_unit && nested_rule ? g->time_unit : 1;
    /* flows against the launches decoded before them (kind 1 groups come first) */
    int from_launch = g->start_from_launch && g->kind == DPRO_KIND_FLOW;
    if (from_launch) {
        unit = 1;
        rc = launch_table_build(&c->launches, events, NULL, pos);
    }
    if (rc == DPRO_OK)
        memset(&c->lanes, 0, sizeof c->lanes);
    for (size_t i = 0; rc == DPRO_OK && i < g->count; i++) {
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
    return rc;
}

/* Decodes the delta columns of minor 2 of the g->count events ev of group g: an event
 * without the column's has bit keeps 0. */
static void
decode_deltas(const Dpro__Group *g, dpro_event *ev)
{
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
}

int
dpro_codec_decode(dpro_codec *c, const uint8_t *data, size_t len, size_t rawlen,
                  dpro_event **events, size_t *cap, size_t *n, char *errbuf, size_t errlen)
{
    int rc = DPRO_OK;
    Dpro__Batch *batch = NULL;
    size_t total = 0, pos = 0;

    *n = 0;
    rc = decode_open_batch(c, data, len, rawlen, &batch, &total, errbuf, errlen);
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
        decode_columns(c, g, ev);
        rc = decode_times(c, batch, g, ev, *events, pos);
        if (rc == DPRO_OK)
            decode_deltas(g, ev);
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
