/*
 * dprotrace.h: the dpro trace format and libdprotrace, the one library that writes and
 * reads it.
 *
 * A trace is one SQLite file per process (rank); schemas/trace.sql is its schema. Events
 * travel in batches: schemas/trace.proto packed by protobuf-c, column by column, then
 * zlib-compressed, one BLOB a row of table `batches`. Strings (kernel names, API names,
 * NVTX text, stack frames) are interned once and events refer to them by id; table
 * `string_blocks` holds them in blocks, each row the ids first_id .. first_id+count-1 as
 * zlib(NUL-terminated texts, in id order).
 *
 * Every function returns a dpro_status (DPRO_OK == 0) unless it says otherwise. Objects
 * keep the message of their last error (dpro_writer_errmsg, dpro_reader_errmsg), which
 * names the file and, for event data, the batch. Functions that take an errbuf write at
 * most errlen bytes; DPRO_ERRBUF_SIZE bytes always hold the whole message.
 *
 * ABI: structs the caller passes or receives by pointer and that minor versions may grow
 * (dpro_event, dpro_writer_options, dpro_trace_summary) travel with their size: the
 * functions that take them are macros over *_sized functions that pass the sizeof the
 * caller was compiled with (as zlib's deflateInit passes sizeof(z_stream)). New fields
 * are only ever added at the end; the library reads no byte past the caller's size,
 * zeroes (in what it returns) the fields the caller's version lacks and takes those it
 * lacks from the caller as zero. Other structs (dpro_device_info, dpro_stream_info,
 * dpro_comm_info, dpro_thread_info) come back in arrays and never grow: later facts come
 * through new functions. Paths may be up to PATH_MAX bytes long.
 */
#ifndef DPRO_TRACE_H
#define DPRO_TRACE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Schema version. A reader refuses a file whose major version is newer than its own; a
 * newer minor version only adds columns, tables or event kinds, which old readers skip. */
#define DPRO_SCHEMA_MAJOR 2
#define DPRO_SCHEMA_MINOR 3
/* Major versions: 1: first format. 2: batches may store times in a unit (trace.proto
 * time_unit), code the start of an event nested in the previous one of its lane from that
 * event's start, and code launch configurations against the previous launch of the same
 * kernel (name_relative_field); tables with no rows may be absent. This library reads 1
 * and 2. Minor versions of 2: 1: the writer sets meta `complete` when it closes the trace
 * and leaves it in rollback-journal mode (one self-contained file). 2: events carry the
 * profiler's op arguments (dpro_event.has and the fields after it: external, record
 * function, sequence and event ids, forward thread, shapes, dtypes, other arguments,
 * memory totals) and flows (DPRO_KIND_FLOW); traces of earlier minors read with these
 * fields zero. 3: CPU ops joined to a PyTorch execution trace carry its host graph (et_id,
 * et_parent, et_deps); earlier traces read with them zero. */

/* Bytes of an error buffer that always holds a whole message: a path of PATH_MAX (4096 on
 * Linux) bytes and the reason. */
#define DPRO_ERRBUF_SIZE 5120

typedef enum dpro_status {
    DPRO_OK = 0,
    DPRO_ERR_ARG = -1,       /* bad argument from the caller */
    DPRO_ERR_NOMEM = -2,     /* out of memory */
    DPRO_ERR_IO = -3,        /* the file could not be opened, written or read */
    DPRO_ERR_NOT_TRACE = -4, /* the file is not a dpro trace */
    DPRO_ERR_VERSION = -5,   /* the file's schema major version is newer than ours */
    DPRO_ERR_CORRUPT = -6,   /* a batch or a table is damaged */
    DPRO_ERR_LIMIT = -7,     /* a size limit was passed (e.g. a zlib bomb) */
    DPRO_ERR_BUSY = -8,      /* the file is being created: it has no schema yet */
    DPRO_ERR_EXISTS = -9,    /* the file exists (dpro_writer_options.replace not set) */
} dpro_status;

/* Returns a static English description of a status. */
const char *dpro_status_str(int status);

/* ---- events --------------------------------------------------------------------------- */

/* Event kinds. Values are part of the file format: never renumber, only add. */
typedef enum dpro_kind {
    DPRO_KIND_API = 1,        /* host API call: CUDA runtime/driver, NCCL (non-collective) */
    DPRO_KIND_KERNEL = 2,     /* device: a kernel ran */
    DPRO_KIND_MEMCPY = 3,     /* device: a copy ran */
    DPRO_KIND_MEMSET = 4,     /* device: a memset ran */
    DPRO_KIND_SYNC = 5,       /* device-side synchronisation (CUPTI SYNCHRONIZATION) */
    DPRO_KIND_COLLECTIVE = 6, /* host call of an NCCL collective or send/recv */
    DPRO_KIND_MEMORY = 7,     /* allocation or free */
    DPRO_KIND_MARKER = 8,     /* NVTX range or mark, iteration marker, framework op */
    DPRO_KIND_FLOW = 9,       /* one end of a trace viewer's flow arrow (imported traces) */
    DPRO_KIND_MAX_KNOWN = 9,
} dpro_kind;

/* Which API a DPRO_KIND_API event came from (dpro_event.subkind). */
enum dpro_api_domain {
    DPRO_API_RUNTIME = 1,
    DPRO_API_DRIVER = 2,
    DPRO_API_NCCL = 3,
};

/* Copy kinds (subkind of DPRO_KIND_MEMCPY; `value` of memcpy API calls, whose subkind is
 * their domain); the values are cudaMemcpyKind's. */
enum dpro_copy_kind {
    DPRO_COPY_H2H = 0,
    DPRO_COPY_H2D = 1,
    DPRO_COPY_D2H = 2,
    DPRO_COPY_D2D = 3,
    DPRO_COPY_DEFAULT = 4,
    DPRO_COPY_P2P = 5,
};

/* Synchronisation kinds (subkind of DPRO_KIND_SYNC), CUpti_ActivitySynchronizationType. */
enum dpro_sync_kind {
    DPRO_SYNC_EVENT_SYNCHRONIZE = 1,
    DPRO_SYNC_STREAM_WAIT_EVENT = 2,
    DPRO_SYNC_STREAM_SYNCHRONIZE = 3,
    DPRO_SYNC_CONTEXT_SYNCHRONIZE = 4,
};

/* Collective operations (subkind of DPRO_KIND_COLLECTIVE). */
enum dpro_coll_op {
    DPRO_COLL_ALLREDUCE = 1,
    DPRO_COLL_BROADCAST = 2,
    DPRO_COLL_REDUCE = 3,
    DPRO_COLL_ALLGATHER = 4,
    DPRO_COLL_REDUCESCATTER = 5,
    DPRO_COLL_SEND = 6,
    DPRO_COLL_RECV = 7,
    DPRO_COLL_ALLTOALL = 8,
    DPRO_COLL_OP_COUNT = 9,
};

/* Memory event kinds (subkind of DPRO_KIND_MEMORY). */
enum dpro_mem_op {
    DPRO_MEM_ALLOC = 1,
    DPRO_MEM_FREE = 2,
};

/* Memory spaces (dpro_event.value of DPRO_KIND_MEMORY). */
enum dpro_mem_space {
    DPRO_MEMSPACE_DEVICE = 0,
    DPRO_MEMSPACE_HOST_PINNED = 1,
    DPRO_MEMSPACE_MANAGED = 2,
    DPRO_MEMSPACE_ASYNC_POOL = 3,
    DPRO_MEMSPACE_HOST = 4, /* host memory of the framework's allocator (imported traces) */
};

/* Flow phases (subkind of DPRO_KIND_FLOW): Chrome trace "ph" s, f, t. */
enum dpro_flow_phase {
    DPRO_FLOW_START = 1,
    DPRO_FLOW_FINISH = 2,
    DPRO_FLOW_STEP = 3,
};

/* Bits of dpro_event.has: which of the optional ids an event carries (an id of 0 is a
 * value like any other). */
enum dpro_has {
    DPRO_HAS_EXTERNAL_ID = 1u << 0,
    DPRO_HAS_RECORD_ID = 1u << 1,
    DPRO_HAS_SEQ_NR = 1u << 2,
    DPRO_HAS_FWD_THREAD = 1u << 3,
    DPRO_HAS_EV_IDX = 1u << 4,
    DPRO_HAS_TOTALS = 1u << 5,       /* total_allocated and total_reserved */
    DPRO_HAS_BP_ENCLOSING = 1u << 6, /* a flow end bound to its enclosing slice ("bp": "e") */
    DPRO_HAS_ROW = 1u << 7,          /* SYNC: the trace viewer's row (Chrome tid), which is
                                        not its stream, is in `address` */
    DPRO_HAS_ET_ID = 1u << 8,        /* et_id (minor 3) */
    DPRO_HAS_ET_PARENT = 1u << 9,    /* et_parent (minor 3) */
};

/* Marker kinds (subkind of DPRO_KIND_MARKER). */
enum dpro_marker_kind {
    DPRO_MARK_RANGE = 1,     /* NVTX push/pop or start/end range */
    DPRO_MARK_INSTANT = 2,   /* NVTX mark */
    DPRO_MARK_ITERATION = 3, /* one training iteration; value = its number */
    DPRO_MARK_CPU_OP = 4,    /* framework operator (imported traces) */
};

/*
 * One event, as the writer takes it and the reader returns it. Fields a kind does not use
 * are zero. Timestamps are nanoseconds on the trace's clock (CLOCK_MONOTONIC of the host
 * for collector traces; see the clock anchors in meta).
 *
 *   field        API            device ops       COLLECTIVE        MEMORY          MARKER
 *   thread       host tid       -                host tid          host tid        host tid
 *   name         API name       kernel name      -                 -               text
 *   name2        kernel name    -                -                 -               domain
 *   correlation  launch id      launch id        launch id         -               -
 *   stream       stream         stream           stream            stream (async)  -
 *   device       -              device           device            device          -
 *   subkind      dpro_api_domain copy/sync kind  dpro_coll_op      dpro_mem_op     marker kind
 *   result       return code    -                return code       -               -
 *   object       event/graph    graph id         -                 -               range id
 *   bytes        bytes          bytes            bytes             size            -
 *   address      pointer        -                -                 address         -
 *   grid, block  launch dims    launch dims      -                 -               -
 *   comm         -              -                comm hash         -               -
 *   seq, count   -              -                seq, count        -               -
 *   dtype, redop -              -                ncclDataType/Op   -               -
 *   peer         -              -                root or peer      -               -
 *   value        -              -                DPRO_COLL_TIMING_* memory space   iteration
 *   stack        call stack id  -                call stack id     -               -
 *
 * FLOW events (imported Chrome/Kineto flows: "ph" s, f, t): thread = tid, name = the
 * flow's name, name2 = its category, correlation = its id (ac2g flows: the launch's
 * correlation, so ids count up as correlations do), subkind = dpro_flow_phase, value =
 * its pid (the host pid or a device index), end = start.
 *
 * Fields of schema minor 2 (zero in older traces), set by importers of profiler traces:
 *   has          DPRO_HAS_* bits saying which ids below are present: an id (and the
 *                totals) is stored only with its bit, and reads as 0 without it
 *   external_id  Kineto "External id" (links an op to its launches and kernels)
 *   record_id    "Record function id"
 *   seq_nr       "Sequence number" (autograd: links a backward op to its forward op)
 *   fwd_thread   "Fwd thread id"
 *   ev_idx       "Ev Idx"
 *   shapes       string id: "Input Dims" as JSON text (e.g. [[32, 3, 224, 224], []])
 *   dtypes       string id: "Input type" as JSON text (e.g. ["float", ""])
 *   args         string id: the event's other arguments as one JSON object text, those
 *                not carried by a field (collective arguments, cbid, occupancy, ...);
 *                interned, so repeated argument sets cost one id
 *   total_allocated, total_reserved   MEMORY events: the allocator's totals after it
 *
 * Fields of schema minor 3, set on a CPU op joined to the PyTorch execution trace (Chakra
 * ET JSON) node of the same Record function id (dpro-import et):
 *   et_id        the node's id in the execution trace (DPRO_HAS_ET_ID)
 *   et_parent    its parent node's id, "ctrl_deps" (DPRO_HAS_ET_PARENT)
 *   et_deps      string id: its data dependencies as JSON text, an array of the distances
 *                et_id - producer id of the ops that last wrote a tensor it reads, in
 *                ascending order (e.g. [2,7]); the same op of every step has the same
 *                text, so it is interned once. 0: none.
 *
 * Notes: memcpy API calls carry the cudaMemcpyKind in `value`; event calls (record, wait,
 * synchronize) carry the event handle in `object`. DPRO_KIND_SYNC events from imported
 * traces carry the CUDA event id in `object`, the correlation of the matching event record
 * in `value` and the stream it was recorded on in `peer`.
 */
typedef struct dpro_event {
    uint32_t kind;
    uint32_t subkind;
    uint64_t start_ns;
    uint64_t end_ns;
    uint32_t thread;
    uint32_t name;
    uint32_t name2;
    uint32_t device;
    uint64_t correlation;
    uint64_t stream;
    int32_t result;
    uint32_t shared_mem;
    uint64_t object;
    uint64_t bytes;
    uint64_t address;
    uint32_t grid[3];
    uint32_t block[3];
    uint64_t comm;
    uint64_t seq;
    uint64_t count;
    uint32_t dtype;
    uint32_t redop;
    int32_t peer;
    uint32_t stack;
    int64_t value;
    /* schema minor 2 */
    uint32_t has;
    uint32_t fwd_thread;
    uint64_t external_id;
    uint64_t record_id;
    uint64_t seq_nr;
    uint64_t ev_idx;
    uint32_t shapes;
    uint32_t dtypes;
    uint32_t args;
    uint32_t et_deps; /* schema minor 3 (was reserved, zero) */
    uint64_t total_allocated;
    uint64_t total_reserved;
    /* schema minor 3 */
    uint64_t et_id;
    uint64_t et_parent;
} dpro_event;

/* Collective timing (dpro_event.value of DPRO_KIND_COLLECTIVE): whose times the event
 * carries. The collector records the host call; importers of profiler traces record the
 * device-timed collective kernel. */
#define DPRO_COLL_TIMING_HOST 0
#define DPRO_COLL_TIMING_DEVICE 1

/* What a host API call does, decided from its name by dpro_api_classify for every
 * producer and reader. Values are not stored in files and may grow. */
typedef enum dpro_api_class {
    DPRO_API_CLASS_OTHER = 0,
    DPRO_API_CLASS_LAUNCH,       /* a kernel launch (runtime, driver or HIP) */
    DPRO_API_CLASS_GRAPH_LAUNCH, /* cudaGraphLaunch, cuGraphLaunch */
    DPRO_API_CLASS_MEMCPY,       /* a copy in its synchronous spelling: the host waits */
    DPRO_API_CLASS_MEMCPY_ASYNC,
    DPRO_API_CLASS_MEMSET, /* a memset in its synchronous spelling */
    DPRO_API_CLASS_MEMSET_ASYNC,
    DPRO_API_CLASS_EVENT_RECORD,
    DPRO_API_CLASS_STREAM_WAIT, /* cudaStreamWaitEvent */
    DPRO_API_CLASS_EVENT_SYNC,
    DPRO_API_CLASS_STREAM_SYNC,
    DPRO_API_CLASS_DEVICE_SYNC, /* cudaDeviceSynchronize, cuCtxSynchronize */
    DPRO_API_CLASS_MALLOC,
    DPRO_API_CLASS_FREE,
    DPRO_API_CLASS_COUNT
} dpro_api_class;

/* Returns the class of the API call called name: CUDA runtime (cuda*), driver (cu*) and
 * HIP (hip*) names in every spelling (_ptsz, _ptds, _spt, _vN suffixes). NULL or an
 * unknown name gives DPRO_API_CLASS_OTHER. */
dpro_api_class dpro_api_classify(const char *name);

/* Returns a short lower-case name of an API class ("launch", "stream_wait", ...), or
 * "unknown". */
const char *dpro_api_class_name(int cls);

/* Returns the bytes of one element of an ncclDataType_t, or 0 for an unknown type. */
size_t dpro_nccl_dtype_size(uint32_t nccl_dtype);

/* Returns non-zero if a kernel name is a collective-communication kernel (NCCL or RCCL:
 * "nccl" or "rccl" anywhere, any case, as Holistic Trace Analysis decides). */
int dpro_kernel_is_comm(const char *kernel_name);

/* Returns a short lower-case name of an event kind ("kernel", "api", ...), or "unknown". */
const char *dpro_kind_name(uint32_t kind);

/* Returns the name of a collective operation ("allreduce", ...), or "unknown". */
const char *dpro_coll_op_name(uint32_t op);

/* ---- descriptions of the process -------------------------------------------------------- */

typedef struct dpro_device_info {
    uint32_t id;
    const char *name;
    uint32_t sm_count;
    uint64_t total_memory;
    uint32_t clock_khz;
    uint32_t cc_major, cc_minor;
} dpro_device_info;

typedef struct dpro_stream_info {
    uint64_t id;
    uint32_t device;
    uint32_t flags;
    int32_t priority;
    const char *name; /* may be NULL */
} dpro_stream_info;

typedef struct dpro_comm_info {
    uint64_t hash;        /* hash of the ncclUniqueId (or derived from the parent's) */
    uint64_t parent_hash; /* 0 for a root communicator */
    uint64_t handle;      /* the ncclComm_t value in this process */
    int32_t rank;
    int32_t size;
    uint32_t device;
} dpro_comm_info;

/* ---- meta keys ----------------------------------------------------------------------------
 * Table meta holds key/value text. Keys every producer should set where it knows them:
 *   schema_major, schema_minor   set by the writer
 *   source                       "collector", "kineto-import" or "nsys-import" (+ the input
 *                                file: source_file)
 *   host, pid, rank, local_rank, world_size
 *   job_id                       tells jobs apart (SLURM_JOB_ID, TORCHELASTIC_RUN_ID, ...)
 *   command                      the traced command line
 *   clock                        the clock of all timestamps, e.g. "CLOCK_MONOTONIC"
 *   anchor_start_realtime_ns, anchor_start_monotonic_ns,
 *   anchor_end_realtime_ns, anchor_end_monotonic_ns     clock anchor pairs
 *   cuda_runtime_version, cuda_driver_version, nccl_version, cupti_version
 *   cupti                        "enabled", "busy" (taken by another tool), "missing", "off"
 *   setting.NAME                 each collector setting (DPRO_* variable) in force
 */
#define DPRO_META_SOURCE "source"
#define DPRO_META_HOST "host"
#define DPRO_META_PID "pid"
#define DPRO_META_RANK "rank"
#define DPRO_META_LOCAL_RANK "local_rank"
#define DPRO_META_WORLD_SIZE "world_size"
#define DPRO_META_JOB_ID "job_id"
#define DPRO_META_COMMAND "command"     /* the traced program's command line */
#define DPRO_META_HOST_CPUS "host_cpus" /* the CPUs the traced process may run on */
/* ... which ones, in Linux's cpulist format ("0-3,8-11": ids and ranges ascending,
 * comma-separated), from sched_getaffinity as host_cpus' count; the host-share model
 * takes a host's CPUs as the union of its ranks' lists (ranks bound to one core each). */
#define DPRO_META_HOST_CPU_LIST "host_cpu_list"
/* ... the process's CPUs read again when the file is finished, in the same spelling; only
 * where they differ from host_cpu_list (the job bound itself after the collector's start,
 * as a script calling os.sched_setaffinity at its top does); the host-share model takes
 * these, the set the job's iterations ran under, over host_cpu_list. */
#define DPRO_META_HOST_CPU_LIST_END "host_cpu_list_end"
#define DPRO_META_CPU_SAMPLES "cpu_samples" /* the host's CPU use sampled while tracing */
/* Per traced thread, its scheduler figures sampled while tracing (Linux schedstat):
 * "TID=T:R:W:S,T:R:W:S;TID=...": CLOCK_MONOTONIC us, time on a CPU us, time runnable
 * waiting for a CPU on a runqueue us, timeslices; each thread's samples in time order. */
#define DPRO_META_THREAD_SCHED "thread_sched"
/* ... how many traced threads it does not follow (the collector follows 64). */
#define DPRO_META_THREAD_SCHED_DROPPED "thread_sched_dropped"

/* ---- writer --------------------------------------------------------------------------- */

typedef struct dpro_writer dpro_writer;

/* Options of a new trace; zero (or NULL options) means the default for every field.
 * New fields come at the end (see ABI above). */
typedef struct dpro_writer_options {
    uint32_t batch_events; /* events per batch before an automatic flush; 0: 16384 */
    int zlib_level;        /* 1..9; 0: 3 (measured best speed/size trade-off) */
    int exclusive_create;  /* kept for source compatibility: creation is always exclusive
                              unless `replace` is set */
    uint32_t file_mode;    /* permissions of a new file; 0: 0640 */
    uint32_t page_size;    /* SQLite page size, a power of two 512..65536; 0: 1024. Small
                              pages make small traces smaller (importers use 512) */
    int replace;           /* non-zero: an existing file (or symlink) at path is removed,
                              with its -wal, -shm and -journal files, and made anew */
    int sync_at_close;     /* non-zero: no flush waits for the disk (each still moves its
                              events into the file), the close syncs the file once; for
                              writers that can write the trace again after a machine's
                              crash, such as importers. 0: each flush is on disk */
    /* private_until_close, non-zero: nobody opens the trace before its close (it is written
     * under a temporary name and renamed, as importers do): no -wal or -journal file, the
     * file locked once, nothing synced before the close, whose commit of the mark of a
     * whole trace syncs the file once (sync_at_close implied). A process killed before the
     * close leaves a file not marked complete, or not a database at all: readers say it
     * ends early, or refuse it; none reads it as whole. */
    int private_until_close;
} dpro_writer_options;

/* Creates the trace file at path and writes the schema and the schema version. A file
 * that exists is refused (DPRO_ERR_EXISTS) unless opts->replace; a symbolic link at the
 * file itself is refused, links among its directories are followed. opts may be NULL for
 * defaults. On success *out is a writer the caller must close with dpro_writer_close; on
 * failure *out is NULL and the message comes back through errbuf (may be NULL, size
 * errlen). Every flush leaves the events written so far in the file itself (WAL
 * checkpointed), so that a copy of it without its -wal holds them; the close leaves one
 * self-contained file. */
int dpro_writer_open_sized(const char *path, const dpro_writer_options *opts, size_t opts_size,
                           dpro_writer **out, char *errbuf, size_t errlen);
#define dpro_writer_open(path, opts, out, errbuf, errlen)                                          \
    dpro_writer_open_sized((path), (opts), sizeof(dpro_writer_options), (out), (errbuf), (errlen))

/* Sets a meta key to a text / integer value (last value wins). */
int dpro_writer_set_meta(dpro_writer *w, const char *key, const char *value);
int dpro_writer_set_meta_int(dpro_writer *w, const char *key, int64_t value);

/* Interns a string and stores its id in *id (ids start at 1; 0 means "no string").
 * The same text always gets the same id within one file. */
int dpro_writer_intern(dpro_writer *w, const char *text, uint32_t *id);

/* Same, for a string of len bytes that need not be NUL-terminated. */
int dpro_writer_intern_len(dpro_writer *w, const char *text, size_t len, uint32_t *id);

/* Records a device, a stream, a host thread, a communicator, a call stack. Rewriting the
 * same id replaces the earlier row. frames: string ids of the frames, innermost first. */
int dpro_writer_add_device(dpro_writer *w, const dpro_device_info *dev);
int dpro_writer_add_stream(dpro_writer *w, const dpro_stream_info *stream);
int dpro_writer_add_thread(dpro_writer *w, uint32_t tid, const char *name);
int dpro_writer_add_comm(dpro_writer *w, const dpro_comm_info *comm);
int dpro_writer_add_stack(dpro_writer *w, uint32_t stack_id, const uint32_t *frames,
                          uint32_t nframes);

/* Adds count to the dropped-event count of (thread, reason). */
int dpro_writer_add_drops(dpro_writer *w, uint32_t thread, const char *reason, uint64_t count);

/* Appends one event (copied) to the current batch. When the batch is full it is flushed
 * first; if that flush fails, the error is returned and this event is not kept (the
 * batch stays in memory for a later flush). An event with a time past INT64_MAX ns is
 * refused (DPRO_ERR_ARG, dpro_writer_errmsg says which). */
int dpro_writer_append_sized(dpro_writer *w, const dpro_event *ev, size_t ev_size);
#define dpro_writer_append(w, ev) dpro_writer_append_sized((w), (ev), sizeof(dpro_event))

/* Hands out the next event of the current batch in *ev, zeroed, for the caller to fill in
 * place: dpro_writer_append without its copy (a producer that builds every event, as the
 * collector does, saves the 248-byte copy and its own clearing). dpro_writer_keep_event
 * then appends it. Until then the caller may intern strings and add devices, streams,
 * threads, communicators, stacks, drops and meta on w (they leave the batch alone); an
 * append, a flush or a close first discards the slot, and so does the next call of this
 * function, which hands it out again zeroed. When the batch is full it is committed first;
 * if that commit fails, its error is returned, *ev is NULL and the batch stays in memory
 * (as for dpro_writer_append). The slot is w's: it is valid until the next call on w other
 * than those above. */
int dpro_writer_next_event(dpro_writer *w, dpro_event **ev);

/* Appends the event that dpro_writer_next_event handed out, as the caller filled it.
 * DPRO_ERR_ARG when no event is handed out, or when its times pass INT64_MAX ns (then the
 * event is not kept, is no longer handed out, and dpro_writer_errmsg says which; the next
 * dpro_writer_next_event hands the slot out again zeroed). */
int dpro_writer_keep_event(dpro_writer *w);

/* Packs, compresses and writes the current batch (if any), commits, and copies the
 * commit from the write-ahead log into the file itself (a passive checkpoint), so the
 * .dpro file alone, copied without its -wal, holds every event up to the last call. The
 * automatic flush of a full batch in dpro_writer_append commits without the checkpoint
 * (it would double the bytes written); a concurrent reader can delay a checkpoint to the
 * next flush. */
int dpro_writer_flush(dpro_writer *w);

/* Events appended so far, batches and bytes of compressed event data written so far. */
uint64_t dpro_writer_events(const dpro_writer *w);
uint64_t dpro_writer_batches(const dpro_writer *w);
uint64_t dpro_writer_bytes(const dpro_writer *w);

/* Message of the writer's last error ("" if none). */
const char *dpro_writer_errmsg(const dpro_writer *w);

/* Flushes, sets meta `complete`, checkpoints the WAL and leaves the file in rollback-journal
 * mode (no -wal, no -shm), closes the database and frees the writer (NULL is fine).
 * Returns the first error met while doing so. */
int dpro_writer_close(dpro_writer *w);

/* ---- batch codec (exposed for tests, benchmarks and fuzzing) ----------------------------- */

/* Encodes n events into one zlib-compressed protobuf batch in a malloc'd buffer *out of
 * *outlen bytes (caller frees). *rawlen receives the uncompressed size. */
int dpro_batch_encode_sized(const dpro_event *events, size_t n, size_t ev_size, int zlib_level,
                            uint8_t **out, size_t *outlen, size_t *rawlen);
#define dpro_batch_encode(events, n, zlib_level, out, outlen, rawlen)                              \
    dpro_batch_encode_sized((events), (n), sizeof(dpro_event), (zlib_level), (out), (outlen),      \
                            (rawlen))

/* Decodes a batch. *events (caller frees) receives *n events, group by group: a kind's
 * events in the order appended, except that the API calls with a launch configuration
 * (grid or block) come after the other API calls. rawlen is the uncompressed size the
 * batch row claims; decoding refuses more than DPRO_BATCH_MAX_RAW bytes or more than
 * rawlen. errbuf (may be NULL) receives what is wrong. */
/* zlib level used when none is given: level 3 measured fastest at under 4 bytes/event. */
#define DPRO_ZLIB_DEFAULT 3
#define DPRO_BATCH_MAX_RAW (256u << 20)
#define DPRO_BATCH_MAX_EVENTS (4u << 20)
int dpro_batch_decode_sized(const uint8_t *data, size_t len, size_t rawlen, dpro_event **events,
                            size_t *n, size_t ev_size, char *errbuf, size_t errlen);
#define dpro_batch_decode(data, len, rawlen, events, n, errbuf, errlen)                            \
    dpro_batch_decode_sized((data), (len), (rawlen), (events), (n), sizeof(dpro_event), (errbuf),  \
                            (errlen))

/* ---- reader --------------------------------------------------------------------------- */

typedef struct dpro_reader dpro_reader;

/* Opens one trace file read-only; it writes nothing, in the file or beside it, so that a
 * trace on read-only media or in a directory the reader cannot write reads as well. A
 * finished trace (no -wal beside it) is opened immutable. A file still being created (empty,
 * or no schema yet) is waited for briefly, then refused with DPRO_ERR_BUSY. A file cut short
 * (missing pages) opens, reads what is intact and says so (dpro_reader_ended_early); one cut
 * before its meta is refused with DPRO_ERR_CORRUPT, "cut short" in the message. Every
 * size and id the file gives is checked: DPRO_ERR_CORRUPT names the file and the table or
 * batch. On failure *out is NULL and errbuf (may be NULL) names the file and what is
 * wrong; the status says which kind of failure it is. */
int dpro_reader_open(const char *path, dpro_reader **out, char *errbuf, size_t errlen);

/* Closes the reader and frees it (NULL is fine). */
void dpro_reader_close(dpro_reader *r);

/* Closes the reader's file (its SQLite connection and descriptors) and keeps what the
 * open read: meta, strings, devices, streams, communicators, threads, stacks and the
 * warnings stay valid until dpro_reader_close (their arrays cut to their rows), so that a
 * caller holding many traces' events holds no open file a trace and little else. No
 * iterator may be open on r. After it, dpro_iter_open, dpro_iter_open_range and
 * dpro_reader_summary return DPRO_ERR_ARG
 * (dpro_reader_errmsg: the file is closed); open the file anew to read it again.
 * NULL and a reader already detached are fine. */
void dpro_reader_detach(dpro_reader *r);

/* What detached reader r holds (meta, strings, devices, streams, communicators, threads,
 * stacks, warnings, whether the trace ends early or is cut short) as bytes, into *out
 * (malloc'd, *len bytes), so that another process of the same build may hold the same
 * reader without opening the file (dpro_reader_unpack). Two cuts, for a process that holds
 * many ranks' readers: like (may be NULL) is a detached reader the receiver will hold as
 * well (and name to dpro_reader_unpack): when r's strings are like's, text for text, they
 * travel as that mark alone and the receiver's reader shares like's (one copy); meta_keys
 * (a NULL-terminated list; NULL: all) are the meta keys kept, the others' entries left
 * out (dpro_reader_meta then answers NULL for them). Returns DPRO_OK, DPRO_ERR_ARG (r
 * or like not detached, r NULL) or DPRO_ERR_NOMEM; *out NULL on failure. */
int dpro_reader_pack(const dpro_reader *r, const dpro_reader *like, const char *const *meta_keys,
                     uint8_t **out, size_t *len);

/* A detached reader holding what dpro_reader_pack wrote (p, len bytes), with path `path`
 * (dpro_reader_path; may be NULL: ""), into *out: every accessor answers as the packed
 * reader's did (but for the meta keys the pack left out); iteration and the summary refuse
 * it as any detached reader (DPRO_ERR_ARG). like: the reader that dpro_reader_pack was
 * given as like (its equal here: the same trace's reader, packed and unpacked before), or
 * NULL when it was given none; when the strings travelled as like's, *out shares like's
 * (dpro_reader_shares_strings; either may be closed first). Free with dpro_reader_close.
 * Returns DPRO_OK, DPRO_ERR_CORRUPT (not what dpro_reader_pack writes: cut short, bytes
 * left over, counts the bytes cannot hold, the strings like's but like NULL) or
 * DPRO_ERR_NOMEM; on failure *out is NULL and errbuf (may be NULL) names path and says
 * which. */
int dpro_reader_unpack(const uint8_t *p, size_t len, const char *path, dpro_reader *like,
                       dpro_reader **out, char *errbuf, size_t errlen);

/* Whether readers a and b hold one copy of their strings (dpro_reader_unpack's like):
 * 1 or 0 (also for NULL). */
int dpro_reader_shares_strings(const dpro_reader *a, const dpro_reader *b);

/* The path the reader was opened with. */
const char *dpro_reader_path(const dpro_reader *r);

/* What the reader found worth telling about a trace it could open ("" if nothing): one
 * line a finding, each naming the file, e.g. a -wal beside it (a writer is running or was
 * killed: a copy of the .dpro alone may lack its last batch), a file cut short. Lives as
 * long as the reader; iteration may add lines. */
const char *dpro_reader_warnings(const dpro_reader *r);

/* Non-zero if the trace ends early: its writer did not close it (killed, full disk, still
 * running: no meta `complete` in a file of schema 2.1 or later, no end-of-run clock anchor
 * in an older collector trace), or the file is cut short. The events that are there read
 * as usual. */
int dpro_reader_ended_early(const dpro_reader *r);

/* Value of a meta key, or NULL if absent. The pointer lives as long as the reader. */
const char *dpro_reader_meta(const dpro_reader *r, const char *key);

/* Integer value of a meta key, or dflt if absent or not a number. */
int64_t dpro_reader_meta_int(const dpro_reader *r, const char *key, int64_t dflt);

/* Text of a string id, or "" for 0 and for unknown ids. Lives as long as the reader. */
const char *dpro_reader_string(const dpro_reader *r, uint32_t id);

/* The dpro_api_class of the API name with string id name_id (classified once per id
 * and cached in the reader); DPRO_API_CLASS_OTHER for 0 and unknown ids. */
int dpro_reader_api_class(dpro_reader *r, uint32_t name_id);

/* Number of strings (the largest id). */
uint32_t dpro_reader_string_count(const dpro_reader *r);

/* Devices, streams, threads, communicators (arrays owned by the reader). */
size_t dpro_reader_devices(const dpro_reader *r, const dpro_device_info **out);
size_t dpro_reader_streams(const dpro_reader *r, const dpro_stream_info **out);
size_t dpro_reader_comms(const dpro_reader *r, const dpro_comm_info **out);
typedef struct dpro_thread_info {
    uint32_t tid;
    const char *name;
} dpro_thread_info;
size_t dpro_reader_threads(const dpro_reader *r, const dpro_thread_info **out);

/* Frames of a call stack (string ids, innermost first); 0 if unknown. */
size_t dpro_reader_stack(const dpro_reader *r, uint32_t stack_id, const uint32_t **frames);

/* Summary of the batches table, without decompressing anything. */
typedef struct dpro_trace_summary {
    uint64_t batches;
    uint64_t events;      /* sum of the batches' counts */
    uint64_t first_ns;    /* earliest event start */
    uint64_t last_ns;     /* latest event end */
    uint64_t event_bytes; /* compressed bytes of event data */
    uint64_t raw_bytes;   /* the same, uncompressed */
    uint64_t dropped;     /* dropped events, all threads and reasons */
    uint64_t file_bytes;  /* size of the file (and its -wal) on disk */
} dpro_trace_summary;
/* Fills *s; DPRO_ERR_CORRUPT (naming the batch) when a batch row's count or sizes are
 * impossible. */
int dpro_reader_summary_sized(dpro_reader *r, dpro_trace_summary *s, size_t s_size);
#define dpro_reader_summary(r, s) dpro_reader_summary_sized((r), (s), sizeof(dpro_trace_summary))

/* Iterator over the events of the file in start-time order (ties: by kind, then in
 * appended order). Batches are decoded lazily and merged, so memory is bounded by the
 * batches that overlap in time. */
typedef struct dpro_iter dpro_iter;

/* Starts an iteration over r's events (the reader must outlive the iterator). Returns
 * DPRO_OK with *out set, or an error with *out NULL (dpro_reader_errmsg says why). */
int dpro_iter_open(dpro_reader *r, dpro_iter **out);

/* Same, over the events that overlap the time window [t0_ns, t1_ns] (start_ns <= t1_ns
 * and end_ns >= t0_ns; an event whose end is before its start counts as an instant at
 * its start). Only the batches whose [first_ns, last_ns] overlap the window are read and
 * decoded. */
int dpro_iter_open_range(dpro_reader *r, uint64_t t0_ns, uint64_t t1_ns, dpro_iter **out);

/* Stores the next event in *ev and returns 1; returns 0 at the end. A damaged batch
 * makes it return DPRO_ERR_CORRUPT or DPRO_ERR_LIMIT once (dpro_reader_errmsg names the
 * file and the batch); calling it again goes on with the remaining batches. A batch is
 * damaged when it does not decode, or when what it decodes to disagrees with its row
 * (count, first_ns, last_ns) or names a string id the file does not have. */
int dpro_iter_next_sized(dpro_iter *it, dpro_event *ev, size_t ev_size);
#define dpro_iter_next(it, ev) dpro_iter_next_sized((it), (ev), sizeof(dpro_event))

/* Hands out only the events whose kind k has bit (1 << k) set in kinds (a kind of 64 or
 * more: none); the others are still decoded and checked (a damaged batch is told as
 * before) but neither ordered nor copied. Call it before the first dpro_iter_next.
 * Returns DPRO_OK, or DPRO_ERR_ARG when it is NULL or has read a batch already. */
int dpro_iter_set_kinds(dpro_iter *it, uint64_t kinds);

/* The kinds (bit 1 << k for kind k < 64) of the events in the batches decoded so far,
 * handed out or not; recorded only once dpro_iter_set_kinds has narrowed the kinds. */
uint64_t dpro_iter_kinds_seen(const dpro_iter *it);

/* Number of batches skipped as damaged so far. */
uint64_t dpro_iter_bad_batches(const dpro_iter *it);

/* Frees the iterator and the batches it holds (NULL is fine). */
void dpro_iter_close(dpro_iter *it);

/* Message of the reader's last error ("" if none). */
const char *dpro_reader_errmsg(const dpro_reader *r);

/* ---- directories ------------------------------------------------------------------------ */

/* Lists the trace files (*.dpro) named by paths: a file is taken as is (but SQLite's
 * -wal, -shm and -journal files beside a trace are skipped), a directory is scanned (not
 * recursively). *files receives a malloc'd array of malloc'd paths, sorted
 * (caller frees with dpro_free_paths). Returns DPRO_ERR_IO naming the first path that
 * cannot be read, DPRO_ERR_NOT_TRACE if a directory holds no trace. */
int dpro_list_traces(const char *const *paths, size_t npaths, char ***files, size_t *nfiles,
                     char *errbuf, size_t errlen);
void dpro_free_paths(char **files, size_t nfiles);

/* The file suffix of trace files. */
#define DPRO_TRACE_SUFFIX ".dpro"

#ifdef __cplusplus
}
#endif
#endif /* DPRO_TRACE_H */
