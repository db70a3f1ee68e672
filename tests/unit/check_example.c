/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_example.c — unit tests of decoder/example/example.c: tf.train.Example and
 * SequenceExample decoding from hand-built wire bytes (packed and unpacked
 * lists, unknown fields at every level, duplicate keys, empty Features,
 * malformed input) and the text form. Every record of the shared real
 * TFRecord files is check_realdata.c's.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "example.h"
#include "pbtest.h"
#include "bind_diff.h"

static struct bfs_example *decode_ok(const struct pb *m)
{
	struct bfs_example *ex = NULL;
	int err = bfs_example_decode(&ex, m->d, m->n);

	const char *bad;

	ck_assert_msg(err == 0, "decode failed: %d %s", err, bfs_err_msg());
	ck_assert_ptr_nonnull(ex);
	bad = bind_diff(m->d, m->n); /* bound decoding reads every case the same */
	ck_assert_msg(bad == NULL, "bind: %s", bad);
	return ex;
}

/* ---- packed and unpacked repeated scalars ------------------------------------ */

static const float some_floats[] = { 1.5f, -2.25f, 0.0f, 3.4028235e38f, -1e-45f };
static const int64_t some_ints[] = { 0, 1, -1, 127, 128, INT64_MIN, INT64_MAX, 300 };

START_TEST(floats_decode_the_same_packed_or_unpacked)
{
	const bool packed = _i == 1;
	struct pb f = pb_float_feature(some_floats, 5, packed), feats = { 0 };
	struct bfs_example *ex;
	const struct bfs_values *v;

	pb_add(&feats, "x", &f);
	struct pb m = pb_example(&feats, NULL);
	ex = decode_ok(&m);
	v = bfs_example_find(ex, "x");
	ck_assert_ptr_nonnull(v);
	ck_assert_int_eq(v->kind, BFS_KIND_FLOAT);
	ck_assert_uint_eq(v->count, 5);
	ck_assert_mem_eq(v->f, some_floats, sizeof(some_floats));
	bfs_example_free(ex);
}
END_TEST

START_TEST(ints_decode_the_same_packed_or_unpacked)
{
	const bool packed = _i == 1;
	struct pb f = pb_int_feature(some_ints, 8, packed), feats = { 0 };
	struct bfs_example *ex;
	const struct bfs_values *v;

	pb_add(&feats, "x", &f);
	struct pb m = pb_example(&feats, NULL);
	ex = decode_ok(&m);
	v = bfs_example_find(ex, "x");
	ck_assert_ptr_nonnull(v);
	ck_assert_int_eq(v->kind, BFS_KIND_INT64);
	ck_assert_uint_eq(v->count, 8);
	for (size_t i = 0; i < 8; i++)
		ck_assert_int_eq(v->i[i], some_ints[i]);
	bfs_example_free(ex);
}
END_TEST

START_TEST(packed_and_unpacked_runs_in_one_list_concatenate)
{
	/* Int64List{value: [5, 6] packed, value: 7, value: [8] packed} */
	struct pb list = { 0 }, raw = { 0 }, raw2 = { 0 }, feat = { 0 }, feats = { 0 };
	struct bfs_example *ex;
	const struct bfs_values *v;

	pb_varint(&raw, 5);
	pb_varint(&raw, 6);
	pb_sub(&list, 1, &raw);
	pb_tag(&list, 1, PB_VARINT);
	pb_varint(&list, 7);
	pb_varint(&raw2, 8);
	pb_sub(&list, 1, &raw2);
	pb_sub(&feat, 3, &list);
	pb_add(&feats, "n", &feat);
	struct pb m = pb_example(&feats, NULL);
	ex = decode_ok(&m);
	v = bfs_example_find(ex, "n");
	ck_assert_uint_eq(v->count, 4);
	ck_assert_int_eq(v->i[0], 5);
	ck_assert_int_eq(v->i[1], 6);
	ck_assert_int_eq(v->i[2], 7);
	ck_assert_int_eq(v->i[3], 8);
	bfs_example_free(ex);
}
END_TEST

/* ---- unknown fields ---------------------------------------------------------- */

START_TEST(unknown_fields_are_skipped_at_every_level)
{
	const char *words[] = { "ab", "" };
	const float fl[] = { 2.5f };
	const int64_t in[] = { -3, 4 };
	struct pb bl = { 0 }, flist = { 0 }, ilist = { 0 }, raw = { 0 };
	struct pb fb = { 0 }, ff = { 0 }, fi = { 0 }, feats = { 0 }, e = { 0 };
	struct pb step = { 0 }, flst = { 0 }, lists = { 0 }, le = { 0 }, m = { 0 };
	struct bfs_example *ex;
	const struct bfs_values *v;
	const struct bfs_feature_list *l;

	/* BytesList, FloatList, Int64List with unknowns around the values */
	pb_unknowns(&bl);
	pb_str(&bl, 1, words[0]);
	pb_unknowns(&bl);
	pb_str(&bl, 1, words[1]);
	pb_unknowns(&flist);
	pb_fixed32(&flist, 1, pb_f32bits(fl[0]));
	pb_unknowns(&flist);
	pb_varint(&raw, (uint64_t)in[0]);
	pb_varint(&raw, (uint64_t)in[1]);
	pb_unknowns(&ilist);
	pb_sub(&ilist, 1, &raw);
	pb_unknowns(&ilist);
	/* Features with unknowns in each Feature and each map entry */
	pb_unknowns(&fb);
	pb_sub(&fb, 1, &bl);
	pb_unknowns(&fb);
	pb_sub(&ff, 2, &flist);
	pb_unknowns(&ff);
	pb_unknowns(&fi);
	pb_sub(&fi, 3, &ilist);
	pb_unknowns(&feats);
	pb_unknowns(&e);
	pb_str(&e, 1, "b");
	pb_unknowns(&e);
	pb_sub(&e, 2, &fb);
	pb_unknowns(&e);
	pb_sub(&feats, 1, &e);
	pb_unknowns(&feats);
	pb_add(&feats, "f", &ff);
	pb_add(&feats, "i", &fi);
	pb_unknowns(&feats);
	/* FeatureLists → entry → FeatureList → steps, with unknowns */
	pb_unknowns(&step);
	pb_sub(&step, 3, &ilist);
	pb_unknowns(&flst);
	pb_sub(&flst, 1, &step);
	pb_unknowns(&flst);
	pb_sub(&flst, 1, &step);
	pb_unknowns(&le);
	pb_sub(&le, 2, &flst);
	pb_unknowns(&le);
	pb_str(&le, 1, "seq"); /* key after value */
	pb_unknowns(&lists);
	pb_sub(&lists, 1, &le);
	pb_unknowns(&lists);
	/* SequenceExample */
	pb_unknowns(&m);
	pb_sub(&m, 1, &feats);
	pb_unknowns(&m);
	pb_sub(&m, 2, &lists);
	pb_unknowns(&m);

	ex = decode_ok(&m);
	ck_assert_uint_eq(ex->nfeatures, 3);
	ck_assert(ex->is_sequence);
	v = bfs_example_find(ex, "b");
	ck_assert_int_eq(v->kind, BFS_KIND_BYTES);
	ck_assert_uint_eq(v->count, 2);
	ck_assert_uint_eq(v->b[0].len, 2);
	ck_assert_mem_eq(v->b[0].data, "ab", 2);
	ck_assert_uint_eq(v->b[1].len, 0);
	v = bfs_example_find(ex, "f");
	ck_assert_uint_eq(v->count, 1);
	ck_assert(v->f[0] == 2.5f);
	v = bfs_example_find(ex, "i");
	ck_assert_uint_eq(v->count, 2);
	ck_assert_int_eq(v->i[0], -3);
	ck_assert_int_eq(v->i[1], 4);
	l = bfs_example_find_list(ex, "seq");
	ck_assert_ptr_nonnull(l);
	ck_assert_uint_eq(l->nsteps, 2);
	ck_assert_int_eq(l->steps[1].kind, BFS_KIND_INT64);
	ck_assert_int_eq(l->steps[1].i[0], -3);
	bfs_example_free(ex);
}
END_TEST

/* ---- map semantics ---------------------------------------------------------------- */

START_TEST(duplicate_keys_keep_the_last_and_sort_by_name)
{
	struct pb feats = { 0 };
	struct bfs_example *ex;

	/* 60 entries over names k00..k09, value = position: the last
	 * occurrence of kNN is at position 50 + NN. */
	for (int64_t i = 0; i < 60; i++) {
		char name[8];
		snprintf(name, sizeof(name), "k%02d", (int)(9 - i % 10));
		struct pb f = pb_int_feature(&i, 1, true);
		pb_add(&feats, name, &f);
	}
	struct pb m = pb_example(&feats, NULL);
	ex = decode_ok(&m);
	ck_assert_uint_eq(ex->nfeatures, 10);
	for (size_t i = 0; i < 10; i++) {
		char name[8];
		snprintf(name, sizeof(name), "k%02d", (int)i);
		ck_assert_str_eq(ex->features[i].name, name);
		ck_assert_int_eq(ex->features[i].v.i[0], 50 + (9 - (int)i));
	}
	bfs_example_free(ex);
}
END_TEST

/* 300 keys written in order (the common case, decoded in one pass), then
 * the same with a duplicate at the start, in the middle and at the end:
 * the last of each duplicate wins and names stay sorted, in the fast, the
 * reference (compared inside decode_ok's bind_diff) and the bound decoder. */
START_TEST(wide_maps_in_key_order_keep_map_semantics)
{
	enum { N = 300 };
	static const int dup_at[][2] = { { -1, -1 }, { 0, 0 }, { 150, 151 }, { 299, N } };

	for (size_t c = 0; c < sizeof(dup_at) / sizeof(dup_at[0]); c++) {
		struct pb feats = { 0 };
		struct bfs_example *ex, *ref = NULL;

		for (int i = 0; i <= N; i++) {
			char name[8];
			int64_t v = i;

			if (i == dup_at[c][1]) { /* a second f<dup> with value 1000 + dup */
				int64_t d = 1000 + dup_at[c][0];
				struct pb f = pb_int_feature(&d, 1, true);
				snprintf(name, sizeof(name), "f%03d", dup_at[c][0]);
				pb_add(&feats, name, &f);
			}
			if (i == N)
				break;
			struct pb f = pb_int_feature(&v, 1, true);
			snprintf(name, sizeof(name), "f%03d", i);
			pb_add(&feats, name, &f);
		}
		struct pb m = pb_example(&feats, NULL);
		ex = decode_ok(&m);
		ck_assert_int_eq(bfs_example_decode_ref(&ref, m.d, m.n), 0);
		ck_assert_uint_eq(ex->nfeatures, N);
		ck_assert_uint_eq(ref->nfeatures, N);
		for (int i = 0; i < N; i++) {
			char name[8];
			/* the duplicate is written after the first f<dup> unless it
			 * precedes it (case 1: dup_at {0, 0} puts it first) */
			int64_t want =
				i == dup_at[c][0] && dup_at[c][1] > dup_at[c][0] ? 1000 + i : i;
			snprintf(name, sizeof(name), "f%03d", i);
			ck_assert_str_eq(ex->features[i].name, name);
			ck_assert_str_eq(ref->features[i].name, name);
			ck_assert_int_eq(ex->features[i].v.i[0], want);
			ck_assert_int_eq(ref->features[i].v.i[0], want);
			ck_assert_int_eq(bfs_example_find(ex, name)->i[0], want);
		}
		bfs_example_free(ex);
		bfs_example_free(ref);
	}
}
END_TEST

START_TEST(duplicate_lists_keep_the_last)
{
	const int64_t one = 1, two = 2;
	struct pb f1 = pb_int_feature(&one, 1, true), f2 = pb_int_feature(&two, 1, true);
	struct pb l1 = { 0 }, l2 = { 0 }, lists = { 0 };
	struct bfs_example *ex;
	const struct bfs_feature_list *l;

	pb_sub(&l1, 1, &f1);
	pb_sub(&l2, 1, &f2);
	pb_sub(&l2, 1, &f2);
	pb_add(&lists, "s", &l1);
	pb_add(&lists, "s", &l2);
	pb_add(&lists, "a", &l1);
	struct pb m = pb_example(NULL, &lists);
	ex = decode_ok(&m);
	ck_assert_uint_eq(ex->nlists, 2);
	ck_assert_str_eq(ex->lists[0].name, "a");
	l = bfs_example_find_list(ex, "s");
	ck_assert_uint_eq(l->nsteps, 2);
	ck_assert_int_eq(l->steps[0].i[0], 2);
	bfs_example_free(ex);
}
END_TEST

START_TEST(empty_feature_and_entry_without_value_count_as_missing)
{
	struct pb empty = { 0 }, feats = { 0 };
	struct bfs_example *ex;
	const struct bfs_values *v;

	pb_add(&feats, "empty", &empty); /* Feature {} */
	pb_add(&feats, "novalue", NULL); /* entry with a key only */
	struct pb m = pb_example(&feats, NULL);
	ex = decode_ok(&m);
	ck_assert_uint_eq(ex->nfeatures, 2);
	v = bfs_example_find(ex, "empty");
	ck_assert_int_eq(v->kind, BFS_KIND_NONE);
	ck_assert_uint_eq(v->count, 0);
	v = bfs_example_find(ex, "novalue");
	ck_assert_int_eq(v->kind, BFS_KIND_NONE);
	ck_assert_uint_eq(v->count, 0);
	ck_assert_ptr_null(bfs_example_find(ex, "absent"));
	ck_assert_ptr_null(bfs_example_find_list(ex, "empty"));
	bfs_example_free(ex);
}
END_TEST

START_TEST(empty_lists_have_a_kind_and_no_values)
{
	struct pb bl = { 0 }, il = { 0 }, fb = { 0 }, fi = { 0 }, feats = { 0 };
	struct bfs_example *ex;

	pb_sub(&fb, 1, &bl); /* bytes_list {} */
	pb_sub(&fi, 3, &il); /* int64_list {} */
	pb_add(&feats, "b", &fb);
	pb_add(&feats, "i", &fi);
	struct pb m = pb_example(&feats, NULL);
	ex = decode_ok(&m);
	ck_assert_int_eq(bfs_example_find(ex, "b")->kind, BFS_KIND_BYTES);
	ck_assert_uint_eq(bfs_example_find(ex, "b")->count, 0);
	ck_assert_int_eq(bfs_example_find(ex, "i")->kind, BFS_KIND_INT64);
	ck_assert_uint_eq(bfs_example_find(ex, "i")->count, 0);
	bfs_example_free(ex);
}
END_TEST

START_TEST(last_kind_set_in_a_feature_wins)
{
	const int64_t i = 9;
	const float f = 0.5f;
	struct pb fi = pb_int_feature(&i, 1, true), ff = pb_float_feature(&f, 1, true);
	struct pb both = { 0 }, feats = { 0 };
	struct bfs_example *ex;

	pb_raw(&both, fi.d, fi.n);
	pb_raw(&both, ff.d, ff.n);
	pb_add(&feats, "x", &both);
	struct pb m = pb_example(&feats, NULL);
	ex = decode_ok(&m);
	ck_assert_int_eq(bfs_example_find(ex, "x")->kind, BFS_KIND_FLOAT);
	ck_assert(bfs_example_find(ex, "x")->f[0] == 0.5f);
	bfs_example_free(ex);
}
END_TEST

START_TEST(two_features_fields_merge)
{
	const int64_t one = 1;
	struct pb f = pb_int_feature(&one, 1, true), a = { 0 }, b = { 0 }, m = { 0 };
	struct bfs_example *ex;

	pb_add(&a, "a", &f);
	pb_add(&b, "b", &f);
	pb_sub(&m, 1, &a);
	pb_sub(&m, 1, &b);
	ex = decode_ok(&m);
	ck_assert_uint_eq(ex->nfeatures, 2);
	ck_assert_ptr_nonnull(bfs_example_find(ex, "a"));
	ck_assert_ptr_nonnull(bfs_example_find(ex, "b"));
	bfs_example_free(ex);
}
END_TEST

START_TEST(odd_bytes_in_names_are_kept)
{
	struct pb empty = { 0 }, feats = { 0 };
	struct bfs_example *ex;

	pb_add(&feats, "\xff\xfe not utf-8", &empty);
	pb_add(&feats, "", &empty);
	struct pb m = pb_example(&feats, NULL);
	ex = decode_ok(&m);
	ck_assert_uint_eq(ex->nfeatures, 2);
	ck_assert_str_eq(ex->features[0].name, "");
	ck_assert_str_eq(ex->features[1].name, "\xff\xfe not utf-8");
	bfs_example_free(ex);
}
END_TEST

/* ---- SequenceExample ----------------------------------------------------------------- */

START_TEST(sequence_example_has_context_and_lists)
{
	const int64_t ctx_i = 7, s0[] = { 1, 2 }, s1[] = { 3, 4 };
	const char *w0[] = { "Hello", "World" };
	struct pb ci = pb_int_feature(&ctx_i, 1, true), feats = { 0 }, lists = { 0 };
	struct pb li = { 0 }, ls = { 0 }, empty_bytes = { 0 }, bl = { 0 };
	struct pb st0 = pb_int_feature(s0, 2, true), st1 = pb_int_feature(s1, 2, false);
	struct pb sw = pb_bytes_feature(w0, 2);
	struct bfs_example *ex;
	const struct bfs_feature_list *l;

	pb_add(&feats, "int_feature", &ci);
	pb_sub(&li, 1, &st0);
	pb_sub(&li, 1, &st1);
	pb_sub(&empty_bytes, 1, &bl);
	pb_sub(&ls, 1, &sw);
	pb_sub(&ls, 1, &empty_bytes);
	pb_add(&lists, "string_feature", &ls);
	pb_add(&lists, "int_feature", &li);
	struct pb m = pb_example(&feats, &lists);
	ex = decode_ok(&m);
	ck_assert(ex->is_sequence);
	ck_assert_uint_eq(ex->nfeatures, 1);
	ck_assert_uint_eq(ex->nlists, 2);
	ck_assert_int_eq(bfs_example_find(ex, "int_feature")->i[0], 7);
	/* the same name as context feature and as feature list */
	l = bfs_example_find_list(ex, "int_feature");
	ck_assert_ptr_nonnull(l);
	ck_assert_str_eq(ex->lists[0].name, "int_feature");
	ck_assert_uint_eq(l->nsteps, 2);
	ck_assert_int_eq(l->steps[0].i[1], 2);
	ck_assert_int_eq(l->steps[1].i[0], 3);
	l = bfs_example_find_list(ex, "string_feature");
	ck_assert_uint_eq(l->nsteps, 2);
	ck_assert_int_eq(l->steps[0].kind, BFS_KIND_BYTES);
	ck_assert_uint_eq(l->steps[0].count, 2);
	ck_assert_mem_eq(l->steps[0].b[1].data, "World", 5);
	ck_assert_int_eq(l->steps[1].kind, BFS_KIND_BYTES);
	ck_assert_uint_eq(l->steps[1].count, 0);
	bfs_example_free(ex);
}
END_TEST

START_TEST(is_sequence_follows_field_2)
{
	struct pb feats = { 0 }, lists = { 0 }, empty = { 0 };
	struct bfs_example *ex;

	pb_add(&feats, "a", &empty);
	struct pb plain = pb_example(&feats, NULL);
	ex = decode_ok(&plain);
	ck_assert(!ex->is_sequence);
	ck_assert_uint_eq(ex->nlists, 0);
	bfs_example_free(ex);

	struct pb seq = pb_example(&feats, &lists); /* empty FeatureLists */
	ex = decode_ok(&seq);
	ck_assert(ex->is_sequence);
	ck_assert_uint_eq(ex->nlists, 0);
	bfs_example_free(ex);

	struct pb nothing = { 0 };
	ex = decode_ok(&nothing);
	ck_assert(!ex->is_sequence);
	ck_assert_uint_eq(ex->nfeatures, 0);
	bfs_example_free(ex);
	ck_assert_int_eq(bfs_example_decode(&ex, NULL, 0), 0);
	ck_assert_uint_eq(ex->nfeatures, 0);
	bfs_example_free(ex);
	bfs_example_free(NULL);
}
END_TEST

/* ---- ownership ----------------------------------------------------------------------- */

START_TEST(decode_keeps_no_pointer_into_the_input)
{
	const char *words[] = { "alpha", "beta" };
	const float fl[] = { 1, 2, 3 };
	const int64_t in[] = { 4, 5 };
	struct pb fb = pb_bytes_feature(words, 2), ff = pb_float_feature(fl, 3, true);
	struct pb fi = pb_int_feature(in, 2, true), feats = { 0 };
	struct bfs_example *ex;
	const struct bfs_values *v;
	uint8_t *copy;

	pb_add(&feats, "w", &fb);
	pb_add(&feats, "f", &ff);
	pb_add(&feats, "i", &fi);
	struct pb m = pb_example(&feats, NULL);
	copy = malloc(m.n);
	memcpy(copy, m.d, m.n);
	ck_assert_int_eq(bfs_example_decode(&ex, copy, m.n), 0);
	memset(copy, 0xa5, m.n);
	free(copy); /* ASan would catch any later read of it */
	v = bfs_example_find(ex, "w");
	ck_assert_mem_eq(v->b[0].data, "alpha", 5);
	ck_assert_mem_eq(v->b[1].data, "beta", 4);
	ck_assert(bfs_example_find(ex, "f")->f[2] == 3.0f);
	ck_assert_int_eq(bfs_example_find(ex, "i")->i[1], 5);
	ck_assert_str_eq(ex->features[0].name, "f");
	bfs_example_free(ex);
}
END_TEST

/* ---- malformed input ------------------------------------------------------------------- */

struct bad_case {
	const char *what;
	const uint8_t *data;
	size_t len;
	const char *msg; /* expected substring of bfs_err_msg() */
};

#define B(...) (const uint8_t[]){ __VA_ARGS__ }, sizeof((const uint8_t[]){ __VA_ARGS__ })

static const struct bad_case bad_cases[] = {
	{ "plain text", B('h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd'), "wire type" },
	{ "truncated tag varint", B(0x80), "truncated varint at byte 0" },
	{ "truncated length varint", B(0x0a, 0x80, 0x80), "truncated varint at byte 1" },
	{ "varint over 10 bytes",
	  B(0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
	  "varint longer than 10 bytes at byte 1" },
	{ "length overruns the message", B(0x0a, 0x05, 0x0a, 0x00),
	  "field 1 length 5 at byte 0 overruns its Example of 4 bytes" },
	{ "unknown length overruns", B(0x1a, 0x7f, 0x00), "field 3 length 127 at byte 0 overruns" },
	{ "unknown fixed64 truncated", B(0x19, 0x00, 0x00), "field 3 length 8 at byte 0 overruns" },
	{ "wire type 7", B(0x0f, 0x00), "invalid wire type 7 at byte 0" },
	{ "wire type 6 nested", B(0x0a, 0x02, 0x0e, 0x00), "invalid wire type 6 at byte 2" },
	{ "group", B(0x1b, 0x1c), "unsupported group wire type 3 at byte 0" },
	{ "field number 0", B(0x02, 0x00), "invalid field number 0 at byte 0" },
	{ "Features as a varint", B(0x08, 0x01),
	  "field 1 of Example has wire type 0 at byte 0, expected 2" },
	{ "key as fixed32", B(0x0a, 0x07, 0x0a, 0x05, 0x0d, 0, 0, 0, 0),
	  "field 1 of Features map entry has wire type 5 at byte 4" },
	{ "float list as varint",
	  B(0x0a, 0x09, 0x0a, 0x07, 0x0a, 0x01, 'x', 0x12, 0x02, 0x10, 0x01),
	  "field 2 of Feature of 'x' has wire type 0 at byte 9, expected 2" },
	{ "float as varint",
	  B(0x0a, 0x0b, 0x0a, 0x09, 0x0a, 0x01, 'x', 0x12, 0x04, 0x12, 0x02, 0x08, 0x01),
	  "field 1 of FloatList of 'x' has wire type 0 at byte 11, expected 2 or 5" },
	{ "int64 as fixed32",
	  B(0x0a, 0x0e, 0x0a, 0x0c, 0x0a, 0x01, 'x', 0x12, 0x07, 0x1a, 0x05, 0x0d, 0, 0, 0, 0),
	  "field 1 of Int64List of 'x' has wire type 5 at byte 11, expected 0 or 2" },
	{ "packed floats not a multiple of 4",
	  B(0x0a, 0x0e, 0x0a, 0x0c, 0x0a, 0x01, 'x', 0x12, 0x07, 0x12, 0x05, 0x0a, 0x03, 0, 0, 0),
	  "feature 'x': packed floats of 3 bytes at byte 11 (not a multiple of 4)" },
	{ "packed int64 truncated",
	  B(0x0a, 0x0c, 0x0a, 0x0a, 0x0a, 0x01, 'x', 0x12, 0x05, 0x1a, 0x03, 0x0a, 0x01, 0x80),
	  "feature 'x': packed int64: truncated varint at byte 13" },
	{ "unpacked float truncated",
	  B(0x0a, 0x0c, 0x0a, 0x0a, 0x0a, 0x01, 'x', 0x12, 0x05, 0x12, 0x03, 0x0d, 0, 0),
	  "truncated float at byte 12 (feature 'x')" },
	{ "NUL in a name", B(0x0a, 0x05, 0x0a, 0x03, 0x0a, 0x01, 0x00),
	  "feature name '?' at byte 4 contains a NUL byte" },
	{ "the same list twice in a Feature",
	  B(0x0a, 0x0d, 0x0a, 0x0b, 0x0a, 0x01, 'x', 0x12, 0x06, 0x1a, 0x02, 0x08, 0x01, 0x1a,
	    0x00),
	  "feature 'x': Int64List appears twice in one Feature" },
	{ "a map entry with two values",
	  B(0x0a, 0x0d, 0x0a, 0x0b, 0x0a, 0x01, 'x', 0x12, 0x02, 0x1a, 0x00, 0x12, 0x02, 0x1a,
	    0x00),
	  "feature 'x': value appears twice in one map entry (at byte 11)" },
	{ "bad FeatureList step",
	  B(0x12, 0x09, 0x0a, 0x07, 0x0a, 0x01, 's', 0x12, 0x02, 0x0a, 0x05),
	  "field 1 length 5 at byte 9 overruns its FeatureList of 2 bytes" },
};

START_TEST(malformed_input_is_rejected_with_a_reason)
{
	const struct bad_case *c = &bad_cases[_i];
	struct bfs_example *ex = (struct bfs_example *)0x1;
	int err;

	bfs_err_format("%s", ""); /* no message yet */
	err = bfs_example_decode(&ex, c->data, c->len);
	ck_assert_msg(err == -EBADMSG, "%s: got %d", c->what, err);
	ck_assert_ptr_eq(ex, (struct bfs_example *)0x1);
	ck_assert_msg(strstr(bfs_err_msg(), "not a tf.train.Example or SequenceExample"),
		      "%s: message '%s'", c->what, bfs_err_msg());
	ck_assert_msg(strstr(bfs_err_msg(), c->msg), "%s: message '%s' lacks '%s'", c->what,
		      bfs_err_msg(), c->msg);
}
END_TEST

START_TEST(every_truncation_of_a_record_is_handled)
{
	const char *words[] = { "alpha" };
	const float fl[] = { 1, 2 };
	const int64_t in[] = { 300, -1 };
	struct pb fb = pb_bytes_feature(words, 1), ff = pb_float_feature(fl, 2, false);
	struct pb fi = pb_int_feature(in, 2, true), feats = { 0 }, fl1 = { 0 }, lists = { 0 };
	int failed = 0;

	pb_add(&feats, "w", &fb);
	pb_add(&feats, "f", &ff);
	pb_sub(&fl1, 1, &fi);
	pb_add(&lists, "s", &fl1);
	struct pb m = pb_example(&feats, &lists);
	for (size_t n = 0; n <= m.n; n++) {
		struct bfs_example *ex = NULL;
		uint8_t *copy = malloc(n ? n : 1);
		memcpy(copy, m.d, n);
		int err = bfs_example_decode(&ex, copy, n);
		free(copy);
		ck_assert_msg(err == 0 || err == -EBADMSG, "prefix %zu: %d", n, err);
		if (err)
			failed++;
		bfs_example_free(ex);
	}
	/* Every prefix that ends inside a top-level field fails. */
	ck_assert_int_ge(failed, (int)m.n - 3);
}
END_TEST

/* ---- text form ------------------------------------------------------------------------- */

START_TEST(text_form_prints_one_feature_per_line)
{
	const int64_t in[] = { 7 };
	const float fl[] = { 0.1f, 2, 3 };
	const char *words[] = { "a\"b\\c\n\x01", "x" };
	char big[200];
	const char *bigv[] = { big };
	struct pb fi = pb_int_feature(in, 1, true), ff = pb_float_feature(fl, 3, true);
	struct pb fb = pb_bytes_feature(words, 2), fbig, empty = { 0 }, feats = { 0 };
	struct bfs_example *ex;
	char *text;

	memset(big, 'z', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	fbig = pb_bytes_feature(bigv, 1);
	pb_add(&feats, "label", &fi);
	pb_add(&feats, "f", &ff);
	pb_add(&feats, "w", &fb);
	pb_add(&feats, "image/encoded", &fbig);
	pb_add(&feats, "none", &empty);
	struct pb m = pb_example(&feats, NULL);
	ex = decode_ok(&m);
	ck_assert_int_eq(bfs_example_to_text(&text, ex, 2), 0);
	ck_assert_str_eq(text, "features {\n"
			       "  f: float [0.100000001, 2, ... (1 more)]\n"
			       "  image/encoded: bytes [1 value, 199 bytes]\n"
			       "  label: int64 [7]\n"
			       "  none: none\n"
			       "  w: bytes [\"a\\\"b\\\\c\\n\\x01\", \"x\"]\n"
			       "}\n");
	free(text);
	ck_assert_int_eq(bfs_example_to_text(&text, ex, 0), 0);
	ck_assert_ptr_nonnull(strstr(text, "  label: int64 [... (1 more)]\n"));
	free(text);
	bfs_example_free(ex);
}
END_TEST

START_TEST(text_form_of_a_sequence_example_lists_steps)
{
	const int64_t s0[] = { 1, 2 }, s1[] = { 3 };
	struct pb st0 = pb_int_feature(s0, 2, true), st1 = pb_int_feature(s1, 1, true);
	struct pb fl = { 0 }, lists = { 0 };
	struct bfs_example *ex;
	char *text;

	pb_sub(&fl, 1, &st0);
	pb_sub(&fl, 1, &st1);
	pb_sub(&fl, 1, &st1);
	pb_add(&lists, "s", &fl);
	struct pb m = pb_example(NULL, &lists);
	ex = decode_ok(&m);
	ck_assert_int_eq(bfs_example_to_text(&text, ex, 2), 0);
	ck_assert_str_eq(text, "context {\n"
			       "}\n"
			       "feature_lists {\n"
			       "  s: 3 steps\n"
			       "    [0] int64 [1, 2]\n"
			       "    [1] int64 [3]\n"
			       "    ... (1 more)\n"
			       "}\n");
	free(text);
	bfs_example_free(ex);
}
END_TEST

/* ---- bound decoding (the batch builder's) ------------------------------------------ */

/* Every shape bound decoding fills during its walk (one float unpacked, a
 * packed float run, one int64 packed and unpacked, one bytes value, empty
 * lists) and every shape it leaves to its second pass (several int64, two
 * chunks, several bytes, a Feature with an unknown field, duplicates, lists
 * of steps), each read exactly as the reference reads it. */
START_TEST(bound_decoding_reads_every_shape_as_the_reference)
{
	static const float one_f = 2.5f, fs[] = { 1.5f, -2.25f, 0.0f };
	static const int64_t one_i = -5, is[] = { 0, 300, INT64_MIN };
	static const char *const one_b[] = { "abc" }, *const bs[] = { "", "xy", "z" };
	struct pb feats = { 0 }, lists = { 0 }, empty = { 0 }, el = { 0 }, fe = { 0 };
	struct pb f, st = { 0 };
	const char *bad;

	for (int packed = 0; packed < 2; packed++) {
		char name[16];
		snprintf(name, sizeof(name), "f1-%d", packed);
		f = pb_float_feature(&one_f, 1, packed);
		pb_add(&feats, name, &f);
		snprintf(name, sizeof(name), "fs-%d", packed);
		f = pb_float_feature(fs, 3, packed);
		pb_add(&feats, name, &f);
		snprintf(name, sizeof(name), "i1-%d", packed);
		f = pb_int_feature(&one_i, 1, packed);
		pb_add(&feats, name, &f);
		snprintf(name, sizeof(name), "is-%d", packed);
		f = pb_int_feature(is, 3, packed);
		pb_add(&feats, name, &f);
	}
	f = pb_bytes_feature(one_b, 1);
	pb_add(&feats, "b1", &f);
	f = pb_bytes_feature(bs, 3);
	pb_add(&feats, "bs", &f);
	pb_add(&feats, "empty", &empty);
	pb_sub(&fe, 2, &el); /* float_list {} */
	pb_add(&feats, "empty-list", &fe);
	f = pb_int_feature(&one_i, 1, true);
	pb_add(&feats, "dup", &f);
	f = pb_int_feature(is, 2, false);
	pb_add(&feats, "dup", &f); /* the last one wins */
	f = pb_float_feature(fs, 2, true);
	pb_unknowns(&f);
	pb_add(&feats, "unknown-inside", &f);
	f = pb_int_feature(is, 3, true);
	pb_sub(&st, 1, &f);
	f = pb_float_feature(&one_f, 1, false);
	pb_sub(&st, 1, &f);
	pb_sub(&st, 1, &empty);
	pb_add(&lists, "steps", &st);
	struct pb m = pb_example(&feats, &lists);
	bad = bind_diff(m.d, m.n);
	ck_assert_msg(bad == NULL, "bind: %s", bad);
}
END_TEST

/* The bound decoder guesses each key from the key at the same position in
 * the previous record: records whose keys come in another order, a key
 * that is a prefix of a name, a duplicate where a name was guessed, and an
 * unknown key holding a NUL (the fast decoder's -EAGAIN) must read as if
 * nothing was guessed. */
static size_t guess_record(uint8_t *buf, const char *const *keys, const int *vals, size_t n)
{
	uint8_t *p = buf;

	for (size_t i = 0; i < n; i++) {
		/* 0a LEN { 0a KLEN key 12 05 int64_list { vals[i] } }; a key
		 * "b" is written as the two bytes b, NUL */
		size_t klen = strcmp(keys[i], "b") == 0 ? 2 : strlen(keys[i]);
		*p++ = 0x0a;
		*p++ = (uint8_t)(2 + klen + 2 + 5);
		*p++ = 0x0a;
		*p++ = (uint8_t)klen;
		memcpy(p, keys[i], klen);
		p += klen;
		p = memcpy(p, (const uint8_t[]){ 0x12, 0x05, 0x1a, 0x03, 0x0a, 0x01 }, 6);
		p += 6;
		*p++ = (uint8_t)vals[i];
	}
	/* wrap as Example { features (1) { ... } } */
	size_t body = (size_t)(p - buf);
	memmove(buf + 3, buf, body);
	buf[0] = 0x0a;
	buf[1] = (uint8_t)(0x80 | (body & 0x7f));
	buf[2] = (uint8_t)(body >> 7);
	return body + 3;
}

START_TEST(bound_decoding_guesses_keys_and_checks_every_guess)
{
	static const char *const names[] = { "alpha", "bb", "a_long_feature_name_x" };
	static const char *const order1[] = { "alpha", "bb", "a_long_feature_name_x" };
	static const char *const order2[] = { "a_long_feature_name_x", "alpha", "bb" };
	static const char *const order3[] = { "alph", "bb", "a_long_feature_name_y", "alpha",
					      "alpha" };
	static const char *const order4[] = { "alpha", "b", "bb" }; /* "b": b NUL */
	struct bfs_keymap *km;
	struct bfs_bind *b;
	uint8_t buf[512];
	size_t len;

	ck_assert_int_eq(bfs_keymap_new(&km, names, 3), 0);
	ck_assert_int_eq(bfs_bind_new(&b, km, 3, NULL, 0), 0);
	len = guess_record(buf, order1, (const int[]){ 1, 2, 3 }, 3);
	ck_assert_int_eq(bfs_example_bind(b, buf, len), 0);
	ck_assert_int_eq(bfs_bind_values(b, 0)->i[0], 1);
	ck_assert_int_eq(bfs_bind_values(b, 2)->i[0], 3);
	len = guess_record(buf, order2, (const int[]){ 4, 5, 6 }, 3);
	ck_assert_int_eq(bfs_example_bind(b, buf, len), 0);
	ck_assert_int_eq(bfs_bind_values(b, 2)->i[0], 4);
	ck_assert_int_eq(bfs_bind_values(b, 0)->i[0], 5);
	ck_assert_int_eq(bfs_bind_values(b, 1)->i[0], 6);
	/* a prefix of a guessed name, a name differing in its last byte, then
	 * the name twice: the last one wins */
	len = guess_record(buf, order3, (const int[]){ 7, 8, 9, 10, 11 }, 5);
	ck_assert_int_eq(bfs_example_bind(b, buf, len), 0);
	ck_assert_int_eq(bfs_bind_values(b, 0)->i[0], 11);
	ck_assert_int_eq(bfs_bind_values(b, 1)->i[0], 8);
	ck_assert_int_eq(bfs_bind_values(b, 2)->kind, BFS_KIND_NONE);
	/* "b\0" where "bb" was guessed: not a name, holds a NUL */
	len = guess_record(buf, order4, (const int[]){ 1, 2, 3 }, 3);
	ck_assert_int_eq(bfs_example_bind(b, buf, len), -EAGAIN);
	ck_assert_int_eq(bfs_bind_values(b, 0)->kind, BFS_KIND_NONE);
	bfs_bind_free(b);
	bfs_keymap_free(km);
}
END_TEST

/* Columns (bfs_bind_column): a value of the column's shape goes to its
 * row; the last duplicate still wins, whether the column takes it or not. */
START_TEST(bound_decoding_writes_columns_and_the_last_duplicate_wins)
{
	static const char *const names[] = { "alpha", "bb" };
	static const char *const dup[] = { "alpha", "bb", "alpha" };
	/* alpha [1, 2]: two values, which a one-int64 column cannot take */
	static const uint8_t two[] = {
		0x0a, 0x0f, 0x0a, 0x05, 0x61, 0x6c, 0x70, 0x68, 0x61, /* "alpha" */
		0x12, 0x06, 0x1a, 0x04, 0x0a, 0x02, 0x01, 0x02,
	};
	struct bfs_keymap *km;
	struct bfs_bind *b;
	int64_t col_a[3] = { -1, -1, -1 }, col_b[3] = { -1, -1, -1 }, v;
	uint8_t buf[512], rec[512];
	size_t len, body;

	ck_assert_int_eq(bfs_keymap_new(&km, names, 2), 0);
	ck_assert_int_eq(bfs_bind_new(&b, km, 2, NULL, 0), 0);
	bfs_bind_column(b, 0, BFS_KIND_INT64, 1, (uint8_t *)col_a);
	bfs_bind_column(b, 1, BFS_KIND_INT64, 1, (uint8_t *)col_b);
	bfs_bind_row(b, 1);
	len = guess_record(buf, dup, (const int[]){ 5, 6, 7 }, 3);
	ck_assert_int_eq(bfs_example_bind(b, buf, len), 0);
	ck_assert(bfs_bind_written(b, 0) && bfs_bind_written(b, 1));
	ck_assert_uint_eq(bfs_bind_nwritten(b), 2); /* alpha twice counts once */
	ck_assert_int_eq(col_a[1], 7);
	ck_assert_int_eq(col_b[1], 6);
	ck_assert_int_eq(col_a[0], -1);
	ck_assert_int_eq(col_a[2], -1);
	memcpy(&v, bfs_bind_values(b, 0)->i, 8);
	ck_assert_int_eq(v, 7);

	/* alpha = 5 (taken by the column), then alpha = [1, 2] (not): the
	 * column no longer counts, and the values read [1, 2] */
	len = guess_record(buf, dup, (const int[]){ 5, 6, 7 }, 2);
	body = len - 3;
	memcpy(rec + 3, buf + 3, body);
	memcpy(rec + 3 + body, two, sizeof(two));
	body += sizeof(two);
	rec[0] = 0x0a;
	rec[1] = (uint8_t)(0x80 | (body & 0x7f));
	rec[2] = (uint8_t)(body >> 7);
	bfs_bind_row(b, 2);
	ck_assert_int_eq(bfs_example_bind(b, rec, body + 3), 0);
	ck_assert(!bfs_bind_written(b, 0));
	ck_assert(bfs_bind_written(b, 1));
	ck_assert_uint_eq(bfs_bind_nwritten(b), 1);
	ck_assert_uint_eq(bfs_bind_values(b, 0)->count, 2);
	ck_assert_int_eq(bfs_bind_values(b, 0)->i[1], 2);
	ck_assert_int_eq(col_b[2], 6);
	bfs_bind_free(b);
	bfs_keymap_free(km);
}
END_TEST

/* One Features entry in the writers' form, at p: key = one packed list
 * (list: 0x12 floats, 0x1a int64) of the pl bytes at payload:
 *   0a Le { 0a Lk key 12 Lf { list Ll { 0a Lp payload } } }
 * ll_extra is added to Ll (0: the lengths agree). The byte after it. */
static uint8_t *packed_entry(uint8_t *p, const char *key, uint8_t list, const uint8_t *payload,
			     size_t pl, int ll_extra)
{
	size_t klen = strlen(key);

	*p++ = 0x0a;
	*p++ = (uint8_t)(2 + klen + 2 + 2 + 2 + pl);
	*p++ = 0x0a;
	*p++ = (uint8_t)klen;
	memcpy(p, key, klen);
	p += klen;
	*p++ = 0x12;
	*p++ = (uint8_t)(4 + pl);
	*p++ = list;
	*p++ = (uint8_t)(2 + pl + ll_extra);
	*p++ = 0x0a;
	*p++ = (uint8_t)pl;
	memcpy(p, payload, pl);
	return p + pl;
}

/* The Example whose Features map's entries were written from buf + 3 up to
 * end: its two-byte map length put in front. Its length. */
static size_t features_record(uint8_t *buf, const uint8_t *end)
{
	size_t body = (size_t)(end - buf) - 3;

	buf[0] = 0x0a;
	buf[1] = (uint8_t)(0x80 | (body & 0x7f));
	buf[2] = (uint8_t)(body >> 7);
	return body + 3;
}

/* An Example of float features: keys[i] holding n[i] floats from vals. */
static size_t float_record(uint8_t *buf, const char *const *keys, const size_t *n,
			   const float *vals, size_t count)
{
	uint8_t *p = buf + 3;

	for (size_t i = 0; i < count; i++) {
		p = packed_entry(p, keys[i], 0x12, (const uint8_t *)vals, 4 * n[i], 0);
		vals += n[i];
	}
	return features_record(buf, p);
}

/* A record whose entries are the last record's but for their values takes
 * them through the entry templates; any other entry, the full walk. */
START_TEST(bound_decoding_templates_take_new_values_and_miss_on_other_bytes)
{
	static const char *const names[] = { "fa", "fb" };
	static const char *const ab[] = { "fa", "fb" }, *const ba[] = { "fb", "fa" };
	static const size_t one[] = { 1, 1 }, two_one[] = { 2, 1 };
	struct bfs_keymap *km;
	struct bfs_bind *b;
	float ca[4] = { 0 }, cb[4] = { 0 };
	uint8_t buf[256];
	size_t len;

	ck_assert_int_eq(bfs_keymap_new(&km, names, 2), 0);
	ck_assert_int_eq(bfs_bind_new(&b, km, 2, NULL, 0), 0);
	bfs_bind_column(b, 0, BFS_KIND_FLOAT, 1, (uint8_t *)ca);
	bfs_bind_column(b, 1, BFS_KIND_FLOAT, 1, (uint8_t *)cb);
	for (unsigned r = 0; r < 2; r++) { /* the second record meets the templates */
		len = float_record(buf, ab, one, (const float[]){ 1.5f + 2 * r, 2.5f + 2 * r }, 2);
		bfs_bind_row(b, r);
		ck_assert_int_eq(bfs_example_bind(b, buf, len), 0);
		ck_assert_uint_eq(bfs_bind_nwritten(b), 2);
		ck_assert(ca[r] == 1.5f + 2 * r && cb[r] == 2.5f + 2 * r);
	}
	/* the keys swapped: each entry's bytes differ from its template */
	len = float_record(buf, ba, one, (const float[]){ 5.5f, 6.5f }, 2);
	bfs_bind_row(b, 2);
	ck_assert_int_eq(bfs_example_bind(b, buf, len), 0);
	ck_assert(cb[2] == 5.5f && ca[2] == 6.5f);
	/* two floats where the column takes one: a longer entry, no column */
	len = float_record(buf, ab, two_one, (const float[]){ 7.0f, 8.0f, 9.0f }, 2);
	bfs_bind_row(b, 3);
	ck_assert_int_eq(bfs_example_bind(b, buf, len), 0);
	ck_assert(!bfs_bind_written(b, 0) && bfs_bind_written(b, 1));
	ck_assert_uint_eq(bfs_bind_values(b, 0)->count, 2);
	ck_assert(cb[3] == 9.0f);
	bfs_bind_free(b);
	bfs_keymap_free(km);
}
END_TEST

/* A new bind starts with no templates, even where the allocator hands it a
 * freed bind's memory (the TSan stress test caught a bind reading its
 * predecessor's: an entry "matched" a template of name -1). */
START_TEST(a_new_bind_inherits_no_templates)
{
	static const char *const names[] = { "fa", "fb" };
	static const char *const ab[] = { "fa", "fb" };
	static const size_t one[] = { 1, 1 };
	struct bfs_keymap *km;
	uint8_t buf[256];
	size_t len;

	ck_assert_int_eq(bfs_keymap_new(&km, names, 2), 0);
	for (unsigned round = 0; round < 4; round++) {
		struct bfs_bind *b;
		float ca[2] = { 0 }, cb[2] = { 0 }, fa;

		ck_assert_int_eq(bfs_bind_new(&b, km, 2, NULL, 0), 0);
		/* the first round's columns; later rounds bind fb alone as one */
		if (round == 0)
			bfs_bind_column(b, 0, BFS_KIND_FLOAT, 1, (uint8_t *)ca);
		bfs_bind_column(b, 1, BFS_KIND_FLOAT, 1, (uint8_t *)cb);
		for (unsigned r = 0; r < 2; r++) {
			len = float_record(buf, ab, one, (const float[]){ 1.0f + r, 2.0f + round },
					   2);
			bfs_bind_row(b, r);
			ck_assert_int_eq(bfs_example_bind(b, buf, len), 0);
			ck_assert(cb[r] == 2.0f + round);
			ck_assert_uint_eq(bfs_bind_nwritten(b), round == 0 ? 2 : 1);
			memcpy(&fa, bfs_bind_values(b, 0)->f, 4); /* into the record: unaligned */
			ck_assert(fa == 1.0f + r);
		}
		bfs_bind_free(b);
	}
	bfs_keymap_free(km);
}
END_TEST

/* An Example of int64 features in the writers' form (packed_entry),
 * keys[i] = vals[i]. bad_ll: add 1 to the first entry's Ll, which then
 * disagrees with the lengths around it. */
static size_t int_record(uint8_t *buf, const char *const *keys, const int64_t *vals, size_t count,
			 bool bad_ll)
{
	uint8_t *p = buf + 3;

	for (size_t i = 0; i < count; i++) {
		size_t lp = 0;
		uint8_t v[10];
		uint64_t x = (uint64_t)vals[i];

		do {
			v[lp++] = (uint8_t)((x & 0x7f) | (x > 0x7f ? 0x80 : 0));
			x >>= 7;
		} while (x);
		p = packed_entry(p, keys[i], 0x1a, v, lp, bad_ll && i == 0);
	}
	return features_record(buf, p);
}

/* An int64 entry's template stands for every size of its varint: the
 * values of records in turn, whose varints take 1 to 10 bytes, land in the
 * columns (the first entry's varint read with one load, the last one's,
 * near the record's end, byte by byte); an entry whose lengths disagree,
 * or whose varint does not fill its bytes, is the full walk's to judge. */
START_TEST(bound_decoding_int64_templates_follow_the_varint_size)
{
	static const char *const names[] = { "ia", "ib" };
	static const int64_t vals[] = {
		0,
		1,
		127,
		128,
		300,
		-1,
		16384,
		(int64_t)1 << 21,
		(int64_t)1 << 28,
		INT64_MIN,
		(int64_t)1 << 35,
		(int64_t)1 << 42,
		(int64_t)1 << 49,
		(int64_t)1 << 56,
		INT64_MAX,
		-50,
		999,
		(int64_t)1 << 62,
		5,
	};
	enum { N = sizeof(vals) / sizeof(vals[0]) };
	struct bfs_keymap *km;
	struct bfs_example *ex;
	struct bfs_bind *b;
	int64_t ca[N + 2], cb[N + 2];
	uint8_t buf[256];
	size_t len;

	ck_assert_int_eq(bfs_keymap_new(&km, names, 2), 0);
	ck_assert_int_eq(bfs_bind_new(&b, km, 2, NULL, 0), 0);
	bfs_bind_column(b, 0, BFS_KIND_INT64, 1, (uint8_t *)ca);
	bfs_bind_column(b, 1, BFS_KIND_INT64, 1, (uint8_t *)cb);
	for (size_t r = 0; r < N; r++) {
		int64_t want_b = vals[(r * 7 + 3) % N];

		len = int_record(buf, names, (const int64_t[]){ vals[r], want_b }, 2, false);
		bfs_bind_row(b, r);
		ck_assert_int_eq(bfs_example_bind(b, buf, len), 0);
		ck_assert_uint_eq(bfs_bind_nwritten(b), 2);
		ck_assert_int_eq(ca[r], vals[r]);
		ck_assert_int_eq(cb[r], want_b);
		ck_assert_ptr_null(bind_diff(buf, len));
	}
	/* Ll one too long: both decoders reject the record */
	len = int_record(buf, names, (const int64_t[]){ 300, 7 }, 2, true);
	bfs_bind_row(b, N);
	ck_assert_int_lt(bfs_example_bind(b, buf, len), 0);
	ck_assert_int_lt(bfs_example_decode(&ex, buf, len), 0);
	/* a two-byte payload of two one-byte varints: two values, no column */
	len = int_record(buf, names, (const int64_t[]){ 300, 7 }, 2, false);
	buf[3 + 2 + 2 + 2 + 6] = 0x01; /* 300 = ac 02: now 01 02 */
	bfs_bind_row(b, N + 1);
	ck_assert_int_eq(bfs_example_bind(b, buf, len), 0);
	ck_assert(!bfs_bind_written(b, 0) && bfs_bind_written(b, 1));
	ck_assert_uint_eq(bfs_bind_values(b, 0)->count, 2);
	ck_assert_int_eq(bfs_bind_values(b, 0)->i[0], 1);
	ck_assert_int_eq(bfs_bind_values(b, 0)->i[1], 2);
	ck_assert_int_eq(cb[N + 1], 7);
	ck_assert_ptr_null(bind_diff(buf, len));
	bfs_bind_free(b);
	bfs_keymap_free(km);
}
END_TEST

static Suite *example_suite(void)
{
	Suite *s = suite_create("example");
	TCase *tc = tcase_create("decode");

	tcase_add_loop_test(tc, floats_decode_the_same_packed_or_unpacked, 0, 2);
	tcase_add_loop_test(tc, ints_decode_the_same_packed_or_unpacked, 0, 2);
	tcase_add_test(tc, packed_and_unpacked_runs_in_one_list_concatenate);
	tcase_add_test(tc, unknown_fields_are_skipped_at_every_level);
	tcase_add_test(tc, duplicate_keys_keep_the_last_and_sort_by_name);
	tcase_add_test(tc, wide_maps_in_key_order_keep_map_semantics);
	tcase_add_test(tc, duplicate_lists_keep_the_last);
	tcase_add_test(tc, empty_feature_and_entry_without_value_count_as_missing);
	tcase_add_test(tc, empty_lists_have_a_kind_and_no_values);
	tcase_add_test(tc, last_kind_set_in_a_feature_wins);
	tcase_add_test(tc, two_features_fields_merge);
	tcase_add_test(tc, odd_bytes_in_names_are_kept);
	tcase_add_test(tc, sequence_example_has_context_and_lists);
	tcase_add_test(tc, is_sequence_follows_field_2);
	tcase_add_test(tc, decode_keeps_no_pointer_into_the_input);
	suite_add_tcase(s, tc);

	tc = tcase_create("malformed");
	tcase_add_loop_test(tc, malformed_input_is_rejected_with_a_reason, 0,
			    (int)BFS_ARRAY_SIZE(bad_cases));
	tcase_add_test(tc, every_truncation_of_a_record_is_handled);
	suite_add_tcase(s, tc);

	tc = tcase_create("text");
	tcase_add_test(tc, text_form_prints_one_feature_per_line);
	tcase_add_test(tc, text_form_of_a_sequence_example_lists_steps);
	suite_add_tcase(s, tc);

	tcase_add_test(tc, bound_decoding_reads_every_shape_as_the_reference);
	tcase_add_test(tc, bound_decoding_guesses_keys_and_checks_every_guess);
	tcase_add_test(tc, bound_decoding_writes_columns_and_the_last_duplicate_wins);
	tcase_add_test(tc, bound_decoding_templates_take_new_values_and_miss_on_other_bytes);
	tcase_add_test(tc, a_new_bind_inherits_no_templates);
	tcase_add_test(tc, bound_decoding_int64_templates_follow_the_varint_size);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(example_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
