/* SPDX-License-Identifier: Apache-2.0 */
/*
 * blockshuf.h — the epoch order of `shuffle=block`: blocks of consecutive
 * records are permuted, and records are shuffled inside groups of `window`
 * consecutive blocks of that permuted sequence. The algorithm is specified
 * in docs/shuffle.md (section 5); like the global shuffle it
 * is version-stable, and any position maps to its record without replaying
 * the epoch (O(log) per position after an O(blocks) set-up per epoch).
 *
 * The cut (struct bfs_blocks) is made once per mount: a block takes the
 * records that fit in block_size bytes (data + 16 framing bytes each), at
 * least one, and never spans two shards. An epoch's order (struct
 * bfs_block_order, 16 bytes per block) is built on first use and kept in a
 * small cache of recent epochs; orders are refcounted so that one in use
 * outlives its eviction.
 *
 * Does not: read records or decode. Thread-safety: every function may be
 * called from any thread (the cache has its own lock; cuts and orders are
 * immutable).
 */
#ifndef BFS_BLOCKSHUF_H
#define BFS_BLOCKSHUF_H

#include "dataset.h"

#include <stddef.h>
#include <stdint.h>

struct bfs_blocks;
struct bfs_block_order;

/* Cut the dataset's records into blocks. -EINVAL block_size or window 0,
 * -ENOMEM. */
int bfs_blocks_new(struct bfs_blocks **out, const struct bfs_dataset *ds, uint64_t block_size,
		   uint64_t window, uint64_t seed);
/* The same from record data lengths: lens[n], shards given by their record
 * counts (shard_nrec[nshards], summing to n). For tests and tools. */
int bfs_blocks_from_lens(struct bfs_blocks **out, const uint32_t *lens, uint64_t n,
			 const uint64_t *shard_nrec, size_t nshards, uint64_t block_size,
			 uint64_t window, uint64_t seed);
void bfs_blocks_free(struct bfs_blocks *bl); /* accepts NULL; no order may be held */

uint64_t bfs_blocks_count(const struct bfs_blocks *bl);
/* First record of block k (k <= count; k == count gives the record count). */
uint64_t bfs_blocks_start(const struct bfs_blocks *bl, uint64_t k);

/* The order of `epoch` with a reference for the caller (release with
 * bfs_block_order_put). -ENOMEM. */
int bfs_block_order_get(struct bfs_block_order **out, struct bfs_blocks *bl, uint64_t epoch);
void bfs_block_order_put(struct bfs_block_order *o); /* accepts NULL */

/* The groups of window blocks that the epoch goes through in turn; the
 * group holding epoch position pos; and group g (< ngroups): its epoch
 * positions [*p0, *p1) and its blocks, blocks[0..*nb) (borrowed from o). */
uint64_t bfs_block_order_ngroups(const struct bfs_block_order *o);
uint64_t bfs_block_order_group_of(const struct bfs_block_order *o, uint64_t pos);
void bfs_block_order_group(const struct bfs_block_order *o, uint64_t g, uint64_t *p0, uint64_t *p1,
			   const uint64_t **blocks, uint64_t *nb);
/* The record at epoch position pos (< the record count). */
uint64_t bfs_block_order_apply(const struct bfs_block_order *o, uint64_t pos);
/* out[i] = bfs_block_order_apply(o, pos[i]) for i < n (out may be pos),
 * faster for runs of nearby positions. */
void bfs_block_order_apply_many(const struct bfs_block_order *o, const uint64_t *pos, size_t n,
				uint64_t *out);

#endif
