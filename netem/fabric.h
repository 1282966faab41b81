/*
 * netem/fabric.h: the network fabric every host of a run plugs into.
 *
 * A fabric is a private "switch": an anonymous network namespace held by a
 * small holder process that the fabric clones itself (CLONE_NEWNET, exit
 * signal 0, PR_SET_PDEATHSIG SIGKILL, every inherited fd closed).  Inside it
 * one bridge "br0" (up, no address, no STP, forward delay 0, no multicast
 * snooping, no IPv6, no bridge-netfilter calls).  Each host is a network
 * namespace (made by the host layer) joined to the bridge by a veth pair:
 *
 *     switch netns:  br0 ── "h<idx>"  ══ veth ══  "eth0"  :host netns
 *                                                  198.18.x.y/15, up
 *                                                  lo up
 *
 * Nothing is ever created in the root network namespace and nothing is bound
 * into /run/netns: when the holder dies (fl_fabric_destroy, or the harness
 * dying, via PDEATHSIG) the kernel frees the switch namespace, every veth
 * pair and every partition rule.  When a host's netns dies the kernel removes
 * that host's veth pair too.
 *
 * Addresses: host idx gets 198.18.0.0 + idx + 1 in 198.18.0.0/15 (RFC 2544
 * benchmarking range, never routed), so idx 0 = 198.18.0.1, idx 254 =
 * 198.18.0.255 (a valid host address in a /15), idx 255 = 198.18.1.0.
 * A restarted or replaced host (new pid, same idx) gets the same address and
 * the same MAC (fl_fabric_mac), so peers' ARP caches stay right.
 * eth0 has no IPv6 link-local address (addrgenmode none): no DAD/RS/MLD
 * traffic floods the bridge; lo keeps ::1.
 *
 * Partitions are nftables rules (bridge family, table "faultline", one
 * regular chain "p<rule id>" per partition/block, jumped to from the base
 * chain "fl_base" on the forward hook, which stays for the run: removing a
 * hook would make the kernel drop every packet queued to the link emulator
 * in the namespace) in the switch
 * namespace matching the switch-side port names, so a partition stays in
 * force across a host's restart (its port is re-created with the same
 * name).  A partition drops every frame (ARP and IPv4 alike) between groups.
 *
 * Commit returns when every new port is forwarding (it runs the kernel's
 * pending link-state work itself), so the first ARP/SYN is never lost.
 *
 * Lifecycle / states of a host slot idx:
 *   DETACHED --attach--> QUEUED --commit--> ATTACHED --detach--> DETACHED
 *   ATTACHED --attach(new pid)--> QUEUED (commit replaces the old pair)
 *   ATTACHED and the host netns dies: the kernel removes the pair; the slot
 *   stays ATTACHED in the fabric's books until detach or re-attach, both of
 *   which tolerate the pair being gone already.
 * Invariants: at most one veth pair per idx; the switch end of idx is named
 * "h<idx>" and has ifindex FL_FABRIC_PORT_IFINDEX_BASE + idx in the switch
 * netns; the host end is "eth0" with ifindex FL_FABRIC_ETH0_IFINDEX in the
 * host netns.
 *
 * Errors: every function returns 0 or a negative errno, and (where it takes
 * err/errlen) writes one line for people naming the host index, interface,
 * netlink/nft call and pid, e.g.
 *   "fabric: RTM_NEWLINK veth h3/eth0 in netns of pid 1234: File exists".
 * err may be NULL.
 *
 * Threads: a fabric is not thread-safe; use it from one thread.  The holder
 * gets PR_SET_PDEATHSIG, which fires when the *thread* that called
 * fl_fabric_create exits, so create the fabric from a thread that lives as
 * long as the fabric (the harness's main thread).  Calls that enter another
 * namespace (commit, partition, block, heal) setns() the calling thread only
 * and always return it to the namespace it was in; if returning fails the
 * process aborts rather than keep running in the wrong namespace.
 * The holder is cloned with exit signal 0: waitpid(-1, ...) without __WALL
 * in the harness never reaps it; fl_fabric_destroy reaps it.
 */
#ifndef FL_NETEM_FABRIC_H
#define FL_NETEM_FABRIC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Host indices are 0 .. FL_FABRIC_MAX_HOSTS-1: a Linux bridge has at most
 * 1023 ports (BR_MAX_PORTS 1024, port 0 reserved). */
#define FL_FABRIC_MAX_HOSTS 1023
/* Prefix length of every host address (198.18.0.0/15). */
#define FL_FABRIC_PREFIXLEN 15
/* Interface names: switch side "h<idx>", host side FL_FABRIC_HOST_IFNAME. */
#define FL_FABRIC_HOST_IFNAME "eth0"
#define FL_FABRIC_BRIDGE_IFNAME "br0"
/* Fixed interface indices (so no lookups are needed). */
#define FL_FABRIC_ETH0_IFINDEX 2         /* eth0, inside each host netns */
#define FL_FABRIC_PORT_IFINDEX_BASE 1000 /* h<idx>, inside the switch netns */
/* nftables table (bridge family) holding partition rules, in the switch ns. */
#define FL_FABRIC_NFT_TABLE "faultline"

struct fl_fabric;

/* Creates the switch namespace, its holder process and the bridge.
 * run_id (may be NULL) names the holder ("fl-sw <run_id>" in its comm,
 * truncated) and is set as the bridge's ifalias, for people and `gc`. */
int fl_fabric_create(struct fl_fabric **out, const char *run_id, char *err, size_t errlen);

/* Pid of the holder process: /proc/<pid>/ns/net is the switch namespace
 * (for `nsenter -t <pid> -n` when debugging). */
pid_t fl_fabric_switch_pid(const struct fl_fabric *f);

/* Address of host idx in NETWORK byte order (ready for sin_addr.s_addr):
 * 198.18.0.0 + idx + 1.  Returns 0 (INADDR_ANY) for an invalid idx. */
uint32_t fl_fabric_addr(int host_idx);
/* Same, as dotted text into buf (at least 16 bytes).  Returns buf, or ""
 * for an invalid idx. */
char *fl_fabric_addr_str(int host_idx, char *buf, size_t len);
/* MAC address of eth0 of host idx: 02:46:4c:ii:ii:ii (locally administered;
 * "FL" then idx).  Fixed per idx so that a restarted or replaced host keeps
 * the MAC its peers have in their ARP caches, and traffic to it resumes at
 * once instead of after ARP entries time out. */
void fl_fabric_mac(int host_idx, unsigned char mac[6]);
/* Name of the switch-side port of idx ("h<idx>") into buf (>= 16 bytes). */
char *fl_fabric_port_name(int host_idx, char *buf, size_t len);

/* Queues host idx (whose network namespace is that of host_pid) to be
 * plugged in at the next fl_fabric_commit.  Only checks arguments; nothing
 * touches the kernel yet.  Attaching an idx that is already attached (a
 * restarted host with a new pid) replaces its veth pair at commit.  host_pid's
 * netns must hold no interface with ifindex FL_FABRIC_ETH0_IFINDEX or named
 * eth0 (a fresh netns holds only lo).  -EINVAL on a bad idx/pid, -EEXIST if
 * idx is already queued, -ENOMEM. */
int fl_fabric_attach(struct fl_fabric *f, int host_idx, pid_t host_pid, char *err, size_t errlen);

/* Performs everything queued: one batched netlink round trip in the switch
 * namespace for all veth pairs, then one batched round trip per host inside
 * its netns (eth0: addrgenmode none, address, up; lo up).  The queue is
 * emptied whatever happens.  Returns 0 when every queued host is attached;
 * otherwise the first error (message in err); hosts that failed are left
 * DETACHED with their pair removed, the others are attached. */
int fl_fabric_commit(struct fl_fabric *f, char *err, size_t errlen);

/* Removes host idx's veth pair now (one round trip).  0 also when the pair
 * is already gone (the host's netns died) or idx was never attached.
 * A queued, uncommitted attach of idx is dropped too. */
int fl_fabric_detach(struct fl_fabric *f, int host_idx, char *err, size_t errlen);

/* Pins host idx's neighbours: every attached host gets a permanent
 * neighbour entry (address -> fl_fabric_mac) for idx on its eth0, and idx
 * one for every attached host, now and whenever one of them is attached
 * again (commit), for the rest of the fabric's life.  Without them a link
 * taken down loses no frame but queues them: the kernel flushes a host's
 * dynamic entries when its carrier goes, and what it then sends waits in
 * the neighbour's queue for ARP, to leave at once when the link comes
 * back; and a down shorter than the ARP retry could keep a host unresolved
 * through a whole up phase.  Pinned, nothing is ever resolved between them:
 * what is sent into a down link is lost, and traffic resumes the moment it
 * is up.  One netlink batch per attached host's netns (hosts that are gone
 * are skipped); again for an idx already pinned does nothing.  idx need not
 * be attached. */
int fl_fabric_pin_neighbours(struct fl_fabric *f, int host_idx, char *err, size_t errlen);

/* Runs the pending link-state work of host idx's eth0 now (RTM_GETLINK in
 * its netns, as commit does for new ports): after its switch port came back
 * up, its carrier and queue are on when this returns, instead of when the
 * kernel's linkwatch gets to them (tens of ms later, up to a second under
 * load), so its first frames are not dropped.  0 also when idx is not
 * attached or its host is gone. */
int fl_fabric_sync_host_link(struct fl_fabric *f, int host_idx, char *err, size_t errlen);

/* Partition: frames between hosts of different groups are dropped, both
 * ways; hosts in no group are unaffected.  groups[g] lists group_sizes[g]
 * host indices.  Needs at least two non-empty groups; a host in two groups
 * is -EINVAL.  Host indices need not be attached (yet).  *rule_id receives
 * an id (> 0) for fl_fabric_heal. */
int fl_fabric_partition(struct fl_fabric *f, const int *const *groups, const size_t *group_sizes,
                        size_t ngroups, int *rule_id, char *err, size_t errlen);

/* One-way block: every frame but ARP from any `from` host to any `to` host
 * is dropped; the reverse direction passes.  ARP passes both ways, or the
 * open direction could not resolve addresses (its ARP replies would travel
 * the blocked way).  So UDP from `to` reaches `from`, UDP from `from` to `to`
 * is lost, and TCP stalls both ways (its ACKs are blocked).  Both lists must
 * be non-empty. */
int fl_fabric_block(struct fl_fabric *f, const int *from, size_t nfrom, const int *to, size_t nto,
                    int *rule_id, char *err, size_t errlen);

/* A chain p<id> like a partition's, holding `rules`: nft rule
 * statements, one rule per line, each added as
 * "add rule bridge faultline p<id> <line>" (netem/link.c's loss and rate
 * marks).  Port names match as for partitions, so the rules stay in force
 * across a host's restart.  `what` names the caller in error messages
 * ("link loss").  fl_fabric_heal(*rule_id) removes the chain. */
int fl_fabric_add_chain(struct fl_fabric *f, const char *rules, const char *what, int *rule_id,
                        char *err, size_t errlen);

/* Removes exactly the rules of one partition/block.  -ENOENT for an unknown
 * (or already healed) id. */
int fl_fabric_heal(struct fl_fabric *f, int rule_id, char *err, size_t errlen);

/* Kills the holder (SIGKILL through a pidfd) and reaps it; the kernel then
 * frees the switch namespace, every veth pair (host ends included) and every
 * rule.  Host namespaces are not touched otherwise.  NULL is a no-op. */
void fl_fabric_destroy(struct fl_fabric *f);

#endif
