/*
 * text.c: bounded appends for details and reasons (fl_text_add), and adding
 * libraries to LD_PRELOAD in a task's environment under construction, for
 * the harness's own preloads (libfiu for disk faults, libfaketime for clock
 * offsets, the sync recorder for crash consistency): the harness's libraries
 * come first, then whatever LD_PRELOAD the task would have had (inherited or
 * from run.env), so that a scenario's own preload still loads.
 */
#include "harness/base/text.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fl_text_set(char *buf, size_t len, const char *fmt, ...)
{
    if (!buf || !len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, len, fmt, ap);
    va_end(ap);
}

void fl_text_add(char *buf, size_t len, const char *fmt, ...)
{
    size_t n = strlen(buf);
    if (n + 4 >= len)
        return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + n, len - n, fmt, ap);
    va_end(ap);
    if (w < 0 || (size_t)w >= len - n)
        snprintf(buf + len - 4, 4, "...");
}

void fl_env_preload(char **env, size_t *k, const char *libs)
{
    for (size_t i = 0; i < *k; i++) {
        if (strncmp(env[i], "LD_PRELOAD=", 11) != 0)
            continue;
        char *n;
        const char *old = env[i] + 11;
        if (asprintf(&n, "LD_PRELOAD=%s%s%s", libs, *old ? " " : "", old) < 0)
            abort();
        free(env[i]);
        env[i] = n;
        return;
    }
    if (asprintf(&env[(*k)++], "LD_PRELOAD=%s", libs) < 0)
        abort();
}
