/*
 * main.c: the faultline command line (placeholder until the CLI lands).
 */
#include <stdio.h>

int main(void)
{
    fprintf(stderr, "faultline: not built yet\n");
    return 2;
}
