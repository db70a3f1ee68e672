/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_stash.c — the small tensors of the epoch views (fs/stash.h) over a
 * real dataset: what it serves equals the chunk path's bytes (split
 * offsets shifted), it holds only small tensors and only chunks it was
 * given, an epoch of small tensors only is not kept, the least recently
 * used entry goes first within the budget, and many threads fill and
 * read at once.
 */
#include "stash.h"

#include "decodertest.h"
#include "fstest.h"

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RECORDS 300
#define EPOCHS 3
#define THREADS 6

/* One (rank, epoch): its view, decoded chunks and each tensor's bytes as
 * the chunk path gives them. */
struct epoch_fx {
	struct bfs_epoch_view *v;
	uint8_t **cbuf;
	struct bfs_geom **cg;
	uint8_t **want; /* [ntensors] */
};

static void epoch_setup(struct epoch_fx *x, const struct bfs_batcher *b, uint64_t epoch)
{
	const struct bfs_geom *g;

	ck_assert_int_eq(bfs_epoch_view_new(&x->v, b, epoch), 0);
	g = x->v->geom;
	ck_assert_uint_ge(x->v->nchunks, 3);
	x->cbuf = calloc(x->v->nchunks, sizeof(*x->cbuf));
	x->cg = calloc(x->v->nchunks, sizeof(*x->cg));
	x->want = calloc(g->ntensors, sizeof(*x->want));
	for (uint64_t c = 0; c < x->v->nchunks; c++)
		ck_assert_int_eq(test_batch_build(&x->cbuf[c], &x->cg[c], b, epoch, c | BFS_CHUNK,
						  NULL, NULL),
				 0);
	for (size_t t = 0; t < g->ntensors; t++) {
		uint64_t a = 0, n = g->g[t].nbytes;

		x->want[t] = malloc(n ? n : 1);
		while (a < n) {
			uint64_t c = bfs_epoch_view_chunk(x->v, t, a);
			uint64_t k = bfs_epoch_view_copy(x->v, t, c, x->cbuf[c], x->cg[c], a, n - a,
							 x->want[t] + a);
			ck_assert_uint_gt(k, 0);
			a += k;
		}
	}
}

static void epoch_teardown(struct epoch_fx *x)
{
	for (uint64_t c = 0; c < x->v->nchunks; c++) {
		free(x->cbuf[c]);
		bfs_geom_free(x->cg[c]);
	}
	for (size_t t = 0; t < x->v->geom->ntensors; t++)
		free(x->want[t]);
	free(x->cbuf);
	free(x->cg);
	free(x->want);
	bfs_epoch_view_free(x->v);
}

/* Tensor t of x read through the stash, chunk by chunk: true when every
 * byte came from it (and then equals the chunk path's). */
static bool read_all(struct bfs_stash *s, struct epoch_fx *x, uint64_t rank, uint64_t epoch,
		     size_t t)
{
	uint64_t a = 0, n = x->v->geom->g[t].nbytes;
	uint8_t *got = malloc(n ? n : 1);
	bool ok = true;

	while (a < n && ok) {
		uint64_t c = bfs_epoch_view_chunk(x->v, t, a);
		uint64_t k = bfs_stash_read(s, x->v, rank, epoch, t, c, a, n - a, got + a);
		ok = k > 0;
		a += k;
	}
	if (ok)
		ck_assert_msg(memcmp(got, x->want[t], n) == 0, "tensor %zu's bytes", t);
	free(got);
	return ok;
}

/* The biggest tensor, and a budget that makes every other one small. */
static uint64_t budget_for(const struct bfs_epoch_view *v, size_t *big)
{
	const struct bfs_geom *g = v->geom;
	uint64_t rest = 0;

	*big = 0;
	for (size_t t = 1; t < g->ntensors; t++)
		if (g->g[t].nbytes > g->g[*big].nbytes)
			*big = t;
	for (size_t t = 0; t < g->ntensors; t++)
		if (t != *big && g->g[t].nbytes > rest)
			rest = g->g[t].nbytes;
	ck_assert_uint_gt(g->g[*big].nbytes, rest); /* the dataset has a big one */
	return 4 * rest;
}

START_TEST(small_tensors_come_from_the_chunks_given)
{
	struct fstest fx;
	struct epoch_fx x;
	struct bfs_stash *s = NULL;
	size_t big, nt;
	uint64_t budget;

	fstest_setup(&fx, RECORDS, FSTEST_RAGGED);
	epoch_setup(&x, fx.b[0], 1);
	nt = x.v->geom->ntensors;
	ck_assert_uint_ge(nt, 3);
	budget = budget_for(x.v, &big);
	ck_assert_int_eq(bfs_stash_new(&s, budget), 0);
	for (size_t t = 0; t < nt; t++)
		ck_assert(!read_all(s, &x, 0, 1, t)); /* nothing given yet */
	/* every chunk but the last: still not whole */
	for (uint64_t c = 0; c + 1 < x.v->nchunks; c++)
		bfs_stash_fill(s, x.v, 0, 1, c, x.cbuf[c], x.cg[c]);
	for (size_t t = 0; t < nt; t++)
		ck_assert(!read_all(s, &x, 0, 1, t));
	bfs_stash_fill(s, x.v, 0, 1, x.v->nchunks - 1, x.cbuf[x.v->nchunks - 1],
		       x.cg[x.v->nchunks - 1]);
	for (size_t t = 0; t < nt; t++)
		ck_assert_msg(read_all(s, &x, 0, 1, t) == (t != big), "tensor %zu", t);
	/* another epoch, another rank: not given */
	ck_assert(!read_all(s, &x, 0, 2, (big + 1) % nt));
	ck_assert(!read_all(s, &x, 1, 1, (big + 1) % nt));
	ck_assert_uint_gt(bfs_stash_bytes(s), 0);
	ck_assert_uint_le(bfs_stash_bytes(s), budget);
	bfs_stash_free(s);
	bfs_stash_free(NULL);
	/* a budget every tensor fits in: nothing is worth keeping */
	ck_assert_int_eq(bfs_stash_new(&s, 1 << 30), 0);
	for (uint64_t c = 0; c < x.v->nchunks; c++)
		bfs_stash_fill(s, x.v, 0, 1, c, x.cbuf[c], x.cg[c]);
	ck_assert_uint_eq(bfs_stash_bytes(s), 0);
	bfs_stash_free(s);
	/* no budget: nothing */
	ck_assert_int_eq(bfs_stash_new(&s, 0), 0);
	bfs_stash_fill(s, x.v, 0, 1, 0, x.cbuf[0], x.cg[0]);
	ck_assert_uint_eq(bfs_stash_bytes(s), 0);
	bfs_stash_free(s);
	epoch_teardown(&x);
	fstest_teardown(&fx);
}
END_TEST

/* Five epochs filled one after another: the first is out (by count, or by
 * bytes), the last held, the budget kept; reading an entry makes it recent. */
START_TEST(the_least_recently_used_entry_goes_first)
{
	struct fstest fx;
	struct epoch_fx x[5];
	struct bfs_stash *s = NULL;
	size_t big, small;
	uint64_t budget;

	fstest_setup(&fx, RECORDS, FSTEST_RAGGED);
	for (int e = 0; e < 5; e++)
		epoch_setup(&x[e], fx.b[0], (uint64_t)e);
	budget = 2 * budget_for(x[0].v, &big);
	ck_assert_int_eq(bfs_stash_new(&s, budget), 0);
	small = (big + 1) % x[0].v->geom->ntensors;
	for (int e = 0; e < 5; e++) {
		for (uint64_t c = 0; c < x[e].v->nchunks; c++)
			bfs_stash_fill(s, x[e].v, 0, (uint64_t)e, c, x[e].cbuf[c], x[e].cg[c]);
		if (e == 1)
			ck_assert(read_all(s, &x[0], 0, 0, small)); /* 0 recent, 1 the oldest */
		ck_assert_uint_le(bfs_stash_bytes(s), budget);
	}
	ck_assert(!read_all(s, &x[1], 0, 1, small));
	ck_assert(read_all(s, &x[4], 0, 4, small));
	bfs_stash_free(s);
	for (int e = 0; e < 5; e++)
		epoch_teardown(&x[e]);
	fstest_teardown(&fx);
}
END_TEST

struct worker {
	struct bfs_stash *s;
	struct epoch_fx *x; /* [EPOCHS] */
	unsigned seed;
};

static void *work(void *arg)
{
	struct worker *w = arg;

	for (int i = 0; i < 200; i++) {
		unsigned k = w->seed + (unsigned)i * 40503u;
		uint64_t e = k % EPOCHS;
		struct epoch_fx *x = &w->x[e];
		uint64_t c = (k / EPOCHS) % x->v->nchunks;

		bfs_stash_fill(w->s, x->v, 0, e, c, x->cbuf[c], x->cg[c]);
		for (size_t t = 0; t < x->v->geom->ntensors; t++)
			(void)read_all(w->s, x, 0, e, t); /* held or not: the bytes are right */
	}
	return NULL;
}

START_TEST(threads_fill_and_read_at_once)
{
	struct fstest fx;
	struct epoch_fx x[EPOCHS];
	struct bfs_stash *s = NULL;
	struct worker w[THREADS];
	pthread_t tid[THREADS];
	size_t big;

	fstest_setup(&fx, RECORDS, FSTEST_RAGGED);
	for (int e = 0; e < EPOCHS; e++)
		epoch_setup(&x[e], fx.b[0], (uint64_t)e);
	/* room for two entries of three: they come and go */
	ck_assert_int_eq(bfs_stash_new(&s, 2 * budget_for(x[0].v, &big)), 0);
	for (int i = 0; i < THREADS; i++) {
		w[i] = (struct worker){ .s = s, .x = x, .seed = (unsigned)i * 7u };
		ck_assert_int_eq(pthread_create(&tid[i], NULL, work, &w[i]), 0);
	}
	for (int i = 0; i < THREADS; i++)
		pthread_join(tid[i], NULL);
	ck_assert_uint_le(bfs_stash_bytes(s), 2 * budget_for(x[0].v, &big));
	bfs_stash_free(s);
	for (int e = 0; e < EPOCHS; e++)
		epoch_teardown(&x[e]);
	fstest_teardown(&fx);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("stash");
	TCase *tc = tcase_create("stash");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, small_tensors_come_from_the_chunks_given);
	tcase_add_test(tc, the_least_recently_used_entry_goes_first);
	tcase_add_test(tc, threads_fill_and_read_at_once);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
