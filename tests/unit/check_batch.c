/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_batch.c — unit tests of decoder/batch.c, batch assembly with the
 * real decoder: a batch or chunk built in parts (run in any order) is the
 * whole build's bytes, or fails, or substitutes a corrupt record, as the
 * whole build does; a plain dataset read a chunk of records at a time and
 * a compressed one read in one go give the same batches; a mixture's
 * batches hold the records its order names, on any world size and after
 * a re-open.
 */
#include "batchtest.h"
#include "decodertest.h"

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
			wrc = test_batch_build(&whole, &wg, b, e, unit, ignore_corrupt, &seen);

			fails += wrc != 0;
			for (unsigned np = 2; np <= 7; np++) {
				struct bfs_build *jb = NULL;
				struct bfs_geom *g = NULL;
				uint8_t *buf = NULL;
				int rc;

				ck_assert_int_eq(bfs_build_new_in(&jb, b, e, unit, NULL, np, NULL),
						 0);
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
			rc[k] = test_batch_build(&buf[k], &g[k], b[k], 1, u, ignore_corrupt, &seen);
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

/* ---- mixtures (docs/shuffle.md section 8) ---------------------------------- */

struct mixset {
	struct bfs_dataset *m[3], *u;
	struct bfs_mix *mix;
	struct bfs_schema *sc;
};

static const char *const MIX_NAMES[3] = { "a", "b", "c" };
static const long MIX_FIRST[3] = { 0, 1000, 2000 }; /* x[0] of each source's record 0 */

static void mixset_open(struct mixset *ms, char paths[3][64])
{
	struct bfs_dataset_opts dopt = { .comp = BFS_COMP_AUTO };
	uint64_t n[3], from = 0, w[3] = { 5, 3, 8 };

	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(bfs_dataset_open(&ms->m[i], paths[i], &dopt), 0);
		n[i] = bfs_dataset_nrecords(ms->m[i]);
	}
	ck_assert_int_eq(bfs_dataset_union(&ms->u, ms->m, 3), 0);
	struct bfs_mix_spec sp = { .nsrc = 3,
				   .names = MIX_NAMES,
				   .nrecords = n,
				   .nseg = 1,
				   .from = &from,
				   .weights = w,
				   .epoch = BFS_MIX_RECORDS,
				   .epoch_records = 100,
				   .seed = 9,
				   .shuffle = true };
	ck_assert_int_eq(bfs_mix_new(&ms->mix, &sp), 0);
	ck_assert_int_eq(bfs_schema_from_json(&ms->sc, parts_schema, strlen(parts_schema)), 0);
	ck_assert_int_eq(bfs_schema_add_provenance(ms->sc), 0);
	ck_assert_int_eq(bfs_schema_add_provenance(ms->sc), -EINVAL); /* twice: a clash */
}

static void mixset_close(struct mixset *ms)
{
	bfs_schema_free(ms->sc);
	bfs_mix_free(ms->mix);
	bfs_dataset_close(ms->u);
	for (int i = 0; i < 3; i++)
		bfs_dataset_close(ms->m[i]);
}

static struct bfs_batcher *mix_batcher(const struct mixset *ms, uint64_t rank, uint64_t world)
{
	struct bfs_batcher_opts o = { .batch_size = 16,
				      .seed = 9,
				      .shuffle = true,
				      .rank = rank,
				      .world = world,
				      .verify = true,
				      .jobs = 1,
				      .mix = ms->mix };
	struct bfs_batcher *b = NULL;

	ck_assert_msg(bfs_batcher_new(&b, ms->u, ms->sc, &o) == 0, "%s", bfs_err_msg());
	return b;
}

static const uint8_t *tensor_of(const struct bfs_batcher *b, const struct bfs_geom *g,
				const uint8_t *buf, const char *name)
{
	const struct bfs_plan *p = bfs_batcher_plan(b);

	for (size_t t = 0; t < p->ntensors; t++)
		if (strcmp(p->t[t].name, name) == 0)
			return buf + g->g[t].offset;
	ck_abort_msg("no tensor %s", name);
	return NULL;
}

/* A mixture's batches: every row holds the record the mixture names (its
 * x, its _source and _record), a source smaller than a batch repeats in
 * it (read once, copied), local batch i of rank r is global batch
 * i * W + r for W = 3 and 8, and a re-opened mixture gives the same bytes. */
START_TEST(mixture_batches)
{
	char dir[256], paths[3][64];
	static const long counts[3] = { 40, 13, 3 };
	struct mixset ms;
	struct bfs_batcher *b;
	uint8_t *whole[3][7] = { { NULL } };
	uint64_t size[3][7];
	bool repeat = false;

	test_mkdir(dir, sizeof(dir), "check_batch_mix");
	for (int i = 0; i < 3; i++) {
		snprintf(paths[i], sizeof(paths[i]), "%.40s/s%d.tfrecord", dir, i);
		write_records(paths[i], -1, MIX_FIRST[i], counts[i]);
	}
	mixset_open(&ms, paths);
	b = mix_batcher(&ms, 0, 1);
	ck_assert_uint_eq(bfs_batcher_nbatches(b), 7); /* 100 records, 16 a batch */
	for (uint64_t e = 0; e < 3; e++)
		for (uint64_t k = 0; k < 7; k++) {
			struct bfs_geom *g = NULL;
			const uint8_t *src, *rec, *x; /* no alignment in the file: memcpy */
			bool seen[3][64] = { { false } };

			ck_assert_int_eq(test_batch_build(&whole[e][k], &g, b, e, k, NULL, NULL),
					 0);
			size[e][k] = g->st_size;
			src = tensor_of(b, g, whole[e][k], "_source");
			rec = tensor_of(b, g, whole[e][k], "_record");
			x = tensor_of(b, g, whole[e][k], "x");
			for (uint64_t j = 0; j < g->batch; j++) {
				uint64_t pos = k * 16 + j, want, local;
				int32_t s32;
				int64_t r64;
				float x0;
				size_t s;

				bfs_mix_records(ms.mix, e, &pos, 1, &want);
				bfs_mix_source_of(ms.mix, want, &s, &local);
				memcpy(&s32, src + 4 * j, 4);
				memcpy(&r64, rec + 8 * j, 8);
				memcpy(&x0, x + 8 * j, 4);
				ck_assert_int_eq(s32, (int32_t)s);
				ck_assert_int_eq(r64, (int64_t)local);
				ck_assert(x0 == (float)(MIX_FIRST[s] + (long)local));
				repeat |= seen[s][local];
				seen[s][local] = true;
			}
			bfs_geom_free(g);
		}
	ck_assert(repeat); /* source c (3 records, weight 8 of 16) came twice in a batch */
	bfs_batcher_free(b);
	for (uint64_t world = 3; world <= 8; world += 5)
		for (uint64_t r = 0; r < world; r++) {
			b = mix_batcher(&ms, r, world);
			ck_assert_uint_eq(bfs_batcher_nbatches(b), 7 / world);
			for (uint64_t i = 0; i < 7 / world; i++) {
				uint8_t *buf = NULL;
				struct bfs_geom *g = NULL;

				ck_assert_int_eq(test_batch_build(&buf, &g, b, 1, i, NULL, NULL),
						 0);
				ck_assert_uint_eq(g->st_size, size[1][i * world + r]);
				ck_assert(memcmp(buf, whole[1][i * world + r], g->st_size) == 0);
				free(buf);
				bfs_geom_free(g);
			}
			bfs_batcher_free(b);
		}
	mixset_close(&ms);
	mixset_open(&ms, paths); /* again: the same bytes */
	b = mix_batcher(&ms, 0, 1);
	for (uint64_t k = 0; k < 7; k++) {
		uint8_t *buf = NULL;
		struct bfs_geom *g = NULL;

		ck_assert_int_eq(test_batch_build(&buf, &g, b, 2, k, NULL, NULL), 0);
		ck_assert(g->st_size == size[2][k] && memcmp(buf, whole[2][k], g->st_size) == 0);
		free(buf);
		bfs_geom_free(g);
	}
	bfs_batcher_free(b);
	mixset_close(&ms);
	for (int e = 0; e < 3; e++)
		for (int k = 0; k < 7; k++)
			free(whole[e][k]);
	test_rmdir(dir);
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
	tcase_add_test(tc, mixture_batches);
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
