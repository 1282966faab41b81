/*
 * check.c: judging a finished run against the scenario's expectations.
 *
 * Every expect: block whose selector matches the variant applies.  A check on
 * a target (all, chief, a job, job:task, a host) is judged on the last
 * generation of each task it covers (exit status, signal, core dump); output
 * checks (fails_with, log_matches, log_not_matches) read the logs of every
 * generation of the task.  File checks look at the host's disk (or the shared
 * directory a path falls in, or its /tmp) as the run left it, resolved in the
 * host's view only (view.c: no symlink leads to the machine's files); event
 * checks count the events received.  With no block for the variant, every task must exit 0.
 * A final: check (final.c) is judged like a task, by its own name (all,
 * chief and host targets cover the cluster's tasks only): it must exit 0
 * unless a block says how it may end, and it fails when it timed out; one
 * that did not run (the run timed out) fails its checks as "not run".
 *
 * Verdict: error when the harness failed (set before we are called), fail when
 * any check failed or the run timed out, else pass.  Every check is recorded
 * with what was expected and observed, and the first failure becomes the
 * reason.  `expected`/`observed` of the result summarise for the table.
 *
 * Evidence: a run that did not pass names its failing tasks, whose logs'
 * last lines the JUnit XML and the HTML report show (the result's
 * `failing`, processes.failing): the tasks a failed check names, else
 * those that exited non-zero or died of a signal other than the run's end,
 * else every task (a timeout, a harness error, a failed file or event
 * check); of each, its last generation.
 */
#include "harness/engine/check_ckpt.h"
#include "harness/engine/engine_int.h"
#include "harness/record/recorder.h"
#include "harness/sys/rundir.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct judge {
    struct engine *e;
    bool failed;
    char *exp, *obs; /* summary buffers */
    size_t explen, obslen;
    FILE *expf, *obsf;
    int nexp, nobs;
    char more[512]; /* the checks that failed after the first: "ps:1 exit, ..." */
    int task;       /* the task the checks being recorded are about, -1 none */
    bool *blamed;   /* per task: a check about it failed (NULL: out of memory) */
};

/* The last non-empty line of a process's log (at most len - 1 bytes), or "". */
static void last_log_line(const struct proc *p, char *buf, size_t len)
{
    char *text;
    buf[0] = 0;
    if (fl_read_file(p->log_path, &text, NULL) < 0)
        return;
    size_t n = strlen(text);
    while (n && (text[n - 1] == '\n' || text[n - 1] == '\r'))
        text[--n] = 0;
    char *nl = strrchr(text, '\n');
    snprintf(buf, len, "%s", nl ? nl + 1 : text);
    free(text);
}

/* The program a shell's "not found" line names ("/bin/sh: 1: exec: psrt: not
 * found" -> "psrt"), when it is one of faultline's own programs in {bin}
 * (not on PATH, so a bare "psrt" fails): *prog filled, true. */
static bool missing_own_program(const struct engine *e, const char *line, char *prog, size_t len)
{
    const char *end = NULL;
    static const char *const tails[] = {": not found", ": command not found"};
    for (size_t i = 0; i < 2 && !end; i++) {
        size_t ll = strlen(line), tl = strlen(tails[i]);
        if (ll > tl && !strcmp(line + ll - tl, tails[i]))
            end = line + ll - tl;
    }
    if (!end || !e->o->bin_dir)
        return false;
    const char *start = end;
    while (start > line && !(start[-1] == ' ' && start - 1 > line && start[-2] == ':'))
        start--;
    if (start == line || end - start <= 0 || (size_t)(end - start) >= len ||
        memchr(start, '/', (size_t)(end - start)))
        return false;
    snprintf(prog, len, "%.*s", (int)(end - start), start);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", e->o->bin_dir, prog);
    return access(path, X_OK) == 0;
}

static void outcome_text(const struct engine *e, int task, char *buf, size_t len)
{
    const struct proc *p = e->r.tasks[task].cur;
    const struct final_rt *fin = eng_final_of(e, task);
    if (!p && fin)
        snprintf(buf, len, "not run (%s)",
                 e->why == STOP_TIMEOUT ? "the run timed out before its stop_when jobs ended"
                                        : "the run ended before its stop_when jobs did");
    else if (!p)
        snprintf(buf, len, "never started");
    else if (fin && fin->timed_out && !p->running)
        snprintf(buf, len, "killed at its timeout (%.1f s)",
                 e->r.s->jobs[e->r.s->tasks[task].job].final->timeout_ms / 1000.0);
    else if (p->running)
        snprintf(buf, len, "still running");
    else if (p->stopped_at_end)
        snprintf(buf, len, "stopped at the end (%s)", fl_scn_signal_name(p->sig) ?: "signal");
    else if (p->sig)
        snprintf(buf, len, "killed by %s%s", fl_scn_signal_name(p->sig) ?: "signal",
                 p->core ? " (core dumped)" : "");
    else if (p->exit_code == 126 || p->exit_code == 127) {
        /* the shell's "not found" / "Permission denied": the command never
         * ran, which a bare "exit 127" does not say */
        char last[160], prog[64];
        last_log_line(p, last, sizeof last);
        if (missing_own_program(e, last, prog, sizeof prog))
            snprintf(buf, len, "exit %d: %s (faultline's own %s is not on PATH: write {bin}/%s)",
                     p->exit_code, last, prog, prog);
        else
            snprintf(buf, len, last[0] ? "exit %d: %s" : "exit %d", p->exit_code, last);
    } else
        snprintf(buf, len, "exit %d", p->exit_code);
}

/* First line of any generation's log of task that matches re; copies it. */
static bool log_search(struct engine *e, int task, const regex_t *re, char *found, size_t len)
{
    for (struct proc *p = e->r.procs; p; p = p->next) {
        if (p->task != task)
            continue;
        char *text;
        if (fl_read_file(p->log_path, &text, NULL) < 0)
            continue;
        char *save = NULL;
        for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            if (regexec(re, line, 0, NULL, 0) == 0) {
                if (found)
                    snprintf(found, len, "%s", line);
                free(text);
                return true;
            }
        }
        free(text);
    }
    return false;
}

static void record(struct judge *j, const char *name, const char *target, bool passed,
                   const char *expected, const char *observed, int line)
{
    struct engine *e = j->e;
    if (e->r.rec) {
        struct fl_rec_check c = {.name = name,
                                 .target = target,
                                 .passed = passed,
                                 .expected = expected,
                                 .observed = observed,
                                 .line = line};
        fl_rec_check(e->r.rec, &c);
    }
    if (!passed && j->task >= 0 && j->blamed)
        j->blamed[j->task] = true;
    if (!passed && j->failed) {
        size_t n = strlen(j->more);
        if (n < sizeof j->more - 1)
            snprintf(j->more + n, sizeof j->more - n, "%s%s %s", n ? ", " : "", target, name);
    }
    if (!passed && !j->failed) {
        j->failed = true;
        if (!e->res->reason[0] && line > 0)
            snprintf(e->res->reason, sizeof e->res->reason,
                     "%s: %s: expected %s, observed %s (%s:%d)", target, name, expected, observed,
                     e->r.s->path, line);
        else if (!e->res->reason[0]) /* the default check: no line to name */
            snprintf(e->res->reason, sizeof e->res->reason,
                     "%s: %s: expected %s, observed %s (%s has no expect: block for this "
                     "variant: every task must exit 0)",
                     target, name, expected, observed, e->r.s->path);
    }
}

static void check_task(struct judge *j, const struct fl_scn_check *c, int task)
{
    struct engine *e = j->e;
    const struct proc *p = e->r.tasks[task].cur;
    char tname[64], out[256], exp[512], obs[1024];
    fl_scn_task_name(e->r.s, task, tname, sizeof tname);
    outcome_text(e, task, out, sizeof out);
    bool ended = p && !p->running;
    j->task = task;
    if (c->exit != FL_SCN_EXIT_UNSET) {
        bool ok;
        if (c->exit == FL_SCN_EXIT_CODE) {
            ok = ended && !p->sig && p->exit_code == c->exit_code;
            snprintf(exp, sizeof exp, "exit %d", c->exit_code);
        } else if (c->exit == FL_SCN_EXIT_NONZERO) {
            ok = ended && !p->sig && p->exit_code != 0;
            snprintf(exp, sizeof exp, "a non-zero exit");
        } else {
            ok = true;
            snprintf(exp, sizeof exp, "any outcome");
        }
        record(j, "exit", tname, ok, exp, out, c->exit_loc.line);
    }
    if (c->signal != FL_SCN_SIG_UNSET) {
        bool ok = ended && p->sig && (c->signal == FL_SCN_SIG_ANY || p->sig == c->signal_number);
        if (c->signal == FL_SCN_SIG_ANY)
            snprintf(exp, sizeof exp, "killed by a signal");
        else
            snprintf(exp, sizeof exp, "killed by %s", fl_scn_signal_name(c->signal_number) ?: "?");
        record(j, "signal", tname, ok, exp, out, c->signal_loc.line);
    }
    if (c->core >= 0) {
        bool ok = ended && (p->sig && p->core) == (c->core == 1);
        record(j, "core", tname, ok, c->core ? "a core dump" : "no core dump", out,
               c->core_loc.line);
    }
    if (c->fails_with.src) {
        char line[700] = "";
        bool failed = ended && (p->sig || p->exit_code != 0);
        bool matched = log_search(e, task, &c->fails_with.re, line, sizeof line);
        snprintf(exp, sizeof exp, "a failure with output matching /%s/", c->fails_with.src);
        if (matched)
            snprintf(obs, sizeof obs, "%s: %s", out, line);
        else
            snprintf(obs, sizeof obs, "%s, no output line matches", out);
        record(j, "fails_with", tname, failed && matched, exp, obs, c->fails_with.loc.line);
        if (failed && matched && j->nobs < 3)
            fprintf(j->obsf, "%s%s %s", j->nobs++ ? "; " : "", tname, obs);
    }
    if (c->log_matches.src) {
        char line[700] = "";
        bool matched = log_search(e, task, &c->log_matches.re, line, sizeof line);
        snprintf(exp, sizeof exp, "output matching /%s/", c->log_matches.src);
        record(j, "log_matches", tname, matched, exp, matched ? line : "no matching line",
               c->log_matches.loc.line);
    }
    if (c->log_not_matches.src) {
        char line[700] = "";
        bool matched = log_search(e, task, &c->log_not_matches.re, line, sizeof line);
        snprintf(exp, sizeof exp, "no output matching /%s/", c->log_not_matches.src);
        record(j, "log_not_matches", tname, !matched, exp, matched ? line : "none",
               c->log_not_matches.loc.line);
    }
    j->task = -1;
}

static const char *target_name(const struct fl_scenario *s, const struct fl_scn_check *c, char *buf,
                               size_t len)
{
    switch (c->target) {
    case FL_SCN_EXP_ALL: return "all";
    case FL_SCN_EXP_CHIEF: return "chief";
    case FL_SCN_EXP_JOB: return s->jobs[c->index].name;
    case FL_SCN_EXP_TASK: return fl_scn_task_name(s, c->index, buf, len);
    case FL_SCN_EXP_HOST: return s->hosts[c->index].name;
    }
    return "?";
}

static void summarise_check(struct judge *j, const struct fl_scn_check *c)
{
    char buf[64];
    const char *t = target_name(j->e->r.s, c, buf, sizeof buf);
    if (j->nexp >= 4)
        return;
    fprintf(j->expf, "%s%s", j->nexp++ ? "; " : "", t);
    if (c->fails_with.src)
        fprintf(j->expf, " fails_with /%s/", c->fails_with.src);
    if (c->exit == FL_SCN_EXIT_CODE)
        fprintf(j->expf, " exit %d", c->exit_code);
    else if (c->exit == FL_SCN_EXIT_NONZERO)
        fprintf(j->expf, " exit nonzero");
    if (c->signal == FL_SCN_SIG_NUMBER)
        fprintf(j->expf, " %s", fl_scn_signal_name(c->signal_number) ?: "signal");
    else if (c->signal == FL_SCN_SIG_ANY)
        fprintf(j->expf, " killed");
    if (c->log_matches.src)
        fprintf(j->expf, " log /%s/", c->log_matches.src);
}

/* Is the task judged in this variant?  Every task of cluster:; a final:
 * check only in the variants it runs in. */
static bool judged(const struct engine *e, size_t t)
{
    return !e->r.s->tasks[t].final || fl_scn_final_applies(e->r.s, (int)t, e->r.v);
}

/* What every final: check of the variant must do besides what expect asks:
 * end within its timeout, and exit 0 unless a matching block says how it
 * may end (exit, signal, fails_with or core: true on a target naming it). */
static void check_finals(struct judge *j)
{
    struct engine *e = j->e;
    const struct fl_scenario *s = e->r.s;
    for (size_t i = 0; i < e->nfinals; i++) {
        const struct final_rt *f = &e->finals[i];
        const struct fl_scn_final *fin = s->jobs[s->tasks[f->task].job].final;
        char tname[64], exp[64], out[256];
        fl_scn_task_name(s, f->task, tname, sizeof tname);
        if (f->timed_out) {
            snprintf(exp, sizeof exp, "an end within its timeout (%.1f s)",
                     fin->timeout_ms / 1000.0);
            outcome_text(e, f->task, out, sizeof out);
            j->task = f->task;
            record(j, "timeout", tname, false, exp, out, fin->loc.line);
            j->task = -1;
        }
        bool said = false;
        for (size_t b = 0; b < s->n_expects && !said; b++) {
            const struct fl_scn_expect *x = &s->expects[b];
            if (!fl_scn_selector_match(s, &x->sel, e->r.v))
                continue;
            for (size_t c = 0; c < x->n_checks && !said; c++) {
                const struct fl_scn_check *ck = &x->checks[c];
                said = fl_scn_check_covers(s, ck, f->task) &&
                       (ck->exit != FL_SCN_EXIT_UNSET || ck->signal != FL_SCN_SIG_UNSET ||
                        ck->fails_with.src || ck->core == 1);
            }
        }
        if (said)
            continue;
        struct fl_scn_check dflt = {.target = FL_SCN_EXP_TASK,
                                    .index = f->task,
                                    .exit = FL_SCN_EXIT_CODE,
                                    .exit_code = 0,
                                    .exit_loc = fin->loc,
                                    .core = -1};
        summarise_check(j, &dflt);
        check_task(j, &dflt, f->task);
    }
}

/* Did task t's last process end badly of itself (not stopped by the run's end)? */
static bool ended_badly(const struct engine *e, size_t t)
{
    const struct proc *p = e->r.tasks[t].cur;
    return p && !p->running && !p->stopped_at_end && (p->sig || p->exit_code != 0);
}

/* The failing tasks of a run that did not pass (see the top of the file)
 * into res->failing, "TASK<tab>LOG" lines, and processes.failing. */
static void name_failing(struct engine *e, const bool *blamed)
{
    const struct fl_scenario *s = e->r.s;
    struct fl_engine_result *res = e->res;
    bool any_blamed = false, any_bad = false;
    for (size_t t = 0; t < s->n_tasks; t++) {
        any_blamed |= blamed && blamed[t] && e->r.tasks[t].cur;
        any_bad |= ended_badly(e, t);
    }
    size_t o = 0;
    for (size_t t = 0; t < s->n_tasks; t++) {
        const struct proc *p = e->r.tasks[t].cur;
        if (!p || (any_blamed && !blamed[t]) || (!any_blamed && any_bad && !ended_badly(e, t)))
            continue;
        char tname[64];
        fl_scn_task_name(s, (int)t, tname, sizeof tname);
        int n = snprintf(res->failing + o, sizeof res->failing - o, "%s\t%s\n", tname, p->log_path);
        if (n < 0 || (size_t)n >= sizeof res->failing - o) {
            res->failing[o] = 0; /* no half line: the tasks that fit */
            break;
        }
        o += (size_t)n;
        if (e->r.rec)
            fl_rec_proc_failing(e->r.rec, p->rec_no);
    }
}

void fl_check_run(struct engine *e)
{
    const struct fl_scenario *s = e->r.s;
    struct fl_engine_result *res = e->res;
    struct judge J = {.e = e, .task = -1}, *j = &J;
    j->blamed = calloc(s->n_tasks + 1, sizeof *j->blamed);
    j->expf = open_memstream(&j->exp, &j->explen);
    j->obsf = open_memstream(&j->obs, &j->obslen);
    bool any_block = false;
    if (!res->verdict[0]) {
        for (size_t b = 0; b < s->n_expects; b++) {
            const struct fl_scn_expect *x = &s->expects[b];
            if (!fl_scn_selector_match(s, &x->sel, e->r.v))
                continue;
            any_block = true;
            for (size_t c = 0; c < x->n_checks; c++) {
                summarise_check(j, &x->checks[c]);
                for (size_t t = 0; t < s->n_tasks; t++)
                    if (fl_scn_check_covers(s, &x->checks[c], (int)t) && judged(e, t))
                        check_task(j, &x->checks[c], (int)t);
            }
            for (size_t f = 0; f < x->n_files; f++) {
                const struct fl_scn_file_check *fc = &x->files[f];
                char target[PATH_MAX + 64];
                /* in the host's view only: a symlink a task made to /etc
                 * does not lead to the machine's files */
                int fd = fl_host_open_in_view(e, fc->host, fc->path, O_PATH | O_NOFOLLOW);
                bool exists = fd >= 0;
                if (fd >= 0)
                    close(fd);
                snprintf(target, sizeof target, "%s:%s", s->hosts[fc->host].name, fc->path);
                record(j, "file", target, exists == fc->exists, fc->exists ? "present" : "absent",
                       exists ? "present" : "absent", fc->loc.line);
                if (j->nexp < 4)
                    fprintf(j->expf, "%s%s %s", j->nexp++ ? "; " : "", target,
                            fc->exists ? "present" : "absent");
            }
            for (size_t k = 0; k < x->n_events; k++) {
                const struct fl_scn_event_check *ec = &x->events[k];
                long n = 0;
                for (size_t i = 0; i < e->nevents; i++)
                    if (!strcmp(e->events[i].kind, ec->event) &&
                        (ec->host < 0 || ec->host == e->events[i].host) &&
                        (ec->job < 0 || ec->job == e->events[i].job))
                        n++;
                char exp[128], obs[64], target[128];
                if (ec->max >= 0)
                    snprintf(exp, sizeof exp, "%ld..%ld", ec->min, ec->max);
                else
                    snprintf(exp, sizeof exp, "at least %ld", ec->min);
                snprintf(obs, sizeof obs, "%ld", n);
                snprintf(target, sizeof target, "%s%s%s", ec->event, ec->host >= 0 ? "@" : "",
                         ec->host >= 0 ? s->hosts[ec->host].name : "");
                record(j, "event", target, n >= ec->min && (ec->max < 0 || n <= ec->max), exp, obs,
                       ec->loc.line);
                if (j->nexp < 4)
                    fprintf(j->expf, "%s%s %s", j->nexp++ ? "; " : "", target, exp);
            }
            struct fl_check_ckpt_ctx cc = {e, j, record, j->expf, j->obsf, &j->nexp, &j->nobs};
            for (size_t k = 0; k < x->n_ckpts; k++)
                fl_check_ckpt(&cc, &x->ckpts[k]);
        }
        if (!any_block) {
            struct fl_scn_check all = {.target = FL_SCN_EXP_ALL,
                                       .index = -1,
                                       .exit = FL_SCN_EXIT_CODE,
                                       .exit_code = 0,
                                       .core = -1};
            fprintf(j->expf, "all exit 0");
            j->nexp++;
            for (size_t t = 0; t < s->n_tasks; t++)
                if (!s->tasks[t].final)
                    check_task(j, &all, (int)t);
        }
        check_finals(j);
    }
    /* observed: failures seen, else every task not exiting 0, by outcome
     * ("2/4 exit 0; ps:0, ps:1 stopped at the end (SIGTERM)") */
    if (j->nobs == 0) {
        int ok = 0, n = 0;
        char(*outs)[200] = calloc(s->n_tasks, sizeof *outs);
        for (size_t t = 0; t < s->n_tasks; t++) {
            const struct proc *p = e->r.tasks[t].cur;
            if (!judged(e, t))
                continue;
            n++;
            if (p && !p->running && !p->sig && p->exit_code == 0)
                ok++;
            else if (outs)
                outcome_text(e, (int)t, outs[t], sizeof outs[t]);
        }
        if (ok == n || !outs)
            fprintf(j->obsf, "all %d exit 0", ok);
        else {
            fprintf(j->obsf, "%d/%d exit 0", ok, n);
            for (size_t t = 0; t < s->n_tasks; t++) {
                if (!outs[t][0])
                    continue;
                const char *sep = "; ";
                for (size_t u = t; u < s->n_tasks; u++) {
                    if (!outs[u][0] || strcmp(outs[u], outs[t]))
                        continue;
                    char tn[64];
                    fprintf(j->obsf, "%s%s", sep, fl_scn_task_name(s, (int)u, tn, sizeof tn));
                    sep = ", ";
                    if (u != t)
                        outs[u][0] = 0;
                }
                fprintf(j->obsf, " %s", outs[t]);
                outs[t][0] = 0;
            }
        }
        free(outs);
    }
    fclose(j->expf);
    fclose(j->obsf);
    snprintf(res->expected, sizeof res->expected, "%s", j->exp ? j->exp : "");
    snprintf(res->observed, sizeof res->observed, "%s", j->obs ? j->obs : "");
    free(j->exp);
    free(j->obs);
    if (!res->verdict[0]) {
        if (e->why == STOP_TIMEOUT) {
            snprintf(res->verdict, sizeof res->verdict, "fail");
            char why[1400];
            snprintf(why, sizeof why, "timed out after %.1f s%s%s%s%s", s->timeout_ms / 1000.0,
                     e->timeout_waiting[0] ? " waiting for " : "", e->timeout_waiting,
                     res->reason[0] ? "; " : "", res->reason);
            snprintf(res->reason, sizeof res->reason, "%s", why);
        } else {
            snprintf(res->verdict, sizeof res->verdict, "%s", j->failed ? "fail" : "pass");
            /* the reason tells the first failed check whole, and names the others */
            size_t n = strlen(res->reason);
            if (j->more[0] && n < sizeof res->reason - 1)
                snprintf(res->reason + n, sizeof res->reason - n, "; also failed: %s", j->more);
        }
    }
    if (strcmp(res->verdict, "pass") && e->o->shell_host < 0)
        name_failing(e, j->blamed);
    free(j->blamed);
}
