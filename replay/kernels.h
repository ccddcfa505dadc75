/*
 * kernels.h: where a trace's device time goes (prefix kernels_), as `dpro-info --kernels`
 * shows it: device time by category (compute kernels, communication kernels, memcpy,
 * memset) and by kernel name, per trace and merged over traces, with kernel names
 * shortened as Holistic Trace Analysis shortens them.
 *
 *   kernels_collect kc;
 *   kernels_collect_init(&kc, reader, &bd);       one trace
 *   kernels_collect_event(&kc, &ev);              for each decoded event
 *   kernels_collect_finish(&kc);                  bd.names: most device time first
 *   kernels_merge(&all, parts, n);                several traces into one breakdown
 *   kernels_write_json(w, &bd, top) / kernels_print(stdout, title, &bd, top)
 *   kernels_breakdown_free(&bd);
 *
 * A kernel is communication when dpro_kernel_is_comm says so ("nccl" or "rccl" in its
 * name, any case, as HTA decides).
 * Names point into the readers' string tables: keep the readers open while a breakdown
 * (or one merged from it) is used.
 */
#ifndef DPRO_REPLAY_KERNELS_H
#define DPRO_REPLAY_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "dprotrace.h"
#include "json_writer.h"

/* Longest short kernel name written, in characters (longer ones are cut with "..."). */
#define KERNELS_SHORT_NAME_MAX 80

/* Longest kernel name a report shows whole (kernels_display_name), in characters. */
#define KERNELS_DISPLAY_WHOLE_MAX 64

enum kernels_category {
    KERNELS_COMPUTE,
    KERNELS_COMM,
    KERNELS_MEMCPY,
    KERNELS_MEMSET,
    KERNELS_NCAT
};

/* "compute", "communication", "memcpy", "memset", indexed by enum kernels_category. */
extern const char *const kernels_category_names[KERNELS_NCAT];

/* Device time of one kernel name, or of one category of device operations. */
typedef struct kernels_stat {
    const char *name; /* full kernel name, owned by a reader; NULL for categories */
    uint64_t count, total_ns, min_ns, max_ns;
    int comm; /* a communication kernel (set when the name is first met) */
} kernels_stat;

/* Where the device time of one trace (or of several) goes. */
typedef struct kernels_breakdown {
    kernels_stat cat[KERNELS_NCAT];
    kernels_stat *names; /* kernels by name, most device time first; malloc'd */
    size_t nnames;
} kernels_breakdown;

/* Accumulation over one trace: kernels by string id (ids above the reader's count are
 * taken as 0, the empty name, which is what dpro_reader_string gives for them). */
typedef struct kernels_collect {
    kernels_breakdown *out;
    kernels_stat *by_id; /* nstrings + 1 entries */
    uint32_t nstrings;
} kernels_collect;

/* Starts collecting the breakdown of the trace of r into *out (zeroed by the caller).
 * Returns 0, or -1 out of memory. */
int kernels_collect_init(kernels_collect *kc, dpro_reader *r, kernels_breakdown *out);

/* Counts one event of that trace (device operations only; others are ignored). */
void kernels_collect_event(kernels_collect *kc, const dpro_event *ev);

/* Ends the collection: out->names gets the kernels met, most device time first (ties by
 * name). Returns 0, or -1 out of memory. Frees kc's own memory either way. */
int kernels_collect_finish(kernels_collect *kc);

/* Merges n_parts breakdowns into *all (names of several traces joined by their text);
 * free it with kernels_breakdown_free. Returns 0, or -1 out of memory. */
int kernels_merge(kernels_breakdown *all, const kernels_breakdown *const *parts, size_t n_parts);

/* Summed device time of a breakdown (all categories) in ns; *ops (if not NULL) receives
 * the number of device operations. */
uint64_t kernels_device_ns(const kernels_breakdown *k, uint64_t *ops);

/* Frees k->names (k may be zeroed or partly filled). */
void kernels_breakdown_free(kernels_breakdown *k);

/* Mangled names longer than this are not demangled (the demangler's tables live on its
 * stack, about 70 bytes a byte of the name). */
#define KERNELS_DEMANGLE_IN_MAX 8192
/* Nor are names whose demangled form would pass this: a short crafted name can demangle to
 * gigabytes (each back-reference doubling it); the demangler stops at the bound. */
#define KERNELS_DEMANGLE_OUT_MAX 65536

/*
 * The demangled form of name when it is a mangled C++ name (Itanium C++ ABI: "_Z...", as
 * CUPTI and the collector record kernels), malloc'd (the caller frees), or NULL: not
 * mangled, not a valid mangling, longer than KERNELS_DEMANGLE_IN_MAX or demangling past
 * KERNELS_DEMANGLE_OUT_MAX, out of memory, or a build without a demangler (configure:
 * libsupc++'s __gcclibcxx_demangle_callback).
 */
char *kernels_demangle(const char *name);

/*
 * Writes name as the reports show a kernel's name into buf (len bytes; at most
 * KERNELS_SHORT_NAME_MAX + 3 characters): demangled (kernels_demangle), whole when it then
 * has at most KERNELS_DISPLAY_WHOLE_MAX characters, else shortened as Nsight Systems'
 * and Perfetto's users read a long kernel name: kernels_short_name with its first
 * template argument list ("void at::native::vectorized_elementwise_kernel<4,
 * at::native::FillFunctor<float>, at::detail::Array<char*, 1> >(int, ...)" gives
 * "at::native::vectorized_elementwise_kernel<4, FillFunctor<...>, Array<...>>"), or
 * without it where that would be cut (KERNELS_SHORT_NAME_MAX). Returns buf.
 */
char *kernels_display_name(const char *name, char *buf, size_t len);

/*
 * Writes a short form of a C++ kernel name (demangled first when mangled: kernels_demangle)
 * into buf (len bytes; at most
 * KERNELS_SHORT_NAME_MAX characters, longer ones cut with "..."), as Holistic Trace
 * Analysis shortens names: the return type, template arguments, the parameter list and
 * whatever follows it are dropped, and "(anonymous namespace)::" with them; "void
 * at::native::elementwise_kernel<128, 2, F>(int, F)" gives "at::native::elementwise_kernel".
 * With targs != 0 the first template argument list is kept, one level deep and without
 * namespaces ("<128, 2, F>"; "cudnn::bn_kernel<float, 32, ns::Op<...> >" gives
 * "cudnn::bn_kernel<float, 32, Op<...>>"), to tell apart instances of one template. A name
 * that shortens to nothing is kept whole; the empty name is shown as "(unnamed)", one of
 * white space only as "(blank name)"; a kept template list the name leaves open is closed
 * ("f<{" gives "f<{...}>"). Returns buf.
 */
char *kernels_short_name(const char *name, int targs, char *buf, size_t len);

/* A short kernel name as shown (room for a " [k]" that tells alike rows apart). */
typedef struct kernels_name_buf {
    char text[KERNELS_SHORT_NAME_MAX + 24];
} kernels_name_buf;

/* Writes the short names of names[0..n) into out[0..n) (kernels_short_name without
 * template arguments; with them for different names whose short forms would be alike;
 * different names still alike then get " [k]", k numbering them from 1 in row order, as
 * profilers number alike names, a k whose text another name shows skipped), as
 * kernels_print shows its rows. Returns 0, or -1 out of
 * memory (out then holds the plain short names). */
int kernels_short_names(const char *const *names, size_t n, kernels_name_buf *out);

/* Writes the display names of names[0..n) (kernels_display_name) into out[0..n), the
 * rows of a report's table: different names that would show one text get " [k]", k
 * numbering them from 1 in row order (the same name keeps its k; a k whose text another
 * name shows is skipped, so that different names never show one text). Returns 0, or -1
 * out of memory (out then holds the plain display names). */
int kernels_display_names(const char *const *names, size_t n, kernels_name_buf *out);

/* Writes one breakdown as the members of the JSON object open in w: device_us,
 * device_ops, categories{name: count, us, share_pct}, kernel_names, top_kernels[the top
 * names: name, short_name, communication, count, total_us, mean_us, min_us, max_us,
 * share_pct]. */
void kernels_write_json(json_writer *w, const kernels_breakdown *k, size_t top);

/* Prints one breakdown as text on out under a heading line: categories, then the top
 * kernel names, shortened; rows whose short names would be alike get their template
 * arguments too. */
void kernels_print(FILE *out, const char *title, const kernels_breakdown *k, size_t top);

#endif
