/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bind_diff.h — holds bound decoding (bfs_example_bind) to the reference
 * decoder, for the unit tests and the fuzz_wire target.
 *
 * bind_diff(data, len) decodes the bytes with the protobuf-c reference, then
 * binds them with keymaps of all (then every other one) of the record's
 * context names, every list name, and names the record lacks — once after
 * binding another record with the same bind (so a stale slot would show),
 * then again right after itself (so a guessed key order or entry template
 * is used). Where bind succeeds, the
 * reference must succeed too, and every bound name must read exactly as
 * bfs_example_find / bfs_example_find_list read on the reference (absent
 * and `Feature {}` alike: kind NONE, no values). Bind may fail only with
 * -EAGAIN or -ENOMEM. Returns NULL when they agree, else what differs.
 */
#ifndef BFS_TESTS_BIND_DIFF_H
#define BFS_TESTS_BIND_DIFF_H

#include "bind.h"
#include "example.h"
#include "keymap.h"

#include <stdlib.h>
#include <string.h>

static int bind_diff_values_eq(const struct bfs_values *a, const struct bfs_values *b)
{
	bool pa = a && a->kind != BFS_KIND_NONE, pb = b && b->kind != BFS_KIND_NONE;

	if (!pa || !pb)
		return pa == pb;
	if (a->kind != b->kind || a->count != b->count)
		return 0;
	for (size_t i = 0; i < a->count; i++) {
		if (a->kind == BFS_KIND_FLOAT && memcmp(&a->f[i], &b->f[i], 4) != 0)
			return 0;
		if (a->kind == BFS_KIND_INT64 && memcmp(&a->i[i], &b->i[i], 8) != 0)
			return 0;
		if (a->kind == BFS_KIND_BYTES &&
		    (a->b[i].len != b->b[i].len ||
		     (a->b[i].len && memcmp(a->b[i].data, b->b[i].data, a->b[i].len) != 0)))
			return 0;
	}
	return 1;
}

static void bind_diff_varint(uint8_t **p, uint64_t v)
{
	while (v >= 0x80) {
		*(*p)++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*(*p)++ = (uint8_t)v;
}

/* One map entry: 0a LEN { 0a KLEN key 12 VLEN value }. */
static void bind_diff_entry(uint8_t **p, const char *key, const uint8_t *val, size_t vlen)
{
	size_t klen = strlen(key);
	uint8_t tmp[16], *t = tmp;

	bind_diff_varint(&t, klen);
	*(*p)++ = 0x0a;
	bind_diff_varint(p, 1 + (size_t)(t - tmp) + klen + 2 + vlen);
	*(*p)++ = 0x0a;
	bind_diff_varint(p, klen);
	memcpy(*p, key, klen);
	*p += klen;
	*(*p)++ = 0x12;
	bind_diff_varint(p, vlen);
	memcpy(*p, val, vlen);
	*p += vlen;
}

/* An Example in which every name holds int64 [7] (every list: one such
 * step): bound before the record under test, so a slot it leaves behind
 * would read as 7 where the record has nothing. malloc'd, *len its size. */
static uint8_t *bind_diff_warmup(const char **cn, size_t nc, const char **ln, size_t nl,
				 size_t *len)
{
	static const uint8_t feat[] = { 0x1a, 0x03, 0x0a, 0x01, 0x07 }; /* int64_list {7} */
	static const uint8_t flist[] = { 0x0a, 0x05, 0x1a, 0x03, 0x0a, 0x01, 0x07 };
	size_t cap = 64, sub;
	uint8_t *buf, *p, *mark;

	for (size_t i = 0; i < nc; i++)
		cap += strlen(cn[i]) + 32;
	for (size_t i = 0; i < nl; i++)
		cap += strlen(ln[i]) + 32;
	buf = malloc(2 * cap);
	if (!buf)
		return NULL;
	/* build each map in the second half, then copy it behind its tag */
	p = buf;
	for (int m = 0; m < 2; m++) {
		mark = buf + cap;
		for (size_t i = 0; m == 0 && i < nc; i++)
			bind_diff_entry(&mark, cn[i], feat, sizeof(feat));
		for (size_t i = 0; m == 1 && i < nl; i++)
			bind_diff_entry(&mark, ln[i], flist, sizeof(flist));
		sub = (size_t)(mark - (buf + cap));
		*p++ = m == 0 ? 0x0a : 0x12;
		bind_diff_varint(&p, sub);
		memmove(p, buf + cap, sub);
		p += sub;
	}
	*len = (size_t)(p - buf);
	return buf;
}

/* Column k's shape for a bind with columns: the reference's own shape of
 * name k where a column can take it (so the walk writes it), else one
 * float (so a column meets values it must refuse). */
static void bind_diff_shape(const struct bfs_example *ref, const char *name, enum bfs_kind *kind,
			    uint32_t *n)
{
	const struct bfs_values *v = ref ? bfs_example_find(ref, name) : NULL;

	*kind = BFS_KIND_FLOAT;
	*n = 1;
	if (!v || v->count == 0 || v->count > 64)
		return;
	if (v->kind == BFS_KIND_FLOAT) {
		*n = (uint32_t)v->count;
	} else if (v->kind == BFS_KIND_INT64 && v->count == 1) {
		*kind = BFS_KIND_INT64;
	} else if (v->kind == BFS_KIND_BYTES && v->count == 1 && v->b[0].len > 0 &&
		   v->b[0].len <= 4096) {
		*kind = BFS_KIND_BYTES;
		*n = (uint32_t)v->b[0].len;
	}
}

#define BIND_DIFF_CANARY 0xa5

static const char *bind_diff_with(const uint8_t *data, size_t len, size_t stride, bool cols)
{
	static const char *const extra[] = { "", "bind-diff-absent", "label", "x" };
	struct bfs_example *ref = NULL;
	struct bfs_keymap *cmap = NULL, *lmap = NULL;
	struct bfs_bind *bd = NULL;
	const char **cn = NULL, **ln = NULL;
	size_t nc = 0, nl = 0;
	const char *bad = NULL;
	uint8_t **colbuf = NULL;
	size_t *rowbytes = NULL;
	int rr, rb;

	rr = bfs_example_decode_ref(&ref, data, len);
	cn = calloc((ref ? ref->nfeatures : 0) + 4, sizeof(*cn));
	ln = calloc((ref ? ref->nlists : 0) + 4, sizeof(*ln));
	if (!cn || !ln)
		goto out;
	for (size_t i = 0; ref && i < ref->nfeatures; i += stride)
		cn[nc++] = ref->features[i].name;
	for (size_t i = 0; ref && i < ref->nlists; i++)
		ln[nl++] = ref->lists[i].name;
	for (size_t i = 0; i < 4; i++) { /* names are unique in a schema: so here */
		bool in_c = false, in_l = false;
		for (size_t k = 0; k < nc; k++)
			in_c = in_c || strcmp(cn[k], extra[i]) == 0;
		for (size_t k = 0; k < nl; k++)
			in_l = in_l || strcmp(ln[k], extra[i]) == 0;
		if (!in_c)
			cn[nc++] = extra[i];
		if (i < 2 && !in_l)
			ln[nl++] = extra[i];
	}
	if (bfs_keymap_new(&cmap, cn, nc) || bfs_keymap_new(&lmap, ln, nl) ||
	    bfs_bind_new(&bd, cmap, nc, lmap, nl))
		goto out;
	/* columns of 3 rows, filled with a canary; the walk writes row 1 */
	colbuf = calloc(nc + 1, sizeof(*colbuf));
	rowbytes = calloc(nc + 1, sizeof(*rowbytes));
	if (!colbuf || !rowbytes)
		goto out;
	for (size_t k = 0; cols && k < nc; k++) {
		enum bfs_kind kind;
		uint32_t n;
		bind_diff_shape(ref, cn[k], &kind, &n);
		rowbytes[k] = kind == BFS_KIND_FLOAT   ? 4 * (size_t)n
			      : kind == BFS_KIND_INT64 ? 8
						       : n;
		if (!(colbuf[k] = malloc(3 * rowbytes[k])))
			goto out;
		memset(colbuf[k], BIND_DIFF_CANARY, 3 * rowbytes[k]);
		bfs_bind_column(bd, k, kind, n, colbuf[k]);
	}
	bfs_bind_row(bd, 1);
	/* a first record through the same bind: its slots must not leak */
	{
		size_t wlen = 0;
		uint8_t *w = bind_diff_warmup(cn, nc, ln, nl, &wlen);
		if (!w)
			goto out;
		rb = bfs_example_bind(bd, w, wlen);
		free(w);
		if (rb != 0) {
			bad = "bind rejected the warm-up record";
			goto out;
		}
	}
	/* twice: the second bind meets the record as the last one it bound
	 * (its key order and entry templates), with the rows poisoned first */
	for (int pass = 0; pass < 2; pass++) {
		for (size_t k = 0; pass && cols && k < nc; k++)
			memset(colbuf[k] + rowbytes[k], BIND_DIFF_CANARY, rowbytes[k]);
		rb = bfs_example_bind(bd, data, len);
		if (rb != 0) {
			if (rb != -EAGAIN && rb != -ENOMEM)
				bad = "bind failed with an error other than -EAGAIN/-ENOMEM";
			goto out;
		}
		if (rr != 0) {
			bad = "bind accepted what the reference rejects";
			goto out;
		}
		{
			size_t written = 0;
			for (size_t k = 0; k < nc; k++) {
				written += bfs_bind_written(bd, k);
				if (!cols && bfs_bind_written(bd, k)) {
					bad = "a bind without columns wrote one";
					goto out;
				}
				for (size_t r = 0; cols && r < 3;
				     r += 2) /* rows 0 and 2 untouched */
					for (size_t i = 0; i < rowbytes[k]; i++)
						if (colbuf[k][r * rowbytes[k] + i] !=
						    BIND_DIFF_CANARY) {
							bad = "a column was written outside its "
							      "row";
							goto out;
						}
			}
			if (written != bfs_bind_nwritten(bd)) {
				bad = "bfs_bind_nwritten disagrees with bfs_bind_written";
				goto out;
			}
		}
		for (size_t k = 0; k < nc; k++)
			if (!bind_diff_values_eq(bfs_bind_values(bd, k),
						 bfs_example_find(ref, cn[k]))) {
				bad = "a context feature reads differently";
				goto out;
			}
		for (size_t k = 0; k < nl; k++) {
			const struct bfs_feature_list *a = bfs_bind_list(bd, k);
			const struct bfs_feature_list *b = bfs_example_find_list(ref, ln[k]);
			if (!a != !b || (a && a->nsteps != b->nsteps)) {
				bad = "a feature list reads differently";
				goto out;
			}
			for (size_t s = 0; a && s < a->nsteps; s++)
				if (!bind_diff_values_eq(&a->steps[s], &b->steps[s])) {
					bad = "a feature list step reads differently";
					goto out;
				}
		}
	}
out:
	for (size_t k = 0; colbuf && k < nc; k++)
		free(colbuf[k]);
	free(colbuf);
	free(rowbytes);
	bfs_bind_free(bd);
	bfs_keymap_free(cmap);
	bfs_keymap_free(lmap);
	free(cn);
	free(ln);
	bfs_example_free(ref);
	return bad;
}

/* Every context name bound, then every other one; without columns, then
 * with a column for every name. */
static const char *bind_diff(const uint8_t *data, size_t len)
{
	const char *bad = NULL;

	for (int cols = 0; cols < 2 && !bad; cols++) {
		bad = bind_diff_with(data, len, 1, cols);
		if (!bad)
			bad = bind_diff_with(data, len, 2, cols);
	}
	return bad;
}

#endif
