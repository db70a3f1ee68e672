/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_snapshot.c — the snapshots of stats.json and errors.txt
 * (fs/snapshot.h): generations across the files, the current one shared,
 * a snapshot held past its replacement, no memory, and threads refreshing
 * and reading at once.
 */
#include "snapshot.h"

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct maker {
	atomic_uint made[2];
	atomic_bool fail;
};

/* "file K #N": N counts the texts made for file K */
static char *make(void *ctx, unsigned k, size_t *len)
{
	struct maker *m = ctx;
	char *s;
	int n;

	if (atomic_load(&m->fail))
		return NULL;
	n = asprintf(&s, "file %u #%u", k, atomic_fetch_add(&m->made[k], 1) + 1);
	ck_assert_int_gt(n, 0);
	*len = (size_t)n;
	return s;
}

START_TEST(generations_run_across_the_files)
{
	struct maker m = { 0 };
	struct bfs_snapshot_set *set = NULL;
	struct bfs_snapshot *a, *b, *c, *cur;
	uint64_t gen = 0;

	ck_assert_int_eq(bfs_snapshot_set_new(&set, 2, make, &m), 0);
	a = bfs_snapshot_refresh(set, 0, &gen);
	ck_assert_uint_eq(gen, 1);
	ck_assert_str_eq(a->text, "file 0 #1");
	ck_assert_uint_eq(a->len, strlen("file 0 #1"));
	b = bfs_snapshot_refresh(set, 1, &gen);
	ck_assert_uint_eq(gen, 2);
	c = bfs_snapshot_refresh(set, 0, &gen);
	ck_assert_uint_eq(gen, 3);
	/* a was replaced, and is still whole for whoever holds it */
	ck_assert_str_eq(a->text, "file 0 #1");
	cur = bfs_snapshot_current(set, 0);
	ck_assert_ptr_eq(cur, c);
	ck_assert_str_eq(cur->text, "file 0 #2");
	bfs_snapshot_put(cur);
	cur = bfs_snapshot_current(set, 1);
	ck_assert_ptr_eq(cur, b);
	bfs_snapshot_put(cur);
	bfs_snapshot_put(a);
	bfs_snapshot_put(b);
	bfs_snapshot_put(c);
	bfs_snapshot_put(NULL);
	bfs_snapshot_set_free(set);
	bfs_snapshot_set_free(NULL);
}
END_TEST

START_TEST(a_file_without_a_snapshot_gets_one)
{
	struct maker m = { 0 };
	struct bfs_snapshot_set *set = NULL;
	struct bfs_snapshot *s, *again;
	uint64_t gen;

	ck_assert_int_eq(bfs_snapshot_set_new(&set, 2, make, &m), 0);
	s = bfs_snapshot_current(set, 1);
	ck_assert_ptr_nonnull(s);
	ck_assert_str_eq(s->text, "file 1 #1");
	again = bfs_snapshot_current(set, 1); /* the same, not made again */
	ck_assert_ptr_eq(again, s);
	ck_assert_uint_eq(atomic_load(&m.made[1]), 1);
	bfs_snapshot_put(again);
	/* without memory for a new one, the current one stays */
	atomic_store(&m.fail, true);
	ck_assert_ptr_null(bfs_snapshot_refresh(set, 1, &gen));
	ck_assert_ptr_null(bfs_snapshot_current(set, 0));
	again = bfs_snapshot_current(set, 1);
	ck_assert_ptr_eq(again, s);
	bfs_snapshot_put(again);
	bfs_snapshot_put(s);
	bfs_snapshot_set_free(set);
}
END_TEST

START_TEST(an_opens_own_snapshot)
{
	char *text = strdup("{\"reads\": 1}\n");
	struct bfs_snapshot *s = bfs_snapshot_new(text, strlen(text));

	ck_assert_ptr_nonnull(s);
	bfs_snapshot_get(s); /* a read's, across its reply */
	bfs_snapshot_put(s); /* the release */
	ck_assert_str_eq(s->text, "{\"reads\": 1}\n");
	bfs_snapshot_put(s); /* the read's: the last */
}
END_TEST

#define READERS 6
#define ROUNDS 5000

struct shared {
	struct bfs_snapshot_set *set;
	atomic_bool done;
};

/* GETATTR: a fresh snapshot, its generation above every one seen before */
static void *refresh_many(void *arg)
{
	struct shared *sh = arg;
	uint64_t last = 0;

	for (int i = 0; i < ROUNDS; i++) {
		uint64_t gen = 0;
		struct bfs_snapshot *s = bfs_snapshot_refresh(sh->set, (unsigned)i % 2, &gen);

		ck_assert_ptr_nonnull(s);
		ck_assert_uint_gt(gen, last);
		last = gen;
		bfs_snapshot_put(s);
	}
	return NULL;
}

/* READ: the current snapshot, whole, held while it is replaced */
static void *read_many(void *arg)
{
	struct shared *sh = arg;
	unsigned k = 0;

	while (!atomic_load(&sh->done)) {
		struct bfs_snapshot *s = bfs_snapshot_current(sh->set, k++ % 2);
		char want[16];

		ck_assert_ptr_nonnull(s);
		snprintf(want, sizeof(want), "file %u #", (k - 1) % 2);
		ck_assert_int_eq(strncmp(s->text, want, strlen(want)), 0);
		ck_assert_uint_eq(strlen(s->text), s->len);
		bfs_snapshot_put(s);
	}
	return NULL;
}

START_TEST(threads_refresh_and_read_at_once)
{
	struct maker m = { 0 };
	struct shared sh;
	pthread_t r[READERS], w[2];

	ck_assert_int_eq(bfs_snapshot_set_new(&sh.set, 2, make, &m), 0);
	atomic_init(&sh.done, false);
	for (int i = 0; i < READERS; i++)
		ck_assert_int_eq(pthread_create(&r[i], NULL, read_many, &sh), 0);
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(pthread_create(&w[i], NULL, refresh_many, &sh), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(w[i], NULL);
	atomic_store(&sh.done, true);
	for (int i = 0; i < READERS; i++)
		pthread_join(r[i], NULL);
	ck_assert_uint_ge(atomic_load(&m.made[0]) + atomic_load(&m.made[1]), 2 * ROUNDS);
	bfs_snapshot_set_free(sh.set);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("snapshot");
	TCase *tc = tcase_create("snapshot");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, generations_run_across_the_files);
	tcase_add_test(tc, a_file_without_a_snapshot_gets_one);
	tcase_add_test(tc, an_opens_own_snapshot);
	tcase_add_test(tc, threads_refresh_and_read_at_once);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
