/*
 * nsys_int.h: the Nsight Systems importer's inside (import_nsys.h): nsys.c opens and checks
 * the export, lists its processes and writes the tables and meta keys; nsys_map.c maps the
 * rows of one process to events.
 *
 * Where the columns come from. NVIDIA, "SQLite Export Schema Reference", Nsight Systems
 * 2021.5 (https://docs.nvidia.com/nsight-systems/2021.5/nsys-exporter/exported_data.html;
 * the same tables in the DRIVE OS 5.2.3 edition and in the copy shipped with the CUDA 11.2
 * toolkit, nsight_systems/documentation/nsys-exporter/exported_data.html), and its
 * "Common SQLite examples" (docs.nvidia.com/nsight-systems/2022.4/nsys-exporter/
 * examples.html):
 *   StringIds (id, value)                         the text of every *Id column below
 *   CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId, correlationId,
 *       globalPid, demangledName, shortName, gridX..Z, blockX..Z, staticSharedMemory,
 *       dynamicSharedMemory, ...)                 names are StringIds ids
 *   CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, streamId, correlationId, globalPid,
 *       bytes, copyKind, srcKind, dstKind, ...)  copyKind: CUpti_ActivityMemcpyKind,
 *                                                 src/dstKind: CUpti_ActivityMemoryKind
 *                                                 (CUPTI's cupti_activity.h; the export's
 *                                                 ENUM_CUDA_MEMCPY_OPER, ENUM_CUDA_MEM_KIND)
 *   CUPTI_ACTIVITY_KIND_MEMSET (start, end, deviceId, streamId, correlationId, globalPid,
 *       value, bytes, ...)
 *   CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER (start, end, globalTid,
 *       correlationId, nameId, returnValue)      correlationId: "use this value to find
 *                                                 events in ..._KERNEL, _MEMSET, _MEMCPY"
 *   NVTX_EVENTS (start, end, eventType, rangeId, text, globalTid, endGlobalTid, textId,
 *       domainId, jsonText, jsonTextId, ...)     eventType: ENUM_NSYS_EVENT_TYPE
 *                                                 (NvtxMark 34, NvtxPushPopRange 59,
 *                                                 NvtxStartEndRange 60, NvtxDomainCreate 75;
 *                                                 read from the table when it is there)
 *   ThreadNames (nameId, priority, globalTid)
 *   TARGET_INFO_GPU (id, name, totalMemory, clockRate, smCount, computeMajor, computeMinor,
 *       cuDevice, ...)
 *   TARGET_INFO_SESSION_START_TIME (utcEpochNs, ...)
 *   TARGET_INFO_SYSTEM_ENV (name, value, ...)     the row named "Hostname"
 * Serialized global ids ("Serialized GlobalId"): globalTid = hardware/VM id << 48 | pid << 24
 * | tid, globalPid the same with tid 0; the examples decode them as globalTid / 0x1000000 %
 * 0x1000000 (pid) and globalTid % 0x1000000 (tid). A process is therefore globalPid >> 24
 * (globalTid >> 24 for the API and NVTX tables), and its threads globalTid % 0x1000000.
 * Columns that an older export lacks read as 0 (or NULL text); nsys_has_col says which.
 */
#ifndef DPRO_IMPORT_NSYS_INT_H
#define DPRO_IMPORT_NSYS_INT_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "import_nsys.h"

#define NSYS_MAX_TIME (UINT64_C(1) << 62) /* ns: what the readers' arithmetic allows */
#define NSYS_MAX_BYTES (UINT64_C(1) << 50)

/* The tables the importer reads. */
enum {
    NSYS_T_KERNEL,
    NSYS_T_MEMCPY,
    NSYS_T_MEMSET,
    NSYS_T_RUNTIME,
    NSYS_T_DRIVER,
    NSYS_T_NVTX,
    NSYS_T_STRINGS,
    NSYS_T_THREADS,
    NSYS_T_GPU,
    NSYS_T_SESSION,
    NSYS_T_SYSENV,
    NSYS_T_EVTYPE,
    NSYS_T_COUNT
};
extern const char *const nsys_table_name[NSYS_T_COUNT];

struct nsys_export {
    sqlite3 *db;
    char path[4096];
    char err[DPRO_ERRBUF_SIZE];
    int has[NSYS_T_COUNT];
    int64_t *procs; /* globalPid >> 24, ascending: the ranks */
    size_t nprocs;
    int64_t *skipped; /* processes with CUDA API calls but no device op, not ranks */
    size_t nskipped;
    char host[256];
    int64_t session_utc_ns;                       /* -1: unknown */
    int ev_mark, ev_push, ev_startend, ev_domain; /* NVTX eventType values */
};

/* Records the first error: "<path>: <what>" into x->err. Returns status. */
int nsys_fail(nsys_export *x, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Fails with the SQLite error of db after rc, naming table (NULL: the file). Returns
 * DPRO_ERR_CORRUPT for damaged data, DPRO_ERR_NOT_TRACE for a file that is not a database,
 * DPRO_ERR_NOMEM or DPRO_ERR_IO. */
int nsys_fail_sql(nsys_export *x, int rc, const char *table);

/* Whether table t has column col. */
int nsys_has_col(nsys_export *x, int t, const char *col);

/* Column expression "alias.col" if table t has col, else the fallback (e.g. "0", "NULL"),
 * into buf. Returns buf. */
const char *nsys_col(nsys_export *x, int t, const char *alias, const char *col,
                     const char *fallback, char *buf, size_t len);

/* Prepares sql (reading table t, -1: the file itself) into *st. Returns DPRO_OK or fails as
 * nsys_fail_sql. */
int nsys_prepare(nsys_export *x, int t, const char *sql, sqlite3_stmt **st);

/* Counters an import keeps (meta import.*). */
typedef struct nsys_counts {
    uint64_t kernels, memcpys, memsets, runtime, driver, ranges, marks;
    uint64_t collectives, coll_from_nvtx, coll_from_kernel;
    uint64_t joined;          /* API calls joined to their device op */
    uint64_t nvtx_unended;    /* ranges without an end */
    uint64_t nvtx_other;      /* NVTX rows of other kinds (categories, names, domains) */
    uint64_t bytes_as_u8;     /* NVTX collectives of unknown element type */
    uint64_t coll_unknown_op; /* NCCL kernels of no known operation */
} nsys_counts;

/* Maps every row of process key (globalPid >> 24) to events appended to w; fills *c.
 * Returns DPRO_OK or the first error (message in x->err). */
int nsys_map_process(nsys_export *x, int64_t key, dpro_writer *w, nsys_counts *c);

#endif /* DPRO_IMPORT_NSYS_INT_H */
