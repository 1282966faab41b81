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
 */
#include "harness/clock_offset.h"
#include "harness/engine_int.h"

#include <errno.h>
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

int fl_clock_env(struct engine *e, int task, char **env, size_t *k, char *err, size_t errlen)
{
    const struct fl_scn_host *h = &e->s->hosts[e->s->tasks[task].host];
    if (h->clock_offset_ms == 0)
        return 0;
    const char *lib = fl_clock_faketime_lib();
    if (!lib) {
        snprintf(err, errlen, "host %s: clock_offset needs libfaketime (%s; Debian package libfaketime)",
                 h->name, faketime_libs[0]);
        return -ENOENT;
    }
    char v[40];
    fl_clock_faketime_value(h->clock_offset_ms, v, sizeof v);
    eng_env_preload(env, k, lib);
    if (asprintf(&env[(*k)++], "FAKETIME=%s", v) < 0 ||
        asprintf(&env[(*k)++], "FAKETIME_DONT_FAKE_MONOTONIC=1") < 0)
        abort();
    return 0;
}
