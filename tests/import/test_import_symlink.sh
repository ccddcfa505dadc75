#!/bin/sh
# dpro-import -o through symbolic links: a DIR that is a link to a directory, or lies
# under one (clusters' /scratch -> /lustre/...), gets its traces, readable by dpro-info; a
# symbolic link at a trace's own name is refused with exit 1 and an error naming it, and
# is left as it was (neither replaced nor followed), as is what it points to.
set -u
b=${top_builddir:-.}
imp="$b/tools/dpro-import"
info="$b/tools/dpro-info"
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { if "$@"; then :; else fail=1; echo "FAIL: $*" >&2; fi; }

cat > "$tmp/t.json" <<'JSON'
{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 10, "tid": 10,
 "ts": 100, "dur": 5},
 {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 102, "dur": 3,
  "args": {"device": 0, "stream": 7, "correlation": 1}}],
 "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1}}
JSON
name=rank0-import-10.dpro
mkdir "$tmp/real" && ln -s real "$tmp/link" || exit 99

# a link to a directory as DIR, and a DIR to be created under one
for out in "$tmp/link" "$tmp/link/sub/out"; do
    "$imp" kineto -q "$tmp/t.json" -o "$out" 2> "$tmp/err"
    ok test $? -eq 0
    ok test -s "$tmp/real/${out#"$tmp/link"}/$name"
    ok test ! -s "$tmp/err"
    "$info" "$out/$name" > /dev/null 2>&1
    ok test $? -eq 0
done

# a link at the trace's name, to a file and dangling: refused, kept
echo victim > "$tmp/victim"
for target in ../victim ../nowhere; do
    rm -f "$tmp/real/$name"
    ln -s "$target" "$tmp/real/$name" || exit 99
    "$imp" kineto -q "$tmp/t.json" -o "$tmp/link" 2> "$tmp/err"
    ok test $? -eq 1
    grep -q "$name is a symbolic link" "$tmp/err" || { fail=1; echo "FAIL: no error naming the link:" >&2; cat "$tmp/err" >&2; }
    ok test -L "$tmp/real/$name"
    ok test "$(readlink "$tmp/real/$name")" = "$target"
    ok test "$(cat "$tmp/victim")" = victim
    ok test ! -e "$tmp/nowhere"
    # no temporary trace left behind
    ok test -z "$(ls -A "$tmp/real" | grep -v -e "^$name\$" -e '^sub$')"
done
[ $fail = 0 ] && echo "test_import_symlink: links to directories followed, a link at a trace refused"
exit $fail
