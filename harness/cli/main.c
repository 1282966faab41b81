/*
 * main.c: the faultline command line.  Finds the subcommand, prints help,
 * and hands the work to the command's own file (run.c, validate.c, ...; see
 * cli.h).  Exit status: 0 all runs passed / command succeeded,
 * 1 a run failed or errored, 2 bad usage or a bad scenario file, 130 when
 * interrupted.
 */
#include "harness/cli/cli.h"
#include "harness/soak/soak.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static const char *usage_main =
    "usage: faultline COMMAND [OPTIONS] ...\n"
    "\n"
    "Runs multi-host ps/worker scenarios on one machine: each host is a set of\n"
    "namespaces with its own address and disk; faults are injected from the\n"
    "scenario file; every outcome is recorded in SQLite.\n"
    "\n"
    "Commands:\n"
    "  run SCENARIO|DIR...      run scenarios (every variant), print verdicts and a table\n"
    "  validate SCENARIO|DIR... check scenario files without running anything\n"
    "  list SCENARIO|DIR...     list scenarios and their variants\n"
    "  soak PROFILE             randomized fault schedules; failures kept, minimized\n"
    "  shell SCENARIO HOST      bring the hosts up and open a shell on HOST\n"
    "  exec RUN HOST -- CMD...  run a command on a host of a running run\n"
    "  gc                       remove what killed runs left behind\n"
    "  runs                     list recorded runs (also --history, --changed REV)\n"
    "  report                   write an HTML report with timelines of recorded runs\n"
    "  emit [--sync] KIND [K=V...]  send an event from a process under faultline\n"
    "  help [COMMAND]           this text, or a command's options\n"
    "  --version                the version\n"
    "\n"
    "'faultline COMMAND --help' shows a command's options. Scenario format:\n"
    "scenarios/README.md. Results database schema: docs/schema.md.\n";

static int help_for(const char *cmd)
{
    const char *u = NULL;
    if (!cmd)
        u = usage_main;
    else if (!strcmp(cmd, "run")) u = fl_cli_run_usage;
    else if (!strcmp(cmd, "validate")) u = fl_cli_validate_usage;
    else if (!strcmp(cmd, "list")) u = fl_cli_list_usage;
    else if (!strcmp(cmd, "shell")) u = fl_cli_shell_usage;
    else if (!strcmp(cmd, "exec")) u = fl_cli_exec_usage;
    else if (!strcmp(cmd, "gc")) u = fl_cli_gc_usage;
    else if (!strcmp(cmd, "runs")) u = fl_cli_runs_usage;
    else if (!strcmp(cmd, "report")) u = fl_cli_report_usage;
    else if (!strcmp(cmd, "emit")) u = fl_cli_emit_usage;
    else if (!strcmp(cmd, "soak")) u = fl_soak_usage;
    if (!u) {
        fprintf(stderr, "faultline: no command '%s'; see 'faultline --help'\n", cmd);
        return 2;
    }
    fputs(u, stdout);
    return 0;
}

static bool want_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--"))
            return false;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            return true;
    }
    return false;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage_main, stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h"))
        return help_for(NULL);
    if (!strcmp(cmd, "help"))
        return help_for(argc > 2 ? argv[2] : NULL);
    if (!strcmp(cmd, "--version")) {
        printf("faultline 0.1\n");
        return 0;
    }
    /* emit reads its own options: its KEY=VALUE arguments are not ours */
    if (strcmp(cmd, "emit") && want_help(argc - 1, argv + 1))
        return help_for(cmd);
    /* getopt names argv[0] in its messages: "faultline run: unrecognized
     * option '--bogus'", not "run: ..." */
    char prog[64];
    snprintf(prog, sizeof prog, "faultline %s", cmd);
    argv[1] = prog;
    if (!strcmp(cmd, "run")) return fl_cli_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "validate")) return fl_cli_validate(argc - 1, argv + 1);
    if (!strcmp(cmd, "list")) return fl_cli_list(argc - 1, argv + 1);
    if (!strcmp(cmd, "shell")) return fl_cli_shell(argc - 1, argv + 1);
    if (!strcmp(cmd, "exec")) return fl_cli_exec(argc - 1, argv + 1);
    if (!strcmp(cmd, "gc")) return fl_cli_gc(argc - 1, argv + 1);
    if (!strcmp(cmd, "runs")) return fl_cli_runs(argc - 1, argv + 1);
    if (!strcmp(cmd, "report")) return fl_cli_report(argc - 1, argv + 1);
    if (!strcmp(cmd, "emit")) return fl_cli_emit(argc - 1, argv + 1);
    if (!strcmp(cmd, "soak")) return fl_cli_soak(argc - 1, argv + 1);
    if (!strcmp(cmd, "_bench-hosts")) return fl_cli_bench_hosts(argc - 1, argv + 1);
    fprintf(stderr, "faultline: unknown command '%s'; see 'faultline --help'\n", cmd);
    return 2;
}
