/*
 * netem/nfq_rule.h: the nft rules that hand a link fault's frames to the
 * userspace emulator (emu.h) through NFQUEUE, in the run's switch namespace.
 *
 * This kernel has no nft `queue` expression (CONFIG_NFT_QUEUE is off), but it
 * has nft_compat and xtables' NFQUEUE target.  That target cannot be used
 * from the bridge family here (its lookup fails), so the rules live in the
 * ip family, which bridged IPv4 frames traverse through br_netfilter
 * (bridge-nf-call-iptables, on by default in a new netns; link.c also sets
 * the bridge's own nf_call_iptables).  `nft` cannot write a compat rule from
 * text, so they are built with libnftnl: table `ip fl_netem`, one base chain
 * `fwd` (forward hook, priority 10) holding a `jump q<queue>` per queue, and
 * a regular chain `q<queue>` with one rule per (source, destination) address
 * pair of the fault:
 *     [meta iif I] [meta oif O] ip saddr S ip daddr D  ->  xt NFQUEUE num <queue> bypass
 * The base chain is never removed: unregistering a netfilter hook makes the
 * kernel drop every frame queued in the namespace (nf_queue_nf_hook_drop),
 * so a heal removes only the jump (by its handle) and the regular chain.
 * (a zero address matches any).  Hosts keep their address across restarts,
 * so the rules need nothing when a host comes back.  br_netfilter runs the
 * ip forward hook before the bridge family's forward chains, so these frames
 * are emulated before the fabric's partitions and loss drop them.
 * `bypass`: while no emulator listens on the queue (it is gone), frames pass
 * unchanged instead of being dropped.
 *
 * Errors: 0 or a negative errno; err names the message and the namespace.
 */
#ifndef FL_NETEM_NFQ_RULE_H
#define FL_NETEM_NFQ_RULE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define FL_NFQ_TABLE "fl_netem"

/* IPv4 addresses in network byte order; 0 = any.  iif/oif: interface
 * indices the frame must come in by / go out by as the ip hooks see it (a
 * bridged frame: the bridge, fabric.h's fl_fabric_bridge_ifindex); 0 = any. */
struct fl_nfq_match {
    uint32_t saddr, daddr;
    uint32_t iif, oif;
};

/* Adds chain q<queue> with a rule per match (n >= 1) and its jump, in the
 * netns of sw_pid; *handle is the jump's, for fl_nfq_rule_del. */
int fl_nfq_rule_add(pid_t sw_pid, uint16_t queue, const struct fl_nfq_match *m, size_t n,
                    uint64_t *handle, char *err, size_t errlen);
/* Removes the jump and chain q<queue>; missing ones are not an error. */
int fl_nfq_rule_del(pid_t sw_pid, uint16_t queue, uint64_t handle, char *err, size_t errlen);

#endif
