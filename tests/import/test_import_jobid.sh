#!/bin/sh
# dpro-import's default job id is a hash of the world size and the identity (content hash)
# of the files imported together: the ranks of one job imported together get one id
# whatever the order they are named in, files of another world size imported with them
# another; two jobs of one configuration (world size, backend, NCCL version, base time, the
# same hour, the same file names) imported separately get two; the same files imported
# again, under other names, get their id again; ranks imported one by one get one id each,
# and one --job-id joins them (kept as given).
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
# later; job d: 2 ranks, a's times but another quarter's base time; job e: a's configuration
# and file names, started 3 s after it (the same hour, the same base time)
trace "$tmp/a/rank0.json" 0 2 10 4458676388068
trace "$tmp/a/rank1.json" 1 2 11 4458676388468
trace "$tmp/b/rank0.json" 0 4 12 4458676388068
trace "$tmp/c/rank0.json" 0 2 13 4476676388068
trace "$tmp/c/rank1.json" 1 2 14 4476676388468
trace "$tmp/d/rank0.json" 0 2 15 4458676388068 1704067200000000000
trace "$tmp/e/rank0.json" 0 2 16 4458679388068
trace "$tmp/e/rank1.json" 1 2 17 4458679388468
job_ids() { # dir: the job_id of each trace, sorted by name
    python3 - "$1" <<'PY'
import glob, sqlite3, sys
for p in sorted(glob.glob(sys.argv[1] + "/*.dpro")):
    print(dict(sqlite3.connect(p).execute("select key, value from meta"))["job_id"])
PY
}
imp_ids() { # out-dir file...: imports the files together, prints their job ids by name
    o=$1
    shift
    "$imp" kineto -q "$@" -o "$o" || echo "import of $* failed" >&2
    job_ids "$o"
}

set -- $(imp_ids "$tmp/o1" "$tmp/a/rank0.json" "$tmp/a/rank1.json" "$tmp/b/rank0.json")
# rank0-import-10 (a, world 2), rank0-import-12 (b, world 4), rank1-import-11 (a, world 2)
ok test $# -eq 3
ok test "$1" = "$3"    # the two ranks of the 2-rank job: one id
ok test "$1" != "$2"   # the 4-rank job's file: its own
case "$1$2" in kineto-*kineto-*) ;; *) ok false ;; esac
a=$1
# named in another order: the same ids
ok test "$(imp_ids "$tmp/o1r" "$tmp/b/rank0.json" "$tmp/a/rank1.json" "$tmp/a/rank0.json" |
    tr '\n' ' ')" = "$(job_ids "$tmp/o1" | tr '\n' ' ')"

# job a alone, again, from copies under other names: its content, its id
mkdir "$tmp/copy" && cp "$tmp/a/rank0.json" "$tmp/copy/x.json" && cp "$tmp/a/rank1.json" "$tmp/copy/y.json"
set -- $(imp_ids "$tmp/oa" "$tmp/a/rank0.json" "$tmp/a/rank1.json")
ok test "$1" = "$2"
set -- $(imp_ids "$tmp/oa2" "$tmp/copy/x.json" "$tmp/copy/y.json")
ok test "$1" = "$2"
ok test -n "$1"
a_alone=$1
ok test "$(job_ids "$tmp/oa" | sed -n 1p)" = "$a_alone"
# unrelated jobs of the same world size and file names: their own ids, e's within the
# same hour and base time as a's
set -- $(imp_ids "$tmp/oc" "$tmp/c/rank0.json" "$tmp/c/rank1.json")
ok test "$1" = "$2"
c=$1
set -- $(imp_ids "$tmp/oe" "$tmp/e/rank0.json" "$tmp/e/rank1.json")
ok test "$1" = "$2"
e=$1
d=$(imp_ids "$tmp/od" "$tmp/d/rank0.json")
for x in "$c" "$d" "$e"; do
    ok test "$x" != "$a_alone"
done
ok test "$c" != "$e"
ok test "$d" != "$c"
ok test "$d" != "$e"

# one by one: an id each; one --job-id joins them
ok test "$(imp_ids "$tmp/oa0" "$tmp/a/rank0.json")" != "$(imp_ids "$tmp/oa1" "$tmp/a/rank1.json")"
"$imp" kineto -q --job-id runA "$tmp/a/rank0.json" -o "$tmp/oj"; ok test $? -eq 0
"$imp" kineto -q --job-id runA "$tmp/a/rank1.json" -o "$tmp/oj"; ok test $? -eq 0
ok test "$(job_ids "$tmp/oj" | tr '\n' ' ')" = "runA runA "

# a job of one rank: two runs of one configuration within the hour differ
trace "$tmp/s1.json" 0 1 20 4458676388068
trace "$tmp/s2.json" 0 1 21 4458676390068
ok test "$(imp_ids "$tmp/os1" "$tmp/s1.json")" != "$(imp_ids "$tmp/os2" "$tmp/s2.json")"

"$imp" kineto -q --job-id myjob "$tmp/a/rank0.json" "$tmp/b/rank0.json" -o "$tmp/o2"; ok test $? -eq 0
ok test "$(job_ids "$tmp/o2" | sort -u)" = myjob
exit $fail
