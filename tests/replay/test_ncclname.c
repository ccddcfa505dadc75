/*
 * test_ncclname: NCCL kernel names -> collective and algorithm (replay/ncclname.c), on
 * the names of the real Kineto traces in ../shared/traces/kineto (NCCL 2.17: the old
 * naming, demangled with their parameter list), on the names NCCL 2.19 and later
 * generate (src/device/generate.py), mangled and plain, and on names that are not NCCL's.
 */
#include <string.h>

#include "dprotrace.h"
#include "replay/ncclname.h"
#include "tests/unit/testutil.h"

static void
check(const char *name, int naming, int op, int algo, int exact, const char *kproto)
{
    ncclname n;
    int rc = ncclname_parse(name, &n);
    CHECK_EQ(rc, naming ? 1 : 0);
    CHECK_EQ(n.naming, naming);
    CHECK_EQ(n.op, op);
    CHECK_EQ(n.algo, algo);
    CHECK_EQ(n.algo_exact, exact);
    CHECK(strcmp(n.kernel_proto, kproto) == 0);
    if (rc != (naming ? 1 : 0) || n.algo != algo)
        fprintf(stderr, "  name: %s\n", name);
}

int
main(void)
{
    /* real traces (a100-2rank-allreduce-rank0, 128rank-sampled-rank0) */
    check("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
          NCCLNAME_OLD, DPRO_COLL_ALLREDUCE, NCCLNAME_ALGO_RING, 1, "LL");
    check("ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
          NCCLNAME_OLD, DPRO_COLL_BROADCAST, NCCLNAME_ALGO_RING, 1, "LL");
    check("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
          NCCLNAME_OLD, DPRO_COLL_SEND, NCCLNAME_ALGO_UNKNOWN, 0, "SIMPLE");
    /* the old naming's other algorithms */
    check("ncclKernel_AllReduce_TREE_LL_Sum_half", NCCLNAME_OLD, DPRO_COLL_ALLREDUCE,
          NCCLNAME_ALGO_TREE, 1, "LL");
    check("ncclKernel_AllReduce_COLLNET_DIRECT_LL_Sum_float", NCCLNAME_OLD, DPRO_COLL_ALLREDUCE,
          NCCLNAME_ALGO_COLLNET_DIRECT, 1, "LL");
    check("ncclKernel_AllReduce_NVLS_TREE_LL_Sum_float", NCCLNAME_OLD, DPRO_COLL_ALLREDUCE,
          NCCLNAME_ALGO_NVLS_TREE, 1, "LL");
    check("ncclKernel_ReduceScatter_NVLS_LL_Sum_uint8_t", NCCLNAME_OLD, DPRO_COLL_REDUCESCATTER,
          NCCLNAME_ALGO_NVLS, 1, "LL");
    /* NCCL 2.19 and later */
    check("ncclDevKernel_AllReduce_Sum_f32_RING_LL", NCCLNAME_NEW, DPRO_COLL_ALLREDUCE,
          NCCLNAME_ALGO_RING, 0, "LL");
    check("ncclDevKernel_AllReduce_Sum_bf16_TREE_LL", NCCLNAME_NEW, DPRO_COLL_ALLREDUCE,
          NCCLNAME_ALGO_TREE, 1, "LL");
    check("ncclDevKernel_AllGather_RING_LL", NCCLNAME_NEW, DPRO_COLL_ALLGATHER, NCCLNAME_ALGO_RING,
          0, "LL");
    check("ncclDevKernel_ReduceScatter_Sum_u32_RING_LL(ncclDevKernelArgs4K)", NCCLNAME_NEW,
          DPRO_COLL_REDUCESCATTER, NCCLNAME_ALGO_RING, 0, "LL");
    check("_Z39ncclDevKernel_AllReduce_Sum_f32_TREE_LL19ncclDevKernelArgs4K", NCCLNAME_NEW,
          DPRO_COLL_ALLREDUCE, NCCLNAME_ALGO_TREE, 1, "LL");
    check("ncclDevKernel_SendRecv", NCCLNAME_NEW, DPRO_COLL_SEND, NCCLNAME_ALGO_UNKNOWN, 0, "");
    check("ncclDevKernel_Generic", NCCLNAME_NEW, 0, NCCLNAME_ALGO_UNKNOWN, 0, "");
    /* not NCCL's */
    check("volta_sgemm_128x64_nn", NCCLNAME_NONE, 0, 0, 0, "");
    check("ncclKernel", NCCLNAME_NONE, 0, 0, 0, "");
    check("ncclDevKernel_Nonsense_RING_LL", NCCLNAME_NONE, 0, 0, 0, "");
    check("_Z999ncclDevKernel_AllReduce", NCCLNAME_NONE, 0, 0, 0, "");
    check("", NCCLNAME_NONE, 0, 0, 0, "");
    ncclname n;
    CHECK_EQ(ncclname_parse(NULL, &n), -1);
    CHECK(strcmp(ncclname_algo_name(NCCLNAME_ALGO_TREE), "TREE") == 0);
    CHECK(strcmp(ncclname_algo_name(99), "unknown") == 0);
    return tests_done();
}
