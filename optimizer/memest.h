/*
 * memest.h: peak-memory estimator from the allocation trace (prefix memest_).
 *
 * Input: the DPRO_KIND_MEMORY alloc/free events of one rank (device memory), on the
 * graph's clock, and where the first observed iteration and its backward lie. A caching
 * allocator (PyTorch's, ddp-sim's) calls cudaMalloc only while its cache grows, so the
 * first iteration shows every block the job needs and steady iterations show none. The
 * estimator classifies the live bytes:
 *   static      allocated before the first iteration (weights, gradient buckets, ...);
 *   activations allocated on the forward thread during the first iteration's forward,
 *               one entry per allocation, in forward order: the per-layer activations;
 *   optimizer   allocated on the forward thread after the first backward (optimizer
 *               state, created lazily by the first step);
 *   backward    allocated on the backward thread (transients of the backward);
 *   other       anything else still live (later iterations, other threads).
 * The measured peak is the peak of live bytes over the events given (dpro-optimize's
 * window: the trace's start to the compared iterations' end). One more kind is kept
 * apart from "other": a block the forward thread allocates after the first iteration at
 * the size of one of its activation allocations (remade): something allocated after the
 * first backward (the optimizer's state) took a cached activation block, and the next
 * forward made one anew.
 *
 * Prediction (memest_predict), for a caching allocator whose blocks stay reserved once
 * allocated. The bytes the plan's requests need at once are
 *   static + optimizer + other
 *        + max( sum_l keep_l,  max over recomputed l of (sum_{j<=l} keep_j + act_l/k) )
 * where keep_l = act_l / k, times keep_fraction for a recomputed layer (it keeps only a
 * checkpoint of its input and rebuilds the rest during its backward, while the layers
 * after it have already been freed), and every size is rounded as PyTorch's caching
 * allocator rounds blocks (512 B up to 1 MiB, 2 MiB above). Gradient accumulation over
 * k micro-batches divides the activations by k; the rest does not change. Where the
 * activations are one allocation each (not segments), the trace's allocator hands out a
 * block per request and never splits one, so a cached block serves a smaller request
 * whole: the plan's requests (each micro-batch's keeps in forward order, each rebuild
 * allocated and freed before its layer's keep is freed) are run through such an
 * allocator (the smallest free cached block of at least the request and at most twice
 * it, as ddp-sim's allocator reuses blocks, else a new block) for two steps, a block of
 * each remade size served from the cache after the first step and held (the request that
 * took the block in the trace is not seen: its size stands for it), and the peak of the
 * blocks in use replaces the activations' and remade blocks' share above. With
 * recomputation a rebuild's block is free during the next forward, and a layer whose own
 * block was taken gets it whole (fidelity pair 34: 26 MiB of activations in a 50 MiB
 * block, +16 MiB over the bytes).
 *
 * A caching allocator that grows only during the job's first step (PyTorch's: the
 * collector sees its segments, cudaMalloc of 2 MiB, 20 MiB or 2 MiB multiples, never
 * freed) shows no allocation in a replayed iteration when the replay leaves that step out
 * (no step markers: the iterations come from the kernel period, past the warm-up), or
 * where the markers start after it. Then (phases.first_step) the activations are the
 * segments of the first step; so too where the first marked iteration is that step and
 * every allocation a 2 MiB multiple (optimizer/profile.c: iter_start then moves to the next
 * iteration's start; read as an ordinary iteration, its backward's segments would count
 * as transients, left out of the prediction, -24 % on a torch DDP job): the forward
 * thread's after its last collective before the backward thread's first launch (DDP's
 * broadcast of the parameters and buffers ends its construction; where all-gathers lead
 * to that launch, FSDP's of each block's parameters, from the first of them) and before
 * that launch, and the backward thread's from that launch to the first replayed
 * iteration (the gradients of the activations, which scale with the micro-batch, beside
 * the parameters' gradients, which do not: a few segments the estimate scales too). The
 * backward thread's first segment is its library workspace (cuBLAS's, which PyTorch takes
 * from its allocator for each handle and stream on first use, 32 MiB on Hopper), and one
 * forward segment of that size the forward's: both "other", with the rest still live
 * (parameters, DDP's buckets, optimizer state). Such segments are not layers: the trace
 * cannot place recomputation (memest.segments).
 */
#ifndef DPRO_OPTIMIZER_MEMEST_H
#define DPRO_OPTIMIZER_MEMEST_H

#include <stddef.h>
#include <stdint.h>

/* One allocation or free (DPRO_MEM_ALLOC / DPRO_MEM_FREE), graph clock. */
typedef struct memest_event {
    int64_t t_ns;
    int op;        /* 1 alloc, 2 free (enum dpro_mem_op) */
    int64_t bytes; /* size of an alloc (ignored for a free: the address tells) */
    uint64_t address;
    uint64_t thread; /* host thread id of the call */
} memest_event;

/* Where the first iteration of the rank lies (graph clock) and its threads. */
typedef struct memest_phases {
    int64_t iter_start; /* start of the first iteration */
    int64_t bwd_start;  /* first backward launch of that iteration */
    int64_t bwd_end;    /* last backward launch of that iteration */
    int64_t iter_end;   /* start of the next iteration (INT64_MAX: none) */
    uint64_t fwd_thread, bwd_thread;
    int first_step;     /* 1: iter_start lies after the backward thread's first launch:
                           the activations are taken from the job's first step (above) */
    int64_t step_start; /* with first_step: where the first step's forward starts */
    int64_t step_bwd;   /* with first_step: the backward thread's first launch */
} memest_phases;

typedef struct memest {
    int64_t peak_bytes;   /* measured peak of live bytes */
    int64_t static_bytes; /* see above; still live at the end of the events given
                             (dpro-optimize's window: the compared iterations' end) */
    int64_t optimizer_bytes;
    int64_t backward_bytes;
    int64_t other_bytes;
    int32_t n_layers;        /* activation allocations found */
    int64_t *act_bytes;      /* per layer, forward order */
    int64_t *act_time;       /* graph time of each activation allocation */
    int32_t n_static;        /* static allocations still live, in time order (a framework
                                allocates the parameters one tensor at a time, in forward
                                order: the per-layer gradient sizes, workload.h) */
    int64_t *static_each;    /* their sizes */
    int segments;            /* 1: activations from the first step (phases.first_step): the
                                allocator's segments, not one allocation per layer */
    int64_t workspace_bytes; /* with segments: the forward's workspace segment (0: none) */
    int32_t n_held;          /* blocks the forward remade after the first iteration */
    int64_t *held_bytes;     /* their sizes (not in other_bytes) */
} memest;

/* Builds the estimate of one rank from n events (any order). Returns 0, or -1 when out
 * of memory (*m is then empty). Free with memest_free. */
int memest_build(const memest_event *ev, size_t n, const memest_phases *ph, memest *m);

/* Frees what memest_build allocated and zeroes *m. */
void memest_free(memest *m);

/* The estimate as bytes, for another process (the scalars, then each array): *buf (free
 * it) receives *len bytes. Returns 0, or -1 out of memory. */
int memest_pack(const memest *m, void **buf, size_t *len);

/* The estimate packed by memest_pack (len bytes at buf) into *m (zeroed first; free it
 * with memest_free). Returns 0, or -1 when out of memory or when the bytes are not a
 * packed estimate (*m then empty). */
int memest_unpack(memest *m, const void *buf, size_t len);

/* Rounds a request as PyTorch's caching allocator rounds a block. */
int64_t memest_round_block(int64_t bytes);

/* The activation bytes of m (the sum of act_bytes): what memest_predict divides by the
 * micro-batches. */
int64_t memest_act_bytes(const memest *m);

/* Predicted steady peak in bytes (see above). recompute: n_recompute flags, for layers
 * 0 .. n_recompute-1 (may be NULL: none); layers past them are not recomputed (a plan
 * names at most STRATEGY_MAX_LAYERS layers, a trace may have more). keep_fraction (0..1]
 * of a recomputed layer's activations kept, accum_k >= 1 micro-batches per step.
 * Returns -1 when out of memory. */
int64_t memest_predict(const memest *m, const uint8_t *recompute, int32_t n_recompute,
                       double keep_fraction, int32_t accum_k);

#endif
