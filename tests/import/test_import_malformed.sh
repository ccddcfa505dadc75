#!/bin/sh
# dpro-import on bad input: truncated gzip, invalid JSON, wrong types, not a trace: exit 1,
# a message naming the file and the position, no output left behind; --keep-partial keeps
# the events before the damage. Usage errors: exit 2.
set -u
b=${top_builddir:-.}
s=${top_srcdir:-.}
imp="$b/tools/dpro-import"
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0 pass=0
ok() { if "$@"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $*" >&2; fi; }

# A trace of our own, big enough that a cut leaves whole events before it.
python3 - "$tmp/good.json" <<'PY'
import json, sys
ev = []
for i in range(20000):
    ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::op%d" % (i % 50), "pid": 10,
               "tid": 11, "ts": 1000 + i * 3.5, "dur": 2.25, "args": {"External id": i}})
    ev.append({"ph": "X", "cat": "kernel", "name": "k%d" % (i % 7), "pid": 0, "tid": 7,
               "ts": 1001 + i * 3.5, "dur": 1, "args": {"device": 0, "stream": 7,
               "correlation": i + 1, "grid": [1, 1, 1], "block": [64, 1, 1]}})
json.dump({"traceEvents": ev, "distributedInfo": {"rank": 3, "world_size": 4}},
          open(sys.argv[1], "w"), indent=1)
PY
gzip -c "$tmp/good.json" > "$tmp/good.json.gz"
size=$(wc -c < "$tmp/good.json.gz")
head -c $((size / 2)) "$tmp/good.json.gz" > "$tmp/cut.json.gz"

"$imp" kineto "$tmp/good.json.gz" -o "$tmp/o-good" -q; ok test $? -eq 0
ok test -f "$tmp/o-good/rank3-import-10.dpro"

# truncated gzip: exit 1, file and position named, nothing left
"$imp" kineto "$tmp/cut.json.gz" -o "$tmp/o-cut" 2> "$tmp/cut.err"; ok test $? -eq 1
ok grep -q "cut.json.gz: byte [0-9]*, line [0-9]*: .*gzip" "$tmp/cut.err"
ok test -z "$(ls -A "$tmp/o-cut")"

# --keep-partial: the events before the cut stay, marked partial; the rank is not yet
# known (distributedInfo is after the events), so the file order gives it
"$imp" kineto --keep-partial "$tmp/cut.json.gz" -o "$tmp/o-keep" 2> "$tmp/keep.err"
ok test $? -eq 1
ok test "$(ls "$tmp/o-keep" | grep -c '\.dpro$')" -eq 1
python3 - "$tmp/o-keep" <<'PY'
import glob, sqlite3, sys
(p,) = glob.glob(sys.argv[1] + "/*.dpro")
meta = dict(sqlite3.connect(p).execute("select key, value from meta"))
assert meta["import.partial"] == "1" and "gzip" in meta["import.error"], meta
n = int(meta["import.events_out"])
assert 1000 < n < 40000, n
PY
ok test $? -eq 0
"$b/tools/dpro-info" --json "$tmp/o-keep" > "$tmp/keep.json"; ok test $? -eq 0

# invalid JSON, wrong types, absurd numbers, missing fields, not a trace
check_bad() { # name json-text expected-message
    printf '%s' "$2" > "$tmp/$1.json"
    "$imp" kineto "$tmp/$1.json" -o "$tmp/o-$1" 2> "$tmp/$1.err"; ok test $? -eq 1
    ok grep -q "$1.json: byte [0-9]*, line [0-9]*: .*$3" "$tmp/$1.err"
    ok test -z "$(ls -A "$tmp/o-$1")"
}
check_bad invalid '{"traceEvents":[{"ph":"X",,}]}' "invalid JSON"
check_bad types '{"traceEvents":[{"ph":"X","cat":"kernel","ts":"12","dur":1}]}' '"ts": expected a number'
check_bad argtype '{"traceEvents":[{"ph":"X","cat":"kernel","ts":1,"dur":1,"args":{"correlation":"x7"}}]}' '"correlation": "x7" is not an integer'
check_bad arghex '{"traceEvents":[{"ph":"X","cat":"kernel","ts":1,"dur":1,"args":{"stream":"0x1g"}}]}' '"stream": "0x1g" is not an integer'
check_bad argbig '{"traceEvents":[{"ph":"X","cat":"kernel","ts":1,"dur":1,"args":{"bytes":"0x8000000000000000"}}]}' 'is not an integer in range'

check_bad absurd '{"traceEvents":[{"ph":"X","cat":"kernel","ts":1e300,"dur":1}]}' "not a time in range"
check_bad missing '{"traceEvents":[{"ph":"X","cat":"kernel","ts":5}]}' 'no "dur"'
check_bad notrace '{"hello":"world"}' 'no "traceEvents"'
check_bad text 'hello' "invalid JSON"
head -c 4096 /dev/urandom > "$tmp/random.json"
"$imp" kineto "$tmp/random.json" -o "$tmp/o-random" 2>/dev/null; ok test $? -eq 1

# integers written as strings (ROCm: "stream": "0x0", "bytes": "1"), decimal or hex: read
printf '%s' '{"traceEvents":[{"ph":"X","cat":"cuda_runtime","name":"hipMemcpyAsync","pid":1,"tid":1,"ts":1,"dur":1,"args":{"correlation":"5","stream":"0x0","bytes":"64"}},{"ph":"X","cat":"gpu_memcpy","name":"Memcpy HtoD","pid":0,"tid":0,"ts":2,"dur":1,"args":{"correlation":"0x5","stream":"0","device":"0","bytes":"0x40"}}]}' > "$tmp/strnum.json"
"$imp" kineto -q "$tmp/strnum.json" -o "$tmp/o-strnum"; ok test $? -eq 0
"$b/tools/dpro-export" "$tmp/o-strnum" --chrome "$tmp/strnum.out.json"; ok test $? -eq 0
python3 - "$tmp/strnum.out.json" <<'PY'
import json, sys
out = json.load(open(sys.argv[1]))
out = out["traceEvents"] if isinstance(out, dict) else out
cp = [e for e in out if e.get("ph") == "X" and e.get("cat") == "memcpy"]
assert len(cp) == 1 and cp[0]["args"].get("bytes") == 64, cp
assert sum(1 for e in out if e.get("ph") == "s") == 1, "the launch and its copy are not joined"
PY
ok test $? -eq 0

# no device operation: refused (exit 1, nothing left) unless --allow-empty; categories
# not known (another device's) are named with their counts
printf '%s' '{"traceEvents":[{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":1,"dur":1},{"ph":"X","cat":"mtia_ccp_events","name":"dma","pid":9,"tid":8,"ts":2,"dur":1},{"ph":"X","cat":"mtia_ccp_events","name":"dma","pid":9,"tid":8,"ts":4,"dur":1},{"ph":"X","cat":"mtia_runtime","name":"run","pid":1,"tid":1,"ts":1,"dur":1}]}' > "$tmp/mtia.json"
"$imp" kineto -q "$tmp/mtia.json" -o "$tmp/o-mtia" 2> "$tmp/mtia.err"; ok test $? -eq 1
ok grep -q "mtia.json: no device operation" "$tmp/mtia.err"
ok grep -q "mtia.json: 3 events of categories dpro does not know, not imported: mtia_ccp_events (2), mtia_runtime (1)" "$tmp/mtia.err"
ok test -z "$(ls -A "$tmp/o-mtia")"
"$imp" kineto -q --allow-empty "$tmp/mtia.json" -o "$tmp/o-mtia2" 2> "$tmp/mtia2.err"; ok test $? -eq 0
ok test "$(ls "$tmp/o-mtia2" | grep -c '\.dpro$')" -eq 1
ok grep -q "mtia_runtime (1)" "$tmp/mtia2.err"
"$imp" --help | grep -q -- "--allow-empty"; ok test $? -eq 0

# missing input: exit 1; usage: exit 2
"$imp" kineto "$tmp/none.json" -o "$tmp/o-none" 2>/dev/null; ok test $? -eq 1
"$imp" 2>/dev/null; ok test $? -eq 2
"$imp" kineto "$tmp/good.json" 2>/dev/null; ok test $? -eq 2
"$imp" chrome "$tmp/good.json" -o "$tmp/x" 2>/dev/null; ok test $? -eq 2
"$imp" --bogus 2>/dev/null; ok test $? -eq 2
"$imp" --help | grep -q "keep-partial"; ok test $? -eq 0
"$imp" --version | grep -q "dpro-import"; ok test $? -eq 0

# a good file beside a bad one: the good one is imported, the exit status says 1
"$imp" kineto -q "$tmp/good.json" "$tmp/invalid.json" -o "$tmp/o-mixed" 2>/dev/null
ok test $? -eq 1
ok test "$(ls "$tmp/o-mixed" | grep -c '\.dpro$')" -eq 1
# the same file twice: the second would take the first one's name
"$imp" kineto -q "$tmp/good.json" "$tmp/good.json.gz" -o "$tmp/o-twice" 2>"$tmp/twice.err"
ok test $? -eq 1
ok grep -q "taken by an earlier input" "$tmp/twice.err"

echo "$pass passed, $fail failed"
test "$fail" -eq 0
