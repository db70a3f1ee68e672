/* SPDX-License-Identifier: Apache-2.0 */
/*
 * epoch.h — the whole epoch as one array (all/): its geometry, and where
 * each byte of its tensors lies in the chunks it is decoded in.
 *
 * Row i*B + j of the view is row j of local batch i (batch.h). A view file
 * is never decoded whole: a read asks for chunks of bfs_batcher_chunk_rows
 * rows (built like batches, BFS_CHUNK in batch.h) and copies its bytes out
 * of them. Fixed-row tensors and ragged values are slices of the chunks'
 * tensors; the split tensors (row_splits, value_splits) are offsets over
 * the whole epoch, so a chunk's own offsets (which start at 0) are shifted
 * by the totals of the chunks before it. Those totals come from the
 * per-record counts of the index (one pass over the epoch's permutation),
 * so stat-ing a view file decodes nothing.
 *
 * Does not: decode, cache or know FUSE. Thread-safety: immutable after
 * creation.
 */
#ifndef BFS_EPOCH_H
#define BFS_EPOCH_H

#include "batch.h"

/* The view of one epoch. Without ragged tensors it is the same for every
 * epoch (nothing in it depends on the order), so it carries no epoch: the
 * reader names the epoch whose chunks it asks for. */
struct bfs_epoch_view {
	uint64_t rows, chunk_rows, nchunks;
	struct bfs_geom *geom; /* of the whole epoch: all/ files and all.safetensors */
	const struct bfs_plan *plan;
	size_t nslots;
	uint64_t *prefix; /* [(nchunks + 1) * nslots]: ragged totals of chunks 0..c-1 */
	struct view_tensor *vt; /* [plan->ntensors] */
};

int bfs_epoch_view_new(struct bfs_epoch_view **out, const struct bfs_batcher *b, uint64_t epoch);
void bfs_epoch_view_free(struct bfs_epoch_view *v); /* accepts NULL */

/* Tensor t's bytes per row when each row has as many (row r at r times
 * that, in the view and in a batch alike); 0 for ragged values and
 * offsets. */
uint64_t bfs_epoch_view_row_bytes(const struct bfs_epoch_view *v, size_t t);

/* The chunk holding byte `off` (< geom->g[t].nbytes) of tensor t's data. */
uint64_t bfs_epoch_view_chunk(const struct bfs_epoch_view *v, size_t t, uint64_t off);

/* Bytes [*lo, *hi) of tensor t's data are chunk c's (< nchunks); *base:
 * what its offsets are shifted by (0 but for split tensors). The spans of
 * split tensors' neighbouring chunks share their boundary offset. */
void bfs_epoch_view_span(const struct bfs_epoch_view *v, size_t t, uint64_t c, uint64_t *lo,
			 uint64_t *hi, uint64_t *base);

/* Copy what chunk c holds of bytes [off, off + n) of tensor t's data into
 * dst, from the chunk's buffer and geometry (the build of unit
 * c | BFS_CHUNK). Returns the bytes written: at least 1 when off lies in
 * chunk c (as bfs_epoch_view_chunk says), 0 otherwise. */
uint64_t bfs_epoch_view_copy(const struct bfs_epoch_view *v, size_t t, uint64_t c,
			     const uint8_t *cbuf, const struct bfs_geom *cg, uint64_t off,
			     uint64_t n, uint8_t *dst);

#endif
