/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mix.h — the order of a mixture (docs/shuffle.md, section 8): several
 * sources, each an endless sequence of passes (pass k is that source's own
 * permutation), interleaved by weight into one endless stream whose
 * epochs are slices of L records.
 *
 * The interleave of a weight segment is periodic: with integer weights
 * w_s reduced by their gcd and W their sum, the W positions of one period
 * are laid out once (earliest deadline first, docs/shuffle.md) into a
 * table of one byte per position and a count per source every 64
 * positions, so any stream position maps to (source, draw number within
 * that source) in constant time, without replaying the stream before it.
 * For every prefix of n positions of a segment and every source s, the
 * count taken from s differs from n * w_s / W by less than one.
 *
 * Records are numbered as the union of the sources: source s's records
 * are first[s] ... first[s] + nrecords[s] - 1 (its shards in its SOURCE
 * order), so one global record number says both the source and the
 * record within it.
 *
 * Does not: read records, parse the mixture file. Thread-safety: a mix is
 * immutable after bfs_mix_new; every function may run on many threads.
 */
#ifndef BFS_MIX_H
#define BFS_MIX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Limits: sources in a mixture; positions of one period (W after the gcd
 * reduction); W times the sources (the size of a segment's tables). */
#define BFS_MIX_MAX_SOURCES 255
#define BFS_MIX_MAX_PERIOD ((uint64_t)1 << 24)
#define BFS_MIX_MAX_CELLS ((uint64_t)1 << 28)

enum bfs_mix_epoch {
	BFS_MIX_FIRST_EXHAUSTED = 0, /* the most records no source needs a second pass for */
	BFS_MIX_ALL_EXHAUSTED, /* the fewest in which every source completes a pass */
	BFS_MIX_RECORDS, /* a given number */
};

struct bfs_mix_spec {
	size_t nsrc;
	const char *const *names; /* [nsrc]: each source's name (seeds its passes) */
	const uint64_t *nrecords; /* [nsrc]: records of each source, at least 1 */
	size_t nseg; /* weight segments, at least 1 */
	const uint64_t *from; /* [nseg]: first stream position of each; from[0] == 0, increasing */
	const uint64_t *weights; /* [nseg * nsrc]: positive integers, segment by segment */
	enum bfs_mix_epoch epoch;
	uint64_t epoch_records; /* BFS_MIX_RECORDS: L */
	uint64_t seed;
	bool shuffle; /* false: each pass in file order (shuffle=none) */
};

struct bfs_mix;

/* A segment's weights, reduced by their gcd, whose period passes the
 * limits above are replaced by the nearest ratio that fits, every share
 * within 10^-6 of the weights' (docs/shuffle.md 8.1).
 * Errors: -EINVAL (a weight of 0, segments out of order, an empty epoch,
 * no source), -EFBIG (no ratio that fits keeps the shares within 10^-6, an
 * epoch past 2^62 records), -ENOMEM. The message names the segment or
 * source. */
int bfs_mix_new(struct bfs_mix **out, const struct bfs_mix_spec *spec);
void bfs_mix_free(struct bfs_mix *m); /* accepts NULL */

uint64_t bfs_mix_epoch_len(const struct bfs_mix *m); /* L */
uint64_t bfs_mix_nrecords(const struct bfs_mix *m); /* of all sources */
/* Segment i's weights after the gcd reduction (nsrc of them, borrowed) and
 * their sum W. */
const uint64_t *bfs_mix_weights(const struct bfs_mix *m, size_t seg, uint64_t *W);

/* Whether segment seg's weights are the nearest ratio whose period fits
 * (docs/shuffle.md 8.1), not the weights' own. */
bool bfs_mix_approximated(const struct bfs_mix *m, size_t seg);

/* Stream position n → the source it draws from and the draw's number
 * within that source (0, 1, 2, ...: draw k is position k mod N_s of pass
 * k / N_s). */
void bfs_mix_at(const struct bfs_mix *m, uint64_t n, size_t *src, uint64_t *draw);
/* Draws taken from source s by the first n positions of the stream. */
uint64_t bfs_mix_count(const struct bfs_mix *m, uint64_t n, size_t s);
/* The global record of stream position n. */
uint64_t bfs_mix_record(const struct bfs_mix *m, uint64_t n);
/* out[i] = the global record at position pos[i] of epoch `epoch` (stream
 * position epoch * L + pos[i], modulo 2^64); out may be pos. */
void bfs_mix_records(const struct bfs_mix *m, uint64_t epoch, const uint64_t *pos, size_t n,
		     uint64_t *out);
/* A global record → its source and its index there (file order). */
void bfs_mix_source_of(const struct bfs_mix *m, uint64_t rec, size_t *src, uint64_t *local);

#endif
