/* SPDX-License-Identifier: Apache-2.0 */
/*
 * schema_json.h — the JSON the decoder reads besides the schema's
 * (schema.h), through its jansson firewall (schema_json.c):
 *
 *  - a mixture file (docs/contract.md, Mixtures): a JSON object whose
 *    top-level key "mixture" lists the sources to interleave, each with a
 *    name, a SOURCE, a weight and its own options; "epoch" says how long
 *    an epoch is; "schedule" changes the weights at given stream
 *    positions. Parsed here, checked field by field (every error one line
 *    naming the entry); what the fields mean is mix.h's and the mount's
 *    business.
 *  - a JSON object's members, in order (stats.json, as `batchfs stats`
 *    and `top` read it): each value's number, and its JSON text to pass
 *    on.
 *
 * Thread-safety: any thread; what they return is the caller's.
 */
#ifndef BFS_SCHEMA_JSON_H
#define BFS_SCHEMA_JSON_H

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

/* One member of a JSON object. */
struct bfs_json_member {
	char *key;
	/* the value as JSON text: a string quoted and escaped, an object or an
	 * array on one line ({"a": 1, "b": [2, 3]}), a real number with up to
	 * 15 significant digits */
	char *text;
	double num; /* a number's value; true 1, false 0 */
	bool isnum; /* a number, true or false (not a string, null, object, array) */
};

/* text[0, len) as one JSON object, which spaces and NUL bytes may follow:
 * its members in the order written, *out[0, *n) (bfs_json_members_free).
 * -EBADMSG with "not a JSON object (byte N)" when it is another value, or
 * "not a flat JSON object: WHY at byte N" when it is not JSON; -ENOMEM. */
int bfs_json_members(struct bfs_json_member **out, size_t *n, const char *text, size_t len);
void bfs_json_members_free(struct bfs_json_member *m, size_t n); /* accepts NULL */

#endif
