/* SPDX-License-Identifier: Apache-2.0 */
/*
 * batch_fill.c — one decoded record into its row of every output tensor,
 * per the schema's layout: fixed values and defaults, padding and
 * .lengths, ragged values and splits, feature lists, images decoded and
 * resized; a bound decode's columns are already written. A row that fails
 * is undone, and under on_corrupt=skip filled again from a substitute
 * record with the same ragged counts, so that every size stays as stated.
 */
#include "batch_impl.h"

#include "image.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- assembly */

static int fail_feature(const struct bfs_feature_spec *f, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int fail_feature(const struct bfs_feature_spec *f, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return bfs_err_set(-EBADMSG, "feature '%s%s': %s", f->is_list ? "feature_lists/" : "",
			   f->name, msg);
}

static void put_scalar(uint8_t *dst, enum bfs_kind k, union bfs_scalar v, uint64_t n)
{
	if (k == BFS_KIND_FLOAT) {
		float f = (float)v.f;
		for (uint64_t i = 0; i < n; i++)
			memcpy(dst + i * 4, &f, 4);
	} else {
		for (uint64_t i = 0; i < n; i++)
			memcpy(dst + i * 8, &v.i, 8);
	}
}

static void put_values(uint8_t *dst, const struct bfs_values *v)
{
	if (v->count == 1) { /* scalars: a fixed-size copy, no call */
		if (v->kind == BFS_KIND_FLOAT)
			memcpy(dst, v->f, 4);
		else
			memcpy(dst, v->i, 8);
		return;
	}
	if (v->count == 0) /* the arrays may be NULL then: memcpy's arguments must not be */
		return;
	if (v->kind == BFS_KIND_FLOAT)
		memcpy(dst, v->f, v->count * 4);
	else
		memcpy(dst, v->i, v->count * 8);
}

static bool present(const struct bfs_values *v)
{
	return v && v->kind != BFS_KIND_NONE;
}

static int check_kind(const struct bfs_feature_spec *f, const struct bfs_values *v)
{
	if (v->kind != f->kind)
		return fail_feature(f, "value is %s, schema says %s", bfs_kind_name(v->kind),
				    bfs_kind_name(f->kind));
	return 0;
}

static int int32_put(uint8_t *dst, uint64_t j, uint64_t val)
{
	int32_t x = (int32_t)val;
	memcpy(dst + j * 4, &x, 4);
	return 0;
}

static void int64_put(uint8_t *dst, uint64_t j, uint64_t val)
{
	int64_t x = (int64_t)val;
	memcpy(dst + j * 8, &x, 8);
}

/* Row j of a fixed-shape feature: its values, or its default, in c_main. */
static inline int fill_fixed(const struct bfs_feature_spec *f, const struct bfs_values *v,
			     uint64_t j, struct cursor *c_main)
{
	uint64_t n = bfs_spec_elems(f), isz;
	int rc;

	if (f->kind == BFS_KIND_BYTES) {
		isz = n * bfs_dtype_size(f->dtype == BFS_DT_INVALID ? BFS_DT_U8 : f->dtype);
		if (!present(v))
			return fail_feature(f, "missing (no default for bytes)");
		if ((rc = check_kind(f, v)))
			return rc;
		if (v->count != 1)
			return fail_feature(f, "%zu values, schema expects 1", v->count);
		if (v->b[0].len != isz)
			return fail_feature(f, "value is %zu bytes, schema expects %llu",
					    v->b[0].len, (unsigned long long)isz);
		memcpy(c_main->base + j * isz, v->b[0].data, isz);
		return 0;
	}
	isz = n * (f->kind == BFS_KIND_FLOAT ? 4 : 8);
	if (!present(v) || v->count == 0) {
		if (!f->has_default)
			return fail_feature(f, "missing and the schema gives no default");
		put_scalar(c_main->base + j * isz, f->kind, f->dflt, n);
		return 0;
	}
	if ((rc = check_kind(f, v)))
		return rc;
	if (v->count != n)
		return fail_feature(f, "%zu values, schema expects %llu", v->count,
				    (unsigned long long)n);
	put_values(c_main->base + j * isz, v);
	return 0;
}

/* Row j of a padded feature: up to max_len values (or bytes) in c_main,
 * padded, and their number in c_aux. */
static inline int fill_padded(const struct bfs_feature_spec *f, const struct bfs_values *v,
			      uint64_t j, struct cursor *c_main, struct cursor *c_aux)
{
	uint64_t len = 0, ml = (uint64_t)f->max_len, isz;
	int rc;

	if (f->kind == BFS_KIND_BYTES) {
		if (present(v)) {
			if ((rc = check_kind(f, v)))
				return rc;
			if (v->count > 1)
				return fail_feature(f, "%zu values, schema expects at most 1",
						    v->count);
			if (v->count == 1) {
				len = v->b[0].len;
				if (len > ml)
					return fail_feature(f,
							    "value is %llu bytes, longer than "
							    "max_len %llu",
							    (unsigned long long)len,
							    (unsigned long long)ml);
				memcpy(c_main->base + j * ml, v->b[0].data, len);
			}
		}
		return int32_put(c_aux->base, j, len);
	}
	isz = f->kind == BFS_KIND_FLOAT ? 4 : 8;
	if (present(v)) {
		if ((rc = check_kind(f, v)))
			return rc;
		len = v->count;
		if (len > ml)
			return fail_feature(f, "%llu values, longer than max_len %llu",
					    (unsigned long long)len, (unsigned long long)ml);
		put_values(c_main->base + j * ml * isz, v);
	}
	if (len < ml)
		put_scalar(c_main->base + (j * ml + len) * isz, f->kind, f->pad, ml - len);
	return int32_put(c_aux->base, j, len);
}

/* Row j of a ragged numeric feature: c_main = values, c_aux = row_splits. */
static inline int fill_ragged(const struct bfs_feature_spec *f, const struct bfs_values *v,
			      uint64_t j, struct cursor *c_main, struct cursor *c_aux)
{
	uint64_t isz = f->kind == BFS_KIND_FLOAT ? 4 : 8;
	int rc;

	if (present(v)) {
		if ((rc = check_kind(f, v)))
			return rc;
		if ((c_main->pos + v->count) * isz > c_main->nbytes)
			return fail_feature(f, "more values than the index counted");
		put_values(c_main->base + c_main->pos * isz, v);
		c_main->pos += v->count;
	}
	if (j == 0)
		int64_put(c_aux->base, 0, 0);
	int64_put(c_aux->base, j + 1, c_main->pos);
	return 0;
}

/* Row j of a ragged bytes feature: c_main = values (bytes), c_aux =
 * value_splits, c_aux2 = row_splits. */
static inline int fill_ragged2(const struct bfs_feature_spec *f, const struct bfs_values *v,
			       uint64_t j, struct cursor *c_main, struct cursor *c_aux,
			       struct cursor *c_aux2)
{
	int rc;

	if (j == 0) {
		int64_put(c_aux->base, 0, 0);
		int64_put(c_aux2->base, 0, 0);
	}
	if (present(v)) {
		if ((rc = check_kind(f, v)))
			return rc;
		for (size_t k = 0; k < v->count; k++) {
			uint64_t l = v->b[k].len;
			if (c_main->pos + l > c_main->nbytes ||
			    (c_main->nvals + 2) * 8 > c_aux->nbytes)
				return fail_feature(f, "more bytes than the index counted");
			memcpy(c_main->base + c_main->pos, v->b[k].data, l);
			c_main->pos += l;
			c_main->nvals++;
			int64_put(c_aux->base, c_main->nvals, c_main->pos);
		}
	}
	int64_put(c_aux2->base, j + 1, c_main->nvals);
	return 0;
}

/* Fill row j of a context feature's tensors. main/aux are the tensors in
 * plan order for this spec (see the roles). */
static int fill_feature(const struct bfs_feature_spec *f, const struct bfs_values *v, uint64_t j,
			struct cursor *c_main, struct cursor *c_aux, struct cursor *c_aux2)
{
	/* the plan gives every layout its tensors (make_drivers, batch.c) */
	if (!c_main || (f->layout != BFS_LAYOUT_FIXED && !c_aux) ||
	    (f->layout == BFS_LAYOUT_RAGGED2 && !c_aux2))
		return fail_feature(f, "internal error: an output tensor is missing");
	switch (f->layout) {
	case BFS_LAYOUT_FIXED:
		return fill_fixed(f, v, j, c_main);
	case BFS_LAYOUT_PADDED:
		return fill_padded(f, v, j, c_main, c_aux);
	case BFS_LAYOUT_RAGGED:
		return fill_ragged(f, v, j, c_main, c_aux);
	case BFS_LAYOUT_RAGGED2:
		return fill_ragged2(f, v, j, c_main, c_aux, c_aux2);
	}
	return fail_feature(f, "unknown layout");
}

/* An augmented image's row j of F.crop (x, y, w, h) and F.flip. */
static void put_box(const struct bfs_aug_box *box, uint64_t j, struct cursor *c_crop,
		    struct cursor *c_flip)
{
	if (c_crop) {
		int32_t v[4] = { (int32_t)box->x, (int32_t)box->y, (int32_t)box->w,
				 (int32_t)box->h };
		memcpy(c_crop->base + j * sizeof(v), v, sizeof(v));
	}
	if (c_flip)
		c_flip->base[j] = box->flip;
}

/* Row j of an image feature: its one JPEG/PNG value decoded and resized to
 * the spec's [H, W, C], augmented as the spec says for record k (its box
 * and flip in F.crop and F.flip). */
static int fill_image(const struct bfs_batcher *b, const struct driver *dr,
		      const struct bfs_values *v, const struct bfs_aug_key *k, uint64_t j,
		      struct cursor *cur)
{
	const struct bfs_feature_spec *f = dr->spec;
	struct cursor *c_main = &cur[dr->main];
	struct bfs_aug_box box;
	struct bfs_image_target t = {
		.h = (uint32_t)f->shape[0],
		.w = (uint32_t)f->shape[1],
		.c = (uint32_t)f->shape[2],
		.resize = f->resize,
		.filter = f->filter,
		.max_pixels = b->o.image_max_pixels,
	};
	uint64_t isz = (uint64_t)t.h * t.w * t.c;
	int rc;

	if (!present(v))
		return fail_feature(f, "missing (an image feature needs one value)");
	if ((rc = check_kind(f, v)))
		return rc;
	if (v->count != 1)
		return fail_feature(f, "%zu values, an image feature takes 1", v->count);
	if ((j + 1) * isz > c_main->nbytes)
		return fail_feature(f, "internal error: row %llu is outside the tensor",
				    (unsigned long long)j);
	if (dr->crop < 0 && dr->flip < 0)
		rc = bfs_image_decode(c_main->base + j * isz, &t, v->b[0].data, v->b[0].len);
	else
		rc = bfs_image_decode_aug(c_main->base + j * isz, &t, &f->aug, k, v->b[0].data,
					  v->b[0].len, &box);
	if (rc == -ENOMEM)
		return rc;
	if (rc)
		return fail_feature(f, "%s", bfs_err_msg());
	if (dr->crop >= 0 || dr->flip >= 0)
		put_box(&box, j, dr->crop >= 0 ? &cur[dr->crop] : NULL,
			dr->flip >= 0 ? &cur[dr->flip] : NULL);
	return 0;
}

/* Row j of a feature list: its steps (zero-padded), its step count and,
 * for bytes, each value's length (c_vlen). */
static int fill_list(const struct bfs_feature_spec *f, const struct bfs_feature_list *fl,
		     uint64_t j, struct cursor *c_main, struct cursor *c_len, struct cursor *c_vlen)
{
	uint64_t per_step = bfs_spec_elems(f);
	uint64_t isz = bfs_dtype_size(f->kind == BFS_KIND_FLOAT	  ? BFS_DT_F32
				      : f->kind == BFS_KIND_INT64 ? BFS_DT_I64
								  : BFS_DT_U8);
	uint64_t step_bytes = per_step * isz;
	uint64_t nsteps = fl ? fl->nsteps : 0;
	uint8_t *row;

	if (!c_main || !c_len || (f->kind == BFS_KIND_BYTES && !c_vlen))
		return fail_feature(f, "internal error: an output tensor is missing");
	row = c_main->base + j * (uint64_t)f->max_steps * step_bytes;
	if (nsteps > (uint64_t)f->max_steps)
		return fail_feature(f, "%llu steps, more than max_steps %lld",
				    (unsigned long long)nsteps, (long long)f->max_steps);
	for (uint64_t s = 0; s < nsteps; s++) {
		const struct bfs_values *v = &fl->steps[s];
		uint8_t *dst = row + s * step_bytes;

		if (v->kind == BFS_KIND_NONE || v->count == 0)
			continue;
		if (v->kind != f->kind)
			return fail_feature(f, "step %llu is %s, schema says %s",
					    (unsigned long long)s, bfs_kind_name(v->kind),
					    bfs_kind_name(f->kind));
		if (f->kind != BFS_KIND_BYTES) {
			if (v->count > per_step)
				return fail_feature(f, "step %llu has %zu values, more than %llu",
						    (unsigned long long)s, v->count,
						    (unsigned long long)per_step);
			put_values(dst, v);
			continue;
		}
		/* bytes: shape [max_bytes] or [max_values, max_bytes] */
		uint64_t max_bytes = (uint64_t)f->shape[f->ndim - 1];
		uint64_t max_vals = f->ndim >= 2 ? (uint64_t)f->shape[0] : 1;
		if (v->count > max_vals)
			return fail_feature(f, "step %llu has %zu values, more than %llu",
					    (unsigned long long)s, v->count,
					    (unsigned long long)max_vals);
		for (size_t k = 0; k < v->count; k++) {
			if (v->b[k].len > max_bytes)
				return fail_feature(
					f, "step %llu value %zu is %zu bytes, more than %llu",
					(unsigned long long)s, k, v->b[k].len,
					(unsigned long long)max_bytes);
			memcpy(dst + k * max_bytes, v->b[k].data, v->b[k].len);
			int32_put(c_vlen->base, (j * (uint64_t)f->max_steps + s) * max_vals + k,
				  v->b[k].len);
		}
	}
	return int32_put(c_len->base, j, nsteps);
}

/* Fill row j from one decoded record, driving each spec once: from a bound
 * decode (bd) or, for the shapes only the reference decoder takes, from a
 * whole decoded example (ex). */
static int fill_driver(const struct bfs_batcher *b, const struct driver *dr, struct bfs_bind *bd,
		       const struct bfs_example *ex, const struct bfs_aug_key *k, uint64_t j,
		       struct cursor *cur)
{
	const struct bfs_feature_spec *f = dr->spec;
	struct cursor *c_aux = dr->aux >= 0 ? &cur[dr->aux] : NULL;
	struct cursor *c_aux2 = dr->aux2 >= 0 ? &cur[dr->aux2] : NULL;

	if (dr->fixed_bytes) {
		const struct bfs_values *v =
			bd ? bfs_bind_values(bd, dr->key) : bfs_example_find(ex, f->name);
		if (v && v->kind == f->kind && v->count == dr->fixed_n) {
			uint8_t *dst = cur[dr->main].base + j * dr->fixed_bytes;
			const void *src =
				f->kind == BFS_KIND_FLOAT ? (const void *)v->f : (const void *)v->i;
			/* scalars: a fixed-size copy the compiler inlines */
			if (dr->fixed_bytes == 4)
				memcpy(dst, src, 4);
			else if (dr->fixed_bytes == 8)
				memcpy(dst, src, 8);
			else
				memcpy(dst, src, dr->fixed_bytes);
			return 0;
		}
		return fill_feature(f, v, j, &cur[dr->main], c_aux, c_aux2);
	}
	if (f->image)
		return fill_image(b, dr,
				  bd ? bfs_bind_values(bd, dr->key) : bfs_example_find(ex, f->name),
				  k, j, cur);
	if (f->is_list)
		return fill_list(
			f, bd ? bfs_bind_list(bd, dr->key) : bfs_example_find_list(ex, f->name), j,
			&cur[dr->main], c_aux, c_aux2);
	return fill_feature(f, bd ? bfs_bind_values(bd, dr->key) : bfs_example_find(ex, f->name), j,
			    &cur[dr->main], c_aux, c_aux2);
}

/* Fill row j from one decoded record, driving each spec once: from a bound
 * decode (bd) or, for the shapes only the reference decoder takes, from a
 * whole decoded example (ex). A bound decode has already written the
 * columns it could (bfs_bind_column): when it wrote every one, only the
 * other drivers are left. */
static int fill_row(const struct bfs_batcher *b, struct bfs_bind *bd, const struct bfs_example *ex,
		    const struct bfs_aug_key *k, uint64_t j, struct cursor *cur)
{
	int rc;

	if (bd && bfs_bind_nwritten(bd) == b->ncolumns) {
		for (size_t o = 0; o < b->nothers; o++)
			if ((rc = fill_driver(b, &b->drivers[b->others[o]], bd, ex, k, j, cur)))
				return rc;
		return 0;
	}
	for (size_t d = 0; d < b->ndrivers; d++) {
		const struct driver *dr = &b->drivers[d];

		if (bd && dr->col_kind != BFS_KIND_NONE && bfs_bind_written(bd, dr->key))
			continue;
		if ((rc = fill_driver(b, dr, bd, ex, k, j, cur)))
			return rc;
	}
	return 0;
}

static void name_record(const struct bfs_batcher *b, uint64_t rec)
{
	size_t sh;
	uint64_t local, off;

	bfs_dataset_locate(b->ds, rec, &sh, &local, &off);
	bfs_err_prefix("%s: record %llu at offset %llu",
		       bfs_shard_path(bfs_dataset_shard(b->ds, sh)), (unsigned long long)local,
		       (unsigned long long)off);
}

/* Decode and fill row j from raw record bytes (bound decoding, else the
 * whole example); the message names the record. */
int bfs_batcher_fill_row(const struct bfs_batcher *b, struct bfs_bind *bd, uint64_t epoch,
			 uint64_t rec, const uint8_t *data, uint32_t len, uint64_t j,
			 struct cursor *cur)
{
	struct bfs_aug_key k = { b->o.seed, epoch, rec };
	struct bfs_example *ex = NULL;
	int rc;

	bfs_bind_row(bd, j);
	rc = bfs_example_bind(bd, data, len);

	if (rc == 0) {
		rc = fill_row(b, bd, NULL, &k, j, cur);
	} else if (rc == -EAGAIN && (rc = bfs_example_decode(&ex, data, len)) == 0) {
		rc = fill_row(b, NULL, ex, &k, j, cur);
		bfs_example_free(ex);
	}
	if (rc)
		name_record(b, rec);
	return rc;
}

/* Undo what a failed fill wrote to row j (a unit of g->batch rows): its
 * rows of the dense tensors zeroed (a padded value or a feature list is
 * written only as far as it goes, on zeros), the ragged cursors back where
 * the row starts and the values written past them zeroed. */
void bfs_batcher_row_undo(const struct bfs_batcher *b, const struct bfs_geom *g, uint64_t j,
			  struct cursor *cur, const struct row_mark *m)
{
	const struct bfs_plan *p = b->plan;

	for (size_t t = 0; t < p->ntensors && g->batch; t++) {
		enum bfs_role r = p->t[t].role;
		uint64_t rb = g->g[t].nbytes / g->batch;

		if (r == BFS_ROLE_MAIN || r == BFS_ROLE_LENGTHS || r == BFS_ROLE_VALUE_LENGTHS ||
		    r == BFS_ROLE_CROP || r == BFS_ROLE_FLIP)
			memset(cur[t].base + j * rb, 0, rb);
	}
	for (size_t k = 0; k < b->nragged; k++) {
		const struct bfs_tensor_tmpl *tm = &p->t[b->ragged[k]];
		struct cursor *c = &cur[b->ragged[k]];
		uint64_t isz =
			tm->spec->layout == BFS_LAYOUT_RAGGED ? bfs_dtype_size(tm->dtype) : 1;

		if (c->pos > m[k].pos)
			memset(c->base + m[k].pos * isz, 0, (c->pos - m[k].pos) * isz);
		c->pos = m[k].pos;
		c->nvals = m[k].nvals;
	}
}

/* Whether records x and y have the same ragged counts. */
static bool same_counts(const struct bfs_batcher *b, uint64_t x, uint64_t y)
{
	for (size_t s = 0; s < b->plan->nslots; s++)
		if (b->counts[s][x] != b->counts[s][y])
			return false;
	return true;
}

/* on_corrupt=skip: fill row j (undone: bfs_batcher_row_undo, m its mark)
 * from the next valid record after `bad` whose ragged counts equal those
 * counted for `bad` (any valid record when there is no ragged feature).
 * The unit's geometry was computed from those counts before anything was
 * decoded, so the substitute fills exactly the bytes the replaced record
 * was given: every size stat reported holds. A record the count pass
 * could not decode was counted as the next one it could (count_as_next in
 * batch_count.c), so that one normally replaces it. */
int bfs_batcher_fill_substitute(const struct bfs_batcher *b, const struct bfs_geom *g,
				struct bfs_bind *bd, uint64_t epoch, uint64_t bad, uint64_t j,
				struct cursor *cur, const struct row_mark *m, uint8_t *rbuf,
				size_t cap, bfs_corrupt_fn on_corrupt, void *ctx)
{
	unsigned tries = 0, how;
	int rc;

	for (uint64_t k = 1; k < b->nrecords && k <= SKIP_MAX_SCAN && tries < SKIP_MAX_TRIES; k++) {
		uint64_t rec = (bad + k) % b->nrecords;
		uint32_t len;

		if (b->plan->nslots && !same_counts(b, rec, bad))
			continue;
		tries++;
		rc = bfs_dataset_read(b->ds, rec, rbuf, cap, &len, b->o.verify);
		how = rc ? bfs_read_failure(rc) : 0;
		if (rc == 0)
			rc = bfs_batcher_fill_row(b, bd, epoch, rec, rbuf, len, j, cur);
		if (rc == 0)
			return 0;
		if (rc == -ENOMEM)
			return rc;
		if (on_corrupt)
			on_corrupt(ctx, bfs_err_msg(), BFS_REPORT_SKIPPED | how);
		bfs_batcher_row_undo(b, g, j, cur, m);
	}
	return bfs_err_set(-EIO, "no valid record%s to replace it among the next %llu",
			   b->plan->nslots ? " with the same ragged counts" : "",
			   (unsigned long long)(b->nrecords - 1 < SKIP_MAX_SCAN ? b->nrecords - 1
										: SKIP_MAX_SCAN));
}
