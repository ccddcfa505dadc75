/*
 * dpro_log.h: the one way the commands and the libraries report errors and warnings
 * (not the format library, which returns its messages to the caller).
 *
 * Every message is one line on stderr: "PREFIX: LEVEL: message", LEVEL one of error,
 * warning, info, debug. A command calls dpro_log_set_program(argv[0]) first thing, and
 * PREFIX is then its name ("dpro-replay") for its own messages and for those of the
 * libraries it calls; without it (a library in a test program) PREFIX is the PR_FMT of
 * the .c file that reports ("replay", "import", ...; define it before including this
 * header). Errors are always printed; the other levels when DPRO_LOG (error, warn, info,
 * debug; read once) lets them, warn by default. Library warnings that belong in a
 * command's output go through job_warn (replay/job.h), which records them and prints
 * them here.
 */
#ifndef DPRO_LOG_H
#define DPRO_LOG_H

#include <stdarg.h>
#include <stdio.h>

enum dpro_log_level {
    DPRO_LOG_ERROR = 0,
    DPRO_LOG_WARN = 1,
    DPRO_LOG_INFO = 2,
    DPRO_LOG_DEBUG = 3
};

/* Returns the level in force (from DPRO_LOG, read on first use). */
int dpro_log_level(void);

/* Sets the level in force, over DPRO_LOG (a command's --quiet: DPRO_LOG_ERROR); call it
 * before any thread starts. */
void dpro_log_set_level(int level);

/* Makes the base name of argv0 the prefix of every message of this process (call it
 * before any thread starts; argv0 must outlive the logging). NULL: back to PR_FMT. */
void dpro_log_set_program(const char *argv0);

/* Prints "prefix: level: message\n" on stderr (one line, not interleaved with other
 * threads' messages) if level is in force;
 * prefix is the program's name when dpro_log_set_program was called. */
void dpro_log(int level, const char *prefix, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The same line written to f instead of stderr (a buffer a command prints later, so that
 * the messages of tasks run in parallel come out in the order of their inputs). */
void dpro_log_to(FILE *f, int level, const char *prefix, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void dpro_vlog_to(FILE *f, int level, const char *prefix, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

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

#endif
