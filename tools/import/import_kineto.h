/*
 * import_kineto.h: streaming import of PyTorch profiler (Kineto) Chrome-trace JSON into a
 * dpro trace (dprotrace.h). The library part of `dpro-import kineto`; the fuzz target and
 * the benchmark call it directly.
 *
 * The input is parsed with yajl in callback (SAX) mode, chunk by chunk, so memory does not
 * grow with the file: events go to the writer as they are parsed. Four side tables are the
 * exceptions, each bounded by what the job has rather than by the file: a window of recent
 * correlation ids (KINETO_JOIN_WINDOW entries) that joins a launch call to its device
 * operation, the NCCL collectives (held until the end so that their sequence numbers follow
 * device order; at most KINETO_MAX_COLLECTIVES), the distinct names (interned by the
 * importer, the same set the writer keeps), and the streams, communicators and
 * unmapped-category counters.
 *
 * Threads: with a writer, the parsing thread (the caller's) fills batches of
 * KINETO_BATCH_EVENTS mapped events, with the names first seen in them and the thread and
 * device records, and hands each full batch to a writer thread (KINETO_BATCH_BUFFERS
 * batches in flight; one mutex and condition variable handoff per batch). The writer
 * thread interns the names, appends the events and writes the records, so encoding, zlib
 * and SQLite run beside the parser. It is joined by kineto_importer_finish, which writes
 * the tables and meta keys on the caller's thread. Between kineto_importer_new and the
 * return of kineto_importer_finish (or kineto_importer_free) the caller must not use the
 * writer. kineto_options.inline_writer does the same work on the caller's thread.
 *
 * Every Kineto generation since PyTorch 1.8 is read, CUDA and ROCm: the categories of the
 * older spellings map as their later names (kineto_keys.h's kin_cat_of lists them: 1.8's
 * Operator is cpu_op, or user_annotation for ProfilerStep#N; Runtime is cuda_runtime;
 * Kernel, Memcpy, Memset, User are kernel, gpu_memcpy, gpu_memset, gpu_user_annotation;
 * the flows async, async_gpu, async_cpu_to_gpu are ac2g, forward_backward is fwdbwd).
 * ROCm traces use the CUDA categories with HIP API names; an integer argument written as a
 * string ("stream": "0x0", "bytes": "1": decimal, or hex after 0x) is read as the number
 * (a string that is neither is refused).
 *
 * Mapping (Kineto category -> dpro_event):
 *   cuda_runtime, cuda_driver  DPRO_KIND_API, subkind RUNTIME/DRIVER, name = API name,
 *                              thread = tid, correlation = args.correlation; for launches
 *                              joined to their device op: stream, bytes (copies and sets)
 *                              and name2 = kernel name.
 *   kernel                     DPRO_KIND_KERNEL (device, stream, correlation, grid, block,
 *                              shared_mem = "shared memory"); a kernel whose name starts
 *                              with "nccl" also gives a DPRO_KIND_COLLECTIVE (see below).
 *   gpu_memcpy, gpu_memset     DPRO_KIND_MEMCPY (subkind = copy kind from "Memcpy HtoD"...),
 *                              DPRO_KIND_MEMSET; bytes = args.bytes (else, ROCm 6.2, the
 *                              "bytes" / "size" of its call when the call came first in the
 *                              file), name = the record name.
 *   cuda_sync                  DPRO_KIND_SYNC, subkind from cuda_sync_kind; object = the
 *                              CUDA event id waited for, value = correlation id of the
 *                              cudaEventRecord call that recorded it, peer = the stream it
 *                              was recorded on (-1: none). These three are import-only uses
 *                              of fields the header leaves free for device operations.
 *   cpu_op (1.8: Operator)     DPRO_KIND_MARKER, DPRO_MARK_CPU_OP, name = op, name2 =
 *                              "cpu_op" (1.8's ProfilerStep#N: as user_annotation's).
 *   user_annotation            "ProfilerStep#N": DPRO_MARK_ITERATION, value = N; others
 *                              DPRO_MARK_RANGE; name2 = "user_annotation".
 *   gpu_user_annotation        DPRO_MARK_RANGE with name2 = "gpu_user_annotation", device
 *   python_function            and stream set (thread 0); python_function: host RANGE.
 *   ph "i" (instant)           "[memory]": DPRO_KIND_MEMORY (alloc when Bytes > 0, free
 *                              when < 0; address, device, bytes; value = DPRO_MEMSPACE_DEVICE
 *                              for Device Type 1, DPRO_MEMSPACE_HOST for 0, other device
 *                              types unmapped; total_allocated, total_reserved); any
 *                              other instant: DPRO_MARK_INSTANT, name2 = "instant".
 *   flows (ph s/f/t)           DPRO_KIND_FLOW (ac2g, fwdbwd, every other category), as the
 *                              header describes: correlation = id, name2 = category;
 *                              ac2g ones are also counted (import.flows.ac2g).
 * Arguments (kineto_args.c), on every event above: "External id", "Record function id",
 * "Sequence number", "Fwd thread id", "Ev Idx" in their fields (has bits); "Input Dims" and
 * "Input type" as interned JSON text (shapes, dtypes); every other argument that no field
 * holds (collective arguments, cbid, occupancy, context, a stream of -1, a copy's
 * bandwidth when it is not bytes over duration, ...) in one interned JSON object text
 * (args), strings escaped anew, numbers as written. dpro-export --kineto writes them back.
 *   ph "M"                     thread_name of a host tid -> threads table; "stream N ..."
 *                              names of GPU tids -> streams table (a bare "stream N" is
 *                              left out: the id says it); process_name -> meta.
 *   distributedInfo            meta rank, world_size, nccl_version; deviceProperties ->
 *                              devices table.
 * Everything else (the profiler's own "Trace" span, counters, unknown categories and
 * phases, memory events of other device types) is counted per reason and lands in meta as
 * import.unmapped.<reason> = N; kineto_importer_unknown_categories names the categories
 * not known (another device's), and kineto_result.device_ops says whether any device
 * operation was found.
 *
 * Job id (meta job_id, unless kineto_options.job_id): "kineto-" and a 64-bit FNV-1a hash of
 * the world size and kineto_options.files_id, the identity (content hash) of the files
 * imported together. The files of one world size imported together so share one id, those
 * of another world size get another, and two jobs imported separately get two, even of one
 * configuration, profiled in the same hour, under the same file names. The ranks of a job
 * imported one by one get one id each: give them one --job-id (kineto_options.job_id).
 *
 * Collectives: comm = FNV-1a 64 hash (common/fnv1a.h) of "kineto-pg:" + "Process Group Name" (or
 * "Process Group ID"; "default" when neither is present), subkind from "Collective name" or from
 * the kernel name; a kernel whose name does not say it (a SendRecv kernel of grouped
 * send/recv, which an all-to-all is, or RCCL's ncclDevKernel_Generic) takes the operation
 * of the innermost host range its launch lies in on the launching thread
 * (record_param_comms with a "Collective name", nccl:<op>, c10d::<op>), and count, dtype
 * and "Seq" from those ranges where the kernel lacks them; the kernels of one range are
 * one collective spanning them all (import.merged.grouped_transfers counts the others);
 * a SendRecv kernel outside any such range is recorded as DPRO_COLL_SEND
 * (import.approx.sendrecv_as_send), a kernel of no known operation as no collective
 * (import.unmapped.collective_op); count
 * from "In msg nelems" ("Out msg nelems" for reduce-scatter), dtype as ncclDataType_t
 * (KINETO_DTYPE_UNKNOWN if unknown), redop from the kernel name, peer -1 where a root or
 * peer exists but is unknown, seq from "Seq" when present (c10d's per process group
 * number), else a counter per communicator in device start order, so that every rank
 * numbers the same collective alike (the replay matches on comm, op and seq). start/end are
 * the launch call's when joined through the correlation id, else the kernel's; value says
 * which (dpro_event.value of a collective): DPRO_COLL_TIMING_HOST for the launch call's
 * times, DPRO_COLL_TIMING_DEVICE for the device-timed kernel record's. thread is the
 * launching thread (0 if unknown).
 *
 * Long tokens: yajl lexes a token that runs past the text it was given again from its
 * start with the next text; a string spanning many pieces of input is therefore handed to
 * yajl in pieces as long as what it holds of it, so that the work stays linear.
 *
 * Timestamps: microseconds in the file (integers or decimals, parsed from the text, no
 * floating point), nanoseconds in the trace.
 *
 * Execution trace (kineto_options.et): an event with a "Record function id" that is the
 * rf_id of a node of the execution trace gets the node's id (et_id), its parent's
 * (et_parent) and its data dependencies (et_deps), and, where Kineto has none, the node's
 * input shapes and types (shapes, dtypes: in the execution trace's spelling, e.g.
 * "Tensor(float)"). Counted as import.et.joined; the node's joined count is raised.
 *
 * Bounds: what the importer writes leaves the readers' int64 arithmetic room. An event
 * whose ts or ts + dur is past 2^62 ns (the year 2116 in Unix time), copy, set or memory
 * bytes over 2^50, or a collective of more than 2^50 elements or bytes ("In msg nelems"
 * times the element size) is refused: DPRO_ERR_LIMIT, the message naming the file, the
 * byte offset and the line (the end of the event) and the value.
 */
#ifndef DPRO_IMPORT_KINETO_H
#define DPRO_IMPORT_KINETO_H

#include <stddef.h>
#include <stdint.h>

#include "dprotrace.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Entries of the correlation join window; launches and device ops further apart in the
 * file than this are emitted unjoined (counted as import.unjoined.window). */
#define KINETO_JOIN_WINDOW 32768u
/* Collectives held for sequence numbering; beyond it, kernels are kept but their
 * collectives counted as import.unmapped.collective_overflow. */
#define KINETO_MAX_COLLECTIVES (4u << 20)
/* Events per batch handed to the writer thread, and batches (one being filled, the others
 * queued or being written). */
#define KINETO_BATCH_EVENTS 4096u
#define KINETO_BATCH_BUFFERS 4u
/* dtype of a collective whose element type is not known. */
#define KINETO_DTYPE_UNKNOWN 255u

typedef struct kineto_options {
    const char *source_file; /* shown in messages and meta source_file; may be NULL */
    int file_index;          /* position of the file among those imported together */
    int file_count;          /* how many are imported together (world size fallback) */
    const char *job_id;      /* job_id, as it is; NULL: made from the file (see below) */
    int inline_writer;       /* non-zero: append to the writer on the calling thread (no
                              * writer thread); the output is the same */
    int squeeze;             /* KINETO_SQUEEZE_*: how the whitespace is taken out of the
                              * text before yajl lexes it; 0 (AUTO) is right but for tests */
    uint64_t files_id;       /* identity of the files imported together
                              * (kineto_files_identity), the job id's seed; 0: none known */
    struct et_graph *et;     /* the execution trace of the same process (import_et.h), or
                              * NULL: its nodes are joined to the ops of the same Record
                              * function id (see "Execution trace" above); not owned, and
                              * its nodes' joined counts are set */
} kineto_options;

/* The identity of the files imported together: a 64-bit FNV-1a hash of each file's bytes
 * (as stored: a .gz file's compressed bytes), the n hashes sorted (the order they are named
 * in does not matter) and hashed together. A file that cannot be read counts by its name
 * (its import will fail and say why). Never 0. */
uint64_t kineto_files_identity(const char *const *paths, size_t n);

/* One file's part of kineto_files_identity: the FNV-1a hash of the bytes of the file at
 * path, or of its name where it cannot be read. Safe to call from several threads. */
uint64_t kineto_file_identity(const char *path);

/* kineto_files_identity from the n files' kineto_file_identity (each, sorted here), so
 * that a caller may hash the files in parallel. Never 0. */
uint64_t kineto_identity_combine(uint64_t *each, size_t n);

/* The whitespace pre-pass. Pretty-printed Kineto JSON is about a quarter whitespace, which
 * yajl's lexer steps over a byte at a time; the importer first copies the text without
 * the whitespace that separates nothing (outside strings, after a structural character or
 * a closing quote; whitespace after a number or a literal is kept, so "1 2" stays two
 * tokens), sixteen or sixty-four bytes at a time. yajl sees the same tokens in the same
 * order, and error positions (byte offset and line) are mapped back to the original text,
 * so the results and the messages are those of a plain parse. The levels say how: OFF
 * (yajl gets the text as is), SCALAR (a byte at a time: the reference, and any CPU),
 * SSSE3, AVX512 (AVX-512 BW + VBMI2 compress). A level the CPU lacks falls back to the best
 * one it has below it; AUTO is the best SIMD level the CPU has, else OFF (SCALAR costs
 * more than it saves yajl: 259 against 325 MB per CPU-second in bench_import_kineto). */
enum {
    KINETO_SQUEEZE_AUTO = 0,
    KINETO_SQUEEZE_OFF,
    KINETO_SQUEEZE_SCALAR,
    KINETO_SQUEEZE_SSSE3,
    KINETO_SQUEEZE_AVX512,
};

/* What an import found out about the file; filled in by kineto_importer_finish. */
typedef struct kineto_result {
    int64_t rank;        /* from distributedInfo, else file_index */
    int64_t world_size;  /* from distributedInfo, else file_count */
    int64_t pid;         /* the host process id of the CPU events (0 if none) */
    const char *host;    /* host_name key of the file, or NULL */
    uint64_t events_in;  /* trace events read */
    uint64_t events_out; /* dpro events produced */
    uint64_t unmapped;   /* trace events not turned into dpro events, all reasons */
    uint64_t device_ops; /* kernels, copies and sets among events_out */
    uint64_t bytes_in;   /* JSON bytes parsed */
} kineto_result;

typedef struct kineto_importer kineto_importer;

/* Creates an importer that appends to w (not owned; may be NULL to parse and map without
 * writing, as the fuzz target does: the batches are then dropped when full). opts may be
 * NULL. With a writer and without opts->inline_writer, starts the writer thread (if the
 * system cannot start one, the importer writes on the calling thread instead). On success
 * *out must be freed with kineto_importer_free. Returns DPRO_OK or DPRO_ERR_NOMEM. */
int kineto_importer_new(dpro_writer *w, const kineto_options *opts, kineto_importer **out);

/* Parses the next len bytes of the JSON text. Returns DPRO_OK; DPRO_ERR_NOT_TRACE for
 * input that is not valid JSON or not a Kineto trace, DPRO_ERR_LIMIT for absurd numbers
 * and for a token (a string, a number) longer than 16 MiB (refused once that much of it is
 * read, at most 4 MiB past it; a name is refused from 16 MiB as well),
 * DPRO_ERR_IO/NOMEM when the writer fails (a failure of the writer thread is seen when
 * the parser next hands over a batch, or by kineto_importer_finish: up to
 * KINETO_BATCH_BUFFERS batches after the failing event; the message is the writer's,
 * prefixed with the file and the parser's position then). After an error every further
 * call returns the same status; kineto_importer_errmsg names the file, the byte offset and
 * the line. */
int kineto_importer_feed(kineto_importer *k, const void *buf, size_t len);

/* Ends the input. If complete is non-zero, the end of the JSON text is checked (an error
 * if it is cut short). Either way, events held for joining are appended, collectives
 * numbered and appended, the last batch handed over and the writer thread joined (every
 * event parsed before an error is thus given to the writer: --keep-partial), then, unless
 * the writer failed, the streams and communicators tables and the meta keys are written
 * (import.partial = 1 and import.error after an error). Returns the first error of the
 * import (also one met earlier by feed), DPRO_OK if none. Call once; the writer is the
 * caller's again when it returns (the last batch of events is still in the writer's
 * memory: dpro_writer_close or dpro_writer_flush writes it). */
int kineto_importer_finish(kineto_importer *k, int complete);

/* The KINETO_SQUEEZE_* level k uses (never AUTO: what AUTO chose on this CPU). */
int kineto_importer_squeeze(const kineto_importer *k);

/* Message of the first error ("" if none); lives as long as the importer. */
const char *kineto_importer_errmsg(const kineto_importer *k);

/* Fills *res (valid after kineto_importer_finish; host lives as long as the importer). */
void kineto_importer_result(const kineto_importer *k, kineto_result *res);

/* Writes one line per unmapped reason ("  reason: N") and per join statistic to f
 * (a FILE *, typed void * to keep stdio out of this header). */
void kineto_importer_print_unmapped(const kineto_importer *k, void *f);

/* The categories of complete events ("ph": "X") the importer does not know (another
 * device's, such as MTIA's mtia_runtime and mtia_ccp_events, or a newer Kineto's): writes
 * "name (N), name (N)" into buf (cut to len, NUL-terminated when len > 0), stores the
 * events of those categories in *events (may be NULL) and returns how many categories.
 * Valid after kineto_importer_finish. */
size_t kineto_importer_unknown_categories(const kineto_importer *k, char *buf, size_t len,
                                          uint64_t *events);

/* Frees the importer (NULL is fine). The writer is not touched: if kineto_importer_finish
 * was not called, batches not yet written are dropped and the writer thread joined. */
void kineto_importer_free(kineto_importer *k);

/* Feeds the file at path (plain JSON, read as it is, or gzip, read with zlib; in chunks) to
 * k, then calls kineto_importer_finish(k, ok). A truncated or damaged gzip stream is an
 * error naming the JSON byte offset reached. Knowing the file's size, the importer asks the
 * writer for one extra flush when about 6144 events are left by the rate so far, so that
 * the last batch, encoded after the parse, is short; not when the writer holds fewer than
 * that many (the last batch stays under about 12288 events, and an input of fewer events
 * is one batch). Returns the first error, DPRO_OK if none. */
int kineto_import_path(kineto_importer *k, const char *path);

/* One-shot import of an in-memory buffer into w (may be NULL), fed in pieces of at most
 * chunk bytes (0: all at once) so that token boundaries fall anywhere. errbuf (may be
 * NULL) receives the error message. Returns as kineto_importer_finish. */
int kineto_import_buffer(dpro_writer *w, const void *buf, size_t len, size_t chunk,
                         const kineto_options *opts, char *errbuf, size_t errlen);

/* Fills *o with the writer options imports use: exclusive create, zlib level 6, 512-byte
 * pages and batches of 16384 events. (65536 made files ~3 % smaller, but a batch is encoded beside
 * the parse only if it fills before the parse ends: the last one never does, and in a
 * file of under 65536 events none did.) */
void kineto_writer_options(dpro_writer_options *o);

/* Parses a JSON number text of microseconds ("1234", "1234.5678", "1.5e3") into whole
 * nanoseconds, rounding half up past the nanosecond. Returns 0 and stores *ns, or -1 for a
 * negative, malformed or out of range (> UINT64_MAX ns) value. */
int kineto_parse_us(const char *text, size_t len, uint64_t *ns);

#ifdef __cplusplus
}
#endif
#endif /* DPRO_IMPORT_KINETO_H */
