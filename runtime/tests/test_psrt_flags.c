/*
 * test_psrt_flags.c: psrt's command lines: the seed reports' flags parse,
 * bad flags, timeouts and numbers give one clear message, a ps out of memory
 * names the variable and the flag, and the bench's usage mistakes.
 */
#include "harness/tests/fl_test.h"
#include "runtime/tests/test_psrt_fixture.h"

#include <errno.h>
#include <unistd.h>

FL_TEST(psrt_flags, parse_seed_report_command_lines)
{
    struct psrt_flags f;
    char err[256] = "";
    FL_REQUIRE_EQ(parse("--job_name=worker --task_index=2 --ps_hosts=ps0:2222,ps1:2222 "
                        "--worker_hosts=w0:2222,w1:2222,w2:2222 --train_dir=./train_logs "
                        "--model=sparse_lr --save_checkpoint_steps=50 --max_steps=300 "
                        "--checkpoint_protocol=legacy --rpc_threads per_request",
                        &f, err),
                  0);
    FL_ASSERT_STREQ(f.job, "worker");
    FL_ASSERT_EQ(f.task, 2);
    FL_ASSERT_EQ(f.nps, 2);
    FL_ASSERT_STREQ(f.ps[1].host, "ps1");
    FL_ASSERT_EQ(f.ps[1].port, 2222);
    FL_ASSERT_EQ(f.nworkers, 3);
    FL_ASSERT_STREQ(f.optimizer, "ftrl");
    FL_ASSERT_EQ(f.protocol, PSRT_LEGACY);
    FL_ASSERT_EQ(f.rpc_threads, PSRT_PER_REQUEST);
    FL_ASSERT_EQ(f.save_steps, 50);
    FL_ASSERT_EQ(f.save_secs, 0);
    FL_ASSERT_EQ(f.max_to_keep, 5);
    psrt_flags_free(&f);
}

FL_TEST(psrt_flags, bad_flags_give_one_clear_message)
{
    struct psrt_flags f;
    char err[256];
    FL_ASSERT_EQ(parse("--job_name=chief --ps_hosts=a:1 --worker_hosts=b:2", &f, err), -EINVAL);
    FL_ASSERT_CONTAINS(err, "--job_name=chief");
    FL_ASSERT_EQ(parse("--job_name=ps --ps_hosts=a --worker_hosts=b:2", &f, err), -EINVAL);
    FL_ASSERT_CONTAINS(err, "--ps_hosts=a");
    FL_ASSERT_EQ(parse("--job_name=worker --ps_hosts=a:0 --worker_hosts=b:2", &f, err), -EINVAL);
    FL_ASSERT_CONTAINS(err, "ps task 0 has port 0");
    FL_ASSERT_EQ(parse("--job_name=ps --ps_hosts=a:0,a:0 --worker_hosts=b:2", &f, err), 0);
    psrt_flags_free(&f);
    FL_ASSERT_EQ(parse("--job_name=ps --ps_hosts=a:1,a:1 --worker_hosts=b:2", &f, err), -EINVAL);
    FL_ASSERT_CONTAINS(err, "a:1 is listed twice (ps tasks 0 and 1)");
    FL_ASSERT_EQ(parse("--job_name=ps --task_index=3 --ps_hosts=a:1 --worker_hosts=b:2", &f, err),
                 -EINVAL);
    FL_ASSERT_CONTAINS(err, "only 1 task");
    FL_ASSERT_EQ(parse("--job_name=ps --ps_hosts=a:1 --worker_hosts=b:2 --bogus=1", &f, err),
                 -EINVAL);
    FL_ASSERT_CONTAINS(err, "unknown flag --bogus");
    /* without a value too, and the next flag is not taken as its value */
    FL_ASSERT_EQ(parse("--job_name=ps --bogus --ps_hosts=a:1 --worker_hosts=b:2", &f, err),
                 -EINVAL);
    FL_ASSERT_CONTAINS(err, "unknown flag --bogus");
    FL_ASSERT_EQ(parse("--job_name=ps --ps_hosts=a:1 --worker_hosts=b:2 --batch_size=10x", &f, err),
                 -EINVAL);
    FL_ASSERT_CONTAINS(err, "--batch_size=10x: bad value: expected an integer from 1 to 1000000");
    FL_ASSERT_EQ(parse("--job_name=ps --ps_hosts=a:1 --worker_hosts=b:2 --max_steps=x", &f, err),
                 -EINVAL);
    FL_ASSERT_CONTAINS(err, "--max_steps=x");
}

/* A model too big for the memory a ps may have fails at once, in one line
 * naming the variable, its size and the flag to lower (under ulimit -v, so
 * that it fails the same way whatever the machine's overcommit setting). */
FL_TEST(psrt_flags, ps_out_of_memory_names_the_variable_and_flag)
{
    FL_SKIP_UNDER_ASAN("psrt cannot start under ulimit -v (its shadow memory alone is 15 TiB)");
    const char *b = fl_test_bin("psrt");
    if (access(b, X_OK) != 0)
        FL_SKIP("%s is not built", b);
    char *out = NULL;
    int rc = fl_test_sh(&out,
                        "cd %s && ulimit -v 2000000 && exec %s --job_name=ps --task_index=0 "
                        "--ps_hosts=127.0.0.1:0 --worker_hosts=127.0.0.1:1 --model=bench_dense "
                        "--dense_floats=1000000000 --optimizer=adagrad 2>&1",
                        fl_test_dir(), b);
    FL_ASSERT_EQ(rc, 1);
    FL_ASSERT_CONTAINS(out, "ResourceExhaustedError: no memory for the variables of ps task 0: "
                            "bench/w0, 1000000000 floats (7.5 GiB with its 1 slot); "
                            "lower --dense_floats\n");
    FL_ASSERT_EQ(strchr(out, '\n') - out + 1, (long)strlen(out)); /* one line */
    free(out);
}

/* psrt bench's usage mistakes each say what is wrong, exit 2, and run
 * nothing; --help lists every benchmark. */
FL_TEST(psrt_flags, bench_usage_mistakes_say_what_is_wrong)
{
    const char *b = fl_test_bin("psrt");
    if (access(b, X_OK) != 0)
        FL_SKIP("%s is not built", b);
    static const struct {
        const char *args, *want;
    } cases[] = {
        {"sparse", "psrt bench sparse: --ps_hosts=H:P,... is required"},
        {"dense --secs=1", "psrt bench dense: --ps_hosts=H:P,... is required"},
        {"robust --ps_hosts=127.0.0.1:1", "psrt bench robust: --train_dir=DIR is required"},
        {"sparse --ps_hosts=127.0.0.1:1 --reps=0", "--reps=0: expected an integer from 1"},
        {"dense --bogus=1", "psrt bench dense: unknown argument '--bogus=1'"},
        {"nosuch", "psrt bench: unknown benchmark 'nosuch'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *out = NULL;
        int rc = fl_test_sh(&out, "%s bench %s 2>&1", b, cases[i].args);
        FL_ASSERT_MSG(rc == 2, "psrt bench %s: exit %d: %s", cases[i].args, rc, out);
        FL_ASSERT_CONTAINS(out, cases[i].want);
        free(out);
    }
    char *out = NULL;
    FL_ASSERT_EQ(fl_test_sh(&out, "%s bench --help", b), 0);
    FL_ASSERT_CONTAINS(out, "psrt bench robust");
    free(out);
}

/* A zero timeout, or one under poll's millisecond, would time every call
 * out at once (and a worker would reconnect forever); an int flag past INT_MAX would wrap when
 * stored. */
FL_TEST(psrt_flags, timeouts_must_be_positive_and_ints_must_fit)
{
    struct psrt_flags f;
    char err[256];
    const char *base = "--job_name=ps --ps_hosts=a:1 --worker_hosts=b:2";
    char line[512];
    static const char *const timeouts[] = {"rpc_timeout_secs", "connect_timeout_secs",
                                           "reconnect_timeout_secs"};
    for (int i = 0; i < 3; i++) {
        static const char *const bad[] = {"0", "none", "-1", "nan", "1e-9", "0.0009"};
        for (int b = 0; b < 6; b++) {
            snprintf(line, sizeof line, "%s --%s=%s", base, timeouts[i], bad[b]);
            FL_ASSERT_EQ(parse(line, &f, err), -EINVAL);
            FL_ASSERT_CONTAINS(err, timeouts[i]);
            FL_ASSERT_CONTAINS(err, "at least 0.001");
        }
        snprintf(line, sizeof line, "%s --%s=0.25", base, timeouts[i]);
        FL_ASSERT_EQ(parse(line, &f, err), 0);
        psrt_flags_free(&f);
    }
    static const char *const ints[] = {"task_index", "max_to_keep", "export_version",
                                       "pool_threads", "batch_size"};
    for (int i = 0; i < 5; i++) {
        snprintf(line, sizeof line, "%s --%s=4294967297", base, ints[i]); /* 2^32 + 1 */
        FL_ASSERT_EQ(parse(line, &f, err), -EINVAL);
        FL_ASSERT_CONTAINS(err, ints[i]);
        FL_ASSERT_CONTAINS(err, "bad value");
    }
    snprintf(line, sizeof line, "%s --max_to_keep=2147483647 --export_version=2147483647", base);
    FL_ASSERT_EQ(parse(line, &f, err), 0);
    FL_ASSERT_EQ(f.max_to_keep, 2147483647);
    psrt_flags_free(&f);
    snprintf(line, sizeof line, "%s --model=bogus", base);
    FL_ASSERT_EQ(parse(line, &f, err), -EINVAL);
    FL_ASSERT_CONTAINS(err, "bench_dense");
    /* bulk calls (saves, restores, a ps's replies) allow 10 times --rpc_timeout_secs */
    snprintf(line, sizeof line, "%s --rpc_timeout_secs=7", base);
    FL_REQUIRE_EQ(parse(line, &f, err), 0);
    FL_ASSERT_EQ((int)psrt_flags_bulk_timeout(&f), 70);
    psrt_flags_free(&f);
}
