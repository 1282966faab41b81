/*
 * ckpt_bench.c: build/bin/ckpt-bench, the driver behind bench/bundle.sh.
 * Times the checkpoint library on large bundles, the way the runtime uses
 * it: the writer adds tensors from memory and finishes with CKPT_SYNC (data
 * and index fsynced, renamed, directory fsynced); the reader reads every
 * tensor into memory checking its crc32c.
 *
 *   ckpt-bench write PREFIX MIB [NTENSORS]   MIB MiB in NTENSORS float tensors
 *                                             (default 16)
 *   ckpt-bench read PREFIX                   read + crc-check every tensor
 *
 * Tensor memory is allocated the way a runtime holds large tensors: 2 MiB
 * aligned, transparent huge pages requested (madvise), touched before the
 * clock starts.
 *
 * Prints the rate in MB/s (10^6 bytes per second) as the only line on stdout;
 * details on stderr.  Exit 1 on any error (with the library's message).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "runtime/ckpt/bundle.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* n bytes of tensor memory, 2 MiB aligned, huge pages asked for, touched. */
static void *tensor_alloc(size_t n)
{
    size_t al = (size_t)2 << 20, sz = (n + al - 1) / al * al;
    void *p = aligned_alloc(al, sz ? sz : al);
    if (p) {
        madvise(p, sz, MADV_HUGEPAGE);
        memset(p, 0, sz);
    }
    return p;
}

static int bench_write(const char *prefix, long mib, long nt)
{
    size_t total = (size_t)mib << 20, per = total / (size_t)nt;
    per -= per % 4;
    float *buf = tensor_alloc(per ? per : 4);
    if (!buf) {
        fprintf(stderr, "ckpt-bench: out of memory for %zu bytes\n", per);
        return 1;
    }
    uint32_t x = 12345;
    for (size_t i = 0; i < per / 4; i++) {
        x = x * 1664525u + 1013904223u;
        buf[i] = (float)(x >> 8) / 16777216.0f;
    }
    struct ckpt_writer *w;
    struct ckpt_err e;
    double t0 = now();
    if (ckpt_writer_open(&w, prefix, NULL, &e)) {
        fprintf(stderr, "ckpt-bench: %s\n", e.msg);
        return 1;
    }
    for (long i = 0; i < nt; i++) {
        char name[64];
        int64_t dims[2] = {(int64_t)(per / 4 / 1024), 1024};
        if (per / 4 % 1024) {
            dims[0] = (int64_t)(per / 4);
            dims[1] = 1;
        }
        snprintf(name, sizeof name, "layer_%03ld/kernel", i);
        if (ckpt_writer_add(w, name, CKPT_DT_FLOAT, 2, dims, buf, per, &e)) {
            fprintf(stderr, "ckpt-bench: %s\n", e.msg);
            ckpt_writer_abort(w);
            return 1;
        }
    }
    if (ckpt_writer_finish(w, CKPT_SYNC, &e)) {
        fprintf(stderr, "ckpt-bench: %s\n", e.msg);
        return 1;
    }
    double dt = now() - t0;
    double bytes = (double)per * (double)nt;
    fprintf(stderr, "ckpt-bench: wrote %.0f bytes in %ld tensors with fsync in %.3f s\n", bytes, nt,
            dt);
    printf("%.1f\n", bytes / dt / 1e6);
    free(buf);
    return 0;
}

static int bench_read(const char *prefix)
{
    struct ckpt_reader *r;
    struct ckpt_err e;
    /* opening reads only the (small) index; tensor memory is allocated
     * outside the timed part, as a restore has its variables already */
    double t0 = now();
    if (ckpt_reader_open(&r, prefix, &e)) {
        fprintf(stderr, "ckpt-bench: %s\n", e.msg);
        return 1;
    }
    double t_open = now() - t0;
    size_t cap = 0;
    for (size_t i = 0; i < ckpt_reader_count(r); i++)
        if ((size_t)ckpt_reader_entry(r, i)->size > cap)
            cap = (size_t)ckpt_reader_entry(r, i)->size;
    void *buf = tensor_alloc(cap ? cap : 1);
    if (!buf) {
        fprintf(stderr, "ckpt-bench: out of memory\n");
        return 1;
    }
    double bytes = 0;
    t0 = now() - t_open;
    for (size_t i = 0; i < ckpt_reader_count(r); i++) {
        const struct ckpt_entry *en = ckpt_reader_entry(r, i);
        if (ckpt_reader_read(r, en, buf, cap, &e)) {
            fprintf(stderr, "ckpt-bench: %s\n", e.msg);
            return 1;
        }
        bytes += (double)en->size;
    }
    ckpt_reader_close(r);
    double dt = now() - t0;
    fprintf(stderr, "ckpt-bench: read and crc-checked %.0f bytes in %.3f s\n", bytes, dt);
    printf("%.1f\n", bytes / dt / 1e6);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 4 && !strcmp(argv[1], "write")) {
        long mib = strtol(argv[3], NULL, 10), nt = argc > 4 ? strtol(argv[4], NULL, 10) : 16;
        if (mib <= 0 || nt <= 0) {
            fprintf(stderr, "ckpt-bench: bad size or tensor count\n");
            return 2;
        }
        return bench_write(argv[2], mib, nt);
    }
    if (argc == 3 && !strcmp(argv[1], "read"))
        return bench_read(argv[2]);
    fprintf(stderr, "usage: ckpt-bench write PREFIX MIB [NTENSORS]\n"
                    "       ckpt-bench read PREFIX\n");
    return 2;
}
