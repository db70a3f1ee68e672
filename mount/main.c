/*
 * main.c — the batchfs command: dispatch to the tools (inspect, schema,
 * index) or mount: options → dataset → schema → batcher → FUSE session.
 */
#include "cache.h"
#include "checks.h"
#include "cred.h"
#include "diskcache.h"
#include "fdcache.h"
#include "fuse_ops.h"
#include "lifecycle.h"
#include "mixture.h"
#include "objsrc.h"
#include "options.h"
#include "s3.h"
#include "tools.h"
#include "watch.h"

#include <fcntl.h>
#include <limits.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <dirent.h>
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
		"       batchfs index [--jobs N] [--index-dir DIR] [--shadow-size SIZE] SOURCE\n"
		"       batchfs stats [--json] MOUNTPOINT          a mount's counters, once\n"
		"       batchfs top [--interval S] [--count N] MOUNTPOINT   live view (q quits)\n"
		"       batchfs --help | --version\n"
		"\n"
		"SOURCE: a directory of TFRecord shards, one file, or a quoted glob; or a bucket:\n"
		"  s3://BUCKET/PREFIX/, s3://BUCKET/KEY, a glob on the last part, gs://...\n"
		"Mount options (-o k=v,k=v; standard FUSE options pass through):\n"
		"  batch_size=N (32)  seed=N (0)  shuffle=global|block|none  epochs=N (1)\n"
		"  block_size=SIZE (4M)  window=N (64): blocks of shuffle=block\n"
		"  drop_remainder  schema=FILE  features=a,b  rank=R,world=W\n"
		"  world=W without rank: folders rank-0000/ ... rank-(W-1)/, one per rank\n"
		"  verify=crc|none  on_corrupt=fail|skip  cache_size=SIZE (1G)\n"
		"  prefetch=N (2 x threads)  threads=N (nproc)  index_dir=DIR\n"
		"  shadow=on|off  shadow_size=SIZE (8G: plain copies of gzip/zlib shards in "
		"index_dir)\n"
		"  chunk_rows=N (about 2 MiB of rows: decoded together for all/)\n"
		"  compression=auto|none|gzip|zlib  follow_symlinks\n"
		"  io_depth=N|auto  readahead=SIZE|auto: source reads in flight, and bytes\n"
		"    fetched ahead (auto: none on a local disk, 256 reads on a network or\n"
		"    FUSE filesystem; 64M, or two windows of blocks under shuffle=block)\n"
		"  disk_cache=DIR  disk_cache_size=SIZE (10%% of DIR's file system): the source\n"
		"    bytes fetched, kept in DIR on a local disk for the next epochs and mounts\n"
		"  io_backend=auto|threads|io_uring: how the I/O stage reads (auto: timed per\n"
		"    source)\n"
		"  endpoint=URL  region=R  no_sign_request: SOURCE s3://BUCKET/PREFIX/ or "
		"gs://...\n"
		"    (else AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID... or AWS_PROFILE)\n"
		"  cuda[=DEV]  cuda_pool=N (4: device buffers for batch-B.cuda descriptors)\n"
		"  image=FEATURE:HxW[:C]  image_max_pixels=N (64M)  split=NAME (TFDS folder)\n"
		"  -f  foreground    -d  debug (foreground, log requests)\n"
		"Unmount with: fusermount3 -u MOUNTPOINT\n");
}

/* world=W without rank: where each process reads (README.txt's paths above
 * are rank 0's). Frees `readme`; NULL on failure. */
static char *add_ranks_note(char *readme, const struct bfs_options *o, const char *mnt)
{
	char *s = NULL;

	if (!readme || !o->all_ranks)
		return readme;
	if (asprintf(&s,
		     "%s\n"
		     "Ranks (world=%llu without rank): rank-0000/ ... rank-%04llu/ each hold\n"
		     "what a mount with rank=R,world=%llu shows (its epochs); the paths above\n"
		     "are rank 0's. A process of global rank R reads %s/rank-RRRR/, e.g.\n"
		     "under torchrun:\n"
		     "  root = '%s/rank-%%04d' %% int(os.environ['RANK'])\n",
		     readme, (unsigned long long)o->world, (unsigned long long)(o->world - 1),
		     (unsigned long long)o->world, mnt, mnt) < 0)
		s = NULL;
	free(readme);
	return s;
}

static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && n < (16 << 20) &&
	    fseek(f, 0, SEEK_SET) == 0) {
		buf = malloc((size_t)n + 1);
		if (buf && fread(buf, 1, (size_t)n, f) == (size_t)n) {
			buf[n] = '\0';
			*len = (size_t)n;
		} else {
			free(buf);
			buf = NULL;
		}
	}
	fclose(f);
	return buf;
}

static char *make_readme(const struct bfs_options *o, const char *opts, const char *mnt,
			 const struct bfs_batcher *b, uint64_t records, const char *first_npy)
{
	char *s = NULL, *rank0 = NULL;
	const char *root = mnt; /* where the examples read: rank 0's folder with ranks */

	if (o->all_ranks) {
		if (asprintf(&rank0, "%s/rank-0000", mnt) < 0)
			return NULL;
		root = rank0;
	}

	if (asprintf(&s,
		     "batchfs %s — TFRecord shards as ready batch files\n"
		     "\n"
		     "source:   %s\n"
		     "options:  %s\n"
		     "records:  %llu, %llu batches per epoch of up to %llu records\n"
		     "\n"
		     "Layout:\n"
		     "  schema.json        the effective schema and dataset facts\n"
		     "  stats.json         live counters (cache, decode, errors)\n"
		     "  errors.txt         one line per corrupt or rejected record\n"
		     "  epoch-EEEE/batch-BBBBBB/NAME.npy       one .npy per feature, shape [B, "
		     "...]\n"
		     "  epoch-EEEE/batch-BBBBBB.safetensors    the same tensors in one file\n"
		     "  epoch-EEEE/all/NAME.npy                the whole epoch as one array: the\n"
		     "                                         epoch's batches end to end\n"
		     "  epoch-EEEE/all.safetensors             the same tensors in one file\n"
		     "Every epoch is a permutation of all records fixed by (seed, epoch):\n"
		     "two reads of a path always give the same bytes. Any epoch-K can be\n"
		     "looked up by name, listed or not.\n"
		     "\n"
		     "numpy:\n"
		     "  import numpy as np\n"
		     "  x = np.load('%s/epoch-0000/batch-000000/%s', mmap_mode='r')\n"
		     "\n"
		     "PyTorch:\n"
		     "  import glob, numpy as np, torch\n"
		     "  files = sorted(glob.glob('%s/epoch-0000/batch-*/%s'))\n"
		     "  ds = [torch.from_numpy(np.load(f)) for f in files]\n"
		     "  # or a DataLoader over the paths: each item np.load(path)\n"
		     "\n"
		     "The whole epoch as one array (all/): row i*B+j is row j of batch i; a read\n"
		     "decodes only the rows it covers, so read it with any batch size:\n"
		     "  x = np.load('%s/epoch-0000/all/%s', mmap_mode='r')\n"
		     "  rows = np.array(x[1000:1100])\n"
		     "\n"
		     "PyTorch DataLoader over all/, batches of 100 rows:\n"
		     "  import numpy as np, torch\n"
		     "  class Rows(torch.utils.data.Dataset):\n"
		     "      def __init__(self, path, bs):\n"
		     "          self.a, self.bs = np.load(path, mmap_mode='r'), bs\n"
		     "      def __len__(self):\n"
		     "          return (len(self.a) + self.bs - 1) // self.bs\n"
		     "      def __getitem__(self, i):\n"
		     "          return torch.from_numpy(np.array(self.a[i * self.bs:(i + 1) * "
		     "self.bs]))\n"
		     "  dl = torch.utils.data.DataLoader(Rows('%s/epoch-0000/all/%s', 100),\n"
		     "                                   batch_size=None, num_workers=2)\n"
		     "\n"
		     "JAX:\n"
		     "  import numpy as np, jax.numpy as jnp\n"
		     "  x = jnp.asarray(np.load('%s/epoch-0000/batch-000000/%s'))\n"
		     "\n"
		     "safetensors (no library needed):\n"
		     "  import json, struct, numpy as np\n"
		     "  b = open('%s/epoch-0000/batch-000000.safetensors', 'rb').read()\n"
		     "  n = struct.unpack('<Q', b[:8])[0]; hdr = json.loads(b[8:8 + n])\n"
		     "\n"
		     "Unmount: fusermount3 -u %s\n",
		     BFS_VERSION, o->source, opts, (unsigned long long)records,
		     (unsigned long long)bfs_batcher_nbatches(b), (unsigned long long)o->batch_size,
		     root, first_npy, root, first_npy, root, first_npy, root, first_npy, root,
		     first_npy, root, mnt) < 0)
		s = NULL;
	free(rank0);
	return s;
}

/* README.txt under on_corrupt=fail: exactly what of all/ a corrupt record
 * fails. Takes and returns ownership (NULL stays NULL). */
static char *add_corrupt_note(char *readme, const struct bfs_options *o,
			      const struct bfs_batcher *b)
{
	unsigned long long n = (unsigned long long)bfs_batcher_chunk_rows(b);
	char *s = NULL;

	if (!readme || o->on_corrupt == BFS_ON_CORRUPT_SKIP)
		return readme;
	if (asprintf(&s,
		     "%s\n"
		     "A corrupt record (on_corrupt=fail) fails its batch, and the same rows of\n"
		     "all/: rows i*B to i*B+B-1 for batch i in every file of fixed-size rows,\n"
		     "and in ragged ones (.values, .row_splits, .value_splits) its chunk, the\n"
		     "%llu rows decoded with it (rows C*%llu to C*%llu+%llu for chunk C); in\n"
		     "all.safetensors the same. A read fails when a 4 KiB page it touches holds\n"
		     "a byte of those rows (the kernel reads whole pages), so np.load of a file\n"
		     "whose first page holds some fails too. Every other byte reads.\n",
		     readme, n, n, n, n - 1) < 0)
		s = NULL;
	free(readme);
	return s;
}

/* Tensors in a batch from which README.txt points wide readers at the
 * .safetensors files. */
#define WIDE_TENSORS 32

/* README.txt of a schema with many tensors: say how to read them. Takes
 * and returns ownership (NULL stays NULL). */
static char *add_wide_note(char *readme, size_t ntensors, const char *mnt)
{
	char *s = NULL;

	if (!readme || ntensors < WIDE_TENSORS)
		return readme;
	if (asprintf(&s,
		     "%s\n"
		     "Many features (%zu tensors per batch): read the .safetensors files,\n"
		     "  %s/epoch-0000/batch-000000.safetensors   (one batch)\n"
		     "  %s/epoch-0000/all.safetensors            (the whole epoch)\n"
		     "or slices of all/, not every batch's .npy files one by one. A\n"
		     ".safetensors file holds all %zu tensors of a batch in one file: one\n"
		     "open and a few large reads. The .npy files cost %zu lookups, opens and\n"
		     "small reads per batch, each a round trip through the kernel to the\n"
		     "daemon, and with many narrow features those round trips, not decoding,\n"
		     "take the time.\n",
		     readme, ntensors, mnt, mnt, ntensors, ntensors) < 0)
		s = NULL;
	free(readme);
	return s;
}

/* README.txt's lines on images: how each JPEG/PNG feature is served, and
 * the image= option that decodes one that is not decoded yet. */
static char *image_notes(const struct bfs_schema *s)
{
	char *out = strdup(""), *t;

	for (size_t i = 0; out && i < s->nfeatures; i++) {
		const struct bfs_feature_spec *f = &s->features[i];
		int n = 0;

		if (f->image)
			n = asprintf(&t,
				     "%s  %s: decoded from JPEG/PNG to uint8 [B, %lld, %lld, %lld] "
				     "(resize %s, filter %s)\n",
				     out, f->name, (long long)f->shape[0], (long long)f->shape[1],
				     (long long)f->shape[2], bfs_resize_name(f->resize),
				     bfs_filter_name(f->filter));
		else if (f->content != BFS_IMAGE_UNKNOWN)
			n = asprintf(
				&t,
				"%s  %s: %s images up to %lldx%lld (width x height), served as "
				"bytes;\n    decode them into uint8 [B, 224, 224, 3] with "
				"-o image=%s:224x224\n",
				out, f->name, bfs_image_fmt_name(f->content),
				(long long)f->content_w, (long long)f->content_h, f->name);
		else
			continue;
		free(out);
		out = n < 0 ? NULL : t;
	}
	if (out && *out) {
		if (asprintf(&t, "\nImages:\n%s", out) < 0)
			t = NULL;
		free(out);
		out = t;
	}
	return out;
}

/* README.txt's lines on bytes feature lists: each step's value is
 * zero-padded in NAME.npy, its length is in NAME.value_lengths.npy.
 * Takes and returns ownership (NULL stays NULL). */
static char *add_list_notes(char *readme, const struct bfs_schema *s, const struct bfs_options *o,
			    const char *mnt)
{
	const struct bfs_feature_spec *first = NULL;
	char *t;
	int n;

	for (size_t i = 0; readme && i < s->nlists; i++) {
		const struct bfs_feature_spec *f = &s->lists[i];
		char vals[32] = ""; /* ", max_values" when a step holds several */

		if (f->kind != BFS_KIND_BYTES)
			continue;
		if (f->ndim == 2)
			snprintf(vals, sizeof(vals), ", %lld", (long long)f->shape[0]);
		n = asprintf(
			&t,
			"%s%s  feature_lists/%s.npy: %s [B, %lld%s, %lld], each value "
			"zero-padded;\n    feature_lists/%s.value_lengths.npy: int32 [B, "
			"%lld%s], its length in bytes\n",
			readme,
			first ? "" : "\nBytes in feature lists (a value may end in zero bytes):\n",
			f->name, bfs_dtype_name(f->dtype == BFS_DT_INVALID ? BFS_DT_U8 : f->dtype),
			(long long)f->max_steps, vals, (long long)f->shape[f->ndim - 1], f->name,
			(long long)f->max_steps, vals);
		free(readme);
		readme = n < 0 ? NULL : t;
		if (!first)
			first = f;
	}
	if (!readme || !first)
		return readme;
	n = asprintf(&t,
		     "%s  d = '%s%s/epoch-0000/batch-000000/feature_lists/'\n"
		     "  x, n = np.load(d + '%s.npy'), np.load(d + '%s.value_lengths.npy')\n"
		     "  value = bytes(x[0, 0%s, :n[0, 0%s]])   # record 0, step 0%s\n",
		     readme, mnt, o->all_ranks ? "/rank-0000" : "", first->name, first->name,
		     first->ndim == 2 ? ", 0" : "", first->ndim == 2 ? ", 0" : "",
		     first->ndim == 2 ? ", value 0" : "");
	free(readme);
	return n < 0 ? NULL : t;
}

/* ---- TFDS dataset folders (docs/contract.md: split=) */

static bool file_exists(const char *dir, const char *name)
{
	char p[PATH_MAX];
	struct stat st;

	return (size_t)snprintf(p, sizeof(p), "%s/%s", dir, name) < sizeof(p) &&
	       stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static bool is_tfds_dir(const char *dir)
{
	struct stat st;

	return stat(dir, &st) == 0 && S_ISDIR(st.st_mode) &&
	       file_exists(dir, "dataset_info.json") && file_exists(dir, "features.json");
}

/* The splits of a TFDS folder, from its shard names NAME-SPLIT.tfrecord-*:
 * "test, train" (malloc'd, sorted, each once). */
static char *tfds_splits(const char *dir)
{
	char **names = NULL, *out = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	DIR *d = opendir(dir);

	if (!d)
		return NULL;
	while ((de = readdir(d)) != NULL) {
		const char *t = strstr(de->d_name, ".tfrecord"), *dash = NULL;
		if (!t || de->d_name[0] == '.')
			continue;
		for (const char *q = de->d_name; q < t; q++)
			if (*q == '-')
				dash = q;
		if (!dash || dash + 1 == t)
			continue;
		char *split = strndup(dash + 1, (size_t)(t - dash - 1));
		bool dup = false;
		for (size_t i = 0; split && i < n; i++)
			dup = dup || strcmp(names[i], split) == 0;
		if (!split || dup) {
			free(split);
			continue;
		}
		if (n == cap) {
			char **nn = realloc(names, (cap = cap ? cap * 2 : 8) * sizeof(*nn));
			if (!nn) {
				free(split);
				break;
			}
			names = nn;
		}
		names[n++] = split;
	}
	closedir(d);
	for (size_t i = 0; i < n; i++) /* sort: few names */
		for (size_t j = i + 1; j < n; j++)
			if (strcmp(names[j], names[i]) < 0) {
				char *t = names[i];
				names[i] = names[j];
				names[j] = t;
			}
	out = strdup(n ? "" : "none");
	for (size_t i = 0; out && i < n; i++) {
		char *t = NULL;
		if (asprintf(&t, "%s%s%s", out, i ? ", " : "", names[i]) < 0)
			t = NULL;
		free(out);
		out = t;
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return out;
}

static bool split_listed(const char *list, const char *split)
{
	size_t n = strlen(split);

	for (const char *p = list; (p = strstr(p, split)) != NULL; p += n)
		if ((p == list || p[-1] == ' ') && (p[n] == ',' || p[n] == '\0'))
			return true;
	return false;
}

static char *labels_file(void *ctx, const char *feature)
{
	char p[PATH_MAX];
	size_t len;

	if ((size_t)snprintf(p, sizeof(p), "%s/%s.labels.txt", (const char *)ctx, feature) >=
	    sizeof(p))
		return NULL;
	return read_file(p, &len);
}

/* README.txt's line on the files of a directory SOURCE that were passed over. */
static char *passed_over_note(const char *source, const char *split, const struct bfs_dataset *ds)
{
	char **names = NULL, *out = NULL, *t;
	size_t n = 0;

	if (split &&
	    asprintf(&out, "\nTFDS dataset folder: split '%s' (its *-%s.tfrecord-* shards)\n",
		     split, split) < 0)
		return NULL;
	if (bfs_dataset_objsrc(ds)) { /* a bucket: the objects its listing passed over */
		char *const *passed;
		char line[600];

		struct bfs_cred_keeper *k = bfs_objsrc_keeper(bfs_dataset_objsrc(ds));
		struct bfs_cred_stats cs = { 0 };

		if (k)
			bfs_cred_keeper_stats(k, &cs);
		bfs_objsrc_describe(bfs_dataset_objsrc(ds), line, sizeof(line));
		if (asprintf(&t, "%s\nObject store: %s\n%s", out ? out : "", line,
			     cs.expires ? "(as at mount: the credentials are refreshed ahead of "
					  "expiry; stats.json and `batchfs stats` show their "
					  "current expiry and refresh count)\n"
					: "") < 0)
			t = NULL;
		free(out);
		out = t;
		bfs_dataset_passed(ds, &passed, &n);
		if (!out || n == 0)
			return out;
		if (asprintf(&t, "%s\nPassed over in %s (not shards):\n", out, source) < 0)
			t = NULL;
		free(out);
		out = t;
		for (size_t i = 0; out && i < n; i++) {
			if (asprintf(&t, "%s  %s\n", out, passed[i]) < 0)
				t = NULL;
			free(out);
			out = t;
		}
		return out;
	}
	if (bfs_source_passed_over(&names, &n, source) != 0 || n == 0) {
		bfs_source_free(names, n);
		return out;
	}
	if (asprintf(&t, "%s\nPassed over in %s (not shards):\n", out ? out : "", source) < 0)
		t = NULL;
	free(out);
	out = t;
	for (size_t i = 0; out && i < n; i++) {
		if (asprintf(&t, "%s  %s\n", out, names[i]) < 0)
			t = NULL;
		free(out);
		out = t;
	}
	bfs_source_free(names, n);
	return out;
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

/* readahead=auto: 64 MiB; under shuffle=block, two windows of blocks (the
 * one being read and the next, fetched meanwhile), within a quarter of
 * the machine's memory. */
static uint64_t auto_readahead(const struct bfs_options *o)
{
	uint64_t ra = READAHEAD_MIN, two;
	long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);

	if (o->shuffle && o->block && !__builtin_mul_overflow(o->window, o->block_size, &two) &&
	    !__builtin_mul_overflow(two, (uint64_t)2, &two) && two + (16u << 20) > ra)
		ra = two + (16u << 20);
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

static int do_mount(struct bfs_options *o, int fargc, char **fargv)
{
	struct bfs_dataset_opts dopt = { 0 };
	struct bfs_s3_options s3opt = {
		.endpoint = o->endpoint,
		.region = o->region,
		.no_sign_request = o->no_sign_request,
	};
	struct open_progress progress = { .bar = { .tty = o->foreground && isatty(2) } };
	struct bfs_dataset *ds = NULL;
	struct bfs_mount_mix *mm = NULL; /* SOURCE a mixture file; ds is its union */
	struct bfs_schema *user = NULL, *schema = NULL;
	struct bfs_batcher *b = NULL;
	struct bfs_batcher **ranks = NULL; /* world=W without rank: [W], [0] = b */
	struct bfs_fs *fs = NULL;
	char *schema_json = NULL, *readme = NULL, *opts = NULL, *text = NULL, *ready = NULL;
	char *mixed = NULL; /* bfs_check_mixed's line */
	bool *was_image = NULL; /* per feature: an image before the image= options */
	char mnt[PATH_MAX];
	char first_npy[512] = "FEATURE.npy";
	char tfds_glob[PATH_MAX + 64];
	const char *source = o->source;
	const char **shard_names = NULL;
	struct stat st;
	size_t len;
	int ret = 1, rc, mnt_fd = -1;

	if (o->watch_fd >= 0) {
		/* the starter's pipe: its end of file (the starter gone, however
		 * it ended) stops us, from now on (an index build can be long) */
		if (fstat(o->watch_fd, &st) != 0 ||
		    !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))) {
			fprintf(stderr,
				"batchfs: option 'watch_fd=%d': not an open pipe or socket\n",
				o->watch_fd);
			return 1;
		}
		(void)fcntl(o->watch_fd, F_SETFD, FD_CLOEXEC);
		if (bfs_lifecycle_watch(o->watch_fd) != 0) {
			fprintf(stderr, "batchfs: could not start the watch_fd thread\n");
			return 1;
		}
	}
	/* locked while it mounts and is mounted, see checks.h and lifecycle.h */
	mnt_fd = bfs_mountpoint_claim(o->mountpoint, mnt);
	if (mnt_fd < 0)
		return 1;
	if (bfs_fs_check_args(fargc, fargv) != 0)
		goto out;
	/* before any thread: batch buffers and the heap (cache.h) */
	bfs_cache_malloc_setup();
	if (o->schema_file) {
		text = read_file(o->schema_file, &len);
		if (!text) {
			fprintf(stderr, "batchfs: option 'schema=%s': cannot read the file\n",
				o->schema_file);
			goto out;
		}
		rc = bfs_schema_from_json(&user, text, len);
		free(text);
		if (rc) {
			fprintf(stderr, "batchfs: %s: %s\n", o->schema_file, bfs_err_msg());
			goto out;
		}
	}
	if (is_tfds_dir(o->source)) {
		char *splits = tfds_splits(o->source);
		if (!o->split || !splits || !split_listed(splits, o->split)) {
			if (o->split)
				fprintf(stderr,
					"batchfs: option 'split=%s': %s has no such split (splits: "
					"%s)\n",
					o->split, o->source, splits ? splits : "none");
			else
				fprintf(stderr,
					"batchfs: %s: a TFDS dataset folder needs -o split=NAME "
					"(splits: %s)\n",
					o->source, splits ? splits : "none");
			free(splits);
			goto out;
		}
		free(splits);
		if ((size_t)snprintf(tfds_glob, sizeof(tfds_glob), "%s/*-%s.tfrecord*", o->source,
				     o->split) >= sizeof(tfds_glob)) {
			fprintf(stderr, "batchfs: %s: path too long\n", o->source);
			goto out;
		}
		source = tfds_glob;
	} else if (o->split) {
		fprintf(stderr,
			"batchfs: option 'split=%s': %s is not a TFDS dataset folder (it needs "
			"dataset_info.json and features.json)\n",
			o->split, o->source);
		goto out;
	}
	dopt.comp = o->compression;
	dopt.follow_symlinks = o->follow_symlinks;
	dopt.s3 = &s3opt;
	dopt.s3_conns = o->io_depth ? o->io_depth : IO_DEPTH_OBJECTS;
	dopt.index_dir = o->index_dir;
	dopt.jobs = o->threads;
	dopt.infer = user == NULL;
	dopt.on_bad = note_bad;
	dopt.on_note = bfs_tool_note;
	dopt.keep_cut = o->on_corrupt == BFS_ON_CORRUPT_SKIP; /* reported below */
	dopt.shadow_size = o->shadow ? o->shadow_size : 0;
	/* the progress bar of a first index build, in the foreground at a terminal */
	dopt.progress = bfs_tool_progress;
	dopt.progress_ctx = &progress;
	if (bfs_mount_mix_is(o->source)) {
		rc = bfs_mount_mix_open(&mm, o->source, o, &dopt, user != NULL);
		if (rc == 0)
			ds = mm->ds;
	} else {
		rc = bfs_dataset_open(&ds, source, &dopt);
	}
	if (!rc && progress.bad)
		fputs(progress.bad, stderr);
	free(progress.bad);
	progress.bad = NULL;
	if (rc && bfs_mount_mix_is(o->source))
		goto out; /* bfs_mount_mix_open said why */
	if (rc) {
		fprintf(stderr, "batchfs: %s\n", bfs_err_msg());
		goto out;
	}
	if (user) {
		schema = user;
		user = NULL;
	} else {
		rc = bfs_schema_clone(&schema, mm ? mm->schema : bfs_dataset_schema(ds));
		if (rc) {
			fprintf(stderr, "batchfs: %s\n", bfs_err_msg());
			goto out;
		}
		if (source == tfds_glob) { /* the folder's features.json refines it */
			char fj[PATH_MAX + 32];
			snprintf(fj, sizeof(fj), "%s/features.json", o->source);
			text = read_file(fj, &len);
			rc = text ? bfs_schema_apply_tfds(schema, text, len, labels_file, o->source)
				  : bfs_err_set(-EIO, "cannot read it");
			free(text);
			text = NULL;
			if (rc) {
				fprintf(stderr, "batchfs: %s: %s\n", fj, bfs_err_msg());
				goto out;
			}
		}
	}
	if (o->features) {
		char *names = bfs_feature_names(schema, false);

		rc = bfs_schema_select(schema, o->features);
		if (rc)
			print_option_error("features", o->features, bfs_err_msg(),
					   rc == -ENOENT ? "features" : NULL, names);
		free(names);
		if (rc)
			goto out;
	}
	was_image = calloc(schema->nfeatures + 1, sizeof(*was_image));
	if (!was_image)
		goto out;
	for (size_t i = 0; i < schema->nfeatures; i++)
		was_image[i] = schema->features[i].image;
	for (unsigned i = 0; i < o->nimage; i++) {
		char *names = bfs_feature_names(schema, true);

		rc = bfs_schema_set_image(schema, o->image[i]);
		if (rc)
			print_option_error("image", o->image[i], bfs_err_msg(),
					   rc == -ENOENT ? "bytes features" : NULL, names);
		free(names);
		if (rc)
			goto out;
	}
	if (o->nimage && bfs_check_image_options(ds, schema, was_image, o->image, o->nimage) != 0)
		goto out;
	if (mm && bfs_mount_mix_add_provenance(schema) != 0)
		goto out;
	/* a folder of several datasets: one line now, and in README.txt */
	if (bfs_dataset_mixed(ds) &&
	    asprintf(&mixed,
		     "%s: %s: several datasets mounted as one, each record padded to all their "
		     "features? Mount each dataset's folder on its own, or pick features with -o "
		     "features=",
		     o->source, bfs_dataset_mixed(ds)) < 0)
		mixed = NULL;
	if (mixed)
		fprintf(stderr, "batchfs: %s\n", mixed);
	if (schema->nfeatures + schema->nlists == 0) {
		fprintf(stderr,
			"batchfs: %s: no features to serve (the records hold no typed "
			"feature)\n",
			o->source);
		goto out;
	}
	struct bfs_batcher_opts bo = {
		.batch_size = o->batch_size,
		.seed = o->seed,
		.shuffle = o->shuffle,
		.block = o->block,
		.block_size = o->block_size,
		.window = o->window,
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
		.mix = mm ? mm->mix : NULL,
	};
	rc = bfs_batcher_new(&b, ds, schema, &bo);
	if (rc) {
		if (rc == -EFBIG)
			fprintf(stderr,
				"batchfs: option 'batch_size=%llu': %s (raise cache_size)\n",
				(unsigned long long)o->batch_size, bfs_err_msg());
		else
			fprintf(stderr, "batchfs: %s\n", bfs_err_msg());
		goto out;
	}
	if (o->all_ranks) {
		ranks = calloc(o->world, sizeof(*ranks));
		if (!ranks)
			goto out;
		ranks[0] = b;
		for (uint64_t r = 1; r < o->world; r++) {
			if (bfs_batcher_new_rank(&ranks[r], b, r) != 0) {
				fprintf(stderr, "batchfs: %s\n", bfs_err_msg());
				goto out;
			}
		}
	}
	shard_names = calloc(bfs_dataset_nshards(ds) + 1, sizeof(*shard_names));
	if (!shard_names)
		goto out;
	for (size_t i = 0; i < bfs_dataset_nshards(ds); i++)
		shard_names[i] = bfs_shard_path(bfs_dataset_shard(ds, i));
	struct bfs_schema_facts facts = {
		.records = bfs_dataset_nrecords(ds),
		.batch_size = o->batch_size,
		.batches_per_epoch = bfs_batcher_nbatches(b),
		.seed = o->seed,
		.shuffle = !o->shuffle ? "none"
			   : o->block  ? "block"
				       : "global",
		.rank = o->rank,
		.world = o->world,
		.no_rank = o->all_ranks, /* each rank folder is one rank: the top is none */
		.nshards = bfs_dataset_nshards(ds),
		.shards = shard_names,
		.mixture = mm ? &mm->facts : NULL,
	};
	if (bfs_schema_to_json(&schema_json, schema, &facts) != 0) {
		fprintf(stderr, "batchfs: %s\n", bfs_err_msg());
		goto out;
	}
	if (bfs_batcher_plan(b)->ntensors)
		snprintf(first_npy, sizeof(first_npy), "%s.npy", bfs_batcher_plan(b)->t[0].name);
	opts = bfs_options_describe(o);
	readme = make_readme(o, opts ? opts : "", mnt, b, bfs_dataset_nrecords(ds), first_npy);
	readme = add_ranks_note(readme, o, mnt);
	readme = add_wide_note(readme, bfs_batcher_plan(b)->ntensors, mnt);
	readme = add_corrupt_note(readme, o, b);
	readme = add_list_notes(readme, schema, o, mnt);
	if (readme) {
		char *notes = image_notes(schema), *full = NULL;
		char *passed =
			mm ? bfs_mount_mix_readme(mm, mnt)
			   : passed_over_note(o->source, source == tfds_glob ? o->split : NULL, ds);
		if (asprintf(&full, "%s%s%s%s%s%s", readme, notes ? notes : "",
			     passed ? passed : "", mixed ? "\nWarning: " : "", mixed ? mixed : "",
			     mixed ? "\n" : "") >= 0) {
			free(readme);
			readme = full;
		}
		free(notes);
		free(passed);
	}
	/* the I/O stage: on a network or FUSE filesystem, or when asked for */
	unsigned io_depth = o->io_depth		     ? o->io_depth
			    : bfs_dataset_objsrc(ds) ? IO_DEPTH_OBJECTS
			    : bfs_dataset_remote(ds) ? IO_DEPTH_REMOTE
						     : 0;
	uint64_t readahead = o->readahead ? o->readahead : auto_readahead(o);
	/* disk_cache: the bytes the stage fetches, so nothing on a local
	 * disk; one that cannot be used is one line, and the mount goes on */
	const char *disk_cache = o->disk_cache;
	if (disk_cache && !io_depth) {
		fprintf(stderr,
			"batchfs: option 'disk_cache=%s': %s is on a local disk; not used\n",
			disk_cache, o->source);
		disk_cache = NULL;
	} else if (disk_cache && bfs_diskcache_check(disk_cache) != 0) {
		fprintf(stderr, "batchfs: %s; mounted without it\n", bfs_err_msg());
		disk_cache = NULL;
	}
	if (asprintf(&ready, "batchfs: mounted %s at %s (%llu records, %llu batches per epoch%s)",
		     o->source, mnt, (unsigned long long)bfs_dataset_nrecords(ds),
		     (unsigned long long)bfs_batcher_nbatches(b),
		     o->all_ranks ? " in each rank folder" : "") < 0)
		ready = NULL;
	struct bfs_fs_config cfg = {
		.ds = ds,
		.batcher = b,
		.epochs = o->epochs,
		.cache_size = o->cache_size,
		.threads = o->threads,
		.prefetch = o->prefetch,
		.readme = readme,
		.schema_json = schema_json,
		.options_text = opts,
		/* a hung source may hold a thread per reader waiting on it:
		 * enough are left for the other files */
		.fuse_threads = io_depth ? 64 : 16,
		.io_depth = io_depth,
		.readahead = readahead,
		.io_all = o->io_depth != 0,
		.io_backend = o->io_backend,
		.disk_cache = disk_cache,
		.disk_cache_size = o->disk_cache_size,
		.cuda_device = o->cuda_device,
		.cuda_pool = o->cuda_pool,
		.ranks = (const struct bfs_batcher *const *)ranks,
		.nranks = ranks ? o->world : 0,
		.ready = ready,
		.max_read = o->max_read,
		.watch = o->watch_fd >= 0,
		.watch_fd = o->watch_fd,
		.mount_lock = true,
		.mount_lock_fd = mnt_fd,
	};
	rc = bfs_fs_new(&fs, &cfg);
	if (rc) {
		fprintf(stderr, "batchfs: %s\n", bfs_err_msg());
		goto out;
	}
	/* the lock kept other batchfs away; anything else mounted meanwhile? */
	if (bfs_mountpoint_taken(o->mountpoint, mnt))
		goto out;
	/* shards cut short (on_corrupt=skip): a line each in errors.txt */
	for (size_t i = 0; i < bfs_dataset_nshards(ds); i++)
		if (bfs_dataset_cut(ds, i))
			bfs_fs_report(fs, bfs_dataset_cut(ds, i), false);
	/* the absolute path: libfuse chdirs to / before it unmounts */
	ret = bfs_fs_run(fs, fargc, fargv, mnt, o->foreground);
out:
	bfs_fs_free(fs);
	for (uint64_t r = 1; ranks && r < o->world; r++)
		bfs_batcher_free(ranks[r]);
	free(ranks);
	bfs_batcher_free(b);
	bfs_schema_free(schema);
	bfs_schema_free(user);
	if (mm)
		bfs_mount_mix_close(mm); /* ds is its union */
	else
		bfs_dataset_close(ds);
	free(shard_names);
	free(schema_json);
	free(readme);
	free(opts);
	free(ready);
	free(mixed);
	free(was_image);
	if (mnt_fd >= 0)
		close(mnt_fd);
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
