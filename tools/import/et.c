/*
 * et.c: reads a PyTorch execution trace (Chakra ET JSON) into an et_graph: its nodes'
 * ids, parents, RecordFunction handles, input shapes and types, and data dependencies
 * (import_et.h).
 */
#include "import_et.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>
#include <yajl/yajl_tree.h>
#include <zlib.h>

#include "dprotrace.h"
#include "json_squeeze.h"
#include "order.h"

/* A producer of a tensor: the node (index), and the producer before it (-1: none). */
typedef struct et_prod {
    size_t node;
    int64_t older;
} et_prod;

/* Open-addressing table of uint64 keys to int64 values (-1: absent). */
typedef struct et_map {
    uint64_t *key;
    int64_t *val;
    size_t cap; /* a power of two, or 0 */
    size_t n;
} et_map;

struct et_graph {
    et_node *nodes;
    size_t n;
    char *schema;
    et_map by_rf;
    uint64_t deps;
};

/* A growable text buffer; err set once an allocation failed. */
typedef struct et_buf {
    char *p;
    size_t len, cap;
    int err;
} et_buf;

static void
buf_put(et_buf *b, const char *s, size_t l)
{
    if (b->err)
        return;
    if (b->len + l + 1 > b->cap) {
        size_t c = b->cap ? b->cap * 2 : 64;
        while (c < b->len + l + 1)
            c *= 2;
        char *x = realloc(b->p, c);
        if (!x) {
            b->err = 1;
            return;
        }
        b->p = x;
        b->cap = c;
    }
    memcpy(b->p + b->len, s, l);
    b->len += l;
    b->p[b->len] = '\0';
}

static void
buf_str(et_buf *b, const char *s)
{
    buf_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            buf_put(b, esc, 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            buf_put(b, esc, 6);
        } else {
            buf_put(b, (const char *)&c, 1);
        }
    }
    buf_put(b, "\"", 1);
}

/* Appends v as compact JSON text (numbers as written in the file). */
static void
buf_json(et_buf *b, yajl_val v, int depth)
{
    if (depth > 64) { /* deeper than any shape list: kept as null */
        buf_put(b, "null", 4);
        return;
    }
    if (YAJL_IS_STRING(v)) {
        buf_str(b, v->u.string);
    } else if (YAJL_IS_NUMBER(v)) {
        buf_put(b, v->u.number.r, strlen(v->u.number.r));
    } else if (YAJL_IS_ARRAY(v)) {
        buf_put(b, "[", 1);
        for (size_t i = 0; i < v->u.array.len; i++) {
            if (i)
                buf_put(b, ",", 1);
            buf_json(b, v->u.array.values[i], depth + 1);
        }
        buf_put(b, "]", 1);
    } else if (YAJL_IS_OBJECT(v)) {
        buf_put(b, "{", 1);
        for (size_t i = 0; i < v->u.object.len; i++) {
            if (i)
                buf_put(b, ",", 1);
            buf_str(b, v->u.object.keys[i]);
            buf_put(b, ":", 1);
            buf_json(b, v->u.object.values[i], depth + 1);
        }
        buf_put(b, "}", 1);
    } else if (YAJL_IS_TRUE(v)) {
        buf_put(b, "true", 4);
    } else if (YAJL_IS_FALSE(v)) {
        buf_put(b, "false", 5);
    } else {
        buf_put(b, "null", 4);
    }
}

static size_t
map_slot(const et_map *m, uint64_t key)
{
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    size_t i = (size_t)(h ^ (h >> 31)) & (m->cap - 1);
    while (m->val[i] >= 0 && m->key[i] != key)
        i = (i + 1) & (m->cap - 1);
    return i;
}

static int64_t
map_get(const et_map *m, uint64_t key)
{
    return m->cap ? m->val[map_slot(m, key)] : -1;
}

/* Sets key to val (val >= 0). Returns 0, or -1 out of memory. */
static int
map_put(et_map *m, uint64_t key, int64_t val)
{
    if (2 * (m->n + 1) > m->cap) {
        et_map g = {.cap = m->cap ? 2 * m->cap : 1024};
        g.key = malloc(g.cap * sizeof(*g.key));
        g.val = malloc(g.cap * sizeof(*g.val));
        if (!g.key || !g.val) {
            free(g.key);
            free(g.val);
            return -1;
        }
        memset(g.val, 0xff, g.cap * sizeof(*g.val));
        for (size_t i = 0; i < m->cap; i++)
            if (m->val[i] >= 0)
                (void)map_put(&g, m->key[i], m->val[i]);
        free(m->key);
        free(m->val);
        *m = g;
    }
    size_t i = map_slot(m, key);
    if (m->val[i] < 0)
        m->n++;
    m->key[i] = key;
    m->val[i] = val;
    return 0;
}

static void
map_free(et_map *m)
{
    free(m->key);
    free(m->val);
    memset(m, 0, sizeof(*m));
}

/* What a load shares: the file's name, the error buffer, the tensors' producers. */
typedef struct et_load {
    const char *name;
    char *err;
    size_t errlen;
    et_graph *g;
    et_map last;    /* tensor id -> newest et_prod */
    et_prod *prods; /* every (tensor, producer) pair, in exit order */
    size_t nprods, capprods;
    uint64_t *ids; /* scratch: tensor ids of one argument list */
    size_t nids, capids;
} et_load;

/* Writes the message into errbuf[0..errlen) (either may be 0). */
static void
set_err(char *errbuf, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    if (!errbuf || !errlen)
        return;
    va_start(ap, fmt);
    vsnprintf(errbuf, errlen, fmt, ap);
    va_end(ap);
}

/* Says "name: message" in l's error buffer; returns rc. */
static int
load_fail(et_load *l, int rc, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    set_err(l->err, l->errlen, "%s: %s", l->name, msg);
    return rc;
}

/* Whether v is a tensor value: [tensor id, storage id, offset, numel, itemsize, "device"]. */
static int
is_tensor(yajl_val v)
{
    if (!YAJL_IS_ARRAY(v) || v->u.array.len != 6 || !YAJL_IS_STRING(v->u.array.values[5]))
        return 0;
    for (size_t i = 0; i < 5; i++)
        if (!YAJL_IS_INTEGER(v->u.array.values[i]))
            return 0;
    return 1;
}

/* Adds the ids of the tensors in v (nested lists included) to l->ids. Returns DPRO_OK or
 * DPRO_ERR_NOMEM. */
static int
collect_tensors(et_load *l, yajl_val v, int depth)
{
    int rc = DPRO_OK;
    if (is_tensor(v)) {
        if (l->nids == l->capids) {
            size_t c = l->capids ? 2 * l->capids : 64;
            uint64_t *x = realloc(l->ids, c * sizeof(*x));
            if (!x)
                return DPRO_ERR_NOMEM;
            l->ids = x;
            l->capids = c;
        }
        l->ids[l->nids++] = (uint64_t)YAJL_GET_INTEGER(v->u.array.values[0]);
    } else if (YAJL_IS_ARRAY(v) && depth < 64) {
        for (size_t i = 0; i < v->u.array.len && rc == DPRO_OK; i++)
            rc = collect_tensors(l, v->u.array.values[i], depth + 1);
    }
    return rc;
}

/* The member key of object o, or NULL. */
static yajl_val
member(yajl_val o, const char *key)
{
    for (size_t i = 0; o && i < o->u.object.len; i++)
        if (strcmp(o->u.object.keys[i], key) == 0)
            return o->u.object.values[i];
    return NULL;
}

/* The "values" (and "shapes", "types") of a node's "inputs" or "outputs" member io (may be
 * NULL). Returns DPRO_OK, or DPRO_ERR_NOT_TRACE when io is there but not of that form. */
static int
io_parts(et_load *l, size_t i, uint64_t id, const char *what, yajl_val io, yajl_val *values,
         yajl_val *shapes, yajl_val *types)
{
    *values = *shapes = *types = NULL;
    if (!io)
        return DPRO_OK;
    if (!YAJL_IS_OBJECT(io))
        return load_fail(l, DPRO_ERR_NOT_TRACE, "nodes[%zu] (id %llu): \"%s\" is not an object", i,
                         (unsigned long long)id, what);
    *values = member(io, "values");
    *shapes = member(io, "shapes");
    *types = member(io, "types");
    if ((*values && !YAJL_IS_ARRAY(*values)) || (*shapes && !YAJL_IS_ARRAY(*shapes)) ||
        (*types && !YAJL_IS_ARRAY(*types)))
        return load_fail(l, DPRO_ERR_NOT_TRACE,
                         "nodes[%zu] (id %llu): \"%s\" values, shapes or types is not an array", i,
                         (unsigned long long)id, what);
    return DPRO_OK;
}

/* JSON text of v into *out (NULL for a missing or empty list). */
static int
keep_text(yajl_val v, const char **out)
{
    *out = NULL;
    if (!v || (YAJL_IS_ARRAY(v) && v->u.array.len == 0))
        return DPRO_OK;
    et_buf b = {0};
    buf_json(&b, v, 0);
    if (b.err) {
        free(b.p);
        return DPRO_ERR_NOMEM;
    }
    *out = b.p;
    return DPRO_OK;
}

/* Reads the id, parent and rf_id of node v (the i-th) into n. */
static int
node_ids(et_load *l, size_t i, yajl_val v, et_node *n)
{
    if (!YAJL_IS_OBJECT(v))
        return load_fail(l, DPRO_ERR_NOT_TRACE, "nodes[%zu] is not an object", i);
    yajl_val id = member(v, "id"), parent = member(v, "ctrl_deps"), attrs = member(v, "attrs");
    if (!id || !YAJL_IS_INTEGER(id) || YAJL_GET_INTEGER(id) < 0)
        return load_fail(l, DPRO_ERR_NOT_TRACE, "nodes[%zu]: no \"id\" of a node (an integer >= 0)",
                         i);
    n->id = (uint64_t)YAJL_GET_INTEGER(id);
    if (!parent || !YAJL_IS_INTEGER(parent) || YAJL_GET_INTEGER(parent) < 0)
        return load_fail(l, DPRO_ERR_NOT_TRACE,
                         "nodes[%zu] (id %llu): \"ctrl_deps\" is not a node id (an integer >= 0)",
                         i, (unsigned long long)n->id);
    n->parent = (uint64_t)YAJL_GET_INTEGER(parent);
    if (attrs && !YAJL_IS_ARRAY(attrs))
        return load_fail(l, DPRO_ERR_NOT_TRACE, "nodes[%zu] (id %llu): \"attrs\" is not an array",
                         i, (unsigned long long)n->id);
    for (size_t a = 0; attrs && a < attrs->u.array.len; a++) {
        yajl_val at = attrs->u.array.values[a];
        yajl_val name = YAJL_IS_OBJECT(at) ? member(at, "name") : NULL;
        if (!name || !YAJL_IS_STRING(name) || strcmp(name->u.string, "rf_id") != 0)
            continue;
        yajl_val val = member(at, "value");
        if (!val || !YAJL_IS_INTEGER(val) || YAJL_GET_INTEGER(val) < 0)
            return load_fail(l, DPRO_ERR_NOT_TRACE,
                             "nodes[%zu] (id %llu): attrs[%zu] rf_id is not an integer >= 0", i,
                             (unsigned long long)n->id, a);
        n->rf_id = (uint64_t)YAJL_GET_INTEGER(val);
        n->has_rf = n->rf_id != 0; /* the root node's 0 is no RecordFunction */
    }
    return DPRO_OK;
}

/* The data dependencies of node i (its input tensors' ids in l->ids) as JSON text. */
static int
node_deps(et_load *l, size_t i, const char **out)
{
    et_graph *g = l->g;
    const et_node *x = &g->nodes[i];
    size_t nd = 0;
    for (size_t t = 0; t < l->nids; t++) {
        for (int64_t p = map_get(&l->last, l->ids[t]); p >= 0; p = l->prods[p].older) {
            const et_node *prod = &g->nodes[l->prods[p].node];
            if (prod->id < x->id) {
                l->ids[nd++] = x->id - prod->id; /* nd <= t: the list is read ahead of it */
                break;
            }
        }
    }
    *out = NULL;
    if (nd == 0)
        return DPRO_OK;
    qsort(l->ids, nd, sizeof(*l->ids), order_u64);
    et_buf b = {0};
    buf_put(&b, "[", 1);
    for (size_t k = 0; k < nd; k++) {
        if (k && l->ids[k] == l->ids[k - 1])
            continue;
        char num[32];
        int len = snprintf(num, sizeof num, "%s%llu", b.len > 1 ? "," : "",
                           (unsigned long long)l->ids[k]);
        buf_put(&b, num, (size_t)len);
        g->deps++;
    }
    buf_put(&b, "]", 1);
    if (b.err) {
        free(b.p);
        return DPRO_ERR_NOMEM;
    }
    *out = b.p;
    return DPRO_OK;
}

/* Records node i as the newest producer of the tensors in l->ids. */
static int
note_outputs(et_load *l, size_t i)
{
    for (size_t t = 0; t < l->nids; t++) {
        if (l->nprods == l->capprods) {
            size_t c = l->capprods ? 2 * l->capprods : 1024;
            et_prod *x = realloc(l->prods, c * sizeof(*x));
            if (!x)
                return DPRO_ERR_NOMEM;
            l->prods = x;
            l->capprods = c;
        }
        l->prods[l->nprods] = (et_prod){.node = i, .older = map_get(&l->last, l->ids[t])};
        if (map_put(&l->last, l->ids[t], (int64_t)l->nprods++) != 0)
            return DPRO_ERR_NOMEM;
    }
    return DPRO_OK;
}

/* Reads node v, the i-th of the file, into l->g->nodes[i]. */
static int
load_node(et_load *l, size_t i, yajl_val v)
{
    et_node *n = &l->g->nodes[i];
    int rc = node_ids(l, i, v, n);
    yajl_val in_v, in_s, in_t, out_v, out_s, out_t;
    if (rc == DPRO_OK)
        rc = io_parts(l, i, n->id, "inputs", member(v, "inputs"), &in_v, &in_s, &in_t);
    if (rc == DPRO_OK)
        rc = io_parts(l, i, n->id, "outputs", member(v, "outputs"), &out_v, &out_s, &out_t);
    if (rc == DPRO_OK)
        rc = keep_text(in_s, &n->shapes);
    if (rc == DPRO_OK)
        rc = keep_text(in_t, &n->types);
    l->nids = 0;
    if (rc == DPRO_OK && in_v)
        rc = collect_tensors(l, in_v, 0);
    if (rc == DPRO_OK)
        rc = node_deps(l, i, &n->deps);
    l->nids = 0;
    if (rc == DPRO_OK && out_v)
        rc = collect_tensors(l, out_v, 0);
    if (rc == DPRO_OK)
        rc = note_outputs(l, i);
    if (rc == DPRO_OK && n->has_rf && map_get(&l->g->by_rf, n->rf_id) < 0 &&
        map_put(&l->g->by_rf, n->rf_id, (int64_t)i) != 0)
        rc = DPRO_ERR_NOMEM;
    if (rc == DPRO_ERR_NOMEM)
        load_fail(l, rc, "out of memory");
    return rc;
}

/* The byte offset and line where yajl rejects text[0..len). */
static void
json_error_place(const char *text, size_t len, size_t *offset, uint64_t *line)
{
    yajl_handle h = yajl_alloc(NULL, NULL, NULL);
    *offset = len;
    if (h) {
        /* a premature end is found by the completion, at the end of the text */
        if (yajl_parse(h, (const unsigned char *)text, len) != yajl_status_ok)
            *offset = yajl_get_bytes_consumed(h);
        yajl_free(h);
    }
    if (*offset > len)
        *offset = len;
    *line = 1 + imp_count_lines((const unsigned char *)text, *offset);
}

/* Parses text (NUL-terminated, len bytes) and reads its nodes into g. */
static int
load_tree(et_load *l, char *text, size_t len)
{
    char yerr[256] = "";
    int rc = DPRO_OK;
    yajl_val root = yajl_tree_parse(text, yerr, sizeof yerr);
    if (!root) {
        size_t off;
        uint64_t line;
        json_error_place(text, len, &off, &line);
        char *nl = strchr(yerr, '\n');
        if (nl)
            *nl = '\0';
        return load_fail(l, DPRO_ERR_NOT_TRACE, "byte %zu, line %llu: not JSON: %s", off,
                         (unsigned long long)line, yerr[0] ? yerr : "parse error");
    }
    yajl_val nodes = YAJL_IS_OBJECT(root) ? member(root, "nodes") : NULL;
    yajl_val schema = YAJL_IS_OBJECT(root) ? member(root, "schema") : NULL;
    if (!nodes || !YAJL_IS_ARRAY(nodes))
        rc = load_fail(l, DPRO_ERR_NOT_TRACE,
                       "no \"nodes\" array: not a PyTorch execution trace (a Kineto trace is "
                       "given with --kineto)");
    if (rc == DPRO_OK) {
        l->g->schema = strdup(schema && YAJL_IS_STRING(schema) ? schema->u.string : "");
        l->g->nodes = calloc(nodes->u.array.len ? nodes->u.array.len : 1, sizeof(et_node));
        if (!l->g->nodes || !l->g->schema)
            rc = load_fail(l, DPRO_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; rc == DPRO_OK && i < nodes->u.array.len; i++) {
        l->g->n = i + 1;
        rc = load_node(l, i, nodes->u.array.values[i]);
    }
    yajl_tree_free(root);
    return rc;
}

int
et_graph_load_buffer(const char *name, const void *buf, size_t len, et_graph **out, char *errbuf,
                     size_t errlen)
{
    et_load l = {.name = name ? name : "execution trace", .err = errbuf, .errlen = errlen};
    int rc = DPRO_OK;
    *out = NULL;
    char *text = NULL;
    if (len > ET_MAX_BYTES)
        rc = load_fail(&l, DPRO_ERR_LIMIT, "%zu bytes of JSON: more than the %llu read", len,
                       (unsigned long long)ET_MAX_BYTES);
    if (rc == DPRO_OK && (text = malloc(len + 1)) == NULL)
        rc = load_fail(&l, DPRO_ERR_NOMEM, "out of memory");
    if (rc == DPRO_OK && memchr(buf, '\0', len))
        rc = load_fail(&l, DPRO_ERR_NOT_TRACE, "byte %zu: a NUL byte: not JSON text",
                       (size_t)((const char *)memchr(buf, '\0', len) - (const char *)buf));
    if (rc == DPRO_OK && (l.g = calloc(1, sizeof(*l.g))) == NULL)
        rc = load_fail(&l, DPRO_ERR_NOMEM, "out of memory");
    if (rc == DPRO_OK) {
        memcpy(text, buf, len);
        text[len] = '\0';
        rc = load_tree(&l, text, len);
    }
    free(text);
    map_free(&l.last);
    free(l.prods);
    free(l.ids);
    if (rc == DPRO_OK)
        *out = l.g;
    else
        et_graph_free(l.g);
    return rc;
}

/* Reads path (gunzipped if it is gzip) into *text, at most ET_MAX_BYTES + 1 bytes. */
static int
read_all(const char *path, char **text, size_t *len, char *errbuf, size_t errlen)
{
    int rc = DPRO_OK;
    gzFile gz = gzopen(path, "rb");
    size_t cap = 1 << 20, n = 0;
    char *p = NULL;
    if (!gz) {
        set_err(errbuf, errlen, "%s: cannot open: %s", path,
                errno ? strerror(errno) : "out of memory");
        rc = DPRO_ERR_IO;
    }
    if (rc == DPRO_OK && (p = malloc(cap)) == NULL) {
        set_err(errbuf, errlen, "%s: out of memory", path);
        rc = DPRO_ERR_NOMEM;
    }
    while (rc == DPRO_OK) {
        if (n == cap) {
            char *x = n > ET_MAX_BYTES ? NULL : realloc(p, cap * 2);
            if (!x) {
                set_err(errbuf, errlen, "%s: %s", path,
                        n > ET_MAX_BYTES ? "more JSON than the 1 GiB read" : "out of memory");
                rc = n > ET_MAX_BYTES ? DPRO_ERR_LIMIT : DPRO_ERR_NOMEM;
                break;
            }
            p = x;
            cap *= 2;
        }
        int got = gzread(gz, p + n, (unsigned)(cap - n));
        if (got < 0) {
            int zerr;
            const char *msg = gzerror(gz, &zerr);
            set_err(errbuf, errlen, "%s: damaged or truncated gzip data (byte %zu): %s", path, n,
                    msg ? msg : "read error");
            rc = DPRO_ERR_NOT_TRACE;
        } else if (got == 0) {
            break;
        } else {
            n += (size_t)got;
        }
    }
    if (gz)
        gzclose(gz);
    if (rc != DPRO_OK) {
        free(p);
        p = NULL;
    }
    *text = p;
    *len = n;
    return rc;
}

int
et_graph_load_path(const char *path, et_graph **out, char *errbuf, size_t errlen)
{
    char *text = NULL;
    size_t len = 0;
    *out = NULL;
    int rc = read_all(path, &text, &len, errbuf, errlen);
    if (rc == DPRO_OK)
        rc = et_graph_load_buffer(path, text, len, out, errbuf, errlen);
    free(text);
    return rc;
}

size_t
et_graph_count(const et_graph *g)
{
    return g->n;
}

et_node *
et_graph_node(et_graph *g, size_t i)
{
    return &g->nodes[i];
}

et_node *
et_graph_find_rf(et_graph *g, uint64_t rf)
{
    int64_t i = map_get(&g->by_rf, rf);
    return i >= 0 ? &g->nodes[i] : NULL;
}

const char *
et_graph_schema(const et_graph *g)
{
    return g->schema ? g->schema : "";
}

uint64_t
et_graph_deps(const et_graph *g)
{
    return g->deps;
}

void
et_graph_free(et_graph *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->n; i++) {
        free((char *)g->nodes[i].shapes);
        free((char *)g->nodes[i].types);
        free((char *)g->nodes[i].deps);
    }
    free(g->nodes);
    free(g->schema);
    map_free(&g->by_rf);
    free(g);
}
