/*
 * bench.c: `psrt bench ...`, the drivers behind bench/psrt.sh (filled in
 * below as the benchmarks land).
 */
#include "runtime/psrt/psrt.h"

int psrt_bench_main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "psrt bench: no benchmark named\n");
    return 2;
}
