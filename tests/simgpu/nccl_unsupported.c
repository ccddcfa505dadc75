/* nccl_unsupported.c: the entry points of libnccl.so.2 that torch's libraries import and
 * the simulated device does not do: single-process multi-device init, shrinking, growing,
 * revoking, suspending communicators, the device-side API (device communicators,
 * signals, peer and multimem pointers), simulated group ends, memory statistics.  Each
 * exists (pnccl* and the weak nccl* alias, as in the real library) so that torch binds at
 * load time, says once on stderr which call it was and returns ncclInvalidUsage: never a
 * silent success.  The list is tests/torch/census.py's.
 *
 * These definitions do not take the real parameters (this file does not include nccl.h:
 * several are newer than the toolkit's header): they read none, and the result comes
 * back in the return register as from the real prototype.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define RESULT_INVALID_USAGE 5 /* ncclInvalidUsage */
#define MAX_SAID 64

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static const char *g_said[MAX_SAID];
static int g_nsaid;

/* Says once per entry point that `fn` is not simulated; returns ncclInvalidUsage. */
static int
unsupported(const char *fn)
{
    int said = 0;
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < g_nsaid; i++)
        if (strcmp(g_said[i], fn) == 0)
            said = 1;
    if (!said && g_nsaid < MAX_SAID)
        g_said[g_nsaid++] = fn;
    pthread_mutex_unlock(&g_mu);
    if (!said)
        fprintf(stderr, "simgpu: libnccl.so.2: %s is not simulated (returns ncclInvalidUsage)\n",
                fn);
    return RESULT_INVALID_USAGE;
}

#define UNSUPPORTED(fn)                                                                            \
    int p##fn(void);                                                                               \
    int p##fn(void)                                                                                \
    {                                                                                              \
        return unsupported(#fn);                                                                   \
    }                                                                                              \
    __typeof__(p##fn) fn __attribute__((weak, alias("p" #fn)));

UNSUPPORTED(ncclCommInitAll)
UNSUPPORTED(ncclCommShrink)
UNSUPPORTED(ncclCommGrow)
UNSUPPORTED(ncclCommGetUniqueId)
UNSUPPORTED(ncclCommRevoke)
UNSUPPORTED(ncclCommSuspend)
UNSUPPORTED(ncclCommResume)
UNSUPPORTED(ncclCommMemStats)
UNSUPPORTED(ncclGroupSimulateEnd)
UNSUPPORTED(ncclDevCommCreate)
UNSUPPORTED(ncclDevCommDestroy)
UNSUPPORTED(ncclGetLsaMultimemDevicePointer)
UNSUPPORTED(ncclGetPeerDevicePointer)
UNSUPPORTED(ncclWinGetUserPtr)
UNSUPPORTED(ncclSignal)
UNSUPPORTED(ncclPutSignal)
UNSUPPORTED(ncclWaitSignal)
