/*
 * kineto_args.c: the arguments of a Kineto event that no dpro_event field holds, kept as
 * JSON text. While yajl parses an event's args, every member is written to k->ev.rest as
 * "key":value (strings escaped anew, numbers as written, nested arrays and objects
 * whole), and its key remembered. When the event is mapped, kin_args_fill takes the ids
 * into their columns, "Input Dims" and "Input type" into interned texts of their own, and
 * joins the members no field holds into one interned object text: repeated argument sets
 * (a kernel's occupancy, a collective's process group) cost one string id an event.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import_et.h"
#include "kineto_keys.h"

_Static_assert(A_BANDWIDTH < 64, "args keys must fit the KIN_KEYBIT mask");

/* Appends l bytes; past KIN_MAX_ARGS_TEXT the event keeps no args text. */
static void
cap_put(kin_event *e, const char *s, size_t l)
{
    if (e->rest_bad)
        return;
    if (e->rest_len + l > KIN_MAX_ARGS_TEXT) {
        e->rest_bad = 1;
        return;
    }
    memcpy(e->rest + e->rest_len, s, l);
    e->rest_len += l;
}

/* Appends s[0..l) as a JSON string. */
static void
cap_string(kin_event *e, const char *s, size_t l)
{
    static const char hex[] = "0123456789abcdef";
    cap_put(e, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < l; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        cap_put(e, s + run, i - run);
        run = i + 1;
        char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
        if (c == '"' || c == '\\') {
            esc[1] = (char)c;
            cap_put(e, esc, 2);
        } else {
            cap_put(e, esc, 6);
        }
    }
    cap_put(e, s + run, l - run);
    cap_put(e, "\"", 1);
}

/* The one spelling of an integer argument whose text need not be kept (its value is read
 * into a kin_event field, and written from there when no dpro_event field takes it), or
 * NULL. Most arguments of most events are such: not copying them keeps the import fast. */
static const char *
synth_name(int key)
{
    switch (key) {
    case A_EXTERNAL_ID:
        return "External id";
    case A_CORRELATION:
        return "correlation";
    case A_DEVICE:
        return "device";
    case A_STREAM:
        return "stream";
    case A_SHARED_MEM:
        return "shared memory";
    case A_RECORD_ID:
        return "Record function id";
    case A_SEQ_NR:
        return "Sequence number";
    case A_FWD_THREAD:
        return "Fwd thread id";
    case A_EV_IDX:
        return "Ev Idx";
    case A_DEVICE_TYPE:
        return "Device Type";
    case A_DEVICE_ID:
        return "Device Id";
    case A_ADDR:
        return "Addr";
    case A_MEM_BYTES:
        return "Bytes";
    case A_TOTAL_ALLOC:
        return "Total Allocated";
    case A_TOTAL_RESV:
        return "Total Reserved";
    default:
        return NULL;
    }
}

/* A synthesised member gets its text after all (its value is not a plain number). */
static void
unsynth(kin_event *e)
{
    kin_seg *g = &e->seg[e->nseg - 1];
    if (!g->synth)
        return;
    g->synth = 0;
    const char *name = synth_name(g->key);
    cap_string(e, name, strlen(name));
    cap_put(e, ":", 1);
    g->vstart = (uint32_t)e->rest_len;
}

/* Whether the parser stands at the args object itself (not inside one of its values). */
static int
at_args(const kineto_importer *k)
{
    return !k->skip && k->ctx[k->depth] == CTX_ARGS && k->ev.cap_nest == 0;
}

/* Before a value inside a captured container: the comma an array needs. */
static void
cap_before_value(kin_event *e)
{
    int lvl = e->cap_nest - 1;
    if (lvl >= KIN_CAP_DEPTH)
        return;
    if (e->cap_array[lvl] && !e->cap_first[lvl])
        cap_put(e, ",", 1);
    e->cap_first[lvl] = 0;
}

/* See kineto_int.h. */
void
kin_cap_key(kineto_importer *k, const unsigned char *s, size_t l, int key)
{
    kin_event *e = &k->ev;
    if (e->cap_nest > 0) {
        int lvl = e->cap_nest - 1;
        if (lvl < KIN_CAP_DEPTH && !e->cap_first[lvl])
            cap_put(e, ",", 1);
        if (lvl < KIN_CAP_DEPTH)
            e->cap_first[lvl] = 0;
        cap_string(e, (const char *)s, l);
        cap_put(e, ":", 1);
        return;
    }
    if (!at_args(k))
        return;
    if (e->nseg == KIN_MAX_SEGS) {
        e->rest_bad = 1;
        return;
    }
    kin_seg *g = &e->seg[e->nseg++];
    g->key = key;
    g->start = (uint32_t)e->rest_len;
    g->synth = synth_name(key) != NULL;
    if (!g->synth) {
        cap_string(e, (const char *)s, l);
        cap_put(e, ":", 1);
    }
    g->vstart = (uint32_t)e->rest_len;
}

/* See kineto_int.h. */
void
kin_cap_scalar(kineto_importer *k, const char *text, size_t l, int is_string)
{
    kin_event *e = &k->ev;
    if (e->cap_nest > 0) {
        cap_before_value(e);
    } else if (!at_args(k) || e->nseg == 0) {
        return;
    } else if (e->seg[e->nseg - 1].synth) {
        if (!is_string && l && (text[0] == '-' || (text[0] >= '0' && text[0] <= '9')))
            return; /* an integer (or refused as none by the parser) */
        unsynth(e);
    }
    if (is_string)
        cap_string(e, text, l);
    else
        cap_put(e, text, l);
}

/* See kineto_int.h. */
void
kin_cap_open(kineto_importer *k, int array)
{
    kin_event *e = &k->ev;
    if (e->cap_nest > 0)
        cap_before_value(e);
    else if (!at_args(k) || e->nseg == 0)
        return;
    else
        unsynth(e);
    cap_put(e, array ? "[" : "{", 1);
    if (e->cap_nest < KIN_CAP_DEPTH) {
        e->cap_array[e->cap_nest] = (uint8_t)array;
        e->cap_first[e->cap_nest] = 1;
    } else {
        e->rest_bad = 1; /* nested too deep to write back faithfully */
    }
    e->cap_nest++;
}

/* See kineto_int.h. */
void
kin_cap_close(kineto_importer *k)
{
    kin_event *e = &k->ev;
    if (e->cap_nest == 0)
        return;
    e->cap_nest--;
    cap_put(e, e->cap_nest < KIN_CAP_DEPTH && e->cap_array[e->cap_nest] ? "]" : "}", 1);
}

/* See kineto_int.h. */
int
kin_args_double(const kin_event *e, int key, double *v)
{
    for (int i = 0; i < e->nseg && !e->rest_bad; i++) {
        if (e->seg[i].key != key)
            continue;
        uint32_t end = i + 1 < e->nseg ? e->seg[i + 1].start : (uint32_t)e->rest_len;
        char num[64];
        size_t len = end - e->seg[i].vstart;
        if (len == 0 || len >= sizeof num)
            return -1;
        memcpy(num, e->rest + e->seg[i].vstart, len);
        num[len] = '\0';
        char *stop;
        *v = strtod(num, &stop);
        return *stop ? -1 : 0;
    }
    return -1;
}

/* Interns text[0..len) (len > 0) into *id. */
static int
intern_text(kineto_importer *k, const char *text, size_t len, uint32_t *id)
{
    return kin_intern_h(k, text, len, imp_str_hash(text, len), id);
}

/* Joins ev to the execution-trace node of its Record function id, if there is one: ids,
 * data dependencies, and the node's input shapes and types where ev has none. */
static int
et_join(kineto_importer *k, dpro_event *ev)
{
    int rc = DPRO_OK;
    et_node *n = et_graph_find_rf(k->opt.et, ev->record_id);
    if (!n)
        return rc;
    n->joined++;
    kin_count(k, "et.joined", 1);
    ev->has |= DPRO_HAS_ET_ID | DPRO_HAS_ET_PARENT;
    ev->et_id = n->id;
    ev->et_parent = n->parent;
    if (n->deps)
        rc = intern_text(k, n->deps, strlen(n->deps), &ev->et_deps);
    if (rc == DPRO_OK && n->shapes && !ev->shapes)
        rc = intern_text(k, n->shapes, strlen(n->shapes), &ev->shapes);
    if (rc == DPRO_OK && n->types && !ev->dtypes)
        rc = intern_text(k, n->types, strlen(n->types), &ev->dtypes);
    return rc;
}

/* See kineto_int.h. */
int
kin_args_fill(kineto_importer *k, kin_event *e, dpro_event *ev, uint64_t taken)
{
    int rc = DPRO_OK;
    static const struct {
        uint32_t have, has;
        int key;
    } ids[] = {
        {H_EXTERNAL_ID, DPRO_HAS_EXTERNAL_ID, A_EXTERNAL_ID},
        {H_RECORD_ID, DPRO_HAS_RECORD_ID, A_RECORD_ID},
        {H_SEQ_NR, DPRO_HAS_SEQ_NR, A_SEQ_NR},
        {H_FWD_THREAD, DPRO_HAS_FWD_THREAD, A_FWD_THREAD},
        {H_EV_IDX, DPRO_HAS_EV_IDX, A_EV_IDX},
    };
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        if (!(e->have & ids[i].have))
            continue;
        int64_t v = ids[i].key == A_EXTERNAL_ID  ? e->external_id
                    : ids[i].key == A_RECORD_ID  ? e->record_id
                    : ids[i].key == A_SEQ_NR     ? e->seq_nr
                    : ids[i].key == A_FWD_THREAD ? e->fwd_thread
                                                 : e->ev_idx;
        /* a negative id (Kineto writes -1 for "none") or one past 32 bits for the thread
         * stays in the args text */
        if (v < 0 || (ids[i].key == A_FWD_THREAD && v > UINT32_MAX))
            continue;
        ev->has |= ids[i].has;
        taken |= KIN_KEYBIT(ids[i].key);
        switch (ids[i].key) {
        case A_EXTERNAL_ID:
            ev->external_id = (uint64_t)v;
            break;
        case A_RECORD_ID:
            ev->record_id = (uint64_t)v;
            break;
        case A_SEQ_NR:
            ev->seq_nr = (uint64_t)v;
            break;
        case A_FWD_THREAD:
            ev->fwd_thread = (uint32_t)v;
            break;
        default:
            ev->ev_idx = (uint64_t)v;
            break;
        }
    }
    if (e->rest_bad && e->nseg) /* cut or nested too deep: the ids alone are kept */
        kin_count(k, "approx.args_dropped", 1);
    /* the members no field holds, joined into one object; shapes and dtypes apart */
    size_t out = e->rest_len; /* the object is built after the members, in the same buffer */
    int n = 0;
    for (int i = 0; i < e->nseg && rc == DPRO_OK && !e->rest_bad; i++) {
        const kin_seg *g = &e->seg[i];
        uint32_t end = i + 1 < e->nseg ? e->seg[i + 1].start : (uint32_t)e->rest_len;
        if (g->synth) {
            int64_t *dst = NULL;
            uint32_t bit = 0;
            const char *what = NULL;
            if ((taken & KIN_KEYBIT(g->key)) || kin_int_slot(e, g->key, &dst, &bit, &what) < 0 ||
                !(e->have & bit))
                continue;
            char num[96];
            int nl = snprintf(num, sizeof num, "%s\"%s\":%lld", n++ ? "," : "{", synth_name(g->key),
                              (long long)*dst);
            memcpy(e->rest + out, num, (size_t)nl);
            out += (size_t)nl;
            continue;
        }
        if (g->vstart >= end) /* a key without a value: a cut event */
            continue;
        if (g->key == A_INPUT_DIMS || g->key == A_INPUT_TYPE) {
            rc = intern_text(k, e->rest + g->vstart, end - g->vstart,
                             g->key == A_INPUT_DIMS ? &ev->shapes : &ev->dtypes);
            continue;
        }
        if (g->key != K_NONE && g->key < 64 && (taken & KIN_KEYBIT(g->key)))
            continue;
        e->rest[out++] = n++ ? ',' : '{';
        memmove(e->rest + out, e->rest + g->start, end - g->start);
        out += end - g->start;
    }
    if (rc == DPRO_OK && n) {
        e->rest[out++] = '}';
        rc = intern_text(k, e->rest + e->rest_len, out - e->rest_len, &ev->args);
    }
    if (rc == DPRO_OK && k->opt.et && (ev->has & DPRO_HAS_RECORD_ID))
        rc = et_join(k, ev);
    return rc;
}
