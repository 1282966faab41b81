/*
 * validate.c: `faultline validate SCENARIO|DIR...`: loads and checks every
 * scenario file (a soak profile's soak: block too, as `faultline soak` reads
 * it) and creates nothing; one "ok" line per good file, the loader's
 * file:line:column: message per bad one.
 */
#include "harness/cli/cli.h"
#include "harness/cli/common.h"
#include "harness/scenario/scenario.h"
#include "harness/soak/soak.h"

#include <stdio.h>

const char fl_cli_validate_usage[] =
    "usage: faultline validate SCENARIO|DIR...\n"
    "\n"
    "Loads and checks every scenario file without creating anything (a soak\n"
    "profile's soak: block too). Errors are printed as file:line:column: message.\n"
    "Exit 0 when all are valid, else 2.\n";

int fl_cli_validate(int argc, char **argv)
{
    struct fl_scenario **v;
    size_t n;
    int bad = fl_cli_load_file_args(argc, argv, fl_cli_validate_usage, &v, &n);
    if (bad < 0)
        return 2;
    for (size_t i = 0; i < n; i++) {
        /* a soak profile: its soak: block too, as 'faultline soak' reads it */
        if (v[i]->has_soak) {
            struct fl_soak_profile *p;
            char err[2048];
            if (fl_soak_profile_load(v[i]->path, &p, err, sizeof err) < 0) {
                fprintf(stderr, "%s\n", err);
                bad++;
                continue;
            }
            fl_soak_profile_free(p);
        }
        printf("ok  %s  (%s, %zu variant%s%s)\n", v[i]->path, v[i]->name,
               fl_scn_variant_count(v[i]), fl_scn_variant_count(v[i]) == 1 ? "" : "s",
               v[i]->has_soak ? ", soak profile" : "");
    }
    fl_cli_free_scenarios(v, n);
    return bad ? 2 : 0;
}
