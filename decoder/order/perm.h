/* SPDX-License-Identifier: Apache-2.0 */
/*
 * perm.h — the epoch order: the record at each position of an epoch, for
 * every shuffle: none (the identity), global (the Feistel bijection of
 * feistel.h over the whole epoch) or block (the block order of
 * blockshuf.h, attached by the batcher). Callers map positions to records
 * one way, whichever it is. docs/shuffle.md specifies the orders.
 *
 * Pure functions; thread-safe.
 */
#ifndef BFS_PERM_H
#define BFS_PERM_H

#include "feistel.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bfs_block_order; /* blockshuf.h */
struct bfs_mix; /* mix.h */

struct bfs_perm {
	struct bfs_feistel f; /* shuffle=global, or the identity */
	/* shuffle=block: the epoch's block order (a reference, dropped by
	 * bfs_perm_release), which apply then follows; NULL otherwise */
	struct bfs_block_order *bo;
	/* a mixture (mix.h, borrowed): position p of the epoch is stream
	 * position epoch * L + p, which apply then follows; NULL otherwise */
	const struct bfs_mix *mix;
	uint64_t epoch;
};

/* Set up the permutation of [0, n) for (seed, epoch). shuffle=0 gives the
 * identity. */
void bfs_perm_init(struct bfs_perm *p, uint64_t n, uint64_t seed, uint64_t epoch, int shuffle);
/* The order of epoch `epoch` of a mixture. */
void bfs_perm_init_mix(struct bfs_perm *p, const struct bfs_mix *mix, uint64_t epoch);
/* Drop the block order a permutation holds (none: nothing to do). */
void bfs_perm_release(struct bfs_perm *p);

/* out[i] = the record at position pos[i] (< n) for i < n (out may be
 * pos); a position at a time is the order's formula (feistel.h,
 * blockshuf.h, mix.h). */
void bfs_perm_apply_many(const struct bfs_perm *p, const uint64_t *pos, size_t n, uint64_t *out);
/* The same with the vector rounds allowed or not (for tests of both). */
void bfs_perm_apply_many_how(const struct bfs_perm *p, const uint64_t *pos, size_t n, uint64_t *out,
			     bool vector);

#endif
