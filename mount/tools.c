/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tools.c — `batchfs inspect | schema | index` (see tools.h). They use the
 * decoder library only: no FUSE, no mount.
 */
#include "tools.h"

#include "batch.h"
#include "dataset.h"
#include "example.h"
#include "mixture.h"
#include "options.h"
#include "record.h"
#include "schema.h"

#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------ JSON out */

static void json_str(FILE *f, const char *s)
{
	char tmp[7];

	fputc('"', f);
	for (; *s; s++) {
		size_t k = bfs_json_char(tmp, (unsigned char)*s);
		fwrite(tmp, 1, k, f);
	}
	fputc('"', f);
}

static void json_values(FILE *f, const struct bfs_values *v)
{
	fprintf(f, "{\"kind\": \"%s\", \"values\": [", bfs_kind_name(v->kind));
	for (size_t i = 0; i < v->count; i++) {
		if (i)
			fputs(", ", f);
		switch (v->kind) {
		case BFS_KIND_INT64:
			fprintf(f, "%" PRId64, v->i[i]);
			break;
		case BFS_KIND_FLOAT:
			if (isnan(v->f[i]))
				fputs("\"nan\"", f);
			else if (isinf(v->f[i]))
				fputs(v->f[i] > 0 ? "\"inf\"" : "\"-inf\"", f);
			else
				fprintf(f, "%.9g", (double)v->f[i]);
			break;
		case BFS_KIND_BYTES:
			fputc('"', f);
			for (size_t k = 0; k < v->b[i].len; k++)
				fprintf(f, "%02x", v->b[i].data[k]);
			fputc('"', f);
			break;
		default:
			break;
		}
	}
	fputs("]}", f);
}

static void json_example(FILE *f, const struct bfs_example *ex)
{
	fputs("{\"features\": {", f);
	for (size_t i = 0; i < ex->nfeatures; i++) {
		fputs(i ? ", " : "", f);
		json_str(f, ex->features[i].name);
		fputs(": ", f);
		json_values(f, &ex->features[i].v);
	}
	fputc('}', f);
	if (ex->is_sequence) {
		fputs(", \"feature_lists\": {", f);
		for (size_t i = 0; i < ex->nlists; i++) {
			fputs(i ? ", " : "", f);
			json_str(f, ex->lists[i].name);
			fputs(": [", f);
			for (size_t s = 0; s < ex->lists[i].nsteps; s++) {
				fputs(s ? ", " : "", f);
				json_values(f, &ex->lists[i].steps[s]);
			}
			fputc(']', f);
		}
		fputc('}', f);
	}
	fputc('}', f);
}

/* ------------------------------------------------------------- inspect */

struct inspect_ctx {
	const char *path;
	uint64_t max_records;
	bool json;
	uint64_t shown;
	bool any_sequence, any_example;
	struct bfs_infer *inf;
	int err;
	FILE *out;
};

static int inspect_record(void *arg, uint64_t index, uint64_t offset, const uint8_t *data,
			  uint32_t len)
{
	struct inspect_ctx *c = arg;
	struct bfs_example *ex = NULL;
	int rc = bfs_example_decode(&ex, data, len);

	if (rc) {
		bfs_err_prefix("record %" PRIu64 " at offset %" PRIu64, index, offset);
		return rc;
	}
	if (ex->is_sequence)
		c->any_sequence = true;
	else
		c->any_example = true;
	rc = bfs_infer_add(c->inf, ex);
	if (rc)
		bfs_err_prefix("record %" PRIu64 " at offset %" PRIu64, index, offset);
	if (!rc && c->shown < c->max_records) {
		if (c->json) {
			fputs(c->shown ? ",\n    " : "\n    ", c->out);
			json_example(c->out, ex);
		} else {
			char *text = NULL;
			if (bfs_example_to_text(&text, ex, 16) == 0) {
				fprintf(c->out,
					"record %" PRIu64 " (offset %" PRIu64 ", %u bytes):\n%s",
					index, offset, len, text);
				free(text);
			}
		}
		c->shown++;
	}
	bfs_example_free(ex);
	return rc;
}

static void print_spec_line(FILE *f, const struct bfs_feature_spec *s)
{
	static const char *const layouts[] = { "fixed", "padded", "ragged", "ragged bytes" };

	fprintf(f, "  %s%s: %s, shape [", s->is_list ? "feature_lists/" : "", s->name,
		bfs_kind_name(s->kind));
	for (int d = 0; d < s->ndim; d++)
		fprintf(f, "%s%" PRId64, d ? ", " : "", s->shape[d]);
	fprintf(f, "], %s", s->is_list ? "per step" : layouts[s->layout]);
	if (s->layout == BFS_LAYOUT_PADDED && !s->is_list)
		fprintf(f, ", max_len %" PRId64, s->max_len);
	if (s->is_list)
		fprintf(f, ", max_steps %" PRId64, s->max_steps);
	if (s->content != BFS_IMAGE_UNKNOWN)
		fprintf(f, ", %s images up to %" PRId64 "x%" PRId64, bfs_image_fmt_name(s->content),
			s->content_w, s->content_h);
	fputc('\n', f);
}

static int inspect_file(const char *path, uint64_t max_records, bool json, bool *first_file)
{
	struct inspect_ctx c = {
		.path = path, .max_records = max_records, .json = json, .out = stdout
	};
	struct bfs_shard *s = NULL;
	struct bfs_schema *sch = NULL;
	char why[1100];
	bool cut;
	int rc;

	rc = bfs_shard_open(&s, path, BFS_COMP_AUTO);
	if (rc) {
		fprintf(stderr, "batchfs: %s%s%s\n", strstr(bfs_err_msg(), path) ? "" : path,
			strstr(bfs_err_msg(), path) ? "" : ": ", bfs_err_msg());
		return 1;
	}
	rc = bfs_infer_new(&c.inf);
	if (rc)
		goto out;
	if (json) {
		fputs(*first_file ? "\n  " : ",\n  ", stdout);
		fputs("{\"path\": ", stdout);
		json_str(stdout, path);
		fprintf(stdout, ", \"compression\": \"%s\", \"examples\": [",
			bfs_compression_name(bfs_shard_compression(s)));
	} else {
		printf("%s: TFRecord, compression: %s\n", path,
		       bfs_compression_name(bfs_shard_compression(s)));
	}
	*first_file = false;
	rc = bfs_shard_scan(s, true, inspect_record, &c);
	/* a file cut short: what comes before the cut, and where it is */
	cut = rc && bfs_shard_cut(s);
	if (cut)
		snprintf(why, sizeof(why),
			 "%s; the file is cut short after %" PRIu64 " whole records", bfs_err_msg(),
			 bfs_shard_nrecords(s));
	else if (rc)
		snprintf(why, sizeof(why), "%s", bfs_err_msg());
	if (json) {
		fprintf(stdout, "], \"records\": %" PRIu64 ", \"message\": \"%s\"",
			bfs_shard_nrecords(s),
			c.any_sequence ? (c.any_example ? "mixed" : "SequenceExample") : "Example");
		if (cut) {
			fputs(", \"cut\": ", stdout);
			json_str(stdout, why);
		}
		fputc('}', stdout);
	}
	if (rc) {
		fflush(stdout);
		fprintf(stderr, "batchfs: %s: %s\n", path, why);
		if (!cut)
			goto out;
	}
	if (!json) {
		printf("  %" PRIu64 " %srecords, tf.train.%s\n", bfs_shard_nrecords(s),
		       cut ? "whole " : "", c.any_sequence ? "SequenceExample" : "Example");
		if (bfs_infer_finish(&sch, c.inf) == 0) {
			printf("features:\n");
			for (size_t i = 0; i < sch->nfeatures; i++)
				print_spec_line(stdout, &sch->features[i]);
			for (size_t i = 0; i < sch->nlists; i++)
				print_spec_line(stdout, &sch->lists[i]);
		}
	}
out:
	bfs_schema_free(sch);
	bfs_infer_free(c.inf);
	bfs_shard_close(s);
	return rc ? 1 : 0;
}

int bfs_tool_inspect(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "records", required_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t max_records = 2;
	bool json = false, first = true;
	int ret = 0, ch;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "n:jh", longopts, NULL)) != -1) {
		switch (ch) {
		case 'n':
			if (bfs_parse_u64(&max_records, optarg)) {
				fprintf(stderr,
					"batchfs inspect: --records '%s': need a whole number\n",
					optarg);
				return 1;
			}
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			printf("usage: batchfs inspect [--records N] [--json] PATH...\n");
			return 0;
		default:
			return 1;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "usage: batchfs inspect [--records N] [--json] PATH...\n");
		return 1;
	}
	if (json)
		fputs("{\"files\": [", stdout);
	for (int i = optind; i < argc; i++) {
		char **paths = NULL;
		size_t n = 0;

		if (bfs_source_resolve(&paths, &n, argv[i], true) != 0) {
			fprintf(stderr, "batchfs: %s\n", bfs_err_msg());
			ret = 1;
			continue;
		}
		for (size_t k = 0; k < n; k++)
			ret |= inspect_file(paths[k], max_records, json, &first);
		bfs_source_free(paths, n);
	}
	if (json)
		fputs("\n]}\n", stdout);
	return ret;
}

/* ------------------------------------------------------ schema, index */

void bfs_tool_progress(void *arg, uint64_t done, uint64_t total)
{
	struct bfs_progress *p = arg;
	int width = 40, fill;

	if (!p->tty)
		return;
	fill = total ? (int)((double)done / (double)total * width) : width;
	fprintf(stderr, "\rindexing [%.*s%*s] %5.1f%%", fill,
		"########################################", width - fill, "",
		total ? 100.0 * (double)done / (double)total : 100.0);
	if (done >= total)
		fputc('\n', stderr);
	fflush(stderr);
}

void bfs_tool_note(void *ctx, const char *shard, const char *msg)
{
	(void)ctx;
	if (shard)
		fprintf(stderr, "batchfs: %s: %s\n", shard, msg);
	else
		fprintf(stderr, "batchfs: %s\n", msg);
}

static void print_bad(void *ctx, const char *shard, const char *msg)
{
	(void)ctx;
	fprintf(stderr, "batchfs: %s: %s\n", shard, msg);
}

/* The value v of a tool's option `arg`, which is the mount's option
 * `name`: parsed and checked as the table says (options.h). false, or
 * true after one line saying what it needs. */
static bool bad_value(const char *cmd, const char *arg, const char *name, const char *v,
		      uint64_t *out)
{
	const struct bfs_option *t = bfs_option_find(name);

	if (t && bfs_option_value(t, v, out) == 0)
		return false;
	fprintf(stderr, "batchfs %s: %s '%s': %s\n", cmd, arg, v, t ? t->why : "bad value");
	return true;
}

/* SOURCE opened as a mount opens it, as the tools' options say; a mixture
 * file (mixture.h) gives *mm, whose union is *ds (close *mm then, not
 * *ds). index_dir_out and jobs_out (may be NULL) get the folder used (the
 * caller frees it) and the threads. */
static int open_source(struct bfs_dataset **ds, struct bfs_mount_mix **mm, int argc, char **argv,
		       const char *cmd, bool progress, char **index_dir_out, unsigned *jobs_out)
{
	static const struct option longopts[] = {
		{ "jobs", required_argument, NULL, 'j' },
		{ "index-dir", required_argument, NULL, 'i' },
		{ "shadow-size", required_argument, NULL, 's' },
		{ "seek-span", required_argument, NULL, 'k' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct bfs_dataset_opts o = { 0 };
	struct bfs_progress pr = { .tty = progress && isatty(2) };
	char *index_dir = NULL;
	uint64_t jobs = 0, shadow_size = BFS_SHADOW_SIZE_DEFAULT, span = 0;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int ch, rc;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "j:i:s:k:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'j': /* the mount's threads= */
			if (bad_value(cmd, "--jobs", "threads", optarg, &jobs)) {
				free(index_dir);
				return 1;
			}
			break;
		case 'i':
			free(index_dir);
			index_dir = strdup(optarg);
			break;
		case 's': /* the mount's shadow_size= */
			if (bad_value(cmd, "--shadow-size", "shadow_size", optarg, &shadow_size)) {
				free(index_dir);
				return 1;
			}
			break;
		case 'k': /* the mount's seek_span= */
			if (bad_value(cmd, "--seek-span", "seek_span", optarg, &span)) {
				free(index_dir);
				return 1;
			}
			bfs_shard_set_seek_span(span);
			break;
		case 'h':
			printf("usage: batchfs %s [--jobs N] [--index-dir DIR] [--shadow-size "
			       "SIZE] [--seek-span SIZE] SOURCE\n",
			       cmd);
			free(index_dir);
			return 2;
		default:
			free(index_dir);
			return 1;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr,
			"usage: batchfs %s [--jobs N] [--index-dir DIR] [--shadow-size SIZE] "
			"[--seek-span SIZE] SOURCE\n",
			cmd);
		free(index_dir);
		return 1;
	}
	if (!index_dir && bfs_default_index_dir(&index_dir) != 0)
		return 1;
	o.comp = BFS_COMP_AUTO;
	o.index_dir = index_dir;
	o.jobs = jobs ? (unsigned)jobs : (unsigned)(ncpu > 0 ? ncpu : 1);
	o.infer = true;
	o.progress = bfs_tool_progress;
	o.on_note = bfs_tool_note;
	o.on_bad = print_bad;
	o.keep_cut = true; /* said by report_cut */
	o.shadow_size = shadow_size;
	o.progress_ctx = &pr;
	*mm = NULL;
	if (bfs_mount_mix_is(argv[optind])) {
		struct bfs_options mo = { .shuffle = true, .world = 1 };

		if (bfs_mount_mix_open(mm, argv[optind], &mo, &o, false) != 0) {
			free(index_dir);
			return 1;
		}
		*ds = (*mm)->ds;
		if (jobs_out)
			*jobs_out = o.jobs;
		if (index_dir_out)
			*index_dir_out = index_dir;
		else
			free(index_dir);
		return 0;
	}
	rc = bfs_dataset_open(ds, argv[optind], &o);
	if (jobs_out)
		*jobs_out = o.jobs;
	if (index_dir_out && !rc)
		*index_dir_out = index_dir;
	else
		free(index_dir);
	if (rc) {
		fprintf(stderr, "batchfs: %s\n", bfs_err_msg());
		return 1;
	}
	return 0;
}

/* A line for each shard cut short; how many. */
static size_t report_cut(const struct bfs_dataset *ds)
{
	size_t n = 0;

	for (size_t i = 0; i < bfs_dataset_nshards(ds); i++) {
		if (bfs_dataset_cut(ds, i)) {
			fprintf(stderr, "batchfs: %s\n", bfs_dataset_cut(ds, i));
			n++;
		}
	}
	return n;
}

int bfs_tool_schema(int argc, char **argv)
{
	struct bfs_dataset *ds = NULL;
	struct bfs_mount_mix *mm = NULL;
	char *json = NULL;
	int rc = open_source(&ds, &mm, argc, argv, "schema", false, NULL, NULL);

	if (rc)
		return rc == 2 ? 0 : rc;
	report_cut(ds); /* the schema of the records that can be read */
	/* a mixture: its sources' merged schema (the provenance is the mount's) */
	rc = bfs_schema_to_json(&json, mm ? mm->schema : bfs_dataset_schema(ds), NULL);
	if (rc == 0)
		fputs(json, stdout);
	else
		fprintf(stderr, "batchfs: %s\n", bfs_err_msg());
	free(json);
	if (mm)
		bfs_mount_mix_close(mm);
	else
		bfs_dataset_close(ds);
	return rc ? 1 : 0;
}

/* The ragged counts a mount with the inferred schema needs (batch.h), kept
 * in index_dir as the mount keeps them: mounts that share the folder read
 * only (many nodes) then count nothing, and write nothing there. A batcher
 * is what computes and keeps them; its other options do not change them.
 * Best effort: a failure is one line, and the mounts count. */
static void count_default(const struct bfs_dataset *ds, const struct bfs_schema *s,
			  const char *index_dir, unsigned jobs)
{
	struct bfs_batcher_opts bo = {
		.batch_size = 1,
		.world = 1,
		.verify = true,
		.on_corrupt = BFS_ON_CORRUPT_FAIL,
		.jobs = jobs,
		.index_dir = index_dir,
		.on_note = bfs_tool_note,
	};
	struct bfs_batcher *b = NULL;

	if (!s || s->nfeatures + s->nlists == 0)
		return;
	if (bfs_batcher_new(&b, ds, s, &bo) != 0)
		fprintf(stderr, "batchfs: the ragged counts were not kept: %s\n", bfs_err_msg());
	bfs_batcher_free(b);
}

int bfs_tool_index(int argc, char **argv)
{
	struct bfs_dataset *ds = NULL;
	struct bfs_mount_mix *mm = NULL;
	struct timespec t0, t1;
	char *index_dir = NULL;
	unsigned jobs = 1;
	size_t ncut;
	int rc;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	rc = open_source(&ds, &mm, argc, argv, "index", true, &index_dir, &jobs);
	if (rc)
		return rc == 2 ? 0 : rc;
	/* a shard cut short is indexed up to the cut but not cached: a mount
	 * with on_corrupt=skip scans it again, one with fail refuses it */
	ncut = report_cut(ds);
	if (!ncut)
		count_default(ds, mm ? mm->schema : bfs_dataset_schema(ds), index_dir, jobs);
	free(index_dir);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("%" PRIu64 " records in %zu shards; index %" PRIu64 " bytes (%s); schema %s; "
	       "%.2f s\n",
	       bfs_dataset_nrecords(ds), bfs_dataset_nshards(ds), bfs_dataset_index_bytes(ds),
	       bfs_dataset_index_reused(ds) ? "reused" : "built",
	       bfs_dataset_schema_reused(ds) ? "reused" : "inferred",
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	if (ncut)
		fprintf(stderr,
			"batchfs: %zu shard%s cut short: not cached (mount with on_corrupt=skip "
			"to serve the records before the cut)\n",
			ncut, ncut == 1 ? "" : "s");
	if (mm)
		bfs_mount_mix_close(mm);
	else
		bfs_dataset_close(ds);
	return ncut ? 1 : 0;
}
