/*
 * fuzz_trace_reader.c: libFuzzer target for the trace reader (schemas/reader*.c, iter.c):
 * the input is the bytes of a trace file. The target writes them to a file of its own,
 * opens it with dpro_reader_open and asks everything a command asks: meta, strings,
 * devices, streams, communicators, threads, stacks, the summary, every event (whole, and
 * through a time range) with its names. Any error status is fine; a crash, a leak, an
 * unbounded allocation or undefined behaviour is not.
 *
 * Built and run by tests/fuzz/run-batch-fuzz.sh (clang -fsanitize=fuzzer,address), with
 * small collector traces as its seeds.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dprotrace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Reads every event of it, with its names and stack; returns the events read. */
static size_t
read_events(dpro_reader *r, dpro_iter *it)
{
    dpro_event ev;
    size_t n = 0;
    for (int more = 1; more > 0 && n < 1000000;) {
        more = dpro_iter_next(it, &ev);
        if (more <= 0)
            break;
        const uint32_t *frames;
        size_t nf = dpro_reader_stack(r, ev.stack, &frames);
        for (size_t i = 0; i < nf; i++)
            (void)dpro_reader_string(r, frames[i]);
        const char *a = dpro_reader_string(r, ev.name), *b = dpro_reader_string(r, ev.name2);
        n += 1 + (a && *a) + (b && *b) + (dpro_reader_api_class(r, ev.name) > 0);
    }
    return n;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[64], side[80];
    if (path[0] == '\0')
        snprintf(path, sizeof path, "/tmp/dpro-fuzz-reader-%d.dpro", (int)getpid());
    unlink(path);
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return 0;
    size_t put = fwrite(data, 1, size, f);
    if (fclose(f) != 0 || put != size)
        return 0;
    char err[512];
    dpro_reader *r = NULL;
    if (dpro_reader_open(path, &r, err, sizeof err) == DPRO_OK) {
        static const char *const keys[] = {"schema_major",
                                           "rank",
                                           "world_size",
                                           "pid",
                                           "anchor_start_monotonic_ns",
                                           "job_id",
                                           DPRO_META_HOST_CPUS,
                                           DPRO_META_HOST_CPU_LIST,
                                           DPRO_META_CPU_SAMPLES,
                                           NULL};
        for (const char *const *k = keys; *k; k++)
            (void)dpro_reader_meta_int(r, *k, -1), (void)dpro_reader_meta(r, *k);
        for (uint32_t i = 0, n = dpro_reader_string_count(r); i < n && i < 100000; i++)
            (void)dpro_reader_string(r, i);
        const dpro_device_info *dev;
        const dpro_stream_info *st;
        const dpro_comm_info *co;
        const dpro_thread_info *th;
        size_t total = dpro_reader_devices(r, &dev) + dpro_reader_streams(r, &st) +
                       dpro_reader_comms(r, &co) + dpro_reader_threads(r, &th);
        dpro_trace_summary s;
        memset(&s, 0, sizeof s);
        (void)dpro_reader_summary(r, &s);
        (void)dpro_reader_warnings(r);
        (void)dpro_reader_ended_early(r);
        dpro_iter *it = NULL;
        if (dpro_iter_open(r, &it) == DPRO_OK) {
            total += read_events(r, it);
            (void)dpro_iter_bad_batches(it);
            dpro_iter_close(it);
        }
        it = NULL;
        if (dpro_iter_open_range(r, s.first_ns + (s.last_ns - s.first_ns) / 2, s.last_ns, &it) ==
            DPRO_OK) {
            total += read_events(r, it);
            dpro_iter_close(it);
        }
        (void)total;
        dpro_reader_close(r);
    }
    unlink(path);
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
    return 0;
}
