/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pbwire.h — the protobuf wire format, read in place: a cursor over a
 * message's bytes, varints, and the next field (its number, wire type and
 * value or payload range), each length checked against the bytes left.
 * Shared by the example module's fast and bound decoders (wire.c,
 * bind.c), whose inner loops these are: all inline, the common one-byte
 * tag and length taken without a loop.
 *
 * Does not: know messages (wire.h walks tf.train.Example), allocate
 * or fail otherwise than by returning false on bytes that are not a
 * well-formed field. Pure functions.
 */
#ifndef BFS_PBWIRE_H
#define BFS_PBWIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

#endif
