/*
 * netem/emu.h: the userspace link emulator: delay, jitter, reordering,
 * duplication, corruption and bursty (Gilbert) loss on the frames that
 * nfq_rule.h's rules queue to it, in the run's switch namespace.  The kernel
 * here has no sch_netem; this is what stands in for it.
 *
 * One emulator per fabric: a thread of the calling process with a
 * NETLINK_NETFILTER socket and an AF_PACKET socket opened inside the switch
 * namespace, at real-time priority where the process may (SCHED_FIFO, else
 * nice -20), so that frames leave when they are due on a busy machine too.  Each link fault is one
 * NFQUEUE queue (its number is the fault's id), bound on that socket with the fault's parameters.
 * A thread rather than a process: it ends with the process that made it by construction (a killed
 * harness closes the socket; the kernel drops the frames it held and, thanks to the rules'
 * `bypass`, lets later ones through unchanged), so there is nothing to find and kill afterwards,
 * and there is no protocol between harness and emulator: a fault is a function call.
 *
 * Per frame of a queue, in this order (every draw from the fault's own
 * generator, seeded by fl_emu_params.seed):
 *   loss       Gilbert model: a good state that loses nothing and a bad
 *              state that loses everything; the frame first moves the state
 *              (bad->good with probability 1/burst, good->bad with
 *              q = p/(burst*(1-p))), then is dropped if the state is bad.
 *              Long-run loss p, mean run of lost frames `burst`.
 *   corrupt    with its probability one random bit after the IP header is
 *              flipped (the IPv4 header stays valid, so UDP/TCP checksums
 *              catch it), through the verdict-with-payload path.
 *   duplicate  with its probability a copy is sent out of the frame's switch
 *              port (AF_PACKET) when the frame is released.
 *   delay      held for delay +- jitter (uniform), then accepted.  Without
 *              reorder, a frame is never released before the one queued
 *              before it (order kept, like netem with a plain delay); with
 *              reorder, jitter may reorder too.
 *   reorder    with its probability the frame is released at once, ahead of
 *              the frames being held (netem's `reorder`: needs a delay).
 * Delay-only queues copy no payload (NFQNL_COPY_META) and take GSO frames
 * whole; immediate accepts are sent as one NFQNL_MSG_VERDICT_BATCH.  Queues
 * are fail-open (a full queue accepts instead of dropping).
 *
 * Removing a queue (a heal) releases what it holds at once, reads what the
 * kernel queued meanwhile (accepted at once) and unbinds it.  fl_emu_free
 * does that for every queue and stops the thread.
 *
 * Thread safety: every function may be called from any one thread; the
 * emulator's state is behind its mutex.  Errors: 0 or a negative errno, err
 * names the call and the queue.
 */
#ifndef FL_NETEM_EMU_H
#define FL_NETEM_EMU_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct fl_emu;

struct fl_emu_params {
    uint32_t delay_us;
    uint32_t jitter_us;  /* <= delay_us */
    unsigned reorder_bp; /* hundredths of a percent, 0..10000 */
    unsigned duplicate_bp;
    unsigned corrupt_bp;
    unsigned ge_loss_bp; /* bursty loss, long-run fraction; 0 = none, < 10000 */
    double ge_burst;     /* mean run of lost frames, >= 1 */
    uint64_t seed;
};

struct fl_emu_stats {
    uint64_t frames; /* seen */
    uint64_t lost, duplicated, corrupted, reordered;
    uint64_t loss_runs; /* runs of consecutive lost frames */
    uint64_t held;      /* held now */
};

/* Largest queue number, and how many queues at once. */
#define FL_EMU_QUEUE_MAX 65535
#define FL_EMU_QUEUES 256

int fl_emu_new(struct fl_emu **out, pid_t sw_pid, char *err, size_t errlen);
void fl_emu_free(struct fl_emu *e);

/* Whether p asks for something (delay 0 alone is something: the frames take
 * the trip through userspace; a benchmark measures that). */
int fl_emu_params_check(const struct fl_emu_params *p, char *err, size_t errlen);

/* Binds queue with p; returns once the kernel has acknowledged. */
int fl_emu_add(struct fl_emu *e, uint16_t queue, const struct fl_emu_params *p, char *err,
               size_t errlen);
/* Releases what queue holds, unbinds it.  -ENOENT if it is not bound. */
int fl_emu_remove(struct fl_emu *e, uint16_t queue, char *err, size_t errlen);
/* Counters of a bound queue (-ENOENT otherwise). */
int fl_emu_stats(struct fl_emu *e, uint16_t queue, struct fl_emu_stats *st);

#endif
