/*
 * predict.c: `psrt predict --model DIR`: loads an export (DIR is a version
 * directory holding signature.txt, or an export_dir whose highest numeric
 * version is used), then answers one query per line of standard input on
 * standard output (format per model: see signature.txt's `inputs:`), so an
 * export is checked end to end.  Any problem: one line on stderr naming the
 * file or the input line, exit 1.
 */
#include "runtime/psrt/psrt.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct sparse_lookup {
    struct psrt_table t;
};

static float lookup(void *ctx, uint64_t key)
{
    struct sparse_lookup *s = ctx;
    const float *v = psrt_table_lookup(&s->t, key);
    return v ? v[0] : 0.0f;
}

static int find_version(const char *dir, char *out, size_t len)
{
    struct stat st;
    snprintf(out, len, "%s/signature.txt", dir);
    if (stat(out, &st) == 0) {
        snprintf(out, len, "%s", dir);
        return 0;
    }
    DIR *d = opendir(dir);
    if (!d)
        return -errno;
    long best = -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        long v = strtol(e->d_name, &end, 10);
        if (*end || end == e->d_name || v < 0)
            continue;
        char sig[4200];
        snprintf(sig, sizeof sig, "%s/%s/signature.txt", dir, e->d_name);
        if (stat(sig, &st) == 0 && v > best)
            best = v;
    }
    closedir(d);
    if (best < 0)
        return -ENOENT;
    snprintf(out, len, "%s/%ld", dir, best);
    return 0;
}

int psrt_predict_main(int argc, char **argv)
{
    const char *dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: psrt predict --model DIR < inputs\n"
                   "\n"
                   "Loads an export (DIR is a version directory holding signature.txt, or an\n"
                   "--export_dir whose highest numeric version is used) and answers one query\n"
                   "per line of standard input on standard output, in the format of\n"
                   "signature.txt's `inputs:` line:\n"
                   "  linear     one number x per line; prints y\n"
                   "  softmax    784 numbers per line; prints the class, then 10 probabilities\n"
                   "  sparse_lr  raw feature ids (integers) per line; prints P(y=1)\n"
                   "\n"
                   "Exit status: 0 ok; 1 the export or an input line is bad (one line on\n"
                   "stderr naming the file or the line); 2 usage.\n");
            return 0;
        }
        if (!strncmp(argv[i], "--model=", 8))
            dir = argv[i] + 8;
        else if (!strcmp(argv[i], "--model") && i + 1 < argc)
            dir = argv[++i];
        else if (!strcmp(argv[i], "--model")) {
            fprintf(stderr, "psrt predict: flag --model needs a value (an export directory)\n");
            return 2;
        } else {
            fprintf(stderr,
                    "psrt predict: unexpected argument '%s' (usage: psrt predict "
                    "--model DIR < inputs)\n",
                    argv[i]);
            return 2;
        }
    }
    if (!dir) {
        fprintf(stderr, "psrt predict: --model DIR is required\n");
        return 2;
    }
    char vdir[4096], path[4400];
    int r = find_version(dir, vdir, sizeof vdir);
    if (r) {
        fprintf(stderr,
                "psrt predict: %s: no export (no signature.txt in it or in a numeric "
                "version directory): %s\n",
                dir, strerror(-r));
        return 1;
    }
    snprintf(path, sizeof path, "%s/signature.txt", vdir);
    FILE *fp = fopen(path, "r");
    if (!fp) {
        fprintf(stderr, "psrt predict: %s: %s\n", path, strerror(errno));
        return 1;
    }
    char line[1 << 16], model[64] = "";
    long long features = 33554432;
    while (fgets(line, sizeof line, fp)) {
        sscanf(line, "model: %63s", model);
        sscanf(line, "sparse_features: %lld", &features);
    }
    fclose(fp);
    struct psrt_model m;
    if (psrt_model_init(&m, model, 1, features)) {
        fprintf(stderr, "psrt predict: %s: unknown model '%s'\n", path, model);
        return 1;
    }
    snprintf(path, sizeof path, "%s/variables/variables", vdir);
    struct psrt_tl l;
    struct psrt_err err = {0};
    if (psrt_tl_read_bundle(&l, path, &err)) {
        fprintf(stderr, "psrt predict: %s\n", err.msg);
        return 1;
    }
    float *dense[PSRT_MAX_VARS] = {0};
    struct sparse_lookup sl;
    memset(&sl, 0, sizeof sl);
    for (int v = 0; v < m.nvars; v++) {
        const struct psrt_var *var = &m.vars[v];
        if (var->kind == PSRT_VAR_DENSE) {
            const struct psrt_tensor *t = psrt_tl_find(&l, var->name);
            if (!t || t->len != (size_t)var->n * 4) {
                fprintf(stderr, "psrt predict: %s: variable %s %s\n", path, var->name,
                        t ? "has the wrong size" : "is missing");
                return 1;
            }
            dense[v] = t->data;
            continue;
        }
        psrt_table_init(&sl.t, 1, 0, NULL, 1024);
        char kn[200], vn[200];
        for (int p = 0;; p++) {
            snprintf(kn, sizeof kn, "%s/part_%d/keys", var->name, p);
            snprintf(vn, sizeof vn, "%s/part_%d/values", var->name, p);
            const struct psrt_tensor *kt = psrt_tl_find(&l, kn), *vt = psrt_tl_find(&l, vn);
            if (!kt)
                break;
            if (!vt || vt->len / 4 != kt->len / 8) {
                fprintf(stderr, "psrt predict: %s: %s is missing or the wrong size\n", path, vn);
                return 1;
            }
            const uint64_t *k = kt->data;
            const float *val = vt->data;
            for (size_t i = 0; i < kt->len / 8; i++) {
                float *dst = psrt_table_insert(&sl.t, k[i], NULL);
                if (dst)
                    dst[0] = val[i];
            }
        }
    }
    int lineno = 0;
    while (fgets(line, sizeof line, stdin)) {
        lineno++;
        size_t n = strlen(line);
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = 0;
        if (!n)
            continue;
        char e[512];
        if (m.ops->predict(&m, line, dense, lookup, &sl, stdout, e, sizeof e)) {
            fprintf(stderr, "psrt predict: stdin line %d: %s\n", lineno, e);
            return 1;
        }
    }
    fflush(stdout);
    psrt_tl_free(&l);
    return 0;
}
