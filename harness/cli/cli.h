/*
 * cli.h: subcommands of faultline that live outside main.c.
 */
#ifndef FL_CLI_H
#define FL_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

int fl_cli_gc(int argc, char **argv, const char *usage);
int fl_cli_exec(int argc, char **argv, const char *usage);
/* Checks the event (exit status 2 when bad), then sends it on the event
 * channel at path; a NULL or empty path (not under the harness) sends nothing. */
int fl_cli_emit(const char *path, const char *kind, const char *attrs, bool sync);
int fl_cli_bench_hosts(int argc, char **argv);
/* `faultline report` (cli/report.c) and its --help text. */
extern const char fl_cli_report_usage[];
int fl_cli_report(int argc, char **argv);

#endif
