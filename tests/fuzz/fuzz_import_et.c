/*
 * fuzz_import_et.c: libFuzzer target for the execution-trace reader (tools/import/et.c)
 * and its join to a Kineto import.
 *
 * Each input is read as an execution trace (et_graph_load_buffer); one that loads is
 * joined to a fixed Kineto trace whose ops carry Record function ids 1 to 4 (no writer),
 * so that the nodes' texts (shapes, types, data dependencies) go through the importer's
 * interning. Any error status is fine; a crash, a leak or undefined behaviour is not.
 *
 * Built and run by tests/import/run-fuzz.sh (clang -fsanitize=fuzzer,address).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "import_et.h"
#include "import_kineto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char kineto[] =
    "{\"traceEvents\":["
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::linear\",\"pid\":1,\"tid\":1,\"ts\":10,"
    "\"dur\":5,\"args\":{\"Record function id\":1}},"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::addmm\",\"pid\":1,\"tid\":1,\"ts\":11,"
    "\"dur\":3,\"args\":{\"Record function id\":2,\"Input Dims\":[[2,3]]}},"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::relu\",\"pid\":1,\"tid\":1,\"ts\":16,"
    "\"dur\":1,\"args\":{\"Record function id\":3}},"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::t\",\"pid\":1,\"tid\":1,\"ts\":18,"
    "\"dur\":1,\"args\":{\"Record function id\":4}},"
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":7,\"ts\":12,"
    "\"dur\":2,\"args\":{\"device\":0,\"stream\":7,\"correlation\":9}}]}";

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512];
    et_graph *g = NULL;
    if (et_graph_load_buffer("fuzz.json", data, size, &g, err, sizeof(err)) != 0)
        return 0;
    kineto_options o = {.source_file = "fuzz-kineto.json", .file_count = 1, .et = g};
    kineto_import_buffer(NULL, kineto, strlen(kineto), 0, &o, err, sizeof(err));
    et_graph_free(g);
    return 0;
}
