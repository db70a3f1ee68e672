/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wire.h — the fast decoder's walk of a tf.train.Features map (wire.c),
 * which the bound decoder (bind.c) takes too: the counting and filling of
 * one Feature, and the next map entry, inline for the canonical encoding
 * writers use. Internal to the example module: users include example.h.
 */
#ifndef BFS_WIRE_H
#define BFS_WIRE_H

#include "example.h"
#include "pbwire.h"

#include <string.h>

/* Bytes a walk does not take (a shape only the reference decoder knows,
 * or bad bytes, which it names): the caller falls back to the reference. */
#define AGAIN (-EAGAIN)

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

/* One Feature message: its values counted into n, or, when filling (fl),
 * written at fl's cursors with v describing them. 0 or AGAIN. */
int bfs_wire_feature(struct cur c, struct counts *n, struct fill *fl, struct bfs_values *v);
/* A map entry: key (1) and value (2), each at most once, in any order.
 * 0 or AGAIN. */
int bfs_wire_entry(struct cur c, struct cur *key, struct cur *val, bool *has_val);

static inline bool has_nul(struct cur key)
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
		int rc = bfs_wire_entry(f.sub, &k2, &v2, has_val);
		key->p = k2.p;
		key->end = k2.end;
		val->p = v2.p;
		val->end = v2.end;
		return rc ? rc : 1;
	}
	return 0;
}

/* next_entry_nul with the NUL check. */
int bfs_wire_next_entry(struct cur *c, struct cur *key, struct cur *val, bool *has_val);

#endif
