/* SPDX-License-Identifier: Apache-2.0 */
/*
 * batch.h — from (epoch, batch) to the bytes of that batch.
 *
 * A batcher binds a dataset, a schema and the batching options. It maps a
 * (rank-local) batch number to the records it holds through the epoch
 * permutation (perm.h), computes the exact geometry of every output tensor
 * without decoding (ragged sizes come from per-record counts gathered once
 * at creation, or read back from index_dir: cntcache.h), and assembles a
 * batch into one buffer laid out as the whole .safetensors file (tensor.h).
 *
 * Does not: cache, prefetch, or know FUSE. Thread-safety: after creation a
 * batcher is immutable; its builds (bfs_build_*) may run on many threads at
 * once.
 */
#ifndef BFS_BATCH_H
#define BFS_BATCH_H

#include "blockshuf.h"
#include "dataset.h"
#include "mix.h"
#include "perm.h"
#include "schema.h"
#include "tensor.h"

enum bfs_on_corrupt {
	BFS_ON_CORRUPT_FAIL = 0,
	BFS_ON_CORRUPT_SKIP,
};

struct bfs_batcher_opts {
	uint64_t batch_size;
	uint64_t seed;
	bool shuffle;
	/* with shuffle: shuffle=block (blockshuf.h) over blocks of about
	 * block_size bytes, records shuffled within `window` blocks */
	bool block;
	uint64_t block_size, window;
	/* shuffle=block: the partitions the blocks are dealt into (blockshuf.h;
	 * 0: bfs_blocks_auto_partitions); with P > 1 an epoch has P times the
	 * smallest partition's whole batches, and drop_remainder changes
	 * nothing */
	uint64_t partitions;
	bool drop_remainder;
	uint64_t rank, world;
	bool verify;
	enum bfs_on_corrupt on_corrupt;
	uint64_t max_batch_bytes; /* 0: no limit */
	unsigned jobs; /* threads for the one-time ragged count pass */
	/* where the ragged counts of each shard are cached (counts.h), keyed
	 * by the shard and the ragged features: a shard with a valid file is
	 * not decoded at creation. NULL: no cache. */
	const char *index_dir;
	/* worth one log line (may be NULL): a counts file rebuilt and why
	 * (shard names it), or counts not written (shard NULL). msg borrowed. */
	void (*on_note)(void *ctx, const char *shard, const char *msg);
	void *note_ctx;
	uint64_t chunk_rows; /* rows per chunk of all/; 0: about 2 MiB of rows */
	uint64_t image_max_pixels; /* image features: larger images are corrupt; 0: default */
	/* a mixture (mix.h; borrowed, must outlive the batcher): epochs are
	 * its slices of L records, in its order, and the dataset is the union
	 * of its sources (bfs_dataset_union); shuffle=block is refused */
	const struct bfs_mix *mix;
};

struct bfs_batcher;

/* A corrupt record met while building: `msg` names shard, record index,
 * offset and reason; flags: BFS_REPORT_SKIPPED when it was replaced
 * (on_corrupt=skip), BFS_REPORT_SOURCE when its bytes could not be read
 * (an I/O error, the network, an object store that gave up, a file cut
 * short since it was indexed) rather than read and found wrong. */
#define BFS_REPORT_SKIPPED 1u
#define BFS_REPORT_SOURCE 2u
typedef void (*bfs_corrupt_fn)(void *ctx, const char *msg, unsigned flags);

/* The schema and dataset are borrowed and must outlive the batcher.
 * Errors: -EINVAL bad options (message names the option), -EFBIG a batch
 * would exceed max_batch_bytes or 2^64, -ENOMEM. */
int bfs_batcher_new(struct bfs_batcher **out, const struct bfs_dataset *ds,
		    const struct bfs_schema *s, const struct bfs_batcher_opts *o);
void bfs_batcher_free(struct bfs_batcher *b);
/* The same batcher as rank `rank` of its world (world=W without rank: one
 * mount serves every rank): shares the plan, the ragged counts and the
 * blocks with `base`, which must outlive it. -EINVAL rank >= world. */
int bfs_batcher_new_rank(struct bfs_batcher **out, const struct bfs_batcher *base, uint64_t rank);

const struct bfs_plan *bfs_batcher_plan(const struct bfs_batcher *b);
/* Batches per epoch shown to this rank. */
uint64_t bfs_batcher_nbatches(const struct bfs_batcher *b);
/* Records an epoch holds, before rank/world: the dataset's, a mixture's L. */
uint64_t bfs_batcher_epoch_len(const struct bfs_batcher *b);
/* The options' batch_size, rank and world. */
uint64_t bfs_batcher_batch_size(const struct bfs_batcher *b);
uint64_t bfs_batcher_rank(const struct bfs_batcher *b);
uint64_t bfs_batcher_world(const struct bfs_batcher *b);
/* Records in local batch `batch` (B, or the remainder for the last). */
uint64_t bfs_batcher_batch_len(const struct bfs_batcher *b, uint64_t batch);

/* The whole epoch as one array (all/): the rank's batches end to end, so
 * row i*B + j is row j of local batch i. It is decoded in chunks of
 * bfs_batcher_chunk_rows rows (the last may be shorter); a unit number with
 * BFS_CHUNK set names chunk (unit & ~BFS_CHUNK) wherever a batch number is
 * taken below (geometry, build). */
#define BFS_CHUNK ((uint64_t)1 << 63)
uint64_t bfs_batcher_rows(const struct bfs_batcher *b);
uint64_t bfs_batcher_chunk_rows(const struct bfs_batcher *b);
uint64_t bfs_batcher_nchunks(const struct bfs_batcher *b);
/* The order of `epoch` (perm.h: position -> record); release it
 * with bfs_perm_release. -ENOMEM (shuffle=block makes an epoch's block
 * order on first use). */
int bfs_batcher_perm(const struct bfs_batcher *b, uint64_t epoch, struct bfs_perm *out);
/* shuffle=block: the blocks cut (blockshuf.h), else NULL. */
const struct bfs_blocks *bfs_batcher_blocks(const struct bfs_batcher *b);
/* The rows of the epoch view that a unit (a batch, or a chunk with
 * BFS_CHUNK set) covers: [*r0, *r0 + *n). -ENOENT past the end. */
int bfs_batcher_unit_rows(const struct bfs_batcher *b, uint64_t unit, uint64_t *r0, uint64_t *n);
/* The epoch position (before the permutation) of view row r. */
uint64_t bfs_batcher_row_pos(const struct bfs_batcher *b, uint64_t r);
/* out[k] = the global record index of row r0 + k of the epoch view, k < n. */
void bfs_batcher_row_records(const struct bfs_batcher *b, const struct bfs_perm *p, uint64_t r0,
			     size_t n, uint64_t *out);
/* Ragged totals (plan->nslots of them) of view rows [r0, r0+n). */
void bfs_batcher_row_totals(const struct bfs_batcher *b, const struct bfs_perm *p, uint64_t r0,
			    uint64_t n, uint64_t *totals);

/* Exact geometry of (epoch, batch) without decoding. -ENOENT if batch is out
 * of range. */
int bfs_batcher_geom(struct bfs_geom **out, const struct bfs_batcher *b, uint64_t epoch,
		     uint64_t batch);

/* Decode (epoch, unit) — a batch, or a chunk with BFS_CHUNK set — into one
 * buffer laid out as the whole .safetensors file (geom->st_size bytes), in
 * parts of consecutive rows that any threads may decode at once, one part
 * each, so several cores can serve one batch (or chunk) that a reader
 * waits for. bfs_build_new_in takes the unit's geometry from
 * bfs_batcher_geom (g may be NULL: computed; it is owned by the job even on
 * failure), reads the rows' records and the ragged totals before each part,
 * and splits into nparts parts (at most one per row).
 * bfs_build_parts_for suggests a count, at most max, that keeps each part
 * large enough for its fixed costs not to matter.
 * bfs_build_part(k) may run on any thread, once per k; after every part
 * has returned, one thread calls bfs_build_finish, which frees the job and
 * gives the bytes and geometry (or the first failing part's error, its
 * message set on the calling thread). bfs_build_free drops a job unfinished. */
struct bfs_build;
/* buf: a malloc'd buffer of at least the geometry's st_size bytes (zeroed
 * here, owned by the job even on failure): a caller that recycles large
 * buffers spares the kernel's page faults and zeroing of fresh ones. buf
 * NULL: allocate. bfs_build_finish's errors: -EIO when a record is corrupt
 * and on_corrupt=fail (or no valid substitute exists), with the message
 * naming shard, record index, offset and reason; -ENOMEM. */
int bfs_build_new_in(struct bfs_build **out, const struct bfs_batcher *b, uint64_t epoch,
		     uint64_t unit, struct bfs_geom *g, unsigned nparts, uint8_t *buf);
unsigned bfs_build_parts_for(const struct bfs_geom *g, unsigned max);
/* The records the job reads, row by row (n of them; borrowed). */
const uint64_t *bfs_build_records(const struct bfs_build *jb, size_t *n);
unsigned bfs_build_nparts(const struct bfs_build *jb);
int bfs_build_part(struct bfs_build *jb, unsigned k, bfs_corrupt_fn on_corrupt, void *ctx);
int bfs_build_finish(struct bfs_build *jb, uint8_t **out, struct bfs_geom **out_geom);
void bfs_build_free(struct bfs_build *jb);

#endif
