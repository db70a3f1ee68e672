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
 * Does not: know schemas, tensors, files or threads. Thread-safe.
 */
#include "example.h"
#include "example_impl.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define AGAIN (-EAGAIN)
/* More names than this in one record: leave it to the reference decoder. */
#define WIRE_MAX_NAMES 512

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

struct cur {
	const uint8_t *p, *end;
};

static inline bool varint_n(struct cur *c, uint64_t *out, unsigned max_bytes)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < max_bytes && c->p < c->end; i++) {
		uint8_t b = *c->p++;
		v |= (uint64_t)(b & 0x7f) << (7 * i);
		if (!(b & 0x80)) {
			*out = v;
			return true;
		}
	}
	return false;
}

static inline bool varint(struct cur *c, uint64_t *out)
{
	return varint_n(c, out, 10);
}

/* One field: its number, wire type, and either its varint value or its
 * payload range (LEN, I32, I64). False on bad input. */
struct field {
	uint64_t num;
	unsigned wt;
	uint64_t val;
	struct cur sub;
};

static inline bool next_field(struct cur *c, struct field *f)
{
	uint64_t tag, len;

	/* protobuf-c takes at most 5 bytes for a tag or a length: so do we */
	if (!varint_n(c, &tag, 5) || tag > UINT32_MAX)
		return false;
	f->num = tag >> 3;
	f->wt = (unsigned)(tag & 7);
	if (f->num == 0 || f->num > 0x1fffffff)
		return false;
	switch (f->wt) {
	case WT_VARINT:
		return varint(c, &f->val);
	case WT_I64:
	case WT_I32:
		len = f->wt == WT_I64 ? 8 : 4;
		break;
	case WT_LEN:
		if (!varint_n(c, &len, 5) || len > UINT32_MAX)
			return false;
		break;
	default:
		return false; /* groups, invalid types: the reference decides */
	}
	if (len > (uint64_t)(c->end - c->p))
		return false;
	f->sub.p = c->p;
	f->sub.end = c->p + len;
	c->p += len;
	return true;
}

/* Totals from the counting walk. */
struct counts {
	size_t nfeat, nlists, nsteps, nbv, nf, ni, names, bytes;
};

/* Output cursors of the filling walk; NULL while counting. */
struct fill {
	struct bfs_feature *feat;
	struct bfs_feature_list *lists;
	struct bfs_values *steps;
	struct bfs_bytes *bv;
	float *f;
	int64_t *i;
	char *names;
	uint8_t *bytes;
};

/* The values of one list message (BytesList, FloatList, Int64List). */
static int list_values(struct cur l, uint64_t kind_field, struct counts *n, struct fill *fl,
		       struct bfs_values *v)
{
	struct field f;

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
			if (bl)
				memcpy(fl->bytes, f.sub.p, bl);
			fl->bv->data = fl->bytes;
			fl->bv->len = bl;
			fl->bytes += bl;
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
static int feature(struct cur c, struct counts *n, struct fill *fl, struct bfs_values *v)
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
			v->kind = f.num == 1 ? BFS_KIND_BYTES : f.num == 2 ? BFS_KIND_FLOAT : BFS_KIND_INT64;
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
static int entry(struct cur c, struct cur *key, struct cur *val, bool *has_val)
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
			if (has_key || memchr(f.sub.p, 0, (size_t)(f.sub.end - f.sub.p)))
				return AGAIN;
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

/* The next map entry of a Features or FeatureLists message: 1 if one was
 * read, 0 at the end, AGAIN on anything unusual. */
static int next_entry(struct cur *c, struct cur *key, struct cur *val, bool *has_val)
{
	struct field f;

	while (c->p < c->end) {
		if (!next_field(c, &f))
			return AGAIN;
		if (f.num != 1)
			continue; /* unknown field */
		if (f.wt != WT_LEN)
			return AGAIN;
		int rc = entry(f.sub, key, val, has_val);
		return rc ? rc : 1;
	}
	return 0;
}

/* Features map (context): entries into fl->feat. */
static int features(struct cur c, struct counts *n, struct fill *fl)
{
	struct cur key, val;
	bool has_val;
	int rc;

	while ((rc = next_entry(&c, &key, &val, &has_val)) == 1) {
		if (!fl) {
			n->nfeat++;
			n->names += (size_t)(key.end - key.p) + 1;
		} else {
			fl->feat->name = copy_name(fl, key);
			memset(&fl->feat->v, 0, sizeof(fl->feat->v));
		}
		if (has_val && (rc = feature(val, n, fl, fl ? &fl->feat->v : NULL)) != 0)
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

	while ((rc = next_entry(&c, &key, &val, &has_val)) == 1) {
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
			rc = feature(g.sub, n, fl, fl ? fl->steps : NULL);
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

/* Sort n elements of `size` bytes whose first member is `const char *name`
 * by name, keeping the last of equal names (map semantics). A stable
 * insertion sort, used only for at most WIRE_MAX_NAMES elements. */
static size_t sort_dedup(void *base, size_t n, size_t size)
{
	char *a = base, tmp[64];
	size_t k = 0;

	for (size_t i = 1; i < n; i++) {
		size_t j = i;
		memcpy(tmp, a + i * size, size);
		while (j > 0 && strcmp(*(const char **)(void *)(a + (j - 1) * size),
				       *(const char **)(void *)tmp) > 0) {
			memcpy(a + j * size, a + (j - 1) * size, size);
			j--;
		}
		memcpy(a + j * size, tmp, size);
	}
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

_Static_assert(sizeof(struct bfs_feature) <= 64 && sizeof(struct bfs_feature_list) <= 64,
	       "sort_dedup's buffer");
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
