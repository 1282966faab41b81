/*
 * run.c: a run's clock (milliseconds since it started, on the monotonic
 * clock), its first harness error (the one that becomes the verdict's
 * reason; later ones are usually its consequences), its notes (what the
 * verdict line is followed by: a fault that could not reach its target), the
 * state file that
 * lists every resource the run holds for `faultline gc`, and the harness's
 * preloads put where every host sees them.
 */
#include "harness/run/run.h"
#include "harness/base/monoclock.h"
#include "harness/sys/rootless.h"
#include "harness/sys/rundir.h"
#include "netem/fabric.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int64_t fl_run_now(const struct fl_run *r)
{
    return fl_mono_ms() - r->t0_mono;
}

void fl_run_error(struct fl_run *r, const char *fmt, ...)
{
    if (r->error[0])
        return; /* keep the first: later ones are usually consequences */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->error, sizeof r->error, fmt, ap);
    va_end(ap);
}

void fl_run_note(struct fl_run *r, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    size_t n = strlen(line);
    /* once each */
    for (const char *p = r->notes; *p;) {
        size_t k = strcspn(p, "\n");
        if (k == n && !strncmp(p, line, n))
            return;
        p += k + (p[k] == '\n');
    }
    size_t have = strlen(r->notes);
    if (have + n + 2 > sizeof r->notes)
        return; /* full: the first ones say it */
    snprintf(r->notes + have, sizeof r->notes - have, "%s%s", have ? "\n" : "", line);
}

size_t fl_run_cgroup_trees(const struct fl_run *r, const char *trees[3])
{
    size_t n = 0;
    if (r->any_cgroup)
        trees[n++] = r->cgroup_run;
    if (r->any_freezer && !(r->any_cgroup && !strcmp(r->freezer_run, r->cgroup_run)))
        trees[n++] = r->freezer_run;
    if (r->any_mem && !(r->any_cgroup && !strcmp(r->mem_run, r->cgroup_run)) &&
        !(r->any_freezer && !strcmp(r->mem_run, r->freezer_run)))
        trees[n++] = r->mem_run;
    return n;
}

void fl_run_write_state(struct fl_run *r)
{
    struct fl_state st = {0};
    snprintf(st.run_id, sizeof st.run_id, "%s", r->run_id);
    snprintf(st.scenario, sizeof st.scenario, "%s", r->s->name);
    snprintf(st.variant, sizeof st.variant, "%s", r->variant);
    if (!r->db_path || !realpath(r->db_path, st.db))
        snprintf(st.db, sizeof st.db, "%s", r->db_path ? r->db_path : "");
    snprintf(st.workdir, sizeof st.workdir, "%s", r->s->workdir);
    snprintf(st.status, sizeof st.status, "%s", r->done ? "done" : "running");
    /* as the machine sees it (rootless the harness is PID 1 of its own) */
    fl_rootless_self(&st.harness_pid, &st.harness_start);
    if (r->fab) {
        st.switch_pid = fl_fabric_switch_pid(r->fab);
        st.switch_start = fl_proc_starttime(st.switch_pid);
    }
    const char *trees[3];
    size_t nt = fl_run_cgroup_trees(r, trees);
    for (size_t i = 0; i < nt; i++)
        snprintf(st.cgroups[st.ncgroups++], sizeof st.cgroups[0], "%s", trees[i]);
    st.hosts = calloc(r->s->n_hosts, sizeof *st.hosts);
    for (size_t i = 0; st.hosts && i < r->s->n_hosts; i++) {
        struct fl_host *h = &r->hosts[i].h;
        snprintf(st.hosts[st.nhosts].name, sizeof st.hosts[0].name, "%s", r->s->hosts[i].name);
        st.hosts[st.nhosts].pid = h->state == FL_HOST_DOWN ? 0 : h->pid;
        st.hosts[st.nhosts].starttime = h->starttime;
        st.nhosts++;
    }
    fl_state_write(r->dir, &st);
    free(st.hosts);
}

void fl_run_lib_dir(const struct fl_run *r, char *buf, size_t len)
{
    snprintf(buf, len, "%s/lib", r->fsdir);
}

int fl_run_preload(const struct fl_run *r, const char *name, const char *dir, const char *what,
                   char *path, size_t len, char *err, size_t errlen)
{
    const char *bin = r->bin_dir ? r->bin_dir : ".";
    const char *cands[] = {"%s/../lib/%s", "%s/../lib/faultline/%s"};
    char src[PATH_MAX] = "";
    for (size_t i = 0; i < 2 && !src[0]; i++) {
        char p[PATH_MAX], *real;
        snprintf(p, sizeof p, cands[i], bin, name);
        if ((real = realpath(p, NULL))) {
            snprintf(src, sizeof src, "%s", real);
            free(real);
        }
    }
    if (!src[0]) {
        snprintf(err, errlen, "%s needs %s next to faultline (%s/../lib/): not found; run make",
                 what, name, bin);
        return -ENOENT;
    }
    snprintf(path, len, "%s/%s", dir, name);
    int rc = fl_copy_file(src, path, 0755);
    if (rc < 0)
        snprintf(err, errlen, "copy %s to %s: %s", src, path, strerror(-rc));
    return rc;
}
