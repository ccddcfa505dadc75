#!/bin/sh
# Every Kineto generation imports: gen_kineto.py writes a small two-rank trace in the
# spelling of PyTorch 1.8, 1.10, 1.11, 1.13, 2.x and of ROCm; each file imports with exit
# 0, and what dpro-import made is checked against an independent reading of the JSON
# (count_kineto.py and the stdlib here): the events by kind, the kernels by name and
# count, the launch -> device op joins (one per correlation id found on both sides), the
# ProfilerStep#N steps as iterations, and (both ranks imported together, then replayed)
# every collective matched across the ranks. One ProfilerStep alone is one iteration, and
# ranks whose files start at different steps are compared step by step.
set -u
b=${top_builddir:-.}
s=${top_srcdir:-.}
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0 pass=0
ok() { if "$@"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $*" >&2; fi; }

for gen in 1.8 1.10 1.11 1.13 2.x rocm; do
    for r in 0 1; do
        python3 "$s/tests/import/gen_kineto.py" "$gen" "$tmp/$gen-r$r.json" --rank $r --world 2 \
            --steps 3
        ok test $? -eq 0
        "$b/tools/dpro-import" kineto -q "$tmp/$gen-r$r.json" -o "$tmp/o-$gen-r$r" \
            2> "$tmp/$gen-r$r.err"
        ok test $? -eq 0
        ok test ! -s "$tmp/$gen-r$r.err"
        "$b/tools/dpro-info" --json "$tmp/o-$gen-r$r" > "$tmp/$gen-r$r.info"; ok test $? -eq 0
        python3 "$s/tests/import/count_kineto.py" "$tmp/$gen-r$r.json" > "$tmp/$gen-r$r.expect"
        ok test $? -eq 0
        "$b/tools/dpro-export" "$tmp/o-$gen-r$r" --chrome "$tmp/$gen-r$r.out.json" \
            2> "$tmp/$gen-r$r.export.err"
        ok test $? -eq 0
        python3 - "$tmp/$gen-r$r.json" "$tmp/$gen-r$r.info" "$tmp/$gen-r$r.expect" \
            "$tmp/$gen-r$r.out.json" "$gen" <<'PY'
import collections, json, sys
src, info, want, out, gen = sys.argv[1:6]
doc = json.load(open(src))
ev = doc["traceEvents"]
info, want = json.load(open(info)), json.load(open(want))
got = info["events_by_kind"]
assert all(got.get(k, 0) == v for k, v in want.items()), (gen, "kinds", got, want)
assert want["kernel"] > 0 and want["memcpy"] > 0 and want["memset"] > 0, (gen, want)
assert info["events"] == sum(want.values()), (gen, info["events"], want)
# the independent reading: categories by what each era called them
alias = {"Kernel": "kernel", "Memcpy": "gpu_memcpy", "Memset": "gpu_memset",
         "Runtime": "cuda_runtime"}
cat = lambda e: alias.get(e.get("cat"), e.get("cat"))
x = [e for e in ev if e.get("ph") == "X"]
kernels = collections.Counter(e["name"] for e in x if cat(e) == "kernel")
dev = {str(e["args"]["correlation"]) for e in x
       if cat(e) in ("kernel", "gpu_memcpy", "gpu_memset")}
api = {str(e["args"]["correlation"]) for e in x if cat(e) in ("cuda_runtime", "cuda_driver")}
steps = [e for e in x if e["name"].startswith("ProfilerStep#")]
o = json.load(open(out))["traceEvents"]
ok = collections.Counter(e["name"] for e in o if e.get("ph") == "X" and
                         e.get("cat") in ("kernel", "collective"))
assert ok == kernels, (gen, "kernels", ok, kernels)
flows = sum(1 for e in o if e.get("ph") == "s" and e.get("cat") == "launch")
assert flows == len(dev & api) and flows == len(dev), (gen, "joins", flows, len(dev & api))
# bytes of copies and sets: the device record's, else (ROCm 6.2) its call's "size" / "bytes"
calls = {str(e["args"]["correlation"]): e["args"] for e in x
         if cat(e) in ("cuda_runtime", "cuda_driver")}
def nbytes(e):
    a = e["args"]
    if "bytes" in a:
        return int(a["bytes"])
    c = calls.get(str(a["correlation"]), {})
    return int(c.get("bytes", c.get("size", 0)))
want_b = sorted(nbytes(e) for e in x if cat(e) in ("gpu_memcpy", "gpu_memset"))
got_b = sorted(e["args"]["bytes"] for e in o if e.get("ph") == "X" and
               e.get("cat") in ("memcpy", "memset"))
assert want_b == got_b and all(want_b), (gen, "bytes", got_b, want_b)
iters = [e for e in o if e.get("ph") == "X" and e.get("cat") == "iteration"]
# one step is one iteration; of several, the first opens them (a profiler's first step is
# not a steady one)
assert len(iters) == max(len(steps) - 1, 1), (gen, "iterations", len(iters), len(steps))
print("%-5s %s kernels %d joins %d iterations %d" % (gen, " ".join(
    "%s=%d" % kv for kv in sorted(want.items())), sum(ok.values()), flows, len(iters)))
PY
        ok test $? -eq 0
    done
    # both ranks together: one job, and every collective has both ranks
    "$b/tools/dpro-import" kineto -q "$tmp/$gen-r0.json" "$tmp/$gen-r1.json" -o "$tmp/j-$gen"
    ok test $? -eq 0
    "$b/tools/dpro-replay" --json "$tmp/j-$gen" > "$tmp/$gen.replay" 2> "$tmp/$gen.replay.err"
    ok test $? -eq 0
    ok test "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ranks"])' \
        "$tmp/$gen.replay")" = 2
    if grep -q "lack participants\|no collectives" "$tmp/$gen.replay.err"; then
        ok false "$gen: collectives not matched across the ranks: $(cat "$tmp/$gen.replay.err")"
    fi
done
# One ProfilerStep is one iteration (not "no iterations found" and the whole trace).
for gen in 1.8 2.x rocm; do
    python3 "$s/tests/import/gen_kineto.py" "$gen" "$tmp/one-$gen.json" --world 1 --steps 1 \
        --first-step 7
    "$b/tools/dpro-import" kineto -q "$tmp/one-$gen.json" -o "$tmp/o-one-$gen"; ok test $? -eq 0
    "$b/tools/dpro-replay" --json "$tmp/o-one-$gen" > "$tmp/one-$gen.replay" 2> "$tmp/one-$gen.err"
    ok test $? -eq 0
    ok test "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["iterations"])' \
        "$tmp/one-$gen.replay")" = 1
    if grep -q "no iterations found" "$tmp/one-$gen.err"; then ok false "$gen: one step: $(cat "$tmp/one-$gen.err")"; fi
done

# Ranks are matched by step number: rank 1's file starts a step later (steps 2-5 against
# rank 0's 1-4; step N runs at the same time on both), so the steps both measure, 3 and 4,
# are compared, iteration k being the same step on both ranks (windows together in time).
python3 "$s/tests/import/gen_kineto.py" 2.x "$tmp/off-r0.json" --rank 0 --steps 4 --first-step 1
python3 "$s/tests/import/gen_kineto.py" 2.x "$tmp/off-r1.json" --rank 1 --steps 4 --first-step 2
"$b/tools/dpro-import" kineto -q "$tmp/off-r0.json" "$tmp/off-r1.json" -o "$tmp/off"
ok test $? -eq 0
"$b/tools/dpro-replay" --json "$tmp/off" > "$tmp/off.replay" 2> "$tmp/off.err"; ok test $? -eq 0
"$b/tools/dpro-export" "$tmp/off" --chrome "$tmp/off.out.json" 2>/dev/null; ok test $? -eq 0
python3 - "$tmp/off.replay" "$tmp/off.out.json" "$tmp/off.err" <<'PY'
import json, sys
rep = json.load(open(sys.argv[1]))
assert rep["iterations"] == 2, rep["iterations"]
# rank 0's step 1 has no partner (rank 1's file starts later): said, and nothing else
err = open(sys.argv[3]).read()
assert "could not be simulated" not in err and "circular" not in err, err
it = {}
for e in json.load(open(sys.argv[2]))["traceEvents"]:
    if e.get("ph") == "X" and e.get("cat") == "iteration":
        it.setdefault(e["pid"], []).append(e["ts"])
assert len(it) == 2 and len(it[0]) == len(it[1]) == 2, it
assert all(abs(a - b) < 100 for a, b in zip(it[0], it[1])), ("steps not matched", it)
print("steps matched:", it)
PY
ok test $? -eq 0

echo "$pass passed, $fail failed"
test "$fail" -eq 0
