/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cudaopen.c — the opens of batch-B.cuda and their descriptors (see
 * cudaopen.h).
 */
#include "cudaopen.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

struct bfs_cudaopen {
	struct bfs_cudaopen_config cfg;
};

/* An open batch-B.cuda: a pool buffer holding the batch, copied from the
 * pinned cache entry, which is held until the descriptor is closed. */
struct bfs_cudaopen_fh {
	unsigned slot;
	struct bfs_cache_entry *e;
	char *json;
	size_t len;
	pthread_mutex_t m; /* guards waited, err */
	bool waited;
	int err;
	int refs; /* the open file's, plus one per read being replied to */
};

/* An open waiting for a free buffer. */
struct cwait {
	struct bfs_cudapool_waiter w; /* w.tag: req */
	const struct bfs_cudaopen_replies *rp;
	void *req;
	uint64_t rank, epoch, batch;
};

static struct cwait *cwait_of(struct bfs_cudapool_waiter *w)
{
	return (struct cwait *)((char *)w - offsetof(struct cwait, w));
}

int bfs_cudaopen_new(struct bfs_cudaopen **out, const struct bfs_cudaopen_config *cfg)
{
	struct bfs_cudaopen *co = calloc(1, sizeof(*co));

	if (!co)
		return -ENOMEM;
	co->cfg = *cfg;
	*out = co;
	return 0;
}

void bfs_cudaopen_free(struct bfs_cudaopen *co)
{
	free(co);
}

static void cuda_fail(struct bfs_cudaopen *co, const char *what, uint64_t e, uint64_t b,
		      const char *msg)
{
	char line[600];

	bfs_cudapool_failed(co->cfg.pool);
	snprintf(line, sizeof(line),
		 "epoch-%04" PRIu64 "/batch-%06" PRIu64 "/batch-%06" PRIu64 ".cuda: %s: %s", e, b,
		 b, what, msg);
	if (co->cfg.report)
		co->cfg.report(co->cfg.report_ctx, line, 0);
}

/* A descriptor's buffer goes back to the pool once its copy is over (a
 * failed wait is reported as `what`, NULL: not reported). */
static void put_slot(struct bfs_cudaopen *co, unsigned slot);

static void fh_free(struct bfs_cudaopen *co, struct bfs_cudaopen_fh *h, const char *what)
{
	char err[400];

	/* the copy must be over before its source and buffer are reused */
	if (bfs_cudapath_wait(co->cfg.cuda, h->slot, err, sizeof(err)) != 0 && what)
		cuda_fail(co, what, h->e->epoch, h->e->batch, err);
	bfs_cache_put(co->cfg.cache, h->e);
	pthread_mutex_destroy(&h->m);
	free(h->json);
	put_slot(co, h->slot);
	free(h);
}

/* Copy (rank r, epoch e, batch b) into pool buffer `slot` (ours): the copy
 * runs on the buffer's stream while the open is answered. On failure the
 * buffer goes back to the pool. */
static int do_open(struct bfs_cudaopen *co, uint64_t r, uint64_t e, uint64_t b, unsigned slot,
		   struct bfs_cudaopen_fh **out)
{
	struct bfs_cudaopen_fh *h = calloc(1, sizeof(*h));
	char hex[BFS_CUDA_HANDLE_HEX + 1], err[400];
	int rc = h ? 0 : -ENOMEM;

	if (!rc)
		rc = bfs_cache_get(&h->e, co->cfg.cache, r, e, b);
	if (!rc && !h->e->pinned) {
		cuda_fail(co, "open", e, b,
			  "the batch is not in pinned memory (cudaHostAlloc failed)");
		rc = -ENOMEM;
	}
	if (!rc) {
		rc = bfs_cudapath_copy(co->cfg.cuda, slot, h->e->buf, h->e->geom->st_size, hex, err,
				       sizeof(err));
		if (rc)
			cuda_fail(co, "open", e, b, err);
	}
	if (!rc) {
		h->json = bfs_cudapath_describe(co->cfg.plan, h->e->geom, co->cfg.device, hex,
						&h->len);
		if (!h->json) {
			/* the copy may be in flight: wait before the buffer is reused */
			bfs_cudapath_wait(co->cfg.cuda, slot, err, sizeof(err));
			rc = -ENOMEM;
		}
	}
	if (rc) {
		if (h && h->e)
			bfs_cache_put(co->cfg.cache, h->e);
		free(h);
		put_slot(co, slot);
		return rc == -ENOMEM || rc == -ENOENT ? rc : -EIO;
	}
	h->slot = slot;
	h->refs = 1;
	pthread_mutex_init(&h->m, NULL);
	bfs_cudapool_opened(co->cfg.pool);
	*out = h;
	return 0;
}

/* The answer to an open that holds buffer `slot`. */
static void answer(struct bfs_cudaopen *co, const struct bfs_cudaopen_replies *rp, void *req,
		   uint64_t r, uint64_t e, uint64_t b, unsigned slot)
{
	struct bfs_cudaopen_fh *h = NULL;
	int rc = do_open(co, r, e, b, slot, &h);

	if (rc) {
		rp->error(req, -rc);
		return;
	}
	if (rp->open(req, (uint64_t)(uintptr_t)h) != 0) /* the opener is gone: no release */
		fh_free(co, h, NULL);
}

/* A buffer comes back: to the first waiting open, else to the pool. */
static void put_slot(struct bfs_cudaopen *co, unsigned slot)
{
	struct bfs_cudapool_waiter *w = bfs_cudapool_put(co->cfg.pool, slot);

	if (w) {
		struct cwait *c = cwait_of(w);

		answer(co, c->rp, c->req, c->rank, c->epoch, c->batch, slot);
		free(c);
	}
}

bool bfs_cudaopen_interrupted(struct bfs_cudaopen *co, void *req)
{
	struct bfs_cudapool_waiter *w = bfs_cudapool_cancel(co->cfg.pool, req);
	struct cwait *c;

	if (!w)
		return false;
	c = cwait_of(w);
	c->rp->error(req, EINTR);
	free(c);
	return true;
}

/* The pool asks, under its lock and in the taking thread, whether an opener
 * gave up; it passes only the tag (the request), so the replies that can
 * tell are the taking thread's, set around bfs_cudapool_take. */
static __thread const struct bfs_cudaopen_replies *taking;

static bool req_gone(const void *tag)
{
	return taking && taking->gone((void *)(uintptr_t)tag);
}

void bfs_cudaopen_open(struct bfs_cudaopen *co, const struct bfs_cudaopen_replies *rp, void *req,
		       uint64_t r, uint64_t e, uint64_t b, bool nonblock)
{
	struct cwait *c = calloc(1, sizeof(*c));
	int slot;

	if (!c) {
		rp->error(req, ENOMEM);
		return;
	}
	c->w.tag = req;
	c->rp = rp;
	c->req = req;
	c->rank = r;
	c->epoch = e;
	c->batch = b;
	taking = rp;
	slot = bfs_cudapool_take(co->cfg.pool, &c->w, nonblock, req_gone);
	taking = NULL;
	if (slot == -EINPROGRESS) /* queued: c belongs to the pool's queue now */
		return;
	free(c);
	if (slot < 0)
		rp->error(req, -slot);
	else
		answer(co, rp, req, r, e, b, (unsigned)slot);
}

int bfs_cudaopen_read(struct bfs_cudaopen *co, struct bfs_cudaopen_fh *h, const char **text,
		      size_t *len)
{
	char err[400];

	if (!h)
		return -EIO;
	__atomic_add_fetch(&h->refs, 1, __ATOMIC_ACQ_REL);
	pthread_mutex_lock(&h->m);
	if (!h->waited) {
		h->err = bfs_cudapath_wait(co->cfg.cuda, h->slot, err, sizeof(err));
		h->waited = true;
		if (h->err)
			cuda_fail(co, "read", h->e->epoch, h->e->batch, err);
	}
	pthread_mutex_unlock(&h->m);
	if (h->err)
		return h->err;
	*text = h->json;
	*len = h->len;
	return 0;
}

/* The last reference (after the release and every read's reply: the reader
 * may close the file while its read's reply is still being written) gives
 * the buffer back. */
void bfs_cudaopen_put(struct bfs_cudaopen *co, struct bfs_cudaopen_fh *h)
{
	if (h && __atomic_sub_fetch(&h->refs, 1, __ATOMIC_ACQ_REL) == 0)
		fh_free(co, h, "close");
}
