/*
 * bench_hosts.c: `faultline _bench-hosts N [ROUNDS]` (used by `make bench`):
 * brings N hosts up and down exactly as a run does (disk, /tmp and root
 * layer directories, the roots' common layer, /etc/hosts, the switch, every init with its
 * namespaces and mounts and root of its own, veths and addresses in one netlink batch) and prints
 * the best wall time of ROUNDS rounds in seconds.
 *
 * The kernel frees dead network namespaces after their last process is
 * gone, asynchronously; left alone, that work from one round would land in
 * the next.  So each round starts on a settled kernel (netns_settle.c waits,
 * untimed, until every namespace of the last round is freed), and so does
 * whatever runs after this command (the ip baseline).  Each round's line on
 * stderr splits its time: making the hosts' directories and root layers,
 * bringing them up (fl_host_up_batch: inits cloned, mounts, the switch,
 * veths, addresses), killing and reaping the inits, the switch's end, and
 * unmounting the hosts' tmpfs.  How long after its
 * teardown the kernel had freed a round's namespaces is shown on stderr (an
 * upper bound: the wait includes two canary namespaces of its own).
 *
 * `faultline _bench-hosts N ROUNDS mem` also prints, after the seconds,
 * the memory an idle host takes, harness and kernel together: the fall of
 * MemAvailable (/proc/meminfo) from before the round to when all N hosts
 * are up, over N, in KiB (the smallest of the rounds: other programs on
 * the machine only add to it).
 */
#include "harness/cli/cli.h"
#include "harness/engine/engine.h"
#include "harness/sys/host.h"
#include "harness/sys/netns_settle.h"
#include "harness/base/monoclock.h"
#include "harness/sys/rundir.h"
#include "harness/sys/root_layer.h"
#include "harness/scenario/scenario.h"
#include "harness/sys/shared_leftovers.h"
#include "netem/fabric.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* MemAvailable of /proc/meminfo in KiB, or -1. */
static long mem_available_kib(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %ld kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

/* The phases of a round, in seconds, as stderr shows them. */
enum { PH_DIRS, PH_UP, PH_DOWN, PH_SWITCH, PH_UNMOUNT, NPH };
static const char *const ph_name[NPH] = {"directories", "up", "killed and reaped", "switch gone",
                                         "tmpfs unmounted"};

static int one_round(int n, const char *base, double *secs, double ph[NPH], long *kib_per_host)
{
    long avail0 = mem_available_kib();
    char err[1024];
    struct fl_host *h = calloc((size_t)n, sizeof *h);
    struct fl_host **hp = calloc((size_t)n, sizeof *hp);
    char(*paths)[7][PATH_MAX] = calloc((size_t)n, sizeof *paths);
    char etc[PATH_MAX];
    struct fl_fabric *fab = NULL;
    int rc = 0;
    double t0 = fl_mono_s(), t1 = t0, t2 = t0, t3, t4;
    snprintf(etc, sizeof etc, "%s/etc-hosts", base);
    FILE *f = fopen(etc, "w");
    fprintf(f, "127.0.0.1\tlocalhost\n");
    for (int i = 0; i < n; i++) {
        char a[16];
        fprintf(f, "%s\th%d\n", fl_fabric_addr_str(i, a, sizeof a), i);
    }
    fclose(f);
    char hosts0[PATH_MAX];
    snprintf(hosts0, sizeof hosts0, "%s/hosts", base);
    mkdir(hosts0, 0755);
    if (mount("fl-fs", hosts0, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755") < 0) {
        snprintf(err, sizeof err, "mount tmpfs at %s: %s", hosts0, strerror(errno));
        rc = -errno;
        goto fail;
    }
    if ((rc = fl_fabric_create(&fab, "bench", err, sizeof err)) < 0)
        goto fail;
    char common[PATH_MAX];
    snprintf(common, sizeof common, "%s/hosts/root-common", base);
    if ((rc = fl_root_common_make(common, etc)) < 0) {
        snprintf(err, sizeof err, "the common layer at %s: %s", common, strerror(-rc));
        goto fail;
    }
    for (int i = 0; i < n; i++) {
        snprintf(paths[i][0], PATH_MAX, "%s/hosts/h%d/disk", base, i);
        snprintf(paths[i][1], PATH_MAX, "%s/hosts/h%d/tmp", base, i);
        snprintf(paths[i][2], PATH_MAX, "h%d", i);
        snprintf(paths[i][3], PATH_MAX, "%s/hosts/h%d/root", base, i);
        snprintf(paths[i][6], PATH_MAX, "%s/hide", paths[i][3]);
        fl_mkdir_p(paths[i][0], 0755);
        fl_mkdir_p(paths[i][1], 01777);
        /* its root of its own, as a run makes it (paths[i][4]: the mount
         * point, [5]: the overlay's options), the bench's directory hidden */
        if ((rc = fl_root_layer_make(paths[i][3], common, true, paths[i][4], PATH_MAX, paths[i][5],
                                     PATH_MAX)) < 0) {
            snprintf(err, sizeof err, "the root of h%d at %s: %s", i, paths[i][3], strerror(-rc));
            goto fail;
        }
        h[i].spec = (struct fl_host_spec){.name = paths[i][2],
                                          .idx = i,
                                          .disk_dir = paths[i][0],
                                          .tmp_dir = paths[i][1],
                                          .workdir = FL_SCN_DEFAULT_WORKDIR,
                                          .hosts_file = etc,
                                          .root = paths[i][4],
                                          .root_opts = paths[i][5],
                                          .hide = base,
                                          .hide_with = paths[i][6]};
        h[i].pidfd = -1;
        hp[i] = &h[i];
    }
    t1 = fl_mono_s();
    rc = fl_host_up_batch(hp, (size_t)n, fab, err, sizeof err);
    t2 = fl_mono_s();
    long avail1 = mem_available_kib();
    *kib_per_host = avail0 > 0 && avail1 > 0 ? (avail0 - avail1) / n : -1;
fail:
    if (rc < 0)
        fprintf(stderr, "faultline _bench-hosts: %s\n", err);
    for (int i = 0; i < n; i++)
        fl_host_kill(&h[i]);
    for (int i = 0; i < n; i++) {
        if (!h[i].pid)
            continue;
        while (waitpid(h[i].pid, NULL, 0) < 0 && errno == EINTR)
            ;
        fl_host_note_reaped(h[i].pid);
    }
    t3 = fl_mono_s();
    fl_fabric_destroy(fab);
    t4 = fl_mono_s();
    char hosts[PATH_MAX];
    snprintf(hosts, sizeof hosts, "%s/hosts", base);
    umount2(hosts, MNT_DETACH);
    rmdir(hosts);
    *secs = fl_mono_s() - t0;
    ph[PH_DIRS] = t1 - t0;
    ph[PH_UP] = t2 - t1;
    ph[PH_DOWN] = t3 - t2;
    ph[PH_SWITCH] = t4 - t3;
    ph[PH_UNMOUNT] = t0 + *secs - t4;
    free(h);
    free(hp);
    free(paths);
    return rc;
}

int fl_cli_bench_hosts(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: faultline _bench-hosts N [ROUNDS [mem]]\n");
        return 2;
    }
    int n = atoi(argv[1]), rounds = argc > 2 ? atoi(argv[2]) : 3;
    bool mem = argc > 3 && !strcmp(argv[3], "mem");
    long best_kib = -1;
    char err[1024];
    if (fl_engine_global_init(err, sizeof err) < 0) {
        fprintf(stderr, "faultline _bench-hosts: %s\n", err);
        return 1;
    }
    int lock = fl_runs_lock(false);
    if (fl_workdir_make(FL_SCN_DEFAULT_WORKDIR) < 0)
        return 1;
    char base[] = "/tmp/fl-bench-hosts-XXXXXX";
    if (!mkdtemp(base))
        return 1;
    struct fl_netns_settle *settle;
    if (fl_netns_settle_open(&settle, err, sizeof err) < 0) {
        fprintf(stderr, "faultline _bench-hosts: %s\n", err);
        return 1;
    }
    double best = 1e9;
    int rc = fl_netns_settle_wait(settle, 60, err, sizeof err);
    for (int r = 0; r < rounds && rc == 0; r++) {
        double s, ph[NPH] = {0};
        long kib = -1;
        rc = one_round(n, base, &s, ph, &kib);
        if (s < best)
            best = s;
        if (kib >= 0 && (best_kib < 0 || kib < best_kib))
            best_kib = kib;
        double t = fl_mono_s();
        if (rc == 0 && (rc = fl_netns_settle_wait(settle, 60, err, sizeof err)) == 0) {
            fprintf(stderr, "hosts=%d round %d: up+down %.4f s (", n, r + 1, s);
            for (int k = 0; k < NPH; k++)
                fprintf(stderr, "%s%s %.4f", k ? ", " : "", ph_name[k], ph[k]);
            fprintf(stderr,
                    "); the kernel had freed the namespaces %.4f s later (an upper bound: the "
                    "wait includes two canary namespaces)\n",
                    fl_mono_s() - t);
        }
    }
    if (rc < 0 && *err)
        fprintf(stderr, "faultline _bench-hosts: %s\n", err);
    fl_netns_settle_close(settle);
    fl_rm_rf(base);
    bool last = fl_runs_lock_try_last(lock);
    if (last)
        fl_workdir_remove(FL_SCN_DEFAULT_WORKDIR);
    fl_runs_lock_release(last ? lock : -1, last);
    if (rc < 0)
        return 1;
    if (mem)
        printf("%.4f %ld\n", best, best_kib);
    else
        printf("%.4f\n", best);
    return 0;
}
