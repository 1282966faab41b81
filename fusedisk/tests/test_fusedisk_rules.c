/*
 * test_fusedisk_rules.c: a fusedisk's fault rules alone (fusedisk/rules.c):
 * op names, the path glob with "**", the first matching rule winning, draws
 * that repeat with their seed, hits counted, a removed rule gone.
 */
#include "fusedisk/rules.h"
#include "harness/tests/fl_test.h"

#include <errno.h>
#include <stdio.h>

FL_TEST(fusedisk_rules, ops_parse_by_name)
{
    unsigned m = 0;
    FL_ASSERT_EQ(fl_fd_op_parse("fsync", &m), 0);
    FL_ASSERT_EQ(m, FL_FD_FSYNC);
    FL_ASSERT_EQ(fl_fd_op_parse("statfs", &m), 0);
    FL_ASSERT_EQ(m, FL_FD_STATFS);
    FL_ASSERT_EQ(fl_fd_op_parse("all", &m), 0);
    FL_ASSERT_EQ(m, FL_FD_OP_ALL);
    FL_ASSERT_EQ(fl_fd_op_parse("fdatasync", &m), -EINVAL);
    FL_ASSERT_STREQ(fl_fd_op_name(FL_FD_RENAME), "rename");
}

FL_TEST(fusedisk_rules, globs_match_by_component)
{
    static const struct {
        const char *glob, *path;
        bool match;
    } cases[] = {
        {"a/**", "a/x", true},
        {"a/**", "a/x/y/z", true},
        {"a/**", "a", false},    /* inside a/, not a itself (as gitignore) */
        {"a/**/x", "a/x", true}, /* ** may be no component */
        {"a/**", "b/x", false},
        {"a/**", "ab/x", false},
        {"**", "anything/at/all", true},
        {"train_logs/**/*.data-*", "train_logs/model.ckpt-10.data-00000-of-00001", true},
        {"train_logs/**/*.data-*", "train_logs/ps1/model.ckpt-10.data-00000-of-00001", true},
        {"train_logs/**/*.data-*", "train_logs/ps1/model.ckpt-10.index", false},
        {"*.log", "x.log", true},
        {"*.log", "d/x.log", false}, /* '*' stays in one component */
        {"**/*.log", "d/e/x.log", true},
        {"d/?.txt", "d/a.txt", true},
        {"d/?.txt", "d/ab.txt", false},
        {"d/[ab].txt", "d/b.txt", true},
        {"/a/x", "a/x", true}, /* a leading slash is the disk's root */
        {"a/x", "a/x/y", false},
        {"a/x/y", "a/x", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        FL_ASSERT_MSG(fl_fd_glob_match(cases[i].glob, cases[i].path) == cases[i].match,
                      "'%s' on '%s': expected %s", cases[i].glob, cases[i].path,
                      cases[i].match ? "a match" : "no match");
}

FL_TEST(fusedisk_rules, first_matching_rule_applies_and_counts)
{
    struct fl_fd_rules t;
    fl_fd_rules_init(&t);
    struct fl_fd_rule slow = {
        .glob = "a/**", .ops = FL_FD_WRITE | FL_FD_FSYNC, .delay_us = 5000, .probability = 1};
    struct fl_fd_rule eio = {.glob = "**", .ops = FL_FD_FSYNC, .err = EIO, .probability = 1};
    int s = fl_fd_rules_add(&t, &slow), e = fl_fd_rules_add(&t, &eio);
    FL_REQUIRE(s > 0 && e > s);
    struct fl_fd_hit h;
    FL_ASSERT(fl_fd_rules_match(&t, FL_FD_FSYNC, "a/f", NULL, &h));
    FL_ASSERT_EQ(h.err, 0);
    FL_ASSERT_EQ(h.delay_us, 5000);
    FL_ASSERT(fl_fd_rules_match(&t, FL_FD_FSYNC, "b/f", NULL, &h));
    FL_ASSERT_EQ(h.err, EIO);
    FL_ASSERT(!fl_fd_rules_match(&t, FL_FD_READ, "a/f", NULL, &h));
    /* a rename matches on either name */
    struct fl_fd_rule ren = {.glob = "c/*", .ops = FL_FD_RENAME, .err = EXDEV, .probability = 1};
    int r = fl_fd_rules_add(&t, &ren);
    FL_ASSERT(fl_fd_rules_match(&t, FL_FD_RENAME, "d/x", "c/x", &h));
    FL_ASSERT_EQ(h.err, EXDEV);
    FL_ASSERT_EQ(fl_fd_rules_hits(&t, s), 1);
    FL_ASSERT_EQ(fl_fd_rules_hits(&t, e), 1);
    FL_ASSERT_EQ(fl_fd_rules_hits(&t, r), 1);
    FL_ASSERT_EQ(fl_fd_rules_remove(&t, s), 0);
    FL_ASSERT_EQ(fl_fd_rules_remove(&t, s), -ENOENT);
    FL_ASSERT(fl_fd_rules_match(&t, FL_FD_FSYNC, "a/f", NULL, &h));
    FL_ASSERT_EQ(h.err, EIO); /* the slow rule is gone */
    fl_fd_rules_free(&t);
}

static unsigned draws(uint64_t seed, bool *seq)
{
    struct fl_fd_rules t;
    fl_fd_rules_init(&t);
    struct fl_fd_rule half = {
        .glob = "**", .ops = FL_FD_WRITE, .err = EIO, .probability = 0.5, .seed = seed};
    fl_fd_rules_add(&t, &half);
    unsigned n = 0;
    struct fl_fd_hit h;
    for (int i = 0; i < 1000; i++)
        n += (seq[i] = fl_fd_rules_match(&t, FL_FD_WRITE, "f", NULL, &h));
    fl_fd_rules_free(&t);
    return n;
}

FL_TEST(fusedisk_rules, draws_repeat_with_their_seed)
{
    static bool a[1000], b[1000], c[1000];
    unsigned na = draws(7, a), nb = draws(7, b), nc = draws(8, c);
    FL_ASSERT_EQ(na, nb);
    FL_ASSERT(memcmp(a, b, sizeof a) == 0);
    FL_ASSERT(memcmp(a, c, sizeof a) != 0);
    FL_ASSERT_MSG(na > 400 && na < 600, "%u of 1000 draws at p=0.5", na);
    FL_ASSERT_MSG(nc > 400 && nc < 600, "%u of 1000 draws at p=0.5", nc);
}

FL_TEST(fusedisk_rules, bad_rules_are_refused)
{
    struct fl_fd_rules t;
    fl_fd_rules_init(&t);
    struct fl_fd_rule r = {.glob = "**", .ops = FL_FD_WRITE, .err = EIO, .probability = 0};
    FL_ASSERT_EQ(fl_fd_rules_add(&t, &r), -EINVAL);
    r.probability = 1;
    r.ops = 0;
    FL_ASSERT_EQ(fl_fd_rules_add(&t, &r), -EINVAL);
    r.ops = FL_FD_WRITE;
    r.glob = NULL;
    FL_ASSERT_EQ(fl_fd_rules_add(&t, &r), -EINVAL);
    fl_fd_rules_free(&t);
}

/* Where a rule hit: each (op, path) once, in the order first hit, counted;
 * a rename under the name that matched; past FL_FD_WHERE_MAX only counted. */
FL_TEST(fusedisk_rules, where_lists_each_op_and_path_then_counts_the_rest)
{
    struct fl_fd_rules t;
    fl_fd_rules_init(&t);
    struct fl_fd_rule r = {.glob = "logs/**", .ops = FL_FD_OP_ALL, .err = EIO, .probability = 1};
    int id = fl_fd_rules_add(&t, &r);
    FL_REQUIRE(id > 0);
    struct fl_fd_hit hit;
    FL_ASSERT(fl_fd_rules_match(&t, FL_FD_FSYNC, "logs/a", NULL, &hit));
    FL_ASSERT(fl_fd_rules_match(&t, FL_FD_WRITE, "logs/b", NULL, &hit));
    FL_ASSERT(fl_fd_rules_match(&t, FL_FD_FSYNC, "logs/a", NULL, &hit));
    FL_ASSERT(fl_fd_rules_match(&t, FL_FD_RENAME, "data/x", "logs/x", &hit));
    FL_ASSERT(!fl_fd_rules_match(&t, FL_FD_WRITE, "data/y", NULL, &hit));
    struct fl_fd_where w[FL_FD_WHERE_MAX];
    uint64_t more = 99;
    size_t n = fl_fd_rules_where(&t, id, w, FL_FD_WHERE_MAX, &more);
    FL_ASSERT_EQ(n, 3);
    FL_ASSERT_EQ(more, 0);
    FL_ASSERT(w[0].op == FL_FD_FSYNC && !strcmp(w[0].path, "logs/a") && w[0].count == 2);
    FL_ASSERT(w[1].op == FL_FD_WRITE && !strcmp(w[1].path, "logs/b") && w[1].count == 1);
    FL_ASSERT(w[2].op == FL_FD_RENAME && !strcmp(w[2].path, "logs/x") && w[2].count == 1);
    for (int i = 0; i < FL_FD_WHERE_MAX + 5; i++) {
        char p[32];
        snprintf(p, sizeof p, "logs/f%d", i);
        FL_ASSERT(fl_fd_rules_match(&t, FL_FD_READ, p, NULL, &hit));
    }
    n = fl_fd_rules_where(&t, id, w, FL_FD_WHERE_MAX, &more);
    FL_ASSERT_EQ(n, FL_FD_WHERE_MAX);
    FL_ASSERT_EQ(more, 3 + 5);
    FL_ASSERT_EQ(fl_fd_rules_hits(&t, id), 4 + FL_FD_WHERE_MAX + 5);
    fl_fd_rules_free(&t);
}
