/*
 * collector.h: internals of libdpro-collector, the LD_PRELOAD library that records what a
 * job does with CUDA, NCCL, CUPTI and NVTX. Nothing here is exported from the library:
 * every symbol is hidden (-fvisibility=hidden, collector.map) except the hooks themselves.
 *
 * Data path. A hook runs on the application's thread: it takes the thread's state
 * (coll_enter), stamps the clock, calls the real function, and writes one fixed-size record
 * (struct coll_rec) into the thread's single-producer ring (coll_rec_claim/commit). No
 * lock, no allocation, no system call besides the vDSO clock. When the ring is full the
 * record is dropped and counted. The background thread (writer.c) drains every ring, turns
 * records into dpro_event (interning names, resolving kernel names, pairing NVTX ranges),
 * appends them to the libdprotrace writer and flushes it every DPRO_FLUSH_MS.
 *
 * A record may be followed by continuation slots (raw bytes): the text of an NVTX marker or
 * the frames of a call stack. rec.ncont says how many.
 *
 * Prefix: coll_ for the core, cupti_ for CUPTI (cupti.c), nvtxi_ for the NVTX injection,
 * stk_ for call stacks. Hooks carry the name of the function they interpose.
 */
#ifndef DPRO_COLLECTOR_H
#define DPRO_COLLECTOR_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "dprotrace.h"

#define COLL_HIDDEN __attribute__((visibility("hidden")))
#define COLL_EXPORT __attribute__((visibility("default")))
#define coll_likely(x) __builtin_expect(!!(x), 1)
#define coll_unlikely(x) __builtin_expect(!!(x), 0)

/* ---- rows besides events -------------------------------------------------------------
 * Every write of a meta, device, stream, thread, communicator, stack or drop row is checked:
 * a failed one is counted (the trace's meta writer_errors), never silent. The macros make
 * every call site in the collector count, so none can forget. */
COLL_HIDDEN extern _Atomic uint64_t coll_writer_errors;

/* Counts a failed row write; returns rc. */
static inline int
coll_counted(int rc)
{
    if (coll_unlikely(rc != DPRO_OK))
        atomic_fetch_add_explicit(&coll_writer_errors, 1, memory_order_relaxed);
    return rc;
}

#define dpro_writer_set_meta(...) coll_counted((dpro_writer_set_meta)(__VA_ARGS__))
#define dpro_writer_set_meta_int(...) coll_counted((dpro_writer_set_meta_int)(__VA_ARGS__))
#define dpro_writer_add_device(...) coll_counted((dpro_writer_add_device)(__VA_ARGS__))
#define dpro_writer_add_stream(...) coll_counted((dpro_writer_add_stream)(__VA_ARGS__))
#define dpro_writer_add_thread(...) coll_counted((dpro_writer_add_thread)(__VA_ARGS__))
#define dpro_writer_add_comm(...) coll_counted((dpro_writer_add_comm)(__VA_ARGS__))
#define dpro_writer_add_stack(...) coll_counted((dpro_writer_add_stack)(__VA_ARGS__))
#define dpro_writer_add_drops(...) coll_counted((dpro_writer_add_drops)(__VA_ARGS__))

/* ---- the APIs we record ------------------------------------------------------------------
 * X(id, kind, domain): kind is the dpro_kind of the event the record becomes (API events of
 * failed allocations aside), domain the dpro_api_domain. The name of the event is the
 * symbol name, "id" with the COLL_API_ prefix removed. */
#define COLL_API_LIST(X)                                                                           \
    X(cudaLaunchKernel, DPRO_KIND_API, DPRO_API_RUNTIME)                                           \
    X(cudaLaunchKernel_ptsz, DPRO_KIND_API, DPRO_API_RUNTIME)                                      \
    X(cudaLaunchKernelExC, DPRO_KIND_API, DPRO_API_RUNTIME)                                        \
    X(cudaLaunchKernelExC_ptsz, DPRO_KIND_API, DPRO_API_RUNTIME)                                   \
    X(__cudaLaunchKernel, DPRO_KIND_API, DPRO_API_RUNTIME)                                         \
    X(__cudaLaunchKernel_ptsz, DPRO_KIND_API, DPRO_API_RUNTIME)                                    \
    X(cudaLaunchCooperativeKernel, DPRO_KIND_API, DPRO_API_RUNTIME)                                \
    X(cudaLaunchCooperativeKernel_ptsz, DPRO_KIND_API, DPRO_API_RUNTIME)                           \
    X(cudaGraphLaunch, DPRO_KIND_API, DPRO_API_RUNTIME)                                            \
    X(cudaGraphLaunch_ptsz, DPRO_KIND_API, DPRO_API_RUNTIME)                                       \
    X(cudaMemcpy, DPRO_KIND_API, DPRO_API_RUNTIME)                                                 \
    X(cudaMemcpy_ptds, DPRO_KIND_API, DPRO_API_RUNTIME)                                            \
    X(cudaMemcpyAsync, DPRO_KIND_API, DPRO_API_RUNTIME)                                            \
    X(cudaMemcpyAsync_ptsz, DPRO_KIND_API, DPRO_API_RUNTIME)                                       \
    X(cudaMemcpy2D, DPRO_KIND_API, DPRO_API_RUNTIME)                                               \
    X(cudaMemcpy2DAsync, DPRO_KIND_API, DPRO_API_RUNTIME)                                          \
    X(cudaMemcpy2DAsync_ptsz, DPRO_KIND_API, DPRO_API_RUNTIME)                                     \
    X(cudaMemcpyPeer, DPRO_KIND_API, DPRO_API_RUNTIME)                                             \
    X(cudaMemcpyPeerAsync, DPRO_KIND_API, DPRO_API_RUNTIME)                                        \
    X(cudaMemset, DPRO_KIND_API, DPRO_API_RUNTIME)                                                 \
    X(cudaMemset_ptds, DPRO_KIND_API, DPRO_API_RUNTIME)                                            \
    X(cudaMemsetAsync, DPRO_KIND_API, DPRO_API_RUNTIME)                                            \
    X(cudaMemsetAsync_ptsz, DPRO_KIND_API, DPRO_API_RUNTIME)                                       \
    X(cudaMalloc, DPRO_KIND_MEMORY, DPRO_API_RUNTIME)                                              \
    X(cudaMallocHost, DPRO_KIND_MEMORY, DPRO_API_RUNTIME)                                          \
    X(cudaHostAlloc, DPRO_KIND_MEMORY, DPRO_API_RUNTIME)                                           \
    X(cudaMallocManaged, DPRO_KIND_MEMORY, DPRO_API_RUNTIME)                                       \
    X(cudaMallocAsync, DPRO_KIND_MEMORY, DPRO_API_RUNTIME)                                         \
    X(cudaMallocAsync_ptsz, DPRO_KIND_MEMORY, DPRO_API_RUNTIME)                                    \
    X(cudaFree, DPRO_KIND_MEMORY, DPRO_API_RUNTIME)                                                \
    X(cudaFreeHost, DPRO_KIND_MEMORY, DPRO_API_RUNTIME)                                            \
    X(cudaFreeAsync, DPRO_KIND_MEMORY, DPRO_API_RUNTIME)                                           \
    X(cudaFreeAsync_ptsz, DPRO_KIND_MEMORY, DPRO_API_RUNTIME)                                      \
    X(cudaStreamCreate, DPRO_KIND_API, DPRO_API_RUNTIME)                                           \
    X(cudaStreamCreateWithFlags, DPRO_KIND_API, DPRO_API_RUNTIME)                                  \
    X(cudaStreamCreateWithPriority, DPRO_KIND_API, DPRO_API_RUNTIME)                               \
    X(cudaStreamDestroy, DPRO_KIND_API, DPRO_API_RUNTIME)                                          \
    X(cudaStreamSynchronize, DPRO_KIND_API, DPRO_API_RUNTIME)                                      \
    X(cudaStreamSynchronize_ptsz, DPRO_KIND_API, DPRO_API_RUNTIME)                                 \
    X(cudaStreamQuery, DPRO_KIND_API, DPRO_API_RUNTIME)                                            \
    X(cudaStreamQuery_ptsz, DPRO_KIND_API, DPRO_API_RUNTIME)                                       \
    X(cudaStreamWaitEvent, DPRO_KIND_API, DPRO_API_RUNTIME)                                        \
    X(cudaStreamWaitEvent_ptsz, DPRO_KIND_API, DPRO_API_RUNTIME)                                   \
    X(cudaDeviceSynchronize, DPRO_KIND_API, DPRO_API_RUNTIME)                                      \
    X(cudaEventCreate, DPRO_KIND_API, DPRO_API_RUNTIME)                                            \
    X(cudaEventCreateWithFlags, DPRO_KIND_API, DPRO_API_RUNTIME)                                   \
    X(cudaEventDestroy, DPRO_KIND_API, DPRO_API_RUNTIME)                                           \
    X(cudaEventRecord, DPRO_KIND_API, DPRO_API_RUNTIME)                                            \
    X(cudaEventRecord_ptsz, DPRO_KIND_API, DPRO_API_RUNTIME)                                       \
    X(cudaEventRecordWithFlags, DPRO_KIND_API, DPRO_API_RUNTIME)                                   \
    X(cudaEventRecordWithFlags_ptsz, DPRO_KIND_API, DPRO_API_RUNTIME)                              \
    X(cudaEventSynchronize, DPRO_KIND_API, DPRO_API_RUNTIME)                                       \
    X(cudaEventQuery, DPRO_KIND_API, DPRO_API_RUNTIME)                                             \
    X(cuLaunchKernel, DPRO_KIND_API, DPRO_API_DRIVER)                                              \
    X(cuLaunchKernel_ptsz, DPRO_KIND_API, DPRO_API_DRIVER)                                         \
    X(cuLaunchKernelEx, DPRO_KIND_API, DPRO_API_DRIVER)                                            \
    X(cuLaunchKernelEx_ptsz, DPRO_KIND_API, DPRO_API_DRIVER)                                       \
    X(ncclCommInitRank, DPRO_KIND_API, DPRO_API_NCCL)                                              \
    X(ncclCommInitRankConfig, DPRO_KIND_API, DPRO_API_NCCL)                                        \
    X(ncclCommInitRankScalable, DPRO_KIND_API, DPRO_API_NCCL)                                      \
    X(ncclCommInitAll, DPRO_KIND_API, DPRO_API_NCCL)                                               \
    X(ncclCommSplit, DPRO_KIND_API, DPRO_API_NCCL)                                                 \
    X(ncclCommFinalize, DPRO_KIND_API, DPRO_API_NCCL)                                              \
    X(ncclCommDestroy, DPRO_KIND_API, DPRO_API_NCCL)                                               \
    X(ncclCommAbort, DPRO_KIND_API, DPRO_API_NCCL)                                                 \
    X(ncclGroupStart, DPRO_KIND_API, DPRO_API_NCCL)                                                \
    X(ncclGroupEnd, DPRO_KIND_API, DPRO_API_NCCL)                                                  \
    X(ncclGather, DPRO_KIND_API, DPRO_API_NCCL)                                                    \
    X(ncclScatter, DPRO_KIND_API, DPRO_API_NCCL)                                                   \
    X(ncclAllReduce, DPRO_KIND_COLLECTIVE, DPRO_API_NCCL)                                          \
    X(ncclBroadcast, DPRO_KIND_COLLECTIVE, DPRO_API_NCCL)                                          \
    X(ncclBcast, DPRO_KIND_COLLECTIVE, DPRO_API_NCCL)                                              \
    X(ncclReduce, DPRO_KIND_COLLECTIVE, DPRO_API_NCCL)                                             \
    X(ncclAllGather, DPRO_KIND_COLLECTIVE, DPRO_API_NCCL)                                          \
    X(ncclReduceScatter, DPRO_KIND_COLLECTIVE, DPRO_API_NCCL)                                      \
    X(ncclAlltoAll, DPRO_KIND_COLLECTIVE, DPRO_API_NCCL)                                           \
    X(ncclSend, DPRO_KIND_COLLECTIVE, DPRO_API_NCCL)                                               \
    X(ncclRecv, DPRO_KIND_COLLECTIVE, DPRO_API_NCCL)                                               \
    X(nvtxMark, DPRO_KIND_MARKER, 0)                                                               \
    X(nvtxRangePush, DPRO_KIND_MARKER, 0)                                                          \
    X(nvtxRangeStart, DPRO_KIND_MARKER, 0)                                                         \
    X(nvtxRangeEnd, DPRO_KIND_MARKER, 0)

enum coll_api {
    COLL_API_NONE = 0,
#define COLL_API_ENUM(id, kind, domain) COLL_API_##id,
    COLL_API_LIST(COLL_API_ENUM)
#undef COLL_API_ENUM
        COLL_API_COUNT
};

/* Static description of an API: its symbol name, event kind and domain. */
struct coll_api_info {
    const char *name;
    uint32_t kind;
    uint32_t domain;
};
COLL_HIDDEN extern const struct coll_api_info coll_api_table[COLL_API_COUNT];

/* ---- records -------------------------------------------------------------------------- */

/* rec.flags */
#define COLL_REC_TEXT 0x01   /* continuation slots hold text (rec.a4 = its length) */
#define COLL_REC_FRAMES 0x02 /* continuation slots hold frames (rec.a4 = their number) */
#define COLL_REC_PTSZ 0x04   /* a _ptsz/_ptds variant: stream 0 is the per-thread stream */
#define COLL_REC_HANDLE 0x08 /* launch: a0 is a cudaKernel_t, not a host function */
#define COLL_REC_CUFUNC 0x10 /* launch: a0 is a CUfunction */

/*
 * One hook call, as the hook writes it. What a0..a4 and u0..u3 hold depends on the API:
 *   launch        a0 function (host pointer, cudaKernel_t or CUfunction by flags),
 *                 a1 grid x | y<<32, a2 grid z | block x<<32, a3 block y | z<<32,
 *                 u0 dynamic shared memory
 *   graph launch  a0 cudaGraphExec_t
 *   memcpy        a0 dst, a1 src, a2 bytes, u0 cudaMemcpyKind
 *   memset        a0 dst, a2 bytes, u0 value
 *   malloc/free   a0 address, a2 bytes, u0 dpro_mem_space, u1 dpro_mem_op, u2 device
 *   stream        a0 cudaStream_t, u0 flags, u1 priority
 *   event         a0 cudaEvent_t, u0 flags
 *   NCCL comm     a0 comm handle, a1 hash, a2 parent hash, u0 rank, u1 size, u2 device
 *   collective    a0 comm hash, a1 seq, a2 count, a3 buffer, u0 dtype, u1 op, u2 peer/root,
 *                 u3 device
 *   NVTX          a0 range id, a1 domain (nvtxDomainHandle_t), a2 payload (int64),
 *                 u2 color; text in continuation slots
 */
struct coll_rec {
    uint16_t api;   /* enum coll_api */
    uint8_t ncont;  /* continuation slots that follow */
    uint8_t flags;  /* COLL_REC_* */
    int32_t result; /* return code of the real call */
    uint64_t start, end;
    uint64_t corr;   /* correlation id (CUPTI's, or our own above 2^32) */
    uint64_t stream; /* cudaStream_t as the caller passed it */
    uint64_t a0, a1, a2, a3, a4;
    uint32_t u0, u1, u2, u3;
};
_Static_assert(sizeof(struct coll_rec) == 96, "coll_rec layout");

/* Bytes a continuation slot carries. */
#define COLL_CONT_BYTES sizeof(struct coll_rec)
/* Longest NVTX text kept (longer text is cut). */
#define COLL_TEXT_MAX 255
/* Deepest call stack kept. */
#define COLL_STACK_MAX 32

/* A single-producer single-consumer ring of records, one per recording thread. */
struct coll_ring {
    _Atomic uint64_t head; /* next slot the producer writes */
    char pad0[56];
    _Atomic uint64_t tail; /* next slot the consumer reads */
    char pad1[56];
    _Atomic uint64_t dropped;  /* records dropped because the ring was full */
    uint64_t dropped_reported; /* consumer: drops already handed to the writer */
    _Atomic int dead;          /* the thread has exited; free after the last drain */
    uint32_t tid;
    int named;              /* consumer: thread row written */
    int reap;               /* consumer: dead and drained, to be unlinked and freed */
    int sched_slot;         /* consumer: 1 + its slot in threadsched.c's table, 0 not seen
                               yet, -1 not followed (table full) */
    uint64_t mask;          /* slots - 1 (slots is a power of two) */
    struct coll_ring *next; /* registry list: set before the ring is pushed at the head (under
                               coll_registry_lock); changed after only by the writer */
    struct coll_rec slots[];
};

/* Devices whose per-thread default stream a thread remembers (others are asked each time). */
#define COLL_PTDS_DEVICES 16

/* Per-thread state, created the first time a thread records. */
struct coll_thread {
    int guard; /* non-zero while inside a hook (re-entrancy) */
    uint32_t tid;
    uint32_t index;      /* process-wide thread number, for our own correlation ids */
    uint64_t head;       /* producer copy of ring->head */
    uint64_t tail_seen;  /* last ring->tail read */
    uint64_t dropped;    /* producer copy of ring->dropped */
    uint64_t own_corr;   /* our correlation counter */
    uint64_t corr_cupti; /* correlation id the CUPTI callback saw inside the real call */
    int corr_armed;      /* the CUPTI callback should catch a correlation id */
    uint32_t stack_tick; /* launches since the last sampled call stack */
    uint64_t ptds_stream[COLL_PTDS_DEVICES]; /* CUPTI ids of this thread's per-thread
                                                default streams by device (0: unknown) */
    uint32_t device;                         /* current device, as last seen by a hook */
    /* the last created stream this thread's hooks named, and its id, while no stream has
     * been destroyed since (coll_stream_gen): most calls name the stream the one before
     * named, and this spares them the map's lookup */
    uintptr_t stream_last;
    uint64_t stream_last_id;
    uint32_t stream_last_gen;
    uint64_t cb_start; /* stamp of a driver launch seen only by the CUPTI callback */
    struct coll_ring *ring;
    /* NVTX push/pop ranges of this thread */
    uint32_t nvtx_depth;
    struct {
        uint64_t start;
        uint64_t domain;
        uint32_t len;
        char text[120];
    } nvtx_stack[32];
};

/* The configuration, read once from DPRO_* variables (core.c). */
struct coll_settings {
    char output[4096];           /* DPRO_OUTPUT */
    int cuda, nccl, cupti, nvtx; /* DPRO_CUDA, DPRO_NCCL, DPRO_CUPTI, DPRO_NVTX (1: on) */
    int stacks;                  /* DPRO_STACKS */
    uint32_t stack_sample;       /* DPRO_STACK_SAMPLE: one launch in N gets a stack */
    uint32_t flush_ms;           /* DPRO_FLUSH_MS */
    uint32_t drain_ms;           /* DPRO_DRAIN_MS */
    uint32_t ring_events;        /* DPRO_RING_EVENTS (power of two) */
    int fork_follow;             /* DPRO_FORK=follow (1) or stop (0) */
    uint32_t exit_wait_ms;       /* DPRO_EXIT_WAIT_MS: the exit's wait for the writer */
    int zlib_level;              /* DPRO_ZLIB_LEVEL */
};
COLL_HIDDEN extern struct coll_settings coll_cfg;

/* Non-zero while events are recorded (cleared when the output fails, at exit, in a child
 * with DPRO_FORK=stop). Hooks read it relaxed. */
COLL_HIDDEN extern _Atomic int coll_recording;

COLL_HIDDEN extern __thread struct coll_thread *coll_tls __attribute__((tls_model("initial-exec")));

/* ---- time ---------------------------------------------------------------------------- */

/* Returns CLOCK_MONOTONIC in nanoseconds (vDSO: no system call). */
static inline uint64_t
coll_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Stamps taken on the hot path. Where CLOCK_MONOTONIC is itself the TSC (clocksource
 * "tsc", x86-64), a hook reads the TSC (rdtsc: about half the cost of clock_gettime in a
 * VM) and the background thread converts stamps to CLOCK_MONOTONIC ns with a linear map
 * re-anchored at every drain (coll_stamp_to_ns); elsewhere a stamp is coll_now(). Records
 * carry stamps; events carry nanoseconds.
 */
COLL_HIDDEN extern int coll_use_tsc;

/* Returns a stamp for a record (TSC ticks or ns, see above). */
static inline uint64_t
coll_stamp(void)
{
#if defined(__x86_64__)
    if (coll_likely(coll_use_tsc)) {
        uint32_t lo, hi;
        __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
        return ((uint64_t)hi << 32) | lo;
    }
#endif
    return coll_now();
}

/* The map from TSC stamps to CLOCK_MONOTONIC ns (clock.c): mono(stamp) = ns_a +
 * (stamp - tsc_a) * ns_per_tick. Background thread only. */
struct coll_tsc_map {
    uint64_t tsc_a, ns_a; /* latest anchor */
    uint64_t tsc_b, ns_b; /* baseline anchor (about 1 s older) */
    double ns_per_tick;   /* 0 until the first slope is measured */
};
COLL_HIDDEN extern struct coll_tsc_map coll_tsc;

/* coll_stamp_to_ns before the first slope: measures one (sleeps 2 ms), then converts. */
COLL_HIDDEN uint64_t coll_stamp_to_ns_first(uint64_t stamp);

/* Converts a record's stamp to CLOCK_MONOTONIC ns (background thread). Inline: it runs
 * twice for every record of the rings. */
static inline uint64_t
coll_stamp_to_ns(uint64_t stamp)
{
    if (!coll_use_tsc || stamp == 0)
        return stamp;
    if (coll_tsc.ns_per_tick == 0)
        return coll_stamp_to_ns_first(stamp);
    double d = ((double)(int64_t)(stamp - coll_tsc.tsc_a)) * coll_tsc.ns_per_tick;
    return (uint64_t)((int64_t)coll_tsc.ns_a + (int64_t)d);
}

/* ---- hook helpers (real.c, ring.c, maps.c)
 * ----------------------------------------------------------- */

/* Libraries a real function may live in. */
enum coll_lib { COLL_LIB_CUDART, COLL_LIB_CUDA, COLL_LIB_NCCL, COLL_LIB_COUNT };

/* Returns the real function `name` (the next definition after the collector; else the one
 * in the already loaded library of lib, found by soname, then by file name libcudart.* /
 * libcudart-* etc., for copies loaded RTLD_LOCAL, renamed ones included), resolving it
 * once into *slot; NULL if the library or the symbol is missing (remembered: a library
 * loaded later is not looked for again). Never loads a library the job has not loaded. */
COLL_HIDDEN void *coll_real_resolve(enum coll_lib lib, const char *name, void **slot);

/* What *slot holds for a function found missing. */
#define COLL_REAL_MISSING ((void *)1)

/* coll_real_resolve's answer: inline, as every hook asks it on every call. */
static inline void *
coll_real(enum coll_lib lib, const char *name, void **slot)
{
    void *fn = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (coll_likely(fn != NULL))
        return fn == COLL_REAL_MISSING ? NULL : fn;
    return coll_real_resolve(lib, name, slot);
}

/* Slow path of coll_enter: the thread's first record. Returns the new state with the
 * guard taken, or NULL when this thread must not record. Preserves errno. */
COLL_HIDDEN struct coll_thread *coll_thread_first(void);

/* Enters a hook: returns the thread's state with the re-entrancy guard taken, or NULL when
 * the call must only be passed through (inside another hook, recording off). */
static inline struct coll_thread *
coll_enter(void)
{
    struct coll_thread *t = coll_tls;
    if (coll_unlikely(t == NULL))
        return coll_thread_first();
    if (t->guard || !atomic_load_explicit(&coll_recording, memory_order_relaxed))
        return NULL;
    t->guard = 1;
    return t;
}

/* Leaves a hook entered with coll_enter. */
static inline void
coll_leave(struct coll_thread *t)
{
    t->guard = 0;
}

/* Arms the CUPTI correlation catch before a real call that may start device work. */
static inline void
coll_corr_arm(struct coll_thread *t)
{
    t->corr_cupti = 0;
    t->corr_armed = 1;
}

/* Returns the correlation id of the call just made: CUPTI's if its callback saw one, else
 * a process-unique id of our own (above 2^32, so never equal to a CUPTI id). */
static inline uint64_t
coll_corr_take(struct coll_thread *t)
{
    t->corr_armed = 0;
    if (t->corr_cupti)
        return t->corr_cupti;
    return ((uint64_t)(t->index + 1) << 40) | (++t->own_corr & ((1ull << 40) - 1));
}

/* Claims n consecutive slots of the thread's ring and returns the first; NULL (and one
 * drop counted) when they do not fit. Commit with coll_rec_commit(t, n). */
static inline struct coll_rec *
coll_rec_claim(struct coll_thread *t, uint32_t n)
{
    struct coll_ring *r = t->ring;
    uint64_t size = r->mask + 1;
    if (coll_unlikely(t->head + n - t->tail_seen > size)) {
        t->tail_seen = atomic_load_explicit(&r->tail, memory_order_acquire);
        if (t->head + n - t->tail_seen > size) {
            atomic_store_explicit(&r->dropped, ++t->dropped, memory_order_relaxed);
            return NULL;
        }
    }
    return &r->slots[t->head & r->mask];
}

/* Returns slot i (0: the record itself) of a claim made at the current head. */
static inline struct coll_rec *
coll_rec_slot(struct coll_thread *t, uint32_t i)
{
    return &t->ring->slots[(t->head + i) & t->ring->mask];
}

/* Publishes the n slots claimed by coll_rec_claim to the background thread. */
static inline void
coll_rec_commit(struct coll_thread *t, uint32_t n)
{
    t->head += n;
    atomic_store_explicit(&t->ring->head, t->head, memory_order_release);
}

/* Copies len bytes into the continuation slots 1.. of the current claim. */
COLL_HIDDEN void coll_rec_put_bytes(struct coll_thread *t, const void *data, size_t len);

/* Number of continuation slots that len bytes need. */
static inline uint32_t
coll_cont_slots(size_t len)
{
    return (uint32_t)((len + COLL_CONT_BYTES - 1) / COLL_CONT_BYTES);
}

/* Maps a cudaStream_t to the CUPTI stream id the device records carry, asking the runtime
 * (cudaStreamGetId) the first time a handle is seen; returns the handle itself when the id
 * cannot be known. ptsz: the call was a per-thread-default-stream variant. Called inside a
 * hook, after the real call. */
COLL_HIDDEN uint64_t coll_stream_id(struct coll_thread *t, const void *stream, int ptsz);

/* The same without asking the runtime: what is known already, else the handle (safe
 * inside a CUPTI callback). */
COLL_HIDDEN uint64_t coll_stream_id_known(struct coll_thread *t, const void *stream, int ptsz);

/* Tells the stream-id cache that the calling thread's current device may have changed
 * (cudaSetDevice, a driver context switch). */
COLL_HIDDEN void coll_device_changed(void);

/* Forgets what coll_stream_id learnt about a destroyed stream. */
COLL_HIDDEN void coll_stream_forget(const void *stream);

/* Takes a call stack into the record being written if the sampling says so (stacks.c).
 * Returns the continuation slots it needs (0: no stack). Call before coll_rec_claim with
 * frames/nframes scratch space of COLL_STACK_MAX. */
COLL_HIDDEN uint32_t stk_capture(struct coll_thread *t, uintptr_t *frames, uint32_t *nframes);

/* Writes *rec and cont_len bytes of continuation (text or frames; rec->ncont must say how
 * many slots they take) into the thread's ring; drops and counts it when the ring is
 * full. */
static inline void
coll_rec_emit(struct coll_thread *t, const struct coll_rec *rec, const void *cont, size_t cont_len)
{
    uint32_t n = 1u + rec->ncont;
    struct coll_rec *slot = coll_rec_claim(t, n);
    if (slot == NULL)
        return;
    *slot = *rec;
    if (rec->ncont)
        coll_rec_put_bytes(t, cont, cont_len);
    coll_rec_commit(t, n);
}

/* Longest kernel name a launch record carries (longer names are cut). */
#define COLL_KNAME_MAX 1023

/* Returns non-zero the first time the CUfunction f is seen (lock-free; 0 when the table of
 * seen functions is full): the launch that sees it first carries its name, resolved on the
 * application's thread while the handle is sure to be valid (a JIT module may be unloaded
 * before the writer thread converts the record). */
COLL_HIDDEN int coll_func_first_sight(const void *f);

/* Emits a driver launch record carrying the kernel's name (text continuation, a4 = its
 * length) when name is not NULL, else as coll_rec_emit. */
COLL_HIDDEN void coll_rec_emit_named(struct coll_thread *t, struct coll_rec *rec, const char *name);

/* Registers the host function of a cudaKernel_t (from __cudaGetKernel), for names. */
COLL_HIDDEN void coll_kernel_handle_add(const void *handle, const void *host_fn);

/* Flushes everything recorded so far to the trace, synchronously (before exec). */
COLL_HIDDEN void coll_flush_now(void);

/* ---- NCCL communicators (hook_nccl.c) ------------------------------------------------ */

/* Returns the per-communicator sequence number of the next collective on comm and its hash
 * (0 when the communicator was not seen being created). */
COLL_HIDDEN uint64_t nccl_next_seq(const void *comm, uint64_t *hash, uint32_t *device);

/* ---- CUPTI (cupti.c) ------------------------------------------------------------------ */

/* Loads libcupti and enables activity and the correlation callback; sets the "cupti" meta
 * status. Called once, on the first hooked call of the process (or after fork). */
COLL_HIDDEN void cupti_start(void);

/* Forces CUPTI to hand over every buffer (cuptiActivityFlushAll). */
COLL_HIDDEN void cupti_flush(int forced);

/* Converts the completed CUPTI buffers queued so far into events (background thread). */
COLL_HIDDEN void cupti_drain(dpro_writer *w);

/* Writes CUPTI's meta (status, version, clock offsets) into the trace. */
COLL_HIDDEN void cupti_write_meta(dpro_writer *w, int at_end);

/* Forgets CUPTI state in a forked child (CUPTI does not survive fork). */
COLL_HIDDEN void cupti_forget_after_fork(void);

/* Frees the kernel names cupti_drain keeps by address (background thread, at the end). */
COLL_HIDDEN void cupti_names_free(void);

/* ---- background thread helpers used by converters (convert.c) -------------------------- */

/* A growable open-addressing map uint64 -> uint64, for the background thread only. */
struct coll_umap {
    uint64_t *keys, *vals;
    size_t cap, used;
};

/* Returns the value slot of key k (any value, 0 included), inserting it (value 0) when
 * insert is set; NULL when absent, or when memory runs out. */
COLL_HIDDEN uint64_t *coll_umap_find(struct coll_umap *m, uint64_t k, int insert);

/* Removes key k (nothing when absent); its slot is free again and no other key is lost. */
COLL_HIDDEN void coll_umap_remove(struct coll_umap *m, uint64_t k);

/* Frees the map's memory and empties it. */
COLL_HIDDEN void coll_umap_free(struct coll_umap *m);

/* Interns text into the trace (0 on failure). Background thread only. */
COLL_HIDDEN uint32_t coll_intern(dpro_writer *w, const char *text);

/* NVTX conversion (nvtx.c): turns an NVTX record (with its text) into events. */
COLL_HIDDEN void nvtxi_convert(dpro_writer *w, const struct coll_rec *rec, uint32_t tid,
                               const char *text, uint32_t len);

/* Emits NVTX ranges still open at the end (background thread). */
COLL_HIDDEN void nvtxi_finish(dpro_writer *w);

/* Forgets ranges of an earlier writer (background thread start). */
COLL_HIDDEN void nvtxi_reset(void);

/* Forgets stacks interned into an earlier writer (background thread start). */
COLL_HIDDEN void stk_reset(void);

/* Call-stack conversion (stacks.c): interns the frames of a record, returns the stack id. */
COLL_HIDDEN uint32_t stk_intern(dpro_writer *w, const uintptr_t *frames, uint32_t nframes);

/*
 * The part every hook shares (RT_HOOK, DRV_HOOK, NCCL_HOOK): resolves the real function
 * (missing: returns fail_rc without recording), takes the per-thread state when recording
 * is enabled (NULL when disabled or re-entered: just calls through), then records the call
 * (COLL_HOOK_RECORD). It declares `t`, `rc`, `saved` and `rec` for the hook's own fill and
 * emit steps; COLL_HOOK_END leaves the thread state, restores errno and returns rc
 * unchanged.
 */
#define COLL_HOOK_BEGIN(rtype, lib, fail_rc, enabled, name, params, args)                          \
    COLL_HOOK_ENTER(rtype, lib, fail_rc, enabled, name, params);                                   \
    if (t == NULL)                                                                                 \
        return real args;                                                                          \
    COLL_HOOK_RECORD(rtype, name, args)

/* Declares `real`, the real function `name` of lib (resolved once into a static slot;
 * missing: the hook returns fail_rc), and `t`, the per-thread state when `enabled` and
 * not re-entered, else NULL. */
#define COLL_HOOK_ENTER(rtype, lib, fail_rc, enabled, name, params)                                \
    static void *slot;                                                                             \
    typedef rtype(*real_fn) params;                                                                \
    real_fn real = (real_fn)coll_real(lib, #name, &slot);                                          \
    if (coll_unlikely(real == NULL))                                                               \
        return fail_rc;                                                                            \
    struct coll_thread *t = (enabled) ? coll_enter() : NULL

/* With `real` and the thread state `t` (not NULL) in scope: arms correlation, calls the
 * real function between two stamps, saves errno and starts the record. Declares `rc`,
 * `saved` and `rec`. */
#define COLL_HOOK_RECORD(rtype, name, args)                                                        \
    coll_corr_arm(t);                                                                              \
    uint64_t t0 = coll_stamp();                                                                    \
    rtype rc = real args;                                                                          \
    uint64_t t1 = coll_stamp();                                                                    \
    int saved = errno;                                                                             \
    struct coll_rec rec;                                                                           \
    memset(&rec, 0, sizeof rec);                                                                   \
    rec.api = COLL_API_##name;                                                                     \
    rec.result = (int32_t)rc;                                                                      \
    rec.start = t0;                                                                                \
    rec.end = t1;                                                                                  \
    rec.corr = coll_corr_take(t)

#define COLL_HOOK_END                                                                              \
    coll_leave(t);                                                                                 \
    errno = saved;                                                                                 \
    return rc

#endif /* DPRO_COLLECTOR_H */
