/*
 * common.c: what several faultline commands share, so that no command file
 * calls another or main.c: where the faultline binary is ({bin}), a whole
 * number option, and the --out directory checked before anything runs.
 */
#include "harness/cli/common.h"
#include "harness/sys/rundir.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* Directory of this binary ({bin} in templates). */
void fl_cli_bin_dir(char *buf, size_t len)
{
    ssize_t n = readlink("/proc/self/exe", buf, len - 1);
    if (n <= 0) {
        snprintf(buf, len, ".");
        return;
    }
    buf[n] = 0;
    char *s = strrchr(buf, '/');
    if (s)
        *s = 0;
}

/* A decimal number 0..2^64-1, as a scenario's seed: no sign (strtoull would
 * take "-1" as 2^64-1), no base prefix ("010" is ten, not eight). */
int fl_cli_parse_u64(const char *prog, const char *opt, const char *s, uint64_t *v)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno || !(*s >= '0' && *s <= '9') || *end) {
        fprintf(stderr, "%s: %s wants a whole number 0..18446744073709551615, not '%s'\n",
                prog, opt, s);
        return -1;
    }
    *v = x;
    return 0;
}

/* OUT/runs, where run directories go, made and checked before anything
 * runs: an unusable --out is one usage error, not an error per run (each
 * recorded, with a "logs of" line naming a directory that cannot exist). */
int fl_cli_prepare_out(const char *out)
{
    char runs[PATH_MAX], abs[PATH_MAX];
    struct stat st;
    out = out ? out : "out";
    snprintf(runs, sizeof runs, "%s/runs", out);
    bool had_out = stat(out, &st) == 0, had_runs = stat(runs, &st) == 0;
    int rc = fl_mkdir_p(runs, 0755);
    if (rc == 0) {
        if (stat(runs, &st) < 0)
            rc = -errno;
        else if (!S_ISDIR(st.st_mode))
            rc = -ENOTDIR;
        else if (access(runs, W_OK | X_OK) < 0)
            rc = -errno;
    }
    if (rc < 0) {
        fprintf(stderr, "faultline: cannot keep run directories in %s: %s (--out DIR picks "
                "another place)\n", runs, strerror(-rc));
        return -1;
    }
    /* Each run's event socket is <real path of OUT>/runs/<run id>/ev.sock,
     * and a unix socket path has at most sizeof sun_path - 1 bytes. */
    const char *real = realpath(runs, abs) ? abs : runs;
    size_t need = strlen(real) + strlen("/YYYYMMDD-HHMMSS-xxxxxx/ev.sock");
    size_t most = sizeof ((struct sockaddr_un *)0)->sun_path - 1;
    if (need > most) {
        fprintf(stderr, "faultline: %s is too long a path for run directories: their event "
                "sockets would have %zu bytes, a unix socket at most %zu (--out DIR picks a "
                "shorter one)\n", real, need, most);
        if (!had_runs)
            rmdir(runs);
        if (!had_out)
            rmdir(out);
        return -1;
    }
    return 0;
}
