/*
 * coll-job: a tiny CUDA-runtime job for the collector's awkward-case tests. It links
 * libcollstub (tests/collector/stub-cudart.c) or any libcudart, and does what the mode says:
 *
 *   launches N        N kernel launches and one memcpy, one sync
 *   fork N M          N launches, fork; the child makes M launches; the parent N more
 *   fork-early N      N children, each making one launch (its first hook: it starts its
 *                     writer thread) and forking 0 to 200 us later a grandchild that makes
 *                     one launch and exits; a grandchild not gone within 5 s is killed and
 *                     counted: prints "early_forks=N hung=K"
 *   exec N            N launches, then exec itself as "launches 3"
 *   thread-exit N     a thread makes N launches and exits; main makes N more after join
 *   loop              launches until killed; prints "ready" after the first 1000
 *   missing           calls ncclAllReduce and cudaMallocHost found by dlsym(RTLD_DEFAULT):
 *                     with the collector and no libnccl (and a libcudart without
 *                     cudaMallocHost) the collector's hooks answer an error code
 *   errno             checks that a hook leaves errno as the real call did
 *   bench N [S]       N launches timed in batches of 1000: prints the median ns per launch;
 *                     S names the stream: "stream" (a created one, the default), "legacy"
 *                     (0) or "perthread" (cudaStreamPerThread)
 *   rate N R          N launches paced at R per second (busy pacing, one thread)
 *   rebind N WHEN     binds its main thread to the lowest CPU it may run on, before its
 *                     first launch (WHEN "early": after the collector's start, before the
 *                     writer thread's) or after N launches ("late": the writer thread
 *                     started on the wider set), then N launches more: prints
 *                     "rebound=CPU" (-1: one CPU only, nothing changed)
 *   churn N           N rounds: a stream created, two launches on it, the stream
 *                     destroyed (its handle is the next round's, malloc's reuse, with a
 *                     new id; no other stream named between), then one launch on the
 *                     job's stream: prints "reused=K", the rounds whose stream had a
 *                     handle seen before
 *
 *   sched MS          three threads, each after one launch: two bound to one CPU spin for
 *                     MS ms together, the third sleeps MS ms; all then wait 100 ms more
 *                     (the writer samples them alive). Prints "busy=TID,TID sleeper=TID"
 * Prints "launches=K" (what it did) on stdout; exit 0 unless something went wrong.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

/* A host function standing for a kernel; exported so dladdr can name it. */
void coll_job_kernel(void);
void
coll_job_kernel(void)
{
}

static cudaStream_t job_stream;

/* Makes n launches; returns the number that succeeded. */
static int
job_launches(int n)
{
    dim3 grid = {4, 2, 1}, block = {128, 1, 1};
    int ok = 0;
    for (int i = 0; i < n; i++)
        ok += cudaLaunchKernel((const void *)coll_job_kernel, grid, block, NULL, 0, job_stream) ==
              cudaSuccess;
    return ok;
}

static void *
job_thread(void *arg)
{
    int n = *(int *)arg;
    *(int *)arg = job_launches(n);
    return NULL;
}

static uint64_t
job_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int
job_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Waits at most ms milliseconds for pid; kills it when it is still there. Returns its exit
 * status, or -1 when it was killed. */
static int
job_wait_bounded(pid_t pid, int ms)
{
    int status = 0;
    for (int waited = 0; waited < ms; waited++) {
        if (waitpid(pid, &status, WNOHANG) == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        usleep(1000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

/* fork-early N: see the header. */
static int
job_fork_early(int n)
{
    int hung = 0;
    for (int i = 0; i < n; i++) {
        pid_t child = fork();
        if (child == 0) {
            job_launches(1);
            /* the fork lands at another moment of the writer's start each time (0-200 us) */
            for (uint64_t t0 = job_now(); job_now() - t0 < (uint64_t)(i % 41) * 5000;)
                ;
            pid_t grandchild = fork();
            if (grandchild == 0) {
                job_launches(1);
                exit(0);
            }
            exit(grandchild > 0 && job_wait_bounded(grandchild, 5000) == 0 ? 0 : 3);
        }
        int status = 0;
        if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0)
            hung++;
    }
    printf("early_forks=%d hung=%d\n", n, hung);
    return 0;
}

/* Times n launches in batches of 1000; prints the median ns per launch. */
static int
job_bench(int n)
{
    int batches = n / 1000 > 0 ? n / 1000 : 1;
    double *per = calloc((size_t)batches, sizeof *per);
    if (per == NULL)
        return 1;
    job_launches(1000); /* warm up: first-call paths, ring allocation */
    for (int b = 0; b < batches; b++) {
        uint64_t t0 = job_now();
        job_launches(1000);
        per[b] = (double)(job_now() - t0) / 1000.0;
    }
    qsort(per, (size_t)batches, sizeof *per, job_cmp_double);
    printf("median_ns_per_launch=%.1f\n", per[batches / 2]);
    free(per);
    return 0;
}

/* Makes n launches paced at rate per second. */
static int
job_rate(int n, double rate)
{
    uint64_t t0 = job_now();
    double gap = 1e9 / rate;
    int done = 0;
    for (int i = 0; i < n; i++) {
        while ((double)(job_now() - t0) < i * gap)
            ;
        done += job_launches(1);
    }
    double secs = (double)(job_now() - t0) / 1e9;
    printf("launches=%d seconds=%.3f rate=%.0f\n", done, secs, done / secs);
    return 0;
}

typedef int (*job_nccl_allreduce_fn)(const void *, void *, size_t, int, int, void *, void *);
typedef int (*job_cuda_malloc_fn)(void **, size_t);

/* The churn mode: n rounds; returns the launches made. */
static int
job_churn(int n)
{
    dim3 grid = {1, 1, 1}, block = {32, 1, 1};
    cudaStream_t seen[64];
    int done = 0, reused = 0;
    for (int r = 0; r < n && r < 64; r++) {
        cudaStream_t s;
        if (cudaStreamCreate(&s) != cudaSuccess)
            break;
        for (int i = 0; i < r; i++)
            if (seen[i] == s) {
                reused++;
                break;
            }
        seen[r] = s;
        for (int i = 0; i < 2; i++)
            done += cudaLaunchKernel((const void *)coll_job_kernel, grid, block, NULL, 0, s) ==
                    cudaSuccess;
        cudaStreamDestroy(s);
    }
    printf("reused=%d\n", reused);
    return done + job_launches(1);
}

/* What sched's threads share. */
static struct {
    pthread_barrier_t start, end;
    int ms, cpu;
} job_sched;

/* One of sched's threads: arg points at 1 (spin, bound to job_sched.cpu) or 0 (sleep);
 * overwritten with the thread's tid. */
static void *
job_sched_thread(void *arg)
{
    int busy = *(int *)arg;
    *(int *)arg = (int)syscall(SYS_gettid);
    if (busy) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(job_sched.cpu, &set);
        sched_setaffinity(0, sizeof set, &set);
    }
    job_launches(1);
    pthread_barrier_wait(&job_sched.start);
    uint64_t until = job_now() + (uint64_t)job_sched.ms * 1000000ull;
    if (busy) {
        volatile uint64_t spins = 0;
        while (job_now() < until)
            spins++;
    } else {
        usleep((useconds_t)job_sched.ms * 1000);
    }
    pthread_barrier_wait(&job_sched.end);
    return NULL;
}

/* sched MS: see the header. */
static int
job_sched_run(int ms)
{
    pthread_t th[3];
    int arg[3] = {1, 1, 0};
    cpu_set_t set;
    CPU_ZERO(&set);
    job_sched.ms = ms;
    job_sched.cpu = 0;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int i = CPU_SETSIZE - 1; i >= 0; i--)
            if (CPU_ISSET(i, &set))
                job_sched.cpu = i;
    pthread_barrier_init(&job_sched.start, NULL, 4);
    pthread_barrier_init(&job_sched.end, NULL, 4);
    for (int i = 0; i < 3; i++)
        pthread_create(&th[i], NULL, job_sched_thread, &arg[i]);
    pthread_barrier_wait(&job_sched.start);
    usleep((useconds_t)ms * 1000 + 100000);
    pthread_barrier_wait(&job_sched.end);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    printf("busy=%d,%d sleeper=%d\n", arg[0], arg[1], arg[2]);
    return 3;
}

/* Binds the calling thread to the lowest CPU it may run on. Returns that CPU, or -1 when
 * it may run on one only (or the kernel does not say). */
static int
job_bind_lowest(void)
{
    cpu_set_t set;
    int cpu = -1;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 1) {
        for (int i = 0; cpu < 0 && i < CPU_SETSIZE; i++)
            if (CPU_ISSET(i, &set))
                cpu = i;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        if (sched_setaffinity(0, sizeof set, &set) != 0)
            cpu = -1;
    }
    return cpu;
}

int
main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: coll-job MODE [ARG]\n");
        return 2;
    }
    const char *mode = argv[1];
    const char *arg = argc > 2 ? argv[2] : "10";
    int n = atoi(arg), done = 0;
    if (strcmp(mode, "missing") == 0) {
        job_nccl_allreduce_fn ar = (job_nccl_allreduce_fn)dlsym(RTLD_DEFAULT, "ncclAllReduce");
        job_cuda_malloc_fn cm = (job_cuda_malloc_fn)dlsym(RTLD_DEFAULT, "cudaMallocHost");
        void *p = NULL;
        printf("ncclAllReduce=%d\n", ar ? ar(NULL, NULL, 1, 0, 0, NULL, NULL) : -1);
        printf("cudaMallocHost=%d\n", cm ? cm(&p, 16) : -1);
        return 0;
    }
    int rebind_late = argc > 3 && strcmp(argv[3], "late") == 0, rebound = -1;
    if (strcmp(mode, "rebind") == 0 && !rebind_late)
        rebound = job_bind_lowest(); /* before the first hook: the writer starts on it */
    if (cudaStreamCreate(&job_stream) != cudaSuccess)
        return 1;
    if (strcmp(mode, "launches") == 0) {
        void *buf = NULL;
        done = job_launches(n);
        cudaMalloc(&buf, 1024);
        cudaMemcpyAsync(buf, buf, 1024, cudaMemcpyDeviceToDevice, job_stream);
        cudaStreamSynchronize(job_stream);
        cudaFree(buf);
    } else if (strcmp(mode, "errno") == 0) {
        errno = 1234;
        cudaDeviceSynchronize();
        int kept = errno == 1234;
        errno = 4321;
        job_launches(1);
        kept &= errno == 4321;
        printf("errno_kept=%d\n", kept);
        return kept ? 0 : 1;
    } else if (strcmp(mode, "fork") == 0) {
        int m = argc > 3 ? atoi(argv[3]) : 5;
        done = job_launches(n);
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            int k = job_launches(m);
            printf("child_launches=%d\n", k);
            fflush(stdout);
            exit(0);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        done += job_launches(n);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            return 1;
    } else if (strcmp(mode, "fork-early") == 0) {
        return job_fork_early(n);
    } else if (strcmp(mode, "exec") == 0) {
        done = job_launches(n);
        printf("launches=%d\n", done);
        fflush(stdout);
        char *args[] = {argv[0], "launches", "3", NULL};
        execv("/proc/self/exe", args);
        perror("execv");
        return 1;
    } else if (strcmp(mode, "thread-exit") == 0) {
        pthread_t th;
        int count = n;
        pthread_create(&th, NULL, job_thread, &count);
        pthread_join(th, NULL);
        done = count + job_launches(n);
    } else if (strcmp(mode, "bench") == 0) {
        const char *which = argc > 3 ? argv[3] : "stream";
        if (strcmp(which, "legacy") == 0)
            job_stream = 0;
        else if (strcmp(which, "perthread") == 0)
            job_stream = cudaStreamPerThread;
        else if (strcmp(which, "stream") != 0) {
            fprintf(stderr, "coll-job: unknown stream %s\n", which);
            return 2;
        }
        return job_bench(n);
    } else if (strcmp(mode, "rebind") == 0) {
        if (rebind_late) {
            done = job_launches(n);
            rebound = job_bind_lowest();
        }
        done += job_launches(n);
        printf("rebound=%d\n", rebound);
    } else if (strcmp(mode, "sched") == 0) {
        done = job_sched_run(n);
    } else if (strcmp(mode, "churn") == 0) {
        done = job_churn(n);
    } else if (strcmp(mode, "rate") == 0) {
        return job_rate(n, argc > 3 ? atof(argv[3]) : 1e6);
    } else if (strcmp(mode, "loop") == 0) {
        for (;;) {
            done += job_launches(100);
            if (done == 1000) {
                printf("ready\n");
                fflush(stdout);
            }
            usleep(1000);
        }
    } else {
        fprintf(stderr, "coll-job: unknown mode %s\n", mode);
        return 2;
    }
    cudaStreamDestroy(job_stream);
    printf("launches=%d\n", done);
    return 0;
}
