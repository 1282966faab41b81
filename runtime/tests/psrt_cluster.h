/*
 * psrt_cluster.h: starting a real psrt cluster (separate processes on
 * loopback) from a test.  Every task runs in its own working directory
 * under fl_test_dir() ("ps0", "w0", ...), which is what a host's disk is to
 * psrt: relative --train_dir paths land there, so each task has its own
 * "disk" exactly as under the harness (a shared disk is two tasks given the
 * same directory).  Ports are chosen free on 127.0.0.1.  Processes stay in
 * the test's process group, so the test runner kills any left over.
 */
#ifndef PSRT_CLUSTER_H
#define PSRT_CLUSTER_H

#include "harness/tests/fl_test.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct pc {
    int nps, nw;
    char ps_hosts[512], worker_hosts[512];
    char common[2048];
    pid_t ps[16], w[16];
    char ps_dir[16][64], w_dir[16][64]; /* each task's directory, for its log */
};

static __attribute__((unused)) int pc_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(0x7f000001);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0)
        return -1;
    socklen_t sl = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &sl);
    close(fd);
    return ntohs(a.sin_port);
}

static __attribute__((unused)) void pc_init(struct pc *c, int nps, int nw, const char *common)
{
    memset(c, 0, sizeof *c);
    c->nps = nps;
    c->nw = nw;
    size_t o = 0;
    /* A port bound and released is free again at once: the next call may
     * get the same one (psrt then refuses "listed twice"), so each ps's
     * port differs from the ones before it. */
    int ports[16];
    for (int i = 0; i < nps && i < 16; i++) {
        int again = 0;
        do {
            ports[i] = pc_free_port();
            again = 0;
            for (int k = 0; k < i; k++)
                again |= ports[k] == ports[i];
        } while (again);
        o += (size_t)snprintf(c->ps_hosts + o, sizeof c->ps_hosts - o, "%s127.0.0.1:%d",
                              i ? "," : "", ports[i]);
    }
    o = 0;
    for (int i = 0; i < nw; i++)
        o += (size_t)snprintf(c->worker_hosts + o, sizeof c->worker_hosts - o, "%s127.0.0.1:%d",
                              i ? "," : "", 40000 + i);
    snprintf(c->common, sizeof c->common, "%s", common);
}

/* Path of a task directory "name" under the test dir (created). */
static __attribute__((unused)) const char *pc_dir(const char *name)
{
    static char buf[8][PATH_MAX];
    static int k;
    char *b = buf[k++ & 7];
    snprintf(b, PATH_MAX, "%s/%s", fl_test_dir(), name);
    for (char *p = b + strlen(fl_test_dir()) + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(b, 0777);
            *p = '/';
        }
    mkdir(b, 0777);
    return b;
}

struct pc_opts {
    uid_t uid;       /* run as this uid (0 = as is) */
    long nproc;      /* RLIMIT_NPROC, with uid */
    const char *env; /* "NAME=value" put into the environment */
};

/* Starts one task in directory dir_name; its output goes to <dir>.log. */
static __attribute__((unused)) pid_t pc_start_opts(struct pc *c, const char *job, int task,
                                                   const char *dir_name, const char *extra,
                                                   const struct pc_opts *o)
{
    char logp[PATH_MAX];
    const char *dir = pc_dir(dir_name);
    snprintf(logp, sizeof logp, "%s/%s.log", fl_test_dir(), dir_name);
    char *args = NULL;
    if (asprintf(&args, "--job_name=%s --task_index=%d --ps_hosts=%s --worker_hosts=%s %s %s", job,
                 task, c->ps_hosts, c->worker_hosts, c->common, extra ? extra : "") < 0)
        return -1;
    const char *bin = fl_test_bin("psrt");
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        char *argv[64];
        int n = 0;
        argv[n++] = (char *)bin;
        for (char *t = strtok(args, " "); t && n < 63; t = strtok(NULL, " "))
            argv[n++] = t;
        argv[n] = NULL;
        if (chdir(dir) < 0)
            _exit(126);
        int fd = open(logp, O_WRONLY | O_CREAT | O_APPEND, 0666);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        if (o && o->env)
            putenv((char *)o->env);
        if (o && o->uid) {
            if (setgroups(0, NULL) < 0 || setgid(o->uid) < 0 || setuid(o->uid) < 0)
                _exit(125);
            if (o->nproc) {
                struct rlimit rl = {(rlim_t)o->nproc, (rlim_t)o->nproc};
                if (setrlimit(RLIMIT_NPROC, &rl) < 0)
                    _exit(124);
            }
        }
        execv(bin, argv);
        _exit(127);
    }
    free(args);
    if (!strcmp(job, "ps") && task < 16) {
        c->ps[task] = pid;
        snprintf(c->ps_dir[task], sizeof c->ps_dir[task], "%s", dir_name);
    } else if (task < 16) {
        c->w[task] = pid;
        snprintf(c->w_dir[task], sizeof c->w_dir[task], "%s", dir_name);
    }
    return pid;
}

static __attribute__((unused)) pid_t pc_start(struct pc *c, const char *job, int task,
                                              const char *dir_name, const char *extra)
{
    return pc_start_opts(c, job, task, dir_name, extra, NULL);
}

/* Waits for pid up to timeout seconds: its exit status, 128+signal, or -1
 * (then it is killed). */
static __attribute__((unused)) int pc_wait(pid_t pid, double timeout)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (r < 0)
            return -2;
        struct timespec t1;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if ((double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9 > timeout) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* Contents of a file under the test dir (malloc'd, "" when absent). */
static __attribute__((unused)) char *pc_read(const char *rel)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", fl_test_dir(), rel);
    FILE *f = fopen(p, "r");
    if (!f)
        return strdup("");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    size_t got = fread(b, 1, (size_t)n, f);
    b[got] = 0;
    fclose(f);
    return b;
}

static __attribute__((unused)) bool pc_exists(const char *rel)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", fl_test_dir(), rel);
    struct stat st;
    return stat(p, &st) == 0;
}

/* Starts nps ps (dirs ps0..), workers 1.. (dirs w1..) and the chief (w0). */
static __attribute__((unused)) void pc_start_all(struct pc *c, const char *extra_ps,
                                                 const char *extra_w)
{
    char d[32];
    for (int i = 0; i < c->nps; i++) {
        snprintf(d, sizeof d, "ps%d", i);
        pc_start(c, "ps", i, d, extra_ps);
    }
    for (int i = 1; i < c->nw; i++) {
        snprintf(d, sizeof d, "w%d", i);
        pc_start(c, "worker", i, d, extra_w);
    }
    pc_start(c, "worker", 0, "w0", extra_w);
}

/* Waits for the chief, then every other task; asserts each exit status is
 * want (the chief's is returned). */
/* After the chief exited with status chief: waits for tasks first..n-1 of pids
 * (0 = none) when it succeeded, asserting each exits 0 within 10 s and
 * printing its log otherwise; kills them when it failed (a worker would wait
 * for the model until its timeout, TensorFlow's ps would serve forever). */
static __attribute__((unused)) void pc_wait_rest(pid_t *pids, char (*dirs)[64], int first, int n,
                                                 const char *what, int chief)
{
    for (int i = first; i < n; i++) {
        if (pids[i] <= 0)
            continue;
        if (chief == 0) {
            int r = pc_wait(pids[i], 10);
            if (r != 0) {
                char rel[80];
                snprintf(rel, sizeof rel, "%s.log", dirs[i]);
                char *log = pc_read(rel);
                FL_ASSERT_MSG(r == 0,
                              "%s %d exited %d (-1: still running 10 s after the chief, "
                              "killed); its log %s:\n%s",
                              what, i, r, rel, log);
                free(log);
            }
        } else {
            kill(pids[i], SIGKILL);
            pc_wait(pids[i], 5);
        }
        pids[i] = 0;
    }
}

static __attribute__((unused)) int pc_wait_all(struct pc *c, double timeout)
{
    int chief = pc_wait(c->w[0], timeout);
    pc_wait_rest(c->w, c->w_dir, 1, c->nw, "worker", chief);
    pc_wait_rest(c->ps, c->ps_dir, 0, c->nps, "ps", chief);
    return chief;
}

/* Kills whatever is still running (by pid). */
static __attribute__((unused)) void pc_kill_all(struct pc *c)
{
    for (int i = 0; i < 16; i++) {
        if (c->ps[i] > 0) {
            kill(c->ps[i], SIGKILL);
            waitpid(c->ps[i], NULL, 0);
            c->ps[i] = 0;
        }
        if (c->w[i] > 0) {
            kill(c->w[i], SIGKILL);
            waitpid(c->w[i], NULL, 0);
            c->w[i] = 0;
        }
    }
}

/* Waits until file rel contains needle (polling: the processes are
 * separate and report through their logs), up to timeout seconds. */
static __attribute__((unused)) bool pc_wait_for(const char *rel, const char *needle, double timeout)
{
    for (double t = 0; t < timeout; t += 0.02) {
        char *s = pc_read(rel);
        bool ok = strstr(s, needle) != NULL;
        free(s);
        if (ok)
            return true;
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return false;
}

#endif
