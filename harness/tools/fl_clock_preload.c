/*
 * fl_clock_preload.c: build/lib/fl_clock_preload.so, preloaded (before
 * libfaketime) into every task of a host with a `clock_drift`, so that all
 * the host's processes read one drifting clock.
 *
 * libfaketime's speed factor ("FAKETIME=+OFF xRATE") runs from each
 * process's own start: a process started at S reads S + OFF + (t - S) * RATE.
 * A host's clock should read t + OFFSET + (t - T0) * (RATE - 1) in every
 * process, whenever it started, T0 being the start of the run.  So this
 * library's constructor, in every process (a shell's `date` as much as the
 * task's first program), sets FAKETIME from its own start S, taken from the
 * real clock with a raw system call (libfaketime wraps clock_gettime):
 * OFF = OFFSET + (S - T0) * (RATE - 1).  libfaketime reads FAKETIME when it
 * first fakes a time, after every constructor has run.
 *
 * Environment (set by harness/clock_offset.c): FAULTLINE_CLOCK_T0_MS (T0,
 * ms since the epoch), FAULTLINE_CLOCK_OFFSET_MS, FAULTLINE_CLOCK_DRIFT_PPM
 * (RATE = 1 + ppm / 1e6).  Without them it does nothing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

__attribute__((constructor)) static void fl_clock_preload_init(void)
{
    const char *t0 = getenv("FAULTLINE_CLOCK_T0_MS"), *off = getenv("FAULTLINE_CLOCK_OFFSET_MS");
    const char *ppm = getenv("FAULTLINE_CLOCK_DRIFT_PPM");
    if (!t0 || !off || !ppm)
        return;
    /* libfaketime shares its state (the start its speed factor runs from)
     * with the children of a process through POSIX shared memory named in
     * FAKETIME_SHARED; here every process counts from its own start (the
     * offset below makes up for it), so none may take its parent's. */
    unsetenv("FAKETIME_SHARED");
    struct timespec ts;
    if (syscall(SYS_clock_gettime, CLOCK_REALTIME, &ts) != 0)
        return;
    double now_ms = (double)ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
    double p = strtod(ppm, NULL);
    double o = strtod(off, NULL) + (now_ms - strtod(t0, NULL)) * p / 1e6;     /* ms */
    char v[64];
    snprintf(v, sizeof v, "%+.6f x%.9f", o / 1e3, 1 + p / 1e6);
    setenv("FAKETIME", v, 1);
}
