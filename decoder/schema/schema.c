/* SPDX-License-Identifier: Apache-2.0 */
/*
 * schema.c — the dataset schema's vocabulary (see schema.h): valid feature
 * names, specs and schemas (free, clone, element counts), feature
 * selection (features=) and image= (a bytes feature decoded and resized
 * to [H, W, C]). Every entry point validates before it changes anything:
 * a failed bfs_schema_select leaves its schema as it was.
 *
 * JSON is schema_json.c, inference schema_infer.c, checking a record
 * schema_check.c (see schema_impl.h).
 *
 * Does not: read files, know FUSE, tensors or threads.
 */
#include "schema_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- names ---------------------------------------------------------------- */

/* Valid UTF-8 as JSON needs it: no overlong forms, surrogates or code
 * points over U+10FFFF. */
static bool utf8_valid(const unsigned char *s)
{
	while (*s) {
		unsigned c = *s++, n, cp, min;
		if (c < 0x80)
			continue;
		if ((c & 0xe0) == 0xc0) {
			n = 1;
			cp = c & 0x1f;
			min = 0x80;
		} else if ((c & 0xf0) == 0xe0) {
			n = 2;
			cp = c & 0x0f;
			min = 0x800;
		} else if ((c & 0xf8) == 0xf0) {
			n = 3;
			cp = c & 0x07;
			min = 0x10000;
		} else {
			return false;
		}
		for (unsigned i = 0; i < n; i++, s++) {
			if ((*s & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (*s & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
	}
	return true;
}

int bfs_schema_name_ok(const char *name)
{
	const char *p, *c;
	size_t n;

	if (!name || !name[0])
		return bfs_err_set(-EINVAL, "name '' is empty");
	n = strlen(name);
	if (name[0] == '/')
		return bfs_err_set(-EINVAL, "name '%.200s' starts with '/'", name);
	if (name[n - 1] == '/')
		return bfs_err_set(-EINVAL, "name '%.200s' ends with '/'", name);
	if (strstr(name, "//"))
		return bfs_err_set(-EINVAL, "name '%.200s' contains '//'", name);
	for (c = name;; c = p + 1) {
		size_t len;
		p = strchr(c, '/');
		len = p ? (size_t)(p - c) : strlen(c);
		if ((len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
			return bfs_err_set(-EINVAL, "name '%.200s' has a '%.*s' component", name,
					   (int)len, c);
		if (!p)
			break;
	}
	if (!utf8_valid((const unsigned char *)name))
		return bfs_err_set(-EINVAL, "name '%.200s' is not valid UTF-8", name);
	return 0;
}

/* ---- specs and schemas ---------------------------------------------------- */

const char *bfs_spec_what(const struct bfs_feature_spec *f)
{
	return f->is_list ? "feature list" : "feature";
}

/* "[224, 224, 3]" */
void bfs_spec_fmt_shape(char *dst, size_t cap, int ndim, const int64_t *shape)
{
	size_t n = 0;

	n += (size_t)snprintf(dst, cap, "[");
	for (int i = 0; i < ndim && n < cap; i++)
		n += (size_t)snprintf(dst + n, cap - n, "%s%lld", i ? ", " : "",
				      (long long)shape[i]);
	if (n < cap)
		snprintf(dst + n, cap - n, "]");
}

uint64_t bfs_spec_elems(const struct bfs_feature_spec *f)
{
	uint64_t p = 1;

	if (!f->is_list) {
		if (f->layout == BFS_LAYOUT_PADDED)
			return (uint64_t)f->max_len;
		if (f->layout != BFS_LAYOUT_FIXED)
			return 0;
	}
	for (int i = 0; i < f->ndim; i++) {
		if (f->shape[i] < 0 || __builtin_mul_overflow(p, (uint64_t)f->shape[i], &p))
			return 0;
	}
	return p;
}

void bfs_spec_names_free(struct bfs_feature_spec *f)
{
	for (size_t i = 0; i < f->nnames; i++)
		free(f->names[i]);
	free(f->names);
	f->names = NULL;
	f->nnames = 0;
}

void bfs_schema_free(struct bfs_schema *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nfeatures; i++) {
		free(s->features[i].name);
		bfs_spec_names_free(&s->features[i]);
	}
	for (size_t i = 0; i < s->nlists; i++)
		free(s->lists[i].name);
	for (size_t i = 0; i < s->nuntyped; i++)
		free(s->untyped[i]);
	free(s->features);
	free(s->lists);
	free(s->untyped);
	free(s);
}

int bfs_schema_untyped_add(struct bfs_schema *s, const char *name)
{
	size_t at = 0;
	char **a, *dup;

	while (at < s->nuntyped && strcmp(s->untyped[at], name) < 0)
		at++;
	if (at < s->nuntyped && strcmp(s->untyped[at], name) == 0)
		return 0;
	dup = strdup(name);
	a = dup ? realloc(s->untyped, (s->nuntyped + 1) * sizeof(*a)) : NULL;
	if (!a) {
		free(dup);
		return bfs_err_set(-ENOMEM, "schema: out of memory");
	}
	memmove(a + at + 1, a + at, (s->nuntyped - at) * sizeof(*a));
	a[at] = dup;
	s->untyped = a;
	s->nuntyped++;
	return 0;
}

bool bfs_schema_untyped_has(const struct bfs_schema *s, const char *name)
{
	for (size_t i = 0; i < s->nuntyped; i++)
		if (strcmp(s->untyped[i], name) == 0)
			return true;
	return false;
}

static int specs_clone(struct bfs_feature_spec **out, const struct bfs_feature_spec *src, size_t n)
{
	struct bfs_feature_spec *a;

	*out = NULL;
	if (!n)
		return 0;
	a = calloc(n, sizeof(*a));
	if (!a)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		bool ok;
		a[i] = src[i];
		a[i].names = NULL;
		a[i].nnames = 0;
		a[i].name = strdup(src[i].name);
		ok = a[i].name != NULL;
		if (ok && src[i].nnames) {
			a[i].names = calloc(src[i].nnames, sizeof(char *));
			ok = a[i].names != NULL;
			for (size_t k = 0; ok && k < src[i].nnames; k++) {
				a[i].names[k] = strdup(src[i].names[k]);
				ok = a[i].names[k] != NULL;
				a[i].nnames = k + 1;
			}
		}
		if (!ok) {
			for (size_t j = 0; j <= i; j++) {
				free(a[j].name);
				bfs_spec_names_free(&a[j]);
			}
			free(a);
			return -ENOMEM;
		}
	}
	*out = a;
	return 0;
}

int bfs_schema_clone(struct bfs_schema **out, const struct bfs_schema *s)
{
	struct bfs_schema *c = calloc(1, sizeof(*c));

	if (!c)
		goto nomem;
	if (specs_clone(&c->features, s->features, s->nfeatures) < 0)
		goto nomem;
	c->nfeatures = s->nfeatures;
	if (specs_clone(&c->lists, s->lists, s->nlists) < 0)
		goto nomem;
	c->nlists = s->nlists;
	for (size_t i = 0; i < s->nuntyped; i++)
		if (bfs_schema_untyped_add(c, s->untyped[i]) != 0)
			goto nomem;
	*out = c;
	return 0;
nomem:
	bfs_schema_free(c);
	return bfs_err_set(-ENOMEM, "schema: out of memory");
}

static int spec_name_cmp(const void *a, const void *b)
{
	return strcmp(((const struct bfs_feature_spec *)a)->name,
		      ((const struct bfs_feature_spec *)b)->name);
}

int bfs_schema_add_feature(struct bfs_schema *s, const struct bfs_feature_spec *f)
{
	struct bfs_feature_spec *copy, *a;

	if (specs_clone(&copy, f, 1) < 0)
		return bfs_err_set(-ENOMEM, "schema: out of memory");
	a = realloc(s->features, (s->nfeatures + 1) * sizeof(*a));
	if (!a) {
		free(copy->name);
		bfs_spec_names_free(copy);
		free(copy);
		return bfs_err_set(-ENOMEM, "schema: out of memory");
	}
	a[s->nfeatures++] = *copy;
	free(copy);
	s->features = a;
	qsort(s->features, s->nfeatures, sizeof(*s->features), spec_name_cmp);
	for (size_t i = 0; i < s->nuntyped; i++)
		if (strcmp(s->untyped[i], f->name) == 0) {
			free(s->untyped[i]);
			memmove(s->untyped + i, s->untyped + i + 1,
				(s->nuntyped - i - 1) * sizeof(*s->untyped));
			s->nuntyped--;
			break;
		}
	return 0;
}

int bfs_schema_add_provenance(struct bfs_schema *s)
{
	static const char *const names[] = { "_source", "_record" };
	struct bfs_feature_spec *a;

	for (size_t i = 0; i < 2; i++)
		for (size_t j = 0; j < s->nfeatures; j++)
			if (strcmp(s->features[j].name, names[i]) == 0)
				return bfs_err_set(-EINVAL,
						   "feature '%s' of the sources clashes with the "
						   "mixture's provenance file (leave it out with "
						   "features=)",
						   names[i]);
	a = realloc(s->features, (s->nfeatures + 2) * sizeof(*a));
	if (!a)
		return -ENOMEM;
	s->features = a;
	for (size_t i = 0; i < 2; i++) {
		struct bfs_feature_spec *f = &a[s->nfeatures];

		memset(f, 0, sizeof(*f));
		f->name = strdup(names[i]);
		if (!f->name)
			return -ENOMEM;
		f->kind = BFS_KIND_INT64;
		f->layout = BFS_LAYOUT_FIXED;
		f->dtype = i == 0 ? BFS_DT_I32 : BFS_DT_I64;
		f->has_default = true; /* never read from a record */
		f->prov = i == 0 ? BFS_PROV_SOURCE : BFS_PROV_RECORD;
		s->nfeatures++;
	}
	qsort(s->features, s->nfeatures, sizeof(*s->features), spec_name_cmp);
	return 0;
}

enum bfs_dtype bfs_spec_default_dtype(enum bfs_kind k)
{
	return k == BFS_KIND_FLOAT ? BFS_DT_F32 : k == BFS_KIND_INT64 ? BFS_DT_I64 : BFS_DT_U8;
}

/* ---- selection ---------------------------------------------------------------- */

/* strcmp(name, item[0..len)) */
static int cmp_n(const char *name, const char *item, size_t len)
{
	int c = strncmp(name, item, len);

	if (c)
		return c;
	return name[len] != '\0';
}

ssize_t bfs_spec_find_n(const struct bfs_feature_spec *a, size_t n, const char *item, size_t len)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = cmp_n(a[mid].name, item, len);
		if (c == 0)
			return (ssize_t)mid;
		if (c > 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return -1;
}

/* Keep the specs whose flag is set; free the others' names. */
static void specs_keep(struct bfs_feature_spec *a, size_t *n, const bool *keep)
{
	size_t k = 0;

	for (size_t i = 0; i < *n; i++) {
		if (keep[i]) {
			a[k++] = a[i];
		} else {
			free(a[i].name);
			bfs_spec_names_free(&a[i]);
		}
	}
	*n = k;
}

int bfs_schema_select(struct bfs_schema *s, const char *csv)
{
	static const char prefix[] = "feature_lists/";
	const size_t plen = sizeof(prefix) - 1;
	bool *keep_f = NULL, *keep_l = NULL, *keep_u = NULL;
	const char *p = csv;
	size_t k = 0;
	int err = 0;

	if (!csv || !csv[0])
		return bfs_err_set(-EINVAL, "features=: empty list of features");
	keep_f = calloc(s->nfeatures + 1, sizeof(bool));
	keep_l = calloc(s->nlists + 1, sizeof(bool));
	keep_u = calloc(s->nuntyped + 1, sizeof(bool));
	if (!keep_f || !keep_l || !keep_u) {
		err = bfs_err_set(-ENOMEM, "schema: out of memory");
		goto out;
	}
	for (;;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		ssize_t at = -1;

		if (!len) {
			err = bfs_err_set(-EINVAL, "features=: empty name in '%.200s'", csv);
			goto out;
		}
		if (len > plen && strncmp(p, prefix, plen) == 0) {
			at = bfs_spec_find_n(s->lists, s->nlists, p + plen, len - plen);
			if (at >= 0)
				keep_l[at] = true;
		}
		if (at < 0) {
			at = bfs_spec_find_n(s->features, s->nfeatures, p, len);
			if (at >= 0)
				keep_f[at] = true;
		}
		/* an untyped name is kept: a mixture's merge may type it */
		for (size_t u = 0; at < 0 && u < s->nuntyped; u++)
			if (cmp_n(s->untyped[u], p, len) == 0) {
				keep_u[u] = true;
				at = (ssize_t)u;
			}
		if (at < 0) {
			err = bfs_err_set(-ENOENT, "features=: no feature '%.*s' in the schema",
					  (int)(len > 200 ? 200 : len), p);
			goto out;
		}
		if (!comma)
			break;
		p = comma + 1;
	}
	specs_keep(s->features, &s->nfeatures, keep_f);
	specs_keep(s->lists, &s->nlists, keep_l);
	for (size_t u = 0; u < s->nuntyped; u++) {
		if (keep_u[u])
			s->untyped[k++] = s->untyped[u];
		else
			free(s->untyped[u]);
	}
	s->nuntyped = k;
out:
	free(keep_f);
	free(keep_l);
	free(keep_u);
	return err;
}

/* ---- image= --------------------------------------------------------------------------- */

/* "224" -> 224 in 1..max; -1 when not a plain decimal in range. */
static long dim_parse(const char *p, size_t len, long max)
{
	long v = 0;

	if (len == 0 || len > 6)
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (p[i] < '0' || p[i] > '9')
			return -1;
		v = v * 10 + (p[i] - '0');
	}
	return v >= 1 && v <= max ? v : -1;
}

int bfs_schema_set_image(struct bfs_schema *s, const char *arg)
{
	const char *colon = strrchr(arg, ':'), *size, *x;
	size_t name_len, size_len;
	long h, w, c = 3;
	ssize_t at;
	struct bfs_feature_spec *f;

	if (!colon)
		return bfs_err_set(-EINVAL, "image=%.200s: expected FEATURE:HxW[:C]", arg);
	/* FEATURE:HxW:C when the last part is the channel count */
	if (!strchr(colon + 1, 'x') && colon > arg) {
		const char *prev = colon - 1;
		while (prev > arg && *prev != ':')
			prev--;
		if (*prev != ':')
			return bfs_err_set(-EINVAL, "image=%.200s: expected FEATURE:HxW[:C]", arg);
		c = dim_parse(colon + 1, strlen(colon + 1), 4);
		if (c != 1 && c != 3 && c != 4)
			return bfs_err_set(-EINVAL, "image=%.200s: channels must be 1, 3 or 4",
					   arg);
		size = prev + 1;
		size_len = (size_t)(colon - size);
		name_len = (size_t)(prev - arg);
	} else {
		size = colon + 1;
		size_len = strlen(size);
		name_len = (size_t)(colon - arg);
	}
	x = memchr(size, 'x', size_len);
	h = x ? dim_parse(size, (size_t)(x - size), UINT16_MAX) : -1;
	w = x ? dim_parse(x + 1, size_len - (size_t)(x + 1 - size), UINT16_MAX) : -1;
	if (h < 0 || w < 0)
		return bfs_err_set(-EINVAL,
				   "image=%.200s: size must be HxW with H and W in 1..65535", arg);
	at = name_len ? bfs_spec_find_n(s->features, s->nfeatures, arg, name_len) : -1;
	if (at < 0)
		return bfs_err_set(-ENOENT, "image=%.200s: no feature '%.*s' in the schema", arg,
				   (int)(name_len > 200 ? 200 : name_len), arg);
	f = &s->features[at];
	if (f->kind != BFS_KIND_BYTES)
		return bfs_err_set(-EINVAL, "image=%.200s: feature '%.200s' is %s, not bytes", arg,
				   f->name, bfs_kind_name(f->kind));
	if (f->layout == BFS_LAYOUT_RAGGED2)
		return bfs_err_set(-EINVAL,
				   "image=%.200s: feature '%.200s' has several values per record, "
				   "an image feature one",
				   arg, f->name);
	f->layout = BFS_LAYOUT_FIXED;
	f->dtype = BFS_DT_U8;
	f->ndim = 3;
	f->shape[0] = h;
	f->shape[1] = w;
	f->shape[2] = c;
	f->max_len = 0;
	f->image = true;
	f->resize = BFS_RESIZE_STRETCH;
	f->filter = BFS_FILTER_BILINEAR;
	bfs_augment_init(&f->aug);
	return 0;
}

/* ---- crop=, flip= ---------------------------------------------------------------------- */

/* "crop=random", "crop_scale=0.5:1": the option of bit as given in a */
static void aug_option(char *dst, size_t cap, const struct bfs_augment *a, unsigned bit)
{
	if (bit == BFS_AUG_SET_CROP)
		snprintf(dst, cap, "crop=%s", bfs_crop_name(a->crop));
	else if (bit == BFS_AUG_SET_FLIP)
		snprintf(dst, cap, "flip=%s", a->flip ? "h" : "none");
	else if (bit == BFS_AUG_SET_SCALE)
		snprintf(dst, cap, "crop_scale=%g:%g", a->scale[0], a->scale[1]);
	else if (bit == BFS_AUG_SET_RATIO)
		snprintf(dst, cap, "crop_ratio=%g:%g", a->ratio[0], a->ratio[1]);
	else
		snprintf(dst, cap, "crop_resize=%u", a->resize);
}

int bfs_schema_set_augment(struct bfs_schema *s, const struct bfs_augment *a, unsigned mask)
{
	unsigned images = 0, random = 0, center = 0, unused;
	char opt[96];

	for (size_t i = 0; i < s->nfeatures; i++) {
		struct bfs_feature_spec *f = &s->features[i];
		struct bfs_augment *g = &f->aug;

		if (!f->image)
			continue;
		images++;
		if (mask & BFS_AUG_SET_CROP)
			g->crop = a->crop;
		if (mask & BFS_AUG_SET_FLIP)
			g->flip = a->flip;
		if (mask & BFS_AUG_SET_SCALE)
			memcpy(g->scale, a->scale, sizeof(g->scale));
		if (mask & BFS_AUG_SET_RATIO)
			memcpy(g->ratio, a->ratio, sizeof(g->ratio));
		if (mask & BFS_AUG_SET_RESIZE)
			g->resize = a->resize;
		random += g->crop == BFS_CROP_RANDOM;
		center += g->crop == BFS_CROP_CENTER;
		if (bfs_augment_check(g, (uint32_t)f->shape[0], (uint32_t)f->shape[1])) {
			char why[256];

			snprintf(why, sizeof(why), "%s", bfs_err_msg());
			return bfs_err_set(-EINVAL, "image feature '%.200s' (%lldx%lld): %s",
					   f->name, (long long)f->shape[0], (long long)f->shape[1],
					   why);
		}
	}
	if (mask && !images) {
		aug_option(opt, sizeof(opt), a, mask & -mask);
		return bfs_err_set(-ENOENT,
				   "option '%s': no image feature to augment (decode one with "
				   "image=FEATURE:HxW)",
				   opt);
	}
	unused = mask & (random ? 0 : BFS_AUG_SET_SCALE | BFS_AUG_SET_RATIO);
	unused |= mask & (center ? 0 : BFS_AUG_SET_RESIZE);
	if (unused) {
		aug_option(opt, sizeof(opt), a, unused & -unused);
		return bfs_err_set(-EINVAL,
				   "option '%s': applies to crop=%s, and no image feature has it",
				   opt, unused & BFS_AUG_SET_RESIZE ? "center" : "random");
	}
	return 0;
}
