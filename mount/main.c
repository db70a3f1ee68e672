/* SPDX-License-Identifier: Apache-2.0 */
/*
 * main.c — the batchfs command: dispatch to the tools (inspect, schema,
 * index, stats, top) or mount: options → dataset → schema → batcher → FUSE
 * session, each a step of do_mount. README.txt's text is readme.c's.
 */
#include "checks.h"
#include "diskcache.h"
#include "fdcache.h"
#include "fs.h"
#include "mixture.h"
#include "options.h"
#include "readme.h"
#include "s3.h"
#include "tfds.h"
#include "statscmd.h"
#include "tools.h"
#include "topcmd.h"

#include <fcntl.h>
#include <limits.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef BFS_VERSION
#define BFS_VERSION "0.0.0"
#endif

static void usage(FILE *f)
{
	fprintf(f,
		"usage: batchfs [OPTIONS] SOURCE MOUNTPOINT      mount (daemonizes unless -f)\n"
		"       batchfs inspect [--records N] [--json] PATH...\n"
		"       batchfs schema [--index-dir DIR] SOURCE\n"
		"       batchfs index [--jobs N] [--index-dir DIR] [--shadow-size SIZE]\n"
		"                     [--seek-span SIZE] SOURCE\n"
		"       batchfs stats [--json] MOUNTPOINT          a mount's counters, once\n"
		"       batchfs top [--interval S] [--count N] MOUNTPOINT   live view (q quits)\n"
		"       batchfs --help | --version\n"
		"\n");
	bfs_options_help_sources(f);
	fprintf(f, "Mount options (-o k=v,k=v; standard FUSE options pass through):\n");
	bfs_options_help(f);
	fprintf(f, "Unmount with: fusermount3 -u MOUNTPOINT\n");
}

/* The progress of the dataset's open, and the lines of the corrupt records
 * it indexed: printed once it opened, dropped when it failed (the mount
 * then fails with one line). */
struct open_progress {
	struct bfs_progress bar; /* first: bfs_tool_progress's ctx */
	char *bad; /* "batchfs: ...\n" lines, or NULL */
};

static void note_bad(void *ctx, const char *shard, const char *msg)
{
	struct open_progress *op = ctx;
	char *t = NULL;

	if (asprintf(&t, "%sbatchfs: %s: %s (indexed; reading its batch follows on_corrupt)\n",
		     op->bad ? op->bad : "", shard, msg) < 0)
		return; /* out of memory: the line is lost, not the mount */
	free(op->bad);
	op->bad = t;
}

/* Reads in flight on a network or FUSE filesystem: enough to keep a source
 * that answers in milliseconds busy (io_depth=auto). */
#define IO_DEPTH_REMOTE 256
/* a bucket: requests in flight (each a connection of its own) */
#define IO_DEPTH_OBJECTS 64
#define READAHEAD_MIN ((uint64_t)64 << 20)

/* The partitions in use under shuffle=block; 0 under another shuffle. */
static uint64_t nparts(const struct bfs_batcher *b)
{
	const struct bfs_blocks *bl = bfs_batcher_blocks(b);

	return bl ? bfs_blocks_nparts(bl) : 0;
}

/* readahead=auto: 64 MiB; under shuffle=block, two windows of blocks (the
 * one being read and the next, fetched meanwhile) for each partition a
 * reader goes through at once (P / gcd(world, P) of them; with rank
 * folders, for up to 8 ranks of distinct partitions read together, a
 * node's GPUs), within a quarter of the machine's memory. */
static uint64_t auto_readahead(const struct bfs_options *o, const struct bfs_batcher *b)
{
	uint64_t ra = READAHEAD_MIN, two, parts = nparts(b), m = 1, d = 1;
	long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);

	if (parts > 1) {
		d = o->world % parts;
		for (uint64_t x = parts, t; x; d = x, x = t)
			t = d % x;
		m = parts / d;
		if (o->all_ranks)
			m *= d < 8 ? d : 8;
	}
	if (o->shuffle && o->block && !__builtin_mul_overflow(o->window, o->block_size, &two) &&
	    !__builtin_mul_overflow(two, 2 * m, &two) && two + (16u << 20) > ra)
		ra = two + (16u << 20);
	else if (o->shuffle && o->block && m > 1)
		ra = UINT64_MAX;
	if (pages > 0 && psize > 0 && ra > (uint64_t)pages * (uint64_t)psize / 4)
		ra = (uint64_t)pages * (uint64_t)psize / 4;
	return ra > READAHEAD_MIN ? ra : READAHEAD_MIN;
}

/* A schema message on option KEY=VALUE ("KEY=VALUE: why" or "KEY=: why")
 * as one line that quotes the option whole, "option 'KEY=VALUE': why",
 * and, for a name not found, the names there are: "(WHAT: a, b)". */
static void print_option_error(const char *key, const char *value, const char *msg,
			       const char *what, const char *names)
{
	size_t k = strlen(key), n = strlen(value);

	if (strncmp(msg, key, k) == 0 && msg[k] == '=') {
		if (strncmp(msg + k + 1, value, n) == 0 && strncmp(msg + k + 1 + n, ": ", 2) == 0)
			msg += k + 1 + n + 2;
		else if (strncmp(msg + k + 1, ": ", 2) == 0)
			msg += k + 3;
	}
	if (what && names)
		fprintf(stderr, "batchfs: option '%s=%s': %s (%s: %s)\n", key, value, msg, what,
			*names ? names : "none");
	else
		fprintf(stderr, "batchfs: option '%s=%s': %s\n", key, value, msg);
}

/* A mount as it is made, step by step (do_mount); mount_free undoes it. */
struct mount {
	const struct bfs_options *o;
	char mnt[PATH_MAX]; /* the mount point's absolute path */
	int mnt_fd; /* its lock (checks.h), -1 */
	const char *source; /* o->source, or tfds_glob for a TFDS folder */
	char tfds_glob[PATH_MAX + 64];
	struct bfs_schema *user; /* schema=FILE's, until it becomes `schema` */
	struct bfs_dataset *ds;
	struct bfs_mount_mix *mm; /* SOURCE a mixture file; ds is its union */
	struct bfs_schema *schema;
	char *mixed; /* bfs_check_mixed's line */
	struct bfs_batcher *b;
	struct bfs_batcher **ranks; /* world=W without rank: [W], [0] = b */
	const char **shard_names;
	char *schema_json, *readme, *opts, *ready;
	/* the I/O stage, from the options and the source */
	unsigned io_depth;
	uint64_t readahead;
	const char *disk_cache;
	char *disk_cache_auto; /* disk_cache=auto's folder, when it is used */
	struct bfs_fs *fs;
};

static void mount_free(struct mount *m)
{
	bfs_fs_free(m->fs);
	for (uint64_t r = 1; m->ranks && r < m->o->world; r++)
		bfs_batcher_free(m->ranks[r]);
	free(m->ranks);
	bfs_batcher_free(m->b);
	bfs_schema_free(m->schema);
	bfs_schema_free(m->user);
	if (m->mm)
		bfs_mount_mix_close(m->mm); /* ds is its union */
	else
		bfs_dataset_close(m->ds);
	free(m->shard_names);
	free(m->schema_json);
	free(m->readme);
	free(m->opts);
	free(m->ready);
	free(m->mixed);
	free(m->disk_cache_auto);
	if (m->mnt_fd >= 0)
		close(m->mnt_fd);
}

/* watch_fd=N: the starter's pipe, whose end of file (the starter gone,
 * however it ended) stops us, from now on (an index build can be long). */
static int start_watch(const struct bfs_options *o)
{
	struct stat st;

	if (o->watch_fd < 0)
		return 0;
	if (fstat(o->watch_fd, &st) != 0 || !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))) {
		fprintf(stderr, "batchfs: option 'watch_fd=%d': not an open pipe or socket\n",
			o->watch_fd);
		return -1;
	}
	(void)fcntl(o->watch_fd, F_SETFD, FD_CLOEXEC);
	if (bfs_lifecycle_watch(o->watch_fd) != 0) {
		fprintf(stderr, "batchfs: could not start the watch_fd thread\n");
		return -1;
	}
	return 0;
}

/* schema=FILE into m->user. */
static int load_user_schema(struct mount *m)
{
	const char *file = m->o->schema_file;
	size_t len;
	char *text;
	int rc;

	if (!file)
		return 0;
	text = bfs_read_file(file, (size_t)16 << 20, &len);
	if (!text) {
		fprintf(stderr, "batchfs: option 'schema=%s': cannot read the file\n", file);
		return -1;
	}
	rc = bfs_schema_from_json(&m->user, text, len);
	free(text);
	if (rc) {
		fprintf(stderr, "batchfs: %s: %s\n", file, bfs_err_msg());
		return -1;
	}
	return 0;
}

/* A TFDS dataset folder and split=NAME: m->source becomes the split's
 * shards (docs/contract.md: split=). */
static int resolve_tfds(struct mount *m)
{
	const struct bfs_options *o = m->o;
	char *splits;

	m->source = o->source;
	if (!bfs_tfds_is_dir(o->source)) {
		if (!o->split)
			return 0;
		fprintf(stderr,
			"batchfs: option 'split=%s': %s is not a TFDS dataset folder (it needs "
			"dataset_info.json and features.json)\n",
			o->split, o->source);
		return -1;
	}
	splits = bfs_tfds_splits(o->source);
	if (!o->split || !splits || !bfs_tfds_split_listed(splits, o->split)) {
		if (o->split)
			fprintf(stderr,
				"batchfs: option 'split=%s': %s has no such split (splits: %s)\n",
				o->split, o->source, splits ? splits : "none");
		else
			fprintf(stderr,
				"batchfs: %s: a TFDS dataset folder needs -o split=NAME (splits: "
				"%s)\n",
				o->source, splits ? splits : "none");
		free(splits);
		return -1;
	}
	free(splits);
	if (bfs_tfds_glob(m->tfds_glob, sizeof(m->tfds_glob), o->source, o->split) != 0) {
		fprintf(stderr, "batchfs: %s: path too long\n", o->source);
		return -1;
	}
	m->source = m->tfds_glob;
	return 0;
}

/* Index (or reuse the index of) the source: a dataset, or a mixture's. */
static int open_dataset(struct mount *m)
{
	const struct bfs_options *o = m->o;
	struct bfs_s3_options s3opt = {
		.endpoint = o->endpoint,
		.region = o->region,
		.no_sign_request = o->no_sign_request,
	};
	struct open_progress progress = { .bar = { .tty = o->foreground && isatty(2) } };
	struct bfs_dataset_opts dopt = {
		.comp = o->compression,
		.follow_symlinks = o->follow_symlinks,
		.s3 = &s3opt,
		.s3_conns = o->io_depth ? o->io_depth : IO_DEPTH_OBJECTS,
		.index_dir = o->index_dir,
		.jobs = o->threads,
		.infer = m->user == NULL,
		.on_bad = note_bad,
		.on_note = bfs_tool_note,
		.keep_cut = o->on_corrupt == BFS_ON_CORRUPT_SKIP, /* reported in errors.txt */
		.shadow_size = o->shadow ? o->shadow_size : 0,
		/* the progress bar of a first index build, in the foreground at a terminal */
		.progress = bfs_tool_progress,
		.progress_ctx = &progress,
	};
	int rc;

	bfs_shard_set_seek_span(o->seek_span);
	if (bfs_mount_mix_is(o->source)) {
		rc = bfs_mount_mix_open(&m->mm, o->source, o, &dopt, m->user != NULL);
		if (rc == 0)
			m->ds = m->mm->ds;
	} else {
		rc = bfs_dataset_open(&m->ds, m->source, &dopt);
	}
	if (!rc && progress.bad)
		fputs(progress.bad, stderr);
	free(progress.bad);
	if (rc && !bfs_mount_mix_is(o->source)) /* else bfs_mount_mix_open said why */
		fprintf(stderr, "batchfs: %s\n", bfs_err_msg());
	return rc ? -1 : 0;
}

/* The schema served, before the options that change it: schema=FILE's,
 * else the inferred one (a TFDS folder's features.json refining it). */
static int base_schema(struct mount *m)
{
	if (m->user) {
		m->schema = m->user;
		m->user = NULL;
		return 0;
	}
	if (bfs_schema_clone(&m->schema, m->mm ? m->mm->schema : bfs_dataset_schema(m->ds))) {
		fprintf(stderr, "batchfs: %s\n", bfs_err_msg());
		return -1;
	}
	if (m->source != m->tfds_glob)
		return 0;
	if (bfs_tfds_refine(m->schema, m->o->source) != 0) {
		fprintf(stderr, "batchfs: %s\n", bfs_err_msg());
		return -1;
	}
	return 0;
}

/* features=, image= and crop=/flip=: what of the schema is served, and
 * how. */
static int select_features(struct mount *m)
{
	const struct bfs_options *o = m->o;
	struct bfs_schema *schema = m->schema;
	bool *was_image; /* per feature: an image before the image= options */
	int rc = 0;

	if (o->features) {
		char *names = bfs_feature_names(schema, false);

		rc = bfs_schema_select(schema, o->features);
		if (rc)
			print_option_error("features", o->features, bfs_err_msg(),
					   rc == -ENOENT ? "features" : NULL, names);
		else if (schema->nuntyped) /* named, but nothing to serve */
			fprintf(stderr,
				"batchfs: option 'features=%s': no record has a value for "
				"feature '%s' (only `Feature {}`, of no known kind): leave it "
				"out\n",
				o->features, schema->untyped[0]);
		free(names);
		if (rc || schema->nuntyped)
			return -1;
	}
	was_image = calloc(schema->nfeatures + 1, sizeof(*was_image));
	if (!was_image)
		return -1;
	for (size_t i = 0; i < schema->nfeatures; i++)
		was_image[i] = schema->features[i].image;
	for (unsigned i = 0; !rc && i < o->nimage; i++) {
		char *names = bfs_feature_names(schema, true);

		rc = bfs_schema_set_image(schema, o->image[i]);
		if (rc)
			print_option_error("image", o->image[i], bfs_err_msg(),
					   rc == -ENOENT ? "bytes features" : NULL, names);
		free(names);
	}
	if (!rc && o->nimage &&
	    bfs_check_image_options(m->ds, schema, was_image, o->image, o->nimage) != 0)
		rc = -1;
	free(was_image);
	/* crop=, flip= and their ranges, over every image feature */
	if (!rc && (rc = bfs_schema_set_augment(schema, &o->aug, o->aug_set)) != 0)
		fprintf(stderr, "batchfs: %s\n", bfs_err_msg());
	return rc ? -1 : 0;
}

/* The schema served: the base one, the options', a mixture's provenance;
 * a folder of several datasets is one line now and in README.txt. */
static int make_schema(struct mount *m)
{
	const char *mixed;

	if (base_schema(m) != 0 || select_features(m) != 0)
		return -1;
	if (m->mm && bfs_mount_mix_add_provenance(m->schema) != 0)
		return -1;
	mixed = bfs_dataset_mixed(m->ds);
	if (mixed &&
	    asprintf(&m->mixed,
		     "%s: %s: several datasets mounted as one, each record padded to all their "
		     "features? Mount each dataset's folder on its own, or pick features with -o "
		     "features=",
		     m->o->source, mixed) < 0)
		m->mixed = NULL;
	if (m->mixed)
		fprintf(stderr, "batchfs: %s\n", m->mixed);
	if (m->schema->nfeatures + m->schema->nlists == 0) {
		fprintf(stderr,
			"batchfs: %s: no features to serve (the records hold no typed "
			"feature)\n",
			m->o->source);
		return -1;
	}
	return 0;
}

/* Open the sources: the user's schema, the dataset (or mixture), and the
 * schema served from it. */
static int open_sources(struct mount *m)
{
	if (load_user_schema(m) != 0 || resolve_tfds(m) != 0 || open_dataset(m) != 0)
		return -1;
	return make_schema(m);
}

/* The batcher of the epochs' order, and one per rank folder (world=W
 * without rank). */
static int build_batchers(struct mount *m)
{
	const struct bfs_options *o = m->o;
	struct bfs_batcher_opts bo = {
		.batch_size = o->batch_size,
		.seed = o->seed,
		.shuffle = o->shuffle,
		.block = o->block,
		.block_size = o->block_size,
		.window = o->window,
		.partitions = o->partitions,
		.drop_remainder = o->drop_remainder,
		.rank = o->rank,
		.world = o->world,
		.verify = o->verify,
		.on_corrupt = o->on_corrupt,
		.max_batch_bytes = o->cache_size,
		.jobs = o->threads,
		.index_dir = o->index_dir,
		.on_note = bfs_tool_note,
		.chunk_rows = o->chunk_rows,
		.image_max_pixels = o->image_max_pixels,
		.mix = m->mm ? m->mm->mix : NULL,
	};
	int rc = bfs_batcher_new(&m->b, m->ds, m->schema, &bo);

	/* the ragged counts a bucket's scan kept are the batcher's now */
	bfs_dataset_scan_counts_drop(m->ds);
	for (size_t i = 0; m->mm && i < m->mm->n; i++)
		bfs_dataset_scan_counts_drop(m->mm->members[i]);
	if (rc) {
		if (rc == -EFBIG)
			fprintf(stderr,
				"batchfs: option 'batch_size=%llu': %s (raise cache_size)\n",
				(unsigned long long)o->batch_size, bfs_err_msg());
		else
			fprintf(stderr, "batchfs: %s\n", bfs_err_msg());
		return -1;
	}
	if (!o->all_ranks)
		return 0;
	m->ranks = calloc(o->world, sizeof(*m->ranks));
	if (!m->ranks)
		return -1;
	m->ranks[0] = m->b;
	for (uint64_t r = 1; r < o->world; r++) {
		if (bfs_batcher_new_rank(&m->ranks[r], m->b, r) != 0) {
			fprintf(stderr, "batchfs: %s\n", bfs_err_msg());
			return -1;
		}
	}
	return 0;
}

/* schema.json: the schema served and the dataset's facts. */
static int make_schema_json(struct mount *m)
{
	const struct bfs_options *o = m->o;
	size_t nshards = bfs_dataset_nshards(m->ds);

	m->shard_names = calloc(nshards + 1, sizeof(*m->shard_names));
	if (!m->shard_names)
		return -1;
	for (size_t i = 0; i < nshards; i++)
		m->shard_names[i] = bfs_shard_path(bfs_dataset_shard(m->ds, i));
	struct bfs_schema_facts facts = {
		.records = bfs_batcher_epoch_len(m->b),
		.source_records = bfs_dataset_nrecords(m->ds),
		.batch_size = o->batch_size,
		.batches_per_epoch = bfs_batcher_nbatches(m->b),
		.seed = o->seed,
		.shuffle = !o->shuffle ? "none"
			   : o->block  ? "block"
				       : "global",
		.partitions = nparts(m->b),
		.rank = o->rank,
		.world = o->world,
		.no_rank = o->all_ranks, /* each rank folder is one rank: the top is none */
		.nshards = nshards,
		.shards = m->shard_names,
		.mixture = m->mm ? &m->mm->facts : NULL,
	};
	if (bfs_schema_to_json(&m->schema_json, m->schema, &facts) != 0) {
		fprintf(stderr, "batchfs: %s\n", bfs_err_msg());
		return -1;
	}
	return 0;
}

/* README.txt (readme.h) and the effective options. */
static void make_mount_readme(struct mount *m)
{
	struct bfs_readme_in in = {
		.o = m->o,
		.opts = m->opts = bfs_options_describe(m->o),
		.mnt = m->mnt,
		.split = m->source == m->tfds_glob ? m->o->split : NULL,
		.ds = m->ds,
		.mm = m->mm,
		.b = m->b,
		.schema = m->schema,
		.mixed = m->mixed,
		.disk_cache = m->disk_cache,
	};

	m->readme = bfs_readme_text(&in);
}

/* Does this mount read a share of the partitions (a rank of a world, or
 * rank folders, over partitions=P > 1)? */
static bool reads_a_share(const struct bfs_options *o, const struct bfs_batcher *b)
{
	return nparts(b) > 1 && (o->world > 1 || o->all_ranks);
}

/* The I/O stage: on a network or FUSE filesystem, or when asked for; and
 * disk_cache, the bytes the stage fetches, so nothing on a local disk (one
 * that cannot be used is one line, and the mount goes on). disk_cache=auto
 * (the default) keeps a bucket's or a network filesystem's bytes beside the
 * index ($XDG_CACHE_HOME/batchfs/disk_cache); off, none. Not by default
 * for a node reading a share of the partitions: the disk cache fetches and
 * keeps whole blocks of BFS_DC_BLOCK bytes, whose edges hold the blocks of
 * other ranks' partitions, and each rank would fetch more than its share
 * (18x the dataset across a job of 64 KiB blocks); disk_cache=DIR asks. */
static void plan_io(struct mount *m)
{
	const struct bfs_options *o = m->o;
	bool remote = bfs_dataset_objsrc(m->ds) || bfs_dataset_remote(m->ds);

	m->io_depth = o->io_depth		  ? o->io_depth
		      : bfs_dataset_objsrc(m->ds) ? IO_DEPTH_OBJECTS
		      : bfs_dataset_remote(m->ds) ? IO_DEPTH_REMOTE
						  : 0;
	m->readahead = o->readahead ? o->readahead : auto_readahead(o, m->b);
	m->disk_cache = o->disk_cache;
	if (!o->disk_cache && !o->disk_cache_off && remote && m->io_depth &&
	    !reads_a_share(o, m->b) && bfs_default_disk_cache(&m->disk_cache_auto) == 0)
		m->disk_cache = m->disk_cache_auto;
	if (m->disk_cache && !m->io_depth) {
		fprintf(stderr,
			"batchfs: option 'disk_cache=%s': %s is on a local disk; not used\n",
			m->disk_cache, o->source);
		m->disk_cache = NULL;
	} else if (m->disk_cache && bfs_diskcache_check(m->disk_cache) != 0) {
		fprintf(stderr, "batchfs: %s; mounted without it%s\n", bfs_err_msg(),
			m->disk_cache_auto ? " (-o disk_cache=DIR puts it elsewhere, "
					     "disk_cache=off turns it off)"
					   : "");
		m->disk_cache = NULL;
	}
}

/* The file system, over all the above; ready to run. */
static int make_fs(struct mount *m)
{
	const struct bfs_options *o = m->o;

	uint64_t L = bfs_batcher_epoch_len(m->b), N = bfs_dataset_nrecords(m->ds);
	char of[96] = "";

	/* a mixture's epoch is L records of its stream, not its sources' total */
	if (L != N)
		snprintf(of, sizeof(of), " per epoch of the sources' %llu", (unsigned long long)N);
	if (asprintf(&m->ready,
		     "batchfs: mounted %s at %s (%llu records%s, %llu batches per epoch%s)",
		     o->source, m->mnt, (unsigned long long)L, of,
		     (unsigned long long)bfs_batcher_nbatches(m->b),
		     o->all_ranks ? " in each rank folder" : "") < 0)
		m->ready = NULL;
	struct bfs_fs_config cfg = {
		.ds = m->ds,
		.batcher = m->b,
		.epochs = o->epochs,
		.cache_size = o->cache_size,
		.threads = o->threads,
		.prefetch = o->prefetch,
		.readme = m->readme,
		.schema_json = m->schema_json,
		.options_text = m->opts,
		/* a hung source may hold a thread per reader waiting on it:
		 * enough are left for the other files */
		.fuse_threads = m->io_depth ? 64 : 16,
		.io_depth = m->io_depth,
		.readahead = m->readahead,
		.io_all = o->io_depth != 0,
		.io_backend = o->io_backend,
		.io_plan = o->io_plan,
		.disk_cache = m->disk_cache,
		.disk_cache_size = o->disk_cache_size,
		.cuda_device = o->cuda_device,
		.cuda_pool = o->cuda_pool,
		.ranks = (const struct bfs_batcher *const *)m->ranks,
		.nranks = m->ranks ? o->world : 0,
		.ready = m->ready,
		.max_read = o->max_read,
		.watch = o->watch_fd >= 0,
		.watch_fd = o->watch_fd,
		.mount_lock = true,
		.mount_lock_fd = m->mnt_fd,
	};
	if (bfs_fs_new(&m->fs, &cfg) != 0) {
		fprintf(stderr, "batchfs: %s\n", bfs_err_msg());
		return -1;
	}
	/* the lock kept other batchfs away; anything else mounted meanwhile? */
	if (bfs_mountpoint_taken(o->mountpoint, m->mnt))
		return -1;
	/* shards cut short (on_corrupt=skip): a line each in errors.txt */
	for (size_t i = 0; i < bfs_dataset_nshards(m->ds); i++)
		if (bfs_dataset_cut(m->ds, i))
			bfs_fs_report(m->fs, bfs_dataset_cut(m->ds, i), false);
	return 0;
}

/* Mount: open the sources, build the batchers, write the mount's texts,
 * plan the I/O, make the file system and serve it until unmounted. */
static int do_mount(struct bfs_options *o, int fargc, char **fargv)
{
	struct mount m = { .o = o, .mnt_fd = -1 };
	int ret = 1;

	if (start_watch(o) != 0)
		return 1;
	/* locked while it mounts and is mounted, see checks.h and fs.h */
	m.mnt_fd = bfs_mountpoint_claim(o->mountpoint, m.mnt);
	if (m.mnt_fd < 0)
		return 1;
	if (bfs_fs_check_args(fargc, fargv) != 0)
		goto out;
	/* before any thread: batch buffers and the heap (fs.h) */
	bfs_cache_malloc_setup();
	if (open_sources(&m) != 0 || build_batchers(&m) != 0 || make_schema_json(&m) != 0)
		goto out;
	plan_io(&m);
	make_mount_readme(&m);
	if (make_fs(&m) != 0)
		goto out;
	/* the absolute path: libfuse chdirs to / before it unmounts */
	ret = bfs_fs_run(m.fs, fargc, fargv, m.mnt, o->foreground);
out:
	mount_free(&m);
	return ret;
}

int main(int argc, char **argv)
{
	struct bfs_options o;
	int fargc = 0;
	char **fargv = NULL;
	int ret;

	/* shards are opened through a bounded cache of half the soft limit
	 * (decoder/fdcache.h): use all the descriptors we may have */
	(void)bfs_nofile_raise();
	if (argc >= 2 && strcmp(argv[1], "inspect") == 0)
		return bfs_tool_inspect(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "schema") == 0)
		return bfs_tool_schema(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "index") == 0)
		return bfs_tool_index(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "stats") == 0)
		return bfs_tool_stats(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "top") == 0)
		return bfs_tool_top(argc - 1, argv + 1);
	if (argc < 2) {
		usage(stderr);
		return 1;
	}
	if (bfs_options_parse(&o, argc, argv, &fargc, &fargv) != 0) {
		bfs_options_destroy(&o); /* what was parsed before the bad option */
		return 1;
	}
	if (o.help) {
		usage(stdout);
		ret = 0;
	} else if (o.version) {
		printf("batchfs %s\n", BFS_VERSION);
		ret = 0;
	} else {
		ret = do_mount(&o, fargc, fargv);
	}
	bfs_options_free_argv(fargc, fargv);
	bfs_options_destroy(&o);
	return ret;
}
