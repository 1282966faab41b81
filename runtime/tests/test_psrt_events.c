/*
 * test_psrt_events.c: psrt's event channel client against a fake harness:
 * HELLO, EVENT, and SYNC waiting for OK.
 */
#include "harness/tests/fl_test.h"
#include "runtime/tests/test_psrt_fixture.h"

#include <pthread.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

struct fake_harness {
    int lfd;
    char lines[8][256];
    int n;
};

static void *harness_thread(void *arg)
{
    struct fake_harness *h = arg;
    int fd = accept(h->lfd, NULL, NULL);
    char buf[4096];
    size_t got = 0;
    while (h->n < 3) {
        ssize_t k = read(fd, buf + got, sizeof buf - got - 1);
        if (k <= 0)
            break;
        got += (size_t)k;
        char *nl;
        while ((nl = memchr(buf, '\n', got))) {
            *nl = 0;
            snprintf(h->lines[h->n], sizeof h->lines[0], "%s", buf);
            unsigned long long seq;
            if (sscanf(buf, "SYNC %llu", &seq) == 1) {
                char ok[64];
                int m = snprintf(ok, sizeof ok, "OK %llu\n", seq);
                if (write(fd, ok, (size_t)m) < 0)
                    break;
            }
            h->n++;
            got -= (size_t)(nl + 1 - buf);
            memmove(buf, nl + 1, got);
        }
    }
    close(fd);
    return NULL;
}

FL_TEST(psrt_events, hello_event_and_sync_waits_for_ok)
{
    char path[512];
    snprintf(path, sizeof path, "%s/ev.sock", fl_test_dir());
    struct fake_harness h = {0};
    h.lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    FL_REQUIRE_EQ(bind(h.lfd, (struct sockaddr *)&a, sizeof a), 0);
    FL_REQUIRE_EQ(listen(h.lfd, 1), 0);
    pthread_t t;
    pthread_create(&t, NULL, harness_thread, &h);
    setenv("FAULTLINE_EVENTS", path, 1);
    setenv("FAULTLINE_SYNC", "save.shard_written,other", 1);
    setenv("FAULTLINE_HOST", "ps1", 1);
    psrt_ev_open("ps", 1);
    psrt_ev("save.begin", "step=5 prefix=%s", psrt_ev_q("./a b/model.ckpt-5"));
    psrt_ev("save.shard_written", "shard=1 step=5");
    pthread_join(t, NULL);
    FL_ASSERT_EQ(h.n, 3);
    char want[128];
    snprintf(want, sizeof want, "HELLO host=ps1 job=ps task=1 pid=%d", (int)getpid());
    FL_ASSERT_STREQ(h.lines[0], want);
    FL_ASSERT_STREQ(h.lines[1], "EVENT save.begin step=5 prefix=\"./a b/model.ckpt-5\"");
    FL_ASSERT_STREQ(h.lines[2], "SYNC 2 save.shard_written shard=1 step=5");
    /* the harness is gone: events are dropped, the process carries on */
    psrt_ev("save.done", "step=5");
    psrt_ev("save.done", "step=6");
    psrt_ev_close();
    close(h.lfd);
}
