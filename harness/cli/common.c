/*
 * common.c: what several faultline commands share, so that no command file
 * calls another or main.c: where the faultline binary ({bin}) and its
 * checkout are, number options, the --out directory and the scenario's
 * workdir checked before anything runs, the scenario files named on the
 * command line, the --variant options and the results database of --db.
 */
#include "harness/base/rng.h"
#include "harness//load/load.h"
#include "harness/cli/common.h"
#include "harness/record/recorder.h"
#include "harness/scenario/scenario.h"
#include "harness/sys/rundir.h"

#include <errno.h>
#include <stdbool.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* Directory of this binary ({bin} in templates). */
void fl_cli_bin_dir(char *buf, size_t len)
{
    ssize_t n = readlink("/proc/self/exe", buf, len - 1);
    if (n <= 0) {
        snprintf(buf, len, ".");
        return;
    }
    buf[n] = 0;
    char *s = strrchr(buf, '/');
    if (s)
        *s = 0;
}

void fl_cli_top_dir(char *buf, size_t len)
{
    char bin[PATH_MAX];
    fl_cli_bin_dir(bin, sizeof bin);
    snprintf(buf, len, "%s/../..", bin); /* build/bin -> the checkout */
}

/* A decimal number 0..2^64-1, as a scenario's seed: no sign (strtoull would
 * take "-1" as 2^64-1), no base prefix ("010" is ten, not eight). */
int fl_cli_parse_u64(const char *prog, const char *opt, const char *s, uint64_t *v)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno || !(*s >= '0' && *s <= '9') || *end) {
        fprintf(stderr, "%s: %s wants a whole number 0..18446744073709551615, not '%s'\n", prog,
                opt, s);
        return -1;
    }
    *v = x;
    return 0;
}

int fl_cli_parse_seed(const char *prog, const char *s, uint64_t *v)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno || !(*s >= '0' && *s <= '9') || *end || x > FL_SEED_MAX) {
        fprintf(stderr,
                "%s: --seed wants a whole number 0..%llu (seeds are 63-bit: the database keeps "
                "them as printed), not '%s'\n",
                prog, (unsigned long long)FL_SEED_MAX, s);
        return -1;
    }
    *v = x;
    return 0;
}

int fl_cli_parse_count(const char *prog, const char *opt, const char *s, uint64_t *v)
{
    if (fl_cli_parse_u64(prog, opt, s, v) < 0)
        return -1;
    if (*v == 0) {
        fprintf(stderr, "%s: %s wants a number >= 1\n", prog, opt);
        return -1;
    }
    return 0;
}

int fl_cli_parse_shard(const char *prog, const char *s, uint64_t *k, uint64_t *n)
{
    char *end;
    errno = 0;
    unsigned long long a = strtoull(s, &end, 10), b = 0;
    bool ok = !errno && end != s && *end == '/' && s[0] >= '0' && s[0] <= '9';
    if (ok) {
        const char *t = end + 1;
        b = strtoull(t, &end, 10);
        ok = !errno && end != t && !*end && t[0] >= '0' && t[0] <= '9';
    }
    if (!ok || a < 1 || b < 1 || a > b || b > 100000) {
        fprintf(stderr,
                "%s: --shard wants K/N, the K-th of N parts (1 <= K <= N <= 100000), like "
                "--shard 2/4, not '%s'\n",
                prog, s);
        return -1;
    }
    *k = a;
    *n = b;
    return 0;
}

int fl_cli_parse_limit(const char *prog, const char *opt, const char *s, int *v)
{
    char *end;
    errno = 0;
    long l = strtol(s, &end, 10);
    if (errno || end == s || *end || l == 0 || l < -1 || l > INT_MAX) {
        fprintf(stderr, "%s: %s wants a number >= 1, or -1 for all, not '%s'\n", prog, opt, s);
        return -1;
    }
    *v = (int)l;
    return 0;
}

/* OUT/runs, where run directories go, made and checked before anything
 * runs: an unusable --out is one usage error, not an error per run (each
 * recorded, with a "logs of" line naming a directory that cannot exist). */
int fl_cli_prepare_out(const char *out)
{
    char runs[PATH_MAX], abs[PATH_MAX];
    struct stat st;
    out = out ? out : "out";
    snprintf(runs, sizeof runs, "%s/runs", out);
    bool had_out = stat(out, &st) == 0, had_runs = stat(runs, &st) == 0;
    int rc = fl_mkdir_p(runs, 0755);
    if (rc == 0) {
        if (stat(runs, &st) < 0)
            rc = -errno;
        else if (!S_ISDIR(st.st_mode))
            rc = -ENOTDIR;
        else if (access(runs, W_OK | X_OK) < 0)
            rc = -errno;
    }
    if (rc < 0) {
        fprintf(stderr,
                "faultline: cannot keep run directories in %s: %s (--out DIR picks "
                "another place)\n",
                runs, strerror(-rc));
        return -1;
    }
    /* Each run's event socket is <real path of OUT>/runs/<run id>/ev.sock,
     * and a unix socket path has at most sizeof sun_path - 1 bytes. */
    const char *real = realpath(runs, abs) ? abs : runs;
    size_t need = strlen(real) + strlen("/YYYYMMDD-HHMMSS-xxxxxx/ev.sock");
    size_t most = sizeof((struct sockaddr_un *)0)->sun_path - 1;
    if (need > most) {
        fprintf(stderr,
                "faultline: %s is too long a path for run directories: their event "
                "sockets would have %zu bytes, a unix socket at most %zu (--out DIR picks a "
                "shorter one)\n",
                real, need, most);
        if (!had_runs)
            rmdir(runs);
        if (!had_out)
            rmdir(out);
        return -1;
    }
    return 0;
}

/* Every file of every argument is tried, so that one run of validate
 * names every bad file. */
int fl_cli_load_scenarios(int argc, char **argv, struct fl_scenario ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    int bad = 0;
    char err[2048];
    for (int i = 0; i < argc; i++) {
        char **files;
        size_t nf;
        if (fl_scenario_list(argv[i], &files, &nf, err, sizeof err) < 0) {
            fprintf(stderr, "%s\n", err);
            bad++;
            continue;
        }
        if (nf == 0) {
            fprintf(stderr, "%s: no scenario files (*.yaml, *.yml) found\n", argv[i]);
            bad++;
        }
        for (size_t k = 0; k < nf; k++) {
            struct fl_scenario *s;
            if (fl_scenario_load(files[k], &s, err, sizeof err) < 0) {
                fprintf(stderr, "%s\n", err);
                bad++;
                continue;
            }
            *out = realloc(*out, (*n + 1) * sizeof **out);
            (*out)[(*n)++] = s;
        }
        fl_scenario_list_free(files, nf);
    }
    return bad;
}

void fl_cli_free_scenarios(struct fl_scenario **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        fl_scenario_free(v[i]);
    free(v);
}

int fl_cli_load_file_args(int argc, char **argv, const char *usage, struct fl_scenario ***v,
                          size_t *n)
{
    *v = NULL;
    *n = 0;
    /* "--bogus" is an unknown option, not a file; a first "--" ends options
     * (for a file named "-x") */
    int first = 1;
    if (argc > 1 && !strcmp(argv[1], "--"))
        first = 2;
    else
        for (int i = 1; i < argc; i++)
            if (argv[i][0] == '-' && argv[i][1]) {
                fprintf(stderr, "%s: unknown option '%s'\n", argv[0], argv[i]);
                fputs(usage, stderr);
                return -1;
            }
    if (argc <= first) {
        fputs(usage, stderr);
        return -1;
    }
    return fl_cli_load_scenarios(argc - first, argv + first, v, n);
}

/*
 * Each host's disk is mounted over the workdir, so inside a host everything
 * below it is the disk's.  Directories the hosts need from the machine
 * ({bin}, {scenario_dir}, the run directories with the event socket) must
 * not lie there ("/bin/sh: {bin}/fl-probe: not found", exit 127, was all a
 * run said).  Under /tmp they are safe: the harness binds them again.
 */
int fl_cli_check_workdir(const struct fl_scenario *s, const char *out)
{
    char bin[PATH_MAX], outp[PATH_MAX], cwd[PATH_MAX];
    fl_cli_bin_dir(bin, sizeof bin);
    out = out ? out : "out";
    if (!realpath(out, outp)) {
        if (out[0] != '/' && getcwd(cwd, sizeof cwd))
            snprintf(outp, sizeof outp, "%s/%s", cwd, out);
        else
            snprintf(outp, sizeof outp, "%s", out);
    }
    const char *paths[] = {bin, s->dir, outp};
    const char *what[] = {"faultline's programs ({bin})",
                          "the scenario's directory ({scenario_dir})",
                          "the run directories (--out)"};
    size_t wl = strlen(s->workdir);
    for (size_t i = 0; i < 3; i++)
        if (!strncmp(paths[i], s->workdir, wl) && (paths[i][wl] == '/' || !paths[i][wl])) {
            fprintf(stderr,
                    "faultline: %s: workdir %s would hide %s, %s, inside every host "
                    "(their disks are mounted there); choose a workdir outside it%s\n",
                    s->path, s->workdir, paths[i], what[i], i == 2 ? " or another --out" : "");
            return -1;
        }
    return 0;
}

int fl_cli_add_variant(struct fl_cli_opts *c, const char *v)
{
    if (c->nvariants == (int)(sizeof c->variants / sizeof c->variants[0])) {
        fprintf(stderr, "faultline: at most %d --variant options\n",
                (int)(sizeof c->variants / sizeof c->variants[0]));
        return -1;
    }
    c->variants[c->nvariants++] = v;
    return 0;
}

const char *fl_cli_default_db(const char *out, char *buf, size_t len)
{
    snprintf(buf, len, "%s/faultline.db", out ? out : "out");
    return buf;
}

static int open_db(const char *prog, const char *path, struct fl_rec **rec, bool read_only)
{
    char err[1024];
    struct fl_rec_opts o = {.read_only = read_only};
    if (fl_rec_open(rec, path ? path : "out/faultline.db", &o, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return -1;
    }
    return 0;
}

int fl_cli_open_db(const char *prog, const char *path, struct fl_rec **rec)
{
    return open_db(prog, path, rec, false);
}

int fl_cli_record_lost(const char *prog, struct fl_rec *rec)
{
    const char *why;
    size_t n = rec ? fl_rec_lost(rec, &why) : 0;
    if (!n)
        return 0;
    fprintf(stderr,
            "%s: %zu result row%s could not be recorded in %s (%s); the verdicts printed stand, "
            "the database lacks them (exit status %d)\n",
            prog, n, n == 1 ? "" : "s", fl_rec_path(rec), why, FL_CLI_EXIT_UNRECORDED);
    return -1;
}

/* Reading only: a mistyped --db (or no out/ here) is not a new database. */
int fl_cli_open_db_to_read(const char *prog, const char *path, struct fl_rec **rec)
{
    struct stat st;
    path = path ? path : "out/faultline.db";
    if (stat(path, &st) < 0) {
        int e = errno;
        fprintf(stderr,
                "%s: no results database at %s: %s ('faultline run' records there; "
                "--db PATH reads another)\n",
                prog, path, strerror(e));
        return -1;
    }
    return open_db(prog, path, rec, true);
}

int fl_cli_find_variant(const struct fl_scenario *s, const char *name, size_t *v)
{
    char buf[FL_SCN_VARIANT_NAME_MAX];
    size_t n = fl_scn_variant_count(s);
    for (size_t i = 0; i < n; i++) {
        const char *vn = s->n_dims ? fl_scn_variant_name(s, i, buf, sizeof buf) : "default";
        if (!strcmp(vn, name ? name : "default")) {
            *v = i;
            return 0;
        }
    }
    return -1;
}
