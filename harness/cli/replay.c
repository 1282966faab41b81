/*
 * replay.c: `faultline replay RUN_ID`: runs a recorded run again and says
 * whether it came out the same.  The scenario is the text the database kept
 * of that run (scenario_texts), not whatever the file holds now, so a run
 * recorded by `run`, by `soak` (the iteration's rendered scenario) or by CI
 * in another checkout replays here; the variant and the seed are the
 * recorded ones.  "The same" is the verdict and the set of failed checks
 * (target and check name).  The replays are recorded like any run.
 */
#include "harness/cli/cli.h"
#include "harness/cli/common.h"
#include "harness/engine/engine.h"
#include "harness/load/load.h"
#include "harness/record/recorded.h"
#include "harness/record/recorder.h"
#include "harness/scenario/scenario.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char fl_cli_replay_usage[] =
    "usage: faultline replay RUN_ID... [--times N] [--db PATH] [--out DIR]\n"
    "                        [--scenario-dir DIR] [--keep] [-q]\n"
    "\n"
    "Runs each recorded run again: the scenario text the database kept of it (not\n"
    "the file as it is now; for a soak iteration, the scenario it drew), the\n"
    "same variant and the same seed.  Then says whether the verdict and the\n"
    "failed checks (target and check) are the same as recorded.  Works for runs\n"
    "recorded by run, soak or CI, in this checkout or another.\n"
    "\n"
    "  --times N    replay N times (default 1) and say how many came out the same\n"
    "  --db PATH    the database holding the run (default OUT/faultline.db); the\n"
    "               replays are recorded into it too\n"
    "  --out DIR    where run directories go (default out)\n"
    "  --scenario-dir DIR  the scenario's directory (files it names beside it)\n"
    "               is DIR; by default the recorded file's when it exists here,\n"
    "               else the same tail of it inside this checkout\n"
    "               (scenarios/seeds/... of another clone: ours)\n"
    "  --keep       keep each replay's directory (disks, logs) even when it passes\n"
    "  -q, --quiet  no progress line\n"
    "\n"
    "Exit status: 0 when every replay came out the same, 1 when any did not, 2 for\n"
    "a bad option, an unknown run (or one still running) or a run whose text the\n"
    "database does not hold\n"
    "(recorded before faultline kept it, and the file changed since), 3 when the\n"
    "replays could not all be recorded, 130 when interrupted.\n";

/* Where the scenario's directory is here: dir_opt (--scenario-dir) when
 * given; else the recorded file's, when its directory exists; else the
 * longest tail of it that exists below the checkout (another clone's
 * scenarios/seeds/x.yaml -> ours).  -1 after a message when none is. */
static int resolve_path(const char *recorded, const char *dir_opt, char *buf, size_t len)
{
    char top[PATH_MAX];
    struct stat st;
    const char *base = strrchr(recorded, '/');
    if (dir_opt) {
        snprintf(buf, len, "%s/%s", dir_opt, base ? base + 1 : recorded);
        return 0;
    }
    snprintf(buf, len, "%s", recorded);
    if (!base)
        return 0;
    char *slash = strrchr(buf, '/');
    *slash = 0;
    bool here = stat(buf, &st) == 0 && S_ISDIR(st.st_mode);
    *slash = '/';
    if (here)
        return 0;
    fl_cli_top_dir(top, sizeof top);
    for (const char *p = strchr(recorded + 1, '/'); p && p < base; p = strchr(p + 1, '/')) {
        char cand[PATH_MAX * 2];
        snprintf(cand, sizeof cand, "%s%s", top, p);
        char *cs = strrchr(cand, '/');
        *cs = 0;
        bool ok = stat(cand, &st) == 0 && S_ISDIR(st.st_mode);
        *cs = '/';
        if (ok) {
            snprintf(buf, len, "%s", cand);
            return 0;
        }
    }
    fprintf(stderr,
            "faultline replay: the scenario's directory (of %s) is not here, nor its tail under "
            "%s; the run exposes it to its hosts (files the scenario names beside it): "
            "--scenario-dir DIR names where it is now\n",
            recorded, top);
    return -1;
}

/* The scenario of the recorded run: its kept text, or (a run recorded
 * before texts were kept) the file, if it still hashes the same. */
static int load_recorded(const struct fl_rec_recorded *r, const char *dir_opt,
                         struct fl_scenario **s)
{
    char path[PATH_MAX], err[4096];
    if (resolve_path(r->scenario_file ? r->scenario_file : "replayed.yaml", dir_opt, path,
                     sizeof path) < 0)
        return -1;
    if (r->text) {
        if (fl_scenario_load_mem(path, r->text, r->text_len, s, err, sizeof err) < 0) {
            fprintf(stderr, "faultline replay: the recorded scenario of run %s does not load: %s\n",
                    r->run_id, err);
            return -1;
        }
        return 0;
    }
    if (fl_scenario_load(path, s, err, sizeof err) == 0 && r->hash && !strcmp((*s)->hash, r->hash))
        return 0;
    if (*s)
        fl_scenario_free(*s);
    *s = NULL;
    fprintf(stderr,
            "faultline replay: the database does not hold the text of run %s's scenario (it was "
            "recorded before faultline kept it), and %s %s; replay what it holds now with: "
            "faultline run %s --seed %" PRIu64 "\n",
            r->run_id, path, access(path, R_OK) ? "is not here" : "has changed since", path,
            r->seed);
    return -1;
}

static void upper(const char *v, char *buf, size_t len)
{
    size_t i = 0;
    for (; v && v[i] && i + 1 < len; i++)
        buf[i] = (char)(v[i] >= 'a' && v[i] <= 'z' ? v[i] - 32 : v[i]);
    buf[i] = 0;
}

static void print_failed(const char *label, char **failed, size_t n)
{
    printf("  %s", label);
    if (!n)
        printf(" none");
    for (size_t i = 0; i < n; i++)
        printf("%s %s", i ? "," : "", failed[i]);
    printf("\n");
}

static bool same_set(char **a, size_t na, char **b, size_t nb)
{
    if (na != nb)
        return false;
    for (size_t i = 0; i < na; i++)
        if (strcmp(a[i], b[i]))
            return false;
    return true;
}

struct replay {
    struct fl_rec *rec;
    struct fl_engine_opts eo;
    const char *out, *scenario_dir;
    uint64_t times;
    bool interrupted;
};

/* Replays one recorded run k->times; 0 all the same, 1 any different, 2
 * when it cannot be replayed (said). */
static int replay_one(struct replay *k, const char *run_id)
{
    char err[4096];
    struct fl_rec_recorded r;
    struct fl_scenario *s = NULL;
    size_t v = 0;
    int ret = 2;
    if (fl_rec_recorded_get(k->rec, run_id, &r, err, sizeof err) < 0) {
        fprintf(stderr, "faultline replay: %s\n", err);
        return 2;
    }
    if (!strcmp(r.verdict, "running")) {
        fprintf(stderr,
                "faultline replay: run %s has no verdict to compare with (it is still running, "
                "or its faultline was killed: 'faultline gc' marks those)\n",
                run_id);
        goto out;
    }
    if (load_recorded(&r, k->scenario_dir, &s) < 0)
        goto out;
    if (fl_cli_find_variant(s, r.variant, &v) < 0) {
        fprintf(stderr, "faultline replay: the recorded scenario of run %s has no variant '%s'\n",
                run_id, r.variant ? r.variant : "default");
        goto out;
    }
    if (fl_cli_check_workdir(s, k->out) < 0)
        goto out;
    k->eo.seed = r.seed;
    k->eo.seed_set = true;
    char vu[16];
    upper(r.verdict, vu, sizeof vu);
    printf("replaying run %s: %s %s, seed %" PRIu64 ", recorded at %s: %s\n", run_id, r.scenario,
           r.variant, r.seed, r.git_rev ? r.git_rev : "?", vu);
    print_failed("recorded failed checks:", r.failed, r.n_failed);
    uint64_t same = 0, done = 0;
    for (uint64_t i = 0; i < k->times && !k->interrupted; i++) {
        if ((k->interrupted = fl_engine_take_interrupt()))
            break;
        struct fl_engine_result res;
        fl_engine_run(s, v, &k->eo, &res);
        k->interrupted = res.interrupted;
        char **failed = NULL;
        size_t nf = 0;
        fl_rec_flush(k->rec);
        if (fl_rec_recorded_failed(k->rec, res.run_id, &failed, &nf, err, sizeof err) < 0)
            fprintf(stderr, "faultline replay: %s\n", err);
        bool eq = !strcmp(res.verdict, r.verdict) && same_set(failed, nf, r.failed, r.n_failed);
        char ru[16];
        upper(res.verdict, ru, sizeof ru);
        printf("replay %" PRIu64 "/%" PRIu64 ": %s%s%s, run %s: %s\n", i + 1, k->times, ru,
               res.reason[0] ? ": " : "", res.reason, res.run_id, eq ? "the same" : "DIFFERENT");
        if (!eq)
            print_failed("failed checks:", failed, nf);
        for (size_t f = 0; f < nf; f++)
            free(failed[f]);
        free(failed);
        done++;
        same += eq;
    }
    printf("%" PRIu64 " of %" PRIu64 " replay%s of %s came out the same (verdict %s, %zu failed "
           "check%s)\n",
           same, done, done == 1 ? "" : "s", run_id, vu, r.n_failed, r.n_failed == 1 ? "" : "s");
    ret = same == done && done ? 0 : 1;
out:
    if (s)
        fl_scenario_free(s);
    fl_rec_recorded_free(&r);
    return ret;
}

int fl_cli_replay(int argc, char **argv)
{
    struct replay k = {.times = 1};
    const char *db = NULL;
    bool keep = false, quiet = false;
    static const struct option opts[] = {{"times", required_argument, 0, 't'},
                                         {"db", required_argument, 0, 'd'},
                                         {"out", required_argument, 0, 'o'},
                                         {"keep", no_argument, 0, 'k'},
                                         {"quiet", no_argument, 0, 'q'},
                                         {"scenario-dir", required_argument, 0, 'S'},
                                         {0, 0, 0, 0}};
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "q", opts, NULL)) != -1) {
        switch (ch) {
        case 't':
            if (fl_cli_parse_count("faultline replay", "--times", optarg, &k.times) < 0)
                return 2;
            break;
        case 'd': db = optarg; break;
        case 'o': k.out = optarg; break;
        case 'k': keep = true; break;
        case 'q': quiet = true; break;
        case 'S': k.scenario_dir = optarg; break;
        default: fputs(fl_cli_replay_usage, stderr); return 2;
        }
    }
    if (optind >= argc) {
        fputs(fl_cli_replay_usage, stderr);
        return 2;
    }
    char dbbuf[4096], err[4096];
    if (!db)
        db = fl_cli_default_db(k.out, dbbuf, sizeof dbbuf);
    struct stat st;
    if (stat(db, &st) < 0) {
        fprintf(stderr,
                "faultline replay: no results database at %s: %s (--db PATH names the one "
                "holding the run)\n",
                db, strerror(errno));
        return 2;
    }
    if (fl_engine_global_init(err, sizeof err) < 0) {
        fprintf(stderr, "faultline replay: %s\n", err);
        return 1;
    }
    if (fl_cli_prepare_out(k.out) < 0 || fl_cli_open_db("faultline replay", db, &k.rec) < 0)
        return 2;
    char bin[PATH_MAX], top[PATH_MAX], rev[64] = "";
    fl_cli_bin_dir(bin, sizeof bin);
    fl_cli_top_dir(top, sizeof top);
    if (fl_rec_git_revision(top, rev, sizeof rev) < 0)
        rev[0] = 0;
    k.eo = (struct fl_engine_opts){.out_dir = k.out,
                                   .bin_dir = bin,
                                   .keep = keep,
                                   .rec = k.rec,
                                   .git_rev = rev[0] ? rev : NULL,
                                   .progress = !quiet && isatty(2),
                                   .shell_host = -1};
    int worst = 0, differ = 0, cannot = 0, n = 0;
    for (int i = optind; i < argc && !k.interrupted; i++) {
        int rc = replay_one(&k, argv[i]);
        worst = rc > worst ? rc : worst;
        differ += rc == 1;
        cannot += rc == 2;
        n++;
    }
    if (n > 1)
        printf("\n%d runs replayed: %d the same, %d different, %d could not be replayed\n", n,
               n - differ - cannot, differ, cannot);
    int ret = k.interrupted ? 130 : worst;
    fl_rec_flush(k.rec);
    if (ret != 130 && fl_cli_record_lost("faultline replay", k.rec) < 0)
        ret = FL_CLI_EXIT_UNRECORDED;
    fl_rec_close(k.rec);
    return ret;
}
