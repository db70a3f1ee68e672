/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_dynfiles.c — which snapshot of stats.json and errors.txt each
 * reader sees (fs/dynfiles.h), over a text function whose text changes at
 * every call (a counter in it) and whose length can be made to change: a
 * stat makes a fresh snapshot; a reader reading on keeps its own until a
 * stat, a read of another file or a pause; another reader meanwhile gets
 * the same size (padded, or the reader's own snapshot when the fresh one
 * is longer); an unknown reader reads the one last sized; an open gets a
 * snapshot of its own, never padded; many threads at once.
 */
#include "dynfiles.h"

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct text {
	unsigned calls; /* texts made (atomic) */
	unsigned extra; /* bytes of x added to stats.json's text (atomic) */
	size_t last_pad[2];
};

/* "{calls: N, x...}\n", padded with spaces before its newline to pad */
static char *text_fn(void *ctx, enum bfs_dynfile k, size_t pad, size_t *len)
{
	struct text *t = ctx;
	unsigned n = __atomic_add_fetch(&t->calls, 1, __ATOMIC_RELAXED);
	unsigned extra = __atomic_load_n(&t->extra, __ATOMIC_RELAXED);
	char *s = malloc(128 + extra + pad);
	int m;

	ck_assert_ptr_nonnull(s);
	t->last_pad[k] = pad;
	m = sprintf(s, "%s %u ", k == BFS_DYN_STATS ? "{stats" : "errors", n);
	memset(s + m, 'x', extra);
	m += (int)extra;
	s[m++] = '}';
	while ((size_t)m + 1 < pad)
		s[m++] = ' ';
	s[m++] = '\n';
	*len = (size_t)m;
	return s;
}

static uint64_t size_of(struct bfs_dynfiles *d, enum bfs_dynfile k, uint64_t tid, bool reading,
			uint64_t *gen)
{
	uint64_t size = 0;

	ck_assert_int_eq(bfs_dynfiles_size(d, k, tid, reading, &size, gen), 0);
	return size;
}

/* The text reader tid reads, copied into buf; its length. */
static size_t read_of(struct bfs_dynfiles *d, enum bfs_dynfile k, uint64_t tid, char *buf)
{
	struct bfs_snapshot *s = bfs_dynfiles_read(d, k, tid);
	size_t len;

	ck_assert_ptr_nonnull(s);
	len = s->len;
	memcpy(buf, s->text, len);
	buf[len] = '\0';
	bfs_snapshot_put(s);
	return len;
}

START_TEST(a_stat_makes_a_fresh_snapshot_that_its_reads_serve)
{
	struct text t = { 0 };
	struct bfs_dynfiles *d = NULL;
	char a[256], b[256];
	uint64_t g1, g2, len;

	ck_assert_int_eq(bfs_dynfiles_new(&d, text_fn, &t), 0);
	ck_assert_uint_eq(t.calls, 0); /* nothing made before it is asked for */
	len = size_of(d, BFS_DYN_STATS, 7, false, &g1);
	ck_assert_uint_eq(read_of(d, BFS_DYN_STATS, 7, a), len);
	ck_assert_str_eq(a, "{stats 1 }\n");
	/* another stat by it: a fresh one, a later generation */
	(void)size_of(d, BFS_DYN_STATS, 7, false, &g2);
	ck_assert_uint_gt(g2, g1);
	(void)read_of(d, BFS_DYN_STATS, 7, b);
	ck_assert_str_eq(b, "{stats 2 }\n");
	/* each file its own snapshots */
	(void)size_of(d, BFS_DYN_ERRORS, 7, false, NULL);
	(void)read_of(d, BFS_DYN_ERRORS, 7, a);
	ck_assert_str_eq(a, "errors 3 }\n");
	(void)read_of(d, BFS_DYN_STATS, 7, b);
	ck_assert_str_eq(b, "{stats 2 }\n");
	bfs_dynfiles_free(d);
	bfs_dynfiles_free(NULL);
}
END_TEST

START_TEST(a_reader_reading_on_keeps_its_snapshot)
{
	struct text t = { 0 };
	struct bfs_dynfiles *d = NULL;
	char a[256], b[256];
	uint64_t g1, g2, g3;

	ck_assert_int_eq(bfs_dynfiles_new(&d, text_fn, &t), 0);
	(void)size_of(d, BFS_DYN_STATS, 7, false, &g1);
	(void)read_of(d, BFS_DYN_STATS, 7, a);
	/* on its way to its next read(2): the same snapshot */
	(void)size_of(d, BFS_DYN_STATS, 7, true, &g2);
	ck_assert_uint_eq(g2, g1);
	(void)read_of(d, BFS_DYN_STATS, 7, b);
	ck_assert_str_eq(a, b);
	/* a read of another file by it: a fresh one */
	bfs_dynfiles_touch(d, 7);
	(void)size_of(d, BFS_DYN_STATS, 7, true, &g2);
	ck_assert_uint_gt(g2, g1);
	/* a touch by another reader changes nothing for it */
	bfs_dynfiles_touch(d, 8);
	(void)size_of(d, BFS_DYN_STATS, 7, true, &g3);
	ck_assert_uint_eq(g3, g2);
	/* and after a pause, a fresh one */
	usleep(BFS_DYNFILES_CONTINUE_MS * 1000 + 50000);
	(void)size_of(d, BFS_DYN_STATS, 7, true, &g3);
	ck_assert_uint_gt(g3, g2);
	bfs_dynfiles_free(d);
}
END_TEST

START_TEST(while_one_reads_another_gets_its_size)
{
	struct text t = { 0 };
	struct bfs_dynfiles *d = NULL;
	char a[512], b[512];
	uint64_t len7, len8, g7, g8;

	ck_assert_int_eq(bfs_dynfiles_new(&d, text_fn, &t), 0);
	__atomic_store_n(&t.extra, 20, __ATOMIC_RELAXED);
	len7 = size_of(d, BFS_DYN_STATS, 7, false, &g7);
	(void)read_of(d, BFS_DYN_STATS, 7, a);
	/* shorter text now: reader 8's is padded to reader 7's size */
	__atomic_store_n(&t.extra, 0, __ATOMIC_RELAXED);
	len8 = size_of(d, BFS_DYN_STATS, 8, false, &g8);
	ck_assert_uint_eq(len8, len7);
	ck_assert_uint_eq(t.last_pad[BFS_DYN_STATS], len7);
	ck_assert_uint_gt(g8, g7);
	ck_assert_uint_eq(read_of(d, BFS_DYN_STATS, 8, b), len8);
	ck_assert_msg(strncmp(b, "{stats 2 }", 10) == 0 && b[len8 - 1] == '\n' &&
			      b[len8 - 2] == ' ',
		      "%s", b);
	/* longer text now: reader 9 shares reader 8's snapshot */
	__atomic_store_n(&t.extra, 100, __ATOMIC_RELAXED);
	ck_assert_uint_eq(size_of(d, BFS_DYN_STATS, 9, false, &g7), len8);
	ck_assert_uint_eq(g7, g8);
	(void)read_of(d, BFS_DYN_STATS, 9, a);
	ck_assert_str_eq(a, b);
	/* nobody else reading (for over 50 ms): the text as it is */
	usleep(60000);
	__atomic_store_n(&t.extra, 0, __ATOMIC_RELAXED);
	ck_assert_uint_eq(size_of(d, BFS_DYN_STATS, 10, false, NULL), strlen("{stats 4 }\n"));
	ck_assert_uint_eq(t.last_pad[BFS_DYN_STATS], 0);
	bfs_dynfiles_free(d);
}
END_TEST

START_TEST(an_unknown_reader_reads_the_last_sized)
{
	struct text t = { 0 };
	struct bfs_dynfiles *d = NULL;
	struct bfs_snapshot *own = NULL;
	char a[256];

	ck_assert_int_eq(bfs_dynfiles_new(&d, text_fn, &t), 0);
	/* never sized: the current one, made now */
	(void)read_of(d, BFS_DYN_ERRORS, 0, a);
	ck_assert_str_eq(a, "errors 1 }\n");
	(void)size_of(d, BFS_DYN_ERRORS, 0, false, NULL);
	(void)size_of(d, BFS_DYN_ERRORS, 5, false, NULL);
	(void)read_of(d, BFS_DYN_ERRORS, 0, a);
	ck_assert_str_eq(a, "errors 3 }\n");
	/* a reader never seen reads it too */
	(void)read_of(d, BFS_DYN_ERRORS, 99, a);
	ck_assert_str_eq(a, "errors 3 }\n");
	/* an open: a snapshot of its own, fresh and never padded */
	__atomic_store_n(&t.extra, 5, __ATOMIC_RELAXED);
	ck_assert_int_eq(bfs_dynfiles_open(d, BFS_DYN_STATS, &own), 0);
	ck_assert_uint_eq(own->len, strlen("{stats 4 xxxxx}\n"));
	ck_assert(memcmp(own->text, "{stats 4 xxxxx}\n", own->len) == 0);
	ck_assert_uint_eq(t.last_pad[BFS_DYN_STATS], 0);
	bfs_snapshot_put(own);
	bfs_dynfiles_free(d);
}
END_TEST

struct worker {
	struct bfs_dynfiles *d;
	uint64_t tid;
	int bad;
};

/* A reader reading on keeps seeing the snapshot it sized, whatever the
 * others do. */
static void *worker_main(void *arg)
{
	struct worker *w = arg;
	char a[512], b[512];

	for (int i = 0; i < 300; i++) {
		uint64_t len = size_of(w->d, BFS_DYN_STATS, w->tid, false, NULL), len2;

		if (read_of(w->d, BFS_DYN_STATS, w->tid, a) != len)
			w->bad++;
		len2 = size_of(w->d, BFS_DYN_STATS, w->tid, true, NULL);
		if (len2 != len || read_of(w->d, BFS_DYN_STATS, w->tid, b) != len ||
		    strcmp(a, b) != 0)
			w->bad++;
		if (i % 7 == 0)
			bfs_dynfiles_touch(w->d, w->tid);
	}
	return NULL;
}

START_TEST(threads_each_keep_their_snapshot)
{
	struct text t = { 0 };
	struct bfs_dynfiles *d = NULL;
	struct worker w[4];
	pthread_t th[4];

	ck_assert_int_eq(bfs_dynfiles_new(&d, text_fn, &t), 0);
	for (unsigned i = 0; i < 4; i++) {
		w[i] = (struct worker){ .d = d, .tid = 100 + i };
		ck_assert_int_eq(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
	}
	for (unsigned i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(w[i].bad, 0);
	}
	bfs_dynfiles_free(d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("dynfiles");
	TCase *tc = tcase_create("dynfiles");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, a_stat_makes_a_fresh_snapshot_that_its_reads_serve);
	tcase_add_test(tc, a_reader_reading_on_keeps_its_snapshot);
	tcase_add_test(tc, while_one_reads_another_gets_its_size);
	tcase_add_test(tc, an_unknown_reader_reads_the_last_sized);
	tcase_add_test(tc, threads_each_keep_their_snapshot);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
