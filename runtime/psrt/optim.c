/*
 * optim.c: the optimizers a ps applies, with TensorFlow 1.x's update rules
 * (training_ops.cc) and slot names:
 *   sgd      w -= lr * g
 *   adagrad  a += g^2; w -= lr * g / sqrt(a)                 slot "Adagrad" (init 0.1)
 *   ftrl     n' = n + g^2; z += g - (n'^-p - n^-p)/lr * w;
 *            w = |z| > l1 ? (sign(z) l1 - z) / (n'^-p / lr + 2 l2) : 0; n = n'
 *            (p = lr_power = -0.5)                        slots "Ftrl" (n, init 0.1), "Ftrl_1" (z)
 *   adam     m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 *            w -= lr sqrt(1-b2^t)/(1-b1^t) * m / (sqrt(v) + eps)   slots "Adam" (m), "Adam_1" (v)
 * Adam's beta powers are kept per variable (TensorFlow keeps one pair per
 * optimizer, colocated with the first variable); sparse Adam is lazy (only
 * the rows pushed decay), as LazyAdamOptimizer.
 */
#include "runtime/psrt/psrt.h"

#include <math.h>
#include <string.h>

int psrt_optim_parse(const char *name)
{
    if (!strcmp(name, "sgd"))
        return PSRT_OPT_SGD;
    if (!strcmp(name, "adagrad"))
        return PSRT_OPT_ADAGRAD;
    if (!strcmp(name, "ftrl"))
        return PSRT_OPT_FTRL;
    if (!strcmp(name, "adam"))
        return PSRT_OPT_ADAM;
    return -1;
}

void psrt_optim_default(struct psrt_optim *o, int kind, float lr)
{
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->lr = lr;
    o->init_accum = 0.1f;
    o->l1 = 0.0f;
    o->l2 = 0.0f;
    o->lr_power = -0.5f;
    o->beta1 = 0.9f;
    o->beta2 = 0.999f;
    o->eps = 1e-8f;
}

int psrt_optim_nslots(int kind)
{
    switch (kind) {
    case PSRT_OPT_ADAGRAD: return 1;
    case PSRT_OPT_FTRL: return 2;
    case PSRT_OPT_ADAM: return 2;
    default: return 0;
    }
}

const char *psrt_optim_slot_suffix(int kind, int i)
{
    switch (kind) {
    case PSRT_OPT_ADAGRAD: return "Adagrad";
    case PSRT_OPT_FTRL: return i == 0 ? "Ftrl" : "Ftrl_1";
    case PSRT_OPT_ADAM: return i == 0 ? "Adam" : "Adam_1";
    default: return "";
    }
}

float psrt_optim_slot_init(const struct psrt_optim *o, int i)
{
    if (o->kind == PSRT_OPT_ADAGRAD || (o->kind == PSRT_OPT_FTRL && i == 0))
        return o->init_accum;
    return 0.0f;
}

static inline float ftrl_pow(float x, float p)
{
    return p == -0.5f ? sqrtf(x) : powf(x, -p);
}

static void apply_n(const struct psrt_optim *o, float *w, float *const *s, const float *g,
                    int64_t n, float b1p, float b2p)
{
    const float lr = o->lr;
    switch (o->kind) {
    case PSRT_OPT_SGD: {
        /* 8 lanes at a time (-O2 does not vectorize this loop by itself):
         * the same multiply and subtract per element, so the same bits */
        typedef float v8f __attribute__((vector_size(32)));
        const v8f lr8 = {lr, lr, lr, lr, lr, lr, lr, lr};
        int64_t i = 0;
        for (; i + 8 <= n; i += 8) {
            v8f a, b;
            memcpy(&a, w + i, sizeof a);
            memcpy(&b, g + i, sizeof b);
            a -= lr8 * b;
            memcpy(w + i, &a, sizeof a);
        }
        for (; i < n; i++)
            w[i] -= lr * g[i];
        break;
    }
    case PSRT_OPT_ADAGRAD: {
        float *a = s[0];
        for (int64_t i = 0; i < n; i++) {
            a[i] += g[i] * g[i];
            w[i] -= lr * g[i] / sqrtf(a[i]);
        }
        break;
    }
    case PSRT_OPT_FTRL: {
        float *acc = s[0], *lin = s[1];
        const float p = o->lr_power, l1 = o->l1, l2 = o->l2;
        for (int64_t i = 0; i < n; i++) {
            float gi = g[i];
            float na = acc[i] + gi * gi;
            float sigma = (ftrl_pow(na, p) - ftrl_pow(acc[i], p)) / lr;
            lin[i] += gi - sigma * w[i];
            float quad = ftrl_pow(na, p) / lr + 2.0f * l2;
            float z = lin[i];
            w[i] = fabsf(z) > l1 ? ((z < 0 ? -l1 : l1) - z) / quad : 0.0f;
            acc[i] = na;
        }
        break;
    }
    case PSRT_OPT_ADAM: {
        float *m = s[0], *v = s[1];
        const float b1 = o->beta1, b2 = o->beta2, eps = o->eps;
        const float lrt = lr * sqrtf(1.0f - b2p) / (1.0f - b1p);
        for (int64_t i = 0; i < n; i++) {
            m[i] += (g[i] - m[i]) * (1.0f - b1);
            v[i] += (g[i] * g[i] - v[i]) * (1.0f - b2);
            w[i] -= lrt * m[i] / (sqrtf(v[i]) + eps);
        }
        break;
    }
    }
}

void psrt_optim_apply(const struct psrt_optim *o, float *w, float *const *s, const float *g,
                      int64_t n, struct psrt_adam_pow *pw)
{
    apply_n(o, w, s, g, n, pw ? pw->b1p : o->beta1, pw ? pw->b2p : o->beta2);
    if (pw)
        psrt_optim_advance(o, pw);
}

void psrt_optim_apply_row(const struct psrt_optim *o, float *w, float *const *s, const float *g,
                          int64_t n, const struct psrt_adam_pow *pw)
{
    apply_n(o, w, s, g, n, pw ? pw->b1p : o->beta1, pw ? pw->b2p : o->beta2);
}

void psrt_optim_advance(const struct psrt_optim *o, struct psrt_adam_pow *pw)
{
    if (o->kind == PSRT_OPT_ADAM) {
        pw->b1p *= o->beta1;
        pw->b2p *= o->beta2;
    }
}
