/*
 * trace-dump: prints dpro traces as JSON, one document per line and per file, for the
 * collector's test drivers (tests/collector/test-*.py). Reads through libdprotrace's reader.
 *
 *   trace-dump FILE|DIR...   {"file":..., "meta":{...}, "summary":{...}, "comms":[...],
 *                             "threads":N, "streams":N, "devices":N,
 *                             "thread_names":{"TID":"NAME",...}, "events":[{...}, ...]}
 *   trace-dump --counts FILE|DIR...   the same without "events": "counts":{"KIND:NAME":N,...}
 *                             (every event still read): a light look at many large traces
 *   trace-dump --sanitized   prints 1 when built with AddressSanitizer, else 0
 *
 * Exit status: 0, 1 when a file cannot be read, 2 on a usage error.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dprotrace.h"

static const char *const dump_meta_keys[] = {"source",
                                             "host",
                                             "pid",
                                             "rank",
                                             "local_rank",
                                             "world_size",
                                             "job_id",
                                             "command",
                                             "clock",
                                             "anchor_start_realtime_ns",
                                             "anchor_start_monotonic_ns",
                                             "anchor_end_realtime_ns",
                                             "anchor_end_monotonic_ns",
                                             "cuda_runtime_version",
                                             "cuda_driver_version",
                                             "nccl_version",
                                             "cupti",
                                             "setting.DPRO_RING_EVENTS",
                                             "setting.DPRO_ZLIB_LEVEL",
                                             "setting.DPRO_DRAIN_MS",
                                             "writer_errors",
                                             "cupti_version",
                                             "cupti_error",
                                             "cupti_taken_ns",
                                             "cupti_shared",
                                             "cupti_shared_ns",
                                             "cupti_shared_records",
                                             "cupti_shared_lost",
                                             "cupti_shared_clock_rate",
                                             "cupti_clock",
                                             "cupti_clock_offset_start_ns",
                                             "cupti_clock_offset_end_ns",
                                             "setting.DPRO_OUTPUT",
                                             "setting.DPRO_CUDA",
                                             "setting.DPRO_NCCL",
                                             "setting.DPRO_CUPTI",
                                             "setting.DPRO_NVTX",
                                             "setting.DPRO_STACKS",
                                             "setting.DPRO_STACK_SAMPLE",
                                             "setting.DPRO_FLUSH_MS",
                                             "setting.DPRO_FORK",
                                             "stacks",
                                             NULL};

/* Prints s escaped for the inside of a JSON string. */
static void
dump_chars(const char *s)
{
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20 || c >= 0x7f)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
}

/* Prints s as a JSON string. */
static void
dump_string(const char *s)
{
    putchar('"');
    dump_chars(s);
    putchar('"');
}

/* The events of one file counted by kind and name (--counts). */
struct dump_count {
    dpro_kind kind;
    uint32_t name;
    uint64_t n;
};

/* Counts ev into *counts (*ncounts entries, grown as needed); returns 0 or -1 (memory). */
static int
dump_count_event(struct dump_count **counts, size_t *ncounts, const dpro_event *ev)
{
    for (size_t i = 0; i < *ncounts; i++)
        if ((*counts)[i].kind == ev->kind && (*counts)[i].name == ev->name) {
            (*counts)[i].n++;
            return 0;
        }
    struct dump_count *grown = realloc(*counts, (*ncounts + 1) * sizeof *grown);
    if (grown == NULL)
        return -1;
    grown[*ncounts] = (struct dump_count){ev->kind, ev->name, 1};
    *counts = grown;
    (*ncounts)++;
    return 0;
}

/* Prints one event as a JSON object (n: the events printed before). */
static void
dump_event(dpro_reader *r, const dpro_event *ev, size_t n)
{
    const uint32_t *frames;
    size_t nframes = ev->stack ? dpro_reader_stack(r, ev->stack, &frames) : 0;
    printf(
        "%s{\"kind\":\"%s\",\"sub\":%u,\"t0\":%" PRIu64 ",\"t1\":%" PRIu64 ",\"tid\":%u,\"name\":",
        n ? "," : "", dpro_kind_name(ev->kind), ev->subkind, ev->start_ns, ev->end_ns, ev->thread);
    dump_string(dpro_reader_string(r, ev->name));
    printf(",\"name2\":");
    dump_string(dpro_reader_string(r, ev->name2));
    printf(",\"corr\":%" PRIu64 ",\"stream\":%" PRIu64 ",\"result\":%d,\"device\":%u"
           ",\"bytes\":%" PRIu64 ",\"addr\":%" PRIu64 ",\"comm\":%" PRIu64 ",\"seq\":%" PRIu64
           ",\"count\":%" PRIu64 ",\"dtype\":%u,\"redop\":%u"
           ",\"peer\":%d,\"object\":%" PRIu64 ",\"value\":%" PRId64
           ",\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u],\"stack_frames\":%zu}",
           ev->correlation, ev->stream, ev->result, ev->device, ev->bytes, ev->address, ev->comm,
           ev->seq, ev->count, ev->dtype, ev->redop, ev->peer, ev->object, ev->value, ev->grid[0],
           ev->grid[1], ev->grid[2], ev->block[0], ev->block[1], ev->block[2], nframes);
}

/* Prints one file (its events, or their counts); returns 0 or 1. */
static int
dump_file(const char *path, int counts_only)
{
    char err[512];
    dpro_reader *r = NULL;
    if (dpro_reader_open(path, &r, err, sizeof err) != DPRO_OK) {
        fprintf(stderr, "trace-dump: %s\n", err);
        return 1;
    }
    printf("{\"file\":");
    dump_string(path);
    printf(",\"meta\":{");
    int first = 1;
    for (const char *const *k = dump_meta_keys; *k; k++) {
        const char *v = dpro_reader_meta(r, *k);
        if (v == NULL)
            continue;
        printf("%s", first ? "" : ",");
        first = 0;
        dump_string(*k);
        putchar(':');
        dump_string(v);
    }
    dpro_trace_summary s;
    memset(&s, 0, sizeof s);
    dpro_reader_summary(r, &s);
    printf("},\"summary\":{\"batches\":%" PRIu64 ",\"events\":%" PRIu64 ",\"dropped\":%" PRIu64
           ",\"event_bytes\":%" PRIu64 ",\"raw_bytes\":%" PRIu64 ",\"file_bytes\":%" PRIu64 "}",
           s.batches, s.events, s.dropped, s.event_bytes, s.raw_bytes, s.file_bytes);
    const dpro_comm_info *comms;
    size_t ncomms = dpro_reader_comms(r, &comms);
    printf(",\"comms\":[");
    for (size_t i = 0; i < ncomms; i++)
        printf("%s{\"hash\":%" PRIu64 ",\"parent\":%" PRIu64 ",\"rank\":%d,\"size\":%d,"
               "\"device\":%u}",
               i ? "," : "", comms[i].hash, comms[i].parent_hash, comms[i].rank, comms[i].size,
               comms[i].device);
    const dpro_thread_info *threads;
    const dpro_stream_info *streams;
    const dpro_device_info *devices;
    size_t nthreads = dpro_reader_threads(r, &threads);
    printf("],\"threads\":%zu,\"streams\":%zu,\"devices\":%zu,\"thread_names\":{", nthreads,
           dpro_reader_streams(r, &streams), dpro_reader_devices(r, &devices));
    for (size_t i = 0; i < nthreads; i++) {
        printf("%s\"%u\":", i ? "," : "", threads[i].tid);
        dump_string(threads[i].name);
    }
    printf(counts_only ? "},\"counts\":{" : "},\"events\":[");
    dpro_iter *it = NULL;
    int rc = dpro_iter_open(r, &it), more = rc == DPRO_OK, failed = 0;
    struct dump_count *counts = NULL;
    size_t n = 0, ncounts = 0;
    dpro_event ev;
    while (more) {
        more = dpro_iter_next(it, &ev);
        if (more < 0) {
            fprintf(stderr, "trace-dump: %s\n", dpro_reader_errmsg(r));
            continue;
        }
        if (more == 0)
            break;
        if (!counts_only)
            dump_event(r, &ev, n++);
        else if (dump_count_event(&counts, &ncounts, &ev) != 0)
            failed = 1;
    }
    for (size_t i = 0; i < ncounts; i++) {
        printf("%s\"%s:", i ? "," : "", dpro_kind_name(counts[i].kind));
        dump_chars(dpro_reader_string(r, counts[i].name));
        printf("\":%" PRIu64, counts[i].n);
    }
    free(counts);
    printf(counts_only ? "}}\n" : "]}\n");
    dpro_iter_close(it);
    dpro_reader_close(r);
    return failed;
}

int
main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--sanitized") == 0) {
#if defined(__SANITIZE_ADDRESS__)
        puts("1");
#else
        puts("0");
#endif
        return 0;
    }
    int counts_only = argc > 1 && strcmp(argv[1], "--counts") == 0;
    argc -= counts_only;
    argv += counts_only;
    if (argc < 2) {
        fprintf(stderr, "usage: trace-dump [--counts] FILE|DIR... | --sanitized\n");
        return 2;
    }
    char **files = NULL;
    size_t nfiles = 0;
    char err[512];
    if (dpro_list_traces((const char *const *)(argv + 1), (size_t)argc - 1, &files, &nfiles, err,
                         sizeof err) != DPRO_OK) {
        fprintf(stderr, "trace-dump: %s\n", err);
        return 1;
    }
    int rc = 0;
    for (size_t i = 0; i < nfiles; i++)
        rc |= dump_file(files[i], counts_only);
    dpro_free_paths(files, nfiles);
    return rc;
}
