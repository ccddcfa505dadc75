/* hostshare_cpus.c: a host's CPUs from its ranks' host_cpu_list and host_cpus rows
 * (hostshare.h): Linux's cpulist text parsed into a bit set, the sets' union. Apart from
 * hostshare.c, which needs the replay's graph, so that the fuzz target
 * (tests/fuzz/fuzz_cpulist.c) builds with this file alone. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "hostshare.h"

int
hostshare_parse_cpu_list(const char *s, uint64_t *set, char *why, size_t n)
{
    int rc = s && *s ? 0 : -1;
    int count = 0;
    memset(set, 0, HOSTSHARE_CPU_MAX / 8);
    if (rc != 0)
        snprintf(why, n, "%s", s ? "empty" : "absent");
    for (const char *p = s; rc == 0;) {
        long id[2] = {-1, -1};
        for (int k = 0; rc == 0 && k < 2; k++) {
            const char *d = p;
            for (id[k] = 0; *p >= '0' && *p <= '9' && id[k] < HOSTSHARE_CPU_MAX; p++)
                id[k] = id[k] * 10 + (*p - '0');
            if (p == d) {
                snprintf(why, n, "no CPU id at offset %td", p - s);
                rc = -1;
            } else if (id[k] >= HOSTSHARE_CPU_MAX) {
                snprintf(why, n, "CPU id at offset %td over %d", d - s, HOSTSHARE_CPU_MAX - 1);
                rc = -1;
            } else if (k == 0 && *p == '-') {
                p++;
            } else {
                id[1] = k == 0 ? id[0] : id[1];
                break;
            }
        }
        if (rc == 0 && id[1] < id[0]) {
            snprintf(why, n, "range %ld-%ld runs backwards", id[0], id[1]);
            rc = -1;
        }
        for (long c = id[0]; rc == 0 && c <= id[1]; c = (c / 64 + 1) * 64) {
            int hi = id[1] / 64 > c / 64 ? 63 : (int)(id[1] % 64); /* the word's last bit */
            set[c / 64] |= (~(uint64_t)0 >> (63 - hi)) & (~(uint64_t)0 << (c % 64));
        }
        if (rc == 0 && *p == '\0')
            break;
        if (rc == 0 && (*p != ',' || p[1] == '\0')) {
            snprintf(why, n, "%s at offset %td", *p == ',' ? "a trailing comma" : "not a cpulist",
                     p - s);
            rc = -1;
        }
        p++;
    }
    for (size_t w = 0; rc == 0 && w < HOSTSHARE_CPU_MAX / 64; w++)
        count += __builtin_popcountll(set[w]);
    if (rc != 0)
        memset(set, 0, HOSTSHARE_CPU_MAX / 8);
    return rc == 0 ? count : -1;
}

int
hostshare_cpus_add(hostshare_cpus *h, int64_t count, const char *list, char *why, size_t n)
{
    uint64_t set[HOSTSHARE_CPU_MAX / 64];
    int rc = 0, c = list ? hostshare_parse_cpu_list(list, set, why, n) : 0;
    if (c < 0) {
        rc = -1;
    } else if (list && count > 0 && c != count) {
        snprintf(why, n, "names %d CPUs where host_cpus says %lld", c, (long long)count);
        rc = -1;
    }
    for (size_t w = 0; rc == 0 && list && w < HOSTSHARE_CPU_MAX / 64; w++)
        h->set[w] |= set[w];
    h->listed += rc == 0 && list;
    h->ranks++;
    h->most = count > h->most ? count : h->most;
    return rc;
}

int64_t
hostshare_cpus_count(const hostshare_cpus *h)
{
    int64_t c = 0;
    for (size_t w = 0; h->listed == h->ranks && h->ranks > 0 && w < HOSTSHARE_CPU_MAX / 64; w++)
        c += __builtin_popcountll(h->set[w]);
    return h->listed == h->ranks && h->ranks > 0 ? c : h->most;
}
