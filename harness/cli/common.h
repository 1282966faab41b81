/*
 * common.h: helpers the faultline commands share (common.c).
 */
#ifndef FL_CLI_COMMON_H
#define FL_CLI_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fl_rec;
struct fl_scenario;

/* Makes OUT/runs (NULL: "out") and checks it can hold run directories (writable,
 * short enough for their event sockets) before anything runs; -1 after a
 * message on stderr naming the path and what to do. */
int fl_cli_prepare_out(const char *out);
/* The directory of the faultline binary ({bin} in templates). */
void fl_cli_bin_dir(char *buf, size_t len);
/* The checkout it was built in ({bin}/../..), where git revisions are read. */
void fl_cli_top_dir(char *buf, size_t len);
/* A decimal 0..2^64-1 (no sign, no base prefix) into *v; -1 after a message
 * on stderr, "PROG: OPT wants a whole number ...". */
int fl_cli_parse_u64(const char *prog, const char *opt, const char *s, uint64_t *v);
/* A seed, 0..FL_SEED_MAX (--seed); -1 after a message naming the range. */
int fl_cli_parse_seed(const char *prog, const char *s, uint64_t *v);
/* The same, 1 or more (--repeat, --iterations). */
int fl_cli_parse_count(const char *prog, const char *opt, const char *s, uint64_t *v);
/* A shard "K/N" (--shard): 1 <= K <= N <= 100000, into *k and *n; -1
 * after "PROG: --shard wants K/N ..." on stderr. */
int fl_cli_parse_shard(const char *prog, const char *s, uint64_t *k, uint64_t *n);
/* How many runs to show (--limit, --last): 1..INT_MAX, or -1 for all; -1
 * after "PROG: OPT wants a number >= 1, or -1 for all ..." on stderr. */
int fl_cli_parse_limit(const char *prog, const char *opt, const char *s, int *v);

/* Loads every scenario file the arguments name (a DIR: every *.yaml, *.yml
 * below it) into *out (*n of them, fl_cli_free_scenarios frees them); the
 * number of files or arguments that failed, each said on stderr. */
int fl_cli_load_scenarios(int argc, char **argv, struct fl_scenario ***out, size_t *n);
void fl_cli_free_scenarios(struct fl_scenario **v, size_t n);
/* For a command that takes no options, only SCENARIO|DIR... (validate,
 * list): fl_cli_load_scenarios of its arguments (argv[0] the command, as
 * main passes it); -1 after USAGE on stderr (and which argument looks like
 * an option) when there is none or one does, with nothing loaded. */
int fl_cli_load_file_args(int argc, char **argv, const char *usage, struct fl_scenario ***v,
                          size_t *n);
/* -1 after a message when the scenario's workdir would hide, inside the
 * hosts, faultline's programs, the scenario's directory or OUT. */
int fl_cli_check_workdir(const struct fl_scenario *s, const char *out);

/* The options run and shell share. */
struct fl_cli_opts {
    const char *out;          /* --out */
    bool keep;                /* --keep */
    const char *variants[64]; /* --variant */
    int nvariants;
};
/* One more --variant filter; -1 (said) past the 64 kept. */
int fl_cli_add_variant(struct fl_cli_opts *c, const char *v);
/* The database a run records into without --db: OUT/faultline.db, OUT being
 * its --out (NULL: out), so that runs kept apart by --out stay apart. */
const char *fl_cli_default_db(const char *out, char *buf, size_t len);
/* Opens the results database at PATH (NULL: out/faultline.db, the default
 * of --db), made when missing (run, soak); -1 after "PROG: why" on stderr. */
int fl_cli_open_db(const char *prog, const char *path, struct fl_rec **rec);

/* Exit status of a command whose results could not all be recorded. */
#define FL_CLI_EXIT_UNRECORDED 3

/* After the runs: when rows could not be written into rec (fl_rec_lost),
 * says how many and why on stderr and returns -1; 0 otherwise (or no rec). */
int fl_cli_record_lost(const char *prog, struct fl_rec *rec);
/* The same to read it (runs, report): one that is not there is not made but
 * said, "PROG: no results database at PATH: ...". */
int fl_cli_open_db_to_read(const char *prog, const char *path, struct fl_rec **rec);

/* The variant of s that a run recorded as name ("default": none), into *v;
 * -1 when s has no such variant. */
int fl_cli_find_variant(const struct fl_scenario *s, const char *name, size_t *v);

#endif
