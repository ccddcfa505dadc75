/* test_wake: the simulated device's timeline against its stream workers' scheduling
 * (SIMGPU_PHYSICS=simple).  A stream of back-to-back kernels of known duration, with an
 * event recorded after each, then cudaStreamSynchronize: the events give the device's
 * timeline (each gap between two kernels must be their duration exactly, whenever the
 * worker ran), and the host time at the synchronize's return, less the modeled end of
 * the work, is how late the host learns of it.
 *
 * Run once as is and once with SIMGPU_WORKER_DELAY_US (a worker that waits 3 ms for a
 * CPU each time it wakes, as on a loaded host), set by the test itself in a child
 * process.  Checked: the timeline does not move, the synchronize never returns before
 * the modeled end, and with the starved worker it returns within STARVED_LATE_MS of it,
 * not counting the time the synchronizing thread waited for a CPU itself:
 * the waiting thread runs the stream's kernels itself and waits for their modeled end,
 * as the host waits for a real GPU (a synchronize that waited for the worker to run each
 * op would be late by at least 20 x 3 ms).  Both lateness figures are printed.  Then, in
 * a third and a fourth process bound to one CPU, large memsets' and copies' calls
 * (run_large). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_setaffinity */
#endif
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "simgpu.h"
#include "simgpu_check.h"

#define NKERN 20
#define KERN_US 1000.0
#define DELAY_US "3000"
/* Bound on the starved case's lateness, less the time the synchronizing thread itself
 * waited for a CPU (which a real host pays as well): the worker's 3 ms when it takes an
 * op before the waiter does. */
#define STARVED_LATE_MS 30.0

static char k_1ms;

/* Runs the case once in this process; prints one line and checks the timeline. */
static void
run_case(int starved)
{
    cudaStream_t s;
    cudaEvent_t ev[NKERN + 1];
    dim3 g = {1, 1, 1}, b = {32, 1, 1};
    double worst_gap_us = 0, t_rec, t_ret, total_ms = 0, w0, queued_ms;
    CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (int i = 0; i <= NKERN; i++)
        CHECK_CUDA(cudaEventCreate(&ev[i]));
    /* the worker exists and is asleep before the measured run */
    CHECK_CUDA(cudaLaunchKernel(&k_1ms, g, b, NULL, 0, s));
    CHECK_CUDA(cudaStreamSynchronize(s));

    t_rec = (double)simgpu_now_ns();
    CHECK_CUDA(cudaEventRecord(ev[0], s)); /* at the stream's idle head: starts now */
    for (int i = 1; i <= NKERN; i++) {
        CHECK_CUDA(cudaLaunchKernel(&k_1ms, g, b, NULL, 0, s));
        CHECK_CUDA(cudaEventRecord(ev[i], s));
    }
    w0 = ms_waiting_for_cpu();
    CHECK_CUDA(cudaStreamSynchronize(s));
    t_ret = (double)simgpu_now_ns();
    queued_ms = ms_waiting_for_cpu() - w0;

    for (int i = 1; i <= NKERN; i++) {
        float el = 0;
        double gap;
        CHECK_CUDA(cudaEventElapsedTime(&el, ev[i - 1], ev[i]));
        total_ms += (double)el;
        /* the first kernel starts at its launch, after ev[0]; the others back to back */
        if (i == 1)
            continue;
        gap = (double)el * 1000.0 - KERN_US;
        if (gap < 0)
            gap = -gap;
        if (gap > worst_gap_us)
            worst_gap_us = gap;
    }
    /* ev[0] started at or after t_rec: t_rec + total is at most the modeled end. */
    double late_ms = (t_ret - t_rec) / 1e6 - total_ms;
    printf("test_wake %s: %d x %.0f us kernels, timeline %.3f ms (worst gap error %.2f us), "
           "synchronize returned %.3f ms after the modeled end (%.3f ms of it waiting for a CPU)\n",
           starved ? "starved workers" : "plain", NKERN, KERN_US, total_ms, worst_gap_us, late_ms,
           queued_ms);
    /* float ms of the elapsed time: some 0.1 us of rounding at 1 ms */
    CHECK(worst_gap_us < 1.0);
    CHECK(late_ms > -0.01);
    CHECK(!starved || late_ms - queued_ms < STARVED_LATE_MS);
    for (int i = 0; i <= NKERN; i++)
        CHECK_CUDA(cudaEventDestroy(ev[i]));
    CHECK_CUDA(cudaStreamDestroy(s));
}

/* The other ops a synchronisation waits for: a stream of kernels, then another stream that
 * waits for it (cudaStreamWaitEvent) and zeros NCHAIN x 256 KB of device memory and
 * copies 8 KB of it each time (memsets, device-to-device copies: little CPU for their
 * bytes),
 * then cudaDeviceSynchronize.  The events bracket the work: the synchronize returns
 * within CHAIN_LATE_MS of the last one's modeled time, not counting its own wait for a
 * CPU (a synchronize that waited for the workers to run each memset, copy and event wait
 * would be late by at least 3 ms for each, 120 ms in all). */
#define NCHAIN 20
#define CHAIN_LATE_MS 50.0
#define CHAIN_BYTES (256u << 10)
#define COPY_BYTES (8u << 10)

static void
run_chain(int starved)
{
    cudaStream_t a, b;
    cudaEvent_t e0, ek, end;
    dim3 g = {1, 1, 1}, blk = {32, 1, 1};
    char *buf;
    float ms = 0;
    double t_rec, t_ret, w0, queued_ms, late_ms;
    CHECK_CUDA(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK_CUDA(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    CHECK_CUDA(cudaEventCreate(&e0));
    CHECK_CUDA(cudaEventCreate(&ek));
    CHECK_CUDA(cudaEventCreate(&end));
    CHECK_CUDA(cudaMalloc((void **)&buf, 2 * CHAIN_BYTES));
    /* both workers exist and are asleep before the measured run */
    CHECK_CUDA(cudaMemsetAsync(buf, 1, 2 * CHAIN_BYTES, b));
    CHECK_CUDA(cudaLaunchKernel(&k_1ms, g, blk, NULL, 0, a));
    CHECK_CUDA(cudaDeviceSynchronize());

    t_rec = (double)simgpu_now_ns();
    CHECK_CUDA(cudaEventRecord(e0, a));
    for (int i = 0; i < 4; i++)
        CHECK_CUDA(cudaLaunchKernel(&k_1ms, g, blk, NULL, 0, a));
    CHECK_CUDA(cudaEventRecord(ek, a));
    CHECK_CUDA(cudaStreamWaitEvent(b, ek, 0));
    for (int i = 0; i < NCHAIN; i++) {
        CHECK_CUDA(cudaMemsetAsync(buf, 0, CHAIN_BYTES, b));
        CHECK_CUDA(cudaMemcpyAsync(buf + CHAIN_BYTES + (size_t)i * COPY_BYTES, buf, COPY_BYTES,
                                   cudaMemcpyDeviceToDevice, b));
    }
    CHECK_CUDA(cudaEventRecord(end, b));
    w0 = ms_waiting_for_cpu();
    CHECK_CUDA(cudaDeviceSynchronize());
    t_ret = (double)simgpu_now_ns();
    queued_ms = ms_waiting_for_cpu() - w0;
    /* the bytes moved: the copies' zeros, the rest of the first memset's ones */
    CHECK(buf[CHAIN_BYTES] == 0 && buf[CHAIN_BYTES + NCHAIN * COPY_BYTES - 1] == 0 &&
          buf[CHAIN_BYTES + NCHAIN * COPY_BYTES] == 1 && buf[CHAIN_BYTES - 1] == 0);
    CHECK_CUDA(cudaEventElapsedTime(&ms, e0, end));
    late_ms = (t_ret - t_rec) / 1e6 - (double)ms;
    printf("test_wake %s: 4 kernels, then %d x (memset of %u KB, copy of %u KB) on a stream "
           "waiting for them, %.3f ms: cudaDeviceSynchronize returned %.3f ms after the modeled "
           "end (%.3f ms of it waiting for a CPU)\n",
           starved ? "starved workers" : "plain", NCHAIN, CHAIN_BYTES >> 10, COPY_BYTES >> 10,
           (double)ms, late_ms, queued_ms);
    CHECK(late_ms > -0.01);
    CHECK(!starved || late_ms - queued_ms < CHAIN_LATE_MS);
    /* an unaligned memset of pages and their ragged ends */
    CHECK_CUDA(cudaMemsetAsync(buf, 1, 2 * CHAIN_BYTES, b));
    CHECK_CUDA(cudaMemsetAsync(buf + 100, 0, CHAIN_BYTES - 200, b));
    CHECK_CUDA(cudaStreamSynchronize(b));
    CHECK(buf[99] == 1 && buf[100] == 0 && buf[4096] == 0 && buf[CHAIN_BYTES - 101] == 0 &&
          buf[CHAIN_BYTES - 100] == 1);
    CHECK_CUDA(cudaFree(buf));
    CHECK_CUDA(cudaEventDestroy(e0));
    CHECK_CUDA(cudaEventDestroy(ek));
    CHECK_CUDA(cudaEventDestroy(end));
    CHECK_CUDA(cudaStreamDestroy(a));
    CHECK_CUDA(cudaStreamDestroy(b));
}

/* A captured graph of many short nodes, as torch's CUDA-graph replay of a DDP step (about a
 * thousand kernels, memsets and copies): GRAPH_MAIN kernels of GRAPH_KERN_US on the
 * launching stream with a branch of GRAPH_SIDE kernels forked to a second stream and
 * joined before the last one, GRAPH_MEMSETS memsets of 64 KB among them.  Launched behind a
 * kernel of GRAPH_LEAD_MS, between two events, GRAPH_LAUNCHES times (the timeline checked
 * where the host enqueued it before the kernel's end).  The rules, as on a real GPU:
 * - the launch is one host call: its host time is at most GRAPH_LAUNCH_X ordinary kernel
 *   launches measured in the same run (each figure the smallest of the launches, so that
 *   a preempted call does not decide), less the time the launching thread waited for a CPU
 *   (a launch that built and enqueued every node took 11-14 ordinary launches);
 * - the device timeline is unchanged: the events bracket the nodes back to back,
 *   GRAPH_MAIN x GRAPH_KERN_US plus the memsets' time (one memset between two events,
 *   measured in the same run), to 1 us;
 * - the synchronize returns within GRAPH_LATE_MS of the modeled end, less the time the
 *   synchronizing thread waited for a CPU (not checked under the sanitizers,
 *   DPRO_SANITIZERS=1, where running the nodes takes the host 10x longer);
 * - the nodes are timed on the device clock, not worked through in real time: the launch
 *   and synchronize cost the process at most one voluntary context switch per 3 nodes
 *   (each a thread's sleep and wake-up, which on a loaded host waits for a CPU; a worker
 *   or waiter that slept to each node's end would take one or more per node). */
#define GRAPH_MAIN 800
#define GRAPH_SIDE 100
#define GRAPH_MEMSETS 100
#define GRAPH_KERN_US 2.0
#define GRAPH_LAUNCHES 3
#define GRAPH_LAUNCH_X 3.0
#define GRAPH_LATE_MS 30.0
#define GRAPH_SET_BYTES (64u << 10)
#define GRAPH_LEAD_MS 20.0
#define GRAPH_SWITCHES ((GRAPH_MAIN + GRAPH_SIDE) / 3)

static char k_2us, k_lead;

/* Host ms of one kernel launch on s, less the time the thread waited for a CPU. */
static double
launch_ms(const void *k, cudaStream_t s)
{
    dim3 g = {1, 1, 1}, b = {32, 1, 1};
    double w0 = ms_waiting_for_cpu(), t0 = (double)simgpu_now_ns();
    CHECK_CUDA(cudaLaunchKernel(k, g, b, NULL, 0, s));
    return ((double)simgpu_now_ns() - t0) / 1e6 - (ms_waiting_for_cpu() - w0);
}

/* Captures the graph of run_graph on s (side: the branch's stream) into *x. */
static void
graph_capture(cudaStream_t s, cudaStream_t side, char *buf, cudaGraphExec_t *x)
{
    dim3 g = {1, 1, 1}, b = {32, 1, 1};
    cudaEvent_t fork, join;
    cudaGraph_t gr;
    CHECK_CUDA(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    CHECK_CUDA(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
    CHECK_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < GRAPH_MAIN; i++) {
        if (i == 1) {
            CHECK_CUDA(cudaEventRecord(fork, s));
            CHECK_CUDA(cudaStreamWaitEvent(side, fork, 0));
            for (int j = 0; j < GRAPH_SIDE; j++)
                CHECK_CUDA(cudaLaunchKernel(&k_2us, g, b, NULL, 0, side));
            CHECK_CUDA(cudaEventRecord(join, side));
        }
        if (i == GRAPH_MAIN - 1)
            CHECK_CUDA(cudaStreamWaitEvent(s, join, 0));
        if (i % (GRAPH_MAIN / GRAPH_MEMSETS) == 0)
            CHECK_CUDA(cudaMemsetAsync(buf, i & 0xff, GRAPH_SET_BYTES, s));
        CHECK_CUDA(cudaLaunchKernel(&k_2us, g, b, NULL, 0, s));
    }
    CHECK_CUDA(cudaStreamEndCapture(s, &gr));
    CHECK_CUDA(cudaGraphInstantiate(x, gr, 0));
    CHECK_CUDA(cudaGraphDestroy(gr));
    CHECK_CUDA(cudaEventDestroy(fork));
    CHECK_CUDA(cudaEventDestroy(join));
}

static void
run_graph(int starved)
{
    cudaStream_t s, side, o;
    cudaEvent_t e0, e1;
    cudaGraphExec_t x;
    char *buf;
    float el = 0;
    double launch_min = 1e9, graph_min = 1e9, memset_us, late_ms = -1e9, queued_ms = 0;
    double model_us, worst_err_us = 0;
    long switches = 0;
    int valid = 0; /* launches whose timeline is checked */
    CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK_CUDA(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    CHECK_CUDA(cudaStreamCreateWithFlags(&o, cudaStreamNonBlocking));
    CHECK_CUDA(cudaEventCreate(&e0));
    CHECK_CUDA(cudaEventCreate(&e1));
    CHECK_CUDA(cudaMalloc((void **)&buf, GRAPH_SET_BYTES));
    graph_capture(s, side, buf, &x);
    /* one memset's device time, behind a kernel so that the events bracket it alone (when
     * the host enqueued them before the kernel's end: else again) */
    for (int tries = 0, late = 1; late && tries < 20; tries++) {
        double t_k = (double)simgpu_now_ns();
        launch_ms(&k_lead, s);
        CHECK_CUDA(cudaEventRecord(e0, s));
        CHECK_CUDA(cudaMemsetAsync(buf, 1, GRAPH_SET_BYTES, s));
        CHECK_CUDA(cudaEventRecord(e1, s));
        late = ((double)simgpu_now_ns() - t_k) / 1e6 >= GRAPH_LEAD_MS;
        CHECK_CUDA(cudaStreamSynchronize(s));
        CHECK_CUDA(cudaEventElapsedTime(&el, e0, e1));
        memset_us = (double)el * 1000.0;
    }
    model_us = GRAPH_MAIN * GRAPH_KERN_US + GRAPH_MEMSETS * memset_us;
    for (int i = 0; valid < GRAPH_LAUNCHES && i < 4 * GRAPH_LAUNCHES; i++) {
        double w0, t0, t_k, t_ret, ms;
        long sw;
        int on_time;
        /* ordinary launches on an idle stream */
        for (int j = 0; j < 3; j++) {
            CHECK_CUDA(cudaStreamSynchronize(o));
            ms = launch_ms(&k_2us, o);
            launch_min = ms < launch_min ? ms : launch_min;
        }
        t_k = (double)simgpu_now_ns();
        launch_ms(&k_lead, s);
        CHECK_CUDA(cudaEventRecord(e0, s));
        w0 = ms_waiting_for_cpu();
        sw = voluntary_switches();
        t0 = (double)simgpu_now_ns();
        CHECK_CUDA(cudaGraphLaunch(x, s));
        ms = ((double)simgpu_now_ns() - t0) / 1e6 - (ms_waiting_for_cpu() - w0);
        graph_min = ms < graph_min ? ms : graph_min;
        CHECK_CUDA(cudaEventRecord(e1, s));
        /* the graph's nodes start at the kernel's end when the host enqueued them before */
        on_time = ((double)simgpu_now_ns() - t_k) / 1e6 < GRAPH_LEAD_MS;
        w0 = ms_waiting_for_cpu();
        CHECK_CUDA(cudaStreamSynchronize(s));
        t_ret = (double)simgpu_now_ns();
        sw = voluntary_switches() - sw;
        switches = sw > switches ? sw : switches;
        queued_ms = ms_waiting_for_cpu() - w0;
        CHECK_CUDA(cudaEventElapsedTime(&el, e0, e1));
        if (on_time && fabs((double)el * 1000.0 - model_us) > worst_err_us)
            worst_err_us = fabs((double)el * 1000.0 - model_us);
        valid += on_time;
        /* e0 is the lead kernel's end, at least t_k + GRAPH_LEAD_MS */
        ms = (t_ret - t_k) / 1e6 - GRAPH_LEAD_MS - (double)el - queued_ms;
        late_ms = ms > late_ms ? ms : late_ms;
    }
    printf("test_wake %s: graph of %d kernels of %.0f us (+%d on a branch) and %d memsets "
           "(%.2f us each): launch %.3f ms (ordinary launch %.3f ms, least of each), timeline "
           "%.1f us off the model at worst, synchronize at most %.3f ms after the modeled end "
           "(less its wait for a CPU), at most %ld voluntary context switches\n",
           starved ? "starved workers" : "plain", GRAPH_MAIN, GRAPH_KERN_US, GRAPH_SIDE,
           GRAPH_MEMSETS, memset_us, graph_min, launch_min, worst_err_us, late_ms, switches);
    CHECK(valid > 0 && worst_err_us < 1.0);
    CHECK(graph_min <= GRAPH_LAUNCH_X * launch_min);
    /* Running the nodes is host work: a sanitizer's instrumentation makes it 10x longer. */
    CHECK(late_ms < GRAPH_LATE_MS ||
          (getenv("DPRO_SANITIZERS") && *getenv("DPRO_SANITIZERS") == '1'));
    CHECK(switches <= GRAPH_SWITCHES);
    CHECK_CUDA(cudaGraphExecDestroy(x));
    CHECK_CUDA(cudaFree(buf));
    CHECK_CUDA(cudaEventDestroy(e0));
    CHECK_CUDA(cudaEventDestroy(e1));
    CHECK_CUDA(cudaStreamDestroy(s));
    CHECK_CUDA(cudaStreamDestroy(side));
    CHECK_CUDA(cudaStreamDestroy(o));
}

/* Event operations onto idle streams, NEVENT rounds of: a record on stream a, a wait for
 * it on stream b, a record on b, EVENT_GAP_US apart (the workers would be asleep again).
 * The launching thread runs each itself, as a kernel onto an idle stream (the event's
 * work has run, no dependency is pending), so that neither stream's worker wakes: the
 * stream workers make at most EVENT_SWITCHES voluntary context switches in all the rounds
 * (one or more a round when they were woken to run each op). */
#define NEVENT 200
#define EVENT_GAP_US 100
#define EVENT_SWITCHES (NEVENT / 10)

static void
run_events(int starved)
{
    cudaStream_t a, b;
    cudaEvent_t ea, eb;
    dim3 g = {1, 1, 1}, bl = {32, 1, 1};
    long sw;
    CHECK_CUDA(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK_CUDA(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    CHECK_CUDA(cudaEventCreateWithFlags(&ea, cudaEventDisableTiming));
    CHECK_CUDA(cudaEventCreateWithFlags(&eb, cudaEventDisableTiming));
    /* both workers exist and are asleep before the rounds */
    CHECK_CUDA(cudaLaunchKernel(&k_2us, g, bl, NULL, 0, a));
    CHECK_CUDA(cudaLaunchKernel(&k_2us, g, bl, NULL, 0, b));
    CHECK_CUDA(cudaDeviceSynchronize());
    usleep(20000);
    sw = worker_switches();
    for (int i = 0; i < NEVENT; i++) {
        CHECK_CUDA(cudaEventRecord(ea, a));
        CHECK_CUDA(cudaStreamWaitEvent(b, ea, 0));
        CHECK_CUDA(cudaEventRecord(eb, b));
        usleep(EVENT_GAP_US);
    }
    sw = worker_switches() - sw;
    CHECK_CUDA(cudaStreamSynchronize(b));
    printf("test_wake %s: %d rounds of event record, wait and record on idle streams: %ld "
           "voluntary context switches of the stream workers\n",
           starved ? "starved workers" : "plain", NEVENT, sw);
    CHECK(sw <= EVENT_SWITCHES);
    CHECK_CUDA(cudaEventDestroy(ea));
    CHECK_CUDA(cudaEventDestroy(eb));
    CHECK_CUDA(cudaStreamDestroy(a));
    CHECK_CUDA(cudaStreamDestroy(b));
}

/* A memset too large for the launching thread to run (64 MB; the inline rule stops at
 * 64 KiB), or with `copy` a device-to-device copy of as many bytes (every copy is the
 * worker's), on an idle stream, in a process bound to one CPU, so that the stream's worker,
 * woken by the launch, can run only where the launching thread does (as on a loaded host,
 * where no CPU is free for it).  Of NMEMSET cudaMemsetAsync (cudaMemcpyAsync) calls, all
 * but MEMSET_SLOW return within MEMSET_CALL_US, as a real one returns in microseconds (the
 * bytes take the worker some 10 ms here: a launching thread that lost its CPU to the worker
 * it woke returned after 0.4-29 ms, every other call; with the worker woken behind it,
 * 11-24 us; MEMSET_SLOW allows for a loaded host preempting a call), and after all but
 * MEMSET_SLOW of them the stream's worker is found woken behind (SCHED_BATCH: a plain
 * wake-up does not always take the CPU, so the calls' times alone may miss it); the bytes
 * are set once the stream is synchronized.  Then the stream's next op starts at the op's
 * modeled end: behind LARGE_LEAD 1 ms kernels, events around the op and around the kernel
 * after it give the model's time (simple physics: 1 us for a memset, 1.5 us for a copy,
 * + bytes / SIMGPU_D2D_GBPS, set to MEMSET_GBPS) and the kernel's 1 ms, to 1 us. */
#define NMEMSET 9
#define MEMSET_BYTES (64u << 20)
#define MEMSET_CALL_US 200.0
#define MEMSET_SLOW 2
#define MEMSET_GBPS "100"
/* 1 ms kernels ahead of the timed op: the host enqueues the op and the events around it
 * while they run, so that a loaded host (the launching thread preempted for ms, a worker
 * moving the op's bytes on the one CPU) does not hold the event after it past the op's
 * modeled end (at a load of 13, one was 9 ms late behind a single kernel). */
#define LARGE_LEAD 30

/* Whether a stream worker of this process ("simgpu-s<id>", core.c) is SCHED_BATCH now:
 * woken behind the thread that launched its op (simgpu_enqueue) and not run since. */
static int
worker_woken_behind(void)
{
    DIR *dir = opendir("/proc/self/task");
    struct dirent *e;
    int batch = 0;
    while (dir && !batch && (e = readdir(dir)) != NULL) {
        char path[300], comm[32] = "";
        FILE *f;
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        f = fopen(path, "r");
        if (f) {
            if (!fgets(comm, sizeof comm, f))
                comm[0] = 0;
            fclose(f);
        }
        batch = !strncmp(comm, "simgpu-s", 8) && sched_getscheduler(atoi(e->d_name)) == SCHED_BATCH;
    }
    if (dir)
        closedir(dir);
    return batch;
}

/* Whether this process may put a thread in SCHED_BATCH (the wake-up behind its waker,
 * core.c), tried on this thread and undone. */
static int
batch_allowed(void)
{
    struct sched_param sp = {0};
    int policy = SCHED_OTHER, ok;
    pthread_getschedparam(pthread_self(), &policy, &sp);
    ok = pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp) == 0;
    if (ok)
        pthread_setschedparam(pthread_self(), policy, &sp);
    return ok;
}

/* The large op of run_large: a memset of buf to value, or with copy a copy of src (set to
 * value by the caller) into buf. */
static void
large_op(int copy, unsigned char *buf, const unsigned char *src, int value, cudaStream_t s)
{
    if (copy)
        CHECK_CUDA(cudaMemcpyAsync(buf, src, MEMSET_BYTES, cudaMemcpyDeviceToDevice, s));
    else
        CHECK_CUDA(cudaMemsetAsync(buf, value, MEMSET_BYTES, s));
}

static void
run_large(int copy)
{
    const char *what = copy ? "copy" : "memset";
    cudaStream_t s;
    cudaEvent_t e0, e1, e2;
    dim3 g = {1, 1, 1}, b = {32, 1, 1};
    double call_us[NMEMSET],
        model_us = (copy ? 1.5 : 1.0) + MEMSET_BYTES / (atof(MEMSET_GBPS) * 1e3);
    float ms_set = 0, ms_kern = 0;
    int slow = 0, behind = 0;
    unsigned char *buf, *src;
    CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK_CUDA(cudaEventCreate(&e0));
    CHECK_CUDA(cudaEventCreate(&e1));
    CHECK_CUDA(cudaEventCreate(&e2));
    CHECK_CUDA(cudaMalloc((void **)&buf, MEMSET_BYTES));
    CHECK_CUDA(cudaMalloc((void **)&src, MEMSET_BYTES));
    /* the worker exists (started by the op under test alone), the pages are touched */
    if (copy) {
        memset(src, 0, MEMSET_BYTES);
        CHECK_CUDA(cudaMemcpyAsync(buf, src, MEMSET_BYTES, cudaMemcpyDeviceToDevice, s));
    } else {
        CHECK_CUDA(cudaMemsetAsync(buf, 0, MEMSET_BYTES, s));
    }
    CHECK_CUDA(cudaStreamSynchronize(s));
    for (int i = 0; i < NMEMSET; i++) {
        struct timespec nap = {0, 5000000}; /* the worker back asleep */
        /* the source by this thread (the device's memory is the host's): no op of the
         * stream but the copy wakes its worker */
        if (copy)
            memset(src, i + 1, MEMSET_BYTES);
        nanosleep(&nap, NULL);
        double t0 = (double)simgpu_now_ns();
        large_op(copy, buf, src, i + 1, s);
        call_us[i] = ((double)simgpu_now_ns() - t0) / 1e3;
        behind += worker_woken_behind();
        CHECK_CUDA(cudaStreamSynchronize(s));
        CHECK(buf[0] == i + 1 && buf[MEMSET_BYTES / 2] == i + 1 && buf[MEMSET_BYTES - 1] == i + 1);
    }
    if (copy)
        memset(src, 0, MEMSET_BYTES);
    for (int i = 0; i < LARGE_LEAD; i++)
        CHECK_CUDA(cudaLaunchKernel(&k_1ms, g, b, NULL, 0, s));
    CHECK_CUDA(cudaEventRecord(e0, s));
    large_op(copy, buf, src, 0, s);
    CHECK_CUDA(cudaEventRecord(e1, s));
    CHECK_CUDA(cudaLaunchKernel(&k_1ms, g, b, NULL, 0, s));
    CHECK_CUDA(cudaEventRecord(e2, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    CHECK_CUDA(cudaEventElapsedTime(&ms_set, e0, e1));
    CHECK_CUDA(cudaEventElapsedTime(&ms_kern, e1, e2));
    printf("test_wake %s of %u MB on one CPU: calls", what, MEMSET_BYTES >> 20);
    for (int i = 0; i < NMEMSET; i++) {
        printf(" %.1f", call_us[i]);
        slow += call_us[i] >= MEMSET_CALL_US;
    }
    printf(" us (%d of %d over %.0f us, the worker woken behind %d); device time %.2f us "
           "(model %.2f), the next kernel %.2f us\n",
           slow, NMEMSET, MEMSET_CALL_US, behind, (double)ms_set * 1e3, model_us,
           (double)ms_kern * 1e3);
    CHECK(slow <= MEMSET_SLOW);
    /* a synchronous copy: the calling thread runs it (simgpu_stream_sync), and the worker
     * woken behind for it, finding nothing to run, goes back to normal scheduling */
    if (copy && batch_allowed()) {
        struct timespec nap = {0, 20000000};
        CHECK_CUDA(cudaMemcpy(buf, src, MEMSET_BYTES, cudaMemcpyDeviceToDevice));
        nanosleep(&nap, NULL);
        CHECK(!worker_woken_behind());
    }
    if (batch_allowed())
        CHECK(behind >= NMEMSET - MEMSET_SLOW);
    else
        printf("test_wake %s: SCHED_BATCH refused here (a sandbox's seccomp?): the worker "
               "cannot be woken behind, its check left out\n",
               what);
    CHECK(fabs((double)ms_set * 1e3 - model_us) < 1.0);
    CHECK(fabs((double)ms_kern * 1e3 - KERN_US) < 1.0);
    CHECK(buf[0] == 0 && buf[MEMSET_BYTES - 1] == 0);
    CHECK_CUDA(cudaFree(buf));
    CHECK_CUDA(cudaFree(src));
    CHECK_CUDA(cudaEventDestroy(e0));
    CHECK_CUDA(cudaEventDestroy(e1));
    CHECK_CUDA(cudaEventDestroy(e2));
    CHECK_CUDA(cudaStreamDestroy(s));
}

int
main(int argc, char **argv)
{
    setenv("SIMGPU_PHYSICS", "simple", 1); /* before the device reads its configuration */
    if (argc > 1 && !strcmp(argv[1], "--case")) {
        CHECK(simgpu_register_kernel(&k_1ms, "kernel_1ms", (uint64_t)(KERN_US * 1000)) == 0);
        CHECK_CUDA(cudaSetDevice(0));
        run_case(getenv("SIMGPU_WORKER_DELAY_US") != NULL);
        run_chain(getenv("SIMGPU_WORKER_DELAY_US") != NULL);
        CHECK(simgpu_register_kernel(&k_2us, "kernel_2us", (uint64_t)(GRAPH_KERN_US * 1000)) == 0);
        CHECK(simgpu_register_kernel(&k_lead, "kernel_lead", (uint64_t)(GRAPH_LEAD_MS * 1e6)) == 0);
        run_graph(getenv("SIMGPU_WORKER_DELAY_US") != NULL);
        run_events(getenv("SIMGPU_WORKER_DELAY_US") != NULL);
        return 0;
    }
    if (argc > 1 && (!strcmp(argv[1], "--memset") || !strcmp(argv[1], "--copy"))) {
        bind_one_cpu();
        setenv("SIMGPU_D2D_GBPS", MEMSET_GBPS, 1);
        CHECK(simgpu_register_kernel(&k_1ms, "kernel_1ms", (uint64_t)(KERN_US * 1000)) == 0);
        CHECK_CUDA(cudaSetDevice(0));
        run_large(!strcmp(argv[1], "--copy"));
        return 0;
    }
    /* Each case in a process of its own: the device reads its configuration once. */
    for (int delayed = 0; delayed < 4; delayed++) {
        int st = 0;
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            if (delayed == 1)
                setenv("SIMGPU_WORKER_DELAY_US", DELAY_US, 1);
            else
                unsetenv("SIMGPU_WORKER_DELAY_US");
            execl("/proc/self/exe", argv[0],
                  delayed == 3   ? "--copy"
                  : delayed == 2 ? "--memset"
                                 : "--case",
                  (char *)NULL);
            _exit(127);
        }
        CHECK(waitpid(pid, &st, 0) == pid);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    printf("test_wake: ok\n");
    return 0;
}
