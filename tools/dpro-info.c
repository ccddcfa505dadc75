/*
 * dpro-info: what a set of traces holds: ranks, hosts, events by kind, time span, bytes
 * on disk, bytes per event, dropped events; with --kernels, where the device time goes;
 * with --launch, --idle, --memcpy, --ops, --queue, --sequences (or --analyses for all),
 * the analyses of replay/analyses/analyses.h, per file; with --threads, per traced thread
 * its time on a CPU and its time waiting for one (meta thread_sched, docs/format.md).
 *
 *   dpro-info DIR|FILE... [--json] [--quick] [--kernels[=K]] [--analyses] ...
 *
 * Counts by kind need the events decoded; that is done unless --quick is given, in which
 * case only the batches table is read. --kernels uses the same pass over the events: device
 * time by category (compute, communication, memcpy, memset) and the K kernel names that
 * take the most, per file and over all files. The analyses use that pass too. Exit codes: 0 ok, 1
 * bad input (a file that could not be read whole, unless --partial), 2 usage.
 */
#include "config.h"
#include "dprotrace.h"
#define PR_FMT "dpro-info"
#include "dpro_log.h"
#include "json_writer.h"
#include "replay/analyses/analyses.h"
#include "replay/inputs.h"
#include "replay/kernels.h"
#include "replay/threadsched.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NKINDS (DPRO_KIND_MAX_KNOWN + 1)
#define KERNELS_DEFAULT_TOP 10
#define KERNELS_MAX_TOP 1000000

/* One traced thread's scheduler figures over its samples (meta thread_sched): the
 * differences between its first and last sample, us. */
typedef struct thread_window {
    uint32_t tid;
    const char *name; /* the threads table's, or NULL */
    size_t samples;
    int64_t window_us, cpu_us, wait_us, slices;
} thread_window;

typedef struct file_info {
    const char *path;
    const char *host;
    int64_t rank, world, pid;
    const char *source;
    dpro_trace_summary sum;
    uint64_t by_kind[NKINDS]; /* [0]: unknown kinds */
    uint64_t decoded, bad_batches;
    char err[DPRO_ERRBUF_SIZE];
    int failed;
    kernels_breakdown kern; /* with --kernels */
    ana_collect *ana;       /* with analyses asked for */
    thread_window *ts;      /* with --threads: malloc'd, nts rows */
    size_t nts;
    int64_t ts_dropped; /* threads the collector did not follow */
} file_info;

static void
usage(FILE *out)
{
    fprintf(out,
            "usage: dpro-info [--json] [--quick] [--kernels[=K]] [ANALYSES] [--partial] "
            "DIR|FILE...\n"
            "  Summarise dpro traces: ranks, hosts, events by kind, time span,\n"
            "  bytes on disk and per event, dropped events.\n"
            "  --json         machine-readable output (keys: ranks, events, events_by_kind,\n"
            "                 bytes, bytes_per_event, dropped, files; kernels; analyses:\n"
            "                 per_rank[{path, rank, launch, idle, memcpy, ops, queue,\n"
            "                 sequences}], each one's keys in replay/analyses/analyses.h)\n"
            "  --quick        do not decode events (no counts by kind)\n"
            "  --kernels[=K]  kernel breakdown per file and over all files: device time\n"
            "                 by category (compute, communication, memcpy, memset) and\n"
            "                 the K kernel names with the most device time (default "
            "%d)\n"
            "ANALYSES, per file, from the same pass over the events (K: rows listed, default "
            "%d):\n"
            "  --launch[=K]   launch statistics: per kernel launch the CPU time of its launch\n"
            "                 call and its launch delay (kernel start - call end): count,\n"
            "                 mean, p50, p95, max per kernel name; outliers (over %dx the\n"
            "                 median of their kernel and over %d us CPU, %d us delay)\n"
            "  --idle         idle time per stream: host wait (the next op's launch call\n"
            "                 had not ended), kernel wait (waiting for another stream's op\n"
            "                 through a stream-wait event), other\n"
            "  --memcpy       memcpy and memset bandwidth by kind, memory (pinned,\n"
            "                 pageable, ...) and size class (powers of 4 bytes)\n"
            "  --ops[=K]      device ops, device time and launch delay by the innermost\n"
            "                 cpu_op around their launch call, with its kernels; the same\n"
            "                 by user annotation\n"
            "  --queue        launch queue length over time per stream (max, time-weighted\n"
            "                 mean), the queue depth inferred as dpro-replay does, the time\n"
            "                 launch calls were held by a full queue\n"
            "  --sequences[=K] the most frequent runs of 2, 3, 4 kernels on a stream, with\n"
            "                 their share of device time (fusion candidates)\n"
            "  --analyses     all six\n"
            "  --threads      per traced thread (collectors since 7 December 2026, Linux):\n"
            "                 its time on a CPU and its time runnable but waiting for one\n"
            "                 on a runqueue, and its timeslices, over its sampled "
            "window\n" INPUTS_HELP_PARTIAL "  --help, --version\n\n" INPUTS_HELP_EXIT,
            KERNELS_DEFAULT_TOP, KERNELS_DEFAULT_TOP, ANA_OUTLIER_FACTOR,
            ANA_OUTLIER_CPU_MIN_NS / 1000, ANA_OUTLIER_DELAY_MIN_NS / 1000);
}

/* Sums meta thread_sched text s (threadsched.h) over each thread's window into fi->ts,
 * naming each thread from r's threads table. Returns 0, -1 when s is malformed (fi->err
 * says where), -2 out of memory. */
static int
parse_thread_sched(file_info *fi, const dpro_reader *r, const char *s)
{
    const dpro_thread_info *names = NULL;
    size_t nnames = dpro_reader_threads(r, &names);
    thread_sched_set set;
    int parsed = thread_sched_parse(s, &set), rc = 0;
    if (parsed > 1) {
        snprintf(fi->err, sizeof fi->err, "%s: meta %s: thread %d is not TID=T:R:W:S,...", fi->path,
                 DPRO_META_THREAD_SCHED, parsed - 1);
        rc = -1;
    } else if (parsed == -1 || !(fi->ts = calloc(set.n + 1, sizeof *fi->ts))) {
        rc = -2;
    }
    for (size_t k = 0; rc == 0 && k < set.n; k++) {
        const thread_sched *in = &set.thread[k];
        const thread_sched_sample *a = &in->sample[0], *b = &in->sample[in->n - 1];
        thread_window *th = &fi->ts[fi->nts++];
        *th = (thread_window){.tid = in->tid,
                              .samples = in->n,
                              .window_us = b->t_us - a->t_us,
                              .cpu_us = b->cpu_us - a->cpu_us,
                              .wait_us = b->wait_us - a->wait_us,
                              .slices = b->slices - a->slices};
        for (size_t i = 0; i < nnames; i++)
            if (names[i].tid == th->tid)
                th->name = names[i].name;
    }
    thread_sched_set_free(&set);
    return rc;
}

/* Reads one file into fi (with kernels != 0, its kernel breakdown too; with ao->which,
 * the analyses); returns 0, or 1 when the file is bad (fi->err says why). */
static int
inspect(file_info *fi, dpro_reader **keep, int quick, int kernels, const ana_options *ao,
        int partial, int threads)
{
    dpro_reader *r = NULL;
    dpro_iter *it = NULL;
    dpro_event ev;
    kernels_collect kc;
    int ana_oom = 0;
    int rc = dpro_reader_open(fi->path, &r, fi->err, sizeof fi->err);
    if (rc != DPRO_OK) {
        fi->failed = 1;
        return 1;
    }
    *keep = r;
    if (dpro_reader_ended_early(r))
        pr_warn("%s: the trace ends early (cut short, or its process did not close it); what "
                "it holds is counted",
                fi->path);
    if (*dpro_reader_warnings(r))
        pr_warn("%s", dpro_reader_warnings(r));
    fi->host = dpro_reader_meta(r, DPRO_META_HOST);
    fi->source = dpro_reader_meta(r, DPRO_META_SOURCE);
    fi->rank = dpro_reader_meta_int(r, DPRO_META_RANK, -1);
    fi->world = dpro_reader_meta_int(r, DPRO_META_WORLD_SIZE, -1);
    fi->pid = dpro_reader_meta_int(r, DPRO_META_PID, -1);
    if (dpro_reader_summary(r, &fi->sum) != DPRO_OK) {
        snprintf(fi->err, sizeof fi->err, "%s", dpro_reader_errmsg(r));
        fi->failed = 1;
        return 1;
    }
    const char *sched = threads ? dpro_reader_meta(r, DPRO_META_THREAD_SCHED) : NULL;
    fi->ts_dropped = dpro_reader_meta_int(r, DPRO_META_THREAD_SCHED_DROPPED, 0);
    if (sched && (rc = parse_thread_sched(fi, r, sched)) != 0) {
        if (rc == -2)
            snprintf(fi->err, sizeof fi->err, "%s: out of memory", fi->path);
        fi->failed = 1;
        return 1;
    }
    if (quick)
        return 0;
    if (kernels && kernels_collect_init(&kc, r, &fi->kern) != 0) {
        snprintf(fi->err, sizeof fi->err, "%s: out of memory", fi->path);
        fi->failed = 1;
        return 1;
    }
    if (ao->which && ana_collect_new(r, ao, &fi->ana) != 0) {
        snprintf(fi->err, sizeof fi->err, "%s: out of memory", fi->path);
        fi->failed = 1;
        if (kernels)
            kernels_collect_finish(&kc);
        return 1;
    }
    if (dpro_iter_open(r, &it) != DPRO_OK) {
        snprintf(fi->err, sizeof fi->err, "%s", dpro_reader_errmsg(r));
        fi->failed = 1;
        if (kernels)
            kernels_collect_finish(&kc);
        return 1;
    }
    for (;;) {
        rc = dpro_iter_next(it, &ev);
        if (rc == 0)
            break;
        if (rc < 0) {
            dpro_log(partial ? DPRO_LOG_WARN : DPRO_LOG_ERROR, PR_FMT, "%s (batch skipped)",
                     dpro_reader_errmsg(r));
            continue;
        }
        fi->by_kind[ev.kind < NKINDS ? ev.kind : 0]++;
        fi->decoded++;
        if (kernels)
            kernels_collect_event(&kc, &ev);
        if (fi->ana && ana_collect_event(fi->ana, &ev) != 0) {
            ana_oom = 1;
            break;
        }
    }
    fi->bad_batches = dpro_iter_bad_batches(it);
    dpro_iter_close(it);
    if ((kernels && kernels_collect_finish(&kc) != 0) ||
        (fi->ana && (ana_oom || ana_collect_finish(fi->ana) != 0))) {
        snprintf(fi->err, sizeof fi->err, "%s: out of memory", fi->path);
        fi->failed = 1;
        return 1;
    }
    return fi->bad_batches ? 1 : 0;
}

static void
human_bytes(char *buf, size_t len, uint64_t b)
{
    if (b >= (1ull << 30))
        snprintf(buf, len, "%.2f GiB", b / (double)(1ull << 30));
    else if (b >= (1ull << 20))
        snprintf(buf, len, "%.2f MiB", b / (double)(1ull << 20));
    else if (b >= (1ull << 10))
        snprintf(buf, len, "%.1f KiB", b / 1024.0);
    else
        snprintf(buf, len, "%" PRIu64 " B", b);
}

/* Merges the kernel breakdowns of the files that were read into all. Returns 0, or -1
 * out of memory. */
static int
merge_kernels(kernels_breakdown *all, const file_info *fi, size_t nfiles)
{
    const kernels_breakdown **parts = malloc((nfiles ? nfiles : 1) * sizeof *parts);
    size_t n = 0;
    int rc;
    if (!parts)
        return -1;
    for (size_t i = 0; i < nfiles; i++)
        if (!fi[i].failed)
            parts[n++] = &fi[i].kern;
    rc = kernels_merge(all, parts, n);
    free(parts);
    return rc;
}

/* Parses the K of --kernels=K (1..KERNELS_MAX_TOP); returns 0, or -1 if it is not one. */
static int
parse_top(const char *arg, size_t *top)
{
    char *end;
    unsigned long long v;
    if (!arg) {
        *top = KERNELS_DEFAULT_TOP;
        return 0;
    }
    if (!isdigit((unsigned char)arg[0]))
        return -1;
    errno = 0;
    v = strtoull(arg, &end, 10);
    if (errno || *end || v < 1 || v > KERNELS_MAX_TOP)
        return -1;
    *top = (size_t)v;
    return 0;
}

/* What the command was asked. */
typedef struct args {
    int json, quick, kernels, partial, threads;
    size_t top;
    ana_options ao;
    const char *const *paths;
    size_t npaths;
} args;

/* The files read and their sums. */
typedef struct totals {
    char **files;
    size_t nfiles, nok; /* files listed, files read */
    file_info *fi;
    dpro_reader **readers;
    uint64_t events, bytes, dropped, by_kind[NKINDS], first, last;
    kernels_breakdown all; /* with --kernels */
} totals;

/* Parses the command line into *a. Returns -1 to go on, or the exit status. */
static int
parse_args(int argc, char **argv, args *a)
{
    static const struct option opts[] = {{"json", no_argument, 0, 'j'},
                                         {"quick", no_argument, 0, 'q'},
                                         {"kernels", optional_argument, 0, 'k'},
                                         {"launch", optional_argument, 0, 'L'},
                                         {"idle", no_argument, 0, 'I'},
                                         {"memcpy", no_argument, 0, 'M'},
                                         {"ops", optional_argument, 0, 'O'},
                                         {"queue", no_argument, 0, 'Q'},
                                         {"sequences", optional_argument, 0, 'S'},
                                         {"analyses", no_argument, 0, 'A'},
                                         {"threads", no_argument, 0, 'T'},
                                         {"help", no_argument, 0, 'h'},
                                         {"version", no_argument, 0, 'V'},
                                         {"partial", no_argument, 0, 'P'},
                                         {0, 0, 0, 0}};
    int c;

    memset(a, 0, sizeof *a);
    a->top = KERNELS_DEFAULT_TOP;
    a->ao.top_launch = a->ao.top_ops = a->ao.top_seq = KERNELS_DEFAULT_TOP;
    while ((c = getopt_long(argc, argv, "jqhV", opts, NULL)) != -1) {
        switch (c) {
        case 'j':
            a->json = 1;
            break;
        case 'q':
            a->quick = 1;
            break;
        case 'P':
            a->partial = 1;
            break;
        case 'k':
            a->kernels = 1;
            if (parse_top(optarg, &a->top) != 0) {
                pr_err("--kernels=%s: K must be a whole number from 1 to %d", optarg,
                       KERNELS_MAX_TOP);
                usage(stderr);
                return 2;
            }
            break;
        case 'L':
        case 'O':
        case 'S': {
            size_t *k = c == 'L' ? &a->ao.top_launch : c == 'O' ? &a->ao.top_ops : &a->ao.top_seq;
            a->ao.which |= c == 'L' ? ANA_LAUNCH : c == 'O' ? ANA_OPS : ANA_SEQUENCES;
            if (parse_top(optarg, k) != 0) {
                pr_err("--%s=%s: K must be a whole number from 1 to %d",
                       c == 'L'   ? "launch"
                       : c == 'O' ? "ops"
                                  : "sequences",
                       optarg, KERNELS_MAX_TOP);
                usage(stderr);
                return 2;
            }
            break;
        }
        case 'I':
            a->ao.which |= ANA_IDLE;
            break;
        case 'M':
            a->ao.which |= ANA_MEMCPY;
            break;
        case 'Q':
            a->ao.which |= ANA_QUEUE;
            break;
        case 'A':
            a->ao.which |= ANA_ALL;
            break;
        case 'T':
            a->threads = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            printf("dpro-info %s (trace schema %d.%d)\n", PACKAGE_VERSION, DPRO_SCHEMA_MAJOR,
                   DPRO_SCHEMA_MINOR);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return 2;
    }
    if ((a->kernels || a->ao.which) && a->quick) {
        pr_err("--kernels and the analyses need the events decoded: not with --quick");
        usage(stderr);
        return 2;
    }
    a->paths = (const char *const *)argv + optind;
    a->npaths = (size_t)(argc - optind);
    return -1;
}

/* Lists and reads the files of a->paths into *t (totals_free). Returns 0 when every file
 * was read whole or a->partial is set, 1 when some were not (t is filled with the
 * others), -1 when nothing
 * could be listed or memory ran out (the message is printed). */
static int
read_all(const args *a, totals *t)
{
    char err[DPRO_ERRBUF_SIZE];
    size_t nbad = 0;
    int status = 0;

    memset(t, 0, sizeof *t);
    t->first = UINT64_MAX;
    if (dpro_list_traces(a->paths, a->npaths, &t->files, &t->nfiles, err, sizeof err) != DPRO_OK) {
        pr_err("%s", err);
        status = -1;
    } else {
        t->fi = calloc(t->nfiles, sizeof *t->fi);
        t->readers = calloc(t->nfiles, sizeof *t->readers);
        if (!t->fi || !t->readers) {
            pr_err("out of memory");
            status = -1;
        }
    }
    for (size_t i = 0; status == 0 && i < t->nfiles; i++) {
        file_info *f = &t->fi[i];
        f->path = t->files[i];
        nbad +=
            inspect(f, &t->readers[i], a->quick, a->kernels, &a->ao, a->partial, a->threads) != 0;
        if (f->failed) {
            if (a->partial)
                pr_warn("%s (skipped)", f->err);
            else
                pr_err("%s", f->err);
            continue;
        }
        t->events += f->sum.events;
        t->bytes += f->sum.file_bytes;
        t->dropped += f->sum.dropped;
        for (int k = 0; k < NKINDS; k++)
            t->by_kind[k] += f->by_kind[k];
        if (f->sum.events && f->sum.first_ns < t->first)
            t->first = f->sum.first_ns;
        if (f->sum.last_ns > t->last)
            t->last = f->sum.last_ns;
        t->nok++;
    }
    if (t->first == UINT64_MAX)
        t->first = t->last = 0;
    if (status == 0 && a->kernels && merge_kernels(&t->all, t->fi, t->nfiles) != 0) {
        pr_err("out of memory");
        status = -1;
    }
    if (status == 0 && nbad && !a->partial) {
        pr_err("%zu of %zu trace file(s) could not be read whole; pass --partial to go on "
               "with the others",
               nbad, t->nfiles);
        status = 1;
    }
    return status;
}

static void
totals_free(totals *t)
{
    for (size_t i = 0; t->fi && i < t->nfiles; i++) {
        kernels_breakdown_free(&t->fi[i].kern);
        ana_collect_free(t->fi[i].ana);
        free(t->fi[i].ts);
        if (t->readers)
            dpro_reader_close(t->readers[i]);
    }
    kernels_breakdown_free(&t->all);
    free(t->readers);
    free(t->fi);
    dpro_free_paths(t->files, t->nfiles);
}

/* Writes fi's threads as the key "threads": [{tid, name, samples, window_us, cpu_us,
 * runqueue_us, slices}], and "threads_not_followed" where the collector counted some. */
static void
write_threads_json(json_writer *w, const file_info *fi)
{
    json_key(w, "threads");
    json_begin_array(w);
    for (size_t k = 0; k < fi->nts; k++) {
        const thread_window *th = &fi->ts[k];
        json_begin_object(w);
        json_kv_uint(w, "tid", th->tid);
        json_kv_string(w, "name", th->name ? th->name : "");
        json_kv_uint(w, "samples", th->samples);
        json_kv_int(w, "window_us", th->window_us);
        json_kv_int(w, "cpu_us", th->cpu_us);
        json_kv_int(w, "runqueue_us", th->wait_us);
        json_kv_int(w, "slices", th->slices);
        json_end_object(w);
    }
    json_end_array(w);
    if (fi->ts_dropped)
        json_kv_int(w, "threads_not_followed", fi->ts_dropped);
}

/* Prints fi's threads: a table, or a line saying the trace has none. */
static void
print_threads(const file_info *fi)
{
    printf("\nthreads, rank %" PRId64 " (%s): time on a CPU and runnable waiting for one, "
           "over each thread's sampled window\n",
           fi->rank, fi->path);
    if (fi->nts == 0)
        printf("  no thread_sched in this trace (an older collector, an importer, or no "
               "schedstat in its kernel)\n");
    else
        printf("  %8s %-16s %10s %10s %6s %10s %6s %8s\n", "tid", "name", "window(ms)", "cpu(ms)",
               "cpu%", "runq(ms)", "runq%", "slices");
    for (size_t k = 0; k < fi->nts; k++) {
        const thread_window *th = &fi->ts[k];
        double win = th->window_us > 0 ? (double)th->window_us : 1.0;
        printf("  %8" PRIu32 " %-16.16s %10.1f %10.1f %6.1f %10.1f %6.1f %8" PRId64 "\n", th->tid,
               th->name && *th->name ? th->name : "-", th->window_us / 1e3, th->cpu_us / 1e3,
               100.0 * th->cpu_us / win, th->wait_us / 1e3, 100.0 * th->wait_us / win, th->slices);
    }
    if (fi->ts_dropped)
        printf("  %" PRId64 " more thread(s) not followed (the collector follows 64)\n",
               fi->ts_dropped);
}

static void
print_json(const args *a, const totals *t)
{
    json_writer w;
    json_init(&w, stdout, 1);
    json_begin_object(&w);
    json_kv_uint(&w, "ranks", t->nok);
    json_kv_uint(&w, "events", t->events);
    json_key(&w, "events_by_kind");
    json_begin_object(&w);
    if (!a->quick)
        for (int k = 1; k < NKINDS; k++)
            json_kv_uint(&w, dpro_kind_name((uint32_t)k), t->by_kind[k]);
    if (!a->quick && t->by_kind[0])
        json_kv_uint(&w, "unknown", t->by_kind[0]);
    json_end_object(&w);
    json_kv_uint(&w, "bytes", t->bytes);
    json_kv_double(&w, "bytes_per_event", t->events ? (double)t->bytes / t->events : 0.0);
    json_kv_uint(&w, "dropped", t->dropped);
    json_kv_uint(&w, "span_ns", t->last - t->first);
    json_key(&w, "files");
    json_begin_array(&w);
    for (size_t i = 0; i < t->nfiles; i++) {
        json_begin_object(&w);
        json_kv_string(&w, "path", t->fi[i].path);
        if (t->fi[i].failed) {
            json_kv_string(&w, "error", t->fi[i].err);
            json_end_object(&w);
            continue;
        }
        json_kv_int(&w, "rank", t->fi[i].rank);
        json_kv_int(&w, "world_size", t->fi[i].world);
        json_kv_string(&w, "host", t->fi[i].host ? t->fi[i].host : "");
        json_kv_int(&w, "pid", t->fi[i].pid);
        json_kv_string(&w, "source", t->fi[i].source ? t->fi[i].source : "");
        json_kv_uint(&w, "events", t->fi[i].sum.events);
        json_kv_uint(&w, "batches", t->fi[i].sum.batches);
        json_kv_uint(&w, "bytes", t->fi[i].sum.file_bytes);
        json_kv_uint(&w, "event_bytes", t->fi[i].sum.event_bytes);
        json_kv_uint(&w, "dropped", t->fi[i].sum.dropped);
        json_kv_uint(&w, "bad_batches", t->fi[i].bad_batches);
        json_kv_uint(&w, "first_ns", t->fi[i].sum.first_ns);
        json_kv_uint(&w, "last_ns", t->fi[i].sum.last_ns);
        if (a->threads)
            write_threads_json(&w, &t->fi[i]);
        json_end_object(&w);
    }
    json_end_array(&w);
    if (a->kernels) {
        json_key(&w, "kernels");
        json_begin_object(&w);
        json_kv_uint(&w, "top", a->top);
        json_key(&w, "per_rank");
        json_begin_array(&w);
        for (size_t i = 0; i < t->nfiles; i++) {
            if (t->fi[i].failed)
                continue;
            json_begin_object(&w);
            json_kv_string(&w, "path", t->fi[i].path);
            json_kv_int(&w, "rank", t->fi[i].rank);
            kernels_write_json(&w, &t->fi[i].kern, a->top);
            json_end_object(&w);
        }
        json_end_array(&w);
        json_key(&w, "all");
        json_begin_object(&w);
        json_kv_uint(&w, "files", t->nok);
        kernels_write_json(&w, &t->all, a->top);
        json_end_object(&w);
        json_end_object(&w);
    }
    if (a->ao.which) {
        json_key(&w, "analyses");
        json_begin_object(&w);
        json_key(&w, "per_rank");
        json_begin_array(&w);
        for (size_t i = 0; i < t->nfiles; i++) {
            if (t->fi[i].failed)
                continue;
            json_begin_object(&w);
            json_kv_string(&w, "path", t->fi[i].path);
            json_kv_int(&w, "rank", t->fi[i].rank);
            ana_write_json(&w, t->fi[i].ana);
            json_end_object(&w);
        }
        json_end_array(&w);
        json_end_object(&w);
    }
    json_end_object(&w);
}

static void
print_text(const args *a, const totals *t)
{
    char b1[32];
    printf("%-8s %-16s %8s %12s %10s %10s %8s  %s\n", "rank", "host", "pid", "events", "bytes",
           "span(ms)", "dropped", "file");
    for (size_t i = 0; i < t->nfiles; i++) {
        if (t->fi[i].failed) {
            printf("%-8s %-16s %8s %12s %10s %10s %8s  %s (error)\n", "?", "?", "?", "?", "?", "?",
                   "?", t->fi[i].path);
            continue;
        }
        human_bytes(b1, sizeof b1, t->fi[i].sum.file_bytes);
        printf("%-8" PRId64 " %-16.16s %8" PRId64 " %12" PRIu64 " %10s %10.1f %8" PRIu64 "  %s\n",
               t->fi[i].rank, t->fi[i].host ? t->fi[i].host : "-", t->fi[i].pid,
               t->fi[i].sum.events, b1, (t->fi[i].sum.last_ns - t->fi[i].sum.first_ns) / 1e6,
               t->fi[i].sum.dropped, t->fi[i].path);
    }
    human_bytes(b1, sizeof b1, t->bytes);
    printf("\n%zu trace file(s), %" PRIu64 " events, %s on disk, %.2f bytes/event, "
           "%" PRIu64 " dropped, span %.3f s\n",
           t->nfiles, t->events, b1, t->events ? (double)t->bytes / t->events : 0.0, t->dropped,
           (t->last - t->first) / 1e9);
    if (!a->quick) {
        printf("events by kind:");
        for (int k = 1; k < NKINDS; k++)
            if (t->by_kind[k])
                printf(" %s=%" PRIu64, dpro_kind_name((uint32_t)k), t->by_kind[k]);
        if (t->by_kind[0])
            printf(" unknown=%" PRIu64, t->by_kind[0]);
        printf("\n");
    }
    if (t->dropped)
        printf("warning: %" PRIu64 " events were dropped by the collector (buffers full)\n",
               t->dropped);
    for (size_t i = 0; a->kernels && i < t->nfiles; i++) {
        char title[600];
        if (t->fi[i].failed)
            continue;
        snprintf(title, sizeof title, "kernel breakdown, rank %" PRId64 " (%s)", t->fi[i].rank,
                 t->fi[i].path);
        kernels_print(stdout, title, &t->fi[i].kern, a->top);
    }
    if (a->kernels && t->nok > 1) {
        char title[64];
        snprintf(title, sizeof title, "kernel breakdown, all ranks (%zu files)", t->nok);
        kernels_print(stdout, title, &t->all, a->top);
    }
    for (size_t i = 0; a->ao.which && i < t->nfiles; i++) {
        char title[600];
        if (t->fi[i].failed)
            continue;
        snprintf(title, sizeof title, "rank %" PRId64 " (%s)", t->fi[i].rank, t->fi[i].path);
        ana_print(stdout, title, t->fi[i].ana);
    }
    for (size_t i = 0; a->threads && i < t->nfiles; i++)
        if (!t->fi[i].failed)
            print_threads(&t->fi[i]);
}

int
main(int argc, char **argv)
{
    args a;
    totals t;
    int status;

    dpro_log_set_program(argv[0]);
    status = parse_args(argc, argv, &a);
    if (status >= 0)
        return status;
    status = read_all(&a, &t);
    if (status >= 0) {
        if (a.json)
            print_json(&a, &t);
        else
            print_text(&a, &t);
    }
    totals_free(&t);
    return status < 0 ? 1 : status;
}
