/*
 * emit.c: `faultline emit [--sync] KIND [KEY=VALUE...]`: sends one event from
 * a process under the harness (a shell script's step) on the run's event
 * channel ($FAULTLINE_EVENTS); with --sync, returns once the harness has
 * applied the faults the event triggers.  The event is checked as the
 * harness will read it, also outside a run.
 */
#include "harness/cli/cli.h"
#include "harness/run/evsrv.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char fl_cli_emit_usage[] =
    "usage: faultline emit [--sync] KIND [KEY=VALUE...]\n"
    "\n"
    "Sends one event on the event channel of the run this process belongs to\n"
    "($FAULTLINE_EVENTS). With --sync, waits until the harness has applied every\n"
    "fault the event triggers (which may kill the caller). A bad KIND or\n"
    "KEY=VALUE is an error (exit 2) everywhere; without FAULTLINE_EVENTS it\n"
    "does nothing else and exits 0. Exit 1 when the channel cannot be reached or\n"
    "breaks before the answer (the run is over), with one line on stderr.\n";

/* Checks the event (exit status 2 when bad), then sends it on the event
 * channel at path; a NULL or empty path (not under the harness) sends nothing. */
static int send_event(const char *path, const char *kind, const char *attrs, bool sync)
{
    /* Checked as the harness will read it, also outside the harness, so a
     * script learns of a bad event where it is tried out, not as an event
     * the harness drops (or a fault that never fires) in a run. */
    char line[FL_EV_LINE_MAX + 16], err[256];
    struct fl_ev ev;
    if (!fl_ev_kind_valid(kind)) {
        fprintf(stderr, "faultline emit: bad event kind '%s' (" FL_EV_KIND_CHARS ")\n", kind);
        return 2;
    }
    snprintf(line, sizeof line, "EVENT %s%s%s", kind, *attrs ? " " : "", attrs);
    if (fl_ev_parse(line, &ev, err, sizeof err) < 0) {
        fprintf(stderr,
                "faultline emit: %s (write KEY=VALUE, and KEY=\"a b\" for a value with "
                "spaces)\n",
                err);
        return 2;
    }
    if (!path || !*path)
        return 0;
    int fd = fl_evcli_connect(path);
    if (fd < 0) {
        fprintf(stderr, "faultline emit: connect %s: %s\n", path, strerror(-fd));
        return 1;
    }
    int rc = fl_evcli_send(fd, kind, attrs, sync, 1);
    close(fd);
    if (rc < 0) {
        fprintf(stderr, "faultline emit: %s: %s\n", kind, strerror(-rc));
        return 1;
    }
    return 0;
}

int fl_cli_emit(int argc, char **argv)
{
    bool sync = false;
    int i = 1;
    /* options come before KIND (a kind or KEY=VALUE never starts with '-') */
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (!strcmp(argv[i], "--sync")) {
            sync = true;
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(fl_cli_emit_usage, stdout);
            return 0;
        } else {
            fprintf(stderr, "faultline emit: unknown option '%s'\n", argv[i]);
            fputs(fl_cli_emit_usage, stderr);
            return 2;
        }
    }
    if (i >= argc) {
        fputs(fl_cli_emit_usage, stderr);
        return 2;
    }
    char attrs[4000] = "";
    size_t n = 0;
    for (int k = i + 1; k < argc; k++) {
        int w = snprintf(attrs + n, sizeof attrs - n, "%s%s", n ? " " : "", argv[k]);
        if (w < 0 || (size_t)w >= sizeof attrs - n) {
            fprintf(stderr,
                    "faultline emit: the attributes of event '%s' are longer than %zu "
                    "bytes\n",
                    argv[i], sizeof attrs - 1);
            return 2;
        }
        n += (size_t)w;
    }
    return send_event(getenv("FAULTLINE_EVENTS"), argv[i], attrs, sync);
}
