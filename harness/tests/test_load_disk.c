/*
 * test_load_disk.c: how a disk: fault's mapping loads (harness/faults/disk.c, disk_parse):
 * call or point, errno, probability, delay and short writes, and the errors
 * for what does not fit.
 */
#include "harness/faults/kind.h"
#include "harness/load/load.h"
#include "harness/scenario/scenario.h"
#include "harness/tests/fl_test.h"

#include <errno.h>

#define BASE                  \
    "name: t\n"               \
    "hosts: [ps0, ps1, w0]\n" \
    "cluster:\n"              \
    "  ps: [ps0, ps1]\n"      \
    "  worker: [w0]\n"        \
    "run:\n"                  \
    "  command: \"sleep 1\"\n"

static struct fl_scenario *load(const char *text)
{
    char err[1024] = "";
    struct fl_scenario *s = NULL;
    int rc = fl_scenario_load_mem("s.yaml", text, strlen(text), &s, err, sizeof err);
    FL_REQUIRE_MSG(rc == 0 && s, "load failed: %s", err);
    return s;
}

FL_TEST(load_disk, load_call_point_errno_probability)
{
    struct fl_scenario *s = load(
        BASE
        "faults:\n"
        "  - {at: 1s, disk: {host: ps1, call: write, errno: ENOSPC, probability: 50%}, for: 2s}\n"
        "  - {at: 1s, disk: {host: \"ps:0\", point: psrt/save/shard_write}}\n"
        "  - {at: 1s, disk: {host: chief, call: posix/io/sync/fsync, errno: 5, probability: "
        "0.25}}\n");
    FL_REQUIRE_EQ(s->n_faults, 3);
    const struct fl_scn_action *a = &s->faults[0].action;
    FL_ASSERT_EQ(a->kind, FL_SCN_ACT_DISK);
    FL_ASSERT_EQ(a->target.kind, FL_SCN_TGT_HOST);
    FL_ASSERT_EQ(a->host, 1);
    FL_ASSERT_STREQ(a->disk.call, "write");
    FL_ASSERT_STREQ(a->disk.point, "posix/io/rw/write");
    FL_ASSERT_EQ(a->disk.err, ENOSPC);
    FL_ASSERT(a->disk.probability > 0.499 && a->disk.probability < 0.501);
    FL_ASSERT_EQ(s->faults[0].for_ms, 2000);
    a = &s->faults[1].action;
    FL_ASSERT_EQ(a->target.kind, FL_SCN_TGT_TASK);
    FL_ASSERT_STREQ(a->disk.call, "");
    FL_ASSERT_STREQ(a->disk.point, "psrt/save/shard_write");
    FL_ASSERT_EQ(a->disk.err, EIO); /* the default */
    FL_ASSERT(a->disk.probability == 1);
    a = &s->faults[2].action;
    FL_ASSERT_EQ(a->target.task, s->chief_task);
    FL_ASSERT_STREQ(a->disk.call, "fsync"); /* a point name is taken as its call */
    FL_ASSERT_EQ(a->disk.err, 5);
    FL_ASSERT(a->disk.probability > 0.249 && a->disk.probability < 0.251);
    FL_ASSERT_STREQ(fl_scn_action_kind_name(a->kind), "disk");
    FL_ASSERT_STREQ(fl_scn_errno_name(ENOSPC), "ENOSPC");
    fl_scenario_free(s);
}

FL_TEST(load_disk, load_delay_and_short)
{
    struct fl_scenario *s = load(
        BASE
        "faults:\n"
        "  - {at: 1s, disk: {host: ps1, call: fsync, delay: 50ms, probability: 10%}, for: 2s}\n"
        "  - {at: 1s, disk: {host: ps0, call: write, short: 1K}}\n"
        "  - {at: 1s, disk: {host: w0, call: pwrite, short: 12.5%}}\n");
    FL_REQUIRE_EQ(s->n_faults, 3);
    const struct fl_scn_disk *d = &s->faults[0].action.disk;
    FL_ASSERT_STREQ(d->call, "fsync");
    FL_ASSERT_STREQ(d->point, "faultline/delay/fsync");
    FL_ASSERT_EQ(d->delay_us, 50000);
    FL_ASSERT_EQ(d->err, 0);
    FL_ASSERT(d->probability > 0.099 && d->probability < 0.101);
    d = &s->faults[1].action.disk;
    FL_ASSERT_STREQ(d->point, "faultline/short/write");
    FL_ASSERT_EQ(d->short_bytes, 1024);
    FL_ASSERT_EQ(d->short_ppm, 0);
    FL_ASSERT_EQ(d->delay_us, 0);
    d = &s->faults[2].action.disk;
    FL_ASSERT_STREQ(d->point, "faultline/short/pwrite");
    FL_ASSERT_EQ(d->short_ppm, 125000);
    FL_ASSERT_EQ(d->short_bytes, 0);
    fl_scenario_free(s);
}
