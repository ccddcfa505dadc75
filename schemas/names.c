/* names.c: status, kind and collective-op names, the dpro_event ABI conversions, dpro_set_err. */
#include "config.h"
#include "dprotrace.h"
#include "trace_internal.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

const char *
dpro_status_str(int status)
{
    switch (status) {
    case DPRO_OK:
        return "ok";
    case DPRO_ERR_ARG:
        return "invalid argument";
    case DPRO_ERR_NOMEM:
        return "out of memory";
    case DPRO_ERR_IO:
        return "input/output error";
    case DPRO_ERR_NOT_TRACE:
        return "not a dpro trace";
    case DPRO_ERR_VERSION:
        return "trace written by a newer dpro (schema major version)";
    case DPRO_ERR_CORRUPT:
        return "corrupt trace data";
    case DPRO_ERR_LIMIT:
        return "size limit exceeded";
    case DPRO_ERR_BUSY:
        return "the trace is being written (no schema yet)";
    case DPRO_ERR_EXISTS:
        return "the file exists";
    }
    return "unknown status";
}

const char *
dpro_kind_name(uint32_t kind)
{
    static const char *const names[] = {"unknown", "api",        "kernel", "memcpy", "memset",
                                        "sync",    "collective", "memory", "marker", "flow"};
    return kind < sizeof names / sizeof names[0] ? names[kind] : "unknown";
}

const char *
dpro_coll_op_name(uint32_t op)
{
    static const char *const names[] = {"unknown", "allreduce", "broadcast",
                                        "reduce",  "allgather", "reducescatter",
                                        "send",    "recv",      "alltoall"};
    return op < sizeof names / sizeof names[0] ? names[op] : "unknown";
}

void
dpro_event_import(dpro_event *dst, const void *src, size_t size)
{
    memset(dst, 0, sizeof *dst);
    memcpy(dst, src, size < sizeof *dst ? size : sizeof *dst);
}

void
dpro_event_export(void *dst, size_t size, const dpro_event *src)
{
    if (size > sizeof *src) {
        memcpy(dst, src, sizeof *src);
        memset((char *)dst + sizeof *src, 0, size - sizeof *src);
    } else {
        memcpy(dst, src, size);
    }
}

void
dpro_set_err(char *errbuf, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    if (!errbuf || !errlen)
        return;
    va_start(ap, fmt);
    vsnprintf(errbuf, errlen, fmt, ap);
    va_end(ap);
}
