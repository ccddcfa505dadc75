/* build.c: per-rank traces -> global dataflow graph (see build.h). */
#define PR_FMT "replay"
#include "build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "costmodel.h"
#include "dpro_log.h"
#include "build_int.h"
#include "hmap.h"

int64_t
build_collective_bytes(const job_event *ev, int32_t nranks)
{
    /* count x element size x ranks in checked arithmetic: an input may claim any
     * count (saturates at INT64_MAX; build_check_input refuses such events first) */
    int64_t b = ev->bytes > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)ev->bytes;
    int64_t sz = (int64_t)dpro_nccl_dtype_size(ev->dtype);
    int64_t count = ev->count > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)ev->count;
    if (count > 0 && sz > 0 && __builtin_mul_overflow(count, sz, &b))
        b = INT64_MAX;
    if (count > 0 &&
        (ev->subkind == DPRO_COLL_ALLGATHER || ev->subkind == DPRO_COLL_REDUCESCATTER ||
         ev->subkind == DPRO_COLL_ALLTOALL) &&
        __builtin_mul_overflow(b, (int64_t)(nranks > 0 ? nranks : 1), &b))
        b = INT64_MAX;
    return b;
}

/* Whether local time t (ns) plus shift lands in [-BUILD_TIME_LIMIT, BUILD_TIME_LIMIT]. */
static int
time_fits(uint64_t t, int64_t shift)
{
    int64_t v;
    return t <= (uint64_t)BUILD_TIME_LIMIT && !__builtin_add_overflow((int64_t)t, shift, &v) &&
           v <= BUILD_TIME_LIMIT && v >= -BUILD_TIME_LIMIT;
}

int
build_check_input(job *j, const int64_t *offset_ns, char *errbuf, size_t errlen)
{
    int rc = 0;
    for (int32_t r = 0; r < j->n_ranks && rc == 0; r++) {
        job_rank *jr = &j->ranks[r];
        int64_t off = offset_ns ? offset_ns[r] : 0;
        if (job_rank_expand(jr) != 0) {
            snprintf(errbuf, errlen, "out of memory");
            rc = -2;
        }
        for (size_t i = 0; i < jr->n_events && rc == 0; i++) {
            const job_event *e = &jr->events[i];
            if (e->kind != DPRO_KIND_API && e->kind != DPRO_KIND_COLLECTIVE &&
                e->kind != DPRO_KIND_MARKER && !is_device_kind(e->kind))
                continue;
            if (!time_fits(e->start_ns, off) || (e->end_ns && !time_fits(e->end_ns, off))) {
                snprintf(errbuf, errlen,
                         "%s: event %zu (%s): its times (%llu .. %llu ns) plus the rank's clock "
                         "offset (%lld ns) leave the range of a replay time (+-%lld ns)",
                         jr->path ? jr->path : "?", i, dpro_kind_name(e->kind),
                         (unsigned long long)e->start_ns, (unsigned long long)e->end_ns,
                         (long long)off, (long long)BUILD_TIME_LIMIT);
                rc = -1;
            } else if (e->kind == DPRO_KIND_COLLECTIVE &&
                       build_collective_bytes(e, j->n_ranks) > BUILD_BYTES_LIMIT) {
                snprintf(errbuf, errlen,
                         "%s: event %zu (collective %s): %llu elements of %zu bytes is more "
                         "than a collective moves (at most %lld bytes)",
                         jr->path ? jr->path : "?", i, dpro_coll_op_name(e->subkind),
                         (unsigned long long)e->count, dpro_nccl_dtype_size(e->dtype),
                         (long long)BUILD_BYTES_LIMIT);
                rc = -1;
            }
        }
        job_rank_compact(jr);
    }
    return rc;
}

int
build_first_op(const job_event *ev, size_t n, uint64_t *start_ns)
{
    int found = 0;
    for (size_t i = 0; i < n && !found; i++) {
        uint32_t k = ev[i].kind;
        found = k == DPRO_KIND_API || k == DPRO_KIND_COLLECTIVE || is_device_kind(k);
        if (found)
            *start_ns = ev[i].start_ns; /* events are in start order */
    }
    return found;
}

int64_t
build_time_origin(const job *j, const int64_t *offset_ns)
{
    int64_t t0 = INT64_MAX;
    for (int32_t r = 0; r < j->n_ranks; r++) {
        const job_rank *jr = &j->ranks[r];
        int64_t off = offset_ns ? offset_ns[r] : 0;
        uint64_t start = jr->wire ? jr->wire_first_op : 0;
        int found =
            jr->wire ? jr->wire_has_first_op : build_first_op(jr->events, jr->n_events, &start);
        if (found && (int64_t)start + off < t0)
            t0 = (int64_t)start + off;
    }
    return t0 == INT64_MAX ? 0 : t0;
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
    int32_t *local_name;   /* rank string id -> graph string id (0: not yet) */
    uint8_t *coll_is_host; /* by event: a collective that is a host call (rank_collectives) */
    uint32_t n_strings;
    int32_t *node_of_event;
    int32_t first_node, n_host_end; /* the rank's first node, and one past its host nodes */
    int32_t *first_dev, *next_dev;  /* device ops of each host node (by node - first), each
                                     * op's next one (by node - n_host_end) */
    int32_t *dev_group;             /* each op's collective group, -1 none (as next_dev) */
    int32_t *last_launched;         /* per resource (by res - first_res) */
    int32_t *pend_head;             /* pending stream waits per resource */
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

/* Allocates the rank's scratch (freed by rank_ctx_free). Returns 0 or -1. */
static int
rank_ctx_init(rank_ctx *c)
{
    job_rank *jr = c->jr;
    size_t ne = jr->n_events;
    int rc = 0;
    c->n_strings = dpro_reader_string_count(jr->reader);
    c->local_name = calloc((size_t)c->n_strings + 1, sizeof *c->local_name);
    c->node_of_event = malloc((ne ? ne : 1) * sizeof *c->node_of_event);
    c->coll_is_host = calloc(ne ? ne : 1, 1);
    if (!c->local_name || !c->node_of_event || !c->coll_is_host)
        rc = -1;
    if (rc == 0 && (hmap_init(&c->thread_res, 16) || hmap_init(&c->stream_res, 16) ||
                    hmap_init(&c->corr_host, ne / 2 + 16) || hmap_init(&c->coll_meta, 256) ||
                    hmap_init(&c->event_op, 64) || hmap_init(&c->joined, 256)))
        rc = -1;
    c->first_node = c->g->n_nodes;
    c->first_res = c->g->n_res;
    return rc;
}

/* Whether rank jr's collective records predate DPRO_COLL_TIMING (build.h): an import
 * (its meta source names an importer, "<format>-import") none of whose collectives says
 * DPRO_COLL_TIMING_DEVICE. Importers made before the field wrote 0 there for
 * device-timed records. */
static int
legacy_import(const job_rank *jr)
{
    const char *src = job_rank_meta(jr, JOB_META_SOURCE);
    int legacy = src && strstr(src, "-import") != NULL;
    for (size_t i = 0; i < jr->n_events && legacy; i++)
        legacy = !(jr->events[i].kind == DPRO_KIND_COLLECTIVE &&
                   jr->events[i].value == DPRO_COLL_TIMING_DEVICE);
    return legacy;
}

/* Phase 1: collective calls by correlation id (coll_meta), and which of them are host
 * calls rather than device-timed records (coll_is_host: the record's value,
 * DPRO_COLL_TIMING_*; for a legacy import, see legacy_import, the guess from before the
 * field: a record on a thread is a host call unless a device op of its correlation has
 * exactly its times). Returns 0 or -1. */
static int
rank_collectives(rank_ctx *c)
{
    job_rank *jr = c->jr;
    size_t ne = jr->n_events;
    int rc = 0, legacy = legacy_import(jr);
    for (size_t i = 0; i < ne && rc == 0; i++) {
        const job_event *e = &jr->events[i];
        c->node_of_event[i] = -1;
        if (e->kind == DPRO_KIND_COLLECTIVE && e->correlation &&
            hmap_put(&c->coll_meta, e->correlation, (int32_t)i) != 0)
            rc = -1;
        if (e->kind == DPRO_KIND_COLLECTIVE)
            c->coll_is_host[i] = legacy ? e->thread != 0 : e->value != DPRO_COLL_TIMING_DEVICE;
    }
    for (size_t i = 0; i < ne && rc == 0 && legacy; i++) {
        const job_event *e = &jr->events[i];
        if (!is_device_kind(e->kind) || !e->correlation)
            continue;
        int32_t ci = hmap_get(&c->coll_meta, e->correlation, -1);
        if (ci >= 0 && jr->events[ci].start_ns == e->start_ns && jr->events[ci].end_ns == e->end_ns)
            c->coll_is_host[ci] = 0;
    }
    return rc;
}

/* Phase 2: host nodes, in time order; nested calls fold into the outer one. Returns 0 or
 * -1. */
static int
rank_host_nodes(rank_ctx *c)
{
    job_rank *jr = c->jr;
    dfg *g = c->g;
    size_t ne = jr->n_events;
    hmap last_on_thread; /* tid -> last host node */
    int rc = hmap_init(&last_on_thread, 16);
    for (size_t i = 0; i < ne && rc == 0; i++) {
        const job_event *e = &jr->events[i];
        int host =
            e->kind == DPRO_KIND_API || (e->kind == DPRO_KIND_COLLECTIVE && c->coll_is_host[i]);
        if (!host)
            continue;
        int32_t prev = hmap_get(&last_on_thread, e->thread, -1);
        int64_t ts = (int64_t)e->start_ns + c->shift, te = (int64_t)e->end_ns + c->shift;
        if (te < ts)
            te = ts;
        if (prev >= 0 && ts < dfg_mend(g, prev)) {
            /* nested in prev: its launches belong to prev */
            if (e->correlation && hmap_put(&c->corr_host, e->correlation, prev) != 0)
                rc = -1;
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
        int32_t n = res >= 0 && name >= 0 ? dfg_add_node(g, DFG_HOST, res, name) : -1;
        if (n < 0) {
            rc = -1;
            break;
        }
        g->mstart[n] = ts;
        c->node_of_event[i] = n;
        if (dfg_set_mend(g, n, te) != 0 || dfg_set_bytes(g, n, (int64_t)e->bytes) != 0 ||
            (e->correlation && hmap_put(&c->corr_host, e->correlation, n) != 0) ||
            hmap_put(&last_on_thread, e->thread, n) != 0)
            rc = -1;
    }
    hmap_free(&last_on_thread);
    c->n_host_end = g->n_nodes;
    return rc;
}

/* Device op n (event e) is the first device op of collective call ce (event ci): makes it
 * a participant of the collective's group, found or made in gm (linked into the group by
 * rank_link_groups). Returns 0 or -1. */
static int
rank_join_collective(rank_ctx *c, group_map *gm, const job_event *e, int32_t n, int32_t ci)
{
    dfg *g = c->g;
    const job_event *ce = &c->jr->events[ci];
    /* only the first device op of a collective call takes part */
    if (hmap_put(&c->coll_meta, e->correlation, -2 - ci) != 0)
        return -1;
    int32_t nranks = comm_size(c, ce->comm);
    uint64_t cseq = build_coll_seq(c->p2p, ce);
    int64_t bytes = build_collective_bytes(ce, nranks ? nranks : c->j->n_ranks);
    int32_t q = group_find(g, gm, ce->comm, (int)ce->subkind, cseq);
    int rc = 0;
    if (q >= 0 && hmap_get(&c->joined, (uint64_t)q, 0)) {
        if (c->dup_warned++ == 0)
            job_warn(c->j,
                     "rank %d: collective %s seq %llu of communicator %016llx appears "
                     "twice; the second one is replayed as a plain kernel",
                     c->rank, dpro_coll_op_name(ce->subkind), (unsigned long long)cseq,
                     (unsigned long long)ce->comm);
        return 0;
    }
    if (q < 0) {
        q = dfg_add_group(g, (int)ce->subkind, nranks, bytes, ce->comm, cseq, -1);
        if (q < 0 || group_insert(g, gm, q) != 0)
            rc = -1;
    } else if (g->grp_bytes[q] != bytes && c->j->n_diag < 1000 && (*c->mismatch_warned)++ < 3) {
        job_warn(c->j,
                 "collective seq %llu of communicator %016llx (%s): rank %d moves "
                 "%lld bytes, another rank %lld; a rank skipped a collective?",
                 (unsigned long long)cseq, (unsigned long long)ce->comm,
                 dpro_coll_op_name(ce->subkind), c->rank, (long long)bytes,
                 (long long)g->grp_bytes[q]);
    }
    if (rc == 0 && hmap_put(&c->joined, (uint64_t)q, 1) != 0)
        rc = -1;
    if (rc == 0)
        rc = dfg_set_bytes(g, n, g->grp_bytes[q]);
    if (rc == 0) {
        c->dev_group[n - c->n_host_end] = q; /* linked into the group by rank_link_groups */
    }
    return rc;
}

/* Phase 3: device nodes, in time order per stream; each linked to the host call that
 * launched it (a chain from first_dev through next_dev) and to its
 * collective's group. Returns 0 or -1. */
static int
rank_device_nodes(rank_ctx *c, group_map *gm)
{
    job_rank *jr = c->jr;
    dfg *g = c->g;
    size_t ne = jr->n_events;
    int32_t n_host = c->n_host_end - c->first_node;
    int rc = 0;
    c->first_dev = malloc((size_t)(n_host > 0 ? n_host : 1) * sizeof *c->first_dev);
    /* an op an event at most */
    c->next_dev = malloc((ne > 0 ? ne : 1) * sizeof *c->next_dev);
    c->dev_group = malloc((ne > 0 ? ne : 1) * sizeof *c->dev_group);
    if (!c->first_dev || !c->next_dev || !c->dev_group)
        return -1;
    for (int32_t i = 0; i < n_host; i++)
        c->first_dev[i] = -1;
    for (size_t i = 0; i < ne && rc == 0; i++) {
        const job_event *e = &jr->events[i];
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
        int kind = e->kind == DPRO_KIND_KERNEL   ? DFG_KERNEL
                   : e->kind == DPRO_KIND_MEMCPY ? DFG_MEMCPY
                                                 : DFG_MEMSET;
        int32_t n = res >= 0 && name >= 0 ? dfg_add_node(g, kind, res, name) : -1;
        if (n < 0) {
            rc = -1;
            break;
        }
        int64_t ts = (int64_t)e->start_ns + c->shift, te = (int64_t)e->end_ns + c->shift;
        g->mstart[n] = ts;
        int64_t dur = (te < ts ? ts : te) - ts;
        if (dfg_set_dur(g, n, dur) != 0 || dfg_set_mend(g, n, ts + dur) != 0 ||
            dfg_set_bytes(g, n, (int64_t)e->bytes) != 0) {
            rc = -1;
            break;
        }
        c->node_of_event[i] = n;
        c->dev_group[n - c->n_host_end] = -1;
        int32_t h = e->correlation ? hmap_get(&c->corr_host, e->correlation, -1) : -1;
        if (h >= 0) {
            g->launch[n] = h;
            c->next_dev[n - c->n_host_end] = -1;
            int32_t *pp = &c->first_dev[h - c->first_node];
            while (*pp >= 0)
                pp = &c->next_dev[*pp - c->n_host_end];
            *pp = n;
        }
        int32_t ci = e->correlation ? hmap_get(&c->coll_meta, e->correlation, -1) : -1;
        if (ci >= 0 && is_p2p_op(jr->events[ci].subkind)) {
            ci = -1; /* point-to-point: a plain op until build_match_p2p pairs it */
            rc = dfg_group_reserve(g, n);
        }
        if (ci >= 0)
            rc = rank_join_collective(c, gm, e, n, ci);
    }
    if (rc == 0 && c->p2p)
        for (size_t k = 0; k < c->p2p->n; k++) {
            build_p2p_part *pp = &c->p2p->part[k];
            pp->node =
                pp->device >= 0 && (size_t)pp->device < ne ? c->node_of_event[pp->device] : -1;
        }
    return rc;
}

/* The edges API call e (event index i, host node h) of class cls adds (see build.h).
 * last_record: thread -> its last event record. Returns 0 or -1. */
static int
rank_call_edges(rank_ctx *c, hmap *last_record, const job_event *e, size_t i, int32_t h, int cls)
{
    dfg *g = c->g;
    int32_t n_res_rank = g->n_res - c->first_res;
    int32_t sres = -1;
    int rc = 0;
    if (cls == DPRO_API_CLASS_EVENT_RECORD || cls == DPRO_API_CLASS_STREAM_WAIT ||
        cls == DPRO_API_CLASS_STREAM_SYNC) {
        sres = hmap_get(&c->stream_res, e->stream, -1);
        if (sres >= 0)
            sres -= c->first_res;
    }
    switch (cls) {
    case DPRO_API_CLASS_EVENT_RECORD:
        if (hmap_put(&c->event_op, e->object, sres >= 0 ? c->last_launched[sres] : -1) != 0 ||
            hmap_put(last_record, e->thread, (int32_t)i) != 0)
            rc = -1;
        break;
    case DPRO_API_CLASS_STREAM_WAIT: {
        uint64_t ev_obj = e->object;
        if (ev_obj == 0) {
            int32_t ri = hmap_get(last_record, e->thread, -1);
            ev_obj = ri >= 0 ? c->jr->events[ri].object : 0;
        }
        int32_t op = ev_obj ? hmap_get(&c->event_op, ev_obj, -1) : -1;
        if (op >= 0 && sres >= 0)
            rc = add_pending(c, sres, op);
        break;
    }
    case DPRO_API_CLASS_EVENT_SYNC: {
        int32_t op = hmap_get(&c->event_op, e->object, -1);
        if (op >= 0) {
            rc = dfg_add_edge(g, op, h);
            g->flags[h] |= DFG_F_BLOCKING;
        }
        break;
    }
    case DPRO_API_CLASS_STREAM_SYNC:
        if (sres >= 0 && c->last_launched[sres] >= 0) {
            rc = dfg_add_edge(g, c->last_launched[sres], h);
            g->flags[h] |= DFG_F_BLOCKING;
        }
        break;
    case DPRO_API_CLASS_DEVICE_SYNC:
        for (int32_t q = 0; q < n_res_rank && rc == 0; q++)
            if (c->last_launched[q] >= 0) {
                rc = dfg_add_edge(g, c->last_launched[q], h);
                g->flags[h] |= DFG_F_BLOCKING;
            }
        break;
    case DPRO_API_CLASS_MEMCPY:
        for (int32_t d = c->first_dev[h - c->first_node]; d >= 0 && rc == 0;
             d = c->next_dev[d - c->n_host_end]) {
            rc = dfg_add_edge(g, d, h);
            g->flags[h] |= DFG_F_BLOCKING;
        }
        break;
    default:
        break;
    }
    return rc;
}

/* Phase 4: dependencies from the host calls, in time order. Returns 0 or -1. */
static int
rank_dependencies(rank_ctx *c)
{
    job_rank *jr = c->jr;
    dfg *g = c->g;
    size_t ne = jr->n_events;
    int32_t n_res_rank = g->n_res - c->first_res;
    c->last_launched = malloc((size_t)(n_res_rank > 0 ? n_res_rank : 1) * sizeof *c->last_launched);
    c->pend_head = malloc((size_t)(n_res_rank > 0 ? n_res_rank : 1) * sizeof *c->pend_head);
    if (!c->last_launched || !c->pend_head)
        return -1;
    for (int32_t q = 0; q < n_res_rank; q++)
        c->last_launched[q] = c->pend_head[q] = -1;
    c->n_pend = 0;
    /* thread -> its last event record (event index): a stream wait recorded without its
     * event handle (object 0) waits for the event its thread recorded last, the
     * record-then-wait pattern of every framework (DDP buckets, stream joins) */
    hmap last_record;
    int rc = hmap_init(&last_record, 16);
    for (size_t i = 0; i < ne && rc == 0; i++) {
        const job_event *e = &jr->events[i];
        int32_t h = c->node_of_event[i];
        if (h < 0 || g->kind[h] != DFG_HOST)
            continue;
        /* launches happen once per node: at the event that created it */
        if ((e->kind == DPRO_KIND_API || e->kind == DPRO_KIND_COLLECTIVE) &&
            g->mstart[h] == (int64_t)e->start_ns + c->shift) {
            for (int32_t d = c->first_dev[h - c->first_node]; d >= 0 && rc == 0;
                 d = c->next_dev[d - c->n_host_end]) {
                int32_t rl = g->res[d] - c->first_res;
                for (int32_t p = c->pend_head[rl]; p >= 0 && rc == 0; p = c->pend_next[p])
                    rc = dfg_add_edge(g, c->pend_node[p], d);
                c->pend_head[rl] = -1;
                c->last_launched[rl] = d;
            }
        }
        if (rc == 0 && e->kind == DPRO_KIND_API)
            rc = rank_call_edges(c, &last_record, e, i, h,
                                 dpro_reader_api_class(jr->reader, e->name));
    }
    hmap_free(&last_record);
    return rc;
}

/* Phase 5: group membership, in node order. Returns 0 or -1 (out of memory). */
static int
rank_link_groups(rank_ctx *c)
{
    dfg *g = c->g;
    int rc = 0;
    for (int32_t n = c->n_host_end; n < g->n_nodes && rc == 0; n++)
        if (c->dev_group[n - c->n_host_end] >= 0)
            rc = dfg_set_group(g, n, c->dev_group[n - c->n_host_end]);
    return rc;
}

/* The node that closes the iteration at event ei (see build_bounds), -1 none. */
static int32_t
bound_node(rank_ctx *c, size_t ei)
{
    job_rank *jr = c->jr;
    dfg *g = c->g;
    const job_event *e = &jr->events[ei];
    int32_t node = -1;
    if (is_device_kind(e->kind) || e->kind == DPRO_KIND_API || e->kind == DPRO_KIND_COLLECTIVE) {
        node = c->node_of_event[ei];
    } else if (e->end_ns > e->start_ns) {
        /* last host call within the marker on its thread (else on any thread) */
        int64_t ts = (int64_t)e->start_ns + c->shift, te = (int64_t)e->end_ns + c->shift;
        int32_t q = hmap_get(&c->thread_res, e->thread, -1);
        for (size_t x = ei; x < jr->n_events; x++) {
            if ((int64_t)jr->events[x].start_ns + c->shift > te)
                break;
            int32_t m = c->node_of_event[x];
            if (m >= 0 && g->kind[m] == DFG_HOST && g->mstart[m] >= ts && dfg_mend(g, m) <= te &&
                (q < 0 || g->res[m] == q))
                node = m;
        }
    }
    return node;
}

/* Phase 6: iteration boundaries (bounds may be NULL). Returns 0 or -1. */
static int
rank_iterations(rank_ctx *c, const build_bounds *bounds)
{
    dfg *g = c->g;
    if (!bounds || bounds->n <= 0)
        return 0;
    int32_t *bn = malloc((size_t)bounds->n * sizeof *bn);
    int32_t nb = 0;
    if (!bn)
        return -1;
    for (int32_t k = 0; k < bounds->n; k++) {
        size_t ei = bounds->event_index[k];
        int32_t node = ei < c->jr->n_events ? bound_node(c, ei) : -1;
        if (node >= 0 && (nb == 0 || dfg_mend(g, node) > dfg_mend(g, bn[nb - 1])))
            bn[nb++] = node;
    }
    int rc = dfg_set_iterations(g, c->rank, bn, nb);
    free(bn);
    return rc != 0 ? -1 : 0;
}

/* Builds the nodes and edges of one rank, phase by phase. Returns 0 or -1. */
static int
build_rank(rank_ctx *c, group_map *gm, const build_bounds *bounds)
{
    int rc = rank_ctx_init(c);
    if (rc == 0)
        rc = rank_collectives(c);
    if (rc == 0)
        rc = rank_host_nodes(c);
    if (rc == 0)
        rc = rank_device_nodes(c, gm);
    if (rc == 0)
        rc = rank_dependencies(c);
    if (rc == 0)
        rc = rank_link_groups(c);
    if (rc == 0)
        rc = rank_iterations(c, bounds);
    return rc;
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
    free(c->node_of_event);
    free(c->coll_is_host);
    free(c->first_dev);
    free(c->next_dev);
    free(c->dev_group);
    free(c->last_launched);
    free(c->pend_head);
    free(c->pend_node);
    free(c->pend_next);
    memset(c, 0, sizeof *c);
}

/* Warns, once per rank, about device ops whose latency after their launch the graph holds
 * at its cap (build_count_capped_lats). */
static void
warn_capped_lats(job *j, const dfg *g)
{
    int32_t *count = calloc((size_t)j->n_ranks + 1, sizeof *count);
    if (count) /* one pass over the nodes, not one a rank */
        build_count_capped_lats(g, count, j->n_ranks);
    else
        pr_warn("out of memory: the device ops held at the 2.1 s latency cap are not counted");
    for (int32_t r = 0; count && r < j->n_ranks; r++) {
        int32_t n = j->ranks[r].reader ? count[r] : 0;
        if (n > 0)
            job_warn(j,
                     "%s: rank %d: %d device op(s) started more than 2.1 s after their launch "
                     "call with nothing in the trace holding them (a device held by another "
                     "process, a wait not recorded); their latency is taken as 2.1 s, so the "
                     "replay starts them earlier than measured",
                     j->ranks[r].path ? j->ranks[r].path : "?", j->ranks[r].rank, n);
    }
    free(count);
}

/* Warns, once per rank, about device ops measured to start before an op they wait for
 * had ended (build_count_early_starts). */
static void
warn_early_starts(job *j, const dfg *g)
{
    int32_t *count = calloc((size_t)j->n_ranks + 1, sizeof *count);
    int64_t *worst = calloc((size_t)j->n_ranks + 1, sizeof *worst);
    if (!count || !worst || build_count_early_starts(g, count, worst, j->n_ranks) != 0)
        pr_warn("out of memory: the device ops that started before an op they wait for "
                "ended are not counted");
    for (int32_t r = 0; count && worst && r < j->n_ranks; r++) {
        int32_t n = j->ranks[r].reader ? count[r] : 0;
        if (n > 0)
            job_warn(j,
                     "%s: rank %d: %d device op(s) started before an operation they wait for "
                     "had ended (by up to %.3f ms): the trace contradicts its own "
                     "dependencies (a wrong dependency, or a device or collector that broke "
                     "stream order); the replay starts them after it, later than measured",
                     j->ranks[r].path ? j->ranks[r].path : "?", j->ranks[r].rank, n,
                     (double)worst[r] / 1e6);
    }
    free(count);
    free(worst);
}

/* Warns about collectives that some present rank never joined. */
static void
warn_short_groups(job *j, const dfg *g)
{
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
            for (int32_t p = g->grp_first[q]; p >= 0; p = dfg_next_in_group(g, p))
                found |= dfg_rank(g, p) == r;
            if (!found && wl + 12 < sizeof who)
                wl += (size_t)snprintf(who + wl, sizeof who - wl, "%s%d", wl ? "," : "", r);
        }
        job_warn(j,
                 "%d collective(s) lack participants, e.g. %s seq %llu of communicator "
                 "%016llx has %d of %d (no record from rank(s) %s): a rank skipped a "
                 "collective or its trace ends early; these collectives wait only for "
                 "the ranks present",
                 short_groups, dpro_coll_op_name(g->grp_op[q]), (unsigned long long)g->grp_seq[q],
                 (unsigned long long)g->grp_comm[q], g->grp_members[q], g->grp_nranks[q],
                 who[0] ? who : "?");
    }
}

int
build_dfg(job *j, const int64_t *offset_ns, const build_bounds *bounds, int release,
          build_take_fn take, void *take_ctx, dfg *g, build_p2p_stats *p2p_stats)
{
    if (p2p_stats)
        memset(p2p_stats, 0, sizeof *p2p_stats);
    int rc = dfg_init(g, j->n_ranks); /* freed with dfg_free even when it fails */
    int64_t t0 = build_time_origin(j, offset_ns);
    group_map gm = {0};
    build_p2p *p2p = calloc((size_t)j->n_ranks + 1, sizeof *p2p);
    if (rc == 0 && (!p2p || hmap_init(&gm.h, 1024) != 0))
        rc = -1;
    int mismatch_warned = 0;
    for (int32_t r = 0; r < j->n_ranks && rc == 0; r++) {
        if (j->ranks[r].reader)
            rc = job_rank_expand(&j->ranks[r]) == 0 ? build_p2p_scan(&j->ranks[r], r, &p2p[r]) : -1;
        job_rank_compact(&j->ranks[r]); /* expanded again for its nodes */
    }
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
        rc = job_rank_expand(c.jr) == 0 ? build_rank(&c, &gm, bounds ? &bounds[r] : NULL) : -1;
        int64_t shift = c.shift;
        rank_ctx_free(&c);
        if (rc == 0 && take)
            rc = take(take_ctx, &j->ranks[r], r, shift);
        if (release)
            job_rank_keep_ranges(j, &j->ranks[r]); /* its compact form given back too */
        else
            job_rank_hold(&j->ranks[r]); /* the caller reads the events on */
    }
    hmap_free(&gm.h);
    free(gm.next);
    if (rc == 0 && mismatch_warned > 3)
        job_warn(j, "%d collectives in all have participants that disagree on their size",
                 mismatch_warned);
    if (rc == 0)
        rc = build_match_p2p_job(j, g, p2p, p2p_stats);
    for (int32_t r = 0; p2p && r < j->n_ranks; r++)
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
    if (rc == 0) {
        warn_capped_lats(j, g);
        warn_early_starts(j, g);
    }
    if (rc == 0)
        rc = build_infer_wakeups(g);
    if (rc == 0)
        warn_short_groups(j, g);
    if (rc != 0)
        dfg_free(g);
    return rc;
}
