/*
 * table.h: aligned text tables and small formatting helpers shared by the
 * report writers in reports/ (internal to reports/, not for other folders).
 */
#ifndef FL_REPORT_TABLE_H
#define FL_REPORT_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct fl_report_table;

struct fl_report_col {
    const char *title;
    int max_width; /* cells longer than this (in characters) end in "..."; 0 = no limit */
    bool right;    /* right-aligned (numbers, durations) */
    bool verdict;  /* cells are verdict words: coloured when colour is on */
    int min_width; /* narrowest it gets to fit a terminal (with max_width or fit); 0 -> 12 */
    bool fit;      /* no max_width, but cut to fit a terminal like the columns that have one */
};

/* A table with ncols columns (the array is copied). NULL when out of memory. */
struct fl_report_table *fl_report_table_new(const struct fl_report_col *cols, int ncols);
/* Adds one row of ncols cells (NULL -> "-"), kept whole; newlines and tabs
 * become spaces.  Returns 0 or -ENOMEM. */
int fl_report_table_add(struct fl_report_table *t, const char *const *cells);
size_t fl_report_table_rows(const struct fl_report_table *t);
/* Prints the header line and the rows; colour per fl_report_use_color(out).
 * A cell longer than its column's max_width is cut ("..."). On a terminal
 * narrower than the table (fl_report_term_width), the columns that have a
 * max_width or fit are narrowed further (widest first, not below their
 * min_width) to fit.  With fl_report_set_wide(true), nothing is cut.
 * Returns 0, or -EIO when writing failed. */
int fl_report_table_print(const struct fl_report_table *t, FILE *out);
void fl_report_table_free(struct fl_report_table *t);

/* Columns of the terminal out writes to: $COLUMNS when set to a number,
 * else what the terminal says (TIOCGWINSZ); 0 when out is not a terminal. */
size_t fl_report_term_width(FILE *out);

/* Whether verdicts written to out are coloured (mode, tty, NO_COLOR, TERM=dumb). */
bool fl_report_use_color(FILE *out);
/* ANSI colour sequence for a verdict word (any case), "" for unknown. */
const char *fl_report_verdict_color(const char *verdict);
/* "PASS", "FAIL", "ERROR", "RUNNING" (upper case of verdict); "?" for NULL. */
const char *fl_report_verdict_upper(const char *verdict, char *buf, size_t len);

/* 0.4s, 3.2s, 12.3s, 2m03s, 1h02m; "-" for a negative duration. */
const char *fl_report_fmt_duration(int64_t ms, char *buf, size_t len);

/* Copies s into buf on one line (control characters -> spaces) and, when it
 * has more than max characters, cuts it to max-3 characters plus "...".
 * UTF-8 aware (never cuts inside a character). */
const char *fl_report_one_line(const char *s, size_t max, char *buf, size_t len);

/* Display width of UTF-8 text (characters, counting each code point as 1). */
size_t fl_report_text_width(const char *s);

/* Length of the valid UTF-8 character at p that XML 1.0 (and so HTML) can
 * hold, or 0 (invalid UTF-8, forbidden C0 controls, surrogates, U+FFFE/FFFF). */
size_t fl_report_xml_char_len(const unsigned char *p);
/* Writes s (NULL: nothing) with every character fl_report_xml_char_len
 * refuses as '?' and each ASCII character c that ent[c] names as ent[c]. */
void fl_report_xml_escape(FILE *f, const char *s, const char *const ent[128]);

/* The last n lines of the log at path (log_tail.c), each on one line
 * (control characters as spaces) and cut to FL_REPORT_TAIL_LINE_MAX
 * characters, '\n' after each; malloc'd, NULL with errno set when the file
 * cannot be read.  *more says whether the log holds lines before them.
 * Only its last FL_REPORT_TAIL_BYTES are read, whatever its size. */
#define FL_REPORT_TAIL_LINE_MAX 400
#define FL_REPORT_TAIL_BYTES 65536
char *fl_report_log_tail(const char *path, int n, bool *more);

/* Creates the missing parent directories of path (0, or negative errno). */
int fl_report_mkdir_parents(const char *path);

#endif
