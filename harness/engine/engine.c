/*
 * engine.c: one run of one scenario variant, from set-up to verdict.
 *
 * Set-up: run directory (disks, /tmp dirs, shared dirs, /etc/hosts, state
 * file), the switch, every host (inits cloned in one batch, veths plugged in
 * one netlink batch, then all waited for), the event socket, the recorder's
 * run row, then every task's process.
 *
 * The loop: one thread, one epoll over a signalfd (SIGCHLD, SIGINT, SIGTERM,
 * SIGHUP), a timerfd (fault schedule, heals, timeout, grace, progress), the
 * event socket and its clients, and the output pipe of every process.  All
 * faults are applied from this loop, in the order their triggers fire, so a
 * run's decisions happen in one place.
 *
 * Ending: when every task of the `stop_when` jobs has exited for good (no
 * restart pending), or on timeout, harness error or interrupt, the engine
 * resumes paused processes (thaws frozen task cgroups), sends SIGTERM to
 * every task still running (every process in its cgroup when it has one,
 * else its process group), SIGKILL after the grace period (at once on a
 * second interrupt), and waits for all of them.  Then check.c judges, the
 * recorder gets the verdict, and tear-down removes everything the run created: hosts (and with them their
 * namespaces and mounts; a task cgroup still frozen is thawed first, or its
 * processes could not die), the switch, cgroups (pids and freezer), and the
 * run directory (kept with its logs when the run did not pass, whole with
 * --keep).
 *
 * Shell mode (`faultline shell`): the same set-up and tear-down, but no
 * fault is armed (fl_faults_init keeps none) and there is no timeout: the
 * run ends when the shell exits (or on interrupt or harness error).
 *
 * States of a run: SETUP -> RUNNING -> STOPPING (SIGTERM sent) -> KILLING
 * (grace over) -> JUDGED -> TORN DOWN.  Invariant: every process, host and
 * fabric created is listed in the engine (and the state file) until removed.
 */
#include "harness/engine/engine_int.h"
#include "harness/sys/cgroup.h"
#include "harness/record/recorder.h"
#include "harness/sys/rundir.h"
#include "harness/sys/shared_leftovers.h"
#include "harness/scenario/template.h"
#include "netem/fabric.h"

_Static_assert(FL_SCN_MAX_HOSTS == FL_FABRIC_MAX_HOSTS,
               "the scenario loader must accept exactly the hosts the fabric can attach");

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mount.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t eng_now(const struct engine *e) { return mono_ms() - e->t0_mono; }

void eng_error(struct engine *e, const char *fmt, ...)
{
    if (e->error[0])
        return;                 /* keep the first: later ones are usually consequences */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->error, sizeof e->error, fmt, ap);
    va_end(ap);
}

int fl_engine_global_init(char *err, size_t errlen)
{
    int rc = fl_host_global_init(err, errlen);
    if (rc < 0)
        return rc;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    sigprocmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

bool fl_engine_take_interrupt(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    struct timespec now = {0, 0};
    int sig = sigtimedwait(&set, NULL, &now);
    if (sig <= 0)
        return false;
    while (sigtimedwait(&set, NULL, &now) > 0)
        ;
    fprintf(stderr, "\nfaultline: %s: starting no further run\n", strsignal(sig));
    return true;
}

void eng_write_state(struct engine *e)
{
    struct fl_state st = {0};
    snprintf(st.run_id, sizeof st.run_id, "%s", e->run_id);
    snprintf(st.scenario, sizeof st.scenario, "%s", e->s->name);
    snprintf(st.variant, sizeof st.variant, "%s", e->variant);
    if (!e->o->rec || !realpath(fl_rec_path(e->o->rec), st.db))
        snprintf(st.db, sizeof st.db, "%s", e->o->rec ? fl_rec_path(e->o->rec) : "");
    snprintf(st.workdir, sizeof st.workdir, "%s", e->s->workdir);
    snprintf(st.status, sizeof st.status, "%s", e->res->verdict[0] ? "done" : "running");
    st.harness_pid = getpid();
    st.harness_start = fl_proc_starttime(getpid());
    if (e->fab) {
        st.switch_pid = fl_fabric_switch_pid(e->fab);
        st.switch_start = fl_proc_starttime(st.switch_pid);
    }
    if (e->any_cgroup)
        snprintf(st.cgroups[st.ncgroups++], sizeof st.cgroups[0], "%s", e->cgroup_run);
    if (e->any_freezer && !(e->any_cgroup && !strcmp(e->freezer_run, e->cgroup_run)))
        snprintf(st.cgroups[st.ncgroups++], sizeof st.cgroups[0], "%s", e->freezer_run);
    if (e->any_mem && !(e->any_cgroup && !strcmp(e->mem_run, e->cgroup_run)) &&
        !(e->any_freezer && !strcmp(e->mem_run, e->freezer_run)))
        snprintf(st.cgroups[st.ncgroups++], sizeof st.cgroups[0], "%s", e->mem_run);
    st.hosts = calloc(e->s->n_hosts, sizeof *st.hosts);
    for (size_t i = 0; st.hosts && i < e->s->n_hosts; i++) {
        struct fl_host *h = &e->hosts[i].h;
        snprintf(st.hosts[st.nhosts].name, sizeof st.hosts[0].name, "%s", e->s->hosts[i].name);
        st.hosts[st.nhosts].pid = h->state == FL_HOST_DOWN ? 0 : h->pid;
        st.hosts[st.nhosts].starttime = h->starttime;
        st.nhosts++;
    }
    fl_state_write(e->dir, &st);
    free(st.hosts);
}

/* ---- set-up ----------------------------------------------------------------- */

static int write_text(const char *path, const char *text, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    ssize_t n = write(fd, text, len);
    int er = errno;
    close(fd);
    return n == (ssize_t)len ? 0 : -er;
}

/* Fills a host's disk with the scenario's leftovers (dirs: and files:). */
static int preload_disk(struct engine *e, int i)
{
    const struct fl_scn_host *sh = &e->s->hosts[i];
    char path[PATH_MAX];
    for (size_t d = 0; d < sh->n_dirs; d++) {
        snprintf(path, sizeof path, "%s/%s", e->hosts[i].disk, sh->dirs[d].path);
        int rc = fl_mkdir_p(path, 0755);
        if (rc < 0) {
            eng_error(e, "host %s: mkdir %s: %s", sh->name, sh->dirs[d].path, strerror(-rc));
            return rc;
        }
    }
    for (size_t f = 0; f < sh->n_files; f++) {
        snprintf(path, sizeof path, "%s/%s", e->hosts[i].disk, sh->files[f].path);
        char parent[PATH_MAX];
        snprintf(parent, sizeof parent, "%s", path);
        char *slash = strrchr(parent, '/');
        if (slash) {
            *slash = 0;
            fl_mkdir_p(parent, 0755);
        }
        int rc = write_text(path, sh->files[f].content, sh->files[f].len);
        if (rc < 0) {
            eng_error(e, "host %s: write %s: %s", sh->name, sh->files[f].path, strerror(-rc));
            return rc;
        }
    }
    return 0;
}

/* A fresh disk: empty directory (or tmpfs), plus mount points of shared paths. */
static int make_disk(struct engine *e, int i, bool preload)
{
    struct host_rt *hr = &e->hosts[i];
    const struct fl_scn_host *sh = &e->s->hosts[i];
    int rc;
    if (hr->tmpfs_disk) {
        umount2(hr->disk, MNT_DETACH);
    }
    fl_rm_rf(hr->disk);
    if ((rc = fl_mkdir_p(hr->disk, 0755)) < 0) {
        eng_error(e, "host %s: mkdir %s: %s", sh->name, hr->disk, strerror(-rc));
        return rc;
    }
    /* a tmpfs of its own when sized, and when the crash-consistency layer
     * tracks it (its st_dev then tells its files from /tmp and shared paths) */
    if (sh->disk_size || fl_durable_tracked(e, i)) {
        char opts[64];
        if (sh->disk_size)
            snprintf(opts, sizeof opts, "size=%llu,mode=755", (unsigned long long)sh->disk_size);
        else
            snprintf(opts, sizeof opts, "mode=755");
        if (mount("fl-disk", hr->disk, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0) {
            rc = -errno;
            eng_error(e, "host %s: mount tmpfs (%s) at %s: %s", sh->name, opts, hr->disk,
                      strerror(-rc));
            return rc;
        }
        hr->tmpfs_disk = true;
    }
    for (size_t m = 0; m < e->s->n_shared; m++) {
        const struct fl_scn_shared *sd = &e->s->shared[m];
        for (size_t k = 0; k < sd->n_hosts; k++) {
            if (sd->hosts[k] != i)
                continue;
            char path[PATH_MAX];
            snprintf(path, sizeof path, "%s/%s", hr->disk, sd->path);
            if ((rc = fl_mkdir_p(path, 0755)) < 0) {
                eng_error(e, "host %s: mkdir %s: %s", sh->name, path, strerror(-rc));
                return rc;
            }
        }
    }
    return preload ? preload_disk(e, i) : 0;
}

/* The host's /tmp: an empty, world-writable, sticky directory, at the start
 * and again when the host is replaced (a new machine). */
static int make_tmp(struct engine *e, int i)
{
    struct host_rt *hr = &e->hosts[i];
    int rc = fl_rm_rf(hr->tmp);
    if (rc == 0)
        rc = fl_mkdir_p(hr->tmp, 01777);
    if (rc < 0) {
        eng_error(e, "host %s: empty /tmp at %s: %s", e->s->hosts[i].name, hr->tmp, strerror(-rc));
        return rc;
    }
    chmod(hr->tmp, 01777);
    return 0;
}

/* The task's freezer cgroup, faultline/<run_id>/<host>/<job:index>.  With
 * no freezer on the machine, a pause falls back to SIGSTOP of the process
 * group (said once). */
static int make_task_cgroup(struct engine *e, int task)
{
    const struct fl_scenario *s = e->s;
    struct task_rt *tr = &e->tasks[task];
    if (tr->has_cgroup)
        return 0;
    char tname[64];
    fl_scn_task_name(s, task, tname, sizeof tname);
    const char *host = s->hosts[s->tasks[task].host].name;
    int rc = fl_cgroup_create_task(e->run_id, host, tname, tr->cgroup, sizeof tr->cgroup);
    if (rc == -ENOTSUP) {
        static bool said;
        if (!said)
            fprintf(stderr, "faultline: no cgroup freezer on this machine: pause stops the "
                            "task's process group with SIGSTOP instead\n");
        said = true;
        return 0;
    }
    if (rc < 0) {
        eng_error(e, "task %s on %s: create freezer cgroup %s for the pause fault: %s", tname,
                  host, tr->cgroup, strerror(-rc));
        /* what exists of it is removed at the end */
        if (!e->any_freezer && fl_cgroup_freezer_root(e->freezer_run, sizeof e->freezer_run) > 0) {
            size_t n = strlen(e->freezer_run);
            snprintf(e->freezer_run + n, sizeof e->freezer_run - n, "/%s", e->run_id);
            e->any_freezer = true;
        }
        return rc;
    }
    tr->has_cgroup = true;
    if (!e->any_freezer) {
        /* .../faultline/<run_id>/<host>/<task> -> .../faultline/<run_id> */
        snprintf(e->freezer_run, sizeof e->freezer_run, "%s", tr->cgroup);
        for (int up = 0; up < 2; up++) {
            char *slash = strrchr(e->freezer_run, '/');
            if (slash)
                *slash = 0;
        }
        e->any_freezer = true;
    }
    return 0;
}

static int setup_dirs(struct engine *e)
{
    const struct fl_scenario *s = e->s;
    char path[PATH_MAX];
    int rc;
    if ((rc = fl_mkdir_p(e->dir, 0755)) < 0) {
        eng_error(e, "mkdir %s: %s", e->dir, strerror(-rc));
        return rc;
    }
    snprintf(path, sizeof path, "%s/logs", e->dir);
    fl_mkdir_p(path, 0755);
    /* Every disk, /tmp and shared path of the run lives on one tmpfs in the
     * harness's private mount namespace: creating them costs microseconds,
     * and they all vanish with one unmount (or with the harness). */
    if ((rc = fl_mkdir_p(e->fsdir, 0755)) < 0 ||
        (mount("fl-fs", e->fsdir, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755") < 0 && (rc = -errno))) {
        eng_error(e, "mount tmpfs at %s: %s", e->fsdir, strerror(-rc));
        return rc;
    }
    /* a copy of the scenario, for replay */
    char *text;
    size_t len;
    if (fl_read_file(s->path, &text, &len) == 0) {
        snprintf(path, sizeof path, "%s/scenario.yaml", e->dir);
        write_text(path, text, len);
        free(text);
    }
    if ((rc = fl_workdir_make(s->workdir)) < 0) {
        eng_error(e, "mkdir workdir %s: %s", s->workdir, strerror(-rc));
        return rc;
    }
    /* /etc/hosts naming every host */
    char *hosts = NULL;
    size_t hlen = 0;
    FILE *hf = open_memstream(&hosts, &hlen);
    fprintf(hf, "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n");
    for (size_t i = 0; i < s->n_hosts; i++) {
        char addr[16];
        fl_fabric_addr_str((int)i, addr, sizeof addr);
        fprintf(hf, "%s\t%s\n", addr, s->hosts[i].name);
    }
    fclose(hf);
    snprintf(path, sizeof path, "%s/etc-hosts", e->dir);
    rc = write_text(path, hosts, hlen);
    free(hosts);
    if (rc < 0) {
        eng_error(e, "write %s: %s", path, strerror(-rc));
        return rc;
    }
    /* shared paths */
    for (size_t m = 0; m < s->n_shared; m++) {
        snprintf(path, sizeof path, "%s/shared/%zu", e->fsdir, m);
        if ((rc = fl_mkdir_p(path, 0755)) < 0) {
            eng_error(e, "mkdir %s: %s", path, strerror(-rc));
            return rc;
        }
    }
    /* which hosts need a pids cgroup (a threads limit on them in this run)
     * and which a memory cgroup (a memory limit) */
    bool *need_cg = calloc(s->n_hosts, sizeof *need_cg);
    bool *need_mem = calloc(s->n_hosts, sizeof *need_mem);
    for (size_t f = 0; f < e->nfaults; f++) {
        const struct fl_scn_action *a = &e->faults[f].f->action;
        if (a->kind == FL_SCN_ACT_LIMIT && a->threads)
            need_cg[a->host] = true;
        if (a->kind == FL_SCN_ACT_LIMIT && a->memory)
            need_mem[a->host] = true;
    }
    for (size_t i = 0; i < s->n_hosts; i++) {
        struct host_rt *hr = &e->hosts[i];
        snprintf(hr->disk, sizeof hr->disk, "%s/hosts/%s/disk", e->fsdir, s->hosts[i].name);
        snprintf(hr->tmp, sizeof hr->tmp, "%s/hosts/%s/tmp", e->fsdir, s->hosts[i].name);
        fl_fabric_addr_str((int)i, hr->addr, sizeof hr->addr);
        if ((rc = make_disk(e, (int)i, true)) < 0)
            break;
        if ((rc = make_tmp(e, (int)i)) < 0)
            break;
        /* shared mounts of this host */
        for (size_t m = 0; m < s->n_shared; m++)
            for (size_t k = 0; k < s->shared[m].n_hosts; k++)
                if (s->shared[m].hosts[k] == (int)i) {
                    hr->mounts = realloc(hr->mounts, (hr->nmounts + 1) * sizeof *hr->mounts);
                    struct fl_host_mount *hm = &hr->mounts[hr->nmounts++];
                    if (asprintf(&hm->src, "%s/shared/%zu", e->fsdir, m) < 0 ||
                        asprintf(&hm->dst, "%s/%s", s->workdir, s->shared[m].path) < 0)
                        abort();
                }
        if (need_cg[i]) {
            rc = fl_cgroup_create(e->run_id, s->hosts[i].name, hr->cgroup, sizeof hr->cgroup);
            if (rc < 0) {
                eng_error(e, "host %s: create pids cgroup for the limit fault: %s", s->hosts[i].name,
                          strerror(-rc));
                break;
            }
            hr->has_cgroup = true;
            if (!e->any_cgroup) {
                snprintf(e->cgroup_run, sizeof e->cgroup_run, "%s", hr->cgroup);
                char *slash = strrchr(e->cgroup_run, '/');
                if (slash)
                    *slash = 0;
                e->any_cgroup = true;
            }
        }
        if (need_mem[i]) {
            rc = fl_cgroup_create_memory(e->run_id, s->hosts[i].name, hr->mem_cgroup,
                                         sizeof hr->mem_cgroup);
            if (rc < 0) {
                eng_error(e, "host %s: create memory cgroup for the limit fault: %s%s", s->hosts[i].name,
                          strerror(-rc), rc == -ENOTSUP ? " (this machine has no memory cgroup "
                          "controller: remove the memory limit)" : "");
                break;
            }
            hr->has_mem_cgroup = true;
            if (!e->any_mem) {
                snprintf(e->mem_run, sizeof e->mem_run, "%s", hr->mem_cgroup);
                char *slash = strrchr(e->mem_run, '/');
                if (slash)
                    *slash = 0;
                e->any_mem = true;
            }
        }
        char etc[PATH_MAX];
        snprintf(etc, sizeof etc, "%s/etc-hosts", e->dir);
        hr->h.spec = (struct fl_host_spec){
            .name = s->hosts[i].name,
            .idx = (int)i,
            .disk_dir = hr->disk,
            .tmp_dir = hr->tmp,
            .workdir = s->workdir,
            .hosts_file = strdup(etc),
            .mounts = hr->mounts,
            .nmounts = hr->nmounts,
            .cgroup = hr->has_cgroup ? hr->cgroup : NULL,
            /* v2: the same cgroup; v1: the memory hierarchy's */
            .cgroup_mem = hr->has_mem_cgroup && !(hr->has_cgroup && !strcmp(hr->mem_cgroup, hr->cgroup))
                              ? hr->mem_cgroup : NULL,
            .expose = e->expose,
            .nexpose = 3,
        };
        hr->h.pidfd = -1;
    }
    free(need_cg);
    free(need_mem);
    /* which tasks need a freezer cgroup of their own (a pause fault on them) */
    for (size_t f = 0; rc >= 0 && f < e->nfaults; f++) {
        const struct fl_scn_action *a = &e->faults[f].f->action;
        if (a->kind != FL_SCN_ACT_PAUSE)
            continue;
        for (size_t t = 0; rc >= 0 && t < s->n_tasks; t++)
            if (a->target.kind == FL_SCN_TGT_TASK ? (int)t == a->target.task
                                                  : s->tasks[t].host == a->target.host)
                rc = make_task_cgroup(e, (int)t);
    }
    return rc < 0 ? rc : 0;
}

/* Brings every host up in one batch. */
static int hosts_up_all(struct engine *e)
{
    const struct fl_scenario *s = e->s;
    char err[1024];
    struct fl_host **hp = calloc(s->n_hosts, sizeof *hp);
    for (size_t i = 0; i < s->n_hosts; i++)
        hp[i] = &e->hosts[i].h;
    int rc = 0;
    for (size_t i = 0; i < s->n_hosts && rc == 0; i++)
        if ((rc = fl_durable_baseline(e, (int)i, err, sizeof err)) < 0)
            eng_error(e, "%s", err);
    if (rc == 0 && (rc = fl_host_up_batch(hp, s->n_hosts, e->fab, err, sizeof err)) < 0)
        eng_error(e, "%s", err);
    free(hp);
    eng_write_state(e);
    return rc;
}

int eng_host_up(struct engine *e, int i, bool fresh_disk)
{
    struct host_rt *hr = &e->hosts[i];
    char err[1024];
    int rc;
    if (hr->h.state != FL_HOST_DOWN)
        return 0;
    if (fresh_disk && ((rc = make_disk(e, i, false)) < 0 || (rc = make_tmp(e, i)) < 0))
        return rc;
    /* what survived the way down (all of it, or what was synced) is durable */
    if ((rc = fl_durable_baseline(e, i, err, sizeof err)) < 0) {
        eng_error(e, "bringing host %s back: %s", e->s->hosts[i].name, err);
        return rc;
    }
    hr->h.generation++;
    struct fl_host *hp = &hr->h;
    if ((rc = fl_host_up_batch(&hp, 1, e->fab, err, sizeof err)) < 0) {
        eng_error(e, "bringing host %s back: %s", e->s->hosts[i].name, err);
        fl_host_kill(hp);
        return rc;
    }
    hr->down_by_fault = false;
    fl_faults_link_host_up(e, i);   /* its port is new: rate classes, down state */
    eng_write_state(e);
    return 0;
}

void eng_signal_proc(struct engine *e, struct proc *p, int sig)
{
    if (!p->running)
        return;
    /* Every process of the task, whatever its session or process group,
     * when the task has a cgroup of its own */
    struct task_rt *tr = &e->tasks[p->task];
    if (tr->has_cgroup && fl_cgroup_signal(tr->cgroup, sig) > 0)
        return;
    /* Its process group (a non-simple command is a shell with children). */
    if (kill(-p->pid, sig) < 0)
        kill(p->pid, sig);
}

/* How long a freeze may take: tasks freeze in microseconds, unless one is
 * stuck in the kernel (a hung NFS read, say). */
#define FREEZE_TIMEOUT_MS 2000

int eng_task_freeze(struct engine *e, int task, bool frozen, char *err, size_t errlen)
{
    struct task_rt *tr = &e->tasks[task];
    if (!tr->has_cgroup || tr->frozen == frozen)
        return 0;
    int rc = fl_cgroup_freeze(tr->cgroup, frozen, FREEZE_TIMEOUT_MS);
    /* A freeze that timed out may still complete: it counts as frozen, to
     * be thawed like one.  A thaw that failed leaves it frozen. */
    if (frozen || rc == 0)
        tr->frozen = frozen;
    if (rc < 0 && err) {
        char tname[64];
        snprintf(err, errlen, "task %s: %s %s: %s", fl_scn_task_name(e->s, task, tname, sizeof tname),
                 frozen ? "freeze" : "thaw", tr->cgroup,
                 rc == -ETIMEDOUT ? "still FREEZING after 2 s" : strerror(-rc));
    }
    return rc;
}

/* Kills every process on a host at once (init dies: the kernel kills the
 * rest); with will_restart, their tasks are started again when it is back. */
void eng_host_down(struct engine *e, int host, struct fault_rt *by, bool will_restart)
{
    struct host_rt *hr = &e->hosts[host];
    for (struct proc *p = e->procs; p; p = p->next) {
        if (p->host != host || !p->running)
            continue;
        if (will_restart && e->tasks[p->task].cur == p)
            e->tasks[p->task].restart_pending++;
    }
    fl_host_kill(&hr->h);
    /* a frozen process dies only once thawed: killed first, so it never
     * runs again (and its task starts again in a thawed cgroup) */
    for (size_t t = 0; t < e->s->n_tasks; t++)
        if (e->s->tasks[t].host == host && e->tasks[t].frozen) {
            fl_cgroup_signal(e->tasks[t].cgroup, SIGKILL);
            char err[1024];
            if (eng_task_freeze(e, (int)t, false, err, sizeof err) < 0)
                eng_error(e, "host %s going down: %s", e->s->hosts[host].name, err);
        }
    hr->down_by_fault = by != NULL;
    hr->comes_back = will_restart;
    eng_write_state(e);
}

/* ---- processes ---------------------------------------------------------------- */

static const char *lookup_addr(const struct engine *e, int i) { return e->hosts[i].addr; }

static void free_strv(char **v);

static char **build_env(struct engine *e, int task, char *err, size_t errlen, int *rc)
{
    const struct fl_scenario *s = e->s;
    const struct fl_scn_task *t = &s->tasks[task];
    const struct fl_scn_job *j = &s->jobs[t->job];
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + j->n_env + 28, sizeof *env);
    size_t k = 0;
    /* inherited, minus what we set */
    for (size_t i = 0; i < n; i++) {
        if (!strncmp(environ[i], "FAULTLINE_", 10))
            continue;
        bool overridden = false;
        for (size_t x = 0; x < j->n_env; x++) {
            size_t kl = strlen(j->env[x].key);
            if (!strncmp(environ[i], j->env[x].key, kl) && environ[i][kl] == '=')
                overridden = true;
        }
        if (!overridden)
            env[k++] = strdup(environ[i]);
    }
    const char **addrs = calloc(s->n_hosts, sizeof *addrs);
    for (size_t i = 0; i < s->n_hosts; i++)
        addrs[i] = lookup_addr(e, (int)i);
    struct fl_scn_run_ctx ctx = {.run_id = e->run_id, .seed = e->seed, .bin = e->o->bin_dir,
                                 .host_addrs = addrs};
    for (size_t x = 0; x < j->n_env; x++) {
        char *val;
        *rc = fl_scn_expand(s, task, e->v, &ctx, j->env[x].value, &val, err, errlen);
        if (*rc < 0) {
            free(addrs);
            for (size_t i = 0; i < k; i++)
                free(env[i]);
            free(env);
            return NULL;
        }
        if (asprintf(&env[k++], "%s=%s", j->env[x].key, val) < 0)
            abort();
        free(val);
    }
    free(addrs);
    if (asprintf(&env[k++], "FAULTLINE_EVENTS=%s", e->ev_path) < 0 ||
        asprintf(&env[k++], "FAULTLINE_HOST=%s", s->hosts[t->host].name) < 0 ||
        asprintf(&env[k++], "FAULTLINE_JOB=%s", j->name) < 0 ||
        asprintf(&env[k++], "FAULTLINE_TASK=%d", t->index) < 0 ||
        asprintf(&env[k++], "FAULTLINE_RUN=%s", e->run_id) < 0 ||
        asprintf(&env[k++], "FAULTLINE_GENERATION=%d", e->tasks[task].gens) < 0 ||
        asprintf(&env[k++], "FAULTLINE_SEED=%llu", (unsigned long long)e->seed) < 0)
        abort();
    if (e->sync_kinds[0] && asprintf(&env[k++], "FAULTLINE_SYNC=%s", e->sync_kinds) < 0)
        abort();
    if ((*rc = fl_disk_env(e, task, env, &k, err, errlen)) < 0 ||
        (*rc = fl_clock_env(e, task, env, &k, err, errlen)) < 0 ||
        (*rc = fl_durable_env(e, task, env, &k, err, errlen)) < 0) {
        env[k] = NULL;
        free_strv(env);
        return NULL;
    }
    env[k] = NULL;
    *rc = 0;
    return env;
}

static void free_strv(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

static char *expand_command(struct engine *e, int task, char *err, size_t errlen)
{
    const struct fl_scenario *s = e->s;
    const char **addrs = calloc(s->n_hosts, sizeof *addrs);
    for (size_t i = 0; i < s->n_hosts; i++)
        addrs[i] = lookup_addr(e, (int)i);
    struct fl_scn_run_ctx ctx = {.run_id = e->run_id, .seed = e->seed, .bin = e->o->bin_dir,
                                 .host_addrs = addrs};
    char *cmd = NULL;
    int rc = fl_scn_expand(s, task, e->v, &ctx, s->jobs[s->tasks[task].job].command, &cmd, err,
                           errlen);
    free(addrs);
    return rc < 0 ? NULL : cmd;
}

int eng_start_task(struct engine *e, int task)
{
    const struct fl_scenario *s = e->s;
    const struct fl_scn_task *t = &s->tasks[task];
    struct task_rt *tr = &e->tasks[task];
    char err[1024], tname[64];
    fl_scn_task_name(s, task, tname, sizeof tname);
    char *cmd = expand_command(e, task, err, sizeof err);
    if (!cmd) {
        eng_error(e, "task %s: %s", tname, err);
        return -EINVAL;
    }
    int rc;
    /* A pause that fired after the task's last process was killed (by a
     * kill or its host going down) but before it was reaped froze an empty
     * cgroup: the new process would freeze on joining it, before its exec,
     * and the spawn below would wait for that exec for ever.  It starts
     * thawed (the pause was for the process that is gone). */
    if (tr->frozen && (rc = eng_task_freeze(e, task, false, err, sizeof err)) < 0) {
        eng_error(e, "starting task %s: %s", tname, err);
        free(cmd);
        return rc;
    }
    char **env = build_env(e, task, err, sizeof err, &rc);
    if (!env) {
        eng_error(e, "task %s: env: %s", tname, err);
        free(cmd);
        return rc;
    }
    struct proc *p = calloc(1, sizeof *p);
    p->w = (struct watch){W_OUTPUT, p};
    p->task = task;
    p->host = t->host;
    p->gen = tr->gens;
    snprintf(p->log_path, sizeof p->log_path, "%s/logs/%s.%s.%d.%d.log", e->dir,
             s->hosts[t->host].name, s->jobs[t->job].name, t->index, p->gen);
    p->log_fd = open(p->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_APPEND, 0644);
    int pfd[2];
    rc = 0;
    if (p->log_fd < 0) {
        rc = -errno;
        eng_error(e, "task %s: log %s: %s", tname, p->log_path, strerror(-rc));
    } else if (pipe2(pfd, O_CLOEXEC) < 0) {
        rc = -errno;
        eng_error(e, "task %s: pipe: %s", tname, strerror(-rc));
    }
    if (rc < 0) {
        free(cmd);
        free_strv(env);
        if (p->log_fd >= 0)
            close(p->log_fd);
        free(p);
        return rc;
    }
    char *argv[4], *script;
    fl_tmpl_shell_argv(cmd, argv, &script);
    struct fl_spawn sp = {.argv = argv, .envp = env, .cwd = NULL, .stdin_fd = -1,
                          .stdout_fd = pfd[1], .stderr_fd = pfd[1],
                          .cgroup = tr->has_cgroup ? tr->cgroup : NULL};
    pid_t pid = fl_host_spawn(&e->hosts[t->host].h, &sp, err, sizeof err);
    close(pfd[1]);
    free_strv(env);
    if (pid < 0) {
        eng_error(e, "task %s: %s", tname, err);
        close(pfd[0]);
        close(p->log_fd);
        free(script);
        free(cmd);
        free(p);
        return (int)pid;
    }
    free(script);
    fcntl(pfd[0], F_SETFL, O_NONBLOCK);
    p->out_fd = pfd[0];
    p->pid = pid;
    p->running = true;
    p->started_ms = eng_now(e);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &p->w};
    epoll_ctl(e->epfd, EPOLL_CTL_ADD, p->out_fd, &ev);
    p->next = e->procs;
    e->procs = p;
    tr->cur = p;
    tr->gens++;
    if (e->rec) {
        struct fl_rec_proc rp = {.host = s->hosts[t->host].name, .job = s->jobs[t->job].name,
                                 .task = t->index, .pid = pid, .command = cmd,
                                 .started_ms = p->started_ms, .log_path = p->log_path,
                                 .generation = p->gen};
        p->rec_no = fl_rec_proc_start(e->rec, &rp);
    }
    free(cmd);
    return 0;
}

/* ---- the loop ------------------------------------------------------------------- */

static void on_line(struct engine *e, struct proc *p, const char *line)
{
    const struct fl_scn_task *t = &e->s->tasks[p->task];
    fl_faults_on_line(e, p->host, t->job, t->index, line);
}

static bool have_log_triggers(const struct engine *e)
{
    for (size_t i = 0; i < e->nfaults; i++)
        if (e->faults[i].f->trigger.kind == FL_SCN_TRIG_LOG && e->faults[i].st == F_PENDING)
            return true;
    return false;
}

static void close_output(struct engine *e, struct proc *p)
{
    if (p->out_fd < 0)
        return;
    epoll_ctl(e->epfd, EPOLL_CTL_DEL, p->out_fd, NULL);
    close(p->out_fd);
    p->out_fd = -1;
    if (p->linelen) {           /* a last line without newline */
        p->line[p->linelen] = 0;
        if (have_log_triggers(e))
            on_line(e, p, p->line);
        p->linelen = 0;
    }
}

static void read_output(struct engine *e, struct proc *p)
{
    char buf[65536];
    for (;;) {
        ssize_t n = read(p->out_fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) {
            close_output(e, p);
            return;
        }
        if (write(p->log_fd, buf, (size_t)n) < 0) {
            /* a full disk for logs: keep running, the log is incomplete */
        }
        if (!have_log_triggers(e))
            continue;
        for (ssize_t i = 0; i < n; i++) {
            if (buf[i] == '\n' || p->linelen == sizeof p->line - 1) {
                p->line[p->linelen] = 0;
                on_line(e, p, p->line);
                p->linelen = 0;
                if (buf[i] == '\n')
                    continue;
            }
            p->line[p->linelen++] = buf[i];
        }
    }
}

/* Records an event (database, and what expectations count). */
static void record_event(struct engine *e, struct fl_evsrv_client *c, const struct fl_ev *ev,
                         char *raw)
{
    const struct fl_scenario *s = e->s;
    int host = fl_scn_host_find(s, c->host);
    int job = fl_scn_job_find(s, c->job);
    int task = c->task >= 0 ? c->task : -1;
    int64_t t = eng_now(e);
    if (e->rec)
        fl_rec_event(e->rec, t, c->host[0] ? c->host : NULL, job >= 0 ? c->job : NULL, task,
                     ev->kind, raw, ev->type == FL_EV_SYNC);
    if (e->nevents == e->capevents) {
        e->capevents = e->capevents ? e->capevents * 2 : 256;
        e->events = realloc(e->events, e->capevents * sizeof *e->events);
    }
    struct ev_seen *es = &e->events[e->nevents++];
    snprintf(es->kind, sizeof es->kind, "%s", ev->kind);
    es->host = host;
    es->job = job;
    const char *step = fl_ev_get(ev, "step");
    es->step = step ? atoll(step) : -1;
}

static void on_event(void *ctx, struct fl_evsrv_client *c, const struct fl_ev *ev, char *raw)
{
    struct engine *e = ctx;
    record_event(e, c, ev, raw);
    fl_faults_on_event(e, fl_scn_host_find(e->s, c->host), fl_scn_job_find(e->s, c->job),
                       c->task >= 0 ? c->task : -1, ev);
    if (ev->type == FL_EV_SYNC)
        fl_evsrv_reply(c, ev->seq);
}

/* An event read after every host is down: recorded, too late to trigger. */
static void on_late_event(void *ctx, struct fl_evsrv_client *c, const struct fl_ev *ev,
                          char *raw)
{
    record_event(ctx, c, ev, raw);
}

static void reap(struct engine *e)
{
    int st;
    pid_t pid;
    while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
        fl_host_note_reaped(pid);
        if (pid == e->shell_pid) {
            e->shell_pid = -pid;    /* done */
            e->shell_status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            continue;
        }
        bool found = false;
        for (size_t i = 0; i < e->s->n_hosts; i++)
            if (fl_host_reaped(&e->hosts[i].h, pid)) {
                found = true;
                if (!e->stopping && !e->hosts[i].down_by_fault)
                    eng_error(e, "host %s: init %d died unexpectedly", e->s->hosts[i].name,
                              (int)pid);
                eng_write_state(e);
            }
        if (found)
            continue;
        for (struct proc *p = e->procs; p; p = p->next) {
            if (p->pid != pid || !p->running)
                continue;
            p->running = false;
            p->ended_ms = eng_now(e);
            if (WIFEXITED(st)) {
                p->exit_code = WEXITSTATUS(st);
                p->sig = 0;
            } else {
                p->exit_code = -1;
                p->sig = WTERMSIG(st);
                p->core = WCOREDUMP(st);
            }
            if (e->rec)
                fl_rec_proc_end(e->rec, p->rec_no, p->ended_ms, p->exit_code, p->sig, p->core);
            /* Drain what it wrote before dying (its pipe may stay open in a
             * grandchild; take what is there now). */
            if (p->out_fd >= 0)
                read_output(e, p);
            struct task_rt *tr = &e->tasks[p->task];
            if (tr->relaunch_on_exit && tr->cur == p) {
                tr->relaunch_on_exit = false;
                if (!e->stopping && e->hosts[p->host].h.state == FL_HOST_UP)
                    eng_start_task(e, p->task);
            }
            break;
        }
    }
}

static bool task_final(const struct engine *e, int task)
{
    const struct task_rt *tr = &e->tasks[task];
    return tr->cur && !tr->cur->running && tr->restart_pending == 0;
}

/* Must the task have ended for the run to end (stop_when)? */
static bool stop_task(const struct fl_scenario *s, size_t t)
{
    bool stop_job = s->run.stop_all;
    for (size_t k = 0; !stop_job && k < s->run.n_stop_jobs; k++)
        if (s->run.stop_jobs[k] == s->tasks[t].job)
            stop_job = true;
    return stop_job;
}

static bool stop_condition(const struct engine *e)
{
    const struct fl_scenario *s = e->s;
    if (e->o->shell_host >= 0)
        return e->shell_pid < 0;
    for (size_t t = 0; t < s->n_tasks; t++)
        if (stop_task(s, t) && !task_final(e, (int)t))
            return false;
    return true;
}

/* At the timeout: the tasks the run still waited for ("worker:0, ps:1"). */
static void note_waiting(struct engine *e)
{
    char name[64];
    e->timeout_waiting[0] = 0;
    for (size_t t = 0; t < e->s->n_tasks; t++)
        if (stop_task(e->s, t) && !task_final(e, (int)t))
            eng_detail_add(e->timeout_waiting, sizeof e->timeout_waiting, "%s%s",
                           e->timeout_waiting[0] ? ", " : "",
                           fl_scn_task_name(e->s, (int)t, name, sizeof name));
}

static bool any_running(const struct engine *e)
{
    for (struct proc *p = e->procs; p; p = p->next)
        if (p->running)
            return true;
    return e->shell_pid > 0;
}

static void begin_stop(struct engine *e)
{
    if (e->stopping)
        return;
    e->stopping = true;
    fl_faults_heal_all(e);
    /* a pause without for: is still on: thaw it, so that SIGTERM can end
     * its task within the grace */
    for (size_t t = 0; t < e->s->n_tasks; t++) {
        char err[1024];
        if (eng_task_freeze(e, (int)t, false, err, sizeof err) < 0)
            eng_error(e, "ending the run: %s", err);
    }
    for (struct proc *p = e->procs; p; p = p->next) {
        if (!p->running)
            continue;
        if (p->stopped)
            eng_signal_proc(e, p, SIGCONT);
        eng_signal_proc(e, p, SIGTERM);
    }
    /* a second interrupt (both may come in one read) leaves no grace */
    e->kill_at = eng_now(e) + (e->interrupts > 1 ? 0 : e->s->run.grace_ms);
}

static void progress(struct engine *e, bool final)
{
    if (!e->o->progress)
        return;
    int up = 0, total = (int)e->s->n_tasks;
    for (size_t t = 0; t < e->s->n_tasks; t++)
        if (e->tasks[t].cur && e->tasks[t].cur->running)
            up++;
    int applied = 0;
    for (size_t i = 0; i < e->nfaults; i++)
        if (e->faults[i].st != F_PENDING)
            applied++;
    if (final)
        fprintf(stderr, "\r\033[K");
    else
        fprintf(stderr, "\r\033[K  %s %s  %.1fs  running %d/%d  events %zu  faults %d/%zu%s",
                e->s->name, e->variant, eng_now(e) / 1000.0, up, total, e->nevents, applied,
                e->nfaults, e->stopping ? "  stopping" : "");
    fflush(stderr);
}

/* Arms the timerfd for the next deadline: the timeout (none in shell mode),
 * a fault or heal, the grace period, a progress line, a recorder flush.
 * With none, disarms it (a deadline already passed would make it spin). */
static void arm_timer(struct engine *e)
{
    int64_t now = eng_now(e), next = e->o->shell_host >= 0 ? INT64_MAX : e->s->timeout_ms;
    int64_t f = fl_faults_next_deadline(e);
    if (f >= 0 && f < next)
        next = f;
    if (e->stopping && e->kill_at < next)
        next = e->kill_at;
    if (e->o->progress && now + 250 < next)
        next = now + 250;
    if (e->rec) {
        int64_t d = fl_rec_flush_due_ms(e->o->rec);
        if (d >= 0 && now + d < next)
            next = now + d;
    }
    struct itimerspec its = {0};   /* zero: disarmed */
    if (next != INT64_MAX) {
        int64_t delta = next - now;
        if (delta < 1)
            delta = 1;
        its.it_value.tv_sec = delta / 1000;
        its.it_value.tv_nsec = (delta % 1000) * 1000000;
    }
    timerfd_settime(e->timerfd, 0, &its, NULL);
}

static void accept_clients(struct engine *e)
{
    struct fl_evsrv_client *c;
    while ((c = fl_evsrv_accept(e->ev))) {
        struct watch *cw = malloc(sizeof *cw);
        if (!cw) {
            fl_evsrv_drop(e->ev, c);
            continue;
        }
        *cw = (struct watch){W_CLIENT, c};
        c->user = cw;   /* freed by the server when it drops c */
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = cw};
        epoll_ctl(e->epfd, EPOLL_CTL_ADD, c->fd, &ev);
    }
}

static void read_client(struct engine *e, struct fl_evsrv_client *c)
{
    if (fl_evsrv_read(e->ev, c, on_event, e) < 0) {
        epoll_ctl(e->epfd, EPOLL_CTL_DEL, c->fd, NULL);
        fl_evsrv_drop(e->ev, c);
    }
}

static void loop(struct engine *e)
{
    struct epoll_event evs[64];
    for (;;) {
        if (!e->stopping) {
            if (e->error[0] || e->interrupted || stop_condition(e))
                begin_stop(e);
            else if (e->o->shell_host < 0 && eng_now(e) >= e->s->timeout_ms) {
                e->timed_out = true;
                note_waiting(e);
                begin_stop(e);
            }
        }
        if (e->stopping && !any_running(e))
            break;
        if (e->stopping && eng_now(e) >= e->kill_at) {
            for (struct proc *p = e->procs; p; p = p->next)
                eng_signal_proc(e, p, SIGKILL);
            if (e->shell_pid > 0)
                kill(e->shell_pid, SIGKILL);
            e->kill_at = eng_now(e) + 1000;
        }
        arm_timer(e);
        int n = epoll_wait(e->epfd, evs, 64, -1);
        if (n < 0 && errno != EINTR) {
            eng_error(e, "epoll_wait: %s", strerror(errno));
            break;
        }
        for (int i = 0; i < n; i++) {
            struct watch *w = evs[i].data.ptr;
            switch (w->type) {
            case W_SIGNAL: {
                struct signalfd_siginfo si;
                while (read(e->sigfd, &si, sizeof si) == sizeof si) {
                    if (si.ssi_signo == SIGCHLD)
                        continue;
                    if (!e->interrupted)
                        fprintf(stderr, "\nfaultline: %s: stopping the run and cleaning up "
                                "(interrupt again to kill its processes at once)\n",
                                strsignal((int)si.ssi_signo));
                    else if (e->interrupts == 1)
                        fprintf(stderr, "faultline: %s again: killing the run's processes now\n",
                                strsignal((int)si.ssi_signo));
                    e->interrupted = true;
                    if (++e->interrupts == 2 && e->stopping)
                        e->kill_at = eng_now(e);    /* no more grace */
                }
                reap(e);
                break;
            }
            case W_TIMER: {
                uint64_t x;
                if (read(e->timerfd, &x, sizeof x) < 0) { /* spurious */ }
                break;
            }
            case W_LISTEN:
                accept_clients(e);
                break;
            case W_CLIENT:
                read_client(e, w->ptr);
                break;
            case W_OUTPUT:
                read_output(e, w->ptr);
                break;
            }
        }
        if (!e->stopping)
            fl_faults_tick(e);
        if (e->rec && fl_rec_flush_due_ms(e->o->rec) == 0)
            fl_rec_flush(e->o->rec);
        progress(e, false);
    }
    progress(e, true);
}

/* ---- shell mode ----------------------------------------------------------------- */

static void print_commands(struct engine *e)
{
    char err[512], tname[64];
    if (e->s->n_dims)
        printf("faultline: variant %s\n", e->variant);
    printf("faultline: run %s is up; hosts:", e->run_id);
    for (size_t i = 0; i < e->s->n_hosts; i++)
        printf(" %s=%s", e->s->hosts[i].name, e->hosts[i].addr);
    printf("\n");
    for (size_t t = 0; t < e->s->n_tasks; t++) {
        char *cmd = expand_command(e, (int)t, err, sizeof err);
        printf("  %s on %s: %s\n", fl_scn_task_name(e->s, (int)t, tname, sizeof tname),
               e->s->hosts[e->s->tasks[t].host].name, cmd ? cmd : err);
        free(cmd);
    }
    /* exec finds the run under --out, relative to its own directory: the
     * line works from any terminal only with the real path of --out (e->dir
     * is <real path of --out>/runs/<run id>) and of faultline itself */
    char out[PATH_MAX];
    snprintf(out, sizeof out, "%s", e->dir);
    for (int up = 0; up < 2; up++) {
        char *slash = strrchr(out, '/');
        if (slash)
            *slash = 0;
    }
    printf("Another terminal: %s/faultline exec --out %s %s HOST -- CMD...   Leave with 'exit'.\n",
           e->o->bin_dir, out, e->run_id);
    fflush(stdout);
}

static int start_shell(struct engine *e)
{
    int h = e->o->shell_host;
    char err[1024];
    char **env;
    int rc;
    /* the first task on the host gives the env; else a plain one */
    int task = -1;
    for (size_t t = 0; t < e->s->n_tasks; t++)
        if (e->s->tasks[t].host == h) {
            task = (int)t;
            break;
        }
    if (task >= 0)
        env = build_env(e, task, err, sizeof err, &rc);
    else
        env = NULL;
    char ps1[128];
    snprintf(ps1, sizeof ps1, "PS1=[%s] \\w\\$ ", e->s->hosts[h].name);
    size_t n = 0;
    while (env && env[n])
        n++;
    char **env2 = calloc(n + 2, sizeof *env2);
    for (size_t i = 0; i < n; i++)
        env2[i] = env[i];
    env2[n] = ps1;
    const char *shell = getenv("SHELL");
    if (!shell || access(shell, X_OK) != 0)
        shell = "/bin/sh";
    char *argv[] = {(char *)shell, NULL};
    struct fl_spawn sp = {.argv = argv, .envp = env ? env2 : NULL, .stdin_fd = 0, .stdout_fd = 1,
                          .stderr_fd = 2, .new_session = false};
    pid_t pid = fl_host_spawn(&e->hosts[h].h, &sp, err, sizeof err);
    free(env2);
    free_strv(env);
    if (pid < 0) {
        eng_error(e, "shell on %s: %s", e->s->hosts[h].name, err);
        return (int)pid;
    }
    /* give it the terminal */
    if (isatty(0)) {
        signal(SIGTTOU, SIG_IGN);
        tcsetpgrp(0, pid);
    }
    e->shell_pid = pid;
    return 0;
}

/* ---- the run ---------------------------------------------------------------------- */

/* Removes one of the run's cgroup trees; one that cannot be removed (a
 * process of it does not die, say) is named, with who removes it later:
 * the run's directory may be gone at the end, but the owner mark in the
 * cgroup (cgroup.c) tells `gc` that this harness has ended. */
static void remove_run_cgroup(struct engine *e, const char *path)
{
    int rc = fl_cgroup_remove_run(path);
    if (rc < 0 && rc != -ENOENT)
        fprintf(stderr, "faultline: run %s: removing cgroup %s: %s (left behind: `faultline gc` "
                        "removes it once this faultline process has ended)\n",
                e->run_id, path, strerror(-rc));
}

static void teardown(struct engine *e)
{
    const struct fl_scenario *s = e->s;
    if (e->o->shell_host >= 0 && isatty(0))
        tcsetpgrp(0, getpgrp());
    for (size_t i = 0; i < s->n_hosts; i++)
        fl_host_kill(&e->hosts[i].h);
    /* a frozen process dies only once thawed (and its host's init only
     * once it has): killed, then thawed (after a set-up error, say) */
    for (size_t t = 0; t < s->n_tasks; t++)
        if (e->tasks[t].frozen) {
            fl_cgroup_signal(e->tasks[t].cgroup, SIGKILL);
            eng_task_freeze(e, (int)t, false, NULL, 0);
        }
    /* every process is dead with its host; reap them all (and the inits) */
    int st;
    pid_t pid;
    while ((pid = waitpid(-1, &st, 0)) > 0 || (pid < 0 && errno == EINTR)) {
        fl_host_note_reaped(pid);
        for (struct proc *p = e->procs; p; p = p->next)
            if (p->pid == pid)
                p->running = false;
    }
    fl_faults_link_free(e);
    fl_fabric_destroy(e->fab);
    e->fab = NULL;
    if (e->any_cgroup)
        remove_run_cgroup(e, e->cgroup_run);
    if (e->any_freezer && !(e->any_cgroup && !strcmp(e->freezer_run, e->cgroup_run)))
        remove_run_cgroup(e, e->freezer_run);
    if (e->any_mem && !(e->any_cgroup && !strcmp(e->mem_run, e->cgroup_run)) &&
        !(e->any_freezer && !strcmp(e->mem_run, e->freezer_run)))
        remove_run_cgroup(e, e->mem_run);
    /* Every process is gone, so what they sent is all in the socket buffers:
     * read it, or an event sent just before an exit (a plain EVENT, no answer
     * awaited) was lost whenever the exit was seen first. */
    if (e->ev)
        fl_evsrv_drain(e->ev, on_late_event, e);
    fl_evsrv_close(e->ev);      /* drops every client left, with its watch */
    e->ev = NULL;
    /* sized (tmpfs) disks stay mounted until the checks have looked at them */
}

static void free_engine(struct engine *e)
{
    struct proc *p = e->procs;
    while (p) {
        struct proc *n = p->next;
        if (p->out_fd >= 0)
            close(p->out_fd);
        if (p->log_fd >= 0)
            close(p->log_fd);
        free(p);
        p = n;
    }
    for (size_t i = 0; i < e->s->n_hosts; i++) {
        for (size_t m = 0; m < e->hosts[i].nmounts; m++) {
            free(e->hosts[i].mounts[m].src);
            free(e->hosts[i].mounts[m].dst);
        }
        free(e->hosts[i].mounts);
        free((char *)e->hosts[i].h.spec.hosts_file);
    }
    for (size_t i = 0; i < e->nfaults; i++) {
        free(e->faults[i].tasks);
        free(e->faults[i].starts);
    }
    fl_disk_free(e);
    fl_durable_free(e);
    free(e->faults);
    free(e->hosts);
    free(e->tasks);
    free(e->events);
    if (e->epfd >= 0)
        close(e->epfd);
    if (e->sigfd >= 0)
        close(e->sigfd);
    if (e->timerfd >= 0)
        close(e->timerfd);
}

int fl_engine_run(const struct fl_scenario *s, size_t v, const struct fl_engine_opts *o,
                  struct fl_engine_result *res)
{
    struct engine E = {0}, *e = &E;
    char err[1024];
    memset(res, 0, sizeof *res);
    e->s = s;
    e->v = v;
    e->o = o;
    e->res = res;
    e->epfd = e->sigfd = e->timerfd = -1;
    e->shell_status = -1;
    /* held until the end: the last run to end removes what runs share */
    e->runs_lock = fl_runs_lock(false);
    e->t0_mono = mono_ms();
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    e->t0_unix = (int64_t)rt.tv_sec * 1000 + rt.tv_nsec / 1000000;
    fl_scn_variant_name(s, v, e->variant, sizeof e->variant);
    if (o->seed_set)
        e->seed = o->seed;
    else if (s->seed_set)
        e->seed = s->seed;
    else if (getrandom(&e->seed, sizeof e->seed, 0) != sizeof e->seed)
        e->seed = (uint64_t)e->t0_unix;
    fl_rec_make_run_id(e->run_id, sizeof e->run_id, e->t0_unix);
    snprintf(res->run_id, sizeof res->run_id, "%s", e->run_id);
    char out_abs[PATH_MAX];
    const char *out = o->out_dir ? o->out_dir : "out";
    fl_mkdir_p(out, 0755);
    if (!realpath(out, out_abs))
        snprintf(out_abs, sizeof out_abs, "%s", out);
    snprintf(e->dir, sizeof e->dir, "%s/runs/%s", out_abs, e->run_id);
    snprintf(res->run_dir, sizeof res->run_dir, "%s", e->dir);
    snprintf(e->ev_path, sizeof e->ev_path, "%s/ev.sock", e->dir);
    snprintf(e->fsdir, sizeof e->fsdir, "%s/fs", e->dir);
    e->expose[0] = e->dir;
    e->expose[1] = o->bin_dir;
    e->expose[2] = s->dir;
    if (o->shell_host < 0)      /* a shell applies no faults: nothing to sync on */
        fl_faults_sync_kinds(s, v, e->sync_kinds, sizeof e->sync_kinds);

    e->hosts = calloc(s->n_hosts, sizeof *e->hosts);
    e->tasks = calloc(s->n_tasks, sizeof *e->tasks);
    for (size_t i = 0; i < s->n_hosts; i++)
        e->hosts[i].h.pidfd = -1;

    /* The state file before anything else of the run exists (its database
     * row, cgroups, mounts, hosts): `gc` judges a run by it, so a run killed
     * during set-up is collected (and its row marked) at once, and a live run
     * in set-up is never taken for a dead one. */
    if (fl_mkdir_p(e->dir, 0755) == 0)
        eng_write_state(e);

    if (o->rec) {
        struct fl_rec_run_info ri = {.run_id = e->run_id, .scenario = s->name,
                                     .scenario_file = s->path, .variant = e->variant,
                                     .scenario_hash = s->hash, .seed = e->seed,
                                     .git_rev = o->git_rev, .started_at_ms = e->t0_unix};
        if (fl_rec_run_begin(o->rec, &ri, &e->rec) < 0) {
            fprintf(stderr, "faultline: recording run %s in %s: %s (continuing without)\n",
                    e->run_id, fl_rec_path(o->rec), fl_rec_errmsg(o->rec));
            e->rec = NULL;
        }
    }
    fl_faults_init(e);
    if (fl_disk_init(e, err, sizeof err) < 0 || fl_durable_init(e, err, sizeof err) < 0) {
        eng_error(e, "%s", err);
        goto judge;
    }

    if (setup_dirs(e) < 0)
        goto judge;
    if (fl_fabric_create(&e->fab, e->run_id, err, sizeof err) < 0) {
        eng_error(e, "%s", err);
        goto judge;
    }
    eng_write_state(e);
    if (hosts_up_all(e) < 0)
        goto judge;
    if (fl_evsrv_open(&e->ev, e->ev_path, free, err, sizeof err) < 0) {
        eng_error(e, "event channel: %s", err);
        goto judge;
    }
    e->epfd = epoll_create1(EPOLL_CLOEXEC);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    e->sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    e->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    e->w_sig = (struct watch){W_SIGNAL, NULL};
    e->w_timer = (struct watch){W_TIMER, NULL};
    e->w_listen = (struct watch){W_LISTEN, NULL};
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &e->w_sig};
    epoll_ctl(e->epfd, EPOLL_CTL_ADD, e->sigfd, &ev);
    ev.data.ptr = &e->w_timer;
    epoll_ctl(e->epfd, EPOLL_CTL_ADD, e->timerfd, &ev);
    ev.data.ptr = &e->w_listen;
    epoll_ctl(e->epfd, EPOLL_CTL_ADD, fl_evsrv_fd(e->ev), &ev);

    if (o->shell_host >= 0) {
        print_commands(e);
        if (o->shell_start_roles)
            for (size_t t = 0; t < s->n_tasks && !e->error[0]; t++)
                eng_start_task(e, (int)t);
        start_shell(e);
    } else {
        fl_faults_tick_setup(e);    /* at: 0s network and limit faults, before any task */
        for (size_t t = 0; t < s->n_tasks && !e->error[0]; t++)
            eng_start_task(e, (int)t);
        fl_faults_tick(e);          /* at: 0s faults on processes */
    }
    loop(e);

judge:
    teardown(e);
    /* drain and close every log */
    for (struct proc *p = e->procs; p; p = p->next) {
        if (p->out_fd >= 0) {
            read_output(e, p);
            close_output(e, p);
        }
        if (p->log_fd >= 0) {
            close(p->log_fd);
            p->log_fd = -1;
        }
    }
    res->interrupted = e->interrupted;
    res->shell_status = e->shell_status;
    res->duration_ms = eng_now(e);
    if (e->error[0]) {
        snprintf(res->verdict, sizeof res->verdict, "error");
        snprintf(res->reason, sizeof res->reason, "%s", e->error);
    } else if (e->interrupted) {
        snprintf(res->verdict, sizeof res->verdict, "error");
        snprintf(res->reason, sizeof res->reason, "interrupted");
    }
    if (!e->error[0] && !e->interrupted)
        fl_faults_unfired(e, res->unfired, sizeof res->unfired);
    fl_check_run(e);            /* sets verdict (if not error), expected, observed */
    if (e->rec)
        fl_rec_run_end(e->rec, res->verdict, res->reason[0] ? res->reason : NULL,
                       res->duration_ms);
    e->rec = NULL;
    /* the run directory: with --keep, a copy of every disk too; else the
     * logs when the run did not pass, nothing when it did (or when it was
     * a shell session, which has no expectations to fail).  Only a directory
     * that stays is marked "done": one about to be removed stays "running",
     * so that `gc` removes it if the harness is killed before it is gone. */
    bool remove_dir = !o->keep && (!strcmp(res->verdict, "pass") || o->shell_host >= 0);
    if (!remove_dir)
        eng_write_state(e);
    fl_durable_free(e);         /* the stores: not kept, not copied with the disks */
    if (o->keep) {
        int rc = fl_copy_tree(e->fsdir, e->dir);
        if (rc < 0)
            fprintf(stderr, "faultline: keeping the disks of run %s: %s\n", e->run_id, strerror(-rc));
    }
    fl_rm_rf(e->fsdir);
    if (remove_dir)
        fl_rm_rf(e->dir);
    /* the workdir this run made and the faultline/ parent cgroups, when no
     * other run is alive to use them */
    bool last = fl_runs_lock_try_last(e->runs_lock);
    if (last) {
        fl_workdir_remove(s->workdir);
        fl_cgroup_parents_remove();
    }
    fl_runs_lock_release(last ? e->runs_lock : -1, last);
    free_engine(e);
    return 0;
}
