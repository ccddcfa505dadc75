/*
 * kineto_coll.c: the NCCL collectives of a Kineto trace (import_kineto.h, "Collectives"):
 * operation, reduction and element type from the args or the kernel name, communicators
 * from the process group, and the sequence numbers, given once every collective is known.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_names.h"
#include "fnv1a.h"
#include "kineto_int.h"

_Static_assert(KINETO_DTYPE_UNKNOWN == IMP_DTYPE_UNKNOWN, "unknown dtype");

/* c10 ScalarType name -> ncclDataType_t. */
static uint32_t
kin_dtype_from_arg(const char *s)
{
    static const struct {
        const char *name;
        uint32_t v;
    } m[] = {{"Char", 0},     {"Byte", 1},           {"Bool", 1},        {"Int", 2},
             {"Long", 4},     {"Half", 6},           {"Float", 7},       {"Double", 8},
             {"BFloat16", 9}, {"Float8_e4m3fn", 10}, {"Float8_e5m2", 11}};
    for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++)
        if (strcmp(s, m[i].name) == 0)
            return m[i].v;
    return KINETO_DTYPE_UNKNOWN;
}

/* Comm of the current event's process group, registered on first sight. */
static uint64_t
kin_comm_of(kineto_importer *k, const kin_event *e, uint32_t device)
{
    char key[KIN_SMALL_STR + 16];
    int n = snprintf(key, sizeof(key), "kineto-pg:%s", (e->have & H_PG) ? e->pg.buf : "default");
    uint64_t h = dpro_fnv1a(key, (size_t)n, DPRO_FNV1A_INIT);
    for (size_t i = 0; i < k->ncomms; i++)
        if (k->comms[i].hash == h)
            return h;
    if (k->ncomms == KIN_MAX_COMMS) {
        kin_count(k, "approx.comms_overflow", 1);
        return h;
    }
    if (!k->comms) {
        k->comms = calloc(KIN_MAX_COMMS, sizeof(*k->comms));
        if (!k->comms)
            return h;
    }
    kin_comm *c = &k->comms[k->ncomms++];
    c->hash = h;
    c->device = device;
    c->size = (e->have & H_GROUP_SIZE) ? e->group_size : 0;
    c->ranks = (e->pg_ranks_len && !e->pg_ranks_cut) ? strndup(e->pg_ranks, e->pg_ranks_len) : NULL;
    return h;
}

/* Gives c the operation op (peer and reduction as op has them). */
static void
kin_coll_set_op(kin_coll *c, uint32_t op, uint32_t redop)
{
    c->ev.subkind = op;
    c->ev.redop =
        (op == DPRO_COLL_ALLREDUCE || op == DPRO_COLL_REDUCE || op == DPRO_COLL_REDUCESCATTER)
            ? redop
            : 0;
    c->ev.peer = (op == DPRO_COLL_BROADCAST || op == DPRO_COLL_REDUCE || op == DPRO_COLL_SEND ||
                  op == DPRO_COLL_RECV)
                     ? -1
                     : 0;
}

/* Sets the element count of c (and its bytes, from its dtype). Returns DPRO_OK or fails
 * with DPRO_ERR_LIMIT, key naming where the count came from. */
static int
kin_coll_set_count(kineto_importer *k, kin_coll *c, int64_t count, const char *key)
{
    uint64_t size = dpro_nccl_dtype_size(c->ev.dtype);
    if ((uint64_t)count > KIN_MAX_BYTES / (size ? size : 1))
        return kin_fail(k, DPRO_ERR_LIMIT,
                        "\"%s\": %lld elements of %llu bytes are out of range (over 2^50)", key,
                        (long long)count, (unsigned long long)size),
               DPRO_ERR_LIMIT;
    c->ev.count = (uint64_t)count;
    c->ev.bytes = (uint64_t)count * size;
    c->has_count = 1;
    return DPRO_OK;
}

/* See kineto_int.h. */
int
kin_add_collective(kineto_importer *k, const kin_event *e, const dpro_event *kern, int64_t *index)
{
    *index = -1;
    uint32_t op = 0, redop = 0, dtype = KINETO_DTYPE_UNKNOWN;
    if (e->coll_name.len)
        op = imp_coll_op_from_text(e->coll_name.buf);
    if (e->dtype.len)
        dtype = kin_dtype_from_arg(e->dtype.buf);
    uint32_t kop = 0;
    imp_coll_from_kernel(e->name, e->name_len, &kop, &redop, &dtype);
    int sendrecv = op == 0 && kop == DPRO_COLL_SEND && e->name_len && strstr(e->name, "SendRecv");
    if (op == 0)
        op = kop;
    if (k->ncolls == KINETO_MAX_COLLECTIVES) {
        kin_count(k, "unmapped.collective_overflow", 1);
        return DPRO_OK;
    }
    if (k->ncolls == k->colls_cap) {
        size_t cap = k->colls_cap ? k->colls_cap * 2 : 256;
        kin_coll *n = realloc(k->colls, cap * sizeof(*n));
        if (!n)
            return kin_fail(k, DPRO_ERR_NOMEM, "out of memory (collectives)"), DPRO_ERR_NOMEM;
        k->colls = n;
        k->colls_cap = cap;
    }
    kin_coll *c = &k->colls[k->ncolls];
    memset(c, 0, sizeof(*c));
    c->range = -1;
    c->need_op = op == 0 || sendrecv;
    c->sendrecv = sendrecv;
    c->kstart = kern->start_ns;
    c->ev.kind = DPRO_KIND_COLLECTIVE;
    c->ev.value = DPRO_COLL_TIMING_DEVICE; /* the kernel's times until its launch joins */
    c->ev.start_ns = kern->start_ns;
    c->ev.end_ns = kern->end_ns;
    c->ev.correlation = kern->correlation;
    c->ev.stream = kern->stream;
    c->ev.device = kern->device;
    c->ev.comm = kin_comm_of(k, e, kern->device);
    c->ev.dtype = dtype;
    c->redop = redop;
    kin_coll_set_op(c, op, redop);
    int rc = DPRO_OK;
    if (op == DPRO_COLL_REDUCESCATTER && (e->have & H_OUT_NELEMS) && e->out_nelems >= 0)
        rc = kin_coll_set_count(k, c, e->out_nelems, "Out msg nelems");
    else if ((e->have & H_IN_NELEMS) && e->in_nelems >= 0)
        rc = kin_coll_set_count(k, c, e->in_nelems, "In msg nelems");
    if (rc != DPRO_OK)
        return rc;
    if (e->have & H_SEQ) {
        c->ev.seq = (uint64_t)e->seq;
        c->has_seq = 1;
    }
    *index = (int64_t)k->ncolls++;
    return DPRO_OK;
}

/* See kineto_int.h. */
int
kin_note_comm_range(kineto_importer *k, const kin_event *e, const dpro_event *m)
{
    uint32_t op = 0;
    const char *n = e->name;
    size_t len = e->name_len;
    if (len == 18 && memcmp(n, "record_param_comms", 18) == 0 && e->coll_name.len)
        op = imp_coll_op_from_text(e->coll_name.buf);
    else if (len > 5 && memcmp(n, "nccl:", 5) == 0)
        op = imp_coll_op_from_text(n + 5);
    else if (len > 6 && memcmp(n, "c10d::", 6) == 0)
        op = imp_coll_op_from_text(n + 6);
    if (op == 0 || m->thread == 0)
        return DPRO_OK;
    if (k->ncranges == KINETO_MAX_COLLECTIVES) {
        kin_count(k, "approx.comm_ranges_overflow", 1);
        return DPRO_OK;
    }
    if (k->ncranges == k->cranges_cap) {
        size_t cap = k->cranges_cap ? k->cranges_cap * 2 : 256;
        kin_crange *r = realloc(k->cranges, cap * sizeof(*r));
        if (!r)
            return kin_fail(k, DPRO_ERR_NOMEM, "out of memory (collective ranges)"), DPRO_ERR_NOMEM;
        k->cranges = r;
        k->cranges_cap = cap;
    }
    kin_crange *r = &k->cranges[k->ncranges++];
    r->thread = m->thread;
    r->start = m->start_ns;
    r->end = m->end_ns;
    r->op = op;
    r->dtype = e->dtype.len ? kin_dtype_from_arg(e->dtype.buf) : KINETO_DTYPE_UNKNOWN;
    r->count = -1;
    r->seq = (e->have & H_SEQ) && e->seq >= 0 ? e->seq : -1;
    if (op == DPRO_COLL_REDUCESCATTER && (e->have & H_OUT_NELEMS) && e->out_nelems >= 0)
        r->count = e->out_nelems;
    else if ((e->have & H_IN_NELEMS) && e->in_nelems >= 0)
        r->count = e->in_nelems;
    return DPRO_OK;
}

static int
kin_crange_cmp(const void *a, const void *b)
{
    const kin_crange *x = a, *y = b;
    if (x->thread != y->thread)
        return x->thread < y->thread ? -1 : 1;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return x->end > y->end ? -1 : x->end < y->end; /* outer first */
}

/* Index of the innermost range on thread holding [start, end) at or before position from
 * (k->ncranges: from the end), -1 none. Ranges nest and those of earlier calls have ended:
 * the first holding one back from start is the innermost (at most 64 are looked at). */
static int64_t
kin_crange_find(const kineto_importer *k, uint32_t thread, uint64_t start, uint64_t end,
                size_t from)
{
    size_t lo = 0, hi = from; /* first range past (thread, start) */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const kin_crange *r = &k->cranges[mid];
        if (r->thread < thread || (r->thread == thread && r->start <= start))
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo, seen = 0; i-- > 0 && seen < 64; seen++) {
        const kin_crange *r = &k->cranges[i];
        if (r->thread != thread)
            break;
        if (r->end >= end)
            return (int64_t)i;
    }
    return -1;
}

/* Gives the collectives whose kernel did not say their operation the operation of the
 * host range their launch lies in; those of one range (the transfers of a grouped call)
 * become one, spanning them all. One of no known operation is dropped (counted), a
 * SendRecv kernel outside any range stays a send. Returns DPRO_OK or the first error. */
static int
kin_resolve_collectives(kineto_importer *k)
{
    int rc = DPRO_OK;
    if (k->ncranges > 1)
        qsort(k->cranges, k->ncranges, sizeof(*k->cranges), kin_crange_cmp);
    for (size_t i = 0; i < k->ncolls && rc == DPRO_OK; i++) {
        kin_coll *c = &k->colls[i];
        if (!c->need_op)
            continue;
        int64_t ri =
            c->ev.value == DPRO_COLL_TIMING_HOST && k->ncranges
                ? kin_crange_find(k, c->ev.thread, c->ev.start_ns, c->ev.end_ns, k->ncranges)
                : -1;
        if (ri < 0) {
            c->drop = c->ev.subkind == 0;
            kin_count(k, c->drop ? "unmapped.collective_op" : "approx.sendrecv_as_send", 1);
            continue;
        }
        /* the operation from the innermost range; what it does not say (element type,
         * count, c10d's Seq) from the ranges around it (record_param_comms holds them,
         * nccl:<op> inside it does not) */
        c->range = ri;
        kin_coll_set_op(c, k->cranges[ri].op, c->redop);
        int dtype_set = 0, count_set = 0;
        for (int64_t q = ri; q >= 0 && rc == DPRO_OK;
             q = kin_crange_find(k, c->ev.thread, c->ev.start_ns, c->ev.end_ns, (size_t)q)) {
            const kin_crange *r = &k->cranges[q];
            if (r->dtype != KINETO_DTYPE_UNKNOWN && !dtype_set) {
                c->ev.dtype = r->dtype;
                dtype_set = 1;
            }
            if (r->seq >= 0 && !c->has_seq) {
                c->ev.seq = (uint64_t)r->seq;
                c->has_seq = 1;
            }
            if (r->count >= 0 && !count_set) {
                count_set = 1;
                rc = kin_coll_set_count(k, c, r->count,
                                        r->op == DPRO_COLL_REDUCESCATTER ? "Out msg nelems"
                                                                         : "In msg nelems");
            }
        }
    }
    /* one collective per range: the first in device order takes the others' span */
    for (size_t i = 0; i < k->ncolls && rc == DPRO_OK; i++) {
        kin_coll *c = &k->colls[i];
        if (c->range < 0 || c->drop)
            continue;
        for (size_t j = i + 1; j < k->ncolls; j++) {
            kin_coll *d = &k->colls[j];
            if (d->range != c->range || d->drop || d->ev.comm != c->ev.comm)
                continue;
            kin_coll *first = d->kstart < c->kstart ? d : c, *other = first == c ? d : c;
            if (other->ev.start_ns < first->ev.start_ns)
                first->ev.start_ns = other->ev.start_ns;
            if (other->ev.end_ns > first->ev.end_ns)
                first->ev.end_ns = other->ev.end_ns;
            other->drop = 1;
            kin_count(k, "merged.grouped_transfers", 1);
            if (other == c)
                break;
        }
    }
    return rc;
}

static int
kin_coll_cmp(const void *a, const void *b)
{
    const kin_coll *x = a, *y = b;
    if (x->ev.comm != y->ev.comm)
        return x->ev.comm < y->ev.comm ? -1 : 1;
    if (x->kstart != y->kstart)
        return x->kstart < y->kstart ? -1 : 1;
    return x->ev.correlation < y->ev.correlation ? -1 : x->ev.correlation > y->ev.correlation;
}

/* See kineto_int.h. */
int
kin_flush_collectives(kineto_importer *k)
{
    if (k->ncolls == 0)
        return DPRO_OK;
    int rc = kin_resolve_collectives(k);
    if (rc != DPRO_OK)
        return rc;
    qsort(k->colls, k->ncolls, sizeof(*k->colls), kin_coll_cmp);
    uint64_t seq = 0, last_comm = 0;
    int any = 0;
    for (size_t i = 0; i < k->ncolls && rc == DPRO_OK; i++) {
        kin_coll *c = &k->colls[i];
        if (c->drop)
            continue;
        if (!any || c->ev.comm != last_comm)
            seq = 0;
        any = 1;
        last_comm = c->ev.comm;
        if (!c->has_seq)
            c->ev.seq = seq;
        seq++;
        if (!c->has_count)
            kin_count(k, "approx.collective_count", 1);
        if (c->ev.dtype == KINETO_DTYPE_UNKNOWN)
            kin_count(k, "approx.collective_dtype", 1);
        rc = kin_emit(k, &c->ev);
    }
    return rc;
}
