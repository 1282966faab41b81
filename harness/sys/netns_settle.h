/*
 * netns_settle.h: wait until the kernel has freed the network namespaces of
 * processes already gone (see netns_settle.c for how this is known).
 */
#ifndef FL_NETNS_SETTLE_H
#define FL_NETNS_SETTLE_H

#include <stddef.h>

struct fl_netns_settle;

/* A watcher namespace (held by a child process) and a netlink socket in it.
 * 0 or -errno with a message in err. */
int fl_netns_settle_open(struct fl_netns_settle **s, char *err, size_t errlen);

/* Returns once every network namespace whose last process died before the
 * call has been freed by the kernel; -ETIMEDOUT after timeout_s seconds. */
int fl_netns_settle_wait(struct fl_netns_settle *s, double timeout_s, char *err, size_t errlen);

/* Kills and reaps the watcher. */
void fl_netns_settle_close(struct fl_netns_settle *s);

#endif
