/*
 * faults/disk.c: the `disk:` fault kind at run time: a libfiu failure point
 * (a call of libfiu's POSIX preload, posix/io/rw/write, or a point a program
 * names itself, psrt/save/shard_write) enabled in every process of the
 * target's tasks, failing with the fault's errno; or, for `delay:` and
 * `short:`, fl_fiu_preload.so's own point faultline/delay/CALL or
 * faultline/short/CALL, whose failinfo is the delay (microseconds) or the
 * length a write is cut to (see harness/tools/fl_fiu_preload.c).
 *
 * Only a run with a disk fault preloads anything, and only into the tasks its
 * disk faults target: their processes start with LD_PRELOAD of
 * fl_fiu_preload.so (libfiu's remote control and the state file, see
 * harness/tools/fl_fiu_preload.c) and, when a `call:` fault targets the task,
 * libfiu's fiu_posix_preload.so.  Each task has a directory per host
 * generation, RUN/fiu/HOST.GEN/JOB.INDEX/, holding `state` (the current
 * enable/disable line of each failure point of the task) and one fifo pair
 * c-PID.in/.out per live process (PID as the host's PID namespace numbers
 * it; a new host generation is a new PID namespace, hence the directory).
 *
 * Applying or healing a fault: recompute the state of every task it covers
 * (per point, the most recently applied fault that is on wins, else
 * "disable"), write it (rename: atomic), then send the same lines to every
 * process listening on a fifo of the task's directory (fiu_ctl.c).  A fifo
 * nobody reads is retried for a moment while its process lives (just
 * starting); one whose process is gone is removed.  A paused task's
 * processes get the commands without waiting for their replies (they take
 * them when thawed; fiu_ctl.h, timeout 0).
 *
 * States of a fault here: off (on[i] == 0) -> on (on[i] = order it was
 * applied in) -> off (healed).  Invariant: after apply/heal returns, every
 * state file equals the state computed from on[], and every process that
 * answered has it.
 */
#include "harness/engine/engine_int.h"
#include "harness/sys/fiu_ctl.h"
#include "harness/tools/fl_fiu_preload.h"
#include "harness/sys/rundir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define POSIX_PRELOAD "/usr/lib/fiu/fiu_posix_preload.so"
#define CTL_TIMEOUT_MS 1000     /* a process that opened a session must answer by then */
#define LISTEN_WAIT_MS 300      /* a live process not reading its fifo: retried this long */

struct fl_disk {
    bool *targeted;             /* per task: a disk fault of the run covers it */
    bool *posix;                /* per task: a call: fault covers it (POSIX preload) */
    long long *on;              /* per engine fault: 0 off, else the order it was applied in */
    long long seq;
    bool any_probability;
    char preload[PATH_MAX];     /* fl_fiu_preload.so */
    int *keep;                  /* fds of sessions that timed out (fiu_ctl.h) */
    size_t nkeep;
    struct owed {               /* a fifo base whose process owes late replies */
        char *base;
        int n;
    } *owed;
    size_t nowed;
};

/* The count of late replies BASE's process owes (fiu_ctl.h), kept per base. */
static int *owed_of(struct fl_disk *d, const char *base)
{
    for (size_t i = 0; i < d->nowed; i++)
        if (strcmp(d->owed[i].base, base) == 0)
            return &d->owed[i].n;
    struct owed *o = realloc(d->owed, (d->nowed + 1) * sizeof *o);
    char *b = strdup(base);
    if (!o || !b)
        abort();
    d->owed = o;
    d->owed[d->nowed] = (struct owed){.base = b};
    return &d->owed[d->nowed++].n;
}

/* failinfo of the fault's point: errno, delay in us, or short length
 * (FL_FIU_SHORT_PPM | ppm for a fraction, as fl_fiu_preload.c reads it) */
static unsigned long long failinfo(const struct fl_scn_disk *dk)
{
    if (dk->delay_us)
        return (unsigned long long)dk->delay_us;
    if (dk->short_ppm)
        return FL_FIU_SHORT_PPM | dk->short_ppm;
    if (dk->short_bytes)
        return dk->short_bytes;
    return (unsigned long long)dk->err;
}

static bool covers(const struct engine *e, const struct fault_rt *fr, int task)
{
    const struct fl_scn_action *a = &fr->f->action;
    if (a->kind != FL_SCN_ACT_DISK)
        return false;
    return a->target.kind == FL_SCN_TGT_TASK ? a->target.task == task
                                             : e->s->tasks[task].host == a->target.host;
}

static int copy_file(const char *from, const char *to)
{
    char dir[PATH_MAX], buf[65536];
    snprintf(dir, sizeof dir, "%s", to);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;
    int rc = fl_mkdir_p(dir, 0755);
    if (rc < 0)
        return rc;
    int in = open(from, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return -errno;
    int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
    if (out < 0) {
        rc = -errno;
        close(in);
        return rc;
    }
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0)
        if (write(out, buf, (size_t)n) != n) {
            rc = -EIO;
            break;
        }
    if (n < 0)
        rc = -errno;
    close(in);
    if (close(out) < 0 && rc == 0)
        rc = -errno;
    return rc;
}

int fl_disk_init(struct engine *e, char *err, size_t errlen)
{
    const struct fl_scenario *s = e->s;
    bool any = false;
    for (size_t i = 0; i < e->nfaults; i++)
        any |= e->faults[i].f->action.kind == FL_SCN_ACT_DISK;
    if (!any)
        return 0;
    struct fl_disk *d = calloc(1, sizeof *d);
    d->targeted = calloc(s->n_tasks, sizeof *d->targeted);
    d->posix = calloc(s->n_tasks, sizeof *d->posix);
    d->on = calloc(e->nfaults, sizeof *d->on);
    e->disk = d;
    for (size_t i = 0; i < e->nfaults; i++) {
        const struct fl_scn_disk *dk = &e->faults[i].f->action.disk;
        for (size_t t = 0; t < s->n_tasks; t++)
            if (covers(e, &e->faults[i], (int)t)) {
                d->targeted[t] = true;
                d->posix[t] |= dk->call[0] != 0 && !dk->delay_us && !dk->short_bytes && !dk->short_ppm;
                d->any_probability |= dk->probability < 1;
            }
    }
    const char *cands[] = {"%s/../lib/fl_fiu_preload.so", "%s/../lib/faultline/fl_fiu_preload.so"};
    for (size_t i = 0; i < 2 && !d->preload[0]; i++) {
        char p[PATH_MAX], *r;
        snprintf(p, sizeof p, cands[i], e->o->bin_dir ? e->o->bin_dir : ".");
        if ((r = realpath(p, NULL))) {
            snprintf(d->preload, sizeof d->preload, "%s", r);
            free(r);
        }
    }
    if (!d->preload[0]) {
        snprintf(err, errlen, "disk faults need fl_fiu_preload.so next to faultline (%s/../lib/): not found; run make",
                 e->o->bin_dir ? e->o->bin_dir : ".");
        return -ENOENT;
    }
    /* The library where every host sees it (build/lib may lie under /tmp,
     * which each host has its own of): the run directory. */
    char copy[PATH_MAX];
    snprintf(copy, sizeof copy, "%s/fiu/fl_fiu_preload.so", e->dir);
    int rc = copy_file(d->preload, copy);
    if (rc < 0) {
        snprintf(err, errlen, "copy %s to %s: %s", d->preload, copy, strerror(-rc));
        return rc;
    }
    snprintf(d->preload, sizeof d->preload, "%s", copy);
    for (size_t t = 0; t < s->n_tasks; t++)
        if (d->posix[t] && access(POSIX_PRELOAD, R_OK) != 0) {
            snprintf(err, errlen, "disk faults with call: need libfiu's %s (Debian package libfiu0): %s",
                     POSIX_PRELOAD, strerror(errno));
            return -ENOENT;
        }
    return 0;
}

void fl_disk_free(struct engine *e)
{
    struct fl_disk *d = e->disk;
    if (!d)
        return;
    for (size_t i = 0; i < d->nkeep; i++)
        close(d->keep[i]);
    free(d->keep);
    for (size_t i = 0; i < d->nowed; i++)
        free(d->owed[i].base);
    free(d->owed);
    free(d->targeted);
    free(d->posix);
    free(d->on);
    free(d);
    e->disk = NULL;
}

static void task_dir(const struct engine *e, int task, char *buf, size_t len)
{
    const struct fl_scn_task *t = &e->s->tasks[task];
    snprintf(buf, len, "%s/fiu/%s.%d/%s.%d", e->dir, e->s->hosts[t->host].name,
             e->hosts[t->host].h.generation, e->s->jobs[t->job].name, t->index);
}

/* The task's current command lines, one per failure point; returns the count. */
static size_t task_state(const struct engine *e, int task, char lines[][192], size_t max)
{
    const struct fl_disk *d = e->disk;
    size_t n = 0;
    for (size_t i = 0; i < e->nfaults && n < max; i++) {
        if (!covers(e, &e->faults[i], task))
            continue;
        const char *point = e->faults[i].f->action.disk.point;
        bool seen = false;      /* this point has a line already */
        for (size_t j = 0; j < i; j++)
            seen |= covers(e, &e->faults[j], task) &&
                    strcmp(e->faults[j].f->action.disk.point, point) == 0;
        if (seen)
            continue;
        const struct fl_scn_disk *win = NULL;
        long long best = 0;
        for (size_t j = i; j < e->nfaults; j++)
            if (d->on[j] > best && covers(e, &e->faults[j], task) &&
                strcmp(e->faults[j].f->action.disk.point, point) == 0) {
                best = d->on[j];
                win = &e->faults[j].f->action.disk;
            }
        if (!win)
            snprintf(lines[n++], 192, "disable name=%s", point);
        else if (win->probability < 1)
            snprintf(lines[n++], 192, "enable_random name=%s,failnum=1,failinfo=%llu,probability=%.6f",
                     point, failinfo(win), win->probability);
        else
            snprintf(lines[n++], 192, "enable name=%s,failnum=1,failinfo=%llu", point, failinfo(win));
    }
    return n;
}

#define MAX_POINTS 64

static int write_state(const char *dir, char lines[][192], size_t n)
{
    char path[PATH_MAX], tmp[PATH_MAX];
    int rc = fl_mkdir_p(dir, 0755);
    if (rc < 0)
        return rc;
    snprintf(path, sizeof path, "%s/state", dir);
    snprintf(tmp, sizeof tmp, "%s/state.tmp", dir);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -errno;
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s\n", lines[i]);
    if (fclose(f) != 0 || rename(tmp, path) < 0)
        return -errno;
    return 0;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {0, (long)ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* Sends the lines to every process listening in the task's directory.
 * Returns the number of processes that took them, or -errno (err filled)
 * when one accepted a session and then failed to answer. */
static int broadcast(struct engine *e, int task, const char *dir, char lines[][192], size_t n,
                     char *err, size_t errlen)
{
    struct fl_disk *d = e->disk;
    const char *cmds[MAX_POINTS];
    int replies[MAX_POINTS];
    for (size_t i = 0; i < n; i++)
        cmds[i] = lines[i];
    DIR *dp = opendir(dir);
    if (!dp)
        return 0;               /* no process of the task started yet */
    int done = 0, rc = 0;
    struct dirent *de;
    pid_t init = e->hosts[e->s->tasks[task].host].h.pid;
    /* paused (frozen, or stopped by a signal): its processes cannot answer
     * now; each takes the commands from its fifo first thing when it runs
     * again (fl_fiu_preload.so holds the fifos open) */
    const struct task_rt *tr = &e->tasks[task];
    bool paused = tr->frozen || (tr->cur && tr->cur->running && tr->cur->stopped);
    while ((de = readdir(dp))) {
        int pid, len = 0;
        if (sscanf(de->d_name, "c-%d.in%n", &pid, &len) != 1 || de->d_name[len])
            continue;
        char base[PATH_MAX], proc[64];
        snprintf(base, sizeof base, "%s/c-%d", dir, pid);
        snprintf(proc, sizeof proc, "/proc/%d/root/proc/%d", (int)init, pid);
        int r, waited = 0;
        for (;;) {
            int keep[2];
            r = fl_fiu_ctl_send(base, cmds, n, replies, paused ? 0 : CTL_TIMEOUT_MS, keep,
                                owed_of(d, base));
            if (keep[0] >= 0) {
                d->keep = realloc(d->keep, (d->nkeep + 2) * sizeof *d->keep);
                d->keep[d->nkeep++] = keep[0];
                d->keep[d->nkeep++] = keep[1];
            }
            if ((r != -ENXIO && r != -EPIPE) || waited >= LISTEN_WAIT_MS)
                break;
            if (access(proc, F_OK) != 0) {      /* gone (killed: its fifos stayed) */
                char p[PATH_MAX + 8];
                snprintf(p, sizeof p, "%s.in", base);
                unlink(p);
                snprintf(p, sizeof p, "%s.out", base);
                unlink(p);
                break;
            }
            sleep_ms(1);
            waited++;
        }
        if (r == 0)
            done++;
        else if (r != -ENXIO && r != -EPIPE && r != -ENOENT && rc == 0) {
            rc = r;
            snprintf(err, errlen, "process %d (in host %s) did not take the failure point commands on %s.in: %s",
                     pid, e->s->hosts[e->s->tasks[task].host].name, base,
                     r == -ETIMEDOUT ? "no answer (paused?)" : strerror(-r));
        }
    }
    closedir(dp);
    return rc < 0 ? rc : done;
}

/* Writes the task's state and sends it to its live processes. */
static int sync_task(struct engine *e, int task, char *err, size_t errlen)
{
    char dir[PATH_MAX], lines[MAX_POINTS][192];
    task_dir(e, task, dir, sizeof dir);
    size_t n = task_state(e, task, lines, MAX_POINTS);
    int rc = write_state(dir, lines, n);
    if (rc < 0) {
        snprintf(err, errlen, "write %s/state: %s", dir, strerror(-rc));
        return rc;
    }
    rc = broadcast(e, task, dir, lines, n, err, errlen);
    return rc < 0 ? rc : 0;
}

static int set(struct engine *e, struct fault_rt *fr, bool on, char *err, size_t errlen)
{
    struct fl_disk *d = e->disk;
    if (!d)
        return 0;
    d->on[fr - e->faults] = on ? ++d->seq : 0;
    int rc = 0;
    for (size_t t = 0; t < e->s->n_tasks; t++)
        if (covers(e, fr, (int)t)) {
            int r = sync_task(e, (int)t, rc < 0 ? NULL : err, rc < 0 ? 0 : errlen);
            if (r < 0 && rc == 0)
                rc = r;
        }
    return rc;
}

int fl_disk_apply(struct engine *e, struct fault_rt *fr, char *err, size_t errlen)
{
    return set(e, fr, true, err, errlen);
}

int fl_disk_heal(struct engine *e, struct fault_rt *fr, char *err, size_t errlen)
{
    return set(e, fr, false, err, errlen);
}

void fl_disk_detail(const struct fault_rt *fr, char *buf, size_t len)
{
    const struct fl_scn_disk *dk = &fr->f->action.disk;
    const char *en = fl_scn_errno_name(dk->err);
    size_t n;
    if (dk->call[0])
        n = (size_t)snprintf(buf, len, "call=%s", dk->call);
    else
        n = (size_t)snprintf(buf, len, "point=%s", dk->point);
    if (n >= len)
        return;
    if (dk->delay_us)
        n += (size_t)snprintf(buf + n, len - n, " delay=%lldms", (long long)(dk->delay_us / 1000));
    else if (dk->short_ppm)
        n += (size_t)snprintf(buf + n, len - n, " short=%g%%", dk->short_ppm / 10000.0);
    else if (dk->short_bytes)
        n += (size_t)snprintf(buf + n, len - n, " short=%lluB", (unsigned long long)dk->short_bytes);
    else
        n += (size_t)(en ? snprintf(buf + n, len - n, " errno=%s", en)
                         : snprintf(buf + n, len - n, " errno=%d", dk->err));
    if (n < len && dk->probability < 1)
        snprintf(buf + n, len - n, " probability=%g%%", dk->probability * 100);
}

int fl_disk_env(struct engine *e, int task, char **env, size_t *k, char *err, size_t errlen)
{
    struct fl_disk *d = e->disk;
    if (!d || !d->targeted[task])
        return 0;
    char dir[PATH_MAX], lines[MAX_POINTS][192];
    task_dir(e, task, dir, sizeof dir);
    /* the state as it is now, for the process's first instruction on */
    size_t n = task_state(e, task, lines, MAX_POINTS);
    int rc = write_state(dir, lines, n);
    if (rc < 0) {
        snprintf(err, errlen, "write %s/state: %s", dir, strerror(-rc));
        return rc;
    }
    char libs[2 * PATH_MAX];
    snprintf(libs, sizeof libs, "%s%s", d->preload, d->posix[task] ? " " POSIX_PRELOAD : "");
    eng_env_preload(env, k, libs);
    if (asprintf(&env[(*k)++], "FAULTLINE_FIU_FIFO=%s/c", dir) < 0 ||
        asprintf(&env[(*k)++], "FAULTLINE_FIU_STATE=%s/state", dir) < 0)
        abort();
    /* probabilities draw from libfiu's generator: seeded from the run's seed
     * (the same sequence in every process of the task) */
    if (d->any_probability &&
        asprintf(&env[(*k)++], "FIU_PRNG_SEED=%u",
                 (unsigned)((e->seed ^ (e->seed >> 32)) + (unsigned)task * 2654435761u) & 0x7fffffffu) < 0)
        abort();
    return 0;
}
