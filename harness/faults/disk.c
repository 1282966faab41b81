/*
 * disk.c: the `disk:` fault kind at run time: a libfiu failure point
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
 * generation, RUN/ctl/HOST/fiu.GEN/JOB.INDEX/ (which only that host sees), holding `state` (the
 * current enable/disable line of each failure point of the task) and one fifo pair c-PID.in/.out
 * per live process (PID as the host's PID namespace numbers it; a new host generation is a new PID
 * namespace, hence the directory).
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
 *
 * Loading: the mapping of a disk: fault ({host, call | point, errno |
 * delay | short, probability}) into struct fl_scn_disk and its target.
 */
#include "harness/faults/kind.h"
#include "harness/faults/disk_fs.h"
#include "fusedisk/fusedisk.h"
#include "harness/base/text.h"
#include "harness/sys/fiu_ctl.h"
#include "harness/tools/fl_fiu_preload.h"
#include "harness/sys/rundir.h"
#include "harness/base/suggest.h"
#include "harness/scenario/load_ctx.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <strings.h>

#define POSIX_PRELOAD "/usr/lib/fiu/fiu_posix_preload.so"
#define CTL_TIMEOUT_MS 1000 /* a process that opened a session must answer by then */
#define LISTEN_WAIT_MS 300  /* a live process not reading its fifo: retried this long */

struct fl_disk {
    bool *targeted; /* per task: a disk fault of the run covers it */
    bool *posix;    /* per task: a call: fault covers it (POSIX preload) */
    long long *on;  /* per engine fault: 0 off, else the order it was applied in */
    long long seq;
    bool any_probability;
    char preload[PATH_MAX]; /* fl_fiu_preload.so */
    int *keep;              /* fds of sessions that timed out (fiu_ctl.h) */
    size_t nkeep;
    struct fl_disk_fs *fs; /* faults by path (disk_fs.c), or NULL */
    struct owed {          /* a fifo base whose process owes late replies */
        char *base;
        int n;
    } * owed;
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

static bool covers(const struct fl_run *r, const struct fault_rt *fr, int task)
{
    const struct fl_scn_action *a = &fr->f->action;
    if (a->kind != FL_SCN_ACT_DISK || a->disk.fs)
        return false;
    return fl_fault_covers(r, &a->target, task);
}

static int disk_init(struct fl_run *r, char *err, size_t errlen)
{
    const struct fl_scenario *s = r->s;
    struct fl_disk *d = calloc(1, sizeof *d);
    d->targeted = calloc(s->n_tasks, sizeof *d->targeted);
    d->posix = calloc(s->n_tasks, sizeof *d->posix);
    d->on = calloc(r->nfaults, sizeof *d->on);
    r->kind_state[FL_SCN_ACT_DISK] = d;
    for (size_t i = 0; i < r->nfaults; i++) {
        const struct fl_scn_disk *dk = &r->faults[i].f->action.disk;
        for (size_t t = 0; t < s->n_tasks; t++)
            if (r->faults[i].f->action.kind == FL_SCN_ACT_DISK && !dk->fs &&
                fl_fault_may_cover(r, &r->faults[i].f->action.target, (int)t)) {
                d->targeted[t] = true;
                d->posix[t] |=
                    dk->call[0] != 0 && !dk->delay_us && !dk->short_bytes && !dk->short_ppm;
                d->any_probability |= dk->probability < 1;
            }
    }
    for (size_t t = 0; t < s->n_tasks; t++)
        if (d->posix[t] && access(POSIX_PRELOAD, R_OK) != 0) {
            snprintf(err, errlen,
                     "disk faults with call: need libfiu's %s (Debian package libfiu0): %s",
                     POSIX_PRELOAD, strerror(errno));
            return -ENOENT;
        }
    return fl_disk_fs_init(r, &d->fs, err, errlen);
}

/* The library where every host sees it (RUN/fs/lib, read-only in each
 * host's root), copied once the run's tmpfs is there: before the first
 * host starts. */
static int disk_host_starting(struct fl_run *r, int host, char *err, size_t errlen)
{
    struct fl_disk *d = r->kind_state[FL_SCN_ACT_DISK];
    int rc = d ? fl_disk_fs_host_starting(r, d->fs, host, err, errlen) : 0;
    if (rc < 0 || !d || d->preload[0])
        return rc;
    char dir[PATH_MAX];
    fl_run_lib_dir(r, dir, sizeof dir);
    rc = fl_run_preload(r, "fl_fiu_preload.so", dir, "disk faults", d->preload, sizeof d->preload,
                        err, errlen);
    if (rc < 0)
        d->preload[0] = 0;
    return rc;
}

static void disk_free(struct fl_run *r)
{
    struct fl_disk *d = r->kind_state[FL_SCN_ACT_DISK];
    if (!d)
        return;
    fl_disk_fs_free(r, d->fs);
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
    r->kind_state[FL_SCN_ACT_DISK] = NULL;
}

static void task_dir(const struct fl_run *r, int task, char *buf, size_t len)
{
    const struct fl_scn_task *t = &r->s->tasks[task];
    snprintf(buf, len, "%s/fiu.%d/%s.%d", r->hosts[t->host].ctl, r->hosts[t->host].h.generation,
             r->s->jobs[t->job].name, t->index);
}

/* The task's current command lines, one per failure point; returns the count. */
static size_t task_state(const struct fl_run *r, int task, char lines[][192], size_t max)
{
    const struct fl_disk *d = r->kind_state[FL_SCN_ACT_DISK];
    size_t n = 0;
    for (size_t i = 0; i < r->nfaults && n < max; i++) {
        if (!covers(r, &r->faults[i], task))
            continue;
        const char *point = r->faults[i].f->action.disk.point;
        bool seen = false; /* this point has a line already */
        for (size_t j = 0; j < i; j++)
            seen |= covers(r, &r->faults[j], task) &&
                    strcmp(r->faults[j].f->action.disk.point, point) == 0;
        if (seen)
            continue;
        const struct fl_scn_disk *win = NULL;
        long long best = 0;
        for (size_t j = i; j < r->nfaults; j++)
            if (d->on[j] > best && covers(r, &r->faults[j], task) &&
                strcmp(r->faults[j].f->action.disk.point, point) == 0) {
                best = d->on[j];
                win = &r->faults[j].f->action.disk;
            }
        if (!win)
            snprintf(lines[n++], 192, "disable name=%s", point);
        else if (win->probability < 1)
            snprintf(lines[n++], 192,
                     "enable_random name=%s,failnum=1,failinfo=%llu,probability=%.6f", point,
                     failinfo(win), win->probability);
        else
            snprintf(lines[n++], 192, "enable name=%s,failnum=1,failinfo=%llu", point,
                     failinfo(win));
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
static int broadcast(struct fl_run *r, int task, const char *dir, char lines[][192], size_t n,
                     char *err, size_t errlen)
{
    struct fl_disk *d = r->kind_state[FL_SCN_ACT_DISK];
    const char *cmds[MAX_POINTS];
    int replies[MAX_POINTS];
    for (size_t i = 0; i < n; i++)
        cmds[i] = lines[i];
    DIR *dp = opendir(dir);
    if (!dp)
        return 0; /* no process of the task started yet */
    int done = 0, rc = 0;
    struct dirent *de;
    pid_t init = r->hosts[r->s->tasks[task].host].h.pid;
    /* paused (frozen, or stopped by a signal): its processes cannot answer
     * now; each takes the commands from its fifo first thing when it runs
     * again (fl_fiu_preload.so holds the fifos open) */
    const struct task_rt *tr = &r->tasks[task];
    bool paused = tr->frozen || (tr->cur && tr->cur->running && tr->cur->stopped);
    while ((de = readdir(dp))) {
        int pid, len = 0;
        if (sscanf(de->d_name, "c-%d.in%n", &pid, &len) != 1 || de->d_name[len])
            continue;
        char base[PATH_MAX], proc[64];
        snprintf(base, sizeof base, "%s/c-%d", dir, pid);
        snprintf(proc, sizeof proc, "/proc/%d/root/proc/%d", (int)init, pid);
        int sent, waited = 0;
        for (;;) {
            int keep[2];
            sent = fl_fiu_ctl_send(base, cmds, n, replies, paused ? 0 : CTL_TIMEOUT_MS, keep,
                                   owed_of(d, base));
            if (keep[0] >= 0) {
                d->keep = realloc(d->keep, (d->nkeep + 2) * sizeof *d->keep);
                d->keep[d->nkeep++] = keep[0];
                d->keep[d->nkeep++] = keep[1];
            }
            if ((sent != -ENXIO && sent != -EPIPE) || waited >= LISTEN_WAIT_MS)
                break;
            if (access(proc, F_OK) != 0) { /* gone (killed: its fifos stayed) */
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
        if (sent == 0)
            done++;
        else if (sent != -ENXIO && sent != -EPIPE && sent != -ENOENT && rc == 0) {
            rc = sent;
            snprintf(err, errlen,
                     "process %d (in host %s) did not take the failure point commands on %s.in: %s",
                     pid, r->s->hosts[r->s->tasks[task].host].name, base,
                     sent == -ETIMEDOUT ? "no answer (paused?)" : strerror(-sent));
        }
    }
    closedir(dp);
    return rc < 0 ? rc : done;
}

/* The task's directory (dir, PATH_MAX bytes) and its state as it is now
 * (lines), written to its state file: the number of lines, or a negative
 * errno. */
static int store_task_state(struct fl_run *r, int task, char *dir, char lines[][192], char *err,
                            size_t errlen)
{
    task_dir(r, task, dir, PATH_MAX);
    size_t n = task_state(r, task, lines, MAX_POINTS);
    int rc = write_state(dir, lines, n);
    if (rc < 0) {
        snprintf(err, errlen, "write %s/state: %s", dir, strerror(-rc));
        return rc;
    }
    return (int)n;
}

/* Writes the task's state and sends it to its live processes. */
static int sync_task(struct fl_run *r, int task, char *err, size_t errlen)
{
    char dir[PATH_MAX], lines[MAX_POINTS][192];
    int n = store_task_state(r, task, dir, lines, err, errlen);
    if (n < 0)
        return n;
    int rc = broadcast(r, task, dir, lines, (size_t)n, err, errlen);
    return rc < 0 ? rc : 0;
}

static int set(struct fl_run *r, struct fault_rt *fr, bool on, char *err, size_t errlen)
{
    struct fl_disk *d = r->kind_state[FL_SCN_ACT_DISK];
    if (!d)
        return 0;
    d->on[fr - r->faults] = on ? ++d->seq : 0;
    int rc = 0;
    for (size_t t = 0; t < r->s->n_tasks; t++)
        if (covers(r, fr, (int)t)) {
            int x = sync_task(r, (int)t, rc < 0 ? NULL : err, rc < 0 ? 0 : errlen);
            if (x < 0 && rc == 0)
                rc = x;
        }
    return rc;
}

static int disk_apply(struct fl_run *r, struct fault_rt *fr, char *detail, size_t dlen, char *err,
                      size_t errlen)
{
    struct fl_disk *d = r->kind_state[FL_SCN_ACT_DISK];
    if (fr->f->action.disk.fs)
        return fl_disk_fs_set(r, d ? d->fs : NULL, fr, true, err, errlen);
    return set(r, fr, true, err, errlen);
}

static int disk_heal(struct fl_run *r, struct fault_rt *fr, bool restart, char *err, size_t errlen)
{
    struct fl_disk *d = r->kind_state[FL_SCN_ACT_DISK];
    if (fr->f->action.disk.fs)
        return fl_disk_fs_set(r, d ? d->fs : NULL, fr, false, err, errlen);
    return set(r, fr, false, err, errlen);
}

static void disk_detail(const struct fl_run *r, const struct fault_rt *fr, char *buf, size_t len)
{
    const struct fl_scn_disk *dk = &fr->f->action.disk;
    const char *en = fl_scn_errno_name(dk->err);
    size_t n;
    if (dk->fs)
        n = fl_disk_fs_detail(dk, buf, len);
    else if (dk->call[0])
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
        n +=
            (size_t)snprintf(buf + n, len - n, " short=%lluB", (unsigned long long)dk->short_bytes);
    else
        n += (size_t)(en ? snprintf(buf + n, len - n, " errno=%s", en)
                         : snprintf(buf + n, len - n, " errno=%d", dk->err));
    if (n < len && dk->probability < 1)
        snprintf(buf + n, len - n, " probability=%g%%", dk->probability * 100);
}

static int disk_env(struct fl_run *r, int task, char **env, size_t *k, char *err, size_t errlen)
{
    struct fl_disk *d = r->kind_state[FL_SCN_ACT_DISK];
    if (!d || !d->targeted[task])
        return 0;
    char dir[PATH_MAX], lines[MAX_POINTS][192];
    /* the state as it is now, for the process's first instruction on */
    int rc = store_task_state(r, task, dir, lines, err, errlen);
    if (rc < 0)
        return rc;
    char libs[2 * PATH_MAX];
    snprintf(libs, sizeof libs, "%s%s", d->preload, d->posix[task] ? " " POSIX_PRELOAD : "");
    fl_env_preload(env, k, libs);
    if (asprintf(&env[(*k)++], "FAULTLINE_FIU_FIFO=%s/c", dir) < 0 ||
        asprintf(&env[(*k)++], "FAULTLINE_FIU_STATE=%s/state", dir) < 0)
        abort();
    /* probabilities draw from libfiu's generator: seeded from the run's seed
     * (the same sequence in every process of the task) */
    if (d->any_probability &&
        asprintf(&env[(*k)++], "FIU_PRNG_SEED=%u",
                 (unsigned)((r->seed ^ (r->seed >> 32)) + (unsigned)task * 2654435761u) &
                     0x7fffffffu) < 0)
        abort();
    return 0;
}

/* ---- loading ---------------------------------------------------------- */

/* call: name -> libfiu POSIX preload point (fiu-utils' function_list).  The
 * preload fails the call with the errno given; buffered stdio calls have
 * points of their own (fwrite is not write). */
static const struct {
    const char *call, *point;
} calls[] = {
    {"open", "posix/io/oc/open"},
    {"close", "posix/io/oc/close"},
    {"read", "posix/io/rw/read"},
    {"pread", "posix/io/rw/pread"},
    {"readv", "posix/io/rw/readv"},
    {"preadv", "posix/io/rw/preadv"},
    {"write", "posix/io/rw/write"},
    {"pwrite", "posix/io/rw/pwrite"},
    {"writev", "posix/io/rw/writev"},
    {"pwritev", "posix/io/rw/pwritev"},
    {"truncate", "posix/io/rw/truncate"},
    {"ftruncate", "posix/io/rw/ftruncate"},
    {"fsync", "posix/io/sync/fsync"},
    {"fdatasync", "posix/io/sync/fdatasync"},
    {"sync_file_range", "linux/io/sync_file_range"},
    {"opendir", "posix/io/dir/opendir"},
    {"readdir", "posix/io/dir/readdir"},
    {"unlink", "posix/io/dir/unlink"},
    {"rename", "posix/io/dir/rename"},
    {"mmap", "posix/mm/mmap"},
    {"fopen", "posix/stdio/oc/fopen"},
    {"fread", "posix/stdio/rw/fread"},
    {"fwrite", "posix/stdio/rw/fwrite"},
    {"fflush", "posix/stdio/fflush"},
    {"remove", "posix/stdio/remove"},
};

/* psrt's named points (runtime/psrt/README.md); a psrt/ name not listed
 * here would never fail, so it is an error. */
/* Calls fl_fiu_preload.so can delay (delay:) and cut short (short:). */
static const char *const delay_calls[] = {"read",   "pread",  "readv",   "preadv", "write",
                                          "pwrite", "writev", "pwritev", "fsync",  "fdatasync"};
static const char *const short_calls[] = {"write", "pwrite", "writev", "pwritev"};

static bool listed(const char *v, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v, list[i]) == 0)
            return true;
    return false;
}

static const char *const psrt_points[] = {
    "psrt/save/begin",       "psrt/save/shard_write", "psrt/save/shard_sync", "psrt/save/merge",
    "psrt/save/chief_write", "psrt/save/commit",      "psrt/save/state",      "psrt/save/gc",
    "psrt/restore/find",     "psrt/restore/read",     "psrt/restore/load",    "psrt/export/write",
    "psrt/export/signature", "psrt/rpc/send",         "psrt/rpc/recv",
};

static const struct {
    const char *name;
    int err;
} errnos[] = {
    {"EIO", EIO},
    {"ENOSPC", ENOSPC},
    {"EROFS", EROFS},
    {"EDQUOT", EDQUOT},
    {"EACCES", EACCES},
    {"EPERM", EPERM},
    {"ENOENT", ENOENT},
    {"EEXIST", EEXIST},
    {"EFBIG", EFBIG},
    {"EINTR", EINTR},
    {"EAGAIN", EAGAIN},
    {"EBADF", EBADF},
    {"EINVAL", EINVAL},
    {"EMFILE", EMFILE},
    {"ENFILE", ENFILE},
    {"ENOMEM", ENOMEM},
    {"ENOTDIR", ENOTDIR},
    {"EISDIR", EISDIR},
    {"ENOTEMPTY", ENOTEMPTY},
    {"EXDEV", EXDEV},
    {"EBUSY", EBUSY},
    {"ETIMEDOUT", ETIMEDOUT},
    {"ESTALE", ESTALE},
    {"ENXIO", ENXIO},
    {"ENODEV", ENODEV},
    {"EPIPE", EPIPE},
    {"ENAMETOOLONG", ENAMETOOLONG},
    {"ELOOP", ELOOP},
    {"ETXTBSY", ETXTBSY},
    {"EMLINK", EMLINK},
    {"ENOLCK", ENOLCK},
    {"EOVERFLOW", EOVERFLOW},
    {"ECONNRESET", ECONNRESET},
    {"ECONNREFUSED", ECONNREFUSED},
    {"EBADMSG", EBADMSG},
};

const char *fl_scn_errno_name(int err)
{
    for (size_t i = 0; i < ARRAY_LEN(errnos); i++)
        if (errnos[i].err == err)
            return errnos[i].name;
    return NULL;
}

/* "open, close, read, ..." */
static void call_list(char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = 0;
    for (size_t i = 0; i < ARRAY_LEN(calls) && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? ", " : "", calls[i].call);
}

static int load_call(struct fl_scn_vctx *c, const ynode *n, struct fl_scn_disk *d)
{
    int rc;
    if ((rc = fl_scn_want(c, n, FL_YN_SCALAR, "disk 'call'")) < 0)
        return rc;
    for (size_t i = 0; i < ARRAY_LEN(calls); i++)
        if (strcmp(n->value, calls[i].call) == 0 || strcmp(n->value, calls[i].point) == 0) {
            snprintf(d->call, sizeof d->call, "%s", calls[i].call);
            snprintf(d->point, sizeof d->point, "%s", calls[i].point);
            return 0;
        }
    const char *names[ARRAY_LEN(calls)];
    for (size_t i = 0; i < ARRAY_LEN(calls); i++)
        names[i] = calls[i].call;
    const char *sug = fl_suggest(n->value, names, ARRAY_LEN(names));
    char list[512];
    call_list(list, sizeof list);
    if (sug)
        return fl_scn_verr(c, n->loc, "unknown call '%s' in disk (did you mean '%s'?); calls: %s",
                           n->value, sug, list);
    return fl_scn_verr(c, n->loc, "unknown call '%s' in disk; calls: %s", n->value, list);
}

static int load_point(struct fl_scn_vctx *c, const ynode *n, struct fl_scn_disk *d)
{
    int rc;
    if ((rc = fl_scn_want(c, n, FL_YN_SCALAR, "disk 'point'")) < 0)
        return rc;
    const char *v = n->value;
    size_t len = strlen(v);
    /* libfiu's remote control splits on spaces and ',', and '=' ends a
     * name in its parameters: a name with one could never be enabled. */
    if (len == 0 || len >= FL_SCN_DISK_POINT_MAX ||
        v[strspn(v, "abcdefghijklmnopqrstuvwxyz"
                    "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                    "0123456789_./-")])
        return fl_scn_verr(
            c, n->loc,
            "bad failure point '%s' (letters, digits, '_', '.', '/' and '-', at most %d)", v,
            FL_SCN_DISK_POINT_MAX - 1);
    if (strncmp(v, "psrt/", 5) == 0) {
        bool known = false;
        for (size_t i = 0; i < ARRAY_LEN(psrt_points); i++)
            known |= strcmp(v, psrt_points[i]) == 0;
        if (!known) {
            fl_scn_verr(c, n->loc, "unknown psrt failure point '%s'", v);
            return fl_scn_vsuggest(c, v, psrt_points, ARRAY_LEN(psrt_points));
        }
    }
    snprintf(d->point, sizeof d->point, "%s", v);
    return 0;
}

static int load_errno(struct fl_scn_vctx *c, const ynode *n, int *err)
{
    int rc;
    if ((rc = fl_scn_want(c, n, FL_YN_SCALAR, "disk 'errno'")) < 0)
        return rc;
    for (size_t i = 0; i < ARRAY_LEN(errnos); i++)
        if (strcasecmp(n->value, errnos[i].name) == 0) {
            *err = errnos[i].err;
            return 0;
        }
    char *end;
    long v = strtol(n->value, &end, 10);
    if (n->value[0] >= '1' && n->value[0] <= '9' && !*end && v <= 4095) {
        *err = (int)v;
        return 0;
    }
    const char *names[ARRAY_LEN(errnos)];
    for (size_t i = 0; i < ARRAY_LEN(errnos); i++)
        names[i] = errnos[i].name;
    const char *sug = fl_suggest(n->value, names, ARRAY_LEN(names));
    if (sug)
        return fl_scn_verr(c, n->loc, "unknown errno '%s' (did you mean '%s'?)", n->value, sug);
    return fl_scn_verr(
        c, n->loc, "unknown errno '%s' (a name like ENOSPC, EIO or EROFS, or a number)", n->value);
}

/* "50%", "0.5%", "0.25", "1" -> (0, 1] */
static int load_probability(struct fl_scn_vctx *c, const ynode *n, double *p)
{
    int rc;
    if ((rc = fl_scn_want(c, n, FL_YN_SCALAR, "disk 'probability'")) < 0)
        return rc;
    const char *v = n->value;
    char *end;
    double x = (*v >= '0' && *v <= '9') || *v == '.' ? strtod(v, &end) : -1;
    bool pct = x >= 0 && *end == '%' && end[1] == 0;
    if (x < 0 || (!pct && *end) || end == v)
        return fl_scn_verr(
            c, n->loc,
            "'probability' must be a percentage like 50%% or a fraction like 0.5, not '%s'", v);
    if (pct)
        x /= 100;
    if (!(x > 0 && x <= 1))
        return fl_scn_verr(c, n->loc,
                           "'probability' must be above 0 and at most 100%% (1), not '%s'", v);
    *p = x;
    return 0;
}

/* delay: a duration, 1ms .. 1h */
static int load_delay(struct fl_scn_vctx *c, const ynode *n, struct fl_scn_disk *d)
{
    int64_t ms;
    int rc;
    if ((rc = fl_scn_get_duration(c, n, "disk 'delay'", false, &ms)) < 0)
        return rc;
    if (ms > 3600000)
        return fl_scn_verr(c, n->loc, "disk 'delay' must be at most 1h, not '%s'", n->value);
    d->delay_us = ms * 1000;
    return 0;
}

/* short: a size ("1K", "100": at most that many bytes per call) or a
 * percentage ("50%": that fraction of what the call was asked to write) */
static int load_short(struct fl_scn_vctx *c, const ynode *n, struct fl_scn_disk *d)
{
    int rc;
    if ((rc = fl_scn_want(c, n, FL_YN_SCALAR, "disk 'short'")) < 0)
        return rc;
    const char *v = n->value;
    size_t len = strlen(v);
    if (len > 1 && v[len - 1] == '%') {
        char *end;
        double x = (*v >= '0' && *v <= '9') || *v == '.' ? strtod(v, &end) : -1;
        if (x < 0 || end != v + len - 1)
            return fl_scn_verr(c, n->loc,
                               "disk 'short' must be a size like 1K or 100 (bytes per call) or a "
                               "percentage like 50%%, not '%s'",
                               v);
        if (!(x > 0 && x < 100))
            return fl_scn_verr(
                c, n->loc, "disk 'short' percentage must be above 0%% and below 100%%, not '%s'",
                v);
        d->short_ppm = (unsigned)(x * 10000 + 0.5);
        if (d->short_ppm == 0)
            d->short_ppm = 1;
        return 0;
    }
    uint64_t b;
    if (fl_scn_size_parse(v, &b) < 0)
        return fl_scn_verr(c, n->loc,
                           "disk 'short' must be a size like 1K or 100 (bytes per call) or a "
                           "percentage like 50%%, not '%s'",
                           v);
    if (b == 0 || b >= (1ULL << 40))
        return fl_scn_verr(c, n->loc, "disk 'short' must be at least 1 byte and below 1T, not '%s'",
                           v);
    d->short_bytes = b;
    return 0;
}

/* At most one of errno, delay and short: 0, or the error naming both. */
static int one_action(struct fl_scn_vctx *c, const ynode *en, const ynode *de, const ynode *sh,
                      const char *what)
{
    const ynode *n[] = {en, de, sh};
    const char *name[] = {"errno", "delay", "short"};
    for (size_t i = 0; i < 3; i++)
        for (size_t j = i + 1; j < 3; j++)
            if (n[i] && n[j])
                return fl_scn_verr(c, n[j]->loc,
                                   "disk has both '%s' and '%s'; give one (a fault either fails, "
                                   "delays or shortens %s)",
                                   name[i], name[j], what);
    return 0;
}

/* A disk fault with path: (and op:): a rule of the faultline filesystem
 * under the host's disk (disk_fs.c), reaching every program. */
static int parse_fs(struct fl_scn_vctx *c, const ynode *v, struct fl_scn_action *a)
{
    struct fl_scn_disk *d = &a->disk;
    const ynode *h = fl_scn_yaml_get(v, "host", NULL), *pa = fl_scn_yaml_get(v, "path", NULL);
    const ynode *op = fl_scn_yaml_get(v, "op", NULL), *en = fl_scn_yaml_get(v, "errno", NULL);
    const ynode *de = fl_scn_yaml_get(v, "delay", NULL), *sh = fl_scn_yaml_get(v, "short", NULL);
    const ynode *pr = fl_scn_yaml_get(v, "probability", NULL);
    const ynode *ca = fl_scn_yaml_get(v, "call", NULL), *pt = fl_scn_yaml_get(v, "point", NULL);
    int rc;
    if (ca || pt)
        return fl_scn_verr(c, (ca ? ca : pt)->loc,
                           "disk has 'path' and '%s': a fault by path acts at the filesystem "
                           "(any program), one by %s in the program (its C library); give one",
                           ca ? "call" : "point", ca ? "call" : "point");
    if (!pa)
        return fl_scn_verr(c, op->loc, "disk 'op' needs 'path' (e.g. path: 'train_logs/**')");
    if ((rc = fl_scn_resolve_target(c, h, "disk", &a->target)) < 0)
        return rc;
    if (a->target.kind != FL_SCN_TGT_HOST || a->target.host == FL_SCN_HOST_EVENT)
        return fl_scn_verr(c, h->loc,
                           "disk with 'path' acts on a host's disk: name the host, not a task "
                           "or an event's value");
    a->host = a->target.host;
    d->fs = true;
    if ((rc = fl_scn_want(c, pa, FL_YN_SCALAR, "disk 'path'")) < 0)
        return rc;
    const char *g = pa->value;
    bool dotdot = false;
    for (const char *q = g; *q; q += strcspn(q, "/"), q += *q == '/')
        dotdot |= q[0] == '.' && q[1] == '.' && (q[2] == '/' || !q[2]);
    if (!*g || g[0] == '/' || dotdot || strlen(g) >= sizeof d->glob)
        return fl_scn_verr(c, pa->loc,
                           "disk 'path' must be a glob relative to the workdir (the host's "
                           "disk) without '..', like 'train_logs/**' or '**/*.data-*', not '%s'",
                           g);
    snprintf(d->glob, sizeof d->glob, "%s", g);
    d->ops = FL_FD_OP_ALL;
    if (op) {
        const ynode *one = op;
        size_t n = op->type == FL_YN_SEQ ? op->n : 1;
        d->ops = 0;
        for (size_t i = 0; i < n; i++) {
            if (op->type == FL_YN_SEQ)
                one = op->items[i];
            unsigned m;
            if ((rc = fl_scn_want(c, one, FL_YN_SCALAR, "disk 'op'")) < 0)
                return rc;
            if (fl_fd_op_parse(one->value, &m) < 0)
                return fl_scn_verr(c, one->loc, "unknown op '%s' in disk; ops: %s", one->value,
                                   fl_fd_op_names());
            d->ops |= m;
        }
    }
    if ((rc = one_action(c, en, de, sh, "an operation")) < 0)
        return rc;
    if (en && (rc = load_errno(c, en, &d->err)) < 0)
        return rc;
    if (de && (rc = load_delay(c, de, d)) < 0)
        return rc;
    if (sh) {
        if ((rc = load_short(c, sh, d)) < 0)
            return rc;
        if (d->short_ppm)
            return fl_scn_verr(c, sh->loc,
                               "disk 'short' with 'path' is a size (bytes a write keeps), not a "
                               "percentage");
        if (!(d->ops & FL_FD_WRITE))
            return fl_scn_verr(c, sh->loc, "disk 'short' needs op write");
        d->ops = FL_FD_WRITE;
    }
    if (de || sh)
        d->err = 0;
    if (pr && (rc = load_probability(c, pr, &d->probability)) < 0)
        return rc;
    return 0;
}

static int disk_parse(struct fl_scn_vctx *c, const ynode *fault, const ynode *key, const ynode *v,
                      struct fl_scn_action *a)
{
    static const char *const keys[] = {"host",  "call",        "point", "errno", "delay",
                                       "short", "probability", "path",  "op"};
    struct fl_scn_disk *d = &a->disk;
    int rc;

    a->kind = FL_SCN_ACT_DISK;
    d->err = EIO;
    d->probability = 1;
    if (v->type != FL_YN_MAP) {
        char b[64];
        return fl_scn_verr(
            c, v->loc,
            "'disk' must be a mapping like {host: ps1, call: write, errno: ENOSPC}, not %s",
            fl_scn_describe(v, b, sizeof b));
    }
    if ((rc = fl_scn_check_keys(c, v, keys, ARRAY_LEN(keys), "disk")) < 0)
        return rc;
    const ynode *h = fl_scn_yaml_get(v, "host", NULL), *ca = fl_scn_yaml_get(v, "call", NULL);
    const ynode *pt = fl_scn_yaml_get(v, "point", NULL), *en = fl_scn_yaml_get(v, "errno", NULL);
    const ynode *pr = fl_scn_yaml_get(v, "probability", NULL);
    const ynode *de = fl_scn_yaml_get(v, "delay", NULL), *sh = fl_scn_yaml_get(v, "short", NULL);
    if (!h)
        return fl_scn_verr(c, v->loc, "disk needs 'host' (a host, job:task or chief)");
    const ynode *pa = fl_scn_yaml_get(v, "path", NULL), *op = fl_scn_yaml_get(v, "op", NULL);
    if (pa || op)
        return parse_fs(c, v, a);
    if (ca && pt)
        return fl_scn_verr(c, pt->loc, "disk has both 'call' and 'point'; give one");
    if (!ca && !pt)
        return fl_scn_verr(c, v->loc,
                           "disk needs 'call' (a call to fail, e.g. write) or 'point' (a failure "
                           "point, e.g. psrt/save/shard_write)");
    if ((rc = one_action(c, en, de, sh, "a call")) < 0)
        return rc;
    if ((de || sh) && pt)
        return fl_scn_verr(c, (de ? de : sh)->loc,
                           "disk '%s' needs 'call' (a call like %s), not 'point'",
                           de ? "delay" : "short", de ? "fsync" : "write");
    if ((rc = fl_scn_resolve_target(c, h, "disk", &a->target)) < 0)
        return rc;
    a->host = a->target.host;
    if ((rc = ca ? load_call(c, ca, d) : load_point(c, pt, d)) < 0)
        return rc;
    if (de && !listed(d->call, delay_calls, ARRAY_LEN(delay_calls)))
        return fl_scn_verr(c, ca->loc,
                           "disk 'delay' works on read, pread, readv, preadv, write, pwrite, "
                           "writev, pwritev, fsync and fdatasync, not '%s'",
                           d->call);
    if (sh && !listed(d->call, short_calls, ARRAY_LEN(short_calls)))
        return fl_scn_verr(c, ca->loc,
                           "disk 'short' works on write, pwrite, writev and pwritev, not '%s'",
                           d->call);
    if (en && (rc = load_errno(c, en, &d->err)) < 0)
        return rc;
    if (de && (rc = load_delay(c, de, d)) < 0)
        return rc;
    if (sh && (rc = load_short(c, sh, d)) < 0)
        return rc;
    if (de || sh) {
        d->err = 0;
        snprintf(d->point, sizeof d->point, "faultline/%s/%s", de ? "delay" : "short", d->call);
    }
    if (pr && (rc = load_probability(c, pr, &d->probability)) < 0)
        return rc;
    return 0;
}

const struct fl_fault_kind fl_kind_disk = {
    .kind = FL_SCN_ACT_DISK,
    .name = "disk",
    .lasting = true,
    .parse = disk_parse,
    .at_setup = true,
    .init = disk_init,
    .host_starting = disk_host_starting,
    .needed = fl_disk_fs_wanted,
    .free = disk_free,
    .task_env = disk_env,
    .detail = disk_detail,
    .apply = disk_apply,
    .heal = disk_heal,
};
