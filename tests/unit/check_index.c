/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for decoder/record/index.c: the compact record index, its cache file,
 * and how a dataset reuses, rejects and rebuilds that file. */
#include "testfiles.h"
#include "crc32c.h"
#include "dataset.h"
#include "index.h"
#include "record.h"

#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* gzip: the uncompressed offsets may pass the file's size */
static const struct bfs_index_key KEY = { "/data/shard-0", BFS_COMP_GZIP, 123456, 42 };

/* An index of n records with lengths lens[], the first at `first`. */
static struct bfs_index *build(const uint32_t *lens, uint64_t n, uint64_t first)
{
	struct bfs_index *ix = NULL;
	uint64_t off = first;

	ck_assert_int_eq(bfs_index_new(&ix), 0);
	for (uint64_t i = 0; i < n; i++) {
		ck_assert_msg(bfs_index_push(ix, off, lens[i]) == 0, "%s", bfs_err_msg());
		off += 16 + (uint64_t)lens[i];
	}
	ck_assert_int_eq(bfs_index_finish(ix), 0);
	return ix;
}

/* Every offset, length and the maximum as pushed. */
static void check_same(const struct bfs_index *ix, const uint32_t *lens, uint64_t n, uint64_t first)
{
	uint64_t off = first;
	uint32_t max = 0;

	ck_assert_uint_eq(ix->n, n);
	for (uint64_t i = 0; i < n; i++) {
		ck_assert_uint_eq(bfs_index_offset(ix, i), off);
		ck_assert_uint_eq(bfs_index_len(ix, i), lens[i]);
		off += 16 + (uint64_t)lens[i];
		if (lens[i] > max)
			max = lens[i];
	}
	ck_assert_uint_eq(bfs_index_offset(ix, n), off);
	ck_assert_uint_eq(ix->max_len, max);
}

static char tmpdir[64];

static void mk_tmpdir(void)
{
	test_mkdir(tmpdir, sizeof(tmpdir), "check_index");
}

static void rm_tmpdir(void)
{
	test_rmdir(tmpdir);
}

/* Save, load back, compare. */
static struct bfs_index *save_load(const struct bfs_index *ix, const char *name)
{
	char path[128], why[256];
	struct bfs_index *back = NULL;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	ck_assert_int_eq(bfs_index_save(ix, path, &KEY), 0);
	ck_assert_msg(bfs_index_load(&back, path, &KEY, why, sizeof(why)) == BFS_INDEX_LOADED, "%s",
		      why);
	return back;
}

/* ---- format ------------------------------------------------------------ */

/* Residual widths 0 to 5 bytes (5 is the most that lengths up to 1 GiB can
 * need: 63 residuals of at most 2^30 each), in the first block and after. */
START_TEST(every_width_round_trips)
{
	static const uint64_t extra[] = {
		0, 200, 40000, (uint64_t)1 << 20, (uint64_t)1 << 28, (uint64_t)5 << 30
	};
	uint32_t *lens = malloc(200 * sizeof(*lens));

	mk_tmpdir();
	for (unsigned w = 0; w < BFS_ARRAY_SIZE(extra); w++) {
		struct bfs_index *ix, *back;
		uint64_t left = extra[w];

		/* records 0.. carry the extra bytes in slices of at most 2^30 - 100 */
		for (unsigned i = 0; i < 200; i++) {
			uint64_t e =
				left < ((uint64_t)1 << 30) - 100 ? left : ((uint64_t)1 << 30) - 100;
			lens[i] = (uint32_t)(100 + (i % 64 < 8 ? e : 0));
			if (i % 64 < 8)
				left -= e;
			if (i % 64 == 63)
				left = extra[w];
		}
		ix = build(lens, 200, 0);
		check_same(ix, lens, 200, 0);
		ck_assert_uint_eq((ix->dir[0].meta >> 40) & 15, w);
		ck_assert_uint_eq((ix->dir[1].meta >> 40) & 15, w);
		back = save_load(ix, "w.idx");
		check_same(back, lens, 200, 0);
		bfs_index_free(back);
		bfs_index_free(ix);
	}
	rm_tmpdir();
	free(lens);
}
END_TEST

/* 0, 1 and around every block boundary; fixed-size records cost the
 * directory alone. */
START_TEST(block_boundaries_round_trip)
{
	static const uint64_t ns[] = { 0, 1, 2, 62, 63, 64, 65, 127, 128, 129, 4097 };
	uint32_t *lens = malloc(5000 * sizeof(*lens));

	mk_tmpdir();
	srand(7);
	for (unsigned k = 0; k < BFS_ARRAY_SIZE(ns); k++) {
		for (int fixed = 0; fixed < 2; fixed++) {
			struct bfs_index *ix, *back;

			for (uint64_t i = 0; i < ns[k]; i++)
				lens[i] = fixed ? 20 : (uint32_t)(rand() % 300);
			ix = build(lens, ns[k], 0);
			check_same(ix, lens, ns[k], 0);
			if (fixed)
				ck_assert_uint_le(bfs_index_bytes(ix), 16 * (ns[k] / 64 + 1) + 8);
			else
				ck_assert_uint_le(bfs_index_bytes(ix),
						  16 * (ns[k] / 64 + 1) + 2 * (ns[k] + 1) + 8);
			back = save_load(ix, "b.idx");
			check_same(back, lens, ns[k], 0);
			/* big files are mapped, small ones read */
			if (ns[k] > 4000 && !fixed)
				ck_assert_ptr_nonnull(back->map);
			if (ns[k] < 64)
				ck_assert_ptr_null(back->map);
			bfs_index_free(back);
			bfs_index_free(ix);
		}
	}
	rm_tmpdir();
	free(lens);
}
END_TEST

/* Offsets past 4 GiB (records of 1 GiB, the first at 5 GiB). */
START_TEST(huge_offsets_round_trip)
{
	uint32_t lens[150];
	struct bfs_index *ix, *back;

	mk_tmpdir();
	for (unsigned i = 0; i < 150; i++)
		lens[i] = i % 3 ? (uint32_t)1 << 30 : 7;
	ix = build(lens, 150, (uint64_t)5 << 30);
	check_same(ix, lens, 150, (uint64_t)5 << 30);
	ck_assert_uint_gt(bfs_index_offset(ix, 150), (uint64_t)100 << 30);
	back = save_load(ix, "h.idx");
	check_same(back, lens, 150, (uint64_t)5 << 30);
	bfs_index_free(back);
	bfs_index_free(ix);
	rm_tmpdir();
}
END_TEST

START_TEST(push_refuses_gaps_overlaps_and_huge_lengths)
{
	struct bfs_index *ix = NULL;

	ck_assert_int_eq(bfs_index_new(&ix), 0);
	ck_assert_int_eq(bfs_index_push(ix, 0, 10), 0);
	ck_assert_int_eq(bfs_index_push(ix, 27, 10), -EINVAL); /* gap */
	ck_assert_int_eq(bfs_index_push(ix, 25, 10), -EINVAL); /* overlap */
	ck_assert_int_eq(bfs_index_push(ix, 26, (uint32_t)BFS_RECORD_MAX_LEN + 1), -EFBIG);
	ck_assert_int_eq(bfs_index_push(ix, 26, 5), 0);
	ck_assert_int_eq(bfs_index_finish(ix), 0);
	ck_assert_int_eq(bfs_index_push(ix, 47, 5), -EINVAL); /* finished */
	ck_assert_uint_eq(ix->n, 2);
	ck_assert_uint_eq(bfs_index_len(ix, 1), 5);
	bfs_index_free(ix);
}
END_TEST

START_TEST(seek_points_round_trip)
{
	uint32_t lens[10] = { 5, 5, 5, 5, 5, 5, 5, 5, 5, 5 };
	struct bfs_index *ix = NULL, *back;

	mk_tmpdir();
	ck_assert_int_eq(bfs_index_new(&ix), 0);
	for (unsigned p = 0; p < 3; p++) {
		struct bfs_seek_point *pt = bfs_index_add_point(ix);
		memset(pt, 0, sizeof(*pt));
		pt->out_off = 100 * (p + 1);
		pt->in_off = 50 * (p + 1);
		pt->bits = (uint8_t)p;
		pt->window[32767] = (uint8_t)(p + 9);
	}
	bfs_index_drop_point(ix);
	for (unsigned i = 0; i < 10; i++)
		ck_assert_int_eq(bfs_index_push(ix, 21 * i, lens[i]), 0);
	ck_assert_int_eq(bfs_index_finish(ix), 0);
	back = save_load(ix, "s.idx");
	check_same(back, lens, 10, 0);
	ck_assert_uint_eq(back->npts, 2);
	ck_assert_uint_eq(back->pts[1].out_off, 200);
	ck_assert_uint_eq(back->pts[1].in_off, 100);
	ck_assert_uint_eq(back->pts[1].bits, 1);
	ck_assert_uint_eq(back->pts[1].window[32767], 10);
	ck_assert_ptr_nonnull(back->map);
	bfs_index_free(back);
	bfs_index_free(ix);
	rm_tmpdir();
}
END_TEST

/* ---- the file as untrusted input ------------------------------------------ */

static struct bfs_index *sample(uint64_t n)
{
	uint32_t *lens = malloc((n ? n : 1) * sizeof(*lens));
	struct bfs_index *ix;

	for (uint64_t i = 0; i < n; i++)
		lens[i] = (uint32_t)(i * 37 % 500);
	ix = build(lens, n, 0);
	free(lens);
	return ix;
}

/* Every single flipped byte, every truncation, one byte more: rejected as
 * BAD (rebuilt with a log line), never loaded. */
START_TEST(any_flipped_byte_or_truncation_is_detected)
{
	struct bfs_index *ix = sample(300), *got = NULL;
	char path[128], why[256];
	uint8_t *buf;
	size_t len;

	mk_tmpdir();
	snprintf(path, sizeof(path), "%s/f.idx", tmpdir);
	ck_assert_int_eq(bfs_index_save(ix, path, &KEY), 0);
	buf = test_slurp(path, &len);
	ck_assert_int_eq(bfs_index_from_bytes(&got, buf, len, &KEY, why, sizeof(why)),
			 BFS_INDEX_LOADED);
	bfs_index_free(got);
	for (size_t i = 0; i < len; i++) {
		for (unsigned bit = 0; bit < 8; bit += 3) {
			buf[i] ^= (uint8_t)(1u << bit);
			why[0] = '\0';
			ck_assert_msg(bfs_index_from_bytes(&got, buf, len, &KEY, why,
							   sizeof(why)) == BFS_INDEX_BAD,
				      "flip at byte %zu bit %u not detected", i, bit);
			ck_assert(why[0] != '\0');
			buf[i] ^= (uint8_t)(1u << bit);
		}
	}
	for (size_t cut = 0; cut < len; cut += cut < 200 ? 1 : 97) {
		test_spit(path, buf, cut);
		ck_assert_msg(bfs_index_load(&got, path, &KEY, why, sizeof(why)) == BFS_INDEX_BAD,
			      "truncation to %zu bytes not detected", cut);
	}
	test_spit(path, buf, len - 1);
	ck_assert_int_eq(bfs_index_load(&got, path, &KEY, why, sizeof(why)), BFS_INDEX_BAD);
	ck_assert_ptr_nonnull(strstr(why, "truncated"));
	buf = realloc(buf, len + 1);
	buf[len] = 0;
	test_spit(path, buf, len + 1);
	ck_assert_int_eq(bfs_index_load(&got, path, &KEY, why, sizeof(why)), BFS_INDEX_BAD);
	buf[len / 2] ^= 0x40;
	test_spit(path, buf, len);
	ck_assert_int_eq(bfs_index_load(&got, path, &KEY, why, sizeof(why)), BFS_INDEX_BAD);
	ck_assert_ptr_nonnull(strstr(why, "checksum"));
	free(buf);
	bfs_index_free(ix);
	rm_tmpdir();
}
END_TEST

START_TEST(old_format_and_other_shards_are_not_read)
{
	struct bfs_index *ix = sample(100), *got = NULL;
	struct bfs_index_key other = KEY;
	char path[128], why[256];
	uint8_t old[8 + 32 + 12 * 100 + 4];

	mk_tmpdir();
	snprintf(path, sizeof(path), "%s/o.idx", tmpdir);
	/* the previous format: magic, then a header and 12 bytes a record */
	memset(old, 0, sizeof(old));
	memcpy(old, "BFSIDX02", 8);
	test_spit(path, old, sizeof(old));
	ck_assert_int_eq(bfs_index_load(&got, path, &KEY, why, sizeof(why)), BFS_INDEX_BAD);
	ck_assert_ptr_nonnull(strstr(why, "old index format BFSIDX02"));
	memcpy(old, "NOTANIDX", 8);
	test_spit(path, old, sizeof(old));
	ck_assert_int_eq(bfs_index_load(&got, path, &KEY, why, sizeof(why)), BFS_INDEX_BAD);
	/* a good file made for another size, mtime, compression or path */
	ck_assert_int_eq(bfs_index_save(ix, path, &KEY), 0);
	other.mtime_ns++;
	ck_assert_int_eq(bfs_index_load(&got, path, &other, why, sizeof(why)), BFS_INDEX_ABSENT);
	other = KEY;
	other.file_size--;
	ck_assert_int_eq(bfs_index_load(&got, path, &other, why, sizeof(why)), BFS_INDEX_ABSENT);
	other = KEY;
	other.comp = BFS_COMP_ZLIB;
	ck_assert_int_eq(bfs_index_load(&got, path, &other, why, sizeof(why)), BFS_INDEX_ABSENT);
	other = KEY;
	other.path = "/data/shard-1";
	ck_assert_int_eq(bfs_index_load(&got, path, &other, why, sizeof(why)), BFS_INDEX_ABSENT);
	snprintf(path, sizeof(path), "%s/none.idx", tmpdir);
	ck_assert_int_eq(bfs_index_load(&got, path, &KEY, why, sizeof(why)), BFS_INDEX_ABSENT);
	bfs_index_free(ix);
	rm_tmpdir();
}
END_TEST

/* ---- through a dataset ------------------------------------------------------ */

static int notes;
static char last_note[1024];

static void count_note(void *ctx, const char *shard, const char *msg)
{
	(void)ctx;
	(void)shard;
	notes++;
	snprintf(last_note, sizeof(last_note), "%s", msg);
}

/* The one .idx file in the index directory. */
static void idx_path(char *dst, size_t cap, const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	ck_assert_ptr_nonnull(d);
	dst[0] = '\0';
	while ((de = readdir(d)) != NULL)
		if (strstr(de->d_name, ".idx"))
			snprintf(dst, cap, "%s/%s", dir, de->d_name);
	closedir(d);
	ck_assert(dst[0] != '\0');
}

/* Open the dataset, check every record, return whether the index was reused. */
static bool open_check(const char *shard, const char *ix_dir, uint64_t n)
{
	struct bfs_dataset_opts o = {
		.comp = BFS_COMP_AUTO, .index_dir = ix_dir, .jobs = 2, .on_note = count_note
	};
	struct bfs_dataset *ds = NULL;
	uint8_t buf[600];
	bool reused;

	ck_assert_msg(bfs_dataset_open(&ds, shard, &o) == 0, "%s", bfs_err_msg());
	ck_assert_uint_eq(bfs_dataset_nrecords(ds), n);
	ck_assert_uint_eq(bfs_dataset_max_record_len(ds), 499);
	for (uint64_t i = 0; i < n; i++) {
		uint32_t len = 0;
		ck_assert_msg(bfs_dataset_read(ds, i, buf, sizeof(buf), &len, true) == 0, "%s",
			      bfs_err_msg());
		ck_assert_uint_eq(len, i * 37 % 500);
		ck_assert_uint_eq(buf[0], len ? (uint8_t)i : buf[0]);
	}
	reused = bfs_dataset_index_reused(ds);
	bfs_dataset_close(ds);
	return reused;
}

START_TEST(dataset_reuses_and_rebuilds_the_index_file)
{
	char shard[128], ixd[128], ixf[600];
	uint8_t data[500];
	uint8_t *buf;
	size_t len;
	struct stat st1, st2;
	FILE *f;
	uint64_t n = 3000;

	mk_tmpdir();
	snprintf(shard, sizeof(shard), "%s/part-0", tmpdir);
	snprintf(ixd, sizeof(ixd), "%s/ix", tmpdir);
	f = fopen(shard, "wb");
	ck_assert_ptr_nonnull(f);
	for (uint64_t i = 0; i < n; i++) {
		memset(data, (int)(uint8_t)i, sizeof(data));
		test_put_record(f, data, (uint32_t)(i * 37 % 500));
	}
	ck_assert_int_eq(fclose(f), 0);
	notes = 0;
	ck_assert(!open_check(shard, ixd, n)); /* built */
	idx_path(ixf, sizeof(ixf), ixd);
	ck_assert_int_eq(stat(ixf, &st1), 0);
	ck_assert(open_check(shard, ixd, n)); /* reused, not rewritten */
	ck_assert_int_eq(stat(ixf, &st2), 0);
	ck_assert_uint_eq(st1.st_ino, st2.st_ino);
	ck_assert_int_eq(notes, 0);
	/* a flipped byte: rebuilt, with one note */
	buf = test_slurp(ixf, &len);
	buf[len - 3] ^= 1;
	test_spit(ixf, buf, len);
	ck_assert(!open_check(shard, ixd, n));
	ck_assert_int_eq(notes, 1);
	ck_assert_ptr_nonnull(strstr(last_note, "checksum"));
	ck_assert(open_check(shard, ixd, n));
	/* truncated: the same */
	test_spit(ixf, buf, len / 2);
	ck_assert(!open_check(shard, ixd, n));
	ck_assert_int_eq(notes, 2);
	ck_assert_ptr_nonnull(strstr(last_note, "truncated"));
	/* the old format: the same */
	memcpy(buf, "BFSIDX02", 8);
	test_spit(ixf, buf, len);
	ck_assert(!open_check(shard, ixd, n));
	ck_assert_int_eq(notes, 3);
	ck_assert_ptr_nonnull(strstr(last_note, "old index format"));
	ck_assert(open_check(shard, ixd, n));
	ck_assert_int_eq(notes, 3);
	free(buf);
	rm_tmpdir();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("index");
	TCase *tc = tcase_create("index");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, every_width_round_trips);
	tcase_add_test(tc, block_boundaries_round_trip);
	tcase_add_test(tc, huge_offsets_round_trip);
	tcase_add_test(tc, push_refuses_gaps_overlaps_and_huge_lengths);
	tcase_add_test(tc, seek_points_round_trip);
	tcase_add_test(tc, any_flipped_byte_or_truncation_is_detected);
	tcase_add_test(tc, old_format_and_other_shards_are_not_read);
	tcase_add_test(tc, dataset_reuses_and_rebuilds_the_index_file);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
