/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_dataset.c — unit tests of decoder/dataset.c: with index_dir the
 * SOURCE directory itself, every file the index and the ragged counts put
 * there is passed over as a shard, so each open lists the same shards and
 * records, and the counts are read back.
 */
#include "batchtest.h"
#include "dataset.h"

#include <check.h>
#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

static Suite *suite(void)
{
	Suite *s = suite_create("dataset");
	TCase *dataset = tcase_create("dataset");

	tcase_add_test(dataset, cache_files_in_the_source_directory_are_not_shards);
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
