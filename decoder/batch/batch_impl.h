/* SPDX-License-Identifier: Apache-2.0 */
/*
 * batch_impl.h — the batcher and what the batch module's files share:
 * batch.c (geometry: rows, units, the epoch order's records, the batcher
 * made from a schema), batch_count.c (the ragged count pass), batch_fill.c
 * (a decoded record into its row of every tensor) and batch_build.c (a
 * unit built in parts). Internal to the module: users include batch.h.
 */
#ifndef BFS_BATCH_IMPL_H
#define BFS_BATCH_IMPL_H

#include "batch.h"
#include "bind.h"
#include "example.h"
#include "keymap.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* How far on_corrupt=skip looks for a valid substitute record: records
 * read and tried at most, and records looked at (their ragged counts). */
#define SKIP_MAX_TRIES 1024
#define SKIP_MAX_SCAN ((uint64_t)1 << 20)

/* One spec and the plan indices of its tensors (-1: none). */
struct driver {
	const struct bfs_feature_spec *spec;
	size_t key; /* its index in the batcher's context or list keymap */
	int main; /* MAIN, or VALUES for ragged */
	int aux; /* LENGTHS, VALUE_SPLITS, or ROW_SPLITS of RAGGED */
	int aux2; /* ROW_SPLITS of RAGGED2, VALUE_LENGTHS of a bytes feature list */
	/* a fixed-shape numeric context feature: n values of isz bytes in all
	 * (0: not such a feature); a row with exactly n values of the right
	 * kind is one copy (fill_driver), anything else takes fill_feature */
	uint64_t fixed_n, fixed_bytes;
	/* a column of bound decoding (bfs_bind_column): a fixed numeric
	 * feature of n floats or one int64, or one bytes value of n bytes;
	 * kind NONE: not a column */
	enum bfs_kind col_kind;
	uint32_t col_n;
	/* an augmented image feature: its F.crop and F.flip tensors (-1: none) */
	int crop, flip;
};

struct bfs_batcher {
	const struct bfs_dataset *ds;
	const struct bfs_schema *schema;
	struct bfs_plan *plan;
	struct bfs_batcher_opts o;
	uint64_t nrecords; /* of the dataset */
	uint64_t epoch_len; /* records per epoch: nrecords, or a mixture's L */
	/* a mixture's provenance tensors (_source, _record), or -1 */
	int prov_t[2];
	uint64_t global_nb; /* batches per epoch, single sequence */
	uint64_t nb; /* batches per epoch for this rank */
	uint64_t rows; /* rows of the epoch view (all/): its batches end to end */
	uint64_t chunk_rows, nchunks; /* all/ is decoded in chunks of this many rows */
	/* ragged counts: counts[slot][record]; NULL when plan->nslots == 0 */
	uint32_t **counts;
	/* the plan's ragged values tensors (role VALUES): their cursors move */
	size_t *ragged;
	size_t nragged;
	size_t ndrivers;
	struct driver *drivers;
	/* the drivers that are not columns, in driver order: a row whose every
	 * column was written during the walk needs only these */
	size_t *others;
	size_t nothers, ncolumns;
	/* the drivers' names, for bound decoding (example.h) */
	struct bfs_keymap *ctx_keys, *list_keys;
	size_t nctx_keys, nlist_keys;
	const char **key_names; /* context names, then list names */
	struct bfs_blocks *blocks; /* shuffle=block, else NULL */
	bool plain; /* no compressed shard: parts are read in chunks (READ_CHUNK, batch_build.c) */
	/* fixed-size tensors: the geometry of every full batch (a copy of it
	 * costs far less than its JSON header written again), else NULL */
	struct bfs_geom *full_geom;
	const struct bfs_batcher *base; /* a rank's copy: everything above is base's */
};

/* Write cursor of one output tensor. */
struct cursor {
	uint8_t *base; /* start of the tensor's data */
	uint64_t nbytes;
	uint64_t pos; /* RAGGED values: elements written; RAGGED2: bytes */
	uint64_t nvals; /* RAGGED2: values written */
};

/* Where row j's ragged values start, taken before it is filled (one per
 * ragged tensor: b->ragged), so that a row that fails can be filled again
 * from another record. */
struct row_mark {
	uint64_t pos, nvals;
};

static inline void bfs_batcher_row_mark(const struct bfs_batcher *b, const struct cursor *cur,
					struct row_mark *m)
{
	for (size_t k = 0; k < b->nragged; k++) {
		m[k].pos = cur[b->ragged[k]].pos;
		m[k].nvals = cur[b->ragged[k]].nvals;
	}
}

/* ---- batch_count.c ---------------------------------------------------------- */

/* The ragged counts of every record (b->counts): from index_dir where
 * cached, else by decoding the records over the jobs threads, then cached.
 * 0 or -ENOMEM. */
int bfs_batcher_count(struct bfs_batcher *b);

/* ---- batch_fill.c ------------------------------------------------------------ */

/* Decode record rec's bytes and fill row j from them (bound decoding, else
 * the whole example) for `epoch` (an augmented image's box is drawn from
 * it); the message names the record. */
int bfs_batcher_fill_row(const struct bfs_batcher *b, struct bfs_bind *bd, uint64_t epoch,
			 uint64_t rec, const uint8_t *data, uint32_t len, uint64_t j,
			 struct cursor *cur);
/* Undo what a failed fill wrote to row j, back to its mark m. */
void bfs_batcher_row_undo(const struct bfs_batcher *b, const struct bfs_geom *g, uint64_t j,
			  struct cursor *cur, const struct row_mark *m);
/* A record that failed with err: its bytes could not be had (the
 * source's fault: BFS_REPORT_SOURCE), or were had and are wrong (a failed
 * check or decode: a corrupt record, 0). */
static inline unsigned bfs_read_failure(int err)
{
	return err == -EBADMSG || err == -EINVAL || err == -EFBIG || err == -EILSEQ ||
			       err == -ERANGE
		       ? 0
		       : BFS_REPORT_SOURCE;
}

/* on_corrupt=skip: fill row j (undone) from a substitute for record bad;
 * rbuf (cap bytes) holds the records tried. */
int bfs_batcher_fill_substitute(const struct bfs_batcher *b, const struct bfs_geom *g,
				struct bfs_bind *bd, uint64_t epoch, uint64_t bad, uint64_t j,
				struct cursor *cur, const struct row_mark *m, uint8_t *rbuf,
				size_t cap, bfs_corrupt_fn on_corrupt, void *ctx);

#endif
