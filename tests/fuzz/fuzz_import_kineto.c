/*
 * fuzz_import_kineto.c: libFuzzer target for the Kineto importer (tools/import/).
 *
 * Each input is parsed and mapped, fed in chunks whose size the first byte picks, so
 * tokens break at every place. Most inputs go without a writer (the format library has its
 * own fuzz coverage; a SQLite file per input would make the run a hundred times slower);
 * one in sixteen (first byte 0xF0 and above) is written to a trace file, on the writer
 * thread or inline (the first byte's low bit), so that the batches, the name ids handed to
 * the writer and the thread and device records meet odd inputs too. Any error status is
 * fine; a crash, a leak, a race or undefined behaviour is not.
 *
 * Built and run by tests/import/run-fuzz.sh (clang -fsanitize=fuzzer,address).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "import_kineto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Removes the trace file and its SQLite side files. */
static void
remove_trace(const char *path)
{
    char side[300];
    unlink(path);
    snprintf(side, sizeof(side), "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof(side), "%s-shm", path);
    unlink(side);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t chunk = size ? (size_t)(data[0] % 16) * 37 + 1 : 0;
    char err[512];
    kineto_options o = {.source_file = "fuzz.json", .file_count = 2};
    if (size == 0 || data[0] < 0xF0) {
        kineto_import_buffer(NULL, data, size, chunk, &o, err, sizeof(err));
        return 0;
    }
    char path[256];
    snprintf(path, sizeof(path), "/tmp/dpro-fuzz-import-%ld.dpro", (long)getpid());
    remove_trace(path);
    dpro_writer_options wo;
    kineto_writer_options(&wo);
    wo.exclusive_create = 0;
    dpro_writer *w = NULL;
    if (dpro_writer_open(path, &wo, &w, err, sizeof(err)) == DPRO_OK) {
        o.inline_writer = data[0] & 1;
        kineto_import_buffer(w, data, size, chunk, &o, err, sizeof(err));
        dpro_writer_close(w);
    }
    remove_trace(path);
    return 0;
}
