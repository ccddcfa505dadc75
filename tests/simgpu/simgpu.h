/* simgpu.h: the job-facing API of the simulated GPU device (tests/simgpu).
 *
 * The simulated libcudart/libcuda execute no device code: a kernel is a span of
 * time on a stream.  A job says what each of its kernels does (or, for tests of the
 * device itself, how long it runs) and what it is called through the functions below, which live in
 * libsimgpu.so.0 (a dependency of the stand-in libcudart.so.13).  A job that must also link against
 * the real CUDA libraries should look them up with dlsym(RTLD_DEFAULT, "simgpu_register_kernel")
 * and skip them when absent (ddp-sim does that); test programs may call them
 * directly and link libsimgpu.la.
 *
 * Clock: every timestamp of the simulated device, of the CUPTI stand-in
 * (cuptiGetTimestamp, activity records) and simgpu_now_ns() is CLOCK_MONOTONIC in
 * nanoseconds, so records of different ranks on one machine share a time base.
 */
#ifndef SIMGPU_H
#define SIMGPU_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Registers (or updates) the kernel whose host stub / function handle is `func`:
 * launches of it are named `name` in CUPTI records and callbacks, and run
 * `duration_ns` on the device (before the straggler slowdown).  The name is copied.
 * Returns 0, or -1 when func or name is NULL.  Thread-safe. */
int simgpu_register_kernel(const void *func, const char *name, uint64_t duration_ns);

/* Sets the device duration of kernels launched by driver API (cuLaunchKernel) or
 * by function pointer whose name is `name` and which have no registration by
 * pointer.  Returns 0, or -1 when name is NULL. */
int simgpu_register_kernel_name(const char *name, uint64_t duration_ns);

/* Overrides the duration of the next kernel launched by the calling thread
 * (cudaLaunchKernel, cudaLaunchKernelExC, cuLaunchKernel, cuLaunchKernelEx); the
 * override is consumed by that launch. */
void simgpu_set_next_launch_duration(uint64_t duration_ns);

/* What a kernel does, for the device to decide how long it runs (simgpu's own side
 * channel: no CUDA API carries it and the collector does not record it).  `kclass` says
 * what bounds it, `dtype` which peak rate its FLOPs run at; `flops` and `bytes` (of
 * device memory moved) are the work of one launch. */
enum simgpu_kernel_class {
    SIMGPU_CLASS_COMPUTE = 1, /* bound by FLOPs (GEMM, convolution) */
    SIMGPU_CLASS_MEMORY = 2,  /* bound by device-memory bytes (elementwise, optimizer) */
    SIMGPU_CLASS_LATENCY = 3, /* tiny: bound by the fixed cost of a kernel */
};
enum simgpu_dtype { SIMGPU_FP32 = 0, SIMGPU_TF32 = 1, SIMGPU_BF16 = 2, SIMGPU_FP16 = 3 };
struct simgpu_work {
    int kclass; /* enum simgpu_kernel_class */
    int dtype;  /* enum simgpu_dtype */
    double flops;
    double bytes;
};

/* Describes the work of the next kernel launched by the calling thread (consumed by
 * that launch, like simgpu_set_next_launch_duration, which it replaces): the device
 * computes the kernel's time from it and from the physics in force (SIMGPU_PHYSICS,
 * tests/simgpu/README.md).  Ignored when w is NULL. */
void simgpu_set_next_launch_work(const struct simgpu_work *w);

/* Returns the registered name of `func`, else the dynamic symbol name of the
 * address, else NULL.  The string lives until the process exits. */
const char *simgpu_kernel_name(const void *func);

/* The launches of torch's multi_tensor_apply_kernel whose argument the device could not read
 * as the TensorListMetadata layout their name says (no argument, or one that does not fit),
 * timed by the upper bound of a full chunk a block (tests/simgpu/README.md, "Kernels named by
 * their class"); each such launch counts once. */
uint64_t simgpu_mta_unknown_launches(void);

/* Returns CLOCK_MONOTONIC in nanoseconds: the clock of every simgpu timestamp. */
uint64_t simgpu_now_ns(void);

#ifdef __cplusplus
}
#endif

#endif /* SIMGPU_H */
