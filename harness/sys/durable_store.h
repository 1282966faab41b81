/*
 * durable_store.h: the store of the crash-consistency layer (`crash_host`
 * with `unsynced: lose`): what a tracked host's disk holds durably, as a
 * strict POSIX reading of fsync allows a program to assume after a crash.
 *
 * One store per tracked host, a directory outside its disk:
 *   data/<ino>   the content file <ino> had at its last successful
 *                fsync/fdatasync (or at the host's start)
 *   dirs/<ino>   the entries directory <ino> had at its last successful
 *                fsync (or at the host's start): name, inode number, mode,
 *                owner, a symbolic link's target (see durable_store.c)
 *   lock         byte-range (OFD) locks, one byte per inode number, so that
 *                the copy and the rename of one inode's snapshot never
 *                interleave with another's (processes and threads alike)
 *   syncs        one byte for each sync the preload recorded since the
 *                host's start (the harness's own baseline not counted)
 *   broken       present when a snapshot could not be recorded (the text
 *                says what failed): the harness then refuses to rebuild
 * Inode numbers are the disk's own (a tmpfs of its own for every tracked
 * host, so its st_dev tells its files from everything else).
 *
 * The same code runs in two places: in fl_sync_preload.so inside the host
 * (fsync and friends, harness/tools/fl_sync_preload.c) and in the harness
 * (the baseline when a host starts, files changed at rest, the rebuild after
 * a crash, harness/faults/durable.c).  So it uses nothing but the C library.
 *
 * Errors: 0 or a negative errno; a message for people, where there is one,
 * goes to the caller's buffer.
 */
#ifndef FL_DURABLE_STORE_H
#define FL_DURABLE_STORE_H

#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct fl_dstore {
    int dirfd; /* the store directory, -1 when closed */
    dev_t dev; /* the tracked disk's st_dev */
};

/* Opens the store at path for a disk whose st_dev is dev. */
int fl_dstore_open(struct fl_dstore *st, const char *path, dev_t dev);
void fl_dstore_close(struct fl_dstore *st);

/* Empties (or creates) the store directory at path: data/, dirs/, lock. */
int fl_dstore_reset(const char *path);

/* Records fd's file (its content) or directory (its entries) as durable now,
 * if it lies on the store's disk (0 and nothing done otherwise: another
 * filesystem, a pipe, a socket).  The caller's fd is neither moved nor
 * changed: the content is read through a descriptor of its own. */
int fl_dstore_sync_fd(struct fl_dstore *st, int fd);

/* Records everything under the directory rootfd (on the store's disk) as
 * durable: every directory's entries and every file's content; mount points
 * of other filesystems below it are entries, not descended into. */
int fl_dstore_sync_tree(struct fl_dstore *st, int rootfd);

/* Opens the store at path (for the disk dev) and records everything under
 * the directory root (a path) as durable, as fl_dstore_sync_tree. */
int fl_dstore_sync_path(const char *path, dev_t dev, const char *root);

/* After a write of n bytes at offset off through an O_SYNC/O_DSYNC
 * descriptor fd: those bytes, and the file's size now, are durable.  The
 * rest of the file keeps what was durable before (all of it, when nothing
 * was recorded for the file yet: a first snapshot). */
int fl_dstore_sync_range(struct fl_dstore *st, int fd, off_t off, size_t n);

/* In a child just forked (pthread_atfork): lets go of the locks other
 * threads of the parent held at the fork. */
void fl_dstore_forked(void);

/* Counts one sync recorded by a program (the preload, after each
 * successful record): the harness tells "nothing was ever synced" from
 * "the syncs were not seen" with it (harness/engine/reach.c). */
void fl_dstore_count_sync(struct fl_dstore *st);
/* How many syncs were counted since the store was reset. */
long long fl_dstore_syncs(const struct fl_dstore *st);

/* Marks the store broken (the first reason is kept). */
void fl_dstore_mark_broken(struct fl_dstore *st, const char *why);

/* ---- reading the store (harness) -------------------------------------- */

struct fl_dstore_ent {
    uint64_t ino;
    uint32_t mode; /* st_mode: type and permissions */
    uint32_t uid, gid;
    bool mountpoint; /* another filesystem was mounted here */
    char *name;
    char *target; /* symbolic link: its target, else NULL */
};

/* The recorded entries of directory ino: *ents malloc'd (free with
 * fl_dstore_ents_free); -ENOENT when none were recorded. */
int fl_dstore_read_dir(const struct fl_dstore *st, uint64_t ino, struct fl_dstore_ent **ents,
                       size_t *n);
void fl_dstore_ents_free(struct fl_dstore_ent *ents, size_t n);

/* An fd (O_RDONLY) of file ino's recorded content, or -ENOENT. */
int fl_dstore_open_data(const struct fl_dstore *st, uint64_t ino);

/* The text of the store's broken file into buf ("" when it is not broken);
 * true when broken. */
bool fl_dstore_broken(const struct fl_dstore *st, char *buf, size_t len);

/* Copies the whole content of in (from offset 0) to out (at offset 0):
 * copy_file_range, else sendfile, else read/write.  Bytes copied, or
 * -errno. */
int64_t fl_dstore_copy(int in, int out);

/* ---- directories (the store's, and the harness's rebuild) -------------- */

/* A stream of the directory name (relative to dfd; "." for dfd itself),
 * opened O_RDONLY | O_DIRECTORY | O_CLOEXEC | flags; NULL with errno set. */
DIR *fl_dstore_opendir(int dfd, const char *name, int flags);

/* Removes name (relative to dfd), a directory with everything below it:
 * 0 (also when it is not there), or -errno. */
int fl_dstore_rm_tree(int dfd, const char *name);

#endif
