/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_counts.c — unit tests of decoder/batch/counts.c, the ragged counts file
 * (docs/formats.md): saved and loaded back, stale when any part of its key
 * differs, never loaded with a flipped byte, truncated or grown; another
 * format version refused; the file byte for byte the image a pack entry
 * holds, for any number of slots; the slots' description; and the fuzz
 * corpus's counts pack sound.
 */
#include "batchtest.h"
#include "counts.h"
#include "ixpack.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
	Suite *s = suite_create("counts");
	TCase *counts = tcase_create("counts");

	tcase_add_test(counts, counts_file_round_trip_stale_corrupt_old);
	tcase_add_test(counts, counts_file_is_its_image_for_any_slot_count);
	tcase_add_test(counts, counts_desc_names_slots);
	tcase_add_test(counts, fuzz_corpus_counts_pack_loads);
	suite_add_tcase(s, counts);
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
