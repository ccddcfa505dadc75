/*
 * test_hostshare_cpus: a host's CPUs for the host-share model (replay/hostshare.c) from its
 * ranks' host_cpu_list rows (Linux's cpulist text) and host_cpus counts.
 *
 * The parser on valid lists (single ids, ranges, overlaps, the largest id) and on hostile
 * ones (empty, a stray character, a trailing comma, a backward range, an id past
 * HOSTSHARE_CPU_MAX, a number of a thousand digits, a megabyte of full ranges): each
 * malformed one returns -1 with a reason and an empty set, never a crash, and the long
 * ones in bounded time. Then the union: two ranks bound to a core each make a host of
 * two CPUs, the same core twice one; a rank without a list (an older collector) or with
 * an unusable one (malformed, or naming another count than its host_cpus) makes the host
 * fall back to the most host_cpus of its ranks. Last, 200,000 random strings over the
 * list's alphabet: the parser's answer always agrees with the set it returns.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/hostshare.h"
#include "tests/unit/testutil.h"

static uint64_t set[HOSTSHARE_CPU_MAX / 64];
static char why[160];

/* The CPUs in set. */
static int
count_set(void)
{
    int c = 0;
    for (size_t w = 0; w < HOSTSHARE_CPU_MAX / 64; w++)
        c += __builtin_popcountll(set[w]);
    return c;
}

static int
has(int c)
{
    return (int)(set[c / 64] >> (c % 64) & 1);
}

/* Parses s, expecting `want` CPUs (-1: malformed, with a reason and an empty set). */
static void
expect(const char *s, int want)
{
    why[0] = '\0';
    int got = hostshare_parse_cpu_list(s, set, why, sizeof why);
    if (got != want)
        fprintf(stderr, "\"%.40s\": %d CPUs, expected %d (%s)\n", s ? s : "(null)", got, want, why);
    CHECK_EQ(got, want);
    CHECK(want < 0 ? why[0] != '\0' && count_set() == 0 : count_set() == want);
}

static void
test_parse(void)
{
    expect("0", 1);
    expect("3", 1);
    expect("0-3", 4);
    expect("0-3,8-11", 8);
    expect("0,2,4,6", 4);
    expect("0-3,2-5", 6); /* overlapping: a set */
    expect("5-5", 1);
    expect("8191", 1);
    expect("0-8191", HOSTSHARE_CPU_MAX);
    expect("63-64", 2);
    expect("0-127", 128);
    CHECK(hostshare_parse_cpu_list("1,62-65,200", set, why, sizeof why) == 6 && has(1) && has(62) &&
          has(63) && has(64) && has(65) && has(200) && !has(0) && !has(66));

    expect(NULL, -1);
    expect("", -1);
    expect(",", -1);
    expect("0,", -1);
    expect(",0", -1);
    expect("0,,1", -1);
    expect("-1", -1);
    expect("3-", -1);
    expect("3-1", -1);
    expect("1-2-3", -1);
    expect("0 1", -1);
    expect("0-3\n", -1);
    expect("a", -1);
    expect("0x3", -1);
    expect("8192", -1);
    expect("0-8192", -1);
    expect("0-4294967295", -1);
    expect("18446744073709551616", -1);

    /* a thousand digits: stopped at the first past the limit */
    char *big = malloc(1002);
    REQUIRE(big);
    memset(big, '9', 1001);
    big[1001] = '\0';
    expect(big, -1);
    free(big);

    /* a megabyte of full ranges (the words filled whole, not bit by bit), then a bad end */
    size_t n = 1 << 20, len = 0;
    char *many = malloc(n + 16);
    REQUIRE(many);
    while (len + 8 < n)
        len += (size_t)sprintf(many + len, "%s0-8191", len ? "," : "");
    expect(many, HOSTSHARE_CPU_MAX);
    strcpy(many + len, ",x");
    expect(many, -1);
    free(many);
}

/* A host's CPUs from ranks with the given counts and lists (NULL: no row); *bad gets the
 * adds that failed. */
static int64_t
host_of(int n, const int64_t *count, const char *const *list, int *bad)
{
    hostshare_cpus *h = calloc(1, sizeof *h);
    int64_t c = -1;
    *bad = 0;
    if (h) {
        for (int i = 0; i < n; i++)
            *bad += hostshare_cpus_add(h, count[i], list[i], why, sizeof why) != 0;
        c = hostshare_cpus_count(h);
    }
    free(h);
    return c;
}

static void
test_union(void)
{
    int bad;
    /* two ranks bound to a core each (simrun --bind-cpus, mpirun --bind-to core) */
    CHECK(host_of(2, (int64_t[]){1, 1}, (const char *[]){"0", "1"}, &bad) == 2 && bad == 0);
    /* four ranks two a core */
    CHECK(host_of(4, (int64_t[]){1, 1, 1, 1}, (const char *[]){"0", "1", "0", "1"}, &bad) == 2 &&
          bad == 0);
    /* unbound: the same set every rank */
    CHECK(host_of(2, (int64_t[]){4, 4}, (const char *[]){"0-3", "0-3"}, &bad) == 4 && bad == 0);
    /* sockets: halves of a 16-CPU host */
    CHECK(host_of(2, (int64_t[]){8, 8}, (const char *[]){"0-3,8-11", "4-7,12-15"}, &bad) == 16 &&
          bad == 0);
    /* an older collector: no lists, the most count */
    CHECK(host_of(2, (int64_t[]){1, 2}, (const char *[]){NULL, NULL}, &bad) == 2 && bad == 0);
    /* one rank without a list: the most count, not the union of the rest */
    CHECK(host_of(3, (int64_t[]){1, 1, 1}, (const char *[]){"0", "1", NULL}, &bad) == 1 &&
          bad == 0);
    /* a malformed list: said, and the most count */
    CHECK(host_of(2, (int64_t[]){1, 1}, (const char *[]){"0", "1-"}, &bad) == 1 && bad == 1 &&
          why[0]);
    /* a list naming another count than host_cpus: said, and the most count */
    CHECK(host_of(2, (int64_t[]){1, 1}, (const char *[]){"0", "1-3"}, &bad) == 1 && bad == 1 &&
          strstr(why, "host_cpus"));
    /* a list without host_cpus (count 0): the list counts */
    CHECK(host_of(1, (int64_t[]){0}, (const char *[]){"0-1"}, &bad) == 2 && bad == 0);
    /* an empty list: said, and the count */
    CHECK(host_of(1, (int64_t[]){3}, (const char *[]){""}, &bad) == 3 && bad == 1);
    /* no ranks */
    CHECK(host_of(0, (int64_t[]){0}, (const char *[]){NULL}, &bad) == 0);
}

/* Random strings of the list's alphabet (and a few others): the answer is -1 with an
 * empty set and a reason, or the set's size. */
static void
test_random(void)
{
    static const char alphabet[] = "0123456789-,,--81 x";
    char s[48];
    uint64_t x = 88172645463325252ull;
    int ok = 1, valid = 0;
    for (int i = 0; i < 200000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t len = x % (sizeof s - 1);
        for (size_t k = 0; k < len; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            s[k] = alphabet[x % (sizeof alphabet - 1)];
        }
        s[len] = '\0';
        why[0] = '\0';
        int c = hostshare_parse_cpu_list(s, set, why, sizeof why);
        ok &= c < 0 ? why[0] != '\0' && count_set() == 0 : c >= 1 && c == count_set();
        valid += c > 0;
    }
    CHECK(ok);
    CHECK(valid > 0);
    printf("random lists: %d of 200000 valid\n", valid);
}

int
main(void)
{
    test_parse();
    test_union();
    test_random();
    return tests_done();
}
