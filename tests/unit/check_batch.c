/*
 * check_batch.c — unit tests of the permutation, tensor geometry and .npy /
 * .safetensors headers, and (with the real decoder) batch assembly.
 */
#include "testfiles.h"
#include "batch.h"
#include "blockshuf.h"
#include "cntcache.h"
#include "counts.h"
#include "crc32c.h"
#include "dataset.h"
#include "ixpack.h"
#include "pbtest.h"
#include "perm.h"
#include "schema.h"
#include "tensor.h"

#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* ---------------------------------------------------------- permutation */

static bool is_permutation(const struct bfs_perm *p, uint64_t n)
{
	uint8_t *seen = calloc(n ? n : 1, 1);
	bool ok = true;

	for (uint64_t i = 0; i < n && ok; i++) {
		uint64_t y = bfs_perm_apply(p, i);
		if (y >= n || seen[y])
			ok = false;
		else
			seen[y] = 1;
	}
	free(seen);
	return ok;
}

START_TEST(perm_is_a_bijection_for_every_small_n)
{
	struct bfs_perm p;

	for (uint64_t n = 0; n <= 300; n++) {
		for (uint64_t seed = 0; seed < 3; seed++) {
			bfs_perm_init(&p, n, seed, seed * 7 + 1, 1);
			ck_assert_msg(is_permutation(&p, n), "n=%llu seed=%llu",
				      (unsigned long long)n, (unsigned long long)seed);
		}
	}
}
END_TEST

START_TEST(perm_is_a_bijection_for_large_n)
{
	static const uint64_t ns[] = { 1000003, 1u << 20, (1u << 20) + 1 };
	struct bfs_perm p;

	for (size_t i = 0; i < BFS_ARRAY_SIZE(ns); i++) {
		bfs_perm_init(&p, ns[i], 42, 3, 1);
		ck_assert(is_permutation(&p, ns[i]));
	}
}
END_TEST

START_TEST(perm_apply_many_equals_apply)
{
	static const uint64_t ns[] = {
		0, 1, 2, 3, 5, 64, 65, 1000, 400000, (1u << 20) + 7, (1ull << 41) + 3
	};
	uint64_t pos[300], out[300];
	struct bfs_perm p;

	/* both the scalar rounds and (where the CPU has AVX-512DQ) the vector ones */
	for (int vector = 0; vector < 2; vector++) {
		for (size_t i = 0; i < BFS_ARRAY_SIZE(ns); i++) {
			for (int shuffle = 0; shuffle < 2; shuffle++) {
				uint64_t n = ns[i];
				bfs_perm_init(&p, n, 7 + i, i, shuffle);
				for (size_t k = 0; k < 300; k++) /* scattered and repeated */
					pos[k] = n ? (k * 2654435761u + i) % n : 0;
				if (!n)
					continue;
				bfs_perm_apply_many_how(&p, pos, 300, out, vector);
				for (size_t k = 0; k < 300; k++)
					ck_assert_uint_eq(out[k], bfs_perm_apply(&p, pos[k]));
				for (size_t k = 0; k < 300; k++) /* in place */
					out[k] = pos[k];
				bfs_perm_apply_many_how(&p, out, 300, out, vector);
				for (size_t k = 0; k < 300; k++)
					ck_assert_uint_eq(out[k], bfs_perm_apply(&p, pos[k]));
			}
		}
	}
}
END_TEST

START_TEST(perm_shuffle_none_is_identity)
{
	struct bfs_perm p;

	bfs_perm_init(&p, 1000, 5, 9, 0);
	for (uint64_t i = 0; i < 1000; i++)
		ck_assert_uint_eq(bfs_perm_apply(&p, i), i);
}
END_TEST

START_TEST(perm_epochs_and_seeds_differ)
{
	struct bfs_perm a, b, c;
	uint64_t same_ab = 0, same_ac = 0;

	bfs_perm_init(&a, 10000, 1, 0, 1);
	bfs_perm_init(&b, 10000, 1, 1, 1);
	bfs_perm_init(&c, 10000, 2, 0, 1);
	for (uint64_t i = 0; i < 10000; i++) {
		same_ab += bfs_perm_apply(&a, i) == bfs_perm_apply(&b, i);
		same_ac += bfs_perm_apply(&a, i) == bfs_perm_apply(&c, i);
	}
	/* a random pair of permutations agrees in about 1 place */
	ck_assert_uint_lt(same_ab, 20);
	ck_assert_uint_lt(same_ac, 20);
}
END_TEST

START_TEST(perm_positions_are_uniform)
{
	/* chi-square of where record r lands, over many seeds, for each r */
	enum { N = 10, SEEDS = 20000 };
	static uint32_t count[N][N];
	struct bfs_perm p;
	double worst = 0;

	memset(count, 0, sizeof(count));
	for (uint64_t s = 0; s < SEEDS; s++) {
		bfs_perm_init(&p, N, s, 0, 1);
		for (uint64_t pos = 0; pos < N; pos++)
			count[bfs_perm_apply(&p, pos)][pos]++;
	}
	for (int r = 0; r < N; r++) {
		double chi = 0, expect = (double)SEEDS / N;
		for (int pos = 0; pos < N; pos++)
			chi += (count[r][pos] - expect) * (count[r][pos] - expect) / expect;
		if (chi > worst)
			worst = chi;
	}
	/* 9 degrees of freedom: p = 0.001 at 27.9; allow for the max of 10 */
	ck_assert_msg(worst < 33.0, "worst chi-square %.1f", worst);
}
END_TEST

/* ----------------------------------------------------------- npy header */

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

/* ------------------------------------------------------- plan, geometry */

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

/* ------------------------------------------------------ building in parts */

static void put_record(FILE *f, const struct pb *m, bool break_crc)
{
	uint8_t hdr[12], tail[4];
	uint64_t len = m->n;
	uint32_t c;

	memcpy(hdr, &len, 8);
	c = bfs_crc32c_mask(bfs_crc32c(0, hdr, 8));
	memcpy(hdr + 8, &c, 4);
	c = bfs_crc32c_mask(bfs_crc32c(0, m->d, m->n)) ^ (break_crc ? 1u : 0u);
	memcpy(tail, &c, 4);
	ck_assert(fwrite(hdr, 1, 12, f) == 12 && fwrite(m->d, 1, m->n, f) == m->n &&
		  fwrite(tail, 1, 4, f) == 4);
}

/* Records first .. first+n-1: x float [2], tok int64 0..5 values (ragged),
 * w 0..3 byte strings (ragged twice), p int64 0..6 values (padded); record
 * `bad` has a broken data CRC (none when bad < 0). */
static void write_records(const char *path, long bad, long first, long n)
{
	FILE *f = fopen(path, "wb");

	ck_assert(f != NULL);
	for (long i = first; i < first + n; i++) {
		struct pb feats = { 0 }, fx, ft, fw, fp, ex;
		float x[2] = { (float)i, -(float)i / 3 };
		int64_t v[6];
		char wb[3][8];
		const char *ws[3] = { wb[0], wb[1], wb[2] };

		for (int k = 0; k < 6; k++)
			v[k] = i * 10 + k;
		for (int k = 0; k < 3; k++)
			snprintf(wb[k], sizeof(wb[k]), "%.*s%ld", (int)((i + k) % 4), "abcd", i);
		fx = pb_float_feature(x, 2, i % 2);
		ft = pb_int_feature(v, (size_t)(i * 7 % 6), true);
		fw = pb_bytes_feature(ws, (size_t)(i % 4));
		fp = pb_int_feature(v, (size_t)(i * 5 % 7), i % 3 == 0);
		pb_add(&feats, "x", &fx);
		pb_add(&feats, "tok", &ft);
		pb_add(&feats, "w", &fw);
		pb_add(&feats, "p", &fp);
		ex = pb_example(&feats, NULL);
		put_record(f, &ex, i == bad);
	}
	ck_assert_int_eq(fclose(f), 0);
}

/* 300 records (write_records). */
static void write_dataset(const char *path, long bad)
{
	write_records(path, bad, 0, 300);
}

static const char parts_schema[] =
	"{\"features\": {\"x\": {\"kind\": \"float\", \"shape\": [2]},"
	" \"tok\": {\"kind\": \"int64\", \"shape\": [-1], \"ragged\": true},"
	" \"w\": {\"kind\": \"bytes\", \"shape\": [-1, -1], \"ragged\": true},"
	" \"p\": {\"kind\": \"int64\", \"shape\": [-1], \"max_len\": 6}}}";

static void ignore_corrupt(void *ctx, const char *msg, bool skipped)
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

/* ------------------------------------------------------- shuffle=block */

START_TEST(block_cut_follows_sizes_and_shards)
{
	/* block_size 100: records of 20+16, 30+16 fit (82), 10+16 does not
	 * (108); 200+16 is alone (bigger than a block); a shard starts one */
	const uint32_t lens[] = { 20, 30, 10, 200, 5, 5, 60, 1 };
	const uint64_t shards[] = { 6, 0, 2 };
	const uint64_t want[] = { 0, 2, 3, 4, 6 };
	struct bfs_blocks *bl;

	ck_assert_int_eq(bfs_blocks_from_lens(&bl, lens, 8, shards, 3, 100, 2, 0), 0);
	ck_assert_uint_eq(bfs_blocks_count(bl), 5);
	for (uint64_t k = 0; k < 5; k++)
		ck_assert_uint_eq(bfs_blocks_start(bl, k), want[k]);
	ck_assert_uint_eq(bfs_blocks_start(bl, 5), 8);
	bfs_blocks_free(bl);
	ck_assert_int_eq(bfs_blocks_from_lens(&bl, lens, 8, shards, 3, 0, 2, 0), -EINVAL);
	ck_assert_int_eq(bfs_blocks_from_lens(&bl, lens, 8, shards, 3, 100, 0, 0), -EINVAL);
}
END_TEST

/* n records of pseudo-random lengths in `nsh` shards. */
static struct bfs_blocks *make_blocks(uint64_t n, size_t nsh, uint64_t block_size, uint64_t window,
				      uint64_t seed)
{
	uint32_t *lens = malloc((n ? n : 1) * sizeof(*lens));
	uint64_t sh[8] = { 0 };
	struct bfs_blocks *bl = NULL;

	for (uint64_t i = 0; i < n; i++) {
		lens[i] = (uint32_t)(bfs_mix64(i * 31 + seed) % 300);
		sh[bfs_mix64(i + 7) % nsh]++;
	}
	ck_assert_int_eq(bfs_blocks_from_lens(&bl, lens, n, sh, nsh, block_size, window, seed), 0);
	free(lens);
	return bl;
}

START_TEST(block_order_is_a_permutation)
{
	const uint64_t ns[] = { 0, 1, 2, 3, 17, 100, 1000, 4099 };
	const uint64_t bsz[] = { 1, 64, 500, 4096, 1u << 30 };
	const uint64_t win[] = { 1, 2, 3, 64 };

	for (size_t a = 0; a < BFS_ARRAY_SIZE(ns); a++)
		for (size_t c = 0; c < BFS_ARRAY_SIZE(bsz); c++)
			for (size_t d = 0; d < BFS_ARRAY_SIZE(win); d++) {
				uint64_t n = ns[a], seed = a * 13 + c, epoch = d;
				struct bfs_blocks *bl =
					make_blocks(n, 1 + (a + c) % 5, bsz[c], win[d], seed);
				struct bfs_block_order *o;
				uint8_t *seen = calloc(n ? n : 1, 1);
				uint64_t *pos = malloc((n ? n : 1) * sizeof(*pos));
				uint64_t *many = malloc((n ? n : 1) * sizeof(*many));

				ck_assert_int_eq(bfs_block_order_get(&o, bl, epoch), 0);
				for (uint64_t i = 0; i < n; i++) {
					uint64_t r = bfs_block_order_apply(o, i);
					ck_assert_uint_lt(r, n);
					ck_assert_int_eq(seen[r], 0);
					seen[r] = 1;
					/* positions in a scrambled order, in place */
					pos[i] = (i * 7919) % n;
				}
				if (n % 7919 != 0 || n < 2) {
					memcpy(many, pos, n * sizeof(*many));
					bfs_block_order_apply_many(o, many, n, many);
					for (uint64_t i = 0; i < n; i++)
						ck_assert_uint_eq(many[i],
								  bfs_block_order_apply(o, pos[i]));
				}
				bfs_block_order_put(o);
				bfs_blocks_free(bl);
				free(seen);
				free(pos);
				free(many);
			}
}
END_TEST

START_TEST(block_order_keeps_records_within_a_window)
{
	/* one shard of equal records, 4 to a block: group g (W blocks) is
	 * positions [g*4W, (g+1)*4W) and holds exactly W whole blocks */
	enum { N = 4000, K = 4, W = 5 };
	uint32_t *lens = malloc(N * sizeof(*lens));
	uint64_t sh[1] = { N };
	struct bfs_blocks *bl;
	struct bfs_block_order *o;
	uint64_t moved = 0;

	for (int i = 0; i < N; i++)
		lens[i] = 84; /* 100 bytes framed */
	ck_assert_int_eq(bfs_blocks_from_lens(&bl, lens, N, sh, 1, K * 100, W, 3), 0);
	ck_assert_uint_eq(bfs_blocks_count(bl), N / K);
	ck_assert_int_eq(bfs_block_order_get(&o, bl, 1), 0);
	for (uint64_t g = 0; g < N / (K * W); g++) {
		uint64_t blocks[W], nblk = 0, cnt[W] = { 0 };
		for (uint64_t p = g * K * W; p < (g + 1) * K * W; p++) {
			uint64_t blk = bfs_block_order_apply(o, p) / K, i;
			for (i = 0; i < nblk && blocks[i] != blk; i++)
				;
			ck_assert_uint_lt(i, W); /* at most W distinct blocks */
			if (i == nblk)
				blocks[nblk++] = blk;
			cnt[i]++;
			moved += bfs_block_order_apply(o, p) != p;
		}
		for (uint64_t i = 0; i < W; i++)
			ck_assert_uint_eq(cnt[i], K); /* whole blocks */
	}
	ck_assert_uint_gt(moved, N * 9 / 10); /* and it does shuffle */
	bfs_block_order_put(o);
	bfs_blocks_free(bl);
	free(lens);
}
END_TEST

START_TEST(block_order_depends_on_seed_and_epoch_only)
{
	enum { N = 5000 };
	struct bfs_blocks *a = make_blocks(N, 3, 2000, 4, 1), *b = make_blocks(N, 3, 2000, 4, 1);
	struct bfs_block_order *held[12], *o1, *o2;
	uint64_t same_epoch = 0;

	/* many epochs at once (more than the cache keeps): each stays valid */
	for (int e = 0; e < 12; e++)
		ck_assert_int_eq(bfs_block_order_get(&held[e], a, (uint64_t)e), 0);
	ck_assert_int_eq(bfs_block_order_get(&o1, b, 0), 0);
	for (uint64_t i = 0; i < N; i++) {
		ck_assert_uint_eq(bfs_block_order_apply(held[0], i), bfs_block_order_apply(o1, i));
		same_epoch +=
			bfs_block_order_apply(held[0], i) == bfs_block_order_apply(held[1], i);
	}
	ck_assert_uint_lt(same_epoch, N / 20);
	bfs_block_order_put(o1);
	bfs_blocks_free(b);
	/* another seed, same lengths: another order */
	b = make_blocks(N, 3, 2000, 4, 2);
	ck_assert_int_eq(bfs_block_order_get(&o2, b, 0), 0);
	same_epoch = 0;
	for (uint64_t i = 0; i < N; i++)
		same_epoch += bfs_block_order_apply(held[0], i) == bfs_block_order_apply(o2, i);
	ck_assert_uint_lt(same_epoch, N / 20);
	bfs_block_order_put(o2);
	bfs_blocks_free(b);
	for (int e = 0; e < 12; e++)
		bfs_block_order_put(held[e]);
	bfs_blocks_free(a);
}
END_TEST

/* ------------------------------------------------- ragged counts cache */

static const uint32_t cnt_col0[5] = { 0, 3, 1, 4000000000u, 7 };
static const uint32_t cnt_col1[5] = { 9, 0, 2, 6, 5 };

static struct bfs_counts_key cnt_key(void)
{
	struct bfs_counts_key k = { .path = "/data/part-0.tfrecord",
				    .comp = 0,
				    .file_size = 12345,
				    .mtime_ns = 1700000000123456789,
				    .nrecords = 5,
				    .nslots = 2,
				    .desc = "v int64 3 tok\nb bytes 1 w\n",
				    .desclen = 26 };
	return k;
}

/* Load path for k into fresh columns; *why gets the reason. */
static enum bfs_counts_result cnt_load(const char *path, const struct bfs_counts_key *k,
				       uint32_t c0[5], uint32_t c1[5], char *why)
{
	uint32_t *cols[2] = { c0, c1 };

	memset(c0, 0xee, 5 * 4);
	memset(c1, 0xee, 5 * 4);
	why[0] = '\0';
	return bfs_counts_load(path, k, cols, why, 256);
}

START_TEST(counts_file_round_trip_stale_corrupt_old)
{
	char dir[] = "/tmp/check_counts_XXXXXX", path[128], why[256];
	const uint32_t *cols[2] = { cnt_col0, cnt_col1 };
	struct bfs_counts_key k = cnt_key(), k2;
	uint32_t c0[5], c1[5], *ccols[2] = { c0, c1 };
	uint8_t *orig, *mut;
	size_t len;

	ck_assert(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/x.cnt", dir);
	ck_assert_int_eq(cnt_load(path, &k, c0, c1, why), BFS_COUNTS_ABSENT);
	ck_assert_int_eq(bfs_counts_save(path, &k, cols), 0);
	ck_assert_int_eq(cnt_load(path, &k, c0, c1, why), BFS_COUNTS_LOADED);
	ck_assert(memcmp(c0, cnt_col0, sizeof(c0)) == 0 && memcmp(c1, cnt_col1, sizeof(c1)) == 0);
	orig = test_slurp(path, &len);
	/* 64-byte header, path (21) and description (26) padded to 112, 2 x 5 x 4 */
	ck_assert_uint_eq(len, 112 + 40);
	ck_assert_int_eq(bfs_counts_from_bytes(orig, len, &k, ccols, why, sizeof(why)),
			 BFS_COUNTS_LOADED);

	/* stale: anything of the key differs */
	for (int f = 0; f < 7; f++) {
		k2 = k;
		if (f == 0)
			k2.mtime_ns++;
		if (f == 1)
			k2.file_size++;
		if (f == 2)
			k2.comp = 1;
		if (f == 3)
			k2.nrecords = 4; /* the columns are large enough for 5 */
		if (f == 4)
			k2.desc = "v int64 3 tok\nb bytes 1 x\n"; /* same length */
		if (f == 5)
			k2.path = "/data/part-1.tfrecord";
		if (f == 6)
			k2.nslots = 1;
		ck_assert_msg(cnt_load(path, &k2, c0, c1, why) == BFS_COUNTS_STALE, "field %d", f);
		ck_assert(strstr(why, "another") != NULL);
	}

	/* every single flipped byte: never LOADED (header, path, padding, counts) */
	mut = malloc(len);
	for (size_t i = 0; i < len; i++) {
		enum bfs_counts_result r;

		memcpy(mut, orig, len);
		mut[i] ^= 0x20;
		test_spit(path, mut, len);
		r = cnt_load(path, &k, c0, c1, why);
		ck_assert_msg(r == BFS_COUNTS_BAD || r == BFS_COUNTS_STALE, "byte %zu: %d", i, r);
		if (i >= 64)
			ck_assert_msg(strstr(why, "corrupt (checksum mismatch)") != NULL, "%zu: %s",
				      i, why);
		else if (i >= 8)
			ck_assert_msg(strstr(why, "corrupt header") != NULL, "%zu: %s", i, why);
	}
	/* truncated anywhere, or one byte more */
	for (size_t n = 0; n < len; n++) {
		test_spit(path, orig, n);
		ck_assert_msg(cnt_load(path, &k, c0, c1, why) == BFS_COUNTS_BAD, "length %zu", n);
		ck_assert_msg(n < 8 || strstr(why, "truncated") || strstr(why, "not a batchfs"),
			      "%zu: %s", n, why);
	}
	memcpy(mut, orig, len);
	test_spit(path, mut, len);
	{
		FILE *f = fopen(path, "ab");
		ck_assert(f && fputc(0, f) == 0 && fclose(f) == 0);
	}
	ck_assert_int_eq(cnt_load(path, &k, c0, c1, why), BFS_COUNTS_BAD);
	ck_assert(strstr(why, "wrong size") != NULL);

	/* another version of the format, even with good CRCs, is not read */
	memcpy(mut, orig, len);
	memcpy(mut, "BFSCNT00", 8);
	{
		uint32_t crc = bfs_crc32c(0, mut, 60);
		memcpy(mut + 60, &crc, 4);
	}
	test_spit(path, mut, len);
	ck_assert_int_eq(cnt_load(path, &k, c0, c1, why), BFS_COUNTS_BAD);
	ck_assert_msg(strstr(why, "old counts format BFSCNT00") != NULL, "%s", why);
	memcpy(mut, "BFSIDX03", 8);
	ck_assert_int_eq(bfs_counts_from_bytes(mut, len, &k, ccols, why, sizeof(why)),
			 BFS_COUNTS_BAD);
	ck_assert(strstr(why, "not a batchfs counts file") != NULL);
	free(mut);
	free(orig);
	unlink(path);
	rmdir(dir);
}
END_TEST

/* The file bfs_counts_save writes is, byte for byte, the image a pack
 * entry holds, for any number of slots (more than IOV_MAX among them), and
 * the one of cnt_key is the very bytes the writer of the first version
 * wrote (their FNV-1a, taken from that writer): files already in
 * index_dirs keep loading. */
START_TEST(counts_file_is_its_image_for_any_slot_count)
{
	static const uint32_t nslots[] = { 0, 1, 3, 1500 };
	static const uint64_t nrecs[] = { 0, 3, 1000 };
	char dir[] = "/tmp/check_counts_XXXXXX", path[128], why[256];
	const uint32_t *cols2[2] = { cnt_col0, cnt_col1 };
	struct bfs_counts_key k = cnt_key();
	uint8_t *file, *img;
	size_t flen, ilen;

	ck_assert(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/x.cnt.idx", dir);
	ck_assert_int_eq(bfs_counts_save(path, &k, cols2), 0);
	file = test_slurp(path, &flen);
	ck_assert_uint_eq(flen, 152);
	/* not a CRC-32C of the whole file: it is the same for any header whose
	 * own CRC is right */
	ck_assert_uint_eq(bfs_fnv1a(0xcbf29ce484222325ull, file, flen), 0x5acc357a0f760763ull);
	free(file);
	for (size_t a = 0; a < BFS_ARRAY_SIZE(nslots); a++) {
		for (size_t b = 0; b < BFS_ARRAY_SIZE(nrecs); b++) {
			uint32_t **cols = calloc(nslots[a] + 1, sizeof(*cols));
			uint32_t **got = calloc(nslots[a] + 1, sizeof(*got));

			k.nslots = nslots[a];
			k.nrecords = nrecs[b];
			for (uint32_t s = 0; s < nslots[a]; s++) {
				cols[s] = malloc(nrecs[b] * 4 + 1);
				got[s] = malloc(nrecs[b] * 4 + 1);
				for (uint64_t r = 0; r < nrecs[b]; r++)
					cols[s][r] = (uint32_t)(s * 100003u + r * 7u);
			}
			ck_assert_int_eq(bfs_counts_save(path, &k, (const uint32_t *const *)cols),
					 0);
			ck_assert_int_eq(
				bfs_counts_image(&k, (const uint32_t *const *)cols, &img, &ilen),
				0);
			file = test_slurp(path, &flen);
			ck_assert_uint_eq(flen, ilen);
			ck_assert_uint_eq(flen, bfs_counts_file_bytes(&k));
			ck_assert_msg(memcmp(file, img, flen) == 0, "%u slots, %llu records",
				      nslots[a], (unsigned long long)nrecs[b]);
			ck_assert_msg(bfs_counts_load(path, &k, got, why, sizeof(why)) ==
					      BFS_COUNTS_LOADED,
				      "%s", why);
			for (uint32_t s = 0; s < nslots[a]; s++) {
				ck_assert(memcmp(got[s], cols[s], nrecs[b] * 4) == 0);
				free(cols[s]);
				free(got[s]);
			}
			free(cols);
			free(got);
			free(file);
			free(img);
		}
	}
	unlink(path);
	rmdir(dir);
}
END_TEST

START_TEST(counts_desc_names_slots)
{
	struct bfs_schema *sc = NULL, *sc2 = NULL;
	struct bfs_plan *p = NULL, *p2 = NULL;
	char *d = NULL, *d2 = NULL;
	size_t n = 0, n2 = 0;
	const char *other = "{\"features\": {\"tok\": {\"kind\": \"int64\", \"shape\": [-1],"
			    " \"ragged\": true}}}";

	ck_assert_int_eq(bfs_schema_from_json(&sc, parts_schema, strlen(parts_schema)), 0);
	ck_assert_int_eq(bfs_plan_new(&p, sc), 0);
	ck_assert_int_eq(bfs_counts_desc(p, &d, &n), 0);
	ck_assert_uint_eq(p->nslots, 3);
	ck_assert_str_eq(d, "v int64 3 tok\nv bytes 1 w\nb bytes 1 w\n");
	ck_assert_uint_eq(n, strlen(d));
	ck_assert_int_eq(bfs_schema_from_json(&sc2, other, strlen(other)), 0);
	ck_assert_int_eq(bfs_plan_new(&p2, sc2), 0);
	ck_assert_int_eq(bfs_counts_desc(p2, &d2, &n2), 0);
	ck_assert_str_eq(d2, "v int64 3 tok\n");
	free(d);
	free(d2);
	bfs_plan_free(p);
	bfs_plan_free(p2);
	bfs_schema_free(sc);
	bfs_schema_free(sc2);
}
END_TEST

struct notes {
	int n;
	char last[1024];
};

static void on_note(void *ctx, const char *shard, const char *msg)
{
	struct notes *nt = ctx;

	nt->n++;
	snprintf(nt->last, sizeof(nt->last), "%s: %s", shard ? shard : "-", msg);
}

/* Every batch's file size (ragged sizes come from the counts), summed with
 * weights so that two batches trading sizes still differ. */
static uint64_t geom_sig_ds(const char *shard, const char *ds_index_dir, const char *index_dir,
			    const char *schema_json, struct notes *nt)
{
	struct bfs_dataset_opts dopt = { .comp = BFS_COMP_AUTO, .index_dir = ds_index_dir };
	struct bfs_batcher_opts bopt = { .batch_size = 7,
					 .seed = 2,
					 .shuffle = true,
					 .world = 1,
					 .jobs = 2,
					 .index_dir = index_dir,
					 .on_note = on_note,
					 .note_ctx = nt };
	struct bfs_dataset *ds = NULL;
	struct bfs_schema *sc = NULL;
	struct bfs_batcher *b = NULL;
	uint64_t sig = 0;

	ck_assert_int_eq(bfs_dataset_open(&ds, shard, &dopt), 0);
	ck_assert_int_eq(bfs_schema_from_json(&sc, schema_json, strlen(schema_json)), 0);
	ck_assert_int_eq(bfs_batcher_new(&b, ds, sc, &bopt), 0);
	for (uint64_t i = 0; i < bfs_batcher_nbatches(b); i++) {
		struct bfs_geom *g = NULL;
		ck_assert_int_eq(bfs_batcher_geom(&g, b, 0, i), 0);
		sig += (i + 1) * g->st_size;
		bfs_geom_free(g);
	}
	bfs_batcher_free(b);
	bfs_schema_free(sc);
	bfs_dataset_close(ds);
	return sig;
}

static uint64_t geom_sig(const char *shard, const char *index_dir, const char *schema_json,
			 struct notes *nt)
{
	return geom_sig_ds(shard, index_dir, index_dir, schema_json, nt);
}

static size_t count_files(const char *dir, const char *suffix, char *name, size_t cap)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	size_t n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d)) != NULL) {
		size_t l = strlen(de->d_name);
		if (l > strlen(suffix) && strcmp(de->d_name + l - strlen(suffix), suffix) == 0) {
			n++;
			if (name)
				snprintf(name, cap, "%s/%s", dir, de->d_name);
		}
	}
	closedir(d);
	return n;
}

START_TEST(batcher_reads_cached_counts_without_decoding)
{
	char dir[] = "/tmp/check_counts_ds_XXXXXX", shard[128], ix[128], cnt[512], bad[160];
	const char *one = "{\"features\": {\"tok\": {\"kind\": \"int64\", \"shape\": [-1],"
			  " \"ragged\": true}}}";
	const char *wonly = "{\"features\": {\"w\": {\"kind\": \"bytes\", \"shape\": [-1, -1],"
			    " \"ragged\": true}}}";
	struct notes nt = { 0 };
	struct stat st, st2;
	struct timespec ts[2];
	uint64_t want, got;
	uint8_t *buf;
	size_t len;

	ck_assert(mkdtemp(dir) != NULL);
	snprintf(shard, sizeof(shard), "%s/part-0.tfrecord", dir);
	snprintf(ix, sizeof(ix), "%s/ix", dir);
	write_dataset(shard, -1);
	/* without a cache: the reference */
	want = geom_sig(shard, NULL, parts_schema, &nt);
	ck_assert_int_eq(nt.n, 0);
	/* the first batcher writes the file, the same geometry */
	ck_assert_uint_eq(geom_sig(shard, ix, parts_schema, &nt), want);
	ck_assert_int_eq(nt.n, 0);
	ck_assert_uint_eq(count_files(ix, ".cntpack.idx", cnt, sizeof(cnt)), 1);
	ck_assert_int_eq(stat(cnt, &st), 0);
	/* a schema counting something else has a file of its own */
	got = geom_sig(shard, ix, one, &nt);
	ck_assert_uint_eq(count_files(ix, ".cntpack.idx", NULL, 0), 2);
	ck_assert_int_eq(nt.n, 0);
	/* a dataset opened without index_dir (its shards' paths not resolved
	 * at open) under a batcher with one: the same file, read */
	ck_assert_uint_eq(geom_sig_ds(shard, NULL, ix, parts_schema, &nt), want);
	ck_assert_uint_eq(count_files(ix, ".cntpack.idx", NULL, 0), 2);
	ck_assert_int_eq(nt.n, 0);

	/* the shard's records made undecodable, its size and mtime kept: the
	 * index and the counts come from the cache, nothing is decoded, and the
	 * geometry stays (a count pass would count 0 everywhere) */
	ck_assert_int_eq(stat(shard, &st2), 0);
	buf = test_slurp(shard, &len);
	ck_assert(len < (1 << 16));
	for (size_t i = 12; i < len; i++)
		buf[i] = 0xff;
	test_spit(shard, buf, len);
	free(buf);
	ts[0] = st2.st_atim;
	ts[1] = st2.st_mtim;
	ck_assert_int_eq(utimensat(AT_FDCWD, shard, ts, 0), 0);
	ck_assert_uint_eq(geom_sig(shard, ix, parts_schema, &nt), want);
	ck_assert_int_eq(nt.n, 0);
	ck_assert_int_eq(stat(cnt, &st2), 0);
	ck_assert(st2.st_ino == st.st_ino); /* not rewritten */
	/* the schema counting something else kept its own file too */
	ck_assert_uint_eq(geom_sig(shard, ix, one, &nt), got);
	ck_assert_int_eq(nt.n, 0);
	/* a count pass over records that do not decode caches nothing */
	(void)geom_sig(shard, ix, wonly, &nt);
	ck_assert_uint_eq(count_files(ix, ".cntpack.idx", NULL, 0), 2);

	/* a corrupt file: one note naming it, rebuilt (from the shard as it is
	 * now, so the geometry follows the broken records) */
	write_dataset(shard, -1);
	nt.n = 0;
	/* a new mtime: the entry stale, counted again (silently, like a stale
	 * index entry) and the pack rewritten */
	ck_assert_int_eq(stat(cnt, &st), 0);
	ck_assert_uint_eq(geom_sig(shard, ix, parts_schema, &nt), want);
	ck_assert_int_eq(nt.n, 0);
	ck_assert_int_eq(stat(cnt, &st2), 0);
	ck_assert(st2.st_ino != st.st_ino);
	nt.n = 0;
	ck_assert_uint_eq(geom_sig(shard, ix, parts_schema, &nt), want);
	ck_assert_int_eq(nt.n, 0);
	ck_assert_uint_eq(count_files(ix, ".cntpack.idx", NULL, 0), 2);
	buf = test_slurp(cnt, &len); /* the same name: path and schema unchanged */
	buf[len - 3] ^= 1;
	test_spit(cnt, buf, len);
	free(buf);
	ck_assert_uint_eq(geom_sig(shard, ix, parts_schema, &nt), want);
	ck_assert_int_eq(nt.n, 1);
	ck_assert_msg(strstr(nt.last, cnt) && strstr(nt.last, "corrupt (checksum mismatch)"), "%s",
		      nt.last);
	nt.n = 0;
	ck_assert_uint_eq(geom_sig(shard, ix, parts_schema, &nt), want);
	ck_assert_int_eq(nt.n, 0);

	/* a directory that cannot be made: one note, the same geometry */
	snprintf(bad, sizeof(bad), "%s/sub", shard); /* under a regular file */
	ck_assert_uint_eq(geom_sig(shard, bad, parts_schema, &nt), want);
	ck_assert_int_eq(nt.n, 1);
	ck_assert_msg(strstr(nt.last, "cannot write ragged counts"), "%s", nt.last);

	/* clean up */
	{
		char cmd[256];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		ck_assert_int_eq(system(cmd), 0);
	}
}
END_TEST

/* ------------------------------------- many shards: the counts pack */

/* The shards of the pack tests, in SRC: five small ones (their counts
 * under one page: entries of their directory's pack) of 100 records
 * each, and one of 700 (a counts file of its own, with parts_schema). */
#define NPK_SMALL 5
static const char *const PK_NAMES[NPK_SMALL + 1] = { "a-0", "a-1", "a-2", "b-0", "b-1", "c-big" };

static void pk_path(char *dst, size_t cap, const char *src, unsigned k)
{
	snprintf(dst, cap, "%s/%s", src, PK_NAMES[k]);
}

static void pk_write(const char *src, unsigned k, long first)
{
	char path[256];

	pk_path(path, sizeof(path), src, k);
	write_records(path, -1, first, k < NPK_SMALL ? 100 : 700);
}

/* Files in ix: counts packs (the last one's path in pack) and counts files
 * of their own; no temporary file is left. */
static void cnt_files(const char *ix, unsigned *packs, unsigned *own, char *pack, size_t cap)
{
	DIR *d = opendir(ix);
	struct dirent *de;

	ck_assert_ptr_nonnull(d);
	*packs = *own = 0;
	while ((de = readdir(d)) != NULL) {
		size_t n = strlen(de->d_name);

		ck_assert_msg(strstr(de->d_name, ".tmp") == NULL, "%s", de->d_name);
		if (n > 12 && strcmp(de->d_name + n - 12, ".cntpack.idx") == 0) {
			(*packs)++;
			if (pack)
				snprintf(pack, cap, "%s/%s", ix, de->d_name);
		} else if (n > 8 && strcmp(de->d_name + n - 8, ".cnt.idx") == 0) {
			(*own)++;
		}
	}
	closedir(d);
}

/* Every shard's records made undecodable in place, size and mtime kept
 * (saved[k] gets its bytes), or put back (restore). */
static void pk_garble(const char *src, uint8_t **saved, size_t *lens, bool restore)
{
	for (unsigned k = 0; k <= NPK_SMALL; k++) {
		char path[256];
		struct stat st;
		struct timespec ts[2];
		uint8_t *buf;

		pk_path(path, sizeof(path), src, k);
		ck_assert_int_eq(stat(path, &st), 0);
		if (restore) {
			test_spit(path, saved[k], lens[k]);
			free(saved[k]);
		} else {
			saved[k] = test_slurp(path, &lens[k]);
			buf = malloc(lens[k]);
			memcpy(buf, saved[k], lens[k]);
			for (size_t i = 12; i < lens[k]; i++)
				buf[i] = 0xff;
			test_spit(path, buf, lens[k]);
			free(buf);
		}
		ts[0] = st.st_atim;
		ts[1] = st.st_mtim;
		ck_assert_int_eq(utimensat(AT_FDCWD, path, ts, 0), 0);
	}
}

START_TEST(counts_of_small_shards_share_one_pack_per_directory)
{
	char dir[] = "/tmp/check_cntpack_XXXXXX", src[128], ix[128], pack[512], pack1[512];
	const char *one = "{\"features\": {\"tok\": {\"kind\": \"int64\", \"shape\": [-1],"
			  " \"ragged\": true}}}";
	struct notes nt = { 0 };
	uint8_t *saved[NPK_SMALL + 1], *buf;
	size_t lens[NPK_SMALL + 1], n;
	unsigned np, no;
	uint64_t want, want1, off, elen;
	ino_t ino;

	ck_assert(mkdtemp(dir) != NULL);
	snprintf(src, sizeof(src), "%s/src", dir);
	snprintf(ix, sizeof(ix), "%s/ix", dir);
	ck_assert_int_eq(mkdir(src, 0755), 0);
	for (unsigned k = 0; k <= NPK_SMALL; k++)
		pk_write(src, k, 100 * (long)k);
	want = geom_sig(src, NULL, parts_schema, &nt);

	/* the first batcher: one pack for the five small shards, one file for
	 * the big one */
	ck_assert_uint_eq(geom_sig(src, ix, parts_schema, &nt), want);
	ck_assert_int_eq(nt.n, 0);
	cnt_files(ix, &np, &no, pack, sizeof(pack));
	ck_assert_uint_eq(np, 1);
	ck_assert_uint_eq(no, 1);
	ck_assert_uint_eq(test_pack_entries(pack), NPK_SMALL);
	ino = test_ino(pack);

	/* read back: every shard undecodable (size and mtime kept), the same
	 * geometry (a count pass would count 0 everywhere), nothing rewritten */
	pk_garble(src, saved, lens, false);
	ck_assert_uint_eq(geom_sig(src, ix, parts_schema, &nt), want);
	ck_assert_int_eq(nt.n, 0);
	ck_assert_uint_eq(test_ino(pack), ino);
	pk_garble(src, saved, lens, true);

	/* a flipped byte in the middle of the first entry: one note naming the
	 * pack, that shard counted again, the pack rewritten whole */
	buf = test_slurp(pack, &n);
	memcpy(&off, buf + 64 + 8, 8);
	memcpy(&elen, buf + 64 + 16, 8);
	buf[off + elen / 2] ^= 1;
	test_spit(pack, buf, n);
	free(buf);
	ck_assert_uint_eq(geom_sig(src, ix, parts_schema, &nt), want);
	ck_assert_int_eq(nt.n, 1);
	ck_assert_msg(strstr(nt.last, "ragged counts pack") && strstr(nt.last, pack) &&
			      strstr(nt.last, "corrupt (checksum mismatch); rebuilding it"),
		      "%s", nt.last);
	ck_assert_uint_ne(test_ino(pack), ino);
	ck_assert_uint_eq(test_pack_entries(pack), NPK_SMALL);
	ino = test_ino(pack);
	ck_assert_uint_eq(geom_sig(src, ix, parts_schema, &nt), want);
	ck_assert_int_eq(nt.n, 1);
	ck_assert_uint_eq(test_ino(pack), ino);

	/* a corrupt header: one note, the whole pack rebuilt */
	buf = test_slurp(pack, &n);
	buf[20] ^= 1;
	test_spit(pack, buf, n);
	free(buf);
	ck_assert_uint_eq(geom_sig(src, ix, parts_schema, &nt), want);
	ck_assert_int_eq(nt.n, 2);
	ck_assert_msg(strstr(nt.last, pack) && strstr(nt.last, "corrupt header"), "%s", nt.last);
	ck_assert_uint_eq(test_pack_entries(pack), NPK_SMALL);
	ino = test_ino(pack);

	/* a schema counting other slots: a pack of its own (the big shard's
	 * one slot fits in it too), the first pack untouched */
	want1 = geom_sig(src, NULL, one, &nt);
	ck_assert_uint_eq(geom_sig(src, ix, one, &nt), want1);
	cnt_files(ix, &np, &no, NULL, 0);
	ck_assert_uint_eq(np, 2);
	ck_assert_uint_eq(no, 1);
	ck_assert_uint_eq(test_ino(pack), ino);
	ck_assert_uint_eq(geom_sig(src, ix, parts_schema, &nt), want);
	ck_assert_uint_eq(geom_sig(src, ix, one, &nt), want1);
	ck_assert_uint_eq(test_ino(pack), ino);
	ck_assert_int_eq(nt.n, 2);

	/* a small shard rewritten with other records: counted again, silently
	 * (a stale entry), the pack rewritten, the geometry the new one */
	pk_write(src, 4, 5000);
	want = geom_sig(src, NULL, parts_schema, &nt);
	ck_assert_uint_eq(geom_sig(src, ix, parts_schema, &nt), want);
	ck_assert_uint_ne(test_ino(pack), ino);
	ck_assert_uint_eq(test_pack_entries(pack), NPK_SMALL);
	pk_garble(src, saved, lens, false);
	ck_assert_uint_eq(geom_sig(src, ix, parts_schema, &nt), want);
	pk_garble(src, saved, lens, true);
	ck_assert_int_eq(nt.n, 2);

	snprintf(pack1, sizeof(pack1), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(pack1), 0);
}
END_TEST

START_TEST(datasets_sharing_a_directory_keep_each_others_counts)
{
	char dir[] = "/tmp/check_cntpack_XXXXXX", src[128], ix[128], pack[512], ga[160], gb[160];
	struct notes nt = { 0 };
	uint64_t wa, wb;
	unsigned np, no;
	ino_t ino;

	ck_assert(mkdtemp(dir) != NULL);
	snprintf(src, sizeof(src), "%s/src", dir);
	snprintf(ix, sizeof(ix), "%s/ix", dir);
	snprintf(ga, sizeof(ga), "%s/a-*", src);
	snprintf(gb, sizeof(gb), "%s/b-*", src);
	ck_assert_int_eq(mkdir(src, 0755), 0);
	for (unsigned k = 0; k <= NPK_SMALL; k++)
		pk_write(src, k, 100 * (long)k);
	wa = geom_sig(ga, NULL, parts_schema, &nt);
	wb = geom_sig(gb, NULL, parts_schema, &nt);
	ck_assert_uint_eq(geom_sig(ga, ix, parts_schema, &nt), wa);
	cnt_files(ix, &np, &no, pack, sizeof(pack));
	ck_assert_uint_eq(np, 1);
	ck_assert_uint_eq(no, 0);
	ck_assert_uint_eq(test_pack_entries(pack), 3);
	/* the other glob: added to the same pack, the first one's kept */
	ck_assert_uint_eq(geom_sig(gb, ix, parts_schema, &nt), wb);
	ck_assert_uint_eq(test_pack_entries(pack), 5);
	ino = test_ino(pack);
	ck_assert_uint_eq(geom_sig(ga, ix, parts_schema, &nt), wa);
	ck_assert_uint_eq(geom_sig(gb, ix, parts_schema, &nt), wb);
	ck_assert_uint_eq(test_ino(pack), ino);
	/* a shard of each changed: when b's mount rewrites the pack, a's stale
	 * entry is dropped and its other two kept */
	pk_write(src, 1, 7000);
	pk_write(src, 3, 8000);
	wa = geom_sig(ga, NULL, parts_schema, &nt);
	wb = geom_sig(gb, NULL, parts_schema, &nt);
	ck_assert_uint_eq(geom_sig(gb, ix, parts_schema, &nt), wb);
	ck_assert_uint_eq(test_pack_entries(pack), 4);
	ck_assert_uint_eq(geom_sig(ga, ix, parts_schema, &nt), wa);
	ck_assert_uint_eq(test_pack_entries(pack), 5);
	ino = test_ino(pack);
	ck_assert_uint_eq(geom_sig(gb, ix, parts_schema, &nt), wb);
	ck_assert_uint_eq(geom_sig(ga, ix, parts_schema, &nt), wa);
	ck_assert_uint_eq(test_ino(pack), ino);
	ck_assert_int_eq(nt.n, 0);
	snprintf(pack, sizeof(pack), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(pack), 0);
}
END_TEST

/* Open src with index_dir ixd: its shard and record counts. */
static void open_counts(const char *src, const char *ixd, size_t *nshards, uint64_t *nrecords)
{
	struct bfs_dataset_opts o = { .comp = BFS_COMP_AUTO, .index_dir = ixd };
	struct bfs_dataset *ds = NULL;

	ck_assert_msg(bfs_dataset_open(&ds, src, &o) == 0, "%s", bfs_err_msg());
	*nshards = bfs_dataset_nshards(ds);
	*nrecords = bfs_dataset_nrecords(ds);
	bfs_dataset_close(ds);
}

/* Every file in src is one of the shards or a name a directory SOURCE
 * passes over. */
static void only_shards_or_passed_over(const char *src)
{
	DIR *d = opendir(src);
	struct dirent *de;

	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)) != NULL) {
		bool shard = false;

		if (de->d_name[0] == '.')
			continue;
		for (unsigned k = 0; k <= NPK_SMALL; k++)
			shard = shard || strcmp(de->d_name, PK_NAMES[k]) == 0;
		ck_assert_msg(shard || bfs_source_not_shard(de->d_name), "%s", de->d_name);
	}
	closedir(d);
}

/* index_dir set to the SOURCE directory itself: every file the index and
 * the ragged counts put there (packs, and the big shard's own index and
 * counts files) is passed over as a shard, so each open lists the same
 * six shards and records, and the counts are read back. */
START_TEST(cache_files_in_the_source_directory_are_not_shards)
{
	char dir[] = "/tmp/check_cntpack_XXXXXX", src[128], cmd[160];
	struct notes nt = { 0 };
	uint64_t want, nrec;
	size_t nsh;
	unsigned np, no;

	ck_assert(mkdtemp(dir) != NULL);
	snprintf(src, sizeof(src), "%s/src", dir);
	ck_assert_int_eq(mkdir(src, 0755), 0);
	for (unsigned k = 0; k <= NPK_SMALL; k++)
		pk_write(src, k, 100 * (long)k);
	want = geom_sig(src, NULL, parts_schema, &nt);
	for (int run = 0; run < 3; run++) {
		open_counts(src, src, &nsh, &nrec);
		ck_assert_uint_eq(nsh, NPK_SMALL + 1);
		ck_assert_uint_eq(nrec, 100 * NPK_SMALL + 700);
		ck_assert_uint_eq(geom_sig(src, src, parts_schema, &nt), want);
		only_shards_or_passed_over(src);
	}
	cnt_files(src, &np, &no, NULL, 0);
	ck_assert_uint_eq(np, 1);
	ck_assert_uint_eq(no, 1); /* the big shard's */
	ck_assert_int_eq(nt.n, 0);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* ix/<FNV-1a of shard k's real path>-<deshash><suffix>. */
static void pk_cache_file(char *dst, size_t cap, const char *ix, const char *src, unsigned k,
			  uint64_t deshash, const char *suffix)
{
	char path[256], real[PATH_MAX];

	pk_path(path, sizeof(path), src, k);
	ck_assert_ptr_nonnull(realpath(path, real));
	snprintf(dst, cap, "%s/%016llx-%016llx%s", ix,
		 (unsigned long long)bfs_fnv1a(0xcbf29ce484222325ull, real, strlen(real)),
		 (unsigned long long)deshash, suffix);
}

/* The hash of what parts_schema counts, in the counts files' names. */
static uint64_t parts_deshash(void)
{
	struct bfs_schema *sc = NULL;
	struct bfs_plan *p = NULL;
	char *desc = NULL;
	size_t len = 0;
	uint64_t h;

	ck_assert_int_eq(bfs_schema_from_json(&sc, parts_schema, strlen(parts_schema)), 0);
	ck_assert_int_eq(bfs_plan_new(&p, sc), 0);
	ck_assert_int_eq(bfs_counts_desc(p, &desc, &len), 0);
	h = bfs_fnv1a(0xcbf29ce484222325ull, desc, len);
	free(desc);
	bfs_plan_free(p);
	bfs_schema_free(sc);
	return h;
}

/* Counts files in ix under the retired name "<hash of the path>-<hash of
 * the slots>.cnt", one per shard, are never read (garbage in them is no
 * note), and go once the shard's counts are written: the small shards'
 * when their pack is, the big shard's when its .cnt.idx is. A file for
 * other slots stays. */
START_TEST(old_counts_file_names_are_passed_over_then_dropped)
{
	char dir[] = "/tmp/check_cntpack_XXXXXX", src[128], ix[128], f[600], other[600];
	struct notes nt = { 0 };
	uint64_t want, dh = parts_deshash();
	unsigned np, no;

	ck_assert(mkdtemp(dir) != NULL);
	snprintf(src, sizeof(src), "%s/src", dir);
	snprintf(ix, sizeof(ix), "%s/ix", dir);
	ck_assert_int_eq(mkdir(src, 0755), 0);
	ck_assert_int_eq(mkdir(ix, 0755), 0);
	for (unsigned k = 0; k <= NPK_SMALL; k++)
		pk_write(src, k, 100 * (long)k);
	want = geom_sig(src, NULL, parts_schema, &nt);
	for (unsigned k = 0; k <= NPK_SMALL; k++) {
		pk_cache_file(f, sizeof(f), ix, src, k, dh, ".cnt");
		test_spit(f, (const uint8_t *)"BFSCNT01 and then garbage", 25);
	}
	pk_cache_file(other, sizeof(other), ix, src, 0, dh ^ 1, ".cnt");
	test_spit(other, (const uint8_t *)"BFSCNT01", 8);

	ck_assert_uint_eq(geom_sig(src, ix, parts_schema, &nt), want);
	ck_assert_msg(nt.n == 0, "%s", nt.last);
	for (unsigned k = 0; k <= NPK_SMALL; k++) {
		pk_cache_file(f, sizeof(f), ix, src, k, dh, ".cnt");
		ck_assert_msg(access(f, F_OK) != 0, "%s", f);
	}
	ck_assert_int_eq(access(other, F_OK), 0);
	cnt_files(ix, &np, &no, NULL, 0);
	ck_assert_uint_eq(np, 1);
	ck_assert_uint_eq(no, 1);
	pk_cache_file(f, sizeof(f), ix, src, NPK_SMALL, dh, ".cnt.idx");
	ck_assert_int_eq(access(f, F_OK), 0);
	ck_assert_uint_eq(geom_sig(src, ix, parts_schema, &nt), want);
	ck_assert_int_eq(nt.n, 0);
	snprintf(f, sizeof(f), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(f), 0);
}
END_TEST

/* The cache's own calls: the counts of every small shard put, and nothing
 * written until the save, which writes their pack once; a new cache reads
 * every shard's counts back exactly. */
START_TEST(cntcache_writes_each_pack_once_at_save)
{
	char dir[] = "/tmp/check_cntpack_XXXXXX", src[128], ix[128], pack[512];
	struct bfs_dataset_opts dopt = { .comp = BFS_COMP_AUTO };
	struct bfs_dataset *ds = NULL;
	struct bfs_schema *sc = NULL;
	struct bfs_plan *p = NULL;
	struct bfs_cntcache *cc = NULL;
	struct notes nt = { 0 };
	uint32_t *cols[3], *got[3];
	unsigned np, no;

	ck_assert(mkdtemp(dir) != NULL);
	snprintf(src, sizeof(src), "%s/src", dir);
	snprintf(ix, sizeof(ix), "%s/ix", dir);
	ck_assert_int_eq(mkdir(src, 0755), 0);
	for (unsigned k = 0; k <= NPK_SMALL; k++)
		pk_write(src, k, 100 * (long)k);
	ck_assert_int_eq(bfs_dataset_open(&ds, src, &dopt), 0);
	ck_assert_int_eq(bfs_schema_from_json(&sc, parts_schema, strlen(parts_schema)), 0);
	ck_assert_int_eq(bfs_plan_new(&p, sc), 0);
	ck_assert_uint_eq(p->nslots, 3);
	for (unsigned s = 0; s < 3; s++) {
		cols[s] = malloc(700 * 4);
		got[s] = malloc(700 * 4);
	}
	ck_assert_int_eq(bfs_cntcache_new(&cc, ds, p, ix, on_note, &nt), 0);
	for (size_t i = 0; i < bfs_dataset_nshards(ds); i++) {
		for (unsigned s = 0; s < 3; s++)
			for (unsigned r = 0; r < 700; r++)
				cols[s][r] = (uint32_t)(i * 100000 + s * 1000 + r);
		ck_assert(!bfs_cntcache_load(cc, i, got));
		bfs_cntcache_put(cc, i, (const uint32_t *const *)cols);
		mkdir(ix, 0755); /* the big shard's file made it already */
		cnt_files(ix, &np, &no, NULL, 0);
		ck_assert_uint_eq(np, 0); /* not yet */
	}
	ck_assert_uint_eq(no, 1);
	bfs_cntcache_save(cc);
	bfs_cntcache_free(cc);
	cnt_files(ix, &np, &no, pack, sizeof(pack));
	ck_assert_uint_eq(np, 1);
	ck_assert_uint_eq(test_pack_entries(pack), NPK_SMALL);
	ck_assert_int_eq(bfs_cntcache_new(&cc, ds, p, ix, on_note, &nt), 0);
	for (size_t i = 0; i < bfs_dataset_nshards(ds); i++) {
		uint64_t nr = bfs_shard_nrecords(bfs_dataset_shard(ds, i));

		for (unsigned s = 0; s < 3; s++)
			memset(got[s], 0xee, 700 * 4);
		ck_assert(bfs_cntcache_load(cc, i, got));
		for (unsigned s = 0; s < 3; s++)
			for (unsigned r = 0; r < nr; r++)
				ck_assert_uint_eq(got[s][r], i * 100000 + s * 1000 + r);
	}
	bfs_cntcache_save(cc); /* nothing put: nothing written */
	ck_assert_int_eq(nt.n, 0);
	bfs_cntcache_free(cc);
	for (unsigned s = 0; s < 3; s++) {
		free(cols[s]);
		free(got[s]);
	}
	bfs_plan_free(p);
	bfs_schema_free(sc);
	bfs_dataset_close(ds);
	snprintf(pack, sizeof(pack), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(pack), 0);
}
END_TEST

/* The fuzz corpus's counts pack (written by bfs_counts_image and the pack
 * writer) is sound and each entry loads under the key it claims, so the
 * fuzzers start from a file that reaches every check. */
START_TEST(fuzz_corpus_counts_pack_loads)
{
	char file[512], why[256], path[4097];
	struct bfs_ixpack *pk = NULL;

	snprintf(file, sizeof(file), "%s/tests/fuzz/corpus/ixpack/counts-three.cntpack.idx",
		 SRCDIR);
	ck_assert_msg(bfs_ixpack_load(&pk, file, why, sizeof(why)) == BFS_INDEX_LOADED, "%s", why);
	ck_assert_uint_eq(bfs_ixpack_count(pk), 3);
	for (size_t i = 0; i < bfs_ixpack_count(pk); i++) {
		struct bfs_counts_key k;
		const uint8_t *p;
		uint64_t h;
		size_t len;

		bfs_ixpack_entry(pk, i, &h, &p, &len);
		ck_assert(bfs_counts_image_key(p, len, &k, path, sizeof(path)));
		ck_assert_uint_eq(h, bfs_ixpack_hash(path));
		ck_assert_uint_eq(bfs_ixpack_find(pk, h), i);
		ck_assert_uint_eq(bfs_counts_file_bytes(&k), len);
		ck_assert_msg(bfs_counts_from_bytes(p, len, &k, NULL, why, sizeof(why)) ==
				      BFS_COUNTS_LOADED,
			      "%s: %s", path, why);
	}
	bfs_ixpack_free(pk);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("batch");
	TCase *perm = tcase_create("perm");
	TCase *tensor = tcase_create("tensor");
	TCase *counts = tcase_create("counts");

	tcase_set_timeout(perm, 60);
	tcase_add_test(perm, perm_is_a_bijection_for_every_small_n);
	tcase_add_test(perm, perm_is_a_bijection_for_large_n);
	tcase_add_test(perm, perm_shuffle_none_is_identity);
	tcase_add_test(perm, perm_apply_many_equals_apply);
	tcase_add_test(perm, perm_epochs_and_seeds_differ);
	tcase_add_test(perm, perm_positions_are_uniform);
	tcase_add_test(perm, block_cut_follows_sizes_and_shards);
	tcase_add_test(perm, block_order_is_a_permutation);
	tcase_add_test(perm, block_order_keeps_records_within_a_window);
	tcase_add_test(perm, block_order_depends_on_seed_and_epoch_only);
	tcase_add_test(tensor, npy_header_matches_numpy_layout);
	tcase_add_test(tensor, plan_names_and_geometry_follow_layouts);
	tcase_add_test(tensor, plan_rejects_name_clash);
	tcase_add_test(tensor, build_in_parts_equals_whole_build);
	tcase_add_test(tensor, build_in_parts_fails_like_whole_build);
	tcase_add_test(tensor, build_in_parts_substitutes_like_whole_build);
	tcase_add_test(tensor, chunked_reads_equal_one_read);
	tcase_add_test(counts, counts_file_round_trip_stale_corrupt_old);
	tcase_add_test(counts, counts_file_is_its_image_for_any_slot_count);
	tcase_add_test(counts, counts_desc_names_slots);
	tcase_add_test(counts, batcher_reads_cached_counts_without_decoding);
	tcase_add_test(counts, counts_of_small_shards_share_one_pack_per_directory);
	tcase_add_test(counts, datasets_sharing_a_directory_keep_each_others_counts);
	tcase_add_test(counts, cache_files_in_the_source_directory_are_not_shards);
	tcase_add_test(counts, old_counts_file_names_are_passed_over_then_dropped);
	tcase_add_test(counts, cntcache_writes_each_pack_once_at_save);
	tcase_add_test(counts, fuzz_corpus_counts_pack_loads);
	suite_add_tcase(s, perm);
	suite_add_tcase(s, counts);
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
