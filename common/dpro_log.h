/*
 * dpro_log.h: log and error macros shared by the libraries and commands (not the format).
 *
 * Each .c file may define PR_FMT before including this header to prefix its messages
 * ("replay", "import", ...). The level comes from DPRO_LOG (error, warn, info, debug),
 * read once; the default is warn.
 */
#ifndef DPRO_LOG_H
#define DPRO_LOG_H

#include <stdarg.h>

enum dpro_log_level {
    DPRO_LOG_ERROR = 0,
    DPRO_LOG_WARN = 1,
    DPRO_LOG_INFO = 2,
    DPRO_LOG_DEBUG = 3
};

/* Returns the level in force (from DPRO_LOG, read on first use). */
int dpro_log_level(void);

/* Prints "dpro[prefix]: level: message\n" on stderr if level is in force. */
void dpro_log(int level, const char *prefix, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#ifndef PR_FMT
#define PR_FMT "dpro"
#endif

#define pr_err(...) dpro_log(DPRO_LOG_ERROR, PR_FMT, __VA_ARGS__)
#define pr_warn(...) dpro_log(DPRO_LOG_WARN, PR_FMT, __VA_ARGS__)
#define pr_info(...) dpro_log(DPRO_LOG_INFO, PR_FMT, __VA_ARGS__)
#define pr_dbg(...)                                                                                \
    do {                                                                                           \
        if (dpro_log_level() >= DPRO_LOG_DEBUG)                                                    \
            dpro_log(DPRO_LOG_DEBUG, PR_FMT, __VA_ARGS__);                                         \
    } while (0)

/* Propagate a non-zero rc: CHECK_GOTO(expr, label) evaluates expr into rc and jumps to
 * label when it is not DPRO_OK (0). Functions using it declare `int rc`. */
#define CHECK_GOTO(expr, label)                                                                    \
    do {                                                                                           \
        rc = (expr);                                                                               \
        if (rc != 0)                                                                               \
            goto label;                                                                            \
    } while (0)

#endif
