/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_fetch.c — the I/O stage (fetch.h) and the reads planned from the
 * permutation (ioplan.h): bytes, sharing, merging, bounds, priorities,
 * retries, stopping; and the planner over a real dataset.
 */
#include "batch.h"
#include "dataset.h"
#include "fetch.h"
#include "ioplan.h"
#include "pbtest.h"
#include "testfiles.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#define MiB ((uint64_t)1 << 20)

static uint8_t pattern(uint32_t obj, uint64_t off)
{
	return (uint8_t)(off * 7 + obj * 13 + (off >> 9));
}

/* ------------------------------------------------- a backend by hand */

/* Reads a test completes itself, in the order it likes. */
struct manual {
	pthread_mutex_t m;
	struct bfs_fetch_read *r[4096];
	size_t n;
};

static void manual_submit(void *ctx, struct bfs_fetch_read *r)
{
	struct manual *mb = ctx;

	pthread_mutex_lock(&mb->m);
	ck_assert_uint_lt(mb->n, 4096);
	mb->r[mb->n++] = r;
	pthread_mutex_unlock(&mb->m);
}

/* Take the oldest submitted read (NULL: none). */
static struct bfs_fetch_read *manual_take(struct manual *mb)
{
	struct bfs_fetch_read *r = NULL;

	pthread_mutex_lock(&mb->m);
	if (mb->n) {
		r = mb->r[0];
		memmove(mb->r, mb->r + 1, --mb->n * sizeof(*mb->r));
	}
	pthread_mutex_unlock(&mb->m);
	return r;
}

/* Fill r with the pattern: all of it, or `upto` bytes. */
static void manual_serve(struct bfs_fetch_read *r, int64_t upto)
{
	uint32_t obj;
	uint64_t off, len;
	uint8_t *dst;

	bfs_fetch_read_target(r, &obj, &off, &dst, &len);
	if (upto < 0 || (uint64_t)upto > len)
		upto = (int64_t)len;
	for (uint64_t i = 0; i < (uint64_t)upto; i++)
		dst[i] = pattern(obj, off + i);
	bfs_fetch_read_done(r, upto, NULL);
}

static struct bfs_fetch *manual_new(struct manual *mb, unsigned depth, uint64_t budget,
				    uint64_t gap, uint64_t max_read)
{
	struct bfs_fetch_source src = { .submit = manual_submit, .ctx = mb };
	struct bfs_fetch_opts o = { .depth = depth,
				    .budget = budget,
				    .merge_gap = gap,
				    .max_read = max_read,
				    .backend = BFS_FETCH_CUSTOM };
	struct bfs_fetch *f = NULL;

	memset(mb, 0, sizeof(*mb));
	pthread_mutex_init(&mb->m, NULL);
	ck_assert_int_eq(bfs_fetch_new(&f, 4, &src, &o), 0);
	return f;
}

static void check_bytes(struct bfs_fetch *f, uint32_t obj, uint64_t off, size_t n)
{
	uint8_t *buf = malloc(n);
	struct iovec v = { buf, n };

	uint8_t *want = malloc(n);

	ck_assert_int_eq(bfs_fetch_copyv(f, obj, off, &v, 1), 0);
	for (size_t i = 0; i < n; i++)
		want[i] = pattern(obj, off + i);
	ck_assert_msg(memcmp(buf, want, n) == 0, "%zu bytes of %u at %llu", n, obj,
		      (unsigned long long)off);
	free(want);
	free(buf);
}

START_TEST(ranges_wanted_twice_are_read_once)
{
	struct manual mb;
	struct bfs_fetch *f = manual_new(&mb, 16, 64 * MiB, 0, MiB);
	struct bfs_fetch_range a[2] = { { 0, 1000, 500 }, { 1, 0, 100 } };
	struct bfs_fetch_range b[2] = { { 0, 1200, 100 }, { 1, 50, 200 } };
	struct bfs_fetch_ticket *ta, *tb;
	struct bfs_fetch_read *r;
	struct bfs_fetch_stats st;

	ck_assert_int_eq(bfs_fetch_want(f, a, 2, 5, 0, &ta), 0);
	ck_assert_int_eq(bfs_fetch_want(f, b, 2, 5, 0, &tb), 0);
	/* b's first range lies in a's; its second runs past a's second */
	while ((r = manual_take(&mb)))
		manual_serve(r, -1);
	bfs_fetch_stats(f, &st);
	ck_assert_uint_eq(st.reads, 3);
	ck_assert_uint_eq(st.bytes, 500 + 100 + 150);
	check_bytes(f, 0, 1000, 500);
	check_bytes(f, 1, 0, 250);
	/* bytes nobody holds are not there */
	{
		uint8_t x;
		struct iovec v = { &x, 1 };
		ck_assert_int_eq(bfs_fetch_copyv(f, 0, 1500, &v, 1), -ENODATA);
		ck_assert_int_eq(bfs_fetch_copyv(f, 2, 0, &v, 1), -ENODATA);
	}
	bfs_fetch_release(f, ta);
	check_bytes(f, 0, 1200, 100); /* b still holds these */
	bfs_fetch_release(f, tb);
	bfs_fetch_stats(f, &st);
	ck_assert_uint_eq(st.buffered, 0);
	bfs_fetch_free(f);
}
END_TEST

START_TEST(near_ranges_share_a_read_within_the_bounds)
{
	struct manual mb;
	struct bfs_fetch *f = manual_new(&mb, 16, 64 * MiB, 4096, 64 << 10);
	/* gap 100 under half of 2 x 300 bytes: joined; a gap of 1000
	 * against 2 x 300 bytes carried: not; past 4096: not */
	struct bfs_fetch_range r[] = {
		{ 0, 0, 300 },	  { 0, 400, 300 },    { 0, 1700, 300 },
		{ 0, 9000, 300 }, { 1, 0, 70 << 10 },
	};
	struct bfs_fetch_ticket *t;
	struct bfs_fetch_read *x;
	struct bfs_fetch_stats st;
	uint64_t lens[8];
	size_t n = 0;

	ck_assert_int_eq(bfs_fetch_want(f, r, 5, 1, 0, &t), 0);
	while ((x = manual_take(&mb))) {
		uint32_t obj;
		uint64_t off, len;
		uint8_t *dst;

		bfs_fetch_read_target(x, &obj, &off, &dst, &len);
		lens[n++] = len;
		manual_serve(x, -1);
	}
	/* [0,700) [1700,2000) [9000,9300) and 70 KiB of object 1 in one read
	 * (a last piece takes up to half a read more rather than be short) */
	ck_assert_uint_eq(n, 4);
	ck_assert_uint_eq(lens[0], 700);
	ck_assert_uint_eq(lens[1], 300);
	ck_assert_uint_eq(lens[2], 300);
	ck_assert_uint_eq(lens[3], 70 << 10);
	bfs_fetch_stats(f, &st);
	ck_assert_uint_eq(st.ranges, 5);
	ck_assert_uint_eq(st.merged, 1);
	check_bytes(f, 0, 0, 700);
	check_bytes(f, 1, 0, 70 << 10);
	bfs_fetch_release(f, t);
	bfs_fetch_free(f);
}
END_TEST

START_TEST(long_ranges_are_cut_into_reads)
{
	struct manual mb;
	struct bfs_fetch *f = manual_new(&mb, 64, 64 * MiB, 0, MiB);
	struct bfs_fetch_range r = { 2, 10, 4 * MiB + 100 };
	struct bfs_fetch_ticket *t;
	struct bfs_fetch_read *x;
	uint64_t total = 0;
	size_t n = 0;

	ck_assert_int_eq(bfs_fetch_want(f, &r, 1, 1, 0, &t), 0);
	while ((x = manual_take(&mb))) {
		uint32_t obj;
		uint64_t off, len;
		uint8_t *dst;

		bfs_fetch_read_target(x, &obj, &off, &dst, &len);
		ck_assert_uint_ge(len, MiB);
		ck_assert_uint_le(len, MiB + MiB / 2);
		ck_assert_uint_eq(off, 10 + total);
		total += len;
		n++;
		manual_serve(x, -1);
	}
	ck_assert_uint_eq(n, 4);
	ck_assert_uint_eq(total, 4 * MiB + 100);
	check_bytes(f, 2, 10, (size_t)(4 * MiB + 100));
	bfs_fetch_release(f, t);
	bfs_fetch_free(f);
}
END_TEST

static uint64_t obj_size(void *ctx, uint32_t obj)
{
	(void)ctx, (void)obj;
	return 10 * MiB;
}

static uint64_t kept_3mib(void *ctx, uint32_t obj)
{
	(void)ctx;
	return obj == 1 ? 3 * MiB : 0;
}

static int read_cmp(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;

	if (x[0] != y[0])
		return x[0] < y[0] ? -1 : 1;
	return (x[1] > y[1]) - (x[1] < y[1]);
}

/* With align and source.aligned (the disk cache keeps [0, 3 MiB) of
 * object 1 and nothing of the others): a range below the kept end is read
 * in whole blocks, one reaching past it is widened over the kept part
 * only, and the rest (another object's) is read as asked. */
START_TEST(only_the_kept_part_is_read_in_whole_blocks)
{
	struct manual mb;
	struct bfs_fetch_source src = {
		.submit = manual_submit, .size = obj_size, .aligned = kept_3mib, .ctx = &mb
	};
	struct bfs_fetch_opts o = { .depth = 64,
				    .budget = 64 * MiB,
				    .max_read = MiB,
				    .align = MiB,
				    .backend = BFS_FETCH_CUSTOM };
	struct bfs_fetch_range r[3] = {
		{ 1, MiB / 2, 1000 }, /* kept: [0, 1 MiB) */
		{ 1, 2 * MiB + MiB / 2,
		  MiB }, /* past the end: [2, 3) MiB, then [3, 3.5) as asked */
		{ 2, MiB / 2, 1000 }, /* not kept: as asked */
	};
	static const uint64_t want[][3] = {
		{ 1, 0, MiB },
		{ 1, 2 * MiB, MiB },
		{ 1, 3 * MiB, MiB / 2 },
		{ 2, MiB / 2, 1000 },
	};
	uint64_t got[4][3];
	struct bfs_fetch_ticket *t;
	struct bfs_fetch_read *x;
	struct bfs_fetch *f = NULL;
	size_t n = 0;

	memset(&mb, 0, sizeof(mb));
	pthread_mutex_init(&mb.m, NULL);
	ck_assert_int_eq(bfs_fetch_new(&f, 4, &src, &o), 0);
	ck_assert_int_eq(bfs_fetch_want(f, r, 3, 1, BFS_WANT_NO_GAPS, &t), 0);
	while ((x = manual_take(&mb))) {
		uint32_t obj;
		uint64_t off, len;
		uint8_t *dst;

		bfs_fetch_read_target(x, &obj, &off, &dst, &len);
		ck_assert_uint_lt(n, 4);
		got[n][0] = obj;
		got[n][1] = off;
		got[n][2] = len;
		n++;
		manual_serve(x, -1);
	}
	ck_assert_uint_eq(n, 4);
	qsort(got, n, sizeof(got[0]), read_cmp);
	for (size_t k = 0; k < n; k++)
		ck_assert_msg(got[k][0] == want[k][0] && got[k][1] == want[k][1] &&
				      got[k][2] == want[k][2],
			      "read %zu: object %" PRIu64 " [%" PRIu64 ", +%" PRIu64 ")", k,
			      got[k][0], got[k][1], got[k][2]);
	check_bytes(f, 1, MiB / 2, 1000);
	check_bytes(f, 1, 2 * MiB + MiB / 2, (size_t)MiB);
	check_bytes(f, 2, MiB / 2, 1000);
	bfs_fetch_release(f, t);
	bfs_fetch_free(f);
}
END_TEST

/* The local copy holds block [1, 2) MiB of object 1 (and keeps [0, 3)). */
static bool holds_block_1(void *ctx, uint32_t obj, uint64_t off, uint64_t len)
{
	(void)ctx;
	return obj == 1 && off >= MiB && off + len <= 2 * MiB;
}

static atomic_int local_reads;

static bool local_block_1(void *ctx, uint32_t obj, uint64_t off, uint8_t *dst, uint64_t len)
{
	(void)ctx;
	if (!holds_block_1(NULL, obj, off, len))
		return false;
	for (uint64_t i = 0; i < len; i++)
		dst[i] = pattern(obj, off + i);
	atomic_fetch_add(&local_reads, 1);
	return true;
}

/* A widened range over a block the copy holds and one it does not: the
 * held block is read there, only the other is fetched (under
 * shuffle=block, two ranges of records share a block: the second must not
 * fetch it again). */
START_TEST(a_block_the_copy_holds_is_not_fetched_with_its_neighbour)
{
	struct manual mb;
	struct bfs_fetch_source src = { .submit = manual_submit,
					.size = obj_size,
					.aligned = kept_3mib,
					.has = holds_block_1,
					.local = local_block_1,
					.ctx = &mb };
	struct bfs_fetch_opts o = { .depth = 64,
				    .budget = 64 * MiB,
				    .max_read = 4 * MiB,
				    .align = MiB,
				    .backend = BFS_FETCH_CUSTOM };
	struct bfs_fetch_range r = { 1, MiB / 2, MiB };
	struct bfs_fetch_ticket *t;
	struct bfs_fetch_read *x;
	struct bfs_fetch *f = NULL;
	struct bfs_fetch_stats st;
	size_t n = 0;

	atomic_store(&local_reads, 0);
	memset(&mb, 0, sizeof(mb));
	pthread_mutex_init(&mb.m, NULL);
	ck_assert_int_eq(bfs_fetch_new(&f, 4, &src, &o), 0);
	ck_assert_int_eq(bfs_fetch_want(f, &r, 1, 1, 0, &t), 0);
	while ((x = manual_take(&mb))) {
		uint32_t obj;
		uint64_t off, len;
		uint8_t *dst;

		bfs_fetch_read_target(x, &obj, &off, &dst, &len);
		ck_assert_msg(obj == 1 && off == 0 && len == MiB,
			      "fetched object %u [%" PRIu64 ", +%" PRIu64 ")", obj, off, len);
		n++;
		manual_serve(x, -1);
	}
	ck_assert_uint_eq(n, 1);
	check_bytes(f, 1, MiB / 2, (size_t)MiB);
	ck_assert_int_eq(atomic_load(&local_reads), 1);
	bfs_fetch_stats(f, &st);
	ck_assert_uint_eq(st.local, 1);
	ck_assert_uint_eq(st.bytes, MiB);
	bfs_fetch_release(f, t);
	bfs_fetch_free(f);
}
END_TEST

START_TEST(planned_tickets_stay_within_the_budget)
{
	struct manual mb;
	struct bfs_fetch *f = manual_new(&mb, 4, 10000, 0, MiB);
	struct bfs_fetch_range a = { 0, 0, 6000 }, b = { 0, 8000, 6000 }, c = { 0, 100, 200 };
	struct bfs_fetch_ticket *ta, *tb = NULL, *tc;
	struct bfs_fetch_stats st;
	struct bfs_fetch_read *x;

	ck_assert_int_eq(bfs_fetch_want(f, &a, 1, 1, 0, &ta), 0);
	ck_assert(!bfs_fetch_has_room(f, 6000));
	ck_assert_int_eq(bfs_fetch_want(f, &b, 1, 2, 0, &tb), -ENOSPC);
	ck_assert_ptr_null(tb);
	/* bytes already held cost nothing */
	ck_assert_int_eq(bfs_fetch_want(f, &c, 1, 2, 0, &tc), 0);
	/* a reader waiting is served whatever the budget */
	ck_assert_int_eq(bfs_fetch_want(f, &b, 1, BFS_FETCH_NOW, BFS_WANT_DEMAND, &tb), 0);
	bfs_fetch_stats(f, &st);
	ck_assert_uint_eq(st.refused, 1);
	ck_assert_uint_gt(st.buffered, 10000);
	while ((x = manual_take(&mb)))
		manual_serve(x, -1);
	bfs_fetch_release(f, ta);
	bfs_fetch_release(f, tb);
	bfs_fetch_release(f, tc);
	bfs_fetch_stats(f, &st);
	ck_assert_uint_eq(st.buffered, 0);
	ck_assert_uint_le(st.peak_buffered, 12000 + 2 * 128);
	bfs_fetch_free(f);
}
END_TEST

START_TEST(reads_go_by_priority_and_a_waiting_reader_first)
{
	struct manual mb;
	struct bfs_fetch *f = manual_new(&mb, 1, 64 * MiB, 0, MiB);
	struct bfs_fetch_range r[4] = {
		{ 0, 0, 10 }, { 0, 100, 10 }, { 0, 200, 10 }, { 0, 300, 10 }
	};
	struct bfs_fetch_ticket *t[4];
	struct bfs_fetch_read *x;
	uint64_t order[4];
	size_t n = 0;

	/* one read in flight at a time: the first queued goes at once */
	ck_assert_int_eq(bfs_fetch_want(f, &r[0], 1, 30, 0, &t[0]), 0);
	ck_assert_int_eq(bfs_fetch_want(f, &r[1], 1, 20, 0, &t[1]), 0);
	ck_assert_int_eq(bfs_fetch_want(f, &r[2], 1, 10, 0, &t[2]), 0);
	ck_assert_int_eq(bfs_fetch_want(f, &r[3], 1, 40, 0, &t[3]), 0);
	bfs_fetch_hurry(f, t[3], BFS_FETCH_NOW);
	while ((x = manual_take(&mb))) {
		uint32_t obj;
		uint64_t off, len;
		uint8_t *dst;

		bfs_fetch_read_target(x, &obj, &off, &dst, &len);
		order[n++] = off;
		manual_serve(x, -1); /* completing one lets the next go */
	}
	ck_assert_uint_eq(n, 4);
	ck_assert_uint_eq(order[0], 0);
	ck_assert_uint_eq(order[1], 300);
	ck_assert_uint_eq(order[2], 200);
	ck_assert_uint_eq(order[3], 100);
	for (int i = 0; i < 4; i++)
		bfs_fetch_release(f, t[i]);
	bfs_fetch_free(f);
}
END_TEST

/* max_inflight_bytes: reads past it wait in the queue, where a read a
 * reader waits for goes before the planned ones (in flight, it would
 * share the source with all of them). */
START_TEST(bytes_in_flight_are_bounded_and_a_waiting_reader_goes_first)
{
	struct manual mb;
	struct bfs_fetch_source src = { .submit = manual_submit, .ctx = &mb };
	struct bfs_fetch_opts o = { .depth = 16,
				    .budget = 64 * MiB,
				    .max_read = MiB,
				    .max_inflight_bytes = 3000,
				    .backend = BFS_FETCH_CUSTOM };
	struct bfs_fetch_ticket *t[11];
	struct bfs_fetch_stats st;
	struct bfs_fetch_read *x;
	struct bfs_fetch *f = NULL;
	uint32_t obj;
	uint64_t off, len;
	uint8_t *dst;

	memset(&mb, 0, sizeof(mb));
	pthread_mutex_init(&mb.m, NULL);
	ck_assert_int_eq(bfs_fetch_new(&f, 4, &src, &o), 0);
	for (int i = 0; i < 10; i++) {
		struct bfs_fetch_range r = { 0, (uint64_t)i * 10000, 1000 };
		ck_assert_int_eq(bfs_fetch_want(f, &r, 1, 10 + (uint64_t)i, 0, &t[i]), 0);
	}
	ck_assert_uint_eq(mb.n, 3); /* 3 x 1000 bytes in flight, of 16 places */
	{
		struct bfs_fetch_range r = { 1, 0, 1000 };
		ck_assert_int_eq(bfs_fetch_want(f, &r, 1, BFS_FETCH_NOW, BFS_WANT_DEMAND, &t[10]),
				 0);
	}
	ck_assert_uint_eq(mb.n, 3);
	manual_serve(manual_take(&mb), -1); /* room for one: the reader's */
	ck_assert_uint_eq(mb.n, 3);
	x = mb.r[2];
	bfs_fetch_read_target(x, &obj, &off, &dst, &len);
	ck_assert_uint_eq(obj, 1);
	while ((x = manual_take(&mb)))
		manual_serve(x, -1);
	bfs_fetch_stats(f, &st);
	ck_assert_uint_eq(st.reads, 11);
	ck_assert_uint_eq(st.peak_inflight, 3);
	check_bytes(f, 1, 0, 1000);
	check_bytes(f, 0, 90000, 1000);
	for (int i = 0; i < 11; i++)
		bfs_fetch_release(f, t[i]);
	bfs_fetch_free(f);
}
END_TEST

START_TEST(released_tickets_drop_their_queued_reads)
{
	struct manual mb;
	struct bfs_fetch *f = manual_new(&mb, 1, 64 * MiB, 0, MiB);
	struct bfs_fetch_range a = { 0, 0, 10 }, b = { 0, 100, 10 };
	struct bfs_fetch_ticket *ta, *tb;
	struct bfs_fetch_stats st;
	struct bfs_fetch_read *x;

	ck_assert_int_eq(bfs_fetch_want(f, &a, 1, 1, 0, &ta), 0);
	ck_assert_int_eq(bfs_fetch_want(f, &b, 1, 2, 0, &tb), 0);
	bfs_fetch_release(f, tb); /* queued behind a: never read */
	bfs_fetch_release(f, ta); /* in flight: its bytes go when it ends */
	x = manual_take(&mb);
	ck_assert_ptr_nonnull(x);
	manual_serve(x, -1);
	ck_assert_ptr_null(manual_take(&mb));
	bfs_fetch_stats(f, &st);
	ck_assert_uint_eq(st.dropped, 1);
	ck_assert_uint_eq(st.reads, 1);
	ck_assert_uint_eq(st.buffered, 0);
	bfs_fetch_free(f);
}
END_TEST

START_TEST(a_failed_read_is_retried_once_then_fails_its_bytes)
{
	struct manual mb;
	struct bfs_fetch *f = manual_new(&mb, 4, 64 * MiB, 0, MiB);
	struct bfs_fetch_range a = { 0, 0, 100 }, b = { 1, 0, 100 };
	struct bfs_fetch_ticket *ta, *tb;
	struct bfs_fetch_stats st;
	struct bfs_fetch_read *x;
	uint8_t buf[100];
	struct iovec v = { buf, sizeof(buf) };

	ck_assert_int_eq(bfs_fetch_want(f, &a, 1, 1, 0, &ta), 0);
	ck_assert_int_eq(bfs_fetch_want(f, &b, 1, 1, 0, &tb), 0);
	/* a: short, then whole; b: an error twice */
	x = manual_take(&mb);
	manual_serve(x, 40);
	x = manual_take(&mb);
	bfs_fetch_read_done(x, -EIO, "connection reset");
	while ((x = manual_take(&mb))) {
		uint32_t obj;
		uint64_t off, len;
		uint8_t *dst;

		bfs_fetch_read_target(x, &obj, &off, &dst, &len);
		if (obj == 0)
			manual_serve(x, -1);
		else
			bfs_fetch_read_done(x, -EIO, "connection reset");
	}
	check_bytes(f, 0, 0, 100);
	ck_assert_int_eq(bfs_fetch_copyv(f, 1, 10, &v, 1), -EIO);
	ck_assert_str_eq(bfs_err_msg(), "connection reset");
	bfs_fetch_stats(f, &st);
	ck_assert_uint_eq(st.retries, 2);
	ck_assert_uint_eq(st.failed, 1);
	/* a new ticket tries the failed bytes again */
	bfs_fetch_release(f, tb);
	ck_assert_int_eq(bfs_fetch_want(f, &b, 1, 1, 0, &tb), 0);
	x = manual_take(&mb);
	ck_assert_ptr_nonnull(x);
	manual_serve(x, -1);
	check_bytes(f, 1, 0, 100);
	bfs_fetch_release(f, ta);
	bfs_fetch_release(f, tb);
	bfs_fetch_free(f);
}
END_TEST

struct waiter {
	struct bfs_fetch *f;
	int rc;
};

static void *wait_copy(void *arg)
{
	struct waiter *w = arg;
	uint8_t buf[10];
	struct iovec v = { buf, sizeof(buf) };

	w->rc = bfs_fetch_copyv(w->f, 0, 0, &v, 1);
	return NULL;
}

START_TEST(stopping_ends_every_wait)
{
	struct manual mb;
	struct bfs_fetch *f = manual_new(&mb, 4, 64 * MiB, 0, MiB);
	struct bfs_fetch_range a = { 0, 0, 10 };
	struct bfs_fetch_ticket *t;
	struct waiter w = { f, 1 };
	struct timespec ts = { 0, 50000000 };
	struct bfs_fetch_stats st;
	pthread_t tid;

	ck_assert_int_eq(bfs_fetch_want(f, &a, 1, 1, 0, &t), 0);
	ck_assert_int_eq(pthread_create(&tid, NULL, wait_copy, &w), 0);
	nanosleep(&ts, NULL); /* the source never answers */
	bfs_fetch_stats(f, &st);
	ck_assert_uint_eq(st.inflight, 1);
	bfs_fetch_stop(f);
	pthread_join(tid, NULL);
	ck_assert_int_eq(w.rc, -ESHUTDOWN);
	/* the source answers at last: the read ends, nothing is left behind */
	manual_serve(manual_take(&mb), -1);
	bfs_fetch_release(f, t);
	bfs_fetch_stats(f, &st);
	ck_assert_uint_eq(st.inflight, 0);
	ck_assert_uint_eq(st.buffered, 0);
	bfs_fetch_free(f);
}
END_TEST

START_TEST(a_read_a_copy_waits_for_is_read_though_its_ticket_goes)
{
	struct manual mb;
	struct bfs_fetch *f = manual_new(&mb, 1, 64 * MiB, 0, MiB);
	struct bfs_fetch_range a = { 0, 100, 10 }, b = { 0, 0, 10 };
	struct bfs_fetch_ticket *ta, *tb;
	struct waiter w = { f, 1 };
	struct timespec ts = { 0, 20000000 }, until;
	struct bfs_fetch_stats st;
	struct bfs_fetch_read *x;
	pthread_t tid;
	int joined;

	/* a is in flight (depth 1), b queued behind it; a copy waits for b */
	ck_assert_int_eq(bfs_fetch_want(f, &a, 1, 1, 0, &ta), 0);
	ck_assert_int_eq(bfs_fetch_want(f, &b, 1, 2, 0, &tb), 0);
	ck_assert_int_eq(pthread_create(&tid, NULL, wait_copy, &w), 0);
	do {
		nanosleep(&ts, NULL);
		bfs_fetch_stats(f, &st);
	} while (st.waits == 0);
	/* b's ticket goes while the copy waits (a unit done, a plan
	 * dropped): its read must still be issued, or the copy waits for
	 * ever */
	bfs_fetch_release(f, tb);
	while ((x = manual_take(&mb)))
		manual_serve(x, -1);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 5;
	joined = pthread_timedjoin_np(tid, NULL, &until);
	if (joined != 0) { /* let the copy go before failing */
		bfs_fetch_stop(f);
		pthread_join(tid, NULL);
	}
	ck_assert_msg(joined == 0, "the copy still waits for a read that was dropped");
	ck_assert_int_eq(w.rc, 0);
	bfs_fetch_release(f, ta);
	bfs_fetch_stats(f, &st);
	ck_assert_uint_eq(st.reads, 2);
	ck_assert_uint_eq(st.buffered, 0);
	bfs_fetch_free(f);
}
END_TEST

/* ----------------------------------------------- descriptor backends */

static void fd_pattern_file(const char *path, uint64_t size)
{
	uint8_t *p = malloc(size);

	for (uint64_t i = 0; i < size; i++)
		p[i] = pattern(0, i);
	test_spit(path, p, size);
	free(p);
}

static int fd_pin(void *ctx, uint32_t obj, int *fd)
{
	(void)obj;
	*fd = *(int *)ctx;
	return 0;
}

static void fd_unpin(void *ctx, uint32_t obj)
{
	(void)ctx, (void)obj;
}

static void check_fd_backend(enum bfs_fetch_backend be, const char *name)
{
	char dir[64], path[96];
	struct bfs_fetch_opts o = {
		.depth = 8, .budget = 64 * MiB, .merge_gap = 0, .max_read = 256 << 10, .backend = be
	};
	struct bfs_fetch_range r[64];
	struct bfs_fetch_ticket *t;
	struct bfs_fetch_stats st;
	struct bfs_fetch *f = NULL;
	struct bfs_fetch_source src = { .pin = fd_pin, .unpin = fd_unpin };
	int fd;

	test_mkdir(dir, sizeof(dir), "check_fetch_fd");
	snprintf(path, sizeof(path), "%s/obj", dir);
	fd_pattern_file(path, 3 * MiB);
	fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	src.ctx = &fd;
	ck_assert_msg(bfs_fetch_new(&f, 1, &src, &o) == 0, "%s", bfs_err_msg());
	ck_assert_str_eq(bfs_fetch_backend_name(f), name);
	for (int i = 0; i < 64; i++)
		r[i] = (struct bfs_fetch_range){ 0, (uint64_t)i * 40000 + 17, 1000 + (uint64_t)i };
	r[63] = (struct bfs_fetch_range){ 0, MiB, 2 * MiB }; /* to the end, in pieces */
	ck_assert_int_eq(bfs_fetch_want(f, r, 64, BFS_FETCH_NOW, BFS_WANT_DEMAND, &t), 0);
	for (int i = 0; i < 63; i++)
		check_bytes(f, 0, (uint64_t)i * 40000 + 17, 1000 + (size_t)i);
	check_bytes(f, 0, MiB, (size_t)(2 * MiB));
	bfs_fetch_stats(f, &st);
	ck_assert_uint_le(st.peak_inflight, 8);
	bfs_fetch_release(f, t);
	/* past the end of the file: a short read, retried, then an error */
	r[0] = (struct bfs_fetch_range){ 0, 3 * MiB - 10, 100 };
	ck_assert_int_eq(bfs_fetch_want(f, r, 1, BFS_FETCH_NOW, BFS_WANT_DEMAND, &t), 0);
	{
		uint8_t buf[100];
		struct iovec v = { buf, sizeof(buf) };
		ck_assert_int_eq(bfs_fetch_copyv(f, 0, 3 * MiB - 10, &v, 1), -EIO);
		ck_assert(strstr(bfs_err_msg(), "short read") != NULL);
	}
	bfs_fetch_release(f, t);
	bfs_fetch_free(f);
	close(fd);
	test_rmdir(dir);
}

/* ------------------------------------------------------------ passes */

/* Ranges r[0..n) of 4 objects of 4 MiB: records of 100 to 400 bytes at
 * random places, some across a block's end; spans: the blocks they touch.
 * Returns how many spans. */
static size_t pass_ranges(unsigned *seed, struct bfs_fetch_range *r, size_t n,
			  struct bfs_fetch_range *sp)
{
	size_t m = 0;

	for (size_t k = 0; k < n; k++) {
		uint32_t obj = (uint32_t)(rand_r(seed) % 4);
		uint64_t len = 100 + (uint64_t)(rand_r(seed) % 300);
		uint64_t off = (uint64_t)rand_r(seed) % (4 * MiB - len);

		if (k % 8 == 0) /* across a block's end */
			off = (1 + (uint64_t)(rand_r(seed) % 3)) * MiB - len / 2;
		r[k] = (struct bfs_fetch_range){ obj, off, len };
	}
	for (uint32_t obj = 0; obj < 4; obj++)
		for (uint64_t b = 0; b < 4; b++) {
			bool touched = false;

			for (size_t k = 0; k < n && !touched; k++)
				touched = r[k].obj == obj && r[k].off < (b + 1) * MiB &&
					  r[k].off + r[k].len > b * MiB;
			if (touched)
				sp[m++] = (struct bfs_fetch_range){ obj, b * MiB, MiB };
		}
	return m;
}

/* A pass reads each span once, whoever else wants it meanwhile, and keeps
 * exactly the ranges' bytes: tickets made while the spans' reads are on
 * their way join them; one released before its reads end takes nothing
 * with it; a range across two spans comes from both. */
START_TEST(a_pass_reads_each_span_once_and_keeps_the_ranges)
{
	enum { N = 600, ROUNDS = 20 };
	struct bfs_fetch_range r[3][N], sp[3][16], keep[3][N];
	struct bfs_fetch_ticket *t[3];
	struct bfs_fetch_read *rd;
	struct bfs_fetch_stats st;
	unsigned seed = 7;

	for (int round = 0; round < ROUNDS; round++) {
		struct manual mb;
		struct bfs_fetch *f = manual_new(&mb, 64, 64 * MiB, 0, 8 * MiB);
		size_t nsp[3], served = 0;

		for (int w = 0; w < 3; w++) {
			nsp[w] = pass_ranges(&seed, r[w], N, sp[w]);
			memcpy(keep[w], r[w], sizeof(r[w]));
			ck_assert_int_eq(
				bfs_fetch_want_pass(f, r[w], N, sp[w], nsp[w], 10 + w, 0, &t[w]),
				0);
			/* some reads end between two tickets */
			for (int k = 0; k < round % 4 && (rd = manual_take(&mb)); k++, served++)
				manual_serve(rd, -1);
		}
		bfs_fetch_release(f, t[1]); /* the middle one goes before its reads */
		while ((rd = manual_take(&mb))) {
			manual_serve(rd, -1);
			served++;
		}
		bfs_fetch_stats(f, &st);
		/* no span read twice while its read was on its way: at most one
		 * read per block when none ended before the last ticket (a span
		 * whose read ended is read again for a later one), and nothing
		 * but spans (every range is in one) */
		ck_assert_uint_le(st.reads, round % 4 ? 3 * 16 : 16);
		ck_assert_uint_eq(st.reads, st.pass_reads);
		for (int w = 0; w < 3; w += 2)
			for (size_t k = 0; k < N; k++)
				check_bytes(f, keep[w][k].obj, keep[w][k].off, keep[w][k].len);
		bfs_fetch_release(f, t[0]);
		bfs_fetch_release(f, t[2]);
		bfs_fetch_stats(f, &st);
		ck_assert_uint_eq(st.buffered, 0);
		bfs_fetch_free(f);
		(void)served;
	}
}
END_TEST

START_TEST(reader_threads_read_a_file)
{
	check_fd_backend(BFS_FETCH_THREADS, "threads");
}
END_TEST

START_TEST(io_uring_reads_a_file)
{
	struct bfs_fetch_source src = { .pin = fd_pin, .unpin = fd_unpin };
	struct bfs_fetch_opts o = { .depth = 1, .budget = MiB, .backend = BFS_FETCH_URING };
	struct bfs_fetch *f = NULL;
	int fd = -1, rc;

	src.ctx = &fd;
	rc = bfs_fetch_new(&f, 1, &src, &o);
	bfs_fetch_free(f);
	if (rc == -ENOSYS || rc == -EPERM) { /* built without it, or refused here */
		fprintf(stderr, "check_fetch: io_uring not available (%s): only threads tested\n",
			bfs_err_msg());
		return;
	}
	ck_assert_int_eq(rc, 0);
	check_fd_backend(BFS_FETCH_URING, "io_uring");
}
END_TEST

/* BFS_FETCH_AUTO on a FUSE source: io_uring's reads wait for the kernel's
 * max_background, a reader thread's do not; a local file is no FUSE one. */
START_TEST(auto_takes_threads_where_max_background_is_below_the_depth)
{
	char why[320], dir[64], path[96];
	int fd;

	ck_assert_int_eq(bfs_fetch_choose_fuse(12, 256, 0, 0, why, sizeof(why)), BFS_FETCH_THREADS);
	ck_assert(strstr(why, "max_background is 12, below io_depth 256") != NULL);
	ck_assert_int_eq(bfs_fetch_choose_fuse(256, 256, 0, 0, why, sizeof(why)), BFS_FETCH_URING);
	ck_assert(strncmp(why, "io_uring: ", 10) == 0);
	/* unknown, not measured: libfuse's default is taken */
	ck_assert_int_eq(bfs_fetch_choose_fuse(-1, 256, 0, 0, why, sizeof(why)), BFS_FETCH_THREADS);
	ck_assert(strstr(why, "libfuse's default (12) is below io_depth 256") != NULL);
	ck_assert_int_eq(bfs_fetch_choose_fuse(-1, 8, 0, 0, why, sizeof(why)), BFS_FETCH_URING);
	/* measured: the faster, io_uring unless it takes over 1.5 times as long */
	ck_assert_int_eq(bfs_fetch_choose_fuse(-1, 256, 44000000, 3000000, why, sizeof(why)),
			 BFS_FETCH_THREADS);
	ck_assert(strstr(why, "44.0 ms through io_uring, 3.0 ms through reader threads") != NULL);
	ck_assert_int_eq(bfs_fetch_choose_fuse(-1, 256, 4000000, 3000000, why, sizeof(why)),
			 BFS_FETCH_URING);
	ck_assert_int_eq(bfs_fetch_choose_fuse(-1, 256, -1, 3000000, why, sizeof(why)),
			 BFS_FETCH_THREADS);
	ck_assert(strstr(why, "over 2 s through io_uring") != NULL);
	ck_assert_int_eq(bfs_fetch_choose_fuse(-1, 256, 3000000, -1, why, sizeof(why)),
			 BFS_FETCH_URING);
	ck_assert_int_eq(bfs_fetch_choose_fuse(-1, 256, -1, -1, why, sizeof(why)),
			 BFS_FETCH_THREADS);
	/* a file on the test's own disk */
	test_mkdir(dir, sizeof(dir), "check_fetch_fuse");
	snprintf(path, sizeof(path), "%s/obj", dir);
	fd_pattern_file(path, 100);
	fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	{
		struct statfs sfs;

		ck_assert_int_eq(fstatfs(fd, &sfs), 0);
		if ((long)(unsigned int)sfs.f_type != 0x65735546L) /* not built on FUSE */
			ck_assert_int_eq(bfs_fetch_fuse_max_background(fd), 0);
	}
	close(fd);
	test_rmdir(dir);
}
END_TEST

/* ------------------------------------------------------------ the planner */

/* nsh shards of nrec records each: one int64 "id" (the global number) and
 * a float list "pad" of 10..40 values. */
static void write_shards(const char *dir, int nsh, long nrec)
{
	for (int s = 0; s < nsh; s++) {
		char path[128];
		FILE *f;

		snprintf(path, sizeof(path), "%s/part-%02d", dir, s);
		f = fopen(path, "wb");
		ck_assert_ptr_nonnull(f);
		for (long i = 0; i < nrec; i++) {
			int64_t id = s * nrec + i;
			float pad[40] = { 0 };
			struct pb feats = { 0 }, fid, fpad, ex;

			fid = pb_int_feature(&id, 1, true);
			fpad = pb_float_feature(pad, (size_t)(10 + id % 31), true);
			pb_add(&feats, "id", &fid);
			pb_add(&feats, "pad", &fpad);
			ex = pb_example(&feats, NULL);
			test_put_record(f, ex.d, (uint32_t)ex.n);
		}
		ck_assert_int_eq(fclose(f), 0);
	}
}

struct planned_set {
	char dir[64];
	struct bfs_dataset *ds;
	struct bfs_schema *sc;
	struct bfs_batcher *b;
	struct bfs_fetch *f;
	struct bfs_ioplan *p;
	uint64_t data_bytes; /* of every record, framing included */
};

static const char id_schema[] =
	"{\"features\": {\"id\": {\"kind\": \"int64\", \"shape\": []},"
	" \"pad\": {\"kind\": \"float\", \"shape\": [-1], \"max_len\": 40}}}";

static void planned_open_e(struct planned_set *ps, bool block, uint64_t budget, long nrec,
			   uint64_t epochs)
{
	struct bfs_dataset_opts dopt = { .comp = BFS_COMP_AUTO };
	struct bfs_batcher_opts bopt = { .batch_size = 16,
					 .seed = 3,
					 .shuffle = true,
					 .block = block,
					 .block_size = 4096,
					 .window = 8,
					 .world = 1,
					 .verify = true,
					 .jobs = 1 };
	struct bfs_dataset_io io = { .fetch = { .depth = 4,
						.budget = budget,
						.merge_gap = 4096,
						.max_read = 16384,
						.backend = BFS_FETCH_THREADS },
				     .all = true };

	memset(ps, 0, sizeof(*ps));
	test_mkdir(ps->dir, sizeof(ps->dir), "check_fetch_plan");
	write_shards(ps->dir, 3, nrec);
	ck_assert_int_eq(bfs_dataset_open(&ps->ds, ps->dir, &dopt), 0);
	ck_assert_int_eq(bfs_schema_from_json(&ps->sc, id_schema, strlen(id_schema)), 0);
	ck_assert_msg(bfs_batcher_new(&ps->b, ps->ds, ps->sc, &bopt) == 0, "%s", bfs_err_msg());
	ck_assert_int_eq(bfs_dataset_fetch_new(&ps->f, ps->ds, &io), 0);
	ck_assert_int_eq(bfs_ioplan_new(&ps->p, ps->f, ps->ds,
					(const struct bfs_batcher *const *)&ps->b, 1, 2, epochs),
			 0);
	for (uint64_t r = 0; r < bfs_dataset_nrecords(ps->ds); r++)
		ps->data_bytes += bfs_dataset_record_len(ps->ds, r) + 16;
}

static void planned_open(struct planned_set *ps, bool block, uint64_t budget, long nrec)
{
	planned_open_e(ps, block, budget, nrec, 0);
}

static void planned_close(struct planned_set *ps)
{
	bfs_ioplan_free(ps->p);
	bfs_dataset_fetch_free(ps->ds, ps->f);
	bfs_batcher_free(ps->b);
	bfs_schema_free(ps->sc);
	bfs_dataset_close(ps->ds);
	test_rmdir(ps->dir);
}

/* Build unit u of epoch e as the cache does: claim, read every record,
 * check it is the record asked for, release. */
static void build_unit(struct planned_set *ps, uint64_t e, uint64_t u)
{
	struct bfs_ioplan_hold *h;
	struct bfs_perm perm;
	uint64_t r0, n, recs[64];
	uint8_t *dst[64], buf[64][512];
	int errs[64];
	char *msgs[64];

	ck_assert_int_eq(bfs_batcher_unit_rows(ps->b, u, &r0, &n), 0);
	ck_assert_uint_le(n, 64);
	ck_assert_int_eq(bfs_batcher_perm(ps->b, e, &perm), 0);
	bfs_batcher_row_records(ps->b, &perm, r0, (size_t)n, recs);
	bfs_perm_release(&perm);
	h = bfs_ioplan_claim(ps->p, 0, e, u, recs, (size_t)n);
	ck_assert_ptr_nonnull(h);
	for (uint64_t k = 0; k < n; k++)
		dst[k] = buf[k];
	ck_assert_int_eq(bfs_dataset_read_many(ps->ds, recs, (size_t)n, dst, true, errs, msgs), 0);
	for (uint64_t k = 0; k < n; k++) {
		struct bfs_example *ex = NULL;
		const struct bfs_values *v;

		ck_assert_msg(errs[k] == 0, "%s", msgs[k] ? msgs[k] : "");
		ck_assert_int_eq(
			bfs_example_decode(&ex, dst[k], bfs_dataset_record_len(ps->ds, recs[k])),
			0);
		v = bfs_example_find(ex, "id");
		ck_assert_ptr_nonnull(v);
		ck_assert_int_eq(v->i[0], (int64_t)recs[k]);
		bfs_example_free(ex);
	}
	bfs_ioplan_done(ps->p, h);
}

/* Wait until the planner has planned more than `than` units. */
static uint64_t wait_planned(struct bfs_ioplan *p, uint64_t than)
{
	struct bfs_ioplan_stats st;

	for (int i = 0; i < 200; i++) {
		struct timespec ts = { 0, 5000000 };
		bfs_ioplan_stats(p, &st);
		if (st.planned > than)
			break;
		nanosleep(&ts, NULL);
	}
	return st.planned;
}

/* The planned count once the planner has stopped planning. */
static uint64_t wait_settled(struct bfs_ioplan *p)
{
	struct bfs_ioplan_stats st;
	uint64_t last = UINT64_MAX;

	for (int i = 0; i < 200; i++) {
		struct timespec ts = { 0, 20000000 };
		bfs_ioplan_stats(p, &st);
		if (st.planned == last)
			break;
		last = st.planned;
		nanosleep(&ts, NULL);
	}
	return st.planned;
}

START_TEST(plans_follow_a_reader_and_read_every_byte_once)
{
	struct planned_set ps;
	struct bfs_ioplan_stats pst;
	struct bfs_fetch_stats fst;
	uint64_t nb;

	planned_open(&ps, false, 64 * MiB, 400);
	nb = bfs_batcher_nbatches(ps.b);
	for (uint64_t u = 0; u < nb; u++) {
		build_unit(&ps, 0, u);
		if (u == 1)
			ck_assert_uint_gt(wait_planned(ps.p, 0), 0); /* a reader going on */
	}
	bfs_ioplan_stats(ps.p, &pst);
	bfs_fetch_stats(ps.f, &fst);
	/* most builds found their records planned; the source served each
	 * byte of the epoch about once (near records may share a read) */
	ck_assert_uint_gt(pst.claimed, nb / 2);
	ck_assert_uint_ge(fst.bytes, ps.data_bytes);
	ck_assert_uint_le(fst.bytes, ps.data_bytes + ps.data_bytes / 2);
	planned_close(&ps);
}
END_TEST

START_TEST(a_jump_starts_a_stream_that_plans_nothing_yet)
{
	struct planned_set ps;
	struct bfs_ioplan_stats st;
	uint64_t nb, before;

	planned_open(&ps, false, 64 * MiB, 2000);
	nb = bfs_batcher_nbatches(ps.b);
	build_unit(&ps, 0, 0);
	build_unit(&ps, 0, 1);
	before = wait_settled(ps.p);
	/* units far apart (beyond SLACK units from any stream): each a stream
	 * of its own, and none plans ahead before its reader goes on */
	build_unit(&ps, 0, nb / 2);
	build_unit(&ps, 2, 7);
	build_unit(&ps, 4, nb - 50);
	bfs_ioplan_stats(ps.p, &st);
	ck_assert_uint_eq(st.streams, 4);
	ck_assert_uint_ge(st.unplanned, 3);
	ck_assert_uint_eq(wait_settled(ps.p), before);
	planned_close(&ps);
}
END_TEST

START_TEST(planned_bytes_stay_within_readahead)
{
	struct planned_set ps;
	struct bfs_fetch_stats fst;
	struct bfs_ioplan_stats pst;
	uint64_t nb, budget = 48000, unit = 16 * (400 + 128);

	planned_open(&ps, false, budget, 400);
	nb = bfs_batcher_nbatches(ps.b);
	for (uint64_t u = 0; u < nb; u++) {
		build_unit(&ps, 0, u);
		if (u == 1) /* a reader going on: the planner runs ahead as far as it may */
			wait_settled(ps.p);
	}
	bfs_fetch_stats(ps.f, &fst);
	bfs_ioplan_stats(ps.p, &pst);
	/* plans ran ahead (a budget of several units), within the budget;
	 * one build's own records may come on top */
	ck_assert_uint_gt(pst.planned, 0);
	ck_assert_uint_le(fst.peak_buffered, budget + unit);
	planned_close(&ps);
}
END_TEST

/* Epochs read one after the other while the stage holds the whole
 * dataset: plans for bytes already buffered cost the stage nothing, yet
 * the planner holds no more than readahead's worth of them (it planned a
 * million units once, and took half a minute to free them). */
START_TEST(plans_stay_within_readahead_when_the_stage_holds_everything)
{
	struct planned_set ps;
	struct bfs_ioplan_stats st;
	struct timespec t0, t1;
	uint64_t nb, unit_max = 16 * (400 + 16), budget = 1 * MiB;

	planned_open(&ps, false, budget, 600);
	ck_assert_uint_lt(ps.data_bytes, budget / 2); /* the stage keeps it all */
	nb = bfs_batcher_nbatches(ps.b);
	for (uint64_t e = 0; e < 2; e++)
		for (uint64_t u = 0; u < nb; u++)
			build_unit(&ps, e, u);
	wait_settled(ps.p);
	bfs_ioplan_stats(ps.p, &st);
	ck_assert_uint_le(st.held_bytes, budget + unit_max);
	ck_assert_uint_le(st.held, budget / 16 + 1); /* units of at least one record */
	ck_assert_uint_eq(st.planned, st.claimed + st.dropped + st.held);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	bfs_ioplan_free(ps.p);
	ps.p = NULL;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ck_assert_int_lt(t1.tv_sec - t0.tv_sec, 2);
	planned_close(&ps);
}
END_TEST

/* The mount lists two epochs: once a reader has read both, nothing is
 * planned past them (and none is held). */
START_TEST(nothing_is_planned_past_the_last_epoch)
{
	struct planned_set ps;
	struct bfs_ioplan_stats st;
	uint64_t nb;

	planned_open_e(&ps, false, 64 * MiB, 1200, 2);
	nb = bfs_batcher_nbatches(ps.b);
	for (uint64_t e = 0; e < 2; e++)
		for (uint64_t u = 0; u < nb; u++)
			build_unit(&ps, e, u);
	wait_settled(ps.p);
	bfs_ioplan_stats(ps.p, &st);
	ck_assert_uint_le(st.planned, 2 * nb);
	ck_assert_uint_eq(st.held, 0);
	planned_close(&ps);
}
END_TEST

START_TEST(block_shuffle_reads_each_block_once_in_large_reads)
{
	struct planned_set ps;
	struct bfs_ioplan_stats pst;
	struct bfs_fetch_stats fst;
	uint64_t nb;

	planned_open(&ps, true, 64 * MiB, 400);
	nb = bfs_batcher_nbatches(ps.b);
	for (uint64_t u = 0; u < nb; u++)
		build_unit(&ps, 0, u);
	bfs_ioplan_stats(ps.p, &pst);
	bfs_fetch_stats(ps.f, &fst);
	ck_assert_uint_gt(pst.groups, 1);
	ck_assert_uint_eq(fst.bytes, ps.data_bytes); /* every block once */
	/* whole blocks (4 KiB here), joined where they follow each other */
	ck_assert_uint_ge(fst.bytes / fst.reads, 4096);
	planned_close(&ps);
}
END_TEST

/* The first builds of a mount start together (the reader's batch and the
 * prefetch's) and the planner sees them in any order: when the one noted
 * first is in the second group, the builds behind it, in the first group,
 * must still find their group held, not read their records one by one (a
 * race a sanitizer build's timing showed: io_unplanned 2 on a mount). */
START_TEST(block_shuffle_first_builds_out_of_order_find_their_group)
{
	struct planned_set ps;
	struct bfs_ioplan_stats pst;
	struct bfs_fetch_stats fst;
	struct bfs_perm perm;
	uint64_t nb, first = 0, r0, n;

	planned_open(&ps, true, 64 * MiB, 400);
	nb = bfs_batcher_nbatches(ps.b);
	ck_assert_int_eq(bfs_batcher_perm(ps.b, 0, &perm), 0);
	ck_assert_ptr_nonnull(perm.bo);
	/* the first unit whose first row is in group 1 */
	for (uint64_t u = 0; u < nb && !first; u++) {
		ck_assert_int_eq(bfs_batcher_unit_rows(ps.b, u, &r0, &n), 0);
		if (bfs_block_order_group_of(perm.bo, 0, bfs_batcher_row_pos(ps.b, r0)) == 1)
			first = u;
	}
	bfs_perm_release(&perm);
	ck_assert_uint_ge(first, 1);
	build_unit(&ps, 0, first); /* noted first: the stream starts in group 1 */
	build_unit(&ps, 0, first - 1); /* the prefetch's, behind it, in group 0 */
	bfs_ioplan_stats(ps.p, &pst);
	ck_assert_uint_eq(pst.unplanned, 0);
	for (uint64_t u = 0; u < nb; u++)
		if (u != first && u != first - 1)
			build_unit(&ps, 0, u);
	bfs_ioplan_stats(ps.p, &pst);
	bfs_fetch_stats(ps.f, &fst);
	ck_assert_uint_eq(fst.bytes, ps.data_bytes); /* every block still once */
	planned_close(&ps);
}
END_TEST

static Suite *fetch_suite(void)
{
	Suite *s = suite_create("fetch");
	TCase *t = tcase_create("stage");
	TCase *p = tcase_create("planner");
	TCase *b = tcase_create("block");

	tcase_add_test(t, ranges_wanted_twice_are_read_once);
	tcase_add_test(t, near_ranges_share_a_read_within_the_bounds);
	tcase_add_test(t, long_ranges_are_cut_into_reads);
	tcase_add_test(t, only_the_kept_part_is_read_in_whole_blocks);
	tcase_add_test(t, a_block_the_copy_holds_is_not_fetched_with_its_neighbour);
	tcase_add_test(t, planned_tickets_stay_within_the_budget);
	tcase_add_test(t, reads_go_by_priority_and_a_waiting_reader_first);
	tcase_add_test(t, bytes_in_flight_are_bounded_and_a_waiting_reader_goes_first);
	tcase_add_test(t, released_tickets_drop_their_queued_reads);
	tcase_add_test(t, a_failed_read_is_retried_once_then_fails_its_bytes);
	tcase_add_test(t, stopping_ends_every_wait);
	tcase_add_test(t, a_read_a_copy_waits_for_is_read_though_its_ticket_goes);
	tcase_add_test(t, a_pass_reads_each_span_once_and_keeps_the_ranges);
	tcase_add_test(t, reader_threads_read_a_file);
	tcase_add_test(t, io_uring_reads_a_file);
	tcase_add_test(t, auto_takes_threads_where_max_background_is_below_the_depth);
	tcase_set_timeout(t, 30);
	suite_add_tcase(s, t);
	tcase_add_test(p, plans_follow_a_reader_and_read_every_byte_once);
	tcase_add_test(p, a_jump_starts_a_stream_that_plans_nothing_yet);
	tcase_add_test(p, planned_bytes_stay_within_readahead);
	tcase_add_test(p, plans_stay_within_readahead_when_the_stage_holds_everything);
	tcase_add_test(p, nothing_is_planned_past_the_last_epoch);
	tcase_set_timeout(p, 60);
	suite_add_tcase(s, p);
	tcase_add_test(b, block_shuffle_reads_each_block_once_in_large_reads);
	tcase_add_test(b, block_shuffle_first_builds_out_of_order_find_their_group);
	tcase_set_timeout(b, 60);
	suite_add_tcase(s, b);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(fetch_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
