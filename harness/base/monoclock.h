/*
 * monoclock.h: the monotonic clock, in seconds or milliseconds, for
 * deadlines and timings (never the wall clock, which a scenario may skew).
 */
#ifndef FL_MONOCLOCK_H
#define FL_MONOCLOCK_H

#include <stdint.h>
#include <time.h>

static inline double fl_mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline int64_t fl_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#endif
