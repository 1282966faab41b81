/*
 * text.h: small text helpers of the harness: bounded appends for the
 * one-line details and reasons that runs record, and LD_PRELOAD editing in a
 * task's environment under construction.
 */
#ifndef FL_TEXT_H
#define FL_TEXT_H

#include <stddef.h>

/* Writes fmt into buf (len bytes in all, cut to fit); nothing when buf is
 * NULL or len 0: an error message for a caller that may want none. */
void fl_text_set(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Appends to buf (NUL-terminated, len bytes in all); "..." once it is full. */
void fl_text_add(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Puts libs (space-separated) first in env's LD_PRELOAD (env[0..*k) being
 * built, room for one more entry at *k). */
void fl_env_preload(char **env, size_t *k, const char *libs);

#endif
