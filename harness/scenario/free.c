/*
 * free.c: freeing a loaded scenario (struct fl_scenario and everything it
 * owns), which the loader builds (harness/load/) and every layer above
 * reads.
 */
#include "harness/scenario/load_ctx.h"

#include <stdlib.h>

static void free_hostset(struct fl_scn_hostset *h)
{
    free(h->hosts);
}

void fl_scn_action_free(struct fl_scn_action *a)
{
    for (size_t k = 0; k < a->n_groups; k++)
        free_hostset(&a->groups[k]);
    free(a->groups);
    free(a->params);
    free_hostset(&a->from);
    free_hostset(&a->to);
    a->groups = NULL;
    a->n_groups = 0;
    a->params = NULL;
    a->from.hosts = a->to.hosts = NULL;
    a->from.n = a->to.n = 0;
}

void fl_scenario_free(struct fl_scenario *s)
{
    if (!s)
        return;
    free(s->path);
    free(s->text);
    free(s->dir);
    free(s->name);
    free(s->about);
    free(s->workdir);
    for (size_t i = 0; i < s->n_hosts; i++) {
        struct fl_scn_host *h = &s->hosts[i];
        free(h->name);
        for (size_t j = 0; j < h->n_dirs; j++)
            free(h->dirs[j].path);
        free(h->dirs);
        for (size_t j = 0; j < h->n_files; j++) {
            free(h->files[j].path);
            free(h->files[j].content);
        }
        free(h->files);
    }
    free(s->hosts);
    for (size_t i = 0; i < s->n_shared; i++) {
        free(s->shared[i].path);
        free(s->shared[i].hosts);
    }
    free(s->shared);
    for (size_t i = 0; i < s->n_jobs; i++) {
        struct fl_scn_job *j = &s->jobs[i];
        free(j->name);
        free(j->task_hosts);
        free(j->command);
        for (size_t k = 0; k < j->n_env; k++) {
            free(j->env[k].key);
            free(j->env[k].value);
        }
        free(j->env);
        if (j->final)
            fl_scn_selector_free(&j->final->variant);
        free(j->final);
    }
    free(s->jobs);
    free(s->tasks);
    free(s->run.stop_jobs);
    for (size_t i = 0; i < s->n_dims; i++) {
        free(s->dims[i].key);
        for (size_t k = 0; k < s->dims[i].n_values; k++)
            free(s->dims[i].values[k]);
        free(s->dims[i].values);
    }
    free(s->dims);
    for (size_t i = 0; i < s->n_faults; i++) {
        struct fl_scn_fault *f = &s->faults[i];
        free(f->trigger.event);
        for (size_t k = 0; k < f->trigger.n_where; k++) {
            free(f->trigger.where[k].key);
            free(f->trigger.where[k].value);
        }
        free(f->trigger.where);
        fl_scn_regex_free(&f->trigger.match);
        fl_scn_action_free(&f->action);
        fl_scn_selector_free(&f->variant);
        free(f->as_written);
    }
    free(s->faults);
    for (size_t i = 0; i < s->n_expects; i++) {
        struct fl_scn_expect *x = &s->expects[i];
        fl_scn_selector_free(&x->sel);
        for (size_t k = 0; k < x->n_checks; k++) {
            fl_scn_regex_free(&x->checks[k].fails_with);
            fl_scn_regex_free(&x->checks[k].log_matches);
            fl_scn_regex_free(&x->checks[k].log_not_matches);
        }
        free(x->checks);
        for (size_t k = 0; k < x->n_files; k++)
            free(x->files[k].path);
        free(x->files);
        for (size_t k = 0; k < x->n_events; k++)
            free(x->events[k].event);
        free(x->events);
    }
    free(s->expects);
    free(s);
}
