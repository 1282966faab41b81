/*
 * root_layer.h: the harness's side of a host's root of its own (see
 * root_layer.c).
 */
#ifndef FL_ROOT_LAYER_H
#define FL_ROOT_LAYER_H

#include <stdbool.h>
#include <stddef.h>

/* Makes DIR (afresh) the layer every host's root has above the machine's
 * /: DIR/dev, opaque (the machine's root filesystem's /dev is not shown),
 * with null, zero, full, random, urandom, tty, the fd/stdin/stdout/stderr
 * links, ptmx -> pts/ptmx, pts/ (each host mounts a devpts of its own
 * there) and shm/ (1777); and DIR/etc/hosts, a copy of hosts_file (unless
 * NULL).  What a host writes there lands in its own upper layer: 0 or
 * -errno.  Rootless, with the skeleton of / (see fl_root_tops). */
int fl_root_common_make(const char *dir, const char *hosts_file);

/* Makes DIR the home of a host's private root: DIR/upper (what the host
 * wrote outside its disk, /tmp and shared paths), DIR/work (overlayfs's),
 * DIR/mnt (where init assembles the root) and DIR/hide (bound over the
 * run's output directory in the host: empty but for the mount points of
 * what the host is given back there); with fresh, anything there
 * before is removed first (a replaced host: a new machine), without it
 * only the host's /dev/shm is emptied (a restart: a reboot).  The overlay's
 * lower layers are common (a directory fl_root_common_make made; NULL for
 * none) over the machine's /.  The mount point (DIR/mnt) and the overlay's
 * options go to mnt and opts: 0 or -errno. */
int fl_root_layer_make(const char *dir, const char *common, bool fresh, char *mnt, size_t mntlen,
                       char *opts, size_t optlen);

/* Rootless (rootless.c) a host's root cannot have the machine's / as a
 * lower layer: the kernel refuses an overlay (or any non-recursive bind) of
 * a mount with mounts below it that a user namespace inherited, as / has
 * (/proc, /sys, /dev).  So the overlay of a rootless host's root has the
 * common layer alone below it, which then holds a skeleton of / too (its
 * directories and symbolic links), and each directory right below / of
 * /'s own filesystem (not /proc, /sys, /dev, /tmp, /run) that holds
 * something the user may read gets an overlay of its own over the machine's (its upper layer
 * DIR/top/NAME/u, work DIR/top/NAME/w; /etc's common/etc too, with the run's hosts file), made by
 * the host's init.  Their names (computed once), into *names: how many. */
size_t fl_root_tops(const char *const **names);

/* The mount points right below the harness's / that a host's overlay of /
 * does not hold and that it should see (read-only): every one but /proc,
 * /sys, /dev, /tmp, /run (the host has its own) and what lies in hide (the
 * run's output directory).  Up to max of them, strdup'ed into out; how many. */
size_t fl_root_submounts(const char *hide, char **out, size_t max);

#endif
