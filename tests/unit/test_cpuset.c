/* test_cpuset: common/cpuset.h, the CPUs a process may run on on a host of more than
 * 1,024 CPUs (where a cpu_set_t is refused) and their cpulist text.
 *
 * cpuset_affinity is run against a stand-in sched_getaffinity defined here (the test's
 * definition is the one its calls bind to): a kernel of 4,096 CPUs, refusing smaller sets
 * with EINVAL as Linux does, must give the set grown to 4,096 with its CPUs; another
 * error is returned as it is. Then against the real one (dlsym RTLD_NEXT): its text must be
 * this process's Cpus_allowed_list in /proc/self/status, Linux's own cpulist. The text of
 * sets above 1,024 CPUs: 0, 1500-1502 and 2047 of 2,048; all 2,048; the longest texts
 * (pairs with a gap, singles with a gap) checked against one built here; an empty set. */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpuset.h"
#include "testutil.h"

/* The stand-in kernel: 0 uses the real call; else it has fake_cpus CPUs, of which those
 * in fake_set are allowed, and fails with fake_errno when that is not 0. */
static int fake_cpus, fake_errno, fake_calls;
static const int fake_set[] = {0, 1500, 1501, 1502, 4095};

int
sched_getaffinity(pid_t pid, size_t size, cpu_set_t *set)
{
    int rc = 0;
    fake_calls++;
    if (fake_cpus == 0) {
        int (*real)(pid_t, size_t, cpu_set_t *) =
            (int (*)(pid_t, size_t, cpu_set_t *))dlsym(RTLD_NEXT, "sched_getaffinity");
        rc = real ? real(pid, size, set) : (errno = ENOSYS, -1);
    } else if (fake_errno != 0 || size * 8 < (size_t)fake_cpus) {
        errno = fake_errno ? fake_errno : EINVAL;
        rc = -1;
    } else {
        CPU_ZERO_S(size, set);
        for (size_t k = 0; k < sizeof fake_set / sizeof *fake_set; k++)
            CPU_SET_S((size_t)fake_set[k], size, set);
    }
    return rc;
}

/* cpuset_affinity on a host of 4,096 CPUs, and its errors. */
static void
test_affinity_grows(void)
{
    size_t size = 0;
    fake_cpus = 4096;
    fake_calls = 0;
    cpu_set_t *set = cpuset_affinity(0, &size);
    CHECK(set != NULL);
    CHECK_EQ_U(size, CPU_ALLOC_SIZE(4096));
    CHECK_EQ(fake_calls, 3); /* 1,024, 2,048, 4,096 */
    char *text = set ? cpuset_list_text(set, size) : NULL;
    CHECK(text && strcmp(text, "0,1500-1502,4095") == 0);
    CHECK_EQ(set ? CPU_COUNT_S(size, set) : 0, 5);
    free(text);
    CPU_FREE(set);

    fake_errno = EPERM;
    errno = 0;
    set = cpuset_affinity(0, &size);
    CHECK(set == NULL && size == 0 && errno == EPERM);
    fake_errno = 0;

    fake_cpus = 2 * CPUSET_MAX_CPUS; /* never fits: the growth stops */
    errno = 0;
    set = cpuset_affinity(0, &size);
    CHECK(set == NULL && size == 0 && errno == EINVAL);
    fake_cpus = 0;
}

/* cpuset_affinity's text on this host: Linux's Cpus_allowed_list for this process. */
static void
test_affinity_real(void)
{
    char line[8192], want[8192] = "";
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Cpus_allowed_list: %8191s", want) == 1)
            break;
    if (f)
        fclose(f);
    size_t size = 0;
    cpu_set_t *set = cpuset_affinity(0, &size);
    char *text = set ? cpuset_list_text(set, size) : NULL;
    CHECK(want[0] != '\0');
    CHECK(text && strcmp(text, want) == 0);
    if (text && strcmp(text, want) != 0)
        fprintf(stderr, "cpuset_list_text: %s, /proc/self/status: %s\n", text, want);
    free(text);
    CPU_FREE(set);
}

/* The text of set (n CPUs) against want. */
static void
check_text(const cpu_set_t *set, int n, const char *want)
{
    char *text = cpuset_list_text(set, CPU_ALLOC_SIZE(n));
    CHECK(text && strcmp(text, want) == 0);
    if (text && strcmp(text, want) != 0)
        fprintf(stderr, "cpuset_list_text: %.80s..., expected %.80s...\n", text, want);
    free(text);
}

/* Sets of n CPUs where CPU i is in when i % period < run: their text built here. */
static void
test_text_longest(int n, int period, int run)
{
    cpu_set_t *set = CPU_ALLOC(n);
    size_t size = CPU_ALLOC_SIZE(n), len = 0;
    char *want = malloc((size_t)n * 12 + 1);
    CHECK(set && want);
    if (set && want) {
        CPU_ZERO_S(size, set);
        want[0] = '\0';
        for (int i = 0; i < n; i += period) {
            int last = i + run - 1 < n ? i + run - 1 : n - 1;
            for (int c = i; c <= last; c++)
                CPU_SET_S((size_t)c, size, set);
            len += (size_t)(last > i ? sprintf(want + len, "%s%d-%d", len ? "," : "", i, last)
                                     : sprintf(want + len, "%s%d", len ? "," : "", i));
        }
        check_text(set, n, want);
    }
    free(want);
    CPU_FREE(set);
}

/* Sets above 1,024 CPUs, and an empty one. */
static void
test_text(void)
{
    cpu_set_t *set = CPU_ALLOC(2048);
    size_t size = CPU_ALLOC_SIZE(2048);
    CHECK(set != NULL);
    if (set) {
        CPU_ZERO_S(size, set);
        CHECK(cpuset_list_text(set, size) == NULL);
        CPU_SET_S(0, size, set);
        CPU_SET_S(1500, size, set);
        CPU_SET_S(1501, size, set);
        CPU_SET_S(1502, size, set);
        CPU_SET_S(2047, size, set);
        check_text(set, 2048, "0,1500-1502,2047");
        for (size_t c = 0; c < 2048; c++)
            CPU_SET_S(c, size, set);
        check_text(set, 2048, "0-2047");
    }
    CPU_FREE(set);
    test_text_longest(2048, 3, 2);       /* "0-1,3-4,...": the most text a CPU */
    test_text_longest(4096, 2, 1);       /* "0,2,4,..." */
    test_text_longest(1024, 1024, 1024); /* "0-1023" */
}

int
main(void)
{
    test_affinity_grows();
    test_affinity_real();
    test_text();
    return tests_done();
}
