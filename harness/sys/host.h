/*
 * host.h: a host is what a bug report calls a machine: its own network,
 * mount, PID, UTS and IPC namespaces, held by a small init process, with a
 * private disk mounted at the working directory, its own /tmp and an
 * /etc/hosts naming every host.  See host.c for the life cycle.
 */
#ifndef FL_HOST_H
#define FL_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct fl_host_mount {
    char *src; /* a directory in the harness's view */
    char *dst; /* absolute path inside the host */
};

/* A file or directory of the harness's view that a host with a root of its
 * own sees at the same path (fl_host_spec.binds). */
enum {
    FL_BIND_RO = 1,
    FL_BIND_OPTIONAL = 2, /* absent at the host's start: skipped */
    FL_BIND_REC = 4,      /* with the mounts below it */
};
struct fl_host_bind {
    const char *path;
    unsigned flags;
};

/* What a host is made of; the caller owns the strings. */
struct fl_host_spec {
    const char *name;                   /* host name, also its UTS hostname */
    int idx;                            /* index in the run (fabric address) */
    const char *disk_dir;               /* mounted at workdir */
    const char *tmp_dir;                /* mounted at /tmp */
    const char *workdir;                /* absolute, exists in the root filesystem */
    const char *hosts_file;             /* bind-mounted over /etc/hosts, or NULL (with a
                                         * root of its own: its common layer's) */
    const struct fl_host_mount *mounts; /* extra binds (shared paths) */
    size_t nmounts;
    const char *cgroup;     /* cgroup dir that init and every process join, or NULL */
    const char *cgroup_mem; /* a second one (the v1 memory hierarchy's), or NULL */
    long nofile;            /* > 0: the soft RLIMIT_NOFILE of every process started
                             * on the host (a `limit: {fds}` fault) */
    long nproc;             /* > 0: the soft RLIMIT_NPROC of every process started on
                             * the host (rootless `limit: {threads}`: the kernel counts
                             * it per user namespace, and the host's tasks have one of
                             * their own) */
    /* Directories that stay visible at the same path inside the host even
     * when they lie under /tmp (which the host's own /tmp covers): the run
     * directory (event socket), faultline's bin directory and the
     * scenario's directory ({scenario_dir}). */
    const char *const *expose;
    size_t nexpose;
    /* A root of its own (see host.c): NULL, the machine's root as it is
     * (and expose above applies).  Else the mount point where init
     * assembles the host's root (fl_root_layer_make), the overlay's options
     * (their lower layers: fl_root_common_make's, which holds its /dev and
     * /etc/hosts, over the machine's /), a directory covered with an empty
     * one (hide_with; the run's output directory:
     * nothing of the run is seen but what binds gives back) and what the
     * host sees of the harness's view at the same path. */
    const char *root;
    const char *root_opts;
    const char *hide;
    const char *hide_with; /* with hide: an empty directory of the host's own
                            * bound over it (fl_root_layer_make's) */
    const struct fl_host_bind *binds;
    size_t nbinds;
    /* rootless (root_layer.h, fl_root_tops): the directories right below /
     * that get an overlay of their own, their upper and work directories'
     * parent (DIR/top) and the common layer (for /etc) */
    const char *const *tops;
    size_t ntops;
    const char *tops_dir;
    const char *common;
    /* false (the default): the host's tasks run in a user namespace of its
     * own (userns.c) and its /sys, /proc/sys and cgroup hierarchies are
     * read-only: root there is root of the host only.  true (a scenario's
     * `privileged: true`): its tasks are the machine's root, as the
     * harness is. */
    bool privileged;
};

enum fl_host_state { FL_HOST_DOWN, FL_HOST_STARTING, FL_HOST_UP };

struct fl_host {
    struct fl_host_spec spec;
    enum fl_host_state state;
    pid_t pid;                    /* init, in the harness's PID namespace */
    int pidfd;                    /* of init, for setns; -1 when down */
    unsigned long long starttime; /* of init, from /proc/PID/stat, for gc */
    int generation;               /* 0 on first start, +1 per restart/replace */
    bool has_userns;              /* userns_fd is open: the user namespace its tasks */
    int userns_fd;                /* join (made at the first spawn after a start) */
};

/* One-time setup of the calling process (the harness): a private mount
 * namespace, so that every mount of the run vanishes with it, and the fds it
 * needs to return to its own PID namespace after a spawn.  Must be called
 * single-threaded, before any fl_host_start. */
int fl_host_global_init(char *err, size_t errlen);

/* Starts a batch of hosts without waiting for them: clone init processes.
 * Each init sets up its mounts and hostname in parallel; fl_host_wait_ready
 * waits for every host started since the last wait. */
int fl_host_start(struct fl_host *h, char *err, size_t errlen);
int fl_host_wait_ready(struct fl_host **hosts, size_t n, char *err, size_t errlen);

/* Tells the host module that the harness reaped PID (any child: a no-op
 * unless it was an init), so that the init's stack can be reused.  Call it
 * for every pid waitpid returns. */
void fl_host_note_reaped(pid_t pid);

/* Brings a batch of hosts up the fast way: every init cloned, every veth
 * plugged into the fabric in one netlink batch, then all waited for.  On
 * error the hosts already started are left for the caller to kill. */
struct fl_fabric;
int fl_host_up_batch(struct fl_host **hosts, size_t n, struct fl_fabric *fab, char *err,
                     size_t errlen);

/* Kills a host at once (init SIGKILL: the kernel kills everything in its PID
 * namespace).  Does not wait: the caller reaps init and the host's processes
 * with waitpid(-1) (init's exit completes only once they are all reaped).
 * The host is DOWN at once and may be started again. */
int fl_host_kill(struct fl_host *h);

/* fl_host_kill, and SIGKILL to every other process of the host's PID
 * namespace too, before it returns: the kernel kills them only as init's
 * exit runs, which on a loaded machine can come well after, while they go
 * on (a process that sent a sync point and got its answer meanwhile would
 * run past the fault).  How many it signalled, or -errno. */
int fl_host_kill_now(struct fl_host *h);

/* Handles a reaped pid: returns true (and marks the host down, if it was not)
 * if pid was this host's current init. */
bool fl_host_reaped(struct fl_host *h, pid_t pid);

struct fl_spawn {
    char *const *argv;
    char *const *envp;
    const char *cwd;                    /* inside the host; NULL = workdir */
    int stdin_fd, stdout_fd, stderr_fd; /* -1: /dev/null */
    bool new_session;                   /* setsid() (default: own process group) */
    const char *cgroup;                 /* a cgroup dir it joins too (after the host's), before
                                         * exec, so its descendants stay in it: or NULL */
    /* Called in the harness once the process exists, ready to exec, and
     * waiting for this to return: a tracer takes it (sys/vclock.c) before
     * its first instruction.  < 0 (err filled): it never execs, and the
     * spawn fails with that error.  NULL: none. */
    int (*before_exec)(void *arg, pid_t pid, char *err, size_t errlen);
    void *before_exec_arg;
};

/* Starts a process inside the host (all its namespaces, its cgroup and
 * sp->cgroup); the
 * harness is its parent.  Returns the pid (> 0) or -errno with err filled. */
pid_t fl_host_spawn(struct fl_host *h, const struct fl_spawn *sp, char *err, size_t errlen);

/* Enters the namespaces of an init process found by pid (for `faultline
 * exec`): the calling process itself moves; the next fork lands in the PID
 * namespace. */
int fl_host_enter_pid(pid_t init_pid, unsigned long long starttime, const char *workdir, char *err,
                      size_t errlen);

/* Start time of a process (field 22 of /proc/PID/stat), 0 if it is gone. */
unsigned long long fl_proc_starttime(pid_t pid);

#endif
