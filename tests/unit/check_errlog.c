/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_errlog.c — errors.txt (fs/errlog.h): each line once, in the order
 * first reported, " (skipped)" kept, the counts, the bound and its "... N
 * more", the echo to the log, and many threads reporting the same lines.
 */
#include "errlog.h"

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The log's text as a string the test owns. */
static char *text_of(struct bfs_errlog *l, size_t *len)
{
	char *s = bfs_errlog_text(l, len);

	ck_assert_ptr_nonnull(s);
	ck_assert_uint_eq(strlen(s), *len);
	return s;
}

START_TEST(a_line_is_written_once)
{
	struct bfs_errlog *l = NULL;
	struct bfs_errlog_counts n;
	size_t len;
	char *s;

	ck_assert_int_eq(bfs_errlog_new(&l, 100, NULL), 0);
	s = text_of(l, &len);
	ck_assert_uint_eq(len, 0);
	free(s);
	ck_assert(bfs_errlog_add(l, "a.tfrecord: record 3 at offset 120: crc", false));
	ck_assert(bfs_errlog_add(l, "a.tfrecord: record 9 at offset 500: crc", true));
	ck_assert(!bfs_errlog_add(l, "a.tfrecord: record 3 at offset 120: crc", false));
	/* the same record, replaced this time: still the line already there */
	ck_assert(!bfs_errlog_add(l, "a.tfrecord: record 3 at offset 120: crc", true));
	s = text_of(l, &len);
	ck_assert_str_eq(s, "a.tfrecord: record 3 at offset 120: crc\n"
			    "a.tfrecord: record 9 at offset 500: crc (skipped)\n");
	free(s);
	bfs_errlog_counts(l, &n);
	ck_assert_uint_eq(n.corrupt, 2);
	ck_assert_uint_eq(n.skipped, 1);
	ck_assert_uint_eq(n.dropped, 0);
	ck_assert_uint_eq(n.lines, 2);
	bfs_errlog_free(l);
	bfs_errlog_free(NULL);
}
END_TEST

START_TEST(new_lines_are_echoed_to_the_log)
{
	struct bfs_errlog *l = NULL;
	char *buf = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&buf, &size);

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(bfs_errlog_new(&l, 100, f), 0);
	bfs_errlog_add(l, "one", false);
	bfs_errlog_add(l, "two", true);
	bfs_errlog_add(l, "one", false);
	bfs_errlog_free(l);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_str_eq(buf, "batchfs: one\nbatchfs: two (skipped)\n");
	free(buf);
}
END_TEST

START_TEST(past_the_bound_lines_are_counted_not_kept)
{
	struct bfs_errlog *l = NULL;
	struct bfs_errlog_counts n;
	size_t len;
	char *s;

	ck_assert_int_eq(bfs_errlog_new(&l, 3, NULL), 0);
	ck_assert(bfs_errlog_add(l, "l0", false));
	ck_assert(bfs_errlog_add(l, "l1", false));
	ck_assert(bfs_errlog_add(l, "l2", true));
	ck_assert(bfs_errlog_add(l, "l3", false));
	ck_assert(bfs_errlog_add(l, "l4", true));
	/* a kept line is still known; one past the bound is not remembered */
	ck_assert(!bfs_errlog_add(l, "l1", false));
	ck_assert(bfs_errlog_add(l, "l3", false));
	s = text_of(l, &len);
	ck_assert_str_eq(s, "l0\nl1\nl2 (skipped)\n... 3 more\n");
	free(s);
	bfs_errlog_counts(l, &n);
	ck_assert_uint_eq(n.corrupt, 6);
	ck_assert_uint_eq(n.skipped, 2);
	ck_assert_uint_eq(n.dropped, 3);
	ck_assert_uint_eq(n.lines, 3);
	bfs_errlog_free(l);
}
END_TEST

/* Lines longer than the first 4 KiB of text, many of them: the text grows
 * and keeps every byte. */
START_TEST(long_lines_grow_the_text)
{
	struct bfs_errlog *l = NULL;
	char line[6000];
	size_t len, want = 0;
	char *s;

	ck_assert_int_eq(bfs_errlog_new(&l, BFS_ERRLOG_MAX_LINES, NULL), 0);
	for (int i = 0; i < 40; i++) {
		size_t n = 100 + (size_t)i * 137;

		memset(line, 'a' + i % 26, n);
		snprintf(line + n, sizeof(line) - n, "#%d", i);
		ck_assert(bfs_errlog_add(l, line, i % 2));
		want += strlen(line) + (i % 2 ? strlen(" (skipped)") : 0) + 1;
	}
	s = text_of(l, &len);
	ck_assert_uint_eq(len, want);
	ck_assert(strstr(s, "#39 (skipped)\n") != NULL);
	ck_assert(s[len - 1] == '\n');
	free(s);
	bfs_errlog_free(l);
}
END_TEST

#define THREADS 6
#define MESSAGES 2000
#define REPORTS 4000

struct reporter {
	struct bfs_errlog *l;
	unsigned seed, counted;
};

static void *report_many(void *arg)
{
	struct reporter *r = arg;
	char msg[64];

	for (int i = 0; i < REPORTS; i++) {
		unsigned m = (r->seed + (unsigned)i * 7919u) % MESSAGES;

		snprintf(msg, sizeof(msg), "shard-%u: record %u: bad", m % 7, m);
		r->counted += bfs_errlog_add(r->l, msg, m % 3 == 0);
	}
	return NULL;
}

/* stats.json and errors.txt read meanwhile: the counts never go back, the
 * text only grows */
struct reader {
	struct bfs_errlog *l;
	atomic_bool done;
};

static void *read_meanwhile(void *arg)
{
	struct reader *r = arg;
	struct bfs_errlog_counts n, last = { 0 };
	size_t len, last_len = 0;

	while (!atomic_load(&r->done)) {
		char *s;

		bfs_errlog_counts(r->l, &n);
		ck_assert_uint_ge(n.corrupt, last.corrupt);
		ck_assert_uint_le(n.skipped, n.corrupt);
		last = n;
		s = bfs_errlog_text(r->l, &len);
		ck_assert_ptr_nonnull(s);
		ck_assert_uint_ge(len, last_len);
		last_len = len;
		free(s);
	}
	return NULL;
}

/* Threads reporting the same lines at once: each line is counted and
 * written once, whichever thread came first. */
START_TEST(threads_report_each_line_once)
{
	struct bfs_errlog *l = NULL;
	struct reporter r[THREADS];
	struct reader rd;
	pthread_t tid[THREADS], rtid;
	struct bfs_errlog_counts n;
	unsigned counted = 0;
	size_t len;
	char *s, msg[64];

	ck_assert_int_eq(bfs_errlog_new(&l, BFS_ERRLOG_MAX_LINES, NULL), 0);
	rd.l = l;
	atomic_init(&rd.done, false);
	ck_assert_int_eq(pthread_create(&rtid, NULL, read_meanwhile, &rd), 0);
	for (int i = 0; i < THREADS; i++) {
		r[i] = (struct reporter){ .l = l, .seed = (unsigned)i * 331u };
		ck_assert_int_eq(pthread_create(&tid[i], NULL, report_many, &r[i]), 0);
	}
	for (int i = 0; i < THREADS; i++) {
		pthread_join(tid[i], NULL);
		counted += r[i].counted;
	}
	atomic_store(&rd.done, true);
	pthread_join(rtid, NULL);
	bfs_errlog_counts(l, &n);
	ck_assert_uint_eq(counted, MESSAGES);
	ck_assert_uint_eq(n.corrupt, MESSAGES);
	ck_assert_uint_eq(n.skipped, (MESSAGES + 2) / 3);
	ck_assert_uint_eq(n.lines, MESSAGES);
	s = text_of(l, &len);
	for (unsigned m = 0; m < MESSAGES; m++) {
		char *at;

		/* each line whole: after a newline (or at the start) */
		snprintf(msg, sizeof(msg), "\nshard-%u: record %u: bad%s\n", m % 7, m,
			 m % 3 == 0 ? " (skipped)" : "");
		at = strncmp(s, msg + 1, strlen(msg + 1)) == 0 ? s : strstr(s, msg);
		ck_assert_msg(at != NULL, "%s", msg + 1);
		ck_assert_msg(strstr(at + 1, msg) == NULL, "twice: %s", msg + 1);
	}
	free(s);
	bfs_errlog_free(l);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("errlog");
	TCase *tc = tcase_create("errlog");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, a_line_is_written_once);
	tcase_add_test(tc, new_lines_are_echoed_to_the_log);
	tcase_add_test(tc, past_the_bound_lines_are_counted_not_kept);
	tcase_add_test(tc, long_lines_grow_the_text);
	tcase_add_test(tc, threads_report_each_line_once);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
