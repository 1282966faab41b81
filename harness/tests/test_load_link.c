/*
 * test_load_link.c: what the loader makes of a link: fault's value
 * (harness/faults/link.c, link_parse): its scope, loss in hundredths of a percent (random
 * or bursty), rate in bit/s, down, flap, and the userspace emulator's keys
 * (delay, jitter, duplicate, reorder, corrupt).
 */
#include "harness/faults/kind.h"
#include "harness/load/load.h"
#include "harness/tests/fl_test.h"
#include "harness/scenario/scenario.h"

#include <stdio.h>

#define HEAD "name: t\nhosts: [a, b, c]\ncluster: {x: [a, b, c]}\nrun: {command: 'true'}\nfaults:\n"

static struct fl_scenario *load(const char *faults)
{
    char text[2048], err[512] = "";
    struct fl_scenario *s = NULL;
    snprintf(text, sizeof text, HEAD "%s", faults);
    int rc = fl_scenario_load_mem("s.yaml", text, strlen(text), &s, err, sizeof err);
    FL_REQUIRE_MSG(rc == 0, "load: %s", err);
    return s;
}

FL_TEST(load_link, load_scopes_loss_and_rate)
{
    struct fl_scenario *s =
        load("  - {at: 1s, link: {hosts: [a, b, c], loss: 30%}, for: 2s}\n"
             "  - {at: 1s, link: {from: [a], to: [b, c], loss: 0.5%, rate: 10mbit}}\n"
             "  - {at: 1s, link: {from: c, to: a, rate: 1.5mbps}}\n"
             "  - {at: 1s, link: {host: 'x:1', loss: 100%}}\n"
             "  - {at: 1s, link: {hosts: [a, b], rate: 500Kbit}}\n");
    FL_REQUIRE_EQ(s->n_faults, 5);
    const struct fl_scn_action *a = &s->faults[0].action;
    FL_ASSERT_EQ(a->kind, FL_SCN_ACT_LINK);
    FL_ASSERT_STREQ(fl_scn_action_kind_name(a->kind), "link");
    FL_ASSERT_EQ(a->link.scope, FL_SCN_LINK_BETWEEN);
    FL_ASSERT_EQ(a->from.n, 3);
    FL_ASSERT_EQ(a->link.loss_bp, 3000);
    FL_ASSERT_EQ(a->link.rate_bit, 0);
    FL_ASSERT_EQ(s->faults[0].for_ms, 2000);
    a = &s->faults[1].action;
    FL_ASSERT_EQ(a->link.scope, FL_SCN_LINK_ONEWAY);
    FL_ASSERT_EQ(a->from.n, 1);
    FL_ASSERT_EQ(a->to.n, 2);
    FL_ASSERT_EQ(a->link.loss_bp, 50);
    FL_ASSERT_EQ(a->link.rate_bit, 10000000);
    FL_ASSERT_EQ(s->faults[2].action.link.rate_bit, 12000000);
    a = &s->faults[3].action;
    FL_ASSERT_EQ(a->link.scope, FL_SCN_LINK_HOST);
    FL_ASSERT_EQ(a->host, 1); /* x:1 runs on b */
    FL_ASSERT_EQ(a->link.loss_bp, 10000);
    FL_ASSERT_EQ(s->faults[4].action.link.rate_bit, 500000);
    fl_scenario_free(s);
}

FL_TEST(load_link, load_down_and_flap)
{
    struct fl_scenario *s = load("  - {at: 1s, link: {host: a, down: true}, for: 1s}\n"
                                 "  - {at: 1s, link: {host: chief, flap: {period: 200ms}}}\n");
    FL_ASSERT(s->faults[0].action.link.down);
    FL_ASSERT_EQ(s->faults[0].action.link.flap_ms, 0);
    FL_ASSERT_EQ(s->faults[1].action.link.scope, FL_SCN_LINK_HOST);
    FL_ASSERT_EQ(s->faults[1].action.link.flap_ms, 200);
    FL_ASSERT(!s->faults[1].action.link.down);
    fl_scenario_free(s);
}

FL_TEST(load_link, load_emulator_keys)
{
    struct fl_scenario *s =
        load("  - {at: 1s, link: {from: a, to: b, delay: 20ms, jitter: 5ms, loss: 1%}}\n"
             "  - {at: 1s, link: {hosts: [a, b], delay: 10ms, reorder: 25%, duplicate: 0.5%, "
             "corrupt: 1%}}\n"
             "  - {at: 1s, link: {host: c, loss: {p: 5%, burst: 3}}, for: 1s}\n"
             "  - {at: 1s, link: {from: a, to: c, delay: 0ms, rate: 10mbit}}\n");
    FL_REQUIRE_EQ(s->n_faults, 4);
    const struct fl_scn_link *lk = &s->faults[0].action.link;
    FL_ASSERT(lk->emu);
    FL_ASSERT_EQ(lk->delay_ms, 20);
    FL_ASSERT_EQ(lk->jitter_ms, 5);
    FL_ASSERT_EQ(lk->loss_bp, 100);
    FL_ASSERT_EQ(lk->burst, 0); /* plain loss: nft, not the emulator */
    lk = &s->faults[1].action.link;
    FL_ASSERT_EQ(lk->scope, FL_SCN_LINK_BETWEEN);
    FL_ASSERT_EQ(lk->reorder_bp, 2500);
    FL_ASSERT_EQ(lk->duplicate_bp, 50);
    FL_ASSERT_EQ(lk->corrupt_bp, 100);
    lk = &s->faults[2].action.link;
    FL_ASSERT(lk->emu);
    FL_ASSERT_EQ(lk->scope, FL_SCN_LINK_HOST);
    FL_ASSERT_EQ(lk->loss_bp, 500);
    FL_ASSERT_EQ(lk->burst, 3);
    lk = &s->faults[3].action.link;
    FL_ASSERT(lk->emu);
    FL_ASSERT_EQ(lk->delay_ms, 0);
    FL_ASSERT_EQ(lk->rate_bit, 10000000);
    fl_scenario_free(s);
}
