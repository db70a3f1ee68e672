/* SPDX-License-Identifier: Apache-2.0 */
/*
 * decodertest.h — what the tests ask of the decoder that a mount never
 * does, written over the functions the product runs:
 *
 *  - test_batch_build: a unit (a batch, or a chunk with BFS_CHUNK set)
 *    built whole, in one part of the job the cache builds it with (batch.h:
 *    bfs_build_new_in, bfs_build_part, bfs_build_finish; the cache splits
 *    the same job into parts for its threads);
 *  - test_example_equal: two decoded records compared, values to the bit
 *    (the fast and bound decoders held to the reference);
 *  - test_schema_check: a decoded record against a schema, each failure
 *    one line naming the feature (the oracle of inference: every record
 *    inferred from passes the schema inferred);
 *  - test_perm_apply: the record at one position of an epoch's order, from
 *    the order's one-position formula, the reference of the product's
 *    bfs_perm_apply_many.
 */
#ifndef BFS_TESTS_DECODERTEST_H
#define BFS_TESTS_DECODERTEST_H

#include "batch.h"
#include "example.h"
#include "perm.h"
#include "schema.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Decode (epoch, unit) into *out (malloc'd, geom->st_size bytes: the whole
 * .safetensors file) and its geometry. *out_geom is in-out: NULL, or the
 * unit's geometry from bfs_batcher_geom, which the call then owns (handed
 * back on success, freed on failure, *out_geom NULL then). Errors as
 * bfs_build_finish's. */
static inline int test_batch_build(uint8_t **out, struct bfs_geom **out_geom,
				   const struct bfs_batcher *b, uint64_t epoch, uint64_t unit,
				   bfs_corrupt_fn on_corrupt, void *ctx)
{
	struct bfs_build *jb;
	struct bfs_geom *g = *out_geom;
	int rc;

	*out_geom = NULL;
	rc = bfs_build_new_in(&jb, b, epoch, unit, g, 1, NULL);
	if (rc)
		return rc;
	bfs_build_part(jb, 0, on_corrupt, ctx);
	return bfs_build_finish(jb, out, out_geom);
}

/* ---- two records compared ---------------------------------------------- */

static inline bool test_values_equal(const struct bfs_values *a, const struct bfs_values *b)
{
	if (a->kind != b->kind || a->count != b->count)
		return false;
	for (size_t i = 0; i < a->count; i++) {
		switch (a->kind) {
		case BFS_KIND_FLOAT: {
			uint32_t x, y; /* bit patterns: NaN and -0 too */
			memcpy(&x, &a->f[i], sizeof(x));
			memcpy(&y, &b->f[i], sizeof(y));
			if (x != y)
				return false;
			break;
		}
		case BFS_KIND_INT64:
			if (a->i[i] != b->i[i])
				return false;
			break;
		case BFS_KIND_BYTES:
			if (a->b[i].len != b->b[i].len ||
			    (a->b[i].len && memcmp(a->b[i].data, b->b[i].data, a->b[i].len) != 0))
				return false;
			break;
		default:
			break;
		}
	}
	return true;
}

/* a and b hold the same features, in the same order, with the same values. */
static inline bool test_example_equal(const struct bfs_example *a, const struct bfs_example *b)
{
	if (a->nfeatures != b->nfeatures || a->nlists != b->nlists ||
	    a->is_sequence != b->is_sequence)
		return false;
	for (size_t i = 0; i < a->nfeatures; i++)
		if (strcmp(a->features[i].name, b->features[i].name) != 0 ||
		    !test_values_equal(&a->features[i].v, &b->features[i].v))
			return false;
	for (size_t i = 0; i < a->nlists; i++) {
		if (strcmp(a->lists[i].name, b->lists[i].name) != 0 ||
		    a->lists[i].nsteps != b->lists[i].nsteps)
			return false;
		for (size_t s = 0; s < a->lists[i].nsteps; s++)
			if (!test_values_equal(&a->lists[i].steps[s], &b->lists[i].steps[s]))
				return false;
	}
	return true;
}

/* ---- a record against a schema ----------------------------------------- */

static inline int test_check_err(const struct bfs_feature_spec *f, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static inline int test_check_err(const struct bfs_feature_spec *f, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return bfs_err_set(-EBADMSG, "%s '%.200s': %s", f->is_list ? "feature list" : "feature",
			   f->name, msg);
}

static inline int test_check_fixed(const struct bfs_feature_spec *f, const struct bfs_values *v)
{
	uint64_t want = bfs_spec_elems(f);
	char shp[160];

	bfs_spec_fmt_shape(shp, sizeof(shp), f->ndim, f->shape);
	if (f->kind != BFS_KIND_BYTES) {
		if (v->count != want)
			return test_check_err(f, "%zu values, schema shape %s needs %llu", v->count,
					      shp, (unsigned long long)want);
		return 0;
	}
	if (v->count != 1)
		return test_check_err(f, "%zu values, a fixed-shape bytes feature takes exactly 1",
				      v->count);
	if (f->image)
		return 0; /* any length: it is decoded to the shape */
	want *= bfs_dtype_size(f->dtype);
	if (v->b[0].len != want)
		return test_check_err(f, "value of %zu bytes, schema shape %s of %s needs %llu",
				      v->b[0].len, shp, bfs_dtype_name(f->dtype),
				      (unsigned long long)want);
	return 0;
}

static inline int test_check_feature(const struct bfs_feature_spec *f, const struct bfs_values *v)
{
	if (!v || v->kind == BFS_KIND_NONE) {
		if (f->layout != BFS_LAYOUT_FIXED || f->has_default)
			return 0;
		return test_check_err(f, "missing, and the schema gives no default");
	}
	if (v->kind != f->kind)
		return test_check_err(f, "kind %s, schema says %s", bfs_kind_name(v->kind),
				      bfs_kind_name(f->kind));
	switch (f->layout) {
	case BFS_LAYOUT_FIXED:
		return test_check_fixed(f, v);
	case BFS_LAYOUT_PADDED:
		if (f->kind != BFS_KIND_BYTES) {
			if (v->count > (uint64_t)f->max_len)
				return test_check_err(f, "%zu values, over max_len %lld", v->count,
						      (long long)f->max_len);
			return 0;
		}
		if (v->count > 1)
			return test_check_err(
				f, "%zu values, a padded bytes feature takes at most 1", v->count);
		if (v->count && v->b[0].len > (uint64_t)f->max_len)
			return test_check_err(f, "value of %zu bytes, over max_len %lld",
					      v->b[0].len, (long long)f->max_len);
		return 0;
	default:
		return 0;
	}
}

static inline int test_check_list(const struct bfs_feature_spec *f,
				  const struct bfs_feature_list *l)
{
	uint64_t maxv, maxb = 0;
	char shp[160];

	if (!l)
		return 0;
	if (l->nsteps > (uint64_t)f->max_steps)
		return test_check_err(f, "%zu steps, over max_steps %lld", l->nsteps,
				      (long long)f->max_steps);
	bfs_spec_fmt_shape(shp, sizeof(shp), f->ndim, f->shape);
	if (f->kind == BFS_KIND_BYTES) {
		maxv = f->ndim == 2 ? (uint64_t)f->shape[0] : 1;
		maxb = (uint64_t)f->shape[f->ndim - 1];
	} else {
		maxv = bfs_spec_elems(f);
	}
	for (size_t j = 0; j < l->nsteps; j++) {
		const struct bfs_values *v = &l->steps[j];

		if (v->kind == BFS_KIND_NONE)
			continue;
		if (v->kind != f->kind)
			return test_check_err(f, "step %zu: kind %s, schema says %s", j,
					      bfs_kind_name(v->kind), bfs_kind_name(f->kind));
		if (v->count > maxv)
			return test_check_err(
				f, "step %zu: %zu values, step shape %s takes at most %llu", j,
				v->count, shp, (unsigned long long)maxv);
		if (f->kind == BFS_KIND_BYTES)
			for (size_t k = 0; k < v->count; k++)
				if (v->b[k].len > maxb)
					return test_check_err(f,
							      "step %zu: value of %zu bytes, step "
							      "shape %s takes at most %llu",
							      j, v->b[k].len, shp,
							      (unsigned long long)maxb);
	}
	return 0;
}

/* Every feature s names present (or defaulted) in ex with its kind and a
 * count its layout takes. 0, or -EBADMSG with a message naming the feature
 * and what is wrong. */
static inline int test_schema_check(const struct bfs_schema *s, const struct bfs_example *ex)
{
	int err;

	for (size_t i = 0; i < s->nfeatures; i++) {
		err = test_check_feature(&s->features[i],
					 bfs_example_find(ex, s->features[i].name));
		if (err < 0)
			return err;
	}
	for (size_t i = 0; i < s->nlists; i++) {
		err = test_check_list(&s->lists[i], bfs_example_find_list(ex, s->lists[i].name));
		if (err < 0)
			return err;
	}
	return 0;
}

/* ---- an epoch's order, a position at a time ----------------------------- */

/* The record at position pos (< n) of p. */
static inline uint64_t test_perm_apply(const struct bfs_perm *p, uint64_t pos)
{
	if (p->mix) {
		uint64_t rec;
		bfs_mix_records(p->mix, p->epoch, &pos, 1, &rec);
		return rec;
	}
	if (p->bo)
		return bfs_block_order_apply(p->bo, pos);
	return bfs_feistel_apply(&p->f, pos);
}

#endif
