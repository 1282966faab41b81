/*
 * soak.c: `faultline soak PROFILE`, the nightly loop.
 *
 * Until --iterations or --duration is used up (or an interrupt): draw the
 * iteration's schedule (soak/draw.c) from its seed, render it as a scenario
 * file's text, load that text with the ordinary loader and run it with the
 * ordinary engine and recorder (the iteration's seed is the run's seed, so
 * it is recorded with the run).  A run that does not pass is kept: the text
 * it ran goes to OUT/soak-failures/NAME-iI-sSEED.yaml, then faults are
 * dropped while the same failure (verdict and reason class) reproduces
 * (soak/min.c), each try a run of the same seed, and the smallest failing
 * schedule goes next to it as NAME-iI-sSEED.min.yaml.  A line per
 * iteration (its run, how many of its drawn faults were applied: the
 * engine's fates) and per minimizing run on stderr, and once a warning when
 * most draws came after the runs' end (soak/late.c); a summary on stdout.
 * Interrupts: the engine stops the run it is in; between runs
 * fl_engine_take_interrupt() is asked before each new run.
 */
#include "harness/base/rng.h"
#include "harness//load/load.h"
#include "harness/base/monoclock.h"
#include "harness/cli/common.h"
#include "harness/engine/engine.h"
#include "harness/record/recorder.h"
#include "harness/sys/rundir.h"
#include "harness/soak/soak.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

const char fl_soak_usage[] =
    "usage: faultline soak PROFILE [--duration D | --iterations N] [--seed N] [OPTIONS]\n"
    "\n"
    "Runs a soak profile (a scenario with a 'soak:' block; scenarios/README.md,\n"
    "'Soak profiles') again and again, each iteration with a fault schedule drawn\n"
    "from the soak's seed. Each run is recorded like any other (its seed too).\n"
    "A run that does not pass is kept as a replayable scenario file in\n"
    "OUT/soak-failures/ (NAME-iI-sSEED.yaml: the concrete faults with their 'at:'\n"
    "times, or 'after:' events for entries drawn at events, and the seed), then\n"
    "minimized: faults are dropped while the same failure (verdict and what\n"
    "failed) reproduces, and the smallest schedule is written next to it\n"
    "(NAME-iI-sSEED.min.yaml). 'faultline run FILE' replays one.\n"
    "Each iteration's line on stderr names its run and says how many of the\n"
    "faults drawn were applied ('2/3 faults applied': one was drawn after the\n"
    "run's end, or at an event the run had too few of); 'faultline runs RUN\n"
    "--faults' lists that run's schedule. When most draws of an iteration, or of\n"
    "the last 5 passing ones, never fired, a warning (once) says which profile\n"
    "line to change, with how long the runs lasted.\n"
    "\n"
    "  --duration D        start no iteration, nor a run minimizing a failure, after D\n"
    "                      (250ms, 30s, 10m, 2h; default 1h)\n"
    "  --iterations N      run N iterations (instead of --duration)\n"
    "  --seed N            the soak's seed (default random; printed, and in every file)\n"
    "  --shard K/N         run only the K-th of N disjoint parts of the soak: its\n"
    "                      iterations numbered K, K+N, K+2N, ... (each with the seed\n"
    "                      and schedule it has in the whole soak; with --iterations M,\n"
    "                      those up to M); needs --seed, the same for every shard\n"
    "  --variant K=V       the variant to soak, when the profile has several (repeatable)\n"
    "  --budget N          at most N runs to minimize one failure (default 24; 0: none)\n"
    "  --out DIR           run directories in DIR/runs, failures in DIR/soak-failures\n"
    "                      (default out)\n"
    "  --db PATH           results database (default OUT/faultline.db, OUT as --out)\n"
    "  --no-db             record nothing\n"
    "  -q, --quiet         no line per iteration\n"
    "\n"
    "Exit status: 0 when every iteration passed, 1 when any failed or errored,\n"
    "2 for a bad profile or option or a database that is damaged or cannot be\n"
    "written, 3 when results could not all be recorded (not with --no-db), 130\n"
    "when interrupted (cleanup still happens; the summary and the files kept so\n"
    "far are written).\n";

struct soak {
    struct fl_soak_profile *p;
    size_t variant;
    struct fl_engine_opts eo;
    const char *out;
    bool quiet;
    bool interrupted;
    int64_t deadline;  /* fl_mono_ms() from which no run starts (--duration); 0: none */
    const char *vname; /* the variant soaked, for the replay command */
    /* minimizing one failure */
    const struct fl_soak_schedule *sc;
    const char *min_path;
    char klass[256];
    int tries, budget;
};

static const char *hms(int64_t ms, char *buf, size_t len)
{
    int64_t s = ms / 1000;
    if (s >= 3600)
        snprintf(buf, len, "%" PRId64 "h%02" PRId64 "m%02" PRId64 "s", s / 3600, s / 60 % 60,
                 s % 60);
    else if (s >= 60)
        snprintf(buf, len, "%" PRId64 "m%02" PRId64 "s", s / 60, s % 60);
    else
        snprintf(buf, len, "%.1fs", (double)ms / 1000);
    return buf;
}

/* Runs the text as a scenario (named path in messages and {scenario_dir}). */
static int run_text(struct soak *k, const char *path, const char *text, uint64_t seed,
                    struct fl_engine_result *res)
{
    struct fl_scenario *s;
    char err[2048];
    memset(res, 0, sizeof *res);
    if (fl_scenario_load_mem(path, text, strlen(text), &s, err, sizeof err) < 0) {
        /* a drawn schedule the loader refuses is a bug of soak mode */
        snprintf(res->verdict, sizeof res->verdict, "error");
        snprintf(res->reason, sizeof res->reason, "soak: the drawn scenario does not load: %s",
                 err);
        return -EINVAL;
    }
    struct fl_engine_opts eo = k->eo;
    eo.seed = seed;
    eo.seed_set = true;
    fl_engine_run(s, k->variant, &eo, res);
    fl_scenario_free(s);
    if (res->interrupted)
        k->interrupted = true;
    return 0;
}

static int reproduces(void *ctx, const bool *keep)
{
    struct soak *k = ctx;
    if (k->interrupted || (k->interrupted = fl_engine_take_interrupt()))
        return -EINTR;
    if (k->deadline && fl_mono_ms() >= k->deadline)
        return -ETIME;
    char *text;
    if (fl_soak_render(k->p, k->sc, keep, NULL, &text) < 0)
        return -ENOMEM;
    struct fl_engine_result res;
    run_text(k, k->min_path, text, k->sc->seed, &res);
    free(text);
    if (k->interrupted)
        return -EINTR;
    char cls[256];
    fl_soak_failure_class(res.verdict, res.reason, cls, sizeof cls);
    size_t n = 0;
    for (size_t i = 0; i < k->sc->n; i++)
        n += keep[i];
    bool same = !strcmp(cls, k->klass);
    k->tries++;
    if (!k->quiet)
        fprintf(stderr, "  minimize try %d/%d: %zu fault%s: %s%s\n", k->tries, k->budget, n,
                n == 1 ? "" : "s", res.verdict, same ? " (same failure)" : "");
    return same;
}

/* "# " before every line of text, newlines inside a reason dropped */
static void comment(FILE *f, const char *label, const char *text)
{
    fprintf(f, "# %s", label);
    for (const char *s = text; *s; s++)
        fputc(*s == '\n' ? ' ' : *s, f);
    fputc('\n', f);
}

static char *header(const struct soak *k, uint64_t soak_seed, uint64_t iter,
                    const struct fl_engine_result *res, const char *file, const char *what)
{
    char *h = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&h, &len);
    if (!f)
        return NULL;
    fprintf(f, "# %s\n", what);
    fprintf(f, "# soaking %s with seed %" PRIu64 ", iteration %" PRIu64 " (run %s)\n", k->p->path,
            soak_seed, iter, res->run_id);
    comment(f, "verdict: ", res->verdict);
    comment(f, "reason: ", res->reason);
    fprintf(f, "# replay: faultline run %s", file);
    if (fl_scn_variant_count(k->p->base) > 1)
        fprintf(f, " --variant '%s'", k->vname);
    fputc('\n', f);
    fclose(f);
    return h;
}

static int write_text(const char *path, const char *text)
{
    int rc = fl_write_file(path, text, strlen(text));
    if (rc < 0)
        fprintf(stderr, "faultline soak: writing %s: %s\n", path, strerror(-rc));
    return rc;
}

/* A failed iteration: keep it, minimize it, keep the minimum.  True when
 * the failure needs no fault at all (the profile's baseline fails).  iter
 * counts from 1, as the console says it (file names and headers too). */
static bool keep_failure(struct soak *k, uint64_t soak_seed, uint64_t iter,
                         const struct fl_soak_schedule *sc, const struct fl_engine_result *res)
{
    char dir[PATH_MAX], path[PATH_MAX], min_path[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/soak-failures", k->out);
    snprintf(path, sizeof path, "%s/%s-i%" PRIu64 "-s%" PRIu64 ".yaml", dir, k->p->base->name, iter,
             sc->seed);
    snprintf(min_path, sizeof min_path, "%s/%s-i%" PRIu64 "-s%" PRIu64 ".min.yaml", dir,
             k->p->base->name, iter, sc->seed);
    char *h = header(k, soak_seed, iter, res, path, "a failure found by faultline soak");
    char *text = NULL;
    if (!h || fl_soak_render(k->p, sc, NULL, h, &text) < 0 || write_text(path, text) < 0) {
        free(h);
        free(text);
        return false;
    }
    free(h);
    free(text);
    printf("failure kept: %s (%zu fault%s)\n", path, sc->n, sc->n == 1 ? "" : "s");
    if (sc->n == 0)
        return true;
    if (k->budget <= 0)
        return false;
    bool *keep = malloc(sc->n);
    if (!keep)
        return false;
    memset(keep, 1, sc->n);
    k->sc = sc;
    k->min_path = min_path;
    k->tries = 0;
    fl_soak_failure_class(res->verdict, res->reason, k->klass, sizeof k->klass);
    if (!k->quiet)
        fprintf(stderr, "  minimizing %zu faults (failure: %s), at most %d runs\n", sc->n, k->klass,
                k->budget);
    int rc = fl_soak_minimize(sc->n, keep, k->budget, reproduces, k);
    if (rc == -ETIME && k->tries == 0) {
        printf("not minimized: the soak's --duration is up (the failure file holds its %zu "
               "fault%s)\n",
               sc->n, sc->n == 1 ? "" : "s");
        free(keep);
        return false;
    }
    size_t n = 0;
    for (size_t i = 0; i < sc->n; i++)
        n += keep[i];
    char what[256];
    snprintf(what, sizeof what,
             "minimized by faultline soak: %zu of %zu faults kept after %d "
             "runs%s",
             n, sc->n, k->tries,
             rc == -EINTR   ? " (interrupted)"
             : rc == -ETIME ? " (stopped: the soak's --duration was up)"
                            : "");
    if ((h = header(k, soak_seed, iter, res, min_path, what)) &&
        fl_soak_render(k->p, sc, keep, h, &text) == 0 && write_text(min_path, text) == 0)
        printf("minimized:    %s (%zu of %zu fault%s, %d run%s)\n", min_path, n, sc->n,
               sc->n == 1 ? "" : "s", k->tries, k->tries == 1 ? "" : "s");
    free(h);
    free(text);
    free(keep);
    return n == 0 && rc >= 0;
}

int fl_cli_soak(int argc, char **argv)
{
    struct soak k = {.out = "out", .budget = 24};
    const char *db = NULL, *variants[64];
    int nvariants = 0;
    bool no_db = false, seed_set = false, iters_set = false, dur_set = false;
    uint64_t seed = 0, iterations = 0, budget, shard_k = 1, shard_n = 1;
    int64_t duration_ms = 3600 * 1000;
    static const struct option opts[] = {{"duration", required_argument, 0, 'T'},
                                         {"iterations", required_argument, 0, 'n'},
                                         {"seed", required_argument, 0, 's'},
                                         {"variant", required_argument, 0, 'v'},
                                         {"budget", required_argument, 0, 'b'},
                                         {"out", required_argument, 0, 'o'},
                                         {"db", required_argument, 0, 'd'},
                                         {"no-db", no_argument, 0, 'D'},
                                         {"quiet", no_argument, 0, 'q'},
                                         {"shard", required_argument, 0, 'S'},
                                         {0, 0, 0, 0}};
    int ch;
    /* a line at a time: a nightly job sends stdout and stderr to one log,
     * where a block-buffered stdout came out after the stderr lines of the
     * minimizing that followed it */
    setvbuf(stdout, NULL, _IOLBF, 0);
    optind = 1;
    while ((ch = getopt_long(argc, argv, "q", opts, NULL)) != -1) {
        switch (ch) {
        case 'T':
            if (fl_scn_duration_parse(optarg, &duration_ms) < 0 || duration_ms <= 0) {
                fprintf(stderr,
                        "faultline soak: --duration wants a duration like 30s, 10m or 2h, "
                        "not '%s'\n",
                        optarg);
                return 2;
            }
            dur_set = true;
            break;
        case 'n':
            if (fl_cli_parse_count("faultline soak", "--iterations", optarg, &iterations) < 0)
                return 2;
            iters_set = true;
            break;
        case 's':
            if (fl_cli_parse_seed("faultline soak", optarg, &seed) < 0)
                return 2;
            seed_set = true;
            break;
        case 'v':
            if (nvariants == 64) {
                fprintf(stderr, "faultline soak: at most 64 --variant options\n");
                return 2;
            }
            variants[nvariants++] = optarg;
            break;
        case 'b':
            if (fl_cli_parse_u64("faultline soak", "--budget", optarg, &budget) < 0)
                return 2;
            k.budget = budget > 100000 ? 100000 : (int)budget;
            break;
        case 'o': k.out = optarg; break;
        case 'd': db = optarg; break;
        case 'D': no_db = true; break;
        case 'q': k.quiet = true; break;
        case 'S':
            if (fl_cli_parse_shard("faultline soak", optarg, &shard_k, &shard_n) < 0)
                return 2;
            break;
        default: fputs(fl_soak_usage, stderr); return 2;
        }
    }
    if (argc - optind != 1) {
        fputs(fl_soak_usage, stderr);
        return 2;
    }
    if (iters_set && dur_set) {
        fprintf(stderr, "faultline soak: give --duration or --iterations, not both\n");
        return 2;
    }
    if (shard_n > 1 && !seed_set) {
        fprintf(stderr, "faultline soak: --shard needs --seed, the same for every shard: the "
                        "shards split one soak's iterations, whose schedules come from it\n");
        return 2;
    }
    char err[2048];
    if (fl_soak_profile_load(argv[optind], &k.p, err, sizeof err) < 0) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    int ret = 2;
    struct fl_rec *rec = NULL;
    struct fl_scn_selector filter = {0};
    const struct fl_scenario *s = k.p->base;
    for (int i = 0; i < nvariants; i++)
        if (fl_scn_variant_filter_add(s, &filter, variants[i], err, sizeof err) < 0) {
            fprintf(stderr, "faultline soak: %s: %s\n", s->path, err);
            goto cleanup;
        }
    size_t nmatch = 0;
    char vname[FL_SCN_VARIANT_NAME_MAX] = "";
    for (size_t v = 0; v < fl_scn_variant_count(s); v++)
        if (!filter.n_terms || fl_scn_selector_match(s, &filter, v)) {
            if (!nmatch++)
                k.variant = v;
        }
    if (nmatch != 1) {
        fprintf(stderr,
                "faultline soak: %s: %zu variants match; a soak runs one (choose it "
                "with --variant K=V)\n",
                s->path, nmatch);
        goto cleanup;
    }
    fl_scn_variant_name(s, k.variant, vname, sizeof vname);
    k.vname = vname;
    char runs[PATH_MAX], fails[PATH_MAX];
    snprintf(runs, sizeof runs, "%s/runs", k.out);
    snprintf(fails, sizeof fails, "%s/soak-failures", k.out);
    int rc;
    /* as faultline run: an unusable --out is one usage error, not an error
     * per iteration (each kept as a failure and minimized, all night) */
    if (fl_cli_prepare_out(k.out) < 0)
        goto cleanup;
    if ((rc = fl_mkdir_p(runs, 0755)) < 0 || (rc = fl_mkdir_p(fails, 0755)) < 0) {
        fprintf(stderr,
                "faultline soak: cannot make %s and %s: %s (--out DIR picks another "
                "place)\n",
                runs, fails, strerror(-rc));
        goto cleanup;
    }
    if (fl_engine_global_init(err, sizeof err) < 0) {
        fprintf(stderr, "faultline soak: %s\n", err);
        ret = 1;
        goto cleanup;
    }
    char dbbuf[4096];
    if (!db)
        db = fl_cli_default_db(k.out, dbbuf, sizeof dbbuf);
    if (!no_db && fl_cli_open_db("faultline soak", db, &rec) < 0)
        goto cleanup;
    if (!seed_set && getrandom(&seed, sizeof seed, 0) != sizeof seed)
        seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    seed = fl_seed_of(seed);
    char bin[PATH_MAX], top[PATH_MAX], rev[64] = "";
    fl_cli_bin_dir(bin, sizeof bin);
    fl_cli_top_dir(top, sizeof top);
    if (fl_rec_git_revision(top, rev, sizeof rev) < 0)
        rev[0] = 0;
    k.eo = (struct fl_engine_opts){.out_dir = k.out,
                                   .bin_dir = bin,
                                   .rec = rec,
                                   .git_rev = rev[0] ? rev : NULL,
                                   .shell_host = -1};
    char t1[32], t2[32];
    if (iters_set)
        printf("soak %s (%s): seed %" PRIu64 ", %" PRIu64 " iteration%s\n", k.p->path, vname, seed,
               iterations, iterations == 1 ? "" : "s");
    else
        printf("soak %s (%s): seed %" PRIu64 ", for %s\n", k.p->path, vname, seed,
               hms(duration_ms, t1, sizeof t1));
    if (shard_n > 1)
        printf("shard %" PRIu64 "/%" PRIu64 ": iterations %" PRIu64 ", %" PRIu64
               ", ... of the whole soak\n",
               shard_k, shard_n, shard_k, shard_k + shard_n);
    fflush(stdout);

    int64_t t0 = fl_mono_ms();
    k.deadline = iters_set ? 0 : t0 + duration_ms;
    uint64_t iter = 0, passed = 0, failed = 0, kept = 0;
    bool baseline_fails = false;
    struct fl_soak_late *late = fl_soak_late_new(k.p);
    if (!late) {
        fprintf(stderr, "faultline soak: out of memory\n");
        ret = 1;
        goto cleanup;
    }
    for (;; iter++) {
        /* the iteration's number in the whole soak (--shard) */
        uint64_t g = shard_k - 1 + iter * shard_n;
        if (iters_set ? g >= iterations : fl_mono_ms() - t0 >= duration_ms)
            break;
        if ((k.interrupted = k.interrupted || fl_engine_take_interrupt()))
            break;
        struct fl_soak_schedule sc;
        char *text = NULL;
        if (fl_soak_draw(k.p, fl_soak_iter_seed(seed, g), &sc) < 0 ||
            fl_soak_render(k.p, &sc, NULL, NULL, &text) < 0) {
            fprintf(stderr, "faultline soak: out of memory\n");
            fl_soak_schedule_free(&sc);
            break;
        }
        struct fl_engine_result res;
        /* what became of each drawn fault: fired, or came after the end */
        struct fl_engine_fault_fate *fates = calloc(sc.n ? sc.n : 1, sizeof *fates);
        if (!fates) {
            fprintf(stderr, "faultline soak: out of memory\n");
            free(text);
            fl_soak_schedule_free(&sc);
            break;
        }
        k.eo.fates = fates;
        k.eo.n_fates = sc.n;
        run_text(&k, k.p->path, text, sc.seed, &res);
        k.eo.fates = NULL;
        k.eo.n_fates = 0;
        free(text);
        bool ok = !strcmp(res.verdict, "pass");
        if (!k.interrupted) {
            ok ? passed++ : failed++;
            /* applied: the drawn faults whose trigger came (the others were
             * drawn after the run's end, or their event never came) */
            size_t applied = 0;
            for (size_t i = 0; i < sc.n; i++)
                applied += fates[i].fired;
            if (!k.quiet)
                fprintf(stderr,
                        "soak: iteration %" PRIu64 " %s (seed %" PRIu64 ", run %s, %zu/%zu "
                        "fault%s applied, %.1fs); elapsed %s, %" PRIu64 " failure%s so far%s%s\n",
                        g + 1, res.verdict, sc.seed, res.run_id[0] ? res.run_id : "-", applied,
                        sc.n, sc.n == 1 ? "" : "s", (double)res.duration_ms / 1000,
                        hms(fl_mono_ms() - t0, t1, sizeof t1), failed, failed == 1 ? "" : "s",
                        ok ? "" : ": ", ok ? "" : res.reason);
            char *warn = NULL;
            if (ok && fl_soak_late_add(late, &sc, fates, res.duration_ms, g + 1, &warn) > 0) {
                fputs(warn, stderr);
                free(warn);
            }
            if (!ok) {
                kept++;
                if (keep_failure(&k, seed, g + 1, &sc, &res)) {
                    /* every iteration would fail and minimize to nothing */
                    printf("\nsoak %s: it fails with no fault at all (%s: %s), so every "
                           "iteration would fail the same way: stopping.  'faultline run %s%s%s' "
                           "runs it without faults (its baseline); make that pass first.\n",
                           k.p->path, res.verdict, res.reason, k.p->path,
                           fl_scn_variant_count(s) > 1 ? " --variant " : "",
                           fl_scn_variant_count(s) > 1 ? vname : "");
                    baseline_fails = true;
                }
            }
        }
        free(fates);
        fl_soak_schedule_free(&sc);
        if (!k.interrupted)
            k.interrupted = fl_engine_take_interrupt();
        if (k.interrupted) {
            iter++;
            break;
        }
        if (baseline_fails)
            break;
    }
    printf("\nsoak %s: %" PRIu64 " iteration%s in %s (seed %" PRIu64 "): %" PRIu64
           " passed, %" PRIu64 " failed%s\n",
           k.p->base->name, passed + failed, passed + failed == 1 ? "" : "s",
           hms(fl_mono_ms() - t0, t2, sizeof t2), seed, passed, failed,
           k.interrupted    ? "; interrupted"
           : baseline_fails ? "; stopped: it fails without faults"
                            : "");
    if (kept)
        printf("failures kept in %s\n", fails);
    ret = k.interrupted ? 130 : failed ? 1 : 0;
    if (ret != 130 && rec) {
        fl_rec_flush(rec);
        if (fl_cli_record_lost("faultline soak", rec) < 0)
            ret = FL_CLI_EXIT_UNRECORDED;
    }
    fl_soak_late_free(late);
cleanup:
    if (rec)
        fl_rec_close(rec);
    fl_scn_selector_free(&filter);
    fl_soak_profile_free(k.p);
    return ret;
}
