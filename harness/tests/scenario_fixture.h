/*
 * scenario_fixture.h: loading scenarios in tests of the scenario and load
 * layers: the path of a file of harness/tests/data/scenarios/, a valid file
 * loaded from inside its directory, an inline scenario loaded from memory.
 */
#ifndef SCENARIO_FIXTURE_H
#define SCENARIO_FIXTURE_H

#include "harness/load/load.h"
#include "harness/faults/kind.h"
#include "harness/scenario/scenario.h"
#include "harness/tests/fl_test.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static __attribute__((unused)) const char *data_dir(const char *sub)
{
    static char p[4096];
    snprintf(p, sizeof p, "%s/harness/tests/data/scenarios/%s", fl_test_root(), sub);
    return p;
}

/* The path of a file of harness/tests/data/soak/ (four at a time). */
static __attribute__((unused)) const char *soak_data(const char *name)
{
    static char buf[4][4096];
    static int k;
    char *b = buf[k++ % 4];
    snprintf(b, 4096, "%s/harness/tests/data/soak/%s", fl_test_root(), name);
    return b;
}

/* An expected message of a data file ("# expect: ..."), with {kinds} and
 * {kinds,} written out as the table of kinds says ("kill, ... or truncate",
 * "kill, ..., truncate"): a new kind changes no expected message. */
static __attribute__((unused)) const char *expand_kinds(const char *want)
{
    static char out[2048];
    char or_list[512], comma_list[512];
    fl_fault_kind_list(or_list, sizeof or_list, " or ");
    fl_fault_kind_list(comma_list, sizeof comma_list, ", ");
    size_t n = 0;
    while (*want && n + 1 < sizeof out) {
        const char *sub = !strncmp(want, "{kinds}", 7)    ? or_list
                          : !strncmp(want, "{kinds,}", 8) ? comma_list
                                                          : NULL;
        if (!sub) {
            out[n++] = *want++;
            continue;
        }
        n += (size_t)snprintf(out + n, sizeof out - n, "%s", sub);
        want += sub == or_list ? 7 : 8;
    }
    out[n < sizeof out ? n : sizeof out - 1] = 0;
    return out;
}

/* Loads data/scenarios/valid/<name> from inside that directory. */
static __attribute__((unused)) struct fl_scenario *load_valid(const char *name)
{
    char err[1024] = "";
    struct fl_scenario *s = NULL;
    FL_REQUIRE_EQ(chdir(data_dir("valid")), 0);
    int rc = fl_scenario_load(name, &s, err, sizeof err);
    FL_REQUIRE_MSG(rc == 0, "%s: rc %d: %s", name, rc, err);
    FL_REQUIRE(s != NULL);
    return s;
}

/* Loads an inline scenario named "s.yaml"; returns rc, message in err. */
static __attribute__((unused)) int load_str(const char *text, struct fl_scenario **s, char *err,
                                            size_t len)
{
    return fl_scenario_load_mem("s.yaml", text, strlen(text), s, err, len);
}

#endif
