/*
 * kineto_sample.h: what the importer's test programs (test_import_kineto.c,
 * test_import_pipeline.c) share: the small hand-made trace that has every case in it, and
 * an import of a text into a file. Included once per program, after import_kineto.h.
 */
#ifndef DPRO_TESTS_IMPORT_KINETO_SAMPLE_H
#define DPRO_TESTS_IMPORT_KINETO_SAMPLE_H

#include <stdio.h>

#include "dprotrace.h"
#include "import_kineto.h"

static const char trace[] =
    "{\"schemaVersion\": 1, \"traceEvents\": [\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::mm\",\"pid\":100,\"tid\":101,"
    "\"ts\":1000.5,\"dur\":50,\"args\":{\"External id\":1,\"Input Dims\":[[2, 3], []],"
    "\"Sequence number\":0,\"Input type\":[\"float\",\"\"],\"Fwd thread id\":1,"
    "\"Record function id\":9,\"Nested\":{\"a\":[1,{\"b\":\"x\\\"y\"}],\"c\":true,\"d\":null},"
    "\"correlation\":7,\"stream\":\"0x10\"}},\n"
    "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#7\",\"pid\":100,"
    "\"tid\":101,\"ts\":999,\"dur\":1000},\n"
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"gemm\",\"pid\":0,\"tid\":7,\"ts\":1010.25,"
    "\"dur\":20.001,\"args\":{\"device\":0,\"stream\":7,\"correlation\":11,\"grid\":[2,3,4],"
    "\"block\":[128,1,1],\"shared memory\":1024,\"blocks per SM\":0.5}},\n"
    "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":100,"
    "\"tid\":101,\"ts\":1001,\"dur\":5,\"args\":{\"correlation\":11,\"cbid\":211}},\n"
    "{\"ph\":\"s\",\"id\":11,\"pid\":100,\"tid\":101,\"ts\":1001,\"cat\":\"ac2g\","
    "\"name\":\"ac2g\"},\n"
    "{\"ph\":\"f\",\"id\":11,\"pid\":0,\"tid\":7,\"ts\":1010.25,\"cat\":\"ac2g\","
    "\"name\":\"ac2g\",\"bp\":\"e\"},\n"
    "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":100,"
    "\"tid\":101,\"ts\":1020,\"dur\":4,\"args\":{\"correlation\":12}},\n"
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"ncclKernel_AllReduce_RING_LL_Sum_float("
    "ncclDevComm*, unsigned long, ncclWork*)\",\"pid\":0,\"tid\":20,\"ts\":1300,\"dur\":30,"
    "\"args\":{\"device\":0,\"stream\":20,\"correlation\":15,\"Collective name\":"
    "\"allreduce\",\"In msg nelems\":100,\"dtype\":\"Float\",\"Process Group Name\":\"0\","
    "\"Group size\":2,\"Process Group Ranks\":\"[0, 1]\"}},\n"
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"ncclKernel_AllReduce_RING_LL_Sum_float("
    "ncclDevComm*, unsigned long, ncclWork*)\",\"pid\":0,\"tid\":20,\"ts\":1200,\"dur\":30,"
    "\"args\":{\"device\":0,\"stream\":20,\"correlation\":14,\"Collective name\":"
    "\"allreduce\",\"In msg nelems\":50,\"dtype\":\"Float\",\"Process Group Name\":\"0\","
    "\"Group size\":2}},\n"
    "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":100,"
    "\"tid\":102,\"ts\":1150,\"dur\":3,\"args\":{\"correlation\":14}},\n"
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"vec_add\",\"pid\":0,\"tid\":7,\"ts\":1030,"
    "\"dur\":2,\"args\":{\"device\":0,\"stream\":7,\"correlation\":12,\"grid\":[1,1,1],"
    "\"block\":[32,1,1]}},\n"
    "{\"ph\":\"X\",\"cat\":\"gpu_memcpy\",\"name\":\"Memcpy HtoD (Pageable -> Device)\","
    "\"pid\":0,\"tid\":7,\"ts\":1040,\"dur\":3,\"args\":{\"device\":0,\"stream\":7,"
    "\"correlation\":13,\"bytes\":4096}},\n"
    "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaMemcpyAsync\",\"pid\":100,"
    "\"tid\":101,\"ts\":1035,\"dur\":6,\"args\":{\"correlation\":13}},\n"
    "{\"ph\":\"X\",\"cat\":\"cuda_sync\",\"name\":\"Stream Wait Event\",\"pid\":0,\"tid\":20,"
    "\"ts\":1100,\"dur\":1,\"args\":{\"cuda_sync_kind\":\"Stream Wait Event\","
    "\"wait_on_stream\":7,\"wait_on_cuda_event_record_corr_id\":16,"
    "\"wait_on_cuda_event_id\":3,\"stream\":20,\"correlation\":17,\"device\":0}},\n"
    "{\"ph\":\"f\",\"id\":5,\"pid\":100,\"tid\":101,\"ts\":1001,\"cat\":\"fwdbwd\","
    "\"name\":\"fwdbwd\",\"bp\":\"e\"},\n"
    "{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"cpu_instant_event\",\"name\":\"[memory]\","
    "\"pid\":100,\"tid\":101,\"ts\":1002,\"args\":{\"Device Type\":1,\"Device Id\":0,"
    "\"Addr\":4096,\"Bytes\":-512,\"Total Allocated\":100,\"Total Reserved\":2048}},\n"
    "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":100,\"tid\":101,"
    "\"args\":{\"name\":\"thread 101 (python)\"}},\n"
    "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":0,\"tid\":20,"
    "\"args\":{\"name\":\"stream 20 (nccl)\"}},\n"
    "{\"ph\":\"X\",\"cat\":\"Trace\",\"name\":\"PyTorch Profiler (0)\",\"pid\":\"Spans\","
    "\"tid\":\"PyTorch Profiler\",\"ts\":900,\"dur\":2000,\"args\":{\"Op count\":0}}\n"
    "],\n"
    "\"deviceProperties\":[{\"id\":0,\"name\":\"Test GPU\",\"totalGlobalMem\":1000,"
    "\"computeMajor\":8,\"computeMinor\":0,\"numSms\":108,\"extra\":[1,{\"a\":null}]}],\n"
    "\"distributedInfo\":{\"backend\":\"nccl\",\"rank\":1,\"world_size\":2,"
    "\"pg_config\":[{\"pg_name\":\"0\",\"ranks\":[0,1]}]},\n"
    "\"host_name\":\"node7\", \"displayTimeUnit\": \"ms\"}\n";

/* Imports text into path; pre_interned strings are interned in the writer first. */
static int
import_to(const char *path, const char *text, size_t len, int inline_writer, int pre_interned,
          char *err, size_t errlen)
{
    dpro_writer *w;
    dpro_writer_options wo;
    kineto_writer_options(&wo);
    if (dpro_writer_open(path, &wo, &w, err, errlen) != DPRO_OK)
        return -1;
    for (int i = 0; i < pre_interned; i++) {
        char s[32];
        uint32_t id;
        snprintf(s, sizeof(s), "held before %d", i);
        dpro_writer_intern(w, s, &id);
    }
    kineto_options o = {
        .source_file = "synthetic.json", .file_count = 1, .inline_writer = inline_writer};
    int rc = kineto_import_buffer(w, text, len, 100000, &o, err, errlen);
    int crc = dpro_writer_close(w);
    return rc != DPRO_OK ? rc : crc;
}

#endif
