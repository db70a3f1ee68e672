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
#include "keymap.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define AGAIN (-EAGAIN)
/* More names than this in one record: leave it to the reference decoder. */
#define WIRE_MAX_NAMES (1u << 20)

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

static inline __attribute__((always_inline)) bool varint(struct cur *c, uint64_t *out)
{
	if (c->p < c->end && *c->p < 0x80) { /* one byte: most int64 values */
		*out = *c->p++;
		return true;
	}
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

static inline __attribute__((always_inline)) bool next_field(struct cur *c, struct field *f)
{
	uint64_t tag, len;

	/* the common case: a one-byte tag of a length-delimited field with a
	 * one-byte length */
	if (c->end - c->p >= 2 && c->p[0] < 0x80 && (c->p[0] & 7) == WT_LEN && c->p[1] < 0x80 &&
	    c->p[0] >= 8) {
		len = c->p[1];
		if (len > (uint64_t)(c->end - c->p - 2))
			return false;
		f->num = (uint64_t)c->p[0] >> 3;
		f->wt = WT_LEN;
		f->sub.p = c->p + 2;
		f->sub.end = c->p + 2 + len;
		c->p += 2 + len;
		return true;
	}

	/* protobuf-c takes at most 5 bytes for a tag or a length: so do we */
	if (!varint_n(c, &tag, 5) || tag > UINT32_MAX)
		return false;
	f->num = tag >> 3;
	f->wt = (unsigned)(tag & 7);
	if (f->num == 0 || f->num > 0x1fffffff)
		return false;
	switch (f->wt) {
	case WT_VARINT:
		f->sub.p = f->sub.end = c->p;
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
	uint8_t *bytes; /* NULL: point bytes values into the wire data instead */
};

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

/* A length of one or two varint bytes at p (< end): the bytes it takes, or
 * 0 for anything else (the general path decides). */
static inline size_t short_len(const uint8_t *p, const uint8_t *end, size_t *len)
{
	if (p >= end)
		return 0;
	if (p[0] < 0x80) {
		*len = p[0];
		return 1;
	}
	if (end - p >= 2 && p[1] < 0x80) {
		*len = (size_t)(p[0] & 0x7f) | (size_t)p[1] << 7;
		return 2;
	}
	return 0;
}

static bool has_nul(struct cur key)
{
	return memchr(key.p, 0, (size_t)(key.end - key.p)) != NULL;
}

/* The next map entry of a Features or FeatureLists message: 1 if one was
 * read, 0 at the end, AGAIN on anything unusual. Without check_nul a key
 * of the canonical encoding may hold a NUL: the caller checks it unless the
 * key equals a schema name (which cannot hold one). */
static inline __attribute__((always_inline)) int
next_entry_nul(struct cur *c, struct cur *key, struct cur *val, bool *has_val, bool check_nul)
{
	struct field f;
	const uint8_t *p = c->p;

	/* the canonical encoding, 0a LEN { 0a KLEN key 12 VLEN value }, with
	 * one- or two-byte entry and value lengths (a value of 128 bytes to
	 * 16 KiB: a list of 32 floats already is one) */
	if (c->end - p >= 6 && p[0] == 0x0a) {
		size_t elen, vlen, n1 = short_len(p + 1, c->end, &elen), n2;
		const uint8_t *e = p + 1 + n1, *ee, *r;

		if (n1 && elen >= 4 && elen <= (size_t)(c->end - e) && e[0] == 0x0a &&
		    e[1] < 0x80 && (size_t)e[1] + 3 <= elen) {
			ee = e + elen;
			r = e + 2 + e[1];
			if (r[0] == 0x12 && (n2 = short_len(r + 1, ee, &vlen)) != 0 &&
			    vlen + n2 + 1 == (size_t)(ee - r)) {
				key->p = e + 2;
				key->end = r;
				if (check_nul && has_nul(*key))
					return AGAIN;
				val->p = r + 1 + n2;
				val->end = ee;
				*has_val = true;
				c->p = ee;
				return 1;
			}
		}
	}
	while (c->p < c->end) {
		if (!next_field(c, &f))
			return AGAIN;
		if (f.num != 1)
			continue; /* unknown field */
		if (f.wt != WT_LEN)
			return AGAIN;
		/* through locals: key and val stay out of memory in the
		 * callers' loops (their address goes to no call) */
		struct cur k2 = { NULL, NULL }, v2 = { NULL, NULL };
		int rc = entry(f.sub, &k2, &v2, has_val);
		key->p = k2.p;
		key->end = k2.end;
		val->p = v2.p;
		val->end = v2.end;
		return rc ? rc : 1;
	}
	return 0;
}

static int next_entry(struct cur *c, struct cur *key, struct cur *val, bool *has_val)
{
	return next_entry_nul(c, key, val, has_val, true);
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

/* ------------------------------------------------------------------ bind */

/* One bound name's state for the record being decoded. */
/* What a map entry left for the second walk to fill. */
struct bound {
	struct cur rng; /* the Feature (context) or FeatureList (list) message */
	bool has_val; /* the map entry had a value */
	struct counts n; /* what filling it takes */
};

/* A context name's values, touched for every key of every record: kept
 * small and apart from its struct bound, which only the rare Feature that
 * direct_feature does not fill needs. */
struct slot {
	struct bfs_values v; /* kind NONE when absent */
	int64_t one_i; /* the value of a single-int64 list, filled directly */
	struct bfs_bytes one_b; /* the value of a single-bytes list, filled directly */
	bool has_val; /* the map entry had a value */
	bool direct; /* already filled by the walk (direct_feature or a column) */
};

/* Where a context name's values go when they have the column's shape
 * (bfs_bind_column): kind NONE, no column. */
struct column {
	uint8_t *base;
	uint32_t n; /* values (FLOAT, INT64) or bytes (BYTES) of one row */
	enum bfs_kind kind;
};

struct bfs_bind {
	const struct bfs_keymap *cmap, *lmap;
	size_t nctx, nlists;
	struct slot *cs; /* [nctx] */
	struct bfs_feature_list *lists; /* [nlists] */
	/* a slot holds this record's values only when its generation is gen:
	 * starting a record forgets every slot at once */
	uint32_t gen;
	uint32_t *cgen, *lgen; /* [nctx], [nlists] */
	uint32_t *sgen; /* [nctx]: gen when context name k is in seen */
	struct bound *cb, *lb; /* [nctx], [nlists] */
	size_t *seen; /* slots the second walk fills: ctx k bound from a Feature that
		       * direct_feature did not fill, or nctx + list k */
	size_t nseen;
	/* guess[e]: the name k of the e-th Features entry of the last record
	 * (-1: unknown). Writers put keys in the same order record after
	 * record, so one comparison usually replaces a hash lookup. */
	struct guess {
		uint64_t word; /* bfs_keymap_word of the key when len <= 8 */
		uint32_t len;
		int32_t k;
		/* the whole entry as the last record had it, when its value
		 * went to column k in the writers' encoding: its first tlen
		 * bytes (8 to 24: as words at 0, (tlen - 8) / 2 and tlen - 8),
		 * elen bytes in all, the value being the last elen - tlen.
		 * tlen 0: none. Equal bytes parse the same, so a record whose
		 * entry starts with them needs no parse (template_hit), and
		 * its value goes where the last one went: the row of dst,
		 * whose shape was checked when the template was kept. */
		uint64_t t[3];
		uint8_t *dst; /* column k's base then */
		uint16_t elen;
		uint8_t tlen;
		/* an int64 column's entry in the writers' form (template_int64):
		 * its four length bytes, which follow the varint's size, are
		 * left out of t (gmask[e]: the bytes of t that count; apart, so
		 * that a float entry's guess stays within 56 bytes) */
		bool varint;
	} * guess;
	struct gmask {
		uint64_t m[3];
	} * gmask; /* [nguess] */
	size_t nguess;
	bool templates; /* some guess may have a template (bfs_bind_column) */
	/* columns: col[k] of context name k; wgen[k] == gen when this record's
	 * values of k went to its column (nwritten names, counted once) */
	struct column *col; /* [nctx] */
	uint32_t *wgen; /* [nctx] */
	size_t nwritten;
	uint64_t row;
	/* scratch for the values, grown to the largest record met */
	int64_t *i;
	float *f;
	struct bfs_bytes *bv;
	struct bfs_values *steps;
	size_t cap_i, cap_f, cap_bv, cap_steps;
};

int bfs_bind_new(struct bfs_bind **out, const struct bfs_keymap *ctx, size_t nctx,
		 const struct bfs_keymap *lists, size_t nlists)
{
	struct bfs_bind *b = calloc(1, sizeof(*b));

	if (!b)
		return -ENOMEM;
	b->cmap = ctx;
	b->lmap = lists;
	b->nctx = nctx;
	b->nlists = nlists;
	b->cs = calloc(nctx + 1, sizeof(*b->cs));
	b->lists = calloc(nlists + 1, sizeof(*b->lists));
	b->cgen = calloc(nctx + 1, sizeof(*b->cgen));
	b->sgen = calloc(nctx + 1, sizeof(*b->sgen));
	b->lgen = calloc(nlists + 1, sizeof(*b->lgen));
	b->gen = 1;
	b->cb = calloc(nctx + 1, sizeof(*b->cb));
	b->lb = calloc(nlists + 1, sizeof(*b->lb));
	b->seen = calloc(nctx + nlists + 1, sizeof(*b->seen));
	b->col = calloc(nctx + 1, sizeof(*b->col));
	b->wgen = calloc(nctx + 1, sizeof(*b->wgen));
	b->nguess = 2 * nctx + 16;
	b->guess = calloc(b->nguess, sizeof(*b->guess)); /* tlen 0: no template */
	b->gmask = calloc(b->nguess, sizeof(*b->gmask));
	for (size_t e = 0; b->guess && e < b->nguess; e++)
		b->guess[e].k = -1;
	if (!b->guess || !b->gmask || !b->cs || !b->lists || !b->cgen || !b->sgen || !b->lgen ||
	    !b->cb || !b->lb || !b->seen || !b->col || !b->wgen) {
		bfs_bind_free(b);
		return -ENOMEM;
	}
	*out = b;
	return 0;
}

void bfs_bind_free(struct bfs_bind *b)
{
	if (!b)
		return;
	free(b->cs);
	free(b->lists);
	free(b->cgen);
	free(b->sgen);
	free(b->lgen);
	free(b->cb);
	free(b->lb);
	free(b->seen);
	free(b->col);
	free(b->wgen);
	free(b->guess);
	free(b->gmask);
	free(b->i);
	free(b->f);
	free(b->bv);
	free(b->steps);
	free(b);
}

/* Field by field: a struct literal or memset here becomes `rep stos`,
 * whose start-up costs more than the whole entry. */
static inline void set_values(struct bfs_values *v, enum bfs_kind kind, size_t count,
			      const float *f, const int64_t *i, const struct bfs_bytes *bv)
{
	v->kind = kind;
	v->count = count;
	v->f = f;
	v->i = i;
	v->b = bv;
}

static const struct bfs_values absent; /* kind BFS_KIND_NONE, count 0 */

const struct bfs_values *bfs_bind_values(struct bfs_bind *b, size_t k)
{
	struct slot *sl = &b->cs[k];
	const struct column *col = &b->col[k];

	if (b->wgen[k] != b->gen)
		return b->cgen[k] == b->gen ? &sl->v : &absent;
	/* written to its column: read the row back */
	switch (col->kind) {
	case BFS_KIND_FLOAT:
		set_values(&sl->v, BFS_KIND_FLOAT, col->n,
			   (const float *)(const void *)(col->base + b->row * col->n * 4), NULL,
			   NULL);
		break;
	case BFS_KIND_INT64:
		memcpy(&sl->one_i, col->base + b->row * 8, 8);
		set_values(&sl->v, BFS_KIND_INT64, 1, NULL, &sl->one_i, NULL);
		break;
	default:
		sl->one_b.data = col->base + b->row * col->n;
		sl->one_b.len = col->n;
		set_values(&sl->v, BFS_KIND_BYTES, 1, NULL, NULL, &sl->one_b);
		break;
	}
	return &sl->v;
}

const struct bfs_feature_list *bfs_bind_list(const struct bfs_bind *b, size_t k)
{
	return b->lgen[k] == b->gen ? &b->lists[k] : NULL;
}

void bfs_bind_column(struct bfs_bind *b, size_t k, enum bfs_kind kind, uint32_t n, uint8_t *base)
{
	b->col[k] = (struct column){ base, n, base && n ? kind : BFS_KIND_NONE };
	/* a template holds its column's base and shape: forget them all */
	for (size_t e = 0; b->templates && e < b->nguess; e++)
		b->guess[e].tlen = 0;
	b->templates = false;
}

void bfs_bind_row(struct bfs_bind *b, uint64_t row)
{
	b->row = row;
}

size_t bfs_bind_nwritten(const struct bfs_bind *b)
{
	return b->nwritten;
}

bool bfs_bind_written(const struct bfs_bind *b, size_t k)
{
	return b->wgen[k] == b->gen;
}

/* Start afresh: every slot reads as absent. */
static void forget(struct bfs_bind *b)
{
	b->nseen = 0;
	b->nwritten = 0;
	if (++b->gen == 0) { /* wrapped: no stale slot may match the new gen */
		memset(b->cgen, 0, b->nctx * sizeof(*b->cgen));
		memset(b->sgen, 0, b->nctx * sizeof(*b->sgen));
		memset(b->wgen, 0, b->nctx * sizeof(*b->wgen));
		memset(b->lgen, 0, b->nlists * sizeof(*b->lgen));
		b->gen = 1;
	}
}

/* The shapes nearly every Feature has — one list of one packed or unpacked
 * chunk: floats, one int64, one bytes value — filled during the walk, with
 * no second pass: floats and bytes point into the record. 1 if filled, 0 if
 * the Feature is anything else (the general path decides, and rejects). */
static int direct_feature(struct cur c, struct bfs_values *v, struct slot *sl)
{
	struct field f, g;
	struct cur l, pk;
	size_t bl;

	if (!next_field(&c, &f) || c.p != c.end || f.num < 1 || f.num > 3 || f.wt != WT_LEN)
		return 0;
	l = f.sub;
	v->kind = f.num == 1 ? BFS_KIND_BYTES : f.num == 2 ? BFS_KIND_FLOAT : BFS_KIND_INT64;
	v->count = 0;
	if (l.p == l.end)
		return 1; /* an empty list */
	if (!next_field(&l, &g) || l.p != l.end || g.num != 1)
		return 0;
	bl = (size_t)(g.sub.end - g.sub.p);
	switch (f.num) {
	case 1:
		if (g.wt != WT_LEN)
			return 0;
		sl->one_b.data = g.sub.p;
		sl->one_b.len = bl;
		v->b = &sl->one_b;
		v->count = 1;
		return 1;
	case 2:
		if ((g.wt != WT_I32 && g.wt != WT_LEN) || bl % 4)
			return 0;
		/* unaligned: every user of the values copies them with memcpy */
		v->f = (const float *)(const void *)g.sub.p;
		v->count = bl / 4;
		return 1;
	default:
		if (g.wt == WT_VARINT) {
			sl->one_i = (int64_t)g.val;
		} else if (g.wt == WT_LEN) {
			uint64_t x;
			pk = g.sub;
			if (!varint(&pk, &x) || pk.p != pk.end)
				return 0;
			sl->one_i = (int64_t)x;
		} else {
			return 0;
		}
		v->i = &sl->one_i;
		v->count = 1;
		return 1;
	}
}

/* The canonical encoding of a Feature holding one packed list, with one-
 * or two-byte lengths: FIELD LEN { 0a LEN <payload> }, the whole of val.
 * The payload, or NULL when val is anything else. */
static inline const uint8_t *one_packed(const uint8_t *p, const uint8_t *end, uint8_t field,
					size_t *len)
{
	size_t vl = (size_t)(end - p), l1, l2, n1, n2;
	const uint8_t *q;

	if (vl < 4 || p[0] != field)
		return NULL;
	if (vl <= 0x81 && p[1] == vl - 2 && p[2] == 0x0a && p[3] == vl - 4) {
		*len = vl - 4; /* a few values: one-byte lengths */
		return p + 4;
	}
	if (!(n1 = short_len(p + 1, end, &l1)) || l1 != vl - 1 - n1)
		return NULL;
	q = p + 1 + n1;
	if (q >= end || q[0] != 0x0a || !(n2 = short_len(q + 1, end, &l2)) ||
	    l2 != (size_t)(end - q) - 1 - n2)
		return NULL;
	*len = l2;
	return q + 1 + n2;
}

/* Name k's values are in its column for this record (counted once). */
static inline void mark_written(struct bfs_bind *b, size_t k)
{
	if (b->wgen[k] != b->gen) {
		b->wgen[k] = b->gen;
		b->nwritten++;
	}
}

/* A row of a column: scalars are one fixed-size move, not a call. */
static inline void put_row(uint8_t *dst, const uint8_t *src, size_t len)
{
	if (len == 4)
		memcpy(dst, src, 4);
	else if (len == 8)
		memcpy(dst, src, 8);
	else
		memcpy(dst, src, len);
}

/* Write a Feature that has column k's shape (n floats, n int64 given as
 * one varint, or one bytes value of n bytes) to the column's row: true.
 * False: the Feature is anything else (the general path decides, and may
 * reject). The slot is not touched: bfs_bind_values reads the row back. */
/* A Feature in another encoding than the writers' (unpacked values, longer
 * lengths): direct_feature decides, and the values must still have the
 * column's shape. Its source and length for put_column (for one int64:
 * the value in *one). */
static __attribute__((noinline)) bool column_other(const uint8_t *vp, const uint8_t *ve,
						   const struct column *col, const uint8_t **src,
						   size_t *len, int64_t *one)
{
	struct bfs_values v = { .kind = BFS_KIND_NONE };
	struct slot tmp = { .one_i = 0 };

	if (!direct_feature((struct cur){ vp, ve }, &v, &tmp) || v.kind != col->kind)
		return false;
	switch (col->kind) {
	case BFS_KIND_FLOAT:
		if (v.count != col->n || !v.f)
			return false;
		*src = (const uint8_t *)v.f;
		*len = v.count * 4;
		return true;
	case BFS_KIND_INT64:
		if (v.count != 1)
			return false;
		*one = tmp.one_i;
		return true;
	case BFS_KIND_BYTES:
		if (v.count != 1 || tmp.one_b.len != col->n)
			return false;
		*src = tmp.one_b.data;
		*len = col->n;
		return true;
	default:
		return false;
	}
}

/* The varint that fills [src, src + len) exactly, len 1 to 10 (as varint()
 * reads it: a tenth byte gives bit 63 only): true and *out, else false.
 * With 8 bytes readable at src (before lim) its first 8 bytes are one load
 * and a few masks, not a loop whose exit depends on the value's size and
 * is mispredicted as sizes vary from record to record. */
static inline bool exact_varint(const uint8_t *src, size_t len, const uint8_t *lim, uint64_t *out)
{
	const uint64_t hi = 0x8080808080808080u;
	uint64_t w, keep, x = 0;

	if (len < 1 || len > 10)
		return false;
	if ((size_t)(lim - src) < 8) {
		size_t i;
		for (i = 0; i + 1 < len && src[i] >= 0x80; i++)
			x |= (uint64_t)(src[i] & 0x7f) << (7 * i);
		if (i + 1 != len || src[i] >= 0x80)
			return false;
		*out = x | (uint64_t)src[i] << (7 * i);
		return true;
	}
	w = bfs_get_le64(src);
	keep = len >= 8 ? ~(uint64_t)0 : ((uint64_t)1 << (8 * len)) - 1;
	/* continuation bits on every byte but the last of the first 8 */
	if ((w & hi & keep) != (hi & (len > 8 ? keep : keep >> 8)))
		return false;
	x = w & ~hi & keep; /* 7-bit groups in bytes, packed three times over */
	x = (x & 0x007f007f007f007fu) | (x & 0x7f007f007f007f00u) >> 1;
	x = (x & 0x00003fff00003fffu) | (x & 0x3fff00003fff0000u) >> 2;
	x = (x & 0x000000000fffffffu) | (x & 0x0fffffff00000000u) >> 4;
	if (len == 9) {
		if (src[8] >= 0x80)
			return false;
		x |= (uint64_t)src[8] << 56;
	} else if (len == 10) {
		if (src[8] < 0x80 || src[9] >= 0x80)
			return false;
		x |= (uint64_t)(src[8] & 0x7f) << 56 | (uint64_t)src[9] << 63;
	}
	*out = x;
	return true;
}

/* lim: the end of the record's bytes that may be read (exact_varint). */
static inline __attribute__((always_inline)) bool put_column(struct bfs_bind *b, size_t k,
							     const uint8_t *vp, const uint8_t *ve,
							     const uint8_t *lim,
							     const uint8_t **packed)
{
	const struct column *col = &b->col[k];
	const uint8_t *src;
	size_t len;
	int64_t one;

	*packed = NULL;
	switch (col->kind) {
	case BFS_KIND_FLOAT:
		/* the writers' encoding of a few floats, checked in place */
		if (!(src = one_packed(vp, ve, 0x12, &len)) || len != (size_t)col->n * 4) {
			int64_t unused;
			if (!column_other(vp, ve, col, &src, &len, &unused))
				return false;
		} else {
			*packed = src;
		}
		break;
	case BFS_KIND_INT64:
		if (col->n != 1)
			return false;
		/* one packed varint that fills its payload exactly */
		if ((src = one_packed(vp, ve, 0x1a, &len))) {
			uint64_t x;
			if (!exact_varint(src, len, lim, &x))
				return false;
			one = (int64_t)x;
			*packed = src;
		} else {
			int64_t other;
			if (!column_other(vp, ve, col, &src, &len, &other))
				return false;
			one = other;
		}
		memcpy(col->base + b->row * 8, &one, 8);
		goto written;
	case BFS_KIND_BYTES:
		if (!(src = one_packed(vp, ve, 0x0a, &len)) || len != col->n) {
			int64_t unused;
			if (!column_other(vp, ve, col, &src, &len, &unused))
				return false;
		} else {
			*packed = src;
		}
		break;
	default:
		return false;
	}
	put_row(col->base + b->row * len, src, len);
written:
	mark_written(b, k);
	return true;
}

/* A Features entry of name k that no column took: its slot holds the
 * values (direct_feature), or its range for the second walk. */
static __attribute__((noinline)) int bind_slot(struct bfs_bind *b, size_t k, struct cur val,
					       bool has_val)
{
	struct slot *sl = &b->cs[k];
	struct counts n = { 0 };
	struct bound *bd;
	int rc;

	b->cgen[k] = b->gen;
	if (b->wgen[k] == b->gen) { /* a later duplicate the column cannot take */
		b->wgen[k] = 0;
		b->nwritten--;
	}
	set_values(&sl->v, BFS_KIND_NONE, 0, NULL, NULL, NULL);
	sl->has_val = has_val;
	sl->direct = has_val && direct_feature(val, &sl->v, sl);
	if (has_val && !sl->direct) {
		/* the second walk fills it: listed once (a later duplicate
		 * filled directly is skipped there) */
		if (b->sgen[k] != b->gen) {
			b->sgen[k] = b->gen;
			b->seen[b->nseen++] = k;
		}
		bd = &b->cb[k];
		set_values(&sl->v, BFS_KIND_NONE, 0, NULL, NULL, NULL);
		if ((rc = feature(val, &n, NULL, NULL)) != 0)
			return rc;
		bd->rng = val;
		bd->n = n;
	}
	return 0;
}

/* Where word w (0 to 2) of a template's first tlen (8 to 24) bytes starts:
 * at 0, (tlen - 8) / 2 and tlen - 8, which together cover them all. */
static inline size_t template_word_at(size_t tlen, int w)
{
	return w == 0 ? 0 : w == 1 ? (tlen - 8) / 2 : tlen - 8;
}

/* The three words of the tlen bytes at p, as a template holds them. */
static inline void template_words(uint64_t w[3], const uint8_t *p, size_t tlen)
{
	for (int i = 0; i < 3; i++)
		memcpy(&w[i], p + template_word_at(tlen, i), 8);
}

/* Whether the entry at p (before end) begins with g's template bytes:
 * then it is the same entry as in the last record but for its value. */
static inline bool template_hit(const struct guess *g, const uint8_t *p, const uint8_t *end)
{
	uint64_t w[3];

	if (!g->tlen || (size_t)(end - p) < g->elen)
		return false;
	template_words(w, p, g->tlen);
	return w[0] == g->t[0] && w[1] == g->t[1] && w[2] == g->t[2];
}

/* Remember entry [p, end) as g's template: its value [v, end) went to a
 * column in the writers' encoding, after the key (which ends by v). */
static inline void template_keep(struct bfs_bind *b, struct guess *g, const uint8_t *p,
				 const uint8_t *v, const uint8_t *end, const uint8_t *key_end)
{
	size_t tlen = (size_t)(v - p), elen = (size_t)(end - p);

	g->tlen = 0;
	if (tlen < 8 || tlen > 24 || elen > UINT16_MAX || key_end > v)
		return;
	template_words(g->t, p, tlen);
	g->dst = b->col[g->k].base;
	g->elen = (uint16_t)elen;
	g->tlen = (uint8_t)tlen;
	g->varint = false;
	b->templates = true;
}

/* Keep the int64 entry [p, end), key [p + 4, key_end), varint [v, end), as
 * g's template if it has the writers' form with one-byte lengths:
 *   0a Le 0a Lk <key> 12 Lf 1a Ll 0a Lp <varint>
 * (entry: key, value: Feature: int64_list: packed), where with Lp the
 * varint's size Ll = Lp + 2, Lf = Lp + 4 and Le = tlen - 2 + Lp. */
static inline void template_keep_int64(struct bfs_bind *b, struct guess *g, struct gmask *gm,
				       const uint8_t *p, const uint8_t *v, const uint8_t *end,
				       const uint8_t *key_end)
{
	size_t tlen = (size_t)(v - p), lp = (size_t)(end - v), lk = tlen - 10;
	const size_t at[4] = { 1, tlen - 5, tlen - 3, tlen - 1 };

	g->tlen = 0;
	if (tlen < 10 || tlen > 24 || lp < 1 || lp > 10 || key_end != p + 4 + lk || p[0] != 0x0a ||
	    p[1] != tlen - 2 + lp || p[2] != 0x0a || p[3] != lk || p[4 + lk] != 0x12 ||
	    p[5 + lk] != lp + 4 || p[6 + lk] != 0x1a || p[7 + lk] != lp + 2 || p[8 + lk] != 0x0a ||
	    p[9 + lk] != lp)
		return;
	template_keep(b, g, p, v, end, key_end);
	for (int w = 0; w < 3; w++) {
		size_t o = template_word_at(tlen, w);
		gm->m[w] = ~(uint64_t)0;
		for (int i = 0; i < 4; i++)
			if (at[i] >= o && at[i] < o + 8)
				gm->m[w] &= ~((uint64_t)0xff << (8 * (at[i] - o)));
		g->t[w] &= gm->m[w];
	}
	g->varint = true;
}

/* The entry at c->p is g's int64 template but for its varint's size and
 * value: its value to the column's row, c->p past it, true. Else false,
 * nothing done. */
static inline bool template_int64(struct bfs_bind *b, const struct guess *g, const struct gmask *gm,
				  struct cur *c)
{
	const uint8_t *p = c->p;
	size_t tlen = g->tlen, avail = (size_t)(c->end - p), lp;
	uint64_t w[3], x;

	if (avail <= tlen)
		return false;
	lp = p[tlen - 1];
	if (lp < 1 || lp > 10 || avail < tlen + lp)
		return false;
	template_words(w, p, tlen);
	if (((w[0] & gm->m[0]) ^ g->t[0]) | ((w[1] & gm->m[1]) ^ g->t[1]) |
	    ((w[2] & gm->m[2]) ^ g->t[2]))
		return false;
	if (p[1] != tlen - 2 + lp || p[tlen - 5] != lp + 4 || p[tlen - 3] != lp + 2 ||
	    !exact_varint(p + tlen, lp, c->end, &x))
		return false;
	memcpy(g->dst + b->row * 8, &x, 8);
	mark_written(b, (size_t)g->k);
	c->p = p + tlen + lp;
	return true;
}

/* Features map: every entry validated and counted; a bound key keeps its
 * range (a later duplicate replaces it: the last one wins). The loop keeps
 * the value's range in two registers: as a struct it lived on the stack,
 * and reading it whole after two 8-byte stores stalled every entry. An
 * entry equal to the last record's at the same position but for its value
 * (its template) costs three compares and the value's copy. */
static int bind_features(struct bfs_bind *b, struct cur c)
{
	struct cur key, val;
	bool has_val;
	size_t e = 0;
	int rc;

	for (;;) {
		struct guess *g = e < b->nguess ? &b->guess[e] : NULL;
		const uint8_t *start = c.p, *vp, *ve, *packed;
		size_t klen;
		long k;

		if (g && !g->varint && template_hit(g, c.p, c.end)) {
			size_t plen = (size_t)g->elen - g->tlen;

			put_row(g->dst + b->row * plen, c.p + g->tlen, plen);
			mark_written(b, (size_t)g->k);
			c.p += g->elen;
			e++;
			continue;
		}
		if (g && g->varint && g->tlen && template_int64(b, g, &b->gmask[e], &c)) {
			e++;
			continue;
		}
		if ((rc = next_entry_nul(&c, &key, &val, &has_val, false)) != 1)
			break;
		vp = val.p;
		ve = val.end;
		klen = (size_t)(key.end - key.p);
		e++;
		if (g && g->k >= 0 && g->len == klen &&
		    (klen <= 8 ? g->word == bfs_keymap_word(key.p, klen)
			       : bfs_keymap_is(b->cmap, (size_t)g->k, key.p, klen))) {
			k = g->k;
		} else {
			k = bfs_keymap_find(b->cmap, key.p, klen);
			if (k < 0 && has_nul(key))
				return AGAIN; /* a NUL in a name: as the fast decoder does */
			if (g && k <= INT32_MAX) {
				g->k = (int32_t)k;
				g->len = (uint32_t)klen;
				g->word = klen <= 8 ? bfs_keymap_word(key.p, klen) : 0;
			}
		}
		if (g) {
			g->tlen = 0;
			g->varint = false;
		}

		if (k < 0) {
			struct counts n = { 0 };
			if (has_val && (rc = feature((struct cur){ vp, ve }, &n, NULL, NULL)) != 0)
				return rc;
			continue;
		}
		if (has_val && b->col[k].kind != BFS_KIND_NONE &&
		    put_column(b, (size_t)k, vp, ve, c.end, &packed)) {
			/* a value that ends the entry, in the writers' encoding */
			if (g && packed && ve == c.p && g->k == k) {
				if (b->col[k].kind == BFS_KIND_INT64)
					template_keep_int64(b, g, &b->gmask[e - 1], start, packed,
							    c.p, key.end);
				else
					template_keep(b, g, start, packed, c.p, key.end);
			}
			continue;
		}
		if ((rc = bind_slot(b, (size_t)k, (struct cur){ vp, ve }, has_val)) != 0)
			return rc;
	}
	return rc;
}

/* FeatureLists map: likewise, each FeatureList's steps validated and counted. */
static int bind_lists(struct bfs_bind *b, struct cur c)
{
	struct cur key, val;
	struct field g;
	bool has_val;
	int rc;

	while ((rc = next_entry(&c, &key, &val, &has_val)) == 1) {
		struct counts n = { 0 };
		struct cur steps = val;
		long k;

		while (has_val && steps.p < steps.end) {
			if (!next_field(&steps, &g))
				return AGAIN;
			if (g.num != 1)
				continue;
			if (g.wt != WT_LEN)
				return AGAIN;
			n.nsteps++;
			if ((rc = feature(g.sub, &n, NULL, NULL)) != 0)
				return rc;
		}
		k = bfs_keymap_find(b->lmap, key.p, (size_t)(key.end - key.p));
		if (k < 0)
			continue;
		if (b->lgen[k] != b->gen) {
			b->lgen[k] = b->gen;
			b->seen[b->nseen++] = b->nctx + (size_t)k;
		}
		b->lb[k].rng = val;
		b->lb[k].has_val = has_val;
		b->lb[k].n = n;
	}
	return rc;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
	void *q;
	size_t c = *cap ? *cap : 16;

	if (need <= *cap)
		return 0;
	while (c < need)
		c *= 2;
	q = realloc(*p, c * elem);
	if (!q)
		return bfs_err_set(-ENOMEM, "example: out of memory (%zu values)", c);
	*p = q;
	*cap = c;
	return 0;
}

int bfs_example_bind(struct bfs_bind *b, const uint8_t *data, size_t len)
{
	struct cur c;
	struct field f;
	struct counts tot = { 0 };
	struct fill fl;
	bool seen1 = false, seen2 = false;
	int rc = 0;

	forget(b);
	if (!data && len)
		return AGAIN;
	if (!data)
		data = (const uint8_t *)"";
	if (len > ((size_t)1 << 32))
		return AGAIN;
	c = (struct cur){ data, data + len };
	while (c.p < c.end) {
		if (!next_field(&c, &f)) {
			rc = AGAIN;
			break;
		}
		if (f.num != 1 && f.num != 2)
			continue;
		if (f.wt != WT_LEN || (f.num == 1 ? seen1 : seen2)) {
			rc = AGAIN; /* protobuf merges a repeated message */
			break;
		}
		if (f.num == 1) {
			seen1 = true;
			rc = bind_features(b, f.sub);
		} else {
			seen2 = true;
			rc = bind_lists(b, f.sub);
		}
		if (rc)
			break;
	}
	if (rc) {
		forget(b); /* the walk may have filled some directly */
		return rc;
	}
	/* only the ranges are known so far: fill the slots from scratch */
	for (size_t s = 0; s < b->nseen; s++) {
		size_t k = b->seen[s];
		const struct counts *n;
		if (k < b->nctx && (b->cs[k].direct || !b->cs[k].has_val))
			continue;
		n = k < b->nctx ? &b->cb[k].n : &b->lb[k - b->nctx].n;
		tot.ni += n->ni;
		tot.nf += n->nf;
		tot.nbv += n->nbv;
		tot.nsteps += n->nsteps;
	}
	if (grow((void **)&b->i, &b->cap_i, tot.ni, sizeof(*b->i)) ||
	    grow((void **)&b->f, &b->cap_f, tot.nf, sizeof(*b->f)) ||
	    grow((void **)&b->bv, &b->cap_bv, tot.nbv, sizeof(*b->bv)) ||
	    grow((void **)&b->steps, &b->cap_steps, tot.nsteps, sizeof(*b->steps))) {
		forget(b);
		return -ENOMEM;
	}
	memset(&fl, 0, sizeof(fl));
	fl.i = b->i;
	fl.f = b->f;
	fl.bv = b->bv;
	fl.steps = b->steps;
	fl.bytes = NULL; /* bytes values point into `data` */
	for (size_t s = 0; s < b->nseen; s++) {
		size_t k = b->seen[s];
		struct counts dummy = { 0 };

		if (k < b->nctx) {
			struct slot *sl = &b->cs[k];
			if (sl->has_val && !sl->direct)
				rc = feature(b->cb[k].rng, &dummy, &fl, &sl->v);
		} else {
			struct bound *bd = &b->lb[k - b->nctx];
			struct bfs_feature_list *l = &b->lists[k - b->nctx];
			struct cur steps = bd->rng;
			struct field g;

			l->name = NULL;
			l->nsteps = 0;
			l->steps = fl.steps;
			while (bd->has_val && steps.p < steps.end && rc == 0) {
				if (!next_field(&steps, &g))
					rc = AGAIN;
				else if (g.num == 1) {
					rc = feature(g.sub, &dummy, &fl, fl.steps);
					fl.steps++;
					l->nsteps++;
				}
			}
		}
		if (rc) { /* cannot happen: the counting walk accepted these bytes */
			forget(b);
			return rc;
		}
	}
	return 0;
}
