/*
 * hook_nccl.c: the NCCL calls the collector interposes: communicator creation (init rank,
 * init rank config, init rank scalable, init all, split), finalize/destroy/abort, every
 * collective and send/recv, group start/end.
 *
 * A communicator is known across ranks by a 64-bit hash of its ncclUniqueId (FNV-1a); a
 * split communicator's hash is derived from its parent's hash, the number of splits the
 * parent has made before and the color, which all members agree on since a split is
 * collective over the parent. Each collective takes the next sequence number of its
 * communicator (an atomic counter), so (hash, seq) names the same operation on every rank.
 *
 * NCCL launches its kernels inside the call (or in ncclGroupEnd for grouped calls); the
 * CUPTI correlation id caught inside the call links those kernels to the call.
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

/* nccl.h declares a few functions without prototypes: say them properly. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);

#include "collector.h"
#include "fnv1a.h"

/* ---- communicators ----------------------------------------------------------------------- */

#define NCCLH_COMMS 4096
#define NCCLH_GONE (~0ull) /* a slot freed by destroy/abort: reusable, lookups go on */

struct ncclh_comm {
    _Atomic uint64_t handle; /* ncclComm_t; 0: never used; NCCLH_GONE: freed */
    uint64_t hash, parent_hash;
    int32_t rank, size;
    uint32_t device;
    _Atomic uint64_t seq;
    _Atomic uint64_t splits;
};

static struct ncclh_comm ncclh_comms[NCCLH_COMMS];

/* Returns the table entry of comm (inserting it if create, into the first freed or unused
 * slot); NULL if absent or full. A handle is registered by the one thread that created the
 * communicator, so two inserts of one key do not race. */
static struct ncclh_comm *
ncclh_find(const void *comm, int create)
{
    uint64_t key = (uint64_t)(uintptr_t)comm;
    if (key == 0 || key == NCCLH_GONE)
        return NULL;
    uint32_t start = (uint32_t)((key >> 4) * 0x9e3779b97f4a7c15ull >> 52) & (NCCLH_COMMS - 1);
    for (;;) {
        struct ncclh_comm *reuse = NULL;
        uint64_t reuse_was = 0;
        uint32_t i = start;
        for (uint32_t n = 0; n < NCCLH_COMMS; n++, i = (i + 1) & (NCCLH_COMMS - 1)) {
            uint64_t cur = atomic_load_explicit(&ncclh_comms[i].handle, memory_order_acquire);
            if (cur == key)
                return &ncclh_comms[i];
            if (cur == NCCLH_GONE && reuse == NULL) {
                reuse = &ncclh_comms[i];
                reuse_was = cur;
            }
            if (cur == 0) {
                if (reuse == NULL) {
                    reuse = &ncclh_comms[i];
                    reuse_was = 0;
                }
                break; /* the key is not further on */
            }
        }
        if (!create || reuse == NULL)
            return NULL;
        uint64_t expect = reuse_was;
        if (atomic_compare_exchange_strong(&reuse->handle, &expect, key))
            return reuse;
        /* another communicator took the slot: look again */
    }
}

/* Frees the slot of a destroyed or aborted communicator. */
static void
ncclh_forget(const void *comm)
{
    struct ncclh_comm *c = ncclh_find(comm, 0);
    if (c)
        atomic_store_explicit(&c->handle, NCCLH_GONE, memory_order_release);
}

uint64_t
nccl_next_seq(const void *comm, uint64_t *hash, uint32_t *device)
{
    struct ncclh_comm *c = ncclh_find(comm, 0);
    if (c == NULL) {
        *hash = 0;
        *device = 0;
        return 0;
    }
    *hash = c->hash;
    *device = c->device;
    return atomic_fetch_add_explicit(&c->seq, 1, memory_order_relaxed);
}

typedef ncclResult_t (*ncclh_query_fn)(const ncclComm_t, int *);
typedef int (*ncclh_get_device_fn)(int *);

/* Registers a new communicator and fills the init record (a0 handle, a1 hash, a2 parent
 * hash, u0 rank, u1 size, u2 device). */
static void
ncclh_register(struct coll_rec *rec, ncclComm_t comm, uint64_t hash, uint64_t parent_hash, int rank,
               int size)
{
    static void *slot_dev, *slot_rank, *slot_count, *slot_getdev;
    ncclh_query_fn cu_device =
        (ncclh_query_fn)coll_real(COLL_LIB_NCCL, "ncclCommCuDevice", &slot_dev);
    ncclh_query_fn user_rank =
        (ncclh_query_fn)coll_real(COLL_LIB_NCCL, "ncclCommUserRank", &slot_rank);
    ncclh_query_fn count = (ncclh_query_fn)coll_real(COLL_LIB_NCCL, "ncclCommCount", &slot_count);
    int dev = -1, r = rank, n = size;
    if (cu_device == NULL || cu_device(comm, &dev) != ncclSuccess || dev < 0) {
        ncclh_get_device_fn gd =
            (ncclh_get_device_fn)coll_real(COLL_LIB_CUDART, "cudaGetDevice", &slot_getdev);
        if (gd == NULL || gd(&dev) != 0)
            dev = 0;
    }
    if (r < 0 && (user_rank == NULL || user_rank(comm, &r) != ncclSuccess))
        r = -1;
    if (n <= 0 && (count == NULL || count(comm, &n) != ncclSuccess))
        n = 0;
    struct ncclh_comm *c = ncclh_find(comm, 1);
    if (c) {
        c->hash = hash;
        c->parent_hash = parent_hash;
        c->rank = r;
        c->size = n;
        c->device = (uint32_t)dev;
        atomic_store(&c->seq, 0);
        atomic_store(&c->splits, 0);
    }
    rec->a0 = (uint64_t)(uintptr_t)comm;
    rec->a1 = hash;
    rec->a2 = parent_hash;
    rec->u0 = (uint32_t)r;
    rec->u1 = (uint32_t)n;
    rec->u2 = (uint32_t)dev;
}

/*
 * NCCL_HOOK(name, params, args, fill...): the NCCL twin of RT_HOOK (hook_cudart.c). A
 * missing libnccl answers ncclSystemError.
 */
#define NCCL_HOOK(name, params, args, ...)                                                         \
    COLL_EXPORT ncclResult_t name params                                                           \
    {                                                                                              \
        COLL_HOOK_BEGIN(ncclResult_t, COLL_LIB_NCCL, ncclSystemError, coll_cfg.nccl, name, params, \
                        args);                                                                     \
        __VA_ARGS__;                                                                               \
        coll_rec_emit(t, &rec, NULL, 0);                                                           \
        COLL_HOOK_END;                                                                             \
    }

/*
 * NCCL_HOOK_PT(name, params, args, pre, post, fill...): NCCL_HOOK whose call, when it is not
 * recorded (recording off, inside another hook, a thread that no longer records), still
 * runs `pre` before the real call and `post` after it (rc_ holds its result), so that the
 * per-communicator state stays the same on every rank whatever is recorded: a collective
 * takes its sequence number, a destroy frees its communicator's slot.
 */
#define NCCL_HOOK_PT(name, params, args, pre, post, ...)                                           \
    COLL_EXPORT ncclResult_t name params                                                           \
    {                                                                                              \
        COLL_HOOK_ENTER(ncclResult_t, COLL_LIB_NCCL, ncclSystemError, coll_cfg.nccl, name,         \
                        params);                                                                   \
        if (t == NULL) {                                                                           \
            pre;                                                                                   \
            ncclResult_t rc_ = real args;                                                          \
            int saved_ = errno;                                                                    \
            post;                                                                                  \
            errno = saved_;                                                                        \
            return rc_;                                                                            \
        }                                                                                          \
        COLL_HOOK_RECORD(ncclResult_t, name, args);                                                \
        __VA_ARGS__;                                                                               \
        coll_rec_emit(t, &rec, NULL, 0);                                                           \
        COLL_HOOK_END;                                                                             \
    }

/* Takes the sequence number of a collective that goes through unrecorded. */
static inline void
ncclh_skip_seq(const void *comm)
{
    uint64_t hash;
    uint32_t device;
    (void)nccl_next_seq(comm, &hash, &device);
}

/* Communicator created (or in progress, for non-blocking ones)? */
#define NCCLH_CREATED(rc) ((rc) == ncclSuccess || (rc) == ncclInProgress)

NCCL_HOOK(ncclCommInitRank, (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank),
          (comm, nranks, commId, rank),
          if (NCCLH_CREATED(rc) && comm && *comm)
              ncclh_register(&rec, *comm, dpro_fnv1a(&commId, sizeof commId, DPRO_FNV1A_INIT), 0,
                             rank, nranks))

NCCL_HOOK(ncclCommInitRankConfig,
          (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t *config),
          (comm, nranks, commId, rank, config),
          if (NCCLH_CREATED(rc) && comm && *comm)
              ncclh_register(&rec, *comm, dpro_fnv1a(&commId, sizeof commId, DPRO_FNV1A_INIT), 0,
                             rank, nranks))

NCCL_HOOK(ncclCommInitRankScalable,
          (ncclComm_t * newcomm, int nranks, int myrank, int nId, ncclUniqueId *commIds,
           ncclConfig_t *config),
          (newcomm, nranks, myrank, nId, commIds, config),
          if (NCCLH_CREATED(rc) && newcomm && *newcomm && commIds && nId > 0)
              ncclh_register(&rec, *newcomm,
                             dpro_fnv1a(commIds, sizeof *commIds *(size_t)nId, DPRO_FNV1A_INIT), 0,
                             myrank, nranks))

/* ncclCommInitAll creates every rank in this process: one record per communicator. */
COLL_EXPORT ncclResult_t
ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist)
{
    static void *slot;
    static _Atomic uint64_t calls;
    typedef ncclResult_t (*real_fn)(ncclComm_t *, int, const int *);
    real_fn real = (real_fn)coll_real(COLL_LIB_NCCL, "ncclCommInitAll", &slot);
    if (real == NULL)
        return ncclSystemError;
    struct coll_thread *t = coll_cfg.nccl ? coll_enter() : NULL;
    if (t == NULL)
        return real(comm, ndev, devlist);
    uint64_t t0 = coll_stamp();
    ncclResult_t rc = real(comm, ndev, devlist);
    uint64_t t1 = coll_stamp();
    int saved = errno;
    uint64_t key[3] = {(uint64_t)getpid(), atomic_fetch_add(&calls, 1), 0x696e6974616c6cull};
    uint64_t hash = dpro_fnv1a(key, sizeof key, DPRO_FNV1A_INIT);
    for (int i = 0; comm && i < ndev; i++) {
        struct coll_rec rec;
        memset(&rec, 0, sizeof rec);
        rec.api = COLL_API_ncclCommInitAll;
        rec.result = (int32_t)rc;
        rec.start = t0;
        rec.end = t1;
        if (rc == ncclSuccess && comm[i])
            ncclh_register(&rec, comm[i], hash, 0, i, ndev);
        coll_rec_emit(t, &rec, NULL, 0);
        if (rc != ncclSuccess)
            break;
    }
    coll_leave(t);
    errno = saved;
    return rc;
}

/* Derives the hash of a communicator split from parent. */
static uint64_t
ncclh_split_hash(ncclComm_t parent, int color, uint64_t *parent_hash)
{
    struct ncclh_comm *p = ncclh_find(parent, 0);
    uint64_t key[3] = {0, 0, (uint64_t)(int64_t)color};
    if (p) {
        key[0] = p->hash;
        key[1] = atomic_fetch_add(&p->splits, 1);
    } else {
        key[0] = (uint64_t)(uintptr_t)parent;
    }
    *parent_hash = key[0];
    return dpro_fnv1a(key, sizeof key, DPRO_FNV1A_INIT);
}

COLL_EXPORT ncclResult_t
ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config)
{
    static void *slot;
    typedef ncclResult_t (*real_fn)(ncclComm_t, int, int, ncclComm_t *, ncclConfig_t *);
    real_fn real = (real_fn)coll_real(COLL_LIB_NCCL, "ncclCommSplit", &slot);
    if (real == NULL)
        return ncclSystemError;
    struct coll_thread *t = coll_cfg.nccl ? coll_enter() : NULL;
    if (t == NULL) {
        uint64_t parent_hash;
        ncclResult_t rc = real(comm, color, key, newcomm, config);
        int saved = errno;
        uint64_t hash = ncclh_split_hash(comm, color, &parent_hash);
        if (NCCLH_CREATED(rc) && newcomm && *newcomm) {
            struct coll_rec scratch;
            ncclh_register(&scratch, *newcomm, hash, parent_hash, -1, 0);
        }
        errno = saved;
        return rc;
    }
    uint64_t t0 = coll_stamp();
    ncclResult_t rc = real(comm, color, key, newcomm, config);
    uint64_t t1 = coll_stamp();
    int saved = errno;
    uint64_t parent_hash;
    uint64_t hash = ncclh_split_hash(comm, color, &parent_hash);
    struct coll_rec rec;
    memset(&rec, 0, sizeof rec);
    rec.api = COLL_API_ncclCommSplit;
    rec.result = (int32_t)rc;
    rec.start = t0;
    rec.end = t1;
    if (NCCLH_CREATED(rc) && newcomm && *newcomm)
        ncclh_register(&rec, *newcomm, hash, parent_hash, -1, 0);
    else
        rec.a2 = parent_hash;
    coll_rec_emit(t, &rec, NULL, 0);
    coll_leave(t);
    errno = saved;
    return rc;
}

/* Fills the comm fields of a finalize/destroy/abort record. */
static void
ncclh_comm_rec(struct coll_rec *rec, ncclComm_t comm)
{
    struct ncclh_comm *c = ncclh_find(comm, 0);
    rec->a0 = (uint64_t)(uintptr_t)comm;
    rec->a1 = c ? c->hash : 0;
    rec->corr = 0;
}

NCCL_HOOK(ncclCommFinalize, (ncclComm_t comm), (comm), ncclh_comm_rec(&rec, comm))
NCCL_HOOK_PT(ncclCommDestroy, (ncclComm_t comm), (comm), (void)0,
             if (rc_ == ncclSuccess) ncclh_forget(comm), ncclh_comm_rec(&rec, comm);
             if (rc == ncclSuccess) ncclh_forget(comm))
NCCL_HOOK_PT(ncclCommAbort, (ncclComm_t comm), (comm), (void)0,
             if (rc_ == ncclSuccess) ncclh_forget(comm), ncclh_comm_rec(&rec, comm);
             if (rc == ncclSuccess) ncclh_forget(comm))
NCCL_HOOK(ncclGroupStart, (void), (), rec.corr = 0)
NCCL_HOOK(ncclGroupEnd, (void), ())

/* ---- collectives ------------------------------------------------------------------------ */

/* Fills a collective record: a0 comm hash, a1 seq, a2 count, a3 buffer, u0 dtype, u1 op,
 * u2 root or peer, u3 device, stream. */
static inline void
ncclh_coll(struct coll_thread *t, struct coll_rec *rec, ncclComm_t comm, size_t count,
           ncclDataType_t dtype, uint32_t op, int peer, const void *buf, cudaStream_t stream)
{
    uint64_t hash;
    uint32_t device;
    rec->a1 = nccl_next_seq(comm, &hash, &device);
    rec->a0 = hash ? hash : (uint64_t)(uintptr_t)comm;
    rec->a2 = count;
    rec->a3 = (uint64_t)(uintptr_t)buf;
    rec->u0 = (uint32_t)dtype;
    rec->u1 = op;
    rec->u2 = (uint32_t)peer;
    rec->u3 = device;
    rec->stream = coll_stream_id(t, stream, 0);
}

NCCL_HOOK_PT(ncclAllReduce,
             (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
              ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream),
             (sendbuff, recvbuff, count, datatype, op, comm, stream), ncclh_skip_seq(comm),
             (void)rc_,
             ncclh_coll(t, &rec, comm, count, datatype, (uint32_t)op, -1, recvbuff, stream))
NCCL_HOOK_PT(ncclBroadcast,
             (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
              ncclComm_t comm, cudaStream_t stream),
             (sendbuff, recvbuff, count, datatype, root, comm, stream), ncclh_skip_seq(comm),
             (void)rc_, ncclh_coll(t, &rec, comm, count, datatype, 0, root, recvbuff, stream))
NCCL_HOOK_PT(ncclBcast,
             (void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
              cudaStream_t stream),
             (buff, count, datatype, root, comm, stream), ncclh_skip_seq(comm), (void)rc_,
             ncclh_coll(t, &rec, comm, count, datatype, 0, root, buff, stream))
NCCL_HOOK_PT(ncclReduce,
             (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
              ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream),
             (sendbuff, recvbuff, count, datatype, op, root, comm, stream), ncclh_skip_seq(comm),
             (void)rc_,
             ncclh_coll(t, &rec, comm, count, datatype, (uint32_t)op, root, recvbuff, stream))
NCCL_HOOK_PT(ncclAllGather,
             (const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
              ncclComm_t comm, cudaStream_t stream),
             (sendbuff, recvbuff, sendcount, datatype, comm, stream), ncclh_skip_seq(comm),
             (void)rc_, ncclh_coll(t, &rec, comm, sendcount, datatype, 0, -1, recvbuff, stream))
NCCL_HOOK_PT(ncclReduceScatter,
             (const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,
              ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream),
             (sendbuff, recvbuff, recvcount, datatype, op, comm, stream), ncclh_skip_seq(comm),
             (void)rc_,
             ncclh_coll(t, &rec, comm, recvcount, datatype, (uint32_t)op, -1, recvbuff, stream))
NCCL_HOOK_PT(ncclAlltoAll,
             (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
              ncclComm_t comm, cudaStream_t stream),
             (sendbuff, recvbuff, count, datatype, comm, stream), ncclh_skip_seq(comm), (void)rc_,
             ncclh_coll(t, &rec, comm, count, datatype, 0, -1, recvbuff, stream))
NCCL_HOOK_PT(ncclSend,
             (const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
              ncclComm_t comm, cudaStream_t stream),
             (sendbuff, count, datatype, peer, comm, stream), ncclh_skip_seq(comm), (void)rc_,
             ncclh_coll(t, &rec, comm, count, datatype, 0, peer, sendbuff, stream))
NCCL_HOOK_PT(ncclRecv,
             (void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
              cudaStream_t stream),
             (recvbuff, count, datatype, peer, comm, stream), ncclh_skip_seq(comm), (void)rc_,
             ncclh_coll(t, &rec, comm, count, datatype, 0, peer, recvbuff, stream))

/* Gather and scatter have no dpro_coll_op: they are API events carrying the same fields. */
NCCL_HOOK_PT(ncclGather,
             (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
              ncclComm_t comm, cudaStream_t stream),
             (sendbuff, recvbuff, count, datatype, root, comm, stream), ncclh_skip_seq(comm),
             (void)rc_, ncclh_coll(t, &rec, comm, count, datatype, 0, root, recvbuff, stream);
             rec.a1 = rec.a0)
NCCL_HOOK_PT(ncclScatter,
             (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
              ncclComm_t comm, cudaStream_t stream),
             (sendbuff, recvbuff, count, datatype, root, comm, stream), ncclh_skip_seq(comm),
             (void)rc_, ncclh_coll(t, &rec, comm, count, datatype, 0, root, recvbuff, stream);
             rec.a1 = rec.a0)
