/*
 * final.c: the final: checks of a run (Jepsen's final reads): commands run
 * on chosen hosts once the run's stop_when is met, against the system the
 * faults left, healed and up.
 *
 * When every stop_when task has ended (and only then: a run that times
 * out, fails or is interrupted runs none), before anything is stopped:
 *   1. every fault that still holds is undone (fl_faults_heal_for_final):
 *      one with for: as its for: would (a killed task starts again, a host
 *      comes back with its tasks), a lasting one applied without for: (a
 *      partition, a pause, a limit, a disk or link fault) lifted;
 *   2. every host still down comes up (a crash_host without for:: without
 *      its tasks, whose processes died with it), every paused process runs
 *      again;
 *   3. the cluster's tasks go on running; no fault fires any more;
 *   4. each final: check of the variant starts on its host, at once and
 *      together, as a process of that host like a task (its log
 *      HOST.NAME.0.0.log, its processes row, its lane in the report);
 *   5. once every one has ended, or been killed at its timeout (SIGKILL to
 *      its process group), the run stops as any other (loop.c).
 * check.c judges a final's process like a task's: exit 0 unless expect
 * says otherwise, and a check that timed out fails.
 */
#include "harness/engine/engine_int.h"

#include <signal.h>
#include <stdlib.h>

void eng_final_init(struct engine *e)
{
    const struct fl_scenario *s = e->r.s;
    e->nfinals = 0;
    if (e->o->shell_host >= 0 || !s->n_finals)
        return; /* a shell runs no check */
    e->finals = calloc(s->n_finals, sizeof *e->finals);
    if (!e->finals)
        abort();
    for (size_t t = 0; t < s->n_tasks; t++)
        if (fl_scn_final_applies(s, (int)t, e->r.v))
            e->finals[e->nfinals++] = (struct final_rt){.task = (int)t, .kill_at = -1};
}

void eng_final_begin(struct engine *e)
{
    const struct fl_scenario *s = e->r.s;
    char err[1024];
    fl_faults_heal_for_final(e);
    for (size_t h = 0; h < s->n_hosts && !e->r.error[0]; h++)
        if (e->r.hosts[h].h.state == FL_HOST_DOWN)
            fl_run_host_up(&e->r, (int)h, false);
    for (size_t t = 0; t < s->n_tasks && !e->r.error[0]; t++)
        if (fl_run_task_freeze(&e->r, (int)t, false, err, sizeof err) < 0)
            fl_run_error(&e->r, "before the final checks: %s", err);
    for (struct proc *p = e->r.procs; p; p = p->next)
        if (p->running && p->stopped) { /* a SIGSTOP (no freezer, or a kill's) */
            fl_run_signal_proc(&e->r, p, SIGCONT);
            p->stopped = false;
        }
    for (size_t i = 0; i < e->nfinals && !e->r.error[0]; i++) {
        struct final_rt *f = &e->finals[i];
        if (fl_run_start_task(&e->r, f->task) == 0)
            f->kill_at = fl_run_now(&e->r) + s->jobs[s->tasks[f->task].job].final->timeout_ms;
    }
}

bool eng_final_tick(struct engine *e)
{
    int64_t now = fl_run_now(&e->r);
    bool all_ended = true;
    for (size_t i = 0; i < e->nfinals; i++) {
        struct final_rt *f = &e->finals[i];
        struct proc *p = e->r.tasks[f->task].cur;
        if (!p || !p->running)
            continue;
        all_ended = false;
        if (!f->timed_out && f->kill_at >= 0 && now >= f->kill_at) {
            f->timed_out = true;
            fl_run_signal_proc(&e->r, p, SIGKILL);
        }
    }
    return all_ended;
}

int64_t eng_final_deadline(const struct engine *e)
{
    int64_t next = -1;
    for (size_t i = 0; i < e->nfinals; i++) {
        const struct final_rt *f = &e->finals[i];
        const struct proc *p = e->r.tasks[f->task].cur;
        if (p && p->running && !f->timed_out && f->kill_at >= 0 && (next < 0 || f->kill_at < next))
            next = f->kill_at;
    }
    return next;
}

const struct final_rt *eng_final_of(const struct engine *e, int task)
{
    for (size_t i = 0; i < e->nfinals; i++)
        if (e->finals[i].task == task)
            return &e->finals[i];
    return NULL;
}
