/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_realdata.c — the decoder over the shared real TFRecord files
 * (written by TensorFlow-ecosystem tools; MANIFEST.md in their folder gives
 * their record counts and features): record.c scans every shard with the
 * manifest's count and detected compression and reads it back at random;
 * example.c decodes every record (the fast, bound and reference decoders
 * agree); schema.c infers the manifest's facts and a schema every record of
 * its file fits.
 *
 * The folder is ../shared/testdata/real beside the repository, or
 * $BFS_TESTDATA. Without it the whole suite is skipped (exit status 77,
 * automake's SKIP), never counted as passed; with it, a file the tests name
 * that is missing is a failure.
 */
#include "bind_diff.h"
#include "crc32c.h"
#include "decodertest.h"
#include "example.h"
#include "pbtest.h"
#include "record.h"
#include "schema.h"
#include "schematest.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define I BFS_KIND_INT64
#define FL BFS_KIND_FLOAT
#define BY BFS_KIND_BYTES

/* ---- record.c: framing, counts, compression ------------------------------------------------------ */

static const struct {
	const char *file;
	enum bfs_compression comp;
	uint64_t records;
} real_cases[] = {
	{ "tfx-mnist-1000.tfrecord", BFS_COMP_NONE, 1000 },
	{ "tfx-taxi-external-00000-of-00002.tfrecord.gz", BFS_COMP_GZIP, 9988 },
	{ "tfx-taxi-external-00001-of-00002.tfrecord.gz", BFS_COMP_GZIP, 5012 },
	{ "tfx-taxi-transformed-eval-00000-of-00001.tfrecord.gz", BFS_COMP_GZIP, 5091 },
	{ "tfx-seqex-eval.tfrecord.gz", BFS_COMP_GZIP, 4500 },
	{ "tfx-tfjs-next-page-data.tfrecord.gz", BFS_COMP_GZIP, 100 },
	{ "trax-squad-validation-00000-of-00001.tfrecord", BFS_COMP_NONE, 10 },
	{ "lingvo-t2t-translate-ende-wmt32k-train-00511-of-00512.tfrecord", BFS_COMP_NONE, 8941 },
	{ "lingvo-wmt14-ende-wpm-32k-test.tfrecord", BFS_COMP_NONE, 100 },
	{ "ydf-adult-test.tfrecord.gz", BFS_COMP_GZIP, 9769 },
	{ "ydf-toy-00000-of-00002.tfrecord.gz", BFS_COMP_GZIP, 3 },
	{ "ydf-toy-00001-of-00002.tfrecord.gz", BFS_COMP_GZIP, 1 },
	{ "ecosystem-hadoop-part-m-00000.tfrecord", BFS_COMP_NONE, 5 },
	{ "ecosystem-hadoop-part-m-00000.tfrecord.gz", BFS_COMP_GZIP, 5 },
	{ "tft-seqex-data.tfrecord.gz", BFS_COMP_GZIP, 3 },
};

static int crc_fn(void *ctx, uint64_t index, uint64_t offset, const uint8_t *data, uint32_t len)
{
	uint32_t *crcs = ctx;
	(void)offset;
	crcs[index] = bfs_crc32c(0, data, len);
	return 0;
}

START_TEST(real_shards_scan_with_manifest_counts_and_detected_compression)
{
	char path[1024];
	struct bfs_shard *s = NULL;
	uint32_t *crcs;
	uint8_t *buf = malloc(1 << 20);

	snprintf(path, sizeof(path), "%s/%s", realdata_dir(), real_cases[_i].file);
	crcs = calloc(real_cases[_i].records + 1, sizeof(*crcs));
	ck_assert_msg(bfs_shard_open(&s, path, BFS_COMP_AUTO) == 0, "%s: %s", path, bfs_err_msg());
	ck_assert_int_eq(bfs_shard_compression(s), real_cases[_i].comp);
	/* count first: crc_fn indexes crcs[] sized from the manifest */
	ck_assert_msg(bfs_shard_scan(s, true, NULL, NULL) == 0, "%s", bfs_err_msg());
	ck_assert_uint_eq(bfs_shard_nrecords(s), real_cases[_i].records);
	ck_assert_int_eq(bfs_shard_scan(s, true, crc_fn, crcs), 0);
	/* spot-check random access, seek points included */
	for (uint64_t i = 0; i < real_cases[_i].records; i += 1 + real_cases[_i].records / 40) {
		uint32_t len = bfs_shard_record_len(s, i);
		ck_assert_msg(bfs_shard_read(s, i, buf, 1 << 20, true) == 0, "%s", bfs_err_msg());
		ck_assert_uint_eq(bfs_crc32c(0, buf, len), crcs[i]);
	}
	bfs_shard_close(s);
	free(crcs);
	free(buf);
}
END_TEST

/* ---- example.c: every record decodes -------------------------------------------------------------------------- */

struct real_ctx {
	const char *file;
	long decoded, failed;
	size_t features;
};

static void real_record(void *vctx, const uint8_t *data, size_t len)
{
	struct real_ctx *ctx = vctx;
	struct bfs_example *ex = NULL;
	char *text = NULL;

	if (bfs_example_decode(&ex, data, len) < 0) {
		if (!ctx->failed)
			fprintf(stderr, "%s: record %ld: %s\n", ctx->file, ctx->decoded,
				bfs_err_msg());
		ctx->failed++;
		return;
	}
	ctx->decoded++;
	ctx->features += ex->nfeatures + ex->nlists;
	/* bound decoding (the batch builder's) agrees with the reference */
	{
		const char *bad = bind_diff(data, len);
		ck_assert_msg(bad == NULL, "%s: record %ld: bind: %s", ctx->file, ctx->decoded,
			      bad);
	}
	/* the fast decoder takes every real record and agrees with the reference */
	{
		struct bfs_example *fast = NULL, *ref = NULL;
		ck_assert_int_eq(bfs_example_decode_fast(&fast, data, len), 0);
		ck_assert_int_eq(bfs_example_decode_ref(&ref, data, len), 0);
		ck_assert(test_example_equal(fast, ref));
		bfs_example_free(fast);
		bfs_example_free(ref);
	}
	for (size_t i = 1; i < ex->nfeatures; i++)
		ck_assert(strcmp(ex->features[i - 1].name, ex->features[i].name) < 0);
	if (ctx->decoded <= 3) {
		ck_assert_int_eq(bfs_example_to_text(&text, ex, 8), 0);
		free(text);
	}
	bfs_example_free(ex);
}

/* Record counts from MANIFEST.md. */
static const struct {
	const char *file;
	long records;
} real_counts[] = {
	{ "tfx-mnist-1000.tfrecord", 1000 },
	{ "tfx-taxi-external-00000-of-00002.tfrecord.gz", 9988 },
	{ "tfx-seqex-eval.tfrecord.gz", 4500 },
	{ "lingvo-t2t-translate-ende-wmt32k-train-00511-of-00512.tfrecord", 8941 },
	{ "ecosystem-hadoop-part-m-00000.tfrecord", 5 },
	{ "tft-seqex-data.tfrecord.gz", 3 },
};

START_TEST(every_record_of_the_real_files_decodes)
{
	size_t nfiles = 0;
	char **files = realdata_files(&nfiles);
	long total = 0;

	ck_assert_msg(files && nfiles, "no TFRecord files in %s", realdata_dir());
	for (size_t i = 0; i < nfiles; i++) {
		char path[4096];
		struct real_ctx ctx = { .file = files[i] };
		size_t len;
		uint8_t *buf;
		long n;

		snprintf(path, sizeof(path), "%s/%s", realdata_dir(), files[i]);
		buf = realdata_read(path, &len);
		ck_assert_msg(buf != NULL, "cannot read %s", path);
		n = realdata_records(buf, len, real_record, &ctx);
		free(buf);
		ck_assert_msg(n > 0, "%s: bad framing", files[i]);
		ck_assert_msg(ctx.failed == 0, "%s: %ld records failed", files[i], ctx.failed);
		ck_assert_int_eq(ctx.decoded, n);
		for (size_t j = 0; j < BFS_ARRAY_SIZE(real_counts); j++)
			if (strcmp(files[i], real_counts[j].file) == 0)
				ck_assert_int_eq(n, real_counts[j].records);
		total += n;
	}
	realdata_files_free(files, nfiles);
	if (!getenv("BFS_TESTDATA"))
		ck_assert_int_eq(total, 44528); /* MANIFEST.md: 15 files, 44528 records */
}
END_TEST

/* ---- schema.c: inference ------------------------------------------------------------------------------- */

struct real_infer {
	struct bfs_infer *inf;
	struct bfs_schema *s; /* second pass: check */
	long n, bad;
};

static void real_add(void *vctx, const uint8_t *data, size_t len)
{
	struct real_infer *ctx = vctx;
	struct bfs_example *ex;

	ck_assert_int_eq(bfs_example_decode(&ex, data, len), 0);
	if (ctx->s) {
		if (test_schema_check(ctx->s, ex) < 0 && !ctx->bad++)
			fprintf(stderr, "record %ld: %s\n", ctx->n, bfs_err_msg());
	} else {
		ck_assert_msg(bfs_infer_add(ctx->inf, ex) == 0, "record %ld: %s", ctx->n,
			      bfs_err_msg());
	}
	ctx->n++;
	bfs_example_free(ex);
}

/* The inferred schema of one real file (which must be there). */
static struct bfs_schema *real_schema(const char *file)
{
	struct real_infer ctx = { 0 };
	struct bfs_schema *s = NULL;
	char path[4096];
	uint8_t *buf;
	size_t len;

	snprintf(path, sizeof(path), "%s/%s", realdata_dir(), file);
	buf = realdata_read(path, &len);
	ck_assert_msg(buf != NULL, "cannot read %s", path);
	bfs_infer_new(&ctx.inf);
	ck_assert_int_gt(realdata_records(buf, len, real_add, &ctx), 0);
	ck_assert_int_eq(bfs_infer_finish(&s, ctx.inf), 0);
	/* every record fits the schema inferred from the file */
	ctx.s = s;
	ctx.n = 0;
	realdata_records(buf, len, real_add, &ctx);
	ck_assert_msg(ctx.bad == 0, "%s: %ld records do not fit the inferred schema", file,
		      ctx.bad);
	assert_roundtrip(s);
	bfs_infer_free(ctx.inf);
	free(buf);
	return s;
}

static void expect(const struct bfs_schema *s, const char *name, bool list, enum bfs_kind kind,
		   enum bfs_layout layout, int ndim, int64_t d0, int64_t d1, int64_t max_len)
{
	const struct bfs_feature_spec *f = spec_find(s, name, list);

	ck_assert_msg(f != NULL, "no %s", name);
	ck_assert_msg(f->kind == kind && f->layout == layout && f->ndim == ndim,
		      "%s: kind %d layout %d ndim %d", name, f->kind, f->layout, f->ndim);
	if (ndim > 0)
		ck_assert_msg(f->shape[0] == d0, "%s: shape[0] %lld", name, (long long)f->shape[0]);
	if (ndim > 1)
		ck_assert_msg(f->shape[1] == d1, "%s: shape[1] %lld", name, (long long)f->shape[1]);
	if (list)
		ck_assert_msg(f->max_steps == max_len, "%s: max_steps %lld", name,
			      (long long)f->max_steps);
	else if (layout == BFS_LAYOUT_PADDED)
		ck_assert_msg(f->max_len == max_len, "%s: max_len %lld", name,
			      (long long)f->max_len);
}

#define FIXED BFS_LAYOUT_FIXED
#define PADDED BFS_LAYOUT_PADDED
#define RAGGED2 BFS_LAYOUT_RAGGED2

START_TEST(real_files_infer_the_manifest_facts)
{
	struct bfs_schema *s;

	if ((s = real_schema("tfx-mnist-1000.tfrecord"))) {
		ck_assert_uint_eq(s->nfeatures, 2);
		expect(s, "image_class", false, I, FIXED, 0, 0, 0, 0);
		expect(s, "image_floats", false, FL, FIXED, 1, 784, 0, 0);
		bfs_schema_free(s);
	}
	if ((s = real_schema("ydf-adult-test.tfrecord.gz"))) {
		ck_assert_uint_eq(s->nfeatures, 15);
		expect(s, "age", false, I, FIXED, 0, 0, 0, 0);
		expect(s, "native_country", false, BY, PADDED, 1, -1, 0, 26);
		expect(s, "occupation", false, BY, PADDED, 1, -1, 0, 17);
		bfs_schema_free(s);
	}
	if ((s = real_schema("lingvo-wmt14-ende-wpm-32k-test.tfrecord"))) {
		expect(s, "source_word", false, BY, RAGGED2, 2, -1, -1, 0);
		expect(s, "source_id", false, I, PADDED, 1, -1, 0, 53);
		expect(s, "target_weight", false, FL, PADDED, 1, -1, 0, 64);
		expect(s, "natural_order", false, I, FIXED, 0, 0, 0, 0);
		bfs_schema_free(s);
	}
	if ((s = real_schema("tfx-seqex-eval.tfrecord.gz"))) {
		ck_assert_uint_eq(s->nfeatures, 2);
		ck_assert_uint_eq(s->nlists, 1);
		expect(s, "i", false, I, PADDED, 1, -1, 0, 1);
		expect(s, "f", false, FL, PADDED, 1, -1, 0, 1);
		expect(s, "s", true, BY, FIXED, 1, 5, 0, 2);
		bfs_schema_free(s);
	}
	if ((s = real_schema("tft-seqex-data.tfrecord.gz"))) {
		expect(s, "int_feature", false, I, FIXED, 0, 0, 0, 0);
		expect(s, "float_feature", false, FL, FIXED, 1, 4, 0, 0);
		expect(s, "int_feature", true, I, FIXED, 1, 2, 0, 2);
		expect(s, "string_feature", true, BY, FIXED, 2, 2, 6, 2);
		bfs_schema_free(s);
	}
	if ((s = real_schema("tfx-taxi-external-00000-of-00002.tfrecord.gz"))) {
		ck_assert_uint_eq(s->nfeatures, 17); /* pickup_census_tract never has a kind */
		ck_assert_ptr_null(spec_find(s, "pickup_census_tract", false));
		expect(s, "company", false, BY, PADDED, 1, -1, 0, 40);
		expect(s, "payment_type", false, BY, PADDED, 1, -1, 0, 11);
		expect(s, "trip_seconds", false, FL, PADDED, 1, -1, 0, 1);
		expect(s, "fare", false, FL, FIXED, 0, 0, 0, 0);
		bfs_schema_free(s);
	}
	if ((s = real_schema("ydf-toy-00001-of-00002.tfrecord.gz"))) {
		ck_assert_ptr_null(spec_find(s, "Bool_2", false));
		ck_assert_ptr_null(spec_find(s, "Cat_2", false));
		expect(s, "Cat_set_1", false, BY, RAGGED2, 2, -1, -1, 0);
		expect(s, "Cat_1", false, BY, FIXED, 1, 1, 0, 0);
		bfs_schema_free(s);
	}
	if ((s = real_schema("trax-squad-validation-00000-of-00001.tfrecord"))) {
		expect(s, "answers/text", false, BY, RAGGED2, 2, -1, -1, 0);
		expect(s, "answers/answer_start", false, I, PADDED, 1, -1, 0, 5);
		expect(s, "context", false, BY, PADDED, 1, -1, 0, 1034);
		bfs_schema_free(s);
	}
	if ((s = real_schema("ecosystem-hadoop-part-m-00000.tfrecord"))) {
		expect(s, "data", false, I, FIXED, 1, 2, 0, 0);
		bfs_schema_free(s);
	}
}
END_TEST

START_TEST(every_real_file_infers_a_schema_that_fits_it)
{
	size_t nfiles = 0;
	char **files = realdata_files(&nfiles);

	for (size_t i = 0; i < nfiles; i++)
		bfs_schema_free(real_schema(files[i]));
	realdata_files_free(files, nfiles);
}
END_TEST

/* ---- driver ------------------------------------------------------------------------------ */

static Suite *realdata_suite(void)
{
	Suite *s = suite_create("realdata");
	TCase *tc = tcase_create("record");

	tcase_add_loop_test(tc, real_shards_scan_with_manifest_counts_and_detected_compression, 0,
			    BFS_ARRAY_SIZE(real_cases));
	tcase_set_timeout(tc, 300);
	suite_add_tcase(s, tc);

	tc = tcase_create("example");
	tcase_add_test(tc, every_record_of_the_real_files_decodes);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);

	tc = tcase_create("schema");
	tcase_add_test(tc, real_files_infer_the_manifest_facts);
	tcase_add_test(tc, every_real_file_infers_a_schema_that_fits_it);
	tcase_set_timeout(tc, 300);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	struct stat st;
	SRunner *sr;
	int failed;

	if (stat(realdata_dir(), &st) != 0 || !S_ISDIR(st.st_mode)) {
		printf("check_realdata: SKIP: no real test data folder %s "
		       "(set BFS_TESTDATA to where it is)\n",
		       realdata_dir());
		return 77; /* automake: SKIP */
	}
	sr = srunner_create(realdata_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
