/*
 * ncclname.h: what an NCCL kernel's name tells about the collective it ran (prefix
 * ncclname_).
 *
 * NCCL names its device kernels in one of two ways (NVIDIA/nccl, tests/simgpu/README.md
 * "NCCL's kernel names" has the sources):
 *   NCCL 2.18 and older: ncclKernel_<Coll>_<ALGO>_<PROTO>_<Op>_<type>, e.g.
 *     ncclKernel_AllReduce_RING_LL_Sum_float, ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t;
 *     ALGO is the algorithm that ran (TREE, RING, COLLNET_DIRECT, COLLNET_CHAIN, NVLS,
 *     NVLS_TREE).
 *   NCCL 2.19 and later: ncclDevKernel_<Coll>[_Sum_<ty>]_<ALGO>_<PROTO>, e.g.
 *     ncclDevKernel_AllReduce_Sum_f32_RING_LL, ncclDevKernel_AllGather_RING_LL,
 *     ncclDevKernel_SendRecv; ALGO is TREE when an all-reduce ran the tree, else RING
 *     (ring, and the algorithms without a kernel of their own: NVLS, CollNet, PAT).
 * Either way only kernels specialised for LL exist for the collectives (SendRecv: the
 * generic kernel, SIMPLE in the old naming): NCCL launches the LL kernel of the
 * (collective, algorithm) whatever protocol its tuner chose and runs the protocol's code
 * from a table inside it. So a name tells the algorithm, never the protocol.
 * The name may carry a demangled parameter list, "(ncclDevComm*, unsigned long,
 * ncclWork*)", or be mangled (_Z<len>ncclDevKernel_...); both are read.
 */
#ifndef DPRO_REPLAY_NCCLNAME_H
#define DPRO_REPLAY_NCCLNAME_H

/* NCCL's algorithms, as its kernels name them. */
enum ncclname_algo {
    NCCLNAME_ALGO_UNKNOWN = 0,
    NCCLNAME_ALGO_RING = 1,
    NCCLNAME_ALGO_TREE = 2,
    NCCLNAME_ALGO_COLLNET_DIRECT = 3,
    NCCLNAME_ALGO_COLLNET_CHAIN = 4,
    NCCLNAME_ALGO_NVLS = 5,
    NCCLNAME_ALGO_NVLS_TREE = 6,
    NCCLNAME_ALGO_PAT = 7,
};

enum ncclname_naming {
    NCCLNAME_NONE = 0, /* not an NCCL kernel name */
    NCCLNAME_OLD = 1,  /* ncclKernel_..., NCCL 2.18 and older */
    NCCLNAME_NEW = 2,  /* ncclDevKernel_..., NCCL 2.19 and later */
};

typedef struct ncclname {
    int naming; /* enum ncclname_naming */
    int op;     /* enum dpro_coll_op (SendRecv: DPRO_COLL_SEND), 0 when not told */
    int algo;   /* enum ncclname_algo */
    /* 1: algo is the algorithm that ran; 0: new naming's RING, which also stands for
     * NVLS, CollNet and PAT */
    int algo_exact;
    /* the protocol of the kernel's specialisation as named ("LL", "LL128", "SIMPLE"; ""
     * when none): not the protocol that ran (above) */
    char kernel_proto[8];
} ncclname;

/* Parses an NCCL kernel name (either naming, plain, demangled or mangled) into *out.
 * Returns 1 when name is an NCCL kernel's, 0 when it is not (*out then has naming
 * NCCLNAME_NONE), -1 for a NULL argument. */
int ncclname_parse(const char *name, ncclname *out);

/* The algorithm's name as NCCL writes it ("RING", "TREE", ...; "unknown"). */
const char *ncclname_algo_name(int algo);

#endif
