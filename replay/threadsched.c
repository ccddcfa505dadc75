/* threadsched.c: parsing meta thread_sched (threadsched.h). */
#include "threadsched.h"

#include <errno.h>
#include <stdlib.h>

/* Parses one "T:R:W:S" at *s into *v and moves *s past it. Returns 0, or -1 when it is not
 * four integers ending at ',', ';' or the text's end, each at least 0 and the time at most
 * THREAD_SCHED_MAX_US. */
static int
parse_sample(const char **s, thread_sched_sample *v)
{
    int64_t f[4];
    int rc = 0;
    for (int k = 0; rc == 0 && k < 4; k++) {
        char *end;
        errno = 0;
        f[k] = strtoll(*s, &end, 10);
        if (end == *s || errno || f[k] < 0 || (k == 0 && f[k] > THREAD_SCHED_MAX_US) ||
            (k < 3 && *end != ':') || (k == 3 && *end && *end != ',' && *end != ';'))
            rc = -1;
        else
            *s = end + (k < 3);
    }
    if (rc == 0)
        *v = (thread_sched_sample){f[0], f[1], f[2], f[3]};
    return rc;
}

int
thread_sched_parse(const char *text, thread_sched_set *set)
{
    size_t cap_threads = 1, cap_samples = 1;
    for (const char *c = text; *c; c++) {
        cap_threads += *c == ';';
        cap_samples += *c == ',' || *c == ';';
    }
    thread_sched *v = calloc(cap_threads, sizeof *v);
    thread_sched_sample *all = malloc(cap_samples * sizeof *all);
    size_t n = 0, used = 0;
    int rc = v && all ? 0 : -1;
    for (const char *s = text; rc == 0 && *s;) {
        char *end;
        errno = 0;
        unsigned long tid = strtoul(s, &end, 10);
        if (end == s || *end != '=' || errno || tid > UINT32_MAX) {
            rc = (int)n + 2;
            break;
        }
        v[n].tid = (uint32_t)tid;
        v[n].sample = all + used;
        s = end + 1;
        while (rc == 0 && *s && *s != ';') {
            if (parse_sample(&s, &all[used]) != 0)
                rc = (int)n + 2;
            else
                v[n].n++, used++;
            s += rc == 0 && *s == ',';
        }
        if (rc == 0 && v[n].n == 0)
            rc = (int)n + 2; /* "TID=" without a sample */
        if (rc == 0) {
            n++;
            s += *s == ';';
        }
    }
    if (rc != 0) {
        free(v);
        free(all);
        v = NULL;
        all = NULL;
        n = 0;
    }
    *set = (thread_sched_set){v, n, all};
    return rc;
}

void
thread_sched_set_free(thread_sched_set *set)
{
    free(set->thread);
    free(set->all);
    *set = (thread_sched_set){NULL, 0, NULL};
}
