/* SPDX-License-Identifier: Apache-2.0 */
/*
 * schematest.h — schema helpers for check_schema and check_realdata: find a
 * feature's spec by name, compare two schemas field by field, and hold
 * to_json/from_json to a round trip.
 *
 * Header-only, static functions.
 */
#ifndef BFS_SCHEMATEST_H
#define BFS_SCHEMATEST_H

#include <check.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "schema.h"

#define ST_UNUSED __attribute__((unused))

static ST_UNUSED const struct bfs_feature_spec *spec_find(const struct bfs_schema *s,
							  const char *name, bool list)
{
	size_t n = list ? s->nlists : s->nfeatures;
	const struct bfs_feature_spec *a = list ? s->lists : s->features;

	for (size_t i = 0; i < n; i++)
		if (strcmp(a[i].name, name) == 0)
			return &a[i];
	return NULL;
}

static ST_UNUSED void spec_assert_eq(const struct bfs_feature_spec *a,
				     const struct bfs_feature_spec *b)
{
	ck_assert_str_eq(a->name, b->name);
	ck_assert_int_eq(a->kind, b->kind);
	ck_assert_int_eq(a->layout, b->layout);
	ck_assert_int_eq(a->dtype, b->dtype);
	ck_assert_int_eq(a->ndim, b->ndim);
	for (int i = 0; i < a->ndim; i++)
		ck_assert_int_eq(a->shape[i], b->shape[i]);
	ck_assert_int_eq(a->max_len, b->max_len);
	ck_assert_int_eq(a->max_steps, b->max_steps);
	ck_assert_int_eq(a->is_list, b->is_list);
	ck_assert_int_eq(a->has_default, b->has_default);
	if (a->kind == BFS_KIND_INT64) {
		ck_assert_int_eq(a->pad.i, b->pad.i);
		ck_assert_int_eq(a->dflt.i, b->dflt.i);
	} else if (a->kind == BFS_KIND_FLOAT) {
		ck_assert(a->pad.f == b->pad.f);
		ck_assert(a->dflt.f == b->dflt.f);
	}
}

static ST_UNUSED void schema_assert_eq(const struct bfs_schema *a, const struct bfs_schema *b)
{
	ck_assert_uint_eq(a->nfeatures, b->nfeatures);
	ck_assert_uint_eq(a->nlists, b->nlists);
	for (size_t i = 0; i < a->nfeatures; i++)
		spec_assert_eq(&a->features[i], &b->features[i]);
	for (size_t i = 0; i < a->nlists; i++)
		spec_assert_eq(&a->lists[i], &b->lists[i]);
}

/* to_json → from_json gives the same schema, and the same JSON again. */
static ST_UNUSED void assert_roundtrip(const struct bfs_schema *s)
{
	struct bfs_schema *back = NULL;
	char *text = NULL, *text2 = NULL;

	ck_assert_int_eq(bfs_schema_to_json(&text, s, NULL), 0);
	ck_assert_msg(bfs_schema_from_json(&back, text, strlen(text)) == 0, "%s\n%s", bfs_err_msg(),
		      text);
	schema_assert_eq(s, back);
	ck_assert_int_eq(bfs_schema_to_json(&text2, back, NULL), 0);
	ck_assert_str_eq(text, text2);
	free(text);
	free(text2);
	bfs_schema_free(back);
}

#endif
