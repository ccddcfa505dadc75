/* vecadd.cu: a <<<>>> launch as nvcc of CUDA 13 compiles it (fat binary and function
 * registration, __cudaPushCallConfiguration, __cudaGetKernel, __cudaLaunchKernel), named by
 * its registered device name; bad configurations fail at the launch.  Module variables
 * (__constant__, __device__, __managed__) through the symbol calls. */
#include <string.h>

#include "check.h"

__global__ void
vecAdd(const float *a, const float *b, float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        c[i] = a[i] + b[i];
}

__constant__ int params[4];
__device__ float bias;
__managed__ int counter;
static int host_only;

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
    /* module variables */
    {
        int in[4] = {1, 2, 3, 4}, out[4] = {0, 0, 0, 0};
        size_t size = 0;
        void *p = NULL;
        CU_OK(cudaMemcpyToSymbol(params, in, sizeof(in)));
        CU_OK(cudaMemcpyFromSymbol(out, params, 2 * sizeof(int), 2 * sizeof(int)));
        CU_CHECK(out[0] == 3 && out[1] == 4);
        CU_OK(cudaGetSymbolSize(&size, params));
        CU_CHECK(size == sizeof(in));
        CU_OK(cudaGetSymbolAddress(&p, bias));
        CU_CHECK(p != NULL);
        CU_CHECK(cudaMemcpyToSymbol(params, in, sizeof(in), 4) == cudaErrorInvalidValue);
        CU_CHECK(cudaMemcpyToSymbol(params, in, 4, 0, cudaMemcpyDeviceToHost) ==
                 cudaErrorInvalidMemcpyDirection);
        CU_CHECK(cudaGetSymbolAddress(&p, host_only) == cudaErrorInvalidSymbol);
        (void)cudaGetLastError();
        counter = 5;
        CU_OK(cudaGetSymbolAddress(&p, counter));
        CU_CHECK(p == (void *)&counter);
        CU_OK(cudaMemcpyFromSymbol(out, counter, sizeof(int)));
        CU_CHECK(out[0] == 5);
    }
    CU_OK(cudaFree(a));
    CU_OK(cudaFree(b));
    CU_OK(cudaFree(c));
    CU_DONE();
}
