/* seterr.h: the error-buffer writer every netem module reports through. */
#ifndef FL_NETEM_SETERR_H
#define FL_NETEM_SETERR_H

#include <stddef.h>

/* vsnprintf into err (errlen bytes); nothing when err is NULL or errlen 0. */
void fl_netem_seterr(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
