/* job.c: loading a directory of per-rank traces (see job.h). */
#define PR_FMT "replay"
#include "job.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpro_log.h"

void
job_warn(job *j, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
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

typedef struct opened {
    dpro_reader *r;
    const char *path;
    int64_t rank, world;
    const char *job_id;
    int taken;
} opened;

/* Reads every event of one rank; returns 0 or a dpro_status. */
static int
read_events(job *j, job_rank *jr, size_t max_events, char *errbuf, size_t errlen)
{
    dpro_iter *it = NULL;
    int rc = dpro_iter_open(jr->reader, &it);
    if (rc != DPRO_OK) {
        snprintf(errbuf, errlen, "%s: %s", jr->path, dpro_reader_errmsg(jr->reader));
        return rc;
    }
    size_t cap = 4096;
    jr->events = malloc(cap * sizeof *jr->events);
    if (!jr->events) {
        dpro_iter_close(it);
        snprintf(errbuf, errlen, "out of memory");
        return DPRO_ERR_NOMEM;
    }
    int truncated = 0;
    for (;;) {
        dpro_event ev;
        rc = dpro_iter_next(it, &ev);
        if (rc == 0)
            break;
        if (rc < 0) {
            job_warn(j, "rank %d: %s (batch skipped)", jr->rank, dpro_reader_errmsg(jr->reader));
            continue;
        }
        if (max_events && jr->n_events >= max_events) {
            truncated = 1;
            break;
        }
        if (jr->n_events == cap) {
            dpro_event *e = realloc(jr->events, cap * 2 * sizeof *e);
            if (!e) {
                dpro_iter_close(it);
                snprintf(errbuf, errlen, "out of memory reading %s", jr->path);
                return DPRO_ERR_NOMEM;
            }
            jr->events = e;
            cap *= 2;
        }
        jr->events[jr->n_events++] = ev;
    }
    jr->bad_batches = dpro_iter_bad_batches(it);
    dpro_iter_close(it);
    if (truncated)
        job_warn(j, "rank %d: more than %zu events; the rest is ignored", jr->rank, max_events);
    dpro_trace_summary sum;
    if (dpro_reader_summary(jr->reader, &sum) == DPRO_OK && sum.dropped > 0) {
        jr->dropped = sum.dropped;
        job_warn(j, "rank %d: the collector dropped %llu events; the replay may miss work",
                 jr->rank, (unsigned long long)sum.dropped);
    }
    return 0;
}

/* The trace files a load looks at: the listing and one entry per file. */
typedef struct listing {
    const char *path; /* what the caller named */
    char **files;
    size_t nfiles;
    opened *o;          /* one per file; o[i].r == NULL: not opened, or taken by a rank */
    size_t n_ok;        /* files opened */
    const char *want;   /* job_id of the job loaded */
    int64_t want_world; /* its world_size (-1: not said) */
} listing;

/* Opens every listed file, notes its rank, world size and job id, and warns about files
 * that cannot be opened, end early or carry reader warnings. Returns 0, or a dpro_status
 * (a newer schema refuses the whole load; no readable file at all). */
static int
open_all(job *j, listing *l, char *errbuf, size_t errlen)
{
    int rc = 0;
    l->o = calloc(l->nfiles, sizeof *l->o);
    if (!l->o) {
        rc = DPRO_ERR_NOMEM;
        snprintf(errbuf, errlen, "out of memory");
    }
    for (size_t i = 0; rc == 0 && i < l->nfiles; i++) {
        opened *o = &l->o[i];
        char eb[DPRO_ERRBUF_SIZE];
        int orc = dpro_reader_open(l->files[i], &o->r, eb, sizeof eb);
        if (orc != DPRO_OK) {
            if (orc == DPRO_ERR_VERSION) {
                snprintf(errbuf, errlen, "%s", eb);
                rc = orc;
            } else {
                job_warn(j, "%s: skipped: %s", l->files[i], eb);
            }
            continue;
        }
        o->path = l->files[i];
        if (dpro_reader_ended_early(o->r))
            job_warn(j,
                     "%s: the trace ends early (cut short, or its process did not close it); "
                     "what it holds is replayed",
                     l->files[i]);
        if (*dpro_reader_warnings(o->r))
            job_warn(j, "%s", dpro_reader_warnings(o->r));
        o->rank = dpro_reader_meta_int(o->r, DPRO_META_RANK, -1);
        o->world = dpro_reader_meta_int(o->r, DPRO_META_WORLD_SIZE, -1);
        o->job_id = dpro_reader_meta(o->r, DPRO_META_JOB_ID);
        if (!o->job_id)
            o->job_id = "";
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
        if (!oi->r)
            continue;
        int dup = 0;
        size_t cnt = 0;
        for (size_t k = 0; k < l->nfiles; k++) {
            const opened *ok = &l->o[k];
            int same = ok->r && strcmp(ok->job_id, oi->job_id) == 0 && ok->world == oi->world;
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
        if (!l->o[i].r || (l->want && strcmp(l->o[i].job_id, l->want) != 0))
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
        if (!l->o[i].r)
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
        if (!l->o[i].r || strcmp(l->o[i].job_id, l->want) != 0)
            continue;
        if (l->o[i].rank < 0)
            no_rank++;
        if (l->o[i].rank > max_rank)
            max_rank = l->o[i].rank;
    }
    if (no_rank && l->n_ok == 1 && no_rank == 1) {
        for (size_t i = 0; i < l->nfiles; i++)
            if (l->o[i].r)
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

/* Gives every trace of the chosen job its place in j->ranks (world entries), taking its
 * reader from l. Returns 0, DPRO_ERR_NOMEM, or DPRO_ERR_ARG for a rank found twice. */
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
        if (!o->r || strcmp(o->job_id, l->want) != 0)
            continue;
        job_rank *jr = &j->ranks[o->rank];
        if (jr->reader) {
            snprintf(errbuf, errlen, "%s: rank %lld appears twice (%s and %s)", l->path,
                     (long long)o->rank, jr->path, o->path);
            rc = DPRO_ERR_ARG;
            break;
        }
        jr->rank = (int32_t)o->rank;
        jr->reader = o->r;
        o->r = NULL;
        jr->path = strdup(o->path);
        jr->host = dpro_reader_meta(jr->reader, DPRO_META_HOST);
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
        if (j->ranks[r].reader)
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

/* Reads the events of every present rank. Returns 0 or a dpro_status. */
static int
read_ranks(job *j, size_t max_events, char *errbuf, size_t errlen)
{
    int rc = 0;
    for (int32_t r = 0; rc == 0 && r < j->n_ranks; r++) {
        if (!j->ranks[r].reader)
            continue;
        rc = read_events(j, &j->ranks[r], max_events, errbuf, errlen);
        if (rc == 0 && j->ranks[r].n_events == 0)
            job_warn(j, "rank %d: the trace holds no events (%s)", r, j->ranks[r].path);
    }
    return rc;
}

int
job_load(const char *path, const job_options *opts, job *j, char *errbuf, size_t errlen)
{
    memset(j, 0, sizeof *j);
    listing l = {.path = path};
    int64_t world = 0;
    const char *paths[1] = {path};
    int rc = dpro_list_traces(paths, 1, &l.files, &l.nfiles, errbuf, errlen);
    if (rc == DPRO_OK)
        rc = open_all(j, &l, errbuf, errlen);
    if (rc == 0)
        rc = choose_job(&l, opts ? opts->job_id : NULL, errbuf, errlen);
    if (rc == 0)
        rc = job_world(&l, &world, errbuf, errlen);
    if (rc == 0)
        rc = place_ranks(j, &l, world, errbuf, errlen);
    if (rc == 0) {
        warn_missing(j);
        rc = read_ranks(j, opts ? opts->max_events : 0, errbuf, errlen);
    }
    for (size_t i = 0; l.o && i < l.nfiles; i++)
        dpro_reader_close(l.o[i].r);
    free(l.o);
    dpro_free_paths(l.files, l.nfiles);
    if (rc != 0)
        job_free(j);
    return rc;
}
