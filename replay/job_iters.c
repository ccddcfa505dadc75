/* job_iters.c: the iterations a load finds before its second pass (see job.h): the kernel
 * period's cut agreed across ranks from the first pass, the compared iterations and the
 * window. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fnv1a.h"
#include "hmap.h"
#include "iter.h"
#include "job_int.h"
#include "period.h"

int
job_period_collect(period_collect *c, const dpro_reader *r, const dpro_event *e)
{
    int rc = 0, key = -1, yes = 0;
    if (c->on && e->kind == DPRO_KIND_MARKER) {
        yes = e->subkind == DPRO_MARK_ITERATION;
        if (!yes && (e->subkind == DPRO_MARK_RANGE || e->subkind == DPRO_MARK_CPU_OP) &&
            iter_text_is_iteration(dpro_reader_string(r, e->name), &key) && key >= 0 && key < 8)
            yes = ++c->key_count[key] >= 2;
    }
    if (yes) { /* the markers decide (replay_detect_iterations): no period is looked for */
        free(c->k);
        c->k = NULL;
        c->n = c->cap = 0;
        c->on = 0;
    }
    if (c->on && e->kind == DPRO_KIND_KERNEL && c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 4096;
        period_kernel *x = realloc(c->k, cap * sizeof *x);
        if (x) {
            c->k = x;
            c->cap = cap;
        } else {
            rc = -1;
        }
    }
    if (rc == 0 && c->on && e->kind == DPRO_KIND_KERNEL)
        c->k[c->n++] = (period_kernel){e->start_ns, e->end_ns, e->stream, e->name};
    return rc;
}

int
job_period_scan(rank_task *t, const period_collect *c)
{
    int rc = 0;
    if (c->on && period_scan_kernels(c->k, c->n, NULL, &t->period) != 0)
        rc = DPRO_ERR_NOMEM;
    if (rc == 0 && t->period.p > 0 && period_scan_trim(&t->period) != 0)
        rc = DPRO_ERR_NOMEM;
    if (rc == 0 && t->period.p > 0)
        t->method = ITER_PERIOD;
    return rc;
}

/* Gives task x, scanned, the boundaries of its cut ri (taken): their positions, and
 * where its scan holds the kernels' ends (the rank read here) their ends, as bend and as
 * bstart (no window is taken on a period's boundaries: bstart only travels in shared
 * reading). Returns 0 or -1. */
static int
take_cut(rank_task *x, replay_rank_iters *ri)
{
    int rc = 0;
    if (x->period.dend) {
        free(x->bstart);
        free(x->bend);
        x->bstart = malloc((size_t)(ri->n > 0 ? ri->n : 1) * sizeof *x->bstart);
        x->bend = malloc((size_t)(ri->n > 0 ? ri->n : 1) * sizeof *x->bend);
        rc = x->bstart && x->bend ? 0 : -1;
    }
    if (rc == 0 && x->period.dend) {
        period_ends(&x->period, ri->event_index, (size_t)ri->n, x->bend);
        memcpy(x->bstart, x->bend, (size_t)ri->n * sizeof *x->bstart);
    }
    if (rc == 0) {
        x->nb = ri->n;
        x->bpos = ri->event_index;
        ri->event_index = NULL;
        x->bstream = x->period.stream;
        x->bperiod = x->period.p;
        period_scan_free(&x->period);
    }
    return rc;
}

/* What job_period_share hands over of one scan: these, then idle[p] and p names as
 * indexes into its process's texts. */
typedef struct scan_head {
    uint64_t stream;
    uint64_t n, p, lo, hi;
} scan_head;

/* One process's message in job_period_share: its kernel names' texts, each once,
 * NUL-terminated (text: len bytes of cap; at: FNV-1a of a text -> its index, off: each
 * text's offset), then its scans (scans: slen bytes of scap). */
typedef struct scan_msg {
    unsigned char *text, *scans;
    size_t len, cap, slen, scap;
    uint64_t n_text;
    size_t *off;
    hmap at;
} scan_msg;

/* Appends n bytes at v to *buf (*len of *cap). Returns 0 or -1 (out of memory). */
static int
append(unsigned char **buf, size_t *len, size_t *cap, const void *v, size_t n)
{
    int rc = 0;
    if (*len + n > *cap) {
        size_t c = 2 * (*len + n);
        unsigned char *x = realloc(*buf, c);
        if (x) {
            *buf = x;
            *cap = c;
        } else {
            rc = -1;
        }
    }
    if (rc == 0 && n > 0)
        memcpy(*buf + *len, v, n);
    if (rc == 0)
        *len += n;
    return rc;
}

/* The index of text s in m's texts (added when new; a text whose hash another holds is
 * added again: a copy is harmless), into *id. Returns 0 or -1 (out of memory). */
static int
text_index(scan_msg *m, const char *s, uint32_t *id)
{
    size_t len = strlen(s);
    uint64_t h = dpro_fnv1a(s, len, DPRO_FNV1A_INIT);
    int32_t k = hmap_get(&m->at, h, -1);
    int rc = 0;
    if (k >= 0 && strcmp((const char *)m->text + m->off[k], s) == 0) {
        *id = (uint32_t)k;
    } else {
        size_t *off = m->n_text < INT32_MAX ? realloc(m->off, (m->n_text + 1) * sizeof *off) : NULL;
        if (off) {
            m->off = off;
            off[m->n_text] = m->len;
        }
        rc = off && append(&m->text, &m->len, &m->cap, s, len + 1) == 0 &&
                     (k >= 0 || hmap_put(&m->at, h, (int32_t)m->n_text) == 0)
                 ? 0
                 : -1;
        if (rc == 0)
            *id = (uint32_t)m->n_text++;
    }
    return rc;
}

/* Appends task t's scan head, period and names (as text indexes) to m. Returns 0 or -1. */
static int
put_scan(const rank_task *t, scan_msg *m)
{
    const period_scan *ps = &t->period;
    scan_head h = {ps->stream, ps->n, ps->p, ps->lo, ps->hi};
    int rc = append(&m->scans, &m->slen, &m->scap, &h, sizeof h);
    if (rc == 0 && ps->p > 0)
        rc = append(&m->scans, &m->slen, &m->scap, ps->idle, ps->p * sizeof *ps->idle);
    for (size_t k = 0; rc == 0 && k < ps->p; k++) {
        uint32_t id = 0;
        rc = text_index(m, dpro_reader_string(t->jr->reader, ps->names[ps->lo + k - ps->nbase]),
                        &id);
        if (rc == 0)
            rc = append(&m->scans, &m->slen, &m->scap, &id, sizeof id);
    }
    return rc;
}

/* Takes one scan from buf at *at (len bytes) into ps (trimmed, without ends), its names
 * indexes into words (set again once every text is read: the array grows), the first of
 * its process's texts there at base (of n_words).
 * Returns 0 or -1 (out of memory, or the bytes end early or do not hold). */
static int
get_scan(const unsigned char *buf, size_t len, size_t *at, const char *const *words, uint64_t base,
         uint64_t n_words, period_scan *ps)
{
    scan_head h = {0};
    int rc = len - *at >= sizeof h ? 0 : -1;
    memset(ps, 0, sizeof *ps);
    if (rc == 0) {
        memcpy(&h, buf + *at, sizeof h);
        *at += sizeof h;
    }
    if (rc == 0 && h.p > 0 &&
        (h.p > (len - *at) / (sizeof *ps->idle + sizeof *ps->names) || h.lo + h.p > h.hi))
        rc = -1;
    if (rc == 0 && h.p > 0) {
        *ps = (period_scan){.stream = h.stream,
                            .n = h.n,
                            .p = h.p,
                            .lo = h.lo,
                            .hi = h.hi,
                            .trimmed = 1,
                            .nbase = h.lo,
                            .base = h.lo > 0 ? h.lo - 1 : 0,
                            .words = words};
        ps->idle = malloc(h.p * sizeof *ps->idle);
        ps->names = malloc(h.p * sizeof *ps->names);
        rc = ps->idle && ps->names ? 0 : -1;
    }
    if (rc == 0 && h.p > 0) {
        memcpy(ps->idle, buf + *at, h.p * sizeof *ps->idle);
        *at += h.p * sizeof *ps->idle;
        memcpy(ps->names, buf + *at, h.p * sizeof *ps->names);
        *at += h.p * sizeof *ps->names;
    }
    for (size_t k = 0; rc == 0 && k < h.p; k++) {
        rc = ps->names[k] < n_words - base ? 0 : -1;
        ps->names[k] += (uint32_t)base;
    }
    if (rc != 0)
        period_scan_free(ps);
    return rc;
}

/* Reads the texts that open one process's part of the gathered bytes (buf, len, from *at)
 * into pw->w from *n_words on (grown). Returns 0 or -1 (out of memory, or they do not
 * hold). */
static int
get_texts(unsigned char *buf, size_t len, size_t *at, period_words *pw, uint64_t *n_words)
{
    uint64_t head[2] = {0, 0}; /* texts, their bytes */
    int rc = len - *at >= sizeof head ? 0 : -1;
    if (rc == 0) {
        memcpy(head, buf + *at, sizeof head);
        *at += sizeof head;
        rc = head[1] <= len - *at && head[0] <= head[1] && *n_words + head[0] < UINT32_MAX &&
                     (head[1] == 0 || buf[*at + head[1] - 1] == 0)
                 ? 0
                 : -1;
    }
    const char **w = rc == 0 ? realloc(pw->w, (*n_words + head[0] + 1) * sizeof *w) : NULL;
    if (rc == 0 && !w)
        rc = -1;
    else if (rc == 0)
        pw->w = w;
    size_t o = *at, end = rc == 0 ? *at + head[1] : 0;
    for (uint64_t k = 0; rc == 0 && k < head[0]; k++) {
        rc = o < end ? 0 : -1;
        w[(*n_words)++] = (const char *)buf + o;
        o += strlen((const char *)buf + o) + 1;
    }
    if (rc == 0)
        *at = end;
    return rc;
}

void
job_period_words_free(period_words *pw)
{
    free(pw->buf);
    free(pw->w);
    pw->buf = NULL;
    pw->w = NULL;
}

int
job_period_share(const job_share *sh, rank_task *t, int32_t n, int32_t lo, int32_t hi,
                 period_words *pw)
{
    scan_msg m = {0};
    unsigned char *out = NULL;
    size_t len = 0, cap = 0, all_len = 0, at = 0;
    void *all = NULL;
    uint64_t n_words = 0;
    int rc = hmap_init(&m.at, 64);
    for (int32_t i = lo; rc == 0 && i < hi; i++)
        rc = put_scan(&t[i], &m);
    uint64_t head[2] = {m.n_text, m.len};
    if (rc == 0)
        rc = append(&out, &len, &cap, head, sizeof head);
    if (rc == 0)
        rc = append(&out, &len, &cap, m.text, m.len);
    if (rc == 0)
        rc = append(&out, &len, &cap, m.scans, m.slen);
    /* every process takes part even when out of memory here (an empty share), and fails
     * afterwards on reading what it lacks */
    if (sh->gather(sh->ctx, out, rc == 0 ? len : 0, &all, &all_len) != 0)
        rc = -1;
    pw->buf = all;
    for (int p = 0; rc == 0 && p < sh->nprocs; p++) {
        int32_t plo, phi;
        uint64_t base = n_words;
        job_share_range(&(job_share){.me = p, .nprocs = sh->nprocs}, n, &plo, &phi);
        rc = get_texts(all, all_len, &at, pw, &n_words);
        for (int32_t i = plo; rc == 0 && i < phi; i++) {
            period_scan ps;
            rc = get_scan(all, all_len, &at, pw->w, base, n_words, &ps);
            if (rc == 0 && p != sh->me) {
                period_scan_free(&t[i].period);
                t[i].period = ps;
            } else if (rc == 0) {
                period_scan_free(&ps); /* its own, with the ends */
            }
        }
    }
    for (int32_t i = 0; i < n; i++) /* pw->w moved as it grew */
        if (t[i].period.words)
            t[i].period.words = pw->w;
    hmap_free(&m.at);
    free(m.text);
    free(m.scans);
    free(m.off);
    free(out);
    return rc == 0 ? 0 : DPRO_ERR_NOMEM;
}

/* Gives t's rank the k boundary positions b found of t->nb (b taken). Returns 0,
 * DPRO_ERR_NOMEM (b NULL) or DPRO_ERR_CORRUPT (fewer than t->nb found; b freed). */
static int
take_bounds(rank_task *t, size_t *b, int32_t k)
{
    int rc = !b ? DPRO_ERR_NOMEM : k < t->nb ? DPRO_ERR_CORRUPT : 0;
    if (rc == 0) {
        t->jr->bounds = b;
        t->jr->n_bounds = t->nb;
        t->jr->period = t->bperiod;
    } else {
        free(b);
    }
    return rc;
}

int
job_period_place_ends(rank_task *t)
{
    job_rank *jr = t->jr;
    size_t *b = malloc((size_t)(t->nb > 0 ? t->nb : 1) * sizeof *b);
    int32_t k = 0;
    for (size_t i = 0; b && i < jr->n_events && k < t->nb; i++) {
        const job_event *e = &jr->events[i];
        if (e->kind == DPRO_KIND_KERNEL && e->stream == t->bstream && e->end_ns == t->bend[k])
            b[k++] = i;
    }
    return take_bounds(t, b, k);
}

int
job_period_agree(job *j, rank_task *t, int32_t n)
{
    period_scan *ps = calloc((size_t)j->n_ranks + 1, sizeof *ps); /* shallow copies */
    replay_rank_iters *it = calloc((size_t)j->n_ranks + 1, sizeof *it);
    int rc = ps && it ? 0 : -1;
    for (int32_t i = 0; rc == 0 && i < n; i++) {
        int32_t r = t[i].jr->rank;
        if (t[i].period.p == 0)
            continue;
        ps[r] = t[i].period;
        rc = period_cut(&ps[r], period_own_phase(&ps[r]), &it[r]);
    }
    if (rc == 0)
        rc = period_match(j, ps, it);
    for (int32_t i = 0; rc == 0 && i < n; i++)
        if (t[i].period.p > 0)
            rc = take_cut(&t[i], &it[t[i].jr->rank]);
    for (int32_t r = 0; it && r < j->n_ranks; r++)
        replay_rank_iters_free(&it[r]);
    free(it);
    free(ps);
    return rc == 0 ? 0 : DPRO_ERR_NOMEM;
}

int
job_period_place(rank_task *t, size_t *missing)
{
    job_rank *jr = t->jr;
    size_t *b = malloc((size_t)(t->nb > 0 ? t->nb : 1) * sizeof *b);
    size_t pos = 0;
    int32_t k = 0;
    for (size_t i = 0; b && i < jr->n_events && k < t->nb; i++) {
        const job_event *e = &jr->events[i];
        if (e->kind != DPRO_KIND_KERNEL || e->stream != t->bstream || pos++ != t->bpos[k])
            continue;
        if (e->end_ns != t->bend[k])
            break;
        b[k++] = i;
    }
    int rc = take_bounds(t, b, k);
    if (rc != 0)
        *missing = k < t->nb ? t->bpos[k] : 0;
    return rc;
}

/* The warm-up the replay would detect: the most leading slow iterations of any rank,
 * from the ends of the boundary events (the replay takes the ends of the boundary nodes,
 * the last host call within each marker). Returns it, or -1 (out of memory). */
static int32_t
detect_warmup(const rank_task *t, int32_t n)
{
    int32_t warm = 0;
    for (int32_t i = 0; i < n && warm >= 0; i++) {
        int64_t *st = malloc((size_t)t[i].nb * sizeof *st);
        uint8_t *wu = malloc((size_t)t[i].nb);
        if (!st || !wu) {
            warm = -1;
        } else {
            for (int32_t k = 0; k < t[i].nb; k++)
                st[k] = (int64_t)t[i].bend[k];
            int32_t w = (int32_t)iter_mark_warmup(st, (size_t)t[i].nb, 0.10, wu);
            warm = w > warm ? w : warm;
        }
        free(st);
        free(wu);
    }
    return warm;
}

/* The compared iterations as the replay chooses them, from the first pass: warm-up given
 * or detected, then o->iterations of them (0: all), as boundary indices *first (the
 * boundary that opens them) to *last + 1, and each task's cmp_t0, cmp_t1, cmp_ni.
 * Returns 1 when every task's iterations come from markers or from the kernel period's
 * cut agreed in the first pass and some are compared, 0 when not, -1 when out of
 * memory. */
static int
compared_span(rank_task *t, int32_t n, const job_options *o, int32_t *first, int32_t *last,
              int32_t *n_common)
{
    *n_common = -1;
    for (int32_t i = 0; i < n; i++) {
        if ((t[i].method != ITER_MARKER && t[i].method != ITER_RANGE &&
             !(t[i].method == ITER_PERIOD && t[i].bpos)) ||
            t[i].nb < 2)
            return 0;
        if (*n_common < 0 || t[i].nb < *n_common)
            *n_common = t[i].nb;
    }
    *first = o->warmup >= 0 ? (o->warmup > 0 ? o->warmup - 1 : 0) : detect_warmup(t, n);
    if (n < 1 || *first < 0)
        return n < 1 ? 0 : -1;
    *last = *n_common - 2;
    if (*last < *first)
        *first = 0; /* everything looked like warm-up: the replay compares all */
    if (o->iterations > 0 && *last - *first + 1 > o->iterations)
        *last = *first + o->iterations - 1;
    if (*last < *first)
        return 0;
    for (int32_t i = 0; i < n; i++) {
        t[i].cmp_t0 = t[i].bend[*first];
        t[i].cmp_t1 = t[i].bend[*last + 1];
        t[i].cmp_ni = *last - *first + 1;
    }
    return 1;
}

int
job_choose_window(job *j, rank_task *t, int32_t n, const job_options *o, int32_t *span)
{
    int32_t first = 0, last = -1, n_common = 0;
    int rc = compared_span(t, n, o, &first, &last, &n_common);
    int period = 0; /* the kernel period needs the whole trace */
    for (int32_t i = 0; i < n; i++)
        period |= t[i].method == ITER_PERIOD;
    if (rc <= 0 || o->iterations <= 0 || o->full || o->max_events || period)
        return rc < 0 ? -1 : 0;
    /* from the start where a trace holds allocations (under shared reading a process
     * sees only its own ranks' first pass: from the start alike on every process) */
    int from_start = o->from_start && o->share;
    for (int32_t i = 0; o->from_start && i < n; i++)
        from_start |= t[i].allocations;
    /* one iteration before the compared ones; from the trace's start when the first
     * compared iteration is the first (what precedes its boundary, as a full read has it:
     * the copies back of the step that spans it) */
    from_start |= first == 0;
    int32_t from = first > 0 && !from_start ? first - 1 : 0;
    if (from == 0 && last + 2 >= n_common)
        return 0; /* the window is everything */
    for (int32_t i = 0; i < n; i++) {
        t[i].windowed = 1;
        t[i].t0 = from_start ? 0 : t[i].bstart[from];
        t[i].t1 = t[i].bend[last + 1];
        t[i].b_first = from;
        t[i].b_count = last + 2 - from;
    }
    j->iter_skipped = from;
    j->window_warmup = first - from + 1;
    span[0] = first + 1; /* numbered as the replay numbers them */
    span[1] = last + 1;
    return 1;
}
