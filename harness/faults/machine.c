/*
 * machine.c: the fault kinds that take a whole host down, as a machine
 * that is rebooted, swapped or loses power:
 *
 *   restart     kill the host's init (with it every process of the host),
 *               start the host and its tasks again on the same disk
 *   replace     the same with a fresh empty disk and /tmp (a new machine)
 *   crash_host  kill the host's init; it stays down unless for: is given
 *               (then it comes back like a restart).  With unsynced: lose,
 *               once every process of it has exited, its disk goes back to
 *               what was synced (the crash-consistency layer, durable.c)
 *
 * For restart and replace, for: is the downtime: the host comes back at
 * the heal; without it, at once.
 */
#include "harness/faults/durable.h"
#include "harness/faults/kind.h"
#include "harness/scenario/load_ctx.h"

#include <string.h>

#include <stdio.h>

/* The host of a task ("ps:0") or a host. */
static int host_parse(struct fl_scn_vctx *c, const ynode *fault, const ynode *key, const ynode *v,
                      struct fl_scn_action *a)
{
    int rc = fl_scn_resolve_target(c, v, key->value, &a->target);
    a->host = a->target.host;
    return rc;
}

/* crash_host: TARGET, with unsynced: keep | lose */
static int crash_parse(struct fl_scn_vctx *c, const ynode *fault, const ynode *key, const ynode *v,
                       struct fl_scn_action *a)
{
    static const char *const modes[] = {"keep", "lose", "torn"};
    int rc = host_parse(c, fault, key, v, a);
    const ynode *un = fl_scn_yaml_get(fault, "unsynced", NULL);
    if (rc < 0 || !un)
        return rc;
    if ((rc = fl_scn_want(c, un, FL_YN_SCALAR, "'unsynced'")) < 0)
        return rc;
    if (!strcmp(un->value, "lose")) {
        a->unsynced = FL_SCN_UNSYNCED_LOSE;
    } else if (!strcmp(un->value, "torn")) {
        a->unsynced = FL_SCN_UNSYNCED_TORN;
    } else if (strcmp(un->value, "keep") != 0) {
        fl_scn_verr(c, un->loc,
                    "'unsynced' must be keep (everything written survives the "
                    "crash), lose (only what was synced) or torn (as lose, with a "
                    "part of each file's unsynced writes kept), not '%s'",
                    un->value);
        return fl_scn_vsuggest(c, un->value, modes, ARRAY_LEN(modes));
    }
    return 0;
}

static int down_apply(struct fl_run *r, struct fault_rt *fr, char *detail, size_t dlen, char *err,
                      size_t errlen)
{
    const struct fl_scn_action *a = &fr->f->action;
    bool comes_back = a->kind != FL_SCN_ACT_CRASH_HOST || fr->f->for_ms > 0;
    bool lose = a->kind == FL_SCN_ACT_CRASH_HOST && fl_scn_unsynced_lost(a->unsynced);
    struct fl_durable_crash dc;
    int rc = 0;
    if (lose) {
        fl_durable_crash_begin(r, a->host, &dc);
        dc.torn = a->unsynced == FL_SCN_UNSYNCED_TORN;
    }
    fl_run_host_down(r, a->host, true, comes_back);
    /* its disk back to what was synced, once nothing of it runs */
    if (lose && (rc = fl_durable_crash_end(r, &dc, detail, dlen, err, errlen)) < 0)
        return rc;
    if (comes_back && fr->f->for_ms == 0) {
        rc = fl_run_host_up(r, a->host, a->kind == FL_SCN_ACT_REPLACE);
        if (rc == 0)
            fl_fault_restart_tasks_on(r, a->host);
        else
            snprintf(err, errlen, "%s", r->error);
    }
    return rc;
}

static int down_heal(struct fl_run *r, struct fault_rt *fr, bool restart, char *err, size_t errlen)
{
    const struct fl_scn_action *a = &fr->f->action;
    if (restart) {
        if (fl_run_host_up(r, a->host, a->kind == FL_SCN_ACT_REPLACE) == 0)
            fl_fault_restart_tasks_on(r, a->host);
    } else {
        for (size_t t = 0; t < r->s->n_tasks; t++)
            if (r->s->tasks[t].host == a->host)
                r->tasks[t].restart_pending = 0;
    }
    return 0;
}

const struct fl_fault_kind fl_kind_restart = {
    .kind = FL_SCN_ACT_RESTART,
    .name = "restart",
    .parse = host_parse,
    .soak_target = true,
    .apply = down_apply,
    .heal = down_heal,
};

const struct fl_fault_kind fl_kind_replace = {
    .kind = FL_SCN_ACT_REPLACE,
    .name = "replace",
    .parse = host_parse,
    .soak_target = true,
    .apply = down_apply,
    .heal = down_heal,
};

static const char *const crash_keys[] = {"unsynced", NULL};

const struct fl_fault_kind fl_kind_crash_host = {
    .kind = FL_SCN_ACT_CRASH_HOST,
    .name = "crash_host",
    .parse = crash_parse,
    .keys = crash_keys,
    .keys_note = "what the crashed host's disk keeps of writes not yet synced",
    .soak_target = true,
    .init = fl_durable_init,
    .free = fl_durable_free,
    .task_env = fl_durable_env,
    .host_starting = fl_durable_baseline,
    .apply = down_apply,
    .heal = down_heal,
};
