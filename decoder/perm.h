/*
 * perm.h — the epoch permutation: a keyed Feistel bijection with cycle
 * walking, computed from (seed, epoch) alone, O(1) memory. The algorithm is
 * specified in docs/shuffle.md (sections 3 and 4); changing it
 * changes every user's data order, so it is versioned there.
 *
 * The same type carries a shuffle=block order (blockshuf.h) when one is
 * attached, so that callers map positions to records one way.
 *
 * Pure functions; thread-safe.
 */
#ifndef BFS_PERM_H
#define BFS_PERM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bfs_block_order; /* blockshuf.h */

struct bfs_perm {
	uint64_t n;
	/* shuffle=block: the epoch's block order (a reference, dropped by
	 * bfs_perm_release), which apply then follows; NULL otherwise */
	struct bfs_block_order *bo;
	uint64_t key[6];
	unsigned half; /* bits per Feistel half */
	uint64_t mask;
	int identity; /* n <= 1 or shuffle=none */
};

/* Set up the permutation of [0, n) for (seed, epoch). shuffle=0 gives the
 * identity. */
void bfs_perm_init(struct bfs_perm *p, uint64_t n, uint64_t seed, uint64_t epoch, int shuffle);
/* Drop the block order a permutation holds (none: nothing to do). */
void bfs_perm_release(struct bfs_perm *p);

/* The record at position pos (< n). */
uint64_t bfs_perm_apply(const struct bfs_perm *p, uint64_t pos);
/* out[i] = bfs_perm_apply(p, pos[i]) for i < n, faster. */
void bfs_perm_apply_many(const struct bfs_perm *p, const uint64_t *pos, size_t n, uint64_t *out);
/* The same with the vector rounds allowed or not (for tests of both). */
void bfs_perm_apply_many_how(const struct bfs_perm *p, const uint64_t *pos, size_t n, uint64_t *out,
			     bool vector);

/* The 64-bit mixer used by the keys and the round function. */
uint64_t bfs_mix64(uint64_t z);

#endif
