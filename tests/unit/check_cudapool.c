/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_cudapool.c — the CUDA path's pool of device buffers (fs/cudapool.h):
 * free buffers first, EAGAIN and EINTR without queueing, a queue served
 * oldest first as buffers come back, waiters taken back out, the counters,
 * and threads opening and closing through a pool smaller than they are,
 * never two owners of one buffer.
 */
#include "cudapool.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

static bool never(const void *tag)
{
	(void)tag;
	return false;
}

static bool always(const void *tag)
{
	(void)tag;
	return true;
}

START_TEST(free_buffers_then_eagain_eintr_or_a_wait)
{
	struct bfs_cudapool *p = NULL;
	struct bfs_cudapool_waiter w[6] = { 0 };
	struct bfs_cudapool_stats st;
	bool seen[3] = { false };

	ck_assert_int_eq(bfs_cudapool_new(&p, 3), 0);
	for (int i = 0; i < 3; i++) {
		int slot = bfs_cudapool_take(p, &w[i], false, never);

		ck_assert_int_ge(slot, 0);
		ck_assert_int_lt(slot, 3);
		ck_assert(!seen[slot]);
		seen[slot] = true;
	}
	ck_assert_int_eq(bfs_cudapool_take(p, &w[3], true, never), -EAGAIN);
	ck_assert_int_eq(bfs_cudapool_take(p, &w[3], false, always), -EINTR);
	ck_assert_int_eq(bfs_cudapool_take(p, &w[3], false, NULL), -EINPROGRESS);
	bfs_cudapool_stats(p, &st);
	ck_assert_uint_eq(st.pool, 3);
	ck_assert_uint_eq(st.busy, 3);
	ck_assert_uint_eq(st.eagain, 1);
	ck_assert_uint_eq(st.waits, 1);
	/* the waiter gets the next buffer back, and it stays busy */
	ck_assert_ptr_eq(bfs_cudapool_put(p, 1), &w[3]);
	bfs_cudapool_stats(p, &st);
	ck_assert_uint_eq(st.busy, 3);
	ck_assert_ptr_null(bfs_cudapool_put(p, 1));
	ck_assert_int_eq(bfs_cudapool_take(p, &w[4], true, never), 1);
	bfs_cudapool_opened(p);
	bfs_cudapool_opened(p);
	bfs_cudapool_failed(p);
	bfs_cudapool_stats(p, &st);
	ck_assert_uint_eq(st.opens, 2);
	ck_assert_uint_eq(st.errors, 1);
	for (unsigned i = 0; i < 3; i++)
		ck_assert_ptr_null(bfs_cudapool_put(p, i));
	bfs_cudapool_stats(p, &st);
	ck_assert_uint_eq(st.busy, 0);
	bfs_cudapool_free(p);
	bfs_cudapool_free(NULL);
}
END_TEST

START_TEST(waiters_are_served_oldest_first_and_can_leave)
{
	struct bfs_cudapool *p = NULL;
	struct bfs_cudapool_waiter w[5] = { 0 }, first = { 0 };
	int tags[5];

	ck_assert_int_eq(bfs_cudapool_new(&p, 1), 0);
	ck_assert_int_eq(bfs_cudapool_take(p, &first, false, never), 0);
	for (int i = 0; i < 5; i++) {
		w[i].tag = &tags[i];
		ck_assert_int_eq(bfs_cudapool_take(p, &w[i], false, never), -EINPROGRESS);
	}
	/* the last, a middle one and the first leave the queue */
	ck_assert_ptr_eq(bfs_cudapool_cancel(p, &tags[4]), &w[4]);
	ck_assert_ptr_eq(bfs_cudapool_cancel(p, &tags[2]), &w[2]);
	ck_assert_ptr_eq(bfs_cudapool_cancel(p, &tags[0]), &w[0]);
	ck_assert_ptr_null(bfs_cudapool_cancel(p, &tags[0]));
	ck_assert_ptr_null(bfs_cudapool_cancel(p, NULL));
	ck_assert_ptr_eq(bfs_cudapool_put(p, 0), &w[1]);
	/* one that got its buffer is no longer there to cancel */
	ck_assert_ptr_null(bfs_cudapool_cancel(p, &tags[1]));
	/* a new waiter after the queue's tail left: still in order */
	w[4].tag = &tags[4];
	ck_assert_int_eq(bfs_cudapool_take(p, &w[4], false, never), -EINPROGRESS);
	ck_assert_ptr_eq(bfs_cudapool_put(p, 0), &w[3]);
	ck_assert_ptr_eq(bfs_cudapool_put(p, 0), &w[4]);
	ck_assert_ptr_null(bfs_cudapool_put(p, 0));
	ck_assert_int_eq(bfs_cudapool_take(p, &first, true, never), 0);
	bfs_cudapool_free(p);
}
END_TEST

/* Threads opening through a pool of POOL buffers: a buffer has one owner
 * at a time, whether it came free or was handed over; some openers give up
 * while they wait, and one that loses that race to a hand-over takes the
 * buffer it was given. */
#define POOL 3
#define THREADS 8
#define OPENS 2000

struct opener {
	struct bfs_cudapool_waiter w; /* w.tag: the opener itself */
	sem_t got; /* posted when a buffer was handed over */
	int slot;
};

static struct bfs_cudapool *pool;
static atomic_int owners[POOL];
static atomic_uint handed, cancelled;

static struct opener *opener_of(struct bfs_cudapool_waiter *w)
{
	return (struct opener *)w; /* w is its first member */
}

static void give_back(int slot)
{
	struct bfs_cudapool_waiter *w;

	ck_assert_int_eq(atomic_fetch_sub(&owners[slot], 1), 1);
	w = bfs_cudapool_put(pool, (unsigned)slot);
	if (w) { /* its new owner */
		struct opener *o = opener_of(w);

		ck_assert_int_eq(atomic_fetch_add(&owners[slot], 1), 0);
		o->slot = slot;
		atomic_fetch_add(&handed, 1);
		sem_post(&o->got);
	}
}

static void *open_many(void *arg)
{
	struct opener *o = calloc(1, sizeof(*o));
	unsigned seed = (unsigned)(uintptr_t)arg;

	ck_assert_ptr_nonnull(o);
	o->w.tag = o;
	sem_init(&o->got, 0, 0);
	for (int i = 0; i < OPENS; i++) {
		int slot = bfs_cudapool_take(pool, &o->w, false, never);

		seed = seed * 1103515245u + 12345u;
		if (slot == -EINPROGRESS) {
			/* every eighth waiter gives up at once, unless it was
			 * handed a buffer meanwhile */
			if ((seed >> 16) % 8 == 0 && bfs_cudapool_cancel(pool, o) == &o->w) {
				atomic_fetch_add(&cancelled, 1);
				continue;
			}
			sem_wait(&o->got);
			slot = o->slot;
		} else {
			ck_assert_int_ge(slot, 0);
			ck_assert_int_eq(atomic_fetch_add(&owners[slot], 1), 0);
		}
		if ((seed >> 20) % 4 == 0)
			sched_yield();
		give_back(slot);
	}
	sem_destroy(&o->got);
	free(o);
	return NULL;
}

START_TEST(threads_never_share_a_buffer)
{
	pthread_t tid[THREADS];
	struct bfs_cudapool_stats st;

	ck_assert_int_eq(bfs_cudapool_new(&pool, POOL), 0);
	for (int i = 0; i < THREADS; i++)
		ck_assert_int_eq(pthread_create(&tid[i], NULL, open_many, (void *)(uintptr_t)i), 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(tid[i], NULL);
	bfs_cudapool_stats(pool, &st);
	ck_assert_uint_eq(st.busy, 0);
	ck_assert_uint_eq(st.waits, atomic_load(&handed) + atomic_load(&cancelled));
	for (int i = 0; i < POOL; i++)
		ck_assert_int_eq(atomic_load(&owners[i]), 0);
	bfs_cudapool_free(pool);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cudapool");
	TCase *tc = tcase_create("cudapool");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, free_buffers_then_eagain_eintr_or_a_wait);
	tcase_add_test(tc, waiters_are_served_oldest_first_and_can_leave);
	tcase_add_test(tc, threads_never_share_a_buffer);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
