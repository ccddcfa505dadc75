#!/usr/bin/env python3
"""count_kineto.py FILE.json[.gz]: the dpro events a Kineto trace should give, by kind.

An independent check of dpro-import (tools/import/import_kineto.h has the mapping): this script
json-loads the whole file with the standard library and counts by category and phase.
Prints {"api": N, "kernel": N, ...} as JSON, with the kind names of dpro-info.

Categories of every Kineto generation since PyTorch 1.8 count as their later names
(pytorch/kineto's output_json.cpp and ActivityType.cpp of each era): Operator (1.8-1.9) as
cpu_op, Runtime as cuda_runtime, Kernel / Memcpy / Memset as kernel / gpu_memcpy /
gpu_memset, User and gpu_user_Annotation as gpu_user_annotation.

An NCCL / RCCL kernel (its name starts with "nccl") is also a collective when its operation
is known: from its "Collective name", from the name ("ncclKernel_AllReduce_..."; a SendRecv
kernel is a send/recv), or from the host range its launch lies in (record_param_comms with
a "Collective name", or nccl:all_reduce, c10d::alltoall_base_ and the like, on the launching
thread; the innermost one). The kernels whose operation a range names are one collective
per range (the transfers of a grouped call).

Every flow end (ph s, f, t of any category: ac2g, fwdbwd) is a flow event; a [memory]
instant of the host (Device Type 0) or a GPU (1) is a memory event.
"""
import gzip
import json
import sys

ALIASES = {"Operator": "cpu_op", "Runtime": "cuda_runtime", "Kernel": "kernel",
           "Memcpy": "gpu_memcpy", "Memset": "gpu_memset", "User": "gpu_user_annotation",
           "gpu_user_Annotation": "gpu_user_annotation"}
HOST_RANGES = ("cpu_op", "user_annotation")
OPS = ("allreduce", "broadcast", "reducescatter", "reduce", "allgather", "alltoall", "send",
       "recv")
KERNEL_OPS = ("AllReduce", "Broadcast", "Reduce", "AllGather", "ReduceScatter", "SendRecv",
              "Send", "Recv", "AllToAll")


def coll_op(text):
    """The collective a text names ("all_to_all", "nccl:_all_gather_base"), or None."""
    t = text.split(":", 1)[-1].replace("_", "").replace(" ", "").lower()
    return next((op for op in OPS if t.startswith(op)), None)


def kernel_op(name):
    """The operation token of an NCCL kernel name, if one we know."""
    parts = name.split("(")[0].split("_")
    return parts[1] if len(parts) > 1 and parts[1] in KERNEL_OPS else None


def comm_ranges(events):
    """Per thread, the host ranges that name a collective: (start, end, op)."""
    out = {}
    for e in events:
        if e.get("ph") != "X" or ALIASES.get(e.get("cat"), e.get("cat")) not in HOST_RANGES:
            continue
        name, args = e.get("name", ""), e.get("args") or {}
        op = None
        if name == "record_param_comms" and "Collective name" in args:
            op = coll_op(str(args["Collective name"]))
        elif name.startswith(("nccl:", "c10d::")):
            op = coll_op(name.split("::", 1)[-1] if name.startswith("c10d::") else name)
        if op:
            out.setdefault(str(e.get("tid")), []).append((e["ts"], e["ts"] + e["dur"], op))
    return out


def expected_counts(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    kinds = dict.fromkeys(
        ("api", "kernel", "memcpy", "memset", "sync", "collective", "memory", "marker",
         "flow"), 0)
    launches = {}
    for e in events:
        if e.get("ph") == "X" and ALIASES.get(e.get("cat"), e.get("cat")) in (
                "cuda_runtime", "cuda_driver"):
            c = (e.get("args") or {}).get("correlation")
            if c is not None:
                launches[str(c)] = e
    ranges, grouped = None, set()
    for e in events:
        ph, cat = e.get("ph"), e.get("cat")
        cat = ALIASES.get(cat, cat)
        args = e.get("args") or {}
        if ph == "X":
            if cat in ("cuda_runtime", "cuda_driver"):
                kinds["api"] += 1
            elif cat == "kernel":
                kinds["kernel"] += 1
                name = e.get("name", "")
                if "Collective name" in args:
                    kinds["collective"] += 1
                elif name.startswith("nccl"):
                    kop = kernel_op(name)
                    if kop and kop != "SendRecv":
                        kinds["collective"] += 1
                        continue
                    if ranges is None:
                        ranges = comm_ranges(events)
                    rt = launches.get(str(args.get("correlation")))
                    inside = [(t - s, s, t) for s, t, _ in ranges.get(str(rt.get("tid")), [])
                              if s <= rt["ts"] and rt["ts"] + rt["dur"] <= t] if rt else []
                    if inside:
                        # the transfers of one range are one collective
                        grouped.add((str(rt.get("tid")), min(inside)[1:]))
                    elif kop:
                        kinds["collective"] += 1
            elif cat == "gpu_memcpy":
                kinds["memcpy"] += 1
            elif cat == "gpu_memset":
                kinds["memset"] += 1
            elif cat == "cuda_sync":
                kinds["sync"] += 1
            elif cat in ("cpu_op", "user_annotation", "gpu_user_annotation",
                         "python_function"):
                kinds["marker"] += 1
        elif ph in ("i", "I"):
            if e.get("name") == "[memory]":
                if args.get("Device Type") in (0, 1):
                    kinds["memory"] += 1
            else:
                kinds["marker"] += 1
        elif ph in ("s", "f", "t"):
            kinds["flow"] += 1
    kinds["collective"] += len(grouped)
    return kinds


if __name__ == "__main__":
    json.dump(expected_counts(sys.argv[1]), sys.stdout, sort_keys=True)
    print()
