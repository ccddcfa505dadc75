/*
 * iter.c: iteration over a trace's events (see dprotrace.h): batches are decoded lazily
 * and merged by start time.
 */
#include "dprotrace.h"
#include "trace_internal.h"
#include "reader_internal.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- iteration -------------------------------------------------------------------------- */

typedef struct batch_ref {
    int64_t id;
    uint64_t first_ns, last_ns;
} batch_ref;

typedef struct open_batch {
    dpro_event *events;
    size_t n, pos, cap;
} open_batch;

#define SPARE_ARRAYS 4

struct dpro_iter {
    dpro_reader *r;
    sqlite3_stmt *fetch;
    batch_ref *refs;
    size_t nrefs, next_ref;
    open_batch *heap; /* min-heap by the current event's start */
    size_t nheap, capheap;
    uint64_t bad;
    dpro_codec *codec;
    dpro_event *merge_buf; /* scratch for merging a batch's kind groups */
    size_t merge_cap;
    open_batch spare[SPARE_ARRAYS]; /* event arrays of finished batches, for reuse */
    size_t nspare;
    uint64_t t0, t1; /* the time window: events overlapping [t0, t1] */
    uint64_t kinds;  /* bit k set: events of kind k are handed out (kinds >= 64: never) */
    uint64_t seen;   /* bit k set: a decoded batch held an event of kind k */
};

static int
event_before(const dpro_event *a, const dpro_event *b)
{
    if (a->start_ns != b->start_ns)
        return a->start_ns < b->start_ns;
    return a->kind < b->kind;
}

static int
event_cmp(const void *pa, const void *pb)
{
    const dpro_event *a = pa, *b = pb;
    if (a->start_ns != b->start_ns)
        return a->start_ns < b->start_ns ? -1 : 1;
    if (a->kind != b->kind)
        return a->kind < b->kind ? -1 : 1;
    return 0;
}

static int
heap_less(const open_batch *a, const open_batch *b)
{
    return event_before(&a->events[a->pos], &b->events[b->pos]);
}

static void
heap_sift_down(dpro_iter *it, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        if (l < it->nheap && heap_less(&it->heap[l], &it->heap[m]))
            m = l;
        if (l + 1 < it->nheap && heap_less(&it->heap[l + 1], &it->heap[m]))
            m = l + 1;
        if (m == i)
            return;
        open_batch t = it->heap[i];
        it->heap[i] = it->heap[m];
        it->heap[m] = t;
        i = m;
    }
}

static void
heap_push(dpro_iter *it, open_batch b)
{
    size_t i = it->nheap++;
    it->heap[i] = b;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_less(&it->heap[i], &it->heap[p]))
            break;
        open_batch t = it->heap[i];
        it->heap[i] = it->heap[p];
        it->heap[p] = t;
        i = p;
    }
}

int
dpro_iter_open_range(dpro_reader *r, uint64_t t0_ns, uint64_t t1_ns, dpro_iter **out)
{
    int rc = DPRO_OK, step = SQLITE_DONE;
    dpro_iter *it;
    sqlite3_stmt *st = NULL;
    size_t cap = 0;

    *out = NULL;
    if (!r || t0_ns > t1_ns)
        return DPRO_ERR_ARG;
    if (!r->db)
        return dpro_reader_fail(r, DPRO_ERR_ARG, "%s", "detached: the file is closed");
    it = calloc(1, sizeof *it);
    if (!it)
        return DPRO_ERR_NOMEM;
    it->r = r;
    it->t0 = t0_ns;
    it->t1 = t1_ns;
    it->kinds = UINT64_MAX;
    it->codec = dpro_codec_new();
    if (!it->codec)
        rc = DPRO_ERR_NOMEM;
    /* times are stored as int64: a bound past INT64_MAX is INT64_MAX */
    if (rc == DPRO_OK &&
        sqlite3_prepare_v2(r->db,
                           "SELECT id, first_ns, last_ns FROM batches WHERE id <= ?1 AND "
                           "((first_ns <= ?2 AND last_ns >= ?3) OR first_ns < 0 OR "
                           "last_ns < 0) ORDER BY first_ns, id",
                           -1, &st, NULL) != SQLITE_OK) {
        rc = dpro_reader_fail(r, DPRO_ERR_CORRUPT, "reading batches: %s", sqlite3_errmsg(r->db));
    } else if (rc == DPRO_OK &&
               sqlite3_prepare_v2(r->db, "SELECT count, raw_size, data FROM batches WHERE id = ?",
                                  -1, &it->fetch, NULL) != SQLITE_OK) {
        rc = dpro_reader_fail(r, DPRO_ERR_CORRUPT, "reading batches: %s", sqlite3_errmsg(r->db));
    }
    if (rc == DPRO_OK) {
        sqlite3_bind_int64(st, 1, r->max_batch_id);
        sqlite3_bind_int64(st, 2, t1_ns > INT64_MAX ? INT64_MAX : (int64_t)t1_ns);
        sqlite3_bind_int64(st, 3, t0_ns > INT64_MAX ? INT64_MAX : (int64_t)t0_ns);
        while (rc == DPRO_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
            rc = dpro_grow((void **)&it->refs, &cap, it->nrefs, sizeof *it->refs);
            if (rc == DPRO_OK) {
                it->refs[it->nrefs].id = sqlite3_column_int64(st, 0);
                it->refs[it->nrefs].first_ns = (uint64_t)sqlite3_column_int64(st, 1);
                it->refs[it->nrefs].last_ns = (uint64_t)sqlite3_column_int64(st, 2);
                it->nrefs++;
            }
        }
        if (rc == DPRO_OK && step != SQLITE_DONE) {
            /* a file cut short: the batches listed before the missing pages are read */
            if (!r->cut)
                rc = dpro_reader_fail(r, DPRO_ERR_CORRUPT, "reading batches: %s",
                                      sqlite3_errmsg(r->db));
            else
                dpro_reader_warn(r, "the list of batches stops at a missing page, after %zu",
                                 it->nrefs);
        }
    }
    sqlite3_finalize(st);
    if (rc == DPRO_OK) {
        it->capheap = it->nrefs ? it->nrefs : 1;
        it->heap = malloc(it->capheap * sizeof *it->heap);
        if (!it->heap)
            rc = DPRO_ERR_NOMEM;
    }
    if (rc != DPRO_OK) {
        dpro_iter_close(it);
        return rc;
    }
    *out = it;
    return rc;
}

int
dpro_iter_open(dpro_reader *r, dpro_iter **out)
{
    return dpro_iter_open_range(r, 0, UINT64_MAX, out);
}

/* Whether events are already in (start, kind) order. */
static int
sorted(const dpro_event *e, size_t n)
{
    for (size_t i = 1; i < n; i++)
        if (event_before(&e[i], &e[i - 1]))
            return 0;
    return 1;
}

/* A batch decodes as one run per kind, each normally in time order: merges the runs
 * (sorting a run first if it is not) through the iterator's scratch buffer, and swaps the
 * buffers. Returns DPRO_ERR_NOMEM when there are too many runs or no memory. */
static int
merge_runs(dpro_iter *it, open_batch *b)
{
    enum { MAX_RUNS = 80 };
    size_t head[MAX_RUNS], end[MAX_RUNS], nruns = 0;
    for (size_t i = 0; i < b->n; i = end[nruns++]) {
        size_t j = i + 1;
        if (nruns == MAX_RUNS)
            return DPRO_ERR_NOMEM;
        while (j < b->n && b->events[j].kind == b->events[i].kind)
            j++;
        head[nruns] = i;
        end[nruns] = j;
        if (!sorted(b->events + i, j - i))
            qsort(b->events + i, j - i, sizeof *b->events, event_cmp);
    }
    if (it->merge_cap < b->n) {
        dpro_event *m = realloc(it->merge_buf, b->n * sizeof *m);
        if (!m)
            return DPRO_ERR_NOMEM;
        it->merge_buf = m;
        it->merge_cap = b->n;
    }
    for (size_t out = 0; out < b->n; out++) {
        size_t best = MAX_RUNS;
        for (size_t r = 0; r < nruns; r++)
            if (head[r] < end[r] &&
                (best == MAX_RUNS || event_before(&b->events[head[r]], &b->events[head[best]])))
                best = r;
        it->merge_buf[out] = b->events[head[best]++];
    }
    dpro_event *t = b->events;
    size_t cap = b->cap;
    b->events = it->merge_buf;
    b->cap = it->merge_cap;
    it->merge_buf = t;
    it->merge_cap = cap;
    return DPRO_OK;
}

/* Keeps the event array of a finished batch for the next one (or frees it). */
static void
recycle(dpro_iter *it, open_batch b)
{
    if (it->nspare < SPARE_ARRAYS)
        it->spare[it->nspare++] = b;
    else
        free(b.events);
}

/* Checks a decoded batch against its row and the file: first_ns must be its earliest
 * start (the merge opens batches in first_ns order: a wrong one would reorder events),
 * last_ns its latest end (this library's writer: or start, for an end before its start),
 * and every string id must be one the file has. */
static int
check_batch(const dpro_reader *r, const batch_ref *ref, const open_batch *b, char *err,
            size_t errlen)
{
    int rc = DPRO_OK;
    uint64_t first = UINT64_MAX, last_end = 0, last = 0;
    for (size_t i = 0; i < b->n; i++) {
        const dpro_event *e = &b->events[i];
        if (e->start_ns < first)
            first = e->start_ns;
        if (e->end_ns > last_end)
            last_end = e->end_ns;
        uint32_t top = e->name > e->name2 ? e->name : e->name2;
        top = e->shapes > top ? e->shapes : top;
        top = e->dtypes > top ? e->dtypes : top;
        top = e->args > top ? e->args : top;
        top = e->et_deps > top ? e->et_deps : top;
        if (top > r->nstrings) {
            snprintf(err, errlen, "event %zu names string %u; the file has %u", i, top,
                     r->nstrings);
            rc = DPRO_ERR_CORRUPT;
            break;
        }
    }
    if (rc == DPRO_OK && ((int64_t)ref->first_ns < 0 || (int64_t)ref->last_ns < 0)) {
        snprintf(err, errlen, "its row's times are negative (first_ns %lld, last_ns %lld)",
                 (long long)ref->first_ns, (long long)ref->last_ns);
        rc = DPRO_ERR_CORRUPT;
    }
    for (size_t i = 0; rc == DPRO_OK && i < b->n; i++)
        if (b->events[i].start_ns > last)
            last = b->events[i].start_ns;
    if (last < last_end)
        last = last_end;
    if (rc == DPRO_OK && b->n &&
        (first != ref->first_ns || (ref->last_ns != last_end && ref->last_ns != last))) {
        snprintf(err, errlen,
                 "its row says first_ns %llu, last_ns %llu; its events span %llu to %llu",
                 (unsigned long long)ref->first_ns, (unsigned long long)ref->last_ns,
                 (unsigned long long)first, (unsigned long long)last);
        rc = DPRO_ERR_CORRUPT;
    }
    return rc;
}

/* Drops from a decoded (and checked) batch the events of kinds the iterator does not
 * hand out, keeping the others in their order, and records every kind the batch held.
 * Done before the batch is ordered: what is dropped is neither merged nor copied. */
static void
keep_kinds(dpro_iter *it, open_batch *b)
{
    size_t kept = 0;
    for (size_t i = 0; i < b->n; i++) {
        uint64_t bit = b->events[i].kind < 64 ? UINT64_C(1) << b->events[i].kind : 0;
        it->seen |= bit;
        if (!(it->kinds & bit))
            continue;
        if (kept != i)
            b->events[kept] = b->events[i];
        kept++;
    }
    b->n = kept;
}

/* Decodes batch refs[next_ref] and pushes it on the heap. Returns DPRO_OK, or an error
 * for a damaged batch (which is skipped). */
static int
open_next_batch(dpro_iter *it)
{
    int rc = DPRO_OK;
    const batch_ref *ref = &it->refs[it->next_ref++];
    char err[256] = "";
    open_batch b = {NULL, 0, 0, 0};
    if (it->nspare)
        b = it->spare[--it->nspare];

    sqlite3_bind_int64(it->fetch, 1, ref->id);
    if (sqlite3_step(it->fetch) != SQLITE_ROW) {
        snprintf(err, sizeof err, "cannot read: %s", sqlite3_errmsg(it->r->db));
        rc = DPRO_ERR_CORRUPT;
    } else {
        int64_t count = sqlite3_column_int64(it->fetch, 0);
        int64_t raw = sqlite3_column_int64(it->fetch, 1);
        const uint8_t *data = sqlite3_column_blob(it->fetch, 2);
        int len = sqlite3_column_bytes(it->fetch, 2);
        if (raw < 0 || count < 0 || !data) {
            snprintf(err, sizeof err, "bad sizes (count %lld, raw_size %lld)", (long long)count,
                     (long long)raw);
            rc = DPRO_ERR_CORRUPT;
        } else {
            rc = dpro_codec_decode(it->codec, data, (size_t)len, (size_t)raw, &b.events, &b.cap,
                                   &b.n, err, sizeof err);
            if (rc == DPRO_OK && (size_t)count != b.n) {
                snprintf(err, sizeof err, "holds %zu events, its row says %lld", b.n,
                         (long long)count);
                rc = DPRO_ERR_CORRUPT;
            }
            if (rc == DPRO_OK)
                rc = check_batch(it->r, ref, &b, err, sizeof err);
        }
    }
    sqlite3_reset(it->fetch);
    if (rc != DPRO_OK) {
        char msg[384];
        snprintf(msg, sizeof msg, "batch %lld: %s", (long long)ref->id, err);
        dpro_reader_fail(it->r, rc, "%s", msg);
        it->bad++;
        recycle(it, b);
        return rc;
    }
    if (it->kinds != UINT64_MAX)
        keep_kinds(it, &b);
    if (b.n == 0) {
        recycle(it, b);
        return DPRO_OK;
    }
    if (!sorted(b.events, b.n) && merge_runs(it, &b) != DPRO_OK)
        qsort(b.events, b.n, sizeof *b.events, event_cmp);
    b.pos = 0;
    heap_push(it, b);
    return DPRO_OK;
}

/* Whether e overlaps the iterator's window (an end before the start: an instant). */
static int
in_window(const dpro_iter *it, const dpro_event *e)
{
    uint64_t end = e->end_ns > e->start_ns ? e->end_ns : e->start_ns;
    return e->start_ns <= it->t1 && end >= it->t0;
}

int
dpro_iter_next_sized(dpro_iter *it, dpro_event *ev, size_t ev_size)
{
    if (!it || !ev || ev_size < DPRO_EVENT_SIZE_MIN)
        return DPRO_ERR_ARG;
    for (;;) {
        /* open every batch that may hold an event before the heap's current minimum */
        while (it->next_ref < it->nrefs &&
               (it->nheap == 0 ||
                it->refs[it->next_ref].first_ns <= it->heap[0].events[it->heap[0].pos].start_ns)) {
            int rc = open_next_batch(it);
            if (rc != DPRO_OK)
                return rc;
        }
        if (it->nheap == 0)
            return 0;
        open_batch *top = &it->heap[0];
        const dpro_event *e = &top->events[top->pos++];
        /* events come in start order: once one starts after the window, all do */
        if (e->start_ns > it->t1) {
            for (size_t i = 0; i < it->nheap; i++)
                recycle(it, it->heap[i]);
            it->nheap = 0;
            it->next_ref = it->nrefs;
            return 0;
        }
        int keep = in_window(it, e);
        if (keep && ev_size == sizeof *ev)
            *ev = *e;
        else if (keep)
            dpro_event_export(ev, ev_size, e);
        if (top->pos == top->n) {
            recycle(it, *top);
            it->heap[0] = it->heap[--it->nheap];
        }
        if (it->nheap)
            heap_sift_down(it, 0);
        if (keep)
            return 1;
    }
}

int
dpro_iter_set_kinds(dpro_iter *it, uint64_t kinds)
{
    int rc = DPRO_OK;
    if (!it || it->next_ref > 0)
        rc = DPRO_ERR_ARG;
    else
        it->kinds = kinds;
    return rc;
}

uint64_t
dpro_iter_kinds_seen(const dpro_iter *it)
{
    return it ? it->seen : 0;
}

uint64_t
dpro_iter_bad_batches(const dpro_iter *it)
{
    return it->bad;
}

void
dpro_iter_close(dpro_iter *it)
{
    if (!it)
        return;
    for (size_t i = 0; i < it->nheap; i++)
        free(it->heap[i].events);
    for (size_t i = 0; i < it->nspare; i++)
        free(it->spare[i].events);
    dpro_codec_free(it->codec);
    free(it->merge_buf);
    free(it->heap);
    free(it->refs);
    sqlite3_finalize(it->fetch);
    free(it);
}
