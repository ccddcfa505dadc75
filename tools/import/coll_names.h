/*
 * coll_names.h: NCCL collectives named in text, for every importer: the operation in an
 * argument or range name ("allreduce", "_allgather_base", "AllReduce" of an NVTX range
 * "ncclAllReduce") and the operation, reduction and element type in an NCCL or RCCL kernel
 * name ("ncclKernel_AllReduce_RING_LL_Sum_float(...)", "ncclDevKernel_AllGather_RING_LL").
 */
#ifndef DPRO_IMPORT_COLL_NAMES_H
#define DPRO_IMPORT_COLL_NAMES_H

#include <stddef.h>
#include <stdint.h>

/* dtype of a collective whose element type is not known (KINETO_DTYPE_UNKNOWN too). */
#define IMP_DTYPE_UNKNOWN 255u

/* The dpro_coll_op a text starts with, ignoring case, '_' and ' ' ("allreduce",
 * "_allgather_base", "reduce_scatter_tensor_coalesced", "AllReduce"); 0 if none. */
uint32_t imp_coll_op_from_text(const char *s);

/* Operation, reduction (ncclRedOp_t) and element type (ncclDataType_t) from an NCCL kernel
 * name name[0..len): the operation is the token after the "ncclKernel" / "ncclDevKernel"
 * prefix, the others tokens anywhere before the '('. Sets *op only if it is 0 and *dtype
 * only if it is IMP_DTYPE_UNKNOWN; leaves what the name does not say untouched. */
void imp_coll_from_kernel(const char *name, size_t len, uint32_t *op, uint32_t *redop,
                          uint32_t *dtype);

#endif /* DPRO_IMPORT_COLL_NAMES_H */
