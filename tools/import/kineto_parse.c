/*
 * kineto_parse.c: the yajl callbacks of the Kineto importer: where the parser is (a stack
 * of contexts, skipped containers counted by depth), the fields of the current event
 * gathered in k->ev, checked for their types and ranges; an event is mapped
 * (kineto_map.c) when its object closes.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "json_num.h"
#include "kineto_keys.h"

static void
kin_event_reset(kin_event *e)
{
    e->have = 0;
    e->cat = CAT_NONE;
    e->cat_text.len = 0;
    e->cat_text.buf[0] = '\0';
    e->name = "";
    e->name_len = 0;
    e->name_id = 0;
    e->dur_ns = 0;
    e->dur_negative = 0;
    e->pid_is_text = e->tid_is_text = 0;
    memset(e->grid, 0, sizeof(e->grid));
    memset(e->block, 0, sizeof(e->block));
    e->coll_name.len = e->dtype.len = e->pg.len = e->sync_kind.len = e->mname.len = 0;
    e->coll_name.buf[0] = e->dtype.buf[0] = e->pg.buf[0] = e->sync_kind.buf[0] = 0;
    e->mname.buf[0] = 0;
    e->pg_ranks_len = 0;
    e->pg_ranks_cut = 0;
    e->rest_len = 0;
    e->nseg = 0;
    e->rest_bad = 0;
    e->cap_nest = 0;
}

static int
kin_push(kineto_importer *k, int ctx)
{
    if (k->depth + 1 >= KIN_MAX_DEPTH) {
        k->skip++;
        return 1;
    }
    k->depth++;
    k->ctx[k->depth] = ctx;
    k->key[k->depth] = K_NONE;
    return 1;
}

static int
kin_cur(const kineto_importer *k)
{
    return k->ctx[k->depth];
}

static int
kin_curkey(const kineto_importer *k)
{
    return k->key[k->depth];
}

static int
kin_wrong_type(kineto_importer *k, const char *what, const char *expected)
{
    return kin_fail(k, DPRO_ERR_NOT_TRACE, "\"%s\": expected %s", what, expected);
}

/* An integer argument: stores it, or fails on a non-integer. */
static int
kin_int_arg(kineto_importer *k, const char *s, size_t l, int64_t *dst, uint32_t bit,
            const char *what)
{
    if (imp_parse_i64(s, l, dst) < 0)
        return kin_fail(k, DPRO_ERR_LIMIT, "\"%s\": %.*s is not an integer in range", what,
                        KIN_SHOW(l), s);
    k->ev.have |= bit;
    return 1;
}

/* See kineto_int.h. */
int
kin_int_slot(kin_event *e, int key, int64_t **dst, uint32_t *bit, const char **what)
{
    static const struct {
        int key;
        size_t off;
        uint32_t bit;
        const char *what;
    } slots[] = {
        {A_EXTERNAL_ID, offsetof(kin_event, external_id), H_EXTERNAL_ID, "External id"},
        {A_CORRELATION, offsetof(kin_event, correlation), H_CORRELATION, "correlation"},
        {A_DEVICE, offsetof(kin_event, device), H_DEVICE, "device"},
        {A_STREAM, offsetof(kin_event, stream), H_STREAM, "stream"},
        {A_SHARED_MEM, offsetof(kin_event, shared_mem), H_SHARED_MEM, "shared memory"},
        {A_BYTES, offsetof(kin_event, bytes), H_BYTES, "bytes"},
        {A_IN_NELEMS, offsetof(kin_event, in_nelems), H_IN_NELEMS, "In msg nelems"},
        {A_OUT_NELEMS, offsetof(kin_event, out_nelems), H_OUT_NELEMS, "Out msg nelems"},
        {A_GROUP_SIZE, offsetof(kin_event, group_size), H_GROUP_SIZE, "Group size"},
        {A_SEQ, offsetof(kin_event, seq), H_SEQ, "Seq"},
        {A_WAIT_STREAM, offsetof(kin_event, wait_stream), H_WAIT_STREAM, "wait_on_stream"},
        {A_WAIT_RECORD_CORR, offsetof(kin_event, wait_record), H_WAIT_RECORD,
         "wait_on_cuda_event_record_corr_id"},
        {A_WAIT_EVENT_ID, offsetof(kin_event, wait_event), H_WAIT_EVENT, "wait_on_cuda_event_id"},
        {A_DEVICE_TYPE, offsetof(kin_event, device_type), H_DEVICE_TYPE, "Device Type"},
        {A_DEVICE_ID, offsetof(kin_event, device_id), H_DEVICE_ID, "Device Id"},
        {A_ADDR, offsetof(kin_event, addr), H_ADDR, "Addr"},
        {A_MEM_BYTES, offsetof(kin_event, mem_bytes), H_MEM_BYTES, "Bytes"},
        {A_RECORD_ID, offsetof(kin_event, record_id), H_RECORD_ID, "Record function id"},
        {A_SEQ_NR, offsetof(kin_event, seq_nr), H_SEQ_NR, "Sequence number"},
        {A_FWD_THREAD, offsetof(kin_event, fwd_thread), H_FWD_THREAD, "Fwd thread id"},
        {A_EV_IDX, offsetof(kin_event, ev_idx), H_EV_IDX, "Ev Idx"},
        {A_TOTAL_ALLOC, offsetof(kin_event, total_alloc), H_TOTAL_ALLOC, "Total Allocated"},
        {A_TOTAL_RESV, offsetof(kin_event, total_resv), H_TOTAL_RESV, "Total Reserved"},
    };
    for (size_t i = 0; i < sizeof(slots) / sizeof(slots[0]); i++) {
        if (slots[i].key == key) {
            *dst = (int64_t *)((char *)e + slots[i].off);
            *bit = slots[i].bit;
            *what = slots[i].what;
            return 0;
        }
    }
    return -1;
}

/* A string under a key of args: an integer argument written as text (ROCm traces write
 * "stream": "0x0", "bytes": "1"; json_num.h's imp_parse_int_text: decimal or 0x hex) is
 * read as the number; a string under any other key we do not read is ignored. */
static int
kin_int_text_arg(kineto_importer *k, const unsigned char *s, size_t l, int key)
{
    int64_t *dst;
    uint32_t bit;
    const char *what;
    if (key == K_NONE || kin_int_slot(&k->ev, key, &dst, &bit, &what) < 0)
        return 1;
    if (imp_parse_int_text((const char *)s, l, dst) < 0)
        return kin_fail(k, DPRO_ERR_NOT_TRACE, "\"%s\": \"%.*s\" is not an integer in range", what,
                        KIN_SHOW(l), (const char *)s);
    k->ev.have |= bit;
    return 1;
}

/* A number where no key of ours is open: an element of an array, or the value of a key we
 * do not read. */
static int
kin_number_unkeyed(kineto_importer *k, const char *s, size_t l)
{
    kin_event *e = &k->ev;
    int ctx = kin_cur(k);
    if (ctx == CTX_ARGS || ctx == CTX_EVENT) /* most: a key we do not read */
        return 1;
    switch (ctx) {
    case CTX_ARGARRAY: {
        int64_t v;
        if (imp_parse_i64(s, l, &v) < 0 || v < 0 || v > UINT32_MAX)
            return kin_fail(k, DPRO_ERR_LIMIT, "\"%s\": %.*s is not a dimension",
                            kin_key_text(e->arr_key), KIN_SHOW(l), s);
        if (e->arr_idx < 3)
            (e->arr_key == A_GRID ? e->grid : e->block)[e->arr_idx] = (uint32_t)v;
        e->arr_idx++;
        return 1;
    }
    case CTX_EVENTS:
        return kin_wrong_type(k, "traceEvents", "objects as elements");
    case CTX_ROOT:
        return kin_fail(k, DPRO_ERR_NOT_TRACE, "not a trace: the top-level value is a number");
    default:
        return 1;
    }
}

/* A number under a key of distributedInfo, of a device of deviceProperties or of the
 * top-level object. */
static int
kin_number_other(kineto_importer *k, const char *s, size_t l, int key)
{
    int64_t v;
    switch (key) {
    /* distributedInfo */
    case D_RANK:
    case D_WORLD_SIZE:
        if (imp_parse_i64(s, l, &v) < 0 || v < 0 || v > INT32_MAX)
            return kin_fail(k, DPRO_ERR_LIMIT, "distributedInfo: %s %.*s is out of range",
                            key == D_RANK ? "rank" : "world_size", KIN_SHOW(l), s);
        if (key == D_RANK) {
            k->rank = v;
            k->have_rank = 1;
        } else {
            k->world_size = v;
            k->have_world_size = 1;
        }
        return 1;
    /* a device of deviceProperties */
    case P_ID:
    case P_TOTAL_MEM:
    case P_CC_MAJOR:
    case P_CC_MINOR:
    case P_NUM_SMS:
    case P_CLOCK_RATE:
        if (imp_parse_i64(s, l, &v) < 0 || v < 0)
            return kin_fail(k, DPRO_ERR_LIMIT, "deviceProperties: %.*s is out of range",
                            KIN_SHOW(l), s);
        switch (key) {
        case P_ID:
            k->dev.id = (uint32_t)v;
            break;
        case P_TOTAL_MEM:
            k->dev.total_memory = (uint64_t)v;
            break;
        case P_CC_MAJOR:
            k->dev.cc_major = (uint32_t)v;
            break;
        case P_CC_MINOR:
            k->dev.cc_minor = (uint32_t)v;
            break;
        case P_NUM_SMS:
            k->dev.sm_count = (uint32_t)v;
            break;
        default:
            k->dev.clock_khz = (uint32_t)v;
            break;
        }
        return 1;
    /* the top-level object */
    case K_BASE_TIME:
        if (imp_parse_i64(s, l, &k->base_time_ns) == 0)
            k->have_base_time = 1;
        return 1;
    case K_SCHEMA_VERSION:
        if (imp_parse_i64(s, l, &v) == 0)
            k->schema_version = v;
        return 1;
    case K_TRACE_EVENTS:
        return kin_wrong_type(k, "traceEvents", "an array");
    case K_TRACE_ID:
        kin_str_set(&k->trace_id, (const unsigned char *)s, l);
        return 1;
    default:
        return 1;
    }
}

static int
kin_cb_number(void *ctx, const char *s, size_t l)
{
    kineto_importer *k = ctx;
    k->ncb++;
    kin_cap_scalar(k, s, l, 0);
    if (k->skip)
        return 1;
    kin_event *e = &k->ev;
    int key = kin_curkey(k);
    int64_t v;
    /* One dispatch, on the key: keys are matched in their own context only, so the key
     * says the context (this runs for most numbers of the file). The most frequent keys
     * are tested first, by compares: the switch's jump table was often mispredicted. */
    if (key == K_NONE)
        return kin_number_unkeyed(k, s, l);
    if (key == K_PID)
        return kin_int_arg(k, s, l, &e->pid, H_PID, "pid");
    if (key == K_TID)
        return kin_int_arg(k, s, l, &e->tid, H_TID, "tid");
    if (key == K_TS) {
        if (imp_parse_us(s, l, &e->ts_ns) < 0)
            return kin_fail(k, DPRO_ERR_LIMIT, "\"ts\": %.*s is not a time in range", KIN_SHOW(l),
                            s);
        e->have |= H_TS;
        return 1;
    }
    switch (key) {
    case K_DUR:
        if (l > 0 && s[0] == '-') {
            e->dur_negative = 1;
            e->have |= H_DUR;
            return 1;
        }
        if (imp_parse_us(s, l, &e->dur_ns) < 0)
            return kin_fail(k, DPRO_ERR_LIMIT, "\"dur\": %.*s is not a time in range", KIN_SHOW(l),
                            s);
        e->have |= H_DUR;
        return 1;
    case K_PH:
    case K_CAT:
    case K_NAME:
        return kin_wrong_type(k, kin_key_text(key), "a string");
    case K_ARGS:
        return kin_wrong_type(k, "args", "an object");
    /* its args */
    case A_EXTERNAL_ID:
        return kin_int_arg(k, s, l, &e->external_id, H_EXTERNAL_ID, "External id");
    case A_CORRELATION:
        return kin_int_arg(k, s, l, &e->correlation, H_CORRELATION, "correlation");
    case A_DEVICE:
        return kin_int_arg(k, s, l, &e->device, H_DEVICE, "device");
    case A_STREAM:
        return kin_int_arg(k, s, l, &e->stream, H_STREAM, "stream");
    case A_SHARED_MEM:
        return kin_int_arg(k, s, l, &e->shared_mem, H_SHARED_MEM, "shared memory");
    case A_BYTES:
        return kin_int_arg(k, s, l, &e->bytes, H_BYTES, "bytes");
    case A_IN_NELEMS:
        return kin_int_arg(k, s, l, &e->in_nelems, H_IN_NELEMS, "In msg nelems");
    case A_OUT_NELEMS:
        return kin_int_arg(k, s, l, &e->out_nelems, H_OUT_NELEMS, "Out msg nelems");
    case A_GROUP_SIZE:
        return kin_int_arg(k, s, l, &e->group_size, H_GROUP_SIZE, "Group size");
    case A_SEQ:
        return kin_int_arg(k, s, l, &e->seq, H_SEQ, "Seq");
    case A_WAIT_STREAM:
        return kin_int_arg(k, s, l, &e->wait_stream, H_WAIT_STREAM, "wait_on_stream");
    case A_WAIT_RECORD_CORR:
        return kin_int_arg(k, s, l, &e->wait_record, H_WAIT_RECORD,
                           "wait_on_cuda_event_record_corr_id");
    case A_WAIT_EVENT_ID:
        return kin_int_arg(k, s, l, &e->wait_event, H_WAIT_EVENT, "wait_on_cuda_event_id");
    case A_DEVICE_TYPE:
        return kin_int_arg(k, s, l, &e->device_type, H_DEVICE_TYPE, "Device Type");
    case A_DEVICE_ID:
        return kin_int_arg(k, s, l, &e->device_id, H_DEVICE_ID, "Device Id");
    case A_ADDR:
        return kin_int_arg(k, s, l, &e->addr, H_ADDR, "Addr");
    case A_MEM_BYTES:
        return kin_int_arg(k, s, l, &e->mem_bytes, H_MEM_BYTES, "Bytes");
    case A_RECORD_ID:
    case A_SEQ_NR:
    case A_FWD_THREAD:
    case A_EV_IDX:
    case A_TOTAL_ALLOC:
    case A_TOTAL_RESV: {
        int64_t *dst = NULL;
        uint32_t bit = 0;
        const char *what = "value";
        kin_int_slot(e, key, &dst, &bit, &what); /* every key of these cases has a slot */
        return kin_int_arg(k, s, l, dst, bit, what);
    }
    case K_ID:
        if (imp_parse_i64(s, l, &e->flow_id) == 0)
            e->have |= H_FLOW_ID;
        return 1;
    case A_PG_ID:
        if (imp_parse_i64(s, l, &v) < 0)
            return kin_fail(k, DPRO_ERR_LIMIT, "\"Process Group ID\": not an integer");
        kin_str_set(&e->pg, (const unsigned char *)s, l);
        e->have |= H_PG;
        return 1;
    case A_COLL_NAME:
    case A_DTYPE:
    case A_PG_NAME:
    case A_SYNC_KIND:
    case A_MNAME:
        return kin_wrong_type(k, "args", "a string for this key");
    case A_GRID:
    case A_BLOCK:
        return kin_wrong_type(k, kin_key_text(key), "an array of 3 integers");
    default:
        return kin_number_other(k, s, l, key);
    }
}

/* The "name" of an event: pointed at if interned already, else copied. */
static int
kin_string_name(kineto_importer *k, const unsigned char *s, size_t l)
{
    kin_event *e = &k->ev;
    if (l >= KIN_MAX_STRING)
        return kin_fail(k, DPRO_ERR_LIMIT, "event name of %zu bytes is too long", l);
    e->have |= H_NAME;
    e->name_len = l;
    e->name_id = 0;
    if (l == 0) {
        e->name = "";
        return 1;
    }
    /* most names were seen before: point at the interned text, no copy */
    e->name_hash = imp_str_hash((const char *)s, l);
    const imp_sent *se = imp_out_find(&k->out, (const char *)s, l, e->name_hash);
    if (se) {
        e->name = se->text;
        e->name_id = se->id;
        return 1;
    }
    if (l + 1 > e->name_cap) {
        size_t cap = e->name_cap ? e->name_cap : 256;
        while (cap < l + 1)
            cap *= 2;
        char *n = realloc(e->name_buf, cap);
        if (!n)
            return kin_fail(k, DPRO_ERR_NOMEM, "out of memory");
        e->name_buf = n;
        e->name_cap = cap;
    }
    memcpy(e->name_buf, s, l);
    e->name_buf[l] = '\0';
    e->name = e->name_buf;
    return 1;
}

/* A "pid" or "tid" given as text: "stream 7" for a GPU row, labels for the profiler's own
 * rows; its first run of digits is the id (0 if none). */
static int
kin_string_id(kineto_importer *k, const unsigned char *s, size_t l, int key)
{
    kin_event *e = &k->ev;
    int64_t v = 0;
    size_t i = 0;
    while (i < l && (s[i] < '0' || s[i] > '9'))
        i++;
    size_t j = i;
    while (j < l && s[j] >= '0' && s[j] <= '9')
        j++;
    if (j > i && j - i < 18)
        imp_parse_i64((const char *)s + i, j - i, &v);
    if (key == K_PID) {
        e->pid = v;
        e->pid_is_text = 1;
        e->have |= H_PID;
    } else {
        e->tid = v;
        e->tid_is_text = 1;
        e->have |= H_TID;
    }
    return 1;
}

static int
kin_cb_string(void *ctx, const unsigned char *s, size_t l)
{
    kineto_importer *k = ctx;
    k->ncb++;
    kin_cap_scalar(k, (const char *)s, l, 1);
    if (k->skip)
        return 1;
    kin_event *e = &k->ev;
    int key = kin_curkey(k);
    switch (kin_cur(k)) {
    case CTX_EVENT:
        switch (key) {
        case K_PH:
            if (l != 1)
                return kin_fail(k, DPRO_ERR_NOT_TRACE, "\"ph\": \"%.*s\" is not a phase",
                                KIN_SHOW(l), (const char *)s);
            e->ph = (char)s[0];
            e->have |= H_PH;
            return 1;
        case K_CAT:
            e->cat = kin_cat_of(s, l);
            if (e->cat == CAT_OTHER)
                kin_str_set(&e->cat_text, s, l < 40 ? l : 40);
            return 1;
        case K_NAME:
            return kin_string_name(k, s, l);
        case K_PID:
        case K_TID:
            return kin_string_id(k, s, l, key);
        case K_TS:
        case K_DUR:
            return kin_wrong_type(k, kin_key_text(key), "a number");
        case K_ARGS:
            return kin_wrong_type(k, "args", "an object");
        case K_ID:
            if (imp_parse_int_text((const char *)s, l, &e->flow_id) == 0)
                e->have |= H_FLOW_ID;
            return 1;
        case K_BP:
            if (l == 1 && s[0] == 'e')
                e->have |= H_BP_E;
            return 1;
        default:
            return 1;
        }
    case CTX_ARGS:
        switch (key) {
        case A_COLL_NAME:
            kin_str_set(&e->coll_name, s, l);
            return 1;
        case A_DTYPE:
            kin_str_set(&e->dtype, s, l);
            return 1;
        case A_SYNC_KIND:
            kin_str_set(&e->sync_kind, s, l);
            return 1;
        case A_MNAME:
            kin_str_set(&e->mname, s, l);
            return 1;
        case A_PG_NAME:
            kin_str_set(&e->pg, s, l);
            e->have |= H_PG;
            return 1;
        case A_PG_ID:
            if (!(e->have & H_PG)) {
                kin_str_set(&e->pg, s, l);
                e->have |= H_PG;
            }
            return 1;
        case A_PG_RANKS:
            if (l >= KIN_RANKS_STR) {
                e->pg_ranks_cut = 1;
                return 1;
            }
            memcpy(e->pg_ranks, s, l);
            e->pg_ranks_len = l;
            return 1;
        default:
            return kin_int_text_arg(k, s, l, key);
        }
    case CTX_DIST:
        if (key == D_NCCL_VERSION)
            kin_str_set(&k->nccl_version, s, l);
        else if (key == D_BACKEND)
            kin_str_set(&k->backend, s, l);
        else if (key == D_RANK || key == D_WORLD_SIZE)
            return kin_wrong_type(k, key == D_RANK ? "rank" : "world_size", "an integer");
        return 1;
    case CTX_DEV:
        if (key == P_NAME)
            kin_str_set(&k->dev_name, s, l);
        return 1;
    case CTX_TOP:
        switch (key) {
        case K_TRACE_ID:
            kin_str_set(&k->trace_id, s, l);
            return 1;
        case K_HOST_NAME:
            kin_str_set(&k->host, s, l);
            return 1;
        case K_TRACE_NAME:
            kin_str_set(&k->trace_name, s, l);
            return 1;
        case K_TRACE_EVENTS:
            return kin_wrong_type(k, "traceEvents", "an array");
        default:
            return 1;
        }
    case CTX_EVENTS:
        return kin_wrong_type(k, "traceEvents", "objects as elements");
    case CTX_ARGARRAY:
        return kin_wrong_type(k, kin_key_text(e->arr_key), "an array of 3 integers");
    case CTX_ROOT:
        return kin_fail(k, DPRO_ERR_NOT_TRACE, "not a trace: the top-level value is a string");
    default:
        return 1;
    }
}

/* null and booleans: fine where we do not look, wrong where we do. */
static int
kin_cb_scalar(kineto_importer *k, const char *what)
{
    k->ncb++;
    kin_cap_scalar(k, what, strlen(what), 0);
    if (k->skip)
        return 1;
    int key = kin_curkey(k);
    switch (kin_cur(k)) {
    case CTX_EVENT:
        if (key == K_TS || key == K_DUR || key == K_PH || key == K_ARGS || key == K_CAT ||
            key == K_NAME)
            return kin_fail(k, DPRO_ERR_NOT_TRACE, "\"%s\": unexpected %s", kin_key_text(key),
                            what);
        return 1;
    case CTX_ARGS:
        if (key == A_CORRELATION || key == A_STREAM || key == A_DEVICE)
            return kin_fail(k, DPRO_ERR_NOT_TRACE, "args: unexpected %s", what);
        return 1;
    case CTX_EVENTS:
        return kin_wrong_type(k, "traceEvents", "objects as elements");
    case CTX_ARGARRAY:
        return kin_wrong_type(k, kin_key_text(k->ev.arr_key), "an array of 3 integers");
    case CTX_TOP:
        if (key == K_TRACE_EVENTS)
            return kin_wrong_type(k, "traceEvents", "an array");
        return 1;
    case CTX_ROOT:
        return kin_fail(k, DPRO_ERR_NOT_TRACE, "not a trace: the top-level value is %s", what);
    default:
        return 1;
    }
}

static int
kin_cb_null(void *ctx)
{
    return kin_cb_scalar(ctx, "null");
}

static int
kin_cb_boolean(void *ctx, int b)
{
    return kin_cb_scalar(ctx, b ? "true" : "false");
}

static int
kin_cb_map_key(void *ctx, const unsigned char *s, size_t l)
{
    kineto_importer *k = ctx;
    k->ncb++;
    if (k->skip) {
        kin_cap_key(k, s, l, K_NONE);
        return 1;
    }
    int key = K_NONE, where = kin_cur(k);
    /* the two contexts of nearly every key first, without a jump table */
    if (where == CTX_EVENT)
        key = kin_event_key(s, l);
    else if (where == CTX_ARGS)
        key = kin_arg_key(s, l);
    else
        switch (where) {
        case CTX_TOP:
            key = kin_top_key(s, l);
            k->saw_nodes |= l == 5 && memcmp(s, "nodes", 5) == 0; /* an execution trace's */
            break;
        case CTX_DIST:
            key = kin_dist_key(s, l);
            break;
        case CTX_DEV:
            key = kin_dev_key(s, l);
            break;
        default:
            break;
        }
    k->key[k->depth] = key;
    kin_cap_key(k, s, l, key);
    return 1;
}

static int
kin_cb_start_map(void *ctx)
{
    kineto_importer *k = ctx;
    k->ncb++;
    kin_cap_open(k, 0);
    if (k->skip) {
        k->skip++;
        return 1;
    }
    int key = kin_curkey(k);
    switch (kin_cur(k)) {
    case CTX_ROOT:
        return kin_push(k, CTX_TOP);
    case CTX_TOP:
        if (key == K_DIST_INFO)
            return kin_push(k, CTX_DIST);
        if (key == K_TRACE_EVENTS)
            return kin_wrong_type(k, "traceEvents", "an array");
        break;
    case CTX_EVENTS:
        kin_event_reset(&k->ev);
        return kin_push(k, CTX_EVENT);
    case CTX_EVENT:
        if (key == K_ARGS)
            return kin_push(k, CTX_ARGS);
        if (key == K_TS || key == K_DUR || key == K_PH || key == K_CAT || key == K_NAME)
            return kin_fail(k, DPRO_ERR_NOT_TRACE, "\"%s\": unexpected object", kin_key_text(key));
        break;
    case CTX_ARGS:
        if (key == A_GRID || key == A_BLOCK)
            return kin_wrong_type(k, kin_key_text(key), "an array of 3 integers");
        break;
    case CTX_ARGARRAY:
        return kin_wrong_type(k, kin_key_text(k->ev.arr_key), "an array of 3 integers");
    case CTX_DEVPROPS:
        memset(&k->dev, 0, sizeof(k->dev));
        k->dev_name.len = 0;
        k->dev_name.buf[0] = '\0';
        return kin_push(k, CTX_DEV);
    default:
        break;
    }
    k->skip = 1;
    return 1;
}

static int
kin_cb_start_array(void *ctx)
{
    kineto_importer *k = ctx;
    k->ncb++;
    kin_cap_open(k, 1);
    if (k->skip) {
        k->skip++;
        return 1;
    }
    int key = kin_curkey(k);
    switch (kin_cur(k)) {
    case CTX_ROOT:
        /* the JSON Array Format: events only */
        k->saw_events = 1;
        return kin_push(k, CTX_EVENTS);
    case CTX_TOP:
        if (key == K_TRACE_EVENTS) {
            k->saw_events = 1;
            return kin_push(k, CTX_EVENTS);
        }
        if (key == K_DEV_PROPS)
            return kin_push(k, CTX_DEVPROPS);
        break;
    case CTX_EVENTS:
        return kin_wrong_type(k, "traceEvents", "objects as elements");
    case CTX_EVENT:
        if (key == K_ARGS || key == K_TS || key == K_DUR || key == K_PH || key == K_CAT ||
            key == K_NAME)
            return kin_fail(k, DPRO_ERR_NOT_TRACE, "\"%s\": unexpected array", kin_key_text(key));
        break;
    case CTX_ARGS:
        if (key == A_GRID || key == A_BLOCK) {
            k->ev.arr_key = key;
            k->ev.arr_idx = 0;
            return kin_push(k, CTX_ARGARRAY);
        }
        break;
    default:
        break;
    }
    k->skip = 1;
    return 1;
}

static int
kin_pop(kineto_importer *k)
{
    int ctx = k->ctx[k->depth];
    k->depth--;
    switch (ctx) {
    case CTX_EVENT:
        return kin_map_event(k) == 0 && k->status == DPRO_OK;
    case CTX_DEV:
        return kin_emit_side(k, IMP_SIDE_DEVICE, 0, &k->dev, k->dev_name.buf, k->dev_name.len) ==
               DPRO_OK;
    case CTX_TOP:
    case CTX_EVENTS:
        if (k->depth == 0)
            k->ctx[0] = CTX_DONE;
        return 1;
    default:
        return 1;
    }
}

static int
kin_cb_end(void *ctx)
{
    kineto_importer *k = ctx;
    k->ncb++;
    kin_cap_close(k);
    if (k->skip) {
        k->skip--;
        return 1;
    }
    return kin_pop(k);
}

const yajl_callbacks kin_callbacks = {
    .yajl_null = kin_cb_null,
    .yajl_boolean = kin_cb_boolean,
    .yajl_number = kin_cb_number,
    .yajl_string = kin_cb_string,
    .yajl_start_map = kin_cb_start_map,
    .yajl_map_key = kin_cb_map_key,
    .yajl_end_map = kin_cb_end,
    .yajl_start_array = kin_cb_start_array,
    .yajl_end_array = kin_cb_end,
};
