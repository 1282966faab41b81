/*
 * main.c: entry point of psrt, the ps/worker training runtime under test.
 * Dispatches subcommands (inspect, predict, bench) or, with --job_name,
 * runs a ps or worker task (see `psrt --help`).  Exit status: 0 done, 1 a
 * task failed (one line says what and where), 2 bad usage.
 */
#include "runtime/psrt/psrt.h"

#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

/* Defined by runtime/psrt/inspect.c (the checkpoint library's inspector).
 * Not weak: a weak reference would not pull inspect.o out of libpsrt.a. */
int psrt_inspect_main(int argc, char **argv);

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "inspect"))
        return psrt_inspect_main(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "predict"))
        return psrt_predict_main(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "bench")) {
        mallopt(M_MMAP_THRESHOLD, 1 << 30);
        mallopt(M_TRIM_THRESHOLD, 1 << 30);
        return psrt_bench_main(argc - 1, argv + 1);
    }
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h") || !strcmp(argv[i], "help")) {
            psrt_flags_usage(stdout);
            return 0;
        }
    if (argc == 1) {
        psrt_flags_usage(stderr);
        return 2;
    }
    struct psrt_flags f;
    char err[512];
    if (psrt_flags_parse(&f, argc, argv, err, sizeof err)) {
        fprintf(stderr, "psrt: %s\n", err);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    /* keep freed big buffers (snapshots, replies) for reuse: first touches of
     * fresh memory are what big saves and pulls would otherwise pay for */
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    psrt_log_init(f.job, f.task);
    psrt_fault_init();
    psrt_ev_open(f.job, f.task);
    int r = !strcmp(f.job, "ps") ? psrt_ps_main(&f) : psrt_worker_main(&f);
    psrt_ev_close();
    psrt_flags_free(&f);
    return r;
}
