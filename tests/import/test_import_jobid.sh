#!/bin/sh
# dpro-import's job ids come from what the ranks of one job share (world size, backend,
# NCCL version, Kineto's base time, the hour the trace began in): the ranks of one job get
# one id whether imported together or one by one; files of jobs of other world sizes, or
# of unrelated jobs of the same size (other times), even under the same file names, get
# their own; a job of one rank adds its own trace id, host and pid; --job-id is kept as
# given.
set -u
b=${top_builddir:-.}
imp="$b/tools/dpro-import"
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { if "$@"; then :; else fail=1; echo "FAIL: $*" >&2; fi; }

trace() { # file rank world_size pid ts(us) [base_ns]
    mkdir -p "$(dirname "$1")"
    cat > "$1" <<JSON
{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": $4, "tid": $4,
 "ts": $5, "dur": 5},
 {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": $(($5 + 2)), "dur": 3,
  "args": {"device": 0, "stream": 7, "correlation": 1}}],
 "distributedInfo": {"backend": "nccl", "rank": $2, "world_size": $3, "nccl_version": "2.17.1"},
 "baseTimeNanoseconds": ${6:-1711964646000000000}}
JSON
}
# job a: 2 ranks 0.4 s apart; job b: 4 ranks; job c: 2 ranks, the same names as a's, 5 hours
# later; job d: 2 ranks, a's times but another quarter's base time
trace "$tmp/a/rank0.json" 0 2 10 4458676388068
trace "$tmp/a/rank1.json" 1 2 11 4458676388468
trace "$tmp/b/rank0.json" 0 4 12 4458676388068
trace "$tmp/c/rank0.json" 0 2 13 4476676388068
trace "$tmp/c/rank1.json" 1 2 14 4476676388468
trace "$tmp/d/rank0.json" 0 2 15 4458676388068 1704067200000000000
job_ids() { # dir: the job_id of each trace, sorted by name
    python3 - "$1" <<'PY'
import glob, sqlite3, sys
for p in sorted(glob.glob(sys.argv[1] + "/*.dpro")):
    print(dict(sqlite3.connect(p).execute("select key, value from meta"))["job_id"])
PY
}
one() { # file out-dir: imports it alone, prints its job id
    "$imp" kineto -q "$1" -o "$2" || echo "import of $1 failed" >&2
    job_ids "$2"
}

"$imp" kineto -q "$tmp/a/rank0.json" "$tmp/a/rank1.json" "$tmp/b/rank0.json" -o "$tmp/o1"
ok test $? -eq 0
# rank0-import-10 (a, world 2), rank0-import-12 (b, world 4), rank1-import-11 (a, world 2)
set -- $(job_ids "$tmp/o1")
ok test $# -eq 3
ok test "$1" = "$3"    # the two ranks of the 2-rank job: one id
ok test "$1" != "$2"   # the 4-rank job's file: its own
case "$1$2" in kineto-*kineto-*) ;; *) ok false ;; esac
together=$1

# one by one: the ranks of job a agree, with each other and with the import together
a0=$(one "$tmp/a/rank0.json" "$tmp/oa0") a1=$(one "$tmp/a/rank1.json" "$tmp/oa1")
ok test -n "$a0"
ok test "$a0" = "$a1"
ok test "$a0" = "$together"
# unrelated jobs of the same world size and the same file names: other ids
c0=$(one "$tmp/c/rank0.json" "$tmp/oc0") c1=$(one "$tmp/c/rank1.json" "$tmp/oc1")
d0=$(one "$tmp/d/rank0.json" "$tmp/od0")
ok test "$c0" = "$c1"
ok test "$c0" != "$a0"
ok test "$d0" != "$a0"
ok test "$d0" != "$c0"

# a job of one rank: two runs of one configuration within the hour differ by pid
trace "$tmp/s1.json" 0 1 20 4458676388068
trace "$tmp/s2.json" 0 1 21 4458676390068
ok test "$(one "$tmp/s1.json" "$tmp/os1")" != "$(one "$tmp/s2.json" "$tmp/os2")"

"$imp" kineto -q --job-id myjob "$tmp/a/rank0.json" "$tmp/b/rank0.json" -o "$tmp/o2"; ok test $? -eq 0
ok test "$(job_ids "$tmp/o2" | sort -u)" = myjob
exit $fail
