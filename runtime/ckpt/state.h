/*
 * state.h: the `checkpoint` state file beside a checkpoint series: a
 * CheckpointState protocol buffer in text format, as TensorFlow's
 * update_checkpoint_state writes it:
 *
 *   model_checkpoint_path: "model.ckpt-24"
 *   all_model_checkpoint_paths: "model.ckpt-20"
 *   all_model_checkpoint_paths: "model.ckpt-24"
 *   all_model_checkpoint_timestamps: 1577836800.5      (newer TensorFlow)
 *   last_preserved_timestamp: 1577836700.25            (newer TensorFlow)
 *
 * Writes are atomic (temporary file in the same directory, then rename;
 * with CKPT_SYNC the file and directory are fsynced).  Errors follow
 * bundle.h: negative errno and a struct ckpt_err naming the file.
 */
#ifndef CKPT_STATE_H
#define CKPT_STATE_H

#include <stdbool.h>
#include <stddef.h>

#include "runtime/ckpt/bundle.h"

struct ckpt_state {
    char *model_checkpoint_path;       /* NULL when absent */
    char **all_model_checkpoint_paths; /* oldest first */
    size_t n_all;
    double *all_model_checkpoint_timestamps;
    size_t n_timestamps;
    double last_preserved_timestamp;
    bool has_last_preserved_timestamp;
};

/* File name TensorFlow uses in the checkpoint directory. */
#define CKPT_STATE_FILENAME "checkpoint"

/* Reads PATH: a directory (reads PATH/checkpoint) or the file itself.
 * -ENOENT when absent, -EBADMSG with line:column when not a valid text
 * proto.  Unknown fields are an error (TensorFlow's parser rejects them).
 * *st is overwritten (not freed first). */
int ckpt_state_read(const char *path, struct ckpt_state *st, struct ckpt_err *err);
/* The same, with PATH resolved inside the directory ROOT as if it were "/"
 * (ckpt_reader_open_in). */
int ckpt_state_read_in(int root, const char *path, struct ckpt_state *st, struct ckpt_err *err);
/* Parses text; name is used in messages. */
int ckpt_state_parse(const char *text, size_t len, const char *name, struct ckpt_state *st,
                     struct ckpt_err *err);
/* Text format as protobuf's text_format.MessageToString prints it. malloc'd. */
char *ckpt_state_format(const struct ckpt_state *st);
/* Writes DIR/checkpoint atomically; flags: CKPT_SYNC. */
int ckpt_state_write(const char *dir, const struct ckpt_state *st, unsigned flags,
                     struct ckpt_err *err);

/* Appends a copy of path to all_model_checkpoint_paths (and timestamp when
 * ts >= 0 or when timestamps are already kept). -ENOMEM on failure. */
int ckpt_state_add_path(struct ckpt_state *st, const char *path, double ts);
/* Sets model_checkpoint_path to a copy of path. */
int ckpt_state_set_model(struct ckpt_state *st, const char *path);
/* Path p as TensorFlow's get_checkpoint_state resolves it: relative paths
 * are joined to dir.  malloc'd. */
char *ckpt_state_resolve(const char *dir, const char *p);
void ckpt_state_free(struct ckpt_state *st);

#endif
