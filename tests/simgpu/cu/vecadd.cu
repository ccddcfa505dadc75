/* vecadd.cu: a <<<>>> launch as nvcc of CUDA 13 compiles it (fat binary and function
 * registration, __cudaPushCallConfiguration, __cudaGetKernel, __cudaLaunchKernel), named by
 * its registered device name; bad configurations fail at the launch. */
#include <string.h>

#include "check.h"

__global__ void
vecAdd(const float *a, const float *b, float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        c[i] = a[i] + b[i];
}

int
main(void)
{
    const int n = 1 << 16;
    float *a, *b, *c;
    const char *name = NULL;
    CU_OK(cudaMalloc(&a, n * sizeof(float)));
    CU_OK(cudaMalloc(&b, n * sizeof(float)));
    CU_OK(cudaMalloc(&c, n * sizeof(float)));
    for (int it = 0; it < 3; it++)
        vecAdd<<<(n + 255) / 256, 256>>>(a, b, c, n);
    CU_OK(cudaGetLastError());
    CU_OK(cudaDeviceSynchronize());
    CU_OK(cudaFuncGetName(&name, (const void *)vecAdd));
    CU_CHECK(name && !strcmp(name, "_Z6vecAddPKfS0_Pfi"));
    /* a block too large, an empty grid: the launch fails and says so */
    vecAdd<<<1, 2048>>>(a, b, c, n);
    CU_CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
    vecAdd<<<0, 256>>>(a, b, c, n);
    CU_CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
    CU_OK(cudaFree(a));
    CU_OK(cudaFree(b));
    CU_OK(cudaFree(c));
    CU_DONE();
}
