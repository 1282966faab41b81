/*
 * bench.c: `psrt bench ...`, the measuring drivers behind bench/psrt.sh.
 * Each prints one line of key=value results on stdout; bench/psrt.sh starts
 * the ps tasks, runs the baselines and prints the BENCH lines.
 *
 * Usage: see `usage` below (psrt bench --help).
 */
#include "runtime/psrt/worker.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static const char *arg(int argc, char **argv, const char *name, const char *def)
{
    size_t l = strlen(name);
    for (int i = 1; i < argc; i++)
        if (!strncmp(argv[i], name, l) && argv[i][l] == '=')
            return argv[i] + l + 1;
    return def;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ---- table ------------------------------------------------------------- */

static int bench_table(int argc, char **argv)
{
    size_t n = (size_t)atoll(arg(argc, argv, "--keys", "5000000"));
    struct psrt_table t;
    if (psrt_table_init(&t, 1, 0, NULL, 1 << 16))
        return 1;
    struct psrt_optim o;
    psrt_optim_default(&o, PSRT_OPT_SGD, 0.1f);
    uint64_t *keys = malloc(n * 8);
    float *g = malloc(n * 4);
    uint32_t *idx = malloc(n * 4);
    if (!keys || !g || !idx)
        return 1;
    for (size_t i = 0; i < n; i++) {
        keys[i] = psrt_mix64(i * 0x9e3779b97f4a7c15ull + 17);
        g[i] = 1e-3f;
    }
    double t0 = psrt_now();
    psrt_table_push(&t, &o, keys, g, n, NULL); /* inserts */
    double t1 = psrt_now();
    /* shuffle the update order */
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = psrt_mix64(i) % (i + 1);
        uint64_t k = keys[i];
        keys[i] = keys[j];
        keys[j] = k;
    }
    double t2 = psrt_now();
    psrt_table_push(&t, &o, keys, g, n, NULL); /* updates */
    double t3 = psrt_now();
    psrt_table_clear(&t);
    double tw0 = psrt_now();
    psrt_table_push(&t, &o, keys, g, n, NULL); /* inserts into a warm table */
    double tw1 = psrt_now();
    float *out = malloc(n * 4);
    double tp0 = psrt_now();
    psrt_table_pull(&t, keys, n, out);
    double tp1 = psrt_now();
    free(out);
    /* the baseline: random updates of a plain array as large as the table's
     * entry array (16 bytes a row), with the same prefetching */
    size_t rows = (size_t)t.mask + 1;
    struct {
        uint64_t k;
        float pad, v;
    } *big = calloc(rows, 16);
    if (!big)
        return 1;
    for (size_t i = 0; i < n; i++)
        idx[i] = (uint32_t)(psrt_mix64(keys[i]) & (rows - 1));
    for (size_t i = 0; i < rows; i += 256)
        big[i].v = 0; /* fault the pages in first, as the table's are */
    double t4 = psrt_now();
    for (size_t i = 0; i < n; i++) {
        if (i + 16 < n)
            __builtin_prefetch(&big[idx[i + 16]], 1);
        big[idx[i]].v -= 0.1f * g[i];
    }
    double t5 = psrt_now();
    free(big);
    printf("insert_per_s=%.0f warm_insert_per_s=%.0f update_per_s=%.0f lookup_per_s=%.0f "
           "array_update_per_s=%.0f\n",
           (double)n / (t1 - t0), (double)n / (tw1 - tw0), (double)n / (t3 - t2),
           (double)n / (tp1 - tp0), (double)n / (t5 - t4));
    return 0;
}

/* ---- growth pauses ---------------------------------------------------------- */

/* Keys inserted one at a time into a fresh table for 2^16 rows, as a ps's
 * (2^17 slots; it grows 7 times on the way to 10M), each insert timed (wall clock).
 * A preemption of this thread on a busy machine would count as the
 * insert's pause, so the same inserts run R times, each on a fresh table
 * (its memory faulted in again), and an insert's time is the least of its
 * R: a preemption rarely hits the same insert in every run, while the
 * table's own work (a growth, the slots an insert moves, the pages it
 * touches first) is there each time.  max_insert_ms is the longest of
 * those; max_insert_wall_ms the longest seen in any run, preemptions and
 * all.  The baseline: one copy of the final entry array into fresh
 * memory, the least a rehash of the whole table at once costs. */
static int bench_grow(int argc, char **argv)
{
    size_t n = (size_t)atoll(arg(argc, argv, "--keys", "10000000"));
    int runs = atoi(arg(argc, argv, "--runs", "3"));
    float *best = malloc((n ? n : 1) * sizeof *best); /* ms */
    if (!best || runs < 1)
        return runs < 1 ? 2 : 1;
    double worst_wall = 0, copy = 0, rate = 0, t0, prev;
    int growths = 0;
    uint64_t slots = 0;
    for (int r = 0; r < runs; r++) {
        struct psrt_table t;
        if (psrt_table_init(&t, 1, 0, NULL, 1 << 16))
            return 1;
        const int bits0 = t.bits;
        t0 = prev = psrt_now();
        for (size_t i = 0; i < n; i++) {
            float *v = psrt_table_insert(&t, psrt_mix64(i * 0x9e3779b97f4a7c15ull + 5), NULL);
            double now = psrt_now();
            if (!v) {
                fprintf(stderr, "psrt bench grow: out of memory at key %zu\n", i);
                return 1;
            }
            *v -= 0.1f;
            float ms = (float)((now - prev) * 1e3);
            best[i] = r == 0 || ms < best[i] ? ms : best[i];
            worst_wall = now - prev > worst_wall ? now - prev : worst_wall;
            prev = now;
        }
        double rr = (double)n / (psrt_now() - t0);
        rate = rr > rate ? rr : rate;
        growths = t.bits - bits0;
        slots = t.mask + 1;
        if (r == runs - 1) { /* the baseline */
            size_t bytes = ((size_t)t.mask + 1) * sizeof(struct psrt_entry);
            void *dst =
                mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (dst == MAP_FAILED)
                return 1;
            madvise(dst, bytes, MADV_HUGEPAGE);
            double c0 = psrt_now();
            memcpy(dst, t.e, bytes);
            copy = psrt_now() - c0;
            munmap(dst, bytes);
        }
        psrt_table_free(&t);
    }
    size_t at = 0;
    for (size_t i = 1; i < n; i++)
        at = best[i] > best[at] ? i : at;
    printf("keys=%zu runs=%d growths=%d slots=%llu max_insert_ms=%.3f max_insert_at=%zu "
           "max_insert_wall_ms=%.3f insert_per_s=%.0f copy_table_ms=%.1f\n",
           n, runs, growths, (unsigned long long)slots, n ? best[at] : 0.0, at, worst_wall * 1e3,
           rate, copy * 1e3);
    free(best);
    return 0;
}

/* ---- sparse push/pull ------------------------------------------------------ */

static int parse_flags(struct psrt_flags *f, const char *ps_hosts, const char *model,
                       const char *opt, const char *extra)
{
    char line[4096], err[512];
    snprintf(line, sizeof line,
             "--job_name=worker --ps_hosts=%s --worker_hosts=127.0.0.1:1 --model=%s "
             "--optimizer=%s --connect_timeout_secs=20 --rpc_timeout_secs=600 %s",
             ps_hosts, model, opt, extra ? extra : "");
    char *argv[32];
    int argc = 0;
    argv[argc++] = "psrt";
    for (char *t = strtok(line, " "); t && argc < 31; t = strtok(NULL, " "))
        argv[argc++] = t;
    if (psrt_flags_parse(f, argc, argv, err, sizeof err)) {
        fprintf(stderr, "psrt bench: %s\n", err);
        return -EINVAL;
    }
    return 0;
}

/* A required flag: its value, or NULL after saying that it is missing. */
static const char *required(int argc, char **argv, const char *bench, const char *flag,
                            const char *what)
{
    const char *v = arg(argc, argv, flag, NULL);
    if (!v)
        fprintf(stderr, "psrt bench %s: %s=%s is required (see psrt bench --help)\n", bench, flag,
                what);
    return v;
}

/* A benchmark's worker, the flags it points to, its last error, and the
 * exit status when setting it up failed. */
struct bench {
    struct psrt_flags f;
    struct psrt_worker w;
    struct psrt_err err;
    int status;
};

/* b's worker of the ps tasks at hosts (running model with sgd; extra: more
 * flags, parse_flags), connected and, with open_vars, its variables
 * initialised and open; NULL when that failed: b->status 2 (bad flags) or
 * 1 (said on stderr). */
static struct psrt_worker *bench_worker(struct bench *b, const char *hosts, const char *model,
                                        const char *extra, bool open_vars)
{
    struct psrt_worker *w = &b->w;
    b->err = (struct psrt_err){0};
    b->status = 2;
    if (parse_flags(&b->f, hosts, model, "sgd", extra))
        return NULL;
    b->status = 1;
    if (psrt_worker_setup(w, &b->f, &b->err) || psrt_worker_connect(w, &b->err) ||
        (open_vars && (psrt_worker_init_all(w, &b->err) || psrt_worker_open_all(w, &b->err)))) {
        fprintf(stderr, "psrt bench: %s\n", b->err.msg);
        return NULL;
    }
    return w;
}

static int bench_sparse(int argc, char **argv)
{
    const char *hosts = required(argc, argv, "sparse", "--ps_hosts", "H:P,...");
    size_t n = (size_t)atoll(arg(argc, argv, "--pairs", "10000000"));
    int reps = atoi(arg(argc, argv, "--reps", "3"));
    int streamed = atoi(arg(argc, argv, "--stream", "1"));
    struct bench bw;
    if (!hosts)
        return 2;
    if (reps < 1) {
        fprintf(stderr, "psrt bench sparse: --reps=%s: expected an integer from 1\n",
                arg(argc, argv, "--reps", ""));
        return 2;
    }
    struct psrt_worker *w = bench_worker(&bw, hosts, "sparse_lr", NULL, false);
    if (!w)
        return bw.status;
    int nps = w->nps;
    uint64_t *keys = malloc(n * 8);
    float *g = malloc(n * 4), *vals = malloc(n * 4);
    uint64_t **pk = calloc((size_t)nps, sizeof *pk);
    float **pg = calloc((size_t)nps, sizeof *pg);
    uint32_t **pi = calloc((size_t)nps, sizeof *pi);
    size_t *pn = calloc((size_t)nps, sizeof *pn);
    for (int p = 0; p < nps; p++) {
        pk[p] = malloc(n * 8);
        pg[p] = malloc(n * 4);
        pi[p] = malloc(n * 4);
    }
    for (size_t i = 0; i < n; i++) {
        keys[i] = psrt_mix64(i + 0xabcdef);
        g[i] = (float)(i % 7) * 0.01f;
    }
    /* this driver's own split buffers are touched first, so that the first
     * push (cold_push_ms) is what a fresh ps costs, not a fresh driver */
    for (int p = 0; p < nps; p++) {
        memset(pk[p], 0, n * 8);
        memset(pg[p], 0, n * 4);
        memset(pi[p], 0, n * 4);
    }
    /* dense variables each ps holds (sparse_lr/bias on one of them) */
    size_t dense_floats[256] = {0};
    for (int v = 0; v < w->m.nvars; v++)
        if (w->m.vars[v].kind == PSRT_VAR_DENSE)
            dense_floats[w->m.vars[v].ps] += (size_t)w->m.vars[v].n;
    double push_t[64], pull_t[64], sink_t[64];
    static struct psrt_buf rbuf[256];
    static const uint64_t zero[8];
    int bad_values = 0;
    for (int rep = 0; rep < reps && rep < 64; rep++) {
        if (psrt_worker_init_all(w, &bw.err) || psrt_worker_open_all(w, &bw.err)) {
            fprintf(stderr, "psrt bench: %s\n", bw.err.msg);
            return 1;
        }
        double t0 = psrt_now(), tpart = t0;
        int nm = 0;
        if (streamed) {
            struct iovec dense[256];
            uint32_t nd[256];
            for (int p = 0; p < nps; p++) {
                dense[p] = (struct iovec){(void *)zero, dense_floats[p] * 4};
                nd[p] = dense_floats[p] ? 1 : 0;
            }
            struct psrt_call pc[256];
            int bad = psrt_worker_push_stream(w, keys, g, n, dense, nd, pk, pg, pi, pn, pc);
            if (bad >= 0) {
                fprintf(stderr, "psrt bench: push: %s\n", pc[bad].err.msg);
                return 1;
            }
            nm = nps;
        } else {
            /* the whole split first, then one message per ps */
            psrt_split_keys(keys, g, n, nps, pk, pg, pi, pn);
            tpart = psrt_now();
            struct psrt_mcall mc[256];
            struct psrt_err merr[256];
            struct psrt_push_hdr hdr[256];
            struct iovec miov[256][5];
            for (int p = 0; p < nps; p++) {
                hdr[nm].nkeys = pn[p];
                hdr[nm].ndense = dense_floats[p] ? 1 : 0;
                hdr[nm].pad = 0;
                int k = 0;
                miov[nm][k++] = (struct iovec){&hdr[nm], 16};
                if (hdr[nm].ndense) {
                    size_t db = dense_floats[p] * 4;
                    miov[nm][k++] = (struct iovec){(void *)zero, db};
                    if (db % 8)
                        miov[nm][k++] = (struct iovec){(void *)zero, 8 - db % 8};
                }
                miov[nm][k++] = (struct iovec){pk[p], pn[p] * 8};
                miov[nm][k++] = (struct iovec){pg[p], pn[p] * 4};
                mc[nm] = (struct psrt_mcall){.c = w->conn[p],
                                             .op = PSRT_OP_PUSH,
                                             .iov = miov[nm],
                                             .niov = k,
                                             .resp = &rbuf[nm],
                                             .err = &merr[nm]};
                nm++;
            }
            int rc = psrt_conn_multi(mc, nm, 600);
            for (int i = 0; i < nm; i++)
                if (rc || mc[i].rc || mc[i].status) {
                    fprintf(stderr, "psrt bench: push: %s\n",
                            mc[i].rc ? merr[i].msg : "refused by the ps");
                    return 1;
                }
        }
        double t1 = psrt_now();
        if (psrt_bench_debug())
            fprintf(stderr, "%s: partition %.1f ms, push calls %.1f ms (%d messages)\n",
                    streamed ? "streamed" : "whole", (tpart - t0) * 1e3, (t1 - tpart) * 1e3, nm);
        struct psrt_call calls[256];
        int bad;
        /* pull the same keys back, into the caller's order */
        uint64_t nk[256];
        for (int p = 0; p < nps; p++) {
            nk[p] = pn[p];
            calls[p] = (struct psrt_call){.ps = p, .op = PSRT_OP_PULL};
            calls[p].iov[0] = (struct iovec){&nk[p], 8};
            calls[p].iov[1] = (struct iovec){pk[p], pn[p] * 8};
            calls[p].niov = 2;
        }
        bad = psrt_worker_calls(w, calls, nps);
        if (bad >= 0) {
            fprintf(stderr, "psrt bench: pull: %s\n", calls[bad].err.msg);
            return 1;
        }
        for (int p = 0; p < nps; p++) {
            struct psrt_buf *b = &w->resp[p];
            b->off = 0;
            psrt_buf_get_u64(b);
            psrt_buf_get_u32(b);
            psrt_buf_skip_align8(b);
            psrt_buf_get(b, dense_floats[p] * 4);
            const float *v = psrt_buf_get(b, pn[p] * 4);
            if (!v) {
                fprintf(stderr, "psrt bench: short pull reply\n");
                return 1;
            }
            const uint32_t *ix = pi[p];
            for (size_t j = 0; j < pn[p]; j++)
                vals[ix[j]] = v[j];
        }
        double t2 = psrt_now();
        push_t[rep] = t1 - t0;
        pull_t[rep] = t2 - t1;
        /* the baseline: the same bytes sent to the same ps tasks, discarded
         * there (transport only: no partitioning, no table) */
        for (int p = 0; p < nps; p++) {
            calls[p] = (struct psrt_call){.ps = p, .op = PSRT_OP_BENCH_SINK};
            calls[p].iov[0] = (struct iovec){pk[p], pn[p] * 8};
            calls[p].iov[1] = (struct iovec){pg[p], pn[p] * 4};
            calls[p].niov = 2;
        }
        double t3 = psrt_now();
        bad = psrt_worker_calls(w, calls, nps);
        sink_t[rep] = psrt_now() - t3;
        if (bad >= 0) {
            fprintf(stderr, "psrt bench: sink: %s\n", calls[bad].err.msg);
            return 1;
        }
        /* check: SGD with lr 1.0 from zero gives -g */
        for (size_t i = 0; i < n; i += 9973)
            bad_values += vals[i] != -bw.f.learning_rate * g[i] &&
                          vals[i] != (float)(-(double)(float)bw.f.learning_rate * g[i]);
    }
    if (reps > 64)
        reps = 64;
    /* the first push met fresh ps tasks (if they were: see --help); the
     * later ones tables cleared by init, their memory kept */
    double cold = push_t[0], warm = 0;
    if (reps > 1) {
        qsort(push_t + 1, (size_t)reps - 1, sizeof(double), cmp_double);
        warm = push_t[1 + (reps - 1) / 2];
    }
    qsort(push_t, (size_t)reps, sizeof(double), cmp_double);
    qsort(pull_t, (size_t)reps, sizeof(double), cmp_double);
    qsort(sink_t, (size_t)reps, sizeof(double), cmp_double);
    printf("pairs=%zu push_ms=%.1f pull_ms=%.1f transfer_ms=%.1f cold_push_ms=%.1f "
           "warm_push_ms=%.1f bad_values=%d\n",
           n, push_t[reps / 2] * 1e3, pull_t[reps / 2] * 1e3, sink_t[reps / 2] * 1e3, cold * 1e3,
           warm * 1e3, bad_values);
    return bad_values ? 1 : 0;
}

/* ---- dense pull + push -------------------------------------------------------- */

static int bench_dense(int argc, char **argv)
{
    const char *hosts = required(argc, argv, "dense", "--ps_hosts", "H:P,...");
    double secs = atof(arg(argc, argv, "--secs", "3"));
    char extra[128];
    struct bench bw;
    snprintf(extra, sizeof extra, "--dense_floats=%s",
             arg(argc, argv, "--dense_floats", "4194304"));
    if (!hosts)
        return 2;
    struct psrt_worker *w = bench_worker(&bw, hosts, "bench_dense", extra, true);
    if (!w)
        return bw.status;
    int nps = w->nps;
    size_t floats[256] = {0};
    float *grad[256] = {0};
    for (int v = 0; v < w->m.nvars; v++)
        floats[w->m.vars[v].ps] += (size_t)w->m.vars[v].n;
    for (int p = 0; p < nps; p++) {
        grad[p] = malloc(floats[p] * 4 + 8);
        for (size_t i = 0; i < floats[p]; i++)
            grad[p][i] = 1e-6f;
    }
    uint64_t bytes = 0, rounds = 0, zero = 0;
    /* Each round: push the gradients to every ps and pull every variable,
     * both pipelined on each ps's connection (the ps answers in order, so
     * the pull sees the push), all ps at once. */
    static struct psrt_buf rb[512];
    struct psrt_mcall mc[512];
    struct psrt_err merr[512];
    struct iovec piov[256][3], liov[256][1];
    struct psrt_push_hdr hdr[256];
    for (int p = 0; p < nps; p++) {
        hdr[p].nkeys = 0;
        hdr[p].ndense = floats[p] ? 1 : 0;
        hdr[p].pad = 0;
        piov[p][0] = (struct iovec){&hdr[p], 16};
        piov[p][1] = (struct iovec){grad[p], floats[p] * 4};
        piov[p][2] = (struct iovec){&zero, (floats[p] * 4) % 8 ? 4 : 0};
        liov[p][0] = (struct iovec){&zero, 8};
    }
    double t0 = psrt_now(), t = t0;
    while (t - t0 < secs) {
        int n = 0;
        for (int p = 0; p < nps; p++) {
            mc[n] = (struct psrt_mcall){.c = w->conn[p],
                                        .op = PSRT_OP_PUSH,
                                        .iov = piov[p],
                                        .niov = 3,
                                        .resp = &rb[n],
                                        .err = &merr[n]};
            n++;
            mc[n] = (struct psrt_mcall){.c = w->conn[p],
                                        .op = PSRT_OP_PULL,
                                        .iov = liov[p],
                                        .niov = 1,
                                        .resp = &rb[n],
                                        .err = &merr[n]};
            n++;
        }
        int rc = psrt_conn_multi(mc, n, 60);
        for (int i = 0; i < n; i++) {
            if (rc || mc[i].rc || mc[i].status) {
                fprintf(stderr, "psrt bench: %s: %s\n", psrt_op_name(mc[i].op),
                        mc[i].rc ? merr[i].msg : "refused");
                return 1;
            }
            bytes += mc[i].op == PSRT_OP_PULL ? rb[i].len : 16 + floats[i / 2] * 4;
        }
        rounds++;
        t = psrt_now();
    }
    printf("rounds=%llu bytes=%llu secs=%.3f gbit_per_s=%.3f\n", (unsigned long long)rounds,
           (unsigned long long)bytes, t - t0, (double)bytes * 8 / (t - t0) / 1e9);
    return 0;
}

/* ---- robust save and restore ---------------------------------------------------- */

static int bench_robust(int argc, char **argv)
{
    const char *hosts = required(argc, argv, "robust", "--ps_hosts", "H:P,...");
    const char *dir = hosts ? required(argc, argv, "robust", "--train_dir", "DIR") : NULL;
    if (!hosts || !dir)
        return 2;
    char extra[2048];
    struct bench bw;
    snprintf(extra, sizeof extra, "--dense_floats=%s --train_dir=%s --checkpoint_protocol=robust",
             arg(argc, argv, "--dense_floats", "67108864"), dir);
    struct psrt_worker *w = bench_worker(&bw, hosts, "bench_dense", extra, true);
    if (!w)
        return bw.status;
    uint64_t bytes = 0;
    for (int v = 0; v < w->m.nvars; v++)
        bytes += (uint64_t)w->m.vars[v].n * 4;
    const char *phase = arg(argc, argv, "--phase", "all");
    bool do_save = strcmp(phase, "restore") != 0, do_restore = strcmp(phase, "save") != 0;
    double save_s = 0, second_s = 0, restore_s = 0;
    if (do_save) {
        if (psrt_worker_init_all(w, &bw.err)) {
            fprintf(stderr, "psrt bench: %s\n", bw.err.msg);
            return 1;
        }
        double t0 = psrt_now();
        if (psrt_save_robust(w, 1, &bw.err)) {
            fprintf(stderr, "psrt bench: save: %s\n", bw.err.msg);
            return 1;
        }
        double t1 = psrt_now();
        /* a second save: the steady state of a long run (buffers reused) */
        if (psrt_save_robust(w, 2, &bw.err)) {
            fprintf(stderr, "psrt bench: save: %s\n", bw.err.msg);
            return 1;
        }
        save_s = t1 - t0;
        second_s = psrt_now() - t1;
    }
    if (do_restore) {
        long long step = -1;
        double t2 = psrt_now();
        int r = psrt_restore_latest(w, &step, &bw.err);
        restore_s = psrt_now() - t2;
        if (r != 1) {
            fprintf(stderr, "psrt bench: restore: %s\n", r ? bw.err.msg : "no checkpoint found");
            return 1;
        }
    }
    printf("bytes=%llu save_s=%.3f second_save_s=%.3f restore_s=%.3f\n", (unsigned long long)bytes,
           save_s, second_s, restore_s);
    return 0;
}

static const char usage[] =
    "usage: psrt bench table|grow|sparse|dense|robust [--flag=value ...]\n"
    "\n"
    "  psrt bench table [--keys=N]                       (default 5000000)\n"
    "      one core: sparse SGD updates per second on a ps's row table\n"
    "      (existing rows), against the same number of random-access updates\n"
    "      of a plain float array (the memory-bound ceiling).\n"
    "  psrt bench grow [--keys=N] [--runs=R]             (defaults 10000000, 3)\n"
    "      N keys inserted one at a time into a fresh table for 2^16 rows (a\n"
    "      ps's), each insert timed, R runs on fresh tables: the longest\n"
    "      insert (max_insert_ms, growth work included; each insert's time\n"
    "      the least of its R, so that preemptions drop out) against one\n"
    "      copy of the final entry array into fresh memory (copy_table_ms,\n"
    "      the least a whole rehash costs).\n"
    "  psrt bench sparse --ps_hosts=H:P,... [--pairs=N] [--reps=R] [--stream=1|0]\n"
    "                   (defaults 10000000 pairs, 3 reps, --stream=1)\n"
    "      one worker pushes N (uint64 key, float32 gradient) pairs spread\n"
    "      over the ps tasks (SGD applied there), then pulls the N values back\n"
    "      into the caller's order; median of R runs, each on fresh tables.\n"
    "      Also the first push alone (cold_push_ms: on ps tasks started for\n"
    "      this run, their tables not grown yet; this driver's own buffers\n"
    "      are touched beforehand) and the median of the later ones\n"
    "      (warm_push_ms: tables cleared by init, memory kept).\n"
    "      The push is streamed (psrt_worker_push_stream), or with --stream=0\n"
    "      split whole first and sent as one message per ps.\n"
    "      The ps tasks run --model=sparse_lr --optimizer=sgd.\n"
    "  psrt bench dense --ps_hosts=H:P,... [--dense_floats=N] [--secs=S]\n"
    "                  (defaults 4194304 floats, as the ps tasks' own, and 3 s)\n"
    "      push + pull of every dense variable (bench_dense, one per ps),\n"
    "      pipelined on each connection, all ps at once, in a loop for S\n"
    "      seconds: payload bytes per second.\n"
    "  psrt bench robust --ps_hosts=H:P,... --train_dir=D [--dense_floats=N]\n"
    "                    [--phase=save|restore|all]\n"
    "                   (defaults 67108864 floats, as the ps tasks' own, and all)\n"
    "      save: two robust saves of the whole model (each ps's shard durable\n"
    "      on its disk and the whole checkpoint durable on the chief's);\n"
    "      restore: one robust restore (each ps from its own copy): seconds.\n";

/* The flags each benchmark takes; anything else is a mistake to report,
 * not to ignore. */
static const struct {
    const char *bench, *flags[6];
} known[] = {
    {"table", {"--keys"}},
    {"grow", {"--keys", "--runs"}},
    {"sparse", {"--ps_hosts", "--pairs", "--reps", "--stream"}},
    {"dense", {"--ps_hosts", "--dense_floats", "--secs"}},
    {"robust", {"--ps_hosts", "--dense_floats", "--train_dir", "--phase"}},
};

int psrt_bench_main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage, stdout);
            return 0;
        }
    if (argc < 2) {
        fputs(usage, stderr);
        return 2;
    }
    for (size_t b = 0; b < sizeof known / sizeof known[0]; b++) {
        if (strcmp(argv[1], known[b].bench))
            continue;
        for (int i = 2; i < argc; i++) {
            const char *eq = strchr(argv[i], '=');
            bool ok = false;
            for (int k = 0; eq && k < 6 && known[b].flags[k]; k++)
                ok = ok || (strlen(known[b].flags[k]) == (size_t)(eq - argv[i]) &&
                            !strncmp(argv[i], known[b].flags[k], (size_t)(eq - argv[i])));
            if (!ok) {
                fprintf(stderr, "psrt bench %s: unknown argument '%s' (see psrt bench --help)\n",
                        argv[1], argv[i]);
                return 2;
            }
        }
    }
    psrt_log_init("bench", 0);
    if (!strcmp(argv[1], "table"))
        return bench_table(argc - 1, argv + 1);
    if (!strcmp(argv[1], "grow"))
        return bench_grow(argc - 1, argv + 1);
    if (!strcmp(argv[1], "sparse"))
        return bench_sparse(argc - 1, argv + 1);
    if (!strcmp(argv[1], "dense"))
        return bench_dense(argc - 1, argv + 1);
    if (!strcmp(argv[1], "robust"))
        return bench_robust(argc - 1, argv + 1);
    fprintf(stderr, "psrt bench: unknown benchmark '%s'\n", argv[1]);
    return 2;
}
