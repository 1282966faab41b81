/*
 * gc.c: `faultline gc`: remove what runs whose harness is gone left behind.
 *
 * A run is dead when its state file says "running" but the harness pid in it
 * is gone or now belongs to another process (start times differ).  Most of a
 * dead run has already vanished with the harness (its mount namespace, every
 * host init through PDEATHSIG and the anchor pipe, so every namespace and
 * process), but gc does not rely on that: it kills any recorded init or
 * switch holder still alive with its recorded start time, and any process
 * whose environment names the run (FAULTLINE_RUN), removes the run's cgroups
 * (pids and freezer; a paused task's processes outlive the harness, frozen,
 * until their cgroup is thawed: removal kills, then thaws, then removes),
 * unmounts and removes the run's disks (everything in the run directory
 * but its logs, scenario copy, etc-hosts and state file: the evidence,
 * small, which the database's processes.log_path and the report point at;
 * the state file then says "killed", so a later gc leaves the directory and
 * `gc --all` removes it), and marks the run 'error: harness killed
 * (faultline gc DATE: logs kept, disks removed)' with runs.gc_at in the
 * database its state file names (a run recorded with --no-db names none,
 * and has no row to mark).  A run recorded as passed was removing its
 * directory when its harness died: gc removes it whole, as it would have.
 * Cgroups under faultline/ (in the pids, freezer and memory hierarchies) whose
 * run is not alive are removed too: judged by the run's state file when the
 * run is under this --out, otherwise by the harness that the run's cgroup
 * names (see cgroup.c), so a gc never takes another --out's live run for
 * dead, even while none of its processes is up.  Last, when no run is alive
 * (nothing holds the runs lock, see shared_leftovers.c), the workdirs that
 * faultline made (the default one and those of the runs collected) and the
 * empty faultline/ parent cgroups are removed.
 *
 * A run's directory (its state file included) may be writable by its hosts'
 * tasks, so gc trusts nothing in it (issue 21): the run id is the
 * directory's name; every pid is checked to be the run's (start time,
 * namespaces, its name or environment, no live harness above it: see
 * run_owned.c) and signalled through a pidfd; every cgroup must be exactly
 * <faultline root>/<run_id>; a run that a live harness owns (its processes
 * descend from it, or its cgroups' owner mark names it) is left whole; files
 * are removed without following symlinks (rundir.c).
 */
#include "harness/sys/cgroup.h"
#include "harness/cli/cli.h"
#include "harness/record/recorder.h"
#include "harness/sys/rundir.h"
#include "harness/sys/host.h"
#include "harness/sys/run_owned.h"
#include "harness/scenario/scenario.h"
#include "harness/sys/shared_leftovers.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

/* Kills every process of the run found by its environment
 * (FAULTLINE_RUN=<run_id>), each only when run_owned.c finds it the run's (on
 * a host, no live harness above it) and through a pidfd; *live (may be
 * NULL: this is only a look, which says nothing) counts those a live
 * faultline harness is above (the run is alive, under another --out). */
static int kill_run_processes(const char *run_id, bool dry, int *live)
{
    char want[128];
    int n = snprintf(want, sizeof want, "FAULTLINE_RUN=%s", run_id);
    int killed = 0;
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        int pid = atoi(e->d_name);
        if (pid <= 1 || pid == getpid())
            continue;
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/environ", pid);
        char *env;
        size_t len;
        if (fl_read_file(path, &env, &len) < 0)
            continue;
        bool named = false;
        for (size_t off = 0; off < len && !named; off += strlen(env + off) + 1)
            named = !strncmp(env + off, want, (size_t)n) && env[off + (size_t)n] == 0;
        free(env);
        if (!named)
            continue;
        if (fl_owned_under_live_harness(pid)) {
            if (live)
                (*live)++;
            continue;
        }
        char why[256];
        int fd =
            fl_owned_pidfd(pid, fl_proc_starttime(pid), FL_OWNED_TASK, run_id, why, sizeof why);
        if (fd == -EPERM && !live) /* live: only looking */
            printf("  not killing process %d: %s\n", pid, why);
        if (fd < 0)
            continue;
        if (!dry)
            syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0);
        close(fd);
        killed++;
    }
    closedir(d);
    return killed;
}

/* Is the run's cgroup (under any of faultline's roots) owned by a live
 * harness (its owner mark, see cgroup.c)?  A cgroup the run's own state
 * file cannot speak for: hosts cannot write it. */
static bool owner_alive(const char *run_id)
{
    char roots[3][PATH_MAX];
    int nr = fl_cgroup_roots(roots);
    for (int i = 0; i < nr; i++) {
        char path[PATH_MAX];
        pid_t owner;
        unsigned long long start;
        snprintf(path, sizeof path, "%s/%s", roots[i], run_id);
        if (fl_cgroup_owner(path, &owner, &start) == 0 && fl_pid_alive(owner, start))
            return true;
    }
    return false;
}

/* The workdirs of the dead runs collected, removed at the end when no run
 * is alive (see shared_leftovers.c). */
static char *dead_workdirs[64];
static size_t n_dead_workdirs;

static void note_workdir(const char *w)
{
    if (!w[0])
        return;
    for (size_t i = 0; i < n_dead_workdirs; i++)
        if (!strcmp(dead_workdirs[i], w))
            return;
    if (n_dead_workdirs < sizeof dead_workdirs / sizeof *dead_workdirs)
        dead_workdirs[n_dead_workdirs++] = strdup(w);
}

/* When no run is alive: the workdirs faultline made (the default one and
 * those of the runs collected) and the empty faultline/ parent cgroups. */
static void collect_shared(bool dry)
{
    note_workdir(FL_SCN_DEFAULT_WORKDIR);
    int fd = dry ? -1 : fl_runs_lock(true);
    for (size_t i = 0; i < n_dead_workdirs; i++) {
        if (fd >= 0 && fl_workdir_remove(dead_workdirs[i]) > 0)
            printf("removed workdir %s (made by faultline, empty)\n", dead_workdirs[i]);
        free(dead_workdirs[i]);
    }
    n_dead_workdirs = 0;
    if (fd >= 0) {
        fl_cgroup_parents_remove();
        fl_runs_lock_release(fd, true);
    }
}

/* Signals a pid the state file names, when it is what it claims to be
 * (run_owned.c); says why not otherwise. */
static void kill_recorded(const struct fl_state *st, pid_t pid, unsigned long long start,
                          enum fl_owned_kind kind, const char *what, bool dry)
{
    if (pid <= 0)
        return;
    char why[256];
    int fd = fl_owned_pidfd(pid, start, kind, st->run_id, why, sizeof why);
    if (fd == -EPERM)
        printf("  not killing %s %d: %s\n", what, (int)pid, why);
    if (fd < 0)
        return;
    if (!dry)
        syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0);
    close(fd);
}

/* The workdir a state file names, if it is one faultline may have made: an
 * absolute path without "." or ".." components (fl_workdir_remove then
 * removes only empty directories up to faultline's mark). */
static bool plain_abs_path(const char *p)
{
    if (p[0] != '/')
        return false;
    for (const char *c = p; (c = strchr(c, '/')); c++)
        if (!strncmp(c, "/./", 3) || !strcmp(c, "/.") || !strncmp(c, "/../", 4) ||
            !strcmp(c, "/.."))
            return false;
    return true;
}

static void collect_run(const char *dir, const struct fl_state *st, bool dry, int *count)
{
    /* another live run's, under another --out, whatever this state file
     * says: its processes descend from its harness, its cgroups name it */
    int live = 0;
    kill_run_processes(st->run_id, true, &live);
    if (live || owner_alive(st->run_id)) {
        printf("leaving run %s in %s: its state file says its harness is gone, but a live "
               "faultline harness owns %s\n",
               st->run_id, dir, live ? "processes of it" : "its cgroup");
        return;
    }
    if (plain_abs_path(st->workdir))
        note_workdir(st->workdir);
    printf("%s run %s (%s %s), harness pid %d gone\n", dry ? "would remove" : "removing",
           st->run_id, st->scenario, st->variant, (int)st->harness_pid);
    for (size_t i = 0; i < st->nhosts; i++) {
        char what[128];
        snprintf(what, sizeof what, "host %s's init", st->hosts[i].name);
        kill_recorded(st, st->hosts[i].pid, st->hosts[i].starttime, FL_OWNED_INIT, what, dry);
    }
    kill_recorded(st, st->switch_pid, st->switch_start, FL_OWNED_SWITCH, "the switch", dry);
    int k = kill_run_processes(st->run_id, dry, NULL);
    if (k)
        printf("  %s %d process%s\n", dry ? "would kill" : "killed", k, k == 1 ? "" : "es");
    for (size_t i = 0; i < st->ncgroups; i++) {
        char why[PATH_MAX + 128];
        if (fl_owned_cgroup(st->cgroups[i], st->run_id, why, sizeof why) < 0) {
            printf("  not removing cgroup %s: %s\n", st->cgroups[i], why);
            continue;
        }
        printf("  %s cgroup %s\n", dry ? "would remove" : "removing", st->cgroups[i]);
        if (!dry) {
            int rc = fl_cgroup_remove_run(st->cgroups[i]);
            if (rc < 0 && rc != -ENOENT)
                fprintf(stderr, "faultline gc: rmdir %s: %s\n", st->cgroups[i], strerror(-rc));
        }
    }
    /* A run whose harness was killed after it had passed was removing its
     * directory (a passing run keeps nothing): that is finished.  Any other
     * keeps its evidence (logs, scenario, state), which the database and
     * the report point at, and loses its disks. */
    char verdict[16] = "";
    struct fl_rec *rec = NULL;
    char err[512];
    /* the database the state file names, only if it is one that records
     * this run (never one created, nor another file migrated, at a path a
     * host wrote there) */
    bool has_row = st->db[0] && fl_rec_db_has_run(st->db, st->run_id);
    if (st->db[0] && !has_row)
        printf("  not marking it in %s: not a faultline database that records it\n", st->db);
    if (has_row && fl_rec_open(&rec, st->db, NULL, err, sizeof err) == 0 &&
        fl_rec_run_verdict(rec, st->run_id, verdict, sizeof verdict) < 0)
        verdict[0] = 0;
    if (!strcmp(verdict, "pass")) {
        printf("  %s its directory (it had passed: nothing to keep)\n",
               dry ? "would remove" : "removing");
        int rc = dry ? 0 : fl_rm_rf(dir);
        if (rc < 0)
            fprintf(stderr, "faultline gc: rm -rf %s: %s\n", dir, strerror(-rc));
    } else {
        printf("  %s its disks; its logs stay in %s/logs\n", dry ? "would remove" : "removing",
               dir);
    }
    if (!dry && strcmp(verdict, "pass")) {
        size_t n;
        int rc = fl_rundir_strip(dir, &n);
        if (rc < 0)
            fprintf(stderr, "faultline gc: removing the disks of %s: %s\n", dir, strerror(-rc));
        /* not running any more: a later gc leaves it, gc --all removes it */
        struct fl_state done = *st;
        snprintf(done.status, sizeof done.status, "killed");
        if ((rc = fl_state_write(dir, &done)) < 0)
            fprintf(stderr, "faultline gc: %s/state: %s\n", dir, strerror(-rc));
    }
    if (!dry && rec) {
        time_t now = time(NULL);
        struct tm tm;
        char when[32] = "", reason[128];
        if (localtime_r(&now, &tm))
            strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
        snprintf(reason, sizeof reason,
                 "harness killed (faultline gc %s: logs kept, disks removed)", when);
        fl_rec_mark_abandoned(rec, st->run_id, reason);
        fl_rec_mark_collected(rec, st->run_id, (int64_t)now * 1000);
    }
    if (rec)
        fl_rec_close(rec);
    (*count)++;
}

/* Cgroups under root (a faultline/ directory) of runs that are not alive
 * (their run dir is gone or dead). */
static void collect_cgroups(const char *root, const char *runs_dir, bool dry, int *count)
{
    DIR *d = opendir(root);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_type != DT_DIR || e->d_name[0] == '.')
            continue;
        char rundir[PATH_MAX], path[PATH_MAX];
        snprintf(rundir, sizeof rundir, "%s/%s", runs_dir, e->d_name);
        snprintf(path, sizeof path, "%s/%s", root, e->d_name);
        struct fl_state st;
        bool alive = false;
        pid_t owner;
        unsigned long long owner_start;
        bool marked = fl_cgroup_owner(path, &owner, &owner_start) == 0;
        if (marked && fl_pid_alive(owner, owner_start)) {
            alive = true; /* its harness lives, whatever a state file says */
        } else if (fl_state_read(rundir, &st) == 0) {
            alive = !strcmp(st.status, "running") && fl_pid_alive(st.harness_pid, st.harness_start);
            /* a dry run leaves a dead run's directory, whose cgroups it has
             * listed already */
            for (size_t i = 0; dry && !alive && i < st.ncgroups; i++)
                if (!strcmp(st.cgroups[i], path))
                    alive = true;
            fl_state_free(&st);
        } else if (!marked) {
            /* no owner mark (an older faultline): only remove when no
             * process names the run */
            int live = 0;
            alive = kill_run_processes(e->d_name, true, &live) > 0 || live > 0;
        }
        if (alive)
            continue;
        printf("%s stale cgroup %s\n", dry ? "would remove" : "removing", path);
        if (!dry) {
            int rc = fl_cgroup_remove_run(path);
            if (rc < 0 && rc != -ENOENT)
                fprintf(stderr, "faultline gc: rmdir %s: %s\n", path, strerror(-rc));
        }
        (*count)++;
    }
    closedir(d);
}

const char fl_cli_gc_usage[] =
    "usage: faultline gc [--out DIR] [--all] [--dry-run]\n"
    "\n"
    "Finds runs whose faultline process is gone (killed, crashed) and removes what\n"
    "they left: processes (host inits, the switch), cgroups, mounts, and the run's\n"
    "disks; it keeps the run's logs (OUT/runs/RUN/logs, where the database's\n"
    "processes.log_path points), scenario copy and state file, and marks the run\n"
    "'error: harness killed (faultline gc DATE: logs kept, disks removed)' in the\n"
    "database it was recorded in (named in its state file; runs.gc_at). A run\n"
    "that had passed already is removed whole. Runs still going are left alone.\n"
    "It trusts nothing a host may have written in a run's directory: a process\n"
    "is killed only when it is the run's (recorded start time, a host's init or\n"
    "the run's switch or task, no live faultline above it), a cgroup removed only\n"
    "when it is faultline/RUN under faultline's own roots; it says what it left.\n"
    "When no run is alive on the machine, it also removes the workdirs faultline\n"
    "made (the default /srv/faultline, and those of the runs it collected) and\n"
    "the empty faultline/ parent cgroups, as the last run to end does.\n"
    "  --out DIR   where run directories are (default out; runs in DIR/runs)\n"
    "  --all       also remove the kept directories of finished runs (and the\n"
    "              logs gc kept of killed ones)\n"
    "  --dry-run   only say what would be removed\n";

int fl_cli_gc(int argc, char **argv)
{
    const char *out = "out";
    bool all = false, dry = false;
    static const struct option opts[] = {{"out", required_argument, 0, 'o'},
                                         {"all", no_argument, 0, 'a'},
                                         {"dry-run", no_argument, 0, 'n'},
                                         {0, 0, 0, 0}};
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
        switch (ch) {
        case 'o': out = optarg; break;
        case 'a': all = true; break;
        case 'n': dry = true; break;
        default: fputs(fl_cli_gc_usage, stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "faultline gc: unexpected argument '%s' (gc takes only options)\n",
                argv[optind]);
        fputs(fl_cli_gc_usage, stderr);
        return 2;
    }
    char runs[PATH_MAX];
    snprintf(runs, sizeof runs, "%s/runs", out);
    int count = 0;
    DIR *d = opendir(runs);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.')
                continue;
            char dir[PATH_MAX];
            snprintf(dir, sizeof dir, "%s/%s", runs, e->d_name);
            struct stat lsb;
            if (lstat(dir, &lsb) < 0 || !S_ISDIR(lsb.st_mode) || !fl_owned_run_id_ok(e->d_name))
                continue; /* not a run's directory (a symlink, say): not followed */
            struct fl_state st;
            if (fl_state_read(dir, &st) < 0) {
                /* killed before its state file was written: only if old */
                struct stat sb;
                if (stat(dir, &sb) == 0 && time(NULL) - sb.st_mtime > 60) {
                    printf("%s incomplete run directory %s\n", dry ? "would remove" : "removing",
                           dir);
                    if (!dry)
                        fl_rm_rf(dir);
                    count++;
                }
                continue;
            }
            /* the run is the directory's: its name is the run id faultline
             * gave it, whatever the (writable) state file says */
            if (strcmp(st.run_id, e->d_name))
                printf("run directory %s: its state file names run '%.64s': taken as run %s\n", dir,
                       st.run_id, e->d_name);
            snprintf(st.run_id, sizeof st.run_id, "%s", e->d_name);
            bool running = !strcmp(st.status, "running");
            if (running && !fl_pid_alive(st.harness_pid, st.harness_start))
                collect_run(dir, &st, dry, &count);
            else if (!running && all) {
                printf("%s finished run directory %s\n", dry ? "would remove" : "removing", dir);
                if (!dry)
                    fl_rm_rf(dir);
                count++;
            }
            fl_state_free(&st);
        }
        closedir(d);
    }
    /* the pids hierarchy, and the freezer one when it is another (v1) */
    char root[PATH_MAX], froot[PATH_MAX];
    bool pids = fl_cgroup_root(root, sizeof root) > 0;
    if (pids)
        collect_cgroups(root, runs, dry, &count);
    if (fl_cgroup_freezer_root(froot, sizeof froot) > 0 && !(pids && !strcmp(root, froot)))
        collect_cgroups(froot, runs, dry, &count);
    char mroot[PATH_MAX];
    if (fl_cgroup_memory_root(mroot, sizeof mroot) == 1) /* v1: a hierarchy of its own */
        collect_cgroups(mroot, runs, dry, &count);
    collect_shared(dry);
    if (count == 0)
        printf("nothing to remove\n");
    return 0;
}
