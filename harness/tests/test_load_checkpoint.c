/*
 * test_load_checkpoint.c: the loader's side of `expect: checkpoint:`: one
 * mapping or a list, hosts given as names, tasks or chief, dir or prefix,
 * copies, latest_step (last_reported or a number), restores_latest; the
 * limits of the inline storage; and the errors that need no data file (the
 * others are in data/scenarios/invalid/checkpoint_*.yaml).
 */
#include "harness/load/load.h"
#include "harness/tests/fl_test.h"

#include "harness/scenario/scenario.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HEAD                      \
    "name: t\n"                   \
    "hosts: [ps0, ps1, w0, w1]\n" \
    "cluster:\n"                  \
    "  ps: [ps0, ps1]\n"          \
    "  worker: [w0, w1]\n"        \
    "run:\n"                      \
    "  command: \"sleep 1\"\n"    \
    "variants:\n"                 \
    "  protocol: [legacy, robust]\n"

static struct fl_scenario *load(const char *text, char *err, size_t len, int *rc)
{
    struct fl_scenario *s = NULL;
    *rc = fl_scenario_load_mem("s.yaml", text, strlen(text), &s, err, len);
    return s;
}

FL_TEST(load_checkpoint, checkpoint_mapping_and_list_load_every_field)
{
    const char *text = HEAD "expect:\n"
                            "  robust:\n"
                            "    checkpoint:\n"
                            "      host: chief\n"
                            "      dir: train_logs\n"
                            "      verify: true\n"
                            "      restorable: yes\n"
                            "      copies:\n"
                            "        - {host: ps0, dir: train_logs/ps0}\n"
                            "        - {host: \"ps:1\", prefix: /tmp/x/model.ckpt-3}\n"
                            "      latest_step: last_reported\n"
                            "      restores_latest: true\n"
                            "  legacy:\n"
                            "    checkpoint:\n"
                            "      - {host: ps1, prefix: train_logs/model.ckpt-300, verify: true}\n"
                            "      - {host: w1, dir: logs, latest_step: 300}\n";
    char err[1024] = "";
    int rc;
    struct fl_scenario *s = load(text, err, sizeof err, &rc);
    FL_REQUIRE_MSG(rc == 0, "rc %d: %s", rc, err);
    FL_REQUIRE_EQ(s->n_expects, 2);
    const struct fl_scn_expect *r = &s->expects[0], *l = &s->expects[1];
    FL_REQUIRE_EQ(r->n_ckpts, 1);
    const struct fl_scn_ckpt_check *c = &r->ckpts[0];
    FL_ASSERT_EQ(c->host, 2); /* chief = worker 0 on w0 */
    FL_ASSERT_STREQ(c->host_text, "chief");
    FL_ASSERT_STREQ(c->dir, "train_logs");
    FL_ASSERT_STREQ(c->prefix, "");
    FL_ASSERT(c->verify);
    FL_ASSERT(c->restorable);
    FL_ASSERT(c->restores_latest);
    FL_ASSERT_EQ(c->latest_step, FL_SCN_CKPT_STEP_LAST_REPORTED);
    FL_REQUIRE_EQ(c->n_copies, 2);
    FL_ASSERT_EQ(c->copies[0].host, 0);
    FL_ASSERT_STREQ(c->copies[0].dir, "train_logs/ps0");
    FL_ASSERT_EQ(c->copies[1].host, 1);
    FL_ASSERT_STREQ(c->copies[1].prefix, "/tmp/x/model.ckpt-3");
    FL_ASSERT_STREQ(c->copies[1].dir, "");
    FL_ASSERT_EQ(c->loc.line, 13); /* the mapping starts at its first key */
    FL_REQUIRE_EQ(l->n_ckpts, 2);
    FL_ASSERT_EQ(l->ckpts[0].host, 1);
    FL_ASSERT_STREQ(l->ckpts[0].prefix, "train_logs/model.ckpt-300");
    FL_ASSERT(l->ckpts[0].verify);
    FL_ASSERT(!l->ckpts[0].restorable);
    FL_ASSERT_EQ(l->ckpts[0].latest_step, FL_SCN_CKPT_STEP_UNSET);
    FL_ASSERT_EQ(l->ckpts[1].host, 3);
    FL_ASSERT_EQ(l->ckpts[1].latest_step, FL_SCN_CKPT_STEP_NUMBER);
    FL_ASSERT_EQ(l->ckpts[1].step, 300);
    FL_ASSERT_EQ(l->ckpts[1].n_copies, 0);
    /* a checkpoint check is not a target: no per-task checks were made */
    FL_ASSERT_EQ(r->n_checks, 0);
    fl_scenario_free(s);
}

FL_TEST(load_checkpoint, checkpoint_limits_are_errors_not_truncation)
{
    char text[8192], err[1024];
    int rc, o;
    /* five checks in one block: one too many */
    o = snprintf(text, sizeof text, HEAD "expect:\n  all:\n    checkpoint:\n");
    for (int i = 0; i < 5; i++)
        o += snprintf(text + o, sizeof text - (size_t)o,
                      "      - {host: w0, dir: d%d, verify: true}\n", i);
    struct fl_scenario *s = load(text, err, sizeof err, &rc);
    FL_ASSERT_EQ(rc, -EINVAL);
    FL_ASSERT(s == NULL);
    FL_ASSERT_STREQ(err, "s.yaml:17:9: at most 4 checkpoint checks per expect block");
    /* seventeen copies */
    o = snprintf(text, sizeof text,
                 HEAD "expect:\n  all:\n    checkpoint:\n      host: w0\n      dir: d\n"
                      "      restorable: true\n      copies:\n");
    for (int i = 0; i < 17; i++)
        o += snprintf(text + o, sizeof text - (size_t)o, "        - {host: ps0, dir: c%d}\n", i);
    s = load(text, err, sizeof err, &rc);
    FL_ASSERT_EQ(rc, -EINVAL);
    FL_ASSERT_STREQ(err, "s.yaml:33:11: at most 16 copies per checkpoint check");
    /* a path that does not fit */
    char longp[400];
    memset(longp, 'a', sizeof longp - 1);
    longp[sizeof longp - 1] = 0;
    snprintf(text, sizeof text,
             HEAD "expect:\n  all:\n    checkpoint: {host: w0, dir: %s, verify: true}\n", longp);
    s = load(text, err, sizeof err, &rc);
    FL_ASSERT_EQ(rc, -EINVAL);
    FL_ASSERT_STREQ(err, "s.yaml:12:33: checkpoint 'dir' is longer than 255 characters");
}

FL_TEST(load_checkpoint, checkpoint_is_not_a_selector_and_suggested_as_target)
{
    char err[1024];
    int rc;
    struct fl_scenario *s = load(HEAD "expect:\n  checkpoint: {host: w0}\n", err, sizeof err, &rc);
    FL_ASSERT_EQ(rc, -EINVAL);
    FL_ASSERT(s == NULL);
    FL_ASSERT_STREQ(err,
                    "s.yaml:11:3: 'checkpoint' is a target, not a variant selector: write all: "
                    "{checkpoint: ...}");
    s = load(HEAD "expect:\n  all:\n    chekpoint: {host: w0}\n", err, sizeof err, &rc);
    FL_ASSERT_EQ(rc, -EINVAL);
    FL_ASSERT_STREQ(err, "s.yaml:12:5: unknown expectation target 'chekpoint' (did you mean "
                         "'checkpoint'?)");
    /* an empty checkpoint: is allowed and checks nothing */
    s = load(HEAD "expect:\n  all:\n    checkpoint:\n", err, sizeof err, &rc);
    FL_ASSERT_MSG(rc == 0, "%s", err);
    FL_ASSERT_EQ(s->expects[0].n_ckpts, 0);
    fl_scenario_free(s);
}
