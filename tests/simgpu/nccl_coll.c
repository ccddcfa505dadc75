/* nccl_coll.c: libnccl.so.2's collectives, point-to-point, groups and enqueue (model: nccl.c). */
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

/* ---- collectives on the device ------------------------------------------------------- */
/* struct part: simgpu_internal.h.  A copy part (the own block of an all-to-all or gather)
 * meets no peer and takes no time: only its data move. */

struct coll_inst {
    struct ncclComm *comm;
    struct shm_hdr *shm;
    int rank, nranks;
    const char *name;
    int nparts;
    struct part parts[];
};

static struct rdv_slot *
part_slot(struct coll_inst *x, const struct part *p)
{
    struct shm_hdr *h = x->shm;
    int src, dst;
    if (p->kind == PART_COLL)
        return &h->coll[p->seq % SLOTS];
    src = p->kind == PART_SEND ? x->rank : p->peer;
    dst = p->kind == PART_SEND ? p->peer : x->rank;
    return &h->p2p[((size_t)src * (size_t)x->nranks + (size_t)dst) * P2P_SLOTS +
                   p->seq % P2P_SLOTS];
}

static int
part_meets(const struct part *p)
{
    return p->kind != PART_COPY;
}

static uint32_t
part_needed(const struct coll_inst *x, const struct part *p)
{
    return p->kind == PART_COLL ? (uint32_t)x->nranks : 2;
}

/* What the ranks must agree on for part p (struct rdv_desc). */
static struct rdv_desc
part_desc(const struct part *p)
{
    struct rdv_desc d = {0, 0, 0, 0, 0};
    if (p->kind != PART_COLL) {
        d.count = p->d.count * type_size(p->d.dtype);
        return d;
    }
    d.count = p->d.count;
    d.coll = p->coll;
    d.dtype = (int32_t)p->d.dtype;
    d.op = p->d.premul ? -1 : (int32_t)p->d.op;
    d.root = p->d.root;
    return d;
}

/* After the rendezvous: 1 when the ranks described a part of x differently, with *why
 * set.  Caller holds the segment's mutex. */
static int
parts_disagree(struct coll_inst *x, const char **why)
{
    for (int i = 0; i < x->nparts; i++) {
        if (!part_meets(&x->parts[i]) || !part_slot(x, &x->parts[i])->disagree)
            continue;
        *why = x->parts[i].kind == PART_COLL
                   ? "ranks disagree on a collective (count, type, operation or root)"
                   : "a send and its receive disagree on the size";
        return 1;
    }
    return 0;
}

/* World physics: the plan of part p (bytes as given) of x. */
static void
part_plan(const struct coll_inst *x, const struct part *p, uint64_t bytes,
          struct simgpu_nccl_plan *pl)
{
    const struct simgpu_world *w = simgpu_world();
    int gpn = w->gpus_per_node;
    simgpu_nccl_plan(w, p->kind == PART_COLL ? p->coll : SIMGPU_COLL_P2P, bytes,
                     p->kind == PART_COLL ? x->nranks : 2, x->rank / gpn == p->peer / gpn, pl);
}

/* World physics, at arrival: how much this rank's compute stretches part p (compute
 * kernels known to overlap it), in parts per million above 1. */
static uint32_t
part_stretch_ppm(const struct coll_inst *x, const struct part *p, uint64_t start)
{
    struct simgpu_nccl_plan pl;
    double f;
    part_plan(x, p, p->bytes, &pl);
    f = simgpu_span_cover(x->comm->dev, SIMGPU_SPAN_COMPUTE, start, start + (uint64_t)pl.time_ns,
                          1.0);
    return (uint32_t)(simgpu_world()->comm_by_comp * f * 1e6);
}

/* World physics, once every peer arrived: the end of the operation on this rank (ranks
 * leave a collective at slightly different times); records it as a communication span.
 * Caller holds the segment's mutex. */
static uint64_t
world_end(struct coll_inst *x, uint64_t start_ns)
{
    const struct simgpu_world *w = simgpu_world();
    struct simgpu_nccl_plan pl;
    uint64_t t = start_ns, first = 0, end;
    double early = 0;
    for (int i = 0; i < x->nparts; i++) {
        struct part *p = &x->parts[i];
        struct rdv_slot *s;
        double noise;
        if (!part_meets(p))
            continue;
        s = part_slot(x, p);
        noise = simgpu_lognormal(w->nccl_sigma,
                                 simgpu_hash4(w->seed, x->comm->token, (uint64_t)p->kind, p->seq));
        if (s->max_arrival > t)
            t = s->max_arrival;
        if (!first)
            first = t;
        part_plan(x, p, s->bytes, &pl);
        t += (uint64_t)(pl.time_ns * noise * (1 + s->stretch_ppm / 1e6));
        early = p->kind == PART_COLL ? simgpu_nccl_exit_early_ns(w, &pl, x->rank, x->nranks, p->seq)
                                     : 0;
    }
    end = t - (uint64_t)early;
    if (end < start_ns)
        end = start_ns;
    simgpu_span_add(x->comm->dev, SIMGPU_SPAN_COMM, first ? first : start_ns, end);
    return end;
}

/* Runs on the stream's worker, or on a thread waiting for the stream that found the
 * collective at its head (core.c): arrive at every part, wait for all peers (blocking
 * that thread), check that they agree on each part, move the data (nccl_data.c), end at
 * the modelled completion time. */
static int
coll_run(void *inst, uint64_t start_ns, uint64_t *end_ns)
{
    struct coll_inst *x = inst;
    struct shm_hdr *h = x->shm;
    uint64_t deadline = simgpu_now_ns() + (uint64_t)g_timeout_ns, t = start_ns;
    int failed = 0, done, complete = 0, odd, world = simgpu_physics() == SIMGPU_PHYSICS_WORLD;
    uint32_t stretch[8] = {0};
    const char *why = "peer dead, comm aborted or timeout";
    for (int i = 0; i < x->nparts && world && i < 8; i++)
        if (part_meets(&x->parts[i]))
            stretch[i] = part_stretch_ppm(x, &x->parts[i], start_ns);
    shm_lock(h);
    for (int i = 0; i < x->nparts; i++) {
        struct rdv_slot *s;
        struct rdv_desc d;
        if (!part_meets(&x->parts[i]))
            continue;
        s = part_slot(x, &x->parts[i]);
        d = part_desc(&x->parts[i]);
        if (s->seq != x->parts[i].seq + 1) {
            s->seq = x->parts[i].seq + 1;
            s->arrived = 0;
            s->max_arrival = 0;
            s->bytes = 0;
            s->stretch_ppm = 0;
            s->desc = d;
            s->disagree = 0;
        } else if (memcmp(&s->desc, &d, sizeof(d)) != 0) {
            s->disagree = 1;
        }
        s->arrived++;
        if (s->arrived >= part_needed(x, &x->parts[i]))
            complete = 1;
        if (start_ns > s->max_arrival)
            s->max_arrival = start_ns;
        if (x->parts[i].bytes > s->bytes)
            s->bytes = x->parts[i].bytes;
        if (i < 8 && stretch[i] > s->stretch_ppm)
            s->stretch_ppm = stretch[i];
    }
    /* The waiting peers wait for complete slots only: an arrival that completes none
     * wakes nobody. */
    if (complete)
        pthread_cond_broadcast(&h->cv);
    for (;;) {
        done = 1;
        for (int i = 0; i < x->nparts && done; i++)
            if (part_meets(&x->parts[i]) &&
                part_slot(x, &x->parts[i])->arrived < part_needed(x, &x->parts[i]))
                done = 0;
        if (done || wait_tick(h, deadline))
            break;
    }
    /* checked before !done too: a peer that found the disagreement broke the comm */
    odd = parts_disagree(x, &why);
    if (!done || odd) {
        h->broken = 1;
        pthread_cond_broadcast(&h->cv);
        failed = 1;
    } else if (world) {
        t = world_end(x, start_ns);
    } else {
        for (int i = 0; i < x->nparts; i++) {
            struct rdv_slot *s;
            if (!part_meets(&x->parts[i]))
                continue;
            s = part_slot(x, &x->parts[i]);
            if (s->max_arrival > t)
                t = s->max_arrival;
            t += (uint64_t)g_lat_ns + (uint64_t)((double)s->bytes * x->parts[i].factor / g_bw_gbps);
        }
    }
    pthread_mutex_unlock(&h->mu);
    /* Every peer arrived: the data move (the modelled end stays what it is). */
    if (!failed && data_run(h, x->rank, x->parts, x->nparts, deadline, &why) != 0)
        failed = 1;
    if (failed) {
        if (comm_ok(x->comm)) {
            atomic_store(&x->comm->async_err, ncclRemoteError);
            set_err(x->comm, ncclRemoteError, why);
        }
        fprintf(stderr, "simgpu nccl: rank %d: %s failed: %s\n", x->rank, x->name, why);
        *end_ns = simgpu_now_ns();
        return 1;
    }
    *end_ns = t;
    return 0;
}

/* Assigns sequence numbers in host order (at enqueue, and again for every launch
 * of a captured graph). */
static void
coll_assign(struct coll_inst *x)
{
    struct ncclComm *c = x->comm;
    for (int i = 0; i < x->nparts; i++) {
        struct part *p = &x->parts[i];
        if (p->kind == PART_COLL)
            p->seq = c->coll_seq++;
        else if (p->kind == PART_SEND)
            p->seq = c->send_seq[p->peer]++;
        else if (p->kind == PART_RECV)
            p->seq = c->recv_seq[p->peer]++;
    }
}

static void *
coll_clone(void *inst)
{
    struct coll_inst *x = inst;
    size_t sz = sizeof(*x) + (size_t)x->nparts * sizeof(struct part);
    struct coll_inst *y = malloc(sz);
    if (!y)
        return NULL;
    memcpy(y, x, sz);
    if (comm_ok(y->comm))
        coll_assign(y);
    return y;
}

static void
coll_release(void *inst)
{
    free(inst);
}

static const struct simgpu_custom_ops g_coll_ops = {coll_run, coll_clone, coll_release};

/* ---- naming (interned, lives forever) ---------------------------------------------- */
static const char *
intern(const char *s)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static char **tab;
    static size_t n;
    const char *r = NULL;
    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < n && !r; i++)
        if (!strcmp(tab[i], s))
            r = tab[i];
    if (!r) {
        char **nt = realloc(tab, (n + 1) * sizeof(*nt));
        char *d = strdup(s);
        if (nt && d) {
            tab = nt;
            tab[n++] = d;
            r = d;
        } else {
            free(d);
            if (nt)
                tab = nt;
            r = "ncclDevKernel";
        }
    }
    pthread_mutex_unlock(&mu);
    return r;
}

static const char *
type_name(ncclDataType_t t)
{
    static const char *n[] = {"i8",  "u8",  "i32", "u32",  "i64",    "u64",
                              "f16", "f32", "f64", "bf16", "f8e4m3", "f8e5m2"};
    return (unsigned)t < sizeof(n) / sizeof(n[0]) ? n[t] : "u8";
}

size_t
type_size(ncclDataType_t t)
{
    switch (t) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
        return 1;
    case ncclFloat16:
    case ncclBfloat16:
        return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
        return 4;
    default:
        return 8;
    }
}

/* ---- groups and enqueue ----------------------------------------------------------------- */
struct pending {
    struct ncclComm *comm;
    cudaStream_t stream;
    const char *name;
    struct part part;
};

static __thread int t_group_depth;
static __thread struct pending *t_pending;
static __thread int t_npending, t_cap_pending;

/* Launches one device operation for parts [from, to) of the pending list, all on
 * the same comm and stream, as NCCL does with cuLaunchKernelEx. */
static ncclResult_t
launch_parts(struct pending *pv, int from, int to)
{
    struct coll_inst *x;
    struct simgpu_stream *s;
    struct simgpu_op *op;
    struct simgpu_api api;
    cuLaunchKernelEx_params params;
    CUlaunchConfig cfg;
    cudaError_t crc;
    int rc;

    x = malloc(sizeof(*x) + (size_t)(to - from) * sizeof(struct part));
    if (!x)
        return ncclSystemError;
    x->comm = pv[from].comm;
    x->shm = x->comm->shm;
    x->rank = x->comm->rank;
    x->nranks = x->comm->nranks;
    x->nparts = to - from;
    /* NCCL's plan launches the kernel of its first part with a specialised kernel, else
     * of its last (src/enqueue.cc: kernelFn is replaced until kernelSpecialized) */
    x->name = NULL;
    for (int i = from, spec = 0; i < to; i++) {
        x->parts[i - from] = pv[i].part;
        if (!spec) {
            x->name = pv[i].name;
            spec = pv[i].part.specialized;
        }
    }

    memset(&cfg, 0, sizeof(cfg));
    cfg.gridDimX = 2;
    cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = 640;
    cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.hStream = (CUstream)pv[from].stream;
    params.config = &cfg;
    params.f = NULL;
    params.kernelParams = NULL;
    params.extra = NULL;
    simgpu_api_enter(&api, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
                     "cuLaunchKernelEx", &params, x->name);
    crc = simgpu_stream_resolve(pv[from].stream, 0, &s);
    op = crc == cudaSuccess ? simgpu_op_new(SIMGPU_OP_CUSTOM) : NULL;
    if (!op) {
        free(x);
        rc = crc == cudaSuccess ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_HANDLE;
        simgpu_api_exit(&api, &rc);
        return crc == cudaSuccess ? ncclSystemError : ncclInvalidArgument;
    }
    coll_assign(x);
    op->u.custom.ops = &g_coll_ops;
    op->u.custom.inst = x;
    op->u.custom.name = x->name;
    simgpu_host_launch(1.0);
    crc = simgpu_enqueue(s, op);
    rc = crc == cudaSuccess ? CUDA_SUCCESS : CUDA_ERROR_LAUNCH_FAILED;
    simgpu_api_exit(&api, &rc);
    return crc == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
}

static ncclResult_t
flush_pending(void)
{
    ncclResult_t rc = ncclSuccess;
    int i = 0;
    /* Consecutive entries on the same (comm, stream) become one kernel. */
    while (i < t_npending && rc == ncclSuccess) {
        int j = i + 1;
        while (j < t_npending && t_pending[j].comm == t_pending[i].comm &&
               t_pending[j].stream == t_pending[i].stream)
            j++;
        rc = launch_parts(t_pending, i, j);
        i = j;
    }
    t_npending = 0;
    return rc;
}

static ncclResult_t
submit(struct ncclComm *c, cudaStream_t stream, const char *name, struct part p)
{
    ncclResult_t rc;
    if (!comm_ok(c))
        return ncclInvalidArgument;
    if (atomic_load(&c->async_err) != ncclSuccess)
        return (ncclResult_t)atomic_load(&c->async_err);
    if ((p.kind != PART_COLL) && (p.peer < 0 || p.peer >= c->nranks))
        return set_err(c, ncclInvalidArgument, "peer out of range");
    if (t_npending == t_cap_pending) {
        int n = t_cap_pending ? t_cap_pending * 2 : 16;
        struct pending *np = realloc(t_pending, (size_t)n * sizeof(*np));
        if (!np)
            return ncclSystemError;
        t_pending = np;
        t_cap_pending = n;
    }
    t_pending[t_npending].comm = c;
    t_pending[t_npending].stream = stream;
    t_pending[t_npending].name = name;
    t_pending[t_npending].part = p;
    t_npending++;
    if (t_group_depth > 0)
        return ncclSuccess;
    rc = flush_pending();
    return rc;
}

/* ---- kernel names, as NCCL 2.19 and later name the kernel they launch ------------------- */
/* (src/device/generate.py best_kernel, src/enqueue.cc; tests/simgpu/README.md "NCCL's
 * kernel names").  Only kernels specialised for LL exist: a reduction's kernel is
 * <Coll>_Sum_<type>_<TREE|RING>_LL whatever its operation (signed integers named as
 * unsigned), TREE only for a tree all-reduce; AllGather and Broadcast have one RING_LL
 * kernel.  The kernel runs the chosen (algorithm, protocol) from a table when it is not its
 * own: its name tells the algorithm, never the protocol. */

/* The plan NCCL's tuner makes for a collective part (simple physics: a ring, LL). */
static void
name_plan(const struct ncclComm *c, const struct part *p, int *algo, int *proto)
{
    struct simgpu_nccl_plan pl;
    *algo = SIMGPU_ALGO_RING;
    *proto = SIMGPU_PROTO_LL;
    if (simgpu_physics() != SIMGPU_PHYSICS_WORLD || p->kind != PART_COLL || !comm_ok(c))
        return;
    simgpu_nccl_plan(simgpu_world(), p->coll, p->bytes, c->nranks, 1, &pl);
    *algo = pl.algo;
    *proto = pl.proto;
}

/* The kernel part p launches and whether it is specialised for p's function (NCCL's
 * ncclDevKernelForFuncIsSpecialized): Sum (any type), the kernel's algorithm, LL. */
static const char *
part_kernel(const struct ncclComm *c, const char *coll_name, int reduction, struct part *p)
{
    static const char *uns[] = {"u8", "u8", "u32", "u32", "u64", "u64"};
    char buf[128];
    int algo, proto;
    ncclDataType_t t = p->d.dtype;
    name_plan(c, p, &algo, &proto);
    p->specialized = proto == SIMGPU_PROTO_LL && (!reduction || p->d.op == ncclSum) &&
                     (reduction || algo == SIMGPU_ALGO_RING);
    if (reduction)
        snprintf(buf, sizeof(buf), "ncclDevKernel_%s_Sum_%s_%s_LL", coll_name,
                 (unsigned)t < 6 ? uns[t] : type_name(t),
                 algo == SIMGPU_ALGO_TREE ? "TREE" : "RING");
    else
        snprintf(buf, sizeof(buf), "ncclDevKernel_%s_RING_LL", coll_name);
    return intern(buf);
}

static ncclResult_t
coll(const char *api, const char *coll_name, int reduction, int kind, struct ncclComm *c,
     uint64_t bytes, double factor, cudaStream_t stream, const struct part_data *d)
{
    struct part p;
    ncclResult_t rc;
    opts();
    memset(&p, 0, sizeof(p));
    p.kind = PART_COLL;
    p.coll = kind;
    p.bytes = bytes;
    p.factor = factor;
    p.d = *d;
    nvtx_push(api);
    rc = submit(c, stream, part_kernel(c, coll_name, reduction, &p), p);
    nvtx_pop();
    return rc;
}

#define NEED_SEND 1 /* coll_args: the send buffer must not be NULL */
#define NEED_RECV 2 /* the receive buffer must not be NULL */

/* The data of a collective: checks the type, the operation (resolving a PreMulSum op of
 * c), the root (root < 0: none) and the buffers `need` names (when count > 0).  Returns
 * ncclSuccess or ncclInvalidArgument. */
static ncclResult_t
coll_args(struct part_data *d, const struct ncclComm *c, const void *sbuf, void *rbuf, size_t count,
          ncclDataType_t t, ncclRedOp_t op, int root, int need)
{
    memset(d, 0, sizeof(*d));
    d->sbuf = sbuf;
    d->rbuf = rbuf;
    d->count = count;
    d->dtype = t;
    d->op = op;
    d->root = root < 0 ? 0 : root;
    if (!comm_ok(c))
        return ncclInvalidArgument;
    if ((unsigned)t >= ncclNumTypes || (root >= 0 && root >= c->nranks))
        return set_err((struct ncclComm *)c, ncclInvalidArgument, "bad datatype or root");
    if ((unsigned)op >= ncclNumOps && premul_lookup(op, c, d) != 0)
        return set_err((struct ncclComm *)c, ncclInvalidArgument, "not a reduction op of comm");
    if (count && (((need & NEED_SEND) && !sbuf) || ((need & NEED_RECV) && !rbuf)))
        return set_err((struct ncclComm *)c, ncclInvalidArgument, "NULL buffer");
    return ncclSuccess;
}

static double
ring(const struct ncclComm *c, double num)
{
    return comm_ok(c) && c->nranks > 1 ? num * (c->nranks - 1) / c->nranks : 0;
}

ncclResult_t
pncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    struct part_data d;
    ncclResult_t rc =
        coll_args(&d, comm, sendbuff, recvbuff, count, datatype, op, -1, NEED_SEND | NEED_RECV);
    if (rc != ncclSuccess)
        return rc;
    return coll("ncclAllReduce", "AllReduce", 1, SIMGPU_COLL_ALLREDUCE, comm,
                count * type_size(datatype), ring(comm, 2), stream, &d);
}

ncclResult_t
pncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
            ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)
{
    struct part_data d;
    ncclResult_t rc =
        coll_args(&d, comm, sendbuff, recvbuff, count, datatype, op, root < 0 ? INT32_MAX : root,
                  comm_ok(comm) && comm->rank == root ? NEED_SEND | NEED_RECV : NEED_SEND);
    if (rc != ncclSuccess)
        return rc;
    return coll("ncclReduce", "Reduce", 1, SIMGPU_COLL_REDUCE, comm, count * type_size(datatype),
                comm->nranks > 1 ? 1 : 0, stream, &d);
}

ncclResult_t
pncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
               int root, ncclComm_t comm, cudaStream_t stream)
{
    struct part_data d;
    ncclResult_t rc = coll_args(
        &d, comm, sendbuff, recvbuff, count, datatype, ncclSum, root < 0 ? INT32_MAX : root,
        comm_ok(comm) && comm->rank == root ? NEED_SEND | NEED_RECV : NEED_RECV);
    if (rc != ncclSuccess)
        return rc;
    return coll("ncclBroadcast", "Broadcast", 0, SIMGPU_COLL_BROADCAST, comm,
                count * type_size(datatype), comm->nranks > 1 ? 1 : 0, stream, &d);
}

ncclResult_t
pncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
           cudaStream_t stream)
{
    return pncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

ncclResult_t
pncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
               ncclComm_t comm, cudaStream_t stream)
{
    struct part_data d;
    ncclResult_t rc = coll_args(&d, comm, sendbuff, recvbuff, sendcount, datatype, ncclSum, -1,
                                NEED_SEND | NEED_RECV);
    if (rc != ncclSuccess)
        return rc;
    return coll("ncclAllGather", "AllGather", 0, SIMGPU_COLL_ALLGATHER, comm,
                sendcount * type_size(datatype) * (uint64_t)comm->nranks, ring(comm, 1), stream,
                &d);
}

ncclResult_t
pncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,
                   ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    struct part_data d;
    ncclResult_t rc =
        coll_args(&d, comm, sendbuff, recvbuff, recvcount, datatype, op, -1, NEED_SEND | NEED_RECV);
    if (rc != ncclSuccess)
        return rc;
    return coll("ncclReduceScatter", "ReduceScatter", 1, SIMGPU_COLL_REDUCESCATTER, comm,
                recvcount * type_size(datatype) * (uint64_t)comm->nranks, ring(comm, 1), stream,
                &d);
}

static ncclResult_t
p2p(const char *api, enum part_kind kind, const void *sbuf, void *rbuf, size_t count,
    ncclDataType_t t, int peer, ncclComm_t comm, cudaStream_t stream)
{
    struct part p;
    ncclResult_t rc;
    opts();
    if (!comm_ok(comm))
        return ncclInvalidArgument;
    if ((unsigned)t >= ncclNumTypes || (count && !sbuf && !rbuf))
        return set_err(comm, ncclInvalidArgument, "bad datatype or NULL buffer");
    memset(&p, 0, sizeof(p));
    p.kind = kind;
    p.coll = SIMGPU_COLL_P2P;
    p.bytes = count * type_size(t);
    p.factor = 1;
    p.peer = peer;
    p.specialized = 1; /* the SendRecv kernel is its own */
    p.d.sbuf = sbuf;
    p.d.rbuf = rbuf;
    p.d.count = count;
    p.d.dtype = t;
    nvtx_push(api);
    rc = submit(comm, stream, intern("ncclDevKernel_SendRecv"), p);
    nvtx_pop();
    return rc;
}

ncclResult_t
pncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
          cudaStream_t stream)
{
    return p2p("ncclSend", PART_SEND, sendbuff, NULL, count, datatype, peer, comm, stream);
}

ncclResult_t
pncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
          cudaStream_t stream)
{
    return p2p("ncclRecv", PART_RECV, NULL, recvbuff, count, datatype, peer, comm, stream);
}

ncclResult_t
local_copy(const void *sbuf, void *rbuf, size_t count, ncclDataType_t t, ncclComm_t comm,
           cudaStream_t stream)
{
    struct part p;
    if (!comm_ok(comm))
        return ncclInvalidArgument;
    memset(&p, 0, sizeof(p));
    p.kind = PART_COPY;
    p.coll = SIMGPU_COLL_P2P;
    p.specialized = 1;
    p.peer = comm->rank;
    p.d.sbuf = sbuf;
    p.d.rbuf = rbuf;
    p.d.count = count;
    p.d.dtype = t;
    return submit(comm, stream, intern("ncclDevKernel_SendRecv"), p);
}

/* nccl.h declares the group calls without a prototype; give them one. */
ncclResult_t pncclGroupStart(void);
ncclResult_t pncclGroupEnd(void);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);

ncclResult_t
pncclGroupStart(void)
{
    t_group_depth++;
    return ncclSuccess;
}

ncclResult_t
pncclGroupEnd(void)
{
    if (t_group_depth <= 0)
        return ncclInvalidUsage;
    if (--t_group_depth > 0)
        return ncclSuccess;
    return flush_pending();
}

/* Weak aliases of this file's functions (NCCL_ALIAS: simgpu_internal.h). */
NCCL_ALIAS(ncclAllReduce);
NCCL_ALIAS(ncclReduce);
NCCL_ALIAS(ncclBroadcast);
NCCL_ALIAS(ncclBcast);
NCCL_ALIAS(ncclAllGather);
NCCL_ALIAS(ncclReduceScatter);
NCCL_ALIAS(ncclSend);
NCCL_ALIAS(ncclRecv);
NCCL_ALIAS(ncclGroupStart);
NCCL_ALIAS(ncclGroupEnd);
