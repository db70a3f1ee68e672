/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_mixfile.c — fuzz target for mixture files (schema_json.h) and the
 * mixture order they make (mix.h).
 *
 * bfs_fuzz_mixfile() parses the input as a mixture file; if that works,
 * makes the mixture over made-up record counts, checks each period drawn
 * against the weights (their own ratio, or every share within 10^-6), then
 * replays two periods of every segment (at most 2 * MAX_W positions):
 * each position's (source, draw) must be the replay's count, each prefix
 * within one record of its share, and a record inside its source. Any
 * broken invariant aborts. Built with -DBFS_LIBFUZZER it is also a
 * libFuzzer target; tests/fuzz/fuzz_replay.c replays the corpus under gcc.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "mix.h"
#include "schema_json.h"

int bfs_fuzz_mixfile(const uint8_t *data, size_t size);

#define FUZZ_ASSERT(cond)                                                                          \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "fuzz_mixfile: %s:%d: %s (%s)\n", __FILE__, __LINE__,      \
				#cond, bfs_err_msg());                                             \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

#define MAX_W 4096 /* a period replayed at most */

static uint64_t gcd64(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t t = a % b;
		a = b;
		b = t;
	}
	return a;
}

static void replay(const struct bfs_mix *m, size_t k, size_t seg, uint64_t from, uint64_t npos,
		   const uint64_t *nrec)
{
	uint64_t W, c[8], c0[8];
	const uint64_t *w = bfs_mix_weights(m, seg, &W);

	for (size_t s = 0; s < k; s++)
		c0[s] = c[s] = bfs_mix_count(m, from, s);
	for (uint64_t i = 0; i < npos; i++) {
		uint64_t draw, rec, local;
		size_t s, s2;

		bfs_mix_at(m, from + i, &s, &draw);
		FUZZ_ASSERT(s < k && draw == c[s]);
		c[s]++;
		for (size_t t = 0; t < k; t++) {
			__int128 d = (__int128)(c[t] - c0[t]) * W - (__int128)(i + 1) * w[t];
			FUZZ_ASSERT(d < (__int128)W && d > -(__int128)W);
		}
		rec = bfs_mix_record(m, from + i);
		bfs_mix_source_of(m, rec, &s2, &local);
		FUZZ_ASSERT(s2 == s && local < nrec[s]);
	}
}

/* A segment's period as drawn: whole (its counts sum to it), within the
 * limits; its weights' own ratio reduced, or, when that does not fit,
 * every share within 10^-6 of the weights' (docs/shuffle.md 8.1). */
static void check_shares(const struct bfs_mixfile *f, const struct bfs_mix *m, size_t seg,
			 const uint64_t *w, uint64_t W)
{
	const uint64_t *asked = f->weights + seg * f->n;
	unsigned __int128 A = 0;
	uint64_t sum = 0, g = 0;

	for (size_t s = 0; s < f->n; s++) {
		A += asked[s];
		sum += w[s];
		g = gcd64(g, asked[s]);
		FUZZ_ASSERT(w[s] >= 1);
	}
	FUZZ_ASSERT(sum == W && W <= BFS_MIX_MAX_PERIOD && W * f->n <= BFS_MIX_MAX_CELLS);
	for (size_t s = 0; s < f->n; s++) {
		unsigned __int128 a = (unsigned __int128)w[s] * A * 1000000,
				  b = (unsigned __int128)asked[s] * W * 1000000;

		if (bfs_mix_approximated(m, seg))
			FUZZ_ASSERT((a > b ? a - b : b - a) <= (unsigned __int128)W * A);
		else
			FUZZ_ASSERT(w[s] == asked[s] / g);
	}
}

int bfs_fuzz_mixfile(const uint8_t *data, size_t size)
{
	struct bfs_mixfile *f = NULL;
	struct bfs_mix *m = NULL;
	const char *names[8];
	uint64_t nrec[8];

	if (bfs_mixfile_parse(&f, (const char *)data, size) != 0)
		return 0;
	FUZZ_ASSERT(f->n >= 1 && f->nseg >= 1 && f->from[0] == 0);
	if (f->n > 8 || f->nseg > 4)
		goto out;
	for (size_t s = 0; s < f->n; s++) {
		names[s] = f->e[s].name;
		nrec[s] = 1 + (s * 7 + size) % 23;
	}
	struct bfs_mix_spec sp = {
		.nsrc = f->n,
		.names = names,
		.nrecords = nrec,
		.nseg = f->nseg,
		.from = f->from,
		.weights = f->weights,
		.epoch = (enum bfs_mix_epoch)f->epoch,
		.epoch_records = f->epoch_records,
		.seed = size,
		.shuffle = size % 2 == 0,
	};
	if (bfs_mix_new(&m, &sp) != 0)
		goto out;
	FUZZ_ASSERT(bfs_mix_epoch_len(m) >= 1);
	for (size_t i = 0; i < f->nseg; i++) {
		uint64_t W;
		const uint64_t *w = bfs_mix_weights(m, i, &W);
		uint64_t span = i + 1 < f->nseg ? f->from[i + 1] - f->from[i] : 2 * W;

		check_shares(f, m, i, w, W);
		if (span > 2 * W)
			span = 2 * W;
		replay(m, f->n, i, f->from[i], span < 2 * MAX_W ? span : 2 * MAX_W, nrec);
	}
out:
	bfs_mix_free(m);
	bfs_mixfile_free(f);
	return 0;
}

#ifdef BFS_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return bfs_fuzz_mixfile(data, size);
}
#endif
