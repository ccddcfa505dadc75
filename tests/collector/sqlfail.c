/*
 * sqlfail: an LD_PRELOAD fault injector for the collector's tests. sqlite3_step fails
 * (SQLITE_IOERR, nothing executed) for every INSERT into the table named by SQLFAIL_TABLE
 * ("threads", "meta", ...); every other statement runs as usual.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

typedef int (*step_fn)(sqlite3_stmt *);

int
sqlite3_step(sqlite3_stmt *st)
{
    static step_fn real;
    if (real == NULL)
        real = (step_fn)dlsym(RTLD_NEXT, "sqlite3_step");
    const char *table = getenv("SQLFAIL_TABLE");
    const char *sql = sqlite3_sql(st);
    if (table && *table && sql && strncmp(sql, "INSERT", 6) == 0) {
        const char *into = strstr(sql, " INTO ");
        size_t n = strlen(table);
        if (into && strncmp(into + 6, table, n) == 0 && into[6 + n] == '(')
            return SQLITE_IOERR;
    }
    return real ? real(st) : SQLITE_MISUSE;
}
