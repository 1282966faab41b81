/*
 * fl_disk_probe.c: build/bin/fl-disk-probe, a small disk probe that
 * faultline's integration tests (and scenarios/faults/disk-*.yaml) run on
 * hosts to measure and show what a disk fault does, through the C library
 * calls a `disk:` fault wraps (no dd/python needed, and no buffering in
 * between):
 *
 *   fl-disk-probe time write|fsync|read FILE N
 *       N calls of write (4 KiB appended), fsync or pread (4 KiB at 0) on
 *       FILE, each timed with CLOCK_MONOTONIC; prints
 *       "time CALL: N calls, avg A ms, max M ms" (A, M in ms, 1 decimal)
 *   fl-disk-probe write-once FILE SIZE
 *       one write() of SIZE bytes to a new FILE, as a program that does not
 *       loop on short writes; prints "write-once: wrote W of SIZE"
 *   fl-disk-probe write-all FILE SIZE
 *       write() until SIZE bytes are written, as a careful program does;
 *       prints "write-all: wrote W of SIZE in C calls"
 *
 * Every outcome is one line, for scenario expectations to match; a failing
 * call prints "CMD: CALL FILE: error" and exits 1.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}

static int fail(const char *cmd, const char *call, const char *file)
{
    printf("%s: %s %s: %s\n", cmd, call, file, strerror(errno));
    return 1;
}

static int do_time(const char *call, const char *file, long n)
{
    static char buf[4096];
    int fd = open(file, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return fail("time", "open", file);
    if (strcmp(call, "write") != 0 && write(fd, buf, sizeof buf) != (ssize_t)sizeof buf)
        return fail("time", "write", file);
    double sum = 0, max = 0;
    for (long i = 0; i < n; i++) {
        double t0 = now_ms();
        long r;
        if (!strcmp(call, "write"))
            r = write(fd, buf, sizeof buf);
        else if (!strcmp(call, "fsync"))
            r = fsync(fd);
        else
            r = pread(fd, buf, sizeof buf, 0);
        if (r < 0)
            return fail("time", call, file);
        double dt = now_ms() - t0;
        sum += dt;
        if (dt > max)
            max = dt;
    }
    close(fd);
    printf("time %s: %ld calls, avg %.1f ms, max %.1f ms\n", call, n, n ? sum / n : 0, max);
    return 0;
}

static int do_write(const char *cmd, const char *file, long size, int loop)
{
    char *buf = malloc(size ? (size_t)size : 1);
    if (!buf)
        return 1;
    for (long i = 0; i < size; i++)
        buf[i] = (char)('a' + i % 26);
    int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return fail(cmd, "open", file);
    long done = 0, calls = 0;
    do {
        ssize_t w = write(fd, buf + done, (size_t)(size - done));
        calls++;
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return fail(cmd, "write", file);
        done += w;
    } while (loop && done < size);
    if (close(fd) < 0)
        return fail(cmd, "close", file);
    free(buf);
    if (loop)
        printf("%s: wrote %ld of %ld in %ld calls\n", cmd, done, size, calls);
    else
        printf("%s: wrote %ld of %ld\n", cmd, done, size);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 5 && !strcmp(argv[1], "time") &&
        (!strcmp(argv[2], "write") || !strcmp(argv[2], "fsync") || !strcmp(argv[2], "read")))
        return do_time(argv[2], argv[3], atol(argv[4]));
    if (argc == 4 && !strcmp(argv[1], "write-once"))
        return do_write(argv[1], argv[2], atol(argv[3]), 0);
    if (argc == 4 && !strcmp(argv[1], "write-all"))
        return do_write(argv[1], argv[2], atol(argv[3]), 1);
    fprintf(stderr, "usage: fl-disk-probe time write|fsync|read FILE N | write-once FILE SIZE | "
                    "write-all FILE SIZE\n");
    return 2;
}
