/*
 * test_psrt_optim.c: psrt's optimizers (SGD, Adagrad, FTRL, Adam) against
 * hand-computed updates and TensorFlow's formulas.
 */
#include "harness/tests/fl_test.h"
#include "runtime/tests/test_psrt_fixture.h"

#include <math.h>
#ifdef FIU_ENABLE
#include <fiu-control.h>
#include <fiu.h>
#endif

#define NEAR(a, b) (fabs((double)(a) - (double)(b)) <= 1e-6 * (1 + fabs((double)(b))))
#define ASSERT_NEAR(a, b) \
    FL_ASSERT_MSG(NEAR(a, b), "%s ~= %s: left %.9g, right %.9g", #a, #b, (double)(a), (double)(b))

FL_TEST(psrt_optim, sgd_matches_hand_computed)
{
    struct psrt_optim o;
    psrt_optim_default(&o, PSRT_OPT_SGD, 0.1f);
    float w[2] = {1.0f, -2.0f}, g[2] = {0.5f, -1.0f};
    psrt_optim_apply(&o, w, NULL, g, 2, NULL);
    ASSERT_NEAR(w[0], 1.0 - 0.1 * 0.5);
    ASSERT_NEAR(w[1], -2.0 + 0.1 * 1.0);
}

FL_TEST(psrt_optim, adagrad_matches_hand_computed_two_steps)
{
    struct psrt_optim o;
    psrt_optim_default(&o, PSRT_OPT_ADAGRAD, 0.5f);
    float w = 1.0f, a = psrt_optim_slot_init(&o, 0), g = 2.0f;
    float *s[1] = {&a};
    FL_ASSERT_STREQ(psrt_optim_slot_suffix(PSRT_OPT_ADAGRAD, 0), "Adagrad");
    ASSERT_NEAR(a, 0.1);
    psrt_optim_apply(&o, &w, s, &g, 1, NULL);
    /* a = 0.1 + 4 = 4.1; w = 1 - 0.5 * 2 / sqrt(4.1) */
    ASSERT_NEAR(a, 4.1);
    ASSERT_NEAR(w, 1.0 - 1.0 / sqrt(4.1));
    g = -1.0f;
    double w1 = w;
    psrt_optim_apply(&o, &w, s, &g, 1, NULL);
    ASSERT_NEAR(a, 5.1);
    ASSERT_NEAR(w, w1 + 0.5 / sqrt(5.1));
}

FL_TEST(psrt_optim, ftrl_matches_tensorflow_formula)
{
    struct psrt_optim o;
    psrt_optim_default(&o, PSRT_OPT_FTRL, 0.5f);
    o.l1 = 0.01f;
    o.l2 = 0.1f;
    float w = 0.0f, n = 0.1f, z = 0.0f, g = 0.8f;
    float *s[2] = {&n, &z};
    FL_ASSERT_STREQ(psrt_optim_slot_suffix(PSRT_OPT_FTRL, 0), "Ftrl");
    FL_ASSERT_STREQ(psrt_optim_slot_suffix(PSRT_OPT_FTRL, 1), "Ftrl_1");
    psrt_optim_apply(&o, &w, s, &g, 1, NULL);
    double na = 0.1 + 0.64;
    double zz = 0.8 - (sqrt(na) - sqrt(0.1)) / 0.5 * 0.0;
    double quad = sqrt(na) / 0.5 + 2 * 0.1;
    double want = fabs(zz) > 0.01 ? ((zz < 0 ? -0.01 : 0.01) - zz) / quad : 0;
    ASSERT_NEAR(n, na);
    ASSERT_NEAR(z, zz);
    ASSERT_NEAR(w, want);
    /* second step uses the new w in the z update */
    double w1 = w, n1 = n, z1 = z;
    g = -0.3f;
    psrt_optim_apply(&o, &w, s, &g, 1, NULL);
    double na2 = n1 + 0.09;
    double z2 = z1 + -0.3 - (sqrt(na2) - sqrt(n1)) / 0.5 * w1;
    double q2 = sqrt(na2) / 0.5 + 0.2;
    ASSERT_NEAR(z, z2);
    ASSERT_NEAR(w, fabs(z2) > 0.01 ? ((z2 < 0 ? -0.01 : 0.01) - z2) / q2 : 0);
    /* inside the l1 ball the weight is exactly zero */
    float w3 = 5, n3 = 1, z3 = 0.0f, g3 = 0.001f;
    float *s3[2] = {&n3, &z3};
    o.l1 = 1.0f;
    psrt_optim_apply(&o, &w3, s3, &g3, 1, NULL);
    FL_ASSERT(fabs(z3) <= 1.0f);
    FL_ASSERT_MSG(w3 == 0.0f, "w3 = %g inside the l1 ball", w3);
}

FL_TEST(psrt_optim, adam_matches_hand_computed_with_bias_correction)
{
    struct psrt_optim o;
    psrt_optim_default(&o, PSRT_OPT_ADAM, 0.01f);
    float w = 1.0f, m = 0, v = 0, g = 0.5f;
    float *s[2] = {&m, &v};
    struct psrt_adam_pow pw = {o.beta1, o.beta2};
    psrt_optim_apply(&o, &w, s, &g, 1, &pw);
    double mm = 0.1 * 0.5, vv = 0.001 * 0.25;
    double lrt = 0.01 * sqrt(1 - 0.999) / (1 - 0.9);
    ASSERT_NEAR(m, mm);
    ASSERT_NEAR(v, vv);
    ASSERT_NEAR(w, 1.0 - lrt * mm / (sqrt(vv) + 1e-8));
    ASSERT_NEAR(pw.b1p, 0.9 * 0.9);
    ASSERT_NEAR(pw.b2p, 0.999 * 0.999);
}
