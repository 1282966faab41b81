/*
 * test_psrt_units.c: psrt's pieces in one process: optimizers against
 * hand-computed updates, placement and partitioning, frames and their
 * corruption cases, buffers, flags, the sparse table, the RPC client and
 * server (both thread models), the ps protocol state machine (not ready ->
 * ready, step reservation up to max_steps, shutdown), tensor lists through
 * the bundle library, and the event channel client (EVENT, SYNC waits for
 * OK, harness gone).
 */
#include "harness/tests/fl_test.h"
#include "runtime/psrt/ps.h"
#include "runtime/psrt/psrt.h"
#include "runtime/ckpt/bundle.h"
#include "runtime/ckpt/state.h"
#include "runtime/tests/test_psrt_fixture.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef FIU_ENABLE
#include <fiu-control.h>
#include <fiu.h>
#endif

#define NEAR(a, b) (fabs((double)(a) - (double)(b)) <= 1e-6 * (1 + fabs((double)(b))))
#define ASSERT_NEAR(a, b)                                                                  \
    FL_ASSERT_MSG(NEAR(a, b), "%s ~= %s: left %.9g, right %.9g", #a, #b, (double)(a),     \
                  (double)(b))

/* ---- optimizers ----------------------------------------------------------- */

FL_TEST(psrt_optim, sgd_matches_hand_computed)
{
    struct psrt_optim o;
    psrt_optim_default(&o, PSRT_OPT_SGD, 0.1f);
    float w[2] = {1.0f, -2.0f}, g[2] = {0.5f, -1.0f};
    psrt_optim_apply(&o, w, NULL, g, 2, NULL);
    ASSERT_NEAR(w[0], 1.0 - 0.1 * 0.5);
    ASSERT_NEAR(w[1], -2.0 + 0.1 * 1.0);
}

FL_TEST(psrt_optim, adagrad_matches_hand_computed_two_steps)
{
    struct psrt_optim o;
    psrt_optim_default(&o, PSRT_OPT_ADAGRAD, 0.5f);
    float w = 1.0f, a = psrt_optim_slot_init(&o, 0), g = 2.0f;
    float *s[1] = {&a};
    FL_ASSERT_STREQ(psrt_optim_slot_suffix(PSRT_OPT_ADAGRAD, 0), "Adagrad");
    ASSERT_NEAR(a, 0.1);
    psrt_optim_apply(&o, &w, s, &g, 1, NULL);
    /* a = 0.1 + 4 = 4.1; w = 1 - 0.5 * 2 / sqrt(4.1) */
    ASSERT_NEAR(a, 4.1);
    ASSERT_NEAR(w, 1.0 - 1.0 / sqrt(4.1));
    g = -1.0f;
    double w1 = w;
    psrt_optim_apply(&o, &w, s, &g, 1, NULL);
    ASSERT_NEAR(a, 5.1);
    ASSERT_NEAR(w, w1 + 0.5 / sqrt(5.1));
}

FL_TEST(psrt_optim, ftrl_matches_tensorflow_formula)
{
    struct psrt_optim o;
    psrt_optim_default(&o, PSRT_OPT_FTRL, 0.5f);
    o.l1 = 0.01f;
    o.l2 = 0.1f;
    float w = 0.0f, n = 0.1f, z = 0.0f, g = 0.8f;
    float *s[2] = {&n, &z};
    FL_ASSERT_STREQ(psrt_optim_slot_suffix(PSRT_OPT_FTRL, 0), "Ftrl");
    FL_ASSERT_STREQ(psrt_optim_slot_suffix(PSRT_OPT_FTRL, 1), "Ftrl_1");
    psrt_optim_apply(&o, &w, s, &g, 1, NULL);
    double na = 0.1 + 0.64;
    double zz = 0.8 - (sqrt(na) - sqrt(0.1)) / 0.5 * 0.0;
    double quad = sqrt(na) / 0.5 + 2 * 0.1;
    double want = fabs(zz) > 0.01 ? ((zz < 0 ? -0.01 : 0.01) - zz) / quad : 0;
    ASSERT_NEAR(n, na);
    ASSERT_NEAR(z, zz);
    ASSERT_NEAR(w, want);
    /* second step uses the new w in the z update */
    double w1 = w, n1 = n, z1 = z;
    g = -0.3f;
    psrt_optim_apply(&o, &w, s, &g, 1, NULL);
    double na2 = n1 + 0.09;
    double z2 = z1 + -0.3 - (sqrt(na2) - sqrt(n1)) / 0.5 * w1;
    double q2 = sqrt(na2) / 0.5 + 0.2;
    ASSERT_NEAR(z, z2);
    ASSERT_NEAR(w, fabs(z2) > 0.01 ? ((z2 < 0 ? -0.01 : 0.01) - z2) / q2 : 0);
    /* inside the l1 ball the weight is exactly zero */
    float w3 = 5, n3 = 1, z3 = 0.0f, g3 = 0.001f;
    float *s3[2] = {&n3, &z3};
    o.l1 = 1.0f;
    psrt_optim_apply(&o, &w3, s3, &g3, 1, NULL);
    FL_ASSERT(fabs(z3) <= 1.0f);
    FL_ASSERT_MSG(w3 == 0.0f, "w3 = %g inside the l1 ball", w3);
}

FL_TEST(psrt_optim, adam_matches_hand_computed_with_bias_correction)
{
    struct psrt_optim o;
    psrt_optim_default(&o, PSRT_OPT_ADAM, 0.01f);
    float w = 1.0f, m = 0, v = 0, g = 0.5f;
    float *s[2] = {&m, &v};
    struct psrt_adam_pow pw = {o.beta1, o.beta2};
    psrt_optim_apply(&o, &w, s, &g, 1, &pw);
    double mm = 0.1 * 0.5, vv = 0.001 * 0.25;
    double lrt = 0.01 * sqrt(1 - 0.999) / (1 - 0.9);
    ASSERT_NEAR(m, mm);
    ASSERT_NEAR(v, vv);
    ASSERT_NEAR(w, 1.0 - lrt * mm / (sqrt(vv) + 1e-8));
    ASSERT_NEAR(pw.b1p, 0.9 * 0.9);
    ASSERT_NEAR(pw.b2p, 0.999 * 0.999);
}

/* ---- placement -------------------------------------------------------------- */

FL_TEST(psrt_model, placement_round_robin_like_replica_device_setter)
{
    struct psrt_model m;
    FL_REQUIRE_EQ(psrt_model_init(&m, "linear", 2, 0), 0);
    /* global_step -> ps0, Weights -> ps1, biases -> ps0 */
    FL_ASSERT_STREQ(m.vars[0].name, "Weights");
    FL_ASSERT_EQ(m.vars[0].ps, 1);
    FL_ASSERT_EQ(m.vars[1].ps, 0);
    int order[16];
    FL_ASSERT_EQ(psrt_model_shards(&m, order), 2);
    FL_ASSERT_EQ(order[0], 0);
    FL_ASSERT_EQ(order[1], 1);
    /* 6 ps: only ps 0 (global_step), 1 (Weights) and 2 (biases) hold variables */
    FL_REQUIRE_EQ(psrt_model_init(&m, "linear", 6, 0), 0);
    FL_ASSERT_EQ(psrt_model_shards(&m, order), 3);
    FL_ASSERT_EQ(m.vars[1].ps, 2);
    FL_ASSERT(!psrt_model_ps_has_vars(&m, 3));
    FL_ASSERT(psrt_tensor_on_ps(&m, "global_step", 0));
    FL_ASSERT(psrt_tensor_on_ps(&m, "Weights/Adagrad", 1));
    FL_ASSERT(!psrt_tensor_on_ps(&m, "Weights/Adagrad", 0));
}

FL_TEST(psrt_model, shards_sorted_by_device_name_like_tensorflow)
{
    struct psrt_model m;
    FL_REQUIRE_EQ(psrt_model_init(&m, "sparse_lr", 12, 1 << 20), 0);
    int order[16];
    FL_REQUIRE_EQ(psrt_model_shards(&m, order), 12);
    /* task:0, task:1, task:10, task:11, task:2, ... */
    FL_ASSERT_EQ(order[2], 10);
    FL_ASSERT_EQ(order[3], 11);
    FL_ASSERT_EQ(order[4], 2);
    FL_ASSERT(psrt_tensor_on_ps(&m, "sparse_lr/weights/part_10/keys", 10));
    FL_ASSERT(!psrt_tensor_on_ps(&m, "sparse_lr/weights/part_10/keys", 1));
}

FL_TEST(psrt_model, sparse_rows_spread_evenly_over_ps)
{
    int count[3] = {0};
    for (uint64_t k = 0; k < 30000; k++)
        count[psrt_row_ps(k * 7919, 3)]++;
    for (int p = 0; p < 3; p++) {
        FL_ASSERT_GT(count[p], 9000);
        FL_ASSERT_LT(count[p], 11000);
    }
}

FL_TEST(psrt_model, batches_are_deterministic_and_unique_keys_cover_features)
{
    struct psrt_model m;
    FL_REQUIRE_EQ(psrt_model_init(&m, "sparse_lr", 2, 33554432), 0);
    struct psrt_batch a = {0}, b = {0};
    FL_REQUIRE_EQ(m.ops->batch(&m, &a, 50, 42), 0);
    FL_REQUIRE_EQ(m.ops->batch(&m, &b, 50, 42), 0);
    FL_ASSERT_EQ(a.nkeys, b.nkeys);
    FL_ASSERT_MEMEQ(a.keys, b.keys, (size_t)a.nkeys * 8);
    for (int i = 0; i < 50 * a.nnz; i++) {
        FL_ASSERT_EQ(a.keys[a.fidx[i]], a.fkeys[i]);
        FL_ASSERT_LT(a.fkeys[i], 33554432);
    }
    psrt_batch_free(&a);
    psrt_batch_free(&b);
}

/* ---- frames and buffers -------------------------------------------------------- */

FL_TEST(psrt_frame, roundtrip_and_every_corruption_is_caught)
{
    struct psrt_frame_hdr h = {.kind = PSRT_KIND_REQ, .op = PSRT_OP_PULL, .status = -5,
                               .flags = 3, .id = 77, .len = 1234, .pcrc = 0xdeadbeef};
    uint8_t buf[PSRT_FRAME_HDR];
    psrt_frame_encode(buf, &h);
    struct psrt_frame_hdr d;
    FL_REQUIRE_EQ(psrt_frame_decode(buf, &d, 1 << 20), 0);
    FL_ASSERT_EQ(d.op, PSRT_OP_PULL);
    FL_ASSERT_EQ(d.status, -5);
    FL_ASSERT_EQ(d.id, 77);
    FL_ASSERT_EQ(d.len, 1234);
    FL_ASSERT_EQ(d.pcrc, 0xdeadbeef);
    FL_ASSERT_EQ(psrt_frame_decode(buf, &d, 1000), -EMSGSIZE);
    /* every single bit flip is detected */
    for (int bit = 0; bit < PSRT_FRAME_HDR * 8; bit++) {
        uint8_t c[PSRT_FRAME_HDR];
        memcpy(c, buf, sizeof c);
        c[bit / 8] ^= (uint8_t)(1 << (bit % 8));
        int r = psrt_frame_decode(c, &d, 1 << 20);
        FL_ASSERT_MSG(r == -EBADMSG || r == -EPROTO, "bit %d: decode gave %d", bit, r);
    }
    /* a wrong version with a valid crc is a protocol error */
    h.version = 9;
    psrt_frame_encode(buf, &h);
    FL_ASSERT_EQ(psrt_frame_decode(buf, &d, 1 << 20), -EPROTO);
}

FL_TEST(psrt_frame, buffer_getters_never_read_past_the_end)
{
    struct psrt_buf b = {0};
    psrt_buf_u32(&b, 7);
    psrt_buf_str(&b, "hello");
    psrt_buf_align8(&b);
    FL_ASSERT_EQ(b.len % 8, 0);
    FL_ASSERT_EQ(psrt_buf_get_u32(&b), 7);
    char s[16];
    FL_ASSERT_EQ(psrt_buf_get_str(&b, s, sizeof s), 0);
    FL_ASSERT_STREQ(s, "hello");
    psrt_buf_skip_align8(&b);
    FL_ASSERT(!b.bad);
    FL_ASSERT_EQ(psrt_buf_get_u64(&b), 0);
    FL_ASSERT(b.bad);
    /* a string whose length lies */
    struct psrt_buf c = {0};
    psrt_buf_u32(&c, 1000);
    psrt_buf_put(&c, "abc", 3);
    FL_ASSERT_EQ(psrt_buf_get_str(&c, s, sizeof s), -EBADMSG);
    psrt_buf_free(&b);
    psrt_buf_free(&c);
}

/* ---- flags ------------------------------------------------------------------------- */

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
    FL_ASSERT_EQ(parse("--job_name=ps --ps_hosts=a:1 --worker_hosts=b:2 --batch_size=10x", &f,
                       err), -EINVAL);
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
    const char *b = fl_test_bin("psrt");
    if (access(b, X_OK) != 0)
        FL_SKIP("%s is not built", b);
    char *out = NULL;
    int rc = fl_test_sh(&out, "cd %s && ulimit -v 2000000 && exec %s --job_name=ps --task_index=0 "
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
    static const struct { const char *args, *want; } cases[] = {
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
 * out at once (and a worker would reconnect forever); an int flag past INT_MAX would wrap when stored. */
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

/* ---- sparse table ---------------------------------------------------------------------- */

FL_TEST(psrt_table, push_pull_grow_and_sgd_apply)
{
    struct psrt_table t;
    FL_REQUIRE_EQ(psrt_table_init(&t, 1, 0, NULL, 16), 0);
    struct psrt_optim o;
    psrt_optim_default(&o, PSRT_OPT_SGD, 0.5f);
    enum { N = 100000 };
    uint64_t *k = malloc(N * 8);
    float *g = malloc(N * 4), *out = malloc(N * 4);
    for (int i = 0; i < N; i++) {
        k[i] = psrt_mix64((uint64_t)i) | (i == 7 ? UINT64_MAX : 0);
        g[i] = (float)(i % 13);
    }
    FL_REQUIRE_EQ(psrt_table_push(&t, &o, k, g, N, NULL), 0);
    FL_REQUIRE_EQ(psrt_table_push(&t, &o, k, g, N, NULL), 0);
    FL_ASSERT_EQ(t.nrows, N);
    psrt_table_pull(&t, k, N, out);
    int bad = 0;
    for (int i = 0; i < N; i++)
        bad += out[i] != -1.0f * (float)(i % 13);
    FL_ASSERT_EQ(bad, 0);
    uint64_t absent = 12345;
    psrt_table_pull(&t, &absent, 1, out);
    FL_ASSERT_EQ(out[0], 0);
    FL_ASSERT_EQ(psrt_table_find(&t, absent), -1);
    psrt_table_free(&t);
    free(k);
    free(g);
    free(out);
}

/* Big SGD batches (bucketed on the ps) give exactly what small batches
 * give: every key's updates applied in their order, repeated keys, the
 * table's EMPTY key, and new keys that make a populated table grow
 * mid-batch. */
static void push_small(struct psrt_table *t, const struct psrt_optim *o, const uint64_t *k,
                       const float *g, size_t n)
{
    for (size_t i = 0; i < n; i += 1000)
        psrt_table_push(t, o, k + i, g + i, n - i < 1000 ? n - i : 1000, NULL);
}

FL_TEST(psrt_table, big_push_matches_small_batches)
{
    enum { N = 400000 };
    struct psrt_optim o;
    psrt_optim_default(&o, PSRT_OPT_SGD, 0.25f);
    uint64_t *k = malloc(N * 8);
    float *g = malloc(N * 4), *want = malloc(N * 4), *got = malloc(N * 4);
    for (int i = 0; i < N; i++) {
        /* a quarter repeats an earlier key; two are the table's EMPTY key */
        k[i] = i % 4 == 3 ? k[(size_t)psrt_mix64((uint64_t)i) % (size_t)i]
                          : psrt_mix64((uint64_t)i + 99);
        if (i == 1001 || i == 250001)
            k[i] = PSRT_TABLE_EMPTY;
        g[i] = (float)(i % 29) * 0.37f - 3.1f;
    }
    struct psrt_table ref, t;
    FL_REQUIRE_EQ(psrt_table_init(&ref, 1, 0, NULL, 16), 0);
    FL_REQUIRE_EQ(psrt_table_init(&t, 1, 0, NULL, 16), 0);
    /* a fresh table (sized for the batch at once), then one where the
     * second batch's new keys (other seeds) make it grow */
    push_small(&ref, &o, k, g, N / 2);
    FL_REQUIRE_EQ(psrt_table_push(&t, &o, k, g, N / 2, NULL), 0);
    FL_ASSERT_EQ(t.nrows, ref.nrows);
    for (int i = 0; i < N; i++)
        if (i % 4 != 3 && k[i] != PSRT_TABLE_EMPTY)
            k[i] = psrt_mix64((uint64_t)i + 7) ^ 0x5555aaaa5555aaaaull;
    push_small(&ref, &o, k, g, N);
    int64_t bits_before = t.bits;
    FL_REQUIRE_EQ(psrt_table_push(&t, &o, k, g, N, NULL), 0);
    FL_ASSERT(t.bits > bits_before);
    FL_ASSERT_EQ(t.nrows, ref.nrows);
    /* one key in every other update: its bucket overflows the one-pass
     * scatter, which starts over in two passes */
    for (int i = 0; i < N; i += 2)
        k[i] = 0x1234567;
    push_small(&ref, &o, k, g, N);
    FL_REQUIRE_EQ(psrt_table_push(&t, &o, k, g, N, NULL), 0);
    FL_ASSERT_EQ(t.nrows, ref.nrows);
    psrt_table_pull(&ref, k, N, want);
    psrt_table_pull(&t, k, N, got);
    int bad = 0;
    for (int i = 0; i < N; i++)
        bad += memcmp(&got[i], &want[i], 4) != 0;
    FL_ASSERT_EQ(bad, 0);
    psrt_table_free(&ref);
    psrt_table_free(&t);
    free(k);
    free(g);
    free(want);
    free(got);
}

/* The bucketed push and pull look at a key's home slot and the next one
 * at once; keys whose home is the table's last slot sit past its end,
 * wrapped to slot 0 and on, among keys whose home is slot 0. */
FL_TEST(psrt_table, big_push_and_pull_wrap_past_the_last_slot)
{
    enum { N = 100000, EDGE = 6 };
    struct psrt_optim o;
    psrt_optim_default(&o, PSRT_OPT_SGD, 0.5f);
    struct psrt_table ref, t;
    FL_REQUIRE_EQ(psrt_table_init(&ref, 1, 0, NULL, N), 0);
    FL_REQUIRE_EQ(psrt_table_init(&t, 1, 0, NULL, N), 0);
    const int bits = t.bits;
    FL_REQUIRE(bits > 16); /* big enough for the bucketed paths */
    uint64_t edge[EDGE];
    int found = 0;
    for (uint64_t x = 1; found < EDGE; x++) { /* 4 homed at the last slot, 2 at slot 0 */
        uint64_t home = psrt_mix64(x) >> (64 - bits);
        if ((found < 4 && home == t.mask) || (found >= 4 && home == 0))
            edge[found++] = x;
    }
    uint64_t *k = malloc(N * 8);
    float *g = malloc(N * 4), *want = malloc(N * 4), *got = malloc(N * 4);
    for (int i = 0; i < N; i++) {
        k[i] = i % 50 < EDGE ? edge[i % 50] : psrt_mix64((uint64_t)i + 4242);
        g[i] = (float)(i % 17) * 0.5f - 2.0f;
    }
    for (int round = 0; round < 2; round++) { /* inserts, then updates */
        push_small(&ref, &o, k, g, N);
        FL_REQUIRE_EQ(psrt_table_push(&t, &o, k, g, N, NULL), 0);
    }
    FL_ASSERT_EQ(t.bits, bits);
    FL_ASSERT_EQ(t.nrows, ref.nrows);
    uint64_t wrapped = 0; /* the edge keys that live at slots 0 .. */
    for (uint64_t s = 0; s < 8; s++)
        for (int j = 0; j < 4; j++)
            wrapped += t.e[s].key == edge[j];
    FL_ASSERT(wrapped >= 3);
    /* the reference read one key at a time (find), the other bucketed */
    for (int i = 0; i < N; i++)
        want[i] = *psrt_table_lookup(&ref, k[i]);
    psrt_table_pull(&t, k, N, got);
    int bad = 0;
    for (int i = 0; i < N; i++)
        bad += memcmp(&got[i], &want[i], 4) != 0;
    FL_ASSERT_EQ(bad, 0);
    for (int j = 0; j < EDGE; j++)
        FL_ASSERT(psrt_table_find(&t, edge[j]) >= 0);
    psrt_table_free(&ref);
    psrt_table_free(&t);
    free(k);
    free(g);
    free(want);
    free(got);
}

/* ---- ps protocol over RPC, in process ----------------------------------------------------- */

static void ps_protocol(int mode)
{
    struct ps_fixture x;
    fixture(&x, "linear", mode, 3);
    uint64_t zero = 0;
    /* UNINITIALIZED: pulls are refused with "not ready" */
    FL_ASSERT_EQ(call(&x, PSRT_OP_PULL, PSRT_PULL_RESERVE, &zero, 8), -EAGAIN);
    FL_ASSERT_EQ(call(&x, PSRT_OP_PING, 0, NULL, 0), 0);
    x.resp.off = 8;
    FL_ASSERT_EQ(psrt_buf_get_u32(&x.resp), 0);
    /* Init -> READY */
    FL_ASSERT_EQ(call(&x, PSRT_OP_OPEN, 0, NULL, 0), -EAGAIN); /* nothing to open yet */
    uint64_t seed = 1;
    FL_ASSERT_EQ(call(&x, PSRT_OP_INIT, 0, &seed, 8), 0);
    /* INITIALIZED: the chief may save, nobody trains until Open */
    FL_ASSERT_EQ(call(&x, PSRT_OP_PULL, PSRT_PULL_RESERVE, &zero, 8), -EAGAIN);
    FL_ASSERT_EQ(call(&x, PSRT_OP_SNAPSHOT, 0, NULL, 0), 0);
    FL_ASSERT_EQ(call(&x, PSRT_OP_OPEN, 0, NULL, 0), 0);
    for (int s = 1; s <= 3; s++) {
        FL_ASSERT_EQ(call(&x, PSRT_OP_PULL, PSRT_PULL_RESERVE, &zero, 8), 0);
        x.resp.off = 0;
        FL_ASSERT_EQ((int64_t)psrt_buf_get_u64(&x.resp), s);
    }
    /* past max_steps: no step is reserved */
    FL_ASSERT_EQ(call(&x, PSRT_OP_PULL, PSRT_PULL_RESERVE, &zero, 8), 0);
    x.resp.off = 0;
    FL_ASSERT_EQ((int64_t)psrt_buf_get_u64(&x.resp), -1);
    /* push applies to the variables this ps owns (biases on ps 0 of 1: both) */
    struct {
        uint64_t nkeys;
        uint32_t nd, pad;
        float g[2];
    } push = {0, 2, 0, {1.0f, 1.0f}};
    FL_ASSERT_EQ(call(&x, PSRT_OP_PUSH, 0, &push, sizeof push), 0);
    /* a malformed push is refused, not applied */
    FL_ASSERT_EQ(call(&x, PSRT_OP_PUSH, 0, &push, 12), -EBADMSG);
    /* Shutdown -> further pulls say "done" */
    FL_ASSERT_EQ(call(&x, PSRT_OP_SHUTDOWN, 0, NULL, 0), 0);
    FL_ASSERT_EQ(call(&x, PSRT_OP_PULL, 0, &zero, 8), -ESHUTDOWN);
    psrt_conn_free(x.c);
}

FL_TEST(psrt_ps, protocol_states_pool)
{
    ps_protocol(PSRT_POOL);
}

FL_TEST(psrt_ps, protocol_states_per_request)
{
    ps_protocol(PSRT_PER_REQUEST);
}

/* nkeys comes off the wire: a count whose byte sizes wrap around (2^61 keys
 * of 8 bytes is 0 bytes mod 2^64) must be refused before anything is sized
 * from it, not turned into a pull or push of billions of rows past the end
 * of the buffers; the ps keeps serving. */
FL_TEST(psrt_ps, huge_nkeys_is_refused_and_ps_keeps_serving)
{
    struct ps_fixture x;
    fixture(&x, "sparse_lr", PSRT_POOL, 100);
    uint64_t seed = 1;
    FL_REQUIRE_EQ(call(&x, PSRT_OP_INIT, 0, &seed, 8), 0);
    FL_REQUIRE_EQ(call(&x, PSRT_OP_OPEN, 0, NULL, 0), 0);
    /* counts that wrap, and one merely larger than the keys sent */
    static const uint64_t huge[] = {1ull << 61, 1ull << 62, (1ull << 62) + 1, UINT64_MAX,
                                    UINT64_MAX / 8 + 1, 3};
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
        /* Pull: u64 nkeys, then (here) two keys */
        uint64_t pull[3] = {huge[i], 11, 12};
        FL_ASSERT_MSG(call(&x, PSRT_OP_PULL, 0, pull, sizeof pull) == -EBADMSG,
                      "pull with nkeys %llu accepted", (unsigned long long)huge[i]);
        /* Push: u64 nkeys, u32 ndense 0, pad, then two keys and two grads */
        struct {
            uint64_t nkeys;
            uint32_t nd, pad;
            uint64_t k[2];
            float g[2];
        } push = {huge[i], 0, 0, {11, 12}, {1, 1}};
        FL_ASSERT_MSG(call(&x, PSRT_OP_PUSH, 0, &push, sizeof push) == -EBADMSG,
                      "push with nkeys %llu accepted", (unsigned long long)huge[i]);
    }
    /* still serving: a real push and pull of two rows */
    struct {
        uint64_t nkeys;
        uint32_t nd, pad;
        uint64_t k[2];
        float g[2];
    } push = {2, 0, 0, {11, 12}, {1, -1}};
    FL_ASSERT_EQ(call(&x, PSRT_OP_PUSH, 0, &push, sizeof push), 0);
    uint64_t pull[3] = {2, 11, 12};
    FL_ASSERT_EQ(call(&x, PSRT_OP_PULL, 0, pull, sizeof pull), 0);
    /* step, ndense, pad (16), the bias (4), two sparse values (8) */
    FL_REQUIRE_EQ(x.resp.len, 28);
    float v[2];
    memcpy(v, x.resp.p + 20, 8);
    FL_ASSERT_MSG(v[0] < 0 && v[1] > 0, "rows after the push: %g %g", v[0], v[1]);
    FL_ASSERT_EQ(call(&x, PSRT_OP_PING, 0, NULL, 0), 0);
    psrt_conn_free(x.c);
}

FL_TEST(psrt_rpc, corrupt_frame_closes_connection_and_server_survives)
{
    struct ps_fixture x;
    fixture(&x, "linear", PSRT_POOL, 10);
    /* a raw socket sending a frame with a bad payload crc */
    struct psrt_frame_hdr h = {.kind = PSRT_KIND_REQ, .op = PSRT_OP_ECHO, .len = 4, .pcrc = 1};
    uint8_t hdr[PSRT_FRAME_HDR];
    psrt_frame_encode(hdr, &h);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)psrt_ps_port(x.ps))};
    a.sin_addr.s_addr = htonl(0x7f000001);
    FL_REQUIRE_EQ(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    FL_REQUIRE_EQ(write(fd, hdr, sizeof hdr), (ssize_t)sizeof hdr);
    FL_REQUIRE_EQ(write(fd, "abcd", 4), 4);
    char c;
    FL_ASSERT_EQ(read(fd, &c, 1), 0); /* closed, no reply */
    close(fd);
    /* garbage magic */
    fd = socket(AF_INET, SOCK_STREAM, 0);
    FL_REQUIRE_EQ(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    memset(hdr, 'x', sizeof hdr);
    FL_REQUIRE_EQ(write(fd, hdr, sizeof hdr), (ssize_t)sizeof hdr);
    FL_ASSERT_EQ(read(fd, &c, 1), 0);
    close(fd);
    /* the good client still works; echo of 3 MB comes back intact */
    size_t n = 3 << 20;
    char *big = malloc(n);
    for (size_t i = 0; i < n; i++)
        big[i] = (char)(i * 31);
    FL_ASSERT_EQ(call(&x, PSRT_OP_ECHO, 0, big, n), 0);
    FL_ASSERT_EQ(x.resp.len, n);
    FL_ASSERT_MEMEQ(x.resp.p, big, n);
    free(big);
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

/* Out of file descriptors, the server refuses a new connection at once
 * (the client sees it closed, and retries) instead of leaving it in the
 * backlog and spinning on a listening socket it cannot accept from; the
 * connections it has keep working, and it accepts again once it can. */
FL_TEST(psrt_rpc, out_of_fds_refuses_without_spinning)
{
    struct ps_fixture x;
    fixture(&x, "linear", PSRT_POOL, 10);
    FL_REQUIRE_EQ(call(&x, PSRT_OP_PING, 0, NULL, 0), 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)psrt_ps_port(x.ps))};
    a.sin_addr.s_addr = htonl(0x7f000001);
    /* every descriptor taken but one, which the client's socket takes */
    struct rlimit old, low;
    getrlimit(RLIMIT_NOFILE, &old);
    int fill[4096], nfill = 0, probe;
    while ((probe = open("/dev/null", O_RDONLY)) >= 0 && probe < 4000)
        fill[nfill++] = probe;
    if (probe >= 0)
        close(probe);
    int top = nfill ? fill[nfill - 1] : 0;
    low = (struct rlimit){(rlim_t)top + 2, old.rlim_max};
    FL_REQUIRE_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    FL_REQUIRE(fd >= 0);
    FL_REQUIRE_EQ(open("/dev/null", O_RDONLY), -1);     /* none left */
    FL_REQUIRE_EQ(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int ready = poll(&p, 1, 5000);
    char c;
    ssize_t got = ready == 1 ? read(fd, &c, 1) : 1;
    FL_ASSERT_MSG(ready == 1 && got <= 0, "the connection was not refused (poll %d, read %zd)", ready,
                  got);
    /* still out of descriptors (the client's socket holds the last), with
     * nothing waiting to be accepted: the process does not spin meanwhile */
    double c0 = cpu_s();
    poll(NULL, 0, 300);
    double spent = cpu_s() - c0;
    FL_ASSERT_MSG(spent < 0.1, "%.3f s of CPU in 0.3 s while out of descriptors", spent);
    close(fd);
    for (int i = 0; i < nfill; i++)
        close(fill[i]);
    setrlimit(RLIMIT_NOFILE, &old);
    /* the old connection works, and a new one is accepted */
    FL_ASSERT_EQ(call(&x, PSRT_OP_PING, 0, NULL, 0), 0);
    fd = socket(AF_INET, SOCK_STREAM, 0);
    FL_REQUIRE_EQ(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    struct psrt_frame_hdr h = {.kind = PSRT_KIND_REQ, .op = PSRT_OP_ECHO, .len = 4, .pcrc = 1};
    uint8_t hdr[PSRT_FRAME_HDR];
    psrt_frame_encode(hdr, &h);
    FL_REQUIRE_EQ(write(fd, hdr, sizeof hdr), (ssize_t)sizeof hdr);
    FL_REQUIRE_EQ(write(fd, "abcd", 4), 4);
    FL_ASSERT_EQ(read(fd, &c, 1), 0);   /* accepted, read, closed for the bad crc */
    close(fd);
}

/* A peer that accepts and closes at once (as a server out of descriptors
 * does): each reconnect after a connection that brought no reply waits
 * longer (20 ms, doubling), so a caller retrying on every transport error
 * does not spin; connects then calls, six times, take at least the waits. */
static void *accept_and_close(void *arg)
{
    int lfd = *(int *)arg, fd;
    while ((fd = accept(lfd, NULL, NULL)) >= 0)
        close(fd);
    return NULL;
}

FL_TEST(psrt_rpc, reconnect_after_unanswered_connection_backs_off)
{
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(0x7f000001);
    socklen_t al = sizeof a;
    FL_REQUIRE_EQ(bind(lfd, (struct sockaddr *)&a, sizeof a), 0);
    FL_REQUIRE_EQ(listen(lfd, 16), 0);
    getsockname(lfd, (struct sockaddr *)&a, &al);
    pthread_t t;
    pthread_create(&t, NULL, accept_and_close, &lfd);
    struct psrt_conn *c = psrt_conn_new("127.0.0.1", ntohs(a.sin_port), "closer");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int failed = 0;
    for (int i = 0; i < 6; i++) {
        struct psrt_err e = {0};
        FL_REQUIRE_EQ(psrt_conn_connect(c, 5, &e), 0);
        struct psrt_buf resp = {0};
        int32_t st;
        if (psrt_conn_send(c, PSRT_OP_PING, 0, NULL, 0, 5, &e) || psrt_conn_recv(c, 5, &resp, &st, &e))
            failed++;
        psrt_buf_free(&resp);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double took = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    FL_ASSERT_EQ(failed, 6);
    FL_ASSERT_MSG(took >= 0.5, "6 reconnects to a peer that closes at once took %.3f s (no backoff)",
                  took);
    psrt_conn_free(c);
    shutdown(lfd, SHUT_RDWR);
    close(lfd);
    pthread_join(t, NULL);
}

/* A reply read in pieces (how the chief streams a robust save into its
 * bundle): an intact one verifies at the end; one whose payload crc does
 * not match fails at the end, naming the peer, and closes the connection. */
FL_TEST(psrt_rpc, streamed_reply_checks_crc_at_the_end)
{
    struct ps_fixture x;
    fixture(&x, "linear", PSRT_POOL, 10);
    size_t n = 5 << 20;
    char *big = malloc(n), *back = malloc(n);
    for (size_t i = 0; i < n; i++)
        big[i] = (char)(i * 7 + 3);
    struct iovec iov = {big, n};
    struct psrt_err e = {0};
    uint64_t len = 0;
    int32_t status = -1;
    FL_REQUIRE_EQ(psrt_conn_send(x.c, PSRT_OP_ECHO, 0, &iov, 1, 10, &e), 0);
    FL_REQUIRE_EQ(psrt_conn_recv_begin(x.c, 10, &len, &status, &e), 0);
    FL_ASSERT_EQ(len, n);
    FL_ASSERT_EQ(status, 0);
    FL_REQUIRE_EQ(psrt_conn_recv_part(x.c, back, 1000, &e), 0);
    FL_REQUIRE_EQ(psrt_conn_recv_part(x.c, back + 1000, n - 1000, &e), 0);
    FL_ASSERT_EQ(psrt_conn_recv_end(x.c, &e), 0);
    FL_ASSERT_MEMEQ(back, big, n);
    FL_ASSERT(psrt_conn_is_open(x.c));
    /* a peer whose reply payload does not match its crc */
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(0x7f000001);
    FL_REQUIRE_EQ(bind(lfd, (struct sockaddr *)&a, sizeof a), 0);
    FL_REQUIRE_EQ(listen(lfd, 1), 0);
    socklen_t sl = sizeof a;
    getsockname(lfd, (struct sockaddr *)&a, &sl);
    pid_t pid = fork();
    FL_REQUIRE(pid >= 0);
    if (pid == 0) {
        int fd = accept(lfd, NULL, NULL);
        uint8_t hdr[PSRT_FRAME_HDR];
        if (fd < 0 || read(fd, hdr, sizeof hdr) != (ssize_t)sizeof hdr)
            _exit(1);
        struct psrt_frame_hdr h = {.kind = PSRT_KIND_RESP, .op = PSRT_OP_RSAVE, .len = 6,
                                   .pcrc = psrt_crc32c(0, "abcdef", 6)};
        psrt_frame_encode(hdr, &h);
        if (write(fd, hdr, sizeof hdr) != (ssize_t)sizeof hdr || write(fd, "abcdeX", 6) != 6)
            _exit(1);
        char c;
        while (read(fd, &c, 1) > 0) {
        }
        _exit(0);
    }
    close(lfd);
    struct psrt_conn *c = psrt_conn_new("127.0.0.1", ntohs(a.sin_port), "ps task 2");
    FL_REQUIRE_EQ(psrt_conn_connect(c, 5, &e), 0);
    FL_REQUIRE_EQ(psrt_conn_send(c, PSRT_OP_RSAVE, 0, &iov, 0, 5, &e), 0);
    FL_REQUIRE_EQ(psrt_conn_recv_begin(c, 5, &len, &status, &e), 0);
    FL_ASSERT_EQ(len, 6);
    FL_REQUIRE_EQ(psrt_conn_recv_part(c, back, 6, &e), 0);
    FL_ASSERT_EQ(psrt_conn_recv_end(c, &e), -EBADMSG);
    FL_ASSERT_CONTAINS(e.msg, "ps task 2");
    FL_ASSERT_CONTAINS(e.msg, "crc");
    FL_ASSERT(!psrt_conn_is_open(c));
    psrt_conn_free(c);
    int st;
    waitpid(pid, &st, 0);
    free(big);
    free(back);
}

FL_TEST(psrt_rpc, unreachable_peer_error_names_it)
{
    /* a port nobody listens on */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(0x7f000001);
    FL_REQUIRE_EQ(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t sl = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &sl);
    close(fd);
    struct psrt_conn *c = psrt_conn_new("127.0.0.1", ntohs(a.sin_port), "ps task 3");
    struct psrt_err e = {0};
    double t0 = psrt_now();
    FL_ASSERT_EQ(psrt_conn_connect(c, 0.3, &e), -ECONNREFUSED);
    FL_ASSERT_LT(psrt_now() - t0, 2.0);
    char want[64];
    snprintf(want, sizeof want, "ps task 3 at 127.0.0.1:%d", ntohs(a.sin_port));
    FL_ASSERT_CONTAINS(e.msg, want);
    FL_ASSERT_CONTAINS(e.msg, "UnavailableError");
    psrt_conn_free(c);
}

/* A peer that answers any request with a reply of n bytes sent in k
 * chunks, gap seconds apart (after the first chunk), or (k == 0) never. */
static pid_t slow_peer(int *port, size_t n, int k, double gap)
{
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(0x7f000001);
    if (bind(lfd, (struct sockaddr *)&a, sizeof a) || listen(lfd, 4))
        return -1;
    socklen_t sl = sizeof a;
    getsockname(lfd, (struct sockaddr *)&a, &sl);
    *port = ntohs(a.sin_port);
    pid_t pid = fork();
    if (pid != 0) {
        close(lfd);
        return pid;
    }
    char *body = malloc(n);
    for (size_t i = 0; i < n; i++)
        body[i] = (char)(i * 13 + 1);
    for (;;) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0)
            _exit(1);
        uint8_t hdr[PSRT_FRAME_HDR];
        struct psrt_frame_hdr h;
        if (read(fd, hdr, sizeof hdr) != (ssize_t)sizeof hdr ||
            psrt_frame_decode(hdr, &h, 1 << 20) || h.len != 0)
            _exit(1);
        if (k == 0) {
            char c;
            while (read(fd, &c, 1) > 0) {
            }
            close(fd);
            continue;
        }
        struct psrt_frame_hdr r = {.kind = PSRT_KIND_RESP, .op = h.op, .id = h.id, .len = n,
                                   .pcrc = psrt_crc32c(0, body, n)};
        psrt_frame_encode(hdr, &r);
        if (write(fd, hdr, sizeof hdr) != (ssize_t)sizeof hdr)
            _exit(1);
        size_t per = n / (size_t)k;
        for (int c = 0; c < k; c++) {
            if (c) {
                struct timespec ts = {0, (long)(gap * 1e9)};
                nanosleep(&ts, NULL);
            }
            size_t len = c == k - 1 ? n - per * (size_t)c : per;
            if (write(fd, body + per * (size_t)c, len) != (ssize_t)len)
                _exit(1);
        }
        close(fd);
    }
}

/* Timeouts are idle timeouts: a reply that keeps moving for longer than
 * the timeout in all arrives whole (one call, and the multiplexed calls);
 * a peer that says nothing is given up after about the timeout. */
/* A host name that does not resolve is said so, not "No route to host". */
FL_TEST(psrt_rpc, unresolvable_host_is_named_as_such)
{
    struct psrt_conn *c = psrt_conn_new("nosuchhost.invalid", 2222, "ps task 1");
    struct psrt_err e = {0};
    FL_ASSERT_NE(psrt_conn_connect(c, 0.2, &e), 0);
    FL_ASSERT_CONTAINS(e.msg, "cannot reach ps task 1 at nosuchhost.invalid:2222 within 0.2 s: "
                              "cannot resolve host name 'nosuchhost.invalid': ");
    psrt_conn_free(c);
}

FL_TEST(psrt_rpc, timeout_is_idle_not_total)
{
    int port;
    size_t n = 64 << 10;
    pid_t pid = slow_peer(&port, n, 8, 0.15); /* about 1 s in all */
    FL_REQUIRE(pid > 0);
    struct psrt_conn *c = psrt_conn_new("127.0.0.1", port, "ps task 4");
    struct psrt_err e = {0};
    struct psrt_buf resp = {0};
    int32_t st = -1;
    FL_REQUIRE_EQ(psrt_conn_connect(c, 5, &e), 0);
    double t0 = psrt_now();
    FL_ASSERT_MSG(psrt_conn_call(c, PSRT_OP_PING, 0, NULL, 0, 0.5, &resp, &st, &e) == 0, "%s",
                  e.msg);
    FL_ASSERT_GT(psrt_now() - t0, 0.6); /* it did take longer than the timeout */
    FL_ASSERT_EQ(resp.len, n);
    FL_REQUIRE_EQ(psrt_conn_connect(c, 5, &e), 0); /* the peer closes after each reply */
    struct psrt_mcall m = {.c = c, .op = PSRT_OP_PING, .resp = &resp, .err = &e};
    FL_ASSERT_MSG(psrt_conn_multi(&m, 1, 0.5) == 0, "%s", e.msg);
    FL_ASSERT_EQ(resp.len, n);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    /* a silent peer */
    pid = slow_peer(&port, n, 0, 0);
    FL_REQUIRE(pid > 0);
    struct psrt_conn *s = psrt_conn_new("127.0.0.1", port, "ps task 5");
    FL_REQUIRE_EQ(psrt_conn_connect(s, 5, &e), 0);
    t0 = psrt_now();
    FL_ASSERT_EQ(psrt_conn_call(s, PSRT_OP_PING, 0, NULL, 0, 0.3, &resp, &st, &e), -ETIMEDOUT);
    FL_ASSERT_LT(psrt_now() - t0, 2.0);
    FL_ASSERT_CONTAINS(e.msg, "ps task 5");
    FL_REQUIRE_EQ(psrt_conn_connect(s, 5, &e), 0);
    m = (struct psrt_mcall){.c = s, .op = PSRT_OP_PING, .resp = &resp, .err = &e};
    FL_ASSERT_EQ(psrt_conn_multi(&m, 1, 0.3), -ETIMEDOUT);
    FL_ASSERT_CONTAINS(e.msg, "waiting on Ping");
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    psrt_conn_free(c);
    psrt_conn_free(s);
    psrt_buf_free(&resp);
}

/* ---- kept checkpoints (the chief's and each ps's state file) ------------------------------------ */

static void touch_ckpt(const char *dir, const char *name)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/%s.index", dir, name);
    FILE *f = fopen(p, "w");
    if (f)
        fclose(f);
    snprintf(p, sizeof p, "%s/%s.data-00000-of-00001", dir, name);
    f = fopen(p, "w");
    if (f)
        fclose(f);
}

static bool ckpt_exists(const char *dir, const char *name)
{
    char p[1024];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s.index", dir, name);
    return stat(p, &sb) == 0;
}

/* Committing a name the state lists already counts it once: nothing else
 * is deleted (it used to drop one checkpoint too many); a new name past
 * max_to_keep deletes exactly the oldest. */
FL_TEST(psrt_state, commit_keeps_exactly_max_to_keep)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/keep", fl_test_dir());
    FL_REQUIRE_EQ(mkdir(dir, 0755), 0);
    struct psrt_err e = {0};
    static const char *const names[] = {"model.ckpt-1", "model.ckpt-2", "model.ckpt-3"};
    for (int i = 0; i < 3; i++) {
        touch_ckpt(dir, names[i]);
        FL_REQUIRE_MSG(psrt_state_commit(dir, names[i], 3, 0, NULL, &e) == 0, "%s", e.msg);
    }
    /* again, the newest: all three stay */
    FL_REQUIRE_MSG(psrt_state_commit(dir, "model.ckpt-3", 3, CKPT_SYNC, NULL, &e) == 0, "%s",
                   e.msg);
    for (int i = 0; i < 3; i++)
        FL_ASSERT_MSG(ckpt_exists(dir, names[i]), "%s deleted", names[i]);
    struct ckpt_state st;
    struct ckpt_err ce = {0};
    FL_REQUIRE_EQ(ckpt_state_read(dir, &st, &ce), 0);
    FL_ASSERT_EQ(st.n_all, 3);
    FL_ASSERT_STREQ(st.model_checkpoint_path, "model.ckpt-3");
    ckpt_state_free(&st);
    /* a fourth: the oldest goes, files and entry */
    touch_ckpt(dir, "model.ckpt-4");
    FL_REQUIRE_MSG(psrt_state_commit(dir, "model.ckpt-4", 3, 0, NULL, &e) == 0, "%s", e.msg);
    FL_ASSERT(!ckpt_exists(dir, "model.ckpt-1"));
    FL_ASSERT(ckpt_exists(dir, "model.ckpt-2"));
    FL_REQUIRE_EQ(ckpt_state_read(dir, &st, &ce), 0);
    FL_REQUIRE_EQ(st.n_all, 3);
    FL_ASSERT_STREQ(st.all_model_checkpoint_paths[0], "model.ckpt-2");
    FL_ASSERT_STREQ(st.all_model_checkpoint_paths[2], "model.ckpt-4");
    ckpt_state_free(&st);
    /* re-committing an older listed one moves it last, deletes nothing */
    FL_REQUIRE_MSG(psrt_state_commit(dir, "model.ckpt-2", 3, 0, NULL, &e) == 0, "%s", e.msg);
    FL_ASSERT(ckpt_exists(dir, "model.ckpt-2") && ckpt_exists(dir, "model.ckpt-3") &&
              ckpt_exists(dir, "model.ckpt-4"));
    FL_REQUIRE_EQ(ckpt_state_read(dir, &st, &ce), 0);
    FL_ASSERT_EQ(st.n_all, 3);
    FL_ASSERT_STREQ(st.model_checkpoint_path, "model.ckpt-2");
    ckpt_state_free(&st);
}

/* psrt_state_commit_keep: the checkpoint to keep too (a ps's copy of the
 * chief's last reported save) stays, beyond max_to_keep; once another is
 * named, it goes as usual. */
FL_TEST(psrt_state, commit_keep_too_survives_max_to_keep)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/keeptoo", fl_test_dir());
    FL_REQUIRE_EQ(mkdir(dir, 0755), 0);
    struct psrt_err e = {0};
    touch_ckpt(dir, "model.ckpt-80");
    FL_REQUIRE_MSG(psrt_state_commit(dir, "model.ckpt-80", 1, 0, NULL, &e) == 0, "%s", e.msg);
    touch_ckpt(dir, "model.ckpt-100");
    FL_REQUIRE_MSG(psrt_state_commit_keep(dir, "model.ckpt-100", 1, "model.ckpt-80", 0, NULL,
                                          &e) == 0, "%s", e.msg);
    FL_ASSERT(ckpt_exists(dir, "model.ckpt-80") && ckpt_exists(dir, "model.ckpt-100"));
    struct ckpt_state st;
    struct ckpt_err ce = {0};
    FL_REQUIRE_EQ(ckpt_state_read(dir, &st, &ce), 0);
    FL_ASSERT_EQ(st.n_all, 2);
    FL_ASSERT_STREQ(st.model_checkpoint_path, "model.ckpt-100");
    ckpt_state_free(&st);
    /* the next save, 100 reported: 80 goes, 100 stays */
    touch_ckpt(dir, "model.ckpt-120");
    FL_REQUIRE_MSG(psrt_state_commit_keep(dir, "model.ckpt-120", 1, "model.ckpt-100", 0, NULL,
                                          &e) == 0, "%s", e.msg);
    FL_ASSERT(!ckpt_exists(dir, "model.ckpt-80"));
    FL_ASSERT(ckpt_exists(dir, "model.ckpt-100") && ckpt_exists(dir, "model.ckpt-120"));
    FL_REQUIRE_EQ(ckpt_state_read(dir, &st, &ce), 0);
    FL_ASSERT_EQ(st.n_all, 2);
    ckpt_state_free(&st);
}

/* A state write that fails (a full disk) deletes nothing: the old state
 * still names every checkpoint it listed, and they are all still there. */
FL_TEST(psrt_state, failed_commit_deletes_nothing)
{
#ifndef FIU_ENABLE
    FL_SKIP("built without FIU_ENABLE: no fault points");
#else
    char dir[512];
    snprintf(dir, sizeof dir, "%s/keepfail", fl_test_dir());
    FL_REQUIRE_EQ(mkdir(dir, 0755), 0);
    struct psrt_err e = {0};
    static const char *const names[] = {"model.ckpt-1", "model.ckpt-2"};
    for (int i = 0; i < 2; i++) {
        touch_ckpt(dir, names[i]);
        FL_REQUIRE_MSG(psrt_state_commit(dir, names[i], 2, 0, NULL, &e) == 0, "%s", e.msg);
    }
    touch_ckpt(dir, "model.ckpt-3");
    fiu_init(0);
    fiu_enable("test/state", 1, (void *)(intptr_t)ENOSPC, 0);
    FL_ASSERT_EQ(psrt_state_commit(dir, "model.ckpt-3", 2, 0, "test/state", &e), -ENOSPC);
    fiu_disable("test/state");
    FL_ASSERT_CONTAINS(e.msg, "No space left on device");
    for (int i = 0; i < 2; i++)
        FL_ASSERT_MSG(ckpt_exists(dir, names[i]), "%s deleted by a failed commit", names[i]);
    struct ckpt_state st;
    struct ckpt_err ce = {0};
    FL_REQUIRE_EQ(ckpt_state_read(dir, &st, &ce), 0);
    FL_ASSERT_STREQ(st.model_checkpoint_path, "model.ckpt-2");
    ckpt_state_free(&st);
    /* the retry succeeds and deletes the oldest then */
    FL_REQUIRE_MSG(psrt_state_commit(dir, "model.ckpt-3", 2, 0, "test/state", &e) == 0, "%s",
                   e.msg);
    FL_ASSERT(!ckpt_exists(dir, "model.ckpt-1"));
    FL_ASSERT(ckpt_exists(dir, "model.ckpt-2") && ckpt_exists(dir, "model.ckpt-3"));
#endif
}

/* A ps's own directory swept after a commit: the files of checkpoints below
 * the committed step that its state does not list go (a failed save's copy,
 * a killed write's temporary file); listed ones, newer ones and anything
 * not named model.ckpt-<step>.* stay. */
FL_TEST(psrt_state, sweep_removes_only_unlisted_older_checkpoints)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/sweep", fl_test_dir());
    FL_REQUIRE_EQ(mkdir(dir, 0755), 0);
    struct psrt_err e = {0};
    FL_ASSERT_EQ(psrt_state_sweep(dir, 100), 0); /* no state: nothing is known unlisted */
    touch_ckpt(dir, "model.ckpt-10");
    touch_ckpt(dir, "model.ckpt-20");
    FL_REQUIRE_MSG(psrt_state_commit(dir, "model.ckpt-20", 5, 0, NULL, &e) == 0, "%s", e.msg);
    touch_ckpt(dir, "model.ckpt-30");
    const char *others[] = {"model.ckpt-15.data-00000-of-00001.tempstate123", "model.ckpt-abc.index",
                            "model.ckpt-5", "notes.txt"};
    for (int i = 0; i < 4; i++) {
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, others[i]);
        FILE *f = fopen(p, "w");
        FL_REQUIRE(f != NULL);
        fclose(f);
    }
    FL_ASSERT_EQ(psrt_state_sweep(dir, 30), 3); /* 10's index and data, 15's temporary file */
    FL_ASSERT(!ckpt_exists(dir, "model.ckpt-10"));
    FL_ASSERT(ckpt_exists(dir, "model.ckpt-20") && ckpt_exists(dir, "model.ckpt-30"));
    for (int i = 0; i < 4; i++) {
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, others[i]);
        FL_ASSERT_MSG(access(p, F_OK) == (i == 0 ? -1 : 0), "%s", others[i]);
    }
}

/* ---- tensor lists through the bundle library ------------------------------------------------- */

FL_TEST(psrt_tensors, encode_decode_and_bundle_roundtrip_bit_exact)
{
    struct psrt_tl l = {0};
    float w[6] = {1, 2, 3, 4, 5, 6};
    int64_t gs = 42, d2[2] = {2, 3}, d1[1] = {3};
    uint64_t keys[3] = {9, UINT64_MAX, 1};
    psrt_tl_add(&l, "global_step", CKPT_DT_INT64, 0, NULL, &gs, 8);
    psrt_tl_add(&l, "w", CKPT_DT_FLOAT, 2, d2, w, sizeof w);
    psrt_tl_add(&l, "sp/part_0/keys", CKPT_DT_INT64, 1, d1, keys, sizeof keys);
    struct psrt_buf b = {0};
    psrt_tl_encode(&l, &b);
    struct psrt_tl d;
    FL_REQUIRE_EQ(psrt_tl_decode(&d, &b), 0);
    FL_REQUIRE_EQ(d.n, 3);
    FL_ASSERT_MEMEQ(psrt_tl_find(&d, "w")->data, w, sizeof w);
    /* truncated encodings are rejected */
    for (size_t cut = 0; cut < b.len; cut += 7) {
        struct psrt_buf t = {.p = b.p, .len = cut};
        struct psrt_tl x;
        FL_ASSERT_EQ(psrt_tl_decode(&x, &t), -EBADMSG);
    }
    char prefix[512];
    snprintf(prefix, sizeof prefix, "%s/sub/model.ckpt-1", fl_test_dir());
    struct psrt_err e = {0};
    FL_REQUIRE_MSG(psrt_tl_write_bundle(&l, prefix, CKPT_W_MKDIR_P, CKPT_SYNC, &e) == 0, "%s",
                   e.msg);
    struct psrt_tl r;
    FL_REQUIRE_MSG(psrt_tl_read_bundle(&r, prefix, &e) == 0, "%s", e.msg);
    FL_ASSERT_EQ(r.n, 3);
    for (int i = 0; i < l.n; i++) {
        const struct psrt_tensor *t = psrt_tl_find(&r, l.t[i].name);
        FL_REQUIRE(t != NULL);
        FL_ASSERT_EQ(t->len, l.t[i].len);
        FL_ASSERT_MEMEQ(t->data, l.t[i].data, t->len);
    }
    psrt_tl_free(&r);
    /* a missing directory with a non-recursive writer: TensorFlow's message */
    snprintf(prefix, sizeof prefix, "%s/nope/x_temp_0123/part-00000-of-00001", fl_test_dir());
    FL_ASSERT_EQ(psrt_tl_write_bundle(&l, prefix, 0, 0, &e), -ENOENT);
    FL_ASSERT_CONTAINS(e.msg, "NotFoundError: ");
    FL_ASSERT_CONTAINS(e.msg, "part-00000-of-00001.data-00000-of-00001; No such file or directory");
    psrt_buf_free(&b);
    l.owns = false;
    psrt_tl_free(&l);
    d.owns = false;
    psrt_tl_free(&d);
}

/* ---- event channel -------------------------------------------------------------------------------- */

struct fake_harness {
    int lfd;
    char lines[8][256];
    int n;
};

static void *harness_thread(void *arg)
{
    struct fake_harness *h = arg;
    int fd = accept(h->lfd, NULL, NULL);
    char buf[4096];
    size_t got = 0;
    while (h->n < 3) {
        ssize_t k = read(fd, buf + got, sizeof buf - got - 1);
        if (k <= 0)
            break;
        got += (size_t)k;
        char *nl;
        while ((nl = memchr(buf, '\n', got))) {
            *nl = 0;
            snprintf(h->lines[h->n], sizeof h->lines[0], "%s", buf);
            unsigned long long seq;
            if (sscanf(buf, "SYNC %llu", &seq) == 1) {
                char ok[64];
                int m = snprintf(ok, sizeof ok, "OK %llu\n", seq);
                if (write(fd, ok, (size_t)m) < 0)
                    break;
            }
            h->n++;
            got -= (size_t)(nl + 1 - buf);
            memmove(buf, nl + 1, got);
        }
    }
    close(fd);
    return NULL;
}

FL_TEST(psrt_events, hello_event_and_sync_waits_for_ok)
{
    char path[512];
    snprintf(path, sizeof path, "%s/ev.sock", fl_test_dir());
    struct fake_harness h = {0};
    h.lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    FL_REQUIRE_EQ(bind(h.lfd, (struct sockaddr *)&a, sizeof a), 0);
    FL_REQUIRE_EQ(listen(h.lfd, 1), 0);
    pthread_t t;
    pthread_create(&t, NULL, harness_thread, &h);
    setenv("FAULTLINE_EVENTS", path, 1);
    setenv("FAULTLINE_SYNC", "save.shard_written,other", 1);
    setenv("FAULTLINE_HOST", "ps1", 1);
    psrt_ev_open("ps", 1);
    psrt_ev("save.begin", "step=5 prefix=%s", psrt_ev_q("./a b/model.ckpt-5"));
    psrt_ev("save.shard_written", "shard=1 step=5");
    pthread_join(t, NULL);
    FL_ASSERT_EQ(h.n, 3);
    char want[128];
    snprintf(want, sizeof want, "HELLO host=ps1 job=ps task=1 pid=%d", (int)getpid());
    FL_ASSERT_STREQ(h.lines[0], want);
    FL_ASSERT_STREQ(h.lines[1], "EVENT save.begin step=5 prefix=\"./a b/model.ckpt-5\"");
    FL_ASSERT_STREQ(h.lines[2], "SYNC 2 save.shard_written shard=1 step=5");
    /* the harness is gone: events are dropped, the process carries on */
    psrt_ev("save.done", "step=5");
    psrt_ev("save.done", "step=6");
    psrt_ev_close();
    close(h.lfd);
}

FL_TEST(psrt_rpc, multi_pipelines_calls_per_connection_in_order)
{
    struct ps_fixture x, y;
    fixture(&x, "linear", PSRT_POOL, 10);
    fixture(&y, "linear", PSRT_PER_REQUEST, 10);
    enum { N = 7 };
    struct psrt_mcall m[N];
    struct psrt_err err[N];
    struct psrt_buf resp[N];
    char *payload[N];
    struct iovec iov[N];
    memset(resp, 0, sizeof resp);
    for (int i = 0; i < N; i++) {
        size_t n = (size_t)(i + 1) * 300000; /* big enough to interleave on the wire */
        payload[i] = malloc(n);
        for (size_t j = 0; j < n; j++)
            payload[i][j] = (char)(i * 7 + j);
        iov[i] = (struct iovec){payload[i], n};
        m[i] = (struct psrt_mcall){.c = i % 3 ? x.c : y.c, .op = PSRT_OP_ECHO, .iov = &iov[i],
                                   .niov = 1, .resp = &resp[i], .err = &err[i]};
    }
    FL_REQUIRE_EQ(psrt_conn_multi(m, N, 10), 0);
    for (int i = 0; i < N; i++) {
        FL_ASSERT_EQ(m[i].rc, 0);
        FL_ASSERT_EQ(m[i].status, 0);
        FL_ASSERT_EQ(resp[i].len, iov[i].iov_len);
        if (resp[i].len == iov[i].iov_len)
            FL_ASSERT_MEMEQ(resp[i].p, payload[i], resp[i].len);
        free(payload[i]);
        psrt_buf_free(&resp[i]);
    }
    /* a closed connection fails its calls with an error naming the peer */
    psrt_conn_close(y.c);
    char one = 1;
    struct iovec o = {&one, 1};
    m[0] = (struct psrt_mcall){.c = y.c, .op = PSRT_OP_ECHO, .iov = &o, .niov = 1,
                               .resp = &resp[0], .err = &err[0]};
    m[1] = (struct psrt_mcall){.c = x.c, .op = PSRT_OP_ECHO, .iov = &o, .niov = 1,
                               .resp = &resp[1], .err = &err[1]};
    FL_ASSERT_EQ(psrt_conn_multi(m, 2, 5), -ENOTCONN);
    FL_ASSERT_CONTAINS(err[0].msg, "ps task 0 at 127.0.0.1:");
    FL_ASSERT_EQ(m[1].rc, 0);
    FL_ASSERT_EQ(resp[1].len, 1);
    psrt_buf_free(&resp[0]);
    psrt_buf_free(&resp[1]);
}
