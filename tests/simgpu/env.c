/* env.c: the device's number settings (SIMGPU_*), read strictly: a setting holds a number
 * in its range, spelled whole, or it is named on stderr and its default taken. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simgpu_internal.h"

double
simgpu_env_number(const char *name, double least, double most, double dflt)
{
    const char *v = getenv(name);
    char *end = NULL;
    double d = 0;
    int ok;
    if (!v || !*v)
        return dflt;
    errno = 0;
    d = strtod(v, &end);
    /* strtod also takes leading blanks and hexadecimal: neither is a decimal number */
    ok = end != v && *end == '\0' && errno == 0 && isfinite(d) && d >= least && d <= most &&
         !isspace((unsigned char)*v) && !strpbrk(v, "xX");
    if (!ok)
        fprintf(stderr, "simgpu: %s=%s is not a number from %g to %g: %g\n", name, v, least, most,
                dflt);
    return ok ? d : dflt;
}

uint64_t
simgpu_env_whole(const char *name, uint64_t least, uint64_t most, uint64_t dflt)
{
    const char *v = getenv(name), *p = v;
    uint64_t k = 0;
    int over = 0, ok;
    if (!v || !*v)
        return dflt;
    for (; *p >= '0' && *p <= '9'; p++) {
        uint64_t digit = (uint64_t)(*p - '0');
        over |= k > (UINT64_MAX - digit) / 10;
        k = k * 10 + digit;
    }
    ok = p != v && *p == '\0' && !over && k >= least && k <= most;
    if (!ok)
        fprintf(stderr, "simgpu: %s=%s is not a whole number from %llu to %llu: %llu\n", name, v,
                (unsigned long long)least, (unsigned long long)most, (unsigned long long)dflt);
    return ok ? k : dflt;
}
