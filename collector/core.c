/*
 * core.c: the collector's process-wide machinery: settings, real-function lookup, per-thread
 * rings, the background writer thread, the output file, and the awkward cases (fork, exec,
 * SIGTERM, exit, a failing output directory).
 */
#include "config.h"

#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include "collector.h"

extern char **environ;

struct coll_settings coll_cfg;
_Atomic int coll_recording;
int coll_use_tsc;
__thread struct coll_thread *coll_tls __attribute__((tls_model("initial-exec")));

/* 0: may create its state; 1: creating it now; 2: never records (exited, background). */
static __thread int coll_tls_state __attribute__((tls_model("initial-exec")));

const struct coll_api_info coll_api_table[COLL_API_COUNT] = {[COLL_API_NONE] = {"none", 0, 0},
#define COLL_API_INFO(id, kind, domain) [COLL_API_##id] = {#id, kind, domain},
                                                             COLL_API_LIST(COLL_API_INFO)
#undef COLL_API_INFO
};

/* ---- warnings ------------------------------------------------------------------------- */

/* Prints one line "dpro-collector: ..." on stderr (no allocation, one write). */
static void coll_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void
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
static long
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
static int
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
static int64_t coll_test_clock_offset_ns;

/* Reads the DPRO_* settings into coll_cfg (defaults for what is unset or malformed). */
static void
coll_settings_read(void)
{
    coll_test_clock_offset_ns = coll_env_long("DPRO_TEST_CLOCK_OFFSET_NS", 0);
    const char *out = getenv("DPRO_OUTPUT");
    snprintf(coll_cfg.output, sizeof coll_cfg.output, "%s", out && *out ? out : "dpro-traces");
    coll_cfg.cuda = coll_env_bool("DPRO_CUDA", 1);
    coll_cfg.nccl = coll_env_bool("DPRO_NCCL", 1);
    coll_cfg.cupti = coll_env_bool("DPRO_CUPTI", 1);
    coll_cfg.nvtx = coll_env_bool("DPRO_NVTX", 1);
    coll_cfg.stacks = coll_env_bool("DPRO_STACKS", 0);
    long sample = coll_env_long("DPRO_STACK_SAMPLE", 1);
    coll_cfg.stack_sample = sample < 1 ? 1u : (uint32_t)sample;
    long flush = coll_env_long("DPRO_FLUSH_MS", 200);
    coll_cfg.flush_ms = flush < 1 ? 1u : flush > 60000 ? 60000u : (uint32_t)flush;
    long drain = coll_env_long("DPRO_DRAIN_MS", 5);
    coll_cfg.drain_ms = drain < 1 ? 1u : drain > 1000 ? 1000u : (uint32_t)drain;
    if (coll_cfg.drain_ms > coll_cfg.flush_ms)
        coll_cfg.drain_ms = coll_cfg.flush_ms;
    long ring = coll_env_long("DPRO_RING_EVENTS", 32768);
    uint32_t slots = 256;
    while (slots < (uint64_t)ring && slots < (1u << 24))
        slots <<= 1;
    coll_cfg.ring_events = slots;
    const char *fork_mode = getenv("DPRO_FORK");
    coll_cfg.fork_follow = !(fork_mode && !strcmp(fork_mode, "stop"));
    long level = coll_env_long("DPRO_ZLIB_LEVEL", 1);
    coll_cfg.zlib_level = level < 1 ? 1 : level > 9 ? 9 : (int)level;
}

/* ---- real functions ------------------------------------------------------------------- */

static const char *const coll_lib_names[COLL_LIB_COUNT][4] = {
    [COLL_LIB_CUDART] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so", NULL},
    [COLL_LIB_CUDA] = {"libcuda.so.1", "libcuda.so", NULL, NULL},
    [COLL_LIB_NCCL] = {"libnccl.so.2", "libnccl.so", NULL, NULL},
};

/* File-name stems of the libraries: a loaded object named STEM.* or STEM-* is one of them
 * (private copies that wheels bundle are renamed by auditwheel: libcudart-<hash>.so.12,
 * and carry that name as their soname, so no soname above finds them). */
static const char *const coll_lib_stems[COLL_LIB_COUNT] = {
    [COLL_LIB_CUDART] = "libcudart",
    [COLL_LIB_CUDA] = "libcuda",
    [COLL_LIB_NCCL] = "libnccl",
};

/* The k-th loaded object whose file name has a stem, for coll_scan_object. */
struct coll_scan {
    const char *stem;
    int skip;            /* matches still to pass over */
    char path[PATH_MAX]; /* the match's path, "" when none */
};

/* dl_iterate_phdr callback: stops (1) at the match after `skip` others, copying its path. */
static int
coll_scan_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct coll_scan *s = arg;
    (void)size;
    const char *path = info->dlpi_name;
    if (path == NULL || *path == '\0')
        return 0;
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t len = strlen(s->stem), plen = strlen(path);
    if (strncmp(base, s->stem, len) != 0 || (base[len] != '.' && base[len] != '-') ||
        plen >= sizeof s->path || s->skip-- > 0)
        return 0;
    memcpy(s->path, path, plen + 1);
    return 1;
}

/* Returns `name` from an already loaded object of lib found by file name (any version, any
 * directory, renamed copies), NULL when none defines it. Loads nothing. */
static void *
coll_real_scan(enum coll_lib lib, const char *name)
{
    struct coll_scan s;
    s.stem = coll_lib_stems[lib];
    for (int k = 0; k < 16; k++) {
        s.skip = k;
        s.path[0] = '\0';
        if (dl_iterate_phdr(coll_scan_object, &s) == 0 || s.path[0] == '\0')
            return NULL;
        void *h = dlopen(s.path, RTLD_LAZY | RTLD_NOLOAD);
        if (h) {
            void *fn = dlsym(h, name);
            dlclose(h);
            if (fn)
                return fn;
        }
    }
    return NULL;
}

#define COLL_MISSING ((void *)1)

void *
coll_real(enum coll_lib lib, const char *name, void **slot)
{
    void *fn = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (coll_likely(fn != NULL))
        return fn == COLL_MISSING ? NULL : fn;
    int saved = errno;
    fn = dlsym(RTLD_NEXT, name);
    /* Libraries dlopen'ed with RTLD_LOCAL (Python extensions) are not in our scope. */
    for (int i = 0; fn == NULL && i < 4 && coll_lib_names[lib][i]; i++) {
        void *h = dlopen(coll_lib_names[lib][i], RTLD_LAZY | RTLD_NOLOAD);
        if (h) {
            fn = dlsym(h, name);
            dlclose(h);
        }
    }
    if (fn == NULL)
        fn = coll_real_scan(lib, name);
    __atomic_store_n(slot, fn ? fn : COLL_MISSING, __ATOMIC_RELEASE);
    errno = saved;
    return fn;
}

/* ---- lock-free maps used on the hot path ------------------------------------------------
 * Open addressing over a fixed array; keys are inserted once by CAS and never removed;
 * values may be overwritten (0 means unknown). Full map: lookups miss, nothing breaks. */
#define COLL_MAP_SIZE 4096

struct coll_map {
    _Atomic uint64_t key[COLL_MAP_SIZE];
    _Atomic uint64_t val[COLL_MAP_SIZE];
};

static struct coll_map coll_stream_map; /* cudaStream_t -> CUPTI stream id */
static struct coll_map coll_kernel_map; /* cudaKernel_t -> host function */

/* Mixes a key into a slot index (murmur3 finaliser). */
static inline uint32_t
coll_map_hash(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return (uint32_t)k & (COLL_MAP_SIZE - 1);
}

/* Returns the slot of key k, inserting it when insert is set; -1 when absent or full. */
static int
coll_map_slot(struct coll_map *m, uint64_t k, int insert)
{
    uint32_t i = coll_map_hash(k);
    for (uint32_t n = 0; n < COLL_MAP_SIZE; n++, i = (i + 1) & (COLL_MAP_SIZE - 1)) {
        uint64_t cur = atomic_load_explicit(&m->key[i], memory_order_acquire);
        if (cur == k)
            return (int)i;
        if (cur == 0) {
            if (!insert)
                return -1;
            uint64_t expect = 0;
            if (atomic_compare_exchange_strong(&m->key[i], &expect, k) || expect == k)
                return (int)i;
        }
    }
    return -1;
}

/* Returns the value of key k (0 if unknown). */
static uint64_t
coll_map_get(struct coll_map *m, uint64_t k)
{
    int i = coll_map_slot(m, k, 0);
    return i < 0 ? 0 : atomic_load_explicit(&m->val[i], memory_order_acquire);
}

/* Sets the value of key k (ignored when the map is full). */
static void
coll_map_put(struct coll_map *m, uint64_t k, uint64_t v)
{
    int i = coll_map_slot(m, k, 1);
    if (i >= 0)
        atomic_store_explicit(&m->val[i], v, memory_order_release);
}

void
coll_kernel_handle_add(const void *handle, const void *host_fn)
{
    if (handle)
        coll_map_put(&coll_kernel_map, (uint64_t)(uintptr_t)handle, (uint64_t)(uintptr_t)host_fn);
}

typedef int (*coll_stream_get_id_fn)(const void *stream, unsigned long long *id);

/* Asks the runtime for the id of a stream; 0 when it cannot tell. */
static uint64_t
coll_stream_query(const void *stream, int ptsz)
{
    static void *slot, *slot_ptsz;
    coll_stream_get_id_fn fn = (coll_stream_get_id_fn)coll_real(
        COLL_LIB_CUDART, ptsz ? "cudaStreamGetId_ptsz" : "cudaStreamGetId",
        ptsz ? &slot_ptsz : &slot);
    unsigned long long id = 0;
    if (fn == NULL || fn(stream, &id) != 0)
        return 0;
    return id;
}

uint64_t
coll_stream_id(struct coll_thread *t, const void *stream, int ptsz)
{
    uintptr_t h = (uintptr_t)stream;
    if (h == 0 && ptsz)
        h = 2; /* cudaStreamPerThread */
    if (h == 2) {
        if (t->ptds_stream == 0)
            t->ptds_stream = coll_stream_query((const void *)2, 0);
        return t->ptds_stream ? t->ptds_stream : h;
    }
    uint64_t key = h + 1; /* key 0 means empty */
    uint64_t id = coll_map_get(&coll_stream_map, key);
    if (coll_likely(id != 0))
        return id;
    int saved = errno;
    id = coll_stream_query(stream, 0);
    errno = saved;
    if (id == 0)
        return h;
    coll_map_put(&coll_stream_map, key, id);
    return id;
}

uint64_t
coll_stream_id_known(struct coll_thread *t, const void *stream, int ptsz)
{
    uintptr_t h = (uintptr_t)stream;
    if (h == 0 && ptsz)
        h = 2;
    if (h == 2)
        return t->ptds_stream ? t->ptds_stream : h;
    uint64_t id = coll_map_get(&coll_stream_map, h + 1);
    return id ? id : h;
}

void
coll_stream_forget(const void *stream)
{
    int i = coll_map_slot(&coll_stream_map, (uint64_t)(uintptr_t)stream + 1, 0);
    if (i >= 0)
        atomic_store_explicit(&coll_stream_map.val[i], 0, memory_order_release);
}

void
coll_rec_put_bytes(struct coll_thread *t, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (uint32_t i = 1; len > 0; i++) {
        size_t n = len < COLL_CONT_BYTES ? len : COLL_CONT_BYTES;
        memcpy(coll_rec_slot(t, i), p, n);
        p += n;
        len -= n;
    }
}

/* ---- threads and rings ---------------------------------------------------------------- */

static pthread_mutex_t coll_registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct coll_ring *coll_rings; /* under coll_registry_lock */
static uint32_t coll_thread_count;   /* under coll_registry_lock */
static pthread_key_t coll_thread_key;
static int coll_key_ok;
static pid_t coll_pid; /* the process the state belongs to */

/* Background thread state. */
static pthread_mutex_t coll_bg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t coll_bg_wake; /* on CLOCK_MONOTONIC: coll_wake_init */
static pthread_cond_t coll_bg_done = PTHREAD_COND_INITIALIZER;
static pthread_t coll_bg_thread;
static int coll_bg_running;        /* under coll_bg_lock */
static uint64_t coll_flush_asked;  /* under coll_bg_lock: flush requests */
static uint64_t coll_flush_served; /* under coll_bg_lock */
static _Atomic int coll_bg_stop;   /* ask the thread to finish and close */
static _Atomic int coll_bg_finished;
static _Atomic int coll_sigterm_flag;
static int coll_atexit_done;
static pthread_once_t coll_process_once = PTHREAD_ONCE_INIT;

static void *coll_bg_main(void *arg);
static void coll_exit_handler(void);

/* (Re)initialises coll_bg_wake so that its timed waits use CLOCK_MONOTONIC. */
static void
coll_wake_init(void)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&coll_bg_wake, &attr);
    pthread_condattr_destroy(&attr);
}

/* Called when a recording thread exits: its ring is drained, then freed, by the
 * background thread. */
static void
coll_thread_exit(void *arg)
{
    struct coll_thread *t = arg;
    coll_tls_state = 2;
    coll_tls = NULL;
    if (t && t->ring)
        atomic_store_explicit(&t->ring->dead, 1, memory_order_release);
    free(t);
}

/* Once per process (and again in a forked child): CUPTI, the exit handler. */
static void
coll_process_start(void)
{
    if (coll_cfg.cupti && coll_cfg.cuda)
        cupti_start();
    if (!coll_atexit_done) {
        coll_atexit_done = 1;
        atexit(coll_exit_handler);
    }
}

/* Starts the background thread if it is not running. */
static void
coll_bg_ensure(void)
{
    pthread_mutex_lock(&coll_bg_lock);
    if (!coll_bg_running && !atomic_load(&coll_bg_stop)) {
        pthread_attr_t attr;
        sigset_t all, old;
        pthread_attr_init(&attr);
        sigfillset(&all);
        /* The thread is born with every signal blocked: SIGTERM goes to the job. */
        pthread_sigmask(SIG_SETMASK, &all, &old);
        if (pthread_create(&coll_bg_thread, &attr, coll_bg_main, NULL) == 0)
            coll_bg_running = 1;
        else
            coll_warn("cannot start the writer thread; recording stops");
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        pthread_attr_destroy(&attr);
        if (!coll_bg_running)
            atomic_store(&coll_recording, 0);
    }
    pthread_mutex_unlock(&coll_bg_lock);
}

struct coll_thread *
coll_thread_first(void)
{
    if (coll_tls_state != 0 || !atomic_load_explicit(&coll_recording, memory_order_relaxed))
        return NULL;
    int saved = errno;
    coll_tls_state = 1;
    pthread_once(&coll_process_once, coll_process_start);
    struct coll_thread *t = calloc(1, sizeof *t);
    size_t bytes =
        sizeof(struct coll_ring) + (size_t)coll_cfg.ring_events * sizeof(struct coll_rec);
    struct coll_ring *r = NULL;
    if (t == NULL || posix_memalign((void **)&r, 64, bytes) != 0) {
        free(t);
        coll_tls_state = 2;
        errno = saved;
        return NULL;
    }
    memset(r, 0, sizeof *r);
    r->mask = coll_cfg.ring_events - 1;
    r->tid = (uint32_t)syscall(SYS_gettid);
    t->ring = r;
    t->tid = r->tid;
    pthread_mutex_lock(&coll_registry_lock);
    t->index = coll_thread_count++;
    r->next = coll_rings;
    coll_rings = r;
    pthread_mutex_unlock(&coll_registry_lock);
    if (coll_key_ok)
        pthread_setspecific(coll_thread_key, t);
    coll_tls = t;
    coll_bg_ensure();
    coll_tls_state = 0;
    t->guard = 1;
    errno = saved;
    return t;
}

/* ---- the output file ------------------------------------------------------------------ */

/* Returns the first of the named env variables that is set, or NULL. */
static const char *
coll_env_first(const char *const *names)
{
    for (; *names; names++) {
        const char *v = getenv(*names);
        if (v && *v)
            return v;
    }
    return NULL;
}

static const char *const coll_rank_vars[] = {
    "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID", "PMIX_RANK", NULL};
static const char *const coll_local_rank_vars[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                                   "SLURM_LOCALID", "MPI_LOCALRANKID", NULL};
static const char *const coll_world_vars[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                              "SLURM_NTASKS", NULL};
static const char *const coll_job_vars[] = {"TORCHELASTIC_RUN_ID",
                                            "SLURM_JOB_ID",
                                            "PBS_JOBID",
                                            "LSB_JOBID",
                                            "OMPI_MCA_ess_base_jobid",
                                            NULL};

/* Keeps [A-Za-z0-9._-] of src in dst (others become '_'). */
static void
coll_safe_name(char *dst, size_t size, const char *src)
{
    size_t i = 0;
    for (; src[i] && i + 1 < size; i++) {
        char c = src[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '-' || c == '_';
        dst[i] = ok ? c : '_';
    }
    dst[i] = '\0';
}

/* Creates dir and its parents (mode 0750); returns 0 or -1. */
static int
coll_mkdirs(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(path, 0750) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(path, 0750) != 0 && errno != EEXIST)
        return -1;
    return 0;
}

/* Reads /proc/self/cmdline into buf as one space-separated line. */
static void
coll_command_line(char *buf, size_t size)
{
    buf[0] = '\0';
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, buf, size - 1);
    close(fd);
    if (n <= 0)
        return;
    for (ssize_t i = 0; i < n; i++)
        if (buf[i] == '\0')
            buf[i] = ' ';
    while (n > 0 && buf[n - 1] == ' ')
        n--;
    buf[n] = '\0';
}

static uint64_t coll_anchor_realtime_ns, coll_anchor_monotonic_ns;

/* Takes a (CLOCK_REALTIME, CLOCK_MONOTONIC) pair. */
static void
coll_anchor(uint64_t *realtime, uint64_t *monotonic)
{
    struct timespec a, b, c;
    clock_gettime(CLOCK_MONOTONIC, &a);
    clock_gettime(CLOCK_REALTIME, &b);
    clock_gettime(CLOCK_MONOTONIC, &c);
    uint64_t ma = (uint64_t)a.tv_sec * 1000000000ull + (uint64_t)a.tv_nsec;
    uint64_t mc = (uint64_t)c.tv_sec * 1000000000ull + (uint64_t)c.tv_nsec;
    *monotonic = ma + (mc - ma) / 2;
    *realtime = (uint64_t)b.tv_sec * 1000000000ull + (uint64_t)b.tv_nsec;
}

typedef int (*coll_version_fn)(int *);

/* Writes the version of a library the job has loaded, if it answers. */
static void
coll_meta_version(dpro_writer *w, const char *key, enum coll_lib lib, const char *fn)
{
    static void *slots[8];
    static int used;
    if (used >= 8)
        return;
    coll_version_fn f = (coll_version_fn)coll_real(lib, fn, &slots[used++]);
    int v = 0;
    if (f && f(&v) == 0)
        dpro_writer_set_meta_int(w, key, v);
}

/* Writes the meta rows known when the file is opened. */
static void
coll_write_meta(dpro_writer *w, const char *host)
{
    char buf[8192];
    const char *v;
    dpro_writer_set_meta(w, DPRO_META_SOURCE, "collector");
    dpro_writer_set_meta(w, DPRO_META_HOST, host);
    dpro_writer_set_meta_int(w, DPRO_META_PID, getpid());
    if ((v = coll_env_first(coll_rank_vars)))
        dpro_writer_set_meta(w, DPRO_META_RANK, v);
    if ((v = coll_env_first(coll_local_rank_vars)))
        dpro_writer_set_meta(w, DPRO_META_LOCAL_RANK, v);
    if ((v = coll_env_first(coll_world_vars)))
        dpro_writer_set_meta(w, DPRO_META_WORLD_SIZE, v);
    if ((v = coll_env_first(coll_job_vars)))
        dpro_writer_set_meta(w, DPRO_META_JOB_ID, v);
    coll_command_line(buf, sizeof buf);
    dpro_writer_set_meta(w, "command", buf);
    dpro_writer_set_meta(w, "clock", "CLOCK_MONOTONIC");
    dpro_writer_set_meta(w, "collector_stamps", coll_use_tsc ? "tsc" : "clock_gettime");
    dpro_writer_set_meta_int(w, "anchor_start_realtime_ns", (int64_t)coll_anchor_realtime_ns);
    dpro_writer_set_meta_int(w, "anchor_start_monotonic_ns",
                             (int64_t)coll_anchor_monotonic_ns + coll_test_clock_offset_ns);
    dpro_writer_set_meta(w, "collector_version", PACKAGE_VERSION);
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "DPRO_", 5) != 0)
            continue;
        const char *eq = strchr(*e, '=');
        if (eq == NULL)
            continue;
        snprintf(buf, sizeof buf, "setting.%.*s", (int)(eq - *e), *e);
        dpro_writer_set_meta(w, buf, eq + 1);
    }
    /* The settings in force, defaults included. */
    dpro_writer_set_meta(w, "setting.DPRO_OUTPUT", coll_cfg.output);
    dpro_writer_set_meta_int(w, "setting.DPRO_CUDA", coll_cfg.cuda);
    dpro_writer_set_meta_int(w, "setting.DPRO_NCCL", coll_cfg.nccl);
    dpro_writer_set_meta_int(w, "setting.DPRO_CUPTI", coll_cfg.cupti);
    dpro_writer_set_meta_int(w, "setting.DPRO_NVTX", coll_cfg.nvtx);
    dpro_writer_set_meta_int(w, "setting.DPRO_STACKS", coll_cfg.stacks);
#ifdef HAVE_LIBUNWIND
    dpro_writer_set_meta(w, "stacks", coll_cfg.stacks ? "libunwind" : "off");
#else
    dpro_writer_set_meta(w, "stacks", coll_cfg.stacks ? "unavailable" : "off");
#endif
    dpro_writer_set_meta_int(w, "setting.DPRO_STACK_SAMPLE", coll_cfg.stack_sample);
    dpro_writer_set_meta_int(w, "setting.DPRO_FLUSH_MS", coll_cfg.flush_ms);
    dpro_writer_set_meta_int(w, "setting.DPRO_DRAIN_MS", coll_cfg.drain_ms);
    dpro_writer_set_meta_int(w, "setting.DPRO_RING_EVENTS", coll_cfg.ring_events);
    dpro_writer_set_meta(w, "setting.DPRO_FORK", coll_cfg.fork_follow ? "follow" : "stop");
    dpro_writer_set_meta_int(w, "setting.DPRO_ZLIB_LEVEL", coll_cfg.zlib_level);
    coll_meta_version(w, "cuda_runtime_version", COLL_LIB_CUDART, "cudaRuntimeGetVersion");
    coll_meta_version(w, "cuda_driver_version", COLL_LIB_CUDART, "cudaDriverGetVersion");
    coll_meta_version(w, "nccl_version", COLL_LIB_NCCL, "ncclGetVersion");
    cupti_write_meta(w, 0);
}

/* Opens this process's trace file; NULL (warned once) when it cannot. */
static dpro_writer *
coll_open_output(void)
{
    char host[256] = "host", safe_host[256], rank[64], path[4096 + 512], err[512];
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    char *dot = strchr(host, '.');
    if (dot)
        *dot = '\0';
    coll_safe_name(safe_host, sizeof safe_host, host);
    const char *r = coll_env_first(coll_rank_vars);
    if (r) {
        char safe_rank[32];
        coll_safe_name(safe_rank, sizeof safe_rank, r);
        snprintf(rank, sizeof rank, "rank%s", safe_rank);
    } else {
        snprintf(rank, sizeof rank, "proc");
    }
    if (coll_mkdirs(coll_cfg.output) != 0) {
        coll_warn("cannot create output directory %s: %s; recording stops", coll_cfg.output,
                  strerror(errno));
        return NULL;
    }
    dpro_writer_options opts = {0};
    opts.exclusive_create = 1;
    opts.file_mode = 0640;
    opts.zlib_level = coll_cfg.zlib_level;
    dpro_writer *w = NULL;
    /* After exec the pid is the same: pick the next free name. */
    for (int k = 0; k < 100; k++) {
        struct stat st;
        if (k == 0)
            snprintf(path, sizeof path, "%s/%s-%s-%d%s", coll_cfg.output, rank, safe_host,
                     (int)getpid(), DPRO_TRACE_SUFFIX);
        else
            snprintf(path, sizeof path, "%s/%s-%s-%d.%d%s", coll_cfg.output, rank, safe_host,
                     (int)getpid(), k, DPRO_TRACE_SUFFIX);
        if (lstat(path, &st) == 0)
            continue;
        err[0] = '\0';
        if (dpro_writer_open(path, &opts, &w, err, sizeof err) != DPRO_OK) {
            coll_warn("cannot create trace %s: %s; recording stops", path, err[0] ? err : "error");
            return NULL;
        }
        break;
    }
    if (w == NULL) {
        coll_warn("no free trace name in %s; recording stops", coll_cfg.output);
        return NULL;
    }
    coll_write_meta(w, host);
    if (coll_env_bool("DPRO_VERBOSE", 0))
        coll_warn("writing %s", path);
    return w;
}

/* ---- TSC stamps ---------------------------------------------------------------------------
 * mono(stamp) = ns_a + (stamp - tsc_a) * ns_per_tick. (tsc_a, ns_a) is re-taken at every
 * drain, so records (at most a drain interval old) are converted close to an anchor; the
 * slope is measured over a baseline of about a second (re-based every second), so NTP
 * slewing of CLOCK_MONOTONIC is followed and reading jitter weighs little. */
static struct {
    uint64_t tsc_a, ns_a; /* latest anchor */
    uint64_t tsc_b, ns_b; /* baseline anchor (about 1 s older) */
    double ns_per_tick;
} coll_tsc;

/* Takes a (TSC, CLOCK_MONOTONIC) pair, the tightest of three. */
static void
coll_tsc_pair(uint64_t *tsc, uint64_t *ns)
{
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 3; i++) {
        uint64_t a = coll_now(), t = coll_stamp(), b = coll_now();
        if (b - a < best) {
            best = b - a;
            *tsc = t;
            *ns = a + (b - a) / 2;
        }
    }
}

/* Decides whether hooks stamp with the TSC (DPRO_CLOCK=tsc|monotonic, default: the TSC
 * when the kernel's clocksource is the TSC) and takes the first anchor. */
static void
coll_tsc_init(void)
{
    coll_use_tsc = 0;
#if defined(__x86_64__)
    const char *mode = getenv("DPRO_CLOCK");
    int want = 0;
    if (mode && !strcmp(mode, "tsc")) {
        want = 1;
    } else if (!mode || !strcmp(mode, "auto") || !*mode) {
        char src[32] = "";
        int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource",
                      O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            ssize_t n = read(fd, src, sizeof src - 1);
            close(fd);
            src[n > 0 ? n : 0] = '\0';
        }
        want = strncmp(src, "tsc", 3) == 0;
    }
    coll_use_tsc = want;
    if (want) {
        coll_tsc_pair(&coll_tsc.tsc_b, &coll_tsc.ns_b);
        coll_tsc.tsc_a = coll_tsc.tsc_b;
        coll_tsc.ns_a = coll_tsc.ns_b;
        coll_tsc.ns_per_tick = 0;
    }
#endif
}

/* Re-anchors the TSC map (background thread, before each drain). */
static void
coll_tsc_anchor(void)
{
    if (!coll_use_tsc)
        return;
    uint64_t tsc, ns;
    coll_tsc_pair(&tsc, &ns);
    if (tsc > coll_tsc.tsc_b && ns > coll_tsc.ns_b + 1000000)
        coll_tsc.ns_per_tick = (double)(ns - coll_tsc.ns_b) / (double)(tsc - coll_tsc.tsc_b);
    coll_tsc.tsc_a = tsc;
    coll_tsc.ns_a = ns;
    if (ns > coll_tsc.ns_b + 2000000000ull) {
        coll_tsc.tsc_b = tsc;
        coll_tsc.ns_b = ns;
    }
}

uint64_t
coll_stamp_to_ns(uint64_t stamp)
{
    if (!coll_use_tsc || stamp == 0)
        return stamp;
    if (coll_tsc.ns_per_tick == 0) {
        /* No slope yet (less than 1 ms since start): measure one now. */
        uint64_t t = coll_tsc.tsc_b, n = coll_tsc.ns_b;
        struct timespec ms = {0, 2000000};
        nanosleep(&ms, NULL);
        coll_tsc_anchor();
        if (coll_tsc.ns_per_tick == 0 && coll_tsc.tsc_a > t)
            coll_tsc.ns_per_tick = (double)(coll_tsc.ns_a - n) / (double)(coll_tsc.tsc_a - t);
    }
    double d = ((double)(int64_t)(stamp - coll_tsc.tsc_a)) * coll_tsc.ns_per_tick;
    return (uint64_t)((int64_t)coll_tsc.ns_a + (int64_t)d);
}

/* ---- background thread ----------------------------------------------------------------- */

uint64_t *
coll_umap_find(struct coll_umap *m, uint64_t k, int insert)
{
    if (insert && (m->used + 1) * 2 > m->cap) {
        size_t ncap = m->cap ? m->cap * 2 : 1024;
        uint64_t *nk = calloc(ncap, sizeof *nk), *nv = calloc(ncap, sizeof *nv);
        if (nk == NULL || nv == NULL) {
            free(nk);
            free(nv);
            return NULL;
        }
        for (size_t i = 0; i < m->cap; i++) {
            if (m->keys[i] == 0)
                continue;
            size_t j = coll_map_hash(m->keys[i]) & (ncap - 1);
            while (nk[j])
                j = (j + 1) & (ncap - 1);
            nk[j] = m->keys[i];
            nv[j] = m->vals[i];
        }
        free(m->keys);
        free(m->vals);
        m->keys = nk;
        m->vals = nv;
        m->cap = ncap;
    }
    if (m->cap == 0)
        return NULL;
    k = k ? k : ~0ull; /* 0 marks empty slots */
    size_t j = (coll_map_hash(k) ^ (uint32_t)(k >> 32)) & (m->cap - 1);
    while (m->keys[j]) {
        if (m->keys[j] == k)
            return &m->vals[j];
        j = (j + 1) & (m->cap - 1);
    }
    if (!insert)
        return NULL;
    m->keys[j] = k;
    m->vals[j] = 0;
    m->used++;
    return &m->vals[j];
}

void
coll_umap_free(struct coll_umap *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

/* The background thread's own state (rebuilt in a forked child). */
static struct {
    dpro_writer *w;
    int failed;              /* the output failed: nothing more is written */
    struct coll_umap names;  /* function pointer (+flag bits) -> string id */
    struct coll_umap allocs; /* live allocation address -> size (sizes of frees) */
    uint32_t api_names[COLL_API_COUNT];
} coll_bg;

uint32_t
coll_intern(dpro_writer *w, const char *text)
{
    uint32_t id = 0;
    if (w == NULL || text == NULL || *text == '\0')
        return 0;
    if (dpro_writer_intern(w, text, &id) != DPRO_OK)
        return 0;
    return id;
}

/* Stops recording after an output error (warned once). */
static void
coll_output_failed(dpro_writer *w, const char *what)
{
    if (coll_bg.failed)
        return;
    coll_bg.failed = 1;
    coll_warn("%s failed: %s; recording stops", what, w ? dpro_writer_errmsg(w) : "");
    atomic_store(&coll_recording, 0);
}

void
coll_append(dpro_writer *w, const dpro_event *ev)
{
    if (w == NULL || coll_bg.failed)
        return;
    dpro_event skewed;
    if (coll_test_clock_offset_ns != 0) {
        skewed = *ev;
        skewed.start_ns = (uint64_t)((int64_t)skewed.start_ns + coll_test_clock_offset_ns);
        skewed.end_ns = (uint64_t)((int64_t)skewed.end_ns + coll_test_clock_offset_ns);
        ev = &skewed;
    }
    if (dpro_writer_append(w, ev) != DPRO_OK)
        coll_output_failed(w, "writing the trace");
}

typedef int (*coll_func_get_name_fn)(const char **name, const void *fn);

/* Returns the string id of the kernel a launch record names (0 if unknown). */
static uint32_t
coll_kernel_name(dpro_writer *w, const struct coll_rec *r)
{
    static void *slot_rt, *slot_drv;
    uint64_t fn = r->a0;
    if (fn == 0)
        return 0;
    uint64_t key = fn ^ ((uint64_t)(r->flags & (COLL_REC_HANDLE | COLL_REC_CUFUNC)) << 56);
    uint64_t *v = coll_umap_find(&coll_bg.names, key, 1);
    if (v && *v)
        return (uint32_t)*v;
    const char *name = NULL;
    char buf[64];
    if (r->flags & COLL_REC_CUFUNC) {
        coll_func_get_name_fn f =
            (coll_func_get_name_fn)coll_real(COLL_LIB_CUDA, "cuFuncGetName", &slot_drv);
        if (f == NULL || f(&name, (const void *)(uintptr_t)fn) != 0)
            name = NULL;
    } else {
        if (r->flags & COLL_REC_HANDLE) {
            uint64_t host = coll_map_get(&coll_kernel_map, fn);
            if (host)
                fn = host;
        }
        Dl_info info;
        if (dladdr((const void *)(uintptr_t)fn, &info) && info.dli_sname &&
            info.dli_saddr == (void *)(uintptr_t)fn)
            name = info.dli_sname;
        if (name == NULL) {
            coll_func_get_name_fn f =
                (coll_func_get_name_fn)coll_real(COLL_LIB_CUDART, "cudaFuncGetName", &slot_rt);
            if (f == NULL || f(&name, (const void *)(uintptr_t)fn) != 0)
                name = NULL;
        }
    }
    if (name == NULL) {
        snprintf(buf, sizeof buf, "kernel@%#llx", (unsigned long long)fn);
        name = buf;
    }
    uint32_t id = coll_intern(w, name);
    if (v)
        *v = id;
    return id;
}

/* Bytes of each ncclDataType_t (int8 .. float8e5m2). */
static const uint32_t coll_nccl_type_size[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};

/* Returns the bytes of count elements of an ncclDataType_t. */
static uint64_t
coll_nccl_bytes(uint64_t count, uint32_t dtype)
{
    if (dtype >= sizeof coll_nccl_type_size / sizeof coll_nccl_type_size[0])
        return 0;
    return count * coll_nccl_type_size[dtype];
}

/* Maps a collective API to its dpro_coll_op. */
static uint32_t
coll_coll_op(uint16_t api)
{
    switch (api) {
    case COLL_API_ncclAllReduce:
        return DPRO_COLL_ALLREDUCE;
    case COLL_API_ncclBroadcast:
    case COLL_API_ncclBcast:
        return DPRO_COLL_BROADCAST;
    case COLL_API_ncclReduce:
        return DPRO_COLL_REDUCE;
    case COLL_API_ncclAllGather:
        return DPRO_COLL_ALLGATHER;
    case COLL_API_ncclReduceScatter:
        return DPRO_COLL_REDUCESCATTER;
    case COLL_API_ncclAlltoAll:
        return DPRO_COLL_ALLTOALL;
    case COLL_API_ncclSend:
        return DPRO_COLL_SEND;
    case COLL_API_ncclRecv:
        return DPRO_COLL_RECV;
    default:
        return 0;
    }
}

/* Is api a kernel launch (runtime or driver)? */
static int
coll_is_launch(uint16_t api)
{
    return (api >= COLL_API_cudaLaunchKernel && api <= COLL_API_cudaLaunchCooperativeKernel_ptsz) ||
           (api >= COLL_API_cuLaunchKernel && api <= COLL_API_cuLaunchKernelEx_ptsz);
}

/* Is api a copy call? */
static int
coll_is_memcpy(uint16_t api)
{
    return api >= COLL_API_cudaMemcpy && api <= COLL_API_cudaMemcpyPeerAsync;
}

/* Is api a memset call? */
static int
coll_is_memset(uint16_t api)
{
    return api >= COLL_API_cudaMemset && api <= COLL_API_cudaMemsetAsync_ptsz;
}

/* Turns one record (and its continuation bytes) into events. */
static void
coll_convert(dpro_writer *w, const struct coll_rec *r, uint32_t tid, const unsigned char *cont,
             size_t cont_len)
{
    if (r->api == COLL_API_NONE || r->api >= COLL_API_COUNT)
        return;
    const struct coll_api_info *info = &coll_api_table[r->api];
    if (info->kind == DPRO_KIND_MARKER) {
        uint32_t len = (r->flags & COLL_REC_TEXT) ? (uint32_t)r->a4 : 0;
        if (len > cont_len)
            len = (uint32_t)cont_len;
        nvtxi_convert(w, r, tid, (const char *)cont, len);
        return;
    }
    dpro_event ev;
    memset(&ev, 0, sizeof ev);
    ev.start_ns = coll_stamp_to_ns(r->start);
    ev.end_ns = coll_stamp_to_ns(r->end);
    ev.thread = tid;
    ev.result = r->result;
    ev.stream = r->stream;
    ev.correlation = r->corr;
    if ((r->flags & COLL_REC_FRAMES) && r->a4 > 0) {
        uint32_t n = (uint32_t)r->a4;
        if (n * sizeof(uintptr_t) > cont_len)
            n = (uint32_t)(cont_len / sizeof(uintptr_t));
        uintptr_t frames[COLL_STACK_MAX];
        memcpy(frames, cont, n * sizeof(uintptr_t));
        ev.stack = stk_intern(w, frames, n);
    }
    if (coll_bg.api_names[r->api] == 0)
        coll_bg.api_names[r->api] = coll_intern(w, info->name);
    uint32_t api_name = coll_bg.api_names[r->api];

    if (info->kind == DPRO_KIND_MEMORY && r->result == 0) {
        uint64_t *size =
            r->a0 ? coll_umap_find(&coll_bg.allocs, r->a0, r->u1 == DPRO_MEM_ALLOC) : NULL;
        if (size && r->u1 == DPRO_MEM_ALLOC) {
            *size = r->a2;
        } else if (size) {
            ev.bytes = *size; /* the size of what is freed, when we saw it allocated */
            *size = 0;
        }
        ev.kind = DPRO_KIND_MEMORY;
        ev.subkind = r->u1;
        if (r->u1 == DPRO_MEM_ALLOC)
            ev.bytes = r->a2;
        ev.address = r->a0;
        ev.value = r->u0;
        ev.device = r->u2;
        ev.correlation = 0;
        coll_append(w, &ev);
        return;
    }
    if (info->kind == DPRO_KIND_COLLECTIVE) {
        ev.kind = DPRO_KIND_COLLECTIVE;
        ev.subkind = coll_coll_op(r->api);
        ev.comm = r->a0;
        ev.seq = r->a1;
        ev.count = r->a2;
        ev.address = r->a3;
        ev.dtype = r->u0;
        ev.redop = r->u1;
        ev.peer = (int32_t)r->u2;
        ev.device = r->u3;
        ev.bytes = coll_nccl_bytes(r->a2, r->u0);
        ev.name = api_name;
        coll_append(w, &ev);
        return;
    }
    ev.kind = DPRO_KIND_API;
    ev.subkind = info->domain;
    ev.name = api_name;
    if (coll_is_launch(r->api)) {
        ev.name2 = coll_kernel_name(w, r);
        ev.grid[0] = (uint32_t)r->a1;
        ev.grid[1] = (uint32_t)(r->a1 >> 32);
        ev.grid[2] = (uint32_t)r->a2;
        ev.block[0] = (uint32_t)(r->a2 >> 32);
        ev.block[1] = (uint32_t)r->a3;
        ev.block[2] = (uint32_t)(r->a3 >> 32);
        ev.shared_mem = r->u0;
    } else if (r->api == COLL_API_cudaGraphLaunch || r->api == COLL_API_cudaGraphLaunch_ptsz) {
        ev.object = r->a0;
    } else if (coll_is_memcpy(r->api)) {
        ev.address = r->a0;
        ev.bytes = r->a2;
        ev.value = r->u0; /* cudaMemcpyKind */
    } else if (coll_is_memset(r->api)) {
        ev.address = r->a0;
        ev.bytes = r->a2;
    } else if (info->kind == DPRO_KIND_MEMORY) {
        ev.address = r->a0;
        ev.bytes = r->a2;
        ev.device = r->u2;
        ev.correlation = 0;
    } else if (r->api >= COLL_API_cudaStreamCreate &&
               r->api <= COLL_API_cudaStreamCreateWithPriority) {
        if (r->result == 0) {
            dpro_stream_info si = {.id = r->stream,
                                   .device = r->u2,
                                   .flags = r->u0,
                                   .priority = (int32_t)r->u1,
                                   .name = NULL};
            dpro_writer_add_stream(w, &si);
        }
        ev.correlation = 0;
    } else if ((r->api >= COLL_API_cudaEventCreate && r->api <= COLL_API_cudaEventQuery) ||
               r->api == COLL_API_cudaStreamWaitEvent ||
               r->api == COLL_API_cudaStreamWaitEvent_ptsz) {
        ev.object = r->a0;
        ev.value = r->u0;
    } else if (info->domain == DPRO_API_NCCL) {
        ev.comm = r->a1;
        if (r->api >= COLL_API_ncclCommInitRank && r->api <= COLL_API_ncclCommSplit &&
            r->result == 0 && r->a1) {
            dpro_comm_info ci = {.hash = r->a1,
                                 .parent_hash = r->a2,
                                 .handle = r->a0,
                                 .rank = (int32_t)r->u0,
                                 .size = (int32_t)r->u1,
                                 .device = r->u2};
            dpro_writer_add_comm(w, &ci);
        }
        if (r->api != COLL_API_ncclGroupEnd)
            ev.correlation =
                r->api == COLL_API_ncclGather || r->api == COLL_API_ncclScatter ? r->corr : 0;
        if (r->api == COLL_API_ncclGather || r->api == COLL_API_ncclScatter) {
            ev.count = r->a2;
            ev.dtype = r->u0;
            ev.peer = (int32_t)r->u2;
            ev.bytes = coll_nccl_bytes(r->a2, r->u0);
        }
    } else {
        /* synchronisation calls */
        ev.correlation = r->corr;
    }
    coll_append(w, &ev);
}

/* Reads /proc/self/task/TID/comm into name. */
static void
coll_thread_name(uint32_t tid, char *name, size_t size)
{
    char path[64];
    name[0] = '\0';
    snprintf(path, sizeof path, "/proc/self/task/%u/comm", tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, name, size - 1);
    close(fd);
    if (n < 0)
        n = 0;
    while (n > 0 && (name[n - 1] == '\n' || name[n - 1] == '\0'))
        n--;
    name[n] = '\0';
}

/* Drains one ring into the writer; returns the records consumed. */
static uint64_t
coll_drain_ring(dpro_writer *w, struct coll_ring *ring)
{
    uint64_t head = atomic_load_explicit(&ring->head, memory_order_acquire);
    uint64_t tail = atomic_load_explicit(&ring->tail, memory_order_relaxed);
    uint64_t start = tail;
    if (head != tail && !ring->named && w) {
        char name[64];
        coll_thread_name(ring->tid, name, sizeof name);
        dpro_writer_add_thread(w, ring->tid, name);
        ring->named = 1;
    }
    while (tail < head) {
        const struct coll_rec *r = &ring->slots[tail & ring->mask];
        uint32_t ncont = r->ncont;
        if (tail + 1 + ncont > head)
            break; /* cannot happen: slots are committed together */
        unsigned char cont[4 * COLL_CONT_BYTES];
        size_t len = 0;
        for (uint32_t i = 0; i < ncont && len + COLL_CONT_BYTES <= sizeof cont; i++) {
            memcpy(cont + len, &ring->slots[(tail + 1 + i) & ring->mask], COLL_CONT_BYTES);
            len += COLL_CONT_BYTES;
        }
        if (w && !coll_bg.failed)
            coll_convert(w, r, ring->tid, cont, len);
        tail += 1 + ncont;
    }
    atomic_store_explicit(&ring->tail, tail, memory_order_release);
    uint64_t dropped = atomic_load_explicit(&ring->dropped, memory_order_relaxed);
    if (dropped != ring->dropped_reported && w && !coll_bg.failed) {
        dpro_writer_add_drops(w, ring->tid, "ring_full", dropped - ring->dropped_reported);
        ring->dropped_reported = dropped;
    }
    return tail - start;
}

/* Drains every ring; frees the rings of exited threads once empty. Returns the records
 * consumed. */
static uint64_t
coll_drain_all(dpro_writer *w)
{
    uint64_t total = 0;
    coll_tsc_anchor();
    pthread_mutex_lock(&coll_registry_lock);
    struct coll_ring **link = &coll_rings;
    while (*link) {
        struct coll_ring *ring = *link;
        int dead = atomic_load_explicit(&ring->dead, memory_order_acquire);
        total += coll_drain_ring(w, ring);
        if (dead) {
            *link = ring->next;
            free(ring);
            continue;
        }
        link = &ring->next;
    }
    pthread_mutex_unlock(&coll_registry_lock);
    return total;
}

/* Is there anything to write in any ring? */
static int
coll_rings_pending(void)
{
    int any = 0;
    pthread_mutex_lock(&coll_registry_lock);
    for (struct coll_ring *r = coll_rings; r && !any; r = r->next)
        any = atomic_load_explicit(&r->head, memory_order_acquire) !=
              atomic_load_explicit(&r->tail, memory_order_relaxed);
    pthread_mutex_unlock(&coll_registry_lock);
    return any;
}

/* Flushes the writer; stops recording on error. */
static void
coll_writer_flush(void)
{
    if (coll_bg.w && !coll_bg.failed && dpro_writer_flush(coll_bg.w) != DPRO_OK)
        coll_output_failed(coll_bg.w, "flushing the trace");
}

/* Final drain and close. */
static void
coll_bg_finish(void)
{
    if (coll_bg.w == NULL && !coll_bg.failed && coll_rings_pending())
        coll_bg.w = coll_open_output();
    cupti_flush(1);
    dpro_writer *w = coll_bg.failed ? NULL : coll_bg.w;
    coll_drain_all(w);
    if (w) {
        cupti_drain(w);
        nvtxi_finish(w);
        uint64_t rt, mono;
        coll_anchor(&rt, &mono);
        dpro_writer_set_meta_int(w, "anchor_end_realtime_ns", (int64_t)rt);
        dpro_writer_set_meta_int(w, "anchor_end_monotonic_ns",
                                 (int64_t)mono + coll_test_clock_offset_ns);
        cupti_write_meta(w, 1);
    }
    if (coll_bg.w) {
        /* the last commit apart, so that a failure (a full disk) is told with its reason */
        if (!coll_bg.failed && dpro_writer_flush(coll_bg.w) != DPRO_OK)
            coll_output_failed(coll_bg.w, "writing the trace");
        if (dpro_writer_close(coll_bg.w) != DPRO_OK && !coll_bg.failed)
            coll_warn("closing the trace failed (the events committed before are kept)");
        coll_bg.w = NULL;
    }
    coll_umap_free(&coll_bg.names);
    coll_umap_free(&coll_bg.allocs);
}

/* The writer thread: every DRAIN_MS drains the rings and CUPTI's buffers into the
 * writer, every FLUSH_MS (or on request) commits; at stop or SIGTERM, finishes the file. */
static void *
coll_bg_main(void *arg)
{
    (void)arg;
    coll_tls_state = 2;
#ifdef __GLIBC__
    pthread_setname_np(pthread_self(), "dpro-collector");
#endif
    memset(&coll_bg, 0, sizeof coll_bg);
    stk_reset();
    nvtxi_reset();
    uint64_t next_flush = coll_now() + (uint64_t)coll_cfg.flush_ms * 1000000ull;
    for (;;) {
        pthread_mutex_lock(&coll_bg_lock);
        if (!atomic_load(&coll_bg_stop) && coll_flush_asked == coll_flush_served &&
            !atomic_load(&coll_sigterm_flag)) {
            struct timespec until;
            clock_gettime(CLOCK_MONOTONIC, &until);
            until.tv_nsec += (long)coll_cfg.drain_ms * 1000000L;
            until.tv_sec += until.tv_nsec / 1000000000L;
            until.tv_nsec %= 1000000000L;
            pthread_cond_timedwait(&coll_bg_wake, &coll_bg_lock, &until);
        }
        uint64_t asked = coll_flush_asked;
        pthread_mutex_unlock(&coll_bg_lock);
        if (atomic_load(&coll_bg_stop) || atomic_load(&coll_sigterm_flag))
            break;
        if (coll_bg.w == NULL && !coll_bg.failed && coll_rings_pending()) {
            coll_bg.w = coll_open_output();
            if (coll_bg.w == NULL) {
                coll_bg.failed = 1;
                atomic_store(&coll_recording, 0);
            }
        }
        dpro_writer *w = coll_bg.failed ? NULL : coll_bg.w;
        coll_drain_all(w);
        uint64_t now = coll_now();
        int flush_due = now >= next_flush || asked != coll_flush_served;
        if (flush_due) {
            if (w)
                cupti_flush(asked != coll_flush_served);
            if (w)
                cupti_drain(w);
            coll_drain_all(w);
            coll_writer_flush();
            next_flush = now + (uint64_t)coll_cfg.flush_ms * 1000000ull;
            pthread_mutex_lock(&coll_bg_lock);
            coll_flush_served = asked;
            pthread_cond_broadcast(&coll_bg_done);
            pthread_mutex_unlock(&coll_bg_lock);
        } else if (w) {
            cupti_drain(w);
        }
    }
    coll_bg_finish();
    atomic_store(&coll_bg_finished, 1);
    pthread_mutex_lock(&coll_bg_lock);
    coll_flush_served = coll_flush_asked;
    pthread_cond_broadcast(&coll_bg_done);
    pthread_mutex_unlock(&coll_bg_lock);
    return NULL;
}

void
coll_flush_now(void)
{
    if (getpid() != coll_pid)
        return; /* a vfork child shares our memory: leave the parent's thread alone */
    pthread_mutex_lock(&coll_bg_lock);
    if (coll_bg_running && !atomic_load(&coll_bg_finished)) {
        uint64_t ticket = ++coll_flush_asked;
        pthread_cond_signal(&coll_bg_wake);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 5;
        while (coll_flush_served < ticket && !atomic_load(&coll_bg_finished))
            if (pthread_cond_timedwait(&coll_bg_done, &coll_bg_lock, &until) == ETIMEDOUT)
                break;
    }
    pthread_mutex_unlock(&coll_bg_lock);
}

/* Stops the background thread after a last drain and closes the trace (idempotent). */
static void
coll_shutdown(void)
{
    if (getpid() != coll_pid)
        return;
    pthread_mutex_lock(&coll_bg_lock);
    int running = coll_bg_running;
    coll_bg_running = 0;
    atomic_store(&coll_bg_stop, 1);
    pthread_cond_signal(&coll_bg_wake);
    pthread_mutex_unlock(&coll_bg_lock);
    if (running) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 10;
        if (pthread_timedjoin_np(coll_bg_thread, NULL, &until) != 0)
            coll_warn("the writer thread did not finish; the trace may lack its tail");
    }
    atomic_store(&coll_recording, 0);
}

/* atexit: last drain, close. */
static void
coll_exit_handler(void)
{
    coll_shutdown();
}

/* Library unload or exit without atexit handlers run: same as coll_exit_handler. */
__attribute__((destructor)) static void
coll_destructor(void)
{
    coll_shutdown();
}

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
static void
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

/* atfork: hold the registry and writer locks across fork so the child gets them free. */
static void
coll_fork_prepare(void)
{
    pthread_mutex_lock(&coll_bg_lock);
    pthread_mutex_lock(&coll_registry_lock);
}

static void
coll_fork_parent(void)
{
    pthread_mutex_unlock(&coll_registry_lock);
    pthread_mutex_unlock(&coll_bg_lock);
}

/* In the child: the writer thread is gone and the parent's writer, rings and CUPTI are not
 * ours. Drop them; with DPRO_FORK=follow the child records into its own file from its
 * next call on, with stop it records nothing. */
static void
coll_fork_child(void)
{
    pthread_mutex_init(&coll_registry_lock, NULL);
    pthread_mutex_init(&coll_bg_lock, NULL);
    coll_wake_init();
    pthread_cond_init(&coll_bg_done, NULL);
    coll_pid = getpid();
    /* The parent's rings: their data is the parent's; the memory is left as is. */
    coll_rings = NULL;
    coll_bg_running = 0;
    coll_flush_asked = coll_flush_served = 0;
    atomic_store(&coll_bg_stop, 0);
    atomic_store(&coll_bg_finished, 0);
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

/* ---- exec ----------------------------------------------------------------------------- */

typedef int (*coll_execve_fn)(const char *, char *const[], char *const[]);
typedef int (*coll_execv_fn)(const char *, char *const[]);

/* Flushes what is recorded before the process image is replaced. */
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
    static void *slot;
    coll_execve_fn real = (coll_execve_fn)coll_real(COLL_LIB_CUDART, "execve", &slot);
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
    static void *slot;
    coll_execv_fn real = (coll_execv_fn)coll_real(COLL_LIB_CUDART, "execv", &slot);
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
    static void *slot;
    coll_execv_fn real = (coll_execv_fn)coll_real(COLL_LIB_CUDART, "execvp", &slot);
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
    static void *slot;
    coll_execve_fn real = (coll_execve_fn)coll_real(COLL_LIB_CUDART, "execvpe", &slot);
    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    coll_before_exec();
    return real(file, argv, envp);
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
    if (coll_env_bool("DPRO_DISABLE", 0)) {
        errno = saved;
        return;
    }
    coll_key_ok = pthread_key_create(&coll_thread_key, coll_thread_exit) == 0;
    pthread_atfork(coll_fork_prepare, coll_fork_parent, coll_fork_child);
    coll_install_sigterm();
    if (coll_cfg.nvtx)
        coll_nvtx_env();
    atomic_store(&coll_recording, 1);
    errno = saved;
}
