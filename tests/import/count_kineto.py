#!/usr/bin/env python3
"""count_kineto.py FILE.json[.gz]: the dpro events a Kineto trace should give, by kind.

An independent check of dpro-import (tools/import/import_kineto.h has the mapping): this script
json-loads the whole file with the standard library and counts by category and phase.
Prints {"api": N, "kernel": N, ...} as JSON, with the kind names of dpro-info.
"""
import gzip
import json
import sys


def expected_counts(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    kinds = dict.fromkeys(
        ("api", "kernel", "memcpy", "memset", "sync", "collective", "memory", "marker"), 0)
    for e in events:
        ph, cat = e.get("ph"), e.get("cat")
        args = e.get("args") or {}
        if ph == "X":
            if cat in ("cuda_runtime", "cuda_driver"):
                kinds["api"] += 1
            elif cat == "kernel":
                kinds["kernel"] += 1
                if e.get("name", "").startswith("nccl") or "Collective name" in args:
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
                if args.get("Device Type") == 1:
                    kinds["memory"] += 1
            else:
                kinds["marker"] += 1
    return kinds


if __name__ == "__main__":
    json.dump(expected_counts(sys.argv[1]), sys.stdout, sort_keys=True)
    print()
