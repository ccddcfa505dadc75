/* period.c: iterations from the kernel period (see period.h). */
#include "period.h"

#include <stdlib.h>
#include <string.h>

#include "hmap.h"
#include "iter.h"
#include "order.h"

void
period_scan_free(period_scan *ps)
{
    free(ps->names);
    free(ps->end);
    free(ps->dend);
    free(ps->far);
    free(ps->idx);
    free(ps->idle);
    memset(ps, 0, sizeof *ps);
}

/* The busiest stream of the n kernels k into *stream and its kernel count, 0 when out of
 * memory (or no kernel). */
static size_t
busiest_stream(const period_kernel *k, size_t n, uint64_t *stream)
{
    hmap cnt;
    if (hmap_init(&cnt, 16) != 0)
        return 0;
    int32_t best = 0;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        int32_t c = hmap_get(&cnt, k[i].stream, 0) + 1;
        rc = hmap_put(&cnt, k[i].stream, c);
        if (c > best) {
            best = c;
            *stream = k[i].stream;
        }
    }
    hmap_free(&cnt);
    return rc == 0 ? (size_t)best : 0;
}

/* Sets ps->idle[ph] to the device's idle time before the kernel at phase ph that every
 * repetition of the stretch shows (the least over them): the time in which no kernel of
 * any stream runs (the n kernels k, ordered by start). A wait of the busiest stream on
 * another stream's work (a backward waiting for its all-reduce) is not idle, and a host
 * stall in one step is not what every step shows: the step's boundary (the device idle
 * between the optimizer's last kernel and the next step's first) is. */
static void
sum_idle(const period_kernel *k, size_t n, period_scan *ps)
{
    size_t pos = 0;
    uint64_t busy_to = 0;
    for (size_t ph = 0; ph < ps->p; ph++)
        ps->idle[ph] = -1;
    for (size_t i = 0; i < n && pos < ps->hi; i++) {
        if (k[i].stream == ps->stream) {
            if (pos > ps->lo || (pos == ps->lo && pos > 0)) {
                int64_t gap = (int64_t)k[i].start_ns - (int64_t)busy_to;
                double g = gap > 0 ? (double)gap : 0, *x = &ps->idle[(pos - ps->lo) % ps->p];
                *x = *x < 0 || g < *x ? g : *x;
            }
            pos++;
        }
        if (k[i].end_ns > busy_to)
            busy_to = k[i].end_ns;
    }
    for (size_t ph = 0; ph < ps->p; ph++)
        ps->idle[ph] = ps->idle[ph] < 0 ? 0 : ps->idle[ph];
}

/* Order of two period_kernels by start, then stream (a stream's kernels start in launch
 * order, so each stream keeps its order). */
static int
order_start(const void *pa, const void *pb)
{
    const period_kernel *a = pa, *b = pb;
    int c = order_u64(&a->start_ns, &b->start_ns);
    return c != 0 ? c : order_u64(&a->stream, &b->stream);
}

/* sum_idle (the least idle time) over the kernels by start: k itself when trace order is that, else
 * a sorted copy. Returns 0 or -1 (out of memory). */
static int
sum_idle_ordered(const period_kernel *k, size_t n, period_scan *ps)
{
    size_t i = 1;
    while (i < n && k[i].start_ns >= k[i - 1].start_ns)
        i++;
    if (i >= n) {
        sum_idle(k, n, ps);
        return 0;
    }
    period_kernel *s = malloc(n * sizeof *s);
    if (!s)
        return -1;
    memcpy(s, k, n * sizeof *s);
    qsort(s, n, sizeof *s, order_start);
    sum_idle(s, n, ps);
    free(s);
    return 0;
}

int
period_scan_kernels(const period_kernel *k, size_t n, const size_t *idx, period_scan *ps)
{
    memset(ps, 0, sizeof *ps);
    size_t best = n > 0 ? busiest_stream(k, n, &ps->stream) : 0;
    int rc = n > 0 && best == 0 ? -1 : 0;
    if (rc != 0 || best < 4)
        return rc;
    ps->names = malloc(best * sizeof *ps->names);
    ps->end = idx ? NULL : malloc(best * sizeof *ps->end);
    ps->idx = idx ? malloc(best * sizeof *ps->idx) : NULL;
    if (!ps->names || (!idx && !ps->end) || (idx && !ps->idx))
        rc = -1;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (k[i].stream != ps->stream)
            continue;
        ps->names[ps->n] = k[i].name;
        if (idx)
            ps->idx[ps->n] = idx[i];
        else
            ps->end[ps->n] = k[i].end_ns;
        ps->n++;
    }
    if (rc == 0 && iter_find_period(ps->names, ps->n, &ps->p, &ps->lo, &ps->hi, NULL) != 0)
        ps->p = 0;
    if (rc == 0 && ps->p > 0 && !(ps->idle = calloc(ps->p, sizeof *ps->idle)))
        rc = -1;
    if (rc == 0 && ps->p > 0)
        rc = sum_idle_ordered(k, n, ps);
    if (rc != 0)
        period_scan_free(ps);
    return rc;
}

int
period_scan_rank(const job_rank *jr, period_scan *ps)
{
    size_t n = 0;
    for (size_t i = 0; i < jr->n_events; i++)
        n += jr->events[i].kind == DPRO_KIND_KERNEL;
    period_kernel *k = malloc((n > 0 ? n : 1) * sizeof *k);
    size_t *idx = malloc((n > 0 ? n : 1) * sizeof *idx);
    int rc = k && idx ? 0 : -1;
    size_t m = 0;
    for (size_t i = 0; rc == 0 && i < jr->n_events; i++) {
        const job_event *e = &jr->events[i];
        if (e->kind != DPRO_KIND_KERNEL)
            continue;
        k[m] = (period_kernel){e->start_ns, e->end_ns, e->stream, e->name};
        idx[m++] = i;
    }
    if (rc == 0)
        rc = period_scan_kernels(k, n, idx, ps);
    else
        memset(ps, 0, sizeof *ps);
    free(k);
    free(idx);
    return rc;
}

/* Shrinks *a (elements of size sz) to its elements [from, from + m). */
static void
keep_range(void **a, size_t sz, size_t from, size_t m)
{
    if (!*a || m == 0)
        return;
    memmove(*a, (char *)*a + from * sz, m * sz);
    void *x = realloc(*a, m * sz);
    if (x)
        *a = x;
}

/* Replaces ps->end (positions from ps->base, m of them) by their differences (dend) and
 * the ends that differ by none that fits (far). Returns 0 or -1 (out of memory). */
static int
delta_ends(period_scan *ps, size_t m)
{
    size_t nf = 0;
    uint64_t prev = 0;
    for (size_t j = 0; j < m; prev = ps->end[j++])
        nf += ps->end[j] < prev || ps->end[j] - prev >= UINT32_MAX;
    ps->dend = malloc((m > 0 ? m : 1) * sizeof *ps->dend);
    ps->far = malloc((nf > 0 ? nf : 1) * sizeof *ps->far);
    int rc = ps->dend && ps->far ? 0 : -1;
    prev = 0;
    nf = 0;
    for (size_t j = 0; rc == 0 && j < m; prev = ps->end[j++]) {
        int fits = ps->end[j] >= prev && ps->end[j] - prev < UINT32_MAX;
        ps->dend[j] = fits ? (uint32_t)(ps->end[j] - prev) : UINT32_MAX;
        if (!fits)
            ps->far[nf++] = ps->end[j];
    }
    if (rc == 0) {
        free(ps->end);
        ps->end = NULL;
    }
    return rc;
}

int
period_scan_trim(period_scan *ps)
{
    if (ps->p == 0 || ps->trimmed)
        return 0;
    size_t from = ps->lo > 0 ? ps->lo - 1 : 0, m = ps->hi - from;
    keep_range((void **)&ps->names, sizeof *ps->names, ps->lo, ps->p);
    keep_range((void **)&ps->end, sizeof *ps->end, from, m);
    keep_range((void **)&ps->idx, sizeof *ps->idx, from, m);
    ps->nbase = ps->lo;
    ps->base = from;
    ps->trimmed = 1;
    return ps->end ? delta_ends(ps, m) : 0;
}

size_t
period_own_phase(const period_scan *ps)
{
    size_t best = 0;
    for (size_t ph = 1; ph < ps->p; ph++)
        if (ps->idle[ph] > ps->idle[best])
            best = ph;
    return best;
}

void
period_ends(const period_scan *ps, const size_t *pos, size_t m, uint64_t *out)
{
    uint64_t end = 0;
    size_t k = 0, nf = 0;
    for (size_t j = 0; k < m && ps->base + j < ps->hi; j++) {
        end = ps->dend[j] == UINT32_MAX ? ps->far[nf++] : end + ps->dend[j];
        while (k < m && pos[k] == ps->base + j)
            out[k++] = end;
    }
}

int
period_cut(const period_scan *ps, size_t phase, replay_rank_iters *it)
{
    free(it->event_index);
    it->n = 0;
    size_t m = 0;
    for (size_t k = ps->lo + phase; k <= ps->hi; k += ps->p)
        m += k > 0;
    it->event_index = malloc((m > 0 ? m : 1) * sizeof *it->event_index);
    for (size_t k = ps->lo + phase; it->event_index && k <= ps->hi; k += ps->p)
        if (k > 0)
            it->event_index[it->n++] = ps->idx ? ps->idx[k - 1 - ps->base] : k - 1;
    it->method = ITER_PERIOD;
    it->period = ps->p;
    return it->event_index ? 0 : -1;
}

int
period_detect(const job_rank *jr, replay_rank_iters *it)
{
    period_scan ps;
    int rc = period_scan_rank(jr, &ps);
    if (rc == 0 && ps.p > 0)
        rc = period_cut(&ps, period_own_phase(&ps), it);
    period_scan_free(&ps);
    return rc;
}

/* The kernel names of one period of ps (rank jr), as text: each trace interns its own
 * string ids, so ranks compare names by text. Returns the array (the caller frees it) or
 * NULL (out of memory). */
static const char **
period_word(const job_rank *jr, const period_scan *ps)
{
    const char **w = malloc((ps->p + 1) * sizeof *w);
    for (size_t k = 0; w && k < ps->p; k++) {
        uint32_t id = ps->names[ps->lo + k - ps->nbase];
        w[k] = ps->words ? ps->words[id] : dpro_reader_string(jr->reader, id);
    }
    return w;
}

/* The rotation of ps[r]'s period onto ps[ref]'s into *rot (-1: none). Returns 0 or -1
 * (out of memory). */
static int
rotation(const job *j, const period_scan *ps, int32_t ref, int32_t r, ptrdiff_t *rot)
{
    *rot = -1;
    if (ps[r].p != ps[ref].p)
        return 0;
    const char **wa = period_word(&j->ranks[ref], &ps[ref]);
    const char **wb = period_word(&j->ranks[r], &ps[r]);
    size_t o = 0;
    int rc = wa && wb ? 0 : -1;
    if (rc == 0 && iter_period_rotation(wa, wb, ps[r].p, &o) == 0)
        *rot = (ptrdiff_t)o;
    free(wa);
    free(wb);
    return rc;
}

int
period_match(const job *j, const period_scan *ps, replay_rank_iters *iters)
{
    int32_t n = j->n_ranks;
    ptrdiff_t *rot = calloc((size_t)n + 1, sizeof *rot);
    double *idle = NULL;
    int rc = rot ? 0 : -1;
    int32_t ref = -1, joined = 0;
    for (int32_t r = 0; r < n && rc == 0; r++) {
        rot[r] = -1;
        if (ps[r].p == 0)
            continue;
        if (ref < 0) {
            ref = r;
            idle = calloc(ps[r].p, sizeof *idle);
            rc = idle ? 0 : -1;
        }
        if (rc == 0)
            rc = rotation(j, ps, ref, r, &rot[r]);
        for (size_t k = 0; rc == 0 && rot[r] >= 0 && k < ps[r].p; k++)
            idle[k] += ps[r].idle[(k + (size_t)rot[r]) % ps[r].p];
        joined += rot[r] >= 0;
    }
    if (rc == 0 && joined > 1) {
        size_t ph = 0;
        for (size_t k = 1; k < ps[ref].p; k++)
            if (idle[k] > idle[ph])
                ph = k;
        for (int32_t r = 0; r < n && rc == 0; r++)
            if (rot[r] >= 0)
                rc = period_cut(&ps[r], (ph + (size_t)rot[r]) % ps[r].p, &iters[r]);
    }
    free(rot);
    free(idle);
    return rc;
}
