/* iter.c: iteration detection (see iter.h). */
#include "iter.h"

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

int
iter_find_period(const uint32_t *names, size_t n, size_t *period, double *match)
{
    if (n < 4)
        return -1;
    /* First an exact period of the steady part (skipping a quarter, then a half, of the
     * trace for warm-up). */
    uint64_t *h = malloc((n + 1) * sizeof *h);
    uint64_t *pw = malloc((n + 1) * sizeof *pw);
    if (!h || !pw) {
        free(h);
        free(pw);
        return -1;
    }
    h[0] = 0;
    pw[0] = 1;
    for (size_t i = 0; i < n; i++) {
        h[i + 1] = h[i] * 1000003ULL + names[i] * 0x9e3779b97f4a7c15ULL + 1;
        pw[i + 1] = pw[i] * 1000003ULL;
    }
    size_t p = exact_period(names, n, n / 4, h, pw);
    if (p == 0)
        p = exact_period(names, n, n / 2, h, pw);
    free(h);
    free(pw);
    if (p > 0) {
        *period = p;
        if (match)
            *match = 1.0;
        return 0;
    }
    /* Else the best approximate one. Candidate periods: distances from the last element
     * back to earlier occurrences of the same name, each tested on the tail (skipping
     * the start of the trace). Repeated layers make short shifts match almost
     * everywhere, so the best match wins and, among shifts matching about as well, the
     * shortest. */
    uint32_t last = names[n - 1];
    double best = 0;
    size_t best_p = 0;
    size_t n_cand = 0;
    size_t *cand = malloc(n * sizeof *cand);
    double *cmatch = malloc(n * sizeof *cmatch);
    if (!cand || !cmatch) {
        free(cand);
        free(cmatch);
        return -1;
    }
    for (size_t pos = n - 1; pos-- > 0;) {
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
    if (best < 0.9 || best_p == 0)
        return -1;
    *period = best_p;
    if (match)
        *match = best;
    return 0;
}

static int
cmp_i64(const void *pa, const void *pb)
{
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    return (a > b) - (a < b);
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
    qsort(d, k, sizeof *d, cmp_i64);
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
