/*
 * reach.c: a fault that cannot reach its target says so.  Three things work
 * through LD_PRELOAD, by wrapping functions of the C library: `disk:` faults
 * (fl_fiu_preload.so and libfiu), a host's `clock_offset`/`clock_drift`
 * (fl_clock_preload.so and libfaketime) and the record of syncs that
 * `crash_host` with `unsynced: lose` rebuilds a disk from
 * (fl_sync_preload.so).  None of them reaches a statically linked program
 * or a Go program (harness/sys/exe_kind.c says why): the fault would do
 * nothing, silently, and a crash would throw away everything the program
 * wrote since the host started, as "never synced".
 *
 * So, for every task that one of them targets (a "source": the clock of
 * its host, a disk fault that covers it, a crash with unsynced: lose of its
 * host), the programs it runs are looked at:
 *   - when it starts: each command word of its expanded command (the first
 *     word, and the first after ;, &&, ||, |, &, (, exec, env, ...),
 *     resolved as the host sees it: in its root of its own, through its
 *     init's /proc/PID/root with symlinks kept inside it (openat2
 *     RESOLVE_IN_ROOT), so that a program the host put on its own layer
 *     (/usr/local/bin) is found and a machine's file it does not have is
 *     not; relative to its workdir, a bare name on PATH;
 *   - its live processes (those of the host's PID namespace whose
 *     FAULTLINE_JOB and FAULTLINE_TASK name the task) when a disk fault or
 *     a crash with unsynced: lose is about to fire on it, and when the run
 *     begins to stop (for the clock).
 * Each executable that a preload cannot enter gives one note per source
 * (fl_run_note: under the verdict, and runs.notes), e.g.
 *   fault 3 (f.yaml:9, disk ps1 call=write errno=EIO): /usr/bin/etcd on ps1
 *   is a Go binary: ...; the fault does nothing to it
 * and, for a crash with unsynced: lose (on a disk the faultline filesystem
 * does not serve: that one sees every program's syncs), marks its host so that the crash
 * leaves the disk as it was instead of rebuilding it from a record that
 * missed every sync (fl_durable_unseen, harness/faults/durable.c).  A
 * script is judged by nothing (its interpreter runs); a program started
 * some other way than by a command word (exec'd by a dynamic one) is seen
 * only alive.
 */
#include "harness/engine/engine_int.h"
#include "harness/faults/durable.h"
#include "harness/faults/kind.h"
#include "harness/sys/exe_kind.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_SRC 32

enum src_kind { SRC_CLOCK, SRC_DISK, SRC_SYNC };

struct src {
    enum src_kind kind;
    int fault; /* its index in r->faults; -1 for the clock */
};

/* ---- naming faults (also for schedule.c) ---------------------------------- */

/* What the fault hits, for people: the kind's own text, else its target as
 * written (a task, a host); a fault aimed by an event not come yet: its
 * value as written ("{event.node}").  Also for a run that is only a
 * schedule (runs --faults: r->s alone). */
void eng_target_of(const struct fl_run *r, const struct fl_scn_fault *f, char *buf, size_t len)
{
    const struct fl_scenario *s = r->s;
    const struct fl_scn_action *a = &f->action;
    const struct fl_fault_kind *k = fl_fault_kind_of(a);
    if (f->from_event)
        snprintf(buf, len, "%s", f->as_written ? f->as_written : "?");
    else if (k->target)
        k->target(r, a, buf, len);
    else if (a->target.kind == FL_SCN_TGT_TASK)
        fl_scn_task_name(s, a->target.task, buf, len);
    else if (a->target.host >= 0)
        snprintf(buf, len, "%s", s->hosts[a->target.host].name);
    else
        snprintf(buf, len, "%s", a->host >= 0 ? s->hosts[a->host].name : "?");
}

void eng_fault_target(const struct engine *e, const struct fl_scn_fault *f, char *buf, size_t len)
{
    eng_target_of(&e->r, f, buf, len);
}

void eng_fault_name(const struct engine *e, const struct fault_rt *fr, char *buf, size_t len)
{
    const struct fl_fault_kind *k = fl_fault_kind_of(&fr->f->action);
    char target[256], detail[512] = "";
    eng_fault_target(e, fr->f, target, sizeof target);
    if (k->detail)
        k->detail(&e->r, fr, detail, sizeof detail);
    snprintf(buf, len, "fault %d (%s:%d, %s %s%s%s)", fr->index + 1, e->r.s->path, fr->f->loc.line,
             k->name, target, detail[0] ? " " : "", detail);
}

/* What reaches the task only through a preload; only the fault `only` (its
 * index) when only >= 0. */
static size_t sources(const struct engine *e, int task, int only, struct src *out)
{
    const struct fl_run *r = &e->r;
    const struct fl_scn_host *h = &r->s->hosts[r->s->tasks[task].host];
    size_t n = 0;
    if (only < 0 && (h->clock_offset_ms || h->clock_drift_ppm) && h->clock_via == FL_SCN_CLOCK_LIBC)
        out[n++] = (struct src){SRC_CLOCK, -1};
    for (size_t i = 0; i < r->nfaults && n < MAX_SRC; i++) {
        const struct fl_scn_action *a = &r->faults[i].f->action;
        if (only >= 0 && (int)i != only)
            continue;
        if (a->kind == FL_SCN_ACT_DISK && !a->disk.fs && fl_fault_covers(r, &a->target, task))
            out[n++] = (struct src){SRC_DISK, (int)i};
        else if (a->kind == FL_SCN_ACT_CRASH_HOST && fl_scn_unsynced_lost(a->unsynced) &&
                 a->host == r->s->tasks[task].host && !r->hosts[a->host].disk_by_fs)
            out[n++] = (struct src){SRC_SYNC, (int)i};
    }
    return n;
}

/* Was (source, file) noted already?  Else remembers it.  The same program
 * is named by its command word at start and by its path alive. */
static bool seen(struct engine *e, const struct src *sc, const struct stat *sb)
{
    for (size_t i = 0; i < e->nreach; i++)
        if (e->reach[i].kind == (int)sc->kind && e->reach[i].fault == sc->fault &&
            e->reach[i].dev == sb->st_dev && e->reach[i].ino == sb->st_ino)
            return true;
    void *v = realloc(e->reach, (e->nreach + 1) * sizeof *e->reach);
    if (!v)
        return true;
    e->reach = v;
    e->reach[e->nreach++] = (struct reach_seen){(int)sc->kind, sc->fault, sb->st_dev, sb->st_ino};
    return false;
}

static void note(struct engine *e, int task, const struct src *sc, const char *exe,
                 enum fl_exe_kind k)
{
    struct fl_run *r = &e->r;
    int host = r->s->tasks[task].host;
    const char *hn = r->s->hosts[host].name;
    char who[768];
    if (sc->kind == SRC_CLOCK) {
        const struct fl_scn_host *h = &r->s->hosts[host];
        snprintf(who, sizeof who, "host %s's %s (%s:%d)", hn,
                 h->clock_offset_ms ? "clock_offset" : "clock_drift", r->s->path, h->loc.line);
    } else {
        eng_fault_name(e, &r->faults[sc->fault], who, sizeof who);
    }
    const char *effect = sc->kind == SRC_CLOCK ? "its clock is the machine's"
                         : sc->kind == SRC_DISK
                             ? "the fault does nothing to it (a disk fault by path: reaches it)"
                             : "its syncs are not seen, so the crash leaves the disk as it was "
                               "(nothing lost); disk: {fs: true} on the host has the faultline "
                               "filesystem see them";
    fl_run_note(r, "%s: %s on %s %s; %s", who, exe, hn, fl_exe_kind_why(k), effect);
    if (sc->kind == SRC_SYNC) {
        char why[PATH_MAX + 64];
        snprintf(why, sizeof why, "%s on %s %s", exe, hn,
                 k == FL_EXE_GO ? "is a Go binary" : "is statically linked");
        fl_durable_unseen(r, host, why);
    }
}

/* exe (as the host names it) is the file open at fd. */
static void note_all(struct engine *e, int task, int only, const char *exe, int fd)
{
    struct stat sb;
    if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode))
        return;
    enum fl_exe_kind k = fl_exe_kind_fd(fd);
    if (k != FL_EXE_STATIC && k != FL_EXE_GO)
        return;
    struct src sc[MAX_SRC];
    size_t n = sources(e, task, only, sc);
    for (size_t i = 0; i < n; i++)
        if (!seen(e, &sc[i], &sb))
            note(e, task, &sc[i], exe, k);
}

/* ---- at start: the command's words ---------------------------------------- */

/* The host's own root (its init's), for openat2: an O_PATH fd, or -1 when
 * the host is down. */
static int host_root(const struct fl_run *r, int host)
{
    const struct fl_host *h = &r->hosts[host].h;
    if (h->state != FL_HOST_UP)
        return -1;
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/root", (int)h->pid);
    return open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
}

/* path (absolute, as the host sees it) opened in the host's root, symlinks
 * and ".." kept inside it: an fd, or -1. */
static int open_in_root(int root, const char *path)
{
    struct open_how how = {.flags = O_RDONLY | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT};
    return (int)syscall(SYS_openat2, root, path, &how, sizeof how);
}

/* A command word as the host finds it: a path (relative ones from its
 * workdir) or a bare name on PATH (the harness's: tasks inherit it), an
 * executable regular file.  Its fd, or -1. */
static int open_command(const struct fl_run *r, int root, const char *w)
{
    char p[PATH_MAX * 2];
    if (strchr(w, '/')) {
        if (w[0] == '/')
            snprintf(p, sizeof p, "%s", w);
        else
            snprintf(p, sizeof p, "%s/%s", r->s->workdir, w);
        return open_in_root(root, p);
    }
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        size_t k = strcspn(path, ":");
        if (k) {
            snprintf(p, sizeof p, "%.*s/%s", (int)k, path, w);
            int fd = open_in_root(root, p);
            struct stat sb;
            if (fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && (sb.st_mode & 0111))
                return fd;
            if (fd >= 0)
                close(fd);
        }
        path += k + (path[k] == ':');
    }
    return -1;
}

static bool is_separator(const char *w)
{
    static const char *const seps[] = {";",    "&&",    "||",    "|",     "&",    "(",     "{",
                                       "then", "do",    "else",  "exec",  "env",  "time",  "!",
                                       "if",   "nohup", "while", "until", "elif", "setsid"};
    for (size_t i = 0; i < sizeof seps / sizeof *seps; i++)
        if (!strcmp(w, seps[i]))
            return true;
    return false;
}

static void hook_task_started(struct fl_run *r, int task, const char *cmd)
{
    struct engine *e = (struct engine *)((char *)r - offsetof(struct engine, r));
    struct src sc[MAX_SRC];
    if (!sources(e, task, -1, sc))
        return;
    int host = r->s->tasks[task].host;
    int root = host_root(r, host);
    char *copy = strdup(cmd);
    if (root < 0 || !copy) {
        free(copy);
        if (root >= 0)
            close(root);
        return;
    }
    bool at_cmd = true;
    for (char *save = NULL, *w = strtok_r(copy, " \t\n", &save); w;
         w = strtok_r(NULL, " \t\n", &save)) {
        bool ends = false;
        while (*w == '(' || *w == '{')
            w++;
        size_t n = strlen(w);
        while (n && strchr(";&|)}", w[n - 1])) {
            w[--n] = 0;
            ends = true;
        }
        if (!*w || is_separator(w)) {
            at_cmd = true;
            continue;
        }
        size_t nl = strspn(w, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_0123456789");
        bool assignment = nl > 0 && w[nl] == '=' && !(w[0] >= '0' && w[0] <= '9');
        if (at_cmd && !assignment && w[0] != '-' && w[0] != '$' && w[0] != '"' && w[0] != '\'') {
            int fd = open_command(r, root, w);
            if (fd >= 0) {
                note_all(e, task, -1, w, fd);
                close(fd);
            }
        }
        at_cmd = ends || (at_cmd && assignment);
    }
    free(copy);
    close(root);
}

/* ---- alive: the host's processes ------------------------------------------ */

struct scan {
    struct engine *e;
    int host;
    int only; /* a fault's index, or -1: every source */
};

static void scan_one(void *ctx, pid_t pid)
{
    struct scan *sc = ctx;
    const struct fl_scenario *s = sc->e->r.s;
    char job[128], idx[32], exe[PATH_MAX];
    if (!fl_proc_env(pid, "FAULTLINE_JOB", job, sizeof job) ||
        !fl_proc_env(pid, "FAULTLINE_TASK", idx, sizeof idx))
        return; /* not a task's (faultline exec): no preload is promised */
    int j = fl_scn_job_find(s, job), task = -1;
    for (size_t t = 0; j >= 0 && t < s->n_tasks; t++)
        if (s->tasks[t].job == j && s->tasks[t].index == atoi(idx) && s->tasks[t].host == sc->host)
            task = (int)t;
    if (task < 0)
        return;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
    ssize_t n = readlink(path, exe, sizeof exe - 1);
    if (n <= 0)
        return;
    exe[n] = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        note_all(sc->e, task, sc->only, exe, fd);
        close(fd);
    }
}

static void scan_host(struct engine *e, int host, int only)
{
    const struct host_rt *hr = &e->r.hosts[host];
    if (hr->h.state != FL_HOST_UP || hr->h.pid <= 0)
        return;
    struct scan sc = {e, host, only};
    fl_proc_scan_ns(hr->h.pid, scan_one, &sc);
}

void eng_reach_before_fire(struct engine *e, const struct fault_rt *fr)
{
    const struct fl_scn_action *a = &fr->f->action;
    int idx = (int)(fr - e->r.faults);
    if (a->kind == FL_SCN_ACT_CRASH_HOST && fl_scn_unsynced_lost(a->unsynced) && a->host >= 0) {
        scan_host(e, a->host, idx);
    } else if (a->kind == FL_SCN_ACT_DISK) {
        bool *done = calloc(e->r.s->n_hosts, sizeof *done);
        for (size_t t = 0; done && t < e->r.s->n_tasks; t++) {
            int h = e->r.s->tasks[t].host;
            if (!done[h] && fl_fault_covers(&e->r, &a->target, (int)t)) {
                done[h] = true;
                scan_host(e, h, idx);
            }
        }
        free(done);
    }
}

void eng_reach_at_stop(struct engine *e)
{
    const struct fl_scenario *s = e->r.s;
    for (size_t h = 0; h < s->n_hosts; h++) {
        bool any = false;
        struct src sc[MAX_SRC];
        for (size_t t = 0; t < s->n_tasks && !any; t++)
            any = s->tasks[t].host == (int)h && sources(e, (int)t, -1, sc) > 0;
        if (any)
            scan_host(e, (int)h, -1);
    }
}

void eng_reach_init(struct engine *e)
{
    e->r.task_started = hook_task_started;
}

void eng_reach_free(struct engine *e)
{
    free(e->reach);
    e->reach = NULL;
    e->nreach = 0;
}
