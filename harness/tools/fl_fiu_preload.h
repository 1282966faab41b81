/*
 * fl_fiu_preload.h: what the harness (harness/faults/disk.c) and the task
 * preload (fl_fiu_preload.c) must agree on about a short-write point's
 * failinfo: a byte count, or FL_FIU_SHORT_PPM | millionths of the size asked.
 */
#ifndef FL_FIU_PRELOAD_H
#define FL_FIU_PRELOAD_H

#define FL_FIU_SHORT_PPM (1ULL << 40)

#endif
