/*
 * shell.c: `faultline shell SCENARIO HOST`: brings one variant's hosts up
 * through the engine, without faults (roles started only with --start), and
 * opens an interactive shell on HOST; everything is torn down when the shell
 * exits, whose status is the command's.
 */
#include "harness/load/load.h"
#include "harness/cli/cli.h"
#include "harness/cli/common.h"
#include "harness/base/suggest.h"
#include "harness/engine/engine.h"
#include "harness/scenario/scenario.h"

#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char fl_cli_shell_usage[] =
    "usage: faultline shell SCENARIO HOST [--variant K=V]... [--start] [--out DIR] [--keep]\n"
    "\n"
    "Brings every host of the scenario up (namespaces, disks, network) and opens\n"
    "an interactive shell on HOST ($SHELL, else /bin/sh), in its working\n"
    "directory. The commands each role would run are printed; --start starts\n"
    "them too. Faults are not applied. The variant is the first one --variant\n"
    "matches (without --variant, the scenario's first). Another terminal can run\n"
    "'faultline exec RUN HOST -- CMD' (the line to type is printed). Everything is\n"
    "removed when the shell exits.\n"
    "Exit status is the shell's (1 when the hosts could not be brought up).\n";

int fl_cli_shell(int argc, char **argv)
{
    struct fl_cli_opts c = {0};
    bool start = false;
    static const struct option opts[] = {{"variant", required_argument, 0, 'v'},
                                         {"out", required_argument, 0, 'o'},
                                         {"keep", no_argument, 0, 'k'},
                                         {"start", no_argument, 0, 'S'},
                                         {0, 0, 0, 0}};
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (ch) {
        case 'v':
            if (fl_cli_add_variant(&c, optarg) < 0)
                return 2;
            break;
        case 'o': c.out = optarg; break;
        case 'k': c.keep = true; break;
        case 'S': start = true; break;
        default: fputs(fl_cli_shell_usage, stderr); return 2;
        }
    }
    if (argc - optind != 2) {
        fputs(fl_cli_shell_usage, stderr);
        return 2;
    }
    char err[2048];
    struct fl_scenario *s;
    if (fl_scenario_load(argv[optind], &s, err, sizeof err) < 0) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    int host = fl_scn_host_find(s, argv[optind + 1]);
    if (host < 0) {
        const char **names = calloc(s->n_hosts, sizeof *names);
        for (size_t i = 0; names && i < s->n_hosts; i++)
            names[i] = s->hosts[i].name;
        char msg[512];
        snprintf(msg, sizeof msg, "faultline: %s has no host '%s'", s->path, argv[optind + 1]);
        if (names)
            fl_suggest_append(msg, sizeof msg, argv[optind + 1], names, s->n_hosts);
        fprintf(stderr, "%s; its hosts:", msg);
        for (size_t i = 0; i < s->n_hosts; i++)
            fprintf(stderr, " %s", s->hosts[i].name);
        fprintf(stderr, "\n");
        free(names);
        fl_scenario_free(s);
        return 2;
    }
    if (fl_cli_check_workdir(s, c.out) < 0) {
        fl_scenario_free(s);
        return 2;
    }
    struct fl_scn_selector f = {0};
    int rc = 0;
    for (int k = 0; k < c.nvariants && rc == 0; k++)
        if (fl_scn_variant_filter_add(s, &f, c.variants[k], err, sizeof err) < 0) {
            fprintf(stderr, "faultline: %s: %s\n", s->path, err);
            rc = 2;
        }
    size_t var = 0;
    while (rc == 0 && var < fl_scn_variant_count(s) && f.n_terms &&
           !fl_scn_selector_match(s, &f, var))
        var++;
    if (rc == 0 && var == fl_scn_variant_count(s)) {
        fprintf(stderr, "faultline: no variant of %s matches\n", s->path);
        rc = 2;
    }
    if (rc == 0 && fl_cli_prepare_out(c.out) < 0)
        rc = 2;
    if (rc == 0 && fl_engine_global_init(err, sizeof err) < 0) {
        fprintf(stderr, "faultline: %s\n", err);
        rc = 1;
    }
    if (rc) {
        fl_scn_selector_free(&f);
        fl_scenario_free(s);
        return rc;
    }
    char bin[PATH_MAX];
    fl_cli_bin_dir(bin, sizeof bin);
    struct fl_engine_opts eo = {.out_dir = c.out,
                                .bin_dir = bin,
                                .keep = c.keep,
                                .shell_host = host,
                                .shell_start_roles = start};
    struct fl_engine_result res;
    fl_engine_run(s, var, &eo, &res);
    if (!strcmp(res.verdict, "error"))
        fprintf(stderr, "faultline: %s\n", res.reason);
    fl_scn_selector_free(&f);
    fl_scenario_free(s);
    if (!strcmp(res.verdict, "error"))
        return 1;
    return res.shell_status >= 0 ? res.shell_status : 0; /* the shell's, as exec gives CMD's */
}
