/*
 * view.c: a path of a host's filesystem, reached from the harness the way
 * the host would reach it, and never the machine's file of that name.
 *
 * The checks after a run (expect files:, checkpoint:) read what a host left
 * on its own files: its disk (mounted at the workdir), a shared directory
 * (mounted at its path below the workdir) or its /tmp.  A path is split
 * into the directory that holds that part of the host's view (the "root")
 * and the rest, which is resolved inside the root only (openat2 with
 * RESOLVE_IN_ROOT): "..", an absolute path or a symlink a task made
 * (`etclink -> /etc`, `up -> ../../..`) resolve as if the root were "/",
 * so they can name nothing of the machine's.  An absolute path outside
 * the workdir and /tmp is not the host's (the loader refuses it in a
 * scenario; a checkpoint state file may still name one): -EXDEV.
 *
 * Limit: the roots are resolved apart, so a symlink to an absolute path
 * stays in its own root (a link in the disk to /srv/faultline/x is looked
 * for at <disk>/srv/faultline/x, and finds nothing).  When each host has a
 * root filesystem of its own, fl_host_view_at roots every path there.
 */
#include "harness/engine/engine_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int fl_host_view_at(struct engine *e, int host, const char *path, char *rel, size_t len)
{
    const struct fl_scenario *s = e->r.s;
    const char *root = e->r.hosts[host].disk, *rest;
    char shared[PATH_MAX];
    size_t wl = strlen(s->workdir);
    if (path[0] != '/')
        rest = path;
    else if (!strncmp(path, s->workdir, wl) && (path[wl] == '/' || !path[wl]))
        rest = path + wl;
    else if (!strncmp(path, "/tmp", 4) && (path[4] == '/' || !path[4])) {
        root = e->r.hosts[host].tmp;
        rest = path + 4;
        goto open_root;
    } else
        return -EXDEV;
    for (;;) /* "/", "./" and "." at its start: the workdir itself */
        if (*rest == '/' || (rest[0] == '.' && (rest[1] == '/' || !rest[1])))
            rest++;
        else
            break;
    for (size_t m = 0; m < s->n_shared; m++) {
        const struct fl_scn_shared *sd = &s->shared[m];
        size_t pl = strlen(sd->path);
        bool mine = false;
        for (size_t k = 0; k < sd->n_hosts; k++)
            mine |= sd->hosts[k] == host;
        if (mine && !strncmp(rest, sd->path, pl) && (rest[pl] == '/' || !rest[pl])) {
            snprintf(shared, sizeof shared, "%s/shared/%zu", e->r.fsdir, m);
            root = shared;
            rest += pl;
            break;
        }
    }
open_root:
    while (*rest == '/')
        rest++;
    if ((size_t)snprintf(rel, len, "%s", *rest ? rest : ".") >= len)
        return -ENAMETOOLONG;
    int fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

int fl_host_open_in_view(struct engine *e, int host, const char *path, int flags)
{
    char rel[PATH_MAX];
    int root = fl_host_view_at(e, host, path, rel, sizeof rel);
    if (root < 0)
        return root;
    struct open_how how = {.flags = (uint64_t)(flags | O_CLOEXEC),
                           .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
    long fd = syscall(SYS_openat2, root, rel, &how, sizeof how);
    int err = errno;
    close(root);
    return fd < 0 ? -err : (int)fd;
}
