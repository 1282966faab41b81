/*
 * fl_vdso.c: build/lib/fl_vdso.so, the vDSO faultline gives every process of
 * a host whose clock it moves (harness/sys/vclock.c puts it in at each
 * exec, before the program's first instruction, and points the process's
 * AT_SYSINFO_EHDR at it).  The C library (dynamic or static, glibc or musl)
 * and Go's runtime find clock_gettime, gettimeofday and time through that
 * auxiliary vector entry, so whatever a program is built with, its clock
 * reads come here: each calls the kernel's own vDSO function and adds what
 * the host's clock page (vclock_abi.h) says, read under its sequence lock.
 * No system call, no stop: a read costs the kernel's plus a few loads.
 *
 * The image has no relocations and no writable data (fl_vdso.lds puts it
 * in one read-only, executable segment): nobody relocates a vDSO.  Its
 * data, the real vDSO's entry points and the host's page, are the two pages
 * after the image (fl_vdso_end), reached relative to the code.  Built
 * freestanding: no C library, no stack protector, no floating point.
 */
#include "harness/sys/vclock_abi.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>

#define HIDDEN __attribute__((visibility("hidden")))

struct fl_timeval {
    long tv_sec, tv_usec;
};

extern const char fl_vdso_end[] HIDDEN; /* fl_vdso.lds: the page after the image */

#define PROC ((const volatile struct fl_vclock_proc *)fl_vdso_end)
#define PAGE ((const volatile struct fl_vclock_page *)(fl_vdso_end + FL_VCLOCK_PAGE))

typedef int (*cgt_fn)(clockid_t, struct timespec *);
typedef int (*gtod_fn)(struct fl_timeval *, void *);
typedef long (*time_fn)(long *);
typedef int (*getcpu_fn)(unsigned *, unsigned *, void *);

static long sys2(long nr, long a, long b)
{
    long r;
    __asm__ volatile("syscall" : "=a"(r) : "0"(nr), "D"(a), "S"(b) : "rcx", "r11", "memory");
    return r;
}

static long sys1(long nr, long a)
{
    long r;
    __asm__ volatile("syscall" : "=a"(r) : "0"(nr), "D"(a) : "rcx", "r11", "memory");
    return r;
}

static long sys6(long nr, long a, long b, long c, long d, long e, long f)
{
    long r;
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;
    __asm__ volatile("syscall"
                     : "=a"(r)
                     : "0"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return r;
}

static long sys3(long nr, long a, long b, long c)
{
    long r;
    __asm__ volatile("syscall"
                     : "=a"(r)
                     : "0"(nr), "D"(a), "S"(b), "d"(c)
                     : "rcx", "r11", "memory");
    return r;
}

/* 0 real, 1 realtime class, 2 monotonic class */
static int class_of(clockid_t c)
{
    switch (c) {
    case CLOCK_REALTIME:
    case CLOCK_REALTIME_COARSE:
    case 11: /* CLOCK_TAI */ return 1;
    case CLOCK_MONOTONIC:
    case CLOCK_MONOTONIC_RAW:
    case CLOCK_MONOTONIC_COARSE:
    case CLOCK_BOOTTIME: return 2;
    default: return 0;
    }
}

/* The class's adjustment at real reading t, read under the page's lock. */
static int64_t adj(int cls, int64_t t)
{
    struct fl_vclock_class c;
    uint32_t s;
    int tries = 0;
    do {
        s = PAGE->seq;
        __asm__ volatile("" ::: "memory"); /* x86-64 keeps loads in order */
        const volatile struct fl_vclock_class *v = cls == 1 ? &PAGE->rt : &PAGE->mono;
        c.off_ns = v->off_ns;
        c.t0_ns = v->t0_ns;
        c.ppm = v->ppm;
        __asm__ volatile("" ::: "memory");
        /* a writer that died mid-write (odd for good) is not waited for
         * for ever: after a million tries, what was read */
    } while (((s & 1) || s != PAGE->seq) && ++tries < 1000000);
    return fl_vclock_adj(&c, t);
}

static int real_cgt(clockid_t c, struct timespec *ts)
{
    cgt_fn f = (cgt_fn)(uintptr_t)PROC->clock_gettime;
    return f ? f(c, ts) : (int)sys2(SYS_clock_gettime, c, (long)ts);
}

static void add_ns(struct timespec *ts, int64_t a)
{
    int64_t ns = (int64_t)ts->tv_sec * 1000000000LL + ts->tv_nsec + a;
    int64_t s = ns / 1000000000LL, r = ns % 1000000000LL;
    if (r < 0) {
        r += 1000000000LL;
        s--;
    }
    ts->tv_sec = s;
    ts->tv_nsec = r;
}

int fl_clock_gettime(clockid_t c, struct timespec *ts)
{
    int rc = real_cgt(c, ts);
    int cls = class_of(c);
    if (rc || !cls)
        return rc;
    add_ns(ts, adj(cls, (int64_t)ts->tv_sec * 1000000000LL + ts->tv_nsec));
    return 0;
}

int fl_gettimeofday(struct fl_timeval *tv, void *tz)
{
    gtod_fn f = (gtod_fn)(uintptr_t)PROC->gettimeofday;
    int rc = f ? f(tv, tz) : (int)sys2(SYS_gettimeofday, (long)tv, (long)tz);
    if (rc || !tv)
        return rc;
    struct timespec ts = {tv->tv_sec, tv->tv_usec * 1000};
    add_ns(&ts, adj(1, (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec));
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
    return 0;
}

long fl_time(long *t)
{
    struct timespec ts;
    if (fl_clock_gettime(CLOCK_REALTIME, &ts))
        return -1;
    if (t)
        *t = ts.tv_sec;
    return ts.tv_sec;
}

int fl_clock_getres(clockid_t c, struct timespec *res)
{
    cgt_fn f = (cgt_fn)(uintptr_t)PROC->clock_getres;
    return f ? f(c, res) : (int)sys2(SYS_clock_getres, c, (long)res);
}

int fl_getcpu(unsigned *cpu, unsigned *node, void *cache)
{
    getcpu_fn f = (getcpu_fn)(uintptr_t)PROC->getcpu;
    return f ? f(cpu, node, cache) : (int)sys3(SYS_getcpu, (long)cpu, (long)node, (long)cache);
}

/* Run once in each process by the clock keeper (harness/sys/vclock.c),
 * which has mapped the image and three pages after it (readable, writable,
 * executable), written the process's page and, in the host page's place,
 * the host page's path, and set the stack in the third page: opens the
 * path and maps the host's page over it, makes the image read-only and
 * executable and the process's page read-only, unmaps its own stack and
 * stops at a breakpoint, 0 or -errno in rbx for the keeper.  One stop
 * instead of one per system call. */
extern const char __ehdr_start[] HIDDEN;
__attribute__((noreturn, used)) void __fl_vdso_setup(void)
{
    const char *page = fl_vdso_end + FL_VCLOCK_PAGE;
    long r = sys3(SYS_open, (long)page, 0 /* O_RDONLY */, 0), fd = r;
    if (fd >= 0) {
        r = sys6(SYS_mmap, (long)page, FL_VCLOCK_PAGE, 1 /* PROT_READ */,
                 0x01 | 0x10 /* MAP_SHARED | MAP_FIXED */, fd, 0);
        sys1(SYS_close, fd);
        if (r == (long)page)
            r = sys3(SYS_mprotect, (long)__ehdr_start, fl_vdso_end - __ehdr_start,
                     1 | 4 /* PROT_READ | PROT_EXEC */);
        if (r == 0)
            r = sys3(SYS_mprotect, (long)fl_vdso_end, FL_VCLOCK_PAGE, 1 /* PROT_READ */);
    }
    /* the stack goes, and nothing touches it after: the breakpoint stops
     * the process for its tracer before any signal frame would be pushed */
    for (;;)
        __asm__ volatile("syscall\n\tint3"
                         :
                         : "a"(SYS_munmap), "D"(fl_vdso_end + 2 * FL_VCLOCK_PAGE),
                           "S"(FL_VCLOCK_PAGE), "b"(r)
                         : "rcx", "r11", "memory");
}

/* The names programs look up (the kernel's x86-64 vDSO's, version
 * LINUX_2.6, fl_vdso.map); fl_vdso_end's section ends the image. */
int __vdso_clock_gettime(clockid_t, struct timespec *) __attribute__((alias("fl_clock_gettime")));
int clock_gettime(clockid_t, struct timespec *) __attribute__((weak, alias("fl_clock_gettime")));
int __vdso_gettimeofday(struct fl_timeval *, void *) __attribute__((alias("fl_gettimeofday")));
int gettimeofday(struct fl_timeval *, void *) __attribute__((weak, alias("fl_gettimeofday")));
long __vdso_time(long *) __attribute__((alias("fl_time")));
long time(long *) __attribute__((weak, alias("fl_time")));
int __vdso_clock_getres(clockid_t, struct timespec *) __attribute__((alias("fl_clock_getres")));
int clock_getres(clockid_t, struct timespec *) __attribute__((weak, alias("fl_clock_getres")));
int __vdso_getcpu(unsigned *, unsigned *, void *) __attribute__((alias("fl_getcpu")));
int getcpu(unsigned *, unsigned *, void *) __attribute__((weak, alias("fl_getcpu")));
