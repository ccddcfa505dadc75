/* sequences.c: frequent kernel sequences on a stream, as fusion candidates (analyses.h). */
#include "ana_int.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "fnv1a.h"
#include "replay/kernels.h"

/* Open-addressing table of n-grams (count 0: a free slot). */
typedef struct seq_table {
    ana_seq_row *slot;
    size_t cap, n;
} seq_table;

static uint64_t
seq_hash(uint8_t n, const uint32_t *names)
{
    return dpro_fnv1a(names, n * sizeof *names, DPRO_FNV1A_INIT ^ n);
}

static int
seq_same(const ana_seq_row *r, uint8_t n, const uint32_t *names)
{
    return r->n == n && memcmp(r->names, names, n * sizeof *names) == 0;
}

/* Doubles the table. Returns 0 or -1. */
static int
seq_grow(seq_table *t)
{
    size_t cap = t->cap ? 2 * t->cap : 4096;
    ana_seq_row *s = calloc(cap, sizeof *s);
    if (!s)
        return -1;
    for (size_t i = 0; i < t->cap; i++) {
        const ana_seq_row *r = &t->slot[i];
        if (!r->count)
            continue;
        size_t h = (size_t)seq_hash(r->n, r->names) & (cap - 1);
        while (s[h].count)
            h = (h + 1) & (cap - 1);
        s[h] = *r;
    }
    free(t->slot);
    t->slot = s;
    t->cap = cap;
    return 0;
}

/* Counts one occurrence of the n-gram names (device time ns). Returns 0 or -1. */
static int
seq_add(seq_table *t, uint8_t n, const uint32_t *names, uint64_t ns)
{
    if (2 * (t->n + 1) > t->cap && seq_grow(t) != 0)
        return -1;
    size_t h = (size_t)seq_hash(n, names) & (t->cap - 1);
    while (t->slot[h].count && !seq_same(&t->slot[h], n, names))
        h = (h + 1) & (t->cap - 1);
    ana_seq_row *r = &t->slot[h];
    if (!r->count) {
        r->n = n;
        memcpy(r->names, names, n * sizeof *names);
        t->n++;
    }
    r->count++;
    r->ns += ns;
    return 0;
}

static int
cmp_seq(const void *pa, const void *pb)
{
    const ana_seq_row *a = pa, *b = pb;
    if (a->count != b->count)
        return a->count > b->count ? -1 : 1;
    if (a->ns != b->ns)
        return a->ns > b->ns ? -1 : 1;
    for (int i = 0; i < a->n; i++) {
        int d = strcmp(a->text[i], b->text[i]);
        if (d)
            return d;
    }
    return 0;
}

/* Walks every stream's kernels into t; a copy or a set breaks the run. Returns 0 or -1. */
static int
count_ngrams(ana_collect *c, seq_table *t)
{
    int rc = 0;
    for (size_t si = 0; rc == 0 && si < c->nstreams; si++) {
        uint32_t win[ANA_SEQ_MAX] = {0};
        uint64_t wns[ANA_SEQ_MAX] = {0};
        size_t run = 0;
        for (size_t p = c->stream_first[si]; rc == 0 && p < c->stream_first[si + 1]; p++) {
            const ana_op *o = &c->ops[c->by_stream[p]];
            if (o->kind != DPRO_KIND_KERNEL) {
                run = 0;
                continue;
            }
            memmove(win, win + 1, (ANA_SEQ_MAX - 1) * sizeof *win);
            memmove(wns, wns + 1, (ANA_SEQ_MAX - 1) * sizeof *wns);
            win[ANA_SEQ_MAX - 1] = o->name;
            wns[ANA_SEQ_MAX - 1] = o->end - o->start;
            run++;
            uint64_t ns = wns[ANA_SEQ_MAX - 1];
            for (size_t n = 2; rc == 0 && n <= ANA_SEQ_MAX && n <= run; n++) {
                ns += wns[ANA_SEQ_MAX - n];
                rc = seq_add(t, (uint8_t)n, win + ANA_SEQ_MAX - n, ns);
            }
        }
    }
    return rc;
}

int
ana_seq_compute(ana_collect *c)
{
    ana_seq_result *s = &c->seq;
    seq_table t = {NULL, 0, 0};
    int rc = seq_grow(&t);
    for (size_t i = 0; i < c->nops; i++)
        s->dev_ns += c->ops[i].end - c->ops[i].start;
    if (rc == 0)
        rc = count_ngrams(c, &t);
    for (uint8_t n = 2; rc == 0 && n <= ANA_SEQ_MAX; n++) {
        size_t m = 0;
        for (size_t i = 0; i < t.cap; i++)
            m += t.slot[i].count && t.slot[i].n == n;
        s->rows[n] = malloc((m ? m : 1) * sizeof *s->rows[n]);
        if (!s->rows[n]) {
            rc = -1;
            break;
        }
        m = 0;
        for (size_t i = 0; i < t.cap; i++)
            if (t.slot[i].count && t.slot[i].n == n) {
                ana_seq_row *r = &s->rows[n][m++];
                *r = t.slot[i];
                for (int k = 0; k < n; k++)
                    r->text[k] = dpro_reader_string(c->r, r->names[k]);
            }
        qsort(s->rows[n], m, sizeof *s->rows[n], cmp_seq);
        s->distinct[n] = m;
        s->nrows[n] = m < c->o.top_seq ? m : c->o.top_seq;
    }
    free(t.slot);
    return rc;
}

void
ana_seq_free(ana_seq_result *s)
{
    for (int n = 0; n <= ANA_SEQ_MAX; n++)
        free(s->rows[n]);
    memset(s, 0, sizeof *s);
}

/* Members: device_us (all device ops), by_length[{n, distinct, top[{names[n], short_names[n],
 * count, device_us, share_pct}]}] for n = 2..ANA_SEQ_MAX. */
void
ana_seq_json(json_writer *w, const ana_collect *c)
{
    const ana_seq_result *s = &c->seq;
    char sbuf[KERNELS_SHORT_NAME_MAX + 8];
    json_kv_double(w, "device_us", (double)s->dev_ns / 1e3);
    json_key(w, "by_length");
    json_begin_array(w);
    for (int n = 2; n <= ANA_SEQ_MAX; n++) {
        json_begin_object(w);
        json_kv_int(w, "n", n);
        json_kv_uint(w, "distinct", s->distinct[n]);
        json_key(w, "top");
        json_begin_array(w);
        for (size_t i = 0; i < s->nrows[n]; i++) {
            const ana_seq_row *r = &s->rows[n][i];
            json_begin_object(w);
            json_key(w, "names");
            json_begin_array(w);
            for (int k = 0; k < n; k++)
                json_string(w, dpro_reader_string(c->r, r->names[k]));
            json_end_array(w);
            json_key(w, "short_names");
            json_begin_array(w);
            for (int k = 0; k < n; k++)
                json_string(w, kernels_short_name(dpro_reader_string(c->r, r->names[k]), 0, sbuf,
                                                  sizeof sbuf));
            json_end_array(w);
            json_kv_uint(w, "count", r->count);
            json_kv_double(w, "device_us", (double)r->ns / 1e3);
            json_kv_double(w, "share_pct", ana_pct((double)r->ns, (double)s->dev_ns));
            json_end_object(w);
        }
        json_end_array(w);
        json_end_object(w);
    }
    json_end_array(w);
}

void
ana_seq_print(FILE *out, const ana_collect *c)
{
    const ana_seq_result *s = &c->seq;
    for (int n = 2; n <= ANA_SEQ_MAX; n++) {
        uint32_t *ids = malloc((s->nrows[n] ? s->nrows[n] : 1) * (size_t)n * sizeof *ids);
        kernels_name_buf *sn = NULL;
        for (size_t i = 0; ids && i < s->nrows[n]; i++)
            memcpy(ids + i * (size_t)n, s->rows[n][i].names, (size_t)n * sizeof *ids);
        sn = ids ? ana_short_names(c, ids, s->nrows[n] * (size_t)n) : NULL;
        free(ids);
        if (!sn)
            return;
        fprintf(out, "  %d kernels in a row: %zu distinct, top %zu by count:\n", n, s->distinct[n],
                s->nrows[n]);
        for (size_t i = 0; i < s->nrows[n]; i++) {
            const ana_seq_row *r = &s->rows[n][i];
            fprintf(out, "  %8" PRIu64 " %12.3f ms %5.1f%% ", r->count, r->ns / 1e6,
                    ana_pct((double)r->ns, (double)s->dev_ns));
            for (int k = 0; k < n; k++)
                fprintf(out, "%s%s", k ? " -> " : " ", sn[i * (size_t)n + (size_t)k].text);
            fprintf(out, "\n");
        }
        free(sn);
    }
}
