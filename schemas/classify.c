/*
 * classify.c: what an event's names and codes mean, decided once for every producer
 * (collector, importers) and every reader (replay, optimizer, commands).
 *
 * API classes come from the call's name, so a trace written by any producer and in any
 * spelling (the runtime's _ptsz/_ptds per-thread entry points, the driver's _v2 versions,
 * HIP's names) means the same to every reader.
 */
#include <string.h>

#include "dprotrace.h"

/* Bytes of each ncclDataType_t: int8, uint8, int32, uint32, int64, uint64, float16,
 * float32, float64, bfloat16, float8e4m3, float8e5m2 (nccl.h). */
static const uint8_t nccl_dtype_bytes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};

size_t
dpro_nccl_dtype_size(uint32_t nccl_dtype)
{
    return nccl_dtype < sizeof nccl_dtype_bytes ? nccl_dtype_bytes[nccl_dtype] : 0;
}

/* Readers ask this of every kernel they load, so it is one pass with no library call:
 * c | 0x20 folds the case of exactly the letters compared here (n, r, c, l). */
int
dpro_kernel_is_comm(const char *kernel_name)
{
    int comm = 0;
    for (const char *p = kernel_name; p && *p && !comm; p++) {
        int c0 = *p | 0x20;
        comm = (c0 == 'n' || c0 == 'r') && (p[1] | 0x20) == 'c' && (p[2] | 0x20) == 'c' &&
               (p[3] | 0x20) == 'l';
    }
    return comm;
}

/* Length of name without its trailing spelling suffixes (_ptsz, _ptds, _spt, _vN). */
static size_t
base_length(const char *name, size_t len)
{
    static const char *const suffixes[] = {"_ptsz", "_ptds", "_spt"};
    int stripped = 1;
    while (stripped) {
        stripped = 0;
        for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
            size_t n = strlen(suffixes[i]);
            if (len > n && memcmp(name + len - n, suffixes[i], n) == 0) {
                len -= n;
                stripped = 1;
            }
        }
        if (len > 3 && name[len - 3] == '_' && name[len - 2] == 'v' && name[len - 1] >= '0' &&
            name[len - 1] <= '9') {
            len -= 3;
            stripped = 1;
        }
    }
    return len;
}

typedef struct class_rule {
    const char *base; /* the name less its API prefix and suffixes */
    int prefix;       /* 1: the base is a prefix of the name's base, 0: the whole base */
    dpro_api_class cls;
} class_rule;

/* Runtime (cuda*) and HIP (hip*) names, less the prefix. */
static const class_rule runtime_rules[] = {
    {"LaunchKernel", 1, DPRO_API_CLASS_LAUNCH}, /* LaunchKernel, LaunchKernelExC */
    {"LaunchCooperativeKernel", 1, DPRO_API_CLASS_LAUNCH},
    {"ExtLaunchKernel", 1, DPRO_API_CLASS_LAUNCH},       /* HIP */
    {"ModuleLaunchKernel", 0, DPRO_API_CLASS_LAUNCH},    /* HIP */
    {"ExtModuleLaunchKernel", 0, DPRO_API_CLASS_LAUNCH}, /* HIP */
    {"HccModuleLaunchKernel", 0, DPRO_API_CLASS_LAUNCH}, /* HIP */
    {"LaunchByPtr", 0, DPRO_API_CLASS_LAUNCH},           /* HIP */
    {"GraphLaunch", 0, DPRO_API_CLASS_GRAPH_LAUNCH},
    {"EventRecord", 1, DPRO_API_CLASS_EVENT_RECORD}, /* EventRecord, EventRecordWithFlags */
    {"StreamWaitEvent", 0, DPRO_API_CLASS_STREAM_WAIT},
    {"EventSynchronize", 0, DPRO_API_CLASS_EVENT_SYNC},
    {"StreamSynchronize", 0, DPRO_API_CLASS_STREAM_SYNC},
    {"DeviceSynchronize", 0, DPRO_API_CLASS_DEVICE_SYNC},
    {"ThreadSynchronize", 0, DPRO_API_CLASS_DEVICE_SYNC},
    {"Malloc", 1, DPRO_API_CLASS_MALLOC}, /* Malloc, MallocAsync, MallocHost, MallocManaged */
    {"HostAlloc", 0, DPRO_API_CLASS_MALLOC},
    {"ExtMallocWithFlags", 0, DPRO_API_CLASS_MALLOC}, /* HIP */
    {"Free", 1, DPRO_API_CLASS_FREE},                 /* Free, FreeAsync, FreeHost, FreeArray */
    {"HostFree", 0, DPRO_API_CLASS_FREE},             /* HIP */
};

/* Driver (cu*) names, less the prefix. */
static const class_rule driver_rules[] = {
    {"LaunchKernel", 1, DPRO_API_CLASS_LAUNCH}, /* LaunchKernel, LaunchKernelEx */
    {"LaunchCooperativeKernel", 1, DPRO_API_CLASS_LAUNCH},
    {"LaunchGrid", 1, DPRO_API_CLASS_LAUNCH},
    {"GraphLaunch", 0, DPRO_API_CLASS_GRAPH_LAUNCH},
    {"EventRecord", 1, DPRO_API_CLASS_EVENT_RECORD},
    {"StreamWaitEvent", 0, DPRO_API_CLASS_STREAM_WAIT},
    {"EventSynchronize", 0, DPRO_API_CLASS_EVENT_SYNC},
    {"StreamSynchronize", 0, DPRO_API_CLASS_STREAM_SYNC},
    {"CtxSynchronize", 0, DPRO_API_CLASS_DEVICE_SYNC},
    {"MemAlloc", 1, DPRO_API_CLASS_MALLOC}, /* MemAlloc, MemAllocAsync, MemAllocHost, ... */
    {"MemHostAlloc", 0, DPRO_API_CLASS_MALLOC},
    {"MemFree", 1, DPRO_API_CLASS_FREE}, /* MemFree, MemFreeAsync, MemFreeHost */
};

/* Classifies base[0..len) (the name less its prefix and suffixes) by rules, and copies and
 * sets, which are recognised by their stem in every API. */
static dpro_api_class
classify_base(const char *base, size_t len, const class_rule *rules, size_t nrules)
{
    dpro_api_class cls = DPRO_API_CLASS_OTHER;
    int async = 0;
    for (size_t i = 0; i + 5 <= len && !async; i++)
        async = memcmp(base + i, "Async", 5) == 0;
    if (len >= 6 && memcmp(base, "Memcpy", 6) == 0)
        cls = async ? DPRO_API_CLASS_MEMCPY_ASYNC : DPRO_API_CLASS_MEMCPY;
    else if (len >= 6 && memcmp(base, "Memset", 6) == 0)
        cls = async ? DPRO_API_CLASS_MEMSET_ASYNC : DPRO_API_CLASS_MEMSET;
    for (size_t i = 0; i < nrules && cls == DPRO_API_CLASS_OTHER; i++) {
        size_t n = strlen(rules[i].base);
        if ((rules[i].prefix ? len >= n : len == n) && memcmp(base, rules[i].base, n) == 0)
            cls = rules[i].cls;
    }
    return cls;
}

dpro_api_class
dpro_api_classify(const char *name)
{
    dpro_api_class cls = DPRO_API_CLASS_OTHER;
    if (name && name[0] == '_' && name[1] == '_')
        name += 2; /* the runtime's internal entry points: __cudaLaunchKernel */
    size_t len = name ? base_length(name, strlen(name)) : 0;
    if (len > 4 && memcmp(name, "cuda", 4) == 0)
        cls = classify_base(name + 4, len - 4, runtime_rules,
                            sizeof runtime_rules / sizeof runtime_rules[0]);
    else if (len > 3 && memcmp(name, "hip", 3) == 0)
        cls = classify_base(name + 3, len - 3, runtime_rules,
                            sizeof runtime_rules / sizeof runtime_rules[0]);
    else if (len > 2 && memcmp(name, "cu", 2) == 0)
        cls = classify_base(name + 2, len - 2, driver_rules,
                            sizeof driver_rules / sizeof driver_rules[0]);
    return cls;
}

const char *
dpro_api_class_name(int cls)
{
    static const char *const names[DPRO_API_CLASS_COUNT] = {
        [DPRO_API_CLASS_OTHER] = "other",
        [DPRO_API_CLASS_LAUNCH] = "launch",
        [DPRO_API_CLASS_GRAPH_LAUNCH] = "graph_launch",
        [DPRO_API_CLASS_MEMCPY] = "memcpy",
        [DPRO_API_CLASS_MEMCPY_ASYNC] = "memcpy_async",
        [DPRO_API_CLASS_MEMSET] = "memset",
        [DPRO_API_CLASS_MEMSET_ASYNC] = "memset_async",
        [DPRO_API_CLASS_EVENT_RECORD] = "event_record",
        [DPRO_API_CLASS_STREAM_WAIT] = "stream_wait",
        [DPRO_API_CLASS_EVENT_SYNC] = "event_sync",
        [DPRO_API_CLASS_STREAM_SYNC] = "stream_sync",
        [DPRO_API_CLASS_DEVICE_SYNC] = "device_sync",
        [DPRO_API_CLASS_MALLOC] = "malloc",
        [DPRO_API_CLASS_FREE] = "free",
    };
    return cls >= 0 && cls < DPRO_API_CLASS_COUNT ? names[cls] : "unknown";
}
