#!/bin/sh
# An imported Kineto trace written back by `dpro-export --kineto` keeps what the original
# carries: roundtrip_kineto.py compares the normalised events of both, category by
# category, args and all (op arguments, shapes, dtypes, sequence numbers, collective
# arguments, fwdbwd and ac2g flows, [memory] events). On a trace of each Kineto generation
# (gen_kineto.py) and on every real trace of ../shared/traces/kineto (skipped where they
# are absent, a failure in CI). The comparison is shown to fail on an export with one
# argument removed.
set -u
b=${top_builddir:-.}
s=${top_srcdir:-.}
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0 pass=0
ok() { if "$@"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $*" >&2; fi; }

roundtrip() { # NAME JSON
    rm -rf "$tmp/$1"
    "$b/tools/dpro-import" kineto --quiet "$2" -o "$tmp/$1" 2> "$tmp/$1.log"
    ok test $? -eq 0
    "$b/tools/dpro-export" "$tmp/$1" --kineto -o "$tmp/$1.out.json"
    ok test $? -eq 0
    echo "== $1"
    python3 "$s/tests/import/roundtrip_kineto.py" "$2" "$tmp/$1.out.json"
    ok test $? -eq 0
}

for gen in 1.8 1.10 1.11 1.13 2.x; do
    python3 "$s/tests/import/gen_kineto.py" "$gen" "$tmp/gen-$gen.json" --steps 3
    ok test $? -eq 0
    roundtrip "gen-$gen" "$tmp/gen-$gen.json"
done
ok grep -q '"\[memory\]"' "$tmp/gen-2.x.out.json"

# the comparison fails when the export lost one argument
python3 - "$tmp/gen-2.x.out.json" "$tmp/cut.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
e = next(e for e in doc["traceEvents"] if e.get("cat") == "cpu_op" and "External id" in e["args"])
del e["args"]["External id"]
json.dump(doc, open(sys.argv[2], "w"))
PY
python3 "$s/tests/import/roundtrip_kineto.py" "$tmp/gen-2.x.json" "$tmp/cut.json" > /dev/null 2>&1
ok test $? -eq 1
# --kineto writes one rank: a folder of two wants --rank
"$b/tools/dpro-import" kineto --quiet "$tmp/gen-2.x.json" -o "$tmp/two" &&
    python3 "$s/tests/import/gen_kineto.py" 2.x "$tmp/gen-r1.json" --rank 1 &&
    "$b/tools/dpro-import" kineto --quiet "$tmp/gen-r1.json" -o "$tmp/two"
ok test $? -eq 0
"$b/tools/dpro-export" "$tmp/two" --kineto -o "$tmp/two.json" 2> "$tmp/two.err"
ok test $? -eq 1
ok grep -q -- "--rank" "$tmp/two.err"
"$b/tools/dpro-export" "$tmp/two" --kineto --rank 1 -o "$tmp/two-r1.json"
ok test $? -eq 0
ok grep -q '"rank":1' "$tmp/two-r1.json"

dir="$s/../shared/traces/kineto"
if [ -d "$dir" ]; then
    for f in "$dir"/*.json.gz; do
        roundtrip "$(basename "$f" .json.gz)" "$f"
    done
elif [ "${CI:-}" = true ]; then
    echo "FAIL: no $dir (CI=true: the shared traces must be there)"
    fail=$((fail+1))
else
    echo "no $dir: the real traces skipped"
fi
echo "$pass passed, $fail failed"
test "$fail" -eq 0
