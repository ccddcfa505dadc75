#!/bin/sh
# run-batch-fuzz.sh [SECONDS]: builds tests/fuzz/fuzz_batch_decode with clang
# -fsanitize=fuzzer,address,undefined over the codec sources and runs it for SECONDS
# (default 60, or $FUZZ_SECONDS), then tests/fuzz/fuzz_ncclname (the NCCL kernel-name
# parser, replay/ncclname.c) and tests/fuzz/fuzz_cpulist (the host_cpu_list parser,
# replay/hostshare_cpus.c) for SECONDS / 4 each, then tests/fuzz/fuzz_trace_reader (the trace
# reader on whole trace files) for SECONDS, seeded by gen_traces (a small rank trace, one
# cut short) and the damaged traces that found defects (../shared/repro/*.dpro,
# tests/fuzz/reader-corpus). Exit 0: no crash; 1: a crash (reproducer left in
# $FUZZ_OUT, default ${TMPDIR:-/tmp}/dpro-fuzz-batch); 77: clang/libFuzzer missing or the
# tree not built (the generated trace.pb-c.c comes from the build). `make fuzz-batch`.
set -u
s=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
b=${top_builddir:-$s}
secs=${1:-${FUZZ_SECONDS:-60}}
out=${FUZZ_OUT:-${TMPDIR:-/tmp}/dpro-fuzz-batch}
CLANG=${CLANG:-clang}

command -v "$CLANG" >/dev/null 2>&1 || { echo "run-batch-fuzz: no clang: skipped"; exit 77; }
[ -f "$b/schemas/trace.pb-c.c" ] && [ -x "$b/tests/replay/gen_traces" ] ||
    { echo "run-batch-fuzz: tree not built (make check TESTS=): skipped"; exit 77; }
mkdir -p "$out/corpus" || exit 99
echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { return 0; }' \
    > "$out/probe.c"
if ! "$CLANG" -fsanitize=fuzzer "$out/probe.c" -o "$out/probe" 2>/dev/null; then
    echo "run-batch-fuzz: clang has no libFuzzer: skipped"
    exit 77
fi
rm -f "$out/probe.c" "$out/probe"
deflate_libs=
grep -q '^#define HAVE_LIBDEFLATE 1' "$b/config.h" 2>/dev/null &&
    deflate_libs=$(pkg-config --libs libdeflate 2>/dev/null || echo -ldeflate)
"$CLANG" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I"$b" -I"$s/schemas" -I"$b/schemas" -I"$s/common" $(pkg-config --cflags libprotobuf-c) \
    "$s/tests/fuzz/fuzz_batch_decode.c" "$s/schemas/codec.c" "$s/schemas/codec_decode.c" \
    "$s/schemas/codec_pack.c" \
    "$s/schemas/names.c" "$s/schemas/deflate.c" "$b/schemas/trace.pb-c.c" \
    -o "$out/fuzz_batch_decode" $(pkg-config --libs libprotobuf-c) $deflate_libs -lz || exit 1
"$out/fuzz_batch_decode" "$out/corpus" -max_total_time="$secs" -max_len=4096 -timeout=10 \
    -rss_limit_mb=1024 -artifact_prefix="$out/" -print_final_stats=1 2> "$out/fuzz.log"
rc=$?
tail -n 12 "$out/fuzz.log"
if [ $rc -ne 0 ]; then
    echo "run-batch-fuzz: the fuzzer found a problem: see $out/fuzz.log and $out/crash-*"
    exit 1
fi
"$CLANG" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I"$s/replay" -I"$s/schemas" "$s/tests/fuzz/fuzz_ncclname.c" "$s/replay/ncclname.c" \
    -o "$out/fuzz_ncclname" || exit 1
mkdir -p "$out/corpus-ncclname" || exit 99
printf 'ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)' \
    > "$out/corpus-ncclname/old"
printf '_Z39ncclDevKernel_AllReduce_Sum_f32_TREE_LL19ncclDevKernelArgs4K' \
    > "$out/corpus-ncclname/new"
"$out/fuzz_ncclname" "$out/corpus-ncclname" -max_total_time=$((secs / 4 + 1)) -max_len=256 \
    -timeout=10 -artifact_prefix="$out/" -print_final_stats=1 2> "$out/fuzz-ncclname.log"
rc=$?
tail -n 4 "$out/fuzz-ncclname.log"
if [ $rc -ne 0 ]; then
    echo "run-batch-fuzz: the name fuzzer found a problem: see $out/fuzz-ncclname.log"
    exit 1
fi
"$CLANG" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I"$b" -I"$s/replay" -I"$s/schemas" -I"$b/schemas" -I"$s/common" -I"$s" \
    "$s/tests/fuzz/fuzz_cpulist.c" "$s/replay/hostshare_cpus.c" -o "$out/fuzz_cpulist" || exit 1
mkdir -p "$out/corpus-cpulist" || exit 99
printf '0-3,8-11' > "$out/corpus-cpulist/list"
printf '8191' > "$out/corpus-cpulist/last"
"$out/fuzz_cpulist" "$out/corpus-cpulist" -max_total_time=$((secs / 4 + 1)) -max_len=4096 \
    -timeout=10 -artifact_prefix="$out/cpulist-" -print_final_stats=1 2> "$out/fuzz-cpulist.log"
rc=$?
tail -n 4 "$out/fuzz-cpulist.log"
if [ $rc -ne 0 ]; then
    echo "run-batch-fuzz: the cpulist fuzzer found a problem: see $out/fuzz-cpulist.log"
    exit 1
fi
mkdir -p "$out/corpus-reader" "$out/seeds" || exit 99
rm -rf "$out/seeds"/*
"$b/tests/replay/gen_traces" "$out/seeds/a" --ranks 1 --iters 2 --ops 4 --buckets 1 \
    > /dev/null || exit 99
"$b/tests/replay/gen_traces" "$out/seeds/b" --ranks 2 --iters 2 --ops 3 --buckets 1 \
    --cut 1:0.5 > /dev/null || exit 99
for f in "$out"/seeds/*/*.dpro; do
    cp "$f" "$out/corpus-reader/seed-$(basename "$(dirname "$f")")-$(basename "$f")" || exit 99
done
for f in "$s"/../shared/repro/*.dpro "$s"/tests/fuzz/reader-corpus/*; do
    [ -f "$f" ] && cp "$f" "$out/corpus-reader/"
done
"$CLANG" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I"$b" -I"$s/schemas" -I"$b/schemas" -I"$s/common" $(pkg-config --cflags libprotobuf-c) \
    "$s/tests/fuzz/fuzz_trace_reader.c" "$s"/schemas/*.c "$b/schemas/trace.pb-c.c" \
    "$b/schemas/trace_sql.c" -o "$out/fuzz_trace_reader" \
    $(pkg-config --libs libprotobuf-c) -lsqlite3 $deflate_libs -lz || exit 1
"$out/fuzz_trace_reader" "$out/corpus-reader" -max_total_time="$secs" -max_len=262144 -len_control=0 \
    -timeout=20 -rss_limit_mb=1024 -artifact_prefix="$out/reader-" -print_final_stats=1 \
    2> "$out/fuzz-reader.log"
rc=$?
tail -n 4 "$out/fuzz-reader.log"
if [ $rc -ne 0 ]; then
    echo "run-batch-fuzz: the reader fuzzer found a problem: see $out/fuzz-reader.log and $out/reader-crash-*"
    exit 1
fi
echo "run-batch-fuzz: no crash in ${secs}s"
