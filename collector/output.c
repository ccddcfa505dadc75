/*
 * output.c: the trace file of a process: its directory, its name (rank, host, pid) and
 * the meta rows written when it is opened.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

extern char **environ;

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
static const char *const coll_batch_job_vars[] = {"PBS_JOBID", "LSB_JOBID", NULL};

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

/* The start time of process pid in clock ticks after boot (/proc/PID/stat, field 22: the
 * same across exec); 0 when it cannot be read. */
static unsigned long long
coll_proc_start(pid_t pid)
{
    char path[64], buf[1024];
    unsigned long long ticks = 0;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    /* fields after the command name, which may hold spaces and ')': the last ')' ends it */
    char *p = strrchr(buf, ')');
    for (int field = 2; p && field < 22; field++)
        p = strchr(p + 1, ' ');
    if (p)
        ticks = strtoull(p + 1, NULL, 10);
    return ticks;
}

/* Writes the job id into out: what every rank of one job shares and the next job launched
 * with the same configuration does not. In order: DPRO_JOB_ID (the user's); the launcher's
 * run id (torchrun's TORCHELASTIC_RUN_ID, except its default "none"; mpirun's job id);
 * for ranks all on this host (LOCAL_WORLD_SIZE = WORLD_SIZE: a single-node torchrun) the
 * launcher process, their parent: host, pid and start time; the batch scheduler's job and
 * step (srun makes a step per launch); the rendezvous (MASTER_ADDR, MASTER_PORT) of a
 * multi-node job that has none of these (two such jobs on one port share it: DPRO_JOB_ID
 * tells them apart); a process that is not one rank of several: itself (host, pid, start
 * time). Empty when none applies (ranks with no launcher id). */
static void
coll_job_id(char *out, size_t n, const char *host)
{
    const char *v, *world = coll_env_first(coll_world_vars), *step = getenv("SLURM_STEP_ID");
    const char *local = getenv("LOCAL_WORLD_SIZE");
    const char *addr = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT");
    int ranked = coll_env_first(coll_rank_vars) != NULL;

    if (step && !*step)
        step = NULL;
    out[0] = '\0';
    if ((v = getenv("DPRO_JOB_ID")) && *v)
        snprintf(out, n, "%s", v);
    else if ((v = getenv("TORCHELASTIC_RUN_ID")) && *v && strcmp(v, "none") != 0)
        snprintf(out, n, "%s", v);
    else if ((v = getenv("OMPI_MCA_ess_base_jobid")) && *v)
        snprintf(out, n, "%s", v);
    else if (ranked && world && local && atol(world) > 1 && atol(local) == atol(world))
        snprintf(out, n, "local-%s-%d-%llu", host, (int)getppid(), coll_proc_start(getppid()));
    else if ((v = getenv("SLURM_JOB_ID")) && *v)
        snprintf(out, n, "%s%s%s", v, step ? "." : "", step ? step : "");
    else if ((v = coll_env_first(coll_batch_job_vars)))
        snprintf(out, n, "%s", v);
    else if (ranked && addr && *addr && port && *port)
        snprintf(out, n, "rdzv-%s-%s", addr, port);
    else if (!ranked || (world && atol(world) <= 1))
        snprintf(out, n, "proc-%s-%d-%llu", host, (int)getpid(), coll_proc_start(getpid()));
}

uint64_t coll_anchor_realtime_ns, coll_anchor_monotonic_ns;

/* Takes a (CLOCK_REALTIME, CLOCK_MONOTONIC) pair. */
void
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

/* Writes the version of a library the job has loaded, if it answers; slot is the call
 * site's own cache of the function (one per function). */
static void
coll_meta_version(dpro_writer *w, const char *key, enum coll_lib lib, const char *fn, void **slot)
{
    coll_version_fn f = (coll_version_fn)coll_real(lib, fn, slot);
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
    coll_job_id(buf, sizeof buf, host);
    if (buf[0])
        dpro_writer_set_meta(w, DPRO_META_JOB_ID, buf);
    coll_command_line(buf, sizeof buf);
    dpro_writer_set_meta(w, DPRO_META_COMMAND, buf);
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
    dpro_writer_set_meta_int(w, "setting.DPRO_EXIT_WAIT_MS", coll_cfg.exit_wait_ms);
    dpro_writer_set_meta_int(w, "setting.DPRO_RING_EVENTS", coll_cfg.ring_events);
    dpro_writer_set_meta(w, "setting.DPRO_FORK", coll_cfg.fork_follow ? "follow" : "stop");
    dpro_writer_set_meta_int(w, "setting.DPRO_ZLIB_LEVEL", coll_cfg.zlib_level);
    static void *slot_rt, *slot_drv, *slot_nccl;
    coll_meta_version(w, "cuda_runtime_version", COLL_LIB_CUDART, "cudaRuntimeGetVersion",
                      &slot_rt);
    coll_meta_version(w, "cuda_driver_version", COLL_LIB_CUDART, "cudaDriverGetVersion", &slot_drv);
    coll_meta_version(w, "nccl_version", COLL_LIB_NCCL, "ncclGetVersion", &slot_nccl);
    cupti_write_meta(w, 0);
}

/* Opens this process's trace file; NULL (warned once) when it cannot. */
dpro_writer *
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
