/* SPDX-License-Identifier: Apache-2.0 */
/*
 * epoch.c — geometry and chunk mapping of the epoch view (see epoch.h).
 */
#include "epoch.h"

#include <stdlib.h>
#include <string.h>

enum vkind {
	VK_ROWS, /* bytes per row fixed: chunk c holds rows [c*C, c*C + len) */
	VK_VALUES, /* ragged values: chunk c holds elements [P[c], P[c+1]) of its slot */
	VK_ROW_SPLITS, /* int64 [rows+1]: chunk c holds [c*C, c*C + len], shifted by P[c] */
	VK_VALUE_SPLITS /* int64 [nvalues+1]: chunk c holds [P[c], P[c+1]], shifted by Pbytes[c] */
};

struct view_tensor {
	enum vkind kind;
	uint64_t unit; /* VK_ROWS: bytes per row; VK_VALUES: bytes per element; splits: 8 */
	size_t slot; /* VK_VALUES: the slot its elements count in; splits: the values slot */
	size_t shift; /* splits: the slot whose totals shift a chunk's offsets */
};

static uint64_t prefix(const struct bfs_epoch_view *v, uint64_t c, size_t slot)
{
	return v->prefix[c * v->nslots + slot];
}

static uint64_t chunk_len(const struct bfs_epoch_view *v, uint64_t c)
{
	uint64_t r0 = c * v->chunk_rows;
	return v->rows - r0 < v->chunk_rows ? v->rows - r0 : v->chunk_rows;
}

void bfs_epoch_view_free(struct bfs_epoch_view *v)
{
	if (!v)
		return;
	bfs_geom_free(v->geom);
	free(v->prefix);
	free(v->vt);
	free(v);
}

/* The values slot of spec f (its VALUES tensor's). */
static size_t values_slot(const struct bfs_plan *p, const struct bfs_feature_spec *f)
{
	for (size_t t = 0; t < p->ntensors; t++)
		if (p->t[t].spec == f && p->t[t].role == BFS_ROLE_VALUES)
			return (size_t)p->t[t].ragged_slot;
	return 0;
}

int bfs_epoch_view_new(struct bfs_epoch_view **out, const struct bfs_batcher *b, uint64_t epoch)
{
	const struct bfs_plan *p = bfs_batcher_plan(b);
	struct bfs_epoch_view *v = calloc(1, sizeof(*v));
	struct bfs_geom *one = NULL;
	uint64_t *zero = NULL;
	struct bfs_perm perm;
	int rc = -ENOMEM;

	if (!v)
		return -ENOMEM;
	v->plan = p;
	v->rows = bfs_batcher_rows(b);
	v->chunk_rows = bfs_batcher_chunk_rows(b);
	v->nchunks = bfs_batcher_nchunks(b);
	v->nslots = p->nslots;
	v->prefix = calloc((v->nchunks + 1) * (v->nslots ? v->nslots : 1), sizeof(*v->prefix));
	v->vt = calloc(p->ntensors ? p->ntensors : 1, sizeof(*v->vt));
	zero = calloc(v->nslots ? v->nslots : 1, sizeof(*zero));
	if (!v->prefix || !v->vt || !zero)
		goto fail;
	/* the totals of every chunk, in epoch order */
	if (v->nslots) {
		rc = bfs_batcher_perm(b, epoch, &perm);
		if (rc)
			goto fail;
		for (uint64_t c = 0; c < v->nchunks; c++) {
			uint64_t *cur = v->prefix + c * v->nslots, *next = cur + v->nslots;
			bfs_batcher_row_totals(b, &perm, c * v->chunk_rows, chunk_len(v, c), next);
			for (size_t s = 0; s < v->nslots; s++)
				next[s] += cur[s];
		}
		bfs_perm_release(&perm);
	}
	rc = bfs_geom_new(&v->geom, p, v->rows, v->prefix + v->nchunks * v->nslots, 0);
	if (!rc)
		rc = bfs_geom_new(&one, p, 1, zero, 0);
	if (rc)
		goto fail;
	for (size_t t = 0; t < p->ntensors; t++) {
		const struct bfs_tensor_tmpl *tm = &p->t[t];
		struct view_tensor *x = &v->vt[t];
		bool r2 = tm->spec->layout == BFS_LAYOUT_RAGGED2;

		switch (tm->role) {
		case BFS_ROLE_VALUES:
			x->kind = VK_VALUES;
			x->slot = (size_t)tm->ragged_slot + (r2 ? 1 : 0);
			x->unit = r2 ? 1 : bfs_dtype_size(tm->dtype);
			break;
		case BFS_ROLE_ROW_SPLITS:
			x->kind = VK_ROW_SPLITS;
			x->unit = 8;
			x->shift = values_slot(p, tm->spec); /* values, or value_splits' values */
			break;
		case BFS_ROLE_VALUE_SPLITS:
			x->kind = VK_VALUE_SPLITS;
			x->unit = 8;
			x->slot = values_slot(p, tm->spec);
			x->shift = x->slot + 1; /* bytes */
			break;
		default:
			x->kind = VK_ROWS;
			x->unit = one->g[t].nbytes;
			break;
		}
	}
	bfs_geom_free(one);
	free(zero);
	*out = v;
	return 0;
fail:
	bfs_geom_free(one);
	free(zero);
	bfs_epoch_view_free(v);
	return rc;
}

/* The last chunk c < nchunks whose slot total before it is <= e. */
static uint64_t chunk_at(const struct bfs_epoch_view *v, size_t slot, uint64_t e)
{
	uint64_t lo = 0, hi = v->nchunks; /* prefix(lo) <= e; answer in [lo, hi) */

	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (prefix(v, mid, slot) <= e)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

uint64_t bfs_epoch_view_row_bytes(const struct bfs_epoch_view *v, size_t t)
{
	return v->vt[t].kind == VK_ROWS ? v->vt[t].unit : 0;
}

uint64_t bfs_epoch_view_chunk(const struct bfs_epoch_view *v, size_t t, uint64_t off)
{
	const struct view_tensor *x = &v->vt[t];
	uint64_t k = x->unit ? off / x->unit : 0, c;

	if (v->nchunks == 0)
		return 0;
	/* by row, or by element: the last chunk whose elements start at or
	 * before k (so an empty chunk is never the answer for a value) */
	if (x->kind == VK_ROWS || x->kind == VK_ROW_SPLITS)
		c = k / v->chunk_rows;
	else
		c = chunk_at(v, x->slot, k);
	return c < v->nchunks ? c : v->nchunks - 1;
}

void bfs_epoch_view_span(const struct bfs_epoch_view *v, size_t t, uint64_t c, uint64_t *lo,
			 uint64_t *hi, uint64_t *base)
{
	const struct view_tensor *x = &v->vt[t];

	*base = 0;
	switch (x->kind) {
	case VK_ROWS:
		*lo = c * v->chunk_rows * x->unit;
		*hi = *lo + chunk_len(v, c) * x->unit;
		break;
	case VK_VALUES:
		*lo = prefix(v, c, x->slot) * x->unit;
		*hi = prefix(v, c + 1, x->slot) * x->unit;
		break;
	case VK_ROW_SPLITS:
		*lo = c * v->chunk_rows * 8;
		*hi = *lo + (chunk_len(v, c) + 1) * 8;
		*base = prefix(v, c, x->shift);
		break;
	default:
		*lo = prefix(v, c, x->slot) * 8;
		*hi = (prefix(v, c + 1, x->slot) + 1) * 8;
		*base = prefix(v, c, x->shift);
		break;
	}
}

uint64_t bfs_epoch_view_copy(const struct bfs_epoch_view *v, size_t t, uint64_t c,
			     const uint8_t *cbuf, const struct bfs_geom *cg, uint64_t off,
			     uint64_t n, uint8_t *dst)
{
	const struct view_tensor *x = &v->vt[t];
	const uint8_t *src = cbuf + cg->g[t].offset;
	uint64_t have = cg->g[t].nbytes; /* bytes of this tensor in the chunk */
	uint64_t lo, hi, base, end;

	if (c >= v->nchunks)
		return 0;
	bfs_epoch_view_span(v, t, c, &lo, &hi, &base);
	if (off < lo || off >= hi || hi - lo != have)
		return 0; /* not this chunk's, or the chunk disagrees with the index */
	end = off + n < hi ? off + n : hi;
	if (x->kind == VK_ROWS || x->kind == VK_VALUES) {
		memcpy(dst, src + (off - lo), end - off);
		return end - off;
	}
	/* offsets over the epoch: the chunk's own, shifted */
	for (uint64_t pos = off; pos < end;) {
		uint64_t k = (pos - lo) / 8, val = base + bfs_get_le64(src + k * 8);
		uint8_t le[8];
		unsigned from = (unsigned)((pos - lo) % 8);
		uint64_t take = 8 - from < end - pos ? 8 - from : end - pos;

		for (int i = 0; i < 8; i++)
			le[i] = (uint8_t)(val >> (8 * i));
		memcpy(dst + (pos - off), le + from, take);
		pos += take;
	}
	return end - off;
}
