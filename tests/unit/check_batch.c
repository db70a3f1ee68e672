/*
 * check_batch.c — unit tests of decoder/batch.c, batch assembly with the
 * real decoder: a batch or chunk built in parts (run in any order) is the
 * whole build's bytes, or fails, or substitutes a corrupt record, as the
 * whole build does; a plain dataset read a chunk of records at a time and
 * a compressed one read in one go give the same batches.
 */
#include "batchtest.h"

#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

static void ignore_corrupt(void *ctx, const char *msg, unsigned skipped)
{
	(void)msg, (void)skipped;
	++*(int *)ctx;
}

/* Every batch and chunk of two epochs, built whole and in 2..7 parts run
 * in reverse order: the same bytes, or both fail. */
static void check_parts_equal(long bad, const char *schema_json, enum bfs_on_corrupt oc)
{
	char path[] = "/tmp/check_batch_parts_XXXXXX";
	int fd = mkstemp(path);
	struct bfs_dataset_opts dopt = { .comp = BFS_COMP_AUTO };
	struct bfs_batcher_opts bopt = { .batch_size = 37,
					 .seed = 5,
					 .shuffle = true,
					 .world = 1,
					 .verify = true,
					 .on_corrupt = oc,
					 .jobs = 1,
					 .chunk_rows = 50 };
	struct bfs_dataset *ds = NULL;
	struct bfs_schema *sc = NULL;
	struct bfs_batcher *b = NULL;
	int fails = 0, seen = 0;

	ck_assert_int_ge(fd, 0);
	close(fd);
	write_dataset(path, bad);
	ck_assert_int_eq(bfs_dataset_open(&ds, path, &dopt), 0);
	ck_assert_msg(bfs_schema_from_json(&sc, schema_json, strlen(schema_json)) == 0, "%s",
		      bfs_err_msg());
	ck_assert_int_eq(bfs_batcher_new(&b, ds, sc, &bopt), 0);
	for (uint64_t e = 0; e < 2; e++) {
		uint64_t nb = bfs_batcher_nbatches(b), nc = bfs_batcher_nchunks(b);
		for (uint64_t u = 0; u < nb + nc; u++) {
			uint64_t unit = u < nb ? u : (u - nb) | BFS_CHUNK;
			uint8_t *whole = NULL;
			struct bfs_geom *wg = NULL;
			int wrc = bfs_batcher_geom(&wg, b, e, unit);
			uint64_t rows = wg ? wg->batch : 0;

			ck_assert_int_eq(wrc, 0);
			wrc = bfs_batcher_build(&whole, &wg, b, e, unit, ignore_corrupt, &seen);

			fails += wrc != 0;
			for (unsigned np = 2; np <= 7; np++) {
				struct bfs_build *jb = NULL;
				struct bfs_geom *g = NULL;
				uint8_t *buf = NULL;
				int rc;

				ck_assert_int_eq(bfs_build_new(&jb, b, e, unit, NULL, np), 0);
				ck_assert_uint_eq(bfs_build_nparts(jb), np < rows ? np : rows);
				for (unsigned k = bfs_build_nparts(jb); k-- > 0;)
					bfs_build_part(jb, k, ignore_corrupt, &seen);
				rc = bfs_build_finish(jb, &buf, &g);
				ck_assert_int_eq(rc, wrc);
				if (rc == 0) {
					ck_assert_uint_eq(g->st_size, wg->st_size);
					ck_assert(memcmp(buf, whole, g->st_size) == 0);
				} else {
					ck_assert_ptr_null(buf);
					ck_assert(strstr(bfs_err_msg(), "record") != NULL);
				}
				free(buf);
				bfs_geom_free(g);
			}
			free(whole);
			bfs_geom_free(wg);
		}
	}
	/* the broken record fails (or is replaced in) its batch and chunk */
	ck_assert_int_eq(fails, bad >= 0 && oc == BFS_ON_CORRUPT_FAIL ? 4 : 0);
	ck_assert(bad < 0 ? seen == 0 : seen > 0);
	bfs_batcher_free(b);
	bfs_schema_free(sc);
	bfs_dataset_close(ds);
	unlink(path);
}

START_TEST(build_in_parts_equals_whole_build)
{
	check_parts_equal(-1, parts_schema, BFS_ON_CORRUPT_FAIL);
}
END_TEST

START_TEST(build_in_parts_fails_like_whole_build)
{
	check_parts_equal(123, parts_schema, BFS_ON_CORRUPT_FAIL);
}
END_TEST

START_TEST(build_in_parts_substitutes_like_whole_build)
{
	static const char fixed[] =
		"{\"features\": {\"x\": {\"kind\": \"float\", \"shape\": [2]}}}";

	check_parts_equal(123, fixed, BFS_ON_CORRUPT_SKIP);
}
END_TEST

/* Records of ~12 KB (x float [2], tok int64 0..5 values, big: BIG bytes)
 * to a plain file and the same bytes gzip-compressed; record `bad` has a
 * broken data CRC. */
#define BIG 12000
static void write_big_records(const char *plain, const char *gz, long bad, long n)
{
	FILE *f = fopen(plain, "wb");
	char *big = malloc(BIG + 1);
	uint8_t *all;
	size_t len;
	gzFile g;

	ck_assert(f != NULL && big != NULL);
	for (long i = 0; i < n; i++) {
		struct pb feats = { 0 }, fx, ft, fb, ex;
		float x[2] = { (float)i, (float)-i };
		int64_t v[5] = { i, i + 1, i + 2, i + 3, i + 4 };
		const char *bs[1] = { big };

		for (size_t k = 0; k < BIG; k++)
			big[k] = (char)('a' + (i * 7 + (long)k) % 26);
		big[BIG] = '\0';
		fx = pb_float_feature(x, 2, true);
		ft = pb_int_feature(v, (size_t)(i % 6), true);
		fb = pb_bytes_feature(bs, 1);
		pb_add(&feats, "x", &fx);
		pb_add(&feats, "tok", &ft);
		pb_add(&feats, "big", &fb);
		ex = pb_example(&feats, NULL);
		put_record(f, &ex, i == bad);
	}
	ck_assert_int_eq(fclose(f), 0);
	all = test_slurp(plain, &len);
	g = gzopen(gz, "wb1");
	ck_assert(g != NULL);
	ck_assert_int_eq(gzwrite(g, all, (unsigned)len), (int)len);
	ck_assert_int_eq(gzclose(g), Z_OK);
	free(all);
	free(big);
}

/* A plain dataset's parts are read and filled a chunk of records at a
 * time (READ_CHUNK), a compressed one's in one go: every batch, and the
 * corrupt record's fate, must be the same bytes either way. */
static void check_chunked_equals_one_read(long bad, enum bfs_on_corrupt oc, bool ragged)
{
	/* substitution (on_corrupt=skip) needs a schema without ragged tensors */
	static const char with_tok[] =
		"{\"features\": {\"x\": {\"kind\": \"float\", \"shape\": [2]},"
		" \"tok\": {\"kind\": \"int64\", \"shape\": [-1], \"ragged\": true},"
		" \"big\": {\"kind\": \"bytes\", \"dtype\": \"uint8\", \"shape\": [12000]}}}";
	static const char fixed[] =
		"{\"features\": {\"x\": {\"kind\": \"float\", \"shape\": [2]},"
		" \"big\": {\"kind\": \"bytes\", \"dtype\": \"uint8\", \"shape\": [12000]}}}";
	const char *schema = ragged ? with_tok : fixed;
	char plain[] = "/tmp/check_batch_chunks_XXXXXX", gz[64];
	int fd = mkstemp(plain), seen = 0;
	struct bfs_dataset_opts dopt = { .comp = BFS_COMP_AUTO };
	struct bfs_batcher_opts bopt = { .batch_size = 64, /* ~770 KB of records a batch */
					 .seed = 3,
					 .shuffle = true,
					 .world = 1,
					 .verify = true,
					 .on_corrupt = oc,
					 .jobs = 1 };
	struct bfs_dataset *ds[2] = { NULL, NULL };
	struct bfs_schema *sc = NULL;
	struct bfs_batcher *b[2] = { NULL, NULL };
	int fails = 0;

	ck_assert_int_ge(fd, 0);
	close(fd);
	snprintf(gz, sizeof(gz), "%s.gz", plain);
	write_big_records(plain, gz, bad, 200);
	ck_assert_int_eq(bfs_dataset_open(&ds[0], plain, &dopt), 0);
	ck_assert_int_eq(bfs_dataset_open(&ds[1], gz, &dopt), 0);
	ck_assert(bfs_shard_compression(bfs_dataset_shard(ds[1], 0)) == BFS_COMP_GZIP);
	ck_assert_int_eq(bfs_schema_from_json(&sc, schema, strlen(schema)), 0);
	for (int k = 0; k < 2; k++)
		ck_assert_int_eq(bfs_batcher_new(&b[k], ds[k], sc, &bopt), 0);
	for (uint64_t u = 0; u < bfs_batcher_nbatches(b[0]); u++) {
		uint8_t *buf[2] = { NULL, NULL };
		struct bfs_geom *g[2] = { NULL, NULL };
		int rc[2];

		for (int k = 0; k < 2; k++)
			rc[k] = bfs_batcher_build(&buf[k], &g[k], b[k], 1, u, ignore_corrupt,
						  &seen);
		ck_assert_int_eq(rc[0], rc[1]);
		fails += rc[0] != 0;
		if (rc[0] == 0) {
			ck_assert_uint_eq(g[0]->st_size, g[1]->st_size);
			ck_assert(memcmp(buf[0], buf[1], g[0]->st_size) == 0);
		}
		for (int k = 0; k < 2; k++) {
			free(buf[k]);
			bfs_geom_free(g[k]);
		}
	}
	int want_fails = bad >= 0 && oc == BFS_ON_CORRUPT_FAIL;

	ck_assert_int_eq(fails, want_fails);
	ck_assert(bad < 0 ? seen == 0 : seen > 0);
	for (int k = 0; k < 2; k++) {
		bfs_batcher_free(b[k]);
		bfs_dataset_close(ds[k]);
	}
	bfs_schema_free(sc);
	unlink(plain);
	unlink(gz);
}

START_TEST(chunked_reads_equal_one_read)
{
	check_chunked_equals_one_read(-1, BFS_ON_CORRUPT_FAIL, true);
	check_chunked_equals_one_read(77, BFS_ON_CORRUPT_FAIL, true);
	check_chunked_equals_one_read(77, BFS_ON_CORRUPT_SKIP, false);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("batch");
	TCase *tc = tcase_create("batch");

	tcase_add_test(tc, build_in_parts_equals_whole_build);
	tcase_add_test(tc, build_in_parts_fails_like_whole_build);
	tcase_add_test(tc, build_in_parts_substitutes_like_whole_build);
	tcase_add_test(tc, chunked_reads_equal_one_read);
	suite_add_tcase(s, tc);
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
