/*
 * model_linear.c: S001's toy, dense linear regression y = 0.1 x + 0.3 with
 * x ~ U(0,1), mean squared error.  Variables Weights [1] (uniform -1..1, as
 * the seed's tf.random_uniform) and biases [1] (zeros).  Target loss 1e-3.
 * predict input: one x per line -> prints y.
 */
#include "runtime/psrt/psrt.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void define(struct psrt_model *m)
{
    psrt_model_add_var(m, "Weights", PSRT_VAR_DENSE, 1, 1, 0, PSRT_INIT_UNIFORM, 1.0f);
    psrt_model_add_var(m, "biases", PSRT_VAR_DENSE, 1, 1, 0, PSRT_INIT_ZERO, 0);
}

static int batch(const struct psrt_model *m, struct psrt_batch *b, int n, uint64_t seed)
{
    (void)m;
    if (b->cap_n < (size_t)n) {
        free(b->x);
        free(b->y);
        b->x = malloc(sizeof(float) * (size_t)n);
        b->y = malloc(sizeof(float) * (size_t)n);
        if (!b->x || !b->y)
            return -ENOMEM;
        b->cap_n = (size_t)n;
    }
    struct psrt_rng r;
    psrt_rng_seed(&r, seed);
    b->n = n;
    b->dim = 1;
    for (int i = 0; i < n; i++) {
        float x = (float)psrt_rng_uniform(&r);
        b->x[i] = x;
        b->y[i] = x * 0.1f + 0.3f;
    }
    return 0;
}

static double grad(const struct psrt_model *m, const struct psrt_batch *b, float *const *dense,
                   const float *sparse, float **dgrad, float *sgrad)
{
    (void)m;
    (void)sparse;
    (void)sgrad;
    double w = dense[0][0], c = dense[1][0], gw = 0, gb = 0, loss = 0;
    for (int i = 0; i < b->n; i++) {
        double e = w * b->x[i] + c - b->y[i];
        loss += e * e;
        gw += 2 * e * b->x[i];
        gb += 2 * e;
    }
    dgrad[0][0] = (float)(gw / b->n);
    dgrad[1][0] = (float)(gb / b->n);
    return loss / b->n;
}

static int predict(const struct psrt_model *m, const char *line, float *const *dense,
                   float (*lookup)(void *, uint64_t), void *ctx, FILE *out, char *err,
                   size_t errlen)
{
    (void)m;
    (void)lookup;
    (void)ctx;
    char *end;
    double x = strtod(line, &end);
    while (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r')
        end++;
    if (end == line || *end) {
        snprintf(err, errlen, "expected one number x, got '%s'", line);
        return -EINVAL;
    }
    fprintf(out, "%.6g\n", (double)dense[0][0] * x + (double)dense[1][0]);
    return 0;
}

const struct psrt_model_ops psrt_model_linear = {
    .name = "linear",
    .default_optimizer = "adagrad",
    .default_lr = 0.5,
    .default_batch = 100,
    .target_loss = 1e-3,
    .define = define,
    .batch = batch,
    .grad = grad,
    .predict = predict,
    .input_doc = "one number x per line; prints y",
};
