/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_blockshuf.c — unit tests of decoder/blockshuf.c, shuffle=block
 * (docs/shuffle.md): blocks cut by size and by shard, the order a
 * permutation for many sizes, block sizes and windows, records kept within
 * their window of whole blocks, and the order a function of the seed and
 * the epoch alone (several epochs held at once).
 */
#include "blockshuf.h"
#include "common.h"
#include "perm.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

START_TEST(block_cut_follows_sizes_and_shards)
{
	/* block_size 100: records of 20+16, 30+16 fit (82), 10+16 does not
	 * (108); 200+16 is alone (bigger than a block); a shard starts one */
	const uint32_t lens[] = { 20, 30, 10, 200, 5, 5, 60, 1 };
	const uint64_t shards[] = { 6, 0, 2 };
	const uint64_t want[] = { 0, 2, 3, 4, 6 };
	struct bfs_blocks *bl;

	ck_assert_int_eq(bfs_blocks_from_lens(&bl, lens, 8, shards, 3, 100, 2, 0), 0);
	ck_assert_uint_eq(bfs_blocks_count(bl), 5);
	for (uint64_t k = 0; k < 5; k++)
		ck_assert_uint_eq(bfs_blocks_start(bl, k), want[k]);
	ck_assert_uint_eq(bfs_blocks_start(bl, 5), 8);
	bfs_blocks_free(bl);
	ck_assert_int_eq(bfs_blocks_from_lens(&bl, lens, 8, shards, 3, 0, 2, 0), -EINVAL);
	ck_assert_int_eq(bfs_blocks_from_lens(&bl, lens, 8, shards, 3, 100, 0, 0), -EINVAL);
}
END_TEST

/* n records of pseudo-random lengths in `nsh` shards. */
static struct bfs_blocks *make_blocks(uint64_t n, size_t nsh, uint64_t block_size, uint64_t window,
				      uint64_t seed)
{
	uint32_t *lens = malloc((n ? n : 1) * sizeof(*lens));
	uint64_t sh[8] = { 0 };
	struct bfs_blocks *bl = NULL;

	for (uint64_t i = 0; i < n; i++) {
		lens[i] = (uint32_t)(bfs_mix64(i * 31 + seed) % 300);
		sh[bfs_mix64(i + 7) % nsh]++;
	}
	ck_assert_int_eq(bfs_blocks_from_lens(&bl, lens, n, sh, nsh, block_size, window, seed), 0);
	free(lens);
	return bl;
}

START_TEST(block_order_is_a_permutation)
{
	const uint64_t ns[] = { 0, 1, 2, 3, 17, 100, 1000, 4099 };
	const uint64_t bsz[] = { 1, 64, 500, 4096, 1u << 30 };
	const uint64_t win[] = { 1, 2, 3, 64 };

	for (size_t a = 0; a < BFS_ARRAY_SIZE(ns); a++)
		for (size_t c = 0; c < BFS_ARRAY_SIZE(bsz); c++)
			for (size_t d = 0; d < BFS_ARRAY_SIZE(win); d++) {
				uint64_t n = ns[a], seed = a * 13 + c, epoch = d;
				struct bfs_blocks *bl =
					make_blocks(n, 1 + (a + c) % 5, bsz[c], win[d], seed);
				struct bfs_block_order *o;
				uint8_t *seen = calloc(n ? n : 1, 1);
				uint64_t *pos = malloc((n ? n : 1) * sizeof(*pos));
				uint64_t *many = malloc((n ? n : 1) * sizeof(*many));

				ck_assert_int_eq(bfs_block_order_get(&o, bl, epoch), 0);
				for (uint64_t i = 0; i < n; i++) {
					uint64_t r = bfs_block_order_apply(o, i);
					ck_assert_uint_lt(r, n);
					ck_assert_int_eq(seen[r], 0);
					seen[r] = 1;
					/* positions in a scrambled order, in place */
					pos[i] = (i * 7919) % n;
				}
				if (n % 7919 != 0 || n < 2) {
					memcpy(many, pos, n * sizeof(*many));
					bfs_block_order_apply_many(o, many, n, many);
					for (uint64_t i = 0; i < n; i++)
						ck_assert_uint_eq(many[i],
								  bfs_block_order_apply(o, pos[i]));
				}
				bfs_block_order_put(o);
				bfs_blocks_free(bl);
				free(seen);
				free(pos);
				free(many);
			}
}
END_TEST

START_TEST(block_order_keeps_records_within_a_window)
{
	/* one shard of equal records, 4 to a block: group g (W blocks) is
	 * positions [g*4W, (g+1)*4W) and holds exactly W whole blocks */
	enum { N = 4000, K = 4, W = 5 };
	uint32_t *lens = malloc(N * sizeof(*lens));
	uint64_t sh[1] = { N };
	struct bfs_blocks *bl;
	struct bfs_block_order *o;
	uint64_t moved = 0;

	for (int i = 0; i < N; i++)
		lens[i] = 84; /* 100 bytes framed */
	ck_assert_int_eq(bfs_blocks_from_lens(&bl, lens, N, sh, 1, K * 100, W, 3), 0);
	ck_assert_uint_eq(bfs_blocks_count(bl), N / K);
	ck_assert_int_eq(bfs_block_order_get(&o, bl, 1), 0);
	for (uint64_t g = 0; g < N / (K * W); g++) {
		uint64_t blocks[W], nblk = 0, cnt[W] = { 0 };
		for (uint64_t p = g * K * W; p < (g + 1) * K * W; p++) {
			uint64_t blk = bfs_block_order_apply(o, p) / K, i;
			for (i = 0; i < nblk && blocks[i] != blk; i++)
				;
			ck_assert_uint_lt(i, W); /* at most W distinct blocks */
			if (i == nblk)
				blocks[nblk++] = blk;
			cnt[i]++;
			moved += bfs_block_order_apply(o, p) != p;
		}
		for (uint64_t i = 0; i < W; i++)
			ck_assert_uint_eq(cnt[i], K); /* whole blocks */
	}
	ck_assert_uint_gt(moved, N * 9 / 10); /* and it does shuffle */
	bfs_block_order_put(o);
	bfs_blocks_free(bl);
	free(lens);
}
END_TEST

START_TEST(block_order_depends_on_seed_and_epoch_only)
{
	enum { N = 5000 };
	struct bfs_blocks *a = make_blocks(N, 3, 2000, 4, 1), *b = make_blocks(N, 3, 2000, 4, 1);
	struct bfs_block_order *held[12], *o1, *o2;
	uint64_t same_epoch = 0;

	/* many epochs at once (more than the cache keeps): each stays valid */
	for (int e = 0; e < 12; e++)
		ck_assert_int_eq(bfs_block_order_get(&held[e], a, (uint64_t)e), 0);
	ck_assert_int_eq(bfs_block_order_get(&o1, b, 0), 0);
	for (uint64_t i = 0; i < N; i++) {
		ck_assert_uint_eq(bfs_block_order_apply(held[0], i), bfs_block_order_apply(o1, i));
		same_epoch +=
			bfs_block_order_apply(held[0], i) == bfs_block_order_apply(held[1], i);
	}
	ck_assert_uint_lt(same_epoch, N / 20);
	bfs_block_order_put(o1);
	bfs_blocks_free(b);
	/* another seed, same lengths: another order */
	b = make_blocks(N, 3, 2000, 4, 2);
	ck_assert_int_eq(bfs_block_order_get(&o2, b, 0), 0);
	same_epoch = 0;
	for (uint64_t i = 0; i < N; i++)
		same_epoch += bfs_block_order_apply(held[0], i) == bfs_block_order_apply(o2, i);
	ck_assert_uint_lt(same_epoch, N / 20);
	bfs_block_order_put(o2);
	bfs_blocks_free(b);
	for (int e = 0; e < 12; e++)
		bfs_block_order_put(held[e]);
	bfs_blocks_free(a);
}
END_TEST

/* partitions=P (docs/shuffle.md 5.1): every partition within a record of
 * N/P records; its pieces inside blocks and never overlapping; an epoch is
 * P x the smallest partition's whole batches, each record at most once; a
 * batch's records all from its partition g mod P; the deal the same in
 * every epoch; P = 1 the order without partitions. */
START_TEST(partitions_deal_and_order)
{
	enum { N = 3001, B = 7 };
	const uint64_t ps[] = { 1, 2, 5, 64, 300 };

	for (size_t t = 0; t < BFS_ARRAY_SIZE(ps); t++) {
		struct bfs_blocks *bl = make_blocks(N, 3, 900, 3, 4),
				  *plain = make_blocks(N, 3, 900, 3, 4);
		uint64_t P = ps[t], *owner = calloc(N, sizeof(*owner));
		uint8_t *seen = calloc(N, 1);
		struct bfs_block_order *o, *o1, *op;
		uint64_t len;

		ck_assert_int_eq(bfs_blocks_partition(bl, P, B), 0);
		ck_assert_uint_eq(bfs_blocks_nparts(bl), P);
		len = bfs_blocks_epoch_len(bl);
		ck_assert_uint_eq(len, P == 1 ? N : P * (N / P / B) * B);
		for (uint64_t q = 0; q < P; q++) {
			uint64_t k0, k1, recs = 0, prev = 0;

			bfs_blocks_part_pieces(bl, q, &k0, &k1);
			for (uint64_t k = k0; k < k1; k++) {
				uint64_t a, b;

				bfs_blocks_piece(bl, k, &a, &b);
				ck_assert_uint_gt(b, a);
				ck_assert_uint_ge(a, prev); /* sorted, disjoint */
				prev = b;
				for (uint64_t r = a; r < b; r++)
					owner[r] = q;
				recs += b - a;
			}
			ck_assert_uint_eq(recs, bfs_blocks_part_records(bl, q));
			ck_assert_uint_le(recs, N / P + 1);
			ck_assert_uint_ge(recs, N / P);
		}
		ck_assert_int_eq(bfs_block_order_get(&o, bl, 2), 0);
		ck_assert_int_eq(bfs_block_order_get(&o1, bl, 3), 0);
		ck_assert_int_eq(bfs_block_order_get(&op, plain, 2), 0);
		for (uint64_t p = 0; p < len; p++) {
			uint64_t r = bfs_block_order_apply(o, p);

			ck_assert_uint_lt(r, N);
			ck_assert_uint_eq(seen[r], 0);
			seen[r] = 1;
			ck_assert_uint_eq(owner[r], P == 1 ? 0 : (p / B) % P);
			if (P == 1)
				ck_assert_uint_eq(r, bfs_block_order_apply(op, p));
		}
		/* apply_many gives the same, across partitions and groups */
		{
			uint64_t pos[257], out[257];

			for (size_t i = 0; i < 257; i++)
				pos[i] = (i * 13) % len;
			bfs_block_order_apply_many(o1, pos, 257, out);
			for (size_t i = 0; i < 257; i++)
				ck_assert_uint_eq(out[i], bfs_block_order_apply(o1, pos[i]));
		}
		bfs_block_order_put(o);
		bfs_block_order_put(o1);
		bfs_block_order_put(op);
		bfs_blocks_free(bl);
		bfs_blocks_free(plain);
		free(owner);
		free(seen);
	}
}
END_TEST

/* partitions=auto: a power of two with window blocks, 32 batches and 256
 * MiB a partition; too many partitions for the batch size is refused. */
START_TEST(partitions_auto_and_limits)
{
	enum { N = 200000 };
	uint32_t *lens = malloc(N * sizeof(*lens));
	uint64_t sh[1] = { N };
	struct bfs_blocks *bl;

	for (uint64_t i = 0; i < N; i++)
		lens[i] = 20971 - 16; /* 4.2 GB of records, 200 records a 4 MiB block */
	ck_assert_int_eq(bfs_blocks_from_lens(&bl, lens, N, sh, 1, 4 << 20, 64, 0), 0);
	ck_assert_uint_eq(bfs_blocks_count(bl), 1000);
	/* 1000 blocks: 8 partitions of 125 blocks (>= 64), 25,000 records,
	 * 500 MB each; 16 would hold 62 blocks, fewer than a window */
	ck_assert_uint_eq(bfs_blocks_auto_partitions(bl, 32), 8);
	/* 32 batches of 1024: 32,768 records, more than 8 partitions hold */
	ck_assert_uint_eq(bfs_blocks_auto_partitions(bl, 1024), 4);
	ck_assert_int_eq(bfs_blocks_partition(bl, N / 9 + 1, 10), -EINVAL);
	ck_assert_int_eq(bfs_blocks_partition(bl, 0, 10), -EINVAL);
	ck_assert_int_eq(bfs_blocks_partition(bl, BFS_MAX_PARTITIONS + 1, 1), -EINVAL);
	bfs_blocks_free(bl);
	/* a small dataset: one partition, however small its blocks and window */
	ck_assert_int_eq(bfs_blocks_from_lens(&bl, lens, 1000, sh, 1, 1, 1, 0), 0);
	ck_assert_uint_eq(bfs_blocks_auto_partitions(bl, 1), 1);
	bfs_blocks_free(bl);
	free(lens);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("blockshuf");
	TCase *block = tcase_create("block");

	tcase_set_timeout(block, 60);
	tcase_add_test(block, block_cut_follows_sizes_and_shards);
	tcase_add_test(block, block_order_is_a_permutation);
	tcase_add_test(block, block_order_keeps_records_within_a_window);
	tcase_add_test(block, block_order_depends_on_seed_and_epoch_only);
	tcase_add_test(block, partitions_deal_and_order);
	tcase_add_test(block, partitions_auto_and_limits);
	suite_add_tcase(s, block);
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
