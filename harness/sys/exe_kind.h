/*
 * exe_kind.h: whether a preload library can enter an executable (exe_kind.c)
 * and the processes of a host as /proc shows them (proc_scan.c).
 */
#ifndef FL_SYS_EXE_KIND_H
#define FL_SYS_EXE_KIND_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

enum fl_exe_kind {
    FL_EXE_OTHER,   /* not a 64-bit ELF executable (a script), or unreadable */
    FL_EXE_DYNAMIC, /* dynamically linked, not Go: a preload reaches it */
    FL_EXE_STATIC,  /* no PT_INTERP: LD_PRELOAD is never read */
    FL_EXE_GO,      /* Go: system calls and the clock bypass the C library */
};

enum fl_exe_kind fl_exe_kind_fd(int fd);
enum fl_exe_kind fl_exe_kind_path(const char *path);
/* Why a preload cannot reach a program of kind k ("is statically linked:
 * ..."); "" for the kinds it can. */
const char *fl_exe_kind_why(enum fl_exe_kind k);

/* ---- proc_scan.c ---------------------------------------------------------- */

/* Calls fn(ctx, pid) for every process of init's PID namespace but init
 * itself (as the harness numbers them).  0, or -errno when /proc or init's
 * namespace cannot be read. */
int fl_proc_scan_ns(pid_t init, void (*fn)(void *ctx, pid_t pid), void *ctx);
/* The value of NAME in pid's initial environment into buf; false when it
 * has none (or it cannot be read). */
bool fl_proc_env(pid_t pid, const char *name, char *buf, size_t len);

#endif
