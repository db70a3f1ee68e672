/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bind.c — the bound decoder (bfs_example_bind): a record walked once
 * against the names a schema asks for (keymaps built once per batcher),
 * for the batch's inner loop. Each key is compared first with the key at
 * the same place in the previous record (writers repeat their key order);
 * a fixed-shape numeric or bytes feature whose row has its column's shape
 * goes straight into its row of the batch tensor (a column); an entry
 * whose bytes repeat the previous record's but for the value (a template)
 * is copied without a walk; the other names' values are gathered in a
 * second pass over the ranges the first one kept. Anything the fast walk
 * does not take returns -EAGAIN, and the caller decodes the record with
 * the reference decoder; fuzz_wire holds the two equal.
 *
 * Does not: know schemas or tensors beyond the columns it is given, files
 * or threads. A struct bfs_bind belongs to one thread.
 */
#include "bind.h"

#include "keymap.h"
#include "wire.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

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
		if ((rc = bfs_wire_feature(val, &n, NULL, NULL)) != 0)
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
			if (has_val &&
			    (rc = bfs_wire_feature((struct cur){ vp, ve }, &n, NULL, NULL)) != 0)
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

	while ((rc = bfs_wire_next_entry(&c, &key, &val, &has_val)) == 1) {
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
			if ((rc = bfs_wire_feature(g.sub, &n, NULL, NULL)) != 0)
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
				rc = bfs_wire_feature(b->cb[k].rng, &dummy, &fl, &sl->v);
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
					rc = bfs_wire_feature(g.sub, &dummy, &fl, fl.steps);
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
