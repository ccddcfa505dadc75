/* nccl_api.c: the rest of libnccl.so.2's API that ProcessGroupNCCL uses: the scalable
 * init, buffer and window registration, ncclMemAlloc/ncclMemFree, PreMulSum reduction
 * ops, and all-to-all and gather (grouped point-to-point, as NCCL builds them).
 * Registration keeps a handle and changes nothing in the timing or the data.  The entry points the
 * device does not do are in nccl_unsupported.c.
 *
 * Contract of every exported (p)nccl* function: the NCCL documentation.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop

#define SIMGPU_NCCL_INTERNAL /* the shared part of simgpu_internal.h */
#include "simgpu_internal.h"

#define REG_MAGIC 0x4e524547U /* "NREG" */
#define WIN_MAGIC 0x4e57494eU /* "NWIN" */
#define MAX_USER_OPS 256

/* A registration (ncclCommRegister) or a window (ncclCommWindowRegister). */
struct reg {
    uint32_t magic;
    struct ncclComm *comm;
    void *buff;
    size_t size;
};

/* A live PreMulSum op: its communicator, type and scalar (a value, or where it lies). */
struct user_op {
    struct ncclComm *comm;
    ncclDataType_t dtype;
    const void *scalar_dev;
    unsigned char scalar[8];
};

static pthread_mutex_t g_ops_mu = PTHREAD_MUTEX_INITIALIZER;
static struct user_op g_ops[MAX_USER_OPS];

ncclResult_t
pncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId,
                          ncclUniqueId *commIds, ncclConfig_t *config)
{
    /* Every id names the same communicator (NCCL spreads its bootstrap over them): the
     * first is enough here. */
    if (nId < 1 || !commIds)
        return ncclInvalidArgument;
    return pncclCommInitRankConfig(newcomm, nranks, commIds[0], myrank, config);
}

static ncclResult_t
reg_new(struct ncclComm *c, void *buff, size_t size, uint32_t magic, void **out)
{
    struct reg *r;
    if (!comm_ok(c) || !out || (!buff && size))
        return ncclInvalidArgument;
    r = calloc(1, sizeof(*r));
    if (!r)
        return ncclSystemError;
    r->magic = magic;
    r->comm = c;
    r->buff = buff;
    r->size = size;
    *out = r;
    return ncclSuccess;
}

static ncclResult_t
reg_free(struct ncclComm *c, void *h, uint32_t magic)
{
    struct reg *r = h;
    if (!comm_ok(c) || !r || r->magic != magic || r->comm != c)
        return ncclInvalidArgument;
    r->magic = 0;
    free(r);
    return ncclSuccess;
}

ncclResult_t
pncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle)
{
    return reg_new(comm, buff, size, REG_MAGIC, handle);
}

ncclResult_t
pncclCommDeregister(const ncclComm_t comm, void *handle)
{
    return reg_free(comm, handle, REG_MAGIC);
}

ncclResult_t
pncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win, int winFlags)
{
    void *h = NULL;
    ncclResult_t rc = reg_new(comm, buff, size, WIN_MAGIC, &h);
    if (rc == ncclSuccess && win)
        *win = (ncclWindow_t)h;
    return rc;
}

ncclResult_t
pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win)
{
    return reg_free(comm, (void *)win, WIN_MAGIC);
}

ncclResult_t
pncclMemAlloc(void **ptr, size_t size)
{
    opts();
    if (!ptr)
        return ncclInvalidArgument;
    return simgpu_malloc(ptr, size, NULL) == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
}

ncclResult_t
pncclMemFree(void *ptr)
{
    opts();
    if (!ptr)
        return ncclSuccess;
    return simgpu_free(ptr, NULL) == cudaSuccess ? ncclSuccess : ncclInvalidArgument;
}

ncclResult_t
pncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                          ncclScalarResidence_t residence, ncclComm_t comm)
{
    ncclResult_t rc = ncclInternalError;
    if (!op || !scalar || !comm_ok(comm) || (unsigned)datatype >= ncclNumTypes ||
        (residence != ncclScalarDevice && residence != ncclScalarHostImmediate))
        return ncclInvalidArgument;
    pthread_mutex_lock(&g_ops_mu);
    for (int i = 0; i < MAX_USER_OPS; i++)
        if (!g_ops[i].comm) {
            g_ops[i].comm = comm;
            g_ops[i].dtype = datatype;
            g_ops[i].scalar_dev = residence == ncclScalarDevice ? scalar : NULL;
            memset(g_ops[i].scalar, 0, sizeof(g_ops[i].scalar));
            if (residence == ncclScalarHostImmediate)
                memcpy(g_ops[i].scalar, scalar, type_size(datatype));
            *op = (ncclRedOp_t)(ncclNumOps + i);
            rc = ncclSuccess;
            break;
        }
    pthread_mutex_unlock(&g_ops_mu);
    return set_err(comm, rc, rc == ncclSuccess ? NULL : "too many PreMulSum ops alive");
}

ncclResult_t
pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm)
{
    ncclResult_t rc = ncclInvalidArgument;
    int i = (int)op - (int)ncclNumOps;
    if (!comm_ok(comm))
        return ncclInvalidArgument;
    pthread_mutex_lock(&g_ops_mu);
    if (i >= 0 && i < MAX_USER_OPS && g_ops[i].comm == comm) {
        g_ops[i].comm = NULL;
        rc = ncclSuccess;
    }
    pthread_mutex_unlock(&g_ops_mu);
    return set_err(comm, rc, rc == ncclSuccess ? NULL : "not a live PreMulSum op of comm");
}

int
premul_lookup(ncclRedOp_t op, const struct ncclComm *c, struct part_data *d)
{
    int i = (int)op - (int)ncclNumOps, rc = -1;
    pthread_mutex_lock(&g_ops_mu);
    if (i >= 0 && i < MAX_USER_OPS && g_ops[i].comm == c && g_ops[i].dtype == d->dtype) {
        d->premul = 1;
        d->scalar_dev = g_ops[i].scalar_dev;
        memcpy(d->scalar, g_ops[i].scalar, sizeof(d->scalar));
        rc = 0;
    }
    pthread_mutex_unlock(&g_ops_mu);
    return rc;
}

ncclResult_t
pncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
              ncclComm_t comm, cudaStream_t stream)
{
    ncclResult_t rc, rc2;
    size_t es = type_size(datatype);
    if (!comm_ok(comm) || (unsigned)datatype >= ncclNumTypes)
        return ncclInvalidArgument;
    nvtx_push("ncclAlltoAll");
    rc = pncclGroupStart();
    /* every peer but this rank itself: its own block is a local copy, no traffic */
    for (int r = 0; rc == ncclSuccess && r < comm->nranks; r++) {
        if (r == comm->rank) {
            rc = local_copy((const char *)sendbuff + (size_t)r * count * es,
                            (char *)recvbuff + (size_t)r * count * es, count, datatype, comm,
                            stream);
            continue;
        }
        rc = pncclSend((const char *)sendbuff + (size_t)r * count * es, count, datatype, r, comm,
                       stream);
        if (rc == ncclSuccess)
            rc = pncclRecv((char *)recvbuff + (size_t)r * count * es, count, datatype, r, comm,
                           stream);
    }
    rc2 = pncclGroupEnd();
    nvtx_pop();
    return rc != ncclSuccess ? rc : rc2;
}

ncclResult_t
pncclGather(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
            ncclComm_t comm, cudaStream_t stream)
{
    ncclResult_t rc, rc2;
    size_t es = type_size(datatype);
    if (!comm_ok(comm) || (unsigned)datatype >= ncclNumTypes || root < 0 || root >= comm->nranks)
        return ncclInvalidArgument;
    nvtx_push("ncclGather");
    rc = pncclGroupStart();
    if (comm->rank == root) {
        rc = local_copy(sendbuff, (char *)recvbuff + (size_t)root * count * es, count, datatype,
                        comm, stream);
        for (int r = 0; rc == ncclSuccess && r < comm->nranks; r++)
            if (r != root)
                rc = pncclRecv((char *)recvbuff + (size_t)r * count * es, count, datatype, r, comm,
                               stream);
    } else {
        rc = pncclSend(sendbuff, count, datatype, root, comm, stream);
    }
    rc2 = pncclGroupEnd();
    nvtx_pop();
    return rc != ncclSuccess ? rc : rc2;
}

/* Weak aliases of this file's functions (NCCL_ALIAS: simgpu_internal.h). */
NCCL_ALIAS(ncclCommInitRankScalable);
NCCL_ALIAS(ncclCommRegister);
NCCL_ALIAS(ncclCommDeregister);
NCCL_ALIAS(ncclCommWindowRegister);
NCCL_ALIAS(ncclCommWindowDeregister);
NCCL_ALIAS(ncclMemAlloc);
NCCL_ALIAS(ncclMemFree);
NCCL_ALIAS(ncclRedOpCreatePreMulSum);
NCCL_ALIAS(ncclRedOpDestroy);
NCCL_ALIAS(ncclAlltoAll);
NCCL_ALIAS(ncclGather);
