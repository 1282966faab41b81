/*
 * netem/fabric.h: the network fabric every host of a run plugs into.
 *
 * A fabric is a private "switch": an anonymous network namespace held by a
 * small holder process that the fabric clones itself (CLONE_NEWNET, exit
 * signal 0, PR_SET_PDEATHSIG SIGKILL, every inherited fd closed).  Inside it
 * bridges (up, no address, no STP, forward delay 0, no multicast snooping,
 * no IPv6, no bridge-netfilter calls until a link emulator asks for them):
 * "br0", and for hosts 512 and up one more per 512 hosts, "br<b>" for host
 * idx / FL_FABRIC_BRIDGE_HOSTS = b, made at the first commit that needs it
 * and joined to br0 by a veth pair, the trunk "tr<b>-br0" ══ "tr<b>-br<b>".
 * Each host is a network namespace (made by the host layer) joined to its
 * bridge by a veth pair:
 *
 *     switch netns:  br0 ── "h<idx>"  ══ veth ══  "eth0"  :host netns
 *                      │                           198.18.x.y/15, up
 *                      │                           lo up
 *                    "tr1-br0"
 *                      ║ veth (trunk)
 *                    "tr1-br1"
 *                      │
 *                    br1 ── "h<idx>" ══ veth ══ "eth0"   (idx 512..1023)
 *
 * Why more than one bridge: a Linux bridge has at most 1023 ports
 * (BR_MAX_PORTS 1024, port 0 reserved), and adding a port costs time in
 * proportion to the ports the bridge has already (promiscuity, STP port
 * state and feature recalculation walk them all), so 1024 hosts on two
 * bridges of 512 come up faster than 1023 on one.  A frame between hosts on
 * two leaf bridges crosses br0: at most three bridges, two trunks.
 * FL_FABRIC_MAX_HOSTS is 2048 (br0 and three leaves): more fits the address
 * plan and br0's ports, but 2048 is what has been brought up and measured
 * (bench/hosts.sh runs 1024).
 *
 * Matching a frame "from host a to host b" (partitions, blocks, link loss
 * and rate marks, fl_fabric_nft_match) is done where it leaves the switch
 * toward b: oifname "h<b>".  A frame from a host on another bridge arrives
 * there through a trunk, so besides iifname "h<a>" (same bridge) it is
 * recognised by its source MAC (fl_fabric_mac(a): fixed per index, and a
 * host cannot change it without privileges in its network namespace),
 * iifname "tr*" ether saddr <mac of a>.  The link emulator's ip-family rules
 * (nfq_rule.h) match a frame at exactly one bridge crossing by naming the
 * bridge (fl_fabric_bridge_ifindex).
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
 * namespace matching the switch-side port names (and, for frames that come
 * through a trunk, the senders' MACs: fl_fabric_nft_match), so a partition
 * stays in force across a host's restart (its port is re-created with the
 * same name, its eth0 with the same MAC).  A partition drops every frame
 * (ARP and IPv4 alike) between groups.
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
 * "h<idx>", has ifindex FL_FABRIC_PORT_IFINDEX_BASE + idx in the switch
 * netns and is a port of bridge idx / FL_FABRIC_BRIDGE_HOSTS; the host end is
 * "eth0" with ifindex FL_FABRIC_ETH0_IFINDEX in the host netns.  A bridge
 * br<b> (b >= 1) exists, with its trunk to br0, from the first commit of a
 * host on it to the fabric's end.
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

/* Hosts per bridge: host idx is a port of bridge idx / FL_FABRIC_BRIDGE_HOSTS
 * (a Linux bridge has at most 1023 ports; see the opening comment). */
#define FL_FABRIC_BRIDGE_HOSTS 512
#define FL_FABRIC_MAX_BRIDGES 4
/* Host indices are 0 .. FL_FABRIC_MAX_HOSTS-1. */
#define FL_FABRIC_MAX_HOSTS (FL_FABRIC_BRIDGE_HOSTS * FL_FABRIC_MAX_BRIDGES)
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
/* Host index of a fabric address (network byte order), or -1. */
int fl_fabric_addr_idx(uint32_t addr);
/* Interface index, in the switch namespace, of the bridge host idx is a port
 * of (br0 = 999, br<b> = 999 - 3b), or 0 for an invalid idx.  What the ip
 * family's iif/oif see of a bridged frame (br_netfilter). */
int fl_fabric_bridge_ifindex(int host_idx);

/* nft match text (bridge family, table FL_FABRIC_NFT_TABLE) for the frames
 * from any host of `from` to any host of `to`, at the port where they leave
 * the switch toward the `to` host: one match a line,
 *     iifname { "h1", ... } oifname { "h2", ... }
 * and, when some pair of them is on two different bridges, a second
 *     iifname "tr*" ether saddr { <macs of from> } oifname { ... }
 * Each line is a frame's single match: a rule made of one line and a
 * statement acts on a frame once however many bridges it crosses.  Returns
 * malloc'd text (the caller frees it), or NULL when out of memory. */
char *fl_fabric_nft_match(const int *from, size_t nfrom, const int *to, size_t nto);

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

/* Makes every bridge of the fabric, and every one made later, pass bridged
 * IPv4 frames through the ip family's hooks (nf_call_iptables), where the
 * link emulator's queue rules are (nfq_rule.h). */
int fl_fabric_set_nf_call_iptables(struct fl_fabric *f, char *err, size_t errlen);

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
