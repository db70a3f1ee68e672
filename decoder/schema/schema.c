/*
 * schema.c — the dataset schema: inference from decoded records, JSON in
 * and out (the only file that includes jansson), validation of a record
 * against a schema, and feature selection.
 *
 * Inference keeps one small statistics record per typed feature name,
 * sorted by name like the records themselves, so adding a record is one
 * merge walk. Every entry point validates before it changes anything: a
 * failed bfs_infer_add or bfs_schema_select leaves its object as it was.
 *
 * Does not: read files, know FUSE, tensors or threads.
 */
#include "schema.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include <jansson.h>

/* Most distinct typed names one inference tracks (features + lists). */
#define INFER_MAX_NAMES 100000

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

static const char *spec_what(const struct bfs_feature_spec *f)
{
	return f->is_list ? "feature list" : "feature";
}

/* "[224, 224, 3]" */
static void fmt_shape(char *dst, size_t cap, int ndim, const int64_t *shape)
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

static void names_free(struct bfs_feature_spec *f)
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
		names_free(&s->features[i]);
	}
	for (size_t i = 0; i < s->nlists; i++)
		free(s->lists[i].name);
	free(s->features);
	free(s->lists);
	free(s);
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
				names_free(&a[j]);
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
	*out = c;
	return 0;
nomem:
	bfs_schema_free(c);
	return bfs_err_set(-ENOMEM, "schema: out of memory");
}

static int spec_cmp(const void *a, const void *b)
{
	return strcmp(((const struct bfs_feature_spec *)a)->name,
		      ((const struct bfs_feature_spec *)b)->name);
}

static enum bfs_dtype numeric_dtype(enum bfs_kind k)
{
	return k == BFS_KIND_FLOAT ? BFS_DT_F32 : k == BFS_KIND_INT64 ? BFS_DT_I64 : BFS_DT_U8;
}

/* ---- JSON in --------------------------------------------------------------- */

static int spec_err(const struct bfs_feature_spec *f, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int spec_err(const struct bfs_feature_spec *f, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return bfs_err_set(-EINVAL, "schema: %s '%.200s': %s", spec_what(f), f->name, msg);
}

/* "pad" / "default": an integer for int64, a finite float32 for float. */
static int scalar_from_json(const struct bfs_feature_spec *f, const char *key, json_t *v,
			    union bfs_scalar *out)
{
	if (f->kind == BFS_KIND_INT64) {
		if (!json_is_integer(v))
			return spec_err(f, "\"%s\" must be an integer for kind int64", key);
		out->i = (int64_t)json_integer_value(v);
		return 0;
	}
	if (!json_is_number(v))
		return spec_err(f, "\"%s\" must be a number", key);
	out->f = json_number_value(v);
	if (!isfinite(out->f) || fabs(out->f) > FLT_MAX)
		return spec_err(f, "\"%s\" %g is out of float32 range", key, out->f);
	return 0;
}

/* "names": class names of an int64 label. */
static int names_from_json(struct bfs_feature_spec *f, json_t *jn)
{
	size_t n;

	if (!jn)
		return 0;
	if (f->kind != BFS_KIND_INT64 || f->is_list || !json_is_array(jn))
		return spec_err(f, "\"names\" must be an array of strings on an int64 feature");
	n = json_array_size(jn);
	if (n > 10000000)
		return spec_err(f, "\"names\" has %zu entries, too many", n);
	for (size_t i = 0; i < n; i++)
		if (!json_is_string(json_array_get(jn, i)))
			return spec_err(f, "\"names\" entry %zu is not a string", i);
	f->names = calloc(n ? n : 1, sizeof(char *));
	if (!f->names)
		return bfs_err_set(-ENOMEM, "schema: out of memory");
	for (size_t i = 0; i < n; i++) {
		f->names[i] = strdup(json_string_value(json_array_get(jn, i)));
		if (!f->names[i])
			return bfs_err_set(-ENOMEM, "schema: out of memory");
		f->nnames = i + 1;
	}
	return 0;
}

/* "content"/"max_width"/"max_height" (inference's note) and "decode":
 * "image" with "resize" and "filter". */
static int image_from_json(struct bfs_feature_spec *f, json_t *obj, const char *shp)
{
	json_t *jdec = json_object_get(obj, "decode"), *jres = json_object_get(obj, "resize");
	json_t *jfil = json_object_get(obj, "filter"), *jcon = json_object_get(obj, "content");
	json_t *jmw = json_object_get(obj, "max_width"), *jmh = json_object_get(obj, "max_height");

	if (jcon) {
		if (f->kind != BFS_KIND_BYTES || f->is_list)
			return spec_err(f, "\"content\" only applies to a bytes feature");
		if (!json_is_string(jcon) ||
		    (f->content = bfs_image_fmt_parse(json_string_value(jcon))) ==
			    BFS_IMAGE_UNKNOWN)
			return spec_err(f, "\"content\" must be \"jpeg\" or \"png\"");
	}
	if ((jmw || jmh) && !jcon)
		return spec_err(f, "\"max_width\"/\"max_height\" only go with \"content\"");
	if (jmw && (!json_is_integer(jmw) || json_integer_value(jmw) < 0 ||
		    json_integer_value(jmw) > UINT32_MAX))
		return spec_err(f, "\"max_width\" must be an integer in 0..%u", UINT32_MAX);
	if (jmh && (!json_is_integer(jmh) || json_integer_value(jmh) < 0 ||
		    json_integer_value(jmh) > UINT32_MAX))
		return spec_err(f, "\"max_height\" must be an integer in 0..%u", UINT32_MAX);
	f->content_w = jmw ? (int64_t)json_integer_value(jmw) : 0;
	f->content_h = jmh ? (int64_t)json_integer_value(jmh) : 0;
	if (!jdec) {
		if (jres || jfil)
			return spec_err(
				f, "\"resize\"/\"filter\" only apply with \"decode\": \"image\"");
		return 0;
	}
	if (!json_is_string(jdec) || strcmp(json_string_value(jdec), "image") != 0)
		return spec_err(f, "\"decode\" must be \"image\"");
	if (f->kind != BFS_KIND_BYTES || f->is_list || f->layout != BFS_LAYOUT_FIXED)
		return spec_err(
			f,
			"\"decode\": \"image\" needs a bytes feature of fixed \"shape\" [H, W, C]");
	if (f->dtype != BFS_DT_U8)
		return spec_err(f, "\"decode\": \"image\" gives \"dtype\" \"uint8\", not \"%s\"",
				bfs_dtype_name(f->dtype));
	if (f->ndim != 3 || f->shape[0] < 1 || f->shape[1] < 1 || f->shape[0] > UINT16_MAX ||
	    f->shape[1] > UINT16_MAX || (f->shape[2] != 1 && f->shape[2] != 3 && f->shape[2] != 4))
		return spec_err(f,
				"bad \"shape\" %s for \"decode\": \"image\": [H, W, C] with H and "
				"W in 1..65535, C 1, 3 or 4",
				shp);
	f->image = true;
	if (jres &&
	    (!json_is_string(jres) || bfs_resize_parse(json_string_value(jres), &f->resize)))
		return spec_err(f, "\"resize\" must be \"stretch\", \"fit\" or \"crop\"");
	if (jfil &&
	    (!json_is_string(jfil) || bfs_filter_parse(json_string_value(jfil), &f->filter)))
		return spec_err(f, "\"filter\" must be \"bilinear\" or \"area\"");
	return 0;
}

static int spec_from_json(struct bfs_feature_spec *f, json_t *obj)
{
	static const char *const known[] = { "kind",	  "shape",	"dtype",  "max_len",
					     "pad",	  "default",	"ragged", "max_steps",
					     "decode",	  "resize",	"filter", "content",
					     "max_width", "max_height", "names" };
	json_t *jkind, *jshape, *jdtype, *jmax_len, *jpad, *jdflt, *jragged, *jsteps, *v;
	const char *key;
	char shp[160];
	bool ragged = false, has_neg = false;
	uint64_t elems = 1, nbytes;
	int err;

	err = bfs_schema_name_ok(f->name);
	if (err < 0)
		return spec_err(f, "cannot be a path: %s", bfs_err_msg());
	if (!json_is_object(obj))
		return spec_err(f, "must be a JSON object");
	json_object_foreach(obj, key, v)
	{
		size_t i;
		for (i = 0; i < BFS_ARRAY_SIZE(known); i++)
			if (strcmp(key, known[i]) == 0)
				break;
		if (i == BFS_ARRAY_SIZE(known))
			return spec_err(f, "unknown field \"%.100s\"", key);
	}
	jkind = json_object_get(obj, "kind");
	jshape = json_object_get(obj, "shape");
	jdtype = json_object_get(obj, "dtype");
	jmax_len = json_object_get(obj, "max_len");
	jpad = json_object_get(obj, "pad");
	jdflt = json_object_get(obj, "default");
	jragged = json_object_get(obj, "ragged");
	jsteps = json_object_get(obj, "max_steps");

	/* kind */
	if (!jkind)
		return spec_err(f, "\"kind\" is missing (bytes, float or int64)");
	if (!json_is_string(jkind) ||
	    (f->kind = bfs_kind_parse(json_string_value(jkind))) == BFS_KIND_NONE)
		return spec_err(f, "\"kind\" must be \"bytes\", \"float\" or \"int64\"");

	/* shape */
	if (!jshape)
		return spec_err(f, "\"shape\" is missing");
	if (!json_is_array(jshape))
		return spec_err(f, "\"shape\" must be an array of integers");
	if (json_array_size(jshape) > BFS_MAX_DIMS)
		return spec_err(f, "\"shape\" has %zu dimensions, at most %d allowed",
				json_array_size(jshape), BFS_MAX_DIMS);
	f->ndim = (int)json_array_size(jshape);
	for (int i = 0; i < f->ndim; i++) {
		json_t *d = json_array_get(jshape, (size_t)i);
		if (!json_is_integer(d))
			return spec_err(f, "\"shape\" must be an array of integers");
		f->shape[i] = (int64_t)json_integer_value(d);
		if (f->shape[i] < -1)
			return spec_err(f,
					"\"shape\" dimension %d is %lld (negative; only -1 is "
					"allowed, as [-1] or [-1, -1])",
					i, (long long)f->shape[i]);
		if (f->shape[i] == -1)
			has_neg = true;
		else if (f->shape[i] > BFS_MAX_LEN_CAP)
			return spec_err(f, "\"shape\" dimension %d is %lld, over the cap %lld", i,
					(long long)f->shape[i], (long long)BFS_MAX_LEN_CAP);
		else if (__builtin_mul_overflow(elems, (uint64_t)f->shape[i], &elems) ||
			 elems > (uint64_t)BFS_MAX_LEN_CAP)
			elems = (uint64_t)BFS_MAX_LEN_CAP + 1;
	}
	fmt_shape(shp, sizeof(shp), f->ndim, f->shape);

	/* ragged */
	if (jragged) {
		if (!json_is_boolean(jragged))
			return spec_err(f, "\"ragged\" must be true or false");
		ragged = json_is_true(jragged);
	}

	/* layout */
	if (f->is_list) {
		if (ragged)
			return spec_err(f, "\"ragged\" does not apply to a feature list");
		if (has_neg)
			return spec_err(f,
					"bad \"shape\" %s: the step shape of a feature list is "
					"fixed (no -1)",
					shp);
		if (f->kind == BFS_KIND_BYTES && f->ndim != 1 && f->ndim != 2)
			return spec_err(f,
					"bad \"shape\" %s: a bytes feature list takes [max_bytes] "
					"or [max_values, max_bytes]",
					shp);
		f->layout = BFS_LAYOUT_FIXED;
	} else if (ragged) {
		if (f->kind == BFS_KIND_BYTES) {
			if (f->ndim != 2 || f->shape[0] != -1 || f->shape[1] != -1)
				return spec_err(
					f,
					"bad \"shape\" %s: a ragged bytes feature takes [-1, -1]",
					shp);
			f->layout = BFS_LAYOUT_RAGGED2;
		} else {
			if (f->ndim != 1 || f->shape[0] != -1)
				return spec_err(f,
						"bad \"shape\" %s: a ragged %s feature takes [-1]",
						shp, bfs_kind_name(f->kind));
			f->layout = BFS_LAYOUT_RAGGED;
		}
	} else if (has_neg) {
		if (f->ndim == 1)
			f->layout = BFS_LAYOUT_PADDED;
		else if (f->kind == BFS_KIND_BYTES && f->ndim == 2 && f->shape[0] == -1 &&
			 f->shape[1] == -1)
			return spec_err(f, "bad \"shape\" [-1, -1]: needs \"ragged\": true");
		else
			return spec_err(f,
					"bad \"shape\" %s: -1 only as [-1] (padded or ragged) or "
					"[-1, -1] (ragged bytes)",
					shp);
	} else {
		f->layout = BFS_LAYOUT_FIXED;
	}

	/* dtype */
	if (f->kind != BFS_KIND_BYTES || f->is_list || f->layout != BFS_LAYOUT_FIXED) {
		f->dtype = numeric_dtype(f->kind);
		if (jdtype && (!json_is_string(jdtype) ||
			       bfs_dtype_parse(json_string_value(jdtype)) != f->dtype))
			return spec_err(f, "\"dtype\" must be \"%s\" for this %s %s (or left out)",
					bfs_dtype_name(f->dtype), bfs_kind_name(f->kind),
					spec_what(f));
	} else {
		f->dtype = BFS_DT_U8;
		if (jdtype) {
			if (!json_is_string(jdtype))
				return spec_err(f, "\"dtype\" must be a string");
			f->dtype = bfs_dtype_parse(json_string_value(jdtype));
			if (f->dtype == BFS_DT_INVALID)
				return spec_err(f, "unknown \"dtype\" \"%.40s\"",
						json_string_value(jdtype));
		}
	}

	/* sizes */
	if (elems > (uint64_t)BFS_MAX_LEN_CAP)
		return spec_err(f, "\"shape\" %s holds more than %lld values", shp,
				(long long)BFS_MAX_LEN_CAP);
	if (f->layout == BFS_LAYOUT_FIXED && f->kind == BFS_KIND_BYTES && !f->is_list) {
		nbytes = elems * bfs_dtype_size(f->dtype);
		if (nbytes > (uint64_t)BFS_MAX_LEN_CAP)
			return spec_err(f, "\"shape\" %s of %s is %llu bytes, over the cap %lld",
					shp, bfs_dtype_name(f->dtype), (unsigned long long)nbytes,
					(long long)BFS_MAX_LEN_CAP);
	}

	/* max_len */
	if (f->layout == BFS_LAYOUT_PADDED) {
		if (!jmax_len)
			return spec_err(f, "\"max_len\" is missing (needed by shape [-1] unless "
					   "\"ragged\": true)");
		if (!json_is_integer(jmax_len) || json_integer_value(jmax_len) < 0 ||
		    json_integer_value(jmax_len) > BFS_MAX_LEN_CAP)
			return spec_err(f, "\"max_len\" must be an integer in 0..%lld",
					(long long)BFS_MAX_LEN_CAP);
		f->max_len = (int64_t)json_integer_value(jmax_len);
	} else if (jmax_len) {
		return spec_err(f, "\"max_len\" only applies to shape [-1] without \"ragged\"");
	}

	/* max_steps */
	if (f->is_list) {
		if (!jsteps)
			return spec_err(f, "\"max_steps\" is missing");
		if (!json_is_integer(jsteps) || json_integer_value(jsteps) < 0 ||
		    json_integer_value(jsteps) > BFS_MAX_LEN_CAP)
			return spec_err(f, "\"max_steps\" must be an integer in 0..%lld",
					(long long)BFS_MAX_LEN_CAP);
		f->max_steps = (int64_t)json_integer_value(jsteps);
		if (f->max_steps && elems > (uint64_t)BFS_MAX_LEN_CAP / (uint64_t)f->max_steps)
			return spec_err(f,
					"\"max_steps\" %lld of shape %s hold more than %lld values",
					(long long)f->max_steps, shp, (long long)BFS_MAX_LEN_CAP);
	} else if (jsteps) {
		return spec_err(f, "\"max_steps\" only applies under \"feature_lists\"");
	}

	/* pad */
	if (jpad) {
		bool ok =
			f->kind != BFS_KIND_BYTES && (f->is_list || f->layout == BFS_LAYOUT_PADDED);
		if (!ok)
			return spec_err(f, "\"pad\" only applies to padded numeric features and "
					   "numeric feature lists");
		err = scalar_from_json(f, "pad", jpad, &f->pad);
		if (err < 0)
			return err;
	}

	/* default */
	if (jdflt) {
		if (f->is_list || f->kind == BFS_KIND_BYTES || f->layout != BFS_LAYOUT_FIXED)
			return spec_err(f,
					"\"default\" only applies to fixed-shape numeric features");
		err = scalar_from_json(f, "default", jdflt, &f->dflt);
		if (err < 0)
			return err;
		f->has_default = true;
	}
	err = names_from_json(f, json_object_get(obj, "names"));
	if (err < 0)
		return err;
	return image_from_json(f, obj, shp);
}

/* Parse the specs of one JSON object ("features" or "feature_lists"). */
static int specs_from_json(struct bfs_feature_spec **out, size_t *nout, json_t *obj, bool is_list)
{
	const char *sect = is_list ? "feature_lists" : "features";
	struct bfs_feature_spec *a = NULL;
	size_t n = 0, cap;
	const char *key;
	json_t *v;
	int err;

	*out = NULL;
	*nout = 0;
	if (!obj)
		return 0;
	if (!json_is_object(obj))
		return bfs_err_set(-EINVAL, "schema: \"%s\" must be a JSON object", sect);
	cap = json_object_size(obj);
	if (!cap)
		return 0;
	a = calloc(cap, sizeof(*a));
	if (!a)
		return bfs_err_set(-ENOMEM, "schema: out of memory");
	json_object_foreach(obj, key, v)
	{
		struct bfs_feature_spec *f = &a[n];
		f->is_list = is_list;
		f->name = strdup(key);
		if (!f->name) {
			err = bfs_err_set(-ENOMEM, "schema: out of memory");
			goto out_free;
		}
		n++;
		err = spec_from_json(f, v);
		if (err < 0)
			goto out_free;
	}
	qsort(a, n, sizeof(*a), spec_cmp);
	for (size_t i = 1; i < n; i++) {
		if (strcmp(a[i - 1].name, a[i].name) == 0) {
			err = bfs_err_set(-EINVAL, "schema: \"%s\" names '%.200s' twice", sect,
					  a[i].name);
			goto out_free;
		}
	}
	*out = a;
	*nout = n;
	return 0;

out_free:
	for (size_t i = 0; i < n; i++) {
		free(a[i].name);
		names_free(&a[i]);
	}
	free(a);
	return err;
}

/* Top-level fields a mount writes into schema.json; accepted and ignored. */
static bool is_fact_key(const char *key)
{
	static const char *const facts[] = { "records", "batch_size", "batches_per_epoch",
					     "seed",	"shuffle",    "rank",
					     "world",	"shards" };

	for (size_t i = 0; i < BFS_ARRAY_SIZE(facts); i++)
		if (strcmp(key, facts[i]) == 0)
			return true;
	return false;
}

int bfs_schema_from_json(struct bfs_schema **out, const char *text, size_t len)
{
	struct bfs_schema *s = NULL;
	json_error_t jerr;
	json_t *root, *v;
	const char *key;
	int err;

	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return bfs_err_set(-EINVAL, "schema: JSON error at line %d, column %d: %s",
				   jerr.line, jerr.column, jerr.text);
	if (!json_is_object(root)) {
		err = bfs_err_set(-EINVAL, "schema: the top level must be a JSON object");
		goto out_root;
	}
	json_object_foreach(root, key, v)
	{
		if (strcmp(key, "features") && strcmp(key, "feature_lists") && !is_fact_key(key)) {
			err = bfs_err_set(-EINVAL,
					  "schema: unknown top-level field \"%.100s\" (expected "
					  "\"features\", \"feature_lists\")",
					  key);
			goto out_root;
		}
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		err = bfs_err_set(-ENOMEM, "schema: out of memory");
		goto out_root;
	}
	err = specs_from_json(&s->features, &s->nfeatures, json_object_get(root, "features"),
			      false);
	if (err < 0)
		goto out_schema;
	err = specs_from_json(&s->lists, &s->nlists, json_object_get(root, "feature_lists"), true);
	if (err < 0)
		goto out_schema;
	json_decref(root);
	*out = s;
	return 0;

out_schema:
	bfs_schema_free(s);
out_root:
	json_decref(root);
	return err;
}

/* ---- JSON out --------------------------------------------------------------- */

/* An integer for values that fit json_int_t, a decimal string otherwise. */
static json_t *json_u64(uint64_t v)
{
	char buf[24];

	if (v <= (uint64_t)INT64_MAX)
		return json_integer((json_int_t)v);
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
	return json_string(buf);
}

static json_t *json_scalar(const struct bfs_feature_spec *f, union bfs_scalar v)
{
	return f->kind == BFS_KIND_INT64 ? json_integer((json_int_t)v.i) : json_real(v.f);
}

/* json_object_set_new that tracks failure (NULL value or no memory). */
static void set_new(json_t *obj, const char *key, json_t *v, bool *ok)
{
	if (!v || json_object_set_new(obj, key, v) < 0)
		*ok = false;
}

static json_t *spec_to_json(const struct bfs_feature_spec *f)
{
	json_t *o = json_object(), *shape = json_array();
	bool ok = o && shape;

	for (int i = 0; ok && i < f->ndim; i++)
		if (json_array_append_new(shape, json_integer((json_int_t)f->shape[i])) < 0)
			ok = false;
	if (!ok) {
		json_decref(o);
		json_decref(shape);
		return NULL;
	}
	set_new(o, "shape", shape, &ok);
	set_new(o, "kind", json_string(bfs_kind_name(f->kind)), &ok);
	set_new(o, "dtype", json_string(bfs_dtype_name(f->dtype)), &ok);
	if (f->is_list) {
		set_new(o, "max_steps", json_integer((json_int_t)f->max_steps), &ok);
		if (f->kind != BFS_KIND_BYTES)
			set_new(o, "pad", json_scalar(f, f->pad), &ok);
	} else if (f->layout == BFS_LAYOUT_PADDED) {
		set_new(o, "max_len", json_integer((json_int_t)f->max_len), &ok);
		if (f->kind != BFS_KIND_BYTES)
			set_new(o, "pad", json_scalar(f, f->pad), &ok);
	} else if (f->layout == BFS_LAYOUT_RAGGED || f->layout == BFS_LAYOUT_RAGGED2) {
		set_new(o, "ragged", json_true(), &ok);
	} else if (f->has_default) {
		set_new(o, "default", json_scalar(f, f->dflt), &ok);
	}
	if (f->image) {
		set_new(o, "decode", json_string("image"), &ok);
		set_new(o, "resize", json_string(bfs_resize_name(f->resize)), &ok);
		set_new(o, "filter", json_string(bfs_filter_name(f->filter)), &ok);
	}
	if (f->nnames) {
		json_t *a = json_array();
		for (size_t i = 0; a && i < f->nnames; i++)
			if (json_array_append_new(a, json_string(f->names[i])) < 0) {
				json_decref(a);
				a = NULL;
			}
		set_new(o, "names", a, &ok);
	}
	if (f->content != BFS_IMAGE_UNKNOWN) {
		set_new(o, "content", json_string(bfs_image_fmt_name(f->content)), &ok);
		set_new(o, "max_width", json_integer((json_int_t)f->content_w), &ok);
		set_new(o, "max_height", json_integer((json_int_t)f->content_h), &ok);
	}
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *specs_to_json(const struct bfs_feature_spec *a, size_t n)
{
	json_t *o = json_object();
	bool ok = o != NULL;

	for (size_t i = 0; ok && i < n; i++)
		set_new(o, a[i].name, spec_to_json(&a[i]), &ok);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

int bfs_schema_to_json(char **out, const struct bfs_schema *s, const struct bfs_schema_facts *facts)
{
	json_t *root = json_object();
	bool ok = root != NULL;
	char *text = NULL, *res;
	size_t n;

	if (ok)
		set_new(root, "features", specs_to_json(s->features, s->nfeatures), &ok);
	if (ok && s->nlists)
		set_new(root, "feature_lists", specs_to_json(s->lists, s->nlists), &ok);
	if (ok && facts) {
		set_new(root, "records", json_u64(facts->records), &ok);
		set_new(root, "batch_size", json_u64(facts->batch_size), &ok);
		set_new(root, "batches_per_epoch", json_u64(facts->batches_per_epoch), &ok);
		set_new(root, "seed", json_u64(facts->seed), &ok);
		if (facts->shuffle)
			set_new(root, "shuffle", json_string(facts->shuffle), &ok);
		if (!facts->no_rank)
			set_new(root, "rank", json_u64(facts->rank), &ok);
		set_new(root, "world", json_u64(facts->world), &ok);
		if (facts->shards) {
			json_t *a = json_array();
			for (size_t i = 0; a && i < facts->nshards; i++)
				if (json_array_append_new(a, json_string(facts->shards[i]
										 ? facts->shards[i]
										 : "")) < 0) {
					json_decref(a);
					a = NULL;
				}
			set_new(root, "shards", a, &ok);
		}
	}
	if (ok)
		text = json_dumps(root, JSON_INDENT(2) | JSON_SORT_KEYS);
	json_decref(root);
	if (!text)
		return bfs_err_set(
			-ENOMEM,
			"schema: cannot write JSON (out of memory, or a name that is not UTF-8)");
	/* One final newline, as a file should end. */
	n = strlen(text);
	res = malloc(n + 2);
	if (!res) {
		free(text);
		return bfs_err_set(-ENOMEM, "schema: out of memory");
	}
	memcpy(res, text, n);
	res[n] = '\n';
	res[n + 1] = '\0';
	free(text);
	*out = res;
	return 0;
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

static ssize_t spec_find_n(const struct bfs_feature_spec *a, size_t n, const char *item, size_t len)
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
			names_free(&a[i]);
		}
	}
	*n = k;
}

int bfs_schema_select(struct bfs_schema *s, const char *csv)
{
	static const char prefix[] = "feature_lists/";
	const size_t plen = sizeof(prefix) - 1;
	bool *keep_f = NULL, *keep_l = NULL;
	const char *p = csv;
	int err = 0;

	if (!csv || !csv[0])
		return bfs_err_set(-EINVAL, "features=: empty list of features");
	keep_f = calloc(s->nfeatures + 1, sizeof(bool));
	keep_l = calloc(s->nlists + 1, sizeof(bool));
	if (!keep_f || !keep_l) {
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
			at = spec_find_n(s->lists, s->nlists, p + plen, len - plen);
			if (at >= 0)
				keep_l[at] = true;
		}
		if (at < 0) {
			at = spec_find_n(s->features, s->nfeatures, p, len);
			if (at >= 0)
				keep_f[at] = true;
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
out:
	free(keep_f);
	free(keep_l);
	return err;
}

/* ---- inference ------------------------------------------------------------------ */

struct fstat {
	char *name;
	enum bfs_kind kind;
	uint64_t present; /* records with the kind set */
	uint64_t min_count, max_count; /* values per record, over `present` */
	uint64_t nvalues; /* bytes values seen */
	uint64_t min_len, max_len; /* bytes value lengths, over nvalues */
	/* feature lists */
	uint64_t max_steps;
	uint64_t step_min_count, step_max_count; /* values per step (untyped: 0) */
	uint64_t step_max_len; /* longest bytes value of a step */
	/* bytes: the image format of every value so far (UNKNOWN before the
	 * first), or not_image once one is not that; the largest size */
	enum bfs_image_fmt img;
	bool not_image;
	uint32_t img_w, img_h;
};

struct bfs_infer {
	uint64_t nrecords;
	size_t nf;
	struct fstat *f; /* sorted by name */
	size_t nl;
	struct fstat *l; /* sorted by name */
};

int bfs_infer_new(struct bfs_infer **out)
{
	struct bfs_infer *inf = calloc(1, sizeof(*inf));

	if (!inf)
		return bfs_err_set(-ENOMEM, "schema: out of memory");
	*out = inf;
	return 0;
}

void bfs_infer_free(struct bfs_infer *inf)
{
	if (!inf)
		return;
	for (size_t i = 0; i < inf->nf; i++)
		free(inf->f[i].name);
	for (size_t i = 0; i < inf->nl; i++)
		free(inf->l[i].name);
	free(inf->f);
	free(inf->l);
	free(inf);
}

/* The kind of a feature list: that of its typed steps; -EBADMSG if they differ. */
static int list_kind(const struct bfs_feature_list *l, enum bfs_kind *out)
{
	enum bfs_kind k = BFS_KIND_NONE;

	for (size_t j = 0; j < l->nsteps; j++) {
		enum bfs_kind sk = l->steps[j].kind;
		if (sk == BFS_KIND_NONE)
			continue;
		if (k != BFS_KIND_NONE && sk != k)
			return bfs_err_set(
				-EBADMSG,
				"feature list '%.200s': step %zu has kind %s, earlier steps %s",
				l->name, j, bfs_kind_name(sk), bfs_kind_name(k));
		k = sk;
	}
	*out = k;
	return 0;
}

/* Item i of a record: a feature, or a feature list. */
static const char *item_name(const struct bfs_example *ex, bool list, size_t i)
{
	return list ? ex->lists[i].name : ex->features[i].name;
}

static int item_kind(const struct bfs_example *ex, bool list, size_t i, enum bfs_kind *out)
{
	if (list)
		return list_kind(&ex->lists[i], out);
	*out = ex->features[i].v.kind;
	return 0;
}

static void stat_init(struct fstat *st, char *name, enum bfs_kind kind)
{
	memset(st, 0, sizeof(*st));
	st->name = name;
	st->kind = kind;
	st->min_count = UINT64_MAX;
	st->min_len = UINT64_MAX;
	st->step_min_count = UINT64_MAX;
}

/* Note the image format and size of one bytes value (header only). */
static void stat_add_image(struct fstat *st, const uint8_t *data, size_t len)
{
	enum bfs_image_fmt fmt;
	uint32_t w, h;

	if (st->not_image)
		return;
	if (bfs_image_sniff(data, len) == BFS_IMAGE_UNKNOWN ||
	    bfs_image_probe(data, len, &fmt, &w, &h) != 0 ||
	    (st->img != BFS_IMAGE_UNKNOWN && st->img != fmt)) {
		st->not_image = true;
		return;
	}
	st->img = fmt;
	if (w > st->img_w)
		st->img_w = w;
	if (h > st->img_h)
		st->img_h = h;
}

static void stat_add_values(struct fstat *st, const struct bfs_values *v)
{
	st->present++;
	if (v->count < st->min_count)
		st->min_count = v->count;
	if (v->count > st->max_count)
		st->max_count = v->count;
	if (v->kind == BFS_KIND_BYTES) {
		for (size_t j = 0; j < v->count; j++) {
			uint64_t n = v->b[j].len;
			st->nvalues++;
			if (n < st->min_len)
				st->min_len = n;
			if (n > st->max_len)
				st->max_len = n;
			stat_add_image(st, v->b[j].data, n);
		}
	}
}

static void stat_add_list(struct fstat *st, const struct bfs_feature_list *l)
{
	st->present++;
	if (l->nsteps > st->max_steps)
		st->max_steps = l->nsteps;
	for (size_t j = 0; j < l->nsteps; j++) {
		const struct bfs_values *v = &l->steps[j];
		uint64_t c = v->kind == BFS_KIND_NONE ? 0 : v->count;
		if (c < st->step_min_count)
			st->step_min_count = c;
		if (c > st->step_max_count)
			st->step_max_count = c;
		if (v->kind == BFS_KIND_BYTES)
			for (size_t k = 0; k < v->count; k++)
				if (v->b[k].len > st->step_max_len)
					st->step_max_len = v->b[k].len;
	}
}

/*
 * Check one record's features (list=false) or feature lists (list=true)
 * against the sorted stats: kinds agree, new names are usable. Counts the
 * new typed names into *nnew.
 */
static int infer_check(const struct fstat *st, size_t nst, const struct bfs_example *ex, bool list,
		       size_t *nnew)
{
	const char *what = list ? "feature list" : "feature";
	size_t nitems = list ? ex->nlists : ex->nfeatures;
	enum bfs_kind kind;
	int err;

	*nnew = 0;
	for (size_t i = 0, j = 0; i < nitems; i++) {
		const char *name = item_name(ex, list, i);
		int c = 1;
		err = item_kind(ex, list, i, &kind);
		if (err < 0)
			return err;
		while (j < nst && (c = strcmp(st[j].name, name)) < 0)
			j++;
		if (kind == BFS_KIND_NONE)
			continue;
		if (j < nst && c == 0) {
			if (st[j].kind != kind)
				return bfs_err_set(
					-EBADMSG,
					"%s '%.200s': kind %s, but earlier records have %s", what,
					name, bfs_kind_name(kind), bfs_kind_name(st[j].kind));
			continue;
		}
		err = bfs_schema_name_ok(name);
		if (err < 0) {
			bfs_err_prefix("%s cannot be a path", what);
			return -EBADMSG;
		}
		(*nnew)++;
	}
	return 0;
}

/* Insert the record's nnew new typed names into the sorted stats. */
static int infer_insert(struct fstat **arr, size_t *narr, const struct bfs_example *ex, bool list,
			size_t nnew)
{
	size_t nitems = list ? ex->nlists : ex->nfeatures;
	struct fstat *st = *arr, *merged;
	char **names;
	size_t i, j, k, n;
	enum bfs_kind kind;

	if (!nnew)
		return 0;
	merged = calloc(*narr + nnew, sizeof(*merged));
	names = calloc(nnew, sizeof(*names));
	if (!merged || !names)
		goto nomem;
	/* The names first, so a failure leaves the stats as they were. */
	for (i = 0, j = 0, n = 0; i < nitems; i++) {
		const char *name = item_name(ex, list, i);
		int c = 1;
		item_kind(ex, list, i, &kind);
		while (j < *narr && (c = strcmp(st[j].name, name)) < 0)
			j++;
		if (kind == BFS_KIND_NONE || (j < *narr && c == 0))
			continue;
		names[n] = strdup(name);
		if (!names[n])
			goto nomem;
		n++;
	}
	for (i = 0, j = 0, k = 0, n = 0; i < nitems; i++) {
		const char *name = item_name(ex, list, i);
		item_kind(ex, list, i, &kind);
		if (kind == BFS_KIND_NONE)
			continue;
		while (j < *narr && strcmp(st[j].name, name) < 0)
			merged[k++] = st[j++];
		if (j < *narr && strcmp(st[j].name, name) == 0)
			continue;
		stat_init(&merged[k++], names[n++], kind);
	}
	while (j < *narr)
		merged[k++] = st[j++];
	free(names);
	free(st);
	*arr = merged;
	*narr = k;
	return 0;

nomem:
	if (names)
		for (i = 0; i < nnew; i++)
			free(names[i]);
	free(names);
	free(merged);
	return bfs_err_set(-ENOMEM, "schema: out of memory");
}

/* Add the record's counts; every typed name is in the stats. */
static void infer_count(struct fstat *st, const struct bfs_example *ex, bool list)
{
	size_t nitems = list ? ex->nlists : ex->nfeatures;
	enum bfs_kind kind;

	for (size_t i = 0, j = 0; i < nitems; i++) {
		const char *name = item_name(ex, list, i);
		item_kind(ex, list, i, &kind);
		if (kind == BFS_KIND_NONE)
			continue;
		while (strcmp(st[j].name, name) < 0)
			j++;
		if (list)
			stat_add_list(&st[j], &ex->lists[i]);
		else
			stat_add_values(&st[j], &ex->features[i].v);
	}
}

int bfs_infer_add(struct bfs_infer *inf, const struct bfs_example *ex)
{
	size_t newf, newl;
	int err;

	/* Everything is checked before anything changes. A failed insertion
	 * (no memory) may leave names with no counts; finish skips those. */
	err = infer_check(inf->f, inf->nf, ex, false, &newf);
	if (err < 0)
		return err;
	err = infer_check(inf->l, inf->nl, ex, true, &newl);
	if (err < 0)
		return err;
	if (inf->nf + inf->nl + newf + newl > INFER_MAX_NAMES)
		return bfs_err_set(-EFBIG, "more than %d distinct feature names", INFER_MAX_NAMES);
	err = infer_insert(&inf->f, &inf->nf, ex, false, newf);
	if (err < 0)
		return err;
	err = infer_insert(&inf->l, &inf->nl, ex, true, newl);
	if (err < 0)
		return err;
	infer_count(inf->f, ex, false);
	infer_count(inf->l, ex, true);
	inf->nrecords++;
	return 0;
}

static int cap_err(const char *what, const char *name, const char *of, uint64_t v)
{
	return bfs_err_set(-EFBIG, "%s '%.200s': %llu %s, over the cap %lld", what, name,
			   (unsigned long long)v, of, (long long)BFS_MAX_LEN_CAP);
}

static int spec_from_stat(struct bfs_feature_spec *f, const struct fstat *st, uint64_t nrecords)
{
	bool everywhere = st->present == nrecords;

	f->kind = st->kind;
	f->dtype = numeric_dtype(st->kind);
	if (st->kind != BFS_KIND_BYTES) {
		if (st->max_count > (uint64_t)BFS_MAX_LEN_CAP)
			return cap_err("feature", st->name, "values in one record", st->max_count);
		if (everywhere && st->min_count == st->max_count) {
			f->layout = BFS_LAYOUT_FIXED;
			f->ndim = st->max_count == 1 ? 0 : 1;
			f->shape[0] = (int64_t)st->max_count;
		} else {
			f->layout = BFS_LAYOUT_PADDED;
			f->ndim = 1;
			f->shape[0] = -1;
			f->max_len = (int64_t)st->max_count;
		}
		return 0;
	}
	if (st->max_len > (uint64_t)BFS_MAX_LEN_CAP)
		return cap_err("feature", st->name, "bytes in one value", st->max_len);
	if (!st->not_image && st->img != BFS_IMAGE_UNKNOWN) {
		f->content = st->img;
		f->content_w = st->img_w;
		f->content_h = st->img_h;
	}
	if (st->max_count > 1) {
		f->layout = BFS_LAYOUT_RAGGED2;
		f->ndim = 2;
		f->shape[0] = f->shape[1] = -1;
	} else if (everywhere && st->min_count == 1 && st->min_len == st->max_len) {
		f->layout = BFS_LAYOUT_FIXED;
		f->ndim = 1;
		f->shape[0] = (int64_t)st->max_len;
	} else {
		f->layout = BFS_LAYOUT_PADDED;
		f->ndim = 1;
		f->shape[0] = -1;
		f->max_len = (int64_t)st->max_len;
	}
	return 0;
}

static int list_spec_from_stat(struct bfs_feature_spec *f, const struct fstat *st)
{
	uint64_t elems;

	f->is_list = true;
	f->kind = st->kind;
	f->dtype = numeric_dtype(st->kind);
	f->layout = BFS_LAYOUT_FIXED;
	f->max_steps = (int64_t)st->max_steps;
	if (st->max_steps > (uint64_t)BFS_MAX_LEN_CAP)
		return cap_err("feature list", st->name, "steps", st->max_steps);
	if (st->step_max_count > (uint64_t)BFS_MAX_LEN_CAP)
		return cap_err("feature list", st->name, "values in one step", st->step_max_count);
	if (st->step_max_len > (uint64_t)BFS_MAX_LEN_CAP)
		return cap_err("feature list", st->name, "bytes in one value", st->step_max_len);
	if (st->kind != BFS_KIND_BYTES) {
		if (st->step_max_count == 1 && st->step_min_count == 1) {
			f->ndim = 0;
		} else {
			f->ndim = 1;
			f->shape[0] = (int64_t)st->step_max_count;
		}
	} else if (st->step_max_count <= 1) {
		f->ndim = 1;
		f->shape[0] = (int64_t)st->step_max_len;
	} else {
		f->ndim = 2;
		f->shape[0] = (int64_t)st->step_max_count;
		f->shape[1] = (int64_t)st->step_max_len;
	}
	elems = bfs_spec_elems(f);
	if (elems > (uint64_t)BFS_MAX_LEN_CAP ||
	    (st->max_steps && elems > (uint64_t)BFS_MAX_LEN_CAP / st->max_steps))
		return bfs_err_set(
			-EFBIG,
			"feature list '%.200s': %llu steps of %llu values, over the cap %lld",
			st->name, (unsigned long long)st->max_steps, (unsigned long long)elems,
			(long long)BFS_MAX_LEN_CAP);
	return 0;
}

int bfs_infer_finish(struct bfs_schema **out, const struct bfs_infer *inf)
{
	struct bfs_schema *s = calloc(1, sizeof(*s));
	int err = -ENOMEM;

	if (!s)
		goto nomem;
	if (inf->nf && !(s->features = calloc(inf->nf, sizeof(*s->features))))
		goto nomem;
	if (inf->nl && !(s->lists = calloc(inf->nl, sizeof(*s->lists))))
		goto nomem;
	for (size_t i = 0; i < inf->nf; i++) {
		const struct fstat *st = &inf->f[i];
		struct bfs_feature_spec *f = &s->features[s->nfeatures];
		if (!st->present)
			continue;
		if (!(f->name = strdup(st->name)))
			goto nomem;
		s->nfeatures++;
		err = spec_from_stat(f, st, inf->nrecords);
		if (err < 0)
			goto out;
	}
	for (size_t i = 0; i < inf->nl; i++) {
		const struct fstat *st = &inf->l[i];
		struct bfs_feature_spec *f = &s->lists[s->nlists];
		if (!st->present)
			continue;
		if (!(f->name = strdup(st->name)))
			goto nomem;
		s->nlists++;
		err = list_spec_from_stat(f, st);
		if (err < 0)
			goto out;
	}
	*out = s;
	return 0;

nomem:
	err = bfs_err_set(-ENOMEM, "schema: out of memory");
out:
	bfs_schema_free(s);
	return err;
}

/* ---- checking a record ------------------------------------------------------------- */

static int check_err(const struct bfs_feature_spec *f, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int check_err(const struct bfs_feature_spec *f, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return bfs_err_set(-EBADMSG, "%s '%.200s': %s", spec_what(f), f->name, msg);
}

static int check_feature(const struct bfs_feature_spec *f, const struct bfs_values *v)
{
	char shp[160];
	uint64_t want;

	if (!v || v->kind == BFS_KIND_NONE) {
		if (f->layout != BFS_LAYOUT_FIXED || f->has_default)
			return 0;
		return check_err(f, "missing, and the schema gives no default");
	}
	if (v->kind != f->kind)
		return check_err(f, "kind %s, schema says %s", bfs_kind_name(v->kind),
				 bfs_kind_name(f->kind));
	switch (f->layout) {
	case BFS_LAYOUT_FIXED:
		want = bfs_spec_elems(f);
		fmt_shape(shp, sizeof(shp), f->ndim, f->shape);
		if (f->kind != BFS_KIND_BYTES) {
			if (v->count != want)
				return check_err(f, "%zu values, schema shape %s needs %llu",
						 v->count, shp, (unsigned long long)want);
			return 0;
		}
		if (v->count != 1)
			return check_err(f,
					 "%zu values, a fixed-shape bytes feature takes exactly 1",
					 v->count);
		if (f->image)
			return 0; /* any length: it is decoded to the shape */
		want *= bfs_dtype_size(f->dtype);
		if (v->b[0].len != want)
			return check_err(f, "value of %zu bytes, schema shape %s of %s needs %llu",
					 v->b[0].len, shp, bfs_dtype_name(f->dtype),
					 (unsigned long long)want);
		return 0;
	case BFS_LAYOUT_PADDED:
		if (f->kind != BFS_KIND_BYTES) {
			if (v->count > (uint64_t)f->max_len)
				return check_err(f, "%zu values, over max_len %lld", v->count,
						 (long long)f->max_len);
			return 0;
		}
		if (v->count > 1)
			return check_err(f, "%zu values, a padded bytes feature takes at most 1",
					 v->count);
		if (v->count && v->b[0].len > (uint64_t)f->max_len)
			return check_err(f, "value of %zu bytes, over max_len %lld", v->b[0].len,
					 (long long)f->max_len);
		return 0;
	default:
		return 0;
	}
}

static int check_list(const struct bfs_feature_spec *f, const struct bfs_feature_list *l)
{
	uint64_t maxv, maxb = 0;
	char shp[160];

	if (!l)
		return 0;
	if (l->nsteps > (uint64_t)f->max_steps)
		return check_err(f, "%zu steps, over max_steps %lld", l->nsteps,
				 (long long)f->max_steps);
	fmt_shape(shp, sizeof(shp), f->ndim, f->shape);
	if (f->kind == BFS_KIND_BYTES) {
		maxv = f->ndim == 2 ? (uint64_t)f->shape[0] : 1;
		maxb = (uint64_t)f->shape[f->ndim - 1];
	} else {
		maxv = bfs_spec_elems(f);
	}
	for (size_t j = 0; j < l->nsteps; j++) {
		const struct bfs_values *v = &l->steps[j];
		if (v->kind == BFS_KIND_NONE)
			continue;
		if (v->kind != f->kind)
			return check_err(f, "step %zu: kind %s, schema says %s", j,
					 bfs_kind_name(v->kind), bfs_kind_name(f->kind));
		if (v->count > maxv)
			return check_err(f,
					 "step %zu: %zu values, step shape %s takes at most %llu",
					 j, v->count, shp, (unsigned long long)maxv);
		if (f->kind == BFS_KIND_BYTES)
			for (size_t k = 0; k < v->count; k++)
				if (v->b[k].len > maxb)
					return check_err(f,
							 "step %zu: value of %zu bytes, step shape "
							 "%s takes at most %llu",
							 j, v->b[k].len, shp,
							 (unsigned long long)maxb);
	}
	return 0;
}

int bfs_schema_check(const struct bfs_schema *s, const struct bfs_example *ex)
{
	int err;

	for (size_t i = 0; i < s->nfeatures; i++) {
		err = check_feature(&s->features[i], bfs_example_find(ex, s->features[i].name));
		if (err < 0)
			return err;
	}
	for (size_t i = 0; i < s->nlists; i++) {
		err = check_list(&s->lists[i], bfs_example_find_list(ex, s->lists[i].name));
		if (err < 0)
			return err;
	}
	return 0;
}

void bfs_spec_ragged_counts(const struct bfs_feature_spec *f, const struct bfs_example *ex,
			    uint64_t *nvalues, uint64_t *nbytes)
{
	const struct bfs_values *v = f->is_list ? NULL : bfs_example_find(ex, f->name);

	*nvalues = 0;
	*nbytes = 0;
	if (!v || v->kind != f->kind)
		return;
	*nvalues = v->count;
	if (v->kind == BFS_KIND_BYTES)
		for (size_t i = 0; i < v->count; i++)
			*nbytes += v->b[i].len;
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
	at = name_len ? spec_find_n(s->features, s->nfeatures, arg, name_len) : -1;
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
	return 0;
}

/* ---- TFDS features.json ----------------------------------------------------------------- */

static struct bfs_feature_spec *spec_find(struct bfs_schema *s, const char *name)
{
	ssize_t at = spec_find_n(s->features, s->nfeatures, name, strlen(name));
	return at < 0 ? NULL : &s->features[at];
}

/* {"dimensions": ["28", "28", "1"]} (strings or integers; -1 unknown). ndim
 * -1 when malformed; *known false when a dimension is unknown. */
static int tfds_dims(json_t *shape, int64_t *dims, bool *known)
{
	json_t *d = shape ? json_object_get(shape, "dimensions") : NULL;
	int n;

	*known = true;
	if (!shape)
		return -1;
	if (!d)
		return 0; /* {} : a scalar */
	if (!json_is_array(d) || json_array_size(d) > BFS_MAX_DIMS)
		return -1;
	n = (int)json_array_size(d);
	for (int i = 0; i < n; i++) {
		json_t *v = json_array_get(d, (size_t)i);
		long long x;
		if (json_is_integer(v))
			x = (long long)json_integer_value(v);
		else if (json_is_string(v))
			x = strtoll(json_string_value(v), NULL, 10);
		else
			return -1;
		if (x < 0)
			*known = false;
		dims[i] = x;
	}
	return n;
}

static int set_names_lines(struct bfs_feature_spec *f, const char *text)
{
	size_t n = 0;
	const char *p;

	names_free(f);
	for (p = text; *p;) {
		const char *nl = strchr(p, '\n');
		n++;
		p = nl ? nl + 1 : p + strlen(p);
	}
	f->names = calloc(n ? n : 1, sizeof(char *));
	if (!f->names)
		return bfs_err_set(-ENOMEM, "schema: out of memory");
	for (p = text; *p;) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		if (len && p[len - 1] == '\r')
			len--;
		f->names[f->nnames] = strndup(p, len);
		if (!f->names[f->nnames])
			return bfs_err_set(-ENOMEM, "schema: out of memory");
		f->nnames++;
		p = nl ? nl + 1 : p + strlen(p);
	}
	return 0;
}

static int tfds_class_label(struct bfs_feature_spec *f, json_t *cl, bfs_labels_fn labels, void *ctx)
{
	char *text = labels ? labels(ctx, f->name) : NULL;
	json_t *jn = json_object_get(cl, "names"), *jc = json_object_get(cl, "numClasses");
	long long nc = -1;
	int rc;

	if (f->kind != BFS_KIND_INT64)
		return 0;
	if (text) {
		rc = set_names_lines(f, text);
		free(text);
		return rc;
	}
	if (jn && json_is_array(jn)) {
		names_free(f);
		return names_from_json(f, jn);
	}
	if (json_is_integer(jc))
		nc = (long long)json_integer_value(jc);
	else if (json_is_string(jc))
		nc = strtoll(json_string_value(jc), NULL, 10);
	if (nc <= 0 || nc > 10000000)
		return 0;
	names_free(f);
	f->names = calloc((size_t)nc, sizeof(char *));
	if (!f->names)
		return bfs_err_set(-ENOMEM, "schema: out of memory");
	for (long long i = 0; i < nc; i++) {
		if (asprintf(&f->names[i], "%lld", i) < 0) {
			f->names[i] = NULL;
			return bfs_err_set(-ENOMEM, "schema: out of memory");
		}
		f->nnames = (size_t)i + 1;
	}
	return 0;
}

static int tfds_walk(struct bfs_schema *s, json_t *features, const char *prefix,
		     bfs_labels_fn labels, void *ctx, int depth)
{
	const char *key;
	json_t *v;
	int rc;

	if (!json_is_object(features))
		return bfs_err_set(-EINVAL, "features.json: \"features\" of '%s' is not an object",
				   prefix[0] ? prefix : "(top)");
	if (depth > 16)
		return bfs_err_set(-EINVAL, "features.json: nested more than 16 deep at '%s'",
				   prefix);
	json_object_foreach(features, key, v)
	{
		char name[1024];
		struct bfs_feature_spec *f;
		json_t *x;
		int64_t dims[BFS_MAX_DIMS];
		bool known;
		int nd;

		snprintf(name, sizeof(name), "%s%s%s", prefix, prefix[0] ? "/" : "", key);
		if (!json_is_object(v))
			return bfs_err_set(-EINVAL, "features.json: feature '%s' is not an object",
					   name);
		if ((x = json_object_get(v, "featuresDict"))) {
			rc = tfds_walk(s, json_object_get(x, "features"), name, labels, ctx,
				       depth + 1);
			if (rc)
				return rc;
			continue;
		}
		f = spec_find(s, name);
		if (!f)
			continue; /* in no record (or not selected): nothing to refine */
		if ((x = json_object_get(v, "image"))) {
			nd = tfds_dims(json_object_get(x, "shape"), dims, &known);
			if (nd == 3 && known && dims[0] > 0 && dims[1] > 0 &&
			    dims[0] <= UINT16_MAX && dims[1] <= UINT16_MAX &&
			    (dims[2] == 1 || dims[2] == 3 || dims[2] == 4) &&
			    f->kind == BFS_KIND_BYTES && f->layout != BFS_LAYOUT_RAGGED2) {
				f->layout = BFS_LAYOUT_FIXED;
				f->dtype = BFS_DT_U8;
				f->ndim = 3;
				memcpy(f->shape, dims, 3 * sizeof(*dims));
				f->max_len = 0;
				f->image = true;
				f->resize = BFS_RESIZE_STRETCH;
				f->filter = BFS_FILTER_BILINEAR;
			}
		} else if ((x = json_object_get(v, "classLabel"))) {
			rc = tfds_class_label(f, x, labels, ctx);
			if (rc)
				return rc;
		} else if ((x = json_object_get(v, "tensor"))) {
			nd = tfds_dims(json_object_get(x, "shape"), dims, &known);
			if (nd < 0)
				return bfs_err_set(-EINVAL,
						   "features.json: feature '%s': bad \"shape\"",
						   name);
			if (known && f->layout == BFS_LAYOUT_FIXED && f->kind != BFS_KIND_BYTES) {
				uint64_t p = 1;
				for (int i = 0; i < nd; i++)
					p *= (uint64_t)dims[i];
				if (p == bfs_spec_elems(f)) {
					f->ndim = nd;
					memcpy(f->shape, dims, (size_t)nd * sizeof(*dims));
				}
			}
		}
	}
	return 0;
}

int bfs_schema_apply_tfds(struct bfs_schema *s, const char *text, size_t len, bfs_labels_fn labels,
			  void *ctx)
{
	json_error_t jerr;
	json_t *root = json_loadb(text, len, 0, &jerr), *fd;
	int rc;

	if (!root)
		return bfs_err_set(-EINVAL, "features.json: JSON error at line %d, column %d: %s",
				   jerr.line, jerr.column, jerr.text);
	fd = json_object_get(root, "featuresDict");
	if (!fd)
		rc = bfs_err_set(-EINVAL, "features.json: no top-level \"featuresDict\"");
	else
		rc = tfds_walk(s, json_object_get(fd, "features"), "", labels, ctx, 0);
	json_decref(root);
	return rc;
}
