/* nccl.c: libnccl.so.2 of the simulated device.
 *
 * Ranks are processes.  A communicator is a POSIX shared-memory segment named
 * from its unique id ("/simgpu-nccl-<token>"), holding a process-shared robust
 * mutex and condition variable and rings of rendezvous slots:
 *  - collectives: slot seq % SLOTS; every rank arrives with the device time its
 *    stream reached the collective; when all have arrived the collective ends at
 *    max(arrival) + latency + bytes * ring factor / bandwidth, the same instant on
 *    every rank;
 *  - point-to-point: one ring per (sender, receiver) pair, two parties;
 *  - host exchanges (communicator split): per-rank payloads.
 * The segment is unlinked as soon as every rank has mapped it, so a crash leaves
 * nothing behind in /dev/shm.  A waiting rank checks every 20 ms whether the
 * peers it waits for are alive (kill(pid, 0)); a dead peer, an aborted
 * communicator or SIMGPU_NCCL_TIMEOUT_S fails the collective: the stream gets a
 * sticky cudaErrorLaunchFailure and the communicator ncclRemoteError.
 *
 * Every collective is also a kernel on the device ("ncclDevKernel_..."), launched
 * as real NCCL does through cuLaunchKernelEx: a driver-API callback and record
 * with its own correlation id, and a CUPTI kernel record.  Once every rank arrived, the
 * data move through the segment (device memory is host memory of each process: each rank
 * copies in and out; nccl_data.c), then the collective ends at its modelled time, which
 * the copying does not change.  Real NCCL exports pnccl* strongly and nccl* as weak
 * aliases; so does this library.  Model options: SIMGPU_NCCL_LAT_US (default 10),
 * SIMGPU_NCCL_BW_GBPS (default 20), SIMGPU_NCCL_TIMEOUT_S (default 120); the staging size
 * SIMGPU_NCCL_STAGE_KB (nccl_data.c).
 *
 * Contract of every exported (p)nccl* function: the NCCL documentation.
 *
 * This file: the model options, shared memory and liveness, communicators; the
 * collectives, point-to-point and groups are in nccl_coll.c.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop
#include <nvtx3/nvToolsExt.h>

#define SIMGPU_NCCL_INTERNAL /* the shared part of simgpu_internal.h */
#include "simgpu_internal.h"

#define NCCL_SHM_MAGIC 0x53474e43U /* "SGNC" */
#define NCCL_ID_MAGIC 0x53474e49U  /* "SGNI" */
#define COMM_MAGIC 0x434f4d4dU

/* ---- model options ----------------------------------------------------------------- */
double g_lat_ns = -1, g_bw_gbps, g_timeout_ns;
static pthread_once_t g_opts_once = PTHREAD_ONCE_INIT;

static void
opts_init(void)
{
    g_lat_ns = simgpu_env_number("SIMGPU_NCCL_LAT_US", 0, 1e9, 10) * 1000;
    g_bw_gbps = simgpu_env_number("SIMGPU_NCCL_BW_GBPS", 1e-6, 1e9, 20);
    g_timeout_ns = simgpu_env_number("SIMGPU_NCCL_TIMEOUT_S", 0, 1e9, 120) * 1e9;
}

void
opts(void)
{
    pthread_once(&g_opts_once, opts_init);
    simgpu_init();
}

/* ---- NVTX: real NCCL marks its API calls in an "NCCL" domain ---------------------- */
static nvtxDomainHandle_t g_nvtx_domain;
static pthread_once_t g_nvtx_once = PTHREAD_ONCE_INIT;

static void
nvtx_domain_init(void)
{
    g_nvtx_domain = nvtxDomainCreateA("NCCL");
}

static nvtxDomainHandle_t
nvtx_domain(void)
{
    pthread_once(&g_nvtx_once, nvtx_domain_init);
    return g_nvtx_domain;
}

void
nvtx_push(const char *name)
{
    nvtxEventAttributes_t a;
    memset(&a, 0, sizeof(a));
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = name;
    nvtxDomainRangePushEx(nvtx_domain(), &a);
}

void
nvtx_pop(void)
{
    nvtxDomainRangePop(nvtx_domain());
}

/* ---- shared memory and liveness ------------------------------------------------------ */
/* Offset of the data areas (the channels' states first) in the segment of nranks. */
static size_t
shm_data_off(int nranks)
{
    size_t off = sizeof(struct shm_hdr) +
                 (size_t)nranks * (size_t)nranks * P2P_SLOTS * sizeof(struct rdv_slot);
    return (off + 63) & ~(size_t)63;
}

static size_t
shm_size(int nranks)
{
    uint64_t stage, chunk, max;
    return shm_data_off(nranks) + data_bytes(nranks, &stage, &chunk, &max);
}

static void
shm_name(char *buf, size_t n, uint64_t token)
{
    snprintf(buf, n, "/simgpu-nccl-%016llx", (unsigned long long)token);
}

/* Locks the segment's robust mutex; a holder that died marks the comm broken. */
void
shm_lock(struct shm_hdr *h)
{
    if (pthread_mutex_lock(&h->mu) == EOWNERDEAD) {
        h->broken = 1;
        pthread_mutex_consistent(&h->mu);
    }
}

/* Returns 1 when some rank registered in the segment has died; caller holds mu. */
static int
peer_dead_locked(struct shm_hdr *h)
{
    for (uint32_t r = 0; r < h->nranks; r++)
        if (h->pids[r] > 0 && kill(h->pids[r], 0) == -1 && errno == ESRCH)
            return 1;
    return 0;
}

/* Waits on the segment's condition variable for at most 20 ms (caller holds mu);
 * returns nonzero when waiting must stop: comm broken, peer dead or timed out. */
int
wait_tick(struct shm_hdr *h, uint64_t deadline)
{
    struct timespec ts;
    uint64_t now = simgpu_now_ns(), until = now + 20000000ULL;
    int rc;
    if (h->broken)
        return 1;
    if (now >= deadline)
        return 1;
    ts.tv_sec = (time_t)(until / 1000000000ULL);
    ts.tv_nsec = (long)(until % 1000000000ULL);
    rc = pthread_cond_timedwait(&h->cv, &h->mu, &ts);
    if (rc == EOWNERDEAD) {
        h->broken = 1;
        pthread_mutex_consistent(&h->mu);
    }
    if (rc == ETIMEDOUT && peer_dead_locked(h))
        h->broken = 1;
    return h->broken;
}

static int
init_shm_sync(struct shm_hdr *h, int nranks)
{
    pthread_mutexattr_t ma;
    pthread_condattr_t ca;
    if (pthread_mutexattr_init(&ma) || pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED) ||
        pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST) || pthread_mutex_init(&h->mu, &ma))
        return -1;
    pthread_mutexattr_destroy(&ma);
    if (pthread_condattr_init(&ca) || pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED) ||
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) || pthread_cond_init(&h->cv, &ca))
        return -1;
    pthread_condattr_destroy(&ca);
    h->nranks = (uint32_t)nranks;
    data_bytes(nranks, &h->stage, &h->chunk, &h->data_max);
    h->data_off = shm_data_off(nranks);
    h->magic = NCCL_SHM_MAGIC;
    atomic_store(&h->ready, 1);
    return 0;
}

/* Maps (creating if first) the segment of `token` and waits until every rank
 * joined.  Returns ncclSuccess, ncclSystemError or ncclRemoteError. */
static ncclResult_t
comm_attach(struct ncclComm *c, const char **why)
{
    char name[64];
    size_t bytes = shm_size(c->nranks);
    uint64_t deadline, stage, chunk, max;
    struct shm_hdr *h;
    int fd, creator = 1;
    struct stat st;

    shm_name(name, sizeof(name), c->token);
    deadline = simgpu_now_ns() + (uint64_t)g_timeout_ns;
    fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0 && errno == EEXIST) {
        creator = 0;
        fd = shm_open(name, O_RDWR, 0600);
    }
    if (fd < 0) {
        *why = "shm_open failed";
        return ncclSystemError;
    }
    if (creator && ftruncate(fd, (off_t)bytes) != 0) {
        close(fd);
        shm_unlink(name);
        *why = "ftruncate failed";
        return ncclSystemError;
    }
    while (!creator && (fstat(fd, &st) != 0 || (size_t)st.st_size < bytes)) {
        if (simgpu_now_ns() > deadline) {
            close(fd);
            *why = "timed out waiting for the communicator segment";
            return ncclSystemError;
        }
        usleep(1000);
    }
    h = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (h == MAP_FAILED) {
        *why = "mmap failed";
        return ncclSystemError;
    }
    if (creator && init_shm_sync(h, c->nranks)) {
        munmap(h, bytes);
        shm_unlink(name);
        *why = "cannot initialise process-shared mutex";
        return ncclSystemError;
    }
    while (!atomic_load(&h->ready)) {
        if (simgpu_now_ns() > deadline) {
            munmap(h, bytes);
            *why = "timed out waiting for the communicator segment";
            return ncclSystemError;
        }
        usleep(500);
    }
    if (h->nranks != (uint32_t)c->nranks) {
        munmap(h, bytes);
        *why = "ranks disagree on the communicator size";
        return ncclInvalidUsage;
    }
    if (h->data_off + data_bytes(c->nranks, &stage, &chunk, &max) != bytes || h->stage != stage ||
        h->chunk != chunk || h->data_max != max) {
        munmap(h, bytes);
        *why = "ranks disagree on SIMGPU_NCCL_STAGE_KB, SIMGPU_NCCL_DATA or SIMGPU_NCCL_DATA_KB";
        return ncclInvalidUsage;
    }
    c->shm = h;
    c->shm_bytes = bytes;
    shm_lock(h);
    h->pids[c->rank] = (int32_t)getpid();
    h->joined++;
    pthread_cond_broadcast(&h->cv);
    if (h->joined == h->nranks)
        shm_unlink(name);
    while (h->joined < h->nranks && !wait_tick(h, deadline))
        ;
    if (h->joined < h->nranks) {
        h->broken = 1;
        pthread_mutex_unlock(&h->mu);
        *why = "a peer did not join the communicator (dead or timed out)";
        return ncclRemoteError;
    }
    pthread_mutex_unlock(&h->mu);
    return ncclSuccess;
}

/* ---- communicators -------------------------------------------------------------------- */
ncclResult_t
set_err(struct ncclComm *c, ncclResult_t rc, const char *why)
{
    if (c && why)
        snprintf(c->last_error, sizeof(c->last_error), "%s", why);
    return rc;
}

static __thread char t_last_error[160];

int
comm_ok(const struct ncclComm *c)
{
    return c && c->magic == COMM_MAGIC;
}

static ncclResult_t
comm_init(struct ncclComm **out, int nranks, uint64_t token, int rank)
{
    struct ncclComm *c;
    const char *why = NULL;
    ncclResult_t rc;
    opts();
    if (!out || nranks < 1 || nranks > MAX_RANKS || rank < 0 || rank >= nranks)
        return ncclInvalidArgument;
    c = calloc(1, sizeof(*c));
    if (!c)
        return ncclSystemError;
    c->send_seq = calloc((size_t)nranks, sizeof(uint64_t));
    c->recv_seq = calloc((size_t)nranks, sizeof(uint64_t));
    if (!c->send_seq || !c->recv_seq) {
        free(c->send_seq);
        free(c->recv_seq);
        free(c);
        return ncclSystemError;
    }
    c->magic = COMM_MAGIC;
    c->rank = rank;
    c->nranks = nranks;
    c->dev = simgpu_current_device();
    c->token = token;
    rc = comm_attach(c, &why);
    if (rc != ncclSuccess) {
        snprintf(t_last_error, sizeof(t_last_error), "%s", why ? why : "init failed");
        if (c->shm)
            munmap(c->shm, c->shm_bytes);
        free(c->send_seq);
        free(c->recv_seq);
        free(c);
        return rc;
    }
    *out = c;
    return ncclSuccess;
}

static void
comm_free(struct ncclComm *c)
{
    c->magic = 0;
    /* The mapping stays: stream operations of this communicator may still run.
     * It is small and goes with the process. */
    free(c->send_seq);
    free(c->recv_seq);
    /* SIMGPU_NCCL_KEEP_HANDLES=1: the handle's memory is kept, so that every communicator
     * gets a handle of its own (as real NCCL's large allocations often do), for tests of
     * what tools keep per handle. */
    if (!getenv("SIMGPU_NCCL_KEEP_HANDLES"))
        free(c);
}

ncclResult_t
pncclGetVersion(int *version)
{
    if (!version)
        return ncclInvalidArgument;
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

ncclResult_t
pncclGetUniqueId(ncclUniqueId *uniqueId)
{
    struct nccl_id id;
    struct timespec ts;
    if (!uniqueId)
        return ncclInvalidArgument;
    clock_gettime(CLOCK_REALTIME, &ts);
    memset(uniqueId, 0, sizeof(*uniqueId));
    id.magic = NCCL_ID_MAGIC;
    id.pad = 0;
    id.token = ((uint64_t)getpid() << 40) ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)ts.tv_nsec ^
               ((uint64_t)rand() << 8);
    memcpy(uniqueId->internal, &id, sizeof(id));
    return ncclSuccess;
}

static ncclResult_t
init_rank_common(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    struct nccl_id id;
    memcpy(&id, commId.internal, sizeof(id));
    if (id.magic != NCCL_ID_MAGIC)
        return ncclInvalidArgument;
    return comm_init(comm, nranks, id.token, rank);
}

ncclResult_t
pncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    ncclResult_t rc;
    nvtx_push("ncclCommInitRank");
    rc = init_rank_common(comm, nranks, commId, rank);
    nvtx_pop();
    return rc;
}

ncclResult_t
pncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                        ncclConfig_t *config)
{
    ncclResult_t rc;
    nvtx_push("ncclCommInitRankConfig");
    rc = init_rank_common(comm, nranks, commId, rank);
    nvtx_pop();
    return rc;
}

/* Host all-gather of two int64 per rank over c; returns ncclSuccess or
 * ncclRemoteError. */
static ncclResult_t
host_exchange(struct ncclComm *c, int64_t a, int64_t b, int64_t (*all)[2])
{
    struct shm_hdr *h = c->shm;
    uint64_t seq = ++c->host_seq;
    struct host_slot *s = &h->host[seq % HOST_SLOTS];
    uint64_t deadline = simgpu_now_ns() + (uint64_t)g_timeout_ns;
    ncclResult_t rc = ncclSuccess;
    shm_lock(h);
    if (s->seq != seq) {
        s->seq = seq;
        s->arrived = 0;
    }
    s->payload[c->rank][0] = a;
    s->payload[c->rank][1] = b;
    s->arrived++;
    pthread_cond_broadcast(&h->cv);
    while (s->arrived < h->nranks && !wait_tick(h, deadline))
        ;
    if (s->arrived < h->nranks) {
        h->broken = 1;
        pthread_cond_broadcast(&h->cv);
        rc = ncclRemoteError;
    } else {
        memcpy(all, s->payload, (size_t)h->nranks * sizeof(s->payload[0]));
    }
    pthread_mutex_unlock(&h->mu);
    return rc;
}

ncclResult_t
pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config)
{
    int64_t(*all)[2];
    int n = 0, me = 0;
    ncclResult_t rc;
    if (!comm_ok(comm) || !newcomm)
        return ncclInvalidArgument;
    all = calloc((size_t)comm->nranks, sizeof(*all));
    if (!all)
        return ncclSystemError;
    nvtx_push("ncclCommSplit");
    comm->splits++;
    rc = host_exchange(comm, color, key, all);
    if (rc == ncclSuccess && color == NCCL_SPLIT_NOCOLOR) {
        *newcomm = NULL;
    } else if (rc == ncclSuccess) {
        /* Members: same color, ordered by (key, parent rank). */
        for (int r = 0; r < comm->nranks; r++) {
            if (all[r][0] != color)
                continue;
            n++;
            if (all[r][1] < key || (all[r][1] == key && r < comm->rank))
                me++;
        }
        rc = comm_init(newcomm, n,
                       comm->token * 0x9e3779b97f4a7c15ULL + comm->splits * 1315423911ULL +
                           (uint64_t)(uint32_t)color + 1,
                       me);
    }
    nvtx_pop();
    free(all);
    return set_err(comm, rc, rc == ncclSuccess ? NULL : "split failed");
}

ncclResult_t
pncclCommFinalize(ncclComm_t comm)
{
    return comm_ok(comm) ? ncclSuccess : ncclInvalidArgument;
}

ncclResult_t
pncclCommDestroy(ncclComm_t comm)
{
    if (!comm_ok(comm))
        return ncclInvalidArgument;
    comm_free(comm);
    return ncclSuccess;
}

ncclResult_t
pncclCommAbort(ncclComm_t comm)
{
    if (!comm_ok(comm))
        return ncclInvalidArgument;
    shm_lock(comm->shm);
    comm->shm->broken = 1;
    pthread_cond_broadcast(&comm->shm->cv);
    pthread_mutex_unlock(&comm->shm->mu);
    comm_free(comm);
    return ncclSuccess;
}

ncclResult_t
pncclCommCount(const ncclComm_t comm, int *count)
{
    if (!comm_ok(comm) || !count)
        return ncclInvalidArgument;
    *count = comm->nranks;
    return ncclSuccess;
}

ncclResult_t
pncclCommUserRank(const ncclComm_t comm, int *rank)
{
    if (!comm_ok(comm) || !rank)
        return ncclInvalidArgument;
    *rank = comm->rank;
    return ncclSuccess;
}

ncclResult_t
pncclCommCuDevice(const ncclComm_t comm, int *device)
{
    if (!comm_ok(comm) || !device)
        return ncclInvalidArgument;
    *device = comm->dev;
    return ncclSuccess;
}

ncclResult_t
pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    if (!comm_ok(comm) || !asyncError)
        return ncclInvalidArgument;
    *asyncError = (ncclResult_t)atomic_load(&comm->async_err);
    return ncclSuccess;
}

const char *
pncclGetErrorString(ncclResult_t result)
{
    switch (result) {
    case ncclSuccess:
        return "no error";
    case ncclUnhandledCudaError:
        return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
        return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
        return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument:
        return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
        return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
        return "remote process exited or there was a network error";
    case ncclInProgress:
        return "NCCL operation in progress";
    default:
        return "unknown result code";
    }
}

const char *
pncclGetLastError(ncclComm_t comm)
{
    if (comm_ok(comm) && comm->last_error[0])
        return comm->last_error;
    return t_last_error;
}

/* Weak aliases of this file's functions (NCCL_ALIAS: simgpu_internal.h). */
NCCL_ALIAS(ncclGetVersion);
NCCL_ALIAS(ncclGetUniqueId);
NCCL_ALIAS(ncclCommInitRank);
NCCL_ALIAS(ncclCommInitRankConfig);
NCCL_ALIAS(ncclCommSplit);
NCCL_ALIAS(ncclCommFinalize);
NCCL_ALIAS(ncclCommDestroy);
NCCL_ALIAS(ncclCommAbort);
NCCL_ALIAS(ncclCommCount);
NCCL_ALIAS(ncclCommUserRank);
NCCL_ALIAS(ncclCommCuDevice);
NCCL_ALIAS(ncclCommGetAsyncError);
NCCL_ALIAS(ncclGetErrorString);
NCCL_ALIAS(ncclGetLastError);
