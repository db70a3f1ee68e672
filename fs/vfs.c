/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vfs.c — computed inode numbers and the per-batch template tree (vfs.h).
 */
#include "vfs.h"

#include "keymap.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RANK0 16 /* the first rank folder's inode */

struct tnode {
	char *name; /* one path component; files end in ".npy" */
	int parent; /* -1: the batch folder */
	int tensor; /* -1: a folder */
};

struct bfs_vfs {
	uint64_t nbatches, epochs;
	uint64_t nranks, stride; /* rank folders (0: none); stride max(1, nranks) */
	uint64_t base; /* the first epoch's inode */
	uint64_t T, span;
	bool cuda; /* batch folders hold batch-B.cuda, after the template nodes */
	size_t nnodes;
	struct tnode *nodes; /* in plan order (names sorted) */
	/* (parent, name) -> node in O(1), however many features: open
	 * addressing over node index + 1 (0: empty), at most half full */
	int *htab;
	size_t hmask;
	/* each folder's children in node order: kids[kid_start[p + 1] ..
	 * kid_start[p + 2]) for folder node p, the batch folder being p = -1 */
	int *kids;
	size_t *kid_start;
};

static const char *const top_names[] = { "README.txt", "schema.json", "stats.json", "errors.txt" };

void bfs_vfs_free(struct bfs_vfs *v)
{
	if (!v)
		return;
	for (size_t i = 0; i < v->nnodes; i++)
		free(v->nodes[i].name);
	free(v->nodes);
	free(v->htab);
	free(v->kids);
	free(v->kid_start);
	free(v);
}

static size_t node_hash(int parent, const char *name, size_t len)
{
	return (size_t)bfs_keymap_mix(bfs_keymap_hash((const uint8_t *)name, len) +
				      (uint64_t)(parent + 1));
}

static int find_node(const struct bfs_vfs *v, int parent, const char *name)
{
	size_t len = strlen(name);

	if (!v->htab)
		return -1;
	for (size_t k = node_hash(parent, name, len) & v->hmask; v->htab[k];
	     k = (k + 1) & v->hmask) {
		const struct tnode *t = &v->nodes[v->htab[k] - 1];
		if (t->parent == parent && strcmp(t->name, name) == 0)
			return v->htab[k] - 1;
	}
	return -1;
}

static void hash_put(struct bfs_vfs *v, int n)
{
	const struct tnode *t = &v->nodes[n];
	size_t k = node_hash(t->parent, t->name, strlen(t->name)) & v->hmask;

	while (v->htab[k])
		k = (k + 1) & v->hmask;
	v->htab[k] = n + 1;
}

/* Keep the table at most half full once node n is added. */
static int hash_add(struct bfs_vfs *v, int n)
{
	if (!v->htab || 2 * (size_t)(n + 1) > v->hmask + 1) {
		size_t size = v->htab ? 2 * (v->hmask + 1) : 64;
		int *t = calloc(size, sizeof(*t));
		if (!t)
			return -ENOMEM;
		free(v->htab);
		v->htab = t;
		v->hmask = size - 1;
		for (int i = 0; i < n; i++)
			hash_put(v, i);
	}
	hash_put(v, n);
	return 0;
}

/* The children lists, once every node is in. */
static int index_kids(struct bfs_vfs *v)
{
	size_t *fill;

	v->kids = calloc(v->nnodes + 1, sizeof(*v->kids));
	v->kid_start = calloc(v->nnodes + 2, sizeof(*v->kid_start));
	fill = calloc(v->nnodes + 1, sizeof(*fill));
	if (!v->kids || !v->kid_start || !fill) {
		free(fill);
		return -ENOMEM;
	}
	for (size_t i = 0; i < v->nnodes; i++)
		v->kid_start[v->nodes[i].parent + 2]++;
	for (size_t p = 1; p < v->nnodes + 2; p++)
		v->kid_start[p] += v->kid_start[p - 1];
	for (size_t i = 0; i < v->nnodes; i++) {
		size_t p = (size_t)(v->nodes[i].parent + 1);
		v->kids[v->kid_start[p] + fill[p]++] = (int)i;
	}
	free(fill);
	return 0;
}

static int add_node(struct bfs_vfs *v, size_t *cap, int parent, const char *name, size_t len,
		    int tensor)
{
	if (v->nnodes == *cap) {
		size_t nc = *cap ? *cap * 2 : 16;
		void *n = realloc(v->nodes, nc * sizeof(*v->nodes));
		if (!n)
			return -ENOMEM;
		v->nodes = n;
		*cap = nc;
	}
	v->nodes[v->nnodes].name = strndup(name, len);
	if (!v->nodes[v->nnodes].name)
		return -ENOMEM;
	v->nodes[v->nnodes].parent = parent;
	v->nodes[v->nnodes].tensor = tensor;
	if (hash_add(v, (int)v->nnodes) != 0) {
		free(v->nodes[v->nnodes].name);
		return -ENOMEM;
	}
	return (int)v->nnodes++;
}

int bfs_vfs_new(struct bfs_vfs **out, const struct bfs_plan *plan, uint64_t nbatches,
		uint64_t epochs, bool cuda, uint64_t nranks)
{
	struct bfs_vfs *v = calloc(1, sizeof(*v));
	size_t cap = 0;
	int rc = 0;

	if (!v)
		return -ENOMEM;
	for (size_t t = 0; t < plan->ntensors && rc >= 0; t++) {
		const char *name = plan->t[t].name;
		int parent = -1;
		const char *slash;

		/* folders for each '/' */
		while ((slash = strchr(name, '/')) != NULL) {
			char comp[256];
			size_t len = (size_t)(slash - name);

			if (len == 0 || len >= sizeof(comp)) {
				rc = bfs_err_set(-EINVAL, "tensor name '%s' cannot be a path",
						 plan->t[t].name);
				break;
			}
			memcpy(comp, name, len);
			comp[len] = '\0';
			int n = find_node(v, parent, comp);
			if (n >= 0 && v->nodes[n].tensor >= 0) {
				rc = bfs_err_set(-EINVAL, "'%s' is both a file and a folder", comp);
				break;
			}
			if (n < 0)
				n = add_node(v, &cap, parent, comp, len, -1);
			if (n < 0) {
				rc = n;
				break;
			}
			parent = n;
			name = slash + 1;
		}
		if (rc < 0)
			break;
		char file[300];
		if (snprintf(file, sizeof(file), "%s.npy", name) >= (int)sizeof(file)) {
			rc = bfs_err_set(-EINVAL, "tensor name '%s' is too long", plan->t[t].name);
			break;
		}
		if (find_node(v, parent, file) >= 0) {
			rc = bfs_err_set(-EINVAL, "two files named '%s'", plan->t[t].name);
			break;
		}
		rc = add_node(v, &cap, parent, file, strlen(file), (int)t);
	}
	if (rc >= 0)
		rc = index_kids(v);
	if (rc < 0) {
		bfs_vfs_free(v);
		return rc;
	}
	v->nbatches = nbatches;
	v->epochs = epochs;
	v->nranks = nranks;
	v->stride = nranks ? nranks : 1;
	v->base = RANK0 + nranks;
	v->cuda = cuda;
	v->T = 2 + v->nnodes + (cuda ? 1 : 0);
	v->span = 1 + (nbatches + 1) * v->T; /* batches, then the epoch view */
	*out = v;
	return 0;
}

/* The slot of rank r's epoch e (0 on overflow, never a valid slot + 1). */
static bool slot_of(const struct bfs_vfs *v, uint64_t r, uint64_t e, uint64_t *slot)
{
	return !__builtin_mul_overflow(e, v->stride, slot) &&
	       !__builtin_add_overflow(*slot, r, slot);
}

static uint64_t epoch_ino(const struct bfs_vfs *v, uint64_t r, uint64_t e)
{
	uint64_t s;

	if (!slot_of(v, r, e, &s) || __builtin_mul_overflow(s, v->span, &s) ||
	    __builtin_add_overflow(s, v->base, &s))
		return 0;
	return s;
}

/* ino of (r, e, b, k) where k: 0 batch dir, 1 safetensors, 2+n template
 * node n; 0 on overflow. */
static uint64_t batch_ino(const struct bfs_vfs *v, uint64_t r, uint64_t e, uint64_t b, uint64_t k)
{
	uint64_t x = epoch_ino(v, r, e);

	if (!x || __builtin_add_overflow(x, 1 + b * v->T + k, &x))
		return 0;
	return x;
}

static bool epoch_ok(const struct bfs_vfs *v, uint64_t e)
{
	uint64_t x;
	/* the last rank's epoch's last inode must not overflow */
	return slot_of(v, v->stride - 1, e, &x) && !__builtin_add_overflow(x, 1, &x) &&
	       !__builtin_mul_overflow(x, v->span, &x) && !__builtin_add_overflow(x, v->base, &x);
}

int bfs_vfs_get(const struct bfs_vfs *v, uint64_t ino, struct bfs_vnode *out)
{
	memset(out, 0, sizeof(*out));
	out->ino = ino;
	out->node = out->tensor = -1;
	if (ino >= 1 && ino <= 5) {
		out->type = (enum bfs_vtype)ino;
		return 0;
	}
	if (ino >= RANK0 && ino < v->base) {
		out->type = BFS_V_RANK;
		out->rank = ino - RANK0;
		return 0;
	}
	if (ino < v->base)
		return -ENOENT;
	uint64_t x = ino - v->base;
	out->epoch = x / v->span / v->stride;
	out->rank = x / v->span % v->stride;
	uint64_t local = x % v->span;
	if (local == 0) {
		out->type = BFS_V_EPOCH;
		return 0;
	}
	local--;
	out->batch = local / v->T;
	out->all = out->batch == v->nbatches;
	uint64_t k = local % v->T;
	if (k == 0)
		out->type = BFS_V_BATCH;
	else if (k == 1)
		out->type = BFS_V_SAFETENSORS;
	else if (k == 2 + v->nnodes) {
		if (out->all) /* all/ has no descriptor */
			return -ENOENT;
		out->type = BFS_V_CUDA;
	} else {
		out->node = (int)(k - 2);
		out->tensor = v->nodes[out->node].tensor;
		out->type = out->tensor >= 0 ? BFS_V_NPY : BFS_V_DIR;
	}
	return 0;
}

/* Parse "<prefix><digits><suffix>" where the digits are the canonical
 * %0*llu rendering with at least `width` digits. */
static bool parse_num(const char *name, const char *prefix, int width, const char *suffix,
		      uint64_t *out)
{
	size_t pl = strlen(prefix), sl = strlen(suffix), nl = strlen(name);
	char canon[64];
	uint64_t val = 0;

	if (nl <= pl + sl || strncmp(name, prefix, pl) != 0 || strcmp(name + nl - sl, suffix) != 0)
		return false;
	for (size_t i = pl; i < nl - sl; i++) {
		if (name[i] < '0' || name[i] > '9')
			return false;
		if (__builtin_mul_overflow(val, 10, &val) ||
		    __builtin_add_overflow(val, (uint64_t)(name[i] - '0'), &val))
			return false;
	}
	snprintf(canon, sizeof(canon), "%s%0*" PRIu64 "%s", prefix, width, val, suffix);
	if (strcmp(canon, name) != 0)
		return false;
	*out = val;
	return true;
}

static void set_node(const struct bfs_vfs *v, struct bfs_vnode *out, uint64_t r, uint64_t e,
		     uint64_t b, int n)
{
	memset(out, 0, sizeof(*out));
	out->rank = r;
	out->epoch = e;
	out->batch = b;
	out->node = n;
	out->tensor = v->nodes[n].tensor;
	out->type = out->tensor >= 0 ? BFS_V_NPY : BFS_V_DIR;
	out->all = b == v->nbatches;
	out->ino = batch_ino(v, r, e, b, 2 + (uint64_t)n);
}

/* epoch-E in the top folder or in a rank folder */
static int lookup_epoch(const struct bfs_vfs *v, const struct bfs_vnode *dir, const char *name,
			struct bfs_vnode *out)
{
	uint64_t num;

	if (!parse_num(name, "epoch-", 4, "", &num) || !epoch_ok(v, num))
		return -ENOENT;
	out->type = BFS_V_EPOCH;
	out->rank = dir->rank;
	out->epoch = num;
	out->ino = epoch_ino(v, dir->rank, num);
	return out->ino ? 0 : -ENOENT;
}

int bfs_vfs_lookup(const struct bfs_vfs *v, const struct bfs_vnode *dir, const char *name,
		   struct bfs_vnode *out)
{
	uint64_t num;
	int n;

	if (!bfs_vnode_is_dir(dir))
		return -ENOTDIR;
	memset(out, 0, sizeof(*out));
	out->node = out->tensor = -1;
	switch (dir->type) {
	case BFS_V_ROOT:
		for (size_t i = 0; i < BFS_ARRAY_SIZE(top_names); i++) {
			if (strcmp(name, top_names[i]) == 0) {
				out->type = (enum bfs_vtype)(BFS_V_README + i);
				out->ino = 2 + i;
				return 0;
			}
		}
		if (v->nranks) {
			if (parse_num(name, "rank-", 4, "", &num) && num < v->nranks) {
				out->type = BFS_V_RANK;
				out->rank = num;
				out->ino = RANK0 + num;
				return 0;
			}
			return -ENOENT;
		}
		return lookup_epoch(v, dir, name, out); /* the top holds the epochs */
	case BFS_V_RANK:
		return lookup_epoch(v, dir, name, out);
	case BFS_V_EPOCH:
		out->rank = dir->rank;
		out->epoch = dir->epoch;
		if (strcmp(name, "all") == 0 || strcmp(name, "all.safetensors") == 0) {
			out->type = name[3] ? BFS_V_SAFETENSORS : BFS_V_BATCH;
			out->batch = v->nbatches;
			out->all = true;
			out->ino =
				batch_ino(v, dir->rank, dir->epoch, v->nbatches, name[3] ? 1 : 0);
			return out->ino ? 0 : -ENOENT;
		}
		if (parse_num(name, "batch-", 6, "", &num) && num < v->nbatches) {
			out->type = BFS_V_BATCH;
			out->batch = num;
			out->ino = batch_ino(v, dir->rank, dir->epoch, num, 0);
			return out->ino ? 0 : -ENOENT;
		}
		if (parse_num(name, "batch-", 6, ".safetensors", &num) && num < v->nbatches) {
			out->type = BFS_V_SAFETENSORS;
			out->batch = num;
			out->ino = batch_ino(v, dir->rank, dir->epoch, num, 1);
			return out->ino ? 0 : -ENOENT;
		}
		return -ENOENT;
	case BFS_V_BATCH:
	case BFS_V_DIR:
		if (v->cuda && dir->type == BFS_V_BATCH && !dir->all &&
		    parse_num(name, "batch-", 6, ".cuda", &num) && num == dir->batch) {
			out->type = BFS_V_CUDA;
			out->rank = dir->rank;
			out->epoch = dir->epoch;
			out->batch = num;
			out->ino = batch_ino(v, dir->rank, dir->epoch, num, 2 + v->nnodes);
			return out->ino ? 0 : -ENOENT;
		}
		n = find_node(v, dir->type == BFS_V_BATCH ? -1 : dir->node, name);
		if (n < 0)
			return -ENOENT;
		set_node(v, out, dir->rank, dir->epoch, dir->batch, n);
		return out->ino ? 0 : -ENOENT;
	default:
		return -ENOTDIR;
	}
}

int bfs_vfs_child(const struct bfs_vfs *v, const struct bfs_vnode *dir, uint64_t idx,
		  struct bfs_vnode *out, char *name, size_t cap)
{
	if (!bfs_vnode_is_dir(dir))
		return -ENOTDIR;
	switch (dir->type) {
	case BFS_V_ROOT:
		if (idx < BFS_ARRAY_SIZE(top_names)) {
			snprintf(name, cap, "%s", top_names[idx]);
			return bfs_vfs_lookup(v, dir, name, out);
		}
		idx -= BFS_ARRAY_SIZE(top_names);
		if (v->nranks) {
			if (idx >= v->nranks)
				return -ENOENT;
			snprintf(name, cap, "rank-%04" PRIu64, idx);
			return bfs_vfs_lookup(v, dir, name, out);
		}
		if (idx >= v->epochs)
			return -ENOENT;
		snprintf(name, cap, "epoch-%04" PRIu64, idx);
		return bfs_vfs_lookup(v, dir, name, out);
	case BFS_V_RANK:
		if (idx >= v->epochs)
			return -ENOENT;
		snprintf(name, cap, "epoch-%04" PRIu64, idx);
		return bfs_vfs_lookup(v, dir, name, out);
	case BFS_V_EPOCH:
		/* all/, all.safetensors, then the batches */
		if (idx < 2) {
			snprintf(name, cap, "%s", idx ? "all.safetensors" : "all");
			return bfs_vfs_lookup(v, dir, name, out);
		}
		idx -= 2;
		if (idx >= 2 * v->nbatches)
			return -ENOENT;
		snprintf(name, cap, "batch-%06" PRIu64 "%s", idx / 2,
			 (idx & 1) ? ".safetensors" : "");
		return bfs_vfs_lookup(v, dir, name, out);
	default: {
		size_t p = (size_t)((dir->type == BFS_V_BATCH ? -1 : dir->node) + 1);
		size_t first = v->kid_start[p], n = v->kid_start[p + 1] - first;
		int i;

		if (idx >= n) {
			if (v->cuda && dir->type == BFS_V_BATCH && !dir->all && idx == n) {
				snprintf(name, cap, "batch-%06" PRIu64 ".cuda", dir->batch);
				return bfs_vfs_lookup(v, dir, name, out);
			}
			return -ENOENT;
		}
		i = v->kids[first + idx];
		snprintf(name, cap, "%s", v->nodes[i].name);
		set_node(v, out, dir->rank, dir->epoch, dir->batch, i);
		return 0;
	}
	}
}

uint64_t bfs_vfs_parent(const struct bfs_vfs *v, const struct bfs_vnode *n)
{
	switch (n->type) {
	case BFS_V_ROOT:
	case BFS_V_README:
	case BFS_V_SCHEMA:
	case BFS_V_STATS:
	case BFS_V_ERRORS:
	case BFS_V_RANK:
		return 1;
	case BFS_V_EPOCH:
		return v->nranks ? RANK0 + n->rank : 1;
	case BFS_V_BATCH:
	case BFS_V_SAFETENSORS:
		return epoch_ino(v, n->rank, n->epoch);
	case BFS_V_CUDA:
		return batch_ino(v, n->rank, n->epoch, n->batch, 0);
	default: {
		int p = v->nodes[n->node].parent;
		return p < 0 ? batch_ino(v, n->rank, n->epoch, n->batch, 0)
			     : batch_ino(v, n->rank, n->epoch, n->batch, 2 + (uint64_t)p);
	}
	}
}
