/*
 * main.c: entry point of psrt, the ps/worker training runtime under test.
 * Dispatches subcommands; the training runtime itself lands with issue 4.
 */
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: psrt SUBCOMMAND ...\n");
        return 0;
    }
    fprintf(stderr, "psrt: not built yet\n");
    return 2;
}
