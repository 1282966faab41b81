/*
 * userns.h: the user namespace a host's tasks run in (see userns.c).
 */
#ifndef FL_USERNS_H
#define FL_USERNS_H

#include <stddef.h>

/* A new user namespace, child of the caller's, whose user and group ids map
 * one to one to the caller's (0 is 0, 1000 is 1000): an fd of it
 * (O_CLOEXEC) into *fd, for setns(fd, CLONE_NEWUSER).  0 or -errno with err
 * filled. */
int fl_userns_make(int *fd, char *err, size_t errlen);

#endif
