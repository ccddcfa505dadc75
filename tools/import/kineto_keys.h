/*
 * kineto_keys.h: the keys and categories of Kineto JSON the importer reads, matched in
 * their context (enum kin_key, kin_cat in kineto_int.h; K_NONE or CAT_OTHER: not ours).
 * Inline: they run for every key of the file.
 */
#ifndef DPRO_IMPORT_KINETO_KEYS_H
#define DPRO_IMPORT_KINETO_KEYS_H

#include "kineto_int.h"

/* Whether s[0..len) is the text lit. */
static inline int
kin_eq(const unsigned char *s, size_t len, const char *lit)
{
    size_t n = strlen(lit);
    return n == len && memcmp(s, lit, n) == 0;
}

/* A key of the top-level object (K_TRACE_EVENTS ... K_SCHEMA_VERSION). */
static inline int
kin_top_key(const unsigned char *s, size_t l)
{
    switch (l) {
    case 7:
        return kin_eq(s, l, "traceId") ? K_TRACE_ID : K_NONE;
    case 8:
        return kin_eq(s, l, "trace_id") ? K_TRACE_ID : K_NONE;
    case 9:
        return kin_eq(s, l, "host_name")   ? K_HOST_NAME
               : kin_eq(s, l, "traceName") ? K_TRACE_NAME
                                           : K_NONE;
    case 11:
        return kin_eq(s, l, "traceEvents") ? K_TRACE_EVENTS : K_NONE;
    case 13:
        return kin_eq(s, l, "schemaVersion") ? K_SCHEMA_VERSION : K_NONE;
    case 15:
        return kin_eq(s, l, "distributedInfo") ? K_DIST_INFO : K_NONE;
    case 16:
        return kin_eq(s, l, "deviceProperties") ? K_DEV_PROPS : K_NONE;
    case 19:
        return kin_eq(s, l, "baseTimeNanoseconds") ? K_BASE_TIME : K_NONE;
    default:
        return K_NONE;
    }
}

/* The key of an event: its (at most four) bytes and its length as one number, matched
 * by compares (a switch on the length first was an indirect jump, often mispredicted). */
#define KIN_KEY4(a, b, c, d, len)                                                                  \
    ((uint64_t)(unsigned char)(a) | (uint64_t)(unsigned char)(b) << 8 |                            \
     (uint64_t)(unsigned char)(c) << 16 | (uint64_t)(unsigned char)(d) << 24 |                     \
     (uint64_t)(len) << 32)

/* A key of a trace event (K_PH ... K_ARGS). */
static inline int
kin_event_key(const unsigned char *s, size_t l)
{
    if (l - 2 > 2)
        return K_NONE;
    uint64_t w = KIN_KEY4(s[0], s[1], l > 2 ? s[2] : 0, l > 3 ? s[3] : 0, l);
    switch (w) {
    case KIN_KEY4('p', 'h', 0, 0, 2):
        return K_PH;
    case KIN_KEY4('t', 's', 0, 0, 2):
        return K_TS;
    case KIN_KEY4('i', 'd', 0, 0, 2):
        return K_ID;
    case KIN_KEY4('b', 'p', 0, 0, 2):
        return K_BP;
    case KIN_KEY4('c', 'a', 't', 0, 3):
        return K_CAT;
    case KIN_KEY4('p', 'i', 'd', 0, 3):
        return K_PID;
    case KIN_KEY4('t', 'i', 'd', 0, 3):
        return K_TID;
    case KIN_KEY4('d', 'u', 'r', 0, 3):
        return K_DUR;
    case KIN_KEY4('n', 'a', 'm', 'e', 4):
        return K_NAME;
    case KIN_KEY4('a', 'r', 'g', 's', 4):
        return K_ARGS;
    default:
        return K_NONE;
    }
}

/* A key of an event's args (A_*). */
static inline int
kin_arg_key(const unsigned char *s, size_t l)
{
    switch (l) {
    case 3:
        return kin_eq(s, l, "Seq") ? A_SEQ : K_NONE;
    case 4:
        if (kin_eq(s, l, "grid"))
            return A_GRID;
        if (kin_eq(s, l, "name"))
            return A_MNAME;
        if (kin_eq(s, l, "Addr"))
            return A_ADDR;
        if (kin_eq(s, l, "size"))
            return A_BYTES; /* ROCm's copy calls: "size": "2560" */
        return K_NONE;
    case 5:
        if (kin_eq(s, l, "block"))
            return A_BLOCK;
        if (kin_eq(s, l, "bytes"))
            return A_BYTES;
        if (kin_eq(s, l, "dtype"))
            return A_DTYPE;
        if (kin_eq(s, l, "Bytes"))
            return A_MEM_BYTES;
        return K_NONE;
    case 6:
        if (kin_eq(s, l, "Ev Idx"))
            return A_EV_IDX;
        if (kin_eq(s, l, "device"))
            return A_DEVICE;
        if (kin_eq(s, l, "stream"))
            return A_STREAM;
        return K_NONE;
    case 9:
        return kin_eq(s, l, "Device Id") ? A_DEVICE_ID : K_NONE;
    case 10:
        if (kin_eq(s, l, "Input Dims"))
            return A_INPUT_DIMS;
        if (kin_eq(s, l, "Input type"))
            return A_INPUT_TYPE;
        return kin_eq(s, l, "Group size") ? A_GROUP_SIZE : K_NONE;
    case 11:
        if (kin_eq(s, l, "External id"))
            return A_EXTERNAL_ID;
        if (kin_eq(s, l, "correlation"))
            return A_CORRELATION;
        if (kin_eq(s, l, "Device Type"))
            return A_DEVICE_TYPE;
        return K_NONE;
    case 13:
        if (kin_eq(s, l, "shared memory"))
            return A_SHARED_MEM;
        if (kin_eq(s, l, "In msg nelems"))
            return A_IN_NELEMS;
        if (kin_eq(s, l, "Fwd thread id"))
            return A_FWD_THREAD;
        return K_NONE;
    case 14:
        if (kin_eq(s, l, "cuda_sync_kind"))
            return A_SYNC_KIND;
        if (kin_eq(s, l, "Out msg nelems"))
            return A_OUT_NELEMS;
        if (kin_eq(s, l, "wait_on_stream"))
            return A_WAIT_STREAM;
        if (kin_eq(s, l, "Total Reserved"))
            return A_TOTAL_RESV;
        return K_NONE;
    case 15:
        if (kin_eq(s, l, "Collective name"))
            return A_COLL_NAME;
        if (kin_eq(s, l, "Sequence number"))
            return A_SEQ_NR;
        if (kin_eq(s, l, "Total Allocated"))
            return A_TOTAL_ALLOC;
        return K_NONE;
    case 16:
        return kin_eq(s, l, "Process Group ID") ? A_PG_ID : K_NONE;
    case 18:
        if (kin_eq(s, l, "Process Group Name"))
            return A_PG_NAME;
        if (kin_eq(s, l, "Record function id"))
            return A_RECORD_ID;
        return K_NONE;
    case 19:
        if (kin_eq(s, l, "Process Group Ranks"))
            return A_PG_RANKS;
        return K_NONE;
    case 21:
        return kin_eq(s, l, "wait_on_cuda_event_id") ? A_WAIT_EVENT_ID : K_NONE;
    case 23:
        return kin_eq(s, l, "memory bandwidth (GB/s)") ? A_BANDWIDTH : K_NONE;
    case 33:
        return kin_eq(s, l, "wait_on_cuda_event_record_corr_id") ? A_WAIT_RECORD_CORR : K_NONE;
    default:
        return K_NONE;
    }
}

/* A key of distributedInfo (D_*). */
static inline int
kin_dist_key(const unsigned char *s, size_t l)
{
    if (kin_eq(s, l, "rank"))
        return D_RANK;
    if (kin_eq(s, l, "world_size"))
        return D_WORLD_SIZE;
    if (kin_eq(s, l, "nccl_version"))
        return D_NCCL_VERSION;
    if (kin_eq(s, l, "backend"))
        return D_BACKEND;
    return K_NONE;
}

/* A key of a device of deviceProperties (P_*). */
static inline int
kin_dev_key(const unsigned char *s, size_t l)
{
    if (kin_eq(s, l, "id"))
        return P_ID;
    if (kin_eq(s, l, "name"))
        return P_NAME;
    if (kin_eq(s, l, "totalGlobalMem"))
        return P_TOTAL_MEM;
    if (kin_eq(s, l, "computeMajor"))
        return P_CC_MAJOR;
    if (kin_eq(s, l, "computeMinor"))
        return P_CC_MINOR;
    if (kin_eq(s, l, "numSms"))
        return P_NUM_SMS;
    if (kin_eq(s, l, "clockRate"))
        return P_CLOCK_RATE;
    return K_NONE;
}

/* The category of a "cat" text (CAT_OTHER: one we do not map). Every Kineto spelling since
 * PyTorch 1.8 (libkineto/src/output_json.cpp and ActivityType.cpp of each era):
 *   1.8-1.9    Operator, Runtime, Kernel, Memcpy, Memset, User (GPU ranges), flows "async"
 *   1.10       cpu_op, user_annotation, gpu_user_Annotation; Runtime, Kernel, Memcpy,
 *              Memset; flows "async_gpu", "forward_backward"
 *   1.11       cuda_runtime; Kernel, Memcpy, Memset; flows "async_cpu_to_gpu"
 *   1.12-1.13  kernel, gpu_memcpy, gpu_memset, gpu_user_annotation
 *   2.x        flows "ac2g", "fwdbwd"; cuda_driver, cuda_sync (ROCm: the same names) */
static inline int
kin_cat_of(const unsigned char *s, size_t l)
{
    /* by length first: every event has a category */
    switch (l) {
    case 4:
        if (kin_eq(s, l, "ac2g"))
            return CAT_AC2G;
        return kin_eq(s, l, "User") ? CAT_GPU_USER_ANN : CAT_OTHER;
    case 5:
        if (kin_eq(s, l, "Trace"))
            return CAT_TRACE;
        return kin_eq(s, l, "async") ? CAT_AC2G : CAT_OTHER;
    case 6:
        if (kin_eq(s, l, "kernel"))
            return CAT_KERNEL;
        if (kin_eq(s, l, "cpu_op"))
            return CAT_CPU_OP;
        if (kin_eq(s, l, "fwdbwd"))
            return CAT_FWDBWD;
        if (kin_eq(s, l, "Kernel"))
            return CAT_KERNEL;
        if (kin_eq(s, l, "Memcpy"))
            return CAT_MEMCPY;
        return kin_eq(s, l, "Memset") ? CAT_MEMSET : CAT_OTHER;
    case 7:
        return kin_eq(s, l, "Runtime") ? CAT_RUNTIME : CAT_OTHER;
    case 8:
        return kin_eq(s, l, "Operator") ? CAT_OPERATOR : CAT_OTHER;
    case 9:
        if (kin_eq(s, l, "cuda_sync"))
            return CAT_SYNC;
        return kin_eq(s, l, "async_gpu") ? CAT_AC2G : CAT_OTHER;
    case 10:
        if (kin_eq(s, l, "gpu_memcpy"))
            return CAT_MEMCPY;
        return kin_eq(s, l, "gpu_memset") ? CAT_MEMSET : CAT_OTHER;
    case 11:
        return kin_eq(s, l, "cuda_driver") ? CAT_DRIVER : CAT_OTHER;
    case 12:
        return kin_eq(s, l, "cuda_runtime") ? CAT_RUNTIME : CAT_OTHER;
    case 15:
        if (kin_eq(s, l, "user_annotation"))
            return CAT_USER_ANN;
        return kin_eq(s, l, "python_function") ? CAT_PYTHON : CAT_OTHER;
    case 16:
        if (kin_eq(s, l, "async_cpu_to_gpu"))
            return CAT_AC2G;
        return kin_eq(s, l, "forward_backward") ? CAT_FWDBWD : CAT_OTHER;
    case 19:
        if (kin_eq(s, l, "gpu_user_annotation") || kin_eq(s, l, "gpu_user_Annotation"))
            return CAT_GPU_USER_ANN;
        return CAT_OTHER;
    default:
        return CAT_OTHER;
    }
}

/* The JSON text of a key, for messages ("value" for keys messages do not name). */
const char *kin_key_text(int key);

/* Category texts, by enum kin_cat ("" for CAT_NONE and CAT_OTHER). */
extern const char *const kin_cat_names[];

#endif /* DPRO_IMPORT_KINETO_KEYS_H */
