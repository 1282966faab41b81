/*
 * model_sparse_lr.c: S000/S003's shape, sparse logistic regression over a
 * hashed feature space (--sparse_features, default 2^25 = 33554432 buckets,
 * partitioned by row over every ps), FTRL by default.
 *
 * Synthetic data: each example has NNZ = 12 active features drawn from a
 * vocabulary of VOCAB = 20000 raw feature ids with a skewed (cubic)
 * popularity; raw id f is hashed to bucket mix(f) mod features.  The true
 * model gives raw feature f the weight 1.5 * N(0,1) (a fixed function of f)
 * and a bias of -0.3; the label is Bernoulli(sigmoid(logit)), so the best
 * achievable log loss is about 0.3.  Variables: sparse_lr/weights
 * [features, 1] (sparse, zeros), sparse_lr/bias [1] (zeros).  Target loss
 * 0.55 (from 0.693 at the start).
 * predict input: raw feature ids (integers) per line -> prints P(y = 1).
 */
#include "runtime/psrt/psrt.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NNZ 12
#define VOCAB 20000

static uint64_t bucket(const struct psrt_model *m, uint64_t raw)
{
    return psrt_mix64(raw * 0x9e3779b97f4a7c15ull + 0x5eed) % (uint64_t)m->features;
}

static double true_weight(uint64_t raw)
{
    struct psrt_rng r;
    psrt_rng_seed(&r, raw * 7919 + 13);
    return 1.5 * psrt_rng_normal(&r);
}

static void define(struct psrt_model *m)
{
    psrt_model_add_var(m, "sparse_lr/weights", PSRT_VAR_SPARSE, 2, m->features, 1, PSRT_INIT_ZERO,
                       0);
    psrt_model_add_var(m, "sparse_lr/bias", PSRT_VAR_DENSE, 1, 1, 0, PSRT_INIT_ZERO, 0);
}

static int batch(const struct psrt_model *m, struct psrt_batch *b, int n, uint64_t seed)
{
    if (b->cap_n < (size_t)n) {
        free(b->y);
        free(b->fkeys);
        free(b->fidx);
        b->y = malloc(sizeof(float) * (size_t)n);
        b->fkeys = malloc(sizeof(uint64_t) * (size_t)n * NNZ);
        b->fidx = malloc(sizeof(uint32_t) * (size_t)n * NNZ);
        if (!b->y || !b->fkeys || !b->fidx)
            return -ENOMEM;
        b->cap_n = (size_t)n;
    }
    struct psrt_rng r;
    psrt_rng_seed(&r, seed);
    b->n = n;
    b->nnz = NNZ;
    b->dim = 0;
    for (int i = 0; i < n; i++) {
        double logit = -0.3;
        for (int j = 0; j < NNZ; j++) {
            double u = psrt_rng_uniform(&r);
            uint64_t raw = (uint64_t)(u * u * u * VOCAB);
            logit += true_weight(raw);
            b->fkeys[(size_t)i * NNZ + j] = bucket(m, raw);
        }
        double p = 1.0 / (1.0 + exp(-logit));
        b->y[i] = psrt_rng_uniform(&r) < p ? 1.0f : 0.0f;
    }
    return psrt_batch_unique(b);
}

static double grad(const struct psrt_model *m, const struct psrt_batch *b, float *const *dense,
                   const float *sparse, float **dgrad, float *sgrad)
{
    (void)m;
    float bias = dense[1][0];
    memset(sgrad, 0, sizeof(float) * (size_t)b->nkeys);
    double loss = 0, gb = 0;
    const double inv = 1.0 / b->n;
    for (int i = 0; i < b->n; i++) {
        double z = bias;
        const uint32_t *idx = b->fidx + (size_t)i * NNZ;
        for (int j = 0; j < NNZ; j++)
            z += sparse[idx[j]];
        double p = 1.0 / (1.0 + exp(-z));
        double y = b->y[i];
        loss += y ? -log(p > 1e-12 ? p : 1e-12) : -log(1 - p > 1e-12 ? 1 - p : 1e-12);
        float d = (float)((p - y) * inv);
        for (int j = 0; j < NNZ; j++)
            sgrad[idx[j]] += d;
        gb += d;
    }
    dgrad[1][0] = (float)gb;
    return loss * inv;
}

static int predict(const struct psrt_model *m, const char *line, float *const *dense,
                   float (*lookup)(void *, uint64_t), void *ctx, FILE *out, char *err,
                   size_t errlen)
{
    double z = dense[1][0];
    const char *p = line;
    int n = 0;
    for (;;) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p || *p == '\n' || *p == '\r')
            break;
        char *end;
        unsigned long long raw = strtoull(p, &end, 10);
        if (end == p) {
            snprintf(err, errlen, "expected raw feature ids (integers), got '%s'", p);
            return -EINVAL;
        }
        z += lookup(ctx, bucket(m, raw));
        n++;
        p = end;
    }
    (void)n;
    fprintf(out, "%.6f\n", 1.0 / (1.0 + exp(-z)));
    return 0;
}

const struct psrt_model_ops psrt_model_sparse_lr = {
    .name = "sparse_lr",
    .default_optimizer = "ftrl",
    .default_lr = 1.0,
    .default_batch = 100,
    .target_loss = 0.55,
    .define = define,
    .batch = batch,
    .grad = grad,
    .predict = predict,
    .input_doc = "raw feature ids (integers) per line; prints P(y=1)",
};
