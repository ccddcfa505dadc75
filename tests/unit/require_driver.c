/*
 * require_driver: a test program of the harness itself, run by test_require.sh (not a test
 * on its own: it fails on purpose). "fail": a passed CHECK, then a REQUIRE on a false
 * condition, then a line and a status that no stopped test would reach. "pass": the same
 * with a true condition.
 */
#include <stdio.h>
#include <string.h>

#include "testutil.h"

int
main(int argc, char **argv)
{
    int fail = argc > 1 && strcmp(argv[1], "fail") == 0;
    CHECK(argc > 1);
    REQUIRE(!fail);
    printf("after the REQUIRE\n");
    CHECK(1);
    return tests_done();
}
