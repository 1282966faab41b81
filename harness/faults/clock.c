/*
 * clock.c: a host's clocks moved for every program on it: the host options
 * `clock_offset` and `clock_drift` (for the whole run) and the fault kinds
 * `clock` (an offset or a drift from a trigger on, undone by its heal) and
 * `clock_jump` (the clock steps forward or back at a trigger, as an NTP
 * correction or a VM migration makes it).
 *
 * Mechanism (harness/sys/vclock.c): every process started on such a host
 * is traced by the run's clock keeper from before its first exec, and gets
 * faultline's vDSO at each exec; the vDSO adds what the host's clock page
 * says to each read of the kernel's.  A fault rewrites the page, so a
 * running process sees it at its next read, and what starts later (a
 * relaunch, a child, an exec) gets the page as it is.  A host with
 * `clock_via: libc` keeps the older mechanism instead (libfaketime,
 * harness/run/clock_offset.c): its options only, no fault.
 *
 * A class of clocks (realtime, and with `clocks: all` the monotonic ones)
 * reads t + off + (t - t0) * ppm / 1e6 (vclock_abi.h).  Faults compose on
 * it: an offset or a jump adds to off; a drift first folds what the class
 * has gained so far into off (t0 = now), then adds its rate.  A heal takes
 * its own part back out: an offset or a jump steps back; a drift stops,
 * and either the clock steps back by what the drift gained (`heal: step`,
 * the default: as a machine whose clock NTP steps) or it keeps it
 * (`heal: keep`: the error stays, the rate is right again).
 */
#include "harness/faults/kind.h"
#include "harness/run/clock_offset.h"
#include "harness/scenario/load_ctx.h"
#include "harness/sys/vclock.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A clock or clock_jump fault's value (fl_scn_action.params). */
struct clock_params {
    int64_t offset_ns, ppm, jump_ns;
    bool mono;      /* clocks: all */
    bool heal_keep; /* heal: keep */
};

/* What a fault did, to take out at its heal (fault_rt.priv). */
struct clock_done {
    int64_t applied_ns[2]; /* each class's real time when it was applied */
};

struct clock_run {
    struct fl_vclock *vc;
    bool *paged; /* by host: its page is made */
};

static struct clock_run *state(const struct fl_run *r)
{
    return r->kind_state[FL_SCN_ACT_CLOCK];
}

static int64_t real_ns(bool mono)
{
    struct timespec ts;
    clock_gettime(mono ? CLOCK_MONOTONIC : CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* ---- the run ------------------------------------------------------------ */

static bool clock_needed(const struct fl_run *r)
{
    for (size_t h = 0; h < r->s->n_hosts; h++)
        if (fl_clock_by_vdso(r, (int)h))
            return true;
    return false;
}

static int clock_init(struct fl_run *r, char *err, size_t errlen)
{
    if (state(r) || !clock_needed(r))
        return 0;
    char why[512];
    if (!fl_vclock_supported(why, sizeof why)) {
        snprintf(err, errlen, "clock faults: %s", why);
        return -ENOTSUP;
    }
    char so[PATH_MAX] = "";
    const char *bin = r->bin_dir ? r->bin_dir : ".";
    const char *cands[] = {"%s/../lib/fl_vdso.so", "%s/../lib/faultline/fl_vdso.so"};
    for (size_t i = 0; i < 2 && !so[0]; i++) {
        char p[PATH_MAX];
        snprintf(p, sizeof p, cands[i], bin);
        struct stat st;
        if (stat(p, &st) == 0 && st.st_size > 0)
            snprintf(so, sizeof so, "%s", p);
    }
    if (!so[0]) {
        snprintf(err, errlen,
                 "clock faults need fl_vdso.so next to faultline (%s/../lib/): not "
                 "found; run make",
                 bin);
        return -ENOENT;
    }
    struct clock_run *cr = calloc(1, sizeof *cr);
    cr->paged = calloc(r->s->n_hosts, sizeof *cr->paged);
    int rc = fl_vclock_start(&cr->vc, so, err, errlen);
    if (rc < 0) {
        free(cr->paged);
        free(cr);
        return rc;
    }
    r->kind_state[FL_SCN_ACT_CLOCK] = cr;
    return 0;
}

/* The host's clock page, made at its first start (the run's directories
 * exist by then): RUN/fs/lib/clock-HOST, which every host sees. */
static int clock_host_starting(struct fl_run *r, int host, char *err, size_t errlen)
{
    struct clock_run *cr = state(r);
    if (!cr || !cr->vc || !fl_clock_by_vdso(r, host) || cr->paged[host])
        return 0;
    char dir[PATH_MAX];
    fl_run_lib_dir(r, dir, sizeof dir);
    mkdir(dir, 0755);
    const struct fl_scn_host *sh = &r->s->hosts[host];
    char path[PATH_MAX + 80];
    snprintf(path, sizeof path, "%s/clock-%s", dir, sh->name);
    int rc = fl_vclock_host_page(cr->vc, host, path, err, errlen);
    if (rc < 0)
        return rc;
    struct fl_vclock_class c = {.off_ns = sh->clock_offset_ms * 1000000LL,
                                .t0_ns = r->t0_unix * 1000000LL,
                                .ppm = sh->clock_drift_ppm};
    fl_vclock_set(cr->vc, host, false, &c);
    cr->paged[host] = true;
    return 0;
}

/* The keeper's trouble is the run's: a process it could not reach would
 * read the real clock, and the verdict would be about another scenario. */
static void clock_stopping(struct fl_run *r)
{
    struct clock_run *cr = state(r);
    if (!cr || !cr->vc)
        return;
    char err[600];
    if (fl_vclock_status(cr->vc, NULL, err, sizeof err) < 0)
        fl_run_error(r, "%s", err);
    fl_vclock_stop(cr->vc);
    cr->vc = NULL;
}

static void clock_free(struct fl_run *r)
{
    struct clock_run *cr = state(r);
    if (!cr)
        return;
    fl_vclock_stop(cr->vc);
    free(cr->paged);
    free(cr);
    r->kind_state[FL_SCN_ACT_CLOCK] = NULL;
}

static int clock_spawned(struct fl_run *r, int host, pid_t pid, char *err, size_t errlen)
{
    struct clock_run *cr = state(r);
    if (!cr || !cr->vc || !fl_clock_by_vdso(r, host))
        return 0;
    return fl_vclock_adopt(cr->vc, host, pid, err, errlen);
}

/* ---- applying ----------------------------------------------------------- */

/* The class folded at now: the same reading, counted from t0 = now. */
static void fold(struct fl_vclock_class *c, int64_t now)
{
    c->off_ns = fl_vclock_adj(c, now);
    c->t0_ns = now;
}

/* Puts the fault into the host's clocks (heal false: d gets when) or takes
 * it back out (heal true). */
static void move(struct clock_run *cr, const struct fl_scn_action *a, struct clock_done *d,
                 bool heal)
{
    const struct clock_params *p = a->params;
    int sign = heal ? -1 : 1;
    for (int m = 0; m < 1 + p->mono; m++) {
        struct fl_vclock_class c;
        int64_t now = real_ns(m);
        fl_vclock_get(cr->vc, a->host, m, &c);
        if (p->ppm) {
            fold(&c, now);
            c.ppm += sign * p->ppm;
            if (heal && !p->heal_keep) {
                /* what this drift gained since it was applied */
                struct fl_vclock_class g = {.ppm = p->ppm};
                c.off_ns -= fl_vclock_adj(&g, now - d->applied_ns[m]);
            }
        }
        c.off_ns += sign * (p->offset_ns + p->jump_ns);
        fl_vclock_set(cr->vc, a->host, m, &c);
        if (!heal)
            d->applied_ns[m] = now;
    }
}

static int clock_apply(struct fl_run *r, struct fault_rt *fr, char *detail, size_t dlen, char *err,
                       size_t errlen)
{
    const struct fl_scn_action *a = &fr->f->action;
    struct clock_run *cr = state(r);
    if (!cr || !cr->vc) {
        snprintf(err, errlen, "host %s: its clock keeper is not running",
                 r->s->hosts[a->host].name);
        return -ESRCH;
    }
    struct clock_done *d = calloc(1, sizeof *d);
    move(cr, a, d, false);
    free(fr->priv);
    fr->priv = d;
    (void)detail;
    (void)dlen;
    return 0;
}

static int clock_heal(struct fl_run *r, struct fault_rt *fr, bool restart, char *err, size_t errlen)
{
    struct clock_run *cr = state(r);
    if (cr && cr->vc && fr->priv)
        move(cr, &fr->f->action, fr->priv, true);
    /* else the run is ending: the processes are gone with the keeper */
    (void)restart;
    (void)err;
    (void)errlen;
    return 0;
}

static void clock_detail(const struct fl_run *r, const struct fault_rt *fr, char *buf, size_t len)
{
    const struct clock_params *p = fr->f->action.params;
    size_t n = 0;
    buf[0] = 0;
    if (p->jump_ns)
        n += (size_t)snprintf(buf + n, len - n, "by=%+.3fs", p->jump_ns / 1e9);
    if (p->offset_ns && n < len)
        n +=
            (size_t)snprintf(buf + n, len - n, "%soffset=%+.3fs", n ? " " : "", p->offset_ns / 1e9);
    if (p->ppm && n < len)
        n += (size_t)snprintf(buf + n, len - n, "%sdrift=%+" PRId64 "ppm", n ? " " : "", p->ppm);
    if (p->mono && n < len)
        n += (size_t)snprintf(buf + n, len - n, " clocks=all");
    if (p->heal_keep && n < len)
        snprintf(buf + n, len - n, " heal=keep");
    (void)r;
}

/* ---- loading ------------------------------------------------------------ */

/* What both kinds' values start with: a mapping of the kind's keys, its
 * params (in a->params), host and clocks. */
static int begin_parse(struct fl_scn_vctx *c, const ynode *av, const char *kind,
                       const char *example, const char *const *keys, size_t nkeys,
                       struct fl_scn_action *a, struct clock_params **pp)
{
    int rc;
    char b[64];
    if (av->type != FL_YN_MAP)
        return fl_scn_verr(c, av->loc, "'%s' must be a mapping like %s, not %s", kind, example,
                           fl_scn_describe(av, b, sizeof b));
    if ((rc = fl_scn_check_keys(c, av, keys, nkeys, kind)) < 0)
        return rc;
    struct clock_params *p = calloc(1, sizeof *p);
    a->params = p;
    *pp = p;
    const ynode *h = fl_scn_yaml_get(av, "host", NULL), *cl = fl_scn_yaml_get(av, "clocks", NULL);
    if (!h)
        return fl_scn_verr(c, av->loc, "%s needs 'host' (whose clock moves)", kind);
    if ((rc = fl_scn_resolve_target(c, h, kind, &a->target)) < 0)
        return rc;
    a->host = a->target.host;
    if (cl && (rc = fl_scn_get_either(c, cl, "'clocks'", "realtime", "all",
                                      "realtime (the wall clock, the default) or all (the "
                                      "monotonic clocks too)",
                                      &p->mono)) < 0)
        return rc;
#if !defined(__x86_64__)
    return fl_scn_verr(c, av->loc,
                       "%s works on x86-64 only (faultline's vDSO, harness/tools/fl_vdso.c); "
                       "on this machine a host's clock_offset and clock_drift (libfaketime) are "
                       "what there is",
                       kind);
#endif
    return 0;
}

/* {host: H, offset: D, drift: R, clocks: realtime|all, heal: step|keep} */
static int clock_parse(struct fl_scn_vctx *c, const ynode *fault, const ynode *key, const ynode *av,
                       struct fl_scn_action *a)
{
    static const char *const keys[] = {"host", "offset", "drift", "clocks", "heal"};
    struct clock_params *p;
    int rc = begin_parse(c, av, "clock", "{host: ps1, offset: 30s} or {host: ps1, drift: 10%}",
                         keys, 5, a, &p);
    if (rc < 0)
        return rc;
    const ynode *off = fl_scn_yaml_get(av, "offset", NULL),
                *dr = fl_scn_yaml_get(av, "drift", NULL);
    const ynode *heal = fl_scn_yaml_get(av, "heal", NULL);
    if (!off && !dr)
        return fl_scn_verr(c, av->loc,
                           "clock needs 'offset' (a skew: 30s, -250ms) or 'drift' (a rate: 10%%, "
                           "-200ppm), or both");
    int64_t ms;
    if (off && (rc = fl_scn_get_signed_ms(c, off, "clock 'offset'", &ms)) < 0)
        return rc;
    p->offset_ns = off ? ms * 1000000LL : 0;
    if (dr && (rc = fl_scn_get_drift(c, dr, "clock 'drift'", &p->ppm)) < 0)
        return rc;
    if (heal) {
        if ((rc = fl_scn_get_either(c, heal, "clock 'heal'", "step", "keep",
                                    "step (the clock steps back to where it would be without "
                                    "the fault, the default) or keep (a drift's gain stays)",
                                    &p->heal_keep)) < 0)
            return rc;
        if (!dr)
            return fl_scn_verr(c, heal->loc, "clock 'heal' is about a drift: this one has none");
    }
    (void)fault;
    (void)key;
    return 0;
}

/* {host: H, by: D, clocks: realtime|all} */
static int jump_parse(struct fl_scn_vctx *c, const ynode *fault, const ynode *key, const ynode *av,
                      struct fl_scn_action *a)
{
    static const char *const keys[] = {"host", "by", "clocks"};
    struct clock_params *p;
    int rc = begin_parse(c, av, "clock_jump", "{host: ps1, by: -10s}", keys, 3, a, &p);
    if (rc < 0)
        return rc;
    const ynode *by = fl_scn_yaml_get(av, "by", NULL);
    if (!by)
        return fl_scn_verr(c, av->loc,
                           "clock_jump needs 'by' (how far the clock steps: 10s forward, -10s "
                           "back)");
    int64_t ms;
    if ((rc = fl_scn_get_signed_ms(c, by, "clock_jump 'by'", &ms)) < 0)
        return rc;
    p->jump_ns = ms * 1000000LL;
    if (!p->jump_ns)
        return fl_scn_verr(c, by->loc, "clock_jump 'by' must not be 0");
    (void)fault;
    (void)key;
    return 0;
}

const struct fl_fault_kind fl_kind_clock = {
    .kind = FL_SCN_ACT_CLOCK,
    .name = "clock",
    .parse = clock_parse,
    .lasting = true,
    .at_setup = true,
    .init = clock_init,
    .needed = clock_needed,
    .stopping = clock_stopping,
    .free = clock_free,
    .spawned = clock_spawned,
    .host_starting = clock_host_starting,
    .detail = clock_detail,
    .apply = clock_apply,
    .heal = clock_heal,
};

const struct fl_fault_kind fl_kind_clock_jump = {
    .kind = FL_SCN_ACT_CLOCK_JUMP,
    .name = "clock_jump",
    .parse = jump_parse,
    .init = clock_init,
    .detail = clock_detail,
    .apply = clock_apply,
    .heal = clock_heal,
};
