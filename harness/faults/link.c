/*
 * link.c: the `link:` fault kind in a run: turns a scenario's link
 * fault into netem/link.h calls on the run's fabric, flaps links, and puts
 * the ports' state back when a host comes back up.
 *
 * The run's struct fl_links is made at the first link fault that fires
 * (r->kind_state[FL_SCN_ACT_LINK]) and freed before the fabric at the end of
 * the run; every rule, qdisc and port state it made dies with the switch
 * namespace then.  A fault's state (fault_rt): handle, its link id (> 0
 * while applied); a flapping fault also has on (its ports are down now) and
 * tick_at (when it turns next, ms since start).  A flap without for: stays
 * ACTIVE (turning) until the end of the run.
 * Delay, jitter, reorder, duplicate, corrupt and bursty loss go to the
 * fabric's userspace emulator (netem/emu.h); its generator for a fault is
 * seeded from the run's seed and the fault's index, so a run's seed decides
 * which packets are hit.
 *
 * Loading: the value of a link: fault (scenarios/README.md, "Links") into
 * struct fl_scn_action: which frames it covers (hosts: [a, b] both ways,
 * from/to one way, or host: every frame of one host) and what happens to
 * them (loss: a percentage or {p, burst} for bursty loss, rate: bits per
 * second, down, flap: {period}, and the emulator's delay, jitter, reorder,
 * duplicate, corrupt).  Every error is "file:line:col: what is wrong" at the
 * offending key or value.
 */
#include "harness/faults/kind.h"
#include "netem/emu.h"
#include "netem/link.h"
#include "harness/scenario/load_ctx.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <strings.h>

static void link_target(const struct fl_run *r, const struct fl_scn_action *a, char *buf,
                        size_t len)
{
    const struct fl_scenario *s = r->s;
    size_t n = 0;
    buf[0] = 0;
    if (a->link.scope == FL_SCN_LINK_HOST) {
        snprintf(buf, len, "%s", s->hosts[a->host].name);
        return;
    }
    const char *sep = a->link.scope == FL_SCN_LINK_BETWEEN ? "<->" : ",";
    for (size_t i = 0; i < a->from.n && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? sep : "",
                              s->hosts[a->from.hosts[i]].name);
    if (a->link.scope != FL_SCN_LINK_ONEWAY)
        return;
    if (n < len)
        n += (size_t)snprintf(buf + n, len - n, "->");
    for (size_t i = 0; i < a->to.n && n < len; i++)
        n +=
            (size_t)snprintf(buf + n, len - n, "%s%s", i ? "," : "", s->hosts[a->to.hosts[i]].name);
}

static size_t put_pct(char *buf, size_t n, size_t len, const char *key, unsigned bp)
{
    if (!bp || n >= len)
        return n;
    return n + (size_t)snprintf(buf + n, len - n, "%s%s=%u.%02u%%", n ? " " : "", key, bp / 100,
                                bp % 100);
}

static void link_detail(const struct fl_run *r, const struct fault_rt *fr, char *buf, size_t len)
{
    const struct fl_scn_link *lk = &fr->f->action.link;
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

/* The run's links (netem/link.h), made at the first link fault. */
static struct fl_links *links_of(const struct fl_run *r)
{
    return r->kind_state[FL_SCN_ACT_LINK];
}

static int links(struct fl_run *r, char *err, size_t errlen)
{
    if (links_of(r))
        return 0;
    struct fl_links *l = NULL;
    int rc = fl_links_new(&l, r->fab, err, errlen);
    r->kind_state[FL_SCN_ACT_LINK] = l;
    return rc;
}

static int link_apply(struct fl_run *r, struct fault_rt *fr, char *detail, size_t dlen, char *err,
                      size_t errlen)
{
    int64_t now = fl_run_now(r);
    const struct fl_scn_action *a = &fr->f->action;
    const struct fl_scn_link *lk = &a->link;
    int rc = links(r, err, errlen);
    if (rc < 0)
        return rc;
    int host = a->host;
    struct fl_link_spec spec = {
        .loss_bp = lk->burst ? 0 : lk->loss_bp, /* bursty loss is the emulator's */
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
        .seed = r->seed ^ (0x9e3779b97f4a7c15ULL * (uint64_t)(fr->index + 1)),
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
    rc = fl_links_apply(links_of(r), &spec, &fr->handle, err, errlen);
    if (rc < 0) {
        fr->handle = 0;
        return rc;
    }
    if (lk->flap_ms) {
        fr->on = true; /* down, for the first half period */
        fr->tick_at = now + lk->flap_ms / 2;
    }
    return 0;
}

static int link_heal(struct fl_run *r, struct fault_rt *fr, bool restart, char *err, size_t errlen)
{
    if (!links_of(r) || fr->handle <= 0)
        return 0;
    int rc = fl_links_heal(links_of(r), fr->handle, err, errlen);
    fr->handle = 0;
    fr->tick_at = -1;
    return rc;
}

/* A flap's turn: down and up by turns, each half of its period. */
static void link_flap(struct fl_run *r, struct fault_rt *fr, int64_t now)
{
    if (fr->handle <= 0 || fr->tick_at < 0 || now < fr->tick_at)
        return;
    char err[512] = "";
    fr->on = !fr->on;
    /* the next turn counts from the planned time: no drift under load */
    int64_t half = fr->f->action.link.flap_ms / 2;
    fr->tick_at += half;
    if (fr->tick_at <= now)
        fr->tick_at = now + half;
    if (fl_links_set_down(links_of(r), fr->handle, fr->on, err, sizeof err) < 0)
        fl_run_error(r, "fault %d (link flap, line %d): %s", fr->index + 1, fr->f->loc.line, err);
}

/* A host back up has a new port on the switch: its rate classes and
 * down state are put back. */
static void link_host_up(struct fl_run *r, int host)
{
    char err[512] = "";
    if (links_of(r) && fl_links_port_remade(links_of(r), host, err, sizeof err) < 0)
        fl_run_error(r, "host %s back up: restoring its link faults: %s", r->s->hosts[host].name,
                     err);
}

/* Before the fabric goes. */
static void link_free(struct fl_run *r)
{
    fl_links_free(links_of(r));
    r->kind_state[FL_SCN_ACT_LINK] = NULL;
}

/* ---- loading ---------------------------------------------------------- */

static const char *const link_keys[] = {
    "hosts", "from",  "to",     "host",      "loss",    "rate",    "down",
    "flap",  "delay", "jitter", "duplicate", "reorder", "corrupt",
};
#define MAX_DELAY_MS 60000

/* "30%", "0.5%", "100%": hundredths of a percent, for key `what`. */
static int get_percent(struct fl_scn_vctx *c, const ynode *n, const char *what, unsigned *bp)
{
    int rc;
    if ((rc = fl_scn_want_scalar(c, n, what)) < 0)
        return rc;
    const char *v = n->value;
    size_t i = 0;
    unsigned whole = 0, frac = 0, nfrac = 0;
    while (isdigit((unsigned char)v[i]) && i < 4)
        whole = whole * 10 + (unsigned)(v[i++] - '0');
    bool ok = i > 0;
    if (ok && v[i] == '.') {
        i++;
        while (isdigit((unsigned char)v[i])) {
            if (nfrac < 2)
                frac = frac * 10 + (unsigned)(v[i] - '0');
            else if (v[i] != '0')
                return fl_scn_verr(c, n->loc, "'%s' has at most two decimals (0.01%%), not '%s'",
                                   what, v);
            nfrac++;
            i++;
        }
        ok = nfrac > 0;
    }
    if (!ok || strcmp(v + i, "%") != 0)
        return fl_scn_verr(c, n->loc, "'%s' must be a percentage like 1%%, 30%% or 0.5%%, not '%s'",
                           what, v);
    if (nfrac == 1)
        frac *= 10;
    unsigned total = whole * 100 + frac;
    if (total == 0 || total > 10000)
        return fl_scn_verr(c, n->loc, "'%s' must be more than 0%% and at most 100%%, not %s", what,
                           v);
    *bp = total;
    return 0;
}

/* loss: a percentage, or {p: percentage, burst: mean run length} */
static int get_loss(struct fl_scn_vctx *c, const ynode *n, struct fl_scn_link *lk)
{
    if (n->type != FL_YN_MAP)
        return get_percent(c, n, "loss", &lk->loss_bp);
    static const char *const keys[] = {"p", "burst"};
    int rc;
    if ((rc = fl_scn_check_keys(c, n, keys, 2, "loss")) < 0)
        return rc;
    const ynode *p = fl_scn_yaml_get(n, "p", NULL), *b = fl_scn_yaml_get(n, "burst", NULL);
    if (!p || !b)
        return fl_scn_verr(c, n->loc,
                           "bursty 'loss' needs both 'p' (the loss, e.g. 5%%) and 'burst' (the "
                           "mean run of lost packets, e.g. 4)");
    if ((rc = get_percent(c, p, "p", &lk->loss_bp)) < 0)
        return rc;
    long burst;
    if ((rc = fl_scn_get_long(c, b, "loss 'burst'", 1, 1000, &burst)) < 0)
        return rc;
    if (lk->loss_bp >= 10000)
        return fl_scn_verr(
            c, p->loc,
            "bursty loss 'p' must be below 100%%, not %s (for every packet lost write loss: 100%%)",
            p->value);
    /* the good->bad probability p/(burst*(1-p)) must be a probability */
    if ((double)lk->loss_bp / 10000.0 > (double)burst / (double)(burst + 1))
        return fl_scn_verr(c, p->loc,
                           "bursty loss 'p' %s is too high for burst %ld: runs of %ld on average "
                           "allow at most %.2f%%",
                           p->value, burst, burst, 100.0 * (double)burst / (double)(burst + 1));
    lk->burst = (unsigned)burst;
    lk->emu = true;
    return 0;
}

/* delay, jitter: a duration, 0 to 60s */
static int get_delay(struct fl_scn_vctx *c, const ynode *n, const char *what, int64_t *ms)
{
    char q[32];
    snprintf(q, sizeof q, "'%s'", what);
    if (n->type == FL_YN_SCALAR && n->value[0] == '-')
        return fl_scn_verr(c, n->loc, "'%s' cannot be negative, not %s", what, n->value);
    int rc = fl_scn_get_duration(c, n, q, true, ms);
    if (rc < 0)
        return rc;
    if (*ms > MAX_DELAY_MS)
        return fl_scn_verr(c, n->loc, "'%s' must be at most 60s, not %s", what, n->value);
    return 0;
}

/* tc's units: bit (and kbit, mbit, gbit, tbit: powers of 1000) and bps
 * (bytes per second: kbps, mbps, gbps, tbps). */
static int get_rate(struct fl_scn_vctx *c, const ynode *n, uint64_t *bit)
{
    static const struct {
        const char *u;
        double mul;
    } units[] = {
        {"bit", 1}, {"kbit", 1e3}, {"mbit", 1e6}, {"gbit", 1e9}, {"tbit", 1e12},
        {"bps", 8}, {"kbps", 8e3}, {"mbps", 8e6}, {"gbps", 8e9}, {"tbps", 8e12},
    };
    int rc;
    if ((rc = fl_scn_want(c, n, FL_YN_SCALAR, "'rate'")) < 0)
        return rc;
    const char *v = n->value;
    size_t i = 0;
    while (isdigit((unsigned char)v[i]) || (v[i] == '.' && i > 0))
        i++;
    double mul = 0;
    for (size_t u = 0; u < sizeof units / sizeof units[0] && i > 0 && v[i - 1] != '.'; u++)
        if (strcasecmp(v + i, units[u].u) == 0)
            mul = units[u].mul;
    if (mul == 0)
        return fl_scn_verr(c, n->loc,
                           "'rate' must be a rate like 500kbit, 10mbit or 1gbit (bit/s; kbps, "
                           "mbps, gbps are bytes/s), not '%s'",
                           v);
    double r = strtod(v, NULL) * mul;
    if (!(r >= (double)FL_LINK_RATE_MIN && r <= (double)FL_LINK_RATE_MAX))
        return fl_scn_verr(c, n->loc, "'rate' must be between 8kbit and 32gbit, not %s", v);
    *bit = (uint64_t)llround(r);
    return 0;
}

static int link_parse(struct fl_scn_vctx *c, const ynode *fault, const ynode *key, const ynode *v,
                      struct fl_scn_action *a)
{
    struct fl_scenario *s = c->s;
    struct fl_scn_link *lk = &a->link;
    int rc;

    a->kind = FL_SCN_ACT_LINK;
    if (v->type != FL_YN_MAP) {
        char b[64];
        return fl_scn_verr(c, v->loc,
                           "'link' must be a mapping like {hosts: [a, b], loss: 1%%}, not %s",
                           fl_scn_describe(v, b, sizeof b));
    }
    if ((rc = fl_scn_check_keys(c, v, link_keys, ARRAY_LEN(link_keys), "link")) < 0)
        return rc;

    /* Which frames. */
    struct fl_scn_ynode *hk = NULL, *fk = NULL, *tk = NULL, *ok = NULL;
    const ynode *hs = fl_scn_yaml_get(v, "hosts", &hk), *fr = fl_scn_yaml_get(v, "from", &fk);
    const ynode *to = fl_scn_yaml_get(v, "to", &tk), *one = fl_scn_yaml_get(v, "host", &ok);
    const ynode *forms[3] = {hs ? hk : NULL, fr ? fk : to ? tk : NULL, one ? ok : NULL};
    const ynode *first = NULL;
    for (size_t i = 0; i < 3; i++) {
        if (!forms[i])
            continue;
        if (first)
            return fl_scn_verr(
                c, forms[i]->loc,
                "link takes one of 'hosts', 'from'/'to' and 'host', not both '%s' and '%s'",
                first->value, forms[i]->value);
        first = forms[i];
    }
    if (!first)
        return fl_scn_verr(c, v->loc,
                           "link needs the hosts it affects: hosts: [a, b] (both ways), from: a, "
                           "to: b (one way) or host: a (all of a's traffic)");
    if (hs) {
        lk->scope = FL_SCN_LINK_BETWEEN;
        if ((rc = fl_scn_load_hostset(c, hs, "link 'hosts'", &a->from)) < 0)
            return rc;
        if (a->from.n < 2)
            return fl_scn_verr(c, hs->loc,
                               "link 'hosts' needs at least two hosts (the links between them); "
                               "for all of one host's traffic write host: %s",
                               hs->type == FL_YN_SEQ ? hs->items[0]->value : hs->value);
    } else if (fr || to) {
        lk->scope = FL_SCN_LINK_ONEWAY;
        a->oneway = true;
        if (!fr || !to)
            return fl_scn_verr(c, v->loc, "a one-way link needs both 'from' and 'to'");
        if ((rc = fl_scn_load_hostset(c, fr, "link 'from'", &a->from)) < 0 ||
            (rc = fl_scn_load_hostset(c, to, "link 'to'", &a->to)) < 0)
            return rc;
        for (size_t i = 0; i < a->from.n; i++)
            for (size_t k = 0; k < a->to.n; k++)
                if (a->from.hosts[i] >= 0 && a->from.hosts[i] == a->to.hosts[k])
                    return fl_scn_verr(c, to->loc, "host '%s' is in both 'from' and 'to'",
                                       s->hosts[a->from.hosts[i]].name);
    } else {
        lk->scope = FL_SCN_LINK_HOST;
        if ((rc = fl_scn_resolve_target(c, one, "link", &a->target)) < 0)
            return rc;
        a->host = a->target.host;
    }

    /* What happens to them. */
    struct fl_scn_ynode *lkk = NULL, *rk = NULL, *dk = NULL, *flk = NULL;
    const ynode *loss = fl_scn_yaml_get(v, "loss", &lkk), *rate = fl_scn_yaml_get(v, "rate", &rk);
    const ynode *down = fl_scn_yaml_get(v, "down", &dk), *flap = fl_scn_yaml_get(v, "flap", &flk);
    if (loss && (rc = get_loss(c, loss, lk)) < 0)
        return rc;
    struct fl_scn_ynode *dlk = NULL, *jk = NULL, *rok = NULL, *duk = NULL, *ck = NULL;
    const ynode *delay = fl_scn_yaml_get(v, "delay", &dlk),
                *jitter = fl_scn_yaml_get(v, "jitter", &jk);
    const ynode *reorder = fl_scn_yaml_get(v, "reorder", &rok),
                *dup = fl_scn_yaml_get(v, "duplicate", &duk);
    const ynode *corrupt = fl_scn_yaml_get(v, "corrupt", &ck);
    if (delay && (rc = get_delay(c, delay, "delay", &lk->delay_ms)) < 0)
        return rc;
    if (jitter) {
        if ((rc = get_delay(c, jitter, "jitter", &lk->jitter_ms)) < 0)
            return rc;
        if (!delay)
            return fl_scn_verr(
                c, jk->loc,
                "'jitter' varies a delay: set 'delay' too (e.g. delay: 20ms, jitter: 5ms)");
        if (lk->jitter_ms > lk->delay_ms)
            return fl_scn_verr(
                c, jitter->loc,
                "'jitter' %s must not exceed 'delay' %s (a packet cannot leave before it came)",
                jitter->value, delay->value);
    }
    if (reorder) {
        if ((rc = get_percent(c, reorder, "reorder", &lk->reorder_bp)) < 0)
            return rc;
        if (lk->delay_ms == 0)
            return fl_scn_verr(
                c, rok->loc,
                "'reorder' sends some packets ahead of delayed ones: set a 'delay' above 0 too");
    }
    if (dup && (rc = get_percent(c, dup, "duplicate", &lk->duplicate_bp)) < 0)
        return rc;
    if (corrupt && (rc = get_percent(c, corrupt, "corrupt", &lk->corrupt_bp)) < 0)
        return rc;
    if (delay || jitter || reorder || dup || corrupt)
        lk->emu = true;
    if (rate) {
        if ((rc = get_rate(c, rate, &lk->rate_bit)) < 0)
            return rc;
        if (lk->scope == FL_SCN_LINK_HOST)
            return fl_scn_verr(c, rk->loc,
                               "'rate' limits what hosts get from each other: write hosts: [a, b] "
                               "or from/to, not host");
    }
    if (down && (rc = fl_scn_get_bool(c, down, "'down'", &lk->down)) < 0)
        return rc;
    if (flap) {
        static const char *const fkeys[] = {"period"};
        if (flap->type != FL_YN_MAP) {
            char b[64];
            return fl_scn_verr(c, flap->loc,
                               "'flap' must be a mapping like {period: 200ms}, not %s",
                               fl_scn_describe(flap, b, sizeof b));
        }
        if ((rc = fl_scn_check_keys(c, flap, fkeys, 1, "flap")) < 0)
            return rc;
        const ynode *p = fl_scn_yaml_get(flap, "period", NULL);
        if (!p)
            return fl_scn_verr(
                c, flap->loc,
                "'flap' needs 'period' (down for half of it, then up for half, e.g. 200ms)");
        if ((rc = fl_scn_get_duration(c, p, "'period'", false, &lk->flap_ms)) < 0)
            return rc;
        if (lk->flap_ms < 20)
            return fl_scn_verr(c, p->loc, "flap 'period' must be at least 20ms, not %s", p->value);
        if (down)
            return fl_scn_verr(
                c, dk->loc,
                "'down' and 'flap' exclude each other (flap takes the link down and up by turns)");
    }
    if (lk->down || lk->flap_ms) {
        const ynode *k = lk->down ? dk : flk;
        if (lk->scope != FL_SCN_LINK_HOST)
            return fl_scn_verr(c, k->loc,
                               "'%s' acts on a host's link to the switch: write host: a, not '%s'",
                               k->value, first->value);
        const struct fl_scn_ynode *other = loss      ? lkk
                                           : rate    ? rk
                                           : delay   ? dlk
                                           : jitter  ? jk
                                           : reorder ? rok
                                           : dup     ? duk
                                           : corrupt ? ck
                                                     : NULL;
        if (other)
            return fl_scn_verr(
                c, other->loc,
                "'%s' cannot be combined with '%s' (the link is cut); write two faults",
                other->value, k->value);
    }
    if (!lk->loss_bp && !lk->rate_bit && !lk->down && !lk->flap_ms && !lk->emu)
        return fl_scn_verr(c, v->loc,
                           "link does nothing: set loss, rate, delay, jitter, reorder, duplicate, "
                           "corrupt, down or flap");
    return 0;
}

const struct fl_fault_kind fl_kind_link = {
    .kind = FL_SCN_ACT_LINK,
    .name = "link",
    .lasting = true,
    .parse = link_parse,
    .at_setup = true,
    .free = link_free,
    .host_started = link_host_up,
    .target = link_target,
    .detail = link_detail,
    .apply = link_apply,
    .tick = link_flap,
    .heal = link_heal,
};
