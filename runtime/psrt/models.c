/*
 * models.c: the model registry.  psrt_model_find maps a --model name to
 * its ops (model_linear.c, model_softmax.c, model_sparse_lr.c,
 * model_bench.c); psrt_model_init looks the model up and has it define
 * its variables, which model.c places on the ps tasks.  Kept apart from
 * model.c so the models, which call model.c's helpers, are not called
 * back from it (no call cycle between files).
 */
#include "runtime/psrt/psrt.h"

#include <errno.h>
#include <string.h>

const struct psrt_model_ops *psrt_model_find(const char *name)
{
    static const struct psrt_model_ops *const all[] = {&psrt_model_linear, &psrt_model_softmax,
                                                       &psrt_model_sparse_lr,
                                                       &psrt_model_bench_dense, NULL};
    for (int i = 0; all[i]; i++)
        if (!strcmp(all[i]->name, name))
            return all[i];
    return NULL;
}

int psrt_model_init(struct psrt_model *m, const char *name, int nps, int64_t features)
{
    memset(m, 0, sizeof *m);
    m->ops = psrt_model_find(name);
    if (!m->ops || nps <= 0)
        return -EINVAL;
    m->nps = nps;
    m->sparse = -1;
    m->features = features;
    m->ops->define(m);
    return 0;
}
