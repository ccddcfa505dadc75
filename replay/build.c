/* build.c: per-rank traces -> global dataflow graph (see build.h). */
#define PR_FMT "replay"
#include "build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "costmodel.h"
#include "dpro_log.h"
#include "hmap.h"

/* What a host API call means for dependencies. */
enum api_class {
    API_OTHER = 0,
    API_EVENT_RECORD,
    API_STREAM_WAIT_EVENT,
    API_EVENT_SYNC,
    API_STREAM_SYNC,
    API_DEVICE_SYNC,
    API_MEMCPY_BLOCKING,
};

static int
classify_api(const char *name)
{
    if (!strcmp(name, "cudaEventRecord") || !strcmp(name, "cudaEventRecordWithFlags") ||
        !strncmp(name, "cuEventRecord", 13))
        return API_EVENT_RECORD;
    if (!strcmp(name, "cudaStreamWaitEvent") || !strncmp(name, "cuStreamWaitEvent", 17))
        return API_STREAM_WAIT_EVENT;
    if (!strcmp(name, "cudaEventSynchronize") || !strcmp(name, "cuEventSynchronize"))
        return API_EVENT_SYNC;
    if (!strcmp(name, "cudaStreamSynchronize") || !strncmp(name, "cuStreamSynchronize", 19))
        return API_STREAM_SYNC;
    if (!strcmp(name, "cudaDeviceSynchronize") || !strcmp(name, "cuCtxSynchronize") ||
        !strcmp(name, "cudaThreadSynchronize"))
        return API_DEVICE_SYNC;
    if ((!strncmp(name, "cudaMemcpy", 10) || !strncmp(name, "cuMemcpy", 8)) &&
        !strstr(name, "Async") && !strstr(name, "ToSymbol") && !strstr(name, "FromSymbol"))
        return API_MEMCPY_BLOCKING;
    return API_OTHER;
}

static int
is_device_kind(uint32_t k)
{
    return k == DPRO_KIND_KERNEL || k == DPRO_KIND_MEMCPY || k == DPRO_KIND_MEMSET;
}

int64_t
build_collective_bytes(const dpro_event *ev, int32_t nranks)
{
    int64_t b = (int64_t)ev->bytes;
    int sz = costmodel_dtype_size(ev->dtype);
    if (ev->count > 0 && sz > 0)
        b = (int64_t)ev->count * sz;
    if (ev->count > 0 &&
        (ev->subkind == DPRO_COLL_ALLGATHER || ev->subkind == DPRO_COLL_REDUCESCATTER ||
         ev->subkind == DPRO_COLL_ALLTOALL))
        b *= nranks > 0 ? nranks : 1;
    return b;
}

int64_t
build_time_origin(const job *j, const int64_t *offset_ns)
{
    int64_t t0 = INT64_MAX;
    for (int32_t r = 0; r < j->n_ranks; r++) {
        const job_rank *jr = &j->ranks[r];
        int64_t off = offset_ns ? offset_ns[r] : 0;
        for (size_t i = 0; i < jr->n_events; i++) {
            uint32_t k = jr->events[i].kind;
            if (k == DPRO_KIND_API || k == DPRO_KIND_COLLECTIVE || is_device_kind(k)) {
                int64_t t = (int64_t)jr->events[i].start_ns + off;
                if (t < t0)
                    t0 = t;
                break; /* events are in start order */
            }
        }
    }
    return t0 == INT64_MAX ? 0 : t0;
}

/* ---- point-to-point transfers (build_p2p_scan, build_match_p2p; see build.h) --------- */

static int
is_p2p_op(uint32_t op)
{
    return op == DPRO_COLL_SEND || op == DPRO_COLL_RECV;
}

uint64_t
build_p2p_channel(uint64_t comm, int32_t src, int32_t dst)
{
    uint64_t h = comm ^ 0x70327020636e6c21ULL; /* "p2p chan!" salt */
    h = (h ^ (uint32_t)src) * 0x100000001b3ULL;
    h = (h ^ ((uint64_t)(uint32_t)dst << 17)) * 0x9e3779b97f4a7c15ULL;
    return h ^ (h >> 29);
}

void
build_p2p_free(build_p2p *p)
{
    free(p->part);
    free(p->key);
    memset(p, 0, sizeof *p);
}

static int
cmp_key2(const void *pa, const void *pb)
{
    const uint64_t *a = pa, *b = pb;
    if (a[0] != b[0])
        return a[0] < b[0] ? -1 : 1;
    return (a[1] > b[1]) - (a[1] < b[1]);
}

/* First index of keys[0..n) (pairs, sorted) not below (comm, seq). */
static size_t
key_lower_bound(const uint64_t *keys, size_t n, uint64_t comm, uint64_t seq)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const uint64_t *k = keys + 2 * mid;
        if (k[0] < comm || (k[0] == comm && k[1] < seq))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

uint64_t
build_coll_seq(const build_p2p *p, const dpro_event *e)
{
    if (!p || p->n_key == 0)
        return e->seq;
    size_t a = key_lower_bound(p->key, p->n_key, e->comm, 0);
    size_t b = key_lower_bound(p->key, p->n_key, e->comm, e->seq);
    return e->seq - (uint64_t)(b - a);
}

/* A call made inside ncclGroupStart/End, waiting for the launch that carries it. */
typedef struct p2p_pending {
    uint32_t thread;
    uint64_t stream;
    size_t part;
} p2p_pending;

int
build_p2p_scan(const job_rank *jr, int32_t rank, build_p2p *p)
{
    memset(p, 0, sizeof *p);
    size_t ne = jr->n_events, np = 0;
    for (size_t i = 0; i < ne; i++) {
        const dpro_event *e = &jr->events[i];
        if (e->kind == DPRO_KIND_COLLECTIVE && is_p2p_op(e->subkind)) {
            if (e->peer < 0)
                p->no_peer++;
            else
                np++;
        }
    }
    if (np == 0)
        return 0;
    const dpro_comm_info *ci;
    size_t nci = jr->reader ? dpro_reader_comms(jr->reader, &ci) : 0;
    hmap dev, ord;
    p2p_pending *pend = malloc(np * sizeof *pend);
    p->part = malloc(np * sizeof *p->part);
    p->key = malloc(2 * np * sizeof *p->key);
    int ok = pend && p->part && p->key;
    if (hmap_init(&dev, ne / 4 + 16) != 0) {
        free(pend);
        build_p2p_free(p);
        return -1;
    }
    if (hmap_init(&ord, 64) != 0) {
        hmap_free(&dev);
        free(pend);
        build_p2p_free(p);
        return -1;
    }
    /* correlation -> its first device op */
    for (size_t i = 0; ok && i < ne; i++) {
        const dpro_event *e = &jr->events[i];
        if (is_device_kind(e->kind) && e->correlation && hmap_get(&dev, e->correlation, -1) < 0 &&
            hmap_put(&dev, e->correlation, (int32_t)i) != 0)
            ok = 0;
    }
    size_t npend = 0;
    for (size_t i = 0; ok && i < ne; i++) {
        const dpro_event *e = &jr->events[i];
        if (e->kind == DPRO_KIND_API && e->correlation && npend > 0) {
            /* a launch from a thread with grouped calls waiting: it carries those of its
             * stream; the others found no op of theirs */
            int32_t d = hmap_get(&dev, e->correlation, -1);
            if (d >= 0) {
                size_t keep = 0;
                for (size_t k = 0; k < npend; k++) {
                    if (pend[k].thread != e->thread) {
                        pend[keep++] = pend[k];
                        continue;
                    }
                    if (pend[k].stream == jr->events[d].stream)
                        p->part[pend[k].part].device = d;
                }
                npend = keep;
            }
            continue;
        }
        if (e->kind != DPRO_KIND_COLLECTIVE || !is_p2p_op(e->subkind) || e->peer < 0)
            continue;
        int32_t me = -1;
        for (size_t k = 0; k < nci; k++)
            if (ci[k].hash == e->comm)
                me = ci[k].rank;
        if (me < 0)
            me = rank;
        build_p2p_part *q = &p->part[p->n];
        memset(q, 0, sizeof *q);
        q->comm = e->comm;
        q->is_send = e->subkind == DPRO_COLL_SEND;
        q->src = q->is_send ? me : e->peer;
        q->dst = q->is_send ? e->peer : me;
        q->rank = rank;
        q->bytes = build_collective_bytes(e, 2);
        q->call = i;
        q->node = -1;
        q->n_sharing = 0;
        uint64_t ck = build_p2p_channel(e->comm, q->src, q->dst) ^ (q->is_send ? 0 : 1);
        int32_t k = hmap_get(&ord, ck, 0);
        q->ordinal = (uint64_t)k;
        if (hmap_put(&ord, ck, k + 1) != 0) {
            ok = 0;
            break;
        }
        q->device = e->correlation ? hmap_get(&dev, e->correlation, -1) : -1;
        if (q->device < 0 && e->thread != 0)
            pend[npend++] = (p2p_pending){e->thread, e->stream, p->n};
        p->key[2 * p->n_key] = e->comm;
        p->key[2 * p->n_key + 1] = e->seq;
        p->n_key++;
        p->n++;
    }
    /* how many transfers each device op carries */
    if (ok) {
        hmap_clear(&ord);
        for (size_t k = 0; ok && k < p->n; k++)
            if (p->part[k].device >= 0) {
                uint64_t d = (uint64_t)p->part[k].device;
                if (hmap_put(&ord, d, hmap_get(&ord, d, 0) + 1) != 0)
                    ok = 0;
            }
        for (size_t k = 0; ok && k < p->n; k++)
            if (p->part[k].device >= 0)
                p->part[k].n_sharing = hmap_get(&ord, (uint64_t)p->part[k].device, 1);
        qsort(p->key, p->n_key, 2 * sizeof *p->key, cmp_key2);
    }
    hmap_free(&dev);
    hmap_free(&ord);
    free(pend);
    if (!ok) {
        build_p2p_free(p);
        return -1;
    }
    return 0;
}

/* Orders the ends by channel, ordinal, then recv before send. */
static int
cmp_p2p_end(const void *pa, const void *pb)
{
    const build_p2p_part *a = pa, *b = pb;
    if (a->comm != b->comm)
        return a->comm < b->comm ? -1 : 1;
    if (a->src != b->src)
        return a->src < b->src ? -1 : 1;
    if (a->dst != b->dst)
        return a->dst < b->dst ? -1 : 1;
    if (a->ordinal != b->ordinal)
        return a->ordinal < b->ordinal ? -1 : 1;
    if (a->is_send != b->is_send)
        return a->is_send - b->is_send;
    return (a->rank > b->rank) - (a->rank < b->rank);
}

/* Union-find with member lists over graph nodes (only the ones touched are set up). */
typedef struct p2p_uf {
    int32_t *parent, *next, *last, *size, *lead; /* by node; lead: designated first member */
} p2p_uf;

static int32_t
uf_root(p2p_uf *u, int32_t x)
{
    while (u->parent[x] != x) {
        u->parent[x] = u->parent[u->parent[x]];
        x = u->parent[x];
    }
    return x;
}

int
build_match_p2p(dfg *g, build_p2p_part *parts, size_t n, build_p2p_stats *st)
{
    build_p2p_stats s;
    memset(&s, 0, sizeof s);
    s.ends = (int64_t)n;
    if (n == 0) {
        if (st)
            *st = s;
        return 0;
    }
    qsort(parts, n, sizeof *parts, cmp_p2p_end);
    size_t nn = (size_t)(g->n_nodes > 0 ? g->n_nodes : 1);
    p2p_uf u = {0};
    u.parent = malloc(nn * sizeof *u.parent);
    u.next = malloc(nn * sizeof *u.next);
    u.last = malloc(nn * sizeof *u.last);
    u.size = malloc(nn * sizeof *u.size);
    u.lead = malloc(nn * sizeof *u.lead);
    int64_t *moved = malloc(nn * sizeof *moved);
    int32_t *stamp = calloc((size_t)g->n_ranks + 1, sizeof *stamp);
    /* pairs modelled: index of the recv end (the send end follows it) */
    size_t *pair = malloc(n * sizeof *pair);
    int rc = -1;
    if (!u.parent || !u.next || !u.last || !u.size || !u.lead || !moved || !stamp || !pair)
        goto out;
    for (size_t i = 0; i < n; i++) {
        int32_t d = parts[i].node;
        if (d >= 0 && d < g->n_nodes) {
            u.parent[d] = d;
            u.next[d] = -1;
            u.last[d] = d;
            u.size[d] = 1;
            u.lead[d] = -1;
            moved[d] = 0;
        }
    }
    size_t n_pair = 0;
    int32_t stamp_id = 0;
    for (size_t i = 0; i < n;) {
        const build_p2p_part *a = &parts[i];
        int paired = i + 1 < n && !a->is_send && parts[i + 1].is_send &&
                     a->comm == parts[i + 1].comm && a->src == parts[i + 1].src &&
                     a->dst == parts[i + 1].dst && a->ordinal == parts[i + 1].ordinal;
        if (!paired) {
            if (s.unmatched++ == 0)
                s.example = *a;
            i++;
            continue;
        }
        const build_p2p_part *b = &parts[i + 1];
        size_t at = i;
        i += 2;
        s.matched += 2;
        if (a->bytes != b->bytes)
            s.bytes_differ++;
        int32_t x = a->node, y = b->node;
        if (x < 0 || y < 0 || x >= g->n_nodes || y >= g->n_nodes) {
            s.no_device++;
            continue;
        }
        if (dfg_rank(g, x) == dfg_rank(g, y)) { /* a rank sending to itself */
            s.conflicts++;
            continue;
        }
        int32_t rx = uf_root(&u, x), ry = uf_root(&u, y);
        if (rx == ry) { /* already exchanging (another transfer of the same ops) */
            pair[n_pair++] = at;
            continue;
        }
        /* two ops of one rank in one group would wait for each other: refuse */
        int32_t small = u.size[rx] < u.size[ry] ? rx : ry, big = small == rx ? ry : rx;
        int clash = 0;
        stamp_id++;
        for (int32_t m = small; m >= 0; m = u.next[m])
            stamp[dfg_rank(g, m)] = stamp_id;
        for (int32_t m = big; m >= 0 && !clash; m = u.next[m])
            clash = stamp[dfg_rank(g, m)] == stamp_id;
        if (clash) {
            s.conflicts++;
            continue;
        }
        u.parent[small] = big;
        u.next[u.last[big]] = small;
        u.last[big] = u.last[small];
        u.size[big] += u.size[small];
        pair[n_pair++] = at;
    }
    /* what each op moves, and the lead (the sender of the component's first pair) */
    for (size_t k = 0; k < n_pair; k++) {
        const build_p2p_part *a = &parts[pair[k]], *b = &parts[pair[k] + 1];
        int64_t bytes = a->bytes > b->bytes ? a->bytes : b->bytes;
        moved[a->node] += bytes;
        moved[b->node] += bytes;
        int32_t r = uf_root(&u, a->node);
        if (u.lead[r] < 0)
            u.lead[r] = b->node;
    }
    s.modelled = (int64_t)n_pair;
    /* one group per component, made in the order of the components' first pairs */
    for (size_t k = 0; k < n_pair; k++) {
        const build_p2p_part *a = &parts[pair[k]];
        int32_t r = uf_root(&u, a->node);
        if (u.size[r] < 0)
            continue; /* done */
        int64_t bytes = 0;
        for (int32_t m = r; m >= 0; m = u.next[m])
            bytes = moved[m] > bytes ? moved[m] : bytes;
        int32_t q = dfg_add_group(g, DPRO_COLL_SEND, u.size[r], bytes, a->comm, a->ordinal, -1);
        if (q < 0)
            goto out;
        for (int32_t m = r; m >= 0; m = u.next[m])
            if (m != u.lead[r]) {
                dfg_set_group(g, m, q);
                g->bytes[m] = moved[m];
            }
        dfg_set_group(g, u.lead[r], q); /* prepended: the first participant */
        g->bytes[u.lead[r]] = moved[u.lead[r]];
        s.groups++;
        s.wide_groups += u.size[r] > 2;
        u.size[r] = -1;
    }
    rc = 0;
out:
    free(u.parent);
    free(u.next);
    free(u.last);
    free(u.size);
    free(u.lead);
    free(moved);
    free(stamp);
    free(pair);
    if (st)
        *st = s;
    return rc;
}

/* Group lookup by (comm, seq). */
typedef struct group_map {
    hmap h; /* mixed key -> first group index with that key; chains in next */
    int32_t *next;
    int32_t cap;
} group_map;

static uint64_t
group_key(uint64_t comm, int op, uint64_t seq)
{
    return comm * 0x9e3779b97f4a7c15ULL ^ ((seq + 0x632be59bd9b4e019ULL) * 31 + (uint64_t)op);
}

/* The group of (comm, op, seq): collectives are matched across ranks by communicator,
 * operation and per-communicator sequence number. */
static int32_t
group_find(dfg *g, group_map *gm, uint64_t comm, int op, uint64_t seq)
{
    int32_t q = hmap_get(&gm->h, group_key(comm, op, seq), -1);
    while (q >= 0 && (g->grp_comm[q] != comm || g->grp_seq[q] != seq || g->grp_op[q] != op))
        q = gm->next[q];
    return q;
}

static int
group_insert(dfg *g, group_map *gm, int32_t q)
{
    if (q >= gm->cap) {
        int32_t c = gm->cap ? gm->cap * 2 : 256;
        while (c <= q)
            c *= 2;
        int32_t *nx = realloc(gm->next, (size_t)c * sizeof *nx);
        if (!nx)
            return -1;
        gm->next = nx;
        gm->cap = c;
    }
    uint64_t k = group_key(g->grp_comm[q], g->grp_op[q], g->grp_seq[q]);
    gm->next[q] = hmap_get(&gm->h, k, -1);
    return hmap_put(&gm->h, k, q);
}

/* Per-rank scratch. */
typedef struct rank_ctx {
    job *j;
    job_rank *jr;
    dfg *g;
    int32_t rank;
    int64_t shift; /* local -> graph time: + offset - t0 */
    hmap thread_res, stream_res, corr_host, coll_meta, event_op, joined;
    int32_t *local_name; /* rank string id -> graph string id (0: not yet) */
    uint8_t *api_cls;    /* rank string id -> enum api_class + 1 (0: not yet) */
    uint32_t n_strings;
    int32_t *node_of_event;
    int32_t first_node;
    int32_t *first_dev, *next_dev; /* device ops of each host node (by node - first) */
    int32_t *last_launched;        /* per resource (by res - first_res) */
    int32_t *pend_head;            /* pending stream waits per resource */
    int32_t *pend_node, *pend_next;
    int32_t n_pend, cap_pend;
    int32_t first_res;
    int dup_warned;
    build_p2p *p2p;       /* the rank's send/recv transfers (nodes filled in here) */
    int *mismatch_warned; /* shared across ranks */
} rank_ctx;

static int32_t
graph_name(rank_ctx *c, uint32_t id)
{
    if (id == 0)
        return 0;
    if (id <= c->n_strings && c->local_name[id])
        return c->local_name[id];
    int32_t gid = dfg_intern(c->g, dpro_reader_string(c->jr->reader, id));
    if (id <= c->n_strings && gid > 0)
        c->local_name[id] = gid;
    return gid;
}

static int
api_class_of(rank_ctx *c, uint32_t id)
{
    if (id == 0)
        return API_OTHER;
    if (id <= c->n_strings && c->api_cls[id])
        return c->api_cls[id] - 1;
    int cls = classify_api(dpro_reader_string(c->jr->reader, id));
    if (id <= c->n_strings)
        c->api_cls[id] = (uint8_t)(cls + 1);
    return cls;
}

static int32_t
thread_resource(rank_ctx *c, uint32_t tid)
{
    int32_t q = hmap_get(&c->thread_res, tid, -1);
    if (q >= 0)
        return q;
    char label[96];
    const dpro_thread_info *ti;
    size_t nt = dpro_reader_threads(c->jr->reader, &ti);
    const char *tname = NULL;
    for (size_t i = 0; i < nt; i++)
        if (ti[i].tid == tid)
            tname = ti[i].name;
    if (tname && *tname)
        snprintf(label, sizeof label, "%s (%u)", tname, tid);
    else
        snprintf(label, sizeof label, "thread %u", tid);
    q = dfg_add_resource(c->g, DFG_RES_THREAD, c->rank, tid, dfg_intern(c->g, label));
    if (q < 0 || hmap_put(&c->thread_res, tid, q) != 0)
        return -1;
    return q;
}

static int32_t
stream_resource(rank_ctx *c, uint64_t stream)
{
    int32_t q = hmap_get(&c->stream_res, stream, -1);
    if (q >= 0)
        return q;
    char label[96];
    const dpro_stream_info *si;
    size_t ns = dpro_reader_streams(c->jr->reader, &si);
    const char *sname = NULL;
    for (size_t i = 0; i < ns; i++)
        if (si[i].id == stream)
            sname = si[i].name;
    if (sname && *sname)
        snprintf(label, sizeof label, "stream %s", sname);
    else
        snprintf(label, sizeof label, "stream %llu", (unsigned long long)stream);
    q = dfg_add_resource(c->g, DFG_RES_STREAM, c->rank, stream, dfg_intern(c->g, label));
    if (q < 0 || hmap_put(&c->stream_res, stream, q) != 0)
        return -1;
    return q;
}

/* Communicator size from the rank's comms table (0 if unknown). */
static int32_t
comm_size(rank_ctx *c, uint64_t hash)
{
    const dpro_comm_info *ci;
    size_t n = dpro_reader_comms(c->jr->reader, &ci);
    for (size_t i = 0; i < n; i++)
        if (ci[i].hash == hash)
            return ci[i].size;
    return 0;
}

static int
add_pending(rank_ctx *c, int32_t res_local, int32_t node)
{
    if (c->n_pend == c->cap_pend) {
        int32_t cap = c->cap_pend ? c->cap_pend * 2 : 64;
        int32_t *a = realloc(c->pend_node, (size_t)cap * sizeof *a);
        if (!a)
            return -1;
        c->pend_node = a;
        int32_t *b = realloc(c->pend_next, (size_t)cap * sizeof *b);
        if (!b)
            return -1;
        c->pend_next = b;
        c->cap_pend = cap;
    }
    c->pend_node[c->n_pend] = node;
    c->pend_next[c->n_pend] = c->pend_head[res_local];
    c->pend_head[res_local] = c->n_pend++;
    return 0;
}

/* Builds the nodes and edges of one rank. Returns 0 or -1. */
static int
build_rank(rank_ctx *c, group_map *gm, const build_bounds *bounds)
{
    job_rank *jr = c->jr;
    dfg *g = c->g;
    size_t ne = jr->n_events;
    int rc = -1;
    c->n_strings = dpro_reader_string_count(jr->reader);
    c->local_name = calloc((size_t)c->n_strings + 1, sizeof *c->local_name);
    c->api_cls = calloc((size_t)c->n_strings + 1, 1);
    c->node_of_event = malloc((ne ? ne : 1) * sizeof *c->node_of_event);
    if (!c->local_name || !c->api_cls || !c->node_of_event)
        return -1;
    if (hmap_init(&c->thread_res, 16) || hmap_init(&c->stream_res, 16) ||
        hmap_init(&c->corr_host, ne / 2 + 16) || hmap_init(&c->coll_meta, 256) ||
        hmap_init(&c->event_op, 64) || hmap_init(&c->joined, 256))
        return -1;
    c->first_node = g->n_nodes;
    c->first_res = g->n_res;

    /* 1. collective calls: correlation -> event; which of them are device-timed
     * descriptors (imported traces) rather than host calls */
    for (size_t i = 0; i < ne; i++) {
        const dpro_event *e = &jr->events[i];
        c->node_of_event[i] = -1;
        if (e->kind == DPRO_KIND_COLLECTIVE && e->correlation &&
            hmap_put(&c->coll_meta, e->correlation, (int32_t)i) != 0)
            return -1;
    }
    uint8_t *coll_is_host = calloc(ne ? ne : 1, 1);
    if (!coll_is_host)
        return -1;
    for (size_t i = 0; i < ne; i++) {
        const dpro_event *e = &jr->events[i];
        if (e->kind == DPRO_KIND_COLLECTIVE)
            coll_is_host[i] = e->thread != 0;
    }
    for (size_t i = 0; i < ne; i++) {
        const dpro_event *e = &jr->events[i];
        if (!is_device_kind(e->kind) || !e->correlation)
            continue;
        int32_t ci = hmap_get(&c->coll_meta, e->correlation, -1);
        if (ci >= 0 && jr->events[ci].start_ns == e->start_ns && jr->events[ci].end_ns == e->end_ns)
            coll_is_host[ci] = 0;
    }

    /* 2. host nodes, in time order; nested calls fold into the outer one */
    hmap last_on_thread; /* tid -> last host node */
    if (hmap_init(&last_on_thread, 16) != 0) {
        free(coll_is_host);
        return -1;
    }
    for (size_t i = 0; i < ne; i++) {
        const dpro_event *e = &jr->events[i];
        int host = e->kind == DPRO_KIND_API || (e->kind == DPRO_KIND_COLLECTIVE && coll_is_host[i]);
        if (!host)
            continue;
        int32_t prev = hmap_get(&last_on_thread, e->thread, -1);
        int64_t ts = (int64_t)e->start_ns + c->shift, te = (int64_t)e->end_ns + c->shift;
        if (te < ts)
            te = ts;
        if (prev >= 0 && ts < g->mend[prev]) {
            /* nested in prev: its launches belong to prev */
            if (e->correlation && hmap_put(&c->corr_host, e->correlation, prev) != 0)
                goto fail_host;
            c->node_of_event[i] = prev;
            continue;
        }
        int32_t res = thread_resource(c, e->thread);
        int32_t name;
        if (e->kind == DPRO_KIND_COLLECTIVE) {
            char nm[64];
            snprintf(nm, sizeof nm, "nccl:%s", dpro_coll_op_name(e->subkind));
            name = dfg_intern(g, nm);
        } else {
            name = graph_name(c, e->name);
        }
        if (res < 0 || name < 0)
            goto fail_host;
        int32_t n = dfg_add_node(g, DFG_HOST, res, name);
        if (n < 0)
            goto fail_host;
        g->mstart[n] = ts;
        g->mend[n] = te;
        g->bytes[n] = (int64_t)e->bytes;
        c->node_of_event[i] = n;
        if (e->correlation && hmap_put(&c->corr_host, e->correlation, n) != 0)
            goto fail_host;
        if (hmap_put(&last_on_thread, e->thread, n) != 0)
            goto fail_host;
    }
    hmap_free(&last_on_thread);
    int32_t n_host_end = g->n_nodes;

    /* 3. device nodes, in time order per stream */
    int32_t n_host = n_host_end - c->first_node;
    c->first_dev = malloc((size_t)(n_host > 0 ? n_host : 1) * sizeof *c->first_dev);
    if (!c->first_dev)
        goto fail_dev;
    for (int32_t i = 0; i < n_host; i++)
        c->first_dev[i] = -1;
    for (size_t i = 0; i < ne; i++) {
        const dpro_event *e = &jr->events[i];
        if (!is_device_kind(e->kind))
            continue;
        int32_t res = stream_resource(c, e->stream);
        int32_t name;
        if (e->kind == DPRO_KIND_KERNEL)
            name = graph_name(c, e->name);
        else {
            char nm[64];
            if (e->kind == DPRO_KIND_MEMCPY) {
                static const char *ck[] = {"HtoH", "HtoD", "DtoH", "DtoD", "Default", "PtoP"};
                snprintf(nm, sizeof nm, "memcpy %s", e->subkind < 6 ? ck[e->subkind] : "?");
            } else {
                snprintf(nm, sizeof nm, "memset");
            }
            name = dfg_intern(g, nm);
        }
        if (res < 0 || name < 0)
            goto fail_dev;
        int kind = e->kind == DPRO_KIND_KERNEL   ? DFG_KERNEL
                   : e->kind == DPRO_KIND_MEMCPY ? DFG_MEMCPY
                                                 : DFG_MEMSET;
        int32_t n = dfg_add_node(g, kind, res, name);
        if (n < 0)
            goto fail_dev;
        int64_t ts = (int64_t)e->start_ns + c->shift, te = (int64_t)e->end_ns + c->shift;
        g->mstart[n] = ts;
        g->mend[n] = te < ts ? ts : te;
        g->dur[n] = g->mend[n] - ts;
        g->bytes[n] = (int64_t)e->bytes;
        c->node_of_event[i] = n;
        int32_t h = e->correlation ? hmap_get(&c->corr_host, e->correlation, -1) : -1;
        if (h >= 0) {
            g->launch[n] = h;
            /* device ops of h, as a chain through next_in_group (free until groups) */
            g->next_in_group[n] = -1;
            int32_t *pp = &c->first_dev[h - c->first_node];
            while (*pp >= 0)
                pp = &g->next_in_group[*pp];
            *pp = n;
        }
        int32_t ci = e->correlation ? hmap_get(&c->coll_meta, e->correlation, -1) : -1;
        if (ci >= 0 && is_p2p_op(jr->events[ci].subkind))
            ci = -1; /* point-to-point: a plain op until build_match_p2p pairs it */
        if (ci >= 0) {
            const dpro_event *ce = &jr->events[ci];
            /* only the first device op of a collective call takes part */
            hmap_put(&c->coll_meta, e->correlation, -2 - ci);
            int32_t nranks = comm_size(c, ce->comm);
            uint64_t cseq = build_coll_seq(c->p2p, ce);
            int32_t q = group_find(g, gm, ce->comm, (int)ce->subkind, cseq);
            if (q >= 0 && hmap_get(&c->joined, (uint64_t)q, 0)) {
                if (c->dup_warned++ == 0)
                    job_warn(c->j,
                             "rank %d: collective %s seq %llu of communicator %016llx appears "
                             "twice; the second one is replayed as a plain kernel",
                             c->rank, dpro_coll_op_name(ce->subkind), (unsigned long long)cseq,
                             (unsigned long long)ce->comm);
                continue;
            }
            if (q < 0) {
                q = dfg_add_group(g, (int)ce->subkind, nranks,
                                  build_collective_bytes(ce, nranks ? nranks : c->j->n_ranks),
                                  ce->comm, cseq, -1);
                if (q < 0 || group_insert(g, gm, q) != 0)
                    goto fail_dev;
            } else if (g->grp_bytes[q] !=
                           build_collective_bytes(ce, nranks ? nranks : c->j->n_ranks) &&
                       c->j->n_diag < 1000 && (*c->mismatch_warned)++ < 3) {
                job_warn(c->j,
                         "collective seq %llu of communicator %016llx (%s): rank %d moves "
                         "%lld bytes, another rank %lld; a rank skipped a collective?",
                         (unsigned long long)cseq, (unsigned long long)ce->comm,
                         dpro_coll_op_name(ce->subkind), c->rank,
                         (long long)build_collective_bytes(ce, nranks ? nranks : c->j->n_ranks),
                         (long long)g->grp_bytes[q]);
            }
            if (hmap_put(&c->joined, (uint64_t)q, 1) != 0)
                goto fail_dev;
            g->bytes[n] = g->grp_bytes[q];
            /* keep the launch chain: the participant's next_in_group is reused below */
            c->node_of_event[i] = n;
            g->group[n] = q; /* linked into the group after the launch chains are used */
        }
    }
    free(coll_is_host);
    coll_is_host = NULL;
    if (c->p2p)
        for (size_t k = 0; k < c->p2p->n; k++) {
            build_p2p_part *pp = &c->p2p->part[k];
            pp->node =
                pp->device >= 0 && (size_t)pp->device < ne ? c->node_of_event[pp->device] : -1;
        }

    /* 4. dependencies from the host calls, in time order */
    int32_t n_res_rank = g->n_res - c->first_res;
    c->last_launched = malloc((size_t)(n_res_rank > 0 ? n_res_rank : 1) * sizeof *c->last_launched);
    c->pend_head = malloc((size_t)(n_res_rank > 0 ? n_res_rank : 1) * sizeof *c->pend_head);
    if (!c->last_launched || !c->pend_head)
        goto fail;
    for (int32_t q = 0; q < n_res_rank; q++)
        c->last_launched[q] = c->pend_head[q] = -1;
    c->n_pend = 0;
    /* thread -> its last event record (event index): a stream wait recorded without its
     * event handle (object 0) waits for the event its thread recorded last, the
     * record-then-wait pattern of every framework (DDP buckets, stream joins) */
    hmap last_record;
    if (hmap_init(&last_record, 16) != 0)
        goto fail;
    for (size_t i = 0; i < ne; i++) {
        const dpro_event *e = &jr->events[i];
        int32_t h = c->node_of_event[i];
        if (h < 0 || g->kind[h] != DFG_HOST)
            continue;
        if (e->kind == DPRO_KIND_API || e->kind == DPRO_KIND_COLLECTIVE) {
            /* launches happen once per node: at the event that created it */
            int created = g->mstart[h] == (int64_t)e->start_ns + c->shift;
            if (created) {
                for (int32_t d = c->first_dev[h - c->first_node]; d >= 0; d = g->next_in_group[d]) {
                    int32_t rl = g->res[d] - c->first_res;
                    for (int32_t p = c->pend_head[rl]; p >= 0; p = c->pend_next[p])
                        if (dfg_add_edge(g, c->pend_node[p], d) != 0)
                            goto fail_rec;
                    c->pend_head[rl] = -1;
                    c->last_launched[rl] = d;
                }
            }
        }
        if (e->kind != DPRO_KIND_API)
            continue;
        int cls = api_class_of(c, e->name);
        int32_t sres = -1;
        if (cls == API_EVENT_RECORD || cls == API_STREAM_WAIT_EVENT || cls == API_STREAM_SYNC) {
            sres = hmap_get(&c->stream_res, e->stream, -1);
            if (sres >= 0)
                sres -= c->first_res;
        }
        switch (cls) {
        case API_EVENT_RECORD:
            if (hmap_put(&c->event_op, e->object, sres >= 0 ? c->last_launched[sres] : -1) != 0 ||
                hmap_put(&last_record, e->thread, (int32_t)i) != 0)
                goto fail_rec;
            break;
        case API_STREAM_WAIT_EVENT: {
            uint64_t ev_obj = e->object;
            if (ev_obj == 0) {
                int32_t ri = hmap_get(&last_record, e->thread, -1);
                ev_obj = ri >= 0 ? jr->events[ri].object : 0;
            }
            int32_t op = ev_obj ? hmap_get(&c->event_op, ev_obj, -1) : -1;
            if (op >= 0 && sres >= 0 && add_pending(c, sres, op) != 0)
                goto fail_rec;
            break;
        }
        case API_EVENT_SYNC: {
            int32_t op = hmap_get(&c->event_op, e->object, -1);
            if (op >= 0) {
                if (dfg_add_edge(g, op, h) != 0)
                    goto fail_rec;
                g->flags[h] |= DFG_F_BLOCKING;
            }
            break;
        }
        case API_STREAM_SYNC:
            if (sres >= 0 && c->last_launched[sres] >= 0) {
                if (dfg_add_edge(g, c->last_launched[sres], h) != 0)
                    goto fail_rec;
                g->flags[h] |= DFG_F_BLOCKING;
            }
            break;
        case API_DEVICE_SYNC:
            for (int32_t q = 0; q < n_res_rank; q++)
                if (c->last_launched[q] >= 0) {
                    if (dfg_add_edge(g, c->last_launched[q], h) != 0)
                        goto fail_rec;
                    g->flags[h] |= DFG_F_BLOCKING;
                }
            break;
        case API_MEMCPY_BLOCKING:
            for (int32_t d = c->first_dev[h - c->first_node]; d >= 0; d = g->next_in_group[d]) {
                if (dfg_add_edge(g, d, h) != 0)
                    goto fail_rec;
                g->flags[h] |= DFG_F_BLOCKING;
            }
            break;
        default:
            break;
        }
    }

    hmap_free(&last_record);

    /* 5. group membership (the launch chains are no longer needed) */
    for (int32_t n = n_host_end; n < g->n_nodes; n++) {
        g->next_in_group[n] = -1;
        if (g->group[n] >= 0) {
            int32_t q = g->group[n];
            g->group[n] = -1;
            dfg_set_group(g, n, q);
        }
    }

    /* 6. iteration boundaries */
    if (bounds && bounds->n > 0) {
        int32_t *bn = malloc((size_t)bounds->n * sizeof *bn);
        int32_t nb = 0;
        if (!bn)
            goto fail;
        for (int32_t k = 0; k < bounds->n; k++) {
            size_t ei = bounds->event_index[k];
            if (ei >= ne)
                continue;
            const dpro_event *e = &jr->events[ei];
            int32_t node = -1;
            if (is_device_kind(e->kind) || e->kind == DPRO_KIND_API ||
                e->kind == DPRO_KIND_COLLECTIVE) {
                node = c->node_of_event[ei];
            } else if (e->end_ns > e->start_ns) {
                /* last host call within the marker on its thread (else on any thread) */
                int64_t ts = (int64_t)e->start_ns + c->shift, te = (int64_t)e->end_ns + c->shift;
                int32_t q = hmap_get(&c->thread_res, e->thread, -1);
                for (size_t x = ei; x < ne; x++) {
                    if ((int64_t)jr->events[x].start_ns + c->shift > te)
                        break;
                    int32_t m = c->node_of_event[x];
                    if (m >= 0 && g->kind[m] == DFG_HOST && g->mstart[m] >= ts &&
                        g->mend[m] <= te && (q < 0 || g->res[m] == q))
                        node = m;
                }
            }
            if (node >= 0 && (nb == 0 || g->mend[node] > g->mend[bn[nb - 1]]))
                bn[nb++] = node;
        }
        int src = dfg_set_iterations(g, c->rank, bn, nb);
        free(bn);
        if (src != 0)
            goto fail;
    }
    rc = 0;
fail:
    free(coll_is_host);
    return rc;
fail_rec:
    hmap_free(&last_record);
    free(coll_is_host);
    return -1;
fail_host:
    hmap_free(&last_on_thread);
    free(coll_is_host);
    return -1;
fail_dev:
    free(coll_is_host);
    return -1;
}

static void
rank_ctx_free(rank_ctx *c)
{
    hmap_free(&c->thread_res);
    hmap_free(&c->stream_res);
    hmap_free(&c->corr_host);
    hmap_free(&c->coll_meta);
    hmap_free(&c->event_op);
    hmap_free(&c->joined);
    free(c->local_name);
    free(c->api_cls);
    free(c->node_of_event);
    free(c->first_dev);
    free(c->last_launched);
    free(c->pend_head);
    free(c->pend_node);
    free(c->pend_next);
    memset(c, 0, sizeof *c);
}

static int
cmp_i64(const void *pa, const void *pb)
{
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    return (a > b) - (a < b);
}

static int
cmp_int32(const void *pa, const void *pb)
{
    int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    return (a > b) - (a < b);
}

/* ---- launch queues (build_launch_queue, see build.h) ---------------------------------- */

#define BQ_LONG_MIN_NS 50000 /* a launch call this long waited for something */
#define BQ_LONG_FACTOR 8     /* ... or this many times the normal launch cost */
#define BQ_MIN_LONG 8        /* long calls needed before a queue is believed */
#define BQ_MIN_DEPTH 64      /* smallest plausible queue capacity */

/* One queued op: its launch call, stream and the call's start. */
typedef struct bq_op {
    int64_t lstart;
    int32_t launch, res, node;
} bq_op;

static int
cmp_bq_device(const void *pa, const void *pb)
{
    const bq_op *a = pa, *b = pb;
    if (a->lstart != b->lstart)
        return (a->lstart > b->lstart) - (a->lstart < b->lstart);
    if (a->launch != b->launch)
        return (a->launch > b->launch) - (a->launch < b->launch);
    return (a->node > b->node) - (a->node < b->node);
}

static int
cmp_bq_stream(const void *pa, const void *pb)
{
    const bq_op *a = pa, *b = pb;
    if (a->res != b->res)
        return (a->res > b->res) - (a->res < b->res);
    return cmp_bq_device(pa, pb);
}

/* Binary min-heap of end times. */
static void
heap_push(int64_t *h, size_t *n, int64_t v)
{
    size_t i = (*n)++;
    while (i > 0 && h[(i - 1) / 2] > v) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = v;
}

static void
heap_pop(int64_t *h, size_t *n)
{
    int64_t v = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && h[c + 1] < h[c])
            c++;
        if (h[c] >= v)
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0)
        h[i] = v;
}

/* For ops sorted into queues (a queue: a run of equal res when per_stream, else all),
 * u[i] = ops earlier in the queue not finished when the call launching ops[i] started,
 * for the first op of each call in its queue; -1 for the others. */
static void
queue_occupancy(const dfg *g, const bq_op *ops, size_t n, int per_stream, int32_t *u, int64_t *heap)
{
    size_t hn = 0;
    for (size_t i = 0; i < n; i++) {
        int new_queue = i == 0 || (per_stream && ops[i].res != ops[i - 1].res);
        if (new_queue)
            hn = 0;
        int first = new_queue || ops[i].launch != ops[i - 1].launch;
        if (first) {
            while (hn > 0 && heap[0] <= ops[i].lstart)
                heap_pop(heap, &hn);
            u[i] = (int32_t)hn;
        } else {
            u[i] = -1;
        }
        heap_push(heap, &hn, g->mend[ops[i].node]);
    }
}

/* Q of one scope from the occupancy at the long calls; returns it (0: no queue seen)
 * and the number of long calls it explains. */
static int32_t
queue_depth(const dfg *g, const bq_op *ops, size_t n, const int32_t *u, int64_t long_ns,
            int32_t *tmp, int32_t *n_long, int32_t *explained)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t h = ops[i].launch;
        if (u[i] >= 0 && !(g->flags[h] & DFG_F_BLOCKING) && g->mend[h] - g->mstart[h] > long_ns)
            tmp[k++] = u[i];
    }
    *n_long = (int32_t)k;
    *explained = 0;
    if (k < BQ_MIN_LONG)
        return 0;
    qsort(tmp, k, sizeof *tmp, cmp_int32);
    int32_t q = tmp[k / 2];
    if (q < BQ_MIN_DEPTH)
        return 0;
    int32_t near = 0;
    for (size_t i = 0; i < k; i++)
        near += tmp[i] >= q - q / 8 && tmp[i] <= q + q / 8;
    if (2 * (size_t)near < k)
        return 0;
    *explained = near;
    return q;
}

int
build_launch_queue(dfg *g, int32_t r, build_queue_info *info)
{
    build_queue_info qi;
    memset(&qi, 0, sizeof qi);
    /* the rank's launched device ops, from its streams (O(its nodes), not the job's) */
    size_t n = 0;
    for (int32_t q = 0; q < g->n_res; q++)
        if (g->res_rank[q] == r && g->res_kind[q] == DFG_RES_STREAM)
            for (int32_t d = g->res_first[q]; d >= 0; d = g->next_on_res[d])
                n += g->launch[d] >= 0 && !(g->flags[d] & DFG_F_REMOVED);
    if (info)
        *info = qi;
    if (n == 0)
        return 0;
    bq_op *ops = malloc(n * sizeof *ops);
    int32_t *u = malloc(n * sizeof *u);
    int32_t *tmp = malloc(n * sizeof *tmp);
    int64_t *heap = malloc(n * sizeof *heap);
    int rc = -1;
    if (!ops || !u || !tmp || !heap)
        goto out;
    size_t k = 0;
    for (int32_t q = 0; q < g->n_res; q++) {
        if (g->res_rank[q] != r || g->res_kind[q] != DFG_RES_STREAM)
            continue;
        for (int32_t d = g->res_first[q]; d >= 0; d = g->next_on_res[d]) {
            int32_t l = g->launch[d];
            if (l >= 0 && !(g->flags[d] & DFG_F_REMOVED))
                ops[k++] = (bq_op){g->mstart[l], l, q, d};
        }
    }

    /* the normal cost of a launch call: 10th percentile over the calls (a queue-bound
     * job may have more long calls than short ones) */
    qsort(ops, n, sizeof *ops, cmp_bq_device);
    int64_t *costs = heap; /* scratch until the occupancy is computed */
    size_t nc = 0;
    for (size_t i = 0; i < n; i++)
        if (i == 0 || ops[i].launch != ops[i - 1].launch)
            costs[nc++] = g->mend[ops[i].launch] - g->mstart[ops[i].launch];
    qsort(costs, nc, sizeof *costs, cmp_i64);
    qi.launch_cost_ns = costs[nc / 10] > 0 ? costs[nc / 10] : 0;
    qi.long_ns = qi.launch_cost_ns * BQ_LONG_FACTOR;
    if (qi.long_ns < BQ_LONG_MIN_NS)
        qi.long_ns = BQ_LONG_MIN_NS;

    /* the device scope, then the stream scope; keep the better one */
    int32_t n_long = 0, expl_dev = 0, expl_str = 0;
    queue_occupancy(g, ops, n, 0, u, heap);
    int32_t q_dev = queue_depth(g, ops, n, u, qi.long_ns, tmp, &n_long, &expl_dev);
    qi.long_calls = n_long;
    qsort(ops, n, sizeof *ops, cmp_bq_stream);
    queue_occupancy(g, ops, n, 1, u, heap);
    int32_t q_str = queue_depth(g, ops, n, u, qi.long_ns, tmp, &n_long, &expl_str);
    if (q_str > 0 && expl_str >= expl_dev) {
        qi.depth = q_str;
        qi.per_stream = 1;
        qi.explained = expl_str;
    } else if (q_dev > 0) {
        qi.depth = q_dev;
        qi.explained = expl_dev;
        qsort(ops, n, sizeof *ops, cmp_bq_device);
        queue_occupancy(g, ops, n, 0, u, heap);
    }

    /* the edges: position i of a queue waits for position i - Q of the same queue */
    int32_t q = qi.depth;
    size_t qstart = 0;
    for (size_t i = 0; q > 0 && i < n; i++) {
        if (i > 0 && qi.per_stream && ops[i].res != ops[i - 1].res)
            qstart = i;
        if (u[i] < 0 || i - qstart < (size_t)q)
            continue;
        int32_t src = ops[i - (size_t)q].node, h = ops[i].launch;
        if (g->launch[src] == h || g->mend[src] > g->mend[h])
            continue; /* the trace says the call did not wait for it */
        if (dfg_add_edge(g, src, h) != 0)
            goto out;
        g->flags[h] |= DFG_F_QUEUED;
        qi.edges++;
        qi.held += g->mend[src] > g->mstart[h];
    }
    rc = 0;
    if (info)
        *info = qi;
out:
    free(ops);
    free(u);
    free(tmp);
    free(heap);
    return rc;
}

/* Pure submission latency (build_submission_latency): the time from the start of a
 * launch call to the start of its op when nothing else held the op, estimated as the
 * LAT_PCT-th percentile of (op start - call start) over the ops launched onto an idle
 * stream: the previous op of the stream had ended, and every edge predecessor of the op
 * too, before the launch call began. When no op qualifies: the smallest (op start - call
 * start) of the rank, an upper bound of the latency that holds no queueing unless every
 * op of the rank was queued.
 *
 * Not the median over ops that merely started on an idle stream (the older estimator):
 * with the host a full launch queue ahead, an op that starts a few microseconds after its
 * predecessor (the device's own gap between kernels) was launched milliseconds earlier,
 * and that median is queueing. Measured, in us, min / 10th / 25th / 50th percentile (ops):
 *                                 launched onto an idle stream   started on an idle stream
 *   v100-1rank-training (queued)  6.4 / 6.5 / 6.7 / 6.9 (48)      6.3 / 6.9 / 38650 / 72992 (1094)
 *   a100-2rank-allreduce-rank0    8.7 / 10.4 / 10.8 / 11.6 (2635) 7.5 / 10.3 / 10.9 / 12.2 (3739)
 *   128rank-sampled-rank0         4 / 5 / 6 / 7 (288)             4 / 6 / 305 / 10888 (1179)
 *   a100-alexnet-1rank            11 / 14 / 17 / 20 (40)          11 / 15 / 19 / 49 (69)
 *   simgpu ddp-sim resnet50 x2    4.2 / 4.5 / 5.8 / 6.5 (35)      the same 35
 * (simgpu runs queued kernels back to back with no gap, so there the two sets agree; real
 * devices leave a microsecond or two between kernels, which the older estimator took for
 * idleness.)
 * The ops launched onto an idle stream carry no queueing; their upper tail is another
 * stream's work occupying the device (alexnet: 55 us at the 75th, 260 us at the 90th
 * percentile), so a low percentile rather than the median, and not the minimum, which
 * one driver hiccup or a microsecond of host/device clock disagreement would decide. */
#define LAT_PCT 25

/* Submission latency of every rank (or only of only_rank >= 0) into lat_out[n_ranks]
 * (predmax: latest measured end of each node's edge predecessors, INT64_MIN for none;
 * lats: scratch of n_nodes). */
static void
submission_latencies(const dfg *g, const int64_t *predmax, int64_t *lats, int64_t *lat_out,
                     int32_t only_rank)
{
    for (int32_t r = 0; r < g->n_ranks; r++) {
        lat_out[r] = 0;
        if (only_rank >= 0 && r != only_rank)
            continue;
        size_t k = 0;
        int64_t least = INT64_MAX;
        for (int32_t q = 0; q < g->n_res; q++) {
            if (g->res_rank[q] != r || g->res_kind[q] != DFG_RES_STREAM)
                continue;
            for (int32_t d = g->res_first[q]; d >= 0; d = g->next_on_res[d]) {
                int32_t l = g->launch[d];
                if (l < 0 || (g->flags[d] & DFG_F_REMOVED) || g->mstart[d] < g->mstart[l])
                    continue;
                int64_t lt = g->mstart[d] - g->mstart[l];
                if (lt < least)
                    least = lt;
                int32_t p = g->prev_on_res[d];
                if ((p < 0 || g->mend[p] <= g->mstart[l]) &&
                    (predmax[d] == INT64_MIN || predmax[d] <= g->mstart[l]))
                    lats[k++] = lt;
            }
        }
        if (k > 0) {
            qsort(lats, k, sizeof *lats, cmp_i64);
            lat_out[r] = lats[k * LAT_PCT / 100];
        } else if (least != INT64_MAX) {
            lat_out[r] = least;
        }
    }
}

/* Latest measured end of each node's edge predecessors (INT64_MIN: none). */
static void
edge_predmax(const dfg *g, int64_t *predmax)
{
    for (int32_t i = 0; i < g->n_nodes; i++)
        predmax[i] = INT64_MIN;
    for (int64_t e = 0; e < g->n_edges; e++) {
        int32_t s = g->esrc[e], d = g->edst[e];
        if (s >= 0 && d >= 0 && !(g->flags[s] & DFG_F_REMOVED) && g->mend[s] > predmax[d])
            predmax[d] = g->mend[s];
    }
}

int64_t
build_submission_latency(const dfg *g, int32_t r)
{
    if (r < 0 || r >= g->n_ranks)
        return 0;
    size_t n = (size_t)(g->n_nodes > 0 ? g->n_nodes : 1);
    int64_t *predmax = malloc(n * sizeof *predmax);
    int64_t *lats = malloc(n * sizeof *lats);
    int64_t *out = malloc((size_t)g->n_ranks * sizeof *out);
    int64_t lat = 0;
    if (predmax && lats && out) {
        edge_predmax(g, predmax);
        submission_latencies(g, predmax, lats, out, r);
        lat = out[r];
    }
    free(predmax);
    free(lats);
    free(out);
    return lat;
}

int
build_derive_timing(dfg *g)
{
    int32_t n = g->n_nodes;
    int64_t *predmax = malloc((size_t)(n > 0 ? n : 1) * sizeof *predmax);
    int64_t *lats = malloc((size_t)(n > 0 ? n : 1) * sizeof *lats);
    int64_t *lat_sub = malloc((size_t)(g->n_ranks > 0 ? g->n_ranks : 1) * sizeof *lat_sub);
    if (!predmax || !lats || !lat_sub) {
        free(predmax);
        free(lats);
        free(lat_sub);
        return -1;
    }
    edge_predmax(g, predmax);
    submission_latencies(g, predmax, lats, lat_sub, -1);
    for (int32_t r = 0; r < g->n_ranks; r++)
        if (lat_sub[r] > 0)
            pr_dbg("rank %d: submission latency %.1f us", r, (double)lat_sub[r] / 1000.0);
    for (int32_t i = 0; i < n; i++) {
        int32_t p = g->prev_on_res[i];
        int64_t prev_end = p >= 0 ? g->mend[p] : 0;
        if (g->kind[i] == DFG_HOST) {
            int64_t gap = g->mstart[i] - prev_end;
            g->gap[i] = gap > 0 ? gap : 0;
            int64_t from = g->mstart[i];
            if (predmax[i] > from && predmax[i] != INT64_MIN)
                from = predmax[i];
            int64_t d = g->mend[i] - from;
            g->dur[i] = d > 0 ? d : 0;
            continue;
        }
        int32_t r = dfg_rank(g, i);
        int32_t l = g->launch[i];
        int64_t t = g->mstart[i];
        int64_t lm = lat_sub[r];
        if (l < 0) {
            int64_t gap = t - (p >= 0 ? prev_end : 0);
            if (predmax[i] != INT64_MIN && p >= 0 && predmax[i] > prev_end)
                gap = 0;
            g->gap[i] = gap > 0 ? gap : 0;
            g->lat[i] = 0;
        } else {
            int64_t launch_ready = g->mstart[l] + lm;
            if (p >= 0 && prev_end >= launch_ready && prev_end >= predmax[i]) {
                /* bound by its stream */
                int64_t gap = t - prev_end;
                g->gap[i] = gap > 0 ? gap : 0;
                g->lat[i] = (int32_t)(lm < INT32_MAX ? lm : INT32_MAX);
            } else if (predmax[i] == INT64_MIN || g->mstart[l] + lm >= predmax[i]) {
                /* bound by its launch */
                int64_t lt = t - g->mstart[l];
                if (lt < 0)
                    lt = 0;
                g->lat[i] = (int32_t)(lt < INT32_MAX ? lt : INT32_MAX);
                g->gap[i] = 0;
            } else {
                /* bound by an event wait */
                g->lat[i] = (int32_t)(lm < INT32_MAX ? lm : INT32_MAX);
                g->gap[i] = 0;
            }
        }
        if (p < 0 && l < 0)
            g->gap[i] = t > 0 ? t : 0;
        g->dur[i] = g->mend[i] - t;
    }
    for (int32_t q = 0; q < g->n_groups; q++) {
        int64_t arr = INT64_MIN, end = INT64_MIN;
        int32_t m = 0;
        for (int32_t p = g->grp_first[q]; p >= 0; p = g->next_in_group[p]) {
            m++;
            if (g->mstart[p] > arr)
                arr = g->mstart[p];
            if (g->mend[p] > end)
                end = g->mend[p];
        }
        g->grp_members[q] = m;
        if (m > 0) {
            g->grp_mdur[q] = end > arr ? end - arr : 0;
            g->grp_dur[q] = g->grp_mdur[q];
        }
        if (g->grp_nranks[q] <= 0)
            g->grp_nranks[q] = m;
    }
    free(predmax);
    free(lats);
    free(lat_sub);
    return 0;
}

/* Wake-ups between the host threads of a rank (see build.h). A call is taken as woken
 * when its gap on its thread is at least WAKE_MIN_GAP_NS and WAKE_GAP_FACTOR times the
 * thread's median gap (a wait, not framework time between calls), and a call on
 * another thread of the rank ended within that gap: the latest such call is its
 * waker, provided it ended in the gap's last WAKE_LAG_NUM/WAKE_LAG_DEN (or at most
 * WAKE_MAX_LAG_NS before the call). The bound is loose on purpose: on an oversubscribed
 * host a woken thread may wait milliseconds to be scheduled (measured on tests/simgpu
 * with two ranks on two busy cores: up to 56 % of an 8 ms wait); it keeps a thread that
 * computed through most of its gap from being tied to a call that ended early in it.
 * Device operations are not taken as wakers: a thread that waits for the device does so
 * in a synchronisation call, which its edges already order. */
#define WAKE_MIN_GAP_NS 50000
#define WAKE_GAP_FACTOR 8
#define WAKE_MAX_LAG_NS 100000
#define WAKE_LAG_NUM 3
#define WAKE_LAG_DEN 4

typedef struct end_ref {
    int64_t end;
    int32_t node;
} end_ref;

static int
cmp_end_ref(const void *pa, const void *pb)
{
    const end_ref *a = pa, *b = pb;
    if (a->end != b->end)
        return (a->end > b->end) - (a->end < b->end);
    return (a->node > b->node) - (a->node < b->node);
}

static int
infer_wakeups(dfg *g)
{
    int32_t n0 = g->n_nodes;
    end_ref *byend = malloc((size_t)(n0 > 0 ? n0 : 1) * sizeof *byend);
    int64_t *gaps = malloc((size_t)(n0 > 0 ? n0 : 1) * sizeof *gaps);
    int64_t *med = malloc((size_t)(g->n_res > 0 ? g->n_res : 1) * sizeof *med);
    int rc = -1;
    if (!byend || !gaps || !med)
        goto out;
    for (int32_t r = 0; r < g->n_ranks; r++) {
        size_t nh = 0;
        int32_t threads = 0;
        for (int32_t q = 0; q < g->n_res; q++) {
            if (g->res_rank[q] != r || g->res_kind[q] != DFG_RES_THREAD)
                continue;
            threads++;
            size_t k = 0;
            for (int32_t h = g->res_first[q]; h >= 0; h = g->next_on_res[h]) {
                byend[nh].end = g->mend[h];
                byend[nh++].node = h;
                if (g->prev_on_res[h] >= 0)
                    gaps[k++] = g->mstart[h] - g->mend[g->prev_on_res[h]];
            }
            if (k > 0) {
                qsort(gaps, k, sizeof *gaps, cmp_i64);
                med[q] = gaps[k / 2] > 0 ? gaps[k / 2] : 0;
            } else {
                med[q] = 0;
            }
        }
        if (threads < 2)
            continue;
        qsort(byend, nh, sizeof *byend, cmp_end_ref);
        for (size_t x = 0; x < nh; x++) {
            int32_t h = byend[x].node;
            int32_t q = g->res[h], p = g->prev_on_res[h];
            int64_t prev_end = p >= 0 ? g->mend[p] : 0;
            int64_t gap = g->mstart[h] - prev_end;
            if (gap < WAKE_MIN_GAP_NS || gap < WAKE_GAP_FACTOR * med[q])
                continue;
            /* latest call of another thread ending in (prev_end, start] */
            size_t lo = 0, hi = nh; /* first index with end > start */
            while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (byend[mid].end <= g->mstart[h])
                    lo = mid + 1;
                else
                    hi = mid;
            }
            int32_t waker = -1;
            for (size_t k = lo; k-- > 0;) {
                int32_t w = byend[k].node;
                if (byend[k].end <= prev_end)
                    break;
                if (g->res[w] != q) {
                    waker = w;
                    break;
                }
            }
            if (waker < 0)
                continue;
            int64_t lag = g->mstart[h] - g->mend[waker];
            int64_t max_lag = gap / WAKE_LAG_DEN * WAKE_LAG_NUM;
            if (max_lag < WAKE_MAX_LAG_NS)
                max_lag = WAKE_MAX_LAG_NS;
            if (lag > max_lag)
                continue;
            if (dfg_add_wakeup(g, waker, h, lag) != 0)
                goto out;
        }
    }
    rc = 0;
out:
    free(byend);
    free(gaps);
    free(med);
    return rc;
}

/* Pairs the send/recv transfers of every rank (p2p[r], nodes filled in) into groups and
 * says what is left unmodelled. Returns 0 or -1. */
static int
match_p2p_job(job *j, dfg *g, build_p2p *p2p, build_p2p_stats *out)
{
    size_t n = 0;
    for (int32_t r = 0; r < j->n_ranks; r++) {
        n += p2p[r].n;
        if (p2p[r].no_peer > 0)
            job_warn(j,
                     "rank %d: %zu send/recv record(s) name no peer (imported \"SendRecv\" "
                     "kernels: neither the peer nor the direction is known); they are replayed "
                     "with their measured durations",
                     r, p2p[r].no_peer);
    }
    build_p2p_stats st;
    memset(&st, 0, sizeof st);
    build_p2p_part *all = malloc((n ? n : 1) * sizeof *all);
    if (!all)
        return -1;
    size_t k = 0;
    for (int32_t r = 0; r < j->n_ranks; r++)
        for (size_t i = 0; i < p2p[r].n; i++)
            all[k++] = p2p[r].part[i];
    int rc = build_match_p2p(g, all, n, &st);
    free(all);
    if (rc != 0)
        return -1;
    for (int32_t r = 0; r < j->n_ranks; r++)
        st.no_peer += (int64_t)p2p[r].no_peer;
    if (st.unmatched > 0) {
        const build_p2p_part *x = &st.example;
        /* the peer's job rank, where a trace names it in this communicator */
        int32_t peer = x->is_send ? x->dst : x->src, peer_rank = -1;
        for (int32_t r = 0; r < j->n_ranks && peer_rank < 0; r++) {
            if (!j->ranks[r].reader)
                continue;
            const dpro_comm_info *ci;
            size_t nci = dpro_reader_comms(j->ranks[r].reader, &ci);
            for (size_t i = 0; i < nci; i++)
                if (ci[i].hash == x->comm && ci[i].rank == peer)
                    peer_rank = r;
        }
        char why[160];
        if (peer_rank >= 0)
            snprintf(why, sizeof why,
                     "rank %d's trace has fewer %ss on this channel (it ends early?)", peer_rank,
                     x->is_send ? "recv" : "send");
        else
            snprintf(why, sizeof why, "no trace holds communicator rank %d (a missing rank?)",
                     peer);
        job_warn(j,
                 "%lld send/recv transfer end(s) have no matching end on their peer, e.g. the "
                 "%s #%llu %d -> %d of communicator %016llx on rank %d: %s; they keep their "
                 "measured durations",
                 (long long)st.unmatched, x->is_send ? "send" : "recv",
                 (unsigned long long)x->ordinal, x->src, x->dst, (unsigned long long)x->comm,
                 x->rank, why);
    }
    if (st.bytes_differ > 0)
        job_warn(j,
                 "%lld send/recv pair(s) disagree on the size between sender and receiver; "
                 "the larger is taken",
                 (long long)st.bytes_differ);
    if (st.conflicts > 0)
        job_warn(j,
                 "%lld send/recv pair(s) are not modelled as exchanges: pairing them would "
                 "make two operations of one rank wait for each other (grouped calls whose "
                 "peers pair differently); they keep their measured durations",
                 (long long)st.conflicts);
    if (st.no_device > 0)
        pr_info("%lld send/recv pair(s) have no device operation on one side (host-only "
                "records); not modelled",
                (long long)st.no_device);
    if (st.ends > 0)
        pr_info("send/recv: %lld transfer ends, %lld paired into %d exchange(s) (%d of more "
                "than two operations), %lld unmatched",
                (long long)st.ends, (long long)st.matched, st.groups, st.wide_groups,
                (long long)st.unmatched);
    if (out)
        *out = st;
    return 0;
}

int
build_dfg(job *j, const int64_t *offset_ns, const build_bounds *bounds, dfg *g,
          build_p2p_stats *p2p_stats)
{
    if (p2p_stats)
        memset(p2p_stats, 0, sizeof *p2p_stats);
    if (dfg_init(g, j->n_ranks) != 0)
        return -1;
    int64_t t0 = build_time_origin(j, offset_ns);
    group_map gm = {0};
    build_p2p *p2p = calloc((size_t)j->n_ranks + 1, sizeof *p2p);
    if (!p2p || hmap_init(&gm.h, 1024) != 0) {
        free(p2p);
        dfg_free(g);
        return -1;
    }
    int rc = 0;
    int mismatch_warned = 0;
    for (int32_t r = 0; r < j->n_ranks && rc == 0; r++)
        if (j->ranks[r].reader)
            rc = build_p2p_scan(&j->ranks[r], r, &p2p[r]);
    for (int32_t r = 0; r < j->n_ranks && rc == 0; r++) {
        if (!j->ranks[r].reader)
            continue;
        rank_ctx c;
        memset(&c, 0, sizeof c);
        c.j = j;
        c.jr = &j->ranks[r];
        c.g = g;
        c.rank = r;
        c.shift = (offset_ns ? offset_ns[r] : 0) - t0;
        c.mismatch_warned = &mismatch_warned;
        c.p2p = &p2p[r];
        rc = build_rank(&c, &gm, bounds ? &bounds[r] : NULL);
        rank_ctx_free(&c);
    }
    hmap_free(&gm.h);
    free(gm.next);
    if (rc == 0 && mismatch_warned > 3)
        job_warn(j, "%d collectives in all have participants that disagree on their size",
                 mismatch_warned);
    if (rc == 0)
        rc = match_p2p_job(j, g, p2p, p2p_stats);
    for (int32_t r = 0; r < j->n_ranks; r++)
        build_p2p_free(&p2p[r]);
    free(p2p);
    for (int32_t r = 0; r < j->n_ranks && rc == 0; r++) {
        build_queue_info qi;
        if (!j->ranks[r].reader)
            continue;
        rc = build_launch_queue(g, r, &qi);
        if (rc == 0 && qi.depth > 0)
            pr_info("rank %d: launch queue of %d ops per %s (%d of %d long launch calls "
                    "found it full; %d calls held, normal launch cost %.1f us)",
                    r, qi.depth, qi.per_stream ? "stream" : "device", qi.explained, qi.long_calls,
                    qi.held, (double)qi.launch_cost_ns / 1000.0);
    }
    if (rc == 0)
        rc = build_derive_timing(g);
    if (rc == 0)
        rc = infer_wakeups(g);
    if (rc == 0) {
        /* collectives some present rank never joined */
        int32_t short_groups = 0, first_short = -1;
        for (int32_t q = 0; q < g->n_groups; q++) {
            int32_t expect = g->grp_nranks[q];
            if (expect > j->n_present)
                expect = j->n_present;
            if (g->grp_members[q] < expect) {
                if (first_short < 0)
                    first_short = q;
                short_groups++;
            }
        }
        if (short_groups > 0) {
            int32_t q = first_short;
            char who[256] = "";
            size_t wl = 0;
            for (int32_t r = 0; r < j->n_ranks; r++) {
                if (!j->ranks[r].reader)
                    continue;
                int found = 0;
                for (int32_t p = g->grp_first[q]; p >= 0; p = g->next_in_group[p])
                    found |= dfg_rank(g, p) == r;
                if (!found && wl + 12 < sizeof who)
                    wl += (size_t)snprintf(who + wl, sizeof who - wl, "%s%d", wl ? "," : "", r);
            }
            job_warn(j,
                     "%d collective(s) lack participants, e.g. %s seq %llu of communicator "
                     "%016llx has %d of %d (no record from rank(s) %s): a rank skipped a "
                     "collective or its trace ends early; these collectives wait only for "
                     "the ranks present",
                     short_groups, dpro_coll_op_name(g->grp_op[q]),
                     (unsigned long long)g->grp_seq[q], (unsigned long long)g->grp_comm[q],
                     g->grp_members[q], g->grp_nranks[q], who[0] ? who : "?");
        }
    }
    if (rc != 0)
        dfg_free(g);
    return rc;
}
