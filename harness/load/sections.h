/*
 * sections.h: the loader's sections that other layers call too (a soak
 * profile checks its entries with the fault loader): the faults: and
 * expect: sections of a scenario (faults.c), loaded after hosts, variants,
 * cluster and run so that every reference resolves.
 */
#ifndef FL_LOAD_SECTIONS_H
#define FL_LOAD_SECTIONS_H

#include "harness/scenario/load_ctx.h"

int fl_scn_load_faults(struct fl_scn_vctx *c, const ynode *fs);
int fl_scn_load_expect(struct fl_scn_vctx *c, const ynode *ex);

#endif
