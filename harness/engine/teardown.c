/*
 * teardown.c: the end of a run, whatever happened: every host killed (and
 * with it its namespaces and mounts; a task cgroup still frozen is thawed
 * first, or its processes could not die), every process reaped, what the
 * fault kinds made undone, the switch and the run's cgroups removed, the
 * events still in the socket buffers read; then the engine's memory freed.
 */
#include "harness/engine/engine_int.h"
#include "harness/sys/cgroup.h"
#include "netem/fabric.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Removes one of the run's cgroup trees; one that cannot be removed (a
 * process of it does not die, say) is named, with who removes it later:
 * the run's directory may be gone at the end, but the owner mark in the
 * cgroup (cgroup.c) tells `gc` that this harness has ended. */
static void remove_run_cgroup(struct engine *e, const char *path)
{
    int rc = fl_cgroup_remove_run(path);
    if (rc < 0 && rc != -ENOENT)
        fprintf(stderr,
                "faultline: run %s: removing cgroup %s: %s (left behind: `faultline gc` "
                "removes it once this faultline process has ended)\n",
                e->r.run_id, path, strerror(-rc));
}

void eng_teardown(struct engine *e)
{
    const struct fl_scenario *s = e->r.s;
    if (e->o->shell_host >= 0 && isatty(0))
        tcsetpgrp(0, getpgrp());
    fl_faults_kinds_stopping(e); /* the clock keeper goes before the reaping below */
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
    fl_faults_kinds_free(e); /* before the fabric goes (link faults hold its ports) */
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
        fl_evsrv_drain(e->ev, eng_on_late_event, e);
    fl_evsrv_close(e->ev); /* drops every client left, with its watch */
    e->ev = NULL;
    /* sized (tmpfs) disks stay mounted until the checks have looked at them */
}

void eng_free(struct engine *e)
{
    eng_reach_free(e);
    struct proc *p = e->r.procs;
    while (p) {
        struct proc *n = p->next;
        if (p->out_fd >= 0)
            close(p->out_fd);
        if (p->log_fd >= 0)
            close(p->log_fd);
        if (p->times_fd >= 0)
            close(p->times_fd);
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
    for (size_t i = 0; i < e->r.nsubmounts; i++)
        free(e->r.submounts[i]);
    e->r.nsubmounts = 0;
    for (size_t i = 0; i < e->r.nfaults; i++) {
        free(e->r.faults[i].tasks);
        free(e->r.faults[i].starts);
        if (e->r.faults[i].own) {
            fl_scn_action_free(&e->r.faults[i].own->action);
            free(e->r.faults[i].own);
        }
    }
    free(e->r.faults);
    free(e->r.hosts);
    free(e->r.tasks);
    free(e->events);
    free(e->finals);
    if (e->r.epfd >= 0)
        close(e->r.epfd);
    if (e->sigfd >= 0)
        close(e->sigfd);
    if (e->timerfd >= 0)
        close(e->timerfd);
}
