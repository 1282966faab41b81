/*
 * test_psrt_model.c: psrt's model layout: variables placed round robin like
 * replica_device_setter, shards sorted by device name like TensorFlow,
 * sparse rows spread evenly over the ps tasks, deterministic batches.
 */
#include "harness/tests/fl_test.h"
#include "runtime/tests/test_psrt_fixture.h"

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
