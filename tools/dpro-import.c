/*
 * dpro-import: turn traces of other tools into dpro traces.
 *
 *   dpro-import kineto FILE... -o DIR [--keep-partial] [--quiet] [--job-id ID]
 *                                     [--single-thread] [--allow-empty] [--jobs N]
 *   dpro-import nsys FILE.sqlite... -o DIR [--quiet] [--job-id ID] [--allow-empty]
 *   dpro-import et ET.json... --kineto FILE... -o DIR [the kineto options]
 *
 * One dpro trace per input file (PyTorch profiler / Kineto Chrome-trace JSON, plain or
 * gzip), named like the collector names its files: rank<R>-<host>-<pid>.dpro. Each file is
 * written under a hidden temporary name and renamed once its rank, host and pid are known
 * (they may come after the events in the JSON). The mapping is import_kineto.h's.
 *
 * et: PyTorch execution traces (ExecutionTraceObserver's JSON, plain or gzip), the i-th
 * joined to the i-th --kineto trace, of the same process and steps: the Kineto trace is
 * imported as by `kineto`, its ops gaining the execution trace's host graph (import_et.h,
 * import_kineto.h). An execution trace has no times, so it is not imported alone.
 *
 * nsys: Nsight Systems SQLite exports (nsys export --type sqlite); every process of every
 * file is one rank (rank<R>-<host>-<pid>.dpro, ranks numbered in file order, then in the
 * export's process order). The mapping is import_nsys.h's.
 *
 * Files are imported in parallel (--jobs N files read and converted at once, default the
 * CPUs, at most the number of files), each by one thread into its own trace; up to N more
 * threads close theirs meanwhile (the one sync of a trace waits for the disk without
 * holding a CPU). The traces are renamed, and the messages printed, in the order of the
 * inputs, so that the traces, the names and stderr are those of --jobs 1. A trace is
 * written under a hidden temporary name, synced once, then renamed, and DIR is synced once
 * after the last rename (and the directory above each level of DIR it creates, at once):
 * an import killed or a machine crashed leaves whole traces under trace names and nothing
 * else but temporary files, and once dpro-import has exited no crash takes a trace back to
 * its temporary name.
 *
 * A file none of whose events is a device operation (kernel, copy, set: a CPU-only trace,
 * or another device's, whose categories are named in a warning) is refused unless
 * --allow-empty.
 *
 * DIR may be, or lie under, a symbolic link to a directory. A symbolic link at a trace's own
 * name in DIR is refused (exit 1), never replaced; a regular file there is replaced.
 *
 * Exit status: 0 all files imported, 1 an input could not be imported (bad input, I/O, no
 * device operation), 2 usage.
 */
#define PR_FMT "import"

#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dpro_log.h"
#include "dprotrace.h"
#include "fs.h"
#include "handoff.h"
#include "import_et.h"
#include "import_kineto.h"
#include "import_nsys.h"
#include "pool.h"

enum { EXIT_OK = 0, EXIT_BAD_INPUT = 1, EXIT_USAGE = 2 };

static void
usage(FILE *f)
{
    fprintf(f, "usage: dpro-import kineto FILE... -o DIR [options]\n"
               "       dpro-import nsys FILE.sqlite... -o DIR [options]\n"
               "       dpro-import et ET.json... --kineto FILE... -o DIR [options]\n"
               "\n"
               "Imports PyTorch profiler (Kineto) Chrome-trace JSON files (plain or .gz), one\n"
               "per rank, into dpro traces DIR/rank<R>-<host>-<pid>" DPRO_TRACE_SUFFIX ".\n"
               "Every Kineto since PyTorch 1.8 is read, CUDA and ROCm; events of categories\n"
               "dpro does not know (another device's) are counted and named in a warning.\n"
               "nsys: Nsight Systems SQLite exports (nsys export --type sqlite), every process\n"
               "in them one rank: kernels, copies, sets, runtime and driver calls, NVTX\n"
               "ranges and NCCL collectives (--keep-partial and --single-thread: kineto only).\n"
               "et: PyTorch execution traces (ExecutionTraceObserver JSON, plain or .gz), each\n"
               "joined to the Kineto trace of the same process and steps (the i-th --kineto):\n"
               "the Kineto trace is imported, its ops gaining the execution trace's node id,\n"
               "parent, data dependencies, input shapes and types.\n"
               "\n"
               "  -o, --output DIR     directory of the dpro traces (created if missing; a\n"
               "                       trace of the same name is replaced, a symbolic link\n"
               "                       at that name refused)\n"
               "  -k, --keep-partial   keep the events read before damaged input\n"
               "  -q, --quiet          no summary on stderr\n"
               "  -j, --job-id ID      job_id of the traces (default: a hash of the world\n"
               "                       size and the contents of the files imported together,\n"
               "                       so one per world size and import; ranks of one job\n"
               "                       imported one by one need one --job-id)\n"
               "  -e, --allow-empty    import a trace without any device operation (kernel,\n"
               "                       copy, set) too: a CPU-only trace, or another device's\n"
               "                       whose categories dpro does not know (default: refused)\n"
               "      --jobs N         files read and converted at once, one thread each\n"
               "                       (default: the CPUs, at most the number of files; a\n"
               "                       file's sync to disk does not hold one of them; the\n"
               "                       traces are the same for any N)\n"
               "  -s, --single-thread  parse and write each file on one thread: less JSON per\n"
               "                       second than with a writer thread, but more per\n"
               "                       CPU-second (the default when --jobs fills the CPUs)\n"
               "  -K, --kineto FILE    et: the Kineto trace of the i-th execution trace (one\n"
               "                       --kineto per execution trace, in the same order)\n"
               "  -h, --help           this help\n"
               "  -V, --version        version\n"
               "\n"
               "Exit status: 0 imported, 1 bad input, no device operation (without\n"
               "--allow-empty) or I/O error, 2 usage.\n");
}

/* Removes a trace file and the SQLite side files a failed writer may leave. */
static void
remove_trace(const char *path)
{
    char side[4096];
    unlink(path);
    snprintf(side, sizeof(side), "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof(side), "%s-shm", path);
    unlink(side);
    snprintf(side, sizeof(side), "%s-journal", path);
    unlink(side);
}

/* Host names become part of a file name: keep letters, digits, '.', '-' and '_'. */
static void
sanitize(char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-' || c == '_'))
            *s = '_';
    }
}

/* Whether final is a symbolic link (said on stderr for file). rename would replace a link
 * at final, not follow it, but a link there is someone's on purpose: it is refused rather
 * than dropped silently (a regular file is replaced: a re-import of the same rank). */
static int
final_is_link(const char *file, const char *final)
{
    struct stat st;
    int link = lstat(final, &st) == 0 && S_ISLNK(st.st_mode);
    if (link)
        pr_err("%s: %s is a symbolic link: not replaced (remove it, or import into another "
               "directory)",
               file, final);
    return link;
}

/* Renames the finished trace tmp to final unless one of earlier[0..n) (entries may be
 * NULL) has that name; removes tmp on failure. Returns EXIT_OK or EXIT_BAD_INPUT. */
static int
place_trace(const char *file, const char *tmp, const char *final, char *const *earlier, int n)
{
    for (int j = 0; j < n; j++) {
        if (earlier[j] && strcmp(earlier[j], final) == 0) {
            pr_err("%s: its trace name %s is taken by an earlier input (same rank, host and "
                   "pid)",
                   file, final);
            remove_trace(tmp);
            return EXIT_BAD_INPUT;
        }
    }
    if (final_is_link(file, final)) {
        remove_trace(tmp);
        return EXIT_BAD_INPUT;
    }
    if (rename(tmp, final) != 0) {
        pr_err("%s: cannot rename %s to %s: %s", file, tmp, final, strerror(errno));
        remove_trace(tmp);
        return EXIT_BAD_INPUT;
    }
    return EXIT_OK;
}

/* Syncs dir's entries once `placed` traces were renamed into it (none: nothing to sync).
 * Returns EXIT_OK or EXIT_BAD_INPUT, said on stderr. */
static int
sync_traces_dir(const char *dir, int placed)
{
    if (placed == 0 || dpro_sync_dir(dir) == 0)
        return EXIT_OK;
    pr_err("%s: cannot sync the directory after renaming %d trace%s into it: %s (the traces are "
           "whole, but a machine crash could leave them under their temporary names)",
           dir, placed, placed == 1 ? "" : "s", strerror(errno));
    return EXIT_BAD_INPUT;
}

/* The options that shape each file's import. */
typedef struct import_flags {
    int keep_partial, quiet, single_thread, allow_empty;
    uint64_t files_id; /* kineto_files_identity of all the inputs (the default job id's) */
} import_flags;

/* One input file: imported to its temporary name by a worker (import_to_tmp), then
 * renamed and reported in input order (finish_one). */
typedef struct file_task {
    const char *file;
    const char *et; /* its execution trace (dpro-import et), or NULL */
    int index;
    int status;   /* EXIT_OK or EXIT_BAD_INPUT once imported */
    int keep;     /* tmp holds a trace to rename to final */
    int partial;  /* ... read only up to damaged input (--keep-partial) */
    int imported; /* import_to_tmp has returned */
    char tmp[4096], final[4096];
    char *log, *summary; /* messages, and the summary printed once renamed */
    size_t log_len, summary_len;
    FILE *logf, *summaryf; /* open on log and summary while importing */
} file_task;

/* What the workers share. */
typedef struct import_run {
    file_task *t;
    int n;
    const char *dir, *job_id;
    const import_flags *fl;
    int inline_writer;    /* no writer thread per file (the workers fill the CPUs) */
    sem_t cpu_slots;      /* --jobs: the workers that may read and convert at once */
    pthread_mutex_t lock; /* guards next_finish and the tasks' imported flags */
    int next_finish;      /* the first task not yet renamed and reported */
} import_run;

#define task_err(t, ...) dpro_log_to((t)->logf, DPRO_LOG_ERROR, PR_FMT, __VA_ARGS__)
#define task_warn(t, ...) dpro_log_to((t)->logf, DPRO_LOG_WARN, PR_FMT, __VA_ARGS__)

/* Says how much of t's execution trace et was joined to its Kineto trace. */
static void
print_et_join(file_task *t, et_graph *et)
{
    size_t n = et_graph_count(et), rf = 0, joined = 0;
    for (size_t i = 0; i < n; i++) {
        const et_node *x = et_graph_node(et, i);
        rf += x->has_rf != 0;
        joined += x->joined != 0;
    }
    fprintf(t->summaryf,
            "  execution trace %s (schema %s): %zu nodes, %zu with a Record function id, %zu of "
            "them joined to Kineto ops, %llu data dependencies\n",
            t->et, et_graph_schema(et), n, rf, joined, (unsigned long long)et_graph_deps(et));
    if (joined == 0)
        task_warn(t, "%s: no node of %s joined: not the same process, or not the same steps?",
                  t->file, t->et);
}

/* Takes one of r's CPU slots, waiting for it. */
static void
take_cpu_slot(import_run *r)
{
    while (sem_wait(&r->cpu_slots) != 0 && errno == EINTR)
        ;
}

/* Reads and converts t->file into a new trace at t->tmp, holding a CPU slot of r while
 * it does: *w and *k are the open writer and the importer (*irc its status) for
 * import_to_tmp to close, *et the execution trace (or NULL); on failure before there is
 * anything to close, the error is said in t->logf and *w is NULL. The writer's last batch
 * is flushed here, so that what the close leaves is the mark of a whole trace and the
 * one sync. */
static void
read_into_tmp(file_task *t, import_run *r, dpro_writer **w, kineto_importer **k, et_graph **et,
              int *irc)
{
    const import_flags *fl = r->fl;
    char errbuf[512];
    int rc = DPRO_OK;
    *w = NULL;
    *k = NULL;
    *et = NULL;
    take_cpu_slot(r);
    if (t->et && et_graph_load_path(t->et, et, errbuf, sizeof(errbuf)) != DPRO_OK) {
        task_err(t, "%s", errbuf);
        task_err(t, "%s: not imported", t->file);
        rc = DPRO_ERR_IO;
    }
    dpro_writer_options wo;
    kineto_writer_options(&wo);
    wo.private_until_close = 1; /* t->tmp: nobody reads it before its rename */
    if (rc == DPRO_OK && (rc = dpro_writer_open(t->tmp, &wo, w, errbuf, sizeof(errbuf))) != DPRO_OK)
        task_err(t, "%s: cannot create %s: %s", t->file, t->tmp, errbuf);
    kineto_options ko = {.et = *et,
                         .source_file = t->file,
                         .file_index = t->index,
                         .file_count = r->n,
                         .job_id = r->job_id,
                         .inline_writer = fl->single_thread || r->inline_writer,
                         .files_id = fl->files_id};
    if (rc == DPRO_OK && (rc = kineto_importer_new(*w, &ko, k)) != DPRO_OK) {
        task_err(t, "%s: %s", t->file, dpro_status_str(rc));
        dpro_writer_close(*w);
        *w = NULL;
        remove_trace(t->tmp);
    }
    if (rc == DPRO_OK) {
        *irc = kineto_import_path(*k, t->file);
        dpro_writer_flush(*w); /* failing, it fails the close too */
    }
    if (rc != DPRO_OK) {
        et_graph_free(*et);
        *et = NULL;
    }
    sem_post(&r->cpu_slots);
}

/* Imports t->file into t->tmp and fills t (status, keep, partial, final; its messages in
 * t->logf, its summary in t->summaryf). The close, which waits for the disk, holds no CPU
 * slot: another worker reads and converts meanwhile. */
static void
import_to_tmp(file_task *t, import_run *r)
{
    const import_flags *fl = r->fl;
    snprintf(t->tmp, sizeof(t->tmp), "%s/.dpro-import-%ld-%d.tmp", r->dir, (long)getpid(),
             t->index);
    remove_trace(t->tmp);
    t->status = EXIT_BAD_INPUT;
    dpro_writer *w;
    kineto_importer *k;
    et_graph *et;
    int irc = DPRO_OK;
    read_into_tmp(t, r, &w, &k, &et, &irc);
    if (!w)
        return;
    kineto_result res;
    kineto_importer_result(k, &res);
    uint64_t written = dpro_writer_events(w);
    int crc = dpro_writer_close(w);
    int failed = irc != DPRO_OK || crc != DPRO_OK;
    if (irc != DPRO_OK)
        task_err(t, "%s", kineto_importer_errmsg(k));
    if (crc != DPRO_OK)
        task_err(t, "%s: closing the trace: %s", t->file, dpro_status_str(crc));
    char cats[512];
    uint64_t cat_events = 0;
    if (kineto_importer_unknown_categories(k, cats, sizeof(cats), &cat_events) > 0)
        task_warn(t, "%s: %llu events of categories dpro does not know, not imported: %s", t->file,
                  (unsigned long long)cat_events, cats);
    if (failed && (!fl->keep_partial || crc != DPRO_OK)) {
        remove_trace(t->tmp);
        if (!fl->quiet)
            task_err(t, "%s: not imported%s", t->file,
                     fl->keep_partial ? ""
                                      : " (--keep-partial keeps the events before the damage)");
    } else if (!failed && res.device_ops == 0 && !fl->allow_empty) {
        task_err(t,
                 "%s: no device operation (kernel, memory copy or set) among its %llu events: "
                 "not imported (--allow-empty imports it)",
                 t->file, (unsigned long long)res.events_in);
        remove_trace(t->tmp);
    } else {
        char host[256];
        snprintf(host, sizeof(host), "%s", res.host ? res.host : "import");
        sanitize(host);
        snprintf(t->final, sizeof(t->final), "%s/rank%lld-%s-%lld" DPRO_TRACE_SUFFIX, r->dir,
                 (long long)res.rank, host, (long long)res.pid);
        t->keep = 1;
        t->partial = failed;
        t->status = failed ? EXIT_BAD_INPUT : EXIT_OK;
        if (!fl->quiet) {
            fprintf(t->summaryf,
                    "  rank %lld of %lld, %llu trace events read, %llu dpro events "
                    "written, %llu not mapped\n",
                    (long long)res.rank, (long long)res.world_size,
                    (unsigned long long)res.events_in, (unsigned long long)written,
                    (unsigned long long)res.unmapped);
            kineto_importer_print_unmapped(k, t->summaryf);
            if (et)
                print_et_join(t, et);
        }
    }
    kineto_importer_free(k);
    et_graph_free(et);
}

/* Closes a task's message buffer (log or summary), prints it on stderr if print, frees it. */
static void
flush_buffer(FILE **f, char **buf, const size_t *len, int print)
{
    if (*f && *f != stderr)
        fclose(*f);
    *f = NULL;
    if (print && *buf && *len)
        fwrite(*buf, 1, *len, stderr);
    free(*buf);
    *buf = NULL;
}

/* Renames the i-th imported file to its final name unless an earlier input took that
 * name (same rank, host and pid: refused), and prints its messages. Runs in input order. */
static void
finish_one(import_run *r, int i)
{
    file_task *t = &r->t[i];
    flush_buffer(&t->logf, &t->log, &t->log_len, 1);
    if (t->keep) {
        for (int j = 0; j < i && t->keep; j++) {
            if (r->t[j].keep && strcmp(r->t[j].final, t->final) == 0) {
                pr_err("%s: its trace name %s is taken by an earlier input (same rank, host "
                       "and pid)",
                       t->file, t->final);
                t->keep = 0;
            }
        }
        if (t->keep && final_is_link(t->file, t->final))
            t->keep = 0;
        if (t->keep && rename(t->tmp, t->final) != 0) {
            pr_err("%s: cannot rename %s to %s: %s", t->file, t->tmp, t->final, strerror(errno));
            t->keep = 0;
        }
        if (!t->keep) {
            remove_trace(t->tmp);
            t->status = EXIT_BAD_INPUT;
        }
    }
    if (t->keep && !r->fl->quiet)
        fprintf(stderr, "%s -> %s%s\n", t->file, t->final, t->partial ? " (partial)" : "");
    flush_buffer(&t->summaryf, &t->summary, &t->summary_len, t->keep);
}

/* The inputs' identity (kineto_files_identity), hashed on the pool's threads. */
typedef struct identity_run {
    char **files;
    uint64_t *each;
} identity_run;

/* A worker's task: hashes file i. */
static void
identity_task(void *ctx, int i)
{
    identity_run *r = ctx;
    r->each[i] = kineto_file_identity(r->files[i]);
}

/* kineto_files_identity of the n files, each file hashed by one of `threads` threads (the
 * hash reads every byte of every input before any import starts: on one thread it held
 * the other CPUs idle). */
static uint64_t
files_identity(char **files, int n, int threads)
{
    identity_run r = {files, calloc(n > 0 ? (size_t)n : 1, sizeof(uint64_t))};
    if (!r.each)
        return kineto_files_identity((const char *const *)files, (size_t)n);
    dpro_pool_run(n, threads, identity_task, &r);
    uint64_t h = kineto_identity_combine(r.each, (size_t)n);
    free(r.each);
    return h;
}

/* A worker's task: imports file i, then renames and reports every file up to the first
 * one still being imported, so that names and messages follow the input order. */
static void
import_task(void *ctx, int i)
{
    import_run *r = ctx;
    file_task *t = &r->t[i];
    t->logf = open_memstream(&t->log, &t->log_len);
    t->summaryf = open_memstream(&t->summary, &t->summary_len);
    if (!t->logf)
        t->logf = stderr; /* unordered, but not lost */
    if (!t->summaryf)
        t->summaryf = stderr;
    import_to_tmp(t, r);
    pthread_mutex_lock(&r->lock);
    t->imported = 1;
    while (r->next_finish < r->n && r->t[r->next_finish].imported)
        finish_one(r, r->next_finish++);
    pthread_mutex_unlock(&r->lock);
}

/* Imports process i of the opened export x (of file) as rank `rank` of `world` into dir.
 * written[0..nwritten) are the trace names written before; the new one is stored at
 * written[nwritten] on success. Returns EXIT_OK or EXIT_BAD_INPUT. */
static int
nsys_one_process(nsys_export *x, const char *file, size_t i, const char *dir, int64_t rank,
                 int64_t world, const char *job_id, const import_flags *fl, char **written,
                 int nwritten)
{
    char tmp[4096], final[4096], errbuf[512];
    snprintf(tmp, sizeof(tmp), "%s/.dpro-import-%ld-%d.tmp", dir, (long)getpid(), nwritten);
    remove_trace(tmp);
    dpro_writer_options wo;
    imp_writer_options(&wo);
    wo.private_until_close = 1; /* tmp: nobody reads it before its rename */
    dpro_writer *w = NULL;
    if (dpro_writer_open(tmp, &wo, &w, errbuf, sizeof(errbuf)) != DPRO_OK) {
        pr_err("%s: cannot create %s: %s", file, tmp, errbuf);
        return EXIT_BAD_INPUT;
    }
    nsys_result res;
    int irc = nsys_import_process(x, i, w, rank, world, job_id, &res);
    int crc = dpro_writer_close(w);
    if (irc != DPRO_OK || crc != DPRO_OK) {
        if (irc != DPRO_OK)
            pr_err("%s", nsys_errmsg(x));
        else
            pr_err("%s: closing the trace: %s", file, dpro_status_str(crc));
        remove_trace(tmp);
        pr_err("%s: process %lld not imported", file, (long long)res.pid);
        return EXIT_BAD_INPUT;
    }
    if (res.device_ops == 0 && !fl->allow_empty) {
        pr_err("%s: process %lld: no device operation (kernel, memory copy or set) among its "
               "%llu events: not imported (--allow-empty imports it)",
               file, (long long)res.pid, (unsigned long long)res.events_out);
        remove_trace(tmp);
        return EXIT_BAD_INPUT;
    }
    char host[256];
    snprintf(host, sizeof(host), "%s", nsys_host(x) ? nsys_host(x) : "import");
    sanitize(host);
    snprintf(final, sizeof(final), "%s/rank%lld-%s-%lld" DPRO_TRACE_SUFFIX, dir, (long long)rank,
             host, (long long)res.pid);
    if (place_trace(file, tmp, final, written, nwritten) != EXIT_OK)
        return EXIT_BAD_INPUT;
    if (!fl->quiet)
        fprintf(stderr,
                "%s (pid %lld) -> %s\n  rank %lld of %lld: %llu device operations, %llu API "
                "calls, %llu NVTX events, %llu collectives, %llu rows not mapped\n",
                file, (long long)res.pid, final, (long long)rank, (long long)world,
                (unsigned long long)res.device_ops, (unsigned long long)res.api_calls,
                (unsigned long long)res.markers, (unsigned long long)res.collectives,
                (unsigned long long)res.unmapped);
    written[nwritten] = strdup(final);
    return EXIT_OK;
}

/* dpro-import nsys: every process of every export is a rank, numbered in file order, then
 * in the export's process order. Returns EXIT_OK or EXIT_BAD_INPUT. */
static int
import_nsys(char **files, int nfiles, const char *dir, const char *job_id, const import_flags *fl)
{
    nsys_export **x = calloc((size_t)nfiles, sizeof(*x));
    int status = x ? EXIT_OK : EXIT_BAD_INPUT;
    if (!x)
        pr_err("out of memory");
    int64_t world = 0;
    for (int f = 0; x && f < nfiles; f++) {
        char errbuf[DPRO_ERRBUF_SIZE];
        if (nsys_open(files[f], fl->allow_empty, &x[f], errbuf, sizeof(errbuf)) != DPRO_OK) {
            pr_err("%s", errbuf);
            status = EXIT_BAD_INPUT;
            continue;
        }
        char pids[256];
        size_t nskip = nsys_skipped(x[f], pids, sizeof(pids));
        if (nskip)
            pr_warn("%s: %zu processes made CUDA API calls but ran no device operation, not "
                    "imported (--allow-empty imports them): pid %s",
                    files[f], nskip, pids);
        if (nsys_process_count(x[f]) == 0) {
            pr_err("%s: no process ran a device operation (kernel, memory copy or set): not "
                   "imported%s",
                   files[f], fl->allow_empty ? "" : " (--allow-empty imports API-only ones)");
            status = EXIT_BAD_INPUT;
        }
        world += x[f] ? (int64_t)nsys_process_count(x[f]) : 0;
    }
    char **written = world > 0 ? calloc((size_t)world, sizeof(*written)) : NULL;
    if (world > 0 && !written)
        status = EXIT_BAD_INPUT;
    int nwritten = 0;
    int64_t rank = 0;
    for (int f = 0; written && f < nfiles; f++) {
        for (size_t i = 0; x[f] && i < nsys_process_count(x[f]); i++, rank++) {
            if (nsys_one_process(x[f], files[f], i, dir, rank, world, job_id, fl, written,
                                 nwritten) != EXIT_OK)
                status = EXIT_BAD_INPUT;
            else
                nwritten++;
        }
    }
    if (sync_traces_dir(dir, nwritten) != EXIT_OK)
        status = EXIT_BAD_INPUT;
    for (int i = 0; i < nwritten; i++)
        free(written[i]);
    free(written);
    for (int f = 0; x && f < nfiles; f++)
        nsys_close(x[f]);
    free(x);
    return status;
}

/* Checks the format word at argv[optind], the inputs after it, -o DIR (and creates it) and
 * the --kineto files (et only, one per execution trace). Returns EXIT_OK or the exit
 * status, said on stderr. */
static int
check_inputs(int argc, char **argv, const char *dir, int nkineto)
{
    if (optind >= argc) {
        pr_err("which format? (kineto, nsys, et)");
        usage(stderr);
        return EXIT_USAGE;
    }
    const char *fmt = argv[optind];
    int et = strcmp(fmt, "et") == 0;
    if (!et && strcmp(fmt, "nsys") != 0 && strcmp(fmt, "kineto") != 0) {
        pr_err("unknown format '%s' (known: kineto, nsys, et)", fmt);
        return EXIT_USAGE;
    }
    int nfiles = argc - optind - 1;
    if (nfiles <= 0 || !dir) {
        pr_err("%s", !dir ? "-o DIR is required" : "no input file");
        usage(stderr);
        return EXIT_USAGE;
    }
    if (!et && nkineto) {
        pr_err("--kineto is for dpro-import et (the Kineto trace of an execution trace)");
        return EXIT_USAGE;
    }
    if (et && nkineto != nfiles) {
        pr_err("%d execution trace(s) and %d --kineto trace(s): give each execution trace the "
               "Kineto trace of the same process and steps (an execution trace has no times)",
               nfiles, nkineto);
        return EXIT_USAGE;
    }
    if (dpro_mkdir_p_synced(dir, 0755) != 0) { /* a new DIR must survive a crash too */
        pr_err("cannot create %s: %s", dir, strerror(errno));
        return EXIT_BAD_INPUT;
    }
    return EXIT_OK;
}

int
main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'},
        {"keep-partial", no_argument, NULL, 'k'},
        {"quiet", no_argument, NULL, 'q'},
        {"job-id", required_argument, NULL, 'j'},
        {"single-thread", no_argument, NULL, 's'},
        {"allow-empty", no_argument, NULL, 'e'},
        {"jobs", required_argument, NULL, 'T'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {"kineto", required_argument, NULL, 'K'},
        {NULL, 0, NULL, 0},
    };
    dpro_log_set_program(argv[0]);
    const char *dir = NULL, *job_id = NULL;
    import_flags fl = {0};
    int c, jobs = 0, nkineto = 0;
    char **kineto = calloc((size_t)argc, sizeof(*kineto)); /* the --kineto files */
    if (!kineto) {
        pr_err("out of memory");
        return EXIT_BAD_INPUT;
    }
    while ((c = getopt_long(argc, argv, "o:kqj:sehVK:", opts, NULL)) != -1) {
        switch (c) {
        case 'K':
            kineto[nkineto++] = optarg;
            break;
        case 'o':
            dir = optarg;
            break;
        case 'k':
            fl.keep_partial = 1;
            break;
        case 'q':
            fl.quiet = 1;
            break;
        case 's':
            fl.single_thread = 1;
            break;
        case 'e':
            fl.allow_empty = 1;
            break;
        case 'j':
            job_id = optarg;
            break;
        case 'T': {
            char *end;
            errno = 0;
            long v = strtol(optarg, &end, 10);
            if (end == optarg || *end || errno || v <= 0 || v > DPRO_POOL_MAX_THREADS) {
                pr_err("--jobs wants a number from 1 to %d, not '%s'", DPRO_POOL_MAX_THREADS,
                       optarg);
                free(kineto);
                return EXIT_USAGE;
            }
            jobs = (int)v;
            break;
        }
        case 'h':
            usage(stdout);
            free(kineto);
            return EXIT_OK;
        case 'V':
            printf("dpro-import %s\n", PACKAGE_VERSION);
            free(kineto);
            return EXIT_OK;
        default:
            usage(stderr);
            free(kineto);
            return EXIT_USAGE;
        }
    }
    int status = check_inputs(argc, argv, dir, nkineto);
    if (status != EXIT_OK) {
        free(kineto);
        return status;
    }
    int nsys = strcmp(argv[optind], "nsys") == 0, et = strcmp(argv[optind], "et") == 0;
    optind++;
    int nfiles = argc - optind;
    /* et: the Kineto files are the inputs, each with its execution trace */
    char **files = et ? kineto : argv + optind;
    int threads = dpro_pool_threads(jobs, nfiles);
    if (!job_id)
        fl.files_id = files_identity(files, nfiles, threads);
    if (nsys) {
        free(kineto);
        return import_nsys(files, nfiles, dir, job_id, &fl);
    }
    import_run r = {.n = nfiles, .dir = dir, .job_id = job_id, .fl = &fl};
    r.t = calloc((size_t)nfiles, sizeof(*r.t));
    if (!r.t) {
        pr_err("out of memory");
        free(kineto);
        return EXIT_BAD_INPUT;
    }
    for (int i = 0; i < nfiles; i++) {
        r.t[i].file = files[i];
        r.t[i].et = et ? argv[optind + i] : NULL;
        r.t[i].index = i;
    }
    /* a writer thread per file helps while CPUs are left over */
    r.inline_writer = threads > 1 && 2 * threads > dpro_pool_cpus();
    (void)dpro_log_level(); /* read DPRO_LOG before the threads start */
    /* twice the workers of --jobs, `threads` of them reading and converting at once: a
     * worker whose trace waits on the disk (its one sync) leaves its CPU slot to another */
    int workers = dpro_pool_threads(2 * threads, nfiles);
    pthread_mutex_init(&r.lock, NULL);
    if (sem_init(&r.cpu_slots, 0, (unsigned)threads) != 0) {
        pr_err("cannot make the workers' CPU slots: %s", strerror(errno));
        workers = 0; /* nothing imported: every file's status stays not OK */
    }
    for (int i = 0; workers == 0 && i < nfiles; i++)
        r.t[i].status = EXIT_BAD_INPUT;
    if (workers > 0) {
        dpro_pool_run(nfiles, workers, import_task, &r);
        sem_destroy(&r.cpu_slots);
    }
    pthread_mutex_destroy(&r.lock);
    int placed = 0;
    for (int i = 0; i < nfiles; i++) {
        placed += r.t[i].keep;
        if (r.t[i].status != EXIT_OK)
            status = EXIT_BAD_INPUT;
    }
    if (sync_traces_dir(dir, placed) != EXIT_OK)
        status = EXIT_BAD_INPUT;
    free(r.t);
    free(kineto);
    return status;
}
