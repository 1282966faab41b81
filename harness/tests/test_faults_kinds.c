/*
 * test_faults_kinds.c: the table of fault kinds (harness/faults/kinds.c):
 * every kind in its row with a name the loader finds, a parser and an apply;
 * the names a scenario writes and the loader's messages come from it.
 */
#include "harness/faults/kind.h"
#include "harness/tests/fl_test.h"

#include <stdio.h>

FL_TEST(faults_kinds, table_has_every_kind_in_its_row)
{
    FL_ASSERT(fl_fault_kinds[0] == NULL);
    for (int k = 1; k < FL_SCN_ACT_COUNT; k++) {
        const struct fl_fault_kind *kd = fl_fault_kinds[k];
        FL_ASSERT(kd != NULL);
        if (!kd)
            continue;
        FL_ASSERT_EQ((long)kd->kind, (long)k);
        FL_ASSERT(kd->name && kd->name[0]);
        FL_ASSERT(kd->parse != NULL);
        FL_ASSERT(kd->apply != NULL);
        FL_ASSERT(fl_fault_kind_find(kd->name) == kd);
        FL_ASSERT_STREQ(fl_scn_action_kind_name((enum fl_scn_action_kind)k), kd->name);
        /* a kind that heals nothing says why for: does not apply */
        FL_ASSERT(kd->heal != NULL || kd->no_for != NULL);
        /* a lasting fault is lifted by its heal before the final: checks */
        FL_ASSERT(!kd->lasting || kd->heal != NULL);
        for (int j = 1; j < k; j++)
            FL_ASSERT(strcmp(fl_fault_kinds[j]->name, kd->name) != 0);
    }
    FL_ASSERT(fl_fault_kind_find("partiton") == NULL);
}

FL_TEST(faults_kinds, list_names_every_kind_once)
{
    char buf[512], last[64];
    fl_fault_kind_list(buf, sizeof buf, " or ");
    /* every name once, separated by ", ", the last after " or " */
    size_t commas = 0;
    for (const char *p = buf; (p = strstr(p, ", ")); p += 2)
        commas++;
    FL_ASSERT_EQ((long)commas, (long)FL_SCN_ACT_COUNT - 3);
    snprintf(last, sizeof last, " or %s", fl_fault_kinds[FL_SCN_ACT_COUNT - 1]->name);
    FL_ASSERT(strlen(buf) > strlen(last) && !strcmp(buf + strlen(buf) - strlen(last), last));
    for (int k = 1; k < FL_SCN_ACT_COUNT; k++) {
        const char *at = strstr(buf, fl_fault_kinds[k]->name);
        FL_ASSERT_MSG(at != NULL, "%s missing from '%s'", fl_fault_kinds[k]->name, buf);
    }
    /* the kinds a scenario file has always had, in the order of the docs */
    FL_ASSERT(strstr(buf, "kill, pause, restart, replace, crash_host, partition, limit, disk, "
                          "link, corrupt") == buf);
}
