#!/bin/sh
# Round trip: each real Kineto trace, imported by dpro-import and exported by dpro-export
# --chrome, opens as a Chrome trace with the same kernels (names as traced, args.full_name
# where the slice shows a kernel's name shortened, and counts), the same
# streams and the same launch -> device flows as the original. Skipped (77) without the
# shared traces (a failure in CI) or without dpro-export.
set -u
b=${top_builddir:-.}
s=${top_srcdir:-.}
dir="$s/../shared/traces/kineto"
if [ ! -d "$dir" ] && [ "${CI:-}" = true ]; then
    # CI has the shared traces: there a missing folder is a failure, not a skip
    echo "FAIL: no $dir (CI=true: the shared traces must be there)"
    exit 1
fi
if [ ! -d "$dir" ] || [ ! -x "$b/tools/dpro-export" ]; then
    echo "no $dir or no dpro-export: skipped"
    exit 77
fi
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0 pass=0
ok() { if "$@"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $*" >&2; fi; }

for f in "$dir"/*.json.gz; do
    name=$(basename "$f" .json.gz)
    "$b/tools/dpro-import" -q kineto "$f" -o "$tmp/$name"; ok test $? -eq 0
    "$b/tools/dpro-export" "$tmp/$name" --chrome "$tmp/$name.json" 2> "$tmp/$name.err"
    ok test $? -eq 0
    python3 - "$f" "$tmp/$name.json" "$name" <<'PY'
import collections, gzip, json, re, sys
orig = json.load(gzip.open(sys.argv[1], "rt"))["traceEvents"]
out = json.load(open(sys.argv[2]))
out = out["traceEvents"] if isinstance(out, dict) else out

# kernels: same names, same counts (the export draws an NCCL kernel as its collective)
def is_kernel(e):
    return e.get("ph") == "X" and e.get("cat") in ("kernel", "collective")
k_orig = collections.Counter(e["name"] for e in orig if e.get("ph") == "X" and e.get("cat") == "kernel")
k_out = collections.Counter(e.get("args", {}).get("full_name", e["name"])
                            for e in out if is_kernel(e))
assert k_orig == k_out, ("kernels differ", sum(k_orig.values()), sum(k_out.values()))

# streams: the kernels' streams of the original are the exported tracks holding kernels
s_orig = {e["args"]["stream"] for e in orig if e.get("cat") == "kernel"}
names = {(e["pid"], e["tid"]): e["args"]["name"] for e in out
         if e.get("ph") == "M" and e.get("name") == "thread_name"}
s_out = set()
for e in out:
    if is_kernel(e):
        m = re.search(r"(\d+)", names.get((e["pid"], e["tid"]), ""))
        assert m, ("kernel track without a stream name", names.get((e["pid"], e["tid"])))
        s_out.add(int(m.group(1)))
assert s_orig == s_out, ("streams differ", s_orig, s_out)

# flows: a launch -> device op flow for every device op whose launch is in the trace
dev = {e["args"]["correlation"] for e in orig if e.get("ph") == "X" and
       e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and "correlation" in e.get("args", {})}
api = {e["args"]["correlation"] for e in orig if e.get("ph") == "X" and
       e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
want = len(dev & api)
ac2g = {e["id"] for e in orig if e.get("ph") == "s" and e.get("cat") == "ac2g"}
if ac2g:
    assert dev & api <= ac2g, "a joined launch without its ac2g flow in the original"
starts = collections.Counter(e["id"] for e in out if e.get("ph") == "s")
ends = collections.Counter(e["id"] for e in out if e.get("ph") == "f")
launch_s = sum(1 for e in out if e.get("ph") == "s" and e.get("cat") == "launch")
assert launch_s == want, ("flows differ", launch_s, want)
assert all(ends[i] >= 1 for i in starts), "a flow start without its end"
print("%-34s kernels %d, streams %s, flows %d" % (sys.argv[3], sum(k_out.values()), sorted(s_out), launch_s))
PY
    ok test $? -eq 0
done
echo "$pass passed, $fail failed"
test "$fail" -eq 0
