/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_dataset.c — unit tests of decoder/dataset/ through dataset.h and
 * tfds.h, as fs/ and mount/ call them: opening a folder, a glob, a file, a
 * gzip shard, a TFDS folder's split, and the errors naming the file;
 * reads and lookups checked against the bytes written; the index cache
 * reused, and rebuilt when a shard changed or a cache file is corrupt;
 * unions of several sources; inference's word on mixed features. Also:
 * with index_dir the SOURCE directory itself, every file the index and the
 * ragged counts put there is passed over as a shard.
 */
#include "batchtest.h"
#include "dataset.h"
#include "testfiles.h"
#include "tfds.h"

#include <check.h>
#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <fcntl.h>
#include <limits.h>
#include <time.h>
#include <unistd.h>

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

/* ------------------------------------------------ shards of plain records */

/* The bytes of record r of shard `tag`: its length varies with r (0 too),
 * its bytes name both, so a record read from the wrong place differs. */
static uint32_t rec_len(unsigned tag, unsigned r)
{
	return (r * 37 + tag * 11) % 300;
}

static void rec_bytes(uint8_t *dst, unsigned tag, unsigned r)
{
	uint32_t n = rec_len(tag, r);

	for (uint32_t k = 0; k < n; k++)
		dst[k] = (uint8_t)(tag * 101 + r * 7 + k);
}

/* Shard path of n records of `tag` (records as rec_bytes makes them). */
static void put_shard(const char *path, unsigned tag, unsigned n)
{
	FILE *f = fopen(path, "wb");
	uint8_t buf[512];

	ck_assert_ptr_nonnull(f);
	for (unsigned r = 0; r < n; r++) {
		rec_bytes(buf, tag, r);
		test_put_record(f, buf, rec_len(tag, r));
	}
	ck_assert_int_eq(fclose(f), 0);
}

static void put_named(const char *dir, const char *name, unsigned tag, unsigned n)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	put_shard(path, tag, n);
}

static void put_text(const char *dir, const char *name, const char *text)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	test_spit(path, (const uint8_t *)text, strlen(text));
}

static struct bfs_dataset *open_ok(const char *src, const struct bfs_dataset_opts *o)
{
	struct bfs_dataset_opts plain = { .comp = BFS_COMP_AUTO };
	struct bfs_dataset *ds = NULL;

	ck_assert_msg(bfs_dataset_open(&ds, src, o ? o : &plain) == 0, "%s: %s", src,
		      bfs_err_msg());
	return ds;
}

/* Records [from, from + n) of ds are records 0.. of shard `tag`, each
 * read (with its CRC checked) and located where it should be. */
static void expect_records(const struct bfs_dataset *ds, uint64_t from, unsigned tag, unsigned n,
			   size_t shard)
{
	uint8_t want[512], got[512];

	for (unsigned r = 0; r < n; r++) {
		uint64_t rec = from + r, local, off;
		uint32_t len = 0;
		size_t sh;

		rec_bytes(want, tag, r);
		ck_assert_uint_eq(bfs_dataset_record_len(ds, rec), rec_len(tag, r));
		ck_assert_msg(bfs_dataset_read(ds, rec, got, sizeof(got), &len, true) == 0, "%s",
			      bfs_err_msg());
		ck_assert_uint_eq(len, rec_len(tag, r));
		ck_assert_msg(memcmp(got, want, len) == 0, "record %llu", (unsigned long long)rec);
		ck_assert_int_eq(bfs_dataset_locate(ds, rec, &sh, &local, &off), 0);
		ck_assert_uint_eq(sh, shard);
		ck_assert_uint_eq(local, r);
	}
}

/* The base name of shard i. */
static const char *shard_name(const struct bfs_dataset *ds, size_t i)
{
	const char *p = bfs_shard_path(bfs_dataset_shard(ds, i));
	const char *s = strrchr(p, '/');

	return s ? s + 1 : p;
}

/* ------------------------------------------------------------- opening */

/* A folder: its shards sorted by name, the names a folder passes over
 * (.json, _SUCCESS, hidden) left out; records numbered shard after shard. */
START_TEST(open_folder_sorted_and_passes_over)
{
	char dir[256];
	struct bfs_dataset *ds;

	test_mkdir(dir, sizeof(dir), "check_dataset");
	put_named(dir, "b-00001", 2, 5);
	put_named(dir, "a-00000", 1, 7);
	put_named(dir, "c-00002", 3, 1);
	put_text(dir, "dataset_info.json", "{}");
	put_text(dir, "_SUCCESS", "");
	put_text(dir, ".hidden", "not a shard");
	ds = open_ok(dir, NULL);
	ck_assert_uint_eq(bfs_dataset_nshards(ds), 3);
	ck_assert_str_eq(shard_name(ds, 0), "a-00000");
	ck_assert_str_eq(shard_name(ds, 1), "b-00001");
	ck_assert_str_eq(shard_name(ds, 2), "c-00002");
	ck_assert_uint_eq(bfs_dataset_nrecords(ds), 13);
	expect_records(ds, 0, 1, 7, 0);
	expect_records(ds, 7, 2, 5, 1);
	expect_records(ds, 12, 3, 1, 2);
	ck_assert_int_eq(bfs_dataset_locate(ds, 13, NULL, NULL, NULL), -ENOENT);
	ck_assert_uint_eq(bfs_dataset_record_len(ds, 13), 0);
	ck_assert_uint_eq(bfs_dataset_max_record_len(ds), rec_len(1, 6)); /* the longest */
	ck_assert_uint_gt(rec_len(1, 6), rec_len(2, 4));
	bfs_dataset_close(ds);
	test_rmdir(dir);
}
END_TEST

/* A glob: only the files it matches, sorted; a single file: that one. */
START_TEST(open_glob_and_single_file)
{
	char dir[256], src[300];
	struct bfs_dataset *ds;

	test_mkdir(dir, sizeof(dir), "check_dataset");
	put_named(dir, "x-train.tfrecord-00001", 2, 4);
	put_named(dir, "x-train.tfrecord-00000", 1, 3);
	put_named(dir, "x-test.tfrecord-00000", 3, 9);
	snprintf(src, sizeof(src), "%s/*-train.tfrecord*", dir);
	ds = open_ok(src, NULL);
	ck_assert_uint_eq(bfs_dataset_nshards(ds), 2);
	ck_assert_str_eq(shard_name(ds, 0), "x-train.tfrecord-00000");
	ck_assert_uint_eq(bfs_dataset_nrecords(ds), 7);
	expect_records(ds, 0, 1, 3, 0);
	expect_records(ds, 3, 2, 4, 1);
	bfs_dataset_close(ds);

	snprintf(src, sizeof(src), "%s/x-test.tfrecord-00000", dir);
	ds = open_ok(src, NULL);
	ck_assert_uint_eq(bfs_dataset_nshards(ds), 1);
	ck_assert_uint_eq(bfs_dataset_nrecords(ds), 9);
	expect_records(ds, 0, 3, 9, 0);
	bfs_dataset_close(ds);
	test_rmdir(dir);
}
END_TEST

/* A gzip shard beside a plain one: detected from its bytes (comp auto),
 * its records read back as written. */
START_TEST(open_compressed_shard)
{
	char dir[256], cmd[1200];
	struct bfs_dataset *ds;

	test_mkdir(dir, sizeof(dir), "check_dataset");
	put_named(dir, "a.gz", 4, 40);
	put_named(dir, "b", 5, 6);
	snprintf(cmd, sizeof(cmd), "gzip -c '%s/a.gz' > '%s/a.tmpgz' && mv '%s/a.tmpgz' '%s/a.gz'",
		 dir, dir, dir, dir);
	ck_assert_int_eq(system(cmd), 0);
	ds = open_ok(dir, NULL);
	ck_assert_uint_eq(bfs_dataset_nshards(ds), 2);
	ck_assert_uint_eq(bfs_dataset_nrecords(ds), 46);
	expect_records(ds, 0, 4, 40, 0);
	expect_records(ds, 40, 5, 6, 1);
	bfs_dataset_close(ds);
	test_rmdir(dir);
}
END_TEST

/* Open fails with err and one line naming `name`, containing `what`. */
static void expect_open_fails(const char *src, int err, const char *name, const char *what)
{
	struct bfs_dataset_opts o = { .comp = BFS_COMP_AUTO };
	struct bfs_dataset *ds = NULL;
	const char *msg;

	ck_assert_int_eq(bfs_dataset_open(&ds, src, &o), err);
	ck_assert_ptr_null(ds);
	msg = bfs_err_msg();
	ck_assert_msg(strstr(msg, name) != NULL, "'%s' does not name %s", msg, name);
	ck_assert_msg(strstr(msg, what) != NULL, "'%s' does not say %s", msg, what);
	ck_assert_msg(strchr(msg, '\n') == NULL, "'%s' is not one line", msg);
}

/* An empty folder, a folder of only passed-over names, a missing path, a
 * glob matching nothing, a FIFO, a file that is not TFRecord, a shard cut
 * inside a record: each an error naming the file. */
START_TEST(open_errors_name_the_file)
{
	char dir[256], sub[300], path[300];
	FILE *f;

	test_mkdir(dir, sizeof(dir), "check_dataset");
	snprintf(sub, sizeof(sub), "%s/empty", dir);
	ck_assert_int_eq(mkdir(sub, 0755), 0);
	expect_open_fails(sub, -ENOENT, sub, "no shard files found");
	put_text(sub, "features.json", "{}");
	expect_open_fails(sub, -ENOENT, sub, "no shard files found");
	snprintf(path, sizeof(path), "%s/missing", dir);
	expect_open_fails(path, -ENOENT, path, "No such file");
	snprintf(path, sizeof(path), "%s/nothing-*", dir);
	expect_open_fails(path, -ENOENT, path, "no shard files found");
	snprintf(path, sizeof(path), "%s/fifo", dir);
	ck_assert_int_eq(mkfifo(path, 0644), 0);
	expect_open_fails(path, -EINVAL, path, "not a regular file");
	ck_assert_int_eq(unlink(path), 0);

	snprintf(path, sizeof(path), "%s/junk", dir);
	put_text(dir, "junk", "this is not a TFRecord file at all, just some text");
	expect_open_fails(path, -EBADMSG, path, "not a TFRecord file");
	ck_assert_int_eq(unlink(path), 0);

	snprintf(path, sizeof(path), "%s/cut", dir);
	put_shard(path, 6, 10);
	f = fopen(path, "r+b");
	ck_assert_ptr_nonnull(f);
	fseek(f, 0, SEEK_END);
	ck_assert_int_eq(ftruncate(fileno(f), ftell(f) - 5), 0);
	fclose(f);
	expect_open_fails(path, -EBADMSG, path, "cut short");
	test_rmdir(dir);
}
END_TEST

/* A file root cannot be kept from: unreadable, the open fails -EACCES
 * naming it (not checkable as root, who reads it anyway). */
START_TEST(open_unreadable_names_the_file)
{
	char dir[256], path[300];
	bool root = geteuid() == 0;

	test_mkdir(dir, sizeof(dir), "check_dataset");
	snprintf(path, sizeof(path), "%s/locked", dir);
	put_shard(path, 1, 3);
	ck_assert_int_eq(chmod(path, 0), 0);
	/* root reads any file: the open runs as nobody (the folder open to
	 * it, the file not), and root again after */
	ck_assert_int_eq(chmod(dir, 0755), 0);
	if (root)
		ck_assert_int_eq(seteuid(65534), 0);
	expect_open_fails(path, -EACCES, path, "ermission");
	if (root)
		ck_assert_int_eq(seteuid(0), 0);
	test_rmdir(dir);
}
END_TEST

/* keep_cut: a shard cut inside a record keeps its whole records, and
 * bfs_dataset_cut names the file and says so; whole shards have none. */
START_TEST(keep_cut_keeps_whole_records)
{
	char dir[256], path[300];
	struct bfs_dataset_opts o = { .comp = BFS_COMP_AUTO, .keep_cut = true };
	struct bfs_dataset *ds;
	FILE *f;

	test_mkdir(dir, sizeof(dir), "check_dataset");
	put_named(dir, "a", 1, 4);
	snprintf(path, sizeof(path), "%s/b", dir);
	put_shard(path, 2, 10);
	f = fopen(path, "r+b");
	ck_assert_ptr_nonnull(f);
	fseek(f, 0, SEEK_END);
	ck_assert_int_eq(ftruncate(fileno(f), ftell(f) - 5), 0);
	fclose(f);
	ds = open_ok(dir, &o);
	ck_assert_uint_eq(bfs_dataset_nrecords(ds), 4 + 9);
	ck_assert_ptr_null(bfs_dataset_cut(ds, 0));
	ck_assert_ptr_nonnull(bfs_dataset_cut(ds, 1));
	ck_assert_msg(strstr(bfs_dataset_cut(ds, 1), path) != NULL, "%s", bfs_dataset_cut(ds, 1));
	ck_assert_msg(strstr(bfs_dataset_cut(ds, 1), "9 whole records") != NULL, "%s",
		      bfs_dataset_cut(ds, 1));
	expect_records(ds, 4, 2, 9, 1);
	bfs_dataset_close(ds);
	test_rmdir(dir);
}
END_TEST

struct bads {
	int n;
	char shard[512];
};

static void on_bad(void *ctx, const char *shard, const char *msg)
{
	struct bads *b = ctx;

	(void)msg;
	b->n++;
	snprintf(b->shard, sizeof(b->shard), "%s", shard);
}

/* A record whose data CRC fails is indexed and counted (on_bad names its
 * shard); reading it with verify fails with a message naming the shard
 * and record, the records around it still read. */
START_TEST(bad_crc_record_reported_and_read_fails)
{
	char dir[256], path[300];
	struct bads b = { 0 };
	struct bfs_dataset_opts o = { .comp = BFS_COMP_AUTO, .on_bad = on_bad, .progress_ctx = &b };
	struct bfs_dataset *ds;
	uint8_t buf[512];
	uint32_t len;
	FILE *f;

	test_mkdir(dir, sizeof(dir), "check_dataset");
	snprintf(path, sizeof(path), "%s/a", dir);
	put_shard(path, 7, 5);
	/* flip the last data byte of record 2 (12 + len + 4 bytes each) */
	{
		long off = 0;

		for (unsigned r = 0; r < 2; r++)
			off += 16 + rec_len(7, r);
		off += 12 + rec_len(7, 2) - 1;
		f = fopen(path, "r+b");
		ck_assert_ptr_nonnull(f);
		fseek(f, off, SEEK_SET);
		fputc(0x5a ^ (int)(uint8_t)(7 * 101 + 2 * 7 + rec_len(7, 2) - 1), f);
		fclose(f);
	}
	ds = open_ok(path, &o);
	ck_assert_uint_eq(bfs_dataset_nrecords(ds), 5);
	ck_assert_uint_eq(bfs_dataset_bad_records(ds), 1);
	ck_assert_int_eq(b.n, 1);
	ck_assert_str_eq(b.shard, path);
	ck_assert_int_ne(bfs_dataset_read(ds, 2, buf, sizeof(buf), &len, true), 0);
	ck_assert_msg(strstr(bfs_err_msg(), path) != NULL, "%s", bfs_err_msg());
	ck_assert_msg(strstr(bfs_err_msg(), "record 2") != NULL, "%s", bfs_err_msg());
	expect_records(ds, 0, 7, 2, 0);
	ck_assert_int_eq(bfs_dataset_read(ds, 3, buf, sizeof(buf), &len, true), 0);
	bfs_dataset_close(ds);
	test_rmdir(dir);
}
END_TEST

/* read_many: records of several shards in any order, each to its own
 * buffer with its bytes; an out-of-range one fails alone with a message. */
START_TEST(read_many_across_shards)
{
	char dir[256];
	struct bfs_dataset *ds;
	uint64_t recs[] = { 12, 0, 7, 30, 5, 8 };
	unsigned tags[] = { 3, 1, 2, 0, 1, 2 }, locals[] = { 0, 0, 0, 0, 5, 1 };
	uint8_t bufs[6][512], want[512];
	uint8_t *dst[6];
	int errs[6];
	char *msgs[6];

	test_mkdir(dir, sizeof(dir), "check_dataset");
	put_named(dir, "a", 1, 7);
	put_named(dir, "b.gz", 2, 5);
	put_named(dir, "c", 3, 1);
	{
		char cmd[1200];

		snprintf(cmd, sizeof(cmd), "gzip -c '%s/b.gz' > '%s/b.t' && mv '%s/b.t' '%s/b.gz'",
			 dir, dir, dir, dir);
		ck_assert_int_eq(system(cmd), 0);
	}
	ds = open_ok(dir, NULL);
	for (int k = 0; k < 6; k++)
		dst[k] = bufs[k];
	ck_assert_int_eq(bfs_dataset_read_many(ds, recs, 6, dst, true, errs, msgs), 0);
	for (int k = 0; k < 6; k++) {
		if (recs[k] == 30) {
			ck_assert_int_eq(errs[k], -ENOENT);
			ck_assert_ptr_nonnull(msgs[k]);
			ck_assert_msg(strstr(msgs[k], "30") != NULL, "%s", msgs[k]);
			free(msgs[k]);
			continue;
		}
		ck_assert_int_eq(errs[k], 0);
		ck_assert_ptr_null(msgs[k]);
		rec_bytes(want, tags[k], locals[k]);
		ck_assert_msg(memcmp(bufs[k], want, rec_len(tags[k], locals[k])) == 0, "rec %llu",
			      (unsigned long long)recs[k]);
	}
	bfs_dataset_close(ds);
	test_rmdir(dir);
}
END_TEST

/* ---------------------------------------------------------- the caches */

/* Files in dir (not . ..). */
static unsigned count_files(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	unsigned n = 0;

	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)) != NULL)
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

/* The index cache: a first open scans and writes it, a second reuses
 * every shard's index (no rescan, same records); a shard rewritten with
 * the same size but other record lengths and a new mtime is rescanned,
 * and its records read as now written, not as the stale index says. */
START_TEST(index_cache_reused_then_rebuilt_when_stale)
{
	char dir[256], src[300], ix[300], path[400];
	struct notes nt = { 0 };
	struct bfs_dataset_opts o = { .comp = BFS_COMP_AUTO,
				      .on_note = on_note,
				      .progress_ctx = &nt };
	struct bfs_dataset *ds;
	struct timeval tv[2];
	uint8_t a[100], b[60];
	FILE *f;

	test_mkdir(dir, sizeof(dir), "check_dataset");
	snprintf(src, sizeof(src), "%s/src", dir);
	snprintf(ix, sizeof(ix), "%s/ix", dir);
	ck_assert_int_eq(mkdir(src, 0755), 0);
	ck_assert_int_eq(mkdir(ix, 0755), 0);
	o.index_dir = ix;
	put_named(src, "s0", 1, 20);
	put_named(src, "s1", 2, 30);
	ds = open_ok(src, &o);
	ck_assert(!bfs_dataset_index_reused(ds));
	ck_assert_uint_eq(bfs_dataset_nrecords(ds), 50);
	bfs_dataset_close(ds);
	ck_assert_uint_gt(count_files(ix), 0);

	ds = open_ok(src, &o);
	ck_assert(bfs_dataset_index_reused(ds));
	ck_assert_uint_eq(bfs_dataset_nrecords(ds), 50);
	expect_records(ds, 0, 1, 20, 0);
	expect_records(ds, 20, 2, 30, 1);
	bfs_dataset_close(ds);

	/* s1 now: two records of 100 and 60 bytes where the index holds 30 */
	memset(a, 0xa1, sizeof(a));
	memset(b, 0xb2, sizeof(b));
	snprintf(path, sizeof(path), "%s/s1", src);
	{
		struct stat st;
		long size;

		ck_assert_int_eq(stat(path, &st), 0);
		f = fopen(path, "wb");
		ck_assert_ptr_nonnull(f);
		test_put_record(f, a, sizeof(a));
		test_put_record(f, b, sizeof(b));
		size = ftell(f);
		ck_assert_int_eq(fclose(f), 0);
		tv[0].tv_sec = tv[1].tv_sec = st.st_mtime + 100;
		tv[0].tv_usec = tv[1].tv_usec = 0;
		ck_assert_int_eq(utimes(path, tv), 0);
		ck_assert_int_ne(size, st.st_size);
	}
	ds = open_ok(src, &o);
	ck_assert(!bfs_dataset_index_reused(ds));
	ck_assert_uint_eq(bfs_dataset_nrecords(ds), 22);
	expect_records(ds, 0, 1, 20, 0);
	{
		uint8_t got[200];
		uint32_t len;

		ck_assert_int_eq(bfs_dataset_read(ds, 20, got, sizeof(got), &len, true), 0);
		ck_assert_uint_eq(len, 100);
		ck_assert(memcmp(got, a, 100) == 0);
		ck_assert_int_eq(bfs_dataset_read(ds, 21, got, sizeof(got), &len, true), 0);
		ck_assert_uint_eq(len, 60);
		ck_assert(memcmp(got, b, 60) == 0);
	}
	bfs_dataset_close(ds);
	ds = open_ok(src, &o);
	ck_assert(bfs_dataset_index_reused(ds));
	ck_assert_uint_eq(bfs_dataset_nrecords(ds), 22);
	bfs_dataset_close(ds);
	test_rmdir(dir);
}
END_TEST

/* The same size, the same mtime second, other record lengths: the cache
 * key also holds the mtime's nanoseconds or the file's identity, else
 * the stale index would cut records in the wrong places. */
START_TEST(index_cache_same_size_rewrite_rescanned)
{
	char dir[256], src[300], ix[300], path[400];
	struct bfs_dataset_opts o = { .comp = BFS_COMP_AUTO };
	struct bfs_dataset *ds;
	struct timespec ts[2];
	struct stat st;
	uint8_t a[100], b[60], got[200];
	uint32_t len;
	FILE *f;

	test_mkdir(dir, sizeof(dir), "check_dataset");
	snprintf(src, sizeof(src), "%s/src", dir);
	snprintf(ix, sizeof(ix), "%s/ix", dir);
	ck_assert_int_eq(mkdir(src, 0755), 0);
	ck_assert_int_eq(mkdir(ix, 0755), 0);
	o.index_dir = ix;
	memset(a, 0xa1, sizeof(a));
	memset(b, 0xb2, sizeof(b));
	snprintf(path, sizeof(path), "%s/s", src);
	f = fopen(path, "wb");
	ck_assert_ptr_nonnull(f);
	test_put_record(f, a, 100);
	test_put_record(f, b, 60);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_int_eq(stat(path, &st), 0);
	ds = open_ok(src, &o);
	ck_assert_uint_eq(bfs_dataset_record_len(ds, 0), 100);
	bfs_dataset_close(ds);

	f = fopen(path, "wb");
	ck_assert_ptr_nonnull(f);
	test_put_record(f, b, 60);
	test_put_record(f, a, 100);
	ck_assert_int_eq(fclose(f), 0);
	ts[0] = st.st_atim;
	ts[1] = st.st_mtim;
	ts[1].tv_nsec = (ts[1].tv_nsec + 1) % 1000000000;
	ck_assert_int_eq(utimensat(AT_FDCWD, path, ts, 0), 0);
	ds = open_ok(src, &o);
	ck_assert(!bfs_dataset_index_reused(ds));
	ck_assert_uint_eq(bfs_dataset_record_len(ds, 0), 60);
	ck_assert_int_eq(bfs_dataset_read(ds, 1, got, sizeof(got), &len, true), 0);
	ck_assert_uint_eq(len, 100);
	ck_assert(memcmp(got, a, 100) == 0);
	bfs_dataset_close(ds);
	test_rmdir(dir);
}
END_TEST

/* A cache file truncated: a note names what was rebuilt, the open
 * succeeds with the right records, and the next open reuses it again. */
START_TEST(index_cache_corrupt_rebuilt_with_note)
{
	char dir[256], src[300], ix[300], path[600];
	struct notes nt = { 0 };
	struct bfs_dataset_opts o = { .comp = BFS_COMP_AUTO,
				      .on_note = on_note,
				      .progress_ctx = &nt };
	struct bfs_dataset *ds;
	struct dirent *de;
	DIR *d;
	unsigned cut = 0;

	test_mkdir(dir, sizeof(dir), "check_dataset");
	snprintf(src, sizeof(src), "%s/src", dir);
	snprintf(ix, sizeof(ix), "%s/ix", dir);
	ck_assert_int_eq(mkdir(src, 0755), 0);
	ck_assert_int_eq(mkdir(ix, 0755), 0);
	o.index_dir = ix;
	put_named(src, "s0", 1, 20);
	put_named(src, "s1", 2, 30);
	bfs_dataset_close(open_ok(src, &o));
	d = opendir(ix);
	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", ix, de->d_name);
		ck_assert_int_eq(truncate(path, 10), 0);
		cut++;
	}
	closedir(d);
	ck_assert_uint_gt(cut, 0);
	ds = open_ok(src, &o);
	ck_assert(!bfs_dataset_index_reused(ds));
	ck_assert_int_gt(nt.n, 0);
	expect_records(ds, 0, 1, 20, 0);
	expect_records(ds, 20, 2, 30, 1);
	bfs_dataset_close(ds);
	ds = open_ok(src, &o);
	ck_assert(bfs_dataset_index_reused(ds));
	bfs_dataset_close(ds);
	test_rmdir(dir);
}
END_TEST

/* ---------------------------------------------------------- the unions */

/* Three sources as one: shards end to end, records numbered on, each
 * read from its own member's shard; no schema of its own. */
START_TEST(union_counts_and_lookups)
{
	char dir[256], s[3][300];
	struct bfs_dataset *m[3], *u = NULL;
	uint64_t first;

	test_mkdir(dir, sizeof(dir), "check_dataset");
	for (int k = 0; k < 3; k++) {
		snprintf(s[k], sizeof(s[k]), "%s/s%d", dir, k);
		ck_assert_int_eq(mkdir(s[k], 0755), 0);
	}
	put_named(s[0], "a", 1, 6);
	put_named(s[0], "b", 2, 3);
	put_named(s[1], "a", 3, 11);
	put_named(s[2], "a", 4, 2);
	for (int k = 0; k < 3; k++)
		m[k] = open_ok(s[k], NULL);
	ck_assert_int_eq(bfs_dataset_union(&u, m, 3), 0);
	ck_assert_uint_eq(bfs_dataset_nshards(u), 4);
	ck_assert_uint_eq(bfs_dataset_nrecords(u), 22);
	ck_assert_ptr_null(bfs_dataset_schema(u));
	ck_assert_uint_eq(bfs_dataset_max_record_len(u),
			  bfs_dataset_max_record_len(m[0]) > bfs_dataset_max_record_len(m[1])
				  ? bfs_dataset_max_record_len(m[0])
				  : bfs_dataset_max_record_len(m[1]));
	first = 0;
	expect_records(u, first, 1, 6, 0);
	expect_records(u, first += 6, 2, 3, 1);
	expect_records(u, first += 3, 3, 11, 2);
	expect_records(u, first += 11, 4, 2, 3);
	ck_assert_int_eq(bfs_dataset_locate(u, 22, NULL, NULL, NULL), -ENOENT);
	ck_assert_ptr_eq(bfs_dataset_shard(u, 2), bfs_dataset_shard(m[1], 0));
	bfs_dataset_close(u);
	/* the members still read after their union is closed */
	expect_records(m[1], 0, 3, 11, 0);
	for (int k = 0; k < 3; k++)
		bfs_dataset_close(m[k]);
	test_rmdir(dir);
}
END_TEST

/* A union of one, and one whose member is itself read elsewhere: the
 * member order decides the numbering (s1 first, then s0). */
START_TEST(union_member_order_decides_numbering)
{
	char dir[256], s0[300], s1[300];
	struct bfs_dataset *m[2], *u = NULL;

	test_mkdir(dir, sizeof(dir), "check_dataset");
	snprintf(s0, sizeof(s0), "%s/s0", dir);
	snprintf(s1, sizeof(s1), "%s/s1", dir);
	ck_assert_int_eq(mkdir(s0, 0755), 0);
	ck_assert_int_eq(mkdir(s1, 0755), 0);
	put_named(s0, "a", 1, 4);
	put_named(s1, "a", 2, 9);
	m[0] = open_ok(s1, NULL);
	m[1] = open_ok(s0, NULL);
	ck_assert_int_eq(bfs_dataset_union(&u, m, 2), 0);
	ck_assert_uint_eq(bfs_dataset_nrecords(u), 13);
	expect_records(u, 0, 2, 9, 0);
	expect_records(u, 9, 1, 4, 1);
	bfs_dataset_close(u);
	ck_assert_int_eq(bfs_dataset_union(&u, m + 1, 1), 0);
	ck_assert_uint_eq(bfs_dataset_nrecords(u), 4);
	expect_records(u, 0, 1, 4, 0);
	bfs_dataset_close(u);
	bfs_dataset_close(m[0]);
	bfs_dataset_close(m[1]);
	test_rmdir(dir);
}
END_TEST

/* ------------------------------------------------------- schemas mixed */

/* n records whose only feature is `name` (int64 [1]). */
static void put_examples(const char *path, const char *name, unsigned n)
{
	FILE *f = fopen(path, "wb");

	ck_assert_ptr_nonnull(f);
	for (unsigned r = 0; r < n; r++) {
		struct pb feats = { 0 }, fv, ex;
		int64_t v = r;

		fv = pb_int_feature(&v, 1, true);
		pb_add(&feats, name, &fv);
		ex = pb_example(&feats, NULL);
		put_record(f, &ex, false);
	}
	ck_assert_int_eq(fclose(f), 0);
}

/* One folder holding two datasets of unlike features: inference says so
 * in one line naming a feature and its share; one dataset alone has no
 * such line. */
START_TEST(mixed_features_reported)
{
	char dir[256], path[300];
	struct bfs_dataset_opts o = { .comp = BFS_COMP_AUTO, .infer = true };
	struct bfs_dataset *ds;
	const char *mixed;

	test_mkdir(dir, sizeof(dir), "check_dataset");
	snprintf(path, sizeof(path), "%s/a", dir);
	put_examples(path, "alpha", 10);
	ds = open_ok(dir, &o);
	ck_assert_ptr_nonnull(bfs_dataset_schema(ds));
	ck_assert_ptr_null(bfs_dataset_mixed(ds));
	bfs_dataset_close(ds);
	snprintf(path, sizeof(path), "%s/b", dir);
	put_examples(path, "beta", 10);
	ds = open_ok(dir, &o);
	mixed = bfs_dataset_mixed(ds);
	ck_assert_ptr_nonnull(mixed);
	ck_assert_msg(strstr(mixed, "'alpha' is in 10 of 20") != NULL, "%s", mixed);
	ck_assert_ptr_null(strchr(mixed, '\n'));
	bfs_dataset_close(ds);
	test_rmdir(dir);
}
END_TEST

/* ------------------------------------------------------------------ TFDS */

/* A TFDS version folder: known by its two JSON files, its splits listed
 * from the shard names, a split's glob opening only that split's shards. */
START_TEST(tfds_folder_splits)
{
	char dir[256], glob[400];
	struct bfs_dataset *ds;
	char *splits;

	test_mkdir(dir, sizeof(dir), "check_dataset");
	put_named(dir, "mnist-train.tfrecord-00000-of-00002", 1, 5);
	put_named(dir, "mnist-train.tfrecord-00001-of-00002", 2, 6);
	put_named(dir, "mnist-test.tfrecord-00000-of-00001", 3, 7);
	ck_assert(!bfs_tfds_is_dir(dir));
	put_text(dir, "dataset_info.json", "{}");
	put_text(dir, "features.json", "{}");
	ck_assert(bfs_tfds_is_dir(dir));
	splits = bfs_tfds_splits(dir);
	ck_assert_ptr_nonnull(splits);
	ck_assert_str_eq(splits, "test, train");
	ck_assert(bfs_tfds_split_listed(splits, "train"));
	ck_assert(!bfs_tfds_split_listed(splits, "validation"));
	free(splits);
	ck_assert_int_eq(bfs_tfds_glob(glob, sizeof(glob), dir, "train"), 0);
	ds = open_ok(glob, NULL);
	ck_assert_uint_eq(bfs_dataset_nshards(ds), 2);
	ck_assert_uint_eq(bfs_dataset_nrecords(ds), 11);
	expect_records(ds, 0, 1, 5, 0);
	expect_records(ds, 5, 2, 6, 1);
	bfs_dataset_close(ds);
	/* the whole folder: its JSON files passed over, all three shards */
	ds = open_ok(dir, NULL);
	ck_assert_uint_eq(bfs_dataset_nshards(ds), 3);
	ck_assert_uint_eq(bfs_dataset_nrecords(ds), 18);
	bfs_dataset_close(ds);
	ck_assert_int_eq(bfs_tfds_glob(glob, 8, dir, "train"), -ENAMETOOLONG);
	test_rmdir(dir);
}
END_TEST

/* The names a folder passed over, listed; the cache file of a shard named
 * by a hash of its absolute path; dropping deletes exactly the files
 * named for the shards asked, under each suffix, and nothing else. */
START_TEST(passed_over_and_cache_file_names)
{
	char dir[256], ix[300], f0[600], f1[600], g0[600], abs[PATH_MAX], real[PATH_MAX];
	const char *const sufs[] = { ".x.idx", ".y.idx" };
	bool drop[2] = { true, false };
	struct bfs_dataset *ds;
	char **names = NULL;
	size_t n = 0;

	test_mkdir(dir, sizeof(dir), "check_dataset");
	snprintf(ix, sizeof(ix), "%s/ix", dir);
	ck_assert_int_eq(mkdir(ix, 0755), 0);
	put_named(dir, "s0", 1, 3);
	put_named(dir, "s1", 2, 3);
	put_text(dir, "README.md", "x");
	put_text(dir, "_SUCCESS", "");
	ck_assert_int_eq(bfs_source_passed_over(&names, &n, dir), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(names[0], "README.md");
	ck_assert_str_eq(names[1], "_SUCCESS");
	bfs_source_free(names, n);

	ds = open_ok(dir, NULL);
	ck_assert_int_eq(
		bfs_dataset_cache_file(ds, 0, ix, sufs[0], f0, sizeof(f0), abs, sizeof(abs)), 0);
	snprintf(real, sizeof(real), "%s/s0", dir);
	ck_assert_str_eq(abs, real);
	ck_assert_uint_eq(strlen(f0), strlen(ix) + 1 + 16 + strlen(sufs[0]));
	ck_assert(strncmp(f0, ix, strlen(ix)) == 0);
	ck_assert_uint_eq(strspn(f0 + strlen(ix) + 1, "0123456789abcdef"), 16);
	ck_assert_int_eq(
		bfs_dataset_cache_file(ds, 1, ix, sufs[0], f1, sizeof(f1), abs, sizeof(abs)), 0);
	ck_assert_str_ne(f0, f1);
	ck_assert_int_eq(
		bfs_dataset_cache_file(ds, 0, ix, sufs[1], g0, sizeof(g0), abs, sizeof(abs)), 0);
	ck_assert_int_eq(
		bfs_dataset_cache_file(ds, 2, ix, sufs[0], f1, sizeof(f1), abs, sizeof(abs)),
		-EINVAL);
	ck_assert_int_eq(
		bfs_dataset_cache_file(ds, 1, ix, sufs[0], f1, sizeof(f1), abs, sizeof(abs)), 0);
	test_spit(f0, (const uint8_t *)"a", 1);
	test_spit(f1, (const uint8_t *)"b", 1);
	test_spit(g0, (const uint8_t *)"c", 1);
	put_text(ix, "other.idx", "d");
	bfs_dataset_drop_cache_files(ds, ix, sufs, 2, drop);
	ck_assert_int_ne(access(f0, F_OK), 0);
	ck_assert_int_ne(access(g0, F_OK), 0);
	ck_assert_int_eq(access(f1, F_OK), 0);
	ck_assert_uint_eq(count_files(ix), 2); /* f1 and other.idx */
	bfs_dataset_close(ds);
	test_rmdir(dir);
}
END_TEST

/* record_lens: random records' lengths as record_len gives them one by
 * one, across shards, 0 for one out of range. */
START_TEST(record_lens_match_one_by_one)
{
	char dir[256];
	struct bfs_dataset *ds;
	uint64_t recs[] = { 9, 0, 3, 13, 8, 1, 100 };
	uint32_t lens[7];

	test_mkdir(dir, sizeof(dir), "check_dataset");
	put_named(dir, "a", 1, 7);
	put_named(dir, "b", 2, 7);
	ds = open_ok(dir, NULL);
	bfs_dataset_record_lens(ds, recs, 7, lens);
	for (int k = 0; k < 6; k++)
		ck_assert_uint_eq(lens[k], recs[k] < 7 ? rec_len(1, (unsigned)recs[k])
						       : rec_len(2, (unsigned)recs[k] - 7));
	ck_assert_uint_eq(lens[6], 0);
	bfs_dataset_close(ds);
	test_rmdir(dir);
}
END_TEST

/* A zlib shard (the other compression auto detects), and a union whose
 * second member holds a cut shard: the union says so at its own index. */
START_TEST(zlib_shard_and_union_keeps_cut)
{
	char dir[256], s0[300], s1[300], cmd[1400];
	struct bfs_dataset_opts o = { .comp = BFS_COMP_AUTO, .keep_cut = true };
	struct bfs_dataset *m[2], *u = NULL;
	FILE *f;

	test_mkdir(dir, sizeof(dir), "check_dataset");
	snprintf(s0, sizeof(s0), "%s/z", dir);
	put_shard(s0, 8, 25);
	snprintf(cmd, sizeof(cmd),
		 "/usr/bin/python3 -c 'import sys, zlib; p = sys.argv[1]; "
		 "d = open(p, \"rb\").read(); open(p, \"wb\").write(zlib.compress(d))' '%s'",
		 s0);
	ck_assert_int_eq(system(cmd), 0);
	m[0] = open_ok(s0, NULL);
	ck_assert_uint_eq(bfs_dataset_nrecords(m[0]), 25);
	expect_records(m[0], 0, 8, 25, 0);

	snprintf(s1, sizeof(s1), "%s/cut", dir);
	put_shard(s1, 9, 6);
	f = fopen(s1, "r+b");
	ck_assert_ptr_nonnull(f);
	fseek(f, 0, SEEK_END);
	ck_assert_int_eq(ftruncate(fileno(f), ftell(f) - 3), 0);
	fclose(f);
	m[1] = open_ok(s1, &o);
	ck_assert_int_eq(bfs_dataset_union(&u, m, 2), 0);
	ck_assert_uint_eq(bfs_dataset_nrecords(u), 25 + 5);
	ck_assert_ptr_null(bfs_dataset_cut(u, 0));
	ck_assert_ptr_nonnull(bfs_dataset_cut(u, 1));
	ck_assert_str_eq(bfs_dataset_cut(u, 1), bfs_dataset_cut(m[1], 0));
	expect_records(u, 25, 9, 5, 1);
	bfs_dataset_close(u);
	bfs_dataset_close(m[0]);
	bfs_dataset_close(m[1]);
	test_rmdir(dir);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("dataset");
	TCase *dataset = tcase_create("dataset");

	tcase_add_test(dataset, cache_files_in_the_source_directory_are_not_shards);
	tcase_add_test(dataset, open_folder_sorted_and_passes_over);
	tcase_add_test(dataset, open_glob_and_single_file);
	tcase_add_test(dataset, open_compressed_shard);
	tcase_add_test(dataset, open_errors_name_the_file);
	tcase_add_test(dataset, open_unreadable_names_the_file);
	tcase_add_test(dataset, keep_cut_keeps_whole_records);
	tcase_add_test(dataset, bad_crc_record_reported_and_read_fails);
	tcase_add_test(dataset, read_many_across_shards);
	tcase_add_test(dataset, index_cache_reused_then_rebuilt_when_stale);
	tcase_add_test(dataset, index_cache_same_size_rewrite_rescanned);
	tcase_add_test(dataset, index_cache_corrupt_rebuilt_with_note);
	tcase_add_test(dataset, union_counts_and_lookups);
	tcase_add_test(dataset, union_member_order_decides_numbering);
	tcase_add_test(dataset, mixed_features_reported);
	tcase_add_test(dataset, tfds_folder_splits);
	tcase_add_test(dataset, passed_over_and_cache_file_names);
	tcase_add_test(dataset, record_lens_match_one_by_one);
	tcase_add_test(dataset, zlib_shard_and_union_keeps_cut);
	tcase_set_timeout(dataset, 60);
	suite_add_tcase(s, dataset);
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
