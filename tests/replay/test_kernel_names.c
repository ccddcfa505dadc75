/*
 * test_kernel_names: kernel names as the reports show them (replay/kernels.c): mangled C++
 * names (as CUPTI and the collector record them; these are PyTorch's, from a torch DDP
 * run traced on tests/simgpu) demangled (kernels_demangle), shown whole up to
 * KERNELS_DISPLAY_WHOLE_MAX characters and past it with their parameter list and return
 * type dropped and their first template argument list kept one level deep
 * (kernels_display_name), without it in kernels_short_name; names that are not mangled, or
 * not validly, as they are; a short name built to demangle to gigabytes (each level's
 * template arguments two back-references to the level before) is refused quickly. In a
 * build without a demangler (configure: no libsupc++) the
 * mangled names stay as recorded, and that is checked instead.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "replay/kernels.h"
#include "tests/unit/testutil.h"

#define FILL                                                                                       \
    "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_6detail5ArrayIPcLi1" \
    "EEEEEviT0_T1_"
#define LAYER_NORM                                                                                 \
    "_ZN2at6native53_GLOBAL__N__4da244e1_20_layer_norm_kernel_cu_9c5ada8a28vectorized_layer_norm_" \
    "kernelIffLb0EEEviT0_PKT_S6_S6_PS3_S7_PS4_"

/* kernels_display_name(name) is want. */
static void
shows(const char *name, const char *want)
{
    char buf[KERNELS_SHORT_NAME_MAX + 8];
    kernels_display_name(name, buf, sizeof buf);
    CHECK(strcmp(buf, want) == 0);
    if (strcmp(buf, want) != 0)
        fprintf(stderr, "  %s\n  shown as  %s\n  expected  %s\n", name, buf, want);
}

/* kernels_short_name(name, 0) is want. */
static void
shortens(const char *name, const char *want)
{
    char buf[KERNELS_SHORT_NAME_MAX + 8];
    kernels_short_name(name, 0, buf, sizeof buf);
    CHECK(strcmp(buf, want) == 0);
    if (strcmp(buf, want) != 0)
        fprintf(stderr, "  %s\n  short     %s\n  expected  %s\n", name, buf, want);
}

/* kernels_display_names (rows of a report) and kernels_short_names (dpro-info's rows):
 * different names that would show one text numbered " [k]" in row order, the same name
 * keeping its k, other rows untouched; short names first get their template arguments. */
static void
rows_told_apart(void)
{
    const char *long_int = "void ns::a_kernel_whose_name_is_too_long_to_be_shown_whole_here"
                           "<float>(int, float*)";
    const char *long_long = "void ns::a_kernel_whose_name_is_too_long_to_be_shown_whole_here"
                            "<float>(long, float*)";
    const char *rows[] = {long_long, "volta_sgemm", long_int, long_long};
    const char *stem = "ns::a_kernel_whose_name_is_too_long_to_be_shown_whole_here<float>";
    kernels_name_buf out[4];
    char want[sizeof out[0].text];
    CHECK(kernels_display_names(rows, 4, out) == 0);
    snprintf(want, sizeof want, "%s [1]", stem);
    CHECK(strcmp(out[0].text, want) == 0 && strcmp(out[3].text, want) == 0);
    CHECK(strcmp(out[1].text, "volta_sgemm") == 0);
    snprintf(want, sizeof want, "%s [2]", stem);
    CHECK(strcmp(out[2].text, want) == 0);
    /* short names: the template arguments tell f<int> from f<float>, not g's overloads */
    const char *sh[] = {"void f<int>(int)", "void f<float>(int)", "void g<int>(int)",
                        "void g<int>(long)"};
    CHECK(kernels_short_names(sh, 4, out) == 0);
    int ok = strcmp(out[0].text, "f<int>") == 0 && strcmp(out[1].text, "f<float>") == 0 &&
             strcmp(out[2].text, "g<int> [1]") == 0 && strcmp(out[3].text, "g<int> [2]") == 0;
    CHECK(ok);
    for (int i = 0; !ok && i < 4; i++)
        fprintf(stderr, "  short row %d: %s\n", i, out[i].text);
}

/* Whether out[0..n) shows different texts for different names[0..n) (printed if not). */
static int
all_told_apart(const char *const *names, size_t n, const kernels_name_buf *out)
{
    int ok = 1;
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            if (strcmp(names[i], names[j]) != 0 && strcmp(out[i].text, out[j].text) == 0) {
                fprintf(stderr, "  rows %zu and %zu both show '%s'\n", i, j, out[i].text);
                ok = 0;
            }
    return ok;
}

/* A numbered row never takes the text another kernel shows: a kernel named as a numbered
 * row would be keeps its name, the numbered rows take the next free k. */
static void
numbered_rows_stay_apart(void)
{
    const char *blank[] = {" ", "(blank name) [1]", "  ", "(blank name) [2]", " "};
    kernels_name_buf out[5];
    CHECK(kernels_display_names(blank, 5, out) == 0);
    CHECK(all_told_apart(blank, 5, out));
    CHECK(strcmp(out[1].text, "(blank name) [1]") == 0);
    CHECK(strcmp(out[3].text, "(blank name) [2]") == 0);
    CHECK(strcmp(out[0].text, "(blank name) [3]") == 0 && strcmp(out[4].text, out[0].text) == 0);
    CHECK(strcmp(out[2].text, "(blank name) [4]") == 0);
}

/* A mangled name of f<A<int, int>, A<S, S>, ...>: each of its levels' template arguments
 * two back-references to the level before, so that its demangled form doubles a level
 * (levels 20: about 9 MB; 40: beyond any memory). */
static void
doubling_name(char *buf, size_t len, int levels)
{
    size_t o = (size_t)snprintf(buf, len, "_Z1fI1AIiiE");
    for (int i = 0; i < levels && o < len; i++) {
        int k = 2 * i + 1; /* the level before's substitution, S<k in base 36>_ */
        char ref[16];
        int n = 0;
        char digits[8];
        do {
            int d = k % 36;
            digits[n++] = (char)(d < 10 ? '0' + d : 'A' + d - 10);
            k /= 36;
        } while (k);
        size_t r = 0;
        ref[r++] = 'S';
        while (n)
            ref[r++] = digits[--n];
        ref[r++] = '_';
        ref[r] = 0;
        o += (size_t)snprintf(buf + o, len - o, "1AI%s%sE", ref, ref);
    }
    if (o < len)
        snprintf(buf + o, len - o, "Evv");
}

int
main(void)
{
    char *d = kernels_demangle(FILL);
#ifdef HAVE_DEMANGLE_CALLBACK
    CHECK(d && strcmp(d, "void at::native::vectorized_elementwise_kernel<4, "
                         "at::native::FillFunctor<float>, at::detail::Array<char*, 1> >(int, "
                         "at::native::FillFunctor<float>, at::detail::Array<char*, 1>)") == 0);
    /* past the length: the first template list one level deep, no parameters */
    shows(FILL, "at::native::vectorized_elementwise_kernel<4, FillFunctor<...>, Array<...>>");
    shows(LAYER_NORM, "at::native::vectorized_layer_norm_kernel<float, float, false>");
    shortens(FILL, "at::native::vectorized_elementwise_kernel");
    shortens(LAYER_NORM, "at::native::vectorized_layer_norm_kernel");
    /* short enough: whole, parameters and all */
    shows("_Z6kernelPfi", "kernel(float*, int)");
    shows("_Z39ncclDevKernel_AllReduce_Sum_f32_TREE_LL19ncclDevKernelArgs4K",
          "ncclDevKernel_AllReduce_Sum_f32_TREE_LL(ncclDevKernelArgs4K)");
#else
    CHECK(d == NULL);
    shows("_Z6kernelPfi", "_Z6kernelPfi");
#endif
    free(d);
    /* not mangled, or not validly: as recorded (a long one shortened) */
    CHECK(kernels_demangle("volta_sgemm_64x64_nt") == NULL);
    CHECK(kernels_demangle("_Znotmangled") == NULL);
    shows("volta_sgemm_64x64_nt", "volta_sgemm_64x64_nt");
    shows("_Znotmangled", "_Znotmangled");
    shows("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
          "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, "
          "at::detail::Array<char*, 1>)",
          "at::native::vectorized_elementwise_kernel<4, FillFunctor<...>, Array<...>>");
    shows("", "(unnamed)");
    shows("   ", "(blank name)"); /* not shown as spaces */
    shortens(" \t ", "(blank name)");
    {
        char buf[KERNELS_SHORT_NAME_MAX + 8];
        kernels_short_name("f<{", 1, buf, sizeof buf); /* a kept list the name leaves open */
        CHECK(strcmp(buf, "f<{...}>") == 0);
        if (strcmp(buf, "f<{...}>") != 0)
            fprintf(stderr, "  f<{ with its template list: %s\n", buf);
        kernels_short_name("void f<int, A<B(int)", 1, buf, sizeof buf);
        CHECK(strcmp(buf, "f<int, A<...>>") == 0);
        if (strcmp(buf, "f<int, A<...>>") != 0)
            fprintf(stderr, "  void f<int, A<B(int) with its template list: %s\n", buf);
    }
    rows_told_apart();
    numbered_rows_stay_apart();
    {
        char bomb[512], small[512];
        doubling_name(small, sizeof small, 4);
        doubling_name(bomb, sizeof bomb, 40);
        clock_t c = clock();
        char *b = kernels_demangle(bomb);
        double s = (double)(clock() - c) / CLOCKS_PER_SEC;
        CHECK(b == NULL); /* past KERNELS_DEMANGLE_OUT_MAX */
        CHECK(s < 1.0);
        if (s >= 1.0)
            fprintf(stderr, "  %zu-byte doubling name took %.2f s to refuse\n", strlen(bomb), s);
        free(b);
        char *ok = kernels_demangle(small);
#ifdef HAVE_DEMANGLE_CALLBACK
        CHECK(ok && strncmp(ok, "void f<A<int, int>", 18) == 0);
#else
        CHECK(ok == NULL);
#endif
        free(ok);
        char *huge = malloc(KERNELS_DEMANGLE_IN_MAX + 16); /* too long to try */
        if (huge) {
            memset(huge, 'x', KERNELS_DEMANGLE_IN_MAX + 15);
            memcpy(huge, "_Z1f", 4);
            huge[KERNELS_DEMANGLE_IN_MAX + 15] = 0;
            CHECK(kernels_demangle(huge) == NULL);
            free(huge);
        }
    }
    return tests_done();
}
