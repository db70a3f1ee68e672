/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_shadow.c — unit tests for shadow.c and its hooks in record.c: the
 * copy written by the scan is the uncompressed stream byte for byte, reads
 * through it equal the records, a stale, truncated or corrupted copy never
 * gives wrong bytes (not attached, or read from the shard instead, said
 * once and deleted), the budget holds, and the sweep deletes what is stale.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "crc32c.h"
#include "record.h"
#include "shadow.h"

#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static char tmpdir[256];
static char shard_path[512], ixdir[512];

/* ---- helpers ----------------------------------------------------------- */

#define NREC 3000

static uint8_t *stream; /* the uncompressed record stream */
static size_t stream_len;
static uint64_t offs[NREC];
static uint32_t lens[NREC];

static void put_le(uint8_t *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* NREC records of 0..600 text-like bytes (so ~2 MiB: several seek points). */
static void make_stream(uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
	size_t cap = (size_t)NREC * (16 + 1200), pos = 0;

	stream = malloc(cap);
	for (int i = 0; i < NREC; i++) {
		uint32_t len;

		x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
		len = (uint32_t)((x * 0x2545f4914f6cdd1dull) % 1201);
		offs[i] = pos;
		lens[i] = len;
		put_le(stream + pos, len, 8);
		put_le(stream + pos + 8, bfs_crc32c_mask(bfs_crc32c(0, stream + pos, 8)), 4);
		for (uint32_t k = 0; k < len; k++) {
			x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
			stream[pos + 12 + k] = (uint8_t) "abcdefgh ijk\n"[(x >> 33) % 13];
		}
		put_le(stream + pos + 12 + len,
		       bfs_crc32c_mask(bfs_crc32c(0, stream + pos + 12, len)), 4);
		pos += 16 + len;
	}
	stream_len = pos;
}

static void write_file(const char *path, const void *buf, size_t n)
{
	FILE *f = fopen(path, "wb");

	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(buf, 1, n, f), n);
	ck_assert_int_eq(fclose(f), 0);
}

static void write_shard(bool zlib)
{
	if (zlib) {
		uLongf zn = compressBound(stream_len);
		uint8_t *z = malloc(zn);

		ck_assert_int_eq(compress2(z, &zn, stream, stream_len, 6), Z_OK);
		write_file(shard_path, z, zn);
		free(z);
	} else {
		gzFile g = gzopen(shard_path, "wb6");

		ck_assert_ptr_nonnull(g);
		ck_assert_int_eq(gzwrite(g, stream, (unsigned)stream_len), (int)stream_len);
		ck_assert_int_eq(gzclose(g), Z_OK);
	}
}

static int notes;
static char last_note[4096];

static void on_note(void *ctx, const char *shard, const char *msg)
{
	(void)ctx;
	(void)shard;
	notes++;
	snprintf(last_note, sizeof(last_note), "%s", msg);
}

static struct bfs_shadows *new_set(uint64_t budget)
{
	struct bfs_shadow_opts o = { .dir = ixdir, .budget = budget, .note = on_note };
	struct bfs_shadows *sh = NULL;

	ck_assert_int_eq(bfs_shadows_new(&sh, &o), 0);
	return sh;
}

/* Open the shard and scan it, with a writer when sh is given. */
static struct bfs_shard *open_scan(struct bfs_shadows *sh)
{
	struct bfs_shard *s = NULL;
	struct bfs_shadow_writer *w;
	int err;

	ck_assert_int_eq(bfs_shard_open(&s, shard_path, BFS_COMP_AUTO), 0);
	w = sh ? bfs_shadow_begin(sh, s) : NULL;
	err = bfs_shard_scan(s, true, NULL, NULL);
	bfs_shadow_end(w, err);
	ck_assert_int_eq(err, 0);
	ck_assert_uint_eq(bfs_shard_nrecords(s), NREC);
	return s;
}

/* The one file of dir ending with suffix (NULL if none), in buf. */
static const char *find_file(const char *suffix, char *buf, size_t cap, int *count)
{
	DIR *d = opendir(ixdir);
	struct dirent *de;
	const char *found = NULL;

	*count = 0;
	if (!d)
		return NULL;
	while ((de = readdir(d)) != NULL) {
		size_t n = strlen(de->d_name), k = strlen(suffix);

		if (n > k && strcmp(de->d_name + n - k, suffix) == 0) {
			snprintf(buf, cap, "%s/%s", ixdir, de->d_name);
			found = buf;
			(*count)++;
		}
	}
	closedir(d);
	return found;
}

static int count_files(const char *part)
{
	DIR *d = opendir(ixdir);
	struct dirent *de;
	int n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d)) != NULL)
		n += strstr(de->d_name, part) != NULL;
	closedir(d);
	return n;
}

/* Every record, one by one and in one read_many, equals the stream. */
static void check_reads(struct bfs_shard *s, bool verify)
{
	static uint64_t idx[NREC];
	static uint8_t *dst[NREC];
	static int errs[NREC];
	static char *msgs[NREC];
	uint8_t buf[1300];

	for (int i = 0; i < NREC; i += 7) {
		ck_assert_int_eq(bfs_shard_read(s, (uint64_t)i, buf, sizeof(buf), verify), 0);
		ck_assert_int_eq(memcmp(buf, stream + offs[i] + 12, lens[i]), 0);
	}
	for (int i = 0; i < NREC; i++) {
		idx[i] = (uint64_t)i;
		dst[i] = malloc(lens[i] + 1);
	}
	bfs_shard_read_many(s, idx, NREC, dst, verify, errs, msgs);
	for (int i = 0; i < NREC; i++) {
		ck_assert_msg(errs[i] == 0, "record %d: %s", i, msgs[i] ? msgs[i] : "?");
		ck_assert_int_eq(memcmp(dst[i], stream + offs[i] + 12, lens[i]), 0);
		free(dst[i]);
		free(msgs[i]);
	}
}

static void setup(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/check_shadow.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	snprintf(shard_path, sizeof(shard_path), "%s/part-0.tfrecord.gz", tmpdir);
	snprintf(ixdir, sizeof(ixdir), "%s/ix", tmpdir);
	make_stream(7);
	notes = 0;
	last_note[0] = '\0';
}

static void teardown(void)
{
	char cmd[600];

	free(stream);
	stream = NULL;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}

/* ---- tests ------------------------------------------------------------- */

START_TEST(the_scan_writes_the_stream_and_reads_go_through_it)
{
	struct bfs_shadows *sh;
	struct bfs_shard *s;
	char path[700];
	int n;
	struct stat st;
	uint8_t *got;
	int fd;

	write_shard(_i == 1);
	sh = new_set((uint64_t)1 << 30);
	s = open_scan(sh);
	ck_assert_ptr_nonnull(find_file(".shadow", path, sizeof(path), &n));
	ck_assert_int_eq(n, 1);
	ck_assert_int_eq(count_files(".tmp."), 0);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_gt((uint64_t)st.st_size, stream_len); /* the stream, then the trailer */
	ck_assert_uint_eq(bfs_shadows_used(sh), (uint64_t)st.st_size);
	got = malloc(stream_len);
	fd = open(path, O_RDONLY);
	ck_assert_int_eq(pread(fd, got, stream_len, 0), (ssize_t)stream_len);
	close(fd);
	ck_assert_int_eq(memcmp(got, stream, stream_len), 0);
	free(got);
	ck_assert(!bfs_shard_has_shadow(s));
	ck_assert(bfs_shadow_valid(sh, s));
	ck_assert(bfs_shadow_attach(sh, s));
	ck_assert(bfs_shard_has_shadow(s));
	check_reads(s, false);
	check_reads(s, true);
	ck_assert_int_eq(notes, 0);
	bfs_shard_close(s);
	bfs_shadows_free(sh);
}
END_TEST

START_TEST(reads_through_the_copy_need_no_inflate)
{
	struct bfs_shadows *sh;
	struct bfs_shard *s;
	uint8_t buf[1300];

	/* the shard's compressed bytes are destroyed after the scan (same size,
	 * same mtime put back): only the copy can still give the records */
	write_shard(false);
	sh = new_set((uint64_t)1 << 30);
	s = open_scan(sh);
	ck_assert(bfs_shadow_attach(sh, s));
	{
		int fd = open(shard_path, O_WRONLY);
		uint8_t *zero = calloc(1, bfs_shard_file_size(s));

		ck_assert_int_eq(pwrite(fd, zero, bfs_shard_file_size(s), 0),
				 (ssize_t)bfs_shard_file_size(s));
		close(fd);
		free(zero);
	}
	check_reads(s, true);
	/* and without the copy the same read fails: the test can tell */
	bfs_shard_set_shadow(s, NULL, NULL, NULL);
	ck_assert_int_ne(bfs_shard_read(s, NREC - 1, buf, sizeof(buf), true), 0);
	bfs_shard_close(s);
	bfs_shadows_free(sh);
}
END_TEST

START_TEST(a_copy_is_reused_only_for_the_same_shard)
{
	struct bfs_shadows *sh;
	struct bfs_shard *s, *t;
	struct timespec ts[2] = { { 0, UTIME_OMIT }, { 12345, 0 } };
	char path[700];
	int n;

	write_shard(false);
	sh = new_set((uint64_t)1 << 30);
	s = open_scan(sh);
	bfs_shadows_free(sh);
	/* a new set keeps it and counts it; another open of the shard reuses it */
	sh = new_set((uint64_t)1 << 30);
	ck_assert_uint_gt(bfs_shadows_used(sh), stream_len);
	t = open_scan(NULL);
	ck_assert(bfs_shadow_valid(sh, t));
	ck_assert(!bfs_shadow_wanted(sh, t));
	ck_assert(bfs_shadow_begin(sh, t) == NULL); /* a valid copy is not written again */
	bfs_shard_close(t);
	bfs_shadows_free(sh);
	/* the shard's mtime changes: stale, not attached, deleted by the sweep */
	ck_assert_int_eq(utimensat(AT_FDCWD, shard_path, ts, 0), 0);
	t = open_scan(NULL);
	sh = new_set((uint64_t)1 << 30);
	ck_assert(!bfs_shadow_valid(sh, t));
	ck_assert(!bfs_shadow_attach(sh, t));
	ck_assert_ptr_null(find_file(".shadow", path, sizeof(path), &n));
	ck_assert_uint_eq(bfs_shadows_used(sh), 0);
	ck_assert(bfs_shadow_wanted(sh, t)); /* worth a scan to write it again */
	bfs_shard_close(s);
	bfs_shard_close(t);
	bfs_shadows_free(sh);
}
END_TEST

START_TEST(the_sweep_deletes_copies_of_gone_shards_and_dead_leftovers)
{
	struct bfs_shadows *sh;
	struct bfs_shard *s;
	char path[700], junk[700];
	int n;

	write_shard(false);
	sh = new_set((uint64_t)1 << 30);
	s = open_scan(sh);
	bfs_shard_close(s);
	bfs_shadows_free(sh);
	/* a leftover of a writer that died (pid 2^22 + 1 does not run) and of
	 * one that runs (ours) */
	snprintf(junk, sizeof(junk), "%s/0000000000000001.shadow.tmp.4194305", ixdir);
	write_file(junk, "x", 1);
	snprintf(junk, sizeof(junk), "%s/0000000000000002.shadow.tmp.%ld", ixdir, (long)getpid());
	write_file(junk, "x", 1);
	sh = new_set((uint64_t)1 << 30);
	ck_assert_int_eq(count_files(".shadow.tmp.4194305"), 0);
	ck_assert_int_eq(count_files(".shadow.tmp."), 1);
	ck_assert_ptr_nonnull(find_file(".shadow", path, sizeof(path), &n));
	bfs_shadows_free(sh);
	ck_assert_int_eq(unlink(shard_path), 0);
	sh = new_set((uint64_t)1 << 30);
	ck_assert_ptr_null(find_file(".shadow", path, sizeof(path), &n));
	bfs_shadows_free(sh);
}
END_TEST

/* _i: 0 a byte of a record flipped, 1 the copy truncated (after attach:
 * the mapping faults or reads zeros), 2 truncated before attach */
START_TEST(a_damaged_copy_never_gives_wrong_bytes)
{
	struct bfs_shadows *sh;
	struct bfs_shard *s;
	char path[700];
	int n;

	write_shard(false);
	sh = new_set((uint64_t)1 << 30);
	s = open_scan(sh);
	ck_assert_ptr_nonnull(find_file(".shadow", path, sizeof(path), &n));
	if (_i == 2) {
		ck_assert_int_eq(truncate(path, (off_t)stream_len / 2), 0);
		ck_assert(!bfs_shadow_attach(sh, s));
		check_reads(s, true);
		ck_assert_int_eq(notes, 0);
	} else {
		ck_assert(bfs_shadow_attach(sh, s));
		if (_i == 0) {
			int fd = open(path, O_RDWR);
			uint8_t b;
			off_t at = (off_t)(offs[NREC / 2] + 12);

			ck_assert_int_eq(pread(fd, &b, 1, at), 1);
			b ^= 0x55;
			ck_assert_int_eq(pwrite(fd, &b, 1, at), 1);
			close(fd);
		} else {
			ck_assert_int_eq(truncate(path, (off_t)stream_len / 2), 0);
		}
		check_reads(s, true);
		check_reads(s, false);
		ck_assert_int_eq(notes, 1); /* said once */
		ck_assert_ptr_nonnull(strstr(last_note, "bad shadow copy"));
		/* deleted: the next mount writes it again */
		ck_assert_ptr_null(find_file(".shadow", path, sizeof(path), &n));
	}
	bfs_shard_close(s);
	bfs_shadows_free(sh);
}
END_TEST

START_TEST(the_budget_holds_and_nothing_is_left_behind)
{
	struct bfs_shadows *sh;
	struct bfs_shard *s;
	char path[700];
	int n;

	write_shard(false);
	sh = new_set(stream_len / 2);
	s = open_scan(sh);
	ck_assert_ptr_null(find_file(".shadow", path, sizeof(path), &n));
	ck_assert_int_eq(count_files(".tmp."), 0);
	ck_assert_uint_eq(bfs_shadows_used(sh), 0);
	ck_assert_int_eq(notes, 1);
	ck_assert_ptr_nonnull(strstr(last_note, "shadow_size"));
	ck_assert(!bfs_shadow_attach(sh, s));
	ck_assert(!bfs_shadow_wanted(sh, s)); /* not worth a rescan either */
	check_reads(s, true);
	bfs_shard_close(s);
	bfs_shadows_free(sh);
}
END_TEST

START_TEST(a_failed_scan_leaves_no_copy)
{
	struct bfs_shadows *sh;
	struct bfs_shard *s = NULL;
	struct bfs_shadow_writer *w;
	char path[700];
	int n;

	/* the last record's data CRC is wrong: the scan fails */
	stream[offs[NREC - 1] + 12 + lens[NREC - 1]] ^= 1;
	write_shard(false);
	sh = new_set((uint64_t)1 << 30);
	ck_assert_int_eq(bfs_shard_open(&s, shard_path, BFS_COMP_AUTO), 0);
	w = bfs_shadow_begin(sh, s);
	ck_assert_ptr_nonnull(w);
	ck_assert_int_ne(bfs_shard_scan(s, true, NULL, NULL), 0);
	bfs_shadow_end(w, -EBADMSG);
	ck_assert_ptr_null(find_file(".shadow", path, sizeof(path), &n));
	ck_assert_int_eq(count_files(".tmp."), 0);
	ck_assert_uint_eq(bfs_shadows_used(sh), 0);
	bfs_shard_close(s);
	bfs_shadows_free(sh);
}
END_TEST

START_TEST(plain_shards_get_no_copy)
{
	struct bfs_shadows *sh;
	struct bfs_shard *s = NULL;

	write_file(shard_path, stream, stream_len);
	sh = new_set((uint64_t)1 << 30);
	ck_assert_int_eq(bfs_shard_open(&s, shard_path, BFS_COMP_AUTO), 0);
	ck_assert_ptr_null(bfs_shadow_begin(sh, s));
	ck_assert_int_eq(bfs_shard_scan(s, true, NULL, NULL), 0);
	ck_assert(!bfs_shadow_wanted(sh, s));
	ck_assert(!bfs_shadow_attach(sh, s));
	ck_assert_int_eq(count_files(".shadow"), 0);
	bfs_shard_close(s);
	bfs_shadows_free(sh);
}
END_TEST

static Suite *shadow_suite(void)
{
	Suite *su = suite_create("shadow");
	TCase *tc = tcase_create("shadow");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_loop_test(tc, the_scan_writes_the_stream_and_reads_go_through_it, 0, 2);
	tcase_add_test(tc, reads_through_the_copy_need_no_inflate);
	tcase_add_test(tc, a_copy_is_reused_only_for_the_same_shard);
	tcase_add_test(tc, the_sweep_deletes_copies_of_gone_shards_and_dead_leftovers);
	tcase_add_loop_test(tc, a_damaged_copy_never_gives_wrong_bytes, 0, 3);
	tcase_add_test(tc, the_budget_holds_and_nothing_is_left_behind);
	tcase_add_test(tc, a_failed_scan_leaves_no_copy);
	tcase_add_test(tc, plain_shards_get_no_copy);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(su, tc);
	return su;
}

int main(void)
{
	SRunner *sr = srunner_create(shadow_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
