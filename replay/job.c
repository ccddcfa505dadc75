/* job.c: loading a directory of per-rank traces (see job.h). */
#define PR_FMT "replay"
#include "job.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dpro_log.h"
#include "job_fold.h"
#include "job_int.h"
#include "replay.h" /* replay_rank_iters_free */

void
job_warn(job *j, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (!j->quiet)
        pr_warn("%s", buf);
    char **d = realloc(j->diag, (j->n_diag + 1) * sizeof *d);
    if (!d)
        return;
    j->diag = d;
    d[j->n_diag] = strdup(buf);
    if (d[j->n_diag])
        j->n_diag++;
}

void
job_free(job *j)
{
    for (int32_t r = 0; r < j->n_ranks; r++) {
        free(j->ranks[r].events);
        free(j->ranks[r].wire);
        free(j->ranks[r].bounds);
        job_rank_forget(&j->ranks[r]);
        free(j->ranks[r].path);
        dpro_reader_close(j->ranks[r].reader);
    }
    free(j->ranks);
    for (size_t i = 0; i < j->n_diag; i++)
        free(j->diag[i]);
    free(j->diag);
    free(j->job_id);
    memset(j, 0, sizeof *j);
}

void
job_align_part_free(job_align_part *a)
{
    if (a)
        free(a->s);
    free(a);
}

void
job_rank_forget(job_rank *jr)
{
    job_align_part_free(jr->align);
    jr->align = NULL;
    if (jr->iters)
        replay_rank_iters_free(jr->iters);
    free(jr->iters);
    jr->iters = NULL;
}

const char *const job_meta_names[JOB_META_KEYS + 1] = {
    [JOB_META_HOST] = DPRO_META_HOST,
    [JOB_META_SOURCE] = DPRO_META_SOURCE,
    [JOB_META_HOST_CPUS] = DPRO_META_HOST_CPUS,
    [JOB_META_CPU_SAMPLES] = DPRO_META_CPU_SAMPLES,
    [JOB_META_COMMAND] = DPRO_META_COMMAND,
    [JOB_META_HOST_CPU_LIST] = DPRO_META_HOST_CPU_LIST,
    [JOB_META_HOST_CPU_LIST_END] = DPRO_META_HOST_CPU_LIST_END,
    [JOB_META_KEYS] = NULL,
};

const char *
job_rank_meta(const job_rank *jr, job_meta_key k)
{
    int known = (int)k >= 0 && k < JOB_META_KEYS && job_meta_names[k];
    return known && jr->reader ? dpro_reader_meta(jr->reader, job_meta_names[k]) : NULL;
}

const char *const job_local_meta_names[JOB_LOCAL_META_KEYS + 1] = {
    [JOB_LOCAL_META_THREAD_SCHED] = DPRO_META_THREAD_SCHED,
    [JOB_LOCAL_META_KEYS] = NULL,
};

const char *
job_rank_meta_local(const job_rank *jr, job_local_meta_key k)
{
    int known = (int)k >= 0 && k < JOB_LOCAL_META_KEYS && job_local_meta_names[k];
    return known && jr->reader ? dpro_reader_meta(jr->reader, job_local_meta_names[k]) : NULL;
}

int64_t
job_rank_meta_int(const job_rank *jr, job_meta_key k, int64_t dflt)
{
    int known = (int)k >= 0 && k < JOB_META_KEYS && job_meta_names[k];
    return known && jr->reader ? dpro_reader_meta_int(jr->reader, job_meta_names[k], dflt) : dflt;
}

/* Opens listed file i into l->o[i] (see opened). Returns 0 or DPRO_ERR_NOMEM. */
static int
open_one(listing *l, size_t i)
{
    opened *o = &l->o[i];
    char eb[DPRO_ERRBUF_SIZE];
    int orc = dpro_reader_open(l->files[i], &o->r, eb, sizeof eb), rc = 0;
    if (orc != DPRO_OK) {
        o->r = NULL;
        o->newer = orc == DPRO_ERR_VERSION;
        o->why = strdup(eb);
        rc = o->why ? 0 : DPRO_ERR_NOMEM;
    } else {
        const char *id = dpro_reader_meta(o->r, DPRO_META_JOB_ID);
        const char *w = dpro_reader_warnings(o->r);
        o->ok = 1;
        o->ended_early = dpro_reader_ended_early(o->r);
        o->rank = dpro_reader_meta_int(o->r, DPRO_META_RANK, -1);
        o->world = dpro_reader_meta_int(o->r, DPRO_META_WORLD_SIZE, -1);
        o->job_id = strdup(id ? id : "");
        o->warnings = *w ? strdup(w) : NULL;
        dpro_reader_detach(o->r); /* no open file a trace: each pass opens it anew */
        rc = o->job_id && (!*w || o->warnings) ? 0 : DPRO_ERR_NOMEM;
    }
    return rc;
}

/* Opens every listed file (in shared reading: this process's share of them in
 * job_share_file_order's order, the others' outcomes gathered, job_share_opened), notes its rank,
 * world size and job id, and warns, in file order, about files that cannot be opened, end early or
 * carry reader warnings. Returns 0, or a dpro_status (a newer schema refuses the whole load; no
 * readable file at all; out of memory). */
static int
open_all(job *j, listing *l, const job_share *sh, char *errbuf, size_t errlen)
{
    int rc = 0;
    int32_t lo = 0, hi = (int32_t)l->nfiles;
    size_t *order = sh ? job_share_file_order(l->files, l->nfiles) : NULL;
    l->o = calloc(l->nfiles + 1, sizeof *l->o);
    if (!l->o || l->nfiles > INT32_MAX || (sh && !order))
        rc = DPRO_ERR_NOMEM;
    if (sh)
        job_share_range(sh, hi, &lo, &hi);
    for (int32_t k = lo; rc == 0 && k < hi; k++)
        rc = open_one(l, order ? order[k] : (size_t)k);
    j->files_opened = hi - lo;
    /* every process takes part even when out of memory here, and fails on reading */
    if (sh && job_share_opened(sh, l->o, order, rc == 0 ? (int32_t)l->nfiles : 0, lo, hi) != 0)
        rc = DPRO_ERR_NOMEM;
    for (int32_t k = 0; rc == 0 && sh && k < (int32_t)l->nfiles; k++) /* file k's process */
        l->o[order[k]].proc = (int32_t)((int64_t)k * sh->nprocs / (int64_t)l->nfiles);
    free(order);
    if (rc != 0)
        snprintf(errbuf, errlen, "out of memory");
    for (size_t i = 0; rc == 0 && i < l->nfiles; i++) {
        opened *o = &l->o[i];
        if (o->newer) {
            snprintf(errbuf, errlen, "%s", o->why);
            rc = DPRO_ERR_VERSION;
            continue;
        }
        if (!o->ok) {
            job_warn(j, "%s: skipped: %s", l->files[i], o->why);
            continue;
        }
        o->path = l->files[i];
        if (o->ended_early)
            job_warn(j,
                     "%s: the trace ends early (cut short, or its process did not close it); "
                     "what it holds is replayed",
                     l->files[i]);
        if (o->warnings)
            job_warn(j, "%s", o->warnings);
        l->n_ok++;
    }
    if (rc == 0 && l->n_ok == 0) {
        snprintf(errbuf, errlen, "%s: no readable trace", l->path);
        rc = DPRO_ERR_NOT_TRACE;
    }
    return rc;
}

/* Writes into desc (size len) every (job_id, world_size) found, with its trace count and
 * an example file. */
static void
describe_jobs(const listing *l, char *desc, size_t len)
{
    size_t dl = 0;
    desc[0] = 0;
    for (size_t i = 0; i < l->nfiles && dl + 200 < len; i++) {
        const opened *oi = &l->o[i];
        if (!oi->ok)
            continue;
        int dup = 0;
        size_t cnt = 0;
        for (size_t k = 0; k < l->nfiles; k++) {
            const opened *ok = &l->o[k];
            int same = ok->ok && strcmp(ok->job_id, oi->job_id) == 0 && ok->world == oi->world;
            dup |= same && k < i;
            cnt += (size_t)same;
        }
        if (dup)
            continue;
        dl += (size_t)snprintf(desc + dl, len - dl,
                               "%s job_id '%s' world_size %lld (%zu traces, e.g. %s)",
                               dl ? ";" : "", oi->job_id, (long long)oi->world, cnt, oi->path);
    }
}

/* Chooses the job to load: the one asked for (job_id, may be NULL), or the only one
 * present. Sets l->want and l->want_world. Returns 0, or DPRO_ERR_ARG when the asked job
 * has no trace or the files hold more than one job (errbuf describes them). */
static int
choose_job(listing *l, const char *job_id, char *errbuf, size_t errlen)
{
    int rc = 0;
    l->want = job_id;
    l->want_world = -2;
    for (size_t i = 0; i < l->nfiles; i++) {
        if (!l->o[i].ok || (l->want && strcmp(l->o[i].job_id, l->want) != 0))
            continue;
        if (!l->want)
            l->want = l->o[i].job_id;
        if (l->want_world == -2)
            l->want_world = l->o[i].world;
    }
    if (l->want_world == -2) {
        snprintf(errbuf, errlen, "%s: no trace of job '%s'", l->path, job_id);
        rc = DPRO_ERR_ARG;
    }
    int mixed = 0;
    for (size_t i = 0; rc == 0 && i < l->nfiles; i++) {
        if (!l->o[i].ok)
            continue;
        int same = strcmp(l->o[i].job_id, l->want) == 0 && l->o[i].world == l->want_world;
        if (!same && !(job_id && strcmp(l->o[i].job_id, job_id) != 0))
            mixed = 1;
        if (!same && job_id && strcmp(l->o[i].job_id, job_id) == 0)
            mixed = 1;
    }
    if (mixed) {
        char desc[1024];
        describe_jobs(l, desc, sizeof desc);
        snprintf(errbuf, errlen,
                 "%s holds traces of more than one job:%s. Replay one job at a time "
                 "(put each in its own directory, or choose one with --job ID)",
                 l->path, desc);
        rc = DPRO_ERR_ARG;
    }
    return rc;
}

/* The world size of the chosen job: its world_size, or the highest rank + 1. A lone
 * trace without a rank is rank 0. Sets *world. Returns 0, or DPRO_ERR_ARG (traces
 * without a rank, a rank past the world size, an implausible world size). */
static int
job_world(listing *l, int64_t *world, char *errbuf, size_t errlen)
{
    int rc = 0;
    int64_t max_rank = -1;
    int no_rank = 0;
    for (size_t i = 0; i < l->nfiles; i++) {
        if (!l->o[i].ok || strcmp(l->o[i].job_id, l->want) != 0)
            continue;
        if (l->o[i].rank < 0)
            no_rank++;
        if (l->o[i].rank > max_rank)
            max_rank = l->o[i].rank;
    }
    if (no_rank && l->n_ok == 1 && no_rank == 1) {
        for (size_t i = 0; i < l->nfiles; i++)
            if (l->o[i].ok)
                l->o[i].rank = 0;
        max_rank = 0;
    } else if (no_rank) {
        snprintf(errbuf, errlen, "%s: %d traces carry no rank in their meta", l->path, no_rank);
        rc = DPRO_ERR_ARG;
    }
    *world = l->want_world > 0 ? l->want_world : max_rank + 1;
    if (rc == 0 && max_rank >= *world) {
        snprintf(errbuf, errlen, "%s: rank %lld found but world_size is %lld", l->path,
                 (long long)max_rank, (long long)*world);
        rc = DPRO_ERR_ARG;
    }
    if (rc == 0 && *world > (1 << 20)) {
        snprintf(errbuf, errlen, "%s: world_size %lld is not plausible", l->path,
                 (long long)*world);
        rc = DPRO_ERR_ARG;
    }
    return rc;
}

/* Gives every trace of the chosen job its place in j->ranks (world entries; a present
 * rank has a path), taking its reader from l where this process opened it. Returns 0,
 * DPRO_ERR_NOMEM, or DPRO_ERR_ARG for a rank found twice. */
static int
place_ranks(job *j, listing *l, int64_t world, char *errbuf, size_t errlen)
{
    int rc = 0;
    j->n_ranks = (int32_t)world;
    j->ranks = calloc((size_t)world, sizeof *j->ranks);
    j->job_id = strdup(l->want);
    if (!j->ranks || !j->job_id) {
        rc = DPRO_ERR_NOMEM;
        snprintf(errbuf, errlen, "out of memory");
    }
    for (size_t i = 0; rc == 0 && i < l->nfiles; i++) {
        opened *o = &l->o[i];
        if (!o->ok || strcmp(o->job_id, l->want) != 0)
            continue;
        job_rank *jr = &j->ranks[o->rank];
        if (jr->path) {
            snprintf(errbuf, errlen, "%s: rank %lld appears twice (%s and %s)", l->path,
                     (long long)o->rank, jr->path, o->path);
            rc = DPRO_ERR_ARG;
            break;
        }
        jr->rank = (int32_t)o->rank;
        jr->reader = o->r;
        o->r = NULL;
        if (!(jr->path = strdup(o->path))) {
            snprintf(errbuf, errlen, "out of memory");
            rc = DPRO_ERR_NOMEM;
        }
        jr->host = job_rank_meta(jr, JOB_META_HOST);
        jr->job_id = j->job_id;
        jr->world_size = (int32_t)world;
        j->n_present++;
    }
    return rc;
}

/* Warns about the ranks of the world size that have no trace. */
static void
warn_missing(job *j)
{
    char miss[256] = "";
    size_t ml = 0;
    int32_t n_miss = 0;
    for (int32_t r = 0; r < j->n_ranks; r++) {
        if (j->ranks[r].path)
            continue;
        n_miss++;
        if (ml + 16 < sizeof miss)
            ml += (size_t)snprintf(miss + ml, sizeof miss - ml, "%s%d", ml ? ", " : "", r);
    }
    if (n_miss)
        job_warn(j,
                 "world_size is %d but %d rank(s) have no trace (missing: %s%s); the "
                 "replay covers the %d present ranks and collectives wait only for them",
                 j->n_ranks, n_miss, miss, ml + 16 >= sizeof miss ? ", ..." : "", j->n_present);
}

typedef int (*task_fn)(rank_task *t, const job_options *o);

/* Tasks shared by the threads of one phase: each takes the next one not taken. */
typedef struct task_pool {
    rank_task *t;
    int32_t n;
    task_fn fn;
    const job_options *o;
    atomic_int next;
} task_pool;

static void *
pool_worker(void *arg)
{
    task_pool *p = arg;
    for (int i; (i = atomic_fetch_add(&p->next, 1)) < p->n;)
        p->t[i].rc = p->fn(&p->t[i], p->o);
    return NULL;
}

/* Runs fn on the n tasks with up to jobs threads, the caller's among them (fewer when
 * a thread cannot be started: the others take its share). */
static void
pool_run(rank_task *t, int32_t n, int jobs, task_fn fn, const job_options *o)
{
    task_pool p = {.t = t, .n = n, .fn = fn, .o = o};
    pthread_t th[JOB_MAX_JOBS];
    int started = 0;
    atomic_init(&p.next, 0);
    for (int i = 1; i < jobs && i < n; i++)
        if (pthread_create(&th[started], NULL, pool_worker, &p) == 0)
            started++;
    pool_worker(&p);
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
}

/* Threads to read with: opts->jobs, or the number of CPUs; 1 to JOB_MAX_JOBS. */
static int
job_threads(const job_options *opts)
{
    long n = opts && opts->jobs > 0 ? opts->jobs : sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        n = 1;
    return n > JOB_MAX_JOBS ? JOB_MAX_JOBS : (int)n;
}

/* Hands the tasks' warnings to job_warn in rank order (with_empty: and that a rank has
 * no events), then the first failure (in rank order) to errbuf; the ranks after a failed
 * one are not told about, as a load rank by rank would not have reached them. Returns 0
 * or the failure's status. */
static int
report_tasks(job *j, rank_task *t, int32_t n, int with_empty, char *errbuf, size_t errlen)
{
    int rc = 0;
    for (int32_t i = 0; rc == 0 && i < n; i++) {
        for (size_t k = 0; k < t[i].n_msg; k++)
            job_warn(j, "%s", t[i].msg[k]);
        rc = t[i].rc;
        if (rc != 0)
            snprintf(errbuf, errlen, "%s", t[i].err ? t[i].err : "out of memory");
        else if (with_empty && t[i].jr->n_events == 0)
            job_warn(j, "rank %d: the trace holds no events (%s)", t[i].jr->rank, t[i].jr->path);
    }
    return rc;
}

/* The status of the first task that failed, in rank order, or 0. */
static int
first_failure(const rank_task *t, int32_t n)
{
    for (int32_t i = 0; i < n; i++)
        if (t[i].rc != 0)
            return t[i].rc;
    return 0;
}

/* Forgets the window: the events read are dropped, to be read again whole. */
static void
drop_window(job *j, rank_task *t, int32_t n, size_t *n_msg)
{
    for (int32_t i = 0; i < n; i++) {
        free(t[i].jr->events);
        t[i].jr->events = NULL;
        free(t[i].jr->wire); /* a folded rank's events held compact */
        t[i].jr->wire = NULL;
        t[i].jr->wire_len = 0;
        t[i].jr->n_events = 0;
        t[i].jr->folded = 0;
        t[i].windowed = 0;
        if (t[i].sig)
            job_fold_sig_free(t[i].sig);
        free(t[i].sig);
        t[i].sig = NULL;
        free(t[i].packed); /* the read it held is read again */
        t[i].packed = NULL;
        free(t[i].sig_packed);
        t[i].sig_packed = NULL;
        while (t[i].n_msg > n_msg[i])
            free(t[i].msg[--t[i].n_msg]);
    }
    j->iter_skipped = 0;
    j->window_warmup = -1;
    j->n_folded = 0;
}

/* Classifies the tasks read in one wave, in rank order (see job.h): a rank alike a
 * representative in reps is folded into it and reduced, another becomes one (its
 * signature kept). With keep, folded ranks keep their signatures (t->sig). Returns 0 or
 * DPRO_ERR_NOMEM. */
static int
fold_wave(job *j, rank_task *t, int32_t n, fold_reps *reps, int keep)
{
    int rc = 0;
    for (int32_t i = 0; rc == 0 && i < n; i++) {
        job_fold_sig s;
        if (t[i].rc != 0 || (t[i].windowed && !t[i].window_ok))
            continue; /* told, or every event is read anew */
        if (job_fold_signature(t[i].jr, t[i].cmp_t0, t[i].cmp_t1, t[i].cmp_ni, &s) != 0)
            rc = DPRO_ERR_NOMEM;
        else
            rc = job_fold_classify(j, &t[i], &s, reps, keep);
    }
    return rc;
}

/* The second pass when folding while reading: waves of `jobs` ranks, each classified
 * (fold_wave) against reps (the caller's, grown here) before the next is read. A process
 * other than 0 of a shared reading keeps its folded ranks' signatures and packs each rank
 * read (job_share_pack); the single process and process 0 hold each folded rank's reduced
 * events compact (job_rank_hold_compact: the graph's passes expand them one rank at a
 * time). Returns 0 or a dpro_status (a failed read is the task's, told by
 * report_tasks). */
static int
read_folding(job *j, rank_task *t, int32_t n, int jobs, const job_options *opts, fold_reps *reps)
{
    int rc = 0, packs = opts->share && opts->share->me != 0; /* its reads go to process 0 */
    for (int32_t w = 0; rc == 0 && w < n; w += jobs) {
        int32_t m = n - w < jobs ? n - w : jobs;
        pool_run(t + w, m, jobs, job_read_rank, opts);
        rc = fold_wave(j, t + w, m, reps, packs);
        for (int32_t i = w; rc == 0 && packs && i < w + m; i++)
            rc = job_share_pack(j, &t[i]); /* held compressed until sent to process 0 */
        for (int32_t i = w; rc == 0 && !packs && i < w + m; i++)
            if (t[i].jr->folded) /* as process 0 holds the others' folded ranks */
                rc = job_rank_hold_compact(t[i].jr);
        for (int32_t i = w; i < w + m; i++) /* the folded ranks' events and signatures */
            job_trim(j, (size_t)(t[i].loaded - t[i].jr->n_events) *
                            (sizeof(job_event) + 3 * sizeof(int64_t)));
    }
    return rc;
}

/* After the second pass: 0 when a read failed, 1 when none did but a rank's window does
 * not show its iterations (every event is to be read anew), 2 otherwise; in shared
 * reading the smallest over every process. Returns it, or -1 (the transport failed). */
static int
reads_state(const job_options *opts, const rank_task *t, int32_t lo, int32_t hi)
{
    const job_share *sh = opts ? opts->share : NULL;
    int v = first_failure(t + lo, hi - lo) != 0 ? 0 : 2;
    for (int32_t i = lo; v == 2 && i < hi; i++)
        if (t[i].windowed && !t[i].window_ok)
            v = 1;
    if (sh && sh->min(sh->ctx, v, &v) != 0)
        v = -1;
    return v;
}

/* Tells what the load read (process 0 of a shared reading: for every process). */
static void
tell_read(const job *j, int windowed, const int32_t *span, int32_t n)
{
    if (windowed)
        pr_info("read the window of iterations %d to %d and the one before them: %llu of %llu "
                "events",
                span[0], span[1], (unsigned long long)j->events_loaded,
                (unsigned long long)j->events_in_files);
    if (j->n_folded)
        pr_info("%d of %d ranks folded while read: %llu of %llu events read kept", j->n_folded, n,
                (unsigned long long)j->events_kept, (unsigned long long)j->events_loaded);
}

/* Reads the events of every present rank (in shared reading: of this process's share,
 * then gathered on process 0), in parallel, the window only where one is asked for and
 * fits, folding alike ranks where asked (see job.h). Returns 0 or a dpro_status. */
static int
read_ranks(job *j, const job_options *opts, char *errbuf, size_t errlen)
{
    int rc = 0, jobs = job_threads(opts), windowed = 0, reported = 0, fold = 0;
    int32_t n = 0, lo = 0, hi = 0, span[2] = {0, 0};
    const job_share *sh = opts ? opts->share : NULL;
    period_words words = {0};
    rank_task *t = calloc((size_t)j->n_present + 1, sizeof *t);
    size_t *n_msg = calloc((size_t)j->n_present + 1, sizeof *n_msg);
    fold_reps reps = {calloc((size_t)j->n_present + 1, sizeof *reps.sig),
                      calloc((size_t)j->n_present + 1, sizeof *reps.rank), 0, NULL};
    if (sh && sh->me != 0) /* its classes' spreads go to process 0 (job_fold_env_add) */
        reps.env = calloc((size_t)j->n_present + 1, sizeof *reps.env);
    if (!t || !n_msg || !reps.sig || !reps.rank || (sh && sh->me != 0 && !reps.env))
        rc = DPRO_ERR_NOMEM;
    for (int32_t r = 0; rc == 0 && r < j->n_ranks; r++)
        if (j->ranks[r].path)
            t[n++].jr = &j->ranks[r];
    hi = n;
    if (sh)
        job_share_range(sh, n, &lo, &hi);
    j->share_lo = lo;
    j->share_hi = hi;
    job_share_close_others(sh, t, n, lo, hi);
    for (int32_t i = lo; sh && sh->me != 0 && i < hi; i++)
        j->files_opened += !t[i].jr->reader; /* not in its share of the files */
    int want_window = opts && opts->iterations > 0 && !opts->full && !opts->max_events;
    int want_fold = opts && opts->fold && !opts->max_events && n > 1;
    for (int32_t i = lo; rc == 0 && i < hi; i++)
        t[i].scan_period = want_fold;
    if (rc == 0 && (want_window || want_fold)) {
        pool_run(t + lo, hi - lo, jobs, job_scan_bounds, opts);
        if (sh && want_fold)
            rc = job_period_share(sh, t, n, lo, hi, &words);
        if (rc == 0)
            rc = job_period_agree(j, t, n);
        job_period_words_free(&words); /* the scans that named their kernels there are cut */
        if (rc == 0 && sh)
            rc = job_share_bounds(sh, t, n, lo, hi);
        if (rc == 0 && first_failure(t, n) != 0) {
            rc = report_tasks(j, t, n, 0, errbuf, errlen);
            reported = 1;
        } else if (rc == 0 && (windowed = job_choose_window(j, t, n, opts, span)) < 0) {
            rc = DPRO_ERR_NOMEM;
        }
        fold = rc == 0 && want_fold && t[0].cmp_ni > 0;
        for (int32_t i = 0; i < n; i++)
            n_msg[i] = t[i].n_msg;
#ifdef __GLIBC__
        malloc_trim(0); /* the first pass's buffers, freed in every thread's arena */
#endif
    }
    if (rc == 0 && fold)
        rc = read_folding(j, t + lo, hi - lo, jobs, opts, &reps);
    else if (rc == 0)
        pool_run(t + lo, hi - lo, jobs, job_read_rank, opts);
    int state = rc == 0 ? reads_state(opts, t, lo, hi) : 0;
    if (state < 0)
        rc = DPRO_ERR_NOMEM;
    if (rc == 0 && windowed && state == 1) {
        if (!j->quiet)
            pr_info("the compared iterations' window does not show the iterations found in "
                    "the whole traces: every event is loaded");
        drop_window(j, t + lo, hi - lo, n_msg + lo);
        windowed = fold = 0;
        pool_run(t + lo, hi - lo, jobs, job_read_rank, opts);
    }
    if (rc == 0 && sh)
        rc = job_share_collect(j, sh, t, n, lo, hi, fold ? &reps : NULL, opts);
    for (int32_t i = 0; rc == 0 && sh && sh->me == 0 && i < n; i++)
        if ((i < lo || i >= hi) && t[i].bpos && !t[i].jr->bounds && t[i].rc == 0 &&
            (t[i].rc = job_period_place_ends(&t[i])) != 0)
            job_task_fail(&t[i], t[i].rc,
                          "%s: the events sent by its process do not show the "
                          "iterations found in it",
                          t[i].jr->path);
    int told = rc == 0 && sh && sh->me != 0; /* process 0 tells, for every process */
    for (int32_t i = 0; rc == 0 && !told && i < n; i++) {
        j->events_in_files += t[i].in_file;
        j->events_loaded += t[i].loaded;
        j->events_kept += t[i].jr->n_events;
    }
    if (rc == 0 && !told)
        tell_read(j, windowed && first_failure(t, n) == 0, span, n);
    if (rc == 0 && !told)
        rc = report_tasks(j, t, n, 1, errbuf, errlen);
    else if (rc != 0 && !reported)
        snprintf(errbuf, errlen, "out of memory");
    for (int32_t i = 0; t && i < n; i++)
        job_task_free(&t[i]);
    for (int32_t k = 0; k < reps.n; k++) {
        job_fold_sig_free(&reps.sig[k]);
        if (reps.env)
            job_fold_env_free(&reps.env[k]);
    }
    free(reps.env);
    free(reps.sig);
    free(reps.rank);
    free(t);
    free(n_msg);
    return rc;
}

int
job_load(const char *path, const job_options *opts, job *j, char *errbuf, size_t errlen)
{
    memset(j, 0, sizeof *j);
    j->window_warmup = -1;
    j->quiet = opts && opts->share && opts->share->me != 0;
    listing l = {.path = path};
    int64_t world = 0;
    const char *paths[1] = {path};
    const job_share *sh = opts ? opts->share : NULL;
    int rc = dpro_list_traces(paths, 1, &l.files, &l.nfiles, errbuf, errlen);
    if (rc == DPRO_OK)
        rc = open_all(j, &l, sh, errbuf, errlen);
    if (rc == 0)
        rc = choose_job(&l, opts ? opts->job_id : NULL, errbuf, errlen);
    if (rc == 0)
        rc = job_world(&l, &world, errbuf, errlen);
    if (rc == 0)
        rc = place_ranks(j, &l, world, errbuf, errlen);
    if (rc == 0 && sh)
        rc = job_share_readers(j, &l, sh, errbuf, errlen);
    if (rc == 0) {
        warn_missing(j);
        rc = read_ranks(j, opts, errbuf, errlen);
    }
    if (rc == 0 && sh)
        pr_info("opened %d of the %zu trace files here", j->files_opened, l.nfiles);
    for (size_t i = 0; l.o && i < l.nfiles; i++)
        job_opened_free(&l.o[i]);
    free(l.o);
    dpro_free_paths(l.files, l.nfiles);
    if (rc != 0)
        job_free(j);
    return rc;
}
