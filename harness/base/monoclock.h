/*
 * monoclock.h: seconds on the monotonic clock, for deadlines and timings.
 */
#ifndef FL_MONOCLOCK_H
#define FL_MONOCLOCK_H

#include <time.h>

static inline double fl_mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#endif
