/* idle.c: idle time per stream split into host wait, kernel wait and other (analyses.h). */
#include "ana_int.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static int
cmp_wait(const void *pa, const void *pb)
{
    const ana_wait *a = pa, *b = pb;
    if (a->stream != b->stream)
        return a->stream < b->stream ? -1 : 1;
    if (a->corr_wait != b->corr_wait)
        return a->corr_wait < b->corr_wait ? -1 : 1;
    return (a->corr_rec > b->corr_rec) - (a->corr_rec < b->corr_rec);
}

/* Sorts the waits by stream and wait call and drops the second of two with the same
 * stream and call (an import gives a wait both as a call and as a sync record). */
static void
sort_waits(ana_collect *c)
{
    size_t m = 0;
    if (c->nwaits)
        qsort(c->waits, c->nwaits, sizeof *c->waits, cmp_wait);
    for (size_t i = 0; i < c->nwaits; i++)
        if (m == 0 || c->waits[m - 1].stream != c->waits[i].stream ||
            c->waits[m - 1].corr_wait != c->waits[i].corr_wait)
            c->waits[m++] = c->waits[i];
    c->nwaits = m;
}

/* The end of the latest op of another stream that wait w waits for (0: none known). */
static uint64_t
wait_target_end(const ana_collect *c, const ana_wait *w)
{
    ptrdiff_t rs = w->rec_stream == w->stream ? -1 : ana_stream_index(c, w->rec_stream);
    int32_t x =
        rs < 0 ? -1 : ana_last_before(c, c->stream_first[rs], c->stream_first[rs + 1], w->corr_rec);
    return x >= 0 ? c->ops[x].end : 0;
}

/* The idle row of stream index si; *wp: the first wait of that stream or later. */
static void
idle_stream(const ana_collect *c, size_t si, size_t *wp, ana_idle_row *row)
{
    size_t lo = c->stream_first[si], hi = c->stream_first[si + 1];
    uint64_t s = c->stream_ids[si];
    const ana_op *first = &c->ops[c->by_stream[lo]];
    uint64_t end = first->end, seen_corr = first->corr;
    memset(row, 0, sizeof *row);
    row->stream = s;
    row->ops = hi - lo;
    row->busy_ns = first->end - first->start;
    while (*wp < c->nwaits && c->waits[*wp].stream < s)
        (*wp)++;
    /* waits issued before the first op are not for a gap */
    while (*wp < c->nwaits && c->waits[*wp].stream == s && c->waits[*wp].corr_wait < seen_corr)
        (*wp)++;
    for (size_t p = lo + 1; p < hi; p++) {
        const ana_op *b = &c->ops[c->by_stream[p]];
        uint64_t dep_end = 0;
        while (b->corr && *wp < c->nwaits && c->waits[*wp].stream == s &&
               c->waits[*wp].corr_wait < b->corr) {
            uint64_t e = wait_target_end(c, &c->waits[(*wp)++]);
            if (e > dep_end)
                dep_end = e;
        }
        if (b->corr > seen_corr)
            seen_corr = b->corr;
        if (b->start > end) {
            uint64_t gap = b->start - end, host = 0, kw = 0;
            if (b->api >= 0) {
                uint64_t l = c->apis[b->api].end;
                host = l > end ? (l - end < gap ? l - end : gap) : 0;
            }
            uint64_t k0 = end + host, k1 = dep_end < b->start ? dep_end : b->start;
            kw = k1 > k0 ? k1 - k0 : 0;
            row->gaps++;
            row->host_ns += host;
            row->kernel_ns += kw;
            row->other_ns += gap - host - kw;
            row->busy_ns += b->end - b->start;
            end = b->end;
        } else if (b->end > end) {
            row->busy_ns += b->end - end;
            end = b->end;
        }
    }
    row->span_ns = end - first->start;
}

int
ana_idle_compute(ana_collect *c)
{
    ana_idle_result *r = &c->idle;
    size_t wp = 0;
    sort_waits(c);
    r->rows = calloc(c->nstreams ? c->nstreams : 1, sizeof *r->rows);
    if (!r->rows)
        return -1;
    r->nrows = c->nstreams;
    for (size_t si = 0; si < c->nstreams; si++) {
        ana_idle_row *row = &r->rows[si];
        idle_stream(c, si, &wp, row);
        r->all.ops += row->ops;
        r->all.span_ns += row->span_ns;
        r->all.busy_ns += row->busy_ns;
        r->all.host_ns += row->host_ns;
        r->all.kernel_ns += row->kernel_ns;
        r->all.other_ns += row->other_ns;
        r->all.gaps += row->gaps;
    }
    return 0;
}

static void
row_json(json_writer *w, const ana_idle_row *r)
{
    uint64_t idle = r->span_ns - r->busy_ns;
    json_kv_uint(w, "ops", r->ops);
    json_kv_uint(w, "gaps", r->gaps);
    json_kv_double(w, "span_us", (double)r->span_ns / 1e3);
    json_kv_double(w, "busy_us", (double)r->busy_ns / 1e3);
    json_kv_double(w, "idle_us", (double)idle / 1e3);
    json_kv_double(w, "idle_pct", ana_pct((double)idle, (double)r->span_ns));
    json_kv_double(w, "host_wait_us", (double)r->host_ns / 1e3);
    json_kv_double(w, "kernel_wait_us", (double)r->kernel_ns / 1e3);
    json_kv_double(w, "other_us", (double)r->other_ns / 1e3);
    json_kv_double(w, "host_wait_pct", ana_pct((double)r->host_ns, (double)idle));
    json_kv_double(w, "kernel_wait_pct", ana_pct((double)r->kernel_ns, (double)idle));
    json_kv_double(w, "other_pct", ana_pct((double)r->other_ns, (double)idle));
}

/* Members: waits (stream waits seen), all{row}, streams[{stream, row}]; a row: ops,
 * gaps, span_us, busy_us, idle_us, idle_pct (of span), host_wait_us, kernel_wait_us,
 * other_us and their _pct of idle. */
void
ana_idle_json(json_writer *w, const ana_collect *c)
{
    const ana_idle_result *r = &c->idle;
    json_kv_uint(w, "waits", c->nwaits);
    json_key(w, "all");
    json_begin_object(w);
    row_json(w, &r->all);
    json_end_object(w);
    json_key(w, "streams");
    json_begin_array(w);
    for (size_t i = 0; i < r->nrows; i++) {
        json_begin_object(w);
        json_kv_uint(w, "stream", r->rows[i].stream);
        row_json(w, &r->rows[i]);
        json_end_object(w);
    }
    json_end_array(w);
}

static void
row_print(FILE *out, const char *label, const ana_idle_row *r)
{
    uint64_t idle = r->span_ns - r->busy_ns;
    fprintf(out,
            "  %-10s %8" PRIu64
            " %12.3f %12.3f %6.1f%% %12.3f %5.1f%% %12.3f %5.1f%% %12.3f %5.1f%%\n",
            label, r->ops, r->span_ns / 1e6, idle / 1e6, ana_pct((double)idle, (double)r->span_ns),
            r->host_ns / 1e6, ana_pct((double)r->host_ns, (double)idle), r->kernel_ns / 1e6,
            ana_pct((double)r->kernel_ns, (double)idle), r->other_ns / 1e6,
            ana_pct((double)r->other_ns, (double)idle));
}

void
ana_idle_print(FILE *out, const ana_collect *c)
{
    const ana_idle_result *r = &c->idle;
    char label[32];
    fprintf(out, "  %-10s %8s %12s %12s %7s %12s %6s %12s %6s %12s %6s\n", "stream", "ops",
            "span ms", "idle ms", "idle", "host wait ms", "", "kern wait ms", "", "other ms", "");
    for (size_t i = 0; i < r->nrows; i++) {
        snprintf(label, sizeof label, "%" PRIu64, r->rows[i].stream);
        row_print(out, label, &r->rows[i]);
    }
    if (r->nrows > 1)
        row_print(out, "(all)", &r->all);
}
