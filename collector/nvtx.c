/*
 * nvtx.c: NVTX v3 ranges and marks, through the NVTX injection interface.
 *
 * NVTX v3 (header-only, compiled into the job, PyTorch and NCCL) looks for a tool on the
 * first NVTX call: it dlopens NVTX_INJECTION64_PATH and calls InitializeInjectionNvtx2
 * there, or calls the InitializeInjectionNvtx2_fnptr a static injection defines. The
 * collector sets NVTX_INJECTION64_PATH to its own path at load when it is unset (core.c),
 * exports both entry points, and fills the CORE and CORE2 (domain) function tables.
 *
 * On the job's thread: marks and Start/End ranges become records with their text (in
 * continuation slots); push/pop ranges are kept on a per-thread stack and become one
 * record at the pop. NVTX calls record even inside another hook (NCCL's own ranges
 * inside its collectives): they call nothing that could re-enter. The background thread
 * pairs Start/End (which may happen on different threads) into one MARKER event.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#define NVTX_NO_IMPL /* we are the tool: types and ids only */
#include <nvtx3/nvToolsExt.h>

#include "internal.h"

/* What a domain or registered-string handle points to: our own copy of the name. */
struct nvtxi_name {
    char text[1];
};

static _Atomic uint64_t nvtxi_next_range_id = 1;

/* Returns a malloc'd copy of a narrow or wide string (ASCII kept, others '?'); never freed,
 * since handles live as long as the process. */
static struct nvtxi_name *
nvtxi_name_new(const char *a, const wchar_t *wtext)
{
    size_t len = 0;
    if (a)
        len = strlen(a);
    else if (wtext)
        len = wcslen(wtext);
    struct nvtxi_name *n = malloc(sizeof *n + len);
    if (n == NULL)
        return NULL;
    for (size_t i = 0; i < len; i++)
        n->text[i] = a ? a[i] : (wtext[i] > 0 && wtext[i] < 128 ? (char)wtext[i] : '?');
    n->text[len] = '\0';
    return n;
}

/* Copies the message of an event (or a plain ASCII text) into buf; returns its length. */
static uint32_t
nvtxi_text(const nvtxEventAttributes_t *attr, const char *ascii, char *buf, uint32_t size)
{
    uint32_t n = 0;
    if (attr) {
        switch (attr->messageType) {
        case NVTX_MESSAGE_TYPE_ASCII:
            ascii = attr->message.ascii;
            break;
        case NVTX_MESSAGE_TYPE_REGISTERED:
            ascii = attr->message.registered
                        ? ((const struct nvtxi_name *)(const void *)attr->message.registered)->text
                        : NULL;
            break;
        case NVTX_MESSAGE_TYPE_UNICODE: {
            const wchar_t *w = attr->message.unicode;
            for (; w && w[n] && n < size; n++)
                buf[n] = w[n] > 0 && w[n] < 128 ? (char)w[n] : '?';
            return n;
        }
        default:
            ascii = NULL;
            break;
        }
    }
    for (; ascii && ascii[n] && n < size; n++)
        buf[n] = ascii[n];
    return n;
}

/* Returns the payload of an event as an integer (0 when none). */
static int64_t
nvtxi_payload(const nvtxEventAttributes_t *attr)
{
    if (attr == NULL)
        return 0;
    switch (attr->payloadType) {
    case NVTX_PAYLOAD_TYPE_UNSIGNED_INT64:
    case NVTX_PAYLOAD_TYPE_INT64:
        return attr->payload.llValue;
    case NVTX_PAYLOAD_TYPE_UNSIGNED_INT32:
        return attr->payload.uiValue;
    case NVTX_PAYLOAD_TYPE_INT32:
        return attr->payload.iValue;
    case NVTX_PAYLOAD_TYPE_DOUBLE:
        return (int64_t)attr->payload.dValue;
    case NVTX_PAYLOAD_TYPE_FLOAT:
        return (int64_t)attr->payload.fValue;
    default:
        return 0;
    }
}

/* Returns the thread's state for an NVTX call (recording even inside another hook), or
 * NULL when the thread must not record. */
static struct coll_thread *
nvtxi_thread(void)
{
    struct coll_thread *t = coll_tls;
    if (coll_unlikely(t == NULL)) {
        t = coll_thread_first();
        if (t)
            coll_leave(t);
    }
    if (t == NULL || !atomic_load_explicit(&coll_recording, memory_order_relaxed))
        return NULL;
    return t;
}

/* Emits an NVTX record with its text. */
static void
nvtxi_emit(struct coll_thread *t, uint16_t api, uint64_t start, uint64_t end, uint64_t id,
           const void *domain, int64_t payload, const char *text, uint32_t len)
{
    struct coll_rec rec;
    memset(&rec, 0, sizeof rec);
    rec.api = api;
    rec.start = start;
    rec.end = end;
    rec.a0 = id;
    rec.a1 = (uint64_t)(uintptr_t)domain;
    rec.a2 = (uint64_t)payload;
    if (len) {
        rec.flags = COLL_REC_TEXT;
        rec.a4 = len;
        rec.ncont = (uint8_t)coll_cont_slots(len);
    }
    coll_rec_emit(t, &rec, text, len);
}

static void
nvtxi_mark(const void *domain, const nvtxEventAttributes_t *attr, const char *ascii)
{
    int saved = errno;
    struct coll_thread *t = nvtxi_thread();
    if (t) {
        char text[COLL_TEXT_MAX];
        uint32_t len = nvtxi_text(attr, ascii, text, sizeof text);
        uint64_t now = coll_stamp();
        nvtxi_emit(t, COLL_API_nvtxMark, now, now, 0, domain, nvtxi_payload(attr), text, len);
    }
    errno = saved;
}

static nvtxRangeId_t
nvtxi_range_start(const void *domain, const nvtxEventAttributes_t *attr, const char *ascii)
{
    int saved = errno;
    uint64_t id = atomic_fetch_add_explicit(&nvtxi_next_range_id, 1, memory_order_relaxed);
    struct coll_thread *t = nvtxi_thread();
    if (t) {
        char text[COLL_TEXT_MAX];
        uint32_t len = nvtxi_text(attr, ascii, text, sizeof text);
        uint64_t now = coll_stamp();
        nvtxi_emit(t, COLL_API_nvtxRangeStart, now, now, id, domain, nvtxi_payload(attr), text,
                   len);
    }
    errno = saved;
    return id;
}

static void
nvtxi_range_end(nvtxRangeId_t id)
{
    int saved = errno;
    struct coll_thread *t = nvtxi_thread();
    if (t) {
        uint64_t now = coll_stamp();
        nvtxi_emit(t, COLL_API_nvtxRangeEnd, now, now, id, NULL, 0, NULL, 0);
    }
    errno = saved;
}

static int
nvtxi_push(const void *domain, const nvtxEventAttributes_t *attr, const char *ascii)
{
    int saved = errno;
    struct coll_thread *t = nvtxi_thread();
    int level = 0;
    if (t) {
        uint32_t d = t->nvtx_depth++;
        level = (int)d;
        if (d < sizeof t->nvtx_stack / sizeof t->nvtx_stack[0]) {
            t->nvtx_stack[d].len =
                nvtxi_text(attr, ascii, t->nvtx_stack[d].text, sizeof t->nvtx_stack[d].text);
            t->nvtx_stack[d].domain = (uint64_t)(uintptr_t)domain;
            t->nvtx_stack[d].start = coll_stamp();
        }
    }
    errno = saved;
    return level;
}

static int
nvtxi_pop(const void *domain)
{
    int saved = errno;
    struct coll_thread *t = nvtxi_thread();
    int level = -1;
    (void)domain;
    if (t && t->nvtx_depth > 0) {
        uint32_t d = --t->nvtx_depth;
        level = (int)d;
        if (d < sizeof t->nvtx_stack / sizeof t->nvtx_stack[0])
            nvtxi_emit(t, COLL_API_nvtxRangePush, t->nvtx_stack[d].start, coll_stamp(), 0,
                       (const void *)(uintptr_t)t->nvtx_stack[d].domain, 0, t->nvtx_stack[d].text,
                       t->nvtx_stack[d].len);
    }
    errno = saved;
    return level;
}

/* ---- the functions NVTX calls -------------------------------------------------------- */

static void NVTX_API
nvtxi_MarkEx(const nvtxEventAttributes_t *a)
{
    nvtxi_mark(NULL, a, NULL);
}
static void NVTX_API
nvtxi_MarkA(const char *m)
{
    nvtxi_mark(NULL, NULL, m);
}
static nvtxRangeId_t NVTX_API
nvtxi_RangeStartEx(const nvtxEventAttributes_t *a)
{
    return nvtxi_range_start(NULL, a, NULL);
}
static nvtxRangeId_t NVTX_API
nvtxi_RangeStartA(const char *m)
{
    return nvtxi_range_start(NULL, NULL, m);
}
static void NVTX_API
nvtxi_RangeEnd(nvtxRangeId_t id)
{
    nvtxi_range_end(id);
}
static int NVTX_API
nvtxi_RangePushEx(const nvtxEventAttributes_t *a)
{
    return nvtxi_push(NULL, a, NULL);
}
static int NVTX_API
nvtxi_RangePushA(const char *m)
{
    return nvtxi_push(NULL, NULL, m);
}
static int NVTX_API
nvtxi_RangePop(void)
{
    return nvtxi_pop(NULL);
}

static void NVTX_API
nvtxi_DomainMarkEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    nvtxi_mark(d, a, NULL);
}
static nvtxRangeId_t NVTX_API
nvtxi_DomainRangeStartEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    return nvtxi_range_start(d, a, NULL);
}
static void NVTX_API
nvtxi_DomainRangeEnd(nvtxDomainHandle_t d, nvtxRangeId_t id)
{
    (void)d;
    nvtxi_range_end(id);
}
static int NVTX_API
nvtxi_DomainRangePushEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    return nvtxi_push(d, a, NULL);
}
static int NVTX_API
nvtxi_DomainRangePop(nvtxDomainHandle_t d)
{
    return nvtxi_pop(d);
}
static nvtxStringHandle_t NVTX_API
nvtxi_DomainRegisterStringA(nvtxDomainHandle_t d, const char *s)
{
    (void)d;
    return (nvtxStringHandle_t)(void *)nvtxi_name_new(s ? s : "", NULL);
}
static nvtxStringHandle_t NVTX_API
nvtxi_DomainRegisterStringW(nvtxDomainHandle_t d, const wchar_t *s)
{
    (void)d;
    return (nvtxStringHandle_t)(void *)nvtxi_name_new(NULL, s ? s : L"");
}
static nvtxDomainHandle_t NVTX_API
nvtxi_DomainCreateA(const char *name)
{
    return (nvtxDomainHandle_t)(void *)nvtxi_name_new(name ? name : "", NULL);
}
static nvtxDomainHandle_t NVTX_API
nvtxi_DomainCreateW(const wchar_t *name)
{
    return (nvtxDomainHandle_t)(void *)nvtxi_name_new(NULL, name ? name : L"");
}
static void NVTX_API
nvtxi_DomainDestroy(nvtxDomainHandle_t d)
{
    (void)d; /* events may still name it: kept */
}

/* Stores fn at index id of an NVTX module table of size entries. */
static void
nvtxi_set(NvtxFunctionTable table, unsigned int size, unsigned int id, NvtxFunctionPointer fn)
{
    if (table && id < size && table[id])
        *table[id] = fn;
}

#define NVTXI_FN(f) ((NvtxFunctionPointer)(void (*)(void))(f))

/* The injection entry point NVTX calls once per NVTX instance (the job's, NCCL's, ...).
 * Returns 1 (tool initialised) or 0 (NVTX then stays a no-op). */
COLL_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table);
COLL_EXPORT int
InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table)
{
    if (!coll_cfg.nvtx || get_export_table == NULL)
        return 0;
    const NvtxExportTableCallbacks *cb =
        (const NvtxExportTableCallbacks *)get_export_table(NVTX_ETID_CALLBACKS);
    if (cb == NULL || cb->GetModuleFunctionTable == NULL)
        return 0;
    NvtxFunctionTable core = NULL, core2 = NULL;
    unsigned int ncore = 0, ncore2 = 0;
    if (!cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &ncore))
        return 0;
    nvtxi_set(core, ncore, NVTX_CBID_CORE_MarkEx, NVTXI_FN(nvtxi_MarkEx));
    nvtxi_set(core, ncore, NVTX_CBID_CORE_MarkA, NVTXI_FN(nvtxi_MarkA));
    nvtxi_set(core, ncore, NVTX_CBID_CORE_RangeStartEx, NVTXI_FN(nvtxi_RangeStartEx));
    nvtxi_set(core, ncore, NVTX_CBID_CORE_RangeStartA, NVTXI_FN(nvtxi_RangeStartA));
    nvtxi_set(core, ncore, NVTX_CBID_CORE_RangeEnd, NVTXI_FN(nvtxi_RangeEnd));
    nvtxi_set(core, ncore, NVTX_CBID_CORE_RangePushEx, NVTXI_FN(nvtxi_RangePushEx));
    nvtxi_set(core, ncore, NVTX_CBID_CORE_RangePushA, NVTXI_FN(nvtxi_RangePushA));
    nvtxi_set(core, ncore, NVTX_CBID_CORE_RangePop, NVTXI_FN(nvtxi_RangePop));
    if (cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &ncore2)) {
        nvtxi_set(core2, ncore2, NVTX_CBID_CORE2_DomainMarkEx, NVTXI_FN(nvtxi_DomainMarkEx));
        nvtxi_set(core2, ncore2, NVTX_CBID_CORE2_DomainRangeStartEx,
                  NVTXI_FN(nvtxi_DomainRangeStartEx));
        nvtxi_set(core2, ncore2, NVTX_CBID_CORE2_DomainRangeEnd, NVTXI_FN(nvtxi_DomainRangeEnd));
        nvtxi_set(core2, ncore2, NVTX_CBID_CORE2_DomainRangePushEx,
                  NVTXI_FN(nvtxi_DomainRangePushEx));
        nvtxi_set(core2, ncore2, NVTX_CBID_CORE2_DomainRangePop, NVTXI_FN(nvtxi_DomainRangePop));
        nvtxi_set(core2, ncore2, NVTX_CBID_CORE2_DomainRegisterStringA,
                  NVTXI_FN(nvtxi_DomainRegisterStringA));
        nvtxi_set(core2, ncore2, NVTX_CBID_CORE2_DomainRegisterStringW,
                  NVTXI_FN(nvtxi_DomainRegisterStringW));
        nvtxi_set(core2, ncore2, NVTX_CBID_CORE2_DomainCreateA, NVTXI_FN(nvtxi_DomainCreateA));
        nvtxi_set(core2, ncore2, NVTX_CBID_CORE2_DomainCreateW, NVTXI_FN(nvtxi_DomainCreateW));
        nvtxi_set(core2, ncore2, NVTX_CBID_CORE2_DomainDestroy, NVTXI_FN(nvtxi_DomainDestroy));
    }
    return 1;
}

/* Static injection: NVTX's weak InitializeInjectionNvtx2_fnptr binds to this definition in
 * libraries that reach it through the dynamic linker. */
COLL_EXPORT extern NvtxInitializeInjectionNvtxFunc_t InitializeInjectionNvtx2_fnptr;
COLL_EXPORT NvtxInitializeInjectionNvtxFunc_t InitializeInjectionNvtx2_fnptr =
    InitializeInjectionNvtx2;

/* ---- background side ------------------------------------------------------------------ */

/* Start/End ranges waiting for their other half. */
struct nvtxi_open {
    uint64_t id, start, end;
    uint32_t name, name2, tid;
    int have_start, have_end;
    int64_t payload;
};
static struct nvtxi_open *nvtxi_open_ranges;
static size_t nvtxi_open_count, nvtxi_open_cap;

/* Returns the string id of a domain handle's name (0 for the default domain). */
static uint32_t
nvtxi_domain_name(dpro_writer *w, uint64_t domain)
{
    if (domain == 0)
        return 0;
    return coll_intern(w, ((const struct nvtxi_name *)(uintptr_t)domain)->text);
}

/* Emits a MARKER event. */
static void
nvtxi_event(dpro_writer *w, uint32_t subkind, uint64_t start, uint64_t end, uint32_t tid,
            uint32_t name, uint32_t name2, uint64_t id, int64_t value)
{
    dpro_event *ev = coll_event_next(w);
    ev->kind = DPRO_KIND_MARKER;
    ev->subkind = subkind;
    ev->start_ns = start;
    ev->end_ns = end;
    ev->thread = tid;
    ev->name = name;
    ev->name2 = name2;
    ev->object = id;
    ev->value = value;
    coll_event_keep(w, ev);
}

void
nvtxi_convert(dpro_writer *w, const struct coll_rec *rec, uint32_t tid, const char *text,
              uint32_t len)
{
    char buf[COLL_TEXT_MAX + 1];
    if (len > COLL_TEXT_MAX)
        len = COLL_TEXT_MAX;
    memcpy(buf, text, len);
    buf[len] = '\0';
    uint32_t name = coll_intern(w, buf);
    if (rec->api == COLL_API_nvtxMark || rec->api == COLL_API_nvtxRangePush) {
        nvtxi_event(w, rec->api == COLL_API_nvtxMark ? DPRO_MARK_INSTANT : DPRO_MARK_RANGE,
                    coll_stamp_to_ns(rec->start), coll_stamp_to_ns(rec->end), tid, name,
                    nvtxi_domain_name(w, rec->a1), 0, (int64_t)rec->a2);
        return;
    }
    /* Start or End: find the other half. */
    size_t i = 0;
    while (i < nvtxi_open_count && nvtxi_open_ranges[i].id != rec->a0)
        i++;
    if (i == nvtxi_open_count) {
        if (nvtxi_open_count == nvtxi_open_cap) {
            size_t ncap = nvtxi_open_cap ? nvtxi_open_cap * 2 : 64;
            struct nvtxi_open *n = realloc(nvtxi_open_ranges, ncap * sizeof *n);
            if (n == NULL)
                return;
            nvtxi_open_ranges = n;
            nvtxi_open_cap = ncap;
        }
        memset(&nvtxi_open_ranges[i], 0, sizeof nvtxi_open_ranges[i]);
        nvtxi_open_ranges[i].id = rec->a0;
        nvtxi_open_count++;
    }
    struct nvtxi_open *o = &nvtxi_open_ranges[i];
    if (rec->api == COLL_API_nvtxRangeStart) {
        o->have_start = 1;
        o->start = coll_stamp_to_ns(rec->start);
        o->name = name;
        o->name2 = nvtxi_domain_name(w, rec->a1);
        o->tid = tid;
        o->payload = (int64_t)rec->a2;
    } else {
        o->have_end = 1;
        o->end = coll_stamp_to_ns(rec->end);
    }
    if (o->have_start && o->have_end) {
        nvtxi_event(w, DPRO_MARK_RANGE, o->start, o->end, o->tid, o->name, o->name2, o->id,
                    o->payload);
        nvtxi_open_ranges[i] = nvtxi_open_ranges[--nvtxi_open_count];
    }
}

void
nvtxi_finish(dpro_writer *w)
{
    /* Ranges never ended: kept as instants at their start. */
    for (size_t i = 0; i < nvtxi_open_count; i++) {
        struct nvtxi_open *o = &nvtxi_open_ranges[i];
        if (o->have_start)
            nvtxi_event(w, DPRO_MARK_RANGE, o->start, o->start, o->tid, o->name, o->name2, o->id,
                        o->payload);
    }
    free(nvtxi_open_ranges);
    nvtxi_open_ranges = NULL;
    nvtxi_open_count = nvtxi_open_cap = 0;
}

void
nvtxi_reset(void)
{
    nvtxi_open_count = 0;
}
