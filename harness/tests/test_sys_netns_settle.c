/*
 * test_sys_netns_settle.c: the bench's wait for the kernel to free dead network
 * namespaces (harness/sys/netns_settle.c), on real namespaces: it must see its
 * canaries' RTM_DELNSID after namespaces died, and leave no process behind.
 */
#include "harness/sys/netns_settle.h"
#include "harness/tests/fl_test.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

FL_TEST_ROOT_T(sys_netns_settle, returns_after_dead_namespaces_are_freed, 60)
{
    fl_test_need_root();
    char err[512] = "";
    struct fl_netns_settle *s;
    FL_ASSERT_MSG(fl_netns_settle_open(&s, err, sizeof err) == 0, "open: %s", err);
    /* 32 namespaces die at once: a batch the kernel frees asynchronously */
    pid_t kids[32];
    for (int i = 0; i < 32; i++) {
        kids[i] = fork();
        FL_ASSERT(kids[i] >= 0);
        if (kids[i] == 0)
            _exit(unshare(CLONE_NEWNET) == 0 ? 0 : 1);
    }
    for (int i = 0; i < 32; i++) {
        int st;
        FL_ASSERT_EQ(waitpid(kids[i], &st, 0), kids[i]);
        FL_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    for (int round = 0; round < 3; round++) {
        int rc = fl_netns_settle_wait(s, 30, err, sizeof err);
        FL_ASSERT_MSG(rc == 0, "wait (round %d): %s", round, err);
    }
    fl_netns_settle_close(s);
    /* watcher and canaries are all reaped */
    FL_ASSERT_EQ(waitpid(-1, NULL, WNOHANG), -1);
    FL_ASSERT_EQ(errno, ECHILD);
}
