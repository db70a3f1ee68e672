/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_allfiles.c — the files of all/ and all.safetensors (fs/allfiles.h)
 * over a real dataset and a cache: each file's size is the view's and the
 * length of its bytes; all/T.npy's data is the epoch's batches of T end to
 * end for a fixed tensor, and all.safetensors holds every all/T.npy's data
 * at its tensor's offsets; any split of a read gives the same bytes; a
 * read fills the stash (columns read one after another cost one pass);
 * and a corrupt record fails only the rows of its batch, never the other
 * rows of its chunk.
 */
#include "allfiles.h"

#include "epoch.h"
#include "fstest.h"

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RECORDS 300
#define EPOCHS 2

struct all_fx {
	struct fstest t;
	struct bfs_cache *cache;
	struct bfs_allfiles *a;
	unsigned reports;
};

static void on_report(void *ctx, const char *msg, unsigned flags)
{
	struct all_fx *x = ctx;

	(void)msg;
	(void)flags;
	x->reports++;
}

static void fx_start(struct all_fx *x, size_t nranks, uint64_t stash)
{
	const struct bfs_batcher *const *b = (const struct bfs_batcher *const *)x->t.b;

	ck_assert_int_eq(bfs_cache_new(&x->cache, b, nranks, 64u << 20, 2, 0, on_report, x), 0);
	ck_assert_int_eq(bfs_allfiles_new(&x->a, b, nranks, x->cache, stash, on_report, x), 0);
}

static void fx_setup(struct all_fx *x, const char *schema, size_t nranks, uint64_t stash)
{
	memset(x, 0, sizeof(*x));
	fstest_setup(&x->t, RECORDS, schema);
	fx_start(x, nranks, stash);
}

static void fx_teardown(struct all_fx *x)
{
	bfs_cache_free(x->cache);
	bfs_allfiles_free(x->a);
	bfs_allfiles_free(NULL);
	fstest_teardown(&x->t);
}

/* The node of all/T.npy (tensor t) or, t < 0, of all.safetensors. */
static struct bfs_vnode node(uint64_t rank, uint64_t epoch, long t)
{
	struct bfs_vnode n = { 0 };

	n.type = t < 0 ? BFS_V_SAFETENSORS : BFS_V_NPY;
	n.all = true;
	n.rank = rank;
	n.epoch = epoch;
	n.tensor = t < 0 ? -1 : (int)t;
	return n;
}

/* Bytes [off, off + len) of n: their count, copied to dst. */
static size_t read_at(struct all_fx *x, const struct bfs_vnode *n, uint64_t off, size_t len,
		      uint8_t *dst, int *rc)
{
	uint8_t *buf = NULL;
	size_t got = 99;
	double rows = -1;

	*rc = bfs_allfiles_read(x->a, n, off, len, &buf, &got, &rows);
	if (*rc) {
		ck_assert_ptr_null(buf);
		return 0;
	}
	ck_assert_uint_le(got, len);
	ck_assert(rows >= 0);
	ck_assert(got ? buf != NULL : buf == NULL);
	if (got)
		memcpy(dst, buf, got);
	free(buf);
	return got;
}

/* The whole file n (malloc'd); *size its size. */
static uint8_t *whole(struct all_fx *x, const struct bfs_vnode *n, uint64_t *size)
{
	uint8_t *b;
	int rc;

	ck_assert_int_eq(bfs_allfiles_size(x->a, n, size), 0);
	b = malloc(*size + 1);
	ck_assert_uint_eq(read_at(x, n, 0, *size + 4096, b, &rc), *size);
	ck_assert_int_eq(rc, 0);
	return b;
}

/* A .npy's header length (version 1.0). */
static uint64_t npy_hlen(const uint8_t *b)
{
	ck_assert(memcmp(b, "\x93NUMPY\x01\x00", 8) == 0);
	return 10 + (uint64_t)b[8] + ((uint64_t)b[9] << 8);
}

/* Every all/ file of (rank, epoch) against the batches and each other. */
static void check_epoch(struct all_fx *x, uint64_t rank, uint64_t epoch)
{
	const struct bfs_batcher *b = x->t.b[rank];
	const struct bfs_plan *plan = bfs_batcher_plan(b);
	struct bfs_vnode st = node(rank, epoch, -1);
	uint64_t stsize, size, nb = bfs_batcher_nbatches(b);
	uint8_t *stb = whole(x, &st, &stsize);
	struct bfs_epoch_view *v = NULL;

	ck_assert_int_eq(bfs_epoch_view_new(&v, b, epoch), 0);
	ck_assert_uint_eq(stsize, v->geom->st_size);
	for (size_t t = 0; t < plan->ntensors; t++) {
		struct bfs_vnode n = node(rank, epoch, (long)t);
		uint8_t *f = whole(x, &n, &size);
		uint64_t h = npy_hlen(f), pos = h;

		ck_assert_uint_eq(size, bfs_npy_size(&v->geom->g[t]));
		ck_assert_uint_eq(size - h, v->geom->g[t].nbytes);
		ck_assert_msg(memcmp(f + h, stb + v->geom->g[t].offset, size - h) == 0,
			      "all.safetensors: tensor %s differs from all/%s.npy", plan->t[t].name,
			      plan->t[t].name);
		if (bfs_epoch_view_row_bytes(v, t)) { /* a fixed tensor: the batches end to end */
			for (uint64_t i = 0; i < nb; i++) {
				struct bfs_cache_entry *e = NULL;
				const struct bfs_tensor_geom *g;

				ck_assert_int_eq(bfs_cache_get(&e, x->cache, rank, epoch, i), 0);
				g = &e->geom->g[t];
				ck_assert_msg(memcmp(f + pos, e->buf + g->offset, g->nbytes) == 0,
					      "all/%s.npy: batch %llu differs", plan->t[t].name,
					      (unsigned long long)i);
				pos += g->nbytes;
				bfs_cache_put(x->cache, e);
			}
			ck_assert_uint_eq(pos, size);
		}
		free(f);
	}
	bfs_epoch_view_free(v);
	free(stb);
}

/* Reads of n at many offsets and lengths give its bytes; none past the end. */
static void check_splits(struct all_fx *x, const struct bfs_vnode *n)
{
	uint64_t size;
	uint8_t *want = whole(x, n, &size), *got = malloc(size + 8192);
	static const size_t lens[] = { 1, 7, 64, 129, 1000, 4096 };
	int rc;

	for (uint64_t off = 0; off <= size; off += size / 53 + 1)
		for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
			size_t m = read_at(x, n, off, lens[k], got, &rc);
			size_t w = size - off < lens[k] ? size - off : lens[k];

			ck_assert_int_eq(rc, 0);
			ck_assert_uint_eq(m, w);
			ck_assert(memcmp(got, want + off, m) == 0);
		}
	ck_assert_uint_eq(read_at(x, n, size, 100, got, &rc), 0);
	ck_assert_uint_eq(read_at(x, n, size + 999, 100, got, &rc), 0);
	ck_assert_int_eq(rc, 0);
	free(want);
	free(got);
}

START_TEST(fixed_the_epoch_is_its_batches)
{
	struct all_fx x;

	fx_setup(&x, FSTEST_FIXED, 1, 1u << 20);
	for (uint64_t e = 0; e < EPOCHS; e++)
		check_epoch(&x, 0, e);
	check_splits(&x, &(struct bfs_vnode){ .type = BFS_V_NPY, .all = true });
	check_splits(&x, &(struct bfs_vnode){ .type = BFS_V_SAFETENSORS, .all = true, .epoch = 1 });
	ck_assert_uint_eq(x.reports, 0);
	fx_teardown(&x);
}
END_TEST

START_TEST(ragged_ranks_and_splits)
{
	struct all_fx x;

	fx_setup(&x, FSTEST_RAGGED, 2, 1u << 20);
	for (uint64_t r = 0; r < 2; r++)
		for (uint64_t e = 0; e < EPOCHS; e++)
			check_epoch(&x, r, e);
	for (long t = -1; t < (long)bfs_batcher_plan(x.t.b[0])->ntensors; t++) {
		struct bfs_vnode n = node(1, 1, t);

		check_splits(&x, &n);
	}
	ck_assert_uint_eq(x.reports, 0);
	fx_teardown(&x);
}
END_TEST

/* The stash holds the small tensors of the chunks a read had in hand,
 * within its budget; without a budget it holds nothing. */
START_TEST(reads_fill_the_stash)
{
	struct all_fx x, y;
	uint64_t size;
	struct bfs_vnode st = node(0, 0, -1);

	/* 150 rows: x and tok's row splits (about 1.2 KB each) are small
	 * for a stash of 8 KiB (a quarter of it at most), tok's values (about
	 * 3 KB) are not: the stash takes the small ones */
	fx_setup(&x, FSTEST_RAGGED, 1, 8192);
	ck_assert_uint_eq(bfs_allfiles_stash_bytes(x.a), 0);
	free(whole(&x, &st, &size));
	ck_assert_uint_gt(bfs_allfiles_stash_bytes(x.a), 0);
	ck_assert_uint_le(bfs_allfiles_stash_bytes(x.a), 8192);
	fx_teardown(&x);
	fx_setup(&y, FSTEST_RAGGED, 1, 0);
	free(whole(&y, &st, &size));
	ck_assert_uint_eq(bfs_allfiles_stash_bytes(y.a), 0);
	fx_teardown(&y);
}
END_TEST

/* Flip a byte of record k's data in the shard at path. */
static void corrupt_record(const char *path, long k)
{
	FILE *f = fopen(path, "r+b");
	uint8_t hdr[12];
	long off = 0;

	ck_assert_ptr_nonnull(f);
	for (long i = 0; i < k; i++) {
		uint64_t len;

		ck_assert_int_eq(fseek(f, off, SEEK_SET), 0);
		ck_assert_uint_eq(fread(hdr, 1, 12, f), 12);
		memcpy(&len, hdr, 8);
		off += 12 + (long)len + 4;
	}
	ck_assert_int_eq(fseek(f, off + 12, SEEK_SET), 0);
	ck_assert_uint_eq(fread(hdr, 1, 1, f), 1);
	hdr[0] ^= 0x55;
	ck_assert_int_eq(fseek(f, off + 12, SEEK_SET), 0);
	ck_assert_uint_eq(fwrite(hdr, 1, 1, f), 1);
	ck_assert_int_eq(fclose(f), 0);
}

START_TEST(a_corrupt_record_fails_only_its_batch)
{
	struct all_fx x;
	struct bfs_vnode n = node(0, 0, 0); /* all/x.npy: 8 bytes a row */
	uint64_t size, h, bad = UINT64_MAX, B, nb;
	uint8_t *got, hdr[16];
	int rc;

	memset(&x, 0, sizeof(x));
	fstest_write_shard(&x.t, RECORDS);
	corrupt_record(x.t.path, 100);
	fstest_open(&x.t, FSTEST_FIXED);
	fx_start(&x, 1, 1u << 20);
	B = bfs_batcher_batch_len(x.t.b[0], 0);
	nb = bfs_batcher_nbatches(x.t.b[0]);
	/* the batch holding record 100 is the one that fails */
	for (uint64_t i = 0; i < nb; i++) {
		struct bfs_cache_entry *e = NULL;

		if (bfs_cache_get(&e, x.cache, 0, 0, i) != 0) {
			ck_assert_uint_eq(bad, UINT64_MAX);
			bad = i;
		}
		bfs_cache_put(x.cache, e);
	}
	ck_assert_uint_ne(bad, UINT64_MAX);
	ck_assert_int_eq(bfs_allfiles_size(x.a, &n, &size), 0);
	ck_assert_uint_eq(read_at(&x, &n, 0, 16, hdr, &rc), 16);
	h = npy_hlen(hdr);
	got = malloc(size);
	/* its rows fail; every other batch's rows read, their batch's bytes,
	 * those of its chunk included */
	for (uint64_t i = 0; i < nb; i++) {
		uint64_t a = h + i * B * 8, len = bfs_batcher_batch_len(x.t.b[0], i) * 8;
		size_t m = read_at(&x, &n, a, len, got, &rc);
		struct bfs_cache_entry *e = NULL;

		if (i == bad) {
			ck_assert_int_eq(rc, -EIO);
			continue;
		}
		ck_assert_msg(rc == 0, "batch %llu: %d", (unsigned long long)i, rc);
		ck_assert_uint_eq(m, len);
		ck_assert_int_eq(bfs_cache_get(&e, x.cache, 0, 0, i), 0);
		ck_assert(memcmp(got, e->buf + e->geom->g[0].offset, len) == 0);
		bfs_cache_put(x.cache, e);
	}
	free(got);
	ck_assert_uint_gt(x.reports, 0);
	fx_teardown(&x);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("allfiles");
	TCase *tc = tcase_create("allfiles");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, fixed_the_epoch_is_its_batches);
	tcase_add_test(tc, ragged_ranks_and_splits);
	tcase_add_test(tc, reads_fill_the_stash);
	tcase_add_test(tc, a_corrupt_record_fails_only_its_batch);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
