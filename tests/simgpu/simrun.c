/* simrun: start N ranks of a program on the simulated device, as torchrun would.
 *
 *   simrun -n N [--gpus-per-node K] [--straggler RANK:FACTOR]... [--bind-cpus]
 *          [--simgpu-libdir DIR] [--timeout SECONDS] [--kill-on-failure] -- PROGRAM ARGS...
 *
 * Each rank gets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK,
 * ROLE_RANK, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RUN_ID, and SIMRUN_RDZV_FILE
 * (a file in a private temporary directory where rank 0 publishes its NCCL
 * unique id; see simrun_rdzv.h).  A straggler rank gets SIMGPU_SLOWDOWN=FACTOR.
 * With --gpus-per-node K the ranks are laid out on simulated nodes of K GPUs, rank r on
 * node r / K, as torchrun --nnodes would place them: LOCAL_RANK, LOCAL_WORLD_SIZE and
 * GROUP_RANK follow the node, SIMGPU_GPUS_PER_NODE=K gives the device's NCCL the same
 * layout, and each rank runs in a UTS namespace of its own whose host name is
 * "simnodeN", so what records the host (the collector) sees one host per node.  A rank
 * that cannot get the namespace (unshare needs CAP_SYS_ADMIN) fails, saying so.
 * With --bind-cpus each rank's process is bound to one CPU of those simrun may run on,
 * rank r to the (r mod n)-th of the n, as mpirun binds a rank to a core: without it the
 * kernel may place a rank's woken threads on the core where the other rank's host thread
 * spins, and on a machine with as many cores as ranks the job then waits a timeslice in
 * a share of its iterations that changes from run to run (docs/fidelity.md).  Ranks on
 * the simulated nodes of --gpus-per-node still share this machine's CPUs: rank r's CPU
 * follows r, not its node.
 * With --simgpu-libdir (or SIMRUN_SIMGPU_LIBDIR; default: .libs beside simrun, where the
 * build puts them) the directory is put first on LD_LIBRARY_PATH, and the stand-ins found
 * there (libcudart.so.13, libcuda.so.1, libnccl.so.2, libcupti.so.13, libcublasLt.so.13,
 * libcublas.so.13) are appended to LD_PRELOAD (after what is there, so a tool preloaded
 * before simrun still interposes): programs whose DT_RPATH names other copies, such as
 * torch's libraries pointing at the nvidia wheels, then bind to the stand-ins, which are
 * already loaded under those sonames (tests/simgpu/README.md).  SIMRUN_NO_PRELOAD=1 leaves
 * LD_PRELOAD alone.  TRITON_LIBCUDA_PATH, unless set, names the directory too, so that
 * torch.compile's Triton links its launcher against the stand-in libcuda.  Under ASan, ASAN_OPTIONS
 * gets verify_asan_link_order=0, as the preloaded stand-ins come before the sanitizer's runtime.
 * simrun waits for every rank and exits with the worst status (a signal counts as 128+signal); with
 * --kill-on-failure it terminates the others when one fails (torchrun's
 * behaviour); with --timeout it kills all ranks after SECONDS and exits 124. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cpuset.h"

#define SIMRUN_MAX_RANKS 256

struct straggler {
    int rank;
    char factor[32];
};

static pid_t g_pids[SIMRUN_MAX_RANKS];
static int g_n;

/* Appends to environment variable `name` the string `add`, separated by `sep`. */
static int
env_append(const char *name, const char *sep, const char *add)
{
    const char *old = getenv(name);
    size_t n = strlen(add) + (old ? strlen(old) : 0) + strlen(sep) + 1;
    char *v = malloc(n);
    if (!v)
        return -1;
    snprintf(v, n, "%s%s%s", old && *old ? old : "", old && *old ? sep : "", add);
    setenv(name, v, 1);
    free(v);
    return 0;
}

/* The stand-ins of libdir that exist, appended to LD_PRELOAD (see the header). */
static int
preload_stand_ins(const char *libdir)
{
    static const char *libs[] = {"libcudart.so.13", "libcuda.so.1",      "libnccl.so.2",
                                 "libcupti.so.13",  "libcublasLt.so.13", "libcublas.so.13"};
    char path[4096];
    int rc = 0, any = 0;
    const char *no = getenv("SIMRUN_NO_PRELOAD");
    if (no && strcmp(no, "1") == 0)
        return 0;
    for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]) && rc == 0; i++) {
        int k = snprintf(path, sizeof(path), "%s/%s", libdir, libs[i]);
        if (k > 0 && (size_t)k < sizeof(path) && access(path, R_OK) == 0) {
            rc = env_append("LD_PRELOAD", " ", path);
            any = 1;
        }
    }
    if (rc == 0 && any)
        rc = env_append("ASAN_OPTIONS", ":", "verify_asan_link_order=0");
    return rc;
}

static void
usage(FILE *f)
{
    fprintf(f, "usage: simrun -n N [--gpus-per-node K] [--straggler RANK:FACTOR]...\n"
               "              [--bind-cpus] [--simgpu-libdir DIR]\n"
               "              [--timeout SECONDS] [--kill-on-failure] -- PROGRAM ARGS...\n");
}

static void
kill_all(int sig)
{
    for (int i = 0; i < g_n; i++)
        if (g_pids[i] > 0)
            kill(g_pids[i], sig);
}

static void
forward_signal(int sig)
{
    kill_all(sig);
}

static void
set_int_env(const char *name, int v)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%d", v);
    setenv(name, buf, 1);
}

/* What the command line asked. */
struct simrun_opts {
    struct straggler strag[SIMRUN_MAX_RANKS];
    int nstrag, kill_on_failure;
    int gpus_per_node; /* 0: every rank on one node */
    int bind_cpus;     /* --bind-cpus: each rank on one CPU of cpus */
    int ncpus;         /* the CPUs simrun may run on (with --bind-cpus) */
    int *cpus;         /* malloc'd, ncpus of them */
    double timeout;
    const char *libdir;
};

/* Parses the options into *o and g_n; optind is then the program's index.
 * Returns -1 to go on, or the exit status. */
static int
parse_cmdline(int argc, char **argv, struct simrun_opts *o)
{
    static const struct option longopts[] = {
        {"nproc", required_argument, NULL, 'n'},
        {"straggler", required_argument, NULL, 's'},
        {"gpus-per-node", required_argument, NULL, 'g'},
        {"simgpu-libdir", required_argument, NULL, 'L'},
        {"timeout", required_argument, NULL, 't'},
        {"kill-on-failure", no_argument, NULL, 'k'},
        {"bind-cpus", no_argument, NULL, 'b'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int rc = -1, c;

    while (rc == -1 && (c = getopt_long(argc, argv, "+n:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'n':
            g_n = atoi(optarg);
            break;
        case 's': {
            const char *colon = strchr(optarg, ':');
            if (!colon || o->nstrag >= SIMRUN_MAX_RANKS || atof(colon + 1) <= 0) {
                fprintf(stderr, "simrun: --straggler wants RANK:FACTOR, got '%s'\n", optarg);
                rc = 2;
                break;
            }
            o->strag[o->nstrag].rank = atoi(optarg);
            snprintf(o->strag[o->nstrag].factor, sizeof(o->strag[o->nstrag].factor), "%s",
                     colon + 1);
            o->nstrag++;
            break;
        }
        case 'g':
            o->gpus_per_node = atoi(optarg);
            if (o->gpus_per_node < 1) {
                fprintf(stderr, "simrun: --gpus-per-node wants a count >= 1, got '%s'\n", optarg);
                rc = 2;
            }
            break;
        case 'L':
            o->libdir = optarg;
            break;
        case 't':
            o->timeout = atof(optarg);
            break;
        case 'k':
            o->kill_on_failure = 1;
            break;
        case 'b':
            o->bind_cpus = 1;
            break;
        case 'h':
            usage(stdout);
            rc = 0;
            break;
        default:
            usage(stderr);
            rc = 2;
            break;
        }
    }
    if (rc == -1 && (g_n < 1 || g_n > SIMRUN_MAX_RANKS || optind >= argc)) {
        usage(stderr);
        rc = 2;
    }
    return rc;
}

/* Points Triton (torch.compile) at the stand-in libcuda.so.1 in libdir: it links its
 * launcher against the directory TRITON_LIBCUDA_PATH names, before ldconfig's cache, which
 * on a host with a driver names the real one.  A TRITON_LIBCUDA_PATH already set is kept.
 * Returns 0, or 1 out of memory. */
static int
triton_libcuda(const char *libdir)
{
    char path[4096];
    char *abs;
    snprintf(path, sizeof(path), "%s/libcuda.so.1", libdir);
    if (getenv("TRITON_LIBCUDA_PATH") || access(path, R_OK) != 0)
        return 0;
    abs = realpath(libdir, NULL);
    if (!abs)
        return errno == ENOMEM;
    setenv("TRITON_LIBCUDA_PATH", abs, 1);
    free(abs);
    return 0;
}

/* Finds the stand-ins' directory (libdir, else .libs beside simrun) and puts it in the
 * environment: its stand-ins on LD_PRELOAD, itself first on LD_LIBRARY_PATH.
 * Returns 0, or 1 out of memory. */
static int
setup_env(const char *libdir)
{
    static char self[4096];
    int rc = 0;

    if (!libdir || !*libdir) {
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 8);
        char *slash = n > 0 ? memrchr(self, '/', (size_t)n) : NULL;
        if (slash) {
            strcpy(slash, "/.libs");
            if (access(self, X_OK) == 0)
                libdir = self;
        }
    }
    if (libdir && *libdir && preload_stand_ins(libdir) != 0)
        rc = 1;
    if (rc == 0 && libdir && *libdir) {
        const char *old = getenv("LD_LIBRARY_PATH");
        size_t n = strlen(libdir) + (old ? strlen(old) : 0) + 2;
        char *v = malloc(n);
        if (v) {
            snprintf(v, n, "%s%s%s", libdir, old && *old ? ":" : "", old && *old ? old : "");
            setenv("LD_LIBRARY_PATH", v, 1);
            free(v);
        } else {
            rc = 1;
        }
    }
    if (rc == 0 && libdir && *libdir)
        rc = triton_libcuda(libdir);
    return rc;
}

/* Lists in o->cpus the CPUs simrun may run on (its affinity mask, as large as the host's),
 * for --bind-cpus. Returns 0, or 1 when the mask cannot be read (said on stderr). */
static int
list_cpus(struct simrun_opts *o)
{
    size_t size = 0;
    cpu_set_t *set = cpuset_affinity(0, &size);
    int rc = 0;

    if (!set) {
        fprintf(stderr, "simrun: --bind-cpus: cannot read the CPUs allowed: %s\n", strerror(errno));
        rc = 1;
    }
    int count = set ? CPU_COUNT_S(size, set) : 0;
    if (rc == 0 && count > 0 && !(o->cpus = malloc((size_t)count * sizeof *o->cpus))) {
        fprintf(stderr, "simrun: --bind-cpus: out of memory\n");
        rc = 1;
    }
    for (size_t c = 0; rc == 0 && o->ncpus < count && c < size * 8; c++)
        if (CPU_ISSET_S(c, size, set))
            o->cpus[o->ncpus++] = (int)c;
    if (rc == 0 && o->ncpus == 0) {
        fprintf(stderr, "simrun: --bind-cpus: no CPU allowed\n");
        rc = 1;
    }
    CPU_FREE(set);
    return rc;
}

/* In the child of rank r: sets torchrun's variables and runs the program; does not return. */
static void
exec_rank(int r, const struct simrun_opts *o, char **prog, const char *rdzv, const char *port,
          const char *runid)
{
    int k = o->gpus_per_node > 0 ? o->gpus_per_node : g_n, node = r / k;
    int local_world = g_n - node * k < k ? g_n - node * k : k;
    if (o->gpus_per_node > 0) {
        char host[64];
        snprintf(host, sizeof(host), "simnode%d", node);
        if (unshare(CLONE_NEWUTS) != 0 || sethostname(host, strlen(host)) != 0) {
            fprintf(stderr,
                    "simrun: --gpus-per-node: rank %d cannot have its node's host name %s "
                    "(a UTS namespace: %s; needs root or CAP_SYS_ADMIN)\n",
                    r, host, strerror(errno));
            _exit(126);
        }
        set_int_env("SIMGPU_GPUS_PER_NODE", k);
    }
    if (o->bind_cpus) {
        int cpu = o->cpus[r % o->ncpus];
        cpu_set_t *one = CPU_ALLOC(cpu + 1); /* sized for the CPU: its id may pass 1,023 */
        size_t size = CPU_ALLOC_SIZE(cpu + 1);
        if (one) {
            CPU_ZERO_S(size, one);
            CPU_SET_S((size_t)cpu, size, one);
        }
        if (!one || sched_setaffinity(0, size, one) != 0) {
            fprintf(stderr, "simrun: --bind-cpus: rank %d cannot be bound to CPU %d: %s\n", r, cpu,
                    strerror(errno));
            _exit(126);
        }
        CPU_FREE(one);
    }
    set_int_env("RANK", r);
    set_int_env("LOCAL_RANK", r % k);
    set_int_env("WORLD_SIZE", g_n);
    set_int_env("LOCAL_WORLD_SIZE", local_world);
    set_int_env("GROUP_RANK", node);
    set_int_env("ROLE_RANK", r);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", port, 1);
    setenv("TORCHELASTIC_RUN_ID", runid, 1);
    setenv("SIMRUN_RDZV_FILE", rdzv, 1);
    for (int i = 0; i < o->nstrag; i++)
        if (o->strag[i].rank == r)
            setenv("SIMGPU_SLOWDOWN", o->strag[i].factor, 1);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    execvp(prog[0], prog);
    fprintf(stderr, "simrun: cannot run %s: %s\n", prog[0], strerror(errno));
    _exit(127);
}

/* MASTER_PORT for this run: below the kernel's ephemeral range
 * (/proc/sys/net/ipv4/ip_local_port_range; 32768 where it cannot be read), from 20000 up,
 * starting at one picked by simrun's pid, the first that 127.0.0.1 can bind now. Inside
 * that range a rank's client socket may be given the very port it connects to and
 * connect to itself (TCP's self-connect), holding the port the store must listen on: the
 * job then fails with EADDRINUSE. */
static int
master_port(void)
{
    int lo = 32768, hi = 0, first = 20000;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        if (fscanf(f, "%d %d", &lo, &hi) != 2 || lo <= first + 100)
            lo = 32768;
        fclose(f);
    }
    int span = lo - first, start = first + (int)(getpid() % span), port = start;
    for (int i = 0; i < span; i++) {
        port = first + (start - first + i) % span;
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a;
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_port = htons((uint16_t)port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        int free_now = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
        if (fd >= 0)
            close(fd);
        if (free_now || fd < 0)
            break;
    }
    return port;
}

/* Forks the g_n ranks of prog, rendezvous file rdzv. Returns 0, or 1 when a fork failed
 * (the ranks started are killed). */
static int
spawn_ranks(const struct simrun_opts *o, char **prog, const char *rdzv)
{
    char port[16], runid[64];
    int rc = 0;

    snprintf(port, sizeof(port), "%d", master_port());
    snprintf(runid, sizeof(runid), "simrun-%d", (int)getpid());
    signal(SIGINT, forward_signal);
    signal(SIGTERM, forward_signal);
    fflush(NULL);
    for (int r = 0; r < g_n && rc == 0; r++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("simrun: fork");
            kill_all(SIGKILL);
            rc = 1;
        } else if (pid == 0) {
            exec_rank(r, o, prog, rdzv, port, runid);
        } else {
            g_pids[r] = pid;
        }
    }
    return rc;
}

/* Notes the exit of child pid with wait status st; with --kill-on-failure a failure
 * terminates the others. Returns how many ranks it was (0 or 1). */
static int
reap_rank(const struct simrun_opts *o, pid_t pid, int st, int *worst)
{
    int found = 0;

    for (int r = 0; r < g_n; r++) {
        int code;
        if (g_pids[r] != pid)
            continue;
        code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        g_pids[r] = 0;
        found++;
        if (code > *worst)
            *worst = code;
        if (code != 0) {
            fprintf(stderr, "simrun: rank %d exited with status %d\n", r, code);
            if (o->kill_on_failure)
                kill_all(SIGTERM);
        }
    }
    return found;
}

/* Waits for every rank, killing all after --timeout. Returns the worst status, or 124
 * when timed out. */
static int
wait_ranks(const struct simrun_opts *o)
{
    struct timespec t0, now, nap = {0, 2000000};
    int worst = 0, alive = g_n, timed_out = 0;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (alive > 0) {
        int st;
        pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid > 0) {
            alive -= reap_rank(o, pid, st, &worst);
            continue;
        }
        if (pid < 0 && errno != EINTR)
            break;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (o->timeout > 0 && !timed_out &&
            (double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) / 1e9 >
                o->timeout) {
            fprintf(stderr, "simrun: timeout after %.1f s, killing the ranks\n", o->timeout);
            kill_all(SIGKILL);
            timed_out = 1;
        }
        nanosleep(&nap, NULL);
    }
    return timed_out ? 124 : worst;
}

int
main(int argc, char **argv)
{
    static struct simrun_opts o;
    char dir[] = "/tmp/simrun-XXXXXX", rdzv[64];
    int rc;

    o.libdir = getenv("SIMRUN_SIMGPU_LIBDIR");
    rc = parse_cmdline(argc, argv, &o);
    if (rc == -1 && !mkdtemp(dir)) {
        perror("simrun: mkdtemp");
        rc = 1;
    } else if (rc == -1) {
        snprintf(rdzv, sizeof(rdzv), "%s/nccl-id", dir);
        rc = setup_env(o.libdir);
        if (rc == 0 && o.bind_cpus)
            rc = list_cpus(&o);
        if (rc == 0)
            rc = spawn_ranks(&o, argv + optind, rdzv);
        if (rc == 0)
            rc = wait_ranks(&o);
        unlink(rdzv);
        rmdir(dir);
    }
    free(o.cpus);
    return rc;
}
