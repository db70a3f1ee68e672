/* SPDX-License-Identifier: Apache-2.0 */
/*
 * options.h — the mount's `-o key=value` options (docs/contract.md's table),
 * parsed with libfuse's fuse_opt so standard FUSE options pass through.
 *
 * One table (options_table.c, bfs_options_table) says everything about each
 * option: its name and spelling, how its value parses and where it goes,
 * its range, default and the line a bad value gets, its help text and its
 * heading in the man page. The parser, `batchfs --help`'s option list, the
 * nearest-name hint for a misspelt option and the man page's check
 * (tests/unit/check_options.c) all read it, so none can drift from it.
 *
 * Every bad value is reported as one line naming the option, before
 * anything is opened or mounted. Not thread-safe (parse once, at start).
 */
#ifndef BFS_OPTIONS_H
#define BFS_OPTIONS_H

#include "batch.h"
#include "fetch.h"
#include "ioplan.h"
#include "record.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <limits.h>
#include <stdint.h>

#define BFS_PREFETCH_DEFAULT UINT_MAX
#define BFS_SHADOW_SIZE_DEFAULT ((uint64_t)8 << 30) /* shadow copies in index_dir */
#define BFS_IO_DEPTH_MAX 4096

struct bfs_options {
	uint64_t batch_size;
	uint64_t seed;
	bool shuffle;
	bool block; /* shuffle=block (with shuffle set) */
	uint64_t block_size, window; /* shuffle=block: 4M, 64 */
	uint64_t partitions; /* shuffle=block: 0 (auto) or P */
	uint64_t epochs;
	bool drop_remainder;
	char *schema_file;
	char *features;
	uint64_t rank, world;
	bool all_ranks; /* world=W without rank: rank-0000/ ... rank-(W-1)/ */
	bool verify;
	enum bfs_on_corrupt on_corrupt;
	uint64_t cache_size;
	unsigned prefetch; /* 0: no prefetch; BFS_PREFETCH_DEFAULT until parsed: 2 x threads */
	unsigned threads;
	uint64_t chunk_rows; /* rows decoded together for all/; 0: about 2 MiB of them */
	char *index_dir;
	bool shadow; /* plain copies of compressed shards in index_dir (decoder/shadow.h) */
	uint64_t shadow_size; /* their total bytes there, at most; 0: none */
	char *split; /* split=NAME: a TFDS dataset folder's split */
	char *image[8]; /* image=FEATURE:HxW[:C], in the order given */
	unsigned nimage;
	uint64_t image_max_pixels; /* 0: the default (image.h) */
	/* crop=, flip=, crop_scale=, crop_ratio=, crop_resize= (augment.h): the
	 * fields aug_set names (BFS_AUG_SET_*) were given, for every image
	 * feature; the others are each feature's own */
	struct bfs_augment aug;
	unsigned aug_set;
	unsigned io_depth; /* source reads in flight at most; 0: auto */
	uint64_t readahead; /* source bytes fetched ahead, at most; 0: auto */
	enum bfs_fetch_backend io_backend; /* io_backend=: BFS_FETCH_AUTO unless asked */
	enum bfs_ioplan_mode io_plan; /* io_plan=: BFS_IOPLAN_AUTO unless asked */
	/* disk_cache=DIR: source bytes kept on a local disk; NULL: auto (the
	 * default folder, for a source read through the I/O stage), or off */
	char *disk_cache;
	bool disk_cache_off;
	uint64_t disk_cache_size; /* its bound; 0: 10% of DIR's file system */
	uint64_t seek_span; /* bytes between a compressed shard's seek points; 0: ~1 MiB */
	/* SOURCE a bucket: endpoint=, region=, no_sign_request (s3.h) */
	char *endpoint, *region;
	bool no_sign_request;
	enum bfs_compression compression;
	bool follow_symlinks;
	int cuda_device; /* -1 off */
	unsigned cuda_pool; /* device buffers of the CUDA path; 0: the default (4) */
	unsigned max_read; /* FUSE's max_read=, passed through; 0: none */
	int watch_fd; /* -1; else a pipe whose end of file stops the mount */
	bool foreground;
	bool debug;
	char *source;
	char *mountpoint;
	bool help, version;
};

/* Parse argv (argv[0] = program). On success *fuse_argc and *fuse_argv hold the
 * arguments for libfuse (program name + pass-through options), malloc'd;
 * free with bfs_options_free_argv. Returns 0, or 1 after printing one line
 * naming the bad option to stderr. */
int bfs_options_parse(struct bfs_options *o, int argc, char **argv, int *fuse_argc,
		      char ***fuse_argv);
void bfs_options_free_argv(int argc, char **argv);
void bfs_options_destroy(struct bfs_options *o);

/* How an option is written. */
enum bfs_option_kind {
	BFS_OPT_VALUE, /* name=VALUE */
	BFS_OPT_FLAG, /* name */
	BFS_OPT_FLAG_VALUE, /* name or name=VALUE (cuda[=DEV]) */
	BFS_OPT_COMMAND, /* --help, --version: not a mount option */
};

/* How its value parses and where it goes (struct bfs_options at `off`). */
enum bfs_option_type {
	BFS_OPT_UINT, /* a whole number in [lo, hi] */
	BFS_OPT_SIZE, /* a size ("4096", "512M", "1G") in [lo, hi] */
	BFS_OPT_AUTO_UINT, /* "auto" (0) or BFS_OPT_UINT */
	BFS_OPT_AUTO_SIZE, /* "auto" (0) or BFS_OPT_SIZE */
	BFS_OPT_TEXT, /* a string, not empty (and what check says), malloc'd */
	BFS_OPT_TRUE, /* a flag: the bool there becomes true */
	BFS_OPT_CUSTOM, /* its set function does it all */
};

struct bfs_options_parser;

/* One option. The parser takes `name` (and `alias`), checks the value as
 * `type`, lo and hi say, and a bad one fails with "option 'ARG': why". */
struct bfs_option {
	const char *name; /* "batch_size", "-f" */
	const char *alias; /* another spelling of the flag ("-d" of debug), or NULL */
	enum bfs_option_kind kind;
	enum bfs_option_type type;
	size_t off, size; /* the field of struct bfs_options */
	uint64_t lo, hi; /* the value's range (UINT, SIZE) */
	bool block_only; /* only with shuffle=block */
	const char *why; /* a bad value's reason: "need a whole number from 1 to 64" */
	/* BFS_OPT_TEXT: whether v is good (NULL: any non-empty); BFS_OPT_CUSTOM:
	 * sets the value (0, 1 to pass the option to libfuse too, -1 failed) */
	bool (*check)(const char *v);
	int (*set)(struct bfs_options_parser *p, const struct bfs_option *t, const char *arg,
		   const char *v);
	const char *init; /* the default, parsed as a value before the user's; NULL: 0 */
	/* --help: "NAME=ARG  HELP (default DEF)"; DEF NULL: init's text, "":
	 * none shown. The man page says the same default (check_options). */
	const char *arg, *def, *help;
	/* the man page's heading holding it (doc/batchfs.1.scd, MOUNT OPTIONS),
	 * when not the one made of name and arg: *NAME=*_ARG_, *NAME=a*|*b* for
	 * choices, *NAME* for a flag (check_options holds the page to it) */
	const char *man;
};

/* The table, in the order of --help, of the man page and of the hints. */
const struct bfs_option *bfs_options_table(size_t *n);
/* The option called name (not an alias), or NULL. */
const struct bfs_option *bfs_option_find(const char *name);
/* v as option t's value: a whole number or a size (t->type), "auto" (0)
 * where t takes it, within [t->lo, t->hi]. 0, or -EINVAL (t->why says
 * what it needs; also for an option of another type). */
int bfs_option_value(const struct bfs_option *t, const char *v, uint64_t *out);

/* --help's list of the mount options, one a line, from the table. */
void bfs_options_help(FILE *f);
/* --help's lines on SOURCE, with the places a bucket's credentials come
 * from (decoder/cloud/credplaces.h). */
void bfs_options_help_sources(FILE *f);

/* "batch_size=32,seed=0,..." — the effective options, malloc'd. */
char *bfs_options_describe(const struct bfs_options *o);

/* A whole number, "4096": -EINVAL on anything else or overflow. (Sizes,
 * "1G", parse as an option of the table's: bfs_option_value.) */
int bfs_parse_u64(uint64_t *out, const char *s);
/* XDG_CACHE_HOME/batchfs or HOME/.cache/batchfs, malloc'd. */
int bfs_default_index_dir(char **out);
/* disk_cache=auto's folder: that folder's disk_cache, malloc'd. */
int bfs_default_disk_cache(char **out);

#endif
