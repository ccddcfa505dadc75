/* test_module.c: device images without nvcc.  A fat binary built here (nvcc's layout: a
 * header, an ELF cubin entry for sm_90, a compressed entry the device cannot read) with the
 * sections a cubin has (.symtab entry functions, .nv.info register counts, launch bounds,
 * static shared memory): kernel names and attributes from it through the module API, the
 * runtime (cudaLibrary*, cudaFuncGetAttributes, occupancy) and nvcc's registration calls;
 * raw cubins, PTX, compressed-only images; every truncation and random corruption of the
 * image loads or is refused as an invalid image, never read out of bounds (sanitizers). */
#include <elf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "simgpu_check.h"
#include "simgpu_internal.h"

void **CUDARTAPI __cudaRegisterFatBinary(void *fatCubin);
void CUDARTAPI __cudaRegisterFatBinaryEnd(void **fatCubinHandle);
void CUDARTAPI __cudaUnregisterFatBinary(void **fatCubinHandle);
void CUDARTAPI __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
                                      const char *deviceName, int thread_limit, uint3 *tid,
                                      uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize);
unsigned CUDARTAPI __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
                                               struct CUstream_st *stream);
cudaError_t CUDARTAPI __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem,
                                                 void *stream);
cudaError_t CUDARTAPI __cudaGetKernel(cudaKernel_t *kernel, const void *func);
cudaError_t CUDARTAPI __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
                                         void **args, size_t sharedMem, cudaStream_t stream);

/* ---- a cubin -------------------------------------------------------------------------- */
static unsigned char g_elf[4096];
static size_t g_elf_len;

static void
put(size_t off, const void *p, size_t n)
{
    memcpy(g_elf + off, p, n);
}

/* An EIATTR record of format SVAL with two u32 values. */
static size_t
sval2(unsigned char *p, int attr, uint32_t a, uint32_t b)
{
    p[0] = 4;
    p[1] = (unsigned char)attr;
    p[2] = 8;
    p[3] = 0;
    memcpy(p + 4, &a, 4);
    memcpy(p + 8, &b, 4);
    return 12;
}

/* kern_x (entry; 40 registers, 208 bytes of stack, __launch_bounds__(128), 4 KiB static
 * shared memory), kern_y (entry; 16 registers), helper (a device function, no entry). */
static void
build_elf(void)
{
    static const char shstr[] = "\0.shstrtab\0.strtab\0.symtab\0.nv.info\0.nv.info.kern_x\0"
                                ".text.kern_x\0.text.helper\0.nv.shared.kern_x\0";
    static const char str[] = "\0kern_x\0helper\0kern_y\0";
    enum { S_NULL, S_SHSTR, S_STR, S_SYM, S_INFO, S_INFOX, S_TEXTX, S_TEXTH, S_SHAREDX, NSEC };
    Elf64_Ehdr eh;
    Elf64_Shdr sh[NSEC];
    Elf64_Sym sym[4];
    unsigned char info[64], infox[64];
    size_t off = sizeof(eh), ninfo = 0, ninfox = 0;
    uint32_t mt[3] = {128, 1, 1};
    uint16_t param = 16;
    memset(g_elf, 0, sizeof(g_elf));
    memset(sh, 0, sizeof(sh));
    memset(sym, 0, sizeof(sym));
    ninfo += sval2(info + ninfo, 0x2f, 1, 40);  /* REGCOUNT kern_x */
    ninfo += sval2(info + ninfo, 0x11, 1, 208); /* FRAME_SIZE kern_x */
    ninfo += sval2(info + ninfo, 0x2f, 3, 16);  /* REGCOUNT kern_y */
    infox[0] = 4;
    infox[1] = 0x05; /* MAX_THREADS */
    infox[2] = 12;
    infox[3] = 0;
    memcpy(infox + 4, mt, 12);
    ninfox = 16;
    infox[ninfox++] = 3;
    infox[ninfox++] = 0x19; /* CBANK_PARAM_SIZE */
    memcpy(infox + ninfox, &param, 2);
    ninfox += 2;
    sym[1].st_name = 1;
    sym[1].st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
    sym[1].st_other = 0x10;
    sym[1].st_shndx = S_TEXTX;
    sym[2].st_name = 8;
    sym[2].st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
    sym[2].st_shndx = S_TEXTH;
    sym[3].st_name = 15;
    sym[3].st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
    sym[3].st_other = 0x10;
    sym[3].st_shndx = S_TEXTX;
#define SEC(i, nm, type, data, n)                                                                  \
    do {                                                                                           \
        sh[i].sh_name = nm;                                                                        \
        sh[i].sh_type = type;                                                                      \
        sh[i].sh_offset = off;                                                                     \
        sh[i].sh_size = n;                                                                         \
        put(off, data, n);                                                                         \
        off += (n + 7) / 8 * 8;                                                                    \
    } while (0)
    SEC(S_SHSTR, 1, SHT_STRTAB, shstr, sizeof(shstr));
    SEC(S_STR, 11, SHT_STRTAB, str, sizeof(str));
    SEC(S_SYM, 19, SHT_SYMTAB, sym, sizeof(sym));
    sh[S_SYM].sh_link = S_STR;
    sh[S_SYM].sh_entsize = sizeof(Elf64_Sym);
    SEC(S_INFO, 27, 0x70000000, info, ninfo);
    SEC(S_INFOX, 36, 0x70000000, infox, ninfox);
    SEC(S_TEXTX, 52, SHT_PROGBITS, "\0\0\0\0\0\0\0\0", 8);
    SEC(S_TEXTH, 65, SHT_PROGBITS, "\0\0\0\0\0\0\0\0", 8);
    sh[S_SHAREDX].sh_name = 78;
    sh[S_SHAREDX].sh_type = SHT_NOBITS;
    sh[S_SHAREDX].sh_size = 4096;
#undef SEC
    memset(&eh, 0, sizeof(eh));
    memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = ELFCLASS64;
    eh.e_ident[EI_DATA] = ELFDATA2LSB;
    eh.e_ident[EI_VERSION] = EV_CURRENT;
    eh.e_ident[EI_OSABI] = 0x41;
    eh.e_ident[EI_ABIVERSION] = 8;
    eh.e_type = ET_EXEC;
    eh.e_machine = 190;
    eh.e_flags = 90 << 8;
    eh.e_ehsize = sizeof(eh);
    eh.e_shentsize = sizeof(Elf64_Shdr);
    eh.e_shnum = NSEC;
    eh.e_shstrndx = S_SHSTR;
    eh.e_shoff = off;
    put(0, &eh, sizeof(eh));
    put(off, sh, sizeof(sh));
    g_elf_len = off + sizeof(sh);
}

/* ---- a fat binary ------------------------------------------------------------------------ */
static unsigned char g_fat[8192] __attribute__((aligned(8)));
static size_t g_fat_len;

/* Appends an entry (ELF kind) to the fat binary; flags 0x8000: zstd-compressed. */
static void
fat_entry(const void *payload, size_t n, uint32_t arch, uint64_t flags)
{
    unsigned char *h = g_fat + g_fat_len;
    uint16_t kind = 2, ver = 0x101;
    uint32_t hsize = 64;
    uint64_t size = (n + 7) / 8 * 8, fsize;
    memset(h, 0, 64);
    memcpy(h, &kind, 2);
    memcpy(h + 2, &ver, 2);
    memcpy(h + 4, &hsize, 4);
    memcpy(h + 8, &size, 8);
    memcpy(h + 28, &arch, 4);
    memcpy(h + 40, &flags, 8);
    memcpy(h + 64, payload, n);
    g_fat_len += 64 + size;
    fsize = g_fat_len - 16;
    memcpy(g_fat + 8, &fsize, 8);
}

static void
fat_begin(void)
{
    uint32_t magic = 0xba55ed50U;
    uint16_t ver = 1, hsize = 16;
    memset(g_fat, 0, sizeof(g_fat));
    memcpy(g_fat, &magic, 4);
    memcpy(g_fat + 4, &ver, 2);
    memcpy(g_fat + 6, &hsize, 2);
    g_fat_len = 16;
}

/* nvcc's __fatDeviceText */
struct fat_text {
    int magic, version;
    const void *data;
    void *filename;
};

static void
host_stub(void)
{
}

int
main(void)
{
    struct simgpu_module *m;
    struct simgpu_kernel *k;
    struct cudaFuncAttributes a;
    cudaLibrary_t lib;
    cudaKernel_t kx;
    int blocks = 0;
    static const char ptx[] = ".version 9.0\n.target sm_90\n.address_size 64\n"
                              ".visible .entry ptx_k(\n.param .u64 p\n)\n{\nret;\n}\n";
    unsigned char *copy;
    uint64_t seed = 88172645463325252ULL;

    build_elf();
    fat_begin();
    fat_entry(g_elf, g_elf_len, 100, 0x8000); /* compressed, and past the device's arch */
    fat_entry(g_elf, g_elf_len, 90, 0x11);

    /* names and figures from the cubin the device picks */
    CHECK(simgpu_module_load(g_fat, g_fat_len, 0, &m) == cudaSuccess);
    CHECK(simgpu_module_kernel_count(m) == 2);
    CHECK(!strcmp(simgpu_module_kernel_at(m, 0)->name, "kern_x"));
    CHECK(!strcmp(simgpu_module_kernel_at(m, 1)->name, "kern_y"));
    CHECK(simgpu_module_kernel(m, "helper", &k) == cudaErrorSymbolNotFound);
    CHECK(simgpu_module_kernel(m, "kern_x", &k) == cudaSuccess);
    simgpu_kernel_attrs(k, &a);
    CHECK(a.numRegs == 40 && a.localSizeBytes == 208 && a.sharedSizeBytes == 4096);
    CHECK(a.maxThreadsPerBlock == 128 && a.binaryVersion == 90);
    CHECK(a.maxDynamicSharedSizeBytes == 48 * 1024 - 4096);
    CHECK(simgpu_module_kernel(m, "kern_y", &k) == cudaSuccess);
    simgpu_kernel_attrs(k, &a);
    CHECK(a.numRegs == 16 && a.maxThreadsPerBlock == 1024 && a.sharedSizeBytes == 0);
    CHECK(simgpu_module_unload(m) == cudaSuccess);
    CHECK(simgpu_kernel_handle(k) == NULL && simgpu_kernel_stale(k));

    /* a raw cubin, PTX, an image with compressed entries only */
    CHECK(simgpu_module_load(g_elf, g_elf_len, 0, &m) == cudaSuccess);
    CHECK(simgpu_module_kernel_count(m) == 2);
    CHECK(simgpu_module_load(ptx, 0, 0, &m) == cudaSuccess);
    CHECK(simgpu_module_kernel_count(m) == 1 &&
          !strcmp(simgpu_module_kernel_at(m, 0)->name, "ptx_k"));
    fat_begin();
    fat_entry(g_elf, g_elf_len, 90, 0x8011);
    CHECK(simgpu_module_load(g_fat, g_fat_len, 0, &m) == cudaSuccess);
    CHECK(simgpu_module_kernel_count(m) == 0);
    CHECK(simgpu_module_kernel(m, "anything", &k) == cudaSuccess); /* taken on trust, said */

    /* every truncation of a good image, then random corruptions: loaded or refused */
    fat_begin();
    fat_entry(g_elf, g_elf_len, 90, 0x11);
    copy = malloc(g_fat_len);
    CHECK(copy != NULL);
    for (size_t n = 1; n < g_fat_len; n++) { /* 0 would mean a size not known */
        cudaError_t rc;
        memcpy(copy, g_fat, n);
        rc = simgpu_module_load(copy, n, 0, &m);
        CHECK(rc == cudaSuccess || rc == cudaErrorInvalidKernelImage);
        if (n < 16 + 64 + sizeof(Elf64_Ehdr))
            CHECK(rc == cudaErrorInvalidKernelImage);
    }
    CHECK(simgpu_module_load(g_fat, g_fat_len - 1, 0, &m) == cudaErrorInvalidKernelImage);
    for (int it = 0; it < 3000; it++) {
        cudaError_t rc;
        memcpy(copy, g_fat, g_fat_len);
        for (int j = 0; j < 4; j++) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            copy[seed % g_fat_len] = (unsigned char)(seed >> 32);
        }
        rc = simgpu_module_load(copy, g_fat_len, 0, &m);
        CHECK(rc == cudaSuccess || rc == cudaErrorInvalidKernelImage);
        if (rc == cudaSuccess)
            for (int i = 0; i < simgpu_module_kernel_count(m); i++)
                simgpu_kernel_attrs(simgpu_module_kernel_at(m, i), &a);
    }
    free(copy);

    /* the runtime's libraries and occupancy: kern_x at 128 threads is bound by registers,
     * 40 x 32 = 1280 per warp: 51 warps of 64 K, 12 blocks of 4 warps */
    CHECK(cudaLibraryLoadData(&lib, g_fat, NULL, NULL, 0, NULL, NULL, 0) == cudaSuccess);
    CHECK(cudaLibraryGetKernel(&kx, lib, "kern_x") == cudaSuccess);
    CHECK(cudaFuncGetAttributes(&a, (const void *)kx) == cudaSuccess && a.numRegs == 40);
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, (const void *)kx, 128, 0) ==
          cudaSuccess);
    CHECK(blocks == 12);
    CHECK(cudaLibraryLoadData(&lib, "junk", NULL, NULL, 0, NULL, NULL, 0) ==
          cudaErrorInvalidKernelImage);

    /* nvcc's registration path, by hand: a host stub named by the registration, attributes
     * read from the registered image, a <<<>>>-style launch, unregistration */
    {
        struct fat_text ft = {0x466243b1, 1, g_fat, NULL};
        void **h = __cudaRegisterFatBinary(&ft);
        const char *name = NULL;
        cudaKernel_t kk = NULL;
        dim3 g = {4, 1, 1}, b = {128, 1, 1}, g2, b2;
        size_t shm = 1;
        cudaStream_t st = (cudaStream_t)1;
        CHECK(h != NULL);
        __cudaRegisterFunction(h, (const char *)host_stub, (char *)"kern_x", "kern_x", -1, NULL,
                               NULL, NULL, NULL, NULL);
        __cudaRegisterFatBinaryEnd(h);
        CHECK(cudaFuncGetName(&name, (const void *)host_stub) == cudaSuccess && name &&
              !strcmp(name, "kern_x"));
        CHECK(!strcmp(simgpu_kernel_name((const void *)host_stub), "kern_x"));
        CHECK(cudaFuncGetAttributes(&a, (const void *)host_stub) == cudaSuccess);
        CHECK(a.numRegs == 40 && a.maxThreadsPerBlock == 128);
        CHECK(__cudaPushCallConfiguration(g, b, 0, NULL) == 0);
        CHECK(__cudaPopCallConfiguration(&g2, &b2, &shm, &st) == cudaSuccess);
        CHECK(g2.x == 4 && b2.x == 128 && shm == 0 && st == NULL);
        CHECK(__cudaPopCallConfiguration(&g2, &b2, &shm, &st) == cudaErrorMissingConfiguration);
        CHECK(__cudaGetKernel(&kk, (const void *)host_stub) == cudaSuccess && kk);
        CHECK(__cudaLaunchKernel(kk, g2, b2, NULL, 0, NULL) == cudaSuccess);
        b2.x = 256; /* past __launch_bounds__(128) */
        CHECK(__cudaLaunchKernel(kk, g2, b2, NULL, 0, NULL) == cudaErrorLaunchOutOfResources);
        CHECK(cudaDeviceSynchronize() == cudaSuccess);
        __cudaUnregisterFatBinary(h);
        CHECK(__cudaLaunchKernel(kk, g, b, NULL, 0, NULL) == cudaErrorInvalidResourceHandle);
        CHECK(cudaFuncGetAttributes(&a, (const void *)host_stub) == cudaErrorInvalidDeviceFunction);
        CHECK(__cudaRegisterFatBinary((void *)"not a fat binary") == NULL);
    }
    printf("test_module: ok\n");
    return 0;
}
