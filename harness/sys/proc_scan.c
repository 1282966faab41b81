/*
 * proc_scan.c: a host's processes as /proc shows them, for the checks that
 * a preload reached them (harness/engine/reach.c): every process of a host's
 * PID namespace, a variable of its environment (FAULTLINE_JOB/_TASK say
 * which task it belongs to).  Everything is read once, as it is now: a process may
 * be gone by the next call, which then answers "no".
 */
#include "harness/sys/exe_kind.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int fl_proc_scan_ns(pid_t init, void (*fn)(void *ctx, pid_t pid), void *ctx)
{
    char p[64];
    struct stat ns;
    snprintf(p, sizeof p, "/proc/%d/ns/pid", (int)init);
    if (stat(p, &ns) < 0)
        return -errno;
    DIR *d = opendir("/proc");
    if (!d)
        return -errno;
    struct dirent *de;
    while ((de = readdir(d))) {
        int pid = atoi(de->d_name);
        if (pid <= 0 || pid == (int)init)
            continue;
        struct stat sb;
        snprintf(p, sizeof p, "/proc/%d/ns/pid", pid);
        if (stat(p, &sb) < 0 || sb.st_ino != ns.st_ino || sb.st_dev != ns.st_dev)
            continue;
        fn(ctx, pid);
    }
    closedir(d);
    return 0;
}

bool fl_proc_env(pid_t pid, const char *name, char *buf, size_t len)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/environ", (int)pid);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    size_t cap = 1 << 16, n = 0;
    char *env = malloc(cap + 1);
    ssize_t k;
    while (env && (k = read(fd, env + n, cap - n)) > 0) {
        n += (size_t)k;
        if (n == cap) {
            char *bigger = realloc(env, cap * 2 + 1);
            if (!bigger)
                break;
            env = bigger;
            cap *= 2;
        }
    }
    close(fd);
    if (env)
        env[n] = 0;
    bool found = false;
    size_t nl = strlen(name);
    for (size_t i = 0; env && i < n && !found; i += strlen(env + i) + 1) {
        if (!strncmp(env + i, name, nl) && env[i + nl] == '=') {
            snprintf(buf, len, "%s", env + i + nl + 1);
            found = true;
        }
    }
    free(env);
    return found;
}
