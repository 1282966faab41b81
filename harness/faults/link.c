/*
 * faults/link.c: the `link:` fault kind in a run: turns a scenario's link
 * fault into netem/link.h calls on the run's fabric, flaps links, and puts
 * the ports' state back when a host comes back up.
 *
 * The run's struct fl_links is made at the first link fault that fires
 * (e->links) and freed with the fabric at the end of the run; every rule,
 * qdisc and port state it made dies with the switch namespace then.
 * A fault's state (fault_rt): link_id (> 0 while applied); a flapping fault
 * also has flap_down (its ports are down now) and flap_next (when it turns
 * next, ms since start).  A flap without for: stays ACTIVE (turning) until
 * the end of the run.
 * Delay, jitter, reorder, duplicate, corrupt and bursty loss go to the
 * fabric's userspace emulator (netem/emu.h); its generator for a fault is
 * seeded from the run's seed and the fault's index, so a run's seed decides
 * which packets are hit.
 */
#include "harness/engine/engine_int.h"
#include "netem/emu.h"
#include "netem/link.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

void fl_faults_link_target(const struct engine *e, const struct fl_scn_action *a, char *buf,
                           size_t len)
{
    const struct fl_scenario *s = e->s;
    size_t n = 0;
    buf[0] = 0;
    if (a->link.scope == FL_SCN_LINK_HOST) {
        snprintf(buf, len, "%s", s->hosts[a->host].name);
        return;
    }
    const char *sep = a->link.scope == FL_SCN_LINK_BETWEEN ? "<->" : ",";
    for (size_t i = 0; i < a->from.n && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? sep : "", s->hosts[a->from.hosts[i]].name);
    if (a->link.scope != FL_SCN_LINK_ONEWAY)
        return;
    if (n < len)
        n += (size_t)snprintf(buf + n, len - n, "->");
    for (size_t i = 0; i < a->to.n && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? "," : "", s->hosts[a->to.hosts[i]].name);
}

static size_t put_pct(char *buf, size_t n, size_t len, const char *key, unsigned bp)
{
    if (!bp || n >= len)
        return n;
    return n + (size_t)snprintf(buf + n, len - n, "%s%s=%u.%02u%%", n ? " " : "", key, bp / 100, bp % 100);
}

void fl_faults_link_detail(const struct fl_scn_action *a, char *buf, size_t len)
{
    const struct fl_scn_link *lk = &a->link;
    size_t n = 0;
    buf[0] = 0;
    if (lk->emu && n < len)
        n += (size_t)snprintf(buf + n, len - n, "delay=%lldms", (long long)lk->delay_ms);
    if (lk->jitter_ms && n < len)
        n += (size_t)snprintf(buf + n, len - n, " jitter=%lldms", (long long)lk->jitter_ms);
    n = put_pct(buf, n, len, "reorder", lk->reorder_bp);
    n = put_pct(buf, n, len, "duplicate", lk->duplicate_bp);
    n = put_pct(buf, n, len, "corrupt", lk->corrupt_bp);
    n = put_pct(buf, n, len, "loss", lk->loss_bp);
    if (lk->burst && n < len)
        n += (size_t)snprintf(buf + n, len - n, " burst=%u", lk->burst);
    if (lk->rate_bit && n < len)
        n += (size_t)snprintf(buf + n, len - n, "%srate=%llubit", n ? " " : "",
                              (unsigned long long)lk->rate_bit);
    if (lk->down && n < len)
        n += (size_t)snprintf(buf + n, len - n, "%sdown", n ? " " : "");
    if (lk->flap_ms && n < len)
        snprintf(buf + n, len - n, "%sflap=%lldms", n ? " " : "", (long long)lk->flap_ms);
}

static int links(struct engine *e, char *err, size_t errlen)
{
    if (e->links)
        return 0;
    return fl_links_new(&e->links, e->fab, err, errlen);
}

int fl_faults_link_apply(struct engine *e, struct fault_rt *fr, int64_t now, char *err, size_t errlen)
{
    const struct fl_scn_action *a = &fr->f->action;
    const struct fl_scn_link *lk = &a->link;
    int rc = links(e, err, errlen);
    if (rc < 0)
        return rc;
    int host = a->host;
    struct fl_link_spec spec = {
        .loss_bp = lk->burst ? 0 : lk->loss_bp,      /* bursty loss is the emulator's */
        .rate_bit = lk->rate_bit,
        .down = lk->down || lk->flap_ms > 0,
    };
    struct fl_emu_params ep = {
        .delay_us = (uint32_t)lk->delay_ms * 1000,
        .jitter_us = (uint32_t)lk->jitter_ms * 1000,
        .reorder_bp = lk->reorder_bp,
        .duplicate_bp = lk->duplicate_bp,
        .corrupt_bp = lk->corrupt_bp,
        .ge_loss_bp = lk->burst ? lk->loss_bp : 0,
        .ge_burst = lk->burst,
        .seed = e->seed ^ (0x9e3779b97f4a7c15ULL * (uint64_t)(fr->index + 1)),
    };
    if (lk->emu)
        spec.emu = &ep;
    switch (lk->scope) {
    case FL_SCN_LINK_BETWEEN:
        spec.scope = FL_LINK_BETWEEN;
        spec.a = a->from.hosts;
        spec.na = a->from.n;
        break;
    case FL_SCN_LINK_ONEWAY:
        spec.scope = FL_LINK_ONEWAY;
        spec.a = a->from.hosts;
        spec.na = a->from.n;
        spec.b = a->to.hosts;
        spec.nb = a->to.n;
        break;
    case FL_SCN_LINK_HOST:
        spec.scope = FL_LINK_HOST;
        spec.a = &host;
        spec.na = 1;
        break;
    }
    rc = fl_links_apply(e->links, &spec, &fr->link_id, err, errlen);
    if (rc < 0) {
        fr->link_id = 0;
        return rc;
    }
    if (lk->flap_ms) {
        fr->flap_down = true;
        fr->flap_next = now + lk->flap_ms / 2;
    }
    return 0;
}

int fl_faults_link_heal(struct engine *e, struct fault_rt *fr, char *err, size_t errlen)
{
    if (!e->links || fr->link_id <= 0)
        return 0;
    int rc = fl_links_heal(e->links, fr->link_id, err, errlen);
    fr->link_id = 0;
    fr->flap_next = -1;
    return rc;
}

void fl_faults_link_flap(struct engine *e, struct fault_rt *fr, int64_t now)
{
    if (fr->link_id <= 0 || fr->flap_next < 0 || now < fr->flap_next)
        return;
    char err[512] = "";
    fr->flap_down = !fr->flap_down;
    /* the next turn counts from the planned time: no drift under load */
    int64_t half = fr->f->action.link.flap_ms / 2;
    fr->flap_next += half;
    if (fr->flap_next <= now)
        fr->flap_next = now + half;
    if (fl_links_set_down(e->links, fr->link_id, fr->flap_down, err, sizeof err) < 0)
        eng_error(e, "fault %d (link flap, line %d): %s", fr->index + 1, fr->f->loc.line, err);
}

void fl_faults_link_host_up(struct engine *e, int host)
{
    char err[512] = "";
    if (e->links && fl_links_port_remade(e->links, host, err, sizeof err) < 0)
        eng_error(e, "host %s back up: restoring its link faults: %s", e->s->hosts[host].name, err);
}

void fl_faults_link_free(struct engine *e)
{
    fl_links_free(e->links);
    e->links = NULL;
}
