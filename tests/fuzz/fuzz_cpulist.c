/*
 * fuzz_cpulist.c: libFuzzer target for the cpulist parser of the host-share model
 * (replay/hostshare_cpus.c), which reads the host_cpu_list meta row of traces. The input
 * is the row's text (NUL-terminated here), added to a host of one other rank. Any answer
 * is fine; a crash or undefined behaviour is not; a list it takes must give as many CPUs
 * as its set holds, and the host at least as many CPUs as either rank's. Built and run by
 * tests/fuzz/run-batch-fuzz.sh.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hostshare.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint64_t set[HOSTSHARE_CPU_MAX / 64];
    static hostshare_cpus h;
    char *s = malloc(size + 1), why[160];
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = 0;
    int c = hostshare_parse_cpu_list(s, set, why, sizeof why), held = 0;
    for (size_t w = 0; w < HOSTSHARE_CPU_MAX / 64; w++)
        held += __builtin_popcountll(set[w]);
    if (c != (c < 0 ? -1 : held) || (c < 0 && held != 0) || c == 0)
        abort();
    memset(&h, 0, sizeof h);
    (void)hostshare_cpus_add(&h, 1, "0", why, sizeof why);
    int bad = hostshare_cpus_add(&h, c > 0 ? c : 1, s, why, sizeof why) != 0;
    int64_t n = hostshare_cpus_count(&h);
    if (n < (c > 0 ? c : 1) || (bad && n != (c > 0 ? c : 1)))
        abort();
    free(s);
    return 0;
}
