/*
 * vclock.c: a host's clock moved for every process on it, Go and static
 * programs included.  Programs read the wall clock through the vDSO, found
 * through the AT_SYSINFO_EHDR entry of their auxiliary vector (the C
 * library, dynamic or static, and Go's runtime alike), so that entry is
 * where faultline steps in: a keeper process traces every process of a
 * host whose clock moves (PTRACE_SEIZE before its first exec, and the
 * kernel attaches whatever it forks, clones or vforks), and at each exec,
 * before the program's first instruction, it maps faultline's vDSO
 * (fl_vdso.so) into the process, with the kernel vDSO's entry points after
 * it and the host's clock page (a MAP_SHARED mapping of a file) after
 * those, and points AT_SYSINFO_EHDR at it.  Between execs nothing stops:
 * a clock read costs the kernel's own plus a few loads, and the harness
 * moves a running process's clock by rewriting the page (fl_vclock_set),
 * under a sequence lock.  The keeper otherwise only passes on what tracing
 * stops: signals (re-sent), group stops (PTRACE_LISTEN, so SIGSTOP and
 * SIGCONT work as untraced), forks and exits.
 *
 * The mapping is made by the process itself, in two stops: at the exec
 * stop the keeper writes a `syscall` instruction at its entry point and
 * single-steps it for an mmap, writes the image and the process's page
 * into what it got, then runs the image's __fl_vdso_setup (fl_vdso.c),
 * which maps the host's page and seals the image and stops at a
 * breakpoint; then the bytes and registers go back.  Meanwhile the process
 * is pinned to the keeper's CPU: a round trip between two CPUs waits for
 * the other to wake, on a virtual machine from halt.  The keeper is a process, not a
 * thread of the harness: a tracer waits for its tracees, and waiting from
 * the harness would take the exit statuses the engine waits for.
 *
 * The keeper never waits for one process: an install goes in steps, each
 * ended by a stop its main loop waits for like any other (a process frozen
 * mid-install holds only itself).  A process's host is the one it was
 * adopted for, passed on at every fork, vfork and clone event (a PID
 * namespace of its own changes nothing).
 *
 * Limits, said in scenarios/README.md: x86-64 only; a 32-bit process, a
 * raw clock_gettime system call (no vDSO) and a program that ptraces (gdb,
 * strace: a process has one tracer) are not reached; relative timers and
 * sleeps stay on the real clocks.
 */
#include "harness/sys/vclock.h"

#include "harness/base/text.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_HOSTS 4096

struct fl_vclock {
    pid_t pid; /* the keeper */
    int pidfd; /* of the keeper, -1 if none */
    int sock;  /* to it (SOCK_SEQPACKET) */
    bool dead; /* it was reaped, or the socket broke */
    char why[512];
    struct fl_vclock_page *pages[MAX_HOSTS];
    char *paths[MAX_HOSTS];
};

enum { OP_ADOPT = 1, OP_STATUS = 2 };
struct req {
    int op, host;
    pid_t pid;
    char path[PATH_MAX];
};
struct rep {
    int rc;
    long installs;
    char err[512];
};

bool fl_vclock_supported(char *why, size_t len)
{
#if defined(__x86_64__)
    if (!getauxval(AT_SYSINFO_EHDR)) {
        snprintf(why, len, "this machine's kernel gives processes no vDSO (vdso=0?)");
        return false;
    }
    return true;
#else
    snprintf(why, len,
             "faultline's vDSO is written for x86-64 only; on this machine use the host's "
             "`clock_via: libc` (libfaketime: programs that read the clock through the dynamic C "
             "library)");
    return false;
#endif
}

bool fl_vclock_probe(char *why, size_t len)
{
    if (!fl_vclock_supported(why, len))
        return false;
    pid_t c = fork();
    if (c < 0) {
        snprintf(why, len, "fork: %s", strerror(errno));
        return false;
    }
    if (c == 0) {
        pause();
        _exit(0);
    }
    bool ok = ptrace(PTRACE_SEIZE, c, 0, 0) == 0;
    int e = errno;
    kill(c, SIGKILL);
    while (waitpid(c, NULL, __WALL) < 0 && errno == EINTR)
        ;
    if (!ok)
        snprintf(why, len, "ptrace(PTRACE_SEIZE) of a child: %s%s", strerror(e),
                 e == EPERM ? " (kernel.yama.ptrace_scope 3, or a seccomp profile)" : "");
    return ok;
}

/* ---- the harness's side ------------------------------------------------- */

static void keeper_main(int sock, const char *vdso_so) __attribute__((noreturn));

int fl_vclock_start(struct fl_vclock **out, const char *vdso_so, char *err, size_t errlen)
{
    *out = NULL;
    char why[256];
    if (!fl_vclock_supported(why, sizeof why)) {
        fl_text_set(err, errlen, "%s", why);
        return -ENOTSUP;
    }
    if (access(vdso_so, R_OK) < 0) {
        int e = errno;
        fl_text_set(err, errlen, "%s: %s (build it: make)", vdso_so, strerror(e));
        return -e;
    }
    struct fl_vclock *v = calloc(1, sizeof *v);
    int sv[2];
    if (!v || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        int e = v ? errno : ENOMEM;
        free(v);
        fl_text_set(err, errlen, "vclock: socketpair: %s", strerror(e));
        return -e;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(sv[0]);
        close(sv[1]);
        free(v);
        fl_text_set(err, errlen, "vclock: fork: %s", strerror(e));
        return -e;
    }
    if (pid == 0) {
        close(sv[0]);
        keeper_main(sv[1], vdso_so);
    }
    close(sv[1]);
    v->pid = pid;
    /* waited for through it: the engine's reaping may take the keeper's
     * exit first, and the pid then be another process's */
    v->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    v->sock = sv[0];
    *out = v;
    return 0;
}

int fl_vclock_host_page(struct fl_vclock *v, int host, const char *path, char *err, size_t errlen)
{
    if (host < 0 || host >= MAX_HOSTS) {
        fl_text_set(err, errlen, "vclock: host %d out of range", host);
        return -EINVAL;
    }
    if (v->pages[host])
        return 0;
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || fchmod(fd, 0644) < 0 || ftruncate(fd, FL_VCLOCK_PAGE) < 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        fl_text_set(err, errlen, "vclock: %s: %s", path, strerror(e));
        return -e;
    }
    void *p = mmap(NULL, FL_VCLOCK_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) {
        fl_text_set(err, errlen, "vclock: mmap %s: %s", path, strerror(e));
        return -e;
    }
    v->pages[host] = p;
    v->paths[host] = strdup(path);
    v->pages[host]->version = FL_VCLOCK_VERSION;
    return 0;
}

int fl_vclock_host_join(struct fl_vclock *v, int host, const char *path, char *err, size_t errlen)
{
    if (host < 0 || host >= MAX_HOSTS) {
        fl_text_set(err, errlen, "vclock: host %d out of range", host);
        return -EINVAL;
    }
    free(v->paths[host]);
    v->paths[host] = strdup(path);
    return 0;
}

void fl_vclock_set(struct fl_vclock *v, int host, bool mono, const struct fl_vclock_class *c)
{
    struct fl_vclock_page *p = host >= 0 && host < MAX_HOSTS ? v->pages[host] : NULL;
    if (!p)
        return;
    uint32_t s = __atomic_load_n(&p->seq, __ATOMIC_RELAXED);
    __atomic_store_n(&p->seq, s + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    struct fl_vclock_class *d = mono ? &p->mono : &p->rt;
    __atomic_store_n(&d->off_ns, c->off_ns, __ATOMIC_RELAXED);
    __atomic_store_n(&d->t0_ns, c->t0_ns, __ATOMIC_RELAXED);
    __atomic_store_n(&d->ppm, c->ppm, __ATOMIC_RELAXED);
    __atomic_store_n(&p->seq, s + 2, __ATOMIC_RELEASE);
}

void fl_vclock_get(const struct fl_vclock *v, int host, bool mono, struct fl_vclock_class *c)
{
    const struct fl_vclock_page *p = host >= 0 && host < MAX_HOSTS ? v->pages[host] : NULL;
    memset(c, 0, sizeof *c);
    if (p)
        *c = mono ? p->mono : p->rt;
}

/* One request, one reply; false (v->why filled) when the keeper is gone. */
static bool ask(struct fl_vclock *v, const struct req *q, struct rep *a)
{
    if (v->dead)
        return false;
    ssize_t n;
    while ((n = send(v->sock, q, sizeof *q, MSG_NOSIGNAL)) < 0 && errno == EINTR)
        ;
    if (n == (ssize_t)sizeof *q)
        while ((n = recv(v->sock, a, sizeof *a, 0)) < 0 && errno == EINTR)
            ;
    if (n == (ssize_t)sizeof *a)
        return true;
    int st = 0;
    v->dead = true;
    /* it died: reaped now, or by the engine's reaping already (its pid may
     * be another child's since): never waited for again */
    siginfo_t si = {0};
    bool reaped = v->pidfd >= 0 && waitid(P_PIDFD, (id_t)v->pidfd, &si, WEXITED | WNOHANG) == 0 &&
                  si.si_pid == v->pid;
    st = si.si_code == CLD_EXITED ? W_EXITCODE(si.si_status, 0) : si.si_status;
    v->pid = 0;
    snprintf(v->why, sizeof v->why,
             "the clock keeper (faultline's tracer of the processes of clock-moved hosts) %s: "
             "processes started since read the real clock",
             !reaped           ? "is gone"
             : WIFSIGNALED(st) ? strsignal(WTERMSIG(st))
                               : "exited");
    return false;
}

int fl_vclock_adopt(struct fl_vclock *v, int host, pid_t pid, char *err, size_t errlen)
{
    struct req q = {.op = OP_ADOPT, .host = host, .pid = pid};
    if (host < 0 || host >= MAX_HOSTS || !v->paths[host]) {
        fl_text_set(err, errlen, "vclock: host %d has no clock page", host);
        return -EINVAL;
    }
    struct rep a;
    snprintf(q.path, sizeof q.path, "%s", v->paths[host]);
    if (!ask(v, &q, &a)) {
        fl_text_set(err, errlen, "%s", v->why);
        return -ECHILD;
    }
    if (a.rc < 0)
        fl_text_set(err, errlen, "%s", a.err);
    return a.rc;
}

int fl_vclock_status(struct fl_vclock *v, long *n, char *err, size_t errlen)
{
    struct req q = {.op = OP_STATUS};
    struct rep a;
    if (n)
        *n = 0;
    err[0] = 0;
    if (!ask(v, &q, &a)) {
        fl_text_set(err, errlen, "%s", v->why);
        return -ECHILD;
    }
    if (n)
        *n = a.installs;
    if (a.rc < 0)
        fl_text_set(err, errlen, "%s", a.err);
    return a.rc;
}

void fl_vclock_stop(struct fl_vclock *v)
{
    if (!v)
        return;
    close(v->sock);
    if (v->pid > 0 && v->pidfd >= 0) {
        siginfo_t si;
        while (waitid(P_PIDFD, (id_t)v->pidfd, &si, WEXITED) < 0 && errno == EINTR)
            ;
    }
    if (v->pidfd >= 0)
        close(v->pidfd);
    for (int i = 0; i < MAX_HOSTS; i++) {
        if (v->pages[i])
            munmap(v->pages[i], FL_VCLOCK_PAGE);
        free(v->paths[i]);
    }
    free(v);
}

/* ---- the keeper ---------------------------------------------------------- */

#if defined(__x86_64__)

/* A process the keeper traces.  An install goes in steps, each ended by
 * a stop that the main loop waits for like any other, so the keeper never
 * waits for one process (a frozen one, say) while others or the harness
 * wait for it. */
enum { T_IDLE, T_MMAP, T_SETUP };
struct tracee {
    pid_t pid;
    int host;  /* index into K.paths; -1 unknown */
    int state; /* T_*: where its install is */
    struct user_regs_struct saved;
    long word; /* the bytes the `syscall` replaced at saved.rip */
    uint64_t base, kbase;
    size_t at_ehdr; /* AT_SYSINFO_EHDR's value, in stack words above saved.rsp */
    cpu_set_t mask;
    bool pinned;
    int tries;
    int pend[8]; /* signals that came during the install, for after it */
    int npend;
};

static struct {
    char *img; /* fl_vdso.so's bytes: its one PT_LOAD, file layout = memory layout */
    size_t img_len, img_pages;
    /* the kernel vDSO's entry points, as offsets from its start (the same
     * image in every process) */
    uint64_t off[5];
    uint64_t setup; /* __fl_vdso_setup's offset in the image */
    long installs;
    int rc;
    char err[512];
    char *paths[MAX_HOSTS]; /* each host's clock page, as the processes open it */
    struct tracee *t;
    size_t nt;
} K;

static void kfail(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void kfail(int rc, const char *fmt, ...)
{
    if (K.rc < 0)
        return; /* the first one is what the run says */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(K.err, sizeof K.err, fmt, ap);
    va_end(ap);
    K.rc = rc;
}

/* The offsets from base of the symbols names[0..n) of the ELF image at
 * base (as it lies in memory: the kernel's vDSO, or fl_vdso.so's file,
 * whose layout is its memory layout); 0 for one it lacks.  0 or -errno. */
static int sym_offsets(uintptr_t base, const char *const *names, int n, uint64_t *off)
{
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)base;
    const Elf64_Phdr *ph = (const Elf64_Phdr *)(base + eh->e_phoff);
    uintptr_t bias = 0, dyn = 0;
    bool have_load = false;
    for (int i = 0; i < eh->e_phnum; i++) {
        if (ph[i].p_type == PT_LOAD && !have_load) {
            bias = base + ph[i].p_offset - ph[i].p_vaddr;
            have_load = true;
        } else if (ph[i].p_type == PT_DYNAMIC)
            dyn = ph[i].p_offset;
    }
    if (!have_load || !dyn)
        return -ENOEXEC;
    const Elf64_Sym *sym = NULL;
    const char *str = NULL;
    const Elf32_Word *hash = NULL;
    for (const Elf64_Dyn *d = (const Elf64_Dyn *)(base + dyn); d->d_tag != DT_NULL; d++) {
        if (d->d_tag == DT_SYMTAB)
            sym = (const Elf64_Sym *)(bias + d->d_un.d_ptr);
        else if (d->d_tag == DT_STRTAB)
            str = (const char *)(bias + d->d_un.d_ptr);
        else if (d->d_tag == DT_HASH)
            hash = (const Elf32_Word *)(bias + d->d_un.d_ptr);
    }
    if (!sym || !str || !hash)
        return -ENOEXEC;
    for (Elf32_Word i = 0; i < hash[1]; i++)
        for (int k = 0; k < n; k++)
            if (sym[i].st_shndx != SHN_UNDEF && !strcmp(str + sym[i].st_name, names[k]))
                off[k] = bias + sym[i].st_value - base;
    return 0;
}

/* The kernel vDSO's entry points, from this process's own. */
static int vdso_offsets(void)
{
    static const char *const names[5] = {"__vdso_clock_gettime", "__vdso_gettimeofday",
                                         "__vdso_time", "__vdso_clock_getres", "__vdso_getcpu"};
    uintptr_t base = getauxval(AT_SYSINFO_EHDR);
    if (!base)
        return -ENOENT;
    int rc = sym_offsets(base, names, 5, K.off);
    return rc < 0 ? rc : K.off[0] ? 0 : -ENOENT;
}

static int load_image(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    char *b = malloc((size_t)st.st_size);
    if (!b || read(fd, b, (size_t)st.st_size) != st.st_size) {
        close(fd);
        free(b);
        return -EIO;
    }
    close(fd);
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)b;
    const Elf64_Phdr *ph = (const Elf64_Phdr *)(b + eh->e_phoff);
    size_t nload = 0, len = 0;
    for (int i = 0; i < eh->e_phnum; i++)
        if (ph[i].p_type == PT_LOAD) {
            nload++;
            if (ph[i].p_offset != 0 || ph[i].p_vaddr != 0 || ph[i].p_filesz != ph[i].p_memsz)
                nload = 99;
            len = ph[i].p_filesz;
        }
    if (nload != 1) {
        free(b);
        return -ENOEXEC; /* not linked with fl_vdso.lds */
    }
    static const char *const setup[1] = {"__fl_vdso_setup"};
    if (sym_offsets((uintptr_t)b, setup, 1, &K.setup) < 0 || !K.setup) {
        free(b);
        return -ENOEXEC;
    }
    /* the section headers lie past the segment, where the process's own
     * page goes: none, as far as a reader of the image can tell */
    Elf64_Ehdr *w = (Elf64_Ehdr *)b;
    w->e_shoff = 0;
    w->e_shnum = 0;
    w->e_shstrndx = SHN_UNDEF;
    K.img = b;
    K.img_len = len;
    K.img_pages = (len + FL_VCLOCK_PAGE - 1) / FL_VCLOCK_PAGE;
    return 0;
}

static struct tracee *tracee(pid_t pid)
{
    for (size_t i = 0; i < K.nt; i++)
        if (K.t[i].pid == pid)
            return &K.t[i];
    return NULL;
}

static struct tracee *add_tracee(pid_t pid, int host)
{
    struct tracee *t = tracee(pid);
    if (!t) {
        K.t = realloc(K.t, (K.nt + 1) * sizeof *K.t);
        t = &K.t[K.nt++];
        memset(t, 0, sizeof *t);
        t->pid = pid;
    }
    t->host = host;
    return t;
}

static void drop_tracee(pid_t pid)
{
    struct tracee *t = tracee(pid);
    if (t)
        *t = K.t[--K.nt];
}

/* The host of a process the keeper meets before its parent's fork event:
 * its thread group's, else its parent's (/proc/PID/status); -1 if neither
 * is traced. */
static int inherited_host(pid_t pid)
{
    char p[64], line[128];
    snprintf(p, sizeof p, "/proc/%d/status", (int)pid);
    FILE *f = fopen(p, "re");
    pid_t tgid = 0, ppid = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (!strncmp(line, "Tgid:", 5))
            tgid = atoi(line + 5);
        else if (!strncmp(line, "PPid:", 5))
            ppid = atoi(line + 5);
    }
    if (f)
        fclose(f);
    struct tracee *t = tgid && tgid != pid ? tracee(tgid) : NULL;
    if (!t && ppid)
        t = tracee(ppid);
    return t ? t->host : -1;
}

static const unsigned long TRACE_OPTS =
    PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK | PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXEC;

static void adopt(const struct req *q, struct rep *a)
{
    if (q->host < 0 || q->host >= MAX_HOSTS) {
        a->rc = -EINVAL;
        snprintf(a->err, sizeof a->err, "clock keeper: host %d out of range", q->host);
        return;
    }
    if (ptrace(PTRACE_SEIZE, q->pid, 0, TRACE_OPTS) < 0) {
        a->rc = -errno;
        snprintf(a->err, sizeof a->err, "clock keeper: ptrace(SEIZE) of pid %d: %s%s", (int)q->pid,
                 strerror(errno),
                 errno == EPERM ? " (is ptrace restricted here? kernel.yama.ptrace_scope)" : "");
        return;
    }
    if (!K.paths[q->host] || strcmp(K.paths[q->host], q->path)) {
        free(K.paths[q->host]);
        K.paths[q->host] = strdup(q->path);
    }
    add_tracee(q->pid, q->host);
    a->rc = 0;
}

static int put(pid_t pid, uint64_t addr, const void *buf, size_t len)
{
    struct iovec l = {(void *)buf, len}, rr = {(void *)(uintptr_t)addr, len};
    return process_vm_writev(pid, &l, 1, &rr, 1, 0) == (ssize_t)len ? 0 : -EFAULT;
}

/* The auxiliary vector of a process at its exec stop (rsp at argc, then
 * argv, envp, auxv): the stack word index of AT_SYSINFO_EHDR's value, its
 * value in *kbase; 0 when there is none.  Reads as far as the vector
 * goes (argv and envp may take megabytes). */
static size_t find_ehdr(pid_t pid, uint64_t rsp, uint64_t *kbase)
{
    static uint64_t *stk;
    static size_t cap;
    size_t nw = 0, i = 0;
    enum { ARGV, ENVP, AUXV } part = ARGV;
    for (;;) {
        if (i + 2 > nw) {
            /* the next 16 KiB (more each time) of the stack */
            size_t want = nw ? nw : 2048;
            if (nw + want > cap) {
                cap = nw + want;
                stk = realloc(stk, cap * 8);
            }
            struct iovec l = {stk + nw, want * 8},
                         rr = {(void *)(uintptr_t)(rsp + nw * 8), want * 8};
            ssize_t got = process_vm_readv(pid, &l, 1, &rr, 1, 0);
            if (got < 16)
                return 0; /* the end of the stack: no vector */
            nw += (size_t)got / 8;
            if (i == 0)
                i = 1 + stk[0] + 1; /* argc, argv..., NULL */
            continue;
        }
        if (part == ARGV) {
            part = ENVP;
        } else if (part == ENVP) {
            if (!stk[i++])
                part = AUXV;
        } else {
            if (stk[i] == AT_NULL)
                return 0;
            if (stk[i] == AT_SYSINFO_EHDR) {
                *kbase = stk[i + 1];
                return i + 1;
            }
            i += 2;
        }
    }
}

static const char *exe_of(pid_t pid, char *buf, size_t len)
{
    char link[64];
    snprintf(link, sizeof link, "/proc/%d/exe", (int)pid);
    ssize_t n = readlink(link, buf, len - 1);
    if (n <= 0)
        snprintf(buf, len, "pid %d", (int)pid);
    else
        buf[n] = 0;
    return buf;
}

/* The install is over (rc: 0 done, 1 not for it, -errno failed): the
 * program's bytes, registers and CPUs back, and it goes on with the
 * signals that came meanwhile. */
static void finish(struct tracee *t, int rc)
{
    pid_t pid = t->pid;
    if (t->state != T_IDLE) {
        ptrace(PTRACE_POKETEXT, pid, (void *)t->saved.rip, (void *)t->word);
        ptrace(PTRACE_SETREGS, pid, 0, &t->saved);
    }
    if (t->pinned)
        sched_setaffinity(pid, sizeof t->mask, &t->mask);
    t->pinned = false;
    t->state = T_IDLE;
    if (rc == 0)
        K.installs++;
    else if (rc < 0 && rc != -ESRCH) {
        char exe[PATH_MAX];
        exe_of(pid, exe, sizeof exe);
        kfail(rc, "the clock keeper could not give %s (pid %d) faultline's vDSO: %s%s", exe,
              (int)pid, strerror(-rc),
              rc == -ENODATA  ? " (the process has no vDSO: it would read the real clock)"
              : rc == -EACCES ? " (the host's clock page must be reachable by every user the "
                                "host's programs run as: a directory above the run directory "
                                "is closed to this one; --out in a directory others may enter)"
              : rc == -ENOENT && t->host < 0 ? " (a process of no host the keeper knows)"
                                             : "");
    }
    ptrace(PTRACE_CONT, pid, 0, (void *)(long)(t->npend ? t->pend[0] : 0));
    for (int i = 1; i < t->npend; i++)
        syscall(SYS_tgkill, pid, pid, t->pend[i]); /* the others again, after */
    t->npend = 0;
}

/* A signal that came while the install ran: for the program, after it. */
static void keep_signal(struct tracee *t, int sig)
{
    for (int i = 0; i < t->npend; i++)
        if (t->pend[i] == sig && sig < SIGRTMIN)
            return; /* a standard signal is pending once anyway */
    if (t->npend < (int)(sizeof t->pend / sizeof *t->pend))
        t->pend[t->npend++] = sig;
}

/* Single-steps the mmap of [image][its page][the host's page][a stack
 * for the setup] at the `syscall` written at the entry point. */
static int step_mmap(struct tracee *t)
{
    struct user_regs_struct r = t->saved;
    r.rax = SYS_mmap;
    r.orig_rax = (unsigned long)-1;
    r.rdi = 0;
    r.rsi = K.img_pages * FL_VCLOCK_PAGE + 3 * FL_VCLOCK_PAGE;
    r.rdx = PROT_READ | PROT_WRITE | PROT_EXEC;
    r.r10 = MAP_PRIVATE | MAP_ANONYMOUS;
    r.r8 = (unsigned long)-1;
    r.r9 = 0;
    return ptrace(PTRACE_SETREGS, t->pid, 0, &r) < 0 || ptrace(PTRACE_SINGLESTEP, t->pid, 0, 0) < 0
               ? -ESRCH
               : 0;
}

/* The exec stop: the first step of an install, an mmap run at the entry
 * point (a `syscall` written there for the while), single-stepped. */
static void begin_install(struct tracee *t)
{
    pid_t pid = t->pid;
    t->npend = 0;
    t->tries = 0;
    if (ptrace(PTRACE_GETREGS, pid, 0, &t->saved) < 0)
        return finish(t, -ESRCH);
    if (t->saved.cs != 0x33)
        return finish(t, 1); /* a 32-bit program: its vDSO is another */
    if (t->host < 0 || !K.paths[t->host])
        return finish(t, -ENOENT);
    if (!(t->at_ehdr = find_ehdr(pid, t->saved.rsp, &t->kbase)))
        return finish(t, -ENODATA);
    /* the process runs its two steps on this CPU, beside the keeper: a
     * round trip between two CPUs waits for the other one to wake (on a
     * virtual machine, from halt), four times as long */
    cpu_set_t here;
    int cpu = sched_getcpu();
    if (cpu >= 0 && sched_getaffinity(pid, sizeof t->mask, &t->mask) == 0 &&
        CPU_ISSET(cpu, &t->mask)) {
        CPU_ZERO(&here);
        CPU_SET(cpu, &here);
        t->pinned = sched_setaffinity(pid, sizeof here, &here) == 0;
    }
    errno = 0;
    t->word = ptrace(PTRACE_PEEKTEXT, pid, (void *)t->saved.rip, 0);
    long sc = (t->word & ~0xffffL) | 0x050f; /* syscall */
    if ((errno && t->word == -1) ||
        ptrace(PTRACE_POKETEXT, pid, (void *)t->saved.rip, (void *)sc) < 0)
        return finish(t, -ESRCH);
    t->state = T_MMAP;
    if (step_mmap(t) < 0)
        return finish(t, -ESRCH);
}

/* The second step: the image and the process's page written, then the
 * image's __fl_vdso_setup (fl_vdso.c) run to its breakpoint. */
static void setup_step(struct tracee *t, uint64_t base)
{
    pid_t pid = t->pid;
    size_t img = K.img_pages * FL_VCLOCK_PAGE;
    t->base = base;
    struct fl_vclock_proc pr = {.magic = FL_VCLOCK_MAGIC};
    uint64_t *fn[5] = {&pr.clock_gettime, &pr.gettimeofday, &pr.time, &pr.clock_getres, &pr.getcpu};
    for (int k = 0; k < 5; k++)
        *fn[k] = K.off[k] ? t->kbase + K.off[k] : 0;
    const char *path = K.paths[t->host];
    int rc;
    if ((rc = put(pid, base, K.img, K.img_len)) < 0 ||
        (rc = put(pid, base + img, &pr, sizeof pr)) < 0 ||
        (rc = put(pid, base + img + FL_VCLOCK_PAGE, path, strlen(path) + 1)) < 0)
        return finish(t, rc);
    struct user_regs_struct r = t->saved;
    r.rip = base + K.setup;
    r.rsp = base + img + 3 * FL_VCLOCK_PAGE - 8; /* its own page, as after a call */
    r.orig_rax = (unsigned long)-1;
    t->state = T_SETUP;
    t->tries = 0;
    if (ptrace(PTRACE_SETREGS, pid, 0, &r) < 0 || ptrace(PTRACE_CONT, pid, 0, 0) < 0)
        return finish(t, -ESRCH);
}

/* A stop of a process in the middle of its install. */
static void install_stop(struct tracee *t, int st)
{
    pid_t pid = t->pid;
    int ev = st >> 16, sig = WSTOPSIG(st);
    struct user_regs_struct o;
    siginfo_t si;
    if (ptrace(PTRACE_GETREGS, pid, 0, &o) < 0)
        return finish(t, -ESRCH);
    bool trap = ev == 0 && sig == SIGTRAP && ptrace(PTRACE_GETSIGINFO, pid, 0, &si) == 0 &&
                si.si_code > 0 && si.si_code != SI_USER && si.si_code != SI_TKILL;
    if (t->state == T_MMAP && trap && o.rip == t->saved.rip + 2) {
        long b = (long)o.rax;
        if (b < 0 && b > -4096)
            return finish(t, (int)b);
        return setup_step(t, (uint64_t)b);
    }
    size_t img = K.img_pages * FL_VCLOCK_PAGE;
    if (t->state == T_SETUP && trap && o.rip > t->base && o.rip <= t->base + img) {
        /* __fl_vdso_setup's int3: its result in rbx */
        long x = (long)o.rbx;
        if (x != 0)
            return finish(t, x < 0 && x > -4096 ? (int)x : -EFAULT);
        int rc = put(pid, t->saved.rsp + 8 * t->at_ehdr, &t->base, sizeof t->base);
        return finish(t, rc);
    }
    if (++t->tries > 64)
        return finish(t, -EAGAIN);
    if (t->state == T_MMAP && trap && o.rip == t->saved.rip) {
        /* a step from the exec stop, in the execve's return, is reported
         * there before the instruction, the registers as the return left
         * them: set them and step again */
        if (step_mmap(t) < 0)
            return finish(t, -ESRCH);
        return;
    }
    if (ev == 0 &&
        (sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE || sig == SIGTRAP) &&
        ptrace(PTRACE_GETSIGINFO, pid, 0, &si) == 0 && si.si_code > 0 && si.si_code != SI_USER &&
        si.si_code != SI_TKILL)
        return finish(t, -EFAULT); /* a fault of the install's own: give up */
    if (ev == 0)
        keep_signal(t, sig); /* for the program, once it runs */
    else if (ev == PTRACE_EVENT_STOP && sig != SIGTRAP)
        keep_signal(t, sig); /* a group stop: sent again after */
    /* on with the step it was in: the mmap again if it had not run */
    if (t->state == T_MMAP && o.rip == t->saved.rip ? step_mmap(t) < 0
                                                    : ptrace(PTRACE_CONT, pid, 0, 0) < 0)
        return finish(t, -ESRCH);
}

static void on_wait(pid_t pid, int st)
{
    struct tracee *t = tracee(pid);
    if (!WIFSTOPPED(st)) {
        drop_tracee(pid); /* exited: its parent reaps it */
        return;
    }
    if (t && t->state != T_IDLE)
        return install_stop(t, st);
    int ev = st >> 16, sig = WSTOPSIG(st);
    switch (ev) {
    case PTRACE_EVENT_EXEC:
        if (!t)
            t = add_tracee(pid, inherited_host(pid));
        return begin_install(t);
    case PTRACE_EVENT_STOP:
        if (!t)
            add_tracee(pid, inherited_host(pid)); /* a new child, before its parent's event */
        if (sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU)
            ptrace(PTRACE_LISTEN, pid, 0, 0); /* a group stop: it stays stopped */
        else
            ptrace(PTRACE_CONT, pid, 0, 0);
        return;
    case 0:
        ptrace(PTRACE_CONT, pid, 0, (void *)(long)sig); /* a signal: on to the process */
        return;
    default: { /* fork, vfork, clone: the child is of the parent's host */
        unsigned long child = 0;
        if (t && ptrace(PTRACE_GETEVENTMSG, pid, 0, &child) == 0 && child)
            add_tracee((pid_t)child, t->host);
        ptrace(PTRACE_CONT, pid, 0, 0);
        return;
    }
    }
}

static void keeper_main(int sock, const char *vdso_so)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    prctl(PR_SET_NAME, "fl-clock-keeper");
    /* none of the harness's files: a pipe's write end held here would keep
     * its reader from ever seeing the end */
    if (sock != 3) {
        dup2(sock, 3);
        sock = 3;
    }
    syscall(SYS_close_range, 4U, ~0U, 0);
    /* out of the terminal's process group: a ^C, ^\ or ^Z for the program
     * (`faultline exec`) is not for the keeper; the parent's death is */
    setpgid(0, 0);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    int rc = load_image(vdso_so);
    if (rc < 0)
        kfail(rc, "clock keeper: %s: %s (not built with fl_vdso.lds?)", vdso_so, strerror(-rc));
    else if ((rc = vdso_offsets()) < 0)
        kfail(rc, "clock keeper: the kernel's vDSO has no __vdso_clock_gettime");
    sigset_t ss;
    sigemptyset(&ss);
    sigaddset(&ss, SIGCHLD);
    sigprocmask(SIG_BLOCK, &ss, NULL);
    int sfd = signalfd(-1, &ss, SFD_CLOEXEC | SFD_NONBLOCK);
    for (;;) {
        struct pollfd pf[2] = {{.fd = sock, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
        if (poll(pf, 2, -1) < 0 && errno != EINTR)
            _exit(1);
        if (pf[1].revents) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof si) > 0)
                ;
        }
        int st;
        pid_t w;
        while ((w = waitpid(-1, &st, __WALL | WNOHANG)) > 0)
            on_wait(w, st);
        if (pf[0].revents) {
            struct req q;
            ssize_t n = recv(sock, &q, sizeof q, 0);
            if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
                _exit(0); /* the harness is done: the tracees go on untraced */
            if (n != (ssize_t)sizeof q)
                continue;
            struct rep a = {0};
            if (K.rc < 0 || q.op != OP_ADOPT) {
                a.rc = K.rc;
                snprintf(a.err, sizeof a.err, "%s", K.err);
            } else
                adopt(&q, &a);
            a.installs = K.installs;
            if (send(sock, &a, sizeof a, MSG_NOSIGNAL) < 0)
                _exit(0);
        }
    }
}

#else

static void keeper_main(int sock, const char *vdso_so)
{
    (void)sock;
    (void)vdso_so;
    _exit(1);
}

#endif
