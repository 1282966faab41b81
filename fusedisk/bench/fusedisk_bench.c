/*
 * fusedisk_bench.c: the faultline filesystem's cost (bench/fusedisk.sh): the
 * same workloads on a plain tmpfs directory (the baseline) and through a
 * fusedisk mounted over another, in one run, in a mount namespace of its
 * own.  Workloads: "write" (a sequential file of N MiB in 1 MiB writes,
 * then fsync), "small" (N files: create, write 4 KiB, fsync, close) and
 * "lookup" (N stat()s of names that do not exist: one FUSE round trip each,
 * the floor under every operation that must reach the server; a small
 * file's takes five: getattr of the directory, lookup, create, write,
 * fsync).
 * Each is timed cold (the first time, as a user meets it) and as the best
 * of rounds; prints BENCH lines, a ratio of throughputs (fusedisk / plain:
 * 1 is as fast, 0.5 half as fast).
 *
 * usage: fusedisk-bench write MIB ROUNDS | small FILES ROUNDS | lookup N ROUNDS
 */
#include "fusedisk/fusedisk.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void die(const char *what)
{
    fprintf(stderr, "fusedisk-bench: %s: %s\n", what, strerror(errno));
    exit(1);
}

static double big_write(const char *dir, long mib)
{
    static char buf[1 << 20];
    memset(buf, 'x', sizeof buf);
    char p[4096];
    snprintf(p, sizeof p, "%s/big", dir);
    double t0 = now();
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        die(p);
    for (long i = 0; i < mib; i++)
        if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf)
            die("write");
    if (fsync(fd) < 0)
        die("fsync");
    close(fd);
    double t = now() - t0;
    unlink(p);
    return t;
}

static double small_files(const char *dir, long n)
{
    static char buf[4096];
    memset(buf, 'y', sizeof buf);
    char p[4096];
    double t0 = now();
    for (long i = 0; i < n; i++) {
        snprintf(p, sizeof p, "%s/f%ld", dir, i);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0)
            die(p);
        if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf || fsync(fd) < 0)
            die("write/fsync");
        close(fd);
    }
    double t = now() - t0;
    for (long i = 0; i < n; i++) {
        snprintf(p, sizeof p, "%s/f%ld", dir, i);
        unlink(p);
    }
    return t;
}

static double lookups(const char *dir, long n)
{
    char p[4096];
    struct stat st;
    double t0 = now();
    for (long i = 0; i < n; i++) {
        snprintf(p, sizeof p, "%s/missing%ld", dir, i);
        if (stat(p, &st) == 0 || errno != ENOENT)
            die("stat of a missing name");
    }
    return now() - t0;
}

int main(int argc, char **argv)
{
    if (argc != 4 ||
        (strcmp(argv[1], "write") && strcmp(argv[1], "small") && strcmp(argv[1], "lookup"))) {
        fprintf(stderr,
                "usage: fusedisk-bench write MIB ROUNDS | small FILES ROUNDS | lookup N ROUNDS\n");
        return 2;
    }
    bool big = !strcmp(argv[1], "write"), look = !strcmp(argv[1], "lookup");
    double (*work)(const char *, long) = big ? big_write : look ? lookups : small_files;
    long n = atol(argv[2]), rounds = atol(argv[3]);
    if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        die("a mount namespace of its own (root?)");
    char base[] = "/tmp/fusedisk-bench-XXXXXX";
    if (!mkdtemp(base))
        die("mkdtemp");
    if (mount("fl-bench", base, "tmpfs", 0, "mode=755") < 0)
        die("tmpfs");
    char plain[4096], backing[4096], mnt[4096];
    snprintf(plain, sizeof plain, "%s/plain", base);
    snprintf(backing, sizeof backing, "%s/backing", base);
    snprintf(mnt, sizeof mnt, "%s/mnt", base);
    mkdir(plain, 0755);
    mkdir(backing, 0755);
    mkdir(mnt, 0755);
    struct fl_fusedisk *d;
    char err[512];
    if (fl_fusedisk_mount(&d, backing, mnt, 0, err, sizeof err) < 0) {
        fprintf(stderr, "fusedisk-bench: %s\n", err);
        return 1;
    }
    double cold_p = 0, cold_f = 0, best_p = 1e9, best_f = 1e9;
    for (long r = 0; r < rounds; r++) {
        double tp = work(plain, n);
        double tf = work(mnt, n);
        if (r == 0) {
            cold_p = tp;
            cold_f = tf;
        }
        if (tp < best_p)
            best_p = tp;
        if (tf < best_f)
            best_f = tf;
        fprintf(stderr, "fusedisk-bench %s %ld: round %ld: plain %.4f s, fusedisk %.4f s\n",
                argv[1], n, r + 1, tp, tf);
    }
    fl_fusedisk_unmount(d);
    umount2(base, MNT_DETACH);
    rmdir(base);
    if (look) { /* microseconds per call, and the ratio of rates */
        printf("BENCH name=fusedisk_roundtrip value=%.1f unit=us baseline=tmpfs "
               "baseline_value=%.2f ratio=%.4f cold_value=%.1f cold_ratio=%.4f\n",
               best_f * 1e6 / (double)n, best_p * 1e6 / (double)n, best_p / best_f,
               cold_f * 1e6 / (double)n, cold_p / cold_f);
        return 0;
    }
    const char *name = big ? "fusedisk_write" : "fusedisk_small_files";
    const char *unit = big ? "MiB/s" : "files/s";
    printf("BENCH name=%s_%ld value=%.1f unit=%s baseline=tmpfs baseline_value=%.1f ratio=%.4f "
           "cold_value=%.1f cold_ratio=%.4f\n",
           name, n, (double)n / best_f, unit, (double)n / best_p, best_p / best_f,
           (double)n / cold_f, cold_p / cold_f);
    return 0;
}
