/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cudaopen.h — the opens of batch-B.cuda (the CUDA path, -o cuda): each
 * takes a device buffer of the pool (cudapool.h), copies the batch's pinned
 * cache entry into it (cudapath.h) and answers with a descriptor whose
 * reads give the batch's JSON once the copy is complete.
 *
 * With every buffer taken an open waits without holding a thread, and is
 * answered later from the thread that gives a buffer back (a descriptor's
 * last reference dropped), or when its opener gives up (a signal: EINTR);
 * under O_NONBLOCK it fails with EAGAIN. The caller's requests are opaque
 * here: they are answered through its replies (below), exactly once each.
 *
 * Does not: know FUSE (fuse_ops.c passes its requests and replies), own the
 * cache, the runtime or the pool (borrowed; they outlive this). Thread-
 * safety: every function may be called from any thread.
 */
#ifndef BFS_CUDAOPEN_H
#define BFS_CUDAOPEN_H

#include "batch.h"
#include "cache.h"
#include "cudapath.h"
#include "cudapool.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* How a request is answered (req is the caller's). */
struct bfs_cudaopen_replies {
	/* the open succeeded with descriptor fh (direct I/O, no page cache):
	 * nonzero when the opener is gone (no release will come for fh) */
	int (*open)(void *req, uint64_t fh);
	void (*error)(void *req, int err); /* err > 0 */
	bool (*gone)(void *req); /* the opener gave up already */
};

struct bfs_cudaopen_config {
	struct bfs_cache *cache;
	struct bfs_cudapath *cuda;
	struct bfs_cudapool *pool;
	const struct bfs_plan *plan;
	int device;
	/* a failed copy, wait or open: one line (bfs_fs_report's signature) */
	void (*report)(void *ctx, const char *msg, unsigned flags);
	void *report_ctx;
};

struct bfs_cudaopen;
struct bfs_cudaopen_fh; /* an open descriptor: fh of the open reply */

int bfs_cudaopen_new(struct bfs_cudaopen **out, const struct bfs_cudaopen_config *cfg);
/* Nobody may wait and every descriptor must be put. Accepts NULL. */
void bfs_cudaopen_free(struct bfs_cudaopen *co);

/* Open (rank r, epoch e, batch b) for req: answered now or, waiting for a
 * buffer, later (rp must outlive the wait). */
void bfs_cudaopen_open(struct bfs_cudaopen *co, const struct bfs_cudaopen_replies *rp, void *req,
		       uint64_t r, uint64_t e, uint64_t b, bool nonblock);
/* req's opener gave up: when it still waits, it is answered EINTR here and
 * true is returned. */
bool bfs_cudaopen_interrupted(struct bfs_cudaopen *co, void *req);

/* The JSON of descriptor h (*text, *len: valid until h is put), once its
 * copy is complete: 0, or -EIO (reported once) when the copy failed. Takes
 * a reference on h in every case (h NULL: -EIO, nothing taken): put it
 * once the reply that borrows the text is written. */
int bfs_cudaopen_read(struct bfs_cudaopen *co, struct bfs_cudaopen_fh *h, const char **text,
		      size_t *len);
/* Drop a reference: the release's, or a read's. The last one gives the
 * buffer back (to a waiting open first). Accepts NULL. */
void bfs_cudaopen_put(struct bfs_cudaopen *co, struct bfs_cudaopen_fh *h);

#endif
