/* job_fold.c: rank signatures and the reduction of a folded rank (see job_fold.h), and a
 * built rank's reduction to its ranges with the heap's trim that follows (see job.h). */
#include "job_fold.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdlib.h>
#include <string.h>

#include "build_int.h"
#include "fnv1a.h"
#include "hmap.h"
#include "iter.h"
#include "job_int.h"
#include "replay.h"

static uint64_t
mix(uint64_t h, uint64_t v)
{
    return dpro_fnv1a(&v, sizeof v, h);
}

/* What one signature computation keeps: the hashes of the reader's strings (computed
 * once each) and the numbering of handles in the canonical order. */
typedef struct sig_ctx {
    const job_rank *jr;
    uint64_t *str; /* per string id: its text's hash, 0: not yet */
    uint32_t n_str;
    hmap streams, corrs, objects, devices, comms;
} sig_ctx;

static uint64_t
text_hash(sig_ctx *c, uint32_t id)
{
    if (id == 0 || id >= c->n_str)
        return id;
    if (!c->str[id]) {
        const char *s = dpro_reader_string(c->jr->reader, id);
        c->str[id] = s ? dpro_fnv1a(s, strlen(s), DPRO_FNV1A_INIT) | 1 : 1;
    }
    return c->str[id];
}

/* The number of handle v in m (numbered as first met), or -1 when out of memory. */
static int64_t
number(hmap *m, uint64_t v)
{
    int32_t k = hmap_get(m, v, -1);
    if (k < 0 && hmap_put(m, v, k = (int32_t)m->n) != 0)
        return -1;
    return k;
}

/* The structure hash of event e on resource number res, or 0 when out of memory. */
static uint64_t
event_hash(sig_ctx *c, const job_event *e, int32_t res)
{
    int64_t s = number(&c->streams, e->stream);
    int64_t k = e->correlation ? number(&c->corrs, e->correlation) : -2;
    int64_t o = e->object ? number(&c->objects, e->object) : -2;
    int64_t d = number(&c->devices, e->device);
    int64_t m = e->comm ? number(&c->comms, e->comm) : -2;
    if (s < 0 || k == -1 || o == -1 || d < 0 || m == -1)
        return 0;
    uint64_t h = mix(DPRO_FNV1A_INIT, ((uint64_t)e->kind << 32) | e->subkind);
    h = mix(h, text_hash(c, e->name));
    h = mix(h, text_hash(c, e->name2));
    h = mix(h, ((uint64_t)(uint32_t)res << 32) | (uint32_t)s);
    h = mix(h, ((uint64_t)k << 32) ^ (uint64_t)o);
    h = mix(h, ((uint64_t)d << 32) | (uint32_t)e->result);
    h = mix(h, e->bytes);
    h = mix(h, ((uint64_t)e->grid[0] << 32) ^ ((uint64_t)e->grid[1] << 16) ^ e->grid[2]);
    h = mix(h, ((uint64_t)e->block[0] << 32) ^ ((uint64_t)e->block[1] << 16) ^ e->block[2]);
    h = mix(h, e->shared_mem);
    h = mix(h, (uint64_t)e->value);
    if (e->kind == DPRO_KIND_COLLECTIVE || e->kind == DPRO_KIND_MARKER) {
        h = mix(h, (uint64_t)m);
        h = mix(h, e->seq);
        h = mix(h, e->count);
        h = mix(h, ((uint64_t)e->dtype << 32) | e->redop);
        h = mix(h, (uint64_t)(int64_t)e->peer);
    }
    return h ? h : 1;
}

/* Whether events of kind k become nodes of the graph (build.h), whose times the fold
 * rule compares; markers, device synchronisation, allocations and flows do not. */
static int
graph_kind(uint32_t k)
{
    return k == DPRO_KIND_API || k == DPRO_KIND_COLLECTIVE || is_device_kind(k);
}

/* The canonical order of jr's events (job_fold.h) into order[] and each one's resource
 * number into res[]. Returns 0 or -1. */
static int
canonical_order(const job_rank *jr, size_t *order, int32_t *res)
{
    hmap threads = {0}, streams = {0};
    size_t n = jr->n_events;
    int rc = hmap_init(&threads, 16) == 0 && hmap_init(&streams, 16) == 0 ? 0 : -1;
    int32_t n_res = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const job_event *e = &jr->events[i];
        hmap *m = is_device_kind(e->kind) ? &streams : &threads;
        uint64_t key = is_device_kind(e->kind) ? e->stream : e->thread;
        int32_t q = hmap_get(m, key, -1);
        if (q < 0 && hmap_put(m, key, q = n_res++) != 0)
            rc = -1;
        res[i] = q;
    }
    size_t *off = rc == 0 ? calloc((size_t)n_res + 1, sizeof *off) : NULL;
    if (rc == 0 && !off)
        rc = -1;
    for (size_t i = 0; rc == 0 && i < n; i++)
        off[res[i] + 1]++;
    for (int32_t q = 0; rc == 0 && q < n_res; q++)
        off[q + 1] += off[q];
    for (size_t i = 0; rc == 0 && i < n; i++)
        order[off[res[i]]++] = i;
    free(off);
    hmap_free(&threads);
    hmap_free(&streams);
    return rc;
}

void
job_fold_sig_free(job_fold_sig *s)
{
    free(s->h);
    free(s->rs);
    free(s->re);
    memset(s, 0, sizeof *s);
}

int
job_fold_signature(const job_rank *jr, uint64_t t0, uint64_t t1, int32_t ni, job_fold_sig *s)
{
    memset(s, 0, sizeof *s);
    size_t n = jr->n_events, cap = n > 0 ? n : 1;
    sig_ctx c = {.jr = jr, .n_str = dpro_reader_string_count(jr->reader) + 1};
    memset(&c.streams, 0, sizeof c.streams);
    memset(&c.corrs, 0, sizeof c.corrs);
    memset(&c.objects, 0, sizeof c.objects);
    memset(&c.devices, 0, sizeof c.devices);
    memset(&c.comms, 0, sizeof c.comms);
    size_t *order = malloc(cap * sizeof *order);
    int32_t *res = malloc(cap * sizeof *res);
    c.str = calloc(c.n_str, sizeof *c.str);
    s->n = n;
    s->h = malloc(cap * sizeof *s->h);
    s->rs = malloc(cap * sizeof *s->rs);
    s->re = malloc(cap * sizeof *s->re);
    int rc = order && res && c.str && s->h && s->rs && s->re ? 0 : -1;
    if (rc == 0 && (hmap_init(&c.streams, 16) != 0 || hmap_init(&c.corrs, 1024) != 0 ||
                    hmap_init(&c.objects, 64) != 0 || hmap_init(&c.devices, 4) != 0 ||
                    hmap_init(&c.comms, 8) != 0))
        rc = -1;
    if (rc == 0)
        rc = canonical_order(jr, order, res);
    s->hash = DPRO_FNV1A_INIT;
    s->unfoldable = ni <= 0 || t1 <= t0;
    s->tol = s->unfoldable ? 0 : JOB_FOLD_TOLERANCE * (double)(t1 - t0) / ni;
    for (size_t k = 0; rc == 0 && k < n; k++) {
        const job_event *e = &jr->events[order[k]];
        if (e->kind == DPRO_KIND_COLLECTIVE &&
            (e->subkind == DPRO_COLL_SEND || e->subkind == DPRO_COLL_RECV))
            s->unfoldable = 1; /* a transfer ties it to another rank's nodes */
        s->h[k] = event_hash(&c, e, res[order[k]]);
        s->rs[k] = (int64_t)(e->start_ns - t0);
        s->re[k] = (int64_t)(e->end_ns - t0);
        if (!graph_kind(e->kind))
            s->rs[k] = -1; /* not a node of the graph: only its structure counts */
        s->hash = mix(s->hash, s->h[k]);
        if (!s->h[k])
            rc = -1;
    }
    hmap_free(&c.streams);
    hmap_free(&c.corrs);
    hmap_free(&c.objects);
    hmap_free(&c.devices);
    hmap_free(&c.comms);
    free(c.str);
    free(order);
    free(res);
    if (rc != 0)
        job_fold_sig_free(s);
    return rc;
}

int
job_fold_within(int64_t a, int64_t b, double tol)
{
    double d = (double)a - (double)b;
    return d <= tol && -d <= tol;
}

int
job_fold_alike(const job_fold_sig *r, const job_fold_sig *p)
{
    if (r->unfoldable || p->unfoldable || r->n != p->n || r->hash != p->hash)
        return 0;
    int ok = 1;
    for (size_t i = 0; ok && i < r->n; i++) {
        ok = r->h[i] == p->h[i];
        if (ok && r->rs[i] >= 0) /* before the window only the structure counts */
            ok = job_fold_within(r->rs[i], p->rs[i], p->tol) &&
                 job_fold_within(r->re[i], p->re[i], p->tol) &&
                 job_fold_within(r->re[i] - r->rs[i], p->re[i] - p->rs[i], p->tol);
    }
    return ok;
}

/* Marks in keep[] the host call that closes the iteration at marker mi as the builder
 * finds it (the last host call within the marker on its thread, else on any thread when
 * the thread makes no calls: the last API call found here, or a collective, all of which
 * are kept) and the calls it is nested in. */
static void
keep_bound_call(const job_rank *jr, size_t mi, const uint8_t *host_thread, const hmap *threads,
                uint8_t *keep)
{
    const job_event *m = &jr->events[mi];
    int own = hmap_get(threads, m->thread, -1) >= 0 && host_thread[hmap_get(threads, m->thread, 0)];
    size_t cand = jr->n_events;
    for (size_t x = mi; x < jr->n_events && jr->events[x].start_ns <= m->end_ns; x++) {
        const job_event *e = &jr->events[x];
        if (e->kind == DPRO_KIND_API && e->start_ns >= m->start_ns && e->end_ns <= m->end_ns &&
            (!own || e->thread == m->thread))
            cand = x;
    }
    for (size_t x = cand + 1; cand < jr->n_events && x-- > mi;) {
        const job_event *e = &jr->events[x];
        const job_event *c = &jr->events[cand];
        if (x == cand ||
            (e->kind == DPRO_KIND_API && e->thread == c->thread && e->end_ns >= c->end_ns))
            keep[x] = 1;
    }
}

/* Marks in keep[] the iteration markers, the collectives, the first timed event and the
 * host calls closing iterations. Returns 0 or -1. */
static int
mark_kept(const job_rank *jr, uint8_t *keep, hmap *corr)
{
    hmap threads = {0};
    size_t n = jr->n_events;
    uint8_t *host_thread = calloc(n + 1, 1);
    replay_rank_iters it = {0};
    int rc = host_thread && hmap_init(&threads, 16) == 0 ? 0 : -1;
    int first = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const job_event *e = &jr->events[i];
        int key = 0;
        if (!first && (e->kind == DPRO_KIND_API || e->kind == DPRO_KIND_COLLECTIVE ||
                       is_device_kind(e->kind)))
            keep[i] = first = 1; /* the job's time origin */
        if (e->kind == DPRO_KIND_COLLECTIVE) {
            keep[i] = 1;
            if (e->correlation && hmap_put(corr, e->correlation, 1) != 0)
                rc = -1;
        } else if (e->kind == DPRO_KIND_MARKER &&
                   (e->subkind == DPRO_MARK_ITERATION ||
                    ((e->subkind == DPRO_MARK_RANGE || e->subkind == DPRO_MARK_CPU_OP) &&
                     iter_text_is_iteration(dpro_reader_string(jr->reader, e->name), &key)))) {
            keep[i] = 1;
        }
        int32_t q = hmap_get(&threads, e->thread, -1);
        if (q < 0 && hmap_put(&threads, e->thread, q = (int32_t)threads.n) != 0)
            rc = -1;
        if (rc == 0 && (e->kind == DPRO_KIND_API || e->kind == DPRO_KIND_COLLECTIVE))
            host_thread[q] = 1;
    }
    if (rc == 0 && replay_rank_iterations(jr, &it) != 0)
        rc = -1;
    for (int32_t k = 0; rc == 0 && k < it.n; k++) {
        size_t b = it.event_index[k];
        keep[b] = 1;
        if (jr->events[b].kind == DPRO_KIND_MARKER && jr->events[b].end_ns > jr->events[b].start_ns)
            keep_bound_call(jr, b, host_thread, &threads, keep);
    }
    replay_rank_iters_free(&it);
    hmap_free(&threads);
    free(host_thread);
    return rc;
}

int
job_fold_reduce(job_rank *jr)
{
    size_t n = jr->n_events;
    uint8_t *keep = calloc(n + 1, 1);
    hmap corr = {0};
    int rc = keep && hmap_init(&corr, 256) == 0 ? 0 : -1;
    if (rc == 0)
        rc = mark_kept(jr, keep, &corr);
    size_t k = 0, b = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const job_event *e = &jr->events[i];
        if (!keep[i] &&
            !(is_device_kind(e->kind) && e->correlation && hmap_get(&corr, e->correlation, 0)))
            continue;
        while (jr->bounds && b < (size_t)jr->n_bounds && jr->bounds[b] == i)
            jr->bounds[b++] = k; /* the boundaries (kept, ascending) to the new indices */
        jr->events[k++] = *e;
    }
    if (rc == 0) {
        job_event *x = realloc(jr->events, (k > 0 ? k : 1) * sizeof *x);
        if (x)
            jr->events = x;
        jr->n_events = k;
        job_rank_forget(jr); /* taken from the events reduced here */
    }
    hmap_free(&corr);
    free(keep);
    return rc;
}

int32_t
job_fold_find(const fold_reps *reps, const job_fold_sig *s)
{
    int32_t into = -1;
    for (int32_t k = 0; into < 0 && k < reps->n; k++)
        if (job_fold_alike(s, &reps->sig[k]))
            into = k;
    return into;
}

int
job_fold_classify(job *j, rank_task *t, job_fold_sig *s, fold_reps *reps, int keep)
{
    int rc = 0;
    job_rank *jr = t->jr;
    int32_t into = job_fold_find(reps, s);
    if (into < 0) {
        reps->sig[reps->n] = *s;
        reps->rank[reps->n++] = jr->rank;
    } else {
        if (keep && !t->sig && !(t->sig = malloc(sizeof *t->sig)))
            rc = DPRO_ERR_NOMEM;
        if (rc == 0 && keep && reps->env)
            rc = job_fold_env_add(&reps->env[into], reps->rank[into], s);
        if (rc == 0 && job_fold_reduce(jr) != 0)
            rc = DPRO_ERR_NOMEM;
        if (rc == 0 && keep)
            *t->sig = *s;
        else
            job_fold_sig_free(s);
        jr->folded = rc == 0;
        jr->fold_rep = reps->rank[into];
        j->n_folded += rc == 0;
    }
    return rc;
}

/* Bytes freed between two trims: malloc_trim walks the whole heap, so a trim after every
 * rank or wave costs in proportion to ranks x heap (docs/figures.md, "Scale with MPI");
 * one each 16 MiB freed bounds what waits for the next. */
#define TRIM_EVERY ((size_t)16 << 20)

void
job_trim(job *j, size_t freed)
{
    j->untrimmed += freed;
    if (j->untrimmed >= TRIM_EVERY) {
#ifdef __GLIBC__
        malloc_trim(0); /* the heap's free pages back to the system, in every thread's arena */
#endif
        j->untrimmed = 0;
    }
}

void
job_rank_keep_ranges(job *j, job_rank *jr)
{
    size_t k = 0;
    free(jr->wire); /* the events kept are held expanded */
    jr->wire = NULL;
    jr->wire_len = 0;
    for (size_t i = 0; i < jr->n_events; i++)
        if (jr->events[i].kind == DPRO_KIND_MARKER || jr->events[i].kind == DPRO_KIND_MEMORY)
            jr->events[k++] = jr->events[i];
    job_event *x = k > 0 && k < jr->n_events ? malloc(k * sizeof *x) : NULL;
    if (x || k == 0) { /* a new array rather than a shrinking realloc: the whole old one goes */
        if (x)
            memcpy(x, jr->events, k * sizeof *x);
        free(jr->events);
        jr->events = x;
    }
    job_trim(j, (jr->n_events - k) * sizeof *x); /* for the graph to come */
    jr->n_events = k;
    free(jr->bounds); /* indices into the events gone */
    jr->bounds = NULL;
    jr->n_bounds = 0;
}
