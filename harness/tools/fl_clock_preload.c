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
 * Environment (set by harness/run/clock_offset.c): FAULTLINE_CLOCK_T0_MS (T0,
 * ms since the epoch), FAULTLINE_CLOCK_OFFSET_MS, FAULTLINE_CLOCK_DRIFT_PPM
 * (RATE = 1 + ppm / 1e6).  Without them the constructor does nothing.
 *
 * It is preloaded into the tasks of a host with a `clock_offset` alone too,
 * for one wrapper: clock_nanosleep with TIMER_ABSTIME on a clock that is not
 * faked (CLOCK_MONOTONIC and the like, under FAKETIME_DONT_FAKE_MONOTONIC=1)
 * goes straight to the kernel.  libfaketime 0.9.10 fails such a call with
 * EINVAL, and that is how Python's time.sleep sleeps: every Python task on
 * a host with a clock offset died at its first sleep.  The deadline is on
 * the real clock, so the kernel's own call is the right one; every other
 * call goes on to libfaketime.
 */
#include <dlfcn.h>
#include <errno.h>
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
    double o = strtod(off, NULL) + (now_ms - strtod(t0, NULL)) * p / 1e6; /* ms */
    char v[64];
    snprintf(v, sizeof v, "%+.6f x%.9f", o / 1e3, 1 + p / 1e6);
    setenv("FAKETIME", v, 1);
}

int clock_nanosleep(clockid_t clock, int flags, const struct timespec *req, struct timespec *rem)
{
    static int (*next)(clockid_t, int, const struct timespec *, struct timespec *);
    const char *real = getenv("FAKETIME_DONT_FAKE_MONOTONIC");
    if ((flags & TIMER_ABSTIME) && clock != CLOCK_REALTIME && clock != CLOCK_REALTIME_ALARM &&
        clock != CLOCK_TAI && real && real[0] == '1')
        return syscall(SYS_clock_nanosleep, clock, flags, req, rem) < 0 ? errno : 0;
    if (!next)
        next = (int (*)(clockid_t, int, const struct timespec *, struct timespec *))dlsym(
            RTLD_NEXT, "clock_nanosleep");
    return next ? next(clock, flags, req, rem) : ENOSYS;
}
