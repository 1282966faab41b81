/*
 * hosts.c: a host's disk, /tmp and root of its own (made at set-up, made
 * again when a replace fault gives it a new machine's), and a host brought down (every
 * process at once: its init is killed) and up again during a run.  The fault
 * kinds learn of a host coming up through the run's hooks.
 */
#include "harness/run/run.h"
#include "harness/sys/cgroup.h"
#include "harness/sys/rundir.h"
#include "harness/sys/root_layer.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

/* Fills a host's disk with the scenario's leftovers (dirs: and files:). */
static int preload_disk(struct fl_run *r, int i)
{
    const struct fl_scn_host *sh = &r->s->hosts[i];
    char path[PATH_MAX];
    for (size_t d = 0; d < sh->n_dirs; d++) {
        snprintf(path, sizeof path, "%s/%s", r->hosts[i].disk, sh->dirs[d].path);
        int rc = fl_mkdir_p(path, 0755);
        if (rc < 0) {
            fl_run_error(r, "host %s: mkdir %s: %s", sh->name, sh->dirs[d].path, strerror(-rc));
            return rc;
        }
    }
    for (size_t f = 0; f < sh->n_files; f++) {
        snprintf(path, sizeof path, "%s/%s", r->hosts[i].disk, sh->files[f].path);
        char parent[PATH_MAX];
        snprintf(parent, sizeof parent, "%s", path);
        char *slash = strrchr(parent, '/');
        if (slash) {
            *slash = 0;
            fl_mkdir_p(parent, 0755);
        }
        int rc = fl_write_file(path, sh->files[f].content, sh->files[f].len);
        if (rc < 0) {
            fl_run_error(r, "host %s: write %s: %s", sh->name, sh->files[f].path, strerror(-rc));
            return rc;
        }
    }
    return 0;
}

/* A fresh disk: empty directory (or tmpfs), plus mount points of shared paths. */
int fl_run_make_disk(struct fl_run *r, int i, bool preload)
{
    struct host_rt *hr = &r->hosts[i];
    const struct fl_scn_host *sh = &r->s->hosts[i];
    int rc;
    if (hr->tmpfs_disk) {
        umount2(hr->disk, MNT_DETACH);
    }
    fl_rm_rf(hr->disk);
    if ((rc = fl_mkdir_p(hr->disk, 0755)) < 0) {
        fl_run_error(r, "host %s: mkdir %s: %s", sh->name, hr->disk, strerror(-rc));
        return rc;
    }
    /* a tmpfs of its own when sized, and when the crash-consistency layer
     * tracks it (its st_dev then tells its files from /tmp and shared paths) */
    if (sh->disk_size || hr->own_tmpfs) {
        char opts[64];
        if (sh->disk_size)
            snprintf(opts, sizeof opts, "size=%llu,mode=755", (unsigned long long)sh->disk_size);
        else
            snprintf(opts, sizeof opts, "mode=755");
        if (mount("fl-disk", hr->disk, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0) {
            rc = -errno;
            fl_run_error(r, "host %s: mount tmpfs (%s) at %s: %s", sh->name, opts, hr->disk,
                         strerror(-rc));
            return rc;
        }
        hr->tmpfs_disk = true;
    }
    for (size_t m = 0; m < r->s->n_shared; m++) {
        const struct fl_scn_shared *sd = &r->s->shared[m];
        for (size_t k = 0; k < sd->n_hosts; k++) {
            if (sd->hosts[k] != i)
                continue;
            char path[PATH_MAX];
            snprintf(path, sizeof path, "%s/%s", hr->disk, sd->path);
            if ((rc = fl_mkdir_p(path, 0755)) < 0) {
                fl_run_error(r, "host %s: mkdir %s: %s", sh->name, path, strerror(-rc));
                return rc;
            }
        }
    }
    return preload ? preload_disk(r, i) : 0;
}

/* The host's /tmp: an empty, world-writable, sticky directory, at the start
 * and again when the host is replaced (a new machine). */
int fl_run_make_tmp(struct fl_run *r, int i)
{
    struct host_rt *hr = &r->hosts[i];
    int rc = fl_rm_rf(hr->tmp);
    if (rc == 0)
        rc = fl_mkdir_p(hr->tmp, 01777);
    if (rc < 0) {
        fl_run_error(r, "host %s: empty /tmp at %s: %s", r->s->hosts[i].name, hr->tmp,
                     strerror(-rc));
        return rc;
    }
    chmod(hr->tmp, 01777);
    return 0;
}

int fl_run_make_root(struct fl_run *r, int i, bool fresh)
{
    struct host_rt *hr = &r->hosts[i];
    int rc = fl_root_layer_make(hr->root, r->root_common, fresh, hr->root_mnt, sizeof hr->root_mnt,
                                hr->root_opts, sizeof hr->root_opts);
    if (rc < 0)
        fl_run_error(r, "host %s: its own root at %s: %s", r->s->hosts[i].name, hr->root,
                     strerror(-rc));
    return rc;
}

void fl_run_roots_strip(struct fl_run *r)
{
    for (size_t i = 0; i < r->s->n_hosts; i++)
        if (r->hosts[i].root_hide[0])
            fl_rm_rf(r->hosts[i].root_hide);
    if (r->root_common[0])
        fl_rm_rf(r->root_common);
}

int fl_run_host_up(struct fl_run *r, int i, bool fresh_disk)
{
    struct host_rt *hr = &r->hosts[i];
    char err[1024];
    int rc;
    if (hr->h.state != FL_HOST_DOWN)
        return 0;
    if (fresh_disk &&
        ((rc = fl_run_make_disk(r, i, false)) < 0 || (rc = fl_run_make_tmp(r, i)) < 0))
        return rc;
    if (hr->h.spec.root && (rc = fl_run_make_root(r, i, fresh_disk)) < 0)
        return rc;
    /* the fault kinds' word first (what survived the way down is durable) */
    if (r->host_starting && (rc = r->host_starting(r, i, err, sizeof err)) < 0) {
        fl_run_error(r, "bringing host %s back: %s", r->s->hosts[i].name, err);
        return rc;
    }
    hr->h.generation++;
    struct fl_host *hp = &hr->h;
    if ((rc = fl_host_up_batch(&hp, 1, r->fab, err, sizeof err)) < 0) {
        fl_run_error(r, "bringing host %s back: %s", r->s->hosts[i].name, err);
        fl_host_kill(hp);
        return rc;
    }
    hr->down_by_fault = false;
    if (r->host_started)
        r->host_started(r, i); /* its port is new: link faults put theirs back */
    fl_run_write_state(r);
    return 0;
}

/* Kills every process on a host at once (init and, before this returns,
 * each of the others: none runs on after a fault on a sync point); with
 * will_restart, their tasks are started again when it is back. */
void fl_run_host_down(struct fl_run *r, int host, bool by_fault, bool will_restart)
{
    struct host_rt *hr = &r->hosts[host];
    for (struct proc *p = r->procs; p; p = p->next) {
        if (p->host != host || !p->running)
            continue;
        if (by_fault)
            p->fault_sig = SIGKILL;
        if (will_restart && r->tasks[p->task].cur == p)
            r->tasks[p->task].restart_pending++;
    }
    fl_host_kill_now(&hr->h);
    /* a frozen process dies only once thawed: killed first, so it never
     * runs again (and its task starts again in a thawed cgroup) */
    for (size_t t = 0; t < r->s->n_tasks; t++)
        if (r->s->tasks[t].host == host && r->tasks[t].frozen) {
            fl_cgroup_signal(r->tasks[t].cgroup, SIGKILL);
            char err[1024];
            if (fl_run_task_freeze(r, (int)t, false, err, sizeof err) < 0)
                fl_run_error(r, "host %s going down: %s", r->s->hosts[host].name, err);
        }
    hr->down_by_fault = by_fault;
    hr->comes_back = will_restart;
    fl_run_write_state(r);
}
