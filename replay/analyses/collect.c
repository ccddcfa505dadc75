/* collect.c: the one pass over a trace's events that the analyses share, the joins made
 * from it (device op -> launch call, ops by stream) and the dispatch (see analyses.h). */
#define PR_FMT "analyses"
#include "ana_int.h"

#include <stdlib.h>
#include <string.h>

#include "dpro_log.h"
#include "order.h"

int
ana_grow(void **arr, size_t *cap, size_t n, size_t sz)
{
    if (n < *cap)
        return 0;
    size_t ncap = *cap ? 2 * *cap : 256;
    void *p = realloc(*arr, ncap * sz);
    if (!p)
        return -1;
    *arr = p;
    *cap = ncap;
    return 0;
}

/* Nearest-rank percentile p of the n sorted values v. */
static int64_t
nearest_rank(const int64_t *v, size_t n, unsigned p)
{
    size_t k = (p * n + 99) / 100;
    return v[k ? k - 1 : 0];
}

void
ana_summarise(int64_t *v, size_t n, ana_summary *s)
{
    double sum = 0;
    memset(s, 0, sizeof *s);
    if (!n)
        return;
    qsort(v, n, sizeof *v, order_i64);
    for (size_t i = 0; i < n; i++)
        sum += (double)v[i];
    s->count = n;
    s->mean = sum / (double)n;
    s->p50 = nearest_rank(v, n, 50);
    s->p95 = nearest_rank(v, n, 95);
    s->max = v[n - 1];
}

double
ana_pct(double part, double whole)
{
    return whole > 0 ? 100.0 * part / whole : 0.0;
}

kernels_name_buf *
ana_short_names(const ana_collect *c, const uint32_t *ids, size_t n)
{
    const char **names = malloc((n ? n : 1) * sizeof *names);
    kernels_name_buf *out = malloc((n ? n : 1) * sizeof *out);
    if (names && out) {
        for (size_t i = 0; i < n; i++)
            names[i] = dpro_reader_string(c->r, ids[i]);
        kernels_short_names(names, n, out); /* plain short names if it runs out */
    } else {
        pr_err("out of memory");
        free(out);
        out = NULL;
    }
    free(names);
    return out;
}

const char *
ana_copy_kind_name(unsigned subkind)
{
    static const char *const names[] = {"HtoH", "HtoD", "DtoH", "DtoD", "Default", "PtoP"};
    return subkind < sizeof names / sizeof names[0] ? names[subkind] : "unknown";
}

const char *
ana_memory_name(unsigned memory)
{
    static const char *const names[] = {"unknown", "pinned", "pageable", "managed", "device"};
    return memory < sizeof names / sizeof names[0] ? names[memory] : "unknown";
}

/* The string id of text in r, 0 if absent. */
static uint32_t
string_id(dpro_reader *r, const char *text)
{
    uint32_t n = dpro_reader_string_count(r);
    for (uint32_t id = 1; id <= n; id++)
        if (strcmp(dpro_reader_string(r, id), text) == 0)
            return id;
    return 0;
}

int
ana_collect_new(dpro_reader *r, const ana_options *o, ana_collect **out)
{
    ana_collect *c = calloc(1, sizeof *c);
    int rc = -1;
    *out = NULL;
    if (c) {
        c->r = r;
        c->o = *o;
        c->id_python = string_id(r, "python_function");
        if (hmap_init(&c->record_of, 64) == 0) {
            c->record_of_ok = 1;
            rc = 0;
        }
    }
    if (rc == 0)
        *out = c;
    else
        ana_collect_free(c);
    return rc;
}

/* API call classes that launch device work. */
static int
is_launching(int cls)
{
    switch (cls) {
    case DPRO_API_CLASS_LAUNCH:
    case DPRO_API_CLASS_GRAPH_LAUNCH:
    case DPRO_API_CLASS_MEMCPY:
    case DPRO_API_CLASS_MEMCPY_ASYNC:
    case DPRO_API_CLASS_MEMSET:
    case DPRO_API_CLASS_MEMSET_ASYNC:
        return 1;
    default:
        return 0;
    }
}

/* An API call: launches are kept; event records and stream waits that carry their event
 * handle (collector traces) give waits. Returns 0 or -1. */
static int
take_api(ana_collect *c, const dpro_event *ev)
{
    int cls;
    if (ev->correlation == 0 || !(c->o.which & (ANA_LAUNCH | ANA_IDLE | ANA_OPS | ANA_QUEUE)))
        return 0;
    cls = dpro_reader_api_class(c->r, ev->name);
    if (is_launching(cls) || ev->name2) {
        if (ana_grow((void **)&c->apis, &c->capis, c->napis, sizeof *c->apis) != 0)
            return -1;
        c->apis[c->napis++] =
            (ana_api){ev->start_ns, ev->end_ns, ev->correlation, ev->thread, (uint8_t)cls};
    } else if (!(c->o.which & ANA_IDLE)) {
        return 0;
    } else if (cls == DPRO_API_CLASS_EVENT_RECORD && ev->object) {
        if (c->nrecords >= INT32_MAX ||
            ana_grow((void **)&c->records, &c->crecords, c->nrecords, sizeof *c->records) != 0)
            return -1;
        c->records[c->nrecords] = (ana_record){ev->object, ev->stream, ev->correlation, ev->thread};
        if (hmap_put(&c->record_of, ev->object, (int32_t)c->nrecords) != 0)
            return -1;
        c->nrecords++;
    } else if (cls == DPRO_API_CLASS_STREAM_WAIT && ev->object) {
        int32_t ri = hmap_get(&c->record_of, ev->object, -1);
        if (ri < 0)
            return 0;
        if (ana_grow((void **)&c->waits, &c->cwaits, c->nwaits, sizeof *c->waits) != 0)
            return -1;
        c->waits[c->nwaits++] =
            (ana_wait){ev->stream, ev->correlation, c->records[ri].stream, c->records[ri].corr};
    }
    return 0;
}

int
ana_collect_event(ana_collect *c, const dpro_event *ev)
{
    int rc = 0;
    switch (ev->kind) {
    case DPRO_KIND_API:
        rc = take_api(c, ev);
        break;
    case DPRO_KIND_KERNEL:
    case DPRO_KIND_MEMCPY:
    case DPRO_KIND_MEMSET:
        if (c->nops >= INT32_MAX ||
            ana_grow((void **)&c->ops, &c->cops, c->nops, sizeof *c->ops) != 0) {
            rc = -1;
            break;
        }
        c->ops[c->nops++] = (ana_op){ev->start_ns,
                                     ev->end_ns > ev->start_ns ? ev->end_ns : ev->start_ns,
                                     ev->correlation,
                                     ev->stream,
                                     ev->bytes,
                                     ev->name,
                                     (uint8_t)ev->kind,
                                     (uint8_t)(ev->subkind < 256 ? ev->subkind : 255),
                                     -1};
        break;
    case DPRO_KIND_SYNC:
        /* imported traces: the waiting stream, the recording stream in peer, the record's
         * correlation in value */
        if (!(c->o.which & ANA_IDLE) || ev->subkind != DPRO_SYNC_STREAM_WAIT_EVENT ||
            ev->value <= 0 || ev->peer < 0)
            break;
        if (ana_grow((void **)&c->waits, &c->cwaits, c->nwaits, sizeof *c->waits) != 0) {
            rc = -1;
            break;
        }
        c->waits[c->nwaits++] =
            (ana_wait){ev->stream, ev->correlation, (uint64_t)ev->peer, (uint64_t)ev->value};
        break;
    case DPRO_KIND_MARKER:
        /* cpu_ops; host ranges but Kineto's python_function (annotations) */
        if (!(c->o.which & ANA_OPS) || (ev->subkind != DPRO_MARK_CPU_OP &&
                                        (ev->subkind != DPRO_MARK_RANGE || ev->thread == 0 ||
                                         (c->id_python && ev->name2 == c->id_python))))
            break;
        if (ana_grow((void **)&c->ranges, &c->cranges, c->nranges, sizeof *c->ranges) != 0) {
            rc = -1;
            break;
        }
        c->ranges[c->nranges++] =
            (ana_range){ev->start_ns, ev->end_ns > ev->start_ns ? ev->end_ns : ev->start_ns,
                        ev->thread, ev->name, ev->subkind == DPRO_MARK_CPU_OP};
        break;
    default:
        break;
    }
    return rc;
}

static int
cmp_api_corr(const void *pa, const void *pb)
{
    const ana_api *a = pa, *b = pb;
    if (a->corr != b->corr)
        return a->corr < b->corr ? -1 : 1;
    return (a->start > b->start) - (a->start < b->start);
}

static int
cmp_key(const void *pa, const void *pb)
{
    const ana_key *a = pa, *b = pb;
    if (a->k1 != b->k1)
        return a->k1 < b->k1 ? -1 : 1;
    if (a->k2 != b->k2)
        return a->k2 < b->k2 ? -1 : 1;
    if (a->k3 != b->k3)
        return a->k3 < b->k3 ? -1 : 1;
    return (a->idx > b->idx) - (a->idx < b->idx);
}

void
ana_sort_keys(ana_key *k, size_t n)
{
    qsort(k, n, sizeof *k, cmp_key);
}

/* Joins each op to its launch call (the first call of its correlation id). */
static void
join_launches(ana_collect *c)
{
    if (c->napis)
        qsort(c->apis, c->napis, sizeof *c->apis, cmp_api_corr);
    for (size_t i = 0; i < c->nops; i++) {
        ana_op *o = &c->ops[i];
        size_t lo = 0, hi = c->napis;
        if (!o->corr)
            continue;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (c->apis[mid].corr < o->corr)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < c->napis && c->apis[lo].corr == o->corr && lo <= INT32_MAX)
            o->api = (int32_t)lo;
    }
}

/* Sorts the ops by stream (then start) into by_stream and lists the streams. Returns 0
 * or -1. */
static int
index_streams(ana_collect *c)
{
    size_t n = c->nops, ns = 0;
    c->by_stream = malloc((n ? n : 1) * sizeof *c->by_stream);
    c->by_corr = malloc((n ? n : 1) * sizeof *c->by_corr);
    c->stream_first = malloc((n + 1) * sizeof *c->stream_first);
    c->stream_ids = malloc((n ? n : 1) * sizeof *c->stream_ids);
    ana_key *k = malloc((n ? n : 1) * sizeof *k);
    if (!c->by_stream || !c->by_corr || !c->stream_first || !c->stream_ids || !k) {
        free(k);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        k[i] = (ana_key){c->ops[i].stream, c->ops[i].start, 0, (int32_t)i};
    ana_sort_keys(k, n);
    for (size_t i = 0; i < n; i++)
        c->by_stream[i] = k[i].idx;
    for (size_t i = 0; i < n; i++)
        k[i] = (ana_key){c->ops[i].stream, c->ops[i].corr, 0, (int32_t)i};
    ana_sort_keys(k, n);
    for (size_t i = 0; i < n; i++)
        c->by_corr[i] = k[i].idx;
    free(k);
    for (size_t i = 0; i < n; i++) {
        uint64_t s = c->ops[c->by_stream[i]].stream;
        if (i == 0 || s != c->stream_ids[ns - 1]) {
            c->stream_ids[ns] = s;
            c->stream_first[ns++] = i;
        }
    }
    c->stream_first[ns] = n;
    c->nstreams = ns;
    return 0;
}

ptrdiff_t
ana_stream_index(const ana_collect *c, uint64_t s)
{
    size_t lo = 0, hi = c->nstreams;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->stream_ids[mid] < s)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < c->nstreams && c->stream_ids[lo] == s ? (ptrdiff_t)lo : -1;
}

int32_t
ana_last_before(const ana_collect *c, size_t lo, size_t hi, uint64_t corr)
{
    /* the first position whose op has a correlation >= corr; ops without one (0) sort
     * first and are passed over */
    size_t a = lo, b = hi;
    while (a < b) {
        size_t mid = a + (b - a) / 2;
        if (c->ops[c->by_corr[mid]].corr < corr)
            a = mid + 1;
        else
            b = mid;
    }
    if (a == lo || c->ops[c->by_corr[a - 1]].corr == 0)
        return -1;
    return c->by_corr[a - 1];
}

int
ana_collect_finish(ana_collect *c)
{
    unsigned w = c->o.which;
    int rc = 0;
    join_launches(c);
    rc = index_streams(c);
    if (rc == 0 && (w & ANA_LAUNCH))
        rc = ana_launch_compute(c);
    if (rc == 0 && (w & ANA_IDLE))
        rc = ana_idle_compute(c);
    if (rc == 0 && (w & ANA_MEMCPY))
        rc = ana_mem_compute(c);
    if (rc == 0 && (w & ANA_OPS))
        rc = ana_ops_compute(c);
    if (rc == 0 && (w & ANA_QUEUE))
        rc = ana_queue_compute(c);
    if (rc == 0 && (w & ANA_SEQUENCES))
        rc = ana_seq_compute(c);
    return rc;
}

void
ana_write_json(json_writer *w, const ana_collect *c)
{
    unsigned which = c->o.which;
    static const struct {
        unsigned bit;
        const char *key;
        void (*fn)(json_writer *, const ana_collect *);
    } parts[] = {
        {ANA_LAUNCH, "launch", ana_launch_json}, {ANA_IDLE, "idle", ana_idle_json},
        {ANA_MEMCPY, "memcpy", ana_mem_json},    {ANA_OPS, "ops", ana_ops_json},
        {ANA_QUEUE, "queue", ana_queue_json},    {ANA_SEQUENCES, "sequences", ana_seq_json}};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        if (!(which & parts[i].bit))
            continue;
        json_key(w, parts[i].key);
        json_begin_object(w);
        parts[i].fn(w, c);
        json_end_object(w);
    }
}

void
ana_print(FILE *out, const char *title, const ana_collect *c)
{
    unsigned which = c->o.which;
    static const struct {
        unsigned bit;
        const char *what;
        void (*fn)(FILE *, const ana_collect *);
    } parts[] = {{ANA_LAUNCH, "launch statistics", ana_launch_print},
                 {ANA_IDLE, "idle time by stream", ana_idle_print},
                 {ANA_MEMCPY, "memcpy and memset bandwidth", ana_mem_print},
                 {ANA_OPS, "device work by cpu_op and annotation", ana_ops_print},
                 {ANA_QUEUE, "launch queues", ana_queue_print},
                 {ANA_SEQUENCES, "frequent kernel sequences", ana_seq_print}};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        if (!(which & parts[i].bit))
            continue;
        fprintf(out, "\n%s, %s\n", parts[i].what, title);
        parts[i].fn(out, c);
    }
}

void
ana_collect_free(ana_collect *c)
{
    if (!c)
        return;
    if (c->record_of_ok)
        hmap_free(&c->record_of);
    free(c->apis);
    free(c->ops);
    free(c->ranges);
    free(c->waits);
    free(c->records);
    free(c->by_stream);
    free(c->by_corr);
    free(c->stream_first);
    free(c->stream_ids);
    ana_launch_free(&c->launch);
    free(c->idle.rows);
    free(c->mem.rows);
    ana_ops_free(&c->opsr);
    free(c->queue.rows);
    ana_seq_free(&c->seq);
    free(c);
}
