/* SPDX-License-Identifier: Apache-2.0 */
/*
 * allfiles.h — the files of all/ and all.safetensors (docs/contract.md,
 * "The whole epoch as one array"): their sizes and their bytes at any
 * offset, each epoch's tensors end to end.
 *
 * A size is the epoch view's (views.h: geometry and chunk totals, made
 * without decoding anything). A read is assembled into one buffer, since
 * split offsets are shifted by the chunks before (epoch.h): each tensor's
 * bytes come from the stash of small tensors (stash.h) or from the chunks
 * that hold them, asked of the cache (decoded on demand, prefetched
 * ahead), and every chunk in hand fills the stash. A chunk that fails (a
 * corrupt record under on_corrupt=fail) fails only the rows of the batch
 * holding that record: the chunk's other rows come from their batches.
 *
 * It owns the views and the stash; the cache is borrowed. Does not: know
 * FUSE, count reads (files.c does). Thread-safety: bfs_allfiles_new and
 * bfs_allfiles_free from one thread, the rest from any.
 */
#ifndef BFS_ALLFILES_H
#define BFS_ALLFILES_H

#include "cache.h"
#include "vfs.h"

#include <stddef.h>
#include <stdint.h>

struct bfs_allfiles;

/* b[nranks]: each rank's batcher; cache: where chunks are built (both
 * borrowed, and must outlive it); stash_budget: bytes of small tensors
 * kept (stash.h; 0: none); report(ctx, msg, 0): a view whose chunk
 * disagrees with the index, for errors.txt. -ENOMEM. */
int bfs_allfiles_new(struct bfs_allfiles **out, const struct bfs_batcher *const *b, size_t nranks,
		     struct bfs_cache *cache, uint64_t stash_budget, bfs_cache_error_fn report,
		     void *report_ctx);
void bfs_allfiles_free(struct bfs_allfiles *a); /* accepts NULL */

/* The size of n, a file of all/ or all.safetensors (n->all), without
 * decoding anything. Errors: the view's (-ENOMEM, -EFBIG...). */
int bfs_allfiles_size(struct bfs_allfiles *a, const struct bfs_vnode *n, uint64_t *size);

/* Bytes [off, off + len) of n (fewer at its end): *out (malloc'd, the
 * caller's; NULL when off is at or past the end) holds *got of them;
 * *rows: the rows of the epoch they cover (stats.h, bfs_stats_rows).
 * -EIO (a chunk or batch that cannot be decoded, a chunk that disagrees
 * with the index), -ENOMEM, or the view's error. */
int bfs_allfiles_read(struct bfs_allfiles *a, const struct bfs_vnode *n, uint64_t off, size_t len,
		      uint8_t **out, size_t *got, double *rows);

/* Bytes the stash holds now (stats.json's cache_bytes counts them). */
uint64_t bfs_allfiles_stash_bytes(struct bfs_allfiles *a);

#endif
