/*
 * model_softmax.c: S002's MNIST shape, softmax regression from 784 inputs
 * to 10 classes, cross-entropy loss.  Synthetic data from a known
 * generative model: each class c has a fixed binary 28x28 "prototype"
 * (each pixel on with probability 0.2, seed 784); an example picks a class
 * uniformly and copies its prototype with every pixel flipped with
 * probability 0.4, so the best classifier is the nearest prototype and a
 * softmax regression can get close to it.  Variables softmax/weights
 * [784,10] and softmax/biases [10], zeros (as the MNIST tutorial).  Target
 * loss 0.5 (from ln 10 = 2.30 at the start).
 * predict input: 784 numbers per line -> prints the class and the 10
 * probabilities.
 */
#include "runtime/psrt/psrt.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define DIM 784
#define NC 10

static unsigned char proto[NC][DIM];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void make_truth(void)
{
    struct psrt_rng r;
    psrt_rng_seed(&r, 784);
    for (int c = 0; c < NC; c++)
        for (int j = 0; j < DIM; j++)
            proto[c][j] = psrt_rng_uniform(&r) < 0.2;
}

static void define(struct psrt_model *m)
{
    psrt_model_add_var(m, "softmax/weights", PSRT_VAR_DENSE, 2, DIM, NC, PSRT_INIT_ZERO, 0);
    psrt_model_add_var(m, "softmax/biases", PSRT_VAR_DENSE, 1, NC, 0, PSRT_INIT_ZERO, 0);
}

static int batch(const struct psrt_model *m, struct psrt_batch *b, int n, uint64_t seed)
{
    (void)m;
    pthread_once(&once, make_truth);
    if (b->cap_n < (size_t)n) {
        free(b->x);
        free(b->y);
        b->x = malloc(sizeof(float) * (size_t)n * DIM);
        b->y = malloc(sizeof(float) * (size_t)n);
        if (!b->x || !b->y)
            return -ENOMEM;
        b->cap_n = (size_t)n;
    }
    struct psrt_rng r;
    psrt_rng_seed(&r, seed);
    b->n = n;
    b->dim = DIM;
    for (int i = 0; i < n; i++) {
        float *x = b->x + (size_t)i * DIM;
        int y = (int)(psrt_rng_u64(&r) % NC);
        for (int j = 0; j < DIM; j++)
            x[j] = (float)(proto[y][j] ^ (psrt_rng_uniform(&r) < 0.4));
        b->y[i] = (float)y;
    }
    return 0;
}

static void softmax(const float *x, float *const *dense, double *p)
{
    const float *w = dense[0], *bias = dense[1];
    double z[NC], mx = -1e300, sum = 0;
    for (int c = 0; c < NC; c++)
        z[c] = bias[c];
    for (int j = 0; j < DIM; j++) {
        if (x[j] == 0)
            continue;
        for (int c = 0; c < NC; c++)
            z[c] += (double)x[j] * w[j * NC + c];
    }
    for (int c = 0; c < NC; c++)
        if (z[c] > mx)
            mx = z[c];
    for (int c = 0; c < NC; c++)
        sum += (p[c] = exp(z[c] - mx));
    for (int c = 0; c < NC; c++)
        p[c] /= sum;
}

static double grad(const struct psrt_model *m, const struct psrt_batch *b, float *const *dense,
                   const float *sparse, float **dgrad, float *sgrad)
{
    (void)m;
    (void)sparse;
    (void)sgrad;
    float *gw = dgrad[0], *gb = dgrad[1];
    memset(gw, 0, sizeof(float) * DIM * NC);
    memset(gb, 0, sizeof(float) * NC);
    double loss = 0;
    const float inv = 1.0f / (float)b->n;
    for (int i = 0; i < b->n; i++) {
        const float *x = b->x + (size_t)i * DIM;
        double p[NC];
        softmax(x, dense, p);
        int y = (int)b->y[i];
        loss -= log(p[y] > 1e-30 ? p[y] : 1e-30);
        float d[NC];
        for (int c = 0; c < NC; c++)
            d[c] = (float)(p[c] - (c == y)) * inv;
        for (int j = 0; j < DIM; j++)
            for (int c = 0; c < NC; c++)
                gw[j * NC + c] += x[j] * d[c];
        for (int c = 0; c < NC; c++)
            gb[c] += d[c];
    }
    return loss / b->n;
}

static int predict(const struct psrt_model *m, const char *line, float *const *dense,
                   float (*lookup)(void *, uint64_t), void *ctx, FILE *out, char *err,
                   size_t errlen)
{
    (void)m;
    (void)lookup;
    (void)ctx;
    float x[DIM];
    const char *p = line;
    int n = 0;
    for (;;) {
        char *end;
        double v = strtod(p, &end);
        if (end == p)
            break;
        if (n == DIM) {
            n++;
            break;
        }
        x[n++] = (float)v;
        p = end;
    }
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    if (n != DIM || *p) {
        snprintf(err, errlen, "expected %d numbers per line, got %d", DIM, n);
        return -EINVAL;
    }
    double pr[NC];
    softmax(x, dense, pr);
    int best = 0;
    for (int c = 1; c < NC; c++)
        if (pr[c] > pr[best])
            best = c;
    fprintf(out, "%d", best);
    for (int c = 0; c < NC; c++)
        fprintf(out, " %.4f", pr[c]);
    fputc('\n', out);
    return 0;
}

/* The true class of an input: its nearest prototype (tests). */
int psrt_softmax_true_class(const float *x);
int psrt_softmax_true_class(const float *x)
{
    pthread_once(&once, make_truth);
    int best = 0;
    double bd = 1e300;
    for (int c = 0; c < NC; c++) {
        double d = 0;
        for (int j = 0; j < DIM; j++)
            d += fabs((double)x[j] - proto[c][j]);
        if (d < bd) {
            bd = d;
            best = c;
        }
    }
    return best;
}

const struct psrt_model_ops psrt_model_softmax = {
    .name = "softmax",
    .default_optimizer = "adagrad",
    .default_lr = 0.1,
    .default_batch = 100,
    .target_loss = 0.5,
    .define = define,
    .batch = batch,
    .grad = grad,
    .predict = predict,
    .input_doc = "784 numbers per line; prints the class, then 10 probabilities",
};
