/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stash.h — the small tensors of an epoch view (all/, all.safetensors),
 * kept whole so that reading the view's columns one after another costs
 * one pass over the epoch's chunks, not one per column.
 *
 * all.safetensors lays each tensor out for the whole epoch, one after
 * another; all/F.npy are read one after another. When the decoded epoch
 * does not fit the cache, each column would be a pass of its own over the
 * chunks (and the records they are decoded from). Whenever a chunk is in
 * hand for any tensor's read, bfs_stash_fill copies out that chunk's part
 * of each small tensor (the exact bytes bfs_epoch_view_copy gives, split
 * offsets already shifted); a later read of such a tensor is served from
 * here, chunk by chunk, once the chunk's part is held.
 *
 * A tensor is small when its epoch bytes are at most a quarter of the
 * budget, or at most the budget and an eighth of the epoch's bytes; the
 * stash holds a few (rank, epoch) entries, within `budget`
 * bytes in all, the least recently used one out first. An epoch whose
 * tensors are all small is not stashed (its chunks fit the cache).
 *
 * Does not: decode, fetch, or hold chunks. Thread-safety: every function
 * may be called from any thread; one mutex guards it all (copies are of
 * small tensors' parts of one chunk).
 */
#ifndef BFS_STASH_H
#define BFS_STASH_H

#include <stdint.h>

#include "epoch.h"

struct bfs_stash;

/* budget: bytes it may hold (0: it holds nothing). -ENOMEM. */
int bfs_stash_new(struct bfs_stash **out, uint64_t budget);
void bfs_stash_free(struct bfs_stash *s); /* accepts NULL */

/* Chunk c of (rank, epoch) of view v is in hand (cbuf, cg: its decoded
 * buffer and geometry): keep its part of each small tensor. Never fails
 * (without memory, or when the chunk disagrees with the view, it keeps
 * nothing). */
void bfs_stash_fill(struct bfs_stash *s, const struct bfs_epoch_view *v, uint64_t rank,
		    uint64_t epoch, uint64_t c, const uint8_t *cbuf, const struct bfs_geom *cg);

/* Like bfs_epoch_view_copy, from the stash: what chunk c holds of bytes
 * [off, off + n) of tensor t's data, into dst. Returns the bytes written,
 * 0 when the stash does not hold chunk c's part of tensor t. */
uint64_t bfs_stash_read(struct bfs_stash *s, const struct bfs_epoch_view *v, uint64_t rank,
			uint64_t epoch, size_t t, uint64_t c, uint64_t off, uint64_t n,
			uint8_t *dst);

/* Bytes it holds now (for tests and stats). */
uint64_t bfs_stash_bytes(struct bfs_stash *s);

#endif
