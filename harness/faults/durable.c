/*
 * durable.c: the crash-consistency layer at run time: `crash_host` with
 * `unsynced: lose` brings the crashed host's disk back to what its
 * processes had made durable, as a strict reading of POSIX lets a program
 * assume after a power cut:
 *   - a file's content is what it was at its last successful fsync or
 *     fdatasync (or at the host's start); a file whose directory entry is
 *     durable but whose data never was comes back empty;
 *   - a directory's entries are what they were at its last successful fsync
 *     (or at the host's start): a file synced but whose entry never was is
 *     gone, a rename or unlink not followed by a sync of the directory is
 *     undone;
 *   - syncfs and sync make everything on the disk durable; a write through
 *     an O_SYNC/O_DSYNC descriptor makes its bytes durable; sync_file_range
 *     and close make nothing durable.
 * This is stricter than ext4 (data=ordered) in practice, on purpose: it
 * checks a program's own fsync discipline, not the luck of a file system.
 *
 * Which hosts: those that some `crash_host` fault with `unsynced: lose` of
 * the variant targets ("tracked"); a run without one does nothing here and
 * preloads nothing.  A tracked host's disk is a tmpfs of its own (so its
 * st_dev tells its files from the host's /tmp and shared paths), and its
 * syncs are recorded in the host's store (harness/sys/durable_store.h) under
 * RUN/fs/durable/HOST by whoever sees them: on a disk the faultline
 * filesystem serves (disk_fs.c), the filesystem, for every program
 * (fl_durable_fs_synced); elsewhere fl_sync_preload.so (harness/tools/),
 * which the host's tasks start with in LD_PRELOAD.  The store lies on the
 * run's tmpfs, outside the disk (its size limit does not count it),
 * visible in the host through the run directory.
 *
 * States of a tracked host's store: reset and filled with the whole disk
 * (the baseline) each time the host starts (run start, coming back after
 * restart, crash_host or replace: a fresh disk) -> updated by its processes
 * as they sync, and by the harness when corrupt:/truncate: change a file at
 * rest (on-disk state, so durable) -> read once at a crash with `unsynced:
 * lose`: after every process of the host has exited (each one's pidfd
 * says so; the kernel's PID namespace tells which are the host's), the
 * disk's contents are removed and built again from the store, from the root
 * directory's recorded entries down, files from their recorded content
 * (empty when none), hard links where one inode has several names.  The
 * fault's detail says what was lost.  Everything lives on the run's tmpfs
 * and is removed at the end of the run (before --keep copies the disks),
 * and with the harness's mount namespace if it is killed (`gc` removes the
 * empty directory with the run's).
 *
 * Not seen, so lost at a crash though a program synced it: msync, syncs made
 * by direct system calls or io_uring, and processes started with `faultline
 * exec` (no preload).  Shared paths (`shared:`) and /tmp are not tracked.
 * A host where a program the preload cannot enter ran (a static or Go
 * binary, found by harness/engine/reach.c: fl_durable_unseen) is not
 * rebuilt at all: the crash leaves its disk as it was, and says so in the
 * detail and a note.  A host that lost more than UNSYNCED_NOTE_BYTES with
 * not one sync recorded since it started is rebuilt, with a note.
 */
#include "harness/faults/durable.h"
#include "harness/base/monoclock.h"
#include "harness/base/rng.h"
#include "harness/base/text.h"
#include "harness/sys/durable_store.h"
#include "harness/sys/rundir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define DEAD_WAIT_MS 10000 /* a crashed host's processes must be gone by then */
#define MAX_DEPTH 512
#define UNSYNCED_NOTE_BYTES (1024 * 1024) /* more unsynced, no sync seen: a note */

struct fl_durable {
    bool *tracked;          /* per host */
    char **unseen;          /* per host: why its syncs cannot be seen (a program the
                               preload cannot enter: harness/engine/reach.c), or NULL */
    dev_t *dev;             /* per host: its disk's st_dev at its last start */
    char dir[PATH_MAX];     /* RUN/fs/durable */
    char preload[PATH_MAX]; /* fl_sync_preload.so copied to RUN/fs/lib, at the first start */
};

static struct fl_durable *dur(const struct fl_run *r)
{
    return r->kind_state[FL_SCN_ACT_CRASH_HOST];
}

int fl_durable_init(struct fl_run *r, char *err, size_t errlen)
{
    const struct fl_scenario *s = r->s;
    bool any = false;
    for (size_t i = 0; i < r->nfaults; i++) {
        const struct fl_scn_action *a = &r->faults[i].f->action;
        any |= a->kind == FL_SCN_ACT_CRASH_HOST && fl_scn_unsynced_lost(a->unsynced);
    }
    if (!any)
        return 0;
    struct fl_durable *d = calloc(1, sizeof *d);
    if (!d || !(d->tracked = calloc(s->n_hosts, sizeof *d->tracked)) ||
        !(d->unseen = calloc(s->n_hosts, sizeof *d->unseen)) ||
        !(d->dev = calloc(s->n_hosts, sizeof *d->dev)))
        abort();
    r->kind_state[FL_SCN_ACT_CRASH_HOST] = d;
    for (size_t i = 0; i < r->nfaults; i++) {
        const struct fl_scn_action *a = &r->faults[i].f->action;
        if (a->kind != FL_SCN_ACT_CRASH_HOST || !fl_scn_unsynced_lost(a->unsynced))
            continue;
        for (size_t h = 0; h < s->n_hosts; h++) /* '{event.KEY}': any host might be it */
            d->tracked[h] |= a->host == (int)h || a->host == FL_SCN_HOST_EVENT;
    }
    snprintf(d->dir, sizeof d->dir, "%s/durable", r->fsdir);
    for (size_t h = 0; h < s->n_hosts; h++)
        r->hosts[h].own_tmpfs |= d->tracked[h];
    return 0;
}

static bool fl_durable_tracked(const struct fl_run *r, int host)
{
    return dur(r) && dur(r)->tracked[host];
}

void fl_durable_free(struct fl_run *r)
{
    struct fl_durable *d = dur(r);
    if (!d)
        return;
    if (d->preload[0] || access(d->dir, F_OK) == 0)
        fl_rm_rf(d->dir);
    if (d->preload[0]) /* not in a copy of the run's disks (--keep) */
        unlink(d->preload);
    for (size_t h = 0; h < r->s->n_hosts; h++)
        free(d->unseen[h]);
    free(d->unseen);
    free(d->tracked);
    free(d->dev);
    free(d);
    r->kind_state[FL_SCN_ACT_CRASH_HOST] = NULL;
}

void fl_durable_unseen(struct fl_run *r, int host, const char *why)
{
    struct fl_durable *d = dur(r);
    if (d && d->tracked[host] && !r->hosts[host].disk_by_fs && !d->unseen[host])
        d->unseen[host] = strdup(why);
}

static void store_path(const struct fl_run *r, int host, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", dur(r)->dir, r->s->hosts[host].name);
}

bool fl_durable_tracks(const struct fl_run *r, int host)
{
    return dur(r) && dur(r)->tracked[host];
}

void fl_durable_fs_synced(struct fl_run *r, int host, int fd)
{
    struct fl_durable *d = dur(r);
    if (!d || !d->tracked[host])
        return;
    char path[PATH_MAX];
    store_path(r, host, path, sizeof path);
    struct fl_dstore st;
    int rc = fl_dstore_open(&st, path, d->dev[host]);
    if (rc < 0)
        return; /* no store: the crash finds none and says so */
    if ((rc = fl_dstore_sync_fd(&st, fd)) < 0) {
        char why[160];
        snprintf(why, sizeof why, "recording a sync told by the faultline filesystem: %s",
                 strerror(-rc));
        fl_dstore_mark_broken(&st, why);
    } else {
        fl_dstore_count_sync(&st);
    }
    fl_dstore_close(&st);
}

int fl_durable_baseline(struct fl_run *r, int host, char *err, size_t errlen)
{
    struct fl_durable *d = dur(r);
    if (!d || !d->tracked[host])
        return 0;
    const char *name = r->s->hosts[host].name, *disk = r->hosts[host].disk;
    char path[PATH_MAX];
    int rc;
    /* the preload where every host sees it */
    char lib[PATH_MAX];
    fl_run_lib_dir(r, lib, sizeof lib);
    if (!d->preload[0] && (rc = fl_run_preload(r, "fl_sync_preload.so", lib, "unsynced: lose",
                                               d->preload, sizeof d->preload, err, errlen)) < 0)
        return rc;
    if ((rc = fl_mkdir_p(d->dir, 0755)) < 0) {
        snprintf(err, errlen, "mkdir %s: %s", d->dir, strerror(-rc));
        return rc;
    }
    store_path(r, host, path, sizeof path);
    struct stat sb;
    if (stat(disk, &sb) < 0) {
        rc = -errno;
        snprintf(err, errlen, "host %s: its disk %s: %s", name, disk, strerror(-rc));
        return rc;
    }
    d->dev[host] = sb.st_dev;
    if ((rc = fl_dstore_reset(path)) < 0) {
        snprintf(err, errlen, "host %s: make the store of what is synced at %s: %s", name, path,
                 strerror(-rc));
        return rc;
    }
    if ((rc = fl_dstore_sync_path(path, sb.st_dev, disk)) < 0)
        snprintf(err, errlen, "host %s: record its disk %s as synced in %s: %s", name, disk, path,
                 strerror(-rc));
    return rc;
}

int fl_durable_env(struct fl_run *r, int task, char **env, size_t *k, char *err, size_t errlen)
{
    struct fl_durable *d = dur(r);
    int host = r->s->tasks[task].host;
    if (!d || !d->tracked[host] || r->hosts[host].disk_by_fs)
        return 0; /* a disk the filesystem serves: it tells the syncs */
    if (!d->preload[0]) {
        snprintf(err, errlen, "host %s: fl_sync_preload.so not in place", r->s->hosts[host].name);
        return -ENOENT;
    }
    char path[PATH_MAX];
    store_path(r, host, path, sizeof path);
    fl_env_preload(env, k, d->preload);
    if (asprintf(&env[(*k)++], "FAULTLINE_DURABLE_STORE=%s", path) < 0 ||
        asprintf(&env[(*k)++], "FAULTLINE_DURABLE_DEV=%llu", (unsigned long long)d->dev[host]) <
            0 ||
        asprintf(&env[(*k)++], "FAULTLINE_DURABLE_ROOT=%s", r->s->workdir) < 0)
        abort();
    return 0;
}

/* ---- files changed at rest -------------------------------------------- */

static int open_data_rw(const struct fl_run *r, int host, uint64_t ino)
{
    char path[PATH_MAX + 64];
    store_path(r, host, path, PATH_MAX);
    size_t n = strlen(path);
    snprintf(path + n, sizeof path - n, "/data/%llu", (unsigned long long)ino);
    return open(path, O_RDWR | O_CLOEXEC);
}

int fl_durable_rest_corrupt(struct fl_run *r, int host, uint64_t ino, uint64_t off, uint8_t x)
{
    if (!fl_durable_tracked(r, host))
        return 0;
    int fd = open_data_rw(r, host, ino);
    if (fd < 0)
        return errno == ENOENT ? 0 : -errno; /* nothing durable: nothing to change */
    uint8_t b;
    int rc = 0;
    ssize_t got = pread(fd, &b, 1, (off_t)off);
    if (got == 1) {
        b ^= x;
        if (pwrite(fd, &b, 1, (off_t)off) != 1)
            rc = -EIO;
    } else if (got < 0) {
        rc = -errno;
    }
    close(fd);
    return rc;
}

int fl_durable_rest_truncate(struct fl_run *r, int host, uint64_t ino, uint64_t size)
{
    if (!fl_durable_tracked(r, host))
        return 0;
    int fd = open_data_rw(r, host, ino);
    if (fd < 0)
        return errno == ENOENT ? 0 : -errno;
    struct stat sb;
    int rc = 0;
    if (fstat(fd, &sb) == 0 && (uint64_t)sb.st_size > size && ftruncate(fd, (off_t)size) < 0)
        rc = -errno;
    close(fd);
    return rc;
}

/* ---- the crash -------------------------------------------------------- */

void fl_durable_crash_begin(struct fl_run *r, int host, struct fl_durable_crash *c)
{
    const struct host_rt *hr = &r->hosts[host];
    memset(c, 0, sizeof *c);
    c->host = host;
    c->was_up = hr->h.state == FL_HOST_UP;
    c->init = hr->h.pid;
    char p[64];
    struct stat sb;
    snprintf(p, sizeof p, "/proc/%d/ns/pid", (int)c->init);
    if (c->was_up && stat(p, &sb) == 0) {
        c->pidns_ino = sb.st_ino;
        c->pidns_dev = sb.st_dev;
        c->have_ns = true;
    }
}

/* Waits until no process of the crashed host's PID namespace (but its
 * init, which does nothing with files) is alive: all of them have exited
 * (zombies close their files first).  Each one's pidfd becomes readable
 * when its last thread has exited. */
static int wait_host_dead(const struct fl_run *r, const struct fl_durable_crash *c, char *err,
                          size_t errlen)
{
    int64_t deadline = fl_mono_ms() + DEAD_WAIT_MS;
    for (;;) {
        struct pollfd alive[64];
        size_t na = 0;
        int first = 0;
        DIR *d = opendir("/proc");
        if (!d) {
            snprintf(err, errlen, "opendir /proc: %s", strerror(errno));
            return -errno;
        }
        struct dirent *de;
        while ((de = readdir(d))) {
            int pid = atoi(de->d_name);
            if (pid <= 0 || pid == (int)c->init)
                continue;
            char p[64];
            struct stat sb;
            snprintf(p, sizeof p, "/proc/%d/ns/pid", pid);
            if (stat(p, &sb) < 0 || sb.st_ino != c->pidns_ino || sb.st_dev != c->pidns_dev)
                continue;
            int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
            if (pfd < 0)
                continue; /* gone */
            struct pollfd q = {.fd = pfd, .events = POLLIN};
            if (poll(&q, 1, 0) == 1 || na == 64) {
                close(pfd);
                if (q.revents)
                    continue;
            } else {
                alive[na++] = q;
            }
            if (!first)
                first = pid;
        }
        closedir(d);
        if (!first)
            return 0;
        int64_t left = deadline - fl_mono_ms();
        if (left <= 0) {
            for (size_t i = 0; i < na; i++)
                close(alive[i].fd);
            snprintf(err, errlen,
                     "host %s: process %d still alive %d s after the crash (its disk "
                     "cannot be brought back to what was synced)",
                     r->s->hosts[c->host].name, first, DEAD_WAIT_MS / 1000);
            return -ETIMEDOUT;
        }
        poll(alive, na, left < 1000 ? (int)left : 1000);
        for (size_t i = 0; i < na; i++)
            close(alive[i].fd);
    }
}

/* One entry of a tree: the live disk's or the durable one. */
struct tent {
    char *path; /* relative to the disk */
    uint32_t mode;
    uint64_t ino;
    uint64_t size; /* live: st_size */
    uint32_t uid, gid;
    char *target; /* durable symbolic link */
    bool have;    /* durable: a recorded content; live: matched */
};

struct tree {
    struct tent *v;
    size_t n, cap;
};

static void tree_free(struct tree *t)
{
    for (size_t i = 0; i < t->n; i++) {
        free(t->v[i].path);
        free(t->v[i].target);
    }
    free(t->v);
}

static struct tent *tree_add(struct tree *t, const char *parent, const char *name)
{
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 64;
        if (!(t->v = realloc(t->v, t->cap * sizeof *t->v)))
            abort();
    }
    struct tent *x = &t->v[t->n++];
    memset(x, 0, sizeof *x);
    if (asprintf(&x->path, "%s%s%s", parent, *parent ? "/" : "", name) < 0)
        abort();
    return x;
}

static int cmp_path(const void *a, const void *b)
{
    return strcmp(((const struct tent *)a)->path, ((const struct tent *)b)->path);
}

/* An empty tree has no array (v NULL), which qsort and bsearch may not be
 * given, even with no element. */
static void tree_sort(struct tree *t)
{
    if (t->n)
        qsort(t->v, t->n, sizeof *t->v, cmp_path);
}

static struct tent *tree_find(struct tree *t, const char *path)
{
    struct tent key = {.path = (char *)path};
    return t->n ? bsearch(&key, t->v, t->n, sizeof *t->v, cmp_path) : NULL;
}

static int live_walk(int dfd, const char *rel, struct tree *t, int depth)
{
    if (depth > MAX_DEPTH)
        return -ELOOP;
    DIR *d = fl_dstore_opendir(dfd, ".", 0);
    if (!d)
        return -errno;
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        struct stat sb;
        if (fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        struct tent *x = tree_add(t, rel, de->d_name);
        x->mode = sb.st_mode;
        x->ino = sb.st_ino;
        x->size = (uint64_t)sb.st_size;
        if (S_ISDIR(sb.st_mode)) {
            char *sub = strdup(x->path);
            int c = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (c >= 0) {
                rc = live_walk(c, sub, t, depth + 1);
                close(c);
            }
            free(sub);
        }
    }
    closedir(d);
    return rc;
}

/* The durable tree from directory ino's recorded entries down; a directory
 * met twice (moved without syncing its old parent) is kept at its first
 * place. */
static int durable_walk(const struct fl_dstore *st, uint64_t ino, const char *rel, struct tree *t,
                        uint64_t **seen, size_t *nseen, int depth)
{
    if (depth > MAX_DEPTH)
        return -ELOOP;
    for (size_t i = 0; i < *nseen; i++)
        if ((*seen)[i] == ino)
            return 1;
    if (!(*seen = realloc(*seen, (*nseen + 1) * sizeof **seen)))
        abort();
    (*seen)[(*nseen)++] = ino;
    struct fl_dstore_ent *ents;
    size_t n;
    int rc = fl_dstore_read_dir(st, ino, &ents, &n);
    if (rc == -ENOENT)
        return 0; /* entry durable, never synced itself: empty */
    if (rc < 0)
        return rc;
    for (size_t i = 0; rc >= 0 && i < n; i++) {
        const struct fl_dstore_ent *en = &ents[i];
        struct tent *x = tree_add(t, rel, en->name);
        x->mode = en->mode;
        x->ino = en->ino;
        x->uid = en->uid;
        x->gid = en->gid;
        if (en->target && !(x->target = strdup(en->target)))
            abort();
        if (S_ISDIR(en->mode)) {
            char *sub = strdup(x->path);
            rc = durable_walk(st, en->ino, sub, t, seen, nseen, depth + 1);
            free(sub);
            if (rc == 1) { /* met before: not here */
                free(x->path);
                free(x->target);
                t->n--;
                rc = 0;
            }
        }
    }
    fl_dstore_ents_free(ents, n);
    return rc < 0 ? rc : 0;
}

/* Does the live file at path (relative to disk dfd) hold what data (an fd,
 * or -1: empty) holds? */
static bool same_content(int dfd, const char *path, int data)
{
    int fd = openat(dfd, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return false;
    struct stat a, b = {0};
    bool same = fstat(fd, &a) == 0 && (data < 0 || fstat(data, &b) == 0) && a.st_size == b.st_size;
    static char x[65536], y[65536];
    for (off_t off = 0; same && off < a.st_size;) {
        ssize_t n = pread(fd, x, sizeof x, off), m = pread(data, y, sizeof y, off);
        if (n <= 0 || n != m || memcmp(x, y, (size_t)n) != 0)
            same = false;
        off += n > 0 ? n : 0;
    }
    close(fd);
    return same;
}

/* Is path's parent (the root, or a directory) in t?  Then path is the top
 * of what goes (or comes back), and is listed; what lies below is not. */
static bool parent_in(struct tree *t, const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return true;
    char *parent = strndup(path, (size_t)(slash - path));
    struct tent *p = tree_find(t, parent);
    free(parent);
    return p != NULL;
}

struct link_of {
    uint64_t ino;
    const char *path; /* created there first */
};

static int cmp_ino(const void *a, const void *b)
{
    uint64_t x = ((const struct link_of *)a)->ino, y = ((const struct link_of *)b)->ino;
    return x < y ? -1 : x > y;
}

/* The durable tree made real under dfd (emptied first). */
static int build(const struct fl_dstore *st, int dfd, struct tree *dur, char *what, size_t wlen)
{
    int rc = 0;
    DIR *d = fl_dstore_opendir(dfd, ".", 0);
    if (!d) {
        snprintf(what, wlen, "open the disk: %s", strerror(errno));
        return -errno;
    }
    struct dirent *de;
    while (rc == 0 && (de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
            (rc = fl_dstore_rm_tree(dfd, de->d_name)) < 0)
            snprintf(what, wlen, "remove %s: %s", de->d_name, strerror(-rc));
    closedir(d);
    struct link_of *links = calloc(dur->n + 1, sizeof *links);
    size_t nl = 0;
    for (size_t i = 0; i < dur->n; i++)
        if (S_ISREG(dur->v[i].mode))
            links[nl++] = (struct link_of){dur->v[i].ino, NULL};
    qsort(links, nl, sizeof *links, cmp_ino);
    size_t u = 0; /* one per inode: the first name made links the rest */
    for (size_t i = 0; i < nl; i++)
        if (u == 0 || links[u - 1].ino != links[i].ino)
            links[u++] = links[i];
    nl = u;
    for (size_t i = 0; rc == 0 && i < dur->n; i++) {
        const struct tent *x = &dur->v[i];
        mode_t perm = x->mode & 07777;
        if (S_ISDIR(x->mode)) {
            if (mkdirat(dfd, x->path, 0700) < 0)
                rc = -errno;
        } else if (S_ISLNK(x->mode)) {
            if (symlinkat(x->target ? x->target : "", dfd, x->path) < 0)
                rc = -errno;
        } else if (S_ISREG(x->mode)) {
            struct link_of key = {x->ino, NULL},
                           *l = bsearch(&key, links, nl, sizeof *links, cmp_ino);
            if (l && l->path) {
                if (linkat(dfd, l->path, dfd, x->path, 0) < 0)
                    rc = -errno;
                continue;
            }
            int out = openat(dfd, x->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
            if (out < 0) {
                rc = -errno;
            } else {
                int in = fl_dstore_open_data(st, x->ino);
                if (in >= 0) {
                    int64_t n = fl_dstore_copy(in, out);
                    if (n < 0)
                        rc = (int)n;
                    close(in);
                }
                if (close(out) < 0 && rc == 0)
                    rc = -errno;
            }
            if (l)
                l->path = x->path;
        } else if (S_ISFIFO(x->mode) || S_ISSOCK(x->mode)) {
            if (mknodat(dfd, x->path, x->mode, 0) < 0)
                rc = -errno;
        } else {
            continue; /* a device node: not brought back */
        }
        if (rc == 0 && fchownat(dfd, x->path, x->uid, x->gid, AT_SYMLINK_NOFOLLOW) < 0)
            rc = -errno;
        if (rc == 0 && !S_ISLNK(x->mode) && fchmodat(dfd, x->path, perm, 0) < 0)
            rc = -errno;
        if (rc < 0)
            snprintf(what, wlen, "make %s: %s", x->path, strerror(-rc));
    }
    free(links);
    return rc;
}

/* ---- unsynced: torn ------------------------------------------------------ */

/* The run's seed mixed with the host's name and the file's path: the same
 * seed tears the same bytes. */
static uint64_t tear_draw(uint64_t seed, const char *host, const char *path)
{
    uint64_t x = seed ^ fl_str_hash(host) ^ (fl_str_hash(path) * 0xd1b54a32d192ed03ULL);
    return fl_splitmix64(&x);
}

/* The length of what live (lfd, ln bytes) and durable (dfd, dn bytes; -1:
 * nothing durable) have in common from the start. */
static off_t common_prefix(int lfd, off_t ln, int dfd, off_t dn)
{
    static char a[65536], b[65536];
    off_t n = ln < dn ? ln : dn, p = 0;
    while (p < n) {
        size_t want = (size_t)(n - p < (off_t)sizeof a ? n - p : (off_t)sizeof a);
        ssize_t x = pread(lfd, a, want, p), y = pread(dfd, b, want, p);
        if (x <= 0 || y <= 0)
            break;
        size_t m = (size_t)(x < y ? x : y), i = 0;
        while (i < m && a[i] == b[i])
            i++;
        p += (off_t)i;
        if (i < m)
            break;
    }
    return p;
}

/* Copies n bytes of in from off to out at off: 0 or -errno. */
static int copy_range(int in, int out, off_t off, off_t n)
{
    static char buf[65536];
    while (n > 0) {
        ssize_t r = pread(in, buf, (size_t)(n < (off_t)sizeof buf ? n : (off_t)sizeof buf), off);
        if (r <= 0)
            return r < 0 ? -errno : -EIO;
        if (pwrite(out, buf, (size_t)r, off) != r)
            return -errno;
        off += r;
        n -= r;
    }
    return 0;
}

/* unsynced: torn.  Each file of the disk whose durable copy is to come back
 * and whose live content goes past it (from the first byte where the two
 * differ, p, to the live end) keeps a part of what was written there: the
 * live bytes up to p + k, k drawn in [0, live size - p], then the durable
 * bytes beyond, if any.  The torn content replaces the durable copy in the
 * store, so that the rebuild makes it.  A file that only shrank is not
 * torn.  0 or -errno (what names the file). */
static int tear(struct fl_run *r, int host, struct fl_dstore *st, int dfd, struct tree *live,
                struct tree *dur, char *what, size_t wlen)
{
    char store[PATH_MAX];
    store_path(r, host, store, sizeof store);
    uint64_t *done = calloc(live->n + 1, sizeof *done);
    size_t ndone = 0;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < live->n; i++) {
        struct tent *x = &live->v[i], *y = tree_find(dur, x->path);
        if (!y || !S_ISREG(x->mode) || !S_ISREG(y->mode))
            continue;
        bool seen_ino = false;
        for (size_t k = 0; k < ndone && !seen_ino; k++)
            seen_ino = done[k] == y->ino;
        if (seen_ino)
            continue; /* another name of a file torn already */
        done[ndone++] = y->ino;
        int lfd = openat(dfd, x->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (lfd < 0)
            continue;
        int old = fl_dstore_open_data(st, y->ino);
        struct stat ls, ds = {0};
        if (fstat(lfd, &ls) < 0 || (old >= 0 && fstat(old, &ds) < 0)) {
            rc = -errno;
        } else {
            off_t p = old >= 0 ? common_prefix(lfd, ls.st_size, old, ds.st_size) : 0;
            if (p < ls.st_size) {
                uint64_t span = (uint64_t)(ls.st_size - p) + 1;
                off_t cut = p + (off_t)(tear_draw(r->seed, r->s->hosts[host].name, x->path) % span);
                char tmp[PATH_MAX + 64], final[PATH_MAX + 64];
                snprintf(final, sizeof final, "%s/data/%llu", store, (unsigned long long)y->ino);
                snprintf(tmp, sizeof tmp, "%s.torn", final);
                int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
                if (out < 0)
                    rc = -errno;
                if (rc == 0)
                    rc = copy_range(lfd, out, 0, cut);
                if (rc == 0 && old >= 0 && ds.st_size > cut)
                    rc = copy_range(old, out, cut, ds.st_size - cut);
                if (out >= 0 && close(out) < 0 && rc == 0)
                    rc = -errno;
                if (rc == 0 && rename(tmp, final) < 0)
                    rc = -errno;
                if (rc < 0)
                    unlink(tmp);
            }
        }
        if (rc < 0)
            snprintf(what, wlen, "tear %s: %s", x->path, strerror(-rc));
        if (old >= 0)
            close(old);
        close(lfd);
    }
    free(done);
    return rc;
}

static void human(uint64_t b, char *buf, size_t len)
{
    if (b < 1024)
        snprintf(buf, len, "%llu bytes", (unsigned long long)b);
    else if (b < 1024 * 1024)
        snprintf(buf, len, "%.1f KiB", b / 1024.0);
    else if (b < 1024ULL * 1024 * 1024)
        snprintf(buf, len, "%.1f MiB", b / 1048576.0);
    else
        snprintf(buf, len, "%.2f GiB", b / 1073741824.0);
}

int fl_durable_crash_end(struct fl_run *r, const struct fl_durable_crash *c, char *detail,
                         size_t dlen, char *err, size_t errlen)
{
    struct fl_durable *d = dur(r);
    const char *name = r->s->hosts[c->host].name, *disk = r->hosts[c->host].disk;
    size_t dn = strlen(detail);
    if (dn)
        fl_text_add(detail, dlen, " ");
    fl_text_add(detail, dlen, c->torn ? "unsynced=torn" : "unsynced=lose");
    if (!d || !d->tracked[c->host])
        return 0;
    if (!c->was_up) {
        fl_text_add(detail, dlen, ": host already down (its disk was left as it was)");
        return 0;
    }
    int rc;
    if (c->have_ns && (rc = wait_host_dead(r, c, err, errlen)) < 0)
        return rc;
    if (d->unseen[c->host]) {
        /* what it synced was never seen: a rebuild would throw away what it
         * wrote as "never synced" */
        fl_text_add(detail, dlen,
                    ": not applied, %s (its syncs cannot be seen): the disk was "
                    "left as it was",
                    d->unseen[c->host]);
        fprintf(stderr,
                "%sfaultline: host %s crashed; unsynced: lose not applied: %s, whose syncs "
                "cannot be seen (its disk is left as it was)\n",
                r->progress ? "\r\033[K" : "", name, d->unseen[c->host]);
        return 0;
    }
    char path[PATH_MAX], why[512];
    store_path(r, c->host, path, sizeof path);
    struct fl_dstore st;
    if ((rc = fl_dstore_open(&st, path, d->dev[c->host])) < 0) {
        snprintf(err, errlen, "host %s: open the store of what was synced %s: %s", name, path,
                 strerror(-rc));
        return rc;
    }
    if (fl_dstore_broken(&st, why, sizeof why)) {
        fl_dstore_close(&st);
        snprintf(err, errlen, "host %s: a sync was not recorded (%s): its disk is left as it was",
                 name, why);
        return -EIO;
    }
    struct tree live = {0}, dur = {0};
    uint64_t *seen = NULL;
    size_t nseen = 0;
    struct stat rs;
    int dfd = open(disk, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || fstat(dfd, &rs) < 0) {
        rc = -errno;
        snprintf(err, errlen, "host %s: open its disk %s: %s", name, disk, strerror(-rc));
        goto cleanup;
    }
    if ((rc = live_walk(dfd, "", &live, 0)) < 0) {
        snprintf(err, errlen, "host %s: read its disk %s: %s", name, disk, strerror(-rc));
        goto cleanup;
    }
    if ((rc = durable_walk(&st, rs.st_ino, "", &dur, &seen, &nseen, 0)) < 0) {
        snprintf(err, errlen, "host %s: read the store of what was synced %s: %s", name, path,
                 strerror(-rc));
        goto cleanup;
    }
    tree_sort(&live);
    tree_sort(&dur);
    if (c->torn) {
        char what[512] = "";
        if ((rc = tear(r, c->host, &st, dfd, &live, &dur, what, sizeof what)) < 0) {
            snprintf(err, errlen, "host %s: unsynced: torn: %s", name, what);
            goto cleanup;
        }
    }
    /* what goes: entries lost, files rolled back; what comes back */
    size_t lost = 0, rolled = 0, back = 0;
    uint64_t bytes = 0;
    char list[768] = "";
    for (size_t i = 0; i < live.n; i++) {
        struct tent *x = &live.v[i], *y = tree_find(&dur, x->path);
        if (y)
            y->have = true;
        if (!y) {
            lost++;
            if (S_ISREG(x->mode))
                bytes += x->size;
            if (parent_in(&dur, x->path))
                fl_text_add(list, sizeof list, " -%s%s", x->path, S_ISDIR(x->mode) ? "/" : "");
        } else if ((x->mode & S_IFMT) != (y->mode & S_IFMT)) {
            rolled++;
            if (S_ISREG(x->mode))
                bytes += x->size;
            fl_text_add(list, sizeof list, " ~%s", x->path);
        } else if (S_ISREG(x->mode)) {
            int data = fl_dstore_open_data(&st, y->ino);
            if (!same_content(dfd, x->path, data)) {
                rolled++;
                bytes += x->size;
                struct stat ds = {0};
                if (data >= 0)
                    fstat(data, &ds);
                fl_text_add(list, sizeof list, " ~%s %llu->%llu", x->path,
                            (unsigned long long)x->size, (unsigned long long)ds.st_size);
            }
            if (data >= 0)
                close(data);
        }
    }
    for (size_t i = 0; i < dur.n; i++)
        if (!dur.v[i].have) {
            back++;
            if (parent_in(&live, dur.v[i].path))
                fl_text_add(list, sizeof list, " +%s%s", dur.v[i].path,
                            S_ISDIR(dur.v[i].mode) ? "/" : "");
        }
    /* Much unsynced and not one sync seen since the host started: its
     * programs may sync in a way the preload does not see (a static or Go
     * program it could not be told was there, direct system calls), or
     * never sync.  The loss is applied (a program that never syncs does
     * lose it all), with a note that says which it may be. */
    long long syncs = fl_dstore_syncs(&st);
    if (syncs == 0 && bytes > UNSYNCED_NOTE_BYTES) {
        char hb0[32];
        human(bytes, hb0, sizeof hb0);
        fl_run_note(r,
                    "host %s crashed with %s unsynced and no sync was recorded since it "
                    "started: its programs never synced, or sync in a way the preload does not "
                    "see (a static or Go binary, direct system calls, io_uring); the loss was "
                    "applied (unsynced: lose)",
                    name, hb0);
    }
    char what[512] = "";
    if ((rc = build(&st, dfd, &dur, what, sizeof what)) < 0) {
        snprintf(err, errlen, "host %s: bring its disk %s back to what was synced: %s", name, disk,
                 what);
        goto cleanup;
    }
    char hb[32];
    human(bytes, hb, sizeof hb);
    char sum[160];
    snprintf(sum, sizeof sum, "%zu entr%s lost, %zu file%s rolled back, %zu entr%s back", lost,
             lost == 1 ? "y" : "ies", rolled, rolled == 1 ? "" : "s", back,
             back == 1 ? "y" : "ies");
    fl_text_add(detail, dlen, ": %s, %llu bytes unsynced%s%s", sum, (unsigned long long)bytes,
                list[0] ? ":" : "", list);
    fprintf(stderr,
            "%sfaultline: host %s crashed, unsynced writes lost: its disk is back to what "
            "was synced (%s, %s unsynced)\n",
            r->progress ? "\r\033[K" : "", name, sum, hb);
cleanup:
    if (dfd >= 0)
        close(dfd);
    fl_dstore_close(&st);
    tree_free(&live);
    tree_free(&dur);
    free(seen);
    return rc;
}
