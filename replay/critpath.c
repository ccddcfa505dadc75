/* critpath.c: the critical path of one compared iteration and its composition by what
 * ran on it (replay.h, replay_cp_compose). */
#include "replay.h"

#include <stdlib.h>
#include <string.h>

#include "fnv1a.h"
#include "hmap.h"
#include "order.h"

const char *
replay_cp_class_name(int cls)
{
    static const char *const names[REPLAY_CP_NCLASSES] = {
        "cpu_op", "annotation", "host_other", "api",        "launch_delay", "stream_gap",
        "kernel", "memcpy",     "memset",     "collective", "wait_rank",
    };
    return cls >= 0 && cls < REPLAY_CP_NCLASSES ? names[cls] : "unknown";
}

/* One host range of a thread (a cpu_op or an annotation), in graph time. */
typedef struct host_range {
    uint64_t key; /* rank << 32 | thread */
    int64_t t0, t1;
    int64_t maxend; /* latest t1 of the thread's ranges up to this one (in t0 order) */
    const char *name;
    uint8_t cpu_op;
} host_range;

typedef struct cp_ctx {
    const dfg *g;
    const sim_result *res;
    int32_t cp_rank;
    host_range *hr;
    size_t nhr;
    host_range **cov; /* scratch: the ranges over one host gap */
    size_t ncov, ccov;
    int64_t *pts; /* scratch: their boundaries */
    size_t cpts;
    hmap by_node, by_text; /* entry keys -> index in out->cp */
    int32_t cap_cp, cap_pieces;
    replay_summary *out;
} cp_ctx;

static int
cmp_range(const void *pa, const void *pb)
{
    const host_range *a = pa, *b = pb;
    if (a->key != b->key)
        return (a->key > b->key) - (a->key < b->key);
    if (a->t0 != b->t0)
        return (a->t0 > b->t0) - (a->t0 < b->t0);
    return (a->t1 < b->t1) - (a->t1 > b->t1); /* the enclosing one first */
}

static int
cmp_cp(const void *pa, const void *pb)
{
    const replay_cp_entry *a = pa, *b = pb;
    return (a->total_ns < b->total_ns) - (a->total_ns > b->total_ns);
}

/* Id of a string of reader r, 0 when it holds none such. */
static uint32_t
reader_string_id(const dpro_reader *r, const char *text)
{
    uint32_t n = dpro_reader_string_count(r);
    for (uint32_t i = 1; i < n; i++) {
        const char *s = dpro_reader_string(r, i);
        if (s && strcmp(s, text) == 0)
            return i;
    }
    return 0;
}

/* Collects every rank's host ranges: cpu_ops, and annotations (host ranges that are not
 * Kineto's python_function, as the ops analysis takes them; iteration markers are not
 * ranges), in graph time, sorted per thread. Returns 0 or -1. */
static int
collect_ranges(cp_ctx *c, const replay *rp)
{
    const job *j = &rp->job;
    size_t cap = 0;
    for (int32_t r = 0; r < j->n_ranks && r < c->g->n_ranks; r++) {
        const job_rank *jr = &j->ranks[r];
        if (!jr->reader)
            continue;
        uint32_t id_python = reader_string_id(jr->reader, "python_function");
        int64_t shift = (rp->align.offset_ns ? rp->align.offset_ns[r] : 0) - rp->time_origin;
        for (size_t i = 0; i < jr->n_events; i++) {
            const job_event *e = &jr->events[i];
            if (e->kind != DPRO_KIND_MARKER || e->thread == 0 ||
                (e->subkind != DPRO_MARK_CPU_OP &&
                 (e->subkind != DPRO_MARK_RANGE || (id_python && e->name2 == id_python))))
                continue;
            if (c->nhr == cap) {
                size_t nc = cap ? cap * 2 : 1024;
                host_range *x = realloc(c->hr, nc * sizeof *x);
                if (!x)
                    return -1;
                c->hr = x;
                cap = nc;
            }
            int64_t t0 = (int64_t)e->start_ns + shift, t1 = (int64_t)e->end_ns + shift;
            const char *nm = dpro_reader_string(jr->reader, e->name);
            c->hr[c->nhr++] = (host_range){((uint64_t)(uint32_t)r << 32) | e->thread,
                                           t0,
                                           t1 > t0 ? t1 : t0,
                                           0,
                                           nm ? nm : "",
                                           e->subkind == DPRO_MARK_CPU_OP};
        }
    }
    if (c->nhr)
        qsort(c->hr, c->nhr, sizeof *c->hr, cmp_range);
    for (size_t i = 0; i < c->nhr; i++) {
        int first = i == 0 || c->hr[i - 1].key != c->hr[i].key;
        int64_t prev = first ? INT64_MIN : c->hr[i - 1].maxend;
        c->hr[i].maxend = c->hr[i].t1 > prev ? c->hr[i].t1 : prev;
    }
    return 0;
}

/* Appends the piece [at, at + ns) of the path to out->cp_pieces. Returns 0 or -1. */
static int
add_piece(cp_ctx *c, int cls, int32_t m, const char *op, int64_t at, int64_t ns)
{
    replay_summary *out = c->out;
    if (out->n_cp_pieces == c->cap_pieces) {
        int32_t nc = c->cap_pieces ? c->cap_pieces * 2 : 256;
        replay_cp_piece *x = realloc(out->cp_pieces, (size_t)nc * sizeof *x);
        if (!x)
            return -1;
        out->cp_pieces = x;
        c->cap_pieces = nc;
    }
    out->cp_pieces[out->n_cp_pieces++] = (replay_cp_piece){at, ns, m, cls, op};
    return 0;
}

/* Adds the piece [at, at + ns) to the composition, to the entry of (cls, node name or op
 * text) and to the pieces. Time on a rank other than the path's own is the wait on that
 * rank. Returns 0 or -1. */
static int
charge(cp_ctx *c, int cls, int32_t m, const char *op, int64_t at, int64_t ns)
{
    const dfg *g = c->g;
    replay_summary *out = c->out;
    if (ns <= 0)
        return 0;
    if (dfg_rank(g, m) != c->cp_rank && cls != REPLAY_CP_COLLECTIVE)
        cls = REPLAY_CP_WAIT_RANK; /* a transfer is every participant's */
    out->cp_class_ns[cls] += ns;
    out->cp_length_ns += ns;
    int host_range_entry = cls == REPLAY_CP_CPU_OP || cls == REPLAY_CP_ANNOTATION ||
                           cls == REPLAY_CP_HOST_OTHER || (cls == REPLAY_CP_WAIT_RANK && op);
    int kind = host_range_entry ? DFG_HOST : g->kind[m];
    int32_t name = host_range_entry ? 0 : g->name[m];
    const char *text = host_range_entry ? (op ? op : "") : NULL;
    if (add_piece(c, cls, m, text, at, ns) != 0)
        return -1;
    hmap *h = text ? &c->by_text : &c->by_node;
    uint64_t key = text ? dpro_fnv1a(text, strlen(text), DPRO_FNV1A_INIT ^ (uint64_t)cls)
                        : ((uint64_t)cls << 40) | ((uint64_t)kind << 32) | (uint32_t)name;
    int32_t e = hmap_get(h, key, -1);
    if (e < 0) {
        if (out->n_cp == c->cap_cp) {
            int32_t nc = c->cap_cp ? c->cap_cp * 2 : 64;
            replay_cp_entry *x = realloc(out->cp, (size_t)nc * sizeof *x);
            if (!x)
                return -1;
            out->cp = x;
            c->cap_cp = nc;
        }
        e = out->n_cp++;
        out->cp[e] = (replay_cp_entry){name, kind, 0, 0, cls, text};
        if (hmap_put(h, key, e) != 0)
            return -1;
    }
    out->cp[e].total_ns += ns;
    out->cp[e].count++;
    return 0;
}

/* The innermost range of c->cov over [p, q): a cpu_op before an annotation, then the
 * latest starting, then the shortest; NULL when none covers it. */
static const host_range *
innermost(const cp_ctx *c, int64_t p, int64_t q)
{
    const host_range *best = NULL;
    for (size_t i = 0; i < c->ncov; i++) {
        const host_range *h = c->cov[i];
        if (h->t0 > p || h->t1 < q)
            continue;
        if (!best || h->cpu_op > best->cpu_op ||
            (h->cpu_op == best->cpu_op &&
             (h->t0 > best->t0 || (h->t0 == best->t0 && h->t1 < best->t1))))
            best = h;
    }
    return best;
}

/* Charges len ns of host time before host node m (the framework time between its
 * thread's previous call and m) to what ran on m's thread then: the measured window of
 * that length that ends where m measurably started, split among the innermost cpu_op or
 * annotation over each part of it (host_other where none was recorded). Returns 0 or -1. */
static int
charge_host_gap(cp_ctx *c, int32_t m, int64_t at, int64_t len)
{
    const dfg *g = c->g;
    if (len <= 0)
        return 0;
    int64_t we = g->mstart[m], ws = we - len;
    uint64_t key = ((uint64_t)(uint32_t)dfg_rank(g, m) << 32) | (uint32_t)g->res_id[g->res[m]];
    /* the last range of the thread starting before we */
    size_t lo = 0, hi = c->nhr;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const host_range *h = &c->hr[mid];
        if (h->key < key || (h->key == key && h->t0 < we))
            lo = mid + 1;
        else
            hi = mid;
    }
    c->ncov = 0;
    size_t npts = 0;
    for (size_t i = lo; i-- > 0 && c->hr[i].key == key && c->hr[i].maxend > ws;) {
        host_range *h = &c->hr[i];
        if (h->t1 <= ws)
            continue;
        if (c->ncov == c->ccov) {
            size_t nc = c->ccov ? c->ccov * 2 : 64;
            host_range **x = realloc(c->cov, nc * sizeof *x);
            int64_t *y = realloc(c->pts, (2 * nc + 2) * sizeof *y);
            if (x)
                c->cov = x;
            if (y)
                c->pts = y;
            if (!x || !y)
                return -1;
            c->ccov = nc;
            c->cpts = 2 * nc + 2;
        }
        c->cov[c->ncov++] = h;
        if (h->t0 > ws)
            c->pts[npts++] = h->t0;
        if (h->t1 < we)
            c->pts[npts++] = h->t1;
    }
    if (!c->ncov)
        return charge(c, REPLAY_CP_HOST_OTHER, m, NULL, at, len);
    c->pts[npts++] = ws;
    c->pts[npts++] = we;
    qsort(c->pts, npts, sizeof *c->pts, order_i64);
    int rc = 0;
    for (size_t i = 0; i + 1 < npts && rc == 0; i++) {
        int64_t p = c->pts[i], q = c->pts[i + 1];
        if (q <= p)
            continue;
        const host_range *h = innermost(c, p, q);
        int cls = !h ? REPLAY_CP_HOST_OTHER : h->cpu_op ? REPLAY_CP_CPU_OP : REPLAY_CP_ANNOTATION;
        rc = charge(c, cls, m, h ? h->name : NULL, at + (p - ws), q - p);
    }
    return rc;
}

static int64_t
clamp64(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* Charges the path's segment [a, z) (simulated time) spent in node m to what ran then:
 * for a host call, the framework time before it started (charge_host_gap), then the
 * call; for a device operation its launch call (when the launch bound it), the launch
 * delay or, released by its stream or another stream, the gap, then the operation.
 * Returns 0 or -1. */
static int
charge_segment(cp_ctx *c, int32_t m, int64_t a, int64_t z)
{
    const dfg *g = c->g;
    const sim_result *res = c->res;
    int64_t s = res->start[m];
    if (g->kind[m] == DFG_HOST) {
        int64_t gz = clamp64(s, a, z);
        int rc = charge_host_gap(c, m, a, gz - a);
        return rc == 0 ? charge(c, REPLAY_CP_API, m, NULL, gz, z - gz) : rc;
    }
    int rc = 0;
    int64_t dev = clamp64(s, a, z);
    int32_t h = res->crit[m];
    if (res->why[m] == SIM_CAUSE_LAUNCH && h >= 0) {
        int64_t he = res->end[h] < s ? res->end[h] : s;
        int64_t api_end = clamp64(he, a, dev);
        rc = charge(c, REPLAY_CP_API, h, NULL, a, api_end - a);
        if (rc == 0)
            rc = charge(c, REPLAY_CP_LAUNCH_DELAY, m, NULL, api_end, dev - api_end);
    } else {
        rc = charge(c, REPLAY_CP_STREAM_GAP, m, NULL, a, dev - a);
    }
    int cls = g->kind[m] == DFG_MEMCPY   ? REPLAY_CP_MEMCPY
              : g->kind[m] == DFG_MEMSET ? REPLAY_CP_MEMSET
              : g->kind[m] == DFG_COLL   ? REPLAY_CP_COLLECTIVE
                                         : REPLAY_CP_KERNEL;
    return rc == 0 ? charge(c, cls, m, NULL, dev, z - dev) : rc;
}

int
replay_cp_compose(const replay *rp, const dfg *g, const sim_result *res, int32_t cp_rank,
                  int32_t to, int64_t from, replay_summary *out)
{
    int32_t *path = NULL, np = 0;
    cp_ctx c;
    memset(&c, 0, sizeof c);
    c.g = g;
    c.res = res;
    c.cp_rank = cp_rank;
    c.out = out;
    int rc = sim_critical_path(g, res, to, from, &path, &np);
    if (rc == 0 && (hmap_init(&c.by_node, 64) != 0 || hmap_init(&c.by_text, 64) != 0))
        rc = -1;
    if (rc == 0)
        rc = collect_ranges(&c, rp);
    for (int32_t i = 0; i < np && rc == 0; i++) {
        int32_t m = path[i];
        if (i == np - 1 && m == to)
            break; /* the next iteration's first node: the iteration ends as it starts */
        int64_t rel = sim_release_time(g, res, m);
        if (rel < 0)
            continue;
        int64_t until = i + 1 < np ? sim_release_time(g, res, path[i + 1]) : res->end[m];
        int64_t a = rel > from ? rel : from; /* only the part inside the iteration counts */
        if (until > a)
            rc = charge_segment(&c, m, a, until);
    }
    if (rc == 0 && out->n_cp > 1)
        qsort(out->cp, (size_t)out->n_cp, sizeof *out->cp, cmp_cp);
    out->cp_rank = cp_rank;
    hmap_free(&c.by_node);
    hmap_free(&c.by_text);
    free(c.hr);
    free(c.cov);
    free(c.pts);
    free(path);
    return rc;
}
