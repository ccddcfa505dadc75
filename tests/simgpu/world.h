/* world.h: the physics of the simulated device (tests/simgpu).  Two modes:
 *
 *  - simple (SIMGPU_PHYSICS=simple): the textbook formulas of the consistency tests: a
 *    kernel with work takes 3 us + FLOPs / 19.5 TFLOP/s (compute) or 3 us + bytes /
 *    1.5 TB/s (memory), a collective max(arrival) + latency + bytes x ring factor /
 *    bandwidth on every rank, copies a fixed bandwidth;
 *  - world (SIMGPU_PHYSICS=world): a device profile of a real GPU (SIMGPU_PROFILE) and
 *    hidden parameters drawn from SIMGPU_WORLD_SEED: roofline kernels with efficiencies,
 *    lognormal noise, host hiccups, load-dependent launch cost, contention between
 *    compute and communication, shared copy engines, pinned and pageable copies, and
 *    NCCL's algorithm/protocol choice (nccl_model.c).
 *
 * Nothing outside tests/simgpu may read a world's parameters: dpro must learn them from
 * traces.  The functions below are libsimgpu's own (tests of the physics call them);
 * none is part of a CUDA API. */
#ifndef SIMGPU_WORLD_H
#define SIMGPU_WORLD_H

#include <stddef.h>
#include <stdint.h>

#include "simgpu.h"

enum simgpu_physics { SIMGPU_PHYSICS_SIMPLE = 0, SIMGPU_PHYSICS_WORLD = 1 };

/* The simple physics' kernel constants (consistency mode). */
#define SIMGPU_SIMPLE_FIXED_NS 3000.0
#define SIMGPU_SIMPLE_FLOPS_PER_NS 19500.0 /* 19.5 TFLOP/s */
#define SIMGPU_SIMPLE_BYTES_PER_NS 1500.0  /* 1.5 TB/s */

/* A real GPU's figures (sources: tests/simgpu/README.md). */
struct simgpu_profile {
    const char *key;  /* SIMGPU_PROFILE value: "a100", "h100", "h200" */
    const char *name; /* what cudaGetDeviceProperties names */
    int cc_major, cc_minor;
    int sm_count;
    double tflops[4];     /* dense peak by enum simgpu_dtype: fp32, tf32, bf16, fp16 */
    double hbm_gbps;      /* device memory bandwidth, GB/s */
    double hbm_gb;        /* device memory size, GB */
    int l2_bytes;         /* L2 cache */
    double clock_mhz;     /* boost clock */
    double nvlink_gbps;   /* NVLink per GPU, one direction, GB/s */
    double nvlink_lat_us; /* GPU to GPU over NVLink (estimate) */
    double pcie_gbps;     /* PCIe x16, one direction, GB/s (theoretical) */
    double ib_gbps;       /* InfiniBand NIC per GPU, one direction, GB/s */
    double ib_lat_us;     /* one network hop (estimate) */
    double launch_us;     /* host cost of a kernel launch (estimate) */
    int copy_engines;     /* asyncEngineCount */
    int arch;             /* 0 Ampere, 1 Hopper: NCCL's per-architecture constants */
};

/* The hidden parameters of one world, drawn from its seed (independent of the
 * profile, so that two profiles of one seed differ only by their figures). */
struct simgpu_world {
    const struct simgpu_profile *prof;
    uint64_t seed;
    int gpus_per_node; /* SIMGPU_GPUS_PER_NODE (8): ranks of a communicator per node */
    /* kernels */
    double eff_fp32, eff_tensor, eff_mem; /* achieved / peak */
    double kernel_overhead_ns;            /* ramp-up and tail of every kernel */
    double kernel_floor_ns;               /* the shortest kernel */
    double sigma[4]; /* lognormal sigma by kernel class (0: timed by the job) */
    double straggle_prob, straggle_factor; /* an occasional slow kernel (clock dip) */
    /* host */
    double launch_factor, launch_sigma, launch_load_k;
    double hiccup_prob, hiccup_mean_us;
    /* contention */
    double comp_by_comm; /* compute stretch when fully overlapped by communication */
    double comm_by_comp; /* communication stretch when fully overlapped by compute */
    double comp_by_comp; /* stretch of a kernel fully overlapped by another kernel */
    /* copies */
    double pcie_eff, pageable_factor, copy_lat_ns, pageable_lat_ns;
    /* NCCL */
    int nchannels;
    double link_eff, ib_eff; /* achieved bus bandwidth / link bandwidth */
    double lat_scale;        /* true latency / the tuner's */
    double proto_eff[3];     /* LL, LL128, Simple: true bandwidth / the tuner's */
    double fill_bytes;       /* pipeline fill: half bandwidth at this size */
    double skew_frac;        /* spread of the ranks' exits, in steps */
    double nccl_sigma;       /* run-to-run noise of a collective */
};

/* The physics in force and the world (read once from the environment). */
enum simgpu_physics simgpu_physics(void);
const struct simgpu_world *simgpu_world(void);

/* The profile named `key` ("a100", "h100", "h200"), or NULL. */
const struct simgpu_profile *simgpu_profile_find(const char *key);

/* Draws the world of `seed` on `prof` into *w (deterministic); gpus_per_node as given. */
void simgpu_world_draw(struct simgpu_world *w, const struct simgpu_profile *prof, uint64_t seed,
                       int gpus_per_node);

/* Counter-based random numbers: a hash of (a, b, c, d) and its uniform (0, 1) and
 * standard normal transforms. */
uint64_t simgpu_hash4(uint64_t a, uint64_t b, uint64_t c, uint64_t d);
double simgpu_u01(uint64_t h);
double simgpu_normal(uint64_t h);

/* The lognormal factor (mean 1) of sigma for key h. */
double simgpu_lognormal(double sigma, uint64_t h);

/* A kernel's device time without noise or contention, in ns: the roofline of w for the
 * work on a grid of `blocks` blocks (simple physics when w is NULL). */
double simgpu_kernel_base_ns(const struct simgpu_world *w, const struct simgpu_work *work,
                             uint64_t blocks);

/* The noise factor of the kernel keyed by h (lognormal by class, with the occasional
 * slow one). */
double simgpu_kernel_noise(const struct simgpu_world *w, int kclass, uint64_t h);

/* ---- contention: spans of work on a device, kept by world.c ------------------------------ */
enum simgpu_span_kind {
    SIMGPU_SPAN_COMPUTE,
    SIMGPU_SPAN_COMM,
    SIMGPU_SPAN_H2D,
    SIMGPU_SPAN_D2H,
    SIMGPU_SPAN_NKINDS
};

/* Fraction of [t0, t1] covered by spans of `kind` on device dev (0 .. 1 per span, summed
 * and capped at `cap`). */
double simgpu_span_cover(int dev, int kind, uint64_t t0, uint64_t t1, double cap);
/* Records [t0, t1] as a span of `kind` on dev; returns its slot (for simgpu_span_end). */
int simgpu_span_add(int dev, int kind, uint64_t t0, uint64_t t1);
/* Stretches a piece of work of nominal duration d starting at t0 on dev by 1 + k x the
 * fraction of [t0, t0 + d] that spans of `kind` cover (capped at cap) and records the
 * stretched span, both under one lock (two that start together see each other: the
 * second to come is stretched).  Returns the stretched duration. */
double simgpu_span_share(int dev, int kind, uint64_t t0, double d, double k, double cap);
/* Moves the end of span `slot` (kind on dev) to t1. */
void simgpu_span_end(int dev, int kind, int slot, uint64_t t1);
/* Forgets every span (tests). */
void simgpu_span_reset(void);

/* World physics of a kernel op starting at `start` on device dev: its duration in ns
 * (work or the job's duration, noise, slowdown, contention), recorded as a compute
 * span.  `key` identifies the launch (stream id, seq) for the noise. */
uint64_t simgpu_world_kernel_ns(const struct simgpu_work *work, int has_work, uint64_t job_ns,
                                uint64_t blocks, int dev, uint64_t key, uint64_t start);

/* Device time of a copy of `bytes` (CUPTI memcpy kind, memory kinds of its ends) starting
 * at `start` on dev, under the physics in force; world physics keys its noise by `key`
 * (stream id, seq) and records it as a span. */
uint64_t simgpu_copy_ns(size_t bytes, int copy_kind, int src_kind, int dst_kind, int dev,
                        uint64_t key, uint64_t start);

/* Device time of a memset of `bytes` under the physics in force. */
uint64_t simgpu_memset_ns(size_t bytes);

/* Host cost of an API call that launches work: `frac` of a kernel launch (simple: a
 * busy wait of SIMGPU_LAUNCH_US x frac; world: the profile's launch cost, the world's
 * factor, noise, the load of other launching threads, an occasional hiccup). */
void simgpu_host_launch(double frac);

/* ---- NCCL (nccl_model.c) ---------------------------------------------------------------- */
enum simgpu_coll {
    SIMGPU_COLL_ALLREDUCE,
    SIMGPU_COLL_ALLGATHER,
    SIMGPU_COLL_REDUCESCATTER,
    SIMGPU_COLL_BROADCAST,
    SIMGPU_COLL_REDUCE,
    SIMGPU_COLL_P2P,
};
enum simgpu_algo { SIMGPU_ALGO_TREE = 0, SIMGPU_ALGO_RING = 1 };
enum simgpu_proto { SIMGPU_PROTO_LL = 0, SIMGPU_PROTO_LL128 = 1, SIMGPU_PROTO_SIMPLE = 2 };

/* One collective as the world runs it. */
struct simgpu_nccl_plan {
    int algo, proto; /* what the tuner chose */
    double tuner_ns; /* the tuner's own estimate of the chosen pair */
    double lat_ns;   /* true latency part */
    double time_ns;  /* true duration (no noise, no contention) */
    int nsteps;      /* ring steps (or tree depth x 2) */
    int nnodes;
};

/* Plans collective `coll` of `bytes` (the buffer NCCL's busbw convention counts: the whole
 * buffer for all-reduce, all-gather and reduce-scatter) on `nranks` ranks in world w: the
 * algorithm and protocol NCCL's tuner picks (lowest latency + bytes / bandwidth among
 * ring/tree x LL/LL128/Simple, by message size, rank count and node layout), and the true
 * time in w.  `same_node` matters for P2P only. */
void simgpu_nccl_plan(const struct simgpu_world *w, int coll, uint64_t bytes, int nranks,
                      int same_node, struct simgpu_nccl_plan *p);

/* How long before the collective's end rank `rank` leaves it (ns, >= 0): a ring's last step
 * reaches the ranks one after the other, starting at a rank that rotates with seq. */
double simgpu_nccl_exit_early_ns(const struct simgpu_world *w, const struct simgpu_nccl_plan *p,
                                 int rank, int nranks, uint64_t seq);

/* Names of algorithms and protocols (as NCCL prints them). */
const char *simgpu_algo_name(int algo);
const char *simgpu_proto_name(int proto);

#endif /* SIMGPU_WORLD_H */
