/* log.c: the log macros' back end (see dpro_log.h). */
#include "dpro_log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const level_names[] = {"error", "warning", "info", "debug"};

int
dpro_log_level(void)
{
    static int level = -1;
    if (level < 0) {
        const char *env = getenv("DPRO_LOG");
        int l = DPRO_LOG_WARN;
        if (env) {
            if (!strcmp(env, "error"))
                l = DPRO_LOG_ERROR;
            else if (!strcmp(env, "info"))
                l = DPRO_LOG_INFO;
            else if (!strcmp(env, "debug"))
                l = DPRO_LOG_DEBUG;
        }
        level = l;
    }
    return level;
}

void
dpro_log(int level, const char *prefix, const char *fmt, ...)
{
    char line[1024];
    int n;
    va_list ap;

    if (level > dpro_log_level())
        return;
    n = snprintf(line, sizeof line, "%s: %s: ", prefix, level_names[level & 3]);
    if (n < 0 || (size_t)n >= sizeof line)
        return;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - n, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", line);
}
