/* check.h: the checks of the nvcc test programs (tests/simgpu/cu): each failed check says
 * what and where and makes the program exit 1; main ends with CU_DONE(). */
#ifndef SIMGPU_CU_CHECK_H
#define SIMGPU_CU_CHECK_H
#include <stdio.h>
#include <stdlib.h>

static int cu_checks, cu_failures;

#define CU_CHECK(cond)                                                                             \
    do {                                                                                           \
        cu_checks++;                                                                               \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            cu_failures++;                                                                         \
        }                                                                                          \
    } while (0)

/* A runtime call that must succeed. */
#define CU_OK(call)                                                                                \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        cu_checks++;                                                                               \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_));   \
            cu_failures++;                                                                         \
        }                                                                                          \
    } while (0)

#define CU_DONE()                                                                                  \
    do {                                                                                           \
        printf("%s: %d checks, %d failed\n", __FILE__, cu_checks, cu_failures);                    \
        return cu_failures ? 1 : 0;                                                                \
    } while (0)

#endif
