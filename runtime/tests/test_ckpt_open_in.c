/*
 * test_ckpt_open_in.c: ckpt_reader_open_in and ckpt_state_read_in resolve
 * every file (state file, index, data file) inside the directory given as
 * root only: a symlink in it that leads out (absolute, or up with "..")
 * reads nothing outside, while paths and symlinks that stay inside work
 * (an absolute one is taken as if the root were "/").  The harness reads a
 * host's checkpoints so (harness/engine/check_ckpt.c).
 */
#include <errno.h>
#include <fcntl.h>

#include "runtime/ckpt/state.h"
#include "runtime/tests/test_ckpt_util.h"

FL_TEST(ckpt_open_in, symlinks_out_of_the_root_read_nothing)
{
    struct ckpt_reader *r;
    struct ckpt_state st;
    struct ckpt_err e;
    /* "outside": a valid bundle and state file the root must not reach */
    FL_REQUIRE_EQ(mkdir(tpath("outside"), 0755), 0);
    FL_REQUIRE_EQ(write_hpt(tpath("outside/model.ckpt-5"), 0), 0);
    const char *state = "model_checkpoint_path: \"model.ckpt-5\"\n";
    FL_REQUIRE_EQ(spit(tpath("outside/checkpoint"), state, strlen(state)), 0);
    /* the root, with a bundle of its own and links out and in */
    FL_REQUIRE_EQ(mkdir(tpath("root"), 0755), 0);
    FL_REQUIRE_EQ(mkdir(tpath("root/in"), 0755), 0);
    FL_REQUIRE_EQ(write_hpt(tpath("root/in/model.ckpt-7"), 0), 0);
    FL_REQUIRE_EQ(symlink(tpath("outside"), tpath("root/abs")), 0);
    FL_REQUIRE_EQ(symlink("../outside", tpath("root/up")), 0);
    FL_REQUIRE_EQ(symlink("../../../../../../../../../../../../..", tpath("root/top")), 0);
    FL_REQUIRE_EQ(symlink("/in", tpath("root/inlink")), 0);
    int root = open(tpath("root"), O_PATH | O_DIRECTORY | O_CLOEXEC);
    FL_REQUIRE(root >= 0);

    /* by plain path, the links do lead out (what a check must not do) */
    FL_REQUIRE_EQ(ckpt_reader_open(&r, tpath("root/up/model.ckpt-5"), &e), 0);
    ckpt_reader_close(r);

    /* inside the root they do not */
    FL_ASSERT_EQ(ckpt_reader_open_in(&r, root, "abs/model.ckpt-5", &e), -ENOENT);
    FL_ASSERT_EQ(ckpt_reader_open_in(&r, root, "up/model.ckpt-5", &e), -ENOENT);
    char far[4096];
    snprintf(far, sizeof far, "top%s/model.ckpt-5", tpath("outside"));
    FL_ASSERT_EQ(ckpt_reader_open_in(&r, root, far, &e), -ENOENT);
    FL_ASSERT_EQ(ckpt_reader_open_in(&r, root, "../outside/model.ckpt-5", &e), -ENOENT);
    FL_ASSERT_EQ(ckpt_state_read_in(root, "abs", &st, &e), -ENOENT);
    FL_ASSERT_EQ(ckpt_state_read_in(root, "up/checkpoint", &st, &e), -ENOENT);

    /* what is inside reads, through an absolute in-root link too, data
     * file included */
    const char *ok[] = {"in/model.ckpt-7", "/in/model.ckpt-7", "inlink/model.ckpt-7"};
    for (size_t i = 0; i < 3; i++) {
        FL_REQUIRE_EQ(ckpt_reader_open_in(&r, root, ok[i], &e), 0);
        FL_ASSERT_EQ(ckpt_reader_count(r), 3);
        FL_ASSERT_EQ(ckpt_reader_verify(r, &e), 0);
        ckpt_reader_close(r);
    }
    FL_REQUIRE_EQ(spit(tpath("root/in/checkpoint"), state, strlen(state)), 0);
    FL_REQUIRE_EQ(ckpt_state_read_in(root, "inlink", &st, &e), 0);
    FL_ASSERT_STREQ(st.model_checkpoint_path, "model.ckpt-5");
    ckpt_state_free(&st);
    close(root);
}
