/*
 * scenario_fixture.h: loading scenarios in tests of the scenario and load
 * layers: the path of a file of harness/tests/data/scenarios/, a valid file
 * loaded from inside its directory, an inline scenario loaded from memory.
 */
#ifndef SCENARIO_FIXTURE_H
#define SCENARIO_FIXTURE_H

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
