/* test_streams: consistency of the simulated device under its simple physics
 * (SIMGPU_PHYSICS=simple: kernels take exactly their registered durations): stream order,
 * events across streams (an event waited for behind 300 ops run ahead of the device
 * clock), the legacy default stream, the per-thread stream, graphs and CUDA-like errors,
 * that work on one stream leaves the other streams' workers asleep, and that kernels
 * launched on an idle stream wake no worker. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "simgpu.h"
#include "simgpu_check.h"

static char k_long, k_short, k_tiny, k_5us, k_half_ms;

static void
launch(const void *k, cudaStream_t s)
{
    dim3 g = {1, 1, 1}, b = {32, 1, 1};
    CHECK_CUDA(cudaLaunchKernel(k, g, b, NULL, 0, s));
}

/* Host time in ms. */
static double
ms(void)
{
    return (double)simgpu_now_ns() / 1e6;
}

/* Durations of the kernels registered in main, ms. */
#define LONG_MS 40.0
#define SHORT_MS 5.0

/* One run of the stream-order case: host times, the events' elapsed times, and whether the
 * queries right after the launches found the work still running. */
typedef struct order_run {
    double launch_ms;  /* two 40 ms kernels and two event records on stream a */
    double queued_ms;  /* of launch_ms, the time the thread waited for a CPU */
    double wait_ms;    /* from the first launch until b's work after a's was done */
    double overlap_ms; /* a 40 ms kernel on each of a and b, to the device's sync */
    float el01, el12;  /* a's two kernels; b's kernel after waiting for a */
    int pending;       /* a's stream and e1 not done when the launches returned */
} order_run;

/* Runs the case once into *o. Only what the device must do whatever the load is checked
 * here (stream order: nothing ends sooner than its kernels take); the upper bounds, which a
 * loaded or instrumented host can push out, are left to order_slow. */
static void
order_run_once(order_run *o)
{
    cudaStream_t a, b;
    cudaEvent_t e0, e1, e2;
    double t0;
    CHECK_CUDA(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK_CUDA(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    CHECK_CUDA(cudaEventCreate(&e0));
    CHECK_CUDA(cudaEventCreate(&e1));
    CHECK_CUDA(cudaEventCreate(&e2));

    /* launches return before their work has run; the work runs asynchronously */
    double w0 = ms_waiting_for_cpu();
    t0 = ms();
    CHECK_CUDA(cudaEventRecord(e0, a));
    launch(&k_long, a); /* 40 ms */
    launch(&k_long, a); /* 40 ms: stream order makes it 80 ms */
    CHECK_CUDA(cudaEventRecord(e1, a));
    o->launch_ms = ms() - t0;
    o->queued_ms = ms_waiting_for_cpu() - w0;
    o->pending = cudaStreamQuery(a) == cudaErrorNotReady;
    o->pending &= cudaEventQuery(e1) == cudaErrorNotReady;

    /* b waits for e1 (end of a's work), then runs 5 ms */
    CHECK_CUDA(cudaStreamWaitEvent(b, e1, 0));
    launch(&k_short, b);
    CHECK_CUDA(cudaEventRecord(e2, b));
    CHECK_CUDA(cudaEventSynchronize(e2));
    o->wait_ms = ms() - t0;
    CHECK(o->wait_ms >= 2 * LONG_MS + SHORT_MS - 1);
    CHECK(cudaEventQuery(e1) == cudaSuccess);
    CHECK_CUDA(cudaEventElapsedTime(&o->el01, e0, e1));
    CHECK(o->el01 >= 2 * LONG_MS - 0.1);
    CHECK_CUDA(cudaEventElapsedTime(&o->el12, e1, e2));
    CHECK(o->el12 >= SHORT_MS - 0.1);

    /* without the wait, b's work overlaps a's */
    t0 = ms();
    launch(&k_long, a);
    launch(&k_long, b);
    CHECK_CUDA(cudaDeviceSynchronize());
    o->overlap_ms = ms() - t0;
    CHECK(o->overlap_ms >= LONG_MS - 0.1);
    CHECK_CUDA(cudaStreamDestroy(a));
    CHECK_CUDA(cudaStreamDestroy(b));
    CHECK_CUDA(cudaEventDestroy(e0));
    CHECK_CUDA(cudaEventDestroy(e1));
    CHECK_CUDA(cudaEventDestroy(e2));
}

/* The first of run o's times past its bound, as text ("" when none). The bounds are set
 * against the kernels' own durations, so that the bugs they catch stay caught: launches
 * that wait for their kernels take both kernels' time (80 ms; here they may take half of
 * it, not counting the time a loaded host kept the thread waiting for a CPU) and find the
 * work done; stream order that adds delays (e1 ends when a's kernels can have ended and
 * it was recorded: a host held up past 80 ms records it late); streams that do not
 * overlap (80 ms, not 40). */
static const char *
order_slow(const order_run *o)
{
    if (!(o->launch_ms - o->queued_ms < LONG_MS))
        return "the launches took a kernel's time (waits for a CPU not counted)";
    if (!o->pending)
        return "a's work was done when its launches returned";
    if (!(o->el01 < (o->launch_ms > 2 * LONG_MS ? o->launch_ms : 2 * LONG_MS) + 10))
        return "a's two kernels ended 10 ms after both they could and e1 was recorded";
    if (!(o->el12 < SHORT_MS + 10))
        return "b's kernel took 10 ms more than its 5 ms after a's";
    if (!(o->overlap_ms < 2 * LONG_MS - 5))
        return "kernels on two streams did not overlap";
    return "";
}

/* Stream order, events across streams, overlap of streams. The upper bounds are timing: a
 * loaded host under TSan has pushed a run past one (launches taking 30 ms, a's kernels 90
 * ms). A run past one is run once more, and both are reported; the second must keep them
 * all. A real fault (launches that block, delays that stream order adds) fails both. */
static void
test_stream_order_and_events(void)
{
    order_run o[2];
    const char *why[2] = {"", ""};
    int n = 0;
    do {
        order_run_once(&o[n]);
        why[n] = order_slow(&o[n]);
        n++;
    } while (n < 2 && *why[n - 1]);
    for (int k = 0; k < n && n > 1; k++)
        fprintf(stderr,
                "test_stream_order_and_events: attempt %d of %d: launches %.1f ms (%.1f "
                "waiting for a CPU), work "
                "%s after them, e0->e1 %.1f ms, e1->e2 %.1f ms, two streams %.1f ms%s%s\n",
                k + 1, n, o[k].launch_ms, o[k].queued_ms, o[k].pending ? "pending" : "done",
                (double)o[k].el01, (double)o[k].el12, o[k].overlap_ms, *why[k] ? ": " : "", why[k]);
    CHECK(!*why[n - 1]);
}

/* A stream that waits for an event recorded behind a long queue on another stream starts
 * its work after that event, however many of the other stream's ops run ahead of the device
 * clock meanwhile (each queued op runs from the end of the one before, its end fixed before
 * it is reached) and however many of them have ended when it looks. 300 kernels of 0.5 ms
 * on a, e recorded behind them; 60 ms in, the early ones have ended (a query completes
 * them) while the rest run ahead; b then waits for e and runs a 0.5 ms kernel. A device
 * that let the completion of a's early ops overwrite the kept ends of the ops run 256
 * later (e's among them) starts b's kernel at once, 90 ms before e. */
static void
test_wait_behind_ops_run_ahead(void)
{
    enum { QUEUED = 300 };
    const double kernel_ms = 0.5;
    cudaStream_t a, b;
    cudaEvent_t e0, e, e2;
    float el_a = 0, el_b = 0;
    double t0;
    int e_done;
    CHECK_CUDA(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK_CUDA(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    CHECK_CUDA(cudaEventCreate(&e0));
    CHECK_CUDA(cudaEventCreate(&e));
    CHECK_CUDA(cudaEventCreate(&e2));
    t0 = ms();
    CHECK_CUDA(cudaEventRecord(e0, a));
    for (int i = 0; i < QUEUED; i++)
        launch(&k_half_ms, a);
    CHECK_CUDA(cudaEventRecord(e, a));
    while (ms() < t0 + 60)
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    (void)cudaStreamQuery(a); /* completes the ops ended by now */
    CHECK_CUDA(cudaStreamWaitEvent(b, e, 0));
    launch(&k_half_ms, b);
    CHECK_CUDA(cudaEventRecord(e2, b));
    CHECK_CUDA(cudaEventSynchronize(e2));
    e_done = cudaEventQuery(e) == cudaSuccess; /* b's work came after e */
    CHECK_CUDA(cudaEventSynchronize(e));
    CHECK_CUDA(cudaEventElapsedTime(&el_a, e0, e));
    CHECK_CUDA(cudaEventElapsedTime(&el_b, e, e2));
    if (!(e_done && el_a >= QUEUED * kernel_ms - 0.1 && el_b >= kernel_ms - 0.1))
        fprintf(stderr,
                "test_wait_behind_ops_run_ahead: e %s when b's work after it was; a's queue "
                "%.1f ms (at least %.1f), b's kernel ended %.1f ms after e (at least %.1f)\n",
                e_done ? "done" : "pending", (double)el_a, QUEUED * kernel_ms, (double)el_b,
                kernel_ms);
    CHECK(e_done);
    CHECK(el_a >= QUEUED * kernel_ms - 0.1);
    CHECK(el_b >= kernel_ms - 0.1);
    CHECK_CUDA(cudaStreamDestroy(a));
    CHECK_CUDA(cudaStreamDestroy(b));
    CHECK_CUDA(cudaEventDestroy(e0));
    CHECK_CUDA(cudaEventDestroy(e));
    CHECK_CUDA(cudaEventDestroy(e2));
}

static void
test_legacy_stream(void)
{
    cudaStream_t blocking, nonblocking;
    cudaEvent_t e;
    double t0;
    CHECK_CUDA(cudaStreamCreate(&blocking));
    CHECK_CUDA(cudaStreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking));
    CHECK_CUDA(cudaEventCreate(&e));

    /* Work on the legacy stream waits for the blocking stream ... */
    t0 = ms();
    launch(&k_long, blocking);
    launch(&k_short, 0);
    CHECK_CUDA(cudaEventRecord(e, 0));
    CHECK_CUDA(cudaEventSynchronize(e));
    CHECK(ms() - t0 >= 44);

    /* ... and blocking streams wait for the legacy stream ... */
    t0 = ms();
    launch(&k_long, 0);
    launch(&k_short, blocking);
    CHECK_CUDA(cudaStreamSynchronize(blocking));
    CHECK(ms() - t0 >= 44);

    /* ... but a non-blocking stream does not. */
    CHECK_CUDA(cudaDeviceSynchronize());
    t0 = ms();
    launch(&k_long, 0);
    launch(&k_short, nonblocking);
    CHECK_CUDA(cudaStreamSynchronize(nonblocking));
    CHECK(ms() - t0 < 30);
    CHECK_CUDA(cudaDeviceSynchronize());

    /* The per-thread stream is a blocking stream too. */
    t0 = ms();
    launch(&k_long, 0);
    launch(&k_short, cudaStreamPerThread);
    CHECK_CUDA(cudaStreamSynchronize(cudaStreamPerThread));
    CHECK(ms() - t0 >= 44);
    CHECK_CUDA(cudaStreamDestroy(blocking));
    CHECK_CUDA(cudaStreamDestroy(nonblocking));
    CHECK_CUDA(cudaEventDestroy(e));
}

static void
test_memory(void)
{
    char *d, *h;
    char src[64], dst[64];
    size_t used, total;
    for (int i = 0; i < 64; i++)
        src[i] = (char)i;
    CHECK_CUDA(cudaMalloc((void **)&d, 1 << 20));
    CHECK_CUDA(cudaMallocHost((void **)&h, 64));
    CHECK_CUDA(cudaMemcpy(d, src, 64, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemsetAsync(d + 64, 7, 64, 0));
    CHECK_CUDA(cudaMemcpyAsync(h, d, 64, cudaMemcpyDefault, 0));
    CHECK_CUDA(cudaMemcpy(dst, d + 64, 64, cudaMemcpyDeviceToHost));
    CHECK(!memcmp(h, src, 64));
    CHECK(dst[0] == 7 && dst[63] == 7);
    CHECK_CUDA(cudaMemGetInfo(&used, &total));
    CHECK(total - used >= (1 << 20));
    CHECK_CUDA(cudaFree(d));
    CHECK_CUDA(cudaFreeHost(h));
    CHECK(cudaFree((void *)0x1234) == cudaErrorInvalidValue);
    CHECK(cudaGetLastError() == cudaErrorInvalidValue);
    CHECK(cudaGetLastError() == cudaSuccess);
}

static void
test_graph(void)
{
    cudaStream_t s, side;
    cudaEvent_t fork, join;
    cudaGraph_t g;
    cudaGraphExec_t x;
    enum cudaStreamCaptureStatus st;
    double t0;
    CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK_CUDA(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    CHECK_CUDA(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    CHECK_CUDA(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
    t0 = ms();
    CHECK_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CHECK_CUDA(cudaStreamIsCapturing(s, &st));
    CHECK(st == cudaStreamCaptureStatusActive);
    launch(&k_short, s);
    CHECK_CUDA(cudaEventRecord(fork, s));
    CHECK_CUDA(cudaStreamWaitEvent(side, fork, 0)); /* side joins the capture */
    launch(&k_long, side);
    launch(&k_long, s);
    CHECK_CUDA(cudaEventRecord(join, side));
    CHECK_CUDA(cudaStreamWaitEvent(s, join, 0));
    launch(&k_short, s);
    CHECK_CUDA(cudaStreamEndCapture(s, &g));
    CHECK(ms() - t0 < 20); /* nothing ran */
    CHECK_CUDA(cudaGraphInstantiate(&x, g, 0));
    CHECK_CUDA(cudaGraphDestroy(g));
    for (int i = 0; i < 2; i++) {
        t0 = ms();
        CHECK_CUDA(cudaGraphLaunch(x, s));
        CHECK_CUDA(cudaStreamSynchronize(s));
        /* 5 + max(40, 40) + 5: the branches overlap. */
        CHECK(ms() - t0 >= 49 && ms() - t0 < 80);
    }
    CHECK_CUDA(cudaGraphExecDestroy(x));
    CHECK_CUDA(cudaStreamDestroy(s));
    CHECK_CUDA(cudaStreamDestroy(side));
}

static void
test_errors(void)
{
    cudaStream_t s;
    cudaEvent_t e;
    float f;
    dim3 g = {1, 1, 1}, big = {2048, 1, 1};
    CHECK_CUDA(cudaStreamCreate(&s));
    CHECK_CUDA(cudaStreamDestroy(s));
    CHECK(cudaStreamSynchronize(s) == cudaErrorInvalidResourceHandle);
    CHECK(cudaStreamDestroy(s) == cudaErrorInvalidResourceHandle);
    CHECK(cudaLaunchKernel(&k_short, g, big, NULL, 0, 0) == cudaErrorInvalidConfiguration);
    CHECK(cudaPeekAtLastError() == cudaErrorInvalidConfiguration);
    CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
    CHECK(cudaGetLastError() == cudaSuccess);
    CHECK_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    CHECK_CUDA(cudaEventRecord(e, 0));
    CHECK_CUDA(cudaEventSynchronize(e));
    CHECK(cudaEventElapsedTime(&f, e, e) == cudaErrorInvalidResourceHandle);
    CHECK_CUDA(cudaEventDestroy(e));
    CHECK(cudaEventQuery(e) == cudaErrorInvalidResourceHandle);
    CHECK(cudaSetDevice(99) == cudaErrorInvalidDevice);
    CHECK(!strcmp(cudaGetErrorName(cudaErrorInvalidResourceHandle),
                  "cudaErrorInvalidResourceHandle"));
}

/* Work on one stream wakes only the threads that wait for it: with four other streams'
 * workers idle, 2000 launches of a 0-ns kernel and a synchronisation cost under 3
 * voluntary context switches per operation (0.1-0.6 here, under load; a wake-up of every
 * worker at every enqueue and completion made it 7-9). */
static void
test_idle_streams_stay_asleep(void)
{
    enum { N = 2000 };
    cudaStream_t s[5];
    long before;
    for (int i = 0; i < 5; i++) {
        CHECK_CUDA(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking));
        launch(&k_tiny, s[i]); /* starts its worker */
    }
    CHECK_CUDA(cudaDeviceSynchronize());
    before = voluntary_switches();
    for (int i = 0; i < N; i++)
        launch(&k_tiny, s[0]);
    CHECK_CUDA(cudaStreamSynchronize(s[0]));
    long n = voluntary_switches() - before;
    printf("test_streams: %ld voluntary context switches for %d ops on one stream\n", n, N);
    CHECK(n < 3 * N);
    for (int i = 0; i < 5; i++)
        CHECK_CUDA(cudaStreamDestroy(s[i]));
}

/* A kernel launched on an idle stream is timed by the launching thread and left in
 * flight (simgpu_internal.h): the stream's worker does not wake for it, and whoever looks
 * later completes it.  200 kernels of 5 us, each launched after 200 us of host work,
 * cost the process under 0.25 voluntary context switches per kernel (0 here; 1-2 when the
 * worker woke for each kernel and again at its end).  A query after the end sees it
 * done with nothing else run, and the legacy stream still waits for it. */
static void
test_host_bound_kernels_wake_no_worker(void)
{
    enum { N = 200 };
    cudaStream_t s;
    long before, n;
    double t0;
    CHECK_CUDA(cudaStreamCreate(&s));
    launch(&k_tiny, s); /* starts its worker */
    CHECK_CUDA(cudaStreamSynchronize(s));
    before = voluntary_switches();
    for (int i = 0; i < N; i++) {
        double until = ms() + 0.2;
        while (ms() < until)
            ;
        launch(&k_5us, s);
    }
    n = voluntary_switches() - before;
    printf("test_streams: %ld voluntary context switches for %d host-bound kernels\n", n, N);
    CHECK(n < N / 4);
    CHECK_CUDA(cudaStreamSynchronize(s));
    /* Left in flight, completed by the query once its end has passed. */
    t0 = ms();
    launch(&k_short, s);
    CHECK(cudaStreamQuery(s) == cudaErrorNotReady);
    while (ms() - t0 < 8)
        ;
    CHECK(cudaStreamQuery(s) == cudaSuccess);
    /* The legacy stream waits for a blocking stream's kernel in flight. */
    t0 = ms();
    launch(&k_short, s);
    launch(&k_tiny, 0);
    CHECK_CUDA(cudaStreamSynchronize(0));
    CHECK(ms() - t0 >= 4.9);
    CHECK(cudaStreamQuery(s) == cudaSuccess);
    CHECK_CUDA(cudaStreamDestroy(s));
}

int
main(void)
{
    int n = 0, v = 0;
    const char *name = NULL;
    struct cudaDeviceProp p;
    setenv("SIMGPU_PHYSICS", "simple", 1); /* before the device reads its configuration */
    CHECK(simgpu_register_kernel(&k_long, "long_kernel", 40000000) == 0);
    CHECK(simgpu_register_kernel(&k_short, "short_kernel", 5000000) == 0);
    CHECK(simgpu_register_kernel(&k_tiny, "tiny_kernel", 0) == 0);
    CHECK(simgpu_register_kernel(&k_5us, "kernel_5us", 5000) == 0);
    CHECK(simgpu_register_kernel(&k_half_ms, "half_ms_kernel", 500000) == 0);
    CHECK_CUDA(cudaGetDeviceCount(&n));
    CHECK(n >= 1);
    CHECK_CUDA(cudaSetDevice(0));
    CHECK_CUDA(cudaGetDeviceProperties(&p, 0));
    CHECK(p.major >= 7 && p.totalGlobalMem > 0);
    CHECK_CUDA(cudaRuntimeGetVersion(&v));
    CHECK(v == CUDART_VERSION);
    CHECK_CUDA(cudaFuncGetName(&name, &k_long));
    CHECK(!strcmp(name, "long_kernel"));
    test_stream_order_and_events();
    test_wait_behind_ops_run_ahead();
    test_legacy_stream();
    test_memory();
    test_graph();
    test_errors();
    test_idle_streams_stay_asleep();
    test_host_bound_kernels_wake_no_worker();
    printf("test_streams: ok\n");
    return 0;
}
