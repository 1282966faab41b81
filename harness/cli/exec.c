/*
 * exec.c: `faultline exec RUN HOST -- CMD`: run a command on a host of a run
 * that is up, e.g. one held open by `faultline shell`.
 *
 * exec finds the host's init through the run's state file, checks that the
 * pid still belongs to that init (start time), enters its namespaces and
 * forks the command into them; the exit status is the command's.  On a host
 * whose clocks the run moves (its clock page, RUN/fs/lib/clock-HOST, is
 * there: harness/faults/clock.c), a clock keeper of exec's own traces the
 * command from before its exec (harness/sys/vclock.c), so it and what it
 * starts read the host's clock, as the run's own processes do, faults
 * applied meanwhile included.
 */
#include "harness/cli/cli.h"
#include "harness/cli/common.h"
#include "harness/sys/host.h"
#include "harness/sys/rootless.h"
#include "harness/sys/rundir.h"
#include "harness/sys/vclock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

const char fl_cli_exec_usage[] =
    "usage: faultline exec RUN HOST [--] [CMD [ARGS...]]\n"
    "\n"
    "Runs CMD inside HOST of the running run RUN (a run id, as printed by\n"
    "'faultline shell' or found under out/runs/), with the host's network,\n"
    "mounts, hostname and PID namespace, in its working directory; without CMD,\n"
    "/bin/sh. Exit status is CMD's. CMD gets none of the run's preloads: on a host a "
    "crash_host with\n"
    "'unsynced: lose' targets, what it syncs is not recorded (lost at the crash).\n"
    "CMD runs as the machine's root, like the tasks of a host with 'privileged: true'\n"
    "(it can change the host's network and mounts, and the machine): it is for looking\n"
    "into a host by hand; the scenario's tasks are root of their host only.  Run by a\n"
    "user without root (the run is rootless, and this user's), CMD is root of the run's\n"
    "user namespace, which owns the run's namespaces and nothing of the machine's.\n"
    "  --out DIR   where run directories are (default out)\n";

/* The machine's pid of the child of harness (as the machine sees it) whose
 * pid in the harness's own PID namespace is inner, or 0. */
static pid_t machine_pid_of(pid_t harness, pid_t inner)
{
    char path[128], line[4096];
    snprintf(path, sizeof path, "/proc/%d/task", (int)harness);
    DIR *d = opendir(path);
    struct dirent *t;
    pid_t found = 0;
    while (d && !found && (t = readdir(d))) {
        if (t->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "/proc/%d/task/%s/children", (int)harness, t->d_name);
        FILE *f = fopen(path, "re");
        if (!f)
            continue;
        if (fgets(line, sizeof line, f))
            for (char *tok = strtok(line, " \n"); tok && !found; tok = strtok(NULL, " \n")) {
                char st[64], l2[256];
                snprintf(st, sizeof st, "/proc/%s/status", tok);
                FILE *g = fopen(st, "re");
                while (g && fgets(l2, sizeof l2, g))
                    if (!strncmp(l2, "NSpid:", 6)) {
                        /* the machine's pid, then the one in the harness's */
                        int outer, in_run;
                        if (sscanf(l2 + 6, "%d %d", &outer, &in_run) == 2 && in_run == inner)
                            found = outer;
                        break;
                    }
                if (g)
                    fclose(g);
            }
        fclose(f);
    }
    if (d)
        closedir(d);
    return found;
}

/* Rootless (harness/sys/rootless.c): the run's namespaces belong to the
 * user namespace of its harness, which this user owns: into it first (root
 * there), and the host's init by the pid the machine knows it by (the
 * state file has its pid in the harness's own PID namespace). */
static int rootless_join(pid_t harness, pid_t *pid, char *err, size_t errlen)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/ns/user", (int)harness);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, CLONE_NEWUSER) < 0) {
        int e = errno;
        snprintf(err, errlen, "entering the run's user namespace (%s): %s", path, strerror(e));
        if (fd >= 0)
            close(fd);
        return -e;
    }
    close(fd);
    pid_t m = machine_pid_of(harness, *pid);
    if (m <= 0) {
        snprintf(err, errlen, "its init (pid %d in the run) is not a process of the run's harness",
                 (int)*pid);
        return -ESRCH;
    }
    *pid = m;
    return 0;
}

int fl_cli_exec(int argc, char **argv)
{
    const char *out = "out";
    static const struct option opts[] = {{"out", required_argument, 0, 'o'}, {0, 0, 0, 0}};
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
        if (ch == 'o')
            out = optarg;
        else {
            fputs(fl_cli_exec_usage, stderr);
            return 2;
        }
    }
    if (argc - optind < 2) {
        fputs(fl_cli_exec_usage, stderr);
        return 2;
    }
    const char *run = argv[optind], *hostname = argv[optind + 1];
    int cmd = optind + 2;
    if (cmd < argc && !strcmp(argv[cmd], "--"))
        cmd++;
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/runs/%s", out, run);
    struct fl_state st;
    int rc = fl_state_read(dir, &st);
    if (rc < 0) {
        fprintf(stderr, "faultline exec: no run %s (reading %s/state: %s)%s\n", run, dir,
                strerror(-rc),
                rc == -ENOENT ? "; --out DIR names where the run directories "
                                "are ('faultline shell' prints the whole line to type)"
                              : "");
        return 2;
    }
    if (strcmp(st.status, "running") || !fl_pid_alive(st.harness_pid, st.harness_start)) {
        fprintf(stderr, "faultline exec: run %s is not running\n", run);
        fl_state_free(&st);
        return 2;
    }
    struct fl_state_host *h = NULL;
    for (size_t i = 0; i < st.nhosts; i++)
        if (!strcmp(st.hosts[i].name, hostname))
            h = &st.hosts[i];
    if (!h) {
        fprintf(stderr, "faultline exec: run %s has no host '%s'; hosts:", run, hostname);
        for (size_t i = 0; i < st.nhosts; i++)
            fprintf(stderr, " %s", st.hosts[i].name);
        fprintf(stderr, "\n");
        fl_state_free(&st);
        return 2;
    }
    if (h->pid <= 0) {
        fprintf(stderr, "faultline exec: host %s of run %s is down\n", hostname, run);
        fl_state_free(&st);
        return 1;
    }
    char err[1024];
    if (fl_rootless() && (rc = rootless_join(st.harness_pid, &h->pid, err, sizeof err)) < 0) {
        fprintf(stderr, "faultline exec: host %s: %s\n", hostname, err);
        fl_state_free(&st);
        return 1;
    }
    /* the host's clock page, seen through its init's root; the keeper
     * starts here, in the harness's PID namespace, not the host's */
    struct fl_vclock *vc = NULL;
    char abs[PATH_MAX], page[PATH_MAX + 64], seen[2 * PATH_MAX + 128];
    if (realpath(dir, abs)) {
        snprintf(page, sizeof page, "%s/fs/lib/clock-%s", abs, hostname);
        snprintf(seen, sizeof seen, "/proc/%d/root%s", (int)h->pid, page);
        if (access(seen, R_OK) == 0) {
            char bin[PATH_MAX], so[PATH_MAX + 32];
            fl_cli_bin_dir(bin, sizeof bin);
            snprintf(so, sizeof so, "%s/../lib/fl_vdso.so", bin);
            if (fl_vclock_start(&vc, so, err, sizeof err) < 0 ||
                fl_vclock_host_join(vc, 0, page, err, sizeof err) < 0) {
                fprintf(stderr, "faultline exec: host %s: its clocks: %s\n", hostname, err);
                fl_vclock_stop(vc);
                fl_state_free(&st);
                return 1;
            }
        }
    }
    rc = fl_host_enter_pid(h->pid, h->starttime, st.workdir, err, sizeof err);
    fl_state_free(&st);
    if (rc < 0) {
        fprintf(stderr, "faultline exec: host %s: %s\n", hostname, err);
        fl_vclock_stop(vc);
        return 1;
    }
    char *shell_argv[] = {"/bin/sh", NULL};
    char **av = cmd < argc ? argv + cmd : shell_argv;
    int gate[2] = {-1, -1};
    if (vc && pipe2(gate, O_CLOEXEC) < 0) {
        perror("faultline exec: pipe");
        fl_vclock_stop(vc);
        return 1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        perror("faultline exec: fork");
        fl_vclock_stop(vc);
        return 1;
    }
    if (pid == 0) {
        if (gate[0] >= 0) {
            char c;
            close(gate[1]);
            if (read(gate[0], &c, 1) != 1)
                _exit(127); /* the keeper could not take it */
        }
        execvp(av[0], av);
        fprintf(stderr, "faultline exec: %s: %s\n", av[0], strerror(errno));
        _exit(127);
    }
    if (vc) {
        close(gate[0]);
        if (fl_vclock_adopt(vc, 0, pid, err, sizeof err) < 0 || write(gate[1], "x", 1) != 1) {
            fprintf(stderr, "faultline exec: host %s: its clocks: %s\n", hostname, err);
            close(gate[1]);
            waitpid(pid, NULL, 0);
            fl_vclock_stop(vc);
            return 1;
        }
        close(gate[1]);
    }
    signal(SIGINT, SIG_IGN);
    int ws;
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
        ;
    if (vc && fl_vclock_status(vc, NULL, err, sizeof err) < 0)
        fprintf(stderr, "faultline exec: host %s: %s\n", hostname, err);
    fl_vclock_stop(vc);
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
}
