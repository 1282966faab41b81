/*
 * loop.c: the engine's loop, one thread, one epoll: a signalfd (SIGCHLD,
 * SIGINT, SIGTERM, SIGHUP), a timerfd (fault schedule, heals, timeout,
 * grace, progress, recorder flushes), the event socket and its clients, and
 * the output pipe of every process (copied to its log as it is, the time
 * each line arrived to LOG.times beside it, and matched against on_log
 * triggers line by line).  It moves the run through RUNNING, FINAL,
 * STOPPING and KILLING (eng_set_state, engine_int.h): when every
 * stop_when task has ended for good it runs the final: checks (final.c)
 * and stops once they have ended; it stops at once on the timeout, a
 * harness error or an interrupt; it returns once no process is left.
 */
#include "harness/base/text.h"
#include "harness/engine/engine_int.h"
#include "harness/record/recorder.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

void eng_set_state(struct engine *e, enum run_state s)
{
    /* forward only (a state may be skipped: a set-up error ends at once) */
    if (s <= e->state) {
        fprintf(stderr, "faultline: bug: run state %d after %d\n", (int)s, (int)e->state);
        abort();
    }
    e->state = s;
}

static void on_line(struct engine *e, struct proc *p, const char *line)
{
    const struct fl_scn_task *t = &e->r.s->tasks[p->task];
    fl_faults_on_line(e, p->host, t->job, t->index, line);
}

static bool have_log_triggers(const struct engine *e)
{
    for (size_t i = 0; i < e->r.nfaults; i++)
        if (e->r.faults[i].f->trigger.kind == FL_SCN_TRIG_LOG && e->r.faults[i].st == F_PENDING)
            return true;
    return false;
}

void eng_close_output(struct engine *e, struct proc *p)
{
    if (p->out_fd < 0)
        return;
    epoll_ctl(e->r.epfd, EPOLL_CTL_DEL, p->out_fd, NULL);
    close(p->out_fd);
    p->out_fd = -1;
    if (p->linelen) { /* a last line without newline */
        p->line[p->linelen] = 0;
        if (have_log_triggers(e))
            on_line(e, p, p->line);
        p->linelen = 0;
    }
}

/* LOG.times: one line "MS\n" for each line of the log that begins in buf,
 * MS the time it was read (ms since the run's start, the clock of events
 * and faults): a line that arrives in pieces has the time of its first. */
static void log_times(struct engine *e, struct proc *p, const char *buf, ssize_t n)
{
    if (p->times_fd < 0)
        return;
    char out[4096];
    size_t k = 0;
    int64_t now = fl_run_now(&e->r);
    for (const char *c = buf, *end = buf + n; c < end;) {
        if (!p->mid_line) {
            if (k > sizeof out - 24) {
                if (write(p->times_fd, out, k) < 0) { /* as the log: keep running */
                }
                k = 0;
            }
            k += (size_t)snprintf(out + k, sizeof out - k, "%lld\n", (long long)now);
        }
        const char *nl = memchr(c, '\n', (size_t)(end - c));
        p->mid_line = !nl;
        c = nl ? nl + 1 : end;
    }
    if (k && write(p->times_fd, out, k) < 0) { /* a full disk for logs */
    }
}

void eng_read_output(struct engine *e, struct proc *p)
{
    char buf[65536];
    for (;;) {
        ssize_t n = read(p->out_fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) {
            eng_close_output(e, p);
            return;
        }
        if (write(p->log_fd, buf, (size_t)n) < 0) {
            /* a full disk for logs: keep running, the log is incomplete */
        }
        log_times(e, p, buf, n);
        if (!have_log_triggers(e))
            continue;
        for (ssize_t i = 0; i < n; i++) {
            if (buf[i] == '\n' || p->linelen == sizeof p->line - 1) {
                p->line[p->linelen] = 0;
                on_line(e, p, p->line);
                p->linelen = 0;
                if (buf[i] == '\n')
                    continue;
            }
            p->line[p->linelen++] = buf[i];
        }
    }
}

/* Records an event (database, and what expectations count). */
static void record_event(struct engine *e, struct fl_evsrv_client *c, const struct fl_ev *ev,
                         char *raw)
{
    const struct fl_scenario *s = e->r.s;
    int host = fl_scn_host_find(s, c->host);
    int job = fl_scn_job_find(s, c->job);
    int task = c->task >= 0 ? c->task : -1;
    int64_t t = fl_run_now(&e->r);
    if (e->r.rec)
        fl_rec_event(e->r.rec, t, c->host[0] ? c->host : NULL, job >= 0 ? c->job : NULL, task,
                     ev->kind, raw, ev->type == FL_EV_SYNC);
    if (e->nevents == e->capevents) {
        e->capevents = e->capevents ? e->capevents * 2 : 256;
        e->events = realloc(e->events, e->capevents * sizeof *e->events);
    }
    struct ev_seen *es = &e->events[e->nevents++];
    snprintf(es->kind, sizeof es->kind, "%s", ev->kind);
    es->host = host;
    es->job = job;
    const char *step = fl_ev_get(ev, "step");
    es->step = step ? atoll(step) : -1;
}

static void on_event(void *ctx, struct fl_evsrv_client *c, const struct fl_ev *ev, char *raw)
{
    struct engine *e = ctx;
    record_event(e, c, ev, raw);
    fl_faults_on_event(e, fl_scn_host_find(e->r.s, c->host), fl_scn_job_find(e->r.s, c->job),
                       c->task >= 0 ? c->task : -1, ev);
    if (ev->type == FL_EV_SYNC)
        fl_evsrv_reply(c, ev->seq);
}

/* An event read after every host is down: recorded, too late to trigger. */
void eng_on_late_event(void *ctx, struct fl_evsrv_client *c, const struct fl_ev *ev, char *raw)
{
    record_event(ctx, c, ev, raw);
}

static void reap(struct engine *e)
{
    int st;
    pid_t pid;
    while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
        fl_host_note_reaped(pid);
        if (pid == e->shell_pid) {
            e->shell_pid = -pid; /* done */
            e->shell_status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            continue;
        }
        bool found = false;
        for (size_t i = 0; i < e->r.s->n_hosts; i++)
            if (fl_host_reaped(&e->r.hosts[i].h, pid)) {
                found = true;
                if (!eng_stopping(e) && !e->r.hosts[i].down_by_fault)
                    fl_run_error(&e->r, "host %s: init %d died unexpectedly", e->r.s->hosts[i].name,
                                 (int)pid);
                fl_run_write_state(&e->r);
            }
        if (found)
            continue;
        for (struct proc *p = e->r.procs; p; p = p->next) {
            if (p->pid != pid || !p->running)
                continue;
            p->running = false;
            p->ended_ms = fl_run_now(&e->r);
            if (WIFEXITED(st)) {
                p->exit_code = WEXITSTATUS(st);
                p->sig = 0;
            } else {
                p->exit_code = -1;
                p->sig = WTERMSIG(st);
                p->core = WCOREDUMP(st);
                p->stopped_at_end = p->end_signalled && p->sig != p->fault_sig &&
                                    (p->sig == SIGTERM || p->sig == SIGKILL) && !p->core;
            }
            if (e->r.rec)
                fl_rec_proc_end(e->r.rec, p->rec_no, p->ended_ms, p->exit_code, p->sig, p->core,
                                p->stopped_at_end);
            /* Drain what it wrote before dying (its pipe may stay open in a
             * grandchild; take what is there now). */
            if (p->out_fd >= 0)
                eng_read_output(e, p);
            struct task_rt *tr = &e->r.tasks[p->task];
            if (tr->relaunch_on_exit && tr->cur == p) {
                tr->relaunch_on_exit = false;
                if (!eng_stopping(e) && e->r.hosts[p->host].h.state == FL_HOST_UP)
                    fl_run_start_task(&e->r, p->task);
            }
            break;
        }
    }
}

static bool task_final(const struct engine *e, int task)
{
    const struct task_rt *tr = &e->r.tasks[task];
    return tr->cur && !tr->cur->running && tr->restart_pending == 0;
}

/* Must the task have ended for the run to end (stop_when)?  Never a
 * final: check's, which starts only then. */
static bool stop_task(const struct fl_scenario *s, size_t t)
{
    if (s->tasks[t].final)
        return false;
    bool stop_job = s->run.stop_all;
    for (size_t k = 0; !stop_job && k < s->run.n_stop_jobs; k++)
        if (s->run.stop_jobs[k] == s->tasks[t].job)
            stop_job = true;
    return stop_job;
}

static bool stop_condition(const struct engine *e)
{
    const struct fl_scenario *s = e->r.s;
    if (e->o->shell_host >= 0)
        return e->shell_pid < 0;
    for (size_t t = 0; t < s->n_tasks; t++)
        if (stop_task(s, t) && !task_final(e, (int)t))
            return false;
    return true;
}

/* At the timeout: the tasks the run still waited for ("worker:0, ps:1"). */
static void note_waiting(struct engine *e)
{
    char name[64];
    e->timeout_waiting[0] = 0;
    for (size_t t = 0; t < e->r.s->n_tasks; t++)
        if (stop_task(e->r.s, t) && !task_final(e, (int)t))
            fl_text_add(e->timeout_waiting, sizeof e->timeout_waiting, "%s%s",
                        e->timeout_waiting[0] ? ", " : "",
                        fl_scn_task_name(e->r.s, (int)t, name, sizeof name));
}

static bool any_running(const struct engine *e)
{
    for (struct proc *p = e->r.procs; p; p = p->next)
        if (p->running)
            return true;
    return e->shell_pid > 0;
}

/* RUNNING -> STOPPING, for why: every fault healed, every task asked to end. */
static void begin_stop(struct engine *e, enum stop_reason why)
{
    if (eng_stopping(e))
        return;
    e->why = why;
    eng_reach_at_stop(e); /* the programs still running, before they are ended */
    eng_set_state(e, RUN_STOPPING);
    fl_faults_heal_all(e);
    /* a pause without for: is still on: thaw it, so that SIGTERM can end
     * its task within the grace */
    for (size_t t = 0; t < e->r.s->n_tasks; t++) {
        char err[1024];
        if (fl_run_task_freeze(&e->r, (int)t, false, err, sizeof err) < 0)
            fl_run_error(&e->r, "ending the run: %s", err);
    }
    for (struct proc *p = e->r.procs; p; p = p->next) {
        if (!p->running)
            continue;
        if (p->stopped)
            fl_run_signal_proc(&e->r, p, SIGCONT);
        p->end_signalled = true;
        fl_run_signal_proc(&e->r, p, SIGTERM);
    }
    /* a second interrupt (both may come in one read) leaves no grace */
    e->kill_at = fl_run_now(&e->r) + (e->interrupts > 1 ? 0 : e->r.s->run.grace_ms);
}

static void progress(struct engine *e, bool final)
{
    if (!e->o->progress)
        return;
    int up = 0, total = (int)e->r.s->n_tasks;
    for (size_t t = 0; t < e->r.s->n_tasks; t++)
        if (e->r.tasks[t].cur && e->r.tasks[t].cur->running)
            up++;
    int applied = 0;
    for (size_t i = 0; i < e->r.nfaults; i++)
        if (e->r.faults[i].st != F_PENDING)
            applied++;
    if (final)
        fprintf(stderr, "\r\033[K");
    else
        fprintf(stderr, "\r\033[K  %s %s  %.1fs  running %d/%d  events %zu  faults %d/%zu%s",
                e->r.s->name, e->r.variant, fl_run_now(&e->r) / 1000.0, up, total, e->nevents,
                applied, e->r.nfaults,
                eng_stopping(e)         ? "  stopping"
                : e->state == RUN_FINAL ? "  final checks"
                                        : "");
    fflush(stderr);
}

/* Arms the timerfd for the next deadline: while RUNNING the timeout (none
 * in shell mode) and a fault or heal; a final check's timeout; the grace
 * period, a progress line, a recorder flush.  With none, disarms it (a
 * deadline already passed would make it spin). */
static void arm_timer(struct engine *e)
{
    bool running = e->state == RUN_RUNNING;
    int64_t now = fl_run_now(&e->r),
            next = e->o->shell_host >= 0 || !running ? INT64_MAX : e->r.s->timeout_ms;
    int64_t f = running ? fl_faults_next_deadline(e) : -1;
    if (f >= 0 && f < next)
        next = f;
    f = e->state == RUN_FINAL ? eng_final_deadline(e) : -1;
    if (f >= 0 && f < next)
        next = f;
    if (eng_stopping(e) && e->kill_at < next)
        next = e->kill_at;
    if (e->o->progress && now + 250 < next)
        next = now + 250;
    if (e->r.rec) {
        int64_t d = fl_rec_flush_due_ms(e->o->rec);
        if (d >= 0 && now + d < next)
            next = now + d;
    }
    struct itimerspec its = {0}; /* zero: disarmed */
    if (next != INT64_MAX) {
        int64_t delta = next - now;
        if (delta < 1)
            delta = 1;
        its.it_value.tv_sec = delta / 1000;
        its.it_value.tv_nsec = (delta % 1000) * 1000000;
    }
    timerfd_settime(e->timerfd, 0, &its, NULL);
}

static void accept_clients(struct engine *e)
{
    struct fl_evsrv_client *c;
    while ((c = fl_evsrv_accept(e->ev))) {
        struct watch *cw = malloc(sizeof *cw);
        if (!cw) {
            fl_evsrv_drop(e->ev, c);
            continue;
        }
        *cw = (struct watch){W_CLIENT, c};
        c->user = cw; /* freed by the server when it drops c */
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = cw};
        epoll_ctl(e->r.epfd, EPOLL_CTL_ADD, c->fd, &ev);
    }
}

static void read_client(struct engine *e, struct fl_evsrv_client *c)
{
    if (fl_evsrv_read(e->ev, c, on_event, e) < 0) {
        epoll_ctl(e->r.epfd, EPOLL_CTL_DEL, c->fd, NULL);
        fl_evsrv_drop(e->ev, c);
    }
}

void eng_loop(struct engine *e)
{
    struct epoll_event evs[64];
    for (;;) {
        if (e->state == RUN_RUNNING) {
            if (e->r.error[0])
                begin_stop(e, STOP_ERROR);
            else if (e->interrupts)
                begin_stop(e, STOP_INTERRUPT);
            else if (stop_condition(e)) {
                if (e->nfinals) { /* the final: checks first (final.c) */
                    e->why = STOP_DONE;
                    eng_set_state(e, RUN_FINAL);
                    eng_final_begin(e);
                } else {
                    begin_stop(e, STOP_DONE);
                }
            } else if (e->o->shell_host < 0 && fl_run_now(&e->r) >= e->r.s->timeout_ms) {
                note_waiting(e);
                begin_stop(e, STOP_TIMEOUT);
            }
        }
        if (e->state == RUN_FINAL) {
            if (e->r.error[0])
                begin_stop(e, STOP_ERROR);
            else if (e->interrupts)
                begin_stop(e, STOP_INTERRUPT);
            else if (eng_final_tick(e))
                begin_stop(e, STOP_DONE);
        }
        if (eng_stopping(e) && !any_running(e))
            break;
        if (eng_stopping(e) && fl_run_now(&e->r) >= e->kill_at) {
            if (e->state == RUN_STOPPING)
                eng_set_state(e, RUN_KILLING);
            for (struct proc *p = e->r.procs; p; p = p->next) {
                p->end_signalled |= p->running;
                fl_run_signal_proc(&e->r, p, SIGKILL);
            }
            if (e->shell_pid > 0)
                kill(e->shell_pid, SIGKILL);
            e->kill_at = fl_run_now(&e->r) + 1000;
        }
        arm_timer(e);
        int n = epoll_wait(e->r.epfd, evs, 64, -1);
        if (n < 0 && errno != EINTR) {
            fl_run_error(&e->r, "epoll_wait: %s", strerror(errno));
            break;
        }
        for (int i = 0; i < n; i++) {
            struct watch *w = evs[i].data.ptr;
            switch (w->type) {
            case W_SIGNAL: {
                struct signalfd_siginfo si;
                while (read(e->sigfd, &si, sizeof si) == sizeof si) {
                    if (si.ssi_signo == SIGCHLD)
                        continue;
                    if (!e->interrupts)
                        fprintf(stderr,
                                "\nfaultline: %s: stopping the run and cleaning up "
                                "(interrupt again to kill its processes at once)\n",
                                strsignal((int)si.ssi_signo));
                    else if (e->interrupts == 1)
                        fprintf(stderr, "faultline: %s again: killing the run's processes now\n",
                                strsignal((int)si.ssi_signo));
                    if (++e->interrupts == 2 && eng_stopping(e))
                        e->kill_at = fl_run_now(&e->r); /* no more grace */
                }
                reap(e);
                break;
            }
            case W_TIMER: {
                uint64_t x;
                if (read(e->timerfd, &x, sizeof x) < 0) { /* spurious */
                }
                break;
            }
            case W_LISTEN: accept_clients(e); break;
            case W_CLIENT: read_client(e, w->ptr); break;
            case W_OUTPUT: eng_read_output(e, w->ptr); break;
            }
        }
        if (e->state == RUN_RUNNING)
            fl_faults_tick(e);
        if (e->r.rec && fl_rec_flush_due_ms(e->o->rec) == 0)
            fl_rec_flush(e->o->rec);
        progress(e, false);
    }
    progress(e, true);
}
