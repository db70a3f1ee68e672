/* SPDX-License-Identifier: Apache-2.0 */
/* tensor.c — output tensors of a schema, per-batch geometry, file headers. */
#include "tensor.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ALIGN 64
/* numpy >= 1.23 leaves room to grow the first axis in place; we write the
 * same header bytes numpy.save does. */
#define NPY_GROWTH_DIGITS 21

static enum bfs_dtype main_dtype(const struct bfs_feature_spec *f)
{
	if (f->prov == BFS_PROV_SOURCE)
		return BFS_DT_I32;
	switch (f->kind) {
	case BFS_KIND_FLOAT:
		return BFS_DT_F32;
	case BFS_KIND_INT64:
		return BFS_DT_I64;
	default:
		if (f->layout == BFS_LAYOUT_FIXED && f->dtype != BFS_DT_INVALID)
			return f->dtype;
		if (f->is_list && f->dtype != BFS_DT_INVALID)
			return f->dtype;
		return BFS_DT_U8;
	}
}

static int add_tmpl(struct bfs_plan *p, size_t *cap, const struct bfs_feature_spec *f,
		    const char *suffix, enum bfs_role role, enum bfs_dtype dt, int slot)
{
	struct bfs_tensor_tmpl *t;
	const char *prefix = f->is_list ? "feature_lists/" : "";
	size_t len;

	if (p->ntensors == *cap) {
		size_t ncap = *cap ? *cap * 2 : 16;
		void *n = realloc(p->t, ncap * sizeof(*p->t));
		if (!n)
			return -ENOMEM;
		p->t = n;
		*cap = ncap;
	}
	t = &p->t[p->ntensors];
	len = strlen(prefix) + strlen(f->name) + strlen(suffix) + 1;
	t->name = malloc(len);
	if (!t->name)
		return -ENOMEM;
	snprintf(t->name, len, "%s%s%s", prefix, f->name, suffix);
	t->spec = f;
	t->role = role;
	t->dtype = dt;
	t->ragged_slot = slot;
	p->ntensors++;
	return 0;
}

static int add_spec(struct bfs_plan *p, size_t *cap, const struct bfs_feature_spec *f)
{
	enum bfs_dtype dt = main_dtype(f);
	int rc = 0, slot;

	if (f->is_list) {
		rc = add_tmpl(p, cap, f, "", BFS_ROLE_MAIN, dt, -1);
		if (!rc)
			rc = add_tmpl(p, cap, f, ".lengths", BFS_ROLE_LENGTHS, BFS_DT_I32, -1);
		/* bytes are zero-padded per step: their lengths tell trailing
		 * zeros from padding */
		if (!rc && f->kind == BFS_KIND_BYTES)
			rc = add_tmpl(p, cap, f, ".value_lengths", BFS_ROLE_VALUE_LENGTHS,
				      BFS_DT_I32, -1);
		return rc;
	}
	switch (f->layout) {
	case BFS_LAYOUT_FIXED:
		rc = add_tmpl(p, cap, f, "", BFS_ROLE_MAIN, dt, -1);
		if (!rc && f->image && bfs_augment_on(&f->aug))
			rc = add_tmpl(p, cap, f, ".crop", BFS_ROLE_CROP, BFS_DT_I32, -1);
		if (!rc && f->image && bfs_augment_on(&f->aug))
			rc = add_tmpl(p, cap, f, ".flip", BFS_ROLE_FLIP, BFS_DT_U8, -1);
		return rc;
	case BFS_LAYOUT_PADDED:
		rc = add_tmpl(p, cap, f, "", BFS_ROLE_MAIN, dt, -1);
		if (!rc)
			rc = add_tmpl(p, cap, f, ".lengths", BFS_ROLE_LENGTHS, BFS_DT_I32, -1);
		return rc;
	case BFS_LAYOUT_RAGGED:
		slot = (int)p->nslots++;
		rc = add_tmpl(p, cap, f, ".values", BFS_ROLE_VALUES, dt, slot);
		if (!rc)
			rc = add_tmpl(p, cap, f, ".row_splits", BFS_ROLE_ROW_SPLITS, BFS_DT_I64,
				      slot);
		return rc;
	case BFS_LAYOUT_RAGGED2:
		slot = (int)p->nslots;
		p->nslots += 2;
		rc = add_tmpl(p, cap, f, ".values", BFS_ROLE_VALUES, BFS_DT_U8, slot);
		if (!rc)
			rc = add_tmpl(p, cap, f, ".value_splits", BFS_ROLE_VALUE_SPLITS, BFS_DT_I64,
				      slot);
		if (!rc)
			rc = add_tmpl(p, cap, f, ".row_splits", BFS_ROLE_ROW_SPLITS, BFS_DT_I64,
				      slot);
		return rc;
	}
	return bfs_err_set(-EINVAL, "feature '%s': unknown layout", f->name);
}

static int tmpl_cmp(const void *a, const void *b)
{
	return strcmp(((const struct bfs_tensor_tmpl *)a)->name,
		      ((const struct bfs_tensor_tmpl *)b)->name);
}

void bfs_plan_free(struct bfs_plan *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->ntensors; i++)
		free(p->t[i].name);
	free(p->t);
	free(p);
}

int bfs_plan_new(struct bfs_plan **out, const struct bfs_schema *s)
{
	struct bfs_plan *p = calloc(1, sizeof(*p));
	size_t cap = 0;
	int rc = 0;

	if (!p)
		return -ENOMEM;
	p->schema = s;
	for (size_t i = 0; i < s->nfeatures && !rc; i++)
		rc = add_spec(p, &cap, &s->features[i]);
	for (size_t i = 0; i < s->nlists && !rc; i++)
		rc = add_spec(p, &cap, &s->lists[i]);
	if (rc)
		goto fail;
	if (p->ntensors)
		qsort(p->t, p->ntensors, sizeof(*p->t), tmpl_cmp);
	for (size_t i = 1; i < p->ntensors; i++) {
		if (strcmp(p->t[i - 1].name, p->t[i].name) == 0) {
			rc = bfs_err_set(-EINVAL, "two outputs would both be named '%s'",
					 p->t[i].name);
			goto fail;
		}
	}
	*out = p;
	return 0;
fail:
	bfs_plan_free(p);
	return rc;
}

/* Shape of template t in a batch of `batch` records. */
static int tensor_shape(struct bfs_tensor_geom *g, const struct bfs_tensor_tmpl *t, uint64_t batch,
			const uint64_t *totals)
{
	const struct bfs_feature_spec *f = t->spec;

	g->ndim = 0;
	switch (t->role) {
	case BFS_ROLE_MAIN:
		g->shape[g->ndim++] = (int64_t)batch;
		if (f->is_list) {
			g->shape[g->ndim++] = f->max_steps;
			for (int d = 0; d < f->ndim; d++)
				g->shape[g->ndim++] = f->shape[d];
		} else if (f->layout == BFS_LAYOUT_PADDED) {
			g->shape[g->ndim++] = f->max_len;
		} else {
			for (int d = 0; d < f->ndim; d++)
				g->shape[g->ndim++] = f->shape[d];
		}
		break;
	case BFS_ROLE_LENGTHS:
		g->shape[g->ndim++] = (int64_t)batch;
		break;
	case BFS_ROLE_VALUES:
		/* RAGGED: total values; RAGGED2: total bytes */
		g->shape[g->ndim++] =
			(int64_t)totals[t->ragged_slot + (f->layout == BFS_LAYOUT_RAGGED2 ? 1 : 0)];
		break;
	case BFS_ROLE_VALUE_SPLITS:
		g->shape[g->ndim++] = (int64_t)totals[t->ragged_slot] + 1;
		break;
	case BFS_ROLE_ROW_SPLITS:
		g->shape[g->ndim++] = (int64_t)batch + 1;
		break;
	case BFS_ROLE_CROP:
		g->shape[g->ndim++] = (int64_t)batch;
		g->shape[g->ndim++] = 4;
		break;
	case BFS_ROLE_FLIP:
		g->shape[g->ndim++] = (int64_t)batch;
		break;
	case BFS_ROLE_VALUE_LENGTHS:
		/* the list's shape without its bytes: [B, steps(, values)] */
		g->shape[g->ndim++] = (int64_t)batch;
		g->shape[g->ndim++] = f->max_steps;
		for (int d = 0; d + 1 < f->ndim; d++)
			g->shape[g->ndim++] = f->shape[d];
		break;
	}
	for (int d = 0; d < g->ndim; d++)
		if (g->shape[d] < 0)
			return bfs_err_set(-EINVAL, "tensor '%s': dimension %d is not fixed",
					   t->name, d);
	return 0;
}

/* The decimal digits of v at dst (at most 20); returns how many. Headers
 * are built for every batch and chunk: this is what snprintf cost there. */
static size_t put_u64(char *dst, uint64_t v)
{
	char tmp[20];
	size_t n = 0;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	for (size_t i = 0; i < n; i++)
		dst[i] = tmp[n - 1 - i];
	return n;
}

static size_t put_i64(char *dst, int64_t v)
{
	if (v >= 0)
		return put_u64(dst, (uint64_t)v);
	dst[0] = '-';
	return 1 + put_u64(dst + 1, (uint64_t)0 - (uint64_t)v);
}

static size_t put_str(char *dst, const char *s)
{
	size_t n = strlen(s);

	memcpy(dst, s, n);
	return n;
}

int bfs_npy_header(char *dst, size_t dst_cap, enum bfs_dtype dt, int ndim, const int64_t *shape)
{
	char dict[512];
	int n, pad, total;
	size_t k = 0;

	/* the fixed text and up to 16 dimensions of 22 characters fit dict */
	if (ndim < 0 || ndim > 16)
		return -EINVAL;
	k += put_str(dict + k, "{'descr': '");
	k += put_str(dict + k, bfs_dtype_npy_descr(dt));
	k += put_str(dict + k, "', 'fortran_order': False, 'shape': (");
	for (int d = 0; d < ndim; d++) {
		if (d)
			k += put_str(dict + k, ", ");
		k += put_i64(dict + k, shape[d]);
	}
	k += put_str(dict + k, ndim == 1 ? ",), }" : "), }");
	if (ndim > 0) {
		char first[24];
		size_t digits = put_i64(first, shape[0]);
		for (size_t i = digits; i < NPY_GROWTH_DIGITS; i++)
			dict[k++] = ' ';
	}
	n = (int)k;
	/* magic(6) + version(2) + hlen(2) + dict + pad + '\n' */
	pad = ALIGN - ((10 + n + 1) % ALIGN);
	total = 10 + n + pad + 1;
	if ((size_t)total > dst_cap || total > 65535)
		return -EFBIG;
	memcpy(dst, "\x93NUMPY\x01\x00", 8);
	dst[8] = (char)((total - 10) & 0xff);
	dst[9] = (char)((total - 10) >> 8);
	memcpy(dst + 10, dict, (size_t)n);
	memset(dst + 10 + n, ' ', (size_t)pad);
	dst[total - 1] = '\n';
	return total;
}

/* JSON string body for a tensor name: escape what JSON requires. */
static size_t json_escape(char *dst, size_t cap, const char *s)
{
	size_t n = 0;

	for (; *s; s++) {
		char tmp[7];
		size_t k = bfs_json_char(tmp, (unsigned char)*s);

		if (dst && n + k <= cap)
			memcpy(dst + n, tmp, k);
		n += k;
	}
	return n;
}

/* Append to a growing buffer. */
struct sbuf {
	char *p;
	size_t len, cap;
	int err;
};

static void sb_reserve(struct sbuf *b, size_t more)
{
	if (b->err || b->len + more + 1 <= b->cap)
		return;
	size_t ncap = b->cap ? b->cap : 256;
	while (ncap < b->len + more + 1)
		ncap *= 2;
	char *n = realloc(b->p, ncap);
	if (!n) {
		b->err = -ENOMEM;
		return;
	}
	b->p = n;
	b->cap = ncap;
}

static void sb_put(struct sbuf *b, const char *str)
{
	size_t n = strlen(str);

	sb_reserve(b, n);
	if (b->err)
		return;
	memcpy(b->p + b->len, str, n + 1);
	b->len += n;
}

static void sb_i64(struct sbuf *b, int64_t v)
{
	sb_reserve(b, 21);
	if (b->err)
		return;
	b->len += put_i64(b->p + b->len, v);
	b->p[b->len] = '\0';
}

static void sb_u64(struct sbuf *b, uint64_t v)
{
	sb_reserve(b, 20);
	if (b->err)
		return;
	b->len += put_u64(b->p + b->len, v);
	b->p[b->len] = '\0';
}

static void sb_name(struct sbuf *b, const char *name)
{
	size_t n = json_escape(NULL, 0, name);
	sb_reserve(b, n);
	if (b->err)
		return;
	json_escape(b->p + b->len, n, name);
	b->len += n;
	b->p[b->len] = '\0';
}

void bfs_geom_free(struct bfs_geom *l)
{
	if (!l)
		return;
	free(l->g);
	free(l->st_header);
	free(l);
}

int bfs_geom_dup(struct bfs_geom **out, const struct bfs_geom *g)
{
	struct bfs_geom *l = malloc(sizeof(*l));

	if (!l)
		return -ENOMEM;
	*l = *g;
	l->g = malloc((g->ntensors ? g->ntensors : 1) * sizeof(*l->g));
	l->st_header = malloc(g->st_hlen);
	if (!l->g || !l->st_header) {
		bfs_geom_free(l);
		return -ENOMEM;
	}
	memcpy(l->g, g->g, g->ntensors * sizeof(*l->g));
	memcpy(l->st_header, g->st_header, g->st_hlen);
	*out = l;
	return 0;
}

int bfs_geom_new(struct bfs_geom **out, const struct bfs_plan *p, uint64_t batch,
		 const uint64_t *totals, uint64_t max_bytes)
{
	struct bfs_geom *l = calloc(1, sizeof(*l));
	struct sbuf sb = { 0 };
	uint64_t off = 0;
	char hdr[1024];
	int rc;

	if (!l)
		return -ENOMEM;
	l->batch = batch;
	l->ntensors = p->ntensors;
	l->g = calloc(p->ntensors ? p->ntensors : 1, sizeof(*l->g));
	if (!l->g) {
		rc = -ENOMEM;
		goto fail;
	}
	sb_put(&sb, "{");
	for (size_t i = 0; i < p->ntensors; i++) {
		struct bfs_tensor_geom *g = &l->g[i];
		uint64_t n = bfs_dtype_size(p->t[i].dtype);

		rc = tensor_shape(g, &p->t[i], batch, totals);
		if (rc)
			goto fail;
		for (int d = 0; d < g->ndim; d++) {
			if (__builtin_mul_overflow(n, (uint64_t)g->shape[d], &n)) {
				rc = bfs_err_set(-EFBIG, "tensor '%s' is larger than 2^64 bytes",
						 p->t[i].name);
				goto fail;
			}
		}
		g->nbytes = n;
		g->offset = off;
		if (__builtin_add_overflow(off, n, &off) || (max_bytes && off > max_bytes)) {
			rc = bfs_err_set(-EFBIG,
					 "a batch of %llu records is larger than the limit of %llu "
					 "bytes (at tensor '%s')",
					 (unsigned long long)batch, (unsigned long long)max_bytes,
					 p->t[i].name);
			goto fail;
		}
		rc = bfs_npy_header(hdr, sizeof(hdr), p->t[i].dtype, g->ndim, g->shape);
		if (rc < 0)
			goto fail;
		g->npy_hlen = (uint32_t)rc;

		sb_put(&sb, i ? ",\"" : "\"");
		sb_name(&sb, p->t[i].name);
		sb_put(&sb, "\":{\"data_offsets\":[");
		sb_u64(&sb, g->offset);
		sb_put(&sb, ",");
		sb_u64(&sb, g->offset + g->nbytes);
		sb_put(&sb, "],\"dtype\":\"");
		sb_put(&sb, bfs_dtype_safetensors(p->t[i].dtype));
		sb_put(&sb, "\",\"shape\":[");
		for (int d = 0; d < g->ndim; d++) {
			if (d)
				sb_put(&sb, ",");
			sb_i64(&sb, g->shape[d]);
		}
		sb_put(&sb, "]}");
	}
	sb_put(&sb, "}");
	if (sb.err) {
		rc = sb.err;
		goto fail;
	}
	/* pad so that 8 + header is a multiple of ALIGN */
	size_t pad = (ALIGN - ((8 + sb.len) % ALIGN)) % ALIGN;
	size_t hl = sb.len + pad;
	l->st_hlen = 8 + hl;
	l->st_header = malloc(l->st_hlen);
	if (!l->st_header) {
		rc = -ENOMEM;
		goto fail;
	}
	for (int i = 0; i < 8; i++)
		l->st_header[i] = (char)((hl >> (8 * i)) & 0xff);
	memcpy(l->st_header + 8, sb.p, sb.len);
	memset(l->st_header + 8 + sb.len, ' ', pad);
	for (size_t i = 0; i < l->ntensors; i++)
		l->g[i].offset += l->st_hlen;
	if (__builtin_add_overflow(off, l->st_hlen, &l->st_size)) {
		rc = -EFBIG;
		goto fail;
	}
	free(sb.p);
	*out = l;
	return 0;
fail:
	free(sb.p);
	bfs_geom_free(l);
	return rc;
}
