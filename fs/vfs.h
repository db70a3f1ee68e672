/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vfs.h — the immutable namespace of a mount: names, inode numbers, tree.
 *
 * Nothing here is allocated per file: inode numbers are computed from
 * (epoch, batch, node of the per-batch template), so lookups of any epoch,
 * even one not listed, cost O(1) memory. The per-batch template is built
 * once from the plan's tensor names ('/' in a name makes folders).
 *
 *   1 /            2 README.txt   3 schema.json   4 stats.json   5 errors.txt
 *   16 + r                         rank-R/ (with rank folders)
 *   BASE + e*SPAN                  epoch-E/
 *   BASE + e*SPAN + 1 + b*T + 0    epoch-E/batch-B/
 *   BASE + e*SPAN + 1 + b*T + 1    epoch-E/batch-B.safetensors
 *   BASE + e*SPAN + 1 + b*T + 2+k  template node k inside batch-B/
 *   BASE + e*SPAN + 1 + b*T + 2+N  batch-B/batch-B.cuda (with cuda only; N nodes)
 * with T = 2 + template nodes (+1 with cuda), SPAN = 1 + (batches+1)*T: b = batches names
 * the epoch view, epoch-E/all/ and epoch-E/all.safetensors (vnode.all).
 * With R rank folders, BASE = 16 + R and `e` above reads e*R + r: rank r's
 * epoch e (each rank shows the same number of batches).
 *
 * Thread-safety: immutable after creation.
 */
#ifndef BFS_VFS_H
#define BFS_VFS_H

#include "tensor.h"

#include <stdbool.h>
#include <stdint.h>

enum bfs_vtype {
	BFS_V_ROOT = 1,
	BFS_V_README,
	BFS_V_SCHEMA,
	BFS_V_STATS,
	BFS_V_ERRORS,
	BFS_V_EPOCH,
	BFS_V_BATCH, /* batch-B/ (or all/) */
	BFS_V_SAFETENSORS, /* batch-B.safetensors (or all.safetensors) */
	BFS_V_DIR, /* a folder inside batch-B/ */
	BFS_V_NPY, /* a tensor file */
	BFS_V_CUDA, /* batch-B/batch-B.cuda: the CUDA descriptor (-o cuda) */
	BFS_V_RANK, /* rank-RRRR/ (world=W without rank) */
};

struct bfs_vnode {
	enum bfs_vtype type;
	uint64_t ino;
	uint64_t rank; /* 0 unless the mount has rank folders */
	uint64_t epoch, batch;
	int node; /* template node (BFS_V_DIR, BFS_V_NPY), else -1 */
	int tensor; /* plan tensor index (BFS_V_NPY), else -1 */
	bool all; /* in the epoch view: all/ or all.safetensors */
};

struct bfs_vfs;

/* nranks 0: epochs at the top; else rank-0000/ ... rank-(nranks-1)/ at the
 * top, each holding the epochs (nranks <= 2^15). */
int bfs_vfs_new(struct bfs_vfs **out, const struct bfs_plan *plan, uint64_t nbatches,
		uint64_t epochs_listed, bool cuda, uint64_t nranks);
void bfs_vfs_free(struct bfs_vfs *v);

static inline bool bfs_vnode_is_dir(const struct bfs_vnode *n)
{
	return n->type == BFS_V_ROOT || n->type == BFS_V_EPOCH || n->type == BFS_V_BATCH ||
	       n->type == BFS_V_DIR || n->type == BFS_V_RANK;
}

/* ino → node. -ENOENT if no such inode. */
int bfs_vfs_get(const struct bfs_vfs *v, uint64_t ino, struct bfs_vnode *out);
/* Child `name` of dir. -ENOENT if none, -ENOTDIR if dir is a file. */
int bfs_vfs_lookup(const struct bfs_vfs *v, const struct bfs_vnode *dir, const char *name,
		   struct bfs_vnode *out);
/* The idx-th child of dir (in listing order) and its name. -ENOENT past the end. */
int bfs_vfs_child(const struct bfs_vfs *v, const struct bfs_vnode *dir, uint64_t idx,
		  struct bfs_vnode *out, char *name, size_t name_cap);
/* Parent inode of a directory (for ".."). */
uint64_t bfs_vfs_parent(const struct bfs_vfs *v, const struct bfs_vnode *n);

#endif
