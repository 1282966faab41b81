/*
 * common.h: helpers the faultline commands share (common.c).
 */
#ifndef FL_CLI_COMMON_H
#define FL_CLI_COMMON_H

#include <stddef.h>
#include <stdint.h>

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
