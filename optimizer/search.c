/*
 * search.c: critical-path guided annealing over strategy plans (see search.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fnv1a.h"
#include "optimizer/search.h"

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t
rng_next(rng *r)
{
    /* xorshift64* */
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545F4914F6CDD1DULL;
}

static double
rng_unit(rng *r)
{
    return (double)(rng_next(r) >> 11) / 9007199254740992.0;
}

static double
now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- cache of evaluated plans ---------------------------------------------------------- */

typedef struct plan_cache {
    search_candidate *items;
    int64_t n, cap;
    int64_t *slots; /* index + 1, 0 empty */
    int64_t n_slots;
} plan_cache;

static uint64_t
plan_hash(const strategy_plan *p)
{
    return dpro_fnv1a(p, sizeof *p, DPRO_FNV1A_INIT);
}

static int
cache_grow(plan_cache *c)
{
    int64_t ns = c->n_slots ? c->n_slots * 2 : 1024;
    int64_t *slots = calloc((size_t)ns, sizeof *slots);
    if (!slots)
        return -1;
    for (int64_t i = 0; i < c->n; i++) {
        uint64_t h = plan_hash(&c->items[i].plan) & (uint64_t)(ns - 1);
        while (slots[h])
            h = (h + 1) & (uint64_t)(ns - 1);
        slots[h] = i + 1;
    }
    free(c->slots);
    c->slots = slots;
    c->n_slots = ns;
    return 0;
}

static search_candidate *
cache_find(plan_cache *c, const strategy_plan *p)
{
    if (!c->n_slots)
        return NULL;
    uint64_t h = plan_hash(p) & (uint64_t)(c->n_slots - 1);
    while (c->slots[h]) {
        search_candidate *it = &c->items[c->slots[h] - 1];
        if (!memcmp(&it->plan, p, sizeof *p))
            return it;
        h = (h + 1) & (uint64_t)(c->n_slots - 1);
    }
    return NULL;
}

static search_candidate *
cache_add(plan_cache *c, const search_candidate *cand)
{
    if ((c->n + 1) * 2 > c->n_slots && cache_grow(c) != 0)
        return NULL;
    if (c->n == c->cap) {
        int64_t cap = c->cap ? c->cap * 2 : 256;
        search_candidate *it = realloc(c->items, (size_t)cap * sizeof *it);
        if (!it)
            return NULL;
        c->items = it;
        c->cap = cap;
    }
    c->items[c->n] = *cand;
    uint64_t h = plan_hash(&cand->plan) & (uint64_t)(c->n_slots - 1);
    while (c->slots[h])
        h = (h + 1) & (uint64_t)(c->n_slots - 1);
    c->slots[h] = c->n + 1;
    return &c->items[c->n++];
}

/* ---- the walk ----------------------------------------------------------------------------- */

typedef struct searcher {
    workload *w;
    const search_options *o;
    search_result *out;
    plan_cache cache;
    sim_result res;
    rng rng;
    double t0, last_progress;
    int64_t max_evals;
    uint8_t accum_ok[8]; /* indices of strategy_accum_steps allowed */
    int n_accum_ok;
    int first_cap;              /* the first bucket's cap the framework keeps, -1: searched or the
                                 * plan's cap (search_options: first_bucket_follows) */
    double *layer_value;        /* memory freed per ns recomputed, per layer */
    const strategy_eval *known; /* the next plan simulated is the baseline and this is its
                                   evaluation (over every compared iteration, none set
                                   aside): taken instead of simulating it again */
    int stop;
    int failed; /* shared: a gather failed, or out of memory here (the processes' walks
                   would part: the caller must end them all) */
    /* shared search (search.h): the results of rounds not yet asked for, the guesses
     * of the round being made (guess[0] the plan asked for), the gathered results */
    plan_cache spec;
    int collect; /* 1: seeds() only lists the plans it would evaluate into guess */
    int alone;   /* 1: evaluate without a round (the baseline, on every process) */
    int walking; /* 1: the annealing walks from walk_cur (energy walk_e) */
    int64_t walk_cur;
    double walk_e;
    strategy_plan *guess;
    int n_guess;
    struct round_rec *recs;
} searcher;

/* One process's part of a round, as gathered. */
typedef struct round_rec {
    search_candidate c;
    int32_t has;     /* c holds a simulated plan */
    int32_t time_up; /* process 0: the time budget is spent */
} round_rec;

static int
feasible(const searcher *s, const strategy_eval *e)
{
    return s->o->memory_budget <= 0 || e->peak_bytes < 0 ||
           (double)e->peak_bytes <= (double)s->o->memory_budget * (1.0 - s->o->memory_margin);
}

/* Energy of a candidate: time, times a penalty when over the memory budget. */
static double
energy(const searcher *s, const search_candidate *c)
{
    if (c->eval.iter_ns < 0)
        return INFINITY;
    if (c->feasible)
        return c->eval.iter_ns;
    double over = (double)(c->eval.peak_bytes - s->o->memory_budget) / (double)s->o->memory_budget;
    return c->eval.iter_ns * (2.0 + 4.0 * over);
}

static void
progress(searcher *s, int final)
{
    if (!s->o->progress)
        return;
    double t = now_s();
    if (!final && t - s->last_progress < 0.1)
        return;
    s->last_progress = t;
    double best = -1;
    for (int64_t i = 0; i < s->cache.n; i++)
        if (s->cache.items[i].feasible && s->cache.items[i].eval.iter_ns > 0 &&
            (best < 0 || s->cache.items[i].eval.iter_ns < best))
            best = s->cache.items[i].eval.iter_ns;
    fprintf(stderr, "\rsearch: %lld evaluations, %.1f s, best %.1f us (%.3fx)   %s",
            (long long)s->out->evaluations, t - s->t0, best / 1000.0,
            best > 0 ? s->out->baseline.eval.iter_ns / best : 0.0, final ? "\n" : "");
    fflush(stderr);
}

/* The plan p as evaluated: with the first bucket the framework keeps, or the plan's cap
 * when the framework's one knob sets both (search_options: first_bucket_follows). */
static strategy_plan
fixed_plan(const searcher *s, const strategy_plan *p)
{
    strategy_plan f = *p;
    if (s->first_cap >= 0 && f.bucket_cap >= 0)
        f.first_cap = (int8_t)s->first_cap;
    else if (s->o->first_bucket_follows && f.bucket_cap >= 0)
        f.first_cap = f.bucket_cap;
    return f;
}

/* Simulates plan p into *c (iter_ns -1 when it cannot be simulated). */
static void
simulate_plan(searcher *s, const strategy_plan *p, search_candidate *c)
{
    memset(c, 0, sizeof *c);
    c->plan = *p;
    if (s->known) {
        c->eval = *s->known; /* s->res holds its simulation too */
        s->known = NULL;
    } else {
        if (strategy_evaluate(s->w, p, &s->res, &c->eval) != 0)
            c->eval.iter_ns = -1;
        s->out->simulated_here++;
    }
    c->feasible = feasible(s, &c->eval);
}

static int
time_up(const searcher *s)
{
    return s->o->budget_s > 0 && now_s() - s->t0 > s->o->budget_s;
}

static int
guessed(const searcher *s, const strategy_plan *p)
{
    int found = 0;
    for (int i = 0; i < s->n_guess && !found; i++)
        found = !memcmp(&s->guess[i], p, sizeof *p);
    return found;
}

/* Collect mode (seeds() listing its plans): p joins the guesses when it is known nowhere
 * and there is room. Returns what is known of p (a cached or gathered result) or NULL. */
static const search_candidate *
collect(searcher *s, const strategy_plan *p)
{
    const search_candidate *known = cache_find(&s->cache, p);
    if (!known)
        known = cache_find(&s->spec, p);
    if (!known && s->n_guess < s->o->par->nprocs && !guessed(s, p))
        s->guess[s->n_guess++] = *p;
    return known;
}

static void seeds(searcher *s);
static strategy_plan propose(searcher *s, rng *r, const strategy_plan *cur, int over_budget);

/* The annealing's temperature after evals evaluations: falling from 2 % of the baseline
 * to none at the last evaluation allowed. */
static double
walk_temp(const searcher *s, int64_t evals)
{
    double t_start = 0.02 * s->out->baseline.eval.iter_ns;
    return t_start * (1.0 - (double)evals / (double)s->max_evals) + 1e-9;
}

/* The annealing's rule: a plan of energy e replaces the current one (energy cur_e) when
 * it is no worse, else with probability exp(-(e - cur_e) / temp), drawn from r only then.
 * The walk and its guesses (walk_guesses) must decide alike. */
static int
accepts(rng *r, double e, double cur_e, double temp)
{
    return e <= cur_e || rng_unit(r) < exp(-(e - cur_e) / temp);
}

/* The walk's next plans not yet evaluated, into the guesses: the walk from walk_cur
 * replayed on a copy of the random state, each plan not yet evaluated (the one asked for
 * first) taken as rejected, every plan whose result is known (cached, or gathered in a
 * round) accepted or rejected as the walk will. */
static void
walk_guesses(searcher *s)
{
    rng r = s->rng;
    const search_candidate *cur = &s->cache.items[s->walk_cur];
    double cur_e = s->walk_e;
    int64_t evals = s->out->evaluations + 1; /* the plan asked for */
    int W = s->o->par->nprocs;
    rng_unit(&r); /* the draw that rejects the plan asked for */
    for (int tries = 0; tries < 1024 * W && s->n_guess < W; tries++) {
        double temp = walk_temp(s, evals);
        strategy_plan from = cur->plan;
        strategy_plan q = propose(s, &r, &from, !cur->feasible);
        q = fixed_plan(s, &q);
        const search_candidate *known = cache_find(&s->cache, &q);
        if (!known && (known = cache_find(&s->spec, &q)) != NULL)
            evals++; /* the walk will count it when it takes it */
        if (known) {
            double e = energy(s, known);
            if (accepts(&r, e, cur_e, temp)) {
                cur = known;
                cur_e = e;
            }
            continue;
        }
        rng_unit(&r);
        evals++;
        if (!guessed(s, &q))
            s->guess[s->n_guess++] = q;
    }
}

/* A round (search.h) for plan p: the guesses, this process's simulation, the gather; the
 * results join s->spec. Returns 0, or -1 when the search must stop: the time budget
 * (cut_by_budget set; every process returns the same) or a failure (s->failed set). */
static int
round_for(searcher *s, const strategy_plan *p)
{
    const search_par *par = s->o->par;
    round_rec mine;
    int rc = 0;
    s->guess[0] = *p;
    s->n_guess = 1;
    if (s->walking) {
        walk_guesses(s);
    } else {
        s->collect = 1;
        seeds(s);
        s->collect = 0;
    }
    memset(&mine, 0, sizeof mine);
    mine.time_up = par->me == 0 && time_up(s);
    if (par->me < s->n_guess && !mine.time_up) {
        simulate_plan(s, &s->guess[par->me], &mine.c);
        mine.has = 1;
    }
    s->out->rounds++;
    if (par->allgather(par->ctx, &mine, sizeof mine, s->recs) != 0)
        rc = s->failed = -1;
    if (rc == 0 && s->recs[0].time_up) {
        s->out->cut_by_budget = 1;
        rc = -1;
    }
    for (int q = 0; rc == 0 && q < par->nprocs; q++)
        if (s->recs[q].has && !cache_add(&s->spec, &s->recs[q].c))
            rc = s->failed = -1;
    if (rc != 0)
        s->stop = 1;
    return rc;
}

/* Evaluates p (or finds it in the cache; shared, takes its result from a round).
 * Returns the candidate, or NULL when out of memory or when the search must stop. */
static const search_candidate *
evaluate(searcher *s, const strategy_plan *plan)
{
    strategy_plan fixed = fixed_plan(s, plan);
    const strategy_plan *p = &fixed;
    if (s->collect)
        return collect(s, p);
    s->out->proposals++;
    search_candidate *hit = cache_find(&s->cache, p);
    if (hit)
        return hit;
    if (s->out->evaluations >= s->max_evals) {
        s->stop = 1;
        return NULL;
    }
    const search_candidate *got = NULL;
    search_candidate c;
    int shared = s->o->par && s->o->par->nprocs > 1 && !s->alone;
    if (shared) {
        got = cache_find(&s->spec, p);
        if (!got && round_for(s, p) == 0)
            got = cache_find(&s->spec, p);
        if (!got) {
            s->stop = 1;
            return NULL;
        }
        c = *got;
    } else if (!s->alone && time_up(s)) { /* the baseline is needed whatever the budget */
        s->stop = 1;
        s->out->cut_by_budget = 1;
        return NULL;
    } else {
        simulate_plan(s, p, &c);
    }
    s->out->evaluations++;
    progress(s, 0);
    const search_candidate *added = cache_add(&s->cache, &c);
    if (!added && shared)
        s->failed = s->stop = 1;
    return added;
}

/* Critical-path shares of the baseline (res holds its simulation). */
static void
critical_path_shares(searcher *s)
{
    workload *w = s->w;
    dfg *g = w->g;
    uint8_t *in_chain = calloc((size_t)g->n_nodes + 1, 1);
    int32_t *path = NULL, n = 0;
    int64_t from = -1;
    sim_timeline tl = sim_timeline_of(&s->res);
    int64_t t1;
    if (!in_chain)
        return;
    for (int32_t i = 0; i < w->fusion.chain_off[w->fusion.n_chains]; i++)
        in_chain[w->fusion.chain_node[i]] = 1;
    /* the path to the end of the compared window of the first rank that has one */
    int32_t to = -1;
    for (int32_t r = 0; r < g->n_ranks && to < 0; r++) {
        const int32_t *bn;
        int32_t nb = dfg_iterations(g, r, &bn);
        if (sim_iteration_window(g, tl, r, w->iter_first, w->iter_last, &from, &t1) == 0 &&
            w->iter_last + 1 < nb)
            to = bn[w->iter_last + 1];
    }
    if (sim_critical_path(g, &s->res, to, from < 0 ? 0 : from, &path, &n) == 0 && n > 0) {
        double host = 0, shortk = 0, coll = 0, other = 0;
        for (int32_t i = 0; i < n; i++) {
            int32_t m = path[i];
            double c = (double)sim_path_contribution(g, &s->res, path, n, i);
            if (c <= 0)
                continue;
            if (g->kind[m] == DFG_HOST && !(g->flags[m] & DFG_F_BLOCKING))
                host += c;
            else if (g->kind[m] == DFG_COLL)
                coll += c;
            else if (in_chain[m])
                shortk += c;
            else
                other += c;
        }
        double tot = host + shortk + coll + other;
        if (tot > 0) {
            s->out->cp_host = host / tot;
            s->out->cp_short_kernels = shortk / tot;
            s->out->cp_collectives = coll / tot;
            s->out->cp_other = other / tot;
        }
    }
    free(path);
    free(in_chain);
}

/* Memory freed per ns of recomputed forward, per layer (for the greedy seed and the
 * moves). */
static int
layer_values(searcher *s)
{
    workload *w = s->w;
    int32_t L = w->layers.n_layers < STRATEGY_MAX_LAYERS ? w->layers.n_layers : STRATEGY_MAX_LAYERS;
    s->layer_value = calloc((size_t)L + 1, sizeof *s->layer_value);
    double *cost = calloc((size_t)L + 1, sizeof *cost);
    if (!s->layer_value || !cost) {
        free(cost);
        return -1;
    }
    for (int32_t q = 0; q < w->layers.n_sites; q++) {
        int32_t l = w->layers.site_layer[q];
        if (l >= L)
            continue;
        for (int32_t i = w->layers.site_off[q]; i < w->layers.site_off[q + 1]; i++)
            cost[l] += (double)w->base_dur[w->layers.site_fwd[i]];
    }
    for (int32_t l = 0; l < L; l++)
        s->layer_value[l] = cost[l] > 0 ? (double)w->layers.mem.act_bytes[l] / cost[l] : 0;
    free(cost);
    return 0;
}

/* Greedy seed: recompute the most valuable layers until the budget holds (on top of
 * plan p). */
static void
seed_recompute(searcher *s, strategy_plan p)
{
    workload *w = s->w;
    int32_t L = w->layers.n_layers < STRATEGY_MAX_LAYERS ? w->layers.n_layers : STRATEGY_MAX_LAYERS;
    uint8_t *used = calloc((size_t)L + 1, 1);
    if (!used)
        return;
    for (int32_t step = 0; step < L && !s->stop; step++) {
        int32_t best = -1;
        for (int32_t l = 0; l < L; l++)
            if (!used[l] && s->layer_value[l] > 0 &&
                (best < 0 || s->layer_value[l] > s->layer_value[best]))
                best = l;
        if (best < 0)
            break;
        used[best] = 1;
        strategy_set_recompute(&p, best, 1);
        const search_candidate *c = evaluate(s, &p);
        if ((!c && !s->collect) || (c && c->feasible))
            break; /* listing (collect), an unknown step goes on as if over the budget */
    }
    free(used);
}

static void
seeds(searcher *s)
{
    workload *w = s->w;
    unsigned fam = s->o->families;
    strategy_plan p;
    if ((fam & STRATEGY_FUSION) && w->fusion.n_chains > 0 && !s->o->no_fuse) {
        strategy_plan_baseline(&p);
        p.fuse = 1;
        evaluate(s, &p);
    }
    if ((fam & STRATEGY_FUSION) && !w->capture.graph_captured && !s->o->no_capture) {
        strategy_plan_baseline(&p);
        p.cuda_graph = 1;
        evaluate(s, &p);
    }
    if ((fam & STRATEGY_TENSOR) && strategy_tensor_available(w)) {
        int best_cap = -1;
        double best = INFINITY;
        for (int c = 0; c < strategy_n_bucket_caps && !s->stop; c++) {
            strategy_plan_baseline(&p);
            p.bucket_cap = (int8_t)c;
            p.first_cap = (int8_t)c;
            const search_candidate *r = evaluate(s, &p);
            if (r && r->eval.iter_ns > 0 && r->eval.iter_ns < best) {
                best = r->eval.iter_ns;
                best_cap = c;
            }
        }
        for (int f = 0; best_cap >= 0 && f < strategy_n_bucket_caps && !s->stop; f++) {
            strategy_plan_baseline(&p);
            p.bucket_cap = (int8_t)best_cap;
            p.first_cap = (int8_t)f;
            evaluate(s, &p);
        }
    }
    if (fam & STRATEGY_MEMORY) {
        for (int i = 1; i < s->n_accum_ok && !s->stop; i++) {
            strategy_plan_baseline(&p);
            p.accum_k = strategy_accum_steps[s->accum_ok[i]];
            evaluate(s, &p);
        }
        if (w->layers.n_sites > 0 && s->o->memory_budget > 0) {
            strategy_plan_baseline(&p);
            seed_recompute(s, p);
        }
    }
    /* FSDP: keep unsharded (when the backward re-gathers) or reshard (when it does not),
     * prefetch, both */
    for (int k = 1; (fam & STRATEGY_FSDP) && strategy_fsdp_available(w) && k < 4 && !s->stop; k++) {
        if ((k & 1) && w->fsdp.n_bwd < 1 && !strategy_fsdp_reshard_available(w))
            continue;
        strategy_plan_baseline(&p);
        p.fsdp_keep = (uint8_t)((k & 1) && w->fsdp.n_bwd > 0);
        p.fsdp_reshard = (uint8_t)((k & 1) && w->fsdp.n_bwd < 1);
        p.prefetch = (uint8_t)((k & 2) != 0);
        evaluate(s, &p);
    }
    /* resharding saves memory: a memory strategy too */
    if ((fam & STRATEGY_MEMORY) && !(fam & STRATEGY_FSDP) && strategy_fsdp_reshard_available(w) &&
        !s->stop) {
        strategy_plan_baseline(&p);
        p.fsdp_reshard = 1;
        evaluate(s, &p);
    }
}

/* One random move from cur (the knob chosen by the critical-path weights), drawn from r. */
static strategy_plan
propose(searcher *s, rng *r, const strategy_plan *cur, int over_budget)
{
    workload *w = s->w;
    unsigned fam = s->o->families;
    strategy_plan p = *cur;
    double wt[8] = {0};
    if ((fam & STRATEGY_FUSION) && w->fusion.n_chains > 0 && !s->o->no_fuse)
        wt[0] = 0.05 + s->out->cp_short_kernels + s->out->cp_host / 2;
    if ((fam & STRATEGY_FUSION) && !w->capture.graph_captured && !s->o->no_capture)
        wt[1] = 0.05 + s->out->cp_host;
    if ((fam & STRATEGY_TENSOR) && strategy_tensor_available(w)) {
        wt[2] = 0.2 + s->out->cp_collectives;
        wt[3] = 0.1 + s->out->cp_collectives / 2;
    }
    if ((fam & STRATEGY_MEMORY) && w->layers.n_sites > 0)
        wt[4] = over_budget ? 1.0 : (strategy_n_recomputed(cur) > 0 ? 0.3 : 0.05);
    if ((fam & STRATEGY_MEMORY) && s->n_accum_ok > 1)
        wt[5] = over_budget ? 0.5 : 0.1;
    if ((fam & STRATEGY_FSDP) && strategy_fsdp_available(w)) {
        wt[6] = w->fsdp.n_bwd > 0 ? 0.1 + s->out->cp_collectives / 2 : 0;
        wt[7] = 0.1 + s->out->cp_collectives / 2;
    }
    if ((fam & (STRATEGY_FSDP | STRATEGY_MEMORY)) && strategy_fsdp_reshard_available(w))
        wt[6] = over_budget ? 0.5 : 0.05;
    double tot = 0;
    for (int i = 0; i < 8; i++)
        tot += wt[i];
    if (tot <= 0)
        return p;
    double x = rng_unit(r) * tot;
    int move = 0;
    while (move < 7 && x >= wt[move]) {
        x -= wt[move];
        move++;
    }
    switch (move) {
    case 0:
        p.fuse ^= 1;
        break;
    case 1:
        p.cuda_graph ^= 1;
        break;
    case 2: {
        int step = (int)(rng_next(r) % 5) - 2; /* -2..2 */
        int c = (p.bucket_cap < 0 ? strategy_n_bucket_caps / 2 : p.bucket_cap) + step;
        if (c < -1)
            c = -1;
        if (c >= strategy_n_bucket_caps)
            c = strategy_n_bucket_caps - 1;
        p.bucket_cap = (int8_t)c;
        if (c >= 0 && p.first_cap < 0)
            p.first_cap = (int8_t)c;
        if (c < 0)
            p.first_cap = -1;
        break;
    }
    case 3:
        if (p.bucket_cap >= 0) {
            int f = p.first_cap + ((rng_next(r) & 1) ? 1 : -1);
            if (f >= 0 && f < strategy_n_bucket_caps)
                p.first_cap = (int8_t)f;
        }
        break;
    case 4: {
        /* toggle a layer: adding prefers valuable layers, removing any */
        int32_t L =
            w->layers.n_layers < STRATEGY_MAX_LAYERS ? w->layers.n_layers : STRATEGY_MAX_LAYERS;
        if (L <= 0)
            break;
        int32_t l = (int32_t)(rng_next(r) % (uint64_t)L);
        if (!strategy_recomputes(&p, l)) {
            /* two draws, keep the more valuable one */
            int32_t l2 = (int32_t)(rng_next(r) % (uint64_t)L);
            if (!strategy_recomputes(&p, l2) && s->layer_value[l2] > s->layer_value[l])
                l = l2;
        }
        strategy_set_recompute(&p, l, !strategy_recomputes(&p, l));
        break;
    }
    case 6:
        if (w->fsdp.n_bwd > 0)
            p.fsdp_keep ^= 1;
        else
            p.fsdp_reshard ^= 1;
        break;
    case 7:
        p.prefetch ^= 1;
        break;
    default: {
        int i = 0;
        while (i < s->n_accum_ok && strategy_accum_steps[s->accum_ok[i]] != p.accum_k)
            i++;
        i += (rng_next(r) & 1) ? 1 : -1;
        if (i >= 0 && i < s->n_accum_ok)
            p.accum_k = strategy_accum_steps[s->accum_ok[i]];
        break;
    }
    }
    return p;
}

static void
anneal(searcher *s)
{
    /* start from the best candidate so far (indices: the cache may move) */
    int64_t cur = -1;
    for (int64_t i = 0; i < s->cache.n; i++)
        if (cur < 0 || energy(s, &s->cache.items[i]) < energy(s, &s->cache.items[cur]))
            cur = i;
    if (cur < 0)
        return;
    double cur_e = energy(s, &s->cache.items[cur]);
    int64_t budget = s->max_evals;
    int64_t misses = 0;
    while (!s->stop && misses < 50 * budget) {
        double temp = walk_temp(s, s->out->evaluations);
        strategy_plan cur_plan = s->cache.items[cur].plan;
        strategy_plan p = propose(s, &s->rng, &cur_plan, !s->cache.items[cur].feasible);
        s->walking = 1;
        s->walk_cur = cur;
        s->walk_e = cur_e;
        int64_t before = s->out->evaluations;
        const search_candidate *c = evaluate(s, &p);
        if (!c)
            break;
        if (s->out->evaluations == before)
            misses++;
        double e = energy(s, c);
        if (accepts(&s->rng, e, cur_e, temp)) {
            cur = c - s->cache.items;
            cur_e = e;
        }
    }
}

/* |a / b - 1|, 0 when b is not > 0. */
static double
rel_gap(double a, double b)
{
    return b > 0 ? fabs(a / b - 1.0) : 0;
}

/* 1 when plan p is one of the screen's winners. */
static int
screen_winner(const search_result *sc, const strategy_plan *p)
{
    int found = 0;
    for (int32_t i = 0; i < sc->n_top && !found; i++)
        found = !memcmp(&sc->top[i].plan, p, sizeof *p);
    return found;
}

/* The screened search (search_options.screen): the screen's plans simulated on s->w in
 * the screen's order (best first): its winners, and up to SEARCH_SCREEN_MAX other
 * feasible plans whose screened time lies within the margin of the screen's best; the
 * margin widens with the largest gap seen between a plan's two predictions (the
 * baseline's first: s->out->baseline holds it, simulated here). */
static void
verify_screened(searcher *s)
{
    const search_result *sc = s->o->screen;
    search_result *out = s->out;
    double gap = rel_gap(out->baseline.eval.iter_ns, sc->baseline.steady_ns);
    double best = -1, margin = SEARCH_SCREEN_MARGIN + 2 * gap;
    int32_t others = 0;
    out->screen_evaluations = sc->evaluations;
    out->cut_by_budget = sc->cut_by_budget; /* a cut screen cuts the search */
    for (int64_t i = 0; i < sc->n_evaluated && !s->stop; i++) {
        const search_candidate *c = &sc->evaluated[i];
        if (!c->feasible || c->eval.iter_ns <= 0 || !strategy_plan_families(&c->plan))
            continue;
        if (best < 0)
            best = c->eval.iter_ns;
        int winner = screen_winner(sc, &c->plan);
        if (!winner && (others >= SEARCH_SCREEN_MAX || c->eval.iter_ns > best * (1.0 + margin)))
            continue;
        const search_candidate *e = evaluate(s, &c->plan);
        if (!e)
            break;
        others += !winner;
        out->screen_verified++;
        out->screen_margin = margin;
        if (e->eval.iter_ns > 0 && rel_gap(e->eval.iter_ns, c->eval.iter_ns) > gap)
            gap = rel_gap(e->eval.iter_ns, c->eval.iter_ns);
        margin = SEARCH_SCREEN_MARGIN + 2 * gap;
    }
    out->screen_gap = gap;
}

/* Number of changes plan p makes (its families, fusion and capture). */
static int
plan_changes(const strategy_plan *p)
{
    return __builtin_popcount(strategy_plan_families(p)) + p->fuse + p->cuda_graph;
}

static int
cmp_candidate(const void *pa, const void *pb)
{
    const search_candidate *a = pa, *b = pb;
    if (a->feasible != b->feasible)
        return b->feasible - a->feasible;
    if (a->eval.iter_ns != b->eval.iter_ns)
        return (a->eval.iter_ns > b->eval.iter_ns) - (a->eval.iter_ns < b->eval.iter_ns);
    if (a->eval.peak_bytes != b->eval.peak_bytes)
        return (a->eval.peak_bytes > b->eval.peak_bytes) -
               (a->eval.peak_bytes < b->eval.peak_bytes);
    /* ties: fewer changes first */
    int fa = plan_changes(&a->plan), fb = plan_changes(&b->plan);
    if (fa != fb)
        return fa - fb;
    return memcmp(&a->plan, &b->plan, sizeof a->plan);
}

/* True if a plan with fewer changes than c is within 0.1 % of c's time with no more
 * memory: what c adds gains less than the 0.1 % a plan must gain to be listed at all. */
static int
simpler_as_good(const search_candidate *all, int64_t n, const search_candidate *c)
{
    int found = 0;
    for (int64_t j = 0; j < n && !found; j++) {
        const search_candidate *d = &all[j];
        found = d->feasible && d->eval.iter_ns > 0 && strategy_plan_families(&d->plan) &&
                plan_changes(&d->plan) < plan_changes(&c->plan) &&
                d->eval.iter_ns <= c->eval.iter_ns * 1.001 &&
                (c->eval.peak_bytes < 0 || d->eval.peak_bytes <= c->eval.peak_bytes);
    }
    return found;
}

/* Picks the winners: feasible plans better than the baseline (or any feasible plan when
 * the baseline is not), best first, each one smaller in memory than every faster one
 * listed before it (the time / memory Pareto front), leaving out a plan that a plan with
 * fewer changes matches within 0.1 % (simpler_as_good). */
static int
pick_top(searcher *s)
{
    search_result *out = s->out;
    int32_t k = s->o->top_k > 0 ? s->o->top_k : 5;
    search_candidate *all = malloc(sizeof *all * (size_t)(s->cache.n + 1));
    out->top = calloc((size_t)k, sizeof *out->top);
    if (!all || !out->top) {
        free(all);
        return -1;
    }
    memcpy(all, s->cache.items, sizeof *all * (size_t)s->cache.n);
    qsort(all, (size_t)s->cache.n, sizeof *all, cmp_candidate);
    double base = out->baseline.eval.iter_ns;
    for (int64_t i = 0; i < s->cache.n && out->n_top < k; i++) {
        const search_candidate *c = &all[i];
        if (!c->feasible || c->eval.iter_ns <= 0)
            continue;
        if (!strategy_plan_families(&c->plan))
            continue;
        if (out->baseline.feasible && c->eval.iter_ns >= base * 0.999)
            continue;
        if (simpler_as_good(all, s->cache.n, c))
            continue;
        /* only plans no listed plan dominates (as fast and as small) */
        int dominated = 0;
        for (int32_t j = 0; j < out->n_top && !dominated; j++) {
            const search_candidate *t = &out->top[j];
            dominated = t->eval.iter_ns <= c->eval.iter_ns * 1.001 &&
                        (c->eval.peak_bytes < 0 || t->eval.peak_bytes <= c->eval.peak_bytes);
        }
        if (dominated)
            continue;
        out->top[out->n_top++] = *c;
    }
    if (s->o->keep_evaluated) {
        out->evaluated = all;
        out->n_evaluated = s->cache.n;
    } else {
        free(all);
    }
    return 0;
}

/* Sets aside the outlier iterations of the profile (profile_outlier_iterations) from the
 * means of every evaluation that follows (w->iter_aside); s->res holds the baseline's
 * simulation over every compared iteration. Returns 0, or -1 when out of memory. */
static int
set_aside_outliers(searcher *s)
{
    workload *w = s->w;
    search_result *out = s->out;
    int32_t n = w->iter_last - w->iter_first + 1;
    int rc = 0;
    if (n < 1)
        return 0;
    out->aside_mask = calloc((size_t)n, 1);
    out->aside = calloc((size_t)n, sizeof *out->aside);
    if (!out->aside_mask || !out->aside)
        rc = -1;
    if (rc == 0 &&
        (out->n_aside = profile_outlier_iterations(w, &s->res, out->aside_mask, out->aside)) < 0)
        rc = -1;
    if (rc == 0 && out->n_aside > 0)
        w->iter_aside = out->aside_mask;
    if (rc != 0 || out->n_aside <= 0) {
        free(out->aside_mask);
        free(out->aside);
        out->aside_mask = NULL;
        out->aside = NULL;
        out->n_aside = 0;
    }
    return rc;
}

/* The steady means the search ranked the baseline and the winners by into their
 * steady_ns, and, when iterations were set aside, their means over every compared
 * iteration into eval (base_all: the baseline's, simulated before the outliers were set
 * aside; the winners simulated again). Returns 0, or -1 as strategy_evaluate. */
static int
mean_over_all(searcher *s, const strategy_eval *base_all)
{
    search_result *out = s->out;
    int rc = 0;
    out->baseline.steady_ns = out->baseline.eval.iter_ns;
    for (int32_t i = 0; i < out->n_top; i++)
        out->top[i].steady_ns = out->top[i].eval.iter_ns;
    if (!s->w->iter_aside)
        return 0;
    s->w->iter_aside = NULL;
    out->baseline.eval = *base_all;
    for (int32_t i = 0; i < out->n_top && rc == 0; i++)
        rc = strategy_evaluate(s->w, &out->top[i].plan, &s->res, &out->top[i].eval);
    return rc;
}

int
search_steady_ns(workload *w, const search_result *r, const strategy_plan *p, sim_result *res,
                 double *steady_ns)
{
    strategy_eval e;
    w->iter_aside = r->n_aside > 0 ? r->aside_mask : NULL;
    int rc = strategy_evaluate(w, p, res, &e);
    w->iter_aside = NULL;
    *steady_ns = rc == 0 ? e.iter_ns : -1;
    return rc;
}

int
search_run(workload *w, const search_options *o, search_result *out)
{
    searcher s;
    search_options opts = *o;
    memset(out, 0, sizeof *out);
    memset(&s, 0, sizeof s);
    if (!opts.families)
        opts.families = STRATEGY_ALL;
    if (opts.fw_families)
        opts.families &= opts.fw_families;
    s.first_cap = opts.first_bucket_mb > 0 ? framework_nearest_cap(opts.first_bucket_mb) : -1;
    s.w = w;
    s.o = &opts;
    s.out = out;
    s.rng.s = opts.seed * 0x9E3779B97F4A7C15ULL + 0x1234567ULL;
    if (!s.rng.s)
        s.rng.s = 1;
    s.max_evals = opts.max_evals > 0 ? opts.max_evals : 2000;
    s.t0 = now_s();
    for (int i = 0; i < strategy_n_accum_steps; i++) {
        int k = strategy_accum_steps[i];
        if (k == 1 || opts.batch <= 0 || opts.batch % k == 0)
            s.accum_ok[s.n_accum_ok++] = (uint8_t)i;
    }
    int rc = -1;
    strategy_plan base;
    strategy_plan_baseline(&base);
    int np = opts.par ? opts.par->nprocs : 1;
    s.guess = calloc((size_t)np, sizeof *s.guess);
    s.recs = calloc((size_t)np, sizeof *s.recs);
    if (!s.guess || !s.recs)
        goto out;
    /* the baseline over every compared iteration: the outliers to set aside */
    strategy_eval base_all;
    w->iter_aside = NULL;
    if (strategy_evaluate(w, &base, &s.res, &base_all) != 0 || set_aside_outliers(&s) != 0)
        goto out;
    /* the baseline on every process: its simulation gives the critical-path shares */
    s.alone = 1;
    s.known = w->iter_aside ? NULL : &base_all; /* the same plan over the same iterations */
    const search_candidate *b = evaluate(&s, &base);
    s.known = NULL;
    s.alone = 0;
    if (!b || b->eval.iter_ns <= 0)
        goto out;
    out->baseline = *b;
    critical_path_shares(&s);
    if (layer_values(&s) != 0)
        goto out;
    if (opts.screen) {
        verify_screened(&s);
    } else {
        seeds(&s);
        anneal(&s);
    }
    progress(&s, 1);
    if (s.failed || pick_top(&s) != 0)
        goto out;
    if (mean_over_all(&s, &base_all) != 0)
        goto out;
    /* the typical predictions (their medians) of the baseline and the winners */
    if (strategy_evaluate_typical(w, &base, &s.res, &out->baseline.eval) != 0)
        goto out;
    for (int32_t i = 0; i < out->n_top; i++)
        if (strategy_evaluate_typical(w, &out->top[i].plan, &s.res, &out->top[i].eval) != 0)
            goto out;
    rc = 0;
out:
    w->iter_aside = NULL;
    out->elapsed_s = now_s() - s.t0;
    free(s.cache.items);
    free(s.cache.slots);
    free(s.spec.items);
    free(s.spec.slots);
    free(s.guess);
    free(s.recs);
    free(s.layer_value);
    sim_result_free(&s.res);
    /* leave the working graph on the best plan (for a timeline export) */
    if (rc == 0)
        rc = strategy_apply(w, out->n_top > 0 ? &out->top[0].plan : &base);
    return rc;
}

void
search_result_free(search_result *r)
{
    free(r->top);
    free(r->aside);
    free(r->aside_mask);
    free(r->evaluated);
    memset(r, 0, sizeof *r);
}
