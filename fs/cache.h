/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cache.h — decoded batches, refcounted, under a byte budget, filled on
 * demand and ahead of the reader by a pool of prefetch workers.
 *
 * One entry per (rank, epoch, batch) — the rank of a mount with rank folders
 * (world=W without rank), else 0: its buffer is the whole .safetensors file,
 * and every .npy file of the batch reads from the same buffer. A batch
 * number with BFS_CHUNK set (batch.h) names a chunk of the epoch view
 * (all/), held and prefetched the same way. However many
 * readers ask at once, a batch is decoded once: the first asker (or a
 * prefetch worker) starts it, in parts of consecutive rows (batch.h) that
 * any thread may take: workers help first the units a reader waits for, and
 * a reader waiting for a unit decodes its remaining parts itself, so every
 * core works on the batch a reader needs now.
 *
 * Budget: bytes of entries held (ready or being decoded) stay within
 * cache_size, except that a demand load never waits for room: while readers
 * hold every entry, the cache may exceed the budget by the batches being
 * read right now. Prefetch never exceeds it. Unreferenced ready entries are
 * evicted in least-recently-used order.
 *
 * Thread-safety: every function may be called from any thread. One mutex
 * guards the table, the LRU list, the queue and the counters.
 */
#ifndef BFS_CACHE_H
#define BFS_CACHE_H

#include "batch.h"
#include "fs.h"
#include "ioplan.h"

struct bfs_cache;

struct bfs_cache_entry {
	uint64_t rank, epoch, batch;
	uint8_t *buf; /* geom->st_size bytes; immutable once ready */
	struct bfs_geom *geom; /* immutable once ready */
	bool pinned; /* buf came from the pinning hook; immutable once ready */
	/* private below: guarded by the cache lock */
	int refs;
	int state;
	bool touched;
	int waiters; /* readers blocked on this entry */
	struct bfs_build *job; /* while loading: its parts */
	unsigned nparts, claimed, done;
	struct bfs_cache_entry *hnext, *lprev, *lnext, *jnext;
	uint64_t bytes;
	uint64_t buf_cap; /* bytes allocated at buf (a reused spare may be larger) */
	int err;
	void (*unpin)(void *ctx, uint8_t *buf); /* frees a pinned buf */
	void *unpin_ctx;
	/* while loading: the bytes of its records in the I/O stage */
	struct bfs_ioplan *io_plan;
	struct bfs_ioplan_hold *io_hold;
};

struct bfs_cache_stats {
	uint64_t hits, misses, evictions, prefetch_issued;
	uint64_t waits; /* found being decoded: helped, then waited (cache_waits) */
	uint64_t batches_decoded, chunks_decoded, decode_ns, decode_errors;
	uint64_t bytes, peak_bytes, budget, entries;
	uint64_t records_decoded; /* rows of the batches and chunks decoded */
	/* now: decoded ahead and not read yet, waiting in the prefetch queue,
	 * being decoded (by a worker or a reader) */
	uint64_t prefetch_ready, prefetch_queued, decoding;
	uint64_t buffers_reused; /* builds that reused a spare buffer */
};

typedef void (*bfs_cache_error_fn)(void *ctx, const char *msg, unsigned flags);

/* Batch buffers of this many bytes or more are mapped by malloc, and
 * unmapped when freed: their memory leaves with them. Above the decoder's
 * 256 KiB read chunks (batch.c, READ_CHUNK), which are allocated and freed
 * per part and are better reused from the heap than faulted in each time. */
#define BFS_CACHE_MAP_MIN ((size_t)512 << 10)

/* bfs_cache_malloc_setup: declared in fs.h (the mount calls it). */

/* b[nranks]: the batcher of each rank (one, rank 0, without rank folders;
 * borrowed). prefetch: batches decoded ahead of a reader; threads: prefetch
 * workers (started by bfs_cache_start, so that they are created after a
 * fork). */
int bfs_cache_new(struct bfs_cache **out, const struct bfs_batcher *const *b, size_t nranks,
		  uint64_t budget, unsigned threads, unsigned prefetch, bfs_cache_error_fn on_error,
		  void *ctx);
int bfs_cache_start(struct bfs_cache *c);
void bfs_cache_free(struct bfs_cache *c); /* stops workers; accepts NULL */

/* Get (rank, epoch, batch), decoding it if needed; blocks until ready. A reference
 * for the caller: release with bfs_cache_put. A demand access also queues
 * the batches that follow it for prefetch. Errors: -EIO (decode failed; the
 * message was already passed to on_error), -ENOENT, -ENOMEM. */
int bfs_cache_get(struct bfs_cache_entry **out, struct bfs_cache *c, uint64_t rank, uint64_t epoch,
		  uint64_t batch);
void bfs_cache_put(struct bfs_cache *c, struct bfs_cache_entry *e);

/* Pinned buffers (the CUDA path): once set (before bfs_cache_start), every
 * decoded buffer is handed to pin(), which may replace it by a pinned copy
 * (returning 0; the entry is then `pinned` and freed through unpin()) or
 * fail (the entry keeps its ordinary buffer). */
typedef int (*bfs_cache_pin_fn)(void *ctx, uint8_t **buf, uint64_t size);
typedef void (*bfs_cache_unpin_fn)(void *ctx, uint8_t *buf);
void bfs_cache_set_pinning(struct bfs_cache *c, bfs_cache_pin_fn pin, bfs_cache_unpin_fn unpin,
			   void *ctx);

/* Reads planned ahead (ioplan.h): every build claims its records' bytes
 * there (and so tells the planner where its stream of builds is). Set before
 * bfs_cache_start; the planner must outlive the cache's builds. */
void bfs_cache_set_io(struct bfs_cache *c, struct bfs_ioplan *io);
/* The epochs the mount lists: the prefetch never builds past the last (a
 * build of an epoch nobody can read fetches its records for nothing). 0:
 * no bound. Set before bfs_cache_start. */
void bfs_cache_set_epochs(struct bfs_cache *c, uint64_t epochs);

void bfs_cache_stats(const struct bfs_cache *c, struct bfs_cache_stats *out);

#endif
