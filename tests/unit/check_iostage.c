/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_iostage.c — a mount's I/O stage (fs/iostage.h) over a local shard
 * put through it (io_all): batches read through the stage and the cache are
 * the bytes the decoder builds alone, the counters reach stats.json's keys,
 * a disk cache is used or left out with a note, and stopping is safe at
 * any time.
 */
#include "iostage.h"

#include "cache.h"
#include "decodertest.h"
#include "fstest.h"
#include "stats.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#define RECORDS 400

static char notes[1024];

static void note(void *ctx, const char *msg)
{
	(void)ctx;
	snprintf(notes + strlen(notes), sizeof(notes) - strlen(notes), "%s\n", msg);
}

static void no_corrupt(void *ctx, const char *msg, unsigned skipped)
{
	(void)ctx, (void)skipped;
	ck_abort_msg("corrupt: %s", msg);
}

static struct bfs_iostage_opts opts(void)
{
	struct bfs_iostage_opts o = {
		.depth = 4,
		.readahead = 8u << 20,
		.all = true,
		.lookahead = 2,
		.backend = BFS_FETCH_THREADS,
		.note = note,
	};
	return o;
}

/* Every batch of epoch 0 through a cache that reads via the stage, each
 * compared with the decoder's own build. */
static void read_through(struct fstest *fx, struct bfs_iostage *st)
{
	struct bfs_cache *c = NULL;
	const struct bfs_batcher *const *b = (const struct bfs_batcher *const *)fx->b;

	ck_assert_int_eq(bfs_cache_new(&c, b, 1, 64u << 20, 2, 2, no_corrupt, NULL), 0);
	bfs_cache_set_io(c, bfs_iostage_plan(st));
	ck_assert_int_eq(bfs_cache_start(c), 0);
	for (uint64_t i = 0; i < bfs_batcher_nbatches(fx->b[0]); i++) {
		struct bfs_cache_entry *e = NULL;
		struct bfs_geom *g = NULL;
		uint8_t *want = NULL;

		ck_assert_int_eq(bfs_cache_get(&e, c, 0, 0, i), 0);
		ck_assert_int_eq(test_batch_build(&want, &g, fx->b[0], 0, i, no_corrupt, NULL), 0);
		ck_assert_uint_eq(e->geom->st_size, g->st_size);
		ck_assert_int_eq(memcmp(e->buf, want, g->st_size), 0);
		free(want);
		bfs_geom_free(g);
		bfs_cache_put(c, e);
	}
	/* the order of bfs_fs_free: the stage stops, the builds end, then it goes */
	bfs_iostage_stop(st);
	bfs_cache_free(c);
}

START_TEST(batches_read_through_the_stage_are_the_decoders)
{
	struct bfs_iostage_opts o = opts();
	struct bfs_iostage *st = NULL;
	struct bfs_stats_snap s;
	struct fstest fx;

	fstest_setup(&fx, RECORDS, FSTEST_RAGGED);
	ck_assert_msg(bfs_iostage_new(&st, fx.ds, (const struct bfs_batcher *const *)fx.b, 2, &o) ==
			      0,
		      "%s", bfs_err_msg());
	ck_assert_ptr_nonnull(bfs_iostage_plan(st));
	read_through(&fx, st);
	memset(&s, 0, sizeof(s));
	bfs_iostage_stats(st, &s);
	ck_assert(s.has[BFS_SGROUP_IO]);
	ck_assert(!s.has[BFS_SGROUP_DISK]);
	ck_assert_str_eq(s.v[BFS_STAT_IO_BACKEND].s, "threads");
	ck_assert_uint_eq(s.v[BFS_STAT_IO_DEPTH].u, 4);
	ck_assert_uint_eq(s.v[BFS_STAT_IO_READAHEAD].u, 8u << 20);
	ck_assert_uint_gt(s.v[BFS_STAT_IO_READS].u, 0);
	ck_assert_uint_gt(s.v[BFS_STAT_IO_BYTES].u, 0);
	ck_assert_uint_eq(s.v[BFS_STAT_IO_FAILED].u, 0);
	bfs_iostage_stop(st); /* again: nothing more */
	bfs_iostage_free(st);
	bfs_iostage_stop(NULL);
	bfs_iostage_free(NULL);
	ck_assert_str_eq(notes, "");
	fstest_teardown(&fx);
}
END_TEST

START_TEST(a_disk_cache_is_used_or_left_out_with_a_note)
{
	struct bfs_iostage_opts o = opts();
	struct bfs_iostage *st = NULL;
	struct bfs_stats_snap s;
	struct fstest fx;
	char dir[128], file[256];

	fstest_setup(&fx, RECORDS, FSTEST_FIXED);
	test_mkdir(dir, sizeof(dir), "check_iostage");
	o.disk_cache = dir;
	o.disk_cache_size = 32u << 20;
	ck_assert_int_eq(
		bfs_iostage_new(&st, fx.ds, (const struct bfs_batcher *const *)fx.b, 2, &o), 0);
	read_through(&fx, st);
	memset(&s, 0, sizeof(s));
	bfs_iostage_stats(st, &s);
	ck_assert(s.has[BFS_SGROUP_IO] && s.has[BFS_SGROUP_DISK]);
	ck_assert_uint_eq(s.v[BFS_STAT_DISK_CACHE_LIMIT].u, 32u << 20);
	bfs_iostage_free(st);
	ck_assert_str_eq(notes, "");

	/* a DIR that is a file: the stage goes on without it, and says why */
	snprintf(file, sizeof(file), "%s/a-file", dir);
	test_spit(file, (const uint8_t *)"x", 1);
	o.disk_cache = file;
	ck_assert_int_eq(
		bfs_iostage_new(&st, fx.ds, (const struct bfs_batcher *const *)fx.b, 2, &o), 0);
	ck_assert_msg(strstr(notes, "; mounted without it\n") != NULL, "%s", notes);
	ck_assert_msg(strstr(notes, file) != NULL, "%s", notes);
	read_through(&fx, st);
	memset(&s, 0, sizeof(s));
	bfs_iostage_stats(st, &s);
	ck_assert(s.has[BFS_SGROUP_IO] && !s.has[BFS_SGROUP_DISK]);
	bfs_iostage_free(st);
	test_rmdir(dir);
	fstest_teardown(&fx);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("iostage");
	TCase *tc = tcase_create("iostage");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, batches_read_through_the_stage_are_the_decoders);
	tcase_add_test(tc, a_disk_cache_is_used_or_left_out_with_a_note);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
