/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_tensor.c — unit tests of decoder/tensor.c: the .npy header numpy
 * writes, a plan's tensor names and a batch's geometry for every layout
 * (the .safetensors header naming each tensor's offsets; a size limit),
 * and a name clash refused.
 */
#include "common.h"
#include "schema.h"
#include "tensor.h"

#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

START_TEST(npy_header_matches_numpy_layout)
{
	static const struct {
		enum bfs_dtype dt;
		int ndim;
		int64_t shape[3];
		const char *dict;
	} cases[] = {
		{ BFS_DT_F32,
		  2,
		  { 32, 784 },
		  "{'descr': '<f4', 'fortran_order': False, 'shape': (32, 784), }" },
		{ BFS_DT_I64,
		  1,
		  { 7 },
		  "{'descr': '<i8', 'fortran_order': False, 'shape': (7,), }" },
		{ BFS_DT_U8,
		  3,
		  { 2, 3, 4 },
		  "{'descr': '|u1', 'fortran_order': False, 'shape': (2, 3, 4), }" },
		{ BFS_DT_I32, 0, { 0 }, "{'descr': '<i4', 'fortran_order': False, 'shape': (), }" },
		{ BFS_DT_F32,
		  3,
		  { 0, 10, 12345678901234 },
		  "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 10, 12345678901234), }" },
	};
	char h[1024];

	for (size_t i = 0; i < BFS_ARRAY_SIZE(cases); i++) {
		int n = bfs_npy_header(h, sizeof(h), cases[i].dt, cases[i].ndim, cases[i].shape);
		ck_assert_int_gt(n, 0);
		ck_assert_int_eq(n % 64, 0);
		ck_assert(memcmp(h, "\x93NUMPY\x01\x00", 8) == 0);
		ck_assert_int_eq((unsigned char)h[8] | ((unsigned char)h[9] << 8), n - 10);
		ck_assert(memcmp(h + 10, cases[i].dict, strlen(cases[i].dict)) == 0);
		ck_assert_int_eq(h[n - 1], '\n');
		for (int k = 10 + (int)strlen(cases[i].dict); k < n - 1; k++)
			ck_assert_int_eq(h[k], ' ');
	}
}
END_TEST

static struct bfs_feature_spec spec(const char *name, enum bfs_kind k, enum bfs_layout l, int ndim,
				    int64_t d0, int64_t max_len)
{
	struct bfs_feature_spec f;

	memset(&f, 0, sizeof(f));
	f.name = (char *)name;
	f.kind = k;
	f.layout = l;
	f.dtype = k == BFS_KIND_FLOAT ? BFS_DT_F32 : k == BFS_KIND_INT64 ? BFS_DT_I64 : BFS_DT_U8;
	f.ndim = ndim;
	f.shape[0] = d0;
	f.max_len = max_len;
	return f;
}

START_TEST(plan_names_and_geometry_follow_layouts)
{
	struct bfs_feature_spec fs[4];
	struct bfs_schema s = { 0 };
	struct bfs_plan *p = NULL;
	struct bfs_geom *g = NULL;
	uint64_t totals[3] = { 10, 5, 40 }; /* words: 10 values; tags: 5 values, 40 bytes */

	fs[0] = spec("label", BFS_KIND_INT64, BFS_LAYOUT_FIXED, 0, 0, 0);
	fs[1] = spec("tags", BFS_KIND_BYTES, BFS_LAYOUT_RAGGED2, 2, -1, 0);
	fs[1].shape[1] = -1;
	fs[2] = spec("tokens", BFS_KIND_INT64, BFS_LAYOUT_PADDED, 1, -1, 16);
	fs[3] = spec("words", BFS_KIND_FLOAT, BFS_LAYOUT_RAGGED, 1, -1, 0);
	s.nfeatures = 4;
	s.features = fs;
	/* slots are given in schema order: tags (2 slots), then words (1) */
	totals[0] = 5;
	totals[1] = 40;
	totals[2] = 10;
	ck_assert_int_eq(bfs_plan_new(&p, &s), 0);
	ck_assert_uint_eq(p->ntensors, 8);
	ck_assert_uint_eq(p->nslots, 3);
	static const char *names[] = {
		"label",  "tags.row_splits", "tags.value_splits", "tags.values",
		"tokens", "tokens.lengths",  "words.row_splits",  "words.values"
	};
	for (size_t i = 0; i < 8; i++)
		ck_assert_str_eq(p->t[i].name, names[i]);
	ck_assert_int_eq(bfs_geom_new(&g, p, 4, totals, 0), 0);
	ck_assert_uint_eq(g->g[0].nbytes, 4 * 8); /* label [4] int64 */
	ck_assert_uint_eq(g->g[1].nbytes, 5 * 8); /* tags.row_splits [5] */
	ck_assert_uint_eq(g->g[2].nbytes, 6 * 8); /* tags.value_splits [6] */
	ck_assert_uint_eq(g->g[3].nbytes, 40); /* tags.values [40] u8 */
	ck_assert_uint_eq(g->g[4].nbytes, 4 * 16 * 8); /* tokens [4,16] */
	ck_assert_uint_eq(g->g[5].nbytes, 4 * 4); /* tokens.lengths [4] i32 */
	ck_assert_uint_eq(g->g[6].nbytes, 5 * 8); /* words.row_splits */
	ck_assert_uint_eq(g->g[7].nbytes, 10 * 4); /* words.values f32 */
	ck_assert_uint_eq(g->st_hlen % 64, 0);
	/* tensors are contiguous, in order, no holes */
	uint64_t off = g->st_hlen;
	for (size_t i = 0; i < g->ntensors; i++) {
		ck_assert_uint_eq(g->g[i].offset, off);
		off += g->g[i].nbytes;
	}
	ck_assert_uint_eq(g->st_size, off);
	/* the header is JSON naming every tensor with its offsets */
	uint64_t hl = 0;
	for (int i = 7; i >= 0; i--)
		hl = (hl << 8) | (unsigned char)g->st_header[i];
	ck_assert_uint_eq(hl + 8, g->st_hlen);
	ck_assert(strstr(g->st_header + 8, "\"tokens.lengths\":{\"data_offsets\":["));
	ck_assert(strstr(g->st_header + 8, "\"dtype\":\"I32\",\"shape\":[4]}"));
	bfs_geom_free(g);

	/* a limit below the batch size fails with -EFBIG */
	ck_assert_int_eq(bfs_geom_new(&g, p, 4, totals, 100), -EFBIG);
	bfs_plan_free(p);
}
END_TEST

START_TEST(plan_rejects_name_clash)
{
	struct bfs_feature_spec fs[2];
	struct bfs_schema s = { 0 };
	struct bfs_plan *p = NULL;

	fs[0] = spec("a", BFS_KIND_INT64, BFS_LAYOUT_PADDED, 1, -1, 3);
	fs[1] = spec("a.lengths", BFS_KIND_INT64, BFS_LAYOUT_FIXED, 0, 0, 0);
	s.nfeatures = 2;
	s.features = fs;
	ck_assert_int_eq(bfs_plan_new(&p, &s), -EINVAL);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("tensor");
	TCase *tensor = tcase_create("tensor");

	tcase_add_test(tensor, npy_header_matches_numpy_layout);
	tcase_add_test(tensor, plan_names_and_geometry_follow_layouts);
	tcase_add_test(tensor, plan_rejects_name_clash);
	suite_add_tcase(s, tensor);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
