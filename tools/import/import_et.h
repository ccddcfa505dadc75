/*
 * import_et.h: PyTorch execution traces (the Chakra ET JSON that
 * torch.profiler.ExecutionTraceObserver writes), read into the host graph that
 * `dpro-import et` joins to the Kineto trace of the same process.
 *
 * The file: {"schema": "1.1.1-chakra.0.0.4", "pid": P, "time": ..., "start_ts": ...,
 * "nodes": [...], "finish_ts": ...}. A node: {"id": N, "name": ..., "ctrl_deps": PARENT,
 * "inputs": {"values": [...], "shapes": [...], "types": [...], "strides": [...]},
 * "outputs": {...}, "attrs": [{"name": "rf_id", "type": "uint64", "value": R}, ...]}.
 * Node and tensor ids come from one counter, in the order ops are entered (1 is the
 * process's root node); nodes are written when their op exits, so the file's order is exit
 * order. A tensor value is [tensor id, storage id, offset, numel, itemsize, "device"]
 * (schema 1.0.2 and later), alone or nested in the lists and tuples of an argument.
 *
 * What is kept of a node: id, parent (ctrl_deps), rf_id (the RecordFunction handle, which
 * Kineto writes as "Record function id"), the input shapes and types as compact JSON text,
 * and its data dependencies: for each input tensor, the op that last wrote it (had it among
 * its outputs) before this op was entered, i.e. among the nodes of smaller id that exited
 * before it, the one that exited last (an ancestor exits later, a descendant has a larger
 * id: neither counts). They are kept as the distances id - producer id, ascending,
 * duplicates removed, as JSON text ("[2,7]"), so that the same op of every step has the
 * same text. Tensors are told apart by their tensor id (a view is a tensor of its own).
 *
 * Memory: the whole file is parsed into a yajl tree (the file in memory, then the tree);
 * a file over ET_MAX_BYTES of JSON text is refused.
 */
#ifndef DPRO_IMPORT_ET_H
#define DPRO_IMPORT_ET_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The largest execution trace read (JSON text, after gunzip). */
#define ET_MAX_BYTES (1ull << 30)

typedef struct et_node {
    uint64_t id;
    uint64_t parent;
    uint64_t rf_id;
    int has_rf;         /* rf_id present (an op recorded by a RecordFunction) */
    const char *shapes; /* input shapes, JSON text ("[[2,3],[]]"); NULL if none */
    const char *types;  /* input types, JSON text (["Tensor(float)","Int"]); NULL if none */
    const char *deps;   /* data dependencies, JSON text ("[1,4]"); NULL if none */
    uint32_t joined;    /* set by the caller: joined to a profiler event */
} et_node;

typedef struct et_graph et_graph;

/* Reads the execution trace at path (plain or gzip). On success returns DPRO_OK and sets
 * *out, which the caller frees with et_graph_free; otherwise a dpro_status (DPRO_ERR_IO,
 * DPRO_ERR_NOT_TRACE for text that is not an execution trace, DPRO_ERR_LIMIT, DPRO_ERR_NOMEM)
 * with the reason, naming the file and the place (byte offset and line of a JSON error, or
 * the node's index and id), in errbuf. */
int et_graph_load_path(const char *path, et_graph **out, char *errbuf, size_t errlen);

/* As et_graph_load_path, from buf[0..len) (not changed); name stands for the file in
 * messages. */
int et_graph_load_buffer(const char *name, const void *buf, size_t len, et_graph **out,
                         char *errbuf, size_t errlen);

/* Number of nodes; the i-th node (in file order), i < et_graph_count(g). */
size_t et_graph_count(const et_graph *g);
et_node *et_graph_node(et_graph *g, size_t i);

/* The node of RecordFunction handle rf, or NULL. The file's "schema" string (or ""). */
et_node *et_graph_find_rf(et_graph *g, uint64_t rf);
const char *et_graph_schema(const et_graph *g);

/* Data dependencies found (the sum over the nodes of the distances kept). */
uint64_t et_graph_deps(const et_graph *g);

/* Frees g (NULL is fine). */
void et_graph_free(et_graph *g);

#ifdef __cplusplus
}
#endif

#endif /* DPRO_IMPORT_ET_H */
