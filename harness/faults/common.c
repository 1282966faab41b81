/*
 * common.c: what several fault kinds share: noting the tasks a fault hit
 * (to restart or resume them at the heal), walking the tasks a target
 * covers (one task, or every task of cluster: on a host; before its event
 * comes, a target '{event.KEY}' may be any of them), and starting the tasks that
 * waited for their host to come back.
 */
#include "harness/faults/kind.h"

#include <stdlib.h>

void fl_fault_add_task(struct fault_rt *fr, int task, int starts)
{
    fr->tasks = realloc(fr->tasks, (fr->ntasks + 1) * sizeof *fr->tasks);
    fr->starts = realloc(fr->starts, (fr->ntasks + 1) * sizeof *fr->starts);
    if (!fr->tasks || !fr->starts)
        abort();
    fr->starts[fr->ntasks] = starts;
    fr->tasks[fr->ntasks++] = task;
}

/* A host's tasks are those of cluster: (a final: check on it runs once no
 * fault fires any more: none reaches it). */
bool fl_fault_may_cover(const struct fl_run *r, const struct fl_scn_target *t, int task)
{
    return t->host == FL_SCN_HOST_EVENT || fl_fault_covers(r, t, task);
}

bool fl_fault_covers(const struct fl_run *r, const struct fl_scn_target *t, int task)
{
    return t->kind == FL_SCN_TGT_TASK
               ? t->task == task
               : r->s->tasks[task].host == t->host && !r->s->tasks[task].final;
}

int fl_fault_for_tasks(struct fl_run *r, const struct fl_scn_target *t, fl_fault_task_fn fn,
                       struct fault_rt *fr, char *err, size_t errlen)
{
    if (t->kind == FL_SCN_TGT_TASK)
        return fn(r, fr, t->task, err, errlen);
    int rc = 0;
    for (size_t i = 0; i < r->s->n_tasks; i++)
        if (fl_fault_covers(r, t, (int)i)) {
            int x = fn(r, fr, (int)i, rc < 0 ? NULL : err, errlen);
            if (x < 0 && rc == 0)
                rc = x;
        }
    return rc;
}

void fl_fault_restart_tasks_on(struct fl_run *r, int host)
{
    for (size_t t = 0; t < r->s->n_tasks; t++)
        if (r->s->tasks[t].host == host && r->tasks[t].restart_pending > 0) {
            r->tasks[t].restart_pending--;
            fl_run_start_task(r, (int)t);
        }
}
