/*
 * import_nsys.h: Nsight Systems SQLite exports (`nsys export --type sqlite`) -> dpro
 * traces. The library part of `dpro-import nsys`.
 *
 * An export holds every process nsys traced; each process (globalPid) that ran a device
 * operation becomes one dpro trace, one rank (with --allow-empty, so does one that only made
 * CUDA API calls; without it, such processes are named in a warning). The schema is NVIDIA's
 * "SQLite Export Schema Reference" (docs.nvidia.com/nsight-systems/.../nsys-exporter/
 * exported_data.html; nsys_int.h cites each table and column where it is read). Tables are
 * created lazily by nsys, so each is optional; an export with none of the CUPTI activity
 * tables, NVTX_EVENTS or StringIds is refused as not an nsys export.
 *
 * Mapping (nsys table -> dpro_event):
 *   CUPTI_ACTIVITY_KIND_KERNEL   DPRO_KIND_KERNEL: name = demangledName (else shortName),
 *                                device = deviceId, stream = streamId, correlation =
 *                                correlationId, grid, block, shared_mem = static + dynamic.
 *   CUPTI_ACTIVITY_KIND_MEMCPY   DPRO_KIND_MEMCPY: subkind from copyKind (CUPTI's
 *                                CUpti_ActivityMemcpyKind), bytes, name "Memcpy HtoD
 *                                (Pageable -> Device)" as Kineto names it (srcKind, dstKind).
 *   CUPTI_ACTIVITY_KIND_MEMSET   DPRO_KIND_MEMSET: bytes, name "Memset (Device)".
 *   CUPTI_ACTIVITY_KIND_RUNTIME  DPRO_KIND_API, subkind RUNTIME / DRIVER: name = nameId's
 *   CUPTI_ACTIVITY_KIND_DRIVER   text (nsys spells it with its version: cudaLaunchKernel_v7000),
 *                                thread = the tid of globalTid, result = returnValue; joined
 *                                to its device op by correlationId: stream, bytes and name2 =
 *                                the kernel's name.
 *   NVTX_EVENTS                  DPRO_KIND_MARKER: push/pop and start/end ranges
 *                                (DPRO_MARK_RANGE, object = the range id), marks
 *                                (DPRO_MARK_INSTANT); name = text or textId's text, name2 =
 *                                the domain's name (0: the default domain). A range without
 *                                an end is counted (import.unmapped.nvtx_unended).
 *   ThreadNames, TARGET_INFO_GPU threads and devices tables.
 * Collectives (DPRO_KIND_COLLECTIVE): one per NCCL NVTX range (domain "NCCL", text
 * ncclAllReduce, ncclBroadcast, ncclReduce, ncclAllGather, ncclReduceScatter, ncclSend,
 * ncclRecv) with the range's host times and thread (DPRO_COLL_TIMING_HOST); its payload
 * (the JSON text nsys exports, jsonText or jsonTextId, with NCCL's entry names: "NCCL
 * communicator ID", "Message size [bytes]", "Reduction operation", "Root", "Peer rank")
 * gives comm, bytes, redop and root or peer. The NCCL kernel launched inside the range on
 * its thread gives correlation, stream, device and the element type (count = bytes over
 * the element size; without one, ncclUint8 and count = bytes: import.approx.nccl_bytes_as_u8).
 * An NCCL kernel (ncclKernel_*, ncclDevKernel_*) under no such range is a collective of its
 * own, its operation and types from its name, timed by its launch call when that is known
 * (else by the kernel: DPRO_COLL_TIMING_DEVICE). comm without a payload: the FNV-1a hash of
 * "nsys-nccl:default"; seq: a counter per comm in start order (every rank numbers the same
 * collectives alike).
 *
 * Clock: nsys times are nanoseconds since the session start, one clock per export; they
 * are kept as they are (meta clock = "nsys-session-ns"; the session's UTC start, when
 * TARGET_INFO_SESSION_START_TIME has it, in import.session_start_utc_ns).
 */
#ifndef DPRO_IMPORT_NSYS_H
#define DPRO_IMPORT_NSYS_H

#include <stddef.h>
#include <stdint.h>

#include "dprotrace.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nsys_export nsys_export;

/* What an import of one process wrote; filled in by nsys_import_process. */
typedef struct nsys_result {
    int64_t pid;         /* the process id (from globalPid) */
    uint64_t events_out; /* dpro events written */
    uint64_t device_ops; /* kernels, copies and sets among them */
    uint64_t api_calls;  /* runtime and driver calls */
    uint64_t markers;    /* NVTX ranges and marks */
    uint64_t collectives;
    uint64_t unmapped; /* rows not turned into events, all reasons */
} nsys_result;

/* Opens the export at path read-only and checks it: an SQLite database (PRAGMA
 * quick_check passes) holding StringIds and at least one of the CUPTI_ACTIVITY_KIND_* and
 * NVTX_EVENTS tables, and lists its processes: those that ran a device operation, and with
 * api_only also those that made CUDA API calls without one (else these are skipped:
 * nsys_skipped). On success *out must be closed with nsys_close. On failure *out is NULL
 * and errbuf (size errlen) holds a message naming the file. Returns DPRO_OK, DPRO_ERR_IO
 * (cannot open or read), DPRO_ERR_NOT_TRACE (not SQLite, or not an nsys export),
 * DPRO_ERR_CORRUPT (damaged or truncated) or DPRO_ERR_NOMEM. */
int nsys_open(const char *path, int api_only, nsys_export **out, char *errbuf, size_t errlen);

/* The processes of the export that become ranks, in globalPid order, and the pid of the
 * i-th. */
size_t nsys_process_count(const nsys_export *x);
int64_t nsys_process_pid(const nsys_export *x, size_t i);

/* The processes skipped (CUDA API calls, no device operation): their pids as "1, 2, 3" into
 * buf (cut to len, NUL-terminated when len > 0); returns how many. */
size_t nsys_skipped(const nsys_export *x, char *buf, size_t len);

/* The host name the export records (TARGET_INFO_SYSTEM_ENV "Hostname"), or NULL. */
const char *nsys_host(const nsys_export *x);

/* Writes the events of process i to w (not owned), then its threads and devices and the meta
 * keys: source "nsys-import", source_file, host, pid, rank, world_size, job_id (job_id if not
 * NULL, else "nsys-" and a hash of what the ranks of one nsys session share: the session's
 * start time and the world size), clock, and import.* counters. Returns DPRO_OK or the first
 * error (DPRO_ERR_CORRUPT when a query fails on damaged data, DPRO_ERR_LIMIT for a time or
 * size out of range, a writer error); the message is nsys_errmsg's. */
int nsys_import_process(nsys_export *x, size_t i, dpro_writer *w, int64_t rank, int64_t world_size,
                        const char *job_id, nsys_result *res);

/* Message of the last error ("" if none), naming the file and the table. */
const char *nsys_errmsg(const nsys_export *x);

/* Closes the export (NULL is fine). */
void nsys_close(nsys_export *x);

#ifdef __cplusplus
}
#endif
#endif /* DPRO_IMPORT_NSYS_H */
