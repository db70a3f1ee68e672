/* SPDX-License-Identifier: Apache-2.0 */
/*
 * feistel.h — the global shuffle's bijection: a keyed Feistel network with
 * cycle walking over [0, n), computed from (seed, epoch) alone, O(1)
 * memory. The algorithm is specified in docs/shuffle.md (sections 3 and
 * 4); changing it changes every user's data order, so it is versioned
 * there.
 *
 * The bottom of the orders: the epoch order (perm.h) applies it to the
 * whole epoch, and shuffle=block (blockshuf.h) permutes its blocks and the
 * records inside each group of blocks with it. It knows neither.
 *
 * Pure functions; thread-safe.
 */
#ifndef BFS_FEISTEL_H
#define BFS_FEISTEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bfs_feistel {
	uint64_t n;
	uint64_t key[6];
	unsigned half; /* bits per Feistel half */
	uint64_t mask;
	int identity; /* n <= 1 or shuffle=none */
};

/* Set up the permutation of [0, n) for (seed, epoch). shuffle=0 gives the
 * identity. */
void bfs_feistel_init(struct bfs_feistel *f, uint64_t n, uint64_t seed, uint64_t epoch,
		      int shuffle);

/* The image of pos (< n). */
uint64_t bfs_feistel_apply(const struct bfs_feistel *f, uint64_t pos);
/* out[i] = bfs_feistel_apply(f, pos[i]) for i < n (out may be pos), faster;
 * vector: the AVX-512 rounds where the CPU has them (false: scalar only,
 * for tests of both). */
void bfs_feistel_apply_many(const struct bfs_feistel *f, const uint64_t *pos, size_t n,
			    uint64_t *out, bool vector);

/* The 64-bit mixer used by the keys and the round function. */
uint64_t bfs_mix64(uint64_t z);

#endif
