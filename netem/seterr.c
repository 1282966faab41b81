/*
 * seterr.c: one writer for the caller's error buffer (char *err, size_t
 * errlen), the convention of every netem function that can fail: the fabric,
 * link faults, the NFQUEUE rules and the link emulator all report through it.
 */
#include "netem/seterr.h"

#include <stdarg.h>
#include <stdio.h>

void fl_netem_seterr(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}
