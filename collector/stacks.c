/*
 * stacks.c: call stacks at launch sites (DPRO_STACKS=1; one launch in DPRO_STACK_SAMPLE).
 *
 * On the job's thread, libunwind's unw_backtrace walks the stack into the record's
 * continuation slots (no allocation once libunwind has cached the unwind tables). In the
 * background thread the frames are symbolised with dladdr ("symbol+0xoff" or
 * "library+0xoff"), interned, and the stack is stored once per distinct frame list
 * (dpro_writer_add_stack); events carry its id. Without libunwind (HAVE_LIBUNWIND unset)
 * no stack is taken and meta setting.DPRO_STACKS says what was asked.
 */
#include "config.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "fnv1a.h"

#ifdef HAVE_LIBUNWIND
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#endif

#include "collector.h"

/* Frames of the collector itself on top of every stack (stk_capture, the hook). */
#define STK_SKIP 2

uint32_t
stk_capture(struct coll_thread *t, uintptr_t *frames, uint32_t *nframes)
{
#ifdef HAVE_LIBUNWIND
    if (++t->stack_tick < coll_cfg.stack_sample)
        return 0;
    t->stack_tick = 0;
    void *buf[COLL_STACK_MAX + STK_SKIP];
    int n = unw_backtrace(buf, COLL_STACK_MAX + STK_SKIP);
    if (n <= STK_SKIP)
        return 0;
    *nframes = (uint32_t)(n - STK_SKIP);
    for (uint32_t i = 0; i < *nframes; i++)
        frames[i] = (uintptr_t)buf[i + STK_SKIP];
    return coll_cont_slots(*nframes * sizeof(uintptr_t));
#else
    (void)t;
    (void)frames;
    *nframes = 0;
    return 0;
#endif
}

static struct coll_umap stk_by_hash;  /* hash of frames -> stack id */
static struct coll_umap stk_frame_id; /* pc -> string id */
static uint32_t stk_next_id;

/* Returns the string id naming one frame. */
static uint32_t
stk_frame_name(dpro_writer *w, uintptr_t pc)
{
    uint64_t *slot = coll_umap_find(&stk_frame_id, pc, 1);
    if (slot && *slot)
        return (uint32_t)*slot;
    char buf[512];
    Dl_info info;
    if (dladdr((void *)pc, &info) && info.dli_fname) {
        const char *lib = strrchr(info.dli_fname, '/');
        lib = lib ? lib + 1 : info.dli_fname;
        if (info.dli_sname)
            snprintf(buf, sizeof buf, "%s+%#lx (%s)", info.dli_sname,
                     (unsigned long)(pc - (uintptr_t)info.dli_saddr), lib);
        else
            snprintf(buf, sizeof buf, "%s+%#lx", lib,
                     (unsigned long)(pc - (uintptr_t)info.dli_fbase));
    } else {
        snprintf(buf, sizeof buf, "%#lx", (unsigned long)pc);
    }
    uint32_t id = coll_intern(w, buf);
    if (slot)
        *slot = id;
    return id;
}

uint32_t
stk_intern(dpro_writer *w, const uintptr_t *frames, uint32_t nframes)
{
    if (nframes == 0)
        return 0;
    uint64_t h = dpro_fnv1a(frames, (size_t)nframes * sizeof *frames, DPRO_FNV1A_INIT);
    uint64_t *slot = coll_umap_find(&stk_by_hash, h, 1);
    if (slot && *slot)
        return (uint32_t)*slot;
    uint32_t names[COLL_STACK_MAX];
    if (nframes > COLL_STACK_MAX)
        nframes = COLL_STACK_MAX;
    for (uint32_t i = 0; i < nframes; i++)
        names[i] = stk_frame_name(w, frames[i]);
    uint32_t id = ++stk_next_id;
    if (dpro_writer_add_stack(w, id, names, nframes) != DPRO_OK)
        return 0;
    if (slot)
        *slot = id;
    return id;
}

void
stk_reset(void)
{
    coll_umap_free(&stk_by_hash);
    coll_umap_free(&stk_frame_id);
    stk_next_id = 0;
}
