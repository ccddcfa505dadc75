/*
 * slowctor: a library whose constructor sleeps SLOWCTOR_MS (default 1500) milliseconds.
 * While it runs, the thread that dlopen()s it holds the dynamic loader's lock: a dlsym()
 * made meanwhile by any other thread (or a vfork child) waits for it.
 */
#include <stdlib.h>
#include <time.h>

__attribute__((constructor)) static void
slowctor_init(void)
{
    const char *v = getenv("SLOWCTOR_MS");
    int ms = v ? atoi(v) : 1500;
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Something to export. */
int slowctor_loaded(void);
int
slowctor_loaded(void)
{
    return 1;
}
