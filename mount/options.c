/* SPDX-License-Identifier: Apache-2.0 */
/*
 * options.c — `-o` option parsing for the mount (see options.h): libfuse's
 * fuse_opt over the table's names (options_table.c), the options libfuse
 * takes itself, the hint for an unknown one, the checks between options,
 * and the effective options described back.
 */
#define FUSE_USE_VERSION 312

#include "options.h"
#include "options_impl.h"

#include <ctype.h>
#include <errno.h>
#include <fuse_opt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static bool valued(const struct bfs_option *t)
{
	return t->kind == BFS_OPT_VALUE || t->kind == BFS_OPT_FLAG_VALUE;
}

static bool flag(const struct bfs_option *t)
{
	return t->kind != BFS_OPT_VALUE;
}

/* fuse_opt's templates of the table: "name=" for a value, "name" for a
 * flag, the alias as a flag; the key says the entry (key / 2). */
static struct fuse_opt templates[2 * MAX_OPTIONS + 1];

static const struct fuse_opt *make_templates(const struct bfs_options_parser *c)
{
	size_t n = 0;

	for (size_t i = 0; i < c->ntab; i++) {
		const struct bfs_option *t = &c->tab[i];
		static char names[MAX_OPTIONS][32];

		if (valued(t)) {
			snprintf(names[i], sizeof(names[i]), "%s=", t->name);
			templates[n++] = (struct fuse_opt)FUSE_OPT_KEY(names[i], (int)(2 * i));
		}
		if (flag(t))
			templates[n++] = (struct fuse_opt)FUSE_OPT_KEY(t->name, (int)(2 * i));
		if (t->alias)
			templates[n++] = (struct fuse_opt)FUSE_OPT_KEY(t->alias, (int)(2 * i + 1));
	}
	templates[n] = (struct fuse_opt)FUSE_OPT_END;
	return templates;
}

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

static bool named(const char *name, const char *arg, size_t len)
{
	return name && strlen(name) == len && strncmp(name, arg, len) == 0;
}

/* An option that neither batchfs nor libfuse takes: one line naming it,
 * with the nearest known option (of the table, then libfuse's) when one
 * is near. */
static int unknown(struct bfs_options_parser *c, const char *arg)
{
	const char *eq = strchr(arg, '='), *best = NULL;
	size_t len = eq ? (size_t)(eq - arg) : strlen(arg), best_len = 0, best_d = SIZE_MAX;
	bool valued_known = false, flag_known = false;

	for (size_t i = 0; i < c->ntab; i++) {
		const struct bfs_option *t = &c->tab[i];

		valued_known |= valued(t) && named(t->name, arg, len);
		flag_known |= (flag(t) && named(t->name, arg, len)) || named(t->alias, arg, len);
		if (t->name[0] != '-')
			closer(t->name, strlen(t->name), arg, len, &best, &best_len, &best_d);
	}
	for (size_t i = 0; i < BFS_ARRAY_SIZE(fuse_valued); i++) {
		valued_known |= named(fuse_valued[i], arg, len);
		closer(fuse_valued[i], strlen(fuse_valued[i]), arg, len, &best, &best_len, &best_d);
	}
	for (size_t i = 0; i < BFS_ARRAY_SIZE(fuse_flags); i++) {
		flag_known |= named(fuse_flags[i], arg, len);
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
static int fuse_option(struct bfs_options_parser *c, const char *arg)
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
			return bfs_options_bad(c, arg, "need a whole number of bytes");
		c->o->max_read = (unsigned)n;
		return 1;
	}
	if (eq ? in_list(fuse_valued, BFS_ARRAY_SIZE(fuse_valued), arg, (size_t)(eq - arg))
	       : in_list(fuse_flags, BFS_ARRAY_SIZE(fuse_flags), arg, strlen(arg)))
		return 1;
	return unknown(c, arg);
}

/* features=a,b,c arrives as "features=a", "b", "c": join them back */
static int join_feature(struct bfs_options *o, const char *arg)
{
	char *joined = NULL;

	if (asprintf(&joined, "%s,%s", o->features, arg) < 0)
		return -1;
	free(o->features);
	o->features = joined;
	return 0;
}

static int positional(struct bfs_options_parser *c, const char *arg)
{
	struct bfs_options *o = c->o;

	if (c->nonopt == 0)
		bfs_options_set_str(&o->source, arg);
	else if (c->nonopt == 1)
		bfs_options_set_str(&o->mountpoint, arg);
	else
		return bfs_options_bad(
			c, arg, "unexpected argument (usage: batchfs [OPTIONS] SOURCE MOUNTPOINT)");
	c->nonopt++;
	return 0;
}

/* fuse_opt's callback: an argument, with the table's entry in key. */
static int proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	struct bfs_options_parser *c = data;
	const struct bfs_option *t;
	const char *v = strchr(arg, '=');
	int rc;

	(void)outargs;
	if (key == FUSE_OPT_KEY_OPT && c->in_features && !is_mount_flag(arg))
		return join_feature(c->o, arg);
	c->in_features = key >= 0 && strcmp(c->tab[key / 2].name, "features") == 0;
	if (key == FUSE_OPT_KEY_NONOPT)
		return positional(c, arg);
	if (key < 0 || (size_t)key / 2 >= c->ntab)
		return fuse_option(c, arg);
	t = &c->tab[key / 2];
	rc = bfs_options_set(c, t, arg, v ? v + 1 : "");
	if (rc < 0)
		return rc;
	c->given[key / 2] = true;
	if (t->block_only) {
		snprintf(c->block_arg, sizeof(c->block_arg), "%s", arg);
		c->block_given = true;
	}
	return rc;
}

static bool given(const struct bfs_options_parser *c, const char *name)
{
	const struct bfs_option *t = bfs_option_find(name);

	return t && c->given[t - c->tab];
}

/* The defaults: the table's, then those of the machine. 0, or -1 when
 * the table's cannot be set (a table that needs fixing: check_options). */
static int set_defaults(struct bfs_options_parser *c)
{
	struct bfs_options *o = c->o;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	memset(o, 0, sizeof(*o));
	for (size_t i = 0; i < c->ntab; i++)
		if (c->tab[i].init &&
		    bfs_options_set(c, &c->tab[i], c->tab[i].init, c->tab[i].init) < 0)
			return -1;
	o->threads = ncpu > 0 ? (unsigned)(ncpu > 64 ? 64 : ncpu) : 1;
	o->cuda_device = -1;
	o->watch_fd = -1;
	o->prefetch = BFS_PREFETCH_DEFAULT;
	return 0;
}

/* The checks between options, once all are parsed: 0, or 1 after one line. */
static int check_together(struct bfs_options_parser *c)
{
	struct bfs_options *o = c->o;

	if (!o->source || !o->mountpoint) {
		fprintf(stderr, "batchfs: need SOURCE and MOUNTPOINT (usage: batchfs [OPTIONS] "
				"SOURCE MOUNTPOINT; see batchfs --help)\n");
		return 1;
	}
	if (c->block_given && !o->block) {
		fprintf(stderr,
			"batchfs: option '%s': only with shuffle=block, which a mixture does "
			"not take\n",
			c->block_arg);
		return 1;
	}
	o->all_ranks = given(c, "world") && !given(c, "rank");
	if (o->world > 1u << 15 && o->all_ranks) {
		fprintf(stderr,
			"batchfs: option 'world=%llu': at most 32768 rank folders in one mount\n",
			(unsigned long long)o->world);
		return 1;
	}
	if (o->rank >= o->world) {
		fprintf(stderr, "batchfs: option 'rank=%llu': must be less than world=%llu\n",
			(unsigned long long)o->rank, (unsigned long long)o->world);
		return 1;
	}
	if (o->cuda_pool && o->cuda_device < 0) {
		fprintf(stderr, "batchfs: option 'cuda_pool=%u': only with cuda[=DEV]\n",
			o->cuda_pool);
		return 1;
	}
	return 0;
}

int bfs_default_index_dir(char **out)
{
	const char *xdg = getenv("XDG_CACHE_HOME");
	const char *home = getenv("HOME");

	if (xdg && *xdg)
		return asprintf(out, "%s/batchfs", xdg) < 0 ? -ENOMEM : 0;
	return asprintf(out, "%s/.cache/batchfs", home && *home ? home : "/tmp") < 0 ? -ENOMEM : 0;
}

int bfs_default_disk_cache(char **out)
{
	char *ix = NULL;
	int rc = bfs_default_index_dir(&ix);

	if (rc == 0 && asprintf(out, "%s/disk_cache", ix) < 0)
		rc = -ENOMEM;
	free(ix);
	return rc;
}

int bfs_options_parse(struct bfs_options *o, int argc, char **argv, int *fuse_argc,
		      char ***fuse_argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct bfs_options_parser c = { .o = o };

	c.tab = bfs_options_table(&c.ntab);

	if (set_defaults(&c) != 0 || fuse_opt_parse(&args, &c, make_templates(&c), proc) != 0 ||
	    c.failed) {
		if (!c.failed)
			fprintf(stderr, "batchfs: could not parse the options\n");
		goto fail;
	}
	if (o->help || o->version) {
		*fuse_argc = args.argc;
		*fuse_argv = args.argv;
		return 0;
	}
	if (check_together(&c) != 0)
		goto fail;
	if (o->prefetch == BFS_PREFETCH_DEFAULT)
		o->prefetch = 2 * o->threads;
	if (!o->index_dir && bfs_default_index_dir(&o->index_dir) != 0)
		goto fail;
	/* read-only, and the kernel checks permissions from our modes; the
	 * names are defaults, before the user's (libfuse keeps the last) */
	if (fuse_opt_insert_arg(&args, 1, "-ofsname=batchfs,subtype=batchfs") != 0 ||
	    fuse_opt_add_arg(&args, "-oro,default_permissions") != 0)
		goto fail;
	*fuse_argc = args.argc;
	*fuse_argv = args.argv;
	return 0;
fail:
	fuse_opt_free_args(&args);
	return 1;
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

/* Would the parser take the item after a comma of a features= list for an
 * option of its own rather than a feature name (join_feature)? An item with
 * '=' or named like an option or a mount flag is, so that comma is escaped. */
static bool item_stands_alone(const char *item, size_t len)
{
	size_t n;
	const struct bfs_option *tab = bfs_options_table(&n);
	char buf[64];

	if (memchr(item, '=', len))
		return true;
	if (len >= sizeof(buf))
		return false;
	memcpy(buf, item, len);
	buf[len] = '\0';
	if (is_mount_flag(buf))
		return true;
	for (size_t i = 0; i < n; i++)
		if (strcmp(tab[i].name, buf) == 0)
			return true;
	return false;
}

/* A features= list as the user wrote it (commas bare), each comma escaped
 * only where the item after it would not join back as a name. */
static char *escape_features(const char *v)
{
	char *out = malloc(2 * strlen(v) + 1), *p = out;

	if (!out)
		return NULL;
	for (; *v; v++) {
		if (*v == '\\') {
			*p++ = '\\';
		} else if (*v == ',') {
			const char *end = strchr(v + 1, ',');
			size_t len = end ? (size_t)(end - (v + 1)) : strlen(v + 1);

			if (item_stands_alone(v + 1, len))
				*p++ = '\\';
		}
		*p++ = *v;
	}
	*p = '\0';
	return out;
}

/* v in the fewest digits that read back as v */
static void put_real(char *dst, size_t cap, double v)
{
	snprintf(dst, cap, "%.15g", v);
	if (strtod(dst, NULL) != v)
		snprintf(dst, cap, "%.17g", v);
}

/* ",crop=...,flip=...": the augmentation options given */
static void describe_augment(char *dst, size_t cap, const struct bfs_options *o)
{
	const struct bfs_augment *a = &o->aug;
	char x[32], y[32];
	size_t n = 0;

	dst[0] = '\0';
	if (o->aug_set & BFS_AUG_SET_CROP)
		n += (size_t)snprintf(dst + n, cap - n, ",crop=%s", bfs_crop_name(a->crop));
	if ((o->aug_set & BFS_AUG_SET_FLIP) && n < cap)
		n += (size_t)snprintf(dst + n, cap - n, ",flip=%s", a->flip ? "h" : "none");
	for (int k = 0; k < 2; k++) {
		const double *r = k ? a->ratio : a->scale;

		if (!(o->aug_set & (k ? BFS_AUG_SET_RATIO : BFS_AUG_SET_SCALE)) || n >= cap)
			continue;
		put_real(x, sizeof(x), r[0]);
		put_real(y, sizeof(y), r[1]);
		n += (size_t)snprintf(dst + n, cap - n, ",crop_%s=%s:%s", k ? "ratio" : "scale", x,
				      y);
	}
	if ((o->aug_set & BFS_AUG_SET_RESIZE) && n < cap)
		snprintf(dst + n, cap - n, ",crop_resize=%u", a->resize);
}

char *bfs_options_describe(const struct bfs_options *o)
{
	char *s = NULL, *features = NULL, *img = NULL, *t;
	char cache[32], chunk[48] = "", cuda[64] = "", pix[48] = "", blk[96] = "", rank[32] = "";
	char parts[24] = "auto";
	char io[64] = "", ra[32] = "auto", aug[192];

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
	if (o->partitions)
		snprintf(parts, sizeof(parts), "%llu", (unsigned long long)o->partitions);
	if (o->shuffle && o->block)
		snprintf(blk, sizeof(blk), ",block_size=%llu,window=%llu,partitions=%s",
			 (unsigned long long)o->block_size, (unsigned long long)o->window, parts);
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
	describe_augment(aug, sizeof(aug), o);
	if (asprintf(&img, "%s%s%s%s", t ? ",split=" : "", t ? t : "", pix, aug) < 0)
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
	if (o->features && !(features = escape_features(o->features))) {
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
