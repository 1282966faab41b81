/*
 * engine.c: one run of one scenario variant, from set-up to verdict: the
 * sequence below, each step in its own file of this folder.
 *
 * Set-up (setup.c): run directory (disks, /tmp dirs, shared dirs, /etc/hosts, state
 * file), the switch, every host (inits cloned in one batch, veths plugged in
 * one netlink batch, then all waited for), the event socket, the recorder's
 * run row, then every task's process.
 *
 * The loop (loop.c): one thread, one epoll over a signalfd (SIGCHLD, SIGINT, SIGTERM,
 * SIGHUP), a timerfd (fault schedule, heals, timeout, grace, progress), the
 * event socket and its clients, and the output pipe of every process.  All
 * faults are applied from this loop, in the order their triggers fire, so a
 * run's decisions happen in one place.
 *
 * Final checks (final.c): when every task of the `stop_when` jobs has
 * exited for good (no restart pending) and the variant has final: checks,
 * every fault still holding is undone, every host still down comes up, and
 * the checks run on their hosts beside the cluster's tasks, each up to its
 * timeout; no fault fires any more.
 *
 * Ending: once they have ended (or at once without them), or on timeout,
 * harness error or interrupt, the engine
 * resumes paused processes (thaws frozen task cgroups), sends SIGTERM to
 * every task still running (every process in its cgroup when it has one,
 * else its process group), SIGKILL after the grace period (at once on a
 * second interrupt), and waits for all of them.  Tear-down (teardown.c) removes the
 * hosts (and with them their namespaces and mounts; a task cgroup still
 * frozen is thawed first, or its processes could not die), what the fault
 * kinds made, the switch and the cgroups; then check.c judges, the recorder
 * gets the verdict, and the run directory goes (kept with its logs when the
 * run did not pass, whole with --keep).
 *
 * Shell mode (`faultline shell`, shell.c): the same set-up and tear-down, but no
 * fault is armed (fl_faults_init keeps none) and there is no timeout: the
 * run ends when the shell exits (or on interrupt or harness error).
 *
 * States of a run (engine_int.h): SETUP -> RUNNING -> FINAL (the final:
 * checks, when the variant has any) -> STOPPING (SIGTERM sent) -> KILLING (grace over) -> ENDED
 * (torn down) -> JUDGED, one enum moved only forward by eng_set_state.  Invariant: every process,
 * host and fabric created is listed in the run (and the state file) until removed.
 *
 * What happens to a host or a task (start, signal, freeze, down, up) is the
 * run layer's (harness/run/); when faults fire is schedule.c's; what a fault
 * does is its kind's (harness/faults/).
 */
#include "harness/base/rng.h"
#include "harness//base/monoclock.h"
#include "harness/engine/engine_int.h"
#include "harness/record/recorder.h"
#include "harness/sys/cgroup.h"
#include "harness/sys/rootless.h"
#include "harness/sys/rundir.h"
#include "harness/sys/shared_leftovers.h"
#include "netem/fabric.h"

_Static_assert(FL_SCN_MAX_HOSTS == FL_FABRIC_MAX_HOSTS,
               "the scenario loader must accept exactly the hosts the fabric can attach");

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/random.h>
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

/* ---- the run ---------------------------------------------------------------------- */

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
    e->r.disk_fs_all = o->disk_fs;
    e->r.db_path = o->rec ? fl_rec_path(o->rec) : NULL;
    e->r.epfd = e->sigfd = e->timerfd = -1;
    e->shell_status = -1;
    /* held until the end: the last run to end removes what runs share */
    e->runs_lock = fl_runs_lock(false);
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
    e->r.seed = fl_seed_of(e->r.seed);
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
    if (o->shell_host < 0) /* a shell applies no faults: nothing to sync on */
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
        /* the file's absolute path: "scenarios/x.yaml" means nothing to a
         * reader in another directory */
        char file[PATH_MAX + 256];
        const char *base = strrchr(s->path, '/');
        snprintf(file, sizeof file, "%s/%s", s->dir, base ? base + 1 : s->path);
        struct fl_rec_run_info ri = {.run_id = e->r.run_id,
                                     .scenario = s->name,
                                     .scenario_file = file,
                                     .variant = e->r.variant,
                                     .scenario_hash = s->hash,
                                     .scenario_text = s->text,
                                     .scenario_text_len = s->text_len,
                                     .seed = e->r.seed,
                                     .git_rev = o->git_rev,
                                     .started_at_ms = e->r.t0_unix,
                                     .rootless = fl_rootless(),
                                     .uid = fl_rootless_outer_uid()};
        if (fl_rec_run_begin(o->rec, &ri, &e->r.rec) < 0) {
            fprintf(stderr, "faultline: recording run %s in %s: %s (the run goes on unrecorded)\n",
                    e->r.run_id, fl_rec_path(o->rec), fl_rec_errmsg(o->rec));
            e->r.rec = NULL;
        }
        /* from now on a busy database is not waited for: the rows are kept
         * and written when it is free */
        fl_rec_set_nowait(o->rec, true);
    }
    /* the run's clock starts once its row is written (a busy database is
     * waited for there, on no scenario's clock) */
    e->r.t0_mono = fl_mono_ms();
    fl_faults_init(e);
    eng_final_init(e);
    eng_reach_init(e);
    if (fl_faults_kinds_init(e, err, sizeof err) < 0) {
        fl_run_error(&e->r, "%s", err);
        goto judge;
    }

    if (eng_setup_dirs(e) < 0)
        goto judge;
    if (fl_fabric_create(&e->r.fab, e->r.run_id, err, sizeof err) < 0) {
        fl_run_error(&e->r, "%s", err);
        goto judge;
    }
    fl_run_write_state(&e->r);
    /* the socket before the hosts: each host's root binds it */
    if (fl_evsrv_open(&e->ev, e->r.ev_path, free, err, sizeof err) < 0) {
        fl_run_error(&e->r, "event channel: %s", err);
        goto judge;
    }
    if (eng_hosts_up(e) < 0)
        goto judge;
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
        eng_shell_print(e);
        if (o->shell_start_roles)
            for (size_t t = 0; t < s->n_tasks && !e->r.error[0]; t++)
                if (!s->tasks[t].final)
                    fl_run_start_task(&e->r, (int)t);
        eng_shell_start(e);
    } else {
        fl_faults_tick_setup(e); /* at: 0s network and limit faults, before any task */
        for (size_t t = 0; t < s->n_tasks && !e->r.error[0]; t++)
            if (!s->tasks[t].final) /* a final: check starts at the end (final.c) */
                fl_run_start_task(&e->r, (int)t);
        fl_faults_tick(e); /* at: 0s faults on processes */
    }
    eng_set_state(e, RUN_RUNNING);
    eng_loop(e);

judge:
    eng_teardown(e);
    eng_set_state(e, RUN_ENDED);
    /* drain and close every log */
    for (struct proc *p = e->r.procs; p; p = p->next) {
        if (p->out_fd >= 0) {
            eng_read_output(e, p);
            eng_close_output(e, p);
        }
        if (p->log_fd >= 0) {
            close(p->log_fd);
            p->log_fd = -1;
        }
        if (p->times_fd >= 0) {
            close(p->times_fd);
            p->times_fd = -1;
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
    fl_faults_fates(e);
    fl_check_run(e); /* sets verdict (if not error), expected, observed */
    if (o->rec)
        fl_rec_set_nowait(o->rec, false); /* the verdict is in: now it may wait */
    snprintf(res->notes, sizeof res->notes, "%s", e->r.notes);
    if (e->r.rec && e->r.notes[0])
        fl_rec_run_notes(e->r.rec, e->r.notes);
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
        fl_run_roots_strip(&e->r);
        int rc = fl_copy_tree(e->r.fsdir, e->r.dir);
        if (rc < 0)
            fprintf(stderr, "faultline: keeping the disks of run %s: %s\n", e->r.run_id,
                    strerror(-rc));
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
    eng_free(e);
    return 0;
}
