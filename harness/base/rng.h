/*
 * rng.h: splitmix64, the generator that turns one 64-bit seed into a stream
 * of well-mixed values (soak draws, offsets of bytes corrupted at rest).
 * The same seed gives the same values on every machine: runs replay.
 */
#ifndef FL_RNG_H
#define FL_RNG_H

#include <stdint.h>

/* The next value of the stream whose state is *x (advanced). */
static inline uint64_t fl_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

#endif
