/*
 * test_faults_disk_path.c: `disk:` faults by path (harness/faults/disk_fs.c),
 * which act at the faultline filesystem under a host's disk and so reach a
 * statically linked program, which no preload does: EIO on fsync under
 * logs/ while data/ and stdout are fine, nothing said about the program
 * (the fault reaches it), the rule off after its heal, and the fault
 * recorded with its path and op; the same for a Go program (golang-go) and
 * busybox-static's dd; and crash consistency for a static program on a
 * disk the filesystem serves.  The real faultline binary on scenarios
 * written by the test, with programs it builds (`cc -static`, `go build`).
 */
#include "harness/tests/fl_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The database the scenarios of these tests record into. */
static const char *test_db(void)
{
    static char db[4200];
    snprintf(db, sizeof db, "%s/fl.db", fl_test_dir());
    return db;
}

/* `faultline run` on yaml, out of the test's directory, into test_db(). */
static int run_yaml(char **out, const char *yaml)
{
    return fl_test_sh(out, "%s run --out %s/o --db %s %s 2>&1", fl_test_bin("faultline"),
                      fl_test_dir(), test_db(), yaml);
}

/* Needs root and /dev/fuse; builds src into <test dir>/name with
 * `cc -static` (skipped without glibc's libc.a). */
static void build_static(const char *name, const char *src)
{
    fl_test_need_root();
    if (access("/dev/fuse", R_OK | W_OK) != 0)
        FL_SKIP("no /dev/fuse");
    if (access("/usr/lib/x86_64-linux-gnu/libc.a", R_OK) != 0 && access("/usr/lib/libc.a", R_OK))
        FL_SKIP("no static C library (libc6-dev)");
    char file[64], *out;
    snprintf(file, sizeof file, "%s.c", name);
    fl_test_write(file, src);
    int rc = fl_test_sh(&out, "cd %s && cc -static -O1 -o %s %s", fl_test_dir(), name, file);
    FL_REQUIRE_MSG(rc == 0, "building %s: %s", name, out);
    free(out);
}

static const char syncer_c[] =
    "#define _GNU_SOURCE\n#include <errno.h>\n#include <fcntl.h>\n#include <stdio.h>\n#include "
    "<string.h>\n"
    "#include <unistd.h>\n"
    "static const char *try(const char *p) {\n"
    "  int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);\n"
    "  if (fd < 0) return strerrorname_np(errno);\n"
    "  if (write(fd, \"data\", 4) != 4) return strerrorname_np(errno);\n"
    "  const char *r = fsync(fd) ? strerrorname_np(errno) : \"ok\";\n"
    "  close(fd); return r; }\n"
    "int main(int argc, char **argv) {\n"
    "  const char *a = try(\"logs/x\"), *b = try(\"data/y\");\n"
    "  printf(\"%s logs=%s data=%s\\n\", argv[1], a, b); fflush(stdout); return 0; }\n";

FL_TEST_ROOT_T(faults_disk_path, fsync_eio_by_path_reaches_a_static_program, 90)
{
    build_static("syncer", syncer_c);
    char *out;
    int rc;
    const char *yaml = fl_test_write(
        "p.yaml",
        "name: it-disk-path\n"
        "hosts: [a, b]\n"
        "cluster: {w: [a], o: [b]}\n"
        "run:\n"
        "  stop_when: [w]\n"
        "  w:\n"
        "    command: |\n"
        "      mkdir -p logs data && {bin}/faultline emit --sync disk.go\n"
        "      {scenario_dir}/syncer during\n"
        "      n=0\n"
        "      until {scenario_dir}/syncer after | grep -q 'logs=ok'; do\n"
        "        n=$((n+1)); [ $n -lt 100 ] || exit 3; sleep 0.05\n"
        "      done\n"
        "      echo healed\n"
        "  o:\n"
        "    command: |\n"
        "      mkdir -p logs data && {scenario_dir}/syncer other\n"
        "      sleep 60\n"
        "faults:\n"
        "  - {after: {event: disk.go, host: a}, disk: {host: a, path: 'logs/**', op: fsync, "
        "errno: EIO}, for: 1s}\n"
        "expect:\n"
        "  all:\n"
        "    w: {exit: 0, log_matches: '^during logs=EIO data=ok$'}\n"
        "    \"w:0\": {log_matches: '^healed$'}\n"
        "    o: {log_matches: '^other logs=ok data=ok$'}\n");
    rc = run_yaml(&out, yaml);
    FL_ASSERT_MSG(rc == 0, "faultline run exited %d:\n%s", rc, out);
    FL_ASSERT_MSG(!strstr(out, "note:"), "a note on a fault that reaches the program:\n%s", out);
    free(out);
    const char *db = test_db();
    FL_ASSERT_EQ(fl_test_db_int(db, "SELECT count(*) FROM faults WHERE kind='disk' AND "
                                    "detail LIKE 'path=logs/** op=fsync errno=EIO%' AND "
                                    "healed_ms IS NOT NULL"),
                 1);
    /* where it hit: logs/x's fsync, at least once (during), nothing else */
    FL_ASSERT_EQ(fl_test_db_int(db, "SELECT count(*) FROM faults WHERE kind='disk' AND "
                                    "hits GLOB 'fsync logs/x ([1-9]*)'"),
                 1);
}

/* A static program's writes on a disk the faultline filesystem serves
 * (disk: {fs: true}): what it fsynced (file and directory) survives a
 * crash_host with unsynced: lose, what it wrote after is lost, and nothing
 * is said about syncs not seen (the filesystem sees every program's). */
static const char writer_c[] =
    "#include <fcntl.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n"
    "#include <unistd.h>\n"
    "static void put(const char *p, const char *s, int sync) {\n"
    "  int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);\n"
    "  if (fd < 0 || write(fd, s, strlen(s)) < 0 || (sync && fsync(fd))) exit(2);\n"
    "  close(fd); }\n"
    "static const char *get(const char *p, char *buf) {\n"
    "  int fd = open(p, O_RDONLY); if (fd < 0) return \"gone\";\n"
    "  ssize_t n = read(fd, buf, 63); close(fd); buf[n > 0 ? n : 0] = 0;\n"
    "  return n > 0 ? buf : \"empty\"; }\n"
    "int main(void) {\n"
    "  const char *g = getenv(\"FAULTLINE_GENERATION\");\n"
    "  if (g && strcmp(g, \"0\")) { char a[64], b[64], c[64];\n"
    "    printf(\"verify: kept=%s old=%s lost=%s\\n\", get(\"kept.txt\", a), get(\"old.txt\", b),\n"
    "           get(\"lost.txt\", c)); return 0; }\n"
    "  put(\"kept.txt\", \"K\", 1); put(\"old.txt\", \"v1\", 1);\n"
    "  int d = open(\".\", O_RDONLY | O_DIRECTORY); if (d < 0 || fsync(d)) return 2; close(d);\n"
    "  put(\"old.txt\", \"v2-longer\", 0); put(\"lost.txt\", \"L\", 0);\n"
    "  printf(\"written\\n\"); fflush(stdout); sleep(120); return 0; }\n";

FL_TEST_ROOT_T(faults_disk_path, static_program_keeps_what_it_synced_at_a_crash, 90)
{
    build_static("writer", writer_c);
    char *out;
    int rc;
    const char *yaml = fl_test_write(
        "w.yaml", "name: it-static-unsynced\n"
                  "hosts:\n"
                  "  h: {disk: {fs: true}}\n"
                  "cluster: {node: [h]}\n"
                  "run:\n"
                  "  command: '{scenario_dir}/writer'\n"
                  "faults:\n"
                  "  - {on_log: {host: h, match: '^written$'}, crash_host: h, unsynced: lose, "
                  "for: 100ms}\n"
                  "timeout: 30s\n"
                  "expect:\n"
                  "  all:\n"
                  "    all: {exit: 0}\n"
                  "    h: {log_matches: '^verify: kept=K old=v1 lost=gone$'}\n");
    rc = run_yaml(&out, yaml);
    FL_ASSERT_MSG(rc == 0, "faultline run exited %d:\n%s", rc, out);
    FL_ASSERT_MSG(!strstr(out, "not seen"), "said its syncs are not seen:\n%s", out);
    free(out);
    const char *db = test_db();
    FL_ASSERT_EQ(
        fl_test_db_int(db, "SELECT count(*) FROM faults WHERE kind='crash_host' AND "
                           "detail = 'for=100ms unsynced=lose: 1 entry lost, 1 file rolled "
                           "back, 0 entries back, 10 bytes unsynced: -lost.txt ~old.txt 9->2'"),
        1);
}

/* A Go program (its own system calls: no preload reaches it) and
 * busybox-static's dd get EIO on fsync under logs/, and succeed under
 * data/ and on stdout (the log says so). */
static const char syncer_go[] =
    "package main\n"
    "import (\"errors\"; \"fmt\"; \"os\"; \"syscall\")\n"
    "func name(err error) string {\n"
    "  var e syscall.Errno\n"
    "  if errors.As(err, &e) && e == syscall.EIO { return \"EIO\" }\n"
    "  return err.Error() }\n"
    "func try(p string) string {\n"
    "  f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0644)\n"
    "  if err != nil { return name(err) }\n"
    "  defer f.Close()\n"
    "  if _, err := f.Write([]byte(\"data\")); err != nil { return name(err) }\n"
    "  if err := f.Sync(); err != nil { return name(err) }\n"
    "  return \"ok\" }\n"
    "func main() { fmt.Printf(\"go logs=%s data=%s\", try(\"logs/x\"), try(\"data/y\")) }\n";

FL_TEST_ROOT_T(faults_disk_path, go_program_and_static_busybox_get_eio_by_path, 120)
{
    fl_test_need_root();
    if (access("/dev/fuse", R_OK | W_OK) != 0)
        FL_SKIP("no /dev/fuse");
    if (access("/bin/busybox", X_OK) != 0)
        FL_SKIP("no busybox (Debian package busybox-static: run ci/install-deps)");
    fl_test_go_build("syncer-go", syncer_go);
    char *out;
    int rc;
    const char *yaml = fl_test_write(
        "g.yaml",
        "name: it-disk-path-go\n"
        "hosts: [a]\n"
        "cluster: {w: [a]}\n"
        "run:\n"
        "  w:\n"
        "    command: |\n"
        "      mkdir -p logs data && {bin}/faultline emit --sync disk.go\n"
        "      dd='busybox dd if=/dev/zero bs=4096 count=1 conv=fsync'\n"
        "      $dd of=logs/b 2>/dev/null && l=ok || l=fail\n"
        "      $dd of=data/b 2>/dev/null && d=ok || d=fail\n"
        "      echo \"$({scenario_dir}/syncer-go) busybox logs=$l data=$d\"\n"
        "faults:\n"
        "  - {after: {event: disk.go, host: a}, disk: {host: a, path: 'logs/**', op: fsync, "
        "errno: EIO}}\n"
        "expect:\n"
        "  all:\n"
        "    w: {exit: 0, log_matches: '^go logs=EIO data=ok busybox logs=fail data=ok$'}\n");
    rc = run_yaml(&out, yaml);
    FL_ASSERT_MSG(rc == 0, "faultline run exited %d:\n%s", rc, out);
    FL_ASSERT_MSG(!strstr(out, "note:"), "a note on a fault that reaches the programs:\n%s", out);
    free(out);
    const char *db = test_db();
    out = NULL;
    fl_test_sh(&out, "sqlite3 %s \"SELECT hits FROM faults WHERE kind='disk'\"", db);
    /* busybox first (its dd lines come before the echo that runs the Go program) */
    FL_ASSERT_STREQ(out, "fsync logs/b (1), fsync logs/x (1)\n");
    free(out);
}

/* Two hosts whose disks the filesystem serves, each brought down and up
 * again: each start mounts a fresh filesystem and ends the old one, which
 * a host started while it was mounted keeps a copy of in its mount
 * namespace (the old one's end used to wait for that copy for ever). */
FL_TEST_ROOT_T(faults_disk_path, fs_restarts_end_the_old_one, 90)
{
    fl_test_need_root();
    if (access("/dev/fuse", R_OK | W_OK) != 0)
        FL_SKIP("no /dev/fuse");
    const char *yaml =
        fl_test_write("r.yaml", "name: it-disk-fs-restarts\n"
                                "hosts:\n"
                                "  a: {disk: {fs: true}}\n"
                                "  b: {disk: {fs: true}}\n"
                                "cluster: {x: [a], y: [b]}\n"
                                "run:\n"
                                "  command: |\n"
                                "    echo gen $FAULTLINE_GENERATION >> log.txt\n"
                                "    [ $FAULTLINE_GENERATION = 1 ] && exec cat log.txt\n"
                                "    sleep 60\n"
                                "faults:\n"
                                "  - {at: 500ms, crash_host: a, for: 100ms}\n"
                                "  - {at: 1s, restart: b}\n"
                                "timeout: 20s\n"
                                "expect:\n"
                                "  all:\n"
                                "    all: {exit: 0, log_matches: '^gen 1$'}\n");
    char *out;
    int rc = fl_test_sh(&out, "timeout -s KILL 60 %s run --no-db --out %s/o %s 2>&1",
                        fl_test_bin("faultline"), fl_test_dir(), yaml);
    FL_ASSERT_MSG(rc == 0, "faultline run exited %d:\n%s", rc, out);
    free(out);
}

/* A fault by path under a shared path (nfs/ then **) hits the operations of its
 * host there, through that host's own mount of the shared path, and not
 * another host's on the same files, nor the host's own disk. */
FL_TEST_ROOT_T(faults_disk_path, shared_path_fault_hits_its_host_only, 90)
{
    fl_test_need_root();
    if (access("/dev/fuse", R_OK | W_OK) != 0)
        FL_SKIP("no /dev/fuse");
    const char *yaml = fl_test_write(
        "s.yaml", "name: it-disk-path-shared\n"
                  "hosts: [a, b]\n"
                  "shared:\n"
                  "  - {path: nfs, hosts: [a, b]}\n"
                  "cluster: {x: [a], y: [b]}\n"
                  "run:\n"
                  "  command: |\n"
                  "    {bin}/faultline emit --sync ready\n"
                  "    dd='dd if=/dev/zero bs=1024 count=1 conv=fsync status=none'\n"
                  "    $dd of=nfs/$FAULTLINE_HOST 2>/dev/null && n=ok || n=fail\n"
                  "    $dd of=own 2>/dev/null && o=ok || o=fail\n"
                  "    echo \"$FAULTLINE_HOST nfs=$n own=$o\"\n"
                  "faults:\n"
                  "  - {after: {event: ready, host: a}, disk: {host: a, path: 'nfs/**', op: fsync, "
                  "errno: EIO}}\n"
                  "expect:\n"
                  "  all:\n"
                  "    x: {exit: 0, log_matches: '^a nfs=fail own=ok$'}\n"
                  "    y: {exit: 0, log_matches: '^b nfs=ok own=ok$'}\n");
    char *out;
    const char *db = test_db();
    int rc = run_yaml(&out, yaml);
    FL_ASSERT_MSG(rc == 0, "faultline run exited %d:\n%s", rc, out);
    free(out);
    out = NULL;
    fl_test_sh(&out, "sqlite3 %s \"SELECT hits FROM faults WHERE kind='disk'\"", db);
    FL_ASSERT_STREQ(out, "fsync nfs/a (1)\n");
    free(out);
}
