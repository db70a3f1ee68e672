/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mixture.c — SOURCE a mixture file (see mixture.h): the file parsed
 * (schema_json.h), each entry opened as its own dataset, the schemas merged
 * (a feature must agree in kind, layout and shape everywhere), the union
 * of the sources and the mixture's order made for the batcher.
 */
#include "mixture.h"

#include "record.h"
#include "s3.h"
#include "schema_json.h"
#include "tfds.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define MIXFILE_MAX ((size_t)16 << 20)

/* Whether a regular file is meant as a mixture file: its name ends in
 * .json, or its first byte after blanks is '{'; never when its first bytes
 * begin a shard (a record of 123 bytes starts 7b 00 ..., a gzip or zlib
 * stream). Its JSON is judged by bfs_mount_mix_open, whose error names the
 * line and column: a mixture file with a mistake is never read as a shard. */
static bool meant_as_json(const char *path)
{
	uint8_t head[64];
	FILE *f = fopen(path, "rb");
	size_t n = f ? fread(head, 1, sizeof(head), f) : 0;
	const char *dot = strrchr(path, '.');

	if (f)
		fclose(f);
	if (bfs_shard_sniff(head, n) != BFS_COMP_AUTO)
		return false;
	if (dot && strcasecmp(dot, ".json") == 0)
		return true;
	for (size_t i = 0; i < n; i++)
		if (head[i] != ' ' && head[i] != '\t' && head[i] != '\n' && head[i] != '\r')
			return head[i] == '{';
	return false;
}

bool bfs_mount_mix_is(const char *source)
{
	struct stat st;

	if (bfs_s3_url_is(source))
		return false;
	return stat(source, &st) == 0 && S_ISREG(st.st_mode) && meant_as_json(source);
}

void bfs_mount_mix_close(struct bfs_mount_mix *mm)
{
	if (!mm)
		return;
	bfs_dataset_close(mm->ds); /* the union first: it borrows the members' shards */
	for (size_t i = 0; mm->members && i < mm->n; i++)
		bfs_dataset_close(mm->members[i]);
	for (size_t i = 0; mm->sources && i < mm->n; i++)
		free(mm->sources[i]);
	free(mm->sources);
	free(mm->names);
	free(mm->records);
	free(mm->ratio);
	free(mm->period);
	free(mm->approximated);
	free(mm->members);
	bfs_schema_free(mm->schema);
	bfs_mix_free(mm->mix);
	bfs_mixfile_free(mm->file);
	free(mm);
}

/* An entry's source: a bucket or an absolute path as written, a relative
 * one from the mixture file's folder; a TFDS folder with split= becomes
 * its split's glob. NULL after one line. */
static char *entry_source(const char *file, const struct bfs_mixfile_entry *e, const char *split)
{
	char real[PATH_MAX];
	char *dup = strdup(realpath(file, real) ? real : file), *out = NULL;
	const char *src = e->source;

	if (!dup)
		return NULL;
	if (bfs_s3_url_is(src) || src[0] == '/') {
		if (!(out = strdup(src)))
			goto out;
	} else if (asprintf(&out, "%s/%s", dirname(dup), src) < 0) {
		out = NULL;
		goto out;
	}
	if (bfs_tfds_is_dir(out)) {
		char glob[PATH_MAX + 64];
		if (!split) {
			fprintf(stderr,
				"batchfs: mixture entry '%s': %s is a TFDS dataset folder: give "
				"\"options\": \"split=NAME\"\n",
				e->name, out);
			free(out);
			out = NULL;
		} else if (bfs_tfds_glob(glob, sizeof(glob), out, split) != 0) {
			fprintf(stderr, "batchfs: mixture entry '%s': %s: path too long\n", e->name,
				out);
			free(out);
			out = NULL;
		} else {
			free(out);
			out = strdup(glob);
		}
	} else if (split) {
		fprintf(stderr,
			"batchfs: mixture entry '%s': option 'split=%s': %s is not a TFDS dataset "
			"folder\n",
			e->name, split, out);
		free(out);
		out = NULL;
	}
out:
	free(dup);
	return out;
}

/* An entry's "options": compression=, split=, follow_symlinks. 0, or 1
 * after one line. *split points into buf. */
static int entry_options(const struct bfs_mixfile_entry *e, struct bfs_dataset_opts *d, char *buf,
			 const char **split)
{
	char *save = NULL;

	*split = NULL;
	for (char *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
		char *v = strchr(kv, '=');

		if (v)
			*v++ = '\0';
		if (strcmp(kv, "compression") == 0 && v) {
			if (bfs_compression_parse(&d->comp, v) != 0) {
				fprintf(stderr,
					"batchfs: mixture entry '%s': option 'compression=%s': "
					"auto, none, gzip or zlib\n",
					e->name, v);
				return 1;
			}
		} else if (strcmp(kv, "split") == 0 && v && *v) {
			*split = v;
		} else if (strcmp(kv, "follow_symlinks") == 0 && !v) {
			d->follow_symlinks = true;
		} else {
			fprintf(stderr,
				"batchfs: mixture entry '%s': option '%s%s%s' is not a source's "
				"option (compression=, split=, follow_symlinks; the others are the "
				"mount's)\n",
				e->name, kv, v ? "=" : "", v ? v : "");
			return 1;
		}
	}
	return 0;
}

static bool spec_agrees(const struct bfs_feature_spec *a, const struct bfs_feature_spec *b)
{
	if (a->kind != b->kind || a->layout != b->layout || a->ndim != b->ndim ||
	    a->dtype != b->dtype || a->image != b->image)
		return false;
	for (int d = 0; d < a->ndim; d++)
		if (a->shape[d] != b->shape[d])
			return false;
	return true;
}

static const struct bfs_feature_spec *find_spec(const struct bfs_feature_spec *a, size_t n,
						const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(a[i].name, name) == 0)
			return &a[i];
	return NULL;
}

/* The values per record of a feature that can grow into a padded one, as
 * inference over several sources would make it: numeric fixed [] or [n],
 * bytes fixed uint8 [L], or padded; -1 for any other. */
static int64_t pad_len(const struct bfs_feature_spec *f)
{
	if (f->is_list || f->image || f->dtype != bfs_spec_default_dtype(f->kind))
		return -1;
	if (f->layout == BFS_LAYOUT_PADDED)
		return f->max_len;
	if (f->layout != BFS_LAYOUT_FIXED || f->ndim > 1)
		return -1;
	return f->ndim == 0 ? 1 : f->shape[0];
}

static void make_padded(struct bfs_feature_spec *f, int64_t max_len)
{
	f->layout = BFS_LAYOUT_PADDED;
	f->ndim = 1;
	f->shape[0] = -1;
	f->max_len = max_len;
	f->has_default = false;
	memset(&f->pad, 0, sizeof(f->pad));
}

/* a widened to hold b's records too (b: NULL, a source whose records
 * hold the feature with no value, `Feature {}`): what inference over both
 * would give. Sources that wrote some records with a missing value, or
 * fewer values, are parts of one dataset. False when they cannot agree
 * (kinds, dtypes, feature lists, images, two fixed shapes). */
static bool widen(struct bfs_feature_spec *a, const struct bfs_feature_spec *b)
{
	int64_t la = pad_len(a), lb = b ? pad_len(b) : 0;

	if (b && spec_agrees(a, b))
		return true;
	/* two fixed shapes that differ are two datasets, not missing values */
	if (b && (a->kind != b->kind || a->is_list || b->is_list ||
		  (a->layout == BFS_LAYOUT_FIXED && b->layout == BFS_LAYOUT_FIXED)))
		return false;
	if (a->kind == BFS_KIND_BYTES &&
	    (a->layout == BFS_LAYOUT_RAGGED2 || (b && b->layout == BFS_LAYOUT_RAGGED2))) {
		if ((a->layout != BFS_LAYOUT_RAGGED2 && la < 0) ||
		    (b && b->layout != BFS_LAYOUT_RAGGED2 && lb < 0))
			return false;
		a->layout = BFS_LAYOUT_RAGGED2; /* several values: ragged twice */
		a->ndim = 2;
		a->shape[0] = a->shape[1] = -1;
		a->max_len = 0;
		return true;
	}
	if (a->layout == BFS_LAYOUT_RAGGED && !b)
		return true; /* no value is an empty row */
	if (la < 0 || lb < 0)
		return false;
	make_padded(a, la > lb ? la : lb);
	return true;
}

static int disagree(const char *name, const struct bfs_feature_spec *g, const char *first,
		    const struct bfs_feature_spec *f)
{
	char ga[64], fa[64];

	bfs_spec_fmt_shape(ga, sizeof(ga), g->ndim, g->shape);
	bfs_spec_fmt_shape(fa, sizeof(fa), f->ndim, f->shape);
	fprintf(stderr,
		"batchfs: mixture entry '%s': feature '%s' is %s %s %s where entry '%s' has "
		"it %s %s %s (the sources must agree in kind and dtype; pick features with "
		"features=, or give schema=)\n",
		name, g->name, bfs_kind_name(g->kind), bfs_dtype_name(g->dtype), ga, first,
		bfs_kind_name(f->kind), bfs_dtype_name(f->dtype), fa);
	return 1;
}

static int lacks(const char *name, const char *feature)
{
	fprintf(stderr,
		"batchfs: mixture entry '%s' lacks feature '%s' (leave it out with features=, "
		"or give it a default in schema=)\n",
		name, feature);
	return 1;
}

/* Merge one array of source s's specs (from) into the merged ones (into):
 * the same names, each agreeing or widened (padded lengths and steps: the
 * largest). A feature one side holds only as `Feature {}` (its untyped
 * names) is that side's empty values. 0, or 1 after one line. */
static int merge_specs(struct bfs_schema *into, bool lists, const char *first,
		       const struct bfs_schema *from, const char *name)
{
	struct bfs_feature_spec *in = lists ? into->lists : into->features;
	const struct bfs_feature_spec *fr = lists ? from->lists : from->features;
	size_t nin = lists ? into->nlists : into->nfeatures,
	       nfrom = lists ? from->nlists : from->nfeatures;

	for (size_t i = 0; i < nin; i++) {
		const struct bfs_feature_spec *g = find_spec(fr, nfrom, in[i].name);
		struct bfs_feature_spec was = in[i];

		if (!g &&
		    !(!lists && bfs_schema_untyped_has(from, in[i].name) && widen(&in[i], NULL)))
			return lacks(name, in[i].name);
		if (g && !widen(&in[i], g))
			return disagree(name, g, first, &was);
		if (!g)
			continue;
		if (g->max_len > in[i].max_len && in[i].layout == BFS_LAYOUT_PADDED)
			in[i].max_len = g->max_len;
		if (g->max_steps > in[i].max_steps)
			in[i].max_steps = g->max_steps;
		if (g->content != in[i].content)
			in[i].content = BFS_IMAGE_UNKNOWN;
		if (g->content_w > in[i].content_w)
			in[i].content_w = g->content_w;
		if (g->content_h > in[i].content_h)
			in[i].content_h = g->content_h;
	}
	for (size_t i = 0; i < nfrom; i++) {
		struct bfs_feature_spec f = fr[i];

		if (find_spec(in, nin, fr[i].name))
			continue;
		if (lists || !bfs_schema_untyped_has(into, fr[i].name) || !widen(&f, NULL))
			return lacks(first, fr[i].name);
		if (bfs_schema_add_feature(into, &f) != 0) /* the earlier sources' empty values */
			return fprintf(stderr, "batchfs: out of memory\n"), 1;
	}
	return 0;
}

/* Merge source s's schema into the merged one. 0, or 1 after one line. */
static int merge_schema(struct bfs_schema *into, const char *first, const struct bfs_schema *from,
			const char *name)
{
	if (merge_specs(into, false, first, from, name) ||
	    merge_specs(into, true, first, from, name))
		return 1;
	for (size_t i = 0; i < from->nuntyped; i++) /* untyped in every source so far */
		if (!find_spec(into->features, into->nfeatures, from->untyped[i]) &&
		    bfs_schema_untyped_add(into, from->untyped[i]) != 0)
			return fprintf(stderr, "batchfs: out of memory\n"), 1;
	return 0;
}

static int open_entry(struct bfs_mount_mix *mm, size_t i, const char *path,
		      const struct bfs_options *o, const struct bfs_dataset_opts *dopt, bool user)
{
	const struct bfs_mixfile_entry *e = &mm->file->e[i];
	struct bfs_dataset_opts d = *dopt;
	struct bfs_schema *s = NULL;
	char *buf = strdup(e->options ? e->options : "");
	const char *split;
	int rc;

	if (!buf || entry_options(e, &d, buf, &split) != 0) {
		free(buf);
		return 1;
	}
	mm->sources[i] = entry_source(path, e, split);
	free(buf);
	if (!mm->sources[i])
		return 1;
	d.infer = !user;
	rc = bfs_dataset_open(&mm->members[i], mm->sources[i], &d);
	if (rc) {
		fprintf(stderr, "batchfs: mixture entry '%s': %s\n", e->name, bfs_err_msg());
		return 1;
	}
	mm->names[i] = e->name;
	mm->records[i] = bfs_dataset_nrecords(mm->members[i]);
	if (mm->records[i] == 0) {
		fprintf(stderr, "batchfs: mixture entry '%s': %s holds no records\n", e->name,
			mm->sources[i]);
		return 1;
	}
	if (user)
		return 0;
	if (bfs_schema_clone(&s, bfs_dataset_schema(mm->members[i])) != 0 ||
	    (o->features && bfs_schema_select(s, o->features) != 0)) {
		fprintf(stderr, "batchfs: mixture entry '%s': %s\n", e->name, bfs_err_msg());
		bfs_schema_free(s);
		return 1;
	}
	if (i == 0) {
		mm->schema = s;
		return 0;
	}
	rc = merge_schema(mm->schema, mm->names[0], s, e->name);
	bfs_schema_free(s);
	return rc ? 1 : 0;
}

/* A mixture reads one bucket at most (its I/O stage serves one): told from
 * the file alone, before any source is opened (an unreachable endpoint
 * would otherwise take its retries first). True after one line. */
static bool two_buckets(const struct bfs_mixfile *f, const char *path)
{
	size_t first = SIZE_MAX;

	for (size_t i = 0; i < f->n; i++) {
		if (!bfs_s3_url_is(f->e[i].source))
			continue;
		if (first == SIZE_MAX) {
			first = i;
			continue;
		}
		fprintf(stderr,
			"batchfs: %s: mixture entries '%s' and '%s' are both buckets, and a "
			"mixture reads one bucket source at most: copy all but one to a local "
			"disk (or mount them apart)\n",
			path, f->e[first].name, f->e[i].name);
		return true;
	}
	return false;
}

/* Each segment's period as the mixture draws it (docs/shuffle.md 8.1),
 * for README.txt and schema.json. 0, or 1 after one line. */
static int drawn_ratios(struct bfs_mount_mix *mm)
{
	size_t nseg = mm->file->nseg;

	mm->ratio = calloc(nseg * mm->n, sizeof(*mm->ratio));
	mm->period = calloc(nseg, sizeof(*mm->period));
	mm->approximated = calloc(nseg, sizeof(*mm->approximated));
	if (!mm->ratio || !mm->period || !mm->approximated) {
		fprintf(stderr, "batchfs: out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < nseg; i++) {
		const uint64_t *w = bfs_mix_weights(mm->mix, i, &mm->period[i]);

		memcpy(mm->ratio + i * mm->n, w, mm->n * sizeof(*w));
		mm->approximated[i] = bfs_mix_approximated(mm->mix, i);
	}
	return 0;
}

static const char *const epoch_names[] = { "first_exhausted", "all_exhausted", "records" };

int bfs_mount_mix_open(struct bfs_mount_mix **out, const char *path, const struct bfs_options *o,
		       const struct bfs_dataset_opts *dopt, bool user)
{
	struct bfs_mount_mix *mm = calloc(1, sizeof(*mm));
	size_t len;
	char *text = bfs_read_file(path, MIXFILE_MAX, &len);
	int rc;

	if (!mm || !text) {
		fprintf(stderr, "batchfs: %s: cannot read the mixture file\n", path);
		goto fail;
	}
	rc = bfs_mixfile_parse(&mm->file, text, len);
	free(text);
	text = NULL;
	if (rc) {
		fprintf(stderr, "batchfs: %s: %s\n", path, bfs_err_msg());
		goto fail;
	}
	if (o->shuffle && o->block) {
		fprintf(stderr, "batchfs: option 'shuffle=block': not with a mixture (use "
				"shuffle=global or none, without block_size, window or "
				"partitions)\n");
		goto fail;
	}
	if (two_buckets(mm->file, path))
		goto fail;
	mm->n = mm->file->n;
	mm->members = calloc(mm->n, sizeof(*mm->members));
	mm->sources = calloc(mm->n, sizeof(*mm->sources));
	mm->names = calloc(mm->n, sizeof(*mm->names));
	mm->records = calloc(mm->n, sizeof(*mm->records));
	if (!mm->members || !mm->sources || !mm->names || !mm->records)
		goto fail;
	for (size_t i = 0; i < mm->n; i++)
		if (open_entry(mm, i, path, o, dopt, user) != 0)
			goto fail;
	if (bfs_dataset_union(&mm->ds, mm->members, mm->n) != 0) {
		fprintf(stderr, "batchfs: %s: %s\n", path, bfs_err_msg());
		goto fail;
	}
	struct bfs_mix_spec sp = {
		.nsrc = mm->n,
		.names = mm->names,
		.nrecords = mm->records,
		.nseg = mm->file->nseg,
		.from = mm->file->from,
		.weights = mm->file->weights,
		.epoch = (enum bfs_mix_epoch)mm->file->epoch,
		.epoch_records = mm->file->epoch_records,
		.seed = o->seed,
		.shuffle = o->shuffle,
	};
	if (bfs_mix_new(&mm->mix, &sp) != 0) {
		fprintf(stderr, "batchfs: %s: %s\n", path, bfs_err_msg());
		goto fail;
	}
	if (drawn_ratios(mm) != 0)
		goto fail;
	mm->facts = (struct bfs_mix_facts){
		.n = mm->n,
		.names = mm->names,
		.sources = (const char *const *)mm->sources,
		.records = mm->records,
		.nseg = mm->file->nseg,
		.from = mm->file->from,
		.weights = mm->file->given,
		.ratio = mm->ratio,
		.period = mm->period,
		.approximated = mm->approximated,
		.epoch = epoch_names[mm->file->epoch],
		.epoch_records = bfs_mix_epoch_len(mm->mix),
	};
	*out = mm;
	return 0;
fail:
	free(text);
	bfs_mount_mix_close(mm);
	return 1;
}

int bfs_mount_mix_add_provenance(struct bfs_schema *s)
{
	int rc = bfs_schema_add_provenance(s);

	if (rc)
		fprintf(stderr, "batchfs: %s\n", rc == -ENOMEM ? "out of memory" : bfs_err_msg());
	return rc ? 1 : 0;
}

/* Appends to s (freed; NULL on failure) each segment's weights as drawn:
 * "7 : 2 : 1, every 10 records", and why when they are not the weights'
 * own ratio. */
static char *add_drawn(char *s, const struct bfs_mount_mix *mm)
{
	char *t;

	for (size_t i = 0; s && i < mm->file->nseg; i++) {
		char from[64] = "";

		if (mm->file->nseg > 1)
			snprintf(from, sizeof(from), " from record %llu",
				 (unsigned long long)mm->file->from[i]);
		if (asprintf(&t, "%sThe weights as drawn%s: ", s, from) < 0)
			t = NULL;
		free(s);
		s = t;
		for (size_t k = 0; s && k < mm->n; k++) {
			if (asprintf(&t, "%s%s%llu", s, k ? " : " : "",
				     (unsigned long long)mm->ratio[i * mm->n + k]) < 0)
				t = NULL;
			free(s);
			s = t;
		}
		if (s &&
		    asprintf(&t, "%s, every %llu records%s\n", s, (unsigned long long)mm->period[i],
			     mm->approximated[i]
				     ? "\n  (the nearest ratio whose period fits, every share "
				       "within 10^-6 of the\n  weights given: docs/shuffle.md "
				       "8.1)"
				     : "") < 0)
			t = NULL;
		free(s);
		s = t;
	}
	return s;
}

char *bfs_mount_mix_readme(const struct bfs_mount_mix *mm, const char *mnt)
{
	char *s = NULL, *t;

	if (asprintf(&s,
		     "\nMixture: %zu sources interleaved by weight into one stream; an epoch is\n"
		     "%llu records of it (\"epoch\": %s). Each source is read in passes, each\n"
		     "pass its own permutation: no record of a source comes again before all\n"
		     "of it has come once. The order is docs/shuffle.md, section 8.\n",
		     mm->n, (unsigned long long)bfs_mix_epoch_len(mm->mix),
		     epoch_names[mm->file->epoch]) < 0)
		return NULL;
	for (size_t i = 0; i < mm->n; i++) {
		if (asprintf(&t, "%s  source %zu '%s': %s, %llu records, weight %g\n", s, i,
			     mm->names[i], mm->sources[i], (unsigned long long)mm->records[i],
			     mm->file->given[i]) < 0) {
			free(s);
			return NULL;
		}
		free(s);
		s = t;
	}
	s = add_drawn(s, mm);
	if (!s)
		return NULL;
	if (asprintf(&t,
		     "%sEvery batch folder (and all/) also holds _source.npy (int32 [B], the\n"
		     "row's source, numbered as above) and _record.npy (int64 [B], the\n"
		     "record's index in its source, file order). The mean loss of each source:\n"
		     "  import numpy as np, torch\n"
		     "  src = torch.from_numpy(np.load('%s/epoch-0000/batch-000000/_source.npy'))\n"
		     "  loss_per_row = torch.rand(len(src))  # your model's loss of each row\n"
		     "  per_source = torch.zeros(%zu).index_add_(0, src.long(), loss_per_row)\n"
		     "  rows = torch.bincount(src.long(), minlength=%zu).clamp(min=1)\n"
		     "  print(per_source / rows)\n"
		     "\n",
		     s, mnt, mm->n, mm->n) < 0) {
		free(s);
		return NULL;
	}
	free(s);
	return t;
}
