/*
 * test_faults_clock.c: clock faults reach every program, whatever it is
 * built with (harness/faults/clock.c, harness/sys/vclock.c).  Real
 * programs built by the test: one in Go (Debian's golang-go: it reads the
 * clock through the vDSO itself, never through the C library), one in C
 * linked statically (`cc -static`: no dynamic loader, no preload) and one
 * in Python (Debian's /usr/bin/python3).  Each prints what its clocks read;
 * the test compares that with the real time around the run, from its own
 * clock, which no fault moves.
 *   - clock_offset: 1h on host a, none on b: a's programs read real time
 *     plus an hour, b's real time; a child the Go program starts (`date`)
 *     and the task relaunched after a kill read the same as a's.
 *   - clock_drift: 10%: each program measures its wall clock against its
 *     monotonic one over 2 s: 1.1 +- 0.02.
 *   - clock_jump by -10s, five times, each at a line of a running Go
 *     program: it sees each step at its next read; the median time from
 *     its line to the step it sees is under 10 ms (the line goes through
 *     the harness, which applies the fault, and the step comes back).
 *   - a clock fault with for: steps back at its heal; clock: {drift}
 *     with heal: keep keeps the gain.
 */
#include "harness/tests/fl_test.h"

#include <glob.h>
#include <signal.h>
#include <sys/wait.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char clk_go[] =
    "package main\n"
    "import (\"fmt\"; \"os\"; \"os/exec\"; \"sort\"; \"strconv\"; \"time\")\n"
    "func main() {\n"
    "\tswitch os.Args[1] {\n"
    "\tcase \"now\":\n"
    "\t\tfmt.Printf(\"go wall=%d\\n\", time.Now().UnixNano())\n"
    "\t\tout, err := exec.Command(\"date\", \"+%s%N\").Output()\n"
    "\t\tif err != nil { fmt.Println(err); os.Exit(1) }\n"
    "\t\tfmt.Printf(\"go-child wall=%s\", out)\n"
    "\tcase \"drift\":\n"
    "\t\tt0 := time.Now(); w0 := t0.UnixNano()\n"
    "\t\ttime.Sleep(2 * time.Second)\n"
    "\t\tt1 := time.Now()\n"
    "\t\tfmt.Printf(\"go rate=%.4f\\n\", "
    "float64(t1.UnixNano()-w0)/float64(t1.Sub(t0).Nanoseconds()))\n"
    "\tcase \"trace\":\n"
    "\t\tstart := time.Now()\n"
    "\t\td := func() int64 { t := time.Now(); return (t.UnixNano() - start.UnixNano() - "
    "int64(t.Sub(start))) / 1e6 }\n"
    "\t\tfmt.Println(\"ready\")\n"
    "\t\tvar mx int64\n"
    "\t\tfor time.Since(start) < 1500*time.Millisecond {\n"
    "\t\t\tif v := d(); v > mx { mx = v }\n"
    "\t\t\ttime.Sleep(2 * time.Millisecond)\n"
    "\t\t}\n"
    "\t\tfmt.Printf(\"max d=%d\\nfinal d=%d\\n\", mx, d())\n"
    "\tcase \"jump\":\n"
    "\t\tn, _ := strconv.Atoi(os.Args[2])\n"
    "\t\tstart := time.Now()\n"
    "\t\tdiff := func() int64 { t := time.Now(); return t.UnixNano() - int64(t.Sub(start)) }\n"
    "\t\tvar lat []int64\n"
    "\t\tfor k := 1; k <= n; k++ {\n"
    "\t\t\tbefore := diff()\n"
    "\t\t\tready := time.Since(start)\n"
    "\t\t\tfmt.Printf(\"ready %d\\n\", k)\n"
    "\t\t\tfor {\n"
    "\t\t\t\td := diff()\n"
    "\t\t\t\tif d-before < -5e9 {\n"
    "\t\t\t\t\tus := (time.Since(start) - ready).Microseconds()\n"
    "\t\t\t\t\tlat = append(lat, us)\n"
    "\t\t\t\t\tfmt.Printf(\"seen %d after %d us by %.3f s\\n\", k, us, float64(d-before)/1e9)\n"
    "\t\t\t\t\tbreak\n"
    "\t\t\t\t}\n"
    "\t\t\t\tif time.Since(start) > 60*time.Second { fmt.Println(\"never seen\"); os.Exit(1) }\n"
    "\t\t\t\ttime.Sleep(100 * time.Microsecond)\n"
    "\t\t\t}\n"
    "\t\t\ttime.Sleep(50 * time.Millisecond)\n"
    "\t\t}\n"
    "\t\tsort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })\n"
    "\t\tfmt.Printf(\"median %d us\\n\", lat[len(lat)/2])\n"
    "\t}\n"
    "}\n";

static const char clk_c[] =
    "#include <stdio.h>\n#include <string.h>\n#include <sys/time.h>\n#include <time.h>\n"
    "#include <unistd.h>\n"
    "static double rd(clockid_t c) { struct timespec t; clock_gettime(c, &t);\n"
    "  return t.tv_sec + t.tv_nsec / 1e9; }\n"
    "int main(int argc, char **argv) {\n"
    "  if (!strcmp(argv[1], \"now\")) {\n"
    "    struct timespec t; clock_gettime(CLOCK_REALTIME, &t);\n"
    "    struct timeval tv; gettimeofday(&tv, 0);\n"
    "    printf(\"static wall=%lld\\nstatic-gtod wall=%lld\\nstatic-time wall=%lld\\n\",\n"
    "      t.tv_sec * 1000000000LL + t.tv_nsec, tv.tv_sec * 1000000000LL + tv.tv_usec * 1000LL,\n"
    "      (long long)time(0) * 1000000000LL);\n"
    "  } else {\n"
    "    double w = rd(CLOCK_REALTIME), m = rd(CLOCK_MONOTONIC);\n"
    "    sleep(2);\n"
    "    printf(\"static rate=%.4f\\n\", (rd(CLOCK_REALTIME) - w) / (rd(CLOCK_MONOTONIC) - m));\n"
    "  }\n"
    "  return 0;\n"
    "}\n";

static const char clk_py[] =
    "import sys, time\n"
    "if sys.argv[1] == 'now':\n"
    "    print('python wall=%d' % time.time_ns())\n"
    "else:\n"
    "    w, m = time.time(), time.monotonic()\n"
    "    time.sleep(2)\n"
    "    print('python rate=%.4f' % ((time.time() - w) / (time.monotonic() - m)))\n";

static void build_programs(void)
{
    if (access("/usr/lib/x86_64-linux-gnu/libc.a", R_OK) != 0 && access("/usr/lib/libc.a", R_OK))
        FL_SKIP("no static C library (libc6-dev)");
    if (access("/usr/bin/python3", X_OK) != 0)
        FL_SKIP("no /usr/bin/python3");
    fl_test_go_build("clk-go", clk_go);
    fl_test_write("clk.c", clk_c);
    fl_test_write("clk.py", clk_py);
    char *out;
    int rc = fl_test_sh(&out, "cd %s && cc -static -O1 -o clk-static clk.c", fl_test_dir());
    FL_REQUIRE_MSG(rc == 0, "building clk-static: %s", out);
    free(out);
}

static int64_t real_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int run(char **out, const char *yaml)
{
    return fl_test_sh(out, "%s run --keep --out %s/o --db %s/fl.db %s 2>&1",
                      fl_test_bin("faultline"), fl_test_dir(), fl_test_dir(), yaml);
}

/* Every log of host's tasks, one after another (malloc'd). */
static char *logs_of(const char *host)
{
    char pat[4300];
    snprintf(pat, sizeof pat, "%s/o/runs/*/logs/%s.*.log", fl_test_dir(), host);
    glob_t g;
    char *all = calloc(1, 1);
    size_t n = 0;
    if (glob(pat, 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; i++) {
            FILE *f = fopen(g.gl_pathv[i], "r");
            char line[512];
            while (f && fgets(line, sizeof line, f)) {
                size_t l = strlen(line);
                all = realloc(all, n + l + 1);
                memcpy(all + n, line, l + 1);
                n += l;
            }
            if (f)
                fclose(f);
        }
        globfree(&g);
    }
    return all;
}

/* Runs the scenario, which must pass; the logs of host a's tasks. */
static char *run_logs_of_a(const char *yaml)
{
    char *out;
    int rc = run(&out, yaml);
    FL_REQUIRE_MSG(rc == 0, "faultline run: %s", out);
    free(out);
    return logs_of("a");
}

/* Each "WHO wall=NS" line of text: NS - off within [lo, hi]; how many. */
static int check_walls(const char *text, int64_t off, int64_t lo, int64_t hi, const char *host)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, " wall=")); p++) {
        const char *who = p;
        while (who > text && who[-1] != '\n')
            who--;
        int64_t v = strtoll(p + 6, NULL, 10) - off;
        FL_ASSERT_MSG(v >= lo && v <= hi, "host %s: %.*s read %.3f s from real time", host,
                      (int)(p - who), who, (v < lo ? v - lo : v - hi) / 1e9);
        n++;
    }
    return n;
}

FL_TEST_ROOT_T(faults_clock, offset_reaches_go_static_python_children_relaunch, 120)
{
    fl_test_need_root();
    build_programs();
    const char *yaml = fl_test_write(
        "off.yaml",
        "name: it-clock-vdso-offset\n"
        "hosts:\n"
        "  a: {clock_offset: 1h}\n"
        "  b:\n"
        "cluster: {node: [a, b]}\n"
        "run:\n"
        "  node:\n"
        "    command: |\n"
        "      {scenario_dir}/clk-go now && {scenario_dir}/clk-static now &&\n"
        "      /usr/bin/python3 {scenario_dir}/clk.py now && echo \"sh wall=$(date +%s%N)\" &&\n"
        "      if [ \"$FAULTLINE_GENERATION\" = 0 ] && [ $FAULTLINE_HOST = a ]; then\n"
        "        echo gen0 done; exec sleep 60; fi\n"
        "faults:\n"
        "  - {on_log: {match: '^gen0 done', host: a}, kill: a, for: 10ms}\n"
        "expect:\n"
        "  all: {all: {exit: 0}}\n");
    int64_t lo = real_ns() - 1000000000LL; /* time() has whole seconds */
    char *a = run_logs_of_a(yaml), *b = logs_of("b");
    int64_t hi = real_ns();
    /* a: two generations of go, go's child, static x3, python, sh */
    FL_ASSERT_EQ(check_walls(a, 3600LL * 1000000000LL, lo, hi, "a"), 2 * 7);
    FL_ASSERT_EQ(check_walls(b, 0, lo, hi, "b"), 7);
    FL_ASSERT_CONTAINS(a, "go-child wall=");
    free(a);
    free(b);
}

FL_TEST_ROOT_T(faults_clock, drift_measured_by_each_program, 120)
{
    fl_test_need_root();
    build_programs();
    const char *yaml = fl_test_write(
        "drift.yaml", "name: it-clock-vdso-drift\n"
                      "hosts:\n"
                      "  a: {clock_drift: 10%}\n"
                      "cluster: {node: [a]}\n"
                      "run:\n"
                      "  node:\n"
                      "    command: |\n"
                      "      {scenario_dir}/clk-go drift & {scenario_dir}/clk-static drift &\n"
                      "      /usr/bin/python3 {scenario_dir}/clk.py drift & wait\n"
                      "expect:\n"
                      "  all: {all: {exit: 0}}\n");
    char *a = run_logs_of_a(yaml);
    int n = 0;
    for (const char *p = a; (p = strstr(p, " rate=")); p++, n++) {
        double v = strtod(p + 6, NULL);
        FL_ASSERT_MSG(fabs(v - 1.1) <= 0.02, "rate %.4f, not 1.1 +- 0.02: %s", v, a);
    }
    FL_ASSERT_EQ(n, 3);
    free(a);
}

FL_TEST_ROOT_T(faults_clock, jump_seen_by_running_go_program, 120)
{
    fl_test_need_root();
    build_programs();
    char faults[2048] = "";
    for (int k = 1; k <= 5; k++) {
        size_t l = strlen(faults);
        snprintf(faults + l, sizeof faults - l,
                 "  - {on_log: {match: '^ready %d$', host: a}, clock_jump: {host: a, by: -10s}}\n",
                 k);
    }
    char y[4096];
    snprintf(y, sizeof y,
             "name: it-clock-vdso-jump\n"
             "hosts:\n"
             "  a:\n"
             "cluster: {node: [a]}\n"
             "run:\n"
             "  node: {command: '{scenario_dir}/clk-go jump 5'}\n"
             "faults:\n%s"
             "expect:\n"
             "  all: {all: {exit: 0}}\n",
             faults);
    const char *yaml = fl_test_write("jump.yaml", y);
    char *a = run_logs_of_a(yaml);
    int n = 0;
    for (const char *p = a; (p = strstr(p, " by ")); p++, n++) {
        double by = strtod(p + 4, NULL);
        FL_ASSERT_MSG(by < -9.9 && by > -10.1, "a step of %.3f s, not -10 s: %s", by, a);
    }
    FL_ASSERT_EQ(n, 5);
    const char *m = strstr(a, "median ");
    FL_REQUIRE_MSG(m, "no median: %s", a);
    long us = atol(m + 7);
    printf("clock_jump seen by a running Go program: median %ld us after its line\n", us);
    FL_ASSERT_MSG(us < 10000, "median %ld us from the line to the step seen: %s", us, a);
    free(a);
}

/* A clock fault with for: is undone at its heal: an offset steps back; a
 * drift with heal: keep stops and keeps what it gained, which is its rate
 * times how long it held, as the harness recorded it. */
FL_TEST_ROOT_T(faults_clock, heal_steps_back_or_keeps_the_gain, 120)
{
    fl_test_need_root();
    build_programs();
    const char *yaml = fl_test_write(
        "heal.yaml",
        "name: it-clock-vdso-heal\n"
        "hosts:\n"
        "  a:\n"
        "cluster: {node: [a]}\n"
        "run:\n"
        "  node: {command: '{scenario_dir}/clk-go trace'}\n"
        "faults:\n"
        "  - {on_log: {match: '^ready$'}, clock: {host: a, offset: 30s}, for: 300ms}\n"
        "  - {on_log: {match: '^ready$'}, clock: {host: a, drift: 100%, heal: keep}, for: 500ms}\n"
        "expect:\n"
        "  all: {all: {exit: 0}}\n");
    char *a = run_logs_of_a(yaml);
    const char *mx = strstr(a, "max d="), *fin = strstr(a, "final d=");
    FL_REQUIRE_MSG(mx && fin, "no max/final: %s", a);
    long vmax = atol(mx + 6), vfin = atol(fin + 8);
    char db[4200];
    snprintf(db, sizeof db, "%s/fl.db", fl_test_dir());
    int held = fl_test_db_int(db, "SELECT healed_ms - applied_ms FROM faults WHERE kind = 'clock' "
                                  "AND detail LIKE '%drift%'");
    printf("offset 30s + drift 100%% (held %d ms): max %ld ms, after both heals %ld ms\n", held,
           vmax, vfin);
    /* the offset and what the drift gained while both held */
    FL_ASSERT_MSG(vmax >= 30000 && vmax <= 30000 + held + 50, "max %ld ms", vmax);
    /* the offset is gone; the drift's gain stays: 100% of the time it held */
    FL_ASSERT_MSG(labs(vfin - held) <= 25, "after the heals %ld ms, not the %d ms gained", vfin,
                  held);
    free(a);
}

/* Bad values are refused at load, with the file, line and field. */
FL_TEST(faults_clock, bad_values_name_file_line_and_field)
{
    static const struct {
        const char *fault, *want;
    } cases[] = {
        {"{at: 1s, clock: {host: a}}", "f.yaml:6:21: clock needs 'offset'"},
        {"{at: 1s, clock: {host: a, offset: soon}}",
         "clock 'offset' must be a duration like 5s or -250ms, not 'soon'"},
        {"{at: 1s, clock: {host: a, offset: 1s, heal: keep}}",
         "clock 'heal' is about a drift: this one has none"},
        {"{at: 1s, clock: {host: a, drift: 10%, clocks: tai}}",
         "'clocks' must be realtime (the wall clock, the default) or all"},
        {"{at: 1s, clock_jump: {host: a}}", "f.yaml:6:26: clock_jump needs 'by'"},
        {"{at: 1s, clock_jump: {host: a, by: 0s}}", "clock_jump 'by' must not be 0"},
        {"{at: 1s, clock_jump: {host: zz, by: 1s}}", "zz"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char y[512];
        snprintf(y, sizeof y,
                 "name: bad\nhosts: {a: }\ncluster: {n: [a]}\nrun: {n: {command: 'true'}}\n"
                 "faults:\n  - %s\n",
                 cases[i].fault);
        const char *path = fl_test_write("f.yaml", y);
        char *out;
        int rc = fl_test_sh(&out, "%s validate %s 2>&1", fl_test_bin("faultline"), path);
        FL_ASSERT_MSG(rc != 0, "%s: validate passed", cases[i].fault);
        FL_ASSERT_CONTAINS(out, cases[i].want);
        free(out);
    }
    const char *path =
        fl_test_write("f.yaml", "name: bad\nhosts:\n  a: {clock_offset: 1s, clock_via: ntp}\n"
                                "cluster: {n: [a]}\nrun: {n: {command: 'true'}}\n");
    char *out;
    FL_ASSERT(fl_test_sh(&out, "%s validate %s 2>&1", fl_test_bin("faultline"), path) != 0);
    FL_ASSERT_CONTAINS(out, "f.yaml:3:36: 'clock_via' must be vdso");
    free(out);
}

static bool a_is_up(void *arg)
{
    (void)arg;
    char *a = logs_of("a");
    bool up = strstr(a, "up\n") != NULL;
    free(a);
    return up;
}

/* `faultline exec` onto a host whose clock the run moves: the command, a
 * static program and a Go one, reads the host's clock too. */
FL_TEST_ROOT_T(faults_clock, exec_on_the_host_reads_its_clock, 120)
{
    fl_test_need_root();
    build_programs();
    const char *yaml = fl_test_write("hold.yaml", "name: it-clock-vdso-exec\n"
                                                  "hosts:\n"
                                                  "  a: {clock_offset: 1h}\n"
                                                  "cluster: {node: [a]}\n"
                                                  "run:\n"
                                                  "  node: {command: 'echo up; exec sleep 600'}\n"
                                                  "timeout: 10m\n");
    char o[4200], db[4200];
    snprintf(o, sizeof o, "%s/o", fl_test_dir());
    snprintf(db, sizeof db, "%s/fl.db", fl_test_dir());
    pid_t pid = fork();
    if (pid == 0) {
        execl(fl_test_bin("faultline"), "faultline", "run", "-q", "--out", o, "--db", db, yaml,
              (char *)NULL);
        _exit(127);
    }
    FL_REQUIRE_MSG(fl_test_wait_until(a_is_up, NULL, 30000), "the run did not come up");
    char *out;
    int64_t lo = real_ns() - 1000000000LL;
    int rc = fl_test_sh(&out,
                        "%s exec --out %s $(ls %s/runs) a -- sh -c '%s/clk-static now && "
                        "%s/clk-go now' 2>&1",
                        fl_test_bin("faultline"), o, o, fl_test_dir(), fl_test_dir());
    int64_t hi = real_ns();
    kill(pid, SIGTERM);
    int st;
    waitpid(pid, &st, 0);
    FL_ASSERT_MSG(rc == 0, "exec exited %d: %s", rc, out);
    FL_ASSERT_EQ(check_walls(out, 3600LL * 1000000000LL, lo, hi, "a (exec)"), 5);
    free(out);
}

/* clocks: all moves the monotonic clocks with the wall clock; the default
 * leaves them alone. */
FL_TEST_ROOT_T(faults_clock, clocks_all_moves_monotonic_too, 120)
{
    fl_test_need_root();
    build_programs();
    fl_test_write("mono.py", "import time\n"
                             "print(time.monotonic_ns() // 10**6, time.time_ns() // 10**6)\n");
    const char *yaml = fl_test_write(
        "mono.yaml",
        "name: it-clock-vdso-mono\n"
        "hosts: {a: , b: }\n"
        "cluster: {node: [a, b]}\n"
        "run:\n"
        "  node:\n"
        "    command: |\n"
        "      set -- $(/usr/bin/python3 {scenario_dir}/mono.py)\n"
        "      {bin}/faultline emit --sync clock.go\n"
        "      set -- $(/usr/bin/python3 {scenario_dir}/mono.py) $1 $2\n"
        "      echo \"monotonic $(( ($1 - $3) / 1000 ))s realtime $(( ($2 - $4) / 1000 ))s\"\n"
        "faults:\n"
        "  - {after: {event: clock.go, host: a}, clock_jump: {host: a, by: 5s, clocks: all}}\n"
        "  - {after: {event: clock.go, host: b}, clock_jump: {host: b, by: 5s}}\n"
        "expect:\n"
        "  all:\n"
        "    all: {exit: 0}\n"
        "    a: {log_matches: '^monotonic 5s realtime 5s$'}\n"
        "    b: {log_matches: '^monotonic 0s realtime 5s$'}\n");
    char *out;
    int rc = run(&out, yaml);
    FL_ASSERT_MSG(rc == 0, "faultline run: %s", out);
    free(out);
}

/* What the keeper met in review: a program in a PID namespace of its own
 * (unshare -p), one with 40000 arguments (its auxiliary vector
 * far up the stack), and processes paused by the freezer in the middle of
 * their exec (the keeper serves everyone else meanwhile; the run ends). */
FL_TEST_ROOT_T(faults_clock, nested_pid_namespace_huge_argv_and_pauses, 120)
{
    fl_test_need_root();
    const char *yaml = fl_test_write(
        "odd.yaml",
        "name: it-clock-vdso-odd\n"
        "hosts:\n"
        "  a: {clock_offset: 1h}\n"
        "cluster: {node: [a]}\n"
        "run:\n"
        "  node:\n"
        "    command: |\n"
        "      touch now\n"
        "      echo \"unshared $(( $(unshare -p -f date +%s) - $(stat -c %Y now) ))\"\n"
        "      t=$(/usr/bin/python3 -c 'import time; print(int(time.time()))' $(seq 40000))\n"
        "      echo \"big argv $(( t - $(stat -c %Y now) ))\"\n"
        "      end=$(( $(date +%s) + 2 ))\n"
        "      n=0; while [ $(date +%s) -lt $end ]; do /bin/true; n=$((n + 1)); done\n"
        "      echo \"looped $n\"\n"
        "faults:\n"
        "  - {on_log: {match: '^big argv'}, pause: a, for: 50ms}\n"
        "  - {on_log: {match: '^big argv'}, pause: a, for: 200ms}\n"
        "  - {on_log: {match: '^big argv'}, pause: a, for: 450ms}\n"
        "timeout: 60s\n"
        "expect:\n"
        "  all:\n"
        "    all: {exit: 0}\n"
        "    a: {log_matches: '^unshared (3599|3600|3601)$'}\n");
    char *out;
    int rc = run(&out, yaml);
    FL_ASSERT_MSG(rc == 0, "faultline run: %s", out);
    free(out);
    char *a = logs_of("a");
    FL_ASSERT_CONTAINS(a, "big argv 3");
    FL_ASSERT_CONTAINS(a, "looped ");
    free(a);
}
