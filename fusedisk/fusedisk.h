/*
 * fusedisk/fusedisk.h: the faultline filesystem, a host's disk served through
 * FUSE so that every program's file operations on it pass through faultline,
 * whatever its language or I/O interface (a Go or static binary, raw system
 * calls, O_DIRECT), with faults by path and operation (the model of
 * CharybdeFS).
 *
 * A fusedisk mirrors a backing directory (the disk as it lies on the run's
 * tmpfs) at a mount point, in the mount namespace of the caller:
 *
 *     programs ── open/write/fsync("train_logs/x") ──> mount point (FUSE)
 *                                                        │ libfuse threads
 *                                 rules: path glob × op ─┤ errno, delay, short
 *                                                        ▼
 *                                               backing directory (tmpfs)
 *
 * Every operation is done on the backing directory as the caller: files and
 * directories a program creates are its uid's and gid's (setfsuid/setfsgid
 * around the call), and the kernel checks permissions from the attributes
 * (default_permissions); other users than the mounter may use it
 * (allow_other).  Only the disk's files are served: pipes, sockets and
 * terminals never pass through it, so a fault on the disk never touches a
 * program's stdout or its network.
 *
 * Rules: {glob, ops, action, probability}.  An operation on path P (relative
 * to the disk's root, no leading '/': "train_logs/model.ckpt-10.index")
 * matches a rule when its op is among the rule's ops and P matches the glob:
 * '*' and '?' and [...] within one path component, "**" as a whole
 * component for any number of components ("a/" "**" "/x" matches a/x too):
 * "a/" then "**" is everything under a/ (not a itself, as in gitignore), and
 * "**" alone every path.  Rules are tried in the order added; the first
 * that matches (and wins its probability draw) applies: errno fails the
 * operation with it (nothing done), delay sleeps before doing it, short (a
 * write) writes only the first bytes of the request.  A rename or link
 * matches on either of its paths.
 *
 * Lifecycle: fl_fusedisk_mount -> rules added and removed at any time, from
 * any thread -> fl_fusedisk_unmount (lazy: a process still inside it keeps
 * nothing alive but its own open files).  A harness that forks programs while
 * a fusedisk serves must not hold the rules lock across fork (it is only held
 * inside these calls).
 *
 * Errors: 0 or a negative errno, and one line naming the path and call in
 * err (which may be NULL).
 */
#ifndef FL_FUSEDISK_H
#define FL_FUSEDISK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The operations a rule can name; a rule holds a mask of them. */
enum fl_fd_op {
    FL_FD_OPEN = 1 << 0,     /* open of an existing file */
    FL_FD_CREATE = 1 << 1,   /* creat / open with O_CREAT of a new file, mknod */
    FL_FD_READ = 1 << 2,     /* read, pread, readv */
    FL_FD_WRITE = 1 << 3,    /* write, pwrite, writev */
    FL_FD_FSYNC = 1 << 4,    /* fsync, fdatasync, and of a directory */
    FL_FD_RENAME = 1 << 5,   /* rename (either name), link */
    FL_FD_UNLINK = 1 << 6,   /* unlink */
    FL_FD_MKDIR = 1 << 7,    /* mkdir */
    FL_FD_RMDIR = 1 << 8,    /* rmdir */
    FL_FD_TRUNCATE = 1 << 9, /* truncate, ftruncate, fallocate */
    FL_FD_READDIR = 1 << 10, /* opendir/readdir */
    FL_FD_STATFS = 1 << 11,  /* statfs */
    FL_FD_OP_ALL = (1 << 12) - 1,
};

/* Parses an op name ("open", "create", "read", "write", "fsync", "rename",
 * "unlink", "mkdir", "rmdir", "truncate", "readdir", "statfs", "all") into
 * its mask: 0, or -EINVAL.  fl_fd_op_name: the name of one op. */
int fl_fd_op_parse(const char *name, unsigned *mask);
const char *fl_fd_op_name(unsigned op);
/* Every op name, comma-separated, for messages. */
const char *fl_fd_op_names(void);

/* Does relative path match glob (see above)? */
bool fl_fd_glob_match(const char *glob, const char *path);

struct fl_fd_rule {
    const char *glob;   /* copied */
    unsigned ops;       /* mask of enum fl_fd_op */
    int err;            /* > 0: fail with this errno */
    uint64_t delay_us;  /* > 0: sleep this long first */
    uint64_t short_len; /* > 0 with err == 0: a write keeps at most this many bytes */
    double probability; /* 0 < p <= 1 (1: every time) */
    uint64_t seed;      /* of the rule's draws */
};

struct fl_fusedisk;

/* Serves backing at mountpoint (both existing directories) with threads
 * worker threads (0: libfuse's default).  *out on success. */
int fl_fusedisk_mount(struct fl_fusedisk **out, const char *backing, const char *mountpoint,
                      unsigned threads, char *err, size_t errlen);
/* Unmounts and frees it; the backing directory is left as it is. */
void fl_fusedisk_unmount(struct fl_fusedisk *d);

/* Adds a rule; its id (> 0) or a negative errno. */
int fl_fusedisk_add_rule(struct fl_fusedisk *d, const struct fl_fd_rule *r);
/* Removes rule id (healed); 0 or -ENOENT. */
int fl_fusedisk_remove_rule(struct fl_fusedisk *d, int id);
/* Told after a program made something durable through the filesystem: a
 * successful fsync or fdatasync of a file or of a directory (a write through
 * an O_SYNC or O_DSYNC descriptor reaches the filesystem as a write and an
 * fsync of the whole file).  fd is the backing file's or directory's
 * descriptor, for the call only.  Called by the worker threads, several at
 * once; an fsync that a rule failed is not told.  sync(2) and syncfs(2)
 * are never told: the kernel does not pass them to a FUSE server.  Set it
 * before the filesystem is used (NULL: nothing told). */
typedef void (*fl_fd_synced_fn)(void *ctx, int fd);
void fl_fusedisk_on_synced(struct fl_fusedisk *d, fl_fd_synced_fn fn, void *ctx);

/* How many operations rule id has hit so far (errno, delay or short applied). */
uint64_t fl_fusedisk_hits(struct fl_fusedisk *d, int id);

/* Where a rule hit: one operation on one path (a rename: the name that
 * matched), how many times. */
#define FL_FD_WHERE_MAX 32 /* distinct (op, path) kept per rule; the rest only counted */
struct fl_fd_where {
    unsigned op; /* one enum fl_fd_op */
    char path[256];
    uint64_t count;
};
/* Up to max of rule id's (op, path) in the order first hit, into out; how
 * many.  *more: the hits not listed (past FL_FD_WHERE_MAX, or past max). */
size_t fl_fusedisk_where(struct fl_fusedisk *d, int id, struct fl_fd_where *out, size_t max,
                         uint64_t *more);

#endif
