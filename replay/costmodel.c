/* costmodel.c: alpha-beta collective model fitted on transfer times (see costmodel.h). */
#include "costmodel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dprotrace.h"
#include "ncclname.h"
#include "order.h"

double
costmodel_factor(int op, int32_t nranks)
{
    double n = nranks > 1 ? nranks : 1;
    switch (op) {
    case DPRO_COLL_ALLREDUCE:
        return nranks > 1 ? 2.0 * (n - 1) / n : 1.0;
    case DPRO_COLL_ALLGATHER:
    case DPRO_COLL_REDUCESCATTER:
    case DPRO_COLL_ALLTOALL:
        return nranks > 1 ? (n - 1) / n : 1.0;
    default:
        return 1.0;
    }
}

/* Least squares y = a + b x over the points with use[i]; returns 0 or -1 (degenerate x).
 */
static int
lsq(const double *x, const double *y, const uint8_t *use, size_t n, double *a, double *b)
{
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!use[i])
            continue;
        k++;
        sx += x[i];
        sy += y[i];
        sxx += x[i] * x[i];
        sxy += x[i] * y[i];
    }
    if (k == 0)
        return -1;
    double mx = sx / (double)k, my = sy / (double)k;
    double vx = sxx / (double)k - mx * mx;
    if (k < 2 || vx <= 1e-9 * (mx * mx + 1)) {
        /* one size: through the origin and the mean point */
        *a = 0;
        *b = mx > 0 ? my / mx : 0;
        if (mx <= 0) {
            *a = my;
            *b = 0;
        }
        return 0;
    }
    *b = (sxy / (double)k - mx * my) / vx;
    *a = my - *b * mx;
    if (*a < 0) { /* negative latency: refit through the origin */
        *a = 0;
        *b = sxx > 0 ? sxy / sxx : 0;
    }
    if (*b < 0) { /* no size dependence: a constant */
        *b = 0;
        *a = my;
    }
    return 0;
}

/* Fits one set of points into f. */
static int
fit_points(const double *x, const double *y, size_t n, costmodel_fit *f)
{
    memset(f, 0, sizeof *f);
    if (n == 0)
        return 0;
    uint8_t *use = malloc(n);
    double *res = malloc(n * sizeof *res);
    if (!use || !res) {
        free(use);
        free(res);
        return -1;
    }
    memset(use, 1, n);
    double a = 0, b = 0;
    lsq(x, y, use, n, &a, &b);
    for (int round = 0; round < 3 && n >= 5; round++) {
        for (size_t i = 0; i < n; i++)
            res[i] = fabs(y[i] - (a + b * x[i]));
        double *tmp = malloc(n * sizeof *tmp);
        if (tmp) {
            memcpy(tmp, res, n * sizeof *tmp);
            qsort(tmp, n, sizeof *tmp, order_double);
            double mad = tmp[n / 2];
            free(tmp);
            size_t kept = 0;
            for (size_t i = 0; i < n; i++) {
                use[i] = res[i] <= 3 * mad * 1.4826 + 1e-9 * fabs(y[i]) + 1.0;
                kept += use[i];
            }
            if (kept >= 2 && kept < n)
                lsq(x, y, use, n, &a, &b);
        }
    }

    f->fitted = 1;
    f->alpha_ns = a;
    f->beta_bpns = b > 0 ? 1.0 / b : 0;
    f->n_samples = (int32_t)n;
    double err = 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (y[i] <= 0)
            continue;
        err += fabs(a + b * x[i] - y[i]) / y[i];
        k++;
    }
    f->mape = k ? 100.0 * err / (double)k : 0;
    free(use);
    free(res);
    return 0;
}

/* ---- the piecewise model -------------------------------------------------------------- */

/* One message size: median x and time, its relative noise and sample count. */
#define COSTMODEL_MAX_POINTS 48 /* sizes the segmentation works on */

typedef struct pw_point {
    double x, y, noise;
    int32_t count;
    int algo; /* the algorithm its kernels named (the first sample's), 0 none */
} pw_point;

typedef struct xy {
    double x, y;
    int algo;
} xy;

static int
cmp_xy(const void *pa, const void *pb)
{
    const xy *a = pa, *b = pb;
    return (a->x > b->x) - (a->x < b->x);
}

/* Median of v[0..n) (sorted in place). */
static double
median_of(double *v, size_t n)
{
    qsort(v, n, sizeof *v, order_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Weighted least squares of the relative error, y = a + b x over p[i0..i1), with the
 * clamps of lsq (a, b >= 0). Returns the summed squared relative error. */
static double
seg_fit(const pw_point *p, int32_t i0, int32_t i1, double *a, double *b)
{
    double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (int32_t i = i0; i < i1; i++) {
        double w = 1.0 / (p[i].y * p[i].y);
        sw += w;
        sx += w * p[i].x;
        sy += w * p[i].y;
        sxx += w * p[i].x * p[i].x;
        sxy += w * p[i].x * p[i].y;
    }
    double mx = sx / sw, my = sy / sw, vx = sxx / sw - mx * mx;
    if (i1 - i0 < 2 || vx <= 1e-12 * (mx * mx + 1)) {
        *a = 0;
        *b = mx > 0 ? my / mx : 0;
        if (mx <= 0) {
            *a = my;
            *b = 0;
        }
    } else {
        *b = (sxy / sw - mx * my) / vx;
        *a = my - *b * mx;
        if (*a < 0) {
            *a = 0;
            *b = sxx > 0 ? sxy / sxx : 0;
        }
        if (*b < 0) {
            *b = 0;
            *a = my;
        }
    }
    double cost = 0;
    for (int32_t i = i0; i < i1; i++) {
        double r = (*a + *b * p[i].x - p[i].y) / p[i].y;
        cost += r * r;
    }
    return cost;
}

double
costmodel_piecewise_at(const costmodel_fit *f, double x)
{
    const costmodel_segment *s = f->seg;
    int32_t k = f->n_segs, j = 0;
    double t;
#define SEG_AT(g, xx) ((g)->alpha_ns + ((g)->beta_bpns > 0 ? (xx) / (g)->beta_bpns : 0))
    if (k <= 0) {
        t = 0;
    } else if (x <= s[0].hi) {
        t = SEG_AT(&s[0], x);
    } else if (x >= s[k - 1].lo) {
        t = SEG_AT(&s[k - 1], x);
    } else {
        while (j < k - 1 && x > s[j].hi)
            j++;
        /* s[j].hi >= x; x > s[j - 1].hi */
        if (x >= s[j].lo) {
            t = SEG_AT(&s[j], x);
        } else {
            double t0 = SEG_AT(&s[j - 1], s[j - 1].hi), t1 = SEG_AT(&s[j], s[j].lo);
            t = t0 + (t1 - t0) * (x - s[j - 1].hi) / (s[j].lo - s[j - 1].hi);
        }
    }
#undef SEG_AT
    return t > 0 ? t : 0;
}

/* The runs of one algorithm among the sizes p[0..m) into f->run; returns 1 when the
 * segmentation must keep to them (more than one run, each of at least minsz sizes, no
 * more than kmax), else 0. */
static int
algo_runs(const pw_point *p, int32_t m, int32_t minsz, int32_t kmax, costmodel_fit *f)
{
    int32_t nr = 0, shortest = m;
    f->n_runs = 0;
    for (int32_t i = 0; i < m;) {
        int32_t j = i;
        while (j < m && p[j].algo == p[i].algo)
            j++;
        if (p[i].algo && nr < COSTMODEL_MAX_RUNS)
            f->run[nr] = (costmodel_algo_run){p[i].x, p[j - 1].x, p[i].algo};
        nr++;
        shortest = j - i < shortest ? j - i : shortest;
        i = j;
    }
    /* unnamed sizes among named ones, or too many alternations: no runs */
    for (int32_t k = 0; k < nr && k < COSTMODEL_MAX_RUNS; k++)
        if (!f->run[k].algo)
            nr = COSTMODEL_MAX_RUNS + 1;
    f->n_runs = nr <= COSTMODEL_MAX_RUNS ? nr : 0;
    return f->n_runs > 1 && shortest >= minsz && f->n_runs <= kmax;
}

/* One point per message size of the sorted samples v[0..n) into p (sizes within 1 % of
 * each other are one size): median x and time, relative noise, count; tmp has room for n.
 * Returns the points written. */
static int32_t
size_points(const xy *v, size_t n, double *tmp, pw_point *p)
{
    int32_t m = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && v[j].x <= v[i].x * 1.01 + 1e-9)
            j++;
        size_t c = j - i;
        for (size_t k = 0; k < c; k++)
            tmp[k] = v[i + k].x;
        double mx = median_of(tmp, c);
        for (size_t k = 0; k < c; k++)
            tmp[k] = v[i + k].y;
        double my = median_of(tmp, c);
        for (size_t k = 0; k < c; k++)
            tmp[k] = fabs(v[i + k].y - my);
        double mad = median_of(tmp, c);
        if (my > 0)
            p[m++] = (pw_point){mx, my, 1.4826 * mad / my, (int32_t)c, v[i].algo};
        i = j;
    }
    return m;
}

/* Fits the piecewise model to the points (x[i], y[i]), i < n, into f (see costmodel.h);
 * algo[i] (NULL: none named) the algorithm of each. Returns 0 or -1 (out of memory). */
static int
fit_piecewise(const double *x, const double *y, const int *algo, size_t n, costmodel_fit *f)
{
    f->n_segs = 0;
    f->n_sizes = 0;
    if (n == 0)
        return 0;
    int rc = 0;
    xy *v = malloc(n * sizeof *v);
    double *tmp = malloc(n * sizeof *tmp);
    pw_point *p = malloc(n * sizeof *p);
    int32_t m = 0;
    double *cost = NULL;
    int32_t *from = NULL;
    if (!v || !tmp || !p) {
        rc = -1;
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        v[i] = (xy){x[i], y[i], algo ? algo[i] : 0};
    qsort(v, n, sizeof *v, cmp_xy);
    m = size_points(v, n, tmp, p);
    f->n_sizes = m;
    if (m == 0)
        goto out;
    if (m > COSTMODEL_MAX_POINTS) { /* the dynamic program is cubic: merge close sizes */
        double r = pow(p[m - 1].x / p[0].x, 1.0 / COSTMODEL_MAX_POINTS);
        int32_t q = 0;
        for (int32_t i = 0; i < m;) {
            int32_t j = i;
            double w = 0, sx = 0, sy = 0, sn = 0;
            while (j < m && p[j].x <= p[i].x * r) {
                w += p[j].count;
                sx += p[j].count * p[j].x;
                sy += p[j].count * p[j].y;
                sn += p[j].count * p[j].noise;
                j++;
            }
            p[q++] = (pw_point){sx / w, sy / w, sn / w, (int32_t)w, p[i].algo};
            i = j;
        }
        m = q;
    }
    /* the noise a size's median carries */
    for (int32_t i = 0; i < m; i++)
        tmp[i] = p[i].noise;
    double noise = median_of(tmp, (size_t)m);
    for (int32_t i = 0; i < m; i++)
        tmp[i] = p[i].count;
    double cnt = median_of(tmp, (size_t)m);
    f->noise_rel = noise;
    double target = 2 * noise / sqrt(cnt > 1 ? cnt : 1);
    if (target < 0.01)
        target = 0.01;
    int32_t kmax = m / 2 < COSTMODEL_MAX_SEGS ? m / 2 : COSTMODEL_MAX_SEGS;
    if (kmax < 1)
        kmax = 1;
    /* cost[k][j]: least cost of the first j sizes in k + 1 segments; from: the split */
    cost = malloc(sizeof *cost * (size_t)kmax * (size_t)(m + 1));
    from = malloc(sizeof *from * (size_t)kmax * (size_t)(m + 1));
    if (!cost || !from) {
        rc = -1;
        goto out;
    }
    int32_t minsz = m >= 2 ? 2 : 1;
    /* keep to the algorithms' runs: bnd[j], the algorithm changes among p[0..j] */
    int keep = algo_runs(p, m, minsz, kmax, f);
    int32_t *bnd = malloc(sizeof *bnd * (size_t)m);
    if (!bnd) {
        rc = -1;
        goto out;
    }
    for (int32_t i = 0; i < m; i++)
        bnd[i] = i ? bnd[i - 1] + (p[i].algo != p[i - 1].algo) : 0;
#define PURE(i0, i1) (!keep || bnd[(i1)-1] == bnd[i0])
    for (int32_t k = 0; k < kmax; k++)
        for (int32_t j = 0; j <= m; j++) {
            double best = INFINITY;
            int32_t bi = -1;
            double a, b;
            if (k == 0) {
                if (j >= minsz && PURE(0, j))
                    best = seg_fit(p, 0, j, &a, &b), bi = 0;
            } else {
                for (int32_t i = (k)*minsz; i + minsz <= j; i++) {
                    double prev = cost[(size_t)(k - 1) * (size_t)(m + 1) + (size_t)i];
                    if (!isfinite(prev) || !PURE(i, j))
                        continue;
                    double c = prev + seg_fit(p, i, j, &a, &b);
                    if (c < best) {
                        best = c;
                        bi = i;
                    }
                }
            }
            cost[(size_t)k * (size_t)(m + 1) + (size_t)j] = best;
            from[(size_t)k * (size_t)(m + 1) + (size_t)j] = bi;
        }
#undef PURE
    free(bnd);
    int32_t kk = 0;
    for (kk = 0; kk < kmax - 1; kk++) {
        double c = cost[(size_t)kk * (size_t)(m + 1) + (size_t)m];
        if (isfinite(c) && sqrt(c / m) <= target)
            break;
    }
    while (kk > 0 && !isfinite(cost[(size_t)kk * (size_t)(m + 1) + (size_t)m]))
        kk--;
    /* walk back the splits */
    int32_t j = m;
    for (int32_t k = kk; k >= 0; k--) {
        int32_t i = from[(size_t)k * (size_t)(m + 1) + (size_t)j];
        double a, b;
        seg_fit(p, i, j, &a, &b);
        f->seg[k] = (costmodel_segment){p[i].x, p[j - 1].x, a, b > 0 ? 1.0 / b : 0, j - i};
        j = i;
    }
    f->n_segs = kk + 1;
    double err = 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (y[i] <= 0)
            continue;
        err += fabs(costmodel_piecewise_at(f, x[i]) - y[i]) / y[i];
        k++;
    }
    f->pw_mape = k ? 100.0 * err / (double)k : 0;
out:
    free(v);
    free(tmp);
    free(p);
    free(cost);
    free(from);
    return rc;
}

int
costmodel_fit_samples(costmodel *m, const costmodel_sample *s, size_t n)
{
    memset(m, 0, sizeof *m);
    double *x = malloc((n ? n : 1) * sizeof *x);
    double *y = malloc((n ? n : 1) * sizeof *y);
    int *algo = malloc((n ? n : 1) * sizeof *algo);
    if (!x || !y || !algo) {
        free(x);
        free(y);
        free(algo);
        return -1;
    }
    int rc = 0;
    for (int op = 0; op < COSTMODEL_OPS && rc == 0; op++) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (s[i].op != op || s[i].transfer_ns <= 0)
                continue;
            x[k] = costmodel_factor(op, s[i].nranks) * (double)s[i].bytes;
            y[k] = (double)s[i].transfer_ns;
            algo[k] = s[i].algo;
            m->named += s[i].algo != 0;
            k++;
        }
        rc = fit_points(x, y, k, &m->op[op]);
        if (rc == 0)
            rc = fit_piecewise(x, y, algo, k, &m->op[op]);
    }
    if (rc == 0) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (s[i].transfer_ns <= 0)
                continue;
            x[k] = costmodel_factor(s[i].op, s[i].nranks) * (double)s[i].bytes;
            y[k] = (double)s[i].transfer_ns;
            k++;
        }
        rc = fit_points(x, y, k, &m->all);
    }
    m->piecewise = 1;
    free(x);
    free(y);
    free(algo);
    return rc;
}

int64_t
costmodel_predict(const costmodel *m, int op, int32_t nranks, int64_t bytes)
{
    const costmodel_fit *f =
        op >= 0 && op < COSTMODEL_OPS && m->op[op].fitted ? &m->op[op] : &m->all;
    if (!f->fitted)
        return 0;
    if (m->piecewise && f->n_segs > 0) {
        costmodel_regime r;
        double t = costmodel_regime_at(m, op, nranks, bytes, &r) == 1
                       ? r.ns
                       : costmodel_piecewise_at(f, costmodel_factor(op, nranks) * (double)bytes);
        return (int64_t)llround(t);
    }
    double t = f->alpha_ns;
    if (f->beta_bpns > 0)
        t += costmodel_factor(op, nranks) * (double)bytes / f->beta_bpns;
    return t > 0 ? (int64_t)llround(t) : 0;
}

/* Ring steps of op on n ranks in NCCL's latency model (src/graph/tuning.cc): all-reduce
 * 2(n-1), all-gather and reduce-scatter n-1, broadcast and reduce n; 0 for the others
 * (all-to-all, send, receive: point to point, no ring). */
static int32_t
ring_steps(int op, int32_t n)
{
    switch (op) {
    case DPRO_COLL_ALLREDUCE:
        return 2 * (n - 1);
    case DPRO_COLL_ALLGATHER:
    case DPRO_COLL_REDUCESCATTER:
        return n - 1;
    case DPRO_COLL_BROADCAST:
    case DPRO_COLL_REDUCE:
        return n;
    default:
        return 0;
    }
}

/* NCCL's tuner defaults (src/graph/tuning.cc, ncclTunerConstantsDefaults), us:
 * [tree, ring][LL, LL128, Simple] base latency, hop over NVLink and over the network. */
static const double k_base_us[2][3] = {{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}};
static const double k_hop_nvlink_us[2][3] = {{0.6, 1.25, 4.0}, {0.6, 1.9, 3.4}};
static const double k_hop_net_us[2][3] = {{5.0, 8.5, 14.0}, {2.7, 4.0, 14.0}};
/* the tuner's bus bandwidth of each protocol as a fraction of Simple's: [tree, ring] */
static const double k_proto_bw[2][3] = {{1.0 / 3.8, 120.0 / 128.0, 1.0}, {0.5, 0.92, 1.0}};

static int
log2_floor(int32_t n)
{
    int l = 0;
    while (n > 1) {
        n >>= 1;
        l++;
    }
    return l;
}

/* The tuner's latency of op on n ranks with algo and proto, us (costmodel.h); 0 for the
 * operations without steps. */
static double
tuner_latency_us(int op, int algo, int proto, int32_t n)
{
    int p = proto >= COSTMODEL_PROTO_LL && proto <= COSTMODEL_PROTO_SIMPLE ? proto
                                                                           : COSTMODEL_PROTO_SIMPLE;
    int32_t steps = ring_steps(op, n);
    if (steps <= 0)
        return 0;
    if (algo == NCCLNAME_ALGO_TREE && op == DPRO_COLL_ALLREDUCE)
        return k_base_us[0][p] + 2.0 * log2_floor(n) * k_hop_net_us[0][p];
    return k_base_us[1][p] + steps * k_hop_nvlink_us[1][p];
}

double
costmodel_latency_growth(int op, int algo, int proto, int32_t n_from, int32_t n_to)
{
    double a = tuner_latency_us(op, algo, proto, n_from),
           b = tuner_latency_us(op, algo, proto, n_to);
    return a > 0 && b > 0 ? b / a : 1.0;
}

/* The fit that prices op (its own, else that of all operations). */
static const costmodel_fit *
fit_of(const costmodel *m, int op)
{
    return op >= 0 && op < COSTMODEL_OPS && m->op[op].fitted ? &m->op[op] : &m->all;
}

const char *
costmodel_proto_name(int proto)
{
    static const char *const names[] = {"LL", "LL128", "Simple"};
    return proto >= COSTMODEL_PROTO_LL && proto <= COSTMODEL_PROTO_SIMPLE ? names[proto] : "?";
}

/* costmodel_algo_at at x = factor x bytes. */
static int
algo_at_x(const costmodel *m, int op, double x)
{
    int algo = 0;
    double best = INFINITY;
    const costmodel_fit *f = op >= 0 && op < COSTMODEL_OPS ? &m->op[op] : NULL;
    for (int32_t k = 0; f && k < f->n_runs; k++) {
        const costmodel_algo_run *r = &f->run[k];
        /* distance in log size: 0 inside the run */
        double d = x < r->lo   ? log((r->lo + 1) / (x + 1))
                   : x > r->hi ? log((x + 1) / (r->hi + 1))
                               : 0;
        if (d < best) {
            best = d;
            algo = r->algo;
        }
    }
    return algo;
}

int
costmodel_algo_at(const costmodel *m, int op, int32_t nranks, int64_t bytes)
{
    return algo_at_x(m, op, costmodel_factor(op, nranks) * (double)bytes);
}

double
costmodel_ll_max_bpns(int cc_major, int nnodes)
{
    static const double cap[4][3] = {
        {39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {282.0, 90.0, 70.0}};
    int a = cc_major >= 10 ? 3 : cc_major - 7, i = nnodes <= 1 ? 0 : nnodes == 2 ? 1 : 2;
    return a >= 0 && a <= 3 ? cap[a][i] : 0;
}

/* The tuner's bus bandwidth of proto for algorithm row a (0 tree, 1 ring) when Simple's is
 * beta_s bytes per ns: its fraction of Simple's, LL's at most m->ll_max_bpns when known. */
static double
proto_bw(const costmodel *m, int a, int proto, double beta_s)
{
    double bw = beta_s * k_proto_bw[a][proto];
    if (proto == COSTMODEL_PROTO_LL && m->ll_max_bpns > 0 && bw > m->ll_max_bpns)
        bw = m->ll_max_bpns;
    return bw;
}

/* The tuner's row of algo for op: 0 the tree (all-reduce), 1 the ring. */
static int
tuner_row(int op, int algo)
{
    return algo == NCCLNAME_ALGO_TREE && op == DPRO_COLL_ALLREDUCE ? 0 : 1;
}

/* NCCL's tuner choice at x = factor x bytes (op with ring steps on nranks ranks, algo,
 * Simple's bandwidth beta_s > 0): the lowest latency + x / bandwidth among LL, LL128 and
 * Simple. */
static int
tuner_pick(const costmodel *m, int op, int algo, int32_t nranks, double x, double beta_s)
{
    int proto = COSTMODEL_PROTO_SIMPLE;
    double best = INFINITY;
    for (int p = COSTMODEL_PROTO_LL; p <= COSTMODEL_PROTO_SIMPLE; p++) {
        double t = tuner_latency_us(op, algo, p, nranks) * 1000 +
                   x / proto_bw(m, tuner_row(op, algo), p, beta_s);
        if (t < best) {
            best = t;
            proto = p;
        }
    }
    return proto;
}

/* The protocol segment s of op on nranks ran at x_at (the end of s nearest a size outside it:
 * a segment may span a protocol switch; its middle for its latency; algo: its algorithm),
 * with Simple's bandwidth into *beta_s: the first of Simple, LL128 and LL that,
 * s's bandwidth taken as that protocol's (Simple's = s's / its tuner fraction), the tuner
 * picks at x_at; Simple when none does. -1 (nothing written) when s has no bandwidth (a
 * size-independent segment). */
static int
seg_proto(const costmodel *m, int op, int algo, int32_t nranks, const costmodel_segment *s,
          double x_at, double *beta_s)
{
    int proto = -1;
    if (s->beta_bpns > 0) {
        int a = tuner_row(op, algo);
        proto = COSTMODEL_PROTO_SIMPLE;
        *beta_s = s->beta_bpns;
        for (int p = COSTMODEL_PROTO_SIMPLE; p >= COSTMODEL_PROTO_LL; p--) {
            double b = s->beta_bpns / k_proto_bw[a][p];
            if (tuner_pick(m, op, algo, nranks, x_at, b) == p) {
                proto = p;
                *beta_s = b;
                break;
            }
        }
    }
    return proto;
}

int
costmodel_proto_at(const costmodel *m, int op, int algo, int32_t nranks, int64_t bytes)
{
    const costmodel_fit *f = fit_of(m, op);
    double beta = f->fitted ? f->beta_bpns : 0; /* bytes per ns, Simple's */
    if (f->fitted && f->n_segs > 0 &&
        seg_proto(m, op, algo, nranks, &f->seg[f->n_segs - 1], f->seg[f->n_segs - 1].hi, &beta) < 0)
        beta = 0;
    int proto = bytes < COSTMODEL_LL_MAX_BYTES ? COSTMODEL_PROTO_LL : COSTMODEL_PROTO_SIMPLE;
    if (algo && beta > 0 && ring_steps(op, nranks) > 0)
        proto = tuner_pick(m, op, algo, nranks, costmodel_factor(op, nranks) * (double)bytes, beta);
    return proto;
}

/* A fitted latency this many times NCCL's tuner latency or more is mostly not the protocol's
 * (a host, waits, a proxy: the real 2-rank A100 trace's all-reduces fit 2.3 ms where the
 * tuner's ring Simple takes 15 us), so a switch of protocol adds at most this many times the
 * tuner's latency difference, not the whole latency scaled. Below it the price is the
 * segment's latency x L(px) / L(pe), exactly. */
#define UNSEEN_LATENCY_SCALE_MAX 8.0

/* The trace's latency against the tuner's, for a protocol the trace never ran on one
 * operation (costmodel_regime_at): the mean over every operation's segments with a latency
 * and a bandwidth (on nranks ranks, the ring unless named) of latency / the tuner's
 * latency of the segment's protocol at its middle (the geometric mean of its ends: the
 * latency is fitted over all of it), those of protocol proto if any; 1 when none. */
static double
latency_scale(const costmodel *m, int32_t nranks, int proto)
{
    double sum[2] = {0, 0};
    int32_t cnt[2] = {0, 0};
    for (int op = 0; op < COSTMODEL_OPS; op++) {
        const costmodel_fit *f = &m->op[op];
        for (int32_t k = 0; f->fitted && ring_steps(op, nranks) > 0 && k < f->n_segs; k++) {
            const costmodel_segment *g = &f->seg[k];
            double mid = sqrt((g->lo + 1) * (g->hi + 1)), beta_s;
            int algo = algo_at_x(m, op, mid);
            algo = algo ? algo : NCCLNAME_ALGO_RING;
            int p = g->alpha_ns > 0 ? seg_proto(m, op, algo, nranks, g, mid, &beta_s) : -1;
            if (p < 0)
                continue;
            double r = g->alpha_ns / (tuner_latency_us(op, algo, p, nranks) * 1000);
            sum[p == proto] += r;
            cnt[p == proto]++;
        }
    }
    return cnt[1] ? sum[1] / cnt[1] : cnt[0] ? sum[0] / cnt[0] : 1.0;
}

int
costmodel_regime_at(const costmodel *m, int op, int32_t nranks, int64_t bytes, costmodel_regime *r)
{
    const costmodel_fit *f = fit_of(m, op);
    double x = costmodel_factor(op, nranks) * (double)bytes, beta_s = 0;
    const costmodel_segment *e = NULL;
    int rc = 0;
    memset(r, 0, sizeof *r);
    r->proto = r->measured_proto = -1;
    if (f->fitted && m->piecewise && !m->nearest && f->n_segs > 0 && ring_steps(op, nranks) > 0)
        e = x < f->seg[0].lo               ? &f->seg[0]
            : x > f->seg[f->n_segs - 1].hi ? &f->seg[f->n_segs - 1]
                                           : NULL;
    /* the ring where the kernels named no algorithm: the tuner's shape needs one */
    int algo = e ? algo_at_x(m, op, x) : 0;
    algo = algo ? algo : NCCLNAME_ALGO_RING;
    int pe = e ? seg_proto(m, op, algo, nranks, e, x < e->lo ? e->lo : e->hi, &beta_s) : -1;
    if (pe >= 0) {
        int px = tuner_pick(m, op, algo, nranks, x, beta_s);
        r->measured_proto = pe;
        r->proto = px;
        if (px != pe) {
            double le = tuner_latency_us(op, algo, pe, nranks),
                   lx = tuner_latency_us(op, algo, px, nranks);
            /* the trace's latency scale against the tuner's, at most
             * UNSEEN_LATENCY_SCALE_MAX of it taken as the protocols' difference */
            double scale =
                e->alpha_ns > 0 ? e->alpha_ns / (le * 1000) : latency_scale(m, nranks, px);
            scale = scale < UNSEEN_LATENCY_SCALE_MAX ? scale : UNSEEN_LATENCY_SCALE_MAX;
            r->alpha_ns =
                e->alpha_ns > 0 ? e->alpha_ns + (lx - le) * 1000 * scale : scale * lx * 1000;
            r->alpha_ns = r->alpha_ns > 0 ? r->alpha_ns : 0;
            r->beta_bpns = proto_bw(m, tuner_row(op, algo), px, beta_s);
            r->ns = r->alpha_ns + x / r->beta_bpns;
            rc = 1;
        }
    }
    return rc;
}

int64_t
costmodel_extrapolate_ranks(const costmodel *m, int op, int32_t n_from, int32_t n_to, int64_t bytes,
                            int64_t t_ns)
{
    const costmodel_fit *f = fit_of(m, op);
    double beta = f->fitted ? f->beta_bpns : 0, alpha = f->fitted ? f->alpha_ns : 0;
    if (f->fitted && m->piecewise && f->n_segs > 0) {
        double x = costmodel_factor(op, n_from) * (double)bytes;
        int32_t k = 0;
        while (k + 1 < f->n_segs && x >= f->seg[k + 1].lo)
            k++;
        beta = f->seg[k].beta_bpns;
        alpha = f->seg[k].alpha_ns;
    }
    double t = (double)t_ns;
    if (beta > 0)
        t += (costmodel_factor(op, n_to) - costmodel_factor(op, n_from)) * (double)bytes / beta;
    if (alpha > 0) {
        int algo = costmodel_algo_at(m, op, n_from, bytes);
        int proto = costmodel_proto_at(m, op, algo, n_from, bytes);
        t += alpha * (costmodel_latency_growth(op, algo, proto, n_from, n_to) - 1.0);
    }
    return t > 0 ? (int64_t)llround(t) : 0;
}
