/*
 * list.c: `faultline list SCENARIO|DIR...`: each scenario's name, file,
 * description, hosts and variants, as loaded (nothing is created).
 */
#include "harness/cli/cli.h"
#include "harness/cli/common.h"
#include "harness/scenario/scenario.h"

#include <stdio.h>

const char fl_cli_list_usage[] = "usage: faultline list SCENARIO|DIR...\n"
                                 "\n"
                                 "Prints each scenario's name, file, hosts and variants.\n";

int fl_cli_list(int argc, char **argv)
{
    struct fl_scenario **v;
    size_t n;
    int bad = fl_cli_load_file_args(argc, argv, fl_cli_list_usage, &v, &n);
    if (bad < 0)
        return 2;
    for (size_t i = 0; i < n; i++) {
        struct fl_scenario *s = v[i];
        printf("%s  (%s)\n", s->name, s->path);
        if (s->about[0])
            printf("  %s\n", s->about);
        printf("  hosts:");
        for (size_t h = 0; h < s->n_hosts; h++)
            printf(" %s", s->hosts[h].name);
        printf("\n  variants:");
        char name[FL_SCN_VARIANT_NAME_MAX];
        for (size_t k = 0; k < fl_scn_variant_count(s); k++)
            printf("%s %s", k ? "," : "", fl_scn_variant_name(s, k, name, sizeof name));
        printf("\n");
    }
    fl_cli_free_scenarios(v, n);
    return bad ? 2 : 0;
}
