/*
 * model.c: the helpers the models share: variable placement and a batch's
 * unique keys.  The registry (name -> model) is models.c.
 *
 * Placement follows TensorFlow's replica_device_setter: variables in
 * creation order, round robin over the ps tasks, global_step first (so it
 * sits on ps 0).  A sparse variable (sparse_lr's weights) is partitioned by
 * row over every ps task (row r lives on psrt_row_ps(r, nps)), each part
 * saved as <name>/part_<ps>/{keys,values,<slots>}.  The sharded Saver
 * numbers shards by the sorted device names of the ps tasks holding
 * variables (so task 10 sorts before task 2, as in TensorFlow).
 */
#include "runtime/psrt/psrt.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int psrt_model_add_var(struct psrt_model *m, const char *name, int kind, int rank, int64_t d0,
                       int64_t d1, int init, float init_a)
{
    if (m->nvars >= PSRT_MAX_VARS)
        return -ENOSPC;
    struct psrt_var *v = &m->vars[m->nvars];
    memset(v, 0, sizeof *v);
    snprintf(v->name, sizeof v->name, "%s", name);
    v->kind = kind;
    v->rank = rank;
    v->dims[0] = d0;
    v->dims[1] = d1;
    v->init = init;
    v->init_a = init_a;
    if (kind == PSRT_VAR_SPARSE) {
        v->n = d1;
        v->ps = -1;
        m->sparse = m->nvars;
    } else {
        v->n = rank == 0 ? 1 : (rank == 1 ? d0 : d0 * d1);
        int dense_before = 0;
        for (int i = 0; i < m->nvars; i++)
            dense_before += m->vars[i].kind == PSRT_VAR_DENSE;
        v->ps = (1 + dense_before) % (m->nps > 0 ? m->nps : 1); /* global_step took ps 0 */
    }
    m->nvars++;
    return 0;
}

bool psrt_model_ps_has_vars(const struct psrt_model *m, int ps)
{
    if (ps == 0 || m->sparse >= 0)
        return true;
    for (int i = 0; i < m->nvars; i++)
        if (m->vars[i].ps == ps)
            return true;
    return false;
}

int psrt_model_shards(const struct psrt_model *m, int *order)
{
    int n = 0;
    char names[256][48];
    for (int p = 0; p < m->nps && n < 256; p++) {
        if (!psrt_model_ps_has_vars(m, p))
            continue;
        order[n] = p;
        snprintf(names[n], sizeof names[n], "/job:ps/replica:0/task:%d/device:CPU:0", p);
        n++;
    }
    /* insertion sort by device name */
    for (int i = 1; i < n; i++) {
        int j = i;
        while (j > 0 && strcmp(names[j - 1], names[j]) > 0) {
            char tmp[48];
            memcpy(tmp, names[j], sizeof tmp);
            memcpy(names[j], names[j - 1], sizeof tmp);
            memcpy(names[j - 1], tmp, sizeof tmp);
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
            j--;
        }
    }
    return n;
}

void psrt_batch_free(struct psrt_batch *b)
{
    free(b->x);
    free(b->y);
    free(b->fkeys);
    free(b->fidx);
    free(b->keys);
    memset(b, 0, sizeof *b);
}

int psrt_batch_unique(struct psrt_batch *b)
{
    size_t total = (size_t)b->n * (size_t)b->nnz;
    size_t cap = 16;
    while (cap < total * 2)
        cap *= 2;
    uint64_t *slots = malloc(cap * sizeof *slots);
    uint32_t *sidx = malloc(cap * sizeof *sidx);
    uint64_t *keys = realloc(b->keys, (total ? total : 1) * sizeof *keys);
    if (!slots || !sidx || !keys) {
        free(slots);
        free(sidx);
        if (keys)
            b->keys = keys;
        return -ENOMEM;
    }
    b->keys = keys;
    memset(slots, 0xff, cap * sizeof *slots);
    int64_t nk = 0;
    bool have_max = false;
    uint32_t max_idx = 0;
    for (size_t i = 0; i < total; i++) {
        uint64_t k = b->fkeys[i];
        if (k == UINT64_MAX) {
            if (!have_max) {
                have_max = true;
                max_idx = (uint32_t)nk;
                keys[nk++] = k;
            }
            b->fidx[i] = max_idx;
            continue;
        }
        size_t s = psrt_mix64(k) & (cap - 1);
        while (slots[s] != UINT64_MAX && slots[s] != k)
            s = (s + 1) & (cap - 1);
        if (slots[s] == UINT64_MAX) {
            slots[s] = k;
            sidx[s] = (uint32_t)nk;
            keys[nk++] = k;
        }
        b->fidx[i] = sidx[s];
    }
    b->nkeys = nk;
    free(slots);
    free(sidx);
    return 0;
}
