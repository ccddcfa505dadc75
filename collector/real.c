/*
 * real.c: finding the real function a hook interposes (coll_real_resolve, behind
 * collector.h's inline coll_real): the next definition after the collector, else the one
 * in an already loaded copy of the library.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <string.h>

#include "internal.h"

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

void *
coll_real_resolve(enum coll_lib lib, const char *name, void **slot)
{
    void *fn = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (fn != NULL) /* another thread resolved it meanwhile */
        return fn == COLL_REAL_MISSING ? NULL : fn;
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
    __atomic_store_n(slot, fn ? fn : COLL_REAL_MISSING, __ATOMIC_RELEASE);
    errno = saved;
    return fn;
}
