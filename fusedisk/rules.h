/*
 * fusedisk/rules.h: a fusedisk's table of fault rules (see fusedisk.h), apart
 * from FUSE so that it can be tested alone.
 */
#ifndef FL_FUSEDISK_RULES_H
#define FL_FUSEDISK_RULES_H

#include "fusedisk/fusedisk.h"

#include <pthread.h>

struct fl_fd_rules {
    pthread_rwlock_t lock;
    pthread_mutex_t where_mu; /* each rule's record of where it hit */
    struct fl_fd_live *rules; /* in the order added */
    size_t n, cap;
    int next_id;
};

/* What an operation is to suffer: err > 0 fails it; else delay_us, then
 * short_len > 0 cuts a write. */
struct fl_fd_hit {
    int err;
    uint64_t delay_us;
    uint64_t short_len;
};

void fl_fd_rules_init(struct fl_fd_rules *t);
void fl_fd_rules_free(struct fl_fd_rules *t);
int fl_fd_rules_add(struct fl_fd_rules *t, const struct fl_fd_rule *r);
int fl_fd_rules_remove(struct fl_fd_rules *t, int id);
uint64_t fl_fd_rules_hits(struct fl_fd_rules *t, int id);
/* Where rule id hit (see fl_fusedisk_where). */
size_t fl_fd_rules_where(struct fl_fd_rules *t, int id, struct fl_fd_where *out, size_t max,
                         uint64_t *more);
/* The first rule for op on path (or path2, when not NULL: a rename's other
 * name) that wins its draw: true and *hit filled, or false. */
bool fl_fd_rules_match(struct fl_fd_rules *t, unsigned op, const char *path, const char *path2,
                       struct fl_fd_hit *hit);

#endif
