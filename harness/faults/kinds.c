/*
 * kinds.c: the table of fault kinds, one row each, by enum
 * fl_scn_action_kind, and finding a kind by its value or its name.  A kind
 * missing from the table, or in the wrong row, fails the build (the static
 * assert) or the test faults_kinds/table_has_every_kind_in_its_row.
 */
#include "harness/faults/kind.h"

#include "harness/base/text.h"

#include <string.h>

extern const struct fl_fault_kind fl_kind_kill, fl_kind_pause, fl_kind_restart, fl_kind_replace,
    fl_kind_crash_host, fl_kind_partition, fl_kind_limit, fl_kind_disk, fl_kind_link,
    fl_kind_corrupt, fl_kind_truncate, fl_kind_clock, fl_kind_clock_jump;

const struct fl_fault_kind *const fl_fault_kinds[] = {
    [FL_SCN_ACT_KILL] = &fl_kind_kill,             /* process.c */
    [FL_SCN_ACT_PAUSE] = &fl_kind_pause,           /* process.c */
    [FL_SCN_ACT_RESTART] = &fl_kind_restart,       /* machine.c */
    [FL_SCN_ACT_REPLACE] = &fl_kind_replace,       /* machine.c */
    [FL_SCN_ACT_CRASH_HOST] = &fl_kind_crash_host, /* machine.c, durable.c */
    [FL_SCN_ACT_PARTITION] = &fl_kind_partition,   /* partition.c */
    [FL_SCN_ACT_LIMIT] = &fl_kind_limit,           /* limit.c */
    [FL_SCN_ACT_DISK] = &fl_kind_disk,             /* disk.c */
    [FL_SCN_ACT_LINK] = &fl_kind_link,             /* link.c */
    [FL_SCN_ACT_CORRUPT] = &fl_kind_corrupt,       /* at_rest.c */
    [FL_SCN_ACT_TRUNCATE] = &fl_kind_truncate,     /* at_rest.c */
    [FL_SCN_ACT_CLOCK] = &fl_kind_clock,           /* clock.c */
    [FL_SCN_ACT_CLOCK_JUMP] = &fl_kind_clock_jump, /* clock.c */
};
/* A kind added to the enum without its row here (the last one, say) leaves
 * the table short: this fails the build (and kind.h's declaration too). */
_Static_assert(sizeof fl_fault_kinds / sizeof *fl_fault_kinds == FL_SCN_ACT_COUNT,
               "every enum fl_scn_action_kind has its row in fl_fault_kinds");

const struct fl_fault_kind *fl_fault_kind_of(const struct fl_scn_action *a)
{
    return a->kind > 0 && a->kind < FL_SCN_ACT_COUNT ? fl_fault_kinds[a->kind] : NULL;
}

const struct fl_fault_kind *fl_fault_kind_find(const char *name)
{
    for (int k = 1; k < FL_SCN_ACT_COUNT; k++)
        if (fl_fault_kinds[k] && !strcmp(fl_fault_kinds[k]->name, name))
            return fl_fault_kinds[k];
    return NULL;
}

const char *fl_scn_action_kind_name(enum fl_scn_action_kind k)
{
    return k > 0 && k < FL_SCN_ACT_COUNT && fl_fault_kinds[k] ? fl_fault_kinds[k]->name : "?";
}

const char *fl_fault_kind_list(char *buf, size_t len, const char *last_sep)
{
    buf[0] = 0;
    for (int k = 1; k < FL_SCN_ACT_COUNT; k++)
        fl_text_add(buf, len, "%s%s",
                    k == 1                      ? ""
                    : k == FL_SCN_ACT_COUNT - 1 ? last_sep
                                                : ", ",
                    fl_fault_kinds[k]->name);
    return buf;
}
