/*
 * dpro-info: what a set of traces holds: ranks, hosts, events by kind, time span, bytes
 * on disk, bytes per event, dropped events; with --kernels, where the device time goes.
 *
 *   dpro-info DIR|FILE... [--json] [--quick] [--kernels[=K]]
 *
 * Counts by kind need the events decoded; that is done unless --quick is given, in which
 * case only the batches table is read. --kernels uses the same pass over the events: device
 * time by category (compute, communication, memcpy, memset) and the K kernel names that
 * take the most, per file and over all files. Exit codes: 0 ok, 1 bad input, 2 usage.
 */
#include "config.h"
#include "dprotrace.h"
#include "json_writer.h"
#include "replay/kernels.h"

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

typedef struct file_info {
    const char *path;
    const char *host;
    int64_t rank, world, pid;
    const char *source;
    dpro_trace_summary sum;
    uint64_t by_kind[NKINDS]; /* [0]: unknown kinds */
    uint64_t decoded, bad_batches;
    char err[512];
    int failed;
    kernels_breakdown kern; /* with --kernels */
} file_info;

static void
usage(FILE *out)
{
    fprintf(out,
            "usage: dpro-info [--json] [--quick] [--kernels[=K]] DIR|FILE...\n"
            "  Summarise dpro traces: ranks, hosts, events by kind, time span,\n"
            "  bytes on disk and per event, dropped events.\n"
            "  --json         machine-readable output (keys: ranks, events, events_by_kind,\n"
            "                 bytes, bytes_per_event, dropped, files; kernels)\n"
            "  --quick        do not decode events (no counts by kind)\n"
            "  --kernels[=K]  kernel breakdown per file and over all files: device time\n"
            "                 by category (compute, communication, memcpy, memset) and\n"
            "                 the K kernel names with the most device time (default %d)\n"
            "  --help, --version\n",
            KERNELS_DEFAULT_TOP);
}

/* Reads one file into fi (with kernels != 0, its kernel breakdown too); returns 0, or 1
 * when the file is bad (fi->err says why). */
static int
inspect(file_info *fi, dpro_reader **keep, int quick, int kernels)
{
    dpro_reader *r = NULL;
    dpro_iter *it = NULL;
    dpro_event ev;
    kernels_collect kc;
    int rc = dpro_reader_open(fi->path, &r, fi->err, sizeof fi->err);
    if (rc != DPRO_OK) {
        fi->failed = 1;
        return 1;
    }
    *keep = r;
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
    if (quick)
        return 0;
    if (kernels && kernels_collect_init(&kc, r, &fi->kern) != 0) {
        snprintf(fi->err, sizeof fi->err, "%s: out of memory", fi->path);
        fi->failed = 1;
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
            fprintf(stderr, "dpro-info: %s\n", dpro_reader_errmsg(r));
            continue;
        }
        fi->by_kind[ev.kind < NKINDS ? ev.kind : 0]++;
        fi->decoded++;
        if (kernels)
            kernels_collect_event(&kc, &ev);
    }
    fi->bad_batches = dpro_iter_bad_batches(it);
    dpro_iter_close(it);
    if (kernels && kernels_collect_finish(&kc) != 0) {
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

int
main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"json", no_argument, 0, 'j'},          {"quick", no_argument, 0, 'q'},
        {"kernels", optional_argument, 0, 'k'}, {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, 'V'},       {0, 0, 0, 0}};
    int json = 0, quick = 0, kernels = 0, c, status = 0;
    size_t top = KERNELS_DEFAULT_TOP, nok = 0;
    kernels_breakdown all = {0};
    char **files = NULL, err[512];
    size_t nfiles = 0;
    file_info *fi;
    dpro_reader **readers;
    uint64_t events = 0, bytes = 0, dropped = 0, by_kind[NKINDS] = {0}, first = UINT64_MAX,
             last = 0;

    while ((c = getopt_long(argc, argv, "jqhV", opts, NULL)) != -1) {
        switch (c) {
        case 'j':
            json = 1;
            break;
        case 'q':
            quick = 1;
            break;
        case 'k':
            kernels = 1;
            if (parse_top(optarg, &top) != 0) {
                fprintf(stderr, "dpro-info: --kernels=%s: K must be a whole number from 1 to %d\n",
                        optarg, KERNELS_MAX_TOP);
                usage(stderr);
                return 2;
            }
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
    if (kernels && quick) {
        fprintf(stderr, "dpro-info: --kernels needs the events decoded: not with --quick\n");
        usage(stderr);
        return 2;
    }
    if (dpro_list_traces((const char *const *)argv + optind, (size_t)(argc - optind), &files,
                         &nfiles, err, sizeof err) != DPRO_OK) {
        fprintf(stderr, "dpro-info: %s\n", err);
        return 1;
    }
    fi = calloc(nfiles, sizeof *fi);
    readers = calloc(nfiles, sizeof *readers);
    if (!fi || !readers) {
        fprintf(stderr, "dpro-info: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < nfiles; i++) {
        fi[i].path = files[i];
        if (inspect(&fi[i], &readers[i], quick, kernels))
            status = 1;
        if (fi[i].failed) {
            fprintf(stderr, "dpro-info: %s\n", fi[i].err);
            continue;
        }
        events += fi[i].sum.events;
        bytes += fi[i].sum.file_bytes;
        dropped += fi[i].sum.dropped;
        for (int k = 0; k < NKINDS; k++)
            by_kind[k] += fi[i].by_kind[k];
        if (fi[i].sum.events && fi[i].sum.first_ns < first)
            first = fi[i].sum.first_ns;
        if (fi[i].sum.last_ns > last)
            last = fi[i].sum.last_ns;
        nok++;
    }
    if (first == UINT64_MAX)
        first = last = 0;
    if (kernels && merge_kernels(&all, fi, nfiles) != 0) {
        fprintf(stderr, "dpro-info: out of memory\n");
        return 1;
    }

    if (json) {
        json_writer w;
        json_init(&w, stdout, 1);
        json_begin_object(&w);
        json_kv_uint(&w, "ranks", nok);
        json_kv_uint(&w, "events", events);
        json_key(&w, "events_by_kind");
        json_begin_object(&w);
        if (!quick)
            for (int k = 1; k < NKINDS; k++)
                json_kv_uint(&w, dpro_kind_name((uint32_t)k), by_kind[k]);
        if (!quick && by_kind[0])
            json_kv_uint(&w, "unknown", by_kind[0]);
        json_end_object(&w);
        json_kv_uint(&w, "bytes", bytes);
        json_kv_double(&w, "bytes_per_event", events ? (double)bytes / events : 0.0);
        json_kv_uint(&w, "dropped", dropped);
        json_kv_uint(&w, "span_ns", last - first);
        json_key(&w, "files");
        json_begin_array(&w);
        for (size_t i = 0; i < nfiles; i++) {
            json_begin_object(&w);
            json_kv_string(&w, "path", fi[i].path);
            if (fi[i].failed) {
                json_kv_string(&w, "error", fi[i].err);
                json_end_object(&w);
                continue;
            }
            json_kv_int(&w, "rank", fi[i].rank);
            json_kv_int(&w, "world_size", fi[i].world);
            json_kv_string(&w, "host", fi[i].host ? fi[i].host : "");
            json_kv_int(&w, "pid", fi[i].pid);
            json_kv_string(&w, "source", fi[i].source ? fi[i].source : "");
            json_kv_uint(&w, "events", fi[i].sum.events);
            json_kv_uint(&w, "batches", fi[i].sum.batches);
            json_kv_uint(&w, "bytes", fi[i].sum.file_bytes);
            json_kv_uint(&w, "event_bytes", fi[i].sum.event_bytes);
            json_kv_uint(&w, "dropped", fi[i].sum.dropped);
            json_kv_uint(&w, "bad_batches", fi[i].bad_batches);
            json_kv_uint(&w, "first_ns", fi[i].sum.first_ns);
            json_kv_uint(&w, "last_ns", fi[i].sum.last_ns);
            json_end_object(&w);
        }
        json_end_array(&w);
        if (kernels) {
            json_key(&w, "kernels");
            json_begin_object(&w);
            json_kv_uint(&w, "top", top);
            json_key(&w, "per_rank");
            json_begin_array(&w);
            for (size_t i = 0; i < nfiles; i++) {
                if (fi[i].failed)
                    continue;
                json_begin_object(&w);
                json_kv_string(&w, "path", fi[i].path);
                json_kv_int(&w, "rank", fi[i].rank);
                kernels_write_json(&w, &fi[i].kern, top);
                json_end_object(&w);
            }
            json_end_array(&w);
            json_key(&w, "all");
            json_begin_object(&w);
            json_kv_uint(&w, "files", nok);
            kernels_write_json(&w, &all, top);
            json_end_object(&w);
            json_end_object(&w);
        }
        json_end_object(&w);
    } else {
        char b1[32];
        printf("%-8s %-16s %8s %12s %10s %10s %8s  %s\n", "rank", "host", "pid", "events", "bytes",
               "span(ms)", "dropped", "file");
        for (size_t i = 0; i < nfiles; i++) {
            if (fi[i].failed) {
                printf("%-8s %-16s %8s %12s %10s %10s %8s  %s (error)\n", "?", "?", "?", "?", "?",
                       "?", "?", fi[i].path);
                continue;
            }
            human_bytes(b1, sizeof b1, fi[i].sum.file_bytes);
            printf("%-8" PRId64 " %-16.16s %8" PRId64 " %12" PRIu64 " %10s %10.1f %8" PRIu64
                   "  %s\n",
                   fi[i].rank, fi[i].host ? fi[i].host : "-", fi[i].pid, fi[i].sum.events, b1,
                   (fi[i].sum.last_ns - fi[i].sum.first_ns) / 1e6, fi[i].sum.dropped, fi[i].path);
        }
        human_bytes(b1, sizeof b1, bytes);
        printf("\n%zu trace file(s), %" PRIu64 " events, %s on disk, %.2f bytes/event, "
               "%" PRIu64 " dropped, span %.3f s\n",
               nfiles, events, b1, events ? (double)bytes / events : 0.0, dropped,
               (last - first) / 1e9);
        if (!quick) {
            printf("events by kind:");
            for (int k = 1; k < NKINDS; k++)
                if (by_kind[k])
                    printf(" %s=%" PRIu64, dpro_kind_name((uint32_t)k), by_kind[k]);
            if (by_kind[0])
                printf(" unknown=%" PRIu64, by_kind[0]);
            printf("\n");
        }
        if (dropped)
            printf("warning: %" PRIu64 " events were dropped by the collector (buffers full)\n",
                   dropped);
        for (size_t i = 0; kernels && i < nfiles; i++) {
            char title[600];
            if (fi[i].failed)
                continue;
            snprintf(title, sizeof title, "kernel breakdown, rank %" PRId64 " (%s)", fi[i].rank,
                     fi[i].path);
            kernels_print(stdout, title, &fi[i].kern, top);
        }
        if (kernels && nok > 1) {
            char title[64];
            snprintf(title, sizeof title, "kernel breakdown, all ranks (%zu files)", nok);
            kernels_print(stdout, title, &all, top);
        }
    }
    for (size_t i = 0; i < nfiles; i++) {
        free(fi[i].kern.names);
        dpro_reader_close(readers[i]);
    }
    free(all.names);
    free(readers);
    free(fi);
    dpro_free_paths(files, nfiles);
    return status;
}
