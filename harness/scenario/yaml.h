/*
 * yaml.h: internal to the scenario loader.  A YAML document as a
 * tree of nodes that remember where they were written (1-based line and
 * column, and byte offsets into the source buffer).
 */
#ifndef FL_SCENARIO_YAML_H
#define FL_SCENARIO_YAML_H

#include <stdbool.h>
#include <stddef.h>

#include "harness/scenario/scenario.h"

enum fl_scn_ynode_type { FL_YN_SCALAR = 1, FL_YN_SEQ, FL_YN_MAP };

enum fl_scn_ystyle { FL_YS_PLAIN = 1, FL_YS_SINGLE, FL_YS_DOUBLE, FL_YS_LITERAL, FL_YS_FOLDED };

struct fl_scn_ynode {
    enum fl_scn_ynode_type type;
    struct fl_scn_loc loc; /* start */
    size_t start, end;     /* byte offsets into the source */
    /* SCALAR */
    char *value; /* NUL-terminated */
    size_t len;
    enum fl_scn_ystyle style;
    /* SEQ: items[i]; MAP: keys[i] -> items[i] (keys are scalars) */
    struct fl_scn_ynode **items;
    struct fl_scn_ynode **keys;
    size_t n;
};

struct fl_scn_ydoc {
    struct fl_scn_ynode *root; /* NULL for an empty document */
    struct fl_scn_ynode **all; /* every node, for freeing (aliases share nodes) */
    size_t n_all, cap_all;
};

/*
 * Parses buf into *doc.  On a syntax error returns -EINVAL with
 * "name:line:col: message" in err.  Rejects several documents, non-scalar
 * mapping keys and duplicate keys (message names the first occurrence).
 */
int fl_scn_yaml_parse(const char *name, const char *buf, size_t len, struct fl_scn_ydoc *doc,
                      char *err, size_t errlen);
void fl_scn_yaml_free(struct fl_scn_ydoc *doc);

/* A plain scalar that YAML reads as null: "", "~", "null". */
bool fl_scn_yaml_is_null(const struct fl_scn_ynode *n);

/* The value node of key in a mapping (or NULL); *key_out gets the key node. */
struct fl_scn_ynode *fl_scn_yaml_get(const struct fl_scn_ynode *map, const char *key,
                                     struct fl_scn_ynode **key_out);

/* Internal helpers shared by load/load.c and scenario/util.c. */
int fl_scn_selector_add_terms(const struct fl_scenario *s, const char *text,
                              struct fl_scn_selector *sel, bool strict, char *err, size_t errlen);
size_t fl_scn_signal_names(const char **out, size_t max);

#endif
