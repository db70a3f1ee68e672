/* SPDX-License-Identifier: Apache-2.0 */
/*
 * batchtest.h — what the batch, counts-cache and dataset suites build their
 * cases from: TFRecord files of hand-built Examples (x float [2], tok
 * ragged int64, w ragged bytes, p padded int64; one record's data CRC
 * broken on demand) and parts_schema, which reads them; a batcher's
 * geometry signature and the notes it raised; the six shards of the
 * counts-pack cases and the cache files an index_dir holds.
 *
 * Header-only, static functions; include it from one test file each.
 */
#ifndef BFS_BATCHTEST_H
#define BFS_BATCHTEST_H

#include "testfiles.h"
#include "batch.h"
#include "crc32c.h"
#include "dataset.h"
#include "pbtest.h"
#include "schema.h"

#include <check.h>
#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define BT_UNUSED __attribute__((unused))

/* ----------------------------------------------------- records and schema */

static BT_UNUSED void put_record(FILE *f, const struct pb *m, bool break_crc)
{
	uint8_t hdr[12], tail[4];
	uint64_t len = m->n;
	uint32_t c;

	memcpy(hdr, &len, 8);
	c = bfs_crc32c_mask(bfs_crc32c(0, hdr, 8));
	memcpy(hdr + 8, &c, 4);
	c = bfs_crc32c_mask(bfs_crc32c(0, m->d, m->n)) ^ (break_crc ? 1u : 0u);
	memcpy(tail, &c, 4);
	ck_assert(fwrite(hdr, 1, 12, f) == 12 && fwrite(m->d, 1, m->n, f) == m->n &&
		  fwrite(tail, 1, 4, f) == 4);
}

/* Records first .. first+n-1: x float [2], tok int64 0..5 values (ragged),
 * w 0..3 byte strings (ragged twice), p int64 0..6 values (padded); record
 * `bad` has a broken data CRC (none when bad < 0). */
static BT_UNUSED void write_records(const char *path, long bad, long first, long n)
{
	FILE *f = fopen(path, "wb");

	ck_assert(f != NULL);
	for (long i = first; i < first + n; i++) {
		struct pb feats = { 0 }, fx, ft, fw, fp, ex;
		float x[2] = { (float)i, -(float)i / 3 };
		int64_t v[6];
		char wb[3][8];
		const char *ws[3] = { wb[0], wb[1], wb[2] };

		for (int k = 0; k < 6; k++)
			v[k] = i * 10 + k;
		for (int k = 0; k < 3; k++)
			snprintf(wb[k], sizeof(wb[k]), "%.*s%ld", (int)((i + k) % 4), "abcd", i);
		fx = pb_float_feature(x, 2, i % 2);
		ft = pb_int_feature(v, (size_t)(i * 7 % 6), true);
		fw = pb_bytes_feature(ws, (size_t)(i % 4));
		fp = pb_int_feature(v, (size_t)(i * 5 % 7), i % 3 == 0);
		pb_add(&feats, "x", &fx);
		pb_add(&feats, "tok", &ft);
		pb_add(&feats, "w", &fw);
		pb_add(&feats, "p", &fp);
		ex = pb_example(&feats, NULL);
		put_record(f, &ex, i == bad);
	}
	ck_assert_int_eq(fclose(f), 0);
}

/* 300 records (write_records). */
static BT_UNUSED void write_dataset(const char *path, long bad)
{
	write_records(path, bad, 0, 300);
}

static BT_UNUSED const char parts_schema[] =
	"{\"features\": {\"x\": {\"kind\": \"float\", \"shape\": [2]},"
	" \"tok\": {\"kind\": \"int64\", \"shape\": [-1], \"ragged\": true},"
	" \"w\": {\"kind\": \"bytes\", \"shape\": [-1, -1], \"ragged\": true},"
	" \"p\": {\"kind\": \"int64\", \"shape\": [-1], \"max_len\": 6}}}";

/* ------------------------------------------------ a batcher's geometry */

struct notes {
	int n;
	char last[1024];
};

static BT_UNUSED void on_note(void *ctx, const char *shard, const char *msg)
{
	struct notes *nt = ctx;

	nt->n++;
	snprintf(nt->last, sizeof(nt->last), "%s: %s", shard ? shard : "-", msg);
}

/* Every batch's file size (ragged sizes come from the counts), summed with
 * weights so that two batches trading sizes still differ. */
static BT_UNUSED uint64_t geom_sig_ds(const char *shard, const char *ds_index_dir,
				      const char *index_dir, const char *schema_json,
				      struct notes *nt)
{
	struct bfs_dataset_opts dopt = { .comp = BFS_COMP_AUTO, .index_dir = ds_index_dir };
	struct bfs_batcher_opts bopt = { .batch_size = 7,
					 .seed = 2,
					 .shuffle = true,
					 .world = 1,
					 .jobs = 2,
					 .index_dir = index_dir,
					 .on_note = on_note,
					 .note_ctx = nt };
	struct bfs_dataset *ds = NULL;
	struct bfs_schema *sc = NULL;
	struct bfs_batcher *b = NULL;
	uint64_t sig = 0;

	ck_assert_int_eq(bfs_dataset_open(&ds, shard, &dopt), 0);
	ck_assert_int_eq(bfs_schema_from_json(&sc, schema_json, strlen(schema_json)), 0);
	ck_assert_int_eq(bfs_batcher_new(&b, ds, sc, &bopt), 0);
	for (uint64_t i = 0; i < bfs_batcher_nbatches(b); i++) {
		struct bfs_geom *g = NULL;
		ck_assert_int_eq(bfs_batcher_geom(&g, b, 0, i), 0);
		sig += (i + 1) * g->st_size;
		bfs_geom_free(g);
	}
	bfs_batcher_free(b);
	bfs_schema_free(sc);
	bfs_dataset_close(ds);
	return sig;
}

static BT_UNUSED uint64_t geom_sig(const char *shard, const char *index_dir,
				   const char *schema_json, struct notes *nt)
{
	return geom_sig_ds(shard, index_dir, index_dir, schema_json, nt);
}

/* ------------------------------------- many shards: the counts pack */

/* The shards of the pack tests, in SRC: five small ones (their counts
 * under one page: entries of their directory's pack) of 100 records
 * each, and one of 700 (a counts file of its own, with parts_schema). */
#define NPK_SMALL 5
static BT_UNUSED const char *const PK_NAMES[NPK_SMALL + 1] = { "a-0", "a-1", "a-2",
							       "b-0", "b-1", "c-big" };

static BT_UNUSED void pk_path(char *dst, size_t cap, const char *src, unsigned k)
{
	snprintf(dst, cap, "%s/%s", src, PK_NAMES[k]);
}

static BT_UNUSED void pk_write(const char *src, unsigned k, long first)
{
	char path[256];

	pk_path(path, sizeof(path), src, k);
	write_records(path, -1, first, k < NPK_SMALL ? 100 : 700);
}

/* Files in ix: counts packs (the last one's path in pack) and counts files
 * of their own; no temporary file is left. */
static BT_UNUSED void cnt_files(const char *ix, unsigned *packs, unsigned *own, char *pack,
				size_t cap)
{
	DIR *d = opendir(ix);
	struct dirent *de;

	ck_assert_ptr_nonnull(d);
	*packs = *own = 0;
	while ((de = readdir(d)) != NULL) {
		size_t n = strlen(de->d_name);

		ck_assert_msg(strstr(de->d_name, ".tmp") == NULL, "%s", de->d_name);
		if (n > 12 && strcmp(de->d_name + n - 12, ".cntpack.idx") == 0) {
			(*packs)++;
			if (pack)
				snprintf(pack, cap, "%s/%s", ix, de->d_name);
		} else if (n > 8 && strcmp(de->d_name + n - 8, ".cnt.idx") == 0) {
			(*own)++;
		}
	}
	closedir(d);
}

#endif
