/* SPDX-License-Identifier: Apache-2.0 */
/*
 * schema_infer.c — schema inference from decoded records (the rules are
 * in schema.h): one small statistics record per typed feature name, sorted
 * by name like the records themselves, so adding a record is one merge
 * walk. A failed bfs_infer_add leaves the inference as it was.
 *
 * Does not: read records (the scan hands them over) or know threads (its
 * caller serializes the adds).
 */
#include "schema_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Most distinct typed names one inference tracks (features + lists). */
#define INFER_MAX_NAMES 100000

/* ---- inference ------------------------------------------------------------------ */

struct fstat {
	char *name;
	enum bfs_kind kind; /* NONE: so far only `Feature {}` (features, not lists) */
	uint64_t present; /* records that hold it (`Feature {}` too: 0 values) */
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

/* Whether an item is counted: one with a kind set, or a feature (not a
 * list) present as `Feature {}` (TFX's missing value: 0 values) whose name
 * could be a path. */
static bool counted(const char *name, enum bfs_kind kind, bool list)
{
	if (kind != BFS_KIND_NONE)
		return true;
	return !list && bfs_schema_name_ok(name) == 0;
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
		if (kind == BFS_KIND_NONE) {
			if (!(j < nst && c == 0) && counted(name, kind, list))
				(*nnew)++;
			continue;
		}
		if (j < nst && c == 0) {
			if (st[j].kind != kind && st[j].kind != BFS_KIND_NONE)
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
		if (!counted(name, kind, list) || (j < *narr && c == 0))
			continue;
		names[n] = strdup(name);
		if (!names[n])
			goto nomem;
		n++;
	}
	for (i = 0, j = 0, k = 0, n = 0; i < nitems; i++) {
		const char *name = item_name(ex, list, i);
		item_kind(ex, list, i, &kind);
		if (!counted(name, kind, list))
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
		if (!counted(name, kind, list))
			continue;
		while (strcmp(st[j].name, name) < 0)
			j++;
		if (kind == BFS_KIND_NONE) { /* present, no value */
			st[j].present++;
			st[j].min_count = 0;
			continue;
		}
		if (st[j].kind == BFS_KIND_NONE) /* typed at last: the records before had none */
			st[j].kind = kind;
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
	f->dtype = bfs_spec_default_dtype(st->kind);
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
	f->dtype = bfs_spec_default_dtype(st->kind);
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

char *bfs_infer_mixed(const struct bfs_infer *inf)
{
	const struct fstat *rare = NULL;
	size_t nrare = 0;
	char *out = NULL;

	for (size_t i = 0; i < inf->nf + inf->nl; i++) {
		const struct fstat *st = i < inf->nf ? &inf->f[i] : &inf->l[i - inf->nf];

		if (!st->present || st->kind == BFS_KIND_NONE || st->present * 2 > inf->nrecords)
			continue;
		if (!rare || st->present < rare->present)
			rare = st;
		nrare++;
	}
	if (!rare)
		return NULL;
	if (nrare > 1 ? asprintf(&out,
				 "%zu features are missing from most records ('%.200s' is in %llu "
				 "of %llu)",
				 nrare, rare->name, (unsigned long long)rare->present,
				 (unsigned long long)inf->nrecords) < 0
		      : asprintf(&out,
				 "feature '%.200s' is missing from most records (it is in %llu of "
				 "%llu)",
				 rare->name, (unsigned long long)rare->present,
				 (unsigned long long)inf->nrecords) < 0)
		out = NULL;
	return out;
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
		if (st->kind == BFS_KIND_NONE) {
			err = bfs_schema_untyped_add(s, st->name);
			if (err < 0)
				goto out;
			continue;
		}
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
