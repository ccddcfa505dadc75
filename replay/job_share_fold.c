/* job_share_fold.c: a shared reading's classes merged on process 0 (see job.h and
 * job_int.h, fold_env): a process other than 0 sends the spread of each class it folded
 * (per event of the representative's signature, the least and greatest start, end and
 * duration of the ranks folded into it), not their signatures; process 0 classifies a
 * received folded rank by that spread where it decides for every member of the class,
 * and asks for the rank's own signature where it does not.
 *
 * Why the spread gives the single process's classes: the single process puts rank r into
 * the first representative P, in the order the classes were made (rank order), that r is
 * alike (job_fold_alike). Every member r of a class made on r's process with
 * representative q has q's structure (alike requires it equal) and a rank above q's. On
 * process 0, q's class is P* (q itself when q made one, else the first representative
 * alike q); every representative up to P* was made before q was classified, so before r
 * is. job_fold_alike compares per event |x - p| <= tol on doubles, monotone in x: when
 * the least and the greatest member's value are both within, every member's is, and when
 * the least is above p + tol (the greatest below p - tol) and every member compares
 * there, none is. So if the spread says "none" for each representative before some P
 * up to P* and "every one" for P, each member's first alike representative is P, as its
 * own signature would have found; anything else is decided by the signature. */
#define PR_FMT "replay"
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "dpro_log.h"
#include "dprotrace.h"
#include "job_int.h"

void
job_fold_env_free(fold_env *e)
{
    free(e->cmp);
    free(e->lo);
    free(e->hi);
    memset(e, 0, sizeof *e);
}

int
job_fold_env_add(fold_env *e, int32_t rep, const job_fold_sig *s)
{
    int rc = 0;
    if (!e->cmp) {
        size_t n = s->n > 0 ? s->n : 1;
        fold_env x = {.rep = rep,
                      .gidx = -1,
                      .n = s->n,
                      .cmp = calloc(n, sizeof *x.cmp),
                      /* zeroed: a row no member compares at (cmp 0) is sent as it is */
                      .lo = calloc(3 * n, sizeof *x.lo),
                      .hi = calloc(3 * n, sizeof *x.hi)};
        if (x.cmp && x.lo && x.hi)
            *e = x;
        else
            job_fold_env_free(&x);
    }
    if (!e->cmp)
        rc = DPRO_ERR_NOMEM;
    for (size_t i = 0; rc == 0 && i < e->n && i < s->n; i++) {
        if (s->rs[i] < 0)
            continue; /* before the window: only the structure counts (job_fold_alike) */
        int64_t v[3] = {s->rs[i], s->re[i], s->re[i] - s->rs[i]};
        for (int k = 0; k < 3; k++) {
            int64_t *lo = &e->lo[3 * i + k], *hi = &e->hi[3 * i + k];
            *lo = e->cmp[i] == 0 || v[k] < *lo ? v[k] : *lo;
            *hi = e->cmp[i] == 0 || v[k] > *hi ? v[k] : *hi;
        }
        e->cmp[i]++;
    }
    e->members += rc == 0;
    return rc;
}

int
job_fold_env_verdict(const fold_env *e, const job_fold_sig *st, const job_fold_sig *p)
{
    int same = !p->unfoldable && !st->unfoldable && st->n == p->n && st->hash == p->hash &&
               e->n == p->n && e->members > 0;
    for (size_t i = 0; same && i < p->n; i++)
        same = st->h[i] == p->h[i];
    int all = same, none = !same;
    for (size_t i = 0; same && !none && i < p->n; i++) {
        if (e->cmp[i] == 0)
            continue;
        int64_t pv[3] = {p->rs[i], p->re[i], p->re[i] - p->rs[i]};
        for (int k = 0; k < 3; k++) {
            int64_t lo = e->lo[3 * i + k], hi = e->hi[3 * i + k];
            int in_lo = job_fold_within(lo, pv[k], p->tol),
                in_hi = job_fold_within(hi, pv[k], p->tol);
            all &= in_lo && in_hi;
            if (e->cmp[i] == e->members && ((!in_lo && lo > pv[k]) || (!in_hi && hi < pv[k])))
                none = 1; /* every member is outside on one side */
        }
    }
    return none ? JOB_FOLD_NONE : all ? JOB_FOLD_ALL : JOB_FOLD_SOME;
}

/* The bytes of one spread's fixed part as job_fold_env_pack writes it (rep, members, n),
 * and of each of its rows (cmp, then 3 lo and 3 hi). */
#define ENV_HEAD_BYTES (2 * sizeof(int32_t) + sizeof(uint64_t))
#define ENV_ROW_BYTES (sizeof(int32_t) + 6 * sizeof(int64_t))

int
job_fold_env_pack(const fold_reps *reps, unsigned char **out, size_t *len)
{
    bytes b = {0};
    int32_t count = 0;
    for (int32_t k = 0; reps->env && k < reps->n; k++)
        count += reps->env[k].members > 0;
    bytes_put(&b, &count, sizeof count);
    for (int32_t k = 0; count > 0 && k < reps->n; k++) {
        const fold_env *e = &reps->env[k];
        uint64_t n = e->n;
        if (e->members == 0)
            continue;
        bytes_put(&b, &e->rep, sizeof e->rep);
        bytes_put(&b, &e->members, sizeof e->members);
        bytes_put(&b, &n, sizeof n);
        bytes_put(&b, e->cmp, e->n * sizeof *e->cmp);
        bytes_put(&b, e->lo, 3 * e->n * sizeof *e->lo);
        bytes_put(&b, e->hi, 3 * e->n * sizeof *e->hi);
    }
    return bytes_take(&b, out, len) == 0 ? 0 : DPRO_ERR_NOMEM;
}

/* Takes one spread at b's position into e (allocated here; b->fail when it is not what
 * job_fold_env_pack writes or memory ends, e then empty). */
static void
env_take(bytes *b, fold_env *e)
{
    *e = (fold_env){.gidx = -1, .by_spread = -2};
    bytes_get(b, &e->rep, sizeof e->rep);
    bytes_get(b, &e->members, sizeof e->members);
    uint64_t n = 0;
    bytes_get(b, &n, sizeof n);
    if (e->members <= 0 || n > (b->n - b->at) / ENV_ROW_BYTES)
        b->fail = 1;
    e->n = b->fail ? 0 : (size_t)n;
    size_t m = e->n > 0 ? e->n : 1;
    e->cmp = b->fail ? NULL : malloc(m * sizeof *e->cmp);
    e->lo = b->fail ? NULL : malloc(3 * m * sizeof *e->lo);
    e->hi = b->fail ? NULL : malloc(3 * m * sizeof *e->hi);
    if (!e->cmp || !e->lo || !e->hi)
        b->fail = 1;
    if (!b->fail) {
        bytes_get(b, e->cmp, e->n * sizeof *e->cmp);
        bytes_get(b, e->lo, 3 * e->n * sizeof *e->lo);
        bytes_get(b, e->hi, 3 * e->n * sizeof *e->hi);
    }
    for (size_t i = 0; !b->fail && i < e->n; i++)
        if (e->cmp[i] < 0 || e->cmp[i] > e->members)
            b->fail = 1; /* not what job_fold_env_pack writes */
    if (b->fail)
        job_fold_env_free(e);
}

int
job_fold_env_unpack(const unsigned char *p, size_t len, fold_env **env, int32_t *n, hmap *by_rep)
{
    bytes b = {.p = (unsigned char *)p, .n = len};
    int32_t count = 0, got = 0;
    bytes_get(&b, &count, sizeof count);
    int rc =
        !b.fail && count >= 0 && (uint64_t)count <= len / ENV_HEAD_BYTES ? 0 : DPRO_ERR_CORRUPT;
    fold_env *e = rc == 0 ? calloc((size_t)count + 1, sizeof *e) : NULL;
    if (rc == 0 && !e)
        rc = DPRO_ERR_CORRUPT;
    for (; rc == 0 && got < count; got++) {
        env_take(&b, &e[got]);
        if (b.fail || hmap_get(by_rep, (uint64_t)e[got].rep, -1) >= 0 ||
            hmap_put(by_rep, (uint64_t)e[got].rep, got) != 0)
            rc = DPRO_ERR_CORRUPT;
    }
    if (rc == 0 && b.at != len)
        rc = DPRO_ERR_CORRUPT;
    if (rc != 0) {
        for (int32_t k = 0; e && k <= got && k < count; k++)
            job_fold_env_free(&e[k]);
        free(e);
        e = NULL;
        got = 0;
        hmap_clear(by_rep);
    }
    *env = e;
    *n = got;
    return rc;
}

/* Classifies on process 0 a rank another process read (see job.h): by its signature
 * (t->sig, a rank folded there; taken) or its events against reps, exactly as the single
 * process does; a rank folded there and alike none of them is read again here. Returns
 * 0 or a dpro_status. */
static int
classify_received(job *j, rank_task *t, fold_reps *reps, const job_options *o)
{
    int rc = 0, whole = 1;
    job_fold_sig s;
    int skip = t->rc != 0 || (t->windowed && !t->window_ok); /* told, or read anew */
    if (!skip && t->sig) {
        int32_t into = job_fold_find(reps, t->sig);
        job_fold_sig_free(t->sig);
        free(t->sig);
        t->sig = NULL;
        if (into >= 0) {
            t->jr->folded = 1;
            t->jr->fold_rep = reps->rank[into];
            j->n_folded++;
            whole = 0;
        } else {
            pr_info("rank %d, folded while read on its process, is alike no class here: read "
                    "again",
                    t->jr->rank);
            free(t->jr->events); /* its events are needed whole */
            t->jr->events = NULL;
            t->jr->n_events = 0;
            free(t->jr->wire); /* and held expanded */
            t->jr->wire = NULL;
            t->jr->wire_len = 0;
            t->rc = job_read_rank(t, o); /* a failure is the task's, told later */
        }
    }
    if (!skip && whole && t->rc == 0) {
        t->jr->folded = 0;
        if (job_fold_signature(t->jr, t->cmp_t0, t->cmp_t1, t->cmp_ni, &s) != 0)
            rc = DPRO_ERR_NOMEM;
        else
            rc = job_fold_classify(j, t, &s, reps, 0);
    }
    return rc;
}

/* The index in reps of the class t's rank went into (its representative's), or -1
 * (not classified). */
static int32_t
class_of(const fold_reps *reps, const rank_task *t)
{
    int32_t want = t->jr->folded ? t->jr->fold_rep : t->jr->rank, into = -1;
    int classed = t->rc == 0 && !(t->windowed && !t->window_ok);
    for (int32_t k = 0; classed && into < 0 && k < reps->n; k++)
        if (reps->rank[k] == want)
            into = k;
    return into;
}

/* The first of reps up to the class of e's representative (e->gidx) that the spread
 * says every member of e is alike, or -1 when the spread does not decide (see above). */
static int32_t
by_spread(const fold_reps *reps, const fold_env *e)
{
    int32_t into = -1;
    int open = e->gidx >= 0;
    for (int32_t k = 0; open && into < 0 && k <= e->gidx; k++) {
        int v = job_fold_env_verdict(e, &reps->sig[e->gidx], &reps->sig[k]);
        if (v == JOB_FOLD_ALL)
            into = k;
        open = v == JOB_FOLD_NONE;
    }
    return into;
}

/* Asks process p for the signature of t[i] into t[i].sig, counted in j. Returns 0 or a
 * dpro_status. */
static int
ask_sig(job *j, const job_share *sh, int p, rank_task *t, int32_t i)
{
    void *buf = NULL;
    size_t len = 0;
    int bad = 0;
    int rc =
        sh->ask(sh->ctx, p, i) == 0 && sh->recv(sh->ctx, p, &buf, &len) == 0 ? 0 : DPRO_ERR_NOMEM;
    if (rc == 0)
        t[i].sig = job_share_sig_take(buf, len, &bad);
    if (rc == 0 && (bad || !t[i].sig))
        rc = DPRO_ERR_CORRUPT; /* a folded rank's process holds its signature */
    if (rc == 0) {
        j->share_sig_rows += t[i].sig->n;
        j->share_sig_bytes += len;
    }
    free(buf);
    return rc;
}

int
job_share_classify(job *j, const job_share *sh, int p, rank_task *t, int32_t i, fold_reps *reps,
                   fold_env *envs, const hmap *by_rep, const job_options *o)
{
    int rc = 0;
    rank_task *r = &t[i];
    int skip = r->rc != 0 || (r->windowed && !r->window_ok);
    int32_t e = !skip && r->local_rep >= 0 ? hmap_get(by_rep, (uint64_t)r->local_rep, -1) : -1;
    if (e >= 0 && envs[e].by_spread < -1)
        envs[e].by_spread = by_spread(reps, &envs[e]); /* the same for every member */
    int32_t into = e >= 0 ? envs[e].by_spread : -1;
    if (into >= 0) {
        r->jr->folded = 1;
        r->jr->fold_rep = reps->rank[into];
        j->n_folded++;
        j->share_by_spread++;
    } else {
        if (!skip && r->local_rep >= 0) {
            rc = ask_sig(j, sh, p, t, i);
            j->share_sig_asked++;
        }
        if (rc == 0)
            rc = classify_received(j, r, reps, o);
        int32_t own = rc == 0 ? hmap_get(by_rep, (uint64_t)r->jr->rank, -1) : -1;
        if (own >= 0)
            envs[own].gidx = class_of(reps, r); /* a representative on its process */
    }
    return rc;
}
