#!/bin/sh
# Every real Kineto trace of ../shared/traces/kineto imports, and dpro-info's counts per
# kind match what count_kineto.py (an independent stdlib reading of the JSON) expects.
# Skipped (77) where the shared traces are not beside the source tree (a failure in CI).
set -u
b=${top_builddir:-.}
s=${top_srcdir:-.}
dir="$s/../shared/traces/kineto"
if [ ! -d "$dir" ]; then
    # CI has the shared traces: there a missing folder is a failure, not a skip
    if [ "${CI:-}" = true ]; then
        echo "FAIL: no $dir (CI=true: the shared traces must be there)"
        exit 1
    fi
    echo "no $dir: skipped"
    exit 77
fi
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0 pass=0 n=0
ok() { if "$@"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $*" >&2; fi; }

for f in "$dir"/*.json.gz; do
    name=$(basename "$f" .json.gz)
    out="$tmp/$name"
    "$b/tools/dpro-import" kineto "$f" -o "$out" 2> "$out.log"
    ok test $? -eq 0
    ok test "$(ls "$out" | grep -c '\.dpro$')" -eq 1
    "$b/tools/dpro-info" --json "$out" > "$out.json"
    ok test $? -eq 0
    python3 "$s/tests/import/count_kineto.py" "$f" > "$out.expect"
    ok test $? -eq 0
    python3 - "$out.json" "$out.expect" "$name" <<'PY'
import json, sys
info = json.load(open(sys.argv[1]))
want = json.load(open(sys.argv[2]))
got = info["events_by_kind"]
bad = {k: (got.get(k, 0), v) for k, v in want.items() if got.get(k, 0) != v}
if bad or info["events"] != sum(want.values()):
    print("%s: counts differ (dpro-info, expected): %s; events %d vs %d"
          % (sys.argv[3], bad, info["events"], sum(want.values())), file=sys.stderr)
    sys.exit(1)
print("%-34s %s" % (sys.argv[3], " ".join("%s=%d" % kv for kv in sorted(want.items()))))
PY
    ok test $? -eq 0
    n=$((n+1))
done
ok test "$n" -gt 0

# All files at once: one trace per input, rank from distributedInfo, the 128-rank pair
# shares its communicator hash and numbers its collectives alike.
"$b/tools/dpro-import" kineto --quiet "$dir"/*.json.gz -o "$tmp/all"
ok test $? -eq 0
ok test "$(ls "$tmp/all" | grep -c '\.dpro$')" -eq "$n"
ok test -z "$(ls -A "$tmp/all" | grep -v '\.dpro$')"
python3 - "$tmp/all" <<'PY'
import glob, os, sqlite3, sys
d = sys.argv[1]
ranks = {}
for p in sorted(glob.glob(os.path.join(d, "*.dpro"))):
    db = sqlite3.connect("file:%s?mode=ro" % p, uri=True)
    meta = dict(db.execute("select key, value from meta"))
    for k in ("source", "source_file", "clock", "job_id", "rank", "world_size", "host", "pid"):
        assert k in meta, (p, k)
    assert meta["source"] == "kineto-import" and meta["clock"] == "kineto-us", meta
    assert meta["import.partial"] == "0", meta
    name = os.path.basename(p)
    assert name == "rank%s-%s-%s.dpro" % (meta["rank"], meta["host"], meta["pid"]), name
    if "128rank" in meta["source_file"]:
        ranks[meta["rank"]] = [h for (h,) in db.execute("select hash from communicators")]
        assert meta["world_size"] == "128", meta
    db.close()
assert set(ranks) == {"0", "1"} and ranks["0"] == ranks["1"] and ranks["0"], ranks
PY
ok test $? -eq 0

# --single-thread (parser and writer on one thread) writes the same events
"$b/tools/dpro-import" kineto --quiet --single-thread "$dir"/*.json.gz -o "$tmp/one"
ok test $? -eq 0
"$b/tools/dpro-info" --json "$tmp/all" > "$tmp/all.json" &&
    "$b/tools/dpro-info" --json "$tmp/one" > "$tmp/one.json"
ok test $? -eq 0
python3 - "$tmp/all.json" "$tmp/one.json" <<'PY'
import json, sys
a, o = (json.load(open(p)) for p in sys.argv[1:3])
assert a["events"] == o["events"] and a["events_by_kind"] == o["events_by_kind"], (a, o)
assert a["bytes"] == o["bytes"], (a["bytes"], o["bytes"])
PY
ok test $? -eq 0

echo "$pass passed, $fail failed"
test "$fail" -eq 0
