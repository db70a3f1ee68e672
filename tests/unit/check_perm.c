/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_perm.c — unit tests of decoder/perm.c, the global shuffle's
 * permutation (docs/shuffle.md): a bijection for every size, the batched
 * apply (scalar and vector rounds) equal to the one-at-a-time one,
 * shuffle=none the identity, seeds and epochs giving other orders, and
 * uniform positions.
 */
#include "common.h"
#include "decodertest.h"
#include "perm.h"

#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static bool is_permutation(const struct bfs_perm *p, uint64_t n)
{
	uint8_t *seen = calloc(n ? n : 1, 1);
	bool ok = true;

	for (uint64_t i = 0; i < n && ok; i++) {
		uint64_t y = test_perm_apply(p, i);
		if (y >= n || seen[y])
			ok = false;
		else
			seen[y] = 1;
	}
	free(seen);
	return ok;
}

START_TEST(perm_is_a_bijection_for_every_small_n)
{
	struct bfs_perm p;

	for (uint64_t n = 0; n <= 300; n++) {
		for (uint64_t seed = 0; seed < 3; seed++) {
			bfs_perm_init(&p, n, seed, seed * 7 + 1, 1);
			ck_assert_msg(is_permutation(&p, n), "n=%llu seed=%llu",
				      (unsigned long long)n, (unsigned long long)seed);
		}
	}
}
END_TEST

START_TEST(perm_is_a_bijection_for_large_n)
{
	static const uint64_t ns[] = { 1000003, 1u << 20, (1u << 20) + 1 };
	struct bfs_perm p;

	for (size_t i = 0; i < BFS_ARRAY_SIZE(ns); i++) {
		bfs_perm_init(&p, ns[i], 42, 3, 1);
		ck_assert(is_permutation(&p, ns[i]));
	}
}
END_TEST

START_TEST(perm_apply_many_equals_apply)
{
	static const uint64_t ns[] = {
		0, 1, 2, 3, 5, 64, 65, 1000, 400000, (1u << 20) + 7, (1ull << 41) + 3
	};
	uint64_t pos[300], out[300];
	struct bfs_perm p;

	/* both the scalar rounds and (where the CPU has AVX-512DQ) the vector ones */
	for (int vector = 0; vector < 2; vector++) {
		for (size_t i = 0; i < BFS_ARRAY_SIZE(ns); i++) {
			for (int shuffle = 0; shuffle < 2; shuffle++) {
				uint64_t n = ns[i];
				bfs_perm_init(&p, n, 7 + i, i, shuffle);
				for (size_t k = 0; k < 300; k++) /* scattered and repeated */
					pos[k] = n ? (k * 2654435761u + i) % n : 0;
				if (!n)
					continue;
				bfs_perm_apply_many_how(&p, pos, 300, out, vector);
				for (size_t k = 0; k < 300; k++)
					ck_assert_uint_eq(out[k], test_perm_apply(&p, pos[k]));
				for (size_t k = 0; k < 300; k++) /* in place */
					out[k] = pos[k];
				bfs_perm_apply_many_how(&p, out, 300, out, vector);
				for (size_t k = 0; k < 300; k++)
					ck_assert_uint_eq(out[k], test_perm_apply(&p, pos[k]));
			}
		}
	}
}
END_TEST

START_TEST(perm_shuffle_none_is_identity)
{
	struct bfs_perm p;

	bfs_perm_init(&p, 1000, 5, 9, 0);
	for (uint64_t i = 0; i < 1000; i++)
		ck_assert_uint_eq(test_perm_apply(&p, i), i);
}
END_TEST

START_TEST(perm_epochs_and_seeds_differ)
{
	struct bfs_perm a, b, c;
	uint64_t same_ab = 0, same_ac = 0;

	bfs_perm_init(&a, 10000, 1, 0, 1);
	bfs_perm_init(&b, 10000, 1, 1, 1);
	bfs_perm_init(&c, 10000, 2, 0, 1);
	for (uint64_t i = 0; i < 10000; i++) {
		same_ab += test_perm_apply(&a, i) == test_perm_apply(&b, i);
		same_ac += test_perm_apply(&a, i) == test_perm_apply(&c, i);
	}
	/* a random pair of permutations agrees in about 1 place */
	ck_assert_uint_lt(same_ab, 20);
	ck_assert_uint_lt(same_ac, 20);
}
END_TEST

START_TEST(perm_positions_are_uniform)
{
	/* chi-square of where record r lands, over many seeds, for each r */
	enum { N = 10, SEEDS = 20000 };
	static uint32_t count[N][N];
	struct bfs_perm p;
	double worst = 0;

	memset(count, 0, sizeof(count));
	for (uint64_t s = 0; s < SEEDS; s++) {
		bfs_perm_init(&p, N, s, 0, 1);
		for (uint64_t pos = 0; pos < N; pos++)
			count[test_perm_apply(&p, pos)][pos]++;
	}
	for (int r = 0; r < N; r++) {
		double chi = 0, expect = (double)SEEDS / N;
		for (int pos = 0; pos < N; pos++)
			chi += (count[r][pos] - expect) * (count[r][pos] - expect) / expect;
		if (chi > worst)
			worst = chi;
	}
	/* 9 degrees of freedom: p = 0.001 at 27.9; allow for the max of 10 */
	ck_assert_msg(worst < 33.0, "worst chi-square %.1f", worst);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("perm");
	TCase *perm = tcase_create("perm");

	tcase_set_timeout(perm, 60);
	tcase_add_test(perm, perm_is_a_bijection_for_every_small_n);
	tcase_add_test(perm, perm_is_a_bijection_for_large_n);
	tcase_add_test(perm, perm_shuffle_none_is_identity);
	tcase_add_test(perm, perm_apply_many_equals_apply);
	tcase_add_test(perm, perm_epochs_and_seeds_differ);
	tcase_add_test(perm, perm_positions_are_uniform);
	suite_add_tcase(s, perm);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
