/*
 * test_scenario_util.c: the scenario API that reads no YAML
 * (harness/scenario/util.c): variants (count, names, the default), selectors
 * and --variant filters, expansion of a task's placeholders, listing
 * scenario files, the file hash, and the duration/size/signal syntax.
 */
#include "harness/tests/fl_test.h"

#include "harness/tests/scenario_fixture.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>

static struct fl_scenario *load_variants3(void)
{
    char err[512];
    struct fl_scenario *s = NULL;
    int rc = load_str("name: t\nhosts: [a]\ncluster: {x: [a]}\nrun: {command: 'true'}\n"
                      "variants:\n  protocol: [legacy, robust]\n  threads: [pool, per_request]\n"
                      "  size: [s, m, l]\n",
                      &s, err, sizeof err);
    FL_REQUIRE_MSG(rc == 0, "%s", err);
    return s;
}

FL_TEST(scenario_util, variant_count_and_names)
{
    struct fl_scenario *s = load_variants3();
    char b[128];
    FL_ASSERT_EQ(fl_scn_variant_count(s), 12);
    FL_ASSERT_STREQ(fl_scn_variant_name(s, 0, b, sizeof b), "protocol=legacy,threads=pool,size=s");
    FL_ASSERT_STREQ(fl_scn_variant_name(s, 1, b, sizeof b), "protocol=legacy,threads=pool,size=m");
    FL_ASSERT_STREQ(fl_scn_variant_name(s, 3, b, sizeof b),
                    "protocol=legacy,threads=per_request,size=s");
    FL_ASSERT_STREQ(fl_scn_variant_name(s, 11, b, sizeof b),
                    "protocol=robust,threads=per_request,size=l");
    FL_ASSERT_EQ(fl_scn_variant_value(s, 7, 0), 1);
    FL_ASSERT_EQ(fl_scn_variant_value(s, 7, 1), 0);
    FL_ASSERT_EQ(fl_scn_variant_value(s, 7, 2), 1);
    FL_ASSERT_STREQ(fl_scn_variant_lookup(s, 7, "threads"), "pool");
    FL_ASSERT(fl_scn_variant_lookup(s, 7, "nope") == NULL);
    /* Every name is distinct. */
    for (size_t i = 0; i < 12; i++)
        for (size_t j = i + 1; j < 12; j++) {
            char a[128], c[128];
            FL_ASSERT(strcmp(fl_scn_variant_name(s, i, a, sizeof a),
                             fl_scn_variant_name(s, j, c, sizeof c)) != 0);
        }
    /* Truncation never overflows. */
    char tiny[8];
    fl_scn_variant_name(s, 11, tiny, sizeof tiny);
    FL_ASSERT_EQ(strlen(tiny), 7);
    fl_scenario_free(s);
}

static size_t count_matches(const struct fl_scenario *s, const struct fl_scn_selector *sel)
{
    size_t n = 0;
    for (size_t v = 0; v < fl_scn_variant_count(s); v++)
        n += fl_scn_selector_match(s, sel, v);
    return n;
}

FL_TEST(scenario_util, selector_parse_and_match)
{
    struct fl_scenario *s = load_variants3();
    struct fl_scn_selector sel;
    char err[512];

    FL_REQUIRE_EQ(fl_scn_selector_parse(s, "all", &sel, err, sizeof err), 0);
    FL_ASSERT_EQ(count_matches(s, &sel), 12);
    fl_scn_selector_free(&sel);
    FL_REQUIRE_EQ(fl_scn_selector_parse(s, "robust", &sel, err, sizeof err), 0);
    FL_ASSERT_EQ(count_matches(s, &sel), 6);
    FL_ASSERT(!fl_scn_selector_match(s, &sel, 0));
    FL_ASSERT(fl_scn_selector_match(s, &sel, 6));
    fl_scn_selector_free(&sel);
    FL_REQUIRE_EQ(fl_scn_selector_parse(s, "protocol=robust,size=m", &sel, err, sizeof err), 0);
    FL_ASSERT_EQ(count_matches(s, &sel), 2);
    FL_ASSERT(fl_scn_selector_match(s, &sel, 7));
    FL_ASSERT(fl_scn_selector_match(s, &sel, 10));
    fl_scn_selector_free(&sel);
    FL_REQUIRE_EQ(fl_scn_selector_parse(s, "per_request, size=l", &sel, err, sizeof err), 0);
    FL_ASSERT_EQ(count_matches(s, &sel), 2);
    fl_scn_selector_free(&sel);

    FL_ASSERT_EQ(fl_scn_selector_parse(s, "protocol=legasy", &sel, err, sizeof err), -EINVAL);
    FL_ASSERT_STREQ(err,
                    "unknown value 'legasy' for variant key 'protocol' (did you mean 'legacy'?)");
    FL_ASSERT_EQ(fl_scn_selector_parse(s, "protocol=zzzzzz", &sel, err, sizeof err), -EINVAL);
    FL_ASSERT_STREQ(err,
                    "unknown value 'zzzzzz' for variant key 'protocol' (values: legacy, robust)");
    FL_ASSERT_EQ(fl_scn_selector_parse(s, "thread=pool", &sel, err, sizeof err), -ENOENT);
    FL_ASSERT_STREQ(err, "unknown variant key 'thread' (did you mean 'threads'?)");
    /* not in this file (a key or bare value no dimension has): -ENOENT, as
     * `run --variant` over several files skips such a file */
    FL_ASSERT_EQ(fl_scn_selector_parse(s, "robst", &sel, err, sizeof err), -ENOENT);
    FL_ASSERT_STREQ(err, "'robst' is not a value of any variant key (did you mean 'robust'?)");
    FL_ASSERT_EQ(fl_scn_selector_parse(s, "size=s,size=m", &sel, err, sizeof err), -EINVAL);
    FL_ASSERT_STREQ(err, "variant selector 'size=s,size=m' names 'size' twice");
    FL_ASSERT_EQ(fl_scn_selector_parse(s, "size=", &sel, err, sizeof err), -EINVAL);
    FL_ASSERT_STREQ(err, "bad variant selector 'size=' (expected key=value[,key=value])");
    FL_ASSERT_EQ(fl_scn_selector_parse(s, "legacy,,robust", &sel, err, sizeof err), -EINVAL);
    FL_ASSERT_CONTAINS(err, "empty term");
    fl_scenario_free(s);
}

FL_TEST(scenario_util, variant_filter_combines_options)
{
    struct fl_scenario *s = load_variants3();
    struct fl_scn_selector f = {0};
    char err[512];

    FL_REQUIRE_EQ(fl_scn_variant_filter_add(s, &f, "size=s", err, sizeof err), 0);
    FL_ASSERT_EQ(count_matches(s, &f), 4);
    /* Same key again: either value. */
    FL_REQUIRE_EQ(fl_scn_variant_filter_add(s, &f, "size=l", err, sizeof err), 0);
    FL_ASSERT_EQ(count_matches(s, &f), 8);
    /* Another key: both must hold. */
    FL_REQUIRE_EQ(fl_scn_variant_filter_add(s, &f, "protocol=legacy", err, sizeof err), 0);
    FL_ASSERT_EQ(count_matches(s, &f), 4);
    FL_ASSERT_STREQ(f.text, "size=s size=l protocol=legacy");
    FL_ASSERT_EQ(fl_scn_variant_filter_add(s, &f, "protocol=legasy", err, sizeof err), -EINVAL);
    FL_ASSERT_STREQ(err, "--variant protocol=legasy: unknown value 'legasy' for variant key "
                         "'protocol' (did you mean 'legacy'?)");
    FL_ASSERT_EQ(fl_scn_variant_filter_add(s, &f, "protcol=legacy", err, sizeof err), -ENOENT);
    FL_ASSERT_STREQ(
        err, "--variant protcol=legacy: unknown variant key 'protcol' (did you mean 'protocol'?)");
    FL_ASSERT_EQ(count_matches(s, &f), 4); /* failed adds change nothing */
    fl_scn_selector_free(&f);
    fl_scenario_free(s);
}

FL_TEST(scenario_util, variant_none_is_default)
{
    char err[512];
    struct fl_scenario *s = NULL;
    struct fl_scn_selector sel;
    FL_REQUIRE_EQ(load_str("name: t\nhosts: [a]\ncluster: {x: [a]}\nrun: {command: 'true'}\n"
                           "expect:\n  default: {all: {exit: 0}}\n",
                           &s, err, sizeof err),
                  0);
    FL_ASSERT_EQ(fl_scn_variant_count(s), 1);
    FL_ASSERT(fl_scn_selector_match(s, &s->expects[0].sel, 0));
    FL_ASSERT_EQ(fl_scn_selector_parse(s, "legacy", &sel, err, sizeof err), -ENOENT);
    FL_ASSERT_STREQ(err, "variant selector 'legacy' but the scenario has no variants (use 'all')");
    struct fl_scn_selector f = {0};
    FL_ASSERT_EQ(fl_scn_variant_filter_add(s, &f, "protocol=legacy", err, sizeof err), -ENOENT);
    fl_scn_selector_free(&f);
    fl_scenario_free(s);
}

FL_TEST(scenario_util, expand_task_placeholders)
{
    struct fl_scenario *s = load_valid("full.yaml");
    const char *addrs[] = {"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"};
    struct fl_scn_run_ctx ctx = {
        .run_id = "r42", .seed = 7, .bin = "/opt/fl/bin", .host_addrs = addrs};
    char *out = NULL, err[512];

    /* worker:2 on w0 (second task there), variant 4 = robust/per_request. */
    FL_REQUIRE_EQ(fl_scn_expand(s, 4, 4, &ctx, s->jobs[1].command, &out, err, sizeof err), 0);
    FL_ASSERT_STREQ(
        out, "sh -c 'echo worker:2'   --ps=ps0:3000,ps1:3000 "
             "--workers=w0:3000,w1:3000,w0:3001 --n=3   --proto=robust --threads=per_request");
    free(out);
    FL_REQUIRE_EQ(
        fl_scn_expand(
            s, 4, 4, &ctx,
            "{job} {task} {host} {addr} {port} {chief} {run_id} {seed} {workdir} {bin} {ps_count}",
            &out, err, sizeof err),
        0);
    FL_ASSERT_STREQ(out, "worker 2 w0 10.0.0.3 3001 0 r42 7 /srv/work /opt/fl/bin 2");
    free(out);
    FL_REQUIRE_EQ(fl_scn_expand(s, 2, 0, &ctx, "{chief}{{x}}{scenario_dir}", &out, err, sizeof err),
                  0);
    char want[4200];
    snprintf(want, sizeof want, "1{x}%s", s->dir);
    FL_ASSERT_STREQ(out, want);
    free(out);
    FL_ASSERT_EQ(fl_scn_expand(s, 0, 0, &ctx, "a {nope}", &out, err, sizeof err), -EINVAL);
    FL_ASSERT_STREQ(err, "column 3: unknown placeholder '{nope}'");
    FL_ASSERT(out == NULL);
    FL_ASSERT_EQ(fl_scn_expand(s, 9, 0, &ctx, "x", &out, err, sizeof err), -EINVAL);
    /* Without a context: empty run-time values, the scenario's seed. */
    FL_REQUIRE_EQ(fl_scn_expand(s, 0, 0, NULL, "[{run_id}][{addr}][{seed}]", &out, err, sizeof err),
                  0);
    FL_ASSERT_STREQ(out, "[][][42]");
    free(out);
    fl_scenario_free(s);
}

FL_TEST(scenario_util, list_recurses_sorted_yaml_only)
{
    const char *d = fl_test_dir();
    char **list = NULL, err[512];
    size_t n = 0;
    FL_REQUIRE_EQ(fl_test_sh(NULL,
                             "cd %s && mkdir -p b/c a .hidden && touch z.yaml a/y.yml b/c/x.yaml "
                             "b/readme.md .hidden/h.yaml b/c/w.yaml.bak",
                             d),
                  0);
    FL_REQUIRE_EQ(fl_scenario_list(d, &list, &n, err, sizeof err), 0);
    FL_REQUIRE_EQ(n, 3);
    char want[3][4200];
    snprintf(want[0], sizeof want[0], "%s/a/y.yml", d);
    snprintf(want[1], sizeof want[1], "%s/b/c/x.yaml", d);
    snprintf(want[2], sizeof want[2], "%s/z.yaml", d);
    for (int i = 0; i < 3; i++)
        FL_ASSERT_STREQ(list[i], want[i]);
    fl_scenario_list_free(list, n);
    /* A file is itself, whatever its name. */
    char f[4200];
    snprintf(f, sizeof f, "%s/b/readme.md", d);
    FL_REQUIRE_EQ(fl_scenario_list(f, &list, &n, err, sizeof err), 0);
    FL_REQUIRE_EQ(n, 1);
    FL_ASSERT_STREQ(list[0], f);
    fl_scenario_list_free(list, n);
    snprintf(f, sizeof f, "%s/missing", d);
    FL_ASSERT_EQ(fl_scenario_list(f, &list, &n, err, sizeof err), -ENOENT);
}

FL_TEST(scenario_util, hash_is_fnv1a_of_file_bytes)
{
    char err[512];
    struct fl_scenario *a = NULL, *b = NULL;
    const char *t1 = "name: t\nhosts: [a]\ncluster: {x: [a]}\nrun: {command: 'true'}\n";
    const char *t2 = "name: t\nhosts: [a]\ncluster: {x: [a]}\nrun: {command: 'true'} \n";
    FL_REQUIRE_EQ(load_str(t1, &a, err, sizeof err), 0);
    FL_REQUIRE_EQ(load_str(t2, &b, err, sizeof err), 0);
    FL_ASSERT(strcmp(a->hash, b->hash) != 0);
    /* FNV-1a 64 reference value computed independently. */
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *p = t1; *p; p++) {
        h ^= (unsigned char)*p;
        h *= 0x100000001b3ull;
    }
    char want[17];
    snprintf(want, sizeof want, "%016" PRIx64, h);
    FL_ASSERT_STREQ(a->hash, want);
    fl_scenario_free(a);
    fl_scenario_free(b);
}

FL_TEST(scenario_util, duration_size_signal_syntax)
{
    int64_t ms;
    uint64_t b;
    FL_ASSERT_EQ(fl_scn_duration_parse("250ms", &ms), 0);
    FL_ASSERT_EQ(ms, 250);
    FL_ASSERT_EQ(fl_scn_duration_parse("2s", &ms), 0);
    FL_ASSERT_EQ(ms, 2000);
    FL_ASSERT_EQ(fl_scn_duration_parse("1.5s", &ms), 0);
    FL_ASSERT_EQ(ms, 1500);
    FL_ASSERT_EQ(fl_scn_duration_parse("1m", &ms), 0);
    FL_ASSERT_EQ(ms, 60000);
    FL_ASSERT_EQ(fl_scn_duration_parse("2h", &ms), 0);
    FL_ASSERT_EQ(ms, 7200000);
    FL_ASSERT_EQ(fl_scn_duration_parse("3", &ms), 0);
    FL_ASSERT_EQ(ms, 3000);
    FL_ASSERT_EQ(fl_scn_duration_parse("0.001", &ms), 0);
    FL_ASSERT_EQ(ms, 1);
    FL_ASSERT_EQ(fl_scn_duration_parse("1.5ms", &ms), -EINVAL);
    FL_ASSERT_EQ(fl_scn_duration_parse("-1s", &ms), -EINVAL);
    FL_ASSERT_EQ(fl_scn_duration_parse("1 s", &ms), -EINVAL);
    FL_ASSERT_EQ(fl_scn_duration_parse("s", &ms), -EINVAL);
    FL_ASSERT_EQ(fl_scn_duration_parse("1.s", &ms), -EINVAL);
    FL_ASSERT_EQ(fl_scn_duration_parse("", &ms), -EINVAL);
    FL_ASSERT_EQ(fl_scn_duration_parse("99999999999999h", &ms), -ERANGE);

    FL_ASSERT_EQ(fl_scn_size_parse("4096", &b), 0);
    FL_ASSERT_EQ(b, 4096);
    FL_ASSERT_EQ(fl_scn_size_parse("512K", &b), 0);
    FL_ASSERT_EQ(b, 512 * 1024);
    FL_ASSERT_EQ(fl_scn_size_parse("64M", &b), 0);
    FL_ASSERT_EQ(b, 64ull << 20);
    FL_ASSERT_EQ(fl_scn_size_parse("1G", &b), 0);
    FL_ASSERT_EQ(b, 1ull << 30);
    FL_ASSERT_EQ(fl_scn_size_parse("1.5G", &b), 0);
    FL_ASSERT_EQ(b, 3ull << 29);
    FL_ASSERT_EQ(fl_scn_size_parse("64MiB", &b), 0);
    FL_ASSERT_EQ(b, 64ull << 20);
    FL_ASSERT_EQ(fl_scn_size_parse("2mb", &b), 0);
    FL_ASSERT_EQ(b, 2ull << 20);
    FL_ASSERT_EQ(fl_scn_size_parse("64Q", &b), -EINVAL);
    FL_ASSERT_EQ(fl_scn_size_parse("M", &b), -EINVAL);
    FL_ASSERT_EQ(fl_scn_size_parse("1.5", &b), -EINVAL);

    FL_ASSERT_EQ(fl_scn_signal_parse("SIGTERM"), SIGTERM);
    FL_ASSERT_EQ(fl_scn_signal_parse("term"), SIGTERM);
    FL_ASSERT_EQ(fl_scn_signal_parse("9"), 9);
    FL_ASSERT_EQ(fl_scn_signal_parse("SIGFOO"), -EINVAL);
    FL_ASSERT_EQ(fl_scn_signal_parse("0"), -EINVAL);
    FL_ASSERT_STREQ(fl_scn_signal_name(SIGSEGV), "SIGSEGV");
    FL_ASSERT_STREQ(fl_scn_action_kind_name(FL_SCN_ACT_CRASH_HOST), "crash_host");
    FL_ASSERT_STREQ(fl_scn_trigger_kind_name(FL_SCN_TRIG_LOG), "on_log");
}
