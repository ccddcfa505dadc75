#!/bin/sh
# run-reader-fuzz.sh [SECONDS]: builds tests/fuzz/fuzz_trace_reader with clang
# -fsanitize=fuzzer,address,undefined over libdprotrace's sources and runs it for SECONDS
# (default 60, or $FUZZ_SECONDS) from seeds gen_traces writes (one small rank trace, one cut
# short) and the damaged traces that found defects (../shared/repro/*.dpro, and
# tests/fuzz/reader-corpus where the fuzzer found one). Exit 0: no crash; 1: a crash
# (reproducer left in $FUZZ_OUT, default ${TMPDIR:-/tmp}/dpro-fuzz-reader); 77: clang/libFuzzer
# missing or the tree not built. `make fuzz-reader`.
set -u
s=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
b=${top_builddir:-$s}
secs=${1:-${FUZZ_SECONDS:-60}}
out=${FUZZ_OUT:-${TMPDIR:-/tmp}/dpro-fuzz-reader}
CLANG=${CLANG:-clang}

command -v "$CLANG" >/dev/null 2>&1 || { echo "run-reader-fuzz: no clang: skipped"; exit 77; }
[ -f "$b/schemas/trace.pb-c.c" ] && [ -x "$b/tests/replay/gen_traces" ] ||
    { echo "run-reader-fuzz: tree not built (make check TESTS=): skipped"; exit 77; }
mkdir -p "$out/corpus" "$out/seeds" || exit 99
echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { return 0; }' \
    > "$out/probe.c"
if ! "$CLANG" -fsanitize=fuzzer "$out/probe.c" -o "$out/probe" 2>/dev/null; then
    echo "run-reader-fuzz: clang has no libFuzzer: skipped"
    exit 77
fi
rm -f "$out/probe.c" "$out/probe"
rm -rf "$out/seeds"/*
"$b/tests/replay/gen_traces" "$out/seeds/a" --ranks 1 --iters 2 --ops 4 --buckets 1 \
    > /dev/null || exit 99
"$b/tests/replay/gen_traces" "$out/seeds/b" --ranks 2 --iters 2 --ops 3 --buckets 1 \
    --cut 1:0.5 > /dev/null || exit 99
for f in "$out"/seeds/*/*.dpro; do
    cp "$f" "$out/corpus/seed-$(basename "$(dirname "$f")")-$(basename "$f")" || exit 99
done
for f in "$s"/../shared/repro/*.dpro "$s"/tests/fuzz/reader-corpus/*; do
    [ -f "$f" ] && cp "$f" "$out/corpus/"
done
deflate_libs=
grep -q '^#define HAVE_LIBDEFLATE 1' "$b/config.h" 2>/dev/null &&
    deflate_libs=$(pkg-config --libs libdeflate 2>/dev/null || echo -ldeflate)
"$CLANG" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I"$b" -I"$s/schemas" -I"$b/schemas" -I"$s/common" $(pkg-config --cflags libprotobuf-c) \
    "$s/tests/fuzz/fuzz_trace_reader.c" "$s"/schemas/*.c "$b/schemas/trace.pb-c.c" \
    "$b/schemas/trace_sql.c" -o "$out/fuzz_trace_reader" \
    $(pkg-config --libs libprotobuf-c) -lsqlite3 $deflate_libs -lz || exit 1
"$out/fuzz_trace_reader" "$out/corpus" -max_total_time="$secs" -max_len=262144 -timeout=20 \
    -rss_limit_mb=1024 -artifact_prefix="$out/" -print_final_stats=1 2> "$out/fuzz.log"
rc=$?
tail -n 12 "$out/fuzz.log"
if [ $rc -ne 0 ]; then
    echo "run-reader-fuzz: the fuzzer found a problem: see $out/fuzz.log and $out/crash-*"
    exit 1
fi
exit 0
