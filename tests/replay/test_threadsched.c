/*
 * test_threadsched: the parser of meta thread_sched (replay/threadsched.c) that dpro-info
 * --threads and dpro-export --chrome share, on valid rows and on hostile ones.
 *
 * Valid: one thread, several, the largest TID (2^32 - 1), the latest time
 * (THREAD_SCHED_MAX_US), 64 threads of 1,024 samples each (the collector's most), a
 * thread whose time goes backwards (the parser keeps the samples as given; the readers
 * skip such intervals). Malformed, each with an empty set and the thread named (k + 2): a
 * TID past 2^32 - 1, a TID of a thousand digits, a negative TID, a negative field (a
 * difference of two fields could then overflow), a time past THREAD_SCHED_MAX_US, a
 * field past int64, a missing or extra field, a thread without samples.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/threadsched.h"
#include "tests/unit/testutil.h"

/* thread_sched_parse's answer on text, and that an error leaves the set empty. */
static int
parse(const char *text, thread_sched_set *set)
{
    int rc = thread_sched_parse(text, set);
    if (rc != 0)
        CHECK(set->n == 0 && !set->thread && !set->all);
    return rc;
}

int
main(void)
{
    thread_sched_set set;
    char buf[2048];

    CHECK_EQ(parse("7=1:2:3:4,5:6:7:8", &set), 0);
    CHECK(set.n == 1 && set.thread[0].tid == 7 && set.thread[0].n == 2 &&
          set.thread[0].sample[1].t_us == 5 && set.thread[0].sample[1].slices == 8);
    thread_sched_set_free(&set);
    CHECK(set.n == 0 && !set.thread);

    snprintf(buf, sizeof buf, "4294967295=0:0:0:0;8=%lld:1:1:1,1:2:2:2",
             (long long)THREAD_SCHED_MAX_US);
    CHECK_EQ(parse(buf, &set), 0);
    CHECK(set.n == 2 && set.thread[0].tid == UINT32_MAX &&
          set.thread[1].sample[0].t_us == THREAD_SCHED_MAX_US && set.thread[1].sample[1].t_us == 1);
    thread_sched_set_free(&set);

    /* 64 threads x 1,024 samples */
    size_t cap = 64 * 1024 * 40 + 64 * 16, len = 0;
    char *big = malloc(cap);
    REQUIRE(big != NULL);
    for (int t = 0; t < 64; t++) {
        len += (size_t)snprintf(big + len, cap - len, "%s%d=", t ? ";" : "", 1000 + t);
        for (int i = 0; i < 1024; i++)
            len += (size_t)snprintf(big + len, cap - len, "%s%d:%d:%d:%d", i ? "," : "", 10000 * i,
                                    3000 * i, 2000 * i, i);
    }
    CHECK_EQ(parse(big, &set), 0);
    CHECK(set.n == 64 && set.thread[63].tid == 1063 && set.thread[63].n == 1024 &&
          set.thread[63].sample[1023].t_us == 10000 * 1023);
    thread_sched_set_free(&set);
    free(big);

    /* malformed: k + 2 for the k-th thread (0-based) */
    static const struct {
        const char *text;
        int rc;
    } bad[] = {
        {"4294967296=1:2:3:4", 2},
        {"-1=1:2:3:4", 2},
        {"5=1:2:3:4;6=-1:2:3:4", 3},
        {"5=1:-2:3:4", 2},
        {"5=1:2:3:-4", 2},
        {"5=1:2:3:4,2:2:-3:4", 2},
        {"5=9223372036854775807:2:3:4", 2},
        {"5=1:99999999999999999999:3:4", 2},
        {"5=1:2:3", 2},
        {"5=1:2:3:4:5", 2},
        {"5=", 2},
        {"5=1:2:3:4;6=", 3},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int rc = parse(bad[i].text, &set);
        if (rc != bad[i].rc)
            fprintf(stderr, "%s: %d, expected %d\n", bad[i].text, rc, bad[i].rc);
        CHECK_EQ(rc, bad[i].rc);
    }
    snprintf(buf, sizeof buf, "5=%lld:0:0:0", (long long)THREAD_SCHED_MAX_US + 1);
    CHECK_EQ(parse(buf, &set), 2);
    memset(buf, '9', 1000);
    strcpy(buf + 1000, "=1:2:3:4");
    CHECK_EQ(parse(buf, &set), 2);
    return tests_done();
}
