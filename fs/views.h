/* SPDX-License-Identifier: Apache-2.0 */
/*
 * views.h — the epoch views behind all/ and all.safetensors (epoch.h),
 * kept for the last few epochs asked for and shared by every reader.
 *
 * A view costs a pass over its epoch's permutation when a tensor is
 * ragged; without ragged tensors every epoch of a rank has the same view,
 * made once. The table holds `keep` views, the least recently asked for
 * out first; a reader's reference keeps its view alive past that.
 *
 * Does not: decode or hold chunks (cache.h), know FUSE. Thread-safety:
 * every function may be called from any thread; one mutex guards the table
 * and the reference counts; a view is immutable.
 */
#ifndef BFS_VIEWS_H
#define BFS_VIEWS_H

#include "epoch.h"

struct bfs_views;

/* A reference to a view. */
struct bfs_view_ref {
	struct bfs_epoch_view *v; /* immutable */
	int refs; /* private: the table's lock */
};

/* b[nranks]: each rank's batcher (borrowed; they must outlive the table).
 * keep: views held in the table (at least 1). -ENOMEM. */
int bfs_views_new(struct bfs_views **out, const struct bfs_batcher *const *b, size_t nranks,
		  unsigned keep);
/* Frees the table's views; references still held must be put first.
 * Accepts NULL. */
void bfs_views_free(struct bfs_views *vs);

/* The view of (rank < nranks, epoch), made if the table has none (outside
 * the lock: two readers may make one at once, and the second one's is
 * dropped). A reference for the caller: release with bfs_views_put.
 * Errors: those of bfs_epoch_view_new (-ENOMEM, -EFBIG...). */
int bfs_views_get(struct bfs_view_ref **out, struct bfs_views *vs, uint64_t rank, uint64_t epoch);
void bfs_views_put(struct bfs_views *vs, struct bfs_view_ref *r); /* accepts NULL */

#endif
