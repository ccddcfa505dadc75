/* build_p2p.c: point-to-point transfers, scanned per rank and matched into groups (see build.h). */
#define PR_FMT "replay"
#include "build_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpro_log.h"
#include "fnv1a.h"
#include "hmap.h"

uint64_t
build_p2p_channel(uint64_t comm, int32_t src, int32_t dst)
{
    /* salted, so that a channel's key is not one of the communicators' hashes it sits with */
    const struct {
        uint64_t comm;
        int32_t src, dst;
    } key = {comm, src, dst};
    return dpro_fnv1a(&key, sizeof key, dpro_fnv1a("p2p-channel", 11, DPRO_FNV1A_INIT));
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
build_coll_seq(const build_p2p *p, const job_event *e)
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
        const job_event *e = &jr->events[i];
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
    int dev_ok = hmap_init(&dev, ne / 4 + 16) == 0, ord_ok = hmap_init(&ord, 64) == 0;
    ok = ok && dev_ok && ord_ok;
    /* correlation -> its first device op */
    for (size_t i = 0; ok && i < ne; i++) {
        const job_event *e = &jr->events[i];
        if (is_device_kind(e->kind) && e->correlation && hmap_get(&dev, e->correlation, -1) < 0 &&
            hmap_put(&dev, e->correlation, (int32_t)i) != 0)
            ok = 0;
    }
    size_t npend = 0;
    for (size_t i = 0; ok && i < ne; i++) {
        const job_event *e = &jr->events[i];
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
    hmap_free(&dev); /* safe after a failed hmap_init, which leaves it zeroed */
    hmap_free(&ord);
    free(pend);
    if (!ok)
        build_p2p_free(p);
    return ok ? 0 : -1;
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
                if (dfg_set_group(g, m, q) != 0 || dfg_set_bytes(g, m, moved[m]) != 0)
                    goto out;
            }
        /* prepended: the first participant */
        if (dfg_set_group(g, u.lead[r], q) != 0 ||
            dfg_set_bytes(g, u.lead[r], moved[u.lead[r]]) != 0)
            goto out;
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

/* Pairs the send/recv transfers of every rank (p2p[r], nodes filled in) into groups and
 * says what is left unmodelled. Returns 0 or -1. */
int
build_match_p2p_job(job *j, dfg *g, build_p2p *p2p, build_p2p_stats *out)
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
