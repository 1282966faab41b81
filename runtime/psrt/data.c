/*
 * data.c: deterministic random numbers for psrt's synthetic data and
 * initial values (xoshiro256**, seeded through splitmix64), so that every
 * worker regenerates exactly its shard of the data set from (seed, task,
 * step) and a test can recompute any batch.
 */
#include "runtime/psrt/psrt.h"

#include <math.h>

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void psrt_rng_seed(struct psrt_rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix(&x);
}

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t psrt_rng_u64(struct psrt_rng *r)
{
    uint64_t *s = r->s;
    uint64_t res = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return res;
}

double psrt_rng_uniform(struct psrt_rng *r)
{
    return (double)(psrt_rng_u64(r) >> 11) * 0x1.0p-53;
}

double psrt_rng_normal(struct psrt_rng *r)
{
    double u1 = psrt_rng_uniform(r), u2 = psrt_rng_uniform(r);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

uint64_t psrt_rng_seed_for(uint64_t seed, uint64_t a, uint64_t b)
{
    uint64_t x = seed ^ psrt_mix64(a + 0x1234567ull) ^ psrt_mix64(b * 0x9e3779b97f4a7c15ull + 7);
    return splitmix(&x);
}
