/*
 * partition.c: the `partition` fault kind: nftables drop rules in the run's
 * switch (netem/fabric.h), between groups of hosts (both ways: `[[a], [b,
 * c]]`) or from some hosts to others (one way: `{from: [a], to: [b]}`).
 * Heal: the rules are removed.  Hosts in no group are unaffected.  A group
 * written `rest` is every host in no other group; with a host '{event.KEY}'
 * in another group it is computed when the fault's event comes (the fault's
 * value is loaded again then, harness/load/event_values.c).
 */
#include "harness/faults/kind.h"
#include "harness/scenario/load_ctx.h"
#include "netem/fabric.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t put_hosts(const struct fl_run *r, const struct fl_scn_hostset *hs, char *buf,
                        size_t n, size_t len)
{
    for (size_t i = 0; i < hs->n && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? "," : "",
                              r->s->hosts[hs->hosts[i]].name);
    return n;
}

/* "a->b,c" one way, "[a]|[b,c]" both ways */
static void partition_target(const struct fl_run *r, const struct fl_scn_action *a, char *buf,
                             size_t len)
{
    size_t n = 0;
    buf[0] = 0;
    if (a->oneway) {
        n = put_hosts(r, &a->from, buf, n, len);
        if (n < len)
            n += (size_t)snprintf(buf + n, len - n, "->");
        put_hosts(r, &a->to, buf, n, len);
        return;
    }
    for (size_t g = 0; g < a->n_groups && n < len; g++) {
        n += (size_t)snprintf(buf + n, len - n, "%s[", g ? "|" : "");
        n = put_hosts(r, &a->groups[g], buf, n, len);
        if (n < len)
            n += (size_t)snprintf(buf + n, len - n, "]");
    }
}

static int partition_apply(struct fl_run *r, struct fault_rt *fr, char *detail, size_t dlen,
                           char *err, size_t errlen)
{
    const struct fl_scn_action *a = &fr->f->action;
    if (a->oneway)
        return fl_fabric_block(r->fab, a->from.hosts, a->from.n, a->to.hosts, a->to.n, &fr->handle,
                               err, errlen);
    const int **groups = calloc(a->n_groups, sizeof *groups);
    size_t *sizes = calloc(a->n_groups, sizeof *sizes);
    if (!groups || !sizes)
        abort();
    for (size_t g = 0; g < a->n_groups; g++) {
        groups[g] = a->groups[g].hosts;
        sizes[g] = a->groups[g].n;
    }
    int rc = fl_fabric_partition(r->fab, (const int *const *)groups, sizes, a->n_groups,
                                 &fr->handle, err, errlen);
    free(groups);
    free(sizes);
    return rc;
}

static int partition_heal(struct fl_run *r, struct fault_rt *fr, bool restart, char *err,
                          size_t errlen)
{
    return fl_fabric_heal(r->fab, fr->handle, err, errlen);
}

/* ---- loading ---------------------------------------------------------- */

/* A group (or from/to) written `rest`: every host in no other group. */
static bool is_rest(const ynode *n)
{
    return n->type == FL_YN_SCALAR && n->style == FL_YS_PLAIN && strcmp(n->value, "rest") == 0;
}

static bool has_event_host(const struct fl_scn_hostset *hs)
{
    for (size_t i = 0; i < hs->n; i++)
        if (hs->hosts[i] == FL_SCN_HOST_EVENT)
            return true;
    return false;
}

/* The `rest` at n: every host of the scenario in none of the other sets;
 * FL_SCN_HOST_EVENT alone while another set waits for the event. */
static int load_rest(struct fl_scn_vctx *c, const ynode *n, const struct fl_scn_hostset *others,
                     size_t n_others, size_t self, struct fl_scn_hostset *hs)
{
    const struct fl_scenario *s = c->s;
    if (fl_scn_host_find(s, "rest") >= 0)
        return fl_scn_verr(c, n->loc,
                           "'rest' in a partition means every host in no other group, but this "
                           "scenario has a host named 'rest': rename that host");
    if (!(hs->hosts = fl_scn_zalloc(c, s->n_hosts + 1, sizeof *hs->hosts)))
        return -ENOMEM;
    for (size_t g = 0; g < n_others; g++)
        if (g != self && has_event_host(&others[g])) {
            hs->hosts[hs->n++] = FL_SCN_HOST_EVENT; /* known when the event comes */
            return 0;
        }
    for (size_t h = 0; h < s->n_hosts; h++) {
        bool named = false;
        for (size_t g = 0; g < n_others && !named; g++)
            for (size_t i = 0; g != self && i < others[g].n && !named; i++)
                named = others[g].hosts[i] == (int)h;
        if (!named)
            hs->hosts[hs->n++] = (int)h;
    }
    if (hs->n == 0)
        return fl_scn_verr(c, n->loc,
                           "the partition's 'rest' is empty: every host is in another group");
    return 0;
}

/* [[a], [b, c]] both ways, or {from: [a], to: [b]} one way; a group (or
 * one of from/to) may be `rest`, every other host */
static int partition_parse(struct fl_scn_vctx *c, const ynode *fault, const ynode *key,
                           const ynode *v, struct fl_scn_action *a)
{
    struct fl_scenario *s = c->s;
    int rc = 0;

    if (v->type == FL_YN_MAP) {
        static const char *const keys[] = {"from", "to"};
        if ((rc = fl_scn_check_keys(c, v, keys, 2, "one-way partition")) < 0)
            return rc;
        const ynode *f = fl_scn_yaml_get(v, "from", NULL), *t = fl_scn_yaml_get(v, "to", NULL);
        if (!f || !t)
            return fl_scn_verr(c, v->loc, "a one-way partition needs both 'from' and 'to'");
        a->oneway = true;
        if (is_rest(f) && is_rest(t))
            return fl_scn_verr(c, t->loc,
                               "'from' and 'to' cannot both be 'rest' (every host in the other)");
        if ((!is_rest(f) && (rc = fl_scn_load_hostset(c, f, "partition 'from'", &a->from)) < 0) ||
            (!is_rest(t) && (rc = fl_scn_load_hostset(c, t, "partition 'to'", &a->to)) < 0))
            return rc;
        struct fl_scn_hostset both[2] = {a->from, a->to};
        if (is_rest(f) && (rc = load_rest(c, f, both, 2, 0, &a->from)) < 0)
            return rc;
        if (is_rest(t) && (rc = load_rest(c, t, both, 2, 1, &a->to)) < 0)
            return rc;
        for (size_t i = 0; i < a->from.n; i++)
            for (size_t k = 0; k < a->to.n; k++)
                if (a->from.hosts[i] >= 0 && a->from.hosts[i] == a->to.hosts[k])
                    return fl_scn_verr(c, t->loc, "host '%s' is in both 'from' and 'to'",
                                       s->hosts[a->from.hosts[i]].name);
        return 0;
    }
    if (v->type != FL_YN_SEQ)
        return fl_scn_verr(
            c, v->loc,
            "partition must be a list of host groups ([[a, b], [c]]) or {from: [...], to: [...]}");
    if (v->n < 2)
        return fl_scn_verr(c, v->loc,
                           "a partition needs at least two groups of hosts (e.g. "
                           "[[ps0], [w0, w1]]; one way: {from: [w0], to: [ps0]})");
    size_t rest = v->n;
    for (size_t g = 0; g < v->n; g++) {
        if (!is_rest(v->items[g]))
            continue;
        if (rest < v->n)
            return fl_scn_verr(c, v->items[g]->loc,
                               "a partition has at most one 'rest' group (every host in no "
                               "other group)");
        rest = g;
    }
    if (!(a->groups = fl_scn_zalloc(c, v->n, sizeof *a->groups)))
        return -ENOMEM;
    int *group_of = fl_scn_zalloc(c, s->n_hosts, sizeof *group_of);
    if (!group_of)
        return -ENOMEM;
    a->n_groups = v->n;
    for (size_t g = 0; g < v->n; g++) {
        struct fl_scn_hostset *hs = &a->groups[g];
        if (g == rest)
            continue;
        if ((rc = fl_scn_load_hostset(c, v->items[g], "partition group", hs)) < 0)
            break;
        for (size_t i = 0; i < hs->n && rc == 0; i++) {
            int h = hs->hosts[i];
            if (h < 0)
                continue; /* from the event: checked when it comes */
            if (group_of[h]) {
                const ynode *it =
                    v->items[g]->type == FL_YN_SEQ ? v->items[g]->items[i] : v->items[g];
                rc = fl_scn_verr(c, it->loc, "host '%s' is in two partition groups (%d and %zu)",
                                 s->hosts[h].name, group_of[h], g + 1);
            }
            group_of[h] = (int)g + 1;
        }
        if (rc < 0)
            break;
    }
    free(group_of);
    if (rc == 0 && rest < v->n)
        rc = load_rest(c, v->items[rest], a->groups, a->n_groups, rest, &a->groups[rest]);
    return rc;
}

const struct fl_fault_kind fl_kind_partition = {
    .kind = FL_SCN_ACT_PARTITION,
    .name = "partition",
    .lasting = true,
    .parse = partition_parse,
    .at_setup = true,
    .target = partition_target,
    .apply = partition_apply,
    .heal = partition_heal,
};
