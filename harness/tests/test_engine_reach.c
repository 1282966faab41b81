/*
 * test_engine_reach.c: a fault that works through a preload (disk:,
 * clock_offset, unsynced: lose) says so when it cannot reach the program it
 * targets.  Real programs, built by the test: a small writer (writes N KiB
 * to a file in 64 KiB writes, fsyncs when asked, then may wait for ever)
 * linked statically (`cc -static`, glibc's libc.a from libc6-dev) and
 * dynamically, and the same writer in Go (golang-go, from ci/install-deps;
 * skipped where `go` is missing).  The notes
 * must be printed under the verdict and recorded in runs.notes, name the
 * static or Go program and never the dynamic one; a crash with unsynced:
 * lose must leave the disk of a host whose program it could not see as it
 * was, and say "no sync was recorded" when a dynamic program wrote much and
 * never synced.
 */
#include "harness/sys/exe_kind.h"
#include "harness/tests/fl_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char writer_c[] =
    "#include <fcntl.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n"
    "#include <unistd.h>\n"
    "int main(int argc, char **argv) {\n"
    "    if (argc < 3) return 2;\n"
    "    int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);\n"
    "    if (fd < 0) { perror(\"open\"); return 1; }\n"
    "    static char buf[65536];\n"
    "    memset(buf, 'x', sizeof buf);\n"
    "    for (long i = 0; i < atol(argv[2]) / 64; i++)\n"
    "        if (write(fd, buf, sizeof buf) != sizeof buf) { perror(\"write\"); return 1; }\n"
    "    if (argc > 3 && strchr(argv[3], 's') && fsync(fd) < 0) { perror(\"fsync\"); return 1; }\n"
    "    close(fd);\n"
    "    printf(\"wrote %s KiB\\n\", argv[2]);\n"
    "    fflush(stdout);\n"
    "    if (argc > 3 && strchr(argv[3], 'h')) pause();\n"
    "    return 0;\n"
    "}\n";

static const char writer_go[] = "package main\n"
                                "import (\"fmt\"; \"os\"; \"strconv\")\n"
                                "func main() {\n"
                                "\tf, err := os.Create(os.Args[1])\n"
                                "\tif err != nil { fmt.Println(err); os.Exit(1) }\n"
                                "\tkib, _ := strconv.Atoi(os.Args[2])\n"
                                "\tbuf := make([]byte, 65536)\n"
                                "\tfor i := 0; i < kib/64; i++ {\n"
                                "\t\tif _, err := f.Write(buf); err != nil {\n"
                                "\t\t\tfmt.Println(err); os.Exit(1) } }\n"
                                "\tf.Close()\n"
                                "\tfmt.Printf(\"wrote %d KiB\\n\", kib)\n"
                                "}\n";

/* writer-static and writer-dyn in the test's directory (the scenario's,
 * which every host sees). */
static void build_writers(void)
{
    if (access("/usr/lib/x86_64-linux-gnu/libc.a", R_OK) != 0 && access("/usr/lib/libc.a", R_OK))
        FL_SKIP("no static C library (libc6-dev)");
    fl_test_write("writer.c", writer_c);
    char *out;
    int rc = fl_test_sh(&out,
                        "cd %s && cc -static -O1 -o writer-static writer.c && "
                        "cc -O1 -o writer-dyn writer.c",
                        fl_test_dir());
    FL_REQUIRE_MSG(rc == 0, "building the writers: %s", out);
    free(out);
}

static int run(char **out, const char *yaml)
{
    return fl_test_sh(out, "%s run --out %s/o --db %s/fl.db %s 2>&1", fl_test_bin("faultline"),
                      fl_test_dir(), fl_test_dir(), yaml);
}

static int db_int(const char *sql)
{
    char db[4200];
    snprintf(db, sizeof db, "%s/fl.db", fl_test_dir());
    return fl_test_db_int(db, sql);
}

/* The writers' kinds, as the harness tells them. */
FL_TEST_ROOT_T(engine_reach, static_and_dynamic_writers_are_told_apart, 60)
{
    fl_test_need_root();
    build_writers();
    char p[4200];
    snprintf(p, sizeof p, "%s/writer-static", fl_test_dir());
    FL_ASSERT_EQ(fl_exe_kind_path(p), FL_EXE_STATIC);
    snprintf(p, sizeof p, "%s/writer-dyn", fl_test_dir());
    FL_ASSERT_EQ(fl_exe_kind_path(p), FL_EXE_DYNAMIC);
    snprintf(p, sizeof p, "%s/writer.c", fl_test_dir());
    FL_ASSERT_EQ(fl_exe_kind_path(p), FL_EXE_OTHER);
    FL_ASSERT_EQ(fl_exe_kind_path("/bin/sh"), FL_EXE_DYNAMIC);
}

/* A disk fault and a clock offset on a static program: a note each, in the
 * output and the database; none for the dynamic program beside it, which
 * the disk fault does reach (its write fails). */
FL_TEST_ROOT_T(engine_reach, static_program_under_disk_and_clock, 90)
{
    fl_test_need_root();
    build_writers();
    const char *yaml =
        fl_test_write("d.yaml", "name: it-reach-disk\n"
                                "hosts:\n"
                                "  a: {}\n"
                                "  c: {clock_offset: 1h, clock_via: libc}\n"
                                "cluster: {s: [a], d: [a], k: [c]}\n"
                                "run:\n"
                                "  s: {command: '{scenario_dir}/writer-static out.bin 256'}\n"
                                "  d: {command: '{scenario_dir}/writer-dyn out2.bin 256'}\n"
                                "  k: {command: 'date && {scenario_dir}/writer-static t.bin 64'}\n"
                                "faults:\n"
                                "  - {at: 0s, disk: {host: a, call: write, errno: EIO}}\n"
                                "expect:\n"
                                "  all:\n"
                                "    s: {exit: 0, log_matches: '^wrote 256 KiB$'}\n"
                                "    d: {exit: 1, log_matches: 'Input/output error'}\n"
                                "    k: {exit: 0}\n");
    char *out;
    int rc = run(&out, yaml);
    FL_ASSERT_MSG(rc == 0, "faultline run exited %d:\n%s", rc, out);
    FL_ASSERT_CONTAINS(out, "note: fault 1 (");
    FL_ASSERT_CONTAINS(out, "d.yaml:11, disk a call=write errno=EIO): ");
    FL_ASSERT_CONTAINS(out, "/writer-static on a is statically linked");
    FL_ASSERT_CONTAINS(out, "the fault does nothing to it");
    FL_ASSERT_CONTAINS(out, "note: host c's clock_offset (");
    FL_ASSERT_CONTAINS(out, "/writer-static on c is statically linked");
    FL_ASSERT_MSG(!strstr(out, "writer-dyn on"), "a note on the dynamic writer:\n%s", out);
    free(out);
    FL_ASSERT_EQ(db_int("SELECT count(*) FROM runs WHERE notes LIKE "
                        "'%writer-static on a is statically linked%the fault does nothing%'"),
                 1);
    FL_ASSERT_EQ(db_int("SELECT count(*) FROM runs WHERE notes LIKE '%clock_offset%'"), 1);
    FL_ASSERT_EQ(db_int("SELECT count(*) FROM runs WHERE notes LIKE '%writer-dyn%'"), 0);
}

/* unsynced: lose.  A static program that wrote and synced 2 MiB, started so
 * that no command word names it (through a variable) and still running at
 * the crash: seen alive, noted, and the disk is left as it was (the file is
 * there).  A dynamic program that wrote 2 MiB and never synced: the loss is
 * applied, with the note that no sync was recorded.  One that synced: no
 * note. */
FL_TEST_ROOT_T(engine_reach, crash_lose_on_unseen_program, 120)
{
    fl_test_need_root();
    build_writers();
    static const char tmpl[] =
        "name: it-reach-crash-%s\n"
        "hosts: [a]\n"
        "cluster: {w: [a]}\n"
        "run:\n"
        "  command: 'W={scenario_dir}/%s; $W data.bin 2048 %s'\n"
        "faults:\n"
        "  - {on_log: {host: a, match: '^wrote'}, crash_host: a, unsynced: lose}\n"
        "timeout: 20s\n"
        "expect:\n"
        "  all:\n"
        "    w: {signal: SIGKILL}\n"
        "    files: [{host: a, path: data.bin, exists: %s}]\n";
    char text[2048], *out;
    snprintf(text, sizeof text, tmpl, "static", "writer-static", "sh", "true");
    int rc = run(&out, fl_test_write("s.yaml", text));
    FL_ASSERT_MSG(rc == 0, "faultline run exited %d:\n%s", rc, out);
    FL_ASSERT_CONTAINS(out, "note: fault 1 (");
    FL_ASSERT_CONTAINS(out, "s.yaml:7, crash_host a");
    FL_ASSERT_CONTAINS(out, "/writer-static on a is statically linked");
    FL_ASSERT_CONTAINS(out, "the crash leaves the disk as it was (nothing lost)");
    free(out);
    FL_ASSERT_EQ(db_int("SELECT count(*) FROM faults WHERE detail LIKE '%not applied%'"), 1);
    FL_ASSERT_EQ(db_int("SELECT count(*) FROM runs WHERE notes LIKE '%writer-static on a%'"), 1);

    snprintf(text, sizeof text, tmpl, "nosync", "writer-dyn", "h", "false");
    rc = run(&out, fl_test_write("n.yaml", text));
    FL_ASSERT_MSG(rc == 0, "faultline run exited %d:\n%s", rc, out);
    FL_ASSERT_CONTAINS(out, "note: host a crashed with 2.0 MiB unsynced and no sync was recorded");
    FL_ASSERT_CONTAINS(out, "the loss was applied");
    free(out);

    /* synced (the file; not its directory entry, so it is lost all the same) */
    snprintf(text, sizeof text, tmpl, "synced", "writer-dyn", "sh", "false");
    rc = run(&out, fl_test_write("y.yaml", text));
    FL_ASSERT_MSG(rc == 0, "faultline run exited %d:\n%s", rc, out);
    FL_ASSERT_MSG(!strstr(out, "note:"), "a note on a program whose syncs were seen:\n%s", out);
    free(out);
}

/* A Go program under a disk fault: noted as Go (it writes with system calls
 * of its own: the fault does nothing to it). */
FL_TEST_ROOT_T(engine_reach, disk_fault_on_a_go_program_says_so, 120)
{
    fl_test_need_root();
    fl_test_go_build("writer-go", writer_go);
    char *out;
    int rc;
    char p[4200];
    snprintf(p, sizeof p, "%s/writer-go", fl_test_dir());
    FL_ASSERT_EQ(fl_exe_kind_path(p), FL_EXE_GO);
    const char *yaml =
        fl_test_write("g.yaml", "name: it-reach-go\n"
                                "hosts: [a]\n"
                                "cluster: {g: [a]}\n"
                                "run: {command: '{scenario_dir}/writer-go out.bin 256'}\n"
                                "faults:\n"
                                "  - {at: 0s, disk: {host: a, call: write, errno: EIO}}\n"
                                "expect:\n"
                                "  all:\n"
                                "    g: {exit: 0, log_matches: '^wrote 256 KiB$'}\n");
    rc = run(&out, yaml);
    FL_ASSERT_MSG(rc == 0, "faultline run exited %d:\n%s", rc, out);
    FL_ASSERT_CONTAINS(out, "/writer-go on a is a Go binary");
    FL_ASSERT_CONTAINS(out, "the fault does nothing to it");
    free(out);
}

/* A program the host put on its own layer (/usr/local/bin, not on the
 * machine) is found where the host finds it: the first generation copies
 * the static writer there, a kill relaunches the task, and the second runs
 * it by its bare name under a clock offset; it exits before the run
 * stops, so only the look at the command's words can see it. */
FL_TEST_ROOT_T(engine_reach, program_on_the_hosts_own_layer_is_found, 90)
{
    fl_test_need_root();
    build_writers();
    FL_REQUIRE_MSG(access("/usr/local/bin/fl-it-layer-writer", F_OK) != 0,
                   "/usr/local/bin/fl-it-layer-writer is on the machine");
    const char *yaml = fl_test_write(
        "l.yaml", "name: it-reach-layer\n"
                  "hosts:\n"
                  "  c: {clock_offset: 1h, clock_via: libc}\n"
                  "cluster: {k: [c]}\n"
                  "run:\n"
                  "  k:\n"
                  "    command: >\n"
                  "      if [ \"$FAULTLINE_GENERATION\" = 0 ]; then\n"
                  "        cp {scenario_dir}/writer-static /usr/local/bin/fl-it-layer-writer &&\n"
                  "        {bin}/faultline emit --sync copied && sleep 30;\n"
                  "      else fl-it-layer-writer t.bin 64; fi\n"
                  "faults:\n"
                  "  - {after: {event: copied}, kill: c, for: 100ms}\n"
                  "expect:\n"
                  "  all:\n"
                  "    k: {exit: 0, log_matches: '^wrote 64 KiB$'}\n");
    char *out;
    int rc = run(&out, yaml);
    FL_ASSERT_MSG(rc == 0, "faultline run exited %d:\n%s", rc, out);
    FL_ASSERT_CONTAINS(out, "note: host c's clock_offset (");
    FL_ASSERT_CONTAINS(out, "fl-it-layer-writer on c is statically linked");
    free(out);
    FL_ASSERT_MSG(access("/usr/local/bin/fl-it-layer-writer", F_OK) != 0,
                  "the host's program is on the machine");
}
