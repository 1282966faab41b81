/*
 * test_reports_seeds.c: the reproducer suite's table: rows named sNNN-LAYOUT
 * split into seed, layout (plus non-protocol variant terms) and protocol;
 * the summary switches to SEED LAYOUT PROTOCOL columns only when every row
 * is a reproducer, and cuts OBSERVED there only to fit a terminal (its
 * width from TIOCGWINSZ, or COLUMNS), not with fl_report_set_wide.
 */
#include "harness/tests/fl_test.h"
#include "reports/report.h"

#include <errno.h>
#include <pty.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* The summary printed to a pseudo-terminal cols wide (malloc'd). */
static char *summary_on_tty(const struct fl_report_row *rows, size_t n, unsigned short cols)
{
    int master, slave;
    struct winsize ws = {.ws_row = 40, .ws_col = cols};
    if (openpty(&master, &slave, NULL, NULL, &ws) < 0)
        FL_SKIP("no pseudo-terminal: %s", strerror(errno));
    FILE *tty = fdopen(slave, "w");
    FL_REQUIRE(tty);
    FL_ASSERT_EQ(fl_report_summary(tty, rows, n), 0);
    fclose(tty);
    size_t cap = 65536, got = 0;
    char *buf = malloc(cap);
    ssize_t k;
    while (got < cap - 1 && (k = read(master, buf + got, cap - 1 - got)) > 0)
        got += (size_t)k; /* EIO once the slave is closed and drained */
    buf[got] = 0;
    close(master);
    return buf;
}

FL_TEST(reports_seeds, seed_table_fits_terminal_whole_when_wide)
{
    char longobs[300];
    memset(longobs, 'e', sizeof longobs - 1);
    longobs[sizeof longobs - 1] = 0;
    memcpy(longobs, "NotFoundError: ", 15);
    struct fl_report_row rows[2] = {
        {.scenario = "s001-2ps-3w",
         .variant = "protocol=legacy",
         .expected = "chief fails_with /NotFoundError: .*part-00000-of-00002.index/",
         .observed = longobs,
         .verdict = "pass",
         .duration_ms = 100},
        {.scenario = "s001-2ps-3w",
         .variant = "protocol=robust",
         .expected = "checkpoint",
         .observed = "verified",
         .verdict = "pass",
         .duration_ms = 200},
    };
    fl_report_set_color(FL_REPORT_COLOR_NEVER);
    unsetenv("COLUMNS");
    char *s = summary_on_tty(rows, 2, 100);
    FL_ASSERT_MSG(fl_test_widest_line(s) <= 100, "a line wider than the 100-column terminal:\n%s",
                  s);
    FL_ASSERT(!strncmp(s, "SEED  LAYOUT  PROTOCOL  EXPECTED", 32));
    FL_ASSERT_CONTAINS(s, "S001  2ps-3w  legacy    ");
    FL_ASSERT_CONTAINS(s, "NotFoundError: eee");
    FL_ASSERT_CONTAINS(s, "eee...  PASS");
    FL_ASSERT_MSG(!strstr(s, longobs), "OBSERVED whole on a narrow terminal:\n%s", s);
    FL_ASSERT_CONTAINS(s, "2 runs: 2 passed, 0 failed, 0 errors in 0.3s");
    free(s);
    /* COLUMNS says the width instead of the terminal */
    setenv("COLUMNS", "140", 1);
    s = summary_on_tty(rows, 2, 100);
    FL_ASSERT_MSG(fl_test_widest_line(s) > 100 && fl_test_widest_line(s) <= 140,
                  "not 140 columns wide:\n%s", s);
    unsetenv("COLUMNS");
    free(s);
    /* --wide: whole on the terminal too */
    fl_report_set_wide(true);
    s = summary_on_tty(rows, 2, 100);
    fl_report_set_wide(false);
    FL_ASSERT_CONTAINS(s, longobs);
    FL_ASSERT_CONTAINS(s, "chief fails_with /NotFoundError: .*part-00000-of-00002.index/");
    FL_ASSERT_GT(fl_test_widest_line(s), 300);
    free(s);
}
