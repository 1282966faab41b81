/*
 * fuzz_frame.h: what the RPC fuzz target (fuzz_frame.c) and its seed
 * generator (gen_frame_seeds.c) share: the meaning of an input's first
 * byte, and the command lines of the ps tasks and the worker the target
 * runs (the seeds' replies come from a ps set up the same way, so that a
 * worker's Ping finds the layout it expects).
 */
#ifndef FUZZ_FRAME_H
#define FUZZ_FRAME_H

#include "runtime/psrt/psrt.h"

#include <stdlib.h>
#include <string.h>

/* An input: one byte of these bits, then the bytes a peer sends. */
#define FZ_CLIENT 1u   /* replies read by a worker (else requests served by a ps) */
#define FZ_FIX_CRC 2u  /* the target first makes every crc right (see fix_crcs) */
#define FZ_OTHER 4u    /* server: ps B instead of A; client: no Ping first */
#define FZ_NOT_OPEN 8u /* server: the ps initialized but not open (pulls refused) */

/* ps A: sparse rows and Adam's slots and powers, 4 steps to train (the
 * seeds' chief run is short); ps B: dense only.  "%s":
 * the train_dir (fuzz_frame gives one under /proc, where nothing can be
 * made: it keeps requests that would write away from the ps). */
#define FZ_PS_A                                                                       \
    "--job_name=ps --task_index=0 --ps_hosts=127.0.0.1:1 --worker_hosts=127.0.0.1:2 " \
    "--model=sparse_lr --sparse_features=1000 --optimizer=adam --rpc_threads=pool "   \
    "--pool_threads=1 --max_steps=4 --train_dir=%s"
#define FZ_PS_B                                                                       \
    "--job_name=ps --task_index=0 --ps_hosts=127.0.0.1:1 --worker_hosts=127.0.0.1:2 " \
    "--model=linear --optimizer=adagrad --rpc_threads=pool --pool_threads=1 --train_dir=%s"
/* The worker, of ps A's model; "%d": the port of the target's fake ps. */
#define FZ_WORKER                                                                          \
    "--job_name=worker --task_index=0 --ps_hosts=127.0.0.1:%d --worker_hosts=127.0.0.1:2 " \
    "--model=sparse_lr --sparse_features=1000 --optimizer=adam --rpc_threads=pool "        \
    "--train_dir=%s"

/* Parses a space-separated command line (after "psrt") into f; 0 or -EINVAL
 * with the reason in err. */
static inline int fz_flags(const char *line, struct psrt_flags *f, char *err, size_t errlen)
{
    char *copy = strdup(line), *argv[32];
    int argc = 0;
    argv[argc++] = "psrt";
    for (char *t = strtok(copy, " "); t && argc < 31; t = strtok(NULL, " "))
        argv[argc++] = t;
    int r = psrt_flags_parse(f, argc, argv, err, errlen);
    free(copy);
    return r;
}

#endif
