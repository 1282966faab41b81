/*
 * clock_offset.c: a host's `clock_offset` applied: every task on a host with
 * a non-zero offset runs under libfaketime (LD_PRELOAD of libfaketime.so.1,
 * FAKETIME="+3600.000" / "-0.250": a relative offset in seconds, sub-second
 * as a decimal fraction), so that time(), gettimeofday() and
 * clock_gettime(CLOCK_REALTIME) in its processes (and `date`) read the
 * machine's clock plus the offset.
 *
 * Only the wall clock moves: FAKETIME_DONT_FAKE_MONOTONIC=1 keeps
 * CLOCK_MONOTONIC (and so sleeps, timeouts and the timer of a poll) real,
 * as two real machines' monotonic clocks are unrelated anyway; a negative
 * offset larger than the uptime would otherwise make them negative.  No time
 * namespace either: one offsets only CLOCK_MONOTONIC and CLOCK_BOOTTIME,
 * never the wall clock a clock offset is about.  The harness itself keeps
 * the real clock: events and faults are timed when the harness sees them.
 * libfaketime.so.1 (not libfaketimeMT) is enough: the MT variant matters
 * for absolute start times shared across threads, not for a fixed offset.
 *
 * `clock_drift` (a rate in ppm) adds libfaketime's speed factor:
 * FAKETIME="+OFF xRATE".  libfaketime counts it from each process's start,
 * so fl_clock_preload.so (harness/tools/fl_clock_preload.c), preloaded
 * first, recomputes OFF in every process from its own start, and the host's
 * processes all read t + offset + (t - T0) * ppm / 1e6, T0 the start of the
 * run.  libfaketime scales sleeps (nanosleep, sleep, poll timeouts) by the
 * same rate: on a clock running 10% fast a sleep of 1 s lasts 0.91 s, as on
 * a machine whose oscillator is off.  CLOCK_MONOTONIC stays real (above).
 * fl_clock_preload.so also goes into the tasks of a host with an offset
 * alone: it mends libfaketime's clock_nanosleep on an absolute deadline of
 * the real monotonic clock (Python's time.sleep), see the library.
 * The library is copied into the run directory (RUN/fs/lib/), where every
 * host sees it, at the first task that needs it.
 */
#include "harness/run/clock_offset.h"
#include "harness/base/text.h"
#include "harness/run/run.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const faketime_libs[] = {
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
    "/usr/local/lib/faketime/libfaketime.so.1",
};

const char *fl_clock_faketime_lib(void)
{
    for (size_t i = 0; i < sizeof faketime_libs / sizeof *faketime_libs; i++)
        if (access(faketime_libs[i], R_OK) == 0)
            return faketime_libs[i];
    return NULL;
}

/* "+3600.000", "-0.250" */
void fl_clock_faketime_value(int64_t ms, char *buf, size_t len)
{
    uint64_t a = ms < 0 ? (uint64_t)-ms : (uint64_t)ms;
    snprintf(buf, len, "%c%llu.%03llu", ms < 0 ? '-' : '+', (unsigned long long)(a / 1000),
             (unsigned long long)(a % 1000));
}

/* RUN/fs/lib/fl_clock_preload.so, copied there from next to faultline at
 * the first call; 0 or -errno (err filled). */
static int clock_preload(struct fl_run *r, char *path, size_t len, char *err, size_t errlen)
{
    char dir[PATH_MAX];
    fl_run_lib_dir(r, dir, sizeof dir);
    snprintf(path, len, "%s/fl_clock_preload.so", dir);
    if (access(path, R_OK) == 0)
        return 0;
    return fl_run_preload(r, "fl_clock_preload.so", dir, "clock_drift", path, len, err, errlen);
}

/* "+OFF xRATE" for a process starting since_ms after the run's start */
void fl_clock_faketime_drift_value(int64_t offset_ms, int64_t ppm, int64_t since_ms, char *buf,
                                   size_t len)
{
    double off = (double)offset_ms + (double)since_ms * (double)ppm / 1e6;
    snprintf(buf, len, "%+.6f x%.9f", off / 1e3, 1 + (double)ppm / 1e6);
}

bool fl_clock_by_vdso(const struct fl_run *r, int host)
{
    const struct fl_scn_host *h = &r->s->hosts[host];
    if (h->clock_via == FL_SCN_CLOCK_LIBC)
        return false;
    if (h->clock_offset_ms || h->clock_drift_ppm)
        return true;
    for (size_t f = 0; f < r->nfaults; f++) {
        const struct fl_scn_action *a = &r->faults[f].f->action;
        if ((a->kind == FL_SCN_ACT_CLOCK || a->kind == FL_SCN_ACT_CLOCK_JUMP) &&
            (a->host == host || a->host == FL_SCN_HOST_EVENT))
            return true;
    }
    return false;
}

int fl_clock_env(struct fl_run *r, int task, char **env, size_t *k, char *err, size_t errlen)
{
    const struct fl_scn_host *h = &r->s->hosts[r->s->tasks[task].host];
    if (h->clock_offset_ms == 0 && h->clock_drift_ppm == 0)
        return 0;
    if (h->clock_via != FL_SCN_CLOCK_LIBC)
        return 0; /* faultline's vDSO (harness/faults/clock.c) */
    const char *lib = fl_clock_faketime_lib();
    if (!lib) {
        snprintf(err, errlen, "host %s: %s needs libfaketime (%s; Debian package libfaketime)",
                 h->name, h->clock_offset_ms ? "clock_offset" : "clock_drift", faketime_libs[0]);
        return -ENOENT;
    }
    char v[64], pre[PATH_MAX], libs[2 * PATH_MAX + 2];
    int rc = clock_preload(r, pre, sizeof pre, err, errlen);
    if (rc < 0)
        return rc;
    snprintf(libs, sizeof libs, "%s %s", pre, lib);
    fl_env_preload(env, k, libs);
    if (h->clock_drift_ppm == 0) {
        fl_clock_faketime_value(h->clock_offset_ms, v, sizeof v);
    } else {
        /* the value for a process started now; each process recomputes it */
        fl_clock_faketime_drift_value(h->clock_offset_ms, h->clock_drift_ppm, fl_run_now(r), v,
                                      sizeof v);
        if (asprintf(&env[(*k)++], "FAULTLINE_CLOCK_T0_MS=%lld", (long long)r->t0_unix) < 0 ||
            asprintf(&env[(*k)++], "FAULTLINE_CLOCK_OFFSET_MS=%lld",
                     (long long)h->clock_offset_ms) < 0 ||
            asprintf(&env[(*k)++], "FAULTLINE_CLOCK_DRIFT_PPM=%lld",
                     (long long)h->clock_drift_ppm) < 0)
            abort();
    }
    if (asprintf(&env[(*k)++], "FAKETIME=%s", v) < 0 ||
        asprintf(&env[(*k)++], "FAKETIME_DONT_FAKE_MONOTONIC=1") < 0)
        abort();
    return 0;
}
