/*
 * exec.c: `faultline exec RUN HOST -- CMD`: run a command on a host of a run
 * that is up, e.g. one held open by `faultline shell`.
 *
 * exec finds the host's init through the run's state file, checks that the
 * pid still belongs to that init (start time), enters its namespaces and
 * forks the command into them; the exit status is the command's.
 */
#include "harness/cli/cli.h"
#include "harness/sys/host.h"
#include "harness/sys/rundir.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
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
    "into a host by hand; the scenario's tasks are root of their host only.\n"
    "  --out DIR   where run directories are (default out)\n";

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
    rc = fl_host_enter_pid(h->pid, h->starttime, st.workdir, err, sizeof err);
    fl_state_free(&st);
    if (rc < 0) {
        fprintf(stderr, "faultline exec: host %s: %s\n", hostname, err);
        return 1;
    }
    char *shell_argv[] = {"/bin/sh", NULL};
    char **av = cmd < argc ? argv + cmd : shell_argv;
    pid_t pid = fork();
    if (pid < 0) {
        perror("faultline exec: fork");
        return 1;
    }
    if (pid == 0) {
        execvp(av[0], av);
        fprintf(stderr, "faultline exec: %s: %s\n", av[0], strerror(errno));
        _exit(127);
    }
    signal(SIGINT, SIG_IGN);
    int ws;
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
}
