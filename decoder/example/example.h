/* SPDX-License-Identifier: Apache-2.0 */
/*
 * example.h — tf.train.Example / tf.train.SequenceExample → feature values.
 *
 * Every record is parsed as a SequenceExample: field 1 (`features` of an
 * Example, `context` of a SequenceExample) is a Features map, field 2
 * (`feature_lists`) is a FeatureLists map; an Example simply has no field 2.
 * The reference decoder is protobuf-c (generated from decoder/proto/); it
 * accepts packed and unpacked repeated scalars and skips unknown fields.
 * Duplicate map keys: the last one wins. A Feature with no kind set
 * (`Feature {}`) is reported with kind BFS_KIND_NONE and count 0: missing.
 *
 * Does not: know schemas, tensors, files or threads.
 * Thread-safety: independent objects may be used from different threads.
 */
#ifndef BFS_EXAMPLE_H
#define BFS_EXAMPLE_H

#include "common.h"

struct bfs_bytes {
	const uint8_t *data;
	size_t len;
};

/* The values of one tf.train.Feature. Exactly one pointer is set, by kind. */
struct bfs_values {
	enum bfs_kind kind;
	size_t count;
	const float *f;
	const int64_t *i;
	const struct bfs_bytes *b;
};

struct bfs_feature {
	const char *name; /* NUL-terminated */
	struct bfs_values v;
};

struct bfs_feature_list {
	const char *name;
	size_t nsteps;
	const struct bfs_values *steps; /* [nsteps] */
};

/* A decoded record. Arrays are sorted by name (strcmp), duplicates removed
 * (last wins). All pointers borrow from the object itself. */
struct bfs_example {
	size_t nfeatures;
	const struct bfs_feature *features;
	size_t nlists;
	const struct bfs_feature_list *lists;
	bool is_sequence; /* field 2 was present */
};

/* Decode data[0..len). The result owns its memory (it may point into
 * internal copies; it does not keep `data` alive — callers may free data).
 * Errors: -EBADMSG "not a tf.train.Example/SequenceExample protobuf" with
 * detail, -ENOMEM. */
int bfs_example_decode(struct bfs_example **out, const uint8_t *data, size_t len);
void bfs_example_free(struct bfs_example *ex); /* accepts NULL */

/* The two decoders behind bfs_example_decode, exposed for the differential
 * test and fuzz target: the reference (protobuf-c; every error named) and
 * the fast one (wire.c; returns -EAGAIN for any shape it leaves to the
 * reference). Where the fast one succeeds, both give the same values. */
int bfs_example_decode_ref(struct bfs_example **out, const uint8_t *data, size_t len);
int bfs_example_decode_fast(struct bfs_example **out, const uint8_t *data, size_t len);

/* Binary search by name; NULL if absent. Borrowed. */
const struct bfs_values *bfs_example_find(const struct bfs_example *ex, const char *name);
const struct bfs_feature_list *bfs_example_find_list(const struct bfs_example *ex,
						     const char *name);

/* Write a human-readable text form (like protobuf text format, one feature
 * per line, values elided after `max_values`) to a malloc'd string. */
int bfs_example_to_text(char **out, const struct bfs_example *ex, size_t max_values);

#endif
