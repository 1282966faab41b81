/*
 * fl_test.h: how faultline's tests are written.
 *
 * Every test in the tree is registered (by a constructor, so no central list
 * needs editing) into one CUnit registry run by build/bin/fl-tests.  Each test
 * runs in a forked child, in its own process group, with a timeout; its
 * assertions are reported back to the parent, which records them in CUnit.
 * Assertions print both sides of a failed comparison.  A test that cannot run
 * here calls FL_SKIP("why") and is counted as skipped, not passed.
 *
 *   FL_TEST(ckpt_bundle, bundle_roundtrip_every_dtype) { ... }
 *   FL_TEST_T(record_db, events_are_cheap, 120) { ... }    // 120 s timeout
 *   FL_TEST_CLUSTER_T(psrt_train, linear_2ps_3workers_reaches_target, 40) { ... }
 *   FL_TEST_ROOT_T(engine_run, run_partition_blocks_then_heals, 60) { ... }
 *
 * A test says what it needs by the macro: FL_TEST and FL_TEST_T need nothing
 * (a unit test: any user, no namespaces, mounts, cgroups or nftables, a
 * few seconds at most; `make check-unit` runs only those); FL_TEST_CLUSTER(_T)
 * start a cluster of psrt processes on loopback (any user, but seconds
 * each); FL_TEST_ROOT(_T) need root (the runner skips them, unstarted, for
 * another user).
 *
 * Files are named by subject: test_<layer>_<subject>.c, the layer being the
 * harness layer the tests are about (cli, soak, engine, load, faults, run,
 * scenario, record, sys, base) or, elsewhere, the folder (psrt, ckpt, netem,
 * reports; runner for the runner's own); `fl-tests --layer L` runs the
 * tests of test_L_*.c.  The suite is the file's <layer>_<subject>, and
 * names follow action_condition.  Only FL_* assertions work inside a test
 * (CUnit's CU_ASSERT would record into the child's copy of the registry).
 */
#ifndef FL_TEST_H
#define FL_TEST_H

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

typedef void (*fl_test_fn)(void);

/* What a test needs from the machine to run. */
enum fl_test_needs {
    FL_NEEDS_NOTHING, /* a unit test: in one process or a few, fast */
    FL_NEEDS_CLUSTER, /* a cluster of psrt processes on loopback: any user, seconds */
    FL_NEEDS_ROOT,    /* root: namespaces, mounts, cgroups, nftables */
};

void fl_test_register(const char *file, const char *suite, const char *name, fl_test_fn fn,
                      int timeout_s, enum fl_test_needs needs);
void fl_test_fail(const char *file, int line, bool fatal, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void fl_test_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* A fresh empty directory for this test, removed after it (even on failure). */
const char *fl_test_dir(void);
/* Top of the source tree (the folder holding Makefile), found from the binary. */
const char *fl_test_root(void);
/* ../shared beside the checkout (or $FL_SHARED), or NULL when it is absent. */
const char *fl_test_shared(void);
/* Path of a built program beside this runner: fl_test_bin("faultline") ->
 * <root>/build/bin/faultline (build-asan/bin/faultline under `make asan`);
 * fl_test_bin("../lib/fl_fiu_preload.so") for a preload. */
const char *fl_test_bin(const char *name);
/* Skips the test unless running as root. */
void fl_test_need_root(void);
/* First column of the first row of a query on the SQLite database at path,
 * as an int; -1 when the database or the query fails. */
int fl_test_db_int(const char *path, const char *sql);
/* How many processes carry FAULTLINE_RUN=run_id in their environment (the
 * tasks of a run, wherever they are). */
int fl_test_count_run_processes(const char *run_id);
/* The same processes: up to max of their pids into pids; how many there are. */
int fl_test_run_processes(const char *run_id, pid_t *pids, size_t max);
/* Runs `faultline run` on harness/tests/scenarios/NAME with --out and --db
 * in fl_test_dir() (o/, fl.db); fails the test, with its output, unless it
 * exits 0 (the scenario's expectations are the verdict). */
void fl_test_scenario_passes(const char *name);
/* Starts `faultline run -q` on harness/tests/scenarios/NAME in the
 * background (--out <test dir>/out, --db <test dir>/fl.db, output
 * discarded); its pid. */
pid_t fl_test_scenario_start(const char *name);
/* Polls pred(arg) every 10 ms for up to ms milliseconds (bounded, for
 * state that has no event, such as a run's files and processes). */
bool fl_test_wait_until(bool (*pred)(void *), void *arg, int ms);
/* The widest line of s in characters (UTF-8), a terminal's '\r' not counted. */
size_t fl_test_widest_line(const char *s);
/* fl_test_db_int on the database of fl_test_scenario_passes. */
int fl_test_scenario_db_int(const char *sql);
/* Runs a shell command; returns its exit status (or 128+signal). Output goes to
 * *out (malloc'd, NUL-terminated) if out is not NULL, else to the test log. */
int fl_test_sh(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Writes text to <test dir>/name (a scenario, say); returns its path
 * (static: valid until the next call). */
const char *fl_test_write(const char *name, const char *text);
/* Builds the Go program src (one main package, no modules, no cgo: a Go
 * binary that makes its own system calls) into <test dir>/name, with a Go
 * cache of the test's own; skips the test when `go` is not installed
 * (Debian's golang-go, from ci/install-deps). */
void fl_test_go_build(const char *name, const char *src);

#define FL_TEST_NEEDS_(suite, name, timeout_s, needs)                                    \
    static void suite##_##name(void);                                                    \
    __attribute__((constructor)) static void suite##_##name##_reg(void)                  \
    {                                                                                    \
        fl_test_register(__FILE__, #suite, #name, suite##_##name, (timeout_s), (needs)); \
    }                                                                                    \
    static void suite##_##name(void)
#define FL_TEST_T(suite, name, timeout_s) FL_TEST_NEEDS_(suite, name, timeout_s, FL_NEEDS_NOTHING)
#define FL_TEST(suite, name) FL_TEST_T(suite, name, 60)
#define FL_TEST_CLUSTER_T(suite, name, timeout_s) \
    FL_TEST_NEEDS_(suite, name, timeout_s, FL_NEEDS_CLUSTER)
#define FL_TEST_CLUSTER(suite, name) FL_TEST_CLUSTER_T(suite, name, 60)
#define FL_TEST_ROOT_T(suite, name, timeout_s) FL_TEST_NEEDS_(suite, name, timeout_s, FL_NEEDS_ROOT)
#define FL_TEST_ROOT(suite, name) FL_TEST_ROOT_T(suite, name, 60)

#define FL_SKIP(...) fl_test_skip(__VA_ARGS__)

/* FL_ASAN is 1 in a build with AddressSanitizer (`make asan`, or a user's
 * CFLAGS with -fsanitize=address), whose programs reserve terabytes of
 * address space for their shadow memory at start and keep freed memory in
 * quarantine: a test that limits address space (ulimit -v, RLIMIT_AS) or
 * measures memory skips there with FL_SKIP_UNDER_ASAN("why"). */
#if defined(__SANITIZE_ADDRESS__)
#define FL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FL_ASAN 1
#endif
#endif
#ifndef FL_ASAN
#define FL_ASAN 0
#endif
/* Under AddressSanitizer only, adds opts ("detect_leaks=0") to
 * ASAN_OPTIONS for the rest of this test: for what it runs, where the
 * sanitizer cannot do part of its work (LeakSanitizer under strace or a
 * thread limit) and the test says why at the call. */
void fl_test_asan_options(const char *opts);
#define FL_SKIP_UNDER_ASAN(why)                         \
    do {                                                \
        if (FL_ASAN)                                    \
            FL_SKIP("under AddressSanitizer: %s", why); \
    } while (0)

#define FL_CHECK_(fatal, cond, ...)                                 \
    do {                                                            \
        if (!(cond))                                                \
            fl_test_fail(__FILE__, __LINE__, (fatal), __VA_ARGS__); \
    } while (0)

#define FL_ASSERT(cond) FL_CHECK_(false, cond, "%s", #cond)
#define FL_REQUIRE(cond) FL_CHECK_(true, cond, "%s", #cond)
#define FL_ASSERT_MSG(cond, ...) FL_CHECK_(false, cond, __VA_ARGS__)
#define FL_REQUIRE_MSG(cond, ...) FL_CHECK_(true, cond, __VA_ARGS__)

#define FL_CMP_INT_(fatal, a, op, b)                                                              \
    do {                                                                                          \
        long long fl_a_ = (long long)(a), fl_b_ = (long long)(b);                                 \
        if (!(fl_a_ op fl_b_))                                                                    \
            fl_test_fail(__FILE__, __LINE__, (fatal), "%s " #op " %s: left %lld, right %lld", #a, \
                         #b, fl_a_, fl_b_);                                                       \
    } while (0)
#define FL_ASSERT_EQ(a, b) FL_CMP_INT_(false, a, ==, b)
#define FL_ASSERT_NE(a, b) FL_CMP_INT_(false, a, !=, b)
#define FL_ASSERT_LT(a, b) FL_CMP_INT_(false, a, <, b)
#define FL_ASSERT_LE(a, b) FL_CMP_INT_(false, a, <=, b)
#define FL_ASSERT_GT(a, b) FL_CMP_INT_(false, a, >, b)
#define FL_ASSERT_GE(a, b) FL_CMP_INT_(false, a, >=, b)
#define FL_REQUIRE_EQ(a, b) FL_CMP_INT_(true, a, ==, b)
#define FL_REQUIRE_GE(a, b) FL_CMP_INT_(true, a, >=, b)

#define FL_CMP_STR_(fatal, a, b)                                                                 \
    do {                                                                                         \
        const char *fl_a_ = (a), *fl_b_ = (b);                                                   \
        if (!fl_a_ || !fl_b_ || strcmp(fl_a_, fl_b_) != 0)                                       \
            fl_test_fail(__FILE__, __LINE__, (fatal), "%s == %s: left \"%s\", right \"%s\"", #a, \
                         #b, fl_a_ ? fl_a_ : "(null)", fl_b_ ? fl_b_ : "(null)");                \
    } while (0)
#define FL_ASSERT_STREQ(a, b) FL_CMP_STR_(false, a, b)
#define FL_REQUIRE_STREQ(a, b) FL_CMP_STR_(true, a, b)

/* Substring containment: FL_ASSERT_CONTAINS(haystack, needle). */
#define FL_ASSERT_CONTAINS(h, n)                                                   \
    do {                                                                           \
        const char *fl_h_ = (h), *fl_n_ = (n);                                     \
        if (!fl_h_ || !fl_n_ || !strstr(fl_h_, fl_n_))                             \
            fl_test_fail(__FILE__, __LINE__, false,                                \
                         "%s contains %s: \"%s\" does not contain \"%s\"", #h, #n, \
                         fl_h_ ? fl_h_ : "(null)", fl_n_ ? fl_n_ : "(null)");      \
    } while (0)

#define FL_ASSERT_MEMEQ(a, b, n)                                                               \
    do {                                                                                       \
        const unsigned char *fl_a_ = (const void *)(a), *fl_b_ = (const void *)(b);            \
        size_t fl_n_ = (n), fl_i_;                                                             \
        for (fl_i_ = 0; fl_i_ < fl_n_ && fl_a_[fl_i_] == fl_b_[fl_i_]; fl_i_++)                \
            ;                                                                                  \
        if (fl_i_ < fl_n_)                                                                     \
            fl_test_fail(__FILE__, __LINE__, false,                                            \
                         "%s == %s (%zu bytes): differ at byte %zu: 0x%02x vs 0x%02x", #a, #b, \
                         fl_n_, fl_i_, fl_a_[fl_i_], fl_b_[fl_i_]);                            \
    } while (0)

#endif
