#!/bin/sh
# dpro-import nsys: Nsight Systems SQLite exports (gen_nsys.py writes them with the schema
# nsys documents) of a two-rank job, one export per rank and both processes in one export.
# What dpro-import made (dpro-info --json, dpro-export --chrome) is checked against an
# independent reading of the SQLite (python sqlite3): events by kind, kernels by name with
# their count and device time, copies and sets with their bytes, the launch -> device op
# joins, NVTX ranges and marks, the collectives (one per NCCL NVTX range with its payload's
# communicator and bytes, one per NCCL kernel outside any), the pid decoded from globalPid,
# host and rank; the two ranks replay with every collective matched. Bad input (not SQLite,
# empty, SQLite without nsys tables, truncated at several points) is refused: exit 1, the
# file named, nothing written.
set -u
b=${top_builddir:-.}
s=${top_srcdir:-.}
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0 pass=0
ok() { if "$@"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $*" >&2; fi; }

python3 "$s/tests/import/gen_nsys.py" "$tmp/in" --steps 3
ok test $? -eq 0

# check OUTDIR SQLITE...: every trace in OUTDIR against the processes of the exports
check() {
    out=$1
    shift
    for f in "$out"/*.dpro; do
        "$b/tools/dpro-info" --json "$f" > "$f.info" || return 1
        "$b/tools/dpro-export" "$f" --chrome "$f.chrome.json" 2> "$f.export.err" || return 1
    done
    python3 - "$out" "$@" <<'PY'
import collections, glob, json, sqlite3, sys
out, exports = sys.argv[1], sys.argv[2:]
procs = {}  # pid -> (export, globalPid >> 24)
for x in exports:
    db = sqlite3.connect(x)
    for (key,) in db.execute("SELECT DISTINCT globalPid >> 24 FROM CUPTI_ACTIVITY_KIND_KERNEL"):
        procs[key % 0x1000000] = (x, key)
traces = sorted(glob.glob(out + "/*.dpro"))
assert len(traces) == len(procs), (traces, procs)
ranks = set()
for t in traces:
    info = json.load(open(t + ".info"))
    f = info["files"][0]
    assert f["source"] == "nsys-import" and f["host"] == "node7", f
    assert f["pid"] in procs, (f["pid"], procs)
    assert f["world_size"] == len(procs), f
    ranks.add(f["rank"])
    db = sqlite3.connect(procs[f["pid"]][0])
    key = procs[f["pid"]][1]
    q = lambda sql: db.execute(sql, (key,)).fetchall()
    # the independent reading
    kern = q("SELECT s.value, k.end - k.start, k.correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL k "
             "JOIN StringIds s ON s.id = k.demangledName WHERE k.globalPid >> 24 = ?")
    cpy = q("SELECT bytes, correlationId FROM CUPTI_ACTIVITY_KIND_MEMCPY "
            "WHERE globalPid >> 24 = ?")
    mset = q("SELECT bytes, correlationId FROM CUPTI_ACTIVITY_KIND_MEMSET "
             "WHERE globalPid >> 24 = ?")
    api = db.execute("SELECT start, end, globalTid % 16777216, correlationId FROM "
                     "CUPTI_ACTIVITY_KIND_RUNTIME WHERE globalTid >> 24 = ?1 UNION ALL "
                     "SELECT start, end, globalTid % 16777216, correlationId FROM "
                     "CUPTI_ACTIVITY_KIND_DRIVER WHERE globalTid >> 24 = ?1", (key,)).fetchall()
    nvtx = q("SELECT n.eventType, n.start, n.end, COALESCE(n.text, s.value), "
             "n.globalTid % 16777216, n.domainId, n.jsonText FROM NVTX_EVENTS n LEFT JOIN "
             "StringIds s ON s.id = n.textId WHERE n.globalTid >> 24 = ?")
    nccl_dom = {d for (e, _, _, txt, _, d, _) in nvtx if e == 75 and txt == "NCCL"}
    ranges = [r for r in nvtx if r[0] in (59, 60) and r[2] is not None]
    marks = [r for r in nvtx if r[0] == 34]
    nccl_ranges = [r for r in ranges if r[5] in nccl_dom and r[3].startswith("nccl")]
    launch_of = {c: (s0, tid) for (s0, e0, tid, c) in api}
    # NCCL kernels: taken by the range their launch lies in, else collectives of their own
    nccl_k = [(n, c) for (n, d, c) in kern if "nccl" in n.lower()]
    taken = 0
    for (_, s0, e0, _, tid, _, _) in nccl_ranges:
        if any(launch_of.get(c, (-1, -1))[1] == tid and s0 <= launch_of[c][0] <= e0
               for (_, c) in nccl_k):
            taken += 1
    colls = len(nccl_ranges) + len(nccl_k) - taken
    want = {"kernel": len(kern), "memcpy": len(cpy), "memset": len(mset), "api": len(api),
            "marker": len(ranges) + len(marks), "collective": colls}
    got = info["events_by_kind"]
    assert all(got[k] == v for k, v in want.items()), (t, got, want)
    assert info["events"] == sum(want.values()), (t, info["events"], want)
    assert len(kern) > 0 and len(cpy) > 0 and len(mset) > 0 and len(nccl_ranges) > 0, want
    assert len(nccl_k) - taken > 0, "the fixture has an NCCL kernel outside any NCCL range"
    # kernels by name (as traced: args.full_name where the slice shows it shortened): count
    # and device time, as dpro-export writes them
    ev = json.load(open(t + ".chrome.json"))["traceEvents"]
    xs = [e for e in ev if e.get("ph") == "X"]
    dk = [e for e in xs if e.get("cat") in ("kernel", "collective")]
    traced = {id(e): e.get("args", {}).get("full_name", e["name"]) for e in dk}
    assert collections.Counter(traced[id(e)] for e in dk) == \
        collections.Counter(n for (n, _, _) in kern), (t, "kernel names")
    for name in {n for (n, _, _) in kern}:
        w = sum(d for (n, d, _) in kern if n == name) / 1000.0
        g = sum(e["dur"] for e in dk if traced[id(e)] == name)
        assert abs(g - w) < 0.002 * len(kern), (t, name, g, w)
    cb = sum(e["args"].get("bytes", 0) for e in xs if e.get("cat") == "memcpy")
    sb = sum(e["args"].get("bytes", 0) for e in xs if e.get("cat") == "memset")
    assert cb == sum(b for (b, _) in cpy) and sb == sum(b for (b, _) in mset), (t, cb, sb)
    # every device op joined to its call (one launch flow each)
    dev = {c for (_, _, c) in kern} | {c for (_, c) in cpy} | {c for (_, c) in mset}
    flows = sum(1 for e in ev if e.get("ph") == "s" and e.get("cat") == "launch")
    assert flows == len(dev & set(launch_of)) == len(dev), (t, flows, len(dev))
    # collectives: NCCL's payload gives comm and bytes, numbered per comm from 0
    cs = [e for e in xs if e.get("cat") == "collective"]
    pay = [json.loads(r[6]) for r in nccl_ranges]
    comm = {"%x" % p["NCCL communicator ID"] for p in pay}
    ar = [e for e in cs if e["args"].get("comm") in comm]
    assert len(ar) == len(nccl_ranges), (t, len(ar), len(nccl_ranges))
    assert sorted(e["args"]["seq"] for e in ar) == list(range(len(ar))), (t, ar)
    assert all(e["args"]["bytes"] == pay[0]["Message size [bytes]"] for e in ar), (t, ar)
    nv = collections.Counter(e["name"] for e in xs if e.get("cat") == "nvtx")
    assert nv == collections.Counter(r[3] for r in ranges), (t, nv, ranges)
assert ranks == set(range(len(procs))), ranks
PY
}

# one export per rank
"$b/tools/dpro-import" nsys "$tmp/in/rank0.sqlite" "$tmp/in/rank1.sqlite" -o "$tmp/o1" \
    2> "$tmp/o1.err"
ok test $? -eq 0
ok grep -q 'rank 1 of 2: 31 device operations' "$tmp/o1.err"
ok check "$tmp/o1" "$tmp/in/rank0.sqlite" "$tmp/in/rank1.sqlite"
# the two ranks replay together, every collective matched across them
"$b/tools/dpro-replay" "$tmp/o1" > "$tmp/o1.replay" 2>&1
ok test $? -eq 0
# (per rank: 3 all-reduces from NVTX, 1 broadcast from its kernel)
ok grep -q '2 of 2 ranks.* 4 collectives' "$tmp/o1.replay"
ok grep -q 'iterations compared: 2' "$tmp/o1.replay"

# both processes in one export: one trace each; the helper process without device ops is
# named in a warning, not a rank (--allow-empty makes it one)
"$b/tools/dpro-import" -q nsys "$tmp/in/both.sqlite" -o "$tmp/o2" 2> "$tmp/o2.err"
ok test $? -eq 0
ok grep -q 'warning: .*both.sqlite: 1 processes made CUDA API calls but ran no device operation.*pid 4199$' "$tmp/o2.err"
ok test "$(wc -l < "$tmp/o2.err")" -eq 1
ok check "$tmp/o2" "$tmp/in/both.sqlite"
"$b/tools/dpro-import" -q --allow-empty nsys "$tmp/in/both.sqlite" -o "$tmp/o4" 2> "$tmp/o4.err"
ok test $? -eq 0
ok test "$(ls "$tmp/o4" | wc -l)" -eq 3
ok test -f "$tmp/o4/rank2-node7-4199.dpro"

# bad input: exit 1, the file and what is wrong named, no trace left behind
bad() {
    name=$1 want=$2
    "$b/tools/dpro-import" nsys "$tmp/$name" -o "$tmp/bad-$name" 2> "$tmp/$name.err"
    rc=$?
    test $rc -eq 1 || { echo "$name: exit $rc" >&2; return 1; }
    grep -q "$tmp/$name: .*$want" "$tmp/$name.err" || { cat "$tmp/$name.err" >&2; return 1; }
    test -z "$(ls -A "$tmp/bad-$name")" || { ls -A "$tmp/bad-$name" >&2; return 1; }
}
echo 'not a database at all' > "$tmp/text.sqlite"
ok bad text.sqlite 'not an SQLite database'
: > "$tmp/empty.sqlite"
ok bad empty.sqlite 'not an Nsight Systems export'
python3 -c "import sqlite3, sys; d = sqlite3.connect(sys.argv[1]); \
d.execute('CREATE TABLE results (x)'); d.commit()" "$tmp/other.sqlite"
ok bad other.sqlite 'not an Nsight Systems export: no StringIds table'
python3 -c "import sqlite3, sys; d = sqlite3.connect(sys.argv[1]); \
d.execute('CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT)'); d.commit()" \
    "$tmp/strings.sqlite"
ok bad strings.sqlite 'none of the CUPTI_ACTIVITY_KIND_KERNEL'
python3 -c "import sqlite3, sys; d = sqlite3.connect(sys.argv[1]); \
d.execute('CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT)'); \
d.execute('CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT, globalPid INT)'); \
d.execute('INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (1, 2, 16777216)'); d.commit()" \
    "$tmp/oldschema.sqlite"
ok bad oldschema.sqlite 'table CUPTI_ACTIVITY_KIND_KERNEL: not the schema Nsight Systems exports'
cp "$tmp/in/rank0.sqlite" "$tmp/backwards.sqlite"
python3 -c "import sqlite3, sys; d = sqlite3.connect(sys.argv[1]); \
d.execute('UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start - 1 WHERE rowid = 3'); d.commit()" \
    "$tmp/backwards.sqlite"
ok bad backwards.sqlite 'table CUPTI_ACTIVITY_KIND_KERNEL, row 3: start [0-9]*, end [0-9]* ns: out of range'
size=$(wc -c < "$tmp/in/rank0.sqlite")
for cut in 100 4096 $((size / 2)) $((size - 1)); do
    head -c "$cut" "$tmp/in/rank0.sqlite" > "$tmp/cut$cut.sqlite"
    ok bad "cut$cut.sqlite" 'damaged or truncated SQLite data'
done
# one bad file among good ones: the good ones are imported, the exit says one was not
"$b/tools/dpro-import" -q nsys "$tmp/text.sqlite" "$tmp/in/rank1.sqlite" -o "$tmp/o3" \
    2> "$tmp/o3.err"
ok test $? -eq 1
ok test "$(ls "$tmp/o3" | wc -l)" -eq 1

echo "test_import_nsys: $pass passed, $fail failed"
test $fail -eq 0
