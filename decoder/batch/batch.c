/* SPDX-License-Identifier: Apache-2.0 */
/*
 * batch.c — batch geometry (see batch.h): which records each row of each
 * unit holds (after rank/world and the epoch's order), the batcher made
 * from a dataset and a schema (its tensor plan, the drivers that fill
 * each feature's tensors, the keymaps of bound decoding, the chunks of
 * all/), and a unit's geometry from the ragged counts, so that a file's
 * size is known before anything is decoded.
 *
 * The count pass is batch_count.c, filling rows batch_fill.c, building a
 * unit batch_build.c (see batch_impl.h).
 */
#include "batch_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int make_drivers(struct bfs_batcher *b);
static int make_keymaps(struct bfs_batcher *b);
static void size_chunks(struct bfs_batcher *b);

const struct bfs_plan *bfs_batcher_plan(const struct bfs_batcher *b)
{
	return b->plan;
}

uint64_t bfs_batcher_nbatches(const struct bfs_batcher *b)
{
	return b->nb;
}

uint64_t bfs_batcher_epoch_len(const struct bfs_batcher *b)
{
	return b->epoch_len;
}

uint64_t bfs_batcher_batch_size(const struct bfs_batcher *b)
{
	return b->o.batch_size;
}

uint64_t bfs_batcher_rank(const struct bfs_batcher *b)
{
	return b->o.rank;
}

uint64_t bfs_batcher_world(const struct bfs_batcher *b)
{
	return b->o.world;
}

static uint64_t global_batch(const struct bfs_batcher *b, uint64_t batch)
{
	return batch * b->o.world + b->o.rank;
}

uint64_t bfs_batcher_batch_len(const struct bfs_batcher *b, uint64_t batch)
{
	uint64_t start = global_batch(b, batch) * b->o.batch_size;
	uint64_t left = b->epoch_len - start;

	return left < b->o.batch_size ? left : b->o.batch_size;
}

int bfs_batcher_perm(const struct bfs_batcher *b, uint64_t epoch, struct bfs_perm *out)
{
	if (b->o.mix) {
		bfs_perm_init_mix(out, b->o.mix, epoch);
		return 0;
	}
	bfs_perm_init(out, b->nrecords, b->o.seed, epoch, b->o.shuffle);
	if (b->blocks && b->nrecords > 0)
		return bfs_block_order_get(&out->bo, b->blocks, epoch);
	return 0;
}

const struct bfs_blocks *bfs_batcher_blocks(const struct bfs_batcher *b)
{
	return b->blocks;
}

uint64_t bfs_batcher_rows(const struct bfs_batcher *b)
{
	return b->rows;
}

uint64_t bfs_batcher_chunk_rows(const struct bfs_batcher *b)
{
	return b->chunk_rows;
}

uint64_t bfs_batcher_nchunks(const struct bfs_batcher *b)
{
	return b->nchunks;
}

int bfs_batcher_unit_rows(const struct bfs_batcher *b, uint64_t unit, uint64_t *r0, uint64_t *n)
{
	if (unit & BFS_CHUNK) {
		uint64_t c = unit & ~BFS_CHUNK;
		if (c >= b->nchunks)
			return -ENOENT;
		*r0 = c * b->chunk_rows;
		*n = b->rows - *r0 < b->chunk_rows ? b->rows - *r0 : b->chunk_rows;
		return 0;
	}
	if (unit >= b->nb)
		return -ENOENT;
	*r0 = unit * b->o.batch_size;
	*n = bfs_batcher_batch_len(b, unit);
	return 0;
}

uint64_t bfs_batcher_row_pos(const struct bfs_batcher *b, uint64_t r)
{
	uint64_t B = b->o.batch_size;

	return global_batch(b, r / B) * B + r % B;
}

void bfs_batcher_row_records(const struct bfs_batcher *b, const struct bfs_perm *p, uint64_t r0,
			     size_t n, uint64_t *out)
{
	uint64_t B = b->o.batch_size;

	/* positions first (in place), then the permutation over all of them */
	for (size_t k = 0; k < n; k++) {
		uint64_t r = r0 + k;
		out[k] = global_batch(b, r / B) * B + r % B;
	}
	bfs_perm_apply_many(p, out, n, out);
}

void bfs_batcher_row_totals(const struct bfs_batcher *b, const struct bfs_perm *p, uint64_t r0,
			    uint64_t n, uint64_t *totals)
{
	size_t nslots = b->plan->nslots;
	uint64_t recs[256];

	for (size_t s = 0; s < nslots; s++)
		totals[s] = 0;
	if (!nslots)
		return;
	for (uint64_t r = r0; r < r0 + n; r += BFS_ARRAY_SIZE(recs)) {
		size_t m = r0 + n - r < BFS_ARRAY_SIZE(recs) ? (size_t)(r0 + n - r)
							     : BFS_ARRAY_SIZE(recs);
		bfs_batcher_row_records(b, p, r, m, recs);
		for (size_t k = 0; k < m; k++)
			for (size_t s = 0; s < nslots; s++)
				totals[s] += b->counts[s][recs[k]];
	}
}

/* ------------------------------------------------------------------ new */

void bfs_batcher_free(struct bfs_batcher *b)
{
	if (!b)
		return;
	if (b->base) { /* a rank's copy owns nothing */
		free(b);
		return;
	}
	bfs_blocks_free(b->blocks);
	if (b->counts) {
		for (size_t s = 0; s < b->plan->nslots; s++)
			free(b->counts[s]);
		free(b->counts);
	}
	bfs_geom_free(b->full_geom);
	bfs_plan_free(b->plan);
	free(b->drivers);
	free(b->others);
	free(b->ragged);
	bfs_keymap_free(b->ctx_keys);
	bfs_keymap_free(b->list_keys);
	free(b->key_names);
	free(b);
}

/* shuffle=block: the blocks cut and dealt into partitions, and the epoch's
 * length with them. */
static int make_blocks(struct bfs_batcher *b)
{
	const struct bfs_batcher_opts *o = &b->o;
	uint64_t parts;
	int rc;

	if (!o->shuffle || !o->block)
		return 0;
	rc = bfs_blocks_new(&b->blocks, b->ds, o->block_size, o->window, o->seed);
	if (rc)
		return rc;
	parts = o->partitions ? o->partitions
			      : bfs_blocks_auto_partitions(b->blocks, o->batch_size);
	rc = bfs_blocks_partition(b->blocks, parts, o->batch_size);
	if (!rc)
		b->epoch_len = bfs_blocks_epoch_len(b->blocks);
	return rc;
}

int bfs_batcher_new(struct bfs_batcher **out, const struct bfs_dataset *ds,
		    const struct bfs_schema *s, const struct bfs_batcher_opts *o)
{
	struct bfs_batcher *b;
	int rc;

	if (o->batch_size == 0)
		return bfs_err_set(-EINVAL, "batch_size must be at least 1");
	if (o->world == 0 || o->rank >= o->world)
		return bfs_err_set(-EINVAL, "rank=%llu,world=%llu: need 0 <= rank < world",
				   (unsigned long long)o->rank, (unsigned long long)o->world);
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->ds = ds;
	b->schema = s;
	b->o = *o;
	b->nrecords = bfs_dataset_nrecords(ds);
	b->epoch_len = b->nrecords;
	b->prov_t[0] = b->prov_t[1] = -1;
	if (o->mix) {
		if (o->shuffle && o->block) {
			free(b);
			return bfs_err_set(-EINVAL, "shuffle=block: not with a mixture (use global "
						    "or none)");
		}
		if (bfs_mix_nrecords(o->mix) != bfs_dataset_nrecords(ds)) {
			free(b);
			return bfs_err_set(-EINVAL,
					   "mixture: its sources hold %llu records, the "
					   "dataset %llu",
					   (unsigned long long)bfs_mix_nrecords(o->mix),
					   (unsigned long long)bfs_dataset_nrecords(ds));
		}
		b->epoch_len = bfs_mix_epoch_len(o->mix);
	}
	b->plain = true;
	for (size_t i = 0; i < bfs_dataset_nshards(ds); i++)
		if (bfs_shard_compression(bfs_dataset_shard(ds, i)) != BFS_COMP_NONE)
			b->plain = false;
	rc = bfs_plan_new(&b->plan, s);
	if (!rc)
		rc = make_drivers(b);
	if (rc)
		goto fail;
	rc = make_blocks(b);
	if (rc)
		goto fail;
	b->global_nb = o->drop_remainder ? b->epoch_len / o->batch_size
					 : (b->epoch_len + o->batch_size - 1) / o->batch_size;
	b->nb = b->global_nb / o->world;
	/* fixed-size tensors: check the full-batch size against the limit now */
	if (b->plan->nslots == 0 && b->nb > 0) {
		rc = bfs_geom_new(&b->full_geom, b->plan, o->batch_size, NULL, o->max_batch_bytes);
		if (rc)
			goto fail;
	}
	rc = bfs_batcher_count(b);
	if (rc)
		goto fail;
	size_chunks(b);
	*out = b;
	return 0;
fail:
	bfs_batcher_free(b);
	return rc;
}

int bfs_batcher_new_rank(struct bfs_batcher **out, const struct bfs_batcher *base, uint64_t rank)
{
	struct bfs_batcher *b;

	if (rank >= base->o.world)
		return bfs_err_set(-EINVAL, "rank=%llu,world=%llu: need 0 <= rank < world",
				   (unsigned long long)rank, (unsigned long long)base->o.world);
	b = malloc(sizeof(*b));
	if (!b)
		return -ENOMEM;
	*b = *base;
	b->base = base;
	b->o.rank = rank;
	/* all/ ends with the rank's last batch (chunk_rows is the same) */
	b->rows = b->nb ? (b->nb - 1) * b->o.batch_size + bfs_batcher_batch_len(b, b->nb - 1) : 0;
	b->nchunks = (b->rows + b->chunk_rows - 1) / b->chunk_rows;
	*out = b;
	return 0;
}

/* all/ is decoded in chunks of about CHUNK_BYTES, whatever the batch size:
 * large enough that a chunk amortises its set-up and both cores can share
 * one, small enough that a read of a few rows decodes little. Row bytes of
 * ragged tensors are their average over the dataset. */
#define CHUNK_BYTES ((uint64_t)2 << 20)

static void size_chunks(struct bfs_batcher *b)
{
	const struct bfs_plan *p = b->plan;
	double row = 0;

	b->rows = b->nb ? (b->nb - 1) * b->o.batch_size + bfs_batcher_batch_len(b, b->nb - 1) : 0;
	/* fixed bytes per row: a one-row geometry with no ragged values */
	if (p->nslots <= 2 * 64 + 2) {
		uint64_t zero[2 * 64 + 2] = { 0 };
		struct bfs_geom *g = NULL;
		if (bfs_geom_new(&g, p, 1, zero, 0) == 0) {
			for (size_t k = 0; k < g->ntensors; k++)
				row += (double)g->g[k].nbytes;
			bfs_geom_free(g);
		}
	}
	for (size_t t = 0; t < p->ntensors && b->nrecords; t++) {
		const struct bfs_tensor_tmpl *tm = &p->t[t];
		uint64_t sum = 0;

		if (tm->role != BFS_ROLE_VALUES)
			continue;
		/* RAGGED2: the byte slot; RAGGED: values times their size */
		size_t slot = (size_t)tm->ragged_slot + (tm->spec->layout == BFS_LAYOUT_RAGGED2);
		for (uint64_t r = 0; r < b->nrecords; r++)
			sum += b->counts[slot][r];
		row += (double)sum *
		       (double)(tm->spec->layout == BFS_LAYOUT_RAGGED2
					? 1
					: bfs_dtype_size(tm->dtype)) /
		       (double)b->nrecords;
	}
	b->chunk_rows =
		row >= (double)CHUNK_BYTES ? 1 : (uint64_t)((double)CHUNK_BYTES / (row + 1));
	if (b->o.chunk_rows)
		b->chunk_rows = b->o.chunk_rows;
	if (b->chunk_rows == 0)
		b->chunk_rows = 1;
	b->nchunks = (b->rows + b->chunk_rows - 1) / b->chunk_rows;
}

/* The keymaps of bound decoding: context names 0..nctx-1, list names
 * 0..nlists-1, each driver knowing its index. */
static int make_keymaps(struct bfs_batcher *b)
{
	const char **lists;
	int rc;

	b->key_names = calloc(b->ndrivers + 1, sizeof(*b->key_names));
	if (!b->key_names)
		return -ENOMEM;
	for (size_t d = 0; d < b->ndrivers; d++)
		if (!b->drivers[d].spec->is_list) {
			b->drivers[d].key = b->nctx_keys;
			b->key_names[b->nctx_keys++] = b->drivers[d].spec->name;
		}
	lists = b->key_names + b->nctx_keys;
	for (size_t d = 0; d < b->ndrivers; d++)
		if (b->drivers[d].spec->is_list) {
			b->drivers[d].key = b->nlist_keys;
			lists[b->nlist_keys++] = b->drivers[d].spec->name;
		}
	rc = bfs_keymap_new(&b->ctx_keys, b->key_names, b->nctx_keys);
	if (!rc)
		rc = bfs_keymap_new(&b->list_keys, lists, b->nlist_keys);
	return rc;
}

/* Which drivers are columns of bound decoding, and the list of the rest. */
static int make_columns(struct bfs_batcher *b)
{
	b->others = calloc(b->ndrivers + 1, sizeof(*b->others));
	if (!b->others)
		return -ENOMEM;
	for (size_t d = 0; d < b->ndrivers; d++) {
		struct driver *dr = &b->drivers[d];
		const struct bfs_feature_spec *f = dr->spec;
		uint64_t n = 0;

		dr->col_kind = BFS_KIND_NONE;
		if (f->layout == BFS_LAYOUT_FIXED && !f->is_list && !f->image && dr->main >= 0) {
			if (f->kind == BFS_KIND_FLOAT ||
			    (f->kind == BFS_KIND_INT64 && dr->fixed_n == 1))
				n = dr->fixed_n;
			else if (f->kind == BFS_KIND_BYTES)
				n = bfs_spec_elems(f) * bfs_dtype_size(f->dtype == BFS_DT_INVALID
									       ? BFS_DT_U8
									       : f->dtype);
		}
		if (n > 0 && n <= UINT32_MAX) {
			dr->col_kind = f->kind;
			dr->col_n = (uint32_t)n;
			b->ncolumns++;
		} else {
			b->others[b->nothers++] = d;
		}
	}
	return 0;
}

static int make_drivers(struct bfs_batcher *b)
{
	const struct bfs_plan *p = b->plan;

	b->drivers = calloc(p->ntensors ? p->ntensors : 1, sizeof(*b->drivers));
	b->ragged = calloc(p->ntensors ? p->ntensors : 1, sizeof(*b->ragged));
	if (!b->drivers || !b->ragged)
		return -ENOMEM;
	for (size_t t = 0; t < p->ntensors; t++) {
		const struct bfs_feature_spec *f = p->t[t].spec;
		struct driver *dr = NULL;

		if (f->prov) { /* filled from the record number, not decoded */
			b->prov_t[f->prov == BFS_PROV_RECORD] = (int)t;
			continue;
		}
		for (size_t d = 0; d < b->ndrivers; d++)
			if (b->drivers[d].spec == f)
				dr = &b->drivers[d];
		if (!dr) {
			dr = &b->drivers[b->ndrivers++];
			dr->spec = f;
			dr->main = dr->aux = dr->aux2 = dr->crop = dr->flip = -1;
		}
		if (p->t[t].role == BFS_ROLE_VALUES)
			b->ragged[b->nragged++] = t;
		switch (p->t[t].role) {
		case BFS_ROLE_MAIN:
		case BFS_ROLE_VALUES:
			dr->main = (int)t;
			if (f->layout == BFS_LAYOUT_FIXED && !f->is_list && !f->image &&
			    (f->kind == BFS_KIND_FLOAT || f->kind == BFS_KIND_INT64)) {
				dr->fixed_n = bfs_spec_elems(f);
				dr->fixed_bytes = dr->fixed_n * (f->kind == BFS_KIND_FLOAT ? 4 : 8);
			}
			break;
		case BFS_ROLE_LENGTHS:
		case BFS_ROLE_VALUE_SPLITS:
			dr->aux = (int)t;
			break;
		case BFS_ROLE_ROW_SPLITS:
			if (f->layout == BFS_LAYOUT_RAGGED)
				dr->aux = (int)t;
			else
				dr->aux2 = (int)t;
			break;
		case BFS_ROLE_VALUE_LENGTHS:
			dr->aux2 = (int)t;
			break;
		case BFS_ROLE_CROP:
			dr->crop = (int)t;
			break;
		case BFS_ROLE_FLIP:
			dr->flip = (int)t;
			break;
		}
	}
	return make_columns(b) ? -ENOMEM : make_keymaps(b);
}

int bfs_batcher_geom(struct bfs_geom **out, const struct bfs_batcher *b, uint64_t epoch,
		     uint64_t unit)
{
	uint64_t totals[2 * 64 + 2];
	uint64_t *tot = totals;
	struct bfs_perm p;
	uint64_t r0, len;
	int rc = bfs_batcher_unit_rows(b, unit, &r0, &len);

	if (rc)
		return rc;
	if (b->full_geom && !(unit & BFS_CHUNK) && len == b->o.batch_size)
		return bfs_geom_dup(out, b->full_geom);
	if (b->plan->nslots > BFS_ARRAY_SIZE(totals)) {
		tot = calloc(b->plan->nslots, sizeof(*tot));
		if (!tot)
			return -ENOMEM;
	}
	rc = bfs_batcher_perm(b, epoch, &p);
	if (!rc) {
		bfs_batcher_row_totals(b, &p, r0, len, tot);
		bfs_perm_release(&p);
		rc = bfs_geom_new(out, b->plan, len, tot,
				  (unit & BFS_CHUNK) ? 0 : b->o.max_batch_bytes);
	}
	if (tot != totals)
		free(tot);
	return rc;
}
