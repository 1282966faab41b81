/*
 * root_layer.h: the harness's side of a host's root of its own (see
 * root_layer.c).
 */
#ifndef FL_ROOT_LAYER_H
#define FL_ROOT_LAYER_H

#include <stdbool.h>
#include <stddef.h>

/* Makes DIR the home of a host's private root: DIR/upper (what the host
 * wrote outside its disk, /tmp and shared paths), DIR/work (overlayfs's)
 * and DIR/mnt (where init assembles the root); with fresh, anything there
 * before is removed first (a replaced host: a new machine).  The mount
 * point (DIR/mnt) and the overlay's options go to mnt and opts: 0 or
 * -errno. */
int fl_root_layer_make(const char *dir, bool fresh, char *mnt, size_t mntlen, char *opts,
                       size_t optlen);

/* The mount points right below the harness's / that a host's overlay of /
 * does not hold and that it should see (read-only): every one but /proc,
 * /sys, /dev, /tmp, /run (the host has its own) and what lies in hide (the
 * run's output directory).  Up to max of them, strdup'ed into out; how many. */
size_t fl_root_submounts(const char *hide, char **out, size_t max);

#endif
