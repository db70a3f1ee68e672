/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_batch.c — fuzz target for batch assembly: the bytes become a
 * one-shard TFRecord dataset (a memfd), which is opened with schema
 * inference; a batcher is created (batch size and seed from the input's
 * length) and every batch of two epochs (up to a cap) is built. Invariants:
 * a built batch's buffer is exactly the geometry's st_size, the geometry of
 * the build equals the one computed without decoding (the sizes `stat`
 * shows), every tensor lies inside the buffer, and each .npy header has the
 * length the geometry promised. Errors (EIO for a corrupt record) are fine.
 * The epoch view (all/, in chunks of 1-3 rows so that boundaries fall
 * everywhere) must equal the epoch's batches end to end: its fixed rows and
 * values their concatenation, its row_splits/value_splits theirs shifted.
 * A batch built in parts (bfs_build_*, 1 to 5 parts, run last part first)
 * must equal the batch built whole, and fail exactly when it fails.
 *
 * bfs_fuzz_batch() is called by fuzz_replay.c (plain main, every make check)
 * and, built with -DBFS_LIBFUZZER, by libFuzzer's LLVMFuzzerTestOneInput.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "fuzz_memfd.h"
#include "batch.h"
#include "dataset.h"
#include "decodertest.h"
#include "epoch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int bfs_fuzz_batch(const uint8_t *data, size_t size);

#define FUZZ_ASSERT(cond)                                                                          \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "fuzz_batch: %s:%d: %s\n", __FILE__, __LINE__, #cond);     \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

#define MAX_BATCHES 24

static void ignore_corrupt(void *ctx, const char *msg, unsigned skipped)
{
	(void)ctx, (void)msg, (void)skipped;
}

/* Build (e, k) in nparts parts, the last part first. */
static int build_in_parts(const struct bfs_batcher *b, uint64_t e, uint64_t k, unsigned nparts,
			  uint8_t **buf, struct bfs_geom **g)
{
	struct bfs_build *jb = NULL;
	int rc = bfs_build_new_in(&jb, b, e, k, NULL, nparts, NULL);

	if (rc)
		return rc;
	for (unsigned i = bfs_build_nparts(jb); i-- > 0;)
		bfs_build_part(jb, i, ignore_corrupt, NULL);
	return bfs_build_finish(jb, buf, g);
}

static void check_parts(const struct bfs_batcher *b, uint64_t e, uint64_t k, int whole_rc,
			const uint8_t *whole)
{
	unsigned nparts = 1 + (unsigned)((e * 7 + k) % 5);
	struct bfs_geom *g = NULL;
	uint8_t *buf = NULL;
	int rc = build_in_parts(b, e, k, nparts, &buf, &g);

	FUZZ_ASSERT((rc == 0) == (whole_rc == 0));
	if (rc == 0)
		FUZZ_ASSERT(memcmp(buf, whole, g->st_size) == 0);
	free(buf);
	bfs_geom_free(g);
}

static void check_batch(const struct bfs_batcher *b, uint64_t e, uint64_t k)
{
	int rc;
	const struct bfs_plan *p = bfs_batcher_plan(b);
	struct bfs_geom *g = NULL, *bg = NULL;
	uint8_t *buf = NULL;
	char hdr[1024];

	if (bfs_batcher_geom(&g, b, e, k) != 0)
		return;
	FUZZ_ASSERT(g->ntensors == p->ntensors);
	FUZZ_ASSERT(g->batch == bfs_batcher_batch_len(b, k));
	FUZZ_ASSERT(g->st_hlen >= 8 && g->st_hlen % 64 == 0 && g->st_hlen <= g->st_size);
	for (size_t t = 0; t < g->ntensors; t++) {
		const struct bfs_tensor_geom *tg = &g->g[t];
		int n = bfs_npy_header(hdr, sizeof(hdr), p->t[t].dtype, tg->ndim, tg->shape);

		FUZZ_ASSERT(tg->offset >= g->st_hlen && tg->offset <= g->st_size &&
			    tg->nbytes <= g->st_size - tg->offset);
		FUZZ_ASSERT(n > 0 && (uint64_t)n == tg->npy_hlen && n % 64 == 0);
		FUZZ_ASSERT(bfs_npy_size(tg) == tg->npy_hlen + tg->nbytes);
	}
	rc = test_batch_build(&buf, &bg, b, e, k, ignore_corrupt, NULL);
	check_parts(b, e, k, rc, buf);
	if (rc == 0) {
		FUZZ_ASSERT(buf && bg);
		FUZZ_ASSERT(bg->st_size == g->st_size && bg->st_hlen == g->st_hlen);
		FUZZ_ASSERT(bg->ntensors == g->ntensors && bg->batch == g->batch);
		FUZZ_ASSERT(memcmp(buf, g->st_header, g->st_hlen) == 0);
		for (size_t t = 0; t < g->ntensors; t++) {
			FUZZ_ASSERT(bg->g[t].offset == g->g[t].offset);
			FUZZ_ASSERT(bg->g[t].nbytes == g->g[t].nbytes);
			FUZZ_ASSERT(bg->g[t].npy_hlen == g->g[t].npy_hlen);
			FUZZ_ASSERT(bg->g[t].ndim == g->g[t].ndim);
			FUZZ_ASSERT(memcmp(bg->g[t].shape, g->g[t].shape,
					   sizeof(g->g[t].shape[0]) * (size_t)g->g[t].ndim) == 0);
		}
		/* touch every byte: a short buffer shows up under ASan */
		volatile uint8_t x = 0;
		for (uint64_t i = 0; i < bg->st_size; i += 61)
			x ^= buf[i];
		if (bg->st_size)
			x ^= buf[bg->st_size - 1];
		(void)x;
	}
	free(buf);
	bfs_geom_free(bg);
	bfs_geom_free(g);
}

static uint64_t le64(const uint8_t *p)
{
	uint64_t x;
	memcpy(&x, p, 8);
	return x;
}

/* The view of epoch e, tensor by tensor, against the batches end to end. */
static void check_view(const struct bfs_batcher *b, uint64_t e)
{
	const struct bfs_plan *p = bfs_batcher_plan(b);
	uint64_t nb = bfs_batcher_nbatches(b);
	struct bfs_epoch_view *v = NULL;
	uint8_t **bbuf = calloc(nb ? nb : 1, sizeof(*bbuf));
	struct bfs_geom **bg = calloc(nb ? nb : 1, sizeof(*bg));
	bool ok = bbuf && bg;

	for (uint64_t k = 0; k < nb && ok; k++)
		ok = test_batch_build(&bbuf[k], &bg[k], b, e, k, ignore_corrupt, NULL) == 0;
	if (ok && bfs_epoch_view_new(&v, b, e) == 0) {
		FUZZ_ASSERT(v->rows == bfs_batcher_rows(b));
		for (size_t t = 0; t < p->ntensors; t++) {
			uint64_t n = v->geom->g[t].nbytes, pos = 0;
			uint8_t *got = malloc(n ? n : 1), *want = malloc(n ? n : 1);
			enum bfs_role role = p->t[t].role;
			bool split = role == BFS_ROLE_ROW_SPLITS || role == BFS_ROLE_VALUE_SPLITS;
			uint64_t base = 0, w = split ? 8 : 0;

			FUZZ_ASSERT(got && want);
			/* expected: concatenation, splits shifted and joined */
			if (split && n >= 8)
				memset(want, 0, 8);
			for (uint64_t k = 0; k < nb; k++) {
				const uint8_t *src = bbuf[k] + bg[k]->g[t].offset;
				uint64_t m = bg[k]->g[t].nbytes;
				if (!split) {
					FUZZ_ASSERT(w + m <= n);
					memcpy(want + w, src, m);
					w += m;
					continue;
				}
				for (uint64_t i = 8; i + 8 <= m; i += 8) {
					uint64_t x = base + le64(src + i);
					FUZZ_ASSERT(w + 8 <= n);
					memcpy(want + w, &x, 8);
					w += 8;
				}
				if (m >= 8)
					base += le64(src + m - 8);
			}
			FUZZ_ASSERT(w == n);
			/* got: from chunks, in pieces of odd sizes (an epoch with no rows
			 * has no chunks: only offsets, all 0, as the fs serves them) */
			if (v->nchunks == 0) {
				memset(got, 0, n);
				pos = n;
			}
			while (pos < n) {
				uint64_t c = bfs_epoch_view_chunk(v, t, pos), k,
					 want_n = 1 + pos % 13;
				uint8_t *cb = NULL;
				struct bfs_geom *cg = NULL;
				if (test_batch_build(&cb, &cg, b, e, c | BFS_CHUNK, ignore_corrupt,
						     NULL) != 0) {
					/* every batch built, so every chunk must */
					fprintf(stderr,
						"fuzz_batch: chunk %llu of epoch %llu: %s\n",
						(unsigned long long)c, (unsigned long long)e,
						bfs_err_msg());
					abort();
				}
				k = bfs_epoch_view_copy(v, t, c, cb, cg, pos,
							want_n < n - pos ? want_n : n - pos,
							got + pos);
				FUZZ_ASSERT(k > 0);
				pos += k;
				free(cb);
				bfs_geom_free(cg);
			}
			FUZZ_ASSERT(memcmp(got, want, n) == 0);
			free(got);
			free(want);
		}
	}
	for (uint64_t k = 0; bbuf && bg && k < nb; k++) {
		free(bbuf[k]);
		bfs_geom_free(bg[k]);
	}
	free(bbuf);
	free(bg);
	bfs_epoch_view_free(v);
}

int bfs_fuzz_batch(const uint8_t *data, size_t size)
{
	struct bfs_dataset_opts dopt;
	struct bfs_batcher_opts bopt;
	struct bfs_dataset *ds = NULL;
	struct bfs_batcher *b = NULL;
	const struct bfs_schema *s;
	char path[64];
	int fd;

	fd = bfs_fuzz_memfd("bfs_fuzz_batch", data, size, path, sizeof(path));
	if (fd < 0)
		return 0;
	memset(&dopt, 0, sizeof(dopt));
	dopt.comp = BFS_COMP_AUTO;
	dopt.infer = true;
	dopt.follow_symlinks = true; /* /proc/self/fd/N is a link to the memfd */
	if (bfs_dataset_open(&ds, path, &dopt) != 0)
		goto out;
	s = bfs_dataset_schema(ds);
	if (!s)
		goto out;
	memset(&bopt, 0, sizeof(bopt));
	bopt.batch_size = 1 + size % 5;
	bopt.seed = size;
	bopt.shuffle = (size & 1) == 0;
	bopt.drop_remainder = (size & 2) != 0;
	bopt.world = 1;
	bopt.verify = (size & 4) == 0;
	bopt.on_corrupt = (size & 8) ? BFS_ON_CORRUPT_SKIP : BFS_ON_CORRUPT_FAIL;
	bopt.max_batch_bytes = 64u << 20;
	bopt.jobs = 1;
	bopt.chunk_rows = 1 + size % 3;
	if (bfs_batcher_new(&b, ds, s, &bopt) != 0)
		goto out;
	for (uint64_t e = 0; e < 2; e++) {
		uint64_t nb = bfs_batcher_nbatches(b);
		for (uint64_t k = 0; k < nb && k < MAX_BATCHES; k++)
			check_batch(b, e, k);
		if (nb <= MAX_BATCHES)
			check_view(b, e);
		/* past the end: no geometry */
		struct bfs_geom *g = NULL;
		FUZZ_ASSERT(bfs_batcher_geom(&g, b, e, nb) != 0);
		bfs_geom_free(g);
	}
out:
	bfs_batcher_free(b);
	bfs_dataset_close(ds);
	close(fd);
	return 0;
}

#ifdef BFS_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return bfs_fuzz_batch(data, size);
}
#endif
