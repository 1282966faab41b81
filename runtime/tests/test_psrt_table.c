/*
 * test_psrt_table.c: the ps's sparse table: push, pull, growth and the SGD
 * apply; a big push equal to the same pairs in small batches; pushes and
 * pulls that wrap past the last slot.
 */
#include "harness/tests/fl_test.h"
#include "runtime/tests/test_psrt_fixture.h"

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
