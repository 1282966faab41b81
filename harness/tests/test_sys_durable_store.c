/*
 * test_sys_durable_store.c: the record of what was made durable
 * (harness/sys/durable_store.c), written by the harness and, in real
 * processes, by harness/tools/fl_sync_preload.c: files, directories and
 * written ranges; fsync, fdatasync, syncfs, sync and O_DSYNC writes; other
 * filesystems ignored.
 */
#include "harness/sys/durable_store.h"
#include "harness/tests/fl_test.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char *data_of(const struct fl_dstore *st, const char *path)
{
    struct stat sb;
    if (stat(path, &sb) < 0)
        return strdup("?");
    int fd = fl_dstore_open_data(st, sb.st_ino);
    if (fd < 0)
        return strdup("none");
    char buf[256];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    buf[n > 0 ? n : 0] = 0;
    return strdup(buf);
}

static void put(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0640);
    FL_REQUIRE(fd >= 0);
    FL_REQUIRE(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
}

/* Files, directories (names, modes, a symbolic link's target), O_DSYNC
 * ranges, a tree; other filesystems are not recorded. */
FL_TEST(sys_durable_store, store_records_files_dirs_ranges)
{
    char disk[4096], store[4096], p[4200];
    snprintf(disk, sizeof disk, "%s/disk", fl_test_dir());
    snprintf(store, sizeof store, "%s/store", fl_test_dir());
    FL_REQUIRE_EQ(mkdir(disk, 0755), 0);
    FL_REQUIRE_EQ(fl_dstore_reset(store), 0);
    struct stat ds;
    FL_REQUIRE_EQ(stat(disk, &ds), 0);
    struct fl_dstore st;
    FL_REQUIRE_EQ(fl_dstore_open(&st, store, ds.st_dev), 0);

    snprintf(p, sizeof p, "%s/f", disk);
    put(p, "first");
    int fd = open(p, O_WRONLY); /* write-only: read through our own descriptor */
    FL_REQUIRE(fd >= 0);
    FL_ASSERT_EQ(fl_dstore_sync_fd(&st, fd), 0);
    FL_ASSERT_EQ(lseek(fd, 0, SEEK_CUR), 0); /* the caller's offset untouched */
    char *d = data_of(&st, p);
    FL_ASSERT_STREQ(d, "first");
    free(d);
    /* O_DSYNC ranges: the bytes written, and the size now */
    FL_REQUIRE(pwrite(fd, "XY", 2, 1) == 2);
    FL_REQUIRE(pwrite(fd, "tail", 4, 5) == 4);
    FL_ASSERT_EQ(fl_dstore_sync_range(&st, fd, 1, 2), 0);
    d = data_of(&st, p);
    FL_ASSERT_STREQ(d, "fXYst\0"); /* "tail" not synced, but the size is */
    FL_ASSERT_EQ(strlen(d), 5);
    free(d);
    close(fd);

    char q[4200];
    snprintf(q, sizeof q, "%s/sub", disk);
    FL_REQUIRE_EQ(mkdir(q, 0711), 0);
    snprintf(q, sizeof q, "%s/link", disk);
    FL_REQUIRE_EQ(symlink("sub/x", q), 0);
    int dfd = open(disk, O_RDONLY | O_DIRECTORY);
    FL_ASSERT_EQ(fl_dstore_sync_fd(&st, dfd), 0);
    struct fl_dstore_ent *ents;
    size_t n;
    FL_REQUIRE_EQ(fl_dstore_read_dir(&st, ds.st_ino, &ents, &n), 0);
    FL_ASSERT_EQ(n, 3);
    int seen = 0;
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(ents[i].name, "f")) {
            FL_ASSERT(S_ISREG(ents[i].mode));
            FL_ASSERT_EQ(ents[i].mode & 07777, 0640);
            seen |= 1;
        } else if (!strcmp(ents[i].name, "sub")) {
            FL_ASSERT(S_ISDIR(ents[i].mode));
            FL_ASSERT_EQ(ents[i].mode & 07777, 0711);
            seen |= 2;
        } else if (!strcmp(ents[i].name, "link")) {
            FL_ASSERT(S_ISLNK(ents[i].mode));
            FL_ASSERT_STREQ(ents[i].target, "sub/x");
            seen |= 4;
        }
    }
    FL_ASSERT_EQ(seen, 7);
    fl_dstore_ents_free(ents, n);
    /* sub was never synced: nothing recorded for it */
    struct stat ss;
    snprintf(q, sizeof q, "%s/sub", disk);
    FL_REQUIRE_EQ(stat(q, &ss), 0);
    FL_ASSERT_EQ(fl_dstore_read_dir(&st, ss.st_ino, &ents, &n), -ENOENT);
    /* a tree: sub and its file too */
    snprintf(q, sizeof q, "%s/sub/g", disk);
    put(q, "gee");
    FL_ASSERT_EQ(fl_dstore_sync_tree(&st, dfd), 0);
    FL_REQUIRE_EQ(fl_dstore_read_dir(&st, ss.st_ino, &ents, &n), 0);
    FL_ASSERT_EQ(n, 1);
    fl_dstore_ents_free(ents, n);
    d = data_of(&st, q);
    FL_ASSERT_STREQ(d, "gee");
    free(d);
    close(dfd);
    fl_dstore_close(&st);

    /* a store for another device records nothing */
    FL_REQUIRE_EQ(fl_dstore_open(&st, store, ds.st_dev + 1), 0);
    snprintf(q, sizeof q, "%s/other", disk);
    put(q, "o");
    fd = open(q, O_RDONLY);
    FL_ASSERT_EQ(fl_dstore_sync_fd(&st, fd), 0);
    close(fd);
    d = data_of(&st, q);
    FL_ASSERT_STREQ(d, "none");
    free(d);
    fl_dstore_close(&st);
}

/* The preload in real processes: fsync of a file and of a directory,
 * syncfs (`sync -f`), sync, an O_DSYNC write; nothing for another device,
 * nothing without a successful call. */
FL_TEST(sys_durable_store, preload_records_syncs)
{
    const char *lib = fl_test_bin("../lib/fl_sync_preload.so");
    if (access(lib, R_OK) != 0)
        FL_SKIP("build/lib/fl_sync_preload.so is not built");
    if (access("/usr/bin/python3", X_OK) != 0)
        FL_SKIP("needs python3");
    char disk[4096], store[4096], env[12000], p[4200];
    snprintf(disk, sizeof disk, "%s/disk", fl_test_dir());
    snprintf(store, sizeof store, "%s/store", fl_test_dir());
    FL_REQUIRE_EQ(mkdir(disk, 0755), 0);
    FL_REQUIRE_EQ(fl_dstore_reset(store), 0);
    struct stat ds;
    FL_REQUIRE_EQ(stat(disk, &ds), 0);
    snprintf(env, sizeof env,
             "cd %s && LD_PRELOAD=%s FAULTLINE_DURABLE_STORE=%s "
             "FAULTLINE_DURABLE_ROOT=%s FAULTLINE_DURABLE_DEV=%llu",
             disk, lib, store, disk, (unsigned long long)ds.st_dev);
    /* f1 fsynced, f2 not, the directory fsynced; f3 written O_DSYNC */
    FL_REQUIRE_EQ(fl_test_sh(NULL,
                             "%s /usr/bin/python3 -c '\n"
                             "import os\n"
                             "def w(n, t, s):\n"
                             "    fd = os.open(n, os.O_WRONLY | os.O_CREAT, 0o644)\n"
                             "    os.write(fd, t)\n"
                             "    if s: os.fsync(fd)\n"
                             "    os.close(fd)\n"
                             "w(\"f1\", b\"one\", True)\n"
                             "w(\"f2\", b\"two\", False)\n"
                             "d = os.open(\".\", os.O_RDONLY)\n"
                             "os.fsync(d)\n"
                             "fd = os.open(\"f3\", os.O_WRONLY | os.O_CREAT | os.O_DSYNC, 0o644)\n"
                             "os.write(fd, b\"abc\")\n"
                             "os.pwrite(fd, b\"Z\", 1)\n"
                             "'",
                             env),
                  0);
    struct fl_dstore st;
    FL_REQUIRE_EQ(fl_dstore_open(&st, store, ds.st_dev), 0);
    const char *want1[][2] = {{"f1", "one"}, {"f2", "none"}, {"f3", "aZc"}};
    for (size_t i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", disk, want1[i][0]);
        char *d = data_of(&st, p);
        FL_ASSERT_MSG(!strcmp(d, want1[i][1]), "%s: recorded '%s', want '%s'", want1[i][0], d,
                      want1[i][1]);
        free(d);
    }
    struct fl_dstore_ent *ents;
    size_t n;
    FL_REQUIRE_EQ(fl_dstore_read_dir(&st, ds.st_ino, &ents, &n), 0);
    FL_ASSERT_EQ(n, 2); /* f1, f2: f3 came after */
    fl_dstore_ents_free(ents, n);
    /* syncfs: everything */
    FL_REQUIRE_EQ(fl_test_sh(NULL, "%s sync -f .", env), 0);
    snprintf(p, sizeof p, "%s/f2", disk);
    char *d = data_of(&st, p);
    FL_ASSERT_STREQ(d, "two");
    free(d);
    FL_REQUIRE_EQ(fl_dstore_read_dir(&st, ds.st_ino, &ents, &n), 0);
    FL_ASSERT_EQ(n, 3);
    fl_dstore_ents_free(ents, n);
    /* another device (the DEV number with a digit appended): an fsync
     * records nothing; then sync records it */
    FL_REQUIRE_EQ(fl_test_sh(NULL,
                             "%s1 /usr/bin/python3 -c '\n"
                             "import os\n"
                             "fd = os.open(\"f4\", os.O_WRONLY | os.O_CREAT, 0o644)\n"
                             "os.write(fd, b\"four\")\n"
                             "os.fsync(fd)\n"
                             "'",
                             env),
                  0);
    snprintf(p, sizeof p, "%s/f4", disk);
    d = data_of(&st, p);
    FL_ASSERT_STREQ(d, "none");
    free(d);
    FL_REQUIRE_EQ(fl_test_sh(NULL, "%s sync", env), 0);
    d = data_of(&st, p);
    FL_ASSERT_STREQ(d, "four");
    free(d);
    char why[256];
    FL_ASSERT(!fl_dstore_broken(&st, why, sizeof why));
    fl_dstore_close(&st);
}
