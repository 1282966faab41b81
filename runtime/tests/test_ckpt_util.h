/*
 * test_ckpt_util.h: helpers shared by the checkpoint library's tests
 * (test_ckpt_*.c): file slurping and writing, path building in the test's
 * temporary directory, and a few canned bundles.
 */
#ifndef TEST_CKPT_UTIL_H
#define TEST_CKPT_UTIL_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness/tests/fl_test.h"
#include "runtime/ckpt/bundle.h"

/* A path under the test directory; malloc'd and never freed (each test is
 * a short-lived forked process). */
__attribute__((format(printf, 1, 2), unused)) static const char *tpath(const char *fmt, ...)
{
    char rel[3072], *b = NULL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rel, sizeof rel, fmt, ap);
    va_end(ap);
    if (asprintf(&b, "%s/%s", fl_test_dir(), rel) < 0)
        abort();
    return b;
}

/* Whole file into malloc'd memory (NULL when unreadable). */
__attribute__((unused)) static unsigned char *slurp(const char *path, size_t *len)
{
    if (len)
        *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = malloc(n > 0 ? (size_t)n : 1);
    size_t got = p ? fread(p, 1, (size_t)n, f) : 0;
    fclose(f);
    if (len)
        *len = got;
    return p;
}

__attribute__((unused)) static int spit(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(p, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

__attribute__((unused)) static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* Writes a bundle of float scalars a = 0.5, b = 3, c = 3 (half_plus_three). */
__attribute__((unused)) static int write_hpt(const char *prefix, unsigned finish_flags)
{
    struct ckpt_writer *w;
    struct ckpt_err e;
    float a = 0.5f, b = 3, c = 3;
    int rc = ckpt_writer_open(&w, prefix, NULL, &e);
    if (rc)
        return rc;
    if ((rc = ckpt_writer_add(w, "a", CKPT_DT_FLOAT, 0, NULL, &a, 4, &e)) ||
        (rc = ckpt_writer_add(w, "b", CKPT_DT_FLOAT, 0, NULL, &b, 4, &e)) ||
        (rc = ckpt_writer_add(w, "c", CKPT_DT_FLOAT, 0, NULL, &c, 4, &e))) {
        ckpt_writer_abort(w);
        return rc;
    }
    return ckpt_writer_finish(w, finish_flags, &e);
}

/* Number of directory entries (excluding . and ..) whose name contains s. */
__attribute__((unused)) static int count_names(const char *dir, const char *s)
{
    char cmd[4300];
    char *out = NULL;
    snprintf(cmd, sizeof cmd, "ls -a '%s' | grep -c -- '%s'", dir, s);
    fl_test_sh(&out, "%s", cmd);
    int n = out ? atoi(out) : -1;
    free(out);
    return n;
}

#endif
