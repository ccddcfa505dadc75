/* nccl-perf: an all-reduce sweep in the manner of nccl-tests' all_reduce_perf, one rank a
 * process under simrun (simrun -n 2 --gpus-per-node 1 -- nccl-perf: two nodes of one GPU,
 * the network between them).  For each size from -b to -e (times -f), -w warm-up and -n
 * timed all-reduces of float32 back to back on one stream, timed by the host from the
 * first launch to the stream's end, after a barrier (a 4-byte all-reduce, as nccl-tests
 * start each size); rank 0 prints nccl-tests' columns: size (B), count, time (us a
 * collective), algbw (size / time, GB/s) and busbw (algbw x 2 (n - 1) / n, the bandwidth
 * one link carries: what nccl-tests report).  Usage: nccl-perf [-b BYTES] [-e BYTES] [-f
 * FACTOR] [-w N] [-n N]; sizes take K, M, G. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop

#include "simrun_rdzv.h"

/* BYTES with an optional K, M or G suffix (powers of 1024); 0 when malformed. */
static size_t
parse_bytes(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    double k = *end == 'K' ? 1024.0 : *end == 'M' ? 1048576.0 : *end == 'G' ? 1073741824.0 : 1;
    if (k > 1)
        end++;
    return *end || !(v > 0) || v * k > 1e12 ? 0 : (size_t)(v * k);
}

static double
now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void
usage(FILE *f)
{
    fprintf(f, "usage: nccl-perf [-b MIN_BYTES] [-e MAX_BYTES] [-f FACTOR] [-w WARMUP] [-n ITERS]\n"
               "  an all-reduce sweep as nccl-tests' all_reduce_perf (defaults -b 8 -e 128M -f 2\n"
               "  -w 5 -n 20); one rank a process, under simrun; rank 0 prints the table\n");
}

#define CK(call)                                                                                   \
    do {                                                                                           \
        if ((call) != 0) {                                                                         \
            fprintf(stderr, "nccl-perf rank %d: %s failed\n", rank, #call);                        \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int
main(int argc, char **argv)
{
    size_t lo = 8, hi = 128u << 20;
    int factor = 2, warmup = 5, iters = 20, c;
    int rank = atoi(getenv("RANK") ? getenv("RANK") : "0");
    int world = atoi(getenv("WORLD_SIZE") ? getenv("WORLD_SIZE") : "1");
    while ((c = getopt(argc, argv, "b:e:f:w:n:h")) != -1) {
        if (c == 'b' || c == 'e') {
            *(c == 'b' ? &lo : &hi) = parse_bytes(optarg);
        } else if (c == 'f' || c == 'w' || c == 'n') {
            *(c == 'f' ? &factor : c == 'w' ? &warmup : &iters) = atoi(optarg);
        } else {
            usage(c == 'h' ? stdout : stderr);
            return c == 'h' ? 0 : 2;
        }
    }
    if (optind != argc || lo < 4 || hi < lo || factor < 2 || warmup < 0 || iters < 1 || world < 1) {
        usage(stderr);
        return 2;
    }
    /* The buffers hold nothing worth moving: timing only (as ddp-sim; the user's wins). */
    setenv("SIMGPU_NCCL_DATA", "0", 0);
    ncclUniqueId id;
    ncclComm_t comm;
    cudaStream_t s;
    void *buf;
    CK(cudaSetDevice(0));
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaMalloc(&buf, hi));
    if (rank == 0)
        CK(ncclGetUniqueId(&id));
    if (world > 1 && simrun_rdzv_share(rank, &id, sizeof id, 60) != 0) {
        fprintf(stderr, "nccl-perf rank %d: cannot exchange the NCCL id (run under simrun)\n",
                rank);
        return 1;
    }
    CK(ncclCommInitRank(&comm, world, id, rank));
    if (rank == 0)
        printf("# nccl-perf: all-reduce, float32, sum, %d ranks, %d warm-up and %d timed "
               "iterations a size\n#%11s %12s %10s %8s %8s\n",
               world, warmup, iters, "size", "count", "time", "algbw", "busbw");
    for (size_t bytes = lo; bytes <= hi; bytes *= (size_t)factor) {
        size_t count = bytes / 4;
        for (int i = 0; i < warmup; i++)
            CK(ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comm, s));
        CK(ncclAllReduce(buf, buf, 1, ncclFloat32, ncclSum, comm, s));
        CK(cudaStreamSynchronize(s));
        double t0 = now_us();
        for (int i = 0; i < iters; i++)
            CK(ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comm, s));
        CK(cudaStreamSynchronize(s));
        double us = (now_us() - t0) / iters, algbw = us > 0 ? (double)(count * 4) / us / 1e3 : 0;
        if (rank == 0)
            printf(" %11zu %12zu %10.2f %8.2f %8.2f\n", count * 4, count, us, algbw,
                   algbw * 2 * (world - 1) / world);
        if (bytes > hi / (size_t)factor)
            break;
    }
    CK(ncclCommDestroy(comm));
    CK(cudaFree(buf));
    return 0;
}
