/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mixfile.h — a mixture file (docs/contract.md, Mixtures): a JSON object
 * whose top-level key "mixture" lists the sources to interleave, each with
 * a name, a SOURCE, a weight and its own options; "epoch" says how long
 * an epoch is; "schedule" changes the weights at given stream positions.
 * Parsed here, checked field by field (every error one line naming the
 * entry); what the fields mean is mix.h's and the mount's business.
 *
 * Implemented in schema_json.c, the decoder's one jansson user.
 * Thread-safety: a parsed file is immutable.
 */
#ifndef BFS_MIXFILE_H
#define BFS_MIXFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum bfs_mixfile_epoch {
	BFS_MIXFILE_FIRST_EXHAUSTED = 0,
	BFS_MIXFILE_ALL_EXHAUSTED,
	BFS_MIXFILE_RECORDS,
};

struct bfs_mixfile_entry {
	char *name, *source;
	char *options; /* NULL: none */
};

struct bfs_mixfile {
	size_t n; /* sources */
	struct bfs_mixfile_entry *e;
	size_t nseg; /* at least 1: the entries' weights are segment 0 */
	uint64_t *from; /* [nseg] first stream position of each segment */
	/* [nseg * n] each weight as an integer number of 10^-9 (the weight
	 * rounded to 9 decimals), segment by segment */
	uint64_t *weights;
	double *given; /* [nseg * n] the weights as written */
	enum bfs_mixfile_epoch epoch;
	uint64_t epoch_records; /* BFS_MIXFILE_RECORDS */
};

/* Errors: -EINVAL with a message naming the line and column of a JSON
 * error, or the entry and the field (no "mixture" key, unknown keys, a
 * weight <= 0, not finite, over 10^9 or under 10^-9, duplicate or empty
 * names, a missing source, a bad epoch or schedule), -ENOMEM. */
int bfs_mixfile_parse(struct bfs_mixfile **out, const char *text, size_t len);
void bfs_mixfile_free(struct bfs_mixfile *m); /* accepts NULL */

#endif
