/* SPDX-License-Identifier: Apache-2.0 */
/*
 * example.c — tf.train.Example / SequenceExample → sorted feature arrays.
 *
 * The only file that includes the protobuf-c generated types. A record is
 * first walked once over its wire format (wire_check), which finds what the
 * generated parser would only report as "failed" and names it (byte offset,
 * field, what is wrong), and rejects the two shapes protobuf-c would get
 * silently wrong: a feature name holding a NUL byte (it would be cut short)
 * and one Feature holding the same list field twice (protobuf merges the
 * two, protobuf-c keeps the last). The record is then unpacked by protobuf-c,
 * which copies every bytes value, so nothing keeps pointing into the
 * caller's buffer. The unpacked message stays alive inside the result; the
 * sorted arrays borrow from it and live in one allocation with the result.
 *
 * Does not: know schemas, tensors, files or threads.
 */
#include "example.h"
#include "image.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tf_example.pb-c.h"

#include "example_impl.h"

/* ---- wire-format pre-check -------------------------------------------- */

enum wire_type {
	WT_VARINT = 0,
	WT_I64 = 1,
	WT_LEN = 2,
	WT_SGROUP = 3,
	WT_EGROUP = 4,
	WT_I32 = 5,
};

/* The messages of tf_example.proto, as the walker sees them. */
enum wire_msg {
	M_SEQEX, /* 1: Features, 2: FeatureLists */
	M_FEATURES, /* 1: FeatureEntry */
	M_FENTRY, /* 1: key, 2: Feature */
	M_FLISTS, /* 1: FeatureListEntry */
	M_FLENTRY, /* 1: key, 2: FeatureList */
	M_FLIST, /* 1: Feature */
	M_FEATURE, /* 1: BytesList, 2: FloatList, 3: Int64List */
	M_BYTES, /* 1: bytes */
	M_FLOATS, /* 1: float, packed or not */
	M_INTS, /* 1: int64, packed or not */
};

static const char *const wire_msg_name[] = {
	[M_SEQEX] = "Example",
	[M_FEATURES] = "Features",
	[M_FENTRY] = "Features map entry",
	[M_FLISTS] = "FeatureLists",
	[M_FLENTRY] = "FeatureLists map entry",
	[M_FLIST] = "FeatureList",
	[M_FEATURE] = "Feature",
	[M_BYTES] = "BytesList",
	[M_FLOATS] = "FloatList",
	[M_INTS] = "Int64List",
};

/* What field `field` of message `m` is: a sub-message (*sub set), a key
 * string (KEY), a scalar, or unknown (0, skipped). */
enum wire_field { F_UNKNOWN = 0, F_MSG, F_KEY, F_BYTES, F_FLOAT, F_INT };

static enum wire_field wire_field_of(enum wire_msg m, uint64_t field, enum wire_msg *sub)
{
	switch (m) {
	case M_SEQEX:
		if (field == 1) {
			*sub = M_FEATURES;
			return F_MSG;
		}
		if (field == 2) {
			*sub = M_FLISTS;
			return F_MSG;
		}
		break;
	case M_FEATURES:
		if (field == 1) {
			*sub = M_FENTRY;
			return F_MSG;
		}
		break;
	case M_FENTRY:
	case M_FLENTRY:
		if (field == 1)
			return F_KEY;
		if (field == 2) {
			*sub = m == M_FENTRY ? M_FEATURE : M_FLIST;
			return F_MSG;
		}
		break;
	case M_FLISTS:
		if (field == 1) {
			*sub = M_FLENTRY;
			return F_MSG;
		}
		break;
	case M_FLIST:
		if (field == 1) {
			*sub = M_FEATURE;
			return F_MSG;
		}
		break;
	case M_FEATURE:
		if (field >= 1 && field <= 3) {
			*sub = field == 1 ? M_BYTES : field == 2 ? M_FLOATS : M_INTS;
			return F_MSG;
		}
		break;
	case M_BYTES:
		if (field == 1)
			return F_BYTES;
		break;
	case M_FLOATS:
		if (field == 1)
			return F_FLOAT;
		break;
	case M_INTS:
		if (field == 1)
			return F_INT;
		break;
	}
	return F_UNKNOWN;
}

/* Read a varint at buf[*pos..end); advance *pos. False if truncated or
 * longer than 10 bytes; sets no message. */
static bool varint_raw(const uint8_t *buf, size_t *pos, size_t end, uint64_t *out)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < 10 && *pos < end; i++) {
		uint8_t c = buf[(*pos)++];
		v |= (uint64_t)(c & 0x7f) << (7 * i);
		if (!(c & 0x80)) {
			*out = v;
			return true;
		}
	}
	return false;
}

/* varint_raw with the reason in the error message. */
static int wire_varint(const uint8_t *buf, size_t *pos, size_t end, uint64_t *out)
{
	size_t start = *pos;

	if (varint_raw(buf, pos, end, out))
		return 0;
	if (*pos - start < 10)
		return bfs_err_set(-EBADMSG, "truncated varint at byte %zu", start);
	return bfs_err_set(-EBADMSG, "varint longer than 10 bytes at byte %zu", start);
}

/* Print a feature name into an error message: at most 64 bytes, odd bytes
 * shown as '?'. */
static void wire_name(char *dst, size_t cap, const uint8_t *name, size_t len)
{
	size_t n = 0;

	for (size_t i = 0; i < len && n + 4 < cap; i++) {
		if (i == 64) {
			memcpy(dst + n, "...", 3);
			n += 3;
			break;
		}
		char ch = '?';

		if (name[i] >= 0x20 && name[i] < 0x7f)
			ch = (char)name[i];
		dst[n++] = ch;
	}
	dst[n] = '\0';
}

/* The key of the map entry in buf[start..end), printable, in keybuf; owner
 * if it has none. An entry's key may follow its value, so it is looked for
 * before the entry is walked, to name the feature in messages. */
static inline const char *wire_entry_key(const uint8_t *buf, size_t start, size_t end, char *keybuf,
					 size_t cap, const char *owner)
{
	const char *name = owner;
	size_t p = start;
	uint64_t tag, len;

	while (p < end && varint_raw(buf, &p, end, &tag) && (tag & 7) == WT_LEN &&
	       varint_raw(buf, &p, end, &len) && len <= end - p) {
		if ((tag >> 3) == 1) {
			wire_name(keybuf, cap, buf + p, (size_t)len);
			name = keybuf;
		}
		p += (size_t)len;
	}
	return name;
}

/* Read the tag at *pos of message m: its field number (1..2^29-1) and wire
 * type (no groups), both checked. */
static inline int wire_tag(const uint8_t *buf, size_t *pos, size_t end, enum wire_msg m,
			   const char *name, uint64_t *field, unsigned *wt)
{
	size_t at = *pos;
	uint64_t tag;
	int err = wire_varint(buf, pos, end, &tag);

	if (err < 0)
		return err;
	*field = tag >> 3;
	*wt = (unsigned)(tag & 7);
	if (*field == 0 || *field > 0x1fffffff)
		return bfs_err_set(-EBADMSG, "invalid field number %llu at byte %zu (in %s%s%s%s)",
				   (unsigned long long)*field, at, wire_msg_name[m],
				   name[0] ? " of '" : "", name, name[0] ? "'" : "");
	if (*wt == WT_SGROUP || *wt == WT_EGROUP || *wt > WT_I32)
		return bfs_err_set(-EBADMSG, "%s wire type %u at byte %zu (field %llu of %s%s%s%s)",
				   *wt > WT_I32 ? "invalid" : "unsupported group", *wt, at,
				   (unsigned long long)*field, wire_msg_name[m],
				   name[0] ? " of '" : "", name, name[0] ? "'" : "");
	return 0;
}

/* Skip the value at *pos of unknown field `field` (tag at byte `at`) of
 * message m in buf[start..end). */
static inline int wire_skip(const uint8_t *buf, size_t *pos, size_t start, size_t end,
			    enum wire_msg m, uint64_t field, unsigned wt, size_t at)
{
	uint64_t len;
	int err;

	if (wt == WT_VARINT)
		return wire_varint(buf, pos, end, &len);
	if (wt == WT_LEN) {
		err = wire_varint(buf, pos, end, &len);
		if (err < 0)
			return err;
	} else {
		len = wt == WT_I64 ? 8 : 4;
	}
	if (len > end - *pos)
		return bfs_err_set(
			-EBADMSG, "field %llu length %llu at byte %zu overruns its %s of %zu bytes",
			(unsigned long long)field, (unsigned long long)len, at, wire_msg_name[m],
			end - start);
	*pos += (size_t)len;
	return 0;
}

/* The length of known field `field` (what it is: `what`; a float or int
 * that came unpacked is not one) at *pos: its prefix read and checked
 * against end. */
static inline int wire_known_len(const uint8_t *buf, size_t *pos, size_t start, size_t end,
				 enum wire_msg m, const char *name, uint64_t field, unsigned wt,
				 enum wire_field what, size_t at, uint64_t *len)
{
	int err;

	if (wt != WT_LEN)
		return bfs_err_set(
			-EBADMSG,
			"field %llu of %s%s%s%s has wire type %u at byte %zu, expected %s",
			(unsigned long long)field, wire_msg_name[m], name[0] ? " of '" : "", name,
			name[0] ? "'" : "", wt, at,
			what == F_FLOAT ? "2 or 5"
			: what == F_INT ? "0 or 2"
					: "2");
	err = wire_varint(buf, pos, end, len);
	if (err < 0)
		return err;
	if (*len > end - *pos)
		return bfs_err_set(
			-EBADMSG, "field %llu length %llu at byte %zu overruns its %s of %zu bytes",
			(unsigned long long)field, (unsigned long long)*len, at, wire_msg_name[m],
			end - start);
	return 0;
}

/* protobuf merges a repeated message field; protobuf-c keeps only the last
 * list of a Feature, so a second value in one map entry, or a second list
 * of one kind in one Feature, is refused. seen_kind[] tracks them. */
static inline int wire_once(bool seen_kind[4], enum wire_msg m, uint64_t field, enum wire_msg sub,
			    const char *name, size_t at)
{
	if (m == M_FENTRY) {
		if (seen_kind[0])
			return bfs_err_set(-EBADMSG,
					   "feature '%s': value appears twice in one map entry "
					   "(at byte %zu)",
					   name, at);
		seen_kind[0] = true;
	}
	if (m == M_FEATURE) {
		if (seen_kind[field])
			return bfs_err_set(-EBADMSG,
					   "feature '%s': %s appears twice in one Feature (at "
					   "byte %zu)",
					   name, wire_msg_name[sub], at);
		seen_kind[field] = true;
	}
	return 0;
}

/* Check the length-delimited value buf[pos..pos+len) of a field that is not
 * a message: a key (no NUL), packed floats (whole), packed ints (walked
 * only when `deep`). */
static inline int wire_scalar(const uint8_t *buf, size_t pos, size_t len, enum wire_field what,
			      const char *name, size_t at, bool deep)
{
	size_t p = pos, e = pos + len;
	uint64_t v;
	int err;

	switch (what) {
	case F_KEY:
		if (memchr(buf + pos, '\0', len))
			return bfs_err_set(-EBADMSG,
					   "feature name '%s' at byte %zu contains a NUL byte",
					   name, at);
		break;
	case F_FLOAT:
		if (len % 4)
			return bfs_err_set(-EBADMSG,
					   "feature '%s': packed floats of %llu bytes at byte %zu "
					   "(not a multiple of 4)",
					   name, (unsigned long long)len, at);
		break;
	case F_INT:
		/* protobuf-c checks packed varints itself; walk them only to
		 * name the problem after it failed */
		while (deep && p < e) {
			err = wire_varint(buf, &p, e, &v);
			if (err < 0) {
				bfs_err_prefix("feature '%s': packed int64", name);
				return err;
			}
		}
		break;
	default:
		break;
	}
	return 0;
}

/*
 * Walk message `m` occupying buf[start..end). Depth is bounded by the fixed
 * nesting of tf_example.proto (unknown fields are skipped, never entered).
 * `owner` names the feature the bytes belong to, for messages ("" if none).
 */
static int wire_walk(const uint8_t *buf, size_t start, size_t end, enum wire_msg m,
		     const char *owner, bool deep)
{
	char keybuf[80];
	const char *name = owner;
	bool seen_kind[4] = { false, false, false, false };
	size_t pos = start;
	int err;

	if (m == M_FENTRY || m == M_FLENTRY)
		name = wire_entry_key(buf, start, end, keybuf, sizeof(keybuf), owner);
	while (pos < end) {
		size_t at = pos;
		uint64_t field, len;
		enum wire_msg sub = M_SEQEX;
		enum wire_field what;
		unsigned wt;

		err = wire_tag(buf, &pos, end, m, name, &field, &wt);
		if (err < 0)
			return err;
		what = wire_field_of(m, field, &sub);
		if (what == F_UNKNOWN) {
			err = wire_skip(buf, &pos, start, end, m, field, wt, at);
			if (err < 0)
				return err;
			continue;
		}
		/* Known fields: packed floats/ints may also come unpacked. */
		if (what == F_FLOAT && wt == WT_I32) {
			if (end - pos < 4)
				return bfs_err_set(-EBADMSG,
						   "truncated float at byte %zu (feature '%s')",
						   pos, name);
			pos += 4;
			continue;
		}
		if (what == F_INT && wt == WT_VARINT) {
			err = wire_varint(buf, &pos, end, &len);
			if (err < 0)
				return err;
			continue;
		}
		err = wire_known_len(buf, &pos, start, end, m, name, field, wt, what, at, &len);
		if (err < 0)
			return err;
		if (what == F_MSG) {
			err = wire_once(seen_kind, m, field, sub, name, at);
			if (err == 0)
				err = wire_walk(buf, pos, pos + (size_t)len, sub, name, deep);
		} else {
			err = wire_scalar(buf, pos, (size_t)len, what, name, at, deep);
		}
		if (err < 0)
			return err;
		pos += (size_t)len;
	}
	return 0;
}

/* Check the record's wire format; -EBADMSG naming what is wrong. `deep`
 * also walks every packed varint. */
static int wire_check(const uint8_t *data, size_t len, bool deep)
{
	int err = wire_walk(data, 0, len, M_SEQEX, "", deep);

	if (err < 0)
		bfs_err_prefix("not a tf.train.Example or SequenceExample");
	return err;
}

/* ---- building the result ------------------------------------------------ */

/* Map entries of both kinds start with the key after the message header. */
struct any_entry {
	ProtobufCMessage base;
	char *key;
};

static int entry_slot_cmp(const void *a, const void *b)
{
	/* Elements are pointers to slots of the entry array, so comparing the
	 * slot addresses after the keys keeps the wire order of equal keys. */
	const struct any_entry *const *sa = *(const struct any_entry *const *const *)a;
	const struct any_entry *const *sb = *(const struct any_entry *const *const *)b;
	int c = strcmp((*sa)->key, (*sb)->key);

	if (c)
		return c;
	return sa < sb ? -1 : sa > sb;
}

/* Sort pointers to the n entry slots into slots[]; return how many remain
 * once only the last of equal keys is kept (compacted to the front). */
static size_t sort_dedup(const struct any_entry ***slots, struct any_entry **entries, size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		slots[i] = (const struct any_entry **)&entries[i];
	/* keys already strictly increasing (the usual writer's order): sorted,
	 * no duplicate, in n - 1 comparisons */
	for (k = 1; k < n; k++)
		if (strcmp(entries[k - 1]->key, entries[k]->key) >= 0)
			break;
	if (k >= n)
		return n;
	k = 0;
	qsort(slots, n, sizeof(*slots), entry_slot_cmp);
	for (size_t i = 0; i < n; i++) {
		if (i + 1 < n && strcmp((*slots[i])->key, (*slots[i + 1])->key) == 0)
			continue;
		slots[k++] = slots[i];
	}
	return k;
}

/* Bytes values this Feature needs in the bfs_bytes area. */
static size_t feature_nbytes(const Tensorflow__Feature *f)
{
	if (f && f->kind_case == TENSORFLOW__FEATURE__KIND_BYTES_LIST && f->bytes_list)
		return f->bytes_list->n_value;
	return 0;
}

static void fill_values(struct bfs_values *v, const Tensorflow__Feature *f,
			struct bfs_bytes **bytes)
{
	memset(v, 0, sizeof(*v));
	v->kind = BFS_KIND_NONE;
	if (!f)
		return;
	switch (f->kind_case) {
	case TENSORFLOW__FEATURE__KIND_BYTES_LIST: {
		const Tensorflow__BytesList *l = f->bytes_list;
		struct bfs_bytes *b = *bytes;
		v->kind = BFS_KIND_BYTES;
		v->count = l ? l->n_value : 0;
		for (size_t i = 0; i < v->count; i++) {
			b[i].data = l->value[i].data;
			b[i].len = l->value[i].len;
		}
		v->b = b;
		*bytes = b + v->count;
		break;
	}
	case TENSORFLOW__FEATURE__KIND_FLOAT_LIST:
		v->kind = BFS_KIND_FLOAT;
		v->count = f->float_list ? f->float_list->n_value : 0;
		v->f = f->float_list ? f->float_list->value : NULL;
		break;
	case TENSORFLOW__FEATURE__KIND_INT64_LIST:
		v->kind = BFS_KIND_INT64;
		v->count = f->int64_list ? f->int64_list->n_value : 0;
		v->i = f->int64_list ? f->int64_list->value : NULL;
		break;
	default:
		break;
	}
}

/* Add b to *acc; false on overflow. */
static bool add_ok(size_t *acc, size_t b)
{
	return !__builtin_add_overflow(*acc, b, acc);
}

/* Check and unpack the record into *msg; -EBADMSG naming what is wrong. */
static int example_unpack(Tensorflow__SequenceExample **msg, const uint8_t *data, size_t len)
{
	static const uint8_t empty[1];
	int err;

	if (!data) {
		if (len)
			return bfs_err_set(-EINVAL, "example: NULL data of %zu bytes", len);
		data = empty;
	}
	err = wire_check(data, len, false);
	if (err < 0)
		return err;
	*msg = tensorflow__sequence_example__unpack(NULL, len, data);
	if (!*msg) {
		err = wire_check(data, len, true);
		if (err < 0)
			return err;
		return bfs_err_set(
			-EBADMSG,
			"not a tf.train.Example or SequenceExample (protobuf parse failed)");
	}
	return 0;
}

/* Where each array lives in the one allocation of the result. */
struct example_layout {
	size_t off_feat, off_list, off_steps, off_bytes, off_slots, size;
};

/* Add n elements of `each` bytes to lay->size; false on overflow. */
static bool layout_add(struct example_layout *lay, size_t n, size_t each)
{
	size_t b;

	return !__builtin_mul_overflow(n, each, &b) && add_ok(&lay->size, b);
}

/* Size the arrays of the result of msg (nctx features, nfl lists): *lay;
 * false on overflow. */
static bool example_layout(struct example_layout *lay, const Tensorflow__Features *ctx, size_t nctx,
			   const Tensorflow__FeatureLists *fls, size_t nfl)
{
	size_t nsteps = 0, nbytes = 0;

	for (size_t i = 0; i < nctx; i++)
		if (!add_ok(&nbytes, feature_nbytes(ctx->feature[i]->value)))
			return false;
	for (size_t i = 0; i < nfl; i++) {
		const Tensorflow__FeatureList *l = fls->feature_list[i]->value;
		if (!l)
			continue;
		if (!add_ok(&nsteps, l->n_feature))
			return false;
		for (size_t j = 0; j < l->n_feature; j++)
			if (!add_ok(&nbytes, feature_nbytes(l->feature[j])))
				return false;
	}
	lay->size = sizeof(struct example_impl);
	lay->off_feat = lay->size;
	if (!layout_add(lay, nctx, sizeof(struct bfs_feature)))
		return false;
	lay->off_list = lay->size;
	if (!layout_add(lay, nfl, sizeof(struct bfs_feature_list)))
		return false;
	lay->off_steps = lay->size;
	if (!layout_add(lay, nsteps, sizeof(struct bfs_values)))
		return false;
	lay->off_bytes = lay->size;
	if (!layout_add(lay, nbytes, sizeof(struct bfs_bytes)))
		return false;
	lay->off_slots = lay->size;
	return layout_add(lay, nctx > nfl ? nctx : nfl, sizeof(void *));
}

/* Fill the sorted feature and list arrays of impl, laid out as lay, from
 * its message (nctx features in ctx, nfl lists in fls). */
static void example_fill(struct example_impl *impl, const struct example_layout *lay,
			 const Tensorflow__Features *ctx, size_t nctx,
			 const Tensorflow__FeatureLists *fls, size_t nfl)
{
	char *base = (char *)impl;
	struct bfs_feature *feat = (struct bfs_feature *)(base + lay->off_feat);
	struct bfs_feature_list *lists = (struct bfs_feature_list *)(base + lay->off_list);
	struct bfs_values *steps = (struct bfs_values *)(base + lay->off_steps);
	struct bfs_bytes *bytes = (struct bfs_bytes *)(base + lay->off_bytes);
	const struct any_entry ***slots = (const struct any_entry ***)(base + lay->off_slots);
	size_t n;

	n = nctx ? sort_dedup(slots, (struct any_entry **)ctx->feature, nctx) : 0;
	for (size_t i = 0; i < n; i++) {
		const Tensorflow__Features__FeatureEntry *e =
			(const Tensorflow__Features__FeatureEntry *)*slots[i];
		feat[i].name = e->key;
		fill_values(&feat[i].v, e->value, &bytes);
	}
	impl->pub.nfeatures = n;
	impl->pub.features = feat;

	n = nfl ? sort_dedup(slots, (struct any_entry **)fls->feature_list, nfl) : 0;
	for (size_t i = 0; i < n; i++) {
		const Tensorflow__FeatureLists__FeatureListEntry *e =
			(const Tensorflow__FeatureLists__FeatureListEntry *)*slots[i];
		size_t ns = e->value ? e->value->n_feature : 0;
		lists[i].name = e->key;
		lists[i].nsteps = ns;
		lists[i].steps = steps;
		for (size_t j = 0; j < ns; j++)
			fill_values(&steps[j], e->value->feature[j], &bytes);
		steps += ns;
	}
	impl->pub.nlists = n;
	impl->pub.lists = lists;
}

int bfs_example_decode_ref(struct bfs_example **out, const uint8_t *data, size_t len)
{
	Tensorflow__SequenceExample *msg = NULL;
	Tensorflow__Features *ctx;
	Tensorflow__FeatureLists *fls;
	struct example_impl *impl;
	struct example_layout lay;
	size_t nctx, nfl;
	int err;

	err = example_unpack(&msg, data, len);
	if (err < 0)
		return err;
	ctx = msg->context;
	fls = msg->feature_lists;
	nctx = ctx ? ctx->n_feature : 0;
	nfl = fls ? fls->n_feature_list : 0;
	if (!example_layout(&lay, ctx, nctx, fls, nfl)) {
		err = bfs_err_set(-EFBIG, "example: size overflow");
		goto out_msg;
	}
	impl = calloc(1, lay.size);
	if (!impl) {
		err = bfs_err_set(-ENOMEM, "example: out of memory (%zu bytes)", lay.size);
		goto out_msg;
	}
	impl->msg = msg;
	impl->pub.is_sequence = fls != NULL;
	example_fill(impl, &lay, ctx, nctx, fls, nfl);
	*out = &impl->pub;
	return 0;

out_msg:
	tensorflow__sequence_example__free_unpacked(msg, NULL);
	return err;
}

int bfs_example_decode(struct bfs_example **out, const uint8_t *data, size_t len)
{
	int rc = bfs_example_decode_fast(out, data, len);

	if (rc != -EAGAIN)
		return rc;
	return bfs_example_decode_ref(out, data, len);
}

void bfs_example_free(struct bfs_example *ex)
{
	struct example_impl *impl;

	if (!ex)
		return;
	impl = (struct example_impl *)ex;
	if (impl->msg)
		tensorflow__sequence_example__free_unpacked(impl->msg, NULL);
	free(impl);
}

/* ---- lookup --------------------------------------------------------------- */

const struct bfs_values *bfs_example_find(const struct bfs_example *ex, const char *name)
{
	size_t lo = 0, hi = ex ? ex->nfeatures : 0; /* no example: nothing found */

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(name, ex->features[mid].name);
		if (c == 0)
			return &ex->features[mid].v;
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

const struct bfs_feature_list *bfs_example_find_list(const struct bfs_example *ex, const char *name)
{
	size_t lo = 0, hi = ex ? ex->nlists : 0; /* no example: nothing found */

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(name, ex->lists[mid].name);
		if (c == 0)
			return &ex->lists[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

/* ---- text form ---------------------------------------------------------- */

/* A growing string; `err` sticks at the first failure. */
struct sbuf {
	char *s;
	size_t len, cap;
	int err;
};

static void sb_grow(struct sbuf *sb, size_t more)
{
	size_t need, cap;
	char *p;

	if (sb->err)
		return;
	if (__builtin_add_overflow(sb->len, more + 1, &need)) {
		sb->err = -EFBIG;
		return;
	}
	if (need <= sb->cap)
		return;
	cap = sb->cap ? sb->cap : 256;
	while (cap < need) {
		if (__builtin_mul_overflow(cap, 2, &cap)) {
			sb->err = -EFBIG;
			return;
		}
	}
	p = realloc(sb->s, cap);
	if (!p) {
		sb->err = -ENOMEM;
		return;
	}
	sb->s = p;
	sb->cap = cap;
}

static void sb_printf(struct sbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_printf(struct sbuf *sb, const char *fmt, ...)
{
	char tmp[128];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(tmp)) {
		sb->err = sb->err ? sb->err : -EINVAL;
		return;
	}
	sb_grow(sb, (size_t)n);
	if (sb->err)
		return;
	memcpy(sb->s + sb->len, tmp, (size_t)n + 1);
	sb->len += (size_t)n;
}

static void sb_putc(struct sbuf *sb, char c)
{
	sb_grow(sb, 1);
	if (sb->err)
		return;
	sb->s[sb->len++] = c;
	sb->s[sb->len] = '\0';
}

/* C-style escapes for bytes that are not printable ASCII, '"' and '\\'. */
static void sb_escaped(struct sbuf *sb, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n && !sb->err; i++) {
		uint8_t c = p[i];
		switch (c) {
		case '\n':
			sb_printf(sb, "\\n");
			break;
		case '\t':
			sb_printf(sb, "\\t");
			break;
		case '\r':
			sb_printf(sb, "\\r");
			break;
		case '"':
		case '\\':
			sb_putc(sb, '\\');
			sb_putc(sb, (char)c);
			break;
		default:
			if (c >= 0x20 && c < 0x7f)
				sb_putc(sb, (char)c);
			else
				sb_printf(sb, "\\x%02x", c);
		}
	}
}

#define TEXT_MAX_BYTES 64 /* longer bytes values are summarized */

/* One JPEG/PNG value: "jpeg 640x480 (43112 bytes)" instead of its bytes. */
static bool sb_image(struct sbuf *sb, const struct bfs_values *v)
{
	enum bfs_image_fmt fmt;
	uint32_t w, h;

	if (v->kind != BFS_KIND_BYTES || v->count != 1 ||
	    bfs_image_sniff(v->b[0].data, v->b[0].len) == BFS_IMAGE_UNKNOWN ||
	    bfs_image_probe(v->b[0].data, v->b[0].len, &fmt, &w, &h) != 0)
		return false;
	sb_printf(sb, "%s %ux%u (%zu bytes)", bfs_image_fmt_name(fmt), w, h, v->b[0].len);
	return true;
}

/* "int64 [1, 2, ... (3 more)]" for one feature or step. */
static void sb_values(struct sbuf *sb, const struct bfs_values *v, size_t max_values)
{
	size_t shown = v->count < max_values ? v->count : max_values;

	if (v->kind == BFS_KIND_NONE) {
		sb_printf(sb, "none");
		return;
	}
	if (sb_image(sb, v))
		return;
	sb_printf(sb, "%s [", bfs_kind_name(v->kind));
	if (v->kind == BFS_KIND_BYTES) {
		uint64_t total = 0;
		bool summary = false;
		for (size_t i = 0; i < v->count; i++) {
			total += v->b[i].len;
			if (v->b[i].len > TEXT_MAX_BYTES)
				summary = true;
		}
		if (summary) {
			sb_printf(sb, "%zu value%s, %llu bytes]", v->count,
				  v->count == 1 ? "" : "s", (unsigned long long)total);
			return;
		}
	}
	for (size_t i = 0; i < shown && !sb->err; i++) {
		if (i)
			sb_printf(sb, ", ");
		switch (v->kind) {
		case BFS_KIND_FLOAT:
			sb_printf(sb, "%.9g", (double)v->f[i]);
			break;
		case BFS_KIND_INT64:
			sb_printf(sb, "%lld", (long long)v->i[i]);
			break;
		default:
			sb_putc(sb, '"');
			sb_escaped(sb, v->b[i].data, v->b[i].len);
			sb_putc(sb, '"');
			break;
		}
	}
	if (shown < v->count)
		sb_printf(sb, "%s... (%zu more)", shown ? ", " : "", v->count - shown);
	sb_putc(sb, ']');
}

static void sb_name(struct sbuf *sb, const char *name)
{
	sb_escaped(sb, (const uint8_t *)name, strlen(name));
}

int bfs_example_to_text(char **out, const struct bfs_example *ex, size_t max_values)
{
	struct sbuf sb = { 0 };

	sb_printf(&sb, "%s {\n", ex->is_sequence ? "context" : "features");
	for (size_t i = 0; i < ex->nfeatures && !sb.err; i++) {
		sb_printf(&sb, "  ");
		sb_name(&sb, ex->features[i].name);
		sb_printf(&sb, ": ");
		sb_values(&sb, &ex->features[i].v, max_values);
		sb_putc(&sb, '\n');
	}
	sb_printf(&sb, "}\n");
	if (ex->is_sequence) {
		sb_printf(&sb, "feature_lists {\n");
		for (size_t i = 0; i < ex->nlists && !sb.err; i++) {
			const struct bfs_feature_list *l = &ex->lists[i];
			size_t shown = l->nsteps < max_values ? l->nsteps : max_values;
			sb_printf(&sb, "  ");
			sb_name(&sb, l->name);
			sb_printf(&sb, ": %zu step%s\n", l->nsteps, l->nsteps == 1 ? "" : "s");
			for (size_t j = 0; j < shown && !sb.err; j++) {
				sb_printf(&sb, "    [%zu] ", j);
				sb_values(&sb, &l->steps[j], max_values);
				sb_putc(&sb, '\n');
			}
			if (shown < l->nsteps)
				sb_printf(&sb, "    ... (%zu more)\n", l->nsteps - shown);
		}
		sb_printf(&sb, "}\n");
	}
	if (sb.err) {
		free(sb.s);
		return bfs_err_set(sb.err, "example: cannot format text (%s)",
				   sb.err == -ENOMEM ? "out of memory" : "too large");
	}
	*out = sb.s;
	return 0;
}
