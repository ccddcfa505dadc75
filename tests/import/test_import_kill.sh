#!/bin/sh
# An import killed at any moment leaves no trace that reads as whole unless it is whole:
# dpro-import of 16 ranks (one 2.x Kineto file of 300 steps copied as ranks 0..15 by
# copy_ranks.py) is killed (SIGKILL) after 0 to 0.6 s, --jobs 1 and 2 in turn. Then every
# file left in the output directory is either a trace under its final name that dpro-info
# reads without a word of an early end (its 14,102 events, no bad batch), or a hidden
# temporary one that dpro-info refuses or says ends early. A whole import after the kills
# (over what they left) gives the 16 traces. And a trace is synced once: the import's
# fsync/fdatasync calls (the synccount shim) are one a file, and one of the directory.
set -u
b=${top_builddir:-.}
s=${top_srcdir:-.}
shim="$b/tests/import/.libs/libsynccount.so"
[ -f "$shim" ] || { echo "test_import_kill: $shim not built" >&2; exit 99; }
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
export ASAN_OPTIONS
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
python3 "$s/tests/import/gen_kineto.py" 2.x "$tmp/k.json" --steps 300 || exit 99
python3 "$s/tests/import/copy_ranks.py" "$tmp/k.json" "$tmp/in" 16 --plain || exit 99
fail=0
# silent: dpro-info reads FILE without a word of an early end
silent() {
    "$b/tools/dpro-info" "$1" --json > "$tmp/info.json" 2> "$tmp/info.err" &&
        ! grep -q "ends early\|did not close\|cut short" "$tmp/info.err"
}
# all: the file dpro-info just read holds every event, no bad batch
all() {
    python3 -c 'import json,sys; f=json.load(open(sys.argv[1]))["files"]
sys.exit(0 if len(f) == 1 and f[0]["events"] == 14102 and f[0]["bad_batches"] == 0 else 1)' \
        "$tmp/info.json"
}
kills=0
for jobs in 1 2; do
    for d in 0 0.05 0.1 0.15 0.2 0.3 0.4 0.6; do
        out="$tmp/out-$jobs-$d"
        "$b/tools/dpro-import" kineto "$tmp"/in/rank*.json -o "$out" -q --jobs $jobs &
        pid=$!
        sleep $d
        kill -9 $pid 2>/dev/null && kills=$((kills + 1))
        wait $pid 2>/dev/null
        for f in "$out"/* "$out"/.dpro-import-*; do
            [ -e "$f" ] || continue
            case "$f" in
            *.dpro)
                { silent "$f" && all; } || {
                    echo "FAIL: jobs $jobs, killed at $d s: $f is not a whole trace" >&2
                    fail=1; } ;;
            */.dpro-import-*.tmp)
                # refused, or said to end early, or whole (killed before its rename)
                if silent "$f" && ! all; then
                    echo "FAIL: jobs $jobs, killed at $d s: $f reads as whole but is not" >&2
                    fail=1
                fi ;;
            *)
                echo "FAIL: jobs $jobs, killed at $d s: unexpected file $f" >&2
                fail=1 ;;
            esac
        done
    done
done
echo "test_import_kill: $kills of 16 imports killed before their end"
[ "$kills" -ge 4 ] || { echo "test_import_kill: too few imports killed to tell (the machine is fast)" >&2; }
# a whole import over what a kill left
out="$tmp/out-2-0.1"
new_dir=0
[ -d "$out" ] || new_dir=1 # a kill before the directory's creation leaves none
LD_PRELOAD="$shim" SYNCCOUNT_OUT="$tmp/count" "$b/tools/dpro-import" kineto "$tmp"/in/rank*.json \
    -o "$out" -q --jobs 2 || { echo "FAIL: the import after the kill exited $?" >&2; exit 1; }
n=0
for f in "$out"/*.dpro; do
    { silent "$f" && all; } || { echo "FAIL: $f not whole after a whole import" >&2; fail=1; }
    n=$((n + 1))
done
[ "$n" -eq 16 ] || { echo "FAIL: $n traces, not 16" >&2; fail=1; }
syncs=$(sed -n 1p "$tmp/count")
dirs=$(sed -n 2p "$tmp/count")
echo "test_import_kill: 16 files imported with $syncs fsync/fdatasync calls of files, $dirs of the directory"
[ "$syncs" -eq 16 ] || { echo "FAIL: $syncs syncs for 16 traces, not one each" >&2; fail=1; }
[ "$dirs" = $((1 + new_dir)) ] ||
    { echo "FAIL: $dirs directory syncs, not $((1 + new_dir))" >&2; fail=1; }
exit $fail
