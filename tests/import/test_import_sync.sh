#!/bin/sh
# dpro-import syncs a trace to disk once, at its close, not as it writes it: importing one
# 2.x Kineto file (300 steps, 14,102 events), its fsync and fdatasync calls of files,
# counted by the synccount shim (LD_PRELOAD), are SYNC_MAX, 1 (the trace is written under a
# temporary name, no -wal, the commit of its mark of a whole trace synced), where syncing as
# it wrote made 17 (the file's creation, each commit's checkpoint) and WAL mode to the close
# 8. The output directory is synced exactly once, after the rename (without it a machine
# crash could leave the trace under its temporary name), and the directory above it once,
# when dpro-import creates it (without that a crash could lose the new directory); an
# existing output directory adds no sync. The trace is whole: dpro-info
# reads every event of it, in batches none of which is bad. When that directory sync fails
# (the shim fails it with EIO), dpro-import says so naming the directory and exits 1, and
# the trace is still there, whole.
set -u
b=${top_builddir:-.}
s=${top_srcdir:-.}
SYNC_MAX=1
shim="$b/tests/import/.libs/libsynccount.so"
[ -f "$shim" ] || { echo "test_import_sync: $shim not built" >&2; exit 99; }
# a sanitizer build's runtime must come first among the libraries; the shim only counts
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
export ASAN_OPTIONS
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
python3 "$s/tests/import/gen_kineto.py" 2.x "$tmp/k.json" --steps 300 || exit 99
LD_PRELOAD="$shim" SYNCCOUNT_OUT="$tmp/count" "$b/tools/dpro-import" kineto "$tmp/k.json" \
    -o "$tmp/out" -q || { echo "FAIL: dpro-import exited $?" >&2; exit 1; }
n=$(sed -n 1p "$tmp/count") && dirs=$(sed -n 2p "$tmp/count") && [ -n "$dirs" ] ||
    { echo "FAIL: the shim wrote no count" >&2; exit 1; }
"$b/tools/dpro-info" "$tmp"/out/*.dpro --json > "$tmp/info.json" || {
    echo "FAIL: dpro-info cannot read the trace" >&2; exit 1; }
whole=$(python3 -c 'import json,sys; f=json.load(open(sys.argv[1]))["files"]
print("yes" if len(f) == 1 and f[0]["events"] == 14102 and f[0]["batches"] >= 1 and
      f[0]["bad_batches"] == 0 else "no: %s" % f)' "$tmp/info.json")
echo "test_import_sync: $n fsync/fdatasync calls of files and $dirs of the directory importing one trace; whole: $whole"
[ "$whole" = yes ] || { echo "FAIL: the trace is not whole" >&2; exit 1; }
[ "$n" -ge 1 ] || { echo "FAIL: the trace was never synced" >&2; exit 1; }
[ "$n" -le "$SYNC_MAX" ] || { echo "FAIL: $n syncs, at most $SYNC_MAX" >&2; exit 1; }
[ "$dirs" -eq 2 ] || {
    echo "FAIL: $dirs directory syncs, not 2 (the new output directory's parent, then it)" >&2
    exit 1; }
# into the existing directory: only its own sync after the rename
LD_PRELOAD="$shim" SYNCCOUNT_OUT="$tmp/count" "$b/tools/dpro-import" kineto "$tmp/k.json" \
    -o "$tmp/out" -q || { echo "FAIL: dpro-import into an existing directory exited $?" >&2; exit 1; }
dirs=$(sed -n 2p "$tmp/count")
[ "$dirs" -eq 1 ] || { echo "FAIL: $dirs directory syncs into an existing directory, not 1" >&2; exit 1; }
# two new levels: each one's parent synced, then the output directory
LD_PRELOAD="$shim" SYNCCOUNT_OUT="$tmp/count" "$b/tools/dpro-import" kineto "$tmp/k.json" \
    -o "$tmp/new1/new2" -q || { echo "FAIL: dpro-import into new levels exited $?" >&2; exit 1; }
dirs=$(sed -n 2p "$tmp/count")
[ "$dirs" -eq 3 ] || { echo "FAIL: $dirs directory syncs creating two levels, not 3" >&2; exit 1; }
# the directory's sync fails: said, exit 1, the trace kept
rm -rf "$tmp/out2"
mkdir "$tmp/out2"
LD_PRELOAD="$shim" SYNCCOUNT_FAIL_DIRS=1 "$b/tools/dpro-import" kineto "$tmp/k.json" \
    -o "$tmp/out2" -q 2> "$tmp/err"
rc=$?
cat "$tmp/err"
[ "$rc" -eq 1 ] || { echo "FAIL: a failed directory sync exited $rc, not 1" >&2; exit 1; }
grep -q "$tmp/out2: cannot sync the directory" "$tmp/err" ||
    { echo "FAIL: the failed directory sync was not said with the directory" >&2; exit 1; }
"$b/tools/dpro-info" "$tmp"/out2/*.dpro --json > "$tmp/info2.json" ||
    { echo "FAIL: the trace is not kept after a failed directory sync" >&2; exit 1; }
# a new output directory whose parent cannot be synced: said, exit 1, nothing imported
LD_PRELOAD="$shim" SYNCCOUNT_FAIL_DIRS=1 "$b/tools/dpro-import" kineto "$tmp/k.json" \
    -o "$tmp/out3" -q 2> "$tmp/err3"
rc=$?
cat "$tmp/err3"
[ "$rc" -eq 1 ] && grep -q "cannot create $tmp/out3" "$tmp/err3" ||
    { echo "FAIL: a new directory's failed parent sync: rc $rc, not said" >&2; exit 1; }
exit 0
