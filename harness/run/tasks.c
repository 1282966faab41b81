/*
 * tasks.c: a task's processes: each start expands the task's command and
 * env templates, adds what the fault kinds need (the run's task_env hook),
 * opens its log (and LOG.times beside it: when each line arrived), spawns it on its host (in its
 * freezer cgroup when a pause fault targets it) and records it; signals go to the task's cgroup or
 * its process group; a freeze waits until the cgroup is frozen.
 */
#include "harness/run/run.h"
#include "harness/run/clock_offset.h"
#include "harness/record/recorder.h"
#include "harness/scenario/template.h"
#include "harness/sys/cgroup.h"
#include "harness/sys/rootless.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

extern char **environ;

/* How long a freeze may take: tasks freeze in microseconds, unless one is
 * stuck in the kernel (a hung NFS read, say). */
#define FREEZE_TIMEOUT_MS 2000

/* The task's freezer cgroup, faultline/<run_id>/<host>/<job:index>.  With
 * no freezer on the machine, a pause falls back to SIGSTOP of the process
 * group (said once). */
int fl_run_task_cgroup(struct fl_run *r, int task)
{
    const struct fl_scenario *s = r->s;
    struct task_rt *tr = &r->tasks[task];
    if (tr->has_cgroup)
        return 0;
    char tname[64];
    fl_scn_task_name(s, task, tname, sizeof tname);
    const char *host = s->hosts[s->tasks[task].host].name;
    /* rootless (harness/sys/rootless.c): only in a cgroup delegated to the
     * user (cgroup.c), else -ENOTSUP */
    int rc = fl_cgroup_create_task(r->run_id, host, tname, tr->cgroup, sizeof tr->cgroup);
    if (rc == -ENOTSUP) {
        static bool said;
        if (!said)
            fprintf(stderr,
                    "faultline: %s: pause stops the task's process group with SIGSTOP "
                    "instead (a child in a session of its own runs on)\n",
                    fl_rootless() ? "no freezer cgroup without root outside a cgroup delegated "
                                    "to the user (systemd-run --user --scope -p Delegate=yes)"
                                  : "no cgroup freezer on this machine");
        said = true;
        return 0;
    }
    if (rc < 0) {
        fl_run_error(r, "task %s on %s: create freezer cgroup %s for the pause fault: %s", tname,
                     host, tr->cgroup, strerror(-rc));
        /* what exists of it is removed at the end */
        if (!r->any_freezer && fl_cgroup_freezer_root(r->freezer_run, sizeof r->freezer_run) > 0) {
            size_t n = strlen(r->freezer_run);
            snprintf(r->freezer_run + n, sizeof r->freezer_run - n, "/%s", r->run_id);
            r->any_freezer = true;
        }
        return rc;
    }
    tr->has_cgroup = true;
    if (!r->any_freezer) {
        /* .../faultline/<run_id>/<host>/<task> -> .../faultline/<run_id> */
        snprintf(r->freezer_run, sizeof r->freezer_run, "%s", tr->cgroup);
        for (int up = 0; up < 2; up++) {
            char *slash = strrchr(r->freezer_run, '/');
            if (slash)
                *slash = 0;
        }
        r->any_freezer = true;
    }
    return 0;
}

void fl_run_signal_proc(struct fl_run *r, struct proc *p, int sig)
{
    if (!p->running)
        return;
    /* Every process of the task, whatever its session or process group,
     * when the task has a cgroup of its own */
    struct task_rt *tr = &r->tasks[p->task];
    if (tr->has_cgroup && fl_cgroup_signal(tr->cgroup, sig) > 0)
        return;
    /* Its process group (a non-simple command is a shell with children). */
    if (kill(-p->pid, sig) < 0)
        kill(p->pid, sig);
}

int fl_run_task_freeze(struct fl_run *r, int task, bool frozen, char *err, size_t errlen)
{
    struct task_rt *tr = &r->tasks[task];
    if (!tr->has_cgroup || tr->frozen == frozen)
        return 0;
    int rc = fl_cgroup_freeze(tr->cgroup, frozen, FREEZE_TIMEOUT_MS);
    /* A freeze that timed out may still complete: it counts as frozen, to
     * be thawed like one.  A thaw that failed leaves it frozen. */
    if (frozen || rc == 0)
        tr->frozen = frozen;
    if (rc < 0 && err) {
        char tname[64];
        snprintf(err, errlen, "task %s: %s %s: %s",
                 fl_scn_task_name(r->s, task, tname, sizeof tname), frozen ? "freeze" : "thaw",
                 tr->cgroup, rc == -ETIMEDOUT ? "still FREEZING after 2 s" : strerror(-rc));
    }
    return rc;
}

static const char *lookup_addr(const struct fl_run *r, int i)
{
    return r->hosts[i].addr;
}

void fl_run_free_strv(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

char **fl_run_task_env(struct fl_run *r, int task, char *err, size_t errlen, int *rc)
{
    const struct fl_scenario *s = r->s;
    const struct fl_scn_task *t = &s->tasks[task];
    const struct fl_scn_job *j = &s->jobs[t->job];
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + j->n_env + 28, sizeof *env);
    size_t k = 0;
    /* inherited, minus what we set */
    for (size_t i = 0; i < n; i++) {
        if (!strncmp(environ[i], "FAULTLINE_", 10))
            continue;
        bool overridden = false;
        for (size_t x = 0; x < j->n_env; x++) {
            size_t kl = strlen(j->env[x].key);
            if (!strncmp(environ[i], j->env[x].key, kl) && environ[i][kl] == '=')
                overridden = true;
        }
        if (!overridden)
            env[k++] = strdup(environ[i]);
    }
    const char **addrs = calloc(s->n_hosts, sizeof *addrs);
    for (size_t i = 0; i < s->n_hosts; i++)
        addrs[i] = lookup_addr(r, (int)i);
    struct fl_scn_run_ctx ctx = {
        .run_id = r->run_id, .seed = r->seed, .bin = r->bin_dir, .host_addrs = addrs};
    for (size_t x = 0; x < j->n_env; x++) {
        char *val;
        *rc = fl_scn_expand(s, task, r->v, &ctx, j->env[x].value, &val, err, errlen);
        if (*rc < 0) {
            free(addrs);
            for (size_t i = 0; i < k; i++)
                free(env[i]);
            free(env);
            return NULL;
        }
        if (asprintf(&env[k++], "%s=%s", j->env[x].key, val) < 0)
            abort();
        free(val);
    }
    free(addrs);
    if (asprintf(&env[k++], "FAULTLINE_EVENTS=%s", r->ev_path) < 0 ||
        asprintf(&env[k++], "FAULTLINE_HOST=%s", s->hosts[t->host].name) < 0 ||
        asprintf(&env[k++], "FAULTLINE_JOB=%s", j->name) < 0 ||
        asprintf(&env[k++], "FAULTLINE_TASK=%d", t->index) < 0 ||
        asprintf(&env[k++], "FAULTLINE_RUN=%s", r->run_id) < 0 ||
        asprintf(&env[k++], "FAULTLINE_GENERATION=%d", r->tasks[task].gens) < 0 ||
        asprintf(&env[k++], "FAULTLINE_SEED=%llu", (unsigned long long)r->seed) < 0)
        abort();
    if (r->sync_kinds[0] && asprintf(&env[k++], "FAULTLINE_SYNC=%s", r->sync_kinds) < 0)
        abort();
    if ((*rc = fl_clock_env(r, task, env, &k, err, errlen)) < 0 ||
        (r->task_env && (*rc = r->task_env(r, task, env, &k, err, errlen)) < 0)) {
        env[k] = NULL;
        fl_run_free_strv(env);
        return NULL;
    }
    env[k] = NULL;
    *rc = 0;
    return env;
}

char *fl_run_task_command(struct fl_run *r, int task, char *err, size_t errlen)
{
    const struct fl_scenario *s = r->s;
    const char **addrs = calloc(s->n_hosts, sizeof *addrs);
    for (size_t i = 0; i < s->n_hosts; i++)
        addrs[i] = lookup_addr(r, (int)i);
    struct fl_scn_run_ctx ctx = {
        .run_id = r->run_id, .seed = r->seed, .bin = r->bin_dir, .host_addrs = addrs};
    char *cmd = NULL;
    int rc =
        fl_scn_expand(s, task, r->v, &ctx, s->jobs[s->tasks[task].job].command, &cmd, err, errlen);
    free(addrs);
    return rc < 0 ? NULL : cmd;
}

static int spawned(void *arg, pid_t pid, char *err, size_t errlen)
{
    struct fl_run_spawn_arg *a = arg;
    return a->r->spawned(a->r, a->host, pid, err, errlen);
}

void fl_run_spawn_hook(struct fl_run *r, int host, struct fl_spawn *sp, struct fl_run_spawn_arg *a)
{
    if (!r->spawned)
        return;
    a->r = r;
    a->host = host;
    sp->before_exec = spawned;
    sp->before_exec_arg = a;
}

int fl_run_start_task(struct fl_run *r, int task)
{
    const struct fl_scenario *s = r->s;
    const struct fl_scn_task *t = &s->tasks[task];
    struct task_rt *tr = &r->tasks[task];
    char err[1024], tname[64];
    fl_scn_task_name(s, task, tname, sizeof tname);
    char *cmd = fl_run_task_command(r, task, err, sizeof err);
    if (!cmd) {
        fl_run_error(r, "task %s: %s", tname, err);
        return -EINVAL;
    }
    int rc;
    /* A pause that fired after the task's last process was killed (by a
     * kill or its host going down) but before it was reaped froze an empty
     * cgroup: the new process would freeze on joining it, before its exec,
     * and the spawn below would wait for that exec for ever.  It starts
     * thawed (the pause was for the process that is gone). */
    if (tr->frozen && (rc = fl_run_task_freeze(r, task, false, err, sizeof err)) < 0) {
        fl_run_error(r, "starting task %s: %s", tname, err);
        free(cmd);
        return rc;
    }
    char **env = fl_run_task_env(r, task, err, sizeof err, &rc);
    if (!env) {
        fl_run_error(r, "task %s: env: %s", tname, err);
        free(cmd);
        return rc;
    }
    struct proc *p = calloc(1, sizeof *p);
    p->w = (struct watch){W_OUTPUT, p};
    p->task = task;
    p->host = t->host;
    p->gen = tr->gens;
    snprintf(p->log_path, sizeof p->log_path, "%s/logs/%s.%s.%d.%d.log", r->dir,
             s->hosts[t->host].name, s->jobs[t->job].name, t->index, p->gen);
    p->log_fd = open(p->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_APPEND, 0644);
    char times_path[PATH_MAX + 8];
    snprintf(times_path, sizeof times_path, "%s.times", p->log_path);
    p->times_fd = -1;
    int pfd[2];
    rc = 0;
    if (p->log_fd < 0) {
        rc = -errno;
        fl_run_error(r, "task %s: log %s: %s", tname, p->log_path, strerror(-rc));
    } else if ((p->times_fd = open(times_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_APPEND,
                                   0644)) < 0) {
        rc = -errno;
        fl_run_error(r, "task %s: log %s: %s", tname, times_path, strerror(-rc));
    } else if (pipe2(pfd, O_CLOEXEC) < 0) {
        rc = -errno;
        fl_run_error(r, "task %s: pipe: %s", tname, strerror(-rc));
    }
    if (rc < 0) {
        free(cmd);
        fl_run_free_strv(env);
        if (p->log_fd >= 0)
            close(p->log_fd);
        if (p->times_fd >= 0)
            close(p->times_fd);
        free(p);
        return rc;
    }
    char *argv[4], *script;
    fl_tmpl_shell_argv(cmd, argv, &script);
    struct fl_spawn sp = {.argv = argv,
                          .envp = env,
                          .cwd = NULL,
                          .stdin_fd = -1,
                          .stdout_fd = pfd[1],
                          .stderr_fd = pfd[1],
                          .cgroup = tr->has_cgroup ? tr->cgroup : NULL};
    struct fl_run_spawn_arg sa;
    if (!t->final) /* no fault reaches a final */
        fl_run_spawn_hook(r, t->host, &sp, &sa);
    pid_t pid = fl_host_spawn(&r->hosts[t->host].h, &sp, err, sizeof err);
    close(pfd[1]);
    fl_run_free_strv(env);
    if (pid < 0) {
        fl_run_error(r, "task %s: %s", tname, err);
        close(pfd[0]);
        close(p->log_fd);
        close(p->times_fd);
        free(script);
        free(cmd);
        free(p);
        return (int)pid;
    }
    free(script);
    fcntl(pfd[0], F_SETFL, O_NONBLOCK);
    p->out_fd = pfd[0];
    p->pid = pid;
    p->running = true;
    p->started_ms = fl_run_now(r);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &p->w};
    epoll_ctl(r->epfd, EPOLL_CTL_ADD, p->out_fd, &ev);
    p->next = r->procs;
    r->procs = p;
    tr->cur = p;
    tr->gens++;
    if (r->rec) {
        struct fl_rec_proc rp = {.host = s->hosts[t->host].name,
                                 .job = s->jobs[t->job].name,
                                 .task = t->index,
                                 .pid = pid,
                                 .command = cmd,
                                 .started_ms = p->started_ms,
                                 .log_path = p->log_path,
                                 .generation = p->gen};
        p->rec_no = fl_rec_proc_start(r->rec, &rp);
    }
    if (r->task_started)
        r->task_started(r, task, cmd);
    free(cmd);
    return 0;
}
