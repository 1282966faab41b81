/*
 * disk_fs.c: `disk:` faults by path (`path:`, `op:`), which act at the
 * filesystem and so reach every program, static and Go ones too: the disk
 * of each host such a fault targets is served to the host through the
 * faultline filesystem (fusedisk/, FUSE, served by threads of the harness),
 * and each fault is one of its rules while it is on.
 *
 * The host's disk stays where it is (RUN/fs/hosts/H/disk, what checks and
 * crashes work on); the filesystem mirrors it at a mount point beside it
 * (disk.fs), and that is what the host mounts at its workdir (its spec's
 * disk_dir).  Each time the host starts the filesystem is mounted afresh,
 * so that a replaced or crashed disk is never seen through the kernel's
 * caches of the old one, and the rules that are on are put back.  The
 * mounts live in the harness's private mount namespace: they go with it,
 * whatever ends the run.
 *
 * A host with `disk: {fs: true}` is served so for the whole run, faults or
 * none; with `faultline run --disk-fs`, every host is.  On a disk the filesystem serves, crash
 * consistency (`crash_host` with `unsynced: lose`, durable.c) learns of syncs from it, not from the
 * preload: every fsync and fdatasync that reaches the disk, from any
 * program, is told to fl_durable_fs_synced with the backing file's
 * descriptor (sync and syncfs never reach a FUSE server: see the
 * reference).
 */
#include "harness/faults/disk_fs.h"
#include "fusedisk/fusedisk.h"
#include "harness/faults/durable.h"
#include "harness/record/recorder.h"
#include "harness/base/text.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct host_fs {
    bool need;
    struct fl_fusedisk *fd;
    char mnt[PATH_MAX];
    struct fl_run *r; /* for the syncs it tells */
    int host;
};

/* Where a fault hit, over every rule it had (one per time it was on and
 * per start of its host): faults.hits. */
struct where_acc {
    struct fl_fd_where w[FL_FD_WHERE_MAX];
    size_t n;
    uint64_t more;
};

struct fl_disk_fs {
    size_t nhosts;
    struct host_fs *h;
    int *rule;               /* per fault of the run: its rule's id while on, else 0 */
    struct where_acc *where; /* per fault of the run */
};

static bool by_path(const struct fault_rt *fr)
{
    return fr->f->action.kind == FL_SCN_ACT_DISK && fr->f->action.disk.fs;
}

int fl_disk_fs_init(struct fl_run *r, struct fl_disk_fs **out, char *err, size_t errlen)
{
    *out = NULL;
    bool any = fl_disk_fs_wanted(r);
    for (size_t i = 0; i < r->nfaults; i++)
        any |= by_path(&r->faults[i]);
    if (!any)
        return 0;
    struct fl_disk_fs *fs = calloc(1, sizeof *fs);
    if (!fs || !(fs->h = calloc(r->s->n_hosts, sizeof *fs->h)) ||
        !(fs->rule = calloc(r->nfaults, sizeof *fs->rule)) ||
        !(fs->where = calloc(r->nfaults ? r->nfaults : 1, sizeof *fs->where))) {
        fl_disk_fs_free(r, fs);
        return -ENOMEM;
    }
    fs->nhosts = r->s->n_hosts;
    for (size_t i = 0; i < r->nfaults; i++)
        if (by_path(&r->faults[i]))
            fs->h[r->faults[i].f->action.host].need = true;
    for (size_t h = 0; h < fs->nhosts; h++) {
        fs->h[h].need |= r->s->hosts[h].disk_fs || r->disk_fs_all;
        fs->h[h].r = r;
        fs->h[h].host = (int)h;
        r->hosts[h].disk_by_fs = fs->h[h].need;
    }
    *out = fs;
    (void)err;
    (void)errlen;
    return 0;
}

bool fl_disk_fs_wanted(const struct fl_run *r)
{
    if (r->disk_fs_all)
        return true;
    for (size_t h = 0; h < r->s->n_hosts; h++)
        if (r->s->hosts[h].disk_fs)
            return true;
    return false;
}

/* Fault i's rule on d is about to go (healed, or its filesystem unmounted):
 * where it hit joins the fault's record, and faults.hits says it all. */
static void take_where(struct fl_run *r, struct fl_disk_fs *fs, size_t i, struct fl_fusedisk *d)
{
    struct where_acc *a = &fs->where[i];
    struct fl_fd_where w[FL_FD_WHERE_MAX];
    uint64_t more = 0;
    size_t n = fl_fusedisk_where(d, fs->rule[i], w, FL_FD_WHERE_MAX, &more);
    a->more += more;
    for (size_t k = 0; k < n; k++) {
        size_t j = 0;
        while (j < a->n && !(a->w[j].op == w[k].op && !strcmp(a->w[j].path, w[k].path)))
            j++;
        if (j < a->n)
            a->w[j].count += w[k].count;
        else if (a->n < FL_FD_WHERE_MAX)
            a->w[a->n++] = w[k];
        else
            a->more += w[k].count;
    }
    struct fault_rt *fr = &r->faults[i];
    if (!r->rec || fr->rec_no < 0)
        return;
    char text[FL_FD_WHERE_MAX * 300 + 64];
    size_t len = 0;
    for (size_t k = 0; k < a->n && len < sizeof text; k++)
        len += (size_t)snprintf(text + len, sizeof text - len, "%s%s %s (%llu)", k ? ", " : "",
                                fl_fd_op_name(a->w[k].op), a->w[k].path,
                                (unsigned long long)a->w[k].count);
    if (a->more && len < sizeof text)
        len += (size_t)snprintf(text + len, sizeof text - len, "%s... (%llu more)",
                                a->n ? ", " : "", (unsigned long long)a->more);
    fl_rec_fault_hits(r->rec, fr->rec_no, len ? text : "none");
}

static void told_synced(void *ctx, int fd)
{
    struct host_fs *h = ctx;
    fl_durable_fs_synced(h->r, h->host, fd);
}

static int add_rule(struct fl_run *r, struct fl_disk_fs *fs, struct fault_rt *fr, char *err,
                    size_t errlen)
{
    const struct fl_scn_disk *dk = &fr->f->action.disk;
    size_t i = (size_t)(fr - r->faults);
    struct fl_fd_rule rule = {.glob = dk->glob,
                              .ops = dk->ops,
                              .err = dk->err,
                              .delay_us = dk->delay_us > 0 ? (uint64_t)dk->delay_us : 0,
                              .short_len = dk->short_bytes,
                              .probability = dk->probability,
                              .seed = r->seed ^ ((uint64_t)(i + 1) * 0x9e3779b97f4a7c15ull)};
    int id = fl_fusedisk_add_rule(fs->h[fr->f->action.host].fd, &rule);
    if (id < 0) {
        snprintf(err, errlen, "disk %s: adding its rule: %s", dk->glob, strerror(-id));
        return id;
    }
    fs->rule[i] = id;
    return 0;
}

int fl_disk_fs_host_starting(struct fl_run *r, struct fl_disk_fs *fs, int host, char *err,
                             size_t errlen)
{
    if (!fs || !fs->h[host].need)
        return 0;
    struct host_fs *h = &fs->h[host];
    struct host_rt *hr = &r->hosts[host];
    if (h->fd) {
        for (size_t i = 0; i < r->nfaults; i++)
            if (fs->rule[i] && by_path(&r->faults[i]) && r->faults[i].f->action.host == host)
                take_where(r, fs, i, h->fd);
        fl_fusedisk_unmount(h->fd);
        h->fd = NULL;
    }
    snprintf(h->mnt, sizeof h->mnt, "%s.fs", hr->disk);
    if (mkdir(h->mnt, 0755) < 0 && errno != EEXIST) {
        int e = errno;
        snprintf(err, errlen, "host %s: mkdir %s: %s", r->s->hosts[host].name, h->mnt, strerror(e));
        return -e;
    }
    char why[512];
    int rc = fl_fusedisk_mount(&h->fd, hr->disk, h->mnt, 0, why, sizeof why);
    if (rc < 0) {
        snprintf(err, errlen, "host %s: the faultline filesystem for its disk faults by path: %s",
                 r->s->hosts[host].name, why);
        return rc;
    }
    hr->h.spec.disk_dir = h->mnt;
    if (fl_durable_tracks(r, host))
        fl_fusedisk_on_synced(h->fd, told_synced, h);
    for (size_t i = 0; i < r->nfaults; i++)
        if (fs->rule[i] && by_path(&r->faults[i]) && r->faults[i].f->action.host == host &&
            (rc = add_rule(r, fs, &r->faults[i], err, errlen)) < 0)
            return rc;
    return 0;
}

int fl_disk_fs_set(struct fl_run *r, struct fl_disk_fs *fs, struct fault_rt *fr, bool on, char *err,
                   size_t errlen)
{
    size_t i = (size_t)(fr - r->faults);
    struct host_fs *h = fs ? &fs->h[fr->f->action.host] : NULL;
    if (!h || !h->fd) {
        snprintf(err, errlen, "disk %s: no faultline filesystem under host %s's disk",
                 fr->f->action.disk.glob, r->s->hosts[fr->f->action.host].name);
        return -ENODEV;
    }
    if (!on) {
        if (fs->rule[i]) {
            take_where(r, fs, i, h->fd);
            fl_fusedisk_remove_rule(h->fd, fs->rule[i]);
        }
        fs->rule[i] = 0;
        return 0;
    }
    if (fs->rule[i])
        return 0;
    return add_rule(r, fs, fr, err, errlen);
}

size_t fl_disk_fs_detail(const struct fl_scn_disk *dk, char *buf, size_t len)
{
    size_t n = (size_t)snprintf(buf, len, "path=%s op=", dk->glob);
    if (dk->ops == FL_FD_OP_ALL)
        n += (size_t)snprintf(buf + (n < len ? n : len), n < len ? len - n : 0, "all");
    else
        for (unsigned b = 1, first = 1; b < FL_FD_OP_ALL; b <<= 1)
            if (dk->ops & b) {
                n += (size_t)snprintf(buf + (n < len ? n : len), n < len ? len - n : 0, "%s%s",
                                      first ? "" : ",", fl_fd_op_name(b));
                first = 0;
            }
    return n < len ? n : len - 1;
}

void fl_disk_fs_free(struct fl_run *r, struct fl_disk_fs *fs)
{
    if (!fs)
        return;
    for (size_t i = 0; fs->rule && fs->where && i < r->nfaults; i++) /* still on at the end */
        if (fs->rule[i] && by_path(&r->faults[i]) && fs->h[r->faults[i].f->action.host].fd)
            take_where(r, fs, i, fs->h[r->faults[i].f->action.host].fd);
    for (size_t i = 0; fs->h && i < fs->nhosts; i++)
        if (fs->h[i].fd)
            fl_fusedisk_unmount(fs->h[i].fd);
    free(fs->h);
    free(fs->rule);
    free(fs->where);
    free(fs);
}
