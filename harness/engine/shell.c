/*
 * shell.c: the engine's part of `faultline shell`: the lines that say what
 * each task would run and how to reach the run from another terminal, and
 * the interactive shell on one host, with the env of the host's first task
 * and the terminal handed to it.  The run ends when the shell exits.
 */
#include "harness/engine/engine_int.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void eng_shell_print(struct engine *e)
{
    char err[512], tname[64];
    if (e->r.s->n_dims)
        printf("faultline: variant %s\n", e->r.variant);
    printf("faultline: run %s is up; hosts:", e->r.run_id);
    for (size_t i = 0; i < e->r.s->n_hosts; i++)
        printf(" %s=%s", e->r.s->hosts[i].name, e->r.hosts[i].addr);
    printf("\n");
    for (size_t t = 0; t < e->r.s->n_tasks; t++) {
        char *cmd = fl_run_task_command(&e->r, (int)t, err, sizeof err);
        printf("  %s%s on %s: %s\n", e->r.s->tasks[t].final ? "final " : "",
               fl_scn_task_name(e->r.s, (int)t, tname, sizeof tname),
               e->r.s->hosts[e->r.s->tasks[t].host].name, cmd ? cmd : err);
        free(cmd);
    }
    /* exec finds the run under --out, relative to its own directory: the
     * line works from any terminal only with the real path of --out (e->r.dir
     * is <real path of --out>/runs/<run id>) and of faultline itself */
    char out[PATH_MAX];
    snprintf(out, sizeof out, "%s", e->r.dir);
    for (int up = 0; up < 2; up++) {
        char *slash = strrchr(out, '/');
        if (slash)
            *slash = 0;
    }
    printf("Another terminal: %s/faultline exec --out %s %s HOST -- CMD...   Leave with 'exit'.\n",
           e->o->bin_dir, out, e->r.run_id);
    fflush(stdout);
}

int eng_shell_start(struct engine *e)
{
    int h = e->o->shell_host;
    char err[1024];
    char **env;
    int rc;
    /* the first task on the host gives the env; else a plain one */
    int task = -1;
    for (size_t t = 0; t < e->r.s->n_tasks; t++)
        if (e->r.s->tasks[t].host == h) {
            task = (int)t;
            break;
        }
    if (task >= 0)
        env = fl_run_task_env(&e->r, task, err, sizeof err, &rc);
    else
        env = NULL;
    char ps1[128];
    snprintf(ps1, sizeof ps1, "PS1=[%s] \\w\\$ ", e->r.s->hosts[h].name);
    size_t n = 0;
    while (env && env[n])
        n++;
    char **env2 = calloc(n + 2, sizeof *env2);
    for (size_t i = 0; i < n; i++)
        env2[i] = env[i];
    env2[n] = ps1;
    const char *shell = getenv("SHELL");
    if (!shell || access(shell, X_OK) != 0)
        shell = "/bin/sh";
    char *argv[] = {(char *)shell, NULL};
    struct fl_spawn sp = {.argv = argv,
                          .envp = env ? env2 : NULL,
                          .stdin_fd = 0,
                          .stdout_fd = 1,
                          .stderr_fd = 2,
                          .new_session = false};
    struct fl_run_spawn_arg sa;
    fl_run_spawn_hook(&e->r, h, &sp, &sa); /* the host's clock, say */
    pid_t pid = fl_host_spawn(&e->r.hosts[h].h, &sp, err, sizeof err);
    free(env2);
    fl_run_free_strv(env);
    if (pid < 0) {
        fl_run_error(&e->r, "shell on %s: %s", e->r.s->hosts[h].name, err);
        return (int)pid;
    }
    /* give it the terminal */
    if (isatty(0)) {
        signal(SIGTTOU, SIG_IGN);
        tcsetpgrp(0, pid);
    }
    e->shell_pid = pid;
    return 0;
}
