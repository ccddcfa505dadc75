/* iter.c: iteration detection (see iter.h). */
#include "iter.h"
#include "order.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Case-insensitive prefix test. */
static int
has_prefix(const char *s, const char *p)
{
    return strncasecmp(s, p, strlen(p)) == 0;
}

/* True if s is followed by optional separators then a digit, or ends. */
static int
numbered(const char *s)
{
    while (*s == ' ' || *s == '_' || *s == '#' || *s == '-' || *s == ':' || *s == '=')
        s++;
    return *s == 0 || isdigit((unsigned char)*s);
}

int
iter_text_is_iteration(const char *text, int *key)
{
    static const struct {
        const char *prefix;
        int key;
    } pats[] = {
        {"ProfilerStep", 1},  {"iteration", 2}, {"iter", 3},       {"train_step", 4},
        {"training_step", 4}, {"step", 5},      {"train_iter", 6}, {"train iteration", 6},
    };
    if (!text)
        return 0;
    while (*text == ' ')
        text++;
    for (size_t i = 0; i < sizeof pats / sizeof pats[0]; i++) {
        if (has_prefix(text, pats[i].prefix) && numbered(text + strlen(pats[i].prefix))) {
            if (key)
                *key = pats[i].key;
            return 1;
        }
    }
    return 0;
}

/* Fraction of positions i in [from, n - p) with names[i] == names[i + p], sampled with a
 * stride so that at most about 4096 positions are compared. */
static double
match_fraction(const uint32_t *names, size_t n, size_t p, size_t from)
{
    size_t same = 0, tot = 0;
    size_t span = n - p - from;
    size_t stride = span > 4096 ? span / 4096 : 1;
    for (size_t i = from; i + p < n; i += stride) {
        tot++;
        same += names[i] == names[i + p];
    }
    return tot ? (double)same / (double)tot : 0;
}

/* Smallest exact period of names[from..n) that repeats at least twice, by comparing
 * polynomial prefix hashes (O(1) per candidate); 0 if none. */
static size_t
exact_period(const uint32_t *names, size_t n, size_t from, const uint64_t *h, const uint64_t *pw)
{
    size_t len = n - from;
    for (size_t p = 1; p * 2 <= len; p++) {
        if (names[n - 1] != names[n - 1 - p])
            continue;
        /* hash(from, n - p) == hash(from + p, n) */
        uint64_t a = h[n - p] - h[from] * pw[n - p - from];
        uint64_t b = h[n] - h[from + p] * pw[n - p - from];
        if (a == b)
            return p;
    }
    return 0;
}

/* Length of the run of positions i >= from with names[i] == names[i + p] that starts at
 * from. */
static size_t
match_run(const uint32_t *names, size_t n, size_t p, size_t from)
{
    size_t i = from;
    while (i + p < n && names[i] == names[i + p])
        i++;
    return i - from;
}

/* The exact period of the steady part: the smallest of names[from..n), from a quarter
 * then half-way in (the start being warm-up), stretched back as far as it holds. Returns
 * the period (0 if none) and stores where the periodic stretch starts in *start. */
static size_t
exact_tail_period(const uint32_t *names, size_t n, size_t *start)
{
    uint64_t *h = malloc((n + 1) * sizeof *h);
    uint64_t *pw = malloc((n + 1) * sizeof *pw);
    size_t p = 0;
    if (h && pw) {
        h[0] = 0;
        pw[0] = 1;
        for (size_t i = 0; i < n; i++) {
            h[i + 1] = h[i] * 1000003ULL + names[i] * 0x9e3779b97f4a7c15ULL + 1;
            pw[i + 1] = pw[i] * 1000003ULL;
        }
        p = exact_period(names, n, n / 4, h, pw);
        if (p == 0)
            p = exact_period(names, n, n / 2, h, pw);
    }
    free(h);
    free(pw);
    size_t s = n;
    if (p > 0) {
        s = n - p;
        while (s > 0 && names[s - 1] == names[s - 1 + p])
            s--;
    }
    *start = s;
    return p;
}

typedef struct {
    uint32_t name;
    uint32_t pos;
} name_pos;

static int
cmp_name_pos(const void *pa, const void *pb)
{
    const name_pos *a = pa, *b = pb;
    if (a->name != b->name)
        return a->name < b->name ? -1 : 1;
    return (a->pos > b->pos) - (a->pos < b->pos);
}

typedef struct {
    uint64_t score; /* the distance times its occurrences: how much of the sequence it spans */
    size_t dist;
} shift_cand;

static int
cmp_size(const void *pa, const void *pb)
{
    size_t a = *(const size_t *)pa, b = *(const size_t *)pb;
    return (a > b) - (a < b);
}

static int
cmp_cand_desc(const void *pa, const void *pb)
{
    const shift_cand *a = pa, *b = pb;
    if (a->score != b->score)
        return a->score < b->score ? 1 : -1;
    return (a->dist > b->dist) - (a->dist < b->dist);
}

/* Most candidate shifts tried by longest_periodic_stretch. */
#define ITER_MAX_CANDIDATES 64

/* The longest stretch of names that repeats exactly with some period at least twice,
 * wherever it lies (a job's first step launches other kernels than the steady ones, and
 * its end other ones again: a barrier, a final gather). The candidate periods are the
 * distances between consecutive occurrences of one name, the ITER_MAX_CANDIDATES that
 * cover most of the sequence (distance times occurrences); each is scanned once. The
 * longest stretch wins, among equal ones the shortest period (a multiple of the period
 * covers as much). Stores the period and the stretch [*start, *end) and returns 0; -1
 * if no stretch repeats twice, or out of memory. */
static int
longest_periodic_stretch(const uint32_t *names, size_t n, size_t *period, size_t *start,
                         size_t *end)
{
    int rc = -1;
    name_pos *np = malloc(n * sizeof *np);
    size_t *d = malloc(n * sizeof *d);
    shift_cand *c = malloc(n * sizeof *c);
    if (!np || !d || !c || n > UINT32_MAX)
        goto out;
    for (size_t i = 0; i < n; i++)
        np[i] = (name_pos){names[i], (uint32_t)i};
    qsort(np, n, sizeof *np, cmp_name_pos);
    size_t nd = 0;
    for (size_t i = 1; i < n; i++)
        if (np[i].name == np[i - 1].name && (size_t)(np[i].pos - np[i - 1].pos) * 2 <= n)
            d[nd++] = np[i].pos - np[i - 1].pos;
    qsort(d, nd, sizeof *d, cmp_size);
    size_t nc = 0;
    for (size_t i = 0; i < nd;) {
        size_t j = i;
        while (j < nd && d[j] == d[i])
            j++;
        c[nc++] = (shift_cand){(uint64_t)(j - i) * d[i], d[i]};
        i = j;
    }
    qsort(c, nc, sizeof *c, cmp_cand_desc);
    size_t best_cover = 0;
    for (size_t k = 0; k < nc && k < ITER_MAX_CANDIDATES; k++) {
        size_t q = c[k].dist;
        for (size_t i = 0; i + q < n;) {
            size_t run = match_run(names, n, q, i);
            if (run >= q && (run + q > best_cover || (run + q == best_cover && q < *period))) {
                best_cover = run + q;
                *period = q;
                *start = i;
                *end = i + run + q;
            }
            i += run + 1;
        }
    }
    rc = best_cover > 0 ? 0 : -1;
out:
    free(np);
    free(d);
    free(c);
    return rc;
}

/* The best approximate period of the whole sequence: candidate periods are the distances
 * from the last element back to earlier occurrences of the same name, each tested on the
 * tail (skipping the start of the trace). Repeated layers make short shifts match almost
 * everywhere, so the best match wins and, among shifts matching about as well, the
 * shortest. Returns the period (0 if none matches at least 90 %) and stores its match. */
static size_t
approximate_period(const uint32_t *names, size_t n, double *match)
{
    uint32_t last = names[n - 1];
    double best = 0;
    size_t best_p = 0;
    size_t n_cand = 0;
    size_t *cand = malloc(n * sizeof *cand);
    double *cmatch = malloc(n * sizeof *cmatch);
    for (size_t pos = n - 1; cand && cmatch && pos-- > 0;) {
        if (names[pos] != last)
            continue;
        size_t q = n - 1 - pos;
        if (q * 2 > n)
            break;
        size_t from = n / 4;
        if (from + q >= n)
            from = 0;
        double f = match_fraction(names, n, q, from);
        cand[n_cand] = q;
        cmatch[n_cand++] = f;
        if (f > best) {
            best = f;
            best_p = q;
        }
    }
    for (size_t i = 0; i < n_cand; i++)
        if (cmatch[i] >= best - 0.02) {
            best_p = cand[i];
            break;
        }
    free(cand);
    free(cmatch);
    *match = best;
    return best >= 0.9 ? best_p : 0;
}

int
iter_find_period(const uint32_t *names, size_t n, size_t *period, size_t *start, size_t *end,
                 double *match)
{
    size_t p = 0, s = 0, e = n;
    double m = 1.0;
    if (n >= 4)
        p = exact_tail_period(names, n, &s);
    if (n >= 4 && p == 0 &&
        (longest_periodic_stretch(names, n, &p, &s, &e) != 0 || (e - s) * 2 < n)) {
        p = 0;
        s = 0;
        e = n;
    }
    if (n >= 4 && p == 0)
        p = approximate_period(names, n, &m);
    int rc = p > 0 ? 0 : -1;
    if (rc == 0) {
        *period = p;
        if (start)
            *start = s;
        if (end)
            *end = e;
        if (match)
            *match = m;
    }
    return rc;
}

int
iter_period_rotation(const char *const *a, const char *const *b, size_t p, size_t *rot)
{
    int rc = -1;
    for (size_t o = 0; o < p && rc != 0; o++) {
        size_t j = 0;
        while (j < p) {
            const char *x = a[j], *y = b[(j + o) % p];
            if (x != y && (!x || !y || strcmp(x, y) != 0))
                break;
            j++;
        }
        if (j == p) {
            *rot = o;
            rc = 0;
        }
    }
    return rc;
}

size_t
iter_mark_warmup(const int64_t *starts, size_t n, double tolerance, uint8_t *warm_up)
{
    for (size_t i = 0; i < n; i++)
        warm_up[i] = 0;
    if (n < 3)
        return 0;
    size_t nd = n - 1;
    int64_t *d = malloc(nd * sizeof *d);
    if (!d)
        return 0;
    /* median of the second half: the steady state */
    size_t h = nd / 2, k = 0;
    for (size_t i = h; i < nd; i++)
        d[k++] = starts[i + 1] - starts[i];
    qsort(d, k, sizeof *d, order_i64);
    double med = (double)d[k / 2];
    free(d);
    size_t w = 0;
    for (size_t i = 0; i + 1 < nd; i++) { /* keep at least one steady iteration */
        double di = (double)(starts[i + 1] - starts[i]);
        if (di > med * (1.0 + tolerance)) {
            warm_up[i] = 1;
            w++;
        } else {
            break;
        }
    }
    return w;
}

int
iter_common_steps(int64_t *const *steps, const int32_t *n, int32_t n_ranks, int64_t *lo,
                  int64_t *hi)
{
    int any = 0;
    int64_t a = 0, b = 0;
    for (int32_t r = 0; r < n_ranks; r++) {
        if (!steps[r] || n[r] < 2)
            continue;
        int64_t first = steps[r][0] + 1, last = steps[r][n[r] - 1];
        if (!any || first > a)
            a = first;
        if (!any || last < b)
            b = last;
        any = 1;
    }
    int rc = any && a <= b ? 0 : -1;
    if (rc == 0) {
        *lo = a;
        *hi = b;
    }
    return rc;
}

size_t
iter_keep_steps(size_t *event_index, int64_t *step, size_t n, int64_t lo, int64_t hi)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (step[i] < lo - 1 || step[i] > hi)
            continue;
        event_index[k] = event_index[i];
        step[k] = step[i];
        k++;
    }
    return k;
}
