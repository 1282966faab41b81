/*
 * disk_fs.h: `disk:` faults by path, at the faultline filesystem (see
 * disk_fs.c); disk.c calls these for a fault with `path:`.
 */
#ifndef FL_DISK_FS_H
#define FL_DISK_FS_H

#include "harness/run/run.h"

struct fl_disk_fs;

/* The run's filesystems to be (one per host a fault by path targets): *out,
 * NULL when the run has no such fault. */
int fl_disk_fs_init(struct fl_run *r, struct fl_disk_fs **out, char *err, size_t errlen);
/* Does a host of the run want its disk served so for the whole run
 * (`disk: {fs: true}`, or every host: --disk-fs)? */
bool fl_disk_fs_wanted(const struct fl_run *r);
/* Before host starts (and starts again): its disk served through a fresh
 * faultline filesystem, the host's spec pointed at it, the rules that are
 * on put back. */
int fl_disk_fs_host_starting(struct fl_run *r, struct fl_disk_fs *fs, int host, char *err,
                             size_t errlen);
/* The fault's rule on (apply) or off (heal). */
int fl_disk_fs_set(struct fl_run *r, struct fl_disk_fs *fs, struct fault_rt *fr, bool on, char *err,
                   size_t errlen);
/* "path=GLOB op=OPS" into buf; its length. */
size_t fl_disk_fs_detail(const struct fl_scn_disk *dk, char *buf, size_t len);
/* Unmounts every one and frees fs (NULL: nothing); where the faults still
 * on hit is recorded first. */
void fl_disk_fs_free(struct fl_run *r, struct fl_disk_fs *fs);

#endif
