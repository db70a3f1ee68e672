/*
 * options.c — `-o` option parsing for the mount (see options.h).
 */
#define FUSE_USE_VERSION 312

#include "options.h"

#include <ctype.h>
#include <fuse_opt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

enum {
	K_BATCH_SIZE,
	K_SEED,
	K_SHUFFLE,
	K_BLOCK_SIZE,
	K_WINDOW,
	K_EPOCHS,
	K_DROP,
	K_SCHEMA,
	K_FEATURES,
	K_RANK,
	K_WORLD,
	K_VERIFY,
	K_ON_CORRUPT,
	K_CACHE_SIZE,
	K_PREFETCH,
	K_CHUNK_ROWS,
	K_THREADS,
	K_INDEX_DIR,
	K_SHADOW,
	K_SHADOW_SIZE,
	K_COMPRESSION,
	K_FOLLOW,
	K_SPLIT,
	K_IMAGE,
	K_IMAGE_MAX_PIXELS,
	K_IO_DEPTH,
	K_READAHEAD,
	K_DISK_CACHE,
	K_DISK_CACHE_SIZE,
	K_IO_BACKEND,
	K_ENDPOINT,
	K_REGION,
	K_NO_SIGN,
	K_CUDA,
	K_CUDA_DEV,
	K_CUDA_POOL,
	K_WATCH_FD,
	K_FG,
	K_DEBUG,
	K_HELP,
	K_VERSION,
};

static const struct fuse_opt templates[] = {
	FUSE_OPT_KEY("batch_size=", K_BATCH_SIZE),
	FUSE_OPT_KEY("seed=", K_SEED),
	FUSE_OPT_KEY("shuffle=", K_SHUFFLE),
	FUSE_OPT_KEY("block_size=", K_BLOCK_SIZE),
	FUSE_OPT_KEY("window=", K_WINDOW),
	FUSE_OPT_KEY("epochs=", K_EPOCHS),
	FUSE_OPT_KEY("drop_remainder", K_DROP),
	FUSE_OPT_KEY("schema=", K_SCHEMA),
	FUSE_OPT_KEY("features=", K_FEATURES),
	FUSE_OPT_KEY("rank=", K_RANK),
	FUSE_OPT_KEY("world=", K_WORLD),
	FUSE_OPT_KEY("verify=", K_VERIFY),
	FUSE_OPT_KEY("on_corrupt=", K_ON_CORRUPT),
	FUSE_OPT_KEY("cache_size=", K_CACHE_SIZE),
	FUSE_OPT_KEY("prefetch=", K_PREFETCH),
	FUSE_OPT_KEY("chunk_rows=", K_CHUNK_ROWS),
	FUSE_OPT_KEY("threads=", K_THREADS),
	FUSE_OPT_KEY("index_dir=", K_INDEX_DIR),
	FUSE_OPT_KEY("shadow=", K_SHADOW),
	FUSE_OPT_KEY("shadow_size=", K_SHADOW_SIZE),
	FUSE_OPT_KEY("compression=", K_COMPRESSION),
	FUSE_OPT_KEY("follow_symlinks", K_FOLLOW),
	FUSE_OPT_KEY("split=", K_SPLIT),
	FUSE_OPT_KEY("image=", K_IMAGE),
	FUSE_OPT_KEY("image_max_pixels=", K_IMAGE_MAX_PIXELS),
	FUSE_OPT_KEY("io_depth=", K_IO_DEPTH),
	FUSE_OPT_KEY("readahead=", K_READAHEAD),
	FUSE_OPT_KEY("disk_cache=", K_DISK_CACHE),
	FUSE_OPT_KEY("disk_cache_size=", K_DISK_CACHE_SIZE),
	FUSE_OPT_KEY("io_backend=", K_IO_BACKEND),
	FUSE_OPT_KEY("endpoint=", K_ENDPOINT),
	FUSE_OPT_KEY("region=", K_REGION),
	FUSE_OPT_KEY("no_sign_request", K_NO_SIGN),
	FUSE_OPT_KEY("cuda", K_CUDA),
	FUSE_OPT_KEY("cuda=", K_CUDA_DEV),
	FUSE_OPT_KEY("cuda_pool=", K_CUDA_POOL),
	FUSE_OPT_KEY("watch_fd=", K_WATCH_FD),
	FUSE_OPT_KEY("-f", K_FG),
	FUSE_OPT_KEY("-d", K_DEBUG),
	FUSE_OPT_KEY("debug", K_DEBUG),
	FUSE_OPT_KEY("-h", K_HELP),
	FUSE_OPT_KEY("--help", K_HELP),
	FUSE_OPT_KEY("-V", K_VERSION),
	FUSE_OPT_KEY("--version", K_VERSION),
	FUSE_OPT_END,
};

struct parse_ctx {
	struct bfs_options *o;
	int nonopt;
	bool failed;
	bool in_features; /* the last option was features=: libfuse split its commas */
	bool rank_set, world_set;
	const char *block_opt; /* the last block_size= or window= given */
	char block_arg[64];
};

/* Flags of mount(8) and libfuse that can follow features=a,b in one -o. */
static bool is_mount_flag(const char *arg)
{
	static const char *const flags[] = {
		"ro",
		"rw",
		"dev",
		"nodev",
		"suid",
		"nosuid",
		"exec",
		"noexec",
		"async",
		"sync",
		"atime",
		"noatime",
		"diratime",
		"nodiratime",
		"relatime",
		"norelatime",
		"strictatime",
		"nostrictatime",
		"lazytime",
		"nolazytime",
		"dirsync",
		"auto",
		"noauto",
		"user",
		"nouser",
		"users",
		"_netdev",
		"nofail",
		"defaults",
		"allow_other",
		"allow_root",
		"auto_unmount",
		"default_permissions",
		"kernel_cache",
		"auto_cache",
		"noforget",
		"direct_io",
		"hard_remove",
		"use_ino",
		"readdir_ino",
		"big_writes",
		"nonempty",
		"blkdev",
		"clone_fd",
		"writeback_cache",
		"no_remote_lock",
	};
	for (size_t i = 0; i < BFS_ARRAY_SIZE(flags); i++)
		if (strcmp(arg, flags[i]) == 0)
			return true;
	return arg[0] == '-' || strchr(arg, '=') != NULL;
}

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

int bfs_parse_size(uint64_t *out, const char *s)
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

static int bad(struct parse_ctx *c, const char *arg, const char *why)
{
	fprintf(stderr, "batchfs: option '%s': %s\n", arg, why);
	c->failed = true;
	return -1;
}

/* The options libfuse 3 itself takes (fuse_session_new: lib/fuse_lowlevel.c's
 * fuse_ll_opts and lib/mount.c's fuse_mount_opts), which pass through; any
 * other option reaching libfuse would fail there with its own message. */
static const char *const fuse_flags[] = {
	"allow_other", "allow_root", "auto_unmount", "blkdev",	"default_permissions",
	"--debug",     "ro",	     "rw",	     "suid",	"nosuid",
	"dev",	       "nodev",	     "exec",	     "noexec",	"async",
	"sync",	       "dirsync",    "atime",	     "noatime", "-r",
	"-n",
};
static const char *const fuse_valued[] = {
	"fsname",    "subtype",	   "max_read",	  "blksize", "context",
	"fscontext", "defcontext", "rootcontext", "user",
};

static bool in_list(const char *const *list, size_t n, const char *s, size_t len)
{
	for (size_t i = 0; i < n; i++)
		if (strlen(list[i]) == len && strncmp(list[i], s, len) == 0)
			return true;
	return false;
}

/* Optimal string alignment distance (Levenshtein plus swaps of two
 * neighbours), case-insensitive; SIZE_MAX for names over 63 bytes. */
static size_t edit_distance(const char *a, size_t la, const char *b, size_t lb)
{
	size_t d[64][64];

	if (la >= 64 || lb >= 64)
		return SIZE_MAX;
	for (size_t i = 0; i <= la; i++)
		d[i][0] = i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = j;
	for (size_t i = 1; i <= la; i++) {
		for (size_t j = 1; j <= lb; j++) {
			int ca = tolower((unsigned char)a[i - 1]),
			    cb = tolower((unsigned char)b[j - 1]);
			size_t best = d[i - 1][j - 1] + (ca != cb);

			if (d[i - 1][j] + 1 < best)
				best = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < best)
				best = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) &&
			    tolower((unsigned char)a[i - 2]) == cb && d[i - 2][j - 2] + 1 < best)
				best = d[i - 2][j - 2] + 1;
			d[i][j] = best;
		}
	}
	return d[la][lb];
}

/* Keep the closest known option name to key[0..len) in *best. */
static void closer(const char *name, size_t nlen, const char *key, size_t len, const char **best,
		   size_t *best_len, size_t *best_d)
{
	size_t d = edit_distance(key, len, name, nlen);

	/* "batch" for batch_size, "cache" for cache_size: a start of the name */
	if (d > 1 && len >= 4 && len < nlen && strncasecmp(key, name, len) == 0)
		d = 1;
	if (d < *best_d) {
		*best = name;
		*best_len = nlen;
		*best_d = d;
	}
}

/* An option that neither batchfs nor libfuse takes: one line naming it,
 * with the nearest known option when one is near. */
static int unknown(struct parse_ctx *c, const char *arg)
{
	const char *eq = strchr(arg, '='), *best = NULL;
	size_t len = eq ? (size_t)(eq - arg) : strlen(arg), best_len = 0, best_d = SIZE_MAX;
	bool valued_known = false, flag_known = false;

	for (size_t i = 0; templates[i].templ; i++) {
		const char *t = templates[i].templ;
		size_t n = strlen(t);
		bool valued = n > 0 && t[n - 1] == '=';

		if (valued)
			n--;
		if (n == len && strncmp(t, arg, len) == 0) {
			valued_known |= valued;
			flag_known |= !valued;
		}
		if (t[0] != '-')
			closer(t, n, arg, len, &best, &best_len, &best_d);
	}
	for (size_t i = 0; i < BFS_ARRAY_SIZE(fuse_valued); i++) {
		valued_known |=
			strlen(fuse_valued[i]) == len && strncmp(fuse_valued[i], arg, len) == 0;
		closer(fuse_valued[i], strlen(fuse_valued[i]), arg, len, &best, &best_len, &best_d);
	}
	for (size_t i = 0; i < BFS_ARRAY_SIZE(fuse_flags); i++) {
		flag_known |= strlen(fuse_flags[i]) == len && strncmp(fuse_flags[i], arg, len) == 0;
		if (fuse_flags[i][0] != '-')
			closer(fuse_flags[i], strlen(fuse_flags[i]), arg, len, &best, &best_len,
			       &best_d);
	}
	c->failed = true;
	if (valued_known && !eq) {
		fprintf(stderr, "batchfs: option '%s' needs a value (%s=...)\n", arg, arg);
		return -1;
	}
	if (flag_known && eq) {
		fprintf(stderr, "batchfs: option '%s' takes no value (write %.*s)\n", arg, (int)len,
			arg);
		return -1;
	}
	if (best && best_d <= (len <= 3 ? 1 : len <= 8 ? 2 : 3))
		fprintf(stderr, "batchfs: unknown option '%s' (did you mean %.*s?)\n", arg,
			(int)best_len, best);
	else
		fprintf(stderr, "batchfs: unknown option '%s' (see batchfs --help)\n", arg);
	return -1;
}

/* A FUSE option: pass it to libfuse if libfuse takes it. */
static int fuse_option(struct parse_ctx *c, const char *arg)
{
	const char *eq = strchr(arg, '=');

	/* fuse 2's nonempty: fuse 3 always mounts on a non-empty folder (a
	 * mount point is refused all the same, see main.c) */
	if (strcmp(arg, "nonempty") == 0)
		return 0;
	/* libfuse leaves it to us to ask for the same max_read at INIT */
	if (strncmp(arg, "max_read=", 9) == 0) {
		uint64_t n;

		if (bfs_parse_u64(&n, arg + 9) || n == 0 || n > UINT32_MAX)
			return bad(c, arg, "need a whole number of bytes");
		c->o->max_read = (unsigned)n;
		return 1;
	}
	if (eq ? in_list(fuse_valued, BFS_ARRAY_SIZE(fuse_valued), arg, (size_t)(eq - arg))
	       : in_list(fuse_flags, BFS_ARRAY_SIZE(fuse_flags), arg, strlen(arg)))
		return 1;
	return unknown(c, arg);
}

static int set_str(char **dst, const char *v)
{
	free(*dst);
	*dst = strdup(v);
	return *dst ? 0 : -1;
}

static int proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	struct parse_ctx *c = data;
	struct bfs_options *o = c->o;
	const char *v = strchr(arg, '=');
	uint64_t n;

	(void)outargs;
	v = v ? v + 1 : "";
	if (key == FUSE_OPT_KEY_OPT && c->in_features && !is_mount_flag(arg)) {
		/* features=a,b,c arrives as "features=a", "b", "c" */
		char *joined = NULL;
		if (asprintf(&joined, "%s,%s", o->features, arg) < 0)
			return -1;
		free(o->features);
		o->features = joined;
		return 0;
	}
	c->in_features = key == K_FEATURES;
	switch (key) {
	case FUSE_OPT_KEY_NONOPT:
		if (c->nonopt == 0)
			set_str(&o->source, arg);
		else if (c->nonopt == 1)
			set_str(&o->mountpoint, arg);
		else
			return bad(
				c, arg,
				"unexpected argument (usage: batchfs [OPTIONS] SOURCE MOUNTPOINT)");
		c->nonopt++;
		return 0;
	case K_BATCH_SIZE:
		if (bfs_parse_u64(&n, v) || n == 0 || n > (1ull << 32))
			return bad(c, arg, "need a whole number from 1 to 4294967296");
		o->batch_size = n;
		return 0;
	case K_SEED:
		if (bfs_parse_u64(&o->seed, v))
			return bad(c, arg, "need a whole number from 0 to 2^64-1");
		return 0;
	case K_SHUFFLE:
		o->block = strcmp(v, "block") == 0;
		if (strcmp(v, "global") == 0 || o->block)
			o->shuffle = true;
		else if (strcmp(v, "none") == 0)
			o->shuffle = false;
		else
			return bad(c, arg, "need 'global', 'block' or 'none'");
		return 0;
	case K_BLOCK_SIZE:
		if (bfs_parse_size(&o->block_size, v) || o->block_size == 0)
			return bad(c, arg, "need a size such as 4M or 256K");
		snprintf(c->block_arg, sizeof(c->block_arg), "%s", arg);
		c->block_opt = c->block_arg;
		return 0;
	case K_WINDOW:
		if (bfs_parse_u64(&o->window, v) || o->window == 0)
			return bad(c, arg, "need a whole number of blocks, at least 1");
		snprintf(c->block_arg, sizeof(c->block_arg), "%s", arg);
		c->block_opt = c->block_arg;
		return 0;
	case K_EPOCHS:
		if (bfs_parse_u64(&n, v) || n > 1000000)
			return bad(c, arg, "need a whole number from 0 to 1000000");
		o->epochs = n;
		return 0;
	case K_DROP:
		o->drop_remainder = true;
		return 0;
	case K_SCHEMA:
		if (!*v)
			return bad(c, arg, "need a file name");
		return set_str(&o->schema_file, v);
	case K_FEATURES:
		if (!*v)
			return bad(c, arg, "need a comma-separated list of feature names");
		return set_str(&o->features, v);
	case K_RANK:
		if (bfs_parse_u64(&o->rank, v))
			return bad(c, arg, "need a whole number");
		c->rank_set = true;
		return 0;
	case K_WORLD:
		if (bfs_parse_u64(&o->world, v) || o->world == 0)
			return bad(c, arg, "need a whole number of at least 1");
		c->world_set = true;
		return 0;
	case K_VERIFY:
		if (strcmp(v, "crc") == 0)
			o->verify = true;
		else if (strcmp(v, "none") == 0)
			o->verify = false;
		else
			return bad(c, arg, "need 'crc' or 'none'");
		return 0;
	case K_ON_CORRUPT:
		if (strcmp(v, "fail") == 0)
			o->on_corrupt = BFS_ON_CORRUPT_FAIL;
		else if (strcmp(v, "skip") == 0)
			o->on_corrupt = BFS_ON_CORRUPT_SKIP;
		else
			return bad(c, arg, "need 'fail' or 'skip'");
		return 0;
	case K_CACHE_SIZE:
		if (bfs_parse_size(&o->cache_size, v) || o->cache_size == 0)
			return bad(c, arg, "need a size such as 512M or 2G");
		return 0;
	case K_PREFETCH:
		if (bfs_parse_u64(&n, v) || n > 4096)
			return bad(c, arg, "need a whole number from 0 to 4096");
		o->prefetch = (unsigned)n;
		return 0;
	case K_CHUNK_ROWS:
		if (bfs_parse_u64(&n, v) || n == 0 || n > ((uint64_t)1 << 32))
			return bad(c, arg, "need a whole number from 1 to 2^32");
		o->chunk_rows = n;
		return 0;
	case K_THREADS:
		if (bfs_parse_u64(&n, v) || n == 0 || n > 64)
			return bad(c, arg, "need a whole number from 1 to 64");
		o->threads = (unsigned)n;
		return 0;
	case K_INDEX_DIR:
		if (!*v)
			return bad(c, arg, "need a directory");
		return set_str(&o->index_dir, v);
	case K_SHADOW:
		if (strcmp(v, "on") == 0)
			o->shadow = true;
		else if (strcmp(v, "off") == 0)
			o->shadow = false;
		else
			return bad(c, arg, "need 'on' or 'off'");
		return 0;
	case K_SHADOW_SIZE:
		if (bfs_parse_size(&o->shadow_size, v))
			return bad(c, arg, "need a size such as 8G (0: no shadow copies)");
		return 0;
	case K_IO_DEPTH:
		if (strcmp(v, "auto") == 0) {
			o->io_depth = 0;
			return 0;
		}
		if (bfs_parse_u64(&n, v) || n == 0 || n > BFS_IO_DEPTH_MAX)
			return bad(c, arg, "need 'auto' or a whole number from 1 to 4096");
		o->io_depth = (unsigned)n;
		return 0;
	case K_READAHEAD:
		if (strcmp(v, "auto") == 0) {
			o->readahead = 0;
			return 0;
		}
		if (bfs_parse_size(&o->readahead, v) || o->readahead < (1u << 20))
			return bad(c, arg, "need 'auto' or a size of at least 1M, such as 256M");
		return 0;
	case K_DISK_CACHE:
		if (!*v)
			return bad(c, arg, "need a directory on a local disk");
		return set_str(&o->disk_cache, v);
	case K_DISK_CACHE_SIZE:
		if (bfs_parse_size(&o->disk_cache_size, v) || o->disk_cache_size < (16u << 20))
			return bad(c, arg, "need a size of at least 16M, such as 100G");
		return 0;
	case K_IO_BACKEND:
		if (strcmp(v, "auto") == 0)
			o->io_backend = BFS_FETCH_AUTO;
		else if (strcmp(v, "threads") == 0)
			o->io_backend = BFS_FETCH_THREADS;
		else if (strcmp(v, "io_uring") == 0)
			o->io_backend = BFS_FETCH_URING;
		else
			return bad(c, arg, "need 'auto', 'threads' or 'io_uring'");
		return 0;
	case K_ENDPOINT:
		if (strncmp(v, "http://", 7) != 0 && strncmp(v, "https://", 8) != 0)
			return bad(c, arg, "need an http:// or https:// URL");
		return set_str(&o->endpoint, v);
	case K_REGION:
		if (!*v)
			return bad(c, arg, "need a region such as us-east-1");
		return set_str(&o->region, v);
	case K_NO_SIGN:
		o->no_sign_request = true;
		return 0;
	case K_COMPRESSION:
		if (bfs_compression_parse(&o->compression, v) != 0)
			return bad(c, arg, "need auto, none, gzip or zlib");
		return 0;
	case K_FOLLOW:
		o->follow_symlinks = true;
		return 0;
	case K_SPLIT:
		if (!*v || strchr(v, '/'))
			return bad(c, arg, "need the name of a split, such as train");
		return set_str(&o->split, v);
	case K_IMAGE:
		if (!strchr(v, ':'))
			return bad(c, arg, "need FEATURE:HxW[:C], such as image/encoded:224x224");
		if (o->nimage == BFS_ARRAY_SIZE(o->image))
			return bad(c, arg, "at most 8 image= options");
		if (set_str(&o->image[o->nimage], v))
			return -1;
		o->nimage++;
		return 0;
	case K_IMAGE_MAX_PIXELS:
		if (bfs_parse_size(&n, v) || n == 0)
			return bad(c, arg,
				   "need a whole number of pixels of at least 1 (K/M/G suffixes)");
		o->image_max_pixels = n;
		return 0;
	case K_CUDA:
		o->cuda_device = 0;
		return 0;
	case K_CUDA_DEV:
		if (bfs_parse_u64(&n, v) || n > 1024)
			return bad(c, arg, "need a CUDA device number");
		o->cuda_device = (int)n;
		return 0;
	case K_CUDA_POOL:
		if (bfs_parse_u64(&n, v) || n == 0 || n > 1024)
			return bad(c, arg, "need a whole number of device buffers from 1 to 1024");
		o->cuda_pool = (unsigned)n;
		return 0;
	case K_WATCH_FD:
		if (bfs_parse_u64(&n, v) || n > INT_MAX)
			return bad(c, arg, "need the number of an open file descriptor");
		o->watch_fd = (int)n;
		return 0;
	case K_FG:
		o->foreground = true;
		return 0;
	case K_DEBUG:
		o->debug = true;
		o->foreground = true;
		return 1; /* libfuse prints requests too */
	case K_HELP:
		o->help = true;
		return 0;
	case K_VERSION:
		o->version = true;
		return 0;
	default:
		return fuse_option(c, arg);
	}
}

int bfs_default_index_dir(char **out)
{
	const char *xdg = getenv("XDG_CACHE_HOME");
	const char *home = getenv("HOME");

	if (xdg && *xdg)
		return asprintf(out, "%s/batchfs", xdg) < 0 ? -ENOMEM : 0;
	return asprintf(out, "%s/.cache/batchfs", home && *home ? home : "/tmp") < 0 ? -ENOMEM : 0;
}

int bfs_options_parse(struct bfs_options *o, int argc, char **argv, int *fuse_argc,
		      char ***fuse_argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct parse_ctx c = { .o = o };
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	memset(o, 0, sizeof(*o));
	o->batch_size = 32;
	o->shuffle = true;
	o->block_size = 4ull << 20;
	o->window = 64;
	o->epochs = 1;
	o->world = 1;
	o->verify = true;
	o->cache_size = 1ull << 30;
	o->shadow = true;
	o->shadow_size = BFS_SHADOW_SIZE_DEFAULT;
	o->threads = ncpu > 0 ? (unsigned)(ncpu > 64 ? 64 : ncpu) : 1;
	o->cuda_device = -1;
	o->watch_fd = -1;
	o->prefetch = BFS_PREFETCH_DEFAULT;
	if (fuse_opt_parse(&args, &c, templates, proc) != 0 || c.failed) {
		if (!c.failed)
			fprintf(stderr, "batchfs: could not parse the options\n");
		fuse_opt_free_args(&args);
		return 1;
	}
	if (o->help || o->version) {
		*fuse_argc = args.argc;
		*fuse_argv = args.argv;
		return 0;
	}
	if (!o->source || !o->mountpoint) {
		fprintf(stderr, "batchfs: need SOURCE and MOUNTPOINT (usage: batchfs [OPTIONS] "
				"SOURCE MOUNTPOINT; see batchfs --help)\n");
		fuse_opt_free_args(&args);
		return 1;
	}
	if (c.block_opt && !o->block) {
		fprintf(stderr, "batchfs: option '%s': only with shuffle=block\n", c.block_arg);
		fuse_opt_free_args(&args);
		return 1;
	}
	o->all_ranks = c.world_set && !c.rank_set;
	if (o->world > 1u << 15 && o->all_ranks) {
		fprintf(stderr,
			"batchfs: option 'world=%llu': at most 32768 rank folders in one mount\n",
			(unsigned long long)o->world);
		fuse_opt_free_args(&args);
		return 1;
	}
	if (o->rank >= o->world) {
		fprintf(stderr, "batchfs: option 'rank=%llu': must be less than world=%llu\n",
			(unsigned long long)o->rank, (unsigned long long)o->world);
		fuse_opt_free_args(&args);
		return 1;
	}
	if (o->cuda_pool && o->cuda_device < 0) {
		fprintf(stderr, "batchfs: option 'cuda_pool=%u': only with cuda[=DEV]\n",
			o->cuda_pool);
		fuse_opt_free_args(&args);
		return 1;
	}
	if (o->prefetch == BFS_PREFETCH_DEFAULT)
		o->prefetch = 2 * o->threads;
	if (!o->index_dir && bfs_default_index_dir(&o->index_dir) != 0) {
		fuse_opt_free_args(&args);
		return 1;
	}
	/* read-only, and the kernel checks permissions from our modes; the
	 * names are defaults, before the user's (libfuse keeps the last) */
	if (fuse_opt_insert_arg(&args, 1, "-ofsname=batchfs,subtype=batchfs") != 0 ||
	    fuse_opt_add_arg(&args, "-oro,default_permissions") != 0) {
		fuse_opt_free_args(&args);
		return 1;
	}
	*fuse_argc = args.argc;
	*fuse_argv = args.argv;
	return 0;
}

void bfs_options_free_argv(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	args.allocated = 1;
	fuse_opt_free_args(&args);
}

void bfs_options_destroy(struct bfs_options *o)
{
	free(o->schema_file);
	free(o->features);
	free(o->index_dir);
	free(o->disk_cache);
	free(o->endpoint);
	free(o->region);
	free(o->split);
	for (unsigned i = 0; i < o->nimage; i++)
		free(o->image[i]);
	free(o->source);
	free(o->mountpoint);
}

/* fuse_opt reads '\\x' as a literal x: escape backslashes and commas so
 * that the whole value stays one option and parses back to itself. */
static char *escape_value(const char *v)
{
	size_t n = 0;
	char *out, *p;

	for (const char *q = v; *q; q++)
		n += (*q == '\\' || *q == ',') ? 2 : 1;
	out = malloc(n + 1);
	if (!out)
		return NULL;
	for (p = out; *v; v++) {
		if (*v == '\\' || *v == ',')
			*p++ = '\\';
		*p++ = *v;
	}
	*p = '\0';
	return out;
}

char *bfs_options_describe(const struct bfs_options *o)
{
	char *s = NULL, *features = NULL, *img = NULL, *t;
	char cache[32], chunk[48] = "", cuda[64] = "", pix[48] = "", blk[64] = "", rank[32] = "";
	char io[64] = "", ra[32] = "auto";

	if (o->cache_size % (1u << 20))
		snprintf(cache, sizeof(cache), "%llu", (unsigned long long)o->cache_size);
	else
		snprintf(cache, sizeof(cache), "%lluM", (unsigned long long)(o->cache_size >> 20));
	if (o->readahead)
		snprintf(ra, sizeof(ra), "%lluM", (unsigned long long)(o->readahead >> 20));
	if (o->io_depth)
		snprintf(io, sizeof(io), ",io_depth=%u,readahead=%s", o->io_depth, ra);
	else
		snprintf(io, sizeof(io), ",io_depth=auto,readahead=%s", ra);
	if (o->shuffle && o->block)
		snprintf(blk, sizeof(blk), ",block_size=%llu,window=%llu",
			 (unsigned long long)o->block_size, (unsigned long long)o->window);
	if (!o->all_ranks)
		snprintf(rank, sizeof(rank), "rank=%llu,", (unsigned long long)o->rank);
	if (o->chunk_rows)
		snprintf(chunk, sizeof(chunk), ",chunk_rows=%llu",
			 (unsigned long long)o->chunk_rows);
	if (o->cuda_device >= 0)
		snprintf(cuda, sizeof(cuda), ",cuda=%d,cuda_pool=%u", o->cuda_device,
			 o->cuda_pool ? o->cuda_pool : 4);
	if (o->image_max_pixels)
		snprintf(pix, sizeof(pix), ",image_max_pixels=%llu",
			 (unsigned long long)o->image_max_pixels);
	/* split and image values are the user's text: escaped like features */
	t = o->split ? escape_value(o->split) : NULL;
	if (o->split && !t)
		return NULL;
	if (asprintf(&img, "%s%s%s", t ? ",split=" : "", t ? t : "", pix) < 0)
		img = NULL;
	free(t);
	if (!img)
		return NULL;
	for (unsigned i = 0; i < o->nimage; i++) {
		char *v = escape_value(o->image[i]);
		int r = v ? asprintf(&t, "%s,image=%s", img, v) : -1;

		free(v);
		free(img);
		if (r < 0)
			return NULL;
		img = t;
	}
	if (o->features && !(features = escape_value(o->features))) {
		free(img);
		return NULL;
	}
	if (asprintf(&s,
		     "batch_size=%llu,seed=%llu,shuffle=%s%s,epochs=%llu%s,%sworld=%llu,"
		     "verify=%s,on_corrupt=%s,cache_size=%s,prefetch=%u%s,threads=%u%s,"
		     "compression=%s%s%s%s%s%s",
		     (unsigned long long)o->batch_size, (unsigned long long)o->seed,
		     !o->shuffle ? "none"
		     : o->block	 ? "block"
				 : "global",
		     blk, (unsigned long long)o->epochs, o->drop_remainder ? ",drop_remainder" : "",
		     rank, (unsigned long long)o->world, o->verify ? "crc" : "none",
		     o->on_corrupt == BFS_ON_CORRUPT_SKIP ? "skip" : "fail", cache, o->prefetch,
		     chunk, o->threads, io, bfs_compression_name(o->compression),
		     features ? ",features=" : "", features ? features : "",
		     o->follow_symlinks ? ",follow_symlinks" : "", cuda, img) < 0)
		s = NULL;
	free(features);
	free(img);
	return s;
}
