/* SPDX-License-Identifier: Apache-2.0 */
/*
 * schema_check.c — a decoded record against a schema: every feature the
 * schema names present (or defaulted) with its kind and a count its layout
 * takes, each failure naming the feature; and the ragged counts of a
 * record's feature (the values and bytes its row will hold).
 */
#include "schema_impl.h"

#include <stdarg.h>
#include <stdio.h>

/* ---- checking a record ------------------------------------------------------------- */

static int check_err(const struct bfs_feature_spec *f, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int check_err(const struct bfs_feature_spec *f, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return bfs_err_set(-EBADMSG, "%s '%.200s': %s", bfs_spec_what(f), f->name, msg);
}

static int check_feature(const struct bfs_feature_spec *f, const struct bfs_values *v)
{
	char shp[160];
	uint64_t want;

	if (!v || v->kind == BFS_KIND_NONE) {
		if (f->layout != BFS_LAYOUT_FIXED || f->has_default)
			return 0;
		return check_err(f, "missing, and the schema gives no default");
	}
	if (v->kind != f->kind)
		return check_err(f, "kind %s, schema says %s", bfs_kind_name(v->kind),
				 bfs_kind_name(f->kind));
	switch (f->layout) {
	case BFS_LAYOUT_FIXED:
		want = bfs_spec_elems(f);
		bfs_spec_fmt_shape(shp, sizeof(shp), f->ndim, f->shape);
		if (f->kind != BFS_KIND_BYTES) {
			if (v->count != want)
				return check_err(f, "%zu values, schema shape %s needs %llu",
						 v->count, shp, (unsigned long long)want);
			return 0;
		}
		if (v->count != 1)
			return check_err(f,
					 "%zu values, a fixed-shape bytes feature takes exactly 1",
					 v->count);
		if (f->image)
			return 0; /* any length: it is decoded to the shape */
		want *= bfs_dtype_size(f->dtype);
		if (v->b[0].len != want)
			return check_err(f, "value of %zu bytes, schema shape %s of %s needs %llu",
					 v->b[0].len, shp, bfs_dtype_name(f->dtype),
					 (unsigned long long)want);
		return 0;
	case BFS_LAYOUT_PADDED:
		if (f->kind != BFS_KIND_BYTES) {
			if (v->count > (uint64_t)f->max_len)
				return check_err(f, "%zu values, over max_len %lld", v->count,
						 (long long)f->max_len);
			return 0;
		}
		if (v->count > 1)
			return check_err(f, "%zu values, a padded bytes feature takes at most 1",
					 v->count);
		if (v->count && v->b[0].len > (uint64_t)f->max_len)
			return check_err(f, "value of %zu bytes, over max_len %lld", v->b[0].len,
					 (long long)f->max_len);
		return 0;
	default:
		return 0;
	}
}

static int check_list(const struct bfs_feature_spec *f, const struct bfs_feature_list *l)
{
	uint64_t maxv, maxb = 0;
	char shp[160];

	if (!l)
		return 0;
	if (l->nsteps > (uint64_t)f->max_steps)
		return check_err(f, "%zu steps, over max_steps %lld", l->nsteps,
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
			return check_err(f, "step %zu: kind %s, schema says %s", j,
					 bfs_kind_name(v->kind), bfs_kind_name(f->kind));
		if (v->count > maxv)
			return check_err(f,
					 "step %zu: %zu values, step shape %s takes at most %llu",
					 j, v->count, shp, (unsigned long long)maxv);
		if (f->kind == BFS_KIND_BYTES)
			for (size_t k = 0; k < v->count; k++)
				if (v->b[k].len > maxb)
					return check_err(f,
							 "step %zu: value of %zu bytes, step shape "
							 "%s takes at most %llu",
							 j, v->b[k].len, shp,
							 (unsigned long long)maxb);
	}
	return 0;
}

int bfs_schema_check(const struct bfs_schema *s, const struct bfs_example *ex)
{
	int err;

	for (size_t i = 0; i < s->nfeatures; i++) {
		err = check_feature(&s->features[i], bfs_example_find(ex, s->features[i].name));
		if (err < 0)
			return err;
	}
	for (size_t i = 0; i < s->nlists; i++) {
		err = check_list(&s->lists[i], bfs_example_find_list(ex, s->lists[i].name));
		if (err < 0)
			return err;
	}
	return 0;
}

void bfs_spec_ragged_counts(const struct bfs_feature_spec *f, const struct bfs_example *ex,
			    uint64_t *nvalues, uint64_t *nbytes)
{
	const struct bfs_values *v = f->is_list ? NULL : bfs_example_find(ex, f->name);

	*nvalues = 0;
	*nbytes = 0;
	if (!v || v->kind != f->kind)
		return;
	*nvalues = v->count;
	if (v->kind == BFS_KIND_BYTES)
		for (size_t i = 0; i < v->count; i++)
			*nbytes += v->b[i].len;
}
