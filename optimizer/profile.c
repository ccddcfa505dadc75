/* profile.c: what the optimizer takes from the replayed job's traces besides the graph
 * (see profile.h). */
#define PR_FMT "optimizer"
#include "optimizer/profile.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dpro_log.h"
#include "replay/iter.h"

/* Window [*t0, *t1) of the first iteration marked in rank jr's trace (NVTX ranges or
 * iteration markers named like iterations), graph clock; *t0 = -1 when there is none. */
void
profile_first_iteration_window(const job_rank *jr, int64_t off, int64_t origin, int64_t *t0,
                               int64_t *t1)
{
    *t0 = -1;
    *t1 = INT64_MAX;
    int key0 = -1;
    for (size_t i = 0; i < jr->n_events; i++) {
        const job_event *e = &jr->events[i];
        if (e->kind != DPRO_KIND_MARKER ||
            (e->subkind != DPRO_MARK_RANGE && e->subkind != DPRO_MARK_ITERATION))
            continue;
        int key = 0;
        if (e->subkind == DPRO_MARK_RANGE &&
            !iter_text_is_iteration(dpro_reader_string(jr->reader, e->name), &key))
            continue;
        if (key0 >= 0 && key != key0)
            continue;
        int64_t t = (int64_t)e->start_ns + off - origin;
        if (*t0 < 0 || t < *t0) {
            if (*t0 >= 0)
                *t1 = *t0;
            *t0 = t;
            key0 = key;
        } else if (t > *t0 && t < *t1) {
            *t1 = t;
        }
    }
}

/* The first launch of thread in st, INT64_MAX when it launched nothing. */
static int64_t
first_launch(const profile_rank_steps *st, uint64_t thread)
{
    for (int32_t i = 0; i < st->n_first; i++)
        if (st->first[i].thread == thread)
            return st->first[i].t_ns;
    return INT64_MAX;
}

/* 1 when rank jr's device allocations are all whole 2 MiB multiples, and there is one: the
 * segments of PyTorch's caching allocator (memest.h), not one allocation per tensor. */
static int
profile_segments_only(const job_rank *jr)
{
    int64_t seg = 2 << 20;
    int any = 0, other = 0;
    for (size_t i = 0; i < jr->n_events && !other; i++) {
        const job_event *e = &jr->events[i];
        if (e->kind != DPRO_KIND_MEMORY || e->subkind != DPRO_MEM_ALLOC ||
            (e->value != DPRO_MEMSPACE_DEVICE && e->value != DPRO_MEMSPACE_ASYNC_POOL))
            continue;
        any = 1;
        other = (int64_t)e->bytes % seg != 0;
    }
    return any && !other;
}

/* Sets ph->first_step, step_start and step_bwd (memest.h) from a rank's first step st
 * when the backward thread launched before ph->iter_start and the forward thread issued a
 * collective before that launch; leaves ph as it was otherwise. Where the first marked
 * iteration is the job's first step itself (the backward thread's first launch lies in
 * it) and the allocations are a caching allocator's segments (segments_only:
 * profile_segments_only; PyTorch's, every step marked), the same: its segments are the
 * step's, and ph->iter_start moves to the next iteration's start, where the first step's
 * backward segments end (a trace whose first step is unmarked gives the same estimate).
 * The step starts at the
 * forward thread's last collective before the backward's first launch (DDP's broadcast),
 * or, when all-gathers lead to that launch (FSDP gathers each block's parameters in the
 * forward), at the first of them. The forward thread is the one of the two that launched
 * first (the main thread builds the model): the phases take theirs from the first
 * replayed iteration, whose boundary may lie on the backward thread, and are swapped
 * then. */
static void
profile_first_step(const profile_rank_steps *st, int segments_only, memest_phases *ph)
{
    int64_t first[2] = {INT64_MAX, INT64_MAX}; /* first launch of fwd_thread, bwd_thread */
    int64_t start = INT64_MIN;
    uint64_t fwd = ph->fwd_thread, bwd = ph->bwd_thread;
    if (bwd != fwd) {
        first[0] = first_launch(st, fwd);
        first[1] = first_launch(st, bwd);
    }
    if (first[1] < first[0]) {
        fwd = ph->bwd_thread;
        bwd = ph->fwd_thread;
        first[1] = first[0];
    }
    /* the last collective before the backward; when the forward's all-gathers (FSDP's)
     * lead to it, the first of them after the last other collective */
    int64_t other = INT64_MIN, gather = INT64_MAX;
    for (size_t i = 0; i < st->n_coll; i++) {
        const profile_coll *e = &st->coll[i];
        if (e->thread != fwd || e->t_ns >= first[1])
            continue;
        if (e->t_ns > start)
            start = e->t_ns;
        if (e->op != DPRO_COLL_ALLGATHER && e->t_ns > other)
            other = e->t_ns;
    }
    for (size_t i = 0; i < st->n_coll && start > other; i++) {
        const profile_coll *e = &st->coll[i];
        if (e->thread == fwd && e->t_ns < first[1] && e->t_ns > other && e->t_ns < gather)
            gather = e->t_ns;
    }
    if (start > other)
        start = gather;
    int marked = first[1] >= ph->iter_start && first[1] < ph->iter_end &&
                 ph->iter_end < INT64_MAX && start > INT64_MIN && segments_only;
    if ((first[1] < ph->iter_start || marked) && start > INT64_MIN) {
        if (marked)
            ph->iter_start = ph->iter_end;
        ph->first_step = 1;
        ph->fwd_thread = fwd;
        ph->bwd_thread = bwd;
        ph->step_start = start;
        ph->step_bwd = first[1];
    }
}

/* Takes jr's first launch of each thread and its collectives before the last of those
 * launches (all that profile_first_step reads) into st, replacing what st held. Returns
 * 0, or -1 when out of memory. */
static int
take_steps(const job_rank *jr, int64_t shift_ns, profile_rank_steps *st)
{
    size_t n_coll = 0;
    int32_t cap_first = 0;
    free(st->first);
    free(st->coll);
    memset(st, 0, sizeof *st);
    for (size_t i = 0; i < jr->n_events; i++)
        n_coll += jr->events[i].kind == DPRO_KIND_COLLECTIVE;
    st->coll = malloc(sizeof *st->coll * (n_coll + 1));
    if (!st->coll)
        return -1;
    for (size_t i = 0; i < jr->n_events; i++) {
        const job_event *e = &jr->events[i];
        int64_t t = (int64_t)e->start_ns + shift_ns;
        if (e->kind == DPRO_KIND_COLLECTIVE)
            st->coll[st->n_coll++] = (profile_coll){e->thread, t, e->subkind};
        if ((e->kind != DPRO_KIND_API || e->correlation == 0) && e->kind != DPRO_KIND_COLLECTIVE)
            continue;
        int32_t k = 0;
        while (k < st->n_first && st->first[k].thread != e->thread)
            k++;
        if (k == st->n_first) {
            if (k == cap_first) {
                cap_first = cap_first ? 2 * cap_first : 8;
                profile_thread_first *f = realloc(st->first, sizeof *f * (size_t)cap_first);
                if (!f)
                    return -1;
                st->first = f;
            }
            st->first[st->n_first++] = (profile_thread_first){e->thread, INT64_MAX};
        }
        if (t < st->first[k].t_ns)
            st->first[k].t_ns = t;
    }
    /* the collectives after every thread's first launch are never read: let them go */
    int64_t last_first = INT64_MIN;
    for (int32_t k = 0; k < st->n_first; k++)
        last_first = st->first[k].t_ns > last_first ? st->first[k].t_ns : last_first;
    size_t kept = 0;
    for (size_t i = 0; i < st->n_coll; i++)
        if (st->coll[i].t_ns < last_first)
            st->coll[kept++] = st->coll[i];
    st->n_coll = kept;
    profile_coll *c = realloc(st->coll, sizeof *c * (kept + 1));
    if (c)
        st->coll = c;
    return 0;
}

/* Appends jr's kernel executions with launch dims to t->samples. Returns 0, or -1 when
 * out of memory. */
static int
take_samples(const job_rank *jr, int32_t r, int64_t shift_ns, profile_take *t)
{
    size_t n = 0;
    for (size_t i = 0; i < jr->n_events; i++)
        n += jr->events[i].kind == DPRO_KIND_KERNEL;
    if (t->n_samples + n > t->cap_samples) {
        size_t cap = t->cap_samples ? t->cap_samples : 1024;
        while (cap < t->n_samples + n)
            cap *= 2;
        workload_kernel_sample *s = realloc(t->samples, cap * sizeof *s);
        if (!s)
            return -1;
        t->samples = s;
        t->cap_samples = cap;
    }
    for (size_t i = 0; i < jr->n_events; i++) {
        const job_event *e = &jr->events[i];
        double threads =
            (double)e->grid[0] * e->grid[1] * e->grid[2] * e->block[0] * e->block[1] * e->block[2];
        if (e->kind != DPRO_KIND_KERNEL || threads <= 0 || e->end_ns < e->start_ns)
            continue;
        workload_kernel_sample *s = &t->samples[t->n_samples++];
        /* zeroed: the padding too, the samples being broadcast as bytes (search_mpi.c) */
        memset(s, 0, sizeof *s);
        s->key = (uint64_t)(uint32_t)r << 32 | e->name;
        s->threads = threads;
        s->dur_ns = (int64_t)(e->end_ns - e->start_ns);
        s->rank = r;
        s->t_ns = (int64_t)e->start_ns + shift_ns;
        s->grid_x = e->grid[0];
        s->stream = e->stream;
        s->event = i;
    }
    return 0;
}

int
profile_take_rank(void *ctx, const job_rank *jr, int32_t rank, int64_t shift_ns)
{
    profile_take *t = ctx;
    int rc = rank >= 0 ? 0 : -1;
    if (rc == 0 && !t->ev)
        rc = (t->ev = framework_evidence_new()) ? 0 : -1;
    if (rc == 0 && rank >= t->n_ranks) {
        profile_rank_steps *st = realloc(t->steps, sizeof *st * ((size_t)rank + 1));
        rc = st ? 0 : -1;
        if (st) {
            memset(st + t->n_ranks, 0, sizeof *st * (size_t)(rank + 1 - t->n_ranks));
            t->steps = st;
            t->n_ranks = rank + 1;
        }
    }
    if (rc == 0)
        rc = take_samples(jr, rank, shift_ns, t);
    if (rc == 0)
        rc = take_steps(jr, shift_ns, &t->steps[rank]);
    if (rc == 0)
        rc = framework_detect_rank(t->ev, jr);
    return rc;
}

void
profile_take_free(profile_take *t)
{
    for (int32_t r = 0; t->steps && r < t->n_ranks; r++) {
        free(t->steps[r].first);
        free(t->steps[r].coll);
    }
    free(t->steps);
    free(t->samples);
    free(t->ev);
    memset(t, 0, sizeof *t);
}

/* Memory estimate of the rank with the largest measured peak; *mem_rank receives it.
 * Returns 1 when one was built, 0 when no rank has allocation events, -1 when out of
 * memory. */
int
profile_estimate_memory(const replay *rp, const profile_take *tk, memest *best, int32_t *mem_rank)
{
    memset(best, 0, sizeof *best);
    *mem_rank = -1;
    for (int32_t r = 0; r < rp->job.n_ranks; r++) {
        const job_rank *jr = &rp->job.ranks[r];
        if (!jr->reader)
            continue;
        memest_phases ph;
        int64_t off = rp->align.offset_ns && r < rp->align.n_ranks ? rp->align.offset_ns[r] : 0;
        int64_t t0, t1;
        profile_first_iteration_window(jr, off, rp->time_origin, &t0, &t1);
        if (workload_memory_phases(&rp->graph, r, t0, t1, &ph) != 0)
            continue;
        if (tk->steps && r < tk->n_ranks)
            profile_first_step(&tk->steps[r], profile_segments_only(jr), &ph);
        size_t n = 0;
        for (size_t i = 0; i < jr->n_events; i++)
            n += jr->events[i].kind == DPRO_KIND_MEMORY;
        if (n == 0)
            continue;
        memest_event *ev = malloc(n * sizeof *ev);
        if (!ev)
            return -1;
        size_t k = 0;
        for (size_t i = 0; i < jr->n_events; i++) {
            const job_event *e = &jr->events[i];
            if (e->kind != DPRO_KIND_MEMORY ||
                (e->value != DPRO_MEMSPACE_DEVICE && e->value != DPRO_MEMSPACE_ASYNC_POOL))
                continue;
            ev[k].t_ns = (int64_t)e->start_ns + off - rp->time_origin;
            ev[k].op = (int)e->subkind;
            ev[k].bytes = (int64_t)e->bytes;
            ev[k].address = e->address;
            ev[k].thread = e->thread;
            k++;
        }
        memest m;
        int rc = memest_build(ev, k, &ph, &m);
        free(ev);
        if (rc != 0)
            return -1;
        pr_dbg("rank %d: %zu allocation events, first iteration [%lld, %lld), backward "
               "[%lld, %lld]: peak %lld, static %lld, optimizer %lld, other %lld, %d activations%s "
               "(workspace %lld)",
               r, k, (long long)ph.iter_start, (long long)ph.iter_end, (long long)ph.bwd_start,
               (long long)ph.bwd_end, (long long)m.peak_bytes, (long long)m.static_bytes,
               (long long)m.optimizer_bytes, (long long)m.other_bytes, m.n_layers,
               m.segments ? " of the first step" : "", (long long)m.workspace_bytes);
        if (m.peak_bytes > best->peak_bytes) {
            memest_free(best);
            *best = m;
            *mem_rank = r;
        } else {
            memest_free(&m);
        }
    }
    return *mem_rank >= 0;
}

/* Rank r's compared iterations in res into t (n of them): 0, or -1 when one of them is not
 * covered. */
static int
rank_iterations(const workload *w, sim_timeline tl, int32_t r, int64_t *t)
{
    int rc = 0;
    for (int32_t i = w->iter_first; i <= w->iter_last && rc == 0; i++) {
        int64_t t0, t1;
        rc = sim_iteration_window(w->g, tl, r, i, i, &t0, &t1);
        t[i - w->iter_first] = t1 - t0;
    }
    return rc;
}

/* Marks in aside and out the iterations of t (n, rank r's) over the rule's bar (profile.h),
 * keeping for each the rank most over its median (by the share of the median). scratch
 * holds n values. */
static void
mark_rank_outliers(const int64_t *t, int32_t n, int32_t r, int64_t *scratch, uint8_t *aside,
                   profile_outlier *out)
{
    memcpy(scratch, t, sizeof *t * (size_t)n);
    double m = sim_median_i64(scratch, n);
    for (int32_t i = 0; i < n; i++)
        scratch[i] = (int64_t)llround(fabs((double)t[i] - m));
    double mad = sim_median_i64(scratch, n);
    double bar = m + fmax(PROFILE_OUTLIER_MADS * 1.4826 * mad, PROFILE_OUTLIER_SHARE * m);
    for (int32_t i = 0; i < n && m > 0; i++) {
        if ((double)t[i] <= bar)
            continue;
        if (!aside[i] ||
            ((double)t[i] - m) / m > (out[i].iter_ns - out[i].median_ns) / out[i].median_ns) {
            out[i].iteration = i;
            out[i].rank = r;
            out[i].iter_ns = (double)t[i];
            out[i].median_ns = m;
            out[i].mad_ns = mad;
        }
        aside[i] = 1;
    }
}

/* Each rank's waits at collectives for the others in each compared iteration, in one
 * pass over the groups' members (a member's wait: the group's last arrival less its own,
 * counted in the iteration of its rank it arrived in): n values a rank, rank r's from
 * r * n. Returns the array (free it), NULL when out of memory. */
static int64_t *
rank_collective_waits(const workload *w, sim_timeline tl)
{
    const dfg *g = w->g;
    int32_t n = w->iter_last - w->iter_first + 1;
    size_t cells = (size_t)g->n_ranks * (size_t)n;
    int64_t *waits = calloc(cells > 0 ? cells : 1, sizeof *waits);
    int64_t *t0 = malloc(sizeof *t0 * (cells > 0 ? cells : 1));
    int64_t *t1 = malloc(sizeof *t1 * (cells > 0 ? cells : 1));
    for (int32_t r = 0; waits && t0 && t1 && r < g->n_ranks; r++)
        for (int32_t i = 0; i < n; i++) {
            size_t c = (size_t)r * (size_t)n + (size_t)i;
            if (workload_rank_weight(w, r) <= 0 ||
                sim_iteration_window(g, tl, r, w->iter_first + i, w->iter_first + i, &t0[c],
                                     &t1[c]) != 0)
                t0[c] = t1[c] = -1;
        }
    for (int32_t q = 0; waits && t0 && t1 && q < g->n_groups; q++)
        for (int32_t p = g->grp_first[q]; p >= 0; p = dfg_next_in_group(g, p)) {
            int64_t at = tl.start[p], wait = tl.grp_arrival[q] - at;
            int32_t r = dfg_rank(g, p);
            if (r < 0 || r >= g->n_ranks || (g->flags[p] & DFG_F_REMOVED) || at < 0 || wait <= 0)
                continue;
            for (int32_t i = 0; i < n; i++) {
                size_t c = (size_t)r * (size_t)n + (size_t)i;
                if (at >= t0[c] && at < t1[c])
                    waits[c] += wait;
            }
        }
    if (!t0 || !t1) {
        free(waits);
        waits = NULL;
    }
    free(t0);
    free(t1);
    return waits;
}

/* Names in out (the outliers aside marks; t and scratch hold n values, own 2 n) the rank
 * that stalled in each: the one whose own time (its iteration less its waits for the
 * others: rank_collective_waits) is the most over its median own time, by the share of that median
 * (every rank's iteration is long when one stalls: the others wait for it at the next collective),
 * with that rank's iteration time, median and MAD. */
static void
name_stalled_ranks(const workload *w, sim_timeline tl, const uint8_t *aside, int64_t *t,
                   int64_t *scratch, int64_t *own, profile_outlier *out)
{
    int32_t n = w->iter_last - w->iter_first + 1;
    int64_t *sorted = own + n;
    double *best = malloc(sizeof *best * (size_t)n);
    int64_t *waits = best ? rank_collective_waits(w, tl) : NULL;
    for (int32_t i = 0; best && i < n; i++)
        best[i] = -INFINITY;
    for (int32_t r = 0; best && waits && r < w->g->n_ranks; r++) {
        if (workload_rank_weight(w, r) <= 0 || rank_iterations(w, tl, r, t) != 0)
            continue;
        for (int32_t i = 0; i < n; i++) /* the iteration less its waits for the others */
            own[i] = t[i] - waits[(size_t)r * (size_t)n + (size_t)i];
        memcpy(sorted, own, sizeof *own * (size_t)n);
        double m_own = sim_median_i64(sorted, n);
        memcpy(scratch, t, sizeof *t * (size_t)n);
        double m = sim_median_i64(scratch, n);
        for (int32_t i = 0; i < n; i++)
            scratch[i] = (int64_t)llround(fabs((double)t[i] - m));
        double mad = sim_median_i64(scratch, n);
        for (int32_t i = 0; i < n; i++) {
            double over = m_own > 0 ? ((double)own[i] - m_own) / m_own : 0;
            if (!aside[i] || over <= best[i])
                continue;
            best[i] = over;
            out[i] = (profile_outlier){i, r, (double)t[i], m, mad};
        }
    }
    free(waits);
    free(best); /* out of memory: the rank most over its median stays named */
}

int32_t
profile_outlier_iterations(const workload *w, const sim_result *res, uint8_t *aside,
                           profile_outlier *out)
{
    int32_t n = w->iter_last - w->iter_first + 1, k = 0;
    sim_timeline tl = sim_timeline_of(res);
    int64_t *t = NULL, *scratch = NULL, *own = NULL;
    if (n > 0)
        memset(aside, 0, (size_t)n);
    if (n >= PROFILE_OUTLIER_MIN_ITERS) {
        t = malloc(sizeof *t * (size_t)n);
        scratch = malloc(sizeof *scratch * (size_t)n);
        if (!t || !scratch)
            k = -1;
    }
    for (int32_t r = 0; t && scratch && r < w->g->n_ranks; r++)
        if (workload_rank_weight(w, r) > 0 && rank_iterations(w, tl, r, t) == 0)
            mark_rank_outliers(t, n, r, scratch, aside, out);
    if (t && scratch && memchr(aside, 1, (size_t)n) &&
        (own = malloc(sizeof *own * 2 * (size_t)n)) != NULL)
        name_stalled_ranks(w, tl, aside, t, scratch, own, out);
    for (int32_t i = 0; k >= 0 && t && i < n; i++)
        if (aside[i])
            out[k++] = out[i]; /* in order: k <= i */
    if (k > PROFILE_OUTLIER_MAX_SHARE * n) {
        memset(aside, 0, (size_t)n); /* not rare: the steady state has them */
        k = 0;
    }
    free(t);
    free(scratch);
    free(own);
    return k;
}
