/*
 * worker.h: the worker task's state, shared by the chief's checkpoint
 * protocols (save_legacy.c, save_robust.c, restore.c, export.c), which reach
 * the ps tasks through calls.h (included here) and name checkpoints with
 * psrt_ckpt_prefix (state.c): nothing they call calls back into worker.c.
 */
#ifndef PSRT_WORKER_H
#define PSRT_WORKER_H

#include "runtime/psrt/calls.h"
#include "runtime/psrt/ps.h"
#include "runtime/psrt/psrt.h"

struct psrt_worker {
    const struct psrt_flags *f;
    struct psrt_model m;
    int nps;
    bool chief;
    struct psrt_conn **conn;
    struct psrt_buf *resp; /* one reply buffer per ps */
    /* training buffers */
    struct psrt_batch batch;
    float *dense[PSRT_MAX_VARS], *dgrad[PSRT_MAX_VARS];
    float *svals, *sgrad;
    size_t scap;
    uint64_t **pkeys;
    uint32_t **pidx;
    float **pgrad;
    size_t *pn;
    /* chief */
    long long last_save_step;
    double last_save_time;
    long long restored_step; /* -1: none */
    /* robust: failed saves abandoned (worker.c, --max_failed_saves) */
    int failed_saves;         /* in a row; a save that succeeds resets it */
    double first_failed_time; /* when the first of them failed */
    long long save_try_step;  /* the last save attempted (done or abandoned): */
    double save_try_time;     /* the next is due an interval after it */
    int save_failed_on;       /* the last failed save's culprit: ps index, -1 chief */
    double losses[20];
    int nloss;
    long long chief_steps;
};

/* Allocates the worker's state for flags f (no network yet). */
int psrt_worker_setup(struct psrt_worker *w, const struct psrt_flags *f, struct psrt_err *err);
/* Frees what setup and training allocated (connections closed); w may be
 * partly set up (setup failed). */
void psrt_worker_free(struct psrt_worker *w);
/* Connects to every ps (--connect_timeout_secs). */
int psrt_worker_connect(struct psrt_worker *w, struct psrt_err *err);
/* Init on every ps (fresh variables from --seed). */
int psrt_worker_init_all(struct psrt_worker *w, struct psrt_err *err);
/* Open on every ps: the model is ready, every worker may pull and push. */
int psrt_worker_open_all(struct psrt_worker *w, struct psrt_err *err);

/* A big sparse push, streamed (push.c): splits keys[0..n) by ps a piece at
 * a time into pk/pg/pi/pn (as psrt_split_keys; the caller keeps them, for
 * the pull that follows) and sends each piece to its ps as soon as it is
 * split, one PSRT_PUSH_BLOCKS request per ps, applied there as one batch.
 * dense[p]: ps p's dense gradients (nd[p] variables, all of that ps's, in
 * order; len 0 and nd[p] 0 for none).  Sparse rows of width 1.  calls[p]
 * gets each ps's result as psrt_worker_calls gives it; returns the first
 * failed ps, or -1 when every ps applied its part. */
int psrt_worker_push_stream(struct psrt_worker *w, const uint64_t *keys, const float *grads,
                            size_t n, const struct iovec *dense, const uint32_t *nd, uint64_t **pk,
                            float **pg, uint32_t **pi, size_t *pn, struct psrt_call *calls);

/* Reconnects to ps p after a transport error (backoff, reconnect timeout). */
int psrt_worker_reconnect(struct psrt_worker *w, int p, struct psrt_err *err);

/* Checkpoint protocols run by the chief.  0 or -errno with err set
 * (TensorFlow-shaped text, then a "[[Node: ...]]" line naming the op and
 * the ps device). */
int psrt_save_legacy(struct psrt_worker *w, long long step, struct psrt_err *err);
int psrt_save_robust(struct psrt_worker *w, long long step, struct psrt_err *err);
/* Restores the latest checkpoint: 1 restored (step in *step), 0 none
 * exists, <0 error. */
int psrt_restore_latest(struct psrt_worker *w, long long *step, struct psrt_err *err);
int psrt_export(struct psrt_worker *w, struct psrt_err *err);
/* Helpers shared by the protocols. */
/* TensorFlow's sharded save: SaveV2 of every ps to <tmp>-i-of-n, then
 * MergeV2Checkpoints on the last into prefix.  saver names the nodes in
 * errors ("save", or "save_1" for SavedModelBuilder's). */
int psrt_legacy_sharded_save(struct psrt_worker *w, const char *saver, const char *prefix,
                             long long step, struct psrt_err *err);
/* Kept checkpoints: reads train_dir's state, appends prefix, deletes what
 * falls beyond max_to_keep (errors logged), writes the state (flags:
 * CKPT_SYNC for robust). */
int psrt_update_state(struct psrt_worker *w, const char *prefix, unsigned flags,
                      struct psrt_err *err);

#endif
