/*
 * lifecycle.c: the awkward moments of a process: SIGTERM (flush, then die as before), fork
 * (the child gets fresh state and its own file) and exec (flush first).
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

/* ---- SIGTERM ------------------------------------------------------------------------- */

static struct sigaction coll_old_sigterm;

/* SIGTERM: lets the writer thread finish the file (up to 3 s), then re-raises with the
 * disposition the job had. */
static void
coll_sigterm_handler(int sig, siginfo_t *si, void *uc)
{
    (void)si;
    (void)uc;
    int saved = errno;
    /* The writer thread notices within DRAIN_MS, drains, closes; wait up to 3 s. */
    atomic_store(&coll_sigterm_flag, 1);
    for (int i = 0; i < 3000 && __atomic_load_n(&coll_bg_running, __ATOMIC_RELAXED) &&
                    !atomic_load(&coll_bg_finished);
         i++) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    sigaction(sig, &coll_old_sigterm, NULL);
    errno = saved;
    raise(sig); /* delivered with the original disposition once we return */
}

/* Installs the SIGTERM flush handler, unless the job already handles SIGTERM. */
void
coll_install_sigterm(void)
{
    struct sigaction cur;
    if (sigaction(SIGTERM, NULL, &cur) != 0)
        return;
    if (!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler != SIG_DFL)
        return;
    if (cur.sa_flags & SA_SIGINFO)
        return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = coll_sigterm_handler;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    coll_old_sigterm = cur;
    sigaction(SIGTERM, &sa, NULL);
}

/* ---- fork ------------------------------------------------------------------------------ */

/* Whether coll_fork_prepare got the writer's work lock (it waits at most 5 s: a writer
 * stuck in a library must not hang the job's fork; the child then takes its chances). */
static int coll_fork_quiesced;

/* Whether the writer thread, if one was created, is past its start (coll_bg_started). */
static int
coll_writer_settled(void)
{
    pthread_mutex_lock(&coll_bg_lock);
    int settled = !coll_bg_running || atomic_load(&coll_bg_started);
    pthread_mutex_unlock(&coll_bg_lock);
    return settled;
}

/* Whether CLOCK_REALTIME is still before *until. */
static int
coll_before_deadline(const struct timespec *until)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return now.tv_sec < until->tv_sec ||
           (now.tv_sec == until->tv_sec && now.tv_nsec < until->tv_nsec);
}

/* atfork: waits for a writer thread still starting to be past its start (a thread's start
 * allocates: ASan's runtime, which holds no allocator lock across fork, then leaves the
 * child an allocator lock that no thread of the child will release), then for the writer
 * to finish its current piece of work and holds it there (coll_work_lock), then holds the
 * registry and writer locks across fork, so that the child gets them free and no SQLite,
 * zlib or malloc lock is held by the writer at the moment of the fork. */
void
coll_fork_prepare(void)
{
    struct timespec until, pause = {0, 100000};
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 5;
    atomic_fetch_add(&coll_forks_waiting, 1);
    for (;;) {
        while (!coll_writer_settled() && coll_before_deadline(&until))
            nanosleep(&pause, NULL);
        coll_fork_quiesced = pthread_mutex_timedlock(&coll_work_lock, &until) == 0;
        pthread_mutex_lock(&coll_bg_lock);
        /* another thread's first hook may have started a writer meanwhile */
        if (!coll_bg_running || atomic_load(&coll_bg_started) || !coll_before_deadline(&until))
            break;
        pthread_mutex_unlock(&coll_bg_lock);
        if (coll_fork_quiesced)
            pthread_mutex_unlock(&coll_work_lock);
    }
    pthread_mutex_lock(&coll_registry_lock);
}

void
coll_fork_parent(void)
{
    atomic_fetch_sub(&coll_forks_waiting, 1);
    pthread_mutex_unlock(&coll_registry_lock);
    pthread_mutex_unlock(&coll_bg_lock);
    if (coll_fork_quiesced)
        pthread_mutex_unlock(&coll_work_lock);
}

/* In the child: the writer thread is gone and the parent's writer, rings and CUPTI are not
 * ours. Drop them; with DPRO_FORK=follow the child records into its own file from its
 * next call on, with stop it records nothing. */
void
coll_fork_child(void)
{
    pthread_mutex_init(&coll_registry_lock, NULL);
    pthread_mutex_init(&coll_bg_lock, NULL);
    pthread_mutex_init(&coll_work_lock, NULL);
    coll_wake_init();
    pthread_cond_init(&coll_bg_done, NULL);
    coll_pid = getpid();
    atomic_store(&coll_forks_waiting, 0);
    if (!coll_fork_quiesced)
        coll_warn("forked while the writer thread was busy for 5 s: this child may hang in "
                  "a lock that thread held, or lose its trace");
    /* The parent's rings: their data is the parent's; the memory is left as is. */
    coll_rings = NULL;
    coll_bg_running = 0;
    coll_bg_mode = 0;
    coll_flush_asked = coll_flush_served = 0;
    atomic_store(&coll_bg_stop, 0);
    atomic_store(&coll_bg_finished, 0);
    atomic_store(&coll_bg_started, 0);
    atomic_store(&coll_sigterm_flag, 0);
    memset(&coll_bg, 0, sizeof coll_bg); /* the parent's writer: never touched again */
    if (coll_tls && coll_key_ok)
        pthread_setspecific(coll_thread_key, NULL);
    coll_tls = NULL; /* the next hook builds a fresh ring and a writer thread */
    coll_tls_state = 0;
    cupti_forget_after_fork();
    coll_anchor(&coll_anchor_realtime_ns, &coll_anchor_monotonic_ns);
    atomic_store(&coll_recording, coll_cfg.fork_follow);
}

/* ---- exec -----------------------------------------------------------------------------
 * Every exec* the collector interposes is resolved at load (coll_exec_resolve, from the
 * constructor): an exec may come from a vfork child (CPython's subprocess), which shares
 * the parent's memory and must not call dlsym (locks, allocation) there. */

typedef int (*coll_execve_fn)(const char *, char *const[], char *const[]);
typedef int (*coll_execv_fn)(const char *, char *const[]);

static void *coll_slot_execve, *coll_slot_execv, *coll_slot_execvp, *coll_slot_execvpe;

void
coll_exec_resolve(void)
{
    coll_real(COLL_LIB_CUDART, "execve", &coll_slot_execve);
    coll_real(COLL_LIB_CUDART, "execv", &coll_slot_execv);
    coll_real(COLL_LIB_CUDART, "execvp", &coll_slot_execvp);
    coll_real(COLL_LIB_CUDART, "execvpe", &coll_slot_execvpe);
}

/* Flushes what is recorded before the process image is replaced (nothing in a vfork
 * child: coll_flush_now leaves the parent's writer alone). */
static void
coll_before_exec(void)
{
    int saved = errno;
    coll_flush_now();
    errno = saved;
}

COLL_EXPORT int
execve(const char *path, char *const argv[], char *const envp[])
{
    coll_execve_fn real = (coll_execve_fn)coll_real(COLL_LIB_CUDART, "execve", &coll_slot_execve);
    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    coll_before_exec();
    return real(path, argv, envp);
}

COLL_EXPORT int
execv(const char *path, char *const argv[])
{
    coll_execv_fn real = (coll_execv_fn)coll_real(COLL_LIB_CUDART, "execv", &coll_slot_execv);
    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    coll_before_exec();
    return real(path, argv);
}

COLL_EXPORT int
execvp(const char *file, char *const argv[])
{
    coll_execv_fn real = (coll_execv_fn)coll_real(COLL_LIB_CUDART, "execvp", &coll_slot_execvp);
    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    coll_before_exec();
    return real(file, argv);
}

COLL_EXPORT int
execvpe(const char *file, char *const argv[], char *const envp[])
{
    coll_execve_fn real = (coll_execve_fn)coll_real(COLL_LIB_CUDART, "execvpe", &coll_slot_execvpe);
    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    coll_before_exec();
    return real(file, argv, envp);
}
