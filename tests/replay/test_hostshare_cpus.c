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
 *
 * And the timeslice the stall model learns from the traced stalls (hostshare_slice): the
 * scheduler's base slice by CPU count; short stalls around 1 ms mixed with more long ones
 * of 20-200 ms (a thread bound to a core the machine's other work holds) give the median
 * of the short ones, at scheduler scale, where the median of all would be tens of ms;
 * from 2 to 7 short ones, their median with the base slice counted as one more value; 0
 * or 1 the base slice; 10,000 random mixes stay within the base slice.
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

/* Runs hostshare_slice on v (n stalls, us) on `cores` CPUs; expects rc, the slice (us) and
 * the long stalls, and v unchanged. */
static void
expect_slice(const double *v, size_t n, double cores, int rc, double slice_us, size_t n_long)
{
    double ns[64], copy[64], got = -1;
    size_t got_long = 99;
    for (size_t i = 0; i < n; i++)
        ns[i] = copy[i] = v[i] * 1e3;
    int r = hostshare_slice(n ? ns : NULL, n, cores, &got, &got_long);
    if (r != rc || got_long != n_long || !(got > slice_us * 1e3 - 1 && got < slice_us * 1e3 + 1))
        fprintf(stderr,
                "%zu stalls on %.0f CPUs: rc %d, slice %.1f us, %zu long; want %d, %.1f, %zu\n", n,
                cores, r, got / 1e3, got_long, rc, slice_us, n_long);
    CHECK_EQ(r, rc);
    CHECK_EQ_U(got_long, n_long);
    CHECK(got > slice_us * 1e3 - 1 && got < slice_us * 1e3 + 1);
    CHECK(n == 0 || memcmp(ns, copy, n * sizeof *ns) == 0);
}

static void
test_slice(void)
{
    /* Linux's sched_base_slice: 0.75 ms x (1 + log2 CPUs), the CPUs counted up to 8 */
    CHECK(hostshare_base_slice_ns(0) == 750e3);
    CHECK(hostshare_base_slice_ns(1) == 750e3);
    CHECK(hostshare_base_slice_ns(2) == 1.5e6);
    CHECK(hostshare_base_slice_ns(3) == 1.5e6);
    CHECK(hostshare_base_slice_ns(4) == 2.25e6);
    CHECK(hostshare_base_slice_ns(8) == 3e6);
    CHECK(hostshare_base_slice_ns(192) == 3e6);

    /* 9 short stalls (us; 610 .. 1500, their median 1010) among 21 long ones: the median
     * of all, the rule before, would be 29 ms */
    static const double mix[] = {40e3, 980,   20e3,  610,  75e3,  1500, 200e3, 1210,  33e3, 23e3,
                                 870,  120e3, 150e3, 1050, 60e3,  90e3, 700,   21e3,  29e3, 180e3,
                                 1340, 55e3,  24e3,  27e3, 110e3, 20e3, 1010,  160e3, 45e3, 130e3};
    size_t n = sizeof mix / sizeof *mix;
    expect_slice(mix, n, 2, 1, 1010, 21);
    /* on 1 CPU (0.75 ms) only 610 and 700 are short: too few for their median alone; with
     * the base slice one more value (610, 700, 750), 700 */
    expect_slice(mix, n, 1, 2, 700, 28);
    /* 7 short (700 .. 1200, their median 950) with 3 long: under 8, the base slice counts
     * as one more stall, so the upper median of the 8 values, 1000, not the base slice of
     * 2 CPUs (1.5 ms) */
    static const double seven[] = {900, 1100, 800, 25e3, 1000, 60e3, 950, 1200, 80e3, 700};
    expect_slice(seven, sizeof seven / sizeof *seven, 2, 2, 1000, 3);
    /* 2 short (980, 610) and 3 long: 980, one rank above 610, below the base */
    expect_slice(mix, 5, 2, 2, 980, 3);
    /* 1 short stall: the base slice (the median of it and the base is the base) */
    static const double one[] = {40e3, 800, 20e3};
    expect_slice(one, 3, 2, 0, 1500, 2);
    /* the long ones alone, or no stalls at all: the base slice */
    expect_slice(mix, 1, 2, 0, 1500, 1);
    expect_slice(NULL, 0, 2, 0, 1500, 0);
    /* 8 short ones, one at the bound: learned (the upper median of 8) */
    static const double eight[] = {1500, 600, 700, 800, 900, 1000, 1100, 1200};
    expect_slice(eight, 8, 2, 1, 1000, 0);
    /* 2 ms stalls are long on 2 CPUs, a slice on 8 (3 ms) */
    static const double two[] = {2000, 2100, 1900, 2050, 1950, 2000, 2200, 1800};
    expect_slice(two, 8, 2, 0, 1500, 8);
    expect_slice(two, 8, 8, 1, 2000, 0);

    /* random mixes of short (0.5-1.5 ms) and long (1.5-300 ms) stalls: the slice is within
     * the base slice, the median of the short ones when 8 or more, of them and the base
     * from 2, the base below */
    uint64_t x = 0x9e3779b97f4a7c15ull;
    int ok = 1, learned = 0;
    for (int t = 0; t < 10000; t++) {
        double v[64];
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t k = x % 65, shorts = 0;
        for (size_t i = 0; i < k; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            int is_short = x % 3 == 0;
            double u = (double)(x >> 11) / 9007199254740992.0;
            v[i] = is_short ? 500e3 + u * 1e6 : 1.5e6 + 1 + u * 298.5e6;
            shorts += is_short;
        }
        double slice = -1;
        size_t n_long = 0;
        int r = hostshare_slice(k ? v : NULL, k, 2, &slice, &n_long);
        int want = shorts >= HOSTSHARE_STALL_MIN_COUNT ? 1 : shorts >= 2 ? 2 : 0;
        ok &= r == want && n_long == k - shorts && slice >= 500e3 && slice <= 1.5e6 &&
              (r > 0 || slice == 1.5e6);
        learned += r > 0;
    }
    CHECK(ok);
    CHECK(learned > 0);
    printf("random stalls: %d of 10000 learned, every slice within 1.5 ms\n", learned);
}

int
main(void)
{
    test_slice();
    test_parse();
    test_union();
    test_random();
    return tests_done();
}
