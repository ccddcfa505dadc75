#!/bin/sh
# dpro-import's job ids: files imported together share one per world size. The ranks of
# one job (same world size) get one id; files of jobs of different world sizes imported
# together get distinct ids (replay's --job can then tell them apart); --job-id is kept as
# given.
set -u
b=${top_builddir:-.}
imp="$b/tools/dpro-import"
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { if "$@"; then :; else fail=1; echo "FAIL: $*" >&2; fi; }

trace() { # file rank world_size pid
    cat > "$1" <<JSON
{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": $4, "tid": $4,
 "ts": 1000, "dur": 5}], "distributedInfo": {"rank": $2, "world_size": $3}}
JSON
}
trace "$tmp/a-r0.json" 0 2 10
trace "$tmp/a-r1.json" 1 2 11
trace "$tmp/b-r0.json" 0 4 12
job_ids() { # dir: the job_id of each trace, sorted by name
    python3 - "$1" <<'PY'
import glob, sqlite3, sys
for p in sorted(glob.glob(sys.argv[1] + "/*.dpro")):
    print(dict(sqlite3.connect(p).execute("select key, value from meta"))["job_id"])
PY
}

"$imp" kineto -q "$tmp/a-r0.json" "$tmp/a-r1.json" "$tmp/b-r0.json" -o "$tmp/o1"; ok test $? -eq 0
# rank0-import-10 (world 2), rank0-import-12 (world 4), rank1-import-11 (world 2)
set -- $(job_ids "$tmp/o1")
ok test $# -eq 3
ok test "$1" = "$3"    # the two ranks of the 2-rank job: one id
ok test "$1" != "$2"   # the 4-rank job's file: its own
case "$1$2" in kineto-*kineto-*) ;; *) ok false ;; esac

"$imp" kineto -q --job-id myjob "$tmp/a-r0.json" "$tmp/b-r0.json" -o "$tmp/o2"; ok test $? -eq 0
ok test "$(job_ids "$tmp/o2" | sort -u)" = myjob
exit $fail
