/* drawn.c: the drawn replay, the typical replay's companion that replays the trace's own
 * noise: each rank's compared iterations in orders drawn per rank (replay.h,
 * replay_make_drawn). */
#define PR_FMT "replay"
#include "fidelity_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fnv1a.h"

/* A uniform draw in [0, n) from the hash of (sample, rank, k): a fixed seed, so the same
 * trace gives the same figure. */
static int32_t
draw_below(int64_t sample, int32_t rank, int32_t k, int32_t n)
{
    int64_t key[3] = {sample, rank, k};
    uint64_t h = dpro_fnv1a(key, sizeof key, DPRO_FNV1A_INIT);
    h ^= h >> 33; /* FNV-1a leaves the high bits of the last bytes unmixed */
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return (int32_t)(h % (uint64_t)n);
}

/* Fills p[0..ni) with a random permutation of 0..ni-1 (Fisher-Yates), drawn from
 * (sample, key). */
static void
draw_permutation(int64_t sample, int32_t key, int32_t ni, int32_t *p)
{
    for (int32_t i = 0; i < ni; i++)
        p[i] = i;
    for (int32_t i = ni - 1; i > 0; i--) {
        int32_t j = draw_below(sample, key, i, i + 1), t = p[i];
        p[i] = p[j];
        p[j] = t;
    }
}

/* How much each rank's iterations move with the others': follow[r] receives the loading
 * of rank r on a factor common to the ranks (a one-factor model of their own host time
 * per iteration, the fitted durations and gaps of their host calls, which leave out the
 * waits the graph explains), in [0, 1]: from the correlation c across the compared
 * iterations of rank r's series with the sum of the other n - 1 ranks' (each centred and
 * scaled), which equal loadings l would give as c = l^2 sqrt(n - 1) / sqrt(1 + (n - 2)
 * l^2), solved for l. 0 for a rank whose iterations do not differ, or alone. x: scratch of
 * (n_ranks + 1) * ni. */
static void
rank_loadings(const dfg *g, const fid_place *pl, size_t np, int32_t ni, double *x, double *follow)
{
    size_t nr = (size_t)g->n_ranks, nz = 0;
    double *sum = x + nr * (size_t)ni;
    memset(x, 0, (nr + 1) * (size_t)ni * sizeof *x);
    for (size_t i = 0; i < np; i++)
        if (g->kind[pl[i].node] == DFG_HOST)
            x[(size_t)dfg_rank(g, pl[i].node) * (size_t)ni + (size_t)pl[i].iter] +=
                (double)(dfg_dur(g, pl[i].node) + dfg_gap(g, pl[i].node));
    for (size_t r = 0; r < nr; r++) { /* centred and scaled to unit norm, or all 0 */
        double *xr = x + r * (size_t)ni, mean = 0, ss = 0;
        for (int32_t i = 0; i < ni; i++)
            mean += xr[i] / ni;
        for (int32_t i = 0; i < ni; i++)
            ss += (xr[i] - mean) * (xr[i] - mean);
        for (int32_t i = 0; i < ni; i++) {
            xr[i] = ss > 0 ? (xr[i] - mean) / sqrt(ss) : 0;
            sum[i] += xr[i];
        }
        nz += ss > 0;
    }
    for (size_t r = 0; r < nr; r++) {
        const double *xr = x + r * (size_t)ni;
        double dot = 0, oo = 0, rr = 0;
        for (int32_t i = 0; i < ni; i++) {
            double o = sum[i] - xr[i];
            dot += xr[i] * o;
            oo += o * o;
            rr += xr[i] * xr[i];
        }
        double c = rr > 0 && oo > 0 && nz >= 2 ? dot / sqrt(oo) : 0, n = (double)nz;
        double u = c > 0 ? (c * c * (n - 2) +
                            sqrt(c * c * c * c * (n - 2) * (n - 2) + 4 * (n - 1) * c * c)) /
                               (2 * (n - 1))
                         : 0;
        follow[r] = u < 1 ? sqrt(u) : 1;
    }
}

/* src[r * ni + i]: the compared iteration whose values rank r's iteration i takes in
 * sample `sample`: per rank a random permutation of 0..ni-1; rank r follows the sample's
 * common permutation with probability follow[r] (rank_loadings) and draws its own
 * otherwise. */
static void
draw_sources(int64_t sample, int32_t n_ranks, int32_t ni, const double *follow, int32_t *src)
{
    int32_t *common = src + (size_t)n_ranks * (size_t)ni; /* the spare row */
    draw_permutation(sample, -1, ni, common);
    for (int32_t r = 0; r < n_ranks; r++) {
        int32_t *p = src + (size_t)r * (size_t)ni;
        if ((double)draw_below(sample, r, -1, 1 << 30) / (1 << 30) < follow[r])
            memcpy(p, common, (size_t)ni * sizeof *p);
        else
            draw_permutation(sample, r, ni, p);
    }
}

/* Gives one place's nodes pl[0..m) (one per iteration at most) the values of the node at
 * that place in the iteration src assigns their rank's iteration, keeping their own where
 * the place holds none there. slot (ni) and v (4 m) are scratch. Returns 0, or -1 when
 * out of memory. */
static int
set_drawn(dfg *g, const fid_place *pl, size_t m, int32_t ni, const int32_t *src, int32_t *slot,
          int64_t *v)
{
    int rc = 0;
    for (int32_t i = 0; i < ni; i++)
        slot[i] = -1;
    for (size_t i = 0; i < m; i++) {
        int32_t n = pl[i].node, q = dfg_group(g, n);
        slot[pl[i].iter] = (int32_t)i;
        v[i] = dfg_dur(g, n);
        v[m + i] = dfg_gap(g, n);
        v[2 * m + i] = dfg_lat(g, n);
        v[3 * m + i] = q >= 0 && g->grp_first[q] == n ? g->grp_dur[q] : -1;
    }
    for (size_t i = 0; i < m; i++) {
        int32_t n = pl[i].node, q = dfg_group(g, n);
        int32_t k = slot[src[(size_t)dfg_rank(g, n) * (size_t)ni + (size_t)pl[i].iter]];
        if (k < 0)
            continue;
        rc |= dfg_set_dur(g, n, v[k]) | dfg_set_gap(g, n, v[m + k]);
        dfg_set_lat(g, n, (int32_t)v[2 * m + k]);
        if (v[3 * m + i] >= 0 && v[3 * m + k] >= 0)
            g->grp_dur[q] = v[3 * m + k];
    }
    return rc;
}

/* What the drawn replay's samples share: the places of the compared iterations (not
 * owned), how much the ranks move together, and scratch. */
typedef struct drawn_plan {
    const fid_place *pl;
    size_t np;
    int32_t ni;
    double *follow; /* per rank (rank_loadings) */
    int64_t sample; /* the sample drawn_apply draws */
    int32_t *src, *slot;
    int64_t *v;
} drawn_plan;

static void
drawn_plan_free(drawn_plan *dp)
{
    free(dp->follow);
    free(dp->src);
    free(dp->slot);
    free(dp->v);
    memset(dp, 0, sizeof *dp);
}

/* Sets up *dp for the graph g (rp->graph or a copy of its timings, before any
 * transformation), rp->iter_first..iter_last compared (at least one), pl[0..np) the
 * places of those iterations (fid_sorted_places; they must outlive *dp). Returns 0 or -1
 * (out of memory; *dp is then freed). */
static int
drawn_plan_init(const replay *rp, const dfg *g, const fid_place *pl, size_t np, drawn_plan *dp)
{
    memset(dp, 0, sizeof *dp);
    dp->pl = pl;
    dp->np = np;
    dp->ni = rp->iter_last - rp->iter_first + 1;
    size_t cells = ((size_t)g->n_ranks + 1) * (size_t)dp->ni;
    double *x = malloc(cells * sizeof *x);
    dp->src = malloc(cells * sizeof *dp->src);
    dp->slot = malloc((size_t)dp->ni * sizeof *dp->slot);
    dp->v = malloc(4 * (size_t)dp->ni * sizeof *dp->v);
    dp->follow = malloc((size_t)(g->n_ranks > 0 ? g->n_ranks : 1) * sizeof *dp->follow);
    int rc = x && dp->follow && dp->src && dp->slot && dp->v ? 0 : -1;
    if (rc == 0)
        rank_loadings(g, dp->pl, dp->np, dp->ni, x, dp->follow);
    else
        drawn_plan_free(dp);
    free(x);
    return rc;
}

/* Gives g the timings of sample dp->sample. Returns 0 or -1 (out of memory). */
static int
drawn_apply(dfg *g, drawn_plan *dp)
{
    int rc = 0;
    draw_sources(dp->sample, g->n_ranks, dp->ni, dp->follow, dp->src);
    for (size_t a = 0, z; a < dp->np && rc == 0; a = z) {
        z = fid_place_run_end(dp->pl, dp->np, a);
        rc = set_drawn(g, dp->pl + a, z - a, dp->ni, dp->src, dp->slot, dp->v);
    }
    return rc;
}

int
replay_make_drawn(const replay *rp, dfg *g, int64_t sample)
{
    if (rp->iter_last < rp->iter_first)
        return 0;
    drawn_plan dp;
    fid_place *pl = NULL;
    size_t np = 0;
    memset(&dp, 0, sizeof dp); /* freed whatever happens */
    int rc = fid_sorted_places(rp, g, rp->iter_first, rp->iter_last, &pl, &np);
    if (rc == 0)
        rc = drawn_plan_init(rp, g, pl, np, &dp);
    dp.sample = sample;
    if (rc == 0)
        rc = drawn_apply(g, &dp);
    drawn_plan_free(&dp);
    free(pl);
    return rc;
}

static int
make_drawn(dfg *g, void *ctx)
{
    return drawn_apply(g, ctx);
}

int
fid_drawn_replay(fid_runner *fr, replay_typical *out)
{
    drawn_plan dp;
    double sum = 0, measured = 0, err = 0;
    memset(&dp, 0, sizeof dp); /* freed whatever happens */
    int rc = fid_test_fault("drawn") ? -1 : drawn_plan_init(fr->rp, fr->src, fr->pl, fr->np, &dp);
    for (int k = 0; k < REPLAY_DRAWN_SAMPLES && rc == 0; k++) {
        double us = 0;
        dp.sample = k;
        rc = fid_runner_timings(fr, make_drawn, &dp, &measured, &us, &err);
        sum += us;
        if (k == 0 || us < out->drawn_min_us)
            out->drawn_min_us = us;
        if (k == 0 || us > out->drawn_max_us)
            out->drawn_max_us = us;
    }
    if (rc == 0) {
        out->drawn_samples = REPLAY_DRAWN_SAMPLES;
        out->drawn_predicted_us = sum / REPLAY_DRAWN_SAMPLES;
        out->drawn_error_pct =
            out->measured_us > 0
                ? 100.0 * (out->drawn_predicted_us - out->measured_us) / out->measured_us
                : 0;
    } else
        out->drawn_min_us = out->drawn_max_us = 0; /* no figure of a sample survives */
    drawn_plan_free(&dp);
    return rc;
}
