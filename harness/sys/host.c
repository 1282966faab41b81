/*
 * host.c: hosts, the machines of a bug report, as namespaces on one kernel.
 *
 * A host is held by an init process that the harness clones with new network,
 * mount, PID, UTS and IPC namespaces.  Init is PID 1 of its namespace, so
 * killing it kills every process on the host at once (a machine crash; the
 * kernel does it as init's exit runs, fl_host_kill_now before it returns).  On
 * start, init (in parallel with the other inits) mounts the host's disk at the
 * working directory, its own /tmp, the run's /etc/hosts, any shared paths and
 * a /proc of its own, sets the hostname, reports ready on a pipe shared by all
 * inits, then only reaps orphans until it is killed or the harness goes away.
 *
 * A root of its own (spec.root set, as every run does): init assembles the
 * host's root at spec.root, an overlay whose lower layers are the run's
 * common one (its /dev nodes, /dev/shm and /etc/hosts: fl_root_common_make)
 * over the harness's / and whose upper layer the harness keeps per host
 * (fl_root_layer_make), so that the host sees the machine's files and
 * writes only to its own layer;
 * binds everything above into it from the harness's view (so the sources
 * need no tricks when they lie under /tmp), covers spec.hide (the run's
 * output directory) with an empty directory and binds back spec.binds (what the
 * host may see of the run); mounts a /proc, a /sys (sysfs mounted in the
 * host's network namespace shows its devices only), the machine's cgroup
 * hierarchies and a devpts of its own; then moves it onto / and makes it
 * its root, which leaves nothing else reachable (make_root says why this
 * and not pivot_root).  Mounts are what a
 * host's start costs (a new superblock each, and their teardown at its
 * end): what the common layer can hold is not a mount.  Without spec.root, the
 * host keeps the machine's root (the mounts are made over it).
 * Init shares the harness's memory (CLONE_VM, on a stack of its own, making
 * raw system calls only; see rawsys.h): cloning hundreds of hosts then costs
 * no page-table copies.  It shares the harness's file table too (CLONE_FILES)
 * until its first call takes a table of its own holding only the fds up to
 * its two pipes (close_range with CLOSE_RANGE_UNSHARE copies just those): a
 * copy of the whole table, which holds an fd or two per host, then a close
 * of all of it, cost each of 1024 hosts ~0.3 ms of CPU.  A large batch is plugged into the fabric
 * by a second thread while the first is still cloning (fl_host_up_batch).
 *
 * Processes are not started by init: the harness forks them straight into the
 * host (setns to init's PID namespace for the fork, then the child joins the
 * other namespaces, the host's cgroup and the task's own cgroup when it has
 * one, before exec), so the harness is the parent of every process and
 * learns exits, signals and core dumps first-hand.
 *
 * Nothing outlives the harness: the harness runs in a private mount namespace
 * (every mount of a run vanishes with it), namespaces are never bind-mounted
 * (the kernel frees them with their last process), and every init dies with
 * the harness through PR_SET_PDEATHSIG and through an "anchor" pipe whose
 * write end only the harness holds (init exits when it reads EOF).
 *
 * States of a host: DOWN -> STARTING (init cloned) -> UP (init reported
 * ready) -> DOWN (init killed or died).  Invariant: pidfd >= 0 iff state !=
 * DOWN.
 */
#include "harness/sys/host.h"
#include "harness/sys/rootless.h"
#include "harness/sys/userns.h"
#include "netem/fabric.h"
#include "netem/seterr.h"
#include "harness/base/rawsys.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef CLOSE_RANGE_UNSHARE
#define CLOSE_RANGE_UNSHARE (1U << 1)
#endif

static int ready_pipe[2] = {-1, -1};  /* inits write {idx, gen, err, step} */
static int anchor_pipe[2] = {-1, -1}; /* harness holds [1]; EOF = harness gone */
static int self_pidns = -1;           /* to return after a spawn */
/* Rootless (rootless.c), the devices of a host's /dev are the machine's,
 * bound over the common layer's empty files (root_layer.c makes the same),
 * and gid 0 is the only group (ping_group_range). */
static bool dev_by_bind;
static const char *const dev_nodes[] = {"/dev/null",   "/dev/zero",    "/dev/full",
                                        "/dev/random", "/dev/urandom", "/dev/tty"};

struct ready_msg {
    int idx, generation, err, step;
    int arg; /* STEP_MOUNT_SHARED: index in mounts; STEP_MOUNT_EXPOSE: in expose */
};

enum init_step {
    STEP_OK,
    STEP_PDEATHSIG,
    STEP_HOSTNAME,
    STEP_MOUNT_DISK,
    STEP_MOUNT_TMP,
    STEP_MOUNT_HOSTS,
    STEP_MOUNT_SHARED,
    STEP_MOUNT_PROC,
    STEP_SIGNALS,
    STEP_MOUNT_EXPOSE,
    STEP_DUP_PIPES,
    STEP_MOUNT_SHM,
    STEP_ROOT_OVERLAY,
    STEP_ROOT_HIDE,
    STEP_ROOT_BIND,
    STEP_ROOT_SYS,
    STEP_ROOT_DEV,
    STEP_ROOT_PIVOT,
    STEP_NET_SYSCTL,
    STEP_PROC_RO,
    STEP_ROOT_TOP,
};

static const char *step_name(int step)
{
    static const char *names[] = {
        "ready",
        "prctl(PR_SET_PDEATHSIG)",
        "sethostname",
        "mount disk at workdir",
        "mount /tmp",
        "mount /etc/hosts",
        "mount shared path",
        "mount /proc",
        "signalfd",
        "expose a directory under /tmp",
        "dup3 of the harness's pipes",
        "mount a tmpfs at",
        "mount the overlay of its root at",
        "hide the run's directory",
        "bind into its root",
        "mount its own /sys",
        "mount its own devpts at /dev/pts",
        "move its own root onto / (MS_MOVE, chroot)",
        "open ports below 1024 and ICMP echo sockets to its users (sysctl)",
        "make /proc/sys and the kernel's files in /proc read-only",
        "mount the overlay of a directory right below / in its root (rootless)",
    };
    return step >= 0 && step < (int)(sizeof names / sizeof *names) ? names[step] : "?";
}

unsigned long long fl_proc_starttime(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    /* comm may hold spaces and parens: fields start after the last ')'. */
    char *p = strrchr(buf, ')');
    if (!p)
        return 0;
    p += 2; /* field 3, state */
    for (int field = 3; field < 22 && p; field++) {
        p = strchr(p, ' ');
        if (p)
            p++;
    }
    return p ? strtoull(p, NULL, 10) : 0;
}

int fl_host_global_init(char *err, size_t errlen)
{
    if (self_pidns >= 0)
        return 0;
    dev_by_bind = fl_rootless();
    if (unshare(CLONE_NEWNS) < 0) {
        int e = errno;
        fl_netem_seterr(err, errlen,
                        "unshare(CLONE_NEWNS): %s (faultline needs root, or a user namespace of "
                        "its own: rootless.c)",
                        strerror(e));
        return -e;
    }
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
        int e = errno;
        fl_netem_seterr(err, errlen, "mount --make-rprivate /: %s", strerror(e));
        return -e;
    }
    self_pidns = open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);
    if (self_pidns < 0) {
        int e = errno;
        fl_netem_seterr(err, errlen, "open /proc/self/ns/pid: %s", strerror(e));
        return -e;
    }
    if (pipe2(ready_pipe, O_CLOEXEC) < 0 || pipe2(anchor_pipe, O_CLOEXEC) < 0) {
        int e = errno;
        fl_netem_seterr(err, errlen, "pipe: %s", strerror(e));
        return -e;
    }
    return 0;
}

/* Init stacks.  Init is cloned with CLONE_VM (see rawsys.h), so it runs on
 * a stack of its own carved from this pool; a stack is reused only after
 * its init has been reaped (fl_host_note_reaped), never while it may run.
 * The bottom of each stack holds the init's arguments. */
#define INIT_STACK_SIZE (64 * 1024)

struct init_args {
    struct fl_host *h;
    int generation;
    char cgroup_procs[2][4096]; /* "<cgroup>/cgroup.procs", "<cgroup_mem>/cgroup.procs", or "" */
};

struct init_stack {
    pid_t pid; /* 0 = free, -1 = being cloned */
    void *mem;
};
static struct init_stack *stacks;
static size_t nstacks;

static struct init_stack *stack_get(void)
{
    for (size_t i = 0; i < nstacks; i++)
        if (stacks[i].pid == 0) {
            stacks[i].pid = -1;
            return &stacks[i];
        }
    void *mem = mmap(NULL, INIT_STACK_SIZE, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED)
        return NULL;
    struct init_stack *n = realloc(stacks, (nstacks + 1) * sizeof *stacks);
    if (!n) {
        munmap(mem, INIT_STACK_SIZE);
        return NULL;
    }
    stacks = n;
    stacks[nstacks] = (struct init_stack){-1, mem};
    return &stacks[nstacks++];
}

void fl_host_note_reaped(pid_t pid)
{
    for (size_t i = 0; i < nstacks; i++)
        if (stacks[i].pid == pid && pid > 0) {
            stacks[i].pid = 0;
            return;
        }
}

/* Everything below runs in init, on its own stack, sharing the harness's
 * memory: raw system calls only (no errno), no stdio, no allocation, and
 * nothing written outside init's stack (so no sanitizer's stack
 * bookkeeping either: FL_INIT_CODE). */

FL_INIT_CODE static char *utoa_in_child(char *end, unsigned v)
{
    *--end = 0;
    do
        *--end = (char)('0' + v % 10);
    while (v /= 10);
    return end;
}

FL_INIT_CODE static long mkdir_p_in_child(const char *path)
{
    /* most are there (the machine's /proc, /sys, /etc, the workdir...): one
     * lookup, not one per component (each an overlay lookup in a root of
     * the host's own; 70 a host made the mkdirs a tenth of bringing 256
     * hosts up) */
    long r0 = fl_rs3(SYS_mkdirat, AT_FDCWD, path, 0755);
    if (r0 == 0 || r0 == -EEXIST)
        return 0;
    if (r0 != -ENOENT)
        return r0;
    char buf[4096];
    size_t len = strlen(path);
    if (len >= sizeof buf)
        return -ENAMETOOLONG;
    memcpy(buf, path, len + 1);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        long r = fl_rs3(SYS_mkdirat, AT_FDCWD, buf, 0755);
        if (r < 0 && r != -EEXIST)
            return r;
        *p = '/';
    }
    long r = fl_rs3(SYS_mkdirat, AT_FDCWD, buf, 0755);
    return r < 0 && r != -EEXIST ? r : 0;
}

FL_INIT_CODE static long bind_mount(const char *src, const char *dst)
{
    return fl_rs5(SYS_mount, src, dst, NULL, MS_BIND | MS_REC, NULL);
}

/* root + path (absolute) into buf (4096 bytes) */
FL_INIT_CODE static long under_root(char *buf, const char *root, const char *path)
{
    size_t rl = strlen(root), pl = strlen(path);
    if (rl + pl + 1 > 4096)
        return -ENAMETOOLONG;
    memcpy(buf, root, rl);
    memcpy(buf + rl, path, pl + 1);
    return 0;
}

#define BIND_REC FL_BIND_REC
/* path is dir or lies below it */
FL_INIT_CODE static bool path_under(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    return !strncmp(path, dir, n) && (path[n] == '/' || !path[n]);
}

/* Binds src (the harness's view) at root + dst, making the mount point (a
 * directory, or an empty file when src is not a directory) first.  With
 * FL_BIND_OPTIONAL, a src that does not exist is skipped; FL_BIND_RO makes
 * the bind read-only; BIND_REC brings the mounts below src along. */
FL_INIT_CODE static long bind_into_root(const char *root, const char *src, const char *dst,
                                        unsigned flags)
{
    char at[4096];
    struct stat sb;
    long r = fl_rs4(SYS_newfstatat, AT_FDCWD, src, &sb, 0);
    if (r == -ENOENT && (flags & FL_BIND_OPTIONAL))
        return 0;
    if (r < 0)
        return r;
    if ((r = under_root(at, root, dst)) < 0)
        return r;
    if (S_ISDIR(sb.st_mode)) {
        if ((r = mkdir_p_in_child(at)) < 0)
            return r;
    } else {
        char *slash = strrchr(at, '/');
        *slash = 0;
        r = mkdir_p_in_child(at);
        *slash = '/';
        if (r < 0)
            return r;
        /* not for writing: that would copy the machine's file up */
        long fd = fl_rs4(SYS_openat, AT_FDCWD, at, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 && fd != -EEXIST)
            return fd;
        if (fd >= 0)
            fl_rs1(SYS_close, fd);
    }
    if ((r = fl_rs5(SYS_mount, src, at, NULL, MS_BIND | (flags & BIND_REC ? MS_REC : 0), NULL)) < 0)
        return r;
    if (!(flags & FL_BIND_RO))
        return r;
    if (flags & BIND_REC) { /* the mounts below too (a remount takes the top one only) */
        struct mount_attr ma = {.attr_set = MOUNT_ATTR_RDONLY};
        r = fl_rs5(SYS_mount_setattr, AT_FDCWD, at, AT_RECURSIVE, &ma, sizeof ma);
        if (r != -ENOSYS)
            return r;
    }
    return fl_rs5(SYS_mount, NULL, at, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL);
}

/* Writes text to a file of the host's /proc at proc + rel (a sysctl of
 * its network namespace): 0 or -errno. */
FL_INIT_CODE static long proc_write(const char *proc, const char *rel, const char *text)
{
    char at[4096];
    long r = under_root(at, proc, rel);
    if (r < 0)
        return r;
    long fd = fl_rs4(SYS_openat, AT_FDCWD, at, O_WRONLY | O_CLOEXEC, 0);
    if (fd < 0)
        return fd;
    size_t n = strlen(text);
    r = fl_rs3(SYS_write, fd, text, n);
    fl_rs1(SYS_close, fd);
    return r < 0 ? r : r == (long)n ? 0 : -EIO;
}

/* The host's network is faultline's (its namespace belongs to the
 * machine's user namespace, see userns.c), so a task could not bind a port
 * below 1024 or send a ping without these, which a machine's root can:
 * any port and ICMP echo sockets (what ping uses without CAP_NET_RAW) for
 * every user of the host. */
FL_INIT_CODE static long net_for_everyone(const char *proc)
{
    long r = proc_write(proc, "/sys/net/ipv4/ip_unprivileged_port_start", "0\n");
    if (r == 0)
        r = proc_write(proc, "/sys/net/ipv4/ping_group_range",
                       dev_by_bind ? "0 0\n" : "0 2147483647\n"); /* rootless: gid 0 alone */
    return r;
}

/* What root may write in /proc by file modes alone (no capability): the
 * kernel's settings (/proc/sys: core_pattern, the machine's sysctls),
 * sysrq and the drivers' files, read-only, as container runtimes do. */
FL_INIT_CODE static long proc_read_only(const char *root)
{
    static const char *const paths[] = {"/proc/sys", "/proc/sysrq-trigger", "/proc/bus", "/proc/fs",
                                        "/proc/irq"};
    char at[4096];
    long r;
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
        if ((r = under_root(at, root, paths[i])) < 0)
            return r;
        /* onto itself: nothing to make; one this kernel lacks is skipped */
        r = fl_rs5(SYS_mount, at, at, NULL, MS_BIND, NULL);
        if (r == -ENOENT)
            continue;
        if (r < 0 ||
            (r = fl_rs5(SYS_mount, NULL, at, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL)) < 0)
            return r;
    }
    return 0;
}

/* Appends text at buf + *k (4096 bytes in all): false when it does not fit. */
FL_INIT_CODE static bool cat(char *buf, size_t *k, const char *text)
{
    size_t n = strlen(text);
    if (*k + n + 1 > 4096)
        return false;
    memcpy(buf + *k, text, n + 1);
    *k += n;
    return true;
}

/* Rootless (root_layer.h, fl_root_tops): the overlay of the machine's /NAME
 * at R/NAME; where the kernel refuses it (mounts below /NAME that the user
 * namespace inherited) a read-only bind of it instead, and where that is
 * refused too (a directory the user may not read) the empty directory of
 * the skeleton stays.  Then the run's hosts file over its /etc/hosts. */
FL_INIT_CODE static long mount_top(const struct fl_host_spec *s, const char *R, const char *name)
{
    char opts[4096], at[4096], top[4096];
    size_t k = 0;
    bool etc = !strcmp(name, "etc");
    bool fits = cat(top, &k, "/") && cat(top, &k, name);
    k = 0;
    /* the common layer's skeleton of it above the machine's (root_layer.c) */
    fits = fits && cat(opts, &k, "lowerdir=") && cat(opts, &k, s->common) && cat(opts, &k, top) &&
           cat(opts, &k, ":") && cat(opts, &k, top) && cat(opts, &k, ",upperdir=") &&
           cat(opts, &k, s->tops_dir) && cat(opts, &k, top) && cat(opts, &k, "/u,workdir=") &&
           cat(opts, &k, s->tops_dir) && cat(opts, &k, top) &&
           cat(opts, &k, "/w,index=off,userxattr");
    long r = fits ? under_root(at, R, top) : -ENAMETOOLONG;
    if (r < 0)
        return r;
    r = fl_rs5(SYS_mount, "fl-root", at, "overlay", 0, opts);
    if (r == -EINVAL || r == -EACCES || r == -EPERM)
        r = bind_into_root(R, top, top, BIND_REC | FL_BIND_RO);
    if (r == -EACCES || r == -EPERM)
        r = 0;
    if (r == 0 && etc && s->hosts_file)
        r = bind_into_root(R, s->hosts_file, "/etc/hosts", 0);
    return r;
}

/* A root of the host's own, assembled at s->root and made its root (see
 * "A root of its own" in the file's opening): 0, or a negative errno with
 * *step and *arg saying where. */
FL_INIT_CODE static long make_root(const struct fl_host_spec *s, int *step, int *arg)
{
    const char *R = s->root;
    char at[4096];
    long r;
#define ROOT_TRY(call, at_step) \
    do {                        \
        if ((r = (call)) < 0) { \
            *step = (at_step);  \
            return r;           \
        }                       \
    } while (0)
    ROOT_TRY(fl_rs5(SYS_mount, "fl-root", R, "overlay", 0, s->root_opts), STEP_ROOT_OVERLAY);
    for (size_t i = 0; i < s->ntops; i++) {
        *arg = (int)i;
        ROOT_TRY(mount_top(s, R, s->tops[i]), STEP_ROOT_TOP);
    }
    ROOT_TRY(bind_into_root(R, s->tmp_dir, "/tmp", BIND_REC), STEP_MOUNT_TMP);
    /* Two passes: what lies outside the hidden directory, the hiding
     * empty directory (over whatever a bind of a parent of it brought: a
     * bind, not a tmpfs, which would be a superblock to make and end),
     * then what lies inside it. */
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1 && s->hide) {
            ROOT_TRY(under_root(at, R, s->hide), STEP_ROOT_HIDE);
            ROOT_TRY(mkdir_p_in_child(at), STEP_ROOT_HIDE);
            ROOT_TRY(fl_rs5(SYS_mount, s->hide_with, at, NULL, MS_BIND, NULL), STEP_ROOT_HIDE);
        }
#define THIS_PASS(path) ((pass == 1) == (s->hide && path_under((path), s->hide)))
        if (THIS_PASS(s->workdir))
            ROOT_TRY(bind_into_root(R, s->disk_dir, s->workdir, BIND_REC), STEP_MOUNT_DISK);
        for (size_t i = 0; i < s->nmounts; i++) {
            *arg = (int)i;
            if (THIS_PASS(s->mounts[i].dst))
                ROOT_TRY(bind_into_root(R, s->mounts[i].src, s->mounts[i].dst, BIND_REC),
                         STEP_MOUNT_SHARED);
        }
        for (size_t i = 0; i < s->nbinds; i++) {
            *arg = (int)i;
            if (THIS_PASS(s->binds[i].path))
                ROOT_TRY(bind_into_root(R, s->binds[i].path, s->binds[i].path, s->binds[i].flags),
                         STEP_ROOT_BIND);
        }
#undef THIS_PASS
    }
    /* its own /proc (its PID namespace), /sys (init is in the host's
     * network namespace: sysfs shows its devices only) with the machine's
     * cgroup hierarchies where the host has a cgroup of its own (a limit
     * fault: its tasks can read their limits there) or is privileged; a
     * dozen mounts that other hosts do without (each mount is paid at the
     * host's start and again at its end) */
    ROOT_TRY(under_root(at, R, "/proc"), STEP_MOUNT_PROC);
    ROOT_TRY(fl_rs5(SYS_mount, "proc", at, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL),
             STEP_MOUNT_PROC);
    ROOT_TRY(net_for_everyone(at), STEP_NET_SYSCTL);
    if (!s->privileged)
        ROOT_TRY(proc_read_only(R), STEP_PROC_RO);
    /* unprivileged: /sys and the cgroup hierarchies read-only (root may
     * write sysfs and cgroup files by their modes) */
    unsigned long ro = s->privileged ? 0 : MS_RDONLY;
    ROOT_TRY(under_root(at, R, "/sys"), STEP_ROOT_SYS);
    ROOT_TRY(fl_rs5(SYS_mount, "sysfs", at, "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | ro, NULL),
             STEP_ROOT_SYS);
    if (s->cgroup || s->cgroup_mem || s->privileged)
        ROOT_TRY(bind_into_root(R, "/sys/fs/cgroup", "/sys/fs/cgroup",
                                FL_BIND_OPTIONAL | BIND_REC | (s->privileged ? 0 : FL_BIND_RO)),
                 STEP_ROOT_SYS);
    /* /dev (nodes, links, shm/) is the common layer's; its ptys are its own.
     * Rootless the nodes there are empty files (no device may be made in a
     * user namespace): the machine's are bound over them. */
    for (size_t i = 0; dev_by_bind && i < sizeof dev_nodes / sizeof *dev_nodes; i++) {
        ROOT_TRY(under_root(at, R, dev_nodes[i]), STEP_ROOT_DEV);
        ROOT_TRY(fl_rs5(SYS_mount, dev_nodes[i], at, NULL, MS_BIND, NULL), STEP_ROOT_DEV);
    }
    ROOT_TRY(under_root(at, R, "/dev/pts"), STEP_ROOT_DEV);
    ROOT_TRY(fl_rs5(SYS_mount, "devpts", at, "devpts", MS_NOSUID | MS_NOEXEC,
                    "newinstance,ptmxmode=0666,mode=620"),
             STEP_ROOT_DEV);
    /* The new root goes over the machine's, as switch_root does: moved
     * onto / and made init's root.  The machine's root and the mounts of
     * the run under it stay in the namespace, below the new root and
     * unreachable by any path from it (".." at / stays there; entering the
     * namespace lands on the topmost root; mountinfo lists only what is
     * reachable), until the host's end takes them with the rest.  A
     * pivot_root and a detach would take them now, but pivot_root walks
     * every thread of the machine and a detach waits for an expedited RCU
     * grace period: with hundreds of hosts starting at once, those two
     * were a third of a start's time.  The price: a mount the harness had
     * when the host started is held by the host until it ends, so a tmpfs
     * the harness unmounts lives on until then (removing its directory
     * lets it go at once), and the faultline filesystem ends its
     * connection at unmount rather than wait for its last mount to go
     * (fusedisk/fs.c). */
    ROOT_TRY(fl_rs1(SYS_chdir, R), STEP_ROOT_PIVOT);
    ROOT_TRY(fl_rs5(SYS_mount, ".", "/", NULL, MS_MOVE, NULL), STEP_ROOT_PIVOT);
    ROOT_TRY(fl_rs1(SYS_chroot, "."), STEP_ROOT_PIVOT);
    ROOT_TRY(fl_rs1(SYS_chdir, "/"), STEP_ROOT_PIVOT);
#undef ROOT_TRY
    return 0;
}

FL_INIT_CODE static __attribute__((noreturn)) void init_exit(int code)
{
    for (;;)
        fl_rs1(SYS_exit_group, code);
}

/* PID 1 of the host's new namespaces. */
FL_INIT_CODE static int init_main(void *arg)
{
    const struct init_args *a = arg;
    const struct fl_host_spec *s = &a->h->spec;
    struct ready_msg msg = {s->idx, a->generation, 0, STEP_OK, 0};
    int rfd = ready_pipe[1], afd = anchor_pipe[0];
    long r;

#define INIT_TRY(call, at)      \
    do {                        \
        if ((r = (call)) < 0) { \
            msg.step = (at);    \
            goto fail;          \
        }                       \
    } while (0)

    /* The harness's file table is shared (CLONE_FILES) until this call:
     * a table of our own with fds 0 .. the pipes, before any fd changes. */
    INIT_TRY(
        fl_rs3(SYS_close_range, (unsigned)(rfd > afd ? rfd : afd) + 1, ~0U, CLOSE_RANGE_UNSHARE),
        STEP_DUP_PIPES);
    INIT_TRY(fl_rs2(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL), STEP_PDEATHSIG);
    /* Keep only the two pipes; stdin/stdout to /dev/null, stderr stays. */
    long null = fl_rs4(SYS_openat, AT_FDCWD, "/dev/null", O_RDWR | O_CLOEXEC, 0);
    if (null >= 0 && null != 0)
        fl_rs3(SYS_dup3, null, 0, 0);
    if (null >= 0 && null != 1)
        fl_rs3(SYS_dup3, null, 1, 0);
    INIT_TRY(rfd == 3 ? 0 : fl_rs3(SYS_dup3, rfd, 3, 0), STEP_DUP_PIPES);
    INIT_TRY(afd == 4 ? 0 : fl_rs3(SYS_dup3, afd, 4, 0), STEP_DUP_PIPES);
    rfd = 3;
    afd = 4;
    fl_rs3(SYS_close_range, 5U, ~0U, 0U);
    for (int i = 0; i < 2; i++) {
        if (!a->cgroup_procs[i][0])
            continue;
        long fd = fl_rs4(SYS_openat, AT_FDCWD, a->cgroup_procs[i], O_WRONLY | O_CLOEXEC, 0);
        if (fd >= 0) {
            fl_rs3(SYS_write, fd, "0\n", 2); /* a failure is reported by the first spawn */
            fl_rs1(SYS_close, fd);
        }
    }
    INIT_TRY(fl_rs2(SYS_sethostname, s->name, strlen(s->name)), STEP_HOSTNAME);
    if (s->root) {
        int step = STEP_OK;
        if ((r = make_root(s, &step, &msg.arg)) < 0) {
            msg.step = step;
            goto fail;
        }
        goto mounted;
    }
    INIT_TRY(bind_mount(s->disk_dir, s->workdir), STEP_MOUNT_DISK);
    for (size_t i = 0; i < s->nmounts; i++) {
        msg.arg = (int)i;
        INIT_TRY(bind_mount(s->mounts[i].src, s->mounts[i].dst), STEP_MOUNT_SHARED);
    }
    if (s->hosts_file)
        INIT_TRY(fl_rs5(SYS_mount, s->hosts_file, "/etc/hosts", NULL, MS_BIND, NULL),
                 STEP_MOUNT_HOSTS);
    /* /tmp last: the sources above may live under the harness's /tmp.
     * Directories to expose that lie under /tmp are held by O_PATH fds
     * across the mount and bound again at their paths inside the new /tmp,
     * with what is mounted below them (the run directory's tmpfs, fs/,
     * holds the stores of the crash-consistency layer, see durable.c): as
     * a host sees them when they do not lie under /tmp. */
    int keep[8], keep_idx[8];
    size_t nkeep = 0;
    for (size_t i = 0; i < s->nexpose && nkeep < 8; i++) {
        if (strncmp(s->expose[i], "/tmp/", 5) != 0)
            continue;
        long fd;
        msg.arg = (int)i;
        INIT_TRY(
            fd = fl_rs4(SYS_openat, AT_FDCWD, s->expose[i], O_PATH | O_DIRECTORY | O_CLOEXEC, 0),
            STEP_MOUNT_EXPOSE);
        keep_idx[nkeep] = (int)i;
        keep[nkeep++] = (int)fd;
    }
    INIT_TRY(bind_mount(s->tmp_dir, "/tmp"), STEP_MOUNT_TMP);
    for (size_t k = 0; k < nkeep; k++) {
        char src[32] = "/proc/self/fd/", num[16];
        const char *d = utoa_in_child(num + sizeof num, (unsigned)keep[k]);
        memcpy(src + 14, d, strlen(d) + 1);
        const char *at = s->expose[keep_idx[k]];
        msg.arg = keep_idx[k];
        INIT_TRY(mkdir_p_in_child(at), STEP_MOUNT_EXPOSE);
        INIT_TRY(fl_rs5(SYS_mount, src, at, NULL, MS_BIND | MS_REC, NULL), STEP_MOUNT_EXPOSE);
        fl_rs1(SYS_close, keep[k]);
    }
    /* /dev/shm of its own, as a machine has: a tmpfs that lives only in
     * this mount namespace, so it vanishes with the host.  The machine's
     * /dev/shm would keep what a killed process never unlinked (libfaketime,
     * under clock_offset, leaves faketime_shm_PID and sem.faketime_sem_PID
     * behind every process that ends without exit(), and with the host's
     * small pids the names collide across hosts and runs).  No /dev/shm on
     * this machine: nothing to cover. */
    r = fl_rs5(SYS_mount, "tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
    if (r < 0 && r != -ENOENT) {
        msg.step = STEP_MOUNT_SHM;
        goto fail;
    }
    INIT_TRY(fl_rs5(SYS_mount, "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL),
             STEP_MOUNT_PROC);
    INIT_TRY(net_for_everyone("/proc"), STEP_NET_SYSCTL);
mounted:;
    unsigned long chld = 1UL << (SIGCHLD - 1); /* the kernel's sigset */
    INIT_TRY(fl_rs4(SYS_rt_sigprocmask, SIG_BLOCK, &chld, NULL, sizeof chld), STEP_SIGNALS);
    long sfd;
    INIT_TRY(sfd = fl_rs4(SYS_signalfd4, -1, &chld, sizeof chld, SFD_CLOEXEC | SFD_NONBLOCK),
             STEP_SIGNALS);
#undef INIT_TRY
    if (fl_rs3(SYS_write, rfd, &msg, sizeof msg) != sizeof msg)
        init_exit(1);
    fl_rs1(SYS_close, rfd);
    for (;;) {
        struct pollfd p[2] = {{.fd = afd, .events = POLLIN}, {.fd = (int)sfd, .events = POLLIN}};
        r = fl_rs5(SYS_ppoll, p, 2, NULL, NULL, 0);
        if (r < 0 && r != -EINTR)
            init_exit(1);
        if (r <= 0)
            continue;
        if (p[0].revents) /* EOF or error: the harness is gone */
            init_exit(0);
        if (p[1].revents) {
            struct signalfd_siginfo si;
            while (fl_rs3(SYS_read, sfd, &si, sizeof si) == sizeof si)
                ;
            while (fl_rs4(SYS_wait4, -1, NULL, WNOHANG, NULL) > 0)
                ;
        }
    }
fail:
    msg.err = (int)-r;
    fl_rs3(SYS_write, rfd, &msg, sizeof msg);
    init_exit(1);
}

int fl_host_start(struct fl_host *h, char *err, size_t errlen)
{
    if (self_pidns < 0) {
        fl_netem_seterr(err, errlen, "host %s: fl_host_global_init was not called", h->spec.name);
        return -EINVAL;
    }
    if (h->state != FL_HOST_DOWN) {
        fl_netem_seterr(err, errlen, "host %s: already started", h->spec.name);
        return -EBUSY;
    }
    struct init_stack *st = stack_get();
    if (!st) {
        fl_netem_seterr(err, errlen, "host %s: mmap of a %d KiB stack for init: %s", h->spec.name,
                        INIT_STACK_SIZE / 1024, strerror(errno));
        return -ENOMEM;
    }
    struct init_args *a = st->mem;
    a->h = h;
    a->generation = h->generation;
    const char *cgs[2] = {h->spec.cgroup, h->spec.cgroup_mem};
    for (int i = 0; i < 2; i++) {
        a->cgroup_procs[i][0] = 0;
        if (cgs[i] && (size_t)snprintf(a->cgroup_procs[i], sizeof a->cgroup_procs[i],
                                       "%s/cgroup.procs", cgs[i]) >= sizeof a->cgroup_procs[i]) {
            st->pid = 0;
            fl_netem_seterr(err, errlen, "host %s: cgroup path too long: %s", h->spec.name, cgs[i]);
            return -ENAMETOOLONG;
        }
    }
    int pidfd = -1;
    int flags = CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC |
                CLONE_FILES | CLONE_PIDFD | SIGCHLD | (FL_RAWSYS ? CLONE_VM : 0);
    /* 16-byte aligned top of the stack; the arguments sit at its bottom. */
    char *top = (char *)st->mem + INIT_STACK_SIZE;
    pid_t pid = clone(init_main, top, flags, a, &pidfd);
    if (pid < 0) {
        int e = errno;
        st->pid = 0;
        fl_netem_seterr(err, errlen, "host %s: clone(new net, mount, pid, uts, ipc namespaces): %s",
                        h->spec.name, strerror(e));
        return -e;
    }
    st->pid = pid;
    fcntl(pidfd, F_SETFD, FD_CLOEXEC);
    h->pid = pid;
    h->pidfd = pidfd;
    h->state = FL_HOST_STARTING;
    h->starttime = 0;
    return 0;
}

int fl_host_wait_ready(struct fl_host **hosts, size_t n, char *err, size_t errlen)
{
    size_t waiting = 0;
    for (size_t i = 0; i < n; i++)
        if (hosts[i]->state == FL_HOST_STARTING)
            waiting++;
    int rc = 0;
    while (waiting > 0) {
        struct pollfd p = {.fd = ready_pipe[0], .events = POLLIN};
        int r = poll(&p, 1, 10000);
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0) {
            const char *first = "?";
            for (size_t i = 0; i < n; i++)
                if (hosts[i]->state == FL_HOST_STARTING) {
                    first = hosts[i]->spec.name;
                    break;
                }
            fl_netem_seterr(err, errlen,
                            "%zu host(s) did not report ready within 10 s (host %s among them)",
                            waiting, first);
            return -ETIMEDOUT;
        }
        struct ready_msg m;
        ssize_t got = read(ready_pipe[0], &m, sizeof m);
        if (got != sizeof m) {
            fl_netem_seterr(err, errlen, "reading host readiness: %s",
                            got < 0 ? strerror(errno) : "short read");
            return -EIO;
        }
        for (size_t i = 0; i < n; i++) {
            struct fl_host *h = hosts[i];
            if (h->spec.idx != m.idx || h->generation != m.generation ||
                h->state != FL_HOST_STARTING)
                continue;
            waiting--;
            if (m.step == STEP_OK) {
                h->state = FL_HOST_UP;
                h->starttime = fl_proc_starttime(h->pid);
            } else if (rc == 0) {
                const char *what = step_name(m.step);
                const char *path = m.step == STEP_MOUNT_DISK                     ? h->spec.workdir
                                   : m.step == STEP_MOUNT_TMP                    ? "/tmp"
                                   : m.step == STEP_MOUNT_HOSTS                  ? "/etc/hosts"
                                   : m.step == STEP_MOUNT_PROC                   ? "/proc"
                                   : m.step == STEP_MOUNT_SHM                    ? "/dev/shm"
                                   : m.step == STEP_ROOT_OVERLAY && h->spec.root ? h->spec.root
                                   : m.step == STEP_ROOT_HIDE && h->spec.hide    ? h->spec.hide
                                   : m.step == STEP_ROOT_TOP && (size_t)m.arg < h->spec.ntops
                                       ? h->spec.tops[m.arg]
                                   : m.step == STEP_ROOT_BIND && (size_t)m.arg < h->spec.nbinds
                                       ? h->spec.binds[m.arg].path
                                   : m.step == STEP_MOUNT_SHARED && (size_t)m.arg < h->spec.nmounts
                                       ? h->spec.mounts[m.arg].dst
                                   : m.step == STEP_MOUNT_EXPOSE && (size_t)m.arg < h->spec.nexpose
                                       ? h->spec.expose[m.arg]
                                       : "";
                fl_netem_seterr(err, errlen, "host %s: %s%s%s: %s", h->spec.name, what,
                                *path ? " " : "", path, strerror(m.err));
                rc = -(m.err ? m.err : EIO);
            }
        }
    }
    return rc;
}

/* The user namespace of the host's tasks goes with them: the next start
 * makes a new one at its first spawn. */
static void drop_userns(struct fl_host *h)
{
    if (h->has_userns)
        close(h->userns_fd);
    h->has_userns = false;
}

int fl_host_kill(struct fl_host *h)
{
    if (h->state == FL_HOST_DOWN)
        return 0;
    /* No waiting here: a dead init is reaped only after every process of its
     * PID namespace has been reaped by its parent (us), so the caller reaps
     * init along with the rest (waitpid(-1)) in its SIGCHLD handling. */
    if (syscall(SYS_pidfd_send_signal, h->pidfd, SIGKILL, NULL, 0) < 0 && errno != ESRCH)
        kill(h->pid,
             SIGKILL); /* the caller waits for it: it must die (not yet reaped: its pid is ours) */
    close(h->pidfd);
    h->pidfd = -1;
    h->state = FL_HOST_DOWN;
    drop_userns(h);
    return 0;
}

int fl_host_kill_now(struct fl_host *h)
{
    if (h->state == FL_HOST_DOWN)
        return 0;
    /* init's PID namespace, known before init dies (a dead init's links go) */
    char path[64];
    struct stat ns, st;
    snprintf(path, sizeof path, "/proc/%d/ns/pid", (int)h->pid);
    bool have_ns = stat(path, &ns) == 0;
    fl_host_kill(h);
    if (!have_ns)
        return 0;
    DIR *d = opendir("/proc");
    if (!d)
        return -errno;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        int pid = atoi(e->d_name);
        if (pid <= 0 || pid == (int)h->pid)
            continue;
        /* through a pidfd opened before the check: a pid reused meanwhile
         * by another process is never signalled */
        int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (pfd < 0)
            continue; /* gone */
        snprintf(path, sizeof path, "/proc/%d/ns/pid", pid);
        if (stat(path, &st) == 0 && st.st_ino == ns.st_ino && st.st_dev == ns.st_dev &&
            syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0) == 0)
            n++;
        close(pfd);
    }
    closedir(d);
    return n;
}

bool fl_host_reaped(struct fl_host *h, pid_t pid)
{
    if (h->pid != pid)
        return false;
    if (h->state != FL_HOST_DOWN) {
        close(h->pidfd);
        h->pidfd = -1;
        h->state = FL_HOST_DOWN;
    }
    drop_userns(h);
    return true;
}

pid_t fl_host_spawn(struct fl_host *h, const struct fl_spawn *sp, char *err, size_t errlen)
{
    if (h->state != FL_HOST_UP) {
        fl_netem_seterr(err, errlen, "host %s is down", h->spec.name);
        return -EHOSTDOWN;
    }
    if (!h->spec.privileged && !h->has_userns) {
        char why[256];
        int r = fl_userns_make(&h->userns_fd, why, sizeof why);
        if (r < 0) {
            fl_netem_seterr(err, errlen, "host %s: %s", h->spec.name, why);
            return r;
        }
        h->has_userns = true;
    }
    int status_pipe[2], gate[2] = {-1, -1};
    if (pipe2(status_pipe, O_CLOEXEC) < 0) {
        int e = errno;
        fl_netem_seterr(err, errlen, "host %s: pipe: %s", h->spec.name, strerror(e));
        return -e;
    }
    if (sp->before_exec && pipe2(gate, O_CLOEXEC) < 0) {
        int e = errno;
        close(status_pipe[0]);
        close(status_pipe[1]);
        fl_netem_seterr(err, errlen, "host %s: pipe: %s", h->spec.name, strerror(e));
        return -e;
    }
    if (setns(h->pidfd, CLONE_NEWPID) < 0) {
        int e = errno;
        close(status_pipe[0]);
        close(status_pipe[1]);
        if (gate[0] >= 0) {
            close(gate[0]);
            close(gate[1]);
        }
        fl_netem_seterr(err, errlen, "host %s: setns(pid namespace of init %d): %s", h->spec.name,
                        (int)h->pid, strerror(e));
        return -e;
    }
    fflush(NULL);
    pid_t pid = fork();
    int fork_errno = errno;
    if (pid == 0) {
        struct {
            int err;
            int step;
        } st = {0, 0};
        close(status_pipe[0]);
        /* the cgroups first: their paths are the harness's view */
        const char *cgroups[3] = {h->spec.cgroup, h->spec.cgroup_mem, sp->cgroup};
        for (int i = 0; i < 3; i++) {
            if (!cgroups[i])
                continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/cgroup.procs", cgroups[i]);
            int fd = open(path, O_WRONLY | O_CLOEXEC);
            if (fd < 0 || write(fd, "0\n", 2) != 2) {
                st.step = 2;
                goto child_fail;
            }
            close(fd);
        }
        if (setns(h->pidfd, CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC) < 0) {
            st.step = 1;
            goto child_fail;
        }
        if (chdir(sp->cwd ? sp->cwd : h->spec.workdir) < 0) {
            st.step = 3;
            goto child_fail;
        }
        /* last of the namespaces: joining it drops every capability in the
         * machine's user namespace, which the setns calls above need */
        if (h->has_userns && setns(h->userns_fd, CLONE_NEWUSER) < 0) {
            st.step = 6;
            goto child_fail;
        }
        int null = open("/dev/null", O_RDWR);
        int fds[3] = {sp->stdin_fd, sp->stdout_fd, sp->stderr_fd};
        for (int i = 0; i < 3; i++) {
            int fd = fds[i] >= 0 ? fds[i] : null;
            if (fd == i)
                fcntl(fd, F_SETFD, 0);
            else if (dup2(fd, i) < 0) {
                st.step = 4;
                goto child_fail;
            }
        }
        syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC);
        fcntl(status_pipe[1], F_SETFD, FD_CLOEXEC);
        if (sp->new_session)
            setsid();
        else
            setpgid(0, 0);
        struct rlimit rl;
        if (h->spec.nofile > 0 && getrlimit(RLIMIT_NOFILE, &rl) == 0) {
            /* the soft limit only (faults/limit.c) */
            rl.rlim_cur =
                (rlim_t)h->spec.nofile < rl.rlim_max ? (rlim_t)h->spec.nofile : rl.rlim_max;
            setrlimit(RLIMIT_NOFILE, &rl);
        }
        if (h->spec.nproc > 0 && getrlimit(RLIMIT_NPROC, &rl) == 0) {
            rl.rlim_cur = (rlim_t)h->spec.nproc < rl.rlim_max ? (rlim_t)h->spec.nproc : rl.rlim_max;
            setrlimit(RLIMIT_NPROC, &rl);
        }
        if (gate[0] >= 0) {
            /* the tracer takes it now (before_exec): one byte, then exec */
            char c;
            close(gate[1]);
            ssize_t g;
            while ((g = read(gate[0], &c, 1)) < 0 && errno == EINTR)
                ;
            if (g != 1)
                _exit(127);
        }
        sigset_t all;
        sigemptyset(&all);
        sigprocmask(SIG_SETMASK, &all, NULL);
        for (int sig = 1; sig < NSIG; sig++)
            signal(sig, SIG_DFL);
        if (sp->envp)
            execvpe(sp->argv[0], sp->argv, sp->envp);
        else
            execvp(sp->argv[0], sp->argv);
        st.step = 5;
    child_fail:
        st.err = errno;
        if (write(status_pipe[1], &st, sizeof st) < 0)
            _exit(126);
        _exit(127);
    }
    /* Back to our own PID namespace for children, whatever happened. */
    if (setns(self_pidns, CLONE_NEWPID) < 0)
        abort();
    close(status_pipe[1]);
    if (gate[0] >= 0)
        close(gate[0]);
    if (pid < 0) {
        close(status_pipe[0]);
        if (gate[1] >= 0)
            close(gate[1]);
        fl_netem_seterr(err, errlen, "host %s: fork into PID namespace of init %d: %s",
                        h->spec.name, (int)h->pid, strerror(fork_errno));
        return -fork_errno;
    }
    if (gate[1] >= 0) {
        int rc = sp->before_exec(sp->before_exec_arg, pid, err, errlen);
        if (rc >= 0 && write(gate[1], "x", 1) != 1)
            rc = -errno;
        close(gate[1]);
        if (rc < 0) {
            /* it never execs: gone with the gate closed */
            close(status_pipe[0]);
            kill(pid, SIGKILL);
            while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
            return rc;
        }
    }
    struct {
        int err;
        int step;
    } st;
    ssize_t n;
    while ((n = read(status_pipe[0], &st, sizeof st)) < 0 && errno == EINTR)
        ;
    close(status_pipe[0]);
    if (n == sizeof st) {
        static const char *what[] = {
            "",     "setns(net, mount, uts, ipc)",     "join cgroup", "chdir", "dup2",
            "exec", "setns(the host's user namespace)"};
        int w;
        while (waitpid(pid, &w, 0) < 0 && errno == EINTR)
            ;
        fl_netem_seterr(err, errlen, "host %s: %s%s%s: %s", h->spec.name, what[st.step],
                        st.step == 5 ? " " : "", st.step == 5 ? sp->argv[0] : "", strerror(st.err));
        return -st.err;
    }
    return pid;
}

int fl_host_enter_pid(pid_t init_pid, unsigned long long starttime, const char *workdir, char *err,
                      size_t errlen)
{
    int pidfd = (int)syscall(SYS_pidfd_open, init_pid, 0);
    if (pidfd < 0) {
        int e = errno;
        fl_netem_seterr(err, errlen, "host init %d: pidfd_open: %s (is the run still up?)",
                        (int)init_pid, strerror(e));
        return -e;
    }
    if (starttime && fl_proc_starttime(init_pid) != starttime) {
        close(pidfd);
        fl_netem_seterr(err, errlen,
                        "host init %d is gone (its pid now belongs to another process)",
                        (int)init_pid);
        return -ESRCH;
    }
    if (setns(pidfd, CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWPID) < 0) {
        int e = errno;
        close(pidfd);
        fl_netem_seterr(err, errlen, "host init %d: setns: %s", (int)init_pid, strerror(e));
        return -e;
    }
    close(pidfd);
    if (workdir && chdir(workdir) < 0) {
        int e = errno;
        fl_netem_seterr(err, errlen, "chdir %s: %s", workdir, strerror(e));
        return -e;
    }
    return 0;
}

/* Bringing up a batch: the calling thread clones the inits while a second
 * thread plugs them into the fabric in chunks of UP_CHUNK, so that the
 * kernel's work for new namespaces (sysctl and sysfs registration) and for
 * veth pairs runs on two cores at once.  The committer is the fabric's only
 * user while the batch runs.  Small batches need no second thread. */
#define UP_CHUNK 32

struct committer {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct fl_host **hosts;
    struct fl_fabric *fab;
    size_t cloned; /* hosts[0..cloned) have an init; under mu */
    bool done;     /* no more clones coming; under mu */
    int rc;        /* first error of the committer */
    char err[512];
};

static int commit_range(struct committer *c, size_t from, size_t to)
{
    int rc = 0;
    for (size_t i = from; i < to && rc == 0; i++)
        rc = fl_fabric_attach(c->fab, c->hosts[i]->spec.idx, c->hosts[i]->pid, c->err,
                              sizeof c->err);
    if (rc == 0)
        rc = fl_fabric_commit(c->fab, c->err, sizeof c->err);
    return rc;
}

static void *committer_main(void *arg)
{
    struct committer *c = arg;
    size_t at = 0;
    for (;;) {
        pthread_mutex_lock(&c->mu);
        while (!c->done && c->cloned - at < UP_CHUNK)
            pthread_cond_wait(&c->cv, &c->mu);
        size_t to = c->cloned;
        bool last = c->done;
        pthread_mutex_unlock(&c->mu);
        if (to > at && c->rc == 0)
            c->rc = commit_range(c, at, to);
        at = to;
        if (last)
            return NULL;
    }
}

int fl_host_up_batch(struct fl_host **hosts, size_t n, struct fl_fabric *fab, char *err,
                     size_t errlen)
{
    struct committer c = {.mu = PTHREAD_MUTEX_INITIALIZER,
                          .cv = PTHREAD_COND_INITIALIZER,
                          .hosts = hosts,
                          .fab = fab};
    pthread_t th;
    bool threaded = n > UP_CHUNK && pthread_create(&th, NULL, committer_main, &c) == 0;
    int rc = 0;
    size_t i;
    for (i = 0; i < n; i++) {
        if ((rc = fl_host_start(hosts[i], err, errlen)) < 0)
            break;
        if (threaded && (i + 1) % UP_CHUNK == 0) {
            pthread_mutex_lock(&c.mu);
            c.cloned = i + 1;
            pthread_cond_signal(&c.cv);
            pthread_mutex_unlock(&c.mu);
        }
    }
    if (threaded) {
        pthread_mutex_lock(&c.mu);
        c.cloned = i;
        c.done = true;
        pthread_cond_signal(&c.cv);
        pthread_mutex_unlock(&c.mu);
        pthread_join(th, NULL);
    } else if (rc == 0) {
        c.rc = commit_range(&c, 0, n);
    }
    if (rc < 0)
        return rc;
    if (c.rc < 0) {
        /* An init that failed a step of its own set-up (a mount) has exited
         * before the fabric reached its namespaces, and the fabric's error
         * ("open /proc/PID/ns/net: No such file or directory") hides why:
         * the init's report, if there is one, names the host, step and path. */
        int wrc = fl_host_wait_ready(hosts, n, err, errlen);
        if (wrc < 0 && wrc != -ETIMEDOUT && wrc != -EIO)
            return wrc;
        fl_netem_seterr(err, errlen, "%s", c.err);
        return c.rc;
    }
    return fl_host_wait_ready(hosts, n, err, errlen);
}
