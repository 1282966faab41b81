/*
 * model_bench.c: bench_dense, a model for benchmarks only: one dense
 * float variable of --dense_floats elements per ps task (bench/w<i>, placed
 * round robin after global_step, so every ps holds one), zeros, no data.
 * Its "gradient" is a constant 1e-6, so that pushes change the variables.
 */
#include "runtime/psrt/psrt.h"

#include <errno.h>
#include <string.h>

static void define(struct psrt_model *m)
{
    int n = m->nps < PSRT_MAX_VARS ? m->nps : PSRT_MAX_VARS;
    for (int i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "bench/w%d", i);
        psrt_model_add_var(m, name, PSRT_VAR_DENSE, 1, m->features, 0, PSRT_INIT_ZERO, 0);
    }
}

static int batch(const struct psrt_model *m, struct psrt_batch *b, int n, uint64_t seed)
{
    (void)m;
    (void)seed;
    b->n = n;
    return 0;
}

static double grad(const struct psrt_model *m, const struct psrt_batch *b, float *const *dense,
                   const float *sparse, float **dgrad, float *sgrad)
{
    (void)b;
    (void)dense;
    (void)sparse;
    (void)sgrad;
    for (int v = 0; v < m->nvars; v++)
        for (int64_t j = 0; j < m->vars[v].n; j++)
            dgrad[v][j] = 1e-6f;
    return 0;
}

static int predict(const struct psrt_model *m, const char *line, float *const *dense,
                   float (*lookup)(void *, uint64_t), void *ctx, FILE *out, char *err,
                   size_t errlen)
{
    (void)m;
    (void)line;
    (void)dense;
    (void)lookup;
    (void)ctx;
    (void)out;
    snprintf(err, errlen, "bench_dense does not predict");
    return -EINVAL;
}

const struct psrt_model_ops psrt_model_bench_dense = {
    .name = "bench_dense",
    .default_optimizer = "sgd",
    .default_lr = 0.1,
    .default_batch = 1,
    .target_loss = 1,
    .define = define,
    .batch = batch,
    .grad = grad,
    .predict = predict,
    .input_doc = "none",
};
