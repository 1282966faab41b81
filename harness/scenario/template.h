/*
 * template.h: command and env templates of scenario files.
 *
 * A template is text with placeholders: "{name}" where name is
 * [A-Za-z0-9_]+.  "{{" is a literal '{' and "}}" a literal '}'.  Any other
 * '{' or '}' is an error (so that a typo never reaches a command line
 * silently): write awk '{{print $1}}' for awk '{print $1}'.
 * Expansion is purely textual: values are inserted as they are, unquoted.
 *
 * How commands run (decided here, for the whole harness): an expanded
 * command is given to /bin/sh -c.  fl_tmpl_shell_argv() prepends "exec "
 * when the command is one simple command (no unquoted ; & | < > ( ) `
 * $( or newline, and it does not start with a VAR=value assignment), so
 * that the task's process IS the program (signals, exit status and core
 * dumps are the program's).  Otherwise the shell stays as the task's
 * process; the engine signals the task's process group.
 */
#ifndef FL_TEMPLATE_H
#define FL_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>

/* Returns the value of placeholder name[0..len) or NULL when unknown. */
typedef const char *(*fl_tmpl_lookup_fn)(void *ctx, const char *name, size_t len);
/* Returns whether placeholder name[0..len) is known. */
typedef bool (*fl_tmpl_known_fn)(void *ctx, const char *name, size_t len);

/*
 * Expands 'tmpl' into *out (malloc'd).  On error returns -EINVAL and writes
 * fl_tmpl_check's message after the column, e.g.
 * "column 7: unknown placeholder '{foo}'" or
 * "column 3: '{' does not start a placeholder (write '{{' for a literal brace)"
 * (columns are 1-based byte offsets into the template).
 */
int fl_tmpl_expand(const char *tmpl, fl_tmpl_lookup_fn lookup, void *ctx, char **out, char *err,
                   size_t errlen);

/*
 * Checks 'tmpl' without expanding it.  Returns 0, or -EINVAL with
 * *bad_off and *bad_len set to the byte range of the offending text in tmpl
 * (the whole "{name}" for an unknown placeholder, the single brace for a
 * stray brace) and a message without any position: "unknown placeholder
 * '{foo}'", "'{' does not start a placeholder (write '{{' for a literal
 * brace)" or "unmatched '}' (write '}}' for a literal brace)".  The caller
 * adds the position.  'known' may be NULL to check syntax only.
 */
int fl_tmpl_check(const char *tmpl, fl_tmpl_known_fn known, void *ctx, size_t *bad_off,
                  size_t *bad_len, char *err, size_t errlen);

/*
 * Calls fn for every placeholder in tmpl (syntax errors stop the walk and
 * return -EINVAL).  Useful to list what a template uses.
 */
int fl_tmpl_foreach(const char *tmpl,
                    int (*fn)(void *ctx, const char *name, size_t len, size_t off), void *ctx);

/*
 * argv for running an expanded command: {"/bin/sh", "-c", <cmd>, NULL},
 * where <cmd> is "exec " + cmd for a simple command (see above).  *script
 * receives the malloc'd string argv[2] points to (free it after exec/fork).
 */
int fl_tmpl_shell_argv(const char *cmd, char *argv[4], char **script);

/* Whether fl_tmpl_shell_argv would prepend "exec ". */
bool fl_tmpl_is_simple_command(const char *cmd);

#endif
