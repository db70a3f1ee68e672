/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_views.c — the epoch views of all/ (fs/views.h) over a real dataset:
 * one view per rank without ragged tensors, one per epoch with them, the
 * least recently used out first, a reference outliving its place in the
 * table, and many threads asking at once.
 */
#include "views.h"

#include "fstest.h"

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RECORDS 300
#define KEEP 4

/* The rows of (rank, epoch)'s view, made afresh. */
static uint64_t rows_of(struct fstest *fx, uint64_t rank, uint64_t epoch)
{
	struct bfs_epoch_view *v = NULL;
	uint64_t rows;

	ck_assert_int_eq(bfs_epoch_view_new(&v, fx->b[rank], epoch), 0);
	rows = v->rows;
	bfs_epoch_view_free(v);
	return rows;
}

static struct bfs_view_ref *get(struct bfs_views *vs, uint64_t rank, uint64_t epoch)
{
	struct bfs_view_ref *r = NULL;

	ck_assert_int_eq(bfs_views_get(&r, vs, rank, epoch), 0);
	ck_assert_ptr_nonnull(r);
	ck_assert_ptr_nonnull(r->v);
	return r;
}

START_TEST(without_ragged_tensors_a_rank_has_one_view)
{
	struct fstest fx;
	struct bfs_views *vs = NULL;
	struct bfs_view_ref *a, *b, *c;

	fstest_setup(&fx, RECORDS, FSTEST_FIXED);
	ck_assert_int_eq(bfs_views_new(&vs, (const struct bfs_batcher *const *)fx.b, 2, KEEP), 0);
	a = get(vs, 0, 0);
	b = get(vs, 0, 7);
	ck_assert_ptr_eq(a, b);
	c = get(vs, 1, 7); /* another rank: its own */
	ck_assert_ptr_ne(a, c);
	ck_assert_uint_eq(c->v->rows, rows_of(&fx, 1, 0));
	for (uint64_t e = 0; e < 3 * KEEP; e++) { /* epochs never push it out */
		struct bfs_view_ref *r = get(vs, 0, e);

		ck_assert_ptr_eq(r, a);
		bfs_views_put(vs, r);
	}
	bfs_views_put(vs, a);
	bfs_views_put(vs, b);
	bfs_views_put(vs, c);
	bfs_views_put(vs, NULL);
	bfs_views_free(vs);
	bfs_views_free(NULL);
	fstest_teardown(&fx);
}
END_TEST

START_TEST(with_ragged_tensors_each_epoch_has_its_view)
{
	struct fstest fx;
	struct bfs_views *vs = NULL;
	struct bfs_view_ref *r[3];

	fstest_setup(&fx, RECORDS, FSTEST_RAGGED);
	ck_assert_int_eq(bfs_views_new(&vs, (const struct bfs_batcher *const *)fx.b, 2, KEEP), 0);
	r[0] = get(vs, 0, 0);
	r[1] = get(vs, 0, 1);
	r[2] = get(vs, 0, 1);
	ck_assert_ptr_ne(r[0], r[1]);
	ck_assert_ptr_eq(r[1], r[2]);
	ck_assert_uint_eq(r[0]->v->rows, rows_of(&fx, 0, 0));
	/* the totals of the chunks depend on the epoch's order */
	ck_assert_uint_eq(r[0]->v->nchunks, r[1]->v->nchunks);
	ck_assert(memcmp(r[0]->v->prefix, r[1]->v->prefix,
			 (r[0]->v->nchunks + 1) * r[0]->v->nslots * sizeof(uint64_t)) != 0);
	for (int i = 0; i < 3; i++)
		bfs_views_put(vs, r[i]);
	bfs_views_free(vs);
	fstest_teardown(&fx);
}
END_TEST

/* The table holds KEEP views: the least recently asked for goes first, and
 * a reference held keeps its view whole after it left the table. */
START_TEST(the_least_recently_used_view_goes_first)
{
	struct fstest fx;
	struct bfs_views *vs = NULL;
	struct bfs_view_ref *held[KEEP], *r;

	fstest_setup(&fx, RECORDS, FSTEST_RAGGED);
	ck_assert_int_eq(bfs_views_new(&vs, (const struct bfs_batcher *const *)fx.b, 2, KEEP), 0);
	for (uint64_t e = 0; e < KEEP; e++)
		held[e] = get(vs, 0, e);
	bfs_views_put(vs, get(vs, 0, 0)); /* epoch 0 used again: epoch 1 is the oldest */
	bfs_views_put(vs, get(vs, 0, KEEP)); /* pushes epoch 1 out */
	r = get(vs, 0, 0);
	ck_assert_ptr_eq(r, held[0]);
	bfs_views_put(vs, r);
	r = get(vs, 0, 1); /* made again; the old one lives on in held[1] */
	ck_assert_ptr_ne(r, held[1]);
	ck_assert_uint_eq(r->v->rows, held[1]->v->rows);
	ck_assert_int_eq(memcmp(r->v->prefix, held[1]->v->prefix,
				(r->v->nchunks + 1) * r->v->nslots * sizeof(uint64_t)),
			 0);
	bfs_views_put(vs, r);
	for (uint64_t e = 0; e < KEEP; e++)
		bfs_views_put(vs, held[e]);
	/* many epochs through a table of KEEP: nothing leaks (ASan) */
	for (uint64_t e = 0; e < 5 * KEEP; e++)
		bfs_views_put(vs, get(vs, e % 2, e));
	bfs_views_free(vs);
	fstest_teardown(&fx);
}
END_TEST

#define THREADS 8
#define GETS 400

struct asker {
	struct bfs_views *vs;
	const uint64_t *rows; /* [2][EPOCHS] */
	unsigned seed;
};

#define EPOCHS (2 * KEEP)

static void *ask_many(void *arg)
{
	struct asker *a = arg;
	struct bfs_view_ref *held = NULL;

	for (int i = 0; i < GETS; i++) {
		unsigned k = (a->seed + (unsigned)i * 40503u) % (2 * EPOCHS);
		uint64_t rank = k % 2, epoch = k / 2;
		struct bfs_view_ref *r = NULL;

		ck_assert_int_eq(bfs_views_get(&r, a->vs, rank, epoch), 0);
		ck_assert_uint_eq(r->v->rows, a->rows[rank * EPOCHS + epoch]);
		/* hold every third one across the next gets */
		if (i % 3 == 0) {
			bfs_views_put(a->vs, held);
			held = r;
		} else {
			bfs_views_put(a->vs, r);
		}
	}
	bfs_views_put(a->vs, held);
	return NULL;
}

START_TEST(threads_share_the_views)
{
	struct fstest fx;
	struct bfs_views *vs = NULL;
	struct asker a[THREADS];
	pthread_t tid[THREADS];
	uint64_t rows[2 * EPOCHS];

	fstest_setup(&fx, RECORDS, FSTEST_RAGGED);
	for (uint64_t k = 0; k < 2 * EPOCHS; k++)
		rows[k] = rows_of(&fx, k / EPOCHS, k % EPOCHS);
	ck_assert_int_eq(bfs_views_new(&vs, (const struct bfs_batcher *const *)fx.b, 2, KEEP), 0);
	for (int i = 0; i < THREADS; i++) {
		a[i] = (struct asker){ .vs = vs, .rows = rows, .seed = (unsigned)i * 7u };
		ck_assert_int_eq(pthread_create(&tid[i], NULL, ask_many, &a[i]), 0);
	}
	for (int i = 0; i < THREADS; i++)
		pthread_join(tid[i], NULL);
	bfs_views_free(vs);
	fstest_teardown(&fx);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("views");
	TCase *tc = tcase_create("views");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, without_ragged_tensors_a_rank_has_one_view);
	tcase_add_test(tc, with_ragged_tensors_each_epoch_has_its_view);
	tcase_add_test(tc, the_least_recently_used_view_goes_first);
	tcase_add_test(tc, threads_share_the_views);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
