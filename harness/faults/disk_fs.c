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
 * A `shared:` path is served the same way, one filesystem per host that
 * shares it (as each NFS client is a mount of its own), when a fault by
 * path on that host has a glob under it ('nfs/' then '**' for the shared path
 * nfs): the rule goes to that host's mount of the shared path, with the
 * glob taken relative to it, so the fault hits that host's operations
 * there and no other host's.  A glob that does not start with a shared
 * path is the disk's.
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

/* One directory a host sees through the filesystem: its disk (slot 0) or
 * shared path m (slot 1 + m). */
struct served {
    bool need;
    struct fl_fusedisk *fd;
    char mnt[PATH_MAX];
};

struct host_fs {
    struct served *slot; /* 1 + n_shared */
    struct fl_run *r;    /* for the syncs it tells */
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
    size_t nhosts, nslots;
    struct host_fs *h;
    int *rule;               /* per fault of the run: its rule's id while on, else 0 */
    int *slot;               /* per fault by path: the slot its rule goes to */
    struct where_acc *where; /* per fault of the run */
};

static bool by_path(const struct fault_rt *fr)
{
    return fr->f->action.kind == FL_SCN_ACT_DISK && fr->f->action.disk.fs;
}

/* The slot of a glob on host: 1 + m when it lies under shared path m that
 * the host shares ("m's path/..."), else 0 (the disk). */
static int slot_of(const struct fl_run *r, int host, const char *glob)
{
    const struct fl_scenario *s = r->s;
    for (size_t m = 0; m < s->n_shared; m++) {
        size_t n = strlen(s->shared[m].path);
        if (strncmp(glob, s->shared[m].path, n) != 0 || glob[n] != '/')
            continue;
        for (size_t k = 0; k < s->shared[m].n_hosts; k++)
            if (s->shared[m].hosts[k] == host)
                return 1 + (int)m;
    }
    return 0;
}

/* What of a glob the slot's filesystem matches: past "path/" for a shared
 * path. */
static const char *glob_in(const struct fl_run *r, int slot, const char *glob)
{
    return slot ? glob + strlen(r->s->shared[slot - 1].path) + 1 : glob;
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
        !(fs->rule = calloc(r->nfaults ? r->nfaults : 1, sizeof *fs->rule)) ||
        !(fs->slot = calloc(r->nfaults ? r->nfaults : 1, sizeof *fs->slot)) ||
        !(fs->where = calloc(r->nfaults ? r->nfaults : 1, sizeof *fs->where))) {
        fl_disk_fs_free(r, fs);
        return -ENOMEM;
    }
    fs->nhosts = r->s->n_hosts;
    fs->nslots = 1 + r->s->n_shared;
    for (size_t h = 0; h < fs->nhosts; h++) {
        if (!(fs->h[h].slot = calloc(fs->nslots, sizeof *fs->h[h].slot))) {
            fl_disk_fs_free(r, fs);
            return -ENOMEM;
        }
        fs->h[h].r = r;
        fs->h[h].host = (int)h;
    }
    for (size_t i = 0; i < r->nfaults; i++)
        if (by_path(&r->faults[i])) {
            int host = r->faults[i].f->action.host;
            fs->slot[i] = slot_of(r, host, r->faults[i].f->action.disk.glob);
            fs->h[host].slot[fs->slot[i]].need = true;
        }
    for (size_t h = 0; h < fs->nhosts; h++) {
        fs->h[h].slot[0].need |= r->s->hosts[h].disk_fs || r->disk_fs_all;
        r->hosts[h].disk_by_fs = fs->h[h].slot[0].need;
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

/* Fault i's rule is about to go (healed, or its filesystem unmounted):
 * where it hit joins the fault's record, and faults.hits says it all. */
static void take_where(struct fl_run *r, struct fl_disk_fs *fs, size_t i)
{
    struct fault_rt *fr = &r->faults[i];
    int slot = fs->slot[i];
    struct fl_fusedisk *d = fs->h[fr->f->action.host].slot[slot].fd;
    if (!d || !fs->rule[i])
        return;
    struct where_acc *a = &fs->where[i];
    struct fl_fd_where w[FL_FD_WHERE_MAX];
    uint64_t more = 0;
    size_t n = fl_fusedisk_where(d, fs->rule[i], w, FL_FD_WHERE_MAX, &more);
    a->more += more;
    for (size_t k = 0; k < n; k++) {
        if (slot) { /* the path as the scenario names it, from the workdir */
            char full[sizeof w[k].path];
            snprintf(full, sizeof full, "%s/%s", r->s->shared[slot - 1].path, w[k].path);
            memcpy(w[k].path, full, sizeof full);
        }
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
    struct fl_fd_rule rule = {.glob = glob_in(r, fs->slot[i], dk->glob),
                              .ops = dk->ops,
                              .err = dk->err,
                              .delay_us = dk->delay_us > 0 ? (uint64_t)dk->delay_us : 0,
                              .short_len = dk->short_bytes,
                              .probability = dk->probability,
                              .seed = r->seed ^ ((uint64_t)(i + 1) * 0x9e3779b97f4a7c15ull)};
    int id = fl_fusedisk_add_rule(fs->h[fr->f->action.host].slot[fs->slot[i]].fd, &rule);
    if (id < 0) {
        snprintf(err, errlen, "disk %s: adding its rule: %s", dk->glob, strerror(-id));
        return id;
    }
    fs->rule[i] = id;
    return 0;
}

/* hr->mounts index of shared path m on host (setup.c lists them in order). */
static size_t mount_index(const struct fl_run *r, int host, size_t m)
{
    size_t k = 0;
    for (size_t q = 0; q < m; q++)
        for (size_t j = 0; j < r->s->shared[q].n_hosts; j++)
            k += r->s->shared[q].hosts[j] == host;
    return k;
}

int fl_disk_fs_host_starting(struct fl_run *r, struct fl_disk_fs *fs, int host, char *err,
                             size_t errlen)
{
    if (!fs)
        return 0;
    struct host_rt *hr = &r->hosts[host];
    const char *name = r->s->hosts[host].name;
    int rc;
    for (size_t sl = 0; sl < fs->nslots; sl++) {
        struct served *sv = &fs->h[host].slot[sl];
        if (!sv->need)
            continue;
        if (sv->fd) {
            for (size_t i = 0; i < r->nfaults; i++)
                if (fs->rule[i] && by_path(&r->faults[i]) && r->faults[i].f->action.host == host &&
                    fs->slot[i] == (int)sl)
                    take_where(r, fs, i);
            fl_fusedisk_unmount(sv->fd);
            sv->fd = NULL;
        }
        char backing[PATH_MAX];
        if (sl == 0) {
            snprintf(backing, sizeof backing, "%s", hr->disk);
            snprintf(sv->mnt, sizeof sv->mnt, "%s.fs", hr->disk);
        } else {
            snprintf(backing, sizeof backing, "%s/shared/%zu", r->fsdir, sl - 1);
            snprintf(sv->mnt, sizeof sv->mnt, "%s/shared/%zu.fs-%s", r->fsdir, sl - 1, name);
        }
        if (mkdir(sv->mnt, 0755) < 0 && errno != EEXIST) {
            int e = errno;
            snprintf(err, errlen, "host %s: mkdir %s: %s", name, sv->mnt, strerror(e));
            return -e;
        }
        char why[512];
        if ((rc = fl_fusedisk_mount(&sv->fd, backing, sv->mnt, 0, why, sizeof why)) < 0) {
            snprintf(err, errlen, "host %s: the faultline filesystem for its %s: %s", name,
                     sl ? r->s->shared[sl - 1].path : "disk", why);
            return rc;
        }
        if (sl == 0) {
            hr->h.spec.disk_dir = sv->mnt;
            if (fl_durable_tracks(r, host))
                fl_fusedisk_on_synced(sv->fd, told_synced, &fs->h[host]);
        } else {
            struct fl_host_mount *hm = &hr->mounts[mount_index(r, host, sl - 1)];
            char *src = strdup(sv->mnt);
            if (!src)
                return -ENOMEM;
            free(hm->src);
            hm->src = src;
        }
        for (size_t i = 0; i < r->nfaults; i++)
            if (fs->rule[i] && by_path(&r->faults[i]) && r->faults[i].f->action.host == host &&
                fs->slot[i] == (int)sl && (rc = add_rule(r, fs, &r->faults[i], err, errlen)) < 0)
                return rc;
    }
    return 0;
}

int fl_disk_fs_set(struct fl_run *r, struct fl_disk_fs *fs, struct fault_rt *fr, bool on, char *err,
                   size_t errlen)
{
    size_t i = (size_t)(fr - r->faults);
    struct served *sv = fs ? &fs->h[fr->f->action.host].slot[fs->slot[i]] : NULL;
    if (!sv || !sv->fd) {
        snprintf(err, errlen, "disk %s: no faultline filesystem under host %s's %s",
                 fr->f->action.disk.glob, r->s->hosts[fr->f->action.host].name,
                 fs && fs->slot[i] ? "shared path" : "disk");
        return -ENODEV;
    }
    if (!on) {
        if (fs->rule[i]) {
            take_where(r, fs, i);
            fl_fusedisk_remove_rule(sv->fd, fs->rule[i]);
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
    for (size_t i = 0; fs->rule && fs->slot && fs->where && fs->h && i < r->nfaults; i++)
        if (fs->rule[i] && by_path(&r->faults[i])) /* still on at the end */
            take_where(r, fs, i);
    for (size_t h = 0; fs->h && h < fs->nhosts; h++) {
        for (size_t sl = 0; fs->h[h].slot && sl < fs->nslots; sl++)
            if (fs->h[h].slot[sl].fd)
                fl_fusedisk_unmount(fs->h[h].slot[sl].fd);
        free(fs->h[h].slot);
    }
    free(fs->h);
    free(fs->rule);
    free(fs->slot);
    free(fs->where);
    free(fs);
}
