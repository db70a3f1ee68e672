/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_mix.c — the mixture order's properties (decoder/order/mix.c,
 * docs/shuffle.md section 8), checked against a replay of the stream:
 * for every prefix of ten million positions over random weight sets
 * (1 : 10^6 among them) each source's count is within one of n w / W; a
 * position's (source, draw) looked up alone equals the replay's; weight
 * schedules continue every source where it stood and keep the bound
 * within each segment; no record of a source repeats before its pass
 * completes; the epoch rules give the documented lengths; bad weights
 * are refused with a message.
 */
#include "common.h"
#include "feistel.h"
#include "mix.h"
#include "schema_json.h"

#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 0x243F6A8885A308D3ull;

static uint64_t rnd(void)
{
	rng_state += 0x9E3779B97F4A7C15ull;
	return bfs_mix64(rng_state);
}

static const char *const names8[] = { "a", "b", "c", "d", "e", "f", "g", "h" };

static struct bfs_mix *make(size_t k, const uint64_t *w, const uint64_t *n, size_t nseg,
			    const uint64_t *from, enum bfs_mix_epoch ep, uint64_t L)
{
	struct bfs_mix_spec sp = {
		.nsrc = k,
		.names = names8,
		.nrecords = n,
		.nseg = nseg,
		.from = from,
		.weights = w,
		.epoch = ep,
		.epoch_records = L,
		.seed = 7,
		.shuffle = true,
	};
	struct bfs_mix *m = NULL;
	int rc = bfs_mix_new(&m, &sp);

	ck_assert_msg(rc == 0, "bfs_mix_new: %d %s", rc, bfs_err_msg());
	return m;
}

/* Hot loops test with if + ck_abort_msg: every ck_assert marks a point
 * through a system call. */

/* Replay positions [0, npos) of segment `seg` (starting at `from`) of m,
 * a mixture of k sources: every lookup equals the running count, and every
 * prefix is within one. */
static void check_bound(const struct bfs_mix *m, size_t k, size_t seg, uint64_t from, uint64_t npos)
{
	uint64_t W, c[8], c0[8];
	const uint64_t *w = bfs_mix_weights(m, seg, &W);

	for (size_t s = 0; s < k; s++)
		c0[s] = c[s] = bfs_mix_count(m, from, s);
	for (uint64_t i = 0; i < npos; i++) {
		uint64_t draw;
		size_t s;

		bfs_mix_at(m, from + i, &s, &draw);
		if (!(s < k && draw == c[s]))
			ck_abort_msg("position %llu: source %zu draw %llu, replay %llu",
				     (unsigned long long)(from + i), s, (unsigned long long)draw,
				     (unsigned long long)c[s]);
		c[s]++;
		for (size_t t = 0; t < k; t++) {
			/* |(c - c0) W - (i + 1) w| < W, in 128 bits */
			__int128 d = (__int128)(c[t] - c0[t]) * W - (__int128)(i + 1) * w[t];
			if (!(d < (__int128)W && d > -(__int128)W))
				ck_abort_msg("prefix %llu: source %zu has %llu, target %llu * %llu "
					     "/ %llu",
					     (unsigned long long)(i + 1), t,
					     (unsigned long long)(c[t] - c0[t]),
					     (unsigned long long)(i + 1), (unsigned long long)w[t],
					     (unsigned long long)W);
		}
	}
	for (size_t s = 0; s < k; s++)
		ck_assert(bfs_mix_count(m, from + npos, s) == c[s]);
}

START_TEST(prefix_bound_ten_million_positions)
{
	/* fixed sets (the extremes), then random ones: 10^7 positions in all */
	static const uint64_t fixed[][4] = {
		{ 1, 1000000, 0, 0 },
		{ 1000000, 1, 1, 0 },
		{ 7, 2, 1, 0 },
		{ 1, 1, 1, 1 },
	};
	static const size_t fixed_k[] = { 2, 3, 3, 4 };
	uint64_t n[8] = { 10, 20, 30, 40, 50, 60, 70, 80 }, from = 0, total = 0;

	for (size_t i = 0; i < BFS_ARRAY_SIZE(fixed); i++) {
		struct bfs_mix *m = make(fixed_k[i], fixed[i], n, 1, &from, BFS_MIX_RECORDS, 1);
		uint64_t npos = i == 0 ? 2100000 : 500000;

		check_bound(m, fixed_k[i], 0, 0, npos);
		total += npos;
		bfs_mix_free(m);
	}
	while (total < 10000000) {
		size_t k = 2 + rnd() % 7;
		uint64_t w[8], scale = rnd() % 3 == 0 ? 1000000 : rnd() % 2 ? 1000 : 10;
		struct bfs_mix *m;

		for (size_t s = 0; s < k; s++)
			w[s] = 1 + rnd() % scale;
		m = make(k, w, n, 1, &from, BFS_MIX_RECORDS, 1);
		check_bound(m, k, 0, 0, 400000);
		total += 400000;
		bfs_mix_free(m);
	}
}
END_TEST

START_TEST(schedule_continues_each_source)
{
	uint64_t n[3] = { 1000, 37, 5 };
	uint64_t from[3] = { 0, 12345, 40000 };
	uint64_t w[9] = { 7, 2, 1, 5, 3, 2, 1, 1, 1000 };
	struct bfs_mix *m = make(3, w, n, 3, from, BFS_MIX_RECORDS, 100);

	check_bound(m, 3, 0, 0, 12345);
	check_bound(m, 3, 1, 12345, 40000 - 12345);
	check_bound(m, 3, 2, 40000, 300000);
	/* runs of positions (across periods and segments, with jumps) look up
	 * as the positions one by one do */
	static uint64_t pos[3000], out[3000];
	for (size_t i = 0; i < 3000; i++)
		pos[i] = i % 700 == 699 ? rnd() % 500 : 12000 + i;
	bfs_mix_records(m, 3, pos, 3000, out);
	for (size_t i = 0; i < 3000; i++)
		if (out[i] != bfs_mix_record(m, 3 * 100 + pos[i]))
			ck_abort_msg("position %zu", i);
	bfs_mix_free(m);
}
END_TEST

START_TEST(no_repeat_before_a_pass_completes)
{
	uint64_t n[3] = { 7, 300, 1 }, from = 0, w[3] = { 3, 5, 1 };
	struct bfs_mix *m = make(3, w, n, 1, &from, BFS_MIX_RECORDS, 10);
	uint64_t seen_pass[3] = { 0, 0, 0 }, drawn[3] = { 0, 0, 0 };
	uint8_t *seen[3];

	for (size_t s = 0; s < 3; s++)
		seen[s] = calloc(n[s], 1);
	for (uint64_t i = 0; i < 20000; i++) {
		uint64_t rec = bfs_mix_record(m, i), local;
		size_t s;

		bfs_mix_source_of(m, rec, &s, &local);
		if (local >= n[s] || seen[s][local])
			ck_abort_msg("source %zu record %llu again in pass %llu", s,
				     (unsigned long long)local, (unsigned long long)seen_pass[s]);
		seen[s][local] = 1;
		if (++drawn[s] % n[s] == 0) { /* the pass is complete: every record seen */
			for (uint64_t r = 0; r < n[s]; r++)
				if (!seen[s][r])
					ck_abort_msg("pass of source %zu ends without %llu", s,
						     (unsigned long long)r);
			memset(seen[s], 0, n[s]);
			seen_pass[s]++;
		}
	}
	/* the batched lookup is the single one */
	uint64_t pos[500], out[500];
	for (size_t i = 0; i < 500; i++)
		pos[i] = rnd() % 10;
	bfs_mix_records(m, 123, pos, 500, out);
	for (size_t i = 0; i < 500; i++)
		ck_assert(out[i] == bfs_mix_record(m, 123 * 10 + pos[i]));
	/* passes differ (the seed takes the pass number) */
	/* source 1's first record is 7 */
	{
		size_t src;
		uint64_t local;

		bfs_mix_source_of(m, 7, &src, &local);
		ck_assert(src == 1 && local == 0);
		bfs_mix_source_of(m, 6, &src, &local);
		ck_assert(src == 0 && local == 6);
	}
	ck_assert(bfs_mix_nrecords(m) == 308);
	for (size_t s = 0; s < 3; s++)
		free(seen[s]);
	bfs_mix_free(m);
}
END_TEST

START_TEST(epoch_rules)
{
	uint64_t n[3] = { 1000, 50, 3 }, from = 0, w[3] = { 7, 2, 1 };
	struct bfs_mix *m = make(3, w, n, 1, &from, BFS_MIX_FIRST_EXHAUSTED, 0);
	uint64_t L = bfs_mix_epoch_len(m);
	bool over = false;

	/* first_exhausted: no source past its first pass at L, one at L + 1 */
	for (size_t s = 0; s < 3; s++) {
		ck_assert(bfs_mix_count(m, L, s) <= n[s]);
		over |= bfs_mix_count(m, L + 1, s) > n[s];
	}
	ck_assert(over);
	/* source 2 (weight 1 of 10, 3 records) runs out first, within a period of 30 */
	ck_assert(L >= 30 && L < 40);
	bfs_mix_free(m);

	m = make(3, w, n, 1, &from, BFS_MIX_ALL_EXHAUSTED, 0);
	L = bfs_mix_epoch_len(m);
	over = false;
	for (size_t s = 0; s < 3; s++) {
		ck_assert(bfs_mix_count(m, L, s) >= n[s]);
		over |= bfs_mix_count(m, L - 1, s) < n[s];
	}
	ck_assert(over);
	ck_assert(L >= 1000 * 10 / 7 && L <= 1000 * 10 / 7 + 2);
	bfs_mix_free(m);

	m = make(3, w, n, 1, &from, BFS_MIX_RECORDS, 777);
	ck_assert_uint_eq(bfs_mix_epoch_len(m), 777);
	bfs_mix_free(m);
}
END_TEST

START_TEST(bad_weights_are_refused)
{
	uint64_t n[2] = { 10, 10 }, from[2] = { 0, 0 }, w0[2] = { 0, 1 };
	uint64_t ok[4] = { 1, 1, 1, 2 };
	struct bfs_mix_spec sp = {
		.nsrc = 2,
		.names = names8,
		.nrecords = n,
		.nseg = 1,
		.from = from,
		.weights = w0,
		.epoch = BFS_MIX_FIRST_EXHAUSTED,
		.shuffle = true,
	};
	struct bfs_mix *m = NULL;

	ck_assert_int_eq(bfs_mix_new(&m, &sp), -EINVAL);
	ck_assert(strstr(bfs_err_msg(), "'a'") && strstr(bfs_err_msg(), "positive"));
	sp.weights = ok;
	sp.nseg = 2; /* from_record 0 twice */
	ck_assert_int_eq(bfs_mix_new(&m, &sp), -EINVAL);
	ck_assert(strstr(bfs_err_msg(), "schedule"));
	/* 1 : 999 over a source of 2 records: first_exhausted is one period
	 * at most, and exact */
	uint64_t tiny[2] = { 999, 1 }, n2[2] = { 1000000, 2 };
	sp.nseg = 1;
	sp.weights = tiny;
	sp.nrecords = n2;
	ck_assert_int_eq(bfs_mix_new(&m, &sp), 0);
	ck_assert(bfs_mix_epoch_len(m) >= 2000 && bfs_mix_epoch_len(m) < 4000);
	ck_assert(bfs_mix_count(m, bfs_mix_epoch_len(m), 1) == 2);
	ck_assert(bfs_mix_count(m, bfs_mix_epoch_len(m) + 1, 1) == 3);
	bfs_mix_free(m);
	ck_assert(m != NULL);
}
END_TEST

/* Whether v / V is within 10^-6 of w / W, exactly. */
static bool share_within(uint64_t v, uint64_t V, uint64_t w, unsigned __int128 W)
{
	unsigned __int128 a = (unsigned __int128)v * W * 1000000,
			  b = (unsigned __int128)w * V * 1000000;

	return (a > b ? a - b : b - a) <= (unsigned __int128)V * W;
}

/* Some integer count in [1, V - 1] of a two-source period V keeps source
 * 0's share within 10^-6 of w0 / W (the other's then is too): the two
 * integers nearest w0 V / W are the only candidates. */
static bool two_fit(uint64_t w0, unsigned __int128 W, uint64_t V)
{
	uint64_t f = (uint64_t)((unsigned __int128)w0 * V / W);

	for (uint64_t v = f; v <= f + 1; v++)
		if (v >= 1 && v < V && share_within(v, V, w0, W))
			return true;
	return false;
}

START_TEST(weights_whose_period_does_not_fit)
{
	uint64_t n[8] = { 10, 20, 30, 40, 50, 60, 70, 80 }, from = 0, W;
	/* 1/3 and 2/3 as json.dump writes them, counted to 9 decimals */
	uint64_t third[2] = { 333333333, 666666667 }, sizes[3] = { 665866667, 334133333, 0 };
	uint64_t fits[3] = { 7000000000ull, 2000000000ull, 1000000000ull };
	struct bfs_mix *m = make(2, third, n, 1, &from, BFS_MIX_RECORDS, 10);
	const uint64_t *w = bfs_mix_weights(m, 0, &W);

	ck_assert(bfs_mix_approximated(m, 0));
	ck_assert(W == 3 && w[0] == 1 && w[1] == 2);
	bfs_mix_free(m);
	/* weights whose period fits are drawn as they are */
	m = make(3, fits, n, 1, &from, BFS_MIX_RECORDS, 10);
	w = bfs_mix_weights(m, 0, &W);
	ck_assert(!bfs_mix_approximated(m, 0) && W == 10 && w[0] == 7 && w[2] == 1);
	bfs_mix_free(m);
	/* proportional to two sizes (9988 and 5012 of 15000): the smallest
	 * period within 10^-6, no smaller one fits */
	m = make(2, sizes, n, 1, &from, BFS_MIX_RECORDS, 10);
	w = bfs_mix_weights(m, 0, &W);
	ck_assert(bfs_mix_approximated(m, 0) && w[0] + w[1] == W);
	ck_assert(share_within(w[0], W, sizes[0], sizes[0] + sizes[1]));
	for (uint64_t V = 1; V < W; V++)
		ck_assert_msg(!two_fit(sizes[0], sizes[0] + sizes[1], V), "period %llu fits too",
			      (unsigned long long)V);
	check_bound(m, 2, 0, 0, 3 * W);
	bfs_mix_free(m);
	/* random sets of 2 to 8 weights with long periods */
	for (int t = 0; t < 200; t++) {
		size_t k = 2 + rnd() % 7;
		uint64_t ws[8];
		unsigned __int128 sum = 0;

		for (size_t s = 0; s < k; s++)
			sum += ws[s] = 1 + rnd() % (t % 2 ? 1000000000000ull : 1000000000ull);
		m = make(k, ws, n, 1, &from, BFS_MIX_RECORDS, 10);
		w = bfs_mix_weights(m, 0, &W);
		ck_assert(W <= (1u << 24));
		uint64_t tot = 0;
		for (size_t s = 0; s < k; s++) {
			tot += w[s];
			ck_assert(w[s] >= 1);
			if (bfs_mix_approximated(m, 0))
				ck_assert_msg(share_within(w[s], W, ws[s], sum),
					      "set %d source %zu", t, s);
		}
		ck_assert(tot == W);
		if (k == 2 && bfs_mix_approximated(m, 0))
			for (uint64_t V = 1; V < W; V++)
				if (two_fit(ws[0], sum, V))
					ck_abort_msg("set %d: period %llu fits, %llu taken", t,
						     (unsigned long long)V, (unsigned long long)W);
		check_bound(m, k, 0, 0, W < 20000 ? 2 * W : 20000);
		bfs_mix_free(m);
	}
}
END_TEST

START_TEST(no_period_fits_is_one_sentence)
{
	/* 255 sources, 155 of them a share of 10^-20 or so: each needs a
	 * record per period, and no period of up to 2^28 / 255 keeps the
	 * others within 10^-6 */
	static char nm[255][8];
	static const char *names[255];
	static uint64_t w[255], n[255];
	uint64_t from = 0;
	struct bfs_mix_spec sp = {
		.nsrc = 255,
		.names = names,
		.nrecords = n,
		.nseg = 1,
		.from = &from,
		.weights = w,
		.epoch = BFS_MIX_FIRST_EXHAUSTED,
		.shuffle = true,
	};
	struct bfs_mix *m = NULL;

	for (size_t s = 0; s < 255; s++) {
		snprintf(nm[s], sizeof(nm[s]), "s%zu", s);
		names[s] = nm[s];
		n[s] = 10;
		w[s] = s < 155 ? 1 : 1000000000000000000ull + s;
	}
	ck_assert_int_eq(bfs_mix_new(&m, &sp), -EFBIG);
	ck_assert_msg(strstr(bfs_err_msg(), "no period of up to 1052688 records gives every source "
					    "its share within 10^-6 (source 's0' has") &&
			      strstr(bfs_err_msg(), "give it a larger weight, or leave it out"),
		      "%s", bfs_err_msg());
}
END_TEST

static int parse(struct bfs_mixfile **m, const char *text)
{
	*m = NULL;
	return bfs_mixfile_parse(m, text, strlen(text));
}

START_TEST(mixture_files)
{
	struct bfs_mixfile *m;

	ck_assert_int_eq(parse(&m, "{\"mixture\": [{\"name\": \"a\", \"source\": \"x\", "
				   "\"weight\": 0.001}, {\"name\": \"b\", \"source\": \"y\", "
				   "\"weight\": 7, \"options\": \"split=train\"}], \"epoch\": 12}"),
			 0);
	ck_assert_uint_eq(m->n, 2);
	ck_assert_uint_eq(m->weights[0], 1000000);
	ck_assert_uint_eq(m->weights[1], 7000000000ull);
	ck_assert_str_eq(m->e[1].options, "split=train");
	ck_assert(m->epoch == BFS_MIXFILE_RECORDS && m->epoch_records == 12);
	bfs_mixfile_free(m);
	ck_assert_int_eq(parse(&m, "{\"mixture\": [{\"name\": \"a\", \"source\": \"x\"}], "
				   "\"schedule\": [{\"from_record\": 0, \"weights\": [2]}, "
				   "{\"from_record\": 10, \"weights\": [3]}]}"),
			 0);
	ck_assert(m->nseg == 2 && m->from[1] == 10 && m->weights[1] == 3000000000ull);
	bfs_mixfile_free(m);
	/* refused, each naming what is wrong */
	ck_assert_int_eq(parse(&m, "{\"mixture\": [{\"name\": \"a\", \"source\": \"x\", "
				   "\"weight\": 1e-12}]}"),
			 -EINVAL);
	ck_assert(strstr(bfs_err_msg(), "('a')") && strstr(bfs_err_msg(), "out of range"));
	ck_assert_int_eq(parse(&m, "{\"mixture\": [{\"name\": \"a\", \"source\": \"x\", "
				   "\"weight\": \"7\"}]}"),
			 -EINVAL);
	ck_assert_int_eq(parse(&m, "{\"mixture\": [{\"name\": \"a\", \"source\": \"x\"}]}"),
			 -EINVAL);
	ck_assert(strstr(bfs_err_msg(), "needs a \"weight\""));
	ck_assert_int_eq(parse(&m, "{\"mixture\": [], \"epoch\": 3}"), -EINVAL);
	ck_assert_int_eq(parse(&m, "{\"mixture\": [{\"name\": \"a\", \"source\": \"x\", "
				   "\"weight\": 1}], \"epoch\": 0}"),
			 -EINVAL);
	ck_assert_int_eq(parse(&m, "{\"mixture\": [{\"name\": \"a\", \"source\": \"x\", "
				   "\"weight\": 1}], \"epoch\": 3, \"epoch\": 4}"),
			 -EINVAL);
	ck_assert_int_eq(parse(&m, "[1, 2]"), -EINVAL);
	ck_assert(m == NULL);
	ck_assert(strstr(bfs_err_msg(), "not a JSON object"));
	/* a JSON error names its line and column */
	ck_assert_int_eq(parse(&m, "{\"mixture\": [\n {\"name\": \"a\", \"source\": \"x\", "
				   "\"weight\": 1}\n {\"name\": \"b\"}]}"),
			 -EINVAL);
	ck_assert_msg(strstr(bfs_err_msg(), "line 3, column 2"), "%s", bfs_err_msg());
	ck_assert_int_eq(parse(&m, "{\"mixture\": [{\"name\": \"a\", \"source\": \"x\", "
				   "\"weight\": NaN}]}"),
			 -EINVAL);
	ck_assert_msg(strstr(bfs_err_msg(), "line 1, column"), "%s", bfs_err_msg());
	ck_assert_int_eq(parse(&m, " \n"), -EINVAL);
	ck_assert(strstr(bfs_err_msg(), "the file is empty"));
	ck_assert_int_eq(parse(&m, "{\"features\": {}}"), -EINVAL);
	ck_assert(strstr(bfs_err_msg(), "no \"mixture\" key"));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("mix");
	TCase *tc = tcase_create("mix");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, prefix_bound_ten_million_positions);
	tcase_add_test(tc, schedule_continues_each_source);
	tcase_add_test(tc, no_repeat_before_a_pass_completes);
	tcase_add_test(tc, epoch_rules);
	tcase_add_test(tc, bad_weights_are_refused);
	tcase_add_test(tc, weights_whose_period_does_not_fit);
	tcase_add_test(tc, no_period_fits_is_one_sentence);
	tcase_add_test(tc, mixture_files);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
