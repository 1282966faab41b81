/*
 * test_psrt_table.c: the ps's sparse table: push, pull, growth and the SGD
 * apply; a big push equal to the same pairs in small batches; pushes and
 * pulls that wrap past the last slot; growth that moves the old array a
 * few slots per insert (every key found with its value while both arrays
 * are in use, and after many growths), and a big push into a table that is
 * still moving.
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
            wrapped += ~t.e[s].key == edge[j]; /* entries hold ~key */
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

/* The value the growth tests expect for key i after `upd` updates. */
static float grow_val(uint64_t i, int upd)
{
    return (float)(i % 1000) + 0.5f * (float)upd;
}

/* What the growth test saw of the table's moves. */
struct moves {
    uint64_t growths, biggest_step, moving_ops, bad_starts;
};

/* psrt_table_insert, noting whether it started a growth (which must leave
 * the old array to move later, not move it all) and how many old slots it
 * moved otherwise. */
static float *insert_noting(struct psrt_table *t, uint64_t key, struct moves *m)
{
    int bits = t->bits;
    uint64_t omig = t->omig;
    bool was_moving = t->old != NULL;
    float *v = psrt_table_insert(t, key, NULL);
    if (t->bits != bits) {
        m->growths++;
        m->bad_starts += !t->old || t->omig > PSRT_TABLE_MOVE_STEP;
    } else if (was_moving) {
        uint64_t moved = t->old ? t->omig - omig : ((uint64_t)1 << t->obits) - omig;
        m->biggest_step = moved > m->biggest_step ? moved : m->biggest_step;
    }
    m->moving_ops += t->old != NULL;
    return v;
}

/* Inserts N keys one at a time into a table that starts at 1024 slots (it
 * grows 10 times), updating earlier keys and reading others between
 * inserts: every insert moves at most PSRT_TABLE_MOVE_STEP old slots (no
 * step rehashes the table), and every read, during a move or not, finds
 * what was written. */
FL_TEST(psrt_table, grow_moves_a_few_slots_per_insert_and_keeps_every_key)
{
    enum { N = 1000000 };
    struct psrt_table t;
    FL_REQUIRE_EQ(psrt_table_init(&t, 1, 0, NULL, 16), 0);
    const int bits0 = t.bits;
    uint64_t *k = malloc(N * 8);
    int *upd = calloc(N, sizeof *upd);
    FL_REQUIRE(k && upd);
    for (uint64_t i = 0; i < N; i++)
        k[i] = psrt_mix64(i + 0x77) | (i == 5000 ? UINT64_MAX : 0); /* and the EMPTY key */
    struct moves m = {0};
    uint64_t bad = 0;
    bool exported_mid_move = false;
    for (uint64_t i = 0; i < N; i++) {
        float *v = insert_noting(&t, k[i], &m);
        FL_REQUIRE(v != NULL);
        *v = grow_val(i, 0);
        /* an earlier key updated, another read back, a new one absent */
        uint64_t j = psrt_mix64(i) % (i + 1), r = psrt_mix64(i + N) % (i + 1);
        float *u = insert_noting(&t, k[j], &m);
        FL_REQUIRE(u != NULL);
        *u += 0.5f;
        upd[j]++;
        const float *got = psrt_table_lookup(&t, k[r]);
        bad += !got || *got != grow_val(r, upd[r]);
        bad += psrt_table_find(&t, psrt_mix64(i + 3 * (uint64_t)N)) != -1;
        if (t.old && !exported_mid_move && i > N / 2) {
            /* export while keys sit in both arrays: each exactly once */
            uint64_t *ek, n;
            float *ev, *es[2];
            FL_REQUIRE_EQ(psrt_table_export(&t, &ek, &ev, es, &n), 0);
            FL_ASSERT_EQ(n, i + 1);
            for (uint64_t x = 1; x < n; x++)
                bad += ek[x] <= ek[x - 1];
            free(ek);
            free(ev);
            exported_mid_move = true;
        }
    }
    FL_ASSERT_EQ(bad, 0);
    FL_ASSERT_EQ(t.nrows, N);
    FL_ASSERT(t.bits >= bits0 + 10);
    FL_ASSERT_EQ(m.growths, (uint64_t)(t.bits - bits0));
    FL_ASSERT_EQ(m.bad_starts, 0);
    FL_ASSERT(m.moving_ops > N / 10); /* reads and updates ran during moves */
    FL_ASSERT(exported_mid_move);
    FL_ASSERT_LE(m.biggest_step, PSRT_TABLE_MOVE_STEP);
    /* every key with its value: one at a time, batched (both arrays when
     * still moving), and after a move is finished by updates alone */
    for (int pass = 0; pass < 2; pass++) {
        float *out = malloc(N * 4);
        FL_REQUIRE(out != NULL);
        psrt_table_pull(&t, k, N, out);
        uint64_t wrong = 0;
        for (uint64_t i = 0; i < N; i++) {
            const float *v = psrt_table_lookup(&t, k[i]);
            wrong += !v || *v != grow_val(i, upd[i]) || out[i] != grow_val(i, upd[i]);
        }
        FL_ASSERT_EQ(wrong, 0);
        free(out);
        for (uint64_t i = 0; t.old && i < N; i++) { /* updates move the rest */
            *psrt_table_insert(&t, k[i], NULL) += 0.5f;
            upd[i]++;
        }
        FL_ASSERT(t.old == NULL);
        FL_ASSERT_EQ(t.nrows, N);
    }
    psrt_table_free(&t);
    free(k);
    free(upd);
}

/* A big (bucketed) SGD push into a table whose old array has not moved
 * yet gives what the same pairs in small batches give, and moves it all;
 * so does a batched pull of a moving table; and rows wider than one, with
 * optimizer slots, keep values and slots across a move. */
FL_TEST(psrt_table, big_push_into_a_moving_table_matches_small_batches)
{
    enum { N = 300000 };
    struct psrt_optim o;
    psrt_optim_default(&o, PSRT_OPT_SGD, 0.25f);
    struct psrt_table ref, t;
    FL_REQUIRE_EQ(psrt_table_init(&ref, 1, 0, NULL, 16), 0);
    FL_REQUIRE_EQ(psrt_table_init(&t, 1, 0, NULL, 16), 0);
    uint64_t *k = malloc(N * 8);
    float *g = malloc(N * 4), *want = malloc(N * 4), *got = malloc(N * 4);
    FL_REQUIRE(k && g && want && got);
    for (int i = 0; i < N; i++) {
        k[i] = psrt_mix64((uint64_t)i + 31337);
        g[i] = (float)(i % 23) * 0.25f - 2.0f;
    }
    /* small pushes until the table moves into 2^19 slots (growth at
     * 3/4 of 2^18), a little way into the move */
    size_t n = 0;
    while (n < N && !(t.old && t.bits >= 19 && t.omig > 1000)) {
        FL_REQUIRE_EQ(psrt_table_push(&t, &o, k + n, g + n, 100, NULL), 0);
        FL_REQUIRE_EQ(psrt_table_push(&ref, &o, k + n, g + n, 100, NULL), 0);
        n += 100;
    }
    FL_REQUIRE(t.old != NULL);
    FL_REQUIRE(t.omig < ((uint64_t)1 << t.obits) / 2);
    /* a batched pull while moving */
    psrt_table_pull(&t, k, N, got);
    psrt_table_pull(&ref, k, N, want);
    FL_ASSERT_EQ(memcmp(got, want, N * 4), 0);
    /* one big push: every key so far again (most not moved yet) and new ones */
    const int bits = t.bits;
    push_small(&ref, &o, k, g, N);
    FL_REQUIRE_EQ(psrt_table_push(&t, &o, k, g, N, NULL), 0);
    FL_ASSERT(t.old == NULL);
    FL_ASSERT_EQ(t.bits, bits); /* bucketed in place, no further growth */
    FL_ASSERT_EQ(t.nrows, ref.nrows);
    psrt_table_pull(&t, k, N, got);
    psrt_table_pull(&ref, k, N, want);
    int bad = 0;
    for (int i = 0; i < N; i++)
        bad += memcmp(&got[i], &want[i], 4) != 0 || psrt_table_find(&t, k[i]) < 0;
    FL_ASSERT_EQ(bad, 0);
    psrt_table_free(&ref);
    psrt_table_free(&t);

    /* width 3 with Adagrad's slot: values and slots by row, across moves */
    struct psrt_optim ada;
    psrt_optim_default(&ada, PSRT_OPT_ADAGRAD, 0.1f);
    float si[2] = {psrt_optim_slot_init(&ada, 0), 0};
    FL_REQUIRE_EQ(psrt_table_init(&t, 3, 1, si, 16), 0);
    FL_REQUIRE_EQ(psrt_table_init(&ref, 3, 1, si, N), 0); /* never grows */
    float *g3 = malloc(N * 3 * 4);
    FL_REQUIRE(g3 != NULL);
    for (int i = 0; i < N * 3; i++)
        g3[i] = (float)(i % 11) * 0.1f + 0.05f;
    for (int round = 0; round < 2; round++)
        for (size_t i = 0; i < N; i += 500) {
            FL_REQUIRE_EQ(psrt_table_push(&t, &ada, k + i, g3 + i * 3, 500, NULL), 0);
            FL_REQUIRE_EQ(psrt_table_push(&ref, &ada, k + i, g3 + i * 3, 500, NULL), 0);
        }
    FL_ASSERT(t.bits > 10);
    uint64_t *ka, *kb, na, nb;
    float *va, *vb, *sa[2], *sb[2];
    FL_REQUIRE_EQ(psrt_table_export(&t, &ka, &va, sa, &na), 0);
    FL_REQUIRE_EQ(psrt_table_export(&ref, &kb, &vb, sb, &nb), 0);
    FL_REQUIRE_EQ(na, nb);
    FL_ASSERT_EQ(na, N);
    FL_ASSERT_EQ(memcmp(ka, kb, na * 8), 0);
    FL_ASSERT_EQ(memcmp(va, vb, na * 3 * 4), 0);
    FL_ASSERT_EQ(memcmp(sa[0], sb[0], na * 3 * 4), 0);
    free(ka);
    free(kb);
    free(va);
    free(vb);
    free(sa[0]);
    free(sb[0]);
    psrt_table_free(&ref);
    psrt_table_free(&t);
    free(g3);
    free(k);
    free(g);
    free(want);
    free(got);
}
