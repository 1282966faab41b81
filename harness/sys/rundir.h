/*
 * rundir.h: a run's directory and its state file.
 *
 * Every run owns <out>/runs/<run_id>/:
 *   state            what the run created (read by `gc` and `exec`); status
 *                    running, done, or killed (gc removed its disks)
 *   scenario.yaml    a copy of the scenario file
 *   etc-hosts        /etc/hosts of every host
 *   ev.sock          the event channel
 *   fs/              a tmpfs (in the harness's mount namespace) holding:
 *     hosts/<h>/disk each host's disk (mounted at the workdir)
 *     hosts/<h>/tmp  each host's /tmp
 *     shared/<i>     each shared: path
 *   hosts/, shared/  a copy of fs/ at the end, with --keep
 *   logs/<host>.<job>.<task>.<gen>.log   each process's stdout+stderr
 */
#ifndef FL_RUNDIR_H
#define FL_RUNDIR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* The state file, as key=value lines rewritten atomically on every change. */
struct fl_state_host {
    char name[64];
    pid_t pid;
    unsigned long long starttime;
};

struct fl_state {
    char run_id[64];
    char scenario[256];
    char variant[256];
    char db[4096];
    char workdir[4096];
    char status[16]; /* "running", "done", "killed" (gc: the harness was killed) */
    pid_t harness_pid;
    unsigned long long harness_start;
    pid_t switch_pid;
    unsigned long long switch_start;
    char cgroups[8][4096]; /* cgroup directories to remove */
    size_t ncgroups;
    struct fl_state_host *hosts;
    size_t nhosts;
};

int fl_state_write(const char *dir, const struct fl_state *st);
/* Reads <dir>/state; hosts is malloc'd (free with fl_state_free). */
int fl_state_read(const char *dir, struct fl_state *st);
void fl_state_free(struct fl_state *st);

/* A killed run's directory, as `faultline gc` leaves it: removes everything
 * in dir but the evidence (logs/, state, scenario.yaml, etc-hosts): the
 * disks (fs/, and hosts/ and shared/ of --keep), the event socket, the
 * preloads.  *removed (may be NULL) counts the entries removed; 0, or the
 * first error (the rest is still tried). */
int fl_rundir_strip(const char *dir, size_t *removed);

/* mkdir -p */
int fl_mkdir_p(const char *path, mode_t mode);
/* rm -rf that does not cross mount points (it unmounts what it finds under
 * path in the caller's mount namespace first, lazily). */
int fl_rm_rf(const char *path);
/* Copies the tree under src into dst (created if missing): directories,
 * regular files, symlinks; owners and modes kept. */
int fl_copy_tree(const char *src, const char *dst);
/* Copies one file atomically (its directory made, tmp + rename) with mode. */
int fl_copy_file(const char *from, const char *to, mode_t mode);
/* Writes a whole file atomically (tmp + rename). */
int fl_write_file(const char *path, const void *buf, size_t len);
/* Reads a whole file; *buf malloc'd and NUL-terminated. */
int fl_read_file(const char *path, char **buf, size_t *len);

/* Is the process that wrote a state file still the one running? */
bool fl_pid_alive(pid_t pid, unsigned long long starttime);

#endif
