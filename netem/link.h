/*
 * netem/link.h: link faults on a fabric (fabric.h): random loss, rate limits
 * and links taken down, all inside the run's switch namespace.
 *
 * The machine has no sch_netem, so each fault is built from what the kernel
 * does have:
 *   loss   an nft chain (fabric.h's p<id>, jumped to from the bridge's
 *          forward hook) with
 *          "numgen random mod 10000 < N drop" on the frames the fault covers;
 *          ARP is exempt, so address resolution is not what gets lost.  The
 *          kernel's generator cannot be seeded: which frames are lost is not
 *          reproducible, only the fraction.
 *   rate   an htb qdisc (handle 1:) on the switch port toward each receiving
 *          host (egress of h<idx> = traffic to that host), one class 1:<cid>
 *          per fault on each of those ports, and an nft rule in the fault's
 *          chain that sets "meta priority 1:<cid>" on the frames the fault
 *          covers: htb puts a packet whose priority names one of its classes
 *          in that class, everything else goes to htb's unlimited direct
 *          queue.  So every direction is shaped where it leaves the switch
 *          and nothing is put in the hosts' namespaces.
 *   emu    (delay, jitter, reorder, duplicate, corrupt, bursty loss): IPv4
 *          frames between the fault's hosts (by address) are queued to
 *          NFQUEUE queue <id> (nfq_rule.h: chain q<id> of table ip
 *          fl_netem), bound by the fabric's emulator (emu.h, a thread
 *          started at the first such fault).  Heal: the queue rules go,
 *          then the queue (what it held is released at once).
 *   down   the host's switch port h<idx> administratively down (its eth0
 *          loses carrier: a pulled cable); a count per port, so two faults
 *          downing one port bring it up only when both are healed.  The
 *          host's neighbours are pinned first (fl_fabric_pin_neighbours),
 *          so what is sent into the cut link is lost rather than queued for
 *          ARP and delivered at the heal, and coming up syncs both ends'
 *          link state, so traffic resumes at once both ways.
 * Qdiscs and link states are per port: when a host restarts its port is made
 * again (fabric commit) and fl_links_port_remade puts back what the active
 * faults need; nft rules match port names and stay in force by themselves.
 * Everything dies with the switch namespace at the end of the run.
 *
 * Which frames a fault covers (struct fl_link_spec):
 *   FL_LINK_BETWEEN  frames between any two of a[] (both ways);
 *   FL_LINK_ONEWAY   frames from any of a[] to any of b[];
 *   FL_LINK_HOST     every frame to or from a[] (loss, down; not rate).
 * A rate limits what each receiving host gets from the fault's senders,
 * together: BETWEEN [x, y, z] shapes x->y and z->y into one class on y's
 * port, and so on.
 *
 * Errors: 0 or a negative errno; err gets one line naming the call, port and
 * namespace ("link: RTM_NEWTCLASS 1:3 on h2 in switch netns (pid 123): ...").
 * Not thread-safe; use from the fabric's thread.
 */
#ifndef FL_NETEM_LINK_H
#define FL_NETEM_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct fl_fabric;
struct fl_links;
struct fl_emu_params;

enum fl_link_scope {
    FL_LINK_BETWEEN = 1,
    FL_LINK_ONEWAY,
    FL_LINK_HOST,
};

/* Bounds of a rate, bit/s (htb's 32-bit byte rate; below 8 kbit/s htb's
 * arithmetic is coarse). */
#define FL_LINK_RATE_MIN 8000ULL
#define FL_LINK_RATE_MAX 32000000000ULL

struct fl_link_spec {
    enum fl_link_scope scope;
    const int *a; /* host indices */
    size_t na;
    const int *b; /* ONEWAY: receivers */
    size_t nb;
    unsigned loss_bp;                /* 0..10000: hundredths of a percent dropped; 0 = none */
    uint64_t rate_bit;               /* bit/s, 0 = none; not with FL_LINK_HOST */
    bool down;                       /* FL_LINK_HOST only, alone */
    const struct fl_emu_params *emu; /* delay, jitter, ... (emu.h); NULL = none */
};

/* The link faults of fabric f (which must outlive them). */
int fl_links_new(struct fl_links **out, struct fl_fabric *f, char *err, size_t errlen);
/* Frees the books (the kernel objects die with the switch namespace). */
void fl_links_free(struct fl_links *l);

/* Applies a fault; *id (> 0) is for fl_links_heal.  A fault half applied
 * when an error occurs is undone before returning. */
int fl_links_apply(struct fl_links *l, const struct fl_link_spec *spec, int *id, char *err,
                   size_t errlen);
/* Undoes fault id: its chain, its classes, its ports' down counts. -ENOENT
 * for an unknown or healed id. */
int fl_links_heal(struct fl_links *l, int id, char *err, size_t errlen);

/* Flapping: takes the ports of a `down` fault's hosts down (down=true) or
 * brings them back up (counts as healing its down, without forgetting the
 * fault).  Idempotent per fault. */
int fl_links_set_down(struct fl_links *l, int id, bool down, char *err, size_t errlen);

/* After host idx's port was made again (a restarted or replaced host): puts
 * back the htb classes and the down state the active faults need on it. */
int fl_links_port_remade(struct fl_links *l, int host_idx, char *err, size_t errlen);

/* Whether host idx's port is down by a fault now (for tests). */
bool fl_links_port_is_down(const struct fl_links *l, int host_idx);

#endif
