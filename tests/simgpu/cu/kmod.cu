/* kmod.cu: the device code module.cu loads as a fat binary (nvcc -fatbin) and as PTX. */
extern "C" __global__ void
kern_a(float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] += 1.0f;
}

__global__ void
kern_b(double *y)
{
    __shared__ double s[256];
    s[threadIdx.x] = y[threadIdx.x];
    __syncthreads();
    y[threadIdx.x] = s[255 - threadIdx.x];
}
