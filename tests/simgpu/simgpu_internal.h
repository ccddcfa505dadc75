/* simgpu_internal.h: the core of the simulated GPU device, shared by the stand-in
 * libraries (libcudart.so.13, libcuda.so.1, libnccl.so.2, libcupti.so.13).  The core
 * lives in libsimgpu.so.0; the stand-ins are thin translations of the public APIs
 * onto it.  Nothing here is part of any public API.
 *
 * Model: every stream has a worker thread that executes the stream's operations in
 * order.  An operation starts at max(end of the previous operation of the stream,
 * the host time it was enqueued, the ends of the operations it depends on) and
 * ends after its modelled duration; the worker sleeps until that absolute
 * deadline (clock_nanosleep TIMER_ABSTIME), so late wake-ups never accumulate into
 * device time.  When nothing is queued behind an operation and nobody waits for it,
 * the worker does not wake at its end: the operation stays in flight (its times fixed)
 * and is completed by whoever looks next (the worker at its next op, a waiter, a query),
 * so an operation costs the host one wake-up, not two; and a kernel launched on an idle
 * stream is timed by the launching thread itself, at its start, and left in flight,
 * so that it wakes no worker at all.  One global mutex guards all
 * device state.  Each stream has two
 * condition variables: its worker waits on work_cv for an op, and the threads waiting for
 * the stream's ops (host synchronisation, workers of streams that depend on it) wait on
 * done_cv, woken only when the smallest of their targets (wake_seq) is reached.
 */
#ifndef SIMGPU_INTERNAL_H
#define SIMGPU_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cuda_runtime_api.h>
#include <cupti.h>

#include "simgpu.h"
#include "world.h"

#define SIMGPU_MAX_DEVICES 16
#define SIMGPU_END_RING 256       /* ends of the last N ops a stream completed kept */
#define SIMGPU_LEGACY_STREAM_ID 7 /* what CUPTI reports for the legacy stream */

/* ---- configuration (environment, read once) ---------------------------------- */
struct simgpu_config {
    int device_count;           /* SIMGPU_DEVICE_COUNT, else LOCAL_WORLD_SIZE, else 1 */
    uint64_t launch_ns;         /* SIMGPU_LAUNCH_US: host cost of a launch (4 us) */
    uint64_t default_kernel_ns; /* SIMGPU_DEFAULT_KERNEL_US (10 us) */
    double slowdown;            /* SIMGPU_SLOWDOWN: straggler factor on kernels (1) */
    double contention;          /* SIMGPU_CONTENTION: stretch per extra running kernel (0) */
    double h2d_gbps;            /* SIMGPU_H2D_GBPS (25) */
    double d2d_gbps;            /* SIMGPU_D2D_GBPS (1500) */
    uint64_t mem_bytes;         /* SIMGPU_MEM_GB (80) */
    int cupti_busy;             /* SIMGPU_CUPTI_BUSY: another tool holds CUPTI */
    uint64_t cupti_limit_bytes; /* SIMGPU_CUPTI_LIMIT_MB (64): staged records before drops */
    uint64_t cupti_deliver_ms;  /* SIMGPU_CUPTI_DELIVER_MS (200): delivery period */
    int teardown_at_exit;       /* SIMGPU_TEARDOWN_AT_EXIT set: CUPTI torn down at exit */
    uint64_t worker_delay_ns;   /* SIMGPU_WORKER_DELAY_US (0): a starved stream worker */
};

/* The configuration; valid after simgpu_init(). */
extern struct simgpu_config simgpu_cfg;

/* Reads the environment once (thread-safe, idempotent). */
void simgpu_init(void);
/* The driver is initialised by cuInit and, as the real runtime calls cuInit, by the first
 * runtime call; the driver's calls answer CUDA_ERROR_NOT_INITIALIZED before. */
void simgpu_driver_mark_init(void);
int simgpu_driver_is_init(void);

/* Sleeps until CLOCK_MONOTONIC reaches `deadline_ns` (returns at once if past). */
void simgpu_sleep_until(uint64_t deadline_ns);

/* Busy-waits `ns` nanoseconds of host time (launch overheads: a few microseconds). */
void simgpu_spin_ns(uint64_t ns);

/* ---- operations --------------------------------------------------------------- */
enum simgpu_op_kind {
    SIMGPU_OP_KERNEL,
    SIMGPU_OP_MEMCPY,
    SIMGPU_OP_MEMSET,
    SIMGPU_OP_EVENT_RECORD,
    SIMGPU_OP_EVENT_WAIT, /* a pure dependency; used inside graphs */
    SIMGPU_OP_HOST_FN,
    SIMGPU_OP_CUSTOM, /* e.g. an NCCL collective */
    SIMGPU_OP_GRAPH,  /* a graph launch, expanded into its operations at the stream's head */
};

struct simgpu_stream;
struct simgpu_event;

/* A custom operation (an NCCL collective): `run` executes on the stream's worker
 * when the stream reaches it, with `start_ns` the device time it started; it
 * blocks as long as it must and stores the device end time in *end_ns.  It returns
 * 0, or nonzero when the operation failed (the device then gets a sticky error).
 * `clone` makes a fresh instance for each launch of a captured graph; `release`
 * frees an instance after it ran. */
struct simgpu_custom_ops {
    int (*run)(void *inst, uint64_t start_ns, uint64_t *end_ns);
    void *(*clone)(void *inst);
    void (*release)(void *inst);
};

struct simgpu_dep {
    struct simgpu_stream *stream;
    uint64_t seq;
};

struct simgpu_op {
    struct simgpu_op *next;
    enum simgpu_op_kind kind;
    uint64_t seq;                /* position in the stream (set by enqueue) */
    uint64_t enqueue_ns;         /* host time it was enqueued */
    uint64_t run_start, run_end; /* device times once run (in flight) */
    uint32_t corr;               /* correlation id of the API call that created it */
    uint32_t graph_id;           /* nonzero when launched from a graph */
    uint64_t graph_node_id;
    int cap_slot; /* stream slot inside a graph being captured */
    int ndeps;
    struct simgpu_dep *deps;
    union {
        struct {
            const char *name;
            uint64_t dur_ns; /* the job's duration (used when it gave no work) */
            dim3 grid, block;
            uint32_t shmem;
            int has_work;
            struct simgpu_work work; /* simgpu_set_next_launch_work */
        } kernel;
        struct {
            void *dst;
            const void *src;
            size_t bytes;
            int copy_kind;          /* CUpti_ActivityMemcpyKind */
            int src_kind, dst_kind; /* CUpti_ActivityMemoryKind */
            int async;
        } memcpy;
        struct {
            void *dst;
            uint32_t value; /* a byte, or with word set a 32-bit word (cuMemsetD32) */
            size_t bytes;
            int word;
            int async;
            int cheap; /* few bytes (SIMGPU_INLINE_MEMSET_BYTES): the launching thread may run it */
        } memset;
        struct {
            struct simgpu_event *ev;
            int cap_index; /* event index inside a captured graph */
        } event;
        struct {
            cudaHostFn_t fn;
            void *arg;
            size_t arg_bytes; /* > 0: the op owns arg, of that many bytes: freed with the op,
                               * copied for each launch of a graph that captured it */
        } host;
        struct {
            const struct simgpu_custom_ops *ops;
            void *inst;
            const char *name;
        } custom;
        struct {
            struct simgpu_graph_exec *exec;
        } graph;
    } u;
};

/* A memset of at most this many bytes onto an idle stream is run by the launching thread
 * (a few microseconds of setting bytes), which then wakes no worker.  A larger one is
 * left to the stream's worker, woken so that it does not take the launching thread's
 * CPU (simgpu_enqueue): setting its bytes takes the host hundreds of microseconds a
 * megabyte, where a real cudaMemsetAsync returns in microseconds.  A copy of more bytes
 * than this (every copy is the worker's) wakes its worker the same way. */
#define SIMGPU_INLINE_MEMSET_BYTES 65536

/* A memset operation (SIMGPU_OP_MEMSET) of `bytes` bytes at dst, each byte set to value,
 * or with `word` each 32-bit word (bytes a multiple of 4, dst aligned to 4); `async`: a
 * cudaMemsetAsync's (its CUPTI record's flag).  Returns NULL when out of memory. */
struct simgpu_op *simgpu_memset_op_new(void *dst, uint32_t value, size_t bytes, int word,
                                       int async);

/* Sets the bytes of memset op (its execution on the device). */
void simgpu_memset_run(const struct simgpu_op *op);

/* Allocates a zeroed operation of `kind` stamped with the calling thread's current
 * correlation id.  Returns NULL when out of memory. */
struct simgpu_op *simgpu_op_new(enum simgpu_op_kind kind);

/* ---- settings (env.c) ------------------------------------------------------------ */

/* The setting `name` (an environment variable) as a number: its value when it is one
 * whole (strtod's spelling, nothing after it) from least to most; unset or empty, dflt;
 * anything else is named on stderr (the setting, what it holds, its range, the default
 * taken) and dflt returned. */
double simgpu_env_number(const char *name, double least, double most, double dflt);

/* The setting `name` as a whole number: as simgpu_env_number, for decimal digits alone
 * (no sign, no spaces) from least to most. */
uint64_t simgpu_env_whole(const char *name, uint64_t least, uint64_t most, uint64_t dflt);

/* ---- devices, streams, events ---------------------------------------------------- */

/* Returns the calling thread's current device (cudaSetDevice), initialising it. */
int simgpu_current_device(void);

/* Makes `dev` current for the calling thread.  Returns cudaErrorInvalidDevice when
 * out of range. */
cudaError_t simgpu_set_device(int dev);

/* Resolves a user stream handle on the current device: NULL / cudaStreamLegacy
 * give the legacy stream (or, when `ptds` is nonzero, the calling thread's
 * per-thread default stream), cudaStreamPerThread the per-thread stream, anything
 * else must be a live stream.  Returns cudaSuccess or
 * cudaErrorInvalidResourceHandle. */
cudaError_t simgpu_stream_resolve(cudaStream_t h, int ptds, struct simgpu_stream **out);

/* Creates a stream on the current device (flags: cudaStreamNonBlocking). */
cudaError_t simgpu_stream_create(struct simgpu_stream **out, unsigned flags, int priority);

/* Destroys a stream: returns at once; work already enqueued still runs. */
cudaError_t simgpu_stream_destroy(struct simgpu_stream *s);

/* Waits until everything enqueued on `s` so far has run; returns the device's
 * sticky error if one is set. */
cudaError_t simgpu_stream_sync(struct simgpu_stream *s);

/* cudaSuccess when all work of `s` has run, else cudaErrorNotReady. */
cudaError_t simgpu_stream_query(struct simgpu_stream *s);

/* Stream attributes for cudaStreamGetFlags/Priority and CUPTI stream ids. */
unsigned simgpu_stream_flags(const struct simgpu_stream *s);
int simgpu_stream_priority(const struct simgpu_stream *s);
uint32_t simgpu_stream_id(const struct simgpu_stream *s);
int simgpu_stream_device(const struct simgpu_stream *s);

/* Enqueues `op` on `s` (takes ownership): adds the legacy-stream dependencies,
 * stamps enqueue time, wakes the worker.  When `s` is being captured into a graph
 * the op is appended to the graph instead.  Returns cudaSuccess, or the error
 * that stops it (sticky error, invalid capture). */
cudaError_t simgpu_enqueue(struct simgpu_stream *s, struct simgpu_op *op);

/* Waits for every stream of the current device. */
cudaError_t simgpu_device_sync(void);

/* Sticky error of the current device (cudaSuccess when none). */
cudaError_t simgpu_sticky_error(void);

/* Creates an event (cudaEventDisableTiming / BlockingSync / Interprocess flags);
 * cudaErrorInvalidValue for other flags. */
cudaError_t simgpu_event_create(struct simgpu_event **out, unsigned flags);
/* Destroys an event; a pending record still completes (memory freed after). */
cudaError_t simgpu_event_destroy(struct simgpu_event *ev);
/* Validates a user event handle.  Returns NULL when it is not a live event. */
struct simgpu_event *simgpu_event_lookup(cudaEvent_t h);
/* Records ev on s (or into the graph s is capturing); the event's time is the
 * device time the stream reaches the record. */
cudaError_t simgpu_event_record(struct simgpu_event *ev, struct simgpu_stream *s);
/* cudaSuccess when the last record has run (or never recorded), else NotReady. */
cudaError_t simgpu_event_query(struct simgpu_event *ev);
/* Waits for the last record; returns the device's sticky error if any. */
cudaError_t simgpu_event_sync(struct simgpu_event *ev);
/* Milliseconds between two completed records; InvalidResourceHandle for
 * unrecorded or DisableTiming events, NotReady when one has not run. */
cudaError_t simgpu_event_elapsed(float *ms, struct simgpu_event *a, struct simgpu_event *b);
/* A process-unique id of the event (CUPTI cudaEventId), 0 for NULL. */
uint32_t simgpu_event_id(const struct simgpu_event *ev);
/* Makes future work of `s` wait for the last record of `ev`. */
cudaError_t simgpu_stream_wait_event(struct simgpu_stream *s, struct simgpu_event *ev);

/* ---- graphs --------------------------------------------------------------------- */
struct simgpu_graph;
struct simgpu_graph_exec;
/* Starts capturing s into a new graph (not the legacy stream; mode ignored). */
cudaError_t simgpu_capture_begin(struct simgpu_stream *s, int mode);
/* Ends the capture begun on s (and on the streams that joined it); *out owns it. */
cudaError_t simgpu_capture_end(struct simgpu_stream *s, struct simgpu_graph **out);
/* 1 when `s` is being captured, else 0. */
int simgpu_capture_status(struct simgpu_stream *s);
/* The graph `s` is being captured into (also the capture's id), or NULL. */
struct simgpu_graph *simgpu_capture_graph(struct simgpu_stream *s);
/* The operations (nodes) captured into g so far. */
int simgpu_graph_node_count(struct simgpu_graph *g);
/* Makes an executable graph: internal streams for the branches, internal events. */
cudaError_t simgpu_graph_instantiate(struct simgpu_graph_exec **out, struct simgpu_graph *g);
/* Enqueues the captured work on s (branches on internal streams, joined back). */
cudaError_t simgpu_graph_launch(struct simgpu_graph_exec *x, struct simgpu_stream *s);
/* Destroys a graph; its executables stay valid (the graph is freed after them). */
cudaError_t simgpu_graph_destroy(struct simgpu_graph *g);
/* Makes g hold count references to obj, given back by release(obj, count) when g is freed
 * (after cudaGraphDestroy and the last executable graph made from it). */
cudaError_t simgpu_graph_hold(struct simgpu_graph *g, void (*release)(void *, unsigned), void *obj,
                              unsigned count);
/* Destroys an executable graph; launched work still runs. */
cudaError_t simgpu_graph_exec_destroy(struct simgpu_graph_exec *x);
/* Validate user handles (magic number); NULL when not a live graph / exec. */
struct simgpu_graph *simgpu_graph_lookup(void *h);
struct simgpu_graph_exec *simgpu_graph_exec_lookup(void *h);

/* ---- memory ------------------------------------------------------------------------ */
/* Allocates simulated device memory (lazily backed host pages).  `stream` is the
 * stream of an async allocation or NULL.  Emits a CUPTI memory record. */
cudaError_t simgpu_malloc(void **p, size_t bytes, struct simgpu_stream *stream);
cudaError_t simgpu_free(void *p, struct simgpu_stream *stream);
/* Pinned host memory (cudaMallocHost / cudaHostAlloc). */
cudaError_t simgpu_host_alloc(void **p, size_t bytes);
cudaError_t simgpu_host_free(void *p);
/* Kind of memory `p` points into: CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, _PINNED or
 * _PAGEABLE. */
int simgpu_memory_kind(const void *p);
/* The allocation `p` points into: its base, size and device; returns its CUPTI memory kind,
 * or -1 (nothing set) when p is in no allocation of the device. */
int simgpu_memory_range(const void *p, void **base, size_t *bytes, int *dev);
/* Bytes of device memory in use and the peak, for the current device. */
void simgpu_memory_usage(size_t *in_use, size_t *peak);

/* Builds (does not enqueue) a copy operation; `kind` is the cudaMemcpyKind, with
 * cudaMemcpyDefault resolved from the pointers. */
struct simgpu_op *simgpu_memcpy_op(void *dst, const void *src, size_t bytes,
                                   enum cudaMemcpyKind kind, int async);

/* ---- kernels --------------------------------------------------------------------- */
/* Looks up name and duration of `func` (registry by pointer, by name, dladdr,
 * default).  The duration includes the per-thread one-shot override, which it
 * consumes, and the straggler slowdown. */
void simgpu_kernel_lookup(const void *func, const char *fallback_name, const char **name,
                          uint64_t *dur_ns);

/* Takes the calling thread's pending simgpu_set_next_launch_work into *w: returns 1, or 0
 * when there is none. */
int simgpu_take_next_work(struct simgpu_work *w);

/* A kernel launch as the device sees it: its size and the arguments the job passed (what a
 * real GPU reads).  `params[i]` points to argument i (cudaLaunchKernel's args,
 * cuLaunchKernel's kernelParams), or `buf` holds the arguments packed (cuLaunchKernel's
 * extra: CU_LAUNCH_PARAM_BUFFER_POINTER and _SIZE); either may be NULL. */
struct simgpu_launch_args {
    uint64_t blocks;  /* grid x * y * z */
    uint64_t threads; /* blocks x threads a block */
    void **params;
    const void *buf;
    size_t buf_bytes;
};

/* The work of a kernel that the job gave no work or duration for, from its name and launch
 * `l` (its size; a multi_tensor_apply kernel's tensor sizes from its argument): Inductor's
 * Triton names (triton_poi_, triton_red_, triton_per_, triton_tem_, any other triton_) and
 * torch's eager at::native kernels by class (elementwise, copy, fill, reduction, norm,
 * softmax, index/scatter, multi_tensor_apply; latency class when tiny).  Returns 1 and fills
 * *w, or 0 when no rule knows the name or the job registered a duration for it (func or
 * name), which then holds (the kernel takes that duration or SIMGPU_DEFAULT_KERNEL_US).  The
 * rule is tests/simgpu/README.md's ("Kernels named by their class"). */
int simgpu_named_work(const void *func, const char *name, const struct simgpu_launch_args *l,
                      struct simgpu_work *w);

/* The device-memory bytes of launch `l` of torch's multi_tensor_apply_kernel `name` (handle
 * or stub `func`; core_mta.c): each block processes min(65536, numel - chunk x 65536)
 * elements of its tensor, read from the TensorListMetadata, TensorListScalarListMetadata or
 * FusedOptimizerTensorListMetadata argument the name says (torch 2.15's layout for CUDA 13),
 * x `esz` bytes x the accesses of its depth.  When the launch gives no such argument, or one
 * that does not fit the layout (the packed buffer's or the kernel image's parameter size, the
 * block count, the indices), the upper bound: 65,536 elements a block (128 a thread of
 * l->threads), the launch counted once in simgpu_mta_unknown_launches. */
double simgpu_mta_bytes(const void *func, const char *name, const struct simgpu_launch_args *l,
                        double esz);

/* ---- modules and kernel handles (core_module.c) ---------------------------------------
 * A module is a device image: a program's fat binary registered by nvcc's host code
 * (__cudaRegisterFatBinary) or one loaded by cuModuleLoadData / cuLibraryLoadData /
 * cudaLibraryLoadData.  Its kernels are named from the image: the entry functions of its
 * uncompressed ELF cubins (symbols with STO_CUDA_ENTRY), or `.entry` lines of plain PTX;
 * a registered binary also names them through __cudaRegisterFunction.  A kernel handle
 * (struct simgpu_kernel) is what cudaKernel_t, CUkernel and CUfunction point to. */
struct simgpu_module;

/* What cudaFuncGetAttributes reports, read from the cubin's .nv.info where present. */
struct simgpu_kernel_info {
    int num_regs, local_bytes, shared_bytes, const_bytes, param_bytes, max_threads, arch;
    int from_image; /* 1 when the figures come from the image, 0 for defaults */
};

struct simgpu_kernel {
    uint32_t magic;
    const char *name; /* kept until the process exits (CUPTI records point at it) */
    const void *stub; /* host stub of a registered kernel, else NULL */
    struct simgpu_module *mod;
    int dead; /* its module was unloaded */
    int max_dyn_shmem, carveout, cache_config, nonportable_cluster, cluster_pref;
    struct simgpu_kernel_info info;
    int info_read;
    struct simgpu_kernel *next_in_mod, *next_stub, *next_handle, *next_name;
};

/* Loads the image at `image` (a fat binary, its __fatDeviceText wrapper, an ELF cubin
 * or NUL-terminated PTX; `bytes` bounds it when nonzero).  `registered` marks a program's
 * own fat binary, whose kernels its host code registers.  Returns cudaSuccess,
 * cudaErrorInvalidValue (NULL), cudaErrorInvalidKernelImage (not an image, or an image
 * whose tables are cut short) or cudaErrorMemoryAllocation. */
cudaError_t simgpu_module_load(const void *image, size_t bytes, int registered,
                               struct simgpu_module **out);
/* Unloads a module: its kernel handles become invalid (their memory is kept). */
cudaError_t simgpu_module_unload(struct simgpu_module *m);
/* The live module `h` points to, else NULL. */
struct simgpu_module *simgpu_module_lookup(const void *h);
/* The kernel `name` of module m: cudaSuccess, or cudaErrorSymbolNotFound.  A module whose
 * kernel names could not be read (compressed entries only) makes a handle for any name,
 * saying so once. */
cudaError_t simgpu_module_kernel(struct simgpu_module *m, const char *name,
                                 struct simgpu_kernel **out);
/* Number of kernels of m, and the i-th (NULL past the end). */
int simgpu_module_kernel_count(const struct simgpu_module *m);
struct simgpu_kernel *simgpu_module_kernel_at(const struct simgpu_module *m, int i);
/* Registers host stub `stub` as kernel `name` of the registered module m (nvcc's
 * __cudaRegisterFunction); the name becomes the stub's name in the kernel registry. */
cudaError_t simgpu_module_register_function(struct simgpu_module *m, const void *stub,
                                            const char *name);
/* The live kernel handle `h` is, else NULL (h may be any pointer: never dereferenced
 * unless it is a handle). */
struct simgpu_kernel *simgpu_kernel_handle(const void *h);
/* The kernel registered for host stub `stub`, else NULL. */
struct simgpu_kernel *simgpu_kernel_of_stub(const void *stub);
/* Fills *info for k (read from its module's image the first time). */
void simgpu_kernel_info(struct simgpu_kernel *k, struct simgpu_kernel_info *info);
/* The dynamic shared memory a block of k may use: what cudaFuncSetAttribute set, else
 * 48 KiB less its static shared memory. */
int simgpu_kernel_max_dyn_shmem(const struct simgpu_kernel *k,
                                const struct simgpu_kernel_info *info);
/* Resident blocks per SM of a kernel with figures `info` at `block` threads and `dyn` bytes
 * of dynamic shared memory (cudaOccupancyMaxActiveBlocksPerMultiprocessor's answer). */
int simgpu_kernel_occupancy(const struct simgpu_kernel_info *info, int block, size_t dyn);
/* What cudaFuncGetAttributes reports for k. */
void simgpu_kernel_attrs(struct simgpu_kernel *k, struct cudaFuncAttributes *attr);
/* Resolves what a runtime call names as a kernel (a host stub, a cudaKernel_t or a
 * registered function pointer) to a handle, else NULL. */
struct simgpu_kernel *simgpu_kernel_resolve(const void *func);
/* 1 when func is the handle or host stub of a kernel whose module was unloaded. */
int simgpu_kernel_stale(const void *func);
/* Tells stderr once per call name that `call` is not supported by the simulated device
 * (the call then returns an error). */
void simgpu_say_unsupported(const char *call);

/* ---- API tracing (CUPTI callbacks, API records, external correlation) ----------- */
struct simgpu_api {
    CUpti_CallbackDomain domain;
    CUpti_CallbackId cbid;
    const char *name;
    const void *params;
    const char *symbol;
    uint32_t corr;
    uint32_t saved_corr;
    uint64_t start_ns;
    uint64_t corr_data;
};

/* Opens an API call: assigns a correlation id (made current for the thread so
 * operations it enqueues carry it), runs the subscriber's ENTER callback. */
void simgpu_api_enter(struct simgpu_api *a, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                      const char *name, const void *params, const char *symbol);

/* Closes an API call: EXIT callback with `*ret` (a cudaError_t or CUresult), API
 * activity record, external correlation record; restores the previous id. */
void simgpu_api_exit(struct simgpu_api *a, int *ret);

/* The calling thread's current correlation id (0 outside API calls). */
uint32_t simgpu_current_corr(void);

/* ---- CUPTI activity (cupti_core.c) ------------------------------------------------- */
/* 1 when records of `kind` are being collected. */
int simgpu_cupti_enabled(CUpti_ActivityKind kind);
/* Stages one record (copied) for delivery once CLOCK_MONOTONIC reaches due_ns (0: at
 * the next delivery; a device op's end: after the op ran, as real CUPTI completes its
 * record); counts a drop when the stage is full. */
void simgpu_cupti_emit(const void *record, size_t size, uint64_t due_ns);
/* Records for the device side of an op that just ran on `s` in [start, end]. */
void simgpu_cupti_op_done(const struct simgpu_op *op, const struct simgpu_stream *s,
                          uint64_t start_ns, uint64_t end_ns);
/* Host synchronisation record (CUPTI_ACTIVITY_KIND_SYNCHRONIZATION). */
void simgpu_cupti_sync(CUpti_ActivitySynchronizationType type, uint64_t start_ns, uint64_t end_ns,
                       const struct simgpu_stream *s, const struct simgpu_event *ev,
                       cudaError_t rc);
/* Memory record (CUPTI_ACTIVITY_KIND_MEMORY2). */
void simgpu_cupti_memory(int alloc, const void *p, size_t bytes, int memkind,
                         const struct simgpu_stream *s);

/* CUPTI front-end state used by libcupti.so.13 (cupti_core.c): each function
 * implements the cupti* call of the same meaning and returns what CUPTI
 * documents for it; simgpu_cupti_dropped_take returns and resets the count of
 * dropped records; simgpu_cupti_record_size gives the size of the record struct
 * of a kind (0 for kinds not produced). */
CUptiResult simgpu_cupti_activity_enable(CUpti_ActivityKind kind, int on);
CUptiResult simgpu_cupti_register(CUpti_BuffersCallbackRequestFunc req,
                                  CUpti_BuffersCallbackCompleteFunc done);
CUptiResult simgpu_cupti_flush(uint32_t flag);
/* The runtime's teardown at exit (SIMGPU_TEARDOWN_AT_EXIT=1, registered when the first
 * device is set up, as the CUDA runtime registers its own): each context's
 * CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING callback, then CUPTI delivers nothing more
 * (what was not flushed is lost). */
void simgpu_cupti_teardown(void);
CUptiResult simgpu_cupti_flush_period(uint32_t ms);
size_t simgpu_cupti_dropped_take(void);
size_t simgpu_cupti_record_size(CUpti_ActivityKind kind);
CUptiResult simgpu_cupti_subscribe(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc cb,
                                   void *userdata);
CUptiResult simgpu_cupti_unsubscribe(CUpti_SubscriberHandle sub);
CUptiResult simgpu_cupti_enable_callback(uint32_t on, CUpti_SubscriberHandle sub,
                                         CUpti_CallbackDomain domain, CUpti_CallbackId cbid);
CUptiResult simgpu_cupti_enable_domain(uint32_t on, CUpti_SubscriberHandle sub,
                                       CUpti_CallbackDomain domain);
CUptiResult simgpu_cupti_get_callback_state(uint32_t *on, CUpti_SubscriberHandle sub,
                                            CUpti_CallbackDomain domain, CUpti_CallbackId cbid);
CUptiResult simgpu_cupti_push_external(CUpti_ExternalCorrelationKind kind, uint64_t id);
CUptiResult simgpu_cupti_pop_external(CUpti_ExternalCorrelationKind kind, uint64_t *id);
CUptiResult simgpu_cupti_latency_timestamps(int on);
int simgpu_cupti_latency_on(void);
CUptiResult simgpu_cupti_thread_id_type(int set, CUpti_ActivityThreadIdType *type);
/* cuptiActivityEnableRuntimeApi / cuptiActivityEnableDriverApi: API records of one cbid on
 * or off whatever the kind's switch says. */
CUptiResult simgpu_cupti_api_enable(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, int on);
/* cuptiActivityRegisterTimestampCallback (NULL: CLOCK_MONOTONIC again); simgpu_cupti_ts maps
 * a CLOCK_MONOTONIC time onto the client's clock for the records. */
CUptiResult simgpu_cupti_timestamp_callback(CUpti_TimestampCallbackFunc cb);
uint64_t simgpu_cupti_ts(uint64_t ns);

/* The fake CUcontext of device `dev` (NULL when out of range). */
CUcontext simgpu_context(int dev);

/* Device properties of the simulated device (an H100-like part; world physics: the
 * profile's figures). */
void simgpu_device_props(struct cudaDeviceProp *p, int dev);
/* Value of one device attribute; returns cudaErrorInvalidValue for unknown ones. */
cudaError_t simgpu_device_attr(int *value, enum cudaDeviceAttr attr, int dev);

/* ---- the core's own state and helpers, shared by its files (core.c, core_graph.c,
 * core_event.c, core_mem.c) and hidden from libsimgpu's exports ------------------------- */
#define SIMGPU_HIDDEN __attribute__((visibility("hidden")))

struct simgpu_device;

struct simgpu_stream {
    uint32_t magic;
    struct simgpu_device *dev;
    uint32_t id;
    unsigned flags;
    int priority;
    int is_legacy;
    int destroyed; /* written atomically: stream_live reads it without g_lock */
    int worker_started;
    pthread_t worker; /* the worker thread, while worker_started */
    pid_t worker_pid; /* the process that started it */
    /* The worker was woken at a lower priority (SCHED_BATCH: it does not preempt the
     * thread that woke it), which it undoes once it runs (stream_worker). */
    int worker_batch;
    pthread_cond_t work_cv; /* the worker waits here for an op (or the destruction) */
    pthread_cond_t done_cv; /* waiters for done_seq >= their target */
    uint64_t wake_seq;      /* smallest target of done_cv's waiters; UINT64_MAX: none */
    struct simgpu_op *head, *tail;
    uint64_t tail_seq;                  /* last op enqueued */
    uint64_t done_seq;                  /* last op completed */
    uint64_t fixed_seq;                 /* last op run: in flight or completed */
    uint64_t last_end;                  /* device end time of the last op run */
    uint64_t done_end[SIMGPU_END_RING]; /* ends of the last ops completed, by seq (an op
                                         * in flight has its own: run_end) */
    /* The ops in flight, oldest first (linked by next): run (times fixed, bytes moved,
     * CUPTI records staged) but not completed, so that no thread need wake at each one's
     * end: stream_settle_locked completes those whose end is reached when someone looks
     * (the worker at the next op, a waiter, a query).  Queued kernels, copies, memsets and
     * event operations run ahead of the device clock this way, each from the end of the
     * one before (a graph launch's nodes), with no sleep to each end.  NULL when none. */
    struct simgpu_op *inflight, *inflight_tail;
    /* A thread other than the worker runs inflight_tail (g_lock released: its end is not
     * known yet, run_end UINT64_MAX) or expands the graph launch at the head: nobody
     * completes the tail or runs an op of s meanwhile. */
    int staging;
    int staging_wait; /* a thread (the worker, a waiter) waits for the staging to end */
    /* The last op enqueued on an empty queue came while an op was in flight (the device
     * behind the host): the worker then waits for work only until the in-flight op's
     * end (worker_timed while it does), so that an op enqueued meanwhile needs no
     * wake-up of its own; else it waits for a signal, and an op in flight wakes nobody. */
    int device_bound, worker_timed;
    /* The worker holds the head op outside g_lock (from taking it until it is done): no
     * other thread may run it meanwhile (run_inline_locked). */
    int worker_busy;
    struct simgpu_graph *capture; /* graph being captured into, or NULL */
    int capture_slot;
    struct simgpu_stream *next_all;
};

struct simgpu_event {
    uint32_t magic;
    uint32_t id;
    unsigned flags;
    int destroyed;
    int pending;                    /* record ops not yet run */
    struct simgpu_stream *stream;   /* stream of the last record, NULL if none */
    uint64_t seq;                   /* op of the last record */
    uint64_t time_ns;               /* device time of the last record */
    struct simgpu_graph *cap_graph; /* recorded during a capture */
    int cap_index;
    struct simgpu_event *next_all;
};

struct simgpu_device {
    int index;
    int inited;         /* set (release) last: lock-free readers then see legacy */
    cudaError_t sticky; /* only ever set (atomically); read without g_lock at launch */
    struct simgpu_stream *legacy;
    struct simgpu_stream *streams; /* all, including the legacy stream */
    uint32_t next_stream_id;
    size_t mem_in_use, mem_peak;
    atomic_int running_kernels;
};

struct simgpu_graph {
    uint32_t magic;
    uint32_t id;
    struct simgpu_op *head, *tail;
    int nops;
    int nslots;  /* streams that took part: slot 0 is the origin */
    int nevents; /* events recorded inside the capture */
    int capturing;
    int execs; /* instantiations alive: the graph outlives cudaGraphDestroy */
    int destroyed;
    struct simgpu_stream *origin;
    struct simgpu_graph_hold *holds; /* references the graph holds (user objects) */
};

/* A reference a graph holds until it is freed (cudaGraphRetainUserObject): release(obj,
 * count) runs then. */
struct simgpu_graph_hold {
    void (*release)(void *obj, unsigned count);
    void *obj;
    unsigned count;
    struct simgpu_graph_hold *next;
};

/* One global mutex guards all device state (stream wake-ups: struct simgpu_stream). */
extern pthread_mutex_t g_lock SIMGPU_HIDDEN;
extern struct simgpu_device g_dev[SIMGPU_MAX_DEVICES] SIMGPU_HIDDEN;
extern struct simgpu_event *g_events SIMGPU_HIDDEN; /* all events */
extern __thread int t_dev SIMGPU_HIDDEN;            /* the thread's current device */

/* Returns device `i`, initialised; caller holds g_lock. */
SIMGPU_HIDDEN struct simgpu_device *device_locked(int i);
SIMGPU_HIDDEN void op_free(struct simgpu_op *op);
/* Names func in the kernel registry (no duration) unless the job registered it. */
SIMGPU_HIDDEN void simgpu_kernel_name_set(const void *func, const char *name);
/* Adds a dependency on (s, seq) to op; returns 0 or -1 when out of memory. */
SIMGPU_HIDDEN int op_add_dep(struct simgpu_op *op, struct simgpu_stream *s, uint64_t seq);
SIMGPU_HIDDEN void event_maybe_free_locked(struct simgpu_event *ev);
/* Appends op to s at host time now and signals its worker, which runs it once the caller
 * releases g_lock (see core.c); caller holds g_lock. */
SIMGPU_HIDDEN cudaError_t enqueue_at_locked(struct simgpu_stream *s, struct simgpu_op *op,
                                            uint64_t now);
/* Appends op to s and wakes the worker; caller holds g_lock and checked capture. */
SIMGPU_HIDDEN cudaError_t enqueue_locked(struct simgpu_stream *s, struct simgpu_op *op);
/* Appends op to s as enqueued at host time now (starting the worker if needed); sets
 * *wake when the worker waits for work and must be signalled (s->work_cv), which the
 * caller does, before or after releasing g_lock, unless launch_inline_locked ran op.
 * Caller holds g_lock and checked capture and the sticky error.  On failure op is not
 * enqueued and still the caller's. */
SIMGPU_HIDDEN cudaError_t enqueue_nowake_locked(struct simgpu_stream *s, struct simgpu_op *op,
                                                uint64_t now, int *wake);
/* Runs op, just enqueued on s with nothing queued before it (enqueue_nowake_locked set
 * *wake), on the calling thread when it is a kernel, a memset of
 * SIMGPU_INLINE_MEMSET_BYTES at most or an event operation onto a stream with no op in
 * flight, and it may run now (core.c:
 * run_inline_locked: no dependency pending, nobody else at s's head); its times are
 * those the worker would give it.  Returns 1 when it did (the worker need not be woken;
 * g_lock was released meanwhile, and op may be completed and freed by another thread
 * since), else 0.  Caller holds g_lock. */
SIMGPU_HIDDEN int launch_inline_locked(struct simgpu_stream *s, struct simgpu_op *op);
/* Appends op to s at host time now as the first of nseq (at least 1) operations: the
 * stream's sequence numbers op->seq .. op->seq + nseq - 1 are op's, for the operations it
 * becomes (a graph launch); sets *wake when s's worker must be signalled, which the caller
 * does after releasing g_lock.  Caller holds g_lock and checked capture and the sticky
 * error; on failure op is still the caller's. */
SIMGPU_HIDDEN cudaError_t enqueue_span_locked(struct simgpu_stream *s, struct simgpu_op *op,
                                              uint64_t nseq, int *wake);
/* Replaces op, a graph launch at the head of s whose dependencies have run, by the
 * graph's operations: those of s in its place (its sequence numbers), those of the
 * graph's other streams on them.  Caller holds g_lock and the head (s->worker_busy or
 * s->staging, so that nobody else runs it); g_lock is released while they are built. */
SIMGPU_HIDDEN void graph_expand_locked(struct simgpu_stream *s, struct simgpu_op *op);
/* Appends op to the graph g captures, from capture slot `slot`; caller holds g_lock. */
SIMGPU_HIDDEN void graph_append_locked(struct simgpu_graph *g, struct simgpu_op *op, int slot);
/* Waits until s->done_seq >= target; caller holds g_lock. */
SIMGPU_HIDDEN void wait_done_locked(struct simgpu_stream *s, uint64_t target);
/* Completes s's ops in flight whose end is reached at `now`; returns 1 when ops are still
 * in flight, else 0.  Caller holds g_lock. */
SIMGPU_HIDDEN int stream_settle_locked(struct simgpu_stream *s, uint64_t now);

/* ---- libnccl.so.2's own types and helpers, shared by its files (nccl.c, nccl_coll.c,
 * which define SIMGPU_NCCL_INTERNAL and include nccl.h first) and hidden from its
 * exports --------------------------------------------------------------------------------- */
#ifdef SIMGPU_NCCL_INTERNAL
#define SLOTS 64
#define HOST_SLOTS 4
#define P2P_SLOTS 16
#define MAX_RANKS 256

/* What the ranks must agree on for an operation to run: a collective's count, type,
 * operation (-1: PreMulSum) and root; a send and receive's bytes (in count, the rest 0). */
struct rdv_desc {
    uint64_t count;
    int32_t coll, dtype, op, root;
};

struct rdv_slot {
    uint64_t seq; /* instance + 1; 0 = never used */
    uint32_t arrived;
    uint32_t stretch_ppm; /* world physics: the largest contention stretch of the ranks */
    uint64_t max_arrival;
    uint64_t bytes;
    struct rdv_desc desc; /* the first arrival's */
    uint32_t disagree;    /* a later arrival described the operation otherwise */
    uint32_t pad;
};

struct host_slot {
    uint64_t seq;
    uint32_t arrived;
    uint32_t pad;
    int64_t payload[MAX_RANKS][2];
};

/* Data movement (nccl_data.c), for the operations whose largest buffer is at most
 * `data_max` bytes.  A collective moves its data through the lane: each rank
 * has a staging region of `stage` bytes in the segment; a collective runs in rounds (each
 * rank stages its chunk, barrier, each rank reads what it needs, barrier).  The lane serves
 * one collective at a time, in sequence order.  A (sender, receiver) pair has a channel of
 * `chunk` bytes that one send/receive pair at a time fills and drains.  Lane and channels
 * are taken by whichever operation comes first when they are free (not strictly in
 * sequence order: a collective captured into a graph takes a sequence number that only its
 * replays use) and matched by sequence number. */
struct data_lane {
    uint64_t busy;  /* seq + 1 of the collective using the lane, 0 when free */
    uint64_t gen;   /* barrier generation */
    uint32_t count; /* ranks in the current barrier */
    uint32_t pad;
};

struct p2p_chan {
    uint64_t tag;   /* seq + 1 of the transfer using the channel, 0 when free */
    uint64_t total; /* its bytes, as the sender says */
    uint32_t full;  /* a chunk waits for the receiver */
    uint32_t len;   /* its bytes */
};

struct shm_hdr {
    uint32_t magic;
    atomic_int ready;
    uint32_t nranks;
    int32_t broken;    /* a rank aborted or died */
    uint64_t stage;    /* bytes of a rank's staging region */
    uint64_t chunk;    /* bytes of a channel's buffer */
    uint64_t data_max; /* largest buffer of an operation that moves its data */
    uint64_t data_off; /* offset of the channels' states; stages and buffers follow */
    struct data_lane lane;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint32_t joined;
    int32_t pids[MAX_RANKS];
    struct rdv_slot coll[SLOTS];
    struct host_slot host[HOST_SLOTS];
    struct rdv_slot p2p[]; /* nranks * nranks * P2P_SLOTS */
};

struct nccl_id {
    uint32_t magic;
    uint32_t pad;
    uint64_t token;
};

struct ncclComm {
    uint32_t magic;
    int rank, nranks, dev;
    uint64_t token;
    struct shm_hdr *shm;
    size_t shm_bytes;
    uint64_t coll_seq, host_seq;
    uint64_t *send_seq, *recv_seq;
    uint32_t splits;
    _Atomic int async_err;
    char last_error[160];
};

/* The data of one part of a launch: what nccl_data.c moves. */
enum part_kind { PART_COLL, PART_SEND, PART_RECV, PART_COPY };

struct part_data {
    const void *sbuf;
    void *rbuf;
    size_t count; /* elements: of the send buffer (all-gather: sendcount, reduce-scatter:
                     recvcount, send/recv/copy: the message) */
    ncclDataType_t dtype;
    ncclRedOp_t op; /* ncclSum..ncclAvg, or a PreMulSum op (resolved at enqueue) */
    int root;
    int premul;              /* 1: multiply each input by scalar (PreMulSum) */
    const void *scalar_dev;  /* a device-resident scalar, read when the collective runs */
    unsigned char scalar[8]; /* a host-immediate scalar, of dtype */
};

struct part {
    enum part_kind kind;
    int coll;      /* enum simgpu_coll (world physics) */
    double factor; /* ring factor of the collective (simple physics) */
    uint64_t bytes;
    uint64_t seq; /* collective seq or p2p seq (set at enqueue) */
    int peer;
    int specialized; /* its kernel is specialised for it (nccl_coll.c part_kernel) */
    struct part_data d;
};

/* Bytes of the data areas of a segment for nranks (staging regions and channels), and
 * sets the stage and chunk sizes in *stage and *chunk (SIMGPU_NCCL_STAGE_KB) and the
 * largest buffer that moves its data in *max (SIMGPU_NCCL_DATA, SIMGPU_NCCL_DATA_KB); 0
 * and no areas under SIMGPU_NCCL_DATA=0. */
SIMGPU_HIDDEN size_t data_bytes(int nranks, uint64_t *stage, uint64_t *chunk, uint64_t *max);
/* Moves the data of parts [0, n) of a launch of `rank` over segment h, after their
 * rendezvous (where the ranks agreed on them): collectives in order through the lane, then
 * the point-to-point parts and copies together; parts with a buffer over h->data_max move
 * nothing.  Returns 0, or -1 with *why set (a peer died, the comm was broken, the deadline
 * passed). */
SIMGPU_HIDDEN int data_run(struct shm_hdr *h, int rank, struct part *parts, int n,
                           uint64_t deadline, const char **why);
/* Adds to the thread's pending operations (or launches, outside a group) a copy of count
 * elements of t from sbuf to rbuf on stream, as part of an operation of comm that meets no
 * peer and takes no time (the own block of an all-to-all or gather; nccl_coll.c). */
SIMGPU_HIDDEN ncclResult_t local_copy(const void *sbuf, void *rbuf, size_t count, ncclDataType_t t,
                                      ncclComm_t comm, cudaStream_t stream);
/* The PreMulSum op `op` of c: fills d's premul, scalar and scalar_dev.  Returns 0, or -1
 * when op is not a live PreMulSum op of c (nccl_api.c). */
SIMGPU_HIDDEN int premul_lookup(ncclRedOp_t op, const struct ncclComm *c, struct part_data *d);

/* The model options (SIMGPU_NCCL_LAT_US, _BW_GBPS, _TIMEOUT_S); valid after opts(). */
extern double g_lat_ns SIMGPU_HIDDEN, g_bw_gbps SIMGPU_HIDDEN, g_timeout_ns SIMGPU_HIDDEN;
/* Reads the model options once and initialises the device. */
SIMGPU_HIDDEN void opts(void);
/* Push / pop a range in the "NCCL" NVTX domain, as real NCCL marks its API calls. */
SIMGPU_HIDDEN void nvtx_push(const char *name);
SIMGPU_HIDDEN void nvtx_pop(void);
/* Locks the segment's robust mutex; a holder that died marks the comm broken. */
SIMGPU_HIDDEN void shm_lock(struct shm_hdr *h);
/* Waits on the segment's condition variable for at most 20 ms (caller holds mu);
 * returns nonzero when waiting must stop: comm broken, peer dead or timed out. */
SIMGPU_HIDDEN int wait_tick(struct shm_hdr *h, uint64_t deadline);
/* Keeps why (when not NULL) as c's last error (when c is not NULL); returns rc. */
SIMGPU_HIDDEN ncclResult_t set_err(struct ncclComm *c, ncclResult_t rc, const char *why);
/* Nonzero when c is a live communicator. */
SIMGPU_HIDDEN int comm_ok(const struct ncclComm *c);
/* Bytes of one element of type t. */
SIMGPU_HIDDEN size_t type_size(ncclDataType_t t);

/* Weak aliases, as in the real library: a tool may interpose nccl* and call pnccl*. */
#define NCCL_ALIAS(name) __typeof__(p##name) name __attribute__((weak, alias("p" #name)))
#endif /* SIMGPU_NCCL_INTERNAL */

/* ---- libcudart.so.13's own helpers, shared by its files (cudart.c, cudart_launch.c,
 * which define SIMGPU_CUDART_INTERNAL) and hidden from its exports ------------------------ */
#ifdef SIMGPU_CUDART_INTERNAL
/* Closes the API scope a (CUPTI exit callback, API record) and keeps rc as the thread's
 * last error (cudaGetLastError) unless it is cudaSuccess or cudaErrorNotReady; returns rc. */
SIMGPU_HIDDEN cudaError_t rt_exit(struct simgpu_api *a, cudaError_t rc);

/* Open an entry point's API scope (api__) with its parameter struct (p__); RT_EXIT closes
 * it and returns. */
#define RT_ENTER_SYM(fn, ver, sym, ...)                                                            \
    fn##_##ver##_params p__ = {__VA_ARGS__};                                                       \
    struct simgpu_api api__;                                                                       \
    simgpu_api_enter(&api__, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_##fn##_##ver,   \
                     #fn, &p__, sym)
#define RT_ENTER(fn, ver, ...) RT_ENTER_SYM(fn, ver, NULL, __VA_ARGS__)
#define RT_ENTER0(fn, ver)                                                                         \
    struct simgpu_api api__;                                                                       \
    simgpu_api_enter(&api__, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_##fn##_##ver,   \
                     #fn, NULL, NULL)
#define RT_EXIT(rc) return rt_exit(&api__, (rc))

/* Enqueues a kernel launch named `name` running `dur` ns with arguments `args` (may be NULL)
 * (cudart_launch.c): checks the configuration and the stream, pays the launch's host cost. */
SIMGPU_HIDDEN cudaError_t rt_launch(const void *func, const char *name, uint64_t dur, dim3 grid,
                                    dim3 block, size_t shmem, cudaStream_t h, int ptds,
                                    void **args);
/* Whether a block of `block` threads with `shmem` bytes of dynamic shared memory fits the
 * kernel func names (cudart_module.c): cudaErrorLaunchOutOfResources past its threads per
 * block (registers, __launch_bounds__), cudaErrorInvalidValue past its dynamic shared
 * memory limit, cudaErrorInvalidResourceHandle for the kernel of an unloaded module;
 * cudaSuccess for what is no known kernel. */
SIMGPU_HIDDEN cudaError_t rt_kernel_fits(const void *func, dim3 block, size_t shmem);
/* A copy as cudaMemcpy[Async] makes it (cudart.c): direction checked, the host cost paid,
 * enqueued on h (synchronised unless async). */
SIMGPU_HIDDEN cudaError_t rt_memcpy(void *dst, const void *src, size_t count,
                                    enum cudaMemcpyKind kind, cudaStream_t h, int ptds, int async);
/* cudaOccupancyMaxActiveBlocksPerMultiprocessor without its API scope (cudart_module.c). */
SIMGPU_HIDDEN cudaError_t rt_occupancy(int *numBlocks, const void *func, int blockSize, size_t dyn);
/* Records a module variable nvcc's host code registers (cudart_symbol.c): host shadow
 * `host`, device name, size; `managed` holds the memory of a __managed__ one. */
SIMGPU_HIDDEN cudaError_t rt_symbol_add(const void *host, const char *name, size_t size,
                                        void *managed);
/* Name and duration of what a runtime launch names (cudart_module.c): a registered host
 * stub or a cudaKernel_t by their kernel's name, any other pointer as the kernel registry
 * says (simgpu_kernel_lookup). */
SIMGPU_HIDDEN void rt_kernel_lookup(const void *func, const char **name, uint64_t *dur);
#endif /* SIMGPU_CUDART_INTERNAL */

#endif /* SIMGPU_INTERNAL_H */
