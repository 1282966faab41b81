/*
 * log_tail.c: the last lines of a task's log (fl_report_log_tail), a failed
 * run's evidence that the JUnit XML (junit.c) and the HTML report
 * (timeline.c) show.  Only the end of the file is read, so a task that
 * wrote gigabytes costs no more than one that wrote a page; each line is
 * made single-line text (control characters as spaces) and cut to
 * FL_REPORT_TAIL_LINE_MAX characters, ready for either escaping.
 */
#include "reports/table.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

char *fl_report_log_tail(const char *path, int n, bool *more)
{
    *more = false;
    int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        int e = path ? errno : EINVAL;
        if (fd >= 0)
            close(fd);
        errno = e;
        return NULL;
    }
    off_t from = st.st_size > FL_REPORT_TAIL_BYTES ? st.st_size - FL_REPORT_TAIL_BYTES : 0;
    char *buf = malloc(FL_REPORT_TAIL_BYTES + 1);
    size_t len = 0;
    ssize_t got;
    while (buf && len < FL_REPORT_TAIL_BYTES &&
           (got = pread(fd, buf + len, FL_REPORT_TAIL_BYTES - len, from + (off_t)len)) > 0)
        len += (size_t)got;
    close(fd);
    if (!buf) {
        errno = ENOMEM;
        return NULL;
    }
    buf[len] = 0;
    char *start = buf, *end = buf + len;
    if (from > 0) { /* the first line read is a part of one: skip it (unless
                     * it is all there is: the end of one long line) */
        char *nl = memchr(buf, '\n', len);
        start = nl && nl + 1 < end ? nl + 1 : buf;
        *more = true;
    }
    if (end > start && end[-1] == '\n')
        end--; /* the last line's newline ends it, it does not start another */
    /* back from the end to the n-th newline */
    char *first = end;
    int lines = 0;
    while (first > start && lines < n) {
        first--;
        if (*first == '\n' && ++lines == n) {
            first++;
            *more = true;
            break;
        }
    }
    if (lines < n)
        first = start;
    size_t cap = (size_t)(n > 0 ? n : 1) * (FL_REPORT_TAIL_LINE_MAX * 4 + 8) + 1, o = 0;
    char *out = malloc(cap);
    if (!out) {
        free(buf);
        errno = ENOMEM;
        return NULL;
    }
    out[0] = 0;
    for (char *l = first; n > 0 && end > first;) {
        char *nl = memchr(l, '\n', (size_t)(end - l));
        char *le = nl ? nl : end;
        char save = *le;
        *le = 0;
        fl_report_one_line(l, FL_REPORT_TAIL_LINE_MAX, out + o, cap - o - 1);
        o += strlen(out + o);
        out[o++] = '\n';
        out[o] = 0;
        *le = save;
        if (!nl)
            break;
        l = nl + 1;
    }
    free(buf);
    return out;
}
