/* simgpu_check.h: assertion macros for the simgpu C tests. */
#ifndef SIMGPU_CHECK_H
#define SIMGPU_CHECK_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

/* Fails the test (exit 1) with the location when `cond` is false. */
#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* Fails the test unless the CUDA runtime call returns cudaSuccess. */
#define CHECK_CUDA(call)                                                                           \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s -> %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_)); \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* Time this thread has waited for a CPU (runnable, not running), ms: the second field of
 * /proc/thread-self/schedstat; 0 where the kernel does not keep it. A test of the device's
 * timeline takes it off the lateness it measures. */
static inline double
ms_waiting_for_cpu(void)
{
    unsigned long long run = 0, wait = 0;
    FILE *f = fopen("/proc/thread-self/schedstat", "r");
    if (f) {
        if (fscanf(f, "%llu %llu", &run, &wait) != 2)
            wait = 0;
        fclose(f);
    }
    return (double)wait / 1e6;
}

/* Voluntary context switches of the process so far (every thread): the times its threads
 * slept, each a wake-up that needs a CPU again on a loaded host. */
static inline long
voluntary_switches(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_nvcsw;
}

/* Voluntary context switches so far of this process's stream workers (threads named
 * simgpu-sN), each a wake-up after a wait. */
static inline long
worker_switches(void)
{
    long n = 0;
    DIR *dir = opendir("/proc/self/task");
    struct dirent *de;
    CHECK(dir != NULL);
    while ((de = readdir(dir))) {
        char path[300], line[128];
        FILE *f;
        long v;
        int worker = 0;
        if (de->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "/proc/self/task/%s/status", de->d_name);
        if (!(f = fopen(path, "r")))
            continue; /* the thread has exited */
        while (fgets(line, sizeof(line), f)) {
            if (!strncmp(line, "Name:\tsimgpu-s", 14))
                worker = 1;
            if (worker && sscanf(line, "voluntary_ctxt_switches: %ld", &v) == 1)
                n += v;
        }
        fclose(f);
    }
    closedir(dir);
    return n;
}

#ifdef _GNU_SOURCE
#include <sched.h>

/* Binds the process to the first CPU it may run on (before any thread is started: the
 * device's workers inherit it). For tests that define _GNU_SOURCE (sched_setaffinity). */
static inline void
bind_one_cpu(void)
{
    cpu_set_t all, one;
    int cpu = 0;
    CHECK(sched_getaffinity(0, sizeof all, &all) == 0);
    while (cpu < CPU_SETSIZE - 1 && !CPU_ISSET(cpu, &all))
        cpu++;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    CHECK(sched_setaffinity(0, sizeof one, &one) == 0);
}
#endif

#endif /* SIMGPU_CHECK_H */
