#!/bin/sh
# ProfilerStep#N on the real traces of ../shared/traces/kineto: one step cut out of
# v100-1rank-training (the events that start inside ProfilerStep#103) is one iteration, not
# "no iterations found"; the 128-rank pair with rank 1's first step (#551) cut away is
# compared on the step both have (#552), as the whole pair is. Skipped (77) where the
# shared traces are not beside the source tree (a failure in CI).
set -u
b=${top_builddir:-.}
s=${top_srcdir:-.}
dir="$s/../shared/traces/kineto"
if [ ! -d "$dir" ]; then
    if [ "${CI:-}" = true ]; then
        echo "FAIL: no $dir (CI=true: the shared traces must be there)"
        exit 1
    fi
    echo "no $dir: skipped"
    exit 77
fi
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0 pass=0
ok() { if "$@"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $*" >&2; fi; }

# cut.py IN OUT FROM_STEP [TO_STEP]: the metadata and the events that start inside the
# steps FROM..TO (ProfilerStep#N ranges of IN) and end before the next step's start + 1 s
cat > "$tmp/cut.py" <<'PY'
import gzip, json, sys
src, out, lo = sys.argv[1], sys.argv[2], int(sys.argv[3])
hi = int(sys.argv[4]) if len(sys.argv) > 4 else 1 << 62
doc = json.load(gzip.open(src, "rt"))
ev = doc["traceEvents"]
steps = {int(e["name"].split("#")[1]): e for e in ev
         if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")}
keep = [n for n in steps if lo <= n <= hi]
t0 = min(steps[n]["ts"] for n in keep)
t1 = max(steps[n]["ts"] + steps[n]["dur"] for n in keep)
def inside(e):
    if e.get("ph") == "M":
        return True
    ts = e.get("ts")
    return isinstance(ts, (int, float)) and t0 <= ts < t1
doc["traceEvents"] = [e for e in ev if inside(e)]
json.dump(doc, open(out, "w"))
print(out, sorted(keep), len(doc["traceEvents"]), "events")
PY
iters() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["iterations"])' "$1"; }

# one step of v100: one iteration
python3 "$tmp/cut.py" "$dir/v100-1rank-training.json.gz" "$tmp/v100-103.json" 103 103
ok test $? -eq 0
"$b/tools/dpro-import" kineto -q "$tmp/v100-103.json" -o "$tmp/o-v100"; ok test $? -eq 0
"$b/tools/dpro-replay" --json "$tmp/o-v100" > "$tmp/v100.replay" 2> "$tmp/v100.err"
ok test $? -eq 0
ok test "$(iters "$tmp/v100.replay")" = 1
if grep -q "no iterations found" "$tmp/v100.err"; then ok false "v100 #103: $(cat "$tmp/v100.err")"; fi

# the 128-rank pair, rank 1 without step 551: step 552 compared on both
python3 "$tmp/cut.py" "$dir/128rank-sampled-rank1.json.gz" "$tmp/r1-552.json" 552
ok test $? -eq 0
"$b/tools/dpro-import" kineto -q "$dir/128rank-sampled-rank0.json.gz" "$tmp/r1-552.json" \
    -o "$tmp/o-128"
ok test $? -eq 0
"$b/tools/dpro-replay" --json "$tmp/o-128" > "$tmp/128.replay" 2> "$tmp/128.err"
ok test $? -eq 0
ok test "$(iters "$tmp/128.replay")" = 1
if grep -q "no iterations found" "$tmp/128.err"; then ok false "128 pair: $(cat "$tmp/128.err")"; fi
python3 - "$tmp/128.replay" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["ranks"] == 2 and len(r["per_rank"]) == 2, r["per_rank"]
PY
ok test $? -eq 0

echo "$pass passed, $fail failed"
test "$fail" -eq 0
