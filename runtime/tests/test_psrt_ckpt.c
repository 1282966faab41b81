/*
 * test_psrt_ckpt.c: robust checkpoints restore bit-exactly (every kept
 * checkpoint, through both restore paths: a ps's own copy and the chief's
 * copy), a restore with too few surviving copies fails naming the shard,
 * S003's thread-per-request dies under a task limit while the pool keeps
 * training, and the failure modes that must give one clear line and a
 * non-zero exit (bad flags, unreachable ps, corrupt checkpoint, full disk)
 * without damaging what was saved.  Also the event stream of a real run.
 */
#include "runtime/tests/psrt_cluster.h"
#include "runtime/psrt/psrt.h"
#include "runtime/ckpt/bundle.h"
#include "runtime/ckpt/state.h"

#include <sched.h>
#include <sys/mount.h>
#include <sys/un.h>
#include <pthread.h>

static void copy_file(const char *from_rel, const char *to_rel)
{
    char *out = NULL;
    int r = fl_test_sh(&out, "cp '%s/%s' '%s/%s'", fl_test_dir(), from_rel, fl_test_dir(), to_rel);
    FL_REQUIRE_MSG(r == 0, "cp %s %s: %s", from_rel, to_rel, out);
    free(out);
}

/* Every tensor of bundle a equals the one in b, byte for byte (and b has no
 * others). */
static void assert_same_tensors(const char *a_rel, const char *b_rel)
{
    char a[PATH_MAX], b[PATH_MAX];
    snprintf(a, sizeof a, "%s/%s", fl_test_dir(), a_rel);
    snprintf(b, sizeof b, "%s/%s", fl_test_dir(), b_rel);
    struct psrt_tl la, lb;
    struct psrt_err e = {0};
    FL_REQUIRE_MSG(psrt_tl_read_bundle(&la, a, &e) == 0, "%s", e.msg);
    FL_REQUIRE_MSG(psrt_tl_read_bundle(&lb, b, &e) == 0, "%s", e.msg);
    FL_ASSERT_EQ(la.n, lb.n);
    for (int i = 0; i < la.n; i++) {
        const struct psrt_tensor *t = psrt_tl_find(&lb, la.t[i].name);
        FL_ASSERT_MSG(t != NULL, "%s: tensor %s missing", b_rel, la.t[i].name);
        if (!t)
            continue;
        FL_ASSERT_EQ(t->len, la.t[i].len);
        FL_ASSERT_EQ(t->dtype, la.t[i].dtype);
        if (t->len == la.t[i].len)
            FL_ASSERT_MSG(memcmp(t->data, la.t[i].data, t->len) == 0, "tensor %s differs", t->name);
    }
    psrt_tl_free(&la);
    psrt_tl_free(&lb);
}

/* Trains model with 2 ps and 3 workers, saving every 100 steps, then
 * restores every checkpoint kept (from the chief's copy or from the ps
 * copies, alternately) into a fresh run that exports what it restored:
 * each export equals its checkpoint byte for byte. */
static void every_checkpoint_restores_bit_exactly(const char *model)
{
    struct pc c;
    char flags[256];
    snprintf(flags, sizeof flags,
             "--model=%s --checkpoint_protocol=robust --save_checkpoint_steps=100 "
             "--max_steps=400 --connect_timeout_secs=10",
             model);
    pc_init(&c, 2, 3, flags);
    pc_start_all(&c, NULL, NULL);
    int r = pc_wait_all(&c, 25);
    FL_REQUIRE_MSG(r == 0, "training run: chief exited %d:\n%s", r, pc_read("w0.log"));
    struct ckpt_state st;
    struct ckpt_err ce;
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/w0/train_logs", fl_test_dir());
    FL_REQUIRE_EQ(ckpt_state_read(dir, &st, &ce), 0);
    /* The chief saves at step 0, when the global step is 100 past its last
     * save, and at 400; the other two workers train on while a save is
     * fsynced, so on a busy disk the global step can pass a whole interval
     * during one save and that save point is skipped (model.ckpt-0, -250,
     * -400).  Only the first and the last are certain, and two are enough
     * for both restore paths (k = 0 from the chief's copy, k = 1 from the
     * ps copies). */
    FL_REQUIRE_MSG(st.n_all >= 2, "%zu checkpoints kept, want the first and the last", st.n_all);
    for (size_t k = 0; k < st.n_all; k++) {
        const char *name = st.all_model_checkpoint_paths[k];
        long long step = atoll(strrchr(name, '-') + 1);
        char rel[PATH_MAX], rel2[PATH_MAX], tag[64];
        /* path 1 (even k): every ps starts on a fresh disk, the chief holds only
         * this checkpoint: shards come from the chief's copy (Load).
         * path 2 (odd k): the chief's disk is fresh, each ps holds only its own
         * copy of this checkpoint: shards come from the ps copies. */
        bool from_chief = k % 2 == 0;
        snprintf(tag, sizeof tag, "r%zu", k);
        struct pc d;
        char common[512];
        snprintf(common, sizeof common,
                 "--model=%s --checkpoint_protocol=robust --save_checkpoint_steps=100 "
                 "--max_steps=%lld --export_dir=./export --connect_timeout_secs=10",
                 model, step);
        pc_init(&d, 2, 2, common);
        snprintf(rel, sizeof rel, "%s_w0/train_logs", tag);
        pc_dir(rel);
        if (from_chief) {
            snprintf(rel, sizeof rel, "w0/train_logs/%s.index", name);
            snprintf(rel2, sizeof rel2, "%s_w0/train_logs/%s.index", tag, name);
            copy_file(rel, rel2);
            snprintf(rel, sizeof rel, "w0/train_logs/%s.data-00000-of-00001", name);
            snprintf(rel2, sizeof rel2, "%s_w0/train_logs/%s.data-00000-of-00001", tag, name);
            copy_file(rel, rel2);
            struct ckpt_state one = {0};
            ckpt_state_add_path(&one, name, -1);
            ckpt_state_set_model(&one, name);
            snprintf(rel, sizeof rel, "%s/%s_w0/train_logs", fl_test_dir(), tag);
            FL_REQUIRE_EQ(ckpt_state_write(rel, &one, 0, &ce), 0);
            ckpt_state_free(&one);
        } else {
            for (int p = 0; p < 2; p++) {
                snprintf(rel, sizeof rel, "%s_ps%d/train_logs/ps%d", tag, p, p);
                pc_dir(rel);
                const char *sfx[] = {"index", "data-00000-of-00001"};
                for (int s = 0; s < 2; s++) {
                    snprintf(rel, sizeof rel, "ps%d/train_logs/ps%d/%s.%s", p, p, name, sfx[s]);
                    snprintf(rel2, sizeof rel2, "%s_ps%d/train_logs/ps%d/%s.%s", tag, p, p, name,
                             sfx[s]);
                    copy_file(rel, rel2);
                }
                struct ckpt_state one = {0};
                ckpt_state_add_path(&one, name, -1);
                ckpt_state_set_model(&one, name);
                snprintf(rel, sizeof rel, "%s/%s_ps%d/train_logs/ps%d", fl_test_dir(), tag, p, p);
                FL_REQUIRE_EQ(ckpt_state_write(rel, &one, 0, &ce), 0);
                ckpt_state_free(&one);
            }
        }
        char dn[4][64];
        snprintf(dn[0], 64, "%s_ps0", tag);
        snprintf(dn[1], 64, "%s_ps1", tag);
        snprintf(dn[2], 64, "%s_w1", tag);
        snprintf(dn[3], 64, "%s_w0", tag);
        pc_start(&d, "ps", 0, dn[0], NULL);
        pc_start(&d, "ps", 1, dn[1], NULL);
        pc_start(&d, "worker", 1, dn[2], NULL);
        pc_start(&d, "worker", 0, dn[3], NULL);
        r = pc_wait_all(&d, 25);
        snprintf(rel, sizeof rel, "%s_w0.log", tag);
        char *log = pc_read(rel);
        FL_REQUIRE_MSG(r == 0, "restore of %s: chief exited %d:\n%s", name, r, log);
        char want[256];
        snprintf(want, sizeof want, "Restoring parameters from ./train_logs/%s", name);
        FL_ASSERT_CONTAINS(log, want);
        if (from_chief)
            FL_ASSERT_CONTAINS(log, "restored from the chief's copy");
        free(log);
        /* the export is a snapshot of the restored variables */
        snprintf(rel, sizeof rel, "w0/train_logs/%s", name);
        snprintf(rel2, sizeof rel2, "%s_w0/export/1/variables/variables", tag);
        assert_same_tensors(rel, rel2);
    }
    ckpt_state_free(&st);
}

FL_TEST_CLUSTER_T(psrt_ckpt, robust_every_checkpoint_restores_bit_exactly, 60)
{
    every_checkpoint_restores_bit_exactly("sparse_lr");
}

/* softmax's weights and Adagrad accumulators (31 KB each) are big enough
 * for the ps to keep a save's buffers and copy the next snapshot into them
 * (ps.c, spares): a buffer reused while a reply or the local write still
 * read it would show here as a checkpoint unlike its variables */
FL_TEST_CLUSTER_T(psrt_ckpt, robust_checkpoints_restore_bit_exactly_when_save_buffers_are_reused,
                  60)
{
    every_checkpoint_restores_bit_exactly("softmax");
}

FL_TEST_CLUSTER_T(psrt_ckpt, robust_restore_with_too_few_copies_names_the_shard, 40)
{
    struct pc c;
    pc_init(&c, 2, 2,
            "--model=linear --checkpoint_protocol=robust --save_checkpoint_steps=100 "
            "--max_steps=300 --connect_timeout_secs=10");
    pc_start_all(&c, NULL, NULL);
    FL_REQUIRE_EQ(pc_wait_all(&c, 25), 0);
    /* ps 1 and the chief both lose their disks; ps 0 keeps its copy */
    struct pc d;
    pc_init(&d, 2, 2,
            "--model=linear --checkpoint_protocol=robust --save_checkpoint_steps=100 "
            "--max_steps=600 --connect_timeout_secs=10");
    pc_start(&d, "ps", 0, "ps0", NULL);
    pc_start(&d, "ps", 1, "ps1_new", NULL);
    pc_start(&d, "worker", 1, "w1", NULL);
    pc_start(&d, "worker", 0, "w0_new", NULL);
    int r = pc_wait_all(&d, 25);
    char *log = pc_read("w0_new.log");
    FL_ASSERT_EQ(r, 1);
    FL_ASSERT_CONTAINS(log, "cannot restore ./train_logs/model.ckpt-300: shard 1 of 2 (ps task 1");
    FL_ASSERT_CONTAINS(log, "has no surviving copy");
    FL_ASSERT_CONTAINS(log, "./train_logs/ps1/model.ckpt-300");
    /* nothing was initialised over it: ps 0's copy is still there */
    FL_ASSERT(pc_exists("ps0/train_logs/ps0/model.ckpt-300.index"));
    free(log);
}

/* The chief's state file is damaged and the ps lost its disk: which checkpoint
 * is the latest is unknown, so the chief fails naming the file instead of
 * training from scratch over the checkpoints still in train_dir. */
FL_TEST_CLUSTER_T(psrt_ckpt, robust_unreadable_state_without_ps_copies_fails_naming_it, 40)
{
    struct pc c;
    pc_init(&c, 1, 1,
            "--model=linear --checkpoint_protocol=robust --save_checkpoint_steps=100 "
            "--max_steps=300 --connect_timeout_secs=10");
    pc_start_all(&c, NULL, NULL);
    FL_REQUIRE_EQ(pc_wait_all(&c, 25), 0);
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/w0/train_logs/checkpoint", fl_test_dir());
    FILE *f = fopen(p, "w");
    FL_REQUIRE(f != NULL);
    fputs("garbage\n", f);
    fclose(f);
    struct pc d;
    pc_init(&d, 1, 1,
            "--model=linear --checkpoint_protocol=robust --save_checkpoint_steps=100 "
            "--max_steps=600 --connect_timeout_secs=10");
    pc_start(&d, "ps", 0, "ps0_new", NULL);
    pc_start(&d, "worker", 0, "w0", NULL);
    int r = pc_wait_all(&d, 25);
    char *log = pc_read("w0.log");
    FL_ASSERT_EQ(r, 1);
    FL_ASSERT_CONTAINS(log, "DataLossError: cannot tell the latest checkpoint: "
                            "./train_logs/checkpoint: line 1 column 1");
    /* (w0.log holds the first run's lines too) */
    const char *second = strstr(log, "ignoring unreadable");
    FL_REQUIRE_MSG(second != NULL, "no 'ignoring unreadable' in:\n%s", log);
    FL_ASSERT_MSG(strstr(second, "initialized all variables") == NULL, "initialised over:\n%s",
                  second);
    /* the checkpoints are untouched */
    FL_ASSERT(pc_exists("w0/train_logs/model.ckpt-100.index"));
    FL_ASSERT(pc_exists("w0/train_logs/model.ckpt-300.index"));
    free(log);
}

/* ---- S003 ------------------------------------------------------------------- */

static void s003(const char *threads, int *chief_status, char **log)
{
    struct pc c;
    char common[512];
    snprintf(common, sizeof common,
             "--model=sparse_lr --checkpoint_protocol=robust --save_checkpoint_secs=0 "
             "--max_steps=400 --connect_timeout_secs=10 --rpc_threads=%s",
             threads);
    pc_init(&c, 2, 4, common);
    /* the chief's machine has a task limit: the chief runs as an unprivileged
     * user with RLIMIT_NPROC 1 (root is exempt from RLIMIT_NPROC) */
    chmod(fl_test_dir(), 0755);
    char d[64];
    snprintf(d, sizeof d, "%s_w0", threads);
    chmod(pc_dir(d), 0777);
    for (int i = 0; i < 2; i++) {
        char n[64];
        snprintf(n, sizeof n, "%s_ps%d", threads, i);
        pc_start(&c, "ps", i, n, NULL);
    }
    for (int i = 1; i < 4; i++) {
        char n[64];
        snprintf(n, sizeof n, "%s_w%d", threads, i);
        pc_start(&c, "worker", i, n, NULL);
    }
    struct pc_opts o = {.uid = (uid_t)(52000 + getpid() % 5000), .nproc = 1};
    pc_start_opts(&c, "worker", 0, d, NULL, &o);
    *chief_status = pc_wait_all(&c, 25);
    char rel[128];
    snprintf(rel, sizeof rel, "%s_w0.log", threads);
    *log = pc_read(rel);
}

FL_TEST_ROOT_T(psrt_ckpt, s003_per_request_aborts_under_task_limit_pool_keeps_training, 60)
{
    fl_test_need_root(); /* the chief runs as another uid, with RLIMIT_NPROC 1 */
    /* LeakSanitizer starts a thread at exit, which RLIMIT_NPROC 1 refuses */
    fl_test_asan_options("detect_leaks=0");
    int st;
    char *log;
    s003("per_request", &st, &log);
    FL_ASSERT_MSG(st == 128 + SIGABRT, "per_request chief: status %d (want SIGABRT):\n%s", st, log);
    FL_ASSERT_CONTAINS(log, "PosixEnv::SchedClosure: pthread_create failed: Resource temporarily "
                            "unavailable");
    free(log);
    s003("pool", &st, &log);
    FL_ASSERT_MSG(st == 0, "pool chief: status %d:\n%s", st, log);
    FL_ASSERT_CONTAINS(log, "training done at global step 400");
    free(log);
}

/* ---- one clear line and a non-zero exit ------------------------------------------ */

FL_TEST_CLUSTER(psrt_ckpt, bad_flags_and_unreachable_ps_give_one_line)
{
    char *out = NULL;
    int r = fl_test_sh(&out,
                       "%s --job_name=worker --ps_hosts=127.0.0.1:1 "
                       "--worker_hosts=127.0.0.1:2 --max_steps=ten 2>&1",
                       fl_test_bin("psrt"));
    FL_ASSERT_EQ(r, 2);
    FL_ASSERT_STREQ(out, "psrt: --max_steps=ten: bad value: expected an integer from 0\n");
    free(out);
    int port = pc_free_port();
    r = fl_test_sh(&out,
                   "cd %s && %s --job_name=worker --ps_hosts=127.0.0.1:%d "
                   "--worker_hosts=127.0.0.1:2 --connect_timeout_secs=0.5 2>&1",
                   fl_test_dir(), fl_test_bin("psrt"), port);
    FL_ASSERT_EQ(r, 1);
    char want[256];
    snprintf(want, sizeof want,
             "UnavailableError: cannot reach ps task 0 at 127.0.0.1:%d within "
             "0.5 s: Connection refused\n",
             port);
    FL_ASSERT_CONTAINS(out, want);
    free(out);
    r = fl_test_sh(&out, "%s --help", fl_test_bin("psrt"));
    FL_ASSERT_EQ(r, 0);
    const char *documented[] = {"--job_name",
                                "--task_index",
                                "--ps_hosts",
                                "--worker_hosts",
                                "--train_dir",
                                "--model",
                                "--optimizer",
                                "--batch_size",
                                "--learning_rate",
                                "--max_steps",
                                "--save_checkpoint_steps",
                                "--save_checkpoint_secs",
                                "--max_to_keep",
                                "--checkpoint_protocol",
                                "--rpc_threads",
                                "--export_dir",
                                "--seed",
                                "psrt predict",
                                "psrt inspect",
                                "psrt/save/merge",
                                "psrt/restore/read",
                                "psrt/export/write",
                                "(docs/events.md)",
                                "--pool_threads",
                                "--export_version",
                                "--rpc_timeout_secs",
                                "--connect_timeout_secs",
                                "--reconnect_timeout_secs",
                                "--ps_exit_on_chief_done",
                                "--sharded_save",
                                "--log_every_steps",
                                "--sparse_features",
                                "--dense_floats",
                                "--step_delay",
                                "--noname (false)",
                                NULL};
    for (int i = 0; documented[i]; i++)
        FL_ASSERT_CONTAINS(out, documented[i]);
    free(out);
    /* the event channel's reference it names is there */
    char ev[4096];
    snprintf(ev, sizeof ev, "%s/docs/events.md", fl_test_root());
    FL_ASSERT_MSG(access(ev, R_OK) == 0, "psrt --help names %s, which is missing", ev);
}

/* A "ps" that accepts and answers garbage: every connection closed after
 * a line of text, as a web server on the wrong port would. */
static void *garbage_server(void *arg)
{
    int lfd = (int)(intptr_t)arg;
    for (;;) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0)
            break;
        char buf[256];
        static const char page[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n"
                                   "Connection: close\r\n\r\n"; /* > one frame header */
        if (read(fd, buf, sizeof buf) >= 0 &&
            write(fd, page, sizeof page - 1) == (ssize_t)(sizeof page - 1)) {
            shutdown(fd, SHUT_WR); /* then wait for the worker to close: no reset */
            while (read(fd, buf, sizeof buf) > 0)
                ;
        }
        close(fd);
    }
    return NULL;
}

/* A worker waiting for the model at such a peer names it and what it said,
 * once, instead of blaming the chief after a reconnect line per retry. */
FL_TEST_CLUSTER_T(psrt_ckpt, garbage_peer_is_named_by_a_waiting_worker, 30)
{
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(0x7f000001);
    socklen_t sl = sizeof a;
    FL_REQUIRE(bind(lfd, (struct sockaddr *)&a, sizeof a) == 0 && listen(lfd, 16) == 0 &&
               getsockname(lfd, (struct sockaddr *)&a, &sl) == 0);
    int port = ntohs(a.sin_port);
    pthread_t t;
    FL_REQUIRE_EQ(pthread_create(&t, NULL, garbage_server, (void *)(intptr_t)lfd), 0);
    pthread_detach(t);
    char *out = NULL;
    int r = fl_test_sh(&out,
                       "cd %s && %s --job_name=worker --task_index=1 "
                       "--ps_hosts=127.0.0.1:%d --worker_hosts=127.0.0.1:2,127.0.0.1:3 "
                       "--connect_timeout_secs=2 --reconnect_timeout_secs=1 2>&1",
                       fl_test_dir(), fl_test_bin("psrt"), port);
    FL_ASSERT_EQ(r, 1);
    char want[256];
    snprintf(want, sizeof want,
             "model not ready after 1 s: ps task 0 at 127.0.0.1:%d: "
             "receiving reply to Ping: bad frame",
             port);
    FL_ASSERT_CONTAINS(out, want);
    const char *rc1 = strstr(out, "reconnecting");
    FL_ASSERT_MSG(!rc1 || !strstr(rc1 + 1, "reconnecting"), "a reconnect line per retry:\n%s", out);
    free(out);
    shutdown(lfd, SHUT_RDWR);
    close(lfd);
}

FL_TEST_CLUSTER_T(psrt_ckpt, corrupt_checkpoint_fails_restore_with_one_line, 40)
{
    struct pc c;
    pc_init(&c, 1, 1,
            "--model=softmax --checkpoint_protocol=legacy --save_checkpoint_steps=100 "
            "--max_steps=200 --connect_timeout_secs=10");
    pc_start(&c, "ps", 0, "m", NULL);
    pc_start(&c, "worker", 0, "m", NULL);
    FL_REQUIRE_EQ(pc_wait_all(&c, 25), 0);
    /* flip a byte in the middle of the latest checkpoint's data */
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/m/train_logs/model.ckpt-200.data-00000-of-00001", fl_test_dir());
    FILE *f = fopen(p, "r+");
    FL_REQUIRE(f != NULL);
    fseek(f, 1000, SEEK_SET);
    int ch = fgetc(f);
    fseek(f, 1000, SEEK_SET);
    fputc(ch ^ 0x40, f);
    fclose(f);
    struct pc d;
    pc_init(&d, 1, 1,
            "--model=softmax --checkpoint_protocol=legacy --save_checkpoint_steps=100 "
            "--max_steps=400 --connect_timeout_secs=10");
    pc_start(&d, "ps", 0, "m", NULL);
    pc_start(&d, "worker", 0, "m", NULL);
    int r = pc_wait_all(&d, 25);
    char *log = pc_read("m.log");
    FL_ASSERT_EQ(r, 1);
    /* the error line itself names the corrupt checkpoint (m.log also holds
     * the first run's lines) */
    const char *dl = strstr(log, "DataLossError: ");
    FL_REQUIRE_MSG(dl != NULL, "no DataLossError in:\n%s", log);
    const char *eol = strchr(dl, '\n');
    char line[1024];
    snprintf(line, sizeof line, "%.*s", (int)(eol ? eol - dl : (long)strlen(dl)), dl);
    FL_ASSERT_CONTAINS(line, "model.ckpt-200");
    free(log);
    /* the older checkpoint is untouched and verifies */
    snprintf(p, sizeof p, "%s/m/train_logs/model.ckpt-100", fl_test_dir());
    struct ckpt_reader *rd;
    struct ckpt_err ce;
    FL_REQUIRE_EQ(ckpt_reader_open(&rd, p, &ce), 0);
    FL_ASSERT_EQ(ckpt_reader_verify(rd, &ce), 0);
    ckpt_reader_close(rd);
}

/* A train_dir or export_dir that is a file is named as such, not a
 * temporary path under it nor a state file read from it. */
FL_TEST_CLUSTER_T(psrt_ckpt, train_dir_or_export_dir_that_is_a_file_is_named, 40)
{
    const char *flags = "--model=linear --checkpoint_protocol=robust --max_steps=20 "
                        "--connect_timeout_secs=10 --ps_exit_on_chief_done=false";
    struct pc c;
    pc_init(&c, 1, 1, flags);
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/afile", pc_dir("w0"));
    FILE *f = fopen(p, "w");
    FL_REQUIRE(f != NULL);
    fputs("x\n", f);
    fclose(f);
    pc_start(&c, "ps", 0, "ps0", NULL);
    pc_start(&c, "worker", 0, "w0", "--train_dir=./afile");
    int r = pc_wait(c.w[0], 25);
    char *log = pc_read("w0.log");
    FL_ASSERT_EQ(r, 1);
    FL_ASSERT_CONTAINS(log, "FailedPreconditionError: ./afile exists and is not a directory");
    FL_ASSERT_MSG(strstr(log, "ignoring unreadable") == NULL, "read as a state file:\n%s", log);
    free(log);
    pc_start(&c, "worker", 0, "w0", "--export_dir=./afile");
    r = pc_wait(c.w[0], 25);
    log = pc_read("w0.log");
    FL_ASSERT_EQ(r, 1);
    FL_ASSERT_CONTAINS(log, "FailedPreconditionError: creating export directory ./afile: it "
                            "exists and is not a directory");
    free(log);
    pc_kill_all(&c);
}

FL_TEST_ROOT_T(psrt_ckpt, full_disk_fails_save_with_one_line_and_keeps_last_checkpoint, 40)
{
    /* a real full disk: a small tmpfs as the chief's disk, in a private mount
     * namespace of this test (gone with it) */
    if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        FL_SKIP("needs a private mount namespace (root): %s", strerror(errno));
    const char *w0 = pc_dir("w0");
    if (mount("tmpfs", w0, "tmpfs", 0, "size=200k") < 0)
        FL_SKIP("cannot mount a tmpfs: %s", strerror(errno));
    struct pc c;
    pc_init(&c, 1, 1,
            "--model=softmax --checkpoint_protocol=robust --save_checkpoint_steps=20 "
            "--max_steps=1000 --connect_timeout_secs=10");
    pc_start_all(&c, NULL, NULL);
    int r = pc_wait_all(&c, 25);
    char *log = pc_read("w0.log");
    FL_ASSERT_EQ(r, 1);
    FL_ASSERT_CONTAINS(log, "ResourceExhaustedError: ");
    FL_ASSERT_CONTAINS(log, "No space left on device ("); /* the call */
    FL_ASSERT_CONTAINS(log, "; free space on that disk"); /* what to do */
    FL_ASSERT_CONTAINS(log, "Saved checkpoint for step 0");
    /* what was reported saved is intact: the state file names a checkpoint
     * that verifies, and no temporary file is left under a final name */
    char dir[PATH_MAX], prefix[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/train_logs", w0);
    struct ckpt_state st;
    struct ckpt_err ce;
    FL_REQUIRE_EQ(ckpt_state_read(dir, &st, &ce), 0);
    snprintf(prefix, sizeof prefix, "%s/%s", dir, st.model_checkpoint_path);
    FL_ASSERT_CONTAINS(log, st.model_checkpoint_path);
    struct ckpt_reader *rd;
    FL_REQUIRE_EQ(ckpt_reader_open(&rd, prefix, &ce), 0);
    FL_ASSERT_EQ(ckpt_reader_verify(rd, &ce), 0);
    ckpt_reader_close(rd);
    ckpt_state_free(&st);
    umount2(w0, MNT_DETACH);
    free(log);
}

/* ---- events from a real run ------------------------------------------------------ */

struct collector {
    int lfd;
    pthread_mutex_t mu;
    char *text;
    size_t len;
};

static void *conn_thread(void *arg)
{
    void **a = arg;
    struct collector *col = a[0];
    int fd = (int)(intptr_t)a[1];
    free(arg);
    char buf[8192];
    size_t got = 0;
    for (;;) {
        ssize_t k = read(fd, buf + got, sizeof buf - got);
        if (k <= 0)
            break;
        got += (size_t)k;
        char *nl;
        while ((nl = memchr(buf, '\n', got))) {
            size_t l = (size_t)(nl - buf) + 1;
            unsigned long long seq;
            if (sscanf(buf, "SYNC %llu", &seq) == 1) {
                char ok[64];
                int m = snprintf(ok, sizeof ok, "OK %llu\n", seq);
                if (write(fd, ok, (size_t)m) < 0)
                    break;
            }
            pthread_mutex_lock(&col->mu);
            col->text = realloc(col->text, col->len + l + 1);
            memcpy(col->text + col->len, buf, l);
            col->len += l;
            col->text[col->len] = 0;
            pthread_mutex_unlock(&col->mu);
            memmove(buf, nl + 1, got - l);
            got -= l;
        }
    }
    close(fd);
    return NULL;
}

static void *accept_thread(void *arg)
{
    struct collector *col = arg;
    for (;;) {
        int fd = accept(col->lfd, NULL, NULL);
        if (fd < 0)
            break;
        void **a = malloc(2 * sizeof *a);
        a[0] = col;
        a[1] = (void *)(intptr_t)fd;
        pthread_t t;
        pthread_create(&t, NULL, conn_thread, a);
        pthread_detach(t);
    }
    return NULL;
}

FL_TEST_CLUSTER_T(psrt_ckpt, robust_run_reports_events_in_protocol_order, 40)
{
    struct collector col = {.mu = PTHREAD_MUTEX_INITIALIZER};
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/ev.sock", fl_test_dir());
    col.lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    FL_REQUIRE_EQ(bind(col.lfd, (struct sockaddr *)&a, sizeof a), 0);
    FL_REQUIRE_EQ(listen(col.lfd, 16), 0);
    pthread_t t;
    pthread_create(&t, NULL, accept_thread, &col);
    setenv("FAULTLINE_EVENTS", path, 1);
    setenv("FAULTLINE_SYNC", "save.shard_written,save.done", 1);
    struct pc c;
    pc_init(&c, 2, 2,
            "--model=linear --checkpoint_protocol=robust --save_checkpoint_steps=100 "
            "--max_steps=200 --connect_timeout_secs=10 --export_dir=exp");
    pc_start_all(&c, NULL, NULL);
    int r = pc_wait_all(&c, 25);
    FL_REQUIRE_EQ(r, 0);
    pthread_mutex_lock(&col.mu);
    char *ev = strdup(col.text ? col.text : "");
    pthread_mutex_unlock(&col.mu);
    FL_ASSERT_CONTAINS(ev, "HELLO host=");
    FL_ASSERT_CONTAINS(ev, "EVENT ps.ready task=1 port=");
    FL_ASSERT_CONTAINS(ev, "EVENT train.start job=worker task=0");
    FL_ASSERT_CONTAINS(ev, "EVENT save.begin step=0 prefix=./train_logs/model.ckpt-0");
    FL_ASSERT_CONTAINS(ev, " save.shard_written shard=1 step=0 path=./train_logs/ps1/model.ckpt-0");
    FL_ASSERT_CONTAINS(ev, "EVENT export.done dir=exp/1");
    /* a save is reported after every shard of it was written */
    const char *done = strstr(ev, " save.done step=200 prefix=./train_logs/model.ckpt-200");
    const char *s0 = strstr(ev, "save.shard_written shard=0 step=200");
    const char *s1 = strstr(ev, "save.shard_written shard=1 step=200");
    FL_REQUIRE(done && s0 && s1);
    FL_ASSERT(s0 < done && s1 < done);
    /* the commits begin after the save began, and before it is reported */
    const char *begin = strstr(ev, " save.begin step=200 ");
    const char *commit = strstr(ev, "EVENT save.commit.begin step=200\n");
    FL_REQUIRE(begin && commit);
    FL_ASSERT(begin < commit && commit < done);
    FL_ASSERT_CONTAINS(ev, "SYNC ");
    free(ev);
    unsetenv("FAULTLINE_EVENTS");
}

/* ---- named fault points ------------------------------------------------------ */

FL_TEST_CLUSTER_T(psrt_ckpt, fault_points_fail_the_save_where_named, 40)
{
    struct pc c;
    pc_init(&c, 2, 1,
            "--model=linear --checkpoint_protocol=robust --save_checkpoint_steps=50 "
            "--max_steps=200 --connect_timeout_secs=10");
    /* ps 1 cannot make its own copy durable (EIO) */
    struct pc_opts o = {.env = "PSRT_FIU=psrt/save/shard_sync=5"};
    pc_start(&c, "ps", 0, "ps0", NULL);
    pc_start_opts(&c, "ps", 1, "ps1", NULL, &o);
    pc_start(&c, "worker", 0, "w0", NULL);
    int r = pc_wait_all(&c, 25);
    char *log = pc_read("w0.log");
    FL_ASSERT_EQ(r, 1);
    FL_ASSERT_CONTAINS(log, "fsync ./train_logs/ps1/model.ckpt-0: Input/output error");
    /* the path is on ps 1's disk: the chief's line says so */
    char want[128];
    const char *comma = strchr(c.ps_hosts, ',');
    snprintf(want, sizeof want, "Input/output error on ps task 1 at %s", comma ? comma + 1 : "");
    FL_ASSERT_CONTAINS(log, want);
    FL_ASSERT(!pc_exists("w0/train_logs/checkpoint")); /* never reported */
    /* nor kept: no state names the chief's complete copy, nothing would
     * ever delete it */
    FL_ASSERT(!pc_exists("w0/train_logs/model.ckpt-0.index"));
    FL_ASSERT(!pc_exists("w0/train_logs/model.ckpt-0.data-00000-of-00001"));
    free(log);
    /* legacy: the merge fails on the last ps with the errno given */
    struct pc d;
    pc_init(&d, 2, 1,
            "--model=linear --checkpoint_protocol=legacy --save_checkpoint_steps=50 "
            "--max_steps=200 --connect_timeout_secs=10");
    struct pc_opts e = {.env = "PSRT_FIU=psrt/save/merge=28"};
    pc_start(&d, "ps", 0, "L", NULL);
    pc_start_opts(&d, "ps", 1, "L", NULL, &e);
    pc_start(&d, "worker", 0, "L", NULL);
    r = pc_wait_all(&d, 25);
    log = pc_read("L.log");
    FL_ASSERT_EQ(r, 1);
    FL_ASSERT_CONTAINS(log, "ResourceExhaustedError: ");
    FL_ASSERT_CONTAINS(log, "part-00000-of-00002.index; No space left on device");
    FL_ASSERT_CONTAINS(log, "MergeV2Checkpoints[_device=\"/job:ps/replica:0/task:1/cpu:0\"]");
    free(log);
}
