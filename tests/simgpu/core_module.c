/* core_module.c: device images (fat binaries, ELF cubins, PTX) and kernel handles.
 *
 * The simulated device runs no device code, but it must know what an image contains:
 * the names of its kernels (what CUPTI and the collector report, what cuModuleGetFunction
 * finds) and the figures cudaFuncGetAttributes reports.  Formats read:
 *
 *  - __fatDeviceText (nvcc's wrapper): magic 0x466243b1, version, pointer to the fat binary;
 *  - a fat binary: magic 0xba55ed50, u16 version, u16 header size, u64 size of the entries;
 *    each entry a header (u16 kind: 1 PTX, 2 ELF; u32 header size; u64 payload size; u32
 *    compressed size at 16; u32 arch at 28, e.g. 90; u64 flags at 40) then its payload;
 *    compressed payloads (zstd or LZ4 by flag) are not read;
 *  - an ELF cubin (EM_CUDA): entry functions are FUNC symbols with STO_CUDA_ENTRY (0x10) in
 *    st_other; `.nv.info` holds EIATTR_REGCOUNT (0x2f) and EIATTR_FRAME_SIZE (0x11) per
 *    symbol, `.nv.info.<kernel>` EIATTR_MAX_THREADS (0x05, __launch_bounds__) and
 *    EIATTR_CBANK_PARAM_SIZE (0x19); `.nv.shared.<kernel>` is its static shared memory;
 *  - PTX text: its `.entry` directives.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simgpu_internal.h"

#define MOD_MAGIC 0x4d4f4455U /* "MODU" */
#define KERN_MAGIC 0x4b45524eU
#define FATTEXT_MAGIC 0x466243b1U
#define FATBIN_MAGIC 0xba55ed50U
#define FATBIN_KIND_PTX 1
#define FATBIN_KIND_ELF 2
#define FATBIN_FLAG_COMPRESSED (0x2000ULL | 0x8000ULL) /* LZ4 (before 12.8), zstd */
#define EM_CUDA_ 190
#define STO_CUDA_ENTRY 0x10
#define EIATTR_MAX_THREADS 0x05
#define EIATTR_FRAME_SIZE 0x11
#define EIATTR_CBANK_PARAM_SIZE 0x19
#define EIATTR_REGCOUNT 0x2f
#define EIFMT_NVAL 1
#define EIFMT_BVAL 2
#define EIFMT_HVAL 3
#define EIFMT_SVAL 4
#define MAX_ENTRIES 64
#define MAX_BLOCKS_PER_SM 32 /* sm_80 and sm_90 */
#define SHMEM_RESERVED_PER_BLOCK 1024
#define SHMEM_GRANULE 128
#define HBUCKETS 16384

struct simgpu_module {
    uint32_t magic;
    int registered;
    int names_unknown;             /* only compressed entries: names cannot be listed */
    const unsigned char *image;    /* a registered binary's image (static data of the program) */
    int info_read;                 /* the registered image's figures were read */
    struct simgpu_kernel *kernels; /* newest first */
    int nkernels;
    struct simgpu_module *next;
};

static pthread_mutex_t g_mlock = PTHREAD_MUTEX_INITIALIZER;
static struct simgpu_module *g_modules;
static struct simgpu_kernel *g_by_handle[HBUCKETS], *g_by_stub[HBUCKETS], *g_by_name[HBUCKETS];

/* The bucket of kernel `name` of module m in g_by_name. */
static unsigned
nbucket(const struct simgpu_module *m, const char *name)
{
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)(uintptr_t)m;
    while (*name)
        h = (h ^ (unsigned char)*name++) * 1099511628211ULL;
    return (unsigned)(h % HBUCKETS);
}

static unsigned
hbucket(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (unsigned)(x % HBUCKETS);
}

static uint16_t
rd16(const unsigned char *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

static uint32_t
rd32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

static uint64_t
rd64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

/* The device's compute capability as an arch number (90 for 9.0). */
static int
device_arch(void)
{
    struct cudaDeviceProp p;
    simgpu_device_props(&p, 0);
    return p.major * 10 + p.minor;
}

void
simgpu_say_unsupported(const char *call)
{
    static const char *said[256];
    static int nsaid;
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    int seen = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < nsaid && !seen; i++)
        seen = !strcmp(said[i], call);
    if (!seen && nsaid < 256)
        said[nsaid++] = call;
    pthread_mutex_unlock(&lock);
    if (!seen)
        fprintf(stderr, "simgpu: %s is not supported by the simulated device (returns an error)\n",
                call);
}

/* ---- image parsing ------------------------------------------------------------------ */

/* One kernel found in an image. */
typedef void (*kernel_fn)(void *ctx, const char *name, const struct simgpu_kernel_info *info);

struct img_entry {
    int kind;
    int arch;
    int compressed;
    const unsigned char *data;
    size_t bytes;
};

/* Default figures of a kernel the image says nothing about. */
static void
info_default(struct simgpu_kernel_info *info, int arch)
{
    memset(info, 0, sizeof(*info));
    info->num_regs = 32;
    info->max_threads = 1024;
    info->arch = arch;
}

/* The most threads a block of a kernel using `regs` registers per thread may have: warps
 * allocate registers in units of 256, 64 K per block. */
static int
threads_for_regs(int regs)
{
    int per_warp = ((regs > 0 ? regs : 1) * 32 + 255) / 256 * 256; /* regs <= 255 */
    int threads = 65536 / per_warp * 32;
    return threads < 1024 ? threads : 1024;
}

/* Scans an EIATTR table [p, p + n) calling back attr/value pairs: SVAL payloads give
 * (first u32, second u32), HVAL (u16, 0).  Returns 0, or -1 when the table is malformed. */
struct eiattr {
    int attr;
    uint32_t a, b, c;
    int fmt;
};

static int
eiattr_next(const unsigned char *p, size_t n, size_t *off, struct eiattr *out)
{
    size_t o = *off;
    memset(out, 0, sizeof(*out));
    if (o + 2 > n)
        return 0;
    out->fmt = p[o];
    out->attr = p[o + 1];
    switch (out->fmt) {
    case EIFMT_NVAL:
        *off = o + 2;
        return 1;
    case EIFMT_BVAL:
    case EIFMT_HVAL:
        if (o + 4 > n)
            return -1;
        out->a = rd16(p + o + 2);
        *off = o + 4;
        return 1;
    case EIFMT_SVAL: {
        size_t sz;
        if (o + 4 > n)
            return -1;
        sz = rd16(p + o + 2);
        if (o + 4 + sz > n)
            return -1;
        if (sz >= 4)
            out->a = rd32(p + o + 4);
        if (sz >= 8)
            out->b = rd32(p + o + 8);
        if (sz >= 12)
            out->c = rd32(p + o + 12);
        *off = o + 4 + sz;
        return 1;
    }
    default:
        return -1;
    }
}

struct elf_view {
    const unsigned char *e;
    size_t bytes;
    Elf64_Shdr *sh;
    int nsh;
    const char *shstr;
    size_t shstr_bytes;
};

/* Reads an ELF cubin's section table.  `bytes` 0: the extent is computed from the header
 * (an image passed by pointer only).  Returns 0, or -1 when it is not a CUDA ELF or its
 * tables leave the image. */
static int
elf_open(struct elf_view *v, const unsigned char *e, size_t bytes)
{
    Elf64_Ehdr eh;
    size_t extent;
    memset(v, 0, sizeof(*v));
    if (bytes && bytes < sizeof(eh))
        return -1;
    memcpy(&eh, e, sizeof(eh));
    if (memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_machine != EM_CUDA_ ||
        eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 || eh.e_shstrndx >= eh.e_shnum ||
        eh.e_shoff > (1ULL << 32))
        return -1;
    extent = eh.e_shoff + (size_t)eh.e_shnum * sizeof(Elf64_Shdr);
    if (bytes && extent > bytes)
        return -1;
    v->sh = calloc(eh.e_shnum, sizeof(Elf64_Shdr));
    if (!v->sh)
        return -1;
    memcpy(v->sh, e + eh.e_shoff, (size_t)eh.e_shnum * sizeof(Elf64_Shdr));
    for (int i = 0; i < eh.e_shnum; i++) {
        if (v->sh[i].sh_type == SHT_NOBITS || v->sh[i].sh_type == SHT_NULL)
            continue;
        if (v->sh[i].sh_offset > (1ULL << 32) || v->sh[i].sh_size > (1ULL << 32))
            goto bad;
        if (v->sh[i].sh_offset + v->sh[i].sh_size > extent)
            extent = v->sh[i].sh_offset + v->sh[i].sh_size;
    }
    if (bytes && extent > bytes)
        goto bad;
    v->e = e;
    v->bytes = extent;
    v->nsh = eh.e_shnum;
    v->shstr = (const char *)e + v->sh[eh.e_shstrndx].sh_offset;
    v->shstr_bytes = v->sh[eh.e_shstrndx].sh_size;
    return 0;
bad:
    free(v->sh);
    v->sh = NULL;
    return -1;
}

static const char *
sec_name(const struct elf_view *v, int i)
{
    uint32_t o = v->sh[i].sh_name;
    if (o >= v->shstr_bytes || !memchr(v->shstr + o, '\0', v->shstr_bytes - o))
        return "";
    return v->shstr + o;
}

/* The section named prefix + name, or -1. */
static int
sec_find(const struct elf_view *v, const char *prefix, const char *name)
{
    size_t lp = strlen(prefix);
    for (int i = 0; i < v->nsh; i++) {
        const char *s = sec_name(v, i);
        if (!strncmp(s, prefix, lp) && !strcmp(s + lp, name))
            return i;
    }
    return -1;
}

/* An image's figure as an int: at most `max` (a corrupted image may say anything). */
static int
clamp(uint64_t v, int max)
{
    return v > (uint64_t)max ? max : (int)v;
}

/* The figures of kernel `name` (symbol index symi) of an opened cubin. */
static void
elf_kernel_info(const struct elf_view *v, int arch, const char *name, uint32_t symi,
                struct simgpu_kernel_info *info)
{
    struct eiattr a;
    size_t off;
    int i;
    info_default(info, arch);
    info->from_image = 1;
    info->num_regs = 0;
    i = sec_find(v, ".nv.info", "");
    off = 0;
    while (i >= 0 && eiattr_next(v->e + v->sh[i].sh_offset, v->sh[i].sh_size, &off, &a) > 0) {
        if (a.fmt == EIFMT_SVAL && a.a == symi && a.attr == EIATTR_REGCOUNT)
            info->num_regs = clamp(a.b, 255); /* the architectures' limit */
        else if (a.fmt == EIFMT_SVAL && a.a == symi && a.attr == EIATTR_FRAME_SIZE)
            info->local_bytes = clamp(a.b, 1 << 30);
    }
    info->max_threads = threads_for_regs(info->num_regs);
    i = sec_find(v, ".nv.info.", name);
    off = 0;
    while (i >= 0 && eiattr_next(v->e + v->sh[i].sh_offset, v->sh[i].sh_size, &off, &a) > 0) {
        if (a.attr == EIATTR_CBANK_PARAM_SIZE)
            info->param_bytes = clamp(a.a, 1 << 30);
        else if (a.attr == EIATTR_MAX_THREADS && a.fmt == EIFMT_SVAL && a.a) {
            uint64_t t = (uint64_t)a.a * (a.b ? a.b : 1) * (a.c ? a.c : 1);
            if (t < (uint64_t)info->max_threads)
                info->max_threads = (int)t;
        }
    }
    i = sec_find(v, ".nv.shared.", name);
    if (i >= 0)
        info->shared_bytes = clamp(v->sh[i].sh_size, 1 << 30);
    /* sm_90 cubins (with a .nv.shared.reserved.0 section) count the 1 KiB the device
     * reserves per block in each kernel's section; the figure is the kernel's own */
    if (sec_find(v, ".nv.shared.reserved.0", "") >= 0 && info->shared_bytes >= 1024)
        info->shared_bytes -= 1024;
    i = sec_find(v, ".nv.constant3", "");
    if (i >= 0)
        info->const_bytes = clamp(v->sh[i].sh_size, 1 << 30);
}

/* Calls fn for every entry function of an ELF cubin.  Returns 0, or -1 when malformed. */
static int
elf_kernels(const unsigned char *e, size_t bytes, int arch, kernel_fn fn, void *ctx)
{
    struct elf_view v;
    int rc = 0;
    if (elf_open(&v, e, bytes))
        return -1;
    for (int i = 0; i < v.nsh && rc == 0; i++) {
        const Elf64_Shdr *st = &v.sh[i], *strs;
        if (st->sh_type != SHT_SYMTAB)
            continue;
        if (st->sh_link >= (uint32_t)v.nsh || st->sh_entsize != sizeof(Elf64_Sym)) {
            rc = -1;
            break;
        }
        strs = &v.sh[st->sh_link];
        for (uint32_t k = 0; k < st->sh_size / sizeof(Elf64_Sym); k++) {
            Elf64_Sym sym;
            struct simgpu_kernel_info info;
            const char *nm;
            memcpy(&sym, e + st->sh_offset + (size_t)k * sizeof(sym), sizeof(sym));
            if (ELF64_ST_TYPE(sym.st_info) != STT_FUNC || !(sym.st_other & STO_CUDA_ENTRY))
                continue;
            if (sym.st_name >= strs->sh_size ||
                !memchr(e + strs->sh_offset + sym.st_name, '\0', strs->sh_size - sym.st_name)) {
                rc = -1;
                break;
            }
            nm = (const char *)e + strs->sh_offset + sym.st_name;
            elf_kernel_info(&v, arch, nm, k, &info);
            fn(ctx, nm, &info);
        }
    }
    free(v.sh);
    return rc;
}

/* Calls fn for every `.entry` of PTX text [p, p + n). */
static void
ptx_kernels(const char *p, size_t n, int arch, kernel_fn fn, void *ctx)
{
    const char *end = p + n, *q = p;
    struct simgpu_kernel_info info;
    char name[1024];
    info_default(&info, arch);
    while (q < end && (q = memmem(q, (size_t)(end - q), ".entry", 6)) != NULL) {
        size_t len = 0;
        q += 6;
        if (q >= end || (*q != ' ' && *q != '\t'))
            continue;
        while (q < end && (*q == ' ' || *q == '\t'))
            q++;
        while (q < end && len + 1 < sizeof(name) && *q != '(' && *q != ' ' && *q != '\t' &&
               *q != '\n' && *q != '\r' && *q != '\0')
            name[len++] = *q++;
        name[len] = '\0';
        if (len)
            fn(ctx, name, &info);
    }
}

/* Splits a fat binary into its entries.  Returns their count, or -1 when malformed. */
static int
fatbin_entries(const unsigned char *p, size_t bytes, struct img_entry *out, int max)
{
    uint16_t hsize;
    uint64_t fsize, off;
    int n = 0;
    if ((bytes && bytes < 16) || rd32(p) != FATBIN_MAGIC)
        return -1;
    hsize = rd16(p + 6);
    fsize = rd64(p + 8);
    if (hsize < 16 || fsize > (1ULL << 34) || (bytes && hsize + fsize > bytes))
        return -1;
    for (off = hsize; off + 64 <= hsize + fsize && n < max;) {
        const unsigned char *h = p + off;
        uint32_t ehsize = rd32(h + 4);
        uint64_t psize = rd64(h + 8);
        if (ehsize < 64 || off + ehsize + psize > hsize + fsize)
            return -1;
        out[n].kind = rd16(h);
        out[n].arch = (int)rd32(h + 28);
        out[n].compressed = rd32(h + 16) != 0 || (rd64(h + 40) & FATBIN_FLAG_COMPRESSED) != 0;
        out[n].data = h + ehsize;
        out[n].bytes = (size_t)psize;
        n++;
        off += ehsize + psize;
    }
    return n;
}

/* Calls fn for every kernel of an image (see simgpu_module_load).  *names_unknown is set
 * when only compressed entries were found.  Returns 0, or -1 when it is not an image. */
static int
image_kernels(const unsigned char *p, size_t bytes, kernel_fn fn, void *ctx, int *names_unknown)
{
    struct img_entry ent[MAX_ENTRIES];
    int n, best = -1, dev = device_arch(), have_ptx = -1;
    *names_unknown = 0;
    if (bytes && bytes < 4)
        return -1;
    if (rd32(p) == FATTEXT_MAGIC && !bytes) { /* a pointer: never inside a sized buffer */
        const unsigned char *data;
        memcpy(&data, p + 8, sizeof(data));
        return data ? image_kernels(data, 0, fn, ctx, names_unknown) : -1;
    }
    if (!memcmp(p, ELFMAG, SELFMAG)) {
        Elf64_Ehdr eh;
        if (bytes && bytes < sizeof(eh))
            return -1;
        memcpy(&eh, p, sizeof(eh));
        /* e_flags hold the arch: bits 8-15 from ABI version 8 (CUDA 13), else bits 0-7 */
        return elf_kernels(p, bytes,
                           eh.e_ident[EI_ABIVERSION] >= 8 ? (int)((eh.e_flags >> 8) & 0xff)
                                                          : (int)(eh.e_flags & 0xff),
                           fn, ctx);
    }
    if (rd32(p) != FATBIN_MAGIC) {
        size_t len = bytes ? strnlen((const char *)p, bytes) : strlen((const char *)p);
        if (!memmem(p, len, ".version", 8) || !memmem(p, len, ".target", 7))
            return -1;
        ptx_kernels((const char *)p, len, dev, fn, ctx);
        return 0;
    }
    n = fatbin_entries(p, bytes, ent, MAX_ENTRIES);
    if (n < 0)
        return -1;
    /* The cubin the device would run: the highest arch not above the device's; PTX when
     * there is no such cubin. */
    for (int i = 0; i < n; i++) {
        if (ent[i].compressed)
            continue;
        if (ent[i].kind == FATBIN_KIND_ELF && ent[i].arch <= dev &&
            (best < 0 || ent[i].arch > ent[best].arch))
            best = i;
        if (ent[i].kind == FATBIN_KIND_PTX && have_ptx < 0)
            have_ptx = i;
    }
    if (best >= 0)
        return elf_kernels(ent[best].data, ent[best].bytes, ent[best].arch, fn, ctx);
    if (have_ptx >= 0) {
        const char *t = (const char *)ent[have_ptx].data;
        ptx_kernels(t, strnlen(t, ent[have_ptx].bytes), ent[have_ptx].arch, fn, ctx);
        return 0;
    }
    *names_unknown = n > 0;
    return 0;
}

/* ---- modules and handles ------------------------------------------------------------- */

/* The kernel `name` of m, else NULL; caller holds g_mlock. */
static struct simgpu_kernel *
mod_find_locked(const struct simgpu_module *m, const char *name)
{
    for (struct simgpu_kernel *k = g_by_name[nbucket(m, name)]; k; k = k->next_name)
        if (k->mod == m && !strcmp(k->name, name))
            return k;
    return NULL;
}

/* Adds kernel `name` to m (or returns the one it has); caller holds g_mlock. */
static struct simgpu_kernel *
mod_add_locked(struct simgpu_module *m, const char *name)
{
    struct simgpu_kernel *k = mod_find_locked(m, name);
    unsigned b;
    if (k)
        return k;
    k = calloc(1, sizeof(*k));
    if (!k)
        return NULL;
    k->name = strdup(name);
    if (!k->name) {
        free(k);
        return NULL;
    }
    k->magic = KERN_MAGIC;
    k->mod = m;
    k->max_dyn_shmem = -1; /* not set: 48 KiB less the static shared memory */
    k->carveout = -1;
    info_default(&k->info, device_arch());
    k->next_in_mod = m->kernels;
    m->kernels = k;
    m->nkernels++;
    b = hbucket(k);
    k->next_handle = g_by_handle[b];
    g_by_handle[b] = k;
    b = nbucket(m, name);
    k->next_name = g_by_name[b];
    g_by_name[b] = k;
    return k;
}

struct load_ctx {
    struct simgpu_module *m;
    int oom;
    int info_only; /* a registered image: fill figures of kernels already registered */
};

static void
load_kernel_cb(void *ctx, const char *name, const struct simgpu_kernel_info *info)
{
    struct load_ctx *c = ctx;
    struct simgpu_kernel *k =
        c->info_only ? mod_find_locked(c->m, name) : mod_add_locked(c->m, name);
    if (!k) {
        c->oom |= !c->info_only;
        return;
    }
    k->info = *info;
    k->info_read = 1;
}

cudaError_t
simgpu_module_load(const void *image, size_t bytes, int registered, struct simgpu_module **out)
{
    struct simgpu_module *m;
    struct load_ctx c = {0};
    cudaError_t rc = cudaSuccess;
    if (!image || !out)
        return cudaErrorInvalidValue;
    simgpu_init();
    m = calloc(1, sizeof(*m));
    if (!m)
        return cudaErrorMemoryAllocation;
    m->magic = MOD_MAGIC;
    m->registered = registered;
    c.m = m;
    pthread_mutex_lock(&g_mlock);
    if (registered) {
        /* nvcc's host code names the kernels; the image is read when figures are asked */
        m->image = image;
        if (rd32(image) != FATTEXT_MAGIC && rd32(image) != FATBIN_MAGIC)
            rc = cudaErrorInvalidKernelImage;
    } else if (image_kernels(image, bytes, load_kernel_cb, &c, &m->names_unknown) != 0) {
        rc = cudaErrorInvalidKernelImage;
    } else if (c.oom) {
        rc = cudaErrorMemoryAllocation;
    }
    if (rc == cudaSuccess) {
        m->next = g_modules;
        g_modules = m;
        *out = m;
    } else {
        /* handles made before the failure stay allocated but dead */
        for (struct simgpu_kernel *k = m->kernels; k; k = k->next_in_mod)
            k->dead = 1;
        m->magic = 0;
    }
    pthread_mutex_unlock(&g_mlock);
    return rc;
}

cudaError_t
simgpu_module_unload(struct simgpu_module *m)
{
    cudaError_t rc = cudaErrorInvalidResourceHandle;
    pthread_mutex_lock(&g_mlock);
    for (struct simgpu_module **pp = &g_modules; *pp; pp = &(*pp)->next)
        if (*pp == m) {
            *pp = m->next;
            for (struct simgpu_kernel *k = m->kernels; k; k = k->next_in_mod)
                k->dead = 1;
            m->magic = 0;
            rc = cudaSuccess;
            break;
        }
    pthread_mutex_unlock(&g_mlock);
    return rc;
}

struct simgpu_module *
simgpu_module_lookup(const void *h)
{
    struct simgpu_module *found = NULL;
    if (!h)
        return NULL;
    pthread_mutex_lock(&g_mlock);
    for (struct simgpu_module *m = g_modules; m && !found; m = m->next)
        if (m == h)
            found = m;
    pthread_mutex_unlock(&g_mlock);
    return found;
}

cudaError_t
simgpu_module_kernel(struct simgpu_module *m, const char *name, struct simgpu_kernel **out)
{
    struct simgpu_kernel *k;
    int guess = 0;
    if (!m || !name || !out)
        return cudaErrorInvalidValue;
    pthread_mutex_lock(&g_mlock);
    k = mod_find_locked(m, name);
    if (!k && m->names_unknown) {
        k = mod_add_locked(m, name);
        guess = 1;
    }
    pthread_mutex_unlock(&g_mlock);
    if (guess)
        fprintf(stderr,
                "simgpu: kernel %s taken on trust: the module's entries are compressed, "
                "their names cannot be listed\n",
                name);
    if (!k)
        return guess ? cudaErrorMemoryAllocation : cudaErrorSymbolNotFound;
    *out = k;
    return cudaSuccess;
}

int
simgpu_module_kernel_count(const struct simgpu_module *m)
{
    return m ? m->nkernels : 0;
}

struct simgpu_kernel *
simgpu_module_kernel_at(const struct simgpu_module *m, int i)
{
    struct simgpu_kernel *k = NULL;
    int n;
    if (!m || i < 0 || i >= m->nkernels)
        return NULL;
    pthread_mutex_lock(&g_mlock);
    /* the list is newest first: the i-th in the image's order is nkernels - 1 - i from the head */
    k = m->kernels;
    for (n = m->nkernels - 1 - i; k && n > 0; n--)
        k = k->next_in_mod;
    pthread_mutex_unlock(&g_mlock);
    return k;
}

cudaError_t
simgpu_module_register_function(struct simgpu_module *m, const void *stub, const char *name)
{
    struct simgpu_kernel *k;
    if (!m || !stub || !name)
        return cudaErrorInvalidValue;
    pthread_mutex_lock(&g_mlock);
    k = mod_add_locked(m, name);
    if (k && !k->stub) {
        unsigned b = hbucket(stub);
        k->stub = stub;
        k->next_stub = g_by_stub[b];
        g_by_stub[b] = k;
    }
    pthread_mutex_unlock(&g_mlock);
    if (!k)
        return cudaErrorMemoryAllocation;
    simgpu_kernel_name_set(stub, name);
    return cudaSuccess;
}

struct simgpu_kernel *
simgpu_kernel_handle(const void *h)
{
    struct simgpu_kernel *found = NULL;
    if (!h)
        return NULL;
    pthread_mutex_lock(&g_mlock);
    for (struct simgpu_kernel *k = g_by_handle[hbucket(h)]; k && !found; k = k->next_handle)
        if (k == h && !k->dead)
            found = k;
    pthread_mutex_unlock(&g_mlock);
    return found;
}

struct simgpu_kernel *
simgpu_kernel_of_stub(const void *stub)
{
    struct simgpu_kernel *found = NULL;
    if (!stub)
        return NULL;
    pthread_mutex_lock(&g_mlock);
    for (struct simgpu_kernel *k = g_by_stub[hbucket(stub)]; k && !found; k = k->next_stub)
        if (k->stub == stub && !k->dead)
            found = k;
    pthread_mutex_unlock(&g_mlock);
    return found;
}

int
simgpu_kernel_stale(const void *func)
{
    int stale = 0;
    if (!func)
        return 0;
    pthread_mutex_lock(&g_mlock);
    for (struct simgpu_kernel *k = g_by_handle[hbucket(func)]; k && !stale; k = k->next_handle)
        stale = k == func && k->dead;
    for (struct simgpu_kernel *k = g_by_stub[hbucket(func)]; k && !stale; k = k->next_stub)
        stale = k->stub == func && k->dead;
    pthread_mutex_unlock(&g_mlock);
    return stale;
}

struct simgpu_kernel *
simgpu_kernel_resolve(const void *func)
{
    struct simgpu_kernel *k = simgpu_kernel_of_stub(func);
    return k ? k : simgpu_kernel_handle(func);
}

void
simgpu_kernel_info(struct simgpu_kernel *k, struct simgpu_kernel_info *info)
{
    struct simgpu_module *m = k->mod;
    pthread_mutex_lock(&g_mlock);
    if (m && m->registered && !m->info_read) {
        struct load_ctx c = {m, 0, 1};
        int unknown;
        static int said;
        m->info_read = 1;
        if (image_kernels(m->image, 0, load_kernel_cb, &c, &unknown) != 0)
            fprintf(stderr, "simgpu: a registered fat binary could not be read; kernel "
                            "attributes are defaults\n");
        else if (unknown && !said++)
            fprintf(stderr, "simgpu: registered fat binaries with compressed code only: their "
                            "kernels' attributes are defaults (32 registers, 1024 threads)\n");
    }
    *info = k->info;
    pthread_mutex_unlock(&g_mlock);
}

int
simgpu_kernel_max_dyn_shmem(const struct simgpu_kernel *k, const struct simgpu_kernel_info *info)
{
    if (k->max_dyn_shmem >= 0)
        return k->max_dyn_shmem;
    return 49152 > info->shared_bytes ? 49152 - info->shared_bytes : 0;
}

void
simgpu_kernel_attrs(struct simgpu_kernel *k, struct cudaFuncAttributes *attr)
{
    struct simgpu_kernel_info info;
    simgpu_kernel_info(k, &info);
    memset(attr, 0, sizeof(*attr));
    attr->sharedSizeBytes = (size_t)info.shared_bytes;
    attr->constSizeBytes = (size_t)info.const_bytes;
    attr->localSizeBytes = (size_t)info.local_bytes;
    attr->maxThreadsPerBlock = info.max_threads;
    attr->numRegs = info.num_regs;
    attr->ptxVersion = info.arch;
    attr->binaryVersion = info.arch;
    attr->cacheModeCA = 0;
    attr->maxDynamicSharedSizeBytes = simgpu_kernel_max_dyn_shmem(k, &info);
    attr->preferredShmemCarveout = k->carveout;
    attr->clusterSchedulingPolicyPreference = k->cluster_pref;
    attr->nonPortableClusterSizeAllowed = k->nonportable_cluster;
}

/* Resident blocks of `block` threads per SM: the least of the limits by blocks, warps,
 * registers (allocated per warp in units of 256) and shared memory (static + dynamic + the
 * 1 KiB the device reserves per block, in units of 128 bytes). */
int
simgpu_kernel_occupancy(const struct simgpu_kernel_info *info, int block, size_t dyn)
{
    struct cudaDeviceProp p;
    int warps, by_warps, by_regs, by_smem, n, regs_per_warp;
    size_t smem;
    simgpu_device_props(&p, simgpu_current_device());
    if (block <= 0 || block > info->max_threads)
        return 0;
    warps = (block + 31) / 32;
    by_warps = p.maxThreadsPerMultiProcessor / 32 / warps;
    regs_per_warp = ((info->num_regs > 0 ? info->num_regs : 1) * 32 + 255) / 256 * 256;
    by_regs = p.regsPerMultiprocessor / regs_per_warp / warps;
    smem = (size_t)info->shared_bytes + dyn;
    if (smem > p.sharedMemPerBlockOptin)
        return 0;
    smem = (smem + SHMEM_RESERVED_PER_BLOCK + SHMEM_GRANULE - 1) / SHMEM_GRANULE * SHMEM_GRANULE;
    by_smem = (int)(p.sharedMemPerMultiprocessor / smem);
    n = MAX_BLOCKS_PER_SM;
    if (by_warps < n)
        n = by_warps;
    if (by_regs < n)
        n = by_regs;
    if (by_smem < n)
        n = by_smem;
    return n;
}
