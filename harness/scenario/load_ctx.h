/*
 * load_ctx.h: the validation context of a scenario load and the helpers
 * that check one value of the YAML tree (values.c), for the loader
 * (harness/load/) and the fault kinds' parsers (harness/faults/).  Every helper that fails
 * writes "file:line:column: message" into c->err and returns -EINVAL (or
 * -ENOMEM); callers return that code unchanged.
 */
#ifndef FL_SCENARIO_LOAD_H
#define FL_SCENARIO_LOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "harness/scenario/scenario.h"
#include "harness/scenario/yaml.h"

typedef struct fl_scn_ynode ynode;

/* One load: the source (for places) and the scenario being filled. */
struct fl_scn_vctx {
    const char *file;
    const char *buf;
    size_t len;
    char *err;
    size_t errlen;
    struct fl_scenario *s;
    const ynode *run; /* the run: mapping (or NULL) */
    /* While a fault's kind is parsed (harness/load/faults.c): a host or
     * target may be '{event.KEY}' (then FL_SCN_HOST_EVENT, and ev_seen is
     * set) when the fault's trigger (ev_trigger) is `after:`; with another
     * trigger it is an error. */
    bool ev_field;
    enum fl_scn_trigger_kind ev_trigger;
    bool ev_seen;
};

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Messages. */
int fl_scn_verr(struct fl_scn_vctx *c, struct fl_scn_loc l, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Appends " (did you mean 'x'?)" to c->err; returns -EINVAL. */
int fl_scn_vsuggest(struct fl_scn_vctx *c, const char *word, const char *const *cands, size_t n);
/* "a mapping", "a list", "'text'", "empty". */
const char *fl_scn_describe(const ynode *n, char *buf, size_t len);

/* Types and keys. */
int fl_scn_want(struct fl_scn_vctx *c, const ynode *n, enum fl_scn_ynode_type t, const char *what);
/* fl_scn_want of a single value, the message naming it 'key'. */
int fl_scn_want_scalar(struct fl_scn_vctx *c, const ynode *n, const char *key);
int fl_scn_check_keys(struct fl_scn_vctx *c, const ynode *map, const char *const *keys, size_t n,
                      const char *where);
int fl_scn_dup_str(struct fl_scn_vctx *c, const char *v, char **out);
void *fl_scn_zalloc(struct fl_scn_vctx *c, size_t n, size_t size);
int fl_scn_get_str(struct fl_scn_vctx *c, const ynode *n, const char *what, char **out);
int fl_scn_get_duration(struct fl_scn_vctx *c, const ynode *n, const char *what, bool allow_zero,
                        int64_t *ms);
/* One of two words: *second is whether it is the second; else an error
 * "WHAT must be CHOICES, not 'V'" (choices says both, for people). */
int fl_scn_get_either(struct fl_scn_vctx *c, const ynode *n, const char *what, const char *first,
                      const char *second, const char *choices, bool *is_second);
/* A duration that may be signed ("-250ms", "+5s", "1h"), in ms. */
int fl_scn_get_signed_ms(struct fl_scn_vctx *c, const ynode *n, const char *what, int64_t *ms);
/* A clock's drift, a rate ("10%", "-0.5%", "+200ppm") above -50% and at
 * most 1000%, in millionths. */
int fl_scn_get_drift(struct fl_scn_vctx *c, const ynode *n, const char *what, int64_t *ppm);
int fl_scn_get_long(struct fl_scn_vctx *c, const ynode *n, const char *what, long min, long max,
                    long *out);
int fl_scn_get_bool(struct fl_scn_vctx *c, const ynode *n, const char *what, bool *out);
/* The signal a scalar names (SIGKILL, KILL, 9); else an error with suggestions. */
int fl_scn_get_signal(struct fl_scn_vctx *c, const ynode *n, int *sig);
/* A path scalar, normalised ("a//./b/" -> "a/b", "//" -> "/", "/./sys" ->
 * "/sys"), ".." refused, into out (fl_scn_norm_path) or a new string
 * (fl_scn_get_path).  how: FL_SCN_PATH_REL (relative to the workdir),
 * FL_SCN_PATH_ABS, or 0 (either); FL_SCN_PATH_DOT lets a relative path
 * name the workdir itself (".": normalised to "").  Errors name the place
 * and `what` ("shared path"). */
enum { FL_SCN_PATH_REL = 1, FL_SCN_PATH_ABS = 2, FL_SCN_PATH_DOT = 4 };
int fl_scn_norm_path(struct fl_scn_vctx *c, const ynode *n, const char *what, unsigned how,
                     char *out, size_t len);
int fl_scn_get_path(struct fl_scn_vctx *c, const ynode *n, const char *what, unsigned how,
                    char **out);

/* Places. */
struct fl_scn_loc fl_scn_loc_at(struct fl_scn_vctx *c, size_t off);
struct fl_scn_loc fl_scn_loc_in_scalar(struct fl_scn_vctx *c, const ynode *n, size_t off,
                                       size_t len);

/* References (hosts, jobs and variants must be loaded). */
int fl_scn_resolve_host(struct fl_scn_vctx *c, const ynode *n, const char *what, int *out);
int fl_scn_load_hostset(struct fl_scn_vctx *c, const ynode *n, const char *what,
                        struct fl_scn_hostset *hs);
int fl_scn_resolve_job_task(struct fl_scn_vctx *c, const ynode *n, const char *where, int *job,
                            int *task);
int fl_scn_resolve_target(struct fl_scn_vctx *c, const ynode *n, const char *kind,
                          struct fl_scn_target *t);
/* The error for a final: entry named where faults reach (a target, a
 * trigger's job): n names it, job is its index; returns -EINVAL. */
int fl_scn_final_not_here(struct fl_scn_vctx *c, const ynode *n, int job, const char *where);

/* '{event.KEY}': the KEY of a whole value naming the triggering event's
 * attribute (into key, at most keylen bytes), else NULL.  Looks only at the
 * shape; fl_scn_event_value_like says whether a value tries to be one. */
const char *fl_scn_event_value_key(const char *v, char *key, size_t keylen);
bool fl_scn_event_value_like(const char *v);

/* Regexes. */
int fl_scn_load_regex(struct fl_scn_vctx *c, const ynode *n, const char *what,
                      struct fl_scn_regex *r);
void fl_scn_regex_free(struct fl_scn_regex *r);

#endif
