/*
 * fuzz_ncclname.c: libFuzzer target for the NCCL kernel-name parser (replay/ncclname.c),
 * which reads kernel names from traces (Kineto and Nsight imports included). The input is
 * the name (NUL-terminated here). Any answer is fine; a crash or undefined behaviour is
 * not; a name it takes must give a known algorithm and a short protocol. Built and run by
 * tests/fuzz/run-batch-fuzz.sh.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ncclname.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    ncclname n;
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = 0;
    if (ncclname_parse(s, &n) == 1 &&
        (n.algo < 0 || n.algo > NCCLNAME_ALGO_PAT || strlen(n.kernel_proto) > 6))
        abort();
    free(s);
    return 0;
}
