/* SPDX-License-Identifier: Apache-2.0 */
/*
 * allfiles.c — the files of all/ and all.safetensors, read from the
 * stash and the chunks (see allfiles.h).
 */
#include "allfiles.h"

#include "epoch.h"
#include "stash.h"
#include "stats.h"
#include "views.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NVIEWS 8 /* epoch views kept (geometry and chunk totals of all/) */

struct bfs_allfiles {
	const struct bfs_batcher *const *rb; /* [nranks] */
	size_t nranks;
	const struct bfs_plan *plan;
	struct bfs_cache *cache; /* borrowed */
	struct bfs_views *views; /* of all/: geometry and chunk totals */
	struct bfs_stash *stash; /* all/'s small tensors, so columns cost one pass */
	bfs_cache_error_fn report;
	void *report_ctx;
};

int bfs_allfiles_new(struct bfs_allfiles **out, const struct bfs_batcher *const *b, size_t nranks,
		     struct bfs_cache *cache, uint64_t stash_budget, bfs_cache_error_fn report,
		     void *report_ctx)
{
	struct bfs_allfiles *a = calloc(1, sizeof(*a));
	int rc;

	if (!a)
		return -ENOMEM;
	a->rb = b;
	a->nranks = nranks;
	a->plan = bfs_batcher_plan(b[0]);
	a->cache = cache;
	a->report = report;
	a->report_ctx = report_ctx;
	rc = bfs_views_new(&a->views, b, nranks, NVIEWS);
	if (!rc)
		rc = bfs_stash_new(&a->stash, stash_budget);
	if (rc) {
		bfs_allfiles_free(a);
		return rc;
	}
	*out = a;
	return 0;
}

void bfs_allfiles_free(struct bfs_allfiles *a)
{
	if (!a)
		return;
	bfs_views_free(a->views);
	bfs_stash_free(a->stash);
	free(a);
}

uint64_t bfs_allfiles_stash_bytes(struct bfs_allfiles *a)
{
	return bfs_stash_bytes(a->stash);
}

int bfs_allfiles_size(struct bfs_allfiles *a, const struct bfs_vnode *n, uint64_t *size)
{
	struct bfs_view_ref *r;
	const struct bfs_geom *g;
	int rc = bfs_views_get(&r, a->views, n->rank, n->epoch);

	if (rc)
		return rc;
	g = r->v->geom;
	*size = n->type == BFS_V_SAFETENSORS ? g->st_size : bfs_npy_size(&g->g[n->tensor]);
	bfs_views_put(a->views, r);
	return 0;
}

/* Bytes [a, b) of fixed-size-row tensor t's data in the epoch view
 * (rowb bytes a row), from the batches that hold those rows: row i*B + j
 * is row j of batch i. For a chunk that failed (a corrupt record under
 * on_corrupt=fail): only the batch holding the record fails. */
static int rows_from_batches(struct bfs_allfiles *al, uint64_t rank, uint64_t epoch, size_t t,
			     uint64_t rowb, uint64_t a, uint64_t b, uint8_t *dst)
{
	const struct bfs_batcher *bt = al->rb[rank];
	uint64_t B = bfs_batcher_batch_len(bt, 0);

	while (a < b && B) {
		uint64_t r = a / rowb, i = r / B, j = r % B, n, k;
		struct bfs_cache_entry *e = NULL;
		const struct bfs_tensor_geom *g;
		int rc = bfs_cache_get(&e, al->cache, rank, epoch, i);

		if (rc)
			return rc;
		g = &e->geom->g[t];
		n = bfs_batcher_batch_len(bt, i);
		if (g->nbytes != n * rowb || j >= n) { /* not rows of rowb bytes */
			bfs_cache_put(al->cache, e);
			return -EIO;
		}
		k = (n - j) * rowb - a % rowb;
		if (k > b - a)
			k = b - a;
		memcpy(dst, e->buf + g->offset + j * rowb + a % rowb, k);
		bfs_cache_put(al->cache, e);
		a += k;
		dst += k;
	}
	return a < b ? -EIO : 0;
}

/* Bytes [a, b) of tensor t's data in the epoch view, from the chunks that
 * hold them (decoded on demand, prefetched ahead), or from the stash of
 * small tensors (stash.h), which every chunk in hand fills. */
static int tensor_bytes(struct bfs_allfiles *al, const struct bfs_epoch_view *v, uint64_t rank,
			uint64_t epoch, size_t t, uint64_t a, uint64_t b, uint8_t *dst)
{
	uint64_t rowb = bfs_epoch_view_row_bytes(v, t);

	if (v->nchunks == 0) { /* no rows: only offsets, all 0 */
		memset(dst, 0, b - a);
		return 0;
	}
	while (a < b) {
		uint64_t c = bfs_epoch_view_chunk(v, t, a), k;
		struct bfs_cache_entry *e = NULL;
		int rc;

		k = bfs_stash_read(al->stash, v, rank, epoch, t, c, a, b - a, dst);
		if (k) {
			a += k;
			dst += k;
			continue;
		}
		rc = bfs_cache_get(&e, al->cache, rank, epoch, c | BFS_CHUNK);
		if (rc == -EIO && rowb) {
			/* a corrupt record failed the chunk: its other rows come
			 * from their batches, so only its batch's rows fail */
			uint64_t end = (c + 1) * v->chunk_rows * rowb;

			k = end < b ? end - a : b - a;
			rc = rows_from_batches(al, rank, epoch, t, rowb, a, a + k, dst);
			if (rc)
				return rc;
			a += k;
			dst += k;
			continue;
		}
		if (rc)
			return rc;
		bfs_stash_fill(al->stash, v, rank, epoch, c, e->buf, e->geom);
		k = bfs_epoch_view_copy(v, t, c, e->buf, e->geom, a, b - a, dst);
		bfs_cache_put(al->cache, e);
		if (k == 0) {
			al->report(al->report_ctx,
				   "all/: a chunk's sizes differ from the index (source changed?)",
				   0);
			return -EIO;
		}
		a += k;
		dst += k;
	}
	return 0;
}

/* The header's bytes [pos, end) of file n of view g (end <= hlen). */
static void header_bytes(struct bfs_allfiles *a, const struct bfs_vnode *n,
			 const struct bfs_geom *g, uint64_t pos, uint64_t end, uint8_t *dst)
{
	char hdr[1024]; /* a .npy header */
	const struct bfs_tensor_geom *tg;

	if (n->type == BFS_V_SAFETENSORS) {
		memcpy(dst, g->st_header + pos, end - pos);
		return;
	}
	tg = &g->g[n->tensor];
	bfs_npy_header(hdr, sizeof(hdr), a->plan->t[n->tensor].dtype, tg->ndim, tg->shape);
	memcpy(dst, hdr + pos, end - pos);
}

/* The data's bytes [pos, end) of file n of view v (pos >= hlen, its
 * header's length). */
static int data_bytes(struct bfs_allfiles *a, const struct bfs_vnode *n,
		      const struct bfs_epoch_view *v, uint64_t hlen, uint64_t pos, uint64_t end,
		      uint8_t *dst)
{
	const struct bfs_geom *g = v->geom;
	int rc = 0;

	if (n->type == BFS_V_NPY)
		return tensor_bytes(a, v, n->rank, n->epoch, (size_t)n->tensor, pos - hlen,
				    end - hlen, dst);
	/* all.safetensors: the tensors lie end to end after the header, in
	 * plan order */
	for (size_t t = 0; t < g->ntensors && !rc; t++) {
		uint64_t ts = g->g[t].offset, te = ts + g->g[t].nbytes;
		uint64_t lo = pos > ts ? pos : ts, hi = end < te ? end : te;

		if (lo < hi)
			rc = tensor_bytes(a, v, n->rank, n->epoch, t, lo - ts, hi - ts,
					  dst + (lo - pos));
	}
	return rc;
}

int bfs_allfiles_read(struct bfs_allfiles *a, const struct bfs_vnode *n, uint64_t pos, size_t len,
		      uint8_t **out, size_t *got, double *rows)
{
	uint64_t end, fsize, hlen;
	const struct bfs_geom *g;
	struct bfs_view_ref *vr = NULL;
	uint8_t *buf;
	int rc = bfs_views_get(&vr, a->views, n->rank, n->epoch);

	*out = NULL;
	*got = 0;
	*rows = 0;
	if (rc)
		return rc;
	g = vr->v->geom;
	if (n->type == BFS_V_SAFETENSORS) {
		fsize = g->st_size;
		hlen = g->st_hlen;
	} else {
		fsize = bfs_npy_size(&g->g[n->tensor]);
		hlen = g->g[n->tensor].npy_hlen;
	}
	if (pos >= fsize) {
		bfs_views_put(a->views, vr);
		return 0;
	}
	end = pos + len < fsize ? pos + len : fsize;
	buf = malloc(end - pos);
	if (!buf) {
		bfs_views_put(a->views, vr);
		return -ENOMEM;
	}
	if (pos < hlen)
		header_bytes(a, n, g, pos, end < hlen ? end : hlen, buf);
	if (end > hlen)
		rc = data_bytes(a, n, vr->v, hlen, pos > hlen ? pos : hlen, end,
				buf + (pos > hlen ? 0 : hlen - pos));
	if (!rc)
		*rows = bfs_stats_rows(g, hlen, pos, end);
	bfs_views_put(a->views, vr);
	if (rc) {
		free(buf);
		return rc;
	}
	*out = buf;
	*got = (size_t)(end - pos);
	return 0;
}
