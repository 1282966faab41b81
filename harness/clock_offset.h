/*
 * clock_offset.h: a host's clock_offset through libfaketime (clock_offset.c).
 */
#ifndef FL_CLOCK_OFFSET_H
#define FL_CLOCK_OFFSET_H

#include <stddef.h>
#include <stdint.h>

/* Path of libfaketime.so.1 on this machine, or NULL. */
const char *fl_clock_faketime_lib(void);
/* FAKETIME's value for an offset in ms: "+3600.000", "-0.250". */
void fl_clock_faketime_value(int64_t ms, char *buf, size_t len);

#endif
