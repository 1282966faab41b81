/*
 * check_ckpt.h: the post-run checks of a saved checkpoint (expect:
 * checkpoint:, scenarios/README.md), called by check.c for each checkpoint
 * expectation of a matching expect block.  Results go through check.c's own
 * record() (so they land in the database and the verdict like every other
 * check) and its expected/observed summaries.
 */
#ifndef FL_CHECK_CKPT_H
#define FL_CHECK_CKPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct engine;
struct judge;
struct fl_scn_ckpt_check;

/* What check.c lends the checkpoint checks. */
struct fl_check_ckpt_ctx {
    struct engine *e;
    struct judge *j;
    /* check.c's record(): one check result (database row, verdict, reason). */
    void (*record)(struct judge *j, const char *name, const char *target, bool passed,
                   const char *expected, const char *observed, int line);
    FILE *expf, *obsf; /* the run's expected / observed summary texts */
    int *nexp, *nobs;  /* items already in them */
};

/*
 * Runs every check one checkpoint expectation asks for, each recorded as
 * its own check: checkpoint.state, checkpoint.verify, checkpoint.restore,
 * checkpoint.latest_step, checkpoint.restores_latest (target "HOST:DIR").
 * The chief's reported steps come from the events the engine kept in memory
 * (save.done / restore.done from the chief's host), so these checks work
 * with --no-db too.
 */
void fl_check_ckpt(const struct fl_check_ckpt_ctx *cx, const struct fl_scn_ckpt_check *ck);

#endif
