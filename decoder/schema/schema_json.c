/* SPDX-License-Identifier: Apache-2.0 */
/*
 * schema_json.c — the schema as JSON: parsed from schema=FILE or the
 * cached inference (every field checked, every error naming the feature),
 * written for schema.json and the cache, and refined by a TFDS
 * features.json (Image at its shape, ClassLabel names, Tensor and Scalar
 * shapes). The JSON form is in schema.h. Also the decoder's other JSON
 * (schema_json.h): mixture files, and a JSON object's members (stats.json
 * as `batchfs stats` reads it).
 *
 * The only file of the decoder that includes jansson.
 */
#include "schema_impl.h"
#include "schema_json.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

/* ---- JSON in --------------------------------------------------------------- */

static int spec_cmp(const void *a, const void *b)
{
	return strcmp(((const struct bfs_feature_spec *)a)->name,
		      ((const struct bfs_feature_spec *)b)->name);
}

static int spec_err(const struct bfs_feature_spec *f, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int spec_err(const struct bfs_feature_spec *f, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return bfs_err_set(-EINVAL, "schema: %s '%.200s': %s", bfs_spec_what(f), f->name, msg);
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

/* [A, B] of two numbers into out. */
static int range_from_json(const struct bfs_feature_spec *f, json_t *j, const char *key,
			   double out[2])
{
	if (!json_is_array(j) || json_array_size(j) != 2 || !json_is_number(json_array_get(j, 0)) ||
	    !json_is_number(json_array_get(j, 1)))
		return spec_err(f, "\"%s\" must be [A, B], two numbers", key);
	out[0] = json_number_value(json_array_get(j, 0));
	out[1] = json_number_value(json_array_get(j, 1));
	return 0;
}

/* "crop", "flip", "crop_scale", "crop_ratio", "crop_resize" of an image
 * feature (its shape already checked), into f->aug. */
static int augment_from_json(struct bfs_feature_spec *f, json_t *obj)
{
	json_t *jcrop = json_object_get(obj, "crop"), *jflip = json_object_get(obj, "flip");
	json_t *jres = json_object_get(obj, "crop_resize");
	struct bfs_augment *a = &f->aug;

	bfs_augment_init(a);
	if (jcrop && (!json_is_string(jcrop) || bfs_crop_parse(json_string_value(jcrop), &a->crop)))
		return spec_err(f, "\"crop\" must be \"random\", \"center\" or \"none\"");
	if (jflip) {
		const char *v = json_is_string(jflip) ? json_string_value(jflip) : "";

		if (strcmp(v, "h") != 0 && strcmp(v, "none") != 0)
			return spec_err(f, "\"flip\" must be \"h\" or \"none\"");
		a->flip = strcmp(v, "h") == 0;
	}
	if (json_object_get(obj, "crop_scale") &&
	    range_from_json(f, json_object_get(obj, "crop_scale"), "crop_scale", a->scale))
		return -EINVAL;
	if (json_object_get(obj, "crop_ratio") &&
	    range_from_json(f, json_object_get(obj, "crop_ratio"), "crop_ratio", a->ratio))
		return -EINVAL;
	if (jres) {
		if (!json_is_integer(jres) || json_integer_value(jres) < 1 ||
		    json_integer_value(jres) > 4 * UINT16_MAX)
			return spec_err(f, "\"crop_resize\" must be a whole number of pixels");
		a->resize = (uint32_t)json_integer_value(jres);
	}
	if (bfs_augment_check(a, (uint32_t)f->shape[0], (uint32_t)f->shape[1]))
		return spec_err(f, "%s", bfs_err_msg());
	return 0;
}

/* "content"/"max_width"/"max_height" (inference's note) and "decode":
 * "image" with "resize", "filter" and the augmentation. */
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
		if (json_object_get(obj, "crop") || json_object_get(obj, "flip") ||
		    json_object_get(obj, "crop_scale") || json_object_get(obj, "crop_ratio") ||
		    json_object_get(obj, "crop_resize"))
			return spec_err(f,
					"\"crop\"/\"flip\"/\"crop_*\" only apply with \"decode\": "
					"\"image\"");
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
	return augment_from_json(f, obj);
}

/* Every key of a feature's object is one spec_from_json knows. */
static int spec_keys_known(const struct bfs_feature_spec *f, json_t *obj)
{
	static const char *const known[] = {
		"kind",	   "shape",   "dtype",	    "max_len",	  "pad",
		"default", "ragged",  "max_steps",  "decode",	  "resize",
		"filter",  "content", "max_width",  "max_height", "names",
		"crop",	   "flip",    "crop_scale", "crop_ratio", "crop_resize"
	};
	const char *key;
	json_t *v;

	json_object_foreach(obj, key, v)
	{
		size_t i;
		for (i = 0; i < BFS_ARRAY_SIZE(known); i++)
			if (strcmp(key, known[i]) == 0)
				break;
		if (i == BFS_ARRAY_SIZE(known))
			return spec_err(f, "unknown field \"%.100s\"", key);
	}
	return 0;
}

/* "kind" into f->kind. */
static int spec_kind_from_json(struct bfs_feature_spec *f, json_t *jkind)
{
	if (!jkind)
		return spec_err(f, "\"kind\" is missing (bytes, float or int64)");
	if (!json_is_string(jkind) ||
	    (f->kind = bfs_kind_parse(json_string_value(jkind))) == BFS_KIND_NONE)
		return spec_err(f, "\"kind\" must be \"bytes\", \"float\" or \"int64\"");
	return 0;
}

/* "shape" into f->ndim and f->shape; *has_neg if a dimension is -1, *elems
 * the product of the others (BFS_MAX_LEN_CAP + 1 once over the cap). */
static int spec_shape_from_json(struct bfs_feature_spec *f, json_t *jshape, bool *has_neg,
				uint64_t *elems)
{
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
			*has_neg = true;
		else if (f->shape[i] > BFS_MAX_LEN_CAP)
			return spec_err(f, "\"shape\" dimension %d is %lld, over the cap %lld", i,
					(long long)f->shape[i], (long long)BFS_MAX_LEN_CAP);
		else if (__builtin_mul_overflow(*elems, (uint64_t)f->shape[i], elems) ||
			 *elems > (uint64_t)BFS_MAX_LEN_CAP)
			*elems = (uint64_t)BFS_MAX_LEN_CAP + 1;
	}
	return 0;
}

/* f->layout from the list/ragged flags and the shape (formatted in shp). */
static int spec_layout(struct bfs_feature_spec *f, bool ragged, bool has_neg, const char *shp)
{
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
	return 0;
}

/* "dtype" into f->dtype: chosen only by a fixed bytes feature, otherwise
 * the kind's own (and "dtype", if given, must name it). */
static int spec_dtype_from_json(struct bfs_feature_spec *f, json_t *jdtype)
{
	if (f->kind != BFS_KIND_BYTES || f->is_list || f->layout != BFS_LAYOUT_FIXED) {
		f->dtype = bfs_spec_default_dtype(f->kind);
		if (jdtype && (!json_is_string(jdtype) ||
			       bfs_dtype_parse(json_string_value(jdtype)) != f->dtype))
			return spec_err(f, "\"dtype\" must be \"%s\" for this %s %s (or left out)",
					bfs_dtype_name(f->dtype), bfs_kind_name(f->kind),
					bfs_spec_what(f));
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
	return 0;
}

/* The shape's values (elems), and a fixed bytes feature's bytes, under the cap. */
static int spec_size_ok(const struct bfs_feature_spec *f, uint64_t elems, const char *shp)
{
	uint64_t nbytes;

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
	return 0;
}

/* "max_len" into f->max_len: required by a padded feature, refused elsewhere. */
static int spec_max_len_from_json(struct bfs_feature_spec *f, json_t *jmax_len)
{
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
	return 0;
}

/* "max_steps" into f->max_steps: required by a feature list (whose steps of
 * elems values stay under the cap), refused elsewhere. */
static int spec_max_steps_from_json(struct bfs_feature_spec *f, json_t *jsteps, uint64_t elems,
				    const char *shp)
{
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
	return 0;
}

/* "pad" into f->pad and "default" into f->dflt, where each applies. */
static int spec_pad_default_from_json(struct bfs_feature_spec *f, json_t *jpad, json_t *jdflt)
{
	int err;

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
	if (jdflt) {
		if (f->is_list || f->kind == BFS_KIND_BYTES || f->layout != BFS_LAYOUT_FIXED)
			return spec_err(f,
					"\"default\" only applies to fixed-shape numeric features");
		err = scalar_from_json(f, "default", jdflt, &f->dflt);
		if (err < 0)
			return err;
		f->has_default = true;
	}
	return 0;
}

/* One feature's spec from its JSON object: each field checked in turn, the
 * first error naming the feature. */
static int spec_from_json(struct bfs_feature_spec *f, json_t *obj)
{
	json_t *jragged = json_object_get(obj, "ragged");
	char shp[160];
	bool ragged = false, has_neg = false;
	uint64_t elems = 1;
	int err;

	err = bfs_schema_name_ok(f->name);
	if (err < 0)
		return spec_err(f, "cannot be a path: %s", bfs_err_msg());
	if (!json_is_object(obj))
		return spec_err(f, "must be a JSON object");
	err = spec_keys_known(f, obj);
	if (err < 0)
		return err;
	err = spec_kind_from_json(f, json_object_get(obj, "kind"));
	if (err < 0)
		return err;
	err = spec_shape_from_json(f, json_object_get(obj, "shape"), &has_neg, &elems);
	if (err < 0)
		return err;
	bfs_spec_fmt_shape(shp, sizeof(shp), f->ndim, f->shape);
	if (jragged) {
		if (!json_is_boolean(jragged))
			return spec_err(f, "\"ragged\" must be true or false");
		ragged = json_is_true(jragged);
	}
	err = spec_layout(f, ragged, has_neg, shp);
	if (err == 0)
		err = spec_dtype_from_json(f, json_object_get(obj, "dtype"));
	if (err == 0)
		err = spec_size_ok(f, elems, shp);
	if (err == 0)
		err = spec_max_len_from_json(f, json_object_get(obj, "max_len"));
	if (err == 0)
		err = spec_max_steps_from_json(f, json_object_get(obj, "max_steps"), elems, shp);
	if (err == 0)
		err = spec_pad_default_from_json(f, json_object_get(obj, "pad"),
						 json_object_get(obj, "default"));
	if (err == 0)
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
		bfs_spec_names_free(&a[i]);
	}
	free(a);
	return err;
}

/* Top-level fields a mount writes into schema.json; accepted and ignored. */
static bool is_fact_key(const char *key)
{
	static const char *const facts[] = { "records",	       "batch_size", "batches_per_epoch",
					     "seed",	       "shuffle",    "rank",
					     "world",	       "shards",     "partitions",
					     "source_records", "mixture" };

	for (size_t i = 0; i < BFS_ARRAY_SIZE(facts); i++)
		if (strcmp(key, facts[i]) == 0)
			return true;
	return false;
}

/* "untyped_features": names (strings) present only as Feature {}. */
static int untyped_from_json(struct bfs_schema *s, json_t *arr)
{
	json_t *v;
	size_t i;

	if (!arr)
		return 0;
	if (!json_is_array(arr))
		return bfs_err_set(-EINVAL, "schema: \"untyped_features\" must be a list of names");
	json_array_foreach(arr, i, v)
	{
		int err;

		if (!json_is_string(v))
			return bfs_err_set(
				-EINVAL, "schema: \"untyped_features\": item %zu is not a name", i);
		err = bfs_schema_untyped_add(s, json_string_value(v));
		if (err < 0)
			return err;
	}
	return 0;
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
		if (strcmp(key, "features") && strcmp(key, "feature_lists") &&
		    strcmp(key, "untyped_features") && !is_fact_key(key)) {
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
	err = untyped_from_json(s, json_object_get(root, "untyped_features"));
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

static json_t *pair(double a, double b)
{
	json_t *j = json_array();

	if (j &&
	    (json_array_append_new(j, json_real(a)) || json_array_append_new(j, json_real(b)))) {
		json_decref(j);
		j = NULL;
	}
	return j;
}

/* An image feature's augmentation, with the values in effect. */
static void augment_to_json(json_t *o, const struct bfs_feature_spec *f, bool *ok)
{
	const struct bfs_augment *a = &f->aug;

	set_new(o, "crop", json_string(bfs_crop_name(a->crop)), ok);
	set_new(o, "flip", json_string(a->flip ? "h" : "none"), ok);
	if (a->crop == BFS_CROP_RANDOM) {
		set_new(o, "crop_scale", pair(a->scale[0], a->scale[1]), ok);
		set_new(o, "crop_ratio", pair(a->ratio[0], a->ratio[1]), ok);
	} else if (a->crop == BFS_CROP_CENTER) {
		set_new(o, "crop_resize",
			json_integer(bfs_augment_resize(a, (uint32_t)f->shape[0],
							(uint32_t)f->shape[1])),
			ok);
	}
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
		if (bfs_augment_on(&f->aug))
			augment_to_json(o, f, &ok);
	}
	if (f->prov)
		set_new(o, "provenance",
			json_string(f->prov == BFS_PROV_SOURCE ? "source" : "record"), &ok);
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

static json_t *mix_facts_json(const struct bfs_mix_facts *m)
{
	json_t *o = json_object(), *src = json_array(), *sch = json_array();
	bool ok = o && src && sch;

	for (size_t s = 0; ok && s < m->n; s++) {
		json_t *e = json_object();
		bool eok = e != NULL;
		set_new(e, "name", json_string(m->names[s]), &eok);
		set_new(e, "source", json_string(m->sources[s]), &eok);
		set_new(e, "records", json_u64(m->records[s]), &eok);
		set_new(e, "weight", json_real(m->weights[s]), &eok);
		if (!eok || json_array_append_new(src, e) < 0)
			ok = false;
	}
	for (size_t i = 0; ok && i < m->nseg; i++) {
		json_t *e = json_object(), *w = json_array(), *r = json_array();
		bool eok = e && w && r;
		for (size_t s = 0; eok && s < m->n; s++)
			if (json_array_append_new(w, json_real(m->weights[i * m->n + s])) < 0 ||
			    json_array_append_new(r, json_u64(m->ratio[i * m->n + s])) < 0)
				eok = false;
		set_new(e, "from_record", json_u64(m->from[i]), &eok);
		set_new(e, "weights", w, &eok);
		set_new(e, "ratio", r, &eok);
		set_new(e, "period", json_u64(m->period[i]), &eok);
		set_new(e, "approximated", json_boolean(m->approximated[i]), &eok);
		if (!eok || json_array_append_new(sch, e) < 0)
			ok = false;
	}
	set_new(o, "sources", src, &ok);
	set_new(o, "schedule", sch, &ok);
	set_new(o, "epoch", json_string(m->epoch), &ok);
	set_new(o, "epoch_records", json_u64(m->epoch_records), &ok);
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
	if (ok && s->nuntyped) {
		json_t *u = json_array();

		for (size_t i = 0; u && i < s->nuntyped; i++)
			if (json_array_append_new(u, json_string(s->untyped[i])) < 0) {
				json_decref(u);
				u = NULL;
			}
		set_new(root, "untyped_features", u, &ok);
	}
	if (ok && facts) {
		set_new(root, "records", json_u64(facts->records), &ok);
		set_new(root, "batch_size", json_u64(facts->batch_size), &ok);
		set_new(root, "batches_per_epoch", json_u64(facts->batches_per_epoch), &ok);
		set_new(root, "seed", json_u64(facts->seed), &ok);
		if (facts->shuffle)
			set_new(root, "shuffle", json_string(facts->shuffle), &ok);
		if (facts->partitions)
			set_new(root, "partitions", json_u64(facts->partitions), &ok);
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
		if (facts->mixture) {
			set_new(root, "mixture", mix_facts_json(facts->mixture), &ok);
			set_new(root, "source_records", json_u64(facts->source_records), &ok);
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

/* ---- TFDS features.json ----------------------------------------------------------------- */

static struct bfs_feature_spec *spec_find(struct bfs_schema *s, const char *name)
{
	ssize_t at = bfs_spec_find_n(s->features, s->nfeatures, name, strlen(name));
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

	bfs_spec_names_free(f);
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
		bfs_spec_names_free(f);
		return names_from_json(f, jn);
	}
	if (json_is_integer(jc))
		nc = (long long)json_integer_value(jc);
	else if (json_is_string(jc))
		nc = strtoll(json_string_value(jc), NULL, 10);
	if (nc <= 0 || nc > 10000000)
		return 0;
	bfs_spec_names_free(f);
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
				bfs_augment_init(&f->aug);
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

/* ---- mixture files (schema_json.h) ------------------------------------------------------- */

void bfs_mixfile_free(struct bfs_mixfile *m)
{
	if (!m)
		return;
	for (size_t i = 0; m->e && i < m->n; i++) {
		free(m->e[i].name);
		free(m->e[i].source);
		free(m->e[i].options);
	}
	free(m->e);
	free(m->from);
	free(m->weights);
	free(m->given);
	free(m);
}

/* Only these keys in obj; else the first other one is named. */
static int only_keys(json_t *obj, const char *const *keys, const char *where)
{
	const char *k;
	json_t *v;

	json_object_foreach(obj, k, v)
	{
		bool known = false;
		for (size_t i = 0; keys[i]; i++)
			known |= strcmp(k, keys[i]) == 0;
		if (!known)
			return bfs_err_set(-EINVAL, "mixture: %s: unknown key '%.100s'", where, k);
	}
	return 0;
}

/* A weight: a finite number in [10^-9, 10^9], counted in 10^-9. */
static int mix_weight(uint64_t *out, double *given, json_t *v, const char *where)
{
	double w;

	if (!json_is_number(v))
		return bfs_err_set(-EINVAL, "mixture: %s: weight must be a number", where);
	w = json_number_value(v);
	if (!isfinite(w) || w <= 0)
		return bfs_err_set(-EINVAL, "mixture: %s: weight must be positive and finite (%g)",
				   where, w);
	if (w > 1e9 || llround(w * 1e9) < 1)
		return bfs_err_set(
			-EINVAL, "mixture: %s: weight %g out of range (10^-9 to 10^9, 9 decimals)",
			where, w);
	*out = (uint64_t)llround(w * 1e9);
	*given = w;
	return 0;
}

static int mix_entries(struct bfs_mixfile *m, json_t *arr)
{
	static const char *const keys[] = { "name", "source", "weight", "options", NULL };
	json_t *e;
	size_t i;

	if (!json_is_array(arr) || json_array_size(arr) == 0)
		return bfs_err_set(-EINVAL, "mixture: \"mixture\" must be a list of sources");
	m->n = json_array_size(arr);
	m->e = calloc(m->n, sizeof(*m->e));
	m->weights = calloc(m->n, sizeof(*m->weights));
	m->given = calloc(m->n, sizeof(*m->given));
	m->from = calloc(1, sizeof(*m->from));
	if (!m->e || !m->weights || !m->given || !m->from)
		return -ENOMEM;
	m->nseg = 1;
	json_array_foreach(arr, i, e)
	{
		json_t *name = json_object_get(e, "name"), *src = json_object_get(e, "source");
		json_t *w = json_object_get(e, "weight"), *opt = json_object_get(e, "options");
		char where[160];
		int rc;

		if (!json_is_object(e))
			return bfs_err_set(-EINVAL, "mixture: entry %zu: not an object", i);
		if (!json_is_string(name) || !*json_string_value(name))
			return bfs_err_set(-EINVAL,
					   "mixture: entry %zu: needs a \"name\" (a string)", i);
		snprintf(where, sizeof(where), "entry %zu ('%.100s')", i, json_string_value(name));
		rc = only_keys(e, keys, where);
		if (rc)
			return rc;
		for (size_t j = 0; j < i; j++)
			if (strcmp(m->e[j].name, json_string_value(name)) == 0)
				return bfs_err_set(-EINVAL,
						   "mixture: %s: the name is already entry %zu's",
						   where, j);
		if (!json_is_string(src) || !*json_string_value(src))
			return bfs_err_set(-EINVAL, "mixture: %s: needs a \"source\" (a string)",
					   where);
		if (opt && !json_is_string(opt))
			return bfs_err_set(-EINVAL, "mixture: %s: \"options\" must be a string",
					   where);
		if (!(m->e[i].name = strdup(json_string_value(name))) ||
		    !(m->e[i].source = strdup(json_string_value(src))) ||
		    (opt && !(m->e[i].options = strdup(json_string_value(opt)))))
			return -ENOMEM;
		if (w && (rc = mix_weight(&m->weights[i], &m->given[i], w, where)) != 0)
			return rc;
		if (!w)
			m->given[i] = 0; /* from the schedule, checked there */
	}
	return 0;
}

static int mix_schedule(struct bfs_mixfile *m, json_t *arr)
{
	static const char *const keys[] = { "from_record", "weights", NULL };
	size_t ns = json_array_size(arr), i;
	json_t *seg;

	if (!json_is_array(arr) || ns == 0)
		return bfs_err_set(-EINVAL, "mixture: \"schedule\" must be a list of "
					    "{\"from_record\", \"weights\"}");
	uint64_t *w = calloc(ns * m->n, sizeof(*w));
	double *g = calloc(ns * m->n, sizeof(*g));
	uint64_t *from = calloc(ns, sizeof(*from));
	if (!w || !g || !from) {
		free(w);
		free(g);
		free(from);
		return -ENOMEM;
	}
	json_array_foreach(arr, i, seg)
	{
		json_t *fr = json_object_get(seg, "from_record"),
		       *ws = json_object_get(seg, "weights");
		char where[160];
		int rc;

		snprintf(where, sizeof(where), "schedule entry %zu", i);
		rc = json_is_object(seg)
			     ? only_keys(seg, keys, where)
			     : bfs_err_set(-EINVAL, "mixture: %s: not an object", where);
		if (!rc && (!json_is_integer(fr) || json_integer_value(fr) < 0))
			rc = bfs_err_set(-EINVAL,
					 "mixture: %s: \"from_record\" must be an integer >= 0",
					 where);
		if (!rc && i == 0 && json_integer_value(fr) != 0)
			rc = bfs_err_set(-EINVAL, "mixture: %s: the first must be from_record 0",
					 where);
		if (!rc && i > 0 && (uint64_t)json_integer_value(fr) <= from[i - 1])
			rc = bfs_err_set(-EINVAL,
					 "mixture: %s: from_record %lld is not after the entry "
					 "before",
					 where, (long long)json_integer_value(fr));
		if (!rc && (!json_is_array(ws) || json_array_size(ws) != m->n))
			rc = bfs_err_set(-EINVAL,
					 "mixture: %s: \"weights\" must list %zu numbers (one per "
					 "source)",
					 where, m->n);
		for (size_t s = 0; !rc && s < m->n; s++) {
			char ew[320];
			snprintf(ew, sizeof(ew), "%s, source '%.100s'", where, m->e[s].name);
			rc = mix_weight(&w[i * m->n + s], &g[i * m->n + s], json_array_get(ws, s),
					ew);
		}
		if (rc) {
			free(w);
			free(g);
			free(from);
			return rc;
		}
		from[i] = (uint64_t)json_integer_value(fr);
	}
	/* an entry's own weight, when given, is the first segment's */
	for (size_t s = 0; s < m->n; s++)
		if (m->given[s] != 0 && m->weights[s] != w[s]) {
			int rc =
				bfs_err_set(-EINVAL,
					    "mixture: entry %zu ('%.100s'): weight %g differs from "
					    "the schedule's first (%g)",
					    s, m->e[s].name, m->given[s], g[s]);
			free(w);
			free(g);
			free(from);
			return rc;
		}
	free(m->weights);
	free(m->given);
	free(m->from);
	m->weights = w;
	m->given = g;
	m->from = from;
	m->nseg = ns;
	return 0;
}

/* What a mixture file is, for the errors that find none. */
#define MIX_FORM                                                                                   \
	"a mixture file is a JSON object {\"mixture\": [{\"name\": ..., \"source\": ..., "         \
	"\"weight\": ...}, ...]}"

static bool blank(const char *text, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (text[i] != ' ' && text[i] != '\t' && text[i] != '\n' && text[i] != '\r')
			return false;
	return true;
}

int bfs_mixfile_parse(struct bfs_mixfile **out, const char *text, size_t len)
{
	static const char *const keys[] = { "mixture", "epoch", "schedule", NULL };
	struct bfs_mixfile *m = calloc(1, sizeof(*m));
	json_error_t jerr;
	json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr), *ep, *sched;
	int rc;

	if (!m) {
		json_decref(root);
		return -ENOMEM;
	}
	if (!root && blank(text, len))
		rc = bfs_err_set(-EINVAL, "mixture: the file is empty; %s", MIX_FORM);
	if (!root && !blank(text, len))
		/* jansson's column is 0 before a line's first character */
		rc = bfs_err_set(-EINVAL, "mixture: not valid JSON at line %d, column %d: %s",
				 jerr.line, jerr.column > 0 ? jerr.column : 1, jerr.text);
	if (!root)
		goto out;
	if (!json_is_object(root) || !json_object_get(root, "mixture"))
		rc = bfs_err_set(-EINVAL, "mixture: %s; %s",
				 json_is_object(root) ? "no \"mixture\" key" : "not a JSON object",
				 MIX_FORM);
	else
		rc = only_keys(root, keys, "the file");
	if (!rc)
		rc = mix_entries(m, json_object_get(root, "mixture"));
	sched = json_object_get(root, "schedule");
	if (!rc && sched)
		rc = mix_schedule(m, sched);
	for (size_t s = 0; !rc && !sched && s < m->n; s++)
		if (m->given[s] == 0)
			rc = bfs_err_set(-EINVAL,
					 "mixture: entry %zu ('%.100s'): needs a \"weight\"", s,
					 m->e[s].name);
	ep = json_object_get(root, "epoch");
	if (!rc && ep) {
		if (json_is_string(ep) && strcmp(json_string_value(ep), "first_exhausted") == 0)
			m->epoch = BFS_MIXFILE_FIRST_EXHAUSTED;
		else if (json_is_string(ep) && strcmp(json_string_value(ep), "all_exhausted") == 0)
			m->epoch = BFS_MIXFILE_ALL_EXHAUSTED;
		else if (json_is_integer(ep) && json_integer_value(ep) > 0) {
			m->epoch = BFS_MIXFILE_RECORDS;
			m->epoch_records = (uint64_t)json_integer_value(ep);
		} else
			rc = bfs_err_set(-EINVAL, "mixture: \"epoch\" must be \"first_exhausted\", "
						  "\"all_exhausted\" or a number of records >= 1");
	}
out:
	json_decref(root);
	if (rc) {
		bfs_mixfile_free(m);
		return rc == -ENOMEM ? bfs_err_set(rc, "mixture: out of memory") : rc;
	}
	*out = m;
	return 0;
}

/* ---- a JSON object's members (schema_json.h) --------------------------------------------- */

void bfs_json_members_free(struct bfs_json_member *m, size_t n)
{
	for (size_t i = 0; m && i < n; i++) {
		free(m[i].key);
		free(m[i].text);
	}
	free(m);
}

/* Member k = v into *m (its text, its number). 0 or -ENOMEM. */
static int member_of(struct bfs_json_member *m, const char *k, json_t *v)
{
	m->isnum = json_is_number(v) || json_is_boolean(v);
	m->num = json_is_number(v) ? json_number_value(v) : json_is_true(v) ? 1 : 0;
	m->key = strdup(k);
	m->text = json_dumps(v, JSON_ENCODE_ANY | JSON_REAL_PRECISION(15));
	return m->key && m->text ? 0 : -ENOMEM;
}

int bfs_json_members(struct bfs_json_member **out, size_t *n, const char *text, size_t len)
{
	json_error_t jerr;
	json_t *root, *v;
	size_t i = 0, end;
	const char *k;
	int rc = 0;

	while (i < len && strchr(" \t\n\r", text[i]) && text[i])
		i++;
	if (i == len || text[i] != '{')
		return bfs_err_set(-EBADMSG, "not a JSON object (byte %zu)", i);
	/* the object, then only spaces and NUL bytes (a snapshot padded to
	 * another reader's size) */
	root = json_loadb(text, len, JSON_DISABLE_EOF_CHECK, &jerr);
	if (!root)
		return bfs_err_set(-EBADMSG, "not a flat JSON object: %s at byte %d", jerr.text,
				   jerr.position);
	for (end = (size_t)jerr.position; end < len && strchr(" \t\n\r", text[end]); end++)
		;
	if (end < len) {
		json_decref(root);
		return bfs_err_set(-EBADMSG, "not a flat JSON object: unexpected text at byte %zu",
				   end);
	}
	*n = json_object_size(root);
	*out = calloc(*n ? *n : 1, sizeof(**out));
	i = 0;
	json_object_foreach(root, k, v)
	{
		if (!*out || (rc = member_of(&(*out)[i++], k, v)) != 0)
			break;
	}
	json_decref(root);
	if (!*out || rc) {
		bfs_json_members_free(*out, i);
		return bfs_err_set(-ENOMEM, "out of memory");
	}
	return 0;
}
