/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_schema.c — unit tests of decoder/schema/: inference from
 * hand-built records, JSON in and out (every from_json error), record
 * checks, ragged counts, selection and names. Inference over the shared
 * real TFRecord files is check_realdata.c's.
 *
 * Records are struct bfs_example values built directly (the struct is
 * public), so most of these tests do not depend on the protobuf decoder.
 * JSON is written with ' for " to keep it readable (see json()).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "decodertest.h"
#include "example.h"
#include "pbtest.h"
#include "schema.h"
#include "schema_json.h"
#include "schematest.h"

/* The tables below list only the fields a case needs. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

/* ---- hand-built records ------------------------------------------------------- */

#define MAXF 8
#define MAXV 16

/* One feature (or feature list) of a hand-built record. count < 0: Feature {}
 * (kind NONE). Bytes values are `len` bytes each (len2 for the second on). */
struct fdesc {
	const char *name;
	enum bfs_kind kind;
	int count;
	int len, len2;
	int steps; /* feature lists: number of steps, each like the above */
};

struct hrec {
	struct bfs_example ex;
	struct bfs_feature f[MAXF];
	struct bfs_feature_list l[MAXF];
	struct bfs_values steps[MAXF][MAXV];
	struct bfs_bytes b[MAXF][MAXV][MAXV];
};

static const float zf[64];
static const int64_t zi[64];
static const uint8_t zb[256];

static void values_fill(struct bfs_values *v, struct bfs_bytes *b, const struct fdesc *d)
{
	memset(v, 0, sizeof(*v));
	if (d->count < 0)
		return;
	v->kind = d->kind;
	v->count = (size_t)d->count;
	switch (d->kind) {
	case BFS_KIND_FLOAT:
		v->f = zf;
		break;
	case BFS_KIND_INT64:
		v->i = zi;
		break;
	case BFS_KIND_BYTES:
		for (int i = 0; i < d->count; i++) {
			b[i].data = zb;
			b[i].len = (size_t)(i ? d->len2 : d->len);
		}
		v->b = b;
		break;
	default:
		v->kind = BFS_KIND_NONE;
		v->count = 0;
	}
}

/* Build a record from features (sorted by name) and lists (sorted). */
static struct bfs_example *hrec_build(struct hrec *r, const struct fdesc *feats,
				      const struct fdesc *lists)
{
	memset(r, 0, sizeof(*r));
	for (size_t i = 0; feats && feats[i].name; i++) {
		r->f[i].name = feats[i].name;
		values_fill(&r->f[i].v, r->b[i][0], &feats[i]);
		r->ex.nfeatures++;
	}
	for (size_t i = 0; lists && lists[i].name; i++) {
		r->l[i].name = lists[i].name;
		r->l[i].nsteps = (size_t)lists[i].steps;
		r->l[i].steps = r->steps[i];
		for (int j = 0; j < lists[i].steps; j++)
			values_fill(&r->steps[i][j], r->b[i][j], &lists[i]);
		r->ex.nlists++;
		r->ex.is_sequence = true;
	}
	r->ex.features = r->f;
	r->ex.lists = r->l;
	return &r->ex;
}

/* JSON with ' for ": a malloc'd copy with the quotes swapped. */
static char *json(const char *s)
{
	char *c = strdup(s);

	for (char *p = c; *p; p++)
		if (*p == '\'')
			*p = '"';
	return c;
}

static struct bfs_schema *schema_ok(const char *text)
{
	struct bfs_schema *s = NULL;
	char *j = json(text);
	int err = bfs_schema_from_json(&s, j, strlen(j));

	ck_assert_msg(err == 0, "from_json(%s): %d %s", j, err, bfs_err_msg());
	free(j);
	return s;
}

/* ---- inference ---------------------------------------------------------------- */

#define NREC 4
#define F(...) ((struct fdesc){ __VA_ARGS__ })

struct infer_case {
	const char *what;
	struct fdesc
		recs[NREC]
		    [3]; /* up to 2 features per record, NULL-terminated; empty record: {{0}} */
	int nrec;
	/* expected spec of feature "x" */
	enum bfs_kind kind;
	enum bfs_layout layout;
	enum bfs_dtype dtype;
	int ndim;
	int64_t shape0;
	int64_t max_len;
};

#define I BFS_KIND_INT64
#define FL BFS_KIND_FLOAT
#define BY BFS_KIND_BYTES

/* The inference rules of docs/contract.md ("Schema", Inference), one case
 * each. */
static const struct infer_case infer_cases[] = {
	{ "fixed scalar",
	  { { { "x", I, 1 } }, { { "x", I, 1 } }, { { "x", I, 1 } } },
	  3,
	  I,
	  BFS_LAYOUT_FIXED,
	  BFS_DT_I64,
	  0,
	  0,
	  0 },
	{ "fixed vector",
	  { { { "x", FL, 3 } }, { { "x", FL, 3 } } },
	  2,
	  FL,
	  BFS_LAYOUT_FIXED,
	  BFS_DT_F32,
	  1,
	  3,
	  0 },
	{ "always empty list is fixed [0]",
	  { { { "x", I, 0 } }, { { "x", I, 0 } } },
	  2,
	  I,
	  BFS_LAYOUT_FIXED,
	  BFS_DT_I64,
	  1,
	  0,
	  0 },
	{ "counts that differ are padded to the largest",
	  { { { "x", I, 1 } }, { { "x", I, 4 } }, { { "x", I, 2 } } },
	  3,
	  I,
	  BFS_LAYOUT_PADDED,
	  BFS_DT_I64,
	  1,
	  -1,
	  4 },
	{ "missing in some records is padded",
	  { { { "x", FL, 2 } }, { { "y", I, 1 } }, { { "x", FL, 2 } } },
	  3,
	  FL,
	  BFS_LAYOUT_PADDED,
	  BFS_DT_F32,
	  1,
	  -1,
	  2 },
	{ "Feature {} in some records is padded",
	  { { { "x", I, 1 } }, { { "x", I, -1 } } },
	  2,
	  I,
	  BFS_LAYOUT_PADDED,
	  BFS_DT_I64,
	  1,
	  -1,
	  1 },
	{ "bytes of one length L are fixed uint8 [L]",
	  { { { "x", BY, 1, 5 } }, { { "x", BY, 1, 5 } } },
	  2,
	  BY,
	  BFS_LAYOUT_FIXED,
	  BFS_DT_U8,
	  1,
	  5,
	  0 },
	{ "bytes of varying length are padded",
	  { { { "x", BY, 1, 5 } }, { { "x", BY, 1, 7 } } },
	  2,
	  BY,
	  BFS_LAYOUT_PADDED,
	  BFS_DT_U8,
	  1,
	  -1,
	  7 },
	{ "bytes missing in some records are padded",
	  { { { "x", BY, 1, 5 } }, { { 0 } } },
	  2,
	  BY,
	  BFS_LAYOUT_PADDED,
	  BFS_DT_U8,
	  1,
	  -1,
	  5 },
	{ "bytes with no value in some records are padded",
	  { { { "x", BY, 1, 5 } }, { { "x", BY, 0 } } },
	  2,
	  BY,
	  BFS_LAYOUT_PADDED,
	  BFS_DT_U8,
	  1,
	  -1,
	  5 },
	{ "bytes with several values are ragged twice",
	  { { { "x", BY, 1, 5 } }, { { "x", BY, 3, 2, 9 } } },
	  2,
	  BY,
	  BFS_LAYOUT_RAGGED2,
	  BFS_DT_U8,
	  2,
	  -1,
	  0 },
	{ "empty bytes values are fixed [0]",
	  { { { "x", BY, 1, 0 } }, { { "x", BY, 1, 0 } } },
	  2,
	  BY,
	  BFS_LAYOUT_FIXED,
	  BFS_DT_U8,
	  1,
	  0,
	  0 },
	{ "a single record fixes the shape",
	  { { { "x", I, 5 } } },
	  1,
	  I,
	  BFS_LAYOUT_FIXED,
	  BFS_DT_I64,
	  1,
	  5,
	  0 },
};

START_TEST(inference_follows_the_contract_rules)
{
	const struct infer_case *c = &infer_cases[_i];
	struct bfs_infer *inf = NULL;
	struct bfs_schema *s = NULL;
	const struct bfs_feature_spec *f;
	struct hrec *r = malloc(sizeof(*r));

	ck_assert_int_eq(bfs_infer_new(&inf), 0);
	for (int i = 0; i < c->nrec; i++) {
		struct bfs_example *ex = hrec_build(r, c->recs[i], NULL);
		ck_assert_msg(bfs_infer_add(inf, ex) == 0, "%s: %s", c->what, bfs_err_msg());
	}
	ck_assert_int_eq(bfs_infer_finish(&s, inf), 0);
	f = spec_find(s, "x", false);
	ck_assert_msg(f != NULL, "%s: no spec", c->what);
	ck_assert_msg(f->kind == c->kind && f->layout == c->layout && f->dtype == c->dtype &&
			      f->ndim == c->ndim,
		      "%s: kind %d layout %d dtype %d ndim %d", c->what, f->kind, f->layout,
		      f->dtype, f->ndim);
	if (c->ndim)
		ck_assert_msg(f->shape[0] == c->shape0, "%s: shape[0] %lld", c->what,
			      (long long)f->shape[0]);
	if (c->ndim == 2)
		ck_assert_int_eq(f->shape[1], -1);
	if (c->layout == BFS_LAYOUT_PADDED)
		ck_assert_msg(f->max_len == c->max_len, "%s: max_len %lld", c->what,
			      (long long)f->max_len);
	ck_assert(!f->is_list);
	ck_assert(!f->has_default);
	assert_roundtrip(s);
	/* every record fits the schema inferred from them */
	for (int i = 0; i < c->nrec; i++) {
		struct bfs_example *ex = hrec_build(r, c->recs[i], NULL);
		ck_assert_msg(test_schema_check(s, ex) == 0, "%s: record %d: %s", c->what, i,
			      bfs_err_msg());
	}
	bfs_schema_free(s);
	bfs_infer_free(inf);
	free(r);
}
END_TEST

START_TEST(features_never_typed_are_left_out)
{
	const struct fdesc r0[] = { { "a", I, 1 }, { "never", I, -1 }, { 0 } };
	const struct fdesc r1[] = { { "a", I, 1 }, { "never", I, -1 }, { 0 } };
	struct hrec *r = malloc(sizeof(*r));
	struct bfs_infer *inf;
	struct bfs_schema *s;

	bfs_infer_new(&inf);
	ck_assert_int_eq(bfs_infer_add(inf, hrec_build(r, r0, NULL)), 0);
	ck_assert_int_eq(bfs_infer_add(inf, hrec_build(r, r1, NULL)), 0);
	ck_assert_int_eq(bfs_infer_finish(&s, inf), 0);
	ck_assert_uint_eq(s->nfeatures, 1);
	ck_assert_str_eq(s->features[0].name, "a");
	/* listed as untyped: present, of no known kind; kept through JSON */
	ck_assert_uint_eq(s->nuntyped, 1);
	ck_assert_str_eq(s->untyped[0], "never");
	assert_roundtrip(s);
	bfs_schema_free(s);
	bfs_infer_free(inf);
	free(r);
}
END_TEST

/* TFX writes a missing value as `Feature {}`: a feature with a value in one
 * record and `Feature {}` in the others is in every record, not missing
 * from most (no warning of several datasets mounted as one). */
START_TEST(empty_features_count_as_present)
{
	const struct fdesc typed[] = { { "a", I, 1 }, { "tract", FL, 1 }, { 0 } };
	const struct fdesc empty[] = { { "a", I, 1 }, { "tract", FL, -1 }, { 0 } };
	const struct fdesc absent[] = { { "a", I, 1 }, { 0 } };
	struct hrec *r = malloc(sizeof(*r));
	struct bfs_infer *inf;
	struct bfs_schema *s;
	char *mixed;

	bfs_infer_new(&inf);
	for (int i = 0; i < 50; i++) /* empty first: typed at record 20 */
		ck_assert_int_eq(bfs_infer_add(inf, hrec_build(r, i == 20 ? typed : empty, NULL)),
				 0);
	mixed = bfs_infer_mixed(inf);
	ck_assert_msg(mixed == NULL, "%s", mixed);
	ck_assert_int_eq(bfs_infer_finish(&s, inf), 0);
	ck_assert_uint_eq(s->nfeatures, 2);
	ck_assert_uint_eq(s->nuntyped, 0);
	ck_assert_str_eq(s->features[1].name, "tract");
	ck_assert(s->features[1].layout == BFS_LAYOUT_PADDED && s->features[1].max_len == 1);
	bfs_schema_free(s);
	bfs_infer_free(inf);
	/* the same feature absent (no key) from most records is still told */
	bfs_infer_new(&inf);
	for (int i = 0; i < 50; i++)
		ck_assert_int_eq(bfs_infer_add(inf, hrec_build(r, i == 20 ? typed : absent, NULL)),
				 0);
	mixed = bfs_infer_mixed(inf);
	ck_assert_ptr_nonnull(mixed);
	ck_assert_msg(strstr(mixed, "'tract' is missing from most records (it is in 1 of 50)"),
		      "%s", mixed);
	free(mixed);
	bfs_infer_free(inf);
	free(r);
}
END_TEST

START_TEST(no_records_infer_an_empty_schema)
{
	struct bfs_infer *inf;
	struct bfs_schema *s;
	char *text;

	bfs_infer_new(&inf);
	ck_assert_int_eq(bfs_infer_finish(&s, inf), 0);
	ck_assert_uint_eq(s->nfeatures + s->nlists, 0);
	ck_assert_int_eq(bfs_schema_to_json(&text, s, NULL), 0);
	ck_assert_str_eq(text, "{\n  \"features\": {}\n}\n");
	assert_roundtrip(s);
	free(text);
	bfs_schema_free(s);
	bfs_infer_free(inf);
	bfs_infer_free(NULL);
}
END_TEST

START_TEST(kind_conflict_is_an_error_that_changes_nothing)
{
	const struct fdesc good[] = { { "a", FL, 2 }, { "x", I, 1 }, { 0 } };
	const struct fdesc bad[] = { { "a", FL, 7 }, { "new", I, 1 }, { "x", BY, 1, 3 }, { 0 } };
	struct hrec *r = malloc(sizeof(*r));
	struct bfs_infer *inf;
	struct bfs_schema *s;

	bfs_infer_new(&inf);
	ck_assert_int_eq(bfs_infer_add(inf, hrec_build(r, good, NULL)), 0);
	ck_assert_int_eq(bfs_infer_add(inf, hrec_build(r, bad, NULL)), -EBADMSG);
	ck_assert_str_eq(bfs_err_msg(), "feature 'x': kind bytes, but earlier records have int64");
	ck_assert_int_eq(bfs_infer_add(inf, hrec_build(r, good, NULL)), 0);
	ck_assert_int_eq(bfs_infer_finish(&s, inf), 0);
	/* the failed record left no trace: both fixed, no "new" */
	ck_assert_uint_eq(s->nfeatures, 2);
	ck_assert_int_eq(spec_find(s, "a", false)->layout, BFS_LAYOUT_FIXED);
	ck_assert_int_eq(spec_find(s, "x", false)->layout, BFS_LAYOUT_FIXED);
	bfs_schema_free(s);
	bfs_infer_free(inf);
	free(r);
}
END_TEST

START_TEST(names_that_cannot_be_paths_fail_inference)
{
	const struct fdesc bad[] = { { "a//b", I, 1 }, { 0 } };
	const struct fdesc bad_list[] = { { "..", I, 1, 0, 0, 1 }, { 0 } };
	const struct fdesc untyped[] = { { "/x", I, -1 }, { 0 } };
	const struct fdesc latin1[] = { { "caf\xe9", FL, 1 }, { 0 } };
	struct hrec *r = malloc(sizeof(*r));
	struct bfs_infer *inf;

	bfs_infer_new(&inf);
	ck_assert_int_eq(bfs_infer_add(inf, hrec_build(r, bad, NULL)), -EBADMSG);
	ck_assert_str_eq(bfs_err_msg(), "feature cannot be a path: name 'a//b' contains '//'");
	ck_assert_int_eq(bfs_infer_add(inf, hrec_build(r, NULL, bad_list)), -EBADMSG);
	ck_assert_str_eq(bfs_err_msg(),
			 "feature list cannot be a path: name '..' has a '..' component");
	ck_assert_int_eq(bfs_infer_add(inf, hrec_build(r, latin1, NULL)), -EBADMSG);
	ck_assert_str_eq(bfs_err_msg(),
			 "feature cannot be a path: name 'caf\xe9' is not valid UTF-8");
	/* a name that never gets a kind never becomes a path */
	ck_assert_int_eq(bfs_infer_add(inf, hrec_build(r, untyped, NULL)), 0);
	bfs_infer_free(inf);
	free(r);
}
END_TEST

START_TEST(feature_lists_infer_their_step_shape)
{
	/* like tft-seqex-data: int lists of 2 steps x 2 values, bytes of 0..2
	 * values per step; plus scalar steps and one-value bytes steps */
	const struct fdesc l0[] = { { "b1", BY, 1, 4, 0, 2 },
				    { "i", I, 2, 0, 0, 2 },
				    { "s", BY, 2, 6, 3, 2 },
				    { "sc", FL, 1, 0, 0, 3 },
				    { 0 } };
	const struct fdesc l1[] = { { "b1", BY, 1, 5, 0, 1 },
				    { "i", I, 2, 0, 0, 1 },
				    { "s", BY, 0, 0, 0, 2 },
				    { "sc", FL, 1, 0, 0, 1 },
				    { 0 } };
	const struct fdesc ctx[] = { { "i", I, 1 }, { 0 } };
	struct hrec *r = malloc(sizeof(*r));
	struct bfs_infer *inf;
	struct bfs_schema *s;
	const struct bfs_feature_spec *f;

	bfs_infer_new(&inf);
	ck_assert_int_eq(bfs_infer_add(inf, hrec_build(r, ctx, l0)), 0);
	ck_assert_int_eq(bfs_infer_add(inf, hrec_build(r, ctx, l1)), 0);
	ck_assert_int_eq(bfs_infer_finish(&s, inf), 0);
	ck_assert_uint_eq(s->nfeatures, 1);
	ck_assert_uint_eq(s->nlists, 4);
	f = spec_find(s, "i", true);
	ck_assert(f->is_list && f->kind == I && f->dtype == BFS_DT_I64);
	ck_assert_int_eq(f->max_steps, 2);
	ck_assert_int_eq(f->ndim, 1);
	ck_assert_int_eq(f->shape[0], 2);
	f = spec_find(s, "s", true);
	ck_assert(f->kind == BY && f->dtype == BFS_DT_U8);
	ck_assert_int_eq(f->ndim, 2);
	ck_assert_int_eq(f->shape[0], 2);
	ck_assert_int_eq(f->shape[1], 6);
	f = spec_find(s, "b1", true);
	ck_assert_int_eq(f->ndim, 1);
	ck_assert_int_eq(f->shape[0], 5);
	f = spec_find(s, "sc", true);
	ck_assert_int_eq(f->ndim, 0);
	ck_assert_int_eq(f->max_steps, 3);
	ck_assert_int_eq(bfs_spec_elems(f), 1);
	ck_assert_int_eq(spec_find(s, "i", false)->layout, BFS_LAYOUT_FIXED);
	assert_roundtrip(s);
	ck_assert_int_eq(test_schema_check(s, hrec_build(r, ctx, l0)), 0);
	ck_assert_int_eq(test_schema_check(s, hrec_build(r, ctx, l1)), 0);
	bfs_schema_free(s);
	bfs_infer_free(inf);
	free(r);
}
END_TEST

START_TEST(feature_list_kind_conflicts_are_errors)
{
	const struct fdesc l0[] = { { "s", I, 1, 0, 0, 1 }, { 0 } };
	const struct fdesc l1[] = { { "s", FL, 1, 0, 0, 1 }, { 0 } };
	struct hrec *r = malloc(sizeof(*r));
	struct bfs_infer *inf;
	struct bfs_example *ex;

	bfs_infer_new(&inf);
	ck_assert_int_eq(bfs_infer_add(inf, hrec_build(r, NULL, l0)), 0);
	ck_assert_int_eq(bfs_infer_add(inf, hrec_build(r, NULL, l1)), -EBADMSG);
	ck_assert_str_eq(bfs_err_msg(),
			 "feature list 's': kind float, but earlier records have int64");
	/* steps of one list that disagree */
	ex = hrec_build(r, NULL, l0);
	r->steps[0][1] = r->steps[0][0];
	r->steps[0][1].kind = BFS_KIND_BYTES;
	r->l[0].nsteps = 2;
	ck_assert_int_eq(bfs_infer_add(inf, ex), -EBADMSG);
	ck_assert_str_eq(bfs_err_msg(),
			 "feature list 's': step 1 has kind bytes, earlier steps int64");
	bfs_infer_free(inf);
	free(r);
}
END_TEST

/* ---- JSON ------------------------------------------------------------------------ */

static const char full_schema[] =
	"{'features': {"
	" 'image/encoded': {'kind': 'bytes', 'dtype': 'uint8', 'shape': [224, 224, 3]},"
	" 'raw': {'kind': 'bytes', 'dtype': 'float32', 'shape': [2, 3]},"
	" 'label': {'kind': 'int64', 'shape': []},"
	" 'tokens': {'kind': 'int64', 'shape': [-1], 'max_len': 512, 'pad': -7},"
	" 'ftok': {'kind': 'float', 'shape': [-1], 'max_len': 3, 'pad': 0.25},"
	" 'words': {'kind': 'int64', 'shape': [-1], 'ragged': true},"
	" 'name': {'kind': 'bytes', 'shape': [-1], 'max_len': 40},"
	" 'tags': {'kind': 'bytes', 'shape': [-1, -1], 'ragged': true},"
	" 'weight': {'kind': 'float', 'shape': [], 'default': 1.0},"
	" 'count': {'kind': 'int64', 'shape': [2], 'default': -3, 'dtype': 'int64'}"
	"}, 'feature_lists': {"
	" 'frames': {'kind': 'float', 'shape': [3], 'max_steps': 20, 'pad': 1.5},"
	" 'ids': {'kind': 'int64', 'shape': [], 'max_steps': 4},"
	" 'words': {'kind': 'bytes', 'shape': [2, 8], 'max_steps': 5}"
	"}}";

START_TEST(json_roundtrip_keeps_every_field)
{
	struct bfs_schema *s = schema_ok(full_schema), *c = NULL;
	const struct bfs_feature_spec *f;

	ck_assert_uint_eq(s->nfeatures, 10);
	ck_assert_uint_eq(s->nlists, 3);
	for (size_t i = 1; i < s->nfeatures; i++)
		ck_assert(strcmp(s->features[i - 1].name, s->features[i].name) < 0);
	f = spec_find(s, "raw", false);
	ck_assert(f->layout == BFS_LAYOUT_FIXED && f->dtype == BFS_DT_F32 &&
		  bfs_spec_elems(f) == 6);
	f = spec_find(s, "tokens", false);
	ck_assert(f->layout == BFS_LAYOUT_PADDED && f->max_len == 512 && f->pad.i == -7);
	ck_assert_int_eq(bfs_spec_elems(f), 512);
	f = spec_find(s, "ftok", false);
	ck_assert(f->pad.f == 0.25);
	f = spec_find(s, "words", false);
	ck_assert(f->layout == BFS_LAYOUT_RAGGED && f->dtype == BFS_DT_I64);
	ck_assert_int_eq(bfs_spec_elems(f), 0);
	f = spec_find(s, "tags", false);
	ck_assert(f->layout == BFS_LAYOUT_RAGGED2);
	f = spec_find(s, "name", false);
	ck_assert(f->layout == BFS_LAYOUT_PADDED && f->kind == BFS_KIND_BYTES && f->max_len == 40);
	f = spec_find(s, "weight", false);
	ck_assert(f->has_default && f->dflt.f == 1.0 && f->ndim == 0);
	f = spec_find(s, "count", false);
	ck_assert(f->has_default && f->dflt.i == -3);
	f = spec_find(s, "frames", true);
	ck_assert(f->is_list && f->max_steps == 20 && f->pad.f == 1.5 && bfs_spec_elems(f) == 3);
	f = spec_find(s, "words", true);
	ck_assert(f->is_list && f->dtype == BFS_DT_U8 && bfs_spec_elems(f) == 16);
	assert_roundtrip(s);
	ck_assert_int_eq(bfs_schema_clone(&c, s), 0);
	schema_assert_eq(s, c);
	bfs_schema_free(s);
	assert_roundtrip(c); /* the clone owns its own memory */
	bfs_schema_free(c);
	bfs_schema_free(NULL);
}
END_TEST

START_TEST(to_json_is_indented_sorted_and_ends_in_a_newline)
{
	struct bfs_schema *s =
		schema_ok("{'features': {'b': {'kind': 'int64', 'shape': [-1], 'max_len': 2},"
			  " 'a': {'kind': 'float', 'shape': [2], 'default': 0.5}}}");
	char *text;

	ck_assert_int_eq(bfs_schema_to_json(&text, s, NULL), 0);
	ck_assert_str_eq(text, "{\n"
			       "  \"features\": {\n"
			       "    \"a\": {\n"
			       "      \"default\": 0.5,\n"
			       "      \"dtype\": \"float32\",\n"
			       "      \"kind\": \"float\",\n"
			       "      \"shape\": [\n"
			       "        2\n"
			       "      ]\n"
			       "    },\n"
			       "    \"b\": {\n"
			       "      \"dtype\": \"int64\",\n"
			       "      \"kind\": \"int64\",\n"
			       "      \"max_len\": 2,\n"
			       "      \"pad\": 0,\n"
			       "      \"shape\": [\n"
			       "        -1\n"
			       "      ]\n"
			       "    }\n"
			       "  }\n"
			       "}\n");
	free(text);
	bfs_schema_free(s);
}
END_TEST

START_TEST(to_json_adds_the_mount_facts)
{
	struct bfs_schema *s = schema_ok("{'features': {'a': {'kind': 'int64', 'shape': []}}}"),
			  *back;
	const char *shards[] = { "/data/a.tfrecord", "/data/b.tfrecord.gz" };
	struct bfs_schema_facts facts = {
		.records = 1000,
		.batch_size = 32,
		.batches_per_epoch = 32,
		.seed = UINT64_MAX,
		.shuffle = "global",
		.rank = 1,
		.world = 4,
		.nshards = 2,
		.shards = shards,
	};
	char *text;

	ck_assert_int_eq(bfs_schema_to_json(&text, s, &facts), 0);
	ck_assert_ptr_nonnull(strstr(text, "\n  \"records\": 1000,\n"));
	ck_assert_ptr_nonnull(strstr(text, "\n  \"batch_size\": 32,\n"));
	ck_assert_ptr_nonnull(strstr(text, "\n  \"batches_per_epoch\": 32,\n"));
	ck_assert_ptr_nonnull(strstr(text, "\n  \"seed\": \"18446744073709551615\",\n"));
	ck_assert_ptr_nonnull(strstr(text, "\n  \"shuffle\": \"global\",\n"));
	ck_assert_ptr_nonnull(strstr(text, "\n  \"rank\": 1,\n"));
	ck_assert_ptr_nonnull(strstr(text, "\n  \"world\": 4\n"));
	ck_assert_ptr_nonnull(strstr(text, "\n  \"shards\": [\n    \"/data/a.tfrecord\",\n    "
					   "\"/data/b.tfrecord.gz\"\n  ],\n"));
	ck_assert_ptr_null(strstr(text, "feature_lists"));
	/* a mount's schema.json is a valid schema= file */
	ck_assert_int_eq(bfs_schema_from_json(&back, text, strlen(text)), 0);
	schema_assert_eq(s, back);
	bfs_schema_free(back);
	free(text);
	facts.shuffle = NULL;
	facts.shards = NULL;
	facts.seed = 5;
	ck_assert_int_eq(bfs_schema_to_json(&text, s, &facts), 0);
	ck_assert_ptr_null(strstr(text, "shuffle"));
	ck_assert_ptr_null(strstr(text, "shards"));
	ck_assert_ptr_nonnull(strstr(text, "\"seed\": 5,"));
	free(text);
	bfs_schema_free(s);
}
END_TEST

struct json_err_case {
	const char *json;
	const char *msg; /* expected substring */
};

#define FEAT(x) "{'features': {'x': " x "}}"
#define LIST(x) "{'feature_lists': {'s': " x "}}"

static const struct json_err_case json_err_cases[] = {
	{ "not json", "schema: JSON error at line 1" },
	{ "{'features': {}} trailing", "JSON error" },
	{ "{'features': {}, 'features': {}}", "duplicate object key" },
	{ "[]", "schema: the top level must be a JSON object" },
	{ "{'feature': {}}", "schema: unknown top-level field \"feature\"" },
	{ "{'features': []}", "schema: \"features\" must be a JSON object" },
	{ "{'feature_lists': 1}", "schema: \"feature_lists\" must be a JSON object" },
	{ FEAT("3"), "schema: feature 'x': must be a JSON object" },
	{ FEAT("{'shape': []}"), "schema: feature 'x': \"kind\" is missing" },
	{ FEAT("{'kind': 'string', 'shape': []}"),
	  "feature 'x': \"kind\" must be \"bytes\", \"float\" or \"int64\"" },
	{ FEAT("{'kind': 3, 'shape': []}"), "feature 'x': \"kind\" must be" },
	{ FEAT("{'kind': 'none', 'shape': []}"), "feature 'x': \"kind\" must be" },
	{ FEAT("{'kind': 'int64'}"), "feature 'x': \"shape\" is missing" },
	{ FEAT("{'kind': 'int64', 'shape': '3'}"),
	  "feature 'x': \"shape\" must be an array of integers" },
	{ FEAT("{'kind': 'int64', 'shape': [1.5]}"),
	  "feature 'x': \"shape\" must be an array of integers" },
	{ FEAT("{'kind': 'int64', 'shape': [1,1,1,1,1,1,1,1,1]}"),
	  "feature 'x': \"shape\" has 9 dimensions, at most 8 allowed" },
	{ FEAT("{'kind': 'int64', 'shape': [-2]}"),
	  "feature 'x': \"shape\" dimension 0 is -2 (negative" },
	{ FEAT("{'kind': 'int64', 'shape': [3, -1]}"),
	  "feature 'x': bad \"shape\" [3, -1]: -1 only as [-1]" },
	{ FEAT("{'kind': 'int64', 'shape': [-1, -1], 'max_len': 3}"),
	  "feature 'x': bad \"shape\" [-1, -1]: -1 only as" },
	{ FEAT("{'kind': 'int64', 'shape': [3000000000]}"),
	  "feature 'x': \"shape\" dimension 0 is 3000000000, over the cap" },
	{ FEAT("{'kind': 'int64', 'shape': [65536, 65536]}"),
	  "feature 'x': \"shape\" [65536, 65536] holds more than 2147483648 values" },
	{ FEAT("{'kind': 'bytes', 'shape': [1073741824], 'dtype': 'float64'}"),
	  "feature 'x': \"shape\" [1073741824] of float64 is 8589934592 bytes, over the cap" },
	{ FEAT("{'kind': 'bytes', 'shape': [-1, -1]}"),
	  "feature 'x': bad \"shape\" [-1, -1]: needs \"ragged\": true" },
	{ FEAT("{'kind': 'int64', 'shape': [-1]}"),
	  "feature 'x': \"max_len\" is missing (needed by shape [-1] unless \"ragged\": true)" },
	{ FEAT("{'kind': 'bytes', 'shape': [-1]}"), "feature 'x': \"max_len\" is missing" },
	{ FEAT("{'kind': 'int64', 'shape': [-1], 'max_len': -1}"),
	  "feature 'x': \"max_len\" must be an integer in 0..2147483648" },
	{ FEAT("{'kind': 'int64', 'shape': [-1], 'max_len': 4294967296}"),
	  "feature 'x': \"max_len\" must be an integer" },
	{ FEAT("{'kind': 'int64', 'shape': [-1], 'max_len': '3'}"),
	  "feature 'x': \"max_len\" must be an integer" },
	{ FEAT("{'kind': 'int64', 'shape': [3], 'max_len': 3}"),
	  "feature 'x': \"max_len\" only applies to shape [-1] without \"ragged\"" },
	{ FEAT("{'kind': 'int64', 'shape': [-1], 'ragged': true, 'max_len': 3}"),
	  "feature 'x': \"max_len\" only applies" },
	{ FEAT("{'kind': 'int64', 'shape': [2], 'ragged': true}"),
	  "feature 'x': bad \"shape\" [2]: a ragged int64 feature takes [-1]" },
	{ FEAT("{'kind': 'bytes', 'shape': [-1], 'ragged': true}"),
	  "feature 'x': bad \"shape\" [-1]: a ragged bytes feature takes [-1, -1]" },
	{ FEAT("{'kind': 'int64', 'shape': [-1], 'ragged': 'yes'}"),
	  "feature 'x': \"ragged\" must be true or false" },
	{ FEAT("{'kind': 'float', 'shape': [], 'dtype': 'int64'}"),
	  "feature 'x': \"dtype\" must be \"float32\" for this float feature" },
	{ FEAT("{'kind': 'int64', 'shape': [-1], 'ragged': true, 'dtype': 'int32'}"),
	  "feature 'x': \"dtype\" must be \"int64\"" },
	{ FEAT("{'kind': 'bytes', 'shape': [3], 'dtype': 'complex64'}"),
	  "feature 'x': unknown \"dtype\" \"complex64\"" },
	{ FEAT("{'kind': 'bytes', 'shape': [3], 'dtype': 7}"),
	  "feature 'x': \"dtype\" must be a string" },
	{ FEAT("{'kind': 'bytes', 'shape': [-1], 'max_len': 3, 'dtype': 'float32'}"),
	  "feature 'x': \"dtype\" must be \"uint8\" for this bytes feature" },
	{ FEAT("{'kind': 'int64', 'shape': [], 'pad': 0}"),
	  "feature 'x': \"pad\" only applies to padded numeric features" },
	{ FEAT("{'kind': 'bytes', 'shape': [-1], 'max_len': 3, 'pad': 0}"),
	  "feature 'x': \"pad\" only applies" },
	{ FEAT("{'kind': 'int64', 'shape': [-1], 'max_len': 3, 'pad': 1.5}"),
	  "feature 'x': \"pad\" must be an integer for kind int64" },
	{ FEAT("{'kind': 'float', 'shape': [-1], 'max_len': 3, 'pad': '0'}"),
	  "feature 'x': \"pad\" must be a number" },
	{ FEAT("{'kind': 'float', 'shape': [-1], 'max_len': 3, 'pad': 1e39}"),
	  "feature 'x': \"pad\" 1e+39 is out of float32 range" },
	{ FEAT("{'kind': 'float', 'shape': [], 'default': -1e300}"),
	  "feature 'x': \"default\" -1e+300 is out of float32 range" },
	{ FEAT("{'kind': 'int64', 'shape': [-1], 'max_len': 3, 'default': 0}"),
	  "feature 'x': \"default\" only applies to fixed-shape numeric features" },
	{ FEAT("{'kind': 'bytes', 'shape': [3], 'default': 0}"),
	  "feature 'x': \"default\" only applies" },
	{ FEAT("{'kind': 'int64', 'shape': [], 'default': 'zero'}"),
	  "feature 'x': \"default\" must be an integer for kind int64" },
	{ FEAT("{'kind': 'int64', 'shape': [], 'maxlen': 3}"),
	  "feature 'x': unknown field \"maxlen\"" },
	{ FEAT("{'kind': 'int64', 'shape': [], 'max_steps': 3}"),
	  "feature 'x': \"max_steps\" only applies under \"feature_lists\"" },
	{ "{'features': {'a//b': {'kind': 'int64', 'shape': []}}}",
	  "schema: feature 'a//b': cannot be a path: name 'a//b' contains '//'" },
	{ "{'features': {'': {'kind': 'int64', 'shape': []}}}",
	  "schema: feature '': cannot be a path: name '' is empty" },
	{ "{'features': {'a/../b': {'kind': 'int64', 'shape': []}}}",
	  "cannot be a path: name 'a/../b' has a '..' component" },
	{ "{'features': {'/a': {'kind': 'int64', 'shape': []}}}", "name '/a' starts with '/'" },
	{ "{'features': {'a/': {'kind': 'int64', 'shape': []}}}", "name 'a/' ends with '/'" },
	{ "{'features': {'./a': {'kind': 'int64', 'shape': []}}}",
	  "name './a' has a '.' component" },
	{ LIST("{'kind': 'int64', 'shape': [2]}"),
	  "schema: feature list 's': \"max_steps\" is missing" },
	{ LIST("{'kind': 'int64', 'shape': [2], 'max_steps': -1}"),
	  "feature list 's': \"max_steps\" must be an integer in 0.." },
	{ LIST("{'kind': 'int64', 'shape': [-1], 'max_steps': 3}"),
	  "feature list 's': bad \"shape\" [-1]: the step shape of a feature list is fixed" },
	{ LIST("{'kind': 'int64', 'shape': [-1], 'max_steps': 3, 'ragged': true}"),
	  "feature list 's': \"ragged\" does not apply to a feature list" },
	{ LIST("{'kind': 'bytes', 'shape': [], 'max_steps': 3}"),
	  "feature list 's': bad \"shape\" []: a bytes feature list takes [max_bytes] or "
	  "[max_values, max_bytes]" },
	{ LIST("{'kind': 'bytes', 'shape': [3], 'max_steps': 3, 'dtype': 'int8'}"),
	  "feature list 's': \"dtype\" must be \"uint8\" for this bytes feature list" },
	{ LIST("{'kind': 'int64', 'shape': [2], 'max_steps': 3, 'max_len': 2}"),
	  "feature list 's': \"max_len\" only applies" },
	{ LIST("{'kind': 'int64', 'shape': [2], 'max_steps': 3, 'default': 2}"),
	  "feature list 's': \"default\" only applies" },
	{ LIST("{'kind': 'bytes', 'shape': [2], 'max_steps': 3, 'pad': 2}"),
	  "feature list 's': \"pad\" only applies" },
	{ LIST("{'kind': 'int64', 'shape': [65536], 'max_steps': 65536}"),
	  "feature list 's': \"max_steps\" 65536 of shape [65536] hold more than" },
	{ "{'feature_lists': {'a/./b': {'kind': 'int64', 'shape': [], 'max_steps': 1}}}",
	  "schema: feature list 'a/./b': cannot be a path" },
};

START_TEST(from_json_errors_name_the_feature_and_field)
{
	const struct json_err_case *c = &json_err_cases[_i];
	struct bfs_schema *s = (struct bfs_schema *)0x1;
	char *j = json(c->json);
	int err;

	bfs_err_format("%s", ""); /* no message yet */
	err = bfs_schema_from_json(&s, j, strlen(j));
	ck_assert_msg(err == -EINVAL, "%s: got %d", j, err);
	ck_assert_ptr_eq(s, (struct bfs_schema *)0x1);
	ck_assert_msg(strncmp(bfs_err_msg(), "schema: ", 8) == 0, "%s: '%s'", j, bfs_err_msg());
	ck_assert_msg(strstr(bfs_err_msg(), c->msg), "%s:\n  got  '%s'\n  want '%s'", j,
		      bfs_err_msg(), c->msg);
	free(j);
}
END_TEST

START_TEST(from_json_takes_only_len_bytes)
{
	const char text[] = "{\"features\": {}}garbage";
	struct bfs_schema *s;

	ck_assert_int_eq(bfs_schema_from_json(&s, text, 16), 0);
	bfs_schema_free(s);
	ck_assert_int_eq(bfs_schema_from_json(&s, text, sizeof(text) - 1), -EINVAL);
}
END_TEST

/* ---- check ---------------------------------------------------------------------------- */

struct check_case {
	const char *what;
	const char *schema;
	struct fdesc feats[3];
	struct fdesc lists[2];
	const char *msg; /* NULL: the record fits */
};

static const struct check_case check_cases[] = {
	{ "fits", FEAT("{'kind': 'int64', 'shape': [2]}"), { { "x", I, 2 } }, { { 0 } }, NULL },
	{ "wrong kind",
	  FEAT("{'kind': 'int64', 'shape': []}"),
	  { { "x", FL, 1 } },
	  { { 0 } },
	  "feature 'x': kind float, schema says int64" },
	{ "count does not fit",
	  FEAT("{'kind': 'int64', 'shape': [2]}"),
	  { { "x", I, 3 } },
	  { { 0 } },
	  "feature 'x': 3 values, schema shape [2] needs 2" },
	{ "scalar with none",
	  FEAT("{'kind': 'float', 'shape': []}"),
	  { { "x", FL, 0 } },
	  { { 0 } },
	  "feature 'x': 0 values, schema shape [] needs 1" },
	{ "over max_len",
	  FEAT("{'kind': 'int64', 'shape': [-1], 'max_len': 2}"),
	  { { "x", I, 3 } },
	  { { 0 } },
	  "feature 'x': 3 values, over max_len 2" },
	{ "up to max_len",
	  FEAT("{'kind': 'int64', 'shape': [-1], 'max_len': 2}"),
	  { { "x", I, 2 } },
	  { { 0 } },
	  NULL },
	{ "missing without default",
	  FEAT("{'kind': 'int64', 'shape': [2]}"),
	  { { "y", I, 2 } },
	  { { 0 } },
	  "feature 'x': missing, and the schema gives no default" },
	{ "Feature {} without default",
	  FEAT("{'kind': 'int64', 'shape': [2]}"),
	  { { "x", I, -1 } },
	  { { 0 } },
	  "feature 'x': missing, and the schema gives no default" },
	{ "missing with default",
	  FEAT("{'kind': 'float', 'shape': [2], 'default': 1}"),
	  { { 0 } },
	  { { 0 } },
	  NULL },
	{ "missing padded",
	  FEAT("{'kind': 'float', 'shape': [-1], 'max_len': 3}"),
	  { { 0 } },
	  { { 0 } },
	  NULL },
	{ "missing ragged",
	  FEAT("{'kind': 'float', 'shape': [-1], 'ragged': true}"),
	  { { "x", FL, -1 } },
	  { { 0 } },
	  NULL },
	{ "missing fixed bytes",
	  FEAT("{'kind': 'bytes', 'shape': [5]}"),
	  { { 0 } },
	  { { 0 } },
	  "feature 'x': missing, and the schema gives no default" },
	{ "fixed bytes of the wrong length",
	  FEAT("{'kind': 'bytes', 'shape': [5]}"),
	  { { "x", BY, 1, 4 } },
	  { { 0 } },
	  "feature 'x': value of 4 bytes, schema shape [5] of uint8 needs 5" },
	{ "fixed bytes as float32",
	  FEAT("{'kind': 'bytes', 'shape': [2], 'dtype': 'float32'}"),
	  { { "x", BY, 1, 8 } },
	  { { 0 } },
	  NULL },
	{ "fixed bytes with two values",
	  FEAT("{'kind': 'bytes', 'shape': [5]}"),
	  { { "x", BY, 2, 5, 5 } },
	  { { 0 } },
	  "feature 'x': 2 values, a fixed-shape bytes feature takes exactly 1" },
	{ "padded bytes with two values",
	  FEAT("{'kind': 'bytes', 'shape': [-1], 'max_len': 8}"),
	  { { "x", BY, 2, 1, 1 } },
	  { { 0 } },
	  "feature 'x': 2 values, a padded bytes feature takes at most 1" },
	{ "padded bytes too long",
	  FEAT("{'kind': 'bytes', 'shape': [-1], 'max_len': 8}"),
	  { { "x", BY, 1, 9 } },
	  { { 0 } },
	  "feature 'x': value of 9 bytes, over max_len 8" },
	{ "padded bytes with no value",
	  FEAT("{'kind': 'bytes', 'shape': [-1], 'max_len': 8}"),
	  { { "x", BY, 0 } },
	  { { 0 } },
	  NULL },
	{ "ragged bytes of any count",
	  FEAT("{'kind': 'bytes', 'shape': [-1, -1], 'ragged': true}"),
	  { { "x", BY, 5, 100, 200 } },
	  { { 0 } },
	  NULL },
	{ "ragged of the wrong kind",
	  FEAT("{'kind': 'int64', 'shape': [-1], 'ragged': true}"),
	  { { "x", BY, 1, 1 } },
	  { { 0 } },
	  "feature 'x': kind bytes, schema says int64" },
	{ "features not in the schema are ignored",
	  FEAT("{'kind': 'int64', 'shape': []}"),
	  { { "a", BY, 3, 1, 1 }, { "x", I, 1 } },
	  { { 0 } },
	  NULL },
	{ "list fits",
	  LIST("{'kind': 'int64', 'shape': [2], 'max_steps': 2}"),
	  { { 0 } },
	  { { "s", I, 2, 0, 0, 2 } },
	  NULL },
	{ "list missing",
	  LIST("{'kind': 'int64', 'shape': [2], 'max_steps': 2}"),
	  { { 0 } },
	  { { 0 } },
	  NULL },
	{ "list with too many steps",
	  LIST("{'kind': 'int64', 'shape': [2], 'max_steps': 2}"),
	  { { 0 } },
	  { { "s", I, 1, 0, 0, 3 } },
	  "feature list 's': 3 steps, over max_steps 2" },
	{ "list step with too many values",
	  LIST("{'kind': 'int64', 'shape': [2], 'max_steps': 2}"),
	  { { 0 } },
	  { { "s", I, 3, 0, 0, 2 } },
	  "feature list 's': step 0: 3 values, step shape [2] takes at most 2" },
	{ "list step of the wrong kind",
	  LIST("{'kind': 'int64', 'shape': [2], 'max_steps': 2}"),
	  { { 0 } },
	  { { "s", FL, 1, 0, 0, 1 } },
	  "feature list 's': step 0: kind float, schema says int64" },
	{ "bytes list value too long",
	  LIST("{'kind': 'bytes', 'shape': [5], 'max_steps': 2}"),
	  { { 0 } },
	  { { "s", BY, 1, 7, 0, 1 } },
	  "feature list 's': step 0: value of 7 bytes, step shape [5] takes at most 5" },
	{ "bytes list of one value per step",
	  LIST("{'kind': 'bytes', 'shape': [5], 'max_steps': 2}"),
	  { { 0 } },
	  { { "s", BY, 2, 1, 1, 1 } },
	  "feature list 's': step 0: 2 values, step shape [5] takes at most 1" },
	{ "bytes list of values per step",
	  LIST("{'kind': 'bytes', 'shape': [2, 5], 'max_steps': 2}"),
	  { { 0 } },
	  { { "s", BY, 2, 5, 3, 2 } },
	  NULL },
	{ "bytes list of too many values",
	  LIST("{'kind': 'bytes', 'shape': [2, 5], 'max_steps': 2}"),
	  { { 0 } },
	  { { "s", BY, 3, 5, 3, 2 } },
	  "feature list 's': step 0: 3 values, step shape [2, 5] takes at most 2" },
	{ "list step Feature {}",
	  LIST("{'kind': 'int64', 'shape': [], 'max_steps': 2}"),
	  { { 0 } },
	  { { "s", I, -1, 0, 0, 2 } },
	  NULL },
};

START_TEST(check_names_the_feature_and_what_is_wrong)
{
	const struct check_case *c = &check_cases[_i];
	struct bfs_schema *s = schema_ok(c->schema);
	struct hrec *r = malloc(sizeof(*r));
	int err;

	bfs_err_format("%s", ""); /* no message yet */
	err = test_schema_check(s, hrec_build(r, c->feats, c->lists));
	if (!c->msg) {
		ck_assert_msg(err == 0, "%s: %s", c->what, bfs_err_msg());
	} else {
		ck_assert_msg(err == -EBADMSG, "%s: got %d", c->what, err);
		ck_assert_msg(strcmp(bfs_err_msg(), c->msg) == 0, "%s:\n  got  '%s'\n  want '%s'",
			      c->what, bfs_err_msg(), c->msg);
	}
	bfs_schema_free(s);
	free(r);
}
END_TEST

START_TEST(ragged_counts_are_values_and_bytes)
{
	struct bfs_schema *s =
		schema_ok("{'features': {'r': {'kind': 'int64', 'shape': [-1], 'ragged': true},"
			  " 't': {'kind': 'bytes', 'shape': [-1, -1], 'ragged': true}}}");
	const struct fdesc rec[] = { { "r", I, 3 }, { "t", BY, 3, 2, 5 }, { 0 } };
	const struct fdesc wrong[] = { { "r", FL, 3 }, { "t", BY, -1 }, { 0 } };
	struct hrec *r = malloc(sizeof(*r));
	uint64_t nv = 99, nb = 99;

	bfs_spec_ragged_counts(spec_find(s, "r", false), hrec_build(r, rec, NULL), &nv, &nb);
	ck_assert_uint_eq(nv, 3);
	ck_assert_uint_eq(nb, 0);
	bfs_spec_ragged_counts(spec_find(s, "t", false), hrec_build(r, rec, NULL), &nv, &nb);
	ck_assert_uint_eq(nv, 3);
	ck_assert_uint_eq(nb, 12);
	bfs_spec_ragged_counts(spec_find(s, "r", false), hrec_build(r, wrong, NULL), &nv, &nb);
	ck_assert_uint_eq(nv + nb, 0);
	nv = nb = 99;
	bfs_spec_ragged_counts(spec_find(s, "t", false), hrec_build(r, wrong, NULL), &nv, &nb);
	ck_assert_uint_eq(nv + nb, 0);
	nv = nb = 99;
	bfs_spec_ragged_counts(spec_find(s, "t", false), hrec_build(r, NULL, NULL), &nv, &nb);
	ck_assert_uint_eq(nv + nb, 0);
	bfs_schema_free(s);
	free(r);
}
END_TEST

/* ---- select ------------------------------------------------------------------------------ */

static const char select_schema[] =
	"{'features': {'a': {'kind': 'int64', 'shape': []}, 'b/c': {'kind': 'int64', 'shape': []},"
	" 'd': {'kind': 'int64', 'shape': []}},"
	" 'feature_lists': {'a': {'kind': 'int64', 'shape': [], 'max_steps': 1},"
	" 's': {'kind': 'int64', 'shape': [], 'max_steps': 1}}}";

START_TEST(select_keeps_the_named_features)
{
	struct bfs_schema *s = schema_ok(select_schema);

	ck_assert_int_eq(bfs_schema_select(s, "d,feature_lists/s,b/c,d"), 0);
	ck_assert_uint_eq(s->nfeatures, 2);
	ck_assert_str_eq(s->features[0].name, "b/c");
	ck_assert_str_eq(s->features[1].name, "d");
	ck_assert_uint_eq(s->nlists, 1);
	ck_assert_str_eq(s->lists[0].name, "s");
	bfs_schema_free(s);

	s = schema_ok(select_schema);
	ck_assert_int_eq(bfs_schema_select(s, "a"), 0);
	ck_assert_uint_eq(s->nfeatures, 1);
	ck_assert_uint_eq(s->nlists, 0);
	bfs_schema_free(s);
}
END_TEST

static const struct {
	const char *csv;
	int err;
	const char *msg;
} select_errors[] = {
	{ "a,nope", -ENOENT, "features=: no feature 'nope' in the schema" },
	{ "feature_lists/d", -ENOENT, "features=: no feature 'feature_lists/d' in the schema" },
	{ "b", -ENOENT, "no feature 'b' in" },
	{ "a,,d", -EINVAL, "features=: empty name in 'a,,d'" },
	{ "a,", -EINVAL, "empty name" },
	{ "", -EINVAL, "features=: empty list of features" },
};

START_TEST(select_of_an_unknown_name_changes_nothing)
{
	struct bfs_schema *s = schema_ok(select_schema), *orig = schema_ok(select_schema);

	ck_assert_int_eq(bfs_schema_select(s, select_errors[_i].csv), select_errors[_i].err);
	ck_assert_msg(strstr(bfs_err_msg(), select_errors[_i].msg), "'%s'", bfs_err_msg());
	schema_assert_eq(s, orig);
	bfs_schema_free(s);
	bfs_schema_free(orig);
}
END_TEST

/* ---- names --------------------------------------------------------------------------------- */

static const struct {
	const char *name;
	bool ok;
} names[] = {
	{ "label", true },
	{ "image/encoded", true },
	{ "a/b/c", true },
	{ "...", true },
	{ ".hidden", true },
	{ "a..b", true },
	{ "a/.b/c", true },
	{ "x y\t", true },
	{ "\xc3\xa9t\xc3\xa9/\xe2\x96\x81w/\xf0\x9f\x98\x80", true },
	{ "\xff", false },
	{ "\xc3", false },
	{ "\xc0\xaf", false },
	{ "\xed\xa0\x80", false },
	{ "\xf4\x90\x80\x80", false },
	{ "a\xe2\x96", false },
	{ "", false },
	{ "/a", false },
	{ "a/", false },
	{ "/", false },
	{ "a//b", false },
	{ ".", false },
	{ "..", false },
	{ "a/.", false },
	{ "./a", false },
	{ "a/../b", false },
	{ "a/./b", false },
	{ "../", false },
};

START_TEST(names_must_be_usable_as_paths)
{
	int err = bfs_schema_name_ok(names[_i].name);

	if (names[_i].ok)
		ck_assert_msg(err == 0, "'%s': %s", names[_i].name, bfs_err_msg());
	else
		ck_assert_msg(err == -EINVAL, "'%s' accepted", names[_i].name);
}
END_TEST

/* A JSON object's members (schema_json.h, what `batchfs stats` reads):
 * in the order written, numbers with their values, the rest as JSON text
 * to pass on; spaces and NUL bytes after it; one line for what is not. */
START_TEST(json_members_in_order_with_their_text)
{
	static const char text[] =
		"{\"z\": 3, \"a\": 0.250000, \"on\": true, \"off\": null,\n"
		"  \"s\": \"a \\\"b\\\"\", \"o\": {\"x\": [1, {\"y\": \"]\"}]}}\n  \0\0";
	static const struct {
		const char *key, *text;
		double num;
		bool isnum;
	} want[] = {
		{ "z", "3", 3, true },
		{ "a", "0.25", 0.25, true },
		{ "on", "true", 1, true },
		{ "off", "null", 0, false },
		{ "s", "\"a \\\"b\\\"\"", 0, false },
		{ "o", "{\"x\": [1, {\"y\": \"]\"}]}", 0, false },
	};
	struct bfs_json_member *m = NULL;
	size_t n = 0;

	ck_assert_msg(bfs_json_members(&m, &n, text, sizeof(text) - 1) == 0, "%s", bfs_err_msg());
	ck_assert_uint_eq(n, BFS_ARRAY_SIZE(want));
	for (size_t i = 0; i < n; i++) {
		ck_assert_str_eq(m[i].key, want[i].key);
		ck_assert_str_eq(m[i].text, want[i].text);
		ck_assert(m[i].isnum == want[i].isnum);
		if (want[i].isnum)
			ck_assert(m[i].num == want[i].num);
	}
	bfs_json_members_free(m, n);
	ck_assert_int_eq(bfs_json_members(&m, &n, "{}", 2), 0);
	ck_assert_uint_eq(n, 0);
	bfs_json_members_free(m, n);
	bfs_json_members_free(NULL, 0);
}
END_TEST

static const struct {
	const char *text, *msg;
} member_errors[] = {
	{ "[1, 2]", "not a JSON object (byte 0)" },
	{ "  7", "not a JSON object (byte 2)" },
	{ "", "not a JSON object (byte 0)" },
	{ "{\"reads\": 50r0}", "not a flat JSON object: " },
	{ "{\"reads\": 1,}", "not a flat JSON object: " },
	{ "{\"reads\" 1}", "not a flat JSON object: " },
	{ "{\"reads\": 1} x", "not a flat JSON object: unexpected text at byte 13" },
	{ "{\"reads\": 1", "not a flat JSON object: " },
};

START_TEST(json_members_of_what_is_no_object_fail_in_one_line)
{
	struct bfs_json_member *m = NULL;
	size_t n = 0;
	const char *t = member_errors[_i].text;

	ck_assert_int_eq(bfs_json_members(&m, &n, t, strlen(t)), -EBADMSG);
	ck_assert_ptr_null(m);
	ck_assert_msg(
		strncmp(bfs_err_msg(), member_errors[_i].msg, strlen(member_errors[_i].msg)) == 0,
		"'%s': %s", t, bfs_err_msg());
	ck_assert_ptr_null(strchr(bfs_err_msg(), '\n'));
}
END_TEST

static Suite *schema_suite(void)
{
	Suite *s = suite_create("schema");
	TCase *tc = tcase_create("infer");

	tcase_add_loop_test(tc, inference_follows_the_contract_rules, 0,
			    (int)BFS_ARRAY_SIZE(infer_cases));
	tcase_add_test(tc, features_never_typed_are_left_out);
	tcase_add_test(tc, empty_features_count_as_present);
	tcase_add_test(tc, no_records_infer_an_empty_schema);
	tcase_add_test(tc, kind_conflict_is_an_error_that_changes_nothing);
	tcase_add_test(tc, names_that_cannot_be_paths_fail_inference);
	tcase_add_test(tc, feature_lists_infer_their_step_shape);
	tcase_add_test(tc, feature_list_kind_conflicts_are_errors);
	suite_add_tcase(s, tc);

	tc = tcase_create("json");
	tcase_add_test(tc, json_roundtrip_keeps_every_field);
	tcase_add_test(tc, to_json_is_indented_sorted_and_ends_in_a_newline);
	tcase_add_test(tc, to_json_adds_the_mount_facts);
	tcase_add_loop_test(tc, from_json_errors_name_the_feature_and_field, 0,
			    (int)BFS_ARRAY_SIZE(json_err_cases));
	tcase_add_test(tc, from_json_takes_only_len_bytes);
	tcase_add_test(tc, json_members_in_order_with_their_text);
	tcase_add_loop_test(tc, json_members_of_what_is_no_object_fail_in_one_line, 0,
			    (int)BFS_ARRAY_SIZE(member_errors));
	suite_add_tcase(s, tc);

	tc = tcase_create("check");
	tcase_add_loop_test(tc, check_names_the_feature_and_what_is_wrong, 0,
			    (int)BFS_ARRAY_SIZE(check_cases));
	tcase_add_test(tc, ragged_counts_are_values_and_bytes);
	suite_add_tcase(s, tc);

	tc = tcase_create("select");
	tcase_add_test(tc, select_keeps_the_named_features);
	tcase_add_loop_test(tc, select_of_an_unknown_name_changes_nothing, 0,
			    (int)BFS_ARRAY_SIZE(select_errors));
	tcase_add_loop_test(tc, names_must_be_usable_as_paths, 0, (int)BFS_ARRAY_SIZE(names));
	suite_add_tcase(s, tc);

	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(schema_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
