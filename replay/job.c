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

int
job_load(const char *path, const job_options *opts, job *j, char *errbuf, size_t errlen)
{
    memset(j, 0, sizeof *j);
    char **files = NULL;
    size_t nfiles = 0;
    const char *paths[1] = {path};
    opened *o = NULL;
    int rc = dpro_list_traces(paths, 1, &files, &nfiles, errbuf, errlen);
    if (rc != DPRO_OK)
        return rc;
    o = calloc(nfiles, sizeof *o);
    if (!o) {
        rc = DPRO_ERR_NOMEM;
        snprintf(errbuf, errlen, "out of memory");
        goto out;
    }
    size_t n_ok = 0;
    for (size_t i = 0; i < nfiles; i++) {
        char eb[DPRO_ERRBUF_SIZE];
        int orc = dpro_reader_open(files[i], &o[i].r, eb, sizeof eb);
        if (orc != DPRO_OK) {
            if (orc == DPRO_ERR_VERSION) {
                snprintf(errbuf, errlen, "%s", eb);
                rc = orc;
                goto out;
            }
            job_warn(j, "%s: skipped: %s", files[i], eb);
            continue;
        }
        o[i].path = files[i];
        if (dpro_reader_ended_early(o[i].r))
            job_warn(j, "%s: the trace ends early (cut short, or its process did not close it); "
                        "what it holds is replayed", files[i]);
        if (*dpro_reader_warnings(o[i].r))
            job_warn(j, "%s", dpro_reader_warnings(o[i].r));
        o[i].rank = dpro_reader_meta_int(o[i].r, DPRO_META_RANK, -1);
        o[i].world = dpro_reader_meta_int(o[i].r, DPRO_META_WORLD_SIZE, -1);
        o[i].job_id = dpro_reader_meta(o[i].r, DPRO_META_JOB_ID);
        if (!o[i].job_id)
            o[i].job_id = "";
        n_ok++;
    }
    if (n_ok == 0) {
        snprintf(errbuf, errlen, "%s: no readable trace", path);
        rc = DPRO_ERR_NOT_TRACE;
        goto out;
    }

    /* Which job: the one asked for, or the only one present. */
    const char *want = opts && opts->job_id ? opts->job_id : NULL;
    int64_t want_world = -2;
    for (size_t i = 0; i < nfiles; i++) {
        if (!o[i].r || (want && strcmp(o[i].job_id, want) != 0))
            continue;
        if (!want)
            want = o[i].job_id;
        if (want_world == -2)
            want_world = o[i].world;
    }
    if (want_world == -2) {
        snprintf(errbuf, errlen, "%s: no trace of job '%s'", path, opts->job_id);
        rc = DPRO_ERR_ARG;
        goto out;
    }
    {
        /* two jobs? describe every (job_id, world_size) found */
        char desc[1024] = "";
        size_t dl = 0;
        int mixed = 0;
        for (size_t i = 0; i < nfiles; i++) {
            if (!o[i].r)
                continue;
            int same = strcmp(o[i].job_id, want) == 0 && o[i].world == want_world;
            if (!same && !(opts && opts->job_id && strcmp(o[i].job_id, opts->job_id) != 0))
                mixed = 1;
            if (!same && opts && opts->job_id && strcmp(o[i].job_id, opts->job_id) == 0)
                mixed = 1;
        }
        if (mixed) {
            for (size_t i = 0; i < nfiles && dl + 200 < sizeof desc; i++) {
                if (!o[i].r)
                    continue;
                int dup = 0;
                for (size_t k = 0; k < i; k++)
                    if (o[k].r && strcmp(o[k].job_id, o[i].job_id) == 0 && o[k].world == o[i].world)
                        dup = 1;
                if (dup)
                    continue;
                size_t cnt = 0;
                for (size_t k = 0; k < nfiles; k++)
                    if (o[k].r && strcmp(o[k].job_id, o[i].job_id) == 0 && o[k].world == o[i].world)
                        cnt++;
                dl += (size_t)snprintf(desc + dl, sizeof desc - dl,
                                       "%s job_id '%s' world_size %lld (%zu traces, e.g. %s)",
                                       dl ? ";" : "", o[i].job_id, (long long)o[i].world, cnt,
                                       o[i].path);
            }
            snprintf(errbuf, errlen,
                     "%s holds traces of more than one job:%s. Replay one job at a time "
                     "(put each in its own directory, or choose one with --job ID)",
                     path, desc);
            rc = DPRO_ERR_ARG;
            goto out;
        }
    }

    /* ranks */
    int64_t max_rank = -1;
    int no_rank = 0;
    for (size_t i = 0; i < nfiles; i++) {
        if (!o[i].r || strcmp(o[i].job_id, want) != 0)
            continue;
        if (o[i].rank < 0)
            no_rank++;
        if (o[i].rank > max_rank)
            max_rank = o[i].rank;
    }
    if (no_rank) {
        if (n_ok == 1 && no_rank == 1) {
            for (size_t i = 0; i < nfiles; i++)
                if (o[i].r)
                    o[i].rank = 0;
            max_rank = 0;
        } else {
            snprintf(errbuf, errlen, "%s: %d traces carry no rank in their meta", path, no_rank);
            rc = DPRO_ERR_ARG;
            goto out;
        }
    }
    int64_t world = want_world > 0 ? want_world : max_rank + 1;
    if (max_rank >= world) {
        snprintf(errbuf, errlen, "%s: rank %lld found but world_size is %lld", path,
                 (long long)max_rank, (long long)world);
        rc = DPRO_ERR_ARG;
        goto out;
    }
    if (world > (1 << 20)) {
        snprintf(errbuf, errlen, "%s: world_size %lld is not plausible", path, (long long)world);
        rc = DPRO_ERR_ARG;
        goto out;
    }
    j->n_ranks = (int32_t)world;
    j->ranks = calloc((size_t)world, sizeof *j->ranks);
    j->job_id = strdup(want);
    if (!j->ranks || !j->job_id) {
        rc = DPRO_ERR_NOMEM;
        snprintf(errbuf, errlen, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < nfiles; i++) {
        if (!o[i].r || strcmp(o[i].job_id, want) != 0)
            continue;
        job_rank *jr = &j->ranks[o[i].rank];
        if (jr->reader) {
            snprintf(errbuf, errlen, "%s: rank %lld appears twice (%s and %s)", path,
                     (long long)o[i].rank, jr->path, o[i].path);
            rc = DPRO_ERR_ARG;
            goto out;
        }
        jr->rank = (int32_t)o[i].rank;
        jr->reader = o[i].r;
        o[i].r = NULL;
        jr->path = strdup(o[i].path);
        jr->host = dpro_reader_meta(jr->reader, DPRO_META_HOST);
        jr->job_id = j->job_id;
        jr->world_size = (int32_t)world;
        j->n_present++;
    }
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
    for (int32_t r = 0; r < j->n_ranks; r++) {
        if (!j->ranks[r].reader)
            continue;
        rc = read_events(j, &j->ranks[r], opts ? opts->max_events : 0, errbuf, errlen);
        if (rc != 0)
            goto out;
        if (j->ranks[r].n_events == 0)
            job_warn(j, "rank %d: the trace holds no events (%s)", r, j->ranks[r].path);
    }
    rc = 0;
out:
    if (o)
        for (size_t i = 0; i < nfiles; i++)
            dpro_reader_close(o[i].r);
    free(o);
    dpro_free_paths(files, nfiles);
    if (rc != 0)
        job_free(j);
    return rc;
}
