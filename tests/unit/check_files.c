/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_files.c — the files of a mount without FUSE (fs/files.h) over a
 * real dataset: every file's size (stat's) is the length of its bytes, and
 * every split of a file into reads at any offsets and lengths gives the
 * same bytes as one read of it; reads past the end give nothing; a batch's
 * .npy data is its .safetensors' tensor bytes (zero-copy path), all/x.npy's
 * data is the epoch's batches of x end to end (view path); stats.json is
 * exactly its JSON; errors.txt grows by what is reported; threads reading
 * the same files get the same bytes.
 */
#include "files.h"

#include "fstest.h"

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RECORDS 300
#define EPOCHS 2
#define MAXFILES 512

struct file {
	char path[256];
	struct bfs_vnode n;
	uint8_t *bytes; /* one read of the whole file */
	uint64_t size;
};

struct files_fx {
	struct fstest t;
	struct bfs_files *f;
	struct file *file;
	size_t nfiles;
};

/* Bytes [off, off + len) of n through bfs_files_read, appended to dst;
 * returns how many. */
static size_t read_into(struct bfs_files *f, const struct bfs_vnode *n, uint64_t off, size_t len,
			uint8_t *dst)
{
	struct bfs_files_read r;
	size_t got = 0;
	int rc = bfs_files_read(f, n, 0, 0, len, off, &r);

	ck_assert_msg(rc == 0, "read at %llu: %d", (unsigned long long)off, rc);
	ck_assert_uint_le(r.count, 2);
	for (unsigned i = 0; i < r.count; i++) {
		memcpy(dst + got, r.p[i].mem, r.p[i].size);
		got += r.p[i].size;
	}
	bfs_files_read_done(f, &r);
	ck_assert_uint_le(got, len);
	return got;
}

static void walk(struct files_fx *x, const struct bfs_vnode *dir, const char *prefix)
{
	struct bfs_vfs *v = bfs_files_vfs(x->f);
	char name[200];
	struct bfs_vnode n;

	for (uint64_t i = 0; bfs_vfs_child(v, dir, i, &n, name, sizeof(name)) == 0; i++) {
		char path[256];

		snprintf(path, sizeof(path), "%s%s", prefix, name);
		if (bfs_vnode_is_dir(&n)) {
			strcat(path, "/");
			walk(x, &n, path);
		} else if (!bfs_files_dynamic(&n)) {
			struct file *fl = &x->file[x->nfiles++];

			ck_assert_uint_lt(x->nfiles, MAXFILES);
			snprintf(fl->path, sizeof(fl->path), "%s", path);
			fl->n = n;
		}
	}
}

static void fx_setup(struct files_fx *x, const char *schema, size_t nranks, bool start)
{
	const struct bfs_batcher *const *ranks;
	struct bfs_fs_config cfg = { 0 };
	struct bfs_vnode root;
	struct stat st;

	memset(x, 0, sizeof(*x));
	fstest_setup(&x->t, RECORDS, schema);
	ranks = (const struct bfs_batcher *const *)x->t.b;
	cfg.ds = x->t.ds;
	cfg.batcher = x->t.b[0];
	cfg.ranks = nranks ? ranks : NULL;
	cfg.nranks = nranks;
	cfg.epochs = EPOCHS;
	cfg.cache_size = 64u << 20;
	cfg.threads = 2;
	cfg.prefetch = 4;
	cfg.readme = "read me\n";
	cfg.schema_json = "{\"x\": 1}\n";
	cfg.cuda_device = -1;
	ck_assert_msg(bfs_files_new(&x->f, &cfg) == 0, "%s", bfs_err_msg());
	if (start)
		ck_assert_int_eq(bfs_cache_start(bfs_files_cache(x->f)), 0);
	x->file = calloc(MAXFILES, sizeof(*x->file));
	ck_assert_int_eq(bfs_vfs_get(bfs_files_vfs(x->f), 1, &root), 0);
	ck_assert_int_eq(root.type, BFS_V_ROOT);
	walk(x, &root, "");
	ck_assert_uint_gt(x->nfiles, 20);
	for (size_t i = 0; i < x->nfiles; i++) {
		struct file *fl = &x->file[i];

		ck_assert_int_eq(bfs_files_size(x->f, &fl->n, NULL, &fl->size, NULL), 0);
		ck_assert_int_eq(bfs_files_stat(x->f, &fl->n, NULL, &st), 0);
		ck_assert_uint_eq((uint64_t)st.st_size, fl->size);
		ck_assert_int_eq(st.st_mode, S_IFREG | 0444);
		fl->bytes = malloc(fl->size + 1);
		/* one read, asked for more than there is */
		ck_assert_msg(read_into(x->f, &fl->n, 0, fl->size + 4096, fl->bytes) == fl->size,
			      "%s: a whole read is not its size", fl->path);
	}
}

static void fx_teardown(struct files_fx *x)
{
	for (size_t i = 0; i < x->nfiles; i++)
		free(x->file[i].bytes);
	free(x->file);
	bfs_files_free(x->f);
	fstest_teardown(&x->t);
}

static struct file *find(struct files_fx *x, const char *path)
{
	for (size_t i = 0; i < x->nfiles; i++)
		if (strcmp(x->file[i].path, path) == 0)
			return &x->file[i];
	ck_abort_msg("no file %s", path);
	return NULL;
}

/* Every offset/length split of every file gives its bytes. */
static void check_splits(struct files_fx *x)
{
	uint64_t seed = 7;

	for (size_t i = 0; i < x->nfiles; i++) {
		struct file *fl = &x->file[i];
		uint8_t *got = malloc(fl->size + 4096);
		uint64_t step = fl->size / 97 + 1, pos = 0;
		static const size_t lens[] = { 1, 2, 7, 10, 64, 127, 128, 129, 1000, 4096 };

		/* many offsets, many lengths: what a read asks for */
		for (uint64_t off = 0; off <= fl->size; off += step)
			for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
				size_t n = read_into(x->f, &fl->n, off, lens[k], got);
				size_t want = fl->size - off < lens[k] ? fl->size - off : lens[k];

				ck_assert_msg(n == want, "%s at %llu+%zu: %zu bytes, want %zu",
					      fl->path, (unsigned long long)off, lens[k], n, want);
				ck_assert_msg(memcmp(got, fl->bytes + off, n) == 0,
					      "%s at %llu+%zu: other bytes", fl->path,
					      (unsigned long long)off, lens[k]);
			}
		/* the file read through in pieces of random sizes */
		while (pos < fl->size) {
			size_t n;

			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			n = read_into(x->f, &fl->n, pos, (size_t)(seed >> 33) % 300 + 1, got + pos);
			ck_assert_uint_gt(n, 0);
			pos += n;
		}
		ck_assert_msg(memcmp(got, fl->bytes, fl->size) == 0, "%s: pieces differ", fl->path);
		/* nothing past the end */
		ck_assert_uint_eq(read_into(x->f, &fl->n, fl->size, 100, got), 0);
		ck_assert_uint_eq(read_into(x->f, &fl->n, fl->size + 12345, 100, got), 0);
		free(got);
	}
}

/* A .npy's data: after its header (version 1: 10 + HEADER_LEN bytes). */
static uint64_t npy_data(const struct file *fl)
{
	uint64_t h;

	ck_assert_uint_ge(fl->size, 10);
	ck_assert_msg(memcmp(fl->bytes, "\x93NUMPY\x01\x00", 8) == 0, "%s: not a .npy v1",
		      fl->path);
	h = 10 + (uint64_t)fl->bytes[8] + ((uint64_t)fl->bytes[9] << 8);
	ck_assert_uint_le(h, fl->size);
	ck_assert_uint_eq(h % 64, 0);
	return h;
}

/* batch-B/T.npy's data is the tensor's bytes in batch-B.safetensors, and
 * all/x.npy's data is the epoch's batches of x, end to end. */
static void check_layout(struct files_fx *x, const char *top, const struct bfs_batcher *b)
{
	const struct bfs_plan *plan = bfs_batcher_plan(b);
	uint64_t nb = bfs_batcher_nbatches(b);

	for (uint64_t e = 0; e < EPOCHS; e++) {
		char path[256];
		struct file *all;
		uint64_t apos;

		snprintf(path, sizeof(path), "%sepoch-%04llu/all/x.npy", top,
			 (unsigned long long)e);
		all = find(x, path);
		apos = npy_data(all);
		for (uint64_t i = 0; i < nb; i++) {
			struct bfs_geom *g = NULL;
			struct file *st, *npy;

			ck_assert_int_eq(bfs_batcher_geom(&g, b, e, i), 0);
			snprintf(path, sizeof(path), "%sepoch-%04llu/batch-%06llu.safetensors", top,
				 (unsigned long long)e, (unsigned long long)i);
			st = find(x, path);
			ck_assert_uint_eq(st->size, g->st_size);
			for (size_t t = 0; t < plan->ntensors; t++) {
				uint64_t h;

				snprintf(path, sizeof(path), "%sepoch-%04llu/batch-%06llu/%s.npy",
					 top, (unsigned long long)e, (unsigned long long)i,
					 plan->t[t].name);
				npy = find(x, path);
				h = npy_data(npy);
				ck_assert_uint_eq(npy->size - h, g->g[t].nbytes);
				ck_assert_msg(memcmp(npy->bytes + h, st->bytes + g->g[t].offset,
						     g->g[t].nbytes) == 0,
					      "%s: not the safetensors' bytes", path);
				if (strcmp(plan->t[t].name, "x") == 0) {
					ck_assert_uint_le(apos + g->g[t].nbytes, all->size);
					ck_assert_msg(memcmp(all->bytes + apos, npy->bytes + h,
							     g->g[t].nbytes) == 0,
						      "all/x.npy: batch %llu differs",
						      (unsigned long long)i);
					apos += g->g[t].nbytes;
				}
			}
			bfs_geom_free(g);
		}
		ck_assert_uint_eq(apos, all->size);
	}
}

START_TEST(fixed_rows_sizes_and_splits)
{
	struct files_fx x;

	fx_setup(&x, FSTEST_FIXED, 0, false);
	ck_assert_uint_eq(find(&x, "README.txt")->size, 8);
	ck_assert(memcmp(find(&x, "README.txt")->bytes, "read me\n", 8) == 0);
	check_splits(&x);
	check_layout(&x, "", x.t.b[0]);
	fx_teardown(&x);
}
END_TEST

START_TEST(ragged_rows_ranks_and_workers)
{
	struct files_fx x;

	fx_setup(&x, FSTEST_RAGGED, 2, true);
	check_splits(&x);
	check_layout(&x, "rank-0000/", x.t.b[0]);
	check_layout(&x, "rank-0001/", x.t.b[1]);
	fx_teardown(&x);
}
END_TEST

/* Read the dynamic file n whole (its current snapshot, as after a stat). */
static char *read_dynamic(struct bfs_files *f, const struct bfs_vnode *n, uint64_t *size)
{
	char *buf;

	ck_assert_int_eq(bfs_files_size(f, n, NULL, size, NULL), 0);
	buf = calloc(1, *size + 4096);
	ck_assert_uint_eq(read_into(f, n, 0, *size + 4096, (uint8_t *)buf), *size);
	return buf;
}

START_TEST(stats_json_is_exactly_its_json_and_errors_grow)
{
	struct files_fx x;
	struct bfs_vnode stats, errors;
	struct bfs_snapshot *own = NULL;
	uint64_t size, size2, gen1 = 0, gen2 = 0;
	char *text, *end;
	struct file *fl;

	fx_setup(&x, FSTEST_FIXED, 0, false);
	ck_assert_int_eq(bfs_vfs_get(bfs_files_vfs(x.f), 4, &stats), 0);
	ck_assert_int_eq(stats.type, BFS_V_STATS);
	ck_assert_int_eq(bfs_vfs_get(bfs_files_vfs(x.f), 5, &errors), 0);
	ck_assert_int_eq(errors.type, BFS_V_ERRORS);
	text = read_dynamic(x.f, &stats, &size);
	/* the JSON and its newline, nothing after the closing brace */
	ck_assert_uint_ge(size, 2);
	ck_assert_msg(text[size - 1] == '\n' && text[size - 2] == '}',
		      "stats.json ends with %d after its brace", text[size - 1]);
	ck_assert_ptr_null(strstr(text, "  \n"));
	end = strrchr(text, '}');
	ck_assert_int_eq(end - text, (long)size - 2);
	ck_assert_ptr_nonnull(strstr(text, "\"reads\": "));
	free(text);
	/* a read moves the counters; each size is a fresh snapshot's */
	fl = find(&x, "epoch-0000/batch-000000.safetensors");
	ck_assert_int_eq(bfs_files_size(x.f, &stats, NULL, &size, &gen1), 0);
	(void)read_into(x.f, &fl->n, 0, 100, fl->bytes);
	ck_assert_int_eq(bfs_files_size(x.f, &stats, NULL, &size2, &gen2), 0);
	ck_assert_uint_gt(gen2, gen1);
	text = read_dynamic(x.f, &stats, &size);
	ck_assert_ptr_nonnull(strstr(text, "\"bytes_read\": "));
	free(text);
	/* one opened with an open request: its own snapshot, exact too */
	ck_assert_int_eq(bfs_files_open_snapshot(x.f, &stats, &own), 0);
	ck_assert_uint_eq(own->len, strrchr(own->text, '}') - own->text + 2);
	bfs_files_release(x.f, &stats, (uint64_t)(uintptr_t)own);
	/* errors.txt: what is reported, once */
	text = read_dynamic(x.f, &errors, &size);
	ck_assert_uint_eq(size, 0);
	free(text);
	bfs_files_report(x.f, "shard-1: record 3: bad", 0);
	bfs_files_report(x.f, "shard-1: record 3: bad", 0);
	text = read_dynamic(x.f, &errors, &size);
	ck_assert_ptr_nonnull(strstr(text, "shard-1: record 3: bad\n"));
	ck_assert_uint_eq(size, strlen("shard-1: record 3: bad\n"));
	free(text);
	fx_teardown(&x);
}
END_TEST

/* Size of stats.json as asked by reader tid (reading: on its way to a
 * read); *gen its snapshot. */
static uint64_t asked(struct files_fx *x, const struct bfs_vnode *n, uint64_t tid, bool reading,
		      uint64_t *gen)
{
	struct bfs_files_asker who = { .reader = tid, .reading = reading };
	uint64_t size = 0;

	ck_assert_int_eq(bfs_files_size(x->f, n, &who, &size, gen), 0);
	return size;
}

/* The snapshot reader tid reads, whole: its length. */
static uint64_t read_as(struct files_fx *x, const struct bfs_vnode *n, uint64_t tid, char *buf)
{
	struct bfs_files_read r;
	uint64_t len = 0;

	ck_assert_int_eq(bfs_files_read(x->f, n, tid, 0, 1u << 16, 0, &r), 0);
	for (unsigned i = 0; i < r.count; i++) {
		memcpy(buf + len, r.p[i].mem, r.p[i].size);
		len += r.p[i].size;
	}
	bfs_files_read_done(x->f, &r);
	return len;
}

/* Ten bytes of another file, read by reader tid. */
static void read_other(struct files_fx *x, const struct bfs_vnode *n, uint64_t tid)
{
	struct bfs_files_read r;

	ck_assert_int_eq(bfs_files_read(x->f, n, tid, 0, 10, 0, &r), 0);
	bfs_files_read_done(x->f, &r);
}

START_TEST(a_reader_reading_on_keeps_its_snapshot)
{
	struct files_fx x;
	struct bfs_vnode stats;
	struct file *b0, *b1;
	uint64_t g1, g2, g3, g4, len1, len2;
	char *buf = malloc(1u << 16), *first = malloc(1u << 16);

	fx_setup(&x, FSTEST_FIXED, 0, false);
	ck_assert_int_eq(bfs_vfs_get(bfs_files_vfs(x.f), 4, &stats), 0);
	b0 = find(&x, "epoch-0000/batch-000000.safetensors");
	b1 = find(&x, "epoch-0000/batch-000001/x.npy");
	/* reader 7: a stat, then reads */
	len1 = asked(&x, &stats, 7, false, &g1);
	ck_assert_uint_eq(read_as(&x, &stats, 7, first), len1);
	/* meanwhile reader 8 reads batches: stats.json changes */
	read_other(&x, &b0->n, 8);
	read_other(&x, &b1->n, 8);
	len2 = asked(&x, &stats, 8, false, &g2);
	/* while reader 7 reads, the size is its snapshot's: padded, or its */
	ck_assert_uint_eq(len2, len1);
	ck_assert_uint_ge(g2, g1);
	ck_assert_uint_eq(read_as(&x, &stats, 8, buf), len2);
	ck_assert(buf[len2 - 1] == '\n' && memchr(buf, '}', len2) != NULL);
	/* reader 7 reads on: the same snapshot, so its end is where it was */
	ck_assert_uint_eq(asked(&x, &stats, 7, true, &g3), len1);
	ck_assert_uint_eq(g3, g1);
	ck_assert_uint_eq(read_as(&x, &stats, 7, buf), len1);
	ck_assert(memcmp(buf, first, len1) == 0);
	/* a stat by it, or a read of another file by it: a fresh snapshot */
	(void)asked(&x, &stats, 7, false, &g3);
	ck_assert_uint_gt(g3, g2);
	(void)read_as(&x, &stats, 7, buf);
	read_other(&x, &b0->n, 7);
	(void)asked(&x, &stats, 7, true, &g4);
	ck_assert_uint_gt(g4, g3);
	/* and after a pause */
	(void)read_as(&x, &stats, 7, buf);
	usleep(BFS_DYNFILES_CONTINUE_MS * 1000 + 50000);
	(void)asked(&x, &stats, 7, true, &g3);
	ck_assert_uint_gt(g3, g4);
	/* nobody else reading (for over 50 ms): exactly the JSON */
	usleep(60000);
	len2 = asked(&x, &stats, 9, false, &g4);
	ck_assert_uint_eq(read_as(&x, &stats, 9, buf), len2);
	ck_assert(buf[len2 - 2] == '}' && buf[len2 - 1] == '\n');
	/* a reader not seen reads the snapshot last sized */
	ck_assert_uint_eq(read_as(&x, &stats, 0, buf), asked(&x, &stats, 0, false, &g4));
	free(buf);
	free(first);
	fx_teardown(&x);
}
END_TEST

struct reader {
	struct files_fx *x;
	unsigned id;
	int bad;
};

static void *reader_main(void *arg)
{
	struct reader *rd = arg;
	uint8_t *buf = malloc(1u << 20);

	for (unsigned round = 0; round < 3; round++)
		for (size_t k = 0; k < rd->x->nfiles; k++) {
			size_t i = (k * 7 + rd->id * 13 + round) % rd->x->nfiles;
			struct file *fl = &rd->x->file[i];
			struct bfs_files_read r;
			size_t got = 0;

			if (bfs_files_read(rd->x->f, &fl->n, rd->id + 1, 0, fl->size, 0, &r) != 0)
				rd->bad++;
			for (unsigned p = 0; p < r.count; p++) {
				memcpy(buf + got, r.p[p].mem, r.p[p].size);
				got += r.p[p].size;
			}
			bfs_files_read_done(rd->x->f, &r);
			if (got != fl->size || memcmp(buf, fl->bytes, got) != 0)
				rd->bad++;
		}
	free(buf);
	return NULL;
}

START_TEST(threads_read_the_same_bytes)
{
	struct files_fx x;
	struct reader rd[4];
	pthread_t th[4];

	fx_setup(&x, FSTEST_RAGGED, 0, true);
	for (unsigned i = 0; i < 4; i++) {
		rd[i] = (struct reader){ .x = &x, .id = i };
		ck_assert_int_eq(pthread_create(&th[i], NULL, reader_main, &rd[i]), 0);
	}
	for (unsigned i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(rd[i].bad, 0);
	}
	fx_teardown(&x);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("files");
	TCase *tc = tcase_create("files");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, fixed_rows_sizes_and_splits);
	tcase_add_test(tc, ragged_rows_ranks_and_workers);
	tcase_add_test(tc, stats_json_is_exactly_its_json_and_errors_grow);
	tcase_add_test(tc, a_reader_reading_on_keeps_its_snapshot);
	tcase_add_test(tc, threads_read_the_same_bytes);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
