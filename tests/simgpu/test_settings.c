/* test_settings: the device's number settings are read strictly (env.c).  A child process
 * (this program with --run, SIMGPU_PHYSICS=simple) times an unregistered kernel and a
 * 1 MiB memset with events (queued behind a 5 ms kernel), and its kernel launches on the host (the
 * least of LAUNCHES calls); run once with good values (each taken: the kernel
 * SIMGPU_DEFAULT_KERNEL_US, the memset 1 us + bytes / SIMGPU_D2D_GBPS, each launch at least
 * SIMGPU_LAUNCH_US; nothing said) and once with values that are not numbers of their range ("25us",
 * "-3", "abc", "0x", "2.5" for a whole number): each is named on stderr and its default taken (10
 * us, 1500 GB/s, 4 us, slowdown 1, 1 device). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "simgpu.h"
#include "simgpu_check.h"

#define LAUNCHES 20
#define SET_BYTES (1u << 20)

static char k_unregistered, k_lead;

/* The child: prints "kernel_us MEMSET_US launch_us LAUNCH_US devices N". */
static int
run(void)
{
    cudaStream_t s;
    cudaEvent_t e0, e1, e2;
    dim3 g = {1, 1, 1}, b = {32, 1, 1};
    float k_ms = 0, m_ms = 0;
    double least_us = 1e9;
    int n = 0;
    void *buf;
    CHECK_CUDA(cudaGetDeviceCount(&n));
    CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK_CUDA(cudaEventCreate(&e0));
    CHECK_CUDA(cudaEventCreate(&e1));
    CHECK_CUDA(cudaEventCreate(&e2));
    CHECK_CUDA(cudaMalloc(&buf, SET_BYTES));
    CHECK(simgpu_register_kernel(&k_lead, "kernel_lead", 5000000) == 0);
    /* behind 5 ms of work, so that what the events bracket runs back to back */
    CHECK_CUDA(cudaLaunchKernel(&k_lead, g, b, NULL, 0, s));
    CHECK_CUDA(cudaEventRecord(e0, s));
    CHECK_CUDA(cudaLaunchKernel(&k_unregistered, g, b, NULL, 0, s));
    CHECK_CUDA(cudaEventRecord(e1, s));
    CHECK_CUDA(cudaMemsetAsync(buf, 0, SET_BYTES, s));
    CHECK_CUDA(cudaEventRecord(e2, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    CHECK_CUDA(cudaEventElapsedTime(&k_ms, e0, e1));
    CHECK_CUDA(cudaEventElapsedTime(&m_ms, e1, e2));
    for (int i = 0; i < LAUNCHES; i++) {
        uint64_t t0 = simgpu_now_ns();
        CHECK_CUDA(cudaLaunchKernel(&k_unregistered, g, b, NULL, 0, s));
        double us = (double)(simgpu_now_ns() - t0) / 1e3;
        least_us = us < least_us ? us : least_us;
    }
    CHECK_CUDA(cudaStreamSynchronize(s));
    printf("kernel_us %.3f memset_us %.3f launch_us %.3f devices %d\n", (double)k_ms * 1e3,
           (double)m_ms * 1e3, least_us, n);
    return 0;
}

/* Runs the child with `settings` (VAR=VALUE ...) before it; out gets its stdout and
 * stderr together.  Returns its figures in *k, *m, *l, *n (-1 when not printed). */
static void
child(const char *settings, char *out, size_t cap, double *k, double *m, double *l, int *n)
{
    char self[4096], cmd[8192];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(len > 0);
    self[len] = '\0';
    snprintf(cmd, sizeof cmd, "env -u LOCAL_WORLD_SIZE SIMGPU_PHYSICS=simple %s '%s' --run 2>&1",
             settings, self);
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL);
    size_t got = fread(out, 1, cap - 1, p);
    out[got] = '\0';
    CHECK(pclose(p) == 0);
    const char *line = strstr(out, "kernel_us ");
    *k = *m = *l = -1;
    *n = -1;
    CHECK(line &&
          sscanf(line, "kernel_us %lf memset_us %lf launch_us %lf devices %d", k, m, l, n) == 4);
    printf("%s:\n%s", settings, out);
}

int
main(int argc, char **argv)
{
    static char out[65536];
    double k, m, l;
    int n;
    if (argc > 1 && !strcmp(argv[1], "--run"))
        return run();
    child("SIMGPU_DEFAULT_KERNEL_US=25 SIMGPU_D2D_GBPS=100 SIMGPU_LAUNCH_US=20 "
          "SIMGPU_SLOWDOWN=2 SIMGPU_DEVICE_COUNT=2",
          out, sizeof out, &k, &m, &l, &n);
    CHECK(strstr(out, "simgpu:") == NULL);
    CHECK(fabs(k - 50.0) < 0.5); /* 25 us x slowdown 2 */
    CHECK(fabs(m - (1.0 + SET_BYTES / 100e3)) < 0.5);
    CHECK(l >= 20.0);
    CHECK(n == 2);
    child("SIMGPU_DEFAULT_KERNEL_US=25us SIMGPU_D2D_GBPS=-3 SIMGPU_LAUNCH_US=abc "
          "SIMGPU_SLOWDOWN=0x SIMGPU_DEVICE_COUNT=2.5 SIMGPU_H2D_GBPS=0x10 "
          "SIMGPU_CONTENTION=' 5'",
          out, sizeof out, &k, &m, &l, &n);
    CHECK(strstr(out, "simgpu: SIMGPU_DEFAULT_KERNEL_US=25us is not a number from 0 to 1e+09: "
                      "10\n") != NULL);
    CHECK(strstr(out, "simgpu: SIMGPU_D2D_GBPS=-3 is not a number from 1e-06 to 1e+09: 1500\n"));
    CHECK(strstr(out, "simgpu: SIMGPU_LAUNCH_US=abc is not a number from 0 to 1e+09: 4\n"));
    CHECK(strstr(out, "simgpu: SIMGPU_SLOWDOWN=0x is not a number from 1e-06 to 1e+06: 1\n"));
    CHECK(strstr(out, "simgpu: SIMGPU_H2D_GBPS=0x10 is not a number from 1e-06 to 1e+09: 25\n"));
    CHECK(strstr(out, "simgpu: SIMGPU_CONTENTION= 5 is not a number from 0 to 1e+06: 0\n"));
    CHECK(strstr(out, "simgpu: SIMGPU_DEVICE_COUNT=2.5 is not a whole number from 0 to 1000000: "
                      "0\n"));
    CHECK(fabs(k - 10.0) < 0.5);
    CHECK(fabs(m - (1.0 + SET_BYTES / 1500e3)) < 0.5);
    CHECK(l >= 4.0);
    CHECK(n == 1);
    printf("test_settings: ok\n");
    return 0;
}
