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
/* Makes OUT/runs (NULL: "out") and checks it can hold run directories (writable,
 * short enough for their event sockets) before anything runs; -1 after a
 * message on stderr naming the path and what to do. */
int fl_cli_prepare_out(const char *out);
/* The directory of the faultline binary ({bin} in templates). */
void fl_cli_bin_dir(char *buf, size_t len);
/* A decimal 0..2^64-1 (no sign, no base prefix) into *v; -1 after a message
 * on stderr, "PROG: OPT wants a whole number ...". */
int fl_cli_parse_u64(const char *prog, const char *opt, const char *s, uint64_t *v);

#endif
