#!/bin/sh
# dpro-info on a written trace: counts, JSON keys, --kernels, exit codes on bad input and usage.
set -u
b=${top_builddir:-.}
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0 pass=0
ok() { if "$@"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $*" >&2; fi; }

"$b/tests/bench/bench_trace" --events 20000 --write "$tmp/rank0.dpro" >/dev/null || exit 1
"$b/tools/dpro-info" --json "$tmp" > "$tmp/out.json"; ok test $? -eq 0
python3 - "$tmp/out.json" <<'PY' || fail=$((fail+1))
import json, sys
d = json.load(open(sys.argv[1]))
for k in ("ranks", "events", "events_by_kind", "bytes", "bytes_per_event", "dropped"):
    assert k in d, k
assert d["ranks"] == 1 and d["events"] == 20000, d
k = d["events_by_kind"]
assert k["api"] + k["kernel"] + k["marker"] + k["memcpy"] == 20000, k
assert k["api"] == k["kernel"] + 0 or abs(k["api"] - k["kernel"]) <= 1, k
assert 0 < d["bytes_per_event"] < 20, d
PY
# --kernels: the same pass also sums device time; every device op lands in one category
"$b/tools/dpro-info" --json --kernels=5 "$tmp" > "$tmp/kern.json"; ok test $? -eq 0
python3 - "$tmp/kern.json" <<'PY' || fail=$((fail+1))
import json, sys
d = json.load(open(sys.argv[1]))
k, by = d["kernels"], d["events_by_kind"]
r = k["per_rank"][0]
cats = r["categories"]
assert cats["compute"]["count"] + cats["communication"]["count"] == by["kernel"], cats
assert cats["memcpy"]["count"] == by["memcpy"] and cats["memset"]["count"] == by["memset"], cats
assert len(r["top_kernels"]) == 5 and 5 < r["kernel_names"] <= 160, r["kernel_names"]
t = [x["total_us"] for x in r["top_kernels"]]
assert t == sorted(t, reverse=True), t
assert abs(sum(c["share_pct"] for c in cats.values()) - 100) < 1e-6, cats
assert k["all"]["device_us"] == r["device_us"] and k["all"]["files"] == 1, k["all"]
PY
"$b/tools/dpro-info" --kernels=3 "$tmp" > "$tmp/kern.txt"; ok test $? -eq 0
n=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["kernels"]["all"]["kernel_names"])' "$tmp/kern.json")
ok grep -q "top 3 of $n kernel names" "$tmp/kern.txt"
ok test "$(grep -c 'kernel breakdown' "$tmp/kern.txt")" -eq 1
"$b/tools/dpro-info" --kernels=0 "$tmp" 2>/dev/null >/dev/null; ok test $? -eq 2
"$b/tools/dpro-info" --kernels=abc "$tmp" 2>/dev/null >/dev/null; ok test $? -eq 2
"$b/tools/dpro-info" "$tmp/rank0.dpro" > "$tmp/out.txt"; ok test $? -eq 0
ok grep -q "20000 events" "$tmp/out.txt"
echo "not a trace" > "$tmp/bad.dpro"
"$b/tools/dpro-info" "$tmp/bad.dpro" 2> "$tmp/err.txt" >/dev/null; ok test $? -eq 1
ok grep -q "bad.dpro" "$tmp/err.txt"
"$b/tools/dpro-info" "$tmp/missing" 2>/dev/null >/dev/null; ok test $? -eq 1
"$b/tools/dpro-info" --bogus 2>/dev/null >/dev/null; ok test $? -eq 2
"$b/tools/dpro-info" 2>/dev/null >/dev/null; ok test $? -eq 2
"$b/tools/dpro-info" --version | grep -q "dpro-info"; ok test $? -eq 0
echo "$pass passed, $fail failed"
test "$fail" -eq 0
