/*
 * main.c: entry point of psrt, the ps/worker training runtime under test.
 * A small dispatcher: each subcommand lives in its own file as
 * psrt_<name>_main(argc, argv) with argv[0] = the subcommand name.
 * The training runtime itself lands with issue 4.
 */
#include <stdio.h>
#include <string.h>

int psrt_inspect_main(int argc, char **argv);

static const struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
} cmds[] = {
    {"inspect", psrt_inspect_main, "list, print or verify a TensorFlow checkpoint"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: psrt SUBCOMMAND ...\n\nsubcommands:\n");
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        fprintf(f, "  %-10s %s\n", cmds[i].name, cmds[i].help);
    fprintf(f, "\n`psrt SUBCOMMAND --help` describes one.\n");
}

int main(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage(stdout);
        return 0;
    }
    if (argc > 1) {
        for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
            if (!strcmp(argv[1], cmds[i].name))
                return cmds[i].fn(argc - 1, argv + 1);
        fprintf(stderr, "psrt: unknown subcommand '%s'\n", argv[1]);
    }
    usage(stderr);
    return 2;
}
