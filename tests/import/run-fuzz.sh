#!/bin/sh
# run-fuzz.sh [SECONDS]: builds the importers' fuzz targets, tests/fuzz/fuzz_import_kineto
# (the Kineto parser) and tests/fuzz/fuzz_import_et (the execution-trace reader and its
# join), with clang -fsanitize=fuzzer,address and runs each for SECONDS (default 60, or
# $FUZZ_SECONDS) on a corpus of its own seeded from tests/import/fuzz/ (et-*.json: the
# execution-trace seeds). Exit 0: no crash; 1: a crash (the reproducer is
# left in $FUZZ_OUT, default ${TMPDIR:-/tmp}/dpro-fuzz-import); 77: clang or libFuzzer missing, or the
# tree is not built (it links the built schemas/.libs/libdprotrace.so).
# `make fuzz-import` runs it.
set -u
s=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
b=${top_builddir:-$s}
secs=${1:-${FUZZ_SECONDS:-60}}
out=${FUZZ_OUT:-${TMPDIR:-/tmp}/dpro-fuzz-import}
CLANG=${CLANG:-clang}

if ! command -v "$CLANG" >/dev/null 2>&1; then
    echo "run-fuzz: no clang: skipped"
    exit 77
fi
lib="$b/schemas/.libs/libdprotrace.so"
if [ ! -f "$lib" ]; then
    echo "run-fuzz: $lib not built (run make first): skipped"
    exit 77
fi
mkdir -p "$out" || exit 99
probe="$out/probe.c"
echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { return 0; }' > "$probe"
if ! "$CLANG" -fsanitize=fuzzer "$probe" -o "$out/probe" 2>/dev/null; then
    echo "run-fuzz: clang has no libFuzzer (-fsanitize=fuzzer): skipped"
    exit 77
fi
rm -f "$probe" "$out/probe"

yajl_cflags=$(pkg-config --cflags yajl 2>/dev/null)
yajl_libs=$(pkg-config --libs yajl 2>/dev/null || echo -lyajl)
# the nsys importer, built with the rest of tools/import, reads SQLite
sqlite_libs=$(pkg-config --libs sqlite3 2>/dev/null || echo -lsqlite3)
# fuzz TARGET CORPUS_GLOB DICT_ARGS: builds tests/fuzz/TARGET.c and runs it; 0 no crash
fuzz() {
    t=$1
    "$CLANG" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
        -I"$s/schemas" -I"$s/common" -I"$s/tools/import" $yajl_cflags \
        "$s/tests/fuzz/$t.c" "$s"/tools/import/*.c \
        -o "$out/$t" \
        -L"$b/schemas/.libs" -Wl,-rpath,"$(cd "$b/schemas/.libs" && pwd)" -ldprotrace \
        $yajl_libs $sqlite_libs -lz -pthread || return 1
    mkdir -p "$out/corpus-$t" || return 1
    cp $2 "$out/corpus-$t/" 2>/dev/null
    "$out/$t" "$out/corpus-$t" $3 \
        -max_total_time="$secs" -max_len=8192 -timeout=10 -rss_limit_mb=1024 \
        -artifact_prefix="$out/$t-" -print_final_stats=1 2> "$out/$t.log"
    r=$?
    tail -n 15 "$out/$t.log"
    if [ $r -ne 0 ]; then
        echo "run-fuzz: the fuzzer found a problem in $t: see $out/$t.log and $out/$t-crash-*"
        return 1
    fi
    echo "run-fuzz: $t: no crash in ${secs}s"
    return 0
}

rc=0
fuzz fuzz_import_kineto "$(ls "$s"/tests/import/fuzz/seed-*.json)" \
    "-dict=$s/tests/import/fuzz/kineto.dict" || rc=1
fuzz fuzz_import_et "$(ls "$s"/tests/import/fuzz/et-*.json)" "" || rc=1
exit $rc
