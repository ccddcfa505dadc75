/*
 * kineto_keys.c: the texts of kineto_keys.h's keys and categories, for messages and
 * counters.
 */
#include "kineto_keys.h"

const char *const kin_cat_names[] = {
    [CAT_NONE] = "",
    [CAT_OTHER] = "",
    [CAT_CPU_OP] = "cpu_op",
    [CAT_USER_ANN] = "user_annotation",
    [CAT_GPU_USER_ANN] = "gpu_user_annotation",
    [CAT_RUNTIME] = "cuda_runtime",
    [CAT_DRIVER] = "cuda_driver",
    [CAT_KERNEL] = "kernel",
    [CAT_MEMCPY] = "gpu_memcpy",
    [CAT_MEMSET] = "gpu_memset",
    [CAT_SYNC] = "cuda_sync",
    [CAT_AC2G] = "ac2g",
    [CAT_FWDBWD] = "fwdbwd",
    [CAT_PYTHON] = "python_function",
    [CAT_TRACE] = "Trace",
    [CAT_OPERATOR] = "Operator",
};

const char *
kin_key_text(int key)
{
    switch (key) {
    case K_TRACE_EVENTS:
        return "traceEvents";
    case K_DIST_INFO:
        return "distributedInfo";
    case K_DEV_PROPS:
        return "deviceProperties";
    case K_PH:
        return "ph";
    case K_CAT:
        return "cat";
    case K_NAME:
        return "name";
    case K_PID:
        return "pid";
    case K_TID:
        return "tid";
    case K_TS:
        return "ts";
    case K_DUR:
        return "dur";
    case K_ARGS:
        return "args";
    case A_GRID:
        return "grid";
    case A_BLOCK:
        return "block";
    default:
        return "value";
    }
}
