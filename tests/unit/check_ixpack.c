/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for decoder/store/ixpack.c: the index pack file (round trip, what a
 * load and a lookup check, corruption anywhere), and how a dataset packs
 * the indexes of small shards, reuses the pack, and rebuilds a stale or
 * corrupt entry. */
#include "testfiles.h"
#include "crc32c.h"
#include "dataset.h"
#include "index.h"
#include "ixpack.h"

#include <check.h>
#include <dirent.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[64];

static void mk_tmpdir(void)
{
	test_mkdir(tmpdir, sizeof(tmpdir), "check_ixpack");
}

static void rm_tmpdir(void)
{
	test_rmdir(tmpdir);
}

/* ---- the file ------------------------------------------------------------- */

/* bfs_ixpack_load of a file holding p[0, len): the bytes loaded as a mount
 * loads them. */
static enum bfs_index_load_result load_bytes(struct bfs_ixpack **out, const uint8_t *p, size_t len,
					     char *why, size_t whycap)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/bytes.pack.idx", tmpdir);
	f = fopen(path, "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(p, 1, len, f), len);
	ck_assert_int_eq(fclose(f), 0);
	return bfs_ixpack_load(out, path, why, whycap);
}

#define NE 3
static const char *const PATHS[NE] = { "/data/a", "/data/b", "/data/sub/c" };

static struct bfs_index_key key_of(unsigned e)
{
	struct bfs_index_key k = { PATHS[e], BFS_COMP_NONE, 100000 + e, 1000 + (int64_t)e };
	return k;
}

static uint32_t len_of(unsigned e, uint64_t i)
{
	return (uint32_t)((e * 31 + i * 37) % 300);
}

static uint64_t nrec_of(unsigned e)
{
	return 5 + 40 * e; /* 5, 45, 85 */
}

static struct bfs_index *build(unsigned e)
{
	struct bfs_index *ix = NULL;
	uint64_t off = 0;

	ck_assert_int_eq(bfs_index_new(&ix), 0);
	for (uint64_t i = 0; i < nrec_of(e); i++) {
		ck_assert_int_eq(bfs_index_push(ix, off, len_of(e, i)), 0);
		off += 16 + len_of(e, i);
	}
	ck_assert_int_eq(bfs_index_finish(ix), 0);
	return ix;
}

static void check_entry(const struct bfs_index *ix, unsigned e)
{
	uint64_t off = 0;

	ck_assert_uint_eq(ix->n, nrec_of(e));
	for (uint64_t i = 0; i < ix->n; i++) {
		ck_assert_uint_eq(bfs_index_offset(ix, i), off);
		ck_assert_uint_eq(bfs_index_len(ix, i), len_of(e, i));
		off += 16 + len_of(e, i);
	}
}

/* A pack of the NE entries, written to tmpdir/p.pack.idx; its path. */
static const char *write_pack(void)
{
	static char path[128];
	struct bfs_ixpack_writer *w = NULL;

	snprintf(path, sizeof(path), "%s/p.pack.idx", tmpdir);
	ck_assert_int_eq(bfs_ixpack_writer_new(&w), 0);
	for (unsigned e = 0; e < NE; e++) {
		struct bfs_index *ix = build(e);
		struct bfs_index_key k = key_of(e);

		ck_assert_int_eq(bfs_ixpack_add(w, ix, &k), 0);
		bfs_index_free(ix);
	}
	ck_assert_int_eq(bfs_ixpack_write(w, path), 0);
	bfs_ixpack_writer_free(w);
	return path;
}

START_TEST(pack_round_trips_and_checks_each_key)
{
	struct bfs_ixpack *pk = NULL;
	struct bfs_index *ix = NULL;
	struct bfs_index_key k;
	char why[256], path[256];
	bool had;
	const char *file;

	mk_tmpdir();
	file = write_pack();
	ck_assert_msg(bfs_ixpack_load(&pk, file, why, sizeof(why)) == BFS_INDEX_LOADED, "%s", why);
	ck_assert_uint_eq(bfs_ixpack_count(pk), NE);
	for (unsigned e = 0; e < NE; e++) {
		k = key_of(e);
		ck_assert_int_eq(bfs_ixpack_get(pk, &k, &ix, &had, why, sizeof(why)),
				 BFS_INDEX_LOADED);
		ck_assert(had);
		check_entry(ix, e);
		bfs_index_free(ix);
		/* another version of the shard: not loaded, but there */
		k.mtime_ns++;
		ck_assert_int_eq(bfs_ixpack_get(pk, &k, &ix, &had, why, sizeof(why)),
				 BFS_INDEX_ABSENT);
		ck_assert(had);
		k = key_of(e);
		k.file_size--;
		ck_assert_int_eq(bfs_ixpack_get(pk, &k, &ix, &had, why, sizeof(why)),
				 BFS_INDEX_ABSENT);
		/* compression from the entry when the key says AUTO */
		k = key_of(e);
		k.comp = BFS_COMP_AUTO;
		ck_assert_int_eq(bfs_ixpack_get(pk, &k, &ix, &had, why, sizeof(why)),
				 BFS_INDEX_LOADED);
		ck_assert_uint_eq(ix->comp, BFS_COMP_NONE);
		bfs_index_free(ix);
	}
	k = key_of(0);
	k.path = "/data/zz";
	ck_assert_int_eq(bfs_ixpack_get(pk, &k, &ix, &had, why, sizeof(why)), BFS_INDEX_ABSENT);
	ck_assert(!had);
	/* every entry says what it is for */
	for (size_t i = 0; i < bfs_ixpack_count(pk); i++) {
		const uint8_t *p;
		uint64_t h;
		size_t len;

		bfs_ixpack_entry(pk, i, &h, &p, &len);
		ck_assert(bfs_index_image_key(p, len, &k, path, sizeof(path)));
		ck_assert_uint_eq(h, bfs_ixpack_hash(path));
		ck_assert(strncmp(path, "/data/", 6) == 0);
	}
	bfs_ixpack_free(pk);
	rm_tmpdir();
}
END_TEST

/* Offsets and lengths of the entries, read from the table (64-byte
 * header, then 24-byte rows of hash, offset, length). */
static void table_of(const uint8_t *p, uint64_t off[NE], uint64_t len[NE])
{
	for (unsigned i = 0; i < NE; i++) {
		memcpy(&off[i], p + 64 + 24 * i + 8, 8);
		memcpy(&len[i], p + 64 + 24 * i + 16, 8);
	}
}

/* The entry whose bytes hold position pos, or -1. */
static int entry_at(const uint64_t off[NE], const uint64_t len[NE], size_t pos)
{
	for (int i = 0; i < NE; i++)
		if (pos >= off[i] && pos < off[i] + len[i])
			return i;
	return -1;
}

/* The path of table row i (for telling which key it holds). */
static int key_index(const uint8_t *p, uint64_t off, uint64_t len)
{
	char path[256];
	struct bfs_index_key k;

	ck_assert(bfs_index_image_key(p + off, (size_t)len, &k, path, sizeof(path)));
	for (int e = 0; e < NE; e++)
		if (strcmp(path, PATHS[e]) == 0)
			return e;
	ck_abort_msg("unknown path %s", path);
	return -1;
}

START_TEST(any_flipped_byte_or_truncation_is_caught)
{
	struct bfs_ixpack *pk = NULL;
	uint64_t off[NE], len[NE];
	int owner[NE];
	uint8_t *buf;
	size_t n;
	char why[256];

	mk_tmpdir();
	buf = test_slurp(write_pack(), &n);
	table_of(buf, off, len);
	for (int i = 0; i < NE; i++)
		owner[i] = key_index(buf, off[i], len[i]);
	for (size_t pos = 0; pos < n; pos++) {
		int hit = entry_at(off, len, pos);

		buf[pos] ^= 0x20;
		if (pos < 64 + 24 * NE) { /* header or table: the whole pack */
			ck_assert_msg(load_bytes(&pk, buf, n, why, sizeof(why)) == BFS_INDEX_BAD,
				      "byte %zu", pos);
		} else { /* an entry: that one alone (padding: none) */
			ck_assert_msg(load_bytes(&pk, buf, n, why, sizeof(why)) == BFS_INDEX_LOADED,
				      "byte %zu: %s", pos, why);
			for (int i = 0; i < NE; i++) {
				struct bfs_index_key k = key_of((unsigned)owner[i]);
				struct bfs_index *ix = NULL;
				bool had;
				enum bfs_index_load_result r =
					bfs_ixpack_get(pk, &k, &ix, &had, why, sizeof(why));

				if (i == hit) {
					ck_assert_msg(r == BFS_INDEX_BAD, "byte %zu: %d", pos, r);
				} else {
					ck_assert_msg(r == BFS_INDEX_LOADED, "byte %zu", pos);
					check_entry(ix, (unsigned)owner[i]);
					bfs_index_free(ix);
				}
			}
			bfs_ixpack_free(pk);
		}
		buf[pos] ^= 0x20;
	}
	for (size_t cut = 0; cut < n; cut++)
		ck_assert_msg(load_bytes(&pk, buf, cut, why, sizeof(why)) == BFS_INDEX_BAD,
			      "cut at %zu", cut);
	/* an old version, another file */
	memcpy(buf, "BFSPAK00", 8);
	ck_assert_int_eq(load_bytes(&pk, buf, n, why, sizeof(why)), BFS_INDEX_BAD);
	ck_assert_ptr_nonnull(strstr(why, "old index pack format"));
	ck_assert_int_eq(load_bytes(&pk, (const uint8_t *)"hello", 5, why, sizeof(why)),
			 BFS_INDEX_BAD);
	ck_assert_ptr_nonnull(strstr(why, "not a batchfs index pack"));
	free(buf);
	rm_tmpdir();
}
END_TEST

START_TEST(entries_carry_over_and_an_empty_pack_is_removed)
{
	struct bfs_ixpack *pk = NULL, *back = NULL;
	struct bfs_ixpack_writer *w = NULL;
	struct bfs_index *ix = NULL;
	struct bfs_index_key k;
	const char *file;
	char why[256];
	bool had;

	mk_tmpdir();
	file = write_pack();
	ck_assert_int_eq(bfs_ixpack_load(&pk, file, why, sizeof(why)), BFS_INDEX_LOADED);
	ck_assert_int_eq(bfs_ixpack_writer_new(&w), 0);
	for (size_t i = 0; i < bfs_ixpack_count(pk); i++) {
		const uint8_t *p;
		uint64_t h;
		size_t len;

		bfs_ixpack_entry(pk, i, &h, &p, &len);
		ck_assert_int_eq(bfs_ixpack_add_bytes(w, h, p, len), 0);
	}
	bfs_ixpack_free(pk);
	ck_assert_int_eq(bfs_ixpack_write(w, file), 0);
	bfs_ixpack_writer_free(w);
	ck_assert_int_eq(bfs_ixpack_load(&back, file, why, sizeof(why)), BFS_INDEX_LOADED);
	for (unsigned e = 0; e < NE; e++) {
		k = key_of(e);
		ck_assert_int_eq(bfs_ixpack_get(back, &k, &ix, &had, why, sizeof(why)),
				 BFS_INDEX_LOADED);
		check_entry(ix, e);
		bfs_index_free(ix);
	}
	bfs_ixpack_free(back);
	ck_assert_int_eq(bfs_ixpack_writer_new(&w), 0);
	ck_assert_int_eq(bfs_ixpack_write(w, file), 0);
	bfs_ixpack_writer_free(w);
	ck_assert_int_ne(access(file, F_OK), 0);
	ck_assert_int_eq(bfs_ixpack_load(&back, file, why, sizeof(why)), BFS_INDEX_ABSENT);
	rm_tmpdir();
}
END_TEST

/* The fuzz corpus (written by a script, not by ixpack.c) is valid packs
 * whose entries load: the fuzzer starts from files that reach every
 * check. */
START_TEST(fuzz_corpus_packs_load)
{
	static const struct {
		const char *name;
		size_t entries;
	} want[] = { { "three-plain.pack.idx", 3 },
		     { "zlib-1.pack.idx", 1 },
		     { "gzip-seek-point.pack.idx", 2 },
		     { "no-entries.pack.idx", 0 } };

	for (size_t w = 0; w < BFS_ARRAY_SIZE(want); w++) {
		char file[512], why[256], path[4097];
		struct bfs_ixpack *pk = NULL;

		snprintf(file, sizeof(file), "%s/tests/fuzz/corpus/ixpack/%s", SRCDIR,
			 want[w].name);
		ck_assert_msg(bfs_ixpack_load(&pk, file, why, sizeof(why)) == BFS_INDEX_LOADED,
			      "%s: %s", file, why);
		ck_assert_uint_eq(bfs_ixpack_count(pk), want[w].entries);
		for (size_t i = 0; i < bfs_ixpack_count(pk); i++) {
			struct bfs_index_key k;
			struct bfs_index *ix = NULL;
			const uint8_t *p;
			uint64_t h;
			size_t len;
			bool had;

			bfs_ixpack_entry(pk, i, &h, &p, &len);
			ck_assert(bfs_index_image_key(p, len, &k, path, sizeof(path)));
			ck_assert_msg(bfs_ixpack_get(pk, &k, &ix, &had, why, sizeof(why)) ==
					      BFS_INDEX_LOADED,
				      "%s: %s: %s", want[w].name, path, why);
			bfs_index_free(ix);
		}
		bfs_ixpack_free(pk);
	}
}
END_TEST

/* ---- through a dataset ------------------------------------------------------ */

/* Shards a-00..a-11, b-00..b-11 (small: a few records), z-big (3,000
 * records: its index is over BFS_IXPACK_ENTRY_MAX; 4 at odd gen). Record j of shard s
 * (in name order) is rec_len(s, j) bytes of (uint8_t)(s + j). gen[s]
 * bumps when a shard is rewritten. */
#define NSMALL 24
#define NSH (NSMALL + 1)
static unsigned gen[NSH];

static char src[128];

static const char *shard_name(unsigned s, char *dst, size_t cap)
{
	if (s == NSMALL)
		snprintf(dst, cap, "%s/z-big", src);
	else
		snprintf(dst, cap, "%s/%c-%02u", src, s < NSMALL / 2 ? 'a' : 'b', s % (NSMALL / 2));
	return dst;
}

static uint64_t shard_recs(unsigned s)
{
	if (s == NSMALL)
		return gen[s] % 2 ? 4 : 3000;
	return 3 + (s + gen[s]) % 5;
}

static uint32_t rec_len(unsigned s, uint64_t j)
{
	return (uint32_t)((s * 7 + j * 37 + gen[s] * 11) % 400);
}

static void write_shard(unsigned s)
{
	char path[256];
	uint8_t data[400];
	FILE *f = fopen(shard_name(s, path, sizeof(path)), "wb");

	ck_assert_ptr_nonnull(f);
	for (uint64_t j = 0; j < shard_recs(s); j++) {
		memset(data, (int)(uint8_t)(s + j), sizeof(data));
		test_put_record(f, data, rec_len(s, j));
	}
	ck_assert_int_eq(fclose(f), 0);
}

static int notes;
static char last_note[2048];

static void count_note(void *ctx, const char *shard, const char *msg)
{
	(void)ctx;
	(void)shard;
	notes++;
	snprintf(last_note, sizeof(last_note), "%s", msg);
}

/* Open source (the shards first..last, in order) with index_dir ixd, check
 * every record; return whether the index was reused. */
static bool open_check(const char *source, const char *ixd, unsigned first, unsigned last)
{
	struct bfs_dataset_opts o = {
		.comp = BFS_COMP_AUTO, .index_dir = ixd, .jobs = 2, .on_note = count_note
	};
	struct bfs_dataset *ds = NULL;
	uint8_t buf[400];
	uint64_t rec = 0;
	bool reused;

	ck_assert_msg(bfs_dataset_open(&ds, source, &o) == 0, "%s", bfs_err_msg());
	ck_assert_uint_eq(bfs_dataset_nshards(ds), last - first + 1);
	for (unsigned s = first; s <= last; s++) {
		for (uint64_t j = 0; j < shard_recs(s); j++, rec++) {
			uint32_t len = 0;

			ck_assert_msg(bfs_dataset_read(ds, rec, buf, sizeof(buf), &len, true) == 0,
				      "%s", bfs_err_msg());
			ck_assert_uint_eq(len, rec_len(s, j));
			if (len)
				ck_assert_uint_eq(buf[len - 1], (uint8_t)(s + j));
		}
	}
	ck_assert_uint_eq(bfs_dataset_nrecords(ds), rec);
	reused = bfs_dataset_index_reused(ds);
	bfs_dataset_close(ds);
	return reused;
}

/* Files in dir: how many end in .pack.idx (the last one's path in pack),
 * how many other .idx. */
static void count_files(const char *dir, unsigned *packs, unsigned *idx, char *pack, size_t cap)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	ck_assert_ptr_nonnull(d);
	*packs = *idx = 0;
	while ((de = readdir(d)) != NULL) {
		size_t n = strlen(de->d_name);

		if (n > 9 && strcmp(de->d_name + n - 9, ".pack.idx") == 0) {
			(*packs)++;
			snprintf(pack, cap, "%s/%s", dir, de->d_name);
		} else if (n > 4 && strcmp(de->d_name + n - 4, ".idx") == 0) {
			(*idx)++;
		}
	}
	closedir(d);
}

START_TEST(dataset_packs_small_shards_and_rebuilds_stale_or_corrupt_entries)
{
	char ixd[128], pack[600];
	unsigned np, ni;
	uint8_t *buf;
	size_t n;
	uint64_t off, elen;
	ino_t ino;

	mk_tmpdir();
	snprintf(src, sizeof(src), "%s/src", tmpdir);
	snprintf(ixd, sizeof(ixd), "%s/ix", tmpdir);
	ck_assert_int_eq(mkdir(src, 0755), 0);
	memset(gen, 0, sizeof(gen));
	for (unsigned s = 0; s < NSH; s++)
		write_shard(s);
	notes = 0;
	ck_assert(!open_check(src, ixd, 0, NSH - 1)); /* built */
	count_files(ixd, &np, &ni, pack, sizeof(pack));
	ck_assert_uint_eq(np, 1); /* the small shards' indexes, in one pack */
	ck_assert_uint_eq(ni, 1); /* the big shard's, a file of its own */
	ck_assert_uint_eq(test_pack_entries(pack), NSMALL);
	ino = test_ino(pack);
	ck_assert(open_check(src, ixd, 0, NSH - 1)); /* reused, not rewritten */
	ck_assert_uint_eq(test_ino(pack), ino);
	ck_assert_int_eq(notes, 0);

	/* a small shard changed: it alone is scanned, the pack rewritten */
	gen[5]++;
	write_shard(5);
	ck_assert(!open_check(src, ixd, 0, NSH - 1));
	ck_assert_uint_ne(test_ino(pack), ino);
	ck_assert_int_eq(notes, 0);
	ck_assert_uint_eq(test_pack_entries(pack), NSMALL);
	ino = test_ino(pack);
	ck_assert(open_check(src, ixd, 0, NSH - 1));
	ck_assert_uint_eq(test_ino(pack), ino);

	/* a flipped byte in the middle of the first entry: one note, rebuilt */
	buf = test_slurp(pack, &n);
	memcpy(&off, buf + 64 + 8, 8);
	memcpy(&elen, buf + 64 + 16, 8);
	buf[off + elen / 2] ^= 1;
	test_spit(pack, buf, n);
	ck_assert(!open_check(src, ixd, 0, NSH - 1));
	ck_assert_int_eq(notes, 1);
	ck_assert_ptr_nonnull(strstr(last_note, "index pack"));
	ck_assert_ptr_nonnull(strstr(last_note, "checksum"));
	ck_assert(open_check(src, ixd, 0, NSH - 1));
	ck_assert_int_eq(notes, 1);

	/* a corrupt header: the whole pack is rebuilt, with one note */
	free(buf);
	buf = test_slurp(pack, &n);
	buf[20] ^= 1;
	test_spit(pack, buf, n);
	ck_assert(!open_check(src, ixd, 0, NSH - 1));
	ck_assert_int_eq(notes, 2);
	ck_assert_ptr_nonnull(strstr(last_note, "corrupt header"));
	ck_assert(open_check(src, ixd, 0, NSH - 1));
	ck_assert_int_eq(notes, 2);
	ck_assert_uint_eq(test_pack_entries(pack), NSMALL);

	/* truncated: the same */
	free(buf);
	buf = test_slurp(pack, &n);
	test_spit(pack, buf, n / 2);
	ck_assert(!open_check(src, ixd, 0, NSH - 1));
	ck_assert_int_eq(notes, 3);
	ck_assert_ptr_nonnull(strstr(last_note, "truncated"));
	ck_assert(open_check(src, ixd, 0, NSH - 1));
	free(buf);

	/* the big shard made small: into the pack (its old file is not read
	 * again: the pack comes first); big again: out of it */
	gen[NSMALL]++;
	write_shard(NSMALL);
	ck_assert(!open_check(src, ixd, 0, NSH - 1));
	ck_assert_uint_eq(test_pack_entries(pack), NSMALL + 1);
	ck_assert(open_check(src, ixd, 0, NSH - 1));
	gen[NSMALL]++;
	write_shard(NSMALL);
	ck_assert(!open_check(src, ixd, 0, NSH - 1));
	ck_assert_uint_eq(test_pack_entries(pack), NSMALL);
	ck_assert(open_check(src, ixd, 0, NSH - 1));
	ck_assert_int_eq(notes, 3);
	rm_tmpdir();
}
END_TEST

START_TEST(datasets_sharing_a_directory_share_its_pack)
{
	char ixd[128], pack[600], glob_a[160], glob_b[160];
	unsigned np, ni;
	ino_t ino;

	mk_tmpdir();
	snprintf(src, sizeof(src), "%s/src", tmpdir);
	snprintf(ixd, sizeof(ixd), "%s/ix", tmpdir);
	snprintf(glob_a, sizeof(glob_a), "%s/a-*", src);
	snprintf(glob_b, sizeof(glob_b), "%s/b-*", src);
	ck_assert_int_eq(mkdir(src, 0755), 0);
	memset(gen, 0, sizeof(gen));
	for (unsigned s = 0; s < NSH; s++)
		write_shard(s);
	notes = 0;
	ck_assert(!open_check(glob_a, ixd, 0, NSMALL / 2 - 1));
	count_files(ixd, &np, &ni, pack, sizeof(pack));
	ck_assert_uint_eq(np, 1);
	ck_assert_uint_eq(ni, 0);
	ck_assert_uint_eq(test_pack_entries(pack), NSMALL / 2);
	/* the other half of the directory: added to the same pack, the first
	 * half's entries kept */
	ck_assert(!open_check(glob_b, ixd, NSMALL / 2, NSMALL - 1));
	count_files(ixd, &np, &ni, pack, sizeof(pack));
	ck_assert_uint_eq(np, 1);
	ck_assert_uint_eq(test_pack_entries(pack), NSMALL);
	ino = test_ino(pack);
	ck_assert(open_check(glob_a, ixd, 0, NSMALL / 2 - 1));
	ck_assert(open_check(glob_b, ixd, NSMALL / 2, NSMALL - 1));
	ck_assert_uint_eq(test_ino(pack), ino);
	/* a shard of the first half changed: when the second half rewrites
	 * the pack, that entry is dropped (stale), the others kept */
	gen[2]++;
	write_shard(2);
	gen[NSMALL / 2]++;
	write_shard(NSMALL / 2);
	ck_assert(!open_check(glob_b, ixd, NSMALL / 2, NSMALL - 1));
	ck_assert_uint_eq(test_pack_entries(pack), NSMALL - 1);
	ck_assert(!open_check(glob_a, ixd, 0, NSMALL / 2 - 1));
	ck_assert_uint_eq(test_pack_entries(pack), NSMALL);
	ck_assert(open_check(glob_b, ixd, NSMALL / 2, NSMALL - 1));
	ck_assert(open_check(glob_a, ixd, 0, NSMALL / 2 - 1));
	ck_assert_int_eq(notes, 0);
	rm_tmpdir();
}
END_TEST

/* The file of its own that shard s has in ixd: "<FNV-1a of its real
 * path>.idx", as batchfs names it (and named every shard's before packs). */
static void own_file(unsigned s, const char *ixd, char *dst, size_t cap)
{
	char path[256], real[PATH_MAX];

	ck_assert_ptr_nonnull(realpath(shard_name(s, path, sizeof(path)), real));
	snprintf(dst, cap, "%s/%016llx.idx", ixd,
		 (unsigned long long)bfs_fnv1a(0xcbf29ce484222325ull, real, strlen(real)));
}

/* What a batchfs of one index file per shard left in ixd: each shard's
 * index in a file of its own. */
static void write_own_files(const char *ixd)
{
	struct bfs_dataset_opts o = { .comp = BFS_COMP_AUTO, .jobs = 2 };
	struct bfs_dataset *ds = NULL;

	ck_assert_msg(bfs_dataset_open(&ds, src, &o) == 0, "%s", bfs_err_msg());
	ck_assert_uint_eq(bfs_dataset_nshards(ds), NSH);
	for (unsigned s = 0; s < NSH; s++) {
		const struct bfs_shard *sh = bfs_dataset_shard(ds, s);
		char file[600], real[PATH_MAX];
		struct bfs_index_key k;

		ck_assert_ptr_nonnull(realpath(bfs_shard_path(sh), real));
		k = (struct bfs_index_key){ real, (uint32_t)bfs_shard_compression(sh),
					    bfs_shard_file_size(sh), bfs_shard_mtime_ns(sh) };
		own_file(s, ixd, file, sizeof(file));
		ck_assert_int_eq(bfs_index_save(bfs_shard_get_index(sh), file, &k), 0);
	}
	bfs_dataset_close(ds);
}

static bool exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0;
}

/* Small shards' index files of their own (left by another batchfs sharing
 * index_dir, or when a shard was larger): read while they hold; once a
 * pack is written with a small shard's index, that shard's
 * file goes (and only then: not when the write fails). The big shard keeps
 * its file, and a file batchfs did not name for one of these shards stays. */
START_TEST(a_written_pack_drops_its_shards_files_of_their_own)
{
	char ixd[128], pack[600], own[600], decoy[600], real[PATH_MAX], blocker[700];
	unsigned np, ni;
	ino_t big;

	mk_tmpdir();
	snprintf(src, sizeof(src), "%s/src", tmpdir);
	snprintf(ixd, sizeof(ixd), "%s/ix", tmpdir);
	ck_assert_int_eq(mkdir(src, 0755), 0);
	ck_assert_int_eq(mkdir(ixd, 0755), 0);
	memset(gen, 0, sizeof(gen));
	for (unsigned s = 0; s < NSH; s++)
		write_shard(s);
	write_own_files(ixd);
	snprintf(decoy, sizeof(decoy), "%s/0123456789abcdef.idx", ixd);
	test_spit(decoy, (const uint8_t *)"x", 1);
	own_file(NSMALL, ixd, own, sizeof(own));
	big = test_ino(own);
	notes = 0;

	/* every index read from its file: nothing written, nothing deleted */
	ck_assert(open_check(src, ixd, 0, NSH - 1));
	count_files(ixd, &np, &ni, pack, sizeof(pack));
	ck_assert_uint_eq(np, 0);
	ck_assert_uint_eq(ni, NSH + 1);

	/* a small shard changed, and the pack cannot be written (a directory
	 * holds its name): every file stays */
	ck_assert_ptr_nonnull(realpath(src, real));
	strcat(real, "/x");
	snprintf(pack, sizeof(pack), "%s/%016llx.pack.idx", ixd,
		 (unsigned long long)bfs_ixpack_dir_hash(real));
	ck_assert_int_eq(mkdir(pack, 0755), 0);
	snprintf(blocker, sizeof(blocker), "%s/x", pack);
	test_spit(blocker, (const uint8_t *)"x", 1);
	gen[3]++;
	write_shard(3);
	ck_assert(!open_check(src, ixd, 0, NSH - 1));
	count_files(ixd, &np, &ni, pack, sizeof(pack));
	ck_assert_uint_eq(ni, NSH + 1);

	/* written: the small shards' files are gone, the big one's kept */
	ck_assert_int_eq(unlink(blocker), 0);
	ck_assert_int_eq(rmdir(pack), 0);
	ck_assert(!open_check(src, ixd, 0, NSH - 1));
	count_files(ixd, &np, &ni, pack, sizeof(pack));
	ck_assert_uint_eq(np, 1);
	ck_assert_uint_eq(test_pack_entries(pack), NSMALL);
	ck_assert_uint_eq(ni, 2);
	for (unsigned s = 0; s < NSMALL; s++) {
		own_file(s, ixd, own, sizeof(own));
		ck_assert_msg(!exists(own), "%s", own);
	}
	own_file(NSMALL, ixd, own, sizeof(own));
	ck_assert_uint_eq(test_ino(own), big);
	ck_assert(exists(decoy));
	ck_assert(open_check(src, ixd, 0, NSH - 1));
	ck_assert_int_eq(notes, 0);
	rm_tmpdir();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ixpack");
	TCase *tc = tcase_create("ixpack");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, pack_round_trips_and_checks_each_key);
	tcase_add_test(tc, any_flipped_byte_or_truncation_is_caught);
	tcase_add_test(tc, entries_carry_over_and_an_empty_pack_is_removed);
	tcase_add_test(tc, fuzz_corpus_packs_load);
	tcase_add_test(tc, dataset_packs_small_shards_and_rebuilds_stale_or_corrupt_entries);
	tcase_add_test(tc, datasets_sharing_a_directory_share_its_pack);
	tcase_add_test(tc, a_written_pack_drops_its_shards_files_of_their_own);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
