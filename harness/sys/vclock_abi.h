/*
 * vclock_abi.h: what faultline's vDSO (harness/tools/fl_vdso.c) and the
 * harness (harness/sys/vclock.c) agree on.  The vDSO's image is followed,
 * at the next page, by a page of the process's own (the real vDSO's
 * functions, written once when the image is put in) and then a page shared
 * by every process of the host (a MAP_SHARED mapping of the host's clock
 * file), which the harness rewrites to move the host's clocks.
 */
#ifndef FL_VCLOCK_ABI_H
#define FL_VCLOCK_ABI_H

#include <stdint.h>

#define FL_VCLOCK_PAGE 4096

/* The real vDSO's entry points in this process (0: it has none). */
struct fl_vclock_proc {
    uint64_t magic; /* FL_VCLOCK_MAGIC once written */
    uint64_t clock_gettime, gettimeofday, time, clock_getres, getcpu;
};
#define FL_VCLOCK_MAGIC 0x6b636f6c63766c66ULL /* "flvclock" */

/* One class of clocks (realtime: CLOCK_REALTIME, _COARSE, CLOCK_TAI;
 * monotonic: CLOCK_MONOTONIC, _RAW, _COARSE, CLOCK_BOOTTIME).  A clock
 * of the class reads t + off_ns + (t - t0_ns) * ppm / 1e6, t the real
 * reading of the same clock. */
struct fl_vclock_class {
    int64_t off_ns;
    int64_t t0_ns;
    int64_t ppm;
};

/* The host's page.  seq is a sequence lock: odd while the harness writes. */
struct fl_vclock_page {
    uint32_t seq;
    uint32_t version; /* FL_VCLOCK_VERSION */
    struct fl_vclock_class rt, mono;
};
#define FL_VCLOCK_VERSION 1

/* What a clock of the class is moved by at real reading t (ns): integer
 * arithmetic only (the vDSO is called from code that keeps no floating
 * point state for it, Go's runtime among them).  Exact while
 * |t - t0| / 1e6 * |ppm| fits in 63 bits: with ppm at most 1e7 (1000%,
 * the most a scenario may write, composed with a few more), 250 hours
 * from t0. */
static inline int64_t fl_vclock_adj(const struct fl_vclock_class *c, int64_t t)
{
    int64_t d = t - c->t0_ns;
    if (!c->ppm)
        return c->off_ns;
    return c->off_ns + (d / 1000000) * c->ppm + ((d % 1000000) * c->ppm) / 1000000;
}

#endif
