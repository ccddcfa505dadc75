/*
 * cpuset.h: the CPUs a process may run on, in a set sized for any host, and Linux's
 * cpulist text of a set ("0-3,8-11"). A cpu_set_t holds CPU_SETSIZE (1,024) CPUs, and
 * sched_getaffinity refuses it (EINVAL) on a host with more; these sets are CPU_ALLOC'd
 * and grown until the kernel's mask fits, as glibc's CPU_SET(3) and util-linux's taskset
 * do. Used by the collector at its start and at the end of a job (collector/cpuuse.c:
 * meta host_cpus, host_cpu_list, host_cpu_list_end) and by simrun --bind-cpus.
 *
 * Header-only, as bytes.h: the collector links no common library.
 */
#ifndef DPRO_CPUSET_H
#define DPRO_CPUSET_H

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>

/* The most CPUs cpuset_affinity asks the kernel about (its sets double from CPU_SETSIZE):
 * far above any Linux build's NR_CPUS (8,192 at most today). */
#define CPUSET_MAX_CPUS (1 << 22)

/* The CPUs pid (0: the calling thread) may run on, in a malloc'd set of *size bytes (the
 * caller CPU_FREEs it), grown from CPU_SETSIZE CPUs until the kernel's mask fits. Returns
 * NULL, *size 0 and errno set, when sched_getaffinity fails other than for the set's size,
 * or memory ends. */
static inline cpu_set_t *
cpuset_affinity(pid_t pid, size_t *size)
{
    cpu_set_t *set = NULL;
    int done = 0;
    *size = 0;
    for (int n = CPU_SETSIZE; !done && n <= CPUSET_MAX_CPUS; n *= 2) {
        CPU_FREE(set);
        set = CPU_ALLOC(n);
        if (set && sched_getaffinity(pid, CPU_ALLOC_SIZE(n), set) == 0)
            *size = CPU_ALLOC_SIZE(n);
        done = !set || *size > 0 || errno != EINVAL; /* !set: errno ENOMEM */
    }
    if (*size == 0) {
        int e = errno;
        CPU_FREE(set);
        set = NULL;
        errno = e;
    }
    return set;
}

/* The cpulist text of set (size bytes), as Linux writes it ("0-3,8-11": ascending ids, a
 * range for two CPUs or more, commas between), in a malloc'd buffer the caller frees, sized
 * from the set: each CPU in it adds at most its id and one separator. Returns NULL when
 * the set is empty or memory ends. */
static inline char *
cpuset_list_text(const cpu_set_t *set, size_t size)
{
    int ncpus = (int)(size * 8), count = CPU_COUNT_S(size, set), digits = 1;
    for (int m = ncpus - 1; m >= 10; m /= 10)
        digits++;
    size_t cap = (size_t)count * (size_t)(digits + 1) + 1, len = 0;
    char *buf = count > 0 ? malloc(cap) : NULL;
    for (int i = 0; buf && i < ncpus; i++) {
        if (!CPU_ISSET_S((size_t)i, size, set))
            continue;
        int j = i;
        while (j + 1 < ncpus && CPU_ISSET_S((size_t)j + 1, size, set))
            j++;
        int k = j > i ? snprintf(buf + len, cap - len, "%s%d-%d", len ? "," : "", i, j)
                      : snprintf(buf + len, cap - len, "%s%d", len ? "," : "", i);
        if (k < 0 || (size_t)k >= cap - len) { /* never, by cap: a broken bound shows here */
            free(buf);
            buf = NULL;
        } else {
            len += (size_t)k;
        }
        i = j;
    }
    return buf;
}

#endif
