/*
 * test_psrt_fixture.h: a ps task served inside the test's own process, and
 * a client connection to it, shared by psrt's in-process tests
 * (test_psrt_ps.c, test_psrt_rpc.c, test_psrt_stream.c, test_psrt_save_fail.c).
 */
#ifndef TEST_PSRT_FIXTURE_H
#define TEST_PSRT_FIXTURE_H

#include "harness/tests/fl_test.h"
#include "runtime/psrt/ps.h"
#include "runtime/psrt/psrt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parses a space-separated command line (after "psrt") into f. */
static inline int parse(const char *line, struct psrt_flags *f, char *err)
{
    char *copy = strdup(line), *argv[32];
    int argc = 0;
    argv[argc++] = "psrt";
    for (char *t = strtok(copy, " "); t && argc < 31; t = strtok(NULL, " "))
        argv[argc++] = t;
    int r = psrt_flags_parse(f, argc, argv, err, 256);
    free(copy);
    return r;
}

struct ps_fixture {
    struct psrt_flags f;
    struct psrt_ps *ps;
    struct psrt_conn *c;
    struct psrt_buf resp;
};

/* ps task `task` of nps (model, thread mode, max_steps, extra flags or
 * ""), serving on a free port of 127.0.0.1, with x->c connected to it. */
static inline void fixture_task(struct ps_fixture *x, const char *model, int mode,
                                long long max_steps, int task, int nps, const char *extra)
{
    memset(x, 0, sizeof *x);
    char err[256], line[640], hosts[256] = "";
    for (int p = 0; p < nps; p++) /* distinct: a ps listed twice is refused */
        snprintf(hosts + strlen(hosts), sizeof hosts - strlen(hosts), "%s127.0.0.1:%d",
                 p ? "," : "", p + 1);
    snprintf(line, sizeof line,
             "--job_name=ps --task_index=%d --ps_hosts=%s --worker_hosts=127.0.0.1:2 "
             "--model=%s --max_steps=%lld --train_dir=%s/tl%d --rpc_threads=%s %s",
             task, hosts, model, max_steps, fl_test_dir(), task,
             mode == PSRT_POOL ? "pool" : "per_request", extra);
    FL_REQUIRE_EQ(parse(line, &x->f, err), 0);
    struct psrt_err e = {0};
    FL_REQUIRE_EQ(psrt_ps_setup(&x->ps, &x->f, &e), 0);
    FL_REQUIRE_EQ(psrt_ps_serve(x->ps, 0, &e), 0);
    char name[32];
    snprintf(name, sizeof name, "ps task %d", task);
    x->c = psrt_conn_new("127.0.0.1", psrt_ps_port(x->ps), name);
    FL_REQUIRE_EQ(psrt_conn_connect(x->c, 5, &e), 0);
}

static inline void fixture(struct ps_fixture *x, const char *model, int mode, long long max_steps)
{
    fixture_task(x, model, mode, max_steps, 0, 1, "");
}

/* One call on x->c (the reply in x->resp); the peer's status. */
static inline int32_t call(struct ps_fixture *x, int op, uint32_t flags, const void *p, size_t n)
{
    struct iovec iov = {(void *)p, n};
    int32_t st = 0;
    struct psrt_err e = {0};
    int r = psrt_conn_call(x->c, op, flags, &iov, 1, 10, &x->resp, &st, &e);
    FL_REQUIRE_MSG(r == 0, "call %s: %s", psrt_op_name(op), e.msg);
    return st;
}

#endif
