/* SPDX-License-Identifier: Apache-2.0 */
/*
 * readme.c — a mount's README.txt (readme.h): what is mounted, the tree,
 * snippets that read it, and the notes this mount needs (rank folders,
 * wide schemas, corrupt records, bytes in feature lists, images, the
 * files passed over, a bucket, a mixture, a folder of several datasets,
 * the disk cache).
 */
#include "readme.h"

#include "cred.h"
#include "objsrc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#ifndef BFS_VERSION
#define BFS_VERSION "0.0.0"
#endif

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
		     "  import os\n"
		     "  root = '%s/rank-%%04d' %% int(os.environ['RANK'])\n",
		     readme, (unsigned long long)o->world, (unsigned long long)(o->world - 1),
		     (unsigned long long)o->world, mnt, mnt) < 0)
		s = NULL;
	free(readme);
	return s;
}

static uint64_t gcd64(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t t = a % b;
		a = b;
		b = t;
	}
	return a;
}

/* shuffle=block with partitions: where each batch comes from, what an
 * epoch leaves out, and what each rank reads (one line when world does not
 * divide P). Frees `readme`; NULL on failure. */
static char *add_partitions_note(char *readme, const struct bfs_options *o,
				 const struct bfs_batcher *b, const struct bfs_dataset *ds)
{
	const struct bfs_blocks *bl = bfs_batcher_blocks(b);
	unsigned long long p = bl ? (unsigned long long)bfs_blocks_nparts(bl) : 1, w = o->world;
	unsigned long long g = (unsigned long long)gcd64(w, p), n = 0;
	char *s = NULL, *ranks = NULL;
	int r;

	if (!readme || p == 1)
		return readme;
	n = (unsigned long long)bfs_blocks_npieces(bl);
	if (w > 1 && g == w)
		r = asprintf(
			&ranks,
			"With world=%llu (dividing %llu) each rank reads %llu of the partitions, "
			"1/%llu of the\ndataset, the same ones every epoch: over a bucket it "
			"fetches only those.\n",
			w, p, p / w, w);
	else if (w > 1)
		r = asprintf(
			&ranks,
			"world=%llu does not divide partitions=%llu: each rank reads %llu of the "
			"%llu partitions, 1/%llu of the dataset (%llu times its share).\n",
			w, p, p / g, p, g, w / g);
	else
		r = asprintf(&ranks, "%s", "");
	if (r < 0)
		ranks = NULL;
	if (ranks &&
	    asprintf(&s,
		     "%s\n"
		     "Partitions (shuffle=block): %llu%s. Global batch g is batch g div %llu of\n"
		     "partition g mod %llu, each a block shuffle of its own blocks (%llu on\n"
		     "average), dealt once from the seed (docs/shuffle.md, 5.1). Each\n"
		     "epoch leaves out %llu records (fewer than %llu batches), others each epoch.\n"
		     "%s",
		     readme, p,
		     o->partitions ? "" : " (partitions=auto; give partitions=N to keep it)", p, p,
		     n / p,
		     (unsigned long long)(bfs_dataset_nrecords(ds) - bfs_blocks_epoch_len(bl)), p,
		     ranks) < 0)
		s = NULL;
	free(ranks);
	free(readme);
	return s;
}

static char *make_readme(const struct bfs_options *o, const char *opts, const char *mnt,
			 const struct bfs_batcher *b, uint64_t records, const char *first_npy)
{
	char *s = NULL, *rank0 = NULL, of[96] = "";
	const char *root = mnt; /* where the examples read: rank 0's folder with ranks */

	if (o->all_ranks) {
		if (asprintf(&rank0, "%s/rank-0000", mnt) < 0)
			return NULL;
		root = rank0;
	}
	/* a mixture's epoch is L records of its stream, not its sources' total */
	if (bfs_batcher_epoch_len(b) != records)
		snprintf(of, sizeof(of), " per epoch (the sources hold %llu)",
			 (unsigned long long)records);

	if (asprintf(&s,
		     "batchfs %s — TFRecord shards as ready batch files\n"
		     "\n"
		     "source:   %s\n"
		     "options:  %s\n"
		     "records:  %llu%s, %llu batches per epoch of up to %llu records\n"
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
		     "  import numpy as np\n"
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
		     BFS_VERSION, o->source, opts, (unsigned long long)bfs_batcher_epoch_len(b), of,
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

/* An augmented image feature's line: what crop= and flip= do to it and
 * where the boxes are ("" when it is not augmented). */
static void augment_note(char *dst, size_t cap, const struct bfs_feature_spec *f)
{
	const struct bfs_augment *a = &f->aug;
	char how[160];

	dst[0] = '\0';
	if (!bfs_augment_on(a))
		return;
	if (a->crop == BFS_CROP_RANDOM)
		snprintf(how, sizeof(how),
			 "crop=random: RandomResizedCrop, area %g-%g, aspect ratio %g-%g,\n    a "
			 "new "
			 "box each epoch",
			 a->scale[0], a->scale[1], a->ratio[0], a->ratio[1]);
	else if (a->crop == BFS_CROP_CENTER)
		snprintf(how, sizeof(how),
			 "crop=center: the shorter side resized to %u, the centre taken",
			 bfs_augment_resize(a, (uint32_t)f->shape[0], (uint32_t)f->shape[1]));
	else
		snprintf(how, sizeof(how), "crop=none");
	snprintf(
		dst, cap,
		"    %s; flip=%s\n    %s.crop.npy: int32 [B, 4], the box (x, y, w, h in the source "
		"image's pixels)\n    %s.flip.npy: uint8 [B], 1 where mirrored\n",
		how, a->flip ? "h" : "none", f->name, f->name);
}

/* README.txt's lines on images: how each JPEG/PNG feature is served, and
 * the image= option that decodes one that is not decoded yet. */
static char *image_notes(const struct bfs_schema *s)
{
	char *out = strdup(""), *t;

	for (size_t i = 0; out && i < s->nfeatures; i++) {
		const struct bfs_feature_spec *f = &s->features[i];
		char aug[1024];
		int n = 0;

		augment_note(aug, sizeof(aug), f);
		if (f->image)
			n = asprintf(&t,
				     "%s  %s: decoded from JPEG/PNG to uint8 [B, %lld, %lld, %lld] "
				     "(%s%s, filter %s)\n%s",
				     out, f->name, (long long)f->shape[0], (long long)f->shape[1],
				     (long long)f->shape[2], aug[0] ? "" : "resize ",
				     aug[0] ? "augmented" : bfs_resize_name(f->resize),
				     bfs_filter_name(f->filter), aug);
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

/* README.txt's line on the features present only as `Feature {}` (TFX's
 * missing value) in every record that has them: not served, their kind
 * unknown. Takes and returns ownership (NULL stays NULL). */
static char *add_untyped_note(char *readme, const struct bfs_schema *s)
{
	char *t;

	for (size_t i = 0; readme && i < s->nuntyped; i++) {
		if (asprintf(&t, "%s%s%s%s", readme,
			     i ? ", "
			       : "\nNot served: no record has a value for these features (each "
				 "is only\n`Feature {}`, so their kind is unknown): ",
			     s->untyped[i], i + 1 == s->nuntyped ? "\n" : "") < 0)
			t = NULL;
		free(readme);
		readme = t;
	}
	return readme;
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
		     "%s  import numpy as np\n"
		     "  d = '%s%s/epoch-0000/batch-000000/feature_lists/'\n"
		     "  x, n = np.load(d + '%s.npy'), np.load(d + '%s.value_lengths.npy')\n"
		     "  value = bytes(x[0, 0%s, :n[0, 0%s]])   # record 0, step 0%s\n",
		     readme, mnt, o->all_ranks ? "/rank-0000" : "", first->name, first->name,
		     first->ndim == 2 ? ", 0" : "", first->ndim == 2 ? ", 0" : "",
		     first->ndim == 2 ? ", value 0" : "");
	free(readme);
	return n < 0 ? NULL : t;
}

/* out (freed) followed by the n names passed over in source, one a line;
 * out itself when n is 0. NULL when out is, or out of memory. */
static char *add_passed(char *out, const char *source, char *const *names, size_t n)
{
	char *t;

	if (!out || n == 0)
		return out;
	if (asprintf(&t, "%s\nPassed over in %s (not shards):\n", out, source) < 0)
		t = NULL;
	free(out);
	out = t;
	for (size_t i = 0; out && i < n; i++) {
		if (asprintf(&t, "%s  %s\n", out, names[i]) < 0)
			t = NULL;
		free(out);
		out = t;
	}
	return out;
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
		return out ? add_passed(out, source, passed, n) : NULL;
	}
	if (bfs_source_passed_over(&names, &n, source) != 0 || n == 0) {
		bfs_source_free(names, n);
		return out;
	}
	out = add_passed(out ? out : strdup(""), source, names, n);
	bfs_source_free(names, n);
	return out;
}

/* README.txt's lines on the disk cache: where, how large, how to turn it
 * off. Takes and returns ownership (NULL stays NULL). */
static char *add_disk_cache_note(char *readme, const struct bfs_options *o, const char *dir)
{
	char bound[96], *out = NULL;
	struct statvfs vfs;

	if (!readme || !dir)
		return readme;
	if (o->disk_cache_size)
		snprintf(bound, sizeof(bound), "%.1f GB (disk_cache_size=)",
			 (double)o->disk_cache_size / 1e9);
	else if (statvfs(dir, &vfs) == 0)
		snprintf(bound, sizeof(bound),
			 "%.1f GB, 10%% of its file system (disk_cache_size=)",
			 (double)vfs.f_blocks * (double)vfs.f_frsize / 10 / 1e9);
	else
		snprintf(bound, sizeof(bound), "10%% of its file system (disk_cache_size=)");
	if (asprintf(&out,
		     "%s\n"
		     "Disk cache: %s\n"
		     "  keeps the bytes fetched from the source, in 1 MiB blocks checked by\n"
		     "  CRC-32C, for later epochs and mounts: at most %s, every\n"
		     "  mount's together. -o disk_cache=off turns it off, -o disk_cache=DIR\n"
		     "  puts it elsewhere; delete the folder to give the space back.\n",
		     readme, dir, bound) < 0)
		out = NULL;
	free(readme);
	return out;
}

char *bfs_readme_text(const struct bfs_readme_in *in)
{
	const struct bfs_options *o = in->o;
	const struct bfs_plan *plan = bfs_batcher_plan(in->b);
	char first_npy[512] = "FEATURE.npy";
	char *readme, *notes, *passed, *full = NULL;

	if (plan->ntensors)
		snprintf(first_npy, sizeof(first_npy), "%s.npy", plan->t[0].name);
	readme = make_readme(o, in->opts ? in->opts : "", in->mnt, in->b,
			     bfs_dataset_nrecords(in->ds), first_npy);
	readme = add_ranks_note(readme, o, in->mnt);
	readme = add_partitions_note(readme, o, in->b, in->ds);
	readme = add_wide_note(readme, plan->ntensors, in->mnt);
	readme = add_corrupt_note(readme, o, in->b);
	readme = add_list_notes(readme, in->schema, o, in->mnt);
	readme = add_disk_cache_note(readme, o, in->disk_cache);
	readme = add_untyped_note(readme, in->schema);
	if (!readme)
		return NULL;
	notes = image_notes(in->schema);
	passed = in->mm ? bfs_mount_mix_readme(in->mm, in->mnt)
			: passed_over_note(o->source, in->split, in->ds);
	if (asprintf(&full, "%s%s%s%s%s%s", readme, notes ? notes : "", passed ? passed : "",
		     in->mixed ? "\nWarning: " : "", in->mixed ? in->mixed : "",
		     in->mixed ? "\n" : "") >= 0) {
		free(readme);
		readme = full;
	}
	free(notes);
	free(passed);
	return readme;
}
