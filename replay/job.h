/*
 * job.h: a job as a directory of per-rank traces (prefix job_).
 *
 * job_load lists the traces (dpro_list_traces), reads each one's meta and events and
 * orders them by rank. It tells the user, in plain words, what is wrong with the set:
 * two jobs mixed in one directory (different job_id or world_size: refused unless a
 * job id is chosen), a rank missing, a rank twice, a world size that does not match,
 * damaged batches, dropped events. Problems that still leave an honest partial answer
 * (a missing rank, damage) are warnings recorded in job->diag; the others fail.
 */
#ifndef DPRO_REPLAY_JOB_H
#define DPRO_REPLAY_JOB_H

#include <stddef.h>
#include <stdint.h>

#include "dprotrace.h"

typedef struct job_rank {
    int32_t rank;
    char *path;
    dpro_reader *reader; /* kept open: strings and tables live in it */
    dpro_event *events;  /* all events, in start-time order */
    size_t n_events;
    const char *host;
    const char *job_id;
    int32_t world_size;
    uint64_t bad_batches;
    uint64_t dropped;
} job_rank;

typedef struct job {
    job_rank *ranks; /* indexed by rank: ranks[r].reader == NULL when rank r is missing */
    int32_t n_ranks; /* world size (or the highest rank + 1) */
    int32_t n_present;
    char *job_id;
    char **diag; /* warnings, in order (also printed with pr_warn) */
    size_t n_diag;
} job;

typedef struct job_options {
    const char *job_id; /* load only traces of this job (NULL: the directory must hold one) */
    size_t max_events;  /* per rank, 0: no limit (events past it are dropped with a warning) */
} job_options;

/* Loads the traces under path (a directory or one file). opts may be NULL. On failure
 * returns a dpro_status < 0 and writes what is wrong into errbuf; on success returns 0
 * and *j must be freed with job_free. */
int job_load(const char *path, const job_options *opts, job *j, char *errbuf, size_t errlen);

void job_free(job *j);

/* Records a warning in j->diag and prints it. */
void job_warn(job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
