/*
 * fuzz_import_kineto.c: libFuzzer target for the Kineto importer (tools/import_kineto.c).
 *
 * Each input is parsed and mapped without a writer (the format library has its own
 * fuzz coverage; a SQLite file per input would make the run a hundred times slower), fed
 * in chunks whose size the first byte picks, so tokens break at every place. Any error
 * status is fine; a crash, a leak or undefined behaviour is not.
 *
 * Built and run by tests/import/run-fuzz.sh (clang -fsanitize=fuzzer,address).
 */
#include <stddef.h>
#include <stdint.h>

#include "import_kineto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t chunk = size ? (size_t)(data[0] % 16) * 37 + 1 : 0;
    char err[512];
    kineto_options o = {.source_file = "fuzz.json", .file_count = 2};
    kineto_import_buffer(NULL, data, size, chunk, &o, err, sizeof(err));
    return 0;
}
