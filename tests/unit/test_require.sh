#!/bin/sh
# REQUIRE (tests/unit/testutil.h) stops a test: on a false condition the program says which
# step failed, prints the closing line, exits 1 and runs nothing after it; on a true one it
# counts a pass and goes on (tests/unit/require_driver.c).
set -u
b=${top_builddir:-.}
drv="$b/tests/unit/require_driver"
[ -x "$drv" ] || { echo "test_require: $drv not built"; exit 99; }
fail=0
ok() { if "$@"; then :; else fail=1; echo "FAIL: $*" >&2; fi; }
out=$("$drv" fail 2>&1)
ok test $? -eq 1
case "$out" in *"required step failed, test stopped: !fail"*) ;; *) ok false "no REQUIRE message: $out" ;; esac
case "$out" in *"1 passed, 1 failed"*) ;; *) ok false "no closing line: $out" ;; esac
case "$out" in *"after the REQUIRE"*) ok false "the test went on: $out" ;; esac
out=$("$drv" pass 2>&1)
ok test $? -eq 0
case "$out" in *"after the REQUIRE"*"3 passed, 0 failed"*) ;; *) ok false "a true REQUIRE: $out" ;; esac
[ $fail = 0 ] && echo "test_require: a false REQUIRE stops the test with exit 1, a true one goes on"
exit $fail
