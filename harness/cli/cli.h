/*
 * cli.h: the subcommands of faultline, one file each (run.c, validate.c,
 * ...), and their table (commands.c).  A command takes its arguments as
 * main() got them past the command's name (argv[0] is "faultline CMD", as
 * getopt names it in messages) and returns the exit status; its --help text
 * is fl_cli_CMD_usage.
 */
#ifndef FL_CLI_H
#define FL_CLI_H

#include <stdbool.h>

struct fl_cli_command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *usage; /* `faultline help NAME`, `NAME --help`; NULL: none */
    const char *args;  /* after the name in the list of `faultline --help` */
    const char *about; /* its line in that list; NULL: not listed */
    bool own_help;     /* reads --help itself: main does not look for it */
};
/* Every command, in the order `faultline --help` lists them; a NULL name ends it. */
extern const struct fl_cli_command fl_cli_commands[];

extern const char fl_cli_doctor_usage[];
int fl_cli_doctor(int argc, char **argv);
extern const char fl_cli_run_usage[];
int fl_cli_run(int argc, char **argv);
extern const char fl_cli_validate_usage[];
int fl_cli_validate(int argc, char **argv);
extern const char fl_cli_list_usage[];
int fl_cli_list(int argc, char **argv);
extern const char fl_soak_usage[];
int fl_cli_soak(int argc, char **argv);
extern const char fl_cli_shell_usage[];
int fl_cli_shell(int argc, char **argv);
extern const char fl_cli_exec_usage[];
int fl_cli_exec(int argc, char **argv);
extern const char fl_cli_gc_usage[];
int fl_cli_gc(int argc, char **argv);
extern const char fl_cli_runs_usage[];
int fl_cli_runs(int argc, char **argv);
extern const char fl_cli_replay_usage[];
int fl_cli_replay(int argc, char **argv);
extern const char fl_cli_report_usage[];
int fl_cli_report(int argc, char **argv);
/* emit reads --help itself: its KEY=VALUE arguments are not faultline's. */
extern const char fl_cli_emit_usage[];
int fl_cli_emit(int argc, char **argv);
/* `faultline _bench-hosts N [ROUNDS]` (make bench); not in --help. */
int fl_cli_bench_hosts(int argc, char **argv);

#endif
