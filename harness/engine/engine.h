/*
 * engine.h: runs one variant of one scenario, start to verdict.
 */
#ifndef FL_ENGINE_H
#define FL_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fl_scenario;
struct fl_rec;

/* What became of one fault of the scenario in a run (fl_engine_opts.fates). */
struct fl_engine_fault_fate {
    bool armed;       /* it applies to the variant run */
    bool fired;       /* its trigger came and it was applied (or applying it failed) */
    unsigned matches; /* after:/on_log: the matching events or lines seen while it
                         waited (a fault that never fired: every one of the run) */
};

struct fl_engine_opts {
    const char *out_dir; /* run directories go to <out_dir>/runs; default "out" */
    const char *bin_dir; /* {bin}: where faultline and psrt live */
    uint64_t seed;       /* used when seed_set, else the scenario's, else random */
    bool seed_set;
    bool keep;          /* keep the run directory (disks, logs) */
    bool disk_fs;       /* every host's disk served through the faultline filesystem
                           (--disk-fs: as disk: {fs: true} on every host) */
    struct fl_rec *rec; /* the results database, or NULL */
    const char *git_rev;
    bool progress; /* redraw a progress line on stderr (a tty) */
    /* `faultline shell`: bring the hosts up, print the commands the roles
     * would run, start them only if shell_start_roles, and run an interactive
     * shell on host shell_host; the run ends when the shell exits. */
    int shell_host; /* -1: a normal run */
    bool shell_start_roles;
    /* When not NULL: fates[i] is filled at the end with what became of
     * s->faults[i], for i < n_fates (`faultline soak` counts its drawn
     * faults that fired, and those that came after the run's end). */
    struct fl_engine_fault_fate *fates;
    size_t n_fates;
};

struct fl_engine_result {
    char run_id[64];
    char run_dir[4096];
    char verdict[8]; /* pass | fail | error */
    char reason[1024];
    char expected[512];
    char observed[1024];
    int64_t duration_ms;
    /* The faults of the variant that never fired (their trigger never
     * came), one line each, saying where the fault is and why; "" when
     * every one fired, and after an error or an interrupt. */
    char unfired[2048];
    /* Notes on what did not go as the file asked though nothing failed (a
     * fault that cannot reach a program: static or Go), one a line; "" when
     * none.  Also in runs.notes. */
    char notes[4096];
    /* When the run did not pass, its evidence: the failing tasks (those a
     * failed check names, else those that exited non-zero or died of a
     * signal other than the run's end, else every task), one line each,
     * "TASK<tab>LOG" (the log of its last process); "" when it passed. */
    char failing[8192];
    size_t faults_armed; /* faults of the variant (0 in a shell) */
    size_t faults_fired; /* of them, those whose trigger came (applied, or failed to) */
    bool interrupted;    /* SIGINT/SIGTERM: stop every further run */
    int shell_status;    /* shell mode: the shell's exit status (128+signal
                            when killed); -1 when it did not end by itself */
};

/* Runs variant v of s.  Always cleans up what it created (unless opts->keep,
 * which keeps the run directory only).  Returns 0 when a verdict was reached
 * (pass, fail or error: see res), negative errno only for misuse. */
int fl_engine_run(const struct fl_scenario *s, size_t v, const struct fl_engine_opts *o,
                  struct fl_engine_result *res);

/* Between runs: takes an interrupt (SIGINT, SIGTERM, SIGHUP) that arrived
 * since the last run's event loop ended (while it was judged and torn
 * down), says so on stderr and returns true: start no further run. */
bool fl_engine_take_interrupt(void);

/* Process-wide setup: a private mount namespace and blocked signals for the
 * event loop.  Call once, before anything else, single-threaded. */
int fl_engine_global_init(char *err, size_t errlen);

/* Fault i of s for people, without a run: its trigger ("at 1200ms",
 * "after the 7th save.done (host w0)", "on_log 'ready' (job ps)") and what
 * it does ("kill worker:1 for=300ms", "partition [a]|[b,c]"), as
 * `faultline runs RUN --faults` lists a recorded run's schedule. */
void fl_engine_fault_text(const struct fl_scenario *s, size_t i, char *trigger, size_t tlen,
                          char *what, size_t wlen);

#endif
