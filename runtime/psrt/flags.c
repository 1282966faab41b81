/*
 * flags.c: psrt's command line, shaped like the TensorFlow 1.x scripts of
 * the seed reports (--job_name --task_index --ps_hosts --worker_hosts
 * --train_dir ...), and its --help text, which documents every flag.
 *
 * Flags are --name=value or --name value; booleans also --name / --noname.
 * Unknown flags and bad values fail with one line naming the flag.
 */
#include "runtime/psrt/psrt.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

void psrt_flags_usage(FILE *out)
{
    fputs(
        "usage: psrt --job_name=ps|worker --task_index=N --ps_hosts=H:P,... "
        "--worker_hosts=H:P,...\n"
        "            [--train_dir=DIR] [--model=M] [--optimizer=O] [flags...]\n"
        "       psrt predict --model=DIR           answer queries from stdin with an export\n"
        "                                          (psrt predict --help: the input formats)\n"
        "       psrt inspect PREFIX|DIR|STATEFILE [--values[=N]] [--verify] [--json]\n"
        "                                          list a checkpoint (psrt inspect --help)\n"
        "       psrt bench ...                     benchmark drivers of bench/psrt.sh (psrt bench "
        "--help)\n"
        "\n"
        "A TensorFlow-1.x-shaped between-graph ps/worker training runtime.  ps tasks hold\n"
        "the variables and apply the optimizer; workers compute gradients on synthetic\n"
        "data from a known true model and push/pull asynchronously; worker 0 is the chief:\n"
        "it initialises or restores, saves, reports loss and exports.\n"
        "\n"
        "Flags are --name=value or --name value; the booleans also take --name (true)\n"
        "and --noname (false).  Give every task the same model and training flags: a ps\n"
        "builds its variables and optimizer from its own --model, --optimizer, ...\n"
        "\n"
        "Cluster:\n"
        "  --job_name=ps|worker        role of this process (required)\n"
        "  --task_index=N              index in its job (default 0); worker 0 is the chief\n"
        "  --ps_hosts=H:P,...          every ps task's address (required); port 0 lets a ps\n"
        "                              listen on any free port, which it logs (benchmarks)\n"
        "  --worker_hosts=H:P,...      every worker's address (required; workers do not listen)\n"
        "  --train_dir=DIR             checkpoint directory (default ./train_logs); relative\n"
        "                              to each task's own working directory (its own disk)\n"
        "Model and training:\n"
        "  --model=linear|softmax|sparse_lr   (default linear)\n"
        "        linear:    y = 0.1x + 0.3 regression (S001's toy), target loss 1e-3\n"
        "        softmax:   784-dim inputs, 10 classes (S002's MNIST shape), target loss 0.5\n"
        "        sparse_lr: logistic regression on hashed sparse features (S000, S003),\n"
        "                   target loss 0.55\n"
        "        bench_dense: benchmarks only, one variable of --dense_floats per ps\n"
        "  --optimizer=sgd|adagrad|ftrl|adam  (default per model: adagrad, adagrad, ftrl)\n"
        "  --learning_rate=X           (default per model)\n"
        "  --batch_size=N              examples per step (default per model)\n"
        "  --max_steps=N               stop when the global step reaches N (default 1000)\n"
        "  --sparse_features=N         hashed feature space of sparse_lr (default 33554432)\n"
        "  --dense_floats=N            bench_dense: floats per variable (default 1048576)\n"
        "  --seed=N                    initialisation and data seed (default 1)\n"
        "  --step_delay=SECS           sleep per step on every worker (tests; default 0)\n"
        "  --log_every_steps=N         every worker sends event train.step, and the chief logs\n"
        "                              its loss, every N of its steps, at most 100 times a\n"
        "                              second (default 10)\n"
        "Checkpoints and export:\n"
        "  --save_checkpoint_steps=N   chief saves when the global step advanced N (0 = off)\n"
        "  --save_checkpoint_secs=S    chief saves every S seconds (default 600 when steps\n"
        "                              is 0; 0 or none = off). Saves also at start and end.\n"
        "  --max_to_keep=N             checkpoints kept (default 5)\n"
        "  --checkpoint_protocol=legacy|robust   (default robust)\n"
        "        legacy: TensorFlow 1.x: each ps writes <prefix>_temp_<hex>/part-i-of-n on\n"
        "                its own disk, the last ps merges, the chief writes `checkpoint`;\n"
        "                restore reads each ps's own disk; export writes variables on the ps.\n"
        "        robust: each ps writes its shard durably to <train_dir>/ps<i>/ on its disk,\n"
        "                the chief writes the whole checkpoint durably to <train_dir>/; a\n"
        "                save is reported only when both copies and the state are durable.\n"
        "                A save that fails (disk error, full disk, on a ps or the chief) is\n"
        "                abandoned: every task drops what it wrote of it, the chief logs one\n"
        "                line (event save.failed) and trains on; the next save comes an\n"
        "                interval later.\n"
        "  --max_failed_saves=N        robust: the chief exits 1 when N saves in a row have\n"
        "                              failed (default 3; 0 or 1: at the first, as legacy);\n"
        "                              a save that succeeds resets the count\n"
        "  --failed_saves_secs=S       robust: ...and the first of them failed at least S seconds\n"
        "                              ago (default 0: the count alone), so that frequent saves\n"
        "                              ride out a disk fault of up to S seconds\n"
        "  --finish_retry_secs=S       robust: the final save and the export are tried again\n"
        "                              (after 0.5 s, doubling up to 5 s) for up to S seconds\n"
        "                              before the chief exits 1 (default 10; 0 = no retry)\n"
        "  --sharded_save=true|false   legacy only (default true): TensorFlow's "
        "Saver(sharded=...).\n"
        "                              false, the Supervisor's default Saver: the chief writes "
        "the\n"
        "                              whole checkpoint on its own disk, while restore still runs\n"
        "                              on each ps against its own disk (S004)\n"
        "  --export_dir=DIR            export after training to DIR/<version>/ (default off)\n"
        "  --export_version=N          (default 1)\n"
        "RPC:\n"
        "  --rpc_threads=pool|per_request   (default pool) pool: bounded thread pool;\n"
        "                              per_request: a detached thread per request\n"
        "                              (TensorFlow's SchedClosure; aborts when thread\n"
        "                              creation fails, S003)\n"
        "  --pool_threads=N            handler threads of a ps in pool mode (default 8)\n"
        "  --rpc_timeout_secs=S        a call gives up on a peer silent for S seconds (an\n"
        "                              idle timeout; default 60); saves, restores, snapshots\n"
        "                              and a ps's replies allow 10 times S\n"
        "  --connect_timeout_secs=S    first contact with a peer (default 60)\n"
        "  --reconnect_timeout_secs=S  a peer lost during training (default 120)\n"
        "                              (every timeout is at least 0.001 s)\n"
        "  --ps_exit_on_chief_done=true|false   (default true) the chief tells every ps to\n"
        "                              exit 0 when it finished (a ps first waits, up to\n"
        "                              --connect_timeout_secs, for every worker to have\n"
        "                              called once and heard it); false = serve forever\n"
        "                              like TensorFlow's server.join()\n"
        "\n"
        "Exit status: 0 done; 1 training, save, restore or export failed (one line on\n"
        "stderr naming what and where); 2 bad flags; abort() in per_request mode when a\n"
        "thread cannot be created.\n"
        "\n"
        "Harness hooks:\n"
        "  FAULTLINE_EVENTS=/path.sock  report events (docs/events.md); FAULTLINE_SYNC lists\n"
        "                              kinds sent as sync points ('*' = all)\n"
        "  libfiu fault points (fiu-ctrl -c 'enable name=...' PID, or\n"
        "  PSRT_FIU=name[=errno][@FROM[-TO]],... (only the FROM-th to TO-th check fails);\n"
        "  remote control fifo basename from FIU_CTRL_FIFO or PSRT_FIU_FIFO):\n"
        "    psrt/save/begin psrt/save/shard_write psrt/save/shard_sync psrt/save/merge\n"
        "    psrt/save/chief_write psrt/save/commit psrt/save/state psrt/save/gc\n"
        "    psrt/restore/find psrt/restore/read psrt/restore/load\n"
        "    psrt/export/write psrt/export/signature psrt/rpc/send psrt/rpc/recv\n",
        out);
}

int psrt_flags_hostports(const char *s, struct psrt_hostport **out, int *n)
{
    *out = NULL;
    *n = 0;
    if (!s || !*s)
        return -EINVAL;
    int cap = 1;
    for (const char *p = s; *p; p++)
        cap += *p == ',';
    struct psrt_hostport *hp = calloc((size_t)cap, sizeof *hp);
    if (!hp)
        return -ENOMEM;
    int k = 0;
    const char *p = s;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        const char *colon = NULL;
        for (size_t i = 0; i < len; i++)
            if (p[i] == ':')
                colon = p + i;
        if (!colon || colon == p || (size_t)(colon - p) >= sizeof hp[k].host)
            goto bad;
        memcpy(hp[k].host, p, (size_t)(colon - p));
        char num[16];
        size_t nl = len - (size_t)(colon - p) - 1;
        if (nl == 0 || nl >= sizeof num)
            goto bad;
        memcpy(num, colon + 1, nl);
        num[nl] = 0;
        char *end;
        long port = strtol(num, &end, 10);
        if (*end || port < 0 || port > 65535)
            goto bad;
        hp[k].port = (int)port;
        k++;
        if (!e)
            break;
        p = e + 1;
        if (!*p)
            goto bad;
    }
    *out = hp;
    *n = k;
    return 0;
bad:
    free(hp);
    return -EINVAL;
}

static int parse_ll(const char *v, long long *out, long long min)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end || x < min)
        return -EINVAL;
    *out = x;
    return 0;
}

/* An int flag: min..max (at most INT_MAX, so the value fits). */
static int parse_int(const char *v, int *out, int min, int max)
{
    long long x;
    if (parse_ll(v, &x, min) || x > max)
        return -EINVAL;
    *out = (int)x;
    return 0;
}

/* A non-negative number of seconds; "none" is 0 (off). */
static int parse_double(const char *v, double *out)
{
    char *end;
    if (!strcmp(v, "none") || !strcmp(v, "None")) {
        *out = 0;
        return 0;
    }
    double x = strtod(v, &end);
    if (end == v || *end || !(x >= 0) || x > 1e9) /* !(x >= 0): NaN too */
        return -EINVAL;
    *out = x;
    return 0;
}

/* A timeout: at least 1 ms, poll's resolution (0 would time every call
 * out at once, and so would anything shorter than a millisecond). */
static int parse_timeout(const char *name, const char *v, double *out, char *err, size_t errlen)
{
    if (parse_double(v, out) || *out < 0.001) {
        snprintf(err, errlen, "--%s=%s: expected a number of seconds of at least 0.001", name, v);
        return -EINVAL;
    }
    return 0;
}

static int parse_bool(const char *v, bool *out)
{
    if (!v || !strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "True"))
        *out = true;
    else if (!strcmp(v, "false") || !strcmp(v, "0") || !strcmp(v, "False"))
        *out = false;
    else
        return -EINVAL;
    return 0;
}

static int copy_str(char *dst, size_t cap, const char *v)
{
    if (strlen(v) >= cap)
        return -ENAMETOOLONG;
    strcpy(dst, v);
    return 0;
}

double psrt_flags_bulk_timeout(const struct psrt_flags *f)
{
    return f->rpc_timeout * 10;
}

int64_t psrt_flags_features(const struct psrt_flags *f)
{
    return !strcmp(f->model, "bench_dense") ? f->dense_floats : f->sparse_features;
}

void psrt_flags_layout(const struct psrt_flags *f, char *buf, size_t len)
{
    int n =
        snprintf(buf, len, "model %s over %d ps task%s", f->model, f->nps, f->nps == 1 ? "" : "s");
    if (n < 0 || (size_t)n >= len)
        return;
    if (!strcmp(f->model, "sparse_lr"))
        snprintf(buf + n, len - (size_t)n, ", %" PRId64 " features", f->sparse_features);
    else if (!strcmp(f->model, "bench_dense"))
        snprintf(buf + n, len - (size_t)n, ", %" PRId64 " floats per variable", f->dense_floats);
}

void psrt_flags_free(struct psrt_flags *f)
{
    free(f->ps);
    free(f->workers);
    f->ps = f->workers = NULL;
}

/* Every flag taking a value, and what a bad value should have been (NULL:
 * the flag's own branch says it). */
static const struct {
    const char *name, *expect;
} flag_docs[] = {
    {"job_name", NULL},
    {"task_index", "an integer from 0"},
    {"ps_hosts", NULL},
    {"worker_hosts", NULL},
    {"train_dir", "a non-empty path of at most 1023 bytes"},
    {"model", NULL},
    {"optimizer", NULL},
    {"batch_size", "an integer from 1 to 1000000"},
    {"learning_rate", "a number greater than 0"},
    {"max_steps", "an integer from 0"},
    {"save_checkpoint_steps", "an integer from 0, or none"},
    {"save_checkpoint_secs", "a number of seconds from 0 to 1e9, or none"},
    {"max_to_keep", "an integer from 1"},
    {"max_failed_saves", "an integer from 0"},
    {"finish_retry_secs", "a number of seconds from 0 to 1e9"},
    {"failed_saves_secs", "a number of seconds from 0 to 1e9"},
    {"checkpoint_protocol", NULL},
    {"rpc_threads", NULL},
    {"pool_threads", "an integer from 1 to 1024"},
    {"export_dir", "a path of at most 1023 bytes"},
    {"export_version", "an integer from 0"},
    {"seed", "an integer from 0"},
    {"rpc_timeout_secs", NULL},
    {"connect_timeout_secs", NULL},
    {"reconnect_timeout_secs", NULL},
    {"ps_exit_on_chief_done", "true or false"},
    {"sharded_save", "true or false"},
    {"log_every_steps", "an integer from 1"},
    {"sparse_features", "an integer from 1"},
    {"dense_floats", "an integer from 1"},
    {"step_delay", "a number of seconds from 0 to 1e9"},
};

static int flag_doc(const char *name)
{
    for (size_t i = 0; i < sizeof flag_docs / sizeof flag_docs[0]; i++)
        if (!strcmp(flag_docs[i].name, name))
            return (int)i;
    return -1;
}

int psrt_flags_parse(struct psrt_flags *f, int argc, char **argv, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    f->task = 0;
    strcpy(f->train_dir, "./train_logs");
    strcpy(f->model, "linear");
    f->batch_size = -1;
    f->learning_rate = -1;
    f->max_steps = 1000;
    f->save_secs = -1;
    f->max_to_keep = 5;
    f->max_failed_saves = 3;
    f->finish_retry_secs = 10;
    f->protocol = PSRT_ROBUST;
    f->rpc_threads = PSRT_POOL;
    f->pool_threads = 8;
    f->export_version = 1;
    f->seed = 1;
    f->rpc_timeout = 60;
    f->connect_timeout = 60;
    f->reconnect_timeout = 120;
    f->ps_exit_on_chief_done = true;
    f->sharded_save = true;
    f->log_every = 10;
    f->sparse_features = 33554432;
    f->dense_floats = 1 << 20;
    bool have_ps = false, have_workers = false;
    const char *ps_s = NULL, *w_s = NULL;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0) {
            snprintf(err, errlen, "unexpected argument '%s' (flags are --name=value)", a);
            goto fail;
        }
        char name[64];
        const char *val = NULL;
        const char *eq = strchr(a + 2, '=');
        size_t nl = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        if (nl >= sizeof name) {
            snprintf(err, errlen, "unknown flag '%s'", a);
            goto fail;
        }
        memcpy(name, a + 2, nl);
        name[nl] = 0;
        if (eq)
            val = eq + 1;
        static const char *const booleans[] = {"ps_exit_on_chief_done", "sharded_save", NULL};
        bool is_bool = false;
        for (int b = 0; booleans[b]; b++)
            if (!strcmp(name, booleans[b]) ||
                (!strncmp(name, "no", 2) && !strcmp(name + 2, booleans[b])))
                is_bool = true;
        int doc = flag_doc(name);
        if (doc < 0 && !is_bool) { /* before taking the next argument as its value */
            snprintf(err, errlen, "unknown flag --%s (see psrt --help)", name);
            goto fail;
        }
        if (!val && !is_bool) {
            if (i + 1 >= argc) {
                snprintf(err, errlen, "flag --%s needs a value", name);
                goto fail;
            }
            val = argv[++i];
        }
        int rc = 0;
        long long ll;
        if (!strcmp(name, "job_name")) {
            if (strcmp(val, "ps") && strcmp(val, "worker")) {
                snprintf(err, errlen, "--job_name=%s: expected ps or worker", val);
                goto fail;
            }
            strcpy(f->job, val);
        } else if (!strcmp(name, "task_index")) {
            rc = parse_int(val, &f->task, 0, INT_MAX);
        } else if (!strcmp(name, "ps_hosts")) {
            ps_s = val;
            have_ps = true;
        } else if (!strcmp(name, "worker_hosts")) {
            w_s = val;
            have_workers = true;
        } else if (!strcmp(name, "train_dir")) {
            rc = copy_str(f->train_dir, sizeof f->train_dir, val);
            if (!rc && !*val)
                rc = -EINVAL;
        } else if (!strcmp(name, "model")) {
            if (!psrt_model_find(val)) {
                snprintf(err, errlen,
                         "--model=%s: expected linear, softmax, sparse_lr or bench_dense", val);
                goto fail;
            }
            strcpy(f->model, val);
        } else if (!strcmp(name, "optimizer")) {
            if (psrt_optim_parse(val) < 0) {
                snprintf(err, errlen, "--optimizer=%s: expected sgd, adagrad, ftrl or adam", val);
                goto fail;
            }
            strcpy(f->optimizer, val);
        } else if (!strcmp(name, "batch_size")) {
            rc = parse_int(val, &f->batch_size, 1, 1000000);
        } else if (!strcmp(name, "learning_rate")) {
            rc = parse_double(val, &f->learning_rate);
            if (!rc && f->learning_rate <= 0)
                rc = -EINVAL;
        } else if (!strcmp(name, "max_steps")) {
            rc = parse_ll(val, &f->max_steps, 0);
        } else if (!strcmp(name, "save_checkpoint_steps")) {
            if (!strcmp(val, "none") || !strcmp(val, "None"))
                f->save_steps = 0;
            else
                rc = parse_ll(val, &f->save_steps, 0);
        } else if (!strcmp(name, "save_checkpoint_secs")) {
            rc = parse_double(val, &f->save_secs);
        } else if (!strcmp(name, "max_to_keep")) {
            rc = parse_int(val, &f->max_to_keep, 1, INT_MAX);
        } else if (!strcmp(name, "max_failed_saves")) {
            rc = parse_int(val, &f->max_failed_saves, 0, INT_MAX);
        } else if (!strcmp(name, "failed_saves_secs")) {
            rc = parse_double(val, &f->failed_saves_secs);
        } else if (!strcmp(name, "finish_retry_secs")) {
            rc = parse_double(val, &f->finish_retry_secs);
        } else if (!strcmp(name, "checkpoint_protocol")) {
            if (!strcmp(val, "legacy"))
                f->protocol = PSRT_LEGACY;
            else if (!strcmp(val, "robust"))
                f->protocol = PSRT_ROBUST;
            else {
                snprintf(err, errlen, "--checkpoint_protocol=%s: expected legacy or robust", val);
                goto fail;
            }
        } else if (!strcmp(name, "rpc_threads")) {
            if (!strcmp(val, "pool"))
                f->rpc_threads = PSRT_POOL;
            else if (!strcmp(val, "per_request"))
                f->rpc_threads = PSRT_PER_REQUEST;
            else {
                snprintf(err, errlen, "--rpc_threads=%s: expected pool or per_request", val);
                goto fail;
            }
        } else if (!strcmp(name, "pool_threads")) {
            rc = parse_int(val, &f->pool_threads, 1, 1024);
        } else if (!strcmp(name, "export_dir")) {
            rc = copy_str(f->export_dir, sizeof f->export_dir, val);
        } else if (!strcmp(name, "export_version")) {
            rc = parse_int(val, &f->export_version, 0, INT_MAX);
        } else if (!strcmp(name, "seed")) {
            rc = parse_ll(val, &ll, 0);
            f->seed = (uint64_t)ll;
        } else if (!strcmp(name, "rpc_timeout_secs")) {
            if (parse_timeout(name, val, &f->rpc_timeout, err, errlen))
                goto fail;
        } else if (!strcmp(name, "connect_timeout_secs")) {
            if (parse_timeout(name, val, &f->connect_timeout, err, errlen))
                goto fail;
        } else if (!strcmp(name, "reconnect_timeout_secs")) {
            if (parse_timeout(name, val, &f->reconnect_timeout, err, errlen))
                goto fail;
        } else if (!strcmp(name, "ps_exit_on_chief_done")) {
            rc = parse_bool(val, &f->ps_exit_on_chief_done);
        } else if (!strcmp(name, "nops_exit_on_chief_done")) {
            f->ps_exit_on_chief_done = false;
        } else if (!strcmp(name, "sharded_save")) {
            rc = parse_bool(val, &f->sharded_save);
        } else if (!strcmp(name, "nosharded_save")) {
            f->sharded_save = false;
        } else if (!strcmp(name, "log_every_steps")) {
            rc = parse_ll(val, &f->log_every, 1);
        } else if (!strcmp(name, "sparse_features")) {
            rc = parse_ll(val, &ll, 1);
            f->sparse_features = ll;
        } else if (!strcmp(name, "dense_floats")) {
            rc = parse_ll(val, &ll, 1);
            f->dense_floats = ll;
        } else if (!strcmp(name, "step_delay")) {
            rc = parse_double(val, &f->step_delay);
        } else {
            snprintf(err, errlen, "unknown flag --%s (see psrt --help)", name);
            goto fail;
        }
        if (rc) {
            const char *expect = doc >= 0 ? flag_docs[doc].expect : NULL;
            snprintf(err, errlen, "--%s=%s: bad value%s%s", name, val ? val : "",
                     expect ? ": expected " : "", expect ? expect : "");
            goto fail;
        }
    }
    if (!f->job[0]) {
        snprintf(err, errlen, "--job_name is required (ps or worker)");
        goto fail;
    }
    if (!have_ps || psrt_flags_hostports(ps_s, &f->ps, &f->nps)) {
        snprintf(err, errlen, "--ps_hosts=%s: expected host:port[,host:port...]",
                 have_ps ? ps_s : "(missing)");
        goto fail;
    }
    if (!have_workers || psrt_flags_hostports(w_s, &f->workers, &f->nworkers)) {
        snprintf(err, errlen, "--worker_hosts=%s: expected host:port[,host:port...]",
                 have_workers ? w_s : "(missing)");
        goto fail;
    }
    /* every ps listens on its own address: one listed twice would be one
     * process answering as two ps tasks; a worker cannot reach port 0 */
    for (int i = 0; i < f->nps; i++) {
        if (f->ps[i].port == 0 && !strcmp(f->job, "worker")) {
            snprintf(err, errlen,
                     "--ps_hosts=%s: ps task %d has port 0: give the port it "
                     "listens on",
                     ps_s, i);
            goto fail;
        }
        for (int j = i + 1; j < f->nps; j++)
            if (f->ps[i].port && f->ps[i].port == f->ps[j].port &&
                !strcmp(f->ps[i].host, f->ps[j].host)) {
                snprintf(err, errlen, "--ps_hosts=%s: %s:%d is listed twice (ps tasks %d and %d)",
                         ps_s, f->ps[i].host, f->ps[i].port, i, j);
                goto fail;
            }
    }
    int n = !strcmp(f->job, "ps") ? f->nps : f->nworkers;
    if (f->task >= n) {
        snprintf(err, errlen, "--task_index=%d: job %s has only %d task%s", f->task, f->job, n,
                 n == 1 ? "" : "s");
        goto fail;
    }
    const struct psrt_model_ops *m = psrt_model_find(f->model);
    if (!f->optimizer[0])
        strcpy(f->optimizer, m->default_optimizer);
    if (f->learning_rate < 0)
        f->learning_rate = m->default_lr;
    if (f->batch_size < 0)
        f->batch_size = m->default_batch;
    if (f->save_secs < 0)
        f->save_secs = f->save_steps > 0 ? 0 : 600;
    return 0;
fail:
    psrt_flags_free(f);
    return -EINVAL;
}
