/*
 * test_reports_seeds.c: the reproducer suite's table: rows named sNNN-LAYOUT
 * split into seed, layout (plus non-protocol variant terms) and protocol;
 * the summary switches to SEED LAYOUT PROTOCOL columns only when every row
 * is a reproducer, and never cuts OBSERVED there.
 */
#include "harness/tests/fl_test.h"
#include "reports/report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

FL_TEST(reports_seeds, seed_labels_split_name_and_variant)
{
    char seed[16], layout[128], proto[32];
    struct fl_report_row r = {.scenario = "s004-relaunch-ps",
                              .variant = "protocol=robust,disk=fresh"};
    FL_REQUIRE(
        fl_report_seed_labels(&r, seed, sizeof seed, layout, sizeof layout, proto, sizeof proto));
    FL_ASSERT_STREQ(seed, "S004");
    FL_ASSERT_STREQ(layout, "relaunch-ps disk=fresh");
    FL_ASSERT_STREQ(proto, "robust");
    r = (struct fl_report_row){.scenario = "s000-2ps-5w", .variant = "protocol=legacy"};
    FL_REQUIRE(
        fl_report_seed_labels(&r, seed, sizeof seed, layout, sizeof layout, proto, sizeof proto));
    FL_ASSERT_STREQ(layout, "2ps-5w");
    FL_ASSERT_STREQ(proto, "legacy");
    r = (struct fl_report_row){.scenario = "s123-x", .variant = ""};
    FL_REQUIRE(
        fl_report_seed_labels(&r, seed, sizeof seed, layout, sizeof layout, proto, sizeof proto));
    FL_ASSERT_STREQ(proto, "-");
    static const char *const not_seeds[] = {"seed-001-x", "s00-x", "s0000-x",
                                            "s000",       "s000-", "tour"};
    for (size_t i = 0; i < sizeof not_seeds / sizeof *not_seeds; i++) {
        r = (struct fl_report_row){.scenario = not_seeds[i]};
        FL_ASSERT_MSG(!fl_report_seed_labels(&r, seed, sizeof seed, layout, sizeof layout, proto,
                                             sizeof proto),
                      "%s taken for a reproducer", not_seeds[i]);
    }
}

FL_TEST(reports_seeds, seed_table_columns_and_whole_observed)
{
    char longobs[300];
    memset(longobs, 'e', sizeof longobs - 1);
    longobs[sizeof longobs - 1] = 0;
    memcpy(longobs, "NotFoundError: ", 15);
    struct fl_report_row rows[2] = {
        {.scenario = "s001-2ps-3w",
         .variant = "protocol=legacy",
         .expected = "chief fails_with x",
         .observed = longobs,
         .verdict = "pass",
         .duration_ms = 100},
        {.scenario = "s001-2ps-3w",
         .variant = "protocol=robust",
         .expected = "checkpoint",
         .observed = "verified",
         .verdict = "fail",
         .duration_ms = 200,
         .reason = "why"},
    };
    fl_report_set_color(FL_REPORT_COLOR_NEVER);
    char *s = NULL;
    size_t len;
    FILE *out = open_memstream(&s, &len);
    FL_REQUIRE_EQ(fl_report_summary(out, rows, 2), 0);
    fclose(out);
    FL_ASSERT(!strncmp(s, "SEED  LAYOUT  PROTOCOL  EXPECTED", 32));
    FL_ASSERT_CONTAINS(s, "S001  2ps-3w  legacy");
    FL_ASSERT_CONTAINS(s, longobs);
    FL_ASSERT_CONTAINS(s, "2 runs: 1 passed, 1 failed, 0 errors in 0.3s");
    free(s);
    /* one row that is not a reproducer: the generic table */
    struct fl_report_row mixed[2] = {rows[0], {.scenario = "tour", .verdict = "pass"}};
    out = open_memstream(&s, &len);
    FL_REQUIRE_EQ(fl_report_summary(out, mixed, 2), 0);
    fclose(out);
    FL_ASSERT(!strncmp(s, "SCENARIO", 8));
    free(s);
}
