/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_cache.c — decoded batches and the prefetch workers (fs/cache.h)
 * over a real dataset, every byte against an independent build of the
 * batch (test_batch_build): the workers fill the batches ahead of a reader
 * (its next reads are hits); the bytes held stay within the budget, least
 * recently used entries going first; readers of the same batches at once
 * get the same bytes, each batch decoded once; freeing the cache while its
 * workers are busy ends them.
 */
#include "cache.h"

#include "decodertest.h"
#include "fstest.h"

#include <check.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RECORDS 400
#define EPOCHS 2

struct ref {
	uint64_t nb;
	uint8_t *buf[EPOCHS][16];
	uint64_t size[EPOCHS][16];
};

static void ref_build(struct ref *r, const struct bfs_batcher *b)
{
	r->nb = bfs_batcher_nbatches(b);
	ck_assert_uint_le(r->nb, 16);
	for (uint64_t e = 0; e < EPOCHS; e++)
		for (uint64_t i = 0; i < r->nb; i++) {
			struct bfs_geom *g = NULL;

			ck_assert_int_eq(test_batch_build(&r->buf[e][i], &g, b, e, i, NULL, NULL),
					 0);
			r->size[e][i] = g->st_size;
			bfs_geom_free(g);
		}
}

static void ref_free(struct ref *r)
{
	for (uint64_t e = 0; e < EPOCHS; e++)
		for (uint64_t i = 0; i < r->nb; i++)
			free(r->buf[e][i]);
}

/* Get (e, i) and check its bytes; 1 when they match. */
static int get_check(struct bfs_cache *c, const struct ref *r, uint64_t e, uint64_t i)
{
	struct bfs_cache_entry *en = NULL;
	int ok;

	if (bfs_cache_get(&en, c, 0, e, i) != 0)
		return 0;
	ok = en->geom->st_size == r->size[e][i] &&
	     memcmp(en->buf, r->buf[e][i], r->size[e][i]) == 0;
	bfs_cache_put(c, en);
	return ok;
}

static void stats(struct bfs_cache *c, struct bfs_cache_stats *st)
{
	bfs_cache_stats(c, st);
}

START_TEST(the_workers_fill_ahead_of_the_reader)
{
	struct fstest t;
	struct ref r;
	struct bfs_cache *c = NULL;
	struct bfs_cache_stats st;
	struct timespec nap = { 0, 5000000 };

	fstest_setup(&t, RECORDS, FSTEST_FIXED);
	ref_build(&r, t.b[0]);
	ck_assert_int_eq(bfs_cache_new(&c, (const struct bfs_batcher *const *)t.b, 1, 64u << 20, 2,
				       3, NULL, NULL),
			 0);
	bfs_cache_set_epochs(c, EPOCHS);
	ck_assert_int_eq(bfs_cache_start(c), 0);
	ck_assert(get_check(c, &r, 0, 0));
	/* batches 1..3 come ready without being asked for */
	for (int k = 0; k < 2000; k++) {
		stats(c, &st);
		if (st.prefetch_ready >= 3)
			break;
		nanosleep(&nap, NULL);
	}
	stats(c, &st);
	ck_assert_uint_ge(st.prefetch_ready, 3);
	ck_assert_uint_ge(st.prefetch_issued, 3);
	ck_assert_uint_eq(st.misses, 1);
	for (uint64_t i = 1; i <= 3; i++)
		ck_assert(get_check(c, &r, 0, i));
	stats(c, &st);
	ck_assert_uint_eq(st.misses, 1);
	ck_assert_uint_ge(st.hits, 3);
	bfs_cache_free(c);
	ref_free(&r);
	fstest_teardown(&t);
}
END_TEST

START_TEST(the_budget_holds_and_the_oldest_go_first)
{
	struct fstest t;
	struct ref r;
	struct bfs_cache *c = NULL;
	struct bfs_cache_stats st;
	uint64_t big = 0, budget;

	fstest_setup(&t, RECORDS, FSTEST_FIXED);
	ref_build(&r, t.b[0]);
	for (uint64_t i = 0; i < r.nb; i++)
		big = r.size[0][i] > big ? r.size[0][i] : big;
	budget = big * 5 / 2; /* two batches fit, not three */
	/* no workers: what is held is what was read */
	ck_assert_int_eq(bfs_cache_new(&c, (const struct bfs_batcher *const *)t.b, 1, budget, 0, 0,
				       NULL, NULL),
			 0);
	for (uint64_t e = 0; e < EPOCHS; e++)
		for (uint64_t i = 0; i < r.nb; i++) {
			ck_assert(get_check(c, &r, e, i));
			stats(c, &st);
			ck_assert_uint_le(st.bytes, budget);
			ck_assert_uint_le(st.entries, 2);
		}
	stats(c, &st);
	ck_assert_uint_le(st.peak_bytes, budget);
	ck_assert_uint_ge(st.evictions, EPOCHS * r.nb - 2);
	ck_assert_uint_eq(st.misses, EPOCHS * r.nb);
	/* the last one read is held; the first went long ago */
	ck_assert(get_check(c, &r, EPOCHS - 1, r.nb - 1));
	stats(c, &st);
	ck_assert_uint_eq(st.hits, 1);
	ck_assert(get_check(c, &r, 0, 0));
	stats(c, &st);
	ck_assert_uint_eq(st.misses, EPOCHS * r.nb + 1);
	/* a held entry is not evicted: the cache goes over by the one read */
	{
		struct bfs_cache_entry *held[3];

		for (int k = 0; k < 3; k++)
			ck_assert_int_eq(bfs_cache_get(&held[k], c, 0, 1, (uint64_t)k), 0);
		for (int k = 0; k < 3; k++)
			ck_assert(memcmp(held[k]->buf, r.buf[1][k], r.size[1][k]) == 0);
		for (int k = 0; k < 3; k++)
			bfs_cache_put(c, held[k]);
		ck_assert(get_check(c, &r, 0, r.nb - 1));
		stats(c, &st);
		ck_assert_uint_le(st.bytes, budget);
	}
	bfs_cache_free(c);
	ref_free(&r);
	fstest_teardown(&t);
}
END_TEST

struct reader {
	struct bfs_cache *c;
	const struct ref *r;
	unsigned id;
	int bad;
};

static void *reader_main(void *arg)
{
	struct reader *rd = arg;

	for (uint64_t e = 0; e < EPOCHS; e++)
		for (uint64_t k = 0; k < rd->r->nb; k++) {
			/* every thread in its own order, all over the same batches */
			uint64_t i = (k * (rd->id % 2 ? 1 : rd->r->nb - 1) + rd->id) % rd->r->nb;

			if (!get_check(rd->c, rd->r, e, i))
				rd->bad++;
		}
	return NULL;
}

START_TEST(readers_of_the_same_batches_get_the_same_bytes)
{
	struct fstest t;
	struct ref r;
	struct bfs_cache *c = NULL;
	struct bfs_cache_stats st;
	struct reader rd[6];
	pthread_t th[6];

	fstest_setup(&t, RECORDS, FSTEST_RAGGED);
	ref_build(&r, t.b[0]);
	ck_assert_int_eq(bfs_cache_new(&c, (const struct bfs_batcher *const *)t.b, 1, 256u << 20, 2,
				       4, NULL, NULL),
			 0);
	bfs_cache_set_epochs(c, EPOCHS);
	ck_assert_int_eq(bfs_cache_start(c), 0);
	for (unsigned i = 0; i < 6; i++) {
		rd[i] = (struct reader){ .c = c, .r = &r, .id = i };
		ck_assert_int_eq(pthread_create(&th[i], NULL, reader_main, &rd[i]), 0);
	}
	for (unsigned i = 0; i < 6; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(rd[i].bad, 0);
	}
	stats(c, &st);
	/* everything fits: each batch decoded once, however many asked */
	ck_assert_uint_eq(st.batches_decoded, EPOCHS * r.nb);
	ck_assert_uint_eq(st.evictions, 0);
	ck_assert_uint_eq(st.decode_errors, 0);
	bfs_cache_free(c);
	ref_free(&r);
	fstest_teardown(&t);
}
END_TEST

START_TEST(free_with_the_workers_busy)
{
	struct fstest t;
	struct bfs_cache *c = NULL;
	struct bfs_cache_entry *e = NULL;

	fstest_setup(&t, RECORDS, FSTEST_RAGGED);
	for (int round = 0; round < 5; round++) {
		ck_assert_int_eq(bfs_cache_new(&c, (const struct bfs_batcher *const *)t.b, 1,
					       64u << 20, 3, 12, NULL, NULL),
				 0);
		ck_assert_int_eq(bfs_cache_start(c), 0);
		/* a demand read queues the next batches: the workers start on them */
		ck_assert_int_eq(bfs_cache_get(&e, c, 0, 0, (uint64_t)round), 0);
		bfs_cache_put(c, e);
		bfs_cache_free(c); /* returns: its workers stop mid-build */
	}
	fstest_teardown(&t);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cache");
	TCase *tc = tcase_create("cache");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, the_workers_fill_ahead_of_the_reader);
	tcase_add_test(tc, the_budget_holds_and_the_oldest_go_first);
	tcase_add_test(tc, readers_of_the_same_batches_get_the_same_bytes);
	tcase_add_test(tc, free_with_the_workers_busy);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
