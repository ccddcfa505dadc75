/* inputs.c: the trace files a replaying command reads (see inputs.h). */
#define PR_FMT "replay"
#include "inputs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpro_log.h"
#include "fs.h"

/* Whether file is the trace of one of rp's ranks (job_load keeps the listed path). */
static int
is_loaded(const replay *rp, const char *file)
{
    for (int32_t r = 0; r < rp->job.n_ranks; r++)
        if (rp->job.ranks[r].path && strcmp(rp->job.ranks[r].path, file) == 0)
            return 1;
    return 0;
}

int
inputs_check_read(const replay *rp, const char *path, int partial)
{
    char **files = NULL, err[DPRO_ERRBUF_SIZE], list[1024] = "";
    size_t nfiles = 0, len = 0, n_unread = 0;
    const char *paths[1] = {path};
    int rc = 0;

    if (dpro_list_traces(paths, 1, &files, &nfiles, err, sizeof err) != DPRO_OK) {
        pr_err("%s", err);
        rc = 1;
    }
    for (size_t i = 0; files && i < nfiles; i++) {
        dpro_reader *r = NULL;
        /* a listed file that is no rank's was skipped as unreadable, or is another job's */
        if (is_loaded(rp, files[i]))
            continue;
        if (dpro_reader_open(files[i], &r, err, sizeof err) == DPRO_OK) {
            dpro_reader_close(r);
            continue;
        }
        n_unread++;
        if (len + 4 < sizeof list)
            len +=
                (size_t)snprintf(list + len, sizeof list - len, "%s%s", len ? ", " : "", files[i]);
    }
    for (int32_t r = 0; r < rp->job.n_ranks; r++) {
        const job_rank *jr = &rp->job.ranks[r];
        if (!jr->reader || !jr->bad_batches)
            continue;
        n_unread++;
        if (len + 4 < sizeof list)
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%s (%llu damaged batches)",
                                    len ? ", " : "", jr->path, (unsigned long long)jr->bad_batches);
    }
    if (len >= sizeof list - 4)
        snprintf(list + sizeof list - 5, 5, "...");
    if (n_unread && !partial) {
        pr_err("%zu trace file(s) could not be read whole: %s; pass --partial to go on with "
               "what could be read",
               n_unread, list);
        rc = 1;
    }
    dpro_free_paths(files, nfiles);
    return rc;
}

/* SQLite's side files of a trace: the write-ahead log (part of the trace's data), its
 * index and the rollback journal; not to be written over either. */
static const char *const side_suffix[] = {"", "-wal", "-shm", "-journal"};
#define N_SIDE (sizeof side_suffix / sizeof side_suffix[0])

/* Lists the trace files under path and their side files into *files (*nfiles entries;
 * dpro_free_paths). Returns 0, or 1 with an error printed. */
static int
list_inputs(const char *path, char ***files, size_t *nfiles)
{
    char **traces = NULL, err[DPRO_ERRBUF_SIZE];
    size_t ntraces = 0, n = 0;
    const char *paths[1] = {path};
    int rc = 0;

    *files = NULL;
    *nfiles = 0;
    if (dpro_list_traces(paths, 1, &traces, &ntraces, err, sizeof err) != DPRO_OK) {
        pr_err("%s", err);
        rc = 1;
    } else {
        *files = calloc(ntraces * N_SIDE + 1, sizeof **files);
        for (size_t i = 0; *files && i < ntraces; i++) {
            for (size_t k = 0; k < N_SIDE; k++) {
                size_t len = strlen(traces[i]) + strlen(side_suffix[k]) + 1;
                char *p = malloc(len);
                if (!p)
                    break;
                snprintf(p, len, "%s%s", traces[i], side_suffix[k]);
                (*files)[n++] = p;
            }
        }
        *nfiles = n;
        if (!*files || n != ntraces * N_SIDE) {
            pr_err("out of memory");
            rc = 1;
        }
    }
    dpro_free_paths(traces, ntraces);
    return rc;
}

int
inputs_check_output(const char *path, const char *out, int force)
{
    char **files = NULL, err[1024];
    size_t nfiles = 0;
    int rc = list_inputs(path, &files, &nfiles);
    if (rc == 0 &&
        dpro_output_check(out, force, (const char *const *)files, nfiles, err, sizeof err) != 0) {
        pr_err("%s", err);
        rc = 1;
    }
    dpro_free_paths(files, nfiles);
    return rc;
}

FILE *
inputs_open_output(const char *path, const char *out, int force)
{
    char **files = NULL, err[1024];
    size_t nfiles = 0;
    FILE *f = NULL;
    if (list_inputs(path, &files, &nfiles) == 0) {
        f = dpro_output_open(out, force, (const char *const *)files, nfiles, err, sizeof err);
        if (!f)
            pr_err("%s", err);
    }
    dpro_free_paths(files, nfiles);
    return f;
}
