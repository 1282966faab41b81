/*
 * pool.c: psrt's two thread models.
 *
 * psrt_pool: a fixed number of threads and a bounded queue; submit blocks
 * while the queue is full, so load is shed by slowing the submitter, never
 * by creating threads (the robust model).
 * psrt_sched_closure: TensorFlow 1.x's PosixEnv::SchedClosure, one new
 * detached thread per closure.  When the thread cannot be created (task or
 * thread limit: EAGAIN) it prints one line and aborts, as TensorFlow's
 * std::thread did (S003's core dump in pthread_detach).
 * psrt_latch: a countdown for fan-out calls.
 *
 * Pool states: RUNNING -> STOPPING (destroy: queued work still runs) ->
 * joined.  Invariant: 0 <= count <= cap; head indexes the oldest item.
 */
#include "runtime/psrt/psrt.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct item {
    void (*fn)(void *);
    void *arg;
};

struct psrt_pool {
    pthread_mutex_t mu;
    pthread_cond_t not_empty, not_full;
    struct item *q;
    int cap, head, count;
    bool stopping;
    pthread_t *threads;
    int nthreads;
};

static void *pool_thread(void *arg)
{
    struct psrt_pool *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->count == 0 && !p->stopping)
            pthread_cond_wait(&p->not_empty, &p->mu);
        if (p->count == 0 && p->stopping)
            break;
        struct item it = p->q[p->head];
        p->head = (p->head + 1) % p->cap;
        p->count--;
        pthread_cond_signal(&p->not_full);
        pthread_mutex_unlock(&p->mu);
        it.fn(it.arg);
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int psrt_pool_create(struct psrt_pool **pp, int nthreads, int queue_cap)
{
    struct psrt_pool *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    p->cap = queue_cap > 0 ? queue_cap : 64;
    p->q = calloc((size_t)p->cap, sizeof *p->q);
    p->threads = calloc((size_t)nthreads, sizeof *p->threads);
    if (!p->q || !p->threads) {
        free(p->q);
        free(p->threads);
        free(p);
        return -ENOMEM;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->not_empty, NULL);
    pthread_cond_init(&p->not_full, NULL);
    for (int i = 0; i < nthreads; i++) {
        int r = pthread_create(&p->threads[i], NULL, pool_thread, p);
        if (r) {
            psrt_pool_destroy(p);
            return -r;
        }
        p->nthreads++;
    }
    *pp = p;
    return 0;
}

void psrt_pool_submit(struct psrt_pool *p, void (*fn)(void *), void *arg)
{
    pthread_mutex_lock(&p->mu);
    while (p->count == p->cap)
        pthread_cond_wait(&p->not_full, &p->mu);
    p->q[(p->head + p->count) % p->cap] = (struct item){fn, arg};
    p->count++;
    pthread_cond_signal(&p->not_empty);
    pthread_mutex_unlock(&p->mu);
}

void psrt_pool_destroy(struct psrt_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stopping = true;
    pthread_cond_broadcast(&p->not_empty);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->nthreads; i++)
        pthread_join(p->threads[i], NULL);
    free(p->threads);
    free(p->q);
    free(p);
}

struct closure {
    void (*fn)(void *);
    void *arg;
};

static void *closure_thread(void *arg)
{
    struct closure c = *(struct closure *)arg;
    free(arg);
    c.fn(c.arg);
    return NULL;
}

void psrt_sched_closure(void (*fn)(void *), void *arg)
{
    struct closure *c = malloc(sizeof *c);
    if (!c)
        abort();
    c->fn = fn;
    c->arg = arg;
    pthread_t t;
    int r = pthread_create(&t, NULL, closure_thread, c);
    if (r) {
        char line[256];
        int n = snprintf(line, sizeof line,
                         "F psrt/pool.c] PosixEnv::SchedClosure: pthread_create failed: %s "
                         "(--rpc_threads=per_request: one thread per request); aborting\n",
                         strerror(r));
        if (write(2, line, (size_t)n) < 0) {
        }
        abort();
    }
    pthread_detach(t);
}

struct psrt_latch {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int n;
};

struct psrt_latch *psrt_latch_new(int n)
{
    struct psrt_latch *l = calloc(1, sizeof *l);
    if (!l)
        abort();
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    l->n = n;
    return l;
}

void psrt_latch_done(struct psrt_latch *l)
{
    pthread_mutex_lock(&l->mu);
    if (--l->n == 0)
        pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

void psrt_latch_wait_free(struct psrt_latch *l)
{
    pthread_mutex_lock(&l->mu);
    while (l->n > 0)
        pthread_cond_wait(&l->cv, &l->mu);
    pthread_mutex_unlock(&l->mu);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    free(l);
}
