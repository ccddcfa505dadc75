#!/bin/sh
# dpro-import --jobs N imports files in parallel, one thread and one trace per file, and
# writes what --jobs 1 writes: the same file names, byte for byte the same traces (so the
# same dpro-info --json and the same events, dpro-export --kineto), the same exit status and
# the same messages in the same order, bad inputs and a taken name among the files too.
# On the real Kineto traces of ../shared/traces/kineto (a failure where CI=true and they
# are missing, else those are left out) and on synthetic multi-rank jobs (gen_kineto.py).
set -u
b=${top_builddir:-.}
s=${top_srcdir:-.}
real="$s/../shared/traces/kineto"
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/in" "$tmp/out" || exit 99
fail=0 pass=0
ok() { if "$@"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $*" >&2; fi; }
imp="$b/tools/dpro-import"

# import NAME JOBS FILE...: imports into $tmp/out/NAME-JOBS; its exit status in
# NAME-JOBS.rc, its stderr (the directory written as D) in NAME-JOBS.err
import() {
    name=$1 jobs=$2
    shift 2
    out="$tmp/out/$name-$jobs"
    if [ "$jobs" = default ]; then
        "$imp" kineto "$@" -o "$out" 2> "$out.raw"
    else
        "$imp" kineto --jobs "$jobs" "$@" -o "$out" 2> "$out.raw"
    fi
    echo $? > "$out.rc"
    sed "s#$out#D#g" "$out.raw" > "$out.err"
}

# same NAME JOBS: NAME-JOBS holds what NAME-1 holds
same() {
    a="$tmp/out/$1-1" o="$tmp/out/$1-$2"
    cmp -s "$a.rc" "$o.rc" || { echo "$1: exit $(cat "$a.rc") with --jobs 1, $(cat "$o.rc") with $2" >&2; return 1; }
    cmp -s "$a.err" "$o.err" || { diff "$a.err" "$o.err" >&2; return 1; }
    [ "$(ls -A "$a")" = "$(ls -A "$o")" ] || { echo "$1: files differ: $(ls -A "$a") / $(ls -A "$o")" >&2; return 1; }
    for f in "$a"/*.dpro; do
        g="$o/$(basename "$f")"
        cmp "$f" "$g" >&2 || return 1
        "$b/tools/dpro-export" "$f" --kineto -o "$tmp/x.json" 2>/dev/null &&
            "$b/tools/dpro-export" "$g" --kineto -o "$tmp/y.json" 2>/dev/null &&
            cmp "$tmp/x.json" "$tmp/y.json" >&2 || return 1
        rm -f "$tmp/x.json" "$tmp/y.json"
    done
    "$b/tools/dpro-info" --json "$a" | sed "s#$a#D#g" > "$a.info" &&
        "$b/tools/dpro-info" --json "$o" | sed "s#$o#D#g" > "$o.info" &&
        cmp "$a.info" "$o.info" >&2
}

# synthetic jobs: 8 ranks of today's Kineto, 4 of ROCm's, one file damaged, one given twice
n=0
for r in 0 1 2 3 4 5 6 7; do
    python3 "$s/tests/import/gen_kineto.py" 2.x "$tmp/in/k2x-$r.json" --rank $r --world 8 \
        --steps 6 || exit 99
    n=$((n+1))
done
for r in 0 1 2 3; do
    python3 "$s/tests/import/gen_kineto.py" rocm "$tmp/in/rocm-$r.json" --rank $r --world 4 || exit 99
done
head -c 3000 "$tmp/in/k2x-3.json" > "$tmp/in/cut.json"
for j in 1 4 default; do
    import k2x $j "$tmp"/in/k2x-*.json
    import rocm $j "$tmp"/in/rocm-*.json
    import mixed $j "$tmp/in/k2x-0.json" "$tmp/in/cut.json" "$tmp/in/rocm-1.json" "$tmp/in/k2x-0.json" \
        "$tmp/in/rocm-2.json"
done
ok test "$(cat "$tmp/out/k2x-1.rc")" -eq 0
ok test "$(ls "$tmp/out/k2x-1" | grep -c '\.dpro$')" -eq "$n"
ok test "$(cat "$tmp/out/rocm-1.rc")" -eq 0
ok test "$(ls "$tmp/out/rocm-1" | grep -c '\.dpro$')" -eq 4
ok test "$(cat "$tmp/out/mixed-1.rc")" -eq 1
ok test "$(ls -A "$tmp/out/mixed-1" | grep -c '\.dpro$')" -eq 3
ok grep -q "cut.json: not imported" "$tmp/out/mixed-1.err"
ok grep -q "is taken by an earlier input" "$tmp/out/mixed-1.err"
for t in k2x rocm mixed; do
    ok same $t 4
    ok same $t default
done

# the real traces, every one at once
if [ -d "$real" ]; then
    for j in 1 4; do import real $j "$real"/*.json.gz; done
    ok test "$(cat "$tmp/out/real-1.rc")" -eq 0
    ok test "$(ls "$tmp/out/real-1" | grep -c '\.dpro$')" -eq "$(ls "$real"/*.json.gz | wc -l)"
    ok same real 4
elif [ "${CI:-}" = true ]; then
    echo "FAIL: no $real (CI=true: the shared traces must be there)" >&2
    fail=$((fail+1))
else
    echo "no $real: the real traces left out"
fi

# --jobs wants a number from 1 to the limit
for v in 0 -1 x 2x 100000; do
    "$imp" kineto --jobs "$v" "$tmp/in/k2x-0.json" -o "$tmp/bad" 2> "$tmp/bad.err"
    ok test $? -eq 2
    ok grep -q -- "--jobs wants a number" "$tmp/bad.err"
done

echo "$pass passed, $fail failed"
test "$fail" -eq 0
