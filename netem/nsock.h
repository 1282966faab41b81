/* nsock.h: sockets opened inside another process's network namespace. */
#ifndef FL_NETEM_NSOCK_H
#define FL_NETEM_NSOCK_H

#include <libmnl/libmnl.h>
#include <sys/types.h>

/* socket(domain, type | SOCK_CLOEXEC, proto) in the netns of pid: the fd,
 * or -1 with errno set. */
int fl_netem_socket_in(pid_t pid, int domain, int type, int proto);

/* mnl_socket_open2(bus, SOCK_CLOEXEC) in the netns of pid (not bound), or
 * NULL with errno set. */
struct mnl_socket *fl_netem_mnl_in(pid_t pid, int bus);

#endif
