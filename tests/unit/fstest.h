/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fstest.h — a small real dataset for the fs/ suites: a shard of `records`
 * Examples (x: float [2]; tok: 0..5 int64 values, so that epochs differ in
 * their ragged totals), opened, with a batcher under a schema and a second
 * rank's batcher (world=2). Each failure is a libcheck assertion.
 */
#ifndef BFS_TESTS_FSTEST_H
#define BFS_TESTS_FSTEST_H

#include "batch.h"
#include "dataset.h"
#include "pbtest.h"
#include "schema.h"
#include "testfiles.h"

#include <unistd.h>

#define FSTEST_FIXED "{\"features\": {\"x\": {\"kind\": \"float\", \"shape\": [2]}}}"
#define FSTEST_RAGGED                                                                              \
	"{\"features\": {\"x\": {\"kind\": \"float\", \"shape\": [2]},"                            \
	" \"tok\": {\"kind\": \"int64\", \"shape\": [-1], \"ragged\": true}}}"

struct fstest {
	char path[64];
	struct bfs_dataset *ds;
	struct bfs_schema *sc;
	struct bfs_batcher *b[2]; /* ranks 0 and 1 of world=2 */
};

static inline void fstest_write(const char *path, long records)
{
	FILE *f = fopen(path, "wb");

	ck_assert_ptr_nonnull(f);
	for (long i = 0; i < records; i++) {
		struct pb feats = { 0 }, fx, ft, ex;
		float x[2] = { (float)i, (float)-i };
		int64_t v[6] = { i, i + 1, i + 2, i + 3, i + 4, i + 5 };

		fx = pb_float_feature(x, 2, true);
		ft = pb_int_feature(v, (size_t)(i * 7 % 6), true);
		pb_add(&feats, "x", &fx);
		pb_add(&feats, "tok", &ft);
		ex = pb_example(&feats, NULL);
		test_put_record(f, ex.d, (uint32_t)ex.n);
	}
	ck_assert_int_eq(fclose(f), 0);
}

/* The shard written at a new path in fx->path (nothing opened yet). */
static inline void fstest_write_shard(struct fstest *fx, long records)
{
	int fd;

	memset(fx, 0, sizeof(*fx));
	snprintf(fx->path, sizeof(fx->path), "/tmp/check_fs_XXXXXX");
	fd = mkstemp(fx->path);
	ck_assert_int_ge(fd, 0);
	close(fd);
	fstest_write(fx->path, records);
}

/* fx->path's shard opened: batch_size 37, chunks of 50 rows, shuffled
 * with seed 9. */
static inline void fstest_open(struct fstest *fx, const char *schema)
{
	struct bfs_dataset_opts dopt = { .comp = BFS_COMP_AUTO };
	struct bfs_batcher_opts bopt = { .batch_size = 37,
					 .seed = 9,
					 .shuffle = true,
					 .world = 2,
					 .verify = true,
					 .jobs = 1,
					 .chunk_rows = 50 };

	ck_assert_int_eq(bfs_dataset_open(&fx->ds, fx->path, &dopt), 0);
	ck_assert_msg(bfs_schema_from_json(&fx->sc, schema, strlen(schema)) == 0, "%s",
		      bfs_err_msg());
	ck_assert_msg(bfs_batcher_new(&fx->b[0], fx->ds, fx->sc, &bopt) == 0, "%s", bfs_err_msg());
	ck_assert_int_eq(bfs_batcher_new_rank(&fx->b[1], fx->b[0], 1), 0);
}

static inline void fstest_setup(struct fstest *fx, long records, const char *schema)
{
	fstest_write_shard(fx, records);
	fstest_open(fx, schema);
}

static inline void fstest_teardown(struct fstest *fx)
{
	bfs_batcher_free(fx->b[1]);
	bfs_batcher_free(fx->b[0]);
	bfs_schema_free(fx->sc);
	bfs_dataset_close(fx->ds);
	unlink(fx->path);
}

#endif
