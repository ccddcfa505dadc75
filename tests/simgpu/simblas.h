/* simblas.h: what the cuBLAS and cuBLASLt stand-ins (cublas.c, cublaslt.c) share: one GEMM
 * (or another BLAS operation) as a kernel on the simulated device, timed by the device's
 * physics from its work, and the "not simulated" answer of the entry points that the
 * device cannot do.  Compiled into both libraries (simblas.c); nothing here is exported.
 */
#ifndef SIMBLAS_H
#define SIMBLAS_H

#include <stdint.h>

#include <cuda_runtime_api.h>
#include <library_types.h>

#define SIMBLAS_HIDDEN __attribute__((visibility("hidden")))

/* The magic number of a cublasHandle_t (cublas.c).  A cuBLAS handle is also a cuBLASLt
 * handle: PyTorch's getCurrentCUDABlasLtHandle() casts its cuBLAS handle to one. */
#define SIMBLAS_HANDLE_MAGIC 0x43424c53U /* "CBLS" */

/* One BLAS operation: D (m x n) = op(A) (m x k) op(B) (k x n) [+ C], `batch` times.  `a`,
 * `b`, `c` are the element types of A, B and C/D, `tensor` is nonzero when the math runs
 * on tensor cores (fp16/bf16 inputs, or fp32 with TF32 allowed), `level` 3 for a GEMM, 2
 * for a matrix-vector product (n = 1), 1 for a vector operation of m elements (k = 0),
 * `reads_c` nonzero when C is read (beta != 0 or unknown), `extra_bytes` bytes moved
 * besides the operands (a bias, an epilogue's auxiliary output).  `ta`, `tb` are 'n',
 * 't' or 'c'. */
struct simblas_op {
    int level;
    int64_t m, n, k, batch;
    cudaDataType a, b, c;
    int tensor;
    int reads_c;
    double extra_bytes;
    char ta, tb;
    const char *family; /* "gemm", "gemv", "geam", ...: in the kernel name */
};

/* Launches op on `stream` (a cudaStream_t of the simulated device, NULL for the legacy
 * stream) through the runtime's cudaLaunchKernel, with its work (FLOPs, bytes, dtype)
 * for the physics and a kernel name of the kind cuBLAS uses on the device's
 * architecture (sm80: ampere_*, sm90: sm90_xmma_*).  Nothing is computed: the data are
 * left as they are.  Returns cudaSuccess, or the runtime's error (invalid stream,
 * sticky device error, capture error).  An op with m, n or batch 0 launches nothing. */
SIMBLAS_HIDDEN cudaError_t simblas_launch(const struct simblas_op *op, cudaStream_t stream);

/* The device's SM count (for heuristics' wave counts). */
SIMBLAS_HIDDEN int simblas_sm_count(void);

/* Bytes of one element of `t` (complex: both parts); 0 for types the device does not
 * know. */
SIMBLAS_HIDDEN size_t simblas_type_size(cudaDataType t);

/* Says once per process and entry point, on stderr, that `lib`'s entry point `fn` is not
 * simulated and that it answers `status` (the caller then returns that error). */
SIMBLAS_HIDDEN void simblas_unsupported(const char *lib, const char *fn, const char *status);

#endif /* SIMBLAS_H */
