/*
 * clock_offset.h: a host's clock_offset through libfaketime (clock_offset.c).
 */
#ifndef FL_CLOCK_OFFSET_H
#define FL_CLOCK_OFFSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Path of libfaketime.so.1 on this machine, or NULL. */
const char *fl_clock_faketime_lib(void);
/* FAKETIME's value for an offset in ms: "+3600.000", "-0.250". */
void fl_clock_faketime_value(int64_t ms, char *buf, size_t len);
/* FAKETIME's value with clock_drift, for a process started since_ms after
 * the run's start: "+0.100000 x1.010000000" (offset plus the drift so far,
 * then the rate). */
void fl_clock_faketime_drift_value(int64_t offset_ms, int64_t ppm, int64_t since_ms, char *buf,
                                   size_t len);

struct fl_run;
/* Does host's clock move by faultline's vDSO (harness/faults/clock.c,
 * harness/sys/vclock.c)?  Its clock_offset or clock_drift is set, or a
 * clock or clock_jump fault of the run may target it, and its clock_via is
 * not libc. */
bool fl_clock_by_vdso(const struct fl_run *r, int host);

/* Adds LD_PRELOAD and FAKETIME (and FAKETIME_DONT_FAKE_MONOTONIC) to a
 * task's env being built when its host has a clock_offset or clock_drift
 * (room for 3 more entries at *k); 0 or -errno with err filled. */
int fl_clock_env(struct fl_run *r, int task, char **env, size_t *k, char *err, size_t errlen);

#endif
