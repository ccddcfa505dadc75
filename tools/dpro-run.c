/*
 * dpro-run: run a command with the dpro collector preloaded.
 *
 *   dpro-run [-o DIR] [--no-cuda] [--no-nccl] [--no-cupti] [--no-nvtx] [--stacks[=N]]
 *            [--flush-ms N] [-v] -- COMMAND [ARGS...]
 *
 * Sets the DPRO_* settings in the environment, puts libdpro-collector.so first in
 * LD_PRELOAD (keeping what is there), points NVTX at the collector, prints where the
 * traces go (stderr) and execs COMMAND, so it can stand behind torchrun, mpirun or srun
 * ("torchrun --nproc-per-node 8 --no-python dpro-run -- python train.py" or
 * "mpirun -n 8 dpro-run -- ./app"), or in front of a launcher (the settings pass on to
 * every child through the environment).
 *
 * The collector is found in $DPRO_COLLECTOR, then next to the installed libraries
 * ($(pkglibdir), $(libdir)), then in the build tree next to this program.
 *
 * Exit status: COMMAND's (exec), 2 on a usage error, 126/127 when COMMAND cannot be run.
 */
#define PR_FMT "dpro-run"
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dpro_log.h"

#ifndef DPRO_LIBDIR
#define DPRO_LIBDIR "/usr/local/lib"
#endif
#ifndef DPRO_PKGLIBDIR
#define DPRO_PKGLIBDIR "/usr/local/lib/dpro"
#endif

#define RUN_COLLECTOR "libdpro-collector.so"

static void
run_usage(FILE *out)
{
    fprintf(out, "usage: dpro-run [options] -- COMMAND [ARGS...]\n"
                 "Runs COMMAND with the dpro collector preloaded; one trace per process.\n"
                 "\n"
                 "  -o, --output DIR   write traces into DIR (default ./dpro-traces)\n"
                 "      --no-cuda      do not record CUDA runtime/driver calls\n"
                 "      --no-nccl      do not record NCCL calls\n"
                 "      --no-cupti     no device-side activity (CUPTI)\n"
                 "      --no-nvtx      do not record NVTX ranges\n"
                 "      --stacks[=N]   call stacks at launch sites, one launch in N (default 1)\n"
                 "      --flush-ms N   commit the trace every N ms (default 200)\n"
                 "  -v, --verbose      the collector names each trace file it writes\n"
                 "  -h, --help         this help\n"
                 "  -V, --version      print the version\n");
}

/* Parses a positive integer option; returns 0 and sets *out, or -1. */
static int
run_parse_uint(const char *s, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < 1 || v > INT_MAX)
        return -1;
    *out = v;
    return 0;
}

/* Stores in path (size bytes) the first readable collector; returns 0, or -1. */
static int
run_find_collector(char *path, size_t size)
{
    const char *env = getenv("DPRO_COLLECTOR");
    if (env && *env) {
        snprintf(path, size, "%s", env);
        return access(path, R_OK) == 0 ? 0 : -1;
    }
    const char *dirs[] = {DPRO_PKGLIBDIR, DPRO_LIBDIR};
    for (size_t i = 0; i < 2; i++) {
        snprintf(path, size, "%s/%s", dirs[i], RUN_COLLECTOR);
        if (access(path, R_OK) == 0)
            return 0;
    }
    /* Build tree: tools/dpro-run (or tools/.libs/dpro-run) next to collector/.libs. */
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = '\0';
            const char *rel[] = {"/../collector/.libs/", "/../../collector/.libs/", "/../lib/",
                                 "/../lib/dpro/"};
            for (size_t i = 0; i < 4; i++) {
                int len = snprintf(path, size, "%s%s%s", self, rel[i], RUN_COLLECTOR);
                if (len > 0 && (size_t)len < size && access(path, R_OK) == 0) {
                    char real[PATH_MAX];
                    if (realpath(path, real))
                        snprintf(path, size, "%s", real);
                    return 0;
                }
            }
        }
    }
    return -1;
}

/* Makes dir absolute (relative to the current directory), so ranks that change directory
 * still write to the same place. */
static void
run_absolute(const char *dir, char *out, size_t size)
{
    char cwd[PATH_MAX];
    int len = -1;
    if (dir[0] != '/' && getcwd(cwd, sizeof cwd) != NULL)
        len = snprintf(out, size, "%s/%s", cwd, dir);
    if (len < 0 || (size_t)len >= size)
        snprintf(out, size, "%s", dir);
}

/* Puts lib first in LD_PRELOAD, keeping the entries already there (once). */
static int
run_preload(const char *lib)
{
    const char *old = getenv("LD_PRELOAD");
    if (old == NULL || *old == '\0')
        return setenv("LD_PRELOAD", lib, 1);
    size_t len = strlen(lib) + strlen(old) + 2;
    char *both = malloc(len);
    if (both == NULL)
        return -1;
    /* Drop an earlier copy of the collector from the old list. */
    char *rest = strdup(old), *save = NULL;
    if (rest == NULL) {
        free(both);
        return -1;
    }
    snprintf(both, len, "%s", lib);
    for (char *tok = strtok_r(rest, ": ", &save); tok; tok = strtok_r(NULL, ": ", &save)) {
        if (strcmp(tok, lib) == 0)
            continue;
        strcat(both, ":");
        strcat(both, tok);
    }
    int rc = setenv("LD_PRELOAD", both, 1);
    free(rest);
    free(both);
    return rc;
}

int
main(int argc, char **argv)
{
    enum { OPT_NO_CUDA = 256, OPT_NO_NCCL, OPT_NO_CUPTI, OPT_NO_NVTX, OPT_STACKS, OPT_FLUSH };
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'},
        {"no-cuda", no_argument, NULL, OPT_NO_CUDA},
        {"no-nccl", no_argument, NULL, OPT_NO_NCCL},
        {"no-cupti", no_argument, NULL, OPT_NO_CUPTI},
        {"no-nvtx", no_argument, NULL, OPT_NO_NVTX},
        {"stacks", optional_argument, NULL, OPT_STACKS},
        {"flush-ms", required_argument, NULL, OPT_FLUSH},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    const char *output = NULL;
    char buf[64];
    long value;
    int c, nvtx = 1;
    dpro_log_set_program(argv[0]);
    while ((c = getopt_long(argc, argv, "+o:vhV", opts, NULL)) != -1) {
        switch (c) {
        case 'o':
            output = optarg;
            break;
        case OPT_NO_CUDA:
            setenv("DPRO_CUDA", "0", 1);
            break;
        case OPT_NO_NCCL:
            setenv("DPRO_NCCL", "0", 1);
            break;
        case OPT_NO_CUPTI:
            setenv("DPRO_CUPTI", "0", 1);
            break;
        case OPT_NO_NVTX:
            setenv("DPRO_NVTX", "0", 1);
            nvtx = 0;
            break;
        case OPT_STACKS:
            value = 1;
            if (optarg && run_parse_uint(optarg, &value) != 0) {
                pr_err("--stacks wants a positive number, not '%s'", optarg);
                return 2;
            }
            setenv("DPRO_STACKS", "1", 1);
            snprintf(buf, sizeof buf, "%ld", value);
            setenv("DPRO_STACK_SAMPLE", buf, 1);
            break;
        case OPT_FLUSH:
            if (run_parse_uint(optarg, &value) != 0) {
                pr_err("--flush-ms wants a positive number, not '%s'", optarg);
                return 2;
            }
            snprintf(buf, sizeof buf, "%ld", value);
            setenv("DPRO_FLUSH_MS", buf, 1);
            break;
        case 'v':
            setenv("DPRO_VERBOSE", "1", 1);
            break;
        case 'h':
            run_usage(stdout);
            return 0;
        case 'V':
            printf("dpro-run %s\n", PACKAGE_VERSION);
            return 0;
        default:
            run_usage(stderr);
            return 2;
        }
    }
    if (optind >= argc) {
        pr_err("no command given");
        run_usage(stderr);
        return 2;
    }
    char collector[PATH_MAX], dir[PATH_MAX];
    if (run_find_collector(collector, sizeof collector) != 0) {
        pr_err("cannot find %s (set DPRO_COLLECTOR to its path)", RUN_COLLECTOR);
        return 2;
    }
    if (output == NULL) {
        const char *env = getenv("DPRO_OUTPUT");
        output = env && *env ? env : "dpro-traces";
    }
    run_absolute(output, dir, sizeof dir);
    if (setenv("DPRO_OUTPUT", dir, 1) != 0 || run_preload(collector) != 0) {
        pr_err("cannot set the environment: %s", strerror(errno));
        return 2;
    }
    if (nvtx && getenv("NVTX_INJECTION64_PATH") == NULL)
        setenv("NVTX_INJECTION64_PATH", collector, 1);
    /* the command's one line of output, on stderr (stdout is COMMAND's), whatever DPRO_LOG
     * lets through */
    fprintf(stderr, "dpro-run: traces go to %s/\n", dir);
    execvp(argv[optind], &argv[optind]);
    int err = errno;
    pr_err("cannot run %s: %s", argv[optind], strerror(err));
    return err == ENOENT ? 127 : 126;
}
