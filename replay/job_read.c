/* job_read.c: one rank's passes over its trace in a load (see job.h): the first pass's
 * markers and boundaries, the second pass's events, the task's warnings and failure. */
#define PR_FMT "replay"
#include "job.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpro_log.h"
#include "iter.h"
#include "job_fold.h"
#include "job_int.h"
#include "replay.h" /* replay_detect_iterations: the window's iterations are the replay's */

/* Records a warning of the task (printed later, with job_warn). */
static void task_warn(rank_task *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void
task_warn(rank_task *t, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char **m = realloc(t->msg, (t->n_msg + 1) * sizeof *m);
    if (!m)
        return;
    t->msg = m;
    m[t->n_msg] = strdup(buf);
    if (m[t->n_msg])
        t->n_msg++;
}

int
job_task_fail(rank_task *t, int rc, const char *fmt, ...)
{
    char buf[DPRO_ERRBUF_SIZE];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    free(t->err);
    t->err = strdup(buf);
    return rc;
}

void
job_task_free(rank_task *t)
{
    for (size_t i = 0; i < t->n_msg; i++)
        free(t->msg[i]);
    free(t->msg);
    free(t->err);
    free(t->bstart);
    free(t->bend);
    free(t->bpos);
    period_scan_free(&t->period);
    if (t->sig)
        job_fold_sig_free(t->sig);
    free(t->sig);
    free(t->packed);
    free(t->sig_packed);
}

/* The loaded event of a read one: the fields job_event keeps. */
static void
job_event_of(job_event *d, const dpro_event *e)
{
    *d = (job_event){.start_ns = e->start_ns,
                     .end_ns = e->end_ns,
                     .correlation = e->correlation,
                     .stream = e->stream,
                     .object = e->object,
                     .bytes = e->bytes,
                     .address = e->address,
                     .comm = e->comm,
                     .seq = e->seq,
                     .count = e->count,
                     .value = e->value,
                     .kind = e->kind,
                     .subkind = e->subkind,
                     .thread = e->thread,
                     .name = e->name,
                     .name2 = e->name2,
                     .device = e->device,
                     .result = e->result,
                     .shared_mem = e->shared_mem,
                     .dtype = e->dtype,
                     .redop = e->redop,
                     .peer = e->peer};
    memcpy(d->grid, e->grid, sizeof d->grid);
    memcpy(d->block, e->block, sizeof d->block);
}

/* Appends ev, as a job_event, to the growing array *ev (*n of *cap). Returns 0 or -1. */
static int
push_event(job_event **ev, size_t *n, size_t *cap, const dpro_event *e)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 4096;
        job_event *x = realloc(*ev, c * sizeof *x);
        if (!x)
            return -1;
        *ev = x;
        *cap = c;
    }
    job_event_of(&(*ev)[(*n)++], e);
    return 0;
}

/* What each_event calls for every event: 0 to go on, 1 to stop reading, or a dpro_status
 * < 0 to fail. */
typedef int (*event_fn)(void *arg, const dpro_event *e);

/* The one pass over a rank's trace that every read makes: the events of the task's rank
 * in order, those of its window only when `windowed`, each handed to fn; only those of
 * the kinds in `kinds` (dpro_iter_set_kinds' bits; UINT64_MAX: all), and when `seen` is
 * not NULL the kinds every decoded batch held land in it. A damaged batch is skipped;
 * unless `quiet` (the first pass already counted and told them) it is told and the count
 * lands in jr->bad_batches. Returns 0, or a dpro_status recorded with task_fail: the
 * reader's, or fn's (DPRO_ERR_NOMEM, "out of memory reading FILE"). */
static int
each_event(rank_task *t, int windowed, int quiet, uint64_t kinds, uint64_t *seen, event_fn fn,
           void *arg)
{
    job_rank *jr = t->jr;
    dpro_iter *it = NULL;
    /* [t0 + 1, t1 - 1]: what merely touches the window's ends (the marker before it,
     * which ends where the first one starts; the one after) is not in it */
    int rc = windowed ? dpro_iter_open_range(jr->reader, t->t0 + 1, t->t1 - 1, &it)
                      : dpro_iter_open(jr->reader, &it);
    if (rc == DPRO_OK)
        rc = dpro_iter_set_kinds(it, kinds);
    if (rc != DPRO_OK) {
        dpro_iter_close(it);
        it = NULL;
    }
    if (rc != DPRO_OK)
        return job_task_fail(t, rc, "%s: %s", jr->path, dpro_reader_errmsg(jr->reader));
    for (;;) {
        dpro_event ev;
        rc = dpro_iter_next(it, &ev);
        if (rc == 0)
            break;
        if (rc < 0) {
            if (!quiet)
                task_warn(t, "rank %d: %s (batch skipped)", jr->rank,
                          dpro_reader_errmsg(jr->reader));
            continue;
        }
        rc = fn(arg, &ev);
        if (rc != 0)
            break;
    }
    if (rc >= 0 && !quiet)
        jr->bad_batches = dpro_iter_bad_batches(it);
    if (seen)
        *seen = dpro_iter_kinds_seen(it);
    dpro_iter_close(it);
    if (rc < 0)
        return job_task_fail(t, rc, "out of memory reading %s", jr->path);
    return 0;
}

/* read_events' collector: every event, up to max_events. */
typedef struct keep_all {
    job_rank *jr;
    size_t cap, max_events;
    int truncated;
} keep_all;

static int
keep_event(void *arg, const dpro_event *e)
{
    keep_all *k = arg;
    if (k->max_events && k->jr->n_events >= k->max_events) {
        k->truncated = 1;
        return 1;
    }
    return push_event(&k->jr->events, &k->jr->n_events, &k->cap, e) ? DPRO_ERR_NOMEM : 0;
}

/* Reads the events of the task's rank: every one, or those of its window. Returns 0 or
 * a dpro_status. */
static int
read_events(rank_task *t, size_t max_events)
{
    job_rank *jr = t->jr;
    keep_all k = {.jr = jr, .max_events = max_events};
    int rc = each_event(t, t->windowed, t->quiet_damage, UINT64_MAX, NULL, keep_event, &k);
    if (rc != 0)
        return rc;
    size_t cap = k.cap;
    int truncated = k.truncated;
    if (jr->n_events > 0 && jr->n_events < cap) { /* the doubling's slack back */
        job_event *x = realloc(jr->events, jr->n_events * sizeof *x);
        if (x)
            jr->events = x;
    }
    if (truncated)
        task_warn(t, "rank %d: more than %zu events; the rest is ignored", jr->rank, max_events);
    dpro_trace_summary sum;
    if (dpro_reader_summary(jr->reader, &sum) == DPRO_OK) {
        t->in_file = sum.events;
        if (sum.dropped > 0) {
            jr->dropped = sum.dropped;
            task_warn(t, "rank %d: the collector dropped %llu events; the replay may miss work",
                      jr->rank, (unsigned long long)sum.dropped);
        }
    }
    return 0;
}

/* Opens the rank's trace anew for a pass over its events (the reader kept between passes
 * is detached: no open file, no page cache, so that a job of more ranks than open files
 * loads, and what a pass read leaves memory with it). Returns 0 or a dpro_status. */
static int
reopen(rank_task *t)
{
    job_rank *jr = t->jr;
    dpro_reader *r = NULL;
    char eb[DPRO_ERRBUF_SIZE];
    if (!jr->path)
        return job_task_fail(t, DPRO_ERR_NOMEM, "out of memory");
    int rc = dpro_reader_open(jr->path, &r, eb, sizeof eb);
    if (rc != DPRO_OK)
        return job_task_fail(t, rc, "%s", eb);
    dpro_reader_close(jr->reader);
    jr->reader = r;
    jr->host = job_rank_meta(jr, JOB_META_HOST);
    return 0;
}

/* job_scan_bounds' collector: the markers, and the kernels for the period scan. */
typedef struct keep_markers {
    job_rank *sub;
    size_t cap;
    period_collect kernels;
} keep_markers;

static int
keep_marker(void *arg, const dpro_event *e)
{
    keep_markers *k = arg;
    if (job_period_collect(&k->kernels, k->sub->reader, e) != 0)
        return DPRO_ERR_NOMEM;
    if (e->kind != DPRO_KIND_MARKER)
        return 0;
    return push_event(&k->sub->events, &k->sub->n_events, &k->cap, e) ? DPRO_ERR_NOMEM : 0;
}

/* The first pass over one rank: every event is read, the markers are kept and the
 * boundaries found in them as the replay finds them. Markers are all that the replay's
 * detection looks at when it finds iterations from markers (the only case a window is
 * taken for); without them it falls back to the kernel period: with t->scan_period the
 * kernels are scanned here as the replay scans them (period.h), the cut waiting for the
 * other ranks' (job_period_agree), else the method stays ITER_NONE and nothing is
 * folded. Damaged batches are counted and told here. Returns 0 or a dpro_status. */
int
job_scan_bounds(rank_task *t, const job_options *o)
{
    (void)o;
    job_rank *jr = t->jr;
    job_rank sub = {.rank = jr->rank, .path = jr->path};
    replay_rank_iters ri = {0};
    keep_markers km = {.sub = &sub, .kernels = {.on = t->scan_period}};
    uint64_t seen = 0;
    int rc = reopen(t);
    if (rc == 0) {
        sub.reader = jr->reader;
        /* only what keep_marker looks at is ordered and handed out: the markers, and
         * the kernels for the period scan; the kinds seen tell the allocations */
        uint64_t kinds = UINT64_C(1) << DPRO_KIND_MARKER;
        if (km.kernels.on)
            kinds |= UINT64_C(1) << DPRO_KIND_KERNEL;
        rc = each_event(t, 0, 0, kinds, &seen, keep_marker, &km);
    }
    if (rc != 0) {
        dpro_reader_detach(jr->reader);
        free(sub.events);
        free(km.kernels.k);
        return rc;
    }
    if (replay_detect_iterations(&sub, &ri) != 0)
        rc = DPRO_ERR_NOMEM;
    if (rc == 0) {
        t->method = ri.method;
        t->nb = ri.n;
        t->allocations = (seen >> DPRO_KIND_MEMORY) & 1;
        t->bstart = malloc((size_t)(ri.n > 0 ? ri.n : 1) * sizeof *t->bstart);
        t->bend = malloc((size_t)(ri.n > 0 ? ri.n : 1) * sizeof *t->bend);
        if (!t->bstart || !t->bend)
            rc = DPRO_ERR_NOMEM;
    }
    for (int32_t k = 0; rc == 0 && k < ri.n; k++) {
        t->bstart[k] = sub.events[ri.event_index[k]].start_ns;
        t->bend[k] = sub.events[ri.event_index[k]].end_ns;
    }
    if (rc == 0 && ri.method == ITER_NONE)
        rc = job_period_scan(t, &km.kernels);
    free(km.kernels.k);
    replay_rank_iters_free(&ri);
    free(sub.events);
    t->quiet_damage = 1;
    if (rc != 0)
        rc = job_task_fail(t, rc, "out of memory reading %s", jr->path);
    dpro_reader_detach(jr->reader);
    return rc;
}

/* Whether the window's events show the boundaries chosen from the whole trace, first
 * to last, the earliest ones first. Returns 1, 0, or -1 (out of memory). */
static int
window_holds_bounds(const rank_task *t)
{
    replay_rank_iters ri;
    if (replay_detect_iterations(t->jr, &ri) != 0)
        return -1;
    int ok = ri.method == t->method && ri.n >= t->b_count;
    for (int32_t k = 0; ok && k < t->b_count; k++) {
        const job_event *e = &t->jr->events[ri.event_index[k]];
        ok = e->start_ns == t->bstart[t->b_first + k] && e->end_ns == t->bend[t->b_first + k];
    }
    replay_rank_iters_free(&ri);
    return ok;
}

/* The second pass (or the only one): reads the rank's events, checks a window, places
 * the boundaries cut from the first pass. Returns 0 or a dpro_status. */
int
job_read_rank(rank_task *t, const job_options *o)
{
    int rc = reopen(t);
    job_rank_forget(t->jr); /* taken from the events replaced here */
    if (rc == 0)
        rc = read_events(t, o ? o->max_events : 0);
    dpro_reader_detach(t->jr->reader);
    t->loaded = t->jr->n_events;
    size_t miss = 0;
    int placed = rc == 0 && t->bpos ? job_period_place(t, &miss) : 0;
    if (placed == DPRO_ERR_NOMEM)
        rc = job_task_fail(t, placed, "out of memory reading %s", t->jr->path);
    else if (placed != 0)
        rc = job_task_fail(t, placed,
                           "%s: the second read does not show the iterations the first found "
                           "(kernel %zu of stream %llu: the trace changed while read?)",
                           t->jr->path, miss, (unsigned long long)t->bstream);
    if (rc == 0 && t->windowed) {
        int ok = window_holds_bounds(t);
        if (ok < 0)
            rc = job_task_fail(t, DPRO_ERR_NOMEM, "out of memory reading %s", t->jr->path);
        t->window_ok = ok > 0;
    }
    return rc;
}
