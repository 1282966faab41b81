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
 * second interrupt), and waits for all of them.  Tear-down removes the
 * hosts (and with them their namespaces and mounts; a task cgroup still
 * frozen is thawed first, or its processes could not die), what the fault
 * kinds made, the switch and the cgroups; then check.c judges, the recorder
 * gets the verdict, and the run directory goes (kept with its logs when the
 * run did not pass, whole with --keep).
 *
 * Shell mode (`faultline shell`): the same set-up and tear-down, but no
 * fault is armed (fl_faults_init keeps none) and there is no timeout: the
 * run ends when the shell exits (or on interrupt or harness error).
 *
 * States of a run (engine_int.h): SETUP -> RUNNING -> STOPPING (SIGTERM
 * sent) -> KILLING (grace over) -> ENDED (torn down) -> JUDGED, one enum
 * moved only forward by eng_set_state.  Invariant: every process, host and
 * fabric created is listed in the run (and the state file) until removed.
 *
 * What happens to a host or a task (start, signal, freeze, down, up) is the
 * run layer's (harness/run/); when faults fire is schedule.c's; what a fault
 * does is its kind's (harness/faults/).
 */
#include "harness/base/monoclock.h"
#include "harness/base/text.h"
#include "harness/engine/engine_int.h"
#include "harness/record/recorder.h"
#include "harness/sys/cgroup.h"
#include "harness/sys/rundir.h"
#include "harness/sys/shared_leftovers.h"
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

/* The signals the run loop reads from its signalfd (blocked from the start). */
static void loop_signals(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGCHLD);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGHUP);
}

int fl_engine_global_init(char *err, size_t errlen)
{
    int rc = fl_host_global_init(err, errlen);
    if (rc < 0)
        return rc;
    sigset_t set;
    loop_signals(&set);
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


void eng_set_state(struct engine *e, enum run_state s)
{
    /* forward only (a state may be skipped: a set-up error ends at once) */
    if (s <= e->state) {
        fprintf(stderr, "faultline: bug: run state %d after %d\n", (int)s, (int)e->state);
        abort();
    }
    e->state = s;
}

/* ---- set-up ----------------------------------------------------------------- */






/* The run's cgroup directory of one controller (run, len: the parent of
 * the first host cgroup made in it, host_cgroup), once: *any says so. */
static void run_cgroup(char *run, size_t len, bool *any, const char *host_cgroup)
{
    if (*any)
        return;
    snprintf(run, len, "%s", host_cgroup);
    char *slash = strrchr(run, '/');
    if (slash)
        *slash = 0;
    *any = true;
}

static int setup_dirs(struct engine *e)
{
    const struct fl_scenario *s = e->r.s;
    char path[PATH_MAX];
    int rc;
    if ((rc = fl_mkdir_p(e->r.dir, 0755)) < 0) {
        fl_run_error(&e->r, "mkdir %s: %s", e->r.dir, strerror(-rc));
        return rc;
    }
    snprintf(path, sizeof path, "%s/logs", e->r.dir);
    fl_mkdir_p(path, 0755);
    /* Every disk, /tmp and shared path of the run lives on one tmpfs in the
     * harness's private mount namespace: creating them costs microseconds,
     * and they all vanish with one unmount (or with the harness). */
    if ((rc = fl_mkdir_p(e->r.fsdir, 0755)) < 0 ||
        (mount("fl-fs", e->r.fsdir, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755") < 0 && (rc = -errno))) {
        fl_run_error(&e->r, "mount tmpfs at %s: %s", e->r.fsdir, strerror(-rc));
        return rc;
    }
    /* a copy of the scenario, for replay */
    char *text;
    size_t len;
    if (fl_read_file(s->path, &text, &len) == 0) {
        snprintf(path, sizeof path, "%s/scenario.yaml", e->r.dir);
        fl_write_file(path, text, len);
        free(text);
    }
    if ((rc = fl_workdir_make(s->workdir)) < 0) {
        fl_run_error(&e->r, "mkdir workdir %s: %s", s->workdir, strerror(-rc));
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
    snprintf(path, sizeof path, "%s/etc-hosts", e->r.dir);
    rc = fl_write_file(path, hosts, hlen);
    free(hosts);
    if (rc < 0) {
        fl_run_error(&e->r, "write %s: %s", path, strerror(-rc));
        return rc;
    }
    /* shared paths */
    for (size_t m = 0; m < s->n_shared; m++) {
        snprintf(path, sizeof path, "%s/shared/%zu", e->r.fsdir, m);
        if ((rc = fl_mkdir_p(path, 0755)) < 0) {
            fl_run_error(&e->r, "mkdir %s: %s", path, strerror(-rc));
            return rc;
        }
    }
    /* which hosts need a pids cgroup (a threads limit on them in this run)
     * and which a memory cgroup (a memory limit): the kinds' init said */
    for (size_t i = 0; i < s->n_hosts; i++) {
        struct host_rt *hr = &e->r.hosts[i];
        snprintf(hr->disk, sizeof hr->disk, "%s/hosts/%s/disk", e->r.fsdir, s->hosts[i].name);
        snprintf(hr->tmp, sizeof hr->tmp, "%s/hosts/%s/tmp", e->r.fsdir, s->hosts[i].name);
        fl_fabric_addr_str((int)i, hr->addr, sizeof hr->addr);
        if ((rc = fl_run_make_disk(&e->r, (int)i, true)) < 0)
            break;
        if ((rc = fl_run_make_tmp(&e->r, (int)i)) < 0)
            break;
        /* shared mounts of this host */
        for (size_t m = 0; m < s->n_shared; m++)
            for (size_t k = 0; k < s->shared[m].n_hosts; k++)
                if (s->shared[m].hosts[k] == (int)i) {
                    hr->mounts = realloc(hr->mounts, (hr->nmounts + 1) * sizeof *hr->mounts);
                    struct fl_host_mount *hm = &hr->mounts[hr->nmounts++];
                    if (asprintf(&hm->src, "%s/shared/%zu", e->r.fsdir, m) < 0 ||
                        asprintf(&hm->dst, "%s/%s", s->workdir, s->shared[m].path) < 0)
                        abort();
                }
        if (hr->need_cgroup) {
            rc = fl_cgroup_create(e->r.run_id, s->hosts[i].name, hr->cgroup, sizeof hr->cgroup);
            if (rc < 0) {
                fl_run_error(&e->r, "host %s: create pids cgroup for the limit fault: %s", s->hosts[i].name,
                          strerror(-rc));
                break;
            }
            hr->has_cgroup = true;
            run_cgroup(e->r.cgroup_run, sizeof e->r.cgroup_run, &e->r.any_cgroup, hr->cgroup);
        }
        if (hr->need_mem_cgroup) {
            rc = fl_cgroup_create_memory(e->r.run_id, s->hosts[i].name, hr->mem_cgroup,
                                         sizeof hr->mem_cgroup);
            if (rc < 0) {
                fl_run_error(&e->r, "host %s: create memory cgroup for the limit fault: %s%s", s->hosts[i].name,
                          strerror(-rc), rc == -ENOTSUP ? " (this machine has no memory cgroup "
                          "controller: remove the memory limit)" : "");
                break;
            }
            hr->has_mem_cgroup = true;
            run_cgroup(e->r.mem_run, sizeof e->r.mem_run, &e->r.any_mem, hr->mem_cgroup);
        }
        char etc[PATH_MAX];
        snprintf(etc, sizeof etc, "%s/etc-hosts", e->r.dir);
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
            .expose = e->r.expose,
            .nexpose = 3,
        };
        hr->h.pidfd = -1;
    }
    return rc < 0 ? rc : 0;
}

/* Brings every host up in one batch. */
static int hosts_up_all(struct engine *e)
{
    const struct fl_scenario *s = e->r.s;
    char err[1024];
    struct fl_host **hp = calloc(s->n_hosts, sizeof *hp);
    for (size_t i = 0; i < s->n_hosts; i++)
        hp[i] = &e->r.hosts[i].h;
    int rc = 0;
    for (size_t i = 0; i < s->n_hosts && rc == 0; i++)
        if ((rc = e->r.host_starting(&e->r, (int)i, err, sizeof err)) < 0)
            fl_run_error(&e->r, "%s", err);
    if (rc == 0 && (rc = fl_host_up_batch(hp, s->n_hosts, e->r.fab, err, sizeof err)) < 0)
        fl_run_error(&e->r, "%s", err);
    free(hp);
    fl_run_write_state(&e->r);
    return rc;
}



/* How long a freeze may take: tasks freeze in microseconds, unless one is
 * stuck in the kernel (a hung NFS read, say). */
#define FREEZE_TIMEOUT_MS 2000



/* ---- processes ---------------------------------------------------------------- */






/* ---- the loop ------------------------------------------------------------------- */

static void on_line(struct engine *e, struct proc *p, const char *line)
{
    const struct fl_scn_task *t = &e->r.s->tasks[p->task];
    fl_faults_on_line(e, p->host, t->job, t->index, line);
}

static bool have_log_triggers(const struct engine *e)
{
    for (size_t i = 0; i < e->r.nfaults; i++)
        if (e->r.faults[i].f->trigger.kind == FL_SCN_TRIG_LOG && e->r.faults[i].st == F_PENDING)
            return true;
    return false;
}

static void close_output(struct engine *e, struct proc *p)
{
    if (p->out_fd < 0)
        return;
    epoll_ctl(e->r.epfd, EPOLL_CTL_DEL, p->out_fd, NULL);
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
    const struct fl_scenario *s = e->r.s;
    int host = fl_scn_host_find(s, c->host);
    int job = fl_scn_job_find(s, c->job);
    int task = c->task >= 0 ? c->task : -1;
    int64_t t = fl_run_now(&e->r);
    if (e->r.rec)
        fl_rec_event(e->r.rec, t, c->host[0] ? c->host : NULL, job >= 0 ? c->job : NULL, task,
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
    fl_faults_on_event(e, fl_scn_host_find(e->r.s, c->host), fl_scn_job_find(e->r.s, c->job),
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
        for (size_t i = 0; i < e->r.s->n_hosts; i++)
            if (fl_host_reaped(&e->r.hosts[i].h, pid)) {
                found = true;
                if (!eng_stopping(e) && !e->r.hosts[i].down_by_fault)
                    fl_run_error(&e->r, "host %s: init %d died unexpectedly", e->r.s->hosts[i].name,
                              (int)pid);
                fl_run_write_state(&e->r);
            }
        if (found)
            continue;
        for (struct proc *p = e->r.procs; p; p = p->next) {
            if (p->pid != pid || !p->running)
                continue;
            p->running = false;
            p->ended_ms = fl_run_now(&e->r);
            if (WIFEXITED(st)) {
                p->exit_code = WEXITSTATUS(st);
                p->sig = 0;
            } else {
                p->exit_code = -1;
                p->sig = WTERMSIG(st);
                p->core = WCOREDUMP(st);
            }
            if (e->r.rec)
                fl_rec_proc_end(e->r.rec, p->rec_no, p->ended_ms, p->exit_code, p->sig, p->core);
            /* Drain what it wrote before dying (its pipe may stay open in a
             * grandchild; take what is there now). */
            if (p->out_fd >= 0)
                read_output(e, p);
            struct task_rt *tr = &e->r.tasks[p->task];
            if (tr->relaunch_on_exit && tr->cur == p) {
                tr->relaunch_on_exit = false;
                if (!eng_stopping(e) && e->r.hosts[p->host].h.state == FL_HOST_UP)
                    fl_run_start_task(&e->r, p->task);
            }
            break;
        }
    }
}

static bool task_final(const struct engine *e, int task)
{
    const struct task_rt *tr = &e->r.tasks[task];
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
    const struct fl_scenario *s = e->r.s;
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
    for (size_t t = 0; t < e->r.s->n_tasks; t++)
        if (stop_task(e->r.s, t) && !task_final(e, (int)t))
            fl_text_add(e->timeout_waiting, sizeof e->timeout_waiting, "%s%s",
                           e->timeout_waiting[0] ? ", " : "",
                           fl_scn_task_name(e->r.s, (int)t, name, sizeof name));
}

static bool any_running(const struct engine *e)
{
    for (struct proc *p = e->r.procs; p; p = p->next)
        if (p->running)
            return true;
    return e->shell_pid > 0;
}

/* RUNNING -> STOPPING, for why: every fault healed, every task asked to end. */
static void begin_stop(struct engine *e, enum stop_reason why)
{
    if (eng_stopping(e))
        return;
    e->why = why;
    eng_set_state(e, RUN_STOPPING);
    fl_faults_heal_all(e);
    /* a pause without for: is still on: thaw it, so that SIGTERM can end
     * its task within the grace */
    for (size_t t = 0; t < e->r.s->n_tasks; t++) {
        char err[1024];
        if (fl_run_task_freeze(&e->r, (int)t, false, err, sizeof err) < 0)
            fl_run_error(&e->r, "ending the run: %s", err);
    }
    for (struct proc *p = e->r.procs; p; p = p->next) {
        if (!p->running)
            continue;
        if (p->stopped)
            fl_run_signal_proc(&e->r, p, SIGCONT);
        fl_run_signal_proc(&e->r, p, SIGTERM);
    }
    /* a second interrupt (both may come in one read) leaves no grace */
    e->kill_at = fl_run_now(&e->r) + (e->interrupts > 1 ? 0 : e->r.s->run.grace_ms);
}

static void progress(struct engine *e, bool final)
{
    if (!e->o->progress)
        return;
    int up = 0, total = (int)e->r.s->n_tasks;
    for (size_t t = 0; t < e->r.s->n_tasks; t++)
        if (e->r.tasks[t].cur && e->r.tasks[t].cur->running)
            up++;
    int applied = 0;
    for (size_t i = 0; i < e->r.nfaults; i++)
        if (e->r.faults[i].st != F_PENDING)
            applied++;
    if (final)
        fprintf(stderr, "\r\033[K");
    else
        fprintf(stderr, "\r\033[K  %s %s  %.1fs  running %d/%d  events %zu  faults %d/%zu%s",
                e->r.s->name, e->r.variant, fl_run_now(&e->r) / 1000.0, up, total, e->nevents, applied,
                e->r.nfaults, eng_stopping(e) ? "  stopping" : "");
    fflush(stderr);
}

/* Arms the timerfd for the next deadline: the timeout (none in shell mode),
 * a fault or heal, the grace period, a progress line, a recorder flush.
 * With none, disarms it (a deadline already passed would make it spin). */
static void arm_timer(struct engine *e)
{
    int64_t now = fl_run_now(&e->r), next = e->o->shell_host >= 0 ? INT64_MAX : e->r.s->timeout_ms;
    int64_t f = fl_faults_next_deadline(e);
    if (f >= 0 && f < next)
        next = f;
    if (eng_stopping(e) && e->kill_at < next)
        next = e->kill_at;
    if (e->o->progress && now + 250 < next)
        next = now + 250;
    if (e->r.rec) {
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
        epoll_ctl(e->r.epfd, EPOLL_CTL_ADD, c->fd, &ev);
    }
}

static void read_client(struct engine *e, struct fl_evsrv_client *c)
{
    if (fl_evsrv_read(e->ev, c, on_event, e) < 0) {
        epoll_ctl(e->r.epfd, EPOLL_CTL_DEL, c->fd, NULL);
        fl_evsrv_drop(e->ev, c);
    }
}

static void loop(struct engine *e)
{
    struct epoll_event evs[64];
    for (;;) {
        if (e->state == RUN_RUNNING) {
            if (e->r.error[0])
                begin_stop(e, STOP_ERROR);
            else if (e->interrupts)
                begin_stop(e, STOP_INTERRUPT);
            else if (stop_condition(e))
                begin_stop(e, STOP_DONE);
            else if (e->o->shell_host < 0 && fl_run_now(&e->r) >= e->r.s->timeout_ms) {
                note_waiting(e);
                begin_stop(e, STOP_TIMEOUT);
            }
        }
        if (eng_stopping(e) && !any_running(e))
            break;
        if (eng_stopping(e) && fl_run_now(&e->r) >= e->kill_at) {
            if (e->state == RUN_STOPPING)
                eng_set_state(e, RUN_KILLING);
            for (struct proc *p = e->r.procs; p; p = p->next)
                fl_run_signal_proc(&e->r, p, SIGKILL);
            if (e->shell_pid > 0)
                kill(e->shell_pid, SIGKILL);
            e->kill_at = fl_run_now(&e->r) + 1000;
        }
        arm_timer(e);
        int n = epoll_wait(e->r.epfd, evs, 64, -1);
        if (n < 0 && errno != EINTR) {
            fl_run_error(&e->r, "epoll_wait: %s", strerror(errno));
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
                    if (!e->interrupts)
                        fprintf(stderr, "\nfaultline: %s: stopping the run and cleaning up "
                                "(interrupt again to kill its processes at once)\n",
                                strsignal((int)si.ssi_signo));
                    else if (e->interrupts == 1)
                        fprintf(stderr, "faultline: %s again: killing the run's processes now\n",
                                strsignal((int)si.ssi_signo));
                    if (++e->interrupts == 2 && eng_stopping(e))
                        e->kill_at = fl_run_now(&e->r);    /* no more grace */
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
        if (!eng_stopping(e))
            fl_faults_tick(e);
        if (e->r.rec && fl_rec_flush_due_ms(e->o->rec) == 0)
            fl_rec_flush(e->o->rec);
        progress(e, false);
    }
    progress(e, true);
}

/* ---- shell mode ----------------------------------------------------------------- */

static void print_commands(struct engine *e)
{
    char err[512], tname[64];
    if (e->r.s->n_dims)
        printf("faultline: variant %s\n", e->r.variant);
    printf("faultline: run %s is up; hosts:", e->r.run_id);
    for (size_t i = 0; i < e->r.s->n_hosts; i++)
        printf(" %s=%s", e->r.s->hosts[i].name, e->r.hosts[i].addr);
    printf("\n");
    for (size_t t = 0; t < e->r.s->n_tasks; t++) {
        char *cmd = fl_run_task_command(&e->r, (int)t, err, sizeof err);
        printf("  %s on %s: %s\n", fl_scn_task_name(e->r.s, (int)t, tname, sizeof tname),
               e->r.s->hosts[e->r.s->tasks[t].host].name, cmd ? cmd : err);
        free(cmd);
    }
    /* exec finds the run under --out, relative to its own directory: the
     * line works from any terminal only with the real path of --out (e->r.dir
     * is <real path of --out>/runs/<run id>) and of faultline itself */
    char out[PATH_MAX];
    snprintf(out, sizeof out, "%s", e->r.dir);
    for (int up = 0; up < 2; up++) {
        char *slash = strrchr(out, '/');
        if (slash)
            *slash = 0;
    }
    printf("Another terminal: %s/faultline exec --out %s %s HOST -- CMD...   Leave with 'exit'.\n",
           e->o->bin_dir, out, e->r.run_id);
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
    for (size_t t = 0; t < e->r.s->n_tasks; t++)
        if (e->r.s->tasks[t].host == h) {
            task = (int)t;
            break;
        }
    if (task >= 0)
        env = fl_run_task_env(&e->r, task, err, sizeof err, &rc);
    else
        env = NULL;
    char ps1[128];
    snprintf(ps1, sizeof ps1, "PS1=[%s] \\w\\$ ", e->r.s->hosts[h].name);
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
    pid_t pid = fl_host_spawn(&e->r.hosts[h].h, &sp, err, sizeof err);
    free(env2);
    fl_run_free_strv(env);
    if (pid < 0) {
        fl_run_error(&e->r, "shell on %s: %s", e->r.s->hosts[h].name, err);
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
                e->r.run_id, path, strerror(-rc));
}

static void teardown(struct engine *e)
{
    const struct fl_scenario *s = e->r.s;
    if (e->o->shell_host >= 0 && isatty(0))
        tcsetpgrp(0, getpgrp());
    for (size_t i = 0; i < s->n_hosts; i++)
        fl_host_kill(&e->r.hosts[i].h);
    /* a frozen process dies only once thawed (and its host's init only
     * once it has): killed, then thawed (after a set-up error, say) */
    for (size_t t = 0; t < s->n_tasks; t++)
        if (e->r.tasks[t].frozen) {
            fl_cgroup_signal(e->r.tasks[t].cgroup, SIGKILL);
            fl_run_task_freeze(&e->r, (int)t, false, NULL, 0);
        }
    /* every process is dead with its host; reap them all (and the inits) */
    int st;
    pid_t pid;
    while ((pid = waitpid(-1, &st, 0)) > 0 || (pid < 0 && errno == EINTR)) {
        fl_host_note_reaped(pid);
        for (struct proc *p = e->r.procs; p; p = p->next)
            if (p->pid == pid)
                p->running = false;
    }
    fl_faults_kinds_free(e);    /* before the fabric goes (link faults hold its ports) */
    fl_fabric_destroy(e->r.fab);
    e->r.fab = NULL;
    const char *trees[3];
    size_t nt = fl_run_cgroup_trees(&e->r, trees);
    for (size_t i = 0; i < nt; i++)
        remove_run_cgroup(e, trees[i]);
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
    struct proc *p = e->r.procs;
    while (p) {
        struct proc *n = p->next;
        if (p->out_fd >= 0)
            close(p->out_fd);
        if (p->log_fd >= 0)
            close(p->log_fd);
        free(p);
        p = n;
    }
    for (size_t i = 0; i < e->r.s->n_hosts; i++) {
        for (size_t m = 0; m < e->r.hosts[i].nmounts; m++) {
            free(e->r.hosts[i].mounts[m].src);
            free(e->r.hosts[i].mounts[m].dst);
        }
        free(e->r.hosts[i].mounts);
        free((char *)e->r.hosts[i].h.spec.hosts_file);
    }
    for (size_t i = 0; i < e->r.nfaults; i++) {
        free(e->r.faults[i].tasks);
        free(e->r.faults[i].starts);
    }
    free(e->r.faults);
    free(e->r.hosts);
    free(e->r.tasks);
    free(e->events);
    if (e->r.epfd >= 0)
        close(e->r.epfd);
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
    e->r.s = s;
    e->r.v = v;
    e->o = o;
    e->res = res;
    e->state = RUN_SETUP;
    e->r.bin_dir = o->bin_dir;
    e->r.progress = o->progress;
    e->r.db_path = o->rec ? fl_rec_path(o->rec) : NULL;
    e->r.epfd = e->sigfd = e->timerfd = -1;
    e->shell_status = -1;
    /* held until the end: the last run to end removes what runs share */
    e->runs_lock = fl_runs_lock(false);
    e->r.t0_mono = fl_mono_ms();
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    e->r.t0_unix = (int64_t)rt.tv_sec * 1000 + rt.tv_nsec / 1000000;
    fl_scn_variant_name(s, v, e->r.variant, sizeof e->r.variant);
    if (o->seed_set)
        e->r.seed = o->seed;
    else if (s->seed_set)
        e->r.seed = s->seed;
    else if (getrandom(&e->r.seed, sizeof e->r.seed, 0) != sizeof e->r.seed)
        e->r.seed = (uint64_t)e->r.t0_unix;
    fl_rec_make_run_id(e->r.run_id, sizeof e->r.run_id, e->r.t0_unix);
    snprintf(res->run_id, sizeof res->run_id, "%s", e->r.run_id);
    char out_abs[PATH_MAX];
    const char *out = o->out_dir ? o->out_dir : "out";
    fl_mkdir_p(out, 0755);
    if (!realpath(out, out_abs))
        snprintf(out_abs, sizeof out_abs, "%s", out);
    snprintf(e->r.dir, sizeof e->r.dir, "%s/runs/%s", out_abs, e->r.run_id);
    snprintf(res->run_dir, sizeof res->run_dir, "%s", e->r.dir);
    snprintf(e->r.ev_path, sizeof e->r.ev_path, "%s/ev.sock", e->r.dir);
    snprintf(e->r.fsdir, sizeof e->r.fsdir, "%s/fs", e->r.dir);
    e->r.expose[0] = e->r.dir;
    e->r.expose[1] = o->bin_dir;
    e->r.expose[2] = s->dir;
    if (o->shell_host < 0)      /* a shell applies no faults: nothing to sync on */
        fl_faults_sync_kinds(s, v, e->r.sync_kinds, sizeof e->r.sync_kinds);

    e->r.hosts = calloc(s->n_hosts, sizeof *e->r.hosts);
    e->r.tasks = calloc(s->n_tasks, sizeof *e->r.tasks);
    for (size_t i = 0; i < s->n_hosts; i++)
        e->r.hosts[i].h.pidfd = -1;

    /* The state file before anything else of the run exists (its database
     * row, cgroups, mounts, hosts): `gc` judges a run by it, so a run killed
     * during set-up is collected (and its row marked) at once, and a live run
     * in set-up is never taken for a dead one. */
    if (fl_mkdir_p(e->r.dir, 0755) == 0)
        fl_run_write_state(&e->r);

    if (o->rec) {
        struct fl_rec_run_info ri = {.run_id = e->r.run_id, .scenario = s->name,
                                     .scenario_file = s->path, .variant = e->r.variant,
                                     .scenario_hash = s->hash, .seed = e->r.seed,
                                     .git_rev = o->git_rev, .started_at_ms = e->r.t0_unix};
        if (fl_rec_run_begin(o->rec, &ri, &e->r.rec) < 0) {
            fprintf(stderr, "faultline: recording run %s in %s: %s (continuing without)\n",
                    e->r.run_id, fl_rec_path(o->rec), fl_rec_errmsg(o->rec));
            e->r.rec = NULL;
        }
    }
    fl_faults_init(e);
    if (fl_faults_kinds_init(e, err, sizeof err) < 0) {
        fl_run_error(&e->r, "%s", err);
        goto judge;
    }

    if (setup_dirs(e) < 0)
        goto judge;
    if (fl_fabric_create(&e->r.fab, e->r.run_id, err, sizeof err) < 0) {
        fl_run_error(&e->r, "%s", err);
        goto judge;
    }
    fl_run_write_state(&e->r);
    if (hosts_up_all(e) < 0)
        goto judge;
    if (fl_evsrv_open(&e->ev, e->r.ev_path, free, err, sizeof err) < 0) {
        fl_run_error(&e->r, "event channel: %s", err);
        goto judge;
    }
    e->r.epfd = epoll_create1(EPOLL_CLOEXEC);
    sigset_t set;
    loop_signals(&set);
    e->sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    e->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    e->w_sig = (struct watch){W_SIGNAL, NULL};
    e->w_timer = (struct watch){W_TIMER, NULL};
    e->w_listen = (struct watch){W_LISTEN, NULL};
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &e->w_sig};
    epoll_ctl(e->r.epfd, EPOLL_CTL_ADD, e->sigfd, &ev);
    ev.data.ptr = &e->w_timer;
    epoll_ctl(e->r.epfd, EPOLL_CTL_ADD, e->timerfd, &ev);
    ev.data.ptr = &e->w_listen;
    epoll_ctl(e->r.epfd, EPOLL_CTL_ADD, fl_evsrv_fd(e->ev), &ev);

    if (o->shell_host >= 0) {
        print_commands(e);
        if (o->shell_start_roles)
            for (size_t t = 0; t < s->n_tasks && !e->r.error[0]; t++)
                fl_run_start_task(&e->r, (int)t);
        start_shell(e);
    } else {
        fl_faults_tick_setup(e);    /* at: 0s network and limit faults, before any task */
        for (size_t t = 0; t < s->n_tasks && !e->r.error[0]; t++)
            fl_run_start_task(&e->r, (int)t);
        fl_faults_tick(e);          /* at: 0s faults on processes */
    }
    eng_set_state(e, RUN_RUNNING);
    loop(e);

judge:
    teardown(e);
    eng_set_state(e, RUN_ENDED);
    /* drain and close every log */
    for (struct proc *p = e->r.procs; p; p = p->next) {
        if (p->out_fd >= 0) {
            read_output(e, p);
            close_output(e, p);
        }
        if (p->log_fd >= 0) {
            close(p->log_fd);
            p->log_fd = -1;
        }
    }
    res->interrupted = e->interrupts > 0;
    res->shell_status = e->shell_status;
    res->duration_ms = fl_run_now(&e->r);
    if (e->r.error[0]) {
        snprintf(res->verdict, sizeof res->verdict, "error");
        snprintf(res->reason, sizeof res->reason, "%s", e->r.error);
    } else if (e->interrupts) {
        snprintf(res->verdict, sizeof res->verdict, "error");
        snprintf(res->reason, sizeof res->reason, "interrupted");
    }
    if (!e->r.error[0] && !e->interrupts)
        fl_faults_unfired(e, res->unfired, sizeof res->unfired);
    fl_check_run(e);            /* sets verdict (if not error), expected, observed */
    if (e->r.rec)
        fl_rec_run_end(e->r.rec, res->verdict, res->reason[0] ? res->reason : NULL,
                       res->duration_ms);
    e->r.rec = NULL;
    e->r.done = true;
    eng_set_state(e, RUN_JUDGED);
    /* the run directory: with --keep, a copy of every disk too; else the
     * logs when the run did not pass, nothing when it did (or when it was
     * a shell session, which has no expectations to fail).  Only a directory
     * that stays is marked "done": one about to be removed stays "running",
     * so that `gc` removes it if the harness is killed before it is gone. */
    bool remove_dir = !o->keep && (!strcmp(res->verdict, "pass") || o->shell_host >= 0);
    if (!remove_dir)
        fl_run_write_state(&e->r);
    if (o->keep) {
        int rc = fl_copy_tree(e->r.fsdir, e->r.dir);
        if (rc < 0)
            fprintf(stderr, "faultline: keeping the disks of run %s: %s\n", e->r.run_id, strerror(-rc));
    }
    fl_rm_rf(e->r.fsdir);
    if (remove_dir)
        fl_rm_rf(e->r.dir);
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
