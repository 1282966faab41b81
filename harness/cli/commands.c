/*
 * commands.c: the table of faultline's subcommands: the name typed, the
 * function that runs it (in the command's own file), its --help text and
 * its line in the command list of `faultline --help`.  main.c dispatches
 * through it, and prints `faultline --help`, `faultline help CMD` and
 * `faultline CMD --help` from it.
 */
#include "harness/cli/cli.h"

#include <stddef.h>

const struct fl_cli_command fl_cli_commands[] = {
    {"run", fl_cli_run, fl_cli_run_usage, "SCENARIO|DIR...",
     "run scenarios (every variant), print verdicts and a table", false},
    {"validate", fl_cli_validate, fl_cli_validate_usage, "SCENARIO|DIR...",
     "check scenario files without running anything", false},
    {"list", fl_cli_list, fl_cli_list_usage, "SCENARIO|DIR...", "list scenarios and their variants",
     false},
    {"soak", fl_cli_soak, fl_soak_usage, "PROFILE",
     "randomized fault schedules; failures kept, minimized", false},
    {"shell", fl_cli_shell, fl_cli_shell_usage, "SCENARIO HOST",
     "bring the hosts up and open a shell on HOST", false},
    {"exec", fl_cli_exec, fl_cli_exec_usage, "RUN HOST -- CMD...",
     "run a command on a host of a running run", false},
    {"gc", fl_cli_gc, fl_cli_gc_usage, NULL,
     "remove what killed runs left behind (their logs stay)", false},
    {"runs", fl_cli_runs, fl_cli_runs_usage, NULL,
     "list recorded runs (also --history, --changed REV, RUN --faults, merge)", false},
    {"replay", fl_cli_replay, fl_cli_replay_usage, "RUN_ID...",
     "run a recorded run again; the same verdict and failed checks?", false},
    {"report", fl_cli_report, fl_cli_report_usage, NULL,
     "write an HTML report with timelines of recorded runs", false},
    {"doctor", fl_cli_doctor, fl_cli_doctor_usage, NULL,
     "what this machine lets this user do (root or not), and what to install", false},
    /* reads --help itself: its KEY=VALUE arguments are not faultline's */
    {"emit", fl_cli_emit, fl_cli_emit_usage, "[--sync] KIND [K=V...]",
     "send an event from a process under faultline", true},
    /* make bench: no --help, not listed */
    {"_bench-hosts", fl_cli_bench_hosts, NULL, NULL, NULL, false},
    {0}};
