/*
 * harden-job: jobs for the collector's hardening tests (test-hardening.py), on the
 * simulated device. One mode per case; each prints one line "key=value ..." that the
 * driver checks, besides the trace.
 *
 *   first-hook         a second thread's first hooked call while the writer converts a
 *                      launch whose kernel name lookup is slow (SIMGPU_FUNC_NAME_DELAY_MS):
 *                      prints first_hook_ms (the hook must not wait for the writer)
 *   vfork-exec LIB     vfork + execve while another thread is inside dlopen(LIB) (whose
 *                      constructor sleeps SLOWCTOR_MS, holding the loader's lock): prints
 *                      vfork_ms (the exec hook must not look anything up in the child)
 *   comms N            N communicators (one rank) created, used once and destroyed
 *   seq-gap            (2 ranks under simrun) the first all-reduce goes through unrecorded
 *                      on rank 1 (from a thread-exit destructor, after the collector's own),
 *                      recorded on rank 0; then 4 recorded all-reduces on both
 *   two-devices [HOW]  launches on the legacy and per-thread streams of devices 0 and 1,
 *                      switching with cudaSetDevice and cuCtxSetCurrent (HOW "both", the
 *                      default), cudaSetDevice alone ("runtime") or cuCtxSetCurrent
 *                      alone ("driver")
 *   unload             a driver launch, then the module unloaded before the writer drains
 *   fork-chain N       a chain of N processes, each forked by the one before after a
 *                      recorded call: each writes a trace of its own
 *   late-first MS      the process's first record comes MS ms after the writer starts (an
 *                      NVTX range, pushed then popped: the push starts the writer and
 *                      records nothing), then the job exits
 */
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>
#include <cuda_runtime_api.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop

#include <nvtx3/nvToolsExt.h>

#include "simrun_rdzv.h"

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "harden-job: " __VA_ARGS__);                                               \
        fputc('\n', stderr);                                                                       \
        exit(1);                                                                                   \
    } while (0)

static double
now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void
sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- first-hook ---------------------------------------------------------------------- */

static CUfunction g_func;
static double g_first_hook_ms;

static void *
first_hook_thread(void *arg)
{
    (void)arg;
    double t0 = now_ms();
    cuLaunchKernel(g_func, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
    g_first_hook_ms = now_ms() - t0;
    return NULL;
}

static CUfunction
drv_function(const char *name)
{
    CUcontext ctx;
    CUfunction f;
    if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS ||
        cuCtxSetCurrent(ctx) != CUDA_SUCCESS || cuModuleGetFunction(&f, NULL, name) != CUDA_SUCCESS)
        FAIL("no driver");
    return f;
}

static int
mode_first_hook(void)
{
    pthread_t th;
    g_func = drv_function("slow_named_kernel");
    /* The writer drains this launch within DPRO_DRAIN_MS and looks its name up (slowly). */
    cuLaunchKernel(g_func, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
    sleep_ms(100);
    pthread_create(&th, NULL, first_hook_thread, NULL);
    pthread_join(th, NULL);
    cuCtxSynchronize();
    printf("first_hook_ms=%.1f\n", g_first_hook_ms);
    return 0;
}

/* ---- vfork-exec ---------------------------------------------------------------------- */

static void *
dlopen_thread(void *arg)
{
    if (dlopen((const char *)arg, RTLD_NOW) == NULL)
        fprintf(stderr, "harden-job: %s\n", dlerror());
    return NULL;
}

static int
mode_vfork_exec(const char *lib)
{
    pthread_t th;
    char *argv[] = {"true", NULL};
    char *envp[] = {NULL};
    int status = 0;
    cudaFree(NULL); /* the job is recording */
    pthread_create(&th, NULL, dlopen_thread, (void *)lib);
    sleep_ms(100); /* the other thread is inside the slow constructor now */
    double t0 = now_ms();
    pid_t pid = vfork();
    if (pid == 0) {
        execve("/bin/true", argv, envp);
        _exit(127);
    }
    double ms = now_ms() - t0; /* the parent resumes when the child has exec'ed */
    waitpid(pid, &status, 0);
    pthread_join(th, NULL);
    printf("vfork_ms=%.1f child_status=%d\n", ms, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 0;
}

/* ---- comms --------------------------------------------------------------------------- */

static int
mode_comms(int n)
{
    cudaStream_t s;
    float *buf;
    int ok = 0;
    if (cudaStreamCreate(&s) != cudaSuccess || cudaMalloc((void **)&buf, 4096) != cudaSuccess)
        FAIL("no device");
    for (int i = 0; i < n; i++) {
        ncclUniqueId id;
        ncclComm_t comm;
        if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess)
            FAIL("comm %d", i);
        ok += ncclAllReduce(buf, buf, 16, ncclFloat32, ncclSum, comm, s) == ncclSuccess;
        if (cudaStreamSynchronize(s) != cudaSuccess)
            FAIL("sync %d", i);
        if (i % 2)
            ncclCommDestroy(comm);
        else
            ncclCommAbort(comm);
    }
    printf("collectives=%d\n", ok);
    return ok == n ? 0 : 1;
}

/* ---- seq-gap ------------------------------------------------------------------------- */

struct gap_ctx {
    ncclComm_t comm;
    cudaStream_t stream;
    float *buf;
    int rc;
};

static pthread_key_t g_gap_key;

/* Runs at thread exit after the collector's own destructor (our key is newer): the
 * collector no longer records this thread, the call passes through. */
static void
gap_destructor(void *arg)
{
    struct gap_ctx *g = arg;
    g->rc = ncclAllReduce(g->buf, g->buf, 64, ncclFloat32, ncclSum, g->comm, g->stream);
}

static void *
gap_thread(void *arg)
{
    struct gap_ctx *g = arg;
    cudaStreamQuery(g->stream); /* the collector starts recording this thread */
    pthread_setspecific(g_gap_key, g);
    return NULL;
}

static int
mode_seq_gap(void)
{
    int rank = atoi(getenv("RANK") ? getenv("RANK") : "0");
    int world = atoi(getenv("WORLD_SIZE") ? getenv("WORLD_SIZE") : "1");
    struct gap_ctx g = {0};
    ncclUniqueId id;
    pthread_t th;
    if (pthread_key_create(&g_gap_key, gap_destructor) != 0)
        FAIL("key");
    if (cudaStreamCreate(&g.stream) != cudaSuccess ||
        cudaMalloc((void **)&g.buf, 4096) != cudaSuccess)
        FAIL("no device");
    if (rank == 0 && ncclGetUniqueId(&id) != ncclSuccess)
        FAIL("id");
    if (simrun_rdzv_share(rank, &id, sizeof id, 20) != 0 ||
        ncclCommInitRank(&g.comm, world, id, rank) != ncclSuccess)
        FAIL("init");
    if (rank == 1) {
        pthread_create(&th, NULL, gap_thread, &g);
        pthread_join(th, NULL);
    } else {
        g.rc = ncclAllReduce(g.buf, g.buf, 64, ncclFloat32, ncclSum, g.comm, g.stream);
    }
    for (int i = 0; i < 4; i++)
        g.rc |= ncclAllReduce(g.buf, g.buf, 128 + i, ncclFloat32, ncclSum, g.comm, g.stream);
    cudaStreamSynchronize(g.stream);
    ncclCommDestroy(g.comm);
    printf("rank=%d rc=%d\n", rank, g.rc);
    return g.rc != ncclSuccess;
}

/* ---- two-devices --------------------------------------------------------------------- */

static int
mode_two_devices(const char *how)
{
    CUfunction f = drv_function("two_device_kernel");
    int rt = strcmp(how, "driver") != 0, drv = strcmp(how, "runtime") != 0;
    int ok = 0;
    for (int round = 0; round < 2; round++) {
        for (int dev = 0; dev < 2; dev++) {
            CUcontext ctx;
            if ((rt && cudaSetDevice(dev) != cudaSuccess) ||
                cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS ||
                (drv && cuCtxSetCurrent(ctx) != CUDA_SUCCESS))
                FAIL("device %d", dev);
            ok += cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) == CUDA_SUCCESS;
            ok += cuLaunchKernel(f, 2, 1, 1, 32, 1, 1, 0, CU_STREAM_PER_THREAD, NULL, NULL) ==
                  CUDA_SUCCESS;
            ok += cuLaunchKernel(f, 3, 1, 1, 32, 1, 1, 0, CU_STREAM_LEGACY, NULL, NULL) ==
                  CUDA_SUCCESS;
            cudaDeviceSynchronize();
        }
    }
    printf("launches=%d\n", ok);
    return ok == 12 ? 0 : 1;
}

/* ---- unload -------------------------------------------------------------------------- */

static int
mode_unload(void)
{
    CUfunction f = drv_function("jit_unloaded_kernel");
    int ok = cuLaunchKernel(f, 4, 1, 1, 64, 1, 1, 0, NULL, NULL, NULL) == CUDA_SUCCESS;
    cuCtxSynchronize();
    ok &= cuModuleUnload(NULL) == CUDA_SUCCESS;
    printf("unloaded=%d\n", ok);
    return ok ? 0 : 1;
}

/* ---- fork-chain --------------------------------------------------------------------- */

static int
mode_fork_chain(int n)
{
    int status = 0;
    for (int level = 0; level < n; level++) {
        cudaStreamQuery(NULL); /* this process records: its trace is opened */
        sleep_ms(30);          /* the writer opens the file (and writes the meta) now */
        if (level == n - 1)
            break;
        pid_t pid = fork();
        if (pid < 0)
            FAIL("fork");
        if (pid > 0) {
            waitpid(pid, &status, 0);
            return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
        }
    }
    printf("chain=%d\n", n);
    return 0;
}

/* ---- late-first ---------------------------------------------------------------------- */

static int
mode_late_first(int ms)
{
    nvtxRangePushA("late_first");
    sleep_ms(ms);
    nvtxRangePop();
    printf("ranges=1\n");
    return 0;
}

/* ---- exec-after -------------------------------------------------------------------- */

/* n recorded calls, then the process image is replaced by /bin/true (no exit handlers). */
static int
mode_exec_after(int n)
{
    char *argv[] = {"true", NULL};
    for (int i = 0; i < n; i++)
        cudaStreamQuery(NULL);
    printf("queries=%d\n", n);
    fflush(stdout);
    execv("/bin/true", argv);
    FAIL("exec");
}

int
main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "first-hook"))
        return mode_first_hook();
    if (!strcmp(mode, "vfork-exec") && argc > 2)
        return mode_vfork_exec(argv[2]);
    if (!strcmp(mode, "comms") && argc > 2)
        return mode_comms(atoi(argv[2]));
    if (!strcmp(mode, "seq-gap"))
        return mode_seq_gap();
    if (!strcmp(mode, "two-devices"))
        return mode_two_devices(argc > 2 ? argv[2] : "both");
    if (!strcmp(mode, "unload"))
        return mode_unload();
    if (!strcmp(mode, "fork-chain") && argc > 2)
        return mode_fork_chain(atoi(argv[2]));
    if (!strcmp(mode, "late-first") && argc > 2)
        return mode_late_first(atoi(argv[2]));
    if (!strcmp(mode, "exec-after") && argc > 2)
        return mode_exec_after(atoi(argv[2]));
    fprintf(stderr, "usage: harden-job first-hook | vfork-exec LIB | comms N | seq-gap | "
                    "two-devices | unload | fork-chain N | late-first MS | exec-after N\n");
    return 2;
}
