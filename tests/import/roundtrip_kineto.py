#!/usr/bin/env python3
"""roundtrip_kineto.py ORIGINAL.json[.gz] EXPORTED.json: whether a Kineto trace imported by
dpro-import and written back by `dpro-export --kineto` keeps what the original carries.

Both files are read with the standard library (numbers as Decimal: times compare to the
nanosecond) and every trace event is normalised to (ph, cat, name, pid, tid, ts, dur, id,
bp, args). The events dpro keeps are compared as multisets, category by category, args
and all: op arguments (Input Dims, Input type, Sequence number, Fwd thread id, External
id, Record function id, collective arguments), the fwdbwd and ac2g flows, [memory]
instants, kernels' launch configurations and occupancy, copies' bytes. Left out, and why:
"M" metadata rows and the profiler's own span (cat Trace: not events of the job), the
category of other instants (dpro keeps their name and time). "memory bandwidth (GB/s)" is
bytes over duration, which export computes again: compared to a relative 1e-9.
Prints one line per category; exits 1 when any category differs, naming a sample.
"""
import collections
import decimal
import gzip
import json
import sys

SKIP_CATS = ("Trace",)
# Export writes today's spelling: the categories of earlier Kineto generations as their
# later names (as count_kineto.py counts them), flows as ac2g and fwdbwd.
ALIASES = {"Operator": "cpu_op", "Runtime": "cuda_runtime", "Kernel": "kernel",
           "Memcpy": "gpu_memcpy", "Memset": "gpu_memset", "User": "gpu_user_annotation",
           "gpu_user_Annotation": "gpu_user_annotation", "async": "ac2g", "async_gpu": "ac2g",
           "async_cpu_to_gpu": "ac2g", "forward_backward": "fwdbwd"}


def row(v):
    """A pid or tid: its first run of digits when written as text ("stream 7"), as the
    importer reads it."""
    if isinstance(v, str):
        digits = ""
        for ch in v:
            if ch.isdigit():
                digits += ch
            elif digits:
                break
        return digits or "0"
    return str(v)


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        doc = json.load(f, parse_float=decimal.Decimal)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def canon(v):
    """A hashable, order-free form of a JSON value; numbers compare by value."""
    if isinstance(v, dict):
        return tuple(sorted((k, canon(x)) for k, x in v.items()))
    if isinstance(v, list):
        return tuple(canon(x) for x in v)
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    return decimal.Decimal(v).normalize()


def ns(v):
    return int((decimal.Decimal(v) * 1000).to_integral_value(decimal.ROUND_HALF_EVEN))


def norm(e):
    ph = e.get("ph")
    cat = ALIASES.get(e.get("cat"), e.get("cat"))
    if ph == "M" or cat in SKIP_CATS:
        return None, None
    name = e.get("name", "")
    args = dict(e.get("args") or {})
    bw = args.pop("memory bandwidth (GB/s)", None)
    if ph in ("i", "I"):
        key = "[memory]" if name == "[memory]" else "instant"
        if key == "instant":
            cat = None
        return key, (ph, cat, name, ns(e["ts"]), canon(args) if key == "[memory]" else ())
    if cat == "cpu_op" and name.startswith("ProfilerStep#"):
        cat = "user_annotation"  # 1.8-1.9 wrote the steps as ops
    key = cat
    tup = (ph, cat, name, row(e.get("pid")), row(e.get("tid")), ns(e["ts"]),
           ns(e["dur"]) if "dur" in e else None, e.get("id"),
           e.get("bp"), canon(args))
    if bw is not None:
        tup = tup + ("bw",)
    return key, tup


def bandwidths(events):
    out = {}
    for e in events:
        a = e.get("args") or {}
        if "memory bandwidth (GB/s)" in a:
            out[(ALIASES.get(e.get("cat"), e.get("cat")), ns(e["ts"]),
                 row(e.get("tid")))] = decimal.Decimal(
                a["memory bandwidth (GB/s)"])
    return out


def main():
    orig, back = load(sys.argv[1]), load(sys.argv[2])
    by = {0: collections.defaultdict(collections.Counter),
          1: collections.defaultdict(collections.Counter)}
    for side, events in ((0, orig), (1, back)):
        for e in events:
            k, t = norm(e)
            if k is not None:
                by[side][k][t] += 1
    bad = 0
    for k in sorted(set(by[0]) | set(by[1]), key=str):
        a, b = by[0][k], by[1][k]
        na, nb = sum(a.values()), sum(b.values())
        same = a == b
        print("%-22s original %7d  exported %7d  %s" % (k, na, nb, "same" if same else "DIFFER"))
        if not same:
            bad += 1
            for t in list((a - b).elements())[:2]:
                print("   only in original:", t, file=sys.stderr)
            for t in list((b - a).elements())[:2]:
                print("   only in exported:", t, file=sys.stderr)
    bo, bb = bandwidths(orig), bandwidths(back)
    off = [k for k in bo if k not in bb or abs(bo[k] - bb[k]) > abs(bo[k]) * decimal.Decimal(
        "1e-9") + decimal.Decimal("1e-12")]
    print("%-22s original %7d  exported %7d  %s" % ("bandwidth values", len(bo), len(bb),
                                                  "same" if not off else "DIFFER"))
    if off:
        bad += 1
        print("   e.g.", off[0], bo[off[0]], bb.get(off[0]), file=sys.stderr)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
