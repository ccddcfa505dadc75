/*
 * cpuuse.c: what the process's host had and used, for the replay's host-share model
 * (docs/models.md, "Ranks sharing a host's CPUs"): the CPUs it may run on
 * (sched_getaffinity of the process, that is of its main thread, read when the collector
 * starts: at load time, and in a forked child when its writer thread starts) and samples
 * of its CPU time (CLOCK_PROCESS_CPUTIME_ID: user and system, every thread) against
 * CLOCK_MONOTONIC. Sampled by the writer thread after each drain (every DPRO_DRAIN_MS to
 * 4 x that), never on a hook's path; written as meta rows when the file is finished:
 * host_cpus (the count), host_cpu_list (which ones: a launcher that binds each rank to a
 * core leaves each one CPU, and only the set says whether two ranks' CPUs are the same or
 * not), host_cpu_list_end (the process's set read again at the end, only where the job
 * changed it) and cpu_samples. The writer thread's own set is not the job's: it keeps the
 * set of the thread that started it, whatever the job's threads are bound to later.
 * Each sample also samples the traced threads' scheduler figures (threadsched.c).
 */
#include "config.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cpuset.h"
#include "internal.h"

/* At most this many samples are kept: when full, every other one is dropped and new ones
 * are kept only as far apart as the remaining ones, so a long job keeps evenly spaced
 * samples over its whole run (some 24 bytes of meta text each, at most COLL_CPU_SAMPLE_TEXT). */
#define COLL_CPU_SAMPLES 1024

static struct {
    int64_t t_us[COLL_CPU_SAMPLES];   /* CLOCK_MONOTONIC (the trace's clock), us */
    int64_t cpu_us[COLL_CPU_SAMPLES]; /* the process's CPU time, us */
    int n;
    int64_t spacing_us; /* the least time between two kept samples (0 at first: a sample
                         * at every drain) */
} coll_cpu;

/* The process's CPUs as read at its start (coll_cpu_note_affinity). */
static struct {
    pid_t pid;  /* the process they were read in (0: not read) */
    int count;  /* how many (0: the reading failed) */
    char *list; /* their cpulist text, malloc'd, or NULL */
} coll_cpu_start;

/* The CPUs process pid may run on: their count, and their cpulist text in *list
 * (malloc'd, the caller frees; NULL when memory ends). Returns 0 when the kernel does not
 * say (no rows are written then). */
static int
coll_cpu_affinity(pid_t pid, char **list)
{
    size_t size = 0;
    cpu_set_t *set = cpuset_affinity(pid, &size);
    int count = set ? CPU_COUNT_S(size, set) : 0;
    *list = set ? cpuset_list_text(set, size) : NULL;
    CPU_FREE(set);
    return count;
}

void
coll_cpu_note_affinity(void)
{
    free(coll_cpu_start.list);
    coll_cpu_start.pid = getpid();
    coll_cpu_start.count = coll_cpu_affinity(coll_cpu_start.pid, &coll_cpu_start.list);
}

void
coll_cpu_reset(void)
{
    memset(&coll_cpu, 0, sizeof coll_cpu);
    coll_sched_reset();
    if (coll_cpu_start.pid != getpid())
        coll_cpu_note_affinity(); /* a forked child: its own start */
    coll_cpu_sample(1);
}

void
coll_cpu_sample(int force)
{
    struct timespec c;
    int64_t t = coll_sample_now_us();
    if (!force && coll_cpu.n > 0 && t - coll_cpu.t_us[coll_cpu.n - 1] < coll_cpu.spacing_us)
        return;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c) != 0)
        return;
    if (coll_cpu.n == COLL_CPU_SAMPLES) {
        for (int i = 0; i < COLL_CPU_SAMPLES / 2; i++) {
            coll_cpu.t_us[i] = coll_cpu.t_us[2 * i];
            coll_cpu.cpu_us[i] = coll_cpu.cpu_us[2 * i];
        }
        coll_cpu.n = COLL_CPU_SAMPLES / 2;
        /* the kept samples' mean spacing: new ones come as far apart as the old */
        coll_cpu.spacing_us = (coll_cpu.t_us[coll_cpu.n - 1] - coll_cpu.t_us[0]) / (coll_cpu.n - 1);
    }
    coll_cpu.t_us[coll_cpu.n] = t;
    coll_cpu.cpu_us[coll_cpu.n] = (int64_t)c.tv_sec * 1000000 + c.tv_nsec / 1000;
    coll_cpu.n++;
    coll_sched_sample(t, force);
}

/* The longest text of one sample: a comma, two int64 in decimal with their signs, a colon. */
#define COLL_CPU_SAMPLE_TEXT (1 + 2 * 20 + 1)

void
coll_cpu_write_meta(dpro_writer *w)
{
    static char buf[COLL_CPU_SAMPLES * COLL_CPU_SAMPLE_TEXT + 1];
    size_t len = 0;
    char *end = NULL;
    int end_count = coll_cpu_affinity(getpid(), &end);
    if (coll_cpu_start.count > 0) /* none: no host_cpus, the job goes on */
        dpro_writer_set_meta_int(w, DPRO_META_HOST_CPUS, coll_cpu_start.count);
    if (coll_cpu_start.list)
        dpro_writer_set_meta(w, DPRO_META_HOST_CPU_LIST, coll_cpu_start.list);
    if (end_count > 0 && end && coll_cpu_start.list && strcmp(end, coll_cpu_start.list) != 0)
        dpro_writer_set_meta(w, DPRO_META_HOST_CPU_LIST_END, end); /* the job rebound */
    free(end);
    coll_cpu_sample(1);
    for (int i = 0; i < coll_cpu.n && len + COLL_CPU_SAMPLE_TEXT < sizeof buf; i++)
        len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%lld:%lld", i ? "," : "",
                                (long long)coll_cpu.t_us[i], (long long)coll_cpu.cpu_us[i]);
    if (coll_cpu.n >= 2)
        dpro_writer_set_meta(w, DPRO_META_CPU_SAMPLES, buf);
    coll_sched_write_meta(w);
}
