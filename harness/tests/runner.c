/*
 * runner.c: the test runner behind `make check` (build/bin/fl-tests).
 *
 * Tests register themselves (fl_test.h) into a table; main() builds one CUnit
 * registry from the tests selected, one CUnit suite per suite name, and runs
 * it with CUnit's basic interface.  Each CUnit test function is a trampoline that forks: the child
 * runs the real test in its own process group with a fresh temporary
 * directory and reports failures and skips over a pipe as records; the parent
 * waits with a timeout (killing the whole group when it expires), turns each
 * failure record into a CUnit assertion failure, and removes the temporary
 * directory.  A crash or timeout is a failure naming the signal or the limit.
 *
 * A test that needs root is skipped, without being started, when the runner
 * is not root.  Usage (usage() below says it all): fl-tests [--list]
 * [--unit] [--layer L]... [PATTERN...].  The output ends with CUnit's run
 * summary and a line "N passed, N failed, N skipped".
 */
#include "harness/tests/fl_test.h"
#include "harness/sys/rundir.h"

#include <CUnit/Basic.h>
#include <CUnit/CUnit.h>
#include <sqlite3.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct test {
    const char *suite, *name;
    char layer[32]; /* from the file name: test_<layer>_<subject>.c */
    fl_test_fn fn;
    int timeout_s;
    enum fl_test_needs needs;
};

static struct test *tests;
static size_t ntests, cap;
static const struct test *current;
static int report_fd = -1; /* child: where records go */
static char tmpdir[PATH_MAX];
static int nskipped;

void fl_test_register(const char *file, const char *suite, const char *name, fl_test_fn fn,
                      int timeout_s, enum fl_test_needs needs)
{
    if (ntests == cap) {
        cap = cap ? cap * 2 : 64;
        tests = realloc(tests, cap * sizeof *tests);
        if (!tests)
            abort();
    }
    struct test *t = &tests[ntests++];
    *t = (struct test){
        .suite = suite, .name = name, .fn = fn, .timeout_s = timeout_s, .needs = needs};
    const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
    if (!strncmp(base, "test_", 5))
        base += 5;
    snprintf(t->layer, sizeof t->layer, "%.*s", (int)strcspn(base, "_."), base);
}

/* Record: one byte kind ('F' failure, 'X' fatal failure, 'S' skip), then a
 * line "file\tline\tmessage\n". */
static void send_record(char kind, const char *file, int line, const char *msg)
{
    char buf[4096];
    int n = snprintf(buf, sizeof buf, "%c%s\t%d\t", kind, file, line);
    for (const char *p = msg; *p && n < (int)sizeof buf - 2; p++)
        buf[n++] = (*p == '\n' || *p == '\t') ? ' ' : *p;
    buf[n++] = '\n';
    if (write(report_fd, buf, n) < 0)
        _exit(99);
}

void fl_test_fail(const char *file, int line, bool fatal, const char *fmt, ...)
{
    char msg[3000];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "    %s:%d: FAILED: %s\n", file, line, msg);
    send_record('F', file, line, msg);
    if (fatal)
        _exit(1);
}

void fl_test_skip(const char *fmt, ...)
{
    char msg[1000];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    send_record('S', "", 0, msg);
    _exit(0);
}

const char *fl_test_dir(void)
{
    return tmpdir;
}

const char *fl_test_root(void)
{
    static char root[PATH_MAX];
    if (root[0])
        return root;
    const char *env = getenv("FL_ROOT");
    if (env && *env) {
        snprintf(root, sizeof root, "%s", env);
        return root;
    }
    ssize_t n = readlink("/proc/self/exe", root, sizeof root - 1);
    if (n <= 0)
        abort();
    root[n] = 0;
    /* <root>/build/bin/fl-tests (or build-asan/bin) -> <root> */
    for (int i = 0; i < 3; i++) {
        char *s = strrchr(root, '/');
        if (s)
            *s = 0;
    }
    return root;
}

const char *fl_test_shared(void)
{
    static char shared[PATH_MAX];
    const char *env = getenv("FL_SHARED");
    if (env && *env)
        snprintf(shared, sizeof shared, "%s", env);
    else
        snprintf(shared, sizeof shared, "%s/../shared", fl_test_root());
    struct stat st;
    return stat(shared, &st) == 0 && S_ISDIR(st.st_mode) ? shared : NULL;
}

/* The folder this runner lies in (<root>/build/bin, or build-asan/bin for
 * `make asan`): the programs the tests run are the ones built with it. */
static const char *bin_dir(void)
{
    static char dir[PATH_MAX];
    if (dir[0])
        return dir;
    ssize_t n = readlink("/proc/self/exe", dir, sizeof dir - 1);
    if (n <= 0)
        abort();
    dir[n] = 0;
    char *s = strrchr(dir, '/');
    if (s)
        *s = 0;
    return dir;
}

const char *fl_test_bin(const char *name)
{
    static char path[4][PATH_MAX];
    static int next;
    char *p = path[next++ % 4];
    snprintf(p, PATH_MAX, "%s/%s", bin_dir(), name);
    return p;
}

void fl_test_asan_options(const char *opts)
{
    if (!FL_ASAN)
        return;
    /* of two settings of one option, ASan takes the last */
    const char *old = getenv("ASAN_OPTIONS");
    char *v;
    if (asprintf(&v, "%s%s%s", old ? old : "", old && *old ? ":" : "", opts) < 0)
        abort();
    setenv("ASAN_OPTIONS", v, 1);
    free(v);
}

void fl_test_need_root(void)
{
    if (geteuid() != 0)
        FL_SKIP("needs root (namespaces, mounts)");
}

void fl_test_scenario_passes(const char *name)
{
    char *out;
    int rc =
        fl_test_sh(&out, "%s run -q --out %s/o --db %s/fl.db %s/harness/tests/scenarios/%s 2>&1",
                   fl_test_bin("faultline"), fl_test_dir(), fl_test_dir(), fl_test_root(), name);
    FL_ASSERT_MSG(rc == 0, "faultline run %s exited %d:\n%s", name, rc, out);
    free(out);
}

pid_t fl_test_scenario_start(const char *name)
{
    char out[4096], db[4096], path[4096];
    snprintf(out, sizeof out, "%s/out", fl_test_dir());
    snprintf(db, sizeof db, "%s/fl.db", fl_test_dir());
    snprintf(path, sizeof path, "%s/harness/tests/scenarios/%s", fl_test_root(), name);
    const char *bin = fl_test_bin("faultline");
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        execl(bin, "faultline", "run", "-q", "--out", out, "--db", db, path, (char *)NULL);
        _exit(127);
    }
    return pid;
}

bool fl_test_wait_until(bool (*pred)(void *), void *arg, int ms)
{
    for (int i = 0; i < ms / 10; i++) {
        if (pred(arg))
            return true;
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
    }
    return pred(arg);
}

size_t fl_test_widest_line(const char *s)
{
    size_t most = 0, w = 0;
    for (; *s; s++) {
        if (*s == '\n') {
            most = w > most ? w : most;
            w = 0;
        } else if (*s != '\r' && (*s & 0xc0) != 0x80) {
            w++;
        }
    }
    return w > most ? w : most;
}

int fl_test_scenario_db_int(const char *sql)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/fl.db", fl_test_dir());
    return fl_test_db_int(path, sql);
}

int fl_test_count_run_processes(const char *run_id)
{
    return fl_test_run_processes(run_id, NULL, 0);
}

int fl_test_run_processes(const char *run_id, pid_t *pids, size_t max)
{
    char want[160];
    snprintf(want, sizeof want, "FAULTLINE_RUN=%s", run_id);
    int n = 0;
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        int pid = atoi(e->d_name);
        if (pid <= 0)
            continue;
        char path[64], *env = NULL;
        size_t len = 0;
        snprintf(path, sizeof path, "/proc/%d/environ", pid);
        if (fl_read_file(path, &env, &len) < 0)
            continue;
        for (size_t off = 0; off < len; off += strlen(env + off) + 1)
            if (!strcmp(env + off, want)) {
                if ((size_t)n < max)
                    pids[n] = pid;
                n++;
                break;
            }
        free(env);
    }
    if (d)
        closedir(d);
    return n;
}

int fl_test_db_int(const char *path, const char *sql)
{
    sqlite3 *db;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        sqlite3_close(db);
        return -1;
    }
    sqlite3_stmt *st;
    int n = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return n;
}

const char *fl_test_write(const char *name, const char *text)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/%s", fl_test_dir(), name);
    FILE *f = fopen(path, "w");
    FL_REQUIRE(f != NULL);
    fputs(text, f);
    fclose(f);
    return path;
}

void fl_test_go_build(const char *name, const char *src)
{
    if (fl_test_sh(NULL, "command -v go >/dev/null") != 0)
        FL_SKIP("no Go toolchain (Debian package golang-go: run ci/install-deps)");
    char dir[128], *out;
    snprintf(dir, sizeof dir, "%s.go.d", name);
    fl_test_sh(NULL, "mkdir -p %s/%s", fl_test_dir(), dir);
    snprintf(dir + strlen(dir), sizeof dir - strlen(dir), "/main.go");
    fl_test_write(dir, src);
    int rc = fl_test_sh(&out,
                        "cd %s/%s.go.d && HOME=%s GOCACHE=%s/gocache GO111MODULE=off GOFLAGS= "
                        "CGO_ENABLED=0 go build -o ../%s main.go 2>&1",
                        fl_test_dir(), name, fl_test_dir(), fl_test_dir(), name);
    FL_REQUIRE_MSG(rc == 0, "go build of %s: %s", name, out);
    free(out);
}

int fl_test_sh(char **out, const char *fmt, ...)
{
    char *cmd;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&cmd, fmt, ap) < 0)
        abort();
    va_end(ap);
    int st;
    if (out) {
        FILE *f = popen(cmd, "r");
        if (!f)
            abort();
        size_t len = 0, cap_ = 4096;
        char *buf = malloc(cap_);
        size_t n;
        while ((n = fread(buf + len, 1, cap_ - len - 1, f)) > 0) {
            len += n;
            if (cap_ - len < 2) {
                cap_ *= 2;
                buf = realloc(buf, cap_);
            }
        }
        buf[len] = 0;
        *out = buf;
        st = pclose(f);
    } else {
        st = system(cmd);
    }
    free(cmd);
    if (st < 0)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static const struct test *find_current(void)
{
    CU_pTest t = CU_get_current_test();
    CU_pSuite s = CU_get_current_suite();
    for (size_t i = 0; t && s && i < ntests; i++)
        if (!strcmp(tests[i].suite, s->pName) && !strcmp(tests[i].name, t->pName))
            return &tests[i];
    return NULL;
}

/* Parent side: turn the child's records into CUnit results. */
/* Reports the records a test sent; *skipped and *failed say whether it
 * skipped and whether it reported a failure. */
static void handle_records(char *buf, bool *skipped, bool *failed)
{
    char *save = NULL;
    for (char *rec = strtok_r(buf, "\n", &save); rec; rec = strtok_r(NULL, "\n", &save)) {
        char kind = rec[0];
        char *file = rec + 1, *tab1 = strchr(file, '\t');
        if (!tab1)
            continue;
        *tab1 = 0;
        char *tab2 = strchr(tab1 + 1, '\t');
        if (!tab2)
            continue;
        *tab2 = 0;
        int line = atoi(tab1 + 1);
        char *msg = tab2 + 1;
        if (kind == 'S') {
            printf("SKIP %s/%s: %s ... ", current->suite, current->name, msg);
            *skipped = true;
        } else {
            /* CUnit copies the strings into its failure record */
            CU_assertImplementation(CU_FALSE, line, msg, file, "", CU_FALSE);
            *failed = true;
        }
    }
}

static void trampoline(void)
{
    const struct test *t = current = find_current();
    if (!t)
        return;
    if (t->needs == FL_NEEDS_ROOT && geteuid() != 0) {
        printf("SKIP %s/%s: needs root (namespaces, mounts) ... ", t->suite, t->name);
        nskipped++;
        return;
    }
    snprintf(tmpdir, sizeof tmpdir, "%s/fl-test-%s-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", t->name);
    if (!mkdtemp(tmpdir)) {
        CU_assertImplementation(CU_FALSE, 0, "mkdtemp failed", "runner.c", "", CU_FALSE);
        return;
    }
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        abort();
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        close(p[0]);
        report_fd = p[1];
        signal(SIGPIPE, SIG_DFL);
        t->fn();
        fflush(stdout);
        fflush(stderr);
        _exit(0);
    }
    setpgid(pid, pid);
    close(p[1]);
    size_t len = 0, cap_ = 4096;
    char *buf = malloc(cap_);
    double deadline = now_s() + t->timeout_s;
    bool timed_out = false;
    for (;;) {
        int left = (int)((deadline - now_s()) * 1000);
        if (left <= 0) {
            timed_out = true;
            break;
        }
        struct pollfd pfd = {.fd = p[0], .events = POLLIN};
        int r = poll(&pfd, 1, left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0) {
            timed_out = true;
            break;
        }
        if (cap_ - len < 1024)
            buf = realloc(buf, cap_ *= 2);
        ssize_t n = read(p[0], buf + len, cap_ - len - 1);
        if (n <= 0)
            break;
        len += n;
    }
    buf[len] = 0;
    close(p[0]);
    if (timed_out)
        kill(-pid, SIGKILL);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    /* Whatever the test left in its group (a server it started) goes too. */
    kill(-pid, SIGKILL);
    bool skipped = false, failed = false;
    handle_records(buf, &skipped, &failed);
    free(buf);
    char msg[256];
    if (timed_out) {
        snprintf(msg, sizeof msg, "test timed out after %d s (killed)", t->timeout_s);
        CU_assertImplementation(CU_FALSE, 0, msg, "runner", "", CU_FALSE);
    } else if (WIFSIGNALED(st)) {
        snprintf(msg, sizeof msg, "test crashed: %s", strsignal(WTERMSIG(st)));
        CU_assertImplementation(CU_FALSE, 0, msg, "runner", "", CU_FALSE);
    } else if (WIFEXITED(st) && WEXITSTATUS(st) != 0 && !(WEXITSTATUS(st) == 1 && failed)) {
        /* 1 is a fatal assertion's exit, once it has reported itself */
        snprintf(msg, sizeof msg, "test exited with status %d", WEXITSTATUS(st));
        CU_assertImplementation(CU_FALSE, 0, msg, "runner", "", CU_FALSE);
        failed = true;
    }
    if (skipped && !failed && !timed_out && !WIFSIGNALED(st))
        nskipped++;
    nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

static int cmp_test(const void *a, const void *b)
{
    const struct test *x = a, *y = b;
    int c = strcmp(x->suite, y->suite);
    return c ? c : strcmp(x->name, y->name);
}

/* What main() selects: every filter given must hold. */
struct selection {
    bool unit;           /* only the tests that need nothing */
    const char **layers; /* NULL-terminated; empty: every layer */
    char **patterns;     /* a test whose suite/name contains one of them */
    int npatterns;
};

static bool selected(const struct test *t, const struct selection *sel)
{
    if (sel->unit && t->needs != FL_NEEDS_NOTHING)
        return false;
    if (sel->layers[0]) {
        int i = 0;
        while (sel->layers[i] && strcmp(sel->layers[i], t->layer))
            i++;
        if (!sel->layers[i])
            return false;
    }
    if (sel->npatterns == 0)
        return true;
    char full[512];
    snprintf(full, sizeof full, "%s/%s", t->suite, t->name);
    for (int i = 0; i < sel->npatterns; i++)
        if (strstr(full, sel->patterns[i]))
            return true;
    return false;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: fl-tests [--list] [--unit] [--layer L]... [PATTERN...]\n"
               "Runs faultline's tests, each in a forked child with a timeout, and ends with\n"
               "\"N passed, N failed, N skipped\" (exit status 1 when a test failed).\n"
               "  -l, --list   list the selected tests instead, one a line:\n"
               "               \"suite/name [unit|cluster|root]\"; unit tests need nothing,\n"
               "               cluster tests start psrt processes on loopback (any user,\n"
               "               seconds each), root tests need root (namespaces, mounts,\n"
               "               cgroups, nftables) and are skipped for another user\n"
               "  --unit       only the unit tests (`make check-unit`: any user, seconds)\n"
               "  --layer L    only the tests of layer L, from files test_L_*.c: a harness\n"
               "               layer (cli soak engine load faults run scenario record sys\n"
               "               base), or psrt, ckpt, netem, fusedisk, reports; may be repeated\n"
               "               (`make check LAYER=L`)\n"
               "  PATTERN      only the tests whose \"suite/name\" contains PATTERN (any one\n"
               "               of several; `TESTS=PATTERN make check`)\n"
               "  -h, --help   this text\n"
               "Filters combine: `fl-tests --unit --layer load disk` runs the unit tests of\n"
               "layer load whose suite/name contains \"disk\".\n"
               "Environment: FL_SHARED (the shared/ folder), FL_ROOT (the source tree),\n"
               "TMPDIR (where each test's directory is made).\n");
}

static const char *const needs_word[] = {
    [FL_NEEDS_NOTHING] = "unit", [FL_NEEDS_CLUSTER] = "cluster", [FL_NEEDS_ROOT] = "root"};

/* True when some registered test is of layer l. */
static bool known_layer(const char *l)
{
    for (size_t i = 0; i < ntests; i++)
        if (!strcmp(tests[i].layer, l))
            return true;
    return false;
}

/* main() without the selection's arrays, which main frees after it (one
 * slot per argument each). */
static int run(int argc, char **argv, const char **layers, char **patterns)
{
    bool list = false;
    struct selection sel = {.layers = layers, .patterns = patterns};
    int nlayers = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "-l") || !strcmp(a, "--list")) {
            list = true;
        } else if (!strcmp(a, "--unit")) {
            sel.unit = true;
        } else if (!strcmp(a, "--layer")) {
            if (i + 1 == argc) {
                fprintf(stderr, "fl-tests: --layer needs a layer (see --help)\n");
                return 2;
            }
            if (!known_layer(argv[++i])) {
                fprintf(stderr, "fl-tests: no test of layer '%s' (see --help)\n", argv[i]);
                return 2;
            }
            layers[nlayers++] = argv[i];
        } else if (a[0] == '-') {
            fprintf(stderr, "fl-tests: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        } else {
            sel.patterns[sel.npatterns++] = argv[i];
        }
    }
    qsort(tests, ntests, sizeof *tests, cmp_test);
    if (list) {
        for (size_t i = 0; i < ntests; i++)
            if (selected(&tests[i], &sel))
                printf("%s/%s [%s]\n", tests[i].suite, tests[i].name, needs_word[tests[i].needs]);
        return 0;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    CU_pSuite suite = NULL;
    const char *suite_name = NULL;
    size_t nsel = 0;
    for (size_t i = 0; i < ntests; i++) {
        if (!selected(&tests[i], &sel))
            continue;
        if (!suite_name || strcmp(suite_name, tests[i].suite)) {
            suite_name = tests[i].suite;
            suite = CU_add_suite(suite_name, NULL, NULL);
        }
        CU_add_test(suite, tests[i].name, trampoline);
        nsel++;
    }
    if (nsel == 0) {
        fprintf(stderr, "fl-tests: no test matches\n");
        return 2;
    }
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    /* Count failed tests (not assertions) from the failure list. */
    unsigned failed = 0;
    const char *last_suite = NULL, *last_test = NULL;
    for (CU_pFailureRecord f = CU_get_failure_list(); f; f = f->pNext) {
        if (f->pTest && f->pSuite &&
            (last_test != f->pTest->pName || last_suite != f->pSuite->pName)) {
            failed++;
            last_test = f->pTest->pName;
            last_suite = f->pSuite->pName;
        }
    }
    unsigned ran = CU_get_number_of_tests_run();
    unsigned passed = ran - failed - (unsigned)nskipped;
    printf("\n%u passed, %u failed, %d skipped\n", passed, failed, nskipped);
    CU_cleanup_registry();
    return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
    const char **layers = calloc(argc, sizeof *layers);
    char **patterns = calloc(argc, sizeof *patterns);
    if (!layers || !patterns)
        abort();
    int rc = run(argc, argv, layers, patterns);
    free(layers);
    free(patterns);
    return rc;
}
