/*
 * rng.h: splitmix64, the generator that turns one 64-bit seed into a stream
 * of well-mixed values (soak draws, offsets of bytes corrupted at rest).
 * The same seed gives the same values on every machine: runs replay.
 */
#ifndef FL_RNG_H
#define FL_RNG_H

#include <stdint.h>

/* Seeds are 0..FL_SEED_MAX (63 bits): SQLite's INTEGER is signed, and a
 * seed must be printed, stored and typed back as the same number.  A seed
 * drawn at random is masked to it (fl_seed_of). */
#define FL_SEED_MAX 0x7fffffffffffffffULL
static inline uint64_t fl_seed_of(uint64_t random_bits)
{
    return random_bits & FL_SEED_MAX;
}

/* The next value of the stream whose state is *x (advanced). */
static inline uint64_t fl_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* FNV-1a of a string: a seed mixed with it gives a stream of the string's
 * own (a file's path, a host's name). */
static inline uint64_t fl_str_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ULL;
    return h;
}

#endif
