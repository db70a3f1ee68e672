/* SPDX-License-Identifier: Apache-2.0 */
/*
 * options_table.c — the mount's table of options (options.h): each
 * option's name, value, range, default, message, help and man page
 * heading; how a value is set from it, and --help written from it.
 */
#include "options.h"
#include "options_impl.h"

#include "credplaces.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int bfs_parse_u64(uint64_t *out, const char *s)
{
	unsigned long long v;
	char *end;

	if (!s || !*s || *s == '-' || *s == '+')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end)
		return -EINVAL;
	*out = v;
	return 0;
}

/* "1G", "512M", "4096": -EINVAL on anything else or overflow. */
static int parse_size(uint64_t *out, const char *s)
{
	unsigned long long v;
	uint64_t mul = 1;
	char *end;

	if (!s || !*s || *s == '-' || *s == '+')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case '\0':
		break;
	case 'k':
	case 'K':
		mul = 1ull << 10;
		break;
	case 'm':
	case 'M':
		mul = 1ull << 20;
		break;
	case 'g':
	case 'G':
		mul = 1ull << 30;
		break;
	case 't':
	case 'T':
		mul = 1ull << 40;
		break;
	default:
		return -EINVAL;
	}
	if (*end && end[1] != '\0' && !((end[1] == 'B' || end[1] == 'b') && end[2] == '\0') &&
	    !((end[1] == 'i') && end[2] == 'B' && end[3] == '\0'))
		return -EINVAL;
	if (__builtin_mul_overflow((uint64_t)v, mul, out))
		return -EINVAL;
	return 0;
}

int bfs_options_bad(struct bfs_options_parser *c, const char *arg, const char *why)
{
	fprintf(stderr, "batchfs: option '%s': %s\n", arg, why);
	c->failed = true;
	return -1;
}

int bfs_options_set_str(char **dst, const char *v)
{
	free(*dst);
	*dst = strdup(v);
	return *dst ? 0 : -1;
}

static void *field(struct bfs_options *o, const struct bfs_option *t)
{
	return (char *)o + t->off;
}

/* A whole number into the option's field, whatever its width (the range
 * keeps it within the field: an int field's hi is at most INT_MAX). */
static void store_uint(struct bfs_options *o, const struct bfs_option *t, uint64_t n)
{
	if (t->size == sizeof(uint64_t)) {
		memcpy(field(o, t), &n, sizeof(n));
	} else {
		uint32_t u = (uint32_t)n;

		memcpy(field(o, t), &u, sizeof(u));
	}
}

int bfs_options_set(struct bfs_options_parser *c, const struct bfs_option *t, const char *arg,
		    const char *v)
{
	uint64_t n = 0;

	switch (t->type) {
	case BFS_OPT_AUTO_UINT:
	case BFS_OPT_AUTO_SIZE:
	case BFS_OPT_UINT:
	case BFS_OPT_SIZE:
		if (bfs_option_value(t, v, &n) != 0)
			return bfs_options_bad(c, arg, t->why);
		store_uint(c->o, t, n);
		return 0;
	case BFS_OPT_TEXT:
		if (!*v || (t->check && !t->check(v)))
			return bfs_options_bad(c, arg, t->why);
		return bfs_options_set_str(field(c->o, t), v);
	case BFS_OPT_TRUE:
		*(bool *)field(c->o, t) = true;
		return 0;
	case BFS_OPT_CUSTOM:
		return t->set(c, t, arg, v);
	}
	return bfs_options_bad(c, arg, t->why);
}

static int set_shuffle(struct bfs_options_parser *c, const struct bfs_option *t, const char *arg,
		       const char *v)
{
	c->o->block = strcmp(v, "block") == 0;
	if (strcmp(v, "global") == 0 || c->o->block)
		c->o->shuffle = true;
	else if (strcmp(v, "none") == 0)
		c->o->shuffle = false;
	else
		return bfs_options_bad(c, arg, t->why);
	return 0;
}

/* A choice of two words into a bool: the first is true. */
static int set_two(struct bfs_options_parser *c, const struct bfs_option *t, const char *arg,
		   const char *v, const char *yes, const char *no)
{
	if (strcmp(v, yes) == 0)
		*(bool *)field(c->o, t) = true;
	else if (strcmp(v, no) == 0)
		*(bool *)field(c->o, t) = false;
	else
		return bfs_options_bad(c, arg, t->why);
	return 0;
}

static int set_verify(struct bfs_options_parser *c, const struct bfs_option *t, const char *arg,
		      const char *v)
{
	return set_two(c, t, arg, v, "crc", "none");
}

static int set_shadow(struct bfs_options_parser *c, const struct bfs_option *t, const char *arg,
		      const char *v)
{
	return set_two(c, t, arg, v, "on", "off");
}

/* disk_cache=DIR|auto|off: off is off (not a folder named off); auto (the
 * default) is a folder beside the index for a source that goes through the
 * I/O stage (mount/main.c), and none on a local disk. */
static int set_disk_cache(struct bfs_options_parser *c, const struct bfs_option *t, const char *arg,
			  const char *v)
{
	struct bfs_options *o = c->o;

	(void)t;
	(void)arg;
	free(o->disk_cache);
	o->disk_cache = NULL;
	o->disk_cache_off = strcmp(v, "off") == 0;
	if (o->disk_cache_off || strcmp(v, "auto") == 0)
		return 0;
	return bfs_options_set_str(&o->disk_cache, v);
}

static int set_on_corrupt(struct bfs_options_parser *c, const struct bfs_option *t, const char *arg,
			  const char *v)
{
	if (strcmp(v, "fail") == 0)
		c->o->on_corrupt = BFS_ON_CORRUPT_FAIL;
	else if (strcmp(v, "skip") == 0)
		c->o->on_corrupt = BFS_ON_CORRUPT_SKIP;
	else
		return bfs_options_bad(c, arg, t->why);
	return 0;
}

static int set_compression(struct bfs_options_parser *c, const struct bfs_option *t,
			   const char *arg, const char *v)
{
	if (bfs_compression_parse(&c->o->compression, v) != 0)
		return bfs_options_bad(c, arg, t->why);
	return 0;
}

static int set_io_backend(struct bfs_options_parser *c, const struct bfs_option *t, const char *arg,
			  const char *v)
{
	if (strcmp(v, "auto") == 0)
		c->o->io_backend = BFS_FETCH_AUTO;
	else if (strcmp(v, "threads") == 0)
		c->o->io_backend = BFS_FETCH_THREADS;
	else if (strcmp(v, "io_uring") == 0)
		c->o->io_backend = BFS_FETCH_URING;
	else
		return bfs_options_bad(c, arg, t->why);
	return 0;
}

static int set_io_plan(struct bfs_options_parser *c, const struct bfs_option *t, const char *arg,
		       const char *v)
{
	if (strcmp(v, "auto") == 0)
		c->o->io_plan = BFS_IOPLAN_AUTO;
	else if (strcmp(v, "passes") == 0)
		c->o->io_plan = BFS_IOPLAN_PASSES;
	else if (strcmp(v, "ranges") == 0)
		c->o->io_plan = BFS_IOPLAN_RANGES;
	else
		return bfs_options_bad(c, arg, t->why);
	return 0;
}

static int set_image(struct bfs_options_parser *c, const struct bfs_option *t, const char *arg,
		     const char *v)
{
	struct bfs_options *o = c->o;

	if (!strchr(v, ':'))
		return bfs_options_bad(c, arg, t->why);
	if (o->nimage == BFS_ARRAY_SIZE(o->image))
		return bfs_options_bad(c, arg, "at most 8 image= options");
	if (bfs_options_set_str(&o->image[o->nimage], v))
		return -1;
	o->nimage++;
	return 0;
}

static int set_crop(struct bfs_options_parser *c, const struct bfs_option *t, const char *arg,
		    const char *v)
{
	if (bfs_crop_parse(v, &c->o->aug.crop))
		return bfs_options_bad(c, arg, t->why);
	c->o->aug_set |= BFS_AUG_SET_CROP;
	return 0;
}

static int set_flip(struct bfs_options_parser *c, const struct bfs_option *t, const char *arg,
		    const char *v)
{
	if (strcmp(v, "h") != 0 && strcmp(v, "none") != 0)
		return bfs_options_bad(c, arg, t->why);
	c->o->aug.flip = strcmp(v, "h") == 0;
	c->o->aug_set |= BFS_AUG_SET_FLIP;
	return 0;
}

/* crop_scale=A:B, crop_ratio=A:B (checked against each other at mount) */
static int set_crop_range(struct bfs_options_parser *c, const struct bfs_option *t, const char *arg,
			  const char *v)
{
	bool scale = strcmp(t->name, "crop_scale") == 0;
	double *r = scale ? c->o->aug.scale : c->o->aug.ratio;

	if (bfs_augment_range_parse(v, r) || !(r[0] > 0) || r[0] > r[1] || (scale && r[1] > 1))
		return bfs_options_bad(c, arg, t->why);
	c->o->aug_set |= scale ? BFS_AUG_SET_SCALE : BFS_AUG_SET_RATIO;
	return 0;
}

static int set_crop_resize(struct bfs_options_parser *c, const struct bfs_option *t,
			   const char *arg, const char *v)
{
	uint64_t n;

	if (bfs_parse_u64(&n, v) || n < t->lo || n > t->hi)
		return bfs_options_bad(c, arg, t->why);
	c->o->aug.resize = (uint32_t)n;
	c->o->aug_set |= BFS_AUG_SET_RESIZE;
	return 0;
}

/* cuda (device 0) or cuda=DEV */
static int set_cuda(struct bfs_options_parser *c, const struct bfs_option *t, const char *arg,
		    const char *v)
{
	uint64_t n = 0;

	if (strchr(arg, '=') && (bfs_parse_u64(&n, v) || n > t->hi))
		return bfs_options_bad(c, arg, t->why);
	c->o->cuda_device = (int)n;
	return 0;
}

static int set_debug(struct bfs_options_parser *c, const struct bfs_option *t, const char *arg,
		     const char *v)
{
	(void)t, (void)arg, (void)v;
	c->o->debug = true;
	c->o->foreground = true;
	return 1; /* libfuse prints requests too */
}

static bool is_url(const char *v)
{
	return strncmp(v, "http://", 7) == 0 || strncmp(v, "https://", 8) == 0;
}

static bool no_slash(const char *v)
{
	return !strchr(v, '/');
}

#define FIELD(f)                                                                                   \
	.off = offsetof(struct bfs_options, f), .size = sizeof(((struct bfs_options *)0)->f)
#define ANY UINT64_MAX

/* The options, in the order of --help and the man page. A new option is
 * a line here, its field in struct bfs_options, its heading in
 * doc/batchfs.1.scd (check_options fails without it) and its line in
 * docs/contract.md. */
static const struct bfs_option table[] = {
	{ .name = "batch_size",
	  .kind = BFS_OPT_VALUE,
	  .type = BFS_OPT_UINT,
	  FIELD(batch_size),
	  .lo = 1,
	  .hi = 1ull << 32,
	  .why = "need a whole number from 1 to 4294967296",
	  .init = "32",
	  .arg = "N",
	  .help = "records per batch" },
	{ .name = "seed",
	  .kind = BFS_OPT_VALUE,
	  .type = BFS_OPT_UINT,
	  FIELD(seed),
	  .hi = ANY,
	  .why = "need a whole number from 0 to 2^64-1",
	  .init = "0",
	  .arg = "N",
	  .help = "shuffle seed" },
	{ .name = "shuffle",
	  .kind = BFS_OPT_VALUE,
	  .type = BFS_OPT_CUSTOM,
	  FIELD(shuffle),
	  .why = "need 'global', 'block' or 'none'",
	  .set = set_shuffle,
	  .init = "global",
	  .arg = "global|block|none",
	  .help = "the order of each epoch" },
	{ .name = "block_size",
	  .kind = BFS_OPT_VALUE,
	  .type = BFS_OPT_SIZE,
	  FIELD(block_size),
	  .lo = 1,
	  .hi = ANY,
	  .block_only = true,
	  .why = "need a size such as 4M or 256K",
	  .init = "4M",
	  .arg = "SIZE",
	  .help = "shuffle=block: bytes of records per block",
	  .man = "*block_size=*_SIZE_, *window=*_N_" },
	{ .name = "window",
	  .kind = BFS_OPT_VALUE,
	  .type = BFS_OPT_UINT,
	  FIELD(window),
	  .lo = 1,
	  .hi = ANY,
	  .block_only = true,
	  .why = "need a whole number of blocks, at least 1",
	  .init = "64",
	  .arg = "N",
	  .help = "shuffle=block: blocks shuffled together",
	  .man = "*block_size=*_SIZE_, *window=*_N_" },
	{ .name = "partitions",
	  .kind = BFS_OPT_VALUE,
	  .type = BFS_OPT_AUTO_UINT,
	  FIELD(partitions),
	  .lo = 1,
	  .hi = (uint64_t)1 << 20,
	  .block_only = true,
	  .why = "need 'auto' or a whole number from 1 to 1048576",
	  .init = "auto",
	  .arg = "auto|P",
	  .help = "shuffle=block: partitions of the blocks; with world=W dividing P, each rank "
		  "reads only its own (auto: from the dataset's size, never from world)",
	  .man = "*partitions=*_P_|*auto*" },
	{ .name = "epochs",
	  .kind = BFS_OPT_VALUE,
	  .type = BFS_OPT_UINT,
	  FIELD(epochs),
	  .hi = 1000000,
	  .why = "need a whole number from 0 to 1000000",
	  .init = "1",
	  .arg = "N",
	  .help = "epoch folders listed" },
	{ .name = "drop_remainder",
	  .kind = BFS_OPT_FLAG,
	  .type = BFS_OPT_TRUE,
	  FIELD(drop_remainder),
	  .help = "drop the last short batch of an epoch" },
	{ .name = "schema",
	  .kind = BFS_OPT_VALUE,
	  .type = BFS_OPT_TEXT,
	  FIELD(schema_file),
	  .why = "need a file name",
	  .arg = "FILE",
	  .help = "this JSON schema, not the inferred one" },
	{ .name = "features",
	  .kind = BFS_OPT_VALUE,
	  .type = BFS_OPT_TEXT,
	  FIELD(features),
	  .why = "need a comma-separated list of feature names",
	  .arg = "a,b",
	  .help = "only these features" },
	{ .name = "rank",
	  .kind = BFS_OPT_VALUE,
	  .type = BFS_OPT_UINT,
	  FIELD(rank),
	  .hi = ANY,
	  .why = "need a whole number",
	  .arg = "R",
	  .help = "with world=W: this node's batches R, R+W, R+2W ...",
	  .man = "*rank=*_R_*,world=*_W_" },
	{ .name = "world",
	  .kind = BFS_OPT_VALUE,
	  .type = BFS_OPT_UINT,
	  FIELD(world),
	  .lo = 1,
	  .hi = ANY,
	  .why = "need a whole number of at least 1",
	  .init = "1",
	  .arg = "W",
	  .def = "",
	  .help = "ranks; without rank: folders rank-0000/ ... rank-(W-1)/, one per rank",
	  .man = "*world=*_W_ (without *rank*)" },
	{ .name = "verify",
	  .kind = BFS_OPT_VALUE,
	  .type = BFS_OPT_CUSTOM,
	  FIELD(verify),
	  .why = "need 'crc' or 'none'",
	  .set = set_verify,
	  .init = "crc",
	  .arg = "crc|none",
	  .help = "check the CRCs of every record read" },
	{ .name = "on_corrupt",
	  .kind = BFS_OPT_VALUE,
	  .type = BFS_OPT_CUSTOM,
	  FIELD(on_corrupt),
	  .why = "need 'fail' or 'skip'",
	  .set = set_on_corrupt,
	  .init = "fail",
	  .arg = "fail|skip",
	  .help = "a corrupt record fails its batch, or is skipped" },
	{ .name = "cache_size",
	  .kind = BFS_OPT_VALUE,
	  .type = BFS_OPT_SIZE,
	  FIELD(cache_size),
	  .lo = 1,
	  .hi = ANY,
	  .why = "need a size such as 512M or 2G",
	  .init = "1G",
	  .arg = "SIZE",
	  .help = "bound on decoded-batch memory" },
	{ .name = "prefetch",
	  .kind = BFS_OPT_VALUE,
	  .type = BFS_OPT_UINT,
	  FIELD(prefetch),
	  .hi = 4096,
	  .why = "need a whole number from 0 to 4096",
	  .arg = "N",
	  .def = "2 x threads",
	  .help = "batches decoded ahead of the reader" },
	{ .name = "chunk_rows",
	  .kind = BFS_OPT_VALUE,
	  .type = BFS_OPT_UINT,
	  FIELD(chunk_rows),
	  .lo = 1,
	  .hi = 1ull << 32,
	  .why = "need a whole number from 1 to 2^32",
	  .arg = "N",
	  .def = "about 2 MiB of rows",
	  .help = "rows decoded together for all/" },
	{ .name = "threads",
	  .kind = BFS_OPT_VALUE,
	  .type = BFS_OPT_UINT,
	  FIELD(threads),
	  .lo = 1,
	  .hi = 64,
	  .why = "need a whole number from 1 to 64",
	  .arg = "N",
	  .def = "the number of processors",
	  .help = "decode workers" },
	{ .name = "index_dir",
	  .kind = BFS_OPT_VALUE,
	  .type = BFS_OPT_TEXT,
	  FIELD(index_dir),
	  .why = "need a directory",
	  .arg = "DIR",
	  .def = "$XDG_CACHE_HOME/batchfs",
	  .help = "where the index and the inferred schema are cached" },
	{ .name = "shadow",
	  .kind = BFS_OPT_VALUE,
	  .type = BFS_OPT_CUSTOM,
	  FIELD(shadow),
	  .why = "need 'on' or 'off'",
	  .set = set_shadow,
	  .init = "on",
	  .arg = "on|off",
	  .help = "plain copies of gzip and zlib shards in index_dir" },
	{ .name = "shadow_size",
	  .kind = BFS_OPT_VALUE,
	  .type = BFS_OPT_SIZE,
	  FIELD(shadow_size),
	  .hi = ANY,
	  .why = "need a size such as 8G (0: no shadow copies)",
	  .init = "8G",
	  .arg = "SIZE",
	  .help = "the most bytes those copies take, 0: none" },
	{ .name = "compression",
	  .kind = BFS_OPT_VALUE,
	  .type = BFS_OPT_CUSTOM,
	  FIELD(compression),
	  .why = "need auto, none, gzip or zlib",
	  .set = set_compression,
	  .init = "auto",
	  .arg = "auto|none|gzip|zlib",
	  .help = "the shards' compression (auto: from the bytes)" },
	{ .name = "follow_symlinks",
	  .kind = BFS_OPT_FLAG,
	  .type = BFS_OPT_TRUE,
	  FIELD(follow_symlinks),
	  .help = "follow a symlink in SOURCE that leads outside it" },
	{ .name = "split",
	  .kind = BFS_OPT_VALUE,
	  .type = BFS_OPT_TEXT,
	  FIELD(split),
	  .why = "need the name of a split, such as train",
	  .check = no_slash,
	  .arg = "NAME",
	  .help = "SOURCE a TFDS dataset folder: serve this split" },
	{ .name = "image",
	  .kind = BFS_OPT_VALUE,
	  .type = BFS_OPT_CUSTOM,
	  FIELD(image),
	  .why = "need FEATURE:HxW[:C], such as image/encoded:224x224",
	  .set = set_image,
	  .arg = "FEATURE:HxW[:C]",
	  .help = "decode that JPEG/PNG feature into uint8 [B, H, W, C]",
	  .man = "*image=*_FEATURE_*:*_HxW_[*:*_C_]" },
	{ .name = "image_max_pixels",
	  .kind = BFS_OPT_VALUE,
	  .type = BFS_OPT_SIZE,
	  FIELD(image_max_pixels),
	  .lo = 1,
	  .hi = ANY,
	  .why = "need a whole number of pixels of at least 1 (K/M/G suffixes)",
	  .arg = "N",
	  .def = "64M",
	  .help = "refuse larger images, from their header" },
	{ .name = "crop",
	  .kind = BFS_OPT_VALUE,
	  .type = BFS_OPT_CUSTOM,
	  FIELD(aug.crop),
	  .why = "need 'random', 'center' or 'none'",
	  .set = set_crop,
	  .arg = "random|center|none",
	  .def = "none",
	  .help = "image features: RandomResizedCrop, or the evaluation's centre crop" },
	{ .name = "flip",
	  .kind = BFS_OPT_VALUE,
	  .type = BFS_OPT_CUSTOM,
	  FIELD(aug.flip),
	  .why = "need 'h' or 'none'",
	  .set = set_flip,
	  .arg = "h|none",
	  .def = "none",
	  .help = "image features: mirror half of them left to right" },
	{ .name = "crop_scale",
	  .kind = BFS_OPT_VALUE,
	  .type = BFS_OPT_CUSTOM,
	  FIELD(aug.scale),
	  .why = "need A:B with 0 < A <= B <= 1, such as 0.08:1",
	  .set = set_crop_range,
	  .arg = "A:B",
	  .def = "0.08:1",
	  .help = "crop=random: the box's fraction of the image's area",
	  .man = "*crop_scale=*_A_*:*_B_, *crop_ratio=*_A_*:*_B_" },
	{ .name = "crop_ratio",
	  .kind = BFS_OPT_VALUE,
	  .type = BFS_OPT_CUSTOM,
	  FIELD(aug.ratio),
	  .why = "need A:B with 0 < A <= B, such as 3/4:4/3",
	  .set = set_crop_range,
	  .arg = "A:B",
	  .def = "3/4:4/3",
	  .help = "crop=random: the box's width / height, drawn log-uniformly",
	  .man = "*crop_scale=*_A_*:*_B_, *crop_ratio=*_A_*:*_B_" },
	{ .name = "crop_resize",
	  .kind = BFS_OPT_VALUE,
	  .type = BFS_OPT_CUSTOM,
	  FIELD(aug.resize),
	  .lo = 1,
	  .hi = 4 * UINT16_MAX,
	  .why = "need a whole number of pixels from 1 to 262140",
	  .set = set_crop_resize,
	  .arg = "N",
	  .def = "max(H, W) x 256/224",
	  .help = "crop=center: the shorter side before the crop" },
	{ .name = "io_depth",
	  .kind = BFS_OPT_VALUE,
	  .type = BFS_OPT_AUTO_UINT,
	  FIELD(io_depth),
	  .lo = 1,
	  .hi = BFS_IO_DEPTH_MAX,
	  .why = "need 'auto' or a whole number from 1 to 4096",
	  .init = "auto",
	  .arg = "N|auto",
	  .help = "source reads in flight (auto: none on a local disk, 256 on a network or FUSE "
		  "file system)",
	  .man = "*io_depth=*_N_|*auto*" },
	{ .name = "readahead",
	  .kind = BFS_OPT_VALUE,
	  .type = BFS_OPT_AUTO_SIZE,
	  FIELD(readahead),
	  .lo = 1u << 20,
	  .hi = ANY,
	  .why = "need 'auto' or a size of at least 1M, such as 256M",
	  .init = "auto",
	  .arg = "SIZE|auto",
	  .help = "source bytes fetched ahead (auto: 64M, or two windows of blocks under "
		  "shuffle=block)",
	  .man = "*readahead=*_SIZE_|*auto*" },
	{ .name = "disk_cache",
	  .kind = BFS_OPT_VALUE,
	  .type = BFS_OPT_CUSTOM,
	  FIELD(disk_cache),
	  .why = "need a directory on a local disk, 'auto' or 'off'",
	  .set = set_disk_cache,
	  .init = "auto",
	  .arg = "DIR|auto|off",
	  .help = "keep the source bytes fetched in DIR on a local disk, for later epochs and "
		  "mounts (auto: $XDG_CACHE_HOME/batchfs/disk_cache for a bucket, network or FUSE "
		  "source, unless the mount reads a share of partitions; off: none)",
	  .man = "*disk_cache=*_DIR_|*auto*|*off*" },
	{ .name = "disk_cache_size",
	  .kind = BFS_OPT_VALUE,
	  .type = BFS_OPT_SIZE,
	  FIELD(disk_cache_size),
	  .lo = 16u << 20,
	  .hi = ANY,
	  .why = "need a size of at least 16M, such as 100G",
	  .arg = "SIZE",
	  .def = "10% of its file system",
	  .help = "the most bytes DIR's blocks take" },
	{ .name = "io_backend",
	  .kind = BFS_OPT_VALUE,
	  .type = BFS_OPT_CUSTOM,
	  FIELD(io_backend),
	  .why = "need 'auto', 'threads' or 'io_uring'",
	  .set = set_io_backend,
	  .init = "auto",
	  .arg = "auto|threads|io_uring",
	  .help = "how the I/O stage reads (auto: timed per source)" },
	{ .name = "io_plan",
	  .kind = BFS_OPT_VALUE,
	  .type = BFS_OPT_CUSTOM,
	  FIELD(io_plan),
	  .why = "need 'auto', 'passes' or 'ranges'",
	  .set = set_io_plan,
	  .init = "auto",
	  .arg = "auto|passes|ranges",
	  .help = "how the global shuffle reads its records from a slow source (auto: from "
		  "its measured cost)" },
	{ .name = "endpoint",
	  .kind = BFS_OPT_VALUE,
	  .type = BFS_OPT_TEXT,
	  FIELD(endpoint),
	  .why = "need an http:// or https:// URL",
	  .check = is_url,
	  .arg = "URL",
	  .help = "SOURCE a bucket: its S3 endpoint (else AWS_ENDPOINT_URL)",
	  .man = "*endpoint=*_URL_, *region=*_R_, *no_sign_request*" },
	{ .name = "region",
	  .kind = BFS_OPT_VALUE,
	  .type = BFS_OPT_TEXT,
	  FIELD(region),
	  .why = "need a region such as us-east-1",
	  .arg = "R",
	  .def = "us-east-1",
	  .help = "its region (else AWS_REGION)",
	  .man = "*endpoint=*_URL_, *region=*_R_, *no_sign_request*" },
	{ .name = "no_sign_request",
	  .kind = BFS_OPT_FLAG,
	  .type = BFS_OPT_TRUE,
	  FIELD(no_sign_request),
	  .help = "anonymous requests (else AWS_ACCESS_KEY_ID... or AWS_PROFILE)",
	  .man = "*endpoint=*_URL_, *region=*_R_, *no_sign_request*" },
	{ .name = "cuda",
	  .kind = BFS_OPT_FLAG_VALUE,
	  .type = BFS_OPT_CUSTOM,
	  FIELD(cuda_device),
	  .hi = 1024,
	  .why = "need a CUDA device number",
	  .set = set_cuda,
	  .arg = "DEV",
	  .help = "the CUDA path on device DEV (0): batch-B.cuda descriptors",
	  .man = "*cuda*[*=*_DEV_]" },
	{ .name = "cuda_pool",
	  .kind = BFS_OPT_VALUE,
	  .type = BFS_OPT_UINT,
	  FIELD(cuda_pool),
	  .lo = 1,
	  .hi = 1024,
	  .why = "need a whole number of device buffers from 1 to 1024",
	  .arg = "N",
	  .def = "4",
	  .help = "device buffers of the CUDA path" },
	{ .name = "watch_fd",
	  .kind = BFS_OPT_VALUE,
	  .type = BFS_OPT_UINT,
	  FIELD(watch_fd),
	  .hi = INT_MAX,
	  .why = "need the number of an open file descriptor",
	  .arg = "N",
	  .help = "unmount at the end of file of this inherited pipe" },
	{ .name = "seek_span",
	  .kind = BFS_OPT_VALUE,
	  .type = BFS_OPT_SIZE,
	  FIELD(seek_span),
	  .lo = BFS_SEEK_SPAN_MIN,
	  .hi = ANY,
	  .why = "need a size of at least 64K, such as 256K",
	  .arg = "SIZE",
	  .def = "1M",
	  .help = "bytes between the seek points of a gzip/zlib shard indexed" },
	{ .name = "-f",
	  .kind = BFS_OPT_FLAG,
	  .type = BFS_OPT_TRUE,
	  FIELD(foreground),
	  .help = "foreground" },
	{ .name = "debug",
	  .alias = "-d",
	  .kind = BFS_OPT_FLAG,
	  .type = BFS_OPT_CUSTOM,
	  FIELD(debug),
	  .set = set_debug,
	  .help = "foreground, and log every request",
	  .man = "*-d*, *debug*" },
	{ .name = "--help",
	  .alias = "-h",
	  .kind = BFS_OPT_COMMAND,
	  .type = BFS_OPT_TRUE,
	  FIELD(help) },
	{ .name = "--version",
	  .alias = "-V",
	  .kind = BFS_OPT_COMMAND,
	  .type = BFS_OPT_TRUE,
	  FIELD(version) },
};

_Static_assert(BFS_ARRAY_SIZE(table) <= MAX_OPTIONS, "raise MAX_OPTIONS");

const struct bfs_option *bfs_options_table(size_t *n)
{
	*n = BFS_ARRAY_SIZE(table);
	return table;
}

const struct bfs_option *bfs_option_find(const char *name)
{
	for (size_t i = 0; i < BFS_ARRAY_SIZE(table); i++)
		if (strcmp(table[i].name, name) == 0)
			return &table[i];
	return NULL;
}

int bfs_option_value(const struct bfs_option *t, const char *v, uint64_t *out)
{
	bool size = t->type == BFS_OPT_SIZE || t->type == BFS_OPT_AUTO_SIZE;
	uint64_t n;

	if (t->type != BFS_OPT_UINT && t->type != BFS_OPT_SIZE && t->type != BFS_OPT_AUTO_UINT &&
	    t->type != BFS_OPT_AUTO_SIZE)
		return -EINVAL;
	if ((t->type == BFS_OPT_AUTO_UINT || t->type == BFS_OPT_AUTO_SIZE) &&
	    strcmp(v, "auto") == 0) {
		*out = 0;
		return 0;
	}
	if ((size ? parse_size(&n, v) : bfs_parse_u64(&n, v)) || n < t->lo || n > t->hi)
		return -EINVAL;
	*out = n;
	return 0;
}

/* "name=ARG", "name[=ARG]", "name", "-d, debug": how --help writes it. */
static void help_form(char *dst, size_t cap, const struct bfs_option *t)
{
	const char *alias = t->alias ? t->alias : "", *sep = t->alias ? ", " : "";

	if (t->kind == BFS_OPT_VALUE)
		snprintf(dst, cap, "%s%s%s=%s", alias, sep, t->name, t->arg);
	else if (t->kind == BFS_OPT_FLAG_VALUE)
		snprintf(dst, cap, "%s%s%s[=%s]", alias, sep, t->name, t->arg);
	else
		snprintf(dst, cap, "%s%s%s", alias, sep, t->name);
}

#define HELP_COLUMN 26
#define HELP_WIDTH 80

/* text from HELP_COLUMN on, wrapped at a space before HELP_WIDTH */
static void help_text(FILE *f, const char *text)
{
	size_t room = HELP_WIDTH - HELP_COLUMN;

	while (strlen(text) > room) {
		size_t cut = room;

		while (cut > 0 && text[cut] != ' ')
			cut--;
		if (cut == 0)
			break;
		fprintf(f, "%.*s\n%*s", (int)cut, text, HELP_COLUMN, "");
		text += cut + 1;
	}
	fprintf(f, "%s\n", text);
}

void bfs_options_help(FILE *f)
{
	for (size_t i = 0; i < BFS_ARRAY_SIZE(table); i++) {
		const struct bfs_option *t = &table[i];
		const char *def = t->def ? t->def : t->init;
		char form[96], text[256];

		if (def && !*def)
			def = NULL;
		if (t->kind == BFS_OPT_COMMAND)
			continue;
		help_form(form, sizeof(form), t);
		if (strlen(form) + 2 < HELP_COLUMN)
			fprintf(f, "  %-*s", HELP_COLUMN - 2, form);
		else
			fprintf(f, "  %s\n%*s", form, HELP_COLUMN, "");
		snprintf(text, sizeof(text), "%s%s%s%s", t->help, def ? " (default " : "",
			 def ? def : "", def ? ")" : "");
		help_text(f, text);
	}
}

/* --help's lines on SOURCE: what it may be, and for buckets the places
 * credentials come from, in each chain's order (credplaces.h) */
void bfs_options_help_sources(FILE *f)
{
	size_t n;
	const struct bfs_cred_place *p = bfs_cred_places(&n);

	fprintf(f, "SOURCE: a directory of TFRecord shards, one file, or a quoted glob; a bucket:\n"
		   "  s3://BUCKET/PREFIX/, s3://BUCKET/KEY, a glob on the last part, gs://...;\n"
		   "  or a mixture file (JSON: {\"mixture\": [{\"name\", \"source\", \"weight\"}, "
		   "...]}).\n"
		   "A bucket's credentials come from the first of these that has some\n"
		   "(man batchfs, CREDENTIALS, names their variables):\n");
	for (const char *scheme = "s3://"; scheme; scheme = *scheme == 's' ? "gs://" : NULL) {
		size_t col = 0;

		for (size_t i = 0; i < n; i++) {
			size_t len = strlen(p[i].name) + 2;

			if (!p[i].cred || strcmp(p[i].scheme, scheme) != 0)
				continue;
			if (col == 0)
				col = (size_t)fprintf(f, "  %s  %s", scheme, p[i].name);
			else if (col + len > HELP_WIDTH)
				col = (size_t)fprintf(f, ",\n         %s", p[i].name) - 2;
			else
				col += (size_t)fprintf(f, ", %s", p[i].name);
		}
		fprintf(f, "\n");
	}
}
