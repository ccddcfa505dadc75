/* ddp-sim: a DDP-like data-parallel training job on CUDA, NCCL and NVTX.
 *
 * Built against the real headers and linked only against libcudart.so.13 and
 * libnccl.so.2, like a real job.  On the simulated device (tests/simgpu) kernel
 * names are told to the device through simgpu_register_kernel and the work of each
 * launch (FLOPs, bytes, class: never its time, which the device decides) through
 * simgpu_set_next_launch_work, looked up with dlsym so the binary has no link
 * dependency on the simulator.
 *
 * One iteration (what PyTorch DDP does):
 *  - forward, layer by layer, on the main thread, on the compute stream (the
 *    legacy default stream, as PyTorch; a created stream with --cuda-graph);
 *  - backward on a second host thread (the autograd engine's device thread), in
 *    reverse layer order; when the last gradient of a bucket is produced an event
 *    is recorded on the compute stream, the communication stream (non-blocking)
 *    waits for it and runs ncclAllReduce of the bucket;
 *  - the main thread waits for the backward thread, makes the compute stream
 *    wait for the communication stream, runs the optimizer (Adam, multi-tensor
 *    kernels), copies the loss to the host and synchronises: one host
 *    synchronisation per iteration, inside an NVTX range "iteration N".
 * Memory comes from a caching allocator: cudaMalloc of rounded blocks at first
 * use, reused afterwards; peak_memory_bytes is the peak of bytes in use (like
 * torch.cuda.max_memory_allocated).
 *
 * Prints one JSON line at the end.  Run `ddp-sim --help` for the options. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop
#include <nvtx3/nvToolsExt.h>

#include "ddp_sim.h"
#include "simgpu.h" /* struct simgpu_work only: the functions are looked up with dlsym */
#include "simrun_rdzv.h"

#define SMALL_FIXED_US 3.0 /* per-kernel fixed cost that fusion saves */
/* The presets' tables are durations on a reference device (an A100 at fp32, 1.5 TB/s
 * achieved); their work is those durations at the reference rates, so that the device's
 * simple physics (3 us + FLOPs / 19.5 TFLOP/s, 3 us + bytes / 1.5 TB/s) gives the tables'
 * times back and a world's physics times the same work on its own device. */
#define REF_FLOPS_PER_US 19.5e6
#define REF_BYTES_PER_US 1.5e6

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "ddp-sim rank %d: %s failed: %s (%s:%d)\n", g.rank, #call,             \
                    cudaGetErrorString(e_), __FILE__, __LINE__);                                   \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)
#define NK(call)                                                                                   \
    do {                                                                                           \
        ncclResult_t r_ = (call);                                                                  \
        if (r_ != ncclSuccess) {                                                                   \
            fprintf(stderr, "ddp-sim rank %d: %s failed: %s\n", g.rank, #call,                     \
                    ncclGetErrorString(r_));                                                       \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* ---- options ------------------------------------------------------------------------ */
struct opts {
    const char *preset;
    int layers;
    int batch;
    double bucket_mb, first_bucket_mb;
    int accum_steps;
    const char *recompute;
    int fuse_small;
    int cuda_graph;
    int iterations, warmup;
    int crash_rank, crash_iter;
    double op_overhead_us;
    int dtype; /* enum simgpu_dtype of the GEMMs */
};

/* ---- the job's state ---------------------------------------------------------------- */
struct bucket {
    int first_layer, last_layer; /* layers [first, last] (backward reaches last first) */
    uint64_t bytes;
    void *buf;
    cudaEvent_t ready;
};

static struct {
    struct opts o;
    int rank, world, dev;
    struct ddp_model m;
    double scale;             /* batch / reference batch */
    double small_us_per_elem; /* small kernels: cost of one element (small_cost_init) */
    char *recompute;          /* per layer: 1 when recomputed */
    struct bucket *buckets;
    int nbuckets;
    cudaStream_t compute, comm;
    cudaEvent_t comm_done;
    ncclComm_t nccl;
    void **act;    /* per layer activation tensor of the current micro-batch */
    void **params; /* per layer */
    void *opt_state, *loss_dev;
    float *loss_host;
    uint64_t param_bytes;
    int kernels_launched, allreduces;
    /* backward thread hand-off */
    pthread_t bwd_thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int bwd_go, bwd_done, bwd_sync_grads, bwd_quit;
    /* simulator hooks (NULL on a real device) */
    int (*reg)(const void *, const char *, uint64_t);
    void (*next_work)(const struct simgpu_work *);
} g;

/* Kernel "functions": distinct addresses, one per kernel kind. */
static const char g_kfunc[DDP_K_COUNT];
static const char *const g_kname[DDP_K_COUNT] = {
    "ampere_sgemm_128x64_nn",
    "ampere_sgemm_128x64_nt_dgrad",
    "ampere_sgemm_64x64_tn_wgrad",
    "vectorized_elementwise_kernel",
    "vectorized_elementwise_kernel_backward",
    "triton_poi_fused_elementwise",
    "triton_poi_fused_elementwise_backward",
    "multi_tensor_apply_kernel_adam",
    "cross_entropy_loss_forward",
};

/* ---- caching allocator ------------------------------------------------------------------ */
struct cblock {
    void *ptr;
    size_t size;
    int used;
};

static struct {
    struct cblock *b;
    int n, cap;
    size_t in_use, peak, reserved;
} A;

static size_t
round_size(size_t n)
{
    if (n <= (1u << 20))
        return (n + 511) & ~(size_t)511;
    return (n + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
}

static void *
cache_alloc(size_t n)
{
    size_t sz = round_size(n ? n : 1);
    int best = -1;
    for (int i = 0; i < A.n; i++)
        if (!A.b[i].used && A.b[i].size >= sz && A.b[i].size <= 2 * sz &&
            (best < 0 || A.b[i].size < A.b[best].size))
            best = i;
    if (best < 0) {
        if (A.n == A.cap) {
            A.cap = A.cap ? 2 * A.cap : 64;
            A.b = realloc(A.b, (size_t)A.cap * sizeof(*A.b));
            if (!A.b) {
                fprintf(stderr, "ddp-sim: out of host memory\n");
                exit(1);
            }
        }
        CK(cudaMalloc(&A.b[A.n].ptr, sz));
        A.b[A.n].size = sz;
        A.reserved += sz;
        best = A.n++;
    }
    A.b[best].used = 1;
    A.in_use += A.b[best].size;
    if (A.in_use > A.peak)
        A.peak = A.in_use;
    return A.b[best].ptr;
}

static void
cache_free(void *p)
{
    for (int i = 0; i < A.n; i++)
        if (A.b[i].ptr == p && A.b[i].used) {
            A.b[i].used = 0;
            A.in_use -= A.b[i].size;
            return;
        }
}

/* ---- launches --------------------------------------------------------------------------- */
/* The part of a reference duration that scales with the batch (the rest, up to
 * SMALL_FIXED_US, is the kernel's fixed cost), in reference microseconds. */
static double
scaled_var_us(double ref_us)
{
    double fixed = ref_us < SMALL_FIXED_US ? ref_us : SMALL_FIXED_US;
    return (ref_us - fixed) * g.scale;
}

/* Work of a compute-bound kernel of reference duration ref_us moving `bytes`. */
static struct simgpu_work
compute_work(double ref_us, double bytes)
{
    struct simgpu_work w = {SIMGPU_CLASS_COMPUTE, g.o.dtype,
                            scaled_var_us(ref_us) * REF_FLOPS_PER_US, bytes};
    return w;
}

/* Work of a memory-bound kernel whose variable part takes var_us at the reference rate. */
static struct simgpu_work
memory_work(double var_us)
{
    struct simgpu_work w = {SIMGPU_CLASS_MEMORY, SIMGPU_FP32, 0, var_us * REF_BYTES_PER_US};
    return w;
}

static double now_us(void);

/* Launches kernel kind k doing `work` on s with grid (gx, 1, 1) and 256 threads per
 * block. */
static void
launch_dims(enum ddp_kernel_kind k, struct simgpu_work work, unsigned gx, cudaStream_t s)
{
    dim3 grid = {gx, 1, 1}, block = {256, 1, 1};
    /* The framework's own host time per operator (dispatcher, autograd). */
    if (g.o.op_overhead_us > 0) {
        double until = now_us() + g.o.op_overhead_us;
        while (now_us() < until)
            ;
    }
    if (g.next_work)
        g.next_work(&work);
    CK(cudaLaunchKernel((const void *)&g_kfunc[k], grid, block, NULL, 0, s));
    g.kernels_launched++;
}

/* Compute-bound kernels: one wave of 108 blocks, whatever their size. */
static void
launch(enum ddp_kernel_kind k, struct simgpu_work work, cudaStream_t s)
{
    launch_dims(k, work, 108, s);
}

/* Elements one small kernel of layer i touches: its activations (fp32) at this batch. */
static double
small_elements(int i)
{
    return (double)g.m.layers[i].act_bytes / 4 * g.scale;
}

/* The cost of one element in a small kernel: the model's small kernels take, at the
 * reference batch, as long together as the table's small_us say (the table's per-layer
 * shares are redistributed in proportion to the layers' activation sizes). */
static void
small_cost_init(void)
{
    double var_us = 0, elems = 0;
    for (int i = 0; i < g.m.nlayers; i++) {
        const struct ddp_layer *l = &g.m.layers[i];
        double v = l->small_us > SMALL_FIXED_US ? l->small_us - SMALL_FIXED_US : 0;
        var_us += l->nsmall * v;
        elems += l->nsmall * (double)l->act_bytes / 4;
    }
    g.small_us_per_elem = elems > 0 ? var_us / elems : 0;
}

/* Small kernels of layer i: n of them, or one fused kernel. Each is elementwise over the
 * layer's activations, as real ones are: SMALL_FIXED_US + elements * the cost of an
 * element, on a grid of one block per 1024 elements (256 threads of 4 elements); the
 * fused kernel pays the fixed cost once and covers the n kernels' elements. */
static void
launch_small(int n, int i, int bwd)
{
    if (n <= 0)
        return;
    double elems = small_elements(i);
    double var_us = elems * g.small_us_per_elem;
    unsigned gx = (unsigned)(elems / 1024) + 1;
    if (g.o.fuse_small) {
        launch_dims(bwd ? DDP_K_FUSED_BWD : DDP_K_FUSED, memory_work(n * var_us), gx * (unsigned)n,
                    g.compute);
        return;
    }
    for (int k = 0; k < n; k++)
        launch_dims(bwd ? DDP_K_ELEMENTWISE_BWD : DDP_K_ELEMENTWISE, memory_work(var_us), gx,
                    g.compute);
}

static uint64_t act_bytes(int i);

/* Bytes a main kernel of layer i moves: its share of the weights, its input and output. */
static double
gemm_bytes(int i)
{
    const struct ddp_layer *l = &g.m.layers[i];
    return ((double)l->param_bytes + 2.0 * (double)act_bytes(i)) / l->nmain;
}

static void
layer_forward(int i)
{
    const struct ddp_layer *l = &g.m.layers[i];
    for (int m = 0; m < l->nmain; m++) {
        int smalls = l->nsmall / l->nmain + (m < l->nsmall % l->nmain);
        launch(DDP_K_GEMM, compute_work(l->fwd_us / l->nmain, gemm_bytes(i)), g.compute);
        launch_small(smalls, i, 0);
    }
}

static void
layer_backward(int i)
{
    const struct ddp_layer *l = &g.m.layers[i];
    for (int m = l->nmain - 1; m >= 0; m--) {
        int smalls = l->nsmall / l->nmain + (m < l->nsmall % l->nmain);
        launch_small(smalls, i, 1);
        launch(DDP_K_GEMM_DGRAD, compute_work(l->bwd_us / l->nmain / 2, gemm_bytes(i)), g.compute);
        launch(DDP_K_GEMM_WGRAD, compute_work(l->bwd_us / l->nmain / 2, gemm_bytes(i)), g.compute);
    }
}

static uint64_t
act_bytes(int i)
{
    return (uint64_t)((double)g.m.layers[i].act_bytes * g.scale);
}

/* ---- one micro-batch ---------------------------------------------------------------------- */
static void
forward(void)
{
    for (int i = 0; i < g.m.nlayers; i++) {
        /* A recomputed layer keeps only a checkpoint of its input (1/8). */
        uint64_t keep = g.recompute[i] ? act_bytes(i) / 8 : act_bytes(i);
        g.act[i] = cache_alloc(keep);
        layer_forward(i);
    }
    launch(DDP_K_LOSS, memory_work(scaled_var_us(20)), g.compute);
}

static void
backward(int sync_grads)
{
    int b = 0;
    for (int i = g.m.nlayers - 1; i >= 0; i--) {
        void *tmp = NULL;
        if (g.recompute[i]) {
            /* Re-run the forward of the layer to rebuild its activations. */
            tmp = cache_alloc(act_bytes(i));
            layer_forward(i);
        }
        layer_backward(i);
        if (tmp)
            cache_free(tmp);
        cache_free(g.act[i]);
        g.act[i] = NULL;
        while (sync_grads && b < g.nbuckets && g.buckets[b].first_layer == i) {
            struct bucket *k = &g.buckets[b++];
            CK(cudaEventRecord(k->ready, g.compute));
            CK(cudaStreamWaitEvent(g.comm, k->ready, 0));
            NK(ncclAllReduce(k->buf, k->buf, k->bytes / 4, ncclFloat32, ncclSum, g.nccl, g.comm));
            g.allreduces++;
        }
    }
}

/* The autograd engine's device thread. */
static void *
bwd_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "ddp-bwd"); /* tests/simgpu/thread_cpu.py */
    CK(cudaSetDevice(g.dev));
    pthread_mutex_lock(&g.mu);
    for (;;) {
        int sync;
        while (!g.bwd_go && !g.bwd_quit)
            pthread_cond_wait(&g.cv, &g.mu);
        if (g.bwd_quit)
            break;
        g.bwd_go = 0;
        sync = g.bwd_sync_grads;
        pthread_mutex_unlock(&g.mu);
        backward(sync);
        pthread_mutex_lock(&g.mu);
        g.bwd_done = 1;
        pthread_cond_broadcast(&g.cv);
    }
    pthread_mutex_unlock(&g.mu);
    return NULL;
}

static void
run_backward(int sync_grads)
{
    pthread_mutex_lock(&g.mu);
    g.bwd_sync_grads = sync_grads;
    g.bwd_done = 0;
    g.bwd_go = 1;
    pthread_cond_broadcast(&g.cv);
    while (!g.bwd_done)
        pthread_cond_wait(&g.cv, &g.mu);
    pthread_mutex_unlock(&g.mu);
}

/* Everything an optimizer step enqueues: micro-batches, all-reduce, Adam. */
static void
step_body(void)
{
    uint64_t chunk = 64ULL << 20;
    for (int k = 0; k < g.o.accum_steps; k++) {
        forward();
        run_backward(k == g.o.accum_steps - 1);
    }
    CK(cudaEventRecord(g.comm_done, g.comm));
    CK(cudaStreamWaitEvent(g.compute, g.comm_done, 0));
    if (!g.opt_state)
        g.opt_state = cache_alloc(2 * g.param_bytes);
    /* Adam reads p, g, m, v and writes p, m, v: 7 passes over the bytes. */
    for (uint64_t off = 0; off < g.param_bytes; off += chunk) {
        uint64_t n = g.param_bytes - off < chunk ? g.param_bytes - off : chunk;
        launch(DDP_K_ADAM, memory_work((double)n * 7 / REF_BYTES_PER_US), g.compute);
    }
}

/* ---- setup ------------------------------------------------------------------------------------
 */
static int
parse_recompute(const char *spec)
{
    char *s, *tok, *save = NULL;
    if (!spec)
        return 0;
    if (!strcmp(spec, "all")) {
        memset(g.recompute, 1, (size_t)g.m.nlayers);
        return 0;
    }
    s = strdup(spec);
    if (!s)
        return -1;
    for (tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int a, b;
        if (sscanf(tok, "%d-%d", &a, &b) != 2) {
            if (sscanf(tok, "%d", &a) != 1) {
                free(s);
                return -1;
            }
            b = a;
        }
        for (int i = a; i <= b; i++)
            if (i >= 0 && i < g.m.nlayers)
                g.recompute[i] = 1;
    }
    free(s);
    return 0;
}

/* Buckets in backward order, as DDP builds them: the first bucket (the last
 * layers) is capped at first_bucket_mb, the others at bucket_mb. */
static void
make_buckets(void)
{
    uint64_t cap = (uint64_t)(g.o.first_bucket_mb * 1048576.0), cur = 0;
    int last = g.m.nlayers - 1;
    g.buckets = calloc((size_t)g.m.nlayers, sizeof(*g.buckets));
    if (!g.buckets)
        exit(1);
    for (int i = g.m.nlayers - 1; i >= 0; i--) {
        cur += g.m.layers[i].param_bytes;
        if (cur >= cap || i == 0) {
            struct bucket *b = &g.buckets[g.nbuckets++];
            b->last_layer = last;
            b->first_layer = i;
            b->bytes = (cur + 3) & ~(uint64_t)3;
            cur = 0;
            last = i - 1;
            cap = (uint64_t)(g.o.bucket_mb * 1048576.0);
        }
    }
}

static void
usage(FILE *f)
{
    fprintf(
        f, "usage: ddp-sim [options]   (ranks from RANK/WORLD_SIZE/LOCAL_RANK, e.g. under simrun)\n"
           "  --preset NAME          resnet50 | bert-large | gpt (default resnet50)\n"
           "  --layers N             repeated blocks (resnet50: bottlenecks; others: transformer "
           "blocks)\n"
           "  --batch B              per-rank micro-batch (default: the preset's reference batch)\n"
           "  --bucket-mb MB         DDP bucket cap (default 25)\n"
           "  --first-bucket-mb MB   cap of the first bucket (default 1)\n"
           "  --accum-steps K        gradient accumulation: all-reduce every K micro-batches (1)\n"
           "  --recompute LIST       recompute the forward of layers LIST (e.g. 1-10,14 or all)\n"
           "  --fuse-small           fuse consecutive small kernels\n"
           "  --cuda-graph           capture the step into a CUDA graph after warm-up\n"
           "  --op-overhead-us US    host time of the framework per operator (default 10)\n"
           "  --dtype T              the GEMMs' type: fp32 (default), tf32, bf16, fp16\n"
           "  --iterations N         measured iterations (default 10)\n"
           "  --warmup N             warm-up iterations, not measured (default 2)\n"
           "  --crash-rank R --crash-iter I   rank R dies (SIGKILL) at iteration I (tests)\n");
}

static void
parse(int argc, char **argv)
{
    static const struct option lo[] = {
        {"preset", required_argument, NULL, 'p'},
        {"layers", required_argument, NULL, 'l'},
        {"batch", required_argument, NULL, 'b'},
        {"bucket-mb", required_argument, NULL, 'B'},
        {"first-bucket-mb", required_argument, NULL, 'F'},
        {"accum-steps", required_argument, NULL, 'a'},
        {"recompute", required_argument, NULL, 'r'},
        {"fuse-small", no_argument, NULL, 'f'},
        {"cuda-graph", no_argument, NULL, 'g'},
        {"iterations", required_argument, NULL, 'i'},
        {"warmup", required_argument, NULL, 'w'},
        {"crash-rank", required_argument, NULL, 'C'},
        {"crash-iter", required_argument, NULL, 'I'},
        {"help", no_argument, NULL, 'h'},
        {"op-overhead-us", required_argument, NULL, 'O'},
        {"dtype", required_argument, NULL, 'D'},
        {NULL, 0, NULL, 0},
    };
    int c;
    g.o.preset = "resnet50";
    g.o.bucket_mb = 25;
    g.o.first_bucket_mb = 1;
    g.o.accum_steps = 1;
    g.o.iterations = 10;
    g.o.warmup = 2;
    g.o.crash_rank = -1;
    g.o.crash_iter = -1;
    g.o.op_overhead_us = 10;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        switch (c) {
        case 'p':
            g.o.preset = optarg;
            break;
        case 'l':
            g.o.layers = atoi(optarg);
            break;
        case 'b':
            g.o.batch = atoi(optarg);
            break;
        case 'B':
            g.o.bucket_mb = atof(optarg);
            break;
        case 'F':
            g.o.first_bucket_mb = atof(optarg);
            break;
        case 'a':
            g.o.accum_steps = atoi(optarg);
            break;
        case 'r':
            g.o.recompute = optarg;
            break;
        case 'f':
            g.o.fuse_small = 1;
            break;
        case 'g':
            g.o.cuda_graph = 1;
            break;
        case 'i':
            g.o.iterations = atoi(optarg);
            break;
        case 'w':
            g.o.warmup = atoi(optarg);
            break;
        case 'C':
            g.o.crash_rank = atoi(optarg);
            break;
        case 'I':
            g.o.crash_iter = atoi(optarg);
            break;
        case 'O':
            g.o.op_overhead_us = atof(optarg);
            break;
        case 'D':
            g.o.dtype = !strcmp(optarg, "fp32")   ? SIMGPU_FP32
                        : !strcmp(optarg, "tf32") ? SIMGPU_TF32
                        : !strcmp(optarg, "bf16") ? SIMGPU_BF16
                        : !strcmp(optarg, "fp16") ? SIMGPU_FP16
                                                  : -1;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            exit(2);
        }
    }
    if (g.o.accum_steps < 1 || g.o.iterations < 1 || g.o.warmup < 0 || g.o.bucket_mb <= 0 ||
        g.o.first_bucket_mb <= 0 || g.o.dtype < 0) {
        usage(stderr);
        exit(2);
    }
    if (g.o.cuda_graph && g.o.warmup < 1)
        g.o.warmup = 1; /* the caching allocator must be warm before capture */
}

static int
env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

static double
now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* Sets up the job once the options are parsed: the model, the device, the communicator
 * (with DDP's broadcast of the parameters from rank 0), the buffers and the backward
 * thread.  Returns 0, or the process's exit status. */
static int
setup(void)
{
    ncclUniqueId id;
    int ndev = 0;

    /* ddp-sim's buffers hold nothing: the NCCL stand-in need not move their data (copying
     * gigabytes of gradients in real time would slow the simulated job down).  The user's
     * SIMGPU_NCCL_DATA wins; every rank of a communicator must agree. */
    setenv("SIMGPU_NCCL_DATA", "0", 0);
    g.rank = env_int("RANK", 0);
    g.world = env_int("WORLD_SIZE", 1);
    if (ddp_model_preset(g.o.preset, g.o.layers, &g.m)) {
        fprintf(stderr, "ddp-sim: unknown preset '%s'\n", g.o.preset);
        return 2;
    }
    if (g.o.batch <= 0)
        g.o.batch = g.m.ref_batch;
    g.scale = (double)g.o.batch / g.m.ref_batch;
    small_cost_init();
    g.recompute = calloc((size_t)g.m.nlayers, 1);
    g.act = calloc((size_t)g.m.nlayers, sizeof(*g.act));
    if (!g.recompute || !g.act || parse_recompute(g.o.recompute)) {
        fprintf(stderr, "ddp-sim: bad --recompute list or no memory\n");
        return 2;
    }
    *(void **)&g.reg = dlsym(RTLD_DEFAULT, "simgpu_register_kernel");
    *(void **)&g.next_work = dlsym(RTLD_DEFAULT, "simgpu_set_next_launch_work");
    for (int k = 0; g.reg && k < DDP_K_COUNT; k++)
        g.reg(&g_kfunc[k], g_kname[k], 10000);

    CK(cudaGetDeviceCount(&ndev));
    g.dev = ndev > 0 ? env_int("LOCAL_RANK", 0) % ndev : 0;
    CK(cudaSetDevice(g.dev));
    if (g.o.cuda_graph)
        CK(cudaStreamCreate(&g.compute)); /* capture needs a stream of its own */
    else
        g.compute = 0; /* PyTorch computes on the legacy default stream */
    CK(cudaStreamCreateWithPriority(&g.comm, cudaStreamNonBlocking, -1));
    CK(cudaEventCreateWithFlags(&g.comm_done, cudaEventDisableTiming));

    if (g.rank == 0)
        NK(ncclGetUniqueId(&id));
    if (g.world > 1 && simrun_rdzv_share(g.rank, &id, sizeof(id), 60) != 0) {
        fprintf(stderr, "ddp-sim rank %d: cannot exchange the NCCL id (run under simrun)\n",
                g.rank);
        return 1;
    }
    NK(ncclCommInitRank(&g.nccl, g.world, id, g.rank));

    /* One tensor per layer's parameters, in forward order, as a framework builds the
     * model (the allocation trace shows the gradient sizes the buckets hold). */
    g.params = calloc((size_t)g.m.nlayers, sizeof(*g.params));
    if (!g.params) {
        fprintf(stderr, "ddp-sim: out of host memory\n");
        return 1;
    }
    for (int i = 0; i < g.m.nlayers; i++) {
        g.param_bytes += g.m.layers[i].param_bytes;
        g.params[i] = cache_alloc(g.m.layers[i].param_bytes);
    }
    make_buckets();
    for (int b = 0; b < g.nbuckets; b++) {
        g.buckets[b].buf = cache_alloc(g.buckets[b].bytes); /* gradients live in buckets */
        CK(cudaEventCreateWithFlags(&g.buckets[b].ready, cudaEventDisableTiming));
    }
    g.loss_dev = cache_alloc(4);
    CK(cudaMallocHost((void **)&g.loss_host, 4));
    CK(cudaMemsetAsync(g.loss_dev, 0, 4, g.compute));
    /* DDP broadcasts the parameters from rank 0 at construction. */
    for (int i = 0; i < g.m.nlayers; i++)
        NK(ncclBroadcast(g.params[i], g.params[i], g.m.layers[i].param_bytes / 4, ncclFloat32, 0,
                         g.nccl, g.comm));
    CK(cudaStreamSynchronize(g.comm));

    pthread_mutex_init(&g.mu, NULL);
    pthread_cond_init(&g.cv, NULL);
    if (pthread_create(&g.bwd_thread, NULL, bwd_main, NULL)) {
        fprintf(stderr, "ddp-sim: cannot start the backward thread\n");
        return 1;
    }
    return 0;
}

/* Runs the warm-up and measured iterations (each under an NVTX range, the step captured
 * in a CUDA graph after the warm-up with --cuda-graph); iter_us gets each measured
 * iteration's wall time.  Returns the graph executable, or NULL. */
static cudaGraphExec_t
run_iterations(double *iter_us)
{
    int total_iters;
    double t_prev;
    cudaGraphExec_t gexec = NULL;
    char label[32];

    total_iters = g.o.warmup + g.o.iterations;
    t_prev = now_us();
    for (int it = 0; it < total_iters; it++) {
        int measured = it - g.o.warmup;
        if (it == g.o.crash_iter && g.rank == g.o.crash_rank) {
            fprintf(stderr, "ddp-sim rank %d: dying at iteration %d (--crash-rank)\n", g.rank, it);
            raise(SIGKILL);
        }
        snprintf(label, sizeof(label), "iteration %d", it);
        nvtxRangePushA(label);
        if (g.o.cuda_graph && it >= g.o.warmup) {
            if (!gexec) {
                cudaGraph_t graph;
                CK(cudaStreamBeginCapture(g.compute, cudaStreamCaptureModeRelaxed));
                step_body();
                CK(cudaStreamEndCapture(g.compute, &graph));
                CK(cudaGraphInstantiate(&gexec, graph, 0));
                CK(cudaGraphDestroy(graph));
            }
            CK(cudaGraphLaunch(gexec, g.compute));
        } else {
            step_body();
        }
        /* loss.item(): the one host synchronisation of the iteration. */
        CK(cudaMemcpyAsync(g.loss_host, g.loss_dev, 4, cudaMemcpyDeviceToHost, g.compute));
        CK(cudaStreamSynchronize(g.compute));
        nvtxRangePop();
        {
            double t = now_us();
            if (measured >= 0)
                iter_us[measured] = t - t_prev;
            t_prev = t;
        }
    }

    return gexec;
}

/* Stops the backward thread, releases the graph and the communicator. */
static void
teardown(cudaGraphExec_t gexec)
{
    pthread_mutex_lock(&g.mu);
    g.bwd_quit = 1;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    pthread_join(g.bwd_thread, NULL);
    if (gexec)
        CK(cudaGraphExecDestroy(gexec));
    CK(cudaDeviceSynchronize());
    NK(ncclCommDestroy(g.nccl));
}

/* Prints the job's one JSON line: its settings, what an iteration did and took. */
static void
report(const double *iter_us)
{
    int total_iters = g.o.warmup + g.o.iterations;
    double sum = 0;
    for (int i = 0; i < g.o.iterations; i++)
        sum += iter_us[i];
    printf("{\"rank\":%d,\"world\":%d,\"preset\":\"%s\",\"layers\":%d,\"batch\":%d,"
           "\"accum_steps\":%d,\"bucket_mb\":%g,\"first_bucket_mb\":%g,\"fuse_small\":%d,"
           "\"cuda_graph\":%d,\"recompute\":\"%s\",\"buckets\":%d,\"param_bytes\":%llu,"
           "\"allreduces_per_iter\":%d,\"kernels_per_iter\":%d,\"iter_us\":[",
           g.rank, g.world, g.m.name, g.m.nlayers, g.o.batch, g.o.accum_steps, g.o.bucket_mb,
           g.o.first_bucket_mb, g.o.fuse_small, g.o.cuda_graph, g.o.recompute ? g.o.recompute : "",
           g.nbuckets, (unsigned long long)g.param_bytes,
           g.allreduces / (g.o.cuda_graph ? g.o.warmup + 1 : total_iters),
           g.kernels_launched / (g.o.cuda_graph ? g.o.warmup + 1 : total_iters));
    for (int i = 0; i < g.o.iterations; i++)
        printf("%s%.1f", i ? "," : "", iter_us[i]);
    printf("],\"mean_iter_us\":%.1f,\"samples_per_s\":%.1f,\"peak_memory_bytes\":%zu,"
           "\"reserved_bytes\":%zu}\n",
           sum / g.o.iterations,
           (double)g.o.batch * g.o.accum_steps * g.world / (sum / g.o.iterations / 1e6), A.peak,
           A.reserved);
    fflush(stdout);
}

int
main(int argc, char **argv)
{
    double *iter_us;
    int rc;

    parse(argc, argv);
    iter_us = calloc((size_t)g.o.iterations, sizeof(*iter_us));
    if (!iter_us) {
        fprintf(stderr, "ddp-sim: out of host memory\n");
        return 2;
    }
    if ((rc = setup()) != 0)
        return rc;
    teardown(run_iterations(iter_us));
    report(iter_us);
    ddp_model_free(&g.m);
    free(iter_us);
    return 0;
}
