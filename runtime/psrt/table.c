/*
 * table.c: the rows of a sparse variable held by one ps: uint64 key -> row,
 * open addressing with linear probing over a power-of-two slot array, rows
 * (value and optimizer slots, `width` floats each) in arrays that grow by
 * doubling, in insertion order.
 *
 * Batched pull and push walk their keys with software prefetching (the slot
 * of key i+D is requested while key i is processed) so that a batch of
 * millions of random keys is bound by memory throughput, not latency.
 * Invariants: load factor <= 1/2 (the slot array doubles first); every
 * non-EMPTY slot's row < nrows and rowkey[row] == its key; the key
 * PSRT_TABLE_EMPTY itself lives outside the slots (has_empty_key).
 */
#include "runtime/psrt/psrt.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static void *big_alloc(size_t n)
{
    void *p = NULL;
    if (n >= (2u << 20)) {
        if (posix_memalign(&p, 2u << 20, n))
            return NULL;
        madvise(p, n, MADV_HUGEPAGE);
        return p;
    }
    return malloc(n ? n : 1);
}

static int alloc_slots(struct psrt_table *t, int bits)
{
    size_t n = (size_t)1 << bits;
    uint64_t *k = big_alloc(n * sizeof *k);
    uint32_t *r = big_alloc(n * sizeof *r);
    if (!k || !r) {
        free(k);
        free(r);
        return -ENOMEM;
    }
    memset(k, 0xff, n * sizeof *k);
    t->keys = k;
    t->rows = r;
    t->bits = bits;
    t->mask = n - 1;
    return 0;
}

static inline uint64_t slot_of(const struct psrt_table *t, uint64_t key)
{
    return psrt_mix64(key) >> (64 - t->bits);
}

static int grow_rows(struct psrt_table *t, uint64_t need)
{
    if (need <= t->rowcap)
        return 0;
    uint64_t cap = t->rowcap ? t->rowcap : 1024;
    while (cap < need)
        cap *= 2;
    if (cap > UINT32_MAX)
        return -ENOMEM;
    size_t w = (size_t)t->width;
    float *v = realloc(t->val, cap * w * sizeof(float));
    if (!v)
        return -ENOMEM;
    t->val = v;
    for (int s = 0; s < t->nslots_opt; s++) {
        float *p = realloc(t->slot[s], cap * w * sizeof(float));
        if (!p)
            return -ENOMEM;
        t->slot[s] = p;
    }
    uint64_t *rk = realloc(t->rowkey, cap * sizeof *rk);
    if (!rk)
        return -ENOMEM;
    t->rowkey = rk;
    t->rowcap = cap;
    return 0;
}

int psrt_table_init(struct psrt_table *t, int width, int nslots, const float *slot_init,
                    uint64_t expect)
{
    memset(t, 0, sizeof *t);
    t->width = width;
    t->nslots_opt = nslots;
    for (int i = 0; i < nslots && i < 2; i++)
        t->slot_init[i] = slot_init ? slot_init[i] : 0;
    int bits = 10;
    while (((uint64_t)1 << bits) < expect * 2)
        bits++;
    int r = alloc_slots(t, bits);
    if (r)
        return r;
    return grow_rows(t, expect > 1024 ? expect : 1024);
}

void psrt_table_free(struct psrt_table *t)
{
    free(t->keys);
    free(t->rows);
    free(t->val);
    free(t->slot[0]);
    free(t->slot[1]);
    free(t->rowkey);
    memset(t, 0, sizeof *t);
}

void psrt_table_clear(struct psrt_table *t)
{
    memset(t->keys, 0xff, (t->mask + 1) * sizeof *t->keys);
    t->nrows = 0;
    t->has_empty_key = false;
}

static int rehash(struct psrt_table *t)
{
    uint64_t *ok = t->keys;
    uint32_t *orows = t->rows;
    uint64_t on = t->mask + 1;
    int r = alloc_slots(t, t->bits + 1);
    if (r)
        return r;
    for (uint64_t i = 0; i < on; i++) {
        if (ok[i] == PSRT_TABLE_EMPTY)
            continue;
        uint64_t s = slot_of(t, ok[i]);
        while (t->keys[s] != PSRT_TABLE_EMPTY)
            s = (s + 1) & t->mask;
        t->keys[s] = ok[i];
        t->rows[s] = orows[i];
    }
    free(ok);
    free(orows);
    return 0;
}

int64_t psrt_table_find(const struct psrt_table *t, uint64_t key)
{
    if (key == PSRT_TABLE_EMPTY)
        return t->has_empty_key ? (int64_t)t->empty_row : -1;
    uint64_t s = slot_of(t, key);
    for (;;) {
        uint64_t k = t->keys[s];
        if (k == key)
            return t->rows[s];
        if (k == PSRT_TABLE_EMPTY)
            return -1;
        s = (s + 1) & t->mask;
    }
}

static int64_t new_row(struct psrt_table *t, uint64_t key)
{
    if (grow_rows(t, t->nrows + 1))
        return -1;
    uint64_t row = t->nrows++;
    size_t w = (size_t)t->width;
    memset(t->val + row * w, 0, w * sizeof(float));
    for (int s = 0; s < t->nslots_opt; s++)
        for (size_t j = 0; j < w; j++)
            t->slot[s][row * w + j] = t->slot_init[s];
    t->rowkey[row] = key;
    return (int64_t)row;
}

int64_t psrt_table_insert(struct psrt_table *t, uint64_t key)
{
    if (key == PSRT_TABLE_EMPTY) {
        if (!t->has_empty_key) {
            int64_t r = new_row(t, key);
            if (r < 0)
                return -1;
            t->has_empty_key = true;
            t->empty_row = (uint32_t)r;
        }
        return t->empty_row;
    }
    if ((t->nrows + 1) * 2 > t->mask + 1 && rehash(t))
        return -1;
    uint64_t s = slot_of(t, key);
    for (;;) {
        uint64_t k = t->keys[s];
        if (k == key)
            return t->rows[s];
        if (k == PSRT_TABLE_EMPTY)
            break;
        s = (s + 1) & t->mask;
    }
    int64_t r = new_row(t, key);
    if (r < 0)
        return -1;
    t->keys[s] = key;
    t->rows[s] = (uint32_t)r;
    return r;
}

#define PF 16

void psrt_table_pull(const struct psrt_table *t, const uint64_t *keys, size_t n, float *out)
{
    const size_t w = (size_t)t->width;
    for (size_t i = 0; i < n; i++) {
        if (i + PF < n)
            __builtin_prefetch(&t->keys[slot_of(t, keys[i + PF])]);
        if (i + PF / 2 < n) {
            int64_t r = -1;
            uint64_t k = keys[i + PF / 2];
            if (k != PSRT_TABLE_EMPTY) {
                uint64_t s = slot_of(t, k);
                __builtin_prefetch(&t->rows[s]);
                (void)r;
            }
        }
        int64_t r = psrt_table_find(t, keys[i]);
        if (r < 0)
            memset(out + i * w, 0, w * sizeof(float));
        else if (w == 1)
            out[i] = t->val[r];
        else
            memcpy(out + i * w, t->val + (size_t)r * w, w * sizeof(float));
    }
}

int psrt_table_push(struct psrt_table *t, const struct psrt_optim *o, const uint64_t *keys,
                    const float *grads, size_t n, const struct psrt_adam_pow *pw)
{
    const size_t w = (size_t)t->width;
    /* Grow once up front so that prefetched addresses stay valid. */
    while ((t->nrows + n) * 2 > t->mask + 1)
        if (rehash(t))
            return -ENOMEM;
    if (grow_rows(t, t->nrows + n))
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        if (i + PF < n)
            __builtin_prefetch(&t->keys[slot_of(t, keys[i + PF])], 1);
        int64_t r = psrt_table_insert(t, keys[i]);
        if (r < 0)
            return -ENOMEM;
        float *s[2] = {t->slot[0] ? t->slot[0] + (size_t)r * w : NULL,
                       t->slot[1] ? t->slot[1] + (size_t)r * w : NULL};
        if (o->kind == PSRT_OPT_SGD && w == 1)
            t->val[r] -= o->lr * grads[i];
        else
            psrt_optim_apply_row(o, t->val + (size_t)r * w, s, grads + i * w, (int64_t)w, pw);
    }
    return 0;
}
