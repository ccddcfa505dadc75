/* log.c: the log macros' back end (see dpro_log.h). */
#include "dpro_log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const level_names[] = {"error", "warning", "info", "debug"};

/* The program's name, when a command set it. */
static const char *program;

/* The level in force; -1 until read from DPRO_LOG or set. */
static int log_level = -1;

int
dpro_log_level(void)
{
    if (log_level < 0) {
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
        log_level = l;
    }
    return log_level;
}

void
dpro_log_set_level(int l)
{
    log_level = l < DPRO_LOG_ERROR ? DPRO_LOG_ERROR : l > DPRO_LOG_DEBUG ? DPRO_LOG_DEBUG : l;
}

void
dpro_log_set_program(const char *argv0)
{
    const char *slash = argv0 ? strrchr(argv0, '/') : NULL;
    program = slash ? slash + 1 : argv0;
}

void
dpro_vlog_to(FILE *f, int level, const char *prefix, const char *fmt, va_list ap)
{
    if (level > dpro_log_level())
        return;
    /* one locked sequence, so that lines of several threads do not interleave */
    flockfile(f);
    fprintf(f, "%s: %s: ", program ? program : prefix, level_names[level & 3]);
    vfprintf(f, fmt, ap);
    fputc('\n', f);
    funlockfile(f);
}

void
dpro_log_to(FILE *f, int level, const char *prefix, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    dpro_vlog_to(f, level, prefix, fmt, ap);
    va_end(ap);
}

void
dpro_log(int level, const char *prefix, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    dpro_vlog_to(stderr, level, prefix, fmt, ap);
    va_end(ap);
}
