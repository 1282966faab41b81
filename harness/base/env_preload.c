/*
 * env_preload.c: adding libraries to LD_PRELOAD in a task's environment
 * under construction (engine.c's build_env), for the harness's own preloads
 * (libfiu for disk faults, libfaketime for clock offsets): the harness's
 * libraries come first, then whatever LD_PRELOAD the task would have had
 * (inherited or from run.env), so that a scenario's own preload still loads.
 */
#include "harness/engine/engine_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void eng_env_preload(char **env, size_t *k, const char *libs)
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
