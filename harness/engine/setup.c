/*
 * setup.c: a run's set-up before any task starts: the run directory (logs,
 * a copy of the scenario, /etc/hosts naming every host), one tmpfs holding
 * every disk, /tmp and shared path, each host's disk with its leftovers,
 * the host cgroups the fault kinds asked for, each host's spec; then every
 * host brought up in one batch.
 */
#include "harness/engine/engine_int.h"
#include "harness/sys/cgroup.h"
#include "harness/sys/rundir.h"
#include "harness/sys/root_layer.h"
#include "harness/sys/rootless.h"
#include "harness/sys/shared_leftovers.h"
#include "netem/fabric.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>

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

int eng_setup_dirs(struct engine *e)
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
        (mount("fl-fs", e->r.fsdir, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755") < 0 &&
         (rc = -errno))) {
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
    /* what every host's root has above the machine's: /dev, /etc/hosts */
    snprintf(e->r.root_common, sizeof e->r.root_common, "%s/root-common", e->r.fsdir);
    if ((rc = fl_root_common_make(e->r.root_common, path)) < 0) {
        fl_run_error(&e->r, "the layer of every host's root at %s: %s", e->r.root_common,
                     strerror(-rc));
        return rc;
    }
    /* copies of the preloads (every host sees them, read-only) */
    fl_run_lib_dir(&e->r, e->r.libdir, sizeof e->r.libdir);
    if ((rc = fl_mkdir_p(e->r.libdir, 0755)) < 0) {
        fl_run_error(&e->r, "mkdir %s: %s", e->r.libdir, strerror(-rc));
        return rc;
    }
    /* what every host's root covers: the output directory (the results
     * database, every run directory), or only its runs/ if it is / */
    snprintf(e->r.hide, sizeof e->r.hide, "%s", e->r.dir);
    for (int up = 0; up < 2; up++) {
        char *slash = strrchr(e->r.hide, '/');
        if (slash && slash != e->r.hide)
            *slash = 0;
    }
    if (!strcmp(e->r.hide, "/") || !strchr(e->r.hide + 1, '/') || strlen(e->r.hide) < 2)
        snprintf(e->r.hide, sizeof e->r.hide, "%.*s", (int)(strrchr(e->r.dir, '/') - e->r.dir),
                 e->r.dir);
    /* the machine's own mounts below / (an overlay of / holds none) */
    e->r.nsubmounts = fl_root_submounts(e->r.hide, e->r.submounts, FL_RUN_MAX_SUBMOUNTS);
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
        snprintf(hr->root, sizeof hr->root, "%s/hosts/%s/root", e->r.fsdir, s->hosts[i].name);
        if ((rc = fl_run_make_root(&e->r, (int)i, true)) < 0)
            break;
        snprintf(hr->root_hide, sizeof hr->root_hide, "%s/hide", hr->root);
        snprintf(hr->root_tops, sizeof hr->root_tops, "%s/top", hr->root);
        snprintf(hr->ctl, sizeof hr->ctl, "%s/ctl/%s", e->r.dir, s->hosts[i].name);
        if ((rc = fl_mkdir_p(hr->ctl, 0755)) < 0) {
            fl_run_error(&e->r, "mkdir %s: %s", hr->ctl, strerror(-rc));
            break;
        }
        snprintf(hr->dstore, sizeof hr->dstore, "%s/durable/%s", e->r.fsdir, s->hosts[i].name);
        /* what the host sees of the harness's view: {bin} and
         * {scenario_dir} read-only, the event socket, the preloads, its
         * own control files (disk faults) and store (unsynced: lose), the
         * machine's mounts below / read-only */
        size_t nb = 0;
        if (e->r.bin_dir)
            hr->binds[nb++] = (struct fl_host_bind){e->r.bin_dir, FL_BIND_RO};
        hr->binds[nb++] = (struct fl_host_bind){s->dir, FL_BIND_RO};
        hr->binds[nb++] = (struct fl_host_bind){e->r.ev_path, 0};
        hr->binds[nb++] = (struct fl_host_bind){e->r.libdir, FL_BIND_RO};
        hr->binds[nb++] = (struct fl_host_bind){hr->ctl, 0};
        hr->binds[nb++] = (struct fl_host_bind){hr->dstore, FL_BIND_OPTIONAL};
        for (size_t m = 0; m < e->r.nsubmounts; m++)
            hr->binds[nb++] = (struct fl_host_bind){e->r.submounts[m],
                                                    FL_BIND_RO | FL_BIND_REC | FL_BIND_OPTIONAL};
        hr->nbinds = nb;
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
                fl_run_error(&e->r, "host %s: create pids cgroup for the limit fault: %s",
                             s->hosts[i].name, strerror(-rc));
                break;
            }
            hr->has_cgroup = true;
            run_cgroup(e->r.cgroup_run, sizeof e->r.cgroup_run, &e->r.any_cgroup, hr->cgroup);
        }
        if (hr->need_mem_cgroup) {
            rc = fl_cgroup_create_memory(e->r.run_id, s->hosts[i].name, hr->mem_cgroup,
                                         sizeof hr->mem_cgroup);
            if (rc < 0) {
                fl_run_error(&e->r, "host %s: create memory cgroup for the limit fault: %s%s",
                             s->hosts[i].name, strerror(-rc),
                             rc == -ENOTSUP ? " (this machine has no memory cgroup "
                                              "controller: remove the memory limit)"
                                            : "");
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
            .cgroup_mem =
                hr->has_mem_cgroup && !(hr->has_cgroup && !strcmp(hr->mem_cgroup, hr->cgroup))
                    ? hr->mem_cgroup
                    : NULL,
            .expose = e->r.expose,
            .nexpose = 3,
            .root = hr->root_mnt,
            .root_opts = hr->root_opts,
            .hide = e->r.hide,
            .hide_with = hr->root_hide,
            .binds = hr->binds,
            .nbinds = hr->nbinds,
            .privileged = s->hosts[i].privileged,
            .tops_dir = hr->root_tops,
            .common = e->r.root_common,
        };
        if (fl_rootless())
            hr->h.spec.ntops = fl_root_tops(&hr->h.spec.tops);
        hr->h.pidfd = -1;
    }
    return rc < 0 ? rc : 0;
}

/* Brings every host up in one batch. */
int eng_hosts_up(struct engine *e)
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
