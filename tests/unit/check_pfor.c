/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for decoder/util/pfor.c, the decoder's one parallel loop: each
 * index runs exactly once, the calling thread is one of the threads, the
 * first failure stops the loop and its message reaches the caller, the
 * helpers have the stop signals blocked. The ASan build runs them too
 * (scripts/test), which holds the loop to no leak and no stray access. */
#include "common.h"
#include "pfor.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Counts each index's runs (checked by the test's own thread: a check
 * assertion belongs there, not in a helper). */
struct tally {
	size_t n;
	atomic_uint *runs; /* [n] */
	atomic_size_t total, outside;
};

static int count_one(void *ctx, size_t i)
{
	struct tally *t = ctx;

	if (i >= t->n) {
		atomic_fetch_add(&t->outside, 1);
		return 0;
	}
	atomic_fetch_add(&t->runs[i], 1);
	atomic_fetch_add(&t->total, 1);
	return 0;
}

START_TEST(every_index_runs_exactly_once)
{
	static const size_t ns[] = { 0, 1, 2, 3, 7, 64, 65, 1000 };
	static const unsigned ts[] = { 0, 1, 2, 3, 8, 64, 65, 1000 };

	for (size_t a = 0; a < sizeof(ns) / sizeof(ns[0]); a++) {
		for (size_t b = 0; b < sizeof(ts) / sizeof(ts[0]); b++) {
			struct tally t = { .n = ns[a] };

			t.runs = calloc(ns[a] ? ns[a] : 1, sizeof(*t.runs));
			ck_assert_ptr_nonnull(t.runs);
			ck_assert_int_eq(bfs_pfor(ns[a], ts[b], count_one, &t), 0);
			ck_assert_uint_eq(atomic_load(&t.outside), 0);
			ck_assert_uint_eq(atomic_load(&t.total), ns[a]);
			for (size_t i = 0; i < ns[a]; i++)
				ck_assert_uint_eq(atomic_load(&t.runs[i]), 1);
			free(t.runs);
		}
	}
}
END_TEST

/* Every item waits until `want` distinct threads hold one: with want
 * threads and want items, that happens only if the loop runs them all at
 * once, the caller among them. */
struct meet {
	pthread_barrier_t all_in;
	pthread_mutex_t lock;
	pthread_t who[8];
	size_t nwho;
};

static int meet_one(void *ctx, size_t i)
{
	struct meet *m = ctx;

	(void)i;
	pthread_mutex_lock(&m->lock);
	m->who[m->nwho++] = pthread_self();
	pthread_mutex_unlock(&m->lock);
	pthread_barrier_wait(&m->all_in);
	return 0;
}

START_TEST(the_caller_is_one_of_the_threads)
{
	struct meet m = { .nwho = 0 };
	bool caller = false;

	pthread_barrier_init(&m.all_in, NULL, 4);
	pthread_mutex_init(&m.lock, NULL);
	ck_assert_int_eq(bfs_pfor(4, 4, meet_one, &m), 0);
	ck_assert_uint_eq(m.nwho, 4);
	for (size_t k = 0; k < m.nwho; k++) {
		caller = caller || pthread_equal(m.who[k], pthread_self());
		for (size_t j = 0; j < k; j++)
			ck_assert(!pthread_equal(m.who[k], m.who[j]));
	}
	ck_assert(caller);
	pthread_barrier_destroy(&m.all_in);
	pthread_mutex_destroy(&m.lock);
}
END_TEST

/* One thread: the items run in order on the caller, and a failure at k
 * leaves k + 1 items run. */
struct upto {
	size_t fail_at;
	size_t ran;
	pthread_t caller;
};

static int fail_at_k(void *ctx, size_t i)
{
	struct upto *u = ctx;

	ck_assert(pthread_equal(pthread_self(), u->caller));
	ck_assert_uint_eq(i, u->ran);
	u->ran++;
	if (i == u->fail_at)
		return bfs_err_set(-EBADMSG, "item %zu is corrupt", i);
	return 0;
}

START_TEST(one_thread_runs_in_order_and_stops_at_the_failure)
{
	struct upto u = { .fail_at = 5, .caller = pthread_self() };

	ck_assert_int_eq(bfs_pfor(100, 1, fail_at_k, &u), -EBADMSG);
	ck_assert_uint_eq(u.ran, 6);
	ck_assert_str_eq(bfs_err_msg(), "item 5 is corrupt");
}
END_TEST

/* Items fail only on a helper thread; the caller's own items take a while,
 * so the helpers get some. The failure is a helper's, and its message is
 * the caller's when the loop returns; the items not yet started never run. */
struct helper_fail {
	pthread_t caller;
	atomic_size_t ran;
};

static int fail_on_helper(void *ctx, size_t i)
{
	struct helper_fail *h = ctx;

	atomic_fetch_add(&h->ran, 1);
	if (!pthread_equal(pthread_self(), h->caller))
		return bfs_err_set(-EIO, "helper failed at item %zu", i);
	usleep(1000);
	return 0;
}

START_TEST(a_helpers_failure_and_message_reach_the_caller)
{
	struct helper_fail h = { .caller = pthread_self() };
	const char *prefix = "helper failed at item ";

	atomic_init(&h.ran, 0);
	bfs_err_format("left by an earlier call");
	ck_assert_int_eq(bfs_pfor(10000, 4, fail_on_helper, &h), -EIO);
	ck_assert_int_eq(strncmp(bfs_err_msg(), prefix, strlen(prefix)), 0);
	/* each thread finishes the item it holds, then stops: without the
	 * stop the helpers would fail through all 10000 at once */
	ck_assert_uint_lt(atomic_load(&h.ran), 10000 / 2);
}
END_TEST

static int succeed_quietly(void *ctx, size_t i)
{
	(void)ctx;
	(void)i;
	return 0;
}

START_TEST(success_leaves_the_callers_message)
{
	bfs_err_format("left by an earlier call");
	ck_assert_int_eq(bfs_pfor(1000, 4, succeed_quietly, NULL), 0);
	ck_assert_str_eq(bfs_err_msg(), "left by an earlier call");
}
END_TEST

/* The helpers never take a signal meant to stop the process. */
static int stop_signals_blocked(void *ctx, size_t i)
{
	pthread_t *caller = ctx;
	sigset_t now;

	(void)i;
	if (pthread_equal(pthread_self(), *caller))
		return 0;
	pthread_sigmask(SIG_BLOCK, NULL, &now);
	if (!sigismember(&now, SIGTERM) || !sigismember(&now, SIGINT) ||
	    !sigismember(&now, SIGHUP) || !sigismember(&now, SIGQUIT))
		return bfs_err_set(-EINVAL, "a helper takes stop signals");
	usleep(100);
	return 0;
}

START_TEST(helpers_block_the_stop_signals)
{
	pthread_t self = pthread_self();

	ck_assert_int_eq(bfs_pfor(200, 4, stop_signals_blocked, &self), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("pfor");
	TCase *tc = tcase_create("pfor");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, every_index_runs_exactly_once);
	tcase_add_test(tc, the_caller_is_one_of_the_threads);
	tcase_add_test(tc, one_thread_runs_in_order_and_stops_at_the_failure);
	tcase_add_test(tc, a_helpers_failure_and_message_reach_the_caller);
	tcase_add_test(tc, success_leaves_the_callers_message);
	tcase_add_test(tc, helpers_block_the_stop_signals);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
