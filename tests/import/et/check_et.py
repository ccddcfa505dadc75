#!/usr/bin/env python3
"""check_et.py ET.json[.gz] KINETO.json[.gz] EXPORT.json [--shapes-from-et]: checks what `dpro-import et`
made of the pair (EXPORT: `dpro-export --kineto` of the trace) against an independent
reading of the two JSON files.

Expected, from the execution trace alone: for each node with an rf_id, its id, its parent
(ctrl_deps) and its data dependencies, found by brute force: for each tensor among its
inputs ([tensor id, storage id, offset, numel, itemsize, device], at any depth), among the
nodes written before it in the file (they exited before it did) whose id is smaller than
its own (they were entered before it: not a descendant) and that list the tensor among
their outputs, the one written last; the dependency is the distance of the ids. Every
Kineto event whose "Record function id" is a node's rf_id must come back with "ET id",
"ET parent" and "ET deps" (absent: none) equal to those, every other event without them,
the events' other arguments unchanged, and one flow (category et_data) from the producer's
slice to the op's for each dependency whose producer is in the Kineto trace. --shapes-from-et (KINETO recorded no shapes): a
joined event's "Input Dims" and "Input type" are the node's input shapes and types (absent
when the node has none). Exit 0 when all hold; prints what differs."""
import gzip
import json
import sys


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def tensors(v, out):
    if (isinstance(v, list) and len(v) == 6 and isinstance(v[5], str)
            and all(isinstance(x, int) and not isinstance(x, bool) for x in v[:5])):
        out.append(v[0])
    elif isinstance(v, list):
        for x in v:
            tensors(x, out)
    return out


def expected(et):
    nodes = et["nodes"]
    outs = [set(tensors(n.get("outputs", {}).get("values", []), [])) for n in nodes]
    want = {}
    for pos, n in enumerate(nodes):
        rf = next((a["value"] for a in n.get("attrs", []) if a["name"] == "rf_id"), 0)
        deps = set()
        for t in tensors(n.get("inputs", {}).get("values", []), []):
            for p in range(pos - 1, -1, -1):
                if nodes[p]["id"] < n["id"] and t in outs[p]:
                    deps.add(n["id"] - nodes[p]["id"])
                    break
        if rf:
            ins = n.get("inputs", {})
            want.setdefault(rf, (n["id"], n["ctrl_deps"], sorted(deps),
                                 ins.get("shapes") or None, ins.get("types") or None))
    return want


def key(e):
    return (e.get("cat"), e.get("name"), e.get("ph"), e.get("tid"),
            e.get("args", {}).get("Record function id"), e.get("args", {}).get("External id"))


def check_flows(export, want):
    """The et_data flows of the export against the dependencies of the joined ops."""
    where = {}  # ET id -> (ts, tid) of its op in the export
    for e in export["traceEvents"]:
        if e.get("ph") == "X" and "ET id" in e.get("args", {}):
            where[e["args"]["ET id"]] = (e["ts"], e["tid"])
    expect = []
    for eid, _, deps, _, _ in want.values():
        if eid in where:
            expect += [where[eid - d] + where[eid] for d in deps if eid - d in where]
    starts, ends = {}, {}
    for e in export["traceEvents"]:
        if e.get("cat") == "et_data":
            (starts if e["ph"] == "s" else ends)[e["id"]] = (e["ts"], e["tid"])
    got = [starts[i] + ends[i] for i in starts if i in ends]
    if sorted(got) != sorted(expect) or len(starts) != len(ends):
        print("et_data flows: %d, %d ends; expected %d" % (len(starts), len(ends), len(expect)))
        return 1
    print("%d et_data flows, as expected" % len(got))
    return 0


def main():
    et, kineto, export = load(sys.argv[1]), load(sys.argv[2]), load(sys.argv[3])
    shapes_from_et = "--shapes-from-et" in sys.argv[4:]
    want = expected(et)
    bad = 0
    ops = [e for e in kineto["traceEvents"] if e.get("ph") == "X"
           and "Record function id" in e.get("args", {})]
    got = {}
    for e in export["traceEvents"]:
        if e.get("ph") == "X" and "Record function id" in e.get("args", {}):
            got.setdefault(key(e), []).append(e)
    joined = 0
    for e in ops:
        rf = e["args"]["Record function id"]
        g = got.get(key(e), [])
        if len(g) != 1:
            print("event not found once in the export:", key(e), len(g))
            bad += 1
            continue
        a = g[0]["args"]
        if rf in want:
            joined += 1
            eid, parent, deps, shapes, types = want[rf]
            have = (a.get("ET id"), a.get("ET parent"), a.get("ET deps", []))
            if have != (eid, parent, deps):
                print("rf %d (%s): ET id/parent/deps %s, expected %s"
                      % (rf, e["name"], have, (eid, parent, deps)))
                bad += 1
            if shapes_from_et and (a.get("Input Dims"), a.get("Input type")) != (shapes, types):
                print("rf %d (%s): Input Dims/type %s, expected the node's %s"
                      % (rf, e["name"], (a.get("Input Dims"), a.get("Input type")),
                         (shapes, types)))
                bad += 1
        elif any(k in a for k in ("ET id", "ET parent", "ET deps")):
            print("rf %d (%s) is no node's but carries ET arguments" % (rf, e["name"]))
            bad += 1
        rest = {k: v for k, v in a.items() if not k.startswith("ET ")}
        if shapes_from_et and rf in want:
            rest = {k: v for k, v in rest.items() if k not in ("Input Dims", "Input type")}
        if rest != e["args"]:
            print("rf %d (%s): arguments changed: %s -> %s" % (rf, e["name"], e["args"], rest))
            bad += 1
    bad += check_flows(export, want)
    ndeps = sum(len(w[2]) for w in want.values())
    print("%d ops with a Record function id, %d joined, %d nodes with an rf_id, "
          "%d data dependencies among them" % (len(ops), joined, len(want), ndeps))
    if joined == 0 or ndeps == 0:
        print("nothing joined, or no dependency: the fixture does not test the join")
        bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
