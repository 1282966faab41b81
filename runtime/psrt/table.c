/*
 * table.c: the rows of a sparse variable held by one ps: uint64 key -> row,
 * open addressing with linear probing over a power-of-two array of 16-byte
 * entries {~key, row, value}.  For width-1 variables (sparse_lr's weights)
 * the value lives in the entry itself, so an SGD update or a pull touches
 * one cache line; wider rows and the optimizer's slots live in arrays
 * indexed by row (grown by doubling).
 *
 * Batched pull and push walk their keys with software prefetching (the
 * entry of key i+D is requested while key i is processed, and the slot rows
 * of key i+D/2 once its entry is known) so that millions of random keys are
 * bound by memory throughput, not latency.  A big bucketed push or pull
 * instead reads each region it is about to visit in one sequential sweep
 * (warm).  The entry array is 2 MiB aligned and advised for transparent
 * huge pages (fewer TLB misses), and so is the scratch a big batch is
 * partitioned into (its scatter writes 1024 places at once).
 *
 * Growth never stops the table for a full rehash (doubling 2^23 slots
 * holding 6M rows at once took 0.8 s here, psrt bench grow; a ps's table
 * doubles a dozen times from its first 2^16 rows): past 3/4 load a new array of twice the slots is
 * mapped (anonymous memory, zero-filled by the kernel page by page as it is
 * first touched, which is why an entry holds ~key: a zero entry is a free
 * slot, and no pass over the new array is needed before use), and the old
 * array's slots move into it in order, MOVE_STEP of them on every later
 * upsert, region by region in a bucketed push (each bucket's region just
 * before its updates land there).  While old slots remain, a key is looked
 * up in the new array, then in the old: a key sits in the new array, or in
 * an old slot not moved yet (updated there in place and moved with its
 * value); new keys go to the new array only.  A fresh table sized for its
 * first big batch maps the array it needs at once.
 * Invariants: load factor of the (new) array <= 3/4 counting every row;
 * every entry with key != FREE has row < nrows; the key PSRT_TABLE_EMPTY
 * (~0 = FREE) itself lives outside the array (has_empty_key); old slots
 * [0, omig) have moved (their stale copies are never read: the new array
 * is looked at first).  Export sorts rows by key, so a saved table does not
 * depend on insertion history or table size: restoring and saving again
 * gives the same bytes.
 */
#include "runtime/psrt/psrt.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define PF 32     /* prefetch distance, in keys */
#define FREE 0ull /* an entry's key (~key) when its slot is free */
/* Old slots moved per upsert while the table grows: the move of all S of
 * them ends after S / MOVE_STEP upserts, long before the new array (2S
 * slots, entered at 3/4 S rows) reaches 3/4 load itself; each upsert moves
 * at most this many entries (tens of ns each). */
#define MOVE_STEP PSRT_TABLE_MOVE_STEP
_Static_assert(MOVE_STEP >= 2, "the move must end before the new array is 3/4 full");

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

/* Bytes mapped for 2^bits entries and one more past the end that always
 * stays FREE, so that a look at a slot and the next one (near) needs no
 * wrap check. */
static size_t entries_len(int bits)
{
    return ((((size_t)1 << bits) + 1) * sizeof(struct psrt_entry) + 4095) & ~(size_t)4095;
}

/* 2^bits + 1 FREE entries: an anonymous mapping, whose pages the kernel
 * zero-fills when first touched (no pass over them here, so mapping an
 * array of any size is a pause of microseconds), 2 MiB aligned and advised
 * for transparent huge pages when that big. */
static struct psrt_entry *alloc_entries(int bits)
{
    const size_t len = entries_len(bits), huge = 2u << 20;
    const int prot = PROT_READ | PROT_WRITE, fl = MAP_PRIVATE | MAP_ANONYMOUS;
    if (len < huge) {
        void *p = mmap(NULL, len, prot, fl, -1, 0);
        return p == MAP_FAILED ? NULL : p;
    }
    uint8_t *p = mmap(NULL, len + huge, prot, fl, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    uint8_t *a = (uint8_t *)(((uintptr_t)p + huge - 1) & ~(uintptr_t)(huge - 1));
    if (a > p)
        munmap(p, (size_t)(a - p));
    if (p + len + huge > a + len)
        munmap(a + len, (size_t)(p + len + huge - (a + len)));
    madvise(a, len, MADV_HUGEPAGE);
    return (struct psrt_entry *)a;
}

static void free_entries(struct psrt_entry *e, int bits)
{
    if (e)
        munmap(e, entries_len(bits));
}

/* Whether key (stored as sk = ~key) is not within its home slot s and the
 * next one; otherwise *e is its entry.  Without branches on the keys: at
 * the table's load (at most 3/4, usually about 0.6) some 85% of the keys in
 * the table sit in one of these two, and a mispredicted probe loop per
 * lookup was about a fifth of a big batch of updates.  When it returns
 * true the caller probes from s as usual (the key may be absent: a new key
 * always gets there).  key must not be EMPTY. */
static inline bool not_near(struct psrt_entry *E, uint64_t s, uint64_t sk, struct psrt_entry **e)
{
    uint64_t d0 = E[s].key != sk, d1 = E[s + 1].key != sk;
    __asm__("" : "+r"(d0), "+r"(d1)); /* keep the compiler from branching on them */
    *e = &E[s + d0];
    return d0 & d1;
}

static inline uint64_t slot_of(const struct psrt_table *t, uint64_t key)
{
    return psrt_mix64(key) >> (64 - t->bits);
}

/* Linear probing in E (mask) from slot s: the entry holding sk (~key, not
 * FREE), or the free entry where it would go. */
static inline struct psrt_entry *probe_in(struct psrt_entry *E, uint64_t mask, uint64_t s,
                                          uint64_t sk)
{
    while (E[s].key != sk && E[s].key != FREE)
        s = (s + 1) & mask;
    return &E[s];
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
    if (w > 1) {
        float *v = realloc(t->val, cap * w * sizeof(float));
        if (!v)
            return -ENOMEM;
        t->val = v;
    }
    for (int s = 0; s < t->nslots_opt; s++) {
        float *p = realloc(t->slot[s], cap * w * sizeof(float));
        if (!p)
            return -ENOMEM;
        t->slot[s] = p;
    }
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
    while (((uint64_t)1 << bits) * 3 < expect * 4)
        bits++;
    t->e = alloc_entries(bits); /* all FREE */
    if (!t->e)
        return -ENOMEM;
    t->bits = bits;
    t->mask = ((uint64_t)1 << bits) - 1;
    return grow_rows(t, expect > 1024 ? expect : 1024);
}

void psrt_table_free(struct psrt_table *t)
{
    free(t->scratch);
    free_entries(t->e, t->bits);
    free_entries(t->old, t->obits);
    free(t->val);
    free(t->slot[0]);
    free(t->slot[1]);
    memset(t, 0, sizeof *t);
}

/* Every slot FREE again, keeping the array (and its pages: the next fill
 * of a cleared table does not fault them in again). */
void psrt_table_clear(struct psrt_table *t)
{
    free_entries(t->old, t->obits);
    t->old = NULL;
    memset(t->e, 0, (t->mask + 2) * sizeof *t->e);
    t->nrows = 0;
    t->has_empty_key = false;
}

/* ---- growth ------------------------------------------------------------- */

static inline uint64_t old_slots(const struct psrt_table *t)
{
    return (uint64_t)1 << t->obits;
}

/* Moves old slots [omig, to) into the new array (to <= old_slots); the old
 * array goes once every slot has moved. */
static void move_until(struct psrt_table *t, uint64_t to)
{
    const struct psrt_entry *O = t->old;
    struct psrt_entry *E = t->e;
    const uint64_t mask = t->mask;
    for (uint64_t i = t->omig; i < to; i++) {
        if (O[i].key == FREE)
            continue;
        /* not in the new array (keys enter it only when absent from both) */
        struct psrt_entry *e = probe_in(E, mask, slot_of(t, ~O[i].key), FREE);
        *e = O[i];
    }
    if (to > t->omig)
        t->omig = to;
    if (t->omig == old_slots(t)) {
        free_entries(t->old, t->obits);
        t->old = NULL;
    }
}

/* Moves old slots up to `to` and on to the next free one: then every key
 * whose old home slot is below `to` has moved (a key sits between its home
 * and the next free slot), so new-array slots homed there need no look at
 * the old array. */
static void move_through(struct psrt_table *t, uint64_t to)
{
    const uint64_t on = old_slots(t);
    while (to < on && t->old[to].key != FREE)
        to++;
    move_until(t, to);
}

/* Makes the array 2^bits slots (more than it has): an array holding no
 * key is replaced at once; otherwise its slots start moving into the new
 * one (an earlier move is finished first: not on the usual schedule, see
 * MOVE_STEP).  0 or -ENOMEM. */
static int grow_to(struct psrt_table *t, int bits)
{
    struct psrt_entry *ne = alloc_entries(bits);
    if (!ne)
        return -ENOMEM;
    if (t->old)
        move_until(t, old_slots(t));
    if (t->nrows == (t->has_empty_key ? 1u : 0u)) {
        free_entries(t->e, t->bits);
    } else {
        t->old = t->e;
        t->obits = t->bits;
        t->omig = 0;
    }
    t->e = ne;
    t->bits = bits;
    t->mask = ((uint64_t)1 << bits) - 1;
    return 0;
}

/* Room for one more row: a step of the move in progress, or a new array
 * when this row would load the current one past 3/4.  0 or -ENOMEM. */
static int make_room(struct psrt_table *t)
{
    if (t->old)
        move_until(t, t->omig + MOVE_STEP < old_slots(t) ? t->omig + MOVE_STEP : old_slots(t));
    if ((t->nrows + 1) * 4 <= (t->mask + 1) * 3)
        return 0;
    return grow_to(t, t->bits + 1);
}

static inline float *value_of(struct psrt_table *t, struct psrt_entry *e)
{
    return t->width == 1 ? &e->v : t->val + (size_t)e->row * (size_t)t->width;
}

/* Linear probing in the (new) array from slot s: the entry holding sk
 * (~key, not FREE), or the free entry where it would go. */
static inline struct psrt_entry *probe(const struct psrt_table *t, uint64_t s, uint64_t sk)
{
    return probe_in(t->e, t->mask, s, sk);
}

/* While the table grows: the entry of key in an old slot not moved yet, or
 * NULL. */
static struct psrt_entry *find_old(const struct psrt_table *t, uint64_t key)
{
    if (!t->old)
        return NULL;
    uint64_t sk = ~key;
    struct psrt_entry *o =
        probe_in(t->old, old_slots(t) - 1, psrt_mix64(key) >> (64 - t->obits), sk);
    return o->key == sk ? o : NULL;
}

/* The entry of key, or NULL. */
static struct psrt_entry *find(const struct psrt_table *t, uint64_t key)
{
    if (key == PSRT_TABLE_EMPTY)
        return t->has_empty_key ? (struct psrt_entry *)&t->empty : NULL;
    struct psrt_entry *e = probe(t, slot_of(t, key), ~key);
    return e->key == ~key ? e : find_old(t, key);
}

int64_t psrt_table_find(const struct psrt_table *t, uint64_t key)
{
    const struct psrt_entry *e = find(t, key);
    return e ? (int64_t)e->row : -1;
}

const float *psrt_table_lookup(const struct psrt_table *t, uint64_t key)
{
    struct psrt_entry *e = find(t, key);
    return e ? value_of((struct psrt_table *)t, e) : NULL;
}

static struct psrt_entry *new_row(struct psrt_table *t, struct psrt_entry *e, uint64_t key)
{
    if (grow_rows(t, t->nrows + 1))
        return NULL;
    uint32_t row = (uint32_t)t->nrows++;
    size_t w = (size_t)t->width;
    e->key = ~key;
    e->row = row;
    e->v = 0;
    if (w > 1)
        memset(t->val + row * w, 0, w * sizeof(float));
    for (int s = 0; s < t->nslots_opt; s++)
        for (size_t j = 0; j < w; j++)
            t->slot[s][row * w + j] = t->slot_init[s];
    return e;
}

/* Entry of key, created (zero value, initial slots) if absent; NULL on ENOMEM. */
static struct psrt_entry *upsert(struct psrt_table *t, uint64_t key)
{
    if (key == PSRT_TABLE_EMPTY) {
        if (!t->has_empty_key) {
            if (!new_row(t, &t->empty, key))
                return NULL;
            t->has_empty_key = true;
        }
        return &t->empty;
    }
    if (make_room(t))
        return NULL;
    struct psrt_entry *e = probe(t, slot_of(t, key), ~key), *o;
    if (e->key == ~key)
        return e;
    return (o = find_old(t, key)) ? o : new_row(t, e, key);
}

float *psrt_table_insert(struct psrt_table *t, uint64_t key, uint32_t *row)
{
    struct psrt_entry *e = upsert(t, key);
    if (!e)
        return NULL;
    if (row)
        *row = e->row;
    return value_of(t, e);
}

/* Big SGD batches into a big table: radix-partition the updates by the
 * region of the table they touch (BUCKET_BITS top bits of the slot), then
 * apply them region by region, so that each region's entries stay in cache
 * instead of every update missing it.  The scatter is stable: updates of one
 * key keep their order, so the result is exactly what applying the batch in
 * its order gives.  Records are 16 bytes (key, slot, gradient) and the hash
 * is computed again in the scatter pass rather than stored: both passes are
 * bound by memory traffic, not by the hash.  New rows are written in place
 * (width 1, no slots: the row number is the only state).  If new keys make
 * the table grow, the rest of the batch goes through upsert. */
#define BUCKET_BITS 10
#define BUCKET_MIN 65536

/* one update of a big push; one lookup of a big pull */
struct supd {
    uint64_t key;
    uint32_t slot;
    float g;
};
struct slook {
    uint64_t key;
    uint32_t slot, idx;
};
/* t->scratch holds scratch_cap of either */
_Static_assert(sizeof(struct supd) == 16 && sizeof(struct slook) == 16, "scratch records");

/* t->scratch holds at least n records (contents not kept); 0 or -ENOMEM. */
static int scratch_reserve(struct psrt_table *t, size_t n)
{
    if (t->scratch_cap >= n)
        return 0;
    free(t->scratch);
    t->scratch = big_alloc(n * sizeof(struct supd));
    t->scratch_cap = t->scratch ? n : 0;
    return t->scratch ? 0 : -ENOMEM;
}

static int push_upsert(struct psrt_table *t, float lr, const struct supd *u, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct psrt_entry *e = upsert(t, u[i].key);
        if (!e)
            return -ENOMEM;
        e->v -= lr * u[i].g;
    }
    return 0;
}

/* Where key (stored as sk = ~key) is, or would go, among its home slot s
 * and the next: the first of the two that holds sk or is FREE; NULL when
 * neither does (the caller probes on from s + 1).  The next slot counts
 * only when s is not the last one: the sentinel past the end is no place
 * to claim.  Without branches on the keys, like not_near: at the table's
 * load some 85% of new keys find their place here, and the mispredicted
 * probe loop was most of what an insert into a cached region cost. */
static inline struct psrt_entry *near_place(struct psrt_entry *E, uint64_t s, uint64_t mask,
                                            uint64_t sk)
{
    uint64_t k0 = E[s].key, k1 = E[s + 1].key;
    uint64_t c0 = (k0 == sk) | (k0 == FREE);
    uint64_t c1 = ((k1 == sk) | (k1 == FREE)) & (s < mask);
    __asm__("" : "+r"(c0), "+r"(c1)); /* keep the compiler from branching on them */
    return c0 | c1 ? &E[s + (c0 ^ 1)] : NULL;
}

/* Applies u[0..n) in order; stops (returning how many were applied) at
 * the EMPTY key or when a new row would make the table grow; (size_t)-1 on
 * ENOMEM.  pf: prefetch each update's entry ahead (the caller did not warm
 * the region u touches).  The keys of u are not in the old array (the
 * caller moved their home slots: move_through). */
static size_t apply_sorted(struct psrt_table *t, float lr, const struct supd *u, size_t n, bool pf)
{
    struct psrt_entry *E = t->e;
    const uint64_t mask = t->mask, limit = (mask + 1) * 3 / 4;
    const bool plain = t->nslots_opt == 0 && t->width == 1;
    uint64_t nrows = t->nrows;
    size_t i = 0;
    for (; i < n; i++) {
        if (pf && i + PF < n)
            __builtin_prefetch(&E[u[i + PF].slot], 1);
        uint64_t key = u[i].key, sk = ~key, s = u[i].slot;
        if (key == PSRT_TABLE_EMPTY || nrows + 1 > limit)
            break;
        struct psrt_entry *e = near_place(E, s, mask, sk);
        if (__builtin_expect(!e, 0))
            for (s = (s + 1) & mask;; s = (s + 1) & mask) {
                e = &E[s];
                if (e->key == sk || e->key == FREE)
                    break;
            }
        if (plain) { /* new_row without branches: width 1, no slots, rows reserved */
            uint64_t fresh = e->key == FREE;
            __asm__("" : "+r"(fresh));
            float v = fresh ? 0.0f : e->v;
            e->row = fresh ? (uint32_t)nrows : e->row;
            nrows += fresh;
            e->key = sk;
            e->v = v - lr * u[i].g;
            continue;
        }
        if (e->key == FREE) {
            t->nrows = nrows;
            e = new_row(t, e, key);
            nrows = t->nrows;
            if (!e)
                return (size_t)-1;
        }
        e->v -= lr * u[i].g;
    }
    t->nrows = nrows;
    return i;
}

/* Applies segment u[0..n) of a bucketed push; *grown once the table had to
 * grow (the rest of this segment went through upsert, and so must every
 * later one: their slots are stale).  pf as for apply_sorted. */
static int apply_segment(struct psrt_table *t, float lr, const struct supd *u, size_t n, bool pf,
                         bool *grown)
{
    if (*grown)
        return push_upsert(t, lr, u, n);
    size_t i = 0;
    while (i < n) {
        size_t a = apply_sorted(t, lr, u + i, n - i, pf);
        if (a == (size_t)-1)
            return -ENOMEM;
        i += a;
        if (i == n)
            break;
        if (u[i].key == PSRT_TABLE_EMPTY && (t->nrows + 1) * 4 <= (t->mask + 1) * 3) {
            if (push_upsert(t, lr, &u[i], 1)) /* it lives outside the array */
                return -ENOMEM;
            i++;
            continue;
        }
        *grown = true;
        return push_upsert(t, lr, u + i, n - i);
    }
    return 0;
}

/* Reads one word of every cache line of entries [from, to): a bucket's
 * region brought into cache by a sequential read, which the hardware
 * prefetcher streams, before its updates land on it in random order.
 * Worth it when the updates (or lookups) touch most of the region's lines
 * (worth_warming); for 5 M inserts into 2^23 slots it took a bucketed apply from 45
 * to 40.5 ms (best of 3 runs each, one core). */
static void warm(const struct psrt_entry *E, uint64_t from, uint64_t to)
{
    uint64_t acc = 0;
    for (uint64_t i = from; i < to; i += 64 / sizeof *E)
        acc += E[i].key;
    __asm__ volatile("" : : "r"(acc));
}

/* Whether m updates or lookups in a region of that many slots are worth
 * a warm: they touch at least half its cache lines. */
static bool worth_warming(size_t m, uint64_t region)
{
    return m * 2 * (64 / sizeof(struct psrt_entry)) >= region;
}

/* One scatter pass over the blocks' pairs (see push_bucketed). */
static bool scatter_fixed(struct supd *u, size_t *cnt, size_t cap, int bits,
                          const struct psrt_kv *blk, size_t nblk)
{
    const int shift = BUCKET_BITS;
    for (size_t j = 0; j < nblk; j++) {
        const uint64_t *keys = blk[j].keys;
        const float *grads = blk[j].vals;
        for (size_t i = 0, n = blk[j].n; i < n; i++) {
            uint64_t h = psrt_mix64(keys[i]);
            size_t b = h >> (64 - shift);
            if (cnt[b] == cap)
                return false;
            u[b * cap + cnt[b]++] = (struct supd){keys[i], (uint32_t)(h >> (64 - bits)), grads[i]};
        }
    }
    return true;
}

static int push_bucketed(struct psrt_table *t, float lr, const struct psrt_kv *blk, size_t nblk,
                         size_t n)
{
    const int bits = t->bits, shift = BUCKET_BITS; /* bucket = slot >> (bits - BUCKET_BITS) */
    const size_t nb = (size_t)1 << BUCKET_BITS;
    if (grow_rows(t, t->nrows + n)) /* row numbers only: width 1, no slots */
        return -ENOMEM;
    /* One pass into buckets of a fixed capacity, far above what hashed keys
     * fill (mean n/nb, standard deviation about its square root); when one
     * overflows anyway (many repeats of a key), two passes: sizes first. */
    size_t cap = n / nb + n / nb / 8 + 256, need = nb * cap;
    if (scratch_reserve(t, need))
        return -ENOMEM;
    struct supd *u = t->scratch;
    size_t cnt[1 << BUCKET_BITS], start[(1 << BUCKET_BITS) + 1];
    memset(cnt, 0, sizeof cnt);
    double t0 = psrt_now();
    bool fits = scatter_fixed(u, cnt, cap, bits, blk, nblk);
    if (!fits) {
        memset(start, 0, sizeof start);
        for (size_t j = 0; j < nblk; j++)
            for (size_t i = 0; i < blk[j].n; i++)
                start[(psrt_mix64(blk[j].keys[i]) >> (64 - shift)) + 1]++;
        for (size_t b = 0; b < nb; b++)
            start[b + 1] += start[b];
        for (size_t j = 0; j < nblk; j++)
            for (size_t i = 0; i < blk[j].n; i++) {
                uint64_t k = blk[j].keys[i], h = psrt_mix64(k);
                u[start[h >> (64 - shift)]++] =
                    (struct supd){k, (uint32_t)(h >> (64 - bits)), blk[j].vals[i]};
            }
        /* now start[b] is where bucket b ends */
    }
    double t1 = psrt_now();
    bool grown = false;
    const uint64_t region = (uint64_t)1 << (bits - shift); /* slots per bucket */
    for (size_t b = 0; b < nb; b++) {
        size_t at = fits ? b * cap : b ? start[b - 1] : 0;
        size_t m = fits ? cnt[b] : start[b] - at;
        /* a growing table: the old slots homing this region's keys move
         * first (then its keys are in the new array or nowhere) */
        if (!grown && t->old)
            move_through(t, ((b + 1) * region) >> (bits - t->obits));
        bool w = !grown && worth_warming(m, region);
        if (w)
            warm(t->e, b * region, (b + 1) * region);
        if (apply_segment(t, lr, u + at, m, !w, &grown))
            return -ENOMEM;
    }
    if (psrt_bench_debug())
        fprintf(stderr, "bucketed push: scatter %.1f ms (%s), apply %.1f ms\n", (t1 - t0) * 1e3,
                fits ? "one pass" : "two passes", (psrt_now() - t1) * 1e3);
    return 0;
}

/* Big lookups, region by region like push_bucketed; results land in the
 * caller's order.  0 on success, -ENOMEM (then the caller goes the simple
 * way). */
static int pull_bucketed(struct psrt_table *t, const uint64_t *keys, size_t n, float *out)
{
    const int bits = t->bits;
    const size_t nb = (size_t)1 << BUCKET_BITS;
    if (scratch_reserve(t, n))
        return -ENOMEM;
    struct slook *u = t->scratch;
    size_t start[(1 << BUCKET_BITS) + 1];
    memset(start, 0, sizeof start);
    for (size_t i = 0; i < n; i++)
        start[(psrt_mix64(keys[i]) >> (64 - BUCKET_BITS)) + 1]++;
    for (size_t b = 0; b < nb; b++)
        start[b + 1] += start[b];
    for (size_t i = 0; i < n; i++) {
        uint64_t h = psrt_mix64(keys[i]);
        u[start[h >> (64 - BUCKET_BITS)]++] =
            (struct slook){keys[i], (uint32_t)(h >> (64 - bits)), (uint32_t)i};
    }
    struct psrt_entry *E = t->e;
    const uint64_t region = (uint64_t)1 << (bits - BUCKET_BITS);
    for (size_t b = 0, i = 0; b < nb; b++) {
        /* now start[b] is where bucket b ends; warm as push_bucketed does */
        bool w = worth_warming(start[b] - i, region);
        if (w)
            warm(E, b * region, (b + 1) * region);
        for (; i < start[b]; i++) {
            if (!w && i + PF < n)
                __builtin_prefetch(&E[u[i + PF].slot]);
            uint64_t key = u[i].key, sk = ~key, sl = u[i].slot;
            struct psrt_entry *e;
            if (key == PSRT_TABLE_EMPTY) {
                e = find(t, key);
            } else if (__builtin_expect(not_near(E, sl, sk, &e), 0)) {
                e = probe(t, sl, sk);
                if (e->key != sk)
                    e = NULL;
            }
            out[u[i].idx] = e ? e->v : 0.0f;
        }
    }
    return 0;
}

void psrt_table_pull(const struct psrt_table *t, const uint64_t *keys, size_t n, float *out)
{
    const size_t w = (size_t)t->width;
    if (t->old) { /* growing: two arrays to look in (find) */
        for (size_t i = 0; i < n; i++) {
            const struct psrt_entry *e = find(t, keys[i]);
            if (!e)
                memset(out + i * w, 0, w * sizeof(float));
            else
                memcpy(out + i * w, value_of((struct psrt_table *)t, (struct psrt_entry *)e),
                       w * sizeof(float));
        }
        return;
    }
    if (w == 1 && n >= BUCKET_MIN && n <= UINT32_MAX && t->bits > BUCKET_BITS + 6 &&
        t->bits <= 32 && pull_bucketed((struct psrt_table *)t, keys, n, out) == 0)
        return;
    uint64_t ring[PF];
    size_t pre = n < PF ? n : PF;
    for (size_t i = 0; i < pre; i++) {
        ring[i] = slot_of(t, keys[i]);
        __builtin_prefetch(&t->e[ring[i]]);
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t key = keys[i], s = ring[i % PF];
        if (i + PF < n) {
            uint64_t s2 = slot_of(t, keys[i + PF]);
            ring[i % PF] = s2;
            __builtin_prefetch(&t->e[s2]);
        }
        const struct psrt_entry *e;
        if (key == PSRT_TABLE_EMPTY) {
            e = find(t, key);
        } else {
            e = probe(t, s, ~key);
            if (e->key != ~key)
                e = NULL;
        }
        if (!e)
            memset(out + i * w, 0, w * sizeof(float));
        else if (w == 1)
            out[i] = e->v;
        else
            memcpy(out + i * w, t->val + (size_t)e->row * w, w * sizeof(float));
    }
}

/* Applies keys[0..n) in order, without bucketing. */
static int push_plain(struct psrt_table *t, const struct psrt_optim *o, const uint64_t *keys,
                      const float *grads, size_t n, const struct psrt_adam_pow *pw)
{
    const size_t w = (size_t)t->width;
    if (o->kind == PSRT_OPT_SGD && w == 1) {
        /* the hot path: slot indices computed once, in a ring PF ahead */
        const float lr = o->lr;
        uint64_t ring[PF];
        size_t pre = n < PF ? n : PF;
        for (size_t i = 0; i < pre; i++) {
            ring[i] = slot_of(t, keys[i]);
            __builtin_prefetch(&t->e[ring[i]], 1);
        }
        int bits = t->bits;
        for (size_t i = 0; i < n; i++) {
            uint64_t key = keys[i], s = ring[i % PF];
            if (i + PF < n) {
                uint64_t s2 = slot_of(t, keys[i + PF]);
                ring[i % PF] = s2;
                __builtin_prefetch(&t->e[s2], 1);
            }
            struct psrt_entry *e;
            if (key == PSRT_TABLE_EMPTY || t->old || t->bits != bits ||
                (t->nrows + 1) * 4 > (t->mask + 1) * 3) {
                e = upsert(t, key); /* rare: special key, growth */
                if (!e)
                    return -ENOMEM;
                if (t->bits != bits) {
                    /* the slots in the ring are for the old size: a probe
                     * from a stale slot would miss the key and add it twice */
                    bits = t->bits;
                    for (size_t j = i + 1; j < n && j <= i + PF; j++)
                        ring[j % PF] = slot_of(t, keys[j]);
                }
            } else {
                e = probe(t, s, ~key);
                if (e->key != ~key && !(e = new_row(t, e, key)))
                    return -ENOMEM;
            }
            e->v -= lr * grads[i];
        }
        return 0;
    }
    /* rows of keys[i + PF/2] are known once their entry line arrived */
    for (size_t i = 0; i < n; i++) {
        if (i + PF < n)
            __builtin_prefetch(&t->e[slot_of(t, keys[i + PF])], 1);
        if (i + PF / 2 < n && t->nslots_opt) {
            const struct psrt_entry *ahead = find(t, keys[i + PF / 2]);
            if (ahead)
                for (int s = 0; s < t->nslots_opt; s++)
                    __builtin_prefetch(&t->slot[s][(size_t)ahead->row * w], 1);
        }
        struct psrt_entry *e = upsert(t, keys[i]);
        if (!e)
            return -ENOMEM;
        float *s[2] = {t->slot[0] ? t->slot[0] + (size_t)e->row * w : NULL,
                       t->slot[1] ? t->slot[1] + (size_t)e->row * w : NULL};
        psrt_optim_apply_row(o, value_of(t, e), s, grads + i * w, (int64_t)w, pw);
    }
    return 0;
}

int psrt_table_push_blocks(struct psrt_table *t, const struct psrt_optim *o,
                           const struct psrt_kv *blk, size_t nblk, const struct psrt_adam_pow *pw)
{
    const size_t w = (size_t)t->width;
    size_t n = 0;
    for (size_t j = 0; j < nblk; j++)
        n += blk[j].n;
    /* A fresh table maps the array the whole batch needs at once instead of
     * doubling through every size; a populated one grows only if new keys
     * need it (a stale prefetch after growth is harmless). */
    if (t->nrows == 0 && n * 4 > (t->mask + 1) * 3) {
        int bits = t->bits;
        while (((uint64_t)1 << bits) * 3 < n * 4)
            bits++;
        if (grow_to(t, bits))
            return -ENOMEM;
    }
    if (w > 1 || t->nslots_opt)
        if (grow_rows(t, t->nrows + n))
            return -ENOMEM;
    if (o->kind == PSRT_OPT_SGD && w == 1 && n >= BUCKET_MIN && t->bits > BUCKET_BITS + 6 &&
        t->bits <= 32)
        return push_bucketed(t, o->lr, blk, nblk, n);
    for (size_t j = 0; j < nblk; j++) {
        int r = push_plain(t, o, blk[j].keys, blk[j].vals, blk[j].n, pw);
        if (r)
            return r;
    }
    return 0;
}

int psrt_table_push(struct psrt_table *t, const struct psrt_optim *o, const uint64_t *keys,
                    const float *grads, size_t n, const struct psrt_adam_pow *pw)
{
    struct psrt_kv b = {keys, grads, n};
    return psrt_table_push_blocks(t, o, &b, 1, pw);
}

/* ---- export ------------------------------------------------------------- */

struct kr {
    uint64_t key;
    struct psrt_entry *e;
};

/* LSD radix sort by key, 16 bits a pass; the passes alternate between a
 * and tmp, and an even number of them (4) leaves the result in a. */
static int radix_sort(struct kr *a, struct kr *tmp, size_t n)
{
    size_t *count = malloc(65537 * sizeof *count);
    if (!count)
        return -ENOMEM;
    struct kr *src = a, *dst = tmp;
    for (int shift = 0; shift < 64; shift += 16) {
        memset(count, 0, 65537 * sizeof *count);
        for (size_t i = 0; i < n; i++)
            count[((src[i].key >> shift) & 0xffff) + 1]++;
        for (int b = 0; b < 65536; b++)
            count[b + 1] += count[b];
        for (size_t i = 0; i < n; i++)
            dst[count[(src[i].key >> shift) & 0xffff]++] = src[i];
        struct kr *t = src;
        src = dst;
        dst = t;
    }
    _Static_assert(64 / 16 % 2 == 0, "an odd number of passes would end in tmp");
    free(count);
    return 0;
}

int psrt_table_export(const struct psrt_table *t, uint64_t **keys, float **vals, float **slots,
                      uint64_t *nout)
{
    size_t n = t->nrows, w = (size_t)t->width, k = 0;
    struct kr *a = malloc((n ? n : 1) * sizeof *a), *tmp = malloc((n ? n : 1) * sizeof *a);
    uint64_t *ko = malloc((n ? n : 1) * 8);
    float *vo = malloc((n ? n : 1) * w * 4);
    float *so[2] = {NULL, NULL};
    for (int s = 0; s < t->nslots_opt; s++)
        so[s] = malloc((n ? n : 1) * w * 4);
    if (!a || !tmp || !ko || !vo || (t->nslots_opt > 0 && !so[0]) || (t->nslots_opt > 1 && !so[1]))
        goto nomem;
    for (uint64_t i = 0; i <= t->mask; i++)
        if (t->e[i].key != FREE)
            a[k++] = (struct kr){~t->e[i].key, &t->e[i]};
    for (uint64_t i = t->old ? t->omig : 0; t->old && i < old_slots(t); i++)
        if (t->old[i].key != FREE) /* not moved yet */
            a[k++] = (struct kr){~t->old[i].key, &t->old[i]};
    if (t->has_empty_key)
        a[k++] = (struct kr){PSRT_TABLE_EMPTY, (struct psrt_entry *)&t->empty};
    if (radix_sort(a, tmp, k))
        goto nomem;
    for (size_t i = 0; i < k; i++) {
        ko[i] = a[i].key;
        memcpy(vo + i * w, value_of((struct psrt_table *)t, a[i].e), w * 4);
        for (int s = 0; s < t->nslots_opt; s++)
            memcpy(so[s] + i * w, t->slot[s] + (size_t)a[i].e->row * w, w * 4);
    }
    free(a);
    free(tmp);
    *keys = ko;
    *vals = vo;
    slots[0] = so[0];
    slots[1] = so[1];
    *nout = k;
    return 0;
nomem:
    free(a);
    free(tmp);
    free(ko);
    free(vo);
    free(so[0]);
    free(so[1]);
    return -ENOMEM;
}
