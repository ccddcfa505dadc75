#!/bin/sh
# test_trace under valgrind's memcheck: no invalid access and no block definitely lost, in
# the test process or in its forked writer (test_concurrent_readers: the parent used to
# keep a copy of a writer it opened before the fork, 3.9 MB lost). Skipped, saying why, in a
# sanitizer build (valgrind cannot run ASan or TSan binaries; those builds check memory
# themselves) and where valgrind is not installed (tools/quickstart installs it).
set -u
b=${top_builddir:-.}
if [ "${DPRO_SANITIZERS:-0}" = 1 ]; then
    echo "test_trace_leaks: sanitizer build (valgrind cannot run it): skipped"
    exit 77
fi
command -v valgrind > /dev/null 2>&1 || { echo "test_trace_leaks: no valgrind: skipped"; exit 77; }
[ -x "$b/tests/unit/test_trace" ] || { echo "test_trace_leaks: test_trace not built"; exit 99; }
log=$(mktemp) || exit 99
trap 'rm -f "$log"' EXIT
DPRO_TEST_UNDER_VALGRIND=1 TMPDIR=${TMPDIR:-/tmp} "$b/libtool" --mode=execute valgrind -q --leak-check=full \
    --errors-for-leak-kinds=definite --error-exitcode=3 --log-file="$log" \
    "$b/tests/unit/test_trace" > /dev/null
rc=$?
if [ $rc -ne 0 ]; then
    echo "test_trace_leaks: test_trace under valgrind exited $rc:"
    cat "$log"
    exit 1
fi
echo "test_trace_leaks: test_trace and its forked writer: no memory error, nothing lost"
