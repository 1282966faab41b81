/*
 * draw.c: drawing a concrete fault schedule from a soak profile and a
 * seed, and writing it out as an ordinary scenario file.
 *
 * Every random decision of a soak iteration comes from one generator
 * (xoshiro256**, seeded through splitmix64 from the iteration's seed, which
 * is itself derived from the soak's seed and the iteration number), in a
 * fixed order: entry by entry as the profile lists them, first the places
 * (a Poisson process of the entry's mean interval over its range, or
 * `count` uniform places), then per fault its target and its `for:`.  An
 * entry's range is the run's clock, [start, duration) in ms, or for an
 * entry with `after:` the numbers of its event, [MIN, MAX]: such a fault
 * fires on the N-th event (a point of the program, which a replay reaches
 * again however its timing differs) instead of at a time.  The same profile
 * and seed therefore always give the same schedule, and the iteration's
 * seed is also the run's seed ({seed}, libfiu's probability), recorded with
 * the run.  The rendered file pins both: `seed:` and one fault per drawn
 * fault, with its `at:` or its `after: {..., count: N}`.  The schedule is in
 * the order of each fault's place within its own range (0 at its start, 1
 * at its end), which is time order when every entry draws times; the
 * earliest max_faults are kept.
 */
#include "harness/base/rng.h"
#include "harness/soak/soak.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t fl_soak_iter_seed(uint64_t soak_seed, uint64_t iter)
{
    uint64_t x = soak_seed ^ (iter * 0xd1342543de82ef95ull);
    fl_splitmix64(&x);
    return fl_seed_of(fl_splitmix64(&x));
}

struct rng {
    uint64_t s[4];
};

static void rng_seed(struct rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = fl_splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t rng_next(struct rng *r)
{
    uint64_t *s = r->s, out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

/* uniform in [0, 1) */
static double rng_unit(struct rng *r)
{
    return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

/* uniform integer in [lo, hi] */
static int64_t rng_range(struct rng *r, int64_t lo, int64_t hi)
{
    if (hi <= lo)
        return lo;
    return lo + (int64_t)(rng_next(r) % (uint64_t)(hi - lo + 1));
}

static int by_place(const void *a, const void *b)
{
    const struct fl_soak_fault *x = a, *y = b;
    if (x->place != y->place)
        return x->place < y->place ? -1 : 1;
    /* ties (qsort is not stable): by entry, target, for */
    if (x->entry != y->entry)
        return x->entry < y->entry ? -1 : 1;
    if (x->target != y->target)
        return x->target < y->target ? -1 : 1;
    return x->for_ms < y->for_ms ? -1 : x->for_ms > y->for_ms;
}

static int push(struct fl_soak_schedule *sc, size_t *cap, struct fl_soak_fault f)
{
    if (sc->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        struct fl_soak_fault *v = realloc(sc->faults, nc * sizeof *v);
        if (!v)
            return -ENOMEM;
        sc->faults = v;
        *cap = nc;
    }
    sc->faults[sc->n++] = f;
    return 0;
}

/* One fault at x on its entry's range [lo, hi): a time in ms, or (after:)
 * the number of its event. */
static int place(struct fl_soak_schedule *sc, size_t *cap, const struct fl_soak_entry *e,
                 size_t entry, int64_t x, double lo, double hi)
{
    struct fl_soak_fault f = {.entry = entry, .place = ((double)x - lo) / (hi - lo)};
    if (e->after)
        f.nth = (long)x;
    else
        f.at_ms = x;
    return push(sc, cap, f);
}

int fl_soak_draw(const struct fl_soak_profile *p, uint64_t seed, struct fl_soak_schedule *out)
{
    struct rng r;
    size_t cap = 0;
    *out = (struct fl_soak_schedule){.seed = seed};
    rng_seed(&r, seed);
    for (size_t i = 0; i < p->n_entries; i++) {
        const struct fl_soak_entry *e = &p->entries[i];
        size_t first = out->n;
        /* the range [lo, hi): times in ms, or the numbers of the event */
        double lo = e->after ? (double)e->after_min : (double)p->start_ms,
               hi = e->after ? (double)e->after_max + 1 : (double)p->duration_ms;
        if (e->every_ms > 0) {
            double t = lo;
            for (int k = 0; k < 100000; k++) {
                t += -log1p(-rng_unit(&r)) * (double)e->every_ms;
                if (t >= hi)
                    break;
                if (place(out, &cap, e, i, (int64_t)t, lo, hi) < 0)
                    goto oom;
            }
        } else {
            int64_t n = rng_range(&r, e->count_min, e->count_max);
            for (int64_t k = 0; k < n; k++)
                if (place(out, &cap, e, i, rng_range(&r, (int64_t)lo, (int64_t)hi - 1), lo, hi) < 0)
                    goto oom;
        }
        for (size_t k = first; k < out->n; k++) {
            struct fl_soak_fault *f = &out->faults[k];
            f->target = e->n_targets ? (size_t)rng_range(&r, 0, (int64_t)e->n_targets - 1) : 0;
            if (e->has_for)
                f->for_ms = rng_range(&r, e->for_min_ms, e->for_max_ms);
        }
    }
    if (out->n)
        qsort(out->faults, out->n, sizeof *out->faults, by_place);
    if (out->n > p->max_faults)
        out->n = p->max_faults;
    return 0;
oom:
    fl_soak_schedule_free(out);
    return -ENOMEM;
}

void fl_soak_schedule_free(struct fl_soak_schedule *sc)
{
    free(sc->faults);
    sc->faults = NULL;
    sc->n = 0;
}

int fl_soak_fault_text(const struct fl_soak_profile *p, const struct fl_soak_fault *f, char *buf,
                       size_t len)
{
    const struct fl_soak_entry *e = &p->entries[f->entry];
    char dur[48] = "";
    if (e->has_for)
        snprintf(dur, sizeof dur, ", for: %" PRId64 "ms", f->for_ms);
    char when[1100];
    int w = e->after ? snprintf(when, sizeof when, "after: {%s, count: %ld}", e->after, f->nth)
                     : snprintf(when, sizeof when, "at: %" PRId64 "ms", f->at_ms);
    if (w < 0 || (size_t)w >= sizeof when)
        return -ENAMETOOLONG;
    w = snprintf(buf, len, "{%s, %s: %s%s%s}", when, e->kind,
                 e->n_targets ? e->targets[f->target] : e->value, e->extra, dur);
    return w < 0 || (size_t)w >= len ? -ENAMETOOLONG : 0;
}

int fl_soak_render(const struct fl_soak_profile *p, const struct fl_soak_schedule *sc,
                   const bool *keep, const char *header, char **out)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    int rc = 0;
    if (!f)
        return -ENOMEM;
    if (header)
        fputs(header, f);
    fputs(p->text, f);
    fprintf(f, "seed: %" PRIu64 "\n", sc->seed);
    size_t kept = 0;
    for (size_t i = 0; i < sc->n; i++)
        kept += !keep || keep[i];
    fputs(kept ? "faults:\n" : "faults: []\n", f);
    for (size_t i = 0; i < sc->n; i++) {
        char line[4096];
        if (keep && !keep[i])
            continue;
        if ((rc = fl_soak_fault_text(p, &sc->faults[i], line, sizeof line)) < 0)
            break;
        fprintf(f, "  - %s\n", line);
    }
    if (fclose(f) != 0 && rc == 0)
        rc = -ENOMEM;
    if (rc < 0) {
        free(text);
        return rc;
    }
    *out = text;
    return 0;
}

void fl_soak_failure_class(const char *verdict, const char *reason, char *buf, size_t len)
{
    const char *exp = strstr(reason, ": expected ");
    if (!strncmp(reason, "timed out", 9)) {
        snprintf(buf, len, "%s timed out", verdict);
    } else if (exp) {
        snprintf(buf, len, "%s %.*s", verdict, (int)(exp - reason), reason);
    } else {
        size_t n = (size_t)snprintf(buf, len, "%s ", verdict);
        for (const char *s = reason; *s && n + 1 < len && n < 120; s++) {
            /* a run id's hex part (runs/20261121-203137-cfa4b2/...): six or
             * more hex digits with a digit among them are one number */
            size_t hex = strspn(s, "0123456789abcdef");
            if (hex >= 6 && strpbrk(s, "0123456789") &&
                (size_t)(strpbrk(s, "0123456789") - s) < hex) {
                s += hex - 1;
                buf[n++] = '#';
                continue;
            }
            if (*s >= '0' && *s <= '9') {
                while (s[1] >= '0' && s[1] <= '9')
                    s++;
                buf[n++] = '#';
            } else {
                buf[n++] = *s;
            }
        }
        if (n < len)
            buf[n] = 0;
    }
}
