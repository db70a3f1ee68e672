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
 * Partitions (docs/shuffle.md, section 5.1): the cut may be dealt once
 * into P partitions of nearly equal record counts (bfs_blocks_partition),
 * each a list of *pieces* (a block, or the part of one at a partition's
 * edge) fixed for the dataset and the seed, the same in every epoch. Each
 * partition is then block-shuffled on its own every epoch, and global
 * batch g of the epoch is batch g div P of partition g mod P, so that for
 * every world W dividing P a rank's batches come from its own partitions
 * only. Without partitions (P = 1) the pieces are the blocks, partition 0
 * holds them all, and its positions are the epoch's.
 *
 * Does not: read records or decode. Thread-safety: every function may be
 * called from any thread (the cache has its own lock; cuts and orders are
 * immutable once partitioned).
 */
#ifndef BFS_BLOCKSHUF_H
#define BFS_BLOCKSHUF_H

#include "dataset.h"

#include <stddef.h>
#include <stdint.h>

struct bfs_blocks;
struct bfs_block_order;

/* Partitions at most (the option's bound). */
#define BFS_MAX_PARTITIONS ((uint64_t)1 << 20)
/* partitions=auto: every partition holds at least window blocks, this
 * many batches (so that the records an epoch leaves out, fewer than a
 * batch per partition, stay few) and this many bytes of records (data and
 * framing: a default window's, so that a small dataset, whatever its
 * block_size and window, is one partition) */
#define BFS_AUTO_PART_BATCHES 32
#define BFS_AUTO_PART_BYTES ((uint64_t)256 << 20)

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
uint64_t bfs_blocks_window(const struct bfs_blocks *bl);
/* First record of block k (k <= count; k == count gives the record count). */
uint64_t bfs_blocks_start(const struct bfs_blocks *bl, uint64_t k);

/* partitions=auto for batches of batch_size records: the largest power of
 * two (at most BFS_MAX_PARTITIONS) whose partitions each hold at least
 * window blocks, BFS_AUTO_PART_BATCHES batches and BFS_AUTO_PART_BYTES;
 * 1 for a small dataset. */
uint64_t bfs_blocks_auto_partitions(const struct bfs_blocks *bl, uint64_t batch_size);
/* Deal the cut into nparts partitions for batches of batch_size records
 * (before any order is made; nparts 1 leaves it as it is). -EINVAL when a
 * partition would hold fewer records than a batch, or nparts is 0 or
 * above BFS_MAX_PARTITIONS (message names partitions=); -ENOMEM. */
int bfs_blocks_partition(struct bfs_blocks *bl, uint64_t nparts, uint64_t batch_size);
uint64_t bfs_blocks_nparts(const struct bfs_blocks *bl);
/* Positions of an epoch: the record count (P = 1), else P times the
 * whole batches of the smallest partition. */
uint64_t bfs_blocks_epoch_len(const struct bfs_blocks *bl);
/* The pieces (the blocks when P = 1), numbered partition after partition,
 * and inside one by first record: piece k holds records [*first, *end). */
uint64_t bfs_blocks_npieces(const struct bfs_blocks *bl);
void bfs_blocks_piece(const struct bfs_blocks *bl, uint64_t k, uint64_t *first, uint64_t *end);
/* Partition q's pieces [*k0, *k1), and its records. */
void bfs_blocks_part_pieces(const struct bfs_blocks *bl, uint64_t q, uint64_t *k0, uint64_t *k1);
uint64_t bfs_blocks_part_records(const struct bfs_blocks *bl, uint64_t q);

/* The order of `epoch` with a reference for the caller (release with
 * bfs_block_order_put). -ENOMEM. */
int bfs_block_order_get(struct bfs_block_order **out, struct bfs_blocks *bl, uint64_t epoch);
void bfs_block_order_put(struct bfs_block_order *o); /* accepts NULL */

/* Epoch position pos (< the epoch's length): its partition *q and its
 * position *u in that partition's own order. */
void bfs_block_order_locate(const struct bfs_block_order *o, uint64_t pos, uint64_t *q,
			    uint64_t *u);
/* The groups of window pieces that partition q goes through in turn; the
 * group holding its position u; and group g (< ngroups): its positions
 * [*u0, *u1) in the partition and its pieces, pieces[0..*n) (piece
 * numbers of bfs_blocks_piece, borrowed from o). */
uint64_t bfs_block_order_ngroups(const struct bfs_block_order *o, uint64_t q);
uint64_t bfs_block_order_group_of(const struct bfs_block_order *o, uint64_t q, uint64_t u);
void bfs_block_order_group(const struct bfs_block_order *o, uint64_t q, uint64_t g, uint64_t *u0,
			   uint64_t *u1, const uint64_t **pieces, uint64_t *n);
/* The record at epoch position pos (< the epoch's length). */
uint64_t bfs_block_order_apply(const struct bfs_block_order *o, uint64_t pos);
/* out[i] = bfs_block_order_apply(o, pos[i]) for i < n (out may be pos),
 * faster for runs of nearby positions. */
void bfs_block_order_apply_many(const struct bfs_block_order *o, const uint64_t *pos, size_t n,
				uint64_t *out);

#endif
