/*
 * rawsys.h: system calls that return -errno and never touch errno.
 *
 * A host's init is cloned with CLONE_VM (it shares the harness's address
 * space and thread pointer, like a vfork child that never execs) so that
 * bringing up hundreds of hosts does not copy and tear down the harness's
 * page tables once per host.  Code running in such a child must not write
 * errno, which is the harness thread's; libc wrappers do on failure, so init
 * makes its calls through fl_rs() instead.  FL_RAWSYS is 0 on architectures
 * without an implementation here; init is then cloned without CLONE_VM and
 * fl_rs() falls back to syscall(2).
 */
#ifndef FL_RAWSYS_H
#define FL_RAWSYS_H

#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define FL_RAWSYS 1
static inline long fl_rs6(long n, long a, long b, long c, long d, long e, long f)
{
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;
    long ret;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return ret;
}
#elif defined(__aarch64__)
#define FL_RAWSYS 1
static inline long fl_rs6(long n, long a, long b, long c, long d, long e, long f)
{
    register long x8 __asm__("x8") = n;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    register long x3 __asm__("x3") = d;
    register long x4 __asm__("x4") = e;
    register long x5 __asm__("x5") = f;
    __asm__ volatile("svc 0"
                     : "+r"(x0)
                     : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
                     : "memory", "cc");
    return x0;
}
#else
#define FL_RAWSYS 0
static inline long fl_rs6(long n, long a, long b, long c, long d, long e, long f)
{
    long r = syscall(n, a, b, c, d, e, f);
    return r < 0 ? -errno : r;
}
#endif

/* FL_INIT_CODE marks the functions that run in such a child: they are not
 * instrumented by AddressSanitizer (`make asan`), whose instrumented frames
 * and calls before a function that does not return assume a thread it
 * knows, with its own stack: this child runs on a stack ASan never heard
 * of, with the harness thread's thread pointer. */
#define FL_INIT_CODE __attribute__((no_sanitize_address))

/* fl_rsN(SYS_x, args...): N integer or pointer arguments. */
#define FL_RS_ARG(x) ((long)(x))
#define fl_rs1(n, a) fl_rs6((n), FL_RS_ARG(a), 0, 0, 0, 0, 0)
#define fl_rs2(n, a, b) fl_rs6((n), FL_RS_ARG(a), FL_RS_ARG(b), 0, 0, 0, 0)
#define fl_rs3(n, a, b, c) fl_rs6((n), FL_RS_ARG(a), FL_RS_ARG(b), FL_RS_ARG(c), 0, 0, 0)
#define fl_rs4(n, a, b, c, d) \
    fl_rs6((n), FL_RS_ARG(a), FL_RS_ARG(b), FL_RS_ARG(c), FL_RS_ARG(d), 0, 0)
#define fl_rs5(n, a, b, c, d, e) \
    fl_rs6((n), FL_RS_ARG(a), FL_RS_ARG(b), FL_RS_ARG(c), FL_RS_ARG(d), FL_RS_ARG(e), 0)

#endif
