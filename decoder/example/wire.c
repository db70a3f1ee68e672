/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wire.c — a fast decoder for the common shapes of tf.train.(Sequence)Example.
 *
 * Two walks over the wire bytes, no protobuf-c: the first counts features,
 * steps and values and checks every length against the bytes left; the
 * second copies names, values and bytes into one allocation laid out as a
 * struct bfs_example. For the shapes it accepts it yields exactly what the
 * reference decoder (protobuf-c, example.c) yields; for anything unusual —
 * a message field given twice (protobuf would merge them), two lists in one
 * Feature, a group, a NUL in a name, a malformed varint or length — it
 * returns -EAGAIN and bfs_example_decode falls back to the reference, which
 * also names what is wrong. A differential test (check_example) and a fuzz
 * target (fuzz_example) hold the two to the same values on every input.
 *
 * The walk of one Feature and of a map entry is shared with the bound
 * decoder (bind.c) through wire.h.
 *
 * Does not: know schemas, tensors, files or threads. Thread-safe.
 */
#include "wire.h"

#include "example_impl.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* More names than this in one record: leave it to the reference decoder. */
#define WIRE_MAX_NAMES (1u << 20)

/* The values of one list message (BytesList, FloatList, Int64List). */
static int list_values(struct cur l, uint64_t kind_field, struct counts *n, struct fill *fl,
		       struct bfs_values *v)
{
	struct field f = { 0 }; /* f.val is set whenever it is read; gcc cannot tell */

	while (l.p < l.end) {
		if (!next_field(&l, &f))
			return AGAIN;
		if (f.num != 1)
			continue; /* unknown field */
		if (kind_field == 1) { /* BytesList */
			size_t bl;
			if (f.wt != WT_LEN)
				return AGAIN;
			bl = (size_t)(f.sub.end - f.sub.p);
			if (!fl) {
				n->nbv++;
				n->bytes += bl;
				continue;
			}
			if (!fl->bytes) {
				fl->bv->data = f.sub.p;
			} else {
				if (bl)
					memcpy(fl->bytes, f.sub.p, bl);
				fl->bv->data = fl->bytes;
				fl->bytes += bl;
			}
			fl->bv->len = bl;
			fl->bv++;
			v->count++;
		} else if (kind_field == 2) { /* FloatList, packed or not */
			size_t bl = (size_t)(f.sub.end - f.sub.p);
			if (f.wt != WT_I32 && f.wt != WT_LEN)
				return AGAIN;
			if (f.wt == WT_LEN && bl % 4)
				return AGAIN;
			if (!fl) {
				n->nf += bl / 4;
				continue;
			}
			if (!bl) /* an empty list in a record with no floats: f is NULL */
				continue;
			memcpy(fl->f, f.sub.p, bl);
			fl->f += bl / 4;
			v->count += bl / 4;
		} else { /* Int64List, packed or not */
			if (f.wt == WT_VARINT) {
				if (!fl)
					n->ni++;
				else {
					*fl->i++ = (int64_t)f.val;
					v->count++;
				}
			} else if (f.wt == WT_LEN) {
				struct cur pk = f.sub;
				uint64_t x;
				while (pk.p < pk.end) {
					if (!varint(&pk, &x))
						return AGAIN;
					if (!fl)
						n->ni++;
					else {
						*fl->i++ = (int64_t)x;
						v->count++;
					}
				}
			} else {
				return AGAIN;
			}
		}
	}
	return 0;
}

/* One Feature message. v is written only when filling. */
int bfs_wire_feature(struct cur c, struct counts *n, struct fill *fl, struct bfs_values *v)
{
	struct field f;
	bool seen = false;
	int rc;

	if (fl)
		memset(v, 0, sizeof(*v));
	while (c.p < c.end) {
		if (!next_field(&c, &f))
			return AGAIN;
		if (f.num < 1 || f.num > 3)
			continue;
		if (f.wt != WT_LEN || seen)
			return AGAIN; /* a second list in one Feature: protobuf merges */
		seen = true;
		if (fl) {
			v->kind = f.num == 1   ? BFS_KIND_BYTES
				  : f.num == 2 ? BFS_KIND_FLOAT
					       : BFS_KIND_INT64;
			v->b = f.num == 1 ? fl->bv : NULL;
			v->f = f.num == 2 ? fl->f : NULL;
			v->i = f.num == 3 ? fl->i : NULL;
		}
		rc = list_values(f.sub, f.num, n, fl, v);
		if (rc)
			return rc;
	}
	return 0;
}

/* A map entry: key (1) and value (2), each at most once, in any order. */
int bfs_wire_entry(struct cur c, struct cur *key, struct cur *val, bool *has_val)
{
	struct field f;
	bool has_key = false;

	key->p = key->end = c.p;
	*has_val = false;
	while (c.p < c.end) {
		if (!next_field(&c, &f))
			return AGAIN;
		if (f.num != 1 && f.num != 2)
			continue;
		if (f.wt != WT_LEN)
			return AGAIN;
		if (f.num == 1) {
			if (has_key)
				return AGAIN;
			for (const uint8_t *q = f.sub.p; q < f.sub.end; q++)
				if (!*q)
					return AGAIN; /* a NUL in a name */
			has_key = true;
			*key = f.sub;
		} else {
			if (*has_val)
				return AGAIN; /* protobuf merges a repeated value */
			*has_val = true;
			*val = f.sub;
		}
	}
	return 0;
}

static const char *copy_name(struct fill *fl, struct cur key)
{
	size_t len = (size_t)(key.end - key.p);
	char *s = fl->names;

	memcpy(s, key.p, len);
	s[len] = '\0';
	fl->names += len + 1;
	return s;
}

int bfs_wire_next_entry(struct cur *c, struct cur *key, struct cur *val, bool *has_val)
{
	return next_entry_nul(c, key, val, has_val, true);
}

/* Features map (context): entries into fl->feat. */
static int features(struct cur c, struct counts *n, struct fill *fl)
{
	struct cur key, val;
	bool has_val;
	int rc;

	while ((rc = bfs_wire_next_entry(&c, &key, &val, &has_val)) == 1) {
		if (!fl) {
			n->nfeat++;
			n->names += (size_t)(key.end - key.p) + 1;
		} else {
			fl->feat->name = copy_name(fl, key);
			memset(&fl->feat->v, 0, sizeof(fl->feat->v));
		}
		if (has_val && (rc = bfs_wire_feature(val, n, fl, fl ? &fl->feat->v : NULL)) != 0)
			return rc;
		if (fl)
			fl->feat++;
	}
	return rc;
}

/* FeatureLists map: entries into fl->lists, their steps into fl->steps. */
static int feature_lists(struct cur c, struct counts *n, struct fill *fl)
{
	struct cur key, val;
	struct field g;
	bool has_val;
	int rc;

	while ((rc = bfs_wire_next_entry(&c, &key, &val, &has_val)) == 1) {
		if (!fl) {
			n->nlists++;
			n->names += (size_t)(key.end - key.p) + 1;
		} else {
			fl->lists->name = copy_name(fl, key);
			fl->lists->nsteps = 0;
			fl->lists->steps = fl->steps;
		}
		while (has_val && val.p < val.end) { /* FeatureList: 1 = Feature, repeated */
			if (!next_field(&val, &g))
				return AGAIN;
			if (g.num != 1)
				continue;
			if (g.wt != WT_LEN)
				return AGAIN;
			if (!fl)
				n->nsteps++;
			else
				fl->lists->nsteps++;
			rc = bfs_wire_feature(g.sub, n, fl, fl ? fl->steps : NULL);
			if (rc)
				return rc;
			if (fl)
				fl->steps++;
		}
		if (fl)
			fl->lists++;
	}
	return rc;
}

/* The top level: 1 = Features (context), 2 = FeatureLists, each at most once. */
static int walk(const uint8_t *data, size_t len, struct counts *n, struct fill *fl, bool *is_seq)
{
	struct cur c = { data, data + len };
	struct field f;
	bool seen1 = false;
	int rc;

	*is_seq = false;
	while (c.p < c.end) {
		if (!next_field(&c, &f))
			return AGAIN;
		if (f.num != 1 && f.num != 2)
			continue;
		if (f.wt != WT_LEN)
			return AGAIN;
		if (f.num == 1) {
			if (seen1)
				return AGAIN; /* protobuf merges a repeated message */
			seen1 = true;
			rc = features(f.sub, n, fl);
		} else {
			if (*is_seq)
				return AGAIN;
			*is_seq = true;
			rc = feature_lists(f.sub, n, fl);
		}
		if (rc)
			return rc;
	}
	return 0;
}

/* Order by name, and equal names by wire order: copy_name lays names out in
 * wire order, so their addresses are that order. */
static int by_name_then_wire(const void *a, const void *b)
{
	const char *x = *(const char *const *)a, *y = *(const char *const *)b;
	int c = strcmp(x, y);

	return c ? c : (x > y) - (x < y);
}

/* Sort n elements of `size` bytes whose first member is `const char *name`
 * by name, keeping the last of equal names (map semantics): O(n log n)
 * comparisons, then one pass. */
static size_t sort_dedup(void *base, size_t n, size_t size)
{
	char *a = base;
	size_t k = 0;

	if (n < 2)
		return n;
	/* Writers nearly always emit a map in key order: then one pass of
	 * n - 1 comparisons finds it sorted with no duplicate, and the record
	 * costs O(n), not O(n log n) comparisons. */
	for (k = 1; k < n; k++)
		if (strcmp(*(const char **)(void *)(a + (k - 1) * size),
			   *(const char **)(void *)(a + k * size)) >= 0)
			break;
	if (k == n)
		return n;
	k = 0;
	qsort(a, n, size, by_name_then_wire);
	for (size_t i = 0; i < n; i++) {
		if (i + 1 < n && strcmp(*(const char **)(void *)(a + i * size),
					*(const char **)(void *)(a + (i + 1) * size)) == 0)
			continue; /* a later duplicate wins */
		if (k != i)
			memcpy(a + k * size, a + i * size, size);
		k++;
	}
	return k;
}

_Static_assert(offsetof(struct bfs_feature, name) == 0 &&
		       offsetof(struct bfs_feature_list, name) == 0,
	       "sort_dedup sorts by the first member");

#define ALIGN8(x) (((x) + 7) & ~(size_t)7)

int bfs_example_decode_fast(struct bfs_example **out, const uint8_t *data, size_t len)
{
	struct counts n = { 0 };
	struct fill fl;
	struct example_impl *impl;
	size_t size, off_feat, off_list, off_steps, off_bv, off_f, off_i, off_names, off_bytes;
	bool is_seq;
	int rc;

	if (!data && len)
		return AGAIN;
	if (!data)
		data = (const uint8_t *)"";
	rc = walk(data, len, &n, NULL, &is_seq);
	if (rc)
		return rc;
	/* every count is bounded by len (each item takes at least one byte), so
	 * these sums cannot overflow for len < 2^32; check anyway */
	if (len > ((size_t)1 << 32) || n.nfeat > WIRE_MAX_NAMES || n.nlists > WIRE_MAX_NAMES)
		return AGAIN;
	size = ALIGN8(sizeof(*impl));
	off_feat = size;
	size = ALIGN8(size + n.nfeat * sizeof(struct bfs_feature));
	off_list = size;
	size = ALIGN8(size + n.nlists * sizeof(struct bfs_feature_list));
	off_steps = size;
	size = ALIGN8(size + n.nsteps * sizeof(struct bfs_values));
	off_bv = size;
	size = ALIGN8(size + n.nbv * sizeof(struct bfs_bytes));
	off_i = size;
	size = ALIGN8(size + n.ni * sizeof(int64_t));
	off_f = size;
	size = ALIGN8(size + n.nf * sizeof(float));
	off_names = size;
	size = size + n.names;
	off_bytes = size;
	size = size + n.bytes + 1;
	impl = malloc(size);
	if (!impl)
		return bfs_err_set(-ENOMEM, "example: out of memory (%zu bytes)", size);
	memset(impl, 0, sizeof(*impl));
	{
		char *base = (char *)impl;
		fl.feat = (void *)(base + off_feat);
		fl.lists = (void *)(base + off_list);
		fl.steps = (void *)(base + off_steps);
		fl.bv = (void *)(base + off_bv);
		fl.i = (void *)(base + off_i);
		fl.f = (void *)(base + off_f);
		fl.names = base + off_names;
		fl.bytes = (uint8_t *)(base + off_bytes);
	}
	rc = walk(data, len, &n, &fl, &is_seq);
	if (rc) { /* cannot happen: the first walk accepted the same bytes */
		free(impl);
		return rc;
	}
	{
		char *base = (char *)impl;
		struct bfs_feature *feat = (struct bfs_feature *)(base + off_feat);
		struct bfs_feature_list *lists = (struct bfs_feature_list *)(base + off_list);

		impl->pub.features = feat;
		impl->pub.nfeatures = sort_dedup(feat, n.nfeat, sizeof(*feat));
		impl->pub.lists = lists;
		impl->pub.nlists = sort_dedup(lists, n.nlists, sizeof(*lists));
		impl->pub.is_sequence = is_seq;
	}
	impl->msg = NULL;
	*out = &impl->pub;
	return 0;
}
