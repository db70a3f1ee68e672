/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_cudaopen.c — the opens of batch-B.cuda (fs/cudaopen.h) through the
 * host double of the CUDA runtime (tests/cuda/cudart_double.c, as
 * test_cuda.py loads it): an open is answered with a descriptor whose read
 * is the batch's JSON, as long as stat says; with the pool taken a blocking
 * open waits and gets the next buffer given back, O_NONBLOCK gets EAGAIN,
 * an opener that gave up gets EINTR (before or while waiting); a buffer
 * goes back only with its descriptor's last reference, also when the
 * opener left before the answer; an unpinned batch fails with one line;
 * threads opening, reading and closing through a pool smaller than they
 * are each get their batch.
 */
#include "cudaopen.h"

#include "fstest.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define RECORDS 200 /* 3 batches per rank (world=2) */
#define POOL 2

/* A request: how it was answered. */
struct req {
	pthread_mutex_t m;
	pthread_cond_t c;
	int answers; /* must end as 1 */
	int err;
	uint64_t fh;
	bool gone; /* the opener gave up */
	bool left; /* the opener is gone when the answer comes */
};

static void req_init(struct req *r)
{
	memset(r, 0, sizeof(*r));
	pthread_mutex_init(&r->m, NULL);
	pthread_cond_init(&r->c, NULL);
}

static void req_wait(struct req *r)
{
	pthread_mutex_lock(&r->m);
	while (!r->answers)
		pthread_cond_wait(&r->c, &r->m);
	pthread_mutex_unlock(&r->m);
}

static int answered(struct req *r)
{
	int n;

	pthread_mutex_lock(&r->m);
	n = r->answers;
	pthread_mutex_unlock(&r->m);
	return n;
}

static int reply_open(void *arg, uint64_t fh)
{
	struct req *r = arg;
	int left;

	pthread_mutex_lock(&r->m);
	r->answers++;
	r->fh = fh;
	left = r->left;
	pthread_cond_broadcast(&r->c);
	pthread_mutex_unlock(&r->m);
	return left ? -ENOENT : 0;
}

static void reply_error(void *arg, int err)
{
	struct req *r = arg;

	pthread_mutex_lock(&r->m);
	r->answers++;
	r->err = err;
	pthread_cond_broadcast(&r->c);
	pthread_mutex_unlock(&r->m);
}

static bool req_gone(void *arg)
{
	struct req *r = arg;

	return r->gone;
}

static const struct bfs_cudaopen_replies replies = {
	.open = reply_open,
	.error = reply_error,
	.gone = req_gone,
};

struct fx {
	struct fstest t;
	struct bfs_cudapath *cp;
	struct bfs_cudapool *pool;
	struct bfs_cache *cache;
	struct bfs_cudaopen *co;
	pthread_mutex_t lm;
	int lines;
	char line[600];
};

static void report(void *ctx, const char *msg, unsigned flags)
{
	struct fx *x = ctx;

	(void)flags;
	pthread_mutex_lock(&x->lm);
	x->lines++;
	snprintf(x->line, sizeof(x->line), "%s", msg);
	pthread_mutex_unlock(&x->lm);
}

static void fx_setup(struct fx *x, bool pinned)
{
	char err[400];
	struct bfs_cudaopen_config cfg = { 0 };

	memset(x, 0, sizeof(*x));
	pthread_mutex_init(&x->lm, NULL);
	ck_assert_int_eq(setenv("BATCHFS_CUDART", CUDA_DOUBLE, 1), 0);
	fstest_setup(&x->t, RECORDS, FSTEST_RAGGED);
	ck_assert_msg(bfs_cudapath_load(&x->cp, 0, POOL, err, sizeof(err)) == 0, "%s", err);
	ck_assert_msg(bfs_cudapath_init(x->cp, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(bfs_cudapool_new(&x->pool, bfs_cudapath_pool(x->cp)), 0);
	ck_assert_int_eq(bfs_cache_new(&x->cache, (const struct bfs_batcher *const *)x->t.b, 1,
				       64u << 20, 2, 2, report, x),
			 0);
	if (pinned)
		bfs_cache_set_pinning(x->cache, bfs_cudapath_pin, bfs_cudapath_unpin, x->cp);
	cfg.cache = x->cache;
	cfg.cuda = x->cp;
	cfg.pool = x->pool;
	cfg.plan = bfs_batcher_plan(x->t.b[0]);
	cfg.device = 0;
	cfg.report = report;
	cfg.report_ctx = x;
	ck_assert_int_eq(bfs_cudaopen_new(&x->co, &cfg), 0);
}

static void fx_teardown(struct fx *x)
{
	struct bfs_cudapool_stats st;

	bfs_cudapool_stats(x->pool, &st);
	ck_assert_uint_eq(st.busy, 0); /* every buffer back */
	bfs_cudaopen_free(x->co);
	bfs_cache_free(x->cache);
	bfs_cudapath_free(x->cp);
	bfs_cudapool_free(x->pool);
	fstest_teardown(&x->t);
}

static unsigned busy(struct fx *x)
{
	struct bfs_cudapool_stats st;

	bfs_cudapool_stats(x->pool, &st);
	return st.busy;
}

static struct bfs_cudaopen_fh *FH(const struct req *r)
{
	return (struct bfs_cudaopen_fh *)(uintptr_t)r->fh;
}

/* The descriptor's JSON: what stat says its size is, for batch b. */
static void check_json(struct fx *x, struct req *r, uint64_t b)
{
	struct bfs_geom *g = NULL;
	const char *text = NULL;
	size_t len = 0, want = 0;
	char *sized;
	char key[64];

	ck_assert_int_eq(bfs_cudaopen_read(x->co, FH(r), &text, &len), 0);
	ck_assert_int_eq(bfs_batcher_geom(&g, x->t.b[0], 0, b), 0);
	sized = bfs_cudapath_describe(bfs_batcher_plan(x->t.b[0]), g, 0, NULL, &want);
	ck_assert_uint_eq(len, want);
	ck_assert_ptr_nonnull(strstr(text, "\"x\""));
	snprintf(key, sizeof(key), "%llu", (unsigned long long)g->st_size);
	ck_assert_ptr_nonnull(strstr(text, key));
	ck_assert_ptr_null(strstr(text, "00000000000000000000000000000000000000000000000000000000"
					"00000000000000000000000000000000000000000000000000000000"
					"0000000000000000")); /* a real handle, not zeros */
	free(sized);
	bfs_geom_free(g);
	bfs_cudaopen_put(x->co, FH(r)); /* the read's reference */
}

START_TEST(open_read_release)
{
	struct fx x;
	struct req r;

	fx_setup(&x, true);
	req_init(&r);
	bfs_cudaopen_open(x.co, &replies, &r, 0, 0, 1, false);
	ck_assert_int_eq(answered(&r), 1);
	ck_assert_int_eq(r.err, 0);
	ck_assert_uint_eq(busy(&x), 1);
	check_json(&x, &r, 1);
	check_json(&x, &r, 1); /* read again: the same */
	bfs_cudaopen_put(x.co, FH(&r)); /* the release */
	ck_assert_uint_eq(busy(&x), 0);
	ck_assert_int_eq(bfs_cudaopen_read(x.co, NULL, NULL, NULL), -EIO);
	ck_assert_int_eq(x.lines, 0);
	fx_teardown(&x);
}
END_TEST

START_TEST(a_full_pool_waits_eagain_eintr)
{
	struct fx x;
	struct req r[6];

	fx_setup(&x, true);
	for (int i = 0; i < 6; i++)
		req_init(&r[i]);
	bfs_cudaopen_open(x.co, &replies, &r[0], 0, 0, 0, false);
	bfs_cudaopen_open(x.co, &replies, &r[1], 0, 0, 1, false);
	ck_assert_int_eq(answered(&r[0]) + answered(&r[1]), 2);
	ck_assert_uint_eq(busy(&x), POOL);
	/* O_NONBLOCK: EAGAIN; an opener gone already: EINTR, neither waits */
	bfs_cudaopen_open(x.co, &replies, &r[2], 0, 0, 2, true);
	ck_assert_int_eq(r[2].err, EAGAIN);
	r[3].gone = true;
	bfs_cudaopen_open(x.co, &replies, &r[3], 0, 0, 2, false);
	ck_assert_int_eq(r[3].err, EINTR);
	/* two wait; one gives up (EINTR, once) */
	bfs_cudaopen_open(x.co, &replies, &r[4], 0, 0, 0, false);
	bfs_cudaopen_open(x.co, &replies, &r[5], 0, 0, 2, false);
	ck_assert_int_eq(answered(&r[4]) + answered(&r[5]), 0);
	ck_assert(bfs_cudaopen_interrupted(x.co, &r[4]));
	ck_assert_int_eq(r[4].err, EINTR);
	ck_assert(!bfs_cudaopen_interrupted(x.co, &r[4]));
	ck_assert(!bfs_cudaopen_interrupted(x.co, &r[0])); /* answered: not waiting */
	/* a read holds the descriptor past its release */
	{
		const char *text;
		size_t len;

		ck_assert_int_eq(bfs_cudaopen_read(x.co, FH(&r[0]), &text, &len), 0);
		bfs_cudaopen_put(x.co, FH(&r[0])); /* the release */
		ck_assert_int_eq(answered(&r[5]), 0);
		bfs_cudaopen_put(x.co, FH(&r[0])); /* the read's reply written */
	}
	/* the buffer went to the waiter */
	ck_assert_int_eq(answered(&r[5]), 1);
	ck_assert_int_eq(r[5].err, 0);
	check_json(&x, &r[5], 2);
	ck_assert_uint_eq(busy(&x), POOL);
	bfs_cudaopen_put(x.co, FH(&r[1]));
	bfs_cudaopen_put(x.co, FH(&r[5]));
	for (int i = 0; i < 6; i++)
		ck_assert_int_eq(answered(&r[i]), 1);
	fx_teardown(&x);
}
END_TEST

START_TEST(an_opener_gone_at_the_answer_gives_the_buffer_back)
{
	struct fx x;
	struct req r[3];

	fx_setup(&x, true);
	for (int i = 0; i < 3; i++)
		req_init(&r[i]);
	r[0].left = true;
	bfs_cudaopen_open(x.co, &replies, &r[0], 0, 0, 0, false);
	ck_assert_int_eq(answered(&r[0]), 1);
	ck_assert_uint_eq(busy(&x), 0);
	/* a waiter whose opener left by the time a buffer comes back: the
	 * buffer goes back to the pool */
	bfs_cudaopen_open(x.co, &replies, &r[1], 0, 0, 1, false);
	bfs_cudaopen_open(x.co, &replies, &r[2], 0, 0, 2, false);
	ck_assert_uint_eq(busy(&x), POOL);
	bfs_cudaopen_open(x.co, &replies, &r[0], 0, 0, 0, false);
	ck_assert_int_eq(answered(&r[0]), 1);
	bfs_cudaopen_put(x.co, FH(&r[1]));
	ck_assert_int_eq(answered(&r[0]), 2);
	ck_assert_int_eq(r[0].err, 0);
	ck_assert_uint_eq(busy(&x), 1);
	bfs_cudaopen_put(x.co, FH(&r[2]));
	fx_teardown(&x);
}
END_TEST

START_TEST(an_unpinned_batch_fails_with_one_line)
{
	struct fx x;
	struct req r;

	fx_setup(&x, false);
	req_init(&r);
	bfs_cudaopen_open(x.co, &replies, &r, 0, 0, 2, false);
	ck_assert_int_eq(answered(&r), 1);
	ck_assert_int_eq(r.err, ENOMEM);
	ck_assert_int_eq(x.lines, 1);
	ck_assert_ptr_nonnull(strstr(x.line, "epoch-0000/batch-000002/batch-000002.cuda: open: "));
	ck_assert_ptr_nonnull(strstr(x.line, "pinned"));
	ck_assert_uint_eq(busy(&x), 0);
	fx_teardown(&x);
}
END_TEST

struct opener {
	struct fx *x;
	unsigned id;
	int bad;
};

static void *opener_main(void *arg)
{
	struct opener *o = arg;

	for (unsigned i = 0; i < 12; i++) {
		struct req r;
		const char *text;
		size_t len;
		char key[64];
		uint64_t b = (o->id + i) % bfs_batcher_nbatches(o->x->t.b[0]);

		req_init(&r);
		bfs_cudaopen_open(o->x->co, &replies, &r, 0, 0, b, false);
		req_wait(&r);
		if (r.err || answered(&r) != 1) {
			o->bad++;
			continue;
		}
		snprintf(key, sizeof(key), "\"batch\": %llu", (unsigned long long)b);
		if (bfs_cudaopen_read(o->x->co, FH(&r), &text, &len) != 0 || len == 0)
			o->bad++;
		bfs_cudaopen_put(o->x->co, FH(&r));
		bfs_cudaopen_put(o->x->co, FH(&r));
		pthread_mutex_destroy(&r.m);
		pthread_cond_destroy(&r.c);
	}
	return NULL;
}

START_TEST(threads_share_a_small_pool)
{
	struct fx x;
	struct opener o[5];
	pthread_t th[5];
	struct bfs_cudapool_stats st;

	fx_setup(&x, true);
	for (unsigned i = 0; i < 5; i++) {
		o[i] = (struct opener){ .x = &x, .id = i };
		ck_assert_int_eq(pthread_create(&th[i], NULL, opener_main, &o[i]), 0);
	}
	for (unsigned i = 0; i < 5; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(o[i].bad, 0);
	}
	bfs_cudapool_stats(x.pool, &st);
	ck_assert_uint_eq(st.opens, 60);
	ck_assert_uint_eq(st.errors, 0);
	fx_teardown(&x);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cudaopen");
	TCase *tc = tcase_create("cudaopen");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, open_read_release);
	tcase_add_test(tc, a_full_pool_waits_eagain_eintr);
	tcase_add_test(tc, an_opener_gone_at_the_answer_gives_the_buffer_back);
	tcase_add_test(tc, an_unpinned_batch_fails_with_one_line);
	tcase_add_test(tc, threads_share_a_small_pool);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
