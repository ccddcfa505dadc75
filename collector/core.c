/*
 * core.c: the collector's settings (DPRO_* variables), its one-line warnings, the table of
 * the APIs it records, and the load-time constructor.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "internal.h"

extern char **environ;

struct coll_settings coll_cfg;
_Atomic int coll_recording;
int coll_use_tsc;
__thread struct coll_thread *coll_tls __attribute__((tls_model("initial-exec")));

const struct coll_api_info coll_api_table[COLL_API_COUNT] = {[COLL_API_NONE] = {"none", 0, 0},
#define COLL_API_INFO(id, kind, domain) [COLL_API_##id] = {#id, kind, domain},
                                                             COLL_API_LIST(COLL_API_INFO)
#undef COLL_API_INFO
};

/* ---- warnings ------------------------------------------------------------------------- */

/* Prints one line "dpro-collector: ..." on stderr (no allocation, one write). */
void
coll_warn(const char *fmt, ...)
{
    char buf[512];
    int n = snprintf(buf, sizeof buf, "dpro-collector[%d]: ", (int)getpid());
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof buf)
        n += vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof buf - 1)
        n = (int)sizeof buf - 2;
    buf[n++] = '\n';
    ssize_t w = write(2, buf, (size_t)n);
    (void)w;
}

/* ---- settings ------------------------------------------------------------------------- */

/* Returns the integer value of env variable name, or dflt when unset or not a number. */
long
coll_env_long(const char *name, long dflt)
{
    const char *v = getenv(name);
    char *end;
    if (v == NULL || *v == '\0')
        return dflt;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end != '\0')
        return dflt;
    return x;
}

/* Returns 0 for "0", "no", "off", "false", 1 for other values, dflt when unset. */
int
coll_env_bool(const char *name, int dflt)
{
    const char *v = getenv(name);
    if (v == NULL || *v == '\0')
        return dflt;
    if (!strcmp(v, "0") || !strcasecmp(v, "no") || !strcasecmp(v, "off") || !strcasecmp(v, "false"))
        return 0;
    return 1;
}

/* DPRO_TEST_CLOCK_OFFSET_NS (testing only): signed ns added to every timestamp this
 * process writes (events and the monotonic halves of the clock anchors), as if its
 * CLOCK_MONOTONIC were skewed; lets the replay's clock alignment be tested on one host. */
int64_t coll_test_clock_offset_ns;

/* Returns the integer value of env variable name when it lies in [lo, hi], dflt when unset;
 * a value that is not a number or out of range is warned about (once: settings are read
 * once per process) and dflt used. */
static long
coll_env_range(const char *name, long dflt, long lo, long hi)
{
    const char *v = getenv(name);
    char *end;
    if (v == NULL || *v == '\0')
        return dflt;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end != '\0' || x < lo || x > hi) {
        coll_warn("%s=%s is not a number in %ld..%ld; using %ld", name, v, lo, hi, dflt);
        return dflt;
    }
    return x;
}

uint32_t coll_test_drain_pause_ms;

/* DPRO_TEST_WRITER_START_FAILS (testing only): this many attempts to start the writer
 * thread fail as pthread_create would (EAGAIN). DPRO_TEST_FINISH_PAUSE_MS (testing only):
 * the writer waits this long before its last drain at exit, as on a slow filesystem.
 * DPRO_TEST_CUPTI_QUEUE_MAX (testing only): completed CUPTI buffers held for the writer
 * (cupti.c's CUPTI_QUEUE_MAX when 0). */
long coll_test_start_fails;
uint32_t coll_test_finish_pause_ms;
uint32_t coll_test_cupti_queue_max;

int coll_output_too_long;

/* Reads the DPRO_* settings into coll_cfg (defaults for what is unset; malformed values are
 * warned about and replaced by the default). */
static void
coll_settings_read(void)
{
    coll_test_clock_offset_ns = coll_env_long("DPRO_TEST_CLOCK_OFFSET_NS", 0);
    coll_test_drain_pause_ms = (uint32_t)coll_env_range("DPRO_TEST_DRAIN_PAUSE_MS", 0, 0, 60000);
    coll_test_start_fails = coll_env_range("DPRO_TEST_WRITER_START_FAILS", 0, 0, 1L << 30);
    coll_test_finish_pause_ms = (uint32_t)coll_env_range("DPRO_TEST_FINISH_PAUSE_MS", 0, 0, 600000);
    coll_test_cupti_queue_max =
        (uint32_t)coll_env_range("DPRO_TEST_CUPTI_QUEUE_MAX", 0, 0, 1 << 20);
    const char *out = getenv("DPRO_OUTPUT");
    if (out && strlen(out) >= sizeof coll_cfg.output) {
        /* never cut: the cut name would be another directory */
        coll_warn("DPRO_OUTPUT is longer than %zu bytes; recording nothing",
                  sizeof coll_cfg.output - 1);
        coll_output_too_long = 1;
        out = NULL;
    }
    snprintf(coll_cfg.output, sizeof coll_cfg.output, "%s", out && *out ? out : "dpro-traces");
    coll_cfg.cuda = coll_env_bool("DPRO_CUDA", 1);
    coll_cfg.nccl = coll_env_bool("DPRO_NCCL", 1);
    coll_cfg.cupti = coll_env_bool("DPRO_CUPTI", 1);
    coll_cfg.nvtx = coll_env_bool("DPRO_NVTX", 1);
    coll_cfg.stacks = coll_env_bool("DPRO_STACKS", 0);
    coll_cfg.stack_sample = (uint32_t)coll_env_range("DPRO_STACK_SAMPLE", 1, 1, 1L << 30);
    coll_cfg.flush_ms = (uint32_t)coll_env_range("DPRO_FLUSH_MS", 200, 1, 60000);
    coll_cfg.drain_ms = (uint32_t)coll_env_range("DPRO_DRAIN_MS", 5, 1, 1000);
    if (coll_cfg.drain_ms > coll_cfg.flush_ms)
        coll_cfg.drain_ms = coll_cfg.flush_ms;
    long ring = coll_env_range("DPRO_RING_EVENTS", 32768, 1, 1L << 24);
    uint32_t slots = 256;
    while (slots < (uint64_t)ring && slots < (1u << 24))
        slots <<= 1;
    coll_cfg.ring_events = slots;
    const char *fork_mode = getenv("DPRO_FORK");
    if (fork_mode && *fork_mode && strcmp(fork_mode, "stop") && strcmp(fork_mode, "follow"))
        coll_warn("DPRO_FORK=%s is neither follow nor stop; using follow", fork_mode);
    coll_cfg.fork_follow = !(fork_mode && !strcmp(fork_mode, "stop"));
    coll_cfg.zlib_level = (int)coll_env_range("DPRO_ZLIB_LEVEL", 1, 1, 9);
    coll_cfg.exit_wait_ms = (uint32_t)coll_env_range("DPRO_EXIT_WAIT_MS", 10000, 0, 600000);
}

/* ---- start ---------------------------------------------------------------------------- */

/* Points NVTX at this library (NVTX v3 finds an injection only through
 * NVTX_INJECTION64_PATH or a static symbol). */
static void
coll_nvtx_env(void)
{
    Dl_info info;
    char path[PATH_MAX];
    if (getenv("NVTX_INJECTION64_PATH"))
        return;
    if (!dladdr((void *)coll_nvtx_env, &info) || !info.dli_fname)
        return;
    /* A relative LD_PRELOAD path was resolved against the current directory at load; make
     * it absolute now, before the job (or a child it execs) changes directory. */
    if (info.dli_fname[0] == '/')
        setenv("NVTX_INJECTION64_PATH", info.dli_fname, 0);
    else if (realpath(info.dli_fname, path))
        setenv("NVTX_INJECTION64_PATH", path, 0);
}

/* Load time: settings, clock, fork/exit/SIGTERM handlers, NVTX injection path. Records
 * nothing and opens nothing: the first hooked call of a thread does that. */
__attribute__((constructor)) static void
coll_constructor(void)
{
    int saved = errno;
    coll_wake_init();
    coll_settings_read();
    coll_tsc_init();
    coll_pid = getpid();
    coll_anchor(&coll_anchor_realtime_ns, &coll_anchor_monotonic_ns);
    coll_exec_resolve();
    if (coll_env_bool("DPRO_DISABLE", 0) || coll_output_too_long) {
        errno = saved;
        return;
    }
    coll_cpu_note_affinity(); /* the job's CPUs at its start (host_cpu_list) */
    coll_key_ok = pthread_key_create(&coll_thread_key, coll_thread_exit) == 0;
    pthread_atfork(coll_fork_prepare, coll_fork_parent, coll_fork_child);
    coll_install_sigterm();
    if (coll_cfg.nvtx)
        coll_nvtx_env();
    atomic_store(&coll_recording, 1);
    errno = saved;
}
