/*
 * test_cli_args.c: the command line refuses what it cannot use instead of
 * reading it as something else: signed, based or textual numbers (--repeat
 * -1 ran for ever, --limit abc was 20), options given to validate and list
 * (read as file names), arguments given to gc, and one-letter options that
 * --help does not show.
 */
#include "harness/tests/fl_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Numbers on the command line are decimal and unsigned: strtoull took "-1"
 * as 2^64-1 (--repeat -1 ran for ever) and "010" as eight; --limit took any
 * text as 20 (atoi). Each is refused before anything is created. */
FL_TEST(cli_args, number_options_refuse_signs_bases_and_text)
{
    static const char *const bad[] = {
        "run --repeat -1 x.yaml", "run --seed -1 x.yaml", "run --seed 0x10 x.yaml",
        "run --seed 010x x.yaml", "runs --limit abc",     "runs --limit 0",
        "runs --limit -5",
    };
    const char *d = fl_test_dir();
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *out;
        int rc = fl_test_sh(&out, "cd %s && %s %s 2>&1", d, fl_test_bin("faultline"), bad[i]);
        FL_ASSERT_MSG(rc == 2, "faultline %s: exit %d", bad[i], rc);
        FL_ASSERT_MSG(strstr(out, " wants a ") != NULL, "faultline %s: %s", bad[i], out);
        free(out);
    }
    FL_ASSERT_EQ(fl_test_sh(NULL, "test ! -e %s/out", d), 0);
}

/* validate and list take no options: an option is not taken for a file. */
FL_TEST(cli_args, validate_and_list_reject_unknown_options)
{
    char *out;
    int rc = fl_test_sh(&out, "%s validate --bogus 2>&1", fl_test_bin("faultline"));
    FL_ASSERT_EQ(rc, 2);
    FL_ASSERT_CONTAINS(out, "faultline validate: unknown option '--bogus'");
    free(out);
    rc = fl_test_sh(&out, "%s list -x 2>&1", fl_test_bin("faultline"));
    FL_ASSERT_EQ(rc, 2);
    FL_ASSERT_CONTAINS(out, "faultline list: unknown option '-x'");
    free(out);
    rc = fl_test_sh(&out, "%s gc --out %s/out stray 2>&1", fl_test_bin("faultline"), fl_test_dir());
    FL_ASSERT_EQ(rc, 2);
    FL_ASSERT_CONTAINS(out, "unexpected argument 'stray'");
    free(out);
}

/* Every option a command accepts is in its --help: the undocumented short
 * letters (run -v/-s/-r/-d/-o/-k/-j, runs -s/-S/-v/-V..., shell -S, gc -a/-n,
 * exec -o, some meaning different things in different commands) are gone. */
FL_TEST(cli_args, only_documented_short_options)
{
    static const char *const bad[] = {
        "run -v x s.yaml",   "run -k s.yaml", "runs -l 5",
        "shell -S s.yaml a", "gc -n",         "exec -o out r h true",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *out;
        int rc = fl_test_sh(&out, "cd %s && %s %s 2>&1", fl_test_dir(), fl_test_bin("faultline"),
                            bad[i]);
        FL_ASSERT_MSG(rc == 2, "faultline %s: exit %d", bad[i], rc);
        FL_ASSERT_MSG(strstr(out, "invalid option") != NULL, "faultline %s: %s", bad[i], out);
        /* getopt's message names the command as typed: "faultline run: ..." */
        char cmd[64];
        snprintf(cmd, sizeof cmd, "faultline %.*s: ", (int)strcspn(bad[i], " "), bad[i]);
        FL_ASSERT_MSG(strncmp(out, cmd, strlen(cmd)) == 0, "faultline %s: %s", bad[i], out);
        free(out);
    }
}

FL_TEST(cli_args, gc_has_no_db_option)
{
    char *out;
    int rc = fl_test_sh(&out, "%s gc --help", fl_test_bin("faultline"));
    FL_ASSERT_EQ(rc, 0);
    FL_ASSERT(strstr(out, "--db") == NULL);
    free(out);
    rc = fl_test_sh(&out, "%s gc --out %s/out --db x.db 2>&1", fl_test_bin("faultline"),
                    fl_test_dir());
    FL_ASSERT_EQ(rc, 2);
    free(out);
}

/* --variant over several files applies where its key exists; the other
 * files run all their variants; it is an error only when no file has it
 * (or for a value its key does not have).  One file without variants used
 * to make any --variant an error. */
FL_TEST_ROOT_T(cli_args, variant_applies_where_its_key_is, 60)
{
    fl_test_write("v.yaml", "name: it-v\nhosts: [a]\ncluster:\n  w: [a]\n"
                            "variants:\n  mode: [x, y]\nrun:\n  command: \"true\"\n");
    fl_test_write("p.yaml", "name: it-p\nhosts: [a]\ncluster:\n  w: [a]\n"
                            "run:\n  command: \"true\"\n");
    char *out;
    const char *d = fl_test_dir(), *fl = fl_test_bin("faultline");
    int rc =
        fl_test_sh(&out, "cd %s && %s run -q --no-db --variant mode=y v.yaml p.yaml 2>&1", d, fl);
    FL_ASSERT_MSG(rc == 0, "exit %d: %s", rc, out);
    FL_ASSERT_CONTAINS(out, "PASS  it-v mode=y");
    FL_ASSERT_CONTAINS(out, "PASS  it-p ");
    FL_ASSERT(!strstr(out, "mode=x"));
    FL_ASSERT_CONTAINS(out, "2 runs: 2 passed");
    free(out);
    rc = fl_test_sh(&out, "cd %s && %s run -q --no-db --variant disk=fresh v.yaml p.yaml 2>&1", d,
                    fl);
    FL_ASSERT_EQ(rc, 2);
    FL_ASSERT_CONTAINS(out, "--variant disk=fresh applies to none of the 2 files");
    free(out);
    rc = fl_test_sh(&out, "cd %s && %s run -q --no-db --variant mode=z v.yaml p.yaml 2>&1", d, fl);
    FL_ASSERT_EQ(rc, 2);
    FL_ASSERT_CONTAINS(out, "unknown value 'z' for variant key 'mode'");
    free(out);
}
