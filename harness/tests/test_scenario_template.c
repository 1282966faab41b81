/*
 * test_scenario_template.c: "{name}" templates: expansion with escapes and unknown
 * names, checking with exact offsets, listing placeholders, and the rule
 * that turns a command into /bin/sh -c argv (exec for simple commands).
 */
#include "harness/tests/fl_test.h"

#include "harness/scenario/template.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *lookup(void *ctx, const char *name, size_t len)
{
    static const char *const kv[][2] = {
        {"job", "ps"}, {"task", "1"}, {"ps_hosts", "a:1,b:2"}, {"empty", ""}, {"brace", "{x}"},
    };
    (void)ctx;
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
        if (strlen(kv[i][0]) == len && memcmp(kv[i][0], name, len) == 0)
            return kv[i][1];
    return NULL;
}

static bool known(void *ctx, const char *name, size_t len)
{
    return lookup(ctx, name, len) != NULL;
}

static void expand_ok(const char *t, const char *want)
{
    char *out = NULL, err[256] = "";
    int rc = fl_tmpl_expand(t, lookup, NULL, &out, err, sizeof err);
    FL_ASSERT_MSG(rc == 0, "%s: %s", t, err);
    FL_ASSERT_STREQ(out, want);
    free(out);
}

static void expand_err(const char *t, const char *want)
{
    char *out = (char *)"x", err[256] = "";
    FL_ASSERT_EQ(fl_tmpl_expand(t, lookup, NULL, &out, err, sizeof err), -EINVAL);
    FL_ASSERT(out == NULL);
    FL_ASSERT_STREQ(err, want);
}

FL_TEST(scenario_template, expand_placeholders_and_escapes)
{
    expand_ok("", "");
    expand_ok("plain text", "plain text");
    expand_ok("--job_name={job} --task_index={task}", "--job_name=ps --task_index=1");
    expand_ok("{job}{task}{job}", "ps1ps");
    expand_ok("{ps_hosts}", "a:1,b:2");
    expand_ok("[{empty}]", "[]");
    expand_ok("{{", "{");
    expand_ok("}}", "}");
    expand_ok("{{job}}", "{job}");
    expand_ok("awk '{{print $1}}'", "awk '{print $1}'");
    expand_ok("{{{job}}}", "{ps}");
    /* A value's braces are not expanded again. */
    expand_ok("{brace}", "{x}");
}

FL_TEST(scenario_template, expand_errors_name_placeholder_and_column)
{
    expand_err("a {nope} b", "column 3: unknown placeholder '{nope}'");
    expand_err("{job}{Job}", "column 6: unknown placeholder '{Job}'");
    expand_err("x {",
               "column 3: '{' does not start a placeholder (write '{{' for a literal brace)");
    expand_err("{}", "column 1: '{' does not start a placeholder (write '{{' for a literal brace)");
    expand_err("{a-b}",
               "column 1: '{' does not start a placeholder (write '{{' for a literal brace)");
    expand_err("{job",
               "column 1: '{' does not start a placeholder (write '{{' for a literal brace)");
    expand_err("{ job }",
               "column 1: '{' does not start a placeholder (write '{{' for a literal brace)");
    expand_err("ab}c", "column 3: unmatched '}' (write '}}' for a literal brace)");
    expand_err("{job}}", "column 6: unmatched '}' (write '}}' for a literal brace)");
}

FL_TEST(scenario_template, check_reports_offsets)
{
    size_t off = 99, len = 99;
    char err[256];

    FL_ASSERT_EQ(fl_tmpl_check("{job} {task}", known, NULL, &off, &len, err, sizeof err), 0);
    FL_ASSERT_EQ(fl_tmpl_check("x {job} {wat} y", known, NULL, &off, &len, err, sizeof err),
                 -EINVAL);
    FL_ASSERT_EQ(off, 8);
    FL_ASSERT_EQ(len, 5);
    FL_ASSERT_STREQ(err, "unknown placeholder '{wat}'");
    FL_ASSERT_EQ(fl_tmpl_check("{{ {", known, NULL, &off, &len, err, sizeof err), -EINVAL);
    FL_ASSERT_EQ(off, 3);
    FL_ASSERT_EQ(len, 1);
    FL_ASSERT_STREQ(err, "'{' does not start a placeholder (write '{{' for a literal brace)");
    FL_ASSERT_EQ(fl_tmpl_check("a}", known, NULL, &off, &len, err, sizeof err), -EINVAL);
    FL_ASSERT_EQ(off, 1);
    FL_ASSERT_STREQ(err, "unmatched '}' (write '}}' for a literal brace)");
    /* Syntax only. */
    FL_ASSERT_EQ(fl_tmpl_check("{anything} {{", NULL, NULL, NULL, NULL, NULL, 0), 0);
    FL_ASSERT_EQ(fl_tmpl_check("{", NULL, NULL, NULL, NULL, NULL, 0), -EINVAL);
}

struct names {
    char buf[256];
};

static int collect(void *ctx, const char *name, size_t len, size_t off)
{
    struct names *n = ctx;
    size_t used = strlen(n->buf);
    snprintf(n->buf + used, sizeof n->buf - used, "%.*s@%zu;", (int)len, name, off);
    return 0;
}

FL_TEST(scenario_template, foreach_lists_placeholders)
{
    struct names n = {""};
    FL_ASSERT_EQ(fl_tmpl_foreach("{a} {{b}} x{c_d}", collect, &n), 0);
    FL_ASSERT_STREQ(n.buf, "a@0;c_d@11;");
    FL_ASSERT_EQ(fl_tmpl_foreach("{a} {", collect, &n), -EINVAL);
}

FL_TEST(scenario_template, shell_simple_command_gets_exec)
{
    FL_ASSERT(fl_tmpl_is_simple_command("psrt --job_name=ps --task_index=0"));
    FL_ASSERT(fl_tmpl_is_simple_command("sh -c 'a; b | c'"));
    FL_ASSERT(fl_tmpl_is_simple_command("echo \"x;y\" a\\;b"));
    FL_ASSERT(fl_tmpl_is_simple_command("  sleep 1"));
    FL_ASSERT(!fl_tmpl_is_simple_command("a; b"));
    FL_ASSERT(!fl_tmpl_is_simple_command("a | b"));
    FL_ASSERT(!fl_tmpl_is_simple_command("a && b"));
    FL_ASSERT(!fl_tmpl_is_simple_command("a > out"));
    FL_ASSERT(!fl_tmpl_is_simple_command("echo $(date)"));
    FL_ASSERT(!fl_tmpl_is_simple_command("echo \"$(date)\""));
    FL_ASSERT(!fl_tmpl_is_simple_command("echo `date`"));
    FL_ASSERT(!fl_tmpl_is_simple_command("a\nb"));
    FL_ASSERT(!fl_tmpl_is_simple_command("FOO=1 prog"));
    FL_ASSERT(!fl_tmpl_is_simple_command("cd dir"));
    FL_ASSERT(!fl_tmpl_is_simple_command("if true; then :; fi"));
    FL_ASSERT(!fl_tmpl_is_simple_command("echo 'unterminated"));
    FL_ASSERT(!fl_tmpl_is_simple_command(""));

    char *argv[4], *script = NULL;
    FL_REQUIRE_EQ(fl_tmpl_shell_argv("sleep 1", argv, &script), 0);
    FL_ASSERT_STREQ(argv[0], "/bin/sh");
    FL_ASSERT_STREQ(argv[1], "-c");
    FL_ASSERT_STREQ(argv[2], "exec sleep 1");
    FL_ASSERT(argv[3] == NULL);
    free(script);
    FL_REQUIRE_EQ(fl_tmpl_shell_argv("a | b", argv, &script), 0);
    FL_ASSERT_STREQ(argv[2], "a | b");
    free(script);
}

/* With exec, the program replaces the shell: its parent is whoever forked. */
FL_TEST(scenario_template, shell_exec_makes_program_the_process)
{
    char *argv[4], *script = NULL;
    int fds[2];
    FL_REQUIRE_EQ(fl_tmpl_shell_argv("sh -c 'echo $PPID'", argv, &script), 0);
    FL_REQUIRE_EQ(pipe(fds), 0);
    pid_t pid = fork();
    FL_REQUIRE(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execv(argv[0], argv);
        _exit(127);
    }
    close(fds[1]);
    char buf[64] = "";
    ssize_t n = read(fds[0], buf, sizeof buf - 1);
    close(fds[0]);
    int st;
    waitpid(pid, &st, 0);
    free(script);
    FL_REQUIRE(n > 0);
    FL_ASSERT_EQ(atol(buf), (long)getpid());
    FL_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}
