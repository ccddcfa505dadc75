/* testutil.h: a minimal check harness for dpro's C unit tests. */
#ifndef DPRO_TESTUTIL_H
#define DPRO_TESTUTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int tests_failed, tests_passed;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (cond) {                                                                                \
            tests_passed++;                                                                        \
        } else {                                                                                   \
            tests_failed++;                                                                        \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
        }                                                                                          \
    } while (0)

#define CHECK_EQ_U(a, b)                                                                           \
    do {                                                                                           \
        unsigned long long va_ = (unsigned long long)(a), vb_ = (unsigned long long)(b);           \
        if (va_ == vb_) {                                                                          \
            tests_passed++;                                                                        \
        } else {                                                                                   \
            tests_failed++;                                                                        \
            fprintf(stderr, "%s:%d: %s == %s failed: %llu != %llu\n", __FILE__, __LINE__, #a, #b,  \
                    va_, vb_);                                                                     \
        }                                                                                          \
    } while (0)

#define CHECK_EQ(a, b)                                                                             \
    do {                                                                                           \
        long long va_ = (long long)(a), vb_ = (long long)(b);                                      \
        if (va_ == vb_) {                                                                          \
            tests_passed++;                                                                        \
        } else {                                                                                   \
            tests_failed++;                                                                        \
            fprintf(stderr, "%s:%d: %s == %lld, expected %lld\n", __FILE__, __LINE__, #a, va_,     \
                    vb_);                                                                          \
        }                                                                                          \
    } while (0)

/* Prints the closing line and returns the exit status. */
static inline int
tests_done(void)
{
    printf("%d passed, %d failed\n", tests_passed, tests_failed);
    return tests_failed ? 1 : 0;
}

/* REQUIRE: a set-up step the rest of the test depends on (an open, an allocation, a
 * graph built). CHECK goes on after a failure; REQUIRE says what failed, prints the
 * closing line and ends the test with status 1, so that no later check runs on the
 * state the failed step left behind. */
#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (cond) {                                                                                \
            tests_passed++;                                                                        \
        } else {                                                                                   \
            tests_failed++;                                                                        \
            fprintf(stderr, "%s:%d: required step failed, test stopped: %s\n", __FILE__, __LINE__, \
                    #cond);                                                                        \
            exit(tests_done());                                                                    \
        }                                                                                          \
    } while (0)

/* xorshift64*: deterministic random numbers for fixed-seed tests. */
static inline uint64_t
test_rand(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

#endif
