/*
 * doctor.c: `faultline doctor`: what this machine lets this user do with
 * faultline, found by doing it (a switch namespace with its bridge and a
 * partition's nftables rules, a tmpfs and an overlay in a mount namespace
 * of its own, a time namespace), not by reading version numbers; then,
 * for each fault kind, how it reaches its target for this user (root, or
 * rootless: harness/sys/rootless.c), or what it needs and how to get it.
 * Run by a user other than root it first enters its user namespace, as
 * `faultline run` does, so it sees what a run would see.  Exit status 0
 * when runs can start here (namespaces, network, mounts), 1 when not.
 */
#include "harness/cli/cli.h"
#include "harness/cli/common.h"
#include "harness/sys/cgroup.h"
#include "harness/sys/rootless.h"
#include "harness/sys/vclock.h"
#include "netem/fabric.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

const char fl_cli_doctor_usage[] =
    "usage: faultline doctor\n"
    "\n"
    "Says what this machine lets this user do with faultline, by trying it:\n"
    "user namespaces (a user without root runs in one of its own), network\n"
    "namespaces with a bridge and nftables rules, tmpfs and overlay mounts,\n"
    "time namespaces, FUSE (/dev/fuse), cgroups, libfiu, libfaketime,\n"
    "subordinate id ranges; then how each fault kind reaches its target for\n"
    "this user, or what it needs and how to get it.\n"
    "Exit status: 0 when runs can start here, 1 when they cannot.\n";

/* One finding: what, yes or no, and the detail (what to do, when no). */
static void say(bool ok, const char *what, const char *fmt, ...)
{
    char detail[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    printf("  %-29s %-3s %s\n", what, ok ? "yes" : "no", detail);
}

/* Runs fn in a child (its namespaces and mounts end with it): 0, or the
 * errno it failed with; what it tried into what. */
static int in_child(int (*fn)(char *what, size_t len), char *what, size_t len)
{
    int p[2];
    if (pipe(p) < 0)
        return errno;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return errno;
    if (pid == 0) {
        close(p[0]);
        char w[256] = "";
        int e = fn(w, sizeof w);
        if (write(p[1], w, strlen(w)) < 0) {
            /* the parent reads nothing: it says what failed without it */
        }
        _exit(e > 0 && e < 255 ? e : e ? 254 : 0);
    }
    close(p[1]);
    ssize_t n = read(p[0], what, len - 1);
    what[n > 0 ? n : 0] = 0;
    close(p[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(st) ? WEXITSTATUS(st) : EINTR;
}

static int try_mounts(char *what, size_t len)
{
    char dir[] = "/tmp/fl-doctor-XXXXXX", path[PATH_MAX], opts[PATH_MAX * 3];
    if (unshare(CLONE_NEWNS) < 0)
        return snprintf(what, len, "unshare(CLONE_NEWNS)"), errno;
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return snprintf(what, len, "mount --make-rprivate /"), errno;
    if (!mkdtemp(dir))
        return snprintf(what, len, "mkdtemp in /tmp"), errno;
    int e = 0;
    if (mount("fl-doctor", dir, "tmpfs", 0, "size=1m") < 0) {
        e = errno;
        snprintf(what, len, "mount a tmpfs");
    }
    static const char *const sub[] = {"lower", "upper", "work", "mnt"};
    for (int i = 0; i < 4 && !e; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, sub[i]);
        if (mkdir(path, 0755) < 0)
            e = errno, snprintf(what, len, "mkdir in a tmpfs");
    }
    if (!e) {
        snprintf(opts, sizeof opts, "lowerdir=%s/lower,upperdir=%s/upper,workdir=%s/work%s", dir,
                 dir, dir, fl_rootless() ? ",userxattr" : "");
        snprintf(path, sizeof path, "%s/mnt", dir);
        if (mount("fl-doctor", path, "overlay", 0, opts) < 0)
            e = errno, snprintf(what, len, "mount an overlay");
        else
            umount2(path, MNT_DETACH);
    }
    umount2(dir, MNT_DETACH);
    rmdir(dir);
    return e;
}

static int try_timens(char *what, size_t len)
{
    snprintf(what, len, "unshare(CLONE_NEWTIME)");
    return unshare(CLONE_NEWTIME) < 0 ? errno : 0;
}

static int try_network(char *what, size_t len)
{
    struct fl_fabric *f;
    char err[512];
    if (fl_fabric_create(&f, "doctor", err, sizeof err) < 0 ||
        fl_fabric_commit(f, err, sizeof err) < 0) {
        snprintf(what, len, "%s", err);
        return EPERM;
    }
    int a = 0, b = 1, id;
    const int *groups[] = {&a, &b};
    size_t sizes[] = {1, 1};
    int rc = fl_fabric_partition(f, groups, sizes, 2, &id, err, sizeof err);
    if (rc == 0)
        rc = fl_fabric_heal(f, id, err, sizeof err);
    if (rc < 0)
        snprintf(what, len, "nftables: %s", err);
    fl_fabric_destroy(f);
    return rc < 0 ? -rc : 0;
}

static bool readable_file(const char *path)
{
    return access(path, R_OK) == 0;
}

int fl_cli_doctor(int argc, char **argv)
{
    (void)argv;
    if (argc > 1) {
        fprintf(stderr, "faultline doctor: takes no arguments\n%s", fl_cli_doctor_usage);
        return 2;
    }
    unsigned uid = fl_rootless_outer_uid();
    struct passwd *pw = getpwuid(uid);
    bool rootless = fl_rootless();
    printf("faultline doctor: uid %u (%s)%s\n", uid, pw ? pw->pw_name : "?",
           rootless ? ", not root: runs rootless, in a user namespace of their own" : ", root");
    char what[256];
    int e;
    bool can_run = true;

    /* a run without root got this far only in one of its own (main.c):
     * the namespace's own user.max_user_namespaces would say nothing */
    say(true, "user namespaces", "%s", rootless ? "entered one of its own" : "not needed as root");

    e = in_child(try_network, what, sizeof what);
    can_run &= !e;
    say(!e, "namespaces, bridge, nftables", "%s", e ? what : "a switch, a partition");

    e = in_child(try_mounts, what, sizeof what);
    can_run &= !e;
    say(!e, "mounts (tmpfs, overlay)", "%s%s%s", e ? what : "each host's root and disk",
        e ? ": " : "", e ? strerror(e) : "");

    e = in_child(try_timens, what, sizeof what);
    say(!e, "time namespaces", "%s", e ? strerror(e) : "a clock of a host's own");

    bool fuse = access("/dev/fuse", R_OK | W_OK) == 0;
    struct stat st;
    bool fuse_node = stat("/dev/fuse", &st) == 0;
    say(fuse, "FUSE (/dev/fuse)", "%s",
        fuse        ? "the faultline filesystem"
        : fuse_node ? "not open to this user: as root, `chmod 0666 /dev/fuse` (Debian's udev "
                      "rules leave it so on most machines)"
                    : "no /dev/fuse: `modprobe fuse`");

    char root[PATH_MAX] = "", deleg[PATH_MAX] = "";
    bool cgroups = !rootless && fl_cgroup_root(root, sizeof root) >= 0;
    bool delegated = rootless && fl_cgroup_delegated(deleg, sizeof deleg) == 0;
    if (rootless)
        say(delegated, "cgroups", "%s%s",
            delegated ? "delegated to this user: "
                      : "none delegated to this user (start "
                        "faultline under `systemd-run --user "
                        "--scope -p Delegate=yes` for pause's "
                        "freezer)",
            deleg);
    else
        say(cgroups, "cgroups", "%s", cgroups ? root : "no pids cgroup hierarchy mounted");

    char bin[PATH_MAX], path[PATH_MAX + 64];
    fl_cli_bin_dir(bin, sizeof bin);
    snprintf(path, sizeof path, "%s/../lib/fl_fiu_preload.so", bin);
    void *fiu = dlopen("libfiu.so.0", RTLD_LAZY | RTLD_LOCAL);
    bool libfiu = fiu && readable_file(path);
    if (fiu)
        dlclose(fiu);
    say(libfiu, "libfiu", "%s",
        libfiu ? "disk faults' errors in a program's calls"
               : "`apt-get install libfiu0 fiu-utils` and `make` (fl_fiu_preload.so)");

    static const char *const faketime[] = {"/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
                                           "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
                                           "/usr/lib/faketime/libfaketime.so.1"};
    bool ft = false;
    for (size_t i = 0; i < sizeof faketime / sizeof *faketime && !ft; i++)
        ft = readable_file(faketime[i]);
    say(ft, "libfaketime", "%s", ft ? "clock_offset" : "`apt-get install faketime`");

    bool subuid = false;
    FILE *f = fopen("/etc/subuid", "re");
    char line[256];
    while (f && pw && fgets(line, sizeof line, f))
        subuid |=
            !strncmp(line, pw->pw_name, strlen(pw->pw_name)) && line[strlen(pw->pw_name)] == ':';
    if (f)
        fclose(f);
    say(subuid || !rootless, "subordinate ids (/etc/subuid)", "%s",
        !rootless ? "not needed as root"
        : subuid  ? "a range is there; rootless runs map only the user's own id (0 in a host)"
                  : "none: rootless runs map only the user's own id (0 in a host); fine for "
                    "every fault below");

    printf("\nfaults, as this user:\n");
    say(can_run, "partition, link, block", "%s",
        can_run ? "nftables and the link emulator in the run's switch" : "needs the network above");
    say(can_run, "kill, crash_host, replace", "%s", "signals and the run's own namespaces");
    say(true, "pause", "%s",
        delegated  ? "the task's freezer cgroup, in the delegated one"
        : rootless ? "SIGSTOP of the task's process group (no freezer cgroup: a child in a "
                     "session of its own runs on)"
                   : "the task's freezer cgroup (SIGSTOP of its process group where there is "
                     "none)");
    say(true, "limit threads", "%s",
        rootless ? "the soft RLIMIT_NPROC of the host's processes (counted per host: each has "
                   "a user namespace of its own)"
                 : "the host's pids cgroup");
    say(true, "limit fds", "%s", "the soft RLIMIT_NOFILE of the host's processes");
    say(!rootless && cgroups, "limit memory", "%s",
        rootless ? "refused before the run: it needs a memory cgroup, which a run without root "
                   "has none of (run as root)"
                 : "the host's memory cgroup");
    say(libfiu, "disk (errors, short, delay)", "%s", libfiu ? "libfiu's preload" : "needs libfiu");
    say(fuse, "disk by path, unsynced: torn", "%s",
        fuse ? "the faultline filesystem" : "needs /dev/fuse open to this user (above)");
    char why[256];
    bool vc = fl_vclock_probe(why, sizeof why);
    say(vc, "clocks (clock_offset, ...)", "%s",
        vc ? "faultline's vDSO, for every program (a clock keeper traces the host's processes)"
           : why);
    say(ft, "clock_via: libc", "%s",
        ft ? "libfaketime and faultline's preload (dynamic programs only)" : "needs libfaketime");
    if (!can_run)
        printf("\nruns cannot start here: see the lines marked no above\n");
    return can_run ? 0 : 1;
}
