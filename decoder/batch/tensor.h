/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tensor.h — which tensors a schema produces, their shapes and exact byte
 * sizes per batch, and the .npy / .safetensors headers.
 *
 * A batch's bytes are laid out once, as the whole .safetensors file:
 *     [8-byte LE header length][JSON header, space-padded][tensor data...]
 * with tensors in name order and no holes. Each .npy file of the batch is its
 * own small header followed by a slice of that same buffer, so one decoded
 * buffer serves every file of a batch.
 *
 * Does not: decode records (batch.c does), know FUSE or threads.
 * Thread-safety: plans and layouts are immutable after creation.
 */
#ifndef BFS_TENSOR_H
#define BFS_TENSOR_H

#include "common.h"
#include "schema.h"

#define BFS_TENSOR_MAX_DIMS (BFS_MAX_DIMS + 2)

enum bfs_role {
	BFS_ROLE_MAIN = 0, /* F (fixed, padded, feature list) */
	BFS_ROLE_LENGTHS, /* F.lengths, int32 [B] */
	BFS_ROLE_VALUES, /* F.values */
	BFS_ROLE_VALUE_SPLITS, /* F.value_splits, int64 [nvalues+1] */
	BFS_ROLE_ROW_SPLITS, /* F.row_splits, int64 [B+1] */
	/* feature_lists/F.value_lengths of a bytes feature list, int32
	 * [B, max_steps] or [B, max_steps, max_values]: each value's bytes */
	BFS_ROLE_VALUE_LENGTHS,
	/* an augmented image feature's provenance (crop=, flip=: augment.h):
	 * F.crop, int32 [B, 4] (x, y, w, h of the box in the source image's
	 * pixels), and F.flip, uint8 [B] (1: mirrored) */
	BFS_ROLE_CROP,
	BFS_ROLE_FLIP,
};

/* One output tensor of a schema, independent of the batch. */
struct bfs_tensor_tmpl {
	char *name; /* owned; "tokens.lengths", "feature_lists/s" */
	const struct bfs_feature_spec *spec; /* borrowed from the schema */
	enum bfs_role role;
	enum bfs_dtype dtype;
	int ragged_slot; /* index into per-batch ragged totals, or -1 */
};

/* Per-batch ragged totals: for each RAGGED spec one slot (total values);
 * for each RAGGED2 spec two consecutive slots (total values, total bytes). */
struct bfs_plan {
	size_t ntensors;
	struct bfs_tensor_tmpl *t; /* sorted by name */
	size_t nslots; /* ragged total slots */
	const struct bfs_schema *schema; /* borrowed: must outlive the plan */
};

/* Geometry of one tensor within one batch. */
struct bfs_tensor_geom {
	int ndim;
	int64_t shape[BFS_TENSOR_MAX_DIMS];
	uint64_t nbytes;
	uint64_t offset; /* of its data within the .safetensors file */
	uint32_t npy_hlen; /* length of its .npy header (a multiple of 64) */
};

struct bfs_geom {
	uint64_t batch; /* records in the batch (B, or the remainder) */
	uint64_t st_hlen; /* 8 + JSON header length; data starts here */
	uint64_t st_size; /* whole .safetensors file */
	size_t ntensors;
	struct bfs_tensor_geom *g; /* [ntensors], parallel to plan->t */
	char *st_header; /* the first st_hlen bytes of the file */
};

/* Errors: -ENOMEM; -EINVAL if a name would clash. */
int bfs_plan_new(struct bfs_plan **out, const struct bfs_schema *s);
void bfs_plan_free(struct bfs_plan *p);

/* totals: [plan->nslots] (may be NULL when nslots == 0).
 * Errors: -EFBIG when sizes overflow 64 bits or exceed `max_bytes`. */
int bfs_geom_new(struct bfs_geom **out, const struct bfs_plan *p, uint64_t batch,
		 const uint64_t *totals, uint64_t max_bytes);
void bfs_geom_free(struct bfs_geom *l);
/* A copy of g that the caller owns. Errors: -ENOMEM. */
int bfs_geom_dup(struct bfs_geom **out, const struct bfs_geom *g);

/* Write the .npy v1.0 header for (dtype, shape) into dst; returns its length
 * (a multiple of 64), or -EFBIG if dst_cap is too small. */
int bfs_npy_header(char *dst, size_t dst_cap, enum bfs_dtype dt, int ndim, const int64_t *shape);

/* Size of a .npy file of that tensor: header + data. */
static inline uint64_t bfs_npy_size(const struct bfs_tensor_geom *g)
{
	return g->npy_hlen + g->nbytes;
}

#endif
