/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_cntcache.c — unit tests of decoder/batch/cntcache.c, the ragged counts
 * cached in index_dir: a batcher reads them back without decoding (the
 * geometry stays when the records no longer decode), rewrites a stale or
 * corrupt entry with one note, and carries on with one note when the cache
 * cannot be written; small shards share one pack per directory and
 * datasets sharing a directory keep each other's entries; counts files
 * under the first format's names are never read and go once rewritten;
 * the cache's own calls write each pack once.
 */
#include "batchtest.h"
#include "cntcache.h"
#include "counts.h"

#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

static Suite *suite(void)
{
	Suite *s = suite_create("cntcache");
	TCase *cntcache = tcase_create("cntcache");

	tcase_add_test(cntcache, batcher_reads_cached_counts_without_decoding);
	tcase_add_test(cntcache, counts_of_small_shards_share_one_pack_per_directory);
	tcase_add_test(cntcache, datasets_sharing_a_directory_keep_each_others_counts);
	tcase_add_test(cntcache, old_counts_file_names_are_passed_over_then_dropped);
	tcase_add_test(cntcache, cntcache_writes_each_pack_once_at_save);
	suite_add_tcase(s, cntcache);
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
