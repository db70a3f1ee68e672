/* SPDX-License-Identifier: Apache-2.0 */
/*
 * schema.h — the dataset schema: inference from records, JSON in and out,
 * validation of a record against a schema.
 *
 * JSON form (also what `schema=FILE` takes):
 *   {
 *     "features": {
 *       "image/encoded": {"kind": "bytes", "dtype": "uint8", "shape": [224,224,3]},
 *       "label":  {"kind": "int64", "shape": []},
 *       "tokens": {"kind": "int64", "shape": [-1], "max_len": 512, "pad": 0},
 *       "words":  {"kind": "int64", "shape": [-1], "ragged": true},
 *       "name":   {"kind": "bytes", "shape": [-1], "max_len": 40},
 *       "tags":   {"kind": "bytes", "shape": [-1, -1], "ragged": true},
 *       "weight": {"kind": "float", "shape": [], "default": 1.0}
 *     },
 *     "feature_lists": {
 *       "frames": {"kind": "float", "shape": [3], "max_steps": 20}
 *     }
 *   }
 *
 * Layouts (enum bfs_layout) and what each means per record:
 *  FIXED    numeric: exactly prod(shape) values (shape [] = 1 value).
 *           bytes: exactly one value of prod(shape)*itemsize(dtype) bytes,
 *           reinterpreted like tf.io.decode_raw (dtype defaults to uint8).
 *           Missing → `default` broadcast if given, else an error.
 *  PADDED   numeric, shape [-1]: 0..max_len values, padded with `pad`.
 *           bytes, shape [-1]: 0 or 1 value of 0..max_len bytes, padded with 0.
 *           Output [B, max_len] plus NAME.lengths int32 [B].
 *  RAGGED   numeric, shape [-1], "ragged": true: NAME.values + NAME.row_splits.
 *  RAGGED2  bytes, shape [-1,-1], "ragged": true: several values per record:
 *           NAME.values (uint8), NAME.value_splits, NAME.row_splits.
 * Feature lists (SequenceExample): every step of NAME is padded to the fixed
 * step `shape` (numeric: prod(shape) values; bytes: [max_values, max_bytes]
 * or [max_bytes] when every step has at most one value); output
 * feature_lists/NAME [B, max_steps, *shape] + feature_lists/NAME.lengths.
 *
 * Inference (docs/contract.md): same count in every record → FIXED ([] for 1);
 * otherwise (counts differ or missing somewhere) → PADDED with max_len the
 * largest count seen. Bytes: one value of the same length L everywhere →
 * FIXED uint8 [L]; one value of varying length, or missing somewhere →
 * PADDED max_len bytes; more than one value anywhere → RAGGED2.
 * A feature present but with no kind set (`Feature {}`, as TFX and Beam
 * write a missing value) counts as present with no value (length 0); one
 * never seen with a kind set is left out (its type is unknowable) and
 * listed in untyped.
 * A bytes feature whose values are all JPEG (or all PNG) gets "content":
 * "jpeg" (or "png") with "max_width"/"max_height", the largest seen; it
 * is not decoded unless the schema says "decode": "image" (or image=).
 *
 * Image features: {"kind": "bytes", "dtype": "uint8", "shape": [H, W, C],
 * "decode": "image", "resize": "stretch"|"fit"|"crop", "filter":
 * "bilinear"|"area"}; a record's value is one JPEG or PNG (image.h). Their
 * augmentation (augment.h): "crop": "random"|"center"|"none", "flip":
 * "h"|"none", "crop_scale": [A, B], "crop_ratio": [A, B], "crop_resize": N.
 *
 * Does not: read files, know FUSE or threads. Thread-safety: a finished
 * schema is immutable and may be shared read-only.
 */
#ifndef BFS_SCHEMA_H
#define BFS_SCHEMA_H

#include "common.h"
#include "example.h"
#include "image.h"

#define BFS_MAX_DIMS 8
/* Caps for values from a schema file or inference. */
#define BFS_MAX_LEN_CAP ((int64_t)1 << 31)

enum bfs_layout {
	BFS_LAYOUT_FIXED = 0,
	BFS_LAYOUT_PADDED,
	BFS_LAYOUT_RAGGED,
	BFS_LAYOUT_RAGGED2,
};

union bfs_scalar {
	double f;
	int64_t i;
};

struct bfs_feature_spec {
	char *name; /* owned */
	enum bfs_kind kind; /* BYTES, FLOAT or INT64 */
	enum bfs_layout layout;
	enum bfs_dtype dtype; /* element type of the main output tensor */
	int ndim; /* shape as in JSON (per record, or per step for lists) */
	int64_t shape[BFS_MAX_DIMS];
	int64_t max_len; /* PADDED: max values / bytes. Lists: unused */
	union bfs_scalar pad; /* PADDED numeric pad value (default 0) */
	bool has_default; /* FIXED numeric only */
	union bfs_scalar dflt;
	int64_t max_steps; /* feature lists only */
	bool is_list; /* lives under "feature_lists" */
	/* "decode": "image": FIXED bytes, uint8, shape [H, W, C] (C 1, 3 or 4);
	 * each value is a JPEG/PNG decoded and resized to it (image.h) */
	bool image;
	enum bfs_resize_mode resize;
	enum bfs_filter filter;
	/* "crop", "flip", "crop_scale", "crop_ratio", "crop_resize" of an image
	 * feature (augment.h; bfs_augment_init's defaults: none) */
	struct bfs_augment aug;
	/* inference's note on a bytes feature whose values are all JPEG or all
	 * PNG ("content"), with the largest width and height seen */
	enum bfs_image_fmt content;
	int64_t content_w, content_h;
	/* "names": a class label's names, value i is names[i] (TFDS ClassLabel) */
	char **names;
	size_t nnames;
	/* a mixture's provenance (docs/contract.md, Mixtures): _source
	 * (int32) or _record (int64), filled from the row's record number,
	 * never decoded from the record; 0: an ordinary feature */
	int prov;
};

#define BFS_PROV_SOURCE 1
#define BFS_PROV_RECORD 2

struct bfs_schema {
	size_t nfeatures;
	struct bfs_feature_spec *features; /* sorted by name */
	size_t nlists;
	struct bfs_feature_spec *lists; /* sorted by name */
	/* inference's features present only as `Feature {}` (no kind set, as
	 * TFX writes a missing value), in every record that has them: their
	 * kind is unknowable, so they are not served ("untyped_features");
	 * a mixture's merge takes them as that source's empty values */
	size_t nuntyped;
	char **untyped; /* sorted */
};

/* A mixture's facts in schema.json ("mixture"): its sources, their
 * records, the weights as given (with their from_record), the epoch rule
 * and L. */
struct bfs_mix_facts {
	size_t n;
	const char *const *names, *const *sources;
	const uint64_t *records;
	size_t nseg;
	const uint64_t *from;
	const double *weights; /* [nseg * n] */
	/* [nseg * n] the counts of one period as drawn, [nseg] its length and
	 * whether it is the nearest ratio that fits (docs/shuffle.md 8.1) */
	const uint64_t *ratio, *period;
	const bool *approximated;
	const char *epoch; /* "first_exhausted", "all_exhausted" or "records" */
	uint64_t epoch_records; /* L */
};

/* Facts a mount adds to schema.json. Any pointer may be NULL. */
struct bfs_schema_facts {
	uint64_t records; /* of an epoch (a mixture's L) */
	uint64_t source_records; /* of the sources: "source_records" with a mixture */
	uint64_t batch_size;
	uint64_t batches_per_epoch;
	uint64_t seed;
	const char *shuffle;
	uint64_t partitions; /* shuffle=block: the partitions; 0: not written */
	uint64_t rank, world;
	bool no_rank; /* world=W without rank (rank folders): "rank" left out */
	size_t nshards;
	const char *const *shards; /* shard paths */
	const struct bfs_mix_facts *mixture; /* SOURCE a mixture file */
};

void bfs_schema_free(struct bfs_schema *s); /* accepts NULL */

/* Can `name` become a path in a mount? 0 if so; else -EINVAL with the reason
 * in bfs_err_msg(): empty, starts or ends with '/', contains "//", has a
 * "." or ".." component, or is not valid UTF-8 (it is also a JSON key).
 * (Returns 0/-errno, not a bool: test `< 0`.) */
int bfs_schema_name_ok(const char *name);
int bfs_schema_clone(struct bfs_schema **out, const struct bfs_schema *s);
/* Add a copy of feature f (not a list; its name not in s) to s, in name
 * order; the name leaves s->untyped. -ENOMEM. */
int bfs_schema_add_feature(struct bfs_schema *s, const struct bfs_feature_spec *f);
/* Add name to s->untyped (kept sorted, once). -ENOMEM. */
int bfs_schema_untyped_add(struct bfs_schema *s, const char *name);
bool bfs_schema_untyped_has(const struct bfs_schema *s, const char *name);

/* A shape as messages write it: "[224, 224, 3]". */
void bfs_spec_fmt_shape(char *dst, size_t cap, int ndim, const int64_t *shape);
/* The dtype a feature of kind k has when the schema names none. */
enum bfs_dtype bfs_spec_default_dtype(enum bfs_kind k);

/* Number of values per record of a FIXED spec (prod(shape)), or per step.
 * PADDED: max_len; RAGGED / RAGGED2: 0. */
uint64_t bfs_spec_elems(const struct bfs_feature_spec *f);

/* JSON. from_json errors: -EINVAL with a message naming the feature and the
 * field that is wrong. to_json writes a malloc'd NUL-terminated string,
 * pretty-printed, keys sorted; facts may be NULL. */
int bfs_schema_from_json(struct bfs_schema **out, const char *text, size_t len);
int bfs_schema_to_json(char **out, const struct bfs_schema *s,
		       const struct bfs_schema_facts *facts);

/* Add a mixture's provenance features (docs/contract.md, Mixtures):
 * _source (int32 []) and _record (int64 []), filled from each row's record
 * number. -EINVAL naming a feature of that name already there; -ENOMEM. */
int bfs_schema_add_provenance(struct bfs_schema *s);

/* Keep only the named features (comma-separated; a feature list is named
 * "feature_lists/NAME"), and of the untyped names those named. -ENOENT
 * naming an unknown one. */
int bfs_schema_select(struct bfs_schema *s, const char *csv);

/* image=FEATURE:HxW[:C] — make FEATURE (a bytes feature of s) an image
 * feature of that shape (C 3 unless given), stretch + bilinear. -EINVAL
 * naming what is wrong, -ENOENT for an unknown feature; s is unchanged
 * then. */
int bfs_schema_set_image(struct bfs_schema *s, const char *arg);

/* crop=, flip=, crop_scale=, crop_ratio=, crop_resize=: the fields of `a`
 * that mask names (BFS_AUG_SET_*, augment.h) replace every image feature's
 * own (the schema's "crop"... keys); then each image feature's
 * augmentation is checked against its shape. -EINVAL naming the feature or
 * the option and what is wrong (a field given that no image feature
 * uses: crop_scale= without crop=random...); -ENOENT when mask is set and
 * no feature is an image. */
int bfs_schema_set_augment(struct bfs_schema *s, const struct bfs_augment *a, unsigned mask);

/* A TFDS folder's features.json refines an inferred schema: Image features
 * of fully known shape decode at it (their encodingFormat is what the
 * bytes are sniffed for anyway), ClassLabel features get their names
 * (labels_file(ctx, NAME) returns the malloc'd text of NAME.labels.txt, or
 * NULL; else "names" in features.json; else "0".."numClasses-1"),
 * Tensor/Scalar features of fully known shape get that shape when their
 * value count agrees. Nested FeaturesDicts name their features A/B.
 * -EINVAL naming features.json and the field on malformed JSON. */
typedef char *(*bfs_labels_fn)(void *ctx, const char *feature);
int bfs_schema_apply_tfds(struct bfs_schema *s, const char *text, size_t len,
			  bfs_labels_fn labels_file, void *ctx);

/* Inference accumulator. A failed add leaves it as it was (a record can be
 * skipped and inference go on). A name that cannot be a path
 * (bfs_schema_name_ok) is -EBADMSG; more than 100000 distinct names -EFBIG. */
struct bfs_infer;
int bfs_infer_new(struct bfs_infer **out);
void bfs_infer_free(struct bfs_infer *inf);
/* Add one record. -EBADMSG naming the feature if its kind differs from what
 * earlier records had (caller prefixes shard and record). */
int bfs_infer_add(struct bfs_infer *inf, const struct bfs_example *ex);
int bfs_infer_finish(struct bfs_schema **out, const struct bfs_infer *inf);
/* Features (and lists) in at most half of the records: several datasets
 * in one folder, each record padded to all their features? NULL when none
 * (or out of memory), else one line naming the rarest and how many there
 * are (malloc'd). */
char *bfs_infer_mixed(const struct bfs_infer *inf);

/* For RAGGED / RAGGED2 features: the number of values of this record and,
 * for RAGGED2, the total bytes of those values (0 for RAGGED; both 0 when
 * missing or of another kind). */
void bfs_spec_ragged_counts(const struct bfs_feature_spec *f, const struct bfs_example *ex,
			    uint64_t *nvalues, uint64_t *nbytes);

#endif
