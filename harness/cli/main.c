/*
 * main.c: the faultline command line.  Finds the subcommand in the table
 * (commands.c), prints help, and hands the work to the command's own file
 * (run.c, validate.c, ...; see cli.h).  Exit status: 0 all runs passed /
 * command succeeded, 1 a run failed or errored, 2 bad usage or a bad
 * scenario file, 130 when interrupted.
 */
#include "harness/cli/cli.h"
#include "harness/sys/rootless.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static const char usage_head[] =
    "usage: faultline COMMAND [OPTIONS] ...\n"
    "\n"
    "Runs multi-host ps/worker scenarios on one machine: each host is a set of\n"
    "namespaces with its own address and disk; faults are injected from the\n"
    "scenario file; every outcome is recorded in SQLite.\n"
    "\n"
    "Commands:\n";

static const char usage_tail[] =
    "\n"
    "'faultline COMMAND --help' shows a command's options. Scenario format:\n"
    "scenarios/README.md. Results database schema: docs/schema.md.\n";

/* One line of the command list: the description from column 27, or two
 * spaces after a longer synopsis (which cannot line up with the rest). */
static void list_line(FILE *f, const char *name, const char *args, const char *about)
{
    char syn[128];
    snprintf(syn, sizeof syn, "%s%s%s", name, args ? " " : "", args ? args : "");
    fprintf(f, "  %-24s%s%s\n", syn, strlen(syn) <= 24 ? " " : "  ", about);
}

static void usage_main(FILE *f)
{
    fputs(usage_head, f);
    for (const struct fl_cli_command *c = fl_cli_commands; c->name; c++)
        if (c->about)
            list_line(f, c->name, c->args, c->about);
    list_line(f, "help", "[COMMAND]", "this text, or a command's options");
    list_line(f, "--version", NULL, "the version");
    fputs(usage_tail, f);
}

static const struct fl_cli_command *find_command(const char *name)
{
    for (const struct fl_cli_command *c = fl_cli_commands; c->name; c++)
        if (!strcmp(c->name, name))
            return c;
    return NULL;
}

/* `faultline help [CMD]`, `faultline --help`, `faultline CMD --help` */
static int help_for(const char *cmd)
{
    if (!cmd) {
        usage_main(stdout);
        return 0;
    }
    const struct fl_cli_command *c = find_command(cmd);
    if (!c || !c->usage) {
        fprintf(stderr, "faultline: no command '%s'; see 'faultline --help'\n", cmd);
        return 2;
    }
    fputs(c->usage, stdout);
    return 0;
}

/* --help or -h before any "--" */
static bool want_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--"))
            return false;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            return true;
    }
    return false;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage_main(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h"))
        return help_for(NULL);
    if (!strcmp(cmd, "help"))
        return help_for(argc > 2 ? argv[2] : NULL);
    if (!strcmp(cmd, "--version")) {
        printf("faultline 0.1\n");
        return 0;
    }
    const struct fl_cli_command *c = find_command(cmd);
    if (!(c && c->own_help) && want_help(argc - 1, argv + 1))
        return help_for(cmd);
    if (!c) {
        fprintf(stderr, "faultline: unknown command '%s'; see 'faultline --help'\n", cmd);
        return 2;
    }
    /* a user other than root: into a user namespace of its own first, while
     * the process has no thread (what reads or writes only files needs
     * none; gc looks at the machine's processes, as the user, and exec
     * joins the run's own user namespace) */
    static const char *const in_userns[] = {"run",    "shell",  "soak",
                                            "replay", "doctor", "_bench-hosts"};
    for (size_t i = 0; i < sizeof in_userns / sizeof *in_userns; i++) {
        char err[1024];
        if (!strcmp(cmd, in_userns[i]) && fl_rootless_enter(err, sizeof err) < 0) {
            fprintf(stderr, "faultline %s: %s\n", cmd, err);
            return 2;
        }
    }
    /* getopt names argv[0] in its messages: "faultline run: unrecognized
     * option '--bogus'", not "run: ..." */
    char prog[64];
    snprintf(prog, sizeof prog, "faultline %s", cmd);
    argv[1] = prog;
    return c->fn(argc - 1, argv + 1);
}
