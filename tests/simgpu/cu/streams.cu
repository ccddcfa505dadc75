/* streams.cu: templated and internal-linkage kernels on two streams with events, and the
 * other launch paths of the runtime: cudaLaunchKernel by host stub and by cudaKernel_t,
 * cudaLaunchKernelExC. */
#include <string.h>

#include "check.h"

template <typename T>
__global__ void
scale(T *x, T f, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] *= f;
}

namespace
{
__global__ void
fill(int *p, int v)
{
    p[threadIdx.x] = v;
}
} // namespace

int
main(void)
{
    const int n = 4096;
    float *xf;
    double *xd;
    int *xi;
    cudaStream_t s[2];
    cudaEvent_t e0, e1;
    float ms = 0;
    const char *name = NULL;
    cudaKernel_t k = NULL;
    CU_OK(cudaMalloc(&xf, n * sizeof(float)));
    CU_OK(cudaMalloc(&xd, n * sizeof(double)));
    CU_OK(cudaMalloc(&xi, 256 * sizeof(int)));
    CU_OK(cudaStreamCreateWithFlags(&s[0], cudaStreamNonBlocking));
    CU_OK(cudaStreamCreateWithFlags(&s[1], cudaStreamNonBlocking));
    CU_OK(cudaEventCreate(&e0));
    CU_OK(cudaEventCreate(&e1));
    CU_OK(cudaEventRecord(e0, s[0]));
    scale<float><<<n / 256, 256, 0, s[0]>>>(xf, 2.0f, n);
    scale<double><<<n / 256, 256, 0, s[1]>>>(xd, 3.0, n);
    fill<<<1, 256, 0, s[1]>>>(xi, 7);
    CU_OK(cudaEventRecord(e1, s[1]));
    CU_OK(cudaStreamWaitEvent(s[0], e1, 0));
    scale<float><<<n / 256, 256, 0, s[0]>>>(xf, 0.5f, n);
    CU_OK(cudaGetLastError());
    CU_OK(cudaEventRecord(e1, s[0]));
    CU_OK(cudaEventSynchronize(e1));
    CU_OK(cudaEventElapsedTime(&ms, e0, e1));
    CU_CHECK(ms > 0);

    CU_OK(cudaFuncGetName(&name, (const void *)scale<double>));
    CU_CHECK(name && !strcmp(name, "_Z5scaleIdEvPT_S0_i"));
    CU_OK(cudaFuncGetName(&name, (const void *)fill));
    CU_CHECK(name && strstr(name, "_GLOBAL__N_") && strstr(name, "fillEPii"));

    /* the runtime's own launch calls with the host stub */
    {
        int nn = n;
        float f = 1.5f;
        void *args[] = {&xf, &f, &nn};
        cudaLaunchConfig_t cfg;
        memset(&cfg, 0, sizeof(cfg));
        cfg.gridDim = dim3(n / 256);
        cfg.blockDim = dim3(256);
        cfg.stream = s[1];
        CU_OK(
            cudaLaunchKernel((const void *)scale<float>, dim3(n / 256), dim3(256), args, 0, s[0]));
        CU_OK(cudaLaunchKernelExC(&cfg, (const void *)scale<float>, args));
        CU_OK(cudaGetKernel(&k, (const void *)scale<float>));
        CU_CHECK(k != NULL);
        /* a cudaKernel_t where a function is expected */
        CU_OK(cudaLaunchKernel((const void *)k, dim3(n / 256), dim3(256), args, 0, s[0]));
        CU_OK(cudaFuncGetName(&name, (const void *)k));
        CU_CHECK(name && !strcmp(name, "_Z5scaleIfEvPT_S0_i"));
    }
    /* not a kernel: no handle */
    CU_CHECK(cudaGetKernel(&k, (const void *)main) == cudaErrorInvalidDeviceFunction);
    CU_OK(cudaDeviceSynchronize());
    CU_OK(cudaStreamDestroy(s[0]));
    CU_OK(cudaStreamDestroy(s[1]));
    CU_DONE();
}
