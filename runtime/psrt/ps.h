/*
 * ps.h: the ps task as an object, so that tests and benchmarks can run a ps
 * inside their own process; and the naming rule the checkpoint protocols
 * share (which tensors a ps owns).
 */
#ifndef PSRT_PS_H
#define PSRT_PS_H

#include "runtime/psrt/psrt.h"

#define PSRT_PULL_RESERVE 1u /* Pull flag (ps 0): reserve the next global step */
/* Push flag: the sparse pairs come in blocks (a streamed push, split and
 * sent piece by piece): after the dense gradients, any number of
 * {u64 count, count keys, count*width gradients, pad to 8}, to the end of
 * the payload; the header's nkeys is 0. */
#define PSRT_PUSH_BLOCKS 2u
/* The 16 bytes a Push payload starts with: then ndense dense gradients
 * (pad to 8) and the sparse pairs (see h_push in ps.c). */
struct psrt_push_hdr {
    uint64_t nkeys;
    uint32_t ndense, pad;
};

struct psrt_ps;
int psrt_ps_setup(struct psrt_ps **out, const struct psrt_flags *f, struct psrt_err *err);
/* The ps's request handler (a psrt_handler; ctx is the struct psrt_ps),
 * what psrt_ps_serve serves: exported for the RPC fuzz target
 * (runtime/fuzz/fuzz_frame.c), which serves it through a filter that keeps
 * requests away from the disk. */
void psrt_ps_handle(void *ctx, int op, uint32_t flags, struct psrt_buf *req,
                    struct psrt_reply *rep);
/* Starts serving on port (0 = any free port). */
int psrt_ps_serve(struct psrt_ps *ps, int port, struct psrt_err *err);
int psrt_ps_port(struct psrt_ps *ps);
/* Blocks until a Shutdown request was answered. */
void psrt_ps_wait(struct psrt_ps *ps);

/* Whether checkpoint tensor `name` belongs to ps task p's shard. */
bool psrt_tensor_on_ps(const struct psrt_model *m, const char *name, int p);

#endif
