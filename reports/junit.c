/*
 * junit.c: JUnit XML for CI (fl_report_junit), the format Jenkins, GitLab and
 * GitHub test reporters read: <testsuites> holding one <testsuite> per
 * scenario (in order of first appearance) and one <testcase> per run, named
 * by its variant.  A 'fail' run carries <failure>, anything else that is not
 * 'pass' carries <error>; the message attribute is the reason, the element's
 * text says what was expected and what was observed, where the run's logs
 * are, and the last lines of each failing task's log: the evidence, in the
 * CI job's own page.
 *
 * Text from scenarios and process output can hold anything, so every string
 * goes through xml_put: markup characters become entities, bytes that are not
 * valid UTF-8 or characters XML 1.0 forbids (most C0 controls, U+FFFE/FFFF,
 * surrogates) become '?', and in attributes tab/newline/CR are written as
 * character references so that they survive attribute normalisation.
 *
 * The file is written beside its final path and renamed into place, so a
 * reader never sees half a report.
 */
#include "reports/report.h"
#include "reports/table.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

size_t fl_report_xml_char_len(const unsigned char *p)
{
    unsigned c = p[0];
    uint32_t cp;
    size_t n;
    if (c < 0x80) {
        return (c >= 0x20 || c == '\t' || c == '\n' || c == '\r') ? 1 : 0;
    } else if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
        cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0; /* overlong or out of range */
    if ((cp >= 0xd800 && cp <= 0xdfff) || cp == 0xfffe || cp == 0xffff)
        return 0;
    return n;
}

void fl_report_xml_escape(FILE *f, const char *s, const char *const ent[128])
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    while (*p) {
        size_t n = fl_report_xml_char_len(p);
        if (!n) {
            fputc('?', f);
            p++;
        } else if (n > 1) {
            fwrite(p, 1, n, f);
            p += n;
        } else {
            if (ent[*p])
                fputs(ent[*p], f);
            else
                fputc(*p, f);
            p++;
        }
    }
}

static void xml_put(FILE *f, const char *s, bool attr)
{
    static const char *const text[128] = {
        ['&'] = "&amp;",
        ['<'] = "&lt;",
        ['>'] = "&gt;",
        ['\r'] = "&#13;",
    };
    static const char *const attribute[128] = {
        ['&'] = "&amp;",  ['<'] = "&lt;",    ['>'] = "&gt;",  ['\r'] = "&#13;",
        ['"'] = "&quot;", ['\''] = "&apos;", ['\t'] = "&#9;", ['\n'] = "&#10;",
    };
    fl_report_xml_escape(f, s, attr ? attribute : text);
}

static bool same(const char *a, const char *b)
{
    return strcmp(a ? a : "", b ? b : "") == 0;
}

static void count(const struct fl_report_row *r, size_t *fail, size_t *error, int64_t *ms)
{
    const char *v = r->verdict ? r->verdict : "error";
    if (!strcmp(v, "fail"))
        (*fail)++;
    else if (strcmp(v, "pass"))
        (*error)++;
    if (r->duration_ms > 0)
        *ms += r->duration_ms;
}

/* For each "TASK<tab>LOG" line of failing: a header naming the task and
 * its log, then the log's last lines (or why there are none). */
static void write_tails(FILE *f, const char *failing)
{
    for (const char *l = failing ? failing : ""; *l;) {
        size_t k = strcspn(l, "\n"), tab = strcspn(l, "\t");
        if (tab < k) {
            char *task = strndup(l, tab), *log = strndup(l + tab + 1, k - tab - 1);
            bool more;
            char *tail = task && log ? fl_report_log_tail(log, FL_REPORT_LOG_TAIL, &more) : NULL;
            fputs("\n\n--- ", f);
            xml_put(f, task, false);
            fputs(tail && more ? ": the last lines of " : ": ", f);
            xml_put(f, log, false);
            if (!tail)
                fprintf(f, " ---\n(cannot be read: %s)", strerror(errno));
            else if (!*tail)
                fputs(" ---\n(empty)", f);
            else {
                fputs(" ---\n", f);
                size_t tl = strlen(tail);
                tail[tl - 1] = 0; /* the element's end follows the last line */
                xml_put(f, tail, false);
            }
            free(tail);
            free(task);
            free(log);
        }
        l += k + (l[k] == '\n');
    }
}

static void write_case(FILE *f, const struct fl_report_row *r)
{
    const char *v = r->verdict ? r->verdict : "error";
    const char *name = r->variant && *r->variant ? r->variant : r->scenario;
    fputs("    <testcase classname=\"", f);
    xml_put(f, r->scenario, true);
    fputs("\" name=\"", f);
    xml_put(f, name, true);
    fprintf(f, "\" time=\"%.3f\">\n", r->duration_ms > 0 ? (double)r->duration_ms / 1000.0 : 0.0);
    if (strcmp(v, "pass")) {
        const char *el = strcmp(v, "fail") ? "error" : "failure";
        fprintf(f, "      <%s message=\"", el);
        xml_put(f, r->reason && *r->reason ? r->reason : v, true);
        fputs("\" type=\"", f);
        xml_put(f, v, true);
        fputs("\">", f);
        fputs("expected: ", f);
        xml_put(f, r->expected ? r->expected : "-", false);
        fputs("\nobserved: ", f);
        xml_put(f, r->observed ? r->observed : "-", false);
        if (r->reason && *r->reason) {
            fputs("\nreason: ", f);
            xml_put(f, r->reason, false);
        }
        if (r->run_dir) {
            fputs("\nlogs: ", f);
            xml_put(f, r->run_dir, false);
            fputs("/logs", f);
        }
        write_tails(f, r->failing);
        fprintf(f, "</%s>\n", el);
    }
    if (r->run_id || r->run_dir) {
        fputs("      <system-out>", f);
        if (r->run_id) {
            fputs("run id: ", f);
            xml_put(f, r->run_id, false);
            fputc('\n', f);
        }
        if (r->run_dir) {
            fputs("run dir: ", f);
            xml_put(f, r->run_dir, false);
            fputs("\nlogs: ", f);
            xml_put(f, r->run_dir, false);
            fputs("/logs\n", f);
        }
        fputs("</system-out>\n", f);
    }
    fputs("    </testcase>\n", f);
}

int fl_report_mkdir_parents(const char *path)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return -ENAMETOOLONG;
    char *slash = strrchr(buf, '/');
    if (!slash || slash == buf)
        return 0;
    *slash = '\0';
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || !*p) {
            char c = *p;
            *p = '\0';
            if (mkdir(buf, 0777) < 0 && errno != EEXIST)
                return -errno;
            if (!c)
                break;
            *p = c;
        }
    }
    return 0;
}

int fl_report_junit(const char *path, const struct fl_report_row *rows, size_t n)
{
    char tmp[PATH_MAX];
    size_t fail = 0, error = 0;
    int64_t ms = 0;
    FILE *f = NULL;
    bool *done = NULL;
    int err;

    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >= sizeof tmp)
        return -ENAMETOOLONG;
    err = fl_report_mkdir_parents(path);
    if (err)
        return err;
    done = calloc(n ? n : 1, sizeof *done);
    if (!done)
        return -ENOMEM;
    f = fopen(tmp, "w");
    if (!f) {
        err = -errno;
        goto cleanup;
    }
    for (size_t i = 0; i < n; i++)
        count(&rows[i], &fail, &error, &ms);
    fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", f);
    fprintf(f,
            "<testsuites name=\"faultline\" tests=\"%zu\" failures=\"%zu\" errors=\"%zu\" "
            "time=\"%.3f\">\n",
            n, fail, error, (double)ms / 1000.0);
    for (size_t i = 0; i < n; i++) {
        if (done[i])
            continue;
        size_t st = 0, sf = 0, se = 0;
        int64_t sms = 0;
        for (size_t j = i; j < n; j++)
            if (same(rows[j].scenario, rows[i].scenario)) {
                st++;
                count(&rows[j], &sf, &se, &sms);
            }
        fputs("  <testsuite name=\"", f);
        xml_put(f, rows[i].scenario, true);
        fprintf(f,
                "\" tests=\"%zu\" failures=\"%zu\" errors=\"%zu\" skipped=\"0\" "
                "time=\"%.3f\">\n",
                st, sf, se, (double)sms / 1000.0);
        for (size_t j = i; j < n; j++)
            if (same(rows[j].scenario, rows[i].scenario)) {
                done[j] = true;
                write_case(f, &rows[j]);
            }
        fputs("  </testsuite>\n", f);
    }
    fputs("</testsuites>\n", f);
    errno = 0;
    if (fflush(f) != 0 || ferror(f) || fsync(fileno(f)) < 0) {
        err = -(errno ? errno : EIO);
        goto cleanup;
    }
    if (fclose(f) != 0) {
        f = NULL;
        err = -errno;
        goto cleanup;
    }
    f = NULL;
    if (rename(tmp, path) < 0)
        err = -errno;
cleanup:
    if (f)
        fclose(f);
    if (err)
        unlink(tmp);
    free(done);
    return err;
}
