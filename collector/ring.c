/*
 * ring.c: the hot path's per-thread state: a thread's first record creates its state and
 * its single-producer ring and registers the ring for the writer thread; continuation bytes.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

/* 0: may create its state; 1: creating it now; 2: never records (exited, background). */
__thread int coll_tls_state __attribute__((tls_model("initial-exec")));

/* ---- threads and rings ---------------------------------------------------------------- */

pthread_mutex_t coll_registry_lock = PTHREAD_MUTEX_INITIALIZER;
struct coll_ring *coll_rings;      /* under coll_registry_lock */
static uint32_t coll_thread_count; /* under coll_registry_lock */
pthread_key_t coll_thread_key;
int coll_key_ok;
pid_t coll_pid; /* the process the state belongs to */

/* Called when a recording thread exits: its ring is drained, then freed, by the
 * background thread. */
void
coll_thread_exit(void *arg)
{
    struct coll_thread *t = arg;
    coll_tls_state = 2;
    coll_tls = NULL;
    if (t && t->ring)
        atomic_store_explicit(&t->ring->dead, 1, memory_order_release);
    free(t);
}

void
coll_rec_put_bytes(struct coll_thread *t, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (uint32_t i = 1; len > 0; i++) {
        size_t n = len < COLL_CONT_BYTES ? len : COLL_CONT_BYTES;
        memcpy(coll_rec_slot(t, i), p, n);
        p += n;
        len -= n;
    }
}

struct coll_thread *
coll_thread_first(void)
{
    if (coll_tls_state != 0 || !atomic_load_explicit(&coll_recording, memory_order_relaxed))
        return NULL;
    int saved = errno;
    coll_tls_state = 1;
    pthread_once(&coll_process_once, coll_process_start);
    struct coll_thread *t = calloc(1, sizeof *t);
    size_t bytes =
        sizeof(struct coll_ring) + (size_t)coll_cfg.ring_events * sizeof(struct coll_rec);
    struct coll_ring *r = NULL;
    if (t == NULL || posix_memalign((void **)&r, 64, bytes) != 0) {
        free(t);
        coll_tls_state = 2;
        errno = saved;
        return NULL;
    }
    memset(r, 0, sizeof *r);
    r->mask = coll_cfg.ring_events - 1;
    r->tid = (uint32_t)syscall(SYS_gettid);
    t->ring = r;
    t->tid = r->tid;
    pthread_mutex_lock(&coll_registry_lock);
    t->index = coll_thread_count++;
    r->next = coll_rings;
    coll_rings = r;
    pthread_mutex_unlock(&coll_registry_lock);
    if (coll_key_ok)
        pthread_setspecific(coll_thread_key, t);
    coll_tls = t;
    coll_bg_ensure();
    coll_tls_state = 0;
    t->guard = 1;
    errno = saved;
    return t;
}

void
coll_rec_emit_named(struct coll_thread *t, struct coll_rec *rec, const char *name)
{
    size_t len = name ? strnlen(name, COLL_KNAME_MAX) : 0;
    if (len == 0) {
        coll_rec_emit(t, rec, NULL, 0);
        return;
    }
    rec->flags |= COLL_REC_TEXT;
    rec->ncont = (uint8_t)coll_cont_slots(len);
    rec->a4 = len;
    coll_rec_emit(t, rec, name, len);
}
