/*
 * test_fusedisk_fs.c: the faultline filesystem for real (fusedisk/fs.c): a
 * FUSE mount over a backing directory in a mount namespace of the test's
 * own (gone with it), used by the test itself, by a statically linked
 * program (no C library to preload: what only a filesystem reaches) and by
 * a process of another uid.  Needs root and /dev/fuse; skips otherwise.
 */
#include "fusedisk/fusedisk.h"
#include "runtime/ckpt/bundle.h"
#include "harness/sys/exe_kind.h"
#include "harness/tests/fl_test.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <pthread.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char backing[4096], mnt[4096];

static struct fl_fusedisk *mount_disk(void)
{
    fl_test_need_root();
    if (access("/dev/fuse", R_OK | W_OK) != 0)
        FL_SKIP("no /dev/fuse");
    FL_REQUIRE(unshare(CLONE_NEWNS) == 0);
    FL_REQUIRE(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0);
    snprintf(backing, sizeof backing, "%s/backing", fl_test_dir());
    snprintf(mnt, sizeof mnt, "%s/disk", fl_test_dir());
    FL_REQUIRE(mkdir(backing, 0755) == 0 && mkdir(mnt, 0755) == 0);
    struct fl_fusedisk *d = NULL;
    char err[512] = "";
    int rc = fl_fusedisk_mount(&d, backing, mnt, 0, err, sizeof err);
    FL_REQUIRE_MSG(rc == 0, "mount: %s", err);
    return d;
}

static int write_file(const char *dir, const char *name, const char *text, bool sync)
{
    char p[8192];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return -errno;
    int rc = 0;
    if (write(fd, text, strlen(text)) != (ssize_t)strlen(text))
        rc = -errno;
    if (!rc && sync && fsync(fd) < 0)
        rc = -errno;
    close(fd);
    return rc;
}

static char *slurp(const char *dir, const char *name)
{
    char p[8192], *buf = calloc(1, 65536);
    snprintf(p, sizeof p, "%s/%s", dir, name);
    int fd = open(p, O_RDONLY);
    if (fd >= 0) {
        ssize_t n = read(fd, buf, 65535);
        buf[n > 0 ? n : 0] = 0;
        close(fd);
    }
    return buf;
}

/* Files, directories, links, renames and listings made through the mount are
 * on the backing directory as made, and the other way round. */
FL_TEST_ROOT(fusedisk_fs, passes_every_operation_through)
{
    struct fl_fusedisk *d = mount_disk();
    char p[8192], q[8192];
    snprintf(p, sizeof p, "%s/dir", mnt);
    FL_ASSERT_EQ(mkdir(p, 0750), 0);
    FL_ASSERT_EQ(write_file(mnt, "dir/a.txt", "hello", true), 0);
    char *b = slurp(backing, "dir/a.txt");
    FL_ASSERT_STREQ(b, "hello");
    free(b);
    FL_ASSERT_EQ(write_file(backing, "dir/from-backing", "seen", false), 0);
    b = slurp(mnt, "dir/from-backing");
    FL_ASSERT_STREQ(b, "seen");
    free(b);
    snprintf(p, sizeof p, "%s/dir/a.txt", mnt);
    snprintf(q, sizeof q, "%s/dir/b.txt", mnt);
    FL_ASSERT_EQ(rename(p, q), 0);
    snprintf(p, sizeof p, "%s/dir/b.txt", backing);
    FL_ASSERT_EQ(access(p, F_OK), 0);
    snprintf(p, sizeof p, "%s/dir/link", mnt);
    FL_ASSERT_EQ(symlink("b.txt", p), 0);
    char t[64] = "";
    FL_ASSERT_EQ(readlink(p, t, sizeof t - 1), 5);
    FL_ASSERT_STREQ(t, "b.txt");
    struct stat st;
    snprintf(p, sizeof p, "%s/dir", mnt);
    FL_ASSERT_EQ(stat(p, &st), 0);
    FL_ASSERT_EQ(st.st_mode & 07777, 0750);
    char *o = NULL;
    FL_ASSERT_EQ(fl_test_sh(&o, "ls %s/dir | tr '\\n' ' '", mnt), 0);
    FL_ASSERT_STREQ(o, "b.txt from-backing link ");
    free(o);
    snprintf(p, sizeof p, "%s/dir/b.txt", mnt);
    FL_ASSERT_EQ(truncate(p, 2), 0);
    b = slurp(backing, "dir/b.txt");
    FL_ASSERT_STREQ(b, "he");
    free(b);
    FL_ASSERT_EQ(unlink(p), 0);
    snprintf(p, sizeof p, "%s/dir/b.txt", backing);
    FL_ASSERT(access(p, F_OK) != 0);
    fl_fusedisk_unmount(d);
}

/* A statically linked program (its fsync a system call no preload sees)
 * gets EIO on fsync of a file under a/, while its fsync under b/ and its
 * writes to stdout succeed. */
FL_TEST_ROOT(fusedisk_fs, fsync_fault_reaches_a_static_program_by_path)
{
    struct fl_fusedisk *d = mount_disk();
    static const char prog[] =
        "#define _GNU_SOURCE\n#include <errno.h>\n#include <fcntl.h>\n#include <stdio.h>\n#include "
        "<string.h>\n"
        "#include <unistd.h>\n"
        "static const char *try(const char *p) {\n"
        "  int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);\n"
        "  if (fd < 0) return strerror(errno);\n"
        "  if (write(fd, \"data\", 4) != 4) return strerror(errno);\n"
        "  const char *r = fsync(fd) ? strerrorname_np(errno) : \"ok\";\n"
        "  close(fd); return r; }\n"
        "int main(void) { printf(\"a=%s\\n\", try(\"a/x\")); printf(\"b=%s\\n\", try(\"b/y\"));"
        " return 0; }\n";
    const char *src = fl_test_write("syncer.c", prog);
    char *o = NULL;
    int rc = fl_test_sh(&o, "cc -static -O1 -o %s/syncer %s 2>&1", fl_test_dir(), src);
    if (rc != 0)
        FL_SKIP("cc -static failed (no static C library?): %s", o);
    free(o);
    char p[8192];
    snprintf(p, sizeof p, "%s/a", mnt);
    FL_REQUIRE(mkdir(p, 0755) == 0);
    snprintf(p, sizeof p, "%s/b", mnt);
    FL_REQUIRE(mkdir(p, 0755) == 0);
    struct fl_fd_rule r = {.glob = "a/**", .ops = FL_FD_FSYNC, .err = EIO, .probability = 1};
    int id = fl_fusedisk_add_rule(d, &r);
    FL_REQUIRE(id > 0);
    snprintf(p, sizeof p, "%s/syncer", fl_test_dir());
    FL_REQUIRE_MSG(fl_exe_kind_path(p) == FL_EXE_STATIC, "%s is not static", p);
    FL_ASSERT_EQ(fl_test_sh(&o, "cd %s && %s", mnt, p), 0);
    FL_ASSERT_STREQ(o, "a=EIO\nb=ok\n");
    free(o);
    FL_ASSERT_EQ(fl_fusedisk_hits(d, id), 1);
    char *b = slurp(backing, "b/y");
    FL_ASSERT_STREQ(b, "data");
    free(b);
    fl_fusedisk_unmount(d);
}

/* A full disk from a point on (ENOSPC on every write and create), healed
 * by removing the rule; what was written before stays. */
FL_TEST_ROOT(fusedisk_fs, full_disk_from_a_point_on_then_healed)
{
    struct fl_fusedisk *d = mount_disk();
    FL_ASSERT_EQ(write_file(mnt, "before", "kept", true), 0);
    struct fl_fd_rule full = {
        .glob = "**", .ops = FL_FD_WRITE | FL_FD_CREATE, .err = ENOSPC, .probability = 1};
    int id = fl_fusedisk_add_rule(d, &full);
    FL_ASSERT_EQ(write_file(mnt, "new", "x", false), -ENOSPC);
    char p[8192];
    snprintf(p, sizeof p, "%s/before", mnt);
    int fd = open(p, O_WRONLY | O_APPEND);
    FL_ASSERT(fd >= 0);
    errno = 0;
    FL_ASSERT_EQ(write(fd, "more", 4), -1);
    FL_ASSERT_EQ(errno, ENOSPC);
    close(fd);
    FL_ASSERT_EQ(fl_fusedisk_remove_rule(d, id), 0);
    FL_ASSERT_EQ(write_file(mnt, "new", "x", true), 0);
    char *b = slurp(backing, "before");
    FL_ASSERT_STREQ(b, "kept");
    free(b);
    fl_fusedisk_unmount(d);
}

/* A failed rename leaves both names as a real failed rename does: the old
 * file where it was, the new name untouched. */
FL_TEST_ROOT(fusedisk_fs, rename_fault_leaves_both_names)
{
    struct fl_fusedisk *d = mount_disk();
    FL_ASSERT_EQ(write_file(mnt, "ckpt.tmp", "new", true), 0);
    FL_ASSERT_EQ(write_file(mnt, "ckpt", "old", true), 0);
    struct fl_fd_rule r = {.glob = "ckpt", .ops = FL_FD_RENAME, .err = EIO, .probability = 1};
    fl_fusedisk_add_rule(d, &r);
    char p[8192], q[8192];
    snprintf(p, sizeof p, "%s/ckpt.tmp", mnt);
    snprintf(q, sizeof q, "%s/ckpt", mnt);
    errno = 0;
    FL_ASSERT_EQ(rename(p, q), -1);
    FL_ASSERT_EQ(errno, EIO);
    char *a = slurp(mnt, "ckpt.tmp"), *b = slurp(mnt, "ckpt");
    FL_ASSERT_STREQ(a, "new");
    FL_ASSERT_STREQ(b, "old");
    free(a);
    free(b);
    fl_fusedisk_unmount(d);
}

/* A short write keeps only the first bytes; a delay holds the call. */
FL_TEST_ROOT(fusedisk_fs, short_write_and_delay)
{
    struct fl_fusedisk *d = mount_disk();
    struct fl_fd_rule s = {.glob = "short", .ops = FL_FD_WRITE, .short_len = 100, .probability = 1};
    struct fl_fd_rule w = {
        .glob = "slow", .ops = FL_FD_FSYNC, .delay_us = 300000, .probability = 1};
    fl_fusedisk_add_rule(d, &s);
    fl_fusedisk_add_rule(d, &w);
    char p[8192], buf[8192];
    memset(buf, 'x', sizeof buf);
    snprintf(p, sizeof p, "%s/short", mnt);
    int fd = open(p, O_WRONLY | O_CREAT, 0644);
    FL_REQUIRE(fd >= 0);
    FL_ASSERT_EQ(write(fd, buf, sizeof buf), 100);
    close(fd);
    snprintf(p, sizeof p, "%s/slow", mnt);
    fd = open(p, O_WRONLY | O_CREAT, 0644);
    FL_REQUIRE(fd >= 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    FL_ASSERT_EQ(fsync(fd), 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    close(fd);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    FL_ASSERT_MSG(ms >= 299, "fsync under a 300 ms delay took %.1f ms", ms);
    fl_fusedisk_unmount(d);
}

/* Large writes (spliced from /dev/fuse to the backing file, in requests of
 * up to 1 MiB) land byte for byte at their offsets, closes need no flush, and
 * a short-write rule cuts a spliced request (the rest of the pipe dropped,
 * the next write fine). */
FL_TEST_ROOT(fusedisk_fs, large_writes_arrive_intact_and_cut_short)
{
    struct fl_fusedisk *d = mount_disk();
    enum { LEN = 3 * (1 << 20) + 12345 };
    unsigned char *buf = malloc(LEN), *back = malloc(LEN);
    FL_REQUIRE(buf && back);
    uint32_t x = 12345;
    for (size_t i = 0; i < LEN; i++) {
        x = x * 1103515245u + 12345u;
        buf[i] = (unsigned char)(x >> 24);
    }
    char p[8192];
    snprintf(p, sizeof p, "%s/big", mnt);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    FL_REQUIRE(fd >= 0);
    FL_ASSERT_EQ(write(fd, buf, 1 << 20), 1 << 20);
    FL_ASSERT_EQ(write(fd, buf + (1 << 20), LEN - (1 << 20)), LEN - (1 << 20));
    FL_ASSERT_EQ(fsync(fd), 0);
    FL_ASSERT_EQ(close(fd), 0);
    snprintf(p, sizeof p, "%s/big", backing);
    fd = open(p, O_RDONLY);
    FL_REQUIRE(fd >= 0);
    FL_ASSERT_EQ(read(fd, back, LEN), LEN);
    close(fd);
    FL_ASSERT(memcmp(buf, back, LEN) == 0);

    struct fl_fd_rule s = {
        .glob = "cut", .ops = FL_FD_WRITE, .short_len = 300000, .probability = 1};
    int id = fl_fusedisk_add_rule(d, &s);
    FL_REQUIRE(id > 0);
    snprintf(p, sizeof p, "%s/cut", mnt);
    fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    FL_REQUIRE(fd >= 0);
    FL_ASSERT_EQ(write(fd, buf, 1 << 20), 300000);
    FL_ASSERT_EQ(fl_fusedisk_remove_rule(d, id), 0);
    FL_ASSERT_EQ(write(fd, buf + 300000, 1 << 20), 1 << 20);
    FL_ASSERT_EQ(close(fd), 0);
    snprintf(p, sizeof p, "%s/cut", backing);
    fd = open(p, O_RDONLY);
    FL_REQUIRE(fd >= 0);
    FL_ASSERT_EQ(read(fd, back, LEN), 300000 + (1 << 20));
    close(fd);
    FL_ASSERT(memcmp(buf, back, 300000 + (1 << 20)) == 0);
    free(buf);
    free(back);
    fl_fusedisk_unmount(d);
}

/* A write-only descriptor's writes bypass the kernel's page cache; a reader
 * that holds the file open, with its pages cached and mapped, still reads
 * every byte the writer wrote (appended into the page it had cached, and
 * over bytes it had read) as soon as the write returns. */
FL_TEST_ROOT(fusedisk_fs, readers_see_what_a_write_only_descriptor_wrote)
{
    struct fl_fusedisk *d = mount_disk();
    char p[8192], buf[64] = "";
    snprintf(p, sizeof p, "%s/log", mnt);
    FL_REQUIRE(write_file(mnt, "log", "first line\n", false) == 0);
    int r = open(p, O_RDONLY);
    FL_REQUIRE(r >= 0);
    FL_ASSERT_EQ(pread(r, buf, sizeof buf - 1, 0), 11); /* its page now cached */
    char *map = mmap(NULL, 4096, PROT_READ, MAP_SHARED, r, 0);
    FL_REQUIRE(map != MAP_FAILED);
    FL_ASSERT(memcmp(map, "first line\n", 11) == 0);
    int w = open(p, O_WRONLY | O_APPEND);
    FL_REQUIRE(w >= 0);
    FL_ASSERT_EQ(write(w, "second\n", 7), 7);
    memset(buf, 0, sizeof buf);
    FL_ASSERT_EQ(pread(r, buf, sizeof buf - 1, 0), 18);
    FL_ASSERT_STREQ(buf, "first line\nsecond\n");
    FL_ASSERT(memcmp(map, "first line\nsecond\n", 18) == 0);
    close(w);
    w = open(p, O_WRONLY); /* O_APPEND would append the pwrite */
    FL_REQUIRE(w >= 0);
    FL_ASSERT_EQ(pwrite(w, "FIRST", 5, 0), 5);
    memset(buf, 0, sizeof buf);
    FL_ASSERT_EQ(pread(r, buf, sizeof buf - 1, 0), 18);
    FL_ASSERT_STREQ(buf, "FIRST line\nsecond\n");
    FL_ASSERT(memcmp(map, "FIRST", 5) == 0);
    /* and a write-only descriptor cannot be mapped, as on any filesystem */
    FL_ASSERT(mmap(NULL, 4096, PROT_WRITE, MAP_SHARED, w, 0) == MAP_FAILED && errno == EACCES);
    munmap(map, 4096);
    close(w);
    close(r);
    fl_fusedisk_unmount(d);
}

/* What another user makes is that user's, and the kernel checks its
 * permissions: nobody cannot write root's 0644 file. */
FL_TEST_ROOT(fusedisk_fs, files_belong_to_whoever_made_them)
{
    struct fl_fusedisk *d = mount_disk();
    FL_REQUIRE(chmod(fl_test_dir(), 0755) == 0); /* nobody must reach the mount */
    char p[8192];
    snprintf(p, sizeof p, "%s/pub", mnt);
    FL_REQUIRE(mkdir(p, 0777) == 0);
    FL_REQUIRE(chmod(p, 01777) == 0);
    FL_ASSERT_EQ(write_file(mnt, "roots", "r", false), 0);
    pid_t pid = fork();
    if (pid == 0) {
        if (setgid(65534) || setuid(65534))
            _exit(10);
        if (write_file(mnt, "pub/mine", "n", true) != 0)
            _exit(11);
        if (write_file(mnt, "roots", "no", false) != -EACCES)
            _exit(12);
        _exit(0);
    }
    int w;
    FL_REQUIRE(waitpid(pid, &w, 0) == pid);
    FL_ASSERT_MSG(WIFEXITED(w) && WEXITSTATUS(w) == 0, "the child as nobody: status %d", w);
    struct stat st;
    snprintf(p, sizeof p, "%s/pub/mine", backing);
    FL_ASSERT_EQ(stat(p, &st), 0);
    FL_ASSERT_EQ(st.st_uid, 65534);
    FL_ASSERT_EQ(st.st_gid, 65534);
    fl_fusedisk_unmount(d);
}

/* What the filesystem tells of syncs: each fsync that succeeds, of a file or
 * a directory, with the backing file's own descriptor; not a write without
 * one, nor an fsync a rule failed. */
struct told {
    pthread_mutex_t mu;
    ino_t ino[16];
    int n;
};

static void on_synced(void *ctx, int fd)
{
    struct told *t = ctx;
    struct stat sb;
    if (fstat(fd, &sb) < 0)
        return;
    pthread_mutex_lock(&t->mu);
    if (t->n < 16)
        t->ino[t->n++] = sb.st_ino;
    pthread_mutex_unlock(&t->mu);
}

static ino_t ino_of(const char *dir, const char *name)
{
    char p[8192];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return stat(p, &sb) == 0 ? sb.st_ino : 0;
}

FL_TEST_ROOT(fusedisk_fs, syncs_are_told_with_the_backing_file)
{
    struct fl_fusedisk *d = mount_disk();
    struct told t = {.mu = PTHREAD_MUTEX_INITIALIZER};
    fl_fusedisk_on_synced(d, on_synced, &t);
    FL_ASSERT_EQ(write_file(mnt, "synced.txt", "s", true), 0);
    FL_ASSERT_EQ(write_file(mnt, "plain.txt", "p", false), 0);
    int dfd = open(mnt, O_RDONLY | O_DIRECTORY);
    FL_ASSERT(dfd >= 0 && fsync(dfd) == 0);
    close(dfd);
    struct fl_fd_rule r = {.glob = "failed.txt", .ops = FL_FD_FSYNC, .err = EIO, .probability = 1};
    FL_ASSERT(fl_fusedisk_add_rule(d, &r) > 0);
    FL_ASSERT_EQ(write_file(mnt, "failed.txt", "f", true), -EIO);
    fl_fusedisk_unmount(d);
    /* told: synced.txt, then the root directory, as the backing ones */
    FL_ASSERT_EQ(t.n, 2);
    FL_ASSERT_EQ(t.ino[0], ino_of(backing, "synced.txt"));
    FL_ASSERT_EQ(t.ino[1], ino_of(backing, "."));
    FL_ASSERT(t.ino[0] != 0 && t.ino[0] != ino_of(backing, "plain.txt"));
}

/* psrt's bundle writer on its direct path (O_DIRECT data file, writes by
 * Linux AIO, io_submit) reaches the filesystem, and so its faults: EIO on
 * writes to *.data-* files fails the save (the asynchronous write's result,
 * which the writer names "write", or io_submit itself), the rule hit the
 * data file, and a save under another name is untouched. */
FL_TEST_ROOT(fusedisk_fs, o_direct_aio_bundle_writer_gets_the_fault_on_its_data_file)
{
    struct fl_fusedisk *d = mount_disk();
    struct fl_fd_rule r = {
        .glob = "bad/**/*.data-*", .ops = FL_FD_WRITE, .err = EIO, .probability = 1};
    FL_REQUIRE(fl_fusedisk_add_rule(d, &r) > 0);
    static uint8_t data[4 << 20];
    memset(data, 0x5a, sizeof data);
    struct ckpt_writer_opts o = {.flags = CKPT_W_DIRECT | CKPT_W_MKDIR_P, .buffer_size = 1 << 20};
    int64_t n = (int64_t)sizeof data;
    const char *dirs[] = {"good", "bad"};
    int rcs[2];
    char call[2][16];
    for (int i = 0; i < 2; i++) {
        char prefix[8300];
        snprintf(prefix, sizeof prefix, "%s/%s/train/model.ckpt-1", mnt, dirs[i]);
        struct ckpt_writer *w;
        struct ckpt_err e = {0};
        FL_REQUIRE_MSG(ckpt_writer_open(&w, prefix, &o, &e) == 0, "%s", e.msg);
        FL_ASSERT_MSG(ckpt_writer_is_direct(w), "%s: the writer took the buffered path", dirs[i]);
        int rc = ckpt_writer_add(w, "t", CKPT_DT_UINT8, 1, &n, data, sizeof data, &e);
        if (rc == 0)
            rc = ckpt_writer_finish(w, CKPT_SYNC, &e);
        else
            ckpt_writer_abort(w);
        rcs[i] = rc;
        snprintf(call[i], sizeof call[i], "%s", e.call);
    }
    struct fl_fd_where w[4];
    uint64_t more;
    size_t nw = fl_fusedisk_where(d, 1, w, 4, &more);
    fl_fusedisk_unmount(d);
    FL_ASSERT_EQ(rcs[0], 0);
    FL_ASSERT_EQ(rcs[1], -EIO);
    FL_ASSERT_MSG(!strcmp(call[1], "write") || !strcmp(call[1], "io_submit") ||
                      !strcmp(call[1], "io_getevents"),
                  "failed at %s", call[1]);
    FL_ASSERT(nw >= 1 && w[0].op == FL_FD_WRITE &&
              !strncmp(w[0].path, "bad/train/model.ckpt-1.data-00000-of-00001", 42));
}
